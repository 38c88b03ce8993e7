//! Histograms of `u64` values (delays in picoseconds, durations in nanoseconds) on
//! HdrHistogram's buckets, kept sparse while few of their buckets are in use.
//!
//! [`Histogram<D>`] counts values in the buckets of an `hdrhistogram` histogram of `D`
//! significant decimal digits: one bucket per value below [`Histogram::PER_OCTAVE`] × 2,
//! then `PER_OCTAVE` buckets per power of two (16 at 1 digit, 128 at 2, 1,024 at 3), so a
//! bucket is at most 1/`PER_OCTAVE` of its values wide (6.3 %, 0.8 %, 0.1 %). A quantile is
//! read with the workspace's one rule ([`super::rank`]): the bucket of the rank-th smallest
//! value, as `hdrhistogram`'s `value_at_quantile`.
//!
//! Sparse, then dense: a dense `hdrhistogram` holds a count for every bucket from 0 to its
//! largest value (at 3 digits, 100–250 KB for delays of milliseconds in picoseconds, however
//! few values it saw). A [`Histogram`] starts as a hash map of counts per bucket in use, keyed
//! by the bucket's lowest value, and turns dense once it holds [`Histogram::DENSE_AT`] buckets
//! (four powers of two's worth), about where the map would outgrow the dense form; from then
//! on a record is an index, not a hash. [`Histogram::with_high`] is dense from the start,
//! sized for values up to its `high`: no allocation per record below it (a dataplane's loop).
//! Either way the counts per bucket are those of one `hdrhistogram` that recorded every
//! value directly, so every figure read is too (unit test
//! `sparse_and_dense_count_as_one_hdrhistogram`).
//!
//! Coarser figures ([`Grid`], [`Histogram::coarse`]): some figures are published at a coarser
//! log-linear resolution (the simulator's latencies at 32 buckets per power of two, the
//! software NIC's timing counters at 8). A histogram of enough digits gives them exactly, as
//! counts per bucket of the coarser grid: each of its buckets lies within one of the grid's
//! (both are a power of two wide and aligned on it, the grid's at least as wide), so the
//! grid's counts are those a histogram kept on the grid itself would hold.
//!
//! Invariants: `count` is the sum of the counts; a sparse histogram holds no zero count and
//! keys every count by its bucket's lowest value.
//!
//! Cost: a record is one hash-map update (sparse) or one index and add (dense); adding or
//! subtracting a histogram is O(its buckets); reading one sorts a sparse histogram's buckets,
//! O(b log b), or scans a dense one's counts. Memory: 16 bytes per bucket in use (plus the
//! map's slack) up to `DENSE_AT` buckets, then 8 bytes per bucket from 0 to the largest value.

use std::fmt;
use std::sync::OnceLock;

use hdrhistogram::Histogram as Hdr;
use rustc_hash::FxHashMap;

use super::{at_rank, rank};

/// Values counted in HdrHistogram's buckets of `D` significant decimal digits (0 to 5): see
/// the [module](self).
#[derive(Clone)]
pub struct Histogram<const D: u8 = 3> {
    counts: Counts,
}

/// The counts of a [`Histogram`], whatever its digits (its methods are told them): the work
/// is compiled once, here, not in every crate that names a `Histogram<D>`.
#[derive(Clone)]
struct Counts {
    form: Form,
    /// Values counted.
    total: u64,
}

#[derive(Clone)]
enum Form {
    /// Values per bucket in use, keyed by the bucket's lowest value.
    Sparse(FxHashMap<u64, u64>),
    /// Every bucket's count from 0 to the largest value (boxed: an empty sparse histogram
    /// stays the size of a map).
    Dense(Box<Hdr<u64>>),
}

/// A bucket in use: the values it holds and how many were counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's lowest value.
    pub low: u64,
    /// The bucket's highest value (inclusive).
    pub high: u64,
    /// Values counted in it.
    pub count: u64,
}

/// An empty `hdrhistogram` of `digits`: its configuration maps values to buckets.
fn shape(digits: u8) -> &'static Hdr<u64> {
    static SHAPES: [OnceLock<Hdr<u64>>; 6] = [const { OnceLock::new() }; 6];
    SHAPES[digits as usize].get_or_init(|| empty(digits))
}

