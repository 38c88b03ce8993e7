//! `lstf`: least slack time first. A node's rank for a packet arriving at `now` is `now +
//! slack`, the packet's own `slack_ps` or the node's `default_slack` (1 ms unless written).
//!
//! Engines: the reference and the fast engine keep the entries in a heap ordered by rank;
//! the head engine does not implement it (a child's later packets may rank before its
//! first).

use super::super::shared::Rank;

/// The rank of a packet arriving at `now` (ps) with slack `slack_ps`, or `default_ps` when
/// it carries none.
#[inline]
pub(crate) fn rank(now: u64, slack_ps: Option<u64>, default_ps: u64) -> Rank {
    now as Rank + slack_ps.unwrap_or(default_ps) as Rank
}
