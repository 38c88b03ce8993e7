//! The fast engine: the reference engine's semantics (see the parent module and
//! [`super::reference`]) on flat, index-addressed state. Property tests
//! (`tests/engine_twins.rs`) demand identical departures and drops on random policies,
//! traces and live updates; nothing here is approximate.
//!
//! * **PIFOs** (their forms are in [`super::pifo`]). A `prio` node with up to 64 children
//!   of distinct priorities keeps a count per child and a find-first-set bitmap ([`Ffs`]);
//!   a `fifo` node one sorted queue; other nodes that rank a child's packets in push order
//!   (`prio`, `rr`, `drr`, `senic`) keep a FIFO per child (lists in one pool per
//!   node, [`ChildQueues`](super::child_queues::ChildQueues): 8 bytes a child and no buffer
//!   of its own) and a heap over the children's heads
//!   ([`PerChild`](super::pifo::PerChild)); a `wfq` node the same with a correction per
//!   child, charged once the packet a pop sends is known, while its packets are of mixed
//!   sizes ([`WfqQueues`](super::wfq_queues::WfqQueues)); a leaf whose flows are served first-come
//!   first-served keeps its packets in one sorted list linked through their slots
//!   ([`SlotList`]: 24 bytes and no buffer per leaf); `lstf`, `edf` and fair leaves keep a
//!   heap. The heaps are [`MinHeap`]s (4-ary, 32-byte entries, the 128-bit rank compared in
//!   two 64-bit halves). A node of dozens of children or more whose heads pile up (a `senic`
//!   node's classes; Loom Fig. 1's `wfq` node of 64 tenants while its packets are of one
//!   size, so that no correction moves a child's entries) moves all its entries to
//!   one calendar of rank buckets ([`Wide`](super::pifo::Wide), a
//!   [`BucketQueue`](super::buckets::BucketQueue): O(1) a push or pop, no queue per child)
//!   while it holds dozens of heads, and back when its entries thin out
//!   ([`CalendarUse`]); both forms pop in the same order. A `fifo` node's queue is a
//!   [`Ring`] (a power-of-two ring buffer whose push inlines). Re-entries from the shaping
//!   queue carry old ranks and are inserted in order (they are few, and land near the
//!   front). Ties break on the same global sequence numbers as the reference.
//! * **Packets** live in a slab of compact [`Slot`]s (the classifier's answer and the few
//!   packet fields still needed; not the packet's metadata) addressed by `u32`; their per-level
//!   ranks and SENIC tags live in two flat arenas with a fixed stride (the policy's depth).
//! * **Flows** live in a chunked arena of 48-byte [`FlowRec`]s (key, leaf, holdings,
//!   counters; a flow of a fair leaf adds a 16-byte finish tag in a side array), found
//!   through a [`FlowIndex`] (insert-only groups of eight tagged buckets, whose candidates
//!   a batch can find for all its packets before reading any record): one hash probe per
//!   enqueue and none per dequeue; none at all for a packet posted to its flow's own queue
//!   ([`Engine::enqueue_flow`]: the queue carries the record's index, Loom §4.2.1). A
//!   record stays when its flow goes idle (it holds the flow's counters), so a queue's
//!   handle stays valid, until the driver closes the flow ([`Engine::close_flow`]): the
//!   record then goes to a free list for the next new flow, its generation (carried by its
//!   queues) moves on so an old queue is refused, and its index entry stays, stale, until
//!   stale entries are half of a full index, which is then refilled with the open flows
//!   (O(1) a close, amortized). With [`super::EngineOptions::forget_idle_flows`] a flow is
//!   closed as soon as it is idle and done with (a fair leaf's once the leaf's virtual time
//!   has reached its finish tag: such flows wait in a per-leaf list, a few forgotten at
//!   each departure from the leaf). Drops per flow are counted in a sparse side map (drops
//!   are rare).
//! * **Shaping classes**: a 32-byte [`Bucket`] and an 8-byte [`ClassRt`] each; a class's
//!   queue is a PIFO per node of its packets' paths, every one a pairing heap in one shared
//!   pool ([`PairingHeaps`]), found through a hash map by `(class, node)`. The global shaping
//!   queue is a [`MinHeap`] of `(time, seq, class)` whose stale entries (a class rescheduled
//!   since) are skipped by generation; its first entry is always live. A packet that a senic group's
//!   virtual time holds back waits in that group's own heap of `(S, seq, slot)` instead
//!   (released once `V` reaches `S`, however φ moves meanwhile: see the reference).
//! * **Nodes and leaves.** What every packet reads and writes at a node (parent, algorithm,
//!   the edge parameter its parent reads, virtual time, last finish tag, SENIC backlog) is
//!   one 64-byte [`NodeRt`]; a leaf's holdings, limits and departure counters one 64-byte
//!   [`LeafRt`]; a `senic` node's system virtual time one [`SenicRt`]. Live updates change
//!   these copies (the compiled program stays as written). Node algorithms dispatch on a
//!   small `Copy` enum; what a departure updates at a node on a precomputed one
//!   ([`OnSend`]); PIFOs on an explicit tag byte.
//! * **Counters.** Departures are counted once, at the leaf ([`Engine::stats`] adds them up
//!   the tree); drops per node and per flow in sparse maps (drops are rare). What every
//!   leaf or node pays before its first packet is its records and empty queues: a `senic`
//!   class (a leaf) 168 bytes (node 64, leaf 64, its PIFO 32, the ends of its queue at the
//!   parent 8), where SENIC's hardware keeps 30.
//!
//! Invariants (checked by `debug_assert!`): a slot is in exactly one place (tree, waiting
//! list, shaping queue, a senic group's heap or free list); a flow's holdings equal the sum
//! over its held slots.
//! Limits: a flow holds at most `u32::MAX` packets and bytes at once (a packet that would
//! exceed either is dropped with [`DropReason::FlowPackets`] or [`DropReason::FlowBytes`]).
//!
//! Cost per packet: one classification, one flow-table probe, O(depth · log(children)) heap
//! work at enqueue and dequeue; no allocation once the slab, heaps and arenas have grown to
//! the peak occupancy (the shaping queue, the deferral records and each node's queues per
//! child keep their entries in one pool each, and a wide node keeps both its forms, so a
//! peak is one number to reach, not one per bucket, flow, child or switch;
//! `tests/steady_alloc.rs` counts the allocations of long runs after a warm-up: none).
//! Batches overlap their packets' cache misses: `enqueue_batch` and
//! `enqueue_flow_batch` read all their flow records before the first enqueue, and
//! [`Engine::dequeue_batch`] pops up to 16 packets' paths, then reads their records, then
//! sends them in order (exact: the pops do not depend on the sends, as long as no packet
//! waits for `outstanding` and no shaping class is busy, not even with a packet it released
//! and took the reservation back from). Hand-written (no crate provides a PIFO tree).
//!
//! Files: this one holds the records, the engine's state and its construction; `flows`
//! the flow records, `admit` admission (ranks and entries), `shaping` the shaping classes
//! and their queues, `dequeue` pops and sends, `engine` the [`Engine`] entry points.

