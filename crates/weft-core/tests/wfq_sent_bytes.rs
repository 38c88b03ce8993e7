//! A `wfq` node charges each child for the packets that leave the child's subtree, whichever
//! entry was popped (docs/scheduling.md, "What a `wfq` share counts"). Checked departure by
//! departure against an independent model written from the definition of start-time fair
//! queuing (Goyal, Vin and Cheng, SIGCOMM 1996) with a child's packets tagged when the child
//! sends them:
//!
//! * a child that becomes backlogged starts at `S = max(V, F)`, `F` the finish tag of the
//!   last packet it sent (0 at first);
//! * the link serves the backlogged child of least `S` (ties: the child whose oldest queued
//!   packet arrived first); `V` becomes that `S` (never lower);
//! * the child sends its own first packet (a FIFO leaf's oldest; a `prio` child's oldest of
//!   its highest-priority leaf with packets), and `F = S + (bytes + overhead) / weight`; if
//!   still backlogged, its next `S` is `F`.
//!
//! Random policies: a 10 Gbit/s link (overhead 20 bytes) under a `wfq` root of 2-4 children,
//! each a FIFO leaf or a `prio` node of 2-3 leaves, weights 1-8; random arrivals of 64-1500
//! bytes in bursts, so children reorder packets of different sizes (in a third of the cases
//! every packet has 1,500 bytes). Both engines, and the fast engine with every node on a
//! calendar from its first head (the form a `wfq` node keeps while its packets are one
//! size), must send exactly the model's packets in the model's order at the model's times.
//! `WEFT_WFQ_CASES=N` runs N cases (default 200); `WEFT_WFQ_SEED=S` only seed S.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{compile_str, LoadOptions};
use weft_core::sched::fast::{CalendarUse, FastEngine};
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{Engine, EngineOptions, Packet};

const FRAC: u32 = 32;
const OVERHEAD: u64 = 20;
const LINK_BPS: u64 = 10_000_000_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A child of the root: its weight, and its leaves' priorities (one leaf: a FIFO leaf).
struct Child {
    weight: u64,
    leaves: usize,
}

/// One arrival: time, bytes, child, leaf within the child.
#[derive(Clone, Copy)]
struct Arrival {
    at_ps: u64,
    bytes: u32,
    child: usize,
    leaf: usize,
}

fn policy(children: &[Child]) -> String {
    let mut y = String::from("weft: 1\nlink: {rate: 10gbit, overhead: 20b}\nnodes:\n");
    y += "  - {name: root, type: wfq}\n";
    for (c, ch) in children.iter().enumerate() {
        if ch.leaves == 1 {
            y += &format!(
                "  - {{name: c{c}, type: leaf, parent: root, weight: {}, match: {{tenant: {c}}}}}\n",
                ch.weight
            );
            continue;
        }
        y += &format!(
            "  - {{name: c{c}, type: prio, parent: root, weight: {}, match: {{tenant: {c}}}}}\n",
            ch.weight
        );
        for l in 0..ch.leaves {
            y += &format!(
                "  - {{name: c{c}l{l}, type: leaf, parent: c{c}, priority: {l}, match: {{tag: {l}}}}}\n"
            );
        }
    }
    y
}

fn wire_ps(bytes: u32) -> u64 {
    (bytes as u64 + OVERHEAD) * 8 * 1_000_000_000_000 / LINK_BPS
}

/// The model's departures: (time, arrival index).
fn model(children: &[Child], arrivals: &[Arrival]) -> Vec<(u64, usize)> {
    let n = children.len();
    // Per child: its leaves' FIFOs of (arrival index, bytes), highest priority first; the
    // arrival order of its queued packets (for ties); start and finish tags.
    let mut leaves: Vec<Vec<VecDeque<(usize, u32)>>> = children
        .iter()
        .map(|c| vec![VecDeque::new(); c.leaves])
        .collect();
    let mut order: Vec<VecDeque<usize>> = vec![VecDeque::new(); n];
    let mut start = vec![0u128; n];
    let mut finish = vec![0u128; n];
    let mut v = 0u128;
    let (mut t, mut next) = (0u64, 0usize);
    let mut out = Vec::new();
    loop {
        while next < arrivals.len() && arrivals[next].at_ps <= t {
            let a = arrivals[next];
            if order[a.child].is_empty() {
                start[a.child] = v.max(finish[a.child]);
            }
            order[a.child].push_back(next);
            leaves[a.child][a.leaf].push_back((next, a.bytes));
            next += 1;
        }
        let Some(c) = (0..n)
            .filter(|&c| !order[c].is_empty())
            .min_by_key(|&c| (start[c], order[c][0]))
        else {
            if next == arrivals.len() {
                return out;
            }
            t = arrivals[next].at_ps;
            continue;
        };
        let (i, bytes) = leaves[c]
            .iter_mut()
            .find_map(|l| l.pop_front())
            .expect("a backlogged child has a packet");
        // The child's oldest queued arrival goes as its tie-break, whichever packet leaves.
        order[c].pop_front();
        v = v.max(start[c]);
        finish[c] =
            start[c] + ((bytes as u128 + OVERHEAD as u128) << FRAC) / children[c].weight as u128;
        if !order[c].is_empty() {
            start[c] = finish[c];
        }
        out.push((t, i));
        t += wire_ps(bytes);
    }
}

