//! Property tests of the OS/NIC interface: random interleavings of posts (own, foreign and
//! invalid queues), doorbells, fetches and completions by several drivers.
//! * nothing lost: every accepted descriptor is completed exactly once, to its owner, after
//!   a final drain; every refused one is counted;
//! * ownership: a driver never sees another's completions, and refusals are counted against
//!   the driver that made them;
//! * ring and per-class outstanding invariants hold after every step.

use std::collections::HashMap;

use proptest::prelude::*;
use weft_nic::iface::{Config, Descriptor, DoorbellEntry, Interface, MetaUpdate, Reject, Status};

/// Cases: `default`, or `PROPTEST_CASES` when set, for longer runs (an explicit `with_cases`
/// would otherwise override the variable).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone)]
enum Op {
    /// Driver posts to the `q`-th queue id (may be foreign or invalid).
    Post {
        driver: usize,
        q: u32,
    },
    /// Driver rings a doorbell on `core` with kicks/moves of these queue ids.
    Doorbell {
        driver: usize,
        core: u32,
        qs: Vec<u32>,
        mv: Option<u32>,
    },
    Fetch(usize),
    /// Completes the `i`-th outstanding descriptor (modulo), sent or dropped.
    Complete {
        i: usize,
        sent: bool,
    },
    /// Completes a stale handle.
    Bogus(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..10u32).prop_map(|(driver, q)| Op::Post { driver, q }),
        2 => (0..3usize, 0..3u32, proptest::collection::vec(0..10u32, 0..5), proptest::option::of(0..3u32))
            .prop_map(|(driver, core, qs, mv)| Op::Doorbell { driver, core, qs, mv }),
        2 => (0..6usize).prop_map(Op::Fetch),
        3 => (0..64usize, any::<bool>()).prop_map(|(i, sent)| Op::Complete { i, sent }),
        1 => any::<u64>().prop_map(Op::Bogus),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]
    #[test]
    fn nothing_lost_ownership_enforced(ops in proptest::collection::vec(op(), 1..300),
                                       ring in 1..6u32, outstanding in 1..5u32) {
        let mut i = Interface::new(Config {
            max_queues: 8,
            ring_capacity: ring,
            cores: 2,
            doorbell_capacity: 8,
            classes: 3,
            outstanding_per_class: outstanding,
        });
        // Drivers 0 and 1 may use classes {0,1} and {2}; driver 2 any.
        let drivers = [i.add_driver(Some(vec![0, 1])), i.add_driver(Some(vec![2])), i.add_driver(None)];
        let mut owner: HashMap<u32, usize> = HashMap::new();
        for (d, class) in [(0usize, 0u32), (0, 1), (1, 2), (1, 2), (2, 0), (2, 2)] {
            let q = i.create_queue(drivers[d], class, Some(d as u32)).unwrap();
            owner.insert(q, d);
        }
        let mut next_cookie = 0u64;
        let mut accepted: HashMap<u64, (u32, usize)> = HashMap::new();
        let mut refused = [0u64; 3];
        let mut outstanding_h: Vec<u64> = Vec::new();
        let mut completed: HashMap<u64, usize> = HashMap::new();
        let mut out = Vec::new();
        let drain = |i: &mut Interface, completed: &mut HashMap<u64, usize>| {
            let mut c = Vec::new();
            for (d, &drv) in drivers.iter().enumerate() {
                c.clear();
                i.poll_completions(drv, usize::MAX, &mut c);
                for x in &c {
                    assert_eq!(owner[&x.queue], d, "completion to a foreign driver");
                    assert!(completed.insert(x.desc.cookie, d).is_none(), "completed twice");
                }
            }
        };
        for op in ops {
            match op {
                Op::Post { driver, q } => {
                    let cookie = next_cookie;
                    next_cookie += 1;
                    match i.post(drivers[driver], q, Descriptor { buf: 0, bytes: 64, cookie }) {
                        Ok(()) => {
                            prop_assert_eq!(owner.get(&q), Some(&driver));
                            accepted.insert(cookie, (q, driver));
                        }
                        Err(r) => {
                            let legit = owner.get(&q) == Some(&driver);
                            prop_assert!(!legit || r == Reject::RingFull, "{:?}", r);
                            refused[driver] += 1;
                        }
                    }
                }
                Op::Doorbell { driver, core, qs, mv } => {
                    let mut e: Vec<_> = qs.iter().map(|&q| DoorbellEntry::Kick(q)).collect();
                    if let (Some(c), Some(&q)) = (mv, qs.first()) {
                        e.push(DoorbellEntry::Meta(q, MetaUpdate::MoveClass { class: c }));
                    }
                    let _ = i.ring_doorbell(core, drivers[driver], &e);
                    i.nic_doorbells(core, |_| {});
                }
                Op::Fetch(n) => {
                    out.clear();
                    i.nic_fetch(n, &mut out);
                    for f in &out {
                        prop_assert_eq!(accepted[&f.desc.cookie].0, f.queue);
                        outstanding_h.push(f.handle);
                    }
                }
                Op::Complete { i: k, sent } => {
                    if !outstanding_h.is_empty() {
                        let h = outstanding_h.swap_remove(k % outstanding_h.len());
                        let st = if sent { Status::Sent } else { Status::Aborted };
                        prop_assert!(i.nic_complete(h, st).is_ok());
                        prop_assert_eq!(i.nic_complete(h, st), Err(Reject::BadCompletion));
                    }
                }
                Op::Bogus(h) => {
                    if !outstanding_h.contains(&h) {
                        prop_assert_eq!(i.nic_complete(h, Status::Sent), Err(Reject::BadCompletion));
                    }
                }
            }
            prop_assert!(i.check_invariants().is_ok(), "{:?}", i.check_invariants());
            drain(&mut i, &mut completed);
        }
        // Final drain: every owner kicks every queue; fetch and complete everything.
        for _ in 0..10_000 {
            for c in 0..2 {
                i.nic_doorbells(c, |_| {});
            }
            for (&q, &d) in &owner {
                let _ = i.ring_doorbell(0, drivers[d], &[DoorbellEntry::Kick(q)]);
                i.nic_doorbells(0, |_| {});
            }
            out.clear();
            i.nic_fetch(usize::MAX, &mut out);
            outstanding_h.extend(out.iter().map(|f| f.handle));
            if outstanding_h.is_empty() {
                break;
            }
            for h in outstanding_h.drain(..) {
                i.nic_complete(h, Status::Sent).unwrap();
            }
        }
        drain(&mut i, &mut completed);
        prop_assert_eq!(completed.len(), accepted.len());
        for (c, (_, d)) in &accepted {
            prop_assert_eq!(completed.get(c), Some(d));
        }
        let c = i.counters();
        prop_assert_eq!(c.posted, accepted.len() as u64);
        prop_assert_eq!(c.sent + c.dropped, accepted.len() as u64);
        for (d, &drv) in drivers.iter().enumerate() {
            let r = i.driver_rejects(drv).unwrap();
            let post_refusals = r[Reject::UnknownQueue as usize] + r[Reject::ForeignQueue as usize]
                + r[Reject::RingFull as usize];
            // Doorbell entries naming foreign queues are counted too, so ≥.
            prop_assert!(post_refusals >= refused[d]);
        }
        for q in owner.keys() {
            prop_assert_eq!(i.ring_len(*q), 0);
        }
    }
}
