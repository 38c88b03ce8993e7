//! AF_PACKET sockets on real veth pairs: the transmit ring sends every frame handed to it,
//! once, in order and byte for byte, in both TPACKET versions, across wraps of the ring and
//! with the ring full; a frame longer than the interface's MTU allows is refused, as
//! `send(2)` refuses it, and the frames around it go.
//!
//! Needs root and `ip netns`; without them each test prints `skipped: REASON` and passes.
//! Each test makes its own namespace (`wx<pid><tag>`) with a veth pair `xa` ↔ `xb`, removed
//! on drop, also when the test fails. No timing assertions: waits are bounded, counts exact.

mod common;

use std::time::{Duration, Instant};

use common::{frame, frame_of_len, ip, test_frame_index, Ns};
use weft_nic::afpacket::{PacketSocket, RingConfig, RingVersion};

/// A receiving socket whose V3 blocks (32 KiB) take frames of any test size.
fn receiver(dev: &str) -> PacketSocket {
    PacketSocket::open(
        dev,
        RingConfig {
            version: RingVersion::V3,
            ..RingConfig::default()
        },
    )
    .expect("AF_PACKET on the receiving end")
}

/// The sending socket, on `xa`.
fn sender(cfg: RingConfig) -> PacketSocket {
    PacketSocket::open("xa", cfg).expect("AF_PACKET on xa")
}

/// The test frames `rx` holds now, appended to `got` (with their bytes checked).
fn drain(rx: &mut PacketSocket, got: &mut Vec<u32>, lens: &mut Vec<usize>) {
    rx.recv_batch(256, |f, _| {
        if let Some(i) = test_frame_index(f) {
            got.push(i);
            lens.push(f.len());
        }
    });
}

#[test]
fn the_transmit_ring_sends_every_frame_once_in_order_in_both_versions() {
    for (tag, version) in [("r2", RingVersion::V2), ("r3", RingVersion::V3)] {
        let Some(ns) = Ns::or_skip(tag) else {
            return;
        };
        // Kicks after 1, 7, 64 and 300 frames: single frames, small batches, and batches
        // longer than the ring's 256 slots (the ring fills, and a send is refused until
        // the kernel gives slots back). 3,000 frames wrap the ring ~12 times.
        const N: u32 = 3000;
        let (got, lens, c, kernel) = ns.run(|| {
            let tx = sender(RingConfig {
                version,
                ..RingConfig::default()
            });
            let mut rx = receiver("xb");
            let (mut got, mut lens) = (Vec::new(), Vec::new());
            let batches = [1u32, 7, 64, 300];
            let (mut k, mut in_batch) = (0usize, 0u32);
            for i in 0..N {
                let t = Instant::now();
                while !tx.send(&frame(i)).expect("send on xa") {
                    assert!(t.elapsed() < Duration::from_secs(5), "xa ring stuck");
                    drain(&mut rx, &mut got, &mut lens);
                }
                in_batch += 1;
                if in_batch == batches[k % batches.len()] {
                    tx.flush();
                    drain(&mut rx, &mut got, &mut lens);
                    (k, in_batch) = (k + 1, 0);
                }
            }
            tx.flush();
            let t = Instant::now();
            while got.len() < N as usize && t.elapsed() < Duration::from_secs(10) {
                drain(&mut rx, &mut got, &mut lens);
            }
            (got, lens, tx.tx_counters(), rx.kernel_stats())
        });
        assert_eq!(
            got,
            (0..N).collect::<Vec<_>>(),
            "{version:?}: every frame, in order"
        );
        for (i, len) in lens.iter().enumerate() {
            assert_eq!(
                *len,
                frame(i as u32).len(),
                "{version:?}: frame {i}'s length"
            );
        }
        assert_eq!(c.frames, N as u64, "{version:?}: {c:?}");
        assert_eq!(
            c.kick_errors + c.kick_short + c.oversize,
            0,
            "{version:?}: {c:?}"
        );
        assert!(c.ring_full > 0, "{version:?}: the ring never filled: {c:?}");
        assert!(c.kicks < N as u64 / 4, "{version:?}: not batched: {c:?}");
        // The kernel's own count of what it offered the receive ring (PACKET_STATISTICS).
        assert!(
            kernel.0 >= N as u64,
            "{version:?}: kernel counted {kernel:?}"
        );
        drop(ns);
    }
}

