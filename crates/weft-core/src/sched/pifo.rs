//! The PIFOs of the fast engine's nodes (see [`super::fast`]): the forms a node's queue of
//! entries takes, chosen per node when the engine is built and, for a wide node, switched
//! while it runs. Each pops in the order of the reference engine's PIFO, a map sorted by
//! `(rank, seq)` (`super::reference`); `tests/engine_twins.rs` checks it on random
//! policies, and the heap and calendar have twins of their own (`heap.rs`, `buckets.rs`).
//!
//! * [`Ffs`]: a `prio` node of up to 64 children of distinct priorities: a count per child
//!   and a find-first-set bitmap. O(1) a push or pop.
//! * [`PerChild`]: a FIFO per child (in one pool per node, [`ChildQueues`]) and a heap of the
//!   children's heads ([`MinHeap`]). O(log₄ children) a push that backlogs a child or a pop.
//! * [`WfqQueues`]: a `wfq` node's: a FIFO per child with a correction per child, and a heap
//!   of heads (`super::wfq_queues`).
//! * [`Wide`]: a node of 32 children or more (by default) that moves all its entries to one calendar of
//!   rank buckets ([`BucketQueue`], O(1)) while its heads pile up, and back when they thin
//!   out ([`CalendarUse`]); both forms pop in the same order.
//! * [`SlotList`]: a FIFO leaf's packets in a list linked through their slots (24 bytes and
//!   no buffer per leaf). O(1) at the tail; a re-entry with an old rank walks from the head.
//! * `Heap`/`LeafHeap` ([`MinHeap`]) for `lstf`, `edf` and fair leaves; `Sorted` ([`Ring`])
//!   for `fifo` nodes.
//!
//! Invariants: a [`PerChild`]'s every non-empty child queue has a live head in the heap
//! (stale heads are dropped at the top); a child's queue and a [`SlotList`] are sorted by
//! `(rank, seq)`; a switched [`Wide`] holds its entries in one form only, the other empty.
//! Hand-written: no crate offers a PIFO of these forms.

// Written for readers of the source, so it links to private items.
#![allow(rustdoc::private_intra_doc_links)]

use super::buckets::BucketQueue;
use super::child_queues::ChildQueues;
use super::fast::NO;
use super::heap::{HeapEntry, MinHeap};
use super::ring::Ring;
use super::shared::Rank;
use super::wfq_queues::WfqQueues;

/// A PIFO entry: rank, global sequence number (tie break), payload (child node or slot).
pub(super) type Entry = (Rank, u64, u32);

/// A node's PIFO. `repr(u8)`: an explicit tag byte, so dispatch is one load and a jump
/// (the default layout may hide the tag in a niche of a field, costing a few more
/// instructions per level at every push and pop).
#[derive(Debug, Clone)]
#[repr(u8)]
pub(super) enum Pifo {
    /// Every entry in one heap (`lstf`, `edf`: ranks not ordered by arrival).
    Heap(MinHeap),
    /// One queue sorted by (rank, seq) (`fifo` nodes: ranks only go back in time on a
    /// re-entry).
    Sorted(Ring<Entry>),
    /// [`Pifo::Heap`] at a leaf whose flows are served fairly (entries are slots).
    LeafHeap(MinHeap),
    /// A leaf whose flows are served first-come first-served: its packets in order, linked
    /// through their slots ([`SlotList`]: no buffer of its own).
    LeafSorted(SlotList),
    /// A queue per child, sorted by (rank, seq), and a heap over the queues' heads (a node of
    /// too few children for a calendar).
    PerChild(Box<PerChild>),
    /// The same, at a node that moves its entries to a calendar when its heads pile up
    /// ([`Wide::per_child`] in use, [`Wide::entries`] empty).
    WideHeap(Box<Wide>),
    /// That node's entries in one calendar ([`Wide::entries`] in use, the queues empty).
    /// A switch moves the box from one variant to the other: no allocation.
    Calendar(Box<Wide>),
    /// A count per child and a find-first-set bitmap (see [`Ffs`]), kept in the enum (no
    /// box: one dependent load less per level).
    Ffs(Ffs),
    /// A `wfq` node's queues, charged on the bytes each child sends ([`WfqQueues`]).
    Wfq(Box<WfqQueues>),
}

