//! Scenario files: the YAML that describes one experiment (format in
//! `examples/scenarios/README.md`): the policy (a path relative to the scenario file, or inline),
//! the host (cores, segment size), tenants with their packet metadata, applications
//! (bulk, request/response, UDP) with cores, flow counts and schedules, the NIC models to
//! compare with their parameters, duration, measurement windows and seed.
//!
//! Quantities take units as in policies (`10gbit`, `64kb`, `5us`; `weft_core::units`).
//! A scenario file is a regular file of at most [`MAX_SCENARIO_FILE_BYTES`] (16 MiB) of
//! UTF-8 text ([`read_scenario`]: a FIFO or `/dev/zero` is refused, not read for ever); the
//! YAML parser's own budget (250,000 nodes, a million parser events, 50,000 aliases) bounds
//! what a small text can expand to.
//!
//! What a scenario may ask of the simulator (`limits: {max_offered_load, max_events}`, or
//! the CLI's `--max-offered-load` and `--max-events` through [`Overrides`]): the offered
//! load of all its applications together (see the invariants below), refused when loading,
//! and an event budget per model's run ([`DEFAULT_MAX_EVENTS`]), which stops a run that
//! reaches it ([`crate::sim::BudgetExceeded`]). Everything else a small file could ask for
//! is bounded by the invariants (flows, windows and windows × applications, sizes, packets
//! at once) and refused when loading: loading costs time and memory in proportion to the
//! file, and a run's memory is bounded before it starts.
//!
//! Every error names the file, line and column of the offending value, in the scenario's
//! terms: a value of the wrong kind names its key and what it must be (the YAML library's
//! `invalid u16` becomes `` `cores` must be a whole number from 1 to 65535 ``), and the inline
//! policy's diagnostics name their line and column in the scenario file. What loads but does
//! nothing in a run of its duration (a start or schedule step at or after the end, a window
//! or a written `latency_window` longer than the run) is a warning ([`Scenario::warnings`]).
//!
//! Invariants of a loaded [`Scenario`]: the host has at least one core and every
//! application's cores exist on it; windows and duration are positive; the duration is at
//! most [`LAST_ARRIVAL_PS`] (2^63 ps: the simulator writes packets until the end, and the rest
//! of the 64-bit clock is headroom for what is queued then) and holds at most
//! [`MAX_WINDOWS`] throughput and latency windows, and at most [`MAX_WINDOW_CELLS`] windows
//! × applications of each kind; the MTU is 64..=65535 bytes; the segment, bulk windows,
//! response sizes (an exponential one's largest draw) and UDP socket limits are at most
//! [`MAX_SIZE_BYTES`]; the applications have at most [`MAX_FLOWS`] flows in all, and their
//! windows and closed-loop responses at most [`MAX_BURST_PACKETS`] packets at once; a UDP
//! flow's rate and a request/response application's offered load are at most
//! [`MAX_OFFERED_LOAD`] times the link rate (what `unlimited` offers), and all of them
//! together at any instant at most `limits.max_offered_load` times
//! ([`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]: the simulator's work grows with what is offered, not
//! with what the link carries); tenant names are unique, and application names within their
//! tenant (they key the reports); every tenant has an application, and every application
//! only its kind's keys (`window` bulk; `rate` request-response and UDP; `size`,
//! `size_dist`, `closed_loop` request-response; `socket_limit` UDP); at least one NIC
//! model, none twice; start < stop, and every schedule step before a written `stop`; the
//! policy compiled.
//!
//! Tenant and application names are non-empty, without whitespace, commas, double quotes
//! or control characters, as policy node names are (`weft_core::policy::parse::valid_name`):
//! they are columns of the CSV files, written unquoted, and cells of the terminal table. A
//! tenant's name has no `/` either: `tenant/app` names an application (summary.json's
//! `headline_app`, the terminal table, messages).
//!
//! The scenario's `name` follows the tenants' rule (it heads the terminal table and
//! summary.json; `weft demo` makes it a directory, so it is not `.` or `..` either); without
//! one, the file's stem is the name, each character the rule refuses replaced by `_`.
//! `description` and `time_scale` are free text without control characters (newlines and
//! tabs are fine in `description`; `time_scale` is one line of the terminal table's
//! heading) and without bidirectional overrides (index.html prints both, escaped). `time_scale` says what it means, `PAPER = SIMULATED` in
//! positive times (`1 paper second = 100 ms simulated`, then a note if any): it is parsed
//! ([`parse_time_scale`]) and summary.json gives the ratio.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_saphyr::Spanned;
use weft_core::classifier::PacketMeta;
use weft_core::policy::parse::suggest;
use weft_core::policy::{self, Link, LoadOptions, Program};
use weft_core::sched::LAST_ARRIVAL_PS;
use weft_core::units;

use crate::nic::{NicKind, NicParams};

/// Most throughput (or latency) windows in a run: each is a row per application in
/// `timeseries.csv` and a vector in memory for every model.
pub const MAX_WINDOWS: u64 = 1_000_000;

/// Most (window, application) pairs of each kind, throughput and latency, counted in pairs
/// (one window of one application): a run holds a counter for each (8 bytes of throughput,
/// 64 of latency) for every model it runs, and the report writes a row of `timeseries.csv`
/// (or `latency.csv`) for each. 50 applications in windows of 1 µs for 1 s (a 3.5 KB
/// scenario) once took 3.8 GB of memory and wrote 1.4 GB of report for one model. 2^22 is
/// 34 MB of throughput counters a model, and far above every shipped scenario (at most
/// 20,000 pairs: SENIC Table 3 with 1000 classes).
pub const MAX_WINDOW_CELLS: u64 = 1 << 22;

/// Most flows of all applications together (each application counts its most flows at
/// once): every flow is simulated (and, in `qpf`, given a queue) one by one.
pub const MAX_FLOWS: u64 = 1_000_000;

/// Largest `host.segment`, bulk `window`, request/response `size` and UDP `socket_limit`,
/// bytes: 1 GiB, about TCP's largest window (65,535 × 2^14 bytes). A write is cut into MTU
/// packets at once, each a record in memory (about 50 to 100 bytes in the models) until it
/// leaves: 1 GiB is 716,000 packets at a 1500 B MTU, 16.8 million at 64 B.
pub const MAX_SIZE_BYTES: u64 = 1 << 30;

/// Most packets the applications write at once by their own limits, added up: every bulk
/// flow its whole window, every closed-loop request/response flow its largest response
/// (all flows start together). Each is a record in memory until it leaves: 2^26 packets are
/// up to about 6 GB. (Open-loop responses and UDP packets are written over time, at most
/// [`MAX_OFFERED_LOAD`] times the link rate.)
pub const MAX_BURST_PACKETS: u64 = 1 << 26;

/// Most a UDP flow (`rate`) or a request/response application (`rate` × response size, on
/// the wire) offers, in multiples of the link rate: `unlimited` UDP offers this much. More
/// would only be dropped or queued, and the simulator's work grows with the offered rate.
pub const MAX_OFFERED_LOAD: u64 = 2;

/// Most the applications offer together at any instant by default, in multiples of the link
/// rate (`limits: {max_offered_load: N}` or `--max-offered-load N` sets another): every
/// running UDP flow its rate (twice the link's when `unlimited`) and every open-loop
/// request/response application its responses on the wire. The simulator's work grows with
/// the offered load, not with what the link carries: a UDP flow is a timed event and a
/// packet written per `mtu × 8 / rate`, whether the packet is sent or dropped at the socket
/// or in the NIC. 10,000 unlimited UDP flows offer 20,000 times the link rate: 16.7 billion
/// ticks per simulated second on a 10 Gbit/s link, 33 million events per simulated
/// millisecond (3 to 10 s of each model's run for 2 ms; 38 s for the eight models). Bulk
/// flows and closed loops are held back by their windows, so their work follows the link,
/// and they offer nothing here. 64 is 32 unlimited UDP flows, five times the most any
/// shipped scenario offers (12 times: senic-fallback).
pub const DEFAULT_MAX_TOTAL_OFFERED_LOAD: u64 = 64;

/// The event budget of one model's run by default, events (`limits: {max_events: N}` or
/// `--max-events N` sets another): the simulator's work, counted as each timed event handled
/// (a schedule step, a request, a UDP tick, a retry), each flow a step starts or stops,
/// each packet written to the NIC model, and each instant at which the link and the NIC
/// model are visited; a packet sent costs two or three. A run that reaches it stops with an
/// error ([`crate::sim::BudgetExceeded`]) instead of running on for hours: 2^28 (268
/// million) events take half a minute to a minute here (110 ns an event for loom with
/// 10,000 UDP flows). The shipped scenarios' runs take at most 3.3 million (Loom Fig. 9,
/// sq), 80 times less.
pub const DEFAULT_MAX_EVENTS: u64 = 1 << 28;

/// The most bytes a scenario file may have, bytes (16 MiB): a hundred times the largest
/// shipped one (SENIC Table 3 with 1000 classes, 171 KB), and small enough that a scenario
/// named `/dev/zero` or a runaway generator's output cannot exhaust memory. Only a regular
/// file is read (a FIFO would block the reader for ever, a device never end). A `policy:`
/// file is read by the policy reader, under its own cap
/// ([`weft_core::policy::MAX_POLICY_FILE_BYTES`]).
pub const MAX_SCENARIO_FILE_BYTES: u64 = 16 << 20;

/// Largest exponential draw over its mean: [`crate::rng::Rng::exp`] takes the logarithm of
/// a uniform number of 53 bits, so a draw is at most 53 × ln 2 ≈ 36.7 means.
const EXP_MAX_OVER_MEAN: f64 = 53.0 * std::f64::consts::LN_2;

/// Smallest and largest MTU (`host.mtu`), bytes: an Ethernet minimum frame; the largest IP
/// packet.
pub const MTU_RANGE: std::ops::RangeInclusive<u64> = 64..=65_535;

/// A scenario that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file is not read: not a regular file, or longer than
    /// [`MAX_SCENARIO_FILE_BYTES`]; `reason` says which. (Text that is not UTF-8 is
    /// [`ScenarioError::At`] the first byte that is not.)
    #[error("{path}: {reason}")]
    NotRead { path: String, reason: String },
    /// Malformed YAML, an unknown key, or a bad value.
    #[error("{path}:{line}:{column}: {message}")]
    At {
        path: String,
        line: u64,
        column: u64,
        message: String,
    },
    /// An override (`--set`, `--duration`) is wrong.
    #[error("{what}: {message}")]
    Override { what: &'static str, message: String },
    /// The policy did not compile.
    #[error("{path}: policy: {message}")]
    Policy { path: String, message: String },
    /// The scenario's `policy_inline` did not compile: a line per problem, each naming the
    /// scenario file's line and column (`file:line:col: policy_inline: error[rule]: ...`).
    #[error("{message}")]
    PolicyInline { message: String },
}

/// Size of each response of a request/response application.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(u64),
    /// Exponentially distributed with this mean, bytes (at least 1).
    Exponential(u64),
}

impl SizeDist {
    /// The largest size a response can have, bytes: an exponential draw is at most about
    /// 36.7 times its mean.
    pub fn max_bytes(&self) -> u64 {
        match *self {
            SizeDist::Fixed(b) => b,
            SizeDist::Exponential(m) => ((m as f64 * EXP_MAX_OVER_MEAN) as u64).max(1),
        }
    }

