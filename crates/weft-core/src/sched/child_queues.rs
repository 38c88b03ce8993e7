//! The queues per child of a fast-engine node that keeps one (a `PerChild` PIFO: `wfq`,
//! `rr`, `drr`, `senic`, a `prio` node after a priority update): each child's entries
//! `(rank, seq)` in order, one token per packet below the child (Loom §4.1's PIFO tree:
//! the node's entry says "serve this child", the child's own PIFO chooses the packet).
//!
//! Layout: one pool of 32-byte tokens per node, each child's tokens a list linked through
//! it, first to last (8 bytes a child for the list's ends), and a free list. A child costs 8
//! bytes before its first packet and no buffer of its own after it (a ring buffer per child
//! cost 24 bytes, and a buffer that grew whenever its child held more packets than ever
//! before: with a `senic` node's thousands of classes, growth now and then however long the
//! run). The pool grows to the most entries the node holds at once and keeps its capacity.
//!
//! Invariants: every token is in one child's list or in the free list; a child's list is
//! sorted by `(rank, seq)` (checked by `debug_assert!` at an append). Cost: push at the
//! back, pop at the front O(1); an insert in order (a packet re-entering from the shaping
//! queue with its old rank: few, near the front) walks from the front. Hand-written (an
//! intrusive list in a slab); the twin test below compares it with a `VecDeque` per child.

use super::pool::{Linked, Pool, NIL};
use super::shared::Rank;

/// One entry: its rank as (low, high) 64-bit halves (a `u128` field would align the token
/// to 16 bytes and grow it to 48), its sequence number, the wire bytes of the packet that
/// pushed it (read by a `wfq` node's correction, `pifo::PerChild::charge`), and the next
/// token of its list.
#[derive(Debug, Clone, Copy)]
struct Token {
    rank: [u64; 2],
    seq: u64,
    bytes: u32,
    next: u32,
}

impl Linked for Token {
    fn next(&self) -> u32 {
        self.next
    }

    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

impl Token {
    #[inline(always)]
    fn rank(&self) -> Rank {
        (self.rank[1] as Rank) << 64 | self.rank[0] as Rank
    }
}

/// The queues of one node's children (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct ChildQueues {
    /// Per child: the first and last token of its list, `NIL` when empty (the last is then
    /// meaningless).
    ends: Vec<(u32, u32)>,
    pool: Pool<Token>,
}

impl ChildQueues {
    /// Empty queues for `children` children.
    pub(super) fn new(children: usize) -> ChildQueues {
        ChildQueues {
            ends: vec![(NIL, NIL); children],
            pool: Pool::default(),
        }
    }

    /// Children.
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Child `c`'s first entry.
    #[inline(always)]
    pub(super) fn front(&self, c: usize) -> Option<(Rank, u64)> {
        match self.ends[c].0 {
            NIL => None,
            i => {
                let t = &self.pool[i];
                Some((t.rank(), t.seq))
            }
        }
    }

    /// Child `c`'s last entry.
    #[inline(always)]
    pub(super) fn back(&self, c: usize) -> Option<(Rank, u64)> {
        match self.ends[c] {
            (NIL, _) => None,
            (_, last) => {
                let t = &self.pool[last];
                Some((t.rank(), t.seq))
            }
        }
    }

    /// A token of the pool holding `(rank, seq)`, `bytes` and `next`.
    #[inline(always)]
    fn take(&mut self, rank: Rank, seq: u64, bytes: u32, next: u32) -> u32 {
        self.pool.take(Token {
            rank: [rank as u64, (rank >> 64) as u64],
            seq,
            bytes,
            next,
        })
    }

