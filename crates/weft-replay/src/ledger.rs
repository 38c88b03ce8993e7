//! What a replay keeps of the link's events: each departure and drop written as it happens
//! (`departures.csv`, `drops.csv`) and tallied for the summary and the timeline ([`Ledger`]),
//! and what the arrivals and the events share while the link runs ([`InFlight`]).
//!
//! Invariants: events are written in the order they happen; the first failed write (and its
//! file) is kept and reported once the run ends, never lost to a later one; a shaped
//! packet's classes are held from its arrival to its departure or drop, so memory follows
//! the packets held, not the trace. Cost: per departure, one CSV line and O(1) tallies (one
//! histogram record per leaf, and per class on its path); per drop, one CSV line.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use weft_core::policy::{LeafId, NodeId, Program, ShapingPath};
use weft_core::sched::link::{self, Event};
use weft_core::sched::{Counters, Departure, DropReason, Update};

use super::outdir::cannot_write;
use super::summary::Span;
use super::{Diagnostics, Error};
use crate::delays::Delays;
use crate::timeline::Timeline;

/// What the arrivals and the link's events share while the link runs: the link driver
/// ([`link::run_bursts`]) holds the iterator of arrivals and the event callback at once, and
/// calls each in turn, so this state, which the one writes and the other reads, is held
/// apart from both (in a `RefCell`, borrowed by one at a time).
#[derive(Default)]
pub(super) struct InFlight {
    /// Rows read so far (the one the driver reads ahead included).
    pub(super) read: u64,
    /// The first row's arrival, ps: the timeline's start.
    pub(super) first_arrival_ps: Option<u64>,
    /// The shaping classes of each shaped packet still held, by packet id (a policy with
    /// shaping classes only: see the crate doc, "Summary").
    pub(super) paths: rustc_hash::FxHashMap<u64, ShapingPath>,
}

/// `departures.csv` and `drops.csv` as they are written, and the first write that failed.
struct EventFiles {
    deps: BufWriter<File>,
    drops: BufWriter<File>,
    /// The first failed write, and its file.
    error: Option<(&'static str, std::io::Error)>,
}

impl EventFiles {
    /// Keeps `r`'s error if it is the first.
    fn check(&mut self, file: &'static str, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert((file, e));
        }
    }
}

/// A replay's tallies of its events, and the files they are written to.
pub(super) struct Ledger<'p> {
    prog: &'p Program,
    /// Whether the policy has shaping classes (its packets' classes are in [`InFlight`]).
    shaped: bool,
    /// Each leaf's name, by leaf index.
    leaf_names: Vec<&'p str>,
    /// Each leaf's timeline series, by leaf index, and the series' names.
    series_of: Vec<usize>,
    series_names: Vec<String>,
    /// What a series is: `leaves`, `root children` or `link`.
    pub(super) series_kind: &'static str,
    files: EventFiles,
    /// Packets sent and dropped, and the drops by reason.
    pub(super) sent: u64,
    pub(super) dropped: u64,
    pub(super) dropped_by: [u64; DropReason::ALL.len()],
    /// The largest occupancy seen: rows read − sent − dropped, at every departure.
    pub(super) max_backlog: u64,
    /// The end of the last frame on the wire, ps.
    pub(super) end_ps: u64,
    /// Queueing delays per leaf (see `delays`: sparse, however many leaves).
    pub(super) delay_ps: Delays,
    /// Per shaping class: packets and bytes sent through it, and their queueing delays.
    pub(super) through: Vec<Counters>,
    pub(super) shaper_delay_ps: Delays,
    /// Per leaf and per shaping class: its span, from its first sent packet's arrival to the
    /// end of its last frame ([`Span`]).
    pub(super) leaf_span: Vec<Span>,
    pub(super) shaper_span: Vec<Span>,
    /// The timeline, from the first departure on (it starts at the first arrival).
    timeline: Option<Timeline>,
    /// Updates the engine refused (none once `updates::parse_all` has checked them).
    pub(super) rejected: Vec<(u64, Update)>,
}

