//! The event loop: the timed events ([`Ev`]) in a binary heap ordered by (time, insertion
//! order), the simulator's state ([`Sim`]), and the loop that handles every event due, visits
//! the NIC model and the link at each instant, and jumps to the next instant anything
//! happens (a timed event, the link becoming free, the model's own `next_event`). At the end
//! of the run the requests and packets still open count as their ages.
//!
//! Invariants: time never goes back; ties are broken by insertion order, so a run is a
//! pure function of its scenario and seed; the event count is checked against the budget
//! after every timed event and every instant.
//!
//! Cost: one heap operation per timed event, one NIC visit per instant; the end of the run
//! is one pass over the request slots and the packets still queued.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;
use weft_core::sched::link::wire_ps;
use weft_core::sched::LAST_ARRIVAL_PS;

use super::apps::{Flow, FlowsAt, Req};
use super::measure::{Gaps, NicRun};
use super::tcp::NetState;
use super::BudgetExceeded;
use crate::metrics::Latency;
use crate::nic::{Nic, NicCounters, NicKind, Pkt};
use crate::rng::Rng;
use crate::scenario::{AppKind, Scenario, MAX_WINDOWS, MAX_WINDOW_CELLS};
use crate::slab::Slab;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ev {
    Step {
        app: u32,
        step: u32,
    },
    Request {
        app: u32,
    },
    /// The next request of a closed-loop flow.
    ClosedRequest {
        flow: u32,
    },
    Udp {
        flow: u32,
    },
    Retry {
        flow: u32,
    },
    /// The host learns `bytes` of TCP flow `flow`'s payload left the NIC.
    TxDone {
        flow: u32,
        bytes: u32,
    },
    /// An ACK reaches TCP flow `flow`'s sender.
    AckIn {
        flow: u32,
        ack: crate::tcp::Ack,
    },
    /// TCP flow `flow`'s retransmission timer may be due.
    Rto {
        flow: u32,
    },
    /// Flows move between their applications' cores (`host.migrate`).
    Migrate,
    /// A TCP packet reaches a receiving host whose cores take packets by a policy.
    RxIn {
        flow: u32,
        seq: u64,
        payload: u32,
        ce: bool,
        /// More packets of its TSO segment follow it.
        more: bool,
    },
    /// Receive core `core` of destination `dest` is done with ingress packet `slot`.
    RxDone {
        dest: u16,
        slot: u32,
    },
    /// Destination `dest`'s ingress policy may have a packet eligible.
    RxWake {
        dest: u16,
    },
    /// A TCP packet reaches the switch (several sending hosts: their arrivals at a port
    /// are put in time order here).
    PortIn {
        flow: u32,
        seq: u64,
        payload: u32,
        more: bool,
    },
    /// Request `slot` reaches the host: flow `flow` writes its response into its TCP
    /// connection.
    TcpRequest {
        flow: u32,
        slot: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Timed {
    t: u64,
    seq: u64,
    ev: Ev,
}

impl Ord for Timed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// The state of one run of one NIC model: the scenario, the model, the applications' flows
/// and requests (`apps.rs`), the timed events, and the results so far ([`NicRun`]).
pub(super) struct Sim<'a, N: Nic> {
    pub(super) sc: &'a Scenario,
    /// Each sending host's NIC model (`network.hosts`; one without a network).
    pub(super) nics: Vec<N>,
    pub(super) flows: Vec<Flow>,
    /// First flow index of each application.
    pub(super) app_flow0: Vec<u32>,
    pub(super) app_next_flow: Vec<u32>,
    heap: BinaryHeap<Reverse<Timed>>,
    seq: u64,
    pub(super) rngs: Vec<Rng>,
    /// Draws the cores flows move to (`host.migrate`).
    pub(super) migrate_rng: Rng,
    /// Requests open, by slot.
    pub(super) reqs: Slab<Req>,
    pub(super) drops: Vec<Pkt>,
    /// Per application, packets written outside requests (bulk, UDP) and not yet sent or
    /// dropped, counted by the time they were written, ps: at the end each counts as its
    /// age then (`duration − written`), a lower bound of its packet delay. A write's
    /// packets share one count: O(1) a packet, memory per write still queued.
    pub(super) queued: Vec<FxHashMap<u64, u64>>,
    /// Per application: its flow counts over time ([`FlowsAt`]), and the flows its steps
    /// have made active so far (flows `0..n` of the application are).
    pub(super) flows_at: Vec<FlowsAt>,
    pub(super) app_active: Vec<u32>,
    /// Events so far ([`NicRun::events`]), and the budget.
    pub(super) events: u64,
    budget: u64,
    /// The network TCP applications cross (`None` without one).
    pub(super) net: Option<NetState>,
    /// Request slots a TCP segment completed (reused, empty between uses).
    pub(super) done_slots: Vec<u32>,
    pub(super) out: NicRun,
}

impl<'a, N: Nic> Sim<'a, N> {
    pub(super) fn new(
        sc: &'a Scenario,
        kind: NicKind,
        nics: Vec<N>,
        flows: Vec<Flow>,
    ) -> Sim<'a, N> {
        // `load_str` and `Scenario::set_duration` enforce these; a scenario changed in code
        // (`duration_ps` set directly) is checked here, before the windows are allocated.
        assert!(
            sc.duration_ps > 0 && sc.duration_ps <= LAST_ARRIVAL_PS,
            "{}: duration {} ps: a run lasts 1..=2^63 ps (Scenario::set_duration says why)",
            sc.path,
            sc.duration_ps
        );
        assert!(
            sc.duration_ps.div_ceil(sc.window_ps) <= MAX_WINDOWS
                && sc.duration_ps.div_ceil(sc.latency_window_ps) <= MAX_WINDOWS
                && crate::scenario::check_cells(
                    sc.duration_ps,
                    sc.window_ps,
                    sc.latency_window_ps,
                    sc.apps.len()
                )
                .is_ok(),
            "{}: duration {} ps in windows of {} ps (latency {} ps): more than {MAX_WINDOWS} \
             windows, or {MAX_WINDOW_CELLS} windows × applications (Scenario::set_duration \
             says why)",
            sc.path,
            sc.duration_ps,
            sc.window_ps,
            sc.latency_window_ps
        );
        let napps = sc.apps.len();
        let nflows = flows.len();
        let mut app_flow0 = vec![0u32; napps];
        let mut seen = vec![false; napps];
        for (i, f) in flows.iter().enumerate() {
            if !seen[f.app as usize] {
                seen[f.app as usize] = true;
                app_flow0[f.app as usize] = i as u32;
            }
        }
        let nwin = sc.duration_ps.div_ceil(sc.window_ps) as usize;
        let nlat = sc.duration_ps.div_ceil(sc.latency_window_ps) as usize;
        let is_rr: Vec<bool> = sc
            .apps
            .iter()
            .map(|a| matches!(a.kind, AppKind::RequestResponse { .. }))
            .collect();
        Sim {
            sc,
            nics,
            flows,
            app_flow0,
            app_next_flow: vec![0; napps],
            heap: BinaryHeap::new(),
            seq: 0,
            rngs: (0..napps)
                .map(|i| Rng::new(sc.seed, 1 + i as u64))
                .collect(),
            migrate_rng: Rng::new(sc.seed, 0x316A),
            reqs: Slab::default(),
            drops: Vec::new(),
            queued: vec![FxHashMap::default(); napps],
            flows_at: sc.apps.iter().map(FlowsAt::new).collect(),
            app_active: vec![0; napps],
            events: 0,
            budget: sc.max_events,
            net: sc
                .apps
                .iter()
                .any(|a| a.kind.over_tcp())
                .then(|| NetState::new(&sc.network, &sc.program.link, nflows, sc.seed)),
            done_slots: Vec::new(),
            out: NicRun {
                kind,
                duration_ps: sc.duration_ps,
                window_bytes: vec![vec![0; napps]; nwin],
                app_packets: vec![0; napps],
                app_bytes: vec![0; napps],
                app_drops: vec![0; napps],
                app_latency: vec![Latency::default(); napps],
                app_queued: vec![0; napps],
                window_latency: (0..nlat)
                    .map(|_| is_rr.iter().map(|&r| r.then(Latency::default)).collect())
                    .collect(),
                wire_bytes: 0,
                wire_busy_ps: 0,
                links: 1,
                packets: 0,
                counters: NicCounters::default(),
                requests_issued: vec![0; napps],
                requests_done: vec![0; napps],
                app_gaps: vec![Gaps::default(); napps],
                app_tcp: vec![None; napps],
                app_rx_delay: vec![Latency::default(); napps],
                switch: None,
                receiver: None,
                events: 0,
            },
        }
    }

    /// Which NIC models handling `ev` may write into: an event of one application or flow
    /// writes into its host's at most; moving flows between cores and the network's and the
    /// receivers' events write into none.
    fn writes_to(&self, ev: Ev) -> Option<usize> {
        match ev {
            Ev::Step { app, .. } | Ev::Request { app } => {
                Some(self.sc.apps[app as usize].host as usize)
            }
            Ev::Migrate => None,
            Ev::ClosedRequest { flow }
            | Ev::Udp { flow }
            | Ev::Retry { flow }
            | Ev::TxDone { flow, .. }
            | Ev::AckIn { flow, .. }
            | Ev::Rto { flow }
            | Ev::TcpRequest { flow, .. } => Some(self.flows[flow as usize].host as usize),
            Ev::PortIn { .. } | Ev::RxIn { .. } | Ev::RxDone { .. } | Ev::RxWake { .. } => None,
        }
    }

    /// The error for a run past its budget at `now`.
    fn over_budget(&self, now: u64) -> BudgetExceeded {
        BudgetExceeded {
            path: self.sc.path.clone(),
            model: self.out.kind,
            budget: self.budget,
            from: self.sc.max_events_from.clone(),
            events: self.events,
            at_ps: now,
            duration_ps: self.sc.duration_ps,
        }
    }

    pub(super) fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse(Timed {
            t,
            seq: self.seq,
            ev,
        }));
    }

    pub(super) fn run(
        mut self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<NicRun, BudgetExceeded> {
        let sc = self.sc;
        for (ai, a) in sc.apps.iter().enumerate() {
            for (si, &(t, _)) in a.schedule.iter().enumerate() {
                if t < sc.duration_ps {
                    self.at(
                        t,
                        Ev::Step {
                            app: ai as u32,
                            step: si as u32,
                        },
                    );
                }
            }
        }
        if let Some(m) = sc.host.migrate_ps {
            if m < sc.duration_ps {
                self.at(m, Ev::Migrate);
            }
        }
        let end = sc.duration_ps;
        let link = sc.program.link;
        let mut now = 0u64;
        // When each sending host's link is free.
        let mut link_free = vec![0u64; self.nics.len()];
        let mut next_progress = 0u64;
        const PROGRESS_EVERY: u64 = 1 << 16;
        // Wire time of the last frame size seen (most frames are MTU-sized; saves a u128
        // division per packet).
        let mut wire_cache = (u32::MAX, 0u64);
        loop {
            while let Some(Reverse(top)) = self.heap.peek() {
                if top.t > now {
                    break;
                }
                let ev = top.ev;
                self.heap.pop();
                // The model an event may write into is brought up to `now` first.
                if self.nics.len() == 1 {
                    self.nics[0].advance(now);
                } else if let Some(h) = self.writes_to(ev) {
                    self.nics[h].advance(now);
                }
                self.events += 1;
                self.handle(now, ev);
                if self.events > self.budget {
                    return Err(self.over_budget(now));
                }
            }
            self.events += 1;
            self.nics.iter_mut().for_each(|n| n.advance(now));
            self.drain_drops(now);
            for (h, free) in link_free.iter_mut().enumerate() {
                if now < *free {
                    continue;
                }
                if let Some(p) = self.nics[h].poll(now) {
                    if wire_cache.0 != p.bytes {
                        wire_cache = (p.bytes, wire_ps(p.bytes, &link));
                    }
                    let w = wire_cache.1;
                    *free = now + w;
                    self.depart(now, w, p);
                    self.drain_drops(now);
                }
            }
            if self.events > self.budget {
                return Err(self.over_budget(now));
            }
            if now >= end {
                break;
            }
            if self.events >= next_progress {
                progress(now, self.events);
                next_progress = self.events + PROGRESS_EVERY;
            }
            let mut next = end;
            if let Some(Reverse(top)) = self.heap.peek() {
                next = next.min(top.t);
            }
            for (h, &free) in link_free.iter().enumerate() {
                if free > now {
                    next = next.min(free);
                }
                if let Some(t) = self.nics[h].next_event(now) {
                    next = next.min(t);
                }
            }
            debug_assert!(next > now || next == end, "time must advance at {now}");
            now = next.max(now + 1).min(end.max(now + 1));
        }
        progress(end, self.events);
        self.count_unfinished();
        for (app, q) in self.queued.iter().enumerate() {
            let ages = &mut self.out.app_latency[app].unfinished;
            for (&written_ps, &n) in q {
                ages.record_n(self.sc.duration_ps.saturating_sub(written_ps), n);
            }
            self.out.app_queued[app] = q.values().sum();
        }
        self.tcp_totals();
        self.out.counters = self.nics.iter().fold(NicCounters::default(), |a, n| {
            let c = n.counters();
            NicCounters {
                doorbell_writes: a.doorbell_writes + c.doorbell_writes,
                descriptor_reads: a.descriptor_reads + c.descriptor_reads,
                payload_reads: a.payload_reads + c.payload_reads,
                cpu_ps: a.cpu_ps + c.cpu_ps,
            }
        });
        self.out.links = self.nics.len() as u64;
        self.out.events = self.events;
        Ok(self.out)
    }

    /// Requests still open at the end (responses queued or on the wire) count as their age.
    fn count_unfinished(&mut self) {
        for slot in self.reqs.in_use() {
            self.unfinished(slot);
        }
    }
}
