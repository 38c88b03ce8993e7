//! The reference engine: the scheduling semantics of the parent module written as plainly as
//! possible — a sorted map per node as its PIFO, per-packet entries at every level, a sorted
//! map as the global shaping queue, hash maps for per-child and per-flow state. It allocates
//! freely and is slow; it is the yardstick the fast engine is checked against.
//!
//! [`Rank`]s (smaller leaves first; equal ranks in arrival order) per node type are defined
//! once for every engine, one file per algorithm under `sched/algo/` (`fifo`, `prio`,
//! `wfq`, `rr`, `drr`, `lstf`, `edf`, `senic`, `leaf`), with the arithmetic the engines
//! share. This engine restates the rest: where the entries live (a sorted map per node),
//! each `wfq` child's correction, SENIC's groups and their queues, the shaping classes.
//!
//! A packet popped before `S ≤ V` waits in its senic group's own queue, ordered by `S`, and
//! goes back into the tree once the group's `V` has reached its `S`: how soon depends on φ
//! from then on, so the wait is not fixed when the packet is popped (a real-time estimate
//! made with φ of that moment was late whenever φ fell meanwhile: when another class went
//! idle, or a live update lowered a rate). [`Engine::next_wakeup`] gives the time the
//! earliest of them becomes eligible at the current φ.
//!
//! Shaping classes are token buckets (`rate`, `burst`), checked when a packet is dequeued and
//! charged when it is actually sent, so the bytes a class sends in any window never exceed
//! `rate × window + burst` even when the tree delays a packet past its transmit time. (Loom
//! computes transmit times at enqueue; charging at enqueue lets a delayed packet and its
//! successor leave closer together than the rate allows, which the property tests caught.)
//! A popped packet that a class lacks the tokens for, or that finds the class holding packets
//! it has not released, waits in that class's queue (`ClassQueue`: a PIFO tree of its own
//! with the packets' stored ranks); the shaping queue orders classes by when their first
//! packet conforms (its released packets' reservations counted) and puts that packet back into
//! the tree.
//!
//! Virtual times carry [`FRAC`] fractional bits.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

// Keys are node ids, flow keys and slots, hashed as the fast engine hashes its own (a flow's
// key is already a hash of its 5-tuple); SipHash cost this engine a tenth of its
// instructions.
use rustc_hash::FxHashMap as HashMap;

use super::algo::leaf::flow_key;
use super::algo::{self, drr, edf, fifo, leaf, lstf, prio, rr, wfq};
use super::shared::{meeting, Bucket};
pub use super::shared::{Rank, FRAC};
mod senic;
mod shaping;

use super::{
    check_update, Counters, Departure, DropReason, Engine, EngineOptions, FlowQueue, Packet,
    Params, Stats, Update, UpdateError,
};
use crate::policy::program::{Algo, FlowSched, LeafSpec};
use crate::policy::{Classification, LeafId, NodeId, Program, ShaperId, ShapingPath};

/// A packet the engine holds.
#[derive(Debug, Clone)]
struct Held {
    pkt: Packet,
    leaf_node: u32,
    leaf: u32,
    flow: u64,
    shaping: ShapingPath,
    /// Ranks along the path, leaf first, then each ancestor up to the root.
    ranks: Vec<Rank>,
    /// Bit `i`: it has been released by the queue of its `i`-th shaping class (leaf side
    /// first), and is first in line for that class's tokens from then on.
    passed: u8,
    /// Bit `i`: its `i`-th shaping class's queue released it and holds a reservation for it
    /// ([`Bucket::reserve`]).
    out: u8,
    /// Bit `i`: its `i`-th shaping class took its reservation back
    /// (`ReferenceEngine::revoke_after`) after its queue had ranked it, so when it queues
    /// there again its ranks at fair nodes stand (it is not charged twice).
    revoked: u8,
    /// The class whose queue released it into the tree, until it is popped.
    from: Option<u32>,
    /// It went into its class's queue at admission: its ranks at `wfq`, `rr` and `drr`
    /// nodes are given when the class releases it (`ReferenceEngine::rank_on_release`).
    unranked: bool,
    /// It waits in a shaping class's queue.
    parked: bool,
    /// `(senic node, S tag)` for every senic node on the path.
    senic: Vec<(u32, u128)>,
    enqueued_ps: u64,
}

#[derive(Debug, Clone, Default)]
struct SenicState {
    /// System virtual time at `t`, ps with FRAC bits.
    v: u128,
    /// Reference time of `v`.
    t: u64,
    /// Sum of the rates of backlogged children, bps.
    backlog_rate: u128,
    /// What `v`'s advance carries while φ > 1.
    carry: algo::senic::Carry,
    /// Packets held per child.
    child_backlog: HashMap<u32, u64>,
    /// Last finish tag per child.
    last_f: HashMap<u32, u128>,
    /// At a group's top: its packets popped before they were eligible, `(S tag, seq) →
    /// slot`, each back into the tree once `v` reaches its `S`.
    waiting: BTreeMap<(u128, u64), usize>,
}

