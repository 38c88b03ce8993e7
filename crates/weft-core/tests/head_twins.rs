//! The head engine must send exactly what the PIFO reference sends, at the same times, on
//! random policies without shaping: `fifo`, `prio` (with priorities shared by siblings, so
//! that ties between children occur), `wfq` and `rr` nodes two levels deep over
//! first-come first-served leaves, flows by none or by the host's flow id, leaf and flow
//! limits, mixed packet sizes arriving in bursts; packets classified by the engine or
//! posted to flow queues; the link taking one packet or bursts. Its invariants hold after
//! every case. Policies it does not run are refused with the node named.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{compile_str, Classification, LoadOptions, Program};
use weft_core::sched::heads::HeadEngine;
use weft_core::sched::link::{self, Event};
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{
    Counters, Departure, DropReason, Engine, FlowQueue, Packet, Stats, Update, UpdateError,
};

const KINDS: [&str; 4] = ["fifo", "prio", "wfq", "rr"];

/// A child of the root: `None` for a leaf, or an inner node's kind and how many leaves
/// it has; then its priority and weight.
type Child = (Option<(usize, u8)>, u8, u8);

#[derive(Debug, Clone)]
struct Spec {
    root: usize,
    children: Vec<Child>,
    /// Per leaf (in order): by flow, limit packets (0: none), flow limit packets (0: none).
    leaves: Vec<(bool, u8, u8)>,
    /// time (µs / 16), leaf, flow, bytes.
    arrivals: Vec<(u16, u8, u8, u16)>,
    gbit: u8,
}

fn spec() -> impl Strategy<Value = Spec> {
    spec_of(1..5)
}

/// A root of 64 to 80 children: the engine keeps them in a calendar of rank buckets.
fn wide_spec() -> impl Strategy<Value = Spec> {
    spec_of(64..81)
}

fn spec_of(children: std::ops::Range<usize>) -> impl Strategy<Value = Spec> {
    (
        0..4usize,
        prop::collection::vec(
            (prop::option::of((0..4usize, 1..4u8)), 0..3u8, 1..6u8),
            children,
        ),
        prop::collection::vec((any::<bool>(), 0..12u8, 0..6u8), 16),
        prop::collection::vec((0..200u16, any::<u8>(), 0..3u8, 64..1500u16), 1..300),
        1..10u8,
    )
        .prop_map(|(root, children, leaves, arrivals, gbit)| Spec {
            root,
            children,
            leaves,
            arrivals,
            gbit,
        })
}

fn edge(kind: &str, priority: u8, weight: u8) -> String {
    match kind {
        "prio" => format!("priority: {priority}, "),
        "wfq" => format!("weight: {weight}, "),
        _ => String::new(),
    }
}

/// The policy, and how many leaves it has.
fn render(s: &Spec) -> (String, usize) {
    let mut t = format!(
        "weft: 1\nlink: {{rate: {}gbit, overhead: 20b}}\nnodes:\n  - {{name: root, type: {}}}\n",
        s.gbit, KINDS[s.root]
    );
    let mut leaf = 0usize;
    let leaf_line = |t: &mut String, leaf: &mut usize, parent: &str, pk: &str, pr: u8, w: u8| {
        let (by_flow, limit, flow_limit) = s.leaves[*leaf % s.leaves.len()];
        let mut extra = String::new();
        if limit > 0 {
            extra += &format!(", limit: {{packets: {limit}}}");
        }
        if flow_limit > 0 {
            extra += &format!(", flow_limit: {{packets: {flow_limit}}}");
        }
        t.push_str(&format!(
            "  - {{name: l{leaf}, type: leaf, parent: {parent}, {}match: {{tag: {leaf}}}, flows: {{by: {}}}{extra}}}\n",
            edge(pk, pr, w),
            if by_flow { "flow" } else { "none" },
        ));
        *leaf += 1;
    };
    for (i, (inner, pr, w)) in s.children.iter().enumerate() {
        match inner {
            None => leaf_line(&mut t, &mut leaf, "root", KINDS[s.root], *pr, *w),
            Some((k, n)) => {
                let first = leaf;
                let tags: Vec<String> = (first..first + *n as usize)
                    .map(|x| x.to_string())
                    .collect();
                t.push_str(&format!(
                    "  - {{name: n{i}, type: {}, parent: root, {}match: {{tag: [{}]}}}}\n",
                    KINDS[*k],
                    edge(KINDS[s.root], *pr, *w),
                    tags.join(", ")
                ));
                for j in 0..*n {
                    let (pr, w) = ((j + pr) % 3, 1 + (j * 3 + w) % 5);
                    leaf_line(&mut t, &mut leaf, &format!("n{i}"), KINDS[*k], pr, w);
                }
            }
        }
    }
    (t, leaf)
}

fn trace(s: &Spec, leaves: usize) -> Vec<(u64, Packet)> {
    let mut v: Vec<(u64, Packet)> = s
        .arrivals
        .iter()
        .enumerate()
        .map(|(i, &(t, leaf, flow, bytes))| {
            let mut meta = PacketMeta::default();
            meta.set_field("tag", &(leaf as usize % leaves).to_string())
                .unwrap();
            let mut p = Packet::new(i as u64, bytes as u32, meta);
            p.flow = flow as u64;
            (t as u64 * 16_000_000, p)
        })
        .collect();
    v.sort_by_key(|&(t, _)| t);
    v
}

