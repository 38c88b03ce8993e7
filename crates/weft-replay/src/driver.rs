//! A replay as a library: [`Replay`] drives a policy's engine with a trace's packets
//! ([`TraceSource`]) on the policy's link, through the link driver ([`link::run_bursts`]),
//! interleaved with `--update`s; each departure and drop is written and tallied as it happens
//! ([`Ledger`]); at the end it warns about the input, writes the timeline and `index.html`,
//! and returns the summary.
//!
//! Invariants: memory is bounded by what the engine holds (plus per-leaf delay histograms and
//! the shaping classes of shaped packets still held), not by the trace's length; departures
//! and drops are written in event order. Cost: per packet, one CSV line written and O(1)
//! tallies (plus one hash-map insert and remove per shaped packet).

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use weft_core::policy::{Classification, Program};
use weft_core::sched::link::{self, Input};
use weft_core::sched::Engine;

use super::html::index_html;
use super::ledger::{InFlight, Ledger};
use super::outdir::cannot_write;
use super::source::TraceSource;
use super::summary::{
    shaper_figures, tree_figures, CaptureInterface, Drops, ReplaySummary, SummaryHead,
    TimelineShape, UnlistedInterfaces, UpdateApplied,
};
use super::warnings::{capture_warnings, unmatched_fields};
use super::{Diagnostics, Error, Options, Progress};
use crate::capture;
use crate::delays;
use crate::timeline::Timeline;
use crate::updates::Scheduled;

/// A replay: an engine for a compiled policy, and how to run it (the engine kind in
/// `opts` is only named in the summary: the engine given is the one run).
///
/// ```ignore
/// let prog = Arc::new(weft_core::policy::load(policy, &Default::default())?);
/// let engine = FastEngine::with_options(prog.clone(), opts.engine_options);
/// let source = TraceSource::open(trace, &opts)?;
/// let summary = Replay::new(engine, prog, opts).run(source, out, None, &mut diagnostics)?;
/// ```
pub struct Replay<E: Engine> {
    engine: E,
    prog: Arc<Program>,
    opts: Options,
}

impl<E: Engine> Replay<E> {
    /// A replay of `prog` through `engine` (made for `prog`) with `opts`.
    pub fn new(engine: E, prog: Arc<Program>, opts: Options) -> Replay<E> {
        Replay { engine, prog, opts }
    }

    /// Replays `source` into the directory `out` (which must exist; see the crate doc for
    /// what is written there, `summary.json` apart: [`ReplaySummary::write`] writes it from
    /// the summary returned). Tells `diagnostics` about the input (policy fields no packet
    /// carries first, the capture and the run's end once the trace is read); a bad row of the
    /// trace stops the replay with its error. `progress`, if given, hears of the rows read.
    pub fn run(
        self,
        mut source: TraceSource,
        out: &Path,
        mut progress: Option<&mut dyn Progress>,
        diagnostics: &mut dyn Diagnostics,
    ) -> Result<ReplaySummary, Error> {
        let Replay {
            mut engine,
            prog,
            opts,
        } = self;
        if let Some(w) = unmatched_fields(&prog, &source, !opts.tenants.is_empty()) {
            diagnostics.warning(&w);
        }
        let mut ledger = Ledger::create(&prog, out)?;
        if let Some(p) = progress.as_mut() {
            p.start(source.size());
        }
        let (in_flight, oversize) = drive(
            &mut engine,
            &prog,
            &opts,
            &mut source,
            &mut ledger,
            progress.as_mut().map(|p| &mut **p as &mut dyn Progress),
            diagnostics,
        );
        let rows = source.rows();
        // A capture's records out of order, its end, its interfaces and their tenants.
        capture_warnings(source.capture(), source.name(), &opts, diagnostics);
        debug_assert!(
            source.error().is_some() || in_flight.paths.len() <= engine.backlog(),
            "shaped packets neither sent nor dropped: {:?}",
            in_flight.paths.keys().take(8).collect::<Vec<_>>()
        );
        if let Some(p) = progress {
            p.finish(rows);
        }
        if let Some(e) = source.error() {
            return Err(Error::Input(e.to_string()));
        }
        end_warnings(&prog, &opts, &source, oversize, ledger.end_ps, diagnostics);
        ledger.close_files(out)?;
        let timeline = ledger.take_timeline(in_flight.first_arrival_ps);
        write_timeline(out, &timeline, &prog.name)?;
        let summary = summarize(
            &prog,
            &engine,
            &opts,
            &source,
            &mut ledger,
            &timeline,
            in_flight.first_arrival_ps,
        );
        let path = out.join("index.html");
        std::fs::write(&path, index_html(&summary)).map_err(|e| cannot_write(&path, e))?;
        Ok(summary)
    }
}