#[derive(Debug, Clone, Default)]
struct NodeState {
    /// The PIFO: (rank, arrival seq) → child node id, or held-packet slot at a leaf. Empty at
    /// a `wfq` node, which keeps [`Self::by_child`] instead.
    pifo: BTreeMap<(Rank, u64), usize>,
    /// A `wfq` node: its entries per child (see [`ChildEntries`]).
    by_child: BTreeMap<u32, ChildEntries>,
    /// A `wfq` node: each child's first entry as (corrected rank, seq, child), the least
    /// first.
    heads: BTreeSet<(Rank, u64, u32)>,
    /// Virtual time (wfq, rr, drr, fair leaves).
    vtime: u128,
    /// Last finish tag per child (or per flow at a leaf).
    last: HashMap<u64, u128>,
    /// Fair leaf: the largest finish tag given to a packet, closed flows' included.
    max_finish: u128,
    /// Fair leaf, forgetting idle flows: its idle flows that have a finish tag, by it
    /// (`(finish tag, flow)`).
    idle_by_finish: BTreeSet<(u128, u64)>,
    senic: SenicState,
    /// Leaf: packets held (in the tree, deferred, or waiting for admission).
    held_packets: u64,
    held_bytes: u64,
    /// Leaf: per-flow (packets, bytes) held.
    flows: HashMap<u64, (u64, u64)>,
    /// Leaf: packets admitted into the tree (Loom §4.2.3 `outstanding`).
    admitted: u64,
    /// Leaf: packets waiting for admission, in arrival order.
    waiting: VecDeque<usize>,
}

/// One child's entries at a `wfq` node, which charges the child for the packets that leave
/// its subtree rather than for those whose entries are popped (a child that reorders its
/// packets sends other sizes than it admitted). An entry's stored rank is its start tag
/// less the child's correction `off` at admission; its rank is `stored + off` with the
/// correction of now, so when a pop corrects a child's charge every later entry of the
/// child moves with it, in order.
#[derive(Debug, Clone, Default)]
struct ChildEntries {
    /// (stored rank, seq) → wire bytes of the packet that pushed the entry.
    entries: BTreeMap<(Rank, u64), u32>,
    /// Virtual bytes ([`FRAC`] fractional bits) to add to every stored rank: what the
    /// packets sent so far cost less what their entries were charged. Folded into the
    /// child's last finish tag when its entries run out.
    off: i128,
}

impl ChildEntries {
    /// Child `c`'s first entry as a head: (corrected rank, seq, `c`).
    fn head(&self, c: u32) -> Option<(Rank, u64, u32)> {
        let (&(r, s), _) = self.entries.first_key_value()?;
        Some((wfq::corrected(r, self.off), s, c))
    }
}

/// A shaping class's queue: the packets its tokens hold back, kept as a PIFO tree of their
/// own with the policy's shape and the ranks they were given at admission, so the class
/// hands its next token to the packet the policy beneath it ranks first. (Its levels above
/// the class's edge have one child each for the class's own packets; a driver may bind a
/// flow to any class, so the tree starts at the root.)
#[derive(Debug, Clone, Default)]
struct ClassQueue {
    /// Node → its PIFO: (rank, seq) → child node id, or held-packet slot at a leaf.
    tree: HashMap<u32, BTreeMap<(Rank, u64), usize>>,
    /// At `wfq`, `rr` and `drr` nodes the class shares by the node's weights among its own
    /// packets, on virtual time of its own: the node's tags count every packet through it,
    /// and when siblings outside the class keep it busy they run ahead of what the class
    /// sends, so a held packet's tag there says little more than when it arrived. Node →
    /// the class's virtual time there (set by the entries its queue gives out).
    vtime: HashMap<u32, u128>,
    /// Child node → its last finish tag at its parent among the class's packets.
    last: HashMap<u32, u128>,
    /// Node → the largest cost (virtual bytes, FRAC fractional bits) a packet of the
    /// class's queue has been charged there: how far behind the node's virtual time a
    /// backlogged leaf's next packet may start (see `ReferenceEngine::hold`).
    max_cost: HashMap<u32, u128>,
    /// Packets in `tree`.
    held: usize,
    /// Packets this queue released that are in the tree, not yet popped. The queue releases
    /// its next packet once the class's tokens cover it on top of all the packets it has
    /// released and not sent: a class saturated by its rate releases one packet at a time,
    /// in its queue's order; one limited by the link (its tokens to spare) passes its
    /// packets on as they come, and the nodes above it rank them as if it were unshaped.
    /// (Released one at a time, the class hid all but one of its edges from a `wfq` node
    /// above it, which then shared as if the class were one child.)
    out: u32,
    /// Its entry in the shaping queue: (when its first packet's tokens are there, seq).
    due: Option<(u64, u64)>,
}

