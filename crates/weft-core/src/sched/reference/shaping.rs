//! The reference engine's shaping classes (see the parent module and docs/scheduling.md,
//! "Shaping"): which class holds a popped packet back, each class's own queue (a PIFO tree
//! of the policy's shape, with its own virtual time at fair nodes), the reservations of the
//! packets a class has released or passed, the tokens a class takes back from packets its
//! policy ranks after its queue's first, and the global shaping queue that releases each
//! class's first packet when its tokens are due. Written plainly: sorted maps, a scan of
//! every held packet where the fast engine keeps lists; it is the yardstick, not fast.

use super::*;

impl ReferenceEngine {
    /// Ranks a packet its class's queue took at admission at the `wfq`, `rr` and `drr`
    /// nodes of its path, as it is released into the tree: ranked at admission, a packet
    /// the queue moved ahead of others would carry a tag far ahead of the node's virtual
    /// time (the child was charged for everything queued behind it), and the class,
    /// saturated and so releasing one packet at a time, would stall behind it.
    pub(super) fn rank_on_release(&mut self, slot: usize) {
        let h = self.slab[slot].as_ref().expect("held");
        let (leaf_node, bytes) = (h.leaf_node, h.pkt.bytes.saturating_add(self.overhead));
        let mut ranks = h.ranks.clone();
        let mut child = leaf_node;
        let mut i = 1;
        while let Some(n) = self.parent(child) {
            if matches!(
                self.prog.nodes[n as usize].algo,
                Algo::Wfq | Algo::Rr | Algo::Drr
            ) {
                ranks[i] = self.fair_rank(n, child, bytes);
            }
            child = n;
            i += 1;
        }
        let h = self.slab[slot].as_mut().expect("held");
        h.ranks = ranks;
        h.unranked = false;
    }

    /// Where an admitted packet goes, as a position on its shaping path: straight into the
    /// queue of a busy class ([`Self::class_busy`]), or (`None`) into the tree. By default a
    /// packet takes a busy class's queue at admission when it passes that one class only
    /// and the class nests with no other ([`Program::nested_shapers`]): its queue then ranks
    /// the packet against those it holds, instead of the packet waiting in the tree while
    /// the class gives its tokens to the packets it holds. With
    /// [`EngineOptions::limited_fast_path`], the first busy class of any path.
    pub(super) fn admission_class(&self, shaping: ShapingPath) -> Option<usize> {
        let path = shaping.as_slice();
        if self.options.limited_fast_path {
            return path.iter().position(|&c| self.class_busy(c.get()));
        }
        match *path {
            [c] if !self.nested[c.index()] && self.class_busy(c.get()) => Some(0),
            _ => None,
        }
    }

    /// Whether shaping class `c` holds packets, or has released packets not yet sent (in the
    /// tree or waiting at an outer class): a packet of the class that has not been through
    /// its queue then queues behind them.
    pub(super) fn class_busy(&self, c: u32) -> bool {
        let q = &self.classes[c as usize];
        q.held > 0 || q.out > 0 || self.buckets[c as usize].reserved()
    }

    /// The shaping class that holds back a popped packet at `now`, if one does: the first on
    /// its path (leaf side first) that lacks the tokens for it, or that is busy
    /// ([`Self::class_busy`]) and has not released it before.
    pub(super) fn holding_class(&self, slot: usize, now: u64) -> Option<usize> {
        let h = self.slab[slot].as_ref().expect("held");
        let bytes = h.pkt.bytes.saturating_add(self.overhead);
        h.shaping.as_slice().iter().enumerate().find_map(|(i, &c)| {
            let passed = h.passed & (1 << i) != 0;
            let short = self.buckets[c.index()].earliest(bytes, now) > now;
            (short || (!passed && self.class_busy(c.get()))).then_some(i)
        })
    }

