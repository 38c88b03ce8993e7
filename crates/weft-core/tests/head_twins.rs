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
use weft_core::policy::{compile_str, Classification, LeafId, LoadOptions, Program};
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

/// A root of 64 to 80 children (deeper heaps, longer runs of equal start tags).
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
    queues: HashMap<(LeafId, u64), FlowQueue>,
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
        // Through the batch call (a batch of one), which loads its records ahead.
        let mut out = Vec::with_capacity(1);
        self.e.enqueue_flow_batch(&[(pkt, q)], now, &mut out);
        out[0]
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
    fn flow_counters(&self) -> Vec<(LeafId, u64, Counters)> {
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
        ("  - {name: root, type: wfq}\n  - {name: s, type: shape, parent: root, rate: 1gbit}\n  - {name: a, type: leaf, parent: s, match: {tag: 0}}\n  - {name: b, type: leaf, parent: s, match: {tag: 1}}\n", "`s`", "several children"),
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

/// A class: Mbit/s, and its burst in frames.
type Class = (u16, u8);

/// A policy with shaping classes over one edge each: a root of `kind` over up to four
/// inner nodes (`prio` of three leaves with distinct or shared priorities, or `wfq`),
/// each optionally under a class, and that class optionally under an outer one.
#[derive(Debug, Clone)]
struct Shaped {
    root: usize,
    /// Per inner node: its kind (prio or wfq), its class (Mbit/s, burst in frames), an
    /// outer class over that one.
    inner: Vec<(bool, Option<Class>, Option<Class>)>,
    arrivals: Vec<(u16, u8, u16)>,
}

fn shaped() -> impl Strategy<Value = Shaped> {
    (
        1..4usize,
        prop::collection::vec(
            (
                any::<bool>(),
                prop::option::of((50..3000u16, 1..8u8)),
                prop::option::of((50..3000u16, 1..8u8)),
            ),
            1..5,
        ),
        prop::collection::vec((0..100u16, any::<u8>(), 64..1500u16), 1..300),
    )
        .prop_map(|(root, inner, arrivals)| Shaped {
            root,
            inner,
            arrivals,
        })
}

/// The policy.
fn render_shaped(s: &Shaped) -> String {
    let mut t = format!(
        "weft: 1\nlink: {{rate: 10gbit, overhead: 20b}}\nnodes:\n  - {{name: root, type: {}}}\n",
        KINDS[s.root]
    );
    for (i, (prio, class, outer)) in s.inner.iter().enumerate() {
        let mut parent = "root".to_string();
        let edge = edge(KINDS[s.root], i as u8 % 2, 1 + i as u8);
        if let (Some((mbit, frames)), Some(_)) | (Some((mbit, frames)), None) = (class, outer) {
            if let Some((ombit, oframes)) = outer {
                t.push_str(&format!(
                    "  - {{name: o{i}, type: shape, parent: root, rate: {ombit}mbit, burst: {}b}}\n",
                    1520 * *oframes as u32
                ));
                parent = format!("o{i}");
            }
            t.push_str(&format!(
                "  - {{name: s{i}, type: shape, parent: {parent}, rate: {mbit}mbit, burst: {}b}}\n",
                1520 * *frames as u32
            ));
            parent = format!("s{i}");
        }
        t.push_str(&format!(
            "  - {{name: n{i}, type: {}, parent: {parent}, {edge}match: {{tag: [{}, {}, {}]}}}}\n",
            if *prio { "prio" } else { "wfq" },
            3 * i,
            3 * i + 1,
            3 * i + 2
        ));
        for j in 0..3 {
            let e = if *prio {
                format!("priority: {}, ", j % 2 + (i % 2) * j)
            } else {
                format!("weight: {}, ", 1 + j * 2)
            };
            t.push_str(&format!(
                "  - {{name: l{i}{j}, type: leaf, parent: n{i}, {e}match: {{tag: {}}}, limit: {{packets: 40}}}}\n",
                3 * i + j
            ));
        }
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("WEFT_HEAD_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
    ))]

    /// Shaped: every packet is sent once or dropped, the invariants hold, and no class
    /// sends more than `burst + rate × interval` (wire bytes counted) in any interval
    /// between two of its departures, by token-bucket arithmetic on the departure times.
    #[test]
    fn head_engine_keeps_class_limits(s in shaped()) {
        let text = render_shaped(&s);
        let p = Arc::new(compile_str(Path::new("shaped.yaml"), &text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}\n{text}", e.render_plain())));
        let leaves = p.leaves.len();
        let arrivals: Vec<(u64, Packet)> = s
            .arrivals
            .iter()
            .enumerate()
            .map(|(i, &(t, leaf, bytes))| {
                let mut meta = PacketMeta::default();
                meta.set_field("tag", &(leaf as usize % leaves).to_string()).unwrap();
                (t as u64 * 1_000_000, Packet::new(i as u64, bytes as u32, meta))
            })
            .collect();
        let mut arrivals = arrivals;
        arrivals.sort_by_key(|&(t, _)| t);
        let mut e = HeadEngine::new(p.clone()).unwrap();
        let mut sent: Vec<(u64, LeafId, u32)> = Vec::new(); // time, leaf, wire bytes
        let mut dropped = 0usize;
        let inputs = arrivals.iter().map(|&(t, p)| (t, link::Input::Packet(p)));
        link::run_bursts(&mut e, &p.link, inputs, u64::MAX, 1, |ev| match ev {
            Event::Sent { at_ps, departure } => {
                sent.push((at_ps, departure.leaf, departure.bytes + 20))
            }
            Event::Dropped { .. } => dropped += 1,
            Event::Rejected { .. } => {}
        });
        e.check_invariants();
        prop_assert_eq!(sent.len() + dropped, arrivals.len(), "policy:\n{}", text);
        // Per class: the leaves under it.
        for (c, sh) in p.shaper_ids() {
            let under: Vec<LeafId> = p
                .leaf_ids()
                .filter(|&(_, n)| {
                    let mut path = Vec::new();
                    let mut x = Some(n);
                    while let Some(v) = x {
                        path.extend(p.node(v).shaping_parents.iter().copied());
                        x = p.node(v).parent;
                    }
                    let mut all = path.clone();
                    for &s0 in &path {
                        all.extend(p.shaper(s0).shaping_parents.iter().copied());
                    }
                    all.contains(&c)
                })
                .map(|(l, _)| l)
                .collect();
            let times: Vec<(u64, u32)> = sent
                .iter()
                .filter(|d| under.contains(&d.1))
                .map(|&(t, _, b)| (t, b))
                .collect();
            for i in 0..times.len() {
                let mut bytes = 0u128;
                for &(t, b) in &times[i..] {
                    bytes += b as u128;
                    // bits · 10^12 ≤ burst bits · 10^12 + rate · Δt(ps), plus one rounding
                    // picosecond per packet.
                    let dt = (t - times[i].0) as u128;
                    let allowed = sh.burst_bytes as u128 * 8 * 1_000_000_000_000
                        + sh.rate_bps as u128 * dt
                        + sh.rate_bps as u128 * times.len() as u128;
                    prop_assert!(
                        bytes * 8 * 1_000_000_000_000 <= allowed,
                        "class {} sent {} B between {} and {} ps\n{}",
                        sh.name, bytes, times[i].0, t, text
                    );
                }
            }
        }
    }
}

/// A saturated shaped pipe beside a saturated unshaped leaf of lower priority: at every
/// instant the link starts a packet, the shaped pipe's next packet goes if, and only if,
/// its class's token bucket holds the tokens for it then (a bucket of depth `burst`,
/// filling at `rate`, written here from the definition). So the class is neither early
/// (the limit) nor late (a parked pipe comes back as soon as its tokens do).
#[test]
fn a_shaped_pipe_sends_exactly_when_its_tokens_allow() {
    let text = "weft: 1
link: {rate: 10gbit, overhead: 20b}
nodes:
  - {name: root, type: prio}
  - {name: cap, type: shape, parent: root, rate: 1gbit, burst: 3040b}
  - {name: pipe, type: prio, parent: cap, priority: 0, match: {tag: [0, 1]}}
  - {name: hi, type: leaf, parent: pipe, priority: 0, match: {tag: 0}, limit: {packets: 100000}}
  - {name: lo, type: leaf, parent: pipe, priority: 1, match: {tag: 1}, limit: {packets: 100000}}
  - {name: other, type: leaf, parent: root, priority: 1, match: {tag: 2}, limit: {packets: 100000}}
";
    let p = Arc::new(compile_str(Path::new("cap.yaml"), text, &LoadOptions::default()).unwrap());
    let (rate_bps, burst_bytes, overhead) = (1_000_000_000u128, 3_040u128, 20u128);
    let mut arrivals = Vec::new();
    for i in 0..30_000u64 {
        // Shaped packets of two sizes into two leaves; small unshaped ones.
        let (tag, bytes) = match i % 10 {
            0 => ("0", 1_500),
            1 => ("1", 700),
            _ => ("2", 100),
        };
        let mut meta = PacketMeta::default();
        meta.set_field("tag", tag).unwrap();
        arrivals.push((i * 50_000, link::Input::Packet(Packet::new(i, bytes, meta))));
    }
    let mut e = HeadEngine::new(p.clone()).unwrap();
    let mut sent: Vec<(u64, bool, u32)> = Vec::new(); // start, shaped, frame bytes
    let leaf_name = |l: LeafId| p.node(p.leaf_node(l)).name.clone();
    link::run_bursts(&mut e, &p.link, arrivals, u64::MAX, 1, |ev| {
        if let Event::Sent { at_ps, departure } = ev {
            let shaped = leaf_name(departure.leaf) != "other";
            sent.push((at_ps, shaped, departure.bytes));
        }
    });
    // The bucket: depth in ps of filling, full again at `full`.
    let ps = |bytes: u128| (bytes * 8 * 1_000_000_000_000).div_ceil(rate_bps);
    let depth = burst_bytes * 8 * 1_000_000_000_000 / rate_bps;
    let mut full = 0u128;
    // The shaped pipe's queue in its own order (prio: `hi` before `lo`), as the model
    // needs the size of the packet it would send next: rebuilt from what it sent.
    let mut shaped_sent = 0;
    let mut checked = 0;
    for (k, &(t, shaped, bytes)) in sent.iter().enumerate() {
        let t = t as u128;
        if shaped {
            let cost = ps(bytes as u128 + overhead);
            let due = full.saturating_sub(depth - cost.min(depth));
            assert!(
                due <= t,
                "departure {k}: a shaped packet of {bytes} B at {t} ps, its tokens due at {due}"
            );
            full = full.max(t) + cost;
            shaped_sent += 1;
        } else if let Some(&(_, _, next)) = sent[k..].iter().find(|d| d.1) {
            // An unshaped packet went: the shaped pipe's next packet (the next shaped one
            // sent; the pipe is never empty before the end) must not have conformed.
            let cost = ps(next as u128 + overhead);
            let due = full.saturating_sub(depth - cost.min(depth));
            assert!(
                due > t,
                "departure {k}: an unshaped packet at {t} ps while the shaped pipe's \
                 {next} B packet conformed since {due} ps"
            );
            checked += 1;
        }
        if shaped_sent == 600 {
            break;
        }
    }
    assert_eq!(shaped_sent, 600, "the run sends 600 shaped packets");
    assert!(checked > 1_000, "{checked} unshaped departures checked");
}
