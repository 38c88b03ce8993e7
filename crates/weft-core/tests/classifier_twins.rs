//! The fast classifier (tuple-space search) and its reference twin (linear scan) must agree:
//! on which rules are shadowed, and on every lookup.

mod common;

use proptest::prelude::*;
use weft_core::classifier::reference::ReferenceDispatch;
use weft_core::classifier::tss::{AddError, DispatchBuilder};
use weft_core::classifier::{Match, PacketMeta, Prefix};

fn prefix() -> impl Strategy<Value = Prefix> {
    // Small address space so prefixes nest and overlap often.
    (
        0u32..4,
        0u32..4,
        prop::sample::select(vec![8u8, 16, 24, 32]),
    )
        .prop_map(|(a, b, len)| {
            let addr = (10u32 << 24) | (a << 16) | (b << 8) | 7;
            Prefix::new(
                u128::from(std::net::Ipv4Addr::from(addr).to_ipv6_mapped()),
                96 + len,
            )
        })
}

fn small_match() -> impl Strategy<Value = Match> {
    (
        prop::collection::vec(0u32..3, 0..2),
        prop::collection::vec(prop::sample::select(vec![80u16, 443, 11211]), 0..3),
        prop::collection::vec(prop::sample::select(vec![6u8, 17]), 0..2),
        prop::collection::vec(prefix(), 0..2),
        prop::collection::vec(0u32..2, 0..2),
    )
        .prop_map(|(vm, dport, proto, dst, tag)| Match {
            vm,
            dport,
            proto,
            dst,
            tag,
            ..Match::default()
        })
}

fn packet() -> impl Strategy<Value = PacketMeta> {
    (
        prop::option::of(0u32..3),
        prop::option::of(prop::sample::select(vec![80u16, 443, 11211, 22])),
        prop::option::of(prop::sample::select(vec![6u8, 17])),
        prop::option::of((0u32..4, 0u32..4, 0u32..16)),
        prop::option::of(0u32..2),
    )
        .prop_map(|(vm, dport, proto, dst, tag)| {
            common::meta(&[
                ("vm", vm.map(|v| v.to_string())),
                ("dport", dport.map(|v| v.to_string())),
                ("proto", proto.map(|v| v.to_string())),
                ("dst", dst.map(|(a, b, c)| format!("10.{a}.{b}.{c}"))),
                ("tag", tag.map(|v| v.to_string())),
            ])
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(512)))]

    #[test]
    fn fast_and_reference_dispatch_agree(
        rules in prop::collection::vec(small_match(), 1..24),
        packets in prop::collection::vec(packet(), 1..64),
    ) {
        let mut fast = DispatchBuilder::new(64);
        let mut reference = ReferenceDispatch::default();
        for (i, m) in rules.iter().enumerate() {
            let target = i as u32 + 1000;
            let expected = reference.shadowed_by(m);
            match fast.add(m, target) {
                Ok(_) => {
                    prop_assert_eq!(expected, None, "fast accepted {} which the reference finds shadowed", m);
                    reference.add(m.clone(), target);
                }
                Err(AddError::Shadowed { by }) => {
                    prop_assert_eq!(expected, Some(by as usize), "shadowing of {} differs", m);
                }
                Err(e) => prop_assert!(false, "unexpected {:?}", e),
            }
        }
        let fast = fast.build();
        for p in &packets {
            prop_assert_eq!(fast.lookup(p), reference.lookup(p), "packet {}", p);
        }
    }
}

#[test]
fn first_match_on_prefixes_is_longest_prefix_match() {
    let mut b = DispatchBuilder::new(8);
    let m = |s: &str| Match {
        dst: vec![s.parse().unwrap()],
        ..Match::default()
    };
    b.add(&m("10.0.2.0/24"), 1).unwrap();
    b.add(&m("10.0.0.0/16"), 2).unwrap();
    b.add(&Match::any(), 3).unwrap();
    // A less specific prefix first would shadow the more specific one.
    let mut bad = DispatchBuilder::new(8);
    bad.add(&m("10.0.0.0/16"), 2).unwrap();
    assert_eq!(
        bad.add(&m("10.0.2.0/24"), 1),
        Err(AddError::Shadowed { by: 0 })
    );
    let d = b.build();
    let p = |s: &str| s.parse::<PacketMeta>().unwrap();
    assert_eq!(d.lookup(&p("dst=10.0.2.9")), Some(1));
    assert_eq!(d.lookup(&p("dst=10.0.3.9")), Some(2));
    assert_eq!(d.lookup(&p("dst=10.1.0.1")), Some(3));
    assert_eq!(d.lookup(&p("vm=1")), Some(3));
    assert_eq!(d.shapes(), 3);
}

