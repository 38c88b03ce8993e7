//! `summary.json`: its schema, written down once as the types below ([`Summary`] and what
//! it holds, serialized in their fields' order), and how the analysed runs fill it in.
//!
//! A key's unit is in its name (`_bps`, `_s`, `_per_s`, `_us`: every number under
//! `latency_us` and `interdeparture_us` is in µs); shares, ratios and Jain's index have
//! none. Objects keyed by name ([`ByName`]: models, tenants, applications, sets of
//! backlogged tenants) keep the order of the scenario, or of first occurrence.
//!
//! Invariants: numbers are rounded (6 significant digits for ratios, 4 for latencies, whole
//! numbers for rates), so the same runs give the same bytes; a percentile that falls on
//! unfinished requests says it is a lower bound (`_at_least`); a value that cannot be
//! computed (Jain's index without a window of two backlogged tenants, a relative error
//! without an ideal share, a percentile without a sample) is `null`.
//!
//! Cost: linear in windows × applications × models; a name's entry is found in O(1).

use rustc_hash::FxHashMap;
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::{headline_app, round, Analysed};
use crate::metrics::Latency;
use crate::scenario::{AppKind, Scenario, Tenant};
use crate::sim::{ReceiverTotals, TcpCounts};

/// Entries keyed by a name (a model, a tenant, an application, a set of backlogged
/// tenants), written as a JSON object in the order they were added. A name added again
/// replaces the earlier entry's value and keeps its place, as a `serde_json::Map` does:
/// the names a scenario loads are unique, but a library caller may run a model twice.
#[derive(Debug, Clone, PartialEq)]
pub struct ByName<T> {
    entries: Vec<(String, T)>,
    /// The position of each name in `entries`.
    index: FxHashMap<String, usize>,
}

impl<T> Default for ByName<T> {
    fn default() -> Self {
        ByName {
            entries: Vec::new(),
            index: FxHashMap::default(),
        }
    }
}

impl<T> ByName<T> {
    /// Adds `value` under `name`, or replaces the value of an earlier entry of that name.
    pub fn insert(&mut self, name: String, value: T) {
        match self.index.get(&name) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(name.clone(), self.entries.len());
                self.entries.push((name, value));
            }
        }
    }

    /// The entry of `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.index.get(name).map(|&i| &self.entries[i].1)
    }

    /// The entries in their order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many names there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<T> FromIterator<(String, T)> for ByName<T> {
    fn from_iter<I: IntoIterator<Item = (String, T)>>(iter: I) -> Self {
        let mut m = ByName::default();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<T: Serialize> Serialize for ByName<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.entries.iter().map(|(k, v)| (k, v)))
    }
}

/// `summary.json`: the scenario's facts, then each model's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The scenario's `name`.
    pub scenario: String,
    /// The scenario's `description` (empty without one).
    pub description: String,
    /// The policy's name.
    pub policy: String,
    /// The seed of every random stream.
    pub seed: u64,
    /// The simulated time, s, and the throughput and latency windows' length, s.
    pub duration_s: f64,
    pub window_s: f64,
    pub latency_window_s: f64,
    /// The scenario's `time_scale` as written.
    pub time_scale: Option<String>,
    /// Simulated seconds per paper second (`time_scale` parsed; null without one).
    pub time_scale_ratio: Option<f64>,
    /// The link's rate, bit/s.
    pub link_rate_bps: u64,
    /// The application the report headlines, `tenant/app` ([`headline_app`]).
    pub headline_app: String,
    /// Per model, in the order run.
    pub nics: ByName<NicSummary>,
}

