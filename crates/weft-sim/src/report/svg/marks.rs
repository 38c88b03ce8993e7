//! Marking a chart's lines (`Axes::mark_lines`): a marker shape per line, in the plot
//! and in the legend, placed in slots of its own along x so that lines that overlap each
//! still show, and the note that names the lines that coincide throughout.
//!
//! Invariants: the slots of two lines never meet, so no two lines' markers share a place;
//! a line is named in at most one note, with the lines drawn at the same points.
//!
//! Cost: linear in the points for the markers; finding the lines that coincide compares
//! each line's points with those of the groups found so far.

use std::fmt::Write as _;

use super::{line_style, Plot, Series, CHART};
use crate::report::round;
use crate::report::text::esc;

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
pub(super) fn draw_markers(s: &mut String, plot: &Plot, se: &Series, pos: usize, n: usize) {
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
pub(super) fn marker(s: &mut String, k: usize, x: f64, y: f64, color: &str) {
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
pub(super) fn coincidence_notes(series: &[Series], drawn: &[usize], plot: &Plot) -> Vec<String> {
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
