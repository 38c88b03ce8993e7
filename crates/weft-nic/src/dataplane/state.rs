//! The loop's state: its timing histograms, the reverse path's buffers, the flows it has
//! opened in the engine, the engines draining after a reload, and [`State`] itself.
//!
//! Invariants: every buffer is owned once (pool, ring, engine or reverse queue); a flow's
//! queue in the engine belongs to the engine it was opened in. Cost: allocated at start; no
//! allocation per frame.

use super::*;

/// Where the loop's time goes and how long frames wait (`ctl stats`: `timing`; reset with
/// `{"cmd": "reset_timing"}`).
#[derive(Default)]
pub(super) struct Timing {
    /// Duration of loop iterations that did some work.
    pub(super) busy_iter: Hist,
    /// One frame handed to the uplink / to a tenant (reverse path): a `send(2)`, or with a
    /// transmit ring (AF_PACKET's, AF_XDP's) a copy into it.
    pub(super) uplink_send: Hist,
    pub(super) reverse_send: Hist,
    /// The flush after a transmit step: with a transmit ring the kick (one `send(2)` that
    /// sends what the step queued, and on veth runs the receiving side's stack).
    pub(super) uplink_kick: Hist,
    pub(super) reverse_kick: Hist,
    /// How late departures start: transmit start − the later of the paced start time and
    /// the frame's arrival (the engine's choice aside, how long the loop kept it waiting).
    pub(super) departure_late: Hist,
    /// Per tenant: receive-ring wait of its frames (kernel timestamp → read by the loop),
    /// NIC sojourn (read → transmission starts), receive-ring wait of the uplink frames
    /// addressed to it.
    pub(super) rx_wait: Vec<Hist>,
    pub(super) queue: Vec<Hist>,
    pub(super) reverse_wait: Vec<Hist>,
    /// Per pool buffer: when its frame was read and its tenant.
    pub(super) posted: Vec<(u64, u32)>,
}

impl Timing {
    pub(super) fn new(tenants: usize, buffers: usize) -> Timing {
        Timing {
            rx_wait: vec![Hist::default(); tenants],
            queue: vec![Hist::default(); tenants],
            reverse_wait: vec![Hist::default(); tenants],
            posted: vec![(0, 0); buffers],
            ..Timing::default()
        }
    }

    pub(super) fn clear(&mut self) {
        self.busy_iter.clear();
        self.uplink_send.clear();
        self.reverse_send.clear();
        self.uplink_kick.clear();
        self.reverse_kick.clear();
        self.departure_late.clear();
        for h in self
            .rx_wait
            .iter_mut()
            .chain(&mut self.queue)
            .chain(&mut self.reverse_wait)
        {
            h.clear();
        }
    }

    pub(super) fn stats(&self) -> TimingStats {
        TimingStats {
            busy_iteration: self.busy_iter.summary(),
            uplink_send: self.uplink_send.summary(),
            reverse_send: self.reverse_send.summary(),
            uplink_kick: self.uplink_kick.summary(),
            reverse_kick: self.reverse_kick.summary(),
            departure_late: self.departure_late.summary(),
            tenants: (0..self.rx_wait.len())
                .map(|t| TenantTiming {
                    tenant: t + 1,
                    rx_wait: self.rx_wait[t].summary(),
                    queue: self.queue[t].summary(),
                    reverse_wait: self.reverse_wait[t].summary(),
                })
                .collect(),
        }
    }
}

/// Flushes `port` (with a transmit ring, the kick) and records how long it took, in ns.
pub(super) fn timed_flush(port: &dyn Port, hist: &mut Hist) {
    let t0 = clock::now_ps();
    port.flush();
    hist.record(clock::now_ps().saturating_sub(t0) / 1000);
}

/// Ring wait from a kernel receive timestamp (ns, `CLOCK_REALTIME`) to `now_real`; `None`
/// when there is no timestamp.
pub(super) fn ring_wait(ts: u64, now_real: u64) -> Option<u64> {
    (ts != 0).then(|| now_real.saturating_sub(ts))
}

