//! The fast engine, first cut: the reference engine's semantics (see the parent module and
//! [`super::reference`]) on flat, index-addressed state.
//!
//! * Per-node PIFOs are binary heaps of `(rank, seq, payload)`; the shaping queue is one heap
//!   of `(time, seq, slot)`. Ties break on the same global sequence numbers as the reference,
//!   so departures are identical (property tests check it on random policies and traces).
//! * Packets live in a slab addressed by `u32` slots; their per-level ranks and SENIC tags
//!   live in two flat arenas with a fixed stride (the policy's depth): no allocation per
//!   packet once the slab and heaps have grown to the peak occupancy.
//! * Per-child state (`last` finish tags, SENIC backlog and finish tags) is a flat array
//!   indexed by the child's node id: every node has exactly one scheduling parent.
//! * Node algorithms dispatch on a small `Copy` enum.
//!
//! Cost: O(depth · log(entries per node)) per packet. Still to come (issue 3): bucketed
//! (FFS) PIFOs and a timing wheel for the shaping queue.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::reference::{flow_key, wire_ps_frac, Bucket, Rank, FRAC};
use super::{
    check_update, Departure, DropReason, Engine, Packet, Params, Stats, Update, UpdateError,
};
use crate::policy::program::{Algo, FlowSched};
use crate::policy::{Classification, Program, ShapingPath};

const NO: u32 = u32::MAX;

/// A node's PIFO.
#[derive(Debug, Clone)]
enum Pifo {
    /// Every entry in one heap (leaves, `lstf`, `edf`: ranks not ordered per child).
    Heap(BinaryHeap<Reverse<(Rank, u64, u32)>>),
    /// A queue per child, sorted by (rank, seq), and a heap over the queues' heads.
    PerChild(PerChild),
}

#[derive(Debug, Clone)]
struct PerChild {
    /// Node id of the first child (children are contiguous).
    first: u32,
    queues: Vec<VecDeque<(Rank, u64)>>,
    /// Heads, possibly stale: an item is live when it equals its queue's front.
    heads: BinaryHeap<Reverse<(Rank, u64, u32)>>,
}

