//! The replay's summary (`summary.json`): per leaf, per scheduling node (aggregating its
//! subtree) and per shaping class, packets, bytes, drops by reason, mean rate and queueing
//! delay percentiles.
//!
//! Invariants: deterministic output (objects in policy order, integers only); a node's figures
//! are its subtree's. Cost: one histogram merge per node, once, at the end of the replay.

use super::Options;
use crate::delays::{Delays, Series, Summary};
use serde_json::Value;
use std::path::PathBuf;
use weft_core::policy::Program;
use weft_core::sched::{Counters, DropReason, Update};

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
    /// The directories the replay created for `--out`, deepest first (none when it was there): a
    /// failure after the run ([`discard`](super::discard)) removes them too. Not in `summary.json`.
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
pub(super) struct Rows<'a, T>(&'a [(String, T)]);

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
pub(super) fn mean_bps(bytes: u64, span_ps: u64) -> u64 {
    if span_ps == 0 {
        0
    } else {
        (bytes as u128 * 8 * 1_000_000_000_000 / span_ps as u128) as u64
    }
}
