//! SVG line charts, drawn here without a plotting dependency: the frame, round ticks on
//! linear and whole-decade logarithmic axes, lines in 10 colours times 4 dash styles, the
//! legend (as many names as fit, then how many more), and notes for what is not drawn.
//! A chart may mark its lines ([`Axes::mark_lines`]): a marker shape per line, placed in
//! slots of its own along x, so that lines that overlap each still show, and a note that
//! names the lines that coincide throughout.
//!
//! Invariants: at most [`MAX_LINES`] lines a chart (the largest totals); no two lines look
//! the same; on a marked chart, no two lines' markers share a place; a chart with nothing
//! to draw says so and why; the same series give the same bytes.
//!
//! Cost: linear in the points drawn.

use std::fmt::Write as _;

use super::round;
use super::text::{esc, time_text};
use crate::scenario::Scenario;

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
pub(super) fn nice_top(v: f64) -> (f64, f64) {
    if !(v.is_finite() && v > 0.0) {
        return (1.0, 0.25);
    }
    let step = tick_step(v);
    let n = (v / step * (1.0 - 1e-9)).ceil().max(1.0);
    (round(n * step, 9), step)
}

/// Tick positions from 0 to `max`: the multiples within it of the largest step of 1, 2,
/// 2.5 or 5 × 10^k that leaves at least three steps (4 to 7 ticks; 0, 0.5, 1, 1.5 for 1.8).
pub(super) fn ticks(max: f64) -> Vec<f64> {
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
pub(super) fn decades(values: impl Iterator<Item = f64>) -> (i32, i32) {
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
pub(super) fn decade_label(k: i32) -> String {
    if k >= 0 {
        format!("1{}", "0".repeat(k as usize))
    } else {
        format!("0.{}1", "0".repeat((-k - 1) as usize))
    }
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
pub(super) struct Axes<'a> {
    /// The x axis runs from 0 to this (a report's: the run's duration); without it, to the
    /// largest x (to 1 when that is 0 or less).
    pub(super) xmax: Option<f64>,
    /// A linear y axis runs from 0 to this, with ticks every `ystep` (default: round steps
    /// within it, [`tick_step`]); without it, to a round number at or above the largest y.
    pub(super) ymax: Option<f64>,
    pub(super) ystep: Option<f64>,
    /// A level to mark on a linear axis (the link rate): `(y, label)`: a dashed line when
    /// it is on the axis, else a note under the legend saying it is above.
    pub(super) reference: Option<(f64, &'a str)>,
    /// A logarithmic y axis instead, over whole decades from the smallest positive y to the
    /// largest; a point at or below 0 is drawn on its floor, and a note says how many are.
    pub(super) log_y: bool,
    /// A logarithmic x axis instead of one from 0 to `xmax`, over whole decades from the
    /// smallest positive x to the largest; a point at or below 0 is drawn on its left
    /// edge, and a note says how many are.
    pub(super) log_x: bool,
    /// Notes of the chart's own under the legend (a line each, about 18 characters).
    pub(super) notes: &'a [String],
    /// `at_least[k][j]`: point j of series k is only a lower bound, marked with a triangle
    /// (missing: not).
    pub(super) at_least: &'a [Vec<bool>],
    /// The file holding every series, named when the legend leaves some out.
    pub(super) data_file: Option<&'a str>,
    /// Marks each line with a shape of its own ([`marker`]) at points staggered along x,
    /// in the plot and in the legend, so that lines that overlap (models at the same
    /// index) each still show; a note names the lines that coincide throughout.
    pub(super) mark_lines: bool,
}

/// The indices of the series a chart draws: all, or of more than [`MAX_LINES`], those
/// with the largest sums of their (finite) values, in their order.
pub(super) fn drawn_series(series: &[Series]) -> Vec<usize> {
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

/// A line chart of `series` as SVG text, its axes as `ax` says: the frame and the axes,
/// the notes and the legend's room, then each line with its legend entry.
pub(super) fn chart(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    ax: &Axes,
) -> String {
    let drawn = drawn_series(series);
    let plot = Plot::new(series, &drawn, ax);
    let reference = ax
        .reference
        .filter(|r| r.0.is_finite() && r.0 > 0.0)
        .map(|r| (r, r.0 <= plot.ymax * (1.0 + 1e-9)));
    let mut s = String::new();
    chart_head(&mut s, title);
    if ax.log_y {
        log_y_ticks(&mut s, plot.y_decades.0, plot.y_decades.1);
    } else {
        linear_y_ticks(&mut s, &plot);
        if let Some(((level, label), true)) = reference {
            reference_line(&mut s, plot.py(level), label);
        }
    }
    if ax.log_x {
        log_x_ticks(&mut s, plot.x_decades.0, plot.x_decades.1);
    } else {
        x_ticks(&mut s, plot.xmax);
    }
    let scale = |label: &str, log: bool| {
        if log {
            format!("{label} (log scale)")
        } else {
            label.to_string()
        }
    };
    chart_frame(&mut s, &scale(xlabel, ax.log_x), &scale(ylabel, ax.log_y));
    let mut notes = chart_notes(series, &drawn, ax, reference);
    if ax.mark_lines {
        notes.extend(coincidence_notes(series, &drawn, &plot));
    }
    let (shown, more) = legend_room(series, &drawn, ax, notes.len());
    for (pos, &k) in drawn.iter().enumerate() {
        let legend = (pos < shown).then_some(ax.mark_lines);
        draw_series(&mut s, &plot, &series[k], |j| ax.lower(k, j), pos, legend);
    }
    if ax.mark_lines {
        // After every line, so that no line covers another's markers.
        for (pos, &k) in drawn.iter().enumerate() {
            draw_markers(&mut s, &plot, &series[k], pos, drawn.len());
        }
    }
    side_text(&mut s, shown, more.iter().chain(&notes));
    s.push_str("</svg>\n");
    s
}

impl Axes<'_> {
    /// Whether point `j` of series `k` is only a lower bound.
    fn lower(&self, k: usize, j: usize) -> bool {
        self.at_least.get(k).and_then(|v| v.get(j)) == Some(&true)
    }
}

/// The points of the series a chart draws, in drawing order.
fn drawn_points<'s>(
    series: &'s [Series],
    drawn: &'s [usize],
) -> impl Iterator<Item = (f64, f64)> + 's {
    drawn.iter().flat_map(|&k| series[k].points.iter().copied())
}

/// Where a chart's values land: its axes' ranges and scales, and the pixels of a value.
struct Plot {
    /// A linear x axis's end, and a logarithmic one's decades.
    xmax: f64,
    x_decades: (i32, i32),
    /// A linear y axis's top and tick step, and a logarithmic one's decades.
    ymax: f64,
    ystep: f64,
    y_decades: (i32, i32),
    log_x: bool,
    log_y: bool,
}

impl Plot {
    /// The axes of a chart of `series` (those `drawn`) as `ax` says.
    fn new(series: &[Series], drawn: &[usize], ax: &Axes) -> Plot {
        let points = || drawn_points(series, drawn);
        let xmax = match ax.xmax {
            Some(x) if x.is_finite() && x > 0.0 => x,
            _ => Some(points().map(|p| p.0).fold(0.0f64, f64::max))
                .filter(|&x| x > 0.0)
                .unwrap_or(1.0),
        };
        let ys = || points().map(|p| p.1).filter(|v| v.is_finite());
        let (ymax, ystep) = match ax.ymax {
            Some(m) => (m, ax.ystep.unwrap_or_else(|| tick_step(m))),
            None => nice_top(ys().fold(0.0f64, f64::max)),
        };
        Plot {
            xmax,
            x_decades: decades(points().map(|p| p.0)),
            ymax,
            ystep,
            y_decades: decades(ys()),
            log_x: ax.log_x,
            log_y: ax.log_y,
        }
    }

    /// The fraction of the plot's height at which a value lies.
    fn yfrac(&self, y: f64) -> f64 {
        let (lo, hi) = self.y_decades;
        if !self.log_y {
            y / self.ymax
        } else if y > 0.0 {
            (y.log10() - lo as f64) / (hi - lo) as f64
        } else {
            0.0
        }
    }

    /// The y pixel of a value (a little above the frame at most).
    fn py(&self, y: f64) -> f64 {
        let (_, h, _, _, t, b) = CHART;
        let ph = h - t - b;
        t + ph - ph * self.yfrac(y).clamp(0.0, 1.05)
    }

    /// The x pixel of a value (a logarithmic axis's left edge for one at or below 0).
    fn px(&self, x: f64) -> f64 {
        let (w, _, l, r, _, _) = CHART;
        let pw = w - l - r;
        let (xlo, xhi) = self.x_decades;
        if !self.log_x {
            l + pw * x / self.xmax
        } else if x > 0.0 {
            l + pw * ((x.log10() - xlo as f64) / (xhi - xlo) as f64).clamp(0.0, 1.0)
        } else {
            l
        }
    }
}

/// A logarithmic y axis's decades from 10^`lo` to 10^`hi`: a grid line per decade,
/// labelled (every other one, or sparser, past 8 decades), and marks at 2..9 times each
/// while they stay apart.
fn log_y_ticks(s: &mut String, lo: i32, hi: i32) {
    let (w, h, l, r, t, b) = CHART;
    let (pw, ph) = (w - l - r, h - t - b);
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
}

/// A linear y axis: a grid line and a label at every round step up to the top.
fn linear_y_ticks(s: &mut String, plot: &Plot) {
    let (w, _, l, r, _, _) = CHART;
    let pw = w - l - r;
    for v in ticks_every(plot.ymax, plot.ystep) {
        let y = plot.py(v);
        let _ = write!(
            s,
            r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            l + pw,
            l - 4.0,
            y + 4.0,
            round(v, 3)
        );
    }
}

/// The reference level's line at pixel `y`, labelled: dashed, grey and thin, so that no
/// series looks like it.
fn reference_line(s: &mut String, y: f64, label: &str) {
    let (w, _, l, r, _, _) = CHART;
    let pw = w - l - r;
    let _ = write!(
        s,
        r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#666" stroke-width="1" stroke-dasharray="4 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="#555">{}</text>"##,
        l + pw,
        l + pw - 4.0,
        y - 3.0,
        esc(label)
    );
}

/// The notes under the legend, a short line each (escaped): lower bounds, a reference level
/// above the axis, points clamped to a logarithmic axis's floor or left edge, then the
/// chart's own ([`Axes::notes`]).
fn chart_notes(
    series: &[Series],
    drawn: &[usize],
    ax: &Axes,
    reference: Option<((f64, &str), bool)>,
) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    if drawn
        .iter()
        .any(|&k| (0..series[k].points.len()).any(|j| ax.lower(k, j)))
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
        drawn_points(series, drawn)
            .map(|p| p.1)
            .filter(|v| v.is_finite())
            .filter(|&y| y <= 0.0)
            .count()
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
        drawn_points(series, drawn)
            .filter(|p| p.1.is_finite() && p.0 <= 0.0)
            .count()
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
    notes
}

