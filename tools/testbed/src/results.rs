//! What the testbed reports, as types: `report.json` ([`Report`]: an experiment's setup and
//! one [`ModeResult`] per scheduler) and `weft testbed bench --json` ([`BenchReport`]). The
//! schema is written here once: each field's doc says what it is, and units are in the names
//! (`_bps` bits/s, `_mbps` Mbit/s, `_s`, `_ms`, `_us` µs, `_kb`, `_pct` percent,
//! `_bytes`, `_pps` packets/s).
//!
//! Invariants: a document's keys are its fields, in their order; a figure that is not a
//! number (a rate over no time) is written `null`, as serde_json writes a non-finite float,
//! and is read back as absent ([`finite`]); what a tool or the daemon printed is kept as the
//! JSON it printed (`Value`), not reinterpreted. Every type also reads back from its JSON,
//! to the same bytes. Cost: none past (de)serializing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use weft_nic::stats::{PortStats, Stats, TimingStats};

/// `x` as the JSON has it: `None` for a number that is not finite (written `null`).
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// `report.json`: an experiment, and what each scheduler made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The experiment's name (`fair-1v8`, `latency`, ...).
    pub experiment: String,
    /// The uplink's rate, bits per second.
    pub rate_bps: u64,
    /// Measured seconds (after the warm-up).
    pub seconds: u32,
    /// Each tenant's weight and iperf3 flows, in tenant order.
    pub tenants: Vec<TenantSetup>,
    /// One result per scheduler, in the order they ran.
    pub results: Vec<ModeResult>,
}

/// A tenant of the experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSetup {
    /// Its weight in the policy (and its HTB class's share).
    pub weight: u64,
    /// Its parallel iperf3 TCP flows.
    pub flows: u32,
}

/// One scheduler's result, by kind of experiment (written as the result itself, untagged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ModeResult {
    /// The throughput experiments: `fair-1v8`, `weights-123`, `dest-limit` and the
    /// robustness ones (`rogue`, `spoof`, `flood`, `mac-flood`, `metrics-flood`,
    /// `link-flap`, `reload`).
    Throughput(Box<ThroughputResult>),
    /// `latency` and `memcached`.
    Latency(Box<LatencyResult>),
    /// `limit-priority`.
    LimitPriority(Box<LimitPriorityResult>),
}

impl ModeResult {
    /// The scheduler that ran: `weft` or `htb`.
    pub fn scheduler(&self) -> &str {
        match self {
            ModeResult::Throughput(r) => &r.scheduler,
            ModeResult::Latency(r) => &r.scheduler,
            ModeResult::LimitPriority(r) => &r.scheduler,
        }
    }
}

/// A throughput experiment's result under one scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThroughputResult {
    /// `weft` or `htb`.
    pub scheduler: String,
    /// The CPUs the applications ran on (`taskset` list), or `all`.
    pub app_cpus: String,
    /// weft only, and not across a reload: each node's rate from weft's own byte counters
    /// over the measured window, by name.
    pub leaf_mbps: Option<Rates>,
    /// With a per-destination limit: the limited class's rate against it.
    pub limit: Option<LimitRate>,
    /// weft only, with a reload halfway: the daemon's answers.
    pub reload: Option<ReloadAnswers>,
    /// With a reload halfway: the shares over the second half's last seconds.
    pub after_reload: Option<AfterReload>,
    /// Jain's index of the tenants' rates over their weights (null without traffic).
    pub jain: Option<f64>,
    /// The tenants' rates together, Mbit/s (iperf3's goodput).
    pub total_mbps: f64,
    /// The largest relative error of a tenant's rate against its weight's share.
    pub max_rel_error: f64,
    /// weft's daemon's CPU over the run, percent of one CPU (null under HTB).
    pub weft_cpu_pct: Option<f64>,
    /// The whole system's busy share over the run, percent.
    pub system_cpu_pct: Option<f64>,
    /// CPUs (1.0: one CPU's time) the processes outside the testbed took meanwhile
    /// ([`ForeignCpu`](super::ForeignCpu)).
    pub foreign_cpu: Option<f64>,
    /// Each tenant's iperf3 result, in tenant order.
    pub tenants: Vec<TenantResult>,
    /// weft's daemon's resident memory at the start and end of the window, kB.
    pub weft_rss_kb: Rss,
    /// `metrics-flood` only.
    pub metrics_flood: Option<MetricsFlood>,
    /// `link-flap` only.
    pub link_flap: Option<LinkFlap>,
    /// weft's `ctl stats` once the traffic was over and the NIC drained.
    pub weft_stats: Option<Stats>,
    /// weft's log lines (at most 2,000): each the JSON object it printed, or a string.
    pub weft_log: Option<Vec<Value>>,
}

