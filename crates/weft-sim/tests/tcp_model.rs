//! The TCP model ([`weft_sim::tcp`]) in closed loop over a small, independent model of a
//! path written here: each sender's host link (FIFO, faster than the bottleneck, reporting
//! to the sender when a packet has left the host) → one bottleneck link (rate, drop-tail
//! buffer in bytes, ECN marking when the bytes queued exceed K as a packet arrives) → a
//! one-way delay → the receiver, whose ACK comes back after another one-way delay (ACKs
//! are not queued). Event-driven, integer picoseconds, one event heap ordered by (time,
//! insertion order), so every run is deterministic.
//!
//! The checks are the behaviours the simulator needs from TCP: a single flow fills a link
//! with a 1-BDP buffer and repairs drops without timeouts; flows sharing a bottleneck get
//! equal shares (so tenants get shares in proportion to their flow counts); DCTCP keeps
//! the queue short and the link busy; a tail loss is repaired by the timer, which backs
//! off when the resend is lost too.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use weft_sim::tcp::{Ack, Cc, ReceiverStats, SenderStats, TcpConfig, TcpReceiver, TcpSender};

const US: u64 = 1_000_000;
const MS: u64 = 1_000_000_000;
const MSS: u32 = 1448;
/// Header bytes per packet: a full segment is a 1500-byte packet on the wire.
const HDR: u64 = 52;
const WIRE: u64 = MSS as u64 + HDR;

/// Time to serialize `bytes` at `bps`, ps (rounded up).
fn ser_ps(bytes: u64, bps: u64) -> u64 {
    (bytes * 8 * 1_000_000_000_000).div_ceil(bps)
}

#[derive(Debug, Clone, Copy)]
struct Path {
    /// Bottleneck rate, bit/s.
    rate_bps: u64,
    /// Each host's link rate, bit/s.
    host_bps: u64,
    /// Propagation delay from the bottleneck to the receivers, ps.
    fwd_ps: u64,
    /// Propagation delay of the ACKs back to the senders, ps.
    back_ps: u64,
    /// Bottleneck buffer, bytes (drop-tail: a packet that does not fit is dropped).
    buffer: u64,
    /// ECN marking threshold, bytes queued as a packet arrives (`None`: no marking).
    ecn_k: Option<u64>,
}

impl Path {
    /// A path whose propagation round trip is `rtt_ps`, split evenly.
    fn new(rate_bps: u64, rtt_ps: u64, buffer: u64) -> Path {
        Path {
            rate_bps,
            host_bps: 4 * rate_bps,
            fwd_ps: rtt_ps / 2,
            back_ps: rtt_ps - rtt_ps / 2,
            buffer,
            ecn_k: None,
        }
    }
}

/// A packet of a flow: payload bytes `[seq, seq + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Pkt {
    flow: u32,
    seq: u64,
    len: u32,
    retransmit: bool,
    ce: bool,
}