/// The engine's departures, driven as the model is: every arrival up to the link's free
/// time enqueued, then one packet.
fn run(e: &mut dyn Engine, arrivals: &[Arrival]) -> Vec<(u64, usize)> {
    let (mut t, mut next) = (0u64, 0usize);
    let mut out = Vec::new();
    loop {
        while next < arrivals.len() && arrivals[next].at_ps <= t {
            let a = arrivals[next];
            let mut m = PacketMeta::default();
            m.set_int(Field::Tenant, a.child as u64);
            m.set_int(Field::Tag, a.leaf as u64);
            e.enqueue(Packet::new(next as u64, a.bytes, m), a.at_ps)
                .unwrap_or_else(|r| panic!("arrival {next} dropped: {r:?}"));
            next += 1;
        }
        match e.dequeue(t) {
            Some(d) => {
                out.push((t, d.id as usize));
                t += wire_ps(d.bytes);
            }
            None if next == arrivals.len() => return out,
            None => t = arrivals[next].at_ps,
        }
    }
}

/// Calendars for every node from its first head, back below no entries.
const CALENDARS: CalendarUse = CalendarUse {
    min_children: 1,
    min_heads: 1,
    back_below: 0,
};

fn case(seed: u64) -> Result<(), String> {
    let mut r = Rng(seed);
    let children: Vec<Child> = (0..2 + r.below(3))
        .map(|_| Child {
            weight: 1 + r.below(8),
            leaves: [1, 2, 3][r.below(3) as usize],
        })
        .collect();
    // Bursts of arrivals: at each of 60 instants 1 ps to 20 µs apart, 1-40 packets.
    let sizes = [64u32, 200, 576, 1000, 1500];
    // A third of the cases send one size: the fast engine then keeps its calendar form.
    let one_size = seed.is_multiple_of(3);
    let mut arrivals = Vec::new();
    let mut at = 0u64;
    for _ in 0..60 {
        at += 1 + r.below(20_000_000);
        for _ in 0..1 + r.below(40) {
            let child = r.below(children.len() as u64) as usize;
            arrivals.push(Arrival {
                at_ps: at,
                bytes: if one_size {
                    1500
                } else {
                    sizes[r.below(sizes.len() as u64) as usize]
                },
                child,
                leaf: r.below(children[child].leaves as u64) as usize,
            });
        }
    }
    let yaml = policy(&children);
    let prog = Arc::new(
        compile_str(Path::new("wfq.yaml"), &yaml, &LoadOptions::default())
            .map_err(|e| e.render_plain())?,
    );
    let want = model(&children, &arrivals);
    for (name, e) in [
        (
            "reference",
            &mut ReferenceEngine::new(prog.clone()) as &mut dyn Engine,
        ),
        ("fast", &mut FastEngine::new(prog.clone())),
        // Every node on a calendar from its first head while its packets are one size.
        (
            "fast, calendars",
            &mut FastEngine::with_calendar(prog.clone(), EngineOptions::default(), CALENDARS),
        ),
    ] {
        let got = run(e, &arrivals);
        if let Some(k) = (0..want.len().max(got.len())).find(|&k| want.get(k) != got.get(k)) {
            return Err(format!(
                "seed {seed}, {name}: departure {k} is {:?}, the model's {:?}\n{yaml}",
                got.get(k),
                want.get(k)
            ));
        }
    }
    Ok(())
}

#[test]
fn wfq_sends_what_stfq_charged_on_sent_bytes_sends() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seeds: Vec<u64> = match env("WEFT_WFQ_SEED") {
        Some(s) => vec![s],
        None => (1..=env("WEFT_WFQ_CASES").unwrap_or(200)).collect(),
    };
    let failures: Vec<String> = seeds.iter().filter_map(|&s| case(s).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ (rerun one with WEFT_WFQ_SEED=S):\n{}",
        failures.len(),
        seeds.len(),
        failures
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
