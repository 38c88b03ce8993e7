//! A chart's axes: the time axis of a report's charts ([`TimeAxis`]), round ticks and
//! tops on linear axes, whole decades on logarithmic ones, where a value lands in the plot
//! ([`Plot`]), and the ticks, grid lines and reference level each axis draws.
//!
//! Invariants: linear ticks are the multiples from 0 of a round step (1, 2, 2.5 or 5 ×
//! 10^k) that leaves at least three steps; a logarithmic axis spans whole decades that
//! hold every positive value; a value lands within the plot (a linear y at most 5 %
//! above its top, a logarithmic axis's floor or left edge for one at or below 0).
//!
//! Cost: linear in the points for the scales, constant per tick.

use std::fmt::Write as _;

use super::{drawn_points, Axes, Series, CHART};
use crate::report::round;
use crate::report::text::{esc, time_text};
use crate::scenario::Scenario;

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

/// The step of round ticks from 0 to `max`: the largest of 1, 2, 2.5 or 5 × 10^k that
/// leaves at least three steps within it.
pub(super) fn tick_step(max: f64) -> f64 {
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
pub(in crate::report) fn nice_top(v: f64) -> (f64, f64) {
    if !(v.is_finite() && v > 0.0) {
        return (1.0, 0.25);
    }
    let step = tick_step(v);
    let n = (v / step * (1.0 - 1e-9)).ceil().max(1.0);
    (round(n * step, 9), step)
}

/// Tick positions from 0 to `max`: the multiples within it of the largest step of 1, 2,
/// 2.5 or 5 × 10^k that leaves at least three steps (4 to 7 ticks; 0, 0.5, 1, 1.5 for 1.8).
pub(in crate::report) fn ticks(max: f64) -> Vec<f64> {
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
pub(in crate::report) fn decades(values: impl Iterator<Item = f64>) -> (i32, i32) {
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
pub(in crate::report) fn decade_label(k: i32) -> String {
    if k >= 0 {
        format!("1{}", "0".repeat(k as usize))
    } else {
        format!("0.{}1", "0".repeat((-k - 1) as usize))
    }
}

/// The x axis's round ticks ([`ticks`]) from 0 to `xmax`: a mark and a label each; none
/// when `xmax` is not positive (an axis without a scale).
pub(super) fn x_ticks(s: &mut String, xmax: f64) {
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
pub(super) fn log_x_ticks(s: &mut String, lo: i32, hi: i32) {
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

/// Where a chart's values land: its axes' ranges and scales, and the pixels of a value.
pub(super) struct Plot {
    /// A linear x axis's end, and a logarithmic one's decades.
    pub(super) xmax: f64,
    pub(super) x_decades: (i32, i32),
    /// A linear y axis's top and tick step, and a logarithmic one's decades.
    pub(super) ymax: f64,
    pub(super) ystep: f64,
    pub(super) y_decades: (i32, i32),
    pub(super) log_x: bool,
    pub(super) log_y: bool,
}

impl Plot {
    /// The axes of a chart of `series` (those `drawn`) as `ax` says.
    pub(super) fn new(series: &[Series], drawn: &[usize], ax: &Axes) -> Plot {
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
    pub(super) fn py(&self, y: f64) -> f64 {
        let (_, h, _, _, t, b) = CHART;
        let ph = h - t - b;
        t + ph - ph * self.yfrac(y).clamp(0.0, 1.05)
    }

    /// The x pixel of a value (a logarithmic axis's left edge for one at or below 0).
    pub(super) fn px(&self, x: f64) -> f64 {
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
pub(super) fn log_y_ticks(s: &mut String, lo: i32, hi: i32) {
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
pub(super) fn linear_y_ticks(s: &mut String, plot: &Plot) {
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
pub(super) fn reference_line(s: &mut String, y: f64, label: &str) {
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
