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
//! application's cores exist on it; windows and duration are positive; the duration is at most
//! [`LAST_ARRIVAL_PS`](weft_core::sched::LAST_ARRIVAL_PS) (2^63 ps: the simulator writes packets
//! until the end, and the rest of the 64-bit clock is headroom for what is queued then) and holds
//! at most [`MAX_WINDOWS`] throughput and latency windows, and at most [`MAX_WINDOW_CELLS`] windows
//! × applications of each kind; the MTU is 64..=65535 bytes; the segment, bulk windows, response
//! sizes (an exponential one's largest draw) and UDP socket limits are at most [`MAX_SIZE_BYTES`];
//! the applications have at most [`MAX_FLOWS`] flows in all, and their windows and closed-loop
//! responses at most [`MAX_BURST_PACKETS`] packets at once; a UDP flow's rate and a
//! request/response application's offered load are at most [`MAX_OFFERED_LOAD`] times the link rate
//! (what `unlimited` offers), and all of them together at any instant at most
//! `limits.max_offered_load` times ([`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]: the simulator's work grows
//! with what is offered, not with what the link carries); tenant names are unique, and application
//! names within their tenant (they key the reports); every tenant has an application, and every
//! application only its kind's keys (`window` bulk; `rate` request-response and UDP; `size`
//! request-response and TCP; `size_dist`, `closed_loop`, `transport` request-response;
//! `socket_limit` UDP; `to` applications over TCP); at least one NIC model, none
//! twice; start < stop, and every schedule step before a written `stop`; the policy compiled.
//!
//! Tenant and application names are non-empty, without whitespace, commas, double quotes
//! or control characters, as policy node names are (`weft_core::policy::names::valid_name`):
//! they are columns of the CSV files, written unquoted, and cells of the terminal table. A
//! tenant's name has no `/` either: `tenant/app` names an application (summary.json's
//! `headline_app`, the terminal table, messages).
//!
//! The scenario's `name` follows the tenants' rule (it heads the terminal table and
//! summary.json; `weft demo` makes it a directory, so it is not `.` or `..` either); without
//! one, the file's stem is the name, each character the rule refuses replaced by `_`.
//! `description` and `time_scale` are free text without control characters (newlines and
//! tabs are fine in `description`; `time_scale` is one line of the terminal table's heading) and
//! without bidirectional overrides (index.html prints both, escaped). `time_scale` says what it
//! means, `PAPER = SIMULATED` in positive times (`1 paper second = 100 ms simulated`, then a note
//! if any): it is parsed ([`parse_time_scale`]) and summary.json gives the ratio.

//!
//! Layout: this file holds the limits, the error type, [`Overrides`] and the file reader;
//! `model` the loaded scenario's types ([`Scenario`], [`App`], [`Host`], ...), `raw` the
//! file's YAML shape as deserialized, `load` [`load_str`] (the policy, times, NICs, host,
//! tenants and applications in turn), `ctx` the checks of single values and applications at
//! their place in the file, `offered` the offered-load limit, `time` time checks and
//! `time_scale`, and `messages` the YAML library's errors in the scenario's terms.

mod ctx;
mod load;
mod messages;
mod model;
mod network;
mod offered;
mod raw;
mod time;

use std::path::{Path, PathBuf};

use weft_core::policy;
use weft_core::units;

pub use load::load_str;
pub use model::{App, AppKind, Host, Placement, Scenario, SizeDist, Tenant};
pub(crate) use time::check_cells;
pub use time::parse_time_scale;

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
