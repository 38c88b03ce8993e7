//! `senic`: SENIC's unified rate-limit scheduler (SENIC §4.1–4.2). Each child is a class
//! with a `rate`; a packet of `L` bytes gets WF2Q+ tags `S = max(V, lastF[c])`, `F = S +
//! L·8/rate_c`, and ranks by `F`, but may leave only once `S ≤ V(now)`. The system virtual
//! time `V` advances with real time slowed by `max(1, φ)`, φ the backlogged children's rates
//! over the capacity ([`advance_by`]), so limits hold while the node is undersubscribed and
//! fall back to sharing in the ratio of the limits when it is not. In the two-level form, an
//! inner `senic` node (an L1 class) scales its children's rates to `min(r_i, r_L1 · r_i /
//! Σ active r_j)` ([`inner_rate`]) and both levels order by the same `F` against the top's
//! `V` (a group: the top and the `senic` nodes directly below it).
//!
//! A packet popped before `S ≤ V` waits in its group's own queue, ordered by `S`, and goes
//! back into the tree once the group's `V` has reached its `S` ([`wait_ps`] estimates when,
//! at the current φ).
//!
//! Engines: the reference keeps each group's state in its nodes and the waiting packets in a
//! sorted map; the fast engine in a record per `senic` node (`SenicRt`) and a heap per group.
//! The head engine does not implement it.

use super::super::shared::FRAC;
use super::super::shared::{mul_div, wire_ps_frac};

/// How long, ps, until a senic group's system time `v` reaches a start tag `s > v` (both ps
/// with [`FRAC`] fractional bits) at capacity `cap` with backlogged rates summing to
/// `backlog_rate` (bits/s): the virtual time still to go, × max(1, φ), rounded up; at least
/// 1, and `u64::MAX` (never within the clock) when it does not fit in 64 bits (a 1 bit/s
/// class behind many packets of an oversubscribed node). No division while φ ≤ 1. One
/// definition for both engines.
#[inline]
pub(crate) fn wait_ps(s: u128, v: u128, cap: u128, backlog_rate: u128) -> u64 {
    let gap = s - v;
    let ahead = if backlog_rate <= cap {
        gap
    } else {
        mul_div(gap, backlog_rate, cap)
    };
    let dt = ahead.div_ceil(1u128 << FRAC);
    u64::try_from(dt).unwrap_or(u64::MAX).max(1)
}

/// What a senic group's system virtual time carries from one advance to the next while
/// φ > 2^32:
/// the remainder of the last division, and the rate sum it was a remainder of. Without it,
/// each advance rounded down on its own, and a group advanced at many close instants (the
/// wakeups of several deferred packets) could lose all of the time between them: with φ above
/// 2^32 (a class rate 2^32 times its node's capacity) `V` then never reached a waiting
/// packet's tag, and both engines deferred it by slivers for ever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Carry {
    /// `(dt × cap + rem) mod backlog_rate` of the last advance, in units of 1/`rate` of V.
    rem: u128,
    /// The rate sum `rem` is a remainder of (a change of the sum drops it: less than one
    /// unit of V).
    rate: u128,
}

/// How far a senic group's system virtual time moves in `dt` (ps with [`FRAC`] fractional
/// bits) at capacity `cap` (bits/s) while its backlogged classes' rates sum to
/// `backlog_rate` (bits/s): SENIC §4's `dt / max(1, φ)`, `φ = backlog_rate / cap`, rounded
/// down; with φ above 2^32 the remainder is carried to the next advance (`carry`), so that
/// advancing in pieces moves `V` as far as advancing at once. Exact without overflow: `dt` itself while φ ≤ 1
/// (an idle or undersubscribed group, however long the gap: `dt × cap` in 128 bits
/// overflowed after about nine idle days at 100 Gbit/s), else `(dt × cap + carry) /
/// backlog_rate`, split into quotient and remainder when the product would not fit (then
/// exact while `backlog_rate × cap` fits in 128 bits, and rounded down further beyond: rates
/// summing past 10^19 bit/s). One definition for both engines.
#[inline]
pub(crate) fn advance_by(carry: &mut Carry, dt: u128, cap: u128, backlog_rate: u128) -> u128 {
    if backlog_rate <= cap {
        return dt;
    }
    // While φ ≤ 2^32 every picosecond moves V by at least one unit, so what rounding
    // loses is made up by the next wait; only beyond does the remainder need carrying.
    if backlog_rate >> 32 > cap {
        return advance_carried(carry, dt, cap, backlog_rate);
    }
    match dt.checked_mul(cap) {
        Some(p) => p / backlog_rate,
        None => advance_wide(dt, cap, backlog_rate),
    }
}