/// An empty auto-resizing `hdrhistogram` of `digits`.
fn empty(digits: u8) -> Hdr<u64> {
    Hdr::new(digits).expect("0 to 5 significant digits are valid")
}

/// Records sparse counts into a dense histogram.
fn record_all(h: &mut Hdr<u64>, counts: &FxHashMap<u64, u64>) {
    for (&value, &n) in counts {
        h.record_n(value, n)
            .expect("an auto-resizing histogram records any u64");
    }
}

/// The dense histogram of sparse counts.
fn dense_of(digits: u8, counts: &FxHashMap<u64, u64>) -> Box<Hdr<u64>> {
    let mut h = empty(digits);
    record_all(&mut h, counts);
    Box::new(h)
}

/// The lowest and highest value (inclusive) of `value`'s bucket at `digits`.
fn bucket_of(digits: u8, value: u64) -> (u64, u64) {
    let h = shape(digits);
    (h.lowest_equivalent(value), h.highest_equivalent(value))
}

/// Buckets per power of two at `digits`: see [`Histogram::PER_OCTAVE`].
const fn per_octave(digits: u8) -> u64 {
    (2 * 10u64.pow(digits as u32)).next_power_of_two() / 2
}

/// Buckets in use at which a sparse histogram of `digits` turns dense: four powers of two's
/// worth.
const fn dense_at(digits: u8) -> usize {
    4 * per_octave(digits) as usize
}

impl Counts {
    fn sparse() -> Counts {
        Counts {
            form: Form::Sparse(FxHashMap::default()),
            total: 0,
        }
    }

    fn dense(digits: u8, high: u64) -> Counts {
        let mut h = Hdr::new_with_max(high.max(2), digits).expect("a high of 2 or more is valid");
        h.auto(true);
        Counts {
            form: Form::Dense(Box::new(h)),
            total: 0,
        }
    }

    fn record_n(&mut self, digits: u8, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.total += n;
        match &mut self.form {
            Form::Dense(h) => h
                .record_n(value, n)
                .expect("an auto-resizing histogram records any u64"),
            Form::Sparse(counts) => {
                *counts
                    .entry(shape(digits).lowest_equivalent(value))
                    .or_insert(0) += n;
                if counts.len() >= dense_at(digits) {
                    self.form = Form::Dense(dense_of(digits, counts));
                }
            }
        }
    }

    fn add(&mut self, digits: u8, other: &Counts) {
        self.total += other.total;
        match (&mut self.form, &other.form) {
            (Form::Dense(a), Form::Dense(b)) => a
                .add(&**b)
                .expect("an auto-resizing histogram adds any histogram"),
            (Form::Dense(a), Form::Sparse(b)) => record_all(a, b),
            (Form::Sparse(a), Form::Sparse(b)) => {
                for (&v, &n) in b {
                    *a.entry(v).or_insert(0) += n;
                }
                if a.len() >= dense_at(digits) {
                    self.form = Form::Dense(dense_of(digits, a));
                }
            }
            (Form::Sparse(a), Form::Dense(b)) => {
                let mut dense = b.clone();
                record_all(&mut dense, a);
                self.form = Form::Dense(dense);
            }
        }
    }

    fn merge(&mut self, digits: u8, mut other: Counts) {
        if matches!(self.form, Form::Sparse(_)) && matches!(other.form, Form::Dense(_)) {
            std::mem::swap(self, &mut other);
        }
        self.add(digits, &other);
    }