/// The reference engine.
#[derive(Debug, Clone)]
pub struct ReferenceEngine {
    prog: Arc<Program>,
    /// Edges, capacities and leaf parameters (live updates change these, not the program).
    params: Params,
    nodes: Vec<NodeState>,
    buckets: Vec<Bucket>,
    slab: Vec<Option<Held>>,
    free: Vec<usize>,
    /// The global shaping queue: (time the class's first held packet conforms, seq) →
    /// class, one entry per class that holds packets and has none of them in the tree.
    shaping_queue: BTreeMap<(u64, u64), u32>,
    /// Per shaping class, its queue.
    classes: Vec<ClassQueue>,
    /// Bytes each packet counts for at shaping classes and fair shares: its frame plus the
    /// link's per-frame overhead, unless the policy counts frames only.
    overhead: u32,
    /// The tops of the senic groups (senic nodes whose parent is not one), in node order:
    /// where packets wait for their group's virtual time ([`SenicState::waiting`]).
    senic_tops: Vec<u32>,
    seq: u64,
    held: usize,
    /// Counters per node and flow.
    pub stats: Stats,
    /// Counters per (leaf id, flow key).
    flow_stats: HashMap<(u32, u64), Counters>,
    /// Per opened flow queue (by handle): its (leaf id, flow key).
    queues: Vec<(u32, u64)>,
    /// The handle of each opened (leaf id, flow key).
    queue_of: HashMap<(u32, u64), u32>,
    options: EngineOptions,
    /// Per shaping class: whether it nests with another ([`Program::nested_shapers`]).
    nested: Vec<bool>,
}

impl ReferenceEngine {
    /// An engine for `prog`.
    pub fn new(prog: Arc<Program>) -> ReferenceEngine {
        Self::with_options(prog, EngineOptions::default())
    }

    /// An engine for `prog` with `options`.
    pub fn with_options(prog: Arc<Program>, options: EngineOptions) -> ReferenceEngine {
        let buckets = prog
            .shapers
            .iter()
            .map(|s| Bucket::new(s.rate_bps, s.burst_bytes))
            .collect();
        let is_senic = |n: NodeId| matches!(prog.node(n).algo, Algo::Senic { .. });
        let senic_tops = prog
            .node_ids()
            .filter(|&(n, node)| is_senic(n) && !node.parent.is_some_and(is_senic))
            .map(|(n, _)| n.get())
            .collect();
        let overhead = prog.link.counted_overhead();
        let classes = vec![ClassQueue::default(); prog.shapers.len()];
        let nested = prog.nested_shapers();
        ReferenceEngine {
            nested,
            params: Params::new(&prog),
            nodes: vec![NodeState::default(); prog.nodes.len()],
            stats: Stats::new(prog.nodes.len()),
            flow_stats: HashMap::default(),
            queues: Vec::new(),
            queue_of: HashMap::default(),
            options,
            buckets,
            prog,
            slab: Vec::new(),
            free: Vec::new(),
            shaping_queue: BTreeMap::new(),
            classes,
            overhead,
            senic_tops,
            seq: 0,
            held: 0,
        }
    }

    /// With [`EngineOptions::forget_idle_flows`], after a departure or a drop of flow
    /// `flow` at leaf `leaf` (node `leaf_node`): forgets every flow of the leaf that holds
    /// no packet and whose finish tag its virtual time has reached (at a first-come
    /// first-served leaf, which keeps neither, every idle flow): nothing it keeps changes
    /// its next packet's treatment then.
    fn forget_if_idle(&mut self, leaf_node: u32, leaf: u32, flow: u64) {
        if !self.options.forget_idle_flows {
            return;
        }
        let st = &mut self.nodes[leaf_node as usize];
        // The flow itself if idle without a finish tag (a first-come first-served leaf's,
        // or a dropped first packet's), and every idle flow whose finish tag the leaf's
        // virtual time has reached (it may just have moved).
        let mut done: Vec<u64> = Vec::new();
        if !st.flows.contains_key(&flow) && !st.last.contains_key(&flow) {
            done.push(flow);
        }
        while let Some(&(l, f)) = st.idle_by_finish.first() {
            if l > st.vtime {
                break;
            }
            st.idle_by_finish.pop_first();
            done.push(f);
        }
        for f in done {
            self.forget(leaf_node, leaf, f);
        }
    }