    /// Before a packet waits at the `i`-th class of its path: it reserves the tokens of the
    /// classes before it there that passed it and nest inside that class (it holds them while
    /// it waits, as if they had released it), so those classes queue their next packets
    /// behind it in their own order instead of sending them on to wait beside it. Returns the
    /// positions reserved (their entries in the shaping queue are to be made again).
    pub(super) fn reserve_inner(&mut self, slot: usize, i: usize) -> u8 {
        let h = self.slab[slot].as_ref().expect("held");
        let (path, out) = (h.shaping, h.out);
        let bytes = h.pkt.bytes.saturating_add(self.overhead);
        let c = path.as_slice()[i].get();
        let mut done = 0u8;
        for (j, &x) in path.as_slice()[..i].iter().enumerate() {
            if out & (1 << j) == 0 && self.inner(x.get(), c) {
                let b = &mut self.buckets[x.index()];
                b.reserve(bytes);
                done |= 1 << j;
            }
        }
        let h = self.slab[slot].as_mut().expect("held");
        h.out |= done;
        h.passed |= done;
        done
    }

    /// [`Self::schedule`] for the classes at the positions `mask` of the packet's path, leaf
    /// side first.
    pub(super) fn schedule_positions(&mut self, slot: usize, mask: u8, now: u64) {
        let path = self.slab[slot].as_ref().expect("held").shaping;
        for (j, &x) in path.as_slice().iter().enumerate() {
            if mask & (1 << j) != 0 {
                self.schedule(x.get(), now);
            }
        }
    }

    /// Whether shaping class `a` nests inside `b` in the classes' one total order: a class
    /// whose edge lies deeper in the tree is inner, then one below more shaping nodes on its
    /// edge, ties broken by id. A class keeps its reservation for a packet it released while
    /// the packet waits at an outer class, so it releases at its own rate and in its own
    /// order however long the outer class makes its packets wait; it gives the reservation
    /// back when the packet waits at an inner class (or at itself again). Since the order is
    /// total, no two classes can each wait for the other's reservation.
    pub(super) fn inner(&self, a: u32, b: u32) -> bool {
        let key = |c: u32| {
            let mut n = self.prog.shapers[c as usize].sched_parent.get();
            let mut d = 0u32;
            while let Some(p) = self.parent(n) {
                n = p;
                d += 1;
            }
            (
                std::cmp::Reverse(d),
                std::cmp::Reverse(self.prog.shaping_depth(ShaperId::new(c))),
                c,
            )
        };
        key(a) < key(b)
    }

    /// Moves a held packet into shaping class `c`'s queue: its entries from the leaf up to
    /// the root, with the ranks it was given at admission.
    pub(super) fn hold(&mut self, slot: usize, c: u32, now: u64) {
        let seq = self.next_seq();
        let h = self.slab[slot].as_ref().expect("held");
        let (leaf_node, mut ranks) = (h.leaf_node, h.ranks.clone());
        let bytes = h.pkt.bytes.saturating_add(self.overhead);
        // A packet this class released before comes back first in line: at fair nodes it
        // takes the class's virtual time there, and is not charged again.
        let again = h
            .shaping
            .as_slice()
            .iter()
            .position(|&x| x.get() == c)
            .is_some_and(|i| (h.passed | h.revoked) & (1 << i) != 0);
        let backlogged = self.nodes[leaf_node as usize].held_packets > 1;
        // Fair nodes rank the packet again among the class's own packets (`ClassQueue::vtime`).
        let mut child = leaf_node;
        let mut i = 1;
        while let Some(n) = self.parent(child) {
            let algo = &self.prog.nodes[n as usize].algo;
            if matches!(algo, Algo::Wfq | Algo::Rr | Algo::Drr) {
                let edge = self.params.edges[child as usize];
                let q = &mut self.classes[c as usize];
                let vt = q.vtime.get(&n).copied().unwrap_or(0);
                if again {
                    ranks[i] = vt;
                    child = n;
                    i += 1;
                    continue;
                }
                let cost = match algo {
                    Algo::Wfq => wfq::cost(bytes, edge.weight),
                    Algo::Rr => rr::COST,
                    _ => wfq::cost(bytes, edge.quantum_bytes),
                };
                let max_cost = q.max_cost.entry(n).or_insert(0);
                *max_cost = (*max_cost).max(cost);
                let last = q.last.get(&child).copied().unwrap_or(0);
                // A leaf that holds packets besides this one is backlogged, even if none of
                // them is in the class's queue now (they are on their way, in the tree or
                // at another class): its packet starts where its last finished, at most one
                // largest cost behind the class's virtual time, instead of at that virtual
                // time. Else a leaf of small packets, absent from the queue for a moment
                // while a sibling's large packet set the virtual time, lost the difference
                // each time: 5-7 % of its share.
                let start = if child == leaf_node && backlogged {
                    last.max(vt.saturating_sub(*max_cost))
                } else {
                    vt.max(last)
                };
                let finish = start + cost;
                q.last.insert(child, finish);
                ranks[i] = if *algo == Algo::Drr {
                    drr::round(finish)
                } else {
                    start
                };
            }
            child = n;
            i += 1;
        }
        let q = &mut self.classes[c as usize];
        let mut push = |n: u32, rank: Rank, v: usize| {
            let pifo = q.tree.entry(n).or_default();
            pifo.insert((rank, seq), v);
            pifo.first_key_value().is_some_and(|(&(_, s), _)| s == seq)
        };
        // Whether it is first anywhere: if not, the queue's first packet is what it was, and
        // so is the class's entry in the shaping queue.
        let mut first = push(leaf_node, ranks[0], slot);
        let mut child = leaf_node;
        let mut i = 1;
        // (`self.parent` would borrow all of `self`, and `q` holds its class.)
        while let Some(n) = self.prog.nodes[child as usize].parent.map(NodeId::get) {
            first |= push(n, ranks[i], child as usize);
            child = n;
            i += 1;
        }
        q.held += 1;
        self.slab[slot].as_mut().expect("held").parked = true;
        // A class without an entry needs one whatever came first.
        if first || q.due.is_none() {
            self.schedule(c, now);
        }
    }

