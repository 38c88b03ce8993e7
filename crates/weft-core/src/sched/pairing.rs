//! Pairing heaps of PIFO entries `(rank, seq, payload)` whose nodes live in one shared pool,
//! for the fast engine's shaping-class queues: a class keeps a PIFO per node of its packets'
//! paths, most of them small and short-lived, so a heap with its own buffer per PIFO would
//! reach a peak of its own for every `(class, node)` and allocate whenever any of them grew.
//! Here the pool grows to the most entries held at once across all of them, one number, and
//! keeps its capacity (`tests/steady_alloc.rs`).
//!
//! A heap is its root's index (`NO` when empty), kept by the caller. Order: `(rank, seq)`, as
//! [`MinHeap`](super::heap::MinHeap) (the engine's sequence numbers are unique per push).
//! Invariant: no node is before its parent; a node is in exactly one heap or the free list.
//! Cost: push O(1); pop O(log n) amortized (two-pass pairing of the root's children); peek
//! O(1). Hand-written: no crate keeps many pairing heaps in one pool of `u32` handles.

use super::fast::NO;
use super::heap::HeapEntry;

#[derive(Debug, Clone, Copy)]
struct Node {
    e: HeapEntry,
    /// First child (`NO`: none).
    child: u32,
    /// Next sibling (`NO`: none); the next free node in the free list.
    sibling: u32,
}

/// The shared pool (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct PairingHeaps {
    nodes: Vec<Node>,
    /// First free node (`NO`: none).
    free: u32,
    /// Nodes in use.
    used: usize,
}

impl Default for PairingHeaps {
    fn default() -> PairingHeaps {
        PairingHeaps {
            nodes: Vec::new(),
            free: NO,
            used: 0,
        }
    }
}

impl PairingHeaps {
    /// Entries held in all heaps.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.used
    }

    /// The first entry of the heap rooted at `root`.
    #[inline]
    pub(super) fn peek(&self, root: u32) -> Option<&HeapEntry> {
        (root != NO).then(|| &self.nodes[root as usize].e)
    }

    /// Adds `e` to the heap rooted at `*root`.
    pub(super) fn push(&mut self, root: &mut u32, e: HeapEntry) {
        let node = Node {
            e,
            child: NO,
            sibling: NO,
        };
        let i = if self.free == NO {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            let i = self.free;
            self.free = self.nodes[i as usize].sibling;
            self.nodes[i as usize] = node;
            i
        };
        self.used += 1;
        *root = if *root == NO { i } else { self.meld(*root, i) };
    }

    /// Removes and returns the first entry of the heap rooted at `*root`.
    pub(super) fn pop(&mut self, root: &mut u32) -> Option<HeapEntry> {
        let r = *root;
        if r == NO {
            return None;
        }
        let Node { e, child, .. } = self.nodes[r as usize];
        // Pass 1: meld the children in pairs, left to right, chaining the results in
        // reverse through their sibling links.
        let mut acc = NO;
        let mut next = child;
        while next != NO {
            let a = next;
            let b = self.nodes[a as usize].sibling;
            let m = if b == NO {
                next = NO;
                self.nodes[a as usize].sibling = NO;
                a
            } else {
                next = self.nodes[b as usize].sibling;
                self.nodes[a as usize].sibling = NO;
                self.nodes[b as usize].sibling = NO;
                self.meld(a, b)
            };
            self.nodes[m as usize].sibling = acc;
            acc = m;
        }
        // Pass 2: meld them right to left into one.
        let mut res = NO;
        while acc != NO {
            let m = acc;
            acc = self.nodes[m as usize].sibling;
            self.nodes[m as usize].sibling = NO;
            res = if res == NO { m } else { self.meld(res, m) };
        }
        *root = res;
        self.nodes[r as usize].sibling = self.free;
        self.free = r;
        self.used -= 1;
        Some(e)
    }

    /// Melds two roots (neither has a sibling): the later becomes the earlier's first child.
    fn meld(&mut self, a: u32, b: u32) -> u32 {
        let (first, second) = if self.nodes[b as usize].e.before(&self.nodes[a as usize].e) {
            (b, a)
        } else {
            (a, b)
        };
        self.nodes[second as usize].sibling = self.nodes[first as usize].child;
        self.nodes[first as usize].child = second;
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    proptest! {
        /// Several heaps in one pool pop exactly as one `BinaryHeap` each, and the pool
        /// holds exactly their entries.
        #[test]
        fn pairing_heaps_match_binary_heaps(
            ops in prop::collection::vec((0usize..4, any::<bool>(), 0u128..50), 0..600)
        ) {
            let mut pool = PairingHeaps::default();
            let mut roots = [NO; 4];
            let mut twins: Vec<BinaryHeap<Reverse<(u128, u64, u32)>>> = vec![BinaryHeap::new(); 4];
            for (seq, (h, push, rank)) in ops.into_iter().enumerate() {
                let seq = seq as u64;
                if push {
                    let v = (seq % 97) as u32;
                    pool.push(&mut roots[h], HeapEntry::new(rank << 70 | rank, seq, v));
                    twins[h].push(Reverse((rank << 70 | rank, seq, v)));
                } else {
                    let got = pool.pop(&mut roots[h]).map(|e| (e.rank(), e.seq, e.v));
                    prop_assert_eq!(got, twins[h].pop().map(|r| r.0));
                }
                let want = twins[h].peek().map(|r| r.0);
                prop_assert_eq!(pool.peek(roots[h]).map(|e| (e.rank(), e.seq, e.v)), want);
                prop_assert_eq!(pool.len(), twins.iter().map(|t| t.len()).sum::<usize>());
            }
        }
    }
}
