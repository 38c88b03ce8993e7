//! Commodity multiqueue NICs: hardware transmit queues served by a fixed arbiter, with the
//! policy approximated by how the host assigns packets to queues.
//!
//! Each hardware queue is a software qdisc feeding a hardware descriptor ring of
//! `hw_ring_packets` descriptors (the BQL-limited ring; a segment moves from the qdisc to the
//! ring as soon as the ring has room). A descriptor is a TSO segment ([`Pkt::tso_frames`]
//! packets written together; a packet written alone is a segment of one): it takes one slot
//! of the ring and one driver cost, and the NIC sends its packets back to back once it picks
//! it. The NIC serves the rings by deficit round robin with `hw_quantum_bytes` per queue per
//! round (Loom §2.2: "per-queue deficit round robin"; TONIC: equal bytes per round), a
//! segment charged whole. Models:
//!
//! * `mq` (Loom §2.2, Fig. 9b): a queue per core; a flow uses its thread's core's queue (XPS);
//!   per-queue qdisc `fq` (per-flow DRR, as fq_codel without AQM), `fifo`, or `policy` (the
//!   policy itself, one weft-core engine per queue, as in Loom §2.2.2's setup).
//! * `qpf` (Loom Fig. 9c): a queue per flow (FIFO), NIC round robin across all of them.
//! * `mq-pri`, `mq-fair` (Loom §2.2 Fig. 4, DCB/ETS): 8 NIC traffic classes, each with a queue
//!   per core, and the policy in software on each queue (`dcb.qdisc`, default `policy`); `mq-pri` serves classes by strict priority (class 0 first), `mq-fair` by
//!   deficit round robin (equal ETS shares). An application's class is its `dcb_class`
//!   (default: `mq-pri` puts prioritized applications in class 0 and the rest in 1;
//!   `mq-fair` puts tenant t in class t mod 8).
//! * `tonic` (TONIC §IV, Algorithms 1–3): `tonic_queues` queues split into per-tenant pools
//!   of size proportional to the tenant's weight (weights scaled by ⌊Q / Σw⌋; rounded down,
//!   at least one queue, when Σw > Q); packets of a tenant are sprayed over its pool in turn
//!   (Alg. 1); packets of prioritized applications (Alg. 2) are inserted at the head of their
//!   queue's qdisc, the rest at the tail (Alg. 3). This breaks per-flow order for the
//!   prioritized application's packets relative to others, as the paper accepts.
//!
//! Optionally (`hw.queue_rate`) the NIC rate-limits every queue (Loom §2.2: "some advanced
//! NICs allow per-queue rate limits"; Fig. 2): a queue sends only when its virtual clock
//! (wire bits / rate) allows.
//!
//! Counters: a doorbell per queue that received descriptors in a host burst (`flush`) and per
//! ring refill after a segment completes; a descriptor DMA read per `descriptors_per_read`
//! descriptors of a doorbell; a payload read per packet; CPU: the host's driver cost per
//! segment and per doorbell. A queue with a policy qdisc takes packets one by one (the host
//! splits segments before its software policy), each then a descriptor of its own.
//!
//! Cost: O(1) per packet amortized (DRR), plus a hash lookup per packet in `fq` qdiscs.
//! Policy qdiscs: an engine for each queue that has seen a packet (made on its first), and
//! the shaped packets' wakeups visit only the queues holding some (O(log queues) each).

use std::collections::{BTreeSet, VecDeque};

use std::sync::Arc;

