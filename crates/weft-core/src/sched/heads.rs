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
//! needs a queue of its own). Eligibility is checked on the way down, for the packet found at the leaf:
//! a child that lacks tokens leaves its parent's set (it is *parked*) until its classes'
//! tokens are due, in one queue of edges ordered by that time (the global shaping queue of
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
//! **Cost.** A node keeps its children in a 4-ary heap; a `prio` node whose children's
//! priorities differ, in a bitmap of levels (O(1)). (A calendar of rank buckets, as the
//! fast engine keeps for wide nodes, cost more here: equal start tags are ordered by
//! arrival, so its buckets' lists are walked.) Enqueue: O(1) into a leaf that holds
//! packets (the slot, the leaf's list, the rings); a leaf that was empty also pushes its
//! key at each ancestor that was empty, O(log k) for k backlogged siblings. Dequeue: one
//! peek per level to find the packet, then one `replace_top` (or `pop`) per level,
//! O(log k); a parked child costs one pop and one shaping-queue push, and its return one
//! push. No allocation in steady state: packets live in a pool of slots, heaps and rings
//! keep their capacity. Departures are counted at the leaf and summed over the tree when
//! [`Engine::stats`] is asked. Flow records are kept until the driver closes them
//! ([`Engine::close_flow`]), as the fast engine keeps them without
//! `EngineOptions::forget_idle_flows`: a driver facing untrusted flows bounds them itself
//! (the software NIC's per-tenant flow-queue budget).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::heap::{HeapEntry, MinHeap};
use super::pool::{Linked, Pool, NIL};
use super::ring::Ring;
use super::shared::{flow_key_of, wfq_cost, Bucket, Rank, FRAC};
use super::{
    check_update, limit_broken, Counters, Departure, DropReason, Engine, FlowQueue, Holding,
    Packet, Stats, Update, UpdateError,
};
use crate::policy::program::{Algo, FlowSched, LeafSpec, Origin};
use crate::policy::{Classification, Program};

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

/// A node's children in its set, by `(key, first entry's arrival number)`.
#[derive(Debug, Clone)]
enum Children {
    /// A heap of entries.
    Heap(MinHeap),
    /// A `prio` node whose children's priorities differ (at most 64 of them): bit `i` of
    /// `bits` is set when `by_level[i]`, the child with the `i`-th smallest priority, is
    /// in the set. No ties, so no arrival numbers.
    Levels { bits: u64, by_level: Box<[u32]> },
}

impl Default for Children {
    fn default() -> Children {
        Children::Heap(MinHeap::default())
    }
}

impl Children {
    #[inline]
    fn len(&self) -> usize {
        match self {
            Children::Heap(h) => h.len(),
            Children::Levels { bits, .. } => bits.count_ones() as usize,
        }
    }

    /// The first child: its entry (a `Levels` entry's rank is its level).
    #[inline]
    fn peek(&self) -> Option<HeapEntry> {
        match self {
            Children::Heap(h) => h.peek().copied(),
            Children::Levels { bits, by_level } => (*bits != 0).then(|| {
                let l = bits.trailing_zeros();
                HeapEntry::new(l as Rank, 0, by_level[l as usize])
            }),
        }
    }

    /// Adds child `e.v` (`level`: its level under a `Levels` node).
    #[inline]
    fn push(&mut self, e: HeapEntry, level: u8) {
        match self {
            Children::Heap(h) => h.push(e),
            Children::Levels { bits, .. } => *bits |= 1 << level,
        }
    }

    /// Removes the first child.
    #[inline]
    fn pop(&mut self) -> Option<HeapEntry> {
        match self {
            Children::Heap(h) => h.pop(),
            Children::Levels { .. } => {
                let e = self.peek()?;
                if let Children::Levels { bits, .. } = self {
                    *bits &= *bits - 1;
                }
                Some(e)
            }
        }
    }

    /// The first child's entry becomes `e` (the same child, a new key).
    #[inline]
    fn replace_top(&mut self, e: HeapEntry) {
        match self {
            Children::Heap(h) => h.replace_top(e),
            // A child's level does not change.
            Children::Levels { .. } => {}
        }
    }

