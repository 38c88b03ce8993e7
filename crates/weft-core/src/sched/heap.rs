//! A binary min-heap of PIFO entries `(rank, seq, payload)` for the fast engine, ordered by
//! `(rank, seq)`: the order of `BinaryHeap<Reverse<(Rank, u64, u32)>>` whenever no two
//! entries share `(rank, seq)` with different payloads (the engine's sequence numbers are
//! unique per push; see the property test below, the heap's twin).
//!
//! Why not `std`'s heap: a 128-bit rank makes `(u128, u64, u32)` a 16-byte-aligned tuple whose
//! derived comparison is a chain of branches. Here the rank is kept as two `u64` halves
//! (entries are 32 bytes, no alignment padding) and compared as one branch on the high half
//! (almost always equal) and one 128-bit comparison of `(low half, seq)`: about six
//! instructions. The heap is 4-ary (half the depth of a binary heap, the four children of a
//! node in two cache lines); pop moves the hole to the bottom along the smallest children
//! (three comparisons per level), then sifts the last entry up (Floyd's method, as `std`
//! does for its binary heap).
//!
//! The heap itself is generic over what it holds ([`Ordered`]): the head engine keeps
//! 24-byte entries of 64-bit keys in the same heap (`super::key_heap`).
//!
//! Invariant: `v[i]` is not after any of its children `v[4i + 1] ..= v[4i + 4]`. Cost: push
//! O(log₄ n), pop O(log₄ n) levels of three comparisons; no allocation once the vector has
//! grown to its peak.

use super::shared::Rank;

/// One entry: `rank = hi << 64 | lo`, its tie-breaking sequence number and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeapEntry {
    hi: u64,
    lo: u64,
    /// Global push sequence number (tie break).
    pub seq: u64,
    /// Child node id or slot.
    pub v: u32,
    /// Free for the container holding the entry (it fills what would be padding): a
    /// [`super::buckets::BucketQueue`] links its buckets' lists through it; 0 elsewhere and in
    /// every entry a queue returns.
    pub link: u32,
}

impl HeapEntry {
    #[inline(always)]
    pub(super) fn new(rank: Rank, seq: u64, v: u32) -> HeapEntry {
        HeapEntry {
            hi: (rank >> 64) as u64,
            lo: rank as u64,
            seq,
            v,
            link: 0,
        }
    }

    /// The same entry with `link`.
    #[inline(always)]
    pub(super) fn linked(self, link: u32) -> HeapEntry {
        HeapEntry { link, ..self }
    }

    #[inline(always)]
    pub(super) fn rank(&self) -> Rank {
        ((self.hi as u128) << 64) | self.lo as u128
    }

    /// `(rank, seq)` strictly before `o`'s.
    #[inline(always)]
    pub(super) fn before(&self, o: &HeapEntry) -> bool {
        if self.hi != o.hi {
            self.hi < o.hi
        } else {
            (((self.lo as u128) << 64) | self.seq as u128)
                < (((o.lo as u128) << 64) | o.seq as u128)
        }
    }
}

impl Ordered for HeapEntry {
    #[inline(always)]
    fn before(&self, o: &HeapEntry) -> bool {
        HeapEntry::before(self, o)
    }
}

/// What a [`Heap`] orders: `before` is a strict weak order (irreflexive, transitive).
pub(crate) trait Ordered: Copy {
    /// Strictly before `o`.
    fn before(&self, o: &Self) -> bool;
}

/// Children per node: a 4-ary heap is half as deep as a binary one (senic's 10k classes:
/// 6 levels instead of 12), with three comparisons per level on the way down.
const ARITY: usize = 4;

/// The heap (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct Heap<E> {
    v: Vec<E>,
}

impl<E> Default for Heap<E> {
    fn default() -> Heap<E> {
        Heap { v: Vec::new() }
    }
}

/// The heap of PIFO entries.
pub(crate) type MinHeap = Heap<HeapEntry>;

impl<E: Ordered> Heap<E> {
    pub(super) fn len(&self) -> usize {
        self.v.len()
    }

    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// Removes every entry (keeping the capacity).
    pub(super) fn clear(&mut self) {
        self.v.clear();
    }