/// One model's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NicSummary {
    /// Jain's index of the backlogged tenants' throughput over their ideal shares: the
    /// lowest and the mean over the windows that have one (two or more tenants backlogged
    /// throughout), and how many those are. Null without such a window.
    pub jain_min: Option<f64>,
    pub jain_mean: Option<f64>,
    pub jain_windows: usize,
    /// The same per set of backlogged tenants (`T1+T2`: the phases of Loom Fig. 9), in the
    /// order the sets first occur.
    pub jain_by_backlogged_tenants: ByName<JainPhase>,
    /// The fraction of the run the link was transmitting (a frame still on the wire at
    /// the end counts up to the end): at most 1.
    pub link_utilization: f64,
    /// Bytes sent within the run, as bit/s.
    pub throughput_bps: f64,
    /// Packets that started on the wire, and packets dropped.
    pub packets: u64,
    pub drops: u64,
    /// The model's work: doorbell (PCIe) writes, DMA reads (descriptors and payloads, then
    /// each), per simulated second.
    pub doorbell_writes_per_s: f64,
    pub dma_reads_per_s: f64,
    pub descriptor_reads_per_s: f64,
    pub payload_reads_per_s: f64,
    /// The host's CPU time, s, and the cores it kept busy on average.
    pub cpu_s: f64,
    pub cpu_cores_busy: f64,
    /// The switch port TCP applications cross (runs with TCP applications only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchSummary>,
    /// The receiving host's path (runs with TCP applications only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<ReceiverTotals>,
    /// Per tenant, in the scenario's order.
    pub tenants: ByName<TenantSummary>,
}

/// Jain's index over the windows in which one set of tenants was backlogged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JainPhase {
    /// The windows, and the index's lowest and mean value over them.
    pub windows: usize,
    pub jain_min: f64,
    pub jain_mean: f64,
}

/// A tenant: its applications together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantSummary {
    /// Bytes sent within the run, as bit/s.
    pub mean_bps: f64,
    /// Its share of the bytes sent, its ideal share (the policy's, over the ideal bytes
    /// of every window), and `|share − ideal| / ideal` (null without an ideal share).
    pub share: f64,
    pub ideal_share: f64,
    pub rel_error: Option<f64>,
    /// Its first request/response application's latency, else every application's packet
    /// delay together.
    pub latency_us: LatencySummary,
    /// Packets of its applications dropped.
    pub drops: u64,
    /// Per application, in the scenario's order.
    pub apps: ByName<AppSummary>,
}

/// An application.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppSummary {
    pub kind: Kind,
    /// As a tenant's ([`TenantSummary`]), for this application alone.
    pub mean_bps: f64,
    pub share: f64,
    pub ideal_share: f64,
    pub rel_error: Option<f64>,
    /// Request/response: request to the response's last bit on the wire; bulk and UDP:
    /// packet delay, write to wire.
    pub latency_us: LatencySummary,
    pub drops: u64,
    /// Request/response applications only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<Requests>,
    /// Bulk and UDP applications only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<Packets>,
    /// The jitter of its departures, when it sent two packets or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interdeparture_us: Option<Interdeparture>,
    /// TCP applications only: what their connections counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSummary>,
}

/// A TCP application's connections over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpSummary {
    /// Connections opened.
    pub connections: u64,
    /// Payload that reached the receivers in order within the run, as bit/s (`mean_bps`
    /// counts frames on the host's wire, retransmissions and headers included).
    pub goodput_bps: f64,
    /// Its connections' retransmissions, timeouts, ECN cuts and reordering.
    #[serde(flatten)]
    pub counts: TcpCounts,
    /// How long its packets waited in the receiving host (ring and CPU), µs.
    pub rx_delay_us: LatencySummary,
    /// Sized flows (`size`) only: the job they make up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobSummary>,
}

/// The flows of a TCP application with `size`, as one job (Loom §7.3's job completion
/// time): its flows' completion times are the application's `latency_us`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSummary {
    /// Flows started, and of them completed within the run.
    pub flows: u64,
    pub completed: u64,
    /// From the first flow's start to the last one's completion, µs; null while a flow is
    /// unfinished at the end.
    pub completion_us: Option<f64>,
}

/// The switch port's counts over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwitchSummary {
    /// Frames forwarded, dropped for want of buffer, and marked CE.
    pub forwarded: u64,
    pub dropped: u64,
    pub marked: u64,
    /// The mean over the run of what all the switch's ports hold together, and the largest
    /// backlog a frame joined at one port, wire bytes (the counts above are of all ports).
    pub mean_backlog_bytes: f64,
    pub max_backlog_bytes: u64,
}

/// An application's kind, as a scenario names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Bulk,
    RequestResponse,
    Udp,
    Tcp,
}

