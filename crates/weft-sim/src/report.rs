//! Reports: `summary.json` (per NIC model: `jain_min` and Jain's index per set of backlogged
//! tenants, `link_utilization` (the fraction of the run the link was transmitting),
//! `doorbell_writes_per_s`, `dma_reads_per_s`, CPU; per tenant and application: `mean_bps`,
//! `share`, `ideal_share`, `rel_error`, `latency_us` {p50, p90, p99, each with `_at_least`,
//! samples, unfinished}, `drops`; per request/response application `requests` {issued,
//! completed, unfinished}, per bulk or UDP application `packets` {sent, queued_at_end}; per
//! application that sent two packets or more, the jitter of its departures,
//! `interdeparture_us` {mean, std, p99_abs_dev (the 99th percentile of |gap − mean|),
//! gaps}), tidy `timeseries.csv` (window_start_s, nic, tenant, app, bytes),
//! `latency.csv` and `jain.csv` per window, `latency-cdf.csv` (every application's latency
//! distribution over the run: nic, tenant, app, latency_us, fraction), SVG line charts drawn
//! here (no plotting dependency: a chart is a few dozen SVG elements; a chart with nothing
//! to draw, such as latency without a request/response application, says so and why), and
//! `index.html` setting the models side by side as the papers' figures do. Names and other text from the
//! scenario are escaped in HTML and SVG.
//!
//! Request latency percentiles are over every request that arrived within the run, an
//! unfinished one counting as its age at the end ([`crate::metrics::Latency`]); one that
//! falls on unfinished requests is a lower bound: `"p90_at_least": true` in summary.json,
//! `true` in latency.csv's `p90_at_least`, `≥` in tables, a triangle in latency.svg. Bulk
//! and UDP applications' packet delays (write to wire) likewise count the packets still
//! queued at the end as their age then (`latency_us.unfinished`, `packets.queued_at_end`).
//!
//! Charts: every chart of a report runs over the run's duration (round ticks), each
//! window's point at the middle of the window (the axis says so), in paper seconds when
//! the scenario scales time (`time_scale`: [`TimeAxis`]; the CSV files keep simulated
//! seconds). When the run is not a
//! whole number of windows the last window is shorter: timeseries.csv has the bytes sent
//! in it (as in every window), the throughput chart divides them by its length within the
//! run, so that it reads as a rate like the others and not as a drop; Jain's index is
//! not computed for it (an empty cell in jain.csv, no point in the chart). Latency (p90 per
//! latency window) is drawn on a logarithmic axis of whole decades, from the smallest
//! positive value to the largest: the models differ by orders of magnitude (Loom
//! Fig. 10); a value at or below 0 sits on the floor and a note says how many do.
//! `latency-cdf.svg` draws the headline application's latency distribution per model,
//! the fraction of samples at most x, x on a logarithmic axis likewise (a value at or
//! below 0 on its left edge, a note saying how many) and y up to 1.05.
//! Throughput and Jain are linear; Jain's axis runs to 1.05 (ticks to 1), so that a model
//! at exactly 1 is a line inside the plot, not hidden on its frame. Throughput is drawn per
//! tenant, and per application (`tenant/app`) when a tenant has several (Loom Fig. 11's
//! jobs); its y axis is shared by every model's chart of the kind, runs 5 % above the
//! largest rate drawn in round ticks and a unit that reads (Gbit/s, Mbit/s, kbit/s), and
//! includes the link rate, a dashed line, when the rates reach half of it; below that a
//! note says the link is above the axis, so that low rates are not flat on the floor. A
//! chart draws at most 32 lines (of more series the 32 with the largest totals) and names
//! in its legend as many as fit (about 16), then says how many more there are, how many
//! are not drawn, and the file with all of them. Lines take 10 colours, solid, then
//! dashed, dotted and dash-dotted for the 11th to 40th, the legend drawn alike, so no two
//! lines look the same.
//!
//! Files: [`OUTPUTS`], `throughput-MODEL.svg` per model and `throughput-apps-MODEL.svg` per
//! model when a tenant has several applications; [`write()`] first removes those an
//! earlier report left in the directory (and nothing else), so a report never mixes runs.
//!
//! Numbers are rounded (6 significant digits for ratios) so that the files are stable and
//! diffable; the same runs always give the same bytes.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::metrics::{self, IdealModel, Latency, Windows};
use crate::nic::NicKind;
use crate::scenario::{AppKind, Scenario};
use crate::sim::NicRun;

/// `x` to `digits` significant digits (0 for 0 and what is not finite).
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return 0.0;
    }
    let mag = x.abs().log10().floor() as i32;
    let f = 10f64.powi(digits - 1 - mag);
    (x * f).round() / f
}

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

/// The files a report writes besides `throughput-MODEL.svg` per model (and
/// `throughput-apps-MODEL.svg` when a tenant has several applications).
pub const OUTPUTS: [&str; 9] = [
    "summary.json",
    "timeseries.csv",
    "latency.csv",
    "latency-cdf.csv",
    "jain.csv",
    "latency.svg",
    "latency-cdf.svg",
    "jain.svg",
    "index.html",
];

/// The names of every file a report may write: [`OUTPUTS`], `throughput-MODEL.svg` and
/// `throughput-apps-MODEL.svg` of every model.
pub fn output_names() -> Vec<String> {
    OUTPUTS
        .iter()
        .map(|s| s.to_string())
        .chain(NicKind::ALL.map(|k| format!("throughput-{}.svg", k.name())))
        .chain(NicKind::ALL.map(|k| format!("throughput-apps-{}.svg", k.name())))
        .collect()
}

