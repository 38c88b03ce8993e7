//! Queueing delays of many series (a replay's leaves, its shaping classes) at HdrHistogram's
//! resolution of 3 significant digits: percentiles from [`weft_core::stats::Histogram`],
//! beside each series's exact max and sum.
//!
//! A series's counts stay sparse while it has few distinct delays (see the histogram's
//! module): delays are in picoseconds, so a dense histogram of delays reaching milliseconds
//! holds 100–250 KB of counts however few packets it saw (a replay of 10,000 SENIC classes,
//! about 100 packets each, peaked at 5.1 GB that way), and building, scanning and merging a
//! dense histogram per leaf took a replay of 100,000 SENIC classes 20 s.
//!
//! What the summary prints of a series ([`Summary`]: p50, p90, p99, max, mean): the
//! percentiles are the histogram's, HdrHistogram's quantile rule (the first bucket whose
//! running count reaches `ceil(q × total)`, its highest equivalent value, so at most 0.1 %
//! above the exact percentile), no higher than the exact max; series merge (a node's delays
//! are its subtree's) into the same figures as one histogram of every packet (unit test
//! `summaries_and_merges_match_one_histogram`).
//!
//! The max and the mean are exact: each series keeps its largest delay and the sum of its
//! delays (u128 picoseconds) beside its counts, and merges them with them; the mean is
//! rounded to the nearest picosecond. (They were the histogram's: the highest value of the
//! max's bucket and a mean of bucket midpoints, 1,201,151 ps for a delay of 1,200,800.)
//!
//! Cost: a record is one histogram record, plus a max and an add; a summary reads the
//! histogram once per percentile. Memory per series: 24 bytes of exact figures and the
//! histogram's counts.

use weft_core::stats::Histogram;

/// One series's delays: counts per bucket for the percentiles, and the exact max and sum.
pub struct Series {
    /// Delays per bucket, ps (3 significant digits).
    counts: Histogram<3>,
    /// The largest delay, ps.
    max: u64,
    /// Every delay added up, ps.
    sum: u128,
}

/// What `summary.json` gives of a series, ps: percentiles from the histogram's buckets (3
/// significant digits; none above `max`), the exact max and the exact mean (rounded to the
/// nearest picosecond).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: u64,
}

/// How `summary.json` says its delays were measured (its `queueing_delay_precision`).
pub const PRECISION: &str = "p50, p90 and p99 are HdrHistogram buckets of 3 significant \
     digits (the highest value of the percentile's bucket, at most 0.1 % above it, never above \
     max); max and mean are exact (mean rounded to the nearest ps)";

/// The delays of series `0..n`.
pub struct Delays {
    series: Vec<Series>,
}

impl Delays {
    pub fn new(n: usize) -> Delays {
        Delays {
            series: (0..n).map(|_| Series::empty()).collect(),
        }
    }

    /// Counts one packet of series `s` delayed `delay_ps`.
    pub fn record(&mut self, s: u32, delay_ps: u64) {
        let series = &mut self.series[s as usize];
        series.max = series.max.max(delay_ps);
        series.sum += delay_ps as u128;
        series.counts.record(delay_ps);
    }

    /// Takes series `s` (`None` if it recorded nothing), leaving it empty.
    pub fn take(&mut self, s: usize) -> Option<Series> {
        let series = std::mem::replace(&mut self.series[s], Series::empty());
        (!series.counts.is_empty()).then_some(series)
    }
}

impl Series {
    fn empty() -> Series {
        Series {
            counts: Histogram::new(),
            max: 0,
            sum: 0,
        }
    }

    /// Adds `from`'s packets to this series's (a node's delays are its children's).
    pub fn merge(&mut self, from: Series) {
        self.max = self.max.max(from.max);
        self.sum += from.sum;
        self.counts.merge(from.counts);
    }

    /// The series's summary (it is not empty): see [`Summary`].
    pub fn summary(&self) -> Summary {
        // A bucket's highest value may lie above every delay in it: the exact max bounds it.
        let q = |q: f64| self.counts.value_at_quantile(q).unwrap_or(0).min(self.max);
        let total = self.counts.count().max(1) as u128;
        Summary {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: self.max,
            mean: ((self.sum + total / 2) / total) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Series that turn dense: [`Histogram::DENSE_AT`] buckets.
    const DENSE_AT: usize = Histogram::<3>::DENSE_AT;

    proptest! {
        // 64 cases (each builds histograms up to 2^50, 40 octaves of buckets, in a debug
        // build); `PROPTEST_CASES` asks for more.
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
        ))]