impl<'p> Ledger<'p> {
    /// A ledger for `prog`, with `departures.csv` and `drops.csv` created in `out` (their
    /// headers written).
    pub(super) fn create(prog: &'p Program, out: &Path) -> Result<Ledger<'p>, Error> {
        let dep_path = out.join("departures.csv");
        let drop_path = out.join("drops.csv");
        let deps = BufWriter::new(File::create(&dep_path).map_err(|e| cannot_write(&dep_path, e))?);
        let drops =
            BufWriter::new(File::create(&drop_path).map_err(|e| cannot_write(&drop_path, e))?);
        let mut files = EventFiles {
            deps,
            drops,
            error: None,
        };
        let r = writeln!(files.deps, "depart_ps,id,leaf,flow,bytes");
        files.check("departures.csv", r);
        let r = writeln!(files.drops, "arrive_ps,id,leaf,reason");
        files.check("drops.csv", r);
        let (leaves, shapers) = (prog.leaves.len(), prog.shapers.len());
        // The timeline's series and each leaf's series (see `timeline_series`).
        let (series_of, series_names, series_kind) = timeline_series(prog);
        Ok(Ledger {
            prog,
            shaped: shapers > 0,
            leaf_names: prog
                .leaves
                .iter()
                .map(|&n| prog.node(n).name.as_str())
                .collect(),
            series_of,
            series_names,
            series_kind,
            files,
            sent: 0,
            dropped: 0,
            dropped_by: [0; DropReason::ALL.len()],
            max_backlog: 0,
            end_ps: 0,
            delay_ps: Delays::new(leaves),
            through: vec![Counters::default(); shapers],
            shaper_delay_ps: Delays::new(shapers),
            leaf_span: vec![Span::default(); leaves],
            shaper_span: vec![Span::default(); shapers],
            timeline: None,
            rejected: Vec::new(),
        })
    }

    /// One event of the link: written, tallied, and (a shaped packet's) its classes let go;
    /// an update refused is told to `diagnostics`.
    pub(super) fn event(
        &mut self,
        ev: Event,
        in_flight: &mut InFlight,
        diagnostics: &mut dyn Diagnostics,
    ) {
        match ev {
            Event::Sent { at_ps, departure } => self.sent(at_ps, &departure, in_flight),
            Event::Dropped {
                at_ps,
                id,
                leaf,
                reason,
            } => self.dropped(at_ps, id, leaf, reason, in_flight),
            Event::Rejected {
                at_ps,
                update,
                error,
            } => {
                diagnostics.warning(&format!("an update at {at_ps} ps was refused: {error}"));
                self.rejected.push((at_ps, update));
            }
        }
    }

    /// A packet `d` started transmission at `at_ps`.
    fn sent(&mut self, at_ps: u64, d: &Departure, in_flight: &mut InFlight) {
        self.sent += 1;
        let wire = link::wire_ps(d.bytes, &self.prog.link);
        self.end_ps = at_ps.saturating_add(wire);
        self.max_backlog = self
            .max_backlog
            .max(in_flight.read - self.sent - self.dropped + 1);
        let r = write_departure(
            &mut self.files.deps,
            at_ps,
            d,
            self.leaf_names[d.leaf.index()],
        );
        self.files.check("departures.csv", r);
        let delay = at_ps.saturating_sub(d.enqueued_ps);
        let (names, start) = (&self.series_names, in_flight.first_arrival_ps);
        self.timeline
            .get_or_insert_with(|| Timeline::new(names.clone(), start.unwrap_or(0)))
            .sent(
                self.series_of[d.leaf.index()],
                at_ps,
                wire,
                d.bytes as u64,
                delay,
            );
        self.delay_ps.record(d.leaf.get(), delay);
        self.leaf_span[d.leaf.index()].add(d.enqueued_ps, self.end_ps);
        if let Some(path) = self.shaped.then(|| in_flight.paths.remove(&d.id)).flatten() {
            for &c in path.as_slice() {
                self.through[c.index()].packets += 1;
                self.through[c.index()].bytes += d.bytes as u64;
                self.shaper_span[c.index()].add(d.enqueued_ps, self.end_ps);
                self.shaper_delay_ps.record(c.get(), delay);
            }
        }
    }

    /// Packet `id` (of `leaf`, if it reached one) was dropped on arrival at `at_ps`.
    fn dropped(
        &mut self,
        at_ps: u64,
        id: u64,
        leaf: Option<LeafId>,
        reason: DropReason,
        in_flight: &mut InFlight,
    ) {
        self.dropped += 1;
        self.dropped_by[reason.index()] += 1;
        if self.shaped {
            in_flight.paths.remove(&id);
        }
        // Empty for `unclassified`, the one drop before a leaf.
        let leaf = leaf.map_or("", |l| self.leaf_names[l.index()]);
        let r = writeln!(self.files.drops, "{at_ps},{id},{leaf},{}", reason.name());
        self.files.check("drops.csv", r);
    }

    /// The event files flushed, or the first write that failed (its file in `out`).
    pub(super) fn close_files(&mut self, out: &Path) -> Result<(), Error> {
        let r = self.files.deps.flush();
        self.files.check("departures.csv", r);
        let r = self.files.drops.flush();
        self.files.check("drops.csv", r);
        match self.files.error.take() {
            Some((file, e)) => Err(cannot_write(&out.join(file), e)),
            None => Ok(()),
        }
    }

    /// The timeline, starting at `first_arrival_ps` (empty without departures).
    pub(super) fn take_timeline(&mut self, first_arrival_ps: Option<u64>) -> Timeline {
        self.timeline.take().unwrap_or_else(|| {
            Timeline::new(self.series_names.clone(), first_arrival_ps.unwrap_or(0))
        })
    }
}

/// One `departures.csv` row: `depart_ps,id,leaf,flow,bytes`. The integers go through
/// `itoa` (`writeln!` spent about 1,400 instructions a row on formatting, a fifth of a
/// replay's time).
fn write_departure(
    w: &mut impl Write,
    at_ps: u64,
    d: &Departure,
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
    let name = |n: NodeId| prog.node(n).name.clone();
    let leaves = &prog.leaves;
    if leaves.len() <= TIMELINE_SERIES {
        return (
            (0..leaves.len()).collect(),
            leaves.iter().map(|&n| name(n)).collect(),
            "leaves",
        );
    }
    let children = prog.node(NodeId::ROOT).children;
    if children.len() > TIMELINE_SERIES {
        return (vec![0; leaves.len()], vec!["link".to_string()], "link");
    }
    let of_leaf = leaves
        .iter()
        .map(|&leaf| {
            // The leaf's ancestor just below the root.
            let mut n = leaf;
            while prog.node(n).depth > 1 {
                n = prog
                    .node(n)
                    .parent
                    .expect("a node below the root has a parent");
            }
            n.index() - children.start().index()
        })
        .collect();
    (
        of_leaf,
        children.iter().map(name).collect(),
        "root children",
    )
}

/// The most series a replay's timeline keeps (its memory: this × 512 windows × 48 bytes).
const TIMELINE_SERIES: usize = 256;
