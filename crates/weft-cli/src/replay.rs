//! `weft replay`: a trace replayed through the scheduling core in virtual time.
//!
//! * **Engines.** `--engine fast` (default) runs [`FastEngine`], `--engine reference` the
//!   obviously-correct [`ReferenceEngine`]; both implement [`Engine`] and give identical
//!   departures (the CLI test replays every example trace through both and compares the files
//!   byte for byte).
//! * **Streaming.** The trace is read row by row through an iterator that the link driver
//!   ([`link::run`]) pulls one arrival ahead, and departures and drops are written as they
//!   happen, so memory is bounded by what the scheduler holds (plus the per-leaf delay
//!   histograms, and the flows of fair leaves: the engine forgets other flows once they hold
//!   nothing, `EngineOptions::forget_idle_flows`), not by the trace's length or its flows. `max_backlog_packets` in the
//!   summary records the largest occupancy seen (rows read − sent − dropped, sampled at every
//!   departure; it may count the one row read ahead).
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
//!   ([`crate::sim::Progress`], `weft sim`'s too).
//! * **Stderr.** `warning: ...` lines about the input (fields no packet carries, rows over the
//!   MTU, a capture cut short or far out of order, an update too late or refused, ...),
//!   always; `note: ...` lines (a capture's records sorted back into time order: nothing
//!   lost), not with `quiet` (`--quiet`, which also drops the progress, the table and the
//!   list of files written).
//!
//! * **Limits.** A CSV row is read whole by the csv reader, so rows are bounded as they are
//!   read ([`RowLimit`]): one longer than `--max-trace-row-bytes` ([`DEFAULT_MAX_ROW_BYTES`],
//!   64 KiB, by default; a row is a few hundred bytes) is refused at its line once that many
//!   of its bytes are read, and a value longer than [`MAX_CELL_BYTES`] (256) is refused with
//!   an excerpt. A 50 MB cell was read whole and quoted whole in its error. A capture's limits
//!   are [`crate::capture`]'s (a block of at most 64 MiB, `--max-interfaces`); its summary
//!   lists at most 64 interfaces and counts the rest, and stderr names at most
//!   [`WARNED_INTERFACES`] of them per warning.
//!
//! Errors name the trace file and line (`t.csv:3: ...`), quoting at most 64 characters of a
//! value; the CLI exits 2 on them, and 1 when an output cannot be written ([`Error`]). A
//! replay that fails once `--out` is ready removes the outputs it wrote ([`discard`]), and
//! the directories it created for `--out`: no partial `departures.csv` that looks complete,
//! no empty directory left by a run that kept nothing.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::capture::{self, Capture};
use crate::timeline::Timeline;
use crate::updates::Scheduled;

use crate::delays::{self, Delays, Series, Summary};
use serde_json::{json, Map, Value};
use weft_core::classifier::{Field, FieldMask, PacketMeta, FIELDS};
use weft_core::policy::parse::excerpt;
use weft_core::policy::{Classification, Program, ShapingPath};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::heads::HeadEngine;
use weft_core::sched::link::{self, Event};
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{
    Counters, DropReason, Engine, EngineOptions, Packet, Update, LAST_ARRIVAL_PS,
};

/// Which engine replays the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
    /// Report progress on stderr.
    pub progress: bool,
    /// `--quiet`: no informational notes on stderr (warnings and errors still).
    pub quiet: bool,
    /// Engine options (both engines honour them identically).
    pub engine_options: EngineOptions,
    /// Frames the link takes per burst (1: one at a time; see [`link::run_bursts`]).
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

/// A replay's summary, as `summary.json` has it: a small header (every key but the three
/// below, in order) and typed figures per leaf, node and shaping class, in policy order. A
/// JSON object per row took about 3 KB: 300 MB for 100,000 SENIC classes.
pub struct ReplaySummary {
    /// The header, an object: policy, trace, totals, updates, capture interfaces, timeline.
    pub head: Value,
    pub leaves: Vec<(String, NodeFigures)>,
    /// Nodes that are not leaves.
    pub nodes: Vec<(String, NodeFigures)>,
    pub shapers: Vec<(String, ShaperFigures)>,
    /// The directories the replay created for `--out`, deepest first (none when it was
    /// there): a failure after the run ([`discard`]) removes them too. Not in `summary.json`.
    pub created: Vec<PathBuf>,
}

/// A leaf's or node's figures over its subtree.
#[derive(serde::Serialize)]
pub struct NodeFigures {
    /// Packets and bytes sent.
    pub packets: u64,
    pub bytes: u64,
    /// Packets dropped, and by reason.
    pub dropped: u64,
    pub drops: Drops,
    /// Bits per second sent over the trace's span (first arrival to end), the drain of every
    /// other queue included.
    pub mean_bps: u64,
    /// Its own span: from the arrival of its first packet sent to the end of its last frame
    /// on the wire (0 without packets sent).
    pub active_ps: u64,
    /// Bits per second sent over `active_ps`: its rate while it had traffic, which a row
    /// backlogged throughout its span shows as its rate while backlogged.
    pub active_bps: u64,
    /// Over the packets sent; absent without any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queueing_delay_ps: Option<Summary>,
}

/// A shaping class's limit and the packets that left through it.
#[derive(serde::Serialize)]
pub struct ShaperFigures {
    /// The policy's token bucket.
    pub rate_bps: u64,
    pub burst_bytes: u64,
    pub packets: u64,
    pub bytes: u64,
    pub mean_bps: u64,
    /// As a node's ([`NodeFigures::active_ps`]), over the packets that left through it.
    pub active_ps: u64,
    pub active_bps: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queueing_delay_ps: Option<Summary>,
    /// The token bucket at the end, when an `--update` changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_bps_at_end: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_bytes_at_end: Option<u64>,
}

/// Drops by reason, in [`DropReason::ALL`]'s order; written as an object of every reason.
pub struct Drops(pub [u64; DropReason::ALL.len()]);

impl serde::Serialize for Drops {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (r, n) in DropReason::ALL.iter().zip(self.0) {
            m.serialize_entry(r.name(), &n)?;
        }
        m.end()
    }
}

/// Named rows written as one JSON object.
struct Rows<'a, T>(&'a [(String, T)]);

impl<T: serde::Serialize> serde::Serialize for Rows<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (name, row) in self.0 {
            m.serialize_entry(name, row)?;
        }
        m.end()
    }
}

impl serde::Serialize for ReplaySummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let head = self.head.as_object().expect("the header is an object");
        let mut m = s.serialize_map(Some(head.len() + 3))?;
        for (k, v) in head {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("leaves", &Rows(&self.leaves))?;
        m.serialize_entry("nodes", &Rows(&self.nodes))?;
        m.serialize_entry("shapers", &Rows(&self.shapers))?;
        m.end()
    }
}

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

/// "cannot write FILE: ERROR", an output error.
fn cannot_write(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output(format!("cannot write {}: {e}", path.display()))
}

/// Removes the replay's outputs from `out` (those there are).
fn remove_outputs(out: &Path) -> Result<(), String> {
    for name in OUTPUTS {
        let path = out.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot remove {}: {e}", path.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A replay into `out` (made ready by [`replay`]) failed with `e`: its outputs are removed,
/// so none is taken for a whole run's (a trace that fails at its millionth row left a
/// million departures and a `drops.csv` that read as complete), and `e` says so. So are the
/// directories it created for `out` (`created`, deepest first; [`ReplaySummary::created`]),
/// when nothing else was put in them meanwhile: a failed replay into a new directory left
/// it behind, empty, although the note said nothing was kept. A directory that was there
/// before stays, whatever it holds.
pub fn discard(out: &Path, created: &[PathBuf], e: Error) -> Error {
    let note = match remove_outputs(out) {
        Ok(()) => {
            remove_created(created);
            if out.exists() {
                format!(
                    "note: nothing was kept in {}: a replay that fails removes what it wrote",
                    out.display()
                )
            } else {
                format!(
                    "note: nothing was kept: a replay that fails removes what it wrote, and \
                     {} was removed (the replay had created it)",
                    out.display()
                )
            }
        }
        Err(r) => format!("note: {r}: its outputs may be partial"),
    };
    e.map(|m| format!("{m}\n{note}"))
}

/// Removes the directories in `created` (deepest first) that are empty, stopping at the
/// first that is not (it holds something else, so its parents do too).
fn remove_created(created: &[PathBuf]) {
    for dir in created {
        if std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

/// Makes `--out` ready: created if need be; refused if it is a file, or if an output would
/// replace an input (the trace, the policy); the outputs of an earlier replay removed, so a
/// replay that fails leaves no mixture of two runs (and no `summary.json`). Returns the
/// directories it created, deepest first (see [`discard`]).
fn prepare_out(out: &Path, trace: &Path, inputs: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    if out.exists() && !out.is_dir() {
        return Err(Error::Input(format!(
            "--out {}: a file, not a directory",
            out.display()
        )));
    }
    // `out` and its parents that are not there yet, deepest first.
    let created: Vec<PathBuf> = out
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err())
        .map(Path::to_path_buf)
        .collect();
    if let Err(e) = std::fs::create_dir_all(out) {
        remove_created(&created);
        return Err(Error::Output(format!(
            "cannot create {}: {e}",
            out.display()
        )));
    }
    check_out(out, trace, inputs)
        .inspect_err(|_| remove_created(&created))
        .map(|()| created)
}

/// The rest of [`prepare_out`], once `out` is a directory.
fn check_out(out: &Path, trace: &Path, inputs: &[PathBuf]) -> Result<(), Error> {
    let same = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    };
    for name in OUTPUTS {
        let path = out.join(name);
        if let Some(input) = std::iter::once(trace)
            .filter(|t| !is_stdin(t))
            .chain(inputs.iter().map(PathBuf::as_path))
            .find(|i| same(&path, i))
        {
            return Err(Error::Input(format!(
                "--out {}: the replay would overwrite its own input {} with its {name}; \
                 choose another directory",
                out.display(),
                input.display()
            )));
        }
    }
    remove_outputs(out).map_err(Error::Output)
}

/// `inputs` (in time order) with `updates` (in time order) merged in, each update before
/// the packets of its time.
fn with_updates<'a>(
    updates: &'a [Scheduled],
    inputs: impl Iterator<Item = (u64, link::Input)> + 'a,
) -> impl Iterator<Item = (u64, link::Input)> + 'a {
    let mut ups = updates
        .iter()
        .map(|s| (s.at_ps, link::Input::Update(s.update)))
        .peekable();
    let mut packets = inputs.peekable();
    std::iter::from_fn(move || match (ups.peek(), packets.peek()) {
        (Some(&(tu, _)), Some(&(tp, _))) if tu <= tp => ups.next(),
        (Some(_), None) => ups.next(),
        _ => packets.next(),
    })
}