/// Removes the files a report writes ([`output_names`]) from `dir`, where they exist;
/// nothing else.
pub fn remove_outputs(dir: &Path) -> std::io::Result<()> {
    for name in output_names() {
        match std::fs::remove_file(dir.join(&name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot remove {}: {e}", dir.join(&name).display()),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A run's per-window results (computed once, shared by the summary and the files).
pub struct Analysed<'a> {
    pub run: &'a NicRun,
    pub windows: Windows,
}

/// Computes the per-window results of every run.
pub fn analyse<'a>(sc: &Scenario, runs: &'a [NicRun]) -> Vec<Analysed<'a>> {
    let model = IdealModel::new(sc);
    runs.iter()
        .map(|r| Analysed {
            run: r,
            windows: metrics::windows(sc, r, &model),
        })
        .collect()
}

/// The application whose latency the report headlines: the first request/response
/// application (Loom Fig. 10's T0), else the first application.
pub fn headline_app(sc: &Scenario) -> usize {
    sc.apps
        .iter()
        .position(|a| matches!(a.kind, AppKind::RequestResponse { .. }))
        .unwrap_or(0)
}

/// The summary of all runs.
pub fn summary(sc: &Scenario, an: &[Analysed]) -> Value {
    let dur_s = sc.duration_ps as f64 / 1e12;
    let mut nics = Map::new();
    for a in an {
        let r = a.run;
        let jains: Vec<f64> = a.windows.jain.iter().flatten().copied().collect();
        let jain_min = jains.iter().copied().fold(f64::INFINITY, f64::min);
        let jain_mean = jains.iter().sum::<f64>() / jains.len().max(1) as f64;
        let total: f64 = r.app_bytes.iter().sum::<u64>() as f64;
        let ideal_tot: Vec<f64> = (0..sc.apps.len())
            .map(|i| a.windows.ideal.iter().map(|w| w[i]).sum())
            .collect();
        let ideal_sum: f64 = ideal_tot.iter().sum();
        let share = |b: f64| if total > 0.0 { b / total } else { 0.0 };
        let ishare = |b: f64| if ideal_sum > 0.0 { b / ideal_sum } else { 0.0 };
        let rel = |s: f64, i: f64| {
            if i > 0.0 {
                json!(round((s - i).abs() / i, 6))
            } else {
                Value::Null
            }
        };
        let mut tenants = Map::new();
        for t in &sc.tenants {
            let bytes: f64 = t.apps.iter().map(|&i| r.app_bytes[i] as f64).sum();
            let ideal: f64 = t.apps.iter().map(|&i| ideal_tot[i]).sum();
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
                let app = &sc.apps[i];
                let b = r.app_bytes[i] as f64;
                let mut v = json!({
                    "kind": match app.kind {
                        AppKind::Bulk { .. } => "bulk",
                        AppKind::RequestResponse { .. } => "request-response",
                        AppKind::Udp { .. } => "udp",
                    },
                    "mean_bps": (b * 8.0 / dur_s).round(),
                    "share": round(share(b), 6),
                    "ideal_share": round(ishare(ideal_tot[i]), 6),
                    "rel_error": rel(share(b), ishare(ideal_tot[i])),
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
                if let (Some(m), Some(sd), Some(dev)) =
                    (g.mean_ps(), g.std_ps(), g.abs_dev_quantile_ps(0.99))
                {
                    v["interdeparture_us"] = json!({
                        "mean": round(m / 1e6, 6),
                        "std": round(sd / 1e6, 6),
                        "p99_abs_dev": round(dev / 1e6, 6),
                        "gaps": g.n,
                    });
                }
                apps.insert(app.name.clone(), v);
            }
            tenants.insert(
                t.name.clone(),
                json!({
                    "mean_bps": (bytes * 8.0 / dur_s).round(),
                    "share": round(share(bytes), 6),
                    "ideal_share": round(ishare(ideal), 6),
                    "rel_error": rel(share(bytes), ishare(ideal)),
                    "latency_us": lat_json(&lat),
                    "drops": t.apps.iter().map(|&i| r.app_drops[i]).sum::<u64>(),
                    "apps": apps,
                }),
            );
        }
        // Jain's index grouped by which tenants are backlogged (the phases of Loom Fig. 9).
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
        let c = r.counters;
        // The fraction of the run the link was busy (a frame still on the wire at the end
        // counts only up to the end): at most 1.
        let util = r.wire_busy_ps as f64 / sc.duration_ps as f64;
        nics.insert(
            r.kind.name().to_string(),
            json!({
                "jain_min": if jains.is_empty() { Value::Null } else { json!(round(jain_min, 6)) },
                "jain_mean": if jains.is_empty() { Value::Null } else { json!(round(jain_mean, 6)) },
                "jain_windows": jains.len(),
                "jain_by_backlogged_tenants": by_backlog,
                "link_utilization": round(util, 6),
                "throughput_bps": (total * 8.0 / dur_s).round(),
                "packets": r.packets,
                "drops": r.app_drops.iter().sum::<u64>(),
                "doorbell_writes_per_s": (c.doorbell_writes as f64 / dur_s).round(),
                "dma_reads_per_s": ((c.descriptor_reads + c.payload_reads) as f64 / dur_s).round(),
                "descriptor_reads_per_s": (c.descriptor_reads as f64 / dur_s).round(),
                "payload_reads_per_s": (c.payload_reads as f64 / dur_s).round(),
                "cpu_s": round(c.cpu_ps as f64 / 1e12, 6),
                "cpu_cores_busy": round(c.cpu_ps as f64 / 1e12 / dur_s, 6),
                "tenants": tenants,
            }),
        );
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

const COLORS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// The dash pattern (`stroke-dasharray`) of each pass through [`COLORS`]: solid, dashed,
/// dotted, dash-dot. Line k is `COLORS[k % 10]` with `DASHES[k / 10]`, so the 32 lines a
/// chart draws at most are all different, in the plot and in the legend.
const DASHES: [Option<&str>; 4] = [None, Some("6 3"), Some("1.5 2.5"), Some("8 3 1.5 3")];

/// The colour and dash pattern of the chart's line number `pos` (in drawing order).
fn line_style(pos: usize) -> (&'static str, Option<&'static str>) {
    (
        COLORS[pos % COLORS.len()],
        DASHES[(pos / COLORS.len()) % DASHES.len()],
    )
}

/// ` stroke-dasharray="6 3"` for a dashed line, nothing for a solid one.
fn dash_attr(dash: Option<&str>) -> String {
    dash.map_or(String::new(), |d| format!(r#" stroke-dasharray="{d}""#))
}

/// A chart draws at most this many lines: of more series, those with the largest totals
/// (the sum of their values), in their order; the legend says how many are left out.
const MAX_LINES: usize = 32;

/// The x-axis label of a report's charts (each window's point at its middle), for a
/// scenario without a `time_scale`.
pub const TIME_AXIS: &str = "time (s, simulated; window midpoints)";

/// The time axis of a report's charts: simulated seconds, or the paper's when the scenario
/// says how it scales time (`time_scale`, [`Scenario::time_scale_ratio`]), so that a chart
/// reads against the paper's figure (Loom Fig. 9's phases at 0, 2, 4 .. s, not 0.2, 0.4).
/// The CSV files keep simulated seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeAxis {
    /// The axis's label: [`TIME_AXIS`], or one that says the seconds are the paper's and
    /// what one of them stands for.
    pub label: String,
    /// Axis seconds per simulated second: 1, or paper seconds per simulated second.
    pub per_simulated_s: f64,
    /// The axis's end: the run's duration in axis seconds.
    pub end: f64,
}

impl TimeAxis {
    /// Simulated seconds, from 0 to `dur_s`.
    pub fn simulated(dur_s: f64) -> TimeAxis {
        TimeAxis {
            label: TIME_AXIS.into(),
            per_simulated_s: 1.0,
            end: dur_s,
        }
    }

    /// The axis of `sc`'s charts: paper seconds when it has a `time_scale`, else simulated
    /// ones.
    pub fn of(sc: &Scenario) -> TimeAxis {
        let dur_s = sc.duration_ps as f64 / 1e12;
        let Some((paper, sim)) = sc.time_scale_ratio else {
            return TimeAxis::simulated(dur_s);
        };
        let per = paper as f64 / sim as f64;
        TimeAxis {
            label: format!(
                "time (paper s; 1 paper s = {} simulated; window midpoints)",
                time_text(sim as f64 / paper as f64)
            ),
            per_simulated_s: per,
            end: dur_s * per,
        }
    }
}

/// Seconds written in a unit that reads: `100 ms`, `2 s`, `1.5 µs`.
fn time_text(s: f64) -> String {
    let (unit, scale) = [("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)]
        .into_iter()
        .find(|&(_, u)| s >= u * (1.0 - 1e-9))
        .unwrap_or(("ps", 1e-12));
    format!("{} {unit}", round(s / scale, 6))
}

/// One series of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// The step of round ticks from 0 to `max`: the largest of 1, 2, 2.5 or 5 × 10^k that
/// leaves at least three steps within it.
fn tick_step(max: f64) -> f64 {
    let v = max / 3.0;
    let e = 10f64.powf(v.log10().floor());
    [5.0, 2.5, 2.0, 1.0, 0.5]
        .iter()
        .map(|m| m * e)
        .find(|s| *s <= v * (1.0 + 1e-9))
        .unwrap_or(e / 2.0)
}

/// A linear axis's top at or above `v`: the first multiple of [`tick_step`]`(v)` there (1
/// for nothing positive), and that step: 12.5 by 2.5 for 10.5, 8 by 2 for 7.4.
fn nice_top(v: f64) -> (f64, f64) {
    if !(v.is_finite() && v > 0.0) {
        return (1.0, 0.25);
    }
    let step = tick_step(v);
    let n = (v / step * (1.0 - 1e-9)).ceil().max(1.0);
    (round(n * step, 9), step)
}

/// Tick positions from 0 to `max`: the multiples within it of the largest step of 1, 2,
/// 2.5 or 5 × 10^k that leaves at least three steps (4 to 7 ticks; 0, 0.5, 1, 1.5 for 1.8).
fn ticks(max: f64) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0];
    }
    ticks_every(max, tick_step(max))
}

/// The multiples of `step` from 0 to `max` (rounded to 6 decimals).
fn ticks_every(max: f64, step: f64) -> Vec<f64> {
    let n = (max / step * (1.0 + 1e-9)).floor() as usize;
    (0..=n).map(|i| round(i as f64 * step, 6)).collect()
}

/// The decades `(lo, hi)`, `lo < hi`, of a logarithmic axis over `values`: 10^lo at or
/// below the smallest positive value, 10^hi at or above the largest (`(0, 1)`, 1 to 10,
/// without a positive value).
fn decades(values: impl Iterator<Item = f64>) -> (i32, i32) {
    let (mut min, mut max) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        min = min.min(v);
        max = max.max(v);
    }
    if max <= 0.0 {
        return (0, 1);
    }
    let mut lo = min.log10().floor() as i32;
    if 10f64.powi(lo) > min {
        lo -= 1;
    } else if 10f64.powi(lo + 1) <= min {
        lo += 1;
    }
    let mut hi = max.log10().ceil() as i32;
    if 10f64.powi(hi) < max {
        hi += 1;
    } else if 10f64.powi(hi - 1) >= max {
        hi -= 1;
    }
    (lo, hi.max(lo + 1))
}

/// 10^`k` written out: `1000`, `1`, `0.01`.
fn decade_label(k: i32) -> String {
    if k >= 0 {
        format!("1{}", "0".repeat(k as usize))
    } else {
        format!("0.{}1", "0".repeat((-k - 1) as usize))
    }
}

/// `n` for a table, its digits in groups of three: `1,223,416`.
pub fn count(n: u64) -> String {
    group(&n.to_string())
}

/// `x` for a table (the terminal's or a page's), to `digits` decimals with the whole part's digits in groups of three
/// (`112,700.0`); what rounds to zero reads `0` (not `-0.000`, nor serde's `3.86831e-16`),
/// and what is not a number `-`. Tables only: JSON keeps every value as computed.
pub fn number(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let text = format!("{:.*}", digits, x.abs());
    if text.bytes().all(|b| b == b'0' || b == b'.') {
        return "0".into();
    }
    let (whole, frac) = text
        .split_once('.')
        .map_or((&*text, None), |(w, f)| (w, Some(f)));
    let sign = if x < 0.0 { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{}.{f}", group(whole)),
        None => format!("{sign}{}", group(whole)),
    }
}

/// Digits with a comma between groups of three, from the right.
fn group(digits: &str) -> String {
    let mut s = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    s
}

/// `s` escaped for HTML or SVG text and attribute values.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Size of a chart and the margins of its plot: width, height, left, right, top, bottom.
const CHART: (f64, f64, f64, f64, f64, f64) = (520.0, 300.0, 60.0, 110.0, 28.0, 40.0);

/// A chart's opening: the SVG element, its white background and the title.
fn chart_head(s: &mut String, title: &str) {
    let (w, h, l, r, _, _) = CHART;
    let pw = w - l - r;
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{}" y="16" text-anchor="middle" font-size="13">{}</text>"#,
        l + pw / 2.0,
        esc(title)
    );
}

/// The x axis's round ticks ([`ticks`]) from 0 to `xmax`: a mark and a label each; none
/// when `xmax` is not positive (an axis without a scale).
fn x_ticks(s: &mut String, xmax: f64) {
    if !(xmax.is_finite() && xmax > 0.0) {
        return;
    }
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
    for v in ticks(xmax) {
        let x = l + pw * v / xmax;
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#444"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{v}</text>"##,
            t + ph,
            t + ph + 4.0,
            t + ph + 14.0,
        );
    }
}

/// A logarithmic x axis's decades from 10^`lo` to 10^`hi`: a grid line each, labelled
/// (every other one, or sparser, past 8 decades), and marks at 2..9 times each while they
/// stay apart.
fn log_x_ticks(s: &mut String, lo: i32, hi: i32) {
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
    let n = (hi - lo) as usize;
    let every = n.div_ceil(8);
    for (i, k) in (lo..=hi).enumerate() {
        let x = l + pw * i as f64 / n as f64;
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#444"/>"##,
            t + ph,
            t + ph,
            t + ph + 4.0,
        );
        if i % every == 0 {
            let _ = write!(
                s,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                t + ph + 14.0,
                decade_label(k)
            );
        }
        if k < hi && n <= 6 {
            for m in 2..10 {
                let mx = x + pw * (m as f64).log10() / n as f64;
                let _ = write!(
                    s,
                    r##"<line x1="{mx:.1}" y1="{:.1}" x2="{mx:.1}" y2="{:.1}" stroke="#444"/>"##,
                    t + ph - 4.0,
                    t + ph
                );
            }
        }
    }
}

