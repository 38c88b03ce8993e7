//! The discrete-event simulator: a sending host with C cores, its applications' flows, one NIC
//! model and a link of the policy's rate, in integer picoseconds. The receiver is the far end
//! of the link: a packet is delivered when its last bit leaves (no loss on the wire).
//!
//! Workloads (see [`crate::scenario::AppKind`]):
//! * bulk flows keep at most `window_bytes` queued in host and NIC; a flow writes another
//!   segment (`host.segment_bytes`, cut into MTU packets) whenever its queued bytes fall to
//!   `window − segment` — the refill happens when its packets start on the wire (TCP small
//!   queues: backpressure from the NIC, not from the network). A flow that lost (dropped)
//!   packets writes nothing more until `host.retry_ps` has passed, then refills its window.
//! * Throughput: a frame's bytes count in the windows its wire time spans, in proportion,
//!   and only within the run, so no window holds more than its link can carry.
//! * request/response: Poisson request arrivals (or closed loop: one request per flow at a
//!   time, the next when the response completes, like sockperf ping-pong); each writes a
//!   response; its latency is the time from the request to the response's last bit on the
//!   wire. Every request that arrives within the run counts: one unfinished at the end (its
//!   response still queued, on the wire, or lost to a drop) counts as its age then, a lower
//!   bound ([`crate::metrics::Latency`]); a response whose last bit leaves after the run ends
//!   is unfinished.
//! * UDP: a packet every `mtu × 8 / rate` per flow; unlimited = twice the link rate; dropped
//!   at the socket when the flow holds `socket_limit_bytes`.
//! * Packet delay (bulk, UDP): write to the start on the wire; a packet still queued at the
//!   end counts as its age then, a lower bound, as an unfinished request does.
//! * Flow counts change at the application's schedule steps (start, `schedule`, stop).
//!
//! Event loop: a binary heap of timed events (application steps, requests, UDP ticks,
//! retries); the link asks the NIC model for a packet whenever it is free; the NIC model is
//! advanced to every instant anything happens, including its own `next_event`. Ties are
//! broken by insertion order, so a run is a pure function of the scenario and seed.
//!
//! Cost per simulated packet: one NIC poll, a few vector updates, a histogram increment and,
//! per segment, one refill; heap operations only for timed events, not per packet. At the
//! end, one pass over the request slots (the requests still open). A schedule step costs
//! the flows it starts or stops (not every flow of its application), and the flow count an
//! arriving request looks up is a binary search over the application's schedule, not a
//! scan of it.
//!
//! What costs more than the packets the link carries: a UDP flow is a timed event and a
//! packet written per `mtu × 8 / rate`, sent or not (dropped at the socket when full, else
//! usually in the NIC model once its queues are), so a run's work follows the offered
//! load: 10,000 `unlimited` UDP flows offer 20,000 times the link rate, 16.7 billion ticks
//! per simulated second at 10 Gbit/s, and the cost of each event grows with the flows too
//! (the timed-event heap and the models' per-flow state outgrow the caches: 3 times the
//! flows took 7.6 times as long for loom). The scenario loader caps the offered load
//! ([`crate::scenario::DEFAULT_MAX_TOTAL_OFFERED_LOAD`]).
//!
//! Budget: each run counts its events (every timed event handled, flow started or stopped,
//! packet written to the NIC model, and instant at which the link and the model are
//! visited: [`NicRun::events`]) and stops with [`BudgetExceeded`] when they pass the
//! scenario's `max_events` ([`crate::scenario::DEFAULT_MAX_EVENTS`]), checked after every
//! timed event and every instant (one event may add a step's flows or a write's packets,
//! bounded when loading): however long the duration, a run ends after its budget.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;
use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{Algo, Classification, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::link::wire_ps;
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::LAST_ARRIVAL_PS;
use weft_core::stats::{weighted_quantile, Histogram};

use crate::metrics::Latency;
use crate::nic::engine::EngineNic;
use crate::nic::hwq::HwqNic;
use crate::nic::{AppInfo, Nic, NicCounters, NicKind, Pkt};
use crate::rng::Rng;
use crate::scenario::{
    App, AppKind, Placement, Scenario, SizeDist, DEFAULT_MAX_EVENTS, MAX_OFFERED_LOAD, MAX_WINDOWS,
    MAX_WINDOW_CELLS,
};

/// A run that reached its event budget ([`Scenario::max_events`]) before the end of its
/// simulated time: it stopped there, and its results are discarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path}: {}: the run reached its budget of {budget} events{} at {} of {} simulated: \
     at that pace the whole run takes about {} events. Every timed event (a schedule step, a \
     request, a UDP tick, a retry), flow started or stopped, packet written and instant at \
     which the link and the NIC model are visited counts. Raise the budget with \
     `--max-events N` or `limits: {{max_events: N}}` in the scenario, or simulate less \
     (`--duration`)",
    model.name(),
    match from.as_deref() {
        None => format!(" (the default, 2^{})", DEFAULT_MAX_EVENTS.trailing_zeros()),
        Some(f) if f.starts_with("--") => format!(" ({f})"),
        Some(f) => format!(" (`limits: {{max_events}}` at {f})"),
    },
    weft_core::units::format_time(*at_ps),
    weft_core::units::format_time(*duration_ps),
    estimate(*events, *at_ps, *duration_ps)
)]
pub struct BudgetExceeded {
    /// The scenario's file.
    pub path: String,
    /// The NIC model whose run stopped.
    pub model: NicKind,
    /// The budget, events.
    pub budget: u64,
    /// Where the budget was set: `--max-events`, `file:line:col`, or `None` (the default).
    pub from: Option<String>,
    /// Events counted when the run stopped (the first past the budget).
    pub events: u64,
    /// Simulated time when it stopped, ps.
    pub at_ps: u64,
    /// The run's simulated time, ps.
    pub duration_ps: u64,
}