/// Latency percentiles, µs, over every request that arrived within the run (every packet
/// written, for bulk and UDP applications): an unfinished one counts as its age at the end
/// ([`Latency`]), and `pN_at_least` says the percentile falls on one, so it is a lower
/// bound. A percentile is null without a sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    pub p50: Option<f64>,
    pub p50_at_least: bool,
    pub p90: Option<f64>,
    pub p90_at_least: bool,
    pub p99: Option<f64>,
    pub p99_at_least: bool,
    /// The samples, of which `unfinished` are ages at the end.
    pub samples: u64,
    pub unfinished: u64,
}

/// A request/response application's requests that arrived within the run: completed
/// (the response's last bit left within it) or unfinished.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Requests {
    pub issued: u64,
    pub completed: u64,
    pub unfinished: u64,
}

/// A bulk or UDP application's packets: sent, and still queued at the end (their delays'
/// lower bounds are `latency_us.unfinished`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Packets {
    pub sent: u64,
    pub queued_at_end: u64,
}

/// The gaps between an application's consecutive departures, µs: mean, standard
/// deviation, the 99th percentile of |gap − mean| (SENIC Table 3's jitter), and how many.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interdeparture {
    pub mean: f64,
    pub std: f64,
    pub p99_abs_dev: f64,
    pub gaps: u64,
}

/// The summary of all runs as summary.json holds it ([`Summary`]).
pub fn summary(sc: &Scenario, an: &[Analysed]) -> Value {
    serde_json::to_value(Summary::new(sc, an)).expect("a summary's keys are strings")
}

impl Summary {
    /// The summary of all runs: the scenario's facts, then a summary per model.
    pub fn new(sc: &Scenario, an: &[Analysed]) -> Summary {
        let dur_s = sc.duration_ps as f64 / 1e12;
        let hl = &sc.apps[headline_app(sc)];
        Summary {
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            policy: sc.program.name.clone(),
            seed: sc.seed,
            duration_s: round(dur_s, 9),
            window_s: round(sc.window_ps as f64 / 1e12, 9),
            latency_window_s: round(sc.latency_window_ps as f64 / 1e12, 9),
            time_scale: sc.time_scale.clone(),
            time_scale_ratio: sc
                .time_scale_ratio
                .map(|(paper, sim)| round(sim as f64 / paper as f64, 9)),
            link_rate_bps: sc.program.link.rate_bps,
            headline_app: format!("{}/{}", sc.tenants[hl.tenant].name, hl.name),
            nics: an
                .iter()
                .map(|a| {
                    let name = a.run.kind.name().to_string();
                    (name, NicSummary::new(sc, a, dur_s))
                })
                .collect(),
        }
    }
}

impl LatencySummary {
    fn new(h: &Latency) -> LatencySummary {
        let [p50, p90, p99] = [0.5, 0.9, 0.99].map(|p| h.quantile(p));
        let value = |q: Option<crate::metrics::Quantile>| q.map(|q| round(q.value as f64 / 1e6, 4));
        let at_least = |q: Option<crate::metrics::Quantile>| q.is_some_and(|q| q.at_least);
        LatencySummary {
            p50: value(p50),
            p50_at_least: at_least(p50),
            p90: value(p90),
            p90_at_least: at_least(p90),
            p99: value(p99),
            p99_at_least: at_least(p99),
            samples: h.count(),
            unfinished: h.unfinished.count(),
        }
    }
}

/// What a run sent set against its ideal: each application's bytes over the run's total,
/// and its ideal bytes ([`crate::metrics::Windows::ideal`]) over the ideal total.
struct Shares {
    /// Bytes sent by every application.
    total: f64,
    /// Per application: its ideal bytes over the run, and their sum.
    ideal: Vec<f64>,
    ideal_sum: f64,
}

impl Shares {
    fn new(sc: &Scenario, a: &Analysed) -> Shares {
        let ideal: Vec<f64> = (0..sc.apps.len())
            .map(|i| a.windows.ideal.iter().map(|w| w[i]).sum())
            .collect();
        Shares {
            total: a.run.app_bytes.iter().sum::<u64>() as f64,
            ideal_sum: ideal.iter().sum(),
            ideal,
        }
    }

    /// The share of the run's bytes that `b` bytes are.
    fn share(&self, b: f64) -> f64 {
        if self.total > 0.0 {
            b / self.total
        } else {
            0.0
        }
    }

