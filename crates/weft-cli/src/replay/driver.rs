//! The replay's run loop: the trace's rows, classified where the policy shapes, interleaved
//! with `--update`s and driven through the engine by the link driver ([`link::run_bursts`]);
//! each departure and drop written as it happens and tallied for the summary.
//!
//! Invariants: memory is bounded by what the engine holds (plus per-leaf delay histograms and
//! the shaping classes of shaped packets still held), not by the trace's length; departures
//! and drops are written in event order. Cost: per packet, one CSV line written and O(1)
//! tallies (plus one hash-map insert and remove per shaped packet).

use super::html::index_html;
use super::outdir::cannot_write;
use super::summary::{shaper_figures, tree_figures, ReplaySummary, Span};
use super::trace::{csv_error, line_at, open_source, parse_row, Source, TraceError};
use super::warnings::{capture_warnings, unmatched_fields};
use super::{Error, Options};
use crate::capture::{self};
use crate::delays::{self, Delays};
use crate::timeline::Timeline;
use crate::updates::Scheduled;
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_core::policy::{Classification, Program, ShapingPath};
use weft_core::sched::link::{self, Event};
use weft_core::sched::{Counters, DropReason, Engine, Update};

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

/// The replay's progress message: rows read and their rate ([`crate::sim::Progress`] shows
/// it: a bar on a terminal, else a line at most once a second with `--progress`).
fn progress_message(rows: u64, p: &crate::sim::Progress) -> String {
    let secs = p.elapsed_s().max(1e-9);
    format!("{rows} rows read, {:.0} packets/s", rows as f64 / secs)
}

/// Replays the trace through `engine` into `out` (see the module doc): opens the trace,
/// streams its rows through the link driver, writing and tallying every event, then warns
/// ([`capture_warnings`], [`end_warnings`]), writes the timeline ([`write_timeline`]) and
/// builds the summary and `index.html`.
///
/// Long on purpose: the row iterator and the event callback handed together to
/// [`link::run_bursts`] share the row count, the first arrival and the shaped packets'
/// classes (hence the `Cell`s and the `RefCell`), and the callback updates a dozen tallies
/// that the summary then reads. Cutting the loop into functions means first gathering that
/// state into a struct of its own, a change of more than place, kept out of a pure split.
pub(super) fn run<E: Engine>(
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
    end_warnings(
        &prog,
        &opts,
        &trace_name,
        matches!(source, Source::Capture(_)),
        rows,
        oversize.get(),
        end_ps,
    );
    check("departures.csv", deps.flush());
    check("drops.csv", drops.flush());
    if let Some((file, e)) = write_error {
        return Err(cannot_write(&out.join(file), e));
    }
    let timeline =
        timeline.unwrap_or_else(|| Timeline::new(series_names, first_t.get().unwrap_or(0)));
    write_timeline(out, &timeline, &prog.name)?;

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

/// The run's warnings about its input once the trace is read: a trace without packets, rows
/// larger than the link's MTU (`oversize`: how many, the largest), and `--update`s after the
/// last frame left (at `end_ps`).
fn end_warnings(
    prog: &Program,
    opts: &Options,
    trace_name: &str,
    is_capture: bool,
    rows: u64,
    oversize: (u64, u32),
    end_ps: u64,
) {
    if rows == 0 {
        // A header alone, an empty capture: the outputs are written, empty, but the likely
        // cause is the wrong file (or a filter that kept nothing).
        crate::out::errln!(
            "warning: {trace_name} holds no packets ({}): the outputs are empty",
            if is_capture {
                "a capture without records"
            } else {
                "a header and no rows"
            }
        );
    }
    let (n, largest) = oversize;
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
}

/// Writes the timeline's outputs: `timeseries.csv`, `throughput.svg` and `delay.svg`.
fn write_timeline(out: &Path, timeline: &Timeline, policy: &str) -> Result<(), Error> {
    let (rate_svg, delay_svg) = timeline.charts(policy);
    for (name, text) in [
        ("timeseries.csv", timeline.csv()),
        ("throughput.svg", rate_svg),
        ("delay.svg", delay_svg),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| cannot_write(&path, e))?;
    }
    Ok(())
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

/// The most series a replay's timeline keeps (its memory: this × 512 windows × 48 bytes).
const TIMELINE_SERIES: usize = 256;
