//! The scheduling core: executes a compiled [`Program`](crate::policy::Program) on packets
//! (Loom §4.2, SENIC §4). Sans-IO: time is an argument in integer picoseconds; the driver owns
//! the clock and the link (it calls [`Engine::dequeue`] whenever the link can take a frame).
//!
//! Semantics, shared by every implementation:
//! * **PIFO tree** (Loom §4.1): at enqueue, every scheduling node on the packet's path computes a
//!   rank and pushes an entry for the child the packet came from; the leaf pushes the packet
//!   itself with its flow-scheduling rank. Dequeue follows the root's smallest entry down to a
//!   leaf and takes that leaf's smallest packet. Equal ranks leave in arrival order.
//! * **Shaping classes** (Loom §4.2.2, kept in order): packets are enqueued as if unshaped.
//!   A packet dequeued before its shaping class may send it (the class lacks tokens, or holds
//!   packets already) waits in that class's own queue, a PIFO tree with the policy's shape and
//!   the packets' stored ranks; the global shaping queue orders classes by when their first
//!   packet conforms and puts that one packet back into the tree. A saturated class thus
//!   gives its tokens to what the policy beneath it ranks first, while high-priority traffic
//!   outside it passes it (Loom Fig. 6 vs Fig. 8). A `senic` node's ineligible packets wait in
//!   their group's queue. Classes are charged when a packet is sent, so the shaping bound
//!   holds at the wire. Shares and classes count frame + link overhead (`link.count`).
//! * What each node type's rank means: `sched/algo/`, one file per algorithm.

pub(crate) mod algo;
mod buckets;
mod child_queues;
pub mod fast;
mod flow_index;
pub mod heads;
mod heap;
mod key_heap;
pub mod link;
mod pairing;
mod pifo;
mod pool;
mod prefetch;
pub mod reference;
mod ring;
mod shared;
mod wfq_queues;

pub use fast::{CalendarUse, FastEngine};
pub use heads::HeadEngine;
pub use reference::ReferenceEngine;

use crate::classifier::PacketMeta;
use crate::policy::{LeafId, NodeId, ShaperId};

/// The latest arrival time drivers accept, ps: 2^63, about 106.7 days. Times are 64-bit
/// picoseconds, 213.5 days in all; the second half is headroom for what is queued by then to
/// leave (a frame on a 1 bit/s shaping class takes hours), so no time a driver or engine
/// computes reaches the end of the clock. `weft replay` refuses later rows.
pub const LAST_ARRIVAL_PS: u64 = 1 << 63;

/// A packet offered to the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// The caller's id (e.g. the trace row); returned on departure.
    pub id: u64,
    /// Frame size in bytes (without the link's per-frame overhead).
    pub bytes: u32,
    /// Classifier fields.
    pub meta: PacketMeta,
    /// Host-given flow id (used when a leaf groups flows `by: flow`).
    pub flow: u64,
    /// Absolute deadline in ps (`edf`), if the host gave one.
    pub deadline_ps: Option<u64>,
    /// Slack in ps (`lstf`), if the host gave one.
    pub slack_ps: Option<u64>,
}

impl Packet {
    /// A packet with only classifier fields and a size.
    pub fn new(id: u64, bytes: u32, meta: PacketMeta) -> Packet {
        Packet {
            id,
            bytes,
            meta,
            flow: 0,
            deadline_ps: None,
            slack_ps: None,
        }
    }
}

/// Why a packet was dropped. Every accepted packet is sent once or dropped with a reason.
/// It is an error type (`Display` says why in a sentence, [`DropReason::name`] is the short
/// name of JSON and tables), so an enqueue's result goes through `?`:
///
/// ```
/// # use weft_core::sched::DropReason;
/// let e: Box<dyn std::error::Error> = DropReason::FlowBytes.into();
/// assert_eq!(e.to_string(), "dropped: its flow holds its leaf's `flow_limit.bytes` already");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum DropReason {
    /// No leaf matches the packet.
    #[error("dropped: no leaf of the policy matches the packet (unclassified)")]
    Unclassified,
    /// The leaf holds `limit.packets` packets already.
    #[error("dropped: its leaf holds `limit.packets` packets already")]
    LeafPackets,
    /// The leaf holds `limit.bytes` bytes already.
    #[error("dropped: its leaf holds `limit.bytes` already")]
    LeafBytes,
    /// The flow holds `flow_limit.packets` packets already.
    #[error("dropped: its flow holds its leaf's `flow_limit.packets` packets already")]
    FlowPackets,
    /// The flow holds `flow_limit.bytes` bytes already.
    #[error("dropped: its flow holds its leaf's `flow_limit.bytes` already")]
    FlowBytes,
}

