//! Trace replay: a packet trace (CSV or a pcap/pcapng capture) replayed through weft's
//! scheduling core in virtual time, on the policy's link, with its departures, drops,
//! timeline, charts and summary written to an output directory. `weft replay` is this crate
//! with arguments and printing around it; anything else that replays a trace (a test, a
//! tool, a fuzz target of the capture reader) uses it the same way.
//!
//! Open a trace with [`TraceSource::open`] (an iterator of packets in time order, CSV or
//! capture), make a [`Replay`] of a compiled policy and an engine for it ([`Replay::new`]),
//! [`Replay::run`] it into an output directory, and write `summary.json` from the
//! [`ReplaySummary`] it returns ([`ReplaySummary::write`]). [`replay`] does all of it with
//! the engine [`EngineKind`] names, and cleans up after a failure.
//!
//! ```
//! use std::path::Path;
//! use std::sync::Arc;
//! use weft_core::policy::{compile_str, LoadOptions};
//! use weft_core::sched::fast::FastEngine;
//! use weft_replay::{Diagnostics, Options, Replay, TraceSource};
//!
//! /// Warnings and notes kept as lines.
//! struct Lines(Vec<String>);
//! impl Diagnostics for Lines {
//!     fn warning(&mut self, m: &str) { self.0.push(format!("warning: {m}")) }
//!     fn note(&mut self, m: &str) { self.0.push(format!("note: {m}")) }
//! }
//!
//! let policy = "weft: 1\nname: two\nlink:\n  rate: 10gbit\nnodes:\n  \
//!     - {name: root, type: prio}\n  \
//!     - {name: high, type: leaf, parent: root, priority: 0, match: {tag: 1}}\n  \
//!     - {name: low, type: leaf, parent: root, priority: 1, match: {tag: 2}}\n";
//! let prog = Arc::new(compile_str(Path::new("two.yaml"), policy, &LoadOptions::default())?);
//! let dir = std::env::temp_dir().join(format!("weft-replay-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let trace = dir.join("t.csv");
//! // Two 1500-byte packets at once: the high one leaves first.
//! std::fs::write(&trace, "arrive_ps,bytes,tag\n0,1500,2\n0,1500,1\n")?;
//! let out = dir.join("out");
//! std::fs::create_dir_all(&out)?;
//!
//! let opts = Options::default();
//! let engine = FastEngine::with_options(prog.clone(), opts.engine_options);
//! let source = TraceSource::open(&trace, &opts)?;
//! let mut said = Lines(Vec::new());
//! let summary = Replay::new(engine, prog, opts).run(source, &out, None, &mut said)?;
//! summary.write(&out, None)?;
//!
//! assert_eq!((summary.head.packets, summary.head.sent), (2, 2));
//! assert!(said.0.is_empty(), "{:?}", said.0);
//! // departures.csv: depart_ps,id,leaf,flow,bytes
//! let departures = std::fs::read_to_string(out.join("departures.csv"))?;
//! let rows = departures.lines().skip(1);
//! let leaves: Vec<&str> = rows.filter_map(|l| l.split(',').nth(2)).collect();
//! assert_eq!(leaves, ["high", "low"]);
//! assert!(out.join("summary.json").is_file());
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The library prints nothing: progress goes to the caller's [`Progress`], warnings and
//! notes about the input to its [`Diagnostics`], failures come back as [`Error`]s.
//!
//! Invariants: the replay streams (bounded memory, below); outputs are deterministic (the
//! same trace, policy and options give the same files byte for byte, and the fast and
//! reference engines the same departures); a failed replay leaves no outputs behind. Cost:
//! per packet, the engine's enqueue and dequeue, one CSV line written and O(1) tallies; at
//! the end, one histogram merge per node and the summary, charts and page written once.
//!
//! * **Engines.** [`EngineKind::Fast`] (`weft replay`'s default) runs [`FastEngine`],
//!   [`EngineKind::Reference`] the obviously-correct [`ReferenceEngine`]; both implement
//!   [`Engine`] and give identical departures (the CLI test replays every example trace
//!   through both and compares the files byte for byte).
//! * **Streaming.** The trace is read row by row through an iterator ([`TraceSource`]) that
//!   the link driver ([`link::run_bursts`](weft_core::sched::link::run_bursts)) pulls one
//!   arrival ahead, and departures and drops are written as they happen ([`Replay`]), so
//!   memory is bounded by what the scheduler holds (plus the
//!   per-leaf delay histograms, and the flows of fair leaves: the engine forgets other flows once
//!   they hold nothing, `EngineOptions::forget_idle_flows`), not by the trace's length or its
//!   flows. `max_backlog_packets` in the summary records the largest occupancy seen (rows read −
//!   sent − dropped, sampled at every departure; it may count the one row read ahead).
//! * **Summary** (`summary.json`, deterministic: objects in policy order, integers only): for
//!   every leaf and every scheduling node — a node aggregates its subtree — `packets`,
//!   `bytes`, `drops` by reason (a node's own drops, e.g. `unclassified`, plus its subtree's),
//!   `mean_bps` (bytes × 8 over the trace's active span, from the first arrival to the end of
//!   the last frame on the wire; integer division) and `queueing_delay_ps` (arrival to start
//!   of transmission: p50, p90, p99 from one HdrHistogram (3 significant digits) per leaf,
//!   merged up the tree for nodes, and the exact max and mean, kept beside it;
//!   `queueing_delay_precision` says so); kept sparsely while a leaf has few distinct
//!   delays ([`crate::delays`]), so a policy of many leaves does not hold a dense histogram
//!   per leaf. Cost: one merge per node at the end.
//!   And for every shaping class (`shapers`): its configured `rate_bps` and `burst_bytes`,
//!   and the same `packets`, `bytes`, `mean_bps` and `queueing_delay_ps` over the packets
//!   that left through it (a packet counts at every class on its path). With shaping
//!   classes in the policy the driver classifies each row itself and offers it classified
//!   (`link::Input::Classified`: the engine does not classify it again), keeping a shaped
//!   packet's classes from its arrival to its departure or drop: memory bounded by
//!   occupancy.
//! * **Progress.** The caller's [`Progress`], if any, hears of the trace's size, the rows
//!   and bytes read every 65,536 rows, and the end (`weft replay` shows a bar on a terminal,
//!   else with `--progress` a line at most once a second, and a final line).
//! * **Diagnostics.** Warnings about the input (fields no packet carries, rows over the
//!   MTU, a capture cut short or far out of order, an update too late or refused, ...) and
//!   notes (a capture's records sorted back into time order: nothing lost) go to the
//!   caller's [`Diagnostics`] as they are found (`weft replay` prints them on stderr, the
//!   notes not with `--quiet`).
//!
//! * **Limits.** A CSV row is read whole by the csv reader, so rows are bounded as they are read
//!   (`RowLimit`, `row_limit.rs`): one longer than `--max-trace-row-bytes`
//!   ([`DEFAULT_MAX_ROW_BYTES`], 64 KiB, by default; a row is a few hundred bytes) is refused at
//!   its line once that many of its bytes are read, and a value longer than
//!   `MAX_CELL_BYTES` (256) is refused with an excerpt. A 50 MB cell
//!   was read whole and quoted whole in its error. A capture's limits are [`crate::capture`]'s (a
//!   block of at most 64 MiB, `--max-interfaces`); its summary lists at most 64 interfaces and
//!   counts the rest, and a warning names at most `WARNED_INTERFACES` (8)
//!   of them per warning.
//!
//! Errors name the trace file and line (`t.csv:3: ...`), quoting at most 64 characters of a
//! value: [`Error::Input`] (the CLI exits 2 on it), or [`Error::Output`] when an output
//! cannot be written (exit 1). A
//! replay that fails once `--out` is ready removes the outputs it wrote ([`discard`]), and
//! the directories it created for `--out`: no partial `departures.csv` that looks complete,
//! no empty directory left by a run that kept nothing.
//!
//! The modules: [`capture`] (the capture reader), [`updates`] (`--update` flags parsed and
//! checked), [`delays`] (the queueing-delay histograms), [`text`] (the summary's figures as
//! text, for `index.html` and a caller's table), `timeline.rs` (the timeline's windows and
//! charts), `source.rs` ([`TraceSource`]: where rows come from), `trace.rs` (a CSV
//! trace's columns and rows), `row_limit.rs` (rows bounded as they are read), `driver.rs`
//! ([`Replay`]: the run's steps, the arrivals as the link takes them, the summary's
//! header), `ledger.rs` (each event written and tallied, the timeline's series),
//! `summary.rs` (the figures per leaf, node and class), `warnings.rs` (what stderr says
//! about the input), `html.rs` (`index.html`) and `outdir.rs` (`--out`, made ready and
//! cleaned up).

