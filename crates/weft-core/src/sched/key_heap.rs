//! A 4-ary min-heap of `(key, seq, payload)` entries whose keys are compared on a circle:
//! the head engine's set of a node's children.
//!
//! **What.** Keys are `u64` compared by wrapping difference (`a` before `b` when `a - b`,
//! taken modulo 2⁶⁴, is negative as an `i64`), then by `seq`. A `wfq` node's keys are start
//! tags, which grow without bound; compared this way they keep their order for ever as long
//! as the keys held at once span less than 2⁶³, and a `wfq` node's children's start tags
//! lie within one packet's cost of the virtual time (see the head engine's module doc).
//! An entry is 24 bytes instead of [`super::heap::MinHeap`]'s 32, and a comparison is a
//! subtraction and one 128-bit comparison of `(difference, seq)` against `(0, seq)`.
//!
//! **Invariant.** `v[i]` is not after any of its children `v[4i + 1] ..= v[4i + 4]`.
//!
//! **Cost.** The 4-ary heap of [`super::heap`] (one implementation for both entry types):
//! push and pop O(log₄ n) levels of three comparisons; no allocation once the vector has
//! grown to its peak.

use super::heap::{Heap, Ordered};

/// One entry: a child's key, the arrival number that breaks ties, the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct KeyEntry {
    /// Compared on the circle (module doc).
    pub key: u64,
    /// Tie break: smaller first.
    pub seq: u64,
    /// The child's node id.
    pub v: u32,
}

impl KeyEntry {
    #[inline(always)]
    pub(super) fn new(key: u64, seq: u64, v: u32) -> KeyEntry {
        KeyEntry { key, seq, v }
    }

    /// `(key, seq)` strictly before `o`'s, keys compared on the circle.
    #[inline(always)]
    pub(super) fn before(&self, o: &KeyEntry) -> bool {
        let d = self.key.wrapping_sub(o.key) as i64;
        // (d, seq) < (0, o.seq) as one 128-bit comparison: d · 2⁶⁴ + seq < o.seq.
        (((d as i128) << 64) | self.seq as i128) < o.seq as i128
    }
}

impl Ordered for KeyEntry {
    #[inline(always)]
    fn before(&self, o: &KeyEntry) -> bool {
        KeyEntry::before(self, o)
    }
}

/// The heap (see the module doc): [`super::heap::Heap`] of [`KeyEntry`].
pub(crate) type KeyHeap = Heap<KeyEntry>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The order of `std`'s heap over `(key - base, seq, payload)` while the keys held
        /// span less than 2⁶³ around a base near the end of the circle (so they wrap), with
        /// ties on keys, pushes, pops and replacements.
        #[test]
        fn key_heap_matches_binary_heap_across_the_wrap(
            base in prop_oneof![Just(u64::MAX - 3), Just(0u64), any::<u64>()],
            ops in prop::collection::vec((0u8..3, 0u64..8, any::<bool>()), 1..300)) {
            let mut h = KeyHeap::default();
            let mut std_heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
            for (i, &(op, r, far)) in ops.iter().enumerate() {
                let off = if far { r << 59 } else { r };
                let key = base.wrapping_add(off);
                let seq = i as u64 ^ 0x55;
                match op {
                    0 => {
                        h.push(KeyEntry::new(key, seq, i as u32));
                        std_heap.push(Reverse((off, seq, i as u32)));
                    }
                    1 => {
                        let a = h.pop().map(|e| (e.key.wrapping_sub(base), e.seq, e.v));
                        let b = std_heap.pop().map(|Reverse(e)| e);
                        prop_assert_eq!(a, b);
                    }
                    _ => {
                        if h.peek().is_some() {
                            h.replace_top(KeyEntry::new(key, seq, i as u32));
                            std_heap.pop();
                            std_heap.push(Reverse((off, seq, i as u32)));
                        }
                    }
                }
                prop_assert_eq!(h.len(), std_heap.len());
                prop_assert_eq!(
                    h.peek().map(|e| (e.key.wrapping_sub(base), e.seq, e.v)),
                    std_heap.peek().map(|r| r.0)
                );
            }
        }
    }

    #[test]
    fn keys_compare_on_the_circle() {
        let a = KeyEntry::new(u64::MAX, 9, 0);
        let b = KeyEntry::new(1, 0, 1);
        assert!(a.before(&b), "MAX is two before 1 on the circle");
        assert!(!b.before(&a));
        let c = KeyEntry::new(5, 1, 2);
        let d = KeyEntry::new(5, 2, 3);
        assert!(
            c.before(&d) && !d.before(&c),
            "equal keys: the smaller seq first"
        );
        assert!(!c.before(&c), "strict");
    }
}
