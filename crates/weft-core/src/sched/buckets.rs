//! An exact priority queue of PIFO entries for a node of many children (a `senic` node's
//! thousands of classes holds thousands of entries): a calendar of rank buckets (R. Brown's
//! calendar queue, CACM 1988) found with a three-level find-first-set bitmap, backed by a
//! [`MinHeap`] for whatever the calendar cannot hold. It pops entries in `(rank, seq)` order
//! exactly like the heap (property tests below, its twin); only the cost differs.
//!
//! * **Calendar.** `nb` buckets (a power of two: about one per child, 64 to 4,096, or one
//!   per entry when the node holds more, up to 64³ = 262,144), each `2^shift` rank units
//!   wide, cover the window `[base, base + nb · 2^shift)` circularly from bucket `cur`. A
//!   bucket is a singly linked list in an entry slab (linked through the entries' spare
//!   `link` field), kept sorted, so its first entry is its minimum; its head and tail are
//!   one 8-byte record. A push appends at the tail or puts itself at the head in O(1), else
//!   walks the list. The first non-empty
//!   bucket at or after `cur` (circularly) holds the calendar's minimum; a bit per bucket,
//!   per word of buckets and per group of 64 words find it in a few instructions; it is
//!   remembered, and a pop that empties its bucket finds the next one at once.
//! * **Overflow.** An entry below `base` (a re-entered packet's old rank, a finish tag far
//!   behind), beyond the window when the window cannot move (or when it is rebuilt), or
//!   whose place lies more than 32 entries into its bucket goes to the heap. A pop compares
//!   the calendar's minimum with the heap's: placement never changes the order.
//! * **Window.** Built with the spread of the least nine tenths of the entries over its
//!   middle half (a quarter of it behind the least entry, where old ranks re-enter; the few
//!   far ahead, which would otherwise widen every bucket, go to the heap), it moves forward
//!   only when a push lands beyond it, and then only as far as keeps a quarter of the window
//!   behind the first non-empty bucket (no bucketed entry is left behind); an empty
//!   calendar sends such pushes to the heap.
//! * **Rebuilds.** Every entry taken out, the buckets counted again for the entries held,
//!   `shift` fitted to their spread, the window placed again: when the heap holds a quarter
//!   of the entries (and at least 32, or the node's children); or when a push walks more
//!   than 16 entries, and either the node holds more than two entries a bucket (more
//!   buckets) or four pushes per entry have passed (narrower ones: ties stay together
//!   however narrow the buckets). A rebuild costs O(entries) and waits for at least as many
//!   pushes since the last, so its cost is O(1) a push.
//! * **Clusters.** Ranks can bunch closer than any bucket width parts them: a `senic`
//!   node's classes of equal rates backlogged at once have finish tags that tie group by
//!   group, and the groups of different rates interleave, so a push lands behind a long
//!   group of ties and before the next. Such a push stops walking after 32 entries and goes
//!   to the heap, so a push costs at most a short walk and a heap push, however the ranks
//!   bunch (a 50,000-class node holding 200,000 entries runs as fast as on the heap alone,
//!   and 8 times faster than with unbounded walks on 4,096 buckets:
//!   docs/perf/2026-11-24-calendar-queues.md, "Deep nodes").
//!
//! Invariants (every bucketed entry lies in its bucket's range of the window; a bucket's list
//! is sorted; a bucket's bit, a word's and a group's are set exactly when they hold entries)
//! are checked by `BucketQueue::check` in the property tests; the remembered first bucket
//! by a `debug_assert!`. Cost: push O(1) plus a walk of at most 32 entries; pop O(1) (up to
//! three find-first-set steps) plus the heap's O(log n) for the entries it holds. No
//! allocation once the slab and heap have grown to their peak (rebuilds reuse a scratch
//! vector; a rebuild that changes the number of buckets allocates them anew, at most once
//! per doubling or eightfold shrinking of the entries). Hand-written: no crate offers an
//! exact calendar queue over 128-bit ranks with sequence-number ties.

use super::heap::{HeapEntry, MinHeap};
use super::shared::Rank;

const NO: u32 = u32::MAX;

/// [`BucketQueue::top`] not known.
const UNKNOWN: usize = usize::MAX;

/// Entries in the heap below which a rebuild is not worth it (the heap alone is as fast); a
/// node of fewer children rebuilds at as many entries as it has children.
const MIN_ENTRIES: usize = 32;

/// A push that walks past more entries than this asks for a rebuild with more or narrower
/// buckets.
const LONG_BUCKET: u32 = 16;

