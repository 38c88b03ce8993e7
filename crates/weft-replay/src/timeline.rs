//! A replay's timeline: bytes on the wire and queueing delay per time window for a few
//! series (the leaves, or the root's children for a large policy), in memory bounded by a
//! fixed number of windows however long the trace: `timeseries.csv`, `throughput.svg` and
//! `delay.svg` of `weft replay`.
//!
//! * **Windows that widen.** The trace's length is unknown while it streams, so windows start
//!   2^10 ps (about 1 ns) wide from the first arrival and double (each pair of windows merged into one)
//!   whenever a frame would land past the last of [`MAX_WINDOWS`]. A frame's bytes are
//!   credited to the windows its wire time overlaps, in proportion, as `weft sim` counts
//!   throughput, twice: in whole bytes (`bytes`: a running floor per frame, so the parts add
//!   up exactly to the summary's bytes) and as an exact share (`share`, in 2^-32 bytes, each
//!   part rounded down), which the rates are read from. A window never reads more than its
//!   link carried: a frame's bytes over its wire time are at most the link's rate (wire time
//!   counts the frame's overhead and is rounded up), the frames on the wire in a window
//!   overlap it for at most its width, and every rounding of the share and of the rate is
//!   down. Whole bytes could not promise that: a window of a busy 10 Gbit/s link carries
//!   40.96 B per 32,768 ps, and the whole bytes of a frame that ends in it are rounded up, so
//!   windows read 41 B, 0.1 % over (2^10 ps windows of a short trace read 2 B: 56 % over).
//!   Merging adds windows pairwise, so totals never change.
//! * **Delay** is summed per window at the frame's start of transmission (arrival to start,
//!   as in `summary.json`) and printed as the window's mean.
//!
//! Invariants: at most [`MAX_WINDOWS`] windows; the bytes over all windows equal the bytes
//! credited. Cost: O(1) per departure (plus one O(windows × series) merge per doubling, at
//! most 64 doublings in all); memory `MAX_WINDOWS × series × 48` bytes.

use std::fmt::Write as _;

use weft_sim::report::{line_chart, Series};

/// Windows kept at most; the width doubles to stay within it.
pub const MAX_WINDOWS: usize = 512;

/// Width of the first windows: 2^10 ps (about 1 ns). Widths are powers of two, so a
/// window is found with a shift.
const FIRST_SHIFT: u32 = 10;

/// Fractional bits of [`Cell::share`]: a part of a frame is exact to 2^-32 B.
const SHARE_BITS: u32 = 32;

/// Series plotted in a chart (the ones with the most bytes; one colour each of the chart's
/// ten); the CSV has them all.
const PLOTTED: usize = 10;