/// Columns a trace may carry besides `arrive_ps` and `bytes`.
const META_COLUMNS: &[&str] = &[
    "tenant",
    "vm",
    "cgroup",
    "tag",
    "sport",
    "dport",
    "app",
    "proto",
    "dscp",
    "src",
    "dst",
    "flow",
    "deadline_ps",
    "slack_ps",
];

/// The fields `prog` matches on that no packet of `source` carries, as a warning: a CSV
/// trace's packets carry the fields it has columns for; a capture's every header field, and
/// `tenant` and `vm` only with `--tenant` (`tenants`), never `cgroup` or `tag`. Such a match
/// takes no packet, and every packet may end up dropped as `unclassified` without a word.
fn unmatched_fields(
    prog: &Program,
    source: &Source,
    tenants: bool,
    trace_name: &str,
) -> Option<String> {
    let carried: FieldMask = match source {
        Source::Csv { cols, .. } => cols
            .iter()
            .filter_map(|(_, c, _)| match c {
                Col::Field(f) => Some(f.bit()),
                _ => None,
            })
            .fold(0, |m, b| m | b),
        Source::Capture(_) => {
            let mut never = Field::Cgroup.bit() | Field::Tag.bit();
            if !tenants {
                never |= Field::Tenant.bit() | Field::Vm.bit();
            }
            !never
        }
    };
    // Per field: the nodes and shaping classes whose own match names it.
    let matches = prog
        .nodes
        .iter()
        .map(|n| (&n.name, &n.matches))
        .chain(prog.shapers.iter().map(|s| (&s.name, &s.matches)));
    let mut missing: Vec<(Field, Vec<&str>)> = Vec::new();
    for (name, m) in matches {
        for f in FIELDS {
            if m.fields() & f.bit() & !carried == 0 {
                continue;
            }
            match missing.iter_mut().find(|(g, _)| *g == f) {
                Some((_, names)) => names.push(name),
                None => missing.push((f, vec![name])),
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    missing.sort_by_key(|(f, _)| *f);
    let fields: Vec<String> = missing
        .iter()
        .map(|(f, names)| {
            let shown = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
            let more = match names.len() {
                n if n > 3 => format!(" and {} more", n - 3),
                _ => String::new(),
            };
            format!("{} ({shown}{more})", f.name())
        })
        .collect();
    let lacks = match source {
        Source::Csv { .. } => format!("which {trace_name} has no column for"),
        Source::Capture(_) => format!(
            "which the packets of {trace_name} do not carry (a captured frame has no cgroup or \
             tag; tenant and vm come from --tenant)"
        ),
    };
    Some(format!(
        "{} matches on {}, {lacks}: no packet can match there, and a packet that no other \
         node takes is dropped as unclassified",
        prog.name,
        fields.join(" and ")
    ))
}

/// The compression a file's first bytes announce (gzip, zstd, xz, bzip2), if any: such a
/// trace would otherwise read as "not UTF-8".
fn compressed(head: &[u8]) -> Option<&'static str> {
    match head {
        [0x1f, 0x8b, ..] => Some("gzip"),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Some("zstd"),
        [0xfd, b'7', b'z', b'X', ..] => Some("xz"),
        [b'B', b'Z', b'h', ..] => Some("bzip2"),
        _ => None,
    }
}

/// A trace problem, with its line.
#[derive(Debug)]
pub struct TraceError {
    pub line: u64,
    pub message: String,
}

enum Col {
    Arrive,
    Bytes,
    Field(Field),
    Flow,
    Deadline,
    Slack,
}

fn columns(headers: &csv::StringRecord) -> Result<Vec<(usize, Col, String)>, TraceError> {
    let mut cols = Vec::new();
    let mut seen_arrive = false;
    let mut seen_bytes = false;
    for (i, h) in headers.iter().enumerate() {
        let name = h.trim();
        let col = match name {
            "arrive_ps" => {
                seen_arrive = true;
                Col::Arrive
            }
            "bytes" => {
                seen_bytes = true;
                Col::Bytes
            }
            "flow" => Col::Flow,
            "deadline_ps" => Col::Deadline,
            "slack_ps" => Col::Slack,
            "" => {
                return Err(TraceError {
                    line: 1,
                    message: format!(
                        "column {} of the header has no name (a blank or whitespace line \
                         before the header?)",
                        i + 1
                    ),
                })
            }
            other => match Field::from_name(other) {
                Some(f) => Col::Field(f),
                None => {
                    let other = match other.chars().nth(64) {
                        None => format!("`{other}`"),
                        Some(_) => excerpt(other),
                    };
                    return Err(TraceError {
                        line: 1,
                        message: format!(
                            "unknown column {other}; columns are arrive_ps, bytes and any of {}",
                            META_COLUMNS.join(", ")
                        ),
                    });
                }
            },
        };
        if cols.iter().any(|(_, _, n)| n == name) {
            // Which of the two would hold the value is a guess: refuse it.
            return Err(TraceError {
                line: 1,
                message: format!("column `{name}` appears twice"),
            });
        }
        // Two names of one field (`app` is `dport`): the same guess.
        if let Col::Field(f) = col {
            if let Some((_, _, other)) = cols
                .iter()
                .find(|(_, c, _)| matches!(c, Col::Field(g) if *g == f))
            {
                return Err(TraceError {
                    line: 1,
                    message: format!(
                        "columns `{other}` and `{name}` are the same field (`{}`): keep one",
                        f.name()
                    ),
                });
            }
        }
        cols.push((i, col, name.to_string()));
    }
    if !seen_arrive || !seen_bytes {
        return Err(TraceError {
            line: 1,
            message: "the header must name `arrive_ps` and `bytes`".into(),
        });
    }
    Ok(cols)
}

fn parse_row(
    rec: &csv::StringRecord,
    cols: &[(usize, Col, String)],
    id: u64,
    line: u64,
) -> Result<(u64, Packet), TraceError> {
    // Control characters (a NUL, an escape) in a quoted value are shown escaped, not sent
    // to the terminal.
    let err = |message: String| TraceError {
        line,
        message: message
            .chars()
            .map(|c| match c.is_control() {
                true => c.escape_default().to_string(),
                false => c.to_string(),
            })
            .collect(),
    };
    let mut t = None;
    let mut meta = PacketMeta::default();
    let mut pkt = Packet::new(id, 0, meta);
    for (i, col, name) in cols {
        let v = rec.get(*i).unwrap_or("").trim();
        if v.is_empty() {
            continue;
        }
        if v.len() > MAX_CELL_BYTES {
            return Err(err(format!(
                "`{name}`: a value of {} bytes, longer than any a trace's column takes \
                 ({MAX_CELL_BYTES} bytes at most): {}",
                v.len(),
                excerpt(v)
            )));
        }
        let int = || -> Result<u64, TraceError> {
            v.parse::<u64>().map_err(|e| {
                err(match e.kind() {
                    std::num::IntErrorKind::PosOverflow => {
                        format!("`{name}` = `{v}` is larger than 2^64 − 1")
                    }
                    _ => format!("`{name}` = `{v}` is not a non-negative integer"),
                })
            })
        };
        match col {
            Col::Arrive => {
                // Past 2^64 − 1 is past 2^63 too: the same message.
                let at = v.parse::<u64>().or_else(|e| match e.kind() {
                    std::num::IntErrorKind::PosOverflow => Ok(u64::MAX),
                    _ => int(),
                })?;
                t = Some(at);
                if at > LAST_ARRIVAL_PS {
                    return Err(err(format!(
                        "`arrive_ps` = {v} is past the last arrival weft schedules, 2^63 ps \
                         (about 106.7 days; times are 64-bit picoseconds and the rest is \
                         headroom for queued packets to leave): are these nanoseconds or an \
                         absolute timestamp? Rebase the trace to start near 0"
                    )));
                }
            }
            Col::Bytes => {
                let b = int()?;
                if b == 0 || b > u32::MAX as u64 {
                    return Err(err(format!("`bytes` = {b} is out of range 1..=4294967295")));
                }
                pkt.bytes = b as u32;
            }
            Col::Flow => pkt.flow = int()?,
            Col::Deadline => pkt.deadline_ps = Some(int()?),
            Col::Slack => pkt.slack_ps = Some(int()?),
            Col::Field(f) => meta.set_text(*f, v).map_err(err)?,
        }
    }
    // An empty time or size would be a guess (0? the previous row's?): refuse it.
    let Some(t) = t else {
        return Err(err("`arrive_ps` is empty".into()));
    };
    if pkt.bytes == 0 {
        return Err(err("`bytes` is empty".into()));
    }
    pkt.meta = meta;
    Ok((t, pkt))
}

/// The replay's progress message: rows read and their rate ([`crate::sim::Progress`] shows
/// it: a bar on a terminal, else a line at most once a second with `--progress`).
fn progress_message(rows: u64, p: &crate::sim::Progress) -> String {
    let secs = p.elapsed_s().max(1e-9);
    format!("{rows} rows read, {:.0} packets/s", rows as f64 / secs)
}

/// Runs the replay; returns the summary (`summary.json` is the caller's to write, and on a
/// failure to write it, to [`discard`] the rest). A replay that fails removes what it wrote.
pub fn replay(
    prog: Arc<Program>,
    trace: &Path,
    out: &Path,
    opts: Options,
) -> Result<ReplaySummary, Error> {
    // Refused here, nothing is touched (an output that would replace an input among them).
    let created = prepare_out(out, trace, &opts.inputs)?;
    match opts.engine {
        EngineKind::Fast => {
            let e = FastEngine::with_options(prog.clone(), opts.engine_options);
            run(e, prog, trace, out, opts)
        }
        EngineKind::Reference => {
            let e = ReferenceEngine::with_options(prog.clone(), opts.engine_options);
            run(e, prog, trace, out, opts)
        }
        EngineKind::Heads if opts.engine_options.limited_fast_path => Err(Error::Input(
            "--limited-fast-path is an option of the fast and reference engines, not of \
             --engine heads"
                .into(),
        )),
        EngineKind::Heads => match HeadEngine::new(prog.clone()) {
            Ok(e) => run(e, prog, trace, out, opts),
            Err(e) => Err(Error::Input(format!("{e}; run it with --engine fast"))),
        },
    }
    .map(|s| ReplaySummary {
        created: created.clone(),
        ..s
    })
    .map_err(|e| discard(out, &created, e))
}

/// Opens the trace (a file, or standard input for `-`): a pcap/pcapng capture or a CSV
/// trace, told apart by its first bytes, which the reader gets back (the trace is read
/// once, so a pipe will do). Returns its name for messages, its size in bytes (0 when
/// unknown) for progress, and the source of its rows.
fn open_source(trace: &Path, opts: &Options) -> Result<(String, u64, Source), Error> {
    let (trace_name, mut file, size) = if is_stdin(trace) {
        ("<stdin>".to_string(), TraceFile::Stdin(std::io::stdin()), 0)
    } else {
        let file = File::open(trace)
            .map_err(|e| Error::Input(format!("cannot read {}: {e}", trace.display())))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        (trace.display().to_string(), TraceFile::File(file), size)
    };
    let mut head = Vec::with_capacity(4);
    (&mut file)
        .take(4)
        .read_to_end(&mut head)
        .map_err(|e| Error::Input(format!("cannot read {trace_name}: {e}")))?;
    if let Some(kind) = compressed(&head) {
        return Err(Error::Input(format!(
            "{trace_name}: a {kind}-compressed file; weft reads CSV traces and pcap/pcapng \
             captures as they are: decompress it first, or give it through a pipe \
             (`--trace <(zcat FILE)` for gzip, `<(zstd -dc FILE)`, `<(xzcat FILE)`)"
        )));
    }
    let is_capture = capture::is_capture(&head);
    let input = std::io::Cursor::new(head).chain(file);
    let source = if is_capture {
        Source::Capture(
            Capture::open(
                trace_name.clone(),
                input,
                &opts.tenants,
                opts.reorder_window,
                opts.max_interfaces,
            )
            .map_err(Error::Input)?,
        )
    } else if let Some((name, iface)) = opts.tenants.first() {
        return Err(Error::Input(format!(
            "--tenant {name}={iface}: tenants are given to a packet capture's interfaces, and \
             {trace_name} is a CSV trace (give it a `tenant` column)"
        )));
    } else {
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            // Fields are trimmed in `parse_row` (trimming whole records here cost 10% of a
            // replay).
            .trim(csv::Trim::Headers)
            .from_reader(RowLimit::new(input, opts.max_row_bytes));
        let headers = rdr.headers().cloned().map_err(|e| {
            if let Some((byte, message)) = rdr.get_ref().refusal() {
                let line = line_at(trace, Some(byte), 1);
                return Error::Input(format!("{trace_name}:{line}: {message}"));
            }
            let line = line_at(trace, e.position().map(|p| p.byte()), 1);
            Error::Input(format!("{trace_name}:{line}: {}", csv_error(&e)))
        })?;
        let cols = columns(&headers).map_err(|e| {
            let line = line_at(trace, headers.position().map(|p| p.byte()), e.line);
            Error::Input(format!("{trace_name}:{line}: {}", e.message))
        })?;
        Source::Csv {
            rdr,
            cols,
            record: csv::StringRecord::new(),
        }
    };
    Ok((trace_name, size, source))
}

fn run<E: Engine>(
    mut engine: E,
    prog: Arc<Program>,
    trace: &Path,
    out: &Path,
    opts: Options,
) -> Result<ReplaySummary, Error> {
    let (trace_name, size, mut source) = open_source(trace, &opts)?;
    if let Some(w) = unmatched_fields(&prog, &source, !opts.tenants.is_empty(), &trace_name) {
        crate::out::errln!("warning: {w}");
    }
    let dep_path: PathBuf = out.join("departures.csv");
    let drop_path: PathBuf = out.join("drops.csv");
    let mut deps = BufWriter::new(File::create(&dep_path).map_err(|e| cannot_write(&dep_path, e))?);
    let mut drops =
        BufWriter::new(File::create(&drop_path).map_err(|e| cannot_write(&drop_path, e))?);
    // The first failed write, and its file.
    let mut write_error: Option<(&Path, std::io::Error)> = None;
    let mut check = |file: &'static str, r: std::io::Result<()>| {
        if let Err(e) = r {
            write_error.get_or_insert((Path::new(file), e));
        }
    };
    check(
        "departures.csv",
        writeln!(deps, "depart_ps,id,leaf,flow,bytes"),
    );
    check("drops.csv", writeln!(drops, "arrive_ps,id,leaf,reason"));

    let mut progress = opts.progress.then(|| {
        crate::sim::Progress::new(
            "replay",
            size,
            "{prefix} {bar:30} {bytes}/{total_bytes} {msg} ({eta})",
            true,
            true,
        )
    });
    // The shaping classes of each shaped packet still held (see the module doc).
    let shaped = !prog.shapers.is_empty();
    let paths = std::cell::RefCell::new(rustc_hash::FxHashMap::<u64, ShapingPath>::default());

    // Rows stream through an iterator; a bad row stops the replay with its line.
    let mut error: Option<String> = None;
    let mut last_t = 0u64;
    let first_t = std::cell::Cell::new(None::<u64>);
    let rows = std::cell::Cell::new(0u64);
    let arrivals = std::iter::from_fn(|| {
        if error.is_some() {
            return None;
        }
        let n = rows.get();
        let next = match &mut source {
            Source::Csv { rdr, cols, record } => match rdr.read_record(record) {
                Ok(false) => None,
                Ok(true) => {
                    // `RowLimit` counts every byte of a row, separators and quotes too.
                    debug_assert!(
                        record.as_byte_record().as_slice().len() <= opts.max_row_bytes,
                        "a row of {} bytes passed the limit of {}",
                        record.as_byte_record().as_slice().len(),
                        opts.max_row_bytes
                    );
                    let line = record.position().map_or(n + 2, |p| p.line());
                    let byte = record.position().map(|p| p.byte());
                    Some(parse_row(record, cols, n, line).and_then(|(t, p)| {
                        if t < last_t {
                            Err(TraceError {
                                line,
                                message: format!(
                                    "arrive_ps {t} is earlier than the previous row's {last_t}; sort the trace by arrive_ps"
                                ),
                            })
                        } else {
                            Ok((t, p))
                        }
                    }).map_err(|e| {
                        format!("{trace_name}:{}: {}", line_at(trace, byte, e.line), e.message)
                    }))
                }
                Err(e) => match rdr.get_ref().refusal() {
                    Some((byte, message)) => {
                        let line = line_at(trace, Some(byte), n + 2);
                        Some(Err(format!("{trace_name}:{line}: {message}")))
                    }
                    None => {
                        let line = e.position().map_or(n + 2, |p| p.line());
                        let line = line_at(trace, e.position().map(|p| p.byte()), line);
                        Some(Err(format!("{trace_name}:{line}: {}", csv_error(&e))))
                    }
                },
            },
            // Times in order, errors named (see `capture`).
            Source::Capture(c) => c.next_packet(),
        };
        match next? {
            Ok((t, p)) => {
                last_t = t;
                if first_t.get().is_none() {
                    first_t.set(Some(t));
                }
                rows.set(n + 1);
                if let Some(pr) = progress.as_mut() {
                    if (n + 1).is_multiple_of(65_536) {
                        pr.tick(source.position(), |p| progress_message(n + 1, p));
                    }
                }
                Some((t, p))
            }
            Err(e) => {
                error = Some(e);
                None
            }
        }
    });

    // Queueing delays per leaf (see `delays`: sparse, however many leaves).
    let mut delay_ps = Delays::new(prog.leaves.len());
    // Per shaping class: packets and bytes sent through it, and their queueing delays.
    let mut through: Vec<Counters> = vec![Counters::default(); prog.shapers.len()];
    let mut shaper_delay_ps = Delays::new(prog.shapers.len());
    // Per leaf and per shaping class: its span, from its first sent packet's arrival to the
    // end of its last frame ([`Span`]).
    let mut leaf_span = vec![Span::default(); prog.leaves.len()];
    let mut shaper_span = vec![Span::default(); prog.shapers.len()];
    // The timeline's series and each leaf's series (see `timeline_series`); the timeline
    // starts at the first departure's arrival, known once the first row is read.
    let (series_of, series_names, series_kind) = timeline_series(&prog);
    let mut timeline: Option<Timeline> = None;
    let mut sent = 0u64;
    let mut dropped = 0u64;
    let mut dropped_by = [0u64; DropReason::ALL.len()];
    let mut max_backlog = 0u64;
    let mut end_ps = 0u64;
    let leaf_names: Vec<&str> = prog
        .leaves
        .iter()
        .map(|&n| prog.nodes[n as usize].name.as_str())
        .collect();
    // With shaping classes the driver classifies each packet (the engine then does not) and
    // keeps a shaped packet's classes until it leaves or is dropped.
    // Rows larger than the link's MTU (a capture of TSO segments, say): replayed as they
    // are, and counted for a warning (count, largest).
    let oversize = std::cell::Cell::new((0u64, 0u32));
    let inputs = arrivals.map(|(t, p)| {
        if p.bytes as u64 > prog.link.mtu_bytes {
            let (n, largest) = oversize.get();
            oversize.set((n + 1, largest.max(p.bytes)));
        }
        if !shaped {
            return (t, link::Input::Packet(p));
        }
        let class = prog.classify(&p.meta);
        if let Classification::Leaf { shaping, .. } = class {
            if !shaping.as_slice().is_empty() {
                paths.borrow_mut().insert(p.id, shaping);
            }
        }
        (t, link::Input::Classified(p, class))
    });
    let inputs = with_updates(&opts.updates, inputs);
    // Updates the engine refused (none once `updates::parse_all` has checked them).
    let mut rejected: Vec<(u64, Update)> = Vec::new();
    link::run_bursts(
        &mut engine,
        &prog.link,
        inputs,
        u64::MAX,
        opts.burst,
        |ev| match ev {
            Event::Sent { at_ps, departure } => {
                sent += 1;
                let wire = link::wire_ps(departure.bytes, &prog.link);
                end_ps = at_ps.saturating_add(wire);
                max_backlog = max_backlog.max(rows.get() - sent - dropped + 1);
                check(
                    "departures.csv",
                    write_departure(
                        &mut deps,
                        at_ps,
                        &departure,
                        leaf_names[departure.leaf as usize],
                    ),
                );
                let delay = at_ps.saturating_sub(departure.enqueued_ps);
                timeline
                    .get_or_insert_with(|| {
                        Timeline::new(series_names.clone(), first_t.get().unwrap_or(0))
                    })
                    .sent(
                        series_of[departure.leaf as usize],
                        at_ps,
                        wire,
                        departure.bytes as u64,
                        delay,
                    );
                delay_ps.record(departure.leaf, delay);
                leaf_span[departure.leaf as usize].add(departure.enqueued_ps, end_ps);
                if let Some(path) = shaped
                    .then(|| paths.borrow_mut().remove(&departure.id))
                    .flatten()
                {
                    for &c in path.as_slice() {
                        through[c as usize].packets += 1;
                        through[c as usize].bytes += departure.bytes as u64;
                        shaper_span[c as usize].add(departure.enqueued_ps, end_ps);
                        shaper_delay_ps.record(c, delay);
                    }
                }
            }
            Event::Dropped {
                at_ps,
                id,
                leaf,
                reason,
            } => {
                dropped += 1;
                dropped_by[reason.index()] += 1;
                if shaped {
                    paths.borrow_mut().remove(&id);
                }
                // Empty for `unclassified`, the one drop before a leaf.
                let leaf = leaf.map_or("", |l| leaf_names[l as usize]);
                check(
                    "drops.csv",
                    writeln!(drops, "{at_ps},{id},{leaf},{}", reason.name()),
                );
            }
            Event::Rejected {
                at_ps,
                update,
                error,
            } => {
                crate::out::errln!("warning: an update at {at_ps} ps was refused: {error}");
                rejected.push((at_ps, update));
            }
        },
    );
    let rows = rows.get();
    // A capture's records out of order, its end, its interfaces and their tenants.
    let (trace_format, capture) = match &source {
        Source::Csv { .. } => ("csv", None),
        Source::Capture(c) => ("capture", Some(c)),
    };
    let interfaces = capture.map(|c| c.interfaces());
    // The interfaces the summary lists, and what the rest add up to (`capture::listed`).
    let listed = interfaces.map(capture::listed);
    capture_warnings(capture, &trace_name, &opts);
    debug_assert!(
        error.is_some() || paths.borrow().len() <= engine.backlog(),
        "shaped packets neither sent nor dropped: {:?}",
        paths.borrow().keys().take(8).collect::<Vec<_>>()
    );
    if let Some(p) = &progress {
        p.finish(|p| progress_message(rows, p));
    }
    if let Some(e) = error {
        return Err(Error::Input(e));
    }
    if rows == 0 {
        // A header alone, an empty capture: the outputs are written, empty, but the likely
        // cause is the wrong file (or a filter that kept nothing).
        crate::out::errln!(
            "warning: {trace_name} holds no packets ({}): the outputs are empty",
            if matches!(source, Source::Capture(_)) {
                "a capture without records"
            } else {
                "a header and no rows"
            }
        );
    }
    let (n, largest) = oversize.get();
    if n > 0 {
        crate::out::errln!(
            "warning: {n} packets of {trace_name} are larger than the link's MTU ({} B; the \
             largest {largest} B): replayed as single frames of their size (segmentation \
             offload in a capture, or a `bytes` column in another unit?)",
            prog.link.mtu_bytes
        );
    }
    // An update after the last frame has left is applied to an idle scheduler: a time
    // given in the wrong unit, most likely.
    let late: Vec<&str> = opts
        .updates
        .iter()
        .filter(|u| rows > 0 && u.at_ps > end_ps)
        .map(|u| u.text.as_str())
        .collect();
    if !late.is_empty() {
        crate::out::errln!(
            "warning: --update {}: after the last frame left ({end_ps} ps on the trace's \
             clock), so it changed nothing",
            late.iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    check("departures.csv", deps.flush());
    check("drops.csv", drops.flush());
    if let Some((file, e)) = write_error {
        return Err(cannot_write(&out.join(file), e));
    }
    let timeline =
        timeline.unwrap_or_else(|| Timeline::new(series_names, first_t.get().unwrap_or(0)));
    let (rate_svg, delay_svg) = timeline.charts(&prog.name);
    for (name, text) in [
        ("timeseries.csv", timeline.csv()),
        ("throughput.svg", rate_svg),
        ("delay.svg", delay_svg),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| cannot_write(&path, e))?;
    }

    let start_ps = first_t.get().unwrap_or(0);
    let span_ps = end_ps.saturating_sub(start_ps);
    let (leaves, nodes) = tree_figures(
        &prog,
        &engine.stats().nodes,
        &mut delay_ps,
        &leaf_span,
        span_ps,
    );
    let shapers = shaper_figures(
        &prog,
        &through,
        &mut shaper_delay_ps,
        &shaper_span,
        &opts,
        span_ps,
    );
    let head = json!({
        "policy": prog.name,
        "trace": trace_name,
        "trace_format": trace_format,
        "engine": opts.engine.name(),
        "limited_fast_path": opts.engine_options.limited_fast_path,
        "burst": opts.burst,
        "link_bps": prog.link.rate_bps,
        "packets": rows,
        "sent": sent,
        "dropped": dropped,
        // The same drops by reason (every reason, zeros included).
        "drops": DropReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), json!(dropped_by[r.index()])))
            .collect::<Map<String, Value>>(),
        // Packets the engine still held when the clock ran out (2^64 ps): a class too slow
        // for its backlog. Packets = sent + dropped + held_at_end.
        "held_at_end": engine.backlog(),
        "first_arrival_ps": start_ps,
        "end_ps": end_ps,
        "span_ps": span_ps,
        "duration_ps": end_ps,
        "max_backlog_packets": max_backlog,
        // `--update`s: when, what, and whether the engine took it.
        "updates": opts.updates.iter().map(|u| json!({
            "at_ps": u.at_ps,
            "update": u.text,
            "applied": !rejected.contains(&(u.at_ps, u.update)),
        })).collect::<Vec<_>>(),
        // Captures only: records earlier than one before them in the file; those of them
        // further away than the reorder window, replayed at a later time than their
        // timestamp; the record inside which the file ended (1-based), if it did.
        "capture_out_of_order": capture.map(|c| c.out_of_order()),
        "capture_reordered": capture.map(|c| c.reordered()),
        "capture_truncated_at": capture.map(|c| c.truncated_at()),
        // Captures only: its interfaces (at most 64: those with a tenant, then the busiest),
        // each with its packet records and its tenant (`--tenant`); then what the interfaces
        // not listed add up to.
        "capture_interfaces": listed.as_ref().map(|(is, _)| is.iter().map(|i| json!({
            "section": i.section,
            "index": i.index,
            "name": i.name,
            "link_type": i.linktype,
            "records": i.records,
            "skipped": i.skipped,
            "tenant": i.tenant,
            "tenant_name": i.tenant.map(|t| &opts.tenants[t as usize - 1].0),
        })).collect::<Vec<_>>()),
        "capture_interfaces_unlisted": listed.as_ref().map(|(_, u)| json!({
            "interfaces": u.interfaces,
            "records": u.records,
            "skipped": u.skipped,
        })),
        // How the `queueing_delay_ps` figures below were measured.
        "queueing_delay_precision": delays::PRECISION,
        // timeseries.csv, throughput.svg and delay.svg: what a series is, the windows' width.
        "timeline": {
            "series": series_kind,
            "window_ps": timeline.window_ps(),
            "windows": timeline.windows(),
        },
    });
    let summary = ReplaySummary {
        head,
        leaves,
        nodes,
        shapers,
        created: Vec::new(),
    };
    let path = out.join("index.html");
    std::fs::write(&path, index_html(&summary)).map_err(|e| cannot_write(&path, e))?;
    Ok(summary)
}

