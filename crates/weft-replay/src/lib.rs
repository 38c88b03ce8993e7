//! `weft replay`: a trace replayed through the scheduling core in virtual time.
//!
//! As a library: open a trace with [`TraceSource::open`] (an iterator of packets in time
//! order, CSV or capture), make a [`Replay`] of a compiled policy and an engine for it
//! ([`Replay::new`]), and [`Replay::run`] it into an output directory; it returns the
//! [`ReplaySummary`] (`summary.json` is the caller's to write). [`replay`] does all of it
//! for the CLI, with the engine `--engine` names, and cleans up after a failure.
//!
//! * **Engines.** `--engine fast` (default) runs [`FastEngine`], `--engine reference` the
//!   obviously-correct [`ReferenceEngine`]; both implement [`Engine`] and
//!   give identical departures (the CLI test replays every example trace through both and compares
//!   the files byte for byte).
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
//! * **Progress.** With `progress` a bar on stderr (rows read, packets/s) when stderr is a
//!   terminal; otherwise a plain line at most once a second, and a final line
//!   (through the caller's [`Progress`]).
//! * **Stderr.** `warning: ...` lines about the input (fields no packet carries, rows over the
//!   MTU, a capture cut short or far out of order, an update too late or refused, ...),
//!   always; `note: ...` lines (a capture's records sorted back into time order: nothing
//!   lost), not with `quiet` (`--quiet`, which also drops the progress, the table and the
//!   list of files written).
//!
//! * **Limits.** A CSV row is read whole by the csv reader, so rows are bounded as they are read
//!   (`RowLimit`, `row_limit.rs`): one longer than `--max-trace-row-bytes`
//!   ([`DEFAULT_MAX_ROW_BYTES`], 64 KiB, by default; a row is a few hundred bytes) is refused at
//!   its line once that many of its bytes are read, and a value longer than
//!   `MAX_CELL_BYTES` (256) is refused with an excerpt. A 50 MB cell
//!   was read whole and quoted whole in its error. A capture's limits are [`crate::capture`]'s (a
//!   block of at most 64 MiB, `--max-interfaces`); its summary lists at most 64 interfaces and
//!   counts the rest, and stderr names at most `WARNED_INTERFACES` (8)
//!   of them per warning.
//!
//! Errors name the trace file and line (`t.csv:3: ...`), quoting at most 64 characters of a
//! value; the CLI exits 2 on them, and 1 when an output cannot be written ([`Error`]). A
//! replay that fails once `--out` is ready removes the outputs it wrote ([`discard`]), and
//! the directories it created for `--out`: no partial `departures.csv` that looks complete,
//! no empty directory left by a run that kept nothing.
//!
//! The files: `source.rs` ([`TraceSource`]: where rows come from), `trace.rs` (a CSV
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
mod out;
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

/// How a replay runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The engine.
    pub engine: EngineKind,
    /// `--quiet`: no informational notes on stderr (warnings and errors still).
    pub quiet: bool,
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

/// What a replay writes in its `--out` directory (`summary.json` by the caller, last).
pub const OUTPUTS: [&str; 7] = [
    "departures.csv",
    "drops.csv",
    "timeseries.csv",
    "throughput.svg",
    "delay.svg",
    "index.html",
    "summary.json",
];

/// Why a replay failed: what it was given (the trace, `--out`, `--tenant`), which the CLI
/// exits 2 on, or writing its outputs (a full disk, a file size limit), exit 1.
#[derive(Debug)]
pub enum Error {
    Input(String),
    Output(String),
}

impl Error {
    /// The exit status (see the CLI's module doc).
    pub fn code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Output(_) => 1,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Error::Input(m) | Error::Output(m) => m,
        }
    }

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

/// Runs the replay; returns the summary (`summary.json` is the caller's to write, and on a
/// failure to write it, to [`discard`] the rest). A replay that fails removes what it wrote.
pub fn replay(
    prog: Arc<Program>,
    trace: &Path,
    out: &Path,
    opts: Options,
    progress: Option<&mut dyn Progress>,
) -> Result<ReplaySummary, Error> {
    // Refused here, nothing is touched (an output that would replace an input among them).
    let created = prepare_out(out, trace, &opts.inputs)?;
    match opts.engine {
        EngineKind::Fast => {
            let e = FastEngine::with_options(prog.clone(), opts.engine_options);
            run(e, prog, trace, out, opts, progress)
        }
        EngineKind::Reference => {
            let e = ReferenceEngine::with_options(prog.clone(), opts.engine_options);
            run(e, prog, trace, out, opts, progress)
        }
        EngineKind::Heads if opts.engine_options.limited_fast_path => Err(Error::Input(
            "--limited-fast-path is an option of the fast and reference engines, not of \
             --engine heads"
                .into(),
        )),
        EngineKind::Heads => match HeadEngine::new(prog.clone()) {
            Ok(e) => run(e, prog, trace, out, opts, progress),
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
) -> Result<ReplaySummary, Error> {
    let source = TraceSource::open(trace, &opts)?;
    Replay::new(engine, prog, opts).run(source, out, progress)
}