    /// The share of the ideal total that `b` ideal bytes are.
    fn ideal_share(&self, b: f64) -> f64 {
        if self.ideal_sum > 0.0 {
            b / self.ideal_sum
        } else {
            0.0
        }
    }
}

/// The relative error of share `s` against the ideal `i` (none without an ideal share).
fn rel_error(s: f64, i: f64) -> Option<f64> {
    (i > 0.0).then(|| round((s - i).abs() / i, 6))
}

impl NicSummary {
    /// One model's summary: Jain's index (over all windows, and per set of backlogged
    /// tenants), the link's and the model's work per second, and its tenants'.
    fn new(sc: &Scenario, a: &Analysed, dur_s: f64) -> NicSummary {
        let r = a.run;
        let jains: Vec<f64> = a.windows.jain.iter().flatten().copied().collect();
        let jain_min = jains.iter().copied().fold(f64::INFINITY, f64::min);
        let jain_mean = jains.iter().sum::<f64>() / jains.len().max(1) as f64;
        let shares = Shares::new(sc, a);
        let c = r.counters;
        // The fraction of the run the link was busy (a frame still on the wire at the end
        // counts only up to the end): at most 1.
        // Over every sending host's link.
        let util = r.wire_busy_ps as f64 / sc.duration_ps as f64 / r.links.max(1) as f64;
        NicSummary {
            jain_min: (!jains.is_empty()).then(|| round(jain_min, 6)),
            jain_mean: (!jains.is_empty()).then(|| round(jain_mean, 6)),
            jain_windows: jains.len(),
            jain_by_backlogged_tenants: jain_by_backlog(sc, a),
            link_utilization: round(util, 6),
            throughput_bps: (shares.total * 8.0 / dur_s).round(),
            packets: r.packets,
            drops: r.app_drops.iter().sum::<u64>(),
            doorbell_writes_per_s: (c.doorbell_writes as f64 / dur_s).round(),
            dma_reads_per_s: ((c.descriptor_reads + c.payload_reads) as f64 / dur_s).round(),
            descriptor_reads_per_s: (c.descriptor_reads as f64 / dur_s).round(),
            payload_reads_per_s: (c.payload_reads as f64 / dur_s).round(),
            cpu_s: round(c.cpu_ps as f64 / 1e12, 6),
            cpu_cores_busy: round(c.cpu_ps as f64 / 1e12 / dur_s, 6),
            switch: r.switch.map(|w| SwitchSummary {
                forwarded: w.forwarded,
                dropped: w.dropped,
                marked: w.marked,
                mean_backlog_bytes: round(w.mean_backlog_bytes, 6),
                max_backlog_bytes: w.max_backlog_bytes,
            }),
            receiver: r.receiver,
            tenants: sc
                .tenants
                .iter()
                .map(|t| (t.name.clone(), TenantSummary::new(sc, a, t, &shares, dur_s)))
                .collect(),
        }
    }
}

/// Jain's index grouped by which tenants are backlogged (the phases of Loom Fig. 9), in
/// the order the phases first occur.
fn jain_by_backlog(sc: &Scenario, a: &Analysed) -> ByName<JainPhase> {
    let mut phases: Vec<(String, Vec<f64>)> = Vec::new();
    for (w, j) in a.windows.jain.iter().enumerate() {
        let Some(j) = j else { continue };
        let key = a.windows.backlogged[w]
            .iter()
            .map(|&t| sc.tenants[t].name.as_str())
            .collect::<Vec<_>>()
            .join("+");
        match phases.iter_mut().find(|p| p.0 == key) {
            Some(p) => p.1.push(*j),
            None => phases.push((key, vec![*j])),
        }
    }
    phases
        .into_iter()
        .map(|(k, js)| {
            let min = js.iter().copied().fold(f64::INFINITY, f64::min);
            let mean = js.iter().sum::<f64>() / js.len() as f64;
            let phase = JainPhase {
                windows: js.len(),
                jain_min: round(min, 6),
                jain_mean: round(mean, 6),
            };
            (k, phase)
        })
        .collect()
}