/// One window of one series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cell {
    /// Packet bytes whose wire time falls in the window (in proportion), in whole bytes: a
    /// frame's parts are a running floor over its wire time, so they add up to its bytes,
    /// and the part in the window where it ends is rounded up (a window may read up to a
    /// byte more than it carried).
    bytes: u64,
    /// The same bytes exactly, in units of 2^-32 B ([`SHARE_BITS`]), each frame's part
    /// rounded down: never more than the window carried; the rates are read from it.
    share: u128,
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
        // Room for every window at once (the pages are touched as windows fill them).
        let cells = Vec::with_capacity(MAX_WINDOWS * names.len());
        Timeline {
            names,
            origin_ps,
            shift: FIRST_SHIFT,
            cells,
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
                    share: a.share.saturating_add(b.share),
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
        // The frame's part of a window it overlaps for `overlap` ps of its wire time: its
        // bytes × overlap / wire time, in 2^-32 B, rounded down ((bytes << 32) × overlap <
        // 2^128). Whole unless the frame runs past the end of the clock.
        let wire = wire_ps.max(1) as u128;
        let part = |overlap: u128| {
            if overlap >= wire {
                (bytes as u128) << SHARE_BITS
            } else {
                ((bytes as u128) << SHARE_BITS) * overlap / wire
            }
        };
        if first == last {
            c.bytes += bytes;
            c.share = c
                .share
                .saturating_add(part((last_rel - first_rel) as u128 + 1));
            return;
        }
        // Window `w`'s overlap with the frame's wire time, up to its last instant.
        let overlap = |w: usize| {
            let from = (first_rel as u128).max((w as u128) << self.shift);
            let to = (last_rel as u128 + 1).min((w as u128 + 1) << self.shift);
            to.saturating_sub(from)
        };
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
            let cell = &mut self.cells[w * n + s];
            cell.bytes += b - credited;
            cell.share = cell.share.saturating_add(part(overlap(w)));
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
    /// departures; the last window's width ends at the last frame's end). `mean_bps` is the
    /// exact share's rate, rounded down (never over the link's rate); `bytes` is in whole
    /// bytes, so `bytes × 8 / window_ps` may read up to a byte over it.
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
                    share_bps(c.share, width),
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
                            share_bps(self.cells[w * n + s].share, self.width_ps(w)) as f64 / 1e9,
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
#[cfg(test)]
fn bps(bytes: u64, window_ps: u64) -> u64 {
    (bytes as u128 * 8 * 1_000_000_000_000 / window_ps.max(1) as u128).min(u64::MAX as u128) as u64
}

/// A [`Cell::share`] (2^-32 B) over `window_ps` in bits per second, rounded down.
fn share_bps(share: u128, window_ps: u64) -> u64 {
    const BITS_PS_PER_BYTE_S: u128 = 8 * 1_000_000_000_000;
    let per = (window_ps.max(1) as u128) << SHARE_BITS;
    let bps = match share.checked_mul(BITS_PS_PER_BYTE_S) {
        Some(bits) => bits / per,
        // Over 2^85 B in a window: whole bytes first (still rounded down).
        None => (share >> SHARE_BITS).saturating_mul(BITS_PS_PER_BYTE_S) / window_ps.max(1) as u128,
    };
    bps.min(u64::MAX as u128) as u64
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

    /// A busy link whose windows carry a fraction of a byte: 10 Gbit/s without per-frame
    /// overhead (800 ps a byte) in 2^10 ps windows (1.28 B each) while 64-byte frames
    /// leave back to back, then 2^15 ps windows (40.96 B) once the trace is longer. No
    /// window reads over the link's rate, yet each reads it to within 3 bit/s a series: a
    /// series' rate rounds down by less than 1 bit/s, and each part of a frame by less than
    /// 2^-32 B (a window merged from 2^10 ps ones holds up to one part per 2^10 ps of it and
    /// one per frame: under 2 bit/s in all). The whole bytes still add up. Read from the
    /// whole bytes, windows showed 2 B in 2^10 ps (15.6 Gbit/s), then 41 B in 2^15 ps.
    #[test]
    fn no_window_reads_more_than_the_link_carried() {
        const LINK_BPS: u64 = 10_000_000_000;
        for frames in [2u64, 300] {
            let mut t = Timeline::new(names(2), 0);
            for i in 0..frames {
                t.sent((i % 2) as usize, i * 51_200, 51_200, 64, 0);
            }
            assert_eq!(t.total_bytes(0) + t.total_bytes(1), frames * 64);
            let n = t.series();
            let last = t.windows() - 1;
            for w in 0..=last {
                let width = t.width_ps(w);
                let rate: u64 = (0..n)
                    .map(|s| share_bps(t.cells[w * n + s].share, width))
                    .sum();
                assert!(
                    rate <= LINK_BPS,
                    "{frames} frames, window {w}: {rate} bit/s"
                );
                assert!(
                    rate + 3 * n as u64 >= LINK_BPS,
                    "{frames} frames, window {w}: {rate} bit/s"
                );
            }
            let csv = t.csv();
            for row in csv.lines().skip(1) {
                let bps: u64 = row.split(',').nth(4).unwrap().parse().unwrap();
                assert!(bps <= LINK_BPS, "{row}");
            }
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
