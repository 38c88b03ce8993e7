//! Latency histograms for the dataplane's timing counters (`weft ctl stats`: `timing`):
//! how long a loop iteration takes, how long one `send(2)` takes, how long a frame waited in
//! a receive ring before the loop read it, how long it stayed in the NIC before it was sent.
//! They are what docs/dataplane.md's latency analysis is measured with.
//!
//! [`Hist`] is a log-linear histogram of nanosecond values (HDR-style): exact below 16 ns,
//! then 8 sub-buckets per power of two, so a percentile read from it is within 1/16 of the
//! true value; values above 2^36 ns (68 s) share the last bucket. Fixed size (272 counters),
//! no allocation per record. Cost: a `leading_zeros`, a shift, an add.

use crate::stats::HistSummary;

const SUB: u32 = 3; // 2^3 sub-buckets per power of two
const LINEAR: u64 = 16;
const MAX_LOG2: u32 = 35;
/// Buckets: 16 exact values, then 8 per power of two from 2^4 to 2^35.
pub const BUCKETS: usize = LINEAR as usize + ((MAX_LOG2 - 3) << SUB) as usize;

/// A histogram of durations in nanoseconds.
#[derive(Clone)]
pub struct Hist {
    counts: Box<[u64; BUCKETS]>,
    n: u64,
    sum: u64,
    max: u64,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            counts: Box::new([0; BUCKETS]),
            n: 0,
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

fn index(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let lg = (63 - v.leading_zeros()).min(MAX_LOG2);
    if lg == MAX_LOG2 && v >= 2 << MAX_LOG2 {
        return BUCKETS - 1;
    }
    let sub = (v >> (lg - SUB)) & ((1 << SUB) - 1);
    (LINEAR as u32 + ((lg - 4) << SUB) + sub as u32) as usize
}

/// The half-open range of values bucket `i` holds.
fn bounds(i: usize) -> (u64, u64) {
    if i < LINEAR as usize {
        return (i as u64, i as u64 + 1);
    }
    let j = (i - LINEAR as usize) as u32;
    let lg = (j >> SUB) + 4;
    let sub = (j & ((1 << SUB) - 1)) as u64;
    let unit = 1u64 << (lg - SUB);
    (((1 << SUB) + sub) * unit, ((1 << SUB) + sub + 1) * unit)
}

impl Hist {
    /// Records one value (nanoseconds).
    pub fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.n += 1;
        self.sum = self.sum.saturating_add(ns);
        self.max = self.max.max(ns);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The `q`-quantile (0..=1), nanoseconds: the middle of the bucket that holds it, at
    /// most the maximum (the maximum itself for `q = 1`); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let want = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        if want == self.n {
            return self.max;
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                let (lo, hi) = bounds(i);
                return ((lo + hi - 1) / 2).min(self.max);
            }
        }
        self.max
    }

    /// Empties the histogram.
    pub fn clear(&mut self) {
        *self = Hist::default();
    }

    /// Its summary in microseconds (`ctl stats`' `timing`).
    pub fn summary(&self) -> HistSummary {
        let us = |ns: u64| (ns as f64 / 100.0).round() / 10.0;
        HistSummary {
            n: self.n,
            mean_us: self.sum.checked_div(self.n).map_or(0.0, us),
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
        let mut last = 0;
        for v in 0..5000u64 {
            assert!(index(v) >= last, "{v}");
            last = index(v);
        }
        for v in (0..5000u64).chain((1..64).map(|k| 1u64 << k).chain([u64::MAX])) {
            let i = index(v);
            assert!(i < BUCKETS, "{v} → {i}");
            let (lo, hi) = bounds(i);
            if i < BUCKETS - 1 {
                assert!(lo <= v && v < hi, "{v} in bucket {i} = [{lo}, {hi})");
                // Relative width at most 1/8 above the linear range.
                assert!(v < LINEAR || (hi - lo) * 8 <= lo, "{v}: [{lo}, {hi})");
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