impl TenantSummary {
    /// A tenant's summary: its applications' bytes and shares together, its latency (its
    /// first request/response application's, else every application's), and each
    /// application's.
    fn new(sc: &Scenario, a: &Analysed, t: &Tenant, shares: &Shares, dur_s: f64) -> Self {
        let r = a.run;
        let bytes: f64 = t.apps.iter().map(|&i| r.app_bytes[i] as f64).sum();
        let ideal: f64 = t.apps.iter().map(|&i| shares.ideal[i]).sum();
        let mut lat = Latency::default();
        let lat_app = t
            .apps
            .iter()
            .copied()
            .find(|&i| matches!(sc.apps[i].kind, AppKind::RequestResponse { .. }));
        match lat_app {
            Some(i) => lat.merge(&r.app_latency[i]),
            None => t.apps.iter().for_each(|&i| lat.merge(&r.app_latency[i])),
        }
        TenantSummary {
            mean_bps: (bytes * 8.0 / dur_s).round(),
            share: round(shares.share(bytes), 6),
            ideal_share: round(shares.ideal_share(ideal), 6),
            rel_error: rel_error(shares.share(bytes), shares.ideal_share(ideal)),
            latency_us: LatencySummary::new(&lat),
            drops: t.apps.iter().map(|&i| r.app_drops[i]).sum::<u64>(),
            apps: t
                .apps
                .iter()
                .map(|&i| {
                    let app = AppSummary::new(sc, a, i, shares, dur_s);
                    (sc.apps[i].name.clone(), app)
                })
                .collect(),
        }
    }
}

