//! The fast engine's flow records: finding, creating, closing and forgetting flows, and
//! checking the queues that name them.

use super::*;

impl FastEngine {
    /// The arena index of flow `key` at `leaf_node`, created on first sight.
    #[inline(always)]
    pub(super) fn flow_index(&mut self, leaf_node: u32, key: u64) -> u32 {
        self.find_flow(leaf_node, key).0
    }

    /// [`Self::flow_index`], and whether the record was there before.
    #[inline(always)]
    pub(super) fn find_flow(&mut self, leaf_node: u32, key: u64) -> (u32, bool) {
        let h = flow_hash(leaf_node, key);
        let flows = &self.flows;
        if let Some(i) = self.flow_table.find(h, |i| {
            let r = flows.get(i);
            r.key == key && r.leaf_node == leaf_node
        }) {
            return (i, true);
        }
        (self.new_flow(h, leaf_node, key), false)
    }

    /// A record for a flow seen for the first time (hash `h`).
    #[cold]
    #[inline(never)]
    pub(super) fn new_flow(&mut self, h: u64, leaf_node: u32, key: u64) -> u32 {
        // Before the record is taken, so the refill does not index the new flow too.
        if self.flow_table.full() && 2 * self.stale_entries() > self.flow_table.occupied() {
            self.rebuild_flow_table();
        }
        let i = match self.free_flows.pop() {
            Some(i) => {
                // A closed flow's record: its generation goes on, and its finish tag's slot
                // in a fair leaf (kept by the record) starts again from zero.
                let old = *self.flows.get(i);
                if old.fair != NO {
                    self.fair_last[old.fair as usize] = 0;
                }
                *self.flows.get_mut(i) = FlowRec {
                    key,
                    leaf_node,
                    fair: old.fair,
                    generation: old.generation,
                    ..FlowRec::default()
                };
                i
            }
            None => self.flows.push(FlowRec {
                key,
                leaf_node,
                fair: NO,
                ..FlowRec::default()
            }),
        };
        let flows = &self.flows;
        self.flow_table.insert(h, i, |j| {
            let r = flows.get(j);
            flow_hash(r.leaf_node, r.key)
        });
        i
    }

    /// Forgets flow record `fi` (it holds no packet): to the free list, its handle's
    /// generation moved on. Its index entry stays, stale, until a refill: the record no
    /// longer matches its key.
    #[cold]
    #[inline(never)]
    pub(super) fn free_flow(&mut self, fi: u32) {
        let f = self.flows.get_mut(fi);
        debug_assert_eq!(
            f.held_packets, 0,
            "free_flow: flow {fi} holds packets: {f:?}"
        );
        f.leaf_node = NO;
        f.generation = f.generation.wrapping_add(1);
        self.flow_drops.remove(&fi);
        self.free_flows.push(fi);
    }

    /// Forgets flow record `fi` (idle) and opens its flow again, as new.
    #[cold]
    #[inline(never)]
    pub(super) fn renew_flow(&mut self, fi: u32) -> u32 {
        let f = *self.flows.get(fi);
        self.free_flow(fi);
        self.new_flow(flow_hash(f.leaf_node, f.key), f.leaf_node, f.key)
    }

    /// With [`EngineOptions::forget_idle_flows`], after a departure or a drop of flow `fi`
    /// at leaf `leaf`: see [`Self::forget_idle`].
    #[inline(always)]
    pub(super) fn forget_if_idle(&mut self, fi: u32, leaf: u32) {
        if self.options.forget_idle_flows {
            self.forget_idle(fi, leaf);
        }
    }

    /// Whether idle flow `fi` is done with: nothing it keeps changes its next packet's
    /// treatment. At a first-come first-served leaf, always; at a fair leaf, once the leaf's
    /// virtual time has reached the flow's finish tag (its next packet's start tag is then
    /// the virtual time, as a new flow's).
    pub(super) fn finished(&self, fi: u32) -> bool {
        let f = self.flows.get(fi);
        f.held_packets == 0
            && (f.fair == NO
                || self.fair_last[f.fair as usize] <= self.nodes[f.leaf_node as usize].vtime)
    }

