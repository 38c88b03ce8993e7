//! [`Engine`] for [`FastEngine`]: the trait's entry points over the modules beside this one.

use super::*;

impl Engine for FastEngine {
    fn program(&self) -> &Program {
        &self.prog
    }

    fn enqueue(&mut self, pkt: Packet, now: u64) -> Result<(), DropReason> {
        let class = self.prog.classify(&pkt.meta);
        let located = self.locate(&pkt, class, NO)?;
        self.enqueue_located(&pkt, located, now)
    }

    fn enqueue_classified(
        &mut self,
        pkt: Packet,
        class: Classification,
        now: u64,
    ) -> Result<(), DropReason> {
        debug_assert!(
            self.prog.is_valid_class(&class),
            "enqueue_classified: {class:?} is not a class of this program"
        );
        let located = self.locate(&pkt, class, NO)?;
        self.enqueue_located(&pkt, located, now)
    }

    fn enqueue_batch(&mut self, pkts: &[Packet], now: u64, out: &mut Vec<Result<(), DropReason>>) {
        let prog = self.prog.clone();
        for chunk in pkts.chunks(STAGED) {
            let class = |i: usize| prog.classify(&chunk[i].meta);
            self.enqueue_staged(chunk.len(), |i| &chunk[i], class, now, out);
        }
    }

    fn enqueue_classified_batch(
        &mut self,
        pkts: &[(Packet, Classification)],
        now: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        for chunk in pkts.chunks(STAGED) {
            debug_assert!(
                chunk.iter().all(|(_, c)| self.prog.is_valid_class(c)),
                "enqueue_classified_batch: a class not of this program in {:?}",
                chunk.iter().map(|(_, c)| c).collect::<Vec<_>>()
            );
            self.enqueue_staged(chunk.len(), |i| &chunk[i].0, |i| chunk[i].1, now, out);
        }
    }

    fn open_flow(&mut self, pkt: &Packet, class: Classification) -> Option<FlowQueue> {
        assert!(
            !self.options.forget_idle_flows,
            "open_flow: an engine that forgets idle flows has no flow queues"
        );
        let binding @ (leaf, node, _) = FlowQueue::binding(&self.prog, class)?;
        let key = flow_key_of(self.leaves[leaf as usize].flow_key, pkt);
        let flow = self.flow_index(node, key);
        Some(FlowQueue::new(
            flow,
            self.flows.get(flow).generation,
            binding,
        ))
    }

    fn close_flow(&mut self, q: &FlowQueue) -> bool {
        self.check_queue(q, self.owner(q));
        if self.flows.get(q.flow).held_packets > 0 {
            return false;
        }
        self.free_flow(q.flow);
        true
    }

    fn enqueue_flow(&mut self, pkt: Packet, q: &FlowQueue, now: u64) -> Result<(), DropReason> {
        self.check_queue(q, self.owner(q));
        self.enqueue_located(&pkt, Located::of(q), now)
    }

    fn enqueue_flow_batch(
        &mut self,
        pkts: &[(Packet, FlowQueue)],
        now: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        for chunk in pkts.chunks(STAGED) {
            // First every packet's flow record (a miss per packet with many flows: this
            // pass lets them overlap), then the enqueues in order.
            let mut owner = [0u32; STAGED];
            let mut touched = 0u32;
            for (o, (_, q)) in owner.iter_mut().zip(chunk) {
                *o = self.owner(q);
                if *o != NO {
                    touched ^= self.flows.touch(q.flow);
                }
            }
            std::hint::black_box(touched);
            for ((p, q), &o) in chunk.iter().zip(&owner) {
                self.check_queue(q, o);
                out.push(self.enqueue_located(p, Located::of(q), now));
            }
        }
    }

    fn dequeue(&mut self, now: u64) -> Option<Departure> {
        loop {
            // Every time round: a packet held back may have left its class's next packet
            // due at once.
            self.release_if_due(now);
            let (slot, tracked) = self.pop_path(0)?;
            if let Some(d) = self.send(slot, 0, tracked, now) {
                return Some(d);
            }
        }
    }

