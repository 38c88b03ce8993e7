//! Statistics of measurements, shared by the simulator, the software NIC and the command
//! line: Jain's fairness index ([`jain`]), histograms of `u64` values ([`hist`]: on
//! HdrHistogram's buckets, read at a coarser [`Grid`] where a figure is published at one),
//! and exact quantiles ([`weighted_quantile`], [`median`]).
//!
//! One quantile rule everywhere ([`rank`], [`at_rank`]): the `q`-quantile of `n` values is
//! the rank-th smallest, rank = ⌈q·n⌉ kept within 1..=n (`hdrhistogram`'s
//! `value_at_quantile`).
//!
//! Histogram or exact: a histogram's quantile is its bucket's (at most 0.1 % off at 3
//! significant digits), for O(1) a value and memory per bucket in use. The exact ones hold
//! and sort their values, so they are for values already few, where a bucket's width would
//! be the error itself: a benchmark's rounds ([`median`], the mean of the middle two of an
//! even count), the simulator's inter-departure jitter, whose histogram buckets each stand
//! at their gaps' mean (a constant rate must read 0, not a bucket's width).
//!
//! Pure functions and data: no clock, no I/O.
//!
//! Cost: [`jain`] is one pass over its input, O(n), and allocates nothing; [`at_rank`] walks
//! its counts until the rank, O(n); [`weighted_quantile`] and [`median`] sort, O(n log n)
//! ([`median`] a copy of its input); [`hist`] gives its own.

pub mod hist;

pub use hist::{Bucket, Grid, Histogram};

/// The rank of the `q`-quantile (0..=1) among `n` values: ⌈q·n⌉, at least 1 and at most
/// `n` (1 when `n` is 0: nothing reaches it).
pub fn rank(q: f64, n: u64) -> u64 {
    ((q * n as f64).ceil() as u64).min(n).max(1)
}

/// The key of the first of `counts` (keys in increasing order, each with how many values it
/// stands for) at which the running count reaches `rank`; `None` if none does.
pub fn at_rank<K>(counts: impl IntoIterator<Item = (K, u64)>, rank: u64) -> Option<K> {
    let mut seen = 0u64;
    for (key, count) in counts {
        seen += count;
        if seen >= rank {
            return Some(key);
        }
    }
    None
}

/// The `q`-quantile (0..=1) of `values`, each given with how many it stands for, exactly:
/// the rank-th smallest ([`rank`] over the counts' sum), `None` without values. Sorts
/// `values` (by [`f64::total_cmp`]), O(n log n).
pub fn weighted_quantile(values: &mut [(f64, u64)], q: f64) -> Option<f64> {
    values.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let n = values.iter().map(|v| v.1).sum();
    at_rank(values.iter().copied(), rank(q, n))
}

/// The median of `values`, exactly: the middle one, or the mean of the middle two of an even
/// count; `None` without values. Sorts a copy (by [`f64::total_cmp`]), O(n log n).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Jain's fairness index of the allocations `x` (throughputs, or throughputs divided by
/// their ideal share or weight): (Σx)² / (n · Σx²), 1 when all are equal, down to 1/n when
/// one holds everything.
///
/// `None` where the index means nothing, the stricter of the behaviours it replaces (the
/// simulator's read 1, the testbed's 0, for no allocation or all zero; neither checked its
/// input):
/// * no allocation (`x` empty), or every allocation zero: 0/0, nothing was shared, which is
///   neither fair nor unfair (a stalled run must not read as perfectly fair);
/// * an allocation negative, infinite or NaN: the formula would give a number, a
///   meaningless one.
///
/// One allocation alone that is positive gives 1.
pub fn jain(x: &[f64]) -> Option<f64> {
    if x.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return None;
    }
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    (s2 > 0.0).then(|| s * s / (x.len() as f64 * s2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn ranks_and_the_value_at_one() {
        assert_eq!(rank(0.5, 4), 2);
        assert_eq!(rank(0.51, 4), 3);
        assert_eq!(rank(0.99, 100), 99);
        assert_eq!(rank(0.0, 7), 1);
        assert_eq!(rank(1.5, 7), 7);
        assert_eq!(rank(0.5, 0), 1);
        let counts = [(10, 2), (20, 0), (30, 1), (40, 5)];
        assert_eq!(at_rank(counts, 1), Some(10));
        assert_eq!(at_rank(counts, 3), Some(30));
        assert_eq!(at_rank(counts, 4), Some(40));
        assert_eq!(at_rank(counts, 9), None);
        assert_eq!(at_rank(Vec::<(u64, u64)>::new(), 1), None);
    }

    #[test]
    fn weighted_quantiles_are_exact() {
        let mut v = [(3.5, 1), (-1.0, 2), (10.0, 1), (0.25, 0)];
        assert_eq!(weighted_quantile(&mut v, 0.5), Some(-1.0));
        assert_eq!(weighted_quantile(&mut v, 0.75), Some(3.5));
        assert_eq!(weighted_quantile(&mut v, 0.99), Some(10.0));
        assert_eq!(weighted_quantile(&mut v, 0.0), Some(-1.0));
        assert_eq!(weighted_quantile(&mut [], 0.5), None);
        assert_eq!(weighted_quantile(&mut [(1.0, 0)], 0.5), None);
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn jain_from_equal_to_one_taking_all() {
        assert!(close(jain(&[1.0, 1.0]), 1.0));
        assert!(close(jain(&[3.5, 3.5, 3.5]), 1.0));
        assert!(close(jain(&[1.0, 0.0]), 0.5));
        assert!(close(jain(&[0.0, 0.0, 7.0, 0.0]), 0.25));
        // (1 + 2 + 3)² / (3 · 14)
        assert!(close(jain(&[1.0, 2.0, 3.0]), 36.0 / 42.0));
        // Scale does not matter: Mbit/s or bytes per window.
        assert_eq!(jain(&[1.0, 2.0, 3.0]), jain(&[2.0, 4.0, 6.0]));
        // One positive allocation alone is fair to itself.
        assert!(close(jain(&[0.25]), 1.0));
    }

    #[test]
    fn jain_is_undefined_without_allocation_or_on_meaningless_input() {
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0]), None);
        assert_eq!(jain(&[0.0, 0.0, 0.0]), None);
        assert_eq!(jain(&[1.0, -1.0]), None);
        assert_eq!(jain(&[-2.0, -2.0]), None);
        assert_eq!(jain(&[1.0, f64::NAN]), None);
        assert_eq!(jain(&[1.0, f64::INFINITY]), None);
        // Negative zero is zero.
        assert!(close(jain(&[-0.0, 2.0]), 0.5));
    }
}
