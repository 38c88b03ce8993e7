//! The discrete-event simulator: a sending host with C cores, its applications' flows, one NIC
//! model and a link of the policy's rate, in integer picoseconds (or several such hosts, for
//! TCP applications across a network: `tcp.rs`, [`crate::net`]). The receiver is the far end
//! of the link: a packet is delivered when its last bit leaves (no loss on the wire), except
//! a TCP packet, which crosses the network.
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
//!
//! Files: this one holds the entry points ([`run`], [`try_run`]: the NIC model built for a
//! run, and [`derive_app_info`], what it knows of the applications) and the budget's error;
//! `event_loop.rs` the timed events and the loop that visits the link and the NIC model;
//! `apps.rs` the applications' flows and what each kind writes (the traffic sources);
//! `link.rs` what a departure or a drop does to the flows and requests; `measure.rs` the raw
//! results ([`NicRun`], [`Gaps`]) and the throughput windows a frame is credited to.

mod apps;
mod event_loop;
mod ingress;
mod link;
mod measure;
mod tcp;

use weft_core::policy::{Algo, Classification, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::reference::ReferenceEngine;

use crate::nic::engine::EngineNic;
use crate::nic::hwq::HwqNic;
use crate::nic::{AppInfo, NicKind};
use crate::scenario::{Scenario, DEFAULT_MAX_EVENTS};

use apps::{build_flows, Flow};
use event_loop::Sim;
pub use measure::{Gaps, NicRun, ReceiverTotals, SwitchTotals, TcpCounts, TcpTotals};

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
                while let Some(parent) = prog.node(n).parent {
                    let pn = prog.node(parent);
                    match pn.algo {
                        Algo::Wfq => weight = prog.node(n).edge.weight,
                        Algo::Prio if pn.children.len() > 1 => {
                            let mine = prog.node(n).edge.priority;
                            let min = pn
                                .children
                                .iter()
                                .map(|c| prog.node(c).edge.priority)
                                .min()
                                .unwrap_or(mine);
                            let unique = pn
                                .children
                                .iter()
                                .filter(|&c| prog.node(c).edge.priority == min)
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
    // Each sending host runs its own NIC model (and, for the engine models, its own engine).
    let hosts = usize::from(sc.network.hosts.max(1));
    match kind {
        NicKind::Sq | NicKind::Loom | NicKind::Senic => {
            // The policy on weft-core's engine: the fast one, or the reference twin.
            fn on<E: weft_core::sched::Engine>(
                sc: &Scenario,
                kind: NicKind,
                engines: Vec<E>,
                flows: Vec<Flow>,
                progress: &mut dyn FnMut(u64, u64),
            ) -> Result<NicRun, BudgetExceeded> {
                let h = &sc.host;
                let nics = engines
                    .into_iter()
                    .map(|engine| {
                        EngineNic::new(
                            kind,
                            engine,
                            &sc.nic_params,
                            h.cores,
                            h.cpu_ps_per_packet,
                            h.cpu_ps_per_doorbell,
                        )
                    })
                    .collect();
                Sim::new(sc, kind, nics, flows).run(progress)
            }
            let p = &sc.program;
            if sc.nic_params.reference_engine {
                let engines = (0..hosts)
                    .map(|_| ReferenceEngine::new(p.clone()))
                    .collect();
                on(sc, kind, engines, flows, progress)
            } else {
                let engines = (0..hosts).map(|_| FastEngine::new(p.clone())).collect();
                on(sc, kind, engines, flows, progress)
            }
        }
        _ => {
            let policy_qdisc = sc.nic_params.qdisc_of(kind) == crate::nic::MqQdisc::Policy;
            let nics = (0..hosts)
                .map(|_| {
                    let nic = HwqNic::new(
                        kind,
                        &sc.nic_params,
                        h.cores,
                        flows.len(),
                        apps.clone(),
                        h.cpu_ps_per_packet,
                        h.cpu_ps_per_doorbell,
                    );
                    if policy_qdisc {
                        nic.with_policy_qdiscs(&sc.program)
                    } else {
                        nic
                    }
                })
                .collect();
            Sim::new(sc, kind, nics, flows).run(progress)
        }
    }
}
