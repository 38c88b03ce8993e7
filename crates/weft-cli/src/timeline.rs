//! A replay's timeline: bytes on the wire and queueing delay per time window for a few
//! series (the leaves, or the root's children for a large policy), in memory bounded by a
//! fixed number of windows however long the trace: `timeseries.csv`, `throughput.svg` and
//! `delay.svg` of `weft replay`.
//!
//! * **Windows that widen.** The trace's length is unknown while it streams, so windows start
//!   2^10 ps (about 1 ns) wide from the first arrival and double (each pair of windows merged into one)
//!   whenever a frame would land past the last of [`MAX_WINDOWS`]. A frame's bytes are
//!   credited to the windows its wire time overlaps, in proportion (a running floor, so the
//!   parts add up exactly), as `weft sim` counts throughput: a window never reads more than
//!   its link carried. Merging adds windows pairwise, so totals never change.
//! * **Delay** is summed per window at the frame's start of transmission (arrival to start,
//!   as in `summary.json`) and printed as the window's mean.
//!
//! Invariants: at most [`MAX_WINDOWS`] windows; the bytes over all windows equal the bytes
//! credited. Cost: O(1) per departure (plus one O(windows × series) merge per doubling, at
//! most 64 doublings in all); memory `MAX_WINDOWS × series × 32` bytes.

use std::fmt::Write as _;

use weft_sim::report::{line_chart, Series};

/// Windows kept at most; the width doubles to stay within it.
pub const MAX_WINDOWS: usize = 512;

/// Width of the first windows: 2^10 ps (about 1 ns). Widths are powers of two, so a
/// window is found with a shift.
const FIRST_SHIFT: u32 = 10;

/// Series plotted in a chart (the ones with the most bytes; one colour each of the chart's
/// ten); the CSV has them all.
const PLOTTED: usize = 10;

/// One window of one series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cell {
    /// Packet bytes whose wire time falls in the window (in proportion).
    bytes: u64,
    /// Frames that started transmission in the window.
    departures: u64,
    /// Sum of their queueing delays, picoseconds.
    delay_sum_ps: u128,
}

/// Per-window bytes and delays of `names.len()` series (see the module doc).
#[derive(Debug)]
pub struct Timeline {
    names: Vec<String>,
    /// Start of window 0, picoseconds (the first arrival).
    origin_ps: u64,
    /// Width of every window: `1 << shift` picoseconds.
    shift: u32,
    /// `cells[w * series + s]`: window `w`, series `s`; grows by whole windows.
    cells: Vec<Cell>,
    /// The last instant any frame was on the wire, picoseconds from the origin: the last
    /// window's rates are over its part up to there (not over a whole window's width, which
    /// would make every chart dip at its end).
    last_rel: u64,
}

impl Timeline {
    /// A timeline of the named series starting at `origin_ps`.
    pub fn new(names: Vec<String>, origin_ps: u64) -> Timeline {
        assert!(!names.is_empty(), "a timeline of no series");
        Timeline {
            names,
            origin_ps,
            shift: FIRST_SHIFT,
            cells: Vec::new(),
            last_rel: 0,
        }
    }

    fn series(&self) -> usize {
        self.names.len()
    }

    /// Window width, picoseconds.
    pub fn window_ps(&self) -> u64 {
        1 << self.shift
    }

    /// Windows so far (the last one holds the latest frame's end).
    pub fn windows(&self) -> usize {
        self.cells.len() / self.series()
    }

    /// Doubles the width: windows 2k and 2k+1 become window k.
    fn widen(&mut self) {
        let s = self.series();
        let n = self.windows();
        for k in 0..n.div_ceil(2) {
            for j in 0..s {
                let a = self.cells[2 * k * s + j];
                let b = self
                    .cells
                    .get((2 * k + 1) * s + j)
                    .copied()
                    .unwrap_or_default();
                self.cells[k * s + j] = Cell {
                    bytes: a.bytes + b.bytes,
                    departures: a.departures + b.departures,
                    delay_sum_ps: a.delay_sum_ps + b.delay_sum_ps,
                };
            }
        }
        self.cells.truncate(n.div_ceil(2) * s);
        self.shift += 1;
    }

