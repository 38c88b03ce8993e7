//! `drr`: deficit round robin with the children's `quantum`. Ranked as `wfq` with `weight =
//! quantum` (`S = max(V, last[c])`, `F = S + L/quantum`, `last[c] = F`), then rounded up to
//! a whole round: the rank is the round in which the child's quanta cover the packet, so
//! packets are served round by round, each child sending its quantum's worth per round. `V`
//! is the start of the round being served: a packet of round `R` sent moves it to `R - 1`.
//!
//! Engines: the reference keeps the entries in a sorted map; the fast engine in a queue per
//! child under a heap of their heads, or a calendar for nodes of many children. The head
//! engine does not implement it (a round's rank depends on more than a child's first entry).

use super::super::shared::{Rank, FRAC};
use super::wfq;

/// A packet's rank (its round) at a node of virtual time `vtime` for `bytes` from a child of
/// quantum `quantum_bytes` that last finished at `last`, and the child's new finish tag.
#[inline]
pub(crate) fn tags(vtime: u128, last: u128, bytes: u32, quantum_bytes: u64) -> (Rank, u128) {
    let finish = vtime.max(last) + wfq::cost(bytes, quantum_bytes);
    (round(finish), finish)
}

/// The round in which a child whose finish tag is `finish` is served: `finish` rounded up
/// to a whole round (one unit, [`FRAC`] fractional bits).
#[inline]
pub(crate) fn round(finish: u128) -> Rank {
    let one = 1u128 << FRAC;
    finish.div_ceil(one) * one
}

/// A `drr` node's virtual time once a packet of rank (round) `rank` is sent through it.
#[inline]
pub(crate) fn sent(vtime: u128, rank: Rank) -> u128 {
    vtime.max(rank.saturating_sub(1 << FRAC))
}
