//! The report's data files: `summary.json` (per model, tenant and application: rates,
//! shares, latency percentiles, drops, jitter) and the tidy CSV files (`timeseries.csv`,
//! `latency.csv`, `latency-cdf.csv`, `jain.csv`).
//!
//! Invariants: numbers are rounded (6 significant digits for ratios), so the same runs give
//! the same bytes; a percentile that falls on unfinished requests says it is a lower bound
//! (`_at_least`).
//!
//! Cost: linear in windows × applications × models.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::{headline_app, round, Analysed};
use crate::metrics::Latency;
use crate::scenario::{AppKind, Scenario, Tenant};

/// `{p50, p50_at_least, p90, .., p99, .., samples, unfinished}`, µs.
fn lat_json(h: &Latency) -> Value {
    let mut v = Map::new();
    for (k, p) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        let q = h.quantile(p);
        v.insert(
            k.into(),
            q.map_or(Value::Null, |q| json!(round(q.value as f64 / 1e6, 4))),
        );
        v.insert(
            format!("{k}_at_least"),
            json!(q.is_some_and(|q| q.at_least)),
        );
    }
    v.insert("samples".into(), json!(h.count()));
    v.insert("unfinished".into(), json!(h.unfinished.count()));
    Value::Object(v)
}

/// The summary of all runs: the scenario's facts, then a summary per model.
pub fn summary(sc: &Scenario, an: &[Analysed]) -> Value {
    let dur_s = sc.duration_ps as f64 / 1e12;
    let mut nics = Map::new();
    for a in an {
        nics.insert(a.run.kind.name().to_string(), nic_summary(sc, a, dur_s));
    }
    json!({
        "scenario": sc.name,
        "description": sc.description,
        "policy": sc.program.name,
        "seed": sc.seed,
        "duration_s": round(dur_s, 9),
        "window_s": round(sc.window_ps as f64 / 1e12, 9),
        "latency_window_s": round(sc.latency_window_ps as f64 / 1e12, 9),
        "time_scale": sc.time_scale,
        // Simulated seconds per paper second (`time_scale` parsed; null without one).
        "time_scale_ratio": sc.time_scale_ratio.map(|(paper, sim)| round(sim as f64 / paper as f64, 9)),
        "link_rate_bps": sc.program.link.rate_bps,
        "headline_app": format!("{}/{}", sc.tenants[sc.apps[headline_app(sc)].tenant].name, sc.apps[headline_app(sc)].name),
        "nics": nics,
    })
}

/// What a run sent set against its ideal: each application's bytes over the run's total,
/// and its ideal bytes ([`crate::metrics::Windows::ideal`]) over the ideal total.
struct Shares {
    /// Bytes sent by every application.
    total: f64,
    /// Per application: its ideal bytes over the run, and their sum.
    ideal: Vec<f64>,
    ideal_sum: f64,
}

impl Shares {
    fn new(sc: &Scenario, a: &Analysed) -> Shares {
        let ideal: Vec<f64> = (0..sc.apps.len())
            .map(|i| a.windows.ideal.iter().map(|w| w[i]).sum())
            .collect();
        Shares {
            total: a.run.app_bytes.iter().sum::<u64>() as f64,
            ideal_sum: ideal.iter().sum(),
            ideal,
        }
    }

    /// The share of the run's bytes that `b` bytes are.
    fn share(&self, b: f64) -> f64 {
        if self.total > 0.0 {
            b / self.total
        } else {
            0.0
        }
    }

    /// The share of the ideal total that `b` ideal bytes are.
    fn ideal_share(&self, b: f64) -> f64 {
        if self.ideal_sum > 0.0 {
            b / self.ideal_sum
        } else {
            0.0
        }
    }
}

/// The relative error of share `s` against the ideal `i` (null without an ideal share).
fn rel_error(s: f64, i: f64) -> Value {
    if i > 0.0 {
        json!(round((s - i).abs() / i, 6))
    } else {
        Value::Null
    }
}