    fn subtract(&mut self, digits: u8, other: &Counts) {
        const NEVER_COUNTED: &str = "subtracting values that were never counted";
        self.total = self.total.checked_sub(other.total).expect(NEVER_COUNTED);
        match (&mut self.form, &other.form) {
            (Form::Sparse(a), Form::Sparse(b)) => {
                for (v, &n) in b {
                    let c = a.get_mut(v).filter(|c| **c >= n).expect(NEVER_COUNTED);
                    *c -= n;
                    if *c == 0 {
                        a.remove(v);
                    }
                }
            }
            (Form::Dense(a), Form::Dense(b)) => a.subtract(&**b).expect(NEVER_COUNTED),
            (Form::Dense(a), Form::Sparse(b)) => {
                a.subtract(&*dense_of(digits, b)).expect(NEVER_COUNTED)
            }
            (Form::Sparse(a), Form::Dense(b)) => {
                let mut dense = dense_of(digits, a);
                dense.subtract(&**b).expect(NEVER_COUNTED);
                self.form = Form::Dense(dense);
            }
        }
    }

    fn clear(&mut self) {
        self.total = 0;
        match &mut self.form {
            Form::Sparse(c) => c.clear(),
            Form::Dense(h) => h.reset(),
        }
    }

    fn buckets(&self, digits: u8) -> Vec<Bucket> {
        match &self.form {
            Form::Sparse(counts) => {
                let h = shape(digits);
                let mut out: Vec<Bucket> = counts
                    .iter()
                    .map(|(&low, &count)| Bucket {
                        low,
                        high: h.highest_equivalent(low),
                        count,
                    })
                    .collect();
                out.sort_unstable_by_key(|b| b.low);
                out
            }
            Form::Dense(h) => h
                .iter_recorded()
                .map(|b| {
                    let v = b.value_iterated_to();
                    Bucket {
                        low: h.lowest_equivalent(v),
                        high: h.highest_equivalent(v),
                        count: b.count_at_value(),
                    }
                })
                .collect(),
        }
    }

    fn value_at_quantile(&self, digits: u8, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        match &self.form {
            Form::Dense(h) => Some(h.highest_equivalent(h.value_at_quantile(q))),
            Form::Sparse(_) => at_rank(
                self.buckets(digits).into_iter().map(|b| (b.high, b.count)),
                rank(q, self.total),
            ),
        }
    }

    fn coarse(&self, digits: u8, grid: Grid) -> Vec<(u32, u64)> {
        assert!(
            1u64 << grid.bits <= per_octave(digits),
            "a grid of {} buckets per power of two is finer than {digits} digits",
            1u64 << grid.bits
        );
        let mut out: Vec<(u32, u64)> = Vec::new();
        for b in self.buckets(digits) {
            let i = grid.index(b.low);
            match out.last_mut() {
                Some(last) if last.0 == i => last.1 += b.count,
                _ => out.push((i, b.count)),
            }
        }
        out
    }
}

impl<const D: u8> Histogram<D> {
    /// Buckets per power of two above the exact range (HdrHistogram's half sub-bucket count:
    /// 2·10^D rounded up to a power of two, halved); values below twice this have a bucket
    /// each.
    pub const PER_OCTAVE: u64 = {
        assert!(D <= 5, "hdrhistogram keeps 0 to 5 significant digits");
        per_octave(D)
    };

    /// Buckets in use at which a sparse histogram turns dense: four powers of two's worth.
    pub const DENSE_AT: usize = dense_at(D);

    /// An empty histogram, sparse (no allocation until the first record).
    pub fn new() -> Self {
        let _ = Self::PER_OCTAVE;
        Histogram {
            counts: Counts::sparse(),
        }
    }

    /// An empty histogram, dense from the start and sized for values up to `high`: recording
    /// a value up to `high` allocates nothing (a larger one grows it).
    pub fn with_high(high: u64) -> Self {
        let _ = Self::PER_OCTAVE;
        Histogram {
            counts: Counts::dense(D, high),
        }
    }

    /// The lowest and highest value (inclusive) of `value`'s bucket.
    pub fn bucket_of(value: u64) -> (u64, u64) {
        let _ = Self::PER_OCTAVE;
        bucket_of(D, value)
    }

    /// Counts one value.
    pub fn record(&mut self, value: u64) {
        self.counts.record_n(D, value, 1);
    }

    /// Counts `n` values equal to `value`.
    pub fn record_n(&mut self, value: u64, n: u64) {
        self.counts.record_n(D, value, n);
    }