// The module doc is written for readers of the source (`cargo doc --document-private-items`),
// so it links to private items.
#![allow(rustdoc::private_intra_doc_links)]

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};

use super::algo::leaf::flow_key_of;
use super::algo::{drr, edf, fifo, leaf, lstf, prio, rr, senic, wfq};
use super::flow_index::FlowIndex;
use super::heap::{HeapEntry, MinHeap};
use super::pairing::PairingHeaps;
pub use super::pifo::CalendarUse;
use super::pifo::{switch_for, Ffs, Pifo, Popped, SlotList};
use super::ring::Ring;
use super::shared::{meeting, Bucket, Rank, FRAC};
use super::{
    check_update, Counters, Departure, DropReason, Engine, EngineOptions, FlowQueue, Packet,
    Params, Stats, Update, UpdateError,
};
use crate::policy::program::{Algo, FlowKey, FlowSched};
use crate::policy::{Classification, LeafId, NodeId, Program, ShaperId, ShapingPath};

/// "None" for a `u32` index (node, slot, flow).
pub(super) const NO: u32 = u32::MAX;

/// Packets per stage of [`FastEngine::enqueue_staged`] (a doorbell's batch).
const STAGED: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fifo,
    Prio,
    Wfq,
    Rr,
    Drr,
    Lstf,
    Edf,
    Senic,
    Leaf,
}