pub mod capture;
pub mod delays;
mod driver;
mod html;
mod ledger;
mod outdir;
mod row_limit;
mod source;
mod summary;
pub mod text;
mod timeline;
mod trace;
pub mod updates;
mod warnings;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::updates::Scheduled;
use weft_core::policy::Program;
use weft_core::sched::fast::FastEngine;
use weft_core::sched::heads::HeadEngine;
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{Engine, EngineOptions};

use outdir::prepare_out;

pub use driver::Replay;
pub use outdir::discard;
pub use row_limit::DEFAULT_MAX_ROW_BYTES;
pub use source::{is_stdin, TraceSource};
pub use summary::{
    CaptureInterface, Drops, NodeFigures, ReplaySummary, ShaperFigures, SummaryHead, TimelineShape,
    UnlistedInterfaces, UpdateApplied,
};

/// Which engine replays the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// The fast engine (arenas, heap PIFOs).
    Fast,
    /// The reference engine (per-packet entries at every level).
    Reference,
    /// The head engine (ranks only each queue's first packet; the same departures without
    /// shaping, its own shaping semantics, and it refuses what it cannot run).
    Heads,
}

impl EngineKind {
    fn name(self) -> &'static str {
        match self {
            EngineKind::Fast => "fast",
            EngineKind::Reference => "reference",
            EngineKind::Heads => "heads",
        }
    }
}