impl DropReason {
    /// All reasons, in counter order.
    pub const ALL: [DropReason; 5] = [
        DropReason::Unclassified,
        DropReason::LeafPackets,
        DropReason::LeafBytes,
        DropReason::FlowPackets,
        DropReason::FlowBytes,
    ];

    /// Name used in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Unclassified => "unclassified",
            DropReason::LeafPackets => "leaf_packets",
            DropReason::LeafBytes => "leaf_bytes",
            DropReason::FlowPackets => "flow_packets",
            DropReason::FlowBytes => "flow_bytes",
        }
    }
}

impl DropReason {
    /// Its index in [`Counters::drops`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a leaf holds, for its admission check.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Holding {
    pub leaf_packets: u64,
    pub leaf_bytes: u64,
    pub flow_packets: u64,
    pub flow_bytes: u64,
}

/// The limit a new packet of `bytes` would break, checked in the order leaf packets, leaf
/// bytes, flow packets, flow bytes. Shared by the engines.
pub(crate) fn limit_broken(
    spec: &crate::policy::LeafSpec,
    held: Holding,
    bytes: u64,
) -> Option<DropReason> {
    if spec
        .limit_packets
        .is_some_and(|l| held.leaf_packets + 1 > l)
    {
        Some(DropReason::LeafPackets)
    } else if spec
        .limit_bytes
        .is_some_and(|l| held.leaf_bytes + bytes > l)
    {
        Some(DropReason::LeafBytes)
    } else if spec
        .flow_limit_packets
        .is_some_and(|l| held.flow_packets + 1 > l)
    {
        Some(DropReason::FlowPackets)
    } else if spec
        .flow_limit_bytes
        .is_some_and(|l| held.flow_bytes + bytes > l)
    {
        Some(DropReason::FlowBytes)
    } else {
        None
    }
}

/// A packet leaving the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    /// The caller's id.
    pub id: u64,
    /// The leaf it came from.
    pub leaf: LeafId,
    /// Its flow key within the leaf.
    pub flow: u64,
    /// Frame bytes.
    pub bytes: u32,
    /// When it was enqueued, ps.
    pub enqueued_ps: u64,
}

/// Packets, bytes and drops of one node, leaf or flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets sent.
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Drops by [`DropReason`] (indexed in `DropReason::ALL` order).
    pub drops: [u64; 5],
}

impl Counters {
    /// Total drops.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Adds `other`'s packets, bytes and drops (another engine's counters of the same node).
    pub fn add(&mut self, other: &Counters) {
        self.packets += other.packets;
        self.bytes += other.bytes;
        for (a, b) in self.drops.iter_mut().zip(other.drops) {
            *a += b;
        }
    }
}

/// A live change to the running policy (Loom §4.3's inline metadata updates). It applies to
/// packets enqueued afterwards; queued packets keep their ranks and are neither lost nor
/// reordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// A `wfq` child's weight (≥ 1).
    Weight {
        /// The child's node id.
        node: NodeId,
        /// Its new weight.
        weight: u64,
    },
    /// A `prio` child's priority.
    Priority {
        /// The child's node id.
        node: NodeId,
        /// Its new priority (smaller first).
        priority: u64,
    },
    /// A `drr` child's quantum, bytes (≥ 1).
    Quantum {
        /// The child's node id.
        node: NodeId,
        /// Its new quantum, bytes.
        bytes: u64,
    },
    /// A `senic` class's rate limit (and a `senic` node's capacity), bits per second (≥ 1).
    Rate {
        /// The class's (or node's) id.
        node: NodeId,
        /// Its new rate, bits per second.
        rate_bps: u64,
    },
    /// A shaping class's token bucket.
    Shaper {
        /// The shaping class's id.
        shaper: ShaperId,
        /// Its new rate, bits per second (≥ 1).
        rate_bps: u64,
        /// Its new bucket depth, bytes (≥ 1).
        burst_bytes: u64,
    },
    /// A leaf's limits (`None` = unlimited).
    LeafLimits {
        /// The leaf's node id.
        node: NodeId,
        /// Packets the leaf holds at most.
        limit_packets: Option<u64>,
        /// Bytes the leaf holds at most.
        limit_bytes: Option<u64>,
        /// Packets each flow of the leaf holds at most.
        flow_limit_packets: Option<u64>,
        /// Bytes each flow of the leaf holds at most.
        flow_limit_bytes: Option<u64>,
        /// Packets of the leaf in the scheduler at once, at most (Loom §4.2.3).
        outstanding: Option<u64>,
    },
}

