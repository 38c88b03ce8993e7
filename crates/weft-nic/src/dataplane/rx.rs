//! The tenant side of [`State`]: a received frame checked (size, parse, source MAC and IP),
//! posted to its flow's descriptor ring and rung in; refusals and misbehaving drivers
//! counted; the NIC's control entries applied.
//!
//! Invariants: a frame is either posted once or counted once as dropped; a tenant's
//! misbehaviour is charged to that tenant only. Cost: one parse, one lookup and one copy per
//! frame.

use super::*;

impl State {
    pub(super) fn ingress(&mut self, t: usize, frame: &[u8], now: u64) {
        self.c.rx_frames[t] += 1;
        self.c.rx_bytes[t] += frame.len() as u64;
        if frame.len() > BUF_BYTES {
            self.c.oversize += 1;
            return;
        }
        let p = match parse::parse(frame, t as u32 + 1) {
            Ok(p) => p,
            Err(_) => {
                self.c.parse_errors += 1;
                return;
            }
        };
        let mut src = [0u8; 6];
        src.copy_from_slice(&frame[6..12]);
        if let Err(why) = self.macs.check_source(t, src, now) {
            self.refuse_source(t, src, why, now);
            return;
        }
        if let Some(allowed) = self.cfg.isolation.ips.get(t).filter(|a| !a.is_empty()) {
            // An IP frame's source as parsed (however many tags it has); ARP's from the frame.
            let parsed = (p.meta.present & Field::Src.bit() != 0)
                .then(|| std::net::Ipv6Addr::from(p.meta.src).to_canonical());
            if let Some(ip) = parsed.or_else(|| source_ip(frame)) {
                if !allowed.iter().any(|p| p.contains(ip)) {
                    self.c.ip_rejects[t] += 1;
                    return;
                }
            }
        }
        let key = (t as u32, p.flow);
        let q = match self.flows.get(&key) {
            Some(&q) => {
                if self.queues[&q].meta != p.meta && !self.reclassify(t, q, &p.meta, frame, now) {
                    return;
                }
                q
            }
            None => {
                let class = self.prog.classify(&p.meta);
                let Classification::Leaf { leaf, shaping, .. } = class else {
                    self.c.unclassified += 1;
                    let pkt = Packet::new(0, frame.len() as u32, p.meta);
                    let _ = self.engine.enqueue_classified(pkt, class, now);
                    return;
                };
                let shaper = shaping.as_slice().first().map(|s| s.get());
                if !self.queue_budget.try_take(t) {
                    self.c.tenant_no_queue[t] += 1;
                    return;
                }
                match self.iface.create_queue(self.drivers[t], leaf.get(), shaper) {
                    Ok(q) => {
                        let mut flow = Flow {
                            tenant: t as u32,
                            key: p.flow,
                            meta: p.meta,
                            class,
                            requested: class,
                            queue: None,
                            pending_kick: false,
                            last_ps: now,
                        };
                        flow.open(&mut self.engine, &mut self.engine_flows);
                        self.flows.insert(key, q);
                        self.queues.insert(q, flow);
                        q
                    }
                    Err(_) => {
                        self.queue_budget.give(t);
                        self.c.tenant_no_queue[t] += 1;
                        return;
                    }
                }
            }
        };
        if !self.buffer_budget.try_take(t) {
            self.c.tenant_no_buffer[t] += 1;
            return;
        }
        // The budget's total is the pool's size, so a unit taken is a buffer free.
        let buf = self
            .free
            .pop()
            .expect("a buffer for every unit of the budget");
        let off = buf as usize * BUF_BYTES;
        self.pool[off..off + frame.len()].copy_from_slice(frame);
        self.lens[buf as usize] = frame.len() as u16;
        self.timing.posted[buf as usize] = (now, t as u32);
        let d = Descriptor {
            buf,
            bytes: frame.len() as u32,
            cookie: 0,
        };
        if self.iface.post(self.drivers[t], q, d).is_err() {
            self.free.push(buf);
            self.buffer_budget.give(t);
            self.c.ring_full += 1;
            return;
        }
        let f = self.queues.get_mut(&q).expect("queue of a flow");
        f.last_ps = now;
        if !f.pending_kick {
            f.pending_kick = true;
            self.kicks[t].push(DoorbellEntry::Kick(q));
        }
    }