/// What a capture's replay warns about on stderr: records out of order (a note when the
/// reorder window put them back in order), a file that ends inside a record, interfaces of
/// link types weft does not read, and `--tenant` interfaces the capture does not have.
fn capture_warnings(capture: Option<&Capture>, trace_name: &str, opts: &Options) {
    let interfaces = capture.map(|c| c.interfaces());
    if let Some(c) = capture {
        let window = match opts.reorder_window {
            1 => "1 record".to_string(),
            w => format!("{w} records"),
        };
        match (c.out_of_order(), c.reordered()) {
            (0, _) => {}
            // Nothing lost: a note (not with `--quiet`).
            (_, 0) if opts.quiet => {}
            (n, 0) => crate::out::errln!(
                "note: {n} records of {trace_name} were earlier than one before them in the \
                 file (as in a capture of several interfaces); the reorder window ({window}) \
                 replayed them in time order (summary.json: capture_out_of_order)"
            ),
            (n, late) => crate::out::errln!(
                "warning: {n} records of {trace_name} were earlier than one before them in the \
                 file, {late} of them more than the reorder window ({window}) away: \
                 each of those was replayed at the latest time seen so far \
                 (summary.json: capture_reordered; a larger --reorder-window sorts them)"
            ),
        }
        if let Some(r) = c.truncated_at() {
            crate::out::errln!(
                "warning: {trace_name}: record {r}: the file ends inside this record (a \
                 capture still being written, or cut short); the {} records before it were \
                 replayed (summary.json: capture_truncated_at)",
                r - 1
            );
        }
    }
    // At most `WARNED_INTERFACES` lines, then one for the rest.
    let skipped: Vec<&capture::InterfaceSeen> = interfaces
        .unwrap_or_default()
        .iter()
        .filter(|i| i.skipped > 0)
        .collect();
    for i in skipped.iter().take(WARNED_INTERFACES) {
        crate::out::errln!(
            "warning: {trace_name}: interface {}{} has link type {}, which weft does not read \
             ({}): its {} records were skipped (summary.json: capture_interfaces)",
            i.index,
            i.name
                .as_ref()
                .map_or(String::new(), |n| format!(" (`{n}`)")),
            i.linktype,
            capture::LINK_TYPES,
            i.skipped
        );
    }
    if let Some(rest) = skipped.get(WARNED_INTERFACES..).filter(|r| !r.is_empty()) {
        crate::out::errln!(
            "warning: {trace_name}: {} more interfaces have link types weft does not read \
             ({}): their {} records were skipped (summary.json: capture_interfaces, \
             capture_interfaces_unlisted)",
            rest.len(),
            capture::LINK_TYPES,
            rest.iter().map(|i| i.skipped).sum::<u64>()
        );
    }
    for (k, (name, iface)) in opts.tenants.iter().enumerate() {
        let tenant = Some(k as u32 + 1);
        if !interfaces.is_some_and(|is| is.iter().any(|i| i.tenant == tenant)) {
            let all = interfaces.unwrap_or_default();
            let mut names: Vec<String> = all
                .iter()
                .take(WARNED_INTERFACES)
                .map(|i| i.name.clone().unwrap_or_else(|| i.index.to_string()))
                .collect();
            if all.len() > WARNED_INTERFACES {
                names.push(format!("and {} more", all.len() - WARNED_INTERFACES));
            }
            crate::out::errln!(
                "warning: --tenant {name}={iface}: {trace_name} has no interface {iface} \
                 (its interfaces: {}); no packet has tenant {k_1}",
                names.join(", "),
                k_1 = k + 1
            );
        }
    }
}