/// Runs the link: `source`'s packets ([`Arrivals`]) with `opts`' updates merged in, through
/// `engine`, every event into `ledger` (an update refused told to `diagnostics`). Returns
/// what the arrivals left in flight (the rows read, the first arrival, shaped packets not
/// sent or dropped) and the rows larger than the link's MTU (how many, the largest).
fn drive<E: Engine>(
    engine: &mut E,
    prog: &Program,
    opts: &Options,
    source: &mut TraceSource,
    ledger: &mut Ledger,
    progress: Option<&mut dyn Progress>,
    diagnostics: &mut dyn Diagnostics,
) -> (InFlight, (u64, u32)) {
    let in_flight = RefCell::new(InFlight::default());
    let mut arrivals = Arrivals {
        source,
        prog,
        in_flight: &in_flight,
        progress: progress.map(|p| p as &mut dyn Progress),
        oversize: (0, 0),
    };
    let inputs = with_updates(&opts.updates, &mut arrivals);
    link::run_bursts(engine, &prog.link, inputs, u64::MAX, opts.burst, |ev| {
        ledger.event(ev, &mut in_flight.borrow_mut(), diagnostics)
    });
    let oversize = arrivals.oversize;
    (in_flight.into_inner(), oversize)
}

/// The trace's packets as the link driver takes them: counted (rows read, the first
/// arrival, progress), checked against the link's MTU, and with shaping classes in the
/// policy classified here and offered classified (`link::Input::Classified`: the engine does
/// not classify them again), a shaped packet's classes kept until it leaves or is dropped.
struct Arrivals<'a> {
    source: &'a mut TraceSource,
    prog: &'a Program,
    in_flight: &'a RefCell<InFlight>,
    progress: Option<&'a mut dyn Progress>,
    /// Rows larger than the link's MTU (a capture of TSO segments, say): replayed as they
    /// are, and counted for a warning (count, largest).
    oversize: (u64, u32),
}

impl Iterator for Arrivals<'_> {
    type Item = (u64, Input);

    fn next(&mut self) -> Option<(u64, Input)> {
        let (t, p) = self.source.next()?;
        let rows = self.source.rows();
        let shaped = !self.prog.shapers.is_empty();
        let mut in_flight = self.in_flight.borrow_mut();
        in_flight.read = rows;
        in_flight.first_arrival_ps.get_or_insert(t);
        if let Some(pr) = self.progress.as_mut() {
            if rows.is_multiple_of(65_536) {
                pr.rows(rows, self.source.bytes_read());
            }
        }
        if p.bytes as u64 > self.prog.link.mtu_bytes {
            let (n, largest) = self.oversize;
            self.oversize = (n + 1, largest.max(p.bytes));
        }
        if !shaped {
            return Some((t, Input::Packet(p)));
        }
        let class = self.prog.classify(&p.meta);
        if let Classification::Leaf { shaping, .. } = class {
            if !shaping.as_slice().is_empty() {
                in_flight.paths.insert(p.id, shaping);
            }
        }
        Some((t, Input::Classified(p, class)))
    }
}

/// `inputs` (in time order) with `updates` (in time order) merged in, each update before
/// the packets of its time.
fn with_updates<'a>(
    updates: &'a [Scheduled],
    inputs: impl Iterator<Item = (u64, Input)> + 'a,
) -> impl Iterator<Item = (u64, Input)> + 'a {
    let mut ups = updates
        .iter()
        .map(|s| (s.at_ps, Input::Update(s.update)))
        .peekable();
    let mut packets = inputs.peekable();
    std::iter::from_fn(move || match (ups.peek(), packets.peek()) {
        (Some(&(tu, _)), Some(&(tp, _))) if tu <= tp => ups.next(),
        (Some(_), None) => ups.next(),
        _ => packets.next(),
    })
}

