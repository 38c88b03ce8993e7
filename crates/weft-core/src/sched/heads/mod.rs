//! The head engine: hierarchical scheduling that ranks only the packet at the front of
//! each queue, for the policies whose order a PIFO tree would give the same way.
//!
//! **What.** A PIFO tree (Loom §4.1; [`super::reference`], [`super::fast`]) pushes an entry
//! at every node of a packet's path when the packet arrives. For `fifo`, `prio`, `wfq` and
//! `rr` nodes over first-come first-served leaves, a child's entries at its parent leave in
//! the order they came, so only the first one matters: this engine keeps, at each node, its
//! children that have packets, keyed by the rank their *first* entry would have, and computes
//! that rank when the entry reaches the front. A packet that joins a leaf already holding
//! packets costs an append to the leaf (and to the arrival list of each interior node whose
//! parent can tie it with a sibling, below); a departure re-keys one child per level. It is
//! class-based hierarchical scheduling in the manner of HFSC/WF2Q+ trees, with the PIFO
//! tree's ranks:
//!
//! | parent | a child's key |
//! |---|---|
//! | `prio` | the child's priority |
//! | `wfq` | start tag `S = max(V, F)` when the child becomes backlogged; `S += L/w` as it sends `L` bytes (`L` wire bytes as counted by the link: what "What a `wfq` share counts" in docs/scheduling.md defines) |
//! | `rr` | as `wfq`, every packet costing one unit |
//! | `fifo` | none (arrival order) |
//!
//! Equal keys leave in the order of the child's first entry: the arrival of the oldest
//! packet that entered the child's subtree and has not left it through the child (not
//! necessarily the packet the child sends next). A leaf's is its first packet's; an interior
//! node keeps the arrival numbers of its packets in a ring (`arrivals`) when its parent can
//! see a tie (a `wfq`, `rr` or `fifo` parent of several children, or a `prio` parent where
//! another child has the same priority). `V` is the largest start tag sent.
//!
//! **Shaping.** A shaping class is a token bucket (GCRA, as in the other engines) on the edge from the
//! one child it covers (a shape node over one node, as rte_sched limits a pipe) to that
//! child's parent. The child is *eligible* at its parent while every class on its edge has
//! the tokens for the packet it would send; the parent serves its first eligible child. So
//! a saturated class hands each token to the packet the policy beneath it ranks first (the
//! subtree below the class chooses it, by its own ranks), and packets outside the class
//! pass it (HTB's and HFSC's semantics: no packet is popped early and held, so no class
//! needs a queue of its own). Eligibility is checked after a child sends, for the packet it
//! would send next, and again on the way down, for the packet found at the leaf: a child
//! that lacks tokens leaves its parent's set (it is *parked*) until its classes' tokens are
//! due, in one queue of edges ordered by that time (the global shaping queue of
//! Loom §4.2.2, holding edges instead of packets); then it re-enters like a child that
//! becomes backlogged (`S = max(V, S_parked)`). Classes are charged when a packet is sent,
//! with the link's counted bytes. This is not the PIFO engines' shaping (see
//! docs/scheduling.md), so the twin tests compare this engine with the PIFO reference
//! only without shaping; with shaping, the random fluid check
//! (`tests/fluid_check.rs`, `head_engine_*`) and token-bucket arithmetic on departures
//! (`tests/head_twins.rs`) check it.
//!
//! **Not supported** ([`Unsupported`] names the node): `drr`, `lstf`, `edf` and `senic`
//! nodes (their ranks depend on more than the first entry), leaves ordering their flows
//! fairly, `outstanding`, a shaping node over several children (siblings sharing a class
//! would need a class-local virtual time to keep their weights: the PIFO engines' class
//! queues), a shaping node with `match` or parallel shaping nodes on one edge (a class
//! chosen per packet: per-destination limits let the packets of one leaf pass each other,
//! which a queue per leaf cannot), and live updates other than a class's bucket or a
//! leaf's limits.
//!
//! **Invariants** (checked by [`HeadEngine::check_invariants`] in tests): a node is in its
//! parent's set exactly when it holds packets and is not parked; a parked node holds
//! packets, is in the shaping queue once, and is in no set; a node's ring holds one
//! arrival number per packet below it, oldest first; the engine's backlog is the sum of
//! its leaves'.
//!
//! **Cost.** A node keeps its children in a 4-ary heap of 24-byte entries
//! (`sched::key_heap`: start tags kept as their low 64 bits and compared on the circle,
//! exact while the tags in one set span less than 2⁶³, and they span at most one packet's
//! cost, below 2⁶³ for any packet under 2 GiB: a child enters at `max(V, F)` and leaves the
//! set's front at `V`); a `prio` node
//! whose children's priorities differ, in a bitmap of levels (O(1)). (A calendar of rank
//! buckets, as the fast engine keeps for wide nodes, cost more here: equal start tags are
//! ordered by arrival, so its buckets' lists are walked.) Enqueue: O(1) into a leaf that
//! holds packets (the slot, the leaf's list, the rings); a leaf that was empty also pushes
//! its key at each ancestor that was empty, O(log k) for k backlogged siblings. Dequeue:
//! one peek per level to find the leaf, then, back up by parent links, one `replace_top`
//! (or `pop`) at each level whose child's key changed (a start tag moved on, or a new
//! first entry where ties are seen; a child of a `Levels` set that still holds packets
//! keeps its key), O(log k); a parked child costs one pop and one shaping-queue push, and its return one
//! push. What every packet reads is laid out by what it is read with: a node's key, virtual
//! time, cached `wfq` cost, parent and flags in one cache line, and a leaf's queue, limits
//! and counters in the next (one 128-byte record, whose two lines memory gives together); a
//! flow's in 48 bytes; sets, rings, weights and shaping spans in
//! vectors of their own, read only by the nodes that have them. A batch's misses overlap,
//! when the records are larger than a core's cache (`PRELOAD_BYTES`), through prefetch
//! hints (`sched::prefetch`, weft-core's one `unsafe` block): [`Engine::enqueue_flow_batch`]
//! prefetches every packet's flow and leaf record before it queues any, then the slot each
//! packet is appended after (or an empty leaf's parent); [`Engine::dequeue_batch`], after
//! each departure, the records and sets of the heap entries that may leave next, a level
//! below them, and the front packet of the next (docs/perf/2026-11-29-head-engine.md has what
//! that buys). No allocation in steady
//! state: packets live in a pool of slots, heaps and rings keep their capacity. Departures
//! are counted at the leaf and summed over the tree when [`Engine::stats`] is asked. Flow
//! records are kept until the driver closes them ([`Engine::close_flow`]), as the fast
//! engine keeps them without `EngineOptions::forget_idle_flows`: a driver facing untrusted
//! flows bounds them itself (the software NIC's per-tenant flow-queue budget).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::algo::leaf::flow_key_of;
use super::algo::wfq::cost as wfq_cost;
use super::heap::{HeapEntry, MinHeap};
use super::key_heap::KeyEntry;
use super::pool::{Linked, Pool, NIL};
use super::prefetch::prefetch;
use super::ring::Ring;
use super::shared::{Bucket, Rank, FRAC};
use super::{
    check_update, Counters, Departure, DropReason, Engine, FlowQueue, Packet, Stats, Update,
    UpdateError,
};
use crate::policy::program::{Algo, FlowSched, LeafSpec, Origin};
use crate::policy::{Classification, LeafId, Program};
use sets::Children;