    /// The mean size, bytes.
    pub fn mean_bytes(&self) -> u64 {
        match *self {
            SizeDist::Fixed(b) | SizeDist::Exponential(b) => b,
        }
    }
}

/// What an application does.
#[derive(Debug, Clone, PartialEq)]
pub enum AppKind {
    /// Backlogged flows, each keeping at most `window_bytes` queued in the host and NIC
    /// (TCP small queues / backpressure): when a flow's queued bytes fall to
    /// `window_bytes - segment_bytes` it writes another segment.
    Bulk { window_bytes: u64 },
    /// Requests arrive as a Poisson process (`rate_per_s`; the responses offer at most
    /// [`MAX_OFFERED_LOAD`] times the link rate); each makes the host send a response;
    /// latency = response completion (last byte on the wire) − request arrival.
    /// `closed_loop` (sockperf ping-pong, TONIC §V-D): each flow has one request at a time,
    /// the next arriving when the previous response completes; `rate_per_s` is unused.
    RequestResponse {
        rate_per_s: f64,
        size: SizeDist,
        closed_loop: bool,
    },
    /// UDP: each flow offers `rate_bps` (at most [`MAX_OFFERED_LOAD`] times the link rate;
    /// `None`: unlimited, i.e. exactly that) in MTU packets; a packet is dropped at the
    /// socket when the flow already holds `socket_limit_bytes`.
    Udp {
        rate_bps: Option<u64>,
        socket_limit_bytes: u64,
    },
}

/// One application of a tenant.
#[derive(Debug, Clone)]
pub struct App {
    /// Name (unique within its tenant: it keys the tenant's applications in the reports).
    pub name: String,
    /// Index of its tenant.
    pub tenant: usize,
    /// Packet metadata: the tenant's merged with the application's.
    pub meta: PacketMeta,
    /// What it does.
    pub kind: AppKind,
    /// Cores its threads run on; flows are placed on them (see `Host::placement`).
    pub cores: Vec<u16>,
    /// Flow count over time: `(at_ps, flows)`, sorted, first at `start`; the last entry
    /// with flows 0 is the stop.
    pub schedule: Vec<(u64, u32)>,
    /// Where each entry of `schedule` was written, `file:line:column` (`None`: not written,
    /// as a start of 0 or the stop at the end; and stops), for warnings.
    pub schedule_at: Vec<Option<String>>,
    /// Prioritized application (TONIC head insertion, the `mq-pri` high class). `None`:
    /// derived from the policy (its leaf is the most urgent child of a `prio` node).
    pub prioritized: Option<bool>,
    /// DCB class for `mq-pri`/`mq-fair` (`None`: derived).
    pub dcb_class: Option<u8>,
}

impl App {
    /// Whether the application always has data (bulk or unlimited UDP): its tenant is
    /// backlogged while it runs.
    pub fn greedy(&self) -> bool {
        match self.kind {
            AppKind::Bulk { .. } => true,
            AppKind::Udp { rate_bps, .. } => rate_bps.is_none(),
            AppKind::RequestResponse { .. } => false,
        }
    }

    /// Most flows the application ever has.
    pub fn max_flows(&self) -> u32 {
        self.schedule.iter().map(|s| s.1).max().unwrap_or(0)
    }

    /// Packets the application writes at once by its own limits when all its flows start:
    /// each bulk flow its window (whole segments of MTU packets), each closed-loop
    /// request/response flow its largest response (see [`MAX_BURST_PACKETS`]).
    pub fn burst_packets(&self, host: &Host) -> u64 {
        let mtu = u64::from(host.mtu_bytes.max(1));
        let per_flow = match &self.kind {
            AppKind::Bulk { window_bytes } => {
                // As `Sim::refill` writes: segments of min(segment, window) bytes.
                let seg = host.segment_bytes.min(*window_bytes).max(1);
                (window_bytes / seg).saturating_mul(seg.div_ceil(mtu))
            }
            AppKind::RequestResponse {
                size,
                closed_loop: true,
                ..
            } => size.max_bytes().div_ceil(mtu),
            AppKind::RequestResponse { .. } | AppKind::Udp { .. } => 0,
        };
        per_flow.saturating_mul(u64::from(self.max_flows()))
    }

    /// Flows active at `t_ps`.
    pub fn flows_at(&self, t_ps: u64) -> u32 {
        let mut n = 0;
        for &(at, f) in &self.schedule {
            if at <= t_ps {
                n = f;
            }
        }
        n
    }

    /// True when the application has at least one flow during all of `[from, to)`.
    pub fn active_throughout(&self, from_ps: u64, to_ps: u64) -> bool {
        if self.flows_at(from_ps) == 0 {
            return false;
        }
        self.schedule
            .iter()
            .all(|&(at, f)| at <= from_ps || at >= to_ps || f > 0)
    }
}

/// A tenant: a name and its applications (indices into `Scenario::apps`).
#[derive(Debug, Clone)]
pub struct Tenant {
    /// Name (unique: it keys the tenants in the reports).
    pub name: String,
    pub apps: Vec<usize>,
}

/// How flows are placed on an application's cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each flow on a core drawn at random (seeded): the uneven spread XPS sees in TONIC §V.
    Random,
    /// Flow k on core k mod |cores|.
    RoundRobin,
}

/// The sending host.
#[derive(Debug, Clone)]
pub struct Host {
    /// Cores (at least 1).
    pub cores: u16,
    /// Bytes an application writes at once (a sendmsg; no TSO: it is cut into MTU packets).
    pub segment_bytes: u64,
    /// Frame size of full packets, bytes.
    pub mtu_bytes: u32,
    /// Driver CPU time per packet, ps (counted, not a bottleneck, in every model).
    pub cpu_ps_per_packet: u64,
    /// CPU time of one doorbell (MMIO) write, ps (counted).
    pub cpu_ps_per_doorbell: u64,
    /// Flow placement.
    pub placement: Placement,
    /// When a bulk flow lost packets to a drop, it resends after this long, ps.
    pub retry_ps: u64,
}

/// A loaded, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name: the `name` key (a name as tenants' are, and no `/`, `.` or `..`: `weft demo`
    /// makes it a directory), else the file's stem with such characters replaced by `_`.
    pub name: String,
    /// Free text shown in index.html (escaped there): no control characters but newlines
    /// and tabs, no bidirectional overrides.
    pub description: String,
    /// Where it was read from (for messages).
    pub path: String,
    /// The compiled policy.
    pub program: Arc<Program>,
    /// Simulated time, ps.
    pub duration_ps: u64,
    /// Seed of every random stream.
    pub seed: u64,
    /// Throughput window, ps.
    pub window_ps: u64,
    /// Where `window` was written (`file:line:column`), for warnings; `None`: the default.
    pub window_at: Option<String>,
    /// Latency percentile window, ps.
    pub latency_window_ps: u64,
    /// NIC models to run, in order (at least one, none twice: results are keyed by model).
    pub nics: Vec<NicKind>,
    /// Parameters of the models.
    pub nic_params: NicParams,
    pub host: Host,
    pub tenants: Vec<Tenant>,
    pub apps: Vec<App>,
    /// Time scale note shown in reports as written (e.g. "1 paper second = 25 ms
    /// simulated (phases of 50 ms)"); [`Scenario::time_scale_ratio`] is what it says.
    pub time_scale: Option<String>,
    /// What `time_scale` means: `(paper_ps, simulated_ps)`, both positive: `paper_ps` of
    /// the paper's time are `simulated_ps` here (`1 paper second = 100 ms`: 10^12, 10^11).
    pub time_scale_ratio: Option<(u64, u64)>,
    /// Where `latency_window` was written (`file:line:column`), for warnings; `None`: the
    /// default (five throughput windows).
    pub latency_window_at: Option<String>,
    /// The policy's warnings (`small-burst`), a line each: `file:line:col:
    /// warning[rule]: ...`, or for `policy_inline` at the scenario file's line and column as
    /// its errors are (`file:line:col: policy_inline: warning[rule]: ...`).
    pub policy_warnings: Vec<String>,
    /// Most the applications offer together at any instant, in multiples of the link rate
    /// (at most [`Scenario::max_offered_load`]; see [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]).
    pub offered_load: f64,
    /// The cap on [`Scenario::offered_load`] the scenario was loaded under, multiples of
    /// the link rate.
    pub max_offered_load: u64,
    /// Event budget of each model's run, events ([`DEFAULT_MAX_EVENTS`] says what counts).
    pub max_events: u64,
    /// Where the budget came from, for the message when a run reaches it: `--max-events`,
    /// `file:line:col` of `limits.max_events`, or `None` (the default).
    pub max_events_from: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(u64),
    Float(f64),
    Str(String),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Int(v) => v.to_string(),
            Scalar::Float(v) => v.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    time_scale: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    policy_inline: Option<Spanned<String>>,
    duration: Spanned<String>,
    seed: Option<u64>,
    window: Option<Spanned<String>>,
    latency_window: Option<Spanned<String>>,
    nics: Option<Spanned<Vec<Spanned<String>>>>,
    host: Option<RawHost>,
    nic: Option<BTreeMap<String, BTreeMap<String, Spanned<Scalar>>>>,
    limits: Option<RawLimits>,
    tenants: Vec<RawTenant>,
}

/// `limits:` of a scenario: what it may ask of the simulator.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_offered_load: Option<Spanned<u64>>,
    max_events: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    cores: Option<Spanned<u16>>,
    segment: Option<Spanned<String>>,
    mtu: Option<Spanned<String>>,
    cpu_per_packet: Option<Spanned<String>>,
    cpu_per_doorbell: Option<Spanned<String>>,
    placement: Option<Spanned<String>>,
    retry: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: Spanned<String>,
    #[serde(default)]
    meta: BTreeMap<String, Spanned<Scalar>>,
    apps: Spanned<Vec<RawApp>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApp {
    name: Spanned<String>,
    kind: Spanned<String>,
    #[serde(default)]
    meta: BTreeMap<String, Spanned<Scalar>>,
    cores: Option<Spanned<Vec<u16>>>,
    flows: Option<u32>,
    window: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    stop: Option<Spanned<String>>,
    schedule: Option<Vec<RawStep>>,
    rate: Option<Spanned<String>>,
    size: Option<Spanned<String>>,
    size_dist: Option<Spanned<String>>,
    socket_limit: Option<Spanned<String>>,
    prioritized: Option<bool>,
    dcb_class: Option<Spanned<u8>>,
    closed_loop: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at: Spanned<String>,
    flows: u32,
}

/// Changes to a scenario made when loading it (the CLI's `--policy`, `--link`, `--set`).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Use this policy file instead of the scenario's.
    pub policy: Option<PathBuf>,
    /// Link rate, bits per second, instead of the policy's.
    pub link_rate_bps: Option<u64>,
    /// NIC parameters `(model, key, value)` set after the scenario's own.
    pub nic_params: Vec<(String, String, String)>,
    /// Simulated time, ps, instead of the scenario's `duration`.
    pub duration_ps: Option<u64>,
    /// Most the applications may offer together, in multiples of the link rate, instead of
    /// the scenario's `limits.max_offered_load` (default
    /// [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]): the CLI's `--max-offered-load`.
    pub max_offered_load: Option<u64>,
    /// Event budget of each model's run, events, instead of the scenario's
    /// `limits.max_events` (default [`DEFAULT_MAX_EVENTS`]): the CLI's `--max-events`.
    pub max_events: Option<u64>,
}

