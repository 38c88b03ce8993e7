//! The invariants of docs/design.md as property tests on random policies and traces:
//! conservation, per-flow order, work conservation, the shaping bound, strict priority, the
//! fair-queuing bound and bounded memory under overload.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{compile_str, LeafId, LoadOptions, Program};
use weft_core::sched::link::{self, wire_ps, Event};
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{EngineOptions, Packet};

#[derive(Debug, Clone)]
struct Case {
    root: &'static str,
    leaves: usize,
    /// Per leaf: optional (rate mbit, burst bytes) of a shaping node above it.
    shaping: Vec<Option<(u32, u32)>>,
    /// (arrival ps, leaf, flow, bytes)
    arrivals: Vec<(u64, usize, u64, u32)>,
    /// Loom's "currently limited" fast path on.
    fast_path: bool,
}

fn policy(c: &Case) -> String {
    let mut s = format!(
        "weft: 1\nlink: {{rate: 1gbit}}\nnodes:\n  - {{name: root, type: {}}}\n",
        c.root
    );
    for i in 0..c.leaves {
        let edge = match c.root {
            "prio" => format!("priority: {i}, "),
            "wfq" => format!("weight: {}, ", i + 1),
            "drr" => format!("quantum: {}b, ", 500 + 300 * i),
            "senic" => format!("rate: {}mbit, ", 100 + 150 * i),
            _ => String::new(),
        };
        let parent = match c.shaping[i] {
            Some((rate, burst)) => {
                s += &format!("  - {{name: s{i}, type: shape, parent: root, rate: {rate}mbit, burst: {burst}b}}\n");
                format!("s{i}")
            }
            None => "root".into(),
        };
        s += &format!(
            "  - {{name: l{i}, type: leaf, parent: {parent}, {edge}match: {{tag: {i}}}, flows: {{by: flow, sched: fair}}, limit: {{packets: 100000}}, flow_limit: {{packets: 100000}}}}\n"
        );
    }
    s
}

fn case(shaped: bool) -> impl Strategy<Value = Case> {
    let roots = vec!["fifo", "prio", "wfq", "rr", "drr", "lstf", "edf", "senic"];
    (prop::sample::select(roots), 2usize..5).prop_flat_map(move |(root, leaves)| {
        let shaping = if shaped {
            prop::collection::vec(prop::option::of((50u32..400, 1514u32..20_000)), leaves).boxed()
        } else {
            Just(vec![None; leaves]).boxed()
        };
        let arrivals = prop::collection::vec(
            (
                0u64..200_000_000,
                0..leaves,
                0u64..3,
                prop::sample::select(vec![64u32, 200, 700, 1500]),
            ),
            1..120,
        );
        // A third of the cases start 100 days in (close to `LAST_ARRIVAL_PS`, 106.7 days):
        // the invariants hold however late the clock.
        let base = prop::sample::select(vec![0u64, 0, 100 * 86_400 * 1_000_000_000_000]);
        (
            Just(root),
            Just(leaves),
            shaping,
            arrivals,
            any::<bool>(),
            base,
        )
            .prop_map(|(root, leaves, shaping, mut arrivals, fast_path, base)| {
                for a in &mut arrivals {
                    a.0 += base;
                }
                arrivals.sort_by_key(|a| a.0);
                Case {
                    root,
                    leaves,
                    shaping,
                    arrivals,
                    fast_path,
                }
            })
    })
}

struct Run {
    prog: Arc<Program>,
    /// (start ps, packet index)
    sent: Vec<(u64, usize)>,
}