    /// Drops everything the engine keeps of idle flow `flow` of leaf `leaf` (node
    /// `leaf_node`) but its queue handle: seen again, it starts afresh.
    fn forget(&mut self, leaf_node: u32, leaf: u32, flow: u64) {
        debug_assert!(
            !self.nodes[leaf_node as usize].flows.contains_key(&flow),
            "forget: flow {flow} of leaf {leaf} holds packets"
        );
        let st = &mut self.nodes[leaf_node as usize];
        if let Some(l) = st.last.remove(&flow) {
            st.idle_by_finish.remove(&(l, flow));
        }
        self.flow_stats.remove(&(leaf, flow));
    }

    /// Enqueues `pkt` at `(leaf, leaf node, shaping classes)` in the flow keyed `flow` there.
    fn enqueue_keyed(
        &mut self,
        pkt: Packet,
        (leaf, leaf_node, shaping): (u32, u32, ShapingPath),
        flow: u64,
        now: u64,
    ) -> Result<(), DropReason> {
        let spec = self.leaf_spec(leaf_node).clone();
        let st = &self.nodes[leaf_node as usize];
        let (fp, fb) = st.flows.get(&flow).copied().unwrap_or((0, 0));
        let bytes = pkt.bytes as u64;
        let held = super::Holding {
            leaf_packets: st.held_packets,
            leaf_bytes: st.held_bytes,
            flow_packets: fp,
            flow_bytes: fb,
        };
        let reason = super::limit_broken(&spec, held, bytes);
        if let Some(r) = reason {
            self.stats.dropped(leaf_node, r);
            self.flow_stats.entry((leaf, flow)).or_default().drops[r.index()] += 1;
            self.forget_if_idle(leaf_node, leaf, flow);
            return Err(r);
        }
        // A flow is listed once seen, departures or not (the trait's contract).
        self.flow_stats.entry((leaf, flow)).or_default();
        let st = &mut self.nodes[leaf_node as usize];
        st.held_packets += 1;
        st.held_bytes += bytes;
        // An idle flow sends again: no longer idle.
        if !st.flows.contains_key(&flow) {
            if let Some(&l) = st.last.get(&flow) {
                st.idle_by_finish.remove(&(l, flow));
            }
        }
        let f = st.flows.entry(flow).or_insert((0, 0));
        f.0 += 1;
        f.1 += bytes;
        let held = Held {
            pkt,
            leaf_node,
            leaf,
            flow,
            shaping,
            ranks: Vec::new(),
            passed: 0,
            out: 0,
            revoked: 0,
            from: None,
            unranked: false,
            parked: false,
            senic: Vec::new(),
            enqueued_ps: now,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s] = Some(held);
                s
            }
            None => {
                self.slab.push(Some(held));
                self.slab.len() - 1
            }
        };
        self.held += 1;
        let st = &mut self.nodes[leaf_node as usize];
        if spec.outstanding.is_some_and(|o| st.admitted >= o) {
            st.waiting.push_back(slot);
        } else {
            self.admit(slot, now);
        }
        Ok(())
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.prog
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Node `n`'s scheduling parent (the engine numbers nodes with plain `u32`s).
    fn parent(&self, n: u32) -> Option<u32> {
        self.prog.nodes[n as usize].parent.map(NodeId::get)
    }

    fn leaf_spec(&self, node: u32) -> &LeafSpec {
        self.params.specs[node as usize]
            .as_ref()
            .unwrap_or_else(|| panic!("node {node} is not a leaf"))
    }

    /// Admits a held packet into the tree at `now`: computes its ranks and pushes its entries.
    fn admit(&mut self, slot: usize, now: u64) {
        let held = self.slab[slot].as_ref().expect("admitting a held packet");
        let (pkt, leaf_node, flow) = (held.pkt, held.leaf_node, held.flow);
        let queued = self.admission_class(held.shaping);
        let spec = self.leaf_spec(leaf_node).clone();
        let mut ranks = Vec::new();
        // Leaf rank: flow scheduling.
        let leaf_rank = match spec.flow_sched {
            FlowSched::Fifo => fifo::rank(now),
            FlowSched::Fair => {
                let st = &mut self.nodes[leaf_node as usize];
                let last = st.last.get(&flow).copied().unwrap_or(0);
                let bytes = pkt.bytes.saturating_add(self.overhead);
                let (start, finish) =
                    leaf::fair_tags(st.vtime, last, bytes, spec.flow_quantum_bytes);
                st.last.insert(flow, finish);
                st.max_finish = st.max_finish.max(finish);
                start
            }
        };
        ranks.push(leaf_rank);
        let mut senic_tags: Vec<(u32, u128)> = Vec::new();
        // The previous senic (S, F) on the path, reused by an enclosing senic node.
        let mut inner_tags: Option<(u128, u128)> = None;
        let mut child = leaf_node;
        while let Some(n) = self.parent(child) {
            let edge = self.params.edges[child as usize];
            let algo = self.prog.nodes[n as usize].algo.clone();
            let bytes = pkt.bytes.saturating_add(self.overhead);
            let rank = match algo {
                Algo::Fifo => fifo::rank(now),
                Algo::Prio => prio::rank(edge.priority),
                // Ranked when its class releases it: see `Held::unranked`.
                Algo::Wfq | Algo::Rr | Algo::Drr if queued.is_some() => 0,
                Algo::Wfq | Algo::Rr | Algo::Drr => self.fair_rank(n, child, bytes),
                Algo::Lstf { default_slack_ps } => lstf::rank(now, pkt.slack_ps, default_slack_ps),
                Algo::Edf {
                    default_deadline_ps,
                } => edf::rank(now, pkt.deadline_ps, default_deadline_ps),
                Algo::Senic { .. } => {
                    let top = self.senic_top(n);
                    self.senic_advance(top, now);
                    let rate = edge.rate_bps.max(1);
                    // Backlog bookkeeping (φ) before tagging: the class is now active.
                    let st = &mut self.nodes[n as usize].senic;
                    let c = st.child_backlog.entry(child).or_insert(0);
                    *c += 1;
                    if *c == 1 {
                        st.backlog_rate += rate as u128;
                    }
                    let (s, f) = match inner_tags {
                        // A senic child: reuse its tags (one F order across both levels).
                        Some(tags) if self.is_senic(child) => tags,
                        _ => {
                            let eff = if n != top {
                                // Inner node (L1 class): scale its children's rates.
                                let cap = self.senic_capacity(n) as u128;
                                algo::senic::inner_rate(
                                    rate,
                                    cap,
                                    self.nodes[n as usize].senic.backlog_rate,
                                )
                            } else {
                                rate
                            };
                            let v = self.nodes[top as usize].senic.v;
                            let st = &mut self.nodes[n as usize].senic;
                            let last = st.last_f.get(&child).copied().unwrap_or(0);
                            let (s, f) = algo::senic::tags(v, last, bytes, eff);
                            st.last_f.insert(child, f);
                            (s, f)
                        }
                    };
                    if !(self.is_senic(child) && inner_tags.is_some()) {
                        // Tags computed here are checked for eligibility; reused inner tags
                        // were pushed by the inner node already.
                        senic_tags.push((n, s));
                    }
                    inner_tags = Some((s, f));
                    f
                }
                Algo::Leaf(_) => unreachable!("a leaf is never a parent"),
            };
            if !matches!(algo, Algo::Senic { .. }) {
                inner_tags = None;
            }
            ranks.push(rank);
            child = n;
        }
        let held = self.slab[slot].as_mut().expect("held");
        held.ranks = ranks;
        held.senic = senic_tags;
        held.unranked = queued.is_some();
        let shaping = held.shaping;
        self.nodes[leaf_node as usize].admitted += 1;
        // Into the tree, or straight into the queue of a busy class (Loom's "currently
        // limited" fast path).
        match queued {
            Some(i) => {
                let again = self.reserve_inner(slot, i);
                self.hold(slot, shaping.as_slice()[i].get(), now);
                self.schedule_positions(slot, again, now);
            }
            None => self.push_entries(slot),
        }
    }

    /// A `wfq`, `rr` or `drr` node `n`'s rank for a packet of `bytes` from child `child`,
    /// charging the child for it.
    fn fair_rank(&mut self, n: u32, child: u32, bytes: u32) -> Rank {
        let edge = self.params.edges[child as usize];
        let algo = self.prog.nodes[n as usize].algo.clone();
        let st = &mut self.nodes[n as usize];
        let last = st.last.get(&(child as u64)).copied().unwrap_or(0);
        match algo {
            Algo::Wfq => {
                let off = st.by_child.get(&child).map_or(0, |q| q.off);
                let (start, finish) = wfq::tags(st.vtime, last, off, bytes, edge.weight);
                st.last.insert(child as u64, finish);
                start
            }
            Algo::Rr => {
                let (start, finish) = rr::tags(st.vtime, last);
                st.last.insert(child as u64, finish);
                start
            }
            Algo::Drr => {
                let (round, finish) = drr::tags(st.vtime, last, bytes, edge.quantum_bytes);
                st.last.insert(child as u64, finish);
                round
            }
            _ => unreachable!("fair_rank at a {algo:?} node"),
        }
    }

    /// Pushes a held packet's entries (with its stored ranks) into the tree.
    fn push_entries(&mut self, slot: usize) {
        let held = self.slab[slot].as_ref().expect("held");
        let ranks = held.ranks.clone();
        let leaf_node = held.leaf_node;
        let bytes = held.pkt.bytes.saturating_add(self.overhead);
        let seq = self.next_seq();
        self.nodes[leaf_node as usize]
            .pifo
            .insert((ranks[0], seq), slot);
        let mut child = leaf_node;
        let mut i = 1;
        while let Some(n) = self.parent(child) {
            let st = &mut self.nodes[n as usize];
            if self.prog.nodes[n as usize].algo == Algo::Wfq {
                let q = st.by_child.entry(child).or_default();
                let old = q.head(child);
                q.entries.insert((ranks[i], seq), bytes);
                let new = q.head(child);
                if new != old {
                    old.map(|h| st.heads.remove(&h));
                    st.heads.extend(new);
                }
            } else {
                st.pifo.insert((ranks[i], seq), child as usize);
            }
            child = n;
            i += 1;
        }
    }

    /// Pops a `wfq` node's first entry: the child whose first entry's corrected rank (then
    /// sequence number) is least, that rank, and the wire bytes its entry was charged.
    fn pop_wfq(&mut self, n: u32) -> Option<(u32, Rank, u32)> {
        let st = &mut self.nodes[n as usize];
        let (rank, _, c) = st.heads.pop_first()?;
        let q = st.by_child.get_mut(&c).expect("a head's child");
        let (_, bytes) = q.entries.pop_first().expect("a head's entry");
        st.heads.extend(q.head(c));
        Some((c, rank, bytes))
    }

    /// After a pop at `wfq` node `n` took child `c`'s entry charged `charged` bytes, and the
    /// packet that left the child's subtree has `sent` wire bytes: the child's later entries
    /// move by the difference. When it has none left, the correction goes into its last
    /// finish tag.
    fn correct_wfq(&mut self, n: u32, c: u32, charged: u32, sent: u32) {
        let w = self.params.edges[c as usize].weight;
        let st = &mut self.nodes[n as usize];
        let q = st.by_child.get_mut(&c).expect("a child just popped");
        let old = q.head(c);
        q.off += wfq::cost(sent, w) as i128 - wfq::cost(charged, w) as i128;
        if let Some(h) = old {
            st.heads.remove(&h);
            st.heads.extend(q.head(c));
        }
        if q.entries.is_empty() {
            let off = std::mem::take(&mut q.off);
            let last = st.last.entry(c as u64).or_insert(0);
            *last = wfq::corrected(*last, off);
        }
    }

    /// Sends the popped packet in `slot` (its classes already charged): `popped` is the
    /// rank popped at each node of its path, root first.
    fn send(&mut self, slot: usize, popped: &[(u32, Rank)], now: u64) -> Departure {
        let held = self.slab[slot].take().expect("held");
        self.free.push(slot);
        self.held -= 1;
        for &(n, rank) in popped {
            let is_leaf = self.prog.nodes[n as usize].leaf.is_some();
            let st = &mut self.nodes[n as usize];
            match &self.prog.nodes[n as usize].algo {
                Algo::Wfq | Algo::Rr => st.vtime = st.vtime.max(rank),
                // A drr rank is the round a packet is served in; V is that round's start.
                Algo::Drr => st.vtime = drr::sent(st.vtime, rank),
                Algo::Leaf(l) if is_leaf && l.flow_sched == FlowSched::Fair => {
                    st.vtime = st.vtime.max(rank)
                }
                _ => {}
            }
        }
        // Senic backlog (φ) bookkeeping.
        let mut child = held.leaf_node;
        while let Some(n) = self.parent(child) {
            if self.is_senic(n) {
                let top = self.senic_top(n);
                self.senic_advance(top, now);
                let rate = self.params.edges[child as usize].rate_bps.max(1) as u128;
                let st = &mut self.nodes[n as usize].senic;
                let c = st.child_backlog.entry(child).or_insert(1);
                *c -= 1;
                if *c == 0 {
                    st.backlog_rate -= rate;
                }
            }
            child = n;
        }
        // Leaf accounting and admission of the next waiting packet.
        let bytes = held.pkt.bytes as u64;
        let st = &mut self.nodes[held.leaf_node as usize];
        st.held_packets -= 1;
        st.held_bytes -= bytes;
        st.admitted -= 1;
        // The end of a fair leaf's busy period: its virtual time moves to the largest
        // finish tag given (SFQ's rule for an idle server); every flow starts afresh.
        if st.held_packets == 0 {
            st.vtime = st.vtime.max(st.max_finish);
        }
        if let Some(f) = st.flows.get_mut(&held.flow) {
            f.0 -= 1;
            f.1 -= bytes;
            if f.0 == 0 {
                st.flows.remove(&held.flow);
                // Idle: forgotten once the virtual time reaches its finish tag.
                if self.options.forget_idle_flows {
                    if let Some(&l) = st.last.get(&held.flow) {
                        st.idle_by_finish.insert((l, held.flow));
                    }
                }
            }
        }
        if let Some(next) = st.waiting.pop_front() {
            self.admit(next, now);
        }
        let d = Departure {
            id: held.pkt.id,
            leaf: LeafId::new(held.leaf),
            flow: held.flow,
            bytes: held.pkt.bytes,
            enqueued_ps: held.enqueued_ps,
        };
        let prog = &self.prog;
        self.stats.sent(
            |n| prog.nodes[n as usize].parent.map(NodeId::get),
            d.bytes,
            held.leaf_node,
        );
        let fc = self.flow_stats.entry((held.leaf, d.flow)).or_default();
        fc.packets += 1;
        fc.bytes += d.bytes as u64;
        self.forget_if_idle(held.leaf_node, held.leaf, held.flow);
        d
    }

    /// Pops the PIFO path from the root: returns the slot of the leaf's smallest packet and
    /// the rank popped at each node on the way.
    fn pop_path(&mut self) -> Option<(usize, Vec<(u32, Rank)>)> {
        #[cfg(test)]
        crate::steps::count();
        let mut popped = Vec::new();
        // `wfq` levels: (node, child, bytes charged), corrected once the packet is known.
        let mut charged = Vec::new();
        let mut n: u32 = 0;
        loop {
            let (rank, v) = if self.prog.nodes[n as usize].algo == Algo::Wfq {
                let (c, rank, bytes) = self.pop_wfq(n)?;
                charged.push((n, c, bytes));
                (rank, c as usize)
            } else {
                let ((rank, _), v) = self.nodes[n as usize].pifo.pop_first()?;
                (rank, v)
            };
            popped.push((n, rank));
            if self.prog.nodes[n as usize].leaf.is_some() {
                let h = self.slab[v].as_ref().expect("popped a held packet");
                let sent = h.pkt.bytes.saturating_add(self.overhead);
                for (n, c, bytes) in charged {
                    self.correct_wfq(n, c, bytes, sent);
                }
                return Some((v, popped));
            }
            n = v as u32;
        }
    }
}