/// A FIFO leaf's packets in `(rank, seq)` order: a list linked through
/// [`FastEngine::links`](super::fast::FastEngine::links) (per slot, the next slot of its leaf), so the leaf keeps 24 bytes
/// and no buffer, and a pop reads a small per-slot array instead of a queue's buffer (with a
/// `senic` node's 10k leaves that buffer was a cache miss at every pop: 28 % of the
/// dequeue's time). A packet's rank at its leaf is `FastEngine::ranks[slot * stride]`.
/// Every push takes the largest sequence number yet, so a push goes after every entry of
/// rank at most its own: at the tail (arrival order), unless its rank is below the tail's
/// (a re-entry from the shaping queue with its old rank: few, and near the front), which
/// walks from the head.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlotList {
    /// The first slot, or `NO` (empty).
    head: u32,
    /// The last slot; meaningless when empty.
    tail: u32,
    /// The tail's rank as (low, high) 64-bit halves: a `u128` field would align [`Pifo`] to
    /// 16 bytes and grow it from 32 to 48.
    tail_rank: [u64; 2],
}

impl SlotList {
    pub(super) const EMPTY: SlotList = SlotList {
        head: NO,
        tail: NO,
        tail_rank: [0; 2],
    };

    #[inline(always)]
    fn tail_rank(&self) -> Rank {
        (self.tail_rank[1] as Rank) << 64 | self.tail_rank[0] as Rank
    }

    /// Appends `slot` of leaf rank `rank` (in `ranks[slot * stride]` too), or inserts it
    /// after the last entry of rank at most `rank`.
    #[inline(always)]
    pub(super) fn push(
        &mut self,
        rank: Rank,
        slot: u32,
        links: &mut [u32],
        ranks: &[Rank],
        stride: usize,
    ) {
        debug_assert_eq!(
            ranks[slot as usize * stride],
            rank,
            "slot {slot}: leaf rank"
        );
        if self.head != NO && rank < self.tail_rank() {
            self.insert(rank, slot, links, ranks, stride);
            return;
        }
        links[slot as usize] = NO;
        if self.head == NO {
            self.head = slot;
        } else {
            links[self.tail as usize] = slot;
        }
        self.tail = slot;
        self.tail_rank = [rank as u64, (rank >> 64) as u64];
    }

    /// [`Self::push`] before the tail: a walk from the head.
    #[cold]
    #[inline(never)]
    fn insert(&mut self, rank: Rank, slot: u32, links: &mut [u32], ranks: &[Rank], stride: usize) {
        let rank_of = |s: u32| ranks[s as usize * stride];
        if rank < rank_of(self.head) {
            links[slot as usize] = self.head;
            self.head = slot;
            return;
        }
        // `rank` is below the tail's: the walk stops before it.
        let mut prev = self.head;
        loop {
            let next = links[prev as usize];
            debug_assert!(next != NO, "a walk past the tail of a leaf's list");
            if rank < rank_of(next) {
                links[slot as usize] = next;
                links[prev as usize] = slot;
                return;
            }
            prev = next;
        }
    }

    /// Takes the first slot.
    #[inline(always)]
    pub(super) fn pop(&mut self, links: &[u32]) -> Option<u32> {
        if self.head == NO {
            return None;
        }
        let s = self.head;
        self.head = links[s as usize];
        Some(s)
    }
}

/// A `prio` node with at most 64 children of distinct priorities, none changed by a live
/// update yet. Every entry a child pushes then has that child's priority as its rank, so a
/// child's entries are interchangeable tokens and the sequence numbers never decide (no two
/// children tie): a count per child and a bitmap in priority order give the same answers as
/// [`PerChild`] in a few instructions. A priority update turns it into a [`PerChild`]
/// (old entries keep their old rank, ordered before any later entry of equal rank).
/// A child's position in priority order is kept in its own node record
/// (`fast`'s `NodeRt::ffs_pos`), which a push has at hand.
#[derive(Debug, Clone)]
pub(super) struct Ffs {
    /// Per position: the child, its priority and its entries (one record: one bounds check).
    pub(super) at: Box<[FfsChild]>,
    /// Bit `p` set when the child at position `p` has entries.
    bits: u64,
}