    /// The packet at the front of class `c`'s queue: its PIFO tree followed from the top.
    pub(super) fn class_head(&self, c: u32) -> Option<usize> {
        self.class_head_below(c, 0)
    }

    /// The first packet of class `c`'s queue below node `n`: its PIFO tree followed from
    /// `n`.
    pub(super) fn class_head_below(&self, c: u32, mut n: u32) -> Option<usize> {
        let q = &self.classes[c as usize];
        loop {
            let (_, &v) = q.tree.get(&n)?.first_key_value()?;
            if self.prog.nodes[n as usize].leaf.is_some() {
                return Some(v);
            }
            n = v as u32;
        }
    }

    /// Takes the packet at the front of class `c`'s queue out of it.
    pub(super) fn class_pop(&mut self, c: u32) -> usize {
        let q = &mut self.classes[c as usize];
        let mut n: u32 = 0;
        loop {
            let ((rank, _), v) = q
                .tree
                .get_mut(&n)
                .and_then(|p| p.pop_first())
                .unwrap_or_else(|| panic!("class {c}: its queue's PIFO at node {n} is empty"));
            if self.prog.nodes[n as usize].leaf.is_some() {
                q.held -= 1;
                self.slab[v].as_mut().expect("held").parked = false;
                return v;
            }
            let vt = q.vtime.entry(n).or_insert(0);
            match self.prog.nodes[n as usize].algo {
                Algo::Wfq | Algo::Rr => *vt = (*vt).max(rank),
                Algo::Drr => *vt = drr::sent(*vt, rank),
                _ => {}
            }
            n = v as u32;
        }
    }

    /// Gives class `c` a new entry in the shaping queue, for when the packet at the front of
    /// its queue conforms once the packets it has released are sent too (none while its
    /// queue is empty), in place of its old one.
    pub(super) fn schedule(&mut self, c: u32, now: u64) {
        let q = &self.classes[c as usize];
        if q.held == 0 && q.due.is_none() {
            return;
        }
        if let Some(front) = self.class_head(c) {
            self.revoke_after(c, front, now);
        }
        let want = self.class_head(c).map(|slot| {
            let bytes = self.slab[slot]
                .as_ref()
                .expect("held")
                .pkt
                .bytes
                .saturating_add(self.overhead);
            let b = &self.buckets[c as usize];
            b.estimate_cost(b.cost(bytes), now)
        });
        if let Some(old) = self.classes[c as usize].due {
            self.shaping_queue.remove(&old);
        }
        let due = want.map(|t| (t, self.next_seq()));
        if let Some(key) = due {
            self.shaping_queue.insert(key, c);
        }
        self.classes[c as usize].due = due;
    }