    /// A frame from tenant `t`'s port whose source address `src` it may not use: dropped,
    /// counted per tenant and reason, and logged: another tenant's address once per address
    /// and port, in a line of its own naming the address and its owner; the other reasons
    /// at most once a second per tenant.
    #[cold]
    fn refuse_source(&mut self, t: usize, src: Mac, why: SourceReject, now: u64) {
        self.c.source_rejects[t][why.index()] += 1;
        let reason = match why {
            SourceReject::Spoofed { owner } => return self.report_spoof(t, src, owner),
            SourceReject::Group => "a group address cannot be a source".into(),
            SourceReject::NotConfigured => "not one of the tenant's configured `mac=`".into(),
            SourceReject::Full => format!(
                "the port already uses {} addresses (--macs-per-tenant), none idle {} s",
                self.cfg.isolation.macs_per_tenant, self.cfg.isolation.mac_age_s
            ),
        };
        if now.saturating_sub(self.source_logged_ps[t]) >= 1_000_000_000_000
            || self.source_logged_ps[t] == 0
        {
            self.source_logged_ps[t] = now.max(1);
            tracing::warn!(
                tenant = t + 1,
                tenant_name = %self.cfg.tenants[t].0,
                source = %fmt_mac(&src),
                rule = why.name(),
                count = self.c.source_rejects[t][why.index()],
                "dropped a frame whose source address the port may not use: {reason} \
                 (logged at most once a second per tenant)"
            );
        }
    }

    /// Tenant `t`'s port sent a frame with `owner`'s address `src`: its own log line, once
    /// per address and port ([`MacTable::first_spoof`]), naming the address and its owner.
    #[cold]
    fn report_spoof(&mut self, t: usize, src: Mac, owner: usize) {
        if self.macs.first_spoof(t, &src) {
            tracing::warn!(
                tenant = t + 1,
                tenant_name = %self.cfg.tenants[t].0,
                source = %fmt_mac(&src),
                owner = owner + 1,
                owner_name = %self.cfg.tenants[owner].0,
                rule = "spoofed_source",
                "dropped a frame sent with another tenant's address: {} belongs to tenant \
                 {} ({}) (logged once per address and port; `spoofed_source` counts \
                 every such frame)",
                fmt_mac(&src),
                owner + 1,
                self.cfg.tenants[owner].0
            );
        }
    }

    /// A known flow's frame whose classifier fields differ from the flow's (a DSCP
    /// re-marked mid-flow): the flow is classified again, and if its class changed its
    /// driver moves it with an inline metadata update (`MoveClass`) in the tenant's next
    /// doorbell (Loom §4.3), which the NIC side processes before it fetches this frame: it
    /// binds the flow to the new leaf and that leaf's shaping classes ([`State::control`]). A frame that now
    /// classifies nowhere is dropped and counted (`unclassified`), and the flow keeps its
    /// class. Whether the frame goes on to its queue.
    fn reclassify(
        &mut self,
        t: usize,
        q: QueueId,
        meta: &PacketMeta,
        frame: &[u8],
        now: u64,
    ) -> bool {
        let class = self.prog.classify(meta);
        let Classification::Leaf { leaf, .. } = class else {
            self.c.unclassified += 1;
            let pkt = Packet::new(0, frame.len() as u32, *meta);
            let _ = self.engine.enqueue_classified(pkt, class, now);
            return false;
        };
        let f = self.queues.get_mut(&q).expect("queue of a flow");
        f.meta = *meta;
        if class != f.requested {
            f.requested = class;
            // At most one move per queue waits in the tenant's next doorbell (its latest
            // class), so a flow flipping its DSCP on every frame cannot grow the batch.
            let mv = DoorbellEntry::Meta(q, iface::MetaUpdate::MoveClass { class: leaf.get() });
            let pending = self.kicks[t].iter_mut().find(|e| {
                matches!(e, DoorbellEntry::Meta(p, iface::MetaUpdate::MoveClass { .. }) if *p == q)
            });
            match pending {
                Some(e) => *e = mv,
                None => self.kicks[t].push(mv),
            }
            self.c.class_moves += 1;
        }
        true
    }

