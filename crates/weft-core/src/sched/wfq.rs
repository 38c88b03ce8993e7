//! The queue of a fast-engine `wfq` node: start-time fair queuing charged on the bytes each
//! child *sends* (the reference's `ChildEntries`; the semantics are in the parent module's
//! doc and docs/scheduling.md, "What a `wfq` share counts").
//!
//! An entry is a token for its child (Loom §4.1: "serve this child"); the packet that leaves
//! when it is popped is whichever one the child's own PIFO picks, which need not be the
//! packet that pushed it. So each child keeps its entries in order (a FIFO in a
//! [`ChildQueues`] pool, each token with the wire bytes it was charged) under *stored*
//! ranks, and a correction `off`: an entry's rank is its stored rank plus its child's
//! correction. A pop takes the child whose first entry ranks least and puts the child's next
//! entry in its place among the heads, ranked as if the packet leaving cost what the entry
//! was charged (in place: one sift on the heap). Once the packet that left the child is
//! known, [`WfqQueues::charge`] adds what it cost less what the entry was charged to the
//! child's correction, which moves every later entry of the child at once (their order
//! among themselves is unchanged), and, when that changed anything, pushes the child's head
//! again at its new rank (the one pushed by the pop is then stale). Packets of one size
//! cost no more than a queue without corrections.
//!
//! The children's heads are in a heap. (A calendar of rank buckets, which other nodes of
//! many children use, holds every entry and so cannot move a child's entries together; a
//! calendar of heads alone measured no fewer instructions than the heap at Loom Fig. 1's
//! `wfq` node of 64 tenants.)
//!
//! Invariants: every child with entries has exactly one live head in the heap (its first
//! entry at its corrected rank; between a pop and its charge, at the rank the pop gave it);
//! stale heads (a re-entered packet's entry that went first, a head ranked again by a
//! charge) are dropped when they surface, within about one packet's virtual time. Cost: a
//! push to a backlogged child O(1) (an append, or a walk for a re-entry with an old rank);
//! a pop O(log heads); a charge nothing more when the sizes agree, else two divisions and a
//! heap push. Hand-written: no crate offers it.

use super::child_queues::ChildQueues;
use super::fast::NO;
use super::heap::{HeapEntry, MinHeap};
use super::pifo::Popped;
use super::reference::{corrected, wfq_cost, Rank};

/// A `wfq` node's queue (see the module doc).
#[derive(Debug, Clone)]
pub(super) struct WfqQueues {
    /// Node id of the first child (children are contiguous).
    first: u32,
    /// Each child's entries under stored ranks, sorted by (stored rank, seq).
    queues: ChildQueues,
    /// Each child's correction, virtual bytes with `FRAC` fractional bits.
    off: Vec<i128>,
    /// The child the last pop took (its index; `NO` once charged), the bytes its entry was
    /// charged, and whether the pop took its last entry.
    pending: (u32, u32, bool),
    /// The children's heads (possibly stale: see [`WfqQueues::pop`]).
    heads: MinHeap,
}

impl WfqQueues {
    /// Empty queues for children `first..first + children`.
    pub fn new(first: u32, children: usize) -> WfqQueues {
        WfqQueues {
            first,
            queues: ChildQueues::new(children),
            off: vec![0; children],
            pending: (NO, 0, false),
            heads: MinHeap::default(),
        }
    }

    /// Child `v`'s correction.
    #[inline(always)]
    pub fn offset(&self, v: u32) -> i128 {
        self.off[(v - self.first) as usize]
    }

    /// Child `v`'s entry of stored rank `rank` and sequence number `seq`, pushed by a packet
    /// of `bytes` wire bytes (a new packet's, or a re-entered one's with its old stored
    /// rank).
    #[inline(always)]
    pub fn push(&mut self, rank: Rank, seq: u64, v: u32, bytes: u32) {
        debug_assert!(
            self.pending.0 == NO,
            "wfq node: a push before the charge of child {}",
            self.pending.0
        );
        let c = (v - self.first) as usize;
        let q = &mut self.queues;
        let first = match q.back(c) {
            None => {
                q.push_back(c, rank, seq, bytes);
                true
            }
            // `seq` is after every queued one: `(rank, seq) > last` is `rank >= last.0`.
            Some(last) if rank >= last.0 => {
                q.push_back(c, rank, seq, bytes);
                false
            }
            Some(_) => q.insert(c, rank, seq, bytes),
        };
        if first {
            self.heads
                .push(HeapEntry::new(corrected(rank, self.off[c]), seq, v));
        }
    }

    /// Takes the first entry: its child and its rank (corrected). The child's next entry
    /// becomes its head at once, ranked as if the packet that leaves cost what the entry was
    /// charged; [`Self::charge`] ranks it again if not.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<Popped> {
        loop {
            let top = *self.heads.peek()?;
            let c = (top.v - self.first) as usize;
            let live = self
                .queues
                .front(c)
                .is_some_and(|(r, s)| s == top.seq && corrected(r, self.off[c]) == top.rank());
            if !live {
                self.heads.pop();
                continue;
            }
            let (_, _, bytes) = self.queues.pop_front(c).expect("a live head");
            let next = self.queues.front(c);
            self.pending = (c as u32, bytes, next.is_none());
            match next {
                Some((r, s)) => {
                    let next = HeapEntry::new(corrected(r, self.off[c]), s, top.v);
                    self.heads.replace_top(next);
                }
                None => {
                    self.heads.pop();
                }
            }
            return Some(Popped::Charged(top.rank(), top.v));
        }
    }

    /// After a pop: the packet that left the popped child's subtree has `sent` wire bytes,
    /// and the child's weight is `weight`. Moves the child's later entries by
    /// `cost(sent) - cost(charged)` (its head pushed again at its new rank; the old one is
    /// stale). When the child has no entry left, returns its correction (reset here) for the
    /// caller to fold into the child's last finish tag, as the reference does.
    #[inline(always)]
    pub fn charge(&mut self, sent: u32, weight: u64) -> Option<i128> {
        let (c, charged, emptied) = self.pending;
        debug_assert!(c != NO, "wfq node: a charge without a pop");
        self.pending.0 = NO;
        let c = c as usize;
        if sent != charged {
            self.off[c] += wfq_cost(sent, weight) as i128 - wfq_cost(charged, weight) as i128;
            if !emptied {
                let (r, s) = self.queues.front(c).expect("not emptied");
                let v = self.first + c as u32;
                self.heads
                    .push(HeapEntry::new(corrected(r, self.off[c]), s, v));
            }
        }
        emptied.then(|| std::mem::take(&mut self.off[c]))
    }
}
