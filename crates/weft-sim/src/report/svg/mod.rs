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
//!
//! Layout: this file composes a chart (frame, lines, legend, notes); `axes` holds the
//! scales, ticks and the pixel of a value, `marks` the markers of marked charts and the
//! note on lines that coincide.

pub(super) mod axes;
mod marks;

use std::fmt::Write as _;

use super::text::esc;
pub(super) use axes::nice_top;
use axes::{linear_y_ticks, log_x_ticks, log_y_ticks, reference_line, x_ticks, Plot};
pub use axes::{TimeAxis, TIME_AXIS};
use marks::{coincidence_notes, draw_markers, marker};

const COLORS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// The dash pattern (`stroke-dasharray`) of each pass through [`COLORS`]: solid, dashed,
/// dotted, dash-dot. Line k is `COLORS[k % 10]` with `DASHES[k / 10]`, so the 32 lines a
/// chart draws at most are all different, in the plot and in the legend.
const DASHES: [Option<&str>; 4] = [None, Some("6 3"), Some("1.5 2.5"), Some("8 3 1.5 3")];

/// The colour and dash pattern of the chart's line number `pos` (in drawing order).
pub(super) fn line_style(pos: usize) -> (&'static str, Option<&'static str>) {
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

/// One series of a line chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Size of a chart and the margins of its plot: width, height, left, right, top, bottom.
pub(super) const CHART: (f64, f64, f64, f64, f64, f64) = (520.0, 300.0, 60.0, 110.0, 28.0, 40.0);

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
    /// within it, [`axes::tick_step`]); without it, to a round number at or above the largest y.
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
pub(super) fn drawn_points<'s>(
    series: &'s [Series],
    drawn: &'s [usize],
) -> impl Iterator<Item = (f64, f64)> + 's {
    drawn.iter().flat_map(|&k| series[k].points.iter().copied())
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
