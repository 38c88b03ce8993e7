//! The compiled program: an immutable, index-addressed form of a validated policy, ready for
//! the scheduling core (Loom §3 semantics, SENIC §4 parameters).
//!
//! * Scheduling nodes and leaves are numbered in breadth-first order from the root
//!   ([`NodeId::ROOT`]), so every node's children are one contiguous range: a scheduler keeps
//!   per-node state in flat arrays indexed by the id's number ([`NodeId::index`]).
//! * Shaping nodes are not part of that tree (removing them leaves a tree, Loom §3); they are
//!   numbered separately as shaping classes (`ShaperId`) and reached through the classifier,
//!   which returns, per packet, the shaping classes on its path.
//! * Edge parameters (`priority`, `weight`, `quantum`, `rate`) live on the child and are
//!   interpreted by its scheduling parent's algorithm.
//!
//! Invariants (checked by `debug_assert!` in [`Program::check_invariants`]): parent ids are
//! smaller than child ids; `children` ranges tile `1..nodes.len()`; every leaf has a `LeafId`
//! and `leaves[leaf_id] == node_id`.
//!
//! Cost: classification is one dispatch lookup per level down to a leaf — a few inlined
//! instructions for the common one-array dispatch, otherwise O(match shapes) probes (see
//! `classifier`) — then one lookup per node on the way back up that has a shaping set (the
//! others are skipped through precomputed links); no allocation.

use super::error::Warnings;
use crate::classifier::tss::{Dispatch, NO_TARGET};
use crate::classifier::{reference::ReferenceDispatch, Match, PacketMeta};

pub use super::ids::{ChildIter, Children, LeafId, NodeId, ShaperId};
pub use super::parse::{FlowKey, FlowSched, Kind};

/// Most shaping classes one packet can pass through.
pub const MAX_SHAPING_PER_PACKET: usize = 8;

/// The link the policy schedules onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Line rate, bits per second.
    pub rate_bps: u64,
    /// Bytes added to every frame on the wire (Ethernet preamble + SFD + IFG = 20).
    pub overhead_bytes: u64,
    /// Largest frame, bytes (default 1514: Ethernet without FCS).
    pub mtu_bytes: u64,
    /// Whether shaping classes and fair shares (`wfq`, `drr`, fair leaves) count the
    /// per-frame overhead with each frame, as the link does (`count: wire`, the default), or
    /// frame bytes only (`count: frame`).
    pub count_overhead: bool,
}

impl Link {
    /// Bytes a packet counts for at shaping classes and fair shares beyond its frame: the
    /// per-frame overhead under `count: wire`, else 0.
    pub fn counted_overhead(&self) -> u32 {
        if self.count_overhead {
            u32::try_from(self.overhead_bytes).unwrap_or(u32::MAX)
        } else {
            0
        }
    }
}

impl Default for Link {
    fn default() -> Link {
        Link {
            rate_bps: 10_000_000_000,
            overhead_bytes: 20,
            mtu_bytes: 1514,
            count_overhead: true,
        }
    }
}

/// Size limits a policy must respect (Loom §3, "Policy Limitations": refuse policies that
/// cannot be run efficiently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Levels of the scheduling tree, root and leaves included.
    pub max_depth: u32,
    /// Nodes of every kind.
    pub max_nodes: u32,
    /// Shaping nodes stacked on one edge (nested parallel sets).
    pub max_shaping_depth: u32,
    /// Distinct match shapes among one node's children (table probes per classification step).
    pub max_match_shapes: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 16,
            max_nodes: 1 << 21,
            max_shaping_depth: 4,
            max_match_shapes: 32,
        }
    }
}

/// The algorithm of a node, with its own parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Algo {
    /// Arrival order.
    Fifo,
    /// Strict priority by the children's `priority` (lower first; ties in arrival order).
    Prio,
    /// Weighted fair queuing by the children's `weight` (virtual start/finish times).
    Wfq,
    /// Round robin, one packet per child per round.
    Rr,
    /// Deficit round robin with the children's `quantum`.
    Drr,
    /// Least slack first; `default_slack_ps` when a packet carries no slack.
    Lstf {
        /// Picoseconds (`default_slack`, 1 ms unless written).
        default_slack_ps: u64,
    },
    /// Earliest deadline first; deadline = arrival + `default_deadline_ps` when absent.
    Edf {
        /// Picoseconds (`default_deadline`, 1 ms unless written).
        default_deadline_ps: u64,
    },
    /// SENIC's unified rate-limit scheduler (WF2Q+ with an oversubscription-scaled system time).
    Senic {
        /// Bits per second: the link rate at the top, or the node's own `rate` as an L1 class.
        capacity_bps: u64,
    },
    /// A leaf (traffic class) holding per-flow queues.
    Leaf(LeafSpec),
}

