//! TCP applications in the run: each flow of a `tcp` application is a connection
//! ([`crate::tcp::TcpSender`] at the host, [`crate::tcp::TcpReceiver`] across the network
//! of [`crate::net`]) whose segments the host writes into the NIC model as MTU packets, and
//! whose ACKs, TX completions and retransmission timer come back as timed events.
//!
//! A packet's life: the sender hands a segment to the host (up to `tso` bytes, cut into
//! packets of at most one MSS, written as one burst); when its last bit leaves the NIC the
//! switch port gets it `delay` later and forwards, marks or drops it ([`SwitchPort`]); the
//! receiver gets it `delay` after it leaves the port, its receive path takes it (or drops it
//! at a full ring), receive offload merges it with the in-order packets of its TSO segment
//! (`Sim::tcp_receive`), and the receiver answers what goes up with an ACK that reaches
//! the sender [`Network::ack_return_ps`] later; the host learns the packet left
//! `completion` after its last bit did, which frees its bytes for TCP small queues. A
//! packet the NIC model drops frees them at once (the socket buffer is released) and is
//! lost, as one the port drops is: the connection finds out from duplicate ACKs or its
//! timer.
//!
//! With one sending host, the port and the receiver are visited when the packet leaves the
//! NIC rather than when it reaches them: exact, since the port's arrivals are then in
//! their departure order (each `delay` plus its own wire time after its start, and the link
//! sends one frame after another), and the receiver's state depends only on that order.
//! With several, a packet reaches the switch as a timed event ([`Ev::PortIn`]), so that
//! each destination's port takes its arrivals from every host in time order; what follows
//! the port (its receive path, its receiver) is visited then, in that port's order.
//! A segment that would reach the receiver after the run ends is not delivered.
//!
//! Invariants: a flow's payload handed to the NIC and not yet reported left is what its
//! sender counts against TCP small queues; every packet written is sent or dropped once
//! (the simulator's); a connection's retransmission timer has a pending event at or before
//! its deadline.
//!
//! Cost per packet: two timed events (its completion, its ACK; three with several sending
//! hosts) and O(1) port and receiver work; per segment one poll of the sender and one NIC
//! flush.

use std::collections::VecDeque;

use crate::net::{Network, Offer, RxPath, RxSpec, SwitchPort};
use crate::nic::{Nic, Pkt};
use crate::tcp::{Ack, TcpReceiver, TcpSender};

use super::event_loop::{Ev, Sim};
use super::ingress::Ingress;
use super::measure::{ReceiverTotals, SwitchTotals, TcpTotals};

/// The most payload receive offload merges into one segment (an IP packet's limit).
const GRO_MAX_BYTES: u32 = 65_535;

/// Packets of one flow merged by receive offload: payload `[seq, seq + len)`, CE-marked
/// or not.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gro {
    seq: u64,
    len: u32,
    ce: bool,
}

/// One connection: its two ends and its timer's pending event.
#[derive(Debug, Clone)]
pub(super) struct Conn {
    tx: TcpSender,
    /// Its receiver; it only gets segments that arrive within the run, so its in-order
    /// bytes are the connection's goodput.
    rx: TcpReceiver,
    /// A sized flow's bytes, when it started and when they had all arrived.
    size: Option<u64>,
    started_ps: u64,
    done_ps: Option<u64>,
    /// Requests whose responses are written and not yet all delivered, oldest first: the
    /// stream offset where each response ends, and its request slot.
    pending: VecDeque<(u64, u32)>,
    /// The earliest pending timer event, ps (`u64::MAX`: none).
    timer_at: u64,
    /// Packets the receiver's offload (GRO) holds merged, not yet gone up.
    gro: Option<Gro>,
}

/// The network's state in one run.
#[derive(Debug)]
pub(super) struct NetState {
    net: Network,
    /// Per destination (each sending host, then the receiver at the far end): the switch
    /// port towards it and its receive path.
    ports: Vec<SwitchPort>,
    rxs: Vec<RxPath>,
    /// Per destination, when the receiver has a policy: its cores take packets by it.
    pub(super) ingress: Vec<Option<Ingress>>,
    ack_return_ps: u64,
    /// Per flow of the run (as `Sim::flows`): its connection, once its application started
    /// it.
    conns: Vec<Option<Box<Conn>>>,
}

