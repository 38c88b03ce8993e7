//! A receiving host whose cores take packets by a policy (`network.receiver.policy_inline`):
//! the ingress side of PicNIC (SIGCOMM '19 §4.1), where each VM's traffic waits in a queue
//! of its own and the host's receive CPU serves the queues by the policy instead of first
//! come, first served.
//!
//! What: a packet that reaches the host (a timed event, [`Ev::RxIn`]) is offered to one
//! weft-core engine running the receiver's policy (classified by its flow's metadata, so a
//! leaf per tenant is a VM's ingress queue, with the leaf's limits as its bound); whenever
//! one of the host's `receiver.cores` is idle it takes the engine's next packet and is done
//! with it `cpu_per_packet` later ([`Ev::RxDone`]), when the TCP receiver gets it. A packet
//! the engine refuses (a full queue) is dropped and counted. A shaped policy may hold
//! packets back: the engine's next wake-up is a timed event ([`Ev::RxWake`]). The
//! per-core rings of [`crate::net::RxPath`] do not apply (`ring` is unused).
//!
//! Invariants: a core takes a packet only when it is idle, and takes the one the engine
//! sends first at that instant; every packet offered is processed, dropped, or still
//! queued or in a core at the end of the run; at most one wake-up is pending a
//! destination, at or before the engine's own.
//!
//! Cost: a packet's enqueue and dequeue in the engine and two timed events (its arrival and
//! its core finishing it); packets are kept in a [`crate::slab::Slab`], its slots reused.

use std::sync::Arc;

use weft_core::policy::Program;
use weft_core::sched::fast::FastEngine;
use weft_core::sched::{Engine, Packet};

use super::event_loop::{Ev, Sim};
use crate::net::{Network, RxSpec};
use crate::nic::Nic;
use crate::slab::Slab;

/// A packet waiting in, or being processed by, a receiving host.
#[derive(Debug, Clone, Copy)]
struct RxPkt {
    flow: u32,
    seq: u64,
    payload: u32,
    ce: bool,
    /// More packets of its TSO segment follow it.
    more: bool,
    /// When it reached the host, ps.
    at_host_ps: u64,
}

/// One receiving host's ingress policy and cores.
#[derive(Debug)]
pub(super) struct Ingress {
    engine: FastEngine,
    /// Cores not working on a packet.
    idle: u16,
    cost_ps: u64,
    slab: Slab<RxPkt>,
    /// The pending wake-up, ps (`u64::MAX`: none).
    wake_at: u64,
    /// Packets processed, and dropped by the policy's limits.
    pub(super) processed: u64,
    pub(super) dropped: u64,
}

impl Ingress {
    pub(super) fn new(policy: Arc<Program>, spec: RxSpec) -> Ingress {
        Ingress {
            engine: FastEngine::new(policy),
            idle: spec.cores.max(1),
            cost_ps: spec.cpu_ps_per_packet,
            slab: Slab::default(),
            wake_at: u64::MAX,
            processed: 0,
            dropped: 0,
        }
    }
}

impl<N: Nic> Sim<'_, N> {
    fn ingress(&mut self, dest: usize) -> &mut Ingress {
        self.net().ingress[dest]
            .as_mut()
            .expect("an ingress event's host has a receive policy")
    }

    /// TCP packet `[seq, seq + payload)` of flow `fi` reaches its receiving host: into the
    /// receiver's policy, then to an idle core if there is one.
    pub(super) fn ingress_arrive(
        &mut self,
        now: u64,
        fi: u32,
        (seq, payload): (u64, u32),
        ce: bool,
        more: bool,
    ) {
        let f = &self.flows[fi as usize];
        let (dest, meta) = (f.to as usize, f.meta);
        let ing = self.ingress(dest);
        let p = RxPkt {
            flow: fi,
            seq,
            payload,
            ce,
            more,
            at_host_ps: now,
        };
        let slot = ing.slab.insert(p);
        let pkt = Packet::new(u64::from(slot), Network::frame_bytes(payload), meta);
        if ing.engine.enqueue(pkt, now).is_err() {
            ing.slab.remove(slot);
            ing.dropped += 1;
            return;
        }
        self.ingress_serve(now, dest as u16);
    }

    /// Every idle core of `dest` takes the next packet the policy sends at `now`; when it
    /// holds packets back, a wake-up is set for when one may go.
    pub(super) fn ingress_serve(&mut self, now: u64, dest: u16) {
        let end = self.sc.duration_ps;
        loop {
            let ing = self.ingress(dest as usize);
            if ing.idle == 0 {
                return;
            }
            let Some(d) = ing.engine.dequeue(now) else {
                if let Some(w) = ing.engine.next_wakeup() {
                    if w < ing.wake_at && w <= end {
                        ing.wake_at = w;
                        self.at(w, Ev::RxWake { dest });
                    }
                }
                return;
            };
            ing.idle -= 1;
            let t = now.saturating_add(ing.cost_ps);
            if t <= end {
                self.at(
                    t,
                    Ev::RxDone {
                        dest,
                        slot: d.id as u32,
                    },
                );
            }
        }
    }

    /// `dest`'s pending wake-up is due.
    pub(super) fn ingress_wake(&mut self, now: u64, dest: u16) {
        self.ingress(dest as usize).wake_at = u64::MAX;
        self.ingress_serve(now, dest);
    }

    /// A core of `dest` is done with ingress packet `slot`: the TCP receiver gets it, and the
    /// core takes the next.
    pub(super) fn ingress_done(&mut self, now: u64, dest: u16, slot: u32) {
        let ing = self.ingress(dest as usize);
        ing.idle += 1;
        ing.processed += 1;
        let p = ing.slab.remove(slot);
        let app = self.flows[p.flow as usize].app as usize;
        self.out.app_rx_delay[app].done.record(now - p.at_host_ps);
        self.tcp_receive(now, p.flow, (p.seq, p.payload), p.ce, p.more);
        self.ingress_serve(now, dest);
    }
}