/// The events a whole run takes at the pace of its first `at_ps`, for messages: `1.2e10`.
fn estimate(events: u64, at_ps: u64, duration_ps: u64) -> String {
    if at_ps == 0 {
        return "more than that".into();
    }
    format!("{:.1e}", events as f64 * duration_ps as f64 / at_ps as f64)
}

/// `App::flows_at` in O(log steps): the flow count of the application's last schedule entry
/// (in the schedule's order) at or before a time, as `flows_at` reads it.
#[derive(Debug, Clone)]
struct FlowsAt {
    /// Distinct times of the schedule, ascending.
    times: Vec<u64>,
    /// The flow count from `times[i]` on.
    flows: Vec<u32>,
}

impl FlowsAt {
    fn new(a: &App) -> FlowsAt {
        let mut order: Vec<usize> = (0..a.schedule.len()).collect();
        order.sort_by_key(|&i| (a.schedule[i].0, i));
        let (mut times, mut flows) = (Vec::new(), Vec::new());
        // The latest entry (in the schedule's order) among those at or before the time.
        let mut last: Option<usize> = None;
        for (k, &i) in order.iter().enumerate() {
            last = Some(last.map_or(i, |l| l.max(i)));
            let t = a.schedule[i].0;
            if order.get(k + 1).is_none_or(|&j| a.schedule[j].0 != t) {
                times.push(t);
                flows.push(a.schedule[last.expect("set above")].1);
            }
        }
        FlowsAt { times, flows }
    }

    fn at(&self, t: u64) -> u32 {
        match self.times.partition_point(|&x| x <= t) {
            0 => 0,
            n => self.flows[n - 1],
        }
    }
}

/// What one run of one NIC model produced (raw; [`crate::metrics`] summarizes it).
#[derive(Debug, Clone)]
pub struct NicRun {
    pub kind: NicKind,
    /// Simulated time, ps.
    pub duration_ps: u64,
    /// Bytes sent per throughput window per application: `[window][app]`. A frame's
    /// bytes are spread over the windows its wire time spans, in proportion.
    pub window_bytes: Vec<Vec<u64>>,
    /// Per application: packets sent (that started on the wire), bytes sent within the
    /// run (the sum of the windows: a frame still on the wire at the end counts in part),
    /// drops.
    pub app_packets: Vec<u64>,
    pub app_bytes: Vec<u64>,
    pub app_drops: Vec<u64>,
    /// Per application: latency over the run (response completion for request/response
    /// applications, with the unfinished requests' ages at the end; packet sojourn from write
    /// to wire otherwise, with the ages at the end of the packets still queued then), ps.
    pub app_latency: Vec<Latency>,
    /// Per application: packets written outside requests (bulk, UDP) that were neither sent
    /// nor dropped by the end of the run: still queued in the host or the NIC.
    pub app_queued: Vec<u64>,
    /// Per latency window (of the request's arrival), per request/response application:
    /// completion times and unfinished requests' ages, ps (`None` for other applications).
    pub window_latency: Vec<Vec<Option<Latency>>>,
    /// Bytes on the wire including per-frame overhead (of every frame that started).
    pub wire_bytes: u64,
    /// Time the link spent transmitting within the run, ps: the part of a frame still on
    /// the wire when the run ends is not counted (at 1 bit/s a 1500 B frame takes 12,000 s).
    pub wire_busy_ps: u64,
    /// Packets transmitted.
    pub packets: u64,
    /// The model's counters.
    pub counters: NicCounters,
    /// Per application: requests that arrived within the run (request/response
    /// applications; 0 for others).
    pub requests_issued: Vec<u64>,
    /// Per application: requests whose response's last bit left within the run; the others
    /// issued are unfinished.
    pub requests_done: Vec<u64>,
    /// Per application: inter-departure times of its packets (SENIC Table 3).
    pub app_gaps: Vec<Gaps>,
    /// The run's work, events: every timed event handled, flow started or stopped, packet
    /// written to the NIC model, and instant at which the link and the model were visited
    /// (see [`crate::scenario::DEFAULT_MAX_EVENTS`]).
    pub events: u64,
}