/// Every departure and drop with its time, then the counters.
fn events<E: Engine>(
    mut e: E,
    p: &Program,
    arrivals: Vec<(u64, Packet)>,
    burst: usize,
) -> (Vec<String>, E) {
    let mut out = Vec::new();
    let inputs = arrivals
        .into_iter()
        .map(|(t, p)| (t, link::Input::Packet(p)));
    link::run_bursts(&mut e, &p.link, inputs, u64::MAX, burst, |ev| match ev {
        Event::Sent { at_ps, departure } => out.push(format!(
            "{at_ps} sent {} leaf {} flow {} enq {}",
            departure.id, departure.leaf, departure.flow, departure.enqueued_ps
        )),
        Event::Dropped {
            at_ps, id, reason, ..
        } => out.push(format!("{at_ps} drop {id} {}", reason.name())),
        Event::Rejected { at_ps, error, .. } => out.push(format!("{at_ps} rejected {error}")),
    });
    out.push(format!("held {}", e.backlog()));
    for (n, c) in e.stats().nodes.iter().enumerate() {
        out.push(format!("node {n}: {c:?}"));
    }
    for (leaf, flow, c) in e.flow_counters() {
        out.push(format!("leaf {leaf} flow {flow}: {c:?}"));
    }
    (out, e)
}

/// An engine whose packets go to flow queues the driver opens (`open_flow`,
/// `enqueue_flow`) instead of being classified by the engine.
struct ByQueue<E: Engine> {
    e: E,
    queues: HashMap<(u32, u64), FlowQueue>,
}

impl<E: Engine> Engine for ByQueue<E> {
    fn program(&self) -> &Program {
        self.e.program()
    }
    fn enqueue_classified(
        &mut self,
        pkt: Packet,
        class: Classification,
        now: u64,
    ) -> Result<(), DropReason> {
        let Classification::Leaf { leaf, .. } = class else {
            return self.e.enqueue_classified(pkt, class, now);
        };
        let e = &mut self.e;
        let q = *self
            .queues
            .entry((leaf, pkt.flow))
            .or_insert_with(|| e.open_flow(&pkt, class).expect("a leaf"));
        self.e.enqueue_flow(pkt, &q, now)
    }
    fn open_flow(&mut self, pkt: &Packet, class: Classification) -> Option<FlowQueue> {
        self.e.open_flow(pkt, class)
    }
    fn enqueue_flow(&mut self, pkt: Packet, q: &FlowQueue, now: u64) -> Result<(), DropReason> {
        self.e.enqueue_flow(pkt, q, now)
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
    fn close_flow(&mut self, q: &FlowQueue) -> bool {
        self.e.close_flow(q)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("WEFT_HEAD_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300)
    ))]

    #[test]
    fn head_engine_matches_reference_without_shaping(s in spec()) {
        let (text, leaves) = render(&s);
        let p = Arc::new(compile_str(Path::new("heads.yaml"), &text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}\n{text}", e.render_plain())));
        let arrivals = trace(&s, leaves);
        let (want, _) = events(ReferenceEngine::new(p.clone()), &p, arrivals.clone(), 1);
        let (got, e) = events(HeadEngine::new(p.clone()).unwrap(), &p, arrivals.clone(), 1);
        e.check_invariants();
        prop_assert_eq!(&got, &want, "policy:\n{}", text);
        // Bursts of up to 8 at one instant.
        let (want8, _) = events(ReferenceEngine::new(p.clone()), &p, arrivals.clone(), 8);
        let (got8, _) = events(HeadEngine::new(p.clone()).unwrap(), &p, arrivals.clone(), 8);
        prop_assert_eq!(&got8, &want8, "bursts; policy:\n{}", text);
        // Flow queues the driver opens: what classifying every packet gives.
        let queued = ByQueue { e: HeadEngine::new(p.clone()).unwrap(), queues: HashMap::new() };
        let (by_queue, q) = events(queued, &p, arrivals, 1);
        q.e.check_invariants();
        prop_assert_eq!(&by_queue, &want, "flow queues; policy:\n{}", text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("WEFT_HEAD_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100)
    ))]

    #[test]
    fn head_engine_matches_reference_with_many_children(s in wide_spec()) {
        let (text, leaves) = render(&s);
        let p = Arc::new(compile_str(Path::new("heads.yaml"), &text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}\n{text}", e.render_plain())));
        let arrivals = trace(&s, leaves);
        let (want, _) = events(ReferenceEngine::new(p.clone()), &p, arrivals.clone(), 1);
        let (got, e) = events(HeadEngine::new(p.clone()).unwrap(), &p, arrivals, 1);
        e.check_invariants();
        prop_assert_eq!(&got, &want, "policy:\n{}", text);
    }
}

#[test]
fn refuses_what_it_does_not_implement() {
    let cases = [
        ("  - {name: root, type: drr}\n  - {name: a, type: leaf, parent: root, match: {tag: 0}}\n", "`root`", "drr"),
        ("  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, match: {tag: 0}, flows: {by: flow, sched: fair}}\n", "`a`", "fairly"),
        ("  - {name: root, type: wfq}\n  - {name: s, type: shape, parent: root, rate: 1gbit, match: {dst: 10.0.0.1}}\n  - {name: t, type: shape, parent: root, rate: 1gbit, match: {dst: 10.0.0.2}}\n  - {name: a, type: leaf, parent: [s, t], match: {tag: 0}}\n", "`a`", "parallel"),
    ];
    for (nodes, node, why) in cases {
        let text = format!("weft: 1\nnodes:\n{nodes}");
        let p = match compile_str(Path::new("refused.yaml"), &text, &LoadOptions::default()) {
            Ok(p) => Arc::new(p),
            Err(e) => panic!("{}\n{text}", e.render_plain()),
        };
        let err = HeadEngine::new(p).expect_err(&text).to_string();
        assert!(
            err.contains(node) && err.contains(why) && err.contains("refused.yaml:"),
            "{err}"
        );
    }
}
