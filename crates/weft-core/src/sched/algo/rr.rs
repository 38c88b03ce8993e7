//! `rr`: round robin, one packet per backlogged child per round. Ranked as `wfq` with every
//! packet costing one unit whatever its size: `S = max(V, last[c])`, `last[c] = S + 1`, rank
//! `S`; `V` becomes the rank of each packet sent through the node.
//!
//! Engines: the reference keeps the entries in a sorted map; the fast engine in a queue per
//! child (a child's entries rank in push order) under a heap of their heads, or a calendar
//! for nodes of many children; the head engine keys each child by the start tag of its first
//! packet. All three implement it.

use super::super::shared::{Rank, FRAC};

/// What a packet costs at an `rr` node: one unit, with [`FRAC`] fractional bits.
pub(crate) const COST: u128 = 1 << FRAC;

/// A packet's rank at a node of virtual time `vtime` from a child that last finished at
/// `last`, and the child's new finish tag.
#[inline]
pub(crate) fn tags(vtime: u128, last: u128) -> (Rank, u128) {
    let start = vtime.max(last);
    (start, start + COST)
}