    /// Step 2 of a pass (see the loop): at most one expensive step; whether one was made.
    pub(super) fn expensive_step(
        &mut self,
        tenants: &[Box<dyn Port>],
        uplink: &dyn Port,
        now: u64,
        received: usize,
    ) -> bool {
        let due = self.next_free_ps <= now;
        if self.rev.has_sparse()
            && now.saturating_sub(self.next_free_ps) <= SPARSE_LATE_PS
            && self.reverse_step(tenants)
        {
            return true;
        }
        if due
            && !(self.reverse_turn && self.rev.pending())
            && self.departures(uplink, now, received)
        {
            return true;
        }
        let backlog = self.engine.backlog() > 0 || !self.draining.is_empty();
        let imminent = backlog && !due && self.next_free_ps - now < REVERSE_GUARD_PS;
        !imminent && self.reverse_step(tenants)
    }

    /// Due departures, at most `1 + extra`; whether any left.
    fn departures(&mut self, uplink: &dyn Port, now: u64, extra: usize) -> bool {
        if self.uplink_down_since.is_some() {
            return false;
        }
        let mut sent = 0;
        while sent <= extra && self.next_free_ps <= now && self.transmit_one(uplink, now) {
            sent += 1;
        }
        if sent > 0 {
            timed_flush(uplink, &mut self.timing.uplink_kick);
            self.reverse_turn = true;
        }
        sent > 0
    }

    /// A tenant's drop counters, in [`TENANT_DROPS`] order.
    pub(super) fn tenant_drops(&self, t: usize) -> [u64; 8] {
        let c = &self.c;
        let s = c.source_rejects[t];
        [
            s[0],
            s[1],
            s[2],
            s[3],
            c.ip_rejects[t],
            c.tenant_no_queue[t],
            c.tenant_no_buffer[t],
            c.tenant_reverse_dropped[t],
        ]
    }

    /// Once a second: one log line per tenant whose frames were dropped since the last,
    /// by reason (a flood of new flows shows as `no_queue`, of frames as `no_buffer`, of
    /// source addresses as `mac_table_full`). Spoofed sources are not repeated here: each
    /// address a port spoofs has its line ([`State::refuse_source`]).
    pub(super) fn log_tenant_drops(&mut self) {
        for t in 0..self.drops_logged.len() {
            let now = self.tenant_drops(t);
            let was = std::mem::replace(&mut self.drops_logged[t], now);
            let by: Vec<String> = TENANT_DROPS
                .iter()
                .zip(now.iter().zip(was))
                .filter(|(k, (n, w))| **n > *w && **k != "spoofed_source")
                .map(|(k, (n, w))| format!("{k}={}", n - w))
                .collect();
            if by.is_empty() {
                continue;
            }
            tracing::warn!(
                tenant = t + 1,
                tenant_name = %self.cfg.tenants[t].0,
                drops = %by.join(" "),
                "dropped the tenant's frames in the last second"
            );
        }
    }

    /// Reads the uplink's link state; logs and counts a change.
    pub(super) fn check_link(&mut self, uplink: &dyn Port, now: u64) {
        let up = uplink.link_up().unwrap_or(true);
        match (up, self.uplink_down_since) {
            (false, None) => {
                self.uplink_down_since = Some(now);
                self.c.uplink_downs += 1;
                tracing::warn!(
                    uplink = %self.cfg.uplink,
                    "uplink is down: departures wait (queues fill, then drop with counted \
                     reasons)"
                );
            }
            (true, Some(t)) => {
                let ms = now.saturating_sub(t) / 1_000_000_000;
                self.c.uplink_down_ms += ms;
                self.uplink_down_since = None;
                // The link was idle, not late: pacing starts again from now.
                self.next_free_ps = self.next_free_ps.max(now);
                tracing::info!(
                    uplink = %self.cfg.uplink,
                    down_s = ms as f64 / 1e3,
                    "uplink is up again"
                );
            }
            _ => {}
        }
    }

