//! The report's figures: throughput per tenant (and per application) on an axis shared by
//! every model's chart, the headline application's p90 latency over time and its latency
//! CDF, and Jain's index over time, each from the analysed runs.
//!
//! Cost: linear in windows × applications × models (the CDF, in latency samples).

use super::svg::{chart, drawn_series, nice_top, no_points, note_chart, Axes, Series, TimeAxis};
use super::{round, Analysed};
use crate::metrics;
use crate::scenario::{AppKind, Scenario};
use crate::sim::NicRun;

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
/// every 0.25 up to 1. Models often share an index (several at 1, the policy held), so
/// each line carries markers of its own shape, side by side where lines overlap, and a
/// note names the models whose lines coincide throughout (`sq and loom coincide at
/// 1.0`). Without a point, a note saying why.
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
            mark_lines: true,
            ..Axes::default()
        },
    )
}

/// The p90 latency of application `hl` (the headline one) per latency window, per model,
/// on a logarithmic axis (the models' latencies differ by orders of magnitude, Loom
/// Fig. 10), a triangle on each p90 that is a lower bound; without a point, a note saying
/// why. `window(w, len_ps)` is window w's point on `time`'s axis (and its length).
pub(super) fn latency_chart(
    sc: &Scenario,
    an: &[Analysed],
    hl: usize,
    time: &TimeAxis,
    window: &dyn Fn(usize, u64) -> (f64, f64),
) -> String {
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
    if !no_points(&lat_series) {
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
    }
}

/// Jain's index per window of each model's run, a point at each window's middle
/// (`window(w, len_ps)`), none for a window without one.
pub(super) fn jain_series(
    sc: &Scenario,
    an: &[Analysed],
    window: &dyn Fn(usize, u64) -> (f64, f64),
) -> Vec<Series> {
    an.iter()
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
        .collect()
}

/// The throughput of applications `apps` together per window, bit/s: over the window's
/// length within the run, so that a shorter last window is not a drop (timeseries.csv has
/// its bytes, as sent); each point at the window's middle (`window(w, len)` gives both).
pub(super) fn rate_series(
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
pub(super) fn throughput_chart(
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