    fn dequeue_batch(&mut self, now: u64, max: usize, out: &mut Vec<Departure>) -> usize {
        if max == 0 {
            // As no call of `dequeue` at all: the shaping queue is left as it is.
            return 0;
        }
        let mut sent = 0;
        let stride = self.stride;
        while sent < max {
            self.release_if_due(now);
            // Pipelined only while no packet waits for `outstanding` (a departure that admits
            // one pushes it into the tree, which could change the pops after it) and no
            // shaping class is busy (`class_backlog`: a departure or a hold may make a class's
            // next packet due at once, and its release could change the pops after it; a
            // class busy with a packet it released, even one whose reservation it took
            // back, holds a popped packet it has not passed, due at once if it has the
            // tokens).
            if self.waiting_packets != 0 || self.class_backlog != 0 {
                while sent < max {
                    let Some(d) = self.dequeue(now) else { break };
                    out.push(d);
                    sent += 1;
                }
                return sent;
            }
            // Pop the paths of as many packets as are still wanted (at most STAGED); the
            // pops do not depend on what sending the earlier ones does (deferral moves a
            // packet to the shaping queue, a departure updates virtual times and senic
            // backlogs, which only later ranks and eligibility read), so this is the order
            // one dequeue after another pops them in.
            let want = (max - sent).min(STAGED);
            let mut k = 0;
            let mut emptied = false;
            // The shaping classes of the stage's packets so far, as bits `class % 64`.
            let mut seen = 0u64;
            while k < want {
                let Some((slot, tracked)) = self.pop_path(k * stride) else {
                    emptied = true;
                    break;
                };
                self.burst[k] = (slot, tracked as u32);
                k += 1;
                // A packet of a class that an earlier packet of the stage passes ends the
                // stage: should that class hold both, the second may become the first of its
                // queue and be due at once, and the pops after it must see it released. (No
                // class held packets or had any out when the stage began, so a class's first
                // hold is for want of tokens, due later.) Classes are told apart by their id
                // modulo 64: a clash only ends a stage early (an exact list of ids measured
                // no faster, in more instructions).
                let mut mine = 0u64;
                for &c in self.shaping[slot as usize].as_slice() {
                    mine |= 1 << (c.get() % 64);
                }
                if seen & mine != 0 {
                    break;
                }
                seen |= mine;
            }
            // Then every popped packet's flow record, leaf record, first shaping class and,
            // under a senic node, first SENIC tag and leaf node record (its class's backlog),
            // so that their cache misses overlap instead of coming one packet after another.
            let mut touched = 0u32;
            for i in 0..k {
                let slot = self.burst[i].0;
                let s = &self.slots[slot as usize];
                touched ^= self.flows.touch(s.flow) ^ self.leaves[s.leaf as usize].admitted;
                if let Some(&b) = self.shaping[slot as usize].as_slice().first() {
                    touched ^= self.classes[b.index()].held;
                }
                if s.n_senic != 0 {
                    touched ^= self.tags[slot as usize * stride].0
                        ^ self.nodes[s.leaf_node as usize].backlog;
                }
            }
            std::hint::black_box(touched);
            // Then each, in order: sent, or deferred to the shaping queue.
            for i in 0..k {
                let (slot, tracked) = self.burst[i];
                if let Some(d) = self.send(slot, i * stride, tracked as usize, now) {
                    out.push(d);
                    sent += 1;
                }
            }
            // The tree ran dry, and sending puts nothing back (a deferred packet goes to the
            // shaping queue; nothing waits for `outstanding`, see above): no more this time.
            if emptied && self.class_backlog == 0 {
                break;
            }
        }
        sent
    }

    fn next_wakeup(&self) -> Option<u64> {
        // Its first entry is live (see `purge_stale`).
        let shaping = self.shaping_queue.peek().map(|e| e.rank() as u64);
        if self.senic_deferred == 0 {
            return shaping;
        }
        let senic = self.senic_tops.iter().filter_map(|&top| {
            let st = self.senic_waiting[top as usize].peek()?.rank();
            let g = &self.senic[top as usize];
            Some(if st <= g.v {
                g.t
            } else {
                let wait = senic::wait_ps(st, g.v, g.capacity as u128, g.backlog_rate);
                g.t.saturating_add(wait)
            })
        });
        shaping.into_iter().chain(senic).min()
    }

    fn backlog(&self) -> usize {
        self.held
    }