/// The plot's frame and the axis labels.
fn chart_frame(s: &mut String, xlabel: &str, ylabel: &str) {
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
    let _ = write!(
        s,
        r##"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#444"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="14" y="{:.1}" text-anchor="middle" transform="rotate(-90 14 {:.1})">{}</text>"##,
        l + pw / 2.0,
        h - 6.0,
        esc(xlabel),
        t + ph / 2.0,
        t + ph / 2.0,
        esc(ylabel)
    );
}

/// A line chart as SVG text: x from 0 to the largest x, y (linear) from 0 to `ymax` (else
/// a round number at or above the largest y), round ticks. Of more than 32 series it draws
/// the 32 with the largest totals; the legend names what fits (about 16) and says how many
/// more there are.
pub fn line_chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    ymax: Option<f64>,
) -> String {
    chart(
        title,
        xlabel,
        ylabel,
        series,
        &Axes {
            ymax,
            ..Axes::default()
        },
    )
}

/// How [`chart`] draws its axes and what its legend says.
#[derive(Default)]
struct Axes<'a> {
    /// The x axis runs from 0 to this (a report's: the run's duration); without it, to the
    /// largest x (to 1 when that is 0 or less).
    xmax: Option<f64>,
    /// A linear y axis runs from 0 to this, with ticks every `ystep` (default: round steps
    /// within it, [`tick_step`]); without it, to a round number at or above the largest y.
    ymax: Option<f64>,
    ystep: Option<f64>,
    /// A level to mark on a linear axis (the link rate): `(y, label)`: a dashed line when
    /// it is on the axis, else a note under the legend saying it is above.
    reference: Option<(f64, &'a str)>,
    /// A logarithmic y axis instead, over whole decades from the smallest positive y to the
    /// largest; a point at or below 0 is drawn on its floor, and a note says how many are.
    log_y: bool,
    /// A logarithmic x axis instead of one from 0 to `xmax`, over whole decades from the
    /// smallest positive x to the largest; a point at or below 0 is drawn on its left
    /// edge, and a note says how many are.
    log_x: bool,
    /// Notes of the chart's own under the legend (a line each, about 18 characters).
    notes: &'a [String],
    /// `at_least[k][j]`: point j of series k is only a lower bound, marked with a triangle
    /// (missing: not).
    at_least: &'a [Vec<bool>],
    /// The file holding every series, named when the legend leaves some out.
    data_file: Option<&'a str>,
}

/// The indices of the series a chart draws: all, or of more than [`MAX_LINES`], those
/// with the largest sums of their (finite) values, in their order.
fn drawn_series(series: &[Series]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..series.len()).collect();
    if series.len() > MAX_LINES {
        let total: Vec<f64> = series
            .iter()
            .map(|s| s.points.iter().map(|p| p.1).filter(|v| v.is_finite()).sum())
            .collect();
        idx.sort_by(|&a, &b| total[b].total_cmp(&total[a]).then(a.cmp(&b)));
        idx.truncate(MAX_LINES);
        idx.sort_unstable();
    }
    idx
}

