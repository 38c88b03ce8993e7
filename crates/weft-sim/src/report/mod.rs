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
//! at exactly 1 is a line inside the plot, not hidden on its frame, and as models often
//! share an index (several at 1), each Jain line carries markers of its own shape, side
//! by side where lines overlap, and a note names the models whose lines coincide.
//! Throughput is drawn per tenant, and per application (`tenant/app`) when a tenant has
//! several (Loom Fig. 11's jobs); its y axis is shared by every model's chart of the kind, runs 5 % above the
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

//!
//! Layout: this file holds the list of files, the analysis of the runs and [`write()`];
//! `summary` builds summary.json, whose schema its types write down ([`Summary`] and what
//! it holds), `data` the CSV files, `svg` draws SVG line charts (axes, ticks, legends,
//! styles), `figures` the report's figures (throughput, p90 latency, latency CDF, Jain's
//! index), `pages` the report's and the top page's HTML, and `text` the number and text
//! formatting they share.

mod data;
mod figures;
mod pages;
mod summary;
mod svg;
#[cfg(test)]
mod tests;
mod text;

use std::path::Path;

use serde_json::Value;

use crate::metrics::{self, IdealModel, Windows};
use crate::nic::NicKind;
use crate::scenario::{AppKind, Scenario};
use crate::sim::NicRun;

use figures::{jain_series, latency_chart, rate_series, throughput_chart};
use pages::html;

pub use data::{jain_csv, latency_cdf_csv, latency_csv, timeseries_csv};
pub use figures::{jain_chart, latency_cdf_chart, UNIT_TOP};
pub use pages::{headline_cells, report_charts, top_page, TopScenario, DATA_FILES};
pub use summary::{
    summary, AppSummary, ByName, Interdeparture, JainPhase, Kind, LatencySummary, NicSummary,
    Packets, Requests, Summary, TenantSummary,
};
pub use svg::{line_chart, note_chart, Series, TimeAxis, TIME_AXIS};
pub use text::{count, esc, number};

/// `x` to `digits` significant digits (0 for 0 and what is not finite).
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return 0.0;
    }
    let mag = x.abs().log10().floor() as i32;
    let f = 10f64.powi(digits - 1 - mag);
    (x * f).round() / f
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

/// Writes every file of the report into `dir`, after removing those an earlier report left
/// there ([`remove_outputs`]), and returns the summary: the data files, then the charts
/// (throughput, latency, its CDF, Jain's index), then the page that shows them.
pub fn write(dir: &Path, sc: &Scenario, runs: &[NicRun]) -> std::io::Result<Value> {
    std::fs::create_dir_all(dir)?;
    remove_outputs(dir)?;
    let an = analyse(sc, runs);
    let sum = write_data(dir, sc, &an)?;
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
    let (figs, app_figs) = write_throughput(dir, sc, &an, &time, &window)?;
    let hl = headline_app(sc);
    std::fs::write(
        dir.join("latency.svg"),
        latency_chart(sc, &an, hl, &time, &window),
    )?;
    std::fs::write(dir.join("latency-cdf.svg"), latency_cdf_chart(sc, &an, hl))?;
    std::fs::write(
        dir.join("jain.svg"),
        jain_chart(&jain_series(sc, &an, &window), &time),
    )?;
    std::fs::write(dir.join("index.html"), html(sc, &sum, &figs, &app_figs))?;
    Ok(sum)
}

/// Writes summary.json and the CSV files, and returns the summary.
fn write_data(dir: &Path, sc: &Scenario, an: &[Analysed]) -> std::io::Result<Value> {
    let sum = summary(sc, an);
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&sum).unwrap_or_default() + "\n",
    )?;
    std::fs::write(dir.join("timeseries.csv"), timeseries_csv(sc, an))?;
    std::fs::write(dir.join("latency.csv"), latency_csv(sc, an))?;
    std::fs::write(dir.join("latency-cdf.csv"), latency_cdf_csv(sc, an))?;
    std::fs::write(dir.join("jain.csv"), jain_csv(sc, an))?;
    Ok(sum)
}

/// Writes the throughput charts: per tenant, and per application when a tenant has
/// several (Loom Fig. 11: the jobs of T1), one per model, every model's on the same axis
/// so that the charts compare; returns their file names (per tenant, per application).
/// `window(w, len_ps)` is window w's point on the time axis and its length, s.
fn write_throughput(
    dir: &Path,
    sc: &Scenario,
    an: &[Analysed],
    time: &TimeAxis,
    window: &dyn Fn(usize, u64) -> (f64, f64),
) -> std::io::Result<(Vec<String>, Vec<String>)> {
    let per_tenant: Vec<Vec<Series>> = an
        .iter()
        .map(|a| {
            sc.tenants
                .iter()
                .map(|t| rate_series(t.name.clone(), &t.apps, a.run, sc, window))
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
                    throughput_chart(&title, series, per_model, link, time),
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
                        rate_series(name, &[i], a.run, sc, window)
                    })
                    .collect()
            })
            .collect();
        app_figs = charts(&per_app, "throughput-apps", "application")?;
    }
    Ok((figs, app_figs))
}