/// The replay's summary: the header (the run's totals, updates, capture and timeline) and
/// the figures per leaf, node and shaping class, over the span from the first arrival
/// (`first_arrival_ps`) to the end of the last frame.
fn summarize<E: Engine>(
    prog: &Program,
    engine: &E,
    opts: &Options,
    source: &TraceSource,
    ledger: &mut Ledger,
    timeline: &Timeline,
    first_arrival_ps: Option<u64>,
) -> ReplaySummary {
    let start_ps = first_arrival_ps.unwrap_or(0);
    let end_ps = ledger.end_ps;
    let span_ps = end_ps.saturating_sub(start_ps);
    let (leaves, nodes) = tree_figures(
        prog,
        &engine.stats().nodes,
        &mut ledger.delay_ps,
        &ledger.leaf_span,
        span_ps,
    );
    let shapers = shaper_figures(
        prog,
        &ledger.through,
        &mut ledger.shaper_delay_ps,
        &ledger.shaper_span,
        opts,
        span_ps,
    );
    let capture = source.capture();
    let trace_format = if capture.is_some() { "capture" } else { "csv" };
    // The interfaces the summary lists, and what the rest add up to (`capture::listed`).
    let listed = capture.map(|c| capture::listed(c.interfaces()));
    let head = SummaryHead {
        policy: prog.name.clone(),
        trace: source.name().to_string(),
        trace_format,
        engine: opts.engine.name(),
        limited_fast_path: opts.engine_options.limited_fast_path,
        burst: opts.burst,
        link_bps: prog.link.rate_bps,
        packets: source.rows(),
        sent: ledger.sent,
        dropped: ledger.dropped,
        drops: Drops(ledger.dropped_by),
        held_at_end: engine.backlog(),
        first_arrival_ps: start_ps,
        end_ps,
        span_ps,
        duration_ps: end_ps,
        max_backlog_packets: ledger.max_backlog,
        updates: opts
            .updates
            .iter()
            .map(|u| UpdateApplied {
                at_ps: u.at_ps,
                update: u.text.clone(),
                applied: !ledger.rejected.contains(&(u.at_ps, u.update)),
            })
            .collect(),
        capture_out_of_order: capture.map(|c| c.out_of_order()),
        capture_reordered: capture.map(|c| c.reordered()),
        capture_truncated_at: capture.and_then(|c| c.truncated_at()),
        capture_interfaces: listed.as_ref().map(|(is, _)| {
            is.iter()
                .map(|i| CaptureInterface {
                    section: i.section,
                    index: i.index,
                    name: i.name.clone(),
                    link_type: i.linktype,
                    records: i.records,
                    skipped: i.skipped,
                    tenant: i.tenant,
                    tenant_name: i.tenant.map(|t| opts.tenants[t as usize - 1].0.clone()),
                })
                .collect()
        }),
        capture_interfaces_unlisted: listed.as_ref().map(|(_, u)| UnlistedInterfaces {
            interfaces: u.interfaces,
            records: u.records,
            skipped: u.skipped,
        }),
        queueing_delay_precision: delays::PRECISION,
        timeline: TimelineShape {
            series: ledger.series_kind,
            window_ps: timeline.window_ps(),
            windows: timeline.windows(),
        },
    };
    ReplaySummary {
        head,
        leaves,
        nodes,
        shapers,
        created: Vec::new(),
    }
}

/// The run's warnings about its input once `source` is read, to `diagnostics`: a trace
/// without packets, rows larger than the link's MTU (`oversize`: how many, the largest),
/// and `--update`s after the last frame left (at `end_ps`).
fn end_warnings(
    prog: &Program,
    opts: &Options,
    source: &TraceSource,
    oversize: (u64, u32),
    end_ps: u64,
    diagnostics: &mut dyn Diagnostics,
) {
    let (trace_name, rows) = (source.name(), source.rows());
    let is_capture = source.capture().is_some();
    if rows == 0 {
        // A header alone, an empty capture: the outputs are written, empty, but the likely
        // cause is the wrong file (or a filter that kept nothing).
        diagnostics.warning(&format!(
            "{trace_name} holds no packets ({}): the outputs are empty",
            if is_capture {
                "a capture without records"
            } else {
                "a header and no rows"
            }
        ));
    }
    let (n, largest) = oversize;
    if n > 0 {
        diagnostics.warning(&format!(
            "{n} packets of {trace_name} are larger than the link's MTU ({} B; the \
             largest {largest} B): replayed as single frames of their size (segmentation \
             offload in a capture, or a `bytes` column in another unit?)",
            prog.link.mtu_bytes
        ));
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
        diagnostics.warning(&format!(
            "--update {}: after the last frame left ({end_ps} ps on the trace's \
             clock), so it changed nothing",
            late.iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
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
