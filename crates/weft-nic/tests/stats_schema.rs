//! `ctl stats` as the dataplane answers it over real ports: the answer deserializes into
//! [`weft_nic::stats::Stats`] and serializes back to the very bytes the daemon sent (the
//! same fields, in the same order, with the same numbers), for AF_PACKET ports and, with the
//! `af-xdp` feature, AF_XDP ports; the final stats the loop returns too.
//!
//! Needs root and `ip netns`; without them each test prints `skipped: REASON` and passes.
//! Each test makes its own namespace (`wx<pid><tag>`) with the veth pairs `xa` ↔ `xb` (the
//! tenant's port and its peer) and `ya` ↔ `yb` (the uplink and the receiver), removed on
//! drop, also when the test fails; the loop is stopped and joined before the namespace goes.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{ip, Ns, TempDir};
use weft_core::policy::LoadOptions;
use weft_nic::afpacket::{PacketSocket, RingConfig, RingVersion};
use weft_nic::dataplane::{self, Port};
use weft_nic::stats::{PortStats, Stats};

/// Two leaves, one under a shaping class, so every section of the answer has entries.
const POLICY: &str = "weft: 1\nname: schema\nlink: {rate: 1gbit}\nnodes:\n  - {name: root, type: prio}\n  - {name: cap, type: shape, parent: root, rate: 500mbit, burst: 64kb}\n  - {name: a, type: leaf, parent: [cap], priority: 0, match: {tenant: 1}}\n  - {name: b, type: leaf, parent: root, priority: 1}\n";

const TENANT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const RECEIVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x64];

/// A UDP frame between the tenant and the receiver (`up`: from the tenant).
fn udp(up: bool, sport: u16, payload: usize) -> Vec<u8> {
    let (src, dst, sip, dip) = if up {
        (TENANT_MAC, RECEIVER_MAC, [10, 77, 0, 1], [10, 77, 0, 100])
    } else {
        (RECEIVER_MAC, TENANT_MAC, [10, 77, 0, 100], [10, 77, 0, 1])
    };
    let b = etherparse::PacketBuilder::ethernet2(src, dst)
        .ipv4(sip, dip, 64)
        .udp(sport, 5201);
    let mut v = Vec::new();
    b.write(&mut v, &vec![0x5a; payload]).unwrap();
    v
}