/// The reverse path's frames waiting for their tenant: a pool of buffers and one FIFO per
/// tenant. A tenant whose FIFO was empty when a frame arrived is *sparse* and served first
/// (its frame waits for no other tenant's backlog: a request/response tenant's replies pass a
/// bulk tenant's ACKs, as in DRR++ / fq_codel's new flows); tenants with a backlog are
/// served round robin, one frame per turn. No allocation after start.
pub(super) struct Reverse {
    /// Buffers per tenant: one tenant's flood of return traffic leaves the others theirs.
    budget: Budget,
    pub(super) pool: Vec<u8>,
    pub(super) lens: Vec<u16>,
    pub(super) ts: Vec<u64>,
    pub(super) free: Vec<u32>,
    pub(super) queues: Vec<VecDeque<u32>>,
    /// Sparse tenants in arrival order (each at most once: `is_sparse`).
    sparse: VecDeque<usize>,
    is_sparse: Vec<bool>,
    next: usize,
}

impl Reverse {
    pub(super) fn new(tenants: usize, buffers: u32) -> Reverse {
        Reverse {
            budget: Budget::new(buffers, tenants, Budget::default_reserve(buffers, tenants)),
            pool: vec![0; buffers as usize * BUF_BYTES],
            lens: vec![0; buffers as usize],
            ts: vec![0; buffers as usize],
            free: (0..buffers).rev().collect(),
            queues: (0..tenants)
                .map(|_| VecDeque::with_capacity(buffers as usize))
                .collect(),
            sparse: VecDeque::with_capacity(tenants),
            is_sparse: vec![false; tenants],
            next: 0,
        }
    }

    /// Whether a sparse tenant's frame (probably) waits.
    pub(super) fn has_sparse(&self) -> bool {
        !self.sparse.is_empty()
    }

    /// Whether any frame waits.
    pub(super) fn pending(&self) -> bool {
        self.free.len() < self.lens.len()
    }

    /// Copies `frame` (at most [`BUF_BYTES`]) into a buffer queued for tenant `t`; false
    /// when no buffer is free.
    pub(super) fn push(&mut self, t: usize, frame: &[u8], ts: u64) -> bool {
        if !self.budget.try_take(t) {
            return false;
        }
        let Some(b) = self.free.pop() else {
            self.budget.give(t);
            return false;
        };
        let off = b as usize * BUF_BYTES;
        self.pool[off..off + frame.len()].copy_from_slice(frame);
        self.lens[b as usize] = frame.len() as u16;
        self.ts[b as usize] = ts;
        if self.queues[t].is_empty() && !self.is_sparse[t] {
            self.is_sparse[t] = true;
            self.sparse.push_back(t);
        }
        self.queues[t].push_back(b);
        true
    }

    /// Frees tenant `t`'s buffer `b` (sent).
    pub(super) fn give(&mut self, t: usize, b: u32) {
        self.free.push(b);
        self.budget.give(t);
    }

    /// The oldest frame of the first sparse tenant, else of the next tenant in round robin
    /// (the caller frees the buffer with [`Self::give`]).
    pub(super) fn pop(&mut self) -> Option<(usize, u32)> {
        while let Some(t) = self.sparse.pop_front() {
            self.is_sparse[t] = false;
            if let Some(b) = self.queues[t].pop_front() {
                return Some((t, b));
            }
        }
        let n = self.queues.len();
        for i in 0..n {
            let t = (self.next + i) % n;
            if let Some(b) = self.queues[t].pop_front() {
                self.next = (t + 1) % n;
                return Some((t, b));
            }
        }
        None
    }
}