#[test]
fn union_of_earlier_rules_shadows() {
    let mut b = DispatchBuilder::new(8);
    let d = |v: Vec<u16>| Match {
        dport: v,
        ..Match::default()
    };
    b.add(&d(vec![80]), 1).unwrap();
    b.add(&d(vec![443]), 2).unwrap();
    assert_eq!(
        b.add(&d(vec![80, 443]), 3),
        Err(AddError::Shadowed { by: 0 })
    );
    assert!(b.add(&d(vec![80, 8080]), 4).is_ok());
}

#[test]
fn shape_budget_is_enforced() {
    let mut b = DispatchBuilder::new(2);
    b.add(
        &Match {
            vm: vec![1],
            ..Match::default()
        },
        1,
    )
    .unwrap();
    b.add(
        &Match {
            dport: vec![1],
            ..Match::default()
        },
        2,
    )
    .unwrap();
    assert_eq!(
        b.add(
            &Match {
                tag: vec![1],
                ..Match::default()
            },
            3
        ),
        Err(AddError::TooManyShapes { limit: 2 })
    );
}

#[test]
fn dense_prefix_tables_check_the_constant_word() {
    // Sibling /24s of one /16: stored as a direct array indexed by the third octet.
    let mut b = DispatchBuilder::new(8);
    let mut r = ReferenceDispatch::default();
    for d in 0..10u32 {
        let m = Match {
            dst: vec![format!("10.0.{d}.0/24").parse().unwrap()],
            ..Match::default()
        };
        b.add(&m, d).unwrap();
        r.add(m, d);
    }
    let d = b.build();
    for pkt in [
        "dst=10.0.3.1",
        "dst=11.0.3.1",
        "dst=10.1.3.1",
        "dst=10.0.10.1",
        "dst=::a00:301",
        "dst=2001:db8::1",
        "vm=1",
    ] {
        let p: PacketMeta = pkt.parse().unwrap();
        assert_eq!(d.lookup(&p), r.lookup(&p), "{pkt}");
    }
    assert_eq!(d.lookup(&"dst=10.0.3.1".parse().unwrap()), Some(3));
}

#[test]
fn dense_ports_use_a_direct_table_and_sparse_ones_a_hash() {
    for ports in [
        vec![1000u16, 1001, 1002, 1050],
        vec![22, 80, 443, 11211, 65535],
    ] {
        let mut b = DispatchBuilder::new(8);
        let mut r = ReferenceDispatch::default();
        for (i, &port) in ports.iter().enumerate() {
            let m = Match {
                dport: vec![port],
                ..Match::default()
            };
            b.add(&m, i as u32).unwrap();
            r.add(m, i as u32);
        }
        let d = b.build();
        for port in [
            0u16, 22, 80, 999, 1000, 1001, 1049, 1050, 1051, 11211, 65535,
        ] {
            let p: PacketMeta = format!("dport={port}").parse().unwrap();
            assert_eq!(d.lookup(&p), r.lookup(&p), "port {port} in {ports:?}");
        }
    }
}

/// The rules of a one-field dispatch point (the common case: children told apart by one id,
/// port or destination prefix), with an optional catch-all last.
#[derive(Debug, Clone)]
struct OneField {
    /// 0: `dport`, 1: `vm`, 2: `dst` as sibling `/24`s (`10.a.b.0/24` from the value).
    field: u8,
    values: Vec<u64>,
    catch_all: bool,
}

fn one_field() -> impl Strategy<Value = OneField> {
    (
        0u8..3,
        // Dense (a small range: a direct array) or spread out (a hash table).
        prop_oneof![
            prop::collection::vec(1000u64..1040, 1..24),
            prop::collection::vec(0u64..60_000, 1..24),
        ],
        any::<bool>(),
    )
        .prop_map(|(field, mut values, catch_all)| {
            let mut seen = std::collections::HashSet::new();
            values.retain(|v| seen.insert(*v));
            OneField {
                field,
                values,
                catch_all,
            }
        })
}

fn one_field_match(field: u8, v: u64) -> Match {
    match field {
        0 => Match {
            dport: vec![v as u16],
            ..Match::default()
        },
        1 => Match {
            vm: vec![v as u32],
            ..Match::default()
        },
        _ => Match {
            dst: vec![format!("10.{}.{}.0/24", (v >> 8) & 0xff, v & 0xff)
                .parse()
                .unwrap()],
            ..Match::default()
        },
    }
}

