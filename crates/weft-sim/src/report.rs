//! Reports: `summary.json` (per NIC model: `jain_min` and Jain's index per set of backlogged
//! tenants, `link_utilization` (the fraction of the run the link was transmitting),
//! `doorbell_writes_per_s`, `dma_reads_per_s`, CPU; per tenant and application: `mean_bps`,
//! `share`, `ideal_share`, `rel_error`, `latency_us` {p50, p90, p99, each with `_at_least`,
//! samples, unfinished}, `drops`; per request/response application `requests` {issued,
//! completed, unfinished}), tidy `timeseries.csv` (window_start_s, nic, tenant, app, bytes),
//! `latency.csv` and `jain.csv` per window, SVG line charts drawn here (no plotting
//! dependency: a chart is a few dozen SVG elements; a chart with nothing to draw, such as
//! latency without a request/response application, says so and why), and `index.html`
//! setting the models side by side as the papers' figures do. Names and other text from the
//! scenario are escaped in HTML and SVG.
//!
//! Request latency percentiles are over every request that arrived within the run, an
//! unfinished one counting as its age at the end ([`crate::metrics::Latency`]); one that
//! falls on unfinished requests is a lower bound: `"p90_at_least": true` in summary.json,
//! `true` in latency.csv's `p90_at_least`, `≥` in tables, a triangle in latency.svg.
//!
//! Files: [`OUTPUTS`] and `throughput-MODEL.svg` per model; [`write`] first removes those an
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