    /// A frame of `bytes` of series `s` that started transmission at `start_ps`, on the
    /// wire for `wire_ps`, after waiting `delay_ps`.
    pub fn sent(&mut self, s: usize, start_ps: u64, wire_ps: u64, bytes: u64, delay_ps: u64) {
        debug_assert!(s < self.series(), "series {s} of {}", self.series());
        let end = start_ps.saturating_add(wire_ps);
        // The frame's last instant, from the origin: widen until its window is among the
        // first MAX_WINDOWS (2^55 ps windows span the whole clock, so the shift stays < 64).
        let last_rel = end
            .saturating_sub(1)
            .max(start_ps)
            .saturating_sub(self.origin_ps);
        while last_rel >> self.shift >= MAX_WINDOWS as u64 {
            self.widen();
        }
        self.last_rel = self.last_rel.max(last_rel);
        let first_rel = start_ps.saturating_sub(self.origin_ps);
        let (first, last) = (
            (first_rel >> self.shift) as usize,
            (last_rel >> self.shift) as usize,
        );
        let n = self.series();
        if self.cells.len() < (last + 1) * n {
            self.cells.resize((last + 1) * n, Cell::default());
        }
        let c = &mut self.cells[first * n + s];
        c.departures += 1;
        c.delay_sum_ps += delay_ps as u128;
        if first == last {
            c.bytes += bytes;
            return;
        }
        // Bytes sent once `t` ps (from the origin) of the frame are on the wire; the last
        // window takes the rest (with the part of a frame past the end of the clock).
        let upto = |t: u64| (bytes as u128 * (t - first_rel) as u128 / wire_ps as u128) as u64;
        let mut credited = 0;
        for w in first..=last {
            let b = if w == last {
                bytes
            } else {
                upto((w as u64 + 1) << self.shift)
            };
            self.cells[w * n + s].bytes += b - credited;
            credited = b;
        }
    }

    /// Bytes over every window of series `s`.
    pub fn total_bytes(&self, s: usize) -> u64 {
        self.cells
            .iter()
            .skip(s)
            .step_by(self.series())
            .map(|c| c.bytes)
            .sum()
    }

    /// Width of window `w`, picoseconds: [`Timeline::window_ps`], but the last window's ends
    /// with the last frame on the wire (a whole window's width would understate its rate).
    fn width_ps(&self, w: usize) -> u64 {
        if w + 1 == self.windows() {
            let start = (w as u64) << self.shift;
            (self.last_rel - start)
                .saturating_add(1)
                .min(self.window_ps())
        } else {
            self.window_ps()
        }
    }