/// Per node: what every packet's enqueue and dequeue read and write at that node, in one
/// record (one bounds check and one cache line per level instead of one per field).
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct NodeRt {
    /// Virtual time (wfq, rr, drr, fair leaves), bytes with FRAC fractional bits.
    vtime: u128,
    /// This node's last finish tag at its parent (wfq, rr, drr: virtual bytes; senic: ps),
    /// FRAC fractional bits.
    last: u128,
    /// The edge parameter the parent's algorithm reads: priority (`prio`), weight (`wfq`),
    /// quantum in bytes (`drr`), rate in bits/s (`senic`); 0 under other parents. A copy of
    /// `Params::edges`, refreshed on a live update.
    param: u64,
    /// The node's own parameter: `lstf`, default slack, ps; `edf`, default deadline
    /// offset, ps; a leaf, the DRR quantum of its flows, bytes (read by fair leaves, beside
    /// `vtime`); 0 otherwise.
    own: u64,
    /// Scheduling parent, or `NO` for the root.
    parent: u32,
    /// A `senic` node: its index in `FastEngine::senic`; `NO` otherwise.
    senic: u32,
    /// Under a `senic` parent: packets held below this node (its class is backlogged while
    /// this is positive).
    backlog: u32,
    kind: Kind,
    /// What a departure through this node updates (derived from `kind` and, at a leaf, its
    /// flow scheduling).
    on_send: OnSend,
    /// Under a parent kept as an [`Ffs`]: this node's position in its priority order.
    ffs_pos: u8,
}

/// [`NodeRt::on_send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnSend {
    Nothing,
    /// `vtime = max(vtime, rank)` (`wfq`, `rr`, a fair leaf).
    Vtime,
    /// `vtime = max(vtime, rank - 1)` in virtual bytes (`drr`).
    DrrVtime,
    /// SENIC: advance V, then the child's backlog (φ) drops.
    Senic,
}

/// Per `senic` node: SENIC's system virtual time and what advances it (§4).
#[derive(Debug, Clone, Copy)]
struct SenicRt {
    /// System virtual time (read at the top of a senic group), ps with FRAC fractional bits.
    v: u128,
    /// Sum of the backlogged children's rates, bits/s (φ × capacity).
    backlog_rate: u128,
    /// What `v`'s advance carries while φ > 1 (`senic::Carry`).
    carry: senic::Carry,
    /// When `v` was last advanced, ps.
    t: u64,
    /// Capacity, bits/s (a live `Rate` update changes it).
    capacity: u64,
    /// Index of the top of its group of nested senic nodes.
    top: u32,
}

/// The edge parameter a parent of `kind` reads from `edge`.
fn edge_param(kind: Kind, edge: &crate::policy::program::Edge) -> u64 {
    match kind {
        Kind::Prio => edge.priority,
        Kind::Wfq => edge.weight,
        Kind::Drr => edge.quantum_bytes,
        Kind::Senic => edge.rate_bps,
        _ => 0,
    }
}

/// Per leaf: what every enqueue and dequeue at the leaf reads and writes (holdings,
/// departures, limits), in one 64-byte record (one cache line). Packet counts are `u32`:
/// every held packet has a `u32` slot, so a leaf never holds `u32::MAX` packets, and a packet
/// limit saturated at `u32::MAX` behaves as the limit it stands for.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct LeafRt {
    /// Bytes held (tree, waiting list or shaping queue).
    held_bytes: u64,
    /// Packets sent (the leaf's counters; [`Engine::stats`] adds them up the tree).
    sent_packets: u64,
    /// Bytes sent.
    sent_bytes: u64,
    /// Bytes the leaf may hold (`u64::MAX`: no limit).
    limit_bytes: u64,
    /// Bytes one flow may hold (`u64::MAX`: no limit).
    flow_limit_bytes: u64,
    /// Packets held (tree, waiting list or shaping queue).
    held_packets: u32,
    /// Packets admitted to the tree (not waiting for `outstanding`).
    admitted: u32,
    /// Packets the leaf may hold, saturated (`u32::MAX`: no limit).
    limit_packets: u32,
    /// Packets one flow may hold, saturated (`u32::MAX`: no limit).
    flow_limit_packets: u32,
    /// Packets admitted to the tree at once, saturated (`u32::MAX`: no limit).
    outstanding: u32,
    /// How packets are grouped into flows.
    flow_key: FlowKey,
    fair: bool,
    /// A `senic` node is on the path to the root (its packets carry SENIC tags).
    senic_path: bool,
}

/// A packet limit as [`LeafRt`] keeps it: saturated at `u32::MAX`, which is also none.
fn packets_limit(limit: Option<u64>) -> u32 {
    limit.map_or(u32::MAX, |l| l.min(u32::MAX as u64) as u32)
}