/// One model's summary: Jain's index (over all windows, and per set of backlogged
/// tenants), the link's and the model's work per second, and its tenants'.
fn nic_summary(sc: &Scenario, a: &Analysed, dur_s: f64) -> Value {
    let r = a.run;
    let jains: Vec<f64> = a.windows.jain.iter().flatten().copied().collect();
    let jain_min = jains.iter().copied().fold(f64::INFINITY, f64::min);
    let jain_mean = jains.iter().sum::<f64>() / jains.len().max(1) as f64;
    let shares = Shares::new(sc, a);
    let mut tenants = Map::new();
    for t in &sc.tenants {
        tenants.insert(t.name.clone(), tenant_summary(sc, a, t, &shares, dur_s));
    }
    let c = r.counters;
    // The fraction of the run the link was busy (a frame still on the wire at the end
    // counts only up to the end): at most 1.
    let util = r.wire_busy_ps as f64 / sc.duration_ps as f64;
    json!({
        "jain_min": if jains.is_empty() { Value::Null } else { json!(round(jain_min, 6)) },
        "jain_mean": if jains.is_empty() { Value::Null } else { json!(round(jain_mean, 6)) },
        "jain_windows": jains.len(),
        "jain_by_backlogged_tenants": jain_by_backlog(sc, a),
        "link_utilization": round(util, 6),
        "throughput_bps": (shares.total * 8.0 / dur_s).round(),
        "packets": r.packets,
        "drops": r.app_drops.iter().sum::<u64>(),
        "doorbell_writes_per_s": (c.doorbell_writes as f64 / dur_s).round(),
        "dma_reads_per_s": ((c.descriptor_reads + c.payload_reads) as f64 / dur_s).round(),
        "descriptor_reads_per_s": (c.descriptor_reads as f64 / dur_s).round(),
        "payload_reads_per_s": (c.payload_reads as f64 / dur_s).round(),
        "cpu_s": round(c.cpu_ps as f64 / 1e12, 6),
        "cpu_cores_busy": round(c.cpu_ps as f64 / 1e12 / dur_s, 6),
        "tenants": tenants,
    })
}

/// Jain's index grouped by which tenants are backlogged (the phases of Loom Fig. 9), in
/// the order the phases first occur: `{"T1+T2": {windows, jain_min, jain_mean}, ..}`.
fn jain_by_backlog(sc: &Scenario, a: &Analysed) -> Map<String, Value> {
    let mut phases: Vec<(String, Vec<f64>)> = Vec::new();
    for (w, j) in a.windows.jain.iter().enumerate() {
        let Some(j) = j else { continue };
        let key = a.windows.backlogged[w]
            .iter()
            .map(|&t| sc.tenants[t].name.as_str())
            .collect::<Vec<_>>()
            .join("+");
        match phases.iter_mut().find(|p| p.0 == key) {
            Some(p) => p.1.push(*j),
            None => phases.push((key, vec![*j])),
        }
    }
    let mut by_backlog = Map::new();
    for (k, js) in phases {
        let min = js.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = js.iter().sum::<f64>() / js.len() as f64;
        by_backlog.insert(
            k,
            json!({"windows": js.len(), "jain_min": round(min, 6), "jain_mean": round(mean, 6)}),
        );
    }
    by_backlog
}

/// A tenant's summary: its applications' bytes and shares together, its latency (its
/// first request/response application's, else every application's), and each
/// application's.
fn tenant_summary(sc: &Scenario, a: &Analysed, t: &Tenant, shares: &Shares, dur_s: f64) -> Value {
    let r = a.run;
    let bytes: f64 = t.apps.iter().map(|&i| r.app_bytes[i] as f64).sum();
    let ideal: f64 = t.apps.iter().map(|&i| shares.ideal[i]).sum();
    let mut lat = Latency::default();
    let lat_app = t
        .apps
        .iter()
        .copied()
        .find(|&i| matches!(sc.apps[i].kind, AppKind::RequestResponse { .. }));
    match lat_app {
        Some(i) => lat.merge(&r.app_latency[i]),
        None => t.apps.iter().for_each(|&i| lat.merge(&r.app_latency[i])),
    }
    let mut apps = Map::new();
    for &i in &t.apps {
        apps.insert(
            sc.apps[i].name.clone(),
            app_summary(sc, a, i, shares, dur_s),
        );
    }
    json!({
        "mean_bps": (bytes * 8.0 / dur_s).round(),
        "share": round(shares.share(bytes), 6),
        "ideal_share": round(shares.ideal_share(ideal), 6),
        "rel_error": rel_error(shares.share(bytes), shares.ideal_share(ideal)),
        "latency_us": lat_json(&lat),
        "drops": t.apps.iter().map(|&i| r.app_drops[i]).sum::<u64>(),
        "apps": apps,
    })
}

/// Application `i`'s summary: its bytes and shares, latency, drops, its requests (or
/// packets), and the jitter of its departures when it sent two packets or more.
fn app_summary(sc: &Scenario, a: &Analysed, i: usize, shares: &Shares, dur_s: f64) -> Value {
    let r = a.run;
    let app = &sc.apps[i];
    let b = r.app_bytes[i] as f64;
    let mut v = json!({
        "kind": match app.kind {
            AppKind::Bulk { .. } => "bulk",
            AppKind::RequestResponse { .. } => "request-response",
            AppKind::Udp { .. } => "udp",
        },
        "mean_bps": (b * 8.0 / dur_s).round(),
        "share": round(shares.share(b), 6),
        "ideal_share": round(shares.ideal_share(shares.ideal[i]), 6),
        "rel_error": rel_error(shares.share(b), shares.ideal_share(shares.ideal[i])),
        "latency_us": lat_json(&r.app_latency[i]),
        "drops": r.app_drops[i],
    });
    if matches!(app.kind, AppKind::RequestResponse { .. }) {
        let (issued, done) = (r.requests_issued[i], r.requests_done[i]);
        v["requests"] = json!({
            "issued": issued,
            "completed": done,
            "unfinished": issued - done,
        });
    } else {
        // Their delays' lower bounds (`latency_us.unfinished`) are these.
        v["packets"] = json!({
            "sent": r.app_packets[i],
            "queued_at_end": r.app_queued[i],
        });
    }
    // Jitter: the gaps between the application's consecutive departures.
    let g = &r.app_gaps[i];
    if let (Some(m), Some(sd), Some(dev)) = (g.mean_ps(), g.std_ps(), g.abs_dev_quantile_ps(0.99)) {
        v["interdeparture_us"] = json!({
            "mean": round(m / 1e6, 6),
            "std": round(sd / 1e6, 6),
            "p99_abs_dev": round(dev / 1e6, 6),
            "gaps": g.n,
        });
    }
    v
}

