//! The flow table's index: from a flow's hash to its record in the flow arena (the fast
//! engine's one hash probe per enqueue).
//!
//! Insert-only open addressing over groups of eight buckets: per bucket a one-byte tag
//! (seven hash bits the home group does not use, top bit set; 0 = free) and the `u32`
//! arena index. A key's home group comes from the hash; a probe compares the tag with all
//! eight bytes at once (SWAR: one 64-bit word), checks the records of matching buckets,
//! and moves to the next group only when this one is full. Entries are never removed one
//! at a time (a flow's record outlives its packets: it holds the flow's counters until the
//! flow is closed), so there are no tombstones, a group's occupied buckets are a prefix, and a probe stops at the first
//! group with a free bucket. The load stays at most 7/8; growing doubles the groups and
//! re-inserts every index, with the hash recomputed from the record by the caller. A closed
//! flow's entry stays (its record no longer matches the key, so lookups pass over it) until
//! the engine refills the index with the open flows alone ([`FlowIndex::refill`]); so an
//! index may appear twice, once stale, once for the flow its record now holds.
//!
//! Why by hand (hashbrown is the usual answer, and this engine used it before): hashbrown's
//! `HashTable` does the same probe but offers no way to find a key's candidate bucket
//! without reading the candidate's record. [`FlowIndex::candidate`] does, so a batch can
//! find every packet's candidate (the index's arrays, small), then read every candidate's
//! record (the flow arena, large), each pass a short loop of independent loads that the
//! processor overlaps. At 64k flows the flow record is a cache miss per packet (about a
//! third of the engine's time per packet in `perf` samples before this index); the split
//! lets `enqueue_batch` overlap those misses.
//!
//! Invariants (checked by `debug_assert!` and by the property twin in this file's tests,
//! against `std`'s `HashMap`): every inserted index is found by its hash and key; a group's
//! occupied buckets are a prefix; `len` counts them; `len * 8 <= buckets * 7`.
//!
//! Cost: 5 bytes per bucket (1.14 to 2.3 buckets per flow; a group is 40 bytes); a lookup
//! reads one group (at most two cache lines) and, 127 times in 128, only the record it
//! looks for.

/// Eight buckets: their tags (one byte each, 0 when free; a tag has its top bit set) and
/// their arena indices. Buckets fill in order, so a group's occupied buckets are a prefix.
#[derive(Debug, Clone, Copy)]
struct Group {
    tags: u64,
    slots: [u32; 8],
}

const EMPTY_GROUP: Group = Group {
    tags: 0,
    slots: [u32::MAX; 8],
};

/// The low bit of every byte.
const LO: u64 = 0x0101_0101_0101_0101;
/// The top bit of every byte.
const HI: u64 = 0x8080_8080_8080_8080;

/// See the module doc.
#[derive(Debug, Clone)]
pub(crate) struct FlowIndex {
    /// A power of two of them.
    groups: Vec<Group>,
    /// Occupied buckets.
    len: usize,
    /// `64 - log2(groups)`: the home group is the top bits of the mixed hash.
    shift: u32,
}

impl Default for FlowIndex {
    fn default() -> Self {
        FlowIndex::with_groups(2)
    }
}