impl Engine for ReferenceEngine {
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
            Classification::Leaf {
                leaf,
                node,
                shaping,
            } => {
                let flow = flow_key(self.leaf_spec(node.get()), &pkt);
                self.enqueue_keyed(pkt, (leaf.get(), node.get(), shaping), flow, now)
            }
            Classification::Unclassified { at } => {
                self.stats.dropped(at.get(), DropReason::Unclassified);
                Err(DropReason::Unclassified)
            }
        }
    }

    fn open_flow(&mut self, pkt: &Packet, class: Classification) -> Option<FlowQueue> {
        assert!(
            !self.options.forget_idle_flows,
            "open_flow: an engine that forgets idle flows has no flow queues"
        );
        let binding @ (leaf, node, _) = FlowQueue::binding(&self.prog, class)?;
        let key = (leaf, flow_key(self.leaf_spec(node), pkt));
        let next = self.queues.len() as u32;
        let flow = *self.queue_of.entry(key).or_insert(next);
        if flow == next {
            self.queues.push(key);
            // An opened flow is listed from now on, as the fast engine lists its record.
            self.flow_stats.entry(key).or_default();
        }
        // Handles are never reused here, so every queue is of generation 0.
        Some(FlowQueue::new(flow, 0, binding))
    }

    fn close_flow(&mut self, q: &FlowQueue) -> bool {
        let Some(&(leaf, key)) = self.queues.get(q.flow as usize).filter(|o| o.0 == q.leaf) else {
            panic!("close_flow: queue {q:?} was not opened by this engine, or is closed");
        };
        if self.nodes[q.node as usize].flows.contains_key(&key) {
            return false;
        }
        self.forget(q.node, leaf, key);
        self.queue_of.remove(&(leaf, key));
        self.queues[q.flow as usize] = (u32::MAX, 0);
        true
    }

    fn enqueue_flow(&mut self, pkt: Packet, q: &FlowQueue, now: u64) -> Result<(), DropReason> {
        let Some(&(_, key)) = self.queues.get(q.flow as usize).filter(|o| o.0 == q.leaf) else {
            panic!("enqueue_flow: queue {q:?} was not opened by this engine");
        };
        self.enqueue_keyed(pkt, (q.leaf, q.node, q.shaping), key, now)
    }

    fn dequeue(&mut self, now: u64) -> Option<Departure> {
        loop {
            // Every time round: a packet held back below may have left its class's next
            // packet due at once.
            self.release_due(now);
            let (slot, popped) = self.pop_path()?;
            let held = self.slab[slot].as_mut().expect("popped a held packet");
            // Out of the tree: its releasing class may give out its next packet.
            let from = held.from.take();
            if let Some(c) = from {
                self.classes[c as usize].out -= 1;
            }
            let held = self.slab[slot].as_ref().expect("popped a held packet");
            let (senic, shaping, out) = (held.senic.clone(), held.shaping, held.out);
            let bytes = held.pkt.bytes.saturating_add(self.overhead);
            // The classes it is out for (positions on its path).
            let released = (0..shaping.as_slice().len()).filter(move |&i| out & (1 << i) != 0);
            // A senic group's virtual time first; shaping is checked when it is back.
            let senic_bind = if senic.is_empty() {
                None
            } else {
                self.senic_binding(&senic, now)
            };
            if let Some((top, s, _)) = senic_bind {
                self.defer_senic(slot, top, s);
                if let Some(c) = from {
                    self.schedule(c, now);
                }
            } else if let Some(i) = self.holding_class(slot, now) {
                let c = shaping.as_slice()[i].get();
                // Its reservations go back at `c` and at every class not inner to `c`.
                let mut again = 0u8;
                for j in released {
                    let x = shaping.as_slice()[j].get();
                    if x == c || !self.inner(x, c) {
                        self.slab[slot].as_mut().expect("held").out &= !(1 << j);
                        let b = &mut self.buckets[x as usize];
                        b.unreserve(bytes);
                        again |= 1 << j;
                    }
                }
                if let Some(f) = from {
                    again |= 1
                        << shaping
                            .as_slice()
                            .iter()
                            .position(|&y| y.get() == f)
                            .expect("on its path");
                }
                again |= self.reserve_inner(slot, i);
                again &= !(1 << i);
                self.hold(slot, c, now);
                // Then those classes' next packets (and its releasing class's).
                self.schedule_positions(slot, again, now);
            } else {
                // Send it: no class's packet out any more; charge its classes now.
                for j in released {
                    let b = &mut self.buckets[shaping.as_slice()[j].index()];
                    b.unreserve(bytes);
                }
                self.slab[slot].as_mut().expect("held").out = 0;
                for &c in shaping.as_slice() {
                    self.buckets[c.index()].charge(bytes, now);
                    self.schedule(c.get(), now);
                }
                return Some(self.send(slot, &popped, now));
            }
        }
    }

    fn next_wakeup(&self) -> Option<u64> {
        let shaping = self.shaping_queue.keys().next().map(|&(t, _)| t);
        let senic = self.senic_tops.iter().filter_map(|&top| {
            let st = &self.nodes[top as usize].senic;
            let &(s, _) = st.waiting.keys().next()?;
            let cap = self.senic_capacity(top) as u128;
            Some(if s <= st.v {
                st.t
            } else {
                st.t.saturating_add(algo::senic::wait_ps(s, st.v, cap, st.backlog_rate))
            })
        });
        shaping.into_iter().chain(senic).min()
    }

    fn backlog(&self) -> usize {
        self.held
    }

    fn update(&mut self, u: Update, now: u64) -> Result<(), UpdateError> {
        check_update(&self.prog, &u)?;
        if let Update::Rate { node, rate_bps } = u {
            let node = node.get();
            // A backlogged senic class changes φ: advance V at the old rates first.
            if let Some(p) = self.parent(node) {
                if self.is_senic(p) {
                    let top = self.senic_top(p);
                    self.senic_advance(top, now);
                    let old = self.params.edges[node as usize].rate_bps.max(1) as u128;
                    let st = &mut self.nodes[p as usize].senic;
                    if st.child_backlog.get(&node).copied().unwrap_or(0) > 0 {
                        st.backlog_rate = st.backlog_rate - old + rate_bps as u128;
                    }
                }
            }
            if self.is_senic(node) {
                let top = self.senic_top(node);
                self.senic_advance(top, now);
            }
        }
        let senic = matches!(u, Update::Rate { node, .. } if self.is_senic(node.get()));
        self.params.apply(&u, senic);
        match u {
            Update::Shaper {
                shaper,
                rate_bps,
                burst_bytes,
            } => {
                self.buckets[shaper.index()].reconfigure(rate_bps, burst_bytes, now);
                self.schedule(shaper.get(), now);
            }
            Update::LeafLimits {
                node, outstanding, ..
            } => {
                // A raised `outstanding` admits waiting packets now.
                while outstanding.is_none_or(|o| self.nodes[node.index()].admitted < o) {
                    let Some(next) = self.nodes[node.index()].waiting.pop_front() else {
                        break;
                    };
                    self.admit(next, now);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        self.stats.clone()
    }

    fn flow_counters(&self) -> Vec<(LeafId, u64, Counters)> {
        let mut v: Vec<_> = self
            .flow_stats
            .iter()
            .map(|(&(l, k), &c)| (LeafId::new(l), k, c))
            .collect();
        v.sort_unstable_by_key(|&(l, k, _)| (l, k));
        v
    }
}