/// A hint for a scenario that fails to parse because it is a policy file (top-level `weft:`
/// and `nodes:` keys): what to do instead. Empty otherwise.
fn policy_hint(text: &str) -> &'static str {
    let top = |key: &str| text.lines().any(|l| l.starts_with(key));
    if top("weft:") && top("nodes:") {
        " (this file is a policy, not a scenario: a scenario names its policy with \
         `policy: FILE`, see examples/scenarios/README.md; `weft sim SCENARIO --policy FILE` \
         runs a scenario with another policy, `weft replay --policy FILE` replays a trace)"
    } else {
        ""
    }
}

/// Parses scenario text. `path` is used in messages and to resolve a relative `policy:`.
pub fn load_str(path: &Path, text: &str, ov: &Overrides) -> Result<Scenario, ScenarioError> {
    let p = path.display().to_string();
    let policy_override = ov.policy.as_deref();
    let lopts = LoadOptions {
        link_rate_bps: ov.link_rate_bps,
        ..LoadOptions::default()
    };
    let raw: RawScenario = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        let message = yaml_message(&e, text, line, column)
            .unwrap_or_else(|| without_location(&first_line(&e.to_string())));
        ScenarioError::At {
            path: p.clone(),
            line: line.max(1),
            column: column.max(1),
            message: message + policy_hint(text),
        }
    })?;
    let ctx = Ctx {
        path: &p,
        link: Link::default(),
        link_from_cli: false,
    };
    let program = match (policy_override, &raw.policy, &raw.policy_inline) {
        (Some(f), _, _) => load_policy_file(&p, f, &lopts)?,
        (None, Some(f), None) => {
            let base = path.parent().unwrap_or(Path::new("."));
            let file: PathBuf = base.join(&f.value);
            if !file.exists() {
                return Err(ctx.err(
                    &f.referenced,
                    format!("policy file {} not found", file.display()),
                ));
            }
            load_policy_file(&p, &file, &lopts)?
        }
        (None, None, Some(inline)) => {
            let name = format!("{p} (policy_inline)");
            policy::compile_str(Path::new(&name), &inline.value, &lopts).map_err(|e| {
                ScenarioError::PolicyInline {
                    message: inline_diagnostics(&e.diagnostics, &e.sources, &p, text, inline)
                        .join("\n"),
                }
            })?
        }
        (None, Some(f), Some(_)) => {
            return Err(ctx.err(
                &f.referenced,
                "give `policy` or `policy_inline`, not both".into(),
            ))
        }
        (None, None, None) => {
            return Err(ScenarioError::At {
                path: p.clone(),
                line: 1,
                column: 1,
                message: "missing `policy` (a file) or `policy_inline` (the policy's YAML)".into(),
            })
        }
    };
    // The applications' rates are checked against the link the policy schedules onto.
    let ctx = Ctx {
        link: program.link,
        link_from_cli: ov.link_rate_bps.is_some(),
        ..ctx
    };
    let duration_ps = ctx.time(&raw.duration, true)?;
    let window_ps = match &raw.window {
        Some(w) => ctx.time(w, true)?,
        None => (duration_ps / 100).max(1),
    };
    let latency_window_ps = match &raw.latency_window {
        Some(w) => ctx.time(w, true)?,
        // Five windows; a window as long as the clock is one window, whatever its length.
        None => window_ps.saturating_mul(5),
    };
    let duration_ps = ov.duration_ps.unwrap_or(duration_ps);
    // A rule of the run's length broken: `--duration`'s, or the key's that makes it so.
    let time_rule = |m: TimeRule| match ov.duration_ps {
        Some(d) => ScenarioError::Override {
            what: "--duration",
            message: format!("{}: {m}", fmt_ps(d)),
        },
        None => {
            let at = match m.what {
                "window" => raw.window.as_ref().unwrap_or(&raw.duration),
                "latency_window" => raw.latency_window.as_ref().unwrap_or(&raw.duration),
                _ => &raw.duration,
            };
            ctx.err(&at.referenced, format!("{}: {m}", at.value))
        }
    };
    check_times(duration_ps, window_ps, latency_window_ps).map_err(time_rule)?;
    let nics = match &raw.nics {
        Some(list) => {
            if list.value.is_empty() {
                return Err(ctx.err(
                    &list.referenced,
                    "`nics` is empty: list the NIC models to run, or leave `nics` out to run \
                     them all"
                        .into(),
                ));
            }
            let mut nics: Vec<(NicKind, &Spanned<String>)> = Vec::new();
            for n in &list.value {
                let k = NicKind::from_name(&n.value)
                    .ok_or_else(|| ctx.err(&n.referenced, NicKind::unknown(&n.value)))?;
                if let Some((_, first)) = nics.iter().find(|(f, _)| *f == k) {
                    return Err(ctx.err(
                        &n.referenced,
                        format!(
                            "NIC model `{}` is listed twice (first at {}): results are keyed \
                             by model",
                            n.value,
                            ctx.at(&first.referenced)
                        ),
                    ));
                }
                nics.push((k, n));
            }
            nics.into_iter().map(|(k, _)| k).collect()
        }
        None => NicKind::ALL.to_vec(),
    };
    let mut nic_params = NicParams::default();
    if let Some(m) = &raw.nic {
        for (model, params) in m {
            for (key, v) in params {
                nic_params
                    .set(model, key, &v.value.text())
                    .map_err(|msg| ctx.err(&v.referenced, msg))?;
            }
        }
    }
    for (model, key, v) in &ov.nic_params {
        nic_params
            .set(model, key, v)
            .map_err(|message| ScenarioError::Override {
                what: "--set",
                message: format!("`{model}.{key}={v}`: {message}"),
            })?;
    }
    let rh = raw.host.as_ref();
    let host = Host {
        cores: match rh.and_then(|h| h.cores.as_ref()) {
            Some(c) if c.value == 0 => {
                return Err(ctx.err(
                    &c.referenced,
                    "`cores: 0`: a host has at least 1 core".into(),
                ))
            }
            Some(c) => c.value,
            None => 8,
        },
        segment_bytes: match rh.and_then(|h| h.segment.as_ref()) {
            Some(s) => ctx.bounded_size(s, "segment")?,
            None => 65_536,
        },
        mtu_bytes: match rh.and_then(|h| h.mtu.as_ref()) {
            Some(s) => {
                let m = ctx.size(s)?;
                if !MTU_RANGE.contains(&m) {
                    return Err(ctx.err(
                        &s.referenced,
                        format!(
                            "mtu `{}` ({m} B) is out of range: it must be {}b..={}b",
                            s.value,
                            MTU_RANGE.start(),
                            MTU_RANGE.end()
                        ),
                    ));
                }
                m as u32
            }
            None => 1500,
        },
        cpu_ps_per_packet: match rh.and_then(|h| h.cpu_per_packet.as_ref()) {
            Some(s) => ctx.time(s, false)?,
            None => 100_000,
        },
        cpu_ps_per_doorbell: match rh.and_then(|h| h.cpu_per_doorbell.as_ref()) {
            Some(s) => ctx.time(s, false)?,
            None => 50_000,
        },
        placement: match rh.and_then(|h| h.placement.as_ref()) {
            None => Placement::Random,
            Some(s) => match s.value.as_str() {
                "random" => Placement::Random,
                "round-robin" => Placement::RoundRobin,
                other => {
                    return Err(ctx.err(
                        &s.referenced,
                        format!("placement `{other}`: expected `random` or `round-robin`"),
                    ))
                }
            },
        },
        retry_ps: match rh.and_then(|h| h.retry.as_ref()) {
            Some(s) => ctx.time(s, true)?,
            None => 200_000_000,
        },
    };
    let mut tenants = Vec::new();
    let mut apps = Vec::new();
    // Where each application was written (for the offered load's message).
    let mut raw_apps: Vec<&RawApp> = Vec::new();
    let mut flows = 0u64;
    let mut burst = 0u64;
    if raw.tenants.is_empty() {
        return Err(ScenarioError::At {
            path: p.clone(),
            line: 1,
            column: 1,
            message: "no tenants".into(),
        });
    }
    // Where each tenant's name was given: names key the tenants in summary.json and the
    // CSV files, so a second tenant of the same name would hide the first's results.
    let mut tenant_names: BTreeMap<&str, &Spanned<String>> = BTreeMap::new();
    for (ti, rt) in raw.tenants.iter().enumerate() {
        ctx.name(&rt.name, true)?;
        if let Some(first) = tenant_names.insert(&rt.name.value, &rt.name) {
            return Err(ctx.err(
                &rt.name.referenced,
                format!(
                    "tenant `{}` is named twice (first at {}): tenant names key the results \
                     in summary.json and the CSV files",
                    rt.name.value,
                    ctx.at(&first.referenced)
                ),
            ));
        }
        let mut tmeta = PacketMeta::default();
        for (k, v) in &rt.meta {
            tmeta
                .set_field(k, &v.value.text())
                .map_err(|m| ctx.err(&v.referenced, format!("meta `{k}`: {m}")))?;
        }
        let mut t = Tenant {
            name: rt.name.value.clone(),
            apps: Vec::new(),
        };
        let mut app_names: BTreeMap<&str, &Spanned<String>> = BTreeMap::new();
        if rt.apps.value.is_empty() {
            return Err(ctx.err(
                &rt.apps.referenced,
                format!(
                    "tenant `{}` has no applications (`apps` is empty): give it at least one, \
                     or leave the tenant out",
                    rt.name.value
                ),
            ));
        }
        for ra in &rt.apps.value {
            ctx.name(&ra.name, false)?;
            if let Some(first) = app_names.insert(&ra.name.value, &ra.name) {
                return Err(ctx.err(
                    &ra.name.referenced,
                    format!(
                        "application `{}` of tenant `{}` is named twice (first at {}): \
                         application names key a tenant's results in summary.json and the \
                         CSV files",
                        ra.name.value,
                        rt.name.value,
                        ctx.at(&first.referenced)
                    ),
                ));
            }
            let app = ctx.app(ra, ti, &tmeta, &host, duration_ps)?;
            flows += app.max_flows() as u64;
            if flows > MAX_FLOWS {
                return Err(ctx.err(
                    &ra.kind.referenced,
                    format!(
                        "{}/{}: the applications have {flows} flows so far; at most \
                         {MAX_FLOWS} in all (every flow is simulated one by one)",
                        rt.name.value, ra.name.value
                    ),
                ));
            }
            burst = burst.saturating_add(app.burst_packets(&host));
            if burst > MAX_BURST_PACKETS {
                return Err(ctx.err(
                    &ra.kind.referenced,
                    format!(
                        "{}/{}: the applications write {burst} packets at once so far (every \
                         bulk flow its window, every closed-loop flow its largest response, \
                         in {} B packets); at most {MAX_BURST_PACKETS} in all (each is held \
                         in memory until it leaves): give fewer flows or smaller windows",
                        rt.name.value, ra.name.value, host.mtu_bytes
                    ),
                ));
            }
            t.apps.push(apps.len());
            apps.push(app);
            raw_apps.push(ra);
        }
        tenants.push(t);
    }
    check_cells(duration_ps, window_ps, latency_window_ps, apps.len()).map_err(time_rule)?;
    let limits = ctx.limits(raw.limits.as_ref(), ov)?;
    let offered_load = ctx.offered_load(&apps, &raw_apps, &tenants, &host, duration_ps, &limits)?;
    let name = match &raw.name {
        Some(n) => {
            ctx.scenario_name(n)?;
            n.value.clone()
        }
        None => default_name(path),
    };
    if let Some(d) = &raw.description {
        ctx.free_text(d, "description", true)?;
    }
    let time_scale_ratio =
        match &raw.time_scale {
            Some(ts) => {
                ctx.free_text(ts, "time_scale", false)?;
                Some(parse_time_scale(&ts.value).map_err(|m| {
                    ctx.err(&ts.referenced, format!("time_scale {:?}: {m}", ts.value))
                })?)
            }
            None => None,
        };
    let policy_warnings = match (
        &program.warnings,
        policy_override,
        &raw.policy,
        &raw.policy_inline,
    ) {
        (None, ..) => Vec::new(),
        (Some(w), None, None, Some(inline)) => {
            inline_diagnostics(&w.diagnostics, &w.sources, &p, text, inline)
        }
        (Some(w), ..) => w.diagnostics.iter().map(|d| w.render_one(d)).collect(),
    };
    Ok(Scenario {
        name,
        description: raw
            .description
            .as_ref()
            .map(|d| d.value.clone())
            .unwrap_or_default(),
        path: p.clone(),
        program: Arc::new(program),
        duration_ps,
        seed: raw.seed.unwrap_or(1),
        window_ps,
        window_at: raw.window.as_ref().map(|w| ctx.at(&w.referenced)),
        latency_window_ps,
        nics,
        nic_params,
        host,
        tenants,
        apps,
        time_scale: raw.time_scale.as_ref().map(|t| t.value.clone()),
        time_scale_ratio,
        latency_window_at: raw.latency_window.as_ref().map(|w| ctx.at(&w.referenced)),
        policy_warnings,
        offered_load,
        max_offered_load: limits.max_offered_load,
        max_events: limits.max_events,
        max_events_from: limits.max_events_from,
    })
}

