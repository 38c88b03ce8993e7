//! The fast engine's dequeue: popping a path from the root, charging the nodes on it and
//! sending the packet (or handing it to the class or senic group that holds it back).

use super::*;

impl FastEngine {
    /// One pass over the nodes of a sent packet's path that a departure may update (root to
    /// leaf, with the child each popped): virtual times, senic backlog (φ). (The leaf counts
    /// the departure; the nodes above add it up in [`Engine::stats`].)
    #[inline(always)]
    pub(super) fn count_departure(
        path: &[(u32, Rank, u32)],
        nodes: &mut [NodeRt],
        senic: &mut [SenicRt],
        now: u64,
    ) {
        for &(node, rank, child) in path {
            let rt = &mut nodes[node as usize];
            match rt.on_send {
                OnSend::Nothing => {}
                OnSend::Vtime => rt.vtime = rt.vtime.max(rank),
                OnSend::DrrVtime => rt.vtime = drr::sent(rt.vtime, rank),
                OnSend::Senic => {
                    // V was advanced to `now` by the eligibility check, at the old φ.
                    let si = rt.senic as usize;
                    let top = senic[si].top;
                    Self::advance_group(senic, top, now);
                    let cn = &mut nodes[child as usize];
                    cn.backlog -= 1;
                    if cn.backlog == 0 {
                        senic[si].backlog_rate -= cn.param.max(1) as u128;
                    }
                }
            }
        }
    }

    /// The SENIC tag that holds the popped packet in `slot` back, if one does: `(top, S)`,
    /// the first of the longest waits at the current φ (as the reference engine's
    /// `senic_binding`).
    #[inline(always)]
    pub(super) fn senic_bind(&mut self, s: &Slot, slot: u32, now: u64) -> Option<(u32, u128)> {
        let base = slot as usize * self.stride;
        let mut bind: Option<(u32, u128, u64)> = None;
        for k in 0..s.n_senic as usize {
            let (top, st) = self.tags[base + k];
            Self::advance_group(&mut self.senic, top, now);
            let g = &self.senic[top as usize];
            if g.v < st {
                let wait = senic::wait_ps(st, g.v, g.capacity as u128, g.backlog_rate);
                let t = now.saturating_add(wait);
                if bind.is_none_or(|(_, _, b)| t > b) {
                    bind = Some((top, st, t));
                }
            }
        }
        bind.map(|(top, st, _)| (top, st))
    }

    /// Pops one packet's path from the root: its slot, and how many levels it remembered
    /// in `popped[at..]` (those whose node a departure may update, root first). `None` when
    /// the tree is empty.
    #[inline(always)]
    pub(super) fn pop_path(&mut self, at: usize) -> Option<(u32, usize)> {
        #[cfg(test)]
        crate::steps::count();
        let mut n = 0u32;
        let mut tracked = 0;
        // Bit `i < 63`: `popped[at + i]` is a `wfq` node's, to charge; bit 63: some of
        // `popped[at + 63..]` may be.
        let mut charged = 0u64;
        loop {
            match self.pifo[n as usize].pop(&self.links)? {
                Popped::Child(v) => {
                    debug_assert_eq!(
                        self.nodes[n as usize].on_send,
                        OnSend::Nothing,
                        "node {n}: its PIFO says a departure never updates it"
                    );
                    n = v;
                }
                Popped::Tracked(rank, v) => {
                    self.popped[at + tracked] = (n, rank, v);
                    tracked += 1;
                    n = v;
                }
                Popped::Charged(rank, v) => {
                    self.popped[at + tracked] = (n, rank, v);
                    charged |= 1 << tracked.min(63);
                    tracked += 1;
                    n = v;
                }
                Popped::Slot(slot) => {
                    debug_assert_eq!(
                        self.nodes[n as usize].on_send,
                        OnSend::Nothing,
                        "leaf node {n}: its PIFO says a departure never updates it"
                    );
                    if charged != 0 {
                        self.charge_path(slot, at, tracked, charged);
                    }
                    return Some((slot, tracked));
                }
                Popped::TrackedSlot(rank, slot) => {
                    self.popped[at + tracked] = (n, rank, slot);
                    if charged != 0 {
                        self.charge_path(slot, at, tracked, charged);
                    }
                    return Some((slot, tracked + 1));
                }
            }
        }
    }