/// The hash, mixed so that its top bits (the home group) and its low byte (the tag) both
/// depend on every input bit.
#[inline(always)]
fn mix(h: u64) -> u64 {
    (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

impl Group {
    /// Bytes whose tag equals `tag` (a byte's top bit set per match, lowest first). The
    /// lowest bit set is always a true match; a higher one may be a false one (the borrow of
    /// a true match below it), which the caller's key check rejects.
    #[inline(always)]
    fn matches(&self, tag: u8) -> u64 {
        let x = self.tags ^ (LO * tag as u64);
        x.wrapping_sub(LO) & !x & HI
    }

    /// Free buckets (a byte's top bit set per free bucket).
    #[inline(always)]
    fn free(&self) -> u64 {
        !self.tags & HI
    }
}

/// The bucket of the lowest byte set in `mask` (nonzero).
#[inline(always)]
fn lowest(mask: u64) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

impl FlowIndex {
    fn with_groups(groups: usize) -> FlowIndex {
        debug_assert!(groups.is_power_of_two() && groups >= 2, "{groups} groups");
        FlowIndex {
            groups: vec![EMPTY_GROUP; groups],
            len: 0,
            shift: 64 - groups.trailing_zeros(),
        }
    }

    /// Number of indices held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Buckets in use (every index inserted since the index was made or refilled).
    pub(crate) fn occupied(&self) -> usize {
        self.len
    }

    /// Whether the next insert grows the index.
    pub(crate) fn full(&self) -> bool {
        (self.len + 1) * 8 > self.buckets() * 7
    }

    /// Empties the index and inserts `entries` (hash, index): how the engine drops the
    /// entries of closed flows (an entry is never removed one by one; see the module doc).
    /// It keeps its buckets, so it grows only if `entries` fill more than 7/8 of them.
    pub(crate) fn refill(
        &mut self,
        entries: impl Iterator<Item = (u64, u32)>,
        rehash: impl Fn(u32) -> u64,
    ) {
        self.groups.fill(EMPTY_GROUP);
        self.len = 0;
        for (h, i) in entries {
            self.insert(h, i, &rehash);
        }
    }

    /// The home group and the tag of hash `h`.
    #[inline(always)]
    fn home(&self, h: u64) -> (usize, u8) {
        let m = mix(h);
        ((m >> self.shift) as usize, m as u8 | 0x80)
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.groups.len() - 1
    }

    /// The index whose record `eq` accepts, among those inserted with hash `h`.
    #[inline(always)]
    pub(crate) fn find(&self, h: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let (mut g, tag) = self.home(h);
        loop {
            let grp = &self.groups[g];
            let mut m = grp.matches(tag);
            while m != 0 {
                let s = grp.slots[lowest(m)];
                if eq(s) {
                    return Some(s);
                }
                m &= m - 1;
            }
            if grp.free() != 0 {
                return None;
            }
            g = (g + 1) & self.mask();
        }
    }

    /// The first index on `h`'s probe path whose tag matches, without reading any record:
    /// the candidate [`FlowIndex::find`] checks first, for a batch that finds every packet's
    /// candidate before it reads the candidates' records. The candidate may be another
    /// flow's (a tag matches 1 time in 128), so `None` means absent but `Some` needs
    /// checking, and `find` when the check fails.
    #[inline(always)]
    pub(crate) fn candidate(&self, h: u64) -> Option<u32> {
        let (mut g, tag) = self.home(h);
        loop {
            let grp = &self.groups[g];
            let m = grp.matches(tag);
            if m != 0 {
                return Some(grp.slots[lowest(m)]);
            }
            if grp.free() != 0 {
                return None;
            }
            g = (g + 1) & self.mask();
        }
    }

    /// Inserts `index` with hash `h` (the caller knows it is not there yet). `rehash` gives
    /// the hash of any index already inserted, for growing.
    pub(crate) fn insert(&mut self, h: u64, index: u32, rehash: impl Fn(u32) -> u64) {
        if self.full() {
            self.grow(&rehash);
        }
        self.place(h, index);
    }

    fn place(&mut self, h: u64, index: u32) {
        let (mut g, tag) = self.home(h);
        let mask = self.mask();
        loop {
            let grp = &mut self.groups[g];
            let free = grp.free();
            if free != 0 {
                let b = lowest(free);
                grp.tags |= (tag as u64) << (8 * b);
                grp.slots[b] = index;
                self.len += 1;
                return;
            }
            // (An index may be here already: a closed flow's stale entry, its record now
            // another flow's.)
            g = (g + 1) & mask;
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, rehash: &impl Fn(u32) -> u64) {
        let old = std::mem::replace(self, FlowIndex::with_groups(self.groups.len() * 2));
        for grp in &old.groups {
            let used = 8 - grp.free().count_ones() as usize;
            for &s in &grp.slots[..used] {
                self.place(rehash(s), s);
            }
        }
        debug_assert_eq!(self.len, old.len, "grow lost indices");
    }

    /// Buckets (eight per group).
    fn buckets(&self) -> usize {
        self.groups.len() * 8
    }

    /// Heap bytes held.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.groups.capacity() * std::mem::size_of::<Group>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Keys live in a side vector (the "arena"); the hash is deliberately weak (few distinct
    /// values) so that probes cross long runs of colliding buckets.
    fn hash_of(key: u64, weak: bool) -> u64 {
        if weak {
            key % 7
        } else {
            key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        }
    }

    proptest! {
        /// The twin: every lookup answers as a `HashMap` from key to arena index does, over
        /// random inserts and lookups, through several growths.
        #[test]
        fn answers_as_a_hash_map(ops in prop::collection::vec((any::<bool>(), 0u64..400), 1..600), weak in any::<bool>()) {
            let mut idx = FlowIndex::default();
            let mut arena: Vec<u64> = Vec::new();
            let mut twin: HashMap<u64, u32> = HashMap::new();
            for (insert, key) in ops {
                let h = hash_of(key, weak);
                let got = idx.find(h, |i| arena[i as usize] == key);
                prop_assert_eq!(got, twin.get(&key).copied(), "find {}", key);
                match idx.candidate(h) {
                    // Absent: no candidate either.
                    None => prop_assert_eq!(got, None),
                    // A candidate that is the key's own index is the one `find` returns.
                    Some(c) if arena[c as usize] == key => prop_assert_eq!(got, Some(c)),
                    Some(c) => prop_assert!((c as usize) < arena.len()),
                }
                if insert && got.is_none() {
                    let i = arena.len() as u32;
                    arena.push(key);
                    idx.insert(h, i, |j| hash_of(arena[j as usize], weak));
                    twin.insert(key, i);
                }
                prop_assert_eq!(idx.len(), twin.len());
                prop_assert!(idx.len() * 8 <= idx.buckets() * 7, "load above 7/8");
            }
        }
    }

    #[test]
    fn the_candidate_is_the_first_tag_match() {
        let mut idx = FlowIndex::default();
        // Two keys with the same hash: the second lands after the first.
        idx.insert(42, 0, |_| 42);
        idx.insert(42, 1, |_| 42);
        assert_eq!(idx.candidate(42), Some(0));
        assert_eq!(idx.find(42, |i| i == 1), Some(1));
        assert_eq!(idx.find(43, |_| true), None);
        assert_eq!(idx.candidate(43), None);
    }

    #[test]
    fn five_bytes_a_bucket() {
        let mut idx = FlowIndex::default();
        for i in 0..1000u32 {
            idx.insert(u64::from(i), i, u64::from);
        }
        // 1000 indices at most 7/8 full: 2,048 buckets.
        assert_eq!(idx.buckets(), 2048);
        assert_eq!(idx.heap_bytes(), 2048 * 5);
    }
}
