//! The arithmetic both engines share, defined once so that they agree to the bit: ranks
//! and their fractional bits, wire times at a rate, SENIC's virtual time and waits, the
//! `wfq` charge and its per-child correction, the token bucket of a shaping class, and a
//! packet's flow key. What a node's rank *means* is documented in [`super::reference`];
//! the reference engine restates everything else (its PIFOs, queues and tags) in its own,
//! plainer form, so that the fast engine is checked against it, not against itself.
//! Integer arithmetic only; no allocation.

use std::hash::{Hash, Hasher};

use super::Packet;
use crate::classifier::Field;
use crate::policy::program::{Algo, FlowKey, FlowSched, LeafSpec};
use crate::policy::Program;

/// A rank: smaller leaves first.
pub type Rank = u128;

/// Fractional bits of virtual times.
pub const FRAC: u32 = 32;

const PS_PER_S: u128 = 1_000_000_000_000;

/// Picoseconds to send `bytes` at `rate_bps`, with [`FRAC`] fractional bits.
pub(crate) fn wire_ps_frac(bytes: u32, rate_bps: u64) -> u128 {
    ((bytes as u128 * 8 * PS_PER_S) << FRAC) / rate_bps.max(1) as u128
}

/// How long, ps, until a senic group's system time `v` reaches a start tag `s > v` (both ps
/// with [`FRAC`] fractional bits) at capacity `cap` with backlogged rates summing to
/// `backlog_rate` (bits/s): the virtual time still to go, × max(1, φ), rounded up; at least
/// 1, and `u64::MAX` (never within the clock) when it does not fit in 64 bits (a 1 bit/s
/// class behind many packets of an oversubscribed node). No division while φ ≤ 1. One
/// definition for both engines.
#[inline]
pub(crate) fn senic_wait_ps(s: u128, v: u128, cap: u128, backlog_rate: u128) -> u64 {
    let gap = s - v;
    let ahead = if backlog_rate <= cap {
        gap
    } else {
        mul_div(gap, backlog_rate, cap)
    };
    let dt = ahead.div_ceil(1u128 << FRAC);
    u64::try_from(dt).unwrap_or(u64::MAX).max(1)
}

/// `⌊a × b / c⌋` for `c ≤ 2^64`, exact however large `a × b`, saturating at `u128::MAX`
/// when the quotient itself does not fit.
#[inline]
pub(crate) fn mul_div(a: u128, b: u128, c: u128) -> u128 {
    debug_assert!(c > 0 && c <= 1 << 64, "mul_div: divisor {c} out of range");
    match a.checked_mul(b) {
        Some(p) => p / c,
        None => mul_div_wide(a, b, c),
    }
}

/// [`mul_div`] when `a × b` does not fit in 128 bits (out of line: rare).
#[cold]
#[inline(never)]
fn mul_div_wide(a: u128, b: u128, c: u128) -> u128 {
    // a × b / c = q × b + r × b / c with a = q × c + r, and r × b / c = r × (b / c) +
    // r × (b % c) / c, where r × (b % c) < c² ≤ 2^128.
    let (q, r) = (a / c, a % c);
    let (bq, br) = (b / c, b % c);
    q.saturating_mul(b)
        .saturating_add(r.saturating_mul(bq))
        .saturating_add(r * br / c)
}

/// What a senic group's system virtual time carries from one advance to the next while
/// φ > 2^32:
/// the remainder of the last division, and the rate sum it was a remainder of. Without it,
/// each advance rounded down on its own, and a group advanced at many close instants (the
/// wakeups of several deferred packets) could lose all of the time between them: with φ above
/// 2^32 (a class rate 2^32 times its node's capacity) `V` then never reached a waiting
/// packet's tag, and both engines deferred it by slivers for ever.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SenicCarry {
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
pub(crate) fn senic_advance_by(
    carry: &mut SenicCarry,
    dt: u128,
    cap: u128,
    backlog_rate: u128,
) -> u128 {
    if backlog_rate <= cap {
        return dt;
    }
    // While φ ≤ 2^32 every picosecond moves V by at least one unit, so what rounding
    // loses is made up by the next wait; only beyond does the remainder need carrying.
    if backlog_rate >> 32 > cap {
        return senic_advance_carried(carry, dt, cap, backlog_rate);
    }
    match dt.checked_mul(cap) {
        Some(p) => p / backlog_rate,
        None => senic_advance_wide(dt, cap, backlog_rate),
    }
}

