//! A CSV trace's rows: its header's columns ([`columns`]), each row's values as a packet and
//! its arrival time ([`parse_row`]), and the line an error names ([`line_at`]). Where the
//! rows come from (a file or standard input, CSV or a capture) is `source.rs`'s.
//!
//! Invariants: a CSV row becomes a packet only once its columns parse; every error names
//! the trace's line (`t.csv:3: ...`) and quotes at most 64 characters of a value. Cost: a
//! row is parsed in place from one reused record (fields are trimmed per field, not per
//! record).

use super::row_limit::MAX_CELL_BYTES;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::names::excerpt;
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