    /// Keeps only the entries `keep` accepts, in O(n log n) (a sorted vector is a heap).
    pub(super) fn retain(&mut self, keep: impl FnMut(&E) -> bool) {
        self.v.retain(keep);
        self.v.sort_unstable_by(|a, b| {
            if a.before(b) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
    }

    /// Every entry, in no particular order.
    pub(super) fn entries(&self) -> &[E] {
        &self.v
    }

    /// The first entry.
    #[inline(always)]
    pub(super) fn peek(&self) -> Option<&E> {
        self.v.first()
    }

    #[inline]
    pub(super) fn push(&mut self, e: E) {
        self.v.push(e);
        let n = self.v.len();
        Self::sift_up(&mut self.v, n - 1, e);
    }

    /// Removes and returns the first entry.
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<E> {
        let last = self.v.pop()?;
        match self.v.first_mut() {
            None => Some(last),
            Some(top) => {
                let e = std::mem::replace(top, last);
                Self::sift_down_to_bottom(&mut self.v, last);
                Some(e)
            }
        }
    }

    /// Replaces the first entry (the heap is not empty) with `e`.
    #[inline]
    pub(super) fn replace_top(&mut self, e: E) {
        debug_assert!(!self.v.is_empty(), "replace_top on an empty heap");
        Self::sift_down_to_bottom(&mut self.v, e);
    }

    /// `e` goes to index 0's place: the hole moves down along the smallest children to the
    /// bottom, then `e` moves up from there.
    #[inline(always)]
    fn sift_down_to_bottom(v: &mut [E], e: E) {
        let n = v.len();
        let mut pos = 0;
        loop {
            let first = ARITY * pos + 1;
            if first + ARITY <= n {
                // All four children: the smallest of them in three comparisons.
                let c = &v[first..first + ARITY];
                let a = usize::from(c[1].before(&c[0]));
                let b = 2 + usize::from(c[3].before(&c[2]));
                let m = if c[b].before(&c[a]) { b } else { a };
                v[pos] = c[m];
                pos = first + m;
            } else {
                // Fewer: the last parent with children; they have none below them.
                if first < n {
                    let mut m = first;
                    for k in first + 1..n {
                        if v[k].before(&v[m]) {
                            m = k;
                        }
                    }
                    v[pos] = v[m];
                    pos = m;
                }
                break;
            }
        }
        Self::sift_up(v, pos, e);
    }

    /// Puts `e` at `pos` or above it.
    #[inline(always)]
    fn sift_up(v: &mut [E], mut pos: usize, e: E) {
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            if !e.before(&v[parent]) {
                break;
            }
            v[pos] = v[parent];
            pos = parent;
        }
        v[pos] = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Same entries in the same order as `std`'s heap over `(rank, seq, payload)`, for
        /// ranks with and without high bits, ties on rank, pushes, pops and replacements.
        #[test]
        fn min_heap_matches_binary_heap(ops in prop::collection::vec(
            (0u8..3, 0u64..6, any::<bool>()), 1..300)) {
            let mut h = MinHeap::default();
            let mut std_heap: BinaryHeap<Reverse<(Rank, u64, u32)>> = BinaryHeap::new();
            for (i, &(op, r, high)) in ops.iter().enumerate() {
                let rank = (r as u128) << if high { 70 } else { 3 };
                let seq = i as u64 ^ 0x55;
                match op {
                    0 => {
                        h.push(HeapEntry::new(rank, seq, i as u32));
                        std_heap.push(Reverse((rank, seq, i as u32)));
                    }
                    1 => {
                        let a = h.pop().map(|e| (e.rank(), e.seq, e.v));
                        let b = std_heap.pop().map(|Reverse(e)| e);
                        prop_assert_eq!(a, b);
                    }
                    _ => {
                        if h.peek().is_some() {
                            h.replace_top(HeapEntry::new(rank, seq, i as u32));
                            std_heap.pop();
                            std_heap.push(Reverse((rank, seq, i as u32)));
                        }
                    }
                }
                prop_assert_eq!(h.len(), std_heap.len());
                prop_assert_eq!(
                    h.peek().map(|e| (e.rank(), e.seq, e.v)),
                    std_heap.peek().map(|r| r.0)
                );
            }
        }
    }
}