/// [`senic_advance_by`] with φ above 2^32: the remainder carried (out of line: rare).
#[cold]
#[inline(never)]
fn senic_advance_carried(carry: &mut SenicCarry, dt: u128, cap: u128, backlog_rate: u128) -> u128 {
    if carry.rate != backlog_rate {
        *carry = SenicCarry {
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
            senic_advance_wide(dt, cap, backlog_rate)
        }
    }
}

/// [`senic_advance_by`] when `dt × cap` does not fit in 128 bits (out of line: rare).
#[cold]
#[inline(never)]
fn senic_advance_wide(dt: u128, cap: u128, backlog_rate: u128) -> u128 {
    let (q, r) = (dt / backlog_rate, dt % backlog_rate);
    let part = r
        .checked_mul(cap)
        .map_or(r / (backlog_rate / cap), |p| p / backlog_rate);
    q * cap + part
}

/// A token bucket kept as a generic cell rate algorithm (GCRA): its whole state is the time
/// the bucket would be full again, and the fill time its released packets reserve: 32 bytes
/// (four `u64`s; with its queue's state, 8 bytes in the fast engine, a class costs 40; SENIC
/// keeps 30 bytes per class). Equivalent to a token bucket of `burst` bytes filling at `rate`, with
/// each packet's cost rounded up to a whole picosecond and the depth rounded down: the class
/// never sends more than `burst + rate × interval` in any interval.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bucket {
    /// Bits per second.
    rate_bps: u64,
    /// Time to fill the bucket from empty, ps (its depth, rounded down).
    depth_ps: u64,
    /// When the bucket is full again given what was charged, ps (≤ now: full).
    full_ps: u64,
    /// Bytes reserved by the packets the class's queue has released and that are not sent
    /// yet: the queue gives out its next packet only when the tokens cover those too, so it
    /// releases at the class's rate even while they wait elsewhere. Kept in bytes, not
    /// time, so a live rate update leaves the sum of the reservations exact.
    pending_bytes: u64,
}

impl Bucket {
    pub(crate) fn new(rate: u64, burst_bytes: u64) -> Bucket {
        Bucket {
            rate_bps: rate,
            depth_ps: Self::ps(burst_bytes, rate, false),
            full_ps: 0,
            pending_bytes: 0,
        }
    }

    /// Time to send `bytes` at `rate`, ps, rounded up (or down).
    fn ps(bytes: u64, rate: u64, up: bool) -> u64 {
        if bytes < 1 << 20 {
            // bits · 10^12 < 2^63: a 64-bit division (the common case: one frame).
            let bits = bytes * 8 * PS_PER_S as u64;
            let rate = rate.max(1);
            return if up { bits.div_ceil(rate) } else { bits / rate };
        }
        let bits = bytes as u128 * 8 * PS_PER_S;
        let rate = rate.max(1) as u128;
        let t = if up { bits.div_ceil(rate) } else { bits / rate };
        t.min(u64::MAX as u128 / 4) as u64
    }

    /// What sending `bytes` costs this class: its time at the class rate, ps (rounded up).
    /// The `_cost` methods take it, so a caller computes it once per packet.
    pub(crate) fn cost(&self, bytes: u32) -> u64 {
        Self::ps(bytes as u64, self.rate_bps, true)
    }

    /// The earliest time at or after `now` when `bytes` conform.
    pub(crate) fn earliest(&self, bytes: u32, now: u64) -> u64 {
        self.earliest_cost(self.cost(bytes), now)
    }