/// A line chart of `series` as SVG text, its axes as `ax` says.
fn chart(title: &str, xlabel: &str, ylabel: &str, series: &[Series], ax: &Axes) -> String {
    let lower = |k: usize, j: usize| ax.at_least.get(k).and_then(|v| v.get(j)) == Some(&true);
    let (w, h, l, r, t, b) = CHART;
    let pw = w - l - r;
    let ph = h - t - b;
    let drawn = drawn_series(series);
    let points = || drawn.iter().flat_map(|&k| series[k].points.iter().copied());
    let xmax = match ax.xmax {
        Some(x) if x.is_finite() && x > 0.0 => x,
        _ => Some(points().map(|p| p.0).fold(0.0f64, f64::max))
            .filter(|&x| x > 0.0)
            .unwrap_or(1.0),
    };
    let (xlo, xhi) = decades(points().map(|p| p.0));
    let ys = || points().map(|p| p.1).filter(|v| v.is_finite());
    let (lo, hi) = decades(ys());
    let (ymax, ystep) = match ax.ymax {
        Some(m) => (m, ax.ystep.unwrap_or_else(|| tick_step(m))),
        None => nice_top(ys().fold(0.0f64, f64::max)),
    };
    let reference = ax
        .reference
        .filter(|r| r.0.is_finite() && r.0 > 0.0)
        .map(|r| (r, r.0 <= ymax * (1.0 + 1e-9)));
    // The fraction of the plot's height at which a value lies.
    let yfrac = |y: f64| {
        if !ax.log_y {
            y / ymax
        } else if y > 0.0 {
            (y.log10() - lo as f64) / (hi - lo) as f64
        } else {
            0.0
        }
    };
    let py = |y: f64| t + ph - ph * yfrac(y).clamp(0.0, 1.05);
    let px = |x: f64| {
        if !ax.log_x {
            l + pw * x / xmax
        } else if x > 0.0 {
            l + pw * ((x.log10() - xlo as f64) / (xhi - xlo) as f64).clamp(0.0, 1.0)
        } else {
            l
        }
    };
    let mut s = String::new();
    chart_head(&mut s, title);
    if ax.log_y {
        // A grid line per decade, labelled (every other one, or sparser, past 8 decades),
        // and marks at 2..9 times each while they stay apart.
        let n = (hi - lo) as usize;
        let every = n.div_ceil(8);
        for (i, k) in (lo..=hi).enumerate() {
            let y = t + ph - ph * i as f64 / n as f64;
            let _ = write!(
                s,
                r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
                l + pw
            );
            if i % every == 0 {
                let _ = write!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    l - 4.0,
                    y + 4.0,
                    decade_label(k)
                );
            }
            if k < hi && n <= 6 {
                for m in 2..10 {
                    let my = y - ph * (m as f64).log10() / n as f64;
                    let _ = write!(
                        s,
                        r##"<line x1="{l}" y1="{my:.1}" x2="{:.1}" y2="{my:.1}" stroke="#444"/>"##,
                        l + 4.0
                    );
                }
            }
        }
    } else {
        // A grid line and a label at every round step up to the top.
        for v in ticks_every(ymax, ystep) {
            let y = py(v);
            let _ = write!(
                s,
                r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                l + pw,
                l - 4.0,
                y + 4.0,
                round(v, 3)
            );
        }
        if let Some(((level, label), true)) = reference {
            // Dashed, grey and thin: no series looks like it.
            let y = py(level);
            let _ = write!(
                s,
                r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#666" stroke-width="1" stroke-dasharray="4 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="#555">{}</text>"##,
                l + pw,
                l + pw - 4.0,
                y - 3.0,
                esc(label)
            );
        }
    }
    if ax.log_x {
        log_x_ticks(&mut s, xlo, xhi);
    } else {
        x_ticks(&mut s, xmax);
    }
    let ylabel = if ax.log_y {
        format!("{ylabel} (log scale)")
    } else {
        ylabel.to_string()
    };
    let xlabel = if ax.log_x {
        format!("{xlabel} (log scale)")
    } else {
        xlabel.to_string()
    };
    chart_frame(&mut s, &xlabel, &ylabel);
    // Notes under the legend: lower bounds, points clamped to a logarithmic axis's floor.
    let mut notes: Vec<String> = Vec::new();
    if drawn
        .iter()
        .any(|&k| (0..series[k].points.len()).any(|j| lower(k, j)))
    {
        notes.extend(
            [
                "\u{25b2} at least: the",
                "percentile falls on",
                "requests unfinished",
                "at the end",
            ]
            .map(String::from),
        );
    }
    if let Some(((_, label), false)) = reference {
        // Two short lines: the legend's column is about 18 characters wide.
        notes.push(format!("{}:", esc(label)));
        notes.push("above the axis".into());
    }
    let clamped = if ax.log_y {
        ys().filter(|&y| y <= 0.0).count()
    } else {
        0
    };
    if clamped > 0 {
        notes.push(format!(
            "{clamped} point{} \u{2264} 0 drawn",
            if clamped == 1 { "" } else { "s" }
        ));
        notes.push("on the axis floor".into());
    }
    let left = if ax.log_x {
        points().filter(|p| p.1.is_finite() && p.0 <= 0.0).count()
    } else {
        0
    };
    if left > 0 {
        notes.push(format!(
            "{left} point{} at x \u{2264} 0",
            if left == 1 { "" } else { "s" }
        ));
        notes.push("drawn on the left edge".into());
    }
    notes.extend(ax.notes.iter().map(|n| esc(n)));
    // The legend: an entry per line while they fit above the notes (16 px each, the
    // notes 13 px a line after 20 px), then how many series it leaves out.
    let fits = |entries: usize, lines: usize| {
        let bottom = if lines > 0 {
            t + 16.0 * entries as f64 + 20.0 + 13.0 * (lines - 1) as f64
        } else {
            t + 16.0 * entries as f64
        };
        bottom <= h - 4.0
    };
    let mut more: Vec<String> = Vec::new();
    let shown = if drawn.len() == series.len() && fits(drawn.len(), notes.len()) {
        drawn.len()
    } else {
        let lines = if drawn.len() < series.len() { 2 } else { 0 }
            + if ax.data_file.is_some() { 2 } else { 1 };
        let shown = (0..=drawn.len())
            .rev()
            .find(|&m| fits(m, lines + notes.len()))
            .unwrap_or(0);
        let hidden = series.len() - shown;
        match ax.data_file {
            Some(f) => {
                more.push(format!("+ {hidden} more (see"));
                more.push(format!("{})", esc(f)));
            }
            None => more.push(format!("+ {hidden} more")),
        }
        if drawn.len() < series.len() {
            more.push(format!("{} not drawn", series.len() - drawn.len()));
            more.push(format!("({} largest are)", drawn.len()));
        }
        shown
    };
    for (pos, &k) in drawn.iter().enumerate() {
        let se = &series[k];
        let (color, dash) = line_style(pos);
        let dash = dash_attr(dash);
        let mut d = String::new();
        for &(x, y) in &se.points {
            if !y.is_finite() {
                continue;
            }
            let (x, y) = (px(x), py(y));
            let _ = write!(d, "{}{x:.1},{y:.1}", if d.is_empty() { "M" } else { " L" });
        }
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"{dash}/>"#
        );
        let finite: Vec<(f64, f64)> = se
            .points
            .iter()
            .copied()
            .filter(|p| p.1.is_finite())
            .collect();
        if let [(x, y)] = finite[..] {
            // A line of one point has no length: a dot shows it.
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        for (j, &(x, y)) in se.points.iter().enumerate() {
            if !y.is_finite() || !lower(k, j) {
                continue;
            }
            let (x, y) = (px(x), py(y));
            let _ = write!(
                s,
                r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{color}"/>"#,
                y - 5.0,
                x - 4.0,
                y + 2.0,
                x + 4.0,
                y + 2.0
            );
        }
        if pos < shown {
            let ly = t + 12.0 + 16.0 * pos as f64;
            let _ = write!(
                s,
                r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
                l + pw + 8.0,
                l + pw + 26.0,
                l + pw + 30.0,
                ly + 4.0,
                esc(&se.name)
            );
        }
    }
    let y = t + 12.0 + 16.0 * shown as f64 + 8.0;
    for (k, line) in more.iter().chain(&notes).enumerate() {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{line}</text>"##,
            l + pw + 8.0,
            y + 13.0 * k as f64
        );
    }
    s.push_str("</svg>\n");
    s
}