impl Pifo {
    #[inline]
    fn push(&mut self, rank: Rank, seq: u64, v: u32) {
        match self {
            Pifo::Heap(h) => h.push(Reverse((rank, seq, v))),
            Pifo::PerChild(pc) => {
                let q = &mut pc.queues[(v - pc.first) as usize];
                match q.back() {
                    None => {
                        q.push_back((rank, seq));
                        pc.heads.push(Reverse((rank, seq, v)));
                    }
                    Some(&last) if (rank, seq) > last => q.push_back((rank, seq)),
                    Some(_) => {
                        // A re-entered packet (old rank): insert in order.
                        let at = q.partition_point(|&e| e < (rank, seq));
                        q.insert(at, (rank, seq));
                        if at == 0 {
                            pc.heads.push(Reverse((rank, seq, v)));
                        }
                    }
                }
            }
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<(Rank, u32)> {
        match self {
            Pifo::Heap(h) => h.pop().map(|Reverse((r, _, v))| (r, v)),
            Pifo::PerChild(pc) => loop {
                let Reverse((rank, seq, v)) = pc.heads.pop()?;
                let q = &mut pc.queues[(v - pc.first) as usize];
                if q.front() != Some(&(rank, seq)) {
                    continue; // stale head
                }
                q.pop_front();
                if let Some(&(r2, s2)) = q.front() {
                    pc.heads.push(Reverse((r2, s2, v)));
                }
                return Some((rank, v));
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fifo,
    Prio,
    Wfq,
    Rr,
    Drr,
    Lstf(u64),
    Edf(u64),
    Senic,
    Leaf,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    pkt: Packet,
    leaf_node: u32,
    leaf: u32,
    flow: u64,
    shaping: ShapingPath,
    enqueued_ps: u64,
    /// Position in its flow (arrival order).
    fseq: u64,
    /// Has been through the shaping queue (see the reference).
    was_deferred: bool,
    n_senic: u8,
}

/// The fast engine.
#[derive(Debug, Clone)]
pub struct FastEngine {
    prog: Arc<Program>,
    // Static, per node.
    parent: Vec<u32>,
    kind: Vec<Kind>,
    senic_top: Vec<u32>,
    /// Edges, capacities and leaf parameters (live updates change these).
    params: Params,
    /// Ranks per packet: the longest leaf-to-root path.
    stride: usize,
    // Dynamic, per node.
    pifo: Vec<Pifo>,
    vtime: Vec<u128>,
    /// Per child node: last finish tag at its parent (wfq, rr, drr).
    last: Vec<u128>,
    senic_v: Vec<u128>,
    senic_t: Vec<u64>,
    backlog_rate: Vec<u128>,
    /// Per child node: packets held below its senic parent, and its last finish tag there.
    child_backlog: Vec<u64>,
    last_f: Vec<u128>,
    held_packets: Vec<u64>,
    held_bytes: Vec<u64>,
    admitted: Vec<u64>,
    waiting: Vec<VecDeque<u32>>,
    /// Per (leaf node, flow) holding packets: (packets, bytes). Removed when empty, so idle
    /// flows cost only their fair-queuing tag and sequence number below.
    flow_held: FxHashMap<(u32, u64), (u64, u64)>,
    /// Per (leaf node, flow) of a fair leaf: its last finish tag.
    flow_last: FxHashMap<(u32, u64), u128>,
    /// Per (leaf node, flow): sequence number of its latest packet.
    flow_seq: FxHashMap<(u32, u64), u64>,
    // Packets.
    slots: Vec<Slot>,
    ranks: Vec<Rank>,
    tags: Vec<(u32, u128)>,
    free: Vec<u32>,
    shaping_queue: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// Per (leaf, flow) in the shaping queue: (how many, latest release) (see the reference).
    deferred: FxHashMap<(u32, u64), std::collections::BTreeMap<u64, u64>>,
    buckets: Vec<Bucket>,
    /// Scratch: the (node, rank) popped at each level of the current dequeue.
    popped: Vec<(u32, Rank)>,
    seq: u64,
    held: usize,
    /// Counters per node and flow.
    pub stats: Stats,
}

impl FastEngine {
    /// An engine for `prog`.
    pub fn new(prog: Arc<Program>) -> FastEngine {
        let n = prog.nodes.len();
        let kind: Vec<Kind> = prog
            .nodes
            .iter()
            .map(|node| match node.algo {
                Algo::Fifo => Kind::Fifo,
                Algo::Prio => Kind::Prio,
                Algo::Wfq => Kind::Wfq,
                Algo::Rr => Kind::Rr,
                Algo::Drr => Kind::Drr,
                Algo::Lstf { default_slack_ps } => Kind::Lstf(default_slack_ps),
                Algo::Edf {
                    default_deadline_ps,
                } => Kind::Edf(default_deadline_ps),
                Algo::Senic { .. } => Kind::Senic,
                Algo::Leaf(_) => Kind::Leaf,
            })
            .collect();
        let parent: Vec<u32> = prog.nodes.iter().map(|x| x.parent.unwrap_or(NO)).collect();
        let mut senic_top = vec![NO; n];
        for v in 0..n {
            if kind[v] == Kind::Senic {
                let mut t = v as u32;
                while parent[t as usize] != NO && kind[parent[t as usize] as usize] == Kind::Senic {
                    t = parent[t as usize];
                }
                senic_top[v] = t;
            }
        }
        let stride = prog.depth().max(1) as usize;
        FastEngine {
            params: Params::new(&prog),
            buckets: prog
                .shapers
                .iter()
                .map(|s| Bucket::new(s.rate_bps, s.burst_bytes))
                .collect(),
            kind,
            parent,
            senic_top,
            stride,
            pifo: prog
                .nodes
                .iter()
                .map(|x| match x.algo {
                    // Ranks a child's packets in push order except on re-entry: a FIFO per
                    // child and a heap over the children's heads.
                    Algo::Fifo
                    | Algo::Prio
                    | Algo::Wfq
                    | Algo::Rr
                    | Algo::Drr
                    | Algo::Senic { .. } => Pifo::PerChild(PerChild {
                        first: x.children.start,
                        queues: vec![VecDeque::new(); x.children.len()],
                        heads: BinaryHeap::new(),
                    }),
                    _ => Pifo::Heap(BinaryHeap::new()),
                })
                .collect(),
            vtime: vec![0; n],
            last: vec![0; n],
            senic_v: vec![0; n],
            senic_t: vec![0; n],
            backlog_rate: vec![0; n],
            child_backlog: vec![0; n],
            last_f: vec![0; n],
            held_packets: vec![0; n],
            held_bytes: vec![0; n],
            admitted: vec![0; n],
            waiting: vec![VecDeque::new(); n],
            flow_held: FxHashMap::default(),
            flow_last: FxHashMap::default(),
            flow_seq: FxHashMap::default(),
            slots: Vec::new(),
            ranks: Vec::new(),
            tags: Vec::new(),
            free: Vec::new(),
            shaping_queue: BinaryHeap::new(),
            deferred: FxHashMap::default(),
            popped: Vec::with_capacity(stride),
            seq: 0,
            held: 0,
            stats: Stats::new(n),
            prog,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn senic_advance(&mut self, top: u32, now: u64) {
        let t = top as usize;
        if now > self.senic_t[t] {
            let cap = self.params.capacities[t] as u128;
            let dt = ((now - self.senic_t[t]) as u128) << FRAC;
            self.senic_v[t] += dt * cap / cap.max(self.backlog_rate[t]);
            self.senic_t[t] = now;
        }
    }

    fn admit(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let base = slot as usize * self.stride;
        let spec_fair = self.params.specs[s.leaf_node as usize]
            .as_ref()
            .map(|l| (l.flow_sched, l.flow_quantum_bytes))
            .expect("leaf");
        let pkt = s.pkt;
        let leaf_rank = match spec_fair.0 {
            FlowSched::Fifo => now as u128,
            FlowSched::Fair => {
                let last = self.flow_last.entry((s.leaf_node, s.flow)).or_default();
                let start = self.vtime[s.leaf_node as usize].max(*last);
                *last = start + ((pkt.bytes as u128) << FRAC) / spec_fair.1.max(1) as u128;
                start
            }
        };
        self.ranks[base] = leaf_rank;
        let mut level = 1;
        let mut n_senic = 0usize;
        let mut inner: Option<(u128, u128)> = None;
        let mut child = s.leaf_node;
        while self.parent[child as usize] != NO {
            let n = self.parent[child as usize];
            let nu = n as usize;
            let cu = child as usize;
            let edge = self.params.edges[cu];
            let kind = self.kind[nu];
            let rank = match kind {
                Kind::Fifo => now as u128,
                Kind::Prio => edge.priority as u128,
                Kind::Wfq | Kind::Rr | Kind::Drr => {
                    let start = self.vtime[nu].max(self.last[cu]);
                    let cost = match kind {
                        Kind::Wfq => ((pkt.bytes as u128) << FRAC) / edge.weight.max(1) as u128,
                        Kind::Rr => 1u128 << FRAC,
                        _ => ((pkt.bytes as u128) << FRAC) / edge.quantum_bytes.max(1) as u128,
                    };
                    let finish = start + cost;
                    self.last[cu] = finish;
                    if kind == Kind::Drr {
                        let one = 1u128 << FRAC;
                        finish.div_ceil(one) * one
                    } else {
                        start
                    }
                }
                Kind::Lstf(d) => now as u128 + pkt.slack_ps.unwrap_or(d) as u128,
                Kind::Edf(d) => pkt.deadline_ps.unwrap_or(now.saturating_add(d)) as u128,
                Kind::Senic => {
                    let top = self.senic_top[nu];
                    self.senic_advance(top, now);
                    let rate = edge.rate_bps.max(1);
                    self.child_backlog[cu] += 1;
                    if self.child_backlog[cu] == 1 {
                        self.backlog_rate[nu] += rate as u128;
                    }
                    let child_senic = self.kind[cu] == Kind::Senic;
                    let (st, f) = match inner {
                        Some(tags) if child_senic => tags,
                        _ => {
                            let eff = if n != top {
                                let cap = self.params.capacities[nu] as u128;
                                let active = self.backlog_rate[nu].max(1);
                                (rate as u128).min(cap * rate as u128 / active).max(1) as u64
                            } else {
                                rate
                            };
                            let v = self.senic_v[top as usize];
                            let st = v.max(self.last_f[cu]);
                            let f = st + wire_ps_frac(pkt.bytes, eff);
                            self.last_f[cu] = f;
                            (st, f)
                        }
                    };
                    if !(child_senic && inner.is_some()) {
                        self.tags[base + n_senic] = (n, st);
                        n_senic += 1;
                    }
                    inner = Some((st, f));
                    f
                }
                Kind::Leaf => unreachable!("a leaf is never a parent"),
            };
            if kind != Kind::Senic {
                inner = None;
            }
            self.ranks[base + level] = rank;
            level += 1;
            child = n;
        }
        self.slots[slot as usize].n_senic = n_senic as u8;
        self.admitted[s.leaf_node as usize] += 1;
        self.push_entries(slot);
    }

    fn push_entries(&mut self, slot: u32) {
        let leaf_node = self.slots[slot as usize].leaf_node;
        let base = slot as usize * self.stride;
        let seq = self.next_seq();
        self.pifo[leaf_node as usize].push(self.ranks[base], seq, slot);
        let mut child = leaf_node;
        let mut i = 1;
        while self.parent[child as usize] != NO {
            let n = self.parent[child as usize];
            self.pifo[n as usize].push(self.ranks[base + i], seq, child);
            child = n;
            i += 1;
        }
    }
}

impl Engine for FastEngine {
    fn enqueue(&mut self, pkt: Packet, now: u64) -> Result<(), DropReason> {
        let (leaf, leaf_node, shaping) = match self.prog.classify(&pkt.meta) {
            Classification::Leaf {
                leaf,
                node,
                shaping,
            } => (leaf, node, shaping),
            Classification::Unclassified { at } => {
                self.stats.dropped(at, None, DropReason::Unclassified);
                return Err(DropReason::Unclassified);
            }
        };
        let ln = leaf_node as usize;
        let spec = self.params.specs[ln].as_ref().expect("leaf");
        let flow = flow_key(spec, &pkt);
        let (fp, fb) = self
            .flow_held
            .get(&(leaf_node, flow))
            .copied()
            .unwrap_or((0, 0));
        let bytes = pkt.bytes as u64;
        let held = super::Holding {
            leaf_packets: self.held_packets[ln],
            leaf_bytes: self.held_bytes[ln],
            flow_packets: fp,
            flow_bytes: fb,
        };
        let reason = super::limit_broken(spec, held, bytes);
        let outstanding = spec.outstanding;
        if let Some(r) = reason {
            self.stats.dropped(leaf_node, Some((leaf, flow)), r);
            return Err(r);
        }
        self.held_packets[ln] += 1;
        self.held_bytes[ln] += bytes;
        let f = self.flow_held.entry((leaf_node, flow)).or_insert((0, 0));
        f.0 += 1;
        f.1 += bytes;
        let seq = self.flow_seq.entry((leaf_node, flow)).or_insert(0);
        *seq += 1;
        let fseq = *seq;
        let s = Slot {
            pkt,
            leaf_node,
            leaf,
            flow,
            shaping,
            enqueued_ps: now,
            fseq,
            was_deferred: false,
            n_senic: 0,
        };
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = s;
                i
            }
            None => {
                self.slots.push(s);
                self.ranks.resize(self.slots.len() * self.stride, 0);
                self.tags.resize(self.slots.len() * self.stride, (0, 0));
                (self.slots.len() - 1) as u32
            }
        };
        self.held += 1;
        if outstanding.is_some_and(|o| self.admitted[ln] >= o) {
            self.waiting[ln].push_back(slot);
        } else {
            self.admit(slot, now);
        }
        Ok(())
    }

    fn dequeue(&mut self, now: u64) -> Option<Departure> {
        while let Some(&Reverse((t, _, slot))) = self.shaping_queue.peek() {
            if t > now {
                break;
            }
            self.shaping_queue.pop();
            let sl = self.slots[slot as usize];
            let (key, fseq) = ((sl.leaf, sl.flow), sl.fseq);
            for &b in sl.shaping.as_slice() {
                self.buckets[b as usize].unhold(sl.pkt.bytes);
            }
            if let Some(d) = self.deferred.get_mut(&key) {
                d.remove(&fseq);
                if d.is_empty() {
                    self.deferred.remove(&key);
                }
            }
            self.push_entries(slot);
        }
        loop {
            // Pop the path from the root.
            self.popped.clear();
            let mut n = 0u32;
            let slot = loop {
                let (rank, v) = self.pifo[n as usize].pop()?;
                self.popped.push((n, rank));
                if self.kind[n as usize] == Kind::Leaf {
                    break v;
                }
                n = v;
            };
            let s = self.slots[slot as usize];
            let bytes = s.pkt.bytes;
            let mut eligible_at = s
                .shaping
                .as_slice()
                .iter()
                .map(|&b| {
                    let bk = &self.buckets[b as usize];
                    if s.was_deferred {
                        bk.earliest(bytes, now)
                    } else {
                        bk.estimate(bytes, now)
                    }
                })
                .max()
                .unwrap_or(now);
            let base = slot as usize * self.stride;
            for k in 0..s.n_senic as usize {
                let (node, st) = self.tags[base + k];
                let top = self.senic_top[node as usize];
                self.senic_advance(top, now);
                let v = self.senic_v[top as usize];
                if v < st {
                    let cap = self.params.capacities[top as usize] as u128;
                    let slow = cap.max(self.backlog_rate[top as usize]);
                    let dt = ((st - v) * slow / cap).div_ceil(1u128 << FRAC);
                    eligible_at = eligible_at.max(now + (dt as u64).max(1));
                }
            }
            // Per-flow order: never ahead of an earlier packet of the flow still deferred.
            let key = (s.leaf, s.flow);
            if let Some(d) = self.deferred.get(&key) {
                for (_, &until) in d.range(..s.fseq) {
                    eligible_at = eligible_at.max(until);
                }
            }
            if eligible_at > now {
                let seq = self.next_seq();
                self.shaping_queue.push(Reverse((eligible_at, seq, slot)));
                self.deferred
                    .entry(key)
                    .or_default()
                    .insert(s.fseq, eligible_at);
                for &b in s.shaping.as_slice() {
                    self.buckets[b as usize].hold(bytes);
                }
                self.slots[slot as usize].was_deferred = true;
                continue;
            }
            for &b in s.shaping.as_slice() {
                self.buckets[b as usize].charge(bytes, now);
            }
            self.free.push(slot);
            self.held -= 1;
            for i in 0..self.popped.len() {
                let (node, rank) = self.popped[i];
                let nu = node as usize;
                match self.kind[nu] {
                    Kind::Wfq | Kind::Rr => self.vtime[nu] = self.vtime[nu].max(rank),
                    Kind::Drr => {
                        self.vtime[nu] = self.vtime[nu].max(rank.saturating_sub(1 << FRAC))
                    }
                    Kind::Leaf => {
                        let fair = self.params.specs[nu]
                            .as_ref()
                            .is_some_and(|l| l.flow_sched == FlowSched::Fair);
                        if fair {
                            self.vtime[nu] = self.vtime[nu].max(rank);
                        }
                    }
                    _ => {}
                }
            }
            let mut child = s.leaf_node;
            while self.parent[child as usize] != NO {
                let n = self.parent[child as usize];
                if self.kind[n as usize] == Kind::Senic {
                    let top = self.senic_top[n as usize];
                    self.senic_advance(top, now);
                    let cu = child as usize;
                    self.child_backlog[cu] -= 1;
                    if self.child_backlog[cu] == 0 {
                        self.backlog_rate[n as usize] -=
                            self.params.edges[cu].rate_bps.max(1) as u128;
                    }
                }
                child = n;
            }
            let ln = s.leaf_node as usize;
            let b64 = bytes as u64;
            self.held_packets[ln] -= 1;
            self.held_bytes[ln] -= b64;
            self.admitted[ln] -= 1;
            if let Some(f) = self.flow_held.get_mut(&(s.leaf_node, s.flow)) {
                f.0 -= 1;
                f.1 -= b64;
                if f.0 == 0 {
                    self.flow_held.remove(&(s.leaf_node, s.flow));
                }
            }
            if let Some(next) = self.waiting[ln].pop_front() {
                self.admit(next, now);
            }
            let d = Departure {
                id: s.pkt.id,
                leaf: s.leaf,
                flow: s.flow,
                bytes,
                enqueued_ps: s.enqueued_ps,
            };
            let parents = &self.parent;
            self.stats.sent(
                |n| Some(parents[n as usize]).filter(|&p| p != NO),
                &d,
                s.leaf_node,
            );
            return Some(d);
        }
    }

    fn next_wakeup(&self) -> Option<u64> {
        self.shaping_queue.peek().map(|r| r.0 .0)
    }

    fn backlog(&self) -> usize {
        self.held
    }

    fn update(&mut self, u: Update, now: u64) -> Result<(), UpdateError> {
        check_update(&self.prog, &u)?;
        if let Update::Rate { node, rate_bps } = u {
            // A backlogged senic class changes φ: advance V at the old rates first.
            let nu = node as usize;
            let p = self.parent[nu];
            if p != NO && self.kind[p as usize] == Kind::Senic {
                self.senic_advance(self.senic_top[p as usize], now);
                if self.child_backlog[nu] > 0 {
                    let old = self.params.edges[nu].rate_bps.max(1) as u128;
                    self.backlog_rate[p as usize] =
                        self.backlog_rate[p as usize] - old + rate_bps as u128;
                }
            }
            if self.kind[nu] == Kind::Senic {
                self.senic_advance(self.senic_top[nu], now);
            }
        }
        let senic =
            matches!(u, Update::Rate { node, .. } if self.kind[node as usize] == Kind::Senic);
        self.params.apply(&u, senic);
        match u {
            Update::Shaper {
                shaper,
                rate_bps,
                burst_bytes,
            } => self.buckets[shaper as usize].reconfigure(rate_bps, burst_bytes, now),
            Update::LeafLimits {
                node, outstanding, ..
            } => {
                let nu = node as usize;
                while outstanding.is_none_or(|o| self.admitted[nu] < o) {
                    let Some(next) = self.waiting[nu].pop_front() else {
                        break;
                    };
                    self.admit(next, now);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }
}
