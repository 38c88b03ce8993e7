//! Queueing delays of many series (a replay's leaves, its shaping classes) at HdrHistogram's
//! resolution of 3 significant digits, kept sparsely while a series has few distinct values.
//!
//! A dense [`Histogram`] holds a count for every bucket from 0 to its largest value. Delays
//! are in picoseconds, so a series whose delays reach milliseconds holds 100–250 KB of counts
//! however few packets it saw: a replay of 10,000 SENIC classes, about 100 packets each,
//! peaked at 5.1 GB. Here a series starts as a hash map of counts per bucket that saw a packet
//! (keyed by the bucket's lowest value, [`Histogram::lowest_equivalent`]), and becomes a
//! dense histogram once it has [`DENSE_AT`] buckets, about where the map would outgrow the
//! histogram (and a busy series records by index, not by hashing).
//!
//! What the summary prints of a series ([`Summary`]: p50, p90, p99, max, mean) comes from its
//! sparse counts directly, and series merge (a node's delays are its subtree's) sparse while
//! they stay small: building, scanning and merging a dense histogram per leaf took a replay of
//! 100,000 SENIC classes 20 s. Either way the percentiles are, to the bit, those of one
//! histogram recorded directly (unit tests `the_sparse_counts_make_the_dense_histogram`,
//! `summaries_and_merges_match_one_histogram`): HdrHistogram's quantile rule (the first
//! bucket whose running count reaches `ceil(q × total)`, its highest equivalent value, so
//! at most 0.1 % above the exact percentile), no higher than the exact max.
//!
//! The max and the mean are exact: each series keeps its largest delay and the sum of its
//! delays (u128 picoseconds) beside its counts, and merges them with them; the mean is
//! rounded to the nearest picosecond. (They were the histogram's: the highest value of the
//! max's bucket and a mean of bucket midpoints, 1,201,151 ps for a delay of 1,200,800.)
//!
//! Cost: a record is one hash-map update (sparse) or one histogram record (dense), plus a
//! max and an add. A sparse summary sorts its buckets once, O(b log b). Memory per series:
//! 24 bytes of exact figures, 16 bytes of map entry per bucket (plus the map's slack) up to
//! [`DENSE_AT`] buckets, then one dense histogram. Written here because hdrhistogram has no
//! sparse form.

use std::sync::OnceLock;

use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;

/// Significant digits of every histogram: HdrHistogram's usual 3 (0.1 % relative error).
const SIGNIFICANT_DIGITS: u8 = 3;

/// Buckets at which a series becomes a dense histogram: 4,096 map entries take 64–128 KB,
/// a dense histogram of delays up to a few milliseconds about as much.
const DENSE_AT: usize = 4096;

/// A histogram of the replay's precision, empty.
fn empty_histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits are valid")
}

/// One series's delays: counts per bucket for the percentiles, and the exact max and sum.
pub struct Series {
    counts: Counts,
    /// The largest delay, ps.
    max: u64,
    /// Every delay added up, ps.
    sum: u128,
}

/// A series's packets per bucket.
enum Counts {
    /// Packets per bucket (by the bucket's lowest value, ps) that saw one.
    Sparse(FxHashMap<u64, u64>),
    Dense(Histogram<u64>),
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
        match &mut series.counts {
            Counts::Dense(h) => h
                .record(delay_ps)
                .expect("an auto-resizing histogram records any u64"),
            Counts::Sparse(counts) => {
                *counts
                    .entry(shape().lowest_equivalent(delay_ps))
                    .or_insert(0) += 1;
                if counts.len() >= DENSE_AT {
                    series.counts = Counts::Dense(dense(counts));
                }
            }
        }
    }

    /// Takes series `s` (`None` if it recorded nothing), leaving it empty.
    pub fn take(&mut self, s: usize) -> Option<Series> {
        let series = std::mem::replace(&mut self.series[s], Series::empty());
        (!series.is_empty()).then_some(series)
    }
}

/// An empty histogram of the replay's precision: its configuration maps values to buckets.
fn shape() -> &'static Histogram<u64> {
    static SHAPE: OnceLock<Histogram<u64>> = OnceLock::new();
    SHAPE.get_or_init(empty_histogram)
}

impl Series {
    fn empty() -> Series {
        Series {
            counts: Counts::Sparse(FxHashMap::default()),
            max: 0,
            sum: 0,
        }
    }

    /// Adds `from`'s packets to this series's (a node's delays are its children's).
    pub fn merge(&mut self, from: Series) {
        self.max = self.max.max(from.max);
        self.sum += from.sum;
        let empty = Counts::Sparse(FxHashMap::default());
        let merged = match (std::mem::replace(&mut self.counts, empty), from.counts) {
            (Counts::Sparse(mut a), Counts::Sparse(b)) => {
                for (v, n) in b {
                    *a.entry(v).or_insert(0) += n;
                }
                if a.len() < DENSE_AT {
                    self.counts = Counts::Sparse(a);
                    return;
                }
                dense(&a)
            }
            (Counts::Sparse(a), Counts::Dense(mut b))
            | (Counts::Dense(mut b), Counts::Sparse(a)) => {
                record_all(&mut b, &a);
                b
            }
            (Counts::Dense(mut a), Counts::Dense(b)) => {
                a.add(&b)
                    .expect("an auto-resizing histogram adds any histogram");
                a
            }
        };
        self.counts = Counts::Dense(merged);
    }