/// What a scenario may ask of the simulator: its `limits:`, or the CLI's overrides, or the
/// defaults.
struct Limits {
    /// Multiples of the link rate.
    max_offered_load: u64,
    /// Where the cap came from, for messages: `--max-offered-load`, `file:line:col` or
    /// `None` (the default).
    max_offered_load_from: Option<String>,
    /// Events of one model's run.
    max_events: u64,
    /// As `max_offered_load_from`, for `max_events`.
    max_events_from: Option<String>,
}

/// Why the offered load is capped, and how to raise the cap, for messages.
const OFFERED_WHY: &str = "the simulator handles every packet offered (a timed event and a \
     write, whether it is sent or dropped at the socket or in the NIC), so a run's work \
     grows with the offered load, not with what the link carries. Give fewer flows or lower \
     rates, or raise the cap with `limits: {max_offered_load: N}` in the scenario or \
     `--max-offered-load N`";

/// The worst instant of the applications' offered load ([`peak_offered`]).
struct Peak {
    /// When it starts, ps.
    at_ps: u64,
    /// What the UDP flows offer then, bit/s, exactly; what the responses offer, bit/s.
    udp_bps: u128,
    rr_bps: f64,
    /// Each application's flows then.
    flows: Vec<u32>,
}

/// The worst instant of what the applications offer together in a run of `duration_ps`
/// (see [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]): flow counts change at the applications'
/// schedule steps, taken in time order as the simulator takes them (steps at or after the
/// end never happen); `None` when no step happens. O(steps × log steps).
fn peak_offered(apps: &[App], host: &Host, link: &Link, duration_ps: u64) -> Option<Peak> {
    let mut steps: Vec<(u64, usize, usize)> = apps
        .iter()
        .enumerate()
        .flat_map(|(ai, a)| {
            a.schedule
                .iter()
                .enumerate()
                .filter(|(_, s)| s.0 < duration_ps)
                .map(move |(si, s)| (s.0, ai, si))
        })
        .collect();
    steps.sort_unstable();
    // Per application its flows now; the sums: UDP exactly, responses in f64.
    let mut now_flows = vec![0u32; apps.len()];
    let (mut udp, mut rr) = (0u128, 0.0f64);
    // The worst instant so far, and how many steps had happened by its end (its flow
    // counts are replayed from those once the worst is known: copying them at every new
    // worst would cost applications × steps).
    let mut worst: Option<(Peak, usize)> = None;
    let mut i = 0;
    while i < steps.len() {
        let t = steps[i].0;
        while i < steps.len() && steps[i].0 == t {
            let (_, ai, si) = steps[i];
            let (u0, r0, _) = offered(&apps[ai], now_flows[ai], host, link);
            now_flows[ai] = apps[ai].schedule[si].1;
            let (u1, r1, _) = offered(&apps[ai], now_flows[ai], host, link);
            udp = udp - u0 + u1;
            rr += r1 - r0;
            i += 1;
        }
        let total = udp as f64 + rr.max(0.0);
        if worst
            .as_ref()
            .is_none_or(|(w, _)| total > w.udp_bps as f64 + w.rr_bps.max(0.0))
        {
            let peak = Peak {
                at_ps: t,
                udp_bps: udp,
                rr_bps: rr.max(0.0),
                flows: Vec::new(),
            };
            worst = Some((peak, i));
        }
    }
    let (mut peak, done) = worst?;
    peak.flows = vec![0u32; apps.len()];
    for &(_, ai, si) in &steps[..done] {
        peak.flows[ai] = apps[ai].schedule[si].1;
    }
    Some(peak)
}

impl Peak {
    /// What is offered, in multiples of the link rate.
    fn load(&self, link: &Link) -> f64 {
        (self.udp_bps as f64 + self.rr_bps) / link.rate_bps.max(1) as f64
    }

    /// More than `cap` times the link rate (exactly when only UDP flows offer).
    fn over(&self, cap: u64, link: &Link) -> bool {
        let cap = u128::from(cap) * u128::from(link.rate_bps.max(1));
        if self.rr_bps <= 0.0 {
            self.udp_bps > cap
        } else {
            self.udp_bps as f64 + self.rr_bps > cap as f64
        }
    }

    /// What is offered at the worst instant, for messages (`the applications offer 20000.0
    /// times the link rate, ... at once (from the start: t/u: 10000 UDP flows × ...), about
    /// ... packets per simulated second`), and the application that offers most.
    fn describe(
        &self,
        apps: &[App],
        tenants: &[Tenant],
        host: &Host,
        link: &Link,
        link_text: &str,
    ) -> (String, usize) {
        let link_bps = link.rate_bps.max(1) as f64;
        let mut parts: Vec<(f64, usize, f64)> = apps
            .iter()
            .enumerate()
            .filter_map(|(ai, a)| {
                let (u, r, pps) = offered(a, self.flows[ai], host, link);
                let bps = u as f64 + r;
                (bps > 0.0).then_some((bps, ai, pps))
            })
            .collect();
        parts.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let pps: f64 = parts.iter().map(|p| p.2).sum();
        let what = |ai: usize, bps: f64| {
            let a = &apps[ai];
            let name = format!("{}/{}", tenants[a.tenant].name, a.name);
            let times = bps / link_bps;
            match &a.kind {
                AppKind::Udp { rate_bps, .. } => format!(
                    "{name}: {} UDP flows × {}{}, {times:.1} times the link",
                    self.flows[ai],
                    units::format_rate(
                        rate_bps.unwrap_or(link.rate_bps.saturating_mul(MAX_OFFERED_LOAD))
                    ),
                    if rate_bps.is_none() {
                        " (`unlimited`)"
                    } else {
                        ""
                    }
                ),
                _ => format!("{name}: responses, {times:.1} times the link"),
            }
        };
        let mut list: Vec<String> = parts
            .iter()
            .take(3)
            .map(|&(bps, ai, _)| what(ai, bps))
            .collect();
        if parts.len() > 3 {
            list.push(format!("and {} more applications", parts.len() - 3));
        }
        let when = if self.at_ps == 0 {
            "from the start".to_string()
        } else {
            format!("from {}", units::format_time(self.at_ps))
        };
        (
            format!(
                "the applications offer {:.1} times the link rate, {link_text}, at once \
                 ({when}: {}), about {pps:.3e} packets per simulated second",
                self.load(link),
                list.join("; ")
            ),
            parts.first().map_or(0, |p| p.1),
        )
    }
}

/// The most an application offers while it has `flows` flows, bit/s on the link's terms
/// (a UDP flow's rate counts its packets' bytes, as the rate is written; a response counts
/// its frames' overhead too, as the application's own check does), and packets per second.
/// Bulk and closed-loop applications offer nothing: their windows hold them back.
fn offered(app: &App, flows: u32, host: &Host, link: &Link) -> (u128, f64, f64) {
    let mtu = u64::from(host.mtu_bytes.max(1));
    match &app.kind {
        AppKind::Udp { rate_bps, .. } => {
            let rate = rate_bps.map_or(
                u128::from(link.rate_bps) * u128::from(MAX_OFFERED_LOAD),
                u128::from,
            );
            let bps = rate * u128::from(flows);
            (bps, 0.0, bps as f64 / (mtu * 8) as f64)
        }
        AppKind::RequestResponse {
            rate_per_s,
            size,
            closed_loop: false,
        } if flows > 0 => {
            let mean = size.mean_bytes();
            let packets = mean.div_ceil(mtu);
            let wire = mean.saturating_add(packets.saturating_mul(link.overhead_bytes));
            (
                0,
                rate_per_s * wire as f64 * 8.0,
                rate_per_s * packets as f64,
            )
        }
        _ => (0, 0.0, 0.0),
    }
}

/// The name of a scenario without `name`: its file's stem in Unicode's composed form, each
/// character a name may not have (see [`Ctx::scenario_name`]) replaced by `_` (`my
/// run.yaml`: `my_run`); `scenario` for a stem of none, `.` or `..`.
fn default_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| policy::parse::to_nfc(&s.to_string_lossy()).into_owned())
        .unwrap_or_default();
    let name: String = stem
        .chars()
        .map(|c| {
            if c == '/' || !policy::parse::name_char(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    if name.is_empty() || name == "." || name == ".." {
        "scenario".into()
    } else {
        name
    }
}

/// A unit of time as `time_scale` may write it (`ms`, `second`, `minutes`): the unit of
/// [`units::parse_time`] it is a multiple of, and the multiple.
fn time_unit(unit: &str) -> Option<(&'static str, u64)> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "ps" | "picosecond" | "picoseconds" => ("ps", 1),
        "ns" | "nanosecond" | "nanoseconds" => ("ns", 1),
        "us" | "µs" | "microsecond" | "microseconds" => ("us", 1),
        "ms" | "millisecond" | "milliseconds" => ("ms", 1),
        "s" | "sec" | "secs" | "second" | "seconds" => ("s", 1),
        "min" | "mins" | "minute" | "minutes" => ("s", 60),
        "h" | "hour" | "hours" => ("s", 3_600),
        _ => return None,
    })
}