/// [`Ffs::at`]: 16 bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct FfsChild {
    /// The child's priority (its entries' rank).
    prio: u64,
    /// Its node id.
    pub(super) child: u32,
    /// Its entries.
    count: u32,
}

impl Ffs {
    /// One more entry of the child at position `p` (its `NodeRt::ffs_pos` in `fast`; the
    /// entry's rank is the child's priority).
    #[inline(always)]
    pub(super) fn push(&mut self, p: u8) {
        self.at[p as usize].count += 1;
        self.bits |= 1 << p;
    }

    /// For a node whose children `first..first + prios.len()` have priorities `prios`, if
    /// they qualify (at most 64 children, no two equal).
    pub(super) fn new(first: u32, prios: &[u64]) -> Option<Ffs> {
        if prios.len() > 64 {
            return None;
        }
        let mut order: Vec<usize> = (0..prios.len()).collect();
        order.sort_by_key(|&i| prios[i]);
        if order.windows(2).any(|w| prios[w[0]] == prios[w[1]]) {
            return None;
        }
        Some(Ffs {
            at: order
                .iter()
                .map(|&i| FfsChild {
                    prio: prios[i],
                    child: first + i as u32,
                    count: 0,
                })
                .collect(),
            bits: 0,
        })
    }

    /// The same entries as a [`PerChild`] that switches as `switch` says: each child's tokens
    /// with sequence number 0, before any entry pushed later.
    pub(super) fn to_per_child(&self, first: u32, switch: Switch) -> PerChild {
        let mut pc = PerChild::new(first, self.at.len(), switch);
        for c in self.at.iter() {
            if c.count > 0 {
                let v = c.child;
                for _ in 0..c.count {
                    pc.queues
                        .push_back((v - first) as usize, c.prio as Rank, 0, 0);
                }
                pc.heads.push(HeapEntry::new(c.prio as Rank, 0, v));
            }
        }
        pc
    }
}

/// A queue per child, sorted by (rank, seq), and a heap of the children's heads.
#[derive(Debug, Clone)]
pub(super) struct PerChild {
    /// Node id of the first child (children are contiguous).
    first: u32,
    /// Each child's entries, sorted by (rank, seq).
    queues: ChildQueues,
    /// Heads, possibly stale: an item is live when it equals its queue's front (see
    /// [`PerChild::live`]). Every non-empty queue's front has a live item.
    heads: MinHeap,
    /// When the node's entries move to a calendar ([`Wide`]) and back.
    switch: Switch,
}

/// [`CalendarUse`] for one node.
#[derive(Debug, Clone, Copy)]
pub(super) struct Switch {
    /// Heads at which a [`PerChild`] moves its entries to a calendar (`u32::MAX`: never, a
    /// node of too few children).
    pub(super) heads: u32,
    /// Entries below which a calendar moves them back.
    pub(super) back: u32,
}

/// A node of many children in either form: its entries in a [`PerChild`] queue per child
/// and a heap of their heads ([`Pifo::WideHeap`]), or all in one calendar of rank buckets
/// ([`BucketQueue`], [`Pifo::Calendar`]): the same order (a child's queue is sorted, so the
/// least head is the least entry); the calendar costs O(1) a push or pop however many
/// entries it holds, and touches no child's queue. The form not in use is empty and keeps
/// its buffers, so switching back and forth allocates nothing once both have grown
/// (`tests/steady_alloc.rs`).
#[derive(Debug, Clone)]
pub(super) struct Wide {
    /// Every entry, in the calendar form: a child's token per packet below it.
    pub(super) entries: BucketQueue,
    /// The queues and heap of heads, in the other form.
    per_child: PerChild,
}

impl Wide {
    /// [`Pifo::push`]; out of line: the calendar's code inlined into the engine's dispatch
    /// costs every other node's pushes (about 20 instructions a packet at Loom Fig. 1).
    #[inline(never)]
    fn push(&mut self, rank: Rank, seq: u64, v: u32) {
        self.entries.push(HeapEntry::new(rank, seq, v));
    }

