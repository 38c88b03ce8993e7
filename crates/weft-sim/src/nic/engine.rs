//! NIC models that enforce the policy with the weft-core scheduling engine.
//!
//! * `sq` (Loom §2.2, Fig. 9a): the policy runs in host software (one qdisc, one lock): every
//!   core enqueues into the engine at once; one scheduling core dequeues a packet every
//!   `sq_cpu_ps_per_packet` (serially) into a single hardware ring of `sq_ring_packets`
//!   (a doorbell per packet), which the NIC transmits in order. When the core is the
//!   bottleneck the link runs below line rate (1500 B / 1.3 µs ≈ 9.3 Gbit/s by default).
//! * `loom` (Loom §4.3): per-flow descriptor queues in host memory; each core batches the
//!   descriptors it writes and announces them with one doorbell per `loom_batch_bytes` (or
//!   after `loom_batch_timeout_ps` for a partial batch; a TSO segment is one descriptor,
//!   so a batch closes only after a segment's last packet); the NIC reads the new
//!   descriptors (`loom_descriptor_dma_ps` later they are visible to its scheduler: one
//!   descriptor read per flow queue touched, per `descriptors_per_read`) and enforces the
//!   policy with the
//!   engine (`FastEngine`); a scheduled packet's payload is read by DMA
//!   (`loom_payload_dma_ps`), with `loom_pipeline_packets` scheduled ahead of the wire.
//! * `senic` (SENIC §4, §6.2.3 "schedule and pull"): per-class queues in host memory; the host
//!   writes a doorbell per burst (class id and length, no descriptor read needed to schedule);
//!   the NIC runs the scheduler (the scenario's policy; SENIC's own is a `senic` node) and
//!   pulls each scheduled packet (descriptor + payload) by DMA taking `senic_dma_ps`, at most
//!   `senic_max_pulls` outstanding.
//!
//! Invariant: every packet the host submits is transmitted once or reported as a drop (the
//! engine's leaf limits); packets become visible to the scheduler in time order.
//! Cost: the engine's per-packet cost plus O(1) queue operations; no allocation per packet in
//! steady state (a slab of packets indexed by the engine's packet id).

use std::collections::VecDeque;

use weft_core::classifier::PacketMeta;
use weft_core::policy::{Classification, NodeId};
use weft_core::sched::{Engine, FlowQueue, Packet};

use super::{Nic, NicCounters, NicKind, NicParams, Pkt};
use crate::slab::Slab;

#[derive(Debug, Clone, Default)]
struct Batch {
    pkts: Vec<u32>,
    bytes: u64,
    deadline_ps: Option<u64>,
}

/// A NIC (or software qdisc) running the engine `E`.
pub struct EngineNic<E: Engine> {
    kind: NicKind,
    engine: E,
    /// The packets the engine holds, by the id it hands back.
    slab: Slab<Pkt>,
    /// Metadata per flow (a flow's packets share it; stored once, not per packet).
    flow_meta: Vec<PacketMeta>,
    /// Per flow: its own queue in the engine (Loom §4.2.1: the OS gives each flow a
    /// descriptor queue bound to its leaf and shaping classes, so the NIC neither classifies
    /// nor looks the flow up per packet), or the classification of a flow no leaf accepts
    /// (its packets are offered classified, to be dropped and counted).
    flow_queue: Vec<Result<FlowQueue, Classification>>,
    batches: Vec<Batch>,
    /// Earliest pending batch deadline (cached; `u64::MAX` when none).
    min_deadline_ps: u64,
    visible: VecDeque<(u64, u32)>,
    stage: VecDeque<(u64, Pkt)>,
    stage_cap: usize,
    stage_latency_ps: u64,
    serial: bool,
    cpu_free_ps: u64,
    batch_bytes: u64,
    batch_timeout_ps: u64,
    descriptor_dma_ps: u64,
    descs_per_read: u64,
    cpu_ps_per_packet: u64,
    cpu_ps_per_doorbell: u64,
    drops: Vec<Pkt>,
    c: NicCounters,
}