/// The tidy throughput series: `window_start_s,nic,tenant,app,bytes`.
pub fn timeseries_csv(sc: &Scenario, an: &[Analysed]) -> String {
    let mut s = String::from("window_start_s,nic,tenant,app,bytes\n");
    for a in an {
        for (w, bytes) in a.run.window_bytes.iter().enumerate() {
            let t = w as f64 * sc.window_ps as f64 / 1e12;
            for (i, app) in sc.apps.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{}",
                    round(t, 9),
                    a.run.kind.name(),
                    sc.tenants[app.tenant].name,
                    app.name,
                    bytes[i]
                );
            }
        }
    }
    s
}

/// Latency of request/response applications per latency window, over the requests that
/// arrived in it: `window_start_s,nic,tenant,app,requests,unfinished,p50_us,p90_us,p99_us,
/// p50_at_least,p90_at_least,p99_at_least` (`true`: a lower bound, the percentile falls on
/// requests unfinished at the end of the run).
pub fn latency_csv(sc: &Scenario, an: &[Analysed]) -> String {
    let mut s = String::from(
        "window_start_s,nic,tenant,app,requests,unfinished,p50_us,p90_us,p99_us,\
         p50_at_least,p90_at_least,p99_at_least\n",
    );
    for a in an {
        for (w, row) in a.run.window_latency.iter().enumerate() {
            let t = w as f64 * sc.latency_window_ps as f64 / 1e12;
            for (i, h) in row.iter().enumerate() {
                let Some(h) = h else { continue };
                let q = [0.5, 0.9, 0.99].map(|p| h.quantile(p));
                let value = |k: usize| {
                    q[k].map_or(String::new(), |q| {
                        format!("{}", round(q.value as f64 / 1e6, 4))
                    })
                };
                let at_least = |k: usize| q[k].is_some_and(|q| q.at_least);
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{},{},{},{}",
                    round(t, 9),
                    a.run.kind.name(),
                    sc.tenants[sc.apps[i].tenant].name,
                    sc.apps[i].name,
                    h.count(),
                    h.unfinished.count(),
                    value(0),
                    value(1),
                    value(2),
                    at_least(0),
                    at_least(1),
                    at_least(2)
                );
            }
        }
    }
    s
}

/// The distribution of every application's latency over the run (request/response:
/// request to last byte of the response, the request completion time; bulk and UDP: packet
/// delay, write to wire), tidy: `nic,tenant,app,latency_us,fraction`, a row per histogram
/// bucket in use ([`Latency::cdf`]): `fraction` of the application's samples are at most
/// `latency_us` (the bucket's middle, within 3.2 %). Unfinished requests and packets still
/// queued count at their age at the end, as in the percentiles: where there are any, the
/// true curve lies at or right of this one. Applications without a sample have no rows.
pub fn latency_cdf_csv(sc: &Scenario, an: &[Analysed]) -> String {
    let mut s = String::from("nic,tenant,app,latency_us,fraction\n");
    for a in an {
        for (i, app) in sc.apps.iter().enumerate() {
            for (v, f) in a.run.app_latency[i].cdf() {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{}",
                    a.run.kind.name(),
                    sc.tenants[app.tenant].name,
                    app.name,
                    round(v as f64 / 1e6, 4),
                    round(f, 6)
                );
            }
        }
    }
    s
}

/// Jain's index per window: `window_start_s,nic,jain,backlogged_tenants`.
pub fn jain_csv(sc: &Scenario, an: &[Analysed]) -> String {
    let mut s = String::from("window_start_s,nic,jain,backlogged_tenants\n");
    for a in an {
        for (w, j) in a.windows.jain.iter().enumerate() {
            let t = w as f64 * sc.window_ps as f64 / 1e12;
            let _ = writeln!(
                s,
                "{},{},{},{}",
                round(t, 9),
                a.run.kind.name(),
                j.map_or(String::new(), |j| format!("{}", round(j, 6))),
                a.windows.backlogged[w].len()
            );
        }
    }
    s
}