/// A row's span: the earliest arrival and the latest end of transmission of its packets sent.
#[derive(Clone, Copy)]
struct Span {
    first_ps: u64,
    end_ps: u64,
}

impl Default for Span {
    fn default() -> Span {
        Span {
            first_ps: u64::MAX,
            end_ps: 0,
        }
    }
}

impl Span {
    /// A packet that arrived at `arrived_ps` and left the wire at `end_ps`.
    fn add(&mut self, arrived_ps: u64, end_ps: u64) {
        self.first_ps = self.first_ps.min(arrived_ps);
        self.end_ps = self.end_ps.max(end_ps);
    }

    fn merge(&mut self, o: Span) {
        self.first_ps = self.first_ps.min(o.first_ps);
        self.end_ps = self.end_ps.max(o.end_ps);
    }

    /// Its length, 0 without packets.
    fn ps(self) -> u64 {
        self.end_ps.saturating_sub(self.first_ps)
    }
}

/// Each leaf's and each inner node's figures: counters and queueing delays added up the
/// tree, mean rates over `span_ps` and over each one's own span (`leaf_span`, by leaf
/// index; a node's from its subtree's). Node ids are breadth-first, so every parent precedes
/// its children and one reverse pass folds each subtree into its root. A node's delay
/// histogram is complete when the pass reaches it: it is read, added to its parent's and
/// dropped, so only the histograms of nodes whose subtrees are part way through are held.
#[allow(clippy::type_complexity)]
fn tree_figures(
    prog: &Program,
    counters: &[Counters],
    delay_ps: &mut Delays,
    leaf_span: &[Span],
    span_ps: u64,
) -> (Vec<(String, NodeFigures)>, Vec<(String, NodeFigures)>) {
    let n_nodes = prog.nodes.len();
    let mut agg: Vec<Counters> = vec![Counters::default(); n_nodes];
    let mut spans = vec![Span::default(); n_nodes];
    let mut hist: Vec<Option<Series>> = (0..n_nodes).map(|_| None).collect();
    // Each node's delay figures (a few words, not a JSON object per node held twice).
    let mut delays: Vec<Option<Summary>> = vec![None; n_nodes];
    for &n in &prog.leaves {
        let c = &mut agg[n as usize];
        c.packets = counters[n as usize].packets;
        c.bytes = counters[n as usize].bytes;
        if let Some(l) = prog.nodes[n as usize].leaf {
            spans[n as usize] = leaf_span[l as usize];
        }
    }
    for n in (0..n_nodes).rev() {
        for (i, d) in counters[n].drops.iter().enumerate() {
            agg[n].drops[i] += d;
        }
        // A leaf has no children: its histogram is its own packets'.
        let h = match prog.nodes[n].leaf {
            Some(l) => delay_ps.take(l as usize),
            None => hist[n].take(),
        };
        delays[n] = h.as_ref().map(Series::summary);
        if let Some(p) = prog.nodes[n].parent {
            let (p, c) = (p as usize, agg[n]);
            agg[p].packets += c.packets;
            agg[p].bytes += c.bytes;
            let sp = spans[n];
            spans[p].merge(sp);
            for i in 0..c.drops.len() {
                agg[p].drops[i] += c.drops[i];
            }
            if let Some(h) = h {
                match &mut hist[p] {
                    Some(ph) => ph.merge(h),
                    slot @ None => *slot = Some(h),
                }
            }
        }
    }
    let figures = |n: usize| -> (String, NodeFigures) {
        let c = &agg[n];
        let f = NodeFigures {
            packets: c.packets,
            bytes: c.bytes,
            dropped: c.dropped(),
            drops: Drops(c.drops),
            mean_bps: mean_bps(c.bytes, span_ps),
            active_ps: spans[n].ps(),
            active_bps: mean_bps(c.bytes, spans[n].ps()),
            queueing_delay_ps: delays[n],
        };
        (prog.nodes[n].name.clone(), f)
    };
    let leaves: Vec<(String, NodeFigures)> =
        prog.leaves.iter().map(|&n| figures(n as usize)).collect();
    let nodes: Vec<(String, NodeFigures)> = (0..n_nodes)
        .filter(|&n| prog.nodes[n].leaf.is_none())
        .map(figures)
        .collect();
    (leaves, nodes)
}