pub(super) struct Flow {
    pub(super) tenant: u32,
    pub(super) key: u64,
    pub(super) meta: PacketMeta,
    /// The class the NIC side has bound the flow to (its engine queue's).
    pub(super) class: Classification,
    /// The class the host side last asked for: `class`, or where a `MoveClass` still
    /// waiting in the tenant's doorbell will bind it.
    pub(super) requested: Classification,
    /// The engine's queue for this flow (`Engine::open_flow` of `class` on the current
    /// engine); `None` while `class` is unclassified (after a reload).
    pub(super) queue: Option<FlowQueue>,
    pub(super) pending_kick: bool,
    pub(super) last_ps: u64,
}

impl Flow {
    /// The flow's packet as the engine sees it: its classifier fields and flow id (a
    /// fetched frame's own id and size are filled in by [`State::offer`]).
    pub(super) fn packet(&self) -> Packet {
        Packet {
            id: 0,
            bytes: 0,
            meta: self.meta,
            flow: self.key,
            deadline_ps: None,
            slack_ps: None,
        }
    }

    /// Opens the flow's queue on `engine` for its current class (`None` if unclassified),
    /// and lets go of the queue it had on that engine (`held` closes that queue's flow
    /// when no other queue uses it).
    pub(super) fn open(&mut self, engine: &mut FastEngine, held: &mut EngineFlows) {
        let old = self.queue.take();
        self.queue = engine.open_flow(&self.packet(), self.class);
        held.opened(self.queue);
        held.release(engine, old);
    }
}

/// The engine's flows our queues use, so a flow is closed ([`Engine::close_flow`]) once no
/// queue uses it. One connection's queue is one engine flow at a leaf that keeps a flow per
/// five-tuple, but every connection of a leaf that keeps one flow for all (`by: none`)
/// shares it: closing it when the first connection goes idle would leave the others with a
/// closed queue (the engine refuses it with a panic). A flow that still holds packets when
/// its last queue lets go (a flow moved to another class with packets still at its old
/// leaf) is closed on a later try ([`Self::retry`]), unless a queue has opened it again.
#[derive(Default)]
pub(super) struct EngineFlows {
    /// Per engine flow: our queues open on it.
    opens: HashMap<FlowHandle, u32>,
    /// Flows no queue uses that still held packets when the last let go.
    pub(super) pending: Vec<FlowQueue>,
    /// Flows closed (counted in `flows_closed`).
    pub(super) closed: u64,
}

impl EngineFlows {
    pub(super) fn opened(&mut self, q: Option<FlowQueue>) {
        if let Some(q) = q {
            *self.opens.entry(q.handle()).or_default() += 1;
            // In use again: no longer waiting to be closed.
            self.pending.retain(|p| !p.same_flow(&q));
        }
    }

    /// One queue of `q`'s flow is done with it: the flow is closed if it was the last.
    pub(super) fn release(&mut self, engine: &mut FastEngine, q: Option<FlowQueue>) {
        let Some(q) = q else { return };
        let h = q.handle();
        let Some(n) = self.opens.get_mut(&h) else {
            debug_assert!(
                false,
                "released queue {q:?} was never opened: {:?}",
                self.opens
            );
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.opens.remove(&h);
            if engine.close_flow(&q) {
                self.closed += 1;
            } else {
                self.pending.push(q);
            }
        }
    }

    /// Closes the pending flows that have drained. (A pending flow has no queue open on
    /// it: [`Self::opened`] takes it off the list, so each waits once, and is never
    /// closed under a queue.)
    pub(super) fn retry(&mut self, engine: &mut FastEngine) {
        let EngineFlows {
            pending, closed, ..
        } = self;
        pending.retain(|q| {
            let done = engine.close_flow(q);
            *closed += u64::from(done);
            !done
        });
    }

    /// A new engine: the queues of the old one (now draining) are no longer ours to close.
    pub(super) fn clear(&mut self) {
        self.opens.clear();
        self.pending.clear();
    }
}

/// An engine of an earlier policy, sending what it still holds.
pub(super) struct Draining {
    pub(super) engine: FastEngine,
    /// Per node of its policy: whether every policy since has had a node of that name, so
    /// its counts are still the running policy's node's (a name that left and came back
    /// counts from zero, without them).
    pub(super) kept: Vec<bool>,
}