    /// [`Bucket::earliest`] for a packet of cost `cost` ps.
    pub(crate) fn earliest_cost(&self, cost: u64, now: u64) -> u64 {
        self.conforming(self.full_ps, cost, now)
    }

    /// When a packet of cost `cost` conforms if the bucket were full again at `full`:
    /// `full + min(cost, depth) - depth`, at or after `now`, written so that it cannot
    /// overflow; a `full` at the end of the clock (a saturated charge or sum) is never.
    #[inline]
    fn conforming(&self, full: u64, cost: u64, now: u64) -> u64 {
        if full == u64::MAX {
            return u64::MAX;
        }
        full.saturating_sub(self.depth_ps - cost.min(self.depth_ps))
            .max(now)
    }

    /// When a packet of cost `cost` conforms once the packets reserved are sent too.
    pub(crate) fn estimate_cost(&self, cost: u64, now: u64) -> u64 {
        if self.pending_bytes == 0 {
            return self.earliest_cost(cost, now);
        }
        // The reserved fill time counts from when the bucket holds nothing extra.
        let pending = Self::ps(self.pending_bytes, self.rate_bps, true);
        let full = self.full_ps.max(now).checked_add(pending);
        self.conforming(full.unwrap_or(u64::MAX), cost, now)
    }

    /// Reserves a released packet's `bytes`.
    pub(crate) fn reserve(&mut self, bytes: u32) {
        self.pending_bytes = self.pending_bytes.saturating_add(bytes as u64);
    }

    /// Gives a reservation of `bytes` back (the packet is sent, or waits elsewhere).
    pub(crate) fn unreserve(&mut self, bytes: u32) {
        debug_assert!(
            self.pending_bytes >= bytes as u64,
            "unreserving {bytes} B of {} B reserved",
            self.pending_bytes
        );
        self.pending_bytes = self.pending_bytes.saturating_sub(bytes as u64);
    }

    /// Whether released packets of the class hold reservations.
    pub(crate) fn reserved(&self) -> bool {
        self.pending_bytes > 0
    }

    /// Changes rate and depth at `now`, keeping the credit earned so far (capped at the new
    /// depth); reservations, in bytes, stand.
    pub(crate) fn reconfigure(&mut self, rate: u64, burst_bytes: u64, now: u64) {
        // Tokens in bit·ps/s units (bits × 10^12), as a token bucket would count them.
        let old_rate = self.rate_bps.max(1) as i128;
        let new_rate = rate.max(1) as i128;
        let cap_old = self.depth_ps as i128 * old_rate;
        let credit = cap_old - self.full_ps.saturating_sub(now) as i128 * old_rate;
        let cap_new = burst_bytes as i128 * 8 * PS_PER_S as i128;
        let missing = cap_new - credit.min(cap_new);
        let limit = (u64::MAX / 4) as i128;
        self.full_ps = now.saturating_add(((missing + new_rate - 1) / new_rate).min(limit) as u64);
        self.rate_bps = rate;
        self.depth_ps = Self::ps(burst_bytes, rate, false);
    }

    /// Charges `bytes` sent at `tx`.
    pub(crate) fn charge(&mut self, bytes: u32, tx: u64) {
        self.charge_cost(self.cost(bytes), tx);
    }

    /// [`Bucket::charge`] for a packet of cost `cost` ps.
    pub(crate) fn charge_cost(&mut self, cost: u64, tx: u64) {
        self.full_ps = self.full_ps.max(tx).saturating_add(cost);
    }
}

/// `stored + off`, clamped to the ranks (an old rank re-entering after a large correction).
#[inline]
pub(crate) fn corrected(stored: Rank, off: i128) -> Rank {
    stored.saturating_add_signed(off)
}

