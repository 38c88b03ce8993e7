//! A timing wheel for the global shaping queue (Loom §4.2.2): entries `(time ps, seq, slot)`
//! leave in exact `(time, seq)` order, the order of a binary heap over the same entries (its
//! twin in the property test below and in `tests/engine_twins.rs` through the engines).
//!
//! Layout: `SLOTS` buckets of `2^SHIFT` ps each cover a horizon ahead of the cursor; a bucket
//! is an unsorted list linked through one pool of entries shared by all buckets (a `u32`
//! head per bucket), and a bitmap of non-empty buckets finds the next one with a few
//! find-first-set instructions. Entries already reached (their bucket is behind the cursor)
//! wait in a small binary heap `near`, which is always non-empty while the wheel is not, so
//! the earliest entry is `near`'s top. Entries beyond the horizon wait in `far` and move into
//! buckets as the cursor approaches them.
//!
//! Invariants: every entry in `near` is earlier than every entry in a bucket or in `far`;
//! bucket `i` holds only ticks in `[cursor, cursor + SLOTS)` congruent to `i`; `far` holds
//! only ticks at or beyond `cursor + SLOTS` at the time they were pushed, and none below the
//! cursor. Cost: push O(1) into a bucket (O(log n) into `near` or `far`); pop O(log k) with k
//! the entries of the buckets reached. No allocation in steady state: the pool and the two
//! heaps grow to the most entries held at once and keep their capacity (a `Vec` per bucket
//! did too, but 4,096 of them each had to meet its own peak, and a long run still grew one
//! now and then; `tests/steady_alloc.rs`). Hand-written: no crate offers an exact-order timing wheel with stable
//! tie-breaking.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::pool::{Linked, Pool, NIL};

/// `(time ps, seq, payload)`.
pub(crate) type TimedEntry = (u64, u64, u32);

/// Bucket width: 2^16 ps (65.5 ns).
const SHIFT: u32 = 16;
/// Buckets: 4,096 (a horizon of 268 µs).
const SLOTS: usize = 4096;
const WORDS: usize = SLOTS / 64;

/// A bucket's entry and the next of its bucket (or of the pool's free list).
#[derive(Debug, Clone, Copy)]
struct Node {
    e: TimedEntry,
    next: u32,
}

impl Linked for Node {
    fn next(&self) -> u32 {
        self.next
    }

    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

/// The timing wheel (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct TimingWheel {
    /// Per bucket: the index in `pool` of its first entry, or `NIL`.
    buckets: Vec<u32>,
    /// The buckets' entries.
    pool: Pool<Node>,
    /// Bit `i` set when bucket `i` is non-empty.
    bits: [u64; WORDS],
    /// Tick (time >> SHIFT) of the first bucket not yet drained into `near`.
    cursor: u64,
    near: BinaryHeap<Reverse<TimedEntry>>,
    far: BinaryHeap<Reverse<TimedEntry>>,
    /// Entries in buckets.
    in_buckets: usize,
}

impl Default for TimingWheel {
    fn default() -> Self {
        TimingWheel {
            buckets: vec![NIL; SLOTS],
            pool: Pool::default(),
            bits: [0; WORDS],
            cursor: 0,
            near: BinaryHeap::new(),
            far: BinaryHeap::new(),
            in_buckets: 0,
        }
    }
}

