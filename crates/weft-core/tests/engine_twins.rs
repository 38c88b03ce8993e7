//! The fast engine must produce exactly the reference engine's departures (time, packet) and
//! drops on random policies and traces: every node type, two levels, parallel shaping,
//! SENIC's two-level form, fair and FIFO flows, limits and `outstanding`. Packets arriving
//! together are offered as one batch, classified by the engine (`enqueue_batch`) or by the
//! driver (`enqueue_classified_batch`, through [`DriverClassifies`]).

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use weft_core::classifier::PacketMeta;
use weft_core::policy::Classification;
use weft_core::policy::{compile_str, LoadOptions, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::link::{self, Event, Input};
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{
    Counters, Departure, DropReason, Engine, EngineOptions, Packet, Stats, Update, UpdateError,
};

const KINDS: [&str; 8] = ["fifo", "prio", "wfq", "rr", "drr", "lstf", "edf", "senic"];

#[derive(Debug, Clone)]
struct Spec {
    root: usize,
    inner: Vec<(usize, Vec<u8>)>, // (kind, per-leaf knobs)
    shaped: Vec<Option<(u32, u32)>>,
    arrivals: Vec<(u64, u8, u8, u64, u32, u64)>, // time, group, leaf, flow, bytes, deadline/slack
    updates: Vec<(u64, u8, u32, u64)>,           // time, kind, target, value
}

fn edge_for(kind: &str, i: usize, knob: u8) -> String {
    match kind {
        "prio" => format!("priority: {i}, "),
        "wfq" => format!("weight: {}, ", 1 + knob % 5),
        "drr" => format!("quantum: {}b, ", 300 + 200 * (knob % 7) as u32),
        "senic" => format!("rate: {}mbit, ", 20 + 10 * (knob % 9) as u32),
        _ => String::new(),
    }
}

fn render(s: &Spec) -> String {
    let root = KINDS[s.root];
    let mut y =
        format!("weft: 1\nlink: {{rate: 1gbit}}\nnodes:\n  - {{name: root, type: {root}}}\n");
    for (g, (k, knobs)) in s.inner.iter().enumerate() {
        let kind = KINDS[*k];
        y += &format!(
            "  - {{name: g{g}, type: {kind}, parent: root, {}match: {{vm: {g}}}}}\n",
            edge_for(root, g, knobs[0])
        );
        for (l, &knob) in knobs.iter().enumerate() {
            let flows = if knob % 2 == 0 {
                "{by: flow, sched: fair}"
            } else {
                "{by: flow, sched: fifo}"
            };
            let extra = match knob % 5 {
                0 => ", outstanding: 2",
                1 => ", limit: {packets: 6}",
                2 => ", flow_limit: {packets: 3}",
                _ => "",
            };
            let idx = g * 8 + l;
            let parent = match s.shaped.get(idx).copied().flatten() {
                Some((rate, burst)) => {
                    y += &format!("  - {{name: s{g}-{l}, type: shape, parent: g{g}, rate: {rate}mbit, burst: {burst}b, match: {{proto: udp}}}}\n");
                    format!("s{g}-{l}")
                }
                None => format!("g{g}"),
            };
            y += &format!(
                "  - {{name: l{g}-{l}, type: leaf, parent: {parent}, {}match: {{tag: {l}}}, flows: {flows}{extra}}}\n",
                edge_for(kind, l, knob)
            );
        }
    }
    y
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..KINDS.len(),
        prop::collection::vec(
            (0..KINDS.len(), prop::collection::vec(any::<u8>(), 1..4)),
            1..4,
        ),
    )
        .prop_flat_map(|(root, inner)| {
            let groups = inner.len();
            (
                Just(root),
                Just(inner),
                prop::collection::vec(prop::option::of((5u32..200, 1514u32..8000)), 32),
                prop::collection::vec(
                    (
                        0u64..200_000_000,
                        0..groups as u8,
                        0u8..3,
                        0u64..3,
                        prop::sample::select(vec![64u32, 500, 1500]),
                        0u64..200_000_000,
                    ),
                    1..100,
                ),
                prop::collection::vec((0u64..200_000_000, 0u8..6, 0u32..24, 0u64..2_000), 0..24),
                // Half the cases put arrivals on a 20 µs grid: bursts of packets arriving at
                // the same instant, which drivers offer as one batch (`enqueue_batch`).
                prop::sample::select(vec![1u64, 20_000_000]),
            )
        })
        .prop_map(|(root, inner, shaped, mut arrivals, updates, grid)| {
            for a in &mut arrivals {
                a.0 -= a.0 % grid;
            }
            arrivals.sort_by_key(|a| a.0);
            Spec {
                root,
                inner,
                shaped,
                arrivals,
                updates,
            }
        })
}