impl Draining {
    /// `engine`, whose policy just gave way to one with the nodes `names`.
    pub(super) fn new(engine: FastEngine, names: &HashSet<&str>) -> Draining {
        let kept = keeps(&engine, names).collect();
        Draining { engine, kept }
    }

    /// The running policy gave way to one with the nodes `names`.
    pub(super) fn keep_only(&mut self, names: &HashSet<&str>) {
        for (k, keep) in self.kept.iter_mut().zip(keeps(&self.engine, names)) {
            *k &= keep;
        }
    }
}

/// Per node of `engine`'s policy: whether `names` has it.
pub(super) fn keeps<'a>(
    engine: &'a FastEngine,
    names: &'a HashSet<&str>,
) -> impl Iterator<Item = bool> + 'a {
    engine
        .program()
        .nodes
        .iter()
        .map(|n| names.contains(n.name.as_str()))
}

pub(super) struct State {
    pub(super) prog: Arc<Program>,
    pub(super) engine: FastEngine,
    pub(super) draining: Vec<Draining>,
    /// Per node name of the running policy: what engines of earlier policies counted there,
    /// once they have drained (node counters survive a reload for the nodes the new policy
    /// keeps, by name; a name the new policy drops is forgotten, so it counts from zero
    /// should it come back, and reloads with ever new names hold no more than the policy).
    pub(super) carried: HashMap<String, weft_core::sched::Counters>,
    /// Per shaping class name of the running policy: packets and bytes counted under
    /// earlier policies (kept and forgotten as `carried`).
    pub(super) shaped_carried: HashMap<String, (u64, u64)>,
    /// The current engine's flows our queues use.
    pub(super) engine_flows: EngineFlows,
    pub(super) generation: u64,
    pub(super) iface: Interface,
    pub(super) drivers: Vec<iface::DriverId>,
    pub(super) flows: HashMap<(u32, u64), QueueId>,
    pub(super) queues: HashMap<QueueId, Flow>,
    pub(super) kicks: Vec<Vec<DoorbellEntry>>,
    pub(super) pool: Vec<u8>,
    pub(super) lens: Vec<u16>,
    pub(super) free: Vec<u32>,
    /// Which port owns which source address ([`MacTable`]).
    pub(super) macs: MacTable,
    /// Flow queues and frame buffers, budgeted per tenant ([`Budget`]).
    pub(super) queue_budget: Budget,
    pub(super) buffer_budget: Budget,
    /// When each tenant's last refused-source line was logged, ps (at most one a second).
    pub(super) source_logged_ps: Vec<u64>,
    /// Since when the uplink's link has been down, ps (`None`: up). Departures wait while
    /// it is down: the policy's queues hold (and, full, drop with counted reasons) what
    /// would have been sent into a dead link and counted as sent.
    pub(super) uplink_down_since: Option<u64>,
    /// Per tenant: its drop counters when last logged ([`State::log_tenant_drops`]).
    pub(super) drops_logged: Vec<[u64; 8]>,
    pub(super) rev: Reverse,
    /// The reverse path goes next if both directions wait (they alternate).
    pub(super) reverse_turn: bool,
    pub(super) c: DpCounters,
    pub(super) timing: Timing,
    pub(super) next_free_ps: u64,
    pub(super) cfg: Config,
    pub(super) started_ps: u64,
    /// (time, bytes per node then per shaping class) at the last two samples, for
    /// `rate_bps`.
    pub(super) samples: [(u64, Vec<u64>); 2],
    /// Per shaping class of the current policy: packets and bytes sent through it by the
    /// current engine (a reload adds them to `shaped_carried`, by class name).
    pub(super) shaped: Vec<(u64, u64)>,
}