/// Why an update was refused (the running policy is unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// No such node or shaping class: the number given (a [`NodeId`]'s or a
    /// [`ShaperId`]'s, as the update names one or the other).
    #[error("no node or shaping class {0}")]
    Unknown(u32),
    /// The node cannot take this update (e.g. limits on an inner node).
    #[error("node {node} is not a {expected}")]
    WrongKind {
        /// The node named.
        node: NodeId,
        /// What the update needs it to be.
        expected: &'static str,
    },
    /// A weight, quantum, rate, burst or limit of zero.
    #[error("{0} must be greater than zero")]
    NotPositive(&'static str),
    /// A value outside the range a policy file allows for it (the same rules as the
    /// policy's own: a live update cannot set what the file could not).
    #[error("{what} must be in {min}..={max}, as in a policy file; got {value}")]
    OutOfRange {
        /// The field.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The smallest allowed.
        min: u64,
        /// The largest allowed.
        max: u64,
    },
    /// The engine running the policy does not take this kind of update (the head engine
    /// takes only a class's bucket and a leaf's limits).
    #[error("this engine does not take {0} updates (the fast and reference engines do)")]
    NotByThisEngine(&'static str),
}

/// `value` greater than zero, or the error naming `what`.
fn positive(what: &'static str, value: u64) -> Result<(), UpdateError> {
    if value > 0 {
        Ok(())
    } else {
        Err(UpdateError::NotPositive(what))
    }
}

/// `value` in `min..=max`, or the error naming `what`.
fn in_range(what: &'static str, value: u64, min: u64, max: u64) -> Result<(), UpdateError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(UpdateError::OutOfRange {
            what,
            value,
            min,
            max,
        })
    }
}

/// Checks an update against a program without applying it: what both engines' `update`
/// refuse (a driver can check a scripted update before the run starts).
pub fn check_update(prog: &crate::policy::Program, u: &Update) -> Result<(), UpdateError> {
    let node_ok = |n: NodeId| {
        if n.index() < prog.nodes.len() {
            Ok(())
        } else {
            Err(UpdateError::Unknown(n.get()))
        }
    };
    match *u {
        Update::Weight { node, weight } => {
            node_ok(node)?;
            positive("weight", weight)?;
            in_range("weight", weight, 1, crate::policy::parse::MAX_WEIGHT)?;
        }
        Update::Priority { node, priority } => {
            node_ok(node)?;
            in_range("priority", priority, 0, u32::MAX as u64)?;
        }
        Update::Quantum { node, bytes } => {
            node_ok(node)?;
            positive("quantum", bytes)?;
        }
        Update::Rate { node, rate_bps } => {
            node_ok(node)?;
            positive("rate", rate_bps)?;
        }
        Update::Shaper {
            shaper,
            rate_bps,
            burst_bytes,
        } => {
            if shaper.index() >= prog.shapers.len() {
                return Err(UpdateError::Unknown(shaper.get()));
            }
            positive("rate", rate_bps)?;
            positive("burst", burst_bytes)?;
        }
        Update::LeafLimits {
            node,
            limit_packets,
            limit_bytes,
            flow_limit_packets,
            flow_limit_bytes,
            outstanding,
        } => {
            node_ok(node)?;
            if prog.node(node).leaf.is_none() {
                return Err(UpdateError::WrongKind {
                    node,
                    expected: "leaf",
                });
            }
            // As a policy file's `limit`, `flow_limit` and `outstanding`: a leaf whose
            // `outstanding` is 0 would hold its packets for ever.
            let packets = [
                ("limit.packets", limit_packets),
                ("flow_limit.packets", flow_limit_packets),
                ("outstanding", outstanding),
            ];
            for (what, v) in packets {
                if let Some(v) = v {
                    in_range(what, v, 1, u32::MAX as u64)?;
                }
            }
            for (what, v) in [
                ("limit.bytes", limit_bytes),
                ("flow_limit.bytes", flow_limit_bytes),
            ] {
                if let Some(v) = v {
                    positive(what, v)?;
                }
            }
        }
    }
    Ok(())
}

