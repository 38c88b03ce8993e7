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
//! 100,000 SENIC classes 20 s. Either way the figures are, to the bit, those of one
//! histogram recorded directly (unit tests `the_sparse_counts_make_the_dense_histogram`,
//! `summaries_and_merges_match_one_histogram`): HdrHistogram's quantile rule (the first
//! bucket whose running count reaches `ceil(q × total)`, its highest equivalent value), its
//! max and its mean (each bucket's median equivalent value, in bucket order, the same
//! floating-point sum).
//!
//! Cost: a record is one hash-map update (sparse) or one histogram record (dense). A sparse
//! summary sorts its buckets once, O(b log b). Memory per series: 16 bytes of map entry per
//! bucket (plus the map's slack) up to [`DENSE_AT`] buckets, then one dense histogram.
//! Written here because hdrhistogram has no sparse form.

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

/// One series's delays.
pub enum Series {
    /// Packets per bucket (by the bucket's lowest value, ps) that saw one.
    Sparse(FxHashMap<u64, u64>),
    Dense(Histogram<u64>),
}

/// What `summary.json` gives of a series: percentiles, max and mean (rounded), ps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
    pub mean: u64,
}

/// The delays of series `0..n`.
pub struct Delays {
    series: Vec<Series>,
}

impl Delays {
    pub fn new(n: usize) -> Delays {
        Delays {
            series: (0..n)
                .map(|_| Series::Sparse(FxHashMap::default()))
                .collect(),
        }
    }

    /// Counts one packet of series `s` delayed `delay_ps`.
    pub fn record(&mut self, s: u32, delay_ps: u64) {
        let series = &mut self.series[s as usize];
        match series {
            Series::Dense(h) => h
                .record(delay_ps)
                .expect("an auto-resizing histogram records any u64"),
            Series::Sparse(counts) => {
                *counts
                    .entry(shape().lowest_equivalent(delay_ps))
                    .or_insert(0) += 1;
                if counts.len() >= DENSE_AT {
                    *series = Series::Dense(dense(counts));
                }
            }
        }
    }

    /// Takes series `s` (`None` if it recorded nothing), leaving it empty.
    pub fn take(&mut self, s: usize) -> Option<Series> {
        let series = std::mem::replace(&mut self.series[s], Series::Sparse(Default::default()));
        (!series.is_empty()).then_some(series)
    }
}

/// An empty histogram of the replay's precision: its configuration maps values to buckets.
fn shape() -> &'static Histogram<u64> {
    static SHAPE: OnceLock<Histogram<u64>> = OnceLock::new();
    SHAPE.get_or_init(empty_histogram)
}

impl Series {
    /// Adds `from`'s packets to this series's (a node's delays are its children's).
    pub fn merge(&mut self, from: Series) {
        let empty = Series::Sparse(FxHashMap::default());
        let merged = match (std::mem::replace(self, empty), from) {
            (Series::Sparse(mut a), Series::Sparse(b)) => {
                for (v, n) in b {
                    *a.entry(v).or_insert(0) += n;
                }
                if a.len() < DENSE_AT {
                    *self = Series::Sparse(a);
                    return;
                }
                dense(&a)
            }
            (Series::Sparse(a), Series::Dense(mut b))
            | (Series::Dense(mut b), Series::Sparse(a)) => {
                record_all(&mut b, &a);
                b
            }
            (Series::Dense(mut a), Series::Dense(b)) => {
                a.add(&b)
                    .expect("an auto-resizing histogram adds any histogram");
                a
            }
        };
        *self = Series::Dense(merged);
    }

    /// The series's summary (it is not empty).
    pub fn summary(&self) -> Summary {
        match self {
            Series::Dense(h) => Summary {
                p50: h.value_at_quantile(0.5),
                p90: h.value_at_quantile(0.9),
                p99: h.value_at_quantile(0.99),
                max: h.max(),
                mean: h.mean().round() as u64,
            },
            Series::Sparse(counts) => {
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
                let mean = buckets.iter().fold(0.0f64, |sum, &(v, n)| {
                    sum + h.median_equivalent(v) as f64 * n as f64 / total as f64
                });
                Summary {
                    p50: quantile(0.5),
                    p90: quantile(0.9),
                    p99: quantile(0.99),
                    max: buckets.last().map_or(0, |&(v, _)| h.highest_equivalent(v)),
                    mean: mean.round() as u64,
                }
            }
        }
    }

    /// The series as one histogram.
    #[cfg(test)]
    fn into_histogram(self) -> Histogram<u64> {
        match self {
            Series::Dense(h) => h,
            Series::Sparse(c) => dense(&c),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Series::Sparse(c) => c.is_empty(),
            Series::Dense(h) => h.is_empty(),
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
            let mut all = empty_histogram();
            let mut record = |s: u32, v: u64| {
                delays.record(s, v);
                each[s as usize].get_or_insert_with(empty_histogram).record(v).unwrap();
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
            let direct = |h: &Histogram<u64>| Summary {
                p50: h.value_at_quantile(0.5),
                p90: h.value_at_quantile(0.9),
                p99: h.value_at_quantile(0.99),
                max: h.max(),
                mean: h.mean().round() as u64,
            };
            let mut merged: Option<Series> = None;
            for (s, h) in each.iter().enumerate() {
                let series = delays.take(s);
                prop_assert_eq!(series.is_some(), h.is_some());
                let (Some(series), Some(h)) = (series, h) else { continue };
                prop_assert_eq!(series.summary(), direct(h), "series {}", s);
                match &mut merged {
                    None => merged = Some(series),
                    Some(m) => m.merge(series),
                }
            }
            prop_assert_eq!(merged.expect("one series at least").summary(), direct(&all));
        }
    }
}