impl AppSummary {
    /// Application `i`'s summary: its bytes and shares, latency, drops, its requests (or
    /// packets), and the jitter of its departures when it sent two packets or more.
    fn new(sc: &Scenario, a: &Analysed, i: usize, shares: &Shares, dur_s: f64) -> Self {
        let r = a.run;
        let app = &sc.apps[i];
        let b = r.app_bytes[i] as f64;
        let rr = matches!(app.kind, AppKind::RequestResponse { .. });
        // Jitter: the gaps between the application's consecutive departures.
        let g = &r.app_gaps[i];
        let interdeparture_us = match (g.mean_ps(), g.std_ps(), g.abs_dev_quantile_ps(0.99)) {
            (Some(m), Some(sd), Some(dev)) => Some(Interdeparture {
                mean: round(m / 1e6, 6),
                std: round(sd / 1e6, 6),
                p99_abs_dev: round(dev / 1e6, 6),
                gaps: g.n,
            }),
            _ => None,
        };
        AppSummary {
            kind: match app.kind {
                AppKind::Bulk { .. } => Kind::Bulk,
                AppKind::RequestResponse { .. } => Kind::RequestResponse,
                AppKind::Udp { .. } => Kind::Udp,
                AppKind::Tcp { .. } => Kind::Tcp,
            },
            mean_bps: (b * 8.0 / dur_s).round(),
            share: round(shares.share(b), 6),
            ideal_share: round(shares.ideal_share(shares.ideal[i]), 6),
            rel_error: rel_error(shares.share(b), shares.ideal_share(shares.ideal[i])),
            latency_us: LatencySummary::new(&r.app_latency[i]),
            drops: r.app_drops[i],
            requests: rr.then(|| {
                let (issued, done) = (r.requests_issued[i], r.requests_done[i]);
                Requests {
                    issued,
                    completed: done,
                    unfinished: issued - done,
                }
            }),
            // Their delays' lower bounds (`latency_us.unfinished`) are these.
            packets: (!rr).then(|| Packets {
                sent: r.app_packets[i],
                queued_at_end: r.app_queued[i],
            }),
            interdeparture_us,
            tcp: r.app_tcp[i].map(|t| TcpSummary {
                connections: t.connections,
                goodput_bps: (t.delivered_bytes as f64 * 8.0 / dur_s).round(),
                counts: t.counts,
                rx_delay_us: LatencySummary::new(&r.app_rx_delay[i]),
                job: t.first_start_ps.map(|first| JobSummary {
                    flows: t.connections,
                    completed: t.flows_completed,
                    completion_us: (t.flows_completed == t.connections)
                        .then(|| round((t.last_completion_ps - first) as f64 / 1e6, 4)),
                }),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::Value;

    use super::{summary, ByName};
    use crate::nic::NicKind;
    use crate::report::analyse;

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    /// Names keep the order they were added in; one added again keeps its place and takes
    /// the new value, as a `serde_json::Map` does.
    #[test]
    fn by_name_keeps_the_first_place_and_the_last_value() {
        let m: ByName<u32> = [("b", 1), ("a", 2), ("b", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("b", &3), ("a", &2)]);
        assert_eq!((m.len(), m.get("a"), m.get("c")), (2, Some(&2), None));
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"b":3,"a":2}"#);
        assert!(ByName::<u32>::default().is_empty());
    }

    /// summary.json's keys are in the schema's order at every level, and the optional ones
    /// are where their application kind has them.
    #[test]
    fn summary_keys_follow_the_schema() {
        let t = "duration: 2ms\npolicy_inline: |\n  weft: 1\n  link: {rate: 1gbit}\n  nodes:\n\
                 \x20   - {name: r, type: wfq}\n\
                 \x20   - {name: a, type: leaf, parent: r, match: {tenant: 1}}\n\
                 \x20   - {name: b, type: leaf, parent: r, match: {tenant: 2}}\n\
                 tenants:\n\
                 \x20 - name: A\n    meta: {tenant: 1}\n    apps:\n\
                 \x20     - {name: kv, kind: request-response, rate: 10000/s}\n\
                 \x20     - {name: bulk, kind: bulk}\n\
                 \x20 - name: B\n    meta: {tenant: 2}\n    apps:\n\
                 \x20     - {name: bulk, kind: bulk}\n";
        let sc = crate::load_str(Path::new("k.yaml"), t, &Default::default()).unwrap();
        let runs = crate::run_all(&sc, &[NicKind::Loom, NicKind::Mq], &mut |_, _| {});
        let s = summary(&sc, &analyse(&sc, &runs));
        assert_eq!(
            keys(&s),
            [
                "scenario",
                "description",
                "policy",
                "seed",
                "duration_s",
                "window_s",
                "latency_window_s",
                "time_scale",
                "time_scale_ratio",
                "link_rate_bps",
                "headline_app",
                "nics"
            ]
        );
        assert_eq!(keys(&s["nics"]), ["loom", "mq"]);
        let nic = &s["nics"]["mq"];
        assert_eq!(
            keys(nic),
            [
                "jain_min",
                "jain_mean",
                "jain_windows",
                "jain_by_backlogged_tenants",
                "link_utilization",
                "throughput_bps",
                "packets",
                "drops",
                "doorbell_writes_per_s",
                "dma_reads_per_s",
                "descriptor_reads_per_s",
                "payload_reads_per_s",
                "cpu_s",
                "cpu_cores_busy",
                "tenants"
            ]
        );
        assert_eq!(keys(&nic["tenants"]), ["A", "B"]);
        let tenant = [
            "mean_bps",
            "share",
            "ideal_share",
            "rel_error",
            "latency_us",
            "drops",
        ];
        assert_eq!(
            keys(&nic["tenants"]["A"]),
            [&tenant[..], &["apps"]].concat()
        );
        let app = |extra: &[&'static str]| [&["kind"], &tenant[..], extra].concat();
        let kv = &nic["tenants"]["A"]["apps"]["kv"];
        let bulk = &nic["tenants"]["B"]["apps"]["bulk"];
        assert_eq!(keys(kv), app(&["requests", "interdeparture_us"]));
        assert_eq!(keys(bulk), app(&["packets", "interdeparture_us"]));
        assert_eq!(kv["kind"], "request-response");
        assert_eq!(
            keys(&kv["latency_us"]),
            [
                "p50",
                "p50_at_least",
                "p90",
                "p90_at_least",
                "p99",
                "p99_at_least",
                "samples",
                "unfinished"
            ]
        );
        assert_eq!(keys(&kv["requests"]), ["issued", "completed", "unfinished"]);
        assert_eq!(keys(&bulk["packets"]), ["sent", "queued_at_end"]);
        assert_eq!(
            keys(&bulk["interdeparture_us"]),
            ["mean", "std", "p99_abs_dev", "gaps"]
        );
        for phase in nic["jain_by_backlogged_tenants"]
            .as_object()
            .unwrap()
            .values()
        {
            assert_eq!(keys(phase), ["windows", "jain_min", "jain_mean"]);
        }
    }
}