impl LeafRt {
    fn new(spec: &crate::policy::LeafSpec) -> LeafRt {
        let mut l = LeafRt {
            held_bytes: 0,
            sent_packets: 0,
            sent_bytes: 0,
            limit_bytes: 0,
            flow_limit_bytes: 0,
            held_packets: 0,
            admitted: 0,
            limit_packets: 0,
            flow_limit_packets: 0,
            outstanding: 0,
            flow_key: spec.flow_key,
            fair: spec.flow_sched == FlowSched::Fair,
            senic_path: false,
        };
        l.set_limits([
            spec.limit_packets,
            spec.limit_bytes,
            spec.flow_limit_packets,
            spec.flow_limit_bytes,
            spec.outstanding,
        ]);
        l
    }

    /// Packets and bytes per leaf, per flow, outstanding (`None` = unlimited).
    fn set_limits(&mut self, limits: [Option<u64>; 5]) {
        let [p, b, fp, fb, o] = limits;
        self.limit_packets = packets_limit(p);
        self.limit_bytes = b.unwrap_or(u64::MAX);
        self.flow_limit_packets = packets_limit(fp);
        self.flow_limit_bytes = fb.unwrap_or(u64::MAX);
        self.outstanding = packets_limit(o);
    }

    /// The limit a packet of `bytes` would break, checked in the reference's order
    /// ([`super::limit_broken`]), then the flow record's own 32-bit bounds.
    #[inline]
    fn broken(&self, f: &FlowRec, bytes: u64) -> Option<DropReason> {
        let fb = f.held_bytes as u64;
        if self.held_packets >= self.limit_packets {
            Some(DropReason::LeafPackets)
        } else if self.held_bytes.saturating_add(bytes) > self.limit_bytes {
            Some(DropReason::LeafBytes)
        } else if f.held_packets >= self.flow_limit_packets {
            Some(DropReason::FlowPackets)
        } else if fb + bytes > self.flow_limit_bytes {
            Some(DropReason::FlowBytes)
        } else if f.held_packets == u32::MAX {
            Some(DropReason::FlowPackets)
        } else if fb + bytes > u32::MAX as u64 {
            Some(DropReason::FlowBytes)
        } else {
            None
        }
    }
}

/// A shaping class: its 32-byte [`Bucket`] and its queue's state (see the reference's
/// `ClassQueue`) in one 40-byte record, so a shaped packet's checks read one place; a rate
/// limiter costs 40 bytes until it first holds a packet back.
#[derive(Debug, Clone, Copy, Default)]
struct ClassRt {
    /// The token bucket.
    b: Bucket,
    /// Packets in its queue.
    held: u32,
    /// [`CLASS_OUT`] | [`CLASS_DUE`] | the generation of its shaping-queue entry
    /// ([`CLASS_GEN`] bits).
    state: u32,
}

impl ClassRt {
    /// Whether it holds packets, or has released packets not yet sent (in the tree or
    /// waiting at another class): the reference's `class_busy`.
    #[inline(always)]
    fn busy(&self) -> bool {
        self.held > 0 || self.state & CLASS_OUT != 0 || self.b.reserved()
    }
}

/// [`ClassRt::state`]: packets its queue released are in the tree, not yet popped (how many:
/// `FastEngine::class_out`).
const CLASS_OUT: u32 = 1 << 31;
/// [`ClassRt::state`]: it has a live entry in the shaping queue.
const CLASS_DUE: u32 = 1 << 30;
/// [`ClassRt::state`]: the generation of that entry.
const CLASS_GEN: u32 = CLASS_DUE - 1;

/// A held packet: what the scheduler still needs of it once classified.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The packet's id (trace row).
    id: u64,
    /// Arrival time, ps.
    enqueued_ps: u64,
    /// The packet's own deadline (`edf`), ps, when `flags` has [`HAS_DEADLINE`].
    deadline_ps: u64,
    /// The packet's own slack (`lstf`), ps, when `flags` has [`HAS_SLACK`].
    slack_ps: u64,
    /// Frame length, bytes.
    bytes: u32,
    /// Index of its flow in the flow arena.
    flow: u32,
    leaf_node: u32,
    leaf: u32,
    /// [`HAS_DEADLINE`], [`HAS_SLACK`], [`UNRANKED`], [`PARKED`], [`TAKEN_BACK`].
    flags: u8,
    /// Bit `i`: it has been released by the queue of its `i`-th shaping class, and is first
    /// in line for that class's tokens from then on (see the reference).
    passed: u8,
    /// Bit `i`: its `i`-th shaping class's queue released it and holds a reservation for it
    /// (see the reference).
    out: u8,
    /// The shaping class whose queue released it into the tree, until it is popped (`NO`:
    /// none).
    from: u32,
    /// Entries of its SENIC tags in `FastEngine::tags`.
    n_senic: u8,
}

