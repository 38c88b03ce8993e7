//! The report's tidy CSV files: `timeseries.csv` (bytes per window), `latency.csv` (the
//! percentiles per latency window), `latency-cdf.csv` (every application's latency
//! distribution) and `jain.csv` (Jain's index per window); `summary.json` is built in
//! `summary.rs`.
//!
//! Invariants: numbers are rounded (6 significant digits for ratios), so the same runs give
//! the same bytes; a percentile that falls on unfinished requests says it is a lower bound
//! (`_at_least`).
//!
//! Cost: linear in windows × applications × models.

use std::fmt::Write as _;

use super::{round, Analysed};
use crate::scenario::Scenario;

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
/// bucket in use ([`crate::metrics::Latency::cdf`]): `fraction` of the application's samples are at most
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