/// Byte for byte, with a transmit ring and without one (each frame its own `send(2)`: the
/// benchmark's blasters).
#[test]
fn bytes_arrive_as_sent_with_and_without_a_transmit_ring() {
    for (tag, tx_ring) in [("rb", true), ("rp", false)] {
        let Some(ns) = Ns::or_skip(tag) else {
            return;
        };
        let (frames, c) = ns.run(|| {
            let tx = sender(RingConfig {
                tx_ring,
                ..RingConfig::default()
            });
            let mut rx = receiver("xb");
            for i in 0..40 {
                assert!(tx.send(&frame(i)).expect("send"), "frame {i} refused");
            }
            tx.flush();
            let mut out = Vec::new();
            let t = Instant::now();
            while out.len() < 40 && t.elapsed() < Duration::from_secs(5) {
                rx.recv_batch(64, |f, _| {
                    if test_frame_index(f).is_some() {
                        out.push(f.to_vec());
                    }
                });
            }
            (out, tx.tx_counters())
        });
        assert_eq!(
            frames,
            (0..40).map(frame).collect::<Vec<_>>(),
            "tx_ring {tx_ring}"
        );
        assert_eq!(c.frames, 40, "tx_ring {tx_ring}: {c:?}");
        assert_eq!(
            c.kicks,
            if tx_ring { 1 } else { 0 },
            "tx_ring {tx_ring}: {c:?}"
        );
        drop(ns);
    }
}

#[test]
fn a_frame_longer_than_the_mtu_allows_is_refused_and_the_ring_goes_on() {
    let Some(ns) = Ns::or_skip("rl") else {
        return;
    };
    // A 3000-byte MTU: frames of up to 3014 bytes go, a 3015-byte one is refused (as
    // send(2) refuses it: EMSGSIZE), 3018 with a VLAN tag. Slots are 4 KiB.
    for dev in ["xa", "xb"] {
        assert!(
            ip(&["-n", &ns.0, "link", "set", dev, "mtu", "3000"]),
            "mtu of {dev}"
        );
    }
    let (got, lens, refused, c) = ns.run(|| {
        let tx = sender(RingConfig::default());
        let mut rx = receiver("xb");
        assert!(tx.send(&frame(0)).unwrap(), "frame 0");
        assert!(
            tx.send(&frame_of_len(1, 3014)).unwrap(),
            "frame 1, the MTU's longest"
        );
        let refused = tx.send(&frame_of_len(2, 3015)).map_err(|e| e.to_string());
        assert!(tx.send(&frame(3)).unwrap(), "frame 3");
        tx.flush();
        let (mut got, mut lens) = (Vec::new(), Vec::new());
        let t = Instant::now();
        while got.len() < 3 && t.elapsed() < Duration::from_secs(5) {
            drain(&mut rx, &mut got, &mut lens);
        }
        (got, lens, refused, tx.tx_counters())
    });
    assert_eq!(got, [0, 1, 3], "in the order sent, the long one refused");
    assert_eq!(lens, [frame(0).len(), 3014, frame(3).len()]);
    let why = refused.expect_err("a frame over the MTU was queued");
    assert!(
        why.contains("3015 bytes") && why.contains("MTU 3000"),
        "{why}"
    );
    assert_eq!((c.frames, c.oversize, c.kick_short), (3, 1, 0), "{c:?}");
}

/// The MTU changed while the socket is open: a frame the kernel then refuses is not lost
/// unseen (the kick comes back short and is counted), and the socket reads the MTU again, so
/// the next such frame is refused by `send`, as `send(2)` refuses it; raised again, longer
/// frames go at once.
#[test]
fn an_mtu_changed_while_open_is_read_again() {
    let Some(ns) = Ns::or_skip("rm") else {
        return;
    };
    let n = ns.0.clone();
    let set_mtu = |mtu: &str| {
        for dev in ["xa", "xb"] {
            assert!(
                ip(&["-n", &n, "link", "set", dev, "mtu", mtu]),
                "mtu of {dev}"
            );
        }
    };
    let (got, c_lowered, refused, c_end) = ns.run(|| {
        let tx = sender(RingConfig::default());
        let mut rx = receiver("xb");
        // Opened at 1500; lowered to 1000 behind the socket's back.
        set_mtu("1000");
        assert!(
            tx.send(&frame_of_len(0, 1400)).unwrap(),
            "queued under the old MTU"
        );
        assert!(tx.send(&frame(1)).unwrap());
        tx.flush();
        let c_lowered = tx.tx_counters();
        let refused = tx.send(&frame_of_len(2, 1400)).is_err();
        // Raised to 3000: a 2500-byte frame goes without the socket being reopened.
        set_mtu("3000");
        assert!(
            tx.send(&frame_of_len(3, 2500)).unwrap(),
            "refused after the MTU was raised"
        );
        tx.flush();
        let (mut got, mut lens) = (Vec::new(), Vec::new());
        let t = Instant::now();
        while got.len() < 2 && t.elapsed() < Duration::from_secs(5) {
            drain(&mut rx, &mut got, &mut lens);
        }
        (got, c_lowered, refused, tx.tx_counters())
    });
    assert_eq!(
        got,
        [1, 3],
        "the frame the kernel refused is skipped, the others go"
    );
    assert_eq!(
        (c_lowered.kick_short, c_lowered.skipped_bytes),
        (1, 1400),
        "{c_lowered:?}"
    );
    assert!(refused, "a 1400-byte frame was queued again at MTU 1000");
    assert_eq!((c_end.oversize, c_end.frames), (1, 3), "{c_end:?}");
}