/// [`Slot::flags`]: the packet carries a deadline.
const HAS_DEADLINE: u8 = 1;
/// [`Slot::flags`]: the packet carries a slack.
const HAS_SLACK: u8 = 2;
/// [`Slot::flags`]: it went into its class's queue at admission, and is ranked at `wfq`,
/// `rr` and `drr` nodes when the class releases it (the reference's `Held::unranked`).
const UNRANKED: u8 = 4;
/// [`Slot::flags`]: it waits in a shaping class's queue holding reservations at inner
/// classes, and is on the list `FastEngine::park_head` starts.
const PARKED: u8 = 8;
/// [`Slot::flags`]: it is in the tree, released by the class in [`Slot::from`], which took
/// its reservation back (`FastEngine::revoke`); it keeps that class busy, and counts in
/// `FastEngine::class_backlog`, until it is popped.
const TAKEN_BACK: u8 = 16;

impl Slot {
    fn deadline(&self) -> Option<u64> {
        (self.flags & HAS_DEADLINE != 0).then_some(self.deadline_ps)
    }

    fn slack(&self) -> Option<u64> {
        (self.flags & HAS_SLACK != 0).then_some(self.slack_ps)
    }
}

/// One flow: 48 bytes, kept while idle (it holds the flow's counters) until
/// [`Engine::close_flow`]; a closed record (`leaf_node` = `NO`) waits in
/// `FastEngine::free_flows` for the next new flow.
#[derive(Debug, Clone, Copy, Default)]
struct FlowRec {
    /// Flow key within its leaf (see `flow_key`).
    key: u64,
    /// Packets sent.
    sent_packets: u64,
    /// Bytes sent.
    sent_bytes: u64,
    /// Leaf node id.
    leaf_node: u32,
    /// Packets held (tree, waiting or shaping queue).
    held_packets: u32,
    /// Bytes held.
    held_bytes: u32,
    /// Flows of fair leaves: index of its finish tag in `FastEngine::fair_last`.
    fair: u32,
    /// Generation of the record's handle: counts the flows closed in it (see
    /// [`FlowQueue`]); its queues carry the generation they were opened in.
    generation: u32,
}

/// Flow records in fixed-size chunks: growth never copies, and unused capacity is at most
/// one chunk.
#[derive(Debug, Clone, Default)]
struct FlowArena {
    /// Fixed-size chunks: the index within a chunk is masked, so it needs no bounds check.
    chunks: Vec<Box<[FlowRec; CHUNK]>>,
    len: u32,
}

const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;

impl FlowArena {
    #[inline]
    fn get(&self, i: u32) -> &FlowRec {
        &self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    #[inline]
    fn get_mut(&mut self, i: u32) -> &mut FlowRec {
        &mut self.chunks[(i >> CHUNK_BITS) as usize][i as usize & (CHUNK - 1)]
    }

    /// Reads both ends of record `i` (its first and last field), so a batch's earlier pass
    /// brings in every cache line it spans: a 48-byte record crosses a line boundary for
    /// half the indices.
    #[inline(always)]
    fn touch(&self, i: u32) -> u32 {
        let r = self.get(i);
        r.key as u32 ^ r.fair
    }

    fn push(&mut self, r: FlowRec) -> u32 {
        let i = self.len;
        if i as usize & (CHUNK - 1) == 0 {
            let chunk: Box<[FlowRec; CHUNK]> = vec![FlowRec::default(); CHUNK]
                .into_boxed_slice()
                .try_into()
                .expect("CHUNK records");
            self.chunks.push(chunk);
        }
        self.len += 1;
        *self.get_mut(i) = r;
        i
    }
}

/// The priorities of a node's children.
fn prios(params: &Params, node: &crate::policy::program::Node) -> Vec<u64> {
    node.children
        .iter()
        .map(|c| params.edges[c.index()].priority)
        .collect()
}

fn flow_hash(leaf_node: u32, key: u64) -> u64 {
    let mut h = FxHasher::default();
    (leaf_node, key).hash(&mut h);
    h.finish()
}

/// Where a classified packet goes: its leaf, shaping classes and flow record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Located {
    leaf: u32,
    leaf_node: u32,
    shaping: ShapingPath,
    /// Index in the flow arena.
    flow: u32,
}

impl Located {
    /// Where a packet posted to queue `q` goes.
    #[inline(always)]
    fn of(q: &FlowQueue) -> Located {
        Located {
            leaf: q.leaf,
            leaf_node: q.node,
            shaping: q.shaping,
            flow: q.flow,
        }
    }
}