/// A positive time at the start of `words` (`100 ms`, `100ms`, `1 paper second`: `skip` is
/// a word allowed between the number and the unit), ps, and the words after it.
fn scale_time<'a>(words: &'a [&'a str], skip: &str) -> Result<(u64, &'a [&'a str]), String> {
    let Some((&first, mut rest)) = words.split_first() else {
        return Err("a time is missing".into());
    };
    let split = first
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '+')))
        .unwrap_or(first.len());
    let (num, mut unit) = first.split_at(split);
    if num.is_empty() {
        return Err(format!("`{first}` is not a number"));
    }
    if unit.is_empty() {
        if rest.first() == Some(&skip) {
            rest = &rest[1..];
        }
        let Some((&u, r)) = rest.split_first() else {
            return Err(format!("`{num}` has no unit (e.g. `s`, `ms`, `second`)"));
        };
        unit = u;
        rest = r;
    }
    let (base, times) = time_unit(unit).ok_or_else(|| {
        format!("`{unit}` is not a unit of time (ps, ns, us, ms, s or second, min, h)")
    })?;
    let ps = units::parse_time(&format!("{num}{base}"), true)
        .map_err(|e| e.to_string())?
        .checked_mul(times)
        .ok_or_else(|| format!("`{num} {unit}` is more than 2^64 ps"))?;
    Ok((ps, rest))
}

/// What a `time_scale` says: `PAPER = SIMULATED`, each a positive time (`1 paper second =
/// 100 ms simulated`, `1s = 100ms`; the words `paper` and `simulated` are optional), then
/// free text if any (`(phases of 200 ms instead of 2 s)`). Returns `(paper_ps,
/// simulated_ps)`.
pub fn parse_time_scale(text: &str) -> Result<(u64, u64), String> {
    const FORM: &str = "expected `PAPER = SIMULATED`, two positive times, e.g. `1 paper \
                        second = 100 ms simulated`, then a note if you like";
    let Some((lhs, rhs)) = text.split_once('=') else {
        return Err(format!("no `=`: {FORM}"));
    };
    let lw: Vec<&str> = lhs.split_whitespace().collect();
    let (paper, rest) = scale_time(&lw, "paper").map_err(|e| format!("{e}; {FORM}"))?;
    if !rest.is_empty() {
        return Err(format!(
            "`{}` after the paper's time; {FORM}",
            rest.join(" ")
        ));
    }
    let rw: Vec<&str> = rhs.split_whitespace().collect();
    let (sim, _note) = scale_time(&rw, "simulated").map_err(|e| format!("{e}; {FORM}"))?;
    Ok((paper, sim))
}

/// Why a duration and its windows do not go together; `what` names the offending value.
#[derive(Debug)]
pub(crate) struct TimeRule {
    what: &'static str,
    rule: String,
}

impl std::fmt::Display for TimeRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rule)
    }
}

/// `1234ps (1.234 ns)`-style text for messages.
fn fmt_ps(ps: u64) -> String {
    format!("{ps}ps ({} s)", ps as f64 / 1e12)
}

/// The rules of a run's length (see the module docs): it ends by [`LAST_ARRIVAL_PS`] and
/// holds at most [`MAX_WINDOWS`] windows of each kind.
fn check_times(duration_ps: u64, window_ps: u64, latency_window_ps: u64) -> Result<(), TimeRule> {
    if duration_ps == 0 {
        return Err(TimeRule {
            what: "duration",
            rule: "the duration must be greater than zero".into(),
        });
    }
    if duration_ps > LAST_ARRIVAL_PS {
        return Err(TimeRule {
            what: "duration",
            rule: format!(
                "the duration is at most 2^63 ps ({LAST_ARRIVAL_PS}ps, about 106.7 days): \
                 applications write until the end, and the rest of the 64-bit picosecond \
                 clock is headroom for what is queued then to leave"
            ),
        });
    }
    for (what, w) in [("window", window_ps), ("latency_window", latency_window_ps)] {
        let n = duration_ps.div_ceil(w.max(1));
        if n > MAX_WINDOWS {
            return Err(TimeRule {
                what,
                rule: format!(
                    "a duration of {} in {what}s of {} makes {n} windows; at most \
                     {MAX_WINDOWS} (give a longer `{what}`)",
                    fmt_ps(duration_ps),
                    fmt_ps(w)
                ),
            });
        }
    }
    Ok(())
}

/// The rule of a run's windows and applications together: at most [`MAX_WINDOW_CELLS`]
/// (window, application) pairs of each kind, throughput and latency.
pub(crate) fn check_cells(
    duration_ps: u64,
    window_ps: u64,
    latency_window_ps: u64,
    apps: usize,
) -> Result<(), TimeRule> {
    for (what, w) in [("window", window_ps), ("latency_window", latency_window_ps)] {
        let n = duration_ps.div_ceil(w.max(1));
        let cells = n.saturating_mul(apps as u64);
        if cells > MAX_WINDOW_CELLS {
            return Err(TimeRule {
                what,
                rule: format!(
                    "a duration of {} in {what}s of {} makes {n} windows of {apps} \
                     applications, {cells} counters; at most {MAX_WINDOW_CELLS} (each is held \
                     in memory for every model and written as a row of {}): give a longer \
                     `{what}`",
                    fmt_ps(duration_ps),
                    fmt_ps(w),
                    if what == "window" {
                        "timeseries.csv"
                    } else {
                        "latency.csv"
                    }
                ),
            });
        }
    }
    Ok(())
}

impl Scenario {
    /// Sets the simulated time (e.g. the CLI's `--duration`), keeping the windows; refused
    /// past [`LAST_ARRIVAL_PS`], beyond [`MAX_WINDOWS`] windows or [`MAX_WINDOW_CELLS`]
    /// windows × applications, or when the longer run reaches schedule steps that offer
    /// more than [`Scenario::max_offered_load`] (the message says why).
    pub fn set_duration(&mut self, duration_ps: u64) -> Result<(), String> {
        check_times(duration_ps, self.window_ps, self.latency_window_ps)
            .and_then(|()| {
                check_cells(
                    duration_ps,
                    self.window_ps,
                    self.latency_window_ps,
                    self.apps.len(),
                )
            })
            .map_err(|m| format!("{}: {m}", fmt_ps(duration_ps)))?;
        // A longer run may reach schedule steps that raise the offered load.
        let link = &self.program.link;
        let peak = peak_offered(&self.apps, &self.host, link, duration_ps);
        if let Some(peak) = peak
            .as_ref()
            .filter(|p| p.over(self.max_offered_load, link))
        {
            let (what, _) = peak.describe(
                &self.apps,
                &self.tenants,
                &self.host,
                link,
                &units::format_rate(link.rate_bps),
            );
            return Err(format!(
                "{}: {what}; a scenario may offer at most {} times the link rate: \
                 {OFFERED_WHY}",
                fmt_ps(duration_ps),
                self.max_offered_load
            ));
        }
        self.offered_load = peak.map_or(0.0, |p| p.load(link));
        self.duration_ps = duration_ps;
        Ok(())
    }

    /// What in the scenario does nothing in a run of its duration, a line each (`file:line:col:
    /// ...` where written): an application that starts at or after the end, a schedule step
    /// at or after the end, a throughput window longer than the run, a `latency_window`
    /// longer than the run.
    pub fn warnings(&self) -> Vec<String> {
        let end = self.duration_ps;
        let mut out = Vec::new();
        for a in &self.apps {
            let name = format!("{}/{}", self.tenants[a.tenant].name, a.name);
            for (i, (&(t, flows), at)) in a.schedule.iter().zip(&a.schedule_at).enumerate() {
                let Some(at) = at.as_ref().filter(|_| t >= end) else {
                    continue;
                };
                out.push(if i == 0 {
                    format!(
                        "{at}: {name} starts at {}, at or after the end of the run ({}): it \
                         sends nothing",
                        units::format_time(t),
                        units::format_time(end)
                    )
                } else {
                    format!(
                        "{at}: {name}'s schedule step to {flows} flows at {} is at or after the \
                         end of the run ({}): it never happens",
                        units::format_time(t),
                        units::format_time(end)
                    )
                });
            }
        }
        if self.window_ps > end {
            out.push(format!(
                "{}: the throughput window ({}) is longer than the run ({}): no whole window, so \
                 no Jain's index (jain_min is null)",
                self.window_at.as_deref().unwrap_or(&self.path),
                units::format_time(self.window_ps),
                units::format_time(end)
            ));
        }
        // A latency window longer than the run, where written (the default, five throughput
        // windows, is one window of the whole run when the run is shorter: not a mistake).
        if let Some(at) = self
            .latency_window_at
            .as_deref()
            .filter(|_| self.latency_window_ps > end)
        {
            out.push(format!(
                "{at}: the latency window ({}) is longer than the run ({}): latency.csv and \
                 latency.svg have one window, the whole run, and no latency over time",
                units::format_time(self.latency_window_ps),
                units::format_time(end)
            ));
        }
        out
    }

    /// `tenant/app` of every application whose packets no leaf of the policy matches (the
    /// engine-based models drop them as unclassified).
    pub fn unclassified_apps(&self) -> Vec<String> {
        self.apps
            .iter()
            .filter(|a| {
                matches!(
                    self.program.classify(&a.meta),
                    weft_core::policy::Classification::Unclassified { .. }
                )
            })
            .map(|a| format!("{}/{}", self.tenants[a.tenant].name, a.name))
            .collect()
    }

    /// Multiplies every time of the scenario (duration, windows, schedules) by `num / den`,
    /// e.g. to run a short version of an experiment; rates and sizes are unchanged. A time
    /// scaled past the end of the clock is `u64::MAX` (a schedule step then never happens;
    /// a duration past 2^63 ps is refused by the simulator).
    pub fn scale_time(&mut self, num: u64, den: u64) {
        let f = |t: u64| {
            u64::try_from(t as u128 * num as u128 / den.max(1) as u128).unwrap_or(u64::MAX)
        };
        self.duration_ps = f(self.duration_ps).max(1);
        self.window_ps = f(self.window_ps).max(1);
        self.latency_window_ps = f(self.latency_window_ps).max(1);
        for a in &mut self.apps {
            for s in &mut a.schedule {
                s.0 = f(s.0);
            }
        }
    }
}

/// Reads and parses a scenario file: a regular file of at most [`MAX_SCENARIO_FILE_BYTES`]
/// of UTF-8 text ([`read_scenario`]).
pub fn load(path: &Path, ov: &Overrides) -> Result<Scenario, ScenarioError> {
    let text = read_scenario(path)?;
    load_str(path, &text, ov)
}