/// A tenant's iperf3 result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantResult {
    /// Its id, 1-based.
    pub tenant: usize,
    pub weight: u64,
    pub flows: u32,
    /// Goodput at the receiver, Mbit/s, to a tenth.
    pub mbps: f64,
    /// Goodput per second after the warm-up, Mbit/s, to a tenth.
    pub mbps_per_second: Vec<f64>,
    /// TCP retransmissions.
    pub retransmits: u64,
    /// Its weight's share of the tenants' total, Mbit/s, to a tenth.
    pub ideal_mbps: f64,
    /// Its relative error against that share, to 4 decimals.
    pub rel_error: f64,
}

/// Rates by name (a node's, a leaf's), Mbit/s, in the policy's order; written as one JSON
/// object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates(pub Vec<(String, f64)>);

impl Rates {
    /// `name`'s rate, if it has one that is a number ([`finite`]).
    pub fn get(&self, name: &str) -> Option<f64> {
        let (_, r) = self.0.iter().find(|(n, _)| n == name)?;
        finite(*r)
    }
}

impl Serialize for Rates {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, r) in &self.0 {
            m.serialize_entry(name, r)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Rates {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rates, D::Error> {
        // In order; `null` (not a number) as NaN, which writes `null` again.
        let m = serde_json::Map::<String, Value>::deserialize(d)?;
        Ok(Rates(
            m.into_iter()
                .map(|(n, v)| (n, v.as_f64().unwrap_or(f64::NAN)))
                .collect(),
        ))
    }
}

/// The limited class's rate at L2 (frame bytes, as the limit counts them): weft's leaf
/// counter; for HTB, goodput × 1514/1448 (full-size TCP segments with timestamps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitRate {
    /// The limited destination address.
    pub dst: String,
    /// The limit, Mbit/s.
    pub limit_mbps: f64,
    /// The class's rate at L2, Mbit/s, to a hundredth.
    pub l2_mbps: f64,
    /// Its relative error against the limit, to 4 decimals.
    pub rel_error: f64,
}

/// A reload halfway: an invalid policy, then the new weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadAnswers {
    /// The daemon's answer to the invalid policy, as it sent it (null without one).
    pub invalid: Value,
    /// The policy's generation after it (unchanged: the invalid policy is refused).
    pub generation_after_invalid: Option<u64>,
    /// The daemon's answer to the valid policy, as it sent it.
    pub valid: Value,
}

/// The shares after a reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfterReload {
    /// The weights reloaded.
    pub weights: Vec<u64>,
    /// Each tenant's mean goodput over the second half's last seconds, Mbit/s.
    pub mbps_last_seconds: Vec<f64>,
}

/// weft's daemon's resident memory (`VmRSS`), kB; null under HTB or when not read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rss {
    pub start: Option<u64>,
    pub end: Option<u64>,
}

/// `metrics-flood`: concurrent scrapes, then idle connections held to the metrics endpoint
/// while the control socket is asked, then `stop` over the control socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFlood {
    /// What the burst of scrapes got, as its client printed it (`scrapes`, `answered`,
    /// `seconds`).
    pub scrapes: Value,
    /// The control socket's answers while the idle connections were held.
    pub control: ControlAnswers,
    /// `stop` over the control socket, the idle connections still held.
    pub stop: StopAnswer,
    /// The idle connections' client's last report, as it printed it (`held`, `peak`,
    /// `opened`, `closed_by_server`, `refused`), or null.
    pub hold: Value,
}

/// The control socket asked for stats every quarter of a second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlAnswers {
    pub asked: u32,
    pub answered: u32,
    /// The slowest answer, ms, to a tenth.
    pub max_ms: f64,
    /// The first five failures, as said.
    pub errors: Vec<String>,
}

