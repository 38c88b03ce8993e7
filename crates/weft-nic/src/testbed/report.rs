//! The report as Markdown ([`markdown`]): throughput per tenant, latency percentiles,
//! `limit-priority`'s phases.
//!
//! Invariants: no empty rows; one table per kind of experiment. Cost: one pass over the
//! report.

use super::*;

/// The report as Markdown: per-tenant throughput (and its series) for the throughput
/// experiments, percentiles idle and under load for the latency ones, and for
/// `limit-priority` the percentiles with the bulk application off and on beside its rates.
pub fn markdown(r: &Value) -> String {
    let results: Vec<&Value> = r["results"].as_array().into_iter().flatten().collect();
    let name = |m: &Value| m["scheduler"].as_str().unwrap_or("").to_string();
    let mut s = format!(
        "# testbed: {} at {} Mbit/s, {} s measured\n",
        r["experiment"].as_str().unwrap_or(""),
        r["rate_bps"].as_f64().unwrap_or(0.0) / 1e6,
        r["seconds"]
    );
    let mut rows = String::new();
    for m in &results {
        for t in m["tenants"].as_array().into_iter().flatten() {
            rows += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                name(m),
                t["tenant"],
                t["weight"],
                t["flows"],
                t["mbps"],
                t["ideal_mbps"],
                t["rel_error"],
                t["retransmits"]
            );
        }
    }
    if !rows.is_empty() {
        s += "\n| scheduler | tenant | weight | flows | Mbit/s | ideal | rel. error | retransmits |\n|---|---|---|---|---|---|---|---|\n";
        s += &rows;
    }
    // Latency: one row per scheduler and phase, the columns the tool reported.
    let lat: Vec<&&Value> = results
        .iter()
        .filter(|m| m["latency_idle"].is_object())
        .collect();
    if let Some(first) = lat.first() {
        let keys: Vec<String> = first["latency_idle"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        s += &format!(
            "\nTenant 1's {} (µs unless named), idle and under the other tenants' load:\n\n| scheduler | phase | {} | loaded/idle ({}) | bulk tenants' Mbit/s |\n|---|---|{}---|---|\n",
            first["app"].as_str().unwrap_or(""),
            keys.join(" | "),
            first["loaded_over_idle"].as_str().unwrap_or(""),
            "---|".repeat(keys.len())
        );
        for m in &lat {
            // The bulk tenants' rate from weft's counters (weft only; HTB has none).
            let bulk: f64 = m["weft_stats"]["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["leaf"] == true && n["name"] != "tenant1")
                .filter_map(|n| n["rate_bps"].as_f64())
                .sum();
            for (phase, key) in [("idle", "latency_idle"), ("loaded", "latency_loaded")] {
                let cells: Vec<String> = keys.iter().map(|k| m[key][k].to_string()).collect();
                let (ratio, rate) = if phase == "loaded" {
                    (
                        m["p99_loaded_over_idle"].to_string(),
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
                    name(m),
                    cells.join(" | ")
                );
            }
        }
    }
    // limit-priority: one row per scheduler and phase.
    let lp: Vec<&&Value> = results
        .iter()
        .filter(|m| m["latency_bulk_off"].is_object())
        .collect();
    if let Some(first) = lp.first() {
        s += &format!(
            "\nTenant 1's sockperf ping-pong (µs) and iperf3 (Mbit/s) to {} under a {} Mbit/s \
             limit (sockperf first under it), iperf3 off then on; rates at the wire (frames + \
             20 bytes) are taken at the receiver while sockperf's test ran:\n\n\
             | scheduler | phase | p50_us | p99_us | p99 on/off | iperf3 goodput | iperf3 at the wire / its share of the limit | destination at the wire | other processes' CPUs |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            first["limit"]["dst"].as_str().unwrap_or(""),
            first["limit"]["limit_mbps"]
        );
        for m in &lp {
            for (phase, key, cpu) in [
                ("iperf3 off", "latency_bulk_off", "bulk_off"),
                ("iperf3 on", "latency_bulk_on", "bulk_on"),
            ] {
                let on = phase == "iperf3 on";
                let cell = |v: String| if on { v } else { String::new() };
                let b = &m["bulk"];
                s += &format!(
                    "| {} | {phase} | {} | {} | {} | {} | {} | {} | {} |\n",
                    name(m),
                    m[key]["p50_us"],
                    m[key]["p99_us"],
                    cell(m["p99_on_over_off"].to_string()),
                    cell(b["mbps"].to_string()),
                    cell(format!("{} / {}", b["wire_mbps"], b["share_mbps"])),
                    cell(m["limit"]["wire_mbps"].to_string()),
                    m["foreign_cpu"][cpu]
                );
            }
        }
    }
    let mut series = String::new();
    for m in &results {
        for t in m["tenants"].as_array().into_iter().flatten() {
            let v: Vec<String> = t["mbps_per_second"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| format!("{x}"))
                .collect();
            if !v.is_empty() {
                series += &format!("| {} | {} | {} |\n", name(m), t["tenant"], v.join(" "));
            }
        }
    }
    if !series.is_empty() {
        s += "\nThroughput over time (Mbit/s per second, sender side; plot: throughput.svg):\n\n| scheduler | tenant | per second |\n|---|---|---|\n";
        s += &series;
    }
    if results.iter().any(|m| !m["total_mbps"].is_null()) {
        s += "\n| scheduler | Jain (weighted) | total Mbit/s | max rel. error | weft CPU % | system CPU % |\n|---|---|---|---|---|---|\n";
        for m in &results {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                name(m),
                m["jain"],
                m["total_mbps"],
                m["max_rel_error"],
                m["weft_cpu_pct"],
                m["system_cpu_pct"]
            );
        }
    }
    s
}