/// Each shaping class's figures: what passed it, its queueing delays, its bucket (and the
/// bucket `--update` left at the end).
fn shaper_figures(
    prog: &Program,
    through: &[Counters],
    shaper_delay_ps: &mut Delays,
    shaper_span: &[Span],
    opts: &Options,
    span_ps: u64,
) -> Vec<(String, ShaperFigures)> {
    prog.shapers
        .iter()
        .enumerate()
        .map(|(c, sh)| {
            let t = &through[c];
            // Changed by `--update`: the token bucket at the end (the updates are in time order).
            let at_end = opts.updates.iter().rev().find_map(|u| match u.update {
                Update::Shaper {
                    shaper,
                    rate_bps,
                    burst_bytes,
                } if shaper as usize == c => Some((rate_bps, burst_bytes)),
                _ => None,
            });
            let f = ShaperFigures {
                rate_bps: sh.rate_bps,
                burst_bytes: sh.burst_bytes,
                packets: t.packets,
                bytes: t.bytes,
                mean_bps: mean_bps(t.bytes, span_ps),
                active_ps: shaper_span[c].ps(),
                active_bps: mean_bps(t.bytes, shaper_span[c].ps()),
                queueing_delay_ps: shaper_delay_ps.take(c).map(|h| h.summary()),
                rate_bps_at_end: at_end.map(|a| a.0),
                burst_bytes_at_end: at_end.map(|a| a.1),
            };
            (sh.name.clone(), f)
        })
        .collect()
}

