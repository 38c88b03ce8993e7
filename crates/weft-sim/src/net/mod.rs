//! The network behind the sending host's link, for TCP applications: the path a flow's
//! packets cross after they leave the NIC model, and the way its ACKs come back.
//!
//! **What.** One switch. Each sending host's link (the policy's `link`; `hosts` of them)
//! ends at the switch, whose output port towards each destination (every sending host,
//! and the receiver at the far end; [`SwitchPort`]) has a rate,
//! a drop-tail buffer and an ECN marking threshold (DCTCP's instantaneous marking: a frame
//! is marked CE when the backlog it joins exceeds the threshold, RFC 8257 §3.1). Each of
//! the two links (host to switch, switch to receiver) has a one-way propagation delay, so
//! a frame reaches the switch `delay` after its last bit leaves the host, and the receiver
//! `delay` after its last bit leaves the port. The receiver acknowledges every segment at
//! once (`crate::tcp::TcpReceiver`) after its receive path ([`RxPath`]) has taken it: the
//! receiving NIC spreads flows over its cores by a hash of the flow (RSS), each core has a
//! ring of `ring` packets and takes `cpu_per_packet` for each, one after another, and a
//! packet that finds its core's ring full is dropped (with `cpu_per_packet: 0`, the
//! default, the receiver takes every packet at once). ACKs come back over an uncongested reverse path,
//! after `2 × delay` plus the wire time of a 64-byte frame on each of the two links. The
//! host learns that a packet left (TX completion, what frees TCP small queues' budget)
//! `completion` after its last bit leaves the NIC.
//!
//! What a scenario says, with its defaults ([`Network`]):
//!
//! ```yaml
//! network:
//!   hosts: 1                       # sending hosts
//!   delay: 5us                     # one-way, each link
//!   completion: 10us               # TX completion, after the last bit leaves the NIC
//!   switch: {rate: 10gbit, buffer: 1mb, ecn: 100kb}   # rate: the link's; no ecn: no marks
//!   receiver: {cores: 8, ring: 1024, cpu_per_packet: 0ns}   # or policy_inline: (sim/ingress.rs)
//!   tcp: {cc: newreno, min_rto: 5ms, init_cwnd: 10, tsq: 256kb, tso: 1448b, rwnd: 6mb}
//! ```
//!
//! **Invariants.** A port forwards frames in the order they reach it, each starting when
//! the previous one ends; the bytes it holds (counted as wire bytes: frame plus the link's
//! per-frame overhead) never exceed its buffer; a frame is either dropped or forwarded,
//! never both. The simulator offers frames to a port in their arrival order (with one
//! sending host, their departure order; with several, timed events put them in order).
//!
//! **Cost.** O(1) a frame: the port keeps the time its last accepted frame ends and derives
//! its backlog from it (a FIFO at a constant rate holds exactly the bits it has yet to
//! send), and the integral of its backlog over time in closed form between arrivals.

use weft_core::policy::Link;
use weft_core::sched::link::wire_ps;

use crate::tcp::TcpConfig;

/// Bytes of IP and TCP headers (with timestamps) in every TCP frame: a frame of the host's
/// `mtu` carries `mtu − 52` payload bytes by default, as Linux's 1,448 in 1,500.
pub const TCP_HEADER_BYTES: u32 = 52;

/// The most sending hosts a network has (each runs its own NIC model, visited at every
/// instant of the run).
pub const MAX_HOSTS: u16 = 64;

/// Frame bytes of an ACK on the reverse path (a minimum Ethernet frame).
pub const ACK_FRAME_BYTES: u32 = 64;

/// The network of a scenario (`network:`), used by its TCP applications.
#[derive(Debug, Clone)]
pub struct Network {
    /// Sending hosts, alike (the scenario's `host`, each with its own NIC of the model
    /// run and its own link), at least 1 and at most [`MAX_HOSTS`].
    pub hosts: u16,
    /// One-way propagation delay of each link (host to switch, switch to receiver), ps.
    pub delay_ps: u64,
    /// After the last bit of a packet leaves the NIC, the host learns it left (TX
    /// completion) this much later, ps.
    pub completion_ps: u64,
    /// The switch's output port towards the receivers.
    pub port: PortSpec,
    /// The receiving host's path.
    pub rx: RxSpec,
    /// The policy every receiving host's cores take their packets by
    /// (`receiver.policy_inline`): each VM's ingress queue a leaf, as PicNIC enforces at
    /// the receiver. `None`: one ring a core, first come first served.
    pub rx_policy: Option<std::sync::Arc<weft_core::policy::Program>>,
    /// Every TCP flow's parameters.
    pub tcp: TcpConfig,
}

