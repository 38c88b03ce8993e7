//! `fifo`: arrival order. A node's rank for a packet is the time it arrived, so packets
//! leave in the order they came, whichever child they came from (ties, at the same
//! picosecond, in arrival order). A first-come first-served leaf ranks its packets the same
//! way.
//!
//! Engines: the reference keeps the entries in a sorted map; the fast engine in one ring
//! (arrival-time ranks never go back); the head engine keeps its children by their first
//! entry's arrival. All three implement it.

use super::super::shared::Rank;

/// The rank of a packet arriving at `now` (ps).
#[inline]
pub(crate) fn rank(now: u64) -> Rank {
    now as Rank
}
