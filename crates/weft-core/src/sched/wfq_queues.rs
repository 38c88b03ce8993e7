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
//! again at its new rank (the one pushed by the pop is then stale).
//!
//! **One size, no corrections.** While every entry queued was pushed by a packet of the
//! same wire size, every packet that leaves costs what its entry was charged (each packet
//! below the node holds one entry at it), so no correction can arise: a pop is not charged
//! ([`Popped::Tracked`]), and a node of many children whose heads pile up (Loom Fig. 1's
//! 64 tenants) moves all its entries to one calendar of rank buckets ([`BucketQueue`]:
//! O(1) a push or pop; the switch is [`CalendarUse`](super::pifo::CalendarUse)'s, as for
//! the other nodes of many children), which a correction could not move child by child.
//! The first push of another size while entries are queued moves them back to the queues
//! (each charged the one size) and the node charges every pop until it empties. Both forms
//! pop in the same order: a child's queue is sorted, so the least head is the least entry.
//!
//! Invariants: `len` counts the entries; `size` is `EMPTY` exactly when none is queued
//! (outside a pop and its charge), else the one wire size of them all or `MIXED`; on the
//! calendar, the queues and heads are empty, `size` is not `MIXED` and every correction is
//! 0; off it, every child with entries has exactly one live head in the heap (its first
//! entry at its corrected rank; between a pop and its charge, at the rank the pop gave it);
//! stale heads (a re-entered packet's entry that went first, a head ranked again by a
//! charge) are dropped when they surface, within about one packet's virtual time. Cost: a
//! push to a backlogged child O(1) (an append, or a walk for a re-entry with an old rank; on
//! the calendar a bucket push); a pop O(log heads), or O(1) on the calendar; a charge
//! nothing more when the sizes agree, else two divisions and a heap push. Hand-written: no
//! crate offers it.

use super::algo::wfq::{corrected, cost as wfq_cost};
use super::buckets::BucketQueue;
use super::child_queues::ChildQueues;
use super::fast::NO;
use super::heap::{HeapEntry, MinHeap};
use super::pifo::{Popped, Switch};
use super::shared::Rank;

/// [`WfqQueues::size`] of a node with no entries.
const EMPTY: u32 = u32::MAX;
/// [`WfqQueues::size`] of a node whose entries were pushed by packets of different sizes
/// (or of a size too large to tell from the markers).
const MIXED: u32 = u32::MAX - 1;

/// A `wfq` node's queue (see the module doc).
#[derive(Debug, Clone)]
pub(super) struct WfqQueues {
    /// Node id of the first child (children are contiguous).
    first: u32,
    /// Each child's entries under stored ranks, sorted by (stored rank, seq); empty on the
    /// calendar.
    queues: ChildQueues,
    /// Each child's correction, virtual bytes with `FRAC` fractional bits.
    off: Vec<i128>,
    /// The child the last charged pop took (its index; `NO` once charged), the bytes its
    /// entry was charged, and whether the pop took its last entry.
    pending: (u32, u32, bool),
    /// The children's heads (possibly stale: see [`WfqQueues::pop`]); empty on the
    /// calendar.
    heads: MinHeap,
    /// Every entry, while `on_calendar` (else empty, keeping its buffers: switching back and
    /// forth allocates nothing once both forms have grown).
    calendar: BucketQueue,
    /// Whether the entries are in `calendar`.
    on_calendar: bool,
    /// The wire bytes of every queued entry, `EMPTY` or `MIXED` (see the module doc).
    size: u32,
    /// Entries queued.
    len: u32,
    /// When the entries move to the calendar and back.
    switch: Switch,
}

impl WfqQueues {
    /// Empty queues for children `first..first + children`, moving to a calendar as
    /// `switch` says.
    pub(super) fn new(first: u32, children: usize, switch: Switch) -> WfqQueues {
        WfqQueues {
            first,
            queues: ChildQueues::new(children),
            off: vec![0; children],
            pending: (NO, 0, false),
            heads: MinHeap::default(),
            calendar: BucketQueue::new(children),
            on_calendar: false,
            size: EMPTY,
            len: 0,
            switch,
        }
    }

    /// Whether the entries are in one calendar (tests).
    #[cfg(test)]
    pub(super) fn on_calendar(&self) -> bool {
        self.on_calendar
    }

    /// Child `v`'s correction.
    #[inline(always)]
    pub(super) fn offset(&self, v: u32) -> i128 {
        self.off[(v - self.first) as usize]
    }