    /// [`EngineOptions::forget_idle_flows`]: flow `fi` (just sent or dropped a packet at
    /// leaf `leaf`) is forgotten if idle and [`Self::finished`]; an idle fair flow not
    /// finished yet joins its leaf's `idle_fair` list. Then the oldest few of that list
    /// that are finished (their leaf's virtual time has moved on) are forgotten, or all of
    /// them when the leaf is empty: flows go idle about in the order of their finish tags,
    /// so a list's front is finished first (O(1) a departure, amortized). An entry is stale
    /// once its flow has sent again or been forgotten (generation): it is dropped.
    #[inline(never)]
    pub(super) fn forget_idle(&mut self, fi: u32, leaf: u32) {
        let f = self.flows.get(fi);
        if !self.leaves[leaf as usize].fair {
            if f.held_packets == 0 {
                self.free_flow(fi);
            }
            return;
        }
        if f.held_packets == 0 {
            if self.finished(fi) {
                self.free_flow(fi);
            } else {
                let generation = f.generation;
                self.idle_fair
                    .entry(leaf)
                    .or_default()
                    .push_back((fi, generation));
            }
        }
        let Some(mut list) = self.idle_fair.remove(&leaf) else {
            return;
        };
        // A few a departure; all once the leaf is empty (its virtual time has then passed
        // every finish tag): each entry is looked at about once.
        let budget = if self.leaves[leaf as usize].held_packets == 0 {
            usize::MAX
        } else {
            4
        };
        for _ in 0..budget {
            let Some(&(g, generation)) = list.front() else {
                break;
            };
            let f = self.flows.get(g);
            if f.generation != generation || f.held_packets != 0 {
                list.pop_front();
            } else if self.finished(g) {
                list.pop_front();
                self.free_flow(g);
            } else {
                break;
            }
        }
        self.idle_fair.insert(leaf, list);
    }

    /// Entries of the flow index left by closed flows: every open flow has one entry, and
    /// every flow closed since the last refill left one.
    pub(super) fn stale_entries(&self) -> usize {
        self.flow_table.occupied() - self.open_flows()
    }

    /// Flows open (seen and not closed): the flow records in use.
    pub fn open_flows(&self) -> usize {
        self.flows.len as usize - self.free_flows.len()
    }

    /// The flow index anew from the open flows' records, without closed flows' entries
    /// (when they are at least half of a full index: O(1) a close, amortized).
    #[cold]
    #[inline(never)]
    pub(super) fn rebuild_flow_table(&mut self) {
        let FastEngine {
            flows, flow_table, ..
        } = self;
        let hash = |i: u32| {
            let r = flows.get(i);
            flow_hash(r.leaf_node, r.key)
        };
        let open = (0..flows.len).filter(|&i| flows.get(i).leaf_node != NO);
        flow_table.refill(open.map(|i| (hash(i), i)), hash);
    }

    /// The leaf node of the flow record queue `q` names (`NO` if none, or closed).
    #[inline(always)]
    pub(super) fn owner(&self, q: &FlowQueue) -> u32 {
        if q.flow < self.flows.len {
            self.flows.get(q.flow).leaf_node
        } else {
            NO
        }
    }

    /// A queue of this engine names an open flow of its leaf (`owner`: [`Self::owner`]).
    /// Checked in release builds too: the record is read anyway, and a foreign or closed
    /// queue would otherwise count packets in a wrong flow. (The generation is read here,
    /// not with `owner`: carrying it through `enqueue_flow_batch`'s staging cost ~12
    /// instructions a packet.)
    #[inline(always)]
    pub(super) fn check_queue(&self, q: &FlowQueue, owner: u32) {
        assert!(
            owner == q.node && self.flows.get(q.flow).generation == q.generation,
            "queue {q:?} was not opened by this engine, or its flow was closed (the record \
             belongs to node {owner})"
        );
    }