        /// A summary from sparse counts, and from series merged sparse and dense in any
        /// mix, equals the one of a single histogram that recorded every packet directly
        /// (dense from the start: an `hdrhistogram`'s counts): what `summary.json` prints
        /// for a node from its leaves.
        #[test]
        fn summaries_and_merges_match_one_histogram(
            records in prop::collection::vec((0u32..4, 14u32..64, any::<u64>()), 1..300),
            spread in prop::collection::vec((0u32..4, any::<u64>()), 0..2),
        ) {
            let one = || Histogram::<3>::with_high(2);
            let mut delays = Delays::new(4);
            let mut each: Vec<Option<Histogram<3>>> = vec![None; 4];
            let mut values: Vec<Vec<u64>> = vec![Vec::new(); 4];
            let mut all = one();
            let mut record = |s: u32, v: u64| {
                delays.record(s, v);
                each[s as usize].get_or_insert_with(one).record(v);
                values[s as usize].push(v);
                all.record(v);
            };
            for &(s, shift, v) in &records {
                record(s, v >> shift);
            }
            // Sometimes a series turns dense.
            for &(s, seed) in &spread {
                for i in 0..DENSE_AT as u64 + 10 {
                    record(s, (seed >> 30).wrapping_add(i * 7));
                }
            }
            // The histogram's percentiles (no higher than the exact max), the exact max and
            // mean (rounded to the nearest ps).
            let direct = |h: &Histogram<3>, values: &[u64]| {
                let max = values.iter().copied().max().unwrap_or(0);
                let n = values.len() as u128;
                let sum: u128 = values.iter().map(|&v| v as u128).sum();
                let q = |q: f64| h.value_at_quantile(q).unwrap().min(max);
                Summary {
                    p50: q(0.5),
                    p90: q(0.9),
                    p99: q(0.99),
                    max,
                    mean: ((sum + n / 2) / n) as u64,
                }
            };
            let mut merged: Option<Series> = None;
            for (s, h) in each.iter().enumerate() {
                let series = delays.take(s);
                prop_assert_eq!(series.is_some(), h.is_some());
                let (Some(series), Some(h)) = (series, h) else { continue };
                prop_assert_eq!(series.summary(), direct(h, &values[s]), "series {}", s);
                match &mut merged {
                    None => merged = Some(series),
                    Some(m) => m.merge(series),
                }
            }
            prop_assert_eq!(
                merged.expect("one series at least").summary(),
                direct(&all, &values.concat())
            );
        }
    }

    /// Two packets, the second delayed by the first's wire time (1,481 B and 20 B of
    /// overhead at 10 Gbit/s: 1,200,800 ps, in the 1,024-ps bucket 1,200,128..=1,201,151):
    /// the max and mean are exact, and no percentile reads above the max. From the buckets
    /// alone they read 1,201,151 and 600,320, and p90 and p99 1,201,151.
    #[test]
    fn max_and_mean_are_exact() {
        let mut d = Delays::new(2);
        d.record(0, 0);
        d.record(0, 1_200_800);
        let s = d.take(0).unwrap().summary();
        assert_eq!(
            s,
            Summary {
                p50: 0,
                p90: 1_200_800,
                p99: 1_200_800,
                max: 1_200_800,
                mean: 600_400,
            }
        );
        // Merged (a node of two leaves), and turned dense: the same exact figures.
        d.record(0, 0);
        d.record(0, 1_200_800);
        d.record(1, 3);
        let mut node = d.take(0).unwrap();
        node.merge(d.take(1).unwrap());
        assert_eq!(
            (node.summary().max, node.summary().mean),
            (1_200_800, 400_268)
        );
        // Distinct values until the series turns dense.
        let mut values = Vec::new();
        while !d.series[1].counts.is_dense() {
            let v = values.len() as u64 * 1_000_003;
            d.record(1, v);
            values.push(v);
        }
        let (n, sum) = (
            values.len() as u128,
            values.iter().map(|&v| v as u128).sum::<u128>(),
        );
        let s = d.take(1).unwrap().summary();
        assert_eq!(s.max, *values.last().unwrap());
        assert_eq!(s.mean as u128, (sum + n / 2) / n);
    }
}