/// A chart without data as SVG text: the title, the x axis from 0 to `xmax` (no scale when
/// `xmax` is 0: an axis that is not time), no y scale, and `note` (a line of text each)
/// where the lines would be, saying why there is nothing to draw.
pub fn note_chart(title: &str, xlabel: &str, ylabel: &str, xmax: f64, note: &[String]) -> String {
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
    let mut s = String::new();
    chart_head(&mut s, title);
    x_ticks(&mut s, xmax);
    chart_frame(&mut s, xlabel, ylabel);
    let top = t + ph / 2.0 - 8.0 * (note.len() as f64 - 1.0);
    for (k, line) in note.iter().enumerate() {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
            l + pw / 2.0,
            top + 16.0 * k as f64 + 4.0,
            esc(line)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Whether a chart of `series` would draw no point.
fn no_points(series: &[Series]) -> bool {
    series
        .iter()
        .all(|s| s.points.iter().all(|p| !p.1.is_finite()))
}

/// Writes every file of the report into `dir`, after removing those an earlier report left
/// there ([`remove_outputs`]), and returns the summary.
pub fn write(dir: &Path, sc: &Scenario, runs: &[NicRun]) -> std::io::Result<Value> {
    std::fs::create_dir_all(dir)?;
    remove_outputs(dir)?;
    let an = analyse(sc, runs);
    let sum = summary(sc, &an);
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&sum).unwrap_or_default() + "\n",
    )?;
    std::fs::write(dir.join("timeseries.csv"), timeseries_csv(sc, &an))?;
    std::fs::write(dir.join("latency.csv"), latency_csv(sc, &an))?;
    std::fs::write(dir.join("latency-cdf.csv"), latency_cdf_csv(sc, &an))?;
    std::fs::write(dir.join("jain.csv"), jain_csv(sc, &an))?;
    // Every chart's x axis is the run's, in paper seconds where the scenario scales time;
    // a window's point sits at its middle, a shorter last window's at the middle of what
    // the run holds of it. (Its length, for rates, stays simulated.)
    let time = TimeAxis::of(sc);
    let window = |w: usize, len_ps: u64| {
        let from = w as u64 * len_ps;
        let to = (from + len_ps).min(sc.duration_ps);
        (
            (from + to) as f64 / 2e12 * time.per_simulated_s,
            (to - from) as f64 / 1e12,
        )
    };
    // Throughput per tenant, and per application when a tenant has several (Loom Fig. 11:
    // the jobs of T1), on one axis for every model, so that the charts compare.
    let per_tenant: Vec<Vec<Series>> = an
        .iter()
        .map(|a| {
            sc.tenants
                .iter()
                .map(|t| rate_series(t.name.clone(), &t.apps, a.run, sc, &window))
                .collect()
        })
        .collect();
    let link = sc.program.link.rate_bps as f64;
    // One chart per model, every model's series on the same axes; their file names.
    let charts = |per_model: &[Vec<Series>], file: &str, what: &str| {
        an.iter()
            .zip(per_model)
            .map(|(a, series)| {
                let name = format!("{file}-{}.svg", a.run.kind.name());
                let title = format!("{}: throughput per {what}", a.run.kind.name());
                std::fs::write(
                    dir.join(&name),
                    throughput_chart(&title, series, per_model, link, &time),
                )?;
                Ok(name)
            })
            .collect::<std::io::Result<Vec<String>>>()
    };
    let figs = charts(&per_tenant, "throughput", "tenant")?;
    let mut app_figs = Vec::new();
    if sc.tenants.iter().any(|t| t.apps.len() > 1) {
        let per_app: Vec<Vec<Series>> = an
            .iter()
            .map(|a| {
                sc.apps
                    .iter()
                    .enumerate()
                    .map(|(i, app)| {
                        let name = format!("{}/{}", sc.tenants[app.tenant].name, app.name);
                        rate_series(name, &[i], a.run, sc, &window)
                    })
                    .collect()
            })
            .collect();
        app_figs = charts(&per_app, "throughput-apps", "application")?;
    }
    let hl = headline_app(sc);
    let mut lat_at_least = Vec::new();
    let lat_series: Vec<Series> = an
        .iter()
        .map(|a| {
            let p90: Vec<(f64, metrics::Quantile)> = a
                .run
                .window_latency
                .iter()
                .enumerate()
                .filter_map(|(w, row)| {
                    row.get(hl)
                        .and_then(|h| h.as_ref())
                        .and_then(|h| h.quantile(0.9))
                        .map(|q| (window(w, sc.latency_window_ps).0, q))
                })
                .collect();
            lat_at_least.push(p90.iter().map(|(_, q)| q.at_least).collect());
            Series {
                name: a.run.kind.name().to_string(),
                points: p90
                    .iter()
                    .map(|(x, q)| (*x, q.value as f64 / 1e6))
                    .collect(),
            }
        })
        .collect();
    let hl_name = format!(
        "{}/{}",
        sc.tenants[sc.apps[hl].tenant].name, sc.apps[hl].name
    );
    let lat_title = format!("p90 latency of {hl_name}");
    let lat_chart = if !no_points(&lat_series) {
        // Logarithmic: the models' latencies differ by orders of magnitude (Loom Fig. 10).
        chart(
            &lat_title,
            &time.label,
            "µs",
            &lat_series,
            &Axes {
                xmax: Some(time.end),
                log_y: true,
                at_least: &lat_at_least,
                data_file: Some("latency.csv"),
                ..Axes::default()
            },
        )
    } else if matches!(sc.apps[hl].kind, AppKind::RequestResponse { .. }) {
        note_chart(
            &lat_title,
            &time.label,
            "µs",
            time.end,
            &[
                "No data: no request arrived within the run".into(),
                "(latency.csv counts none).".into(),
            ],
        )
    } else {
        // Response times per window are kept for request/response applications only.
        note_chart(
            &lat_title,
            &time.label,
            "µs",
            time.end,
            &[
                "No data: this scenario has no request/response".into(),
                "application, whose response times this charts".into(),
                "per window (latency.csv has no rows either).".into(),
                format!("The tables' p90 is {hl_name}'s packet delay"),
                "(write to wire) over the whole run.".into(),
            ],
        )
    };
    std::fs::write(dir.join("latency.svg"), lat_chart)?;
    std::fs::write(dir.join("latency-cdf.svg"), latency_cdf_chart(sc, &an, hl))?;
    let jain_series: Vec<Series> = an
        .iter()
        .map(|a| Series {
            name: a.run.kind.name().to_string(),
            points: a
                .windows
                .jain
                .iter()
                .enumerate()
                .filter_map(|(w, j)| j.map(|j| (window(w, sc.window_ps).0, j)))
                .collect(),
        })
        .collect();
    std::fs::write(dir.join("jain.svg"), jain_chart(&jain_series, &time))?;
    std::fs::write(dir.join("index.html"), html(sc, &sum, &figs, &app_figs))?;
    Ok(sum)
}

