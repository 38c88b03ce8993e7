//! The NIC side of [`State`]: fetched descriptors offered to the engine, departures paced
//! and transmitted on the uplink, and the reverse path's frames sent back to their tenants.
//!
//! Invariants: a frame leaves no earlier than the link's rate allows (up to the catch-up
//! window); each fetched descriptor is completed exactly once. Cost: one engine dequeue and
//! one copy per frame sent.

use super::*;

impl State {
    /// The packet a fetched descriptor carries, with its flow's queue in the engine (none
    /// for an unclassified flow or an unknown queue: the packet then goes to the engine with
    /// that classification, which counts its drop).
    fn offer(&self, f: &iface::Fetched) -> (Packet, Result<FlowQueue, Classification>) {
        let (pkt, queue) = match self.queues.get(&f.queue) {
            Some(fl) => (fl.packet(), fl.queue.ok_or(fl.class)),
            None => (
                Packet::new(0, 0, PacketMeta::default()),
                Err(Classification::Unclassified { at: NodeId::ROOT }),
            ),
        };
        let pkt = Packet {
            id: f.handle,
            bytes: f.desc.bytes,
            slack_ps: (f.rank != 0).then_some(f.rank),
            ..pkt
        };
        (pkt, queue)
    }

    /// Doorbells, fetches and offers to the engine (the NIC side of the interface). The
    /// fetched packets go to their flows' queues in the engine in one `enqueue_flow_batch`
    /// (per-flow queues and a doorbell's batch, Loom §4.2.1 and §4.3: no flow lookup, and the
    /// flow records' misses overlap); `scratch` holds the batch and its outcomes (kept by the
    /// caller, so the loop does not allocate).
    pub(super) fn nic_side(
        &mut self,
        now: u64,
        fetched: &mut Vec<iface::Fetched>,
        scratch: &mut Offers,
    ) {
        let mut controls = Vec::new();
        self.iface.nic_doorbells(0, |c| controls.push(c));
        for c in controls {
            self.control(c, now);
        }
        fetched.clear();
        self.iface.nic_fetch(512, fetched);
        scratch.posted.clear();
        scratch.index.clear();
        scratch.results.clear();
        scratch.outcome.clear();
        for (i, f) in fetched.iter().enumerate() {
            match self.offer(f) {
                (pkt, Ok(q)) => {
                    scratch.posted.push((pkt, q));
                    scratch.index.push(i);
                    scratch.outcome.push(Ok(()));
                }
                // Dropped at once (and counted by the engine): its order among the others
                // does not matter.
                (pkt, Err(class)) => scratch
                    .outcome
                    .push(self.engine.enqueue_classified(pkt, class, now)),
            }
        }
        self.engine
            .enqueue_flow_batch(&scratch.posted, now, &mut scratch.results);
        debug_assert_eq!(
            scratch.results.len(),
            scratch.posted.len(),
            "one outcome per posted packet"
        );
        for (&i, &r) in scratch.index.iter().zip(&scratch.results) {
            scratch.outcome[i] = r;
        }
        for (f, r) in fetched.iter().zip(&scratch.outcome) {
            if let Err(r) = *r {
                self.c.engine_drops += 1;
                let _ = self.iface.nic_complete(f.handle, Status::Dropped(r));
            }
        }
    }