/// How many legend entries fit above `notes` lines of notes (16 px each, the notes 13 px a
/// line after 20 px), and the lines that say how many series the legend leaves out (none
/// when every series has its entry).
fn legend_room(
    series: &[Series],
    drawn: &[usize],
    ax: &Axes,
    notes: usize,
) -> (usize, Vec<String>) {
    let (_, h, _, _, t, _) = CHART;
    let fits = |entries: usize, lines: usize| {
        let bottom = if lines > 0 {
            t + 16.0 * entries as f64 + 20.0 + 13.0 * (lines - 1) as f64
        } else {
            t + 16.0 * entries as f64
        };
        bottom <= h - 4.0
    };
    let mut more: Vec<String> = Vec::new();
    if drawn.len() == series.len() && fits(drawn.len(), notes) {
        return (drawn.len(), more);
    }
    let lines =
        if drawn.len() < series.len() { 2 } else { 0 } + if ax.data_file.is_some() { 2 } else { 1 };
    let shown = (0..=drawn.len())
        .rev()
        .find(|&m| fits(m, lines + notes))
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
    (shown, more)
}

/// The chart's line number `pos`: its path through the finite points, a dot when it has
/// only one, a triangle on each point that is only a lower bound (`lower(j)`), and its
/// legend entry when it has one (`legend`: `Some(true)` with its [`marker`]).
fn draw_series(
    s: &mut String,
    plot: &Plot,
    se: &Series,
    lower: impl Fn(usize) -> bool,
    pos: usize,
    legend: Option<bool>,
) {
    let (w, _, l, r, t, _) = CHART;
    let pw = w - l - r;
    let (color, dash) = line_style(pos);
    let dash = dash_attr(dash);
    let mut d = String::new();
    for &(x, y) in &se.points {
        if !y.is_finite() {
            continue;
        }
        let (x, y) = (plot.px(x), plot.py(y));
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
            plot.px(x),
            plot.py(y)
        );
    }
    for (j, &(x, y)) in se.points.iter().enumerate() {
        if !y.is_finite() || !lower(j) {
            continue;
        }
        let (x, y) = (plot.px(x), plot.py(y));
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
    if let Some(marked) = legend {
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
        if marked {
            marker(s, pos, l + pw + 17.0, ly, color);
        }
    }
}