/// A mean rate, bit/s: `bytes` over `span_ps` (0 over an empty span).
fn mean_bps(bytes: u64, span_ps: u64) -> u64 {
    if span_ps == 0 {
        0
    } else {
        (bytes as u128 * 8 * 1_000_000_000_000 / span_ps as u128) as u64
    }
}

/// One `departures.csv` row: `depart_ps,id,leaf,flow,bytes`. The integers go through
/// `itoa` (`writeln!` spent about 1,400 instructions a row on formatting, a fifth of a
/// replay's time).
fn write_departure(
    w: &mut impl Write,
    at_ps: u64,
    d: &weft_core::sched::Departure,
    leaf: &str,
) -> std::io::Result<()> {
    let mut n = itoa::Buffer::new();
    w.write_all(n.format(at_ps).as_bytes())?;
    w.write_all(b",")?;
    w.write_all(n.format(d.id).as_bytes())?;
    w.write_all(b",")?;
    w.write_all(leaf.as_bytes())?;
    w.write_all(b",")?;
    w.write_all(n.format(d.flow).as_bytes())?;
    w.write_all(b",")?;
    w.write_all(n.format(d.bytes).as_bytes())?;
    w.write_all(b"\n")
}

/// `index.html`: the replay's summary tables and its two charts, for a browser.
fn index_html(summary: &ReplaySummary) -> String {
    use std::fmt::Write as _;
    use weft_sim::report::esc;
    let s = &summary.head;
    let text = |v: &Value| esc(v.as_str().unwrap_or_default());
    let us = crate::delay_us;
    let mbps = |bps: u64| format!("{:.1}", bps as f64 / 1e6);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>weft replay: {0}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th:first-child{{text-align:left}}</style></head><body>\
         <h1>{0}</h1><p>Trace <code>{1}</code> ({2}), {3} engine, link {4} Gbit/s: {5} packets, \
         {6} sent, {7} dropped, {8} held at the end.</p>",
        text(&s["policy"]),
        text(&s["trace"]),
        text(&s["trace_format"]),
        text(&s["engine"]),
        s["link_bps"].as_f64().unwrap_or(0.0) / 1e9,
        s["packets"],
        s["sent"],
        s["dropped"],
        s["held_at_end"],
    );
    if let Some(ups) = s["updates"].as_array().filter(|u| !u.is_empty()) {
        h.push_str("<p>Updates:");
        for u in ups {
            let _ = write!(
                h,
                " <code>{}</code>{}",
                text(&u["update"]),
                if u["applied"] == true {
                    ""
                } else {
                    " (refused)"
                }
            );
        }
        h.push_str("</p>");
    }
    h.push_str("<p><img src=\"throughput.svg\" alt=\"throughput\"> <img src=\"delay.svg\" alt=\"delay\"></p>");
    h.push_str("<h2>Leaves</h2><table><tr><th>leaf</th><th>packets</th><th>bytes</th><th>mean Mbit/s</th><th>active Mbit/s</th><th>drops</th><th>p50 delay µs</th><th>p99 delay µs</th><th>max delay µs</th></tr>");
    let leaves = crate::shown_rows(&summary.leaves, |v| v.packets + v.dropped);
    for (name, v) in &leaves.rows {
        let d = v.queueing_delay_ps.as_ref();
        let _ = write!(
            h,
            "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            v.packets,
            v.bytes,
            mbps(v.mean_bps),
            mbps(v.active_bps),
            v.dropped,
            us(d, |d| d.p50),
            us(d, |d| d.p99),
            us(d, |d| d.max)
        );
    }
    h.push_str("</table>");
    let _ = write!(h, "<p>{}</p>", esc(&crate::rates_note(&s["span_ps"])));
    if let Some(out) = leaves.left_out("leaves", "without packets or drops") {
        let _ = write!(h, "<p>Not shown: {out} (summary.json has every leaf).</p>");
    }
    let shapers = crate::shown_rows(&summary.shapers, |v| v.packets);
    if !shapers.rows.is_empty() {
        h.push_str("<h2>Shaping classes</h2><table><tr><th>class</th><th>limit Mbit/s</th><th>packets</th><th>bytes</th><th>mean Mbit/s</th><th>active Mbit/s</th><th>p50 delay µs</th><th>p99 delay µs</th></tr>");
        for (name, v) in &shapers.rows {
            let limit = match v.rate_bps_at_end {
                Some(end) => format!(
                    "{} → {}",
                    crate::limit_mbit(v.rate_bps),
                    crate::limit_mbit(end)
                ),
                None => crate::limit_mbit(v.rate_bps),
            };
            let d = v.queueing_delay_ps.as_ref();
            let _ = write!(
                h,
                "<tr><th>{}</th><td>{limit}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                v.packets,
                v.bytes,
                mbps(v.mean_bps),
                mbps(v.active_bps),
                us(d, |d| d.p50),
                us(d, |d| d.p99)
            );
        }
        h.push_str("</table>");
    }
    if let Some(out) = shapers.left_out("shaping classes", "without packets") {
        let _ = write!(h, "<p>Not shown: {out} (summary.json has every one).</p>");
    }
    if let Some(ifaces) = s["capture_interfaces"].as_array() {
        h.push_str("<h2>Capture interfaces</h2><table><tr><th>interface</th><th>section</th><th>link type</th><th>records</th><th>tenant</th></tr>");
        for i in ifaces {
            let name = esc(&crate::interface_name(i));
            let tenant = crate::interface_tenant(i)
                .map_or("–".to_string(), |(t, n)| format!("{t} ({})", esc(n)));
            let _ = write!(
                h,
                "<tr><th>{name}</th><td>{}</td><td>{}</td><td>{}</td><td>{tenant}</td></tr>",
                i["section"], i["link_type"], i["records"]
            );
        }
        h.push_str("</table>");
        let more = &s["capture_interfaces_unlisted"];
        if let Some(n) = more["interfaces"].as_u64().filter(|&n| n > 0) {
            let _ = write!(
                h,
                "<p>Not listed: {n} more interfaces, {} records ({} skipped).</p>",
                more["records"], more["skipped"]
            );
        }
    }
    h.push_str(
        "<p>Files: departures.csv, drops.csv, summary.json, timeseries.csv.</p></body></html>\n",
    );
    h
}

