//! The set of a head-engine node's children that hold packets: a heap of keys, or, for a
//! `prio` node whose children's priorities differ, a bitmap of levels (O(1)).

use crate::sched::key_heap::{KeyEntry, KeyHeap};

/// A node's children in its set.
#[derive(Debug, Clone)]
pub(super) enum Children {
    /// A heap of `(key, first entry's arrival, child)`.
    Heap(KeyHeap),
    /// A `prio` node whose children's priorities differ (at most 64 of them): bit `i` of
    /// `bits` is set when the child with the `i`-th smallest priority (the engine's
    /// `by_level[at + i]`) is in the set. No ties, so no arrival numbers.
    Levels { bits: u64, at: u32 },
}

impl Default for Children {
    fn default() -> Children {
        Children::Heap(KeyHeap::default())
    }
}

impl Children {
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Children::Heap(h) => h.len() == 0,
            Children::Levels { bits, .. } => *bits == 0,
        }
    }

    /// The first child, given the engine's `by_level`.
    #[inline(always)]
    pub(super) fn first(&self, by_level: &[u32]) -> Option<u32> {
        match self {
            Children::Heap(h) => h.peek().map(|e| e.v),
            Children::Levels { bits, at } => {
                (*bits != 0).then(|| by_level[*at as usize + bits.trailing_zeros() as usize])
            }
        }
    }

    /// Adds child `e.v`, of level `level` under a `Levels` node.
    #[inline(always)]
    pub(super) fn push(&mut self, e: KeyEntry, level: u8) {
        match self {
            Children::Heap(h) => h.push(e),
            Children::Levels { bits, .. } => *bits |= 1 << level,
        }
    }

    /// Removes the first child.
    #[inline(always)]
    pub(super) fn pop_first(&mut self) {
        match self {
            Children::Heap(h) => {
                h.pop();
            }
            Children::Levels { bits, .. } => *bits &= bits.wrapping_sub(1),
        }
    }

    /// Every child in the set (tests).
    pub(super) fn members(&self, by_level: &[u32]) -> Vec<u32> {
        match self {
            Children::Heap(h) => h.entries().iter().map(|e| e.v).collect(),
            Children::Levels { bits, at } => (0..64)
                .filter(|l| bits & (1u64 << l) != 0)
                .map(|l| by_level[*at as usize + l])
                .collect(),
        }
    }
}