    /// Adds `other`'s values to this histogram's.
    pub fn add(&mut self, other: &Self) {
        self.counts.add(D, &other.counts);
    }

    /// Adds `other`'s values to this histogram's, reusing `other`'s counts where that saves
    /// a copy (a sparse histogram merging a dense one).
    pub fn merge(&mut self, other: Self) {
        self.counts.merge(D, other.counts);
    }

    /// Takes `other`'s values away from this histogram's: `other` holds values this one
    /// counted (no bucket of `other` holds more). Panics otherwise.
    pub fn subtract(&mut self, other: &Self) {
        self.counts.subtract(D, &other.counts);
    }

    /// Forgets every value (a dense histogram keeps its memory).
    pub fn clear(&mut self) {
        self.counts.clear();
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.counts.total
    }

    /// No value counted.
    pub fn is_empty(&self) -> bool {
        self.counts.total == 0
    }

    /// Whether the counts are held dense (every bucket from 0 to the largest value).
    pub fn is_dense(&self) -> bool {
        matches!(self.counts.form, Form::Dense(_))
    }

    /// The buckets in use, in increasing order.
    pub fn buckets(&self) -> Vec<Bucket> {
        self.counts.buckets(D)
    }

    /// The `q`-quantile (0..=1): the highest value of the bucket holding the rank-th
    /// smallest value ([`super::rank`]), at most 1/[`Self::PER_OCTAVE`] above it; `None`
    /// without values. `hdrhistogram`'s `value_at_quantile` for 0 < q ≤ 1.
    pub fn value_at_quantile(&self, q: f64) -> Option<u64> {
        self.counts.value_at_quantile(D, q)
    }

    /// The counts per bucket of the coarser `grid`, `(grid index, count)` for each bucket in
    /// use, in increasing order: exact, as a histogram kept on `grid` would hold them.
    /// Panics if `grid` is finer than this histogram (more than [`Self::PER_OCTAVE`]
    /// buckets per power of two).
    pub fn coarse(&self, grid: Grid) -> Vec<(u32, u64)> {
        self.counts.coarse(D, grid)
    }
}

impl<const D: u8> Default for Histogram<D> {
    fn default() -> Self {
        Self::new()
    }
}

/// Equal when they count the same values in the same buckets, sparse or dense.
impl<const D: u8> PartialEq for Histogram<D> {
    fn eq(&self, other: &Self) -> bool {
        self.count() == other.count() && self.buckets() == other.buckets()
    }
}

impl<const D: u8> Eq for Histogram<D> {}

/// The count and the buckets in use, `[low, count]` each.
impl<const D: u8> fmt::Debug for Histogram<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buckets: Vec<[u64; 2]> = self.buckets().iter().map(|b| [b.low, b.count]).collect();
        f.debug_struct("Histogram")
            .field("digits", &D)
            .field("count", &self.count())
            .field("buckets", &buckets)
            .finish()
    }
}

/// A log-linear grid of buckets at which figures are published, coarser than a
/// [`Histogram`]'s: one bucket per value below 2^(bits+1), then 2^bits buckets per power of
/// two, each 1/2^bits of its power of two wide; every value at or above 2^(top+1) falls in
/// the last bucket (that of 2^(top+1) − 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Buckets per power of two, as a power of two.
    bits: u32,
    /// The highest power of two with buckets of its own, as a power of two.
    top: u32,
}

impl Grid {
    /// The grid of 2^`bits` buckets per power of two up to 2^(`top`+1) (`bits` < `top` < 63).
    pub const fn new(bits: u32, top: u32) -> Grid {
        assert!(bits < top && top < 63, "a grid needs bits < top < 63");
        Grid { bits, top }
    }

    /// The index of `value`'s bucket.
    pub fn index(self, value: u64) -> u32 {
        let v = value.min((2u64 << self.top) - 1);
        if v < 1 << self.bits {
            return v as u32;
        }
        let msb = 63 - v.leading_zeros();
        let sub = (v >> (msb - self.bits)) & ((1 << self.bits) - 1);
        ((msb - self.bits + 1) << self.bits) | sub as u32
    }