impl State {
    /// The loop's state at `now`, for the policy `prog` on `cfg`'s ports: the OS/NIC
    /// interface with one driver per tenant and room for `classes` classes, the pool of
    /// frame buffers, the tenants' budgets and their MAC tables, every counter at zero.
    pub(super) fn new(
        cfg: Config,
        prog: Arc<Program>,
        classes: u32,
        now: u64,
    ) -> Result<State, RunError> {
        let mut iface = Interface::new(iface::Config {
            max_queues: cfg.max_queues,
            ring_capacity: cfg.ring,
            cores: 1,
            doorbell_capacity: 8192,
            classes,
            outstanding_per_class: cfg.outstanding,
        });
        let drivers: Vec<_> = cfg.tenants.iter().map(|_| iface.add_driver(None)).collect();
        let (nodes, shapers) = (prog.nodes.len(), prog.shapers.len());
        let mut configured = cfg.isolation.macs.clone();
        configured.resize(cfg.tenants.len(), Vec::new());
        let macs = MacTable::new(
            &configured,
            cfg.isolation.macs_per_tenant,
            cfg.isolation.mac_age_s.saturating_mul(1_000_000_000_000),
        )
        .map_err(RunError::Config)?;
        Ok(State {
            engine: FastEngine::new(prog.clone()),
            prog,
            draining: Vec::new(),
            carried: HashMap::new(),
            shaped_carried: HashMap::new(),
            engine_flows: EngineFlows::default(),
            generation: 1,
            iface,
            kicks: vec![Vec::new(); cfg.tenants.len()],
            drivers,
            flows: HashMap::new(),
            queues: HashMap::new(),
            pool: vec![0; cfg.buffers as usize * BUF_BYTES],
            lens: vec![0; cfg.buffers as usize],
            free: (0..cfg.buffers).rev().collect(),
            macs,
            queue_budget: Budget::new(
                cfg.max_queues,
                cfg.tenants.len(),
                cfg.isolation
                    .reserved_queues
                    .unwrap_or_else(|| Budget::default_reserve(cfg.max_queues, cfg.tenants.len())),
            ),
            buffer_budget: Budget::new(
                cfg.buffers,
                cfg.tenants.len(),
                cfg.isolation
                    .reserved_buffers
                    .unwrap_or_else(|| Budget::default_reserve(cfg.buffers, cfg.tenants.len())),
            ),
            source_logged_ps: vec![0; cfg.tenants.len()],
            uplink_down_since: None,
            drops_logged: vec![[0; 8]; cfg.tenants.len()],
            rev: Reverse::new(cfg.tenants.len(), REVERSE_BUFFERS),
            reverse_turn: false,
            c: DpCounters {
                rx_frames: vec![0; cfg.tenants.len()],
                rx_bytes: vec![0; cfg.tenants.len()],
                source_rejects: vec![[0; 4]; cfg.tenants.len()],
                ip_rejects: vec![0; cfg.tenants.len()],
                tenant_no_queue: vec![0; cfg.tenants.len()],
                tenant_no_buffer: vec![0; cfg.tenants.len()],
                tenant_reverse_dropped: vec![0; cfg.tenants.len()],
                ..DpCounters::default()
            },
            timing: Timing::new(cfg.tenants.len(), cfg.buffers as usize),
            next_free_ps: now,
            started_ps: now,
            samples: [
                (now, vec![0; nodes + shapers]),
                (now, vec![0; nodes + shapers]),
            ],
            shaped: vec![(0, 0); shapers],
            cfg,
        })
    }
}

/// Scratch for [`State::nic_side`]: one fetch's packets and the engine's outcomes.
#[derive(Default)]
pub(super) struct Offers {
    /// Packets posted to their flows' queues, in fetch order.
    pub(super) posted: Vec<(Packet, FlowQueue)>,
    /// For each posted packet, its index in the fetch.
    pub(super) index: Vec<usize>,
    /// The engine's outcomes for `posted`.
    pub(super) results: Vec<Result<(), DropReason>>,
    /// Per fetched descriptor, its outcome.
    pub(super) outcome: Vec<Result<(), DropReason>>,
}