impl Algo {
    /// The `type:` name.
    pub fn name(&self) -> &'static str {
        match self {
            Algo::Fifo => "fifo",
            Algo::Prio => "prio",
            Algo::Wfq => "wfq",
            Algo::Rr => "rr",
            Algo::Drr => "drr",
            Algo::Lstf { .. } => "lstf",
            Algo::Edf { .. } => "edf",
            Algo::Senic { .. } => "senic",
            Algo::Leaf(_) => "leaf",
        }
    }
}

/// A leaf's queues (Loom §4.2.3 for `outstanding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSpec {
    /// How packets are grouped into flows.
    pub flow_key: FlowKey,
    /// How flows are ordered.
    pub flow_sched: FlowSched,
    /// DRR quantum across flows when `flow_sched` is `Fair`, bytes.
    pub flow_quantum_bytes: u64,
    /// Packets queued in the whole leaf, at most.
    pub limit_packets: Option<u64>,
    /// Bytes queued in the whole leaf, at most.
    pub limit_bytes: Option<u64>,
    /// Packets queued per flow, at most.
    pub flow_limit_packets: Option<u64>,
    /// Bytes queued per flow, at most.
    pub flow_limit_bytes: Option<u64>,
    /// Packets of this class admitted to the scheduler at once, at most.
    pub outstanding: Option<u64>,
    /// True when this leaf is an attachment point no sub-policy filled (FIFO by default).
    pub unfilled_attachment: bool,
}

/// Parameters of the edge from a node to its scheduling parent. All are set (with defaults);
/// the parent's algorithm decides which one it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Under `prio`: lower is served first.
    pub priority: u64,
    /// Under `wfq`: share weight, ≥ 1.
    pub weight: u64,
    /// Under `drr`: bytes per round.
    pub quantum_bytes: u64,
    /// Under `senic`: rate limit in bits per second.
    pub rate_bps: u64,
}

/// Where a node was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// File path as given.
    pub file: String,
    /// 1-based line.
    pub line: u32,
}

/// A scheduling node or a leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Unique name (sub-policy nodes are prefixed `point/`).
    pub name: String,
    /// Algorithm and its parameters.
    pub algo: Algo,
    /// Scheduling parent (shaping nodes removed); `None` for the root.
    pub parent: Option<NodeId>,
    /// Children, a contiguous range of ids, in declaration (first-match) order.
    pub children: Children,
    /// Parameters read by the parent.
    pub edge: Edge,
    /// Levels from the root; the root is 0.
    pub depth: u32,
    /// Leaf index when this is a leaf.
    pub leaf: Option<LeafId>,
    /// Classification scope: packets reach this node only if they match.
    pub matches: Match,
    /// Parallel shaping nodes on the edge to the parent, in the order written.
    pub shaping_parents: Vec<ShaperId>,
    /// Where it was written.
    pub origin: Origin,
}

/// A shaping class (a shaping node): a token bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaper {
    /// Unique name.
    pub name: String,
    /// Rate, bits per second.
    pub rate_bps: u64,
    /// Bucket depth, bytes (`burst`; by default two frames of the link,
    /// [`default_burst_bytes`](super::compile::default_burst_bytes)).
    pub burst_bytes: u64,
    /// Which packets of the edge this node shapes (`any` when absent).
    pub matches: Match,
    /// Nested parallel shaping nodes above this one, in the order written.
    pub shaping_parents: Vec<ShaperId>,
    /// The scheduling node the shaped edge leads to.
    pub sched_parent: NodeId,
    /// Where it was written.
    pub origin: Origin,
}

/// The shaping classes one packet passes through, leaf side first. Fixed capacity: no
/// allocation per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapingPath {
    len: u8,
    ids: [ShaperId; MAX_SHAPING_PER_PACKET],
}

