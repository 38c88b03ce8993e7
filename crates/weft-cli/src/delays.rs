//! Queueing delays of many series (a replay's leaves, its shaping classes) at HdrHistogram's
//! resolution of 3 significant digits, counted sparsely.
//!
//! A dense [`Histogram`] per series holds a count for every bucket from 0 to its largest
//! value. Delays are in picoseconds, so a series whose delays reach milliseconds holds
//! 100–250 KB of counts whatever it recorded: a replay of 10,000 SENIC classes, each with
//! about 100 packets, peaked at 5.1 GB. Here one hash map counts packets per (series,
//! bucket) that saw one, keyed by the bucket's lowest value
//! ([`Histogram::lowest_equivalent`]); [`Delays::finish`] sorts the counts by series, and
//! [`Finished::histogram`] builds one series's histogram when it is read. That histogram
//! holds, bucket for bucket, what recording into it directly would: the same percentiles,
//! mean and max (unit test `the_sparse_counts_make_the_dense_histogram`).
//!
//! Invariant: a map entry's count is positive. Cost: one hash-map update per record; 24
//! bytes (plus the map's slack) per distinct (series, bucket), at most one per record.
//! Written here because hdrhistogram has no sparse form.

use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;

/// Significant digits of every histogram: HdrHistogram's usual 3 (0.1 % relative error).
const SIGNIFICANT_DIGITS: u8 = 3;

/// A histogram of the replay's precision, empty.
pub fn empty_histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits are valid")
}

/// Delays being recorded.
pub struct Delays {
    /// Packets per (series, lowest value of the bucket), ps.
    counts: FxHashMap<(u32, u64), u64>,
    /// Empty: its configuration maps a value to its bucket.
    shape: Histogram<u64>,
}

impl Delays {
    pub fn new() -> Delays {
        Delays {
            counts: FxHashMap::default(),
            shape: empty_histogram(),
        }
    }

    /// Counts one packet of `series` delayed `delay_ps`.
    pub fn record(&mut self, series: u32, delay_ps: u64) {
        let bucket = self.shape.lowest_equivalent(delay_ps);
        *self.counts.entry((series, bucket)).or_insert(0) += 1;
    }

    /// The counts of series `0..series`, ready to be read one series at a time.
    pub fn finish(self, series: usize) -> Finished {
        let mut counts: Vec<(u32, u64, u64)> = self
            .counts
            .into_iter()
            .map(|((s, b), n)| (s, b, n))
            .collect();
        counts.sort_unstable();
        // starts[s]..starts[s + 1]: series s's counts.
        let mut starts = vec![0usize; series + 1];
        for &(s, _, _) in &counts {
            debug_assert!((s as usize) < series, "series {s} of {series}");
            starts[s as usize + 1] += 1;
        }
        for s in 0..series {
            starts[s + 1] += starts[s];
        }
        Finished { counts, starts }
    }
}

/// Recorded delays, sorted by series.
pub struct Finished {
    /// (series, lowest value of the bucket in ps, packets), sorted.
    counts: Vec<(u32, u64, u64)>,
    starts: Vec<usize>,
}

impl Finished {
    /// Series `s`'s histogram; `None` if it recorded nothing.
    pub fn histogram(&self, s: usize) -> Option<Histogram<u64>> {
        let counts = &self.counts[self.starts[s]..self.starts[s + 1]];
        if counts.is_empty() {
            return None;
        }
        let mut h = empty_histogram();
        for &(_, value, n) in counts {
            h.record_n(value, n)
                .expect("an auto-resizing histogram records any u64");
        }
        Some(h)
    }
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

        /// Each series's histogram built from the sparse counts equals the one recorded
        /// directly: every bucket's count, so every percentile, the mean and the max.
        #[test]
        fn the_sparse_counts_make_the_dense_histogram(
            records in prop::collection::vec((0u32..4, 14u32..64, any::<u64>()), 0..300),
        ) {
            let mut sparse = Delays::new();
            let mut dense: Vec<Option<Histogram<u64>>> = vec![None; 5];
            for &(s, shift, v) in &records {
                // Values at every magnitude from zero to 2^50 ps (19 minutes).
                let v = v >> shift;
                sparse.record(s, v);
                dense[s as usize].get_or_insert_with(empty_histogram).record(v).unwrap();
            }
            let sparse = sparse.finish(5);
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
                    let hb: Vec<_> = h.iter_recorded().map(|b| (b.value_iterated_to(), b.count_at_value())).collect();
                    let db: Vec<_> = d.iter_recorded().map(|b| (b.value_iterated_to(), b.count_at_value())).collect();
                    prop_assert_eq!(hb, db);
                }
            }
        }
    }
}