/// A receiving host's path: receive cores, their rings and their cost per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxSpec {
    /// Receive cores (RSS queues), at least 1.
    pub cores: u16,
    /// Packets each core's ring holds, waiting or being processed (at least 1).
    pub ring_packets: u32,
    /// CPU time a core spends on a packet, ps (0: no cost, no ring limit).
    pub cpu_ps_per_packet: u64,
    /// Seed of the flow hash (the run's: [`Network::defaults`] leaves 0).
    pub seed: u64,
}

/// A switch output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSpec {
    /// Line rate, bits per second.
    pub rate_bps: u64,
    /// Drop-tail buffer, wire bytes.
    pub buffer_bytes: u64,
    /// Frames joining a backlog of more than this many wire bytes are marked CE (`None`:
    /// no marking).
    pub ecn_bytes: Option<u64>,
}

impl Network {
    /// The defaults for a host whose link is `link` and whose full frames are `mtu_bytes`.
    pub fn defaults(link: &Link, mtu_bytes: u32) -> Network {
        Network {
            hosts: 1,
            delay_ps: 5_000_000,
            completion_ps: 10_000_000,
            port: PortSpec {
                rate_bps: link.rate_bps,
                buffer_bytes: 1 << 20,
                ecn_bytes: None,
            },
            rx_policy: None,
            rx: RxSpec {
                cores: 8,
                ring_packets: 1024,
                cpu_ps_per_packet: 0,
                seed: 0,
            },
            tcp: TcpConfig {
                mss: mtu_bytes.saturating_sub(TCP_HEADER_BYTES).max(1),
                min_rto_ps: 5_000_000_000,
                tsq_bytes: 256 << 10,
                tso_bytes: mtu_bytes.saturating_sub(TCP_HEADER_BYTES).max(1),
                ..TcpConfig::default()
            },
        }
    }

    /// Frame bytes of a packet carrying `payload` bytes.
    pub fn frame_bytes(payload: u32) -> u32 {
        payload + TCP_HEADER_BYTES
    }

    /// How long an ACK takes from the receiver back to the sender, ps: the two delays and
    /// an ACK frame's wire time on each link (`link` the host's, the port's rate the
    /// other's).
    pub fn ack_return_ps(&self, link: &Link) -> u64 {
        let port_link = Link {
            rate_bps: self.port.rate_bps,
            ..*link
        };
        (2 * self.delay_ps)
            .saturating_add(wire_ps(ACK_FRAME_BYTES, link))
            .saturating_add(wire_ps(ACK_FRAME_BYTES, &port_link))
    }
}

/// What the port did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// The buffer had no room for it.
    Dropped,
    /// It is sent; its last bit leaves the port at `done_ps`; `ce`: marked.
    Forwarded { done_ps: u64, ce: bool },
}

/// What a port counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames forwarded, dropped, and marked CE (of the forwarded).
    pub forwarded: u64,
    pub dropped: u64,
    pub marked: u64,
    /// Largest backlog a frame joined, wire bytes.
    pub max_backlog_bytes: u64,
}

/// A switch output port: a FIFO at a constant rate with a drop-tail buffer and a marking
/// threshold (module doc).
#[derive(Debug, Clone)]
pub struct SwitchPort {
    spec: PortSpec,
    /// The port's link: its rate and the host link's per-frame overhead.
    link: Link,
    /// When the last accepted frame's last bit leaves, ps.
    free_ps: u64,
    /// The last arrival, ps.
    last_ps: u64,
    /// ∫ (time the backlog would take to send) dt since time 0, ps² (module doc).
    busy_area: u128,
    stats: PortStats,
}

impl SwitchPort {
    /// An empty port; `host_link` gives the per-frame overhead.
    pub fn new(spec: PortSpec, host_link: &Link) -> SwitchPort {
        SwitchPort {
            spec,
            link: Link {
                rate_bps: spec.rate_bps,
                ..*host_link
            },
            free_ps: 0,
            last_ps: 0,
            busy_area: 0,
            stats: PortStats::default(),
        }
    }