    /// [`Pifo::pop`], out of line (see [`Self::push`]); and whether the entries have fallen
    /// below [`Switch::back`].
    #[inline(never)]
    fn pop(&mut self) -> (Option<Popped>, bool) {
        let e = self.entries.pop();
        let few = self.entries.len() < self.per_child.switch.back as usize;
        (e.map(|e| Popped::Tracked(e.rank(), e.v)), few)
    }
}

/// When a node that keeps a queue per child and a heap of their heads (`wfq`, `rr`, `drr`,
/// `senic`, `prio`) moves all its entries to one calendar of rank buckets instead
/// ([`Wide`]). Both forms pop in the same order; the calendar costs less when the
/// node holds a few dozen heads or more (Loom Fig. 1's `wfq` node of 64 tenants, a `senic`
/// node's backlogged classes) and more when it holds a few, or few and far apart (a node
/// whose packets wait in the shaping queue), so a node switches as its heads come and go. See [`FastEngine::with_calendar`](super::fast::FastEngine::with_calendar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalendarUse {
    /// Nodes of at least this many children may switch.
    pub min_children: usize,
    /// A node whose heap holds at least this many heads moves its entries to a calendar.
    pub min_heads: usize,
    /// A calendar of fewer entries than this moves them back to a queue per child and a heap.
    pub back_below: usize,
}

/// [`PerChild::switch`] for a node of `children` children.
pub(super) fn switch_for(children: usize, calendar: CalendarUse) -> Switch {
    let clamp = |n: usize| n.min(u32::MAX as usize - 1) as u32;
    Switch {
        heads: if children >= calendar.min_children {
            clamp(calendar.min_heads)
        } else {
            u32::MAX
        },
        back: clamp(calendar.back_below),
    }
}

impl Default for CalendarUse {
    /// 32 children and 32 heads (a 4-ary heap of 32 entries is three levels deep); back
    /// below 8 entries. Measured (docs/perf/2026-11-24-calendar-queues.md, "Calendars from 32
    /// heads"): a flat
    /// `wfq` node's packets take as long either way at 16 children, 15 % longer on a
    /// calendar at 4, and 5–11 % less at 48 to 256; Loom Fig. 1 at 64k flows 11–15 % less
    /// (while its `wfq` node of tenants could use a calendar: a `wfq` node now keeps a heap
    /// of heads, [`WfqQueues`]).
    /// Until 2026-11-24 the default was 256, 256 and 64, chosen on instruction counts alone.
    fn default() -> CalendarUse {
        CalendarUse {
            min_children: 32,
            min_heads: 32,
            back_below: 8,
        }
    }
}

impl PerChild {
    fn new(first: u32, children: usize, switch: Switch) -> PerChild {
        PerChild {
            first,
            queues: ChildQueues::new(children),
            heads: MinHeap::default(),
            switch,
        }
    }

    /// Whether heap item `e` is its child's current head. Sequence numbers are unique per
    /// entry (tokens converted from an [`Ffs`] share 0, and their equal ranks), so an item
    /// left by an emptied or reordered queue never matches again.
    #[inline(always)]
    fn live(&self, e: &HeapEntry) -> bool {
        self.queues.front((e.v - self.first) as usize) == Some((e.rank(), e.seq))
    }

    /// Whether the heads have grown to [`Switch::heads`] (asked after a push to the heap).
    #[inline(always)]
    fn heads_reached_switch(&self) -> bool {
        self.heads.len() >= self.switch.heads as usize
    }