    /// Appends `(rank, seq)` of a packet of `bytes` to child `c`'s list (the caller knows it
    /// goes last).
    #[inline(always)]
    pub(super) fn push_back(&mut self, c: usize, rank: Rank, seq: u64, bytes: u32) {
        debug_assert!(
            self.back(c).is_none_or(|last| last <= (rank, seq)),
            "child queue {c}: push_back of ({rank}, {seq}) after {:?}",
            self.back(c)
        );
        let i = self.take(rank, seq, bytes, NIL);
        match self.ends[c] {
            (NIL, _) => self.ends[c] = (i, i),
            (_, last) => {
                self.pool[last].next = i;
                self.ends[c].1 = i;
            }
        }
    }

    /// Inserts `(rank, seq)` of a packet of `bytes` into child `c`'s list in order; whether
    /// it went first.
    pub(super) fn insert(&mut self, c: usize, rank: Rank, seq: u64, bytes: u32) -> bool {
        let mut prev = NIL;
        let mut at = self.ends[c].0;
        while at != NIL {
            let t = &self.pool[at];
            if (rank, seq) < (t.rank(), t.seq) {
                break;
            }
            prev = at;
            at = t.next;
        }
        let i = self.take(rank, seq, bytes, at);
        if at == NIL {
            self.ends[c].1 = i;
        }
        if prev == NIL {
            self.ends[c].0 = i;
            true
        } else {
            self.pool[prev].next = i;
            false
        }
    }

    /// Takes child `c`'s first entry: `(rank, seq, bytes)`.
    #[inline(always)]
    pub(super) fn pop_front(&mut self, c: usize) -> Option<(Rank, u64, u32)> {
        let i = self.ends[c].0;
        if i == NIL {
            return None;
        }
        let t = self.pool[i];
        self.ends[c].0 = t.next;
        self.pool.give(i);
        Some((t.rank(), t.seq, t.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// The same entries in the same order as a sorted `VecDeque` per child, through
        /// appends, inserts in order (at the front, between, at the back, on ties) and pops,
        /// on ranks with and without high bits.
        #[test]
        fn child_queues_match_a_deque_per_child(ops in prop::collection::vec(
            (0u8..3, 0usize..4, 0u64..8, any::<bool>()), 1..400)) {
            let mut q = ChildQueues::new(4);
            let mut model: Vec<VecDeque<(Rank, u64, u32)>> = vec![VecDeque::new(); 4];
            for (i, &(op, c, r, high)) in ops.iter().enumerate() {
                let rank = (r as Rank) << if high { 70 } else { 3 };
                let seq = i as u64;
                let bytes = (i as u32).wrapping_mul(2_654_435_761);
                let key = |e: &(Rank, u64, u32)| (e.0, e.1);
                match op {
                    0 => {
                        // An append where it keeps the order, else an insert.
                        if model[c].back().is_none_or(|b| key(b) <= (rank, seq)) {
                            q.push_back(c, rank, seq, bytes);
                        } else {
                            let first = q.insert(c, rank, seq, bytes);
                            let at = model[c].partition_point(|e| key(e) < (rank, seq));
                            prop_assert_eq!(first, at == 0);
                        }
                        let at = model[c].partition_point(|e| key(e) < (rank, seq));
                        model[c].insert(at, (rank, seq, bytes));
                    }
                    1 => {
                        let first = q.insert(c, rank, seq, bytes);
                        let at = model[c].partition_point(|e| key(e) < (rank, seq));
                        prop_assert_eq!(first, at == 0);
                        model[c].insert(at, (rank, seq, bytes));
                    }
                    _ => prop_assert_eq!(q.pop_front(c), model[c].pop_front()),
                }
                for (k, m) in model.iter().enumerate() {
                    prop_assert_eq!(q.front(k), m.front().map(key));
                    prop_assert_eq!(q.back(k), m.back().map(key));
                }
            }
            // What is left, in order; every token back in the free list.
            for (k, m) in model.iter_mut().enumerate() {
                while let Some(e) = m.pop_front() {
                    prop_assert_eq!(q.pop_front(k), Some(e));
                }
                prop_assert_eq!(q.pop_front(k), None);
            }
            prop_assert_eq!(q.pool.free_entries(), q.pool.made());
        }
    }
}