    /// When class `c`'s queue's first packet (in `front`) must wait for its tokens: takes
    /// back the class's reservations for the packets it passed that wait at an outer class,
    /// and for those it released that are still in the tree, that its policy ranks after a
    /// packet its queue holds ([`Self::outranked`]), so its next token goes to the packet it
    /// ranks first. Such a packet keeps its place where it is; no longer passed here, it
    /// queues at `c` again (ranked there with the others) if `c` is busy when it comes out.
    pub(super) fn revoke_after(&mut self, c: u32, front: usize, now: u64) {
        let bytes = self.slab[front]
            .as_ref()
            .expect("held")
            .pkt
            .bytes
            .saturating_add(self.overhead);
        let b = &self.buckets[c as usize];
        if !b.reserved() || b.estimate_cost(b.cost(bytes), now) <= now {
            return;
        }
        for slot in 0..self.slab.len() {
            let Some(h) = self.slab[slot].as_ref() else {
                continue;
            };
            let Some(j) = h.shaping.as_slice().iter().position(|&x| x.get() == c) else {
                continue;
            };
            // Parked at an outer class, or released by this one into the tree.
            let lent = h.parked || h.from == Some(c);
            if !lent || h.out & (1 << j) == 0 || !self.outranked(c, slot) {
                continue;
            }
            let h = self.slab[slot].as_mut().expect("held");
            h.out &= !(1 << j);
            h.passed &= !(1 << j);
            h.revoked |= 1 << j;
            let bytes = h.pkt.bytes.saturating_add(self.overhead);
            self.buckets[c as usize].unreserve(bytes);
        }
    }

    /// Whether class `c`'s queue holds a packet that the policy ranks strictly before the
    /// one in `slot` where their paths meet, at a node that ranks packets by their own ranks
    /// (`prio`, `fifo`, `edf`, `lstf`, a first-come first-served leaf; never at a node that
    /// shares: `wfq`, `rr`, `drr`, `senic`, a fair leaf). At each node above the packet's
    /// leaf it asks the queue's first packet below that node, so a higher-priority packet
    /// counts even when the queue's first packet is another child's of a `wfq` node above.
    pub(super) fn outranked(&self, c: u32, slot: usize) -> bool {
        let r = self.slab[slot].as_ref().expect("held");
        let mut m = r.leaf_node;
        let mut j = 0;
        loop {
            if let Some(q) = self.class_head_below(c, m).filter(|&q| q != slot) {
                let hq = self.slab[q].as_ref().expect("held");
                let (i, jj, own) = meeting(&self.prog, hq.leaf_node, r.leaf_node);
                if jj == j && own && hq.ranks[i] < r.ranks[j] {
                    return true;
                }
            }
            match self.parent(m) {
                Some(p) => (m, j) = (p, j + 1),
                None => return false,
            }
        }
    }

    /// Moves due packets back into the tree: the first packet of each shaping class whose
    /// entry has come, in the shaping queue's order, then each senic group's (in node order)
    /// whose `S` its `V` has reached, in `S` order.
    pub(super) fn release_due(&mut self, now: u64) {
        while let Some((&(t, seq), &c)) = self.shaping_queue.first_key_value() {
            if t > now {
                break;
            }
            #[cfg(test)]
            crate::steps::count();
            self.shaping_queue.remove(&(t, seq));
            self.classes[c as usize].due = None;
            let slot = self.class_pop(c);
            let h = self.slab[slot].as_mut().expect("held packet");
            let i = h
                .shaping
                .as_slice()
                .iter()
                .position(|&x| x.get() == c)
                .expect("a class holds only its own packets");
            h.passed |= 1 << i;
            h.out |= 1 << i;
            h.from = Some(c);
            let (bytes, unranked) = (h.pkt.bytes.saturating_add(self.overhead), h.unranked);
            let b = &mut self.buckets[c as usize];
            b.reserve(bytes);
            self.classes[c as usize].out += 1;
            if unranked {
                self.rank_on_release(slot);
            }
            self.push_entries(slot);
        }
        for i in 0..self.senic_tops.len() {
            let top = self.senic_tops[i];
            if self.nodes[top as usize].senic.waiting.is_empty() {
                continue;
            }
            self.senic_advance(top, now);
            loop {
                let st = &mut self.nodes[top as usize].senic;
                let v = st.v;
                match st.waiting.first_entry() {
                    Some(e) if e.key().0 <= v => {
                        let slot = e.remove();
                        self.push_entries(slot);
                    }
                    _ => break,
                }
            }
        }
    }
}