/// A push walks past at most this many entries of a bucket; beyond, the heap takes it.
const MAX_WALK: u32 = 2 * LONG_BUCKET;

/// A rebuild fits the buckets' width to the spread of the least `SPREAD_TENTHS` tenths of
/// the entries (see [`BucketQueue::rebuild_from_scratch`]).
const SPREAD_TENTHS: usize = 9;

/// At most 2^this times four pushes per entry between rebuilds that long walks ask for and
/// that change nothing ([`BucketQueue::long_bucket`]).
const MAX_IDLE_REBUILDS: u32 = 6;

/// Buckets at most: three levels of 64-bit find-first-set words (64³).
const MAX_BUCKETS: usize = 1 << 18;

/// Buckets at most for a node's children alone (more only for more entries).
const CHILD_BUCKETS: usize = 4096;

/// A bucket's list: slab indices of its first (smallest) and last (largest) entries.
#[derive(Debug, Clone, Copy)]
struct Ends {
    /// The first entry, or `NO` (the bucket is empty).
    head: u32,
    /// The last entry; meaningless when the bucket is empty.
    tail: u32,
}

/// An empty bucket.
const EMPTY: Ends = Ends { head: NO, tail: NO };

/// The queue (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct BucketQueue {
    /// Per bucket: its list's ends (one record: a push reads both, one cache line).
    ends: Box<[Ends]>,
    /// Bit `b % 64` of word `b / 64`: bucket `b` is non-empty.
    words: Box<[u64]>,
    /// Bit `w % 64` of `mids[w / 64]`: word `w` is non-zero (a fixed array: indices masked
    /// to 0..64 need no bounds check).
    mids: [u64; 64],
    /// Bit `m`: `mids[m]` is non-zero (at most 64 of them).
    summary: u64,
    /// `nb - 1` (`nb` buckets).
    mask: usize,
    /// The bucket whose range starts at `base`.
    cur: usize,
    /// Rank where bucket `cur`'s range starts (rank units of the node).
    base: Rank,
    /// The first non-empty bucket when known ([`Self::first_bucket`]), else `UNKNOWN`.
    top: usize,
    /// log2 of a bucket's width in rank units.
    shift: u32,
    /// Entry slab; an entry's `link` is the next entry in its bucket (`NO`: last).
    ents: Vec<HeapEntry>,
    /// Free slab entries, linked through `link`.
    free: u32,
    /// Entries in the calendar (not in `over`).
    bucketed: usize,
    /// Entries the calendar does not hold.
    over: MinHeap,
    /// Pushes since the last rebuild.
    pushes: usize,
    /// Rebuilds in a row, asked for by long walks, that left the buckets' number and
    /// width as they were (ties no width parts): each doubles the pushes the next waits
    /// for, up to 2^[`MAX_IDLE_REBUILDS`] times (see [`Self::long_bucket`]).
    idle_rebuilds: u32,
    /// Walks stopped at [`MAX_WALK`] (tests).
    #[cfg(test)]
    cut_short: usize,
    /// Rebuilds so far (tests).
    #[cfg(test)]
    rebuilds: usize,
    /// The node's children (the calendar's size follows them, and its entries beyond; a
    /// node of fewer than `MIN_ENTRIES` rebuilds from as many entries in the heap).
    children: usize,
    /// Scratch of [`Self::rebuild`].
    scratch: Vec<HeapEntry>,
}

impl BucketQueue {
    /// An empty queue for a node with `children` children, with no buckets until its first
    /// rebuild (a [`Self::refill`], or enough entries in the heap: until then the heap takes
    /// every push, its window lying beyond every rank), so a node that never uses its
    /// calendar pays nothing for it. A rebuild makes about one bucket per child, 64 to
    /// 4,096 (see [`Self::buckets_for`]).
    pub(super) fn new(children: usize) -> BucketQueue {
        BucketQueue {
            ends: Box::new([]),
            words: Box::new([]),
            mids: [0; 64],
            summary: 0,
            mask: 0,
            cur: 0,
            base: Rank::MAX,
            top: UNKNOWN,
            shift: 0,
            ents: Vec::new(),
            free: NO,
            bucketed: 0,
            over: MinHeap::default(),
            pushes: 0,
            idle_rebuilds: 0,
            #[cfg(test)]
            cut_short: 0,
            #[cfg(test)]
            rebuilds: 0,
            children,
            scratch: Vec::new(),
        }
    }