/// The policy parameters an engine reads at run time: the program's, changed by live
/// updates. Shared by the engines so an update means the same to both.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    /// Edge parameters, per node.
    pub edges: Vec<crate::policy::Edge>,
    /// Capacity per node, bps (a senic node's; the link rate elsewhere).
    pub capacities: Vec<u64>,
    /// Leaf parameters, per node (`None` for inner nodes).
    pub specs: Vec<Option<crate::policy::LeafSpec>>,
}

impl Params {
    pub(crate) fn new(prog: &crate::policy::Program) -> Params {
        use crate::policy::Algo;
        Params {
            edges: prog.nodes.iter().map(|n| n.edge).collect(),
            capacities: prog
                .nodes
                .iter()
                .map(|n| match n.algo {
                    Algo::Senic { capacity_bps } => capacity_bps,
                    _ => prog.link.rate_bps,
                })
                .collect(),
            specs: prog
                .nodes
                .iter()
                .map(|n| match &n.algo {
                    Algo::Leaf(l) => Some(l.clone()),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Applies the parameter part of a checked update. The engine does the rest first or
    /// after: recomputing φ at the old rate (`Rate`), its token buckets (`Shaper`), admitting
    /// waiting packets (`LeafLimits`).
    pub(crate) fn apply(&mut self, u: &Update, is_senic: bool) {
        match *u {
            Update::Weight { node, weight } => self.edges[node.index()].weight = weight,
            Update::Priority { node, priority } => self.edges[node.index()].priority = priority,
            Update::Quantum { node, bytes } => self.edges[node.index()].quantum_bytes = bytes,
            Update::Rate { node, rate_bps } => {
                if is_senic {
                    self.capacities[node.index()] = rate_bps;
                }
                self.edges[node.index()].rate_bps = rate_bps;
            }
            Update::Shaper { .. } => {}
            Update::LeafLimits {
                node,
                limit_packets,
                limit_bytes,
                flow_limit_packets,
                flow_limit_bytes,
                outstanding,
            } => {
                let spec = self.specs[node.index()].as_mut().expect("checked: a leaf");
                spec.limit_packets = limit_packets;
                spec.limit_bytes = limit_bytes;
                spec.flow_limit_packets = flow_limit_packets;
                spec.flow_limit_bytes = flow_limit_bytes;
                spec.outstanding = outstanding;
            }
        }
    }
}

/// Counters per node (leaves included). Per-flow counters live in each engine (see
/// [`Engine::flow_counters`]).
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Per node, indexed by [`NodeId::index`] ([`Stats::node`]).
    pub nodes: Vec<Counters>,
}

impl Stats {
    /// The counters of node `n`.
    ///
    /// # Panics
    /// When `n` is not a node of the engine's program.
    #[inline]
    pub fn node(&self, n: NodeId) -> &Counters {
        &self.nodes[n.index()]
    }

    pub(crate) fn new(nodes: usize) -> Stats {
        Stats {
            nodes: vec![Counters::default(); nodes],
        }
    }

    /// The counters of an engine that counts departures at its leaves only: `sent` gives
    /// `(leaf node, packets, bytes)`, `drops` each node's drops. A node's packets and bytes
    /// are its subtree's (the scheduling structure is a tree, and a parent's id is below its
    /// children's); drops stay at the node where they happened.
    pub(crate) fn from_leaves(
        prog: &crate::policy::Program,
        sent: impl IntoIterator<Item = (u32, u64, u64)>,
        drops: impl IntoIterator<Item = (u32, [u64; 5])>,
    ) -> Stats {
        let mut s = Stats::new(prog.nodes.len());
        for (v, packets, bytes) in sent {
            let c = &mut s.nodes[v as usize];
            c.packets = packets;
            c.bytes = bytes;
        }
        for (v, d) in drops {
            s.nodes[v as usize].drops = d;
        }
        for v in (1..prog.nodes.len()).rev() {
            if let Some(p) = prog.nodes[v].parent {
                let (packets, bytes) = (s.nodes[v].packets, s.nodes[v].bytes);
                let up = &mut s.nodes[p.index()];
                up.packets += packets;
                up.bytes += bytes;
            }
        }
        s
    }

    /// Counts a drop at `node`.
    pub(crate) fn dropped(&mut self, node: u32, reason: DropReason) {
        self.nodes[node as usize].drops[reason.index()] += 1;
    }

    /// Counts a departure of `bytes` on every node from its leaf to the root (`parent` walks
    /// up; each engine passes its own parent table).
    pub(crate) fn sent(&mut self, parent: impl Fn(u32) -> Option<u32>, bytes: u32, leaf_node: u32) {
        let mut v = Some(leaf_node);
        while let Some(n) = v {
            let c = &mut self.nodes[n as usize];
            c.packets += 1;
            c.bytes += bytes as u64;
            v = parent(n);
        }
    }
}

/// Engine options; both engines honour them identically (the twin tests run with each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Loom §4.2.3's "currently limited" flag for every class: at admission, a packet goes
    /// straight into the queue of the first shaping class on its path that is busy (holds
    /// packets, or has released packets not yet sent) instead of passing through the tree
    /// first. By default only a packet that passes a single class, which nests with no
    /// other ([`Program::nested_shapers`](crate::policy::Program::nested_shapers)), does
    /// so; this option extends it to nested classes, where it is known to lose the policy
    /// in some cases (docs/scheduling.md). Off by default.
    pub limited_fast_path: bool,
    /// Forget a flow, as [`Engine::close_flow`] would, as soon as it holds no packet (after
    /// a departure or a drop) and nothing it keeps changes its next packet's treatment: at
    /// once at a first-come first-served leaf; at a leaf that serves its flows fairly, once
    /// the leaf's virtual time has reached the flow's finish tag (its next packet then
    /// starts at the virtual time, as a new flow's; the virtual time passes every finish
    /// tag when the leaf empties). Memory then follows the flows with packets queued (and,
    /// at a busy fair leaf, those of about its last round), not every flow seen: for a
    /// driver that streams a trace of millions of flows through the classifying calls.
    /// Departures are unchanged; [`Engine::flow_counters`] lists only the flows remembered.
    /// Not for flow queues: [`Engine::open_flow`] panics with it. Off by default.
    pub forget_idle_flows: bool,
}

/// A flow's own queue (Loom §4.2.1: "the OS assigns each flow its own descriptor queue"),
/// opened once with [`Engine::open_flow`]: the flow's handle in the engine that opened it,
/// and the leaf and shaping classes its packets take. [`Engine::enqueue_flow`] finds the
/// flow's state by the handle, as Loom's NIC finds a queue's state by its number, instead
/// of hashing the packet's flow key and probing the flow table per packet.
///
/// A queue belongs to the engine that opened it; a handle stays valid until
/// [`Engine::close_flow`] closes it (flow records are kept while idle until then). Giving
/// an engine another engine's queue, or a closed one, is a logic error: it panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowQueue {
    /// The engine's handle of the flow.
    flow: u32,
    /// The handle's generation: a closed flow's handle may be given to a later flow, whose
    /// queue has the next generation.
    generation: u32,
    /// Leaf id.
    leaf: u32,
    /// The leaf's node id.
    node: u32,
    /// Shaping classes the flow's packets pass.
    shaping: crate::policy::ShapingPath,
}

impl FlowQueue {
    /// The queue of flow handle `flow` bound to `binding` (from [`FlowQueue::binding`]).
    pub(crate) fn new(
        flow: u32,
        generation: u32,
        (leaf, node, shaping): (u32, u32, crate::policy::ShapingPath),
    ) -> FlowQueue {
        FlowQueue {
            flow,
            generation,
            leaf,
            node,
            shaping,
        }
    }