fn round(x: f64, digits: i32) -> f64 {
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

/// The files a report writes besides `throughput-MODEL.svg` per model.
pub const OUTPUTS: [&str; 7] = [
    "summary.json",
    "timeseries.csv",
    "latency.csv",
    "jain.csv",
    "latency.svg",
    "jain.svg",
    "index.html",
];

/// The names of every file a report may write: [`OUTPUTS`] and `throughput-MODEL.svg` of
/// every model.
pub fn output_names() -> Vec<String> {
    OUTPUTS
        .iter()
        .map(|s| s.to_string())
        .chain(NicKind::ALL.map(|k| format!("throughput-{}.svg", k.name())))
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
                }
                let g = &r.app_gaps[i];
                if let (Some(m), Some(sd)) = (g.mean_ps(), g.std_ps()) {
                    v["interdeparture_us"] = json!({
                        "mean": round(m / 1e6, 6),
                        "std": round(sd / 1e6, 6),
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

/// One series of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let e = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * e {
            return m * e;
        }
    }
    10.0 * e
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

/// The `i`th of the five x-axis labels (0 to `xmax`).
fn x_tick(s: &mut String, i: usize, xmax: f64) {
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
    let x = l + pw * i as f64 / 4.0;
    let _ = write!(
        s,
        r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        t + ph + 14.0,
        round(xmax * i as f64 / 4.0, 3)
    );
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

/// A line chart as SVG text (x and y from zero).
pub fn line_chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    ymax: Option<f64>,
) -> String {
    chart(title, xlabel, ylabel, series, None, ymax, &[])
}

/// [`line_chart`], its x axis running to `xmax` when every point is at x = 0 (else to the
/// largest x; without `xmax`, to 10^-12); `at_least[k][j]`: point j of series k is only a
/// lower bound, marked with a triangle (missing: not).
fn chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    xmax: Option<f64>,
    ymax: Option<f64>,
    at_least: &[Vec<bool>],
) -> String {
    let lower = |k: usize, j: usize| at_least.get(k).and_then(|v| v.get(j)) == Some(&true);
    let (w, h, l, r, t, b) = CHART;
    let pw = w - l - r;
    let ph = h - t - b;
    let data_xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let xmax = match xmax {
        Some(x) if data_xmax <= 0.0 && x > 0.0 => x,
        _ => data_xmax.max(1e-12),
    };
    let ymax = ymax.unwrap_or_else(|| {
        nice_max(
            series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .filter(|v| v.is_finite())
                .fold(0.0f64, f64::max),
        )
    });
    let mut s = String::new();
    chart_head(&mut s, title);
    for i in 0..=4 {
        let y = t + ph - ph * i as f64 / 4.0;
        let v = ymax * i as f64 / 4.0;
        let _ = write!(
            s,
            r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            l + pw,
            l - 4.0,
            y + 4.0,
            round(v, 3)
        );
        x_tick(&mut s, i, xmax);
    }
    chart_frame(&mut s, xlabel, ylabel);
    for (k, se) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let mut d = String::new();
        for (x, y) in &se.points {
            if !y.is_finite() {
                continue;
            }
            let px = l + pw * x / xmax;
            let py = t + ph - ph * (y / ymax).clamp(0.0, 1.05);
            let _ = write!(
                d,
                "{}{px:.1},{py:.1}",
                if d.is_empty() { "M" } else { " L" }
            );
        }
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5"/>"#
        );
        for (j, (x, y)) in se.points.iter().enumerate() {
            if !y.is_finite() || !lower(k, j) {
                continue;
            }
            let px = l + pw * x / xmax;
            let py = t + ph - ph * (y / ymax).clamp(0.0, 1.05);
            let _ = write!(
                s,
                r#"<path d="M{px:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{color}"/>"#,
                py - 5.0,
                px - 4.0,
                py + 2.0,
                px + 4.0,
                py + 2.0
            );
        }
        let ly = t + 12.0 + 16.0 * k as f64;
        let _ = write!(
            s,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            l + pw + 8.0,
            l + pw + 26.0,
            l + pw + 30.0,
            ly + 4.0,
            esc(&se.name)
        );
    }
    if at_least.iter().any(|v| v.contains(&true)) {
        let y = t + 12.0 + 16.0 * series.len() as f64 + 8.0;
        for (k, line) in [
            "\u{25b2} at least: the",
            "percentile falls on",
            "requests unfinished",
            "at the end",
        ]
        .iter()
        .enumerate()
        {
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{line}</text>"##,
                l + pw + 8.0,
                y + 13.0 * k as f64
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// A chart without data as SVG text: the title, the x axis from 0 to `xmax`, no y scale,
/// and `note` (a line of text each) where the lines would be, saying why there is nothing
/// to draw.
pub fn note_chart(title: &str, xlabel: &str, ylabel: &str, xmax: f64, note: &[String]) -> String {
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
    let mut s = String::new();
    chart_head(&mut s, title);
    for i in 0..=4 {
        x_tick(&mut s, i, xmax);
    }
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
    std::fs::write(dir.join("jain.csv"), jain_csv(sc, &an))?;
    let wsec = sc.window_ps as f64 / 1e12;
    let mut figs = Vec::new();
    for a in &an {
        let series: Vec<Series> = sc
            .tenants
            .iter()
            .map(|t| Series {
                name: t.name.clone(),
                points: a
                    .run
                    .window_bytes
                    .iter()
                    .enumerate()
                    .map(|(w, b)| {
                        let bytes: u64 = t.apps.iter().map(|&i| b[i]).sum();
                        (w as f64 * wsec, bytes as f64 * 8.0 / wsec / 1e9)
                    })
                    .collect(),
            })
            .collect();
        let name = format!("throughput-{}.svg", a.run.kind.name());
        let ymax = nice_max(sc.program.link.rate_bps as f64 / 1e9);
        std::fs::write(
            dir.join(&name),
            chart(
                &format!("{}: throughput per tenant", a.run.kind.name()),
                "time (s, simulated)",
                "Gbit/s",
                &series,
                Some(sc.duration_ps as f64 / 1e12),
                Some(ymax),
                &[],
            ),
        )?;
        figs.push(name);
    }
    let hl = headline_app(sc);
    let lwin = sc.latency_window_ps as f64 / 1e12;
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
                        .map(|q| (w as f64 * lwin, q))
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
    let dur_s = sc.duration_ps as f64 / 1e12;
    let lat_title = format!("p90 latency of {hl_name}");
    let lat_chart = if !no_points(&lat_series) {
        chart(
            &lat_title,
            "time (s, simulated)",
            "µs",
            &lat_series,
            Some(dur_s),
            None,
            &lat_at_least,
        )
    } else if matches!(sc.apps[hl].kind, AppKind::RequestResponse { .. }) {
        note_chart(
            &lat_title,
            "time (s, simulated)",
            "µs",
            dur_s,
            &[
                "No data: no request arrived within the run".into(),
                "(latency.csv counts none).".into(),
            ],
        )
    } else {
        // Response times per window are kept for request/response applications only.
        note_chart(
            &lat_title,
            "time (s, simulated)",
            "µs",
            dur_s,
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
    let jain_series: Vec<Series> = an
        .iter()
        .map(|a| Series {
            name: a.run.kind.name().to_string(),
            points: a
                .windows
                .jain
                .iter()
                .enumerate()
                .filter_map(|(w, j)| j.map(|j| (w as f64 * wsec, j)))
                .collect(),
        })
        .collect();
    let jain_title = "Jain's index (throughput / ideal share, backlogged tenants)";
    let jain_chart = if no_points(&jain_series) {
        note_chart(
            jain_title,
            "time (s, simulated)",
            "Jain",
            dur_s,
            &[
                "No data: no window has two or more tenants".into(),
                "backlogged throughout it (a bulk or unlimited".into(),
                "UDP application running), the tenants whose".into(),
                "shares Jain's index compares.".into(),
            ],
        )
    } else {
        chart(
            jain_title,
            "time (s, simulated)",
            "Jain",
            &jain_series,
            Some(dur_s),
            Some(1.0),
            &[],
        )
    };
    std::fs::write(dir.join("jain.svg"), jain_chart)?;
    std::fs::write(dir.join("index.html"), html(sc, &sum, &figs))?;
    Ok(sum)
}

/// A percentile of a `latency_us` object as a table shows it: `≥ 125000` for a lower bound.
fn pct(lat: &Value, key: &str) -> String {
    let at_least = lat[format!("{key}_at_least")].as_bool().unwrap_or(false);
    format!("{}{}", if at_least { "≥ " } else { "" }, lat[key])
}

fn html(sc: &Scenario, sum: &Value, figs: &[String]) -> String {
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
        let _ = write!(s, "<p>Time scale: {}</p>", esc(ts));
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
    s.push_str("</div><h2>Fairness and latency</h2><div class=\"grid\"><img src=\"jain.svg\" alt=\"jain\"><img src=\"latency.svg\" alt=\"latency\"></div>");
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
             run, counted at their age then.</p>",
        );
    }
    s.push_str(
        "<p>Files: summary.json, timeseries.csv, latency.csv, jain.csv.</p></body></html>\n",
    );
    s
}
