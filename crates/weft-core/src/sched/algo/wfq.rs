//! `wfq`: weighted fair queuing among the children by their `weight`, as start-time fair
//! queuing (STFQ) charged on the bytes each child *sends*: `S = max(V, last[c])`,
//! `last[c] = S + L/weight`, rank `S`; `V` becomes the rank of each packet sent through the
//! node. An entry is a token for its child (Loom §4.1): the packet that leaves when it is
//! popped is whichever one the child picks, which need not be the packet that pushed it, so
//! each child's entries keep their order under a correction per child: a pop that takes an
//! entry charged `L` while the packet leaving the child has `L'` bytes moves the child's
//! later entries by `(L' - L)/weight` ([`corrected`]). docs/scheduling.md ("What a `wfq`
//! share counts") says what a share counts.
//!
//! Engines: the reference keeps each child's entries in a sorted map with its correction;
//! the fast engine in a queue per child with its correction, under a heap of their heads,
//! or in one calendar while every entry has one size (`sched/wfq_queues.rs`); the head
//! engine keys each child by the start tag of its first packet, charging it as it sends. All
//! three implement it. A fair leaf orders its flows with the same arithmetic (its flow
//! quantum as the weight), and a class's queue ranks its packets with it on the class's own
//! virtual time.

use super::super::shared::{Rank, FRAC};

/// What a child is charged for a packet of `bytes` wire bytes at weight `weight` (or a
/// `drr` child at quantum `weight`, a fair leaf's flow at its flow quantum): virtual bytes
/// with [`FRAC`] fractional bits. Exact: `bytes` has 32 bits, so the dividend fits in 64.
#[inline]
pub(crate) fn cost(bytes: u32, weight: u64) -> u128 {
    (((bytes as u64) << FRAC) / weight.max(1)) as u128
}

/// `stored + off`, clamped to the ranks (an old rank re-entering after a large correction).
#[inline]
pub(crate) fn corrected(stored: Rank, off: i128) -> Rank {
    stored.saturating_add_signed(off)
}

/// A packet's rank at a node of virtual time `vtime` for `bytes` from a child of weight
/// `weight` whose correction is `off` and whose last finish tag, in its stored ranks, is
/// `last`; and the child's new finish tag. In the child's stored ranks: `max(V, last + off)
/// - off`.
#[inline]
pub(crate) fn tags(vtime: u128, last: u128, off: i128, bytes: u32, weight: u64) -> (Rank, u128) {
    let start = corrected(vtime, -off).max(last);
    (start, start + cost(bytes, weight))
}