/// Running statistics of the gaps between an application's departures, ps: their mean and
/// standard deviation, and their distribution for the jitter ([`Gaps::abs_dev_quantile_ps`]).
///
/// The distribution is kept in the buckets of a 3-digit [`Histogram`], each holding its
/// gaps' count and exact sum: gaps below 2,048 ps one bucket each, larger ones 1,024 buckets
/// per power of two (a bucket is at most 1/1,024 of its gaps wide, 0.1 %). A gap's distance
/// from the mean is taken as its bucket's mean gap's, so it is exact when a bucket's gaps
/// are equal (a constant rate gives 0, not a bucket's width) and off by less than a
/// bucket's width otherwise; the quantile over the buckets is then exact
/// ([`weighted_quantile`]). Memory: the buckets in use, at most 1,024 per power of two of
/// the gaps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gaps {
    last_ps: Option<u64>,
    /// Gaps seen.
    pub n: u64,
    sum: f64,
    sum_sq: f64,
    /// Per bucket (keyed by its lowest gap, ps): gaps in it and their sum, ps.
    buckets: FxHashMap<u64, (u64, u128)>,
}

impl Gaps {
    fn add(&mut self, t_ps: u64) {
        if let Some(l) = self.last_ps {
            let gap = t_ps - l;
            let g = gap as f64;
            self.n += 1;
            self.sum += g;
            self.sum_sq += g * g;
            let b = self
                .buckets
                .entry(Histogram::<3>::bucket_of(gap).0)
                .or_default();
            b.0 += 1;
            b.1 += gap as u128;
        }
        self.last_ps = Some(t_ps);
    }

