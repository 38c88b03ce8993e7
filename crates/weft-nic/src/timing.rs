//! Latency histograms for the dataplane's timing counters (`weft ctl stats`: `timing`):
//! how long a loop iteration takes, how long one `send(2)` takes, how long a frame waited in
//! a receive ring before the loop read it, how long it stayed in the NIC before it was sent.
//! They are what docs/dataplane.md's latency analysis is measured with.
//!
//! [`Hist`] counts nanosecond values in a [`weft_core::stats::Histogram`] of 1 significant
//! digit (16 buckets per power of two), dense from the start and sized to 2^36 ns (68 s), so
//! that a record allocates nothing; beside it, the exact sum and max. Its percentiles are
//! read at [`GRID`], the resolution `ctl stats` publishes them at (HDR-style): exact below
//! 16 ns, then 8 sub-buckets per power of two, so a percentile read from it is within 1/16
//! of the true value; values from 2^36 ns (68 s) up share the last bucket. Each of the
//! histogram's buckets lies within one of [`GRID`]'s, so the figures are those of a
//! histogram kept on [`GRID`] itself. Cost: a record is the histogram's index and add, a
//! max and an add; 528 counters (4.2 KB) a histogram.

use weft_core::stats::{at_rank, rank, Grid, Histogram};

use crate::stats::HistSummary;

/// The resolution percentiles are published at: 16 exact values, then 8 buckets per power
/// of two from 2^4 to 2^35 ns; larger values in the last bucket.
pub const GRID: Grid = Grid::new(3, 35);

/// Values at or above this share [`GRID`]'s last bucket, ns (2^36, 68 s): they are counted
/// just below it, so the counts never grow past it.
const CAP_NS: u64 = 1 << 36;

/// A histogram of durations in nanoseconds.
#[derive(Clone)]
pub struct Hist {
    /// Values per bucket, ns (below [`CAP_NS`]).
    counts: Histogram<1>,
    /// Every value added up, ns (saturating).
    sum: u64,
    /// The largest value, ns.
    max: u64,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            counts: Histogram::with_high(CAP_NS - 1),
            sum: 0,
            max: 0,
        }
    }
}

impl std::fmt::Debug for Hist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_string(&self.summary()).map_err(|_| std::fmt::Error)?;
        f.write_str(&s)
    }
}

impl Hist {
    /// Records one value (nanoseconds).
    pub fn record(&mut self, ns: u64) {
        self.counts.record(ns.min(CAP_NS - 1));
        self.sum = self.sum.saturating_add(ns);
        self.max = self.max.max(ns);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.counts.count()
    }

    /// The `q`-quantile (0..=1), nanoseconds: the middle of the [`GRID`] bucket that holds
    /// it (the lower of two middles), at most the maximum (the maximum itself for `q = 1`);
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let want = rank(q, n);
        if want == n {
            return self.max;
        }
        at_rank(self.counts.coarse(GRID), want).map_or(self.max, |i| {
            let (low, width) = GRID.bucket(i);
            (low + (width - 1) / 2).min(self.max)
        })
    }

    /// Empties the histogram.
    pub fn clear(&mut self) {
        self.counts.clear();
        self.sum = 0;
        self.max = 0;
    }

    /// Its summary in microseconds (`ctl stats`' `timing`).
    pub fn summary(&self) -> HistSummary {
        let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
        let n = self.count();
        HistSummary {
            n,
            mean_us: self.sum.checked_div(n).map_or(0.0, us),
            p50_us: us(self.quantile(0.5)),
            p90_us: us(self.quantile(0.9)),
            p99_us: us(self.quantile(0.99)),
            p999_us: us(self.quantile(0.999)),
            max_us: us(self.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let last_bucket = GRID.index(u64::MAX);
        assert_eq!(last_bucket, 16 + 32 * 8 - 1);
        let mut last = 0;
        for v in 0..5000u64 {
            assert!(GRID.index(v) >= last, "{v}");
            last = GRID.index(v);
        }
        for v in (0..5000u64).chain((1..64).map(|k| 1u64 << k).chain([u64::MAX])) {
            let i = GRID.index(v);
            assert!(i <= last_bucket, "{v} → {i}");
            let (lo, width) = GRID.bucket(i);
            if i < last_bucket {
                assert!(
                    lo <= v && v < lo + width,
                    "{v} in bucket {i} = {lo} + {width}"
                );
                // Relative width at most 1/8 above the linear range.
                assert!(v < 16 || width * 8 <= lo, "{v}: {lo} + {width}");
            }
        }
    }

    #[test]
    fn quantiles_are_within_a_sixteenth() {
        let mut h = Hist::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        for (q, want) in [
            (0.5, 5_000_000.0),
            (0.99, 9_900_000.0),
            (0.999, 9_990_000.0),
        ] {
            let got = h.quantile(q) as f64;
            assert!(
                (got - want).abs() / want <= 1.0 / 16.0,
                "q{q}: {got} vs {want}"
            );
        }
        assert_eq!(h.quantile(1.0), 10_000_000);
        assert_eq!(h.count(), 10_000);
        h.clear();
        assert_eq!(h.quantile(0.5), 0);
    }
}
