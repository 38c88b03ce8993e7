//! A ring buffer of `Copy` entries for the fast engine's sorted PIFOs of `fifo` nodes: the
//! subset of `VecDeque` they use, with a power-of-two capacity so an index is a mask, small
//! enough for the compiler to inline the push (`VecDeque::push_back` is an out-of-line call
//! in the enqueue path). (FIFO leaves keep a list through their slots, and the queues per
//! child of a `PerChild` node a list in one pool: see `pifo.rs` and `child_queues.rs`.)
//!
//! Invariants: `buf.len()` is 0 or a power of two; the entries are `buf[(head + i) & mask]`
//! for `i < len`. Its property test is a twin of `VecDeque`. Cost: push, pop, back O(1);
//! `insert` (a packet re-entering from the shaping queue) O(len); growth doubles the buffer
//! (no allocation once it has grown to its peak). Size: 24 bytes (a boxed slice, not a
//! `Vec`: the capacity is the length).

/// The ring (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ring<T: Copy + Default> {
    buf: Box<[T]>,
    /// Index in `buf` of the first entry.
    head: u32,
    /// Entries.
    len: u32,
}

impl<T: Copy + Default> Ring<T> {
    pub(super) fn new() -> Ring<T> {
        Ring {
            buf: Box::default(),
            head: 0,
            len: 0,
        }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.buf.len().wrapping_sub(1)
    }

    /// Index in `buf` of entry `i`.
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        (self.head as usize + i) & self.mask()
    }

    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// The first entry.
    #[inline(always)]
    pub(super) fn front(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.buf[self.head as usize])
    }

    #[inline(always)]
    pub(super) fn back(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.buf[self.at(self.len as usize - 1)])
    }

    #[inline(always)]
    pub(super) fn push_back(&mut self, x: T) {
        if self.len as usize == self.buf.len() {
            self.grow();
        }
        let i = self.at(self.len as usize);
        self.buf[i] = x;
        self.len += 1;
    }

    #[inline(always)]
    pub(super) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let x = self.buf[self.head as usize];
        self.head = ((self.head as usize + 1) & self.mask()) as u32;
        self.len -= 1;
        Some(x)
    }

    /// Drops the first entry (there is one) and returns the new first.
    #[inline(always)]
    pub(super) fn pop_front_then_front(&mut self) -> Option<T> {
        debug_assert!(self.len > 0, "pop_front_then_front on an empty ring");
        self.head = ((self.head as usize + 1) & self.mask()) as u32;
        self.len -= 1;
        (self.len > 0).then(|| self.buf[self.head as usize])
    }

    /// The number of leading entries for which `pred` holds (they must come first).
    pub(super) fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len as usize);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.buf[self.at(mid)]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Inserts `x` before entry `at` (`at ≤ len`).
    pub(super) fn insert(&mut self, at: usize, x: T) {
        debug_assert!(at <= self.len(), "ring insert at {at} of {}", self.len);
        self.push_back(x);
        let mut i = self.len as usize - 1;
        while i > at {
            let (to, from) = (self.at(i), self.at(i - 1));
            self.buf[to] = self.buf[from];
            i -= 1;
        }
        let to = self.at(at);
        self.buf[to] = x;
    }

    /// Doubles the buffer (at least 4 entries), the entries first, in order.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.buf.len() * 2).max(4);
        let mut buf = Vec::with_capacity(cap);
        buf.extend((0..self.len as usize).map(|i| self.buf[self.at(i)]));
        buf.resize(cap, T::default());
        self.buf = buf.into_boxed_slice();
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The same entries as a `VecDeque` under pushes, pops (alone and followed by a
        /// peek) and sorted inserts, across growth and wrap-around.
        #[test]
        fn ring_matches_vec_deque(ops in prop::collection::vec((0u8..5, 0u32..100), 1..400)) {
            let mut r: Ring<u32> = Ring::new();
            let mut d: VecDeque<u32> = VecDeque::new();
            for &(op, x) in &ops {
                match op {
                    0 | 1 => {
                        r.push_back(x);
                        d.push_back(x);
                    }
                    2 => prop_assert_eq!(r.pop_front(), d.pop_front()),
                    3 if !d.is_empty() => {
                        d.pop_front();
                        prop_assert_eq!(r.pop_front_then_front(), d.front().copied());
                    }
                    _ => {
                        let at = d.len().min(x as usize % (d.len() + 1));
                        r.insert(at, x);
                        d.insert(at, x);
                    }
                }
                prop_assert_eq!(r.len(), d.len());
                prop_assert_eq!(r.front(), d.front());
                prop_assert_eq!(r.back(), d.back());
            }
            let mut a = Vec::new();
            while let Some(x) = r.pop_front() {
                a.push(x);
            }
            prop_assert_eq!(a, Vec::from(d));
        }

        /// Sorted inserts at the partition point (a re-entry's path) agree with `VecDeque`'s.
        #[test]
        fn sorted_inserts_match(xs in prop::collection::vec(0u32..50, 1..200), pops in 0usize..50) {
            let mut r: Ring<u32> = Ring::new();
            let mut d: VecDeque<u32> = VecDeque::new();
            for (i, &x) in xs.iter().enumerate() {
                let (pr, pd) = (r.partition_point(|&e| e <= x), d.partition_point(|&e| e <= x));
                prop_assert_eq!(pr, pd);
                r.insert(pr, x);
                d.insert(pd, x);
                if i == pops {
                    r.pop_front();
                    d.pop_front();
                }
            }
            prop_assert_eq!(r.len(), d.len());
            let mut a = Vec::new();
            while let Some(x) = r.pop_front() {
                a.push(x);
            }
            prop_assert_eq!(a, Vec::from(d));
        }
    }
}