/// How a replay runs ([`Default`]: `weft replay`'s defaults).
#[derive(Debug, Clone)]
pub struct Options {
    /// The engine.
    pub engine: EngineKind,
    /// Engine options (both engines honour them identically).
    pub engine_options: EngineOptions,
    /// Frames the link takes per burst (1: one at a time; see
    /// [`link::run_bursts`](weft_core::sched::link::run_bursts)).
    pub burst: usize,
    /// Live updates, in time order ([`crate::updates`]).
    pub updates: Vec<Scheduled>,
    /// `--tenant` pairs (NAME, IFACE): a capture's interfaces' tenants ([`crate::capture`]).
    pub tenants: Vec<(String, String)>,
    /// A capture's reorder window, records ([`crate::capture`]).
    pub reorder_window: usize,
    /// The most interfaces a capture may describe (`--max-interfaces`), interfaces.
    pub max_interfaces: usize,
    /// The longest row of a CSV trace (`--max-trace-row-bytes`), bytes.
    pub max_row_bytes: usize,
    /// The policy's files (and the trace, given apart): the outputs may not replace them.
    pub inputs: Vec<PathBuf>,
}

impl Default for Options {
    /// The fast engine, one frame at a time, no updates or tenants, a reorder window of
    /// 65,536 records, and the default limits.
    fn default() -> Options {
        Options {
            engine: EngineKind::Fast,
            engine_options: EngineOptions::default(),
            burst: 1,
            updates: Vec::new(),
            tenants: Vec::new(),
            reorder_window: 65_536,
            max_interfaces: capture::DEFAULT_MAX_INTERFACES,
            max_row_bytes: DEFAULT_MAX_ROW_BYTES,
            inputs: Vec::new(),
        }
    }
}

/// What a replay writes in its `--out` directory (`summary.json` last, by
/// [`ReplaySummary::write`]).
pub const OUTPUTS: [&str; 7] = [
    "departures.csv",
    "drops.csv",
    "timeseries.csv",
    "throughput.svg",
    "delay.svg",
    "index.html",
    "summary.json",
];

