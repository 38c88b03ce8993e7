//! The replay's summary (`summary.json`), its schema written down as types: the header
//! ([`SummaryHead`]: the run's totals, updates, a capture's interfaces, the timeline), then
//! per leaf, per scheduling node (aggregating its subtree) and per shaping class, packets,
//! bytes, drops by reason, mean rate and queueing delay percentiles.
//!
//! Invariants: deterministic output (objects in policy order, integers only); a node's figures
//! are its subtree's. Cost: one histogram merge per node, once, at the end of the replay;
//! writing the file streams it (no copy of its text unless the caller asks for one).

use super::outdir::{cannot_write, discard};
use super::{Error, Options};
use crate::delays::{Delays, Series, Summary};
use std::io::Write;
use std::path::{Path, PathBuf};
use weft_core::policy::Program;
use weft_core::sched::{Counters, DropReason, Update};

/// A replay's summary, as `summary.json` has it: its header ([`SummaryHead`], every key but
/// the three below, in order) and typed figures per leaf, node and shaping class, in policy
/// order. A JSON object per row took about 3 KB: 300 MB for 100,000 SENIC classes.
#[derive(serde::Serialize)]
pub struct ReplaySummary {
    /// The header: policy, trace, totals, updates, capture interfaces, timeline.
    #[serde(flatten)]
    pub head: SummaryHead,
    /// Per leaf, by name.
    #[serde(serialize_with = "rows")]
    pub leaves: Vec<(String, NodeFigures)>,
    /// Nodes that are not leaves.
    #[serde(serialize_with = "rows")]
    pub nodes: Vec<(String, NodeFigures)>,
    /// Per shaping class, by name.
    #[serde(serialize_with = "rows")]
    pub shapers: Vec<(String, ShaperFigures)>,
    /// The directories the replay created for `--out`, deepest first (none when it was there): a
    /// failure after the run ([`discard`](super::discard)) removes them too. Not in `summary.json`.
    #[serde(skip)]
    pub created: Vec<PathBuf>,
}

impl ReplaySummary {
    /// `summary.json`'s text: pretty-printed, with a final newline.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Writes `summary.json` into `out`, the last of the replay's outputs: `text` when the
    /// caller has it already ([`json`](Self::json)'s, to print it too), else streamed to
    /// the file (the summary of 100,000 classes is 44 MB of text). If it cannot be
    /// written, the other outputs go too ([`discard`]), and the error says so.
    pub fn write(&self, out: &Path, text: Option<&str>) -> Result<(), Error> {
        let path = out.join("summary.json");
        let cannot = |e: std::io::Error| discard(out, &self.created, cannot_write(&path, e));
        let Some(text) = text else {
            let mut file = std::io::BufWriter::new(std::fs::File::create(&path).map_err(cannot)?);
            serde_json::to_writer_pretty(&mut file, self).map_err(|e| cannot(e.into()))?;
            file.write_all(b"\n").map_err(cannot)?;
            file.into_inner().map_err(|e| cannot(e.into_error()))?;
            return Ok(());
        };
        std::fs::write(&path, text).map_err(cannot)
    }
}

/// `summary.json`'s header: what was replayed and how, the run's totals, the `--update`s, a
/// capture's order and interfaces, and the timeline's shape; then come the figures per leaf,
/// node and shaping class ([`ReplaySummary`]).
#[derive(serde::Serialize)]
pub struct SummaryHead {
    /// The policy's name.
    pub policy: String,
    /// The trace: its path, or `<stdin>`.
    pub trace: String,
    /// `csv` or `capture`.
    pub trace_format: &'static str,
    /// The engine: `fast`, `reference` or `heads`.
    pub engine: &'static str,
    /// `--limited-fast-path`.
    pub limited_fast_path: bool,
    /// Frames the link takes at once (`--burst`).
    pub burst: usize,
    /// The link's rate, bits per second.
    pub link_bps: u64,
    /// Packets read from the trace: sent + dropped + held_at_end.
    pub packets: u64,
    pub sent: u64,
    pub dropped: u64,
    /// The same drops by reason (every reason, zeros included).
    pub drops: Drops,
    /// Packets the engine still held when the clock ran out (2^64 ps): a class too slow
    /// for its backlog. Packets = sent + dropped + held_at_end.
    pub held_at_end: usize,
    /// The first arrival on the trace's clock, ps.
    pub first_arrival_ps: u64,
    /// The end of the last frame on the wire, on the trace's clock, ps.
    pub end_ps: u64,
    /// From the first arrival to the end of the last frame, ps: what the mean rates are over.
    pub span_ps: u64,
    /// `end_ps` again (the span from the trace clock's 0).
    pub duration_ps: u64,
    /// The largest occupancy seen: rows read − sent − dropped, sampled at every departure
    /// (it may count the one row read ahead).
    pub max_backlog_packets: u64,
    /// `--update`s: when, what, and whether the engine took it.
    pub updates: Vec<UpdateApplied>,
    /// Captures only: records earlier than one before them in the file; those of them
    /// further away than the reorder window, replayed at a later time than their
    /// timestamp; the record inside which the file ended (1-based), if it did.
    pub capture_out_of_order: Option<u64>,
    pub capture_reordered: Option<u64>,
    pub capture_truncated_at: Option<u64>,
    /// Captures only: its interfaces (at most 64: those with a tenant, then the busiest),
    /// each with its packet records and its tenant (`--tenant`); then what the interfaces
    /// not listed add up to.
    pub capture_interfaces: Option<Vec<CaptureInterface>>,
    pub capture_interfaces_unlisted: Option<UnlistedInterfaces>,
    /// How the `queueing_delay_ps` figures below were measured.
    pub queueing_delay_precision: &'static str,
    /// timeseries.csv, throughput.svg and delay.svg: what a series is, the windows' width.
    pub timeline: TimelineShape,
}