    fn update(&mut self, u: Update, now: u64) -> Result<(), UpdateError> {
        check_update(&self.prog, &u)?;
        if let Update::Priority { node, .. } = u {
            if self.nodes[node.index()].parent != NO {
                self.ffs_to_per_child(self.nodes[node.index()].parent);
            }
        }
        if let Update::Rate { node, rate_bps } = u {
            // A backlogged senic class changes φ: advance V at the old rates first.
            let nu = node.index();
            let p = self.nodes[nu].parent;
            if p != NO && self.nodes[p as usize].kind == Kind::Senic {
                let ps = self.nodes[p as usize].senic as usize;
                let top = self.senic[ps].top;
                Self::advance_group(&mut self.senic, top, now);
                if self.nodes[nu].backlog > 0 {
                    // Under a senic parent, `param` is the class's rate.
                    let old = self.nodes[nu].param.max(1) as u128;
                    let g = &mut self.senic[ps];
                    g.backlog_rate = g.backlog_rate - old + rate_bps as u128;
                }
            }
            let si = self.nodes[nu].senic;
            if si != NO {
                let top = self.senic[si as usize].top;
                Self::advance_group(&mut self.senic, top, now);
                self.senic[si as usize].capacity = rate_bps;
            }
        }
        // The edge parameter, where the parent reads the changed one.
        match u {
            Update::Weight { node, weight } => self.set_param(node.get(), Kind::Wfq, weight),
            Update::Priority { node, priority } => self.set_param(node.get(), Kind::Prio, priority),
            Update::Quantum { node, bytes } => self.set_param(node.get(), Kind::Drr, bytes),
            Update::Rate { node, rate_bps } => self.set_param(node.get(), Kind::Senic, rate_bps),
            Update::LeafLimits {
                node,
                limit_packets,
                limit_bytes,
                flow_limit_packets,
                flow_limit_bytes,
                outstanding,
            } => {
                let leaf = self.prog.node(node).leaf.expect("checked: a leaf");
                self.leaves[leaf.index()].set_limits([
                    limit_packets,
                    limit_bytes,
                    flow_limit_packets,
                    flow_limit_bytes,
                    outstanding,
                ]);
            }
            Update::Shaper { .. } => {}
        }
        match u {
            Update::Shaper {
                shaper,
                rate_bps,
                burst_bytes,
            } => {
                self.classes[shaper.index()]
                    .b
                    .reconfigure(rate_bps, burst_bytes, now);
                self.schedule(shaper.get(), now);
            }
            Update::LeafLimits {
                node, outstanding, ..
            } => {
                let leaf = self.prog.node(node).leaf.expect("checked: a leaf").get();
                while outstanding.is_none_or(|o| (self.leaves[leaf as usize].admitted as u64) < o) {
                    let Some(next) = self.waiting.get_mut(&leaf).and_then(VecDeque::pop_front)
                    else {
                        break;
                    };
                    self.waiting_packets -= 1;
                    self.admit(next, now);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        // Departures are counted at the leaf only.
        Stats::from_leaves(
            &self.prog,
            self.leaves
                .iter()
                .zip(&self.prog.leaves)
                .map(|(l, &v)| (v.get(), l.sent_packets, l.sent_bytes)),
            self.node_drops.iter().map(|(&v, &d)| (v, d)),
        )
    }

    fn flow_counters(&self) -> Vec<(LeafId, u64, Counters)> {
        // Forgetting idle flows, a finished one is as good as forgotten (`forget_idle`
        // forgets fair ones a few at a time).
        let forgotten = |i: u32| self.options.forget_idle_flows && self.finished(i);
        let mut v: Vec<(LeafId, u64, Counters)> = (0..self.flows.len)
            .filter(|&i| self.flows.get(i).leaf_node != NO && !forgotten(i))
            .map(|i| {
                let f = self.flows.get(i);
                let leaf = self.prog.nodes[f.leaf_node as usize]
                    .leaf
                    .expect("flows live at leaves");
                let c = Counters {
                    packets: f.sent_packets,
                    bytes: f.sent_bytes,
                    drops: self.flow_drops.get(&i).copied().unwrap_or_default(),
                };
                (leaf, f.key, c)
            })
            .collect();
        v.sort_unstable_by_key(|&(l, k, _)| (l, k));
        v
    }
}