    /// Every child in the set (tests).
    fn members(&self) -> Vec<u32> {
        match self {
            Children::Heap(h) => {
                let mut h = h.clone();
                std::iter::from_fn(|| h.pop().map(|e| e.v)).collect()
            }
            Children::Levels { bits, by_level } => (0..64)
                .filter(|l| bits & (1u64 << l) != 0)
                .map(|l| by_level[l])
                .collect(),
        }
    }
}

/// One node's state: as a child of its parent and as a parent of its children.
#[derive(Debug, Clone, Default)]
struct NodeState {
    /// Scheduling parent, `NIL` for the root.
    parent: u32,
    /// Its own kind (`Leaf` for leaves).
    kind: Kind,
    /// Under a `prio` parent: its priority.
    priority: u64,
    /// Under a `wfq` parent: its weight.
    weight: u64,
    /// In its parent's set.
    in_set: bool,
    /// Out of its parent's set until its classes' tokens are due.
    parked: bool,
    /// Under a `wfq` or `rr` parent: its key while in the set (virtual bytes, `FRAC`
    /// fractional bits), or where it stood when it left the set.
    start: Rank,
    /// As a parent: the largest start tag it has sent (`V`).
    vtime: Rank,
    /// As a parent: its children in its set.
    set: Children,
    /// Under a parent whose set is `Levels`: its level there.
    level: u8,
    /// Arrival numbers of the packets below it, oldest first (when its parent can tie).
    arrivals: Option<Ring<u64>>,
    /// The nearest node above it that keeps an arrival ring (`NIL`: none).
    ring_up: u32,
    /// Its parent can see a tie between it and a sibling: its key carries its first
    /// entry's arrival (else 0).
    ties: bool,
    /// Its edge's shaping classes, leaf side first: `classes[at..at + len]` of the engine.
    class_at: u32,
    class_len: u32,
    /// Leaf: its index in `Program::leaves` (`NIL` for other nodes).
    leaf: u32,
    /// Leaf: first and last slot of its queue (`NIL` when empty).
    head: u32,
    tail: u32,
}

/// A leaf's limits and counters.
#[derive(Debug, Clone)]
struct LeafState {
    node: u32,
    spec: LeafSpec,
    /// Packets and bytes held.
    packets: u64,
    bytes: u64,
    /// Packets and bytes sent.
    sent_packets: u64,
    sent_bytes: u64,
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

/// A flow: its key within its leaf, what it holds, its counters.
#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    /// The leaf's node id (`NIL` when the record is free).
    node: u32,
    key: u64,
    generation: u32,
    packets: u64,
    bytes: u64,
    counters: Counters,
}

/// The engine (see the module doc).
#[derive(Debug, Clone)]
pub struct HeadEngine {
    prog: Arc<Program>,
    nodes: Vec<NodeState>,
    leaves: Vec<LeafState>,
    /// Every edge's classes, concatenated (`NodeState::class_at`).
    classes: Vec<u32>,
    buckets: Vec<Bucket>,
    /// Parked nodes by the time their classes' tokens are due, then when parked.
    shaping_queue: MinHeap,
    slots: Pool<Slot>,
    flows: Vec<Flow>,
    free_flows: Vec<u32>,
    flow_of: FxHashMap<(u32, u64), u32>,
    /// Drops by node (unclassified packets are counted where classification stopped).
    drops: FxHashMap<u32, [u64; 5]>,
    /// Bytes a packet counts beyond its frame at classes and fair shares.
    overhead: u32,
    seq: u64,
    backlog: usize,
    /// The path of the packet being sent, from the root's child down to the leaf: each
    /// node and its entry in its parent's set (sized to the policy's depth up front).
    path: Vec<(u32, HeapEntry)>,
}

