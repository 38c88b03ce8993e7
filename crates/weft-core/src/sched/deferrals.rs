//! Per-flow deferral records of the fast engine (Loom §4.2.2's per-flow order across the
//! shaping queue): for each flow with packets in the shaping queue, each such packet's
//! position in its flow and release time, so that a later packet of the flow is never sent
//! ahead of them.
//!
//! Layout: one pool of records linked into a list per flow, oldest first (a hash map from
//! flow to its list's first and last record, and the latest position and release time among
//! its records), and a free list. No allocation in steady state: the pool grows to the most
//! packets deferred at once and keeps its capacity; the map keeps its table. (A `Vec` per
//! flow, recycled through a spare list, did not: a recycled vector met a flow with more
//! packets to defer than it had room for, and grew; `tests/steady_alloc.rs`.)
//!
//! Invariants: a flow is in the map exactly when its list is non-empty; every record is in
//! one flow's list or in the free list; a list is in the order of its pushes; a list's
//! `newest` and `latest` are the latest position (wrapping) and release time among its
//! records. Cost: push O(1); the bound for a packet after every deferred one of its flow
//! (the usual question) O(1), else a walk of the flow's list; removing walks the list up to
//! the record, usually the first (a flow's packets leave the shaping queue in their order),
//! and walks it all only when the record held the list's newest position or latest time.
//! Hand-written (an intrusive list in a slab; nothing to take from a crate). The twin test
//! below compares it with a map of vectors.

use rustc_hash::FxHashMap;

use super::pool::{Linked, Pool, NIL};

/// `a` comes before `b` in a flow's (wrapping) sequence of positions.
fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// One deferred packet.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// The packet's position in its flow (`Slot::fseq`).
    fseq: u32,
    /// The next record of the same list, or `NIL`.
    next: u32,
    /// Its release time, ps.
    until: u64,
}

impl Linked for Record {
    fn next(&self) -> u32 {
        self.next
    }

    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

/// A flow's list of records.
#[derive(Debug, Clone, Copy)]
struct List {
    first: u32,
    last: u32,
    /// The latest position among its records (in wrapping order).
    newest: u32,
    /// The latest release time among its records, ps.
    latest: u64,
}

/// The deferral records of every flow (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct Deferrals {
    /// Flow index → its list.
    lists: FxHashMap<u32, List>,
    pool: Pool<Record>,
}

impl Deferrals {
    /// No flow has a deferred packet.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The latest release time of the deferred packets of `flow` before position `fseq` in
    /// it (0 if none): a packet at `fseq` leaves no earlier, to keep the flow's order.
    #[inline]
    pub fn until_before(&self, flow: u32, fseq: u32) -> u64 {
        let Some(l) = self.lists.get(&flow) else {
            return 0;
        };
        if seq_before(l.newest, fseq) {
            // Every deferred packet of the flow is before this one.
            return l.latest;
        }
        let mut until = 0;
        let mut at = l.first;
        while at != NIL {
            let r = &self.pool[at];
            if seq_before(r.fseq, fseq) {
                until = until.max(r.until);
            }
            at = r.next;
        }
        until
    }

    /// `(fseq, until)` of each deferred packet of `flow`, in the order deferred (tests).
    #[cfg(test)]
    fn of(&self, flow: u32) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut at = self.lists.get(&flow).map_or(NIL, |l| l.first);
        std::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let r = self.pool[at];
            at = r.next;
            Some((r.fseq, r.until))
        })
    }

    /// Records a deferred packet of `flow` (after those recorded).
    pub fn push(&mut self, flow: u32, fseq: u32, until: u64) {
        let r = Record {
            fseq,
            next: NIL,
            until,
        };
        let at = self.pool.take(r);
        match self.lists.entry(flow) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let l = o.get_mut();
                self.pool[l.last].next = at;
                l.last = at;
                if seq_before(l.newest, fseq) {
                    l.newest = fseq;
                }
                l.latest = l.latest.max(until);
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(List {
                    first: at,
                    last: at,
                    newest: fseq,
                    latest: until,
                });
            }
        }
    }

    /// Forgets the deferred packet `fseq` of `flow` (released), if recorded.
    pub fn remove(&mut self, flow: u32, fseq: u32) {
        let Some(list) = self.lists.get_mut(&flow) else {
            return;
        };
        let mut prev = NIL;
        let mut at = list.first;
        while at != NIL && self.pool[at].fseq != fseq {
            prev = at;
            at = self.pool[at].next;
        }
        if at == NIL {
            return;
        }
        let Record { next, until, .. } = self.pool[at];
        if prev == NIL {
            list.first = next;
        } else {
            self.pool[prev].next = next;
        }
        if next == NIL {
            list.last = prev;
        }
        self.pool.give(at);
        if list.first == NIL {
            self.lists.remove(&flow);
        } else if fseq == list.newest || until == list.latest {
            // The record held the list's newest position or latest time: find them again.
            let (mut newest, mut latest) = (self.pool[list.first].fseq, 0);
            let mut at = list.first;
            while at != NIL {
                let r = &self.pool[at];
                if seq_before(newest, r.fseq) {
                    newest = r.fseq;
                }
                latest = latest.max(r.until);
                at = r.next;
            }
            (list.newest, list.latest) = (newest, latest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The same records per flow as a map of vectors, through pushes and removals
        /// (present or not) on a few flows.
        #[test]
        fn deferrals_match_a_map_of_vectors(ops in prop::collection::vec(
            (any::<bool>(), 0u32..4, 0u32..12, any::<u64>()), 1..300)) {
            let mut d = Deferrals::default();
            let mut model: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
            for &(push, flow, fseq, until) in &ops {
                if push {
                    d.push(flow, fseq, until);
                    model.entry(flow).or_default().push((fseq, until));
                } else {
                    d.remove(flow, fseq);
                    // The oldest record of that position goes (as the list finds it).
                    if let Some(v) = model.get_mut(&flow) {
                        if let Some(at) = v.iter().position(|e| e.0 == fseq) {
                            v.remove(at);
                        }
                        if v.is_empty() {
                            model.remove(&flow);
                        }
                    }
                }
                prop_assert_eq!(d.is_empty(), model.is_empty());
                for flow in 0..4 {
                    let got: Vec<(u32, u64)> = d.of(flow).collect();
                    let want = model.get(&flow).cloned().unwrap_or_default();
                    prop_assert_eq!(&got, &want, "flow {}", flow);
                    if let Some(l) = d.lists.get(&flow) {
                        let newest = want
                            .iter()
                            .map(|e| e.0)
                            .reduce(|a, b| if seq_before(a, b) { b } else { a });
                        prop_assert_eq!(Some(l.newest), newest);
                        prop_assert_eq!(Some(l.latest), want.iter().map(|e| e.1).max());
                    }
                    for before in [0, 3, 6, 12, 13, u32::MAX - 2] {
                        let latest = want
                            .iter()
                            .filter(|e| seq_before(e.0, before))
                            .map(|e| e.1)
                            .max()
                            .unwrap_or(0);
                        prop_assert_eq!(d.until_before(flow, before), latest);
                    }
                }
            }
            prop_assert!(d.pool.made() <= ops.len());
        }
    }
}
