//! Unit tests of the head engine's internals (its twin and property tests against the
//! reference are in `tests/head_twins.rs` and `tests/fluid_check.rs`).

use super::*;
use crate::classifier::{Field, PacketMeta};
use crate::policy::{compile_str, LoadOptions};
use std::path::Path;

/// `wfq` and `rr` nodes two levels deep, weights 1 to 7, priorities that tie.
const POLICY: &str = "weft: 1
name: wrap
link: {rate: 10gbit, overhead: 24b}
nodes:
  - {name: root, type: wfq}
  - {name: a, type: wfq, parent: root, weight: 3, match: {vm: 0}}
  - {name: b, type: rr, parent: root, weight: 1, match: {vm: 1}}
  - {name: c, type: prio, parent: root, weight: 7, match: {vm: 2}}
  - {name: a0, type: leaf, parent: a, weight: 1, match: {tag: 0}}
  - {name: a1, type: leaf, parent: a, weight: 5, match: {tag: 1}}
  - {name: b0, type: leaf, parent: b, match: {tag: 0}}
  - {name: b1, type: leaf, parent: b, match: {tag: 1}}
  - {name: c0, type: leaf, parent: c, priority: 1, match: {tag: 0}}
  - {name: c1, type: leaf, parent: c, priority: 1, match: {tag: 1}}
";

/// Every packet's id, in sending order, for a run of `n` packets of mixed sizes, with
/// every virtual time of the engine moved on by `offset` first.
fn departures(offset: Rank, n: u64, preload: bool) -> Vec<u64> {
    let prog = compile_str(Path::new("wrap.yaml"), POLICY, &LoadOptions::default())
        .expect("the test policy compiles");
    let mut e = HeadEngine::new(Arc::new(prog)).expect("the head engine runs it");
    e.preload = preload;
    for node in &mut e.nodes {
        node.vtime += offset;
        if node.under != Under::Fixed {
            node.start += offset;
        }
    }
    let mut out = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for t in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut m = PacketMeta::default();
        m.set_int(Field::Vm, x % 3);
        m.set_int(Field::Tag, (x >> 8) % 2);
        let p = Packet::new(t, 64 + (x >> 16) as u32 % 9_000, m);
        let class = e.program().classify(&p.meta);
        let _ = e.enqueue_classified(p, class, t);
        if t % 3 != 0 {
            let mut d = Vec::new();
            e.dequeue_batch(t, 1, &mut d);
            out.extend(d.iter().map(|d| d.id));
        }
        if t % 97 == 0 {
            e.check_invariants();
        }
    }
    while let Some(d) = e.dequeue(n) {
        out.push(d.id);
    }
    out
}

/// Start tags are kept on the circle of 2⁶⁴ in the sets: moving every virtual time on
/// to just before the wrap (a node's start tags then cross it within the run) changes
/// no departure.
#[test]
fn start_tags_keep_their_order_across_the_wrap() {
    let n = 20_000;
    let plain = departures(0, n, false);
    assert!(
        plain.len() as u64 > n * 3 / 4,
        "{} of {n} packets left (the rest dropped at the leaves' default limits)",
        plain.len()
    );
    for offset in [(1 << 64) - (1 << 40), (3 << 64) - 12_345, u64::MAX as Rank] {
        assert_eq!(
            departures(offset, n, false),
            plain,
            "virtual times moved on by {offset:#x}"
        );
    }
    assert_eq!(
        departures(0, n, true),
        plain,
        "records loaded ahead (as for large policies)"
    );
}

/// Batches of flow queues, with the records prefetched ahead (as for large policies) and
/// without: the same departures, and the same verdicts at the leaves' limits.
#[test]
fn prefetching_a_batch_changes_no_departure() {
    let run = |preload: bool| {
        let prog = compile_str(Path::new("wrap.yaml"), POLICY, &LoadOptions::default())
            .expect("the test policy compiles");
        let mut e = HeadEngine::new(Arc::new(prog)).expect("the head engine runs it");
        e.preload = preload;
        let queues: Vec<FlowQueue> = (0..6u64)
            .map(|q| {
                let mut m = PacketMeta::default();
                m.set_int(Field::Vm, q % 3);
                m.set_int(Field::Tag, q / 3);
                let p = Packet::new(0, 100, m);
                let class = e.program().classify(&p.meta);
                e.open_flow(&p, class).expect("every queue is classified")
            })
            .collect();
        let (mut verdicts, mut sent) = (Vec::new(), Vec::new());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for t in 0..3_000u64 {
            let batch: Vec<(Packet, FlowQueue)> = (0..8)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let p = Packet::new(
                        t * 8 + i,
                        64 + (x >> 20) as u32 % 1_500,
                        PacketMeta::default(),
                    );
                    (p, queues[(x % 6) as usize])
                })
                .collect();
            e.enqueue_flow_batch(&batch, t, &mut verdicts);
            let mut d = Vec::new();
            e.dequeue_batch(t, 1 + (x >> 40) as usize % 10, &mut d);
            sent.extend(d.iter().map(|d| d.id));
        }
        e.check_invariants();
        (verdicts, sent)
    };
    let (plain, ahead) = (run(false), run(true));
    assert!(plain.1.len() > 10_000, "{} packets sent", plain.1.len());
    assert!(
        plain.0.iter().any(|v| v.is_err()),
        "some packets meet a full leaf"
    );
    assert_eq!(plain, ahead);
}