fn inputs(s: &Spec, p: &Program) -> Vec<(u64, Input)> {
    let mut v: Vec<(u64, Input)> = trace(s)
        .into_iter()
        .map(|(t, pkt)| (t, Input::Packet(pkt)))
        .collect();
    let nodes = p.nodes.len() as u32;
    let shapers = p.shapers.len().max(1) as u32;
    for &(t, kind, target, value) in &s.updates {
        let node = target % nodes;
        let u = match kind {
            0 => Update::Weight {
                node,
                weight: value % 9,
            },
            1 => Update::Priority {
                node,
                priority: value % 4,
            },
            2 => Update::Quantum { node, bytes: value },
            3 => Update::Rate {
                node,
                rate_bps: value * 1_000_000,
            },
            4 => Update::Shaper {
                shaper: target % shapers,
                rate_bps: 1 + value * 100_000,
                burst_bytes: 1514 + value,
            },
            _ => Update::LeafLimits {
                node,
                limit_packets: Some(1 + value % 8),
                limit_bytes: None,
                flow_limit_packets: Some(1 + value % 4),
                flow_limit_bytes: None,
                outstanding: (value % 3 != 0).then_some(1 + value % 3),
            },
        };
        v.push((t, Input::Update(u)));
    }
    // Stable: at equal times, packets before updates, in generation order.
    v.sort_by_key(|x| x.0);
    v
}

fn trace(s: &Spec) -> Vec<(u64, Packet)> {
    s.arrivals
        .iter()
        .enumerate()
        .map(|(i, &(t, g, l, flow, bytes, extra))| {
            let mut m = PacketMeta::default();
            m.set_field("vm", &g.to_string()).unwrap();
            m.set_field("tag", &l.to_string()).unwrap();
            m.set_field("proto", if i % 3 == 0 { "tcp" } else { "udp" })
                .unwrap();
            let mut p = Packet::new(i as u64, bytes, m);
            p.flow = flow;
            if i % 2 == 0 {
                p.deadline_ps = Some(t + extra);
            } else {
                p.slack_ps = Some(extra);
            }
            (t, p)
        })
        .collect()
}

/// An engine driven as Loom's OS drives the NIC: the driver binds each packet's flow to a
/// class and offers batches with their classes (`enqueue_classified_batch`). With `moved`,
/// the driver has moved some flows to another class (Loom §4.3's inline metadata update):
/// every packet whose id is a multiple of 4 is bound to the next leaf, keeping its shaping
/// classes, a class `classify` never returns for it.
struct Driver<E> {
    e: E,
    moved: bool,
}

impl<E: Engine> Driver<E> {
    fn bind(&self, pkt: &Packet) -> Classification {
        let p = self.e.program();
        match p.classify(&pkt.meta) {
            Classification::Leaf { leaf, shaping, .. } if self.moved && pkt.id % 4 == 0 => {
                let to = (leaf as usize + 1) % p.leaves.len();
                Classification::Leaf {
                    leaf: to as u32,
                    node: p.leaves[to],
                    shaping,
                }
            }
            c => c,
        }
    }
}