    /// The wire bytes waiting or being sent at `now_ps`.
    pub fn backlog_bytes(&self, now_ps: u64) -> u64 {
        let left_ps = self.free_ps.saturating_sub(now_ps) as u128;
        (left_ps * self.spec.rate_bps as u128).div_ceil(8_000_000_000_000) as u64
    }

    /// A frame of `frame_bytes` arrives at `now_ps` (not before the last one).
    pub fn offer(&mut self, now_ps: u64, frame_bytes: u32) -> Offer {
        debug_assert!(
            now_ps >= self.last_ps,
            "port: a frame at {now_ps} ps after one at {} ps",
            self.last_ps
        );
        self.accrue(now_ps);
        let backlog = self.backlog_bytes(now_ps);
        let wire = frame_bytes as u64 + self.link.overhead_bytes;
        if backlog + wire > self.spec.buffer_bytes {
            self.stats.dropped += 1;
            return Offer::Dropped;
        }
        let ce = self.spec.ecn_bytes.is_some_and(|k| backlog > k);
        self.stats.forwarded += 1;
        self.stats.marked += u64::from(ce);
        self.stats.max_backlog_bytes = self.stats.max_backlog_bytes.max(backlog);
        let start = self.free_ps.max(now_ps);
        self.free_ps = start.saturating_add(wire_ps(frame_bytes, &self.link));
        Offer::Forwarded {
            done_ps: self.free_ps,
            ce,
        }
    }

    /// Adds the backlog's integral from the last arrival to `now_ps`.
    fn accrue(&mut self, now_ps: u64) {
        let (t0, t1) = (self.last_ps as u128, now_ps as u128);
        let free = self.free_ps as u128;
        if free > t0 {
            let end = t1.min(free);
            // ∫ (free − t) dt over [t0, end]: a trapezoid.
            self.busy_area += ((free - t0) + (free - end)) * (end - t0) / 2;
        }
        self.last_ps = now_ps;
    }

    /// What it counted.
    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// The mean backlog over `[0, end_ps)`, wire bytes.
    pub fn mean_backlog_bytes(&mut self, end_ps: u64) -> f64 {
        if end_ps > self.last_ps {
            self.accrue(end_ps);
        }
        if end_ps == 0 {
            return 0.0;
        }
        let mean_ps = self.busy_area as f64 / end_ps as f64;
        mean_ps * self.spec.rate_bps as f64 / 8e12
    }
}

/// What a receive path counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Packets processed, and dropped at a full ring.
    pub processed: u64,
    pub dropped: u64,
    /// The most packets a core's ring held when one arrived.
    pub max_ring: u64,
}

/// A receiving host's path (module doc): per core, the time its last accepted packet is
/// done, from which its ring's occupancy follows (a core working at a constant cost per
/// packet holds exactly the packets it has yet to finish).
#[derive(Debug, Clone)]
pub struct RxPath {
    spec: RxSpec,
    free_ps: Vec<u64>,
    stats: RxStats,
}

impl RxPath {
    /// An idle receive path.
    pub fn new(spec: RxSpec) -> RxPath {
        RxPath {
            spec,
            free_ps: vec![0; spec.cores.max(1) as usize],
            stats: RxStats::default(),
        }
    }

    /// The core flow `flow`'s packets go to: a hash of the flow and the seed (RSS).
    pub fn core_of(&self, flow: u32) -> usize {
        let mut z =
            (u64::from(flow) ^ self.spec.seed.rotate_left(17)).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (((z >> 32) * self.free_ps.len() as u64) >> 32) as usize
    }

    /// A packet of `flow` reaches the host at `now_ps`: when its core is done with it, or
    /// `None` when its ring is full (dropped). Arrivals per core come in time order.
    pub fn offer(&mut self, now_ps: u64, flow: u32) -> Option<u64> {
        let cost = self.spec.cpu_ps_per_packet;
        if cost == 0 {
            self.stats.processed += 1;
            return Some(now_ps);
        }
        let c = self.core_of(flow);
        let free = self.free_ps[c];
        let held = free.saturating_sub(now_ps).div_ceil(cost);
        if held >= u64::from(self.spec.ring_packets) {
            self.stats.dropped += 1;
            return None;
        }
        self.stats.max_ring = self.stats.max_ring.max(held);
        self.stats.processed += 1;
        let done = free.max(now_ps).saturating_add(cost);
        self.free_ps[c] = done;
        Some(done)
    }