/// The fast engine.
#[derive(Debug, Clone)]
pub struct FastEngine {
    prog: Arc<Program>,
    /// Per node: parent, algorithm, edge parameter, virtual times.
    nodes: Vec<NodeRt>,
    /// Per leaf id: holdings, departures, limits.
    leaves: Vec<LeafRt>,
    /// Per leaf id, for leaves that have had packets wait for `outstanding`: the slots
    /// waiting, oldest first (kept once made, so a leaf allocates its list once).
    waiting: FxHashMap<u32, VecDeque<u32>>,
    /// Packets in all waiting lists.
    waiting_packets: usize,
    /// Per senic node (see [`NodeRt::senic`]).
    senic: Vec<SenicRt>,
    /// Ranks per packet: the longest leaf-to-root path.
    stride: usize,
    // Dynamic, per node.
    pifo: Vec<Pifo>,
    // Flows.
    flows: FlowArena,
    /// Indices into `flows`, hashed by (leaf node, flow key). An entry of a closed flow
    /// stays until the index is refilled (see [`Self::stale_entries`]): its record no longer
    /// matches the key (freed, or another flow's), so a lookup passes over it.
    flow_table: FlowIndex,
    /// Closed flows' records, to be reused (last closed first).
    free_flows: Vec<u32>,
    /// [`EngineOptions::forget_idle_flows`]: per fair leaf id, its flows that went idle
    /// before their finish tag came due, `(flow, generation)`, oldest first (see
    /// [`Self::forget_idle`]).
    idle_fair: FxHashMap<u32, VecDeque<(u32, u32)>>,
    /// Finish tags of flows in fair leaves (virtual bytes, FRAC fractional bits), indexed by
    /// `FlowRec::fair`.
    fair_last: Vec<u128>,
    /// Per leaf id: the largest finish tag a packet of a fair leaf has been given (virtual
    /// bytes, FRAC fractional bits); the leaf's virtual time moves to it when the leaf holds
    /// no packet (the end of a busy period, as in SFQ). Empty in a policy without fair
    /// leaves (a senic class, a leaf, pays nothing for it).
    fair_max: Vec<u128>,
    /// Drops per flow index, by reason.
    flow_drops: FxHashMap<u32, [u64; 5]>,
    // Packets.
    slots: Vec<Slot>,
    /// Per slot: its shaping classes (apart from the slot, which stays small to copy).
    shaping: Vec<ShapingPath>,
    /// Per slot, bit `i`: its `i`-th shaping class took its reservation back after its
    /// queue had ranked it, so its ranks at fair nodes stand when it queues there again
    /// (the reference's `Held::revoked`; apart from the slot, as rare as it is). A shaped
    /// packet's departure clears it, so a free slot's is 0.
    revoked: Vec<u8>,
    ranks: Vec<Rank>,
    /// Per slot: the next slot of its FIFO leaf's list ([`SlotList`]), `NO` if last.
    links: Vec<u32>,
    /// Per slot, its next and previous slots (`NO` at the ends) on the one list it is on:
    /// the parked list (`park_head`) while it has [`PARKED`] (in a class's queue, holding
    /// reservations at inner classes), or, while it is in the tree, its releasing class's
    /// list ([`Slot::from`], `released_head`); see `FastEngine::revoke_after`.
    park_next: Vec<u32>,
    park_prev: Vec<u32>,
    park_head: u32,
    /// Per slot, `stride` entries: (index in `senic` of a senic group's top, start tag).
    tags: Vec<(u32, u128)>,
    free: Vec<u32>,
    /// The global shaping queue: one entry per shaping class that holds packets and has
    /// none of them in the tree, `(when its first packet conforms, ps; seq; class)`, the
    /// class's generation in the entry's link. An entry whose class has moved on to a newer
    /// one is stale and skipped; the first entry is always live.
    shaping_queue: MinHeap,
    /// Per shaping class: its queue's state (beside its [`Bucket`]).
    classes: Vec<ClassRt>,
    /// The PIFOs of the shaping classes' queues, per `(class, node)`: an index into
    /// `class_roots`, made on the class's first held packet at that node and kept.
    class_pifo_of: FxHashMap<(u32, u32), u32>,
    /// Per class PIFO, its root in `class_pifos` (`NO`: empty).
    class_roots: Vec<u32>,
    /// Per class PIFO, the index of its class's PIFO at the parent node (`NO` at the root):
    /// a hold looks up only its leaf's PIFO.
    class_parents: Vec<u32>,
    /// Per class PIFO at a `wfq`, `rr` or `drr` node: the class's own virtual time there
    /// (virtual bytes, FRAC fractional bits); and per class PIFO, its node's last finish tag
    /// at the class's PIFO of the parent (see the reference's `ClassQueue`).
    class_vtime: Vec<u128>,
    class_last: Vec<u128>,
    /// Per class PIFO at a fair node: the largest cost charged there (virtual bytes, FRAC
    /// bits), how far behind `class_vtime` a backlogged leaf may start (`ClassQueue::max_cost`).
    class_max_cost: Vec<u128>,
    /// Every class PIFO's entries, in one pool.
    class_pifos: PairingHeaps,
    /// Packets in the classes' queues, plus the reservations packets hold at classes, plus
    /// the packets a class released that are still in the tree though it took their
    /// reservation back ([`TAKEN_BACK`]): zero exactly when no class is busy
    /// ([`ClassRt::busy`]: one that holds packets, has packets out or has tokens reserved),
    /// which [`Engine::dequeue_batch`] needs to pipeline its pops.
    class_backlog: usize,
    /// Bytes each packet counts for at shaping classes and fair shares beyond its frame
    /// (the link's overhead, unless the policy counts frames only).
    overhead: u32,
    /// Per senic index, at a group's top: the packets its virtual time holds back, by
    /// `(S tag, seq)` (the heap's entries carry their slots); empty elsewhere.
    senic_waiting: Vec<MinHeap>,
    /// The senic indices of the groups' tops, in node order.
    senic_tops: Vec<u32>,
    /// Packets in all of `senic_waiting`.
    senic_deferred: usize,
    /// Scratch: the popped packet's cost at each of its shaping classes, ps.
    costs: [u64; crate::policy::program::MAX_SHAPING_PER_PACKET],
    /// Scratch: (node, rank, child on the path) popped at each level of the current dequeue
    /// whose node a departure may update ([`Popped`]), root first (at most
    /// `stride` entries, written by index); [`Engine::dequeue_batch`] keeps up to `STAGED`
    /// packets' paths, `stride` entries apart.
    popped: Vec<(u32, Rank, u32)>,
    /// Scratch of [`Engine::dequeue_batch`]: the popped packets' slots and how many levels
    /// each remembered in `popped` (kept in the engine: a burst often finds only a packet or
    /// two in the tree when shaping holds the rest, and a fresh array each round cost more
    /// than their own work).
    burst: [(u32, u32); STAGED],
    seq: u64,
    held: usize,
    /// Drops per node id where they happen, by reason, for nodes that have dropped (drops
    /// are rare; departures are counted in [`LeafRt`], and [`Engine::stats`] adds both up).
    node_drops: FxHashMap<u32, [u64; 5]>,
    options: EngineOptions,
    /// Per shaping class: whether it nests with another ([`Program::nested_shapers`]).
    nested: Vec<bool>,
    /// Per shaping class: how many packets its queue released are in the tree, not yet
    /// popped ([`CLASS_OUT`] says whether any are).
    class_out: Vec<u32>,
    /// Per shaping class: how many packets of the parked list ([`PARKED`]) hold its
    /// reservation.
    class_parked: Vec<u32>,
    /// Per shaping class: the first packet its queue released that is still in the tree
    /// (`NO`: none); the `class_out` of them are linked through `park_next`.
    released_head: Vec<u32>,
    /// When a node's entries are in a calendar ([`Self::with_calendar`]).
    calendar: CalendarUse,
}