/// Where the paths from leaf nodes `a` and `b` up to the root meet: how many levels above
/// `a` and above `b` the meeting node stands (the index of its rank in each packet's path of
/// ranks), and whether that node orders packets by their own ranks (`prio`, `fifo`, `edf`,
/// `lstf`, a first-come first-served leaf) rather than sharing among its children (`wfq`,
/// `rr`, `drr`, `senic`, a fair leaf). Both engines' shaping classes ask it when a class
/// takes back the reservations of packets its policy ranks lower.
pub(crate) fn meeting(prog: &Program, a: u32, b: u32) -> (usize, usize, bool) {
    let nodes = &prog.nodes;
    let depth = |n: u32| nodes[n as usize].depth;
    let parent = |n: u32| nodes[n as usize].parent.expect("not the root");
    let (mut x, mut y) = (a, b);
    let (mut i, mut j) = (0, 0);
    while depth(x) > depth(y) {
        (x, i) = (parent(x), i + 1);
    }
    while depth(y) > depth(x) {
        (y, j) = (parent(y), j + 1);
    }
    while x != y {
        (x, i) = (parent(x), i + 1);
        (y, j) = (parent(y), j + 1);
    }
    let own = match &nodes[x as usize].algo {
        Algo::Prio | Algo::Fifo | Algo::Edf { .. } | Algo::Lstf { .. } => true,
        Algo::Leaf(l) => l.flow_sched == FlowSched::Fifo,
        _ => false,
    };
    (i, j, own)
}

/// What a `wfq` node charges a child for a packet of `bytes` wire bytes at weight `weight`,
/// virtual bytes with [`FRAC`] fractional bits. One definition for both engines.
#[inline]
pub(crate) fn wfq_cost(bytes: u32, weight: u64) -> u128 {
    (((bytes as u64) << FRAC) / weight.max(1)) as u128
}

pub(crate) fn flow_key(spec: &LeafSpec, pkt: &Packet) -> u64 {
    flow_key_of(spec.flow_key, pkt)
}

/// A packet's flow key within a leaf that groups flows `by`.
pub(crate) fn flow_key_of(by: FlowKey, pkt: &Packet) -> u64 {
    match by {
        FlowKey::Flow => pkt.flow,
        FlowKey::None => 0,
        FlowKey::FiveTuple => {
            let m = &pkt.meta;
            let mut h = rustc_hash::FxHasher::default();
            (m.src, m.dst, m.sport, m.dport, m.proto).hash(&mut h);
            // Packets without addresses or ports fall back to the host's flow id.
            if m.present
                & (Field::Src.bit() | Field::Dst.bit() | Field::Sport.bit() | Field::Dport.bit())
                == 0
            {
                pkt.flow.hash(&mut h);
            }
            h.finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// [`senic_advance_by`]: `dt` while φ ≤ 1, else `⌊dt × cap / backlog_rate⌋`, whether
        /// the product fits in 128 bits or is split into quotient and remainder.
        #[test]
        fn senic_advance_by_is_dt_over_phi(
            dt in any::<u64>(), shift in 0u32..65, cap in 1u64..1 << 63, extra in 0u64..1 << 63
        ) {
            let dt = (dt as u128) << shift;
            let cap = cap as u128;
            let adv = |dt, cap, br| senic_advance_by(&mut SenicCarry::default(), dt, cap, br);
            // Far past any real rates: no panic, and no more than `dt`.
            prop_assert_eq!(adv(u128::MAX, u128::MAX >> 1, u128::MAX), u128::MAX >> 1);
            prop_assert!(adv(dt, u64::MAX as u128, u128::MAX >> 2) <= dt);
            prop_assert_eq!(adv(dt, cap, cap - extra as u128 % cap), dt);
            // φ above 2^32: in pieces as far as at once (dt split in three, the remainder
            // carried).
            let huge = (cap << 33) + extra as u128;
            let small = dt >> 64;
            let mut carry = SenicCarry::default();
            let (a, b) = (small / 3, small / 3);
            let pieces = senic_advance_by(&mut carry, a, cap, huge)
                + senic_advance_by(&mut carry, b, cap, huge)
                + senic_advance_by(&mut carry, small - a - b, cap, huge);
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
