//! Offloads: the checksum completion against etherparse's own checksums (TCP and UDP over
//! IPv4 and IPv6, VLAN tags, IPv6 extension headers, Ethernet padding, refusals), no root
//! needed; and, with root and `ip netns`, on real veth pairs: detection reports veth's
//! default offloads on and the fix turns them off (read back with the ioctl and with
//! `ethtool -k`); a frame the kernel hands over with an unfinished checksum comes out of the
//! AF_PACKET ring completed and counted, in both TPACKET versions; and TCP connects and
//! exchanges data through the dataplane with every peer's offloads on.
//!
//! Without root or `ip netns` the namespace tests print `skipped: REASON` and pass. Each
//! makes its own namespaces (`wx<pid><tag>`, `wo<pid><tag>-*`), removed on drop, also when
//! the test fails. No timing assertions: waits are bounded, counts exact or lower bounds.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{ip, Ns};
use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice, UdpHeader, VlanId};
use weft_nic::afpacket::{PacketSocket, PacketSocketStats, RingConfig, RingVersion};
use weft_nic::offload::{self, complete_checksum, CsumError, Offload, PrepareError, L4};
use weft_nic::stats::PortStats;

// ------------------------------------------------------------------------------------------
// The checksum, without root.
// ------------------------------------------------------------------------------------------

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const V4_A: [u8; 4] = [10, 1, 2, 3];
const V4_B: [u8; 4] = [192, 168, 200, 17];
const V6_A: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd];
const V6_B: [u8; 16] = [
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0x99,
];

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A frame of each kind, with `n` bytes of payload, and a VLAN tag when `vlan`.
fn build(kind: &str, vlan: bool, n: usize) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(MAC_A, MAC_B);
    let p = payload(n, n as u8);
    let mut v = Vec::new();
    macro_rules! finish {
        ($b:expr) => {
            match kind {
                "tcp4" => $b
                    .ipv4(V4_A, V4_B, 64)
                    .tcp(40000, 5201, 0x1234_5678, 1000)
                    .ack(7)
                    .write(&mut v, &p),
                "udp4" => $b.ipv4(V4_A, V4_B, 64).udp(5353, 53).write(&mut v, &p),
                "tcp6" => $b
                    .ipv6(V6_A, V6_B, 64)
                    .tcp(40000, 443, 99, 65535)
                    .syn()
                    .write(&mut v, &p),
                "udp6" => $b.ipv6(V6_A, V6_B, 64).udp(5353, 53).write(&mut v, &p),
                _ => unreachable!(),
            }
            .unwrap()
        };
    }
    if vlan {
        finish!(eth.single_vlan(VlanId::try_new(42).unwrap()))
    } else {
        finish!(eth)
    }
    v
}

/// etherparse's checksum of the frame's TCP or UDP packet, and where the field is.
fn etherparse_checksum(frame: &[u8]) -> (u16, usize) {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse slices the frame");
    let (src, dst): (Vec<u8>, Vec<u8>) = match &p.net {
        Some(NetSlice::Ipv4(v4)) => (
            v4.header().source().into(),
            v4.header().destination().into(),
        ),
        Some(NetSlice::Ipv6(v6)) => (
            v6.header().source().into(),
            v6.header().destination().into(),
        ),
        other => panic!("not IP: {other:?}"),
    };
    let (sum, l4) = match p.transport.as_ref().expect("a transport header") {
        TransportSlice::Tcp(t) => {
            let s = match src.len() {
                4 => t.calc_checksum_ipv4(src[..].try_into().unwrap(), dst[..].try_into().unwrap()),
                _ => t.calc_checksum_ipv6(src[..].try_into().unwrap(), dst[..].try_into().unwrap()),
            };
            (s.unwrap(), t.slice().as_ptr() as usize + 16)
        }
        TransportSlice::Udp(u) => {
            let h: UdpHeader = u.to_header();
            let s = match src.len() {
                4 => h.calc_checksum_ipv4_raw(
                    src[..].try_into().unwrap(),
                    dst[..].try_into().unwrap(),
                    u.payload(),
                ),
                _ => h.calc_checksum_ipv6_raw(
                    src[..].try_into().unwrap(),
                    dst[..].try_into().unwrap(),
                    u.payload(),
                ),
            };
            (s.unwrap(), u.slice().as_ptr() as usize + 6)
        }
        other => panic!("not TCP/UDP: {other:?}"),
    };
    (sum, l4 - frame.as_ptr() as usize)
}