mod build;
mod sets;

/// Why a policy cannot run on the head engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the head engine cannot run node `{node}` ({file}:{line}): {reason}")]
pub struct Unsupported {
    /// The node's (or shaping class's) name.
    pub node: String,
    /// The policy file.
    pub file: String,
    /// The line it was written on.
    pub line: u32,
    /// What it uses that the engine does not implement.
    pub reason: &'static str,
}

/// How a node orders its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    #[default]
    Leaf,
    Fifo,
    Prio,
    Wfq,
    Rr,
}

/// What a node's key at its parent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Under {
    /// A fixed key: its level among its siblings' priorities (`prio`), or 0 (`fifo`, the
    /// root).
    #[default]
    Fixed,
    /// Its start tag, moved on by its packets' cost at its weight (`wfq`).
    Wfq,
    /// Its start tag, moved on by one unit a packet (`rr`).
    Rr,
}

/// What the hot path reads of a node: its place among its siblings in the first cache
/// line, a leaf's queue in the second (one 128-byte record, so that a leaf's two lines come
/// from memory together).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(128))]
struct Node {
    /// Its key at its parent. Under `wfq` or `rr`: its start tag (virtual bytes, [`FRAC`]
    /// fractional bits) while in the set, or where it stood when it left; the set holds its
    /// low 64 bits. Under `prio`: its level (the rank of its priority among its siblings');
    /// under `fifo`: 0.
    start: Rank,
    /// As a `wfq` or `rr` parent: the largest start tag it has sent (`V`).
    vtime: Rank,
    /// Under `wfq`: the cost of a packet of `cost_wire` counted bytes at its weight (the
    /// last size it sent: a division saved while sizes repeat).
    cost: u64,
    cost_wire: u32,
    /// Scheduling parent, `NIL` for the root.
    parent: u32,
    /// Leaf: its index in `Program::leaves` (`NIL` for other nodes).
    leaf: u32,
    /// The nearest node above it that keeps an arrival ring (`NIL`: none).
    ring_up: u32,
    under: Under,
    kind: Kind,
    /// Under a parent whose set is `Levels`: its bit there.
    level: u8,
    /// In its parent's set.
    in_set: bool,
    /// Out of its parent's set until its classes' tokens are due.
    parked: bool,
    /// Its parent can see a tie between it and a sibling: its key carries its first
    /// entry's arrival (else 0). An interior node that ties keeps an arrival ring.
    ties: bool,
    /// A leaf's queue, limits and counters (unused for other nodes).
    q: Leaf,
}