    /// Child `v`'s entry of stored rank `rank` and sequence number `seq`, pushed by a packet
    /// of `bytes` wire bytes (a new packet's, or a re-entered one's with its old stored
    /// rank).
    #[inline(always)]
    pub(super) fn push(&mut self, rank: Rank, seq: u64, v: u32, bytes: u32) {
        debug_assert!(
            self.pending.0 == NO,
            "wfq node: a push before the charge of child {}",
            self.pending.0
        );
        if bytes != self.size && self.size != MIXED {
            self.resize(bytes);
        }
        self.len += 1;
        if self.on_calendar {
            return self.calendar_push(rank, seq, v);
        }
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
            if self.size != MIXED && self.heads.len() >= self.switch.heads as usize {
                self.heap_to_calendar();
            }
        }
    }

    /// A push of `bytes` wire bytes where the queued entries are of one other size (or none
    /// is queued): the node's one size, or `MIXED` (off the calendar).
    #[cold]
    #[inline(never)]
    fn resize(&mut self, bytes: u32) {
        if self.len == 0 {
            debug_assert_eq!(self.size, EMPTY, "wfq node: no entries but a size");
            self.size = bytes.min(MIXED);
            return;
        }
        if self.on_calendar {
            self.calendar_to_heap(self.size);
        }
        self.size = MIXED;
    }

    /// [`Self::push`] on the calendar; out of line, as the other calendars' (inlined into
    /// the engine's dispatch, their code costs every other node's pushes).
    #[inline(never)]
    fn calendar_push(&mut self, rank: Rank, seq: u64, v: u32) {
        self.calendar.push(HeapEntry::new(rank, seq, v));
    }

    /// Takes the first entry: its child and its rank (corrected). Off the calendar, the
    /// child's next entry becomes its head at once, ranked as if the packet that leaves cost
    /// what the entry was charged; if the node's entries are of mixed sizes the pop is
    /// [`Popped::Charged`], and [`Self::charge`] ranks that head again if the packet cost
    /// otherwise.
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<Popped> {
        if self.on_calendar {
            return self.calendar_pop();
        }
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
            match next {
                Some((r, s)) => {
                    let next = HeapEntry::new(corrected(r, self.off[c]), s, top.v);
                    self.heads.replace_top(next);
                }
                None => {
                    self.heads.pop();
                }
            }
            self.len -= 1;
            if self.size != MIXED {
                // One size: the packet that leaves costs what the entry was charged.
                debug_assert_eq!(self.off[c], 0, "wfq node of one size: child {c} corrected");
                if self.len == 0 {
                    self.size = EMPTY;
                }
                return Some(Popped::Tracked(top.rank(), top.v));
            }
            self.pending = (c as u32, bytes, next.is_none());
            return Some(Popped::Charged(top.rank(), top.v));
        }
    }

    /// [`Self::pop`] on the calendar (out of line: see [`Self::calendar_push`]); moves the
    /// entries back to the queues when they fall below [`Switch::back`].
    #[inline(never)]
    fn calendar_pop(&mut self) -> Option<Popped> {
        let e = self.calendar.pop()?;
        self.len -= 1;
        if self.calendar.len() < self.switch.back as usize {
            self.calendar_to_heap(self.size);
        }
        if self.len == 0 {
            self.size = EMPTY;
        }
        Some(Popped::Tracked(e.rank(), e.v))
    }

    /// After a charged pop: the packet that left the popped child's subtree has `sent` wire
    /// bytes, and the child's weight is `weight`. Moves the child's later entries by
    /// `cost(sent) - cost(charged)` (its head pushed again at its new rank; the old one is
    /// stale). When the child has no entry left, returns its correction (reset here) for the
    /// caller to fold into the child's last finish tag, as the reference does.
    #[inline(always)]
    pub(super) fn charge(&mut self, sent: u32, weight: u64) -> Option<i128> {
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
        if !emptied {
            return None;
        }
        if self.len == 0 {
            // Every child emptied, each correction taken as it did: one size again.
            self.size = EMPTY;
        }
        Some(std::mem::take(&mut self.off[c]))
    }

    /// The heads reached [`Switch::heads`] with entries of one size (every correction 0):
    /// every entry moves to the calendar.
    #[cold]
    #[inline(never)]
    fn heap_to_calendar(&mut self) {
        let (first, q) = (self.first, &mut self.queues);
        self.calendar.refill(|all| {
            for c in 0..q.len() {
                while let Some((rank, seq, _)) = q.pop_front(c) {
                    all.push(HeapEntry::new(rank, seq, first + c as u32));
                }
            }
        });
        self.heads.clear();
        self.on_calendar = true;
    }

    /// The calendar's entries, taken in order, queue up behind their children (each charged
    /// `bytes`, the node's one size; so each queue is sorted), and each child's first is its
    /// head.
    #[cold]
    #[inline(never)]
    fn calendar_to_heap(&mut self, bytes: u32) {
        debug_assert!(
            self.off.iter().all(|&o| o == 0),
            "wfq node on its calendar with a correction"
        );
        while let Some(e) = self.calendar.pop() {
            let c = (e.v - self.first) as usize;
            if self.queues.front(c).is_none() {
                self.heads.push(e);
            }
            self.queues.push_back(c, e.rank(), e.seq, bytes);
        }
        self.on_calendar = false;
    }
}