/// Why a replay failed: what it was given (the trace, `--out`, `--tenant`, an engine that
/// cannot run the policy), or writing its outputs (a full disk, a file size limit). The
/// message is whole: it names the file (and the line, or the record), and after a failure
/// once `--out` was ready it ends with a `note: ...` line on what was removed ([`discard`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The replay's input: `weft replay` exits 2.
    #[error("{0}")]
    Input(String),
    /// Writing an output: `weft replay` exits 1.
    #[error("{0}")]
    Output(String),
}

impl Error {
    fn map(self, f: impl FnOnce(String) -> String) -> Error {
        match self {
            Error::Input(m) => Error::Input(f(m)),
            Error::Output(m) => Error::Output(f(m)),
        }
    }
}

/// Where a replay reports its progress (a bar, a line now and then: the caller's to show).
pub trait Progress {
    /// The trace is opened: `total_bytes` long (0 when its size is not known, as for
    /// standard input). Called once, before the first row.
    fn start(&mut self, total_bytes: u64);
    /// `rows` rows read so far, `bytes` bytes of the trace; called every 65,536 rows.
    fn rows(&mut self, rows: u64, bytes: u64);
    /// The trace is read: `rows` rows in all. Called once, last.
    fn finish(&mut self, rows: u64);
}

/// Where a replay says what it finds in its input (the library prints nothing itself).
/// Messages are whole sentences without a prefix or a newline; `weft replay` prints
/// `warning: MESSAGE` and `note: MESSAGE` lines on stderr.
pub trait Diagnostics {
    /// Something about the input that the outputs may not show: fields no packet carries,
    /// rows over the link's MTU, a capture cut short or far out of order, an update refused
    /// or after the end, a trace without packets.
    fn warning(&mut self, message: &str);
    /// Something done to the input that lost nothing (a capture's records sorted back into
    /// time order); `weft replay --quiet` leaves notes out.
    fn note(&mut self, message: &str);
}

/// Runs the replay; returns the summary ([`ReplaySummary::write`] writes `summary.json`, and
/// on a failure removes the rest). A replay that fails removes what it wrote.
pub fn replay(
    prog: Arc<Program>,
    trace: &Path,
    out: &Path,
    opts: Options,
    progress: Option<&mut dyn Progress>,
    diagnostics: &mut dyn Diagnostics,
) -> Result<ReplaySummary, Error> {
    // Refused here, nothing is touched (an output that would replace an input among them).
    let created = prepare_out(out, trace, &opts.inputs)?;
    match opts.engine {
        EngineKind::Fast => {
            let e = FastEngine::with_options(prog.clone(), opts.engine_options);
            run(e, prog, trace, out, opts, progress, diagnostics)
        }
        EngineKind::Reference => {
            let e = ReferenceEngine::with_options(prog.clone(), opts.engine_options);
            run(e, prog, trace, out, opts, progress, diagnostics)
        }
        EngineKind::Heads if opts.engine_options.limited_fast_path => Err(Error::Input(
            "--limited-fast-path is an option of the fast and reference engines, not of \
             --engine heads"
                .into(),
        )),
        EngineKind::Heads => match HeadEngine::new(prog.clone()) {
            Ok(e) => run(e, prog, trace, out, opts, progress, diagnostics),
            Err(e) => Err(Error::Input(format!("{e}; run it with --engine fast"))),
        },
    }
    .map(|s| ReplaySummary {
        created: created.clone(),
        ..s
    })
    .map_err(|e| discard(out, &created, e))
}

/// Opens `trace` and replays it through `engine` into `out` ([`Replay::run`]).
fn run<E: Engine>(
    engine: E,
    prog: Arc<Program>,
    trace: &Path,
    out: &Path,
    opts: Options,
    progress: Option<&mut dyn Progress>,
    diagnostics: &mut dyn Diagnostics,
) -> Result<ReplaySummary, Error> {
    let source = TraceSource::open(trace, &opts)?;
    Replay::new(engine, prog, opts).run(source, out, progress, diagnostics)
}