impl Pkt {
    fn wire(&self) -> u64 {
        u64::from(self.len) + HDR
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A flow starts: it writes this many bytes (`u64::MAX`: unlimited).
    Start(u32, u64),
    /// A host link finished sending its head packet.
    HostDone(u32),
    /// The bottleneck finished sending its head packet.
    LinkDone,
    /// A packet reaches its receiver.
    Arrive(Pkt),
    /// An ACK (ack, ece, dsack) reaches its sender.
    AckBack(u32, u64, bool, bool),
    /// A sender's retransmission timer, as scheduled for this time.
    Timer(u32),
}

struct Flow {
    tx: TcpSender,
    rx: TcpReceiver,
    host: VecDeque<Pkt>,
    /// Payload bytes on the host link (queued or being sent).
    host_bytes: u64,
    /// The most `host_bytes` has been.
    max_host_bytes: u64,
    /// The time of the one live `Timer` event, if any.
    timer_at: Option<u64>,
    /// (time, RTO before the timeout) of each timeout that fired.
    fired: Vec<(u64, u64)>,
}

type DropFn = Box<dyn FnMut(&Pkt) -> bool>;

struct Net {
    path: Path,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    flows: Vec<Flow>,
    link: VecDeque<Pkt>,
    /// Bytes in the bottleneck buffer, the packet on the wire included.
    queued: u64,
    /// ∫ queued dt since `since`, byte·ps.
    queue_area: u128,
    /// When `queued` last changed.
    queue_t: u64,
    /// Start of the measurement for `queue_area`, `link_bytes` and `max_queue`.
    since: u64,
    max_queue: u64,
    /// Wire bytes the bottleneck finished sending since `since`.
    link_bytes: u64,
    drops: u64,
    marks: u64,
    /// Forced losses (decided before the buffer is checked).
    drop_fn: Option<DropFn>,
    /// A running digest of every event handled.
    digest: u64,
}

impl Net {
    fn new(path: Path, cfgs: &[TcpConfig]) -> Net {
        let flows = cfgs
            .iter()
            .map(|c| Flow {
                tx: TcpSender::new(*c),
                rx: TcpReceiver::new(),
                host: VecDeque::new(),
                host_bytes: 0,
                max_host_bytes: 0,
                timer_at: None,
                fired: Vec::new(),
            })
            .collect();
        Net {
            path,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            flows,
            link: VecDeque::new(),
            queued: 0,
            queue_area: 0,
            queue_t: 0,
            since: 0,
            max_queue: 0,
            link_bytes: 0,
            drops: 0,
            marks: 0,
            drop_fn: None,
            digest: 0xcbf2_9ce4_8422_2325,
        }
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    /// Starts flow `f` at `t` with unlimited data.
    fn start(&mut self, f: usize, t: u64) {
        self.at(t, Ev::Start(f as u32, u64::MAX));
    }

    /// Restarts the queue and link measurements at the current time.
    fn measure_from_now(&mut self) {
        self.account_queue();
        self.since = self.now;
        self.queue_area = 0;
        self.max_queue = self.queued;
        self.link_bytes = 0;
    }

    fn account_queue(&mut self) {
        self.queue_area += u128::from(self.queued) * u128::from(self.now - self.queue_t);
        self.queue_t = self.now;
    }

    /// Mean bytes queued at the bottleneck since the last `measure_from_now`.
    fn mean_queue(&mut self) -> f64 {
        self.account_queue();
        self.queue_area as f64 / (self.now - self.since) as f64
    }

    /// Wire bytes sent by the bottleneck since the last `measure_from_now`, over its
    /// capacity in that time.
    fn utilization(&self) -> f64 {
        let cap = (self.now - self.since) as f64 * self.path.rate_bps as f64 / 8e12;
        self.link_bytes as f64 / cap
    }

    fn delivered(&self, f: usize) -> u64 {
        self.flows[f].rx.delivered()
    }

    /// Handles every event up to and including time `t`.
    fn run_until(&mut self, t: u64) {
        while let Some(&Reverse((when, _, ev))) = self.heap.peek() {
            if when > t {
                break;
            }
            self.heap.pop();
            self.now = when;
            let code = match ev {
                Ev::Start(f, b) => u64::from(f) ^ b,
                Ev::HostDone(f) => 1 << 40 | u64::from(f),
                Ev::LinkDone => 2 << 40,
                Ev::Arrive(p) => (3 << 40 | u64::from(p.flow)) ^ p.seq << 8 ^ u64::from(p.ce),
                Ev::AckBack(f, a, e, _) => (4 << 40 | u64::from(f)) ^ a << 8 ^ u64::from(e),
                Ev::Timer(f) => 5 << 40 | u64::from(f),
            };
            // FNV-1a over (time, event).
            for x in [when, code] {
                self.digest = (self.digest ^ x).wrapping_mul(0x0100_0000_01b3);
            }
            self.handle(ev);
        }
        self.now = self.now.max(t);
    }

    fn handle(&mut self, ev: Ev) {
        let now = self.now;
        match ev {
            Ev::Start(f, bytes) => {
                self.flows[f as usize].tx.write(bytes);
                self.pump(f);
            }
            Ev::HostDone(f) => {
                let fl = &mut self.flows[f as usize];
                let Some(p) = fl.host.pop_front() else {
                    unreachable!("host link of flow {f} done with nothing on it")
                };
                fl.tx.on_left_host(p.len);
                fl.host_bytes -= u64::from(p.len);
                if let Some(next) = fl.host.front() {
                    let d = ser_ps(next.wire(), self.path.host_bps);
                    self.at(now + d, Ev::HostDone(f));
                }
                self.enqueue(p);
                self.pump(f);
            }
            Ev::LinkDone => {
                let Some(p) = self.link.pop_front() else {
                    unreachable!("bottleneck done with nothing on it")
                };
                self.account_queue();
                self.queued -= p.wire();
                self.link_bytes += p.wire();
                self.at(now + self.path.fwd_ps, Ev::Arrive(p));
                if let Some(next) = self.link.front() {
                    let d = ser_ps(next.wire(), self.path.rate_bps);
                    self.at(now + d, Ev::LinkDone);
                }
            }
            Ev::Arrive(p) => {
                let a = self.flows[p.flow as usize]
                    .rx
                    .on_segment(p.seq, p.len, p.ce);
                self.at(
                    now + self.path.back_ps,
                    Ev::AckBack(p.flow, a.ack, a.ece, a.dsack),
                );
            }
            Ev::AckBack(f, ack, ece, dsack) => {
                self.flows[f as usize]
                    .tx
                    .on_ack(now, Ack { ack, ece, dsack });
                self.pump(f);
            }
            Ev::Timer(f) => {
                let fl = &mut self.flows[f as usize];
                if fl.timer_at != Some(now) {
                    return; // superseded
                }
                fl.timer_at = None;
                match fl.tx.timer_ps() {
                    Some(t) if t <= now => {
                        let before = fl.tx.stats().timeouts;
                        let rto = fl.tx.rto_ps();
                        fl.tx.on_timer(now);
                        assert_eq!(fl.tx.stats().timeouts, before + 1);
                        fl.fired.push((now, rto));
                    }
                    _ => {}
                }
                self.pump(f);
            }
        }
    }

    /// Bottleneck arrival: forced loss, drop-tail, ECN mark, then FIFO.
    fn enqueue(&mut self, mut p: Pkt) {
        if let Some(d) = &mut self.drop_fn {
            if d(&p) {
                self.drops += 1;
                return;
            }
        }
        if self.queued + p.wire() > self.path.buffer {
            self.drops += 1;
            return;
        }
        if self.path.ecn_k.is_some_and(|k| self.queued > k) {
            p.ce = true;
            self.marks += 1;
        }
        self.account_queue();
        self.queued += p.wire();
        self.max_queue = self.max_queue.max(self.queued);
        self.link.push_back(p);
        if self.link.len() == 1 {
            let d = ser_ps(p.wire(), self.path.rate_bps);
            self.at(self.now + d, Ev::LinkDone);
        }
    }

    /// Takes every segment flow `f` will send now, cuts it into packets on the host link,
    /// and keeps one live timer event per flow: a new one only when the sender's deadline
    /// is earlier than the one scheduled (a superseded event is ignored); an event that
    /// finds the deadline moved later does nothing but schedule it again here.
    fn pump(&mut self, f: u32) {
        let now = self.now;
        let host_bps = self.path.host_bps;
        let fl = &mut self.flows[f as usize];
        let mut first = None;
        while let Some(seg) = fl.tx.poll_send(now) {
            let mut off = 0;
            while off < seg.len {
                let len = (seg.len - off).min(MSS);
                let p = Pkt {
                    flow: f,
                    seq: seg.seq + u64::from(off),
                    len,
                    retransmit: seg.retransmit,
                    ce: false,
                };
                if fl.host.is_empty() && first.is_none() {
                    first = Some(p);
                }
                fl.host.push_back(p);
                fl.host_bytes += u64::from(len);
                fl.max_host_bytes = fl.max_host_bytes.max(fl.host_bytes);
                off += len;
            }
        }
        let timer = fl.tx.timer_ps();
        let reschedule = match (timer, fl.timer_at) {
            (Some(t), Some(s)) => t < s,
            (Some(_), None) => true,
            _ => false,
        };
        if let Some(p) = first {
            self.at(now + ser_ps(p.wire(), host_bps), Ev::HostDone(f));
        }
        if reschedule {
            let t = timer.unwrap_or(now).max(now);
            self.flows[f as usize].timer_at = Some(t);
            self.at(t, Ev::Timer(f));
        }
    }

    fn sender(&self, f: usize) -> SenderStats {
        self.flows[f].tx.stats()
    }

    fn receiver(&self, f: usize) -> ReceiverStats {
        self.flows[f].rx.stats()
    }

    fn total(&self, f: impl Fn(&SenderStats) -> u64) -> u64 {
        self.flows.iter().map(|fl| f(&fl.tx.stats())).sum()
    }
}

/// Jain's fairness index of `xs`: 1 when all are equal, 1/n when one has everything.
fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let q: f64 = xs.iter().map(|x| x * x).sum();
    s * s / (xs.len() as f64 * q)
}

/// Data-centre settings: the Linux defaults with a 1 ms RTO floor.
fn dc(cc: Cc) -> TcpConfig {
    TcpConfig {
        cc,
        min_rto_ps: MS,
        ..TcpConfig::default()
    }
}

const GBPS: u64 = 1_000_000_000;

/// One NewReno flow, 10 Gbit/s, 50 µs RTT, a buffer of one BDP (62.5 kB): it fills the
/// link (a 1-BDP drop-tail buffer is what Reno needs to never drain it: after a halving
/// the window is still one BDP) and repairs its drops by fast retransmit and NewReno
/// recovery, never by timeout.
///
/// Slow start overshoots the buffer and loses dozens of segments of one window; without
/// SACK, NewReno repairs one per round trip, so in-order delivery lags the arrivals for a
/// few milliseconds. Both are checked over 5 to 10 ms: the bytes delivered in order, and the
/// distinct bytes that arrived (what the link carried usefully).
#[test]
fn tcp_one_newreno_flow_fills_the_link_and_recovers_without_timeouts() {
    let rate = 10 * GBPS;
    let rtt = 50 * US;
    let bdp = rate / 8 * rtt / 1_000_000_000_000;
    let mut net = Net::new(Path::new(rate, rtt, bdp), &[dc(Cc::NewReno)]);
    net.start(0, 0);
    net.run_until(5 * MS);
    let (d5, r5) = (net.delivered(0), net.flows[0].rx.received_bytes());
    net.measure_from_now();
    net.run_until(10 * MS);
    let (d10, r10) = (net.delivered(0), net.flows[0].rx.received_bytes());
    // Payload the link could carry in 5 ms, with 1448 of every 1500 wire bytes payload.
    let capacity = (rate / 8) as f64 * 0.005 * f64::from(MSS) / WIRE as f64;
    let delivered = (d10 - d5) as f64 / capacity;
    let received = (r10 - r5) as f64 / capacity;
    let st = net.sender(0);
    let mean = net.mean_queue();
    println!(
        "one flow, 5-10 ms, of the payload capacity: delivered in order {delivered:.3}, \
         arrived {received:.3}; link utilization {:.3}, drops {}, fast retransmits {}, \
         timeouts {}, mean queue {mean:.0} B, holes at 5 ms? {}",
        net.utilization(),
        net.drops,
        st.fast_retransmits,
        st.timeouts,
        r5 > d5,
    );
    assert!(
        delivered >= 0.90,
        "delivered {delivered:.3} of the capacity"
    );
    assert!(received >= 0.90, "received {received:.3} of the capacity");
    assert!(net.drops > 0, "the test needs drops to check their repair");
    assert!(st.fast_retransmits > 0);
    assert_eq!(st.timeouts, 0, "drops repaired without RTO: {st:?}");
    assert_eq!(net.receiver(0).duplicates, 0, "no needless resend");
}

/// Two NewReno flows started together through one bottleneck: AIMD converges to equal
/// shares (Chiu and Jain 1989), so Jain's index of their delivered bytes is near 1.
#[test]
fn tcp_two_newreno_flows_share_fairly() {
    let rate = 10 * GBPS;
    let rtt = 50 * US;
    let bdp = rate / 8 * rtt / 1_000_000_000_000;
    let mut net = Net::new(Path::new(rate, rtt, bdp), &[dc(Cc::NewReno); 2]);
    net.start(0, 0);
    net.start(1, 0);
    net.run_until(200 * MS);
    let d: Vec<f64> = (0..2).map(|f| net.delivered(f) as f64).collect();
    let j = jain(&d);
    println!(
        "two flows: delivered {:?} bytes, Jain {j:.4}, drops {}, timeouts {}",
        d,
        net.drops,
        net.total(|s| s.timeouts)
    );
    assert!(j >= 0.95, "Jain's index {j}");
}

/// Per-flow fairness at a shared bottleneck: tenant A runs 8 flows, tenant B 64, all
/// NewReno through one 10 Gbit/s link; each tenant's share of the bytes delivered is its
/// share of the flows (8/72, 64/72) within 0.05. The RTT (500 µs) and buffer (1 BDP) give
/// each flow about 12 packets of window, enough for fast retransmit to work.
#[test]
fn tcp_tenants_share_in_proportion_to_their_flows() {
    let rate = 10 * GBPS;
    let rtt = 500 * US;
    let bdp = rate / 8 * rtt / 1_000_000_000_000;
    let (a, b) = (8, 64);
    let mut net = Net::new(Path::new(rate, rtt, bdp), &vec![dc(Cc::NewReno); a + b]);
    for f in 0..a + b {
        net.start(f, 0);
    }
    net.run_until(40 * MS);
    let start: Vec<u64> = (0..a + b).map(|f| net.delivered(f)).collect();
    net.measure_from_now();
    net.run_until(140 * MS);
    let got: Vec<u64> = (0..a + b).map(|f| net.delivered(f) - start[f]).collect();
    let total: u64 = got.iter().sum();
    let share_a = got[..a].iter().sum::<u64>() as f64 / total as f64;
    let share_b = got[a..].iter().sum::<u64>() as f64 / total as f64;
    let per_flow: Vec<f64> = got.iter().map(|&x| x as f64).collect();
    println!(
        "tenants: A (8 flows) {share_a:.4} (fair {:.4}), B (64 flows) {share_b:.4} (fair {:.4}), \
         per-flow Jain {:.4}, utilization {:.3}, drops {}, timeouts {}",
        a as f64 / (a + b) as f64,
        b as f64 / (a + b) as f64,
        jain(&per_flow),
        net.utilization(),
        net.drops,
        net.total(|s| s.timeouts)
    );
    assert!(
        (share_a - a as f64 / (a + b) as f64).abs() <= 0.05,
        "A {share_a}"
    );
    assert!(
        (share_b - b as f64 / (a + b) as f64).abs() <= 0.05,
        "B {share_b}"
    );
}

/// DCTCP, 10 flows, 10 Gbit/s, 100 µs RTT, K = 65 packets of 1500 B, buffer 4K.
///
/// RFC 8257 §3 and the DCTCP paper (Alizadeh et al., SIGCOMM 2010, §3.3): with N
/// synchronized flows the queue peaks at about K + N packets and swings by
/// A ≈ ½·√(2N(C·RTT + K)) packets below that; here C·RTT ≈ 83 packets, so the peak is about
/// 75 packets and the swing about 27: the queue stays well below 2K (so its mean does) and
/// above 0 (so the link stays busy), and a 4K buffer (260 packets) is never full. Slow start
/// overshoots K for one round trip before the first ECN echoes halve the windows (α starts
/// at 1), which stays below 4K too. Measured from 10 ms to 60 ms for the queue and the
/// utilization; drops over the whole run.
#[test]
fn tcp_dctcp_keeps_the_queue_short_and_the_link_busy() {
    let rate = 10 * GBPS;
    let rtt = 100 * US;
    let k = 65 * WIRE;
    let mut path = Path::new(rate, rtt, 4 * k);
    path.ecn_k = Some(k);
    let mut net = Net::new(path, &[dc(Cc::Dctcp); 10]);
    for f in 0..10 {
        net.start(f, 0);
    }
    net.run_until(10 * MS);
    net.measure_from_now();
    net.run_until(60 * MS);
    let mean = net.mean_queue();
    let util = net.utilization();
    let d: Vec<f64> = (0..10).map(|f| net.delivered(f) as f64).collect();
    println!(
        "dctcp: mean queue {:.1} packets (K = 65), max {:.1}, utilization {util:.4}, drops {}, \
         marks {}, ECN cuts {}, timeouts {}, Jain {:.4}",
        mean / WIRE as f64,
        net.max_queue as f64 / WIRE as f64,
        net.drops,
        net.marks,
        net.total(|s| s.ecn_reductions),
        net.total(|s| s.timeouts),
        jain(&d)
    );
    assert!(mean < 2.0 * k as f64, "mean queue {mean} bytes");
    assert!(util >= 0.90, "utilization {util}");
    assert_eq!(net.drops, 0);
    assert!(net.marks > 0 && net.total(|s| s.ecn_reductions) > 0);
}

/// TCP small queues with the host's own link as the bottleneck (same rate as the next
/// link, so the queue forms in the host): the flow's payload in the host never exceeds
/// `tsq_bytes`, no packet is lost, and the link stays busy all the same, because each
/// packet that leaves frees room for the next (the queue "drains under TSQ").
#[test]
fn tcp_tsq_bounds_the_host_queue_and_keeps_the_link_busy() {
    let rate = 10 * GBPS;
    let mut path = Path::new(rate, 50 * US, 1 << 20);
    path.host_bps = rate;
    let tsq = 3 * u64::from(MSS);
    let cfg = TcpConfig {
        tsq_bytes: tsq,
        ..dc(Cc::NewReno)
    };
    let mut net = Net::new(path, &[cfg]);
    net.start(0, 0);
    net.run_until(MS);
    net.measure_from_now();
    net.run_until(5 * MS);
    let util = net.utilization();
    let fl = &net.flows[0];
    println!(
        "tsq: most payload in the host {} B (TSQ {tsq} B), utilization {util:.4}, max bottleneck \
         queue {} B, drops {}",
        fl.max_host_bytes, net.max_queue, net.drops
    );
    assert!(
        fl.max_host_bytes <= tsq,
        "{} bytes in the host",
        fl.max_host_bytes
    );
    assert!(util >= 0.99, "utilization {util}");
    assert_eq!(net.drops, 0);
}

/// A flow of `n` segments over a clean path whose last 3 original transmissions are lost,
/// and the first `lost_resends` retransmissions of the first of them.
fn tail_loss(n: u64, lost_resends: u32) -> Net {
    let rate = 10 * GBPS;
    let mut net = Net::new(Path::new(rate, 50 * US, 1 << 20), &[dc(Cc::NewReno)]);
    let first_lost = (n - 3) * u64::from(MSS);
    let mut resends_lost = 0;
    net.drop_fn = Some(Box::new(move |p: &Pkt| {
        if p.seq >= first_lost && !p.retransmit {
            return true;
        }
        if p.seq == first_lost && p.retransmit && resends_lost < lost_resends {
            resends_lost += 1;
            return true;
        }
        false
    }));
    net.at(0, Ev::Start(0, n * u64::from(MSS)));
    net.run_until(100 * MS);
    net
}

/// The last 3 segments lost: too few duplicate ACKs follow for fast retransmit, so the
/// timer repairs the loss and the flow completes.
#[test]
fn tcp_tail_loss_is_repaired_by_timeout() {
    let n = 30;
    let net = tail_loss(n, 0);
    let st = net.sender(0);
    println!("tail loss: {st:?}, timeouts at {:?}", net.flows[0].fired);
    assert!(st.timeouts >= 1);
    assert_eq!(st.fast_retransmits, 0);
    assert_eq!(net.delivered(0), n * u64::from(MSS));
    assert!(net.flows[0].tx.all_acked());
    assert_eq!(net.flows[0].tx.timer_ps(), None);
}

/// The resend after the first timeout is lost as well: the second timeout comes twice the
/// first RTO later (RFC 6298 §5.5), and the flow still completes.
#[test]
fn tcp_lost_resend_backs_the_timer_off() {
    let n = 30;
    let net = tail_loss(n, 1);
    let fired = &net.flows[0].fired;
    println!("lost resend: timeouts at (ps, RTO before) {fired:?}");
    assert_eq!(fired.len(), 2, "{fired:?}");
    let (t1, rto1) = fired[0];
    let (t2, rto2) = fired[1];
    assert_eq!(rto2, 2 * rto1, "the RTO doubled");
    assert_eq!(
        t2 - t1,
        2 * rto1,
        "the second timeout came one doubled RTO after the first"
    );
    assert_eq!(net.delivered(0), n * u64::from(MSS));
    assert!(net.flows[0].tx.all_acked());
}

/// Per flow: the sender's and receiver's counters, cwnd and bytes delivered.
type FlowPrint = (SenderStats, ReceiverStats, u64, u64);

/// Everything observable about a run: per flow, then drops, marks and the event digest.
fn fingerprint(net: &Net) -> (Vec<FlowPrint>, u64, u64, u64) {
    let flows = (0..net.flows.len())
        .map(|f| {
            (
                net.sender(f),
                net.receiver(f),
                net.flows[f].tx.cwnd_bytes(),
                net.delivered(f),
            )
        })
        .collect();
    (flows, net.drops, net.marks, net.digest)
}

/// Two runs of the same lossy, marking scenario give identical results.
#[test]
fn tcp_runs_are_deterministic() {
    let run = || {
        let rate = 10 * GBPS;
        let mut path = Path::new(rate, 50 * US, 40 * WIRE);
        path.ecn_k = Some(20 * WIRE);
        let cfgs = [dc(Cc::NewReno), dc(Cc::Dctcp), dc(Cc::NewReno)];
        let mut net = Net::new(path, &cfgs);
        for f in 0..3 {
            net.start(f, f as u64 * 7 * US);
        }
        net.run_until(20 * MS);
        net
    };
    let (a, b) = (run(), run());
    assert!(
        a.drops > 0 && a.marks > 0,
        "the scenario exercises losses and marks"
    );
    assert_eq!(fingerprint(&a), fingerprint(&b));
}