/// A leaf's queue, limits and counters, in one cache line. Packet limits of 2³² or more
/// are kept as `u32::MAX`, which no leaf can reach (slots are numbered by `u32`).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Leaf {
    /// First and last slot of its queue (`NIL` when empty).
    head: u32,
    tail: u32,
    /// Packets held.
    packets: u32,
    limit_packets: u32,
    flow_limit_packets: u32,
    /// Bytes held.
    bytes: u64,
    /// Byte limits (`u64::MAX`: none).
    limit_bytes: u64,
    flow_limit_bytes: u64,
    /// Packets and bytes sent.
    sent_packets: u64,
    sent_bytes: u64,
}

impl Leaf {
    fn limits(&mut self, spec: &LeafSpec) {
        let packets = |l: Option<u64>| l.map_or(u32::MAX, |l| l.min(u32::MAX as u64) as u32);
        self.limit_packets = packets(spec.limit_packets);
        self.flow_limit_packets = packets(spec.flow_limit_packets);
        self.limit_bytes = spec.limit_bytes.unwrap_or(u64::MAX);
        self.flow_limit_bytes = spec.flow_limit_bytes.unwrap_or(u64::MAX);
    }
}

/// A queued packet: what its departure reports, and its place in its leaf's list.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    id: u64,
    /// When it was enqueued, ps.
    enqueued_ps: u64,
    /// Arrival number (ties between equal keys).
    seq: u64,
    /// Its flow record.
    flow: u32,
    /// Frame bytes.
    bytes: u32,
    next: u32,
}

impl Linked for Slot {
    fn next(&self) -> u32 {
        self.next
    }
    fn set_next(&mut self, next: u32) {
        self.next = next;
    }
}

/// A flow: its leaf and key, what it holds, what it sent (its drops are in `flow_drops`).
#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    /// The leaf's index (`NIL` when the record is free).
    leaf: u32,
    generation: u32,
    key: u64,
    packets: u64,
    bytes: u64,
    sent_packets: u64,
    sent_bytes: u64,
}

/// The engine (see the module doc).
#[derive(Debug, Clone)]
pub struct HeadEngine {
    prog: Arc<Program>,
    nodes: Vec<Node>,
    /// Each node's children in its set (empty for leaves).
    sets: Vec<Children>,
    /// `Children::Levels`' children by level, every such node's concatenated.
    by_level: Vec<u32>,
    /// Arrival numbers of the packets below each node that ties, oldest first (empty for
    /// the others).
    rings: Vec<Ring<u64>>,
    /// Each node's weight at its parent (a cost recomputed when the size changes).
    weights: Vec<u64>,
    /// Each node's edge's shaping classes, leaf side first: `classes[at..at + len]`.
    class_span: Vec<(u32, u32)>,
    /// Each leaf's node id (`Program::leaves`).
    leaf_nodes: Vec<u32>,
    specs: Vec<LeafSpec>,
    classes: Vec<u32>,
    buckets: Vec<Bucket>,
    /// Parked nodes by the time their classes' tokens are due, then when parked.
    shaping_queue: MinHeap,
    slots: Pool<Slot>,
    flows: Vec<Flow>,
    /// Each flow record's drops, by [`DropReason`].
    flow_drops: Vec<[u64; 5]>,
    free_flows: Vec<u32>,
    flow_of: FxHashMap<(u32, u64), u32>,
    /// Drops by node (unclassified packets are counted where classification stopped).
    drops: FxHashMap<u32, [u64; 5]>,
    /// Bytes a packet counts beyond its frame at classes and fair shares.
    overhead: u32,
    seq: u64,
    backlog: usize,
    /// The path to the leaf found when classes are checked, from the root's child down
    /// (sized to the policy's depth up front).
    path: Box<[u32]>,
    /// Batches load their records ahead ([`PRELOAD_BYTES`]).
    preload: bool,
}

/// The size of the node records above which batches load them ahead: about a
/// core's second-level cache. Below it the records stay in cache and the loads ahead only
/// cost instructions (about 150 a packet on the rte_sched workload at 64 pipes).
const PRELOAD_BYTES: usize = 1 << 20;

impl HeadEngine {
    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// The flow record of `key` at leaf `leaf`, made if new.
    fn flow_record(&mut self, leaf: u32, key: u64) -> u32 {
        if let Some(&f) = self.flow_of.get(&(leaf, key)) {
            return f;
        }
        let rec = Flow {
            leaf,
            key,
            ..Flow::default()
        };
        let f = match self.free_flows.pop() {
            Some(f) => {
                let generation = self.flows[f as usize].generation;
                self.flows[f as usize] = Flow { generation, ..rec };
                self.flow_drops[f as usize] = [0; 5];
                f
            }
            None => {
                self.flows.push(rec);
                self.flow_drops.push([0; 5]);
                (self.flows.len() - 1) as u32
            }
        };
        self.flow_of.insert((leaf, key), f);
        f
    }