/// A CSV reader's error in the trace's terms (the reader's own message names a record
/// counted from 0 and a byte offset; the caller prefixes the file and line).
/// The line (1-based) of the record the csv reader places at byte `byte` of the trace
/// file, counted anew for an error message: the reader's own count skips blank lines and
/// counts a CRLF file's lines one short, and its offset may fall on the line ends, blank
/// lines or comments before the record, which are passed over here. `fallback` when the
/// trace cannot be read again (a pipe) or the offset is unknown.
fn line_at(trace: &Path, byte: Option<u64>, fallback: u64) -> u64 {
    let Some(byte) = byte else { return fallback };
    let Ok(file) = File::open(trace) else {
        return fallback;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return fallback;
    }
    let mut line = 1u64;
    let mut at_line_start = true;
    let mut in_comment = false;
    for (i, b) in std::io::BufReader::new(file).bytes().enumerate() {
        let Ok(b) = b else { return fallback };
        if i as u64 >= byte && !in_comment && b != b'\n' && b != b'\r' {
            if at_line_start && b == b'#' {
                in_comment = true;
            } else {
                return line;
            }
        }
        at_line_start = b == b'\n';
        if b == b'\n' {
            line += 1;
            in_comment = false;
        }
    }
    fallback
}

fn csv_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!(
            "this row has {len} field{}, the header {expected_len}",
            if *len == 1 { "" } else { "s" }
        ),
        csv::ErrorKind::Utf8 { err, .. } => format!(
            "not UTF-8 (field {}, byte {} of it)",
            err.field() + 1,
            err.valid_up_to()
        ),
        _ => e.to_string(),
    }
}

/// A trace's bytes: the first few, read to tell its format, then the rest of the file.
type TraceInput = std::io::Chain<std::io::Cursor<Vec<u8>>, TraceFile>;

/// The longest row of a CSV trace read by default (`--max-trace-row-bytes`), bytes: a row of
/// every column is a few hundred bytes, so this leaves room for any padding, and a file that
/// is no trace (one line of megabytes) is refused before it fills memory.
pub const DEFAULT_MAX_ROW_BYTES: usize = 64 << 10;

/// The longest value of a CSV trace's cell (trimmed), bytes: the longest any column takes is
/// an IPv6 address, 45 characters.
pub const MAX_CELL_BYTES: usize = 256;

/// Bytes of a refused row kept for its error, which quotes the first 64 characters
/// ([`excerpt`]; one more byte tells it the row goes on).
const ROW_HEAD_BYTES: usize = 65;

/// Where csv-core's reader is in a record, with the settings weft gives it (`,` between
/// values, `"` quoting with `""` for a quote, `#` comment lines, `\r`, `\n` or `\r\n` line
/// ends): enough to tell where each record begins and ends, as it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between records: line ends, blank lines.
    Record,
    /// After a comma.
    Field,
    /// In an unquoted value (a quote in it is a character).
    Unquoted,
    /// In a quoted value (line ends included).
    Quoted,
    /// A quote in a quoted value: its end, or the first of a doubled one.
    QuoteInQuoted,
    /// In a comment line (which the reader skips without holding it).
    Comment,
}

/// A CSV trace's bytes on their way to the csv reader, which holds a whole record in memory
/// (a 50 MB cell took 50 MB before its error): the read fails once a record passes `max`
/// bytes, so the reader never holds more than that. A record's bytes are counted from its
/// first to its last (a quoted value's line ends included; the line end after it, blank
/// lines and comment lines not). Cost: about 0.1 ns a byte (see [`RowLimit::scan`]).
struct RowLimit<R> {
    inner: R,
    /// The longest record, bytes.
    max: usize,
    lex: Lex,
    /// Bytes of the current record so far.
    len: usize,
    /// Bytes of the trace read so far (the offset of the next byte).
    offset: u64,
    /// The byte offset of the current record's first byte.
    start: u64,
    /// Its first [`ROW_HEAD_BYTES`], for the error.
    head: Vec<u8>,
    /// A record passed `max`: the reads fail from then on.
    exceeded: bool,
}

impl<R> RowLimit<R> {
    fn new(inner: R, max: usize) -> RowLimit<R> {
        RowLimit {
            inner,
            max,
            lex: Lex::Record,
            len: 0,
            offset: 0,
            start: 0,
            head: Vec::with_capacity(ROW_HEAD_BYTES),
            exceeded: false,
        }
    }

    /// Takes byte `b`, at byte offset `at`; false once the record it is part of is longer
    /// than `max`.
    #[inline]
    fn step(&mut self, b: u8, at: u64) -> bool {
        use Lex::*;
        let next = match (self.lex, b) {
            (Comment, b'\n') => Record,
            (Comment, _) => Comment,
            (Record, b'\r' | b'\n') => Record,
            (Record, b'#') => Comment,
            (Quoted, b'"') => QuoteInQuoted,
            (Quoted, _) => Quoted,
            (Record | Field | QuoteInQuoted, b'"') => Quoted,
            (_, b',') => Field,
            (_, b'\r' | b'\n') => Record,
            _ => Unquoted,
        };
        if matches!(next, Record | Comment) {
            self.len = 0;
        } else {
            if self.lex == Record {
                // A record begins.
                self.start = at;
                self.head.clear();
            }
            self.len += 1;
            if self.head.len() < ROW_HEAD_BYTES {
                self.head.push(b);
            }
        }
        self.lex = next;
        self.len <= self.max
    }

    /// Takes the bytes of `buf` (the trace's from [`RowLimit::offset`] on); the position of
    /// a byte past the limit, if one is. In the common case (no quote in `buf`, outside a
    /// quoted value, and the record under way still within the limit with all of `buf`)
    /// every record ending in `buf` is within the limit, and after its last `\n` the reader
    /// is between records (a comment ends there too): only the bytes after it are taken, as
    /// [`RowLimit::scan_each`] takes them. Reading 2 M rows of 45 bytes through the csv
    /// reader took 60 ns a row; stepping through every byte added 145 (3.4 ns a byte), the
    /// shortcuts add 4.
    fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        let quoted = matches!(self.lex, Lex::Quoted);
        if !quoted && self.len.saturating_add(buf.len()) <= self.max && !buf.contains(&b'"') {
            if let Some(last) = buf.iter().rposition(|&b| b == b'\n') {
                self.lex = Lex::Record;
                self.len = 0;
                let tail = last + 1;
                return self.scan_each(&buf[tail..], tail).map(|k| tail + k);
            }
        }
        self.scan_each(buf, 0)
    }

    /// [`RowLimit::scan`] of `buf`, at `skipped` bytes into what was read: the bytes inside
    /// a value or a comment in a tight loop, the others one [`RowLimit::step`] at a time.
    fn scan_each(&mut self, buf: &[u8], skipped: usize) -> Option<usize> {
        let base = self.offset + skipped as u64;
        let mut i = 0;
        while i < buf.len() {
            let rest = &buf[i..];
            let (k, counted) = match self.lex {
                // Commas only move between these two; what a quote does depends on the
                // byte before it (after a comma it opens a quoted value).
                Lex::Unquoted | Lex::Field => {
                    let k = find(rest, |b| matches!(b, b'"' | b'\r' | b'\n'));
                    if k > 0 {
                        self.lex = match rest[k - 1] {
                            b',' => Lex::Field,
                            _ => Lex::Unquoted,
                        };
                    }
                    (k, true)
                }
                Lex::Quoted => (find(rest, |b| b == b'"'), true),
                Lex::Comment => (find(rest, |b| b == b'\n'), false),
                Lex::Record | Lex::QuoteInQuoted => (0, false),
            };
            if counted && k > 0 {
                let room = ROW_HEAD_BYTES.saturating_sub(self.head.len()).min(k);
                self.head.extend_from_slice(&rest[..room]);
                self.len += k;
                if self.len > self.max {
                    return Some(i);
                }
            }
            i += k;
            if i < buf.len() {
                if !self.step(buf[i], base + i as u64) {
                    return Some(i);
                }
                i += 1;
            }
        }
        None
    }

    /// The record that passed the limit, if one did: the byte offset of its first byte and
    /// the error.
    fn refusal(&self) -> Option<(u64, String)> {
        self.exceeded
            .then(|| (self.start, row_too_long(self.max, &self.head)))
    }
}

impl<R: Read> Read for RowLimit<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.exceeded {
            let n = self.inner.read(buf)?;
            let k = self.scan(&buf[..n]);
            self.offset += k.unwrap_or(n) as u64;
            match k {
                None => return Ok(n),
                Some(k) => {
                    self.exceeded = true;
                    // The rows before it are read first, so an error in one of them comes
                    // first.
                    if k > 0 {
                        return Ok(k);
                    }
                }
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a row longer than {} bytes", self.max),
        ))
    }
}

/// The position of the first byte of `bytes` that is `stop`, or their length. Sixteen at a
/// time while none is (a loop the compiler turns into vector instructions), then one at a
/// time.
#[inline]
fn find(bytes: &[u8], stop: impl Fn(u8) -> bool + Copy) -> usize {
    let mut i = 0;
    for chunk in bytes.chunks_exact(16) {
        if chunk.iter().fold(false, |any, &b| any | stop(b)) {
            break;
        }
        i += 16;
    }
    i + bytes[i..]
        .iter()
        .position(|&b| stop(b))
        .unwrap_or(bytes.len() - i)
}