    /// [`Pifo::push`] of child `v`'s entry `(rank, seq)`; whether the heads have grown to
    /// [`Switch::heads`].
    #[inline(always)]
    fn push(&mut self, rank: Rank, seq: u64, v: u32) -> bool {
        let c = (v - self.first) as usize;
        let q = &mut self.queues;
        match q.back(c) {
            None => {
                q.push_back(c, rank, seq, 0);
                // A stale top (the head of a child that emptied, left by `pop`) is
                // replaced in place: one sift instead of a pop and a push.
                let e = HeapEntry::new(rank, seq, v);
                match self.heads.peek().copied() {
                    Some(top) if !self.live(&top) => self.heads.replace_top(e),
                    _ => {
                        self.heads.push(e);
                        return self.heads_reached_switch();
                    }
                }
            }
            // `seq` is after every queued one (see `Sorted`): `(rank, seq) > last`
            // comes down to `rank >= last.0`.
            Some(last) if rank >= last.0 => {
                debug_assert!(seq > last.1, "per-child push: seq {seq} not after {last:?}");
                q.push_back(c, rank, seq, 0)
            }
            Some(_) => {
                // A re-entered packet (old rank): insert in order.
                if q.insert(c, rank, seq, 0) {
                    self.heads.push(HeapEntry::new(rank, seq, v));
                    return self.heads_reached_switch();
                }
            }
        }
        false
    }

    /// [`Pifo::pop`].
    #[inline(always)]
    fn pop(&mut self) -> Option<Popped> {
        loop {
            let top = self.heads.peek().copied()?;
            if !self.live(&top) {
                self.heads.pop(); // stale head
                continue;
            }
            let (rank, v) = (top.rank(), top.v);
            let c = (v - self.first) as usize;
            self.queues.pop_front(c);
            // The child's next entry replaces its head in place: one sift-down. If the
            // child is empty, its head stays as a stale top: the next push to an empty
            // child replaces it (most do, on a backlogged node), else the next pop
            // drops it.
            if let Some((r2, s2)) = self.queues.front(c) {
                self.heads.replace_top(HeapEntry::new(r2, s2, v));
            }
            return Some(Popped::Tracked(rank, v));
        }
    }
}

impl Pifo {
    /// A queue per child and a heap of their heads for children `first..first + n`: a
    /// [`Pifo::WideHeap`] when `calendar` lets the node switch to a calendar, else a
    /// [`Pifo::PerChild`].
    pub(super) fn per_child(first: u32, n: usize, calendar: CalendarUse) -> Pifo {
        Self::of_per_child(PerChild::new(first, n, switch_for(n, calendar)))
    }

    /// `pc` as a [`Pifo::WideHeap`] if its [`Switch`] ever moves it to a calendar, else as a
    /// [`Pifo::PerChild`].
    pub(super) fn of_per_child(pc: PerChild) -> Pifo {
        if pc.switch.heads == u32::MAX {
            Pifo::PerChild(Box::new(pc))
        } else {
            Pifo::WideHeap(Box::new(Wide {
                entries: BucketQueue::new(pc.queues.len()),
                per_child: pc,
            }))
        }
    }

    /// A [`Pifo::WideHeap`] whose heads reached [`Switch::heads`] becomes a [`Pifo::Calendar`]
    /// of the same entries.
    #[cold]
    #[inline(never)]
    fn heap_to_calendar(&mut self) {
        let Pifo::WideHeap(mut w) = std::mem::replace(self, Pifo::Sorted(Ring::new())) else {
            unreachable!("heap_to_calendar: not a wide node's heap of heads")
        };
        let Wide { entries, per_child } = &mut *w;
        entries.refill(|all| {
            let (first, q) = (per_child.first, &mut per_child.queues);
            for c in 0..q.len() {
                while let Some((rank, seq, _)) = q.pop_front(c) {
                    all.push(HeapEntry::new(rank, seq, first + c as u32));
                }
            }
        });
        per_child.heads.clear();
        *self = Pifo::Calendar(w);
    }

    /// A [`Pifo::Calendar`] whose entries fell below [`Switch::back`] becomes a
    /// [`Pifo::WideHeap`] again: its entries, taken in order, queue up behind their children
    /// (so each queue is sorted), and each child's first is its head.
    #[cold]
    #[inline(never)]
    fn calendar_to_heap(&mut self) {
        let Pifo::Calendar(mut w) = std::mem::replace(self, Pifo::Sorted(Ring::new())) else {
            unreachable!("calendar_to_heap: not a calendar")
        };
        let Wide {
            entries,
            per_child: pc,
        } = &mut *w;
        #[cfg(test)]
        tests::MOVED_BACK.with(|m| m.set(m.get().max(entries.len())));
        while let Some(e) = entries.pop() {
            let c = (e.v - pc.first) as usize;
            if pc.queues.front(c).is_none() {
                pc.heads.push(e);
            }
            pc.queues.push_back(c, e.rank(), e.seq, 0);
        }
        *self = Pifo::WideHeap(w);
    }