/// `stop` asked over the control socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopAnswer {
    /// The daemon's answer as it sent it, or `{"error": ...}`.
    pub answer: Value,
    /// Seconds until the daemon exited, to a thousandth (null: not within 10 s).
    pub exited_s: Option<f64>,
}

/// `link-flap`: the uplink's wire down for a while mid-run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFlap {
    /// The outage as the testbed timed it, ms.
    pub down_ms: u64,
    /// The daemon's counters half a second into the outage and at its end.
    pub during: FlapCounters,
    /// The shares once TCP is back.
    pub after: AfterFlap,
}

/// Counters at two points of the outage (null: no answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlapCounters {
    /// Whether the daemon saw the uplink up.
    pub uplink_up: [Option<bool>; 2],
    /// Frames the loop transmitted.
    pub tx_frames: [Option<u64>; 2],
    /// Frames the uplink port transmitted.
    pub uplink_port_tx_frames: [Option<u64>; 2],
    /// Packets the engine dropped.
    pub engine_drops: [Option<u64>; 2],
}

/// The shares from three seconds after the outage to the window's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfterFlap {
    /// The seconds measured, to a hundredth.
    pub seconds: f64,
    /// Each node's rate from weft's counters, by name.
    pub leaf_mbps: Rates,
    /// The largest relative error of a tenant's leaf rate against its weight's share (null
    /// without traffic).
    pub max_rel_error: Option<f64>,
}

/// A latency experiment's result under one scheduler: tenant 1's probe idle, then under the
/// other tenants' load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyResult {
    pub scheduler: String,
    pub app_cpus: String,
    /// The probe alone.
    pub latency_idle: Probe,
    /// The probe under the other tenants' iperf3 flows.
    pub latency_loaded: Probe,
    /// The probe: `sockperf ping-pong` or `memcached (memaslap)`.
    pub app: String,
    /// The figure the ratio below is of: `p99_us` (sockperf) or `avg_us` (memaslap).
    pub loaded_over_idle: String,
    /// That figure loaded over idle, to a thousandth (null without both).
    pub p99_loaded_over_idle: Option<f64>,
    /// CPUs the processes outside the testbed took in each phase.
    pub foreign_cpu: LatencyCpu,
    /// weft only: its timing histograms of the idle phase (reset before the loaded one).
    pub weft_timing_idle: Option<TimingStats>,
    /// weft's `ctl stats` at the end.
    pub weft_stats: Option<Stats>,
}

/// CPUs (1.0: one CPU's time) the processes outside the testbed took, per phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyCpu {
    pub idle: Option<f64>,
    pub loaded: Option<f64>,
}

/// A latency probe's figures, as its tool reported them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Probe {
    /// sockperf's percentiles.
    Sockperf(Percentiles),
    /// memaslap's totals (null if its output did not read).
    Memaslap(Option<MemaslapTotals>),
}

impl Probe {
    /// Its figures by name, in the order written (`None` when it wrote none: memaslap's
    /// output did not read).
    pub fn figures(&self) -> Option<Vec<(&'static str, f64)>> {
        match self {
            Probe::Sockperf(p) => Some(p.figures()),
            Probe::Memaslap(m) => m.as_ref().map(MemaslapTotals::figures),
        }
    }

    /// The figure `name`, if it has one that is a number ([`finite`]).
    pub fn get(&self, name: &str) -> Option<f64> {
        let f = self.figures()?;
        let (_, x) = f.into_iter().find(|(n, _)| *n == name)?;
        finite(x)
    }
}

/// sockperf's latency percentiles, µs: those its summary gave, in the order it prints them
/// (highest first).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
}

impl Percentiles {
    /// The percentiles given, by name, in the order written.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        [
            ("p999_us", self.p999_us),
            ("p99_us", self.p99_us),
            ("p90_us", self.p90_us),
            ("p50_us", self.p50_us),
        ]
        .into_iter()
        .filter_map(|(n, x)| Some((n, x?)))
        .collect()
    }
}

/// memaslap's "Total Statistics" global line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemaslapTotals {
    /// Operations per second.
    pub ops_per_s: f64,
    /// Latency, µs: minimum, maximum, mean and standard deviation.
    pub min_us: f64,
    pub max_us: f64,
    pub avg_us: f64,
    pub std_us: f64,
}