    /// The arrival of `x`'s first entry: its oldest packet's (a leaf's first packet's, the
    /// front of an interior node's ring).
    #[inline(always)]
    fn first_arrival(&self, x: u32) -> u64 {
        match self.nodes[x as usize].leaf {
            NIL => self.rings[x as usize].front().copied().unwrap_or(0),
            _ => self.slots[self.nodes[x as usize].q.head].seq,
        }
    }

    /// Puts `x`, which holds packets and is not parked, into its parent's set, and its
    /// ancestors into theirs as far as one already was.
    #[inline(always)]
    fn activate(&mut self, x: u32) {
        if self.enter(x) {
            self.activate_above(self.nodes[x as usize].parent);
        }
    }

    /// [`HeadEngine::activate`] from `x`'s parent's level up (out of line: a leaf that
    /// becomes backlogged under a parent that was empty is the rarer case).
    #[inline(never)]
    fn activate_above(&mut self, mut x: u32) {
        while self.enter(x) {
            x = self.nodes[x as usize].parent;
        }
    }

    /// Puts `x`, which holds packets and is not parked, into its parent's set. Returns
    /// whether the parent has to enter its own parent's set: its set was empty, and it is
    /// neither the root nor parked.
    #[inline(always)]
    fn enter(&mut self, x: u32) -> bool {
        let n = &self.nodes[x as usize];
        let (p, under, ties, level) = (n.parent, n.under, n.ties, n.level);
        debug_assert!(p != NIL, "activate: the root has no parent");
        let mut start = n.start;
        if under != Under::Fixed {
            start = start.max(self.nodes[p as usize].vtime);
        }
        let seq = if ties { self.first_arrival(x) } else { 0 };
        let xn = &mut self.nodes[x as usize];
        xn.start = start;
        xn.in_set = true;
        let set = &mut self.sets[p as usize];
        let was_empty = set.is_empty();
        set.push(KeyEntry::new(start as u64, seq, x), level);
        if !was_empty {
            return false;
        }
        let pn = &self.nodes[p as usize];
        debug_assert!(
            pn.parent == NIL || pn.parked || !pn.in_set,
            "node {p}: in its parent's set with nothing below it"
        );
        pn.parent != NIL && !pn.parked
    }

    /// Takes `x`, the first of its parent's set, out of it (it is parked, or empty), and
    /// every ancestor left with nothing eligible out of theirs.
    fn deactivate(&mut self, mut x: u32) {
        loop {
            let p = self.nodes[x as usize].parent;
            debug_assert_eq!(
                self.sets[p as usize].first(&self.by_level),
                Some(x),
                "node {x} is not first in its parent {p}'s set"
            );
            self.sets[p as usize].pop_first();
            self.nodes[x as usize].in_set = false;
            if !self.sets[p as usize].is_empty() || self.nodes[p as usize].parent == NIL {
                return;
            }
            x = p;
        }
    }

    /// Returns the parked nodes whose classes' tokens are due at `now`.
    fn release_due(&mut self, now: u64) {
        while let Some(e) = self.shaping_queue.peek() {
            if e.rank() > now as Rank {
                break;
            }
            let x = e.v;
            self.shaping_queue.pop();
            self.nodes[x as usize].parked = false;
            self.activate(x);
        }
    }

    /// Parks `x`, just taken out of its parent's set, until its classes' tokens are due.
    #[inline(always)]
    fn park(&mut self, x: u32, due: u64) {
        self.nodes[x as usize].parked = true;
        self.seq += 1;
        self.shaping_queue
            .push(HeapEntry::new(due as Rank, self.seq, x));
    }

    /// `x`'s edge's classes.
    #[inline(always)]
    fn classes_of(&self, x: u32) -> &[u32] {
        let (at, len) = self.class_span[x as usize];
        &self.classes[at as usize..(at + len) as usize]
    }

    /// When `bytes` conform at every class on `x`'s edge: `now` if they do.
    fn due(&self, x: u32, bytes: u32, now: u64) -> u64 {
        self.classes_of(x)
            .iter()
            .map(|&c| self.buckets[c as usize].earliest(bytes, now))
            .max()
            .unwrap_or(now)
    }

    /// The frame bytes of the packet `x`, which holds packets, would send next.
    #[inline(always)]
    fn next_bytes(&self, mut x: u32) -> u32 {
        while self.nodes[x as usize].leaf == NIL {
            x = self.sets[x as usize]
                .first(&self.by_level)
                .expect("a node holding packets has a child in its set");
        }
        self.slots[self.nodes[x as usize].q.head].bytes
    }