    /// Checks that every flow's holdings equal the sum over the held slots, and the
    /// classes' lists and counts their packets (debug builds).
    pub(super) fn debug_check_holdings(&self) {
        // Small engines only (the property tests): it scans every slot.
        if !cfg!(debug_assertions) || self.flows.len > 64 || self.slots.len() > 512 {
            return;
        }
        // On the stack (no allocation per packet, even in a debug daemon): a bitmap of the
        // free slots and the sums per flow.
        let mut free = [0u64; 512 / 64];
        for &i in &self.free {
            free[i as usize / 64] |= 1 << (i % 64);
        }
        let mut sum = [(0u64, 0u64); 64];
        for (i, s) in self.slots.iter().enumerate() {
            if free[i / 64] & (1 << (i % 64)) == 0 {
                let e = &mut sum[s.flow as usize];
                e.0 += 1;
                e.1 += s.bytes as u64;
            }
        }
        // The parked list: exactly the slots marked parked, each holding a reservation, and
        // per class as many of them holding its reservation as `class_parked` counts.
        // (Policies of up to 64 classes: the counts are on the stack too.)
        let mut parked = [0u32; 64];
        let classes = self.class_parked.len().min(64);
        let (mut at, mut prev, mut listed) = (self.park_head, NO, 0usize);
        while at != NO {
            let s = &self.slots[at as usize];
            debug_assert!(
                s.flags & PARKED != 0 && s.out != 0 && self.park_prev[at as usize] == prev,
                "slot {at} on the parked list: flags {:#x}, out {:#b}, prev {} (want {prev})",
                s.flags,
                s.out,
                self.park_prev[at as usize]
            );
            for (j, &x) in self.shaping[at as usize].as_slice().iter().enumerate() {
                if s.out & (1 << j) != 0 && x.index() < classes {
                    parked[x.index()] += 1;
                }
            }
            listed += 1;
            (prev, at) = (at, self.park_next[at as usize]);
        }
        let marked = (0..self.slots.len())
            .filter(|&i| free[i / 64] & (1 << (i % 64)) == 0)
            .filter(|&i| self.slots[i].flags & PARKED != 0)
            .count();
        debug_assert!(
            listed == marked && parked[..classes] == self.class_parked[..classes],
            "parked list: {listed} slots listed, {marked} marked; per class {:?}, counted {:?}",
            &parked[..classes],
            &self.class_parked[..classes]
        );
        // Each class's released list: exactly the packets in the tree it released.
        for c in 0..classes {
            let (mut at, mut prev, mut n) = (self.released_head[c], NO, 0u32);
            while at != NO {
                debug_assert!(
                    self.slots[at as usize].from == c as u32 && self.park_prev[at as usize] == prev,
                    "slot {at} on class {c}'s released list: from {}, prev {} (want {prev})",
                    self.slots[at as usize].from,
                    self.park_prev[at as usize]
                );
                n += 1;
                (prev, at) = (at, self.park_next[at as usize]);
            }
            debug_assert_eq!(
                n, self.class_out[c],
                "class {c}: {n} packets on its released list, {} counted out",
                self.class_out[c]
            );
        }
        // `class_backlog`: the packets in the classes' queues, the reservations held, and
        // the released packets in the tree whose class took their reservation back; zero
        // only when no class is busy.
        let mut backlog: usize = self.classes.iter().map(|q| q.held as usize).sum();
        for i in (0..self.slots.len()).filter(|&i| free[i / 64] & (1 << (i % 64)) == 0) {
            let s = &self.slots[i];
            backlog += s.out.count_ones() as usize;
            let path = self.shaping[i].as_slice();
            let j = path.iter().position(|&x| s.from != NO && x.get() == s.from);
            let taken = j.is_some_and(|j| s.out & (1 << j) == 0);
            debug_assert_eq!(
                taken,
                s.flags & TAKEN_BACK != 0,
                "slot {i}: released by {}, out {:#b}, flags {:#x}",
                s.from,
                s.out,
                s.flags
            );
            backlog += taken as usize;
        }
        debug_assert_eq!(
            backlog, self.class_backlog,
            "class backlog: {backlog} packets queued, reservations and taken back, {} counted",
            self.class_backlog
        );
        debug_assert!(
            self.class_backlog != 0 || self.classes.iter().all(|q| !q.busy()),
            "no class backlog counted, but a class is busy"
        );
        for i in 0..self.flows.len {
            let f = self.flows.get(i);
            let (p, b) = sum[i as usize];
            debug_assert!(
                (f.held_packets as u64, f.held_bytes as u64) == (p, b),
                "flow {i} ({:?}) holds {}/{} but its slots sum to {p}/{b}",
                f,
                f.held_packets,
                f.held_bytes
            );
        }
    }
}
