//! Where a replay's packets come from: a CSV trace or a pcap/pcapng capture, from a file or
//! standard input, told apart by its first bytes ([`TraceSource::open`]), and read as an
//! iterator of packets in time order ([`TraceSource`]).
//!
//! Invariants: the trace is read once, front to back (a pipe will do); a row becomes a
//! packet only once it parses and its time is not earlier than the previous row's; the first
//! bad row ends the iteration, and its error (naming the trace and its line, or a capture's
//! record) is kept for the caller ([`TraceSource::error`]). Cost: one pass over the input; a
//! CSV row is parsed in place into one reused record.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use weft_core::sched::Packet;

use super::row_limit::RowLimit;
use super::trace::{columns, csv_error, line_at, parse_row, Col, TraceError};
use super::{Error, Options};
use crate::capture::{self, Capture};

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

/// A trace being read: its packets and arrival times (ps), in time order, as an iterator
/// (the link driver pulls it one arrival ahead). Iteration ends at the end of the trace or
/// at its first bad row, whose error [`TraceSource::error`] then gives.
pub struct TraceSource {
    /// The trace's name in messages (its path, or `<stdin>`).
    name: String,
    /// Its path, to count lines anew for an error ([`line_at`]).
    path: PathBuf,
    /// Its size in bytes (0 when unknown: standard input).
    size: u64,
    /// The longest row of a CSV trace (`--max-trace-row-bytes`), bytes.
    max_row_bytes: usize,
    pub(super) source: Source,
    /// Packets read so far.
    rows: u64,
    /// The latest arrival read, ps.
    last_ps: u64,
    /// The error that ended the iteration, if one did.
    error: Option<String>,
}

impl TraceSource {
    /// Opens the trace (a file, or standard input for `-`): a pcap/pcapng capture or a CSV
    /// trace, told apart by its first bytes, which the reader gets back (the trace is read
    /// once, so a pipe will do). `opts` gives a capture's `--tenant` interfaces, reorder
    /// window and interface limit, and a CSV trace's row limit; a CSV trace's header is read
    /// and checked here.
    pub fn open(trace: &Path, opts: &Options) -> Result<TraceSource, Error> {
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
        Ok(TraceSource {
            name: trace_name,
            path: trace.to_path_buf(),
            size,
            max_row_bytes: opts.max_row_bytes,
            source,
            rows: 0,
            last_ps: 0,
            error: None,
        })
    }

    /// The trace's name in messages: its path, or `<stdin>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The trace's size in bytes (0 when unknown), for progress.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of the trace read so far (for progress).
    pub fn bytes_read(&self) -> u64 {
        match &self.source {
            Source::Csv { record, .. } => record.position().map_or(0, |p| p.byte()),
            Source::Capture(c) => c.position(),
        }
    }

    /// Packets read so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The capture being read, if the trace is one (its interfaces, records out of order,
    /// where it was cut short).
    pub fn capture(&self) -> Option<&Capture> {
        match &self.source {
            Source::Csv { .. } => None,
            Source::Capture(c) => Some(c),
        }
    }

    /// The error that ended the iteration before the end of the trace, if one did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The next CSV row's packet, `None` at the end, or the row's error (with its line).
    fn next_csv_row(&mut self) -> Option<Result<(u64, Packet), String>> {
        let Source::Csv { rdr, cols, record } = &mut self.source else {
            return None;
        };
        let (n, trace, trace_name, last_t) = (self.rows, &self.path, &self.name, self.last_ps);
        match rdr.read_record(record) {
            Ok(false) => None,
            Ok(true) => {
                // `RowLimit` counts every byte of a row, separators and quotes too.
                debug_assert!(
                    record.as_byte_record().as_slice().len() <= self.max_row_bytes,
                    "a row of {} bytes passed the limit of {}",
                    record.as_byte_record().as_slice().len(),
                    self.max_row_bytes
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
        }
    }
}

/// Packets in time order, each with its arrival time (ps); ends at the trace's end or its
/// first bad row ([`TraceSource::error`]).
impl Iterator for TraceSource {
    type Item = (u64, Packet);

    fn next(&mut self) -> Option<(u64, Packet)> {
        if self.error.is_some() {
            return None;
        }
        let next = match &mut self.source {
            Source::Csv { .. } => self.next_csv_row(),
            // Times in order, errors named (see `capture`).
            Source::Capture(c) => c.next_packet(),
        };
        match next? {
            Ok((t, p)) => {
                self.last_ps = t;
                self.rows += 1;
                Some((t, p))
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
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

/// Where a replay's packets come from: a CSV trace (its reader, its columns, and the record
/// each row is read into) or a packet capture.
pub(super) enum Source {
    Csv {
        rdr: csv::Reader<RowLimit<TraceInput>>,
        cols: Vec<(usize, Col, String)>,
        record: csv::StringRecord,
    },
    Capture(Capture),
}