/// The width of a line's slot for a marker, px, and the least distance between two
/// markers of one line ([`draw_markers`]).
const MARK_GAP: f64 = 12.0;
const MARK_EVERY_MIN: f64 = 48.0;

/// The markers of the chart's line number `pos` of `n`: the plot is cut into periods of
/// max(`MARK_GAP` × n, `MARK_EVERY_MIN`) px from its left edge, each holding a slot
/// `MARK_GAP` wide per line (line `pos`'s from `MARK_GAP` × pos), and a line has a marker
/// at its first point in each of its slots. The slots of two lines never meet, so where
/// lines overlap their markers stand side by side; a slot without a point (a gap, points
/// sparser than the slots) has none.
fn draw_markers(s: &mut String, plot: &Plot, se: &Series, pos: usize, n: usize) {
    let (_, _, l, _, _, _) = CHART;
    let (color, _) = line_style(pos);
    let every = (MARK_GAP * n as f64).max(MARK_EVERY_MIN);
    let from = l + MARK_GAP * pos as f64;
    let mut last = None;
    for &(x, y) in se.points.iter().filter(|p| p.1.is_finite()) {
        let (x, y) = (plot.px(x), plot.py(y));
        if x < from {
            continue;
        }
        let period = ((x - from) / every).floor();
        if x - (from + period * every) < MARK_GAP && last != Some(period) {
            marker(s, pos, x, y, color);
            last = Some(period);
        }
    }
}