impl MemaslapTotals {
    /// The totals by name, in the order written.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("ops_per_s", self.ops_per_s),
            ("min_us", self.min_us),
            ("max_us", self.max_us),
            ("avg_us", self.avg_us),
            ("std_us", self.std_us),
        ]
    }
}

/// `limit-priority`'s result under one scheduler: tenant 1's sockperf alone, then beside its
/// iperf3 flows under one destination limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitPriorityResult {
    pub scheduler: String,
    pub app_cpus: String,
    /// `sockperf ping-pong`.
    pub app: String,
    /// sockperf with iperf3 off, then on.
    pub latency_bulk_off: Percentiles,
    pub latency_bulk_on: Percentiles,
    /// p99 on over off, to a thousandth (null without both).
    pub p99_on_over_off: Option<f64>,
    /// The receiver's window while sockperf's test ran, s, to a hundredth.
    pub window_s: f64,
    /// sockperf's requests at the wire (frame + 20 bytes), Mbit/s, to a hundredth.
    pub latency_app_wire_mbps: f64,
    /// iperf3's rates.
    pub bulk: BulkRate,
    /// The limited destination's rate at the wire against the limit.
    pub limit: WireLimit,
    /// weft only: each leaf's rate over the window from weft's counters, by name.
    pub leaf_mbps: Option<Rates>,
    /// CPUs the processes outside the testbed took in each phase.
    pub foreign_cpu: BulkCpu,
    /// weft's `ctl stats` once the traffic was over and the NIC drained.
    pub weft_stats: Option<Stats>,
}

/// `limit-priority`'s bulk application (rates to a hundredth).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkRate {
    /// `iperf3`.
    pub app: String,
    pub flows: u32,
    /// Its goodput over its whole measured run, Mbit/s.
    pub mbps: f64,
    pub retransmits: u64,
    /// Its rate at the wire while sockperf's test ran (the destination's less sockperf's),
    /// Mbit/s.
    pub wire_mbps: f64,
    /// What the limit leaves it (the limit less sockperf's requests), Mbit/s.
    pub share_mbps: f64,
    /// Its wire rate's relative error against that share, to 4 decimals.
    pub share_rel_error: f64,
}

/// `limit-priority`'s limit and the destination's rate at the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireLimit {
    /// The limited destination address.
    pub dst: String,
    pub limit_mbps: f64,
    pub burst_bytes: u64,
    /// What reached the receiver while sockperf's test ran (frame + 20 bytes), Mbit/s.
    pub wire_mbps: f64,
    /// Its relative error against the limit, to 4 decimals.
    pub rel_error: f64,
}

/// CPUs the processes outside the testbed took with iperf3 off, then on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkCpu {
    pub bulk_off: Option<f64>,
    pub bulk_on: Option<f64>,
}

/// `weft testbed bench --json`: the forwarding benchmark's rows, and (added by the command)
/// the ratios between its configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchReport {
    /// Seconds per configuration.
    pub seconds: f64,
    /// One row per configuration and frame size, in the order run.
    pub rows: Vec<BenchRow>,
    /// Per frame size and weft backend: weft's Fig. 1 policy over the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratios: Option<Vec<BenchRatio>>,
}

/// One configuration at one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchRow {
    /// `weft LABEL` or `htb N classes`.
    pub config: String,
    pub frame_bytes: usize,
    /// Frames the blasters sent, and those the receiver counted, per second.
    pub offered_pps: f64,
    pub forwarded_pps: f64,
    /// weft only: frames the OS/NIC interface dropped, ring-full and no-buffer drops.
    pub weft_drops: Option<u64>,
    pub weft_ring_full: Option<u64>,
    pub weft_no_buffer: Option<u64>,
    /// weft only: its ports' counters.
    pub weft_ports: Option<Vec<PortStats>>,
}

/// weft's Fig. 1 policy's forwarded packets per second over the other configurations', at
/// one frame size and weft backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchRatio {
    pub frame_bytes: usize,
    pub backend: String,
    pub fig1_over_htb_1_class: f64,
    pub fig1_over_htb_1000_classes: f64,
    pub fig1_over_fifo: f64,
}