    /// Buckets for a node of `children` holding `entries`: about one per child (64 to
    /// 4,096), or one per entry when it holds more (up to [`MAX_BUCKETS`]), so that a
    /// bucket's list stays short however deep the node's queues grow.
    fn buckets_for(children: usize, entries: usize) -> usize {
        children
            .min(CHILD_BUCKETS)
            .max(entries)
            .next_power_of_two()
            .clamp(64, MAX_BUCKETS)
    }

    /// A queue for a node with `children` children holding `entries`, its calendar built
    /// to fit them (tests; the engine refills a queue it keeps, [`Self::refill`]).
    #[cfg(test)]
    pub(super) fn with_entries(children: usize, entries: Vec<HeapEntry>) -> BucketQueue {
        let mut q = BucketQueue::new(children);
        q.scratch = entries;
        q.rebuild_from_scratch();
        q
    }

    /// Adds the entries `fill` puts in a vector (the queue's own scratch, so no allocation
    /// once it has grown) to those held, and rebuilds the calendar to fit them all.
    pub(super) fn refill(&mut self, fill: impl FnOnce(&mut Vec<HeapEntry>)) {
        self.gather();
        fill(&mut self.scratch);
        self.rebuild_from_scratch();
    }

    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.bucketed + self.over.len()
    }

    /// The first non-empty bucket at or after `cur`, circularly (the calendar is not empty),
    /// remembered (see [`Self::top`]).
    #[inline(always)]
    fn first_bucket(&mut self) -> usize {
        if self.top == UNKNOWN {
            self.top = self.find_first_bucket();
        }
        debug_assert_eq!(
            self.top,
            self.find_first_bucket(),
            "remembered first bucket"
        );
        self.top
    }

    /// [`Self::first_bucket`], found in the bitmaps.
    #[inline(always)]
    fn find_first_bucket(&self) -> usize {
        let w = self.cur >> 6;
        let bits = self.words[w] & (!0u64 << (self.cur & 63));
        if bits != 0 {
            return (w << 6) | bits.trailing_zeros() as usize;
        }
        // The words after `w` in its group of 64 words,
        let m = w >> 6;
        let later = self.mids[m & 63] & (!1u64).wrapping_shl((w & 63) as u32);
        let k = if later != 0 {
            (m << 6) | later.trailing_zeros() as usize
        } else {
            // else the groups after `m`, else from the start (wrapping: nothing is at or
            // after `cur`, so the first non-empty bucket from 0 comes first, even when it
            // lies in `cur`'s own group or word).
            let after = self.summary & (!1u64).wrapping_shl(m as u32);
            let s = if after != 0 { after } else { self.summary };
            debug_assert!(s != 0, "first_bucket on an empty calendar");
            let g = s.trailing_zeros() as usize;
            (g << 6) | self.mids[g & 63].trailing_zeros() as usize
        };
        (k << 6) | self.words[k].trailing_zeros() as usize
    }

    /// The calendar's first entry (slab index), if it has any.
    #[inline(always)]
    fn calendar_min(&mut self) -> Option<(usize, u32)> {
        if self.bucketed == 0 {
            return None;
        }
        let b = self.first_bucket();
        Some((b, self.ends[b].head))
    }

    /// The first entry (tests: the engine only pops).
    #[cfg(test)]
    pub(super) fn peek(&mut self) -> Option<HeapEntry> {
        let min = self.calendar_min();
        let over = self.over.peek();
        match min {
            None => over.copied(),
            Some((_, i)) => {
                let e = self.ents[i as usize].linked(0);
                match over {
                    Some(o) if o.before(&e) => Some(*o),
                    _ => Some(e),
                }
            }
        }
    }

    /// Removes and returns the first entry.
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<HeapEntry> {
        let Some((b, i)) = self.calendar_min() else {
            return self.pop_over();
        };
        let mut e = self.ents[i as usize];
        if let Some(o) = self.over.peek() {
            if o.before(&e) {
                return self.pop_over();
            }
        }
        let n = e.link;
        e.link = 0;
        self.ends[b].head = n;
        self.ents[i as usize].link = self.free;
        self.free = i;
        self.bucketed -= 1;
        if n == NO {
            self.clear_bit(b);
            // The next first bucket now, off the next pop's critical path (its loads overlap
            // the rest of this dequeue): 3-4 % faster than finding it at the next pop.
            self.top = if self.bucketed == 0 {
                UNKNOWN
            } else {
                self.find_first_bucket()
            };
        }
        Some(e)
    }

    /// Replaces the first entry (the queue is not empty) with `e` (tests, as the heap's).
    #[cfg(test)]
    pub(super) fn replace_top(&mut self, e: HeapEntry) {
        let popped = self.pop();
        debug_assert!(popped.is_some(), "replace_top on an empty queue");
        self.push(e);
    }

    /// Adds `e`.
    #[inline(always)]
    pub(super) fn push(&mut self, e: HeapEntry) {
        self.pushes += 1;
        match self.bucket_of(e.rank()) {
            Some(b) => {
                if self.insert(b, e) > LONG_BUCKET {
                    self.long_bucket();
                }
            }
            None => self.push_over(e),
        }
    }

    /// The heap's first entry, taken (out of line, as the heap's other uses here: they are
    /// rare, and inlined they would cost every caller's code).
    #[inline(never)]
    fn pop_over(&mut self) -> Option<HeapEntry> {
        self.over.pop()
    }

    /// `e` to the heap; a rebuild if the heap now holds a large share of the entries and
    /// as many pushes as entries have happened since the last (amortized O(1)).
    #[inline(never)]
    fn push_over(&mut self, e: HeapEntry) {
        self.over.push(e);
        let over = self.over.len();
        let min_entries = self.children.clamp(1, MIN_ENTRIES);
        if over >= min_entries && over * 4 >= self.len() && self.pushes >= self.len() {
            self.rebuild();
        }
    }

    /// A push walked a long bucket. If the node holds more than two entries a bucket and the
    /// calendar may grow, rebuild with more buckets once as many pushes as entries have
    /// happened since the last rebuild. Else narrower buckets help only if the bucket's ranks
    /// differ (ties stay together, e.g. a node's classes of one rate backlogged at once), so
    /// rebuild only after four pushes per entry, and twice as many after each rebuild in a
    /// row that left the buckets' number and width as they were (Loom Fig. 1's `wfq` node:
    /// tenants of one weight tie, and groups of two weights share buckets; there it rebuilt
    /// every 16,384 pushes for nothing, ~20 instructions a packet).
    #[cold]
    #[inline(never)]
    fn long_bucket(&mut self) {
        let len = self.len();
        let grow = len > 2 * (self.mask + 1) && self.mask + 1 < MAX_BUCKETS;
        let wait = if grow {
            len
        } else {
            (4 * len) << self.idle_rebuilds
        };
        if self.pushes >= wait {
            let before = (self.mask, self.shift);
            self.rebuild();
            if !grow && (self.mask, self.shift) == before {
                self.idle_rebuilds = (self.idle_rebuilds + 1).min(MAX_IDLE_REBUILDS);
            } else {
                self.idle_rebuilds = 0;
            }
        }
    }

    /// The bucket for `rank`, moving the window forward if it lies beyond it and the
    /// calendar allows; `None`: the heap takes it.
    #[inline(always)]
    fn bucket_of(&mut self, rank: Rank) -> Option<usize> {
        let shift = self.shift;
        if rank < self.base {
            return None;
        }
        let d = (rank - self.base) >> shift;
        if d > self.mask as u128 {
            return self.bucket_beyond(rank, shift);
        }
        Some((self.cur + d as usize) & self.mask)
    }

    /// [`Self::bucket_of`] for a rank beyond the window.
    #[inline(never)]
    fn bucket_beyond(&mut self, rank: Rank, shift: u32) -> Option<usize> {
        if self.bucketed == 0 {
            // The window fits ranks no longer seen: the heap takes them until it holds
            // enough to build a calendar that fits (see `push_over`).
            return None;
        }
        // Forward, keeping a quarter of the window behind the first non-empty bucket:
        // nothing bucketed is left behind.
        let behind = (self.mask + 1) / 4;
        let first = self.first_bucket();
        let forward = self.dist(first).saturating_sub(behind);
        if forward == 0 {
            return None;
        }
        self.base += (forward as u128) << shift;
        self.cur = (self.cur + forward) & self.mask;
        let d = (rank - self.base) >> shift;
        (d <= self.mask as u128).then(|| (self.cur + d as usize) & self.mask)
    }

    /// Inserts `e` into bucket `b`'s sorted list; returns the entries walked past plus one.
    /// A walk stops past [`MAX_WALK`] entries and gives `e` to the heap instead.
    #[inline(always)]
    fn insert(&mut self, b: usize, e: HeapEntry) -> u32 {
        // The slab entry first (a push may move the slab; the places are read after it).
        let i = match self.free {
            NO => {
                self.ents.push(e);
                (self.ents.len() - 1) as u32
            }
            f => {
                self.free = self.ents[f as usize].link;
                f
            }
        };
        self.bucketed += 1;
        if self.top != UNKNOWN && self.dist(b) < self.dist(self.top) {
            self.top = b;
        }
        let Ends { head: h, tail: t } = self.ends[b];
        if h == NO {
            self.ents[i as usize] = e.linked(NO);
            self.ends[b] = Ends { head: i, tail: i };
            self.words[b >> 6] |= 1 << (b & 63);
            self.mids[(b >> 12) & 63] |= 1 << ((b >> 6) & 63);
            self.summary |= 1 << (b >> 12);
            return 1;
        }
        // At the back (most pushes: ranks grow, and ties go after the entries already there,
        // whose sequence numbers are smaller), or at the front; else a walk.
        if !e.before(&self.ents[t as usize]) {
            self.ents[i as usize] = e.linked(NO);
            self.ents[t as usize].link = i;
            self.ends[b].tail = i;
            return 1;
        }
        let first = self.ents[h as usize];
        if e.before(&first) {
            self.ents[i as usize] = e.linked(h);
            self.ends[b].head = i;
            return 1;
        }
        // `e` goes before the tail (checked above): the walk ends at the tail at the latest,
        // or gives up past `MAX_WALK` entries. Each entry is read once: its link is the
        // next step's.
        let mut prev = h;
        let mut next = first.link;
        let mut walked = 2;
        loop {
            debug_assert!(next != NO, "a walk past the tail of bucket {b}");
            let n = self.ents[next as usize];
            if e.before(&n) {
                self.ents[i as usize] = e.linked(next);
                self.ents[prev as usize].link = i;
                return walked;
            }
            prev = next;
            next = n.link;
            walked += 1;
            if walked > MAX_WALK {
                self.give_back(i, e);
                return walked;
            }
        }
    }

    /// Slab entry `i`, taken for `e`, whose push walked too far in, back to the free list;
    /// the heap takes `e`.
    #[cold]
    #[inline(never)]
    fn give_back(&mut self, i: u32, e: HeapEntry) {
        self.ents[i as usize].link = self.free;
        self.free = i;
        self.bucketed -= 1;
        self.over.push(e);
        #[cfg(test)]
        {
            self.cut_short += 1;
        }
    }

    /// Buckets from `cur` to `b`, circularly.
    #[inline(always)]
    fn dist(&self, b: usize) -> usize {
        b.wrapping_sub(self.cur) & self.mask
    }

    #[inline(always)]
    fn clear_bit(&mut self, b: usize) {
        let w = b >> 6;
        self.words[w] &= !(1 << (b & 63));
        if self.words[w] == 0 {
            let m = w >> 6;
            self.mids[m & 63] &= !(1 << (w & 63));
            if self.mids[m & 63] == 0 {
                self.summary &= !(1 << m);
            }
        }
    }

    /// Takes every entry out and puts it back in a calendar whose buckets fit their spread
    /// (see the module doc).
    #[cold]
    fn rebuild(&mut self) {
        #[cfg(test)]
        {
            self.rebuilds += 1;
        }
        self.gather();
        self.rebuild_from_scratch();
    }

    /// Moves every entry to `scratch` (emptied first), leaving the queue empty.
    fn gather(&mut self) {
        let mut all = std::mem::take(&mut self.scratch);
        all.clear();
        while let Some(e) = self.over.pop() {
            all.push(e);
        }
        // An empty calendar's lists are all empty: no bucket to visit (a node switching
        // to its calendar refills an empty one).
        let buckets = if self.bucketed > 0 { self.mask + 1 } else { 0 };
        for b in 0..buckets {
            let mut i = self.ends[b].head;
            while i != NO {
                let e = self.ents[i as usize];
                all.push(e.linked(0));
                i = e.link;
            }
            self.ends[b] = EMPTY;
        }
        self.words.fill(0);
        self.mids.fill(0);
        self.summary = 0;
        self.top = UNKNOWN;
        self.ents.clear();
        self.free = NO;
        self.bucketed = 0;
        self.scratch = all;
    }

    /// Builds the calendar for the entries in `scratch` (the queue is empty) and puts them in.
    fn rebuild_from_scratch(&mut self) {
        let mut all = std::mem::take(&mut self.scratch);
        self.pushes = 0;
        // More buckets for more entries; fewer once a calendar holds an eighth of what it
        // was sized for (not at every dip: the arrays are allocated again).
        let want = Self::buckets_for(self.children, all.len());
        let nb = self.mask + 1;
        if want > nb || want * 8 <= nb {
            self.resize(want);
        }
        let lo = all.iter().map(HeapEntry::rank).min().unwrap_or(0);
        // The spread of the least nine tenths of the entries, not of all: a few far ahead (a
        // class with many packets queued at a low rate) would widen every bucket and crowd
        // the rest into a few (a senic node's 10,000 classes: buckets 4 times as wide, 6
        // entries walked a push instead of 1.6). What lies beyond the window goes to the heap.
        let hi = match all.len() {
            0 => 0,
            n => all
                .select_nth_unstable_by_key(n * SPREAD_TENTHS / 10, HeapEntry::rank)
                .1
                .rank(),
        };
        // That spread covers half the window, from a quarter of the way in: room behind for
        // old ranks that re-enter, and ahead for later, larger ones.
        let nb = self.mask + 1;
        let half = nb.trailing_zeros() - 1;
        let bits = 128 - (hi - lo).leading_zeros();
        let shift = bits.saturating_sub(half);
        self.shift = shift;
        self.base = (lo >> shift << shift).saturating_sub(((nb / 4) as u128) << shift);
        self.cur = 0;
        for &e in all.iter() {
            // In the window (every entry is at or after `base`), else the heap's.
            let d = (e.rank() - self.base) >> shift;
            if d > self.mask as u128 {
                self.over.push(e);
                continue;
            }
            // `cur` is 0: the bucket is `d`.
            self.insert(d as usize, e);
        }
        self.scratch = all;
    }

    /// `nb` empty buckets (the queue is empty).
    #[cold]
    fn resize(&mut self, nb: usize) {
        debug_assert_eq!(self.bucketed, 0, "resize of a calendar holding entries");
        self.ends = vec![EMPTY; nb].into_boxed_slice();
        self.words = vec![0; nb / 64].into_boxed_slice();
        self.mids = [0; 64];
        self.mask = nb - 1;
        self.top = UNKNOWN;
    }

    /// Buckets (tests).
    #[cfg(test)]
    pub(super) fn buckets(&self) -> usize {
        self.mask + 1
    }

    /// Rebuilds so far (tests).
    #[cfg(test)]
    pub(super) fn rebuilds(&self) -> usize {
        self.rebuilds
    }

    /// Pushes that walked too far into a bucket and went to the heap (tests).
    #[cfg(test)]
    pub(super) fn cut_short(&self) -> usize {
        self.cut_short
    }

    /// Checks the invariants of the module doc (tests).
    #[cfg(test)]
    fn check(&self) {
        // No buckets before the first rebuild.
        let nb = self.ends.len();
        assert!(
            nb == 0 || nb == self.mask + 1,
            "{nb} buckets, mask {}",
            self.mask
        );
        let mut n = 0;
        for b in 0..nb {
            let bit = self.words[b >> 6] >> (b & 63) & 1 == 1;
            assert_eq!(
                bit,
                self.ends[b].head != NO,
                "bucket {b}: bit {bit}, head {}",
                self.ends[b].head
            );
            let dist = (b.wrapping_sub(self.cur) & self.mask) as u128;
            let mut i = self.ends[b].head;
            let mut prev: Option<HeapEntry> = None;
            while i != NO {
                let e = self.ents[i as usize];
                let shift = self.shift;
                assert_eq!(
                    (e.rank() - self.base) >> shift,
                    dist,
                    "entry {e:?} in bucket {b} (cur {}, base {}, shift {shift})",
                    self.cur,
                    self.base
                );
                if let Some(p) = prev {
                    assert!(p.before(&e), "bucket {b} unsorted: {p:?} then {e:?}");
                }
                if e.link == NO {
                    assert_eq!(self.ends[b].tail, i, "bucket {b}: tail");
                }
                prev = Some(e);
                n += 1;
                i = e.link;
            }
        }
        for w in 0..self.words.len() {
            assert_eq!(
                self.mids[w >> 6] >> (w & 63) & 1 == 1,
                self.words[w] != 0,
                "mid bit of word {w}"
            );
        }
        for m in 0..self.mids.len() {
            assert_eq!(
                self.summary >> m & 1 == 1,
                self.mids[m] != 0,
                "summary bit {m}"
            );
        }
        assert_eq!(n, self.bucketed, "bucketed count");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Same entries in the same order as the heap (the engine's other queue of heads), on
        /// ranks that mostly grow (finish tags), jump far ahead, fall behind the window (old
        /// ranks of re-entered packets) or tie, at small and 128-bit scales, with pushes,
        /// pops and replacements of the top.
        #[test]
        fn bucket_queue_matches_heap(
            // Up to 4,096 buckets for the children (more for more entries: see
            // `deep_calendar_matches_heap`).
            children in prop_oneof![1usize..300, 3000usize..5000],
            scale in prop::sample::select(vec![0u32, 10, 40, 70]),
            ops in prop::collection::vec((0u8..8, 0u64..2000), 1..800),
            // Built at once, or left to build itself once the heap holds enough.
            built in any::<bool>(),
        ) {
            let mut q = if built {
                BucketQueue::with_entries(children, Vec::new())
            } else {
                BucketQueue::new(children)
            };
            let mut h = MinHeap::default();
            let mut clock: u128 = 1 << scale;
            for (i, &(op, r)) in ops.iter().enumerate() {
                let seq = (i as u64).wrapping_mul(0x9E37_79B9) % 1000;
                let rank = match op {
                    0..=2 => clock + ((r as u128) << scale),
                    3 => clock.saturating_sub((r as u128) << scale),
                    4 => clock + ((r as u128) << (scale + 20)),
                    _ => clock,
                };
                match op {
                    0 | 3 | 4 => {
                        q.push(HeapEntry::new(rank, seq, i as u32));
                        h.push(HeapEntry::new(rank, seq, i as u32));
                    }
                    1 | 5 | 6 => {
                        let a = q.pop();
                        prop_assert_eq!(a, h.pop());
                        if let Some(e) = a {
                            clock = clock.max(e.rank());
                        }
                    }
                    _ => {
                        if h.peek().is_some() {
                            q.replace_top(HeapEntry::new(rank, seq, i as u32));
                            h.replace_top(HeapEntry::new(rank, seq, i as u32));
                        }
                    }
                }
                q.check();
                prop_assert_eq!(q.len(), h.len());
                prop_assert_eq!(q.peek(), h.peek().copied());
            }
            while let Some(e) = h.pop() {
                prop_assert_eq!(q.pop(), Some(e));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }

    /// What [`deep_twin`] saw: the most buckets, walks cut short.
    struct Deep {
        most: usize,
        cut_short: usize,
    }

    /// Drives a queue and a heap with `ops` (see `deep_calendar_matches_heap`), asserting
    /// they agree.
    fn deep_twin(children: usize, scale: u32, ops: &[(u8, u64)]) -> Deep {
        let mut q = BucketQueue::with_entries(children, Vec::new());
        let mut h = MinHeap::default();
        let mut clock: u128 = 1 << scale;
        let mut seen = Deep {
            most: 0,
            cut_short: 0,
        };
        for (i, &(op, r)) in ops.iter().enumerate() {
            // Mostly dense ranks, a few far ahead (they widen the buckets), some ties.
            let rank = match op {
                5 => clock + ((r as u128) << (scale + 24)),
                6 => clock + (((r % 8) as u128) << scale),
                _ => clock + ((r as u128) << scale),
            };
            let e = HeapEntry::new(rank, i as u64, i as u32);
            match op {
                0..=6 => {
                    q.push(e);
                    h.push(e);
                }
                7 | 8 => {
                    let a = q.pop();
                    assert_eq!(a, h.pop(), "pop {i}");
                    if let Some(e) = a {
                        clock = clock.max(e.rank());
                    }
                }
                _ => {
                    if h.peek().is_some() {
                        q.replace_top(e);
                        h.replace_top(e);
                    }
                }
            }
            seen.most = seen.most.max(q.buckets());
            if i % 4096 == 0 {
                q.check();
            }
            assert_eq!(q.len(), h.len(), "length after op {i}");
        }
        q.check();
        seen.cut_short = q.cut_short;
        while let Some(e) = h.pop() {
            assert_eq!(q.pop(), Some(e), "drain");
        }
        assert_eq!(q.pop(), None, "drained");
        seen
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// The twin test at depth: thousands of entries on few distinct ranks (ties and
        /// near-ties, the long lists a senic node's classes of equal rates make), so the
        /// calendar grows past 4,096 buckets (all three bitmap levels) and walks stop at
        /// `MAX_WALK` and give entries to the heap (23 of 24 cases did both when written;
        /// `a_deep_cluster_…` asserts them).
        #[test]
        fn deep_calendar_matches_heap(
            children in prop_oneof![1usize..64, 1000usize..5000],
            scale in prop::sample::select(vec![0u32, 30, 70]),
            ops in prop::collection::vec((0u8..10, 0u64..3000), 20_000..30_000),
        ) {
            deep_twin(children, scale, &ops);
        }
    }

    /// The entries of a `wfq`-like node of 64 backlogged children of weights 1 to 4 (start
    /// tags of 1,500-byte packets, 4,096 queued, each pop followed by a push for a child
    /// picked at random): children of one weight tie, and groups of two weights share
    /// buckets, so pushes walk long buckets however the calendar is fitted. Rebuilds that
    /// change nothing back off (each in a row waits twice as long): 200,000 pops and pushes
    /// rebuild it 7 times (13 without the back-off).
    #[test]
    fn useless_rebuilds_back_off() {
        let mut q = BucketQueue::new(64);
        let mut last = [0 as Rank; 64];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut pick = || {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (rng >> 33) as usize % 64
        };
        let cost = |c: usize| ((1500 as Rank) << 32) / (1 + c as Rank % 4);
        let (mut seq, mut v) = (0u64, 0 as Rank);
        let mut push = |q: &mut BucketQueue, c: usize, v: Rank, seq: &mut u64| {
            let s = v.max(last[c]);
            last[c] = s + cost(c);
            *seq += 1;
            q.push(HeapEntry::new(s, *seq, c as u32));
        };
        for _ in 0..4096 {
            push(&mut q, pick(), v, &mut seq);
        }
        for _ in 0..200_000 {
            let e = q.pop().expect("never empty");
            assert!(e.rank() >= v, "popped {} after {v}", e.rank());
            v = e.rank();
            push(&mut q, pick(), v, &mut seq);
        }
        let rebuilds = q.rebuilds();
        assert!(
            (1..=8).contains(&rebuilds),
            "{rebuilds} rebuilds in 200,000 pushes"
        );
    }

    /// A deep node of clustered ranks grows the calendar past 4,096 buckets and cuts long
    /// walks short, while popping as the heap does.
    #[test]
    fn a_deep_cluster_grows_the_calendar_and_cuts_walks_short() {
        let mut z = 1u64;
        let ops: Vec<(u8, u64)> = (0..30_000)
            .map(|_| {
                // xorshift64
                z ^= z << 13;
                z ^= z >> 7;
                z ^= z << 17;
                ((z % 10) as u8, (z >> 8) % 3000)
            })
            .collect();
        let seen = deep_twin(1, 30, &ops);
        assert!(seen.most > 4096, "at most {} buckets", seen.most);
        assert!(seen.cut_short > 0, "no walk cut short");
    }

    /// A few entries far ahead of the rest do not widen the buckets: a rebuild fits them to
    /// the bulk (the least nine tenths), spreads the bulk over many buckets and gives the
    /// far ones to the heap; pops come in order.
    #[test]
    fn far_entries_do_not_widen_the_buckets() {
        let near = (0..1000u128).map(|k| HeapEntry::new(k * 1500, k as u64, k as u32));
        let far = (0..20u128).map(|k| HeapEntry::new((1 << 50) + k, 1000 + k as u64, 0));
        let mut q = BucketQueue::with_entries(1000, near.chain(far).collect());
        q.check();
        let used = q.words.iter().map(|w| w.count_ones()).sum::<u32>();
        assert!(used >= 300, "1,000 near entries in {used} buckets");
        assert_eq!(q.over.len(), 20, "far entries in the heap");
        let mut last = None;
        while let Some(e) = q.pop() {
            assert!(
                last.is_none_or(|l: HeapEntry| l.before(&e)),
                "{last:?} then {e:?}"
            );
            last = Some(e);
        }
        assert_eq!(last.map(|e| e.rank()), Some((1 << 50) + 19));
    }

    /// A steady stream of growing ranks lives in the calendar, not the heap.
    #[test]
    fn growing_ranks_stay_in_the_calendar() {
        let mut q = BucketQueue::with_entries(1024, Vec::new());
        let mut seq = 0;
        for k in 0..1000u128 {
            q.push(HeapEntry::new(k * 1500, seq, k as u32));
            seq += 1;
        }
        for _ in 0..100_000 {
            let e = q.pop().expect("entries");
            q.push(HeapEntry::new(e.rank() + 1000 * 1500, seq, e.v));
            seq += 1;
        }
        q.check();
        assert!(
            q.over.len() < 50,
            "{} of {} entries in the heap",
            q.over.len(),
            q.len()
        );
    }
}