impl NetState {
    /// `seed`: the run's, for the receiver's flow hash.
    pub(super) fn new(
        net: &Network,
        link: &weft_core::policy::Link,
        flows: usize,
        seed: u64,
    ) -> NetState {
        NetState {
            net: net.clone(),
            ports: (0..=net.hosts)
                .map(|_| SwitchPort::new(net.port, link))
                .collect(),
            rxs: (0..=net.hosts)
                .map(|d| {
                    RxPath::new(RxSpec {
                        // The far end's (the last) hashes with the run's seed.
                        seed: seed.wrapping_add(u64::from(net.hosts - d)),
                        ..net.rx
                    })
                })
                .collect(),
            ingress: (0..=net.hosts)
                .map(|_| {
                    net.rx_policy
                        .as_ref()
                        .map(|p| Ingress::new(p.clone(), net.rx))
                })
                .collect(),
            ack_return_ps: net.ack_return_ps(link),
            conns: vec![None; flows],
        }
    }
}

impl<N: Nic> Sim<'_, N> {
    pub(super) fn net(&mut self) -> &mut NetState {
        self.net
            .as_mut()
            .expect("a TCP application runs with the scenario's network")
    }

    /// Flow `fi`'s connection (made when the flow started).
    fn conn(&mut self, fi: u32) -> &mut Conn {
        self.net().conns[fi as usize]
            .as_mut()
            .expect("a started TCP flow has a connection")
    }

    /// Flow `fi`'s connection, opened if it is not yet.
    fn open_conn(&mut self, fi: u32) -> &mut Conn {
        let net = self.net();
        let cfg = net.net.tcp;
        net.conns[fi as usize].get_or_insert_with(|| {
            Box::new(Conn {
                tx: TcpSender::new(cfg),
                rx: TcpReceiver::new(),
                size: None,
                started_ps: 0,
                done_ps: None,
                pending: VecDeque::new(),
                timer_at: u64::MAX,
                gro: None,
            })
        })
    }

    /// Flow `fi` of a `tcp` application starts (again): its connection opens the first
    /// time, with an endless send buffer or `size` bytes to send, and sends what it may.
    pub(super) fn tcp_start(&mut self, now: u64, fi: u32, size: Option<u64>) {
        let c = self.open_conn(fi);
        if c.tx.written() == 0 {
            c.tx.write(size.unwrap_or(u64::MAX));
            c.size = size;
            c.started_ps = now;
        }
        self.tcp_pump(now, fi);
    }

    /// Request `slot` was sent by the client at `now` over flow `fi`: it reaches the host
    /// after the network's return path.
    pub(super) fn tcp_request(&mut self, now: u64, fi: u32, slot: u32) {
        let t = now.saturating_add(self.net().ack_return_ps);
        if t <= self.sc.duration_ps {
            self.at(t, Ev::TcpRequest { flow: fi, slot });
        }
    }

    /// Request `slot` reached the host: flow `fi` writes its response.
    pub(super) fn tcp_respond(&mut self, now: u64, fi: u32, slot: u32) {
        let bytes = self.reqs[slot].bytes;
        let c = self.open_conn(fi);
        c.tx.write(bytes);
        let end = c.tx.written();
        c.pending.push_back((end, slot));
        self.tcp_pump(now, fi);
    }

    /// Writes every segment flow `fi`'s sender may send now, then arms its timer.
    pub(super) fn tcp_pump(&mut self, now: u64, fi: u32) {
        let f = &self.flows[fi as usize];
        let (active, app, core, meta, host) = (f.active, f.app, f.core, f.meta, f.host);
        // A request/response flow answers while its application runs or not (a request
        // that arrived is answered); its packets' delays are not the application's latency.
        let kind = &self.sc.apps[app as usize].kind;
        let (requests, completes) = (kind.requests_over_tcp(), kind.completes_over_tcp());
        let mss = self.net().net.tcp.mss;
        let mut wrote = false;
        // A stopped bulk flow sends nothing (its timer still runs).
        let sending = active || requests;
        loop {
            if !sending {
                break;
            }
            let conn = self.conn(fi);
            let Some(seg) = conn.tx.poll_send(now) else {
                break;
            };
            let mut seq = seg.seq;
            let end = seg.seq + u64::from(seg.len);
            // One TSO segment (a descriptor, which the NIC model splits into these frames).
            let frames = seg.len.div_ceil(mss);
            let seg_bytes = seg.len + frames * crate::net::TCP_HEADER_BYTES;
            let mut more = frames;
            while seq < end {
                let len = (end - seq).min(u64::from(mss)) as u32;
                more -= 1;
                let pkt = Pkt {
                    flow: fi,
                    app,
                    core,
                    bytes: Network::frame_bytes(len),
                    submit_ps: now,
                    req: u32::MAX,
                    seq,
                    tso_bytes: seg_bytes,
                    tso_frames: frames as u16,
                    tso_more: more as u16,
                };
                if !completes {
                    *self.queued[app as usize].entry(now).or_insert(0) += 1;
                }
                self.flows[fi as usize].queued_bytes += u64::from(pkt.bytes);
                self.events += 1;
                self.nics[host as usize].submit(now, pkt, &meta);
                seq += u64::from(len);
            }
            wrote = true;
        }
        if wrote {
            self.nics[host as usize].flush(now, core);
        }
        self.tcp_arm(fi);
    }

    /// Schedules a timer event for flow `fi` when its deadline is earlier than the one
    /// pending.
    fn tcp_arm(&mut self, fi: u32) {
        let end = self.sc.duration_ps;
        let conn = self.conn(fi);
        if let Some(t) = conn.tx.timer_ps() {
            if t < conn.timer_at && t <= end {
                conn.timer_at = t;
                self.at(t, Ev::Rto { flow: fi });
            }
        }
    }

    /// A TCP packet started on the wire at `now` and takes `wire` ps: its completion, its
    /// trip through the port to the receiver, and the ACK that comes back.
    pub(super) fn tcp_departed(&mut self, now: u64, wire: u64, p: Pkt) {
        let end = self.sc.duration_ps;
        let payload = p.bytes - crate::net::TCP_HEADER_BYTES;
        let left = now.saturating_add(wire);
        let net = self.net();
        let done = left.saturating_add(net.net.completion_ps);
        let at_port = left.saturating_add(net.net.delay_ps);
        let one_host = net.net.hosts == 1;
        // The host frees a segment when its last frame is done (the whole buffer at once).
        if done <= end && p.tso_more == 0 {
            self.at(
                done,
                Ev::TxDone {
                    flow: p.flow,
                    bytes: segment_payload(&p),
                },
            );
        }
        if one_host {
            // The port's arrivals come in their departure order (module doc).
            self.tcp_at_port(at_port, p.flow, p.seq, payload, p.tso_more > 0);
        } else if at_port <= end {
            self.at(
                at_port,
                Ev::PortIn {
                    flow: p.flow,
                    seq: p.seq,
                    payload,
                    more: p.tso_more > 0,
                },
            );
        }
    }

    /// TCP packet `[seq, seq + payload)` of flow `fi` reaches the switch at `at_port`:
    /// its destination's port forwards, marks or drops it, then its receive path, its
    /// receiver and the ACK that comes back. `more`: packets of its TSO segment follow.
    pub(super) fn tcp_at_port(
        &mut self,
        at_port: u64,
        fi: u32,
        seq: u64,
        payload: u32,
        more: bool,
    ) {
        let end = self.sc.duration_ps;
        let (to, app) = (
            self.flows[fi as usize].to as usize,
            self.flows[fi as usize].app,
        );
        let net = self.net();
        let offer = net.ports[to].offer(at_port, Network::frame_bytes(payload));
        let delay = net.net.delay_ps;
        let Offer::Forwarded { done_ps, ce } = offer else {
            return;
        };
        let at_host = done_ps.saturating_add(delay);
        if self.net().ingress[to].is_some() {
            // The receiver's policy decides when its cores take the packet.
            if at_host <= end {
                self.at(
                    at_host,
                    Ev::RxIn {
                        flow: fi,
                        seq,
                        payload,
                        ce,
                        more,
                    },
                );
            }
            return;
        }
        let Some(at_rx) = self.net().rxs[to].offer(at_host, fi) else {
            return;
        };
        if at_rx > end {
            return;
        }
        self.out.app_rx_delay[app as usize]
            .done
            .record(at_rx - at_host);
        self.tcp_receive(at_rx, fi, (seq, payload), ce, more);
    }

    /// A receive core is done with TCP packet `[seq, seq + payload)` of flow `fi` at
    /// `at_rx` (within the run). Receive offload (GRO) merges it with the packets of its
    /// flow just before it when it continues them in sequence with the same CE mark, up to
    /// 64 KiB, starting from a packet the receiver expects next: the merged segment goes up
    /// when its TSO segment's last packet (`!more`) arrives, or when a packet that does not
    /// continue it does (first). A packet beyond a hole goes up alone, so that each one
    /// gives a duplicate ACK (what SACK gives Linux's loss detection, packet by packet). A segment that
    /// goes up is taken by the receiver, completes what it completes, and is acknowledged.
    pub(super) fn tcp_receive(
        &mut self,
        at_rx: u64,
        fi: u32,
        (seq, payload): (u64, u32),
        ce: bool,
        more: bool,
    ) {
        let conn = self.conn(fi);
        if let Some(g) = conn.gro.take() {
            if g.seq + u64::from(g.len) == seq && g.ce == ce && g.len + payload <= GRO_MAX_BYTES {
                let g = Gro {
                    len: g.len + payload,
                    ..g
                };
                if more {
                    conn.gro = Some(g);
                } else {
                    self.tcp_deliver(at_rx, fi, g);
                }
                return;
            }
            self.tcp_deliver(at_rx, fi, g);
        }
        let g = Gro {
            seq,
            len: payload,
            ce,
        };
        let conn = self.conn(fi);
        if more && seq == conn.rx.delivered() {
            conn.gro = Some(g);
        } else {
            self.tcp_deliver(at_rx, fi, g);
        }
    }

    /// Segment `g` of flow `fi` goes up to its receiver at `at_rx`: the flow or requests it
    /// completes complete, and its ACK starts back.
    fn tcp_deliver(&mut self, at_rx: u64, fi: u32, g: Gro) {
        let Gro {
            seq,
            len: payload,
            ce,
        } = g;
        let end = self.sc.duration_ps;
        let app = self.flows[fi as usize].app;
        let ack_return = self.net().ack_return_ps;
        let mut done = std::mem::take(&mut self.done_slots);
        let conn = self.conn(fi);
        let ack = conn.rx.on_segment(seq, payload, ce);
        let delivered = conn.rx.delivered();
        // A sized flow completes when its last byte arrives: its completion time is its
        // application's latency.
        let fct = match conn.size {
            Some(b) if conn.done_ps.is_none() && delivered >= b => {
                conn.done_ps = Some(at_rx);
                Some(at_rx - conn.started_ps)
            }
            _ => None,
        };
        // Responses now all delivered complete when this segment arrives.
        while let Some(&(end_at, slot)) = conn.pending.front() {
            if end_at > delivered {
                break;
            }
            conn.pending.pop_front();
            done.push(slot);
        }
        if let Some(fct) = fct {
            self.out.app_latency[app as usize].done.record(fct);
        }
        for &slot in &done {
            self.complete_request(at_rx, slot);
        }
        done.clear();
        self.done_slots = done;
        let t = at_rx.saturating_add(ack_return);
        if t <= end {
            self.at(t, Ev::AckIn { flow: fi, ack });
        }
    }

    /// The NIC model dropped TCP packet `p`: its segment's bytes leave the host now if it
    /// was the segment's last frame (else when that one is done or dropped).
    pub(super) fn tcp_dropped(&mut self, now: u64, p: &Pkt) {
        if p.tso_more == 0 {
            self.tcp_left_host(now, p.flow, segment_payload(p));
        }
    }

    /// `bytes` of flow `fi`'s payload left the host.
    pub(super) fn tcp_left_host(&mut self, now: u64, fi: u32, bytes: u32) {
        let conn = self.conn(fi);
        conn.tx.on_left_host(bytes);
        self.tcp_pump(now, fi);
    }

    /// An ACK reached flow `fi`'s sender.
    pub(super) fn tcp_ack(&mut self, now: u64, fi: u32, ack: Ack) {
        let conn = self.conn(fi);
        conn.tx.on_ack(now, ack);
        self.tcp_pump(now, fi);
    }

    /// Flow `fi`'s timer event: the timer fires if due, else waits for its deadline.
    pub(super) fn tcp_timer(&mut self, now: u64, fi: u32) {
        let conn = self.conn(fi);
        conn.timer_at = u64::MAX;
        if conn.tx.timer_ps().is_some_and(|t| t <= now) {
            conn.tx.on_timer(now);
        }
        self.tcp_pump(now, fi);
    }

    /// At the end of the run: each application's connections' counts, and the port's.
    pub(super) fn tcp_totals(&mut self) {
        let end = self.sc.duration_ps;
        let Some(net) = self.net.as_mut() else {
            return;
        };
        for (fi, conn) in net.conns.iter().enumerate() {
            let Some(c) = conn else { continue };
            let app = self.flows[fi].app as usize;
            let (s, r) = (c.tx.stats(), c.rx.stats());
            let t = self.out.app_tcp[app].get_or_insert_with(TcpTotals::default);
            t.connections += 1;
            t.delivered_bytes += c.rx.delivered();
            if c.size.is_some() {
                match c.done_ps {
                    Some(d) => {
                        t.flows_completed += 1;
                        t.last_completion_ps = t.last_completion_ps.max(d);
                    }
                    // Its completion time is at least its age at the end.
                    None => self.out.app_latency[app]
                        .unfinished
                        .record(end - c.started_ps),
                }
                t.first_start_ps = Some(
                    t.first_start_ps
                        .map_or(c.started_ps, |s| s.min(c.started_ps)),
                );
            }
            let n = &mut t.counts;
            n.retransmitted_segments += s.retransmitted_segments;
            n.fast_retransmits += s.fast_retransmits;
            n.timeouts += s.timeouts;
            n.undos += s.undos;
            n.ecn_reductions += s.ecn_reductions;
            n.out_of_order += r.out_of_order;
            n.reordered += r.reordered;
        }
        // Every port's and every receive path's counts together.
        let mut sw = SwitchTotals::default();
        for p in &mut net.ports {
            let ps = p.stats();
            sw.forwarded += ps.forwarded;
            sw.dropped += ps.dropped;
            sw.marked += ps.marked;
            sw.max_backlog_bytes = sw.max_backlog_bytes.max(ps.max_backlog_bytes);
            sw.mean_backlog_bytes += p.mean_backlog_bytes(end);
        }
        self.out.switch = Some(sw);
        let mut rx = ReceiverTotals::default();
        for r in &net.rxs {
            let rs = r.stats();
            rx.processed += rs.processed;
            rx.dropped += rs.dropped;
            rx.max_ring = rx.max_ring.max(rs.max_ring);
        }
        for i in net.ingress.iter().flatten() {
            rx.processed += i.processed;
            rx.dropped += i.dropped;
        }
        self.out.receiver = Some(rx);
    }
}

/// The payload bytes of TCP packet `p`'s segment.
fn segment_payload(p: &Pkt) -> u32 {
    p.tso_bytes - u32::from(p.tso_frames) * crate::net::TCP_HEADER_BYTES
}
