//! weft-sim: a deterministic discrete-event simulator that sets NIC designs side by side on
//! the experiments of Loom (NSDI '19 §2, §7), SENIC (NSDI '14 §7) and TONIC (IoT-J '21 §V).
//!
//! A [`scenario::Scenario`] (YAML) describes a host, tenants' applications and a policy; the
//! simulator ([`sim`]) runs it once per NIC model ([`nic`]) in integer picoseconds, seeded
//! ([`rng`]), reading no clock; [`metrics`] turns runs into fairness, shares and latency, and
//! [`report`] writes `summary.json`, `timeseries.csv`, SVG plots and `index.html`.
//!
//! Invariants: a run is a pure function of (scenario, seed, model): same inputs, identical
//! outputs, byte for byte. Every packet an application writes is transmitted once, dropped
//! with a count, or still queued when the run ends.

pub mod metrics;
pub mod nic;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod sim;

pub use nic::NicKind;
pub use scenario::{load, load_str, Overrides, Scenario, ScenarioError};
pub use sim::NicRun;

/// Runs `models` (the scenario's list when empty) and returns their raw results in order.
/// `progress(model_index, sim_now_ps)` is called now and then.
pub fn run_all(
    sc: &Scenario,
    models: &[NicKind],
    progress: &mut dyn FnMut(usize, u64),
) -> Vec<NicRun> {
    let list: Vec<NicKind> = if models.is_empty() {
        sc.nics.clone()
    } else {
        models.to_vec()
    };
    list.iter()
        .enumerate()
        .map(|(i, &k)| sim::run(sc, k, &mut |t| progress(i, t)))
        .collect()
}