/// The top of the y axis of charts of values up to 1 (Jain's index, a CDF's fraction): 5 %
/// above 1, so that a line at exactly 1 (a model that held the policy in every window, a
/// CDF's end) is drawn inside the plot and not on its frame, where it was invisible.
pub const UNIT_TOP: f64 = 1.05;

/// The CDF of application `app`'s latency per model over the run (`latency-cdf.csv` has
/// every application's): the fraction of its samples at most x, rising from 0 at the
/// smallest, x on a logarithmic axis (the models differ by orders of magnitude, as in
/// `latency.svg`), y from 0 to [`UNIT_TOP`]. Unfinished requests (packets still queued) count at their age at the end:
/// a note says so where there are any. Without a sample, a note says why.
pub fn latency_cdf_chart(sc: &Scenario, an: &[Analysed], app: usize) -> String {
    let name = format!(
        "{}/{}",
        sc.tenants[sc.apps[app].tenant].name, sc.apps[app].name
    );
    let rr = matches!(sc.apps[app].kind, AppKind::RequestResponse { .. });
    let (title, xlabel) = if rr {
        (
            format!("CDF of {name}'s request latency"),
            "completion time, µs",
        )
    } else {
        (format!("CDF of {name}'s packet delay"), "write to wire, µs")
    };
    // Each line rises from 0 at its smallest value (a CDF's first step), unless that is 0,
    // on the axis's left edge.
    let series: Vec<Series> = an
        .iter()
        .map(|a| {
            let cdf = a.run.app_latency[app].cdf();
            let rise = cdf
                .first()
                .filter(|p| p.0 > 0)
                .map(|p| (p.0 as f64 / 1e6, 0.0));
            Series {
                name: a.run.kind.name().to_string(),
                points: rise
                    .into_iter()
                    .chain(cdf.into_iter().map(|(v, f)| (v as f64 / 1e6, f)))
                    .collect(),
            }
        })
        .collect();
    if no_points(&series) {
        return note_chart(
            &title,
            xlabel,
            "fraction \u{2264} x",
            0.0,
            &[
                "No data: no sample within the run".into(),
                if rr {
                    "(no request arrived).".into()
                } else {
                    "(no packet was written).".into()
                },
            ],
        );
    }
    let unfinished = an
        .iter()
        .any(|a| a.run.app_latency[app].unfinished.count() > 0);
    let notes: Vec<String> = if unfinished {
        [
            "unfinished ones count",
            "at their age at the",
            "end: the true curve",
            "is at or right of it",
        ]
        .map(String::from)
        .to_vec()
    } else {
        Vec::new()
    };
    chart(
        &title,
        xlabel,
        "fraction \u{2264} x",
        &series,
        &Axes {
            log_x: true,
            ymax: Some(UNIT_TOP),
            ystep: Some(0.25),
            notes: &notes,
            data_file: Some("latency-cdf.csv"),
            ..Axes::default()
        },
    )
}

/// The Jain chart of `series` (one per model: Jain's index per window, at the window's
/// middle, in `time`'s seconds) over the run, `time`: y from 0 to [`UNIT_TOP`], ticks
/// every 0.25 up to 1; without a point, a note saying why.
pub fn jain_chart(series: &[Series], time: &TimeAxis) -> String {
    let title = "Jain's index (throughput / ideal share, backlogged tenants)";
    if no_points(series) {
        return note_chart(
            title,
            &time.label,
            "Jain",
            time.end,
            &[
                "No data: no window has two or more tenants".into(),
                "backlogged throughout it (a bulk or unlimited".into(),
                "UDP application running), the tenants whose".into(),
                "shares Jain's index compares.".into(),
            ],
        );
    }
    chart(
        title,
        &time.label,
        "Jain",
        series,
        &Axes {
            xmax: Some(time.end),
            ymax: Some(UNIT_TOP),
            ystep: Some(0.25),
            data_file: Some("jain.csv"),
            ..Axes::default()
        },
    )
}

/// The throughput of applications `apps` together per window, bit/s: over the window's
/// length within the run, so that a shorter last window is not a drop (timeseries.csv has
/// its bytes, as sent); each point at the window's middle (`window(w, len)` gives both).
fn rate_series(
    name: String,
    apps: &[usize],
    run: &NicRun,
    sc: &Scenario,
    window: &dyn Fn(usize, u64) -> (f64, f64),
) -> Series {
    Series {
        name,
        points: run
            .window_bytes
            .iter()
            .enumerate()
            .map(|(w, b)| {
                let (x, len_s) = window(w, sc.window_ps);
                let bytes: u64 = apps.iter().map(|&i| b[i]).sum();
                (x, bytes as f64 * 8.0 / len_s)
            })
            .collect(),
    }
}

/// The unit to show rates of about `bps` in: its name and bits per second in one.
fn rate_unit(bps: f64) -> (&'static str, f64) {
    [("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)]
        .into_iter()
        .find(|&(_, u)| bps >= u)
        .unwrap_or(("bit/s", 1.0))
}

/// A throughput chart of `series` (bit/s) on the axis every model's chart of the kind
/// shares (`all`: each model's series): up to 5 % above the largest rate drawn, in round
/// ticks and a unit that reads (Gbit/s, Mbit/s, ...), so low rates are not flat on the
/// floor. When the rates reach half the link rate (or nothing was sent) the axis runs to
/// the link rate too, a dashed line marking it; otherwise a note says it is above.
fn throughput_chart(
    title: &str,
    series: &[Series],
    all: &[Vec<Series>],
    link_bps: f64,
    time: &TimeAxis,
) -> String {
    let top = all
        .iter()
        .flat_map(|m| drawn_series(m).into_iter().map(move |k| &m[k]))
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let reach = if top <= 0.0 || top >= link_bps / 2.0 {
        top.max(link_bps)
    } else {
        top
    };
    let (unit, scale) = rate_unit(reach);
    let (ymax, ystep) = nice_top(reach / scale * 1.05);
    let scaled: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s.points.iter().map(|&(x, y)| (x, y / scale)).collect(),
        })
        .collect();
    let (lu, ls) = rate_unit(link_bps);
    let link = format!("link {} {lu}", round(link_bps / ls, 6));
    chart(
        title,
        &time.label,
        unit,
        &scaled,
        &Axes {
            xmax: Some(time.end),
            ymax: Some(ymax),
            ystep: Some(ystep),
            reference: Some((link_bps / scale, &link)),
            data_file: Some("timeseries.csv"),
            ..Axes::default()
        },
    )
}

/// A percentile of a `latency_us` object as a table shows it: `≥ 125000` for a lower bound.
fn pct(lat: &Value, key: &str) -> String {
    let at_least = lat[format!("{key}_at_least")].as_bool().unwrap_or(false);
    format!("{}{}", if at_least { "≥ " } else { "" }, lat[key])
}