/// An `--update` of the replay, as the summary lists it.
#[derive(serde::Serialize)]
pub struct UpdateApplied {
    /// When it was due, on the trace's clock, ps.
    pub at_ps: u64,
    /// As given (`WHEN:NAME.FIELD=VALUE`).
    pub update: String,
    /// Whether the engine took it.
    pub applied: bool,
}

/// A capture's interface, as the summary lists it.
#[derive(serde::Serialize)]
pub struct CaptureInterface {
    /// pcapng section, from 0.
    pub section: u32,
    /// Its number in its section.
    pub index: u32,
    /// `if_name`, if the capture gives one.
    pub name: Option<String>,
    pub link_type: i32,
    /// Packet records captured on it, and of them those skipped (a link type weft does not
    /// read).
    pub records: u64,
    pub skipped: u64,
    /// Its tenant's id and name (`--tenant`), if it has one.
    pub tenant: Option<u32>,
    pub tenant_name: Option<String>,
}

/// What a capture's interfaces not listed add up to.
#[derive(serde::Serialize)]
pub struct UnlistedInterfaces {
    pub interfaces: u64,
    pub records: u64,
    pub skipped: u64,
}

/// The timeline's shape: what a series is (`leaves`, `root children` or `link`), the
/// windows' width (ps) and how many there are.
#[derive(serde::Serialize)]
pub struct TimelineShape {
    pub series: &'static str,
    pub window_ps: u64,
    pub windows: usize,
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

/// Named rows written as one JSON object, in their order.
fn rows<T: serde::Serialize, S: serde::Serializer>(
    rows: &[(String, T)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(rows.len()))?;
    for (name, row) in rows {
        m.serialize_entry(name, row)?;
    }
    m.end()
}

/// A row's span: the earliest arrival and the latest end of transmission of its packets sent.
#[derive(Clone, Copy)]
pub(super) struct Span {
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
    pub(super) fn add(&mut self, arrived_ps: u64, end_ps: u64) {
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
pub(super) fn tree_figures(
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
        let c = &mut agg[n.index()];
        c.packets = counters[n.index()].packets;
        c.bytes = counters[n.index()].bytes;
        if let Some(l) = prog.node(n).leaf {
            spans[n.index()] = leaf_span[l.index()];
        }
    }
    for n in (0..n_nodes).rev() {
        for (i, d) in counters[n].drops.iter().enumerate() {
            agg[n].drops[i] += d;
        }
        // A leaf has no children: its histogram is its own packets'.
        let h = match prog.nodes[n].leaf {
            Some(l) => delay_ps.take(l.index()),
            None => hist[n].take(),
        };
        delays[n] = h.as_ref().map(Series::summary);
        if let Some(p) = prog.nodes[n].parent {
            let (p, c) = (p.index(), agg[n]);
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
        prog.leaves.iter().map(|&n| figures(n.index())).collect();
    let nodes: Vec<(String, NodeFigures)> = (0..n_nodes)
        .filter(|&n| prog.nodes[n].leaf.is_none())
        .map(figures)
        .collect();
    (leaves, nodes)
}

/// Each shaping class's figures: what passed it, its queueing delays, its bucket (and the
/// bucket `--update` left at the end).
pub(super) fn shaper_figures(
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
                } if shaper.index() == c => Some((rate_bps, burst_bytes)),
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
pub(super) fn mean_bps(bytes: u64, span_ps: u64) -> u64 {
    if span_ps == 0 {
        0
    } else {
        (bytes as u128 * 8 * 1_000_000_000_000 / span_ps as u128) as u64
    }
}