    /// What an engine's `open_flow` needs of `class`: its leaf id, leaf node and shaping
    /// classes, or `None` when it is no leaf. (`class` must be one of `prog`'s.)
    pub(crate) fn binding(
        prog: &crate::policy::Program,
        class: crate::policy::Classification,
    ) -> Option<(u32, u32, crate::policy::ShapingPath)> {
        debug_assert!(
            prog.is_valid_class(&class),
            "open_flow: {class:?} is not a class of this program"
        );
        match class {
            crate::policy::Classification::Leaf {
                leaf,
                node,
                shaping,
            } => Some((leaf.get(), node.get(), shaping)),
            crate::policy::Classification::Unclassified { .. } => None,
        }
    }

    /// The classification the queue's packets take.
    pub fn class(&self) -> crate::policy::Classification {
        crate::policy::Classification::Leaf {
            leaf: LeafId::new(self.leaf),
            node: NodeId::new(self.node),
            shaping: self.shaping,
        }
    }

    /// The leaf id.
    pub fn leaf(&self) -> LeafId {
        LeafId::new(self.leaf)
    }

    /// Whether `other` (a queue of the same engine) is a queue of the same flow: it may
    /// differ in its shaping classes (a flow bound to other classes keeps its record), and
    /// [`Engine::close_flow`] closes both.
    pub fn same_flow(&self, other: &FlowQueue) -> bool {
        self.handle() == other.handle()
    }

