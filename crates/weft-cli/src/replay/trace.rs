//! Reading the trace: a CSV trace or a pcap/pcapng capture, from a file or standard input,
//! told apart by its first bytes, as a [`Source`] of rows in time order.
//!
//! Invariants: the trace is read once, front to back (a pipe will do); a CSV row becomes a
//! packet only once its columns parse and its time is not earlier than the previous row's;
//! every error names the trace and its line (`t.csv:3: ...`) and quotes at most 64
//! characters of a value. Cost: one pass over the input; a row is parsed in place into one
//! reused record (fields are trimmed per field, not per record).

use super::row_limit::{RowLimit, MAX_CELL_BYTES};
use super::{Error, Options};
use crate::capture::{self, Capture};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::parse::excerpt;
use weft_core::sched::{Packet, LAST_ARRIVAL_PS};

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

pub(super) enum Col {
    Arrive,
    Bytes,
    Field(Field),
    Flow,
    Deadline,
    Slack,
}

pub(super) fn columns(
    headers: &csv::StringRecord,
) -> Result<Vec<(usize, Col, String)>, TraceError> {
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

pub(super) fn parse_row(
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

/// Opens the trace (a file, or standard input for `-`): a pcap/pcapng capture or a CSV
/// trace, told apart by its first bytes, which the reader gets back (the trace is read
/// once, so a pipe will do). Returns its name for messages, its size in bytes (0 when
/// unknown) for progress, and the source of its rows.
pub(super) fn open_source(trace: &Path, opts: &Options) -> Result<(String, u64, Source), Error> {
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

/// A CSV reader's error in the trace's terms (the reader's own message names a record
/// counted from 0 and a byte offset; the caller prefixes the file and line).
/// The line (1-based) of the record the csv reader places at byte `byte` of the trace
/// file, counted anew for an error message: the reader's own count skips blank lines and
/// counts a CRLF file's lines one short, and its offset may fall on the line ends, blank
/// lines or comments before the record, which are passed over here. `fallback` when the
/// trace cannot be read again (a pipe) or the offset is unknown.
pub(super) fn line_at(trace: &Path, byte: Option<u64>, fallback: u64) -> u64 {
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

pub(super) fn csv_error(e: &csv::Error) -> String {
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

/// Whether `--trace` names standard input (`-`, as `--policy -` does).
pub fn is_stdin(trace: &Path) -> bool {
    trace == Path::new("-")
}

/// Where a trace is read from: a file, or standard input (`--trace -`).
pub(super) enum TraceFile {
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
pub(super) enum Source {
    Csv {
        rdr: csv::Reader<RowLimit<TraceInput>>,
        cols: Vec<(usize, Col, String)>,
        record: csv::StringRecord,
    },
    Capture(Capture),
}

impl Source {
    /// Bytes of the file read so far (for progress).
    pub(super) fn position(&self) -> u64 {
        match self {
            Source::Csv { record, .. } => record.position().map_or(0, |p| p.byte()),
            Source::Capture(c) => c.position(),
        }
    }
}
