//! The applications, the simulator's traffic sources: their flows ([`Flow`], placed on the
//! application's cores by [`build_flows`]), the requests in flight ([`Req`]), the flow count
//! of each schedule step ([`FlowsAt`]), and what each timed event makes them write: a
//! schedule step starts or stops flows, a request writes its response, a UDP tick a packet,
//! a bulk flow tops its window up a segment at a time ([`Sim::handle`]).
//!
//! Invariants: flows `0..n` of an application are active, `n` its flow count at the last
//! step; a request's slot is in use from its arrival until its last packet left or was
//! dropped; every write reaches the NIC model as MTU packets followed by one flush.
//!
//! Cost: a step costs the flows it starts or stops; a write one NIC submission per packet;
//! a request's flow count is a binary search over its application's schedule.

use weft_core::classifier::{Field, PacketMeta};

use super::event_loop::{Ev, Sim};
use crate::nic::{Nic, Pkt};
use crate::rng::Rng;
use crate::scenario::{App, AppKind, Placement, Scenario, SizeDist, MAX_OFFERED_LOAD};

/// `App::flows_at` in O(log steps): the flow count of the application's last schedule entry
/// (in the schedule's order) at or before a time, as `flows_at` reads it.
#[derive(Debug, Clone)]
pub(super) struct FlowsAt {
    /// Distinct times of the schedule, ascending.
    times: Vec<u64>,
    /// The flow count from `times[i]` on.
    flows: Vec<u32>,
}

impl FlowsAt {
    pub(super) fn new(a: &App) -> FlowsAt {
        let mut order: Vec<usize> = (0..a.schedule.len()).collect();
        order.sort_by_key(|&i| (a.schedule[i].0, i));
        let (mut times, mut flows) = (Vec::new(), Vec::new());
        // The latest entry (in the schedule's order) among those at or before the time.
        let mut last: Option<usize> = None;
        for (k, &i) in order.iter().enumerate() {
            last = Some(last.map_or(i, |l| l.max(i)));
            let t = a.schedule[i].0;
            if order.get(k + 1).is_none_or(|&j| a.schedule[j].0 != t) {
                times.push(t);
                flows.push(a.schedule[last.expect("set above")].1);
            }
        }
        FlowsAt { times, flows }
    }

