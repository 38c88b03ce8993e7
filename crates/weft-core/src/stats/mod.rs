//! Statistics of measurements, shared by the simulator, the software NIC's testbed and the
//! command line: Jain's fairness index ([`jain`]).
//!
//! Pure functions of their arguments: no clock, no I/O, no allocation.
//!
//! Cost: [`jain`] is one pass over its input, O(n).

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