    /// A leaf's entry `(rank, seq)` for packet `slot`, whose leaf rank is also
    /// `ranks[slot * stride]` (`links`, `ranks`, `stride`: see [`SlotList`]).
    #[inline(always)]
    pub(super) fn push_slot(
        &mut self,
        rank: Rank,
        seq: u64,
        slot: u32,
        links: &mut [u32],
        ranks: &[Rank],
        stride: usize,
    ) {
        match self {
            Pifo::LeafSorted(l) => l.push(rank, slot, links, ranks, stride),
            Pifo::LeafHeap(h) => h.push(HeapEntry::new(rank, seq, slot)),
            _ => unreachable!("push_slot on a node that is not a leaf"),
        }
    }

    /// A `wfq` node's queue for children `first..first + n` ([`WfqQueues`]), moving to a
    /// calendar as `calendar` says.
    pub(super) fn wfq(first: u32, n: usize, calendar: CalendarUse) -> Pifo {
        Pifo::Wfq(Box::new(WfqQueues::new(first, n, switch_for(n, calendar))))
    }

    /// A `wfq` node's correction for child `v` ([`WfqQueues::offset`]).
    #[inline(always)]
    pub(super) fn offset(&self, v: u32) -> i128 {
        match self {
            Pifo::Wfq(w) => w.offset(v),
            _ => unreachable!("offset: not a wfq node's queue"),
        }
    }

    /// [`WfqQueues::charge`].
    #[inline(always)]
    pub(super) fn charge(&mut self, sent: u32, weight: u64) -> Option<i128> {
        match self {
            Pifo::Wfq(w) => w.charge(sent, weight),
            _ => unreachable!("charge: not a wfq node's queue"),
        }
    }

    /// Pushes entry `(rank, seq)` of child or slot `v` for a packet of `bytes` wire bytes
    /// (read by a `wfq` node only); `ffs_pos` is the child's `NodeRt::ffs_pos` in `fast`
    /// (read by an [`Ffs`] node only).
    #[inline(always)]
    pub(super) fn push(&mut self, rank: Rank, seq: u64, v: u32, ffs_pos: u8, bytes: u32) {
        match self {
            Pifo::Heap(h) | Pifo::LeafHeap(h) => h.push(HeapEntry::new(rank, seq, v)),
            // `seq` is the largest sequence number yet (every push takes a new one), so
            // `(rank, seq) < (r, s)` comes down to `rank < r`.
            Pifo::Sorted(q) => match q.back() {
                Some(&(r, s, _)) if rank < r => {
                    debug_assert!(seq > s, "sorted push: seq {seq} not after {s}");
                    let at = q.partition_point(|&(r, s, _)| (r, s) < (rank, seq));
                    q.insert(at, (rank, seq, v));
                }
                _ => q.push_back((rank, seq, v)),
            },
            Pifo::Ffs(f) => {
                debug_assert_eq!(
                    (rank, v),
                    (
                        f.at[ffs_pos as usize].prio as Rank,
                        f.at[ffs_pos as usize].child
                    ),
                    "ffs node: rank and position {ffs_pos} of child {v}"
                );
                f.push(ffs_pos);
            }
            Pifo::PerChild(pc) => {
                let switch = pc.push(rank, seq, v);
                debug_assert!(
                    !switch,
                    "a node that never switches reached its switch: {} heads, {:?}",
                    pc.heads.len(),
                    pc.switch
                );
            }
            Pifo::WideHeap(w) => {
                if w.per_child.push(rank, seq, v) {
                    self.heap_to_calendar();
                }
            }
            Pifo::Calendar(c) => c.push(rank, seq, v),
            Pifo::Wfq(w) => w.push(rank, seq, v, bytes),
            Pifo::LeafSorted(_) => unreachable!("push on a leaf (see push_slot)"),
        }
    }