/// A scenario file's text. Only a regular file is read (checked on the path, then again on
/// what was opened: the path may change in between), and at most one byte past
/// [`MAX_SCENARIO_FILE_BYTES`]: a FIFO, `/dev/zero` or a file that grows while it is read
/// is refused with the limit, not read for ever. Non-regular files are named as the policy
/// reader names them ([`policy::file_kind`]).
pub fn read_scenario(path: &Path) -> Result<String, ScenarioError> {
    use std::io::Read;
    let name = path.display().to_string();
    let io = |source| ScenarioError::Io {
        path: name.clone(),
        source,
    };
    let limit = MAX_SCENARIO_FILE_BYTES;
    let refuse = |what: String| ScenarioError::NotRead {
        path: name.clone(),
        reason: format!(
            "{what}: a scenario is read from a regular file of at most {} ({limit} bytes)",
            units::format_size(limit)
        ),
    };
    let not_regular = |t: std::fs::FileType| {
        refuse(format!(
            "it is {}, not a regular file",
            policy::file_kind(t).unwrap_or("not a regular file")
        ))
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let f = std::fs::File::open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    if meta.len() > limit {
        return Err(refuse(format!("it holds {} bytes", meta.len())));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(refuse(format!("it holds more than {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        // `before` is valid UTF-8: line and column of the first bad byte, in characters.
        let text = std::str::from_utf8(before).unwrap_or_default();
        let line = text.matches('\n').count() + 1;
        let column = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ScenarioError::At {
            path: name.clone(),
            line: line as u64,
            column: column as u64,
            message: format!(
                "byte 0x{:02x} at offset {at} is not UTF-8: a scenario is UTF-8 text",
                e.as_bytes()[at]
            ),
        }
    })
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// The YAML library's message without its own `error: line L column C: ` prefix (the error
/// already names the file, line and column).
fn without_location(m: &str) -> String {
    let m = m.strip_prefix("error: ").unwrap_or(m);
    if m.starts_with("line ") {
        if let Some((head, rest)) = m.split_once(": ") {
            if head.contains(" column ") {
                return rest.to_string();
            }
        }
    }
    m.to_string()
}

/// What the YAML library's error `e` at `line`:`column` of `text` means in the scenario's
/// terms: the scenario file is empty; a key is given twice; a key is unknown (and the key it
/// most likely meant); or the key whose value is of the wrong kind and what it must be
/// (`` `cores` must be a whole number from 1 to 65535 ``). `None` for other errors (syntax:
/// the library's message says it).
fn yaml_message(e: &serde_saphyr::Error, text: &str, line: u64, column: u64) -> Option<String> {
    use serde_saphyr::Error as E;
    let blank = text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    });
    if blank {
        return Some(
            "the scenario file is empty: a scenario is a mapping with `duration`, `policy` (or \
             `policy_inline`) and `tenants` (examples/scenarios/README.md)"
                .into(),
        );
    }
    let want = match e {
        E::AliasError { error, .. } | E::WithSnippet { error, .. } => {
            return yaml_message(error, text, line, column)
        }
        E::DuplicateMappingKey { key: Some(k), .. } => {
            return Some(format!(
                "key `{k}` given twice: a mapping holds each key once"
            ))
        }
        E::DuplicateMappingKey { key: None, .. } => {
            return Some("a key given twice: a mapping holds each key once".into())
        }
        E::SerdeMissingField { field, .. } => return Some(format!("missing key `{field}`")),
        E::SerdeUnknownField {
            field, expected, ..
        } => {
            let hint = suggest(field, expected)
                .map_or(String::new(), |s| format!("; did you mean `{s}`?"));
            return Some(format!(
                "unknown key `{field}`{hint} (known: {})",
                expected.join(", ")
            ));
        }
        E::Unexpected { expected, .. } => match *expected {
            "sequence start" => Want::List,
            "mapping start" => Want::Mapping,
            "string scalar" => Want::Single,
            _ => return None,
        },
        E::InvalidScalar { ty: "boolean", .. } => Want::Bool,
        E::InvalidScalar { ty, .. } => Want::Number(ty),
        E::NullIntoString { .. } => Want::Value,
        // A `meta` field's or a NIC parameter's value (a number or text) given a list or a
        // mapping: serde's words for it name the type.
        E::Message { msg, .. } if msg.contains("untagged enum Scalar") => Want::Single,
        _ => return None,
    };
    let at = key_at(text, line, column);
    let got = match want {
        Want::Number(_) | Want::Bool => {
            scalar_at(text, line, column).map_or(String::new(), |v| format!(", not `{v}`"))
        }
        _ => String::new(),
    };
    let Some((key, item)) = at else {
        return Some(match want {
            Want::Mapping => "a scenario is a mapping of keys (`duration:`, `policy:`, \
                              `tenants:` and others; examples/scenarios/README.md), not a \
                              single value or a list"
                .into(),
            Want::List => "expected a list here, e.g. `[a, b]`".into(),
            Want::Single => "expected a single value here, not a list or a mapping".into(),
            Want::Number(ty) => format!("expected {}{got}", whole_number(ty)),
            Want::Bool => format!("expected `true` or `false`{got}"),
            Want::Value => "a value is missing here".into(),
        });
    };
    let (subject, what) = key_rule(&key, item, want);
    Some(match want {
        Want::Value => format!("{subject} has no value: it must be {what}"),
        _ => format!("{subject} must be {what}{got}"),
    })
}

/// The kind of value the YAML library wanted where it found another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    List,
    Mapping,
    /// A scalar, not a list or a mapping.
    Single,
    /// An integer of this Rust type.
    Number(&'static str),
    Bool,
    /// Something where there is nothing (`duration:` alone).
    Value,
}

/// `a whole number from 0 to 65535` for an integer type's name.
fn whole_number(ty: &str) -> String {
    let max = match ty {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        _ => u64::MAX,
    };
    format!("a whole number from 0 to {max}")
}

/// What the value of `key` must be, for a message: (`` `cores` ``, `a whole number from 1 to
/// 65535`). `item`: the value is an entry of `key`'s list.
fn key_rule(key: &str, item: bool, want: Want) -> (String, String) {
    let k = format!("`{key}`");
    let each = format!("each entry of `{key}`");
    let time = "a time, e.g. `10ms`";
    let size = "a size, e.g. `64kb`";
    let (subject, what): (&str, String) = match (key, item) {
        ("cores", false) if want == Want::List || want == Want::Mapping => {
            (&k, "a list of core numbers, e.g. `[0, 1]`".into())
        }
        ("cores", false) => (&k, "a whole number from 1 to 65535".into()),
        ("cores", true) => (
            &each,
            "a core number, a whole number from 0 to 65534".into(),
        ),
        ("flows", _) => (&k, whole_number("u32")),
        ("limits", _) => (
            &k,
            "a mapping, e.g. `{max_offered_load: 64, max_events: 1073741824}`".into(),
        ),
        ("max_offered_load" | "max_events", _) => (&k, "a whole number, at least 1".into()),
        ("seed", _) => (&k, whole_number("u64")),
        ("dcb_class", _) => (&k, "a whole number from 0 to 7".into()),
        ("prioritized" | "closed_loop", _) => (&k, "`true` or `false`".into()),
        ("nics", false) => (&k, "a list, e.g. `[sq, loom]`".into()),
        ("nics", true) => (&each, format!("a NIC model's name ({})", NicKind::names())),
        ("tenants", false) => (
            &k,
            "a list of tenants, each a mapping with `name` and `apps`".into(),
        ),
        ("tenants", true) => (&each, "a mapping with `name` and `apps`".into()),
        ("apps", false) => (
            &k,
            "a list of applications, e.g. `[{name: bulk, kind: bulk}]`".into(),
        ),
        ("apps", true) => (&each, "a mapping with `name` and `kind`".into()),
        ("schedule", false) => (
            &k,
            "a list of steps, e.g. `[{at: 400ms, flows: 16}]`".into(),
        ),
        ("schedule", true) => (&each, "a mapping, e.g. `{at: 400ms, flows: 16}`".into()),
        ("host", _) => (&k, "a mapping, e.g. `{cores: 8, mtu: 1500b}`".into()),
        ("nic", _) => (
            &k,
            "a mapping of models to parameters, e.g. `{loom: {batch: 64kb}}`".into(),
        ),
        ("meta", _) => (
            &k,
            "a mapping of packet fields to values, e.g. `{tenant: 1, dport: 11211}`".into(),
        ),
        (
            "duration" | "latency_window" | "start" | "stop" | "at" | "retry" | "cpu_per_packet"
            | "cpu_per_doorbell",
            _,
        ) => (&k, time.into()),
        ("window", _) => (
            &k,
            "a single value: a time (the throughput window, e.g. `5ms`), or in a bulk \
             application a size (e.g. `128kb`)"
                .into(),
        ),
        ("segment" | "mtu" | "size" | "socket_limit", _) => (&k, size.into()),
        ("rate", _) => (
            &k,
            "a single value, e.g. `10000/s` (request-response) or `2gbit` (udp)".into(),
        ),
        ("kind", _) => (&k, "`bulk`, `request-response` or `udp`".into()),
        ("placement", _) => (&k, "`random` or `round-robin`".into()),
        ("size_dist", _) => (&k, "`fixed` or `exponential`".into()),
        ("policy_inline", _) => (
            &k,
            "the policy's YAML as a block: `policy_inline: |` and the policy indented below".into(),
        ),
        ("name" | "description" | "time_scale" | "policy", _) => {
            (&k, "text, not a list or a mapping".into())
        }
        (model, false)
            if NicKind::from_name(model).is_some() || matches!(model, "hw" | "all" | "dcb") =>
        {
            let params: Vec<&str> = crate::nic::PARAMETERS
                .iter()
                .filter_map(|p| p.strip_prefix(model)?.strip_prefix('.'))
                .collect();
            (
                &k,
                format!(
                    "a mapping of its NIC parameters ({}) to values",
                    params.join(", ")
                ),
            )
        }
        _ => match want {
            Want::List => (&k, "a list".into()),
            Want::Mapping => (&k, "a mapping".into()),
            Want::Single | Want::Value => (
                &k,
                "a single value (a number or text), not a list or a mapping".into(),
            ),
            Want::Number(ty) => (&k, whole_number(ty)),
            Want::Bool => (&k, "`true` or `false`".into()),
        },
    };
    (subject.to_string(), what)
}

/// The characters of `text` before 1-based `line`:`column` (counted in characters, as the
/// YAML library does), and the character there.
fn before(text: &str, line: u64, column: u64) -> (Vec<char>, Option<char>) {
    let mut out = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        if i as u64 + 1 < line {
            out.extend(l.chars());
            out.push('\n');
        } else {
            let mut cs = l.trim_end_matches('\r').chars();
            out.extend(cs.by_ref().take(column.saturating_sub(1) as usize));
            return (out, cs.next());
        }
    }
    (out, None)
}

/// The key whose value is at `line`:`column`, and whether the value is an entry of that key's
/// list (`cores: [0, x]`, `- x` under `tenants:`); `None` at the top of the document. Reads
/// the text backwards: flow and block style as the scenarios are written (comments between a
/// key and its value are not skipped).
fn key_at(text: &str, line: u64, column: u64) -> Option<(String, bool)> {
    let (mut cs, here) = before(text, line, column);
    // A key without a value is reported at its colon.
    if here == Some(':') {
        cs.push(':');
    }
    let skip_space = |cs: &[char], mut i: usize| {
        while i > 0 && cs[i - 1].is_whitespace() {
            i -= 1;
        }
        i
    };
    // The key ending at the colon before `i` (after spaces).
    let key_before = |cs: &[char], i: usize| -> Option<String> {
        let i = skip_space(cs, i);
        if i == 0 || cs[i - 1] != ':' {
            return None;
        }
        let mut j = i - 1;
        while j > 0 && cs[j - 1] == ' ' {
            j -= 1;
        }
        let end = j;
        while j > 0 && (cs[j - 1].is_alphanumeric() || matches!(cs[j - 1], '_' | '-' | '.')) {
            j -= 1;
        }
        (j < end).then(|| cs[j..end].iter().collect())
    };
    let i = skip_space(&cs, cs.len());
    match i.checked_sub(1).map(|k| cs[k]) {
        Some(':') => key_before(&cs, i).map(|k| (k, false)),
        Some('[' | ',') => {
            // The `[` that opens this list, then its key.
            let mut depth = 0usize;
            let mut j = i;
            while j > 0 {
                j -= 1;
                match cs[j] {
                    ']' | '}' => depth += 1,
                    '{' if depth == 0 => return None,
                    '[' | '{' if depth > 0 => depth -= 1,
                    '[' => return key_before(&cs, j).map(|k| (k, true)),
                    _ => {}
                }
            }
            None
        }
        Some('-') if i == 1 || cs[i - 2].is_whitespace() => {
            // A block list entry: the key above it, indented less (or as much: `key:` then
            // `- entry` at its indentation).
            let line_start = cs[..i - 1]
                .iter()
                .rposition(|&c| c == '\n')
                .map_or(0, |p| p + 1);
            let indent = i - 1 - line_start;
            let above: String = cs[..line_start].iter().collect();
            for l in above.lines().rev() {
                let t = l.trim_start();
                if t.is_empty() || t.starts_with('#') {
                    continue;
                }
                if l.len() - t.len() > indent || t.starts_with("- ") {
                    continue;
                }
                let t = t.split(" #").next().unwrap_or(t).trim_end();
                return t.strip_suffix(':').map(|k| (k.trim().to_string(), true));
            }
            None
        }
        _ => None,
    }
}

/// The plain scalar at `line`:`column` (to the next `,`, `]`, `}`, ` #` or the line's end),
/// for messages; `None` when empty or long.
fn scalar_at(text: &str, line: u64, column: u64) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)? as usize)?;
    let rest: String = l.chars().skip(column.saturating_sub(1) as usize).collect();
    let v = rest
        .split([',', ']', '}'])
        .next()?
        .split(" #")
        .next()?
        .trim();
    (!v.is_empty() && v.chars().count() <= 40 && !v.chars().any(char::is_control))
        .then(|| v.to_string())
}

