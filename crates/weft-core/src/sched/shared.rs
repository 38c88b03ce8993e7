//! The arithmetic every engine shares beyond the node algorithms' own (those are in
//! [`super::algo`], one file each), defined once so that the engines agree to the bit:
//! ranks and their fractional bits, wire times at a rate, `⌊a × b / c⌋` without overflow,
//! the token bucket of a shaping class, and where two packets' paths meet. The reference
//! engine restates everything else (its PIFOs, queues and tags) in its own, plainer form,
//! so that the fast engine is checked against it, not against itself. Integer arithmetic
//! only; no allocation.

use crate::policy::program::{Algo, FlowSched};
use crate::policy::{NodeId, Program};

/// A rank: smaller leaves first.
pub type Rank = u128;

/// Fractional bits of virtual times.
pub const FRAC: u32 = 32;

const PS_PER_S: u128 = 1_000_000_000_000;

/// Picoseconds to send `bytes` at `rate_bps`, with [`FRAC`] fractional bits.
pub(crate) fn wire_ps_frac(bytes: u32, rate_bps: u64) -> u128 {
    ((bytes as u128 * 8 * PS_PER_S) << FRAC) / rate_bps.max(1) as u128
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

/// Where the paths from leaf nodes `a` and `b` up to the root meet: how many levels above
/// `a` and above `b` the meeting node stands (the index of its rank in each packet's path of
/// ranks), and whether that node orders packets by their own ranks (`prio`, `fifo`, `edf`,
/// `lstf`, a first-come first-served leaf) rather than sharing among its children (`wfq`,
/// `rr`, `drr`, `senic`, a fair leaf). Both engines' shaping classes ask it when a class
/// takes back the reservations of packets its policy ranks lower.
pub(crate) fn meeting(prog: &Program, a: u32, b: u32) -> (usize, usize, bool) {
    let depth = |n: NodeId| prog.node(n).depth;
    let parent = |n: NodeId| prog.node(n).parent.expect("not the root");
    let (mut x, mut y) = (NodeId::new(a), NodeId::new(b));
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
    let own = match &prog.node(x).algo {
        Algo::Prio | Algo::Fifo | Algo::Edf { .. } | Algo::Lstf { .. } => true,
        Algo::Leaf(l) => l.flow_sched == FlowSched::Fifo,
        _ => false,
    };
    (i, j, own)
}