/// A packet for a one-field dispatch: the field set to `v`, or absent (its bit clear in
/// `present`) with `stale` left in it, which must not match; for `dst`, `v6` puts the address
/// outside IPv4 with the same lower 64 bits as the IPv4 address (only the constant upper word
/// differs, so only the direct array's check word can tell them apart).
fn one_field_packet(field: u8, v: Option<u64>, v6: bool, stale: u64) -> PacketMeta {
    let mut p = PacketMeta::default();
    p.set_field("proto", "tcp").unwrap();
    let Some(v) = v else {
        let mut q = one_field_packet(field, Some(stale), false, 0);
        q.present = p.present;
        return q;
    };
    match field {
        0 => p.set_field("dport", &(v & 0xffff).to_string()).unwrap(),
        1 => p.set_field("vm", &v.to_string()).unwrap(),
        _ if v6 => p
            .set_field(
                "dst",
                &format!("2001:db8::ffff:10.{}.{}.7", (v >> 8) & 0xff, v & 0xff),
            )
            .unwrap(),
        _ => p
            .set_field("dst", &format!("10.{}.{}.7", (v >> 8) & 0xff, v & 0xff))
            .unwrap(),
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(512)))]

    /// One-field dispatches take the fast paths (a direct array with the catch-all folded into
    /// its empty slots, with or without a checked constant word; one hashed shape): they must
    /// still answer as the linear scan does, for absent fields, holes, values outside the
    /// array and addresses outside IPv4.
    #[test]
    fn one_field_dispatches_agree(
        rules in one_field(),
        probes in prop::collection::vec((prop::option::of(0u64..61_000), any::<bool>(), 0usize..64), 1..64),
    ) {
        let mut fast = DispatchBuilder::new(8);
        let mut reference = ReferenceDispatch::default();
        for (i, &v) in rules.values.iter().enumerate() {
            let m = one_field_match(rules.field, v);
            prop_assert!(fast.add(&m, 100 + i as u32).is_ok(), "rule {}", m);
            reference.add(m, 100 + i as u32);
        }
        if rules.catch_all {
            fast.add(&Match::any(), 7).unwrap();
            reference.add(Match::any(), 7);
        }
        let fast = fast.build();
        for &(v, v6, pick) in &probes {
            // Half the probes hit a rule's value (or one next to it), the rest anything.
            let v = if pick < 32 {
                v.map(|_| rules.values[pick % rules.values.len()] + (pick as u64 % 3))
            } else {
                v
            };
            let p = one_field_packet(rules.field, v, v6, rules.values[pick % rules.values.len()]);
            prop_assert_eq!(fast.lookup(&p), reference.lookup(&p), "packet {} rules {:?}", p, rules);
        }
    }
}

#[test]
fn catch_all_answers_every_miss_of_a_direct_array() {
    // Dense ports with holes and a catch-all: the holes, the values outside the array and a
    // packet without the port all reach the catch-all.
    let mut b = DispatchBuilder::new(8);
    for (i, port) in [1000u16, 1001, 1003, 1010].into_iter().enumerate() {
        let m = Match {
            dport: vec![port],
            ..Match::default()
        };
        b.add(&m, i as u32).unwrap();
    }
    b.add(&Match::any(), 99).unwrap();
    let d = b.build();
    let p = |s: &str| s.parse::<PacketMeta>().unwrap();
    assert_eq!(d.lookup(&p("dport=1003")), Some(2));
    assert_eq!(d.lookup(&p("dport=1002")), Some(99));
    assert_eq!(d.lookup(&p("dport=999")), Some(99));
    assert_eq!(d.lookup(&p("dport=65535")), Some(99));
    assert_eq!(d.lookup(&p("vm=3")), Some(99));
    assert_eq!(d.shapes(), 2);
    // Sibling prefixes with a catch-all: an IPv6 destination fails the constant-word check.
    let mut b = DispatchBuilder::new(8);
    for d in 0..4u32 {
        let m = Match {
            dst: vec![format!("10.0.{d}.0/24").parse().unwrap()],
            ..Match::default()
        };
        b.add(&m, d).unwrap();
    }
    b.add(&Match::any(), 99).unwrap();
    let d = b.build();
    assert_eq!(d.lookup(&p("dst=10.0.2.9")), Some(2));
    assert_eq!(d.lookup(&p("dst=10.0.9.9")), Some(99));
    assert_eq!(d.lookup(&p("dst=::a00:201")), Some(99));
    assert_eq!(d.lookup(&p("dst=2001:db8::ffff:10.0.2.1")), Some(99));
    assert_eq!(d.lookup(&p("tag=1")), Some(99));
    // Only a catch-all.
    let mut b = DispatchBuilder::new(8);
    b.add(&Match::any(), 5).unwrap();
    assert_eq!(b.build().lookup(&p("tag=1")), Some(5));
}
