//! weft-sim: a deterministic discrete-event simulator that sets NIC designs side by side on
//! the experiments of Loom (NSDI '19 §2, §7), SENIC (NSDI '14 §7) and TONIC (IoT-J '21 §V).
//!
//! A [`scenario::Scenario`] (YAML) describes a host, tenants' applications and a policy; the
//! simulator ([`sim`]) runs it once per NIC model ([`nic`]) in integer picoseconds, seeded
//! ([`rng`]), reading no clock; [`metrics`] turns runs into fairness, shares and latency, and
//! [`report`] writes `summary.json`, `timeseries.csv`, SVG plots and `index.html`;
//! [`aggregate`] sets the summaries of runs with several seeds side by side as statistics.
//! TCP applications cross a network behind the link ([`net`]: a switch port, link delays, a
//! receive path) over connections modelled by [`tcp`].
//!
//! Invariants: a run is a pure function of (scenario, seed, model): same inputs, identical
//! outputs, byte for byte. Every packet an application writes is transmitted once, dropped
//! with a count, or still queued when the run ends.

pub mod aggregate;
pub mod metrics;
pub mod net;
pub mod nic;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod sim;
mod slab;
pub mod tcp;

pub use nic::NicKind;
pub use scenario::{load, load_str, Overrides, Scenario, ScenarioError};
pub use sim::{BudgetExceeded, NicRun};

/// Runs `models` (the scenario's list when empty) and returns their raw results in order.
/// `progress(model_index, sim_now_ps)` is called now and then.
///
/// # Panics
/// When a run reaches the scenario's event budget ([`Scenario::max_events`]);
/// [`try_run_all`] returns that as an error.
pub fn run_all(
    sc: &Scenario,
    models: &[NicKind],
    progress: &mut dyn FnMut(usize, u64),
) -> Vec<NicRun> {
    try_run_all(sc, models, &mut |p| progress(p.model, p.now_ps)).unwrap_or_else(|e| panic!("{e}"))
}

/// Where a run is, for progress reports ([`try_run_all`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Index of the model in the list being run.
    pub model: usize,
    /// Simulated time done, ps (of the scenario's `duration_ps`).
    pub now_ps: u64,
    /// Events of this model's run so far ([`NicRun::events`]).
    pub events: u64,
}

/// Runs `models` (the scenario's list when empty), each within the scenario's event budget
/// ([`Scenario::max_events`]), and returns their raw results in order, or the first run
/// that reached the budget (the later models are not run). `progress` is called every
/// 65,536 events or so of each run, and at its end.
pub fn try_run_all(
    sc: &Scenario,
    models: &[NicKind],
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<NicRun>, BudgetExceeded> {
    let list: Vec<NicKind> = if models.is_empty() {
        sc.nics.clone()
    } else {
        models.to_vec()
    };
    list.iter()
        .enumerate()
        .map(|(model, &k)| {
            sim::try_run(sc, k, &mut |now_ps, events| {
                progress(Progress {
                    model,
                    now_ps,
                    events,
                })
            })
        })
        .collect()
}