    /// Finds the leaf whose front packet is sent next at `now` (the first of each set on
    /// the way down), parking the children whose classes lack the tokens for it.
    #[inline(always)]
    fn find<const SHAPED: bool>(&mut self, now: u64) -> Option<u32> {
        'descend: loop {
            let mut d = 0;
            let mut n = 0u32;
            loop {
                let c = self.sets[n as usize].first(&self.by_level)?;
                if SHAPED {
                    // The path, from the root's child down, for the classes on its edges.
                    self.path[d] = c;
                    d += 1;
                }
                n = c;
                if self.nodes[c as usize].leaf != NIL {
                    break;
                }
            }
            if !SHAPED {
                return Some(n);
            }
            let bytes = self.slots[self.nodes[n as usize].q.head]
                .bytes
                .saturating_add(self.overhead);
            // The edge nearest the root that lacks tokens waits for them.
            for i in 0..d {
                let x = self.path[i];
                if self.class_span[x as usize].1 == 0 {
                    continue;
                }
                let due = self.due(x, bytes, now);
                if due > now {
                    self.deactivate(x);
                    self.park(x, due);
                    continue 'descend;
                }
            }
            return Some(n);
        }
    }

    /// Enqueues `pkt` into flow record `flow` of leaf node `node`.
    #[inline(always)]
    fn enqueue_at(
        &mut self,
        pkt: &Packet,
        flow: u32,
        node: u32,
        now: u64,
    ) -> Result<(), DropReason> {
        let bytes = pkt.bytes as u64;
        let f = &self.flows[flow as usize];
        let l = &self.nodes[node as usize].q;
        // The order of the other engines' `limit_broken`.
        let broken = if l.packets >= l.limit_packets {
            Some(DropReason::LeafPackets)
        } else if l.bytes.saturating_add(bytes) > l.limit_bytes {
            Some(DropReason::LeafBytes)
        } else if f.packets >= l.flow_limit_packets as u64 {
            Some(DropReason::FlowPackets)
        } else if f.bytes.saturating_add(bytes) > l.flow_limit_bytes {
            Some(DropReason::FlowBytes)
        } else {
            None
        };
        if let Some(r) = broken {
            self.count_drop(node, flow, r);
            return Err(r);
        }
        self.seq += 1;
        let seq = self.seq;
        let slot = self.slots.take(Slot {
            id: pkt.id,
            enqueued_ps: now,
            seq,
            flow,
            bytes: pkt.bytes,
            next: NIL,
        });
        let f = &mut self.flows[flow as usize];
        f.packets += 1;
        f.bytes += bytes;
        let n = &mut self.nodes[node as usize];
        let ring_up = n.ring_up;
        let l = &mut n.q;
        l.packets += 1;
        l.bytes += bytes;
        // A leaf's head and tail are `NIL` together.
        let tail = std::mem::replace(&mut l.tail, slot);
        let was_empty = tail == NIL;
        if was_empty {
            l.head = slot;
        } else {
            self.slots[tail].next = slot;
        }
        self.backlog += 1;
        let mut a = ring_up;
        while a != NIL {
            self.rings[a as usize].push_back(seq);
            a = self.nodes[a as usize].ring_up;
        }
        if was_empty {
            self.activate(node);
        }
        Ok(())
    }

    #[cold]
    fn count_drop(&mut self, node: u32, flow: u32, r: DropReason) {
        self.drops.entry(node).or_default()[r.index()] += 1;
        self.flow_drops[flow as usize][r.index()] += 1;
    }

    /// Takes the packet at the front of leaf node `leaf_node` out of the leaf and its
    /// flow and hands its departure to `out`. Returns whether the leaf still holds packets,
    /// its new first entry's arrival where its parent can see a tie (else 0), and the
    /// packet's counted bytes.
    #[inline(always)]
    fn take(&mut self, leaf_node: u32, out: impl FnOnce(Departure)) -> (bool, u64, u32) {
        let n = &mut self.nodes[leaf_node as usize];
        let (leaf, leaf_ties) = (n.leaf, n.ties);
        let l = &mut n.q;
        let slot = l.head;
        let s = self.slots[slot];
        l.head = s.next;
        if s.next == NIL {
            l.tail = NIL;
        }
        l.packets -= 1;
        l.bytes -= s.bytes as u64;
        l.sent_packets += 1;
        l.sent_bytes += s.bytes as u64;
        self.slots.give(slot);
        let f = &mut self.flows[s.flow as usize];
        f.packets -= 1;
        f.bytes -= s.bytes as u64;
        f.sent_packets += 1;
        f.sent_bytes += s.bytes as u64;
        self.backlog -= 1;
        out(Departure {
            id: s.id,
            leaf: LeafId::new(leaf),
            flow: f.key,
            bytes: s.bytes,
            enqueued_ps: s.enqueued_ps,
        });
        let more = s.next != NIL;
        let seq = if leaf_ties && more {
            self.slots[s.next].seq
        } else {
            0
        };
        (more, seq, s.bytes.saturating_add(self.overhead))
    }

    /// After a packet of `wire` counted bytes has left leaf node `leaf_node`: each node
    /// from the leaf up re-keyed in its parent's set, or taken out of it. `more` and `seq`
    /// are what [`HeadEngine::take`] returned: whether the leaf still holds packets, and
    /// its new first entry's arrival.
    #[inline(always)]
    fn rekey<const SHAPED: bool>(
        &mut self,
        leaf_node: u32,
        (mut more, mut seq, wire): (bool, u64, u32),
        now: u64,
    ) {
        let mut x = leaf_node;
        loop {
            let n = &mut self.nodes[x as usize];
            let (p, under, ties) = (n.parent, n.under, n.ties);
            if under != Under::Fixed {
                let s = n.start;
                let cost = if under == Under::Rr {
                    1 << FRAC
                } else if n.cost_wire == wire {
                    n.cost
                } else {
                    n.cost_wire = wire;
                    n.cost = wfq_cost(wire, self.weights[x as usize]) as u64;
                    debug_assert!(
                        n.cost < 1 << 63,
                        "node {x}: a packet of {wire} counted bytes costs {} virtual units, \
                         too much for start tags compared on the circle",
                        n.cost
                    );
                    n.cost
                };
                n.start = s + cost as Rank;
                let pn = &mut self.nodes[p as usize];
                pn.vtime = pn.vtime.max(s);
            }
            if SHAPED {
                let (at, len) = self.class_span[x as usize];
                for &c in &self.classes[at as usize..(at + len) as usize] {
                    self.buckets[c as usize].charge(wire, now);
                }
            }
            // A shaped child whose classes lack the tokens for its next packet is parked
            // now, rather than re-keyed and parked when it next comes first: the same
            // order, one heap operation fewer.
            let due = if SHAPED && more && self.class_span[x as usize].1 != 0 {
                let bytes = self.next_bytes(x).saturating_add(self.overhead);
                self.due(x, bytes, now)
            } else {
                now
            };
            if more && due <= now {
                // Its key changed only if its start tag moved on or its parent ranks it
                // by its first entry's arrival (a `Levels` set keys by level alone).
                if under != Under::Fixed || ties {
                    if let Children::Heap(h) = &mut self.sets[p as usize] {
                        let key = self.nodes[x as usize].start as u64;
                        h.replace_top(KeyEntry::new(key, seq, x));
                    }
                }
            } else {
                self.sets[p as usize].pop_first();
                self.nodes[x as usize].in_set = false;
                if more {
                    self.park(x, due);
                }
            }
            if p == 0 {
                return;
            }
            // The parent, next up: whether it still holds eligible children, and where its
            // own parent can see a tie, its new first entry's arrival.
            more = !self.sets[p as usize].is_empty();
            seq = if self.nodes[p as usize].ties {
                self.rings[p as usize].pop_front_then_front().unwrap_or(0)
            } else {
                0
            };
            x = p;
        }
    }

    /// [`Engine::dequeue`], for a policy with shaping classes or without (`SHAPED`: the
    /// unshaped code keeps no class state live).
    /// Hands the departure to `out`; false when nothing is eligible.
    #[inline(always)]
    fn dequeue_one<const SHAPED: bool>(&mut self, now: u64, out: impl FnOnce(Departure)) -> bool {
        if SHAPED && !self.shaping_queue.is_empty() {
            self.release_due(now);
        }
        let Some(leaf) = self.find::<SHAPED>(now) else {
            return false;
        };
        let after = self.take(leaf, out);
        self.rekey::<SHAPED>(leaf, after, now);
        true
    }

    /// [`Engine::dequeue_batch`] (`SHAPED` as for [`HeadEngine::dequeue_one`]).
    fn dequeue_some<const SHAPED: bool>(
        &mut self,
        now: u64,
        max: usize,
        out: &mut Vec<Departure>,
    ) -> usize {
        let mut sent = 0;
        while sent < max {
            if !self.dequeue_one::<SHAPED>(now, |d| out.push(d)) {
                break;
            }
            sent += 1;
            if self.preload {
                self.preload_next();
            }
        }
        sent
    }

    /// Starts loading what the next departures read first: the records of the root's
    /// first child and, under a heap, of the children that may follow it (the top's
    /// children in the heap), so that their misses overlap with this departure's work.
    #[inline(always)]
    fn preload_next(&self) {
        match &self.sets[0] {
            Children::Heap(h) => {
                for e in h.entries().iter().take(5) {
                    prefetch(&self.nodes[e.v as usize]);
                    prefetch(&self.sets[e.v as usize]);
                }
                // A level further for those that may leave next, whose sets earlier
                // departures' prefetches brought in, and the front packet of the next.
                for (i, e) in h.entries().iter().take(5).enumerate() {
                    if let Some(c) = self.sets[e.v as usize].first(&self.by_level) {
                        let n = &self.nodes[c as usize];
                        prefetch(n);
                        prefetch(&n.q);
                        prefetch(&self.sets[c as usize]);
                        if i == 0 && n.leaf != NIL && n.q.head != NIL {
                            prefetch(&self.slots[n.q.head]);
                        }
                    }
                }
            }
            levels => {
                if let Some(c) = levels.first(&self.by_level) {
                    prefetch(&self.nodes[c as usize]);
                    prefetch(&self.sets[c as usize]);
                }
            }
        }
    }

    /// Panics, printing the state, when an invariant of the module doc does not hold.
    pub fn check_invariants(&self) {
        let mut below = vec![0u64; self.nodes.len()];
        for &leaf in &self.leaf_nodes {
            let mut n = leaf;
            loop {
                below[n as usize] += self.nodes[leaf as usize].q.packets as u64;
                match self.nodes[n as usize].parent {
                    NIL => break,
                    p => n = p,
                }
            }
        }
        let parked: Vec<u32> = {
            let mut h = self.shaping_queue.clone();
            std::iter::from_fn(|| h.pop().map(|e| e.v)).collect()
        };
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            let has = below[i] > 0;
            assert_eq!(
                n.in_set,
                has && !n.parked,
                "node {i} ({}): in_set {} with {} packets below, parked {}",
                self.prog.nodes[i].name,
                n.in_set,
                below[i],
                n.parked
            );
            let listed = parked.iter().filter(|&&x| x as usize == i).count();
            assert_eq!(
                listed, n.parked as usize,
                "node {i}: parked {} but queued {listed} times",
                n.parked
            );
            if n.ties && n.leaf == NIL {
                let r = &self.rings[i];
                assert_eq!(
                    r.len() as u64,
                    below[i],
                    "node {i}: ring of {} for {} packets",
                    r.len(),
                    below[i]
                );
            }
            let members = self.sets[n.parent as usize].members(&self.by_level);
            let count = members.iter().filter(|&&v| v as usize == i).count();
            assert_eq!(
                count, n.in_set as usize,
                "node {i}: in_set {} but in its parent's set {count} times",
                n.in_set
            );
            if n.in_set && n.under != Under::Fixed {
                let pv = self.nodes[n.parent as usize].vtime;
                assert!(
                    n.start >= pv && n.start - pv < 1 << 63,
                    "node {i}: start tag {} not within 2^63 above its parent's virtual time {pv}",
                    n.start
                );
            }
        }
        let held: u64 = self
            .leaf_nodes
            .iter()
            .map(|&n| self.nodes[n as usize].q.packets as u64)
            .sum();
        assert_eq!(
            held as usize, self.backlog,
            "backlog {} but leaves hold {held}",
            self.backlog
        );
    }
}