    /// Tidy CSV: `window_start_ps,window_ps,series,bytes,mean_bps,departures,mean_delay_ps`,
    /// a row per window and series (empty windows included; `mean_delay_ps` empty without
    /// departures; the last window's width ends at the last frame's end).
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "window_start_ps,window_ps,series,bytes,mean_bps,departures,mean_delay_ps\n",
        );
        let n = self.series();
        for w in 0..self.windows() {
            let start = self.origin_ps + ((w as u64) << self.shift);
            for (s, name) in self.names.iter().enumerate() {
                let c = self.cells[w * n + s];
                let delay = if c.departures > 0 {
                    (c.delay_sum_ps / c.departures as u128).to_string()
                } else {
                    String::new()
                };
                let width = self.width_ps(w);
                let _ = writeln!(
                    out,
                    "{start},{width},{name},{},{},{},{delay}",
                    c.bytes,
                    bps(c.bytes, width),
                    c.departures
                );
            }
        }
        out
    }

    /// The throughput and delay charts (SVG): the [`PLOTTED`] series with the most bytes.
    pub fn charts(&self, title: &str) -> (String, String) {
        let n = self.series();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_cached_key(|&s| std::cmp::Reverse(self.total_bytes(s)));
        order.truncate(PLOTTED);
        // In the policy's order, as the CSV has them.
        order.sort_unstable();
        // The last window may end past the clock's end.
        let span_ps = (self.windows() as u64).saturating_mul(self.window_ps());
        let (unit, per) = time_unit(span_ps);
        let x = |w: usize| (w as f64 + 0.5) * self.window_ps() as f64 / per;
        let of = if n > PLOTTED {
            format!(" ({PLOTTED} of {n} with the most bytes)")
        } else {
            String::new()
        };
        let rate: Vec<Series> = order
            .iter()
            .map(|&s| Series {
                name: self.names[s].clone(),
                points: (0..self.windows())
                    .map(|w| {
                        (
                            x(w),
                            bps(self.cells[w * n + s].bytes, self.width_ps(w)) as f64 / 1e9,
                        )
                    })
                    .collect(),
            })
            .collect();
        let delay: Vec<Series> = order
            .iter()
            .map(|&s| Series {
                name: self.names[s].clone(),
                points: (0..self.windows())
                    .filter_map(|w| {
                        let c = self.cells[w * n + s];
                        (c.departures > 0)
                            .then(|| (x(w), c.delay_sum_ps as f64 / c.departures as f64 / 1e6))
                    })
                    .collect(),
            })
            .collect();
        (
            line_chart(
                &format!("{title}: throughput{of}"),
                &format!("time since the first arrival ({unit})"),
                "Gbit/s",
                &rate,
                None,
            ),
            line_chart(
                &format!("{title}: mean queueing delay{of}"),
                &format!("time since the first arrival ({unit})"),
                "µs",
                &delay,
                None,
            ),
        )
    }
}

/// `bytes` over `window_ps` in bits per second (integer division).
fn bps(bytes: u64, window_ps: u64) -> u64 {
    (bytes as u128 * 8 * 1_000_000_000_000 / window_ps.max(1) as u128).min(u64::MAX as u128) as u64
}