impl<E: Engine> EngineNic<E> {
    /// Model `kind` (sq, loom or senic) around `engine`.
    pub fn new(
        kind: NicKind,
        engine: E,
        p: &NicParams,
        cores: u16,
        cpu_ps_per_packet: u64,
        cpu_ps_per_doorbell: u64,
    ) -> EngineNic<E> {
        let (stage_cap, stage_latency_ps, serial) = match kind {
            NicKind::Sq => (p.sq_ring_packets, p.sq_cpu_ps_per_packet, true),
            NicKind::Loom => (p.loom_pipeline_packets, p.loom_payload_dma_ps, false),
            NicKind::Senic => (p.senic_max_pulls, p.senic_dma_ps, false),
            _ => panic!("EngineNic does not model {kind:?}"),
        };
        EngineNic {
            kind,
            engine,
            slab: Slab::default(),
            flow_meta: Vec::new(),
            flow_queue: Vec::new(),
            batches: vec![Batch::default(); cores as usize],
            min_deadline_ps: u64::MAX,
            visible: VecDeque::new(),
            stage: VecDeque::new(),
            stage_cap: stage_cap.max(1),
            stage_latency_ps,
            serial,
            cpu_free_ps: 0,
            batch_bytes: p.loom_batch_bytes,
            batch_timeout_ps: p.loom_batch_timeout_ps,
            descriptor_dma_ps: if kind == NicKind::Loom {
                p.loom_descriptor_dma_ps
            } else {
                0
            },
            descs_per_read: p.descriptors_per_read.max(1),
            cpu_ps_per_packet,
            cpu_ps_per_doorbell,
            drops: Vec::new(),
            c: NicCounters::default(),
        }
    }

    /// The engine (for its counters).
    pub fn engine(&self) -> &E {
        &self.engine
    }

    fn store(&mut self, pkt: Pkt, meta: &PacketMeta) -> u32 {
        let f = pkt.flow as usize;
        if f >= self.flow_meta.len() || self.flow_meta[f] != *meta {
            if f >= self.flow_meta.len() {
                let unknown = Err(Classification::Unclassified { at: NodeId::ROOT });
                self.flow_meta.resize(f + 1, PacketMeta::default());
                self.flow_queue.resize(f + 1, unknown);
            }
            self.flow_meta[f] = *meta;
            let class = self.engine.program().classify(meta);
            let mut first = Packet::new(0, pkt.bytes, *meta);
            first.flow = f as u64;
            self.flow_queue[f] = self.engine.open_flow(&first, class).ok_or(class);
        }
        self.slab.insert(pkt)
    }

    fn offer(&mut self, i: u32, at_ps: u64) {
        let p = self.slab[i];
        let mut pkt = Packet::new(i as u64, p.bytes, self.flow_meta[p.flow as usize]);
        pkt.flow = p.flow as u64;
        let offered = match &self.flow_queue[p.flow as usize] {
            Ok(q) => self.engine.enqueue_flow(pkt, q, at_ps),
            Err(class) => self.engine.enqueue_classified(pkt, *class, at_ps),
        };
        if offered.is_err() {
            self.drops.push(self.slab.remove(i));
        }
    }

    fn doorbell(&mut self, core: usize, at_ps: u64) {
        let b = &mut self.batches[core];
        if b.pkts.is_empty() {
            b.deadline_ps = None;
            return;
        }
        self.c.doorbell_writes += 1;
        self.c.cpu_ps += self.cpu_ps_per_doorbell as u128;
        let visible_ps = at_ps.saturating_add(self.descriptor_dma_ps);
        let mut run_flow = u32::MAX;
        let mut run = 0u64;
        let mut reads = 0u64;
        for &i in &b.pkts {
            let p = &self.slab[i];
            if p.flow != run_flow {
                reads += run.div_ceil(self.descs_per_read);
                run_flow = p.flow;
                run = 0;
            }
            // A TSO segment is one descriptor.
            run += u64::from(p.starts_segment());
            self.visible.push_back((visible_ps, i));
        }
        reads += run.div_ceil(self.descs_per_read);
        if self.kind == NicKind::Loom {
            self.c.descriptor_reads += reads;
        }
        b.pkts.clear();
        b.bytes = 0;
        b.deadline_ps = None;
    }