impl Engine for HeadEngine {
    fn program(&self) -> &Program {
        &self.prog
    }

    fn enqueue_classified(
        &mut self,
        pkt: Packet,
        class: Classification,
        now: u64,
    ) -> Result<(), DropReason> {
        debug_assert!(
            self.prog.is_valid_class(&class),
            "enqueue_classified: {class:?} is not a class of this program"
        );
        match class {
            Classification::Leaf { leaf, node, .. } => {
                let (leaf, node) = (leaf.get(), node.get());
                let key = flow_key_of(self.specs[leaf as usize].flow_key, &pkt);
                let flow = self.flow_record(leaf, key);
                self.enqueue_at(&pkt, flow, node, now)
            }
            Classification::Unclassified { at } => {
                self.drops.entry(at.get()).or_default()[DropReason::Unclassified.index()] += 1;
                Err(DropReason::Unclassified)
            }
        }
    }

    fn open_flow(&mut self, pkt: &Packet, class: Classification) -> Option<FlowQueue> {
        let binding @ (leaf, _, _) = FlowQueue::binding(&self.prog, class)?;
        let by = self.specs[leaf as usize].flow_key;
        let flow = self.flow_record(leaf, flow_key_of(by, pkt));
        Some(FlowQueue::new(
            flow,
            self.flows[flow as usize].generation,
            binding,
        ))
    }