impl FastEngine {
    /// An engine for `prog`.
    pub fn new(prog: Arc<Program>) -> FastEngine {
        Self::with_options(prog, EngineOptions::default())
    }

    /// An engine for `prog` with `options`.
    pub fn with_options(prog: Arc<Program>, options: EngineOptions) -> FastEngine {
        Self::with_calendar(prog, options, CalendarUse::default())
    }

    /// Counts a drop at `node`.
    fn dropped(&mut self, node: u32, r: DropReason) {
        self.node_drops.entry(node).or_default()[r.index()] += 1;
    }

    /// Sets `node`'s edge parameter to `value` if its parent is a `kind` node (the parameter
    /// other parents read is another one).
    fn set_param(&mut self, node: u32, kind: Kind, value: u64) {
        let p = self.nodes[node as usize].parent;
        if p != NO && self.nodes[p as usize].kind == kind {
            self.nodes[node as usize].param = value;
        }
    }

    fn ffs_to_per_child(&mut self, node: u32) {
        if let Pifo::Ffs(f) = &self.pifo[node as usize] {
            let first = self.prog.nodes[node as usize].children.start().get();
            let switch = switch_for(f.at.len(), self.calendar);
            self.pifo[node as usize] = Pifo::of_per_child(f.to_per_child(first, switch));
        }
    }