/// [`advance_by`] with φ above 2^32: the remainder carried (out of line: rare).
#[cold]
#[inline(never)]
fn advance_carried(carry: &mut Carry, dt: u128, cap: u128, backlog_rate: u128) -> u128 {
    if carry.rate != backlog_rate {
        *carry = Carry {
            rem: 0,
            rate: backlog_rate,
        };
    }
    match dt.checked_mul(cap).and_then(|p| p.checked_add(carry.rem)) {
        Some(p) => {
            let q = p / backlog_rate;
            carry.rem = p - q * backlog_rate;
            q
        }
        None => {
            carry.rem = 0;
            advance_wide(dt, cap, backlog_rate)
        }
    }
}

/// [`advance_by`] when `dt × cap` does not fit in 128 bits (out of line: rare).
#[cold]
#[inline(never)]
fn advance_wide(dt: u128, cap: u128, backlog_rate: u128) -> u128 {
    let (q, r) = (dt / backlog_rate, dt % backlog_rate);
    let part = r
        .checked_mul(cap)
        .map_or(r / (backlog_rate / cap), |p| p / backlog_rate);
    q * cap + part
}

/// A packet's tags `(S, F)` for `bytes` wire bytes from a child last finishing at `last`,
/// at the group's virtual time `v` and the child's (effective) rate `rate_bps`.
#[inline]
pub(crate) fn tags(v: u128, last: u128, bytes: u32, rate_bps: u64) -> (u128, u128) {
    let s = v.max(last);
    (s, s + wire_ps_frac(bytes, rate_bps))
}

/// The rate an inner `senic` node of capacity `cap` (bits/s) gives a child of `rate`
/// while its backlogged children's rates sum to `active`: `min(rate, cap · rate / active)`,
/// at least 1 bit/s.
#[inline]
pub(crate) fn inner_rate(rate: u64, cap: u128, active: u128) -> u64 {
    (rate as u128)
        .min(cap * rate as u128 / active.max(1))
        .max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// [`advance_by`]: `dt` while φ ≤ 1, else `⌊dt × cap / backlog_rate⌋`, whether
        /// the product fits in 128 bits or is split into quotient and remainder.
        #[test]
        fn advance_by_is_dt_over_phi(
            dt in any::<u64>(), shift in 0u32..65, cap in 1u64..1 << 63, extra in 0u64..1 << 63
        ) {
            let dt = (dt as u128) << shift;
            let cap = cap as u128;
            let adv = |dt, cap, br| advance_by(&mut Carry::default(), dt, cap, br);
            // Far past any real rates: no panic, and no more than `dt`.
            prop_assert_eq!(adv(u128::MAX, u128::MAX >> 1, u128::MAX), u128::MAX >> 1);
            prop_assert!(adv(dt, u64::MAX as u128, u128::MAX >> 2) <= dt);
            prop_assert_eq!(adv(dt, cap, cap - extra as u128 % cap), dt);
            // φ above 2^32: in pieces as far as at once (dt split in three, the remainder
            // carried).
            let huge = (cap << 33) + extra as u128;
            let small = dt >> 64;
            let mut carry = Carry::default();
            let (a, b) = (small / 3, small / 3);
            let pieces = advance_by(&mut carry, a, cap, huge)
                + advance_by(&mut carry, b, cap, huge)
                + advance_by(&mut carry, small - a - b, cap, huge);
            prop_assert_eq!(pieces, small * cap / huge);
            let br = cap + extra as u128 + 1;
            // mul_div: the product when it fits; past it, q × b + ⌊r × b / c⌋ by hand.
            let b = cap + extra as u128;
            let c = (extra as u128 % cap) + 1;
            match dt.checked_mul(b) {
                Some(p) => prop_assert_eq!(mul_div(dt, b, c), p / c),
                None => {
                    let (q, r) = (dt / c, dt % c);
                    let want = q.checked_mul(b).and_then(|x| x.checked_add(r * b / c));
                    prop_assert_eq!(mul_div(dt, b, c), want.unwrap_or(u128::MAX));
                }
            }
            // Quotient and remainder by hand: floor(dt × cap / br) = q × cap + ⌊r × cap / br⌋.
            let (q, r) = (dt / br, dt % br);
            let want = q * cap + r * cap / br;
            prop_assert_eq!(adv(dt, cap, br), want);
            if let Some(p) = dt.checked_mul(cap) {
                prop_assert_eq!(want, p / br);
            }
        }
    }
}