    /// The `wfq` levels of a path just popped (`popped[at..at + tracked]`, those `charged`
    /// marks: see `pop_path`) learn the packet that left their child: `slot`'s
    /// ([`WfqQueues::charge`](crate::sched::wfq_queues::WfqQueues::charge)).
    #[inline(always)]
    pub(super) fn charge_path(&mut self, slot: u32, at: usize, tracked: usize, charged: u64) {
        let wire = self.slots[slot as usize]
            .bytes
            .saturating_add(self.overhead);
        let mut bits = charged & !(1 << 63);
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.charge_level(at + i, wire);
        }
        if charged & 1 << 63 != 0 {
            self.charge_deep(at + 63..at + tracked, wire);
        }
    }

    /// [`Self::charge_path`] below 63 levels: each level's node says whether it charges.
    #[cold]
    #[inline(never)]
    pub(super) fn charge_deep(&mut self, levels: std::ops::Range<usize>, wire: u32) {
        for i in levels {
            if self.nodes[self.popped[i].0 as usize].kind == Kind::Wfq {
                self.charge_level(i, wire);
            }
        }
    }

    /// The `wfq` level `popped[i]` learns that a packet of `wire` bytes left its child.
    #[inline(always)]
    pub(super) fn charge_level(&mut self, i: usize, wire: u32) {
        let (n, _, c) = self.popped[i];
        let weight = self.nodes[c as usize].param;
        if let Some(off) = self.pifo[n as usize].charge(wire, weight) {
            let last = &mut self.nodes[c as usize].last;
            *last = wfq::corrected(*last, off);
        }
    }

    /// Sends the packet in `slot`, whose path `pop_path` just popped (`popped[at..at +
    /// tracked]`), or holds it back (`None`): in its senic group's heap, or in the queue of
    /// the shaping class that holds it.
    #[inline(always)]
    pub(super) fn send(
        &mut self,
        slot: u32,
        at: usize,
        tracked: usize,
        now: u64,
    ) -> Option<Departure> {
        let s = self.slots[slot as usize];
        // Nothing to check or charge without shaping classes or senic tags.
        let shaped = !self.shaping[slot as usize].as_slice().is_empty();
        if shaped || s.n_senic != 0 {
            let from = s.from;
            if from != NO {
                // Out of the tree: its releasing class may give out its next packet.
                self.slots[slot as usize].from = NO;
                self.unlink(slot, Some(from));
                let out = &mut self.class_out[from as usize];
                debug_assert!(
                    *out > 0 && self.classes[from as usize].state & CLASS_OUT != 0,
                    "class {from}: slot {slot} popped as released with {} out, state {:#x}",
                    *out,
                    self.classes[from as usize].state
                );
                *out -= 1;
                if *out == 0 {
                    self.classes[from as usize].state &= !CLASS_OUT;
                }
                if s.flags & TAKEN_BACK != 0 {
                    // Counted until now, though its class took its reservation back.
                    self.slots[slot as usize].flags &= !TAKEN_BACK;
                    self.class_backlog -= 1;
                }
            }
            if let Some((top, st)) = self.senic_bind(&s, slot, now) {
                self.defer_senic(slot, top, st);
                if from != NO {
                    self.schedule(from, now);
                }
                return None;
            }
            if shaped {
                if let Some(i) = self.holding_class(&s, slot, now) {
                    self.hold_at(slot, from, i, now);
                    return None;
                }
                if s.out != 0 {
                    self.give_back(slot, None);
                }
                self.revoked[slot as usize] = 0;
                let (path, costs) = (self.shaping[slot as usize], self.costs);
                for (&c, &cost) in path.as_slice().iter().zip(costs.iter()) {
                    self.classes[c.index()].b.charge_cost(cost, now);
                    self.schedule(c.get(), now);
                }
            }
        }
        self.free.push(slot);
        self.held -= 1;
        let b64 = s.bytes as u64;
        Self::count_departure(
            &self.popped[at..at + tracked],
            &mut self.nodes,
            &mut self.senic,
            now,
        );
        let l = &mut self.leaves[s.leaf as usize];
        l.held_packets -= 1;
        l.held_bytes -= b64;
        l.admitted -= 1;
        l.sent_packets += 1;
        l.sent_bytes += b64;
        if l.fair && l.held_packets == 0 {
            // The end of the leaf's busy period: its virtual time catches up with the
            // finish tags given (SFQ), so a flow's next packet starts afresh.
            let v = &mut self.nodes[s.leaf_node as usize].vtime;
            *v = (*v).max(self.fair_max[s.leaf as usize]);
        }
        // Held but not admitted: waiting for `outstanding`.
        let some_wait = l.held_packets > l.admitted;
        let f = self.flows.get_mut(s.flow);
        f.held_packets -= 1;
        f.held_bytes -= s.bytes;
        f.sent_packets += 1;
        f.sent_bytes += b64;
        let flow = f.key;
        self.forget_if_idle(s.flow, s.leaf);
        debug_assert_eq!(
            some_wait,
            self.waiting.get(&s.leaf).is_some_and(|w| !w.is_empty()),
            "leaf {}: held {} admitted {} waiting {:?}",
            s.leaf,
            self.leaves[s.leaf as usize].held_packets,
            self.leaves[s.leaf as usize].admitted,
            self.waiting.get(&s.leaf)
        );
        if some_wait {
            let waiting = self.waiting.get_mut(&s.leaf).expect("some wait");
            if let Some(next) = waiting.pop_front() {
                self.waiting_packets -= 1;
                self.admit(next, now);
            }
        }
        self.debug_check_holdings();
        Some(Departure {
            id: s.id,
            leaf: LeafId::new(s.leaf),
            flow,
            bytes: s.bytes,
            enqueued_ps: s.enqueued_ps,
        })
    }
}
