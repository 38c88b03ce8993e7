//! The rest of [`State`]: sampling, reclaiming idle flows, swapping in a reloaded policy,
//! answering control commands, and the `ctl stats` answer.
//!
//! Invariants: a reload keeps every frame the old engine holds (it drains); stats are a
//! snapshot of counters that only grow. Cost: off the per-frame path.

use super::*;

impl State {
    pub(super) fn sample(&mut self, now: u64) {
        let nodes = self.engine.stats().nodes.into_iter().map(|c| c.bytes);
        let bytes = nodes.chain(self.shaped.iter().map(|&(_, b)| b)).collect();
        self.samples[0] = std::mem::replace(&mut self.samples[1], (now, bytes));
    }

    /// Destroys queues idle for a second (their ids return to the arena), and closes their
    /// flows in the engine ([`Engine::close_flow`]), so the engine's flow records follow the
    /// flows alive, not every flow ever seen.
    pub(super) fn reclaim(&mut self, now: u64) {
        let idle: Vec<QueueId> = self
            .queues
            .iter()
            .filter(|(q, f)| {
                now.saturating_sub(f.last_ps) > 1_000_000_000_000
                    && !f.pending_kick
                    && self.iface.ring_len(**q) == 0
            })
            .map(|(q, _)| *q)
            .collect();
        for q in idle {
            let f = &self.queues[&q];
            if self
                .iface
                .destroy_queue(self.drivers[f.tenant as usize], q)
                .is_ok()
            {
                let f = self.queues.remove(&q).expect("present");
                self.flows.remove(&(f.tenant, f.key));
                self.queue_budget.give(f.tenant as usize);
                self.c.queues_reclaimed += 1;
                // The engine forgets the flow too once no other queue uses it (and,
                // should it still hold packets, once they have left).
                self.engine_flows.release(&mut self.engine, f.queue);
            }
        }
        self.engine_flows.retry(&mut self.engine);
    }

    /// Swaps in a policy and its engine ([`prepare_reload`]'s): the old engine drains, every
    /// flow's queue is classified again.
    fn reload(&mut self, (prog, engine): Reloaded, now: u64) -> Reply {
        // Counters are carried for the names the new policy has, and only those.
        let names: HashSet<&str> = prog.nodes.iter().map(|n| n.name.as_str()).collect();
        let old = std::mem::replace(&mut self.engine, engine);
        self.carried.retain(|n, _| names.contains(n.as_str()));
        for d in &mut self.draining {
            d.keep_only(&names);
        }
        if old.backlog() > 0 {
            self.draining.push(Draining::new(old, &names));
        } else {
            carry(&mut self.carried, &old, keeps(&old, &names));
        }
        let classes: HashSet<&str> = prog.shapers.iter().map(|c| c.name.as_str()).collect();
        self.shaped_carried
            .retain(|n, _| classes.contains(n.as_str()));
        for (sh, &(p, b)) in self.prog.shapers.iter().zip(&self.shaped) {
            if classes.contains(sh.name.as_str()) {
                let c = self.shaped_carried.entry(sh.name.clone()).or_default();
                c.0 += p;
                c.1 += b;
            }
        }
        self.prog = prog;
        // Moves still waiting in a refused doorbell name the old policy's leaves; every
        // flow is classified again below (from its latest fields) instead.
        for k in &mut self.kicks {
            k.retain(|e| {
                !matches!(
                    e,
                    DoorbellEntry::Meta(_, iface::MetaUpdate::MoveClass { .. })
                )
            });
        }
        self.engine_flows.clear();
        for (&q, f) in self.queues.iter_mut() {
            f.class = self.prog.classify(&f.meta);
            f.requested = f.class;
            // Its queue on the old engine goes with that engine.
            f.queue = None;
            f.open(&mut self.engine, &mut self.engine_flows);
            if let Classification::Leaf { leaf, shaping, .. } = f.class {
                self.iface
                    .rebind(q, leaf.get(), shaping.as_slice().first().map(|s| s.get()));
            }
        }
        let n = self.prog.nodes.len() + self.prog.shapers.len();
        self.samples = [(now, vec![0; n]), (now, vec![0; n])];
        self.shaped = vec![(0, 0); self.prog.shapers.len()];
        self.generation += 1;
        self.c.reloads += 1;
        // The daemon's log says what runs now, and the client hears what `weft run` would
        // have warned of had it started with this policy (frames it will drop unclassified).
        let warnings = tenant_warnings(&self.prog, &self.cfg.tenants);
        tracing::info!(
            policy = %self.prog.name,
            generation = self.generation,
            "reloaded policy"
        );
        for w in &warnings {
            tracing::warn!(policy = %self.prog.name, "{w}");
        }
        Reply::Reloaded(ctl::Reloaded {
            policy: self.prog.name.clone(),
            generation: self.generation,
            warnings,
        })
    }