impl Default for ShapingPath {
    /// No classes.
    fn default() -> ShapingPath {
        ShapingPath {
            len: 0,
            ids: [ShaperId::new(0); MAX_SHAPING_PER_PACKET],
        }
    }
}

impl ShapingPath {
    /// The classes.
    #[inline]
    pub fn as_slice(&self) -> &[ShaperId] {
        &self.ids[..self.len as usize]
    }

    pub(crate) fn push(&mut self, id: ShaperId) {
        debug_assert!(
            (self.len as usize) < MAX_SHAPING_PER_PACKET,
            "shaping path overflow: {:?} + {id}",
            self.as_slice()
        );
        if (self.len as usize) < MAX_SHAPING_PER_PACKET {
            self.ids[self.len as usize] = id;
            self.len += 1;
        }
    }
}

/// The classifier's answer for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification {
    /// The packet enters `leaf` and passes the shaping classes in `shaping`.
    Leaf {
        /// The leaf's index in [`Program::leaves`] (as a departure's `leaf` numbers it).
        leaf: LeafId,
        /// The leaf's node: its index in [`Program::nodes`].
        node: NodeId,
        /// The shaping classes the packet passes, leaf side first.
        shaping: ShapingPath,
    },
    /// No child of `at` matches the packet: it is dropped as unclassified.
    Unclassified {
        /// The node (an index in [`Program::nodes`]) none of whose children takes it.
        at: NodeId,
    },
}

/// Compiled classifier tables (fast twin).
#[derive(Debug, Clone, Default)]
pub(crate) struct Tables {
    /// Every non-empty dispatch point; index 0 is the empty one. Kept apart from the
    /// per-node array so it stays small (16 bytes per node) and cache-resident.
    pub dispatches: Vec<Dispatch>,
    /// Per node: what classification reads, packed in 16 bytes (one cache access per level).
    pub hot: Vec<HotNode>,
    /// Per shaping class: index of the dispatch among its own shaping parents (0 when none).
    pub shaper_dispatch: Vec<u32>,
    /// True when some shaping class has shaping parents of its own (`shaper_dispatch` is not
    /// all 0): only then does classification look for nested sets.
    pub nested_shaping: bool,
    /// The root's match, when it is not `any`.
    pub root_match: Option<Match>,
}

/// The per-node data classification reads.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HotNode {
    /// Leaf id, or `NO_ID` (copy of `Node::leaf`).
    pub leaf: u32,
    /// Index in `dispatches` of the dispatch among the children (0 for leaves).
    pub child_dispatch: u32,
    /// Index of the dispatch among the parallel shaping parents of the nearest node at or
    /// above this one that has such a set (0 when none): the first shaping lookup of a packet
    /// that ends here. [`Tables::link_shaping`] fills it from the node's own dispatch.
    pub shape_dispatch: u32,
    /// The nearest node strictly above the one `shape_dispatch` belongs to that has a shaping
    /// set of its own, or `NO_ID`: the shaping walk up from a leaf visits only such nodes.
    pub shape_up: u32,
}

impl Tables {
    /// Turns every node's own shaping dispatch (`shape_dispatch`, as set by the compiler)
    /// into the effective one (its own, or the nearest ancestor's) and fills `shape_up`, given
    /// the parents (`parent(i)`; ids are breadth-first, so parents come first).
    pub(crate) fn link_shaping(&mut self, parent: impl Fn(usize) -> Option<u32>) {
        // at[i]: the nearest node at or above i with a shaping set of its own.
        let mut at = vec![NO_ID; self.hot.len()];
        for i in 0..self.hot.len() {
            at[i] = if self.hot[i].shape_dispatch != 0 {
                i as u32
            } else {
                parent(i).map_or(NO_ID, |p| at[p as usize])
            };
        }
        let own: Vec<u32> = self.hot.iter().map(|h| h.shape_dispatch).collect();
        for i in 0..self.hot.len() {
            let a = at[i];
            let (sd, up) = if a == NO_ID {
                (0, NO_ID)
            } else {
                let up = parent(a as usize).map_or(NO_ID, |p| at[p as usize]);
                (own[a as usize], up)
            };
            self.hot[i].shape_dispatch = sd;
            self.hot[i].shape_up = up;
        }
        self.nested_shaping = self.shaper_dispatch.iter().any(|&d| d != 0);
    }