/// The folded, uncomplemented sum of the frame's pseudo-header: what a sender that leaves
/// the checksum to the device (`CHECKSUM_PARTIAL`) stores in the field.
fn pseudo_header_sum(frame: &[u8]) -> u16 {
    let p = SlicedPacket::from_ethernet(frame).unwrap();
    let (addrs, proto, len): (Vec<u8>, u8, usize) = match (&p.net, p.transport.as_ref().unwrap()) {
        (Some(NetSlice::Ipv4(v4)), t) => {
            let h = v4.header();
            let a = [h.source(), h.destination()].concat();
            (a, h.protocol().0, l4_len(t))
        }
        (Some(NetSlice::Ipv6(v6)), t) => {
            let h = v6.header();
            let a = [h.source(), h.destination()].concat();
            (a, v6.payload().ip_number.0, l4_len(t))
        }
        _ => unreachable!(),
    };
    let mut sum: u32 = addrs
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    sum += proto as u32 + len as u32;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn l4_len(t: &TransportSlice) -> usize {
    match t {
        TransportSlice::Tcp(t) => t.slice().len(),
        TransportSlice::Udp(u) => u.slice().len(),
        _ => unreachable!(),
    }
}

fn field(frame: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([frame[at], frame[at + 1]])
}

/// For every kind, with and without a VLAN tag, over payloads of 0 to 1,460 bytes (odd and
/// even): a frame whose field holds the pseudo-header sum (as the kernel leaves it) or
/// garbage is completed to etherparse's checksum, and nothing else in it changes.
#[test]
fn completed_checksums_equal_etherparses() {
    for kind in ["tcp4", "udp4", "tcp6", "udp6"] {
        for vlan in [false, true] {
            for n in (0..1460).step_by(7).chain([1, 2, 3, 1460]) {
                let good = build(kind, vlan, n);
                let (want, at) = etherparse_checksum(&good);
                assert_eq!(field(&good, at), want, "{kind}: the builder's own checksum");
                for partial in [pseudo_header_sum(&good), 0, 0xbeef] {
                    let mut f = good.clone();
                    f[at..at + 2].copy_from_slice(&partial.to_be_bytes());
                    let l4 = complete_checksum(&mut f)
                        .unwrap_or_else(|e| panic!("{kind} vlan {vlan} n {n}: {e}"));
                    assert_eq!(
                        l4,
                        if kind.starts_with("tcp") {
                            L4::Tcp
                        } else {
                            L4::Udp
                        }
                    );
                    assert_eq!(f, good, "{kind} vlan {vlan} n {n} field {partial:#x}");
                }
            }
        }
    }
}

/// The kernel's own completion (sum from the L4 header with the pseudo-header sum in the
/// field, complement) gives what recomputing gives: checked independently of etherparse.
#[test]
fn recomputing_equals_completing_the_partial_sum() {
    for kind in ["tcp4", "udp4", "tcp6", "udp6"] {
        let good = build(kind, false, 333);
        let (_, at) = etherparse_checksum(&good);
        let mut f = good.clone();
        f[at..at + 2].copy_from_slice(&pseudo_header_sum(&good).to_be_bytes());
        let l4_start = if kind.starts_with("tcp") {
            at - 16
        } else {
            at - 6
        };
        let mut sum: u32 = f[l4_start..]
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32)
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(!(sum as u16), field(&good, at), "{kind}");
    }
}