fn html(sc: &Scenario, sum: &Value, figs: &[String], app_figs: &[String]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>weft sim: {0}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         .grid{{display:flex;flex-wrap:wrap;gap:8px}}</style></head><body>\
         <h1>{0}</h1><p>{1}</p>",
        esc(&sc.name),
        esc(&sc.description)
    );
    if let Some(ts) = &sc.time_scale {
        let _ = write!(s, "<p>Time scale: {}", esc(ts));
        if let Some((paper, sim)) = sc.time_scale_ratio {
            let _ = write!(
                s,
                " ({} s simulated stand for {} paper seconds)",
                sum["duration_s"],
                round(sc.duration_ps as f64 * paper as f64 / sim as f64 / 1e12, 6)
            );
        }
        s.push_str("</p>");
    }
    let _ = write!(
        s,
        "<p>Policy <code>{}</code>, link {} Gbit/s, seed {}, {} s simulated, windows of {} s.</p>",
        esc(&sc.program.name),
        sc.program.link.rate_bps as f64 / 1e9,
        sc.seed,
        sum["duration_s"],
        sum["window_s"]
    );
    s.push_str("<h2>NIC models</h2><table><tr><th>model</th><th>jain_min</th><th>jain_mean</th><th>link utilization</th><th>headline p90 µs</th><th>doorbells/s</th><th>DMA reads/s</th><th>CPU cores busy</th><th>drops</th></tr>");
    let hl = headline_app(sc);
    let (ht, ha) = (&sc.tenants[sc.apps[hl].tenant].name, &sc.apps[hl].name);
    if let Some(m) = sum["nics"].as_object() {
        for (k, v) in m {
            let _ = write!(
                s,
                "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(k),
                v["jain_min"], v["jain_mean"], v["link_utilization"],
                pct(&v["tenants"][ht]["apps"][ha]["latency_us"], "p90"),
                v["doorbell_writes_per_s"], v["dma_reads_per_s"], v["cpu_cores_busy"], v["drops"]
            );
        }
    }
    s.push_str("</table><h2>Throughput per tenant</h2><div class=\"grid\">");
    for f in figs {
        let _ = write!(s, "<img src=\"{0}\" alt=\"{0}\">", esc(f));
    }
    if !app_figs.is_empty() {
        s.push_str("</div><h2>Throughput per application</h2><div class=\"grid\">");
        for f in app_figs {
            let _ = write!(s, "<img src=\"{0}\" alt=\"{0}\">", esc(f));
        }
    }
    s.push_str("</div><h2>Fairness and latency</h2><div class=\"grid\"><img src=\"jain.svg\" alt=\"jain\"><img src=\"latency.svg\" alt=\"latency\"><img src=\"latency-cdf.svg\" alt=\"latency CDF\"></div>");
    s.push_str("<h2>Shares</h2><table><tr><th>model</th><th>tenant</th><th>mean Gbit/s</th><th>share</th><th>ideal share</th><th>rel. error</th><th>p50 µs</th><th>p99 µs</th><th>drops</th></tr>");
    if let Some(m) = sum["nics"].as_object() {
        for (k, v) in m {
            if let Some(ts) = v["tenants"].as_object() {
                for (tn, tv) in ts {
                    let _ = write!(
                        s,
                        "<tr><th>{}</th><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        esc(k),
                        esc(tn),
                        tv["mean_bps"].as_f64().unwrap_or(0.0) / 1e9,
                        tv["share"], tv["ideal_share"], tv["rel_error"],
                        pct(&tv["latency_us"], "p50"), pct(&tv["latency_us"], "p99"), tv["drops"]
                    );
                }
            }
        }
    }
    s.push_str("</table>");
    if s.contains("<td>≥ ") {
        s.push_str(
            "<p>≥: a lower bound: the percentile falls on requests unfinished at the end of the \
             run (or, for bulk and UDP applications, packets still queued then), counted at \
             their age then.</p>",
        );
    }
    s.push_str(
        "<p>Files: <a href=\"summary.json\">summary.json</a>, <a href=\"timeseries.csv\">timeseries.csv</a>, \
         <a href=\"latency.csv\">latency.csv</a>, <a href=\"latency-cdf.csv\">latency-cdf.csv</a>, \
         <a href=\"jain.csv\">jain.csv</a>.</p></body></html>\n",
    );
    s
}

/// One scenario of a page over several reports ([`top_page`]).
pub struct TopScenario {
    /// Its report's directory, relative to the page (`weft demo`: the scenario's name).
    pub dir: String,
    /// Its report's summary ([`write()`]'s value, `summary.json`).
    pub summary: Value,
    /// What to look for in its figures (plain text).
    pub look_for: String,
    /// What the paper found, the figure cited (plain text).
    pub paper: String,
}

/// `s` as one segment of a relative URL: what is not an unreserved character
/// percent-encoded (a scenario named `a#b` or `50%` links to its own directory).
fn url_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The headline cells of one model of a summary, as `weft demo` prints them: Jain's index
/// (lowest window), the headline application's p90 in µs (`≥ ` before a lower bound) and
/// the link utilization; `-` where there is none.
pub fn headline_cells(sum: &Value, model: &str) -> [String; 3] {
    let v = &sum["nics"][model];
    let fmt = |x: &Value, digits| x.as_f64().map_or("-".into(), |x| number(x, digits));
    let lat = &headline_of(sum, v)["latency_us"];
    let mut p90 = fmt(&lat["p90"], 1);
    if lat["p90_at_least"].as_bool() == Some(true) {
        p90 = format!("≥ {p90}");
    }
    [fmt(&v["jain_min"], 4), p90, fmt(&v["link_utilization"], 3)]
}

/// The headline application's object in a model's part `v` of summary `sum`.
fn headline_of<'a>(sum: &Value, v: &'a Value) -> &'a Value {
    let (t, a) = sum["headline_app"]
        .as_str()
        .and_then(|h| h.split_once('/'))
        .unwrap_or(("", ""));
    &v["tenants"][t]["apps"][a]
}

/// The charts a report holds, by its summary: `throughput-MODEL.svg` per model (and
/// `throughput-apps-MODEL.svg` where a tenant has several applications), then Jain's
/// index, the latency over time and its CDF.
pub fn report_charts(sum: &Value) -> Vec<String> {
    let empty = Map::new();
    let nics = sum["nics"].as_object().unwrap_or(&empty);
    let apps = nics.values().next().and_then(|v| v["tenants"].as_object());
    let several = apps.is_some_and(|ts| {
        ts.values()
            .any(|t| t["apps"].as_object().is_some_and(|a| a.len() > 1))
    });
    let mut charts: Vec<String> = nics.keys().map(|k| format!("throughput-{k}.svg")).collect();
    if several {
        charts.extend(nics.keys().map(|k| format!("throughput-apps-{k}.svg")));
    }
    charts.extend(["jain.svg", "latency.svg", "latency-cdf.svg"].map(String::from));
    charts
}

/// The data files a report holds beside its charts.
pub const DATA_FILES: [&str; 5] = [
    "summary.json",
    "timeseries.csv",
    "latency.csv",
    "latency-cdf.csv",
    "jain.csv",
];