    /// Stores a dispatch and returns its index (0 for an empty one).
    pub(crate) fn intern(&mut self, d: Dispatch) -> u32 {
        if d.rules() == 0 {
            return 0;
        }
        self.dispatches.push(d);
        (self.dispatches.len() - 1) as u32
    }
}

/// "No such id" in the hot per-node arrays.
pub(crate) const NO_ID: u32 = u32::MAX;

/// A compiled policy.
#[derive(Debug, Clone)]
pub struct Program {
    /// Policy name (`name:` or the file stem).
    pub name: String,
    /// The link.
    pub link: Link,
    /// The limits it was validated against.
    pub limits: Limits,
    /// Scheduling nodes and leaves, breadth-first; root first.
    pub nodes: Vec<Node>,
    /// Shaping classes.
    pub shapers: Vec<Shaper>,
    /// Leaf id → node id (indexed by [`LeafId::index`]; [`Program::leaf_node`]).
    pub leaves: Vec<NodeId>,
    /// What compiled but is likely a mistake (`small-burst`), with the files it points into;
    /// `None` when nothing is (the files' text is then not kept).
    pub warnings: Option<Warnings>,
    pub(crate) tables: Tables,
}

impl Program {
    /// Node `n`.
    ///
    /// # Panics
    /// When `n` is not one of this program's nodes.
    #[inline]
    pub fn node(&self, n: NodeId) -> &Node {
        &self.nodes[n.index()]
    }

    /// Shaping class `c`.
    ///
    /// # Panics
    /// When `c` is not one of this program's shaping classes.
    #[inline]
    pub fn shaper(&self, c: ShaperId) -> &Shaper {
        &self.shapers[c.index()]
    }

    /// The node of leaf `l`.
    ///
    /// # Panics
    /// When `l` is not one of this program's leaves.
    #[inline]
    pub fn leaf_node(&self, l: LeafId) -> NodeId {
        self.leaves[l.index()]
    }