/// The answer line to `{"cmd":"stats"}` on `sock`, as the daemon wrote it (without its
/// line feed).
fn stats_line(sock: &Path) -> String {
    let mut s = UnixStream::connect(sock).expect("control socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"{\"cmd\":\"stats\"}\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("the answer");
    text.strip_suffix('\n').expect("one line").to_string()
}

/// `text` deserializes into [`Stats`] and serializes back to itself, byte for byte.
fn round_trips(text: &str) -> Stats {
    let stats: Stats = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let again = serde_json::to_string(&stats).unwrap();
    assert_eq!(again, text, "serialized again, the stats differ");
    stats
}

/// Counts every frame `rx` holds now.
fn drain(rx: &mut PacketSocket) -> usize {
    rx.recv_batch(256, |_, _| {})
}

/// Runs the loop on `xa` (tenant `a`) and `ya` (uplink) opened by `open`, sends frames
/// both ways, and checks the stats it answers while it runs and those it returns.
fn answers_round_trip(tag: &str, open: fn(&str) -> Box<dyn Port>, backend: &str) {
    let Some(ns) = Ns::or_skip(tag) else {
        return;
    };
    let n = ns.0.as_str();
    assert!(
        ip(&["-n", n, "link", "add", "ya", "type", "veth", "peer", "name", "yb"])
            && ip(&["-n", n, "link", "set", "ya", "up"])
            && ip(&["-n", n, "link", "set", "yb", "up"]),
        "the uplink's veth pair"
    );
    let dir = TempDir::new(tag);
    let sock = dir.0.join("ctl.sock");
    let policy = dir.0.join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let cfg = dataplane::Config {
        policy,
        load: LoadOptions::default(),
        uplink: "ya".into(),
        rate_bps: 1_000_000_000,
        tenants: vec![("a".into(), "xa".into())],
        ctl: Some(sock.clone()),
        metrics: None,
        buffers: 1024,
        max_queues: 64,
        ring: 256,
        outstanding: 128,
        idle_sleep_us: 200,
        cpu: None,
        slice_us: None,
        // Tenant 1's driver also posts to invalid queues: its refusals are answered.
        rogue: Some(0),
        ring_version: RingVersion::V2,
        backend: dataplane::Backend::parse(backend).expect("a backend"),
        isolation: Default::default(),
        cpu_weight: None,
    };
    let (line, last) = ns.run(|| {
        let stop = AtomicBool::new(false);
        let peer_cfg = RingConfig {
            version: RingVersion::V2,
            ..RingConfig::default()
        };
        let mut tenant_peer = PacketSocket::open("xb", peer_cfg).expect("AF_PACKET on xb");
        let mut receiver = PacketSocket::open("yb", peer_cfg).expect("AF_PACKET on yb");
        std::thread::scope(|s| {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let stop = &stop;
            let looping = s.spawn(move || {
                // Opened on the loop's thread: a port is not `Send`.
                let (tenant, uplink) = (open("xa"), open("ya"));
                dataplane::run_ports(cfg, vec![tenant], uplink, stop, move |_| {
                    let _ = ready_tx.send(());
                })
            });
            // Whatever happens below, the loop stops and is joined before the namespace goes.
            struct Stop<'a>(&'a AtomicBool);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let stopping = Stop(stop);
            ready_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("the loop is ready");
            const N: usize = 200;
            let (mut up, mut down) = (0, 0);
            for i in 0..N {
                tenant_peer
                    .send(&udp(true, 1000 + (i % 4) as u16, 60 + i * 7))
                    .expect("send on xb");
                receiver.send(&udp(false, 2000, 100)).expect("send on yb");
                if i % 16 == 15 {
                    tenant_peer.flush();
                    receiver.flush();
                }
            }
            tenant_peer.flush();
            receiver.flush();
            let t = Instant::now();
            while (up < N || down < N) && t.elapsed() < Duration::from_secs(10) {
                up += drain(&mut receiver);
                down += drain(&mut tenant_peer);
                std::thread::sleep(Duration::from_millis(1));
            }
            // Past a rate sample, so the rates are measured.
            std::thread::sleep(Duration::from_millis(1200));
            let line = stats_line(&sock);
            drop(stopping);
            let last = looping.join().expect("the loop").expect("the loop's stats");
            (line, last)
        })
    });
    let stats = round_trips(&line);
    round_trips(&serde_json::to_string(&last).unwrap());
    assert!(stats.dataplane.tx_frames > 0, "{line}");
    assert!(stats.tenants[0].rejects.iter().any(|&n| n > 0), "{line}");
    assert!(stats.timing.busy_iteration.n > 0, "{line}");
    assert_eq!(stats.ports.len(), 2, "{line}");
    for p in &stats.ports {
        let name = match (p, backend) {
            (PortStats::AfPacket(p), "af-packet") => &p.iface,
            (PortStats::AfXdp(p), "af-xdp") => &p.iface,
            _ => panic!("a port of another backend than {backend}: {line}"),
        };
        assert!(name == "xa" || name == "ya", "{line}");
    }
}

fn packet_socket(name: &str) -> Box<dyn Port> {
    Box::new(PacketSocket::open(name, RingConfig::default()).expect("AF_PACKET port"))
}

#[test]
fn af_packet_stats_round_trip_byte_for_byte() {
    answers_round_trip("sp", packet_socket, "af-packet");
}

#[cfg(feature = "af-xdp")]
#[test]
fn af_xdp_stats_round_trip_byte_for_byte() {
    fn xdp_port(name: &str) -> Box<dyn Port> {
        Box::new(weft_nic::afxdp::XdpPort::open(name).expect("AF_XDP port"))
    }
    answers_round_trip("sx", xdp_port, "af-xdp");
}