/// A page over several reports (`weft demo`'s `index.html`): the headline table (per
/// scenario and model, the figures `weft demo` prints: Jain's index, the headline
/// application's p90, the link utilization, `≥` before a lower bound), `legend` under it;
/// then per scenario what to look for beside what the paper found, its charts as thumbnails
/// and links to its report and data files. Every text is escaped; nothing varies between
/// runs of the same reports.
pub fn top_page(title: &str, intro: &str, legend: &str, scenarios: &[TopScenario]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{0}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em;max-width:75em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px}}\
         td.n{{text-align:right}}.grid{{display:flex;flex-wrap:wrap;gap:8px}}\
         .grid img{{width:260px;border:1px solid #ddd}}\
         .cmp{{display:flex;flex-wrap:wrap;gap:1.5em}}.cmp div{{flex:1;min-width:20em}}</style>\
         </head><body><h1>{0}</h1><p>{1}</p>",
        esc(title),
        esc(intro)
    );
    s.push_str(
        "<h2 id=\"headline\">Headline</h2><table><tr><th>scenario</th><th>model</th>\
         <th>jain_min</th><th>latency app p90 µs</th><th>link utilization</th></tr>",
    );
    let empty = Map::new();
    let mut notes = Vec::new();
    for sc in scenarios {
        let sum = &sc.summary;
        let nics = sum["nics"].as_object().unwrap_or(&empty);
        let headline = sum["headline_app"].as_str().unwrap_or("");
        for (i, (k, v)) in nics.iter().enumerate() {
            s.push_str("<tr>");
            if i == 0 {
                let _ = write!(
                    s,
                    "<th rowspan=\"{}\"><a href=\"#{}\">{}</a><br>({})</th>",
                    nics.len(),
                    esc(&url_segment(&sc.dir)),
                    esc(sum["scenario"].as_str().unwrap_or("")),
                    esc(headline)
                );
            }
            let [jain, p90, util] = headline_cells(sum, k);
            let _ = write!(
                s,
                "<th>{}</th><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(k),
                esc(&jain),
                esc(&p90),
                esc(&util)
            );
            let app = headline_of(sum, v);
            if app["latency_us"]["p90_at_least"].as_bool() == Some(true) {
                let scn = sum["scenario"].as_str().unwrap_or("");
                notes.push(if app["requests"].is_object() {
                    format!(
                        "≥ {scn} {k}: {} of {headline}'s {} requests unfinished at the end, \
                         counted at their age then: the p90 is at least that",
                        app["requests"]["unfinished"], app["requests"]["issued"]
                    )
                } else {
                    format!(
                        "≥ {scn} {k}: {} of {headline}'s packets still queued at the end ({} \
                         sent), counted at their age then: the p90 packet delay is at least that",
                        app["packets"]["queued_at_end"], app["packets"]["sent"]
                    )
                });
            }
        }
    }
    s.push_str("</table>");
    for n in &notes {
        let _ = write!(s, "<p>{}</p>", esc(n));
    }
    let _ = write!(s, "<p>{}</p>", esc(legend));
    for sc in scenarios {
        let sum = &sc.summary;
        let dir = url_segment(&sc.dir);
        let name = sum["scenario"].as_str().unwrap_or("");
        let _ = write!(
            s,
            "<h2 id=\"{0}\">{1}</h2><p>{2}</p>",
            esc(&dir),
            esc(name),
            esc(sum["description"].as_str().unwrap_or(""))
        );
        if let Some(ts) = sum["time_scale"].as_str() {
            let _ = write!(s, "<p>Time scale: {}.</p>", esc(ts));
        }
        let _ = write!(
            s,
            "<div class=\"cmp\"><div><h3>What to look for</h3><p>{}</p></div>\
             <div><h3>What the paper found</h3><p>{}</p></div></div>\
             <p><a href=\"{2}/index.html\">{3}'s report</a> (every table and chart). Data: ",
            esc(&sc.look_for),
            esc(&sc.paper),
            esc(&dir),
            esc(name)
        );
        for (i, f) in DATA_FILES.iter().enumerate() {
            let _ = write!(
                s,
                "{}<a href=\"{}/{f}\">{f}</a>",
                if i > 0 { ", " } else { "" },
                esc(&dir)
            );
        }
        s.push_str(".</p><div class=\"grid\">");
        for f in report_charts(sum) {
            let _ = write!(
                s,
                "<a href=\"{0}/{1}\"><img src=\"{0}/{1}\" alt=\"{2}: {1}\"></a>",
                esc(&dir),
                esc(&f),
                esc(name)
            );
        }
        s.push_str("</div>");
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's x axis is the run's with round ticks: 0, 0.5, 1, 1.5 for 1.8 s (the
    /// charts read 0, 0.449, 0.898, 1.35, 1.8).
    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(1.8), [0.0, 0.5, 1.0, 1.5]);
        assert_eq!(ticks(0.304), [0.0, 0.1, 0.2, 0.3]);
        assert_eq!(ticks(3.04), [0.0, 1.0, 2.0, 3.0]);
        assert_eq!(ticks(2.89), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
        assert_eq!(ticks(0.2), [0.0, 0.05, 0.1, 0.15, 0.2]);
        assert_eq!(ticks(0.001), [0.0, 0.00025, 0.0005, 0.00075, 0.001]);
        for max in [3e-12, 0.7, 1.0, 7.0, 12.0, 99.0, 1e6, 9.2e6] {
            let t = ticks(max);
            assert!((4..=7).contains(&t.len()), "{max}: {t:?}");
            assert!(t[t.len() - 1] <= max * (1.0 + 1e-9), "{max}: {t:?}");
        }
        assert_eq!(ticks(0.0), [0.0]);
    }

    /// A linear axis's top is a round step's multiple at or above the value, its ticks
    /// every step: 12.5 by 2.5 for 10.5 (a 10 Gbit/s link with 5 % room), 8 by 2 for 7.4
    /// (where the ticks of 8 alone would be 0, 2.5, 5, 7.5 and leave the top unlabelled).
    #[test]
    fn axis_tops_are_round_multiples_of_their_step() {
        assert_eq!(nice_top(10.5), (12.5, 2.5));
        assert_eq!(nice_top(42.0), (50.0, 10.0));
        assert_eq!(nice_top(7.4), (8.0, 2.0));
        assert_eq!(nice_top(10.0), (10.0, 2.5));
        assert_eq!(nice_top(0.0105), (0.0125, 0.0025));
        assert_eq!(nice_top(0.0), (1.0, 0.25));
        for v in [0.003, 0.7, 1.0, 3.3, 9.99, 12.0, 99.0, 1e6, 9.2e6] {
            let (top, step) = nice_top(v);
            let n = top / step;
            assert!(
                top >= v && (n - n.round()).abs() < 1e-6,
                "{v}: {top} {step}"
            );
            assert!((3.0..=8.0).contains(&n.round()), "{v}: {top} by {step}");
        }
    }

    /// A directory name links as itself where it can, percent-encoded where it cannot.
    #[test]
    fn url_segments_are_encoded() {
        assert_eq!(url_segment("loom-fig9"), "loom-fig9");
        assert_eq!(url_segment("a#b%c?d"), "a%23b%25c%3Fd");
        assert_eq!(url_segment("é"), "%C3%A9");
    }

    #[test]
    fn decades_cover_the_positive_values() {
        assert_eq!(decades([0.42, 5.0, 680.0].into_iter()), (-1, 3));
        assert_eq!(decades([10.0, 100.0].into_iter()), (1, 2));
        assert_eq!(decades([5.0].into_iter()), (0, 1));
        assert_eq!(decades([0.001, 1000.0].into_iter()), (-3, 3));
        assert_eq!(decades([0.0, -1.0, f64::NAN].into_iter()), (0, 1));
        assert_eq!(decade_label(3), "1000");
        assert_eq!(decade_label(0), "1");
        assert_eq!(decade_label(-2), "0.01");
    }

    /// A point at or below 0 has no place on a logarithmic axis: it is drawn on the floor,
    /// and a note under the legend says how many are.
    #[test]
    fn log_axis_puts_zero_on_its_floor_and_says_so() {
        let one = |points: Vec<(f64, f64)>| {
            let s = [Series {
                name: "m".into(),
                points,
            }];
            let ax = Axes {
                xmax: Some(3.0),
                log_y: true,
                ..Axes::default()
            };
            chart("t", "x", "µs", &s, &ax)
        };
        let svg = one(vec![(0.5, 0.0), (1.5, 20.0), (2.5, 300.0)]);
        assert!(
            svg.contains(">1 point \u{2264} 0 drawn</text>")
                && svg.contains(">on the axis floor</text>"),
            "{svg}"
        );
        // 10 to 1000, the zero on the floor (y 260), 20 log10(2) of a decade (116 px) above 10.
        assert!(
            svg.contains(r#"<path d="M118.3,260.0 L235.0,225.1 L351.7,88.7""#),
            "{svg}"
        );
        for l in [
            ">10</text>",
            ">100</text>",
            ">1000</text>",
            ">µs (log scale)<",
        ] {
            assert!(svg.contains(l), "{l}: {svg}");
        }
        assert!(!svg.contains(r#"text-anchor="end">1</text>"#), "{svg}");
        let svg = one(vec![(0.5, 2.0), (1.5, 20.0)]);
        assert!(!svg.contains("axis floor"), "{svg}");
    }
}