    /// The packet's leaf and flow (created on first sight), or why it is dropped. `known` is
    /// the flow's arena index when the caller has already found it, else `NO`.
    #[inline(always)]
    fn locate(
        &mut self,
        pkt: &Packet,
        class: Classification,
        known: u32,
    ) -> Result<Located, DropReason> {
        match class {
            Classification::Leaf {
                leaf,
                node,
                shaping,
            } => {
                let (leaf, node) = (leaf.get(), node.get());
                let (mut flow, seen) = if known != NO {
                    (known, true)
                } else {
                    let key = flow_key_of(self.leaves[leaf as usize].flow_key, pkt);
                    self.find_flow(node, key)
                };
                // A fair flow done with but not yet forgotten (see `forget_idle`) is
                // forgotten now: its packet starts a new flow, as at once-forgetting.
                if self.options.forget_idle_flows
                    && seen
                    && self.leaves[leaf as usize].fair
                    && self.finished(flow)
                {
                    flow = self.renew_flow(flow);
                }
                Ok(Located {
                    leaf,
                    leaf_node: node,
                    shaping,
                    flow,
                })
            }
            Classification::Unclassified { at } => {
                self.dropped(at.get(), DropReason::Unclassified);
                Err(DropReason::Unclassified)
            }
        }
    }

    /// Admission checks, the slot, and admission to the tree (or the waiting list).
    #[inline(always)]
    fn enqueue_located(&mut self, pkt: &Packet, at: Located, now: u64) -> Result<(), DropReason> {
        let Located {
            leaf,
            leaf_node,
            shaping,
            flow: fi,
        } = at;
        let bytes = pkt.bytes as u64;
        let l = &mut self.leaves[leaf as usize];
        let f = self.flows.get_mut(fi);
        if let Some(r) = l.broken(f, bytes) {
            self.dropped(leaf_node, r);
            self.flow_drops.entry(fi).or_default()[r.index()] += 1;
            self.forget_if_idle(fi, leaf);
            return Err(r);
        }
        l.held_packets += 1;
        l.held_bytes += bytes;
        let waits = l.admitted >= l.outstanding;
        f.held_packets += 1;
        f.held_bytes += pkt.bytes;
        let s = Slot {
            id: pkt.id,
            enqueued_ps: now,
            deadline_ps: pkt.deadline_ps.unwrap_or(0),
            slack_ps: pkt.slack_ps.unwrap_or(0),
            bytes: pkt.bytes,
            flow: fi,
            leaf_node,
            leaf,
            passed: 0,
            out: 0,
            from: NO,
            flags: if pkt.deadline_ps.is_some() {
                HAS_DEADLINE
            } else {
                0
            } | if pkt.slack_ps.is_some() { HAS_SLACK } else { 0 },
            n_senic: 0,
        };
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = s;
                self.shaping[i as usize] = shaping;
                i
            }
            None => {
                self.slots.push(s);
                self.shaping.push(shaping);
                self.revoked.push(0);
                self.links.push(NO);
                self.park_next.push(NO);
                self.park_prev.push(NO);
                self.ranks.resize(self.slots.len() * self.stride, 0);
                self.tags.resize(self.slots.len() * self.stride, (0, 0));
                (self.slots.len() - 1) as u32
            }
        };
        self.held += 1;
        if waits {
            self.waiting.entry(leaf).or_default().push_back(slot);
            self.waiting_packets += 1;
        } else {
            self.admit_slot(slot, leaf, leaf_node, fi, pkt.bytes, now);
        }
        Ok(())
    }

    /// Pushes packet `slot`'s entry `(rank, seq)` at its leaf (`rank` is also its
    /// `ranks[slot * stride]`).
    #[inline(always)]
    fn push_slot(&mut self, leaf_node: u32, rank: Rank, seq: u64, slot: u32) {
        self.pifo[leaf_node as usize].push_slot(
            rank,
            seq,
            slot,
            &mut self.links,
            &self.ranks,
            self.stride,
        );
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

mod admit;
mod build;
mod dequeue;
mod engine;
mod flows;
mod shaping;
#[cfg(test)]
mod tests;
