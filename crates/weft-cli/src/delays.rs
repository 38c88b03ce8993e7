//! Queueing delays of many series (a replay's leaves, its shaping classes) at HdrHistogram's
//! resolution of 3 significant digits, kept sparsely while a series has few distinct values.
//!
//! A dense [`Histogram`] holds a count for every bucket from 0 to its largest value. Delays
//! are in picoseconds, so a series whose delays reach milliseconds holds 100–250 KB of counts
//! however few packets it saw: a replay of 10,000 SENIC classes, about 100 packets each,
//! peaked at 5.1 GB. Here a series starts as a hash map of counts per bucket that saw a packet
//! (keyed by the bucket's lowest value, [`Histogram::lowest_equivalent`]), and becomes a
//! dense histogram once it has [`DENSE_AT`] buckets, about where the map would outgrow the
//! histogram (and a busy series records by index, not by hashing). [`Delays::histogram`]
//! builds a sparse series's histogram when it is read. Either way the histogram holds,
//! bucket for bucket, what recording into it directly would: the same percentiles, mean and
//! max (unit test `the_sparse_counts_make_the_dense_histogram`).
//!
//! Cost: a record is one hash-map update (sparse) or one histogram record (dense). Memory
//! per series: 16 bytes of map entry per bucket (plus the map's slack) up to [`DENSE_AT`]
//! buckets, then one dense histogram. Written here because hdrhistogram has no sparse form.

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
enum Series {
    /// Packets per bucket (by the bucket's lowest value, ps) that saw one.
    Sparse(FxHashMap<u64, u64>),
    Dense(Histogram<u64>),
}

/// The delays of series `0..n`.
pub struct Delays {
    series: Vec<Series>,
    /// Empty: its configuration maps a value to its bucket.
    shape: Histogram<u64>,
}

impl Delays {
    pub fn new(n: usize) -> Delays {
        Delays {
            series: (0..n)
                .map(|_| Series::Sparse(FxHashMap::default()))
                .collect(),
            shape: empty_histogram(),
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
                    .entry(self.shape.lowest_equivalent(delay_ps))
                    .or_insert(0) += 1;
                if counts.len() >= DENSE_AT {
                    *series = Series::Dense(dense(counts));
                }
            }
        }
    }

    /// Series `s`'s histogram, `None` if it recorded nothing; the series is left empty.
    pub fn histogram(&mut self, s: usize) -> Option<Histogram<u64>> {
        let h = match std::mem::replace(&mut self.series[s], Series::Sparse(Default::default())) {
            Series::Dense(h) => h,
            Series::Sparse(counts) => dense(&counts),
        };
        (!h.is_empty()).then_some(h)
    }
}

/// The histogram of sparse counts.
fn dense(counts: &FxHashMap<u64, u64>) -> Histogram<u64> {
    let mut h = empty_histogram();
    for (&value, &n) in counts {
        h.record_n(value, n)
            .expect("an auto-resizing histogram records any u64");
    }
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
                let h = sparse.histogram(s);
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
    }
}