impl TimingWheel {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.near.len() + self.in_buckets + self.far.len()
    }

    /// The earliest entry.
    pub(crate) fn peek(&self) -> Option<TimedEntry> {
        self.near.peek().map(|r| r.0)
    }

    /// Adds an entry.
    pub(crate) fn push(&mut self, e: TimedEntry) {
        let tick = e.0 >> SHIFT;
        if tick < self.cursor {
            self.near.push(Reverse(e));
        } else if tick < self.cursor + SLOTS as u64 {
            self.put(tick, e);
        } else {
            self.far.push(Reverse(e));
        }
        if self.near.is_empty() {
            self.advance();
        }
    }

    /// Removes and returns the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<TimedEntry> {
        let e = self.near.pop()?.0;
        if self.near.is_empty() {
            self.advance();
        }
        Some(e)
    }

    fn put(&mut self, tick: u64, e: TimedEntry) {
        let i = (tick as usize) & (SLOTS - 1);
        self.buckets[i] = self.pool.take(Node {
            e,
            next: self.buckets[i],
        });
        self.bits[i / 64] |= 1 << (i % 64);
        self.in_buckets += 1;
    }

    /// Moves the cursor to the next non-empty bucket (or `far`'s first entry) and drains it
    /// into `near`, until `near` holds something or the wheel is empty.
    fn advance(&mut self) {
        while self.near.is_empty() && self.len() > 0 {
            if self.in_buckets == 0 {
                // Jump to the far entries' tick and bring the new horizon into the buckets.
                let tick = self.far.peek().expect("entries left").0 .0 >> SHIFT;
                self.cursor = self.cursor.max(tick);
                self.refill_from_far();
                continue;
            }
            let tick = self.next_bucket_tick();
            let i = (tick as usize) & (SLOTS - 1);
            // The bucket's entries go to `near`, their pool entries to the free list.
            let mut at = std::mem::replace(&mut self.buckets[i], NIL);
            while at != NIL {
                let Node { e, next } = self.pool[at];
                self.near.push(Reverse(e));
                self.pool.give(at);
                self.in_buckets -= 1;
                at = next;
            }
            self.bits[i / 64] &= !(1 << (i % 64));
            self.cursor = tick + 1;
            self.refill_from_far();
        }
        debug_assert!(
            self.len() == 0 || !self.near.is_empty(),
            "timing wheel: entries left but none reachable (cursor {}, buckets {}, far {})",
            self.cursor,
            self.in_buckets,
            self.far.len()
        );
    }

    /// Tick of the first non-empty bucket at or after the cursor (some bucket is non-empty).
    fn next_bucket_tick(&self) -> u64 {
        let start = (self.cursor as usize) & (SLOTS - 1);
        // Scan the bitmap from `start`, wrapping once.
        let (w0, b0) = (start / 64, start % 64);
        let first = self.bits[w0] & (!0u64 << b0);
        let offset = if first != 0 {
            first.trailing_zeros() as usize - b0
        } else {
            let mut found = None;
            for k in 1..=WORDS {
                let w = (w0 + k) % WORDS;
                let word = if k == WORDS {
                    self.bits[w] & !(!0u64 << b0)
                } else {
                    self.bits[w]
                };
                if word != 0 {
                    found = Some(k * 64 + word.trailing_zeros() as usize - b0);
                    break;
                }
            }
            found.expect("a non-empty bucket")
        };
        self.cursor + offset as u64
    }

    /// Moves far entries now within the horizon into buckets (or `near`).
    fn refill_from_far(&mut self) {
        while let Some(&Reverse(e)) = self.far.peek() {
            let tick = e.0 >> SHIFT;
            if tick >= self.cursor + SLOTS as u64 {
                break;
            }
            self.far.pop();
            if tick < self.cursor {
                self.near.push(Reverse(e));
            } else {
                self.put(tick, e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Same order as a binary heap over the same entries, for any interleaving of pushes
        /// (near, within the horizon, far beyond it) and pops.
        #[test]
        fn wheel_matches_binary_heap(ops in prop::collection::vec(
            (any::<bool>(), 0u64..4, 0u64..(1 << 30)), 1..400)) {
            let mut wheel = TimingWheel::default();
            let mut heap = BinaryHeap::new();
            let mut now = 0u64;
            for (i, &(pop, scale, dt)) in ops.iter().enumerate() {
                if pop {
                    let a = wheel.pop();
                    let b = heap.pop().map(|Reverse(e)| e);
                    prop_assert_eq!(a, b);
                    if let Some(e) = a {
                        now = now.max(e.0);
                    }
                } else {
                    // Times from "now" out to far beyond the horizon (2^16 · 4096 ps).
                    let t = now + (dt >> (10 * (3 - scale)));
                    let e = (t, i as u64, i as u32);
                    wheel.push(e);
                    heap.push(Reverse(e));
                }
                prop_assert_eq!(wheel.len(), heap.len());
                prop_assert_eq!(wheel.peek(), heap.peek().map(|r| r.0));
            }
            while let Some(Reverse(e)) = heap.pop() {
                prop_assert_eq!(wheel.pop(), Some(e));
            }
            prop_assert_eq!(wheel.pop(), None);
        }
    }

    #[test]
    fn entries_behind_the_cursor_still_come_first() {
        let mut w = TimingWheel::default();
        w.push((5 << SHIFT, 1, 1));
        assert_eq!(w.pop(), Some((5 << SHIFT, 1, 1)));
        // The cursor moved past tick 5; an earlier time still leaves first.
        w.push((9 << SHIFT, 2, 2));
        w.push((1 << SHIFT, 3, 3));
        assert_eq!(w.pop(), Some((1 << SHIFT, 3, 3)));
        assert_eq!(w.pop(), Some((9 << SHIFT, 2, 2)));
        assert_eq!(w.pop(), None);
    }
}