    /// Answers a control request as the control thread prepared it; `ports` and `dropped`:
    /// what `stats` answers of the ports and the control server ([`State::stats`]).
    pub(super) fn handle(
        &mut self,
        cmd: Command,
        now: u64,
        ports: impl FnOnce() -> Vec<PortStats>,
        dropped: ctl::DroppedConnections,
    ) -> Reply {
        match cmd {
            Command::Stats => Reply::Stats(Box::new(self.stats(now, ports(), dropped))),
            Command::Reload(r) => self.reload(*r, now),
            Command::ResetTiming => {
                self.timing.clear();
                Reply::Done
            }
            Command::Stop => {
                request_stop();
                Reply::Done
            }
        }
    }

    /// The `ctl stats` answer, with the counters of the `ports` that have them and the
    /// control connections closed unanswered (`dropped`).
    pub(super) fn stats(
        &self,
        now: u64,
        ports: Vec<PortStats>,
        dropped: ctl::DroppedConnections,
    ) -> Stats {
        Stats {
            ok: true,
            policy: self.prog.name.clone(),
            generation: self.generation,
            uptime_s: now.saturating_sub(self.started_ps) as f64 / 1e12,
            rate_bps: self.cfg.rate_bps,
            nodes: self.node_stats(),
            shapers: self.shaper_stats(),
            tenants: self.tenant_stats(),
            dataplane: self.dataplane_stats(now, dropped),
            timing: self.timing.stats(),
            iface: self.iface.counters().clone(),
            ports,
        }
    }