    fn close_flow(&mut self, q: &FlowQueue) -> bool {
        let f = self.flows.get(q.flow as usize).copied();
        let Some(f) = f.filter(|f| f.leaf == q.leaf && f.generation == q.generation) else {
            panic!("close_flow: queue {q:?} was not opened by this engine, or is closed");
        };
        if f.packets > 0 {
            return false;
        }
        self.flow_of.remove(&(f.leaf, f.key));
        let rec = &mut self.flows[q.flow as usize];
        rec.leaf = NIL;
        rec.generation = rec.generation.wrapping_add(1);
        self.free_flows.push(q.flow);
        true
    }

    #[inline]
    fn enqueue_flow(&mut self, pkt: Packet, q: &FlowQueue, now: u64) -> Result<(), DropReason> {
        let f = &self.flows[q.flow as usize];
        assert!(
            f.leaf == q.leaf && f.generation == q.generation,
            "enqueue_flow: queue {q:?} was not opened by this engine, or is closed"
        );
        self.enqueue_at(&pkt, q.flow, q.node, now)
    }

    fn enqueue_flow_batch(
        &mut self,
        pkts: &[(Packet, FlowQueue)],
        now_ps: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        // The batch's records are loaded together before any is used, so their cache
        // misses overlap instead of following one another.
        if self.preload {
            for (_, q) in pkts {
                if let Some(f) = self.flows.get(q.flow as usize) {
                    prefetch(f);
                }
                if let Some(n) = self.nodes.get(q.node as usize) {
                    prefetch(n);
                    prefetch(&n.q);
                }
            }
            // Then what those records point to: the slot a packet is appended after, or,
            // for an empty leaf, the parent's record and set it enters.
            for (_, q) in pkts {
                if let Some(n) = self.nodes.get(q.node as usize) {
                    if n.q.tail != NIL {
                        prefetch(&self.slots[n.q.tail]);
                    } else if n.parent != NIL {
                        prefetch(&self.nodes[n.parent as usize]);
                        prefetch(&self.sets[n.parent as usize]);
                    }
                }
            }
        }
        for (p, q) in pkts {
            out.push(self.enqueue_flow(*p, q, now_ps));
        }
    }