fn run(c: &Case) -> Run {
    let prog = Arc::new(
        compile_str(Path::new("case.yaml"), &policy(c), &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}\n{}", e.render_plain(), policy(c))),
    );
    let arrivals: Vec<(u64, Packet)> = c
        .arrivals
        .iter()
        .enumerate()
        .map(|(i, &(t, leaf, flow, bytes))| {
            let mut meta = PacketMeta::default();
            meta.set_field("tag", &leaf.to_string()).unwrap();
            let mut p = Packet::new(i as u64, bytes, meta);
            p.flow = flow;
            (t, p)
        })
        .collect();
    let options = EngineOptions {
        limited_fast_path: c.fast_path,
        ..EngineOptions::default()
    };
    let mut e = ReferenceEngine::with_options(prog.clone(), options);
    let mut sent = Vec::new();
    link::run(&mut e, &prog.link, arrivals, u64::MAX, |ev| match ev {
        Event::Sent { at_ps, departure } => sent.push((at_ps, departure.id as usize)),
        Event::Dropped { .. } | Event::Rejected { .. } => {
            panic!("no drops expected with these limits")
        }
    });
    Run { prog, sent }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(150)))]

    #[test]
    fn conservation_order_and_work_conservation(c in case(false)) {
        let r = run(&c);
        // Conservation: every packet exactly once.
        let mut ids: Vec<usize> = r.sent.iter().map(|s| s.1).collect();
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..c.arrivals.len()).collect::<Vec<_>>());
        // Per-flow order.
        let mut last: HashMap<(usize, u64), usize> = HashMap::new();
        for &(_, i) in &r.sent {
            let (_, leaf, flow, _) = c.arrivals[i];
            if let Some(&prev) = last.get(&(leaf, flow)) {
                prop_assert!(prev < i, "flow ({leaf},{flow}): {i} after {prev}");
            }
            last.insert((leaf, flow), i);
        }
        // Nobody leaves before arriving.
        for &(t, i) in &r.sent {
            prop_assert!(t >= c.arrivals[i].0);
        }
        // Work conservation (no shaping; senic is non-work-conserving below its limits).
        if c.root != "senic" {
            for w in r.sent.windows(2) {
                let end = w[0].0 + wire_ps(c.arrivals[w[0].1].3, &r.prog.link);
                prop_assert!(w[1].0 >= end, "frames overlap");
                if w[1].0 > end {
                    // The link idled: the next packet cannot have been waiting.
                    prop_assert_eq!(w[1].0, c.arrivals[w[1].1].0, "idle link with backlog at {}", end);
                }
            }
        }
        // Strict priority: no lower-priority packet starts while a higher one waits.
        if c.root == "prio" {
            for &(t, i) in &r.sent {
                let mine = c.arrivals[i].1;
                for &(t2, j) in &r.sent {
                    let theirs = c.arrivals[j].1;
                    if theirs < mine && c.arrivals[j].0 <= t && t2 > t {
                        prop_assert!(false, "leaf {mine} sent at {t} while higher leaf {theirs} waited");
                    }
                }
            }
        }
    }

    #[test]
    fn shaping_bound(c in case(true)) {
        let r = run(&c);
        prop_assert_eq!(r.sent.len(), c.arrivals.len());
        for (leaf, s) in c.shaping.iter().enumerate() {
            let Some((rate_mbit, burst)) = *s else { continue };
            let mine: Vec<(u64, u32)> = r.sent.iter().filter(|x| c.arrivals[x.1].1 == leaf).map(|x| (x.0, c.arrivals[x.1].3)).collect();
            // A packet larger than the bucket goes when the bucket is full.
            let overhead = r.prog.link.overhead_bytes as u128;
            let burst = mine.iter().map(|m| m.1 as u128 + overhead).max().unwrap_or(0).max(burst as u128);
            for i in 0..mine.len() {
                let mut bytes = 0u128;
                for j in i..mine.len() {
                    // Classes count what the link carries: the frame and its overhead.
                    bytes += mine[j].1 as u128 + r.prog.link.overhead_bytes as u128;
                    let window = (mine[j].0 - mine[i].0) as u128;
                    // Bytes whose transmission starts in [t_i, t_j] ≤ burst + rate × window.
                    let allowed = burst * 8 * 1_000_000_000_000 + rate_mbit as u128 * 1_000_000 * window;
                    prop_assert!(bytes * 8 * 1_000_000_000_000 <= allowed, "leaf {leaf}: {bytes} B in {window} ps exceeds {rate_mbit} Mbit/s + {burst} B");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(60)))]

    /// Invariant 6: backlogged `wfq` siblings' weight-normalized service differs by at most
    /// one maximum packet over each weight (the STFQ bound), at every departure.
    #[test]
    fn wfq_fairness_bound(
        weights in prop::collection::vec(1u32..9, 2..5),
        sizes in prop::collection::vec(prop::collection::vec(prop::sample::select(vec![64u32, 300, 1000, 1500]), 1..6), 4),
    ) {
        let n = weights.len();
        let mut s = "weft: 1\nlink: {rate: 1gbit}\nnodes:\n  - {name: root, type: wfq}\n".to_string();
        for (i, w) in weights.iter().enumerate() {
            s += &format!("  - {{name: l{i}, type: leaf, parent: root, weight: {w}, match: {{tag: {i}}}, limit: {{packets: 100000}}, flow_limit: {{packets: 100000}}}}\n");
        }
        let prog = Arc::new(compile_str(Path::new("w.yaml"), &s, &LoadOptions::default()).unwrap());
        // Every leaf backlogged from t = 0 with 300 packets cycling through its sizes.
        let mut arrivals = Vec::new();
        let mut leaf_of = Vec::new();
        let mut bytes_of = Vec::new();
        for k in 0..300 {
            for i in 0..n {
                let b = sizes[i][k % sizes[i].len()];
                let mut meta = PacketMeta::default();
                meta.set_field("tag", &i.to_string()).unwrap();
                arrivals.push((0, Packet::new(leaf_of.len() as u64, b, meta)));
                leaf_of.push(i);
                // Shares count what the link carries: the frame and its 20 bytes of overhead.
                bytes_of.push(b + 20);
            }
        }
        let mut e = ReferenceEngine::new(prog.clone());
        let mut service = vec![0f64; n];
        let max_pkt: Vec<f64> = (0..n).map(|i| *sizes[i].iter().max().unwrap() as f64 + 20.0).collect();
        let mut sent = vec![0usize; n];
        let mut ok = true;
        let mut worst = String::new();
        link::run(&mut e, &prog.link, arrivals, u64::MAX, |ev| {
            if let Event::Sent { departure, .. } = ev {
                let i = leaf_of[departure.id as usize];
                service[i] += bytes_of[departure.id as usize] as f64;
                sent[i] += 1;
                // Only while every leaf is still backlogged.
                if sent.iter().all(|&c| c < 300) {
                    for a in 0..n {
                        for b in 0..n {
                            let gap = service[a] / weights[a] as f64 - service[b] / weights[b] as f64;
                            let bound = max_pkt[a] / weights[a] as f64 + max_pkt[b] / weights[b] as f64;
                            if gap > bound + 1e-9 {
                                ok = false;
                                worst = format!("{a} vs {b}: {gap} > {bound}");
                            }
                        }
                    }
                }
            }
        });
        prop_assert!(ok, "{}", worst);
    }

    /// Invariant 7 and conservation under overload: the engine never holds more than the
    /// leaves' limits, and every offered packet is sent or dropped with a counted reason.
    #[test]
    fn bounded_memory_under_overload(limit in 1u64..40, flow_limit in 1u64..20, n in 50usize..400) {
        let s = format!("weft: 1\nlink: {{rate: 100mbit}}\nnodes:\n  - {{name: root, type: fifo}}\n  - {{name: a, type: leaf, parent: root, flows: {{by: flow}}, limit: {{packets: {limit}}}, flow_limit: {{packets: {flow_limit}}}}}\n");
        let prog = Arc::new(compile_str(Path::new("o.yaml"), &s, &LoadOptions::default()).unwrap());
        let mut e = ReferenceEngine::new(prog.clone());
        // 10x overload: 1500 B every 12 us on a 100 Mbit/s link (120 us per packet).
        let arrivals: Vec<(u64, Packet)> = (0..n).map(|i| {
            let mut p = Packet::new(i as u64, 1500, PacketMeta::default());
            p.flow = (i % 3) as u64;
            (i as u64 * 12_000_000, p)
        }).collect();
        let (mut sent, mut dropped) = (0u64, 0u64);
        let mut peak = 0usize;
        {
            let mut count = |ev: Event| match ev {
                Event::Sent { .. } => sent += 1,
                Event::Dropped { .. } => dropped += 1,
                Event::Rejected { .. } => {}
            };
            // Drive by hand so the backlog can be observed between events.
            let mut t_free = 0u64;
            for (t, p) in arrivals {
                while t_free <= t {
                    match weft_core::sched::Engine::dequeue(&mut e, t_free) {
                        Some(d) => { count(Event::Sent { at_ps: t_free, departure: d }); t_free += wire_ps(1500, &prog.link); }
                        None => break,
                    }
                }
                if let Err(reason) = weft_core::sched::Engine::enqueue(&mut e, p, t) {
                    count(Event::Dropped { at_ps: t, id: p.id, leaf: Some(LeafId::new(0)), reason });
                }
                peak = peak.max(weft_core::sched::Engine::backlog(&e));
                t_free = t_free.max(t);
            }
            while let Some(d) = weft_core::sched::Engine::dequeue(&mut e, t_free) {
                count(Event::Sent { at_ps: t_free, departure: d });
                t_free += wire_ps(1500, &prog.link);
            }
        }
        prop_assert!(peak as u64 <= limit.min(3 * flow_limit), "peak {} > limit {}", peak, limit);
        prop_assert_eq!(sent + dropped, n as u64);
        let counted: u64 = e.stats.nodes[1].dropped();
        prop_assert_eq!(counted, dropped, "drops counted at the leaf");
        prop_assert_eq!(e.stats.nodes[1].packets, sent);
    }
}