    fn fill_stage(&mut self, now_ps: u64) {
        while self.stage.len() < self.stage_cap {
            if self.serial && self.cpu_free_ps > now_ps {
                break;
            }
            let Some(d) = self.engine.dequeue(now_ps) else {
                break;
            };
            let p = self.slab.remove(d.id as u32);
            let ready = now_ps.saturating_add(self.stage_latency_ps);
            if self.serial {
                self.cpu_free_ps = ready;
                self.c.cpu_ps += self.stage_latency_ps as u128;
                self.c.doorbell_writes += 1;
                self.c.cpu_ps += self.cpu_ps_per_doorbell as u128;
            }
            self.c.descriptor_reads += match self.kind {
                NicKind::Loom => 0,
                _ => 1,
            };
            self.c.payload_reads += 1;
            self.stage.push_back((ready, p));
        }
    }
}

impl<E: Engine> Nic for EngineNic<E> {
    fn submit(&mut self, now_ps: u64, pkt: Pkt, meta: &PacketMeta) {
        self.c.cpu_ps += self.cpu_ps_per_packet as u128;
        let i = self.store(pkt, meta);
        match self.kind {
            NicKind::Sq => {
                self.offer(i, now_ps);
                self.fill_stage(now_ps);
            }
            _ => {
                let core = pkt.core as usize;
                let b = &mut self.batches[core];
                b.pkts.push(i);
                b.bytes += pkt.bytes as u64;
                if self.kind == NicKind::Loom {
                    // A segment's descriptor is written whole: the batch is announced
                    // after its last packet.
                    if b.bytes >= self.batch_bytes && pkt.tso_more == 0 {
                        self.doorbell(core, now_ps);
                    } else if b.deadline_ps.is_none() {
                        let d = now_ps.saturating_add(self.batch_timeout_ps);
                        b.deadline_ps = Some(d);
                        self.min_deadline_ps = self.min_deadline_ps.min(d);
                    }
                }
            }
        }
    }

    fn flush(&mut self, now_ps: u64, core: u16) {
        if self.kind == NicKind::Senic || (self.kind == NicKind::Loom && self.batch_timeout_ps == 0)
        {
            self.doorbell(core as usize, now_ps);
            self.advance(now_ps);
        }
    }

    fn advance(&mut self, now_ps: u64) {
        if self.min_deadline_ps <= now_ps {
            let mut min = u64::MAX;
            for core in 0..self.batches.len() {
                if let Some(d) = self.batches[core].deadline_ps {
                    if d <= now_ps {
                        self.doorbell(core, d);
                    } else {
                        min = min.min(d);
                    }
                }
            }
            self.min_deadline_ps = min;
        }
        while let Some(&(t, i)) = self.visible.front() {
            if t > now_ps {
                break;
            }
            self.visible.pop_front();
            self.offer(i, t);
        }
        self.fill_stage(now_ps);
    }

    fn poll(&mut self, now_ps: u64) -> Option<Pkt> {
        self.advance(now_ps);
        match self.stage.front() {
            Some(&(ready, p)) if ready <= now_ps => {
                self.stage.pop_front();
                self.fill_stage(now_ps);
                Some(p)
            }
            _ => None,
        }
    }

    fn next_event(&self, now_ps: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| {
            if t > now_ps {
                next = Some(next.map_or(t, |n: u64| n.min(t)))
            }
        };
        if self.min_deadline_ps != u64::MAX {
            consider(self.min_deadline_ps);
        }
        if let Some(&(t, _)) = self.visible.front() {
            consider(t);
        }
        if let Some(&(t, _)) = self.stage.front() {
            consider(t);
        }
        if self.stage.len() < self.stage_cap && self.engine.backlog() > 0 {
            if self.serial {
                consider(self.cpu_free_ps);
            }
            if let Some(w) = self.engine.next_wakeup() {
                consider(w);
            }
        }
        next
    }

    fn take_drops(&mut self, out: &mut Vec<Pkt>) {
        out.append(&mut self.drops);
    }

    fn counters(&self) -> NicCounters {
        self.c
    }
}