    /// The flow this queue belongs to, as a map key: equal for every queue of one flow
    /// ([`Self::same_flow`]) until the flow is closed. A driver whose queues may share a
    /// flow (a leaf that keeps one flow for all its packets, `by: none`) counts its queues
    /// per handle and closes the flow when the last is done with it.
    pub fn handle(&self) -> FlowHandle {
        FlowHandle {
            flow: self.flow,
            generation: self.generation,
        }
    }
}

/// A flow's identity in the engine that opened it ([`FlowQueue::handle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowHandle {
    flow: u32,
    generation: u32,
}

/// The interface every engine implements.
pub trait Engine {
    /// The program it runs.
    fn program(&self) -> &crate::policy::Program;
    /// Offers a packet at `now_ps`; `Err` when it is dropped (and counted).
    fn enqueue(&mut self, pkt: Packet, now_ps: u64) -> Result<(), DropReason> {
        let class = self.program().classify(&pkt.meta);
        self.enqueue_classified(pkt, class, now_ps)
    }
    /// Offers a packet whose classification the driver already knows (Loom §4.3: the OS
    /// posts to a per-flow queue bound to its leaf and shaping classes, so the NIC does not
    /// classify per packet). `class` is usually what `program().classify(&pkt.meta)`
    /// returns, but may be any class of the program ([`Program::is_valid_class`]): a flow
    /// the driver moved to another leaf is enqueued there, its flow key taken as that leaf
    /// defines it. Both engines treat such a packet alike (`tests/engine_twins.rs`).
    ///
    /// [`Program::is_valid_class`]: crate::policy::Program::is_valid_class
    fn enqueue_classified(
        &mut self,
        pkt: Packet,
        class: crate::policy::Classification,
        now_ps: u64,
    ) -> Result<(), DropReason>;
    /// Offers packets arriving together at `now_ps`, appending one result per packet to
    /// `out`: the same outcome as offering them one by one in order (an engine may overlap
    /// their classification and flow lookups).
    fn enqueue_batch(
        &mut self,
        pkts: &[Packet],
        now_ps: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        for p in pkts {
            out.push(self.enqueue(*p, now_ps));
        }
    }
    /// [`Engine::enqueue_batch`] for packets the driver has classified (per-flow queues and
    /// a doorbell's batch, Loom §4.3): the same outcome as `enqueue_classified` one by one.
    fn enqueue_classified_batch(
        &mut self,
        pkts: &[(Packet, crate::policy::Classification)],
        now_ps: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        for &(p, c) in pkts {
            out.push(self.enqueue_classified(p, c, now_ps));
        }
    }
    /// Opens the queue of `pkt`'s flow at `class`'s leaf (its flow key taken as that leaf
    /// defines it), creating the flow's record on first sight: the same flow gets the same
    /// handle. `None` when `class` is no leaf (such packets are dropped as unclassified by
    /// [`Engine::enqueue_classified`]).
    fn open_flow(
        &mut self,
        pkt: &Packet,
        class: crate::policy::Classification,
    ) -> Option<FlowQueue>;
    /// Offers a packet posted to a flow's own queue: the same outcome as
    /// [`Engine::enqueue_classified`] with the queue's class, the packet counted in the
    /// queue's flow (whatever its headers say: in Loom the queue is the flow).
    fn enqueue_flow(
        &mut self,
        pkt: Packet,
        queue: &FlowQueue,
        now_ps: u64,
    ) -> Result<(), DropReason>;
    /// [`Engine::enqueue_flow`] for packets posted together (one doorbell's batch, Loom
    /// §4.3): the same outcome as offering them one by one in order.
    fn enqueue_flow_batch(
        &mut self,
        pkts: &[(Packet, FlowQueue)],
        now_ps: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        for (p, q) in pkts {
            out.push(self.enqueue_flow(*p, q, now_ps));
        }
    }
    /// The packet to transmit at `now_ps`, if any is eligible.
    fn dequeue(&mut self, now_ps: u64) -> Option<Departure>;
    /// Up to `max` packets to transmit at `now_ps`, appended to `out` in sending order; how
    /// many. The same outcome as calling [`Engine::dequeue`] `max` times at `now_ps` (and
    /// stopping at the first `None`): a software NIC that fills its transmit ring in bursts
    /// schedules a burst at one instant. An engine may overlap the bursts' memory accesses.
    fn dequeue_batch(&mut self, now_ps: u64, max: usize, out: &mut Vec<Departure>) -> usize {
        let mut sent = 0;
        while sent < max {
            let Some(d) = self.dequeue(now_ps) else { break };
            out.push(d);
            sent += 1;
        }
        sent
    }
    /// Earliest time a deferred (shaped or not yet eligible) packet may become eligible.
    fn next_wakeup(&self) -> Option<u64>;
    /// Packets held (in the tree, waiting for admission, or deferred).
    fn backlog(&self) -> usize;
    /// Applies a live update at `now_ps`. It is refused as [`check_update`] refuses it,
    /// and otherwise applies to later packets.
    ///
    /// Rule senic-oversubscribed is not judged here: in SENIC's two-level form the L1
    /// classes' rates must not add up to more than their node's capacity, but moving
    /// capacity from one class to another takes two updates at one instant, and one call
    /// sees only the first. An engine given such rates shares the node's capacity among
    /// its L1 classes in the ratio of their rates (the system time slows by the
    /// oversubscription, as in a single-level `senic` node) instead of giving each its
    /// limit. A driver that takes rates from users checks what its updates leave with
    /// [`crate::policy::Program::senic_oversubscribed`] once an instant's updates are all
    /// known, as `weft replay --update` does.
    fn update(&mut self, u: Update, now_ps: u64) -> Result<(), UpdateError>;
    /// Counters per node so far (built on each call: an engine may keep only its leaves'
    /// departures and add them up the tree here).
    fn stats(&self) -> Stats;
    /// Counters of every flow seen so far and not closed: `(leaf id, flow key, counters)`,
    /// sorted by leaf and key.
    fn flow_counters(&self) -> Vec<(LeafId, u64, Counters)>;
    /// Closes queue `q`'s flow if it holds no packet: its record (its counters among them)
    /// is forgotten and its handle may go to a later flow, so a long-running driver's
    /// memory follows its live flows, not every flow it has seen. The flow's packets stay
    /// counted at its leaf and the nodes above. Returns whether it closed; a flow still
    /// holding packets stays open (try again once they have left). The same flow opened
    /// later starts afresh, as a new flow: new counters, and in a fair leaf a finish tag
    /// from zero. Every queue of the flow is closed with it; using one afterwards panics.
    fn close_flow(&mut self, q: &FlowQueue) -> bool;
}