    /// The lowest value of bucket `index` and its width (the values it holds).
    pub fn bucket(self, index: u32) -> (u64, u64) {
        let per = 1u64 << self.bits;
        let i = u64::from(index);
        if i < per {
            return (i, 1);
        }
        let msb = (index >> self.bits) + self.bits - 1;
        let shift = msb - self.bits;
        ((per + (i & (per - 1))) << shift, 1 << shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // 64 cases (each builds histograms up to 2^50, 40 powers of two of buckets, in a
        // debug build); `PROPTEST_CASES` asks for more.
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
        ))]

        /// A histogram, whether kept sparse, turned dense on the way, merged from parts
        /// sparse and dense, or dense from the start, counts what one `hdrhistogram` that
        /// recorded every value directly counts: every bucket, so every quantile.
        #[test]
        fn sparse_and_dense_count_as_one_hdrhistogram(
            records in prop::collection::vec((0usize..3, 14u32..64, any::<u64>()), 0..300),
            spread in prop::collection::vec((0usize..3, any::<u64>()), 0..2),
        ) {
            let mut parts: Vec<Histogram<3>> = vec![Histogram::new(); 3];
            let mut whole = Histogram::<3>::new();
            let mut from_start = Histogram::<3>::with_high(1_000_000);
            let mut direct = empty(3);
            let mut record = |s: usize, v: u64| {
                parts[s].record(v);
                whole.record(v);
                from_start.record(v);
                direct.record(v).unwrap();
            };
            // Values at every magnitude from zero to 2^50 ps (19 minutes).
            for &(s, shift, v) in &records {
                record(s, v >> shift);
            }
            // Sometimes enough distinct buckets to turn a part dense part way.
            for &(s, seed) in &spread {
                for i in 0..Histogram::<3>::DENSE_AT as u64 + 100 {
                    record(s, (seed >> 30).wrapping_add(i * 3));
                }
            }
            let want: Vec<Bucket> = direct
                .iter_recorded()
                .map(|b| {
                    let v = b.value_iterated_to();
                    Bucket {
                        low: direct.lowest_equivalent(v),
                        high: v,
                        count: b.count_at_value(),
                    }
                })
                .collect();
            let mut merged = Histogram::<3>::new();
            let mut added = Histogram::<3>::new();
            for p in &parts {
                added.add(p);
                merged.merge(p.clone());
            }
            for h in [&whole, &from_start, &merged, &added] {
                prop_assert_eq!(h.count(), direct.len());
                prop_assert_eq!(h.buckets(), want.clone());
                for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                    let v = (!direct.is_empty()).then(|| direct.highest_equivalent(direct.value_at_quantile(q)));
                    prop_assert_eq!(h.value_at_quantile(q), v, "q {}", q);
                }
            }
            prop_assert_eq!(&whole, &from_start);
            // Taking the parts away again leaves nothing, whatever their forms.
            for p in &parts {
                whole.subtract(p);
                from_start.subtract(p);
            }
            prop_assert!(whole.is_empty() && whole.buckets().is_empty());
            prop_assert!(from_start.is_empty() && from_start.buckets().is_empty());
        }

        /// A coarser grid's counts are those of the grid kept directly: every bucket of the
        /// histogram lies within one of the grid's.
        #[test]
        fn coarse_counts_are_the_grids(
            values in prop::collection::vec((0u32..64, any::<u64>()), 1..300),
        ) {
            for grid in [Grid::new(5, 52), Grid::new(3, 35), Grid::new(7, 60)] {
                let mut h = Histogram::<2>::new();
                let mut direct = std::collections::BTreeMap::<u32, u64>::new();
                for &(shift, v) in &values {
                    let v = v >> shift;
                    h.record(v);
                    *direct.entry(grid.index(v)).or_insert(0) += 1;
                }
                prop_assert_eq!(h.coarse(grid), direct.into_iter().collect::<Vec<_>>());
            }
        }
    }

    /// Buckets of 1, 2 and 3 digits: exact below twice their buckets per power of two, then
    /// at most 1/`PER_OCTAVE` of their values wide.
    #[test]
    fn buckets_per_power_of_two() {
        assert_eq!(Histogram::<1>::PER_OCTAVE, 16);
        assert_eq!(Histogram::<2>::PER_OCTAVE, 128);
        assert_eq!(Histogram::<3>::PER_OCTAVE, 1024);
        assert_eq!(Histogram::<3>::DENSE_AT, 4096);
        assert_eq!(Histogram::<3>::bucket_of(2047), (2047, 2047));
        assert_eq!(Histogram::<3>::bucket_of(2048), (2048, 2049));
        assert_eq!(Histogram::<2>::bucket_of(1_000), (1_000, 1_003));
        assert_eq!(
            Histogram::<3>::bucket_of(u64::MAX),
            (u64::MAX - (1 << 53) + 1, u64::MAX)
        );
    }

    /// Quantiles by the rank rule, at the highest value of the bucket; none when empty.
    #[test]
    fn quantiles_of_few_values() {
        let mut h = Histogram::<3>::new();
        assert_eq!(h.value_at_quantile(0.5), None);
        for v in [0, 1_200_800, 10, 10] {
            h.record(v);
        }
        assert_eq!(h.value_at_quantile(0.25), Some(0));
        assert_eq!(h.value_at_quantile(0.5), Some(10));
        // 1,200,800 is in the 1,024-wide bucket 1,200,128..=1,201,151.
        assert_eq!(h.value_at_quantile(0.99), Some(1_201_151));
        assert_eq!(h.value_at_quantile(1.0), Some(1_201_151));
        h.clear();
        assert_eq!((h.count(), h.value_at_quantile(0.5)), (0, None));
        // Taking a dense histogram's values away from a sparse one's.
        let mut s = Histogram::<3>::new();
        s.record(5);
        s.record(7);
        let mut d = Histogram::<3>::with_high(10);
        d.record(7);
        s.subtract(&d);
        let five = Bucket {
            low: 5,
            high: 5,
            count: 1,
        };
        assert_eq!((s.count(), s.buckets()), (1, vec![five]));
    }

    #[test]
    #[should_panic(expected = "never counted")]
    fn subtracting_values_never_counted_panics() {
        let mut a = Histogram::<3>::new();
        a.record(5);
        let mut b = Histogram::<3>::new();
        b.record(6);
        a.subtract(&b);
    }

    /// Counts past 2^32 (a long run at hundreds of millions of packets per second).
    #[test]
    fn counts_past_u32() {
        let mut h = Histogram::<2>::new();
        h.record_n(1_000, 1 << 33);
        h.record(5);
        assert_eq!(h.count(), (1 << 33) + 1);
        assert_eq!(h.value_at_quantile(0.5), Some(1_003));
    }

    /// A grid's buckets: exact below 2^(bits+1), then 2^bits per power of two, in order;
    /// values from 2^(top+1) up in the last.
    #[test]
    fn grid_buckets() {
        let g = Grid::new(5, 52);
        for v in 0..64u64 {
            assert_eq!(g.index(v), v as u32);
            assert_eq!(g.bucket(v as u32), (v, 1));
        }
        assert_eq!(g.bucket(g.index(64)), (64, 2));
        assert_eq!(g.bucket(g.index(1_000_000)), (999_424, 16_384));
        let last = g.index((1 << 53) - 1);
        assert_eq!(g.index(1 << 53), last);
        assert_eq!(g.index(u64::MAX), last);
        let (low, width) = g.bucket(last);
        assert_eq!(low + width, 1 << 53);
        let mut prev = 0;
        for v in (0..5_000u64).chain((6..53).map(|k| (1u64 << k) + 12_345)) {
            let i = g.index(v);
            let (low, width) = g.bucket(i);
            assert!(low <= v && v - low < width, "{v} in {i}: {low} + {width}");
            assert!(i >= prev);
            prev = i;
            assert!(v < 64 || width * 32 <= low, "{v}: {width} wide");
        }
        let t = Grid::new(3, 35);
        assert_eq!(t.index(15), 15);
        assert_eq!(t.bucket(t.index(16)), (16, 2));
        assert_eq!(t.index(u64::MAX), 271);
    }
}