fn load_policy_file(
    scenario: &str,
    file: &Path,
    opts: &LoadOptions,
) -> Result<Program, ScenarioError> {
    policy::load(file, opts).map_err(|e| ScenarioError::Policy {
        path: scenario.to_string(),
        message: e.render_plain(),
    })
}

/// Where `policy_inline`'s text lies in the scenario file: the file line of its first line
/// and the columns its lines are indented by (the YAML library places the value at its first
/// character). Only a literal block (`policy_inline: |`) keeps the lines as written, and
/// only when every line is found where it should be; `None` otherwise (a quoted or folded
/// value).
fn block_origin(text: &str, inline: &Spanned<String>) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = inline.referenced;
    let first = usize::try_from(at.line()).ok()?;
    let start = lines.get(first.checked_sub(1)?)?;
    // Columns count characters; the indentation is spaces, one byte each.
    let indent = usize::try_from(at.column()).ok()?.checked_sub(1)?;
    if !start.get(..indent)?.chars().all(|c| c == ' ') {
        return None;
    }
    let body = inline.value.strip_suffix('\n').unwrap_or(&inline.value);
    let found = body.lines().enumerate().all(|(i, l)| {
        lines.get(first - 1 + i).is_some_and(|f| {
            if l.is_empty() {
                f.trim().is_empty()
            } else {
                f.len() == indent + l.len() && f[..indent].trim().is_empty() && f[indent..] == *l
            }
        })
    });
    found.then_some((first, indent))
}

/// The diagnostics of the inline policy (errors or warnings), each at its line and column in
/// the scenario file (`file:line:col: policy_inline: error[rule]: ...`); when the block's
/// lines cannot be found in the file, at the line and column within the block, naming where
/// it starts.
fn inline_diagnostics(
    diagnostics: &[policy::Diagnostic],
    sources: &policy::error::Sources,
    path: &str,
    text: &str,
    inline: &Spanned<String>,
) -> Vec<String> {
    let origin = block_origin(text, inline);
    diagnostics
        .iter()
        .map(|d| {
            let one = policy::error::render_line(sources, d);
            if d.span.file != 0 {
                // A sub-policy file the inline policy attaches names its own place.
                return one;
            }
            let (file, line, col) = sources.location(d.span);
            let rest = one
                .strip_prefix(&format!("{file}:{line}:{col}: "))
                .unwrap_or(&one);
            match origin {
                Some((first, indent)) => format!(
                    "{path}:{}:{}: policy_inline: {rest}",
                    first + line - 1,
                    col + indent
                ),
                None => format!(
                    "{path}:{}:{}: policy_inline (line {line}, column {col} of its text): {rest}",
                    inline.referenced.line(),
                    inline.referenced.column()
                ),
            }
        })
        .collect()
}

struct Ctx<'a> {
    path: &'a str,
    /// The link of the policy (the applications' rates are checked against it), and
    /// whether its rate came from `--link`.
    link: Link,
    link_from_cli: bool,
}