/// The error for a row longer than `max` bytes that begins with `head`.
fn row_too_long(max: usize, head: &[u8]) -> String {
    format!(
        "a row longer than {max} bytes, the most a trace's row may have (a row is a few \
         hundred bytes; --max-trace-row-bytes raises the limit, default \
         {DEFAULT_MAX_ROW_BYTES}): refused without reading it whole; it begins {}",
        excerpt(&String::from_utf8_lossy(head))
    )
}

/// Whether `--trace` names standard input (`-`, as `--policy -` does).
pub fn is_stdin(trace: &Path) -> bool {
    trace == Path::new("-")
}

/// Where a trace is read from: a file, or standard input (`--trace -`).
enum TraceFile {
    File(File),
    Stdin(std::io::Stdin),
}

impl Read for TraceFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            TraceFile::File(f) => f.read(buf),
            TraceFile::Stdin(s) => s.read(buf),
        }
    }
}

/// Where a replay's packets come from: a CSV trace or a packet capture.
enum Source {
    Csv {
        rdr: csv::Reader<RowLimit<TraceInput>>,
        cols: Vec<(usize, Col, String)>,
        record: csv::StringRecord,
    },
    Capture(Capture),
}

impl Source {
    /// Bytes of the file read so far (for progress).
    fn position(&self) -> u64 {
        match self {
            Source::Csv { record, .. } => record.position().map_or(0, |p| p.byte()),
            Source::Capture(c) => c.position(),
        }
    }
}

/// Series of a policy's timeline (at most [`TIMELINE_SERIES`]): its leaves, or for a policy
/// with more, the root's children (a leaf counts in the child above it), or with more still
/// one series for the whole link. Returns each leaf's series (by leaf index), the series'
/// names and what they are (`leaves`, `root children`, `link`).
fn timeline_series(prog: &Program) -> (Vec<usize>, Vec<String>, &'static str) {
    let name = |n: u32| prog.nodes[n as usize].name.clone();
    let leaves = &prog.leaves;
    if leaves.len() <= TIMELINE_SERIES {
        return (
            (0..leaves.len()).collect(),
            leaves.iter().map(|&n| name(n)).collect(),
            "leaves",
        );
    }
    // Node 0 is the root (ids are breadth-first).
    let children: Vec<u32> = prog.nodes[0].children.clone().collect();
    if children.len() > TIMELINE_SERIES {
        return (vec![0; leaves.len()], vec!["link".to_string()], "link");
    }
    let of_leaf = leaves
        .iter()
        .map(|&leaf| {
            // The leaf's ancestor just below the root.
            let mut n = leaf;
            while prog.nodes[n as usize].depth > 1 {
                n = prog.nodes[n as usize]
                    .parent
                    .expect("a node below the root has a parent");
            }
            (n - children[0]) as usize
        })
        .collect();
    (
        of_leaf,
        children.iter().map(|&n| name(n)).collect(),
        "root children",
    )
}

/// The most interfaces a warning on stderr names (one line each for interfaces skipped, or
/// names in a list), interfaces; the rest are counted.
const WARNED_INTERFACES: usize = 8;

/// The most series a replay's timeline keeps (its memory: this × 512 windows × 48 bytes).
const TIMELINE_SERIES: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Reads `text` as the replay does, through a [`RowLimit`] of `max` bytes: its records,
    /// or the byte offset of the refused record.
    fn read(text: &[u8], max: usize) -> Result<Vec<csv::ByteRecord>, u64> {
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .has_headers(false)
            .flexible(true)
            .from_reader(RowLimit::new(text, max));
        let mut out = Vec::new();
        loop {
            let mut rec = csv::ByteRecord::new();
            match rdr.read_byte_record(&mut rec) {
                Ok(false) => return Ok(out),
                Ok(true) => out.push(rec),
                Err(e) => {
                    let (byte, _) = rdr.get_ref().refusal().unwrap_or_else(|| panic!("{e}"));
                    return Err(byte);
                }
            }
        }
    }

    /// Rows of exactly `max` bytes pass a limit of `max` and are refused at one less,
    /// whatever their line ends, their quoted line breaks and doubled quotes (counted), and
    /// the comment lines (with an odd quote) and blank lines around them (not counted).
    #[test]
    fn a_row_at_the_limit_passes_and_one_byte_more_does_not() {
        for end in ["\n", "\r\n", "\r"] {
            let quoted = format!("\"a\"\"b{end}c\",0123456");
            let max = quoted.len();
            let plain = "0".repeat(max);
            let text = format!("# it's \"odd\n{end}{plain}{end}{end}# more\n{quoted}{end}");
            let records = read(text.as_bytes(), max).unwrap();
            assert_eq!(records.len(), 2, "{end:?}");
            assert_eq!(&records[1][0], format!("a\"b{end}c").as_bytes());
            // The first row: after the comment and a blank line.
            let at = "# it's \"odd\n".len() + end.len();
            assert_eq!(
                read(text.as_bytes(), max - 1).unwrap_err(),
                at as u64,
                "{end:?}"
            );
        }
    }

    /// A reader that counts the bytes taken from it.
    struct Counting<R>(R, Rc<Cell<usize>>);

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n);
            Ok(n)
        }
    }

    /// A row of 16 MiB with a limit of 64 KiB: refused (at its first byte) once the limit
    /// is passed, having read at most the limit and the csv reader's buffer.
    #[test]
    fn a_long_row_is_refused_before_it_is_read_whole() {
        let mut text = b"arrive_ps,bytes\n0,1".to_vec();
        text.resize(16 << 20, b'7');
        let taken = Rc::new(Cell::new(0));
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(RowLimit::new(
                Counting(&text[..], taken.clone()),
                DEFAULT_MAX_ROW_BYTES,
            ));
        let mut rec = csv::StringRecord::new();
        assert!(rdr.read_record(&mut rec).is_err());
        let (byte, message) = rdr.get_ref().refusal().unwrap();
        assert_eq!(byte, 16);
        assert!(message.contains("65536 bytes"), "{message}");
        assert!(message.len() < 400, "{message}");
        assert!(
            taken.get() <= DEFAULT_MAX_ROW_BYTES + (64 << 10),
            "{}",
            taken.get()
        );
    }

    /// Random text of commas, quotes, line ends, `#` and letters: whatever the csv reader
    /// makes of it, no record it returns holds more than the limit of values and commas
    /// (its memory is bounded); a refused text has such a record, or quotes (which count
    /// and are not kept); and a limit as long as the text refuses nothing.
    #[test]
    fn no_record_passes_the_limit() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // A record's values and the commas between them.
        let seen = |r: &csv::ByteRecord| r.as_slice().len() + r.len().saturating_sub(1);
        for _ in 0..3000 {
            let len = (next() % 200) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| b"aa,\"\r\n#b"[(next() % 8) as usize])
                .collect();
            let max = 1 + (next() % 24) as usize;
            let shown = String::from_utf8_lossy(&text);
            match read(&text, max) {
                Ok(records) => {
                    for r in &records {
                        assert!(seen(r) <= max, "{shown:?} at {max}: {r:?}");
                    }
                }
                Err(_) => {
                    let records = read(&text, usize::MAX).unwrap();
                    assert!(
                        records.iter().any(|r| seen(r) > max) || text.contains(&b'"'),
                        "{shown:?} refused at {max}: {records:?}"
                    );
                }
            }
            assert!(read(&text, len.max(1)).is_ok(), "{shown:?}");
        }
    }

    /// A reader that gives `data` in pieces of the sizes `sizes` gives, in turn.
    struct Pieces<'a> {
        data: &'a [u8],
        sizes: Vec<usize>,
        turn: usize,
    }

    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let want = self.sizes[self.turn % self.sizes.len()].max(1);
            self.turn += 1;
            let n = want.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Random text (with quotes or without, lines short and long) read in random pieces
    /// through [`RowLimit::scan`] and its shortcuts refuses what stepping through every
    /// byte refuses, at the same record.
    #[test]
    fn the_shortcuts_count_as_every_step_does() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..2000 {
            let alphabet: &[u8] = match case % 3 {
                0 => b"aaaaaaa,,\n",
                1 => b"aaaaaa,,\n\r#\"",
                _ => b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,\n#",
            };
            let len = (next() % 3000) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let max = 1 + (next() % 400) as usize;
            let mut every = RowLimit::new(std::io::empty(), max);
            let expected = text
                .iter()
                .enumerate()
                .find(|&(k, &b)| !every.step(b, k as u64))
                .map(|_| every.start);
            let sizes = (0..4).map(|_| (next() % 700) as usize).collect();
            let pieces = Pieces {
                data: &text,
                sizes,
                turn: 0,
            };
            let mut limited = RowLimit::new(pieces, max);
            let mut buf = [0u8; 512];
            let got = loop {
                match limited.read(&mut buf) {
                    Ok(0) => break None,
                    Ok(_) => {}
                    Err(_) => break limited.refusal().map(|(at, _)| at),
                }
            };
            let shown = String::from_utf8_lossy(&text);
            assert_eq!(got, expected, "case {case}, max {max}: {shown:?}");
        }
    }
}
