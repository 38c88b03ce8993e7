//! `edf`: earliest deadline first. A node's rank for a packet is its `deadline_ps`, or, when
//! it carries none, its arrival plus the node's `default_deadline` (1 ms unless written).
//!
//! Engines: the reference and the fast engine keep the entries in a heap ordered by rank;
//! the head engine does not implement it (a child's later packets may rank before its
//! first).

use super::super::shared::Rank;

/// The rank of a packet arriving at `now` (ps) with deadline `deadline_ps`, or `now +
/// default_ps` when it carries none (saturating at the end of time).
#[inline]
pub(crate) fn rank(now: u64, deadline_ps: Option<u64>, default_ps: u64) -> Rank {
    deadline_ps.unwrap_or(now.saturating_add(default_ps)) as Rank
}