    /// One reverse frame to its tenant; whether one was waiting.
    fn reverse_step(&mut self, tenants: &[Box<dyn Port>]) -> bool {
        let Some(t) = self.reverse_send_one(tenants) else {
            return false;
        };
        timed_flush(&*tenants[t], &mut self.timing.reverse_kick);
        self.reverse_turn = false;
        true
    }

    /// The rogue driver's attempts (see [`Config::rogue`]); all are refused and counted.
    pub(super) fn misbehave(&mut self, r: usize) {
        let Some(&d) = self.drivers.get(r) else {
            return;
        };
        let foreign: Vec<QueueId> = self
            .queues
            .iter()
            .filter(|(_, f)| f.tenant as usize != r)
            .map(|(&q, _)| q)
            .take(2)
            .collect();
        let bogus = Descriptor {
            buf: u32::MAX,
            bytes: 1500,
            cookie: u64::MAX,
        };
        let invalid = self.iface.config().max_queues + 7;
        let mut entries = vec![DoorbellEntry::Kick(invalid)];
        for &q in &foreign {
            let _ = self.iface.post(d, q, bogus);
            entries.push(DoorbellEntry::Kick(q));
            entries.push(DoorbellEntry::Meta(
                q,
                iface::MetaUpdate::MoveClass { class: 0 },
            ));
            entries.push(DoorbellEntry::Meta(
                q,
                iface::MetaUpdate::Rate {
                    rate_bps: 1,
                    burst_bytes: 1,
                },
            ));
        }
        let _ = self.iface.post(d, invalid, bogus);
        let _ = self.iface.ring_doorbell(0, d, &entries);
    }

    pub(super) fn ring_doorbell(&mut self, t: usize) {
        if self.kicks[t].is_empty() {
            return;
        }
        // A refused batch (doorbell queue full) keeps its kicks for the next iteration.
        if self
            .iface
            .ring_doorbell(0, self.drivers[t], &self.kicks[t])
            .is_ok()
        {
            for e in self.kicks[t].drain(..) {
                if let DoorbellEntry::Kick(q) = e {
                    if let Some(f) = self.queues.get_mut(&q) {
                        f.pending_kick = false;
                    }
                }
            }
        }
    }

    pub(super) fn control(&mut self, c: Control, now: u64) {
        match c {
            Control::Rate {
                shaper,
                rate_bps,
                burst_bytes,
                ..
            } => {
                // The interface checked what the engine checks (a shaping class the queue
                // has, a positive rate and burst), so the engine takes it.
                let taken = self.engine.update(
                    Update::Shaper {
                        shaper: ShaperId::new(shaper),
                        rate_bps,
                        burst_bytes,
                    },
                    now,
                );
                debug_assert_eq!(taken, Ok(()), "inline rate update on shaper {shaper}");
            }
            Control::Moved { queue, to, .. } => {
                // The flow's new leaf, shaped by the classes on that leaf's path that its
                // packets match (not by its old path's).
                if let Some(f) = self.queues.get_mut(&queue) {
                    if let Some(class) = self.prog.classify_at(LeafId::new(to), &f.meta) {
                        f.class = class;
                        // Its flow at the old leaf is closed once no queue uses it and
                        // it holds no packet there.
                        f.open(&mut self.engine, &mut self.engine_flows);
                        if let Classification::Leaf { shaping, .. } = class {
                            self.iface.rebind(
                                queue,
                                to,
                                shaping.as_slice().first().map(|s| s.get()),
                            );
                        }
                    }
                }
            }
        }
    }
}