impl<E: Engine> Engine for Driver<E> {
    fn program(&self) -> &Program {
        self.e.program()
    }
    /// The driver's own binding, whatever class the caller computed.
    fn enqueue_classified(
        &mut self,
        pkt: Packet,
        _class: Classification,
        now: u64,
    ) -> Result<(), DropReason> {
        let class = self.bind(&pkt);
        self.e.enqueue_classified(pkt, class, now)
    }
    fn enqueue_batch(&mut self, pkts: &[Packet], now: u64, out: &mut Vec<Result<(), DropReason>>) {
        let classified: Vec<(Packet, Classification)> =
            pkts.iter().map(|&x| (x, self.bind(&x))).collect();
        self.e.enqueue_classified_batch(&classified, now, out);
    }
    fn dequeue(&mut self, now: u64) -> Option<Departure> {
        self.e.dequeue(now)
    }
    fn next_wakeup(&self) -> Option<u64> {
        self.e.next_wakeup()
    }
    fn backlog(&self) -> usize {
        self.e.backlog()
    }
    fn update(&mut self, u: Update, now: u64) -> Result<(), UpdateError> {
        self.e.update(u, now)
    }
    fn stats(&self) -> Stats {
        self.e.stats()
    }
    fn flow_counters(&self) -> Vec<(u32, u64, Counters)> {
        self.e.flow_counters()
    }
}

/// The run's events, then every node's counters and every flow's.
fn events<E: Engine>(mut e: E, p: &Program, inputs: Vec<(u64, Input)>) -> Vec<String> {
    let mut out = Vec::new();
    link::run_inputs(&mut e, &p.link, inputs, u64::MAX, |ev| match ev {
        Event::Sent { at_ps, departure } => out.push(format!(
            "{at_ps} sent {} leaf {}",
            departure.id, departure.leaf
        )),
        Event::Dropped { at_ps, id, reason } => {
            out.push(format!("{at_ps} drop {id} {}", reason.name()))
        }
        Event::Rejected { at_ps, error, .. } => out.push(format!("{at_ps} rejected {error}")),
    });
    for (n, c) in e.stats().nodes.iter().enumerate() {
        out.push(format!("node {n}: {c:?}"));
    }
    for (leaf, flow, c) in e.flow_counters() {
        out.push(format!("leaf {leaf} flow {flow}: {c:?}"));
    }
    out
}

/// 300 cases, or `PROPTEST_CASES` when set (an explicit `with_cases` would override it).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn fast_engine_matches_reference(s in spec()) {
        let text = render(&s);
        let compiled = compile_str(Path::new("twin.yaml"), &text, &LoadOptions::default());
        // Random senic nesting can break SENIC's two-level rules; those policies are refused.
        prop_assume!(compiled.is_ok());
        let p = Arc::new(compiled.unwrap());
        let want = events(ReferenceEngine::new(p.clone()), &p, inputs(&s, &p));
        let got = events(FastEngine::new(p.clone()), &p, inputs(&s, &p));
        let got_classified =
            events(Driver { e: FastEngine::new(p.clone()), moved: false }, &p, inputs(&s, &p));
        // Flows the driver moved to other leaves: both engines alike.
        let want_moved =
            events(Driver { e: ReferenceEngine::new(p.clone()), moved: true }, &p, inputs(&s, &p));
        let got_moved =
            events(Driver { e: FastEngine::new(p.clone()), moved: true }, &p, inputs(&s, &p));
        prop_assert_eq!(got_moved, want_moved, "driver moved flows; policy:\n{}", text);
        // And with Loom's "currently limited" fast path.
        let on = EngineOptions { limited_fast_path: true };
        let want_fp = events(ReferenceEngine::with_options(p.clone(), on), &p, inputs(&s, &p));
        let got_fp = events(FastEngine::with_options(p.clone(), on), &p, inputs(&s, &p));
        prop_assert_eq!(got_fp, want_fp, "limited fast path; policy:\n{}", text);
        // Conservation under live updates: every packet is sent or dropped exactly once.
        let settled = want.iter().filter(|e| e.contains(" sent ") || e.contains(" drop ")).count();
        prop_assert!(want.iter().any(|e| e.starts_with("node 0:")), "counters compared");
        prop_assert_eq!(settled, s.arrivals.len());
        prop_assert_eq!(&got_classified, &want, "driver classifies; policy:\n{}", text);
        prop_assert_eq!(got, want, "policy:\n{}", text);
    }
}