impl HeadEngine {
    /// An engine for `prog`, or what in it this engine does not implement.
    pub fn new(prog: Arc<Program>) -> Result<HeadEngine, Unsupported> {
        let refuse = |name: &str, origin: &Origin, reason| Unsupported {
            node: name.to_string(),
            file: origin.file.clone(),
            line: origin.line,
            reason,
        };
        let mut nodes = vec![NodeState::default(); prog.nodes.len()];
        let mut leaves = Vec::with_capacity(prog.leaves.len());
        let mut classes = Vec::new();
        for (i, n) in prog.nodes.iter().enumerate() {
            // The re-key splits the node array between a parent and its child.
            assert!(
                n.parent.is_none_or(|p| (p as usize) < i),
                "node {i} ({}): its parent {:?} comes after it; the compiler numbers parents first",
                n.name,
                n.parent
            );
            let kind = match &n.algo {
                Algo::Fifo => Kind::Fifo,
                Algo::Prio => Kind::Prio,
                Algo::Wfq => Kind::Wfq,
                Algo::Rr => Kind::Rr,
                Algo::Leaf(spec) => {
                    if spec.flow_sched == FlowSched::Fair {
                        return Err(refuse(
                            &n.name,
                            &n.origin,
                            "a leaf ordering its flows fairly",
                        ));
                    }
                    if spec.outstanding.is_some() {
                        return Err(refuse(&n.name, &n.origin, "`outstanding`"));
                    }
                    leaves.push(LeafState {
                        node: i as u32,
                        spec: spec.clone(),
                        packets: 0,
                        bytes: 0,
                        sent_packets: 0,
                        sent_bytes: 0,
                    });
                    Kind::Leaf
                }
                Algo::Drr => return Err(refuse(&n.name, &n.origin, "a `drr` node")),
                Algo::Lstf { .. } => return Err(refuse(&n.name, &n.origin, "an `lstf` node")),
                Algo::Edf { .. } => return Err(refuse(&n.name, &n.origin, "an `edf` node")),
                Algo::Senic { .. } => return Err(refuse(&n.name, &n.origin, "a `senic` node")),
            };
            if n.shaping_parents.len() > 1 {
                return Err(refuse(
                    &n.name,
                    &n.origin,
                    "parallel shaping nodes on one edge (a class chosen per packet)",
                ));
            }
            let at = classes.len() as u32;
            let mut next = n.shaping_parents.first().copied();
            while let Some(c) = next {
                let s = &prog.shapers[c as usize];
                if s.shaping_parents.len() > 1 {
                    return Err(refuse(
                        &s.name,
                        &s.origin,
                        "parallel shaping nodes on one edge (a class chosen per packet)",
                    ));
                }
                if !s.matches.is_any() {
                    return Err(refuse(&s.name, &s.origin, "a shaping node with `match`"));
                }
                classes.push(c);
                next = s.shaping_parents.first().copied();
            }
            nodes[i] = NodeState {
                parent: n.parent.unwrap_or(NIL),
                kind,
                priority: n.edge.priority,
                weight: n.edge.weight.max(1),
                class_at: at,
                class_len: classes.len() as u32 - at,
                leaf: n.leaf.unwrap_or(NIL),
                head: NIL,
                tail: NIL,
                ..NodeState::default()
            };
        }
        // A class covers one edge: a shape node over one child (a class shared by siblings
        // would need the class-local ranks of the PIFO engines' class queues).
        let mut edges = vec![0u32; prog.shapers.len()];
        for n in &nodes {
            let at = n.class_at as usize;
            for &c in &classes[at..at + n.class_len as usize] {
                edges[c as usize] += 1;
            }
        }
        if let Some(c) = edges.iter().position(|&e| e > 1) {
            let s = &prog.shapers[c];
            return Err(refuse(
                &s.name,
                &s.origin,
                "a shaping node over several children (a class they share)",
            ));
        }
        // Arrival rings where the parent can see a tie.
        for (i, n) in prog.nodes.iter().enumerate() {
            let Some(p) = n.parent else { continue };
            if n.leaf.is_some() {
                continue;
            }
            let siblings = prog.nodes[p as usize].children.clone();
            let tie = match nodes[p as usize].kind {
                Kind::Prio => siblings
                    .filter(|&s| s as usize != i)
                    .any(|s| prog.nodes[s as usize].edge.priority == n.edge.priority),
                _ => siblings.len() > 1,
            };
            if tie {
                nodes[i].arrivals = Some(Ring::new());
            }
        }
        for (i, n) in prog.nodes.iter().enumerate() {
            let Some(p) = n.parent else { continue };
            nodes[i].ties = match nodes[p as usize].kind {
                Kind::Prio => prog.nodes[p as usize]
                    .children
                    .clone()
                    .filter(|&s| s as usize != i)
                    .any(|s| prog.nodes[s as usize].edge.priority == n.edge.priority),
                _ => prog.nodes[p as usize].children.len() > 1,
            };
            let mut a = p;
            nodes[i].ring_up = loop {
                if nodes[a as usize].arrivals.is_some() {
                    break a;
                }
                match prog.nodes[a as usize].parent {
                    Some(up) => a = up,
                    None => break NIL,
                }
            };
        }
        // Each parent's set.
        for (i, n) in prog.nodes.iter().enumerate() {
            if n.leaf.is_some() {
                continue;
            }
            let kids = n.children.clone();
            let mut prios: Vec<u64> = kids
                .clone()
                .map(|c| prog.nodes[c as usize].edge.priority)
                .collect();
            prios.sort_unstable();
            let distinct = prios.windows(2).all(|w| w[0] != w[1]);
            nodes[i].set = if nodes[i].kind == Kind::Prio && distinct && prios.len() <= 64 {
                let by_level: Box<[u32]> = (0..prios.len())
                    .map(|l| {
                        kids.clone()
                            .find(|&c| prog.nodes[c as usize].edge.priority == prios[l])
                            .expect("a child at each level")
                    })
                    .collect();
                for (l, &c) in by_level.iter().enumerate() {
                    nodes[c as usize].level = l as u8;
                }
                Children::Levels { bits: 0, by_level }
            } else {
                Children::Heap(MinHeap::default())
            };
        }
        let buckets: Vec<Bucket> = prog
            .shapers
            .iter()
            .map(|s| Bucket::new(s.rate_bps, s.burst_bytes))
            .collect();
        let depth = prog.depth() as usize;
        Ok(HeadEngine {
            overhead: prog.link.counted_overhead(),
            prog,
            nodes,
            leaves,
            classes,
            buckets,
            shaping_queue: MinHeap::default(),
            slots: Pool::default(),
            flows: Vec::new(),
            free_flows: Vec::new(),
            flow_of: FxHashMap::default(),
            drops: FxHashMap::default(),
            seq: 0,
            backlog: 0,
            path: Vec::with_capacity(depth + 1),
        })
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// The flow record of `key` at leaf node `node`, made if new.
    fn flow_record(&mut self, node: u32, key: u64) -> u32 {
        if let Some(&f) = self.flow_of.get(&(node, key)) {
            return f;
        }
        let rec = Flow {
            node,
            key,
            ..Flow::default()
        };
        let f = match self.free_flows.pop() {
            Some(f) => {
                let generation = self.flows[f as usize].generation;
                self.flows[f as usize] = Flow { generation, ..rec };
                f
            }
            None => {
                self.flows.push(rec);
                (self.flows.len() - 1) as u32
            }
        };
        self.flow_of.insert((node, key), f);
        f
    }

    /// Child `xn`'s key at its parent `pn` now: its priority, its start tag or nothing
    /// (`fifo`); then, when the parent can see a tie, its first entry's arrival (a leaf's
    /// first packet's, an interior node's oldest in its ring), which breaks it.
    #[inline]
    fn key(pn: &NodeState, xn: &NodeState, slots: &Pool<Slot>) -> (Rank, u64) {
        let seq = match &xn.arrivals {
            _ if !xn.ties => 0,
            _ if xn.kind == Kind::Leaf => slots[xn.head].seq,
            r => r.as_ref().and_then(|r| r.front().copied()).unwrap_or(0),
        };
        match pn.kind {
            Kind::Prio => (xn.priority as Rank, seq),
            Kind::Wfq | Kind::Rr => (xn.start, seq),
            _ => (0, seq),
        }
    }

    /// Puts `x`, which holds packets and is not parked, into its parent's set, and its
    /// ancestors into theirs as far as one already was.
    fn activate(&mut self, mut x: u32) {
        loop {
            let p = self.nodes[x as usize].parent;
            debug_assert!(p != NIL, "activate: the root has no parent");
            // A parent's id is below its child's: one split gives both.
            let (lo, hi) = self.nodes.split_at_mut(x as usize);
            let (pn, xn) = (&mut lo[p as usize], &mut hi[0]);
            if matches!(pn.kind, Kind::Wfq | Kind::Rr) {
                xn.start = xn.start.max(pn.vtime);
            }
            let (key, seq) = Self::key(pn, xn, &self.slots);
            xn.in_set = true;
            let was_empty = pn.set.len() == 0;
            pn.set.push(HeapEntry::new(key, seq, x), xn.level);
            if !was_empty || pn.parent == NIL || pn.parked {
                return;
            }
            debug_assert!(
                !pn.in_set,
                "node {p}: in its parent's set with nothing below it"
            );
            x = p;
        }
    }

    /// Takes `x`, the first of its parent's set, out of it (it is parked, or empty), and
    /// every ancestor left with nothing eligible out of theirs.
    fn deactivate(&mut self, mut x: u32) {
        loop {
            let p = self.nodes[x as usize].parent;
            let e = self.nodes[p as usize].set.pop().expect("a set holding x");
            debug_assert_eq!(e.v, x, "node {x} is not first in its parent {p}'s set");
            let n = &mut self.nodes[x as usize];
            n.in_set = false;
            if matches!(self.nodes[p as usize].kind, Kind::Wfq | Kind::Rr) {
                self.nodes[x as usize].start = e.rank();
            }
            if self.nodes[p as usize].set.len() > 0 || self.nodes[p as usize].parent == NIL {
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

    /// When `bytes` conform at every class on `x`'s edge: `now` if they do.
    fn due(&self, x: u32, bytes: u32, now: u64) -> u64 {
        let n = &self.nodes[x as usize];
        let at = n.class_at as usize;
        self.classes[at..at + n.class_len as usize]
            .iter()
            .map(|&c| self.buckets[c as usize].earliest(bytes, now))
            .max()
            .unwrap_or(now)
    }

    /// Finds the next packet to send at `now`: fills `self.path` (from the root's child
    /// down to the leaf, each the first of its parent's set, with its entry there),
    /// parking the children whose classes lack the tokens for it.
    fn find(&mut self, now: u64) -> bool {
        'descend: loop {
            self.path.clear();
            let mut n = 0u32;
            while self.nodes[n as usize].kind != Kind::Leaf {
                let Some(e) = self.nodes[n as usize].set.peek() else {
                    return false;
                };
                n = e.v;
                self.path.push((n, e));
            }
            if self.classes.is_empty() {
                return true;
            }
            let bytes = self.slots[self.nodes[n as usize].head]
                .bytes
                .saturating_add(self.overhead);
            // The edge nearest the root that lacks tokens waits for them.
            for i in 0..self.path.len() {
                let x = self.path[i].0;
                if self.nodes[x as usize].class_len == 0 {
                    continue;
                }
                let due = self.due(x, bytes, now);
                if due > now {
                    self.deactivate(x);
                    self.nodes[x as usize].parked = true;
                    let seq = self.next_seq();
                    self.shaping_queue.push(HeapEntry::new(due as Rank, seq, x));
                    continue 'descend;
                }
            }
            return true;
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Enqueues `pkt` into flow record `flow` (of leaf node `node`).
    fn enqueue_at(&mut self, pkt: &Packet, flow: u32, now: u64) -> Result<(), DropReason> {
        let node = self.flows[flow as usize].node;
        let leaf = self.nodes[node as usize].leaf;
        let l = &self.leaves[leaf as usize];
        let f = &self.flows[flow as usize];
        let held = Holding {
            leaf_packets: l.packets,
            leaf_bytes: l.bytes,
            flow_packets: f.packets,
            flow_bytes: f.bytes,
        };
        if let Some(r) = limit_broken(&l.spec, held, pkt.bytes as u64) {
            self.drops.entry(node).or_default()[r.index()] += 1;
            self.flows[flow as usize].counters.drops[r.index()] += 1;
            return Err(r);
        }
        let seq = self.next_seq();
        let slot = self.slots.take(Slot {
            id: pkt.id,
            enqueued_ps: now,
            seq,
            flow,
            bytes: pkt.bytes,
            next: NIL,
        });
        let l = &mut self.leaves[leaf as usize];
        l.packets += 1;
        l.bytes += pkt.bytes as u64;
        let f = &mut self.flows[flow as usize];
        f.packets += 1;
        f.bytes += pkt.bytes as u64;
        self.backlog += 1;
        let st = &mut self.nodes[node as usize];
        let was_empty = st.head == NIL;
        if was_empty {
            st.head = slot;
        } else {
            let tail = st.tail;
            self.slots[tail].next = slot;
        }
        st.tail = slot;
        let mut a = st.ring_up;
        while a != NIL {
            let an = &mut self.nodes[a as usize];
            if let Some(r) = an.arrivals.as_mut() {
                r.push_back(seq);
            }
            a = an.ring_up;
        }
        if was_empty {
            self.activate(node);
        }
        Ok(())
    }

    /// Sends the packet at the front of the leaf ending `self.path`.
    fn send(&mut self, now: u64) -> Departure {
        let depth = self.path.len();
        let leaf_node = self.path[depth - 1].0;
        let st = &mut self.nodes[leaf_node as usize];
        let slot = st.head;
        let s = self.slots[slot];
        st.head = s.next;
        if s.next == NIL {
            st.tail = NIL;
        }
        self.slots.give(slot);
        let wire = s.bytes.saturating_add(self.overhead);
        // Up the path: each child re-keyed in its parent's set, or out of it.
        for i in (0..depth).rev() {
            let (x, top) = self.path[i];
            // A parent's id is below its child's: one split gives both.
            let p = self.nodes[x as usize].parent as usize;
            let (lo, hi) = self.nodes.split_at_mut(x as usize);
            let (pn, xn) = (&mut lo[p], &mut hi[0]);
            let has_more = if i == depth - 1 {
                xn.head != NIL
            } else {
                if let Some(r) = xn.arrivals.as_mut() {
                    r.pop_front();
                }
                xn.set.len() > 0
            };
            if let Kind::Wfq | Kind::Rr = pn.kind {
                let s = top.rank();
                pn.vtime = pn.vtime.max(s);
                xn.start = s + if pn.kind == Kind::Wfq {
                    wfq_cost(wire, xn.weight)
                } else {
                    1 << FRAC
                };
            }
            let at = xn.class_at as usize;
            for &c in &self.classes[at..at + xn.class_len as usize] {
                self.buckets[c as usize].charge(wire, now);
            }
            if has_more {
                let (key, seq) = Self::key(pn, xn, &self.slots);
                pn.set.replace_top(HeapEntry::new(key, seq, x));
            } else {
                pn.set.pop();
                xn.in_set = false;
            }
        }
        let leaf = self.nodes[leaf_node as usize].leaf;
        let l = &mut self.leaves[leaf as usize];
        l.packets -= 1;
        l.bytes -= s.bytes as u64;
        l.sent_packets += 1;
        l.sent_bytes += s.bytes as u64;
        let f = &mut self.flows[s.flow as usize];
        f.packets -= 1;
        f.bytes -= s.bytes as u64;
        f.counters.packets += 1;
        f.counters.bytes += s.bytes as u64;
        self.backlog -= 1;
        Departure {
            id: s.id,
            leaf,
            flow: f.key,
            bytes: s.bytes,
            enqueued_ps: s.enqueued_ps,
        }
    }

    /// Panics, printing the state, when an invariant of the module doc does not hold.
    pub fn check_invariants(&self) {
        let mut below = vec![0u64; self.nodes.len()];
        for l in &self.leaves {
            let mut n = l.node;
            loop {
                below[n as usize] += l.packets;
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
            if let Some(r) = &n.arrivals {
                assert_eq!(
                    r.len() as u64,
                    below[i],
                    "node {i}: ring of {} for {} packets",
                    r.len(),
                    below[i]
                );
            }
            let count = self.nodes[n.parent as usize]
                .set
                .members()
                .iter()
                .filter(|&&v| v as usize == i)
                .count();
            assert_eq!(
                count, n.in_set as usize,
                "node {i}: in_set {} but in its parent's set {count} times",
                n.in_set
            );
        }
        let held: u64 = self.leaves.iter().map(|l| l.packets).sum();
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
                let key = flow_key_of(self.leaves[leaf as usize].spec.flow_key, &pkt);
                let flow = self.flow_record(node, key);
                self.enqueue_at(&pkt, flow, now)
            }
            Classification::Unclassified { at } => {
                self.drops.entry(at).or_default()[DropReason::Unclassified.index()] += 1;
                Err(DropReason::Unclassified)
            }
        }
    }

    fn open_flow(&mut self, pkt: &Packet, class: Classification) -> Option<FlowQueue> {
        let binding @ (leaf, node, _) = FlowQueue::binding(&self.prog, class)?;
        let by = self.leaves[leaf as usize].spec.flow_key;
        let flow = self.flow_record(node, flow_key_of(by, pkt));
        Some(FlowQueue::new(
            flow,
            self.flows[flow as usize].generation,
            binding,
        ))
    }

    fn close_flow(&mut self, q: &FlowQueue) -> bool {
        let f = self.flows.get(q.flow as usize).copied();
        let Some(f) = f.filter(|f| f.node == q.node && f.generation == q.generation) else {
            panic!("close_flow: queue {q:?} was not opened by this engine, or is closed");
        };
        if f.packets > 0 {
            return false;
        }
        self.flow_of.remove(&(f.node, f.key));
        let rec = &mut self.flows[q.flow as usize];
        rec.node = NIL;
        rec.generation = rec.generation.wrapping_add(1);
        self.free_flows.push(q.flow);
        true
    }

    fn enqueue_flow(&mut self, pkt: Packet, q: &FlowQueue, now: u64) -> Result<(), DropReason> {
        let f = &self.flows[q.flow as usize];
        assert!(
            f.node == q.node && f.generation == q.generation,
            "enqueue_flow: queue {q:?} was not opened by this engine, or is closed"
        );
        self.enqueue_at(&pkt, q.flow, now)
    }

    fn dequeue(&mut self, now: u64) -> Option<Departure> {
        self.release_due(now);
        if !self.find(now) {
            return None;
        }
        Some(self.send(now))
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
                self.buckets[shaper as usize].reconfigure(rate_bps, burst_bytes, now);
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
                let leaf = self.nodes[node as usize].leaf;
                let spec = &mut self.leaves[leaf as usize].spec;
                spec.limit_packets = limit_packets;
                spec.limit_bytes = limit_bytes;
                spec.flow_limit_packets = flow_limit_packets;
                spec.flow_limit_bytes = flow_limit_bytes;
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
            self.leaves
                .iter()
                .map(|l| (l.node, l.sent_packets, l.sent_bytes)),
            self.drops.iter().map(|(&v, &d)| (v, d)),
        )
    }

    fn flow_counters(&self) -> Vec<(u32, u64, Counters)> {
        let mut v: Vec<(u32, u64, Counters)> = self
            .flows
            .iter()
            .filter(|f| f.node != NIL)
            .map(|f| (self.nodes[f.node as usize].leaf, f.key, f.counters))
            .collect();
        v.sort_unstable_by_key(|&(l, k, _)| (l, k));
        v
    }
}