    pub(super) fn at(&self, t: u64) -> u32 {
        match self.times.partition_point(|&x| x <= t) {
            0 => 0,
            n => self.flows[n - 1],
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Flow {
    pub(super) app: u16,
    /// Its sending host, and its core there.
    pub(super) host: u16,
    pub(super) core: u16,
    /// Where its TCP connection goes (`App::to`).
    pub(super) to: u16,
    pub(super) active: bool,
    pub(super) retry_pending: bool,
    pub(super) queued_bytes: u64,
    pub(super) meta: PacketMeta,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Req {
    pub(super) arrival_ps: u64,
    pub(super) remaining: u32,
    pub(super) failed: bool,
    pub(super) flow: u32,
    /// Arrived within the run (one at its last instant, `duration_ps`, does not count).
    pub(super) counted: bool,
    /// The response's bytes (over TCP: written when the request reaches the host).
    pub(super) bytes: u64,
}

/// Flows of every application (its most flows at once), placed on its cores.
pub(super) fn build_flows(sc: &Scenario) -> Vec<Flow> {
    let mut rng = Rng::new(sc.seed, 0xF10E);
    let mut flows = Vec::new();
    for (ai, a) in sc.apps.iter().enumerate() {
        for k in 0..a.max_flows() {
            let core = match sc.host.placement {
                Placement::Random => a.cores[rng.below(a.cores.len() as u64) as usize],
                Placement::RoundRobin => a.cores[k as usize % a.cores.len()],
            };
            let mut meta = a.meta;
            if meta.present & Field::Sport.bit() == 0 {
                meta.set_int(Field::Sport, 10_000 + k as u64);
            }
            flows.push(Flow {
                app: ai as u16,
                host: a.host,
                core,
                to: a.to,
                active: false,
                retry_pending: false,
                queued_bytes: 0,
                meta,
            });
        }
    }
    flows
}

impl<N: Nic> Sim<'_, N> {
    pub(super) fn handle(&mut self, now: u64, ev: Ev) {
        let sc = self.sc;
        match ev {
            Ev::Step { app, step } => {
                let a = &sc.apps[app as usize];
                let n = a.schedule[step as usize].1;
                let f0 = self.app_flow0[app as usize];
                let was_active =
                    self.flows_at[app as usize].at(now.saturating_sub(1)) > 0 && step > 0;
                // Flows 0..before are active: only those between the two counts change
                // (the lowest first, as when every flow was visited).
                let before = std::mem::replace(&mut self.app_active[app as usize], n);
                self.events += u64::from(before.abs_diff(n));
                for k in n..before {
                    self.flows[(f0 + k) as usize].active = false;
                }
                for k in before..n {
                    let fi = f0 + k;
                    self.flows[fi as usize].active = true;
                    match a.kind {
                        AppKind::Bulk { .. } => self.refill(now, fi),
                        AppKind::Udp { .. } => self.at(now, Ev::Udp { flow: fi }),
                        AppKind::Tcp { size } => self.tcp_start(now, fi, size),
                        AppKind::RequestResponse {
                            closed_loop: true, ..
                        } => self.at(now, Ev::ClosedRequest { flow: fi }),
                        AppKind::RequestResponse { .. } => {}
                    }
                }
                if let AppKind::RequestResponse {
                    rate_per_s,
                    closed_loop: false,
                    ..
                } = a.kind
                {
                    if n > 0 && !was_active {
                        let gap = self.rngs[app as usize].exp(1e12 / rate_per_s) as u64;
                        self.at(now.saturating_add(gap.max(1)), Ev::Request { app });
                    }
                }
            }
            Ev::Request { app } => {
                let a = &sc.apps[app as usize];
                let AppKind::RequestResponse { rate_per_s, .. } = a.kind else {
                    return;
                };
                let n = self.flows_at[app as usize].at(now);
                if n == 0 {
                    return;
                }
                let gap = self.rngs[app as usize].exp(1e12 / rate_per_s) as u64;
                let k = self.app_next_flow[app as usize] % n;
                self.app_next_flow[app as usize] = k + 1;
                let fi = self.app_flow0[app as usize] + k;
                self.issue_request(now, app, fi);
                self.at(now.saturating_add(gap.max(1)), Ev::Request { app });
            }
            Ev::ClosedRequest { flow } => {
                let f = &self.flows[flow as usize];
                if f.active {
                    let app = f.app as u32;
                    self.issue_request(now, app, flow);
                }
            }
            Ev::Udp { flow } => {
                let f = &self.flows[flow as usize];
                if !f.active {
                    return;
                }
                let a = &sc.apps[f.app as usize];
                let AppKind::Udp {
                    rate_bps,
                    socket_limit_bytes,
                } = a.kind
                else {
                    return;
                };
                let mtu = sc.host.mtu_bytes as u64;
                // Unlimited: twice the link rate, the most an explicit rate may be (in 128
                // bits: the link may be 2^64 - 1 bit/s).
                let rate = rate_bps.map_or(
                    MAX_OFFERED_LOAD as u128 * sc.program.link.rate_bps as u128,
                    u128::from,
                );
                let gap = (mtu as u128 * 8 * 1_000_000_000_000).div_ceil(rate.max(1)) as u64;
                if f.queued_bytes + mtu > socket_limit_bytes {
                    self.out.app_drops[f.app as usize] += 1;
                } else {
                    self.send(now, flow, mtu, u32::MAX);
                }
                self.at(now.saturating_add(gap.max(1)), Ev::Udp { flow });
            }
            Ev::Retry { flow } => {
                self.flows[flow as usize].retry_pending = false;
                self.refill(now, flow);
            }
            Ev::TxDone { flow, bytes } => self.tcp_left_host(now, flow, bytes),
            Ev::AckIn { flow, ack } => self.tcp_ack(now, flow, ack),
            Ev::Rto { flow } => self.tcp_timer(now, flow),
            Ev::Migrate => self.migrate(now),
            Ev::PortIn {
                flow,
                seq,
                payload,
                more,
            } => self.tcp_at_port(now, flow, seq, payload, more),
            Ev::RxIn {
                flow,
                seq,
                payload,
                ce,
                more,
            } => self.ingress_arrive(now, flow, (seq, payload), ce, more),
            Ev::RxDone { dest, slot } => self.ingress_done(now, dest, slot),
            Ev::RxWake { dest } => self.ingress_wake(now, dest),
            Ev::TcpRequest { flow, slot } => self.tcp_respond(now, flow, slot),
        }
    }

    /// Every flow of an application with several cores moves to one of them drawn at
    /// random (it may stay), and the next move is scheduled.
    fn migrate(&mut self, now: u64) {
        let sc = self.sc;
        self.events += self.flows.len() as u64;
        for f in &mut self.flows {
            let cores = &sc.apps[f.app as usize].cores;
            if cores.len() > 1 {
                f.core = cores[self.migrate_rng.below(cores.len() as u64) as usize];
            }
        }
        if let Some(m) = sc.host.migrate_ps {
            let t = now.saturating_add(m);
            if t < sc.duration_ps {
                self.at(t, Ev::Migrate);
            }
        }
    }

    /// A request of application `app` arrives for flow `fi`: the response is written now.
    fn issue_request(&mut self, now: u64, app: u32, fi: u32) {
        let sc = self.sc;
        let AppKind::RequestResponse { size, .. } = &sc.apps[app as usize].kind else {
            return;
        };
        let bytes = match *size {
            SizeDist::Fixed(b) => b,
            SizeDist::Exponential(m) => (self.rngs[app as usize].exp(m as f64) as u64).max(1),
        };
        let mtu = sc.host.mtu_bytes as u64;
        let counted = now < sc.duration_ps;
        if counted {
            self.out.requests_issued[app as usize] += 1;
        }
        let tcp = sc.apps[app as usize].kind.requests_over_tcp();
        let req = Req {
            arrival_ps: now,
            // Over TCP the response completes when it has all arrived, not packet by packet.
            remaining: if tcp { 1 } else { bytes.div_ceil(mtu) as u32 },
            failed: false,
            flow: fi,
            counted,
            bytes,
        };
        let slot = self.reqs.insert(req);
        if tcp {
            self.tcp_request(now, fi, slot);
        } else {
            self.send(now, fi, bytes, slot);
        }
    }

    /// A request finished (or failed) at `t`: a closed-loop flow sends its next one then.
    pub(super) fn request_done(&mut self, t: u64, slot: u32) {
        let fi = self.reqs.remove(slot).flow;
        let app = self.flows[fi as usize].app as usize;
        if let AppKind::RequestResponse {
            closed_loop: true, ..
        } = self.sc.apps[app].kind
        {
            self.at(t, Ev::ClosedRequest { flow: fi });
        }
    }

    /// Writes `bytes` on flow `fi` as MTU packets, then ends the burst (doorbells).
    pub(super) fn send(&mut self, now: u64, fi: u32, bytes: u64, req: u32) {
        let mtu = self.sc.host.mtu_bytes as u64;
        let f = &self.flows[fi as usize];
        let (app, core, meta, host) = (f.app, f.core, f.meta, f.host);
        if req == u32::MAX && bytes > 0 {
            *self.queued[app as usize].entry(now).or_insert(0) += bytes.div_ceil(mtu);
        }
        self.events += bytes.div_ceil(mtu);
        let mut left = bytes;
        while left > 0 {
            let b = left.min(mtu);
            left -= b;
            let pkt = Pkt {
                flow: fi,
                app,
                core,
                bytes: b as u32,
                submit_ps: now,
                req,
                seq: 0,
                tso_bytes: b as u32,
                tso_frames: 1,
                tso_more: 0,
            };
            self.flows[fi as usize].queued_bytes += b;
            self.nics[host as usize].submit(now, pkt, &meta);
        }
        self.nics[host as usize].flush(now, core);
    }

    /// Tops a bulk flow up to its window, a segment at a time.
    pub(super) fn refill(&mut self, now: u64, fi: u32) {
        let f = &self.flows[fi as usize];
        if !f.active {
            return;
        }
        let AppKind::Bulk { window_bytes } = self.sc.apps[f.app as usize].kind else {
            return;
        };
        let seg = self.sc.host.segment_bytes.min(window_bytes).max(1);
        while self.flows[fi as usize].queued_bytes + seg <= window_bytes {
            self.send(now, fi, seg, u32::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FlowsAt;
    use crate::scenario::{App, AppKind};

    /// The index reads every schedule as `App::flows_at` does, at every time around its
    /// entries: sorted ones, ties, and a stop written before a later step (the schedule is
    /// then out of time order, and `flows_at` takes the last entry at or before the time).
    #[test]
    fn flows_at_index_reads_as_flows_at() {
        let schedules: [&[(u64, u32)]; 5] = [
            &[(0, 3)],
            &[(10, 2), (20, 5), (30, 0)],
            &[(0, 1), (5, 4), (5, 2), (9, 0)],
            &[(0, 8), (40, 16), (20, 0)],
            &[(7, 1), (7, 0), (7, 3), (100, 2), (50, 0)],
        ];
        for sched in schedules {
            let app = App {
                name: "a".into(),
                tenant: 0,
                meta: Default::default(),
                kind: AppKind::Bulk { window_bytes: 1 },
                cores: vec![0],
                schedule: sched.to_vec(),
                schedule_at: vec![None; sched.len()],
                prioritized: None,
                dcb_class: None,
                host: 0,
                to: 1,
            };
            let idx = FlowsAt::new(&app);
            for &(t, _) in sched {
                for t in [t.saturating_sub(1), t, t + 1, u64::MAX] {
                    assert_eq!(idx.at(t), app.flows_at(t), "{sched:?} at {t}");
                }
            }
        }
    }
}