    /// Mean gap, ps.
    pub fn mean_ps(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// Standard deviation of the gaps, ps.
    pub fn std_ps(&self) -> Option<f64> {
        let m = self.mean_ps()?;
        Some((self.sum_sq / self.n as f64 - m * m).max(0.0).sqrt())
    }

    /// The `q`-quantile (0..=1) of the gaps' distances from their mean, |gap − mean|, ps
    /// (the rank-th smallest, rank = ⌈q n⌉), or `None` without a gap: the jitter. Each gap
    /// counts at its bucket's mean gap (see [`Gaps`]).
    pub fn abs_dev_quantile_ps(&self, q: f64) -> Option<f64> {
        let mean = self.mean_ps()?;
        let mut devs: Vec<(f64, u64)> = self
            .buckets
            .values()
            .map(|&(c, sum)| ((sum as f64 / c as f64 - mean).abs(), c))
            .collect();
        weighted_quantile(&mut devs, q)
    }
}

/// A packet written at `written_ps` (outside requests) left its application's `queued`
/// counts: sent or dropped.
fn left_queue(queued: &mut FxHashMap<u64, u64>, written_ps: u64) {
    match queued.get_mut(&written_ps) {
        Some(n) if *n > 1 => *n -= 1,
        Some(_) => {
            queued.remove(&written_ps);
        }
        None => debug_assert!(false, "a packet written at {written_ps} ps left twice"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
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

#[derive(Debug, Clone)]
struct Flow {
    app: u16,
    core: u16,
    active: bool,
    retry_pending: bool,
    queued_bytes: u64,
    meta: PacketMeta,
}

#[derive(Debug, Clone, Copy)]
struct Req {
    arrival_ps: u64,
    remaining: u32,
    failed: bool,
    flow: u32,
    /// Arrived within the run (one at its last instant, `duration_ps`, does not count).
    counted: bool,
}

/// Per-application facts derived from the policy: the leaf, the tenant weight (the weight of
/// the highest ancestor whose parent is a `wfq` node), and whether the application is
/// prioritized (some ancestor-or-self is the most urgent child of a `prio` node with
/// several children).
pub fn derive_app_info(sc: &Scenario, kind: NicKind) -> Vec<AppInfo> {
    let prog: &Program = &sc.program;
    sc.apps
        .iter()
        .map(|a| {
            let mut weight = 1;
            let mut prio = false;
            if let Classification::Leaf { node, .. } = prog.classify(&a.meta) {
                let mut n = node;
                while let Some(parent) = prog.nodes[n as usize].parent {
                    let pn = &prog.nodes[parent as usize];
                    match pn.algo {
                        Algo::Wfq => weight = prog.nodes[n as usize].edge.weight,
                        Algo::Prio if pn.children.len() > 1 => {
                            let mine = prog.nodes[n as usize].edge.priority;
                            let min = pn
                                .children
                                .clone()
                                .map(|c| prog.nodes[c as usize].edge.priority)
                                .min()
                                .unwrap_or(mine);
                            let unique = pn
                                .children
                                .clone()
                                .filter(|&c| prog.nodes[c as usize].edge.priority == min)
                                .count()
                                == 1;
                            if mine == min && unique {
                                prio = true;
                            }
                        }
                        _ => {}
                    }
                    n = parent;
                }
            }
            let prioritized = a.prioritized.unwrap_or(prio);
            let dcb_class = a.dcb_class.unwrap_or(match kind {
                NicKind::MqPri => {
                    if prioritized {
                        0
                    } else {
                        1
                    }
                }
                _ => (a.tenant % 8) as u8,
            });
            AppInfo {
                tenant: a.tenant as u16,
                prioritized,
                dcb_class,
                tenant_weight: weight,
            }
        })
        .collect()
}

/// Runs one NIC model of the scenario; `progress(now_ps)` is called now and then.
///
/// # Panics
/// When the run reaches the scenario's event budget ([`try_run`] returns it).
pub fn run(sc: &Scenario, kind: NicKind, progress: &mut dyn FnMut(u64)) -> NicRun {
    try_run(sc, kind, &mut |now_ps, _| progress(now_ps)).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs one NIC model of the scenario within its event budget ([`Scenario::max_events`]);
/// `progress(now_ps, events)` is called every 65,536 events or so, and at the end.
pub fn try_run(
    sc: &Scenario,
    kind: NicKind,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<NicRun, BudgetExceeded> {
    let flows = build_flows(sc);
    let apps = derive_app_info(sc, kind);
    let h = &sc.host;
    match kind {
        NicKind::Sq | NicKind::Loom | NicKind::Senic => {
            // The policy on weft-core's engine: the fast one, or the reference twin.
            fn on<E: weft_core::sched::Engine>(
                sc: &Scenario,
                kind: NicKind,
                engine: E,
                flows: Vec<Flow>,
                progress: &mut dyn FnMut(u64, u64),
            ) -> Result<NicRun, BudgetExceeded> {
                let h = &sc.host;
                let nic = EngineNic::new(
                    kind,
                    engine,
                    &sc.nic_params,
                    h.cores,
                    h.cpu_ps_per_packet,
                    h.cpu_ps_per_doorbell,
                );
                Sim::new(sc, kind, nic, flows).run(progress)
            }
            let p = sc.program.clone();
            if sc.nic_params.reference_engine {
                on(sc, kind, ReferenceEngine::new(p), flows, progress)
            } else {
                on(sc, kind, FastEngine::new(p), flows, progress)
            }
        }
        _ => {
            let nic = HwqNic::new(
                kind,
                &sc.nic_params,
                h.cores,
                flows.len(),
                apps,
                h.cpu_ps_per_packet,
                h.cpu_ps_per_doorbell,
            );
            let policy_qdisc = sc.nic_params.qdisc_of(kind) == crate::nic::MqQdisc::Policy;
            let nic = if policy_qdisc {
                nic.with_policy_qdiscs(&sc.program)
            } else {
                nic
            };
            Sim::new(sc, kind, nic, flows).run(progress)
        }
    }
}

/// Flows of every application (its most flows at once), placed on its cores.
fn build_flows(sc: &Scenario) -> Vec<Flow> {
    let mut rng = Rng::new(sc.seed, 0xF10E);
    let mut flows = Vec::new();
    for (ai, a) in sc.apps.iter().enumerate() {
        for k in 0..a.max_flows() {
            let core = match sc.host.placement {
                Placement::Random => a.cores[rng.below(a.cores.len() as u64) as usize],
                Placement::RoundRobin => a.cores[k as usize % a.cores.len()],
            };
            let mut meta = a.meta;
            if meta.present & Field::Sport.bit() == 0 {
                meta.set_int(Field::Sport, 10_000 + k as u64);
            }
            flows.push(Flow {
                app: ai as u16,
                core,
                active: false,
                retry_pending: false,
                queued_bytes: 0,
                meta,
            });
        }
    }
    flows
}

struct Sim<'a, N: Nic> {
    sc: &'a Scenario,
    nic: N,
    flows: Vec<Flow>,
    /// First flow index of each application.
    app_flow0: Vec<u32>,
    app_next_flow: Vec<u32>,
    heap: BinaryHeap<Reverse<Timed>>,
    seq: u64,
    rngs: Vec<Rng>,
    reqs: Vec<Req>,
    free_reqs: Vec<u32>,
    drops: Vec<Pkt>,
    /// Per application, packets written outside requests (bulk, UDP) and not yet sent or
    /// dropped, counted by the time they were written, ps: at the end each counts as its
    /// age then (`duration − written`), a lower bound of its packet delay. A write's
    /// packets share one count: O(1) a packet, memory per write still queued.
    queued: Vec<FxHashMap<u64, u64>>,
    /// Per application: its flow counts over time ([`FlowsAt`]), and the flows its steps
    /// have made active so far (flows `0..n` of the application are).
    flows_at: Vec<FlowsAt>,
    app_active: Vec<u32>,
    /// Events so far ([`NicRun::events`]), and the budget.
    events: u64,
    budget: u64,
    out: NicRun,
}

impl<'a, N: Nic> Sim<'a, N> {
    fn new(sc: &'a Scenario, kind: NicKind, nic: N, flows: Vec<Flow>) -> Sim<'a, N> {
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
            nic,
            flows,
            app_flow0,
            app_next_flow: vec![0; napps],
            heap: BinaryHeap::new(),
            seq: 0,
            rngs: (0..napps)
                .map(|i| Rng::new(sc.seed, 1 + i as u64))
                .collect(),
            reqs: Vec::new(),
            free_reqs: Vec::new(),
            drops: Vec::new(),
            queued: vec![FxHashMap::default(); napps],
            flows_at: sc.apps.iter().map(FlowsAt::new).collect(),
            app_active: vec![0; napps],
            events: 0,
            budget: sc.max_events,
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
                packets: 0,
                counters: NicCounters::default(),
                requests_issued: vec![0; napps],
                requests_done: vec![0; napps],
                app_gaps: vec![Gaps::default(); napps],
                events: 0,
            },
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

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse(Timed {
            t,
            seq: self.seq,
            ev,
        }));
    }

    fn run(mut self, progress: &mut dyn FnMut(u64, u64)) -> Result<NicRun, BudgetExceeded> {
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
        let end = sc.duration_ps;
        let link = sc.program.link;
        let mut now = 0u64;
        let mut link_free = 0u64;
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
                self.nic.advance(now);
                self.events += 1;
                self.handle(now, ev);
                if self.events > self.budget {
                    return Err(self.over_budget(now));
                }
            }
            self.events += 1;
            self.nic.advance(now);
            self.drain_drops(now);
            if now >= link_free {
                if let Some(p) = self.nic.poll(now) {
                    if wire_cache.0 != p.bytes {
                        wire_cache = (p.bytes, wire_ps(p.bytes, &link));
                    }
                    let w = wire_cache.1;
                    link_free = now + w;
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
            if link_free > now {
                next = next.min(link_free);
            }
            if let Some(t) = self.nic.next_event(now) {
                next = next.min(t);
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
        self.out.counters = self.nic.counters();
        self.out.events = self.events;
        Ok(self.out)
    }

    /// Requests still open at the end (responses queued or on the wire) count as their age.
    fn count_unfinished(&mut self) {
        let mut free = vec![false; self.reqs.len()];
        for &s in &self.free_reqs {
            free[s as usize] = true;
        }
        for (slot, free) in free.into_iter().enumerate() {
            if !free {
                self.unfinished(slot as u32);
            }
        }
    }

    /// Request `slot` did not complete within the run: its latency is at least its age at
    /// the end.
    fn unfinished(&mut self, slot: u32) {
        let sc = self.sc;
        let r = self.reqs[slot as usize];
        if !r.counted {
            return;
        }
        let app = self.flows[r.flow as usize].app as usize;
        let age = sc.duration_ps - r.arrival_ps;
        let o = &mut self.out;
        o.app_latency[app].unfinished.record(age);
        let lw = ((r.arrival_ps / sc.latency_window_ps) as usize).min(o.window_latency.len() - 1);
        if let Some(h) = &mut o.window_latency[lw][app] {
            h.unfinished.record(age);
        }
    }

    fn handle(&mut self, now: u64, ev: Ev) {
        let sc = self.sc;
        match ev {
            Ev::Step { app, step } => {
                let a = &sc.apps[app as usize];
                let n = a.schedule[step as usize].1;
                let f0 = self.app_flow0[app as usize];
                let was_active =
                    self.flows_at[app as usize].at(now.saturating_sub(1)) > 0 && step > 0;
                // Flows 0..before are active: only those between the two counts change
                // (the lowest first, as when every flow was visited).
                let before = std::mem::replace(&mut self.app_active[app as usize], n);
                self.events += u64::from(before.abs_diff(n));
                for k in n..before {
                    self.flows[(f0 + k) as usize].active = false;
                }
                for k in before..n {
                    let fi = f0 + k;
                    self.flows[fi as usize].active = true;
                    match a.kind {
                        AppKind::Bulk { .. } => self.refill(now, fi),
                        AppKind::Udp { .. } => self.at(now, Ev::Udp { flow: fi }),
                        AppKind::RequestResponse {
                            closed_loop: true, ..
                        } => self.at(now, Ev::ClosedRequest { flow: fi }),
                        AppKind::RequestResponse { .. } => {}
                    }
                }
                if let AppKind::RequestResponse {
                    rate_per_s,
                    closed_loop: false,
                    ..
                } = a.kind
                {
                    if n > 0 && !was_active {
                        let gap = self.rngs[app as usize].exp(1e12 / rate_per_s) as u64;
                        self.at(now.saturating_add(gap.max(1)), Ev::Request { app });
                    }
                }
            }
            Ev::Request { app } => {
                let a = &sc.apps[app as usize];
                let AppKind::RequestResponse { rate_per_s, .. } = a.kind else {
                    return;
                };
                let n = self.flows_at[app as usize].at(now);
                if n == 0 {
                    return;
                }
                let gap = self.rngs[app as usize].exp(1e12 / rate_per_s) as u64;
                let k = self.app_next_flow[app as usize] % n;
                self.app_next_flow[app as usize] = k + 1;
                let fi = self.app_flow0[app as usize] + k;
                self.issue_request(now, app, fi);
                self.at(now.saturating_add(gap.max(1)), Ev::Request { app });
            }
            Ev::ClosedRequest { flow } => {
                let f = &self.flows[flow as usize];
                if f.active {
                    let app = f.app as u32;
                    self.issue_request(now, app, flow);
                }
            }
            Ev::Udp { flow } => {
                let f = &self.flows[flow as usize];
                if !f.active {
                    return;
                }
                let a = &sc.apps[f.app as usize];
                let AppKind::Udp {
                    rate_bps,
                    socket_limit_bytes,
                } = a.kind
                else {
                    return;
                };
                let mtu = sc.host.mtu_bytes as u64;
                // Unlimited: twice the link rate, the most an explicit rate may be (in 128
                // bits: the link may be 2^64 - 1 bit/s).
                let rate = rate_bps.map_or(
                    MAX_OFFERED_LOAD as u128 * sc.program.link.rate_bps as u128,
                    u128::from,
                );
                let gap = (mtu as u128 * 8 * 1_000_000_000_000).div_ceil(rate.max(1)) as u64;
                if f.queued_bytes + mtu > socket_limit_bytes {
                    self.out.app_drops[f.app as usize] += 1;
                } else {
                    self.send(now, flow, mtu, u32::MAX);
                }
                self.at(now.saturating_add(gap.max(1)), Ev::Udp { flow });
            }
            Ev::Retry { flow } => {
                self.flows[flow as usize].retry_pending = false;
                self.refill(now, flow);
            }
        }
    }

    /// A request of application `app` arrives for flow `fi`: the response is written now.
    fn issue_request(&mut self, now: u64, app: u32, fi: u32) {
        let sc = self.sc;
        let AppKind::RequestResponse { size, .. } = &sc.apps[app as usize].kind else {
            return;
        };
        let bytes = match *size {
            SizeDist::Fixed(b) => b,
            SizeDist::Exponential(m) => (self.rngs[app as usize].exp(m as f64) as u64).max(1),
        };
        let mtu = sc.host.mtu_bytes as u64;
        let counted = now < sc.duration_ps;
        if counted {
            self.out.requests_issued[app as usize] += 1;
        }
        let req = Req {
            arrival_ps: now,
            remaining: bytes.div_ceil(mtu) as u32,
            failed: false,
            flow: fi,
            counted,
        };
        let slot = match self.free_reqs.pop() {
            Some(s) => {
                self.reqs[s as usize] = req;
                s
            }
            None => {
                self.reqs.push(req);
                (self.reqs.len() - 1) as u32
            }
        };
        self.send(now, fi, bytes, slot);
    }

    /// A request finished (or failed) at `t`: a closed-loop flow sends its next one then.
    fn request_done(&mut self, t: u64, slot: u32) {
        self.free_reqs.push(slot);
        let fi = self.reqs[slot as usize].flow;
        let app = self.flows[fi as usize].app as usize;
        if let AppKind::RequestResponse {
            closed_loop: true, ..
        } = self.sc.apps[app].kind
        {
            self.at(t, Ev::ClosedRequest { flow: fi });
        }
    }

    /// Writes `bytes` on flow `fi` as MTU packets, then ends the burst (doorbells).
    fn send(&mut self, now: u64, fi: u32, bytes: u64, req: u32) {
        let mtu = self.sc.host.mtu_bytes as u64;
        let f = &self.flows[fi as usize];
        let (app, core, meta) = (f.app, f.core, f.meta);
        if req == u32::MAX && bytes > 0 {
            *self.queued[app as usize].entry(now).or_insert(0) += bytes.div_ceil(mtu);
        }
        self.events += bytes.div_ceil(mtu);
        let mut left = bytes;
        while left > 0 {
            let b = left.min(mtu);
            left -= b;
            let pkt = Pkt {
                flow: fi,
                app,
                core,
                bytes: b as u32,
                submit_ps: now,
                req,
            };
            self.flows[fi as usize].queued_bytes += b;
            self.nic.submit(now, pkt, &meta);
        }
        self.nic.flush(now, core);
    }

    /// Tops a bulk flow up to its window, a segment at a time.
    fn refill(&mut self, now: u64, fi: u32) {
        let f = &self.flows[fi as usize];
        if !f.active {
            return;
        }
        let AppKind::Bulk { window_bytes } = self.sc.apps[f.app as usize].kind else {
            return;
        };
        let seg = self.sc.host.segment_bytes.min(window_bytes).max(1);
        while self.flows[fi as usize].queued_bytes + seg <= window_bytes {
            self.send(now, fi, seg, u32::MAX);
        }
    }

    fn depart(&mut self, now: u64, wire: u64, p: Pkt) {
        let sc = self.sc;
        let o = &mut self.out;
        let app = p.app as usize;
        o.app_bytes[app] += credit_windows(
            &mut o.window_bytes,
            app,
            p.bytes as u64,
            now,
            wire,
            sc.window_ps,
            sc.duration_ps,
        );
        o.app_packets[app] += 1;
        o.app_gaps[app].add(now);
        o.packets += 1;
        o.wire_bytes += p.bytes as u64 + sc.program.link.overhead_bytes;
        // Frames never overlap (the next starts when this one ends), so the sum stays within
        // the run's length.
        o.wire_busy_ps += wire.min(sc.duration_ps - now);
        if p.req != u32::MAX {
            let r = &mut self.reqs[p.req as usize];
            r.remaining -= 1;
            if r.remaining == 0 {
                // Completed when its last bit leaves: within the run, or unfinished.
                if r.counted && !r.failed && now + wire <= sc.duration_ps {
                    let lat = now + wire - r.arrival_ps;
                    o.app_latency[app].done.record(lat);
                    let lw = ((r.arrival_ps / sc.latency_window_ps) as usize)
                        .min(o.window_latency.len() - 1);
                    if let Some(h) = &mut o.window_latency[lw][app] {
                        h.done.record(lat);
                    }
                    o.requests_done[app] += 1;
                } else {
                    self.unfinished(p.req);
                }
                self.request_done(now + wire, p.req);
            }
        } else {
            o.app_latency[app].done.record(now - p.submit_ps);
            left_queue(&mut self.queued[app], p.submit_ps);
        }
        let f = &mut self.flows[p.flow as usize];
        f.queued_bytes -= p.bytes as u64;
        if let AppKind::Bulk { window_bytes } = sc.apps[app].kind {
            let seg = sc.host.segment_bytes.min(window_bytes).max(1);
            // A flow that lost packets writes nothing until its retry: the lost bytes left
            // its queue, and refilling here would rewrite them at once.
            if f.active && !f.retry_pending && f.queued_bytes + seg <= window_bytes {
                self.refill(now, p.flow);
            }
        }
    }

    fn drain_drops(&mut self, now: u64) {
        self.nic.take_drops(&mut self.drops);
        if self.drops.is_empty() {
            return;
        }
        let drops = std::mem::take(&mut self.drops);
        for p in &drops {
            self.out.app_drops[p.app as usize] += 1;
            self.flows[p.flow as usize].queued_bytes -= p.bytes as u64;
            if p.req == u32::MAX {
                left_queue(&mut self.queued[p.app as usize], p.submit_ps);
            } else {
                let r = &mut self.reqs[p.req as usize];
                r.failed = true;
                r.remaining -= 1;
                if r.remaining == 0 {
                    self.unfinished(p.req);
                    self.request_done(now, p.req);
                }
            }
            let f = &mut self.flows[p.flow as usize];
            if matches!(self.sc.apps[p.app as usize].kind, AppKind::Bulk { .. })
                && f.active
                && !f.retry_pending
            {
                f.retry_pending = true;
                // A retry past the end of the clock never happens.
                let t = now.saturating_add(self.sc.host.retry_ps);
                self.at(t, Ev::Retry { flow: p.flow });
            }
        }
        let mut d = drops;
        d.clear();
        self.drops = d;
    }
}

/// Credits a frame's `bytes` to the throughput windows its wire time `[start, start + wire)`
/// overlaps, in proportion to the overlap, and returns how many were credited: the bytes
/// whose share of the wire time falls within the run (`< duration`). A frame within one
/// window (nearly all of them) is credited whole without a division; one spanning windows
/// is split with the running floor `bytes × elapsed / wire`, so the parts add up exactly.
/// `window_bytes` has a row for every window that starts before `duration`.
/// At 1 bit/s a 1500 B frame spans 12,000 s: counted at its start, as it once was, a window
/// read megabits per second on a link of one bit per second.
fn credit_windows(
    window_bytes: &mut [Vec<u64>],
    app: usize,
    bytes: u64,
    start: u64,
    wire: u64,
    window_ps: u64,
    duration: u64,
) -> u64 {
    debug_assert!(window_ps > 0, "windows of no time");
    if start >= duration {
        // The run's last instant polls the link once more: that frame is all after the run.
        return 0;
    }
    let end = start.saturating_add(wire).min(duration);
    let first = start / window_ps;
    // The window holding the frame's last instant within the run.
    let last = end.saturating_sub(1).max(start) / window_ps;
    if first == last && end - start == wire {
        window_bytes[first as usize][app] += bytes;
        return bytes;
    }
    // Bytes credited once `t - start` ps of the frame have been sent. (A frame of no wire
    // time, on the fastest links, took the whole-frame path above.)
    debug_assert!(wire > 0, "a frame of no wire time spans no windows");
    let upto = |t: u64| (bytes as u128 * (t - start) as u128 / wire as u128) as u64;
    let mut credited = 0;
    for w in first..=last {
        let to = ((w + 1) * window_ps).min(end);
        let c = upto(to);
        window_bytes[w as usize][app] += c - credited;
        credited = c;
    }
    credited
}

#[cfg(test)]
mod tests {
    use super::{credit_windows, FlowsAt, Gaps, Histogram};
    use crate::scenario::{App, AppKind};

    /// The index reads every schedule as `App::flows_at` does, at every time around its
    /// entries: sorted ones, ties, and a stop written before a later step (the schedule is
    /// then out of time order, and `flows_at` takes the last entry at or before the time).
    #[test]
    fn flows_at_index_reads_as_flows_at() {
        let schedules: [&[(u64, u32)]; 5] = [
            &[(0, 3)],
            &[(10, 2), (20, 5), (30, 0)],
            &[(0, 1), (5, 4), (5, 2), (9, 0)],
            &[(0, 8), (40, 16), (20, 0)],
            &[(7, 1), (7, 0), (7, 3), (100, 2), (50, 0)],
        ];
        for sched in schedules {
            let app = App {
                name: "a".into(),
                tenant: 0,
                meta: Default::default(),
                kind: AppKind::Bulk { window_bytes: 1 },
                cores: vec![0],
                schedule: sched.to_vec(),
                schedule_at: vec![None; sched.len()],
                prioritized: None,
                dcb_class: None,
            };
            let idx = FlowsAt::new(&app);
            for &(t, _) in sched {
                for t in [t.saturating_sub(1), t, t + 1, u64::MAX] {
                    assert_eq!(idx.at(t), app.flows_at(t), "{sched:?} at {t}");
                }
            }
        }
    }

    fn windows(n: usize) -> Vec<Vec<u64>> {
        vec![vec![0; 2]; n]
    }

    #[test]
    fn a_frame_within_one_window_is_credited_whole() {
        let mut w = windows(3);
        assert_eq!(
            credit_windows(&mut w, 1, 1500, 1_000, 500, 1_000, 3_000),
            1500
        );
        assert_eq!(w, vec![vec![0, 0], vec![0, 1500], vec![0, 0]]);
        // Ending exactly at the window's end.
        assert_eq!(
            credit_windows(&mut w, 0, 100, 2_900, 100, 1_000, 3_000),
            100
        );
        assert_eq!(w[2], vec![100, 0]);
    }

    #[test]
    fn a_frame_across_windows_is_split_by_its_wire_time() {
        let mut w = windows(4);
        // 1,000 bytes over [500, 3,500): a sixth, a third, a third, a sixth.
        assert_eq!(
            credit_windows(&mut w, 0, 1000, 500, 3_000, 1_000, 4_000),
            1000
        );
        let got: Vec<u64> = w.iter().map(|r| r[0]).collect();
        assert_eq!(got, vec![166, 334, 333, 167]);
    }

    #[test]
    fn the_part_after_the_run_is_not_credited() {
        let mut w = windows(2);
        // Half the frame's wire time is past the 2,000 ps run.
        assert_eq!(
            credit_windows(&mut w, 0, 1000, 1_500, 1_000, 1_000, 2_000),
            500
        );
        assert_eq!(w, vec![vec![0, 0], vec![500, 0]]);
        // A frame of 12,000 s at 1 bit/s in a 1 ms run of 1 µs windows: each window gets its
        // microsecond's share, 1500 B / 1.2e10 µs, which rounds to nothing.
        let mut w = windows(1_000);
        let credited = credit_windows(
            &mut w,
            1,
            1500,
            0,
            12_000 * 10u64.pow(12),
            10u64.pow(6),
            10u64.pow(9),
        );
        assert_eq!(credited, 0);
        assert!(w.iter().all(|r| r[1] == 0));
    }

    #[test]
    fn a_frame_of_no_wire_time_is_credited_at_its_start() {
        let mut w = windows(2);
        assert_eq!(credit_windows(&mut w, 0, 64, 1_999, 0, 1_000, 2_000), 64);
        assert_eq!(w[1][0], 64);
    }

    /// Departures at the given gaps (ps), from 0.
    fn gaps(list: &[u64]) -> Gaps {
        let mut g = Gaps::default();
        let mut t = 0;
        g.add(t);
        for &d in list {
            t += d;
            g.add(t);
        }
        g
    }

    /// The jitter is the 99th percentile of |gap − mean| over the gaps: one late packet in a
    /// hundred is within it, two are not; a constant rate has none, exactly, whatever the
    /// buckets' width; gaps a bucket apart differ as they do.
    #[test]
    fn interdeparture_jitter_is_the_p99_distance_from_the_mean() {
        let mut one = vec![10_000_000u64; 99];
        one.push(20_000_000);
        let g = gaps(&one);
        assert_eq!((g.n, g.mean_ps()), (100, Some(10_100_000.0)));
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(100_000.0));
        assert_eq!(g.abs_dev_quantile_ps(1.0), Some(9_900_000.0));
        let mut two = vec![10_000_000u64; 98];
        two.extend([20_000_000, 20_000_000]);
        let g = gaps(&two);
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(9_800_000.0));
        assert!((g.std_ps().unwrap() - 1_400_000.0).abs() < 1.0, "{g:?}");

        // 12 µs (1500 B at 1 Gbit/s) every time: 0, not the bucket's 8 ns width.
        let g = gaps(&[12_000_000; 1000]);
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(0.0));
        assert_eq!(g.std_ps(), Some(0.0));
        // Small gaps have a bucket each: exact.
        let g = gaps(&[100, 300, 100, 300]);
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(100.0));
        // Larger ones within 0.1 %: 12 µs ± 200 ns alternating, the distance 200 ns.
        let g = gaps(&[11_800_000, 12_200_000].repeat(50));
        let d = g.abs_dev_quantile_ps(0.99).unwrap();
        assert!((d - 200_000.0).abs() <= 12_200_000.0 / 1024.0, "{d}");
        assert_eq!(Gaps::default().abs_dev_quantile_ps(0.99), None);
        assert_eq!(gaps(&[]).abs_dev_quantile_ps(0.99), None);
        // Buckets are at most 1/1024 of their gaps wide, and in order.
        for v in [
            1023u64,
            1024,
            1025,
            2047,
            2048,
            12_000_000,
            u64::MAX / 2,
            u64::MAX,
        ] {
            let bucket = |v: u64| Histogram::<3>::bucket_of(v).0;
            assert!(bucket(v) < bucket(v.saturating_add(v / 1000 + 2)) || v == u64::MAX);
            assert!(bucket(v) <= bucket(v.saturating_add(1)));
        }
    }
}
