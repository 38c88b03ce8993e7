//! `prio`: strict priority. A node's rank for a packet is the `priority` of the child it came
//! from (lower first); children of equal priority leave in arrival order.
//!
//! Engines: the reference keeps the entries in a sorted map; the fast engine, when the
//! children's priorities differ and there are at most 64 of them, in a bitmap of levels with
//! a count per level (`Ffs`, O(1)), else in a queue per child under a heap of their heads;
//! the head engine keys each child by its priority's position among its siblings'. All
//! three implement it.

use super::super::shared::Rank;

/// The rank of a packet from a child of priority `priority`.
#[inline]
pub(crate) fn rank(priority: u64) -> Rank {
    priority as Rank
}