/// Ethernet padding after a short IP packet is not summed.
#[test]
fn ethernet_padding_is_left_out() {
    let good = build("udp4", false, 3);
    assert!(good.len() < 60);
    let (_, at) = etherparse_checksum(&good);
    let mut f = good.clone();
    f.resize(60, 0xa5);
    f[at] ^= 0x55;
    complete_checksum(&mut f).unwrap();
    assert_eq!(&f[..good.len()], &good[..]);
    assert!(f[good.len()..].iter().all(|&b| b == 0xa5));
}

/// An IPv6 hop-by-hop and a destination-options header in front of TCP: skipped, and not
/// part of the pseudo-header's length.
#[test]
fn ipv6_extension_headers_are_walked() {
    for kind in ["tcp6", "udp6"] {
        let good = build(kind, false, 100);
        let (want, _) = etherparse_checksum(&good);
        let proto = good[14 + 6];
        // Hop-by-hop (8 bytes: next header, length 0, PadN) then destination options (16).
        let mut f = good[..54].to_vec();
        f[14 + 6] = 0;
        f.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        f.extend_from_slice(&[proto, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&good[54..]);
        let plen = u16::from_be_bytes([f[18], f[19]]) + 24;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        let (ep, at) = etherparse_checksum(&f);
        assert_eq!(
            ep, want,
            "{kind}: etherparse agrees the headers do not count"
        );
        f[at] = !f[at];
        complete_checksum(&mut f).unwrap();
        assert_eq!(field(&f, at), want, "{kind}");
    }
}

/// A UDP checksum that computes to 0 is sent as 0xffff (0 means "none" in UDP over IPv4),
/// as etherparse and the kernel do.
#[test]
fn a_udp_checksum_of_zero_is_sent_as_ffff() {
    let mut found = false;
    for x in 0..=u16::MAX {
        let mut v = Vec::new();
        PacketBuilder::ethernet2(MAC_A, MAC_B)
            .ipv4(V4_A, V4_B, 64)
            .udp(1, 2)
            .write(&mut v, &x.to_be_bytes())
            .unwrap();
        let (want, at) = etherparse_checksum(&v);
        if want != 0xffff {
            continue;
        }
        // 0xffff is also the sum of a packet whose checksum is genuinely 0xffff; the one
        // whose complement is 0 is the one that sums to 0xffff with a zero field.
        let mut f = v.clone();
        f[at..at + 2].copy_from_slice(&[0, 0]);
        complete_checksum(&mut f).unwrap();
        assert_eq!(field(&f, at), 0xffff);
        found = true;
        break;
    }
    assert!(found, "no payload gives a zero UDP checksum");
}

/// What cannot be completed is refused, and the frame left as it was.
#[test]
fn what_cannot_be_completed_is_refused_unchanged() {
    let mut cases: Vec<(&str, Vec<u8>, CsumError)> = Vec::new();
    let mut icmp = Vec::new();
    PacketBuilder::ethernet2(MAC_A, MAC_B)
        .ipv4(V4_A, V4_B, 64)
        .icmpv4_echo_request(1, 1)
        .write(&mut icmp, &[0; 8])
        .unwrap();
    cases.push(("icmp", icmp, CsumError::NotTcpUdp));
    let mut frag = build("udp4", false, 100);
    frag[14 + 6] = 0x20; // more fragments
    cases.push(("fragment", frag, CsumError::Fragment));
    let mut frag6 = build("udp6", false, 100);
    frag6[14 + 6] = 44;
    cases.push(("ipv6 fragment", frag6, CsumError::Fragment));
    let mut arp = build("udp4", false, 30);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    cases.push(("arp", arp, CsumError::NotIp));
    for kind in ["tcp4", "udp4", "tcp6", "udp6"] {
        let f = build(kind, false, 200);
        cases.push(("truncated", f[..f.len() - 1].to_vec(), CsumError::Truncated));
        cases.push(("headers only", f[..30].to_vec(), CsumError::Truncated));
    }
    let mut bad_udp_len = build("udp4", false, 50);
    bad_udp_len[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&500u16.to_be_bytes());
    cases.push((
        "udp length past the packet",
        bad_udp_len,
        CsumError::Truncated,
    ));
    for (what, f, want) in cases {
        let mut g = f.clone();
        assert_eq!(complete_checksum(&mut g), Err(want), "{what}");
        assert_eq!(g, f, "{what}: changed");
    }
}

// ------------------------------------------------------------------------------------------
// Real interfaces (root, `ip netns`).
// ------------------------------------------------------------------------------------------

fn have_ethtool() -> bool {
    Command::new("ethtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `ethtool -k DEV` in namespace `ns`: each group's line, `name: on|off`.
fn ethtool_k(ns: &str, dev: &str) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-k", dev])
        .output()
        .expect("ethtool -k");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ethtool_big_k(ns: &str, dev: &str, args: &[&str]) {
    let ok = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-K", dev])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ethtool -K {dev} {args:?}");
}

fn group_is(ethtool: &str, o: Offload, on: bool) -> bool {
    let want = format!("{}: {}", o.long_name(), if on { "on" } else { "off" });
    ethtool.lines().any(|l| l.trim_end().starts_with(&want))
}

#[test]
fn veth_offloads_are_detected_on_and_turned_off() {
    let Some(ns) = Ns::or_skip("of") else {
        return;
    };
    let ethtool = have_ethtool();
    if ethtool {
        // GRO is off by default on veth: on, to see it detected and turned off too.
        ethtool_big_k(&ns.0, "xa", &["gro", "on"]);
    } else {
        println!("ethtool not installed: GRO stays off and nothing is read back with it");
    }
    let (before, fixed, after, again, quiet) = ns.run(|| {
        let before = offload::detect(&["xa", "xb"]).expect("detect");
        let fixed = offload::fix(&["xa", "xb"]).expect("fix");
        let after = offload::detect(&["xa", "xb"]).expect("detect after");
        let again = offload::fix(&["xa", "xb"]).expect("fix again");
        let quiet = offload::prepare_ports(&["xa", "xb"], false).expect("all off: starts");
        (before, fixed, after, again, quiet)
    });
    for (i, dev) in ["xa", "xb"].iter().enumerate() {
        let b = before[i].offloads;
        assert_eq!(before[i].iface, *dev);
        assert!(
            b.tx_checksum && b.tso && b.gso,
            "{dev}: veth's defaults: {b:?}"
        );
        assert!(b.rx_checksum && b.scatter_gather, "{dev}: {b:?}");
        assert_eq!(b.gro, ethtool && *dev == "xa", "{dev}: {b:?}");
        let mut want = vec![Offload::TxChecksum, Offload::Tso, Offload::Gso];
        if b.gro {
            want.push(Offload::Gro);
        }
        assert_eq!(fixed[i].turned_off, want, "{dev}");
        let a = after[i].offloads;
        assert!(a.to_fix().is_empty(), "{dev}: still on: {a:?}");
        assert_eq!(fixed[i].now, a);
        // What weft leaves alone stays.
        assert!(a.rx_checksum && a.scatter_gather, "{dev}: {a:?}");
        assert!(again[i].turned_off.is_empty(), "{dev}: {:?}", again[i]);
    }
    assert!(quiet.is_empty(), "{quiet:?}");
    if ethtool {
        for dev in ["xa", "xb"] {
            let k = ethtool_k(&ns.0, dev);
            for o in Offload::FIX {
                assert!(group_is(&k, o, false), "{dev}: {o} not off:\n{k}");
            }
            assert!(group_is(&k, Offload::ScatterGather, true), "{dev}:\n{k}");
        }
        // Turned on again behind weft's back: --no-fix-offloads refuses, with the command.
        // (Only tx comes back: the fix also withdrew the request for TSO, as ethtool does.)
        ethtool_big_k(&ns.0, "xb", &["tx", "on"]);
        let (refusal, lines) = ns.run(|| {
            let r = offload::prepare_ports(&["xa", "xb"], false);
            let lines = offload::prepare_ports(&["xa", "xb"], true).expect("fix");
            (r, lines)
        });
        let Err(e @ PrepareError::OffloadsOn(_)) = refusal else {
            panic!("not refused: {refusal:?}");
        };
        let m = e.to_string();
        assert!(
            m.contains("ethtool -K xb tx off tso off gso off gro off") && !m.contains("-K xa"),
            "{m}"
        );
        assert_eq!(lines.len(), 2, "one line per interface: {lines:?}");
        assert!(
            lines[0].contains("`xa`") && lines[0].contains("already off"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("`xb`") && lines[1].contains("turned off tx ("),
            "{lines:?}"
        );
    }
}

/// UDP and a TCP SYN sent from `xa`'s stack with veth's default transmit checksum offload
/// arrive on `xb` marked `TP_STATUS_CSUMNOTREADY`: the ring hands them over completed
/// (etherparse agrees) and counts them, in both TPACKET versions.
#[test]
fn unfinished_checksums_are_completed_in_the_receive_ring() {
    for (tag, version) in [("c2", RingVersion::V2), ("c3", RingVersion::V3)] {
        let Some(ns) = Ns::or_skip(tag) else {
            return;
        };
        let n = ns.0.as_str();
        // 10.79.0.2 is nobody's: frames to it leave by xa (to a made-up MAC; xb's socket
        // is promiscuous).
        assert!(ip(&["-n", n, "addr", "add", "10.79.0.1/24", "dev", "xa"]));
        assert!(ip(&[
            "-n",
            n,
            "neigh",
            "add",
            "10.79.0.2",
            "lladdr",
            "02:00:00:00:79:02",
            "dev",
            "xa",
            "nud",
            "permanent"
        ]));
        let (frames, completed, dropped, port) = ns.run(|| {
            let mut rx = PacketSocket::open(
                "xb",
                RingConfig {
                    version,
                    ..RingConfig::default()
                },
            )
            .expect("AF_PACKET on xb");
            let udp = std::net::UdpSocket::bind("10.79.0.1:0").unwrap();
            let mut frames: Vec<Vec<u8>> = Vec::new();
            // A SYN; nobody answers. (The thread is in this namespace too: it inherits it.)
            let syn = std::thread::spawn(|| {
                let _ = std::net::TcpStream::connect_timeout(
                    &"10.79.0.2:80".parse().unwrap(),
                    Duration::from_millis(500),
                );
            });
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(5) {
                udp.send_to(&payload(301, 7), "10.79.0.2:9").unwrap();
                std::thread::sleep(Duration::from_millis(20));
                rx.recv_batch(64, |f, _| {
                    if f.len() > 34 && f[12..14] == [8, 0] && f[26..30] == [10, 79, 0, 1] {
                        frames.push(f.to_vec());
                    }
                });
                let tcp = frames.iter().filter(|f| f[23] == 6).count();
                let udp = frames.iter().filter(|f| f[23] == 17).count();
                if tcp >= 1 && udp >= 3 {
                    break;
                }
            }
            let _ = syn.join();
            (frames, rx.csum_completed, rx.csum_dropped, rx.port_stats())
        });
        assert!(
            frames.iter().any(|f| f[23] == 6) && frames.iter().any(|f| f[23] == 17),
            "{version:?}: a SYN and UDP datagrams: {} frames",
            frames.len()
        );
        for f in &frames {
            let (want, at) = etherparse_checksum(f);
            assert_eq!(
                field(f, at),
                want,
                "{version:?}: protocol {}: checksum not completed",
                f[23]
            );
        }
        assert!(
            completed >= frames.len() as u64,
            "{version:?}: {completed} completed of {} (were they marked?)",
            frames.len()
        );
        assert_eq!(dropped, 0, "{version:?}");
        assert_eq!(port.rx_csum_completed, completed, "{port:?}");
        assert_eq!(port.rx_csum_dropped, 0, "{port:?}");
        drop(ns);
    }
}

// ------------------------------------------------------------------------------------------
// TCP through the dataplane, every peer's offloads on.
// ------------------------------------------------------------------------------------------

/// Namespaces `wo<pid><tag>-t` (tenant), `-n` (the NIC), `-r` (receiver), deleted on drop.
struct Three(String);

impl Three {
    fn ns(&self, which: &str) -> String {
        format!("{}-{which}", self.0)
    }

    fn new(tag: &str) -> Result<Three, String> {
        if std::env::var_os("WEFT_SKIP_NETNS").is_some() {
            return Err("WEFT_SKIP_NETNS is set".into());
        }
        if !weft_sys::process::is_root() {
            return Err("not root (namespaces and packet sockets need it)".into());
        }
        let t = Three(format!("wo{}{tag}", std::process::id() % 100_000));
        for w in ["t", "n", "r"] {
            let ns = t.ns(w);
            let _ = ip(&["netns", "del", &ns]);
            if !ip(&["netns", "add", &ns]) {
                return Err("`ip netns add` failed (no network namespaces here)".into());
            }
            for k in ["all", "default"] {
                let _ = Command::new("ip")
                    .args(["netns", "exec", &ns, "sysctl", "-qw"])
                    .arg(format!("net.ipv6.conf.{k}.disable_ipv6=1"))
                    .status();
            }
            let _ = ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        let (tn, nn, rn) = (t.ns("t"), t.ns("n"), t.ns("r"));
        if !ip(&[
            "-n", &nn, "link", "add", "name", "t1", "type", "veth", "peer", "name", "eth0",
            "netns", &tn,
        ]) {
            return Err("cannot create veth pairs here".into());
        }
        // Past this point a failure is the test's own: said, not skipped.
        for args in [
            &[
                "-n", &nn, "link", "add", "name", "up", "type", "veth", "peer", "name", "eth0",
                "netns", &rn,
            ][..],
            &["-n", &tn, "addr", "add", "10.79.1.1/24", "dev", "eth0"],
            &["-n", &rn, "addr", "add", "10.79.1.100/24", "dev", "eth0"],
            &["-n", &nn, "link", "set", "dev", "t1", "up"],
            &["-n", &nn, "link", "set", "dev", "up", "up"],
            &["-n", &tn, "link", "set", "dev", "eth0", "up"],
            &["-n", &rn, "link", "set", "dev", "eth0", "up"],
        ] {
            assert!(ip(args), "ip {}", args.join(" "));
        }
        Ok(t)
    }

    /// Runs `f` on a thread inside namespace `which`.
    fn run<T: Send>(&self, which: &str, f: impl FnOnce() -> T + Send) -> T {
        common::in_netns(&self.ns(which), f)
    }
}

impl Drop for Three {
    fn drop(&mut self) {
        for w in ["t", "n", "r"] {
            let _ = ip(&["netns", "del", &self.ns(w)]);
        }
    }
}

fn fifo_policy(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("fifo.yaml");
    std::fs::write(
        &p,
        "weft: 1\nname: fifo\nlink: {rate: 1gbit}\nnodes:\n  - {name: root, type: fifo}\n  - {name: all, type: leaf, parent: root}\n",
    )
    .unwrap();
    p
}

/// Tenant `10.79.1.1` ↔ weft (`t1`, `up`, after `weft run`'s start-up fix) ↔ receiver
/// `10.79.1.100`, veth everywhere, the tenant's and the receiver's offloads left on (so
/// every TCP segment and ARP-resolved reply reaches weft with an unfinished checksum):
/// a TCP connection is made and 50 request/response exchanges of 200 bytes cross weft; the
/// ports count the checksums they completed. (Bulk transfers need the peers' TSO off:
/// their super-frames are longer than a ring slot; see docs/dataplane.md.)
#[test]
fn tcp_connects_through_the_dataplane_with_the_peers_offloads_on() {
    use std::io::{Read, Write};
    let three = match Three::new("e") {
        Ok(t) => t,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("weft-offload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = fifo_policy(&dir);
    let stop = AtomicBool::new(false);
    let lines = three.run("n", || offload::prepare_ports(&["t1", "up"], true));
    let lines = lines.expect("start-up fix");
    assert_eq!(lines.len(), 2, "{lines:?}");
    let listener = three.run("r", || {
        std::net::TcpListener::bind("10.79.1.100:7000").unwrap()
    });
    let (stats, result) = std::thread::scope(|s| {
        let nic = s.spawn(|| {
            three.run("n", || {
                let cfg = weft_nic::dataplane::Config {
                    policy: policy.clone(),
                    load: Default::default(),
                    uplink: "up".into(),
                    rate_bps: 1_000_000_000,
                    tenants: vec![("a".into(), "t1".into())],
                    ctl: None,
                    metrics: None,
                    buffers: 1024,
                    max_queues: 64,
                    ring: 64,
                    outstanding: 256,
                    idle_sleep_us: 100,
                    cpu: None,
                    slice_us: None,
                    rogue: None,
                    ring_version: RingVersion::V2,
                    backend: weft_nic::dataplane::Backend::AfPacket,
                    isolation: Default::default(),
                    cpu_weight: None,
                };
                let open = |i: &str| -> Box<dyn weft_nic::dataplane::Port> {
                    Box::new(PacketSocket::open(i, RingConfig::default()).expect(i))
                };
                weft_nic::dataplane::run_ports(cfg, vec![open("t1")], open("up"), &stop, |_| {})
                    .expect("dataplane")
            })
        });
        let server = s.spawn(|| {
            let serve = || -> std::io::Result<()> {
                let (mut c, _) = listener.accept()?;
                c.set_read_timeout(Some(Duration::from_secs(10)))?;
                let mut buf = [0u8; 200];
                for _ in 0..50 {
                    c.read_exact(&mut buf)?;
                    buf.reverse();
                    c.write_all(&buf)?;
                }
                Ok(())
            };
            serve().map_err(|e| format!("server: {e}"))
        });
        // `accept` blocks until the client connects; a client that gives up (10 s) shuts
        // the listening socket down, which wakes it.
        let client = three.run("t", || -> Result<(), String> {
            let addr = "10.79.1.100:7000".parse().unwrap();
            let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .map_err(|e| format!("connect: {e}"))?;
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            for i in 0..50u8 {
                let req = payload(200, i);
                c.write_all(&req).map_err(|e| format!("write {i}: {e}"))?;
                let mut resp = [0u8; 200];
                c.read_exact(&mut resp)
                    .map_err(|e| format!("read {i}: {e}"))?;
                let mut want = req.clone();
                want.reverse();
                if resp[..] != want[..] {
                    return Err(format!("exchange {i}: wrong bytes"));
                }
            }
            Ok(())
        });
        if client.is_err() {
            // Unblocks `accept`.
            let _ = weft_sys::net::shutdown(&listener);
        }
        let server = server.join().unwrap();
        stop.store(true, Ordering::SeqCst);
        let stats = nic.join().unwrap();
        (stats, client.and(server))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let ports = &stats.ports;
    result.unwrap_or_else(|e| panic!("{e}\nports: {ports:?}"));
    assert_eq!(ports.len(), 2, "{ports:?}");
    for (p, name) in ports.iter().zip(["t1", "up"]) {
        let PortStats::AfPacket(p) = p else {
            panic!("{name}: not an AF_PACKET port: {ports:?}")
        };
        assert_eq!(p.iface, name, "{ports:?}");
        assert!(
            p.rx_csum_completed >= 50,
            "{name}: each request or response was an unfinished checksum: {ports:?}"
        );
        assert_eq!(p.rx_csum_dropped, 0, "{ports:?}");
    }
    drop(three);
}