use rustc_hash::FxHashMap;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{Classification, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::{Engine, Packet};

use super::{AppInfo, Nic, NicCounters, NicKind, NicParams, Pkt};
use crate::slab::Slab;

/// Classic deficit round robin over indices (Shreedhar & Varghese): each visit adds the
/// quantum and sends while the head fits; an emptied index leaves the list with no credit.
#[derive(Debug, Clone, Default)]
pub struct Drr {
    active: VecDeque<u32>,
    deficit: Vec<u64>,
    fresh: Vec<bool>,
    listed: Vec<bool>,
    quantum: u64,
}

impl Drr {
    /// A DRR with `quantum` bytes per visit.
    pub fn new(quantum: u64) -> Drr {
        Drr {
            quantum: quantum.max(1),
            ..Drr::default()
        }
    }

    fn ensure(&mut self, i: usize) {
        if i >= self.listed.len() {
            self.deficit.resize(i + 1, 0);
            self.fresh.resize(i + 1, false);
            self.listed.resize(i + 1, false);
        }
    }

    /// Marks `i` as having data.
    pub fn activate(&mut self, i: u32) {
        self.ensure(i as usize);
        if !self.listed[i as usize] {
            self.listed[i as usize] = true;
            self.active.push_back(i);
        }
    }

    /// The index whose head packet goes next, charging it; `head(i)` gives the head's bytes
    /// (`None`: empty, which drops `i` from the list).
    pub fn pick(&mut self, mut head: impl FnMut(u32) -> Option<u32>) -> Option<u32> {
        loop {
            let &i = self.active.front()?;
            let iu = i as usize;
            let Some(h) = head(i) else {
                self.active.pop_front();
                self.listed[iu] = false;
                self.deficit[iu] = 0;
                self.fresh[iu] = false;
                continue;
            };
            if !self.fresh[iu] {
                self.deficit[iu] += self.quantum;
                self.fresh[iu] = true;
            }
            if self.deficit[iu] >= h as u64 {
                self.deficit[iu] -= h as u64;
                return Some(i);
            }
            self.fresh[iu] = false;
            self.active.rotate_left(1);
        }
    }

    /// After sending from `i` (the last pick): `empty` when it has nothing more.
    pub fn sent(&mut self, i: u32, empty: bool) {
        if empty {
            debug_assert_eq!(self.active.front(), Some(&i));
            self.active.pop_front();
            let iu = i as usize;
            self.listed[iu] = false;
            self.deficit[iu] = 0;
            self.fresh[iu] = false;
        }
    }
}

/// Per-flow DRR qdisc (fq_codel without its AQM): flows in round robin by bytes.
#[derive(Debug, Clone)]
struct Fq {
    slot_of: FxHashMap<u32, u32>,
    slots: Vec<VecDeque<Pkt>>,
    drr: Drr,
    len: usize,
}

/// The policy as a per-queue software qdisc (Loom §2.2.2: "for each transmit queue, we
/// configure Linux Qdisc to classify and schedule packets according to a network policy"):
/// one weft-core engine per queue, each seeing only its queue's packets.
struct PolicyQdisc {
    engine: FastEngine,
    /// Its packets, by the id the engine hands back.
    slab: Slab<Pkt>,
    /// Per flow: its metadata and classification (computed once).
    flow_meta: FxHashMap<u32, (PacketMeta, Classification)>,
}

enum Qdisc {
    Fifo(VecDeque<Pkt>),
    Fq(Box<Fq>),
    /// `None` until the queue's first packet: a host of many cores has 8 queues a core
    /// under `mq-pri`/`mq-fair`, most of which never see a packet, and an engine each
    /// (tens of kilobytes) took 12 GB at 65,535 cores.
    Policy(Option<Box<PolicyQdisc>>),
}

impl Qdisc {
    fn len(&self) -> usize {
        match self {
            Qdisc::Fifo(q) => q.len(),
            Qdisc::Fq(f) => f.len,
            Qdisc::Policy(e) => e.as_ref().map_or(0, |e| e.engine.backlog()),
        }
    }

    /// Offers a packet to the policy qdisc (whose engine runs `prog`, made on the first
    /// packet); `Err` when the engine drops it.
    fn push_policy(
        &mut self,
        p: Pkt,
        meta: &PacketMeta,
        now_ps: u64,
        prog: &Arc<Program>,
    ) -> Result<(), Pkt> {
        let Qdisc::Policy(e) = self else {
            self.push(p, None);
            return Ok(());
        };
        let e = e.get_or_insert_with(|| {
            Box::new(PolicyQdisc {
                engine: FastEngine::new(prog.clone()),
                slab: Slab::default(),
                flow_meta: FxHashMap::default(),
            })
        });
        let prog = e.engine.program();
        let (fmeta, class) = *e
            .flow_meta
            .entry(p.flow)
            .or_insert_with(|| (*meta, prog.classify(meta)));
        let i = e.slab.insert(p);
        let mut pkt = Packet::new(i as u64, p.bytes, fmeta);
        pkt.flow = p.flow as u64;
        if e.engine.enqueue_classified(pkt, class, now_ps).is_err() {
            e.slab.remove(i);
            return Err(p);
        }
        Ok(())
    }

    /// The policy qdisc's next packet at `now_ps` (others ignore the time).
    fn pop_at(&mut self, now_ps: u64) -> Option<Pkt> {
        match self {
            Qdisc::Policy(e) => {
                let e = e.as_mut()?;
                let d = e.engine.dequeue(now_ps)?;
                Some(e.slab.remove(d.id as u32))
            }
            _ => unreachable!("only policy qdiscs pop a frame at a time"),
        }
    }

    fn wakeup(&self) -> Option<u64> {
        match self {
            Qdisc::Policy(Some(e)) if e.engine.backlog() > 0 => e.engine.next_wakeup(),
            _ => None,
        }
    }

    /// Queues `p` at position `at` of a FIFO (TONIC's head insertion: a segment's frames
    /// at 0, 1, ...), or at its tail (`None`, and always in an `fq` qdisc).
    fn push(&mut self, p: Pkt, at: Option<usize>) {
        match self {
            Qdisc::Policy(_) => unreachable!("policy qdiscs take push_policy"),
            Qdisc::Fifo(q) => match at {
                Some(i) => q.insert(i, p),
                None => q.push_back(p),
            },
            Qdisc::Fq(f) => {
                let n = f.slots.len() as u32;
                let s = *f.slot_of.entry(p.flow).or_insert(n);
                if s == n {
                    f.slots.push(VecDeque::new());
                }
                f.slots[s as usize].push_back(p);
                f.drr.activate(s);
                f.len += 1;
            }
        }
    }

    /// Moves the next segment (all its frames) to the back of `ring`; false when there is
    /// none. A policy qdisc gives one frame, which is then a segment of its own.
    fn pop_segment(&mut self, now_ps: u64, ring: &mut VecDeque<Pkt>) -> bool {
        let take = |q: &mut VecDeque<Pkt>, ring: &mut VecDeque<Pkt>| {
            let first = q.pop_front().expect("a queued segment");
            debug_assert!(
                first.starts_segment(),
                "a qdisc's head starts a segment: {first:?}"
            );
            ring.push_back(first);
            for _ in 0..first.tso_more {
                ring.push_back(
                    q.pop_front()
                        .expect("a segment's frames are queued together"),
                );
            }
            1 + first.tso_more as usize
        };
        match self {
            Qdisc::Policy(_) => match self.pop_at(now_ps) {
                Some(p) => {
                    ring.push_back(Pkt {
                        tso_bytes: p.bytes,
                        tso_frames: 1,
                        tso_more: 0,
                        ..p
                    });
                    true
                }
                None => false,
            },
            Qdisc::Fifo(q) => {
                if q.is_empty() {
                    return false;
                }
                take(q, ring);
                true
            }
            Qdisc::Fq(f) => {
                let slots = &f.slots;
                let Some(s) = f
                    .drr
                    .pick(|s| slots[s as usize].front().map(|p| p.tso_bytes))
                else {
                    return false;
                };
                let n = take(&mut f.slots[s as usize], ring);
                f.drr.sent(s, f.slots[s as usize].is_empty());
                f.len -= n;
                true
            }
        }
    }
}

struct Queue {
    /// Frames in the ring, whole segments.
    ring: VecDeque<Pkt>,
    /// Descriptors (segments) in the ring: what `ring_cap` bounds.
    ring_descs: usize,
    qdisc: Qdisc,
    class: u8,
    /// Descriptors written since the last doorbell.
    unannounced: u64,
}

/// Where the frames of the segment being written go.
#[derive(Debug, Clone, Copy)]
struct Open {
    queue: u32,
    to: Dest,
}

#[derive(Debug, Clone, Copy)]
enum Dest {
    /// Straight into the ring (the qdisc was empty and the ring had room).
    Ring,
    /// Into the qdisc at this position (TONIC's head insertion), or at its tail.
    Qdisc(Option<usize>),
    /// Dropped with its first frame (the qdisc was full).
    Drop,
}

/// How packets are assigned to queues.
#[derive(Debug, Clone)]
enum Mapping {
    PerCore,
    PerFlow,
    Dcb {
        strict: bool,
    },
    Tonic {
        pool_start: Vec<u32>,
        pool_len: Vec<u32>,
        cursor: Vec<u32>,
    },
}

/// A multiqueue NIC (see the module docs for the models).
pub struct HwqNic {
    kind: NicKind,
    mapping: Mapping,
    queues: Vec<Queue>,
    /// Per class: DRR over its queues.
    classes: Vec<Drr>,
    /// Class-level deficits, bytes (`mq-fair`: DRR with negative credit over classes). 128
    /// bits: a class gets the quantum (up to 2^64 − 1 bytes) and owes up to a frame.
    class_deficit: Vec<i128>,
    class_next: usize,
    quantum: u64,
    ring_cap: usize,
    qdisc_limit: usize,
    cores: u16,
    apps: Vec<AppInfo>,
    /// Queues with unannounced descriptors, per core.
    dirty: Vec<Vec<u32>>,
    drops: Vec<Pkt>,
    c: NicCounters,
    descs_per_read: u64,
    cpu_ps_per_packet: u64,
    cpu_ps_per_doorbell: u64,
    /// Per-queue NIC rate limit, bits per second (`hw.queue_rate`).
    queue_rate_bps: Option<u64>,
    /// Per queue: earliest time it may send again under its rate limit, ps.
    next_ok_ps: Vec<u64>,
    /// Queues held back by their rate limit (not in their class's DRR list).
    throttled: Vec<u32>,
    is_throttled: Vec<bool>,
    overhead_bytes: u64,
    /// The policy of the queues' qdiscs when they are policy engines (`None`: fifo or fq).
    policy: Option<Arc<Program>>,
    /// The segment being written: its frames after the first follow it.
    open: Option<Open>,
    /// The segment being sent, `(class, queue)`: the NIC sends its frames one after
    /// another before it arbitrates again.
    sending: Option<(usize, u32)>,
    /// Queues whose policy qdisc holds shaped packets with a wakeup time, in queue order
    /// (the order the queues are refilled in, as a scan of all queues would). Every queue
    /// whose qdisc has a wakeup is here: a qdisc's wakeup changes only when a packet enters
    /// (`submit`) or leaves (`refill`), and both add the queue if it has one; `advance`
    /// removes those that no longer do. A scan of every queue at every event took 25 s
    /// for 20 µs at 65,535 cores.
    waking: BTreeSet<u32>,
}

impl HwqNic {
    /// Builds model `kind` (one of mq, qpf, mq-pri, mq-fair, tonic) for a host with `cores`
    /// cores and `flows` flows.
    pub fn new(
        kind: NicKind,
        p: &NicParams,
        cores: u16,
        flows: usize,
        apps: Vec<AppInfo>,
        cpu_ps_per_packet: u64,
        cpu_ps_per_doorbell: u64,
    ) -> HwqNic {
        let fq = |on: bool| {
            if on {
                Qdisc::Fq(Box::new(Fq {
                    slot_of: FxHashMap::default(),
                    slots: Vec::new(),
                    drr: Drr::new(p.hw_quantum_bytes),
                    len: 0,
                }))
            } else {
                Qdisc::Fifo(VecDeque::new())
            }
        };
        let (mapping, nq, classes): (Mapping, usize, usize) = match kind {
            NicKind::Mq => (Mapping::PerCore, cores as usize, 1),
            NicKind::Qpf => (Mapping::PerFlow, flows.max(1), 1),
            NicKind::MqPri => (Mapping::Dcb { strict: true }, 8 * cores as usize, 8),
            NicKind::MqFair => (Mapping::Dcb { strict: false }, 8 * cores as usize, 8),
            NicKind::Tonic => {
                let tenants = apps
                    .iter()
                    .map(|a| a.tenant as usize + 1)
                    .max()
                    .unwrap_or(1);
                let mut w = vec![1u64; tenants];
                for a in &apps {
                    w[a.tenant as usize] = a.tenant_weight.max(1);
                }
                let q = p.tonic_queues.max(tenants) as u64;
                let sum: u64 = w.iter().sum();
                let lens: Vec<u32> = if sum <= q {
                    let k = q / sum;
                    w.iter().map(|&x| (x * k) as u32).collect()
                } else {
                    w.iter().map(|&x| ((x * q) / sum).max(1) as u32).collect()
                };
                let mut start = Vec::new();
                let mut s = 0;
                for &l in &lens {
                    start.push(s);
                    s += l;
                }
                (
                    Mapping::Tonic {
                        pool_start: start,
                        pool_len: lens,
                        cursor: vec![0; tenants],
                    },
                    s as usize,
                    1,
                )
            }
            _ => panic!("HwqNic does not model {kind:?}"),
        };
        let qdisc_fq = p.qdisc_of(kind) == super::MqQdisc::Fq;
        let queues = (0..nq)
            .map(|i| Queue {
                ring: VecDeque::new(),
                ring_descs: 0,
                qdisc: fq(qdisc_fq),
                class: if classes > 1 {
                    (i / cores as usize) as u8
                } else {
                    0
                },
                unannounced: 0,
            })
            .collect();
        HwqNic {
            kind,
            mapping,
            queues,
            classes: (0..classes).map(|_| Drr::new(p.hw_quantum_bytes)).collect(),
            class_deficit: vec![0; classes],
            class_next: 0,
            quantum: p.hw_quantum_bytes,
            ring_cap: p.hw_ring_packets,
            qdisc_limit: p.qdisc_limit_packets,
            cores,
            apps,
            dirty: vec![Vec::new(); cores as usize],
            drops: Vec::new(),
            c: NicCounters::default(),
            descs_per_read: p.descriptors_per_read.max(1),
            cpu_ps_per_packet,
            cpu_ps_per_doorbell,
            queue_rate_bps: p.hw_queue_rate_bps,
            next_ok_ps: vec![0; nq],
            throttled: Vec::new(),
            is_throttled: vec![false; nq],
            overhead_bytes: 20,
            policy: None,
            open: None,
            sending: None,
            waking: BTreeSet::new(),
        }
    }

    /// Replaces every queue's qdisc by the policy (`mq.qdisc: policy`): one engine per queue,
    /// made on the queue's first packet.
    pub fn with_policy_qdiscs(mut self, prog: &Arc<Program>) -> HwqNic {
        for q in &mut self.queues {
            q.qdisc = Qdisc::Policy(None);
        }
        self.overhead_bytes = prog.link.overhead_bytes;
        self.policy = Some(prog.clone());
        self
    }

    /// Moves packets from queue `q`'s qdisc into its ring while there is room; true when
    /// any moved.
    fn refill(&mut self, q: u32, now_ps: u64) -> bool {
        let queue = &mut self.queues[q as usize];
        let was_empty = queue.ring.is_empty();
        let mut moved = false;
        while queue.ring_descs < self.ring_cap && queue.qdisc.pop_segment(now_ps, &mut queue.ring) {
            queue.ring_descs += 1;
            queue.unannounced += 1;
            moved = true;
        }
        if moved && was_empty {
            let c = queue.class as usize;
            self.classes[c].activate(q);
        }
        self.track_wakeup(q);
        moved
    }

    /// Lists queue `q` in `waking` if its policy qdisc has a wakeup time.
    fn track_wakeup(&mut self, q: u32) {
        if self.queues[q as usize].qdisc.wakeup().is_some() {
            self.waking.insert(q);
        }
    }

    /// The model.
    pub fn kind(&self) -> NicKind {
        self.kind
    }

    /// Queue for a packet (TONIC Algorithm 1 advances the tenant's cursor).
    fn queue_of(&mut self, p: &Pkt) -> u32 {
        let info = self.apps[p.app as usize];
        match &mut self.mapping {
            Mapping::PerCore => p.core as u32,
            Mapping::PerFlow => p.flow,
            Mapping::Dcb { .. } => info.dcb_class as u32 * self.cores as u32 + p.core as u32,
            Mapping::Tonic {
                pool_start,
                pool_len,
                cursor,
            } => {
                let t = info.tenant as usize;
                if cursor[t] >= pool_len[t] {
                    cursor[t] = 0;
                }
                let q = pool_start[t] + cursor[t];
                cursor[t] += 1;
                q
            }
        }
    }

    fn announce(&mut self, q: u32) {
        let u = &mut self.queues[q as usize].unannounced;
        if *u > 0 {
            self.c.doorbell_writes += 1;
            self.c.descriptor_reads += u.div_ceil(self.descs_per_read);
            self.c.cpu_ps += self.cpu_ps_per_doorbell as u128;
            *u = 0;
        }
    }

    /// The class and queue whose ring's first segment goes next, charged to its
    /// queue's rate limit.
    fn pick(&mut self, now_ps: u64) -> Option<(usize, u32)> {
        let class = self.pick_class()?;
        let queues = &self.queues;
        let next_ok = &self.next_ok_ps;
        let throttled = &mut self.throttled;
        let is_throttled = &mut self.is_throttled;
        let limited = self.queue_rate_bps.is_some();
        let q = self.classes[class].pick(|q| {
            let qu = q as usize;
            if limited && next_ok[qu] > now_ps && !queues[qu].ring.is_empty() {
                if !is_throttled[qu] {
                    is_throttled[qu] = true;
                    throttled.push(q);
                }
                return None;
            }
            queues[qu].ring.front().map(|p| p.tso_bytes)
        })?;
        if let Some(rate) = self.queue_rate_bps {
            let p = self.queues[q as usize].ring.front().expect("a picked ring");
            let wire = p.tso_bytes as u64 + p.tso_frames as u64 * self.overhead_bytes;
            let t = ((wire * 8) as u128 * 1_000_000_000_000).div_ceil(rate.max(1) as u128) as u64;
            let n = &mut self.next_ok_ps[q as usize];
            *n = (*n).max(now_ps) + t;
        }
        Some((class, q))
    }

    fn pick_class(&mut self) -> Option<usize> {
        let n = self.classes.len();
        if n == 1 {
            return Some(0);
        }
        let nonempty = |queues: &Vec<Queue>, cores: u16, c: usize| {
            (0..cores as usize).any(|k| !queues[c * cores as usize + k].ring.is_empty())
        };
        match self.mapping {
            Mapping::Dcb { strict: true } => {
                (0..n).find(|&c| nonempty(&self.queues, self.cores, c))
            }
            _ => {
                // DRR over classes with negative credit (the charge comes after the send).
                if !(0..n).any(|c| nonempty(&self.queues, self.cores, c)) {
                    return None;
                }
                loop {
                    let c = self.class_next;
                    if nonempty(&self.queues, self.cores, c) && self.class_deficit[c] > 0 {
                        return Some(c);
                    }
                    if !nonempty(&self.queues, self.cores, c) {
                        self.class_deficit[c] = 0;
                    }
                    // Move on; the class we arrive at gets its quantum for this round.
                    let next = (c + 1) % n;
                    self.class_next = next;
                    self.class_deficit[next] += self.quantum as i128;
                }
            }
        }
    }
}

impl Nic for HwqNic {
    fn submit(&mut self, now_ps: u64, pkt: Pkt, meta: &PacketMeta) {
        if self.policy.is_some() {
            // The host splits segments before its per-queue policy: every frame is a
            // descriptor of its own.
            let pkt = Pkt {
                tso_bytes: pkt.bytes,
                tso_frames: 1,
                tso_more: 0,
                ..pkt
            };
            let q = self.queue_of(&pkt);
            let prog = self.policy.as_ref().expect("checked");
            self.c.cpu_ps += self.cpu_ps_per_packet as u128;
            if let Err(p) = self.queues[q as usize]
                .qdisc
                .push_policy(pkt, meta, now_ps, prog)
            {
                self.drops.push(p);
                self.track_wakeup(q);
                return;
            }
            // `refill` lists the queue in `waking` if it now has a wakeup.
            let before = self.queues[q as usize].unannounced;
            if self.refill(q, now_ps) && before == 0 {
                self.dirty[pkt.core as usize].push(q);
            }
            return;
        }
        // A segment's first frame chooses its queue and its place there (the driver's
        // cost is per descriptor); its other frames follow it.
        let open = match self.open.take() {
            Some(o) => {
                debug_assert!(!pkt.starts_segment(), "a segment's frame expected: {pkt:?}");
                o
            }
            None => {
                debug_assert!(
                    pkt.starts_segment(),
                    "a segment's first frame expected: {pkt:?}"
                );
                let queue = self.queue_of(&pkt);
                let head = matches!(self.mapping, Mapping::Tonic { .. })
                    && self.apps[pkt.app as usize].prioritized;
                self.c.cpu_ps += self.cpu_ps_per_packet as u128;
                let qu = &self.queues[queue as usize];
                let to = if qu.qdisc.len() == 0 && qu.ring_descs < self.ring_cap {
                    Dest::Ring
                } else if qu.qdisc.len() >= self.qdisc_limit {
                    Dest::Drop
                } else {
                    Dest::Qdisc(head.then_some(0))
                };
                Open { queue, to }
            }
        };
        let q = open.queue;
        let first = pkt.starts_segment();
        let queue = &mut self.queues[q as usize];
        let to = match open.to {
            Dest::Ring => {
                queue.ring.push_back(pkt);
                if first {
                    queue.ring_descs += 1;
                    queue.unannounced += 1;
                    if queue.unannounced == 1 {
                        self.dirty[pkt.core as usize].push(q);
                    }
                    let class = queue.class as usize;
                    self.classes[class].activate(q);
                }
                Dest::Ring
            }
            Dest::Drop => {
                self.drops.push(pkt);
                Dest::Drop
            }
            Dest::Qdisc(at) => {
                queue.qdisc.push(pkt, at);
                Dest::Qdisc(at.map(|i| i + 1))
            }
        };
        if pkt.tso_more > 0 {
            self.open = Some(Open { queue: q, to });
        }
    }

    fn flush(&mut self, _now_ps: u64, core: u16) {
        let dirty = std::mem::take(&mut self.dirty[core as usize]);
        for &q in &dirty {
            self.announce(q);
        }
        let mut d = dirty;
        d.clear();
        self.dirty[core as usize] = d;
    }

    fn advance(&mut self, now_ps: u64) {
        if !self.waking.is_empty() {
            // Shaped packets become eligible in their queue's engine over time. (`refill`
            // may add the queue being visited again, never another.)
            let mut next = 0;
            while let Some(&q) = self.waking.range(next..).next() {
                next = q + 1;
                let qu = &self.queues[q as usize];
                let Some(t) = qu.qdisc.wakeup() else {
                    self.waking.remove(&q);
                    continue;
                };
                if qu.ring_descs < self.ring_cap && t <= now_ps && self.refill(q, now_ps) {
                    self.announce(q);
                }
            }
        }
        if self.throttled.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.throttled.len() {
            let q = self.throttled[i];
            if self.next_ok_ps[q as usize] <= now_ps {
                self.throttled.swap_remove(i);
                self.is_throttled[q as usize] = false;
                if !self.queues[q as usize].ring.is_empty() {
                    let c = self.queues[q as usize].class as usize;
                    self.classes[c].activate(q);
                }
            } else {
                i += 1;
            }
        }
    }

    fn poll(&mut self, now_ps: u64) -> Option<Pkt> {
        self.advance(now_ps);
        let (class, q) = match self.sending {
            Some(cq) => cq,
            None => self.pick(now_ps)?,
        };
        let p = self.queues[q as usize]
            .ring
            .pop_front()
            .expect("picked a non-empty ring");
        if p.tso_more > 0 {
            self.sending = Some((class, q));
        } else {
            // The segment's descriptor completes: the driver refills the ring from the
            // qdisc and rings a doorbell. (The queue is still listed in its class's DRR,
            // so `refill` does not re-add it.)
            self.sending = None;
            self.queues[q as usize].ring_descs -= 1;
            let refilled = self.refill(q, now_ps);
            let empty = self.queues[q as usize].ring.is_empty();
            self.classes[class].sent(q, empty);
            if refilled {
                self.announce(q);
            }
        }
        if self.classes.len() > 1 {
            self.class_deficit[class] -= p.bytes as i128;
        }
        self.c.payload_reads += 1;
        Some(p)
    }

    fn next_event(&self, now_ps: u64) -> Option<u64> {
        let throttle = self
            .throttled
            .iter()
            .map(|&q| self.next_ok_ps[q as usize])
            .filter(|&t| t > now_ps)
            .min();
        self.waking
            .iter()
            .map(|&q| &self.queues[q as usize])
            .filter(|q| q.ring_descs < self.ring_cap)
            .filter_map(|q| q.qdisc.wakeup())
            .filter(|&t| t > now_ps)
            .chain(throttle)
            .min()
    }

    fn take_drops(&mut self, out: &mut Vec<Pkt>) {
        out.append(&mut self.drops);
    }

    fn counters(&self) -> NicCounters {
        self.c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drr_equal_quantum_is_round_robin() {
        let mut d = Drr::new(100);
        let mut q: Vec<VecDeque<u32>> =
            vec![VecDeque::from(vec![100; 3]), VecDeque::from(vec![100; 2])];
        d.activate(0);
        d.activate(1);
        let mut order = Vec::new();
        while let Some(i) = d.pick(|i| q[i as usize].front().copied()) {
            q[i as usize].pop_front();
            d.sent(i, q[i as usize].is_empty());
            order.push(i);
        }
        assert_eq!(order, vec![0, 1, 0, 1, 0]);
    }

    /// An application of tenant 0, DCB class 0.
    fn app(prioritized: bool) -> AppInfo {
        AppInfo {
            tenant: 0,
            prioritized,
            dcb_class: 0,
            tenant_weight: 1,
        }
    }

    /// A frame of a TSO segment: `n` frames of 1,500 bytes, this one with `more` after it.
    fn seg_frame(flow: u32, app: u16, core: u16, n: u16, more: u16, label: u32) -> Pkt {
        Pkt {
            flow,
            app,
            core,
            bytes: 1500,
            submit_ps: 0,
            req: label,
            seq: 0,
            tso_bytes: 1500 * n as u32,
            tso_frames: n,
            tso_more: more,
        }
    }

    fn write_segment(nic: &mut HwqNic, flow: u32, app: u16, core: u16, n: u16, label: u32) {
        let meta = PacketMeta::default();
        for k in 0..n {
            nic.submit(
                0,
                seg_frame(flow, app, core, n, n - 1 - k, label + k as u32),
                &meta,
            );
        }
        nic.flush(0, core);
    }

    /// A TSO segment is one descriptor: one read, one slot of the ring, and the NIC sends
    /// its frames back to back before serving another queue; the DRR charges a queue the
    /// whole segment, so a queue of 4-frame segments and a queue of single frames still
    /// share the link's bytes equally.
    #[test]
    fn a_tso_segment_is_one_descriptor_sent_whole() {
        let app = app(false);
        let p = NicParams {
            hw_ring_packets: 2,
            ..NicParams::default()
        };
        let mut nic = HwqNic::new(NicKind::Mq, &p, 2, 2, vec![app], 0, 0);
        // Core 0: three segments of 4 frames (labels 0..12); core 1: 12 single frames.
        for s in 0..3 {
            write_segment(&mut nic, 0, 0, 0, 4, 4 * s);
        }
        for k in 0..12 {
            write_segment(&mut nic, 1, 0, 1, 1, 100 + k);
        }
        assert_eq!(nic.queues[0].ring.len(), 8, "two segments in a ring of two");
        assert_eq!(nic.queues[0].ring_descs, 2);
        assert_eq!(nic.queues[0].qdisc.len(), 4);
        assert_eq!(nic.counters().descriptor_reads, 2 + 2);
        let mut order = Vec::new();
        while let Some(p) = nic.poll(0) {
            order.push(p.req);
        }
        let core0: Vec<usize> = (0..order.len()).filter(|&i| order[i] < 100).collect();
        // Each segment's frames leave together, in order.
        for s in 0..3 {
            let at = core0[4 * s];
            assert_eq!(
                &order[at..at + 4],
                &[
                    4 * s as u32,
                    4 * s as u32 + 1,
                    4 * s as u32 + 2,
                    4 * s as u32 + 3
                ],
                "{order:?}"
            );
        }
        // Equal bytes: a segment of four 1,500-byte frames waits until four visits of a
        // 1,514-byte quantum pay for it, while the other queue sends a frame a visit.
        assert_eq!(
            order,
            [100, 101, 102, 0, 1, 2, 3, 103, 104, 105, 106, 4, 5, 6, 7]
                .into_iter()
                .chain([107, 108, 109, 110, 8, 9, 10, 11, 111])
                .collect::<Vec<u32>>()
        );
        // The third segment came from the qdisc: its own descriptor read on refill.
        assert_eq!(nic.counters().payload_reads, 24);
        assert_eq!(nic.counters().descriptor_reads, 2 + 2 + 1 + 10);
    }

    /// TONIC puts a prioritized segment at the head of its queue's qdisc with its frames in
    /// order; a segment refused by a full qdisc is dropped whole.
    #[test]
    fn tonic_inserts_a_whole_segment_at_the_head_and_drops_whole_segments() {
        let (bulk, urgent) = (app(false), app(true));
        let p = NicParams {
            hw_ring_packets: 1,
            tonic_queues: 1,
            qdisc_limit_packets: 6,
            ..NicParams::default()
        };
        let mut nic = HwqNic::new(NicKind::Tonic, &p, 1, 3, vec![bulk, urgent], 0, 0);
        write_segment(&mut nic, 0, 0, 0, 2, 0); // in the ring
        write_segment(&mut nic, 0, 0, 0, 2, 10); // qdisc
        write_segment(&mut nic, 1, 1, 0, 3, 20); // qdisc head, in order
        write_segment(&mut nic, 0, 0, 0, 2, 30); // 5 frames held, under 6: taken
        write_segment(&mut nic, 0, 0, 0, 2, 40); // 7 held: dropped whole
        let mut dropped = Vec::new();
        nic.take_drops(&mut dropped);
        assert_eq!(
            dropped.iter().map(|p| p.req).collect::<Vec<_>>(),
            vec![40, 41]
        );
        let mut order = Vec::new();
        while let Some(p) = nic.poll(0) {
            order.push(p.req);
        }
        assert_eq!(order, vec![0, 1, 20, 21, 22, 10, 11, 30, 31]);
    }

    /// `mq-pri` at 65,535 cores has 524,280 queues: only the two that see packets get a
    /// policy engine, and the shaped packets' wakeups are found without visiting the rest.
    #[test]
    fn policy_qdiscs_are_made_for_the_queues_in_use() {
        let text = "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  \
                    - {name: r, type: fifo}\n  \
                    - {name: s, type: shape, parent: r, rate: 1gbit, burst: 1514b}\n  \
                    - {name: l, type: leaf, parent: s}\n";
        let prog = Arc::new(
            weft_core::policy::compile_str(
                std::path::Path::new("x.yaml"),
                text,
                &Default::default(),
            )
            .unwrap(),
        );
        let app = AppInfo {
            tenant: 0,
            prioritized: false,
            dcb_class: 1,
            tenant_weight: 1,
        };
        let mut nic = HwqNic::new(
            NicKind::MqPri,
            &NicParams::default(),
            65_535,
            2,
            vec![app],
            0,
            0,
        )
        .with_policy_qdiscs(&prog);
        assert_eq!(nic.queues.len(), 8 * 65_535);
        let meta = PacketMeta::default();
        for (flow, core) in [(0u32, 7u16), (1, 60_000)] {
            for _ in 0..10 {
                let p = Pkt {
                    flow,
                    app: 0,
                    core,
                    bytes: 1500,
                    submit_ps: 0,
                    req: u32::MAX,
                    seq: 0,
                    tso_bytes: 1500,
                    tso_frames: 1,
                    tso_more: 0,
                };
                nic.submit(0, p, &meta);
            }
            nic.flush(0, core);
        }
        let made = |nic: &HwqNic| {
            nic.queues
                .iter()
                .filter(|q| matches!(q.qdisc, Qdisc::Policy(Some(_))))
                .count()
        };
        assert_eq!(made(&nic), 2);
        // Drain: the shaper holds packets, the model wakes at their times.
        let (mut now, mut sent) = (0u64, 0);
        while sent < 20 {
            while nic.poll(now).is_some() {
                sent += 1;
            }
            match nic.next_event(now) {
                Some(t) => now = t,
                None => break,
            }
        }
        assert_eq!(sent, 20, "at {now} ps, waking {:?}", nic.waking);
        // Each queue's engine shapes its ten frames to 1 Gbit/s with one frame of burst:
        // nine waits of about 12 µs (1500 B at 1 Gbit/s).
        assert!(
            (9 * 11_900_000..10 * 12_200_000).contains(&now),
            "done at {now} ps"
        );
        nic.advance(now);
        assert!(nic.waking.is_empty(), "{:?}", nic.waking);
        assert_eq!(made(&nic), 2);
    }
}