    /// Each node's counters: the running engine's, plus what earlier engines counted for the
    /// nodes this policy shares with them (by name), drained or still draining.
    fn node_counters(&self) -> Vec<weft_core::sched::Counters> {
        let mut s = self.engine.stats();
        // Counters of the nodes this policy shares with earlier ones (by name): what their
        // engines counted, drained or still draining.
        for (i, n) in self.prog.nodes.iter().enumerate() {
            if let Some(c) = self.carried.get(&n.name) {
                s.nodes[i].add(c);
            }
        }
        if !self.draining.is_empty() {
            // One index of this policy's names for every draining engine's nodes (names are
            // stored normalized): linear in the nodes, on the loop's thread.
            let index: HashMap<&str, usize> = self
                .prog
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.as_str(), i))
                .collect();
            for d in &self.draining {
                let st = d.engine.stats();
                let nodes = d.engine.program().nodes.iter().zip(&st.nodes);
                for ((n, c), _) in nodes.zip(&d.kept).filter(|(_, &k)| k) {
                    if let Some(&i) = index.get(n.name.as_str()) {
                        s.nodes[i].add(c);
                    }
                }
            }
        }
        s.nodes
    }

    /// The rate of the `i`th sampled counter (nodes, then shaping classes) between the last
    /// two samples, bits per second, rounded (0 before there are two).
    fn sampled_rate_bps(&self, i: usize) -> f64 {
        let (t0, b0) = &self.samples[0];
        let (t1, b1) = &self.samples[1];
        let dt = t1.saturating_sub(*t0).max(1) as f64 / 1e12;
        let rate = (b1[i].saturating_sub(b0[i])) as f64 * 8.0 / dt;
        if *t1 > *t0 {
            rate.round()
        } else {
            0.0
        }
    }

    /// Per node of the running policy: its counters ([`State::node_counters`]) and rate.
    fn node_stats(&self) -> Vec<NodeStats> {
        let counters = self.node_counters();
        self.prog
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let c = &counters[i];
                NodeStats {
                    id: i,
                    name: n.name.clone(),
                    algo: n.algo.name().to_string(),
                    leaf: n.leaf.is_some(),
                    packets: c.packets,
                    bytes: c.bytes,
                    drops: DropReason::ALL.map(|r| c.drops[r.index()]),
                    rate_bps: self.sampled_rate_bps(i),
                }
            })
            .collect()
    }

    /// Per shaping class of the running policy: what passed it (with what earlier policies'
    /// classes of its name counted) and its rate.
    fn shaper_stats(&self) -> Vec<ShaperStats> {
        let n = self.prog.nodes.len();
        self.prog
            .shapers
            .iter()
            .zip(&self.shaped)
            .enumerate()
            .map(|(i, (sh, &(packets, bytes)))| {
                let (p0, b0_) = self
                    .shaped_carried
                    .get(&sh.name)
                    .copied()
                    .unwrap_or_default();
                ShaperStats {
                    id: i,
                    name: sh.name.clone(),
                    limit_bps: sh.rate_bps,
                    burst_bytes: sh.burst_bytes,
                    packets: packets + p0,
                    bytes: bytes + b0_,
                    rate_bps: self.sampled_rate_bps(n + i),
                }
            })
            .collect()
    }

    /// Per `--tenant`: what it sent, dropped and holds, and what its driver had refused.
    fn tenant_stats(&self) -> Vec<TenantStats> {
        self.cfg
            .tenants
            .iter()
            .enumerate()
            .map(|(i, (name, ifn))| TenantStats {
                tenant: i + 1,
                name: name.clone(),
                iface: ifn.clone(),
                rx_frames: self.c.rx_frames[i],
                rx_bytes: self.c.rx_bytes[i],
                drops: self.tenant_drops(i),
                macs: self.macs.owned(i) as u64,
                queues: self.queue_budget.used(i).into(),
                buffers: self.buffer_budget.used(i).into(),
                rejects: self
                    .iface
                    .driver_rejects(self.drivers[i])
                    .copied()
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The loop's own counters, with what it holds now (queues, backlog, free buffers) and
    /// the control connections closed unanswered (`dropped`).
    fn dataplane_stats(&self, now: u64, dropped: ctl::DroppedConnections) -> DataplaneStats {
        let c = &self.c;
        DataplaneStats {
            parse_errors: c.parse_errors,
            oversize: c.oversize,
            no_buffer: c.tenant_no_buffer.iter().sum(),
            ring_full: c.ring_full,
            no_queue: c.tenant_no_queue.iter().sum(),
            unclassified: c.unclassified,
            engine_drops: c.engine_drops,
            tx_frames: c.tx_frames,
            tx_bytes: c.tx_bytes,
            tx_errors: c.tx_errors,
            reverse_frames: c.reverse_frames,
            reverse_flooded: c.reverse_flooded,
            reverse_unknown: c.reverse_unknown,
            reverse_dropped: c.reverse_dropped,
            source_rejected: c.source_rejects.iter().flatten().sum::<u64>()
                + c.ip_rejects.iter().sum::<u64>(),
            reverse_queued: self.rev.queues.iter().map(|q| q.len() as u64).sum(),
            reloads: c.reloads,
            queues_live: self.queues.len() as u64,
            queues_reclaimed: c.queues_reclaimed,
            class_moves: c.class_moves,
            uplink_up: self.uplink_down_since.is_none(),
            uplink_downs: c.uplink_downs,
            uplink_down_ms: c.uplink_down_ms
                + self
                    .uplink_down_since
                    .map_or(0, |t| now.saturating_sub(t) / 1_000_000_000),
            // Flows the engine forgot (`Engine::close_flow`) once no queue used them:
            // reclaimed queues', and a moved flow's at its old leaf.
            flows_closed: self.engine_flows.closed,
            engine_flows: self.engine.open_flows() as u64,
            backlog: (self.engine.backlog()
                + self
                    .draining
                    .iter()
                    .map(|e| e.engine.backlog())
                    .sum::<usize>()) as u64,
            buffers_free: self.free.len() as u64,
            reserved_queues: self.queue_budget.reserve().into(),
            reserved_buffers: self.buffer_budget.reserve().into(),
            ctl_dropped: dropped.ctl,
            metrics_dropped: dropped.metrics,
        }
    }
}