    /// Sends the engine's next departure on the uplink (the link is free at `now`); the link
    /// is then busy for the frame's wire time. False when nothing is queued.
    pub(super) fn transmit_one(&mut self, uplink: &dyn Port, now: u64) -> bool {
        loop {
            // Engines of earlier policies drain first (a reload loses no admitted packet).
            let mut d = None;
            for old in &mut self.draining {
                d = old.engine.dequeue(now);
                if d.is_some() {
                    break;
                }
            }
            if self.draining.iter().any(|e| e.engine.backlog() == 0) {
                let done: Vec<Draining> = self
                    .draining
                    .extract_if(.., |e| e.engine.backlog() == 0)
                    .collect();
                for e in &done {
                    carry(&mut self.carried, &e.engine, e.kept.iter().copied());
                }
            }
            let current = d.is_none();
            if current {
                d = self.engine.dequeue(now);
            }
            let Some(d) = d else { return false };
            let Some(desc) = self.iface.outstanding_desc(d.id) else {
                continue;
            };
            let off = desc.buf as usize * BUF_BYTES;
            let len = self.lens[desc.buf as usize] as usize;
            let t0 = clock::now_ps();
            let (posted, tenant) = self.timing.posted[desc.buf as usize];
            if current && !self.shaped.is_empty() {
                self.count_shaped(&d);
            }
            self.timing
                .departure_late
                .record(t0.saturating_sub(self.next_free_ps.max(posted)) / 1000);
            if let Some(h) = self.timing.queue.get_mut(tenant as usize) {
                h.record(t0.saturating_sub(posted) / 1000);
            }
            let sent = uplink.send(&self.pool[off..off + len]);
            self.timing
                .uplink_send
                .record(clock::now_ps().saturating_sub(t0) / 1000);
            let status = match sent {
                Ok(true) => {
                    self.c.tx_frames += 1;
                    self.c.tx_bytes += len as u64;
                    Status::Sent
                }
                _ => {
                    self.c.tx_errors += 1;
                    Status::Aborted
                }
            };
            let _ = self.iface.nic_complete(d.id, status);
            let start = if now > self.next_free_ps + CATCH_UP_PS {
                now
            } else {
                self.next_free_ps
            };
            self.next_free_ps = start + wire_ps(d.bytes, &self.prog.link);
            return true;
        }
    }

    /// Reverse path, receive side: queues an uplink frame for the tenant that owns its
    /// destination MAC (a copy for every tenant for broadcast and multicast; a unicast frame
    /// no tenant owns is dropped and counted, `reverse_unknown`).
    pub(super) fn reverse_in(&mut self, frame: &[u8], ts: u64) {
        if frame.len() < 14 || frame.len() > BUF_BYTES {
            self.c.reverse_dropped += 1;
            return;
        }
        self.c.reverse_frames += 1;
        let mut dst = [0u8; 6];
        dst.copy_from_slice(&frame[..6]);
        match self.macs.destination(&dst) {
            Destination::Tenant(t) => {
                if !self.rev.push(t, frame, ts) {
                    self.c.reverse_dropped += 1;
                    self.c.tenant_reverse_dropped[t] += 1;
                }
            }
            Destination::Group => {
                self.c.reverse_flooded += 1;
                for t in 0..self.rev.queues.len() {
                    if !self.rev.push(t, frame, ts) {
                        self.c.reverse_dropped += 1;
                        self.c.tenant_reverse_dropped[t] += 1;
                    }
                }
            }
            Destination::Unknown => self.c.reverse_unknown += 1,
        }
    }

    /// Reverse path, send side: one queued frame to its tenant, tenants in round robin (a
    /// tenant's flood of ACKs delays another tenant's frame by at most one send). Returns
    /// the tenant served, `None` when nothing is queued.
    pub(super) fn reverse_send_one(&mut self, tenants: &[Box<dyn Port>]) -> Option<usize> {
        let (t, b) = self.rev.pop()?;
        let (off, len) = (b as usize * BUF_BYTES, self.rev.lens[b as usize] as usize);
        if let Some(w) = ring_wait(self.rev.ts[b as usize], clock::realtime_ns()) {
            self.timing.reverse_wait[t].record(w);
        }
        let t0 = clock::now_ps();
        let sent = tenants[t].send(&self.rev.pool[off..off + len]);
        self.timing
            .reverse_send
            .record(clock::now_ps().saturating_sub(t0) / 1000);
        if !matches!(sent, Ok(true)) {
            self.c.tx_errors += 1;
        }
        self.rev.give(t, b);
        Some(t)
    }

    /// Counts a departure of the current engine at the shaping classes it passed: those its
    /// flow's queue is bound to, or, for a packet queued before the flow moved to another
    /// leaf, those of its own leaf's path that the flow's packets match
    /// (`Program::classify_at`).
    fn count_shaped(&mut self, d: &weft_core::sched::Departure) {
        // The departure's id is its descriptor's handle.
        let Some(f) = self.queues.get(&Interface::handle_queue(d.id)) else {
            return;
        };
        let class = match f.class {
            c @ Classification::Leaf { leaf, .. } if leaf == d.leaf => Some(c),
            _ => self.prog.classify_at(d.leaf, &f.meta),
        };
        if let Some(Classification::Leaf { shaping, .. }) = class {
            for &c in shaping.as_slice() {
                let (p, b) = &mut self.shaped[c.index()];
                *p += 1;
                *b += d.bytes as u64;
            }
        }
    }
}