    /// What it counted.
    pub fn stats(&self) -> RxStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            rate_bps: 10_000_000_000,
            overhead_bytes: 20,
            ..Link::default()
        }
    }

    /// A port at 10 Gbit/s sends a 1,480-byte frame (1,500 wire bytes) in 1,200 ns: its
    /// backlog, drops, marks and mean follow from that arithmetic.
    #[test]
    fn a_port_holds_what_it_has_yet_to_send() {
        let spec = PortSpec {
            rate_bps: 10_000_000_000,
            buffer_bytes: 4_500,
            ecn_bytes: Some(1_500),
        };
        let mut p = SwitchPort::new(spec, &link());
        // Three frames at once: 0, 1,500 and 3,000 bytes ahead of them; the third is marked
        // (3,000 > 1,500), the fourth finds 4,500 and is dropped.
        assert_eq!(
            p.offer(0, 1480),
            Offer::Forwarded {
                done_ps: 1_200_000,
                ce: false
            }
        );
        assert_eq!(
            p.offer(0, 1480),
            Offer::Forwarded {
                done_ps: 2_400_000,
                ce: false
            }
        );
        assert_eq!(
            p.offer(0, 1480),
            Offer::Forwarded {
                done_ps: 3_600_000,
                ce: true
            }
        );
        assert_eq!(p.offer(0, 1480), Offer::Dropped);
        assert_eq!(p.backlog_bytes(600_000), 3_750);
        // At 3.6 µs it is empty: a frame then starts at once and is not marked.
        assert_eq!(
            p.offer(3_600_000, 1480),
            Offer::Forwarded {
                done_ps: 4_800_000,
                ce: false
            }
        );
        let s = p.stats();
        assert_eq!((s.forwarded, s.dropped, s.marked), (4, 1, 1));
        // Backlog in time: 3.6 µs falling to 0 over [0, 3.6 µs] (area 3.6²/2), then 1.2 µs
        // falling to 0 over [3.6, 4.8] (1.2²/2), then nothing to 9.6 µs: mean time
        // (6.48 + 0.72) / 9.6 = 0.75 µs of sending, 937.5 bytes.
        let mean = p.mean_backlog_bytes(9_600_000);
        assert!((mean - 937.5).abs() < 1e-6, "mean backlog {mean}");
    }

    /// A core at 1 µs a packet with a ring of 2: two packets at once are done at 1 and 2
    /// µs, a third is dropped, and at 1.5 µs one is held, so a fourth is taken.
    #[test]
    fn a_receive_core_holds_what_it_has_yet_to_process() {
        let mut rx = RxPath::new(RxSpec {
            cores: 1,
            ring_packets: 2,
            cpu_ps_per_packet: 1_000_000,
            seed: 0,
        });
        assert_eq!(rx.offer(0, 7), Some(1_000_000));
        assert_eq!(rx.offer(0, 7), Some(2_000_000));
        assert_eq!(rx.offer(0, 7), None);
        assert_eq!(rx.offer(1_500_000, 7), Some(3_000_000));
        let s = rx.stats();
        assert_eq!((s.processed, s.dropped, s.max_ring), (3, 1, 1));
        // Without a cost, every packet is taken when it arrives.
        let mut free = RxPath::new(RxSpec {
            cpu_ps_per_packet: 0,
            ..rx.spec
        });
        assert_eq!(free.offer(5, 1), Some(5));
    }

    /// The flow hash spreads flows over every core, the same way for the same seed.
    #[test]
    fn rss_spreads_flows_over_the_cores() {
        let spec = RxSpec {
            cores: 4,
            ring_packets: 8,
            cpu_ps_per_packet: 1,
            seed: 3,
        };
        let (a, b) = (RxPath::new(spec), RxPath::new(spec));
        let mut per_core = [0u32; 4];
        for f in 0..4000 {
            assert_eq!(a.core_of(f), b.core_of(f));
            per_core[a.core_of(f)] += 1;
        }
        assert!(
            per_core.iter().all(|&n| (900..1100).contains(&n)),
            "flows per core: {per_core:?}"
        );
    }
}