    /// Takes the first entry (see [`Popped`]); `links`: see [`SlotList`].
    #[inline(always)]
    pub(super) fn pop(&mut self, links: &[u32]) -> Option<Popped> {
        match self {
            Pifo::Heap(h) => h.pop().map(|e| Popped::Child(e.v)),
            Pifo::Sorted(q) => q.pop_front().map(|(_, _, v)| Popped::Child(v)),
            Pifo::LeafHeap(h) => h.pop().map(|e| Popped::TrackedSlot(e.rank(), e.v)),
            Pifo::LeafSorted(l) => l.pop(links).map(Popped::Slot),
            Pifo::Ffs(f) => {
                if f.bits == 0 {
                    return None;
                }
                let p = f.bits.trailing_zeros() as usize;
                let c = &mut f.at[p];
                c.count -= 1;
                if c.count == 0 {
                    f.bits &= !(1 << p);
                }
                Some(Popped::Child(c.child))
            }
            Pifo::PerChild(pc) => pc.pop(),
            Pifo::Wfq(w) => w.pop(),
            Pifo::WideHeap(w) => w.per_child.pop(),
            Pifo::Calendar(c) => {
                let (popped, shrunk) = c.pop();
                if shrunk {
                    self.calendar_to_heap();
                }
                popped
            }
        }
    }
}

/// What [`Pifo::pop`] took: the child node or the leaf's packet slot, with the entry's rank
/// where a departure through this node may update the node (see `fast`'s `OnSend`): `PerChild`
/// nodes (`rr`, `drr`, `senic`; `prio` after a priority update, which updates nothing),
/// `wfq` nodes and fair leaves. `Ffs` (`prio`), `Sorted` (`fifo`), `Heap` (`lstf`, `edf`)
/// and FIFO leaves never are, so the dequeue neither remembers their ranks nor visits them
/// again.
#[derive(Debug, Clone, Copy)]
pub(super) enum Popped {
    Child(u32),
    Tracked(Rank, u32),
    /// A `wfq` node's: tracked, and charged once the packet is known ([`WfqQueues::charge`]).
    Charged(Rank, u32),
    Slot(u32),
    TrackedSlot(Rank, u32),
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    thread_local! {
        /// The most entries a switch from a calendar back to a heap moved, in this thread.
        pub(in crate::sched) static MOVED_BACK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// A FIFO leaf's list against its twin, a vector sorted by rank in which a push goes
        /// after every entry of rank at most its own (every push has the largest sequence
        /// number yet): ranks that grow, tie, or fall behind the tail (re-entries), pops in
        /// between, slots reused as the engine reuses them.
        #[test]
        fn slot_list_matches_a_sorted_vec(ops in prop::collection::vec((0u8..5, 0u64..40), 1..400)) {
            const SLOTS: usize = 64;
            let stride = 3;
            let mut ranks: Vec<Rank> = vec![0; SLOTS * stride];
            let mut links = vec![NO; SLOTS];
            let mut free: Vec<u32> = (0..SLOTS as u32).rev().collect();
            let mut list = SlotList::EMPTY;
            let mut twin: Vec<(Rank, u32)> = Vec::new();
            let mut clock: Rank = 1 << 64;
            for (op, r) in ops {
                if op < 3 {
                    let Some(slot) = free.pop() else { continue };
                    let rank = match op {
                        0 => { clock += r as Rank; clock }
                        1 => clock - r as Rank,
                        _ => clock,
                    };
                    ranks[slot as usize * stride] = rank;
                    list.push(rank, slot, &mut links, &ranks, stride);
                    let at = twin.partition_point(|&(x, _)| x <= rank);
                    twin.insert(at, (rank, slot));
                } else {
                    let got = list.pop(&links);
                    let want = (!twin.is_empty()).then(|| twin.remove(0).1);
                    prop_assert_eq!(got, want);
                    free.extend(got);
                }
            }
            for &(_, slot) in &twin {
                prop_assert_eq!(list.pop(&links), Some(slot));
            }
            prop_assert_eq!(list.pop(&links), None);
        }
    }
}