/// A unit for a span of `ps` picoseconds (the span reads 1 to 1,000 of it, or less than 1
/// µs): its name and picoseconds per unit.
fn time_unit(ps: u64) -> (&'static str, f64) {
    match ps {
        0..=999_999_999 => ("µs", 1e6),
        1_000_000_000..=999_999_999_999 => ("ms", 1e9),
        _ => ("s", 1e12),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("s{i}")).collect()
    }

    #[test]
    fn a_frame_within_a_window_is_credited_whole_at_its_start() {
        let mut t = Timeline::new(names(2), 5_000);
        t.sent(1, 5_100, 300, 1500, 40);
        assert_eq!((t.windows(), t.window_ps()), (1, 1_024));
        assert_eq!(t.total_bytes(1), 1500);
        assert_eq!(t.total_bytes(0), 0);
        // The only window is the last: it ends with the frame, 400 ps after its start.
        assert!(
            t.csv().contains("\n5000,400,s1,1500,30000000000000,1,40\n"),
            "{}",
            t.csv()
        );
        // A later frame makes it a whole window, and the new last one ends with that frame.
        t.sent(0, 5_000 + 1_024 + 10, 90, 100, 0);
        let csv = t.csv();
        assert!(
            csv.contains("\n5000,1024,s1,1500,11718750000000,1,40\n"),
            "{csv}"
        );
        assert!(
            csv.contains("\n6024,100,s0,100,8000000000000,1,0\n"),
            "{csv}"
        );
    }

    #[test]
    fn a_frame_across_windows_is_split_by_its_wire_time() {
        let mut t = Timeline::new(names(1), 0);
        // 4,096 ps of wire from 512: windows 0..=4 get 1/8, 1/4, 1/4, 1/4, 1/8.
        t.sent(0, 512, 4_096, 800, 0);
        let bytes: Vec<u64> = t.cells.iter().map(|c| c.bytes).collect();
        assert_eq!(bytes, vec![100, 200, 200, 200, 100]);
        assert_eq!(t.cells[0].departures, 1);
    }

    #[test]
    fn windows_widen_and_keep_every_byte() {
        let mut t = Timeline::new(names(3), 1_000);
        let mut sent = [0u64; 3];
        let mut now = 1_000u64;
        // 20,000 frames of 1,000 B at 8 ns each (1 Tbit/s), spread over the series: 160 µs.
        for i in 0..20_000u64 {
            let s = (i % 3) as usize;
            t.sent(s, now, 8_000, 1_000, i);
            sent[s] += 1_000;
            now += 8_000;
            assert!(t.windows() <= MAX_WINDOWS, "{} windows", t.windows());
        }
        assert_eq!(
            t.window_ps(),
            1 << 19,
            "2^10 ps doubled until 160 µs fits in 512 windows"
        );
        for (s, &b) in sent.iter().enumerate() {
            assert_eq!(t.total_bytes(s), b, "series {s}");
        }
        // A full window of a busy link never reads more than the link carried.
        let n = t.series();
        for w in 0..t.windows() {
            let all: u64 = (0..n).map(|s| t.cells[w * n + s].bytes).sum();
            assert!(
                bps(all, t.window_ps()) <= 1_000_000_000_000,
                "window {w}: {all} B"
            );
        }
    }

    #[test]
    fn a_frame_at_the_end_of_the_clock_fits() {
        let mut t = Timeline::new(names(1), 0);
        t.sent(0, u64::MAX - 10, 1_000, 64, 0);
        assert!(t.windows() <= MAX_WINDOWS);
        assert_eq!(t.total_bytes(0), 64);
        let (rate, _) = t.charts("end");
        assert!(rate.contains("time since the first arrival (s)"), "{rate}");
        assert_eq!(t.csv().lines().count(), 1 + t.windows());
    }

    /// A frame on the wire past the end of the clock (4 GB on a 1 kbit/s link: `wire_ps`
    /// saturates) spans every window: its bytes add up, the last window takes the rest.
    #[test]
    fn a_frame_past_the_end_of_the_clock_adds_up() {
        let mut t = Timeline::new(names(1), 0);
        t.sent(0, 0, u64::MAX, u32::MAX as u64, 0);
        assert_eq!(t.windows(), MAX_WINDOWS);
        assert_eq!(t.total_bytes(0), u32::MAX as u64);
        let w = t.window_ps();
        t.sent(0, 100 * w + 7, u64::MAX, 1_000, 0);
        assert_eq!(t.total_bytes(0), u32::MAX as u64 + 1_000);
    }

    #[test]
    fn time_units_keep_the_axis_between_1_and_1000() {
        assert_eq!(time_unit(999_999_999).0, "µs");
        assert_eq!(time_unit(35_800_000_000).0, "ms");
        assert_eq!(time_unit(324_000_000_000).0, "ms");
        assert_eq!(time_unit(2_000_000_000_000).0, "s");
    }

    #[test]
    fn charts_name_their_series_and_say_when_some_are_left_out() {
        let mut t = Timeline::new(names(14), 0);
        for s in 0..14 {
            t.sent(s, s as u64 * 10_000, 1_000, 100 + s as u64, 0);
        }
        let (rate, delay) = t.charts("p");
        assert!(rate.starts_with("<svg") && delay.starts_with("<svg"));
        assert!(rate.contains("(10 of 14 with the most bytes)"), "{rate}");
        // The four smallest series are left out of the charts.
        assert!(rate.contains(">s13<") && rate.contains(">s4<") && !rate.contains(">s3<"));
        assert!(!rate.contains(">s0<"));
        assert_eq!(t.csv().lines().count(), 1 + t.windows() * 14);
    }
}