/// Marker number `k` (of a chart's line `k`) centred at (`x`, `y`): a circle, square,
/// diamond or downward triangle, filled in `color`, then the same four hollow; past eight
/// lines the shapes repeat, their colours and dashes still telling the lines apart.
fn marker(s: &mut String, k: usize, x: f64, y: f64, color: &str) {
    let paint = if k % 8 < 4 {
        format!(r#" fill="{color}""#)
    } else {
        format!(r#" fill="white" stroke="{color}" stroke-width="1.2""#)
    };
    let _ = match k % 4 {
        0 => write!(s, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.2"{paint}/>"#),
        1 => write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="6" height="6"{paint}/>"#,
            x - 3.0,
            y - 3.0
        ),
        2 => write!(
            s,
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z"{paint}/>"#,
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0
        ),
        _ => write!(
            s,
            r#"<path d="M{:.1},{:.1} L{:.1},{:.1} L{x:.1},{:.1} Z"{paint}/>"#,
            x - 4.0,
            y - 3.0,
            x + 4.0,
            y - 3.0,
            y + 4.0
        ),
    };
}

/// Notes naming the lines that coincide throughout (the same points, as drawn, to 0.1 px):
/// `sq, tonic and loom coincide at 1.0` (the level when the lines are flat), wrapped to the
/// legend's column and escaped.
fn coincidence_notes(series: &[Series], drawn: &[usize], plot: &Plot) -> Vec<String> {
    // Each line's points as drawn: `x,y`, to 0.1 px.
    let pixels = |k: usize| -> Vec<String> {
        series[k]
            .points
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", plot.px(x), plot.py(y)))
            .collect()
    };
    let mut groups: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for &k in drawn {
        let p = pixels(k);
        if p.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|g| g.0 == p) {
            Some(g) => g.1.push(k),
            None => groups.push((p, vec![k])),
        }
    }
    let mut notes = Vec::new();
    for (p, members) in groups.iter().filter(|g| g.1.len() > 1) {
        let names: Vec<&str> = members.iter().map(|&k| series[k].name.as_str()).collect();
        let names = match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => continue,
        };
        let height = |q: &String| q.split_once(',').map(|(_, y)| y.to_string());
        let flat = p.iter().all(|q| height(q) == height(&p[0]));
        let level = series[members[0]]
            .points
            .iter()
            .find(|q| q.1.is_finite())
            .filter(|_| flat)
            .map(|q| format!("at {:?}", round(q.1, 3)));
        // `at 1.0` stays on one line.
        let words = names.split(' ').chain(["coincide"]).map(String::from);
        notes.extend(wrap(words.chain(level), 18).iter().map(|l| esc(l)));
    }
    notes
}

/// `words` joined by spaces in lines of at most `width` characters, broken between words
/// (a longer word on a line of its own).
fn wrap(words: impl Iterator<Item = String>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in words.filter(|w| !w.is_empty()) {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(&word);
            }
            _ => lines.push(word),
        }
    }
    lines
}

/// The grey lines under the legend's `shown` entries: how many series it leaves out, then
/// the notes.
fn side_text<'l>(s: &mut String, shown: usize, lines: impl Iterator<Item = &'l String>) {
    let (w, _, l, r, t, _) = CHART;
    let pw = w - l - r;
    let y = t + 12.0 + 16.0 * shown as f64 + 8.0;
    for (k, line) in lines.enumerate() {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#555">{line}</text>"##,
            l + pw + 8.0,
            y + 13.0 * k as f64
        );
    }
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
pub(super) fn no_points(series: &[Series]) -> bool {
    series
        .iter()
        .all(|s| s.points.iter().all(|p| !p.1.is_finite()))
}