    fn dequeue(&mut self, now: u64) -> Option<Departure> {
        let mut d = None;
        if self.classes.is_empty() {
            self.dequeue_one::<false>(now, |x| d = Some(x));
        } else {
            self.dequeue_one::<true>(now, |x| d = Some(x));
        }
        d
    }

    fn dequeue_batch(&mut self, now_ps: u64, max: usize, out: &mut Vec<Departure>) -> usize {
        if self.classes.is_empty() {
            self.dequeue_some::<false>(now_ps, max, out)
        } else {
            self.dequeue_some::<true>(now_ps, max, out)
        }
    }

    fn next_wakeup(&self) -> Option<u64> {
        self.shaping_queue.peek().map(|e| e.rank() as u64)
    }

    fn backlog(&self) -> usize {
        self.backlog
    }

    fn update(&mut self, u: Update, now: u64) -> Result<(), UpdateError> {
        check_update(&self.prog, &u)?;
        match u {
            Update::Shaper {
                shaper,
                rate_bps,
                burst_bytes,
            } => {
                self.buckets[shaper.index()].reconfigure(rate_bps, burst_bytes, now);
                Ok(())
            }
            Update::LeafLimits {
                node,
                limit_packets,
                limit_bytes,
                flow_limit_packets,
                flow_limit_bytes,
                outstanding: None,
            } => {
                let leaf = self.nodes[node.index()].leaf as usize;
                let spec = &mut self.specs[leaf];
                spec.limit_packets = limit_packets;
                spec.limit_bytes = limit_bytes;
                spec.flow_limit_packets = flow_limit_packets;
                spec.flow_limit_bytes = flow_limit_bytes;
                self.nodes[node.index()].q.limits(spec);
                Ok(())
            }
            Update::LeafLimits { .. } => Err(UpdateError::NotByThisEngine("`outstanding`")),
            Update::Weight { .. } => Err(UpdateError::NotByThisEngine("weight")),
            Update::Priority { .. } => Err(UpdateError::NotByThisEngine("priority")),
            Update::Quantum { .. } => Err(UpdateError::NotByThisEngine("quantum")),
            Update::Rate { .. } => Err(UpdateError::NotByThisEngine("senic rate")),
        }
    }

    fn stats(&self) -> Stats {
        Stats::from_leaves(
            &self.prog,
            self.leaf_nodes.iter().map(|&n| {
                let l = &self.nodes[n as usize].q;
                (n, l.sent_packets, l.sent_bytes)
            }),
            self.drops.iter().map(|(&v, &d)| (v, d)),
        )
    }

    fn flow_counters(&self) -> Vec<(LeafId, u64, Counters)> {
        let mut v: Vec<(LeafId, u64, Counters)> = self
            .flows
            .iter()
            .zip(&self.flow_drops)
            .filter(|(f, _)| f.leaf != NIL)
            .map(|(f, d)| {
                let c = Counters {
                    packets: f.sent_packets,
                    bytes: f.sent_bytes,
                    drops: *d,
                };
                (LeafId::new(f.leaf), f.key, c)
            })
            .collect();
        v.sort_unstable_by_key(|&(l, k, _)| (l, k));
        v
    }
}

#[cfg(test)]
mod tests;
