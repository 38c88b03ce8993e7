//! The report as Markdown ([`markdown`]): throughput per tenant, latency percentiles,
//! `limit-priority`'s phases, each table from the typed report ([`Report`]).
//!
//! Invariants: no empty rows; one table per kind of experiment. Cost: one pass over the
//! report.

use super::*;

/// A report's value as its JSON writes it: `250.0`, `1`, `null`.
fn js<T: serde::Serialize + ?Sized>(v: &T) -> String {
    // Cannot fail: numbers, strings and their options.
    serde_json::to_string(v).unwrap_or_default()
}

/// The report as Markdown: per-tenant throughput (and its series) for the throughput
/// experiments, percentiles idle and under load for the latency ones, and for
/// `limit-priority` the percentiles with the bulk application off and on beside its rates.
/// Numbers are written as `report.json` has them (`250.0`; `null` for none).
pub fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# testbed: {} at {} Mbit/s, {} s measured\n",
        r.experiment,
        r.rate_bps as f64 / 1e6,
        r.seconds
    );
    s += &tenant_rows(r);
    s += &latency_rows(r);
    s += &limit_priority_rows(r);
    s += &series_rows(r);
    s += &share_rows(r);
    s
}

/// The throughput experiments' results.
fn throughput(r: &Report) -> impl Iterator<Item = &ThroughputResult> {
    r.results.iter().filter_map(|m| match m {
        ModeResult::Throughput(t) => Some(&**t),
        _ => None,
    })
}

/// One row per scheduler and tenant: weight, flows, rate, its ideal share, the error.
fn tenant_rows(r: &Report) -> String {
    let mut rows = String::new();
    for m in throughput(r) {
        for t in &m.tenants {
            rows += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                m.scheduler,
                t.tenant,
                t.weight,
                t.flows,
                js(&t.mbps),
                js(&t.ideal_mbps),
                js(&t.rel_error),
                t.retransmits
            );
        }
    }
    if rows.is_empty() {
        return rows;
    }
    "\n| scheduler | tenant | weight | flows | Mbit/s | ideal | rel. error | retransmits |\n|---|---|---|---|---|---|---|---|\n".to_string() + &rows
}

/// Latency: one row per scheduler and phase, the columns the tool reported (the first
/// result's), and the bulk tenants' rate from weft's counters (weft only; HTB has none).
fn latency_rows(r: &Report) -> String {
    let lat: Vec<&LatencyResult> = r
        .results
        .iter()
        .filter_map(|m| match m {
            ModeResult::Latency(l) if l.latency_idle.figures().is_some() => Some(&**l),
            _ => None,
        })
        .collect();
    let Some(first) = lat.first() else {
        return String::new();
    };
    let keys: Vec<&str> = first
        .latency_idle
        .figures()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let mut s = format!(
        "\nTenant 1's {} (µs unless named), idle and under the other tenants' load:\n\n| scheduler | phase | {} | loaded/idle ({}) | bulk tenants' Mbit/s |\n|---|---|{}---|---|\n",
        first.app,
        keys.join(" | "),
        first.loaded_over_idle,
        "---|".repeat(keys.len())
    );
    for m in &lat {
        let bulk: f64 = m
            .weft_stats
            .iter()
            .flat_map(|st| &st.nodes)
            .filter(|n| n.leaf && n.name != "tenant1")
            .filter_map(|n| finite(n.rate_bps))
            .sum();
        for (phase, probe) in [("idle", &m.latency_idle), ("loaded", &m.latency_loaded)] {
            let figures = probe.figures().unwrap_or_default();
            let cells: Vec<String> = keys
                .iter()
                .map(|k| js(&figures.iter().find(|(n, _)| n == k).map(|&(_, x)| x)))
                .collect();
            let (ratio, rate) = if phase == "loaded" {
                (
                    js(&m.p99_loaded_over_idle),
                    if bulk > 0.0 {
                        format!("{:.1}", bulk / 1e6)
                    } else {
                        "–".into()
                    },
                )
            } else {
                (String::new(), String::new())
            };
            s += &format!(
                "| {} | {phase} | {} | {ratio} | {rate} |\n",
                m.scheduler,
                cells.join(" | ")
            );
        }
    }
    s
}

/// limit-priority: one row per scheduler and phase.
fn limit_priority_rows(r: &Report) -> String {
    let lp: Vec<&LimitPriorityResult> = r
        .results
        .iter()
        .filter_map(|m| match m {
            ModeResult::LimitPriority(l) => Some(&**l),
            _ => None,
        })
        .collect();
    let Some(first) = lp.first() else {
        return String::new();
    };
    let mut s = format!(
        "\nTenant 1's sockperf ping-pong (µs) and iperf3 (Mbit/s) to {} under a {} Mbit/s \
         limit (sockperf first under it), iperf3 off then on; rates at the wire (frames + \
         20 bytes) are taken at the receiver while sockperf's test ran:\n\n\
         | scheduler | phase | p50_us | p99_us | p99 on/off | iperf3 goodput | iperf3 at the wire / its share of the limit | destination at the wire | other processes' CPUs |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        first.limit.dst,
        js(&first.limit.limit_mbps)
    );
    for m in &lp {
        for (phase, p, cpu) in [
            ("iperf3 off", &m.latency_bulk_off, m.foreign_cpu.bulk_off),
            ("iperf3 on", &m.latency_bulk_on, m.foreign_cpu.bulk_on),
        ] {
            let on = phase == "iperf3 on";
            let cell = |v: String| if on { v } else { String::new() };
            let b = &m.bulk;
            s += &format!(
                "| {} | {phase} | {} | {} | {} | {} | {} | {} | {} |\n",
                m.scheduler,
                js(&p.p50_us),
                js(&p.p99_us),
                cell(js(&m.p99_on_over_off)),
                cell(js(&b.mbps)),
                cell(format!("{} / {}", js(&b.wire_mbps), js(&b.share_mbps))),
                cell(js(&m.limit.wire_mbps)),
                js(&cpu)
            );
        }
    }
    s
}

/// Each tenant's goodput per second (the series `throughput.svg` plots).
fn series_rows(r: &Report) -> String {
    let mut series = String::new();
    for m in throughput(r) {
        for t in &m.tenants {
            let v: Vec<String> = t.mbps_per_second.iter().map(js).collect();
            if !v.is_empty() {
                series += &format!("| {} | {} | {} |\n", m.scheduler, t.tenant, v.join(" "));
            }
        }
    }
    if series.is_empty() {
        return series;
    }
    "\nThroughput over time (Mbit/s per second, sender side; plot: throughput.svg):\n\n| scheduler | tenant | per second |\n|---|---|---|\n".to_string() + &series
}

/// One row per scheduler: Jain's index, the total, the largest error and the CPU shares
/// (a result of another kind, beside throughput ones, has none: `null`).
fn share_rows(r: &Report) -> String {
    if !throughput(r).any(|t| finite(t.total_mbps).is_some()) {
        return String::new();
    }
    let mut s = "\n| scheduler | Jain (weighted) | total Mbit/s | max rel. error | weft CPU % | system CPU % |\n|---|---|---|---|---|---|\n".to_string();
    for m in &r.results {
        let cells = match m {
            ModeResult::Throughput(t) => [
                js(&t.jain),
                js(&t.total_mbps),
                js(&t.max_rel_error),
                js(&t.weft_cpu_pct),
                js(&t.system_cpu_pct),
            ],
            _ => std::array::from_fn(|_| "null".to_string()),
        };
        s += &format!("| {} | {} |\n", m.scheduler(), cells.join(" | "));
    }
    s
}