    /// The nodes with their ids, root first.
    pub fn node_ids(&self) -> impl DoubleEndedIterator<Item = (NodeId, &Node)> + ExactSizeIterator {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (NodeId::from_index(i), n))
    }

    /// The leaves with their ids, each with its node's id.
    pub fn leaf_ids(
        &self,
    ) -> impl DoubleEndedIterator<Item = (LeafId, NodeId)> + ExactSizeIterator + '_ {
        self.leaves
            .iter()
            .enumerate()
            .map(|(i, &n)| (LeafId::from_index(i), n))
    }

    /// The shaping classes with their ids.
    pub fn shaper_ids(
        &self,
    ) -> impl DoubleEndedIterator<Item = (ShaperId, &Shaper)> + ExactSizeIterator {
        self.shapers
            .iter()
            .enumerate()
            .map(|(i, s)| (ShaperId::from_index(i), s))
    }

    /// How many shaping nodes stack above shaping class `c` on its edge, at most (0: an
    /// outermost class; nested parallel sets, docs/policy.md).
    pub fn shaping_depth(&self, c: ShaperId) -> u32 {
        self.shaper(c)
            .shaping_parents
            .iter()
            .map(|&p| 1 + self.shaping_depth(p))
            .max()
            .unwrap_or(0)
    }

    /// Per shaping class: whether a packet can pass it together with another class — a
    /// class stacked above or below it on its edge, or a class on another shaped edge of a
    /// leaf's path through it. Parallel classes of one edge (per-destination limits, one
    /// chosen per packet) do not nest with each other. The engines let a packet into a busy
    /// class's queue at admission only when the class does not nest.
    pub fn nested_shapers(&self) -> Vec<bool> {
        let mut nested = vec![false; self.shapers.len()];
        for (c, s) in self.shapers.iter().enumerate() {
            if !s.shaping_parents.is_empty() {
                nested[c] = true;
                for &p in &s.shaping_parents {
                    nested[p.index()] = true;
                }
            }
        }
        for &leaf in &self.leaves {
            let mut shaped = Vec::new();
            let mut n = Some(leaf);
            while let Some(id) = n {
                let node = self.node(id);
                if !node.shaping_parents.is_empty() {
                    shaped.push(id);
                }
                n = node.parent;
            }
            if shaped.len() > 1 {
                // Classes stacked above these are marked already (above).
                for id in shaped {
                    for &c in &self.node(id).shaping_parents {
                        nested[c.index()] = true;
                    }
                }
            }
        }
        nested
    }

    /// Whether `c` names this program's parts consistently: a leaf with its own node and
    /// known shaping classes, or a drop at a known node. A driver may bind a flow's queue to
    /// any such class, not only to what [`Program::classify`] returns (Loom §4.3: the OS
    /// binds flows to classes, and an inline metadata update may move a flow to another
    /// class); the engines accept exactly these.
    pub fn is_valid_class(&self, c: &Classification) -> bool {
        match *c {
            Classification::Leaf {
                leaf,
                node,
                shaping,
            } => {
                self.leaves.get(leaf.index()) == Some(&node)
                    && shaping
                        .as_slice()
                        .iter()
                        .all(|&s| s.index() < self.shapers.len())
            }
            Classification::Unclassified { at } => at.index() < self.nodes.len(),
        }
    }

    /// Classifies a packet with the fast tables: one dispatch per level down to a leaf, then
    /// the shaping sets on the path back up (only the nodes that have one are visited).
    /// Touches only the compact per-node array and the dispatches on the path.
    #[inline]
    pub fn classify(&self, p: &PacketMeta) -> Classification {
        let t = &self.tables;
        if let Some(m) = &t.root_match {
            if !m.matches(p) {
                return Classification::Unclassified { at: NodeId::ROOT };
            }
        }
        let words = p.words();
        // The hot arrays are indexed by the plain number.
        let mut n: u32 = 0;
        let mut hot = t.hot[0];
        while hot.leaf == NO_ID {
            let d = &t.dispatches[hot.child_dispatch as usize];
            let c = d.lookup_target(&words, p.present);
            // A miss (`NO_TARGET`, u32::MAX, never a node id) is out of range: one bounds check
            // for both.
            match t.hot.get(c as usize) {
                Some(&h) => {
                    n = c;
                    hot = h;
                }
                None => return Classification::Unclassified { at: NodeId::new(n) },
            }
        }
        Classification::Leaf {
            leaf: LeafId::new(hot.leaf),
            node: NodeId::new(n),
            shaping: self.shaping_from(hot, &words, p.present),
        }
    }

    /// The shaping classes on the path from a leaf (its hot entry) up to the root, visiting
    /// only the nodes that have a shaping set (`shape_up` links).
    #[inline]
    fn shaping_from(&self, mut hot: HotNode, words: &[u64; 8], present: u16) -> ShapingPath {
        let t = &self.tables;
        let mut shaping = ShapingPath::default();
        while hot.shape_dispatch != 0 {
            let s = t.dispatches[hot.shape_dispatch as usize].lookup_target(words, present);
            if s != NO_TARGET {
                shaping.push(ShaperId::new(s));
                if t.nested_shaping {
                    self.nested_shaping(s, words, present, &mut shaping);
                }
            }
            if hot.shape_up == NO_ID {
                break;
            }
            hot = t.hot[hot.shape_up as usize];
        }
        shaping
    }

    /// The nested shaping sets above shaping class `s`, in order (rare: a call, not more
    /// inlined code in every classification).
    #[inline(never)]
    fn nested_shaping(
        &self,
        mut s: u32,
        words: &[u64; 8],
        present: u16,
        shaping: &mut ShapingPath,
    ) {
        let t = &self.tables;
        loop {
            let up = t.shaper_dispatch[s as usize] as usize;
            if up == 0 {
                return;
            }
            match t.dispatches[up].lookup_words(words, present) {
                Some(next) => {
                    shaping.push(ShaperId::new(next));
                    s = next;
                }
                None => return,
            }
        }
    }

    /// The classification of a packet bound to leaf `leaf` whatever its fields say: that leaf,
    /// and the shaping classes on the leaf's path that match the packet (what
    /// [`Program::classify`] would give if the packet had reached that leaf). For a driver
    /// that binds or moves a flow to a class of its choosing (Loom §4.3), so that the flow
    /// is shaped by the new path's classes, not the old one's. `None` for an unknown leaf.
    pub fn classify_at(&self, leaf: LeafId, p: &PacketMeta) -> Option<Classification> {
        let node = *self.leaves.get(leaf.index())?;
        let hot = self.tables.hot[node.index()];
        Some(Classification::Leaf {
            leaf,
            node,
            shaping: self.shaping_from(hot, &p.words(), p.present),
        })
    }

    /// Classifies a batch: the same answer as [`Program::classify`] for every packet, but the
    /// packets descend the tree level by level together, so the table accesses of different
    /// packets overlap in the memory system instead of waiting one after another (the bulk
    /// lookup of DPDK's hash tables). `out` must be as long as `pkts`.
    pub fn classify_batch(&self, pkts: &[PacketMeta], out: &mut [Classification]) {
        const BATCH: usize = 16;
        assert_eq!(pkts.len(), out.len(), "classify_batch: output length");
        let t = &self.tables;
        for (chunk, outs) in pkts.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let k = chunk.len();
            let mut words = [[0u64; 8]; BATCH];
            let mut node = [0u32; BATCH];
            let mut hot = [t.hot[0]; BATCH];
            // 0: descending, 1: at a leaf, 2: unclassified at `node`.
            let mut state = [0u8; BATCH];
            for i in 0..k {
                words[i] = chunk[i].words();
                if let Some(m) = &t.root_match {
                    if !m.matches(&chunk[i]) {
                        state[i] = 2;
                    }
                }
            }
            loop {
                let mut moved = false;
                for i in 0..k {
                    if state[i] != 0 {
                        continue;
                    }
                    if hot[i].leaf != NO_ID {
                        state[i] = 1;
                        continue;
                    }
                    moved = true;
                    let d = &t.dispatches[hot[i].child_dispatch as usize];
                    match d.lookup_words(&words[i], chunk[i].present) {
                        Some(c) => {
                            node[i] = c;
                            hot[i] = t.hot[c as usize];
                        }
                        None => state[i] = 2,
                    }
                }
                if !moved {
                    break;
                }
            }
            for i in 0..k {
                outs[i] = if state[i] == 1 {
                    Classification::Leaf {
                        leaf: LeafId::new(hot[i].leaf),
                        node: NodeId::new(node[i]),
                        shaping: self.shaping_from(hot[i], &words[i], chunk[i].present),
                    }
                } else {
                    Classification::Unclassified {
                        at: NodeId::new(node[i]),
                    }
                };
            }
        }
    }

    /// Classifies a packet by scanning every node's children in order (the reference twin).
    pub fn classify_reference(&self, p: &PacketMeta) -> Classification {
        if !self.node(NodeId::ROOT).matches.matches(p) {
            return Classification::Unclassified { at: NodeId::ROOT };
        }
        let mut n = NodeId::ROOT;
        while self.node(n).leaf.is_none() {
            let mut d = ReferenceDispatch::default();
            for c in self.node(n).children {
                d.add(self.node(c).matches.clone(), c.get());
            }
            match d.lookup(p) {
                Some(c) => n = NodeId::new(c),
                None => return Classification::Unclassified { at: n },
            }
        }
        Classification::Leaf {
            leaf: self.node(n).leaf.expect("leaf"),
            node: n,
            shaping: self.shaping_reference(n, p),
        }
    }

    /// [`Program::classify_at`] by the reference walk (its twin).
    pub fn classify_at_reference(&self, leaf: LeafId, p: &PacketMeta) -> Option<Classification> {
        let node = *self.leaves.get(leaf.index())?;
        Some(Classification::Leaf {
            leaf,
            node,
            shaping: self.shaping_reference(node, p),
        })
    }

    /// The shaping classes matching `p` on the path from node `n` up, by scanning every
    /// shaping parent in order (the reference twin of `shaping_from`).
    fn shaping_reference(&self, n: NodeId, p: &PacketMeta) -> ShapingPath {
        let mut shaping = ShapingPath::default();
        let mut v = n;
        loop {
            let node = self.node(v);
            let mut cands = node.shaping_parents.clone();
            while let Some(&s) = cands.iter().find(|&&s| self.shaper(s).matches.matches(p)) {
                shaping.push(s);
                cands = self.shaper(s).shaping_parents.clone();
            }
            match node.parent {
                Some(up) => v = up,
                None => break,
            }
        }
        shaping
    }

    /// Looks a node up by name, typed in either Unicode form (names are kept composed, NFC:
    /// [`super::names::valid_name`]).
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        let name = super::parse::to_nfc(name);
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(NodeId::from_index)
    }

    /// Looks a shaping class up by name (as [`Program::node_id`] looks up a node): the id
    /// [`crate::sched::Update::Shaper`] takes.
    pub fn shaper_id(&self, name: &str) -> Option<ShaperId> {
        let name = super::parse::to_nfc(name);
        self.shapers
            .iter()
            .position(|s| s.name == name)
            .map(ShaperId::from_index)
    }

    /// Rule senic-oversubscribed (SENIC §4.2) at `node` with rates that may differ from the
    /// policy's (a live update's): when `node` is a `senic` node with `senic` children (L1
    /// classes with L2 classes below) and no `senic` parent, the sum of its children's rates
    /// (`rate_bps(child)`), if more than `capacity_bps` (its own); `None` otherwise. The
    /// policy compiler refuses such a file with [`senic_oversubscribed_message`].
    ///
    /// [`senic_oversubscribed_message`]: super::compile::senic_oversubscribed_message
    pub fn senic_oversubscribed(
        &self,
        node: NodeId,
        capacity_bps: u64,
        rate_bps: impl Fn(NodeId) -> u64,
    ) -> Option<u128> {
        let is_senic = |n: NodeId| matches!(self.node(n).algo, Algo::Senic { .. });
        let n = self.node(node);
        let two_level =
            is_senic(node) && n.children.iter().any(is_senic) && !n.parent.is_some_and(is_senic);
        let sum: u128 = n.children.iter().map(|c| rate_bps(c) as u128).sum();
        (two_level && sum > capacity_bps as u128).then_some(sum)
    }

    /// Number of scheduling nodes (not leaves).
    pub fn scheduling_nodes(&self) -> usize {
        self.nodes.len() - self.leaves.len()
    }

    /// Levels of the scheduling tree (a lone root leaf has depth 1).
    pub fn depth(&self) -> u32 {
        self.nodes.iter().map(|n| n.depth + 1).max().unwrap_or(0)
    }

    /// Path of node names from the root to `n`.
    pub fn path(&self, n: NodeId) -> Vec<&str> {
        let mut v = vec![self.node(n).name.as_str()];
        let mut cur = self.node(n).parent;
        while let Some(p) = cur {
            v.push(&self.node(p).name);
            cur = self.node(p).parent;
        }
        v.reverse();
        v
    }

    /// Approximate heap bytes of the classifier tables.
    pub fn classifier_bytes(&self) -> usize {
        let t = &self.tables;
        t.dispatches.iter().map(Dispatch::heap_bytes).sum::<usize>()
            + t.dispatches.capacity() * std::mem::size_of::<Dispatch>()
            + t.hot.len() * std::mem::size_of::<HotNode>()
            + t.shaper_dispatch.len() * 4
    }

    /// Checks the structural invariants; panics with the offending state when broken.
    pub fn check_invariants(&self) {
        let mut next_child = NodeId::new(1);
        for (i, n) in self.node_ids() {
            if let Some(p) = n.parent {
                assert!(p < i, "node {i} `{}` has parent {p} not before it", n.name);
                assert!(
                    self.node(p).children.contains(i),
                    "node {i} `{}` missing from its parent's children {:?}",
                    n.name,
                    self.node(p).children
                );
            } else {
                assert_eq!(
                    i,
                    NodeId::ROOT,
                    "only the root has no parent, but node {i} `{}`",
                    n.name
                );
            }
            if !n.children.is_empty() {
                assert_eq!(
                    n.children.start(),
                    next_child,
                    "children of `{}` do not follow the previous range",
                    n.name
                );
                next_child = n.children.end();
            }
            match (&n.algo, n.leaf) {
                (Algo::Leaf(_), Some(l)) => assert_eq!(self.leaf_node(l), i),
                (Algo::Leaf(_), None) => panic!("leaf `{}` without leaf id", n.name),
                (_, Some(_)) => panic!("non-leaf `{}` with a leaf id", n.name),
                (_, None) => assert!(!n.children.is_empty(), "`{}` has no children", n.name),
            }
        }
        assert_eq!(next_child.index(), self.nodes.len().max(1));
    }
}
