//! AF_XDP ports on real veth pairs (cargo feature `af-xdp`): frames cross an [`XdpPort`] in
//! both directions byte for byte and its counters balance; the XDP attachment is exclusive,
//! says which step the kernel refused and why, and goes away when the port is dropped.
//!
//! Needs root and `ip netns`; without them each test prints `skipped: REASON` and passes.
//! Each test makes its own namespace (`wx<pid><tag>`, apart from the testbed's `wt*`), with
//! a veth pair `xa` (two receive queues, so both AF_XDP sockets are exercised) ↔ `xb`, and
//! removes it on drop, also when the test fails. The port is opened on `xa`; `xb` is driven
//! through an AF_PACKET socket. No timing assertions: waits are bounded, counts are exact.
#![cfg(feature = "af-xdp")]

mod common;

use std::time::{Duration, Instant};

use common::{frame, test_frame_index, Ns};
use weft_nic::afpacket::{PacketSocket, RingConfig, RingVersion};
use weft_nic::afxdp::{XdpPort, XdpPortStats};

#[test]
fn frames_cross_an_af_xdp_port_both_ways_intact_and_counters_balance() {
    let Some(ns) = Ns::or_skip("f") else {
        return;
    };
    const N: u32 = 3000;
    ns.run(|| {
        let mut port = XdpPort::open("xa").expect("AF_XDP port on xa");
        assert_eq!(port.queues(), 2, "one socket per receive queue");
        let mut peer = PacketSocket::open(
            "xb",
            RingConfig {
                version: RingVersion::V2,
                ..RingConfig::default()
            },
        )
        .expect("AF_PACKET on xb");

        // xb → xa: received by the AF_XDP sockets through the XDP program.
        let mut got = Vec::new();
        let mut other = 0u64;
        let mut drain = |port: &mut XdpPort, got: &mut Vec<u32>| {
            port.recv_batch(64, &mut |f, _| match test_frame_index(f) {
                Some(i) => {
                    assert_eq!(f, frame(i).as_slice(), "frame {i} arrived altered");
                    got.push(i);
                }
                None => other += 1,
            });
        };
        for i in 0..N {
            let t = Instant::now();
            while !peer.send(&frame(i)).expect("send on xb") {
                assert!(t.elapsed() < Duration::from_secs(5), "xb send stuck");
                drain(&mut port, &mut got);
            }
            if i % 64 == 63 {
                peer.flush();
                drain(&mut port, &mut got);
            }
        }
        peer.flush();
        let t = Instant::now();
        while got.len() < N as usize && t.elapsed() < Duration::from_secs(10) {
            drain(&mut port, &mut got);
        }
        assert_eq!(got, (0..N).collect::<Vec<_>>(), "every frame, in order");
        let c = port.port_stats();
        println!("after rx: {c:?}");
        assert_eq!(c.rx_frames, N as u64 + other, "{c:?}");
        assert_eq!(c.rx_bad_desc + c.bad_index, 0, "{c:?}");
        assert_eq!(c.kernel.rx_dropped, 0, "{c:?}");
        assert_eq!(c.kernel.rx_invalid_descs, 0, "{c:?}");

        // xa → xb: transmitted from the UMEM, kicked in batches and on flush.
        let mut back = Vec::new();
        let drain_peer = |peer: &mut PacketSocket, back: &mut Vec<u32>| {
            peer.recv_batch(64, |f, _| {
                if let Some(i) = test_frame_index(f) {
                    assert_eq!(f, frame(i).as_slice(), "frame {i} sent altered");
                    back.push(i);
                }
            });
        };
        for i in 0..N {
            let t = Instant::now();
            while !port.send(&frame(i)).expect("send on xa") {
                assert!(t.elapsed() < Duration::from_secs(5), "AF_XDP send stuck");
                port.flush();
                drain_peer(&mut peer, &mut back);
            }
            if i % 100 == 99 {
                port.flush();
                drain_peer(&mut peer, &mut back);
            }
        }
        let t = Instant::now();
        while (back.len() < N as usize || port.tx_in_flight() > 0)
            && t.elapsed() < Duration::from_secs(10)
        {
            port.flush();
            drain_peer(&mut peer, &mut back);
        }
        assert_eq!(back, (0..N).collect::<Vec<_>>(), "every frame, in order");
        let c = port.port_stats();
        println!("after tx: {c:?}");
        // Every post was a frame sent; every frame sent came back as a completion.
        assert_eq!(c.tx_frames, N as u64, "{c:?}");
        assert_eq!(c.tx_completed, N as u64, "{c:?}");
        assert_eq!(c.tx_bad_completion + c.kick_errors, 0, "{c:?}");
        assert_eq!(c.kernel.tx_invalid_descs, 0, "{c:?}");
        assert_eq!(port.tx_in_flight(), 0);
    });
}

#[test]
fn attachment_is_exclusive_explained_and_removed_on_drop() {
    let Some(ns) = Ns::or_skip("x") else {
        return;
    };
    ns.run(|| {
        let e = XdpPort::open("wxnope0").err().expect("no such interface");
        assert!(e.to_string().contains("wxnope0"), "{e}");

        let port = XdpPort::open("xa").expect("first port");
        assert!(
            ns.link_show("xa").contains("xdpgeneric"),
            "program attached in generic mode: {}",
            ns.link_show("xa")
        );
        // A second attachment is refused, naming the step and the errno.
        let e = XdpPort::open("xa").err().expect("second port refused");
        let s = e.to_string();
        println!("{s}");
        assert!(s.contains("`xa`"), "{s}");
        assert!(
            e.errno().is_some() && s.contains("os error"),
            "errno in the message: {s}"
        );
        drop(port);
        assert!(
            !ns.link_show("xa").contains("xdp"),
            "detached on drop: {}",
            ns.link_show("xa")
        );
        // And the interface can be opened again: the kernel releases a closed AF_XDP
        // socket's queue binding in deferred work, so the first tries may still see it
        // bound (EBUSY); the wait is bounded.
        let t = std::time::Instant::now();
        let again = loop {
            match XdpPort::open("xa") {
                Ok(p) => break p,
                Err(e) if e.errno() == Some(libc::EBUSY) && t.elapsed().as_secs() < 5 => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("reopened: {e}"),
            }
        };
        drop(again);
        assert!(!ns.link_show("xa").contains("xdp"));
    });
}