    /// The series's summary (it is not empty): see [`Summary`].
    pub fn summary(&self) -> Summary {
        let (p50, p90, p99, total) = match &self.counts {
            Counts::Dense(h) => (
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.9),
                h.value_at_quantile(0.99),
                h.len(),
            ),
            Counts::Sparse(counts) => {
                let mut buckets: Vec<(u64, u64)> = counts.iter().map(|(&v, &n)| (v, n)).collect();
                buckets.sort_unstable();
                let total: u64 = buckets.iter().map(|b| b.1).sum();
                let h = shape();
                // HdrHistogram's `value_at_quantile` for 0 < q <= 1.
                let quantile = |q: f64| {
                    let target = ((q * total as f64).ceil() as u64).max(1);
                    let mut running = 0;
                    for &(v, n) in &buckets {
                        running += n;
                        if running >= target {
                            return h.highest_equivalent(v);
                        }
                    }
                    0
                };
                (quantile(0.5), quantile(0.9), quantile(0.99), total)
            }
        };
        let total = total.max(1) as u128;
        // A bucket's highest value may lie above every delay in it: the exact max bounds it.
        Summary {
            p50: p50.min(self.max),
            p90: p90.min(self.max),
            p99: p99.min(self.max),
            max: self.max,
            mean: ((self.sum + total / 2) / total) as u64,
        }
    }

    /// The series's counts as one histogram.
    #[cfg(test)]
    fn into_histogram(self) -> Histogram<u64> {
        match self.counts {
            Counts::Dense(h) => h,
            Counts::Sparse(c) => dense(&c),
        }
    }

    fn is_empty(&self) -> bool {
        match &self.counts {
            Counts::Sparse(c) => c.is_empty(),
            Counts::Dense(h) => h.is_empty(),
        }
    }
}

/// Records sparse counts into a histogram.
fn record_all(h: &mut Histogram<u64>, counts: &FxHashMap<u64, u64>) {
    for (&value, &n) in counts {
        h.record_n(value, n)
            .expect("an auto-resizing histogram records any u64");
    }
}

/// The histogram of sparse counts.
fn dense(counts: &FxHashMap<u64, u64>) -> Histogram<u64> {
    let mut h = empty_histogram();
    record_all(&mut h, counts);
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // 64 cases (each builds histograms up to 2^50, 40 octaves of buckets, in a debug
        // build); `PROPTEST_CASES` asks for more.
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
        ))]

        /// Each series's histogram, whether kept sparse or turned dense on the way, equals
        /// the one recorded directly: every bucket's count, so every percentile, the mean
        /// and the max.
        #[test]
        fn the_sparse_counts_make_the_dense_histogram(
            records in prop::collection::vec((0u32..4, 14u32..64, any::<u64>()), 0..300),
            spread in prop::collection::vec(any::<u64>(), 0..2),
        ) {
            let mut sparse = Delays::new(5);
            let mut dense: Vec<Option<Histogram<u64>>> = vec![None; 5];
            let mut record = |s: u32, v: u64| {
                sparse.record(s, v);
                dense[s as usize].get_or_insert_with(empty_histogram).record(v).unwrap();
            };
            // Values at every magnitude from zero to 2^50 ps (19 minutes).
            for &(s, shift, v) in &records {
                record(s, v >> shift);
            }
            // Sometimes enough distinct buckets to turn series 4 dense part way.
            for &seed in &spread {
                for i in 0..DENSE_AT as u64 + 100 {
                    record(4, (seed >> 30).wrapping_add(i * 3));
                }
                record(4, seed >> 20);
            }
            for (s, d) in dense.iter().enumerate() {
                let h = sparse.take(s).map(Series::into_histogram);
                prop_assert_eq!(h.is_some(), d.is_some(), "series {}", s);
                if let (Some(h), Some(d)) = (h, d) {
                    prop_assert_eq!(h.len(), d.len());
                    prop_assert_eq!(h.max(), d.max());
                    prop_assert_eq!(h.min(), d.min());
                    prop_assert_eq!(h.mean().to_bits(), d.mean().to_bits());
                    for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                        prop_assert_eq!(h.value_at_quantile(q), d.value_at_quantile(q), "q {}", q);
                    }
                    let buckets = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
                        h.iter_recorded().map(|b| (b.value_iterated_to(), b.count_at_value())).collect()
                    };
                    prop_assert_eq!(buckets(&h), buckets(d));
                }
            }
        }

        /// A summary from sparse counts, and from series merged sparse and dense in any
        /// mix, equals the one of a single histogram that recorded every packet directly:
        /// what `summary.json` prints for a node from its leaves.
        #[test]
        fn summaries_and_merges_match_one_histogram(
            records in prop::collection::vec((0u32..4, 14u32..64, any::<u64>()), 1..300),
            spread in prop::collection::vec((0u32..4, any::<u64>()), 0..2),
        ) {
            let mut delays = Delays::new(4);
            let mut each: Vec<Option<Histogram<u64>>> = vec![None; 4];
            let mut values: Vec<Vec<u64>> = vec![Vec::new(); 4];
            let mut all = empty_histogram();
            let mut record = |s: u32, v: u64| {
                delays.record(s, v);
                each[s as usize].get_or_insert_with(empty_histogram).record(v).unwrap();
                values[s as usize].push(v);
                all.record(v).unwrap();
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
            let direct = |h: &Histogram<u64>, values: &[u64]| {
                let max = values.iter().copied().max().unwrap_or(0);
                let n = values.len() as u128;
                let sum: u128 = values.iter().map(|&v| v as u128).sum();
                Summary {
                    p50: h.value_at_quantile(0.5).min(max),
                    p90: h.value_at_quantile(0.9).min(max),
                    p99: h.value_at_quantile(0.99).min(max),
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
        while !matches!(d.series[1].counts, Counts::Dense(_)) {
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