impl Ctx<'_> {
    fn err(&self, at: &serde_saphyr::Location, message: String) -> ScenarioError {
        ScenarioError::At {
            path: self.path.to_string(),
            line: at.line(),
            column: at.column(),
            message,
        }
    }

    /// `file:line:column` of a location, for messages that name a second place.
    fn at(&self, at: &serde_saphyr::Location) -> String {
        format!("{}:{}:{}", self.path, at.line(), at.column())
    }

    /// The link rate for messages: `10gbit (the policy's link)`.
    fn link_text(&self) -> String {
        format!(
            "{} ({})",
            units::format_rate(self.link.rate_bps),
            if self.link_from_cli {
                "--link"
            } else {
                "the policy's link"
            }
        )
    }

    fn time(&self, s: &Spanned<String>, positive: bool) -> Result<u64, ScenarioError> {
        units::parse_time(&s.value, positive).map_err(|e| self.err(&s.referenced, e.to_string()))
    }

    /// A tenant's or application's name, refused unless a policy node could have it
    /// ([`policy::parse::valid_name`]): names are columns of the CSV files (written
    /// unquoted) and cells of the terminal table. A tenant's name has no `/` either, which
    /// joins it to its applications' names (`T1/kv`).
    fn name(&self, name: &Spanned<String>, tenant: bool) -> Result<(), ScenarioError> {
        let n = &name.value;
        let q = policy::parse::excerpt(n);
        let message = if let Some(problem) = policy::parse::name_problem(n) {
            format!(
                "{} name {q} {problem}: names are columns of timeseries.csv and the other CSV \
                 files (written unquoted) and cells of the terminal table, as policy node \
                 names are",
                if tenant { "tenant" } else { "application" }
            )
        } else if tenant && n.contains('/') {
            format!(
                "tenant name {q} must not contain `/`: `tenant/app` names an application \
                 (summary.json's `headline_app`, the terminal table)"
            )
        } else {
            return Ok(());
        };
        Err(self.err(&name.referenced, message))
    }

    /// The scenario's `name`: a name as a tenant's ([`Ctx::name`]: it heads the terminal
    /// table and summary.json), and not `.` or `..`: `weft demo` makes it a directory.
    fn scenario_name(&self, name: &Spanned<String>) -> Result<(), ScenarioError> {
        let n = &name.value;
        let why = "as tenant names: it heads the terminal table and summary.json, and `weft \
                   demo` writes a directory of that name";
        let q = policy::parse::excerpt(n);
        let message = if let Some(problem) = policy::parse::name_problem(n) {
            format!("scenario name {q} {problem}, {why}")
        } else if n.contains('/') {
            format!("scenario name {q} must not contain `/`, {why}")
        } else if n == "." || n == ".." {
            format!(
                "scenario name {n:?} names a directory already (`weft demo` writes one of the \
                 scenario's name)"
            )
        } else {
            return Ok(());
        };
        Err(self.err(&name.referenced, message))
    }

    /// Free text (`description`, `time_scale`): any characters but control ones (an escape
    /// sequence would reach the terminal, which prints `time_scale`) and bidirectional
    /// overrides (text that reads in another order than it is stored). `multiline` text
    /// (`description`) may hold newlines and tabs; a one-line note (`time_scale`, the
    /// table's heading) none.
    fn free_text(
        &self,
        text: &Spanned<String>,
        key: &str,
        multiline: bool,
    ) -> Result<(), ScenarioError> {
        let allowed = |c: char| multiline && (c == '\n' || c == '\t');
        let bad = text
            .value
            .chars()
            .enumerate()
            .find(|&(_, c)| (c.is_control() && !allowed(c)) || policy::parse::bidi_control(c));
        let Some((i, c)) = bad else {
            return Ok(());
        };
        let rule = if multiline {
            "free text may hold newlines and tabs but no other control characters (they \
             reach the terminal and index.html) nor bidirectional overrides"
        } else {
            "a one-line note (the terminal table's heading prints it): no newlines, tabs or \
             other control characters, nor bidirectional overrides"
        };
        Err(self.err(
            &text.referenced,
            format!(
                "`{key}` has {} U+{:04X} at character {}: {rule}",
                if c.is_control() {
                    "the control character"
                } else {
                    "the bidirectional formatting character"
                },
                c as u32,
                i + 1
            ),
        ))
    }

    /// The scenario's `limits:` under the CLI's overrides: each a whole number, at least 1.
    fn limits(&self, raw: Option<&RawLimits>, ov: &Overrides) -> Result<Limits, ScenarioError> {
        let pick = |cli: Option<u64>,
                    flag: &'static str,
                    written: Option<&Spanned<u64>>,
                    default: u64|
         -> Result<(u64, Option<String>), ScenarioError> {
            if let Some(v) = cli {
                if v == 0 {
                    return Err(ScenarioError::Override {
                        what: flag,
                        message: "0: it must be at least 1".into(),
                    });
                }
                return Ok((v, Some(flag.to_string())));
            }
            match written {
                Some(w) if w.value == 0 => Err(self.err(
                    &w.referenced,
                    format!(
                        "`{}: 0`: it must be at least 1",
                        flag.trim_start_matches('-').replace('-', "_")
                    ),
                )),
                Some(w) => Ok((w.value, Some(self.at(&w.referenced)))),
                None => Ok((default, None)),
            }
        };
        let (max_offered_load, max_offered_load_from) = pick(
            ov.max_offered_load,
            "--max-offered-load",
            raw.and_then(|l| l.max_offered_load.as_ref()),
            DEFAULT_MAX_TOTAL_OFFERED_LOAD,
        )?;
        let (max_events, max_events_from) = pick(
            ov.max_events,
            "--max-events",
            raw.and_then(|l| l.max_events.as_ref()),
            DEFAULT_MAX_EVENTS,
        )?;
        Ok(Limits {
            max_offered_load,
            max_offered_load_from,
            max_events,
            max_events_from,
        })
    }

    /// The most the applications offer together at any instant of the run, in multiples
    /// of the link rate, refused above `limits.max_offered_load` (see
    /// [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]); the error points at the application that offers
    /// most at the worst instant.
    fn offered_load(
        &self,
        apps: &[App],
        raw_apps: &[&RawApp],
        tenants: &[Tenant],
        host: &Host,
        duration_ps: u64,
        limits: &Limits,
    ) -> Result<f64, ScenarioError> {
        let Some(peak) = peak_offered(apps, host, &self.link, duration_ps) else {
            return Ok(0.0);
        };
        if !peak.over(limits.max_offered_load, &self.link) {
            return Ok(peak.load(&self.link));
        }
        let (what, top) = peak.describe(apps, tenants, host, &self.link, &self.link_text());
        let cap_from = match &limits.max_offered_load_from {
            None => "by default".to_string(),
            Some(f) if f.starts_with("--") => format!("under {f}"),
            Some(f) => format!("under the scenario's `limits: {{max_offered_load}}` at {f}"),
        };
        let ra = raw_apps[top];
        let at = ra
            .rate
            .as_ref()
            .map_or(&ra.kind.referenced, |r| &r.referenced);
        Err(self.err(
            at,
            format!(
                "{what}; a scenario may offer at most {} times the link rate {cap_from}: \
                 {OFFERED_WHY}",
                limits.max_offered_load
            ),
        ))
    }

    fn size(&self, s: &Spanned<String>) -> Result<u64, ScenarioError> {
        units::parse_size(&s.value, true).map_err(|e| self.err(&s.referenced, e.to_string()))
    }

    /// A size of at most [`MAX_SIZE_BYTES`]; `what` names the key in the message.
    fn bounded_size(&self, s: &Spanned<String>, what: &str) -> Result<u64, ScenarioError> {
        let b = self.size(s)?;
        if b > MAX_SIZE_BYTES {
            return Err(self.err(
                &s.referenced,
                format!(
                    "{what} `{}` ({b} B) is too large: at most {} ({MAX_SIZE_BYTES} B: what an \
                     application writes or holds is cut into MTU packets, each held in memory \
                     until it leaves)",
                    s.value,
                    units::format_size(MAX_SIZE_BYTES)
                ),
            ));
        }
        Ok(b)
    }

    fn rate(&self, s: &Spanned<String>) -> Result<u64, ScenarioError> {
        units::parse_rate(&s.value).map_err(|e| self.err(&s.referenced, e.to_string()))
    }

    /// A UDP flow's rate: at most [`MAX_OFFERED_LOAD`] times the link rate.
    fn udp_rate(&self, s: &Spanned<String>) -> Result<u64, ScenarioError> {
        let r = self.rate(s)?;
        let max = u128::from(self.link.rate_bps) * u128::from(MAX_OFFERED_LOAD);
        if u128::from(r) > max {
            return Err(self.err(
                &s.referenced,
                format!(
                    "rate `{}` ({r} bit/s) is more than {MAX_OFFERED_LOAD} times the link rate, \
                     {}: a UDP flow offers at most that ({max} bit/s), which is what \
                     `unlimited` offers; more would only be dropped at the socket, and make \
                     the run longer",
                    s.value,
                    self.link_text()
                ),
            ));
        }
        Ok(r)
    }

    /// Refuses a key that the application's kind does not read (`rate` on a bulk
    /// application, `window` on a UDP one): it would be ignored without a word.
    fn misplaced_keys(&self, ra: &RawApp) -> Result<(), ScenarioError> {
        const RR: &str = "request-response";
        let kind = ra.kind.value.as_str();
        let keys: [(&str, Option<&serde_saphyr::Location>, &[&str]); 6] = [
            (
                "window",
                ra.window.as_ref().map(|v| &v.referenced),
                &["bulk"],
            ),
            (
                "rate",
                ra.rate.as_ref().map(|v| &v.referenced),
                &[RR, "udp"],
            ),
            ("size", ra.size.as_ref().map(|v| &v.referenced), &[RR]),
            (
                "size_dist",
                ra.size_dist.as_ref().map(|v| &v.referenced),
                &[RR],
            ),
            (
                "closed_loop",
                ra.closed_loop.as_ref().map(|v| &v.referenced),
                &[RR],
            ),
            (
                "socket_limit",
                ra.socket_limit.as_ref().map(|v| &v.referenced),
                &["udp"],
            ),
        ];
        let does = match kind {
            "bulk" => "keeps `window` bytes queued per flow",
            RR => "answers requests with responses of `size` bytes",
            "udp" => "sends MTU packets at `rate` per flow",
            // The kind itself is refused where it is read.
            _ => return Ok(()),
        };
        for (key, at, kinds) in keys {
            if let Some(at) = at.filter(|_| !kinds.contains(&kind)) {
                let belongs = kinds
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and ");
                return Err(self.err(
                    at,
                    format!(
                        "`{key}` belongs to {belongs} applications; `{}` is a `{kind}` \
                         application, which {does}",
                        ra.name.value
                    ),
                ));
            }
        }
        Ok(())
    }

    fn app(
        &self,
        ra: &RawApp,
        tenant: usize,
        tmeta: &PacketMeta,
        host: &Host,
        duration_ps: u64,
    ) -> Result<App, ScenarioError> {
        self.misplaced_keys(ra)?;
        let mut meta = *tmeta;
        for (k, v) in &ra.meta {
            meta.set_field(k, &v.value.text())
                .map_err(|m| self.err(&v.referenced, format!("meta `{k}`: {m}")))?;
        }
        let kind = match ra.kind.value.as_str() {
            "bulk" => AppKind::Bulk {
                window_bytes: match &ra.window {
                    Some(w) => self.bounded_size(w, "window")?,
                    None => 2 * host.segment_bytes,
                },
            },
            "request-response" => {
                let closed_loop = ra.closed_loop.as_ref().is_some_and(|c| c.value);
                let rate =
                    match (&ra.rate, closed_loop) {
                        (Some(r), _) => r.clone(),
                        (None, true) => Spanned {
                            value: "1/s".to_string(),
                            referenced: ra.kind.referenced,
                            defined: ra.kind.defined,
                        },
                        (None, false) => return Err(self.err(
                            &ra.kind.referenced,
                            "request-response needs `rate` (e.g. 10000/s) or `closed_loop: true`"
                                .into(),
                        )),
                    };
                let rate = &rate;
                let rate_per_s = rate
                    .value
                    .trim_end_matches("/s")
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| *r > 0.0 && r.is_finite())
                    .ok_or_else(|| {
                        self.err(
                            &rate.referenced,
                            format!(
                                "rate `{}`: expected requests per second, e.g. `10000/s`",
                                rate.value
                            ),
                        )
                    })?;
                let bytes = match &ra.size {
                    Some(s) => self.bounded_size(s, "size")?,
                    None => 1000,
                };
                let size = match ra.size_dist.as_ref().map(|d| d.value.as_str()) {
                    None | Some("fixed") => SizeDist::Fixed(bytes),
                    Some("exponential") => SizeDist::Exponential(bytes),
                    Some(other) => {
                        return Err(self.err(
                            &ra.size_dist.as_ref().expect("some").referenced,
                            format!("size_dist `{other}`: expected `fixed` or `exponential`"),
                        ))
                    }
                };
                if size.max_bytes() > MAX_SIZE_BYTES {
                    // Only an exponential size gets here: its draws reach 36.7 means.
                    let s = ra.size.as_ref().expect("a size past the bound was given");
                    let max_mean = (MAX_SIZE_BYTES as f64 / EXP_MAX_OVER_MEAN) as u64;
                    return Err(self.err(
                        &s.referenced,
                        format!(
                            "size `{}` ({bytes} B): exponential sizes are drawn up to \
                             {EXP_MAX_OVER_MEAN:.1} times their mean ({} B), and a response \
                             is at most {} ({MAX_SIZE_BYTES} B): the mean is at most \
                             {max_mean} B",
                            s.value,
                            size.max_bytes(),
                            units::format_size(MAX_SIZE_BYTES)
                        ),
                    ));
                }
                if !closed_loop {
                    // The responses on the wire, frame overhead included, as a UDP flow's
                    // rate is: at most MAX_OFFERED_LOAD times the link rate.
                    let mean = size.mean_bytes();
                    let mtu = u64::from(host.mtu_bytes);
                    let wire_bytes = mean.saturating_add(
                        mean.div_ceil(mtu).saturating_mul(self.link.overhead_bytes),
                    );
                    let offered = rate_per_s * wire_bytes as f64 * 8.0;
                    let max = self.link.rate_bps as f64 * MAX_OFFERED_LOAD as f64;
                    if offered > max {
                        let max_rate = (max / (wire_bytes as f64 * 8.0) * 1000.0).floor() / 1000.0;
                        return Err(self.err(
                            &rate.referenced,
                            format!(
                                "rate `{}` of {mean} B responses ({wire_bytes} B on the wire \
                                 with {} B of overhead a frame) offers {offered:.0} bit/s, more than \
                                 {MAX_OFFERED_LOAD} times the link rate, {}: an application \
                                 offers at most that, as `unlimited` UDP does; at most \
                                 {max_rate}/s here",
                                rate.value,
                                self.link.overhead_bytes,
                                self.link_text()
                            ),
                        ));
                    }
                }
                AppKind::RequestResponse {
                    rate_per_s,
                    size,
                    closed_loop,
                }
            }
            "udp" => AppKind::Udp {
                rate_bps: match &ra.rate {
                    Some(r) if r.value == "unlimited" => None,
                    Some(r) => Some(self.udp_rate(r)?),
                    None => None,
                },
                socket_limit_bytes: match &ra.socket_limit {
                    Some(s) => self.bounded_size(s, "socket_limit")?,
                    None => 212_992,
                },
            },
            other => {
                return Err(self.err(
                    &ra.kind.referenced,
                    format!("kind `{other}`: expected `bulk`, `request-response` or `udp`"),
                ))
            }
        };
        let cores = match &ra.cores {
            Some(c) => {
                if c.value.is_empty() {
                    return Err(self.err(&c.referenced, "`cores` is empty".into()));
                }
                if let Some(bad) = c.value.iter().find(|&&x| x >= host.cores) {
                    return Err(self.err(
                        &c.referenced,
                        format!(
                            "core {bad} does not exist (the host has {} cores)",
                            host.cores
                        ),
                    ));
                }
                c.value.clone()
            }
            None => vec![(tenant as u16) % host.cores],
        };
        let start = match &ra.start {
            Some(s) => self.time(s, false)?,
            None => 0,
        };
        let stop = match &ra.stop {
            Some(s) => self.time(s, false)?,
            None => duration_ps,
        };
        if let (Some(s), true) = (&ra.stop, stop <= start) {
            return Err(self.err(&s.referenced, "stop must come after start".into()));
        }
        let default_flows = if matches!(kind, AppKind::RequestResponse { .. }) {
            1
        } else {
            ra.flows.unwrap_or(1)
        };
        let mut schedule = vec![(start, ra.flows.unwrap_or(default_flows))];
        let mut schedule_at = vec![ra.start.as_ref().map(|s| self.at(&s.referenced))];
        if let Some(steps) = &ra.schedule {
            let mut last = start;
            for st in steps {
                let at = self.time(&st.at, false)?;
                if at < last {
                    return Err(self.err(
                        &st.at.referenced,
                        "schedule steps must be in time order, after `start`".into(),
                    ));
                }
                if let (Some(s), true) = (&ra.stop, at >= stop) {
                    // Taken after the stop, the step would start the flows again.
                    return Err(self.err(
                        &st.at.referenced,
                        format!(
                            "schedule step to {} flows at {} is at or after {}'s `stop` ({}, \
                             at {}): it would start the application's flows again after it \
                             ended; end the schedule before `stop`, or move `stop`",
                            st.flows,
                            units::format_time(at),
                            ra.name.value,
                            units::format_time(stop),
                            self.at(&s.referenced),
                        ),
                    ));
                }
                last = at;
                schedule.push((at, st.flows));
                schedule_at.push(Some(self.at(&st.at.referenced)));
            }
        }
        if stop < duration_ps || ra.stop.is_some() {
            schedule.push((stop, 0));
            schedule_at.push(None);
        }
        let dcb_class = match &ra.dcb_class {
            Some(c) if c.value > 7 => {
                return Err(self.err(&c.referenced, "dcb_class must be 0..=7".into()))
            }
            Some(c) => Some(c.value),
            None => None,
        };
        Ok(App {
            name: ra.name.value.clone(),
            tenant,
            meta,
            kind,
            cores,
            schedule,
            schedule_at,
            prioritized: ra.prioritized,
            dcb_class,
        })
    }
}
