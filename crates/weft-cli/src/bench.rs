//! `weft bench`: engine-only enqueue+dequeue throughput and memory, fast engine against the
//! reference engine in the same process.
//!
//! Each scenario keeps the engine backlogged: it pre-fills `backlog` packets, then repeats
//! "dequeue one, enqueue one" in virtual time advancing by the wire time, so every operation
//! works on a full tree. Only packets that some leaf accepts are offered (a packet that
//! misses every leaf is dropped at once, and each would shrink the backlog by one), and each
//! row reports the smallest backlog any of its runs ended with. The reference runs twice per
//! round: classifying every packet (the baseline of `ratio_vs_reference`) and with per-flow
//! queues (that of `per_flow_queues_ratio_vs_reference`), so each ratio compares the engines
//! driven the same way. Memory is measured with a
//! counting allocator: heap growth per idle flow (after every flow has had a packet) and per
//! rate limiter (program + engine).

use std::alloc::{GlobalAlloc, Layout};
use std::path::Path;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{compile_str, synth, Classification, LoadOptions, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::link::wire_ps;
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{Engine, FlowQueue, Packet};
use weft_core::stats::median;

/// One scenario's row of `weft bench --json` (a JSON object a line, its keys in this
/// order). Throughputs are medians over the rounds, packets per second of wall time,
/// rounded to the packet; memory figures are heap bytes, rounded to the byte.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Row {
    /// The scenario (the table's first column).
    pub scenario: String,
    /// Flows the packets are drawn from, flows.
    pub flows: u64,
    /// The engine of the row's own figures: always `fast` (the reference's have `reference`
    /// in their names).
    pub engine: &'static str,
    /// Rounds run, each every mode and the reference once, rounds.
    pub rounds: usize,
    /// The fast engine classifying every packet, packets/s.
    pub packets_per_s: f64,
    /// The same, its best round, packets/s.
    pub packets_per_s_best: f64,
    /// The same as time per packet, nanoseconds, to 0.1.
    pub ns_per_packet: f64,
    /// The reference engine classifying every packet, packets/s.
    pub reference_packets_per_s: f64,
    /// `packets_per_s` over `reference_packets_per_s`, times, to 0.01.
    pub ratio_vs_reference: f64,
    /// The fast engine in bursts and batches of 16, packets/s.
    pub batch16_packets_per_s: f64,
    /// The fast engine with per-flow queues (no classification), packets/s.
    pub per_flow_queues_packets_per_s: f64,
    /// The same as time per packet, nanoseconds, to 0.1.
    pub per_flow_queues_ns_per_packet: f64,
    /// The reference engine with per-flow queues, packets/s.
    pub reference_per_flow_queues_packets_per_s: f64,
    /// `per_flow_queues_packets_per_s` over the reference's, times, to 0.01.
    pub per_flow_queues_ratio_vs_reference: f64,
    /// The fast engine with per-flow queues, in bursts and batches of 16, packets/s.
    pub per_flow_batch16_packets_per_s: f64,
    /// Heap growth per flow that has had a packet and holds none, bytes.
    pub bytes_per_idle_flow: f64,
    /// Shaping classes of the row's policy, classes.
    pub shaping_classes: usize,
    /// Engine state per shaping class (4,096 classes against none), bytes; the same for
    /// every row.
    pub bytes_per_rate_limiter: f64,
    /// Compiled policy per shaping class (names, classifier tables), bytes; every row.
    pub policy_bytes_per_rate_limiter: f64,
    /// Engine state per `senic` class before its first packet, bytes; every row.
    pub engine_bytes_per_senic_class: f64,
    /// Packets kept queued in every run, packets.
    pub backlog_packets: u64,
    /// The smallest backlog any run of the row ended with, packets.
    pub backlog_at_end_min: usize,
}

/// A row as `--json` prints it: one line of JSON.
impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

/// A figure as the table and the targets read it: a number that JSON cannot carry (NaN,
/// an infinity; `null` in `--json`) is none.
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// `weft bench --json`'s last line: the scheduling core's targets ([`targets`]).
#[derive(Debug, serde::Serialize)]
pub struct Targets {
    /// In the table's order.
    pub targets: Vec<Target>,
}

/// One target of the scheduling core against this run.
#[derive(Debug, serde::Serialize)]
pub struct Target {
    /// What is aimed at, in words, with its figure and unit (`>= 8.13 M pkt/s`).
    pub target: String,
    /// What this run measured, with its unit (`6.20 M (per-flow batch 16)`, `58 B`).
    pub measured: String,
    /// Whether it is met; `null` for a distance asked for, not a target.
    pub met: Option<bool>,
}

/// mimalloc with a running count of live heap bytes.
pub struct CountingAlloc;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to mimalloc.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to mimalloc.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged to mimalloc.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

struct Scenario {
    name: String,
    prog: Arc<Program>,
    /// Packet generator: the i-th packet and its flow (0..flows).
    make: Box<dyn Fn(u64) -> (u64, Packet)>,
    flows: u64,
}

fn compile(name: &str, text: &str) -> Arc<Program> {
    Arc::new(
        compile_str(Path::new(name), text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("bench policy {name}: {}", e.render_plain())),
    )
}

/// splitmix64's output for state `z`: the state is advanced by one step, then mixed.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn scenarios(quick: bool) -> Vec<Scenario> {
    let mut v = Vec::new();
    // Loom Fig. 1, scaled: 64 VMs × 16 applications, 64 per-destination limits per VM
    // (4,096 shaping classes), with 1k, 64k and 1M flows spread over the leaves.
    let fig1 = synth::scaled(64, 16, 64).replace("rate: 1", "rate: 10");
    let fig1 = compile("loom-fig1-scaled.yaml", &fig1);
    let flow_counts: &[u64] = if quick {
        &[1_000]
    } else {
        &[1_000, 65_536, 1_048_576]
    };
    for &flows in flow_counts {
        v.push(Scenario {
            name: format!("loom-fig1 {flows} flows, 4096 shaping classes"),
            prog: fig1.clone(),
            make: Box::new(move |i| {
                let f = mix(i) % flows;
                let mut p = synth::packet(f, 64, 16, 64);
                p.set_int(Field::Sport, f & 0xffff);
                p.set_int(Field::Src, 0xffff_0a00_0000u64 | (f >> 16));
                (f, Packet::new(i, 1518, p))
            }),
            flows,
        });
    }
    // A flat senic node with 10k classes (oversubscribed: falls back to sharing).
    let classes = if quick { 1_000 } else { 10_000 };
    let senic = compile("senic-flat.yaml", &synth::senic_flat(classes));
    v.push(Scenario {
        name: format!("senic flat, {classes} classes"),
        prog: senic,
        make: Box::new(move |i| {
            let mut m = PacketMeta::default();
            let c = mix(i) % classes;
            m.set_int(Field::Tag, c);
            (c, Packet::new(i, 1518, m))
        }),
        flows: classes,
    });
    // An 8-level policy: a binary tree of wfq/prio/drr/rr nodes, 128 leaves.
    let deep = compile("eight-levels.yaml", &synth::eight_levels());
    v.push(Scenario {
        name: "8-level policy, 128 leaves".into(),
        prog: deep,
        make: Box::new(|i| {
            let (leaf, port) = (mix(i) % 128, mix(i + 7) % 64);
            let m = synth::eight_levels_meta(leaf, port);
            (leaf * 64 + port, Packet::new(i, 1518, m))
        }),
        flows: 128 * 64,
    });
    v
}

/// How the bench hands packets to the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `enqueue`: the engine classifies every packet.
    Classify,
    /// `enqueue_flow`: the driver opened each flow's own queue once, before the clock starts
    /// (Loom §4.2.1's per-flow descriptor queues: the engine finds the flow by its queue,
    /// with no classification or flow-table lookup per packet).
    PerFlowQueues,
    /// `enqueue_batch` of 16 packets (a doorbell's batch) after a burst of up to 16
    /// departures at one instant (`dequeue_batch`, a transmit ring's burst).
    Batch,
    /// Per-flow queues, doorbell batches and transmit bursts: `enqueue_flow_batch` of 16
    /// packets after a `dequeue_batch` burst of up to 16 (Loom's design, in software).
    PerFlowBatch,
}

/// Packets per batch in [`Mode::Batch`].
const BATCH: usize = 16;

/// One timed run of [`throughput`].
#[derive(Debug, Clone, Copy)]
struct Run {
    packets_per_s: f64,
    /// Packets the engine held when the run ended (the backlog it kept).
    backlog_at_end: usize,
}

/// "Dequeue one, enqueue one" with `backlog` packets queued. The packets (and, for per-flow
/// queues, their flows' queues) are made before the clock starts, so the figure is the
/// engine's alone; packets that miss every leaf are left out (see the module doc).
fn throughput<E: Engine>(mut e: E, s: &Scenario, backlog: u64, ops: u64, mode: Mode) -> Run {
    let link = s.prog.link;
    // Per-flow queues: each flow's queue, opened once (`Some(None)`: its packets match no
    // leaf).
    let per_flow = matches!(mode, Mode::PerFlowQueues | Mode::PerFlowBatch);
    let batched = matches!(mode, Mode::Batch | Mode::PerFlowBatch);
    let by_flow: Vec<Option<Option<FlowQueue>>> = if per_flow {
        let mut by_flow = vec![None; s.flows as usize];
        let (mut seen, mut i) = (0u64, 0u64);
        while seen < s.flows && i < s.flows * 64 {
            let (f, p) = (s.make)(i);
            if by_flow[f as usize].is_none() {
                by_flow[f as usize] = Some(e.open_flow(&p, s.prog.classify(&p.meta)));
                seen += 1;
            }
            i += 1;
        }
        by_flow
    } else {
        Vec::new()
    };
    let want = (backlog + ops) as usize;
    let mut pool: Vec<(Packet, Option<FlowQueue>)> = Vec::with_capacity(want);
    let mut i = 0u64;
    while pool.len() < want {
        assert!(
            i < want as u64 * 16,
            "bench scenario {}: fewer than one packet in 16 reaches a leaf",
            s.name
        );
        let (f, p) = (s.make)(i);
        i += 1;
        let accepted = match by_flow.get(f as usize).copied().flatten() {
            Some(queue) => queue.map(Some),
            None => matches!(s.prog.classify(&p.meta), Classification::Leaf { .. }).then_some(None),
        };
        if let Some(queue) = accepted {
            pool.push((p, queue));
        }
    }
    drop(by_flow);
    let offer = |e: &mut E, i: usize, now: u64| {
        let (p, q) = &pool[i % pool.len()];
        let _ = match q {
            Some(q) => e.enqueue_flow(*p, q, now),
            None => e.enqueue(*p, now),
        };
    };
    let mut now = 0u64;
    let mut next = 0usize;
    for _ in 0..backlog {
        offer(&mut e, next, now);
        next += 1;
    }
    // Every frame has the same size in these scenarios: its wire time once.
    let mut wire = (0u32, 0u64);
    let packets: Vec<Packet> = if mode == Mode::Batch {
        pool.iter().map(|&(p, _)| p).collect()
    } else {
        Vec::new()
    };
    // Per-flow batches: every packet with its flow's queue.
    let posted: Vec<(Packet, FlowQueue)> = if mode == Mode::PerFlowBatch {
        pool.iter()
            .map(|&(p, q)| {
                (
                    p,
                    q.expect("per-flow modes open every accepted flow's queue"),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    // Each round: one dequeue, or a burst of up to 16 at one instant (time then advances by
    // the frames sent), then as many packets offered as were sent, in one batch or one by
    // one, so the backlog stays where it started. (A round that finds nothing eligible,
    // every packet held by shaping, advances time to the next release and offers nothing.)
    let mut results = Vec::with_capacity(BATCH);
    let mut burst = Vec::with_capacity(BATCH);
    let t = Instant::now();
    let mut done = 0u64;
    while done < ops {
        let mut sent = 0;
        burst.clear();
        if batched {
            e.dequeue_batch(now, BATCH, &mut burst);
        } else {
            burst.extend(e.dequeue(now));
        }
        for d in &burst {
            if d.bytes != wire.0 {
                wire = (d.bytes, wire_ps(d.bytes, &link));
            }
            now += wire.1;
            sent += 1;
        }
        if sent == 0 {
            now = e.next_wakeup().unwrap_or(now + 1).max(now + 1);
        }
        done += sent as u64;
        if mode == Mode::Batch {
            let at = next % packets.len();
            let end = (at + sent).min(packets.len());
            results.clear();
            e.enqueue_batch(&packets[at..end], now, &mut results);
            next += end - at;
        } else if mode == Mode::PerFlowBatch {
            let at = next % posted.len();
            let end = (at + sent).min(posted.len());
            results.clear();
            e.enqueue_flow_batch(&posted[at..end], now, &mut results);
            next += end - at;
        } else if sent == 1 {
            offer(&mut e, next, now);
            next += 1;
        }
    }
    Run {
        packets_per_s: done as f64 / t.elapsed().as_secs_f64(),
        backlog_at_end: e.backlog(),
    }
}

/// Heap bytes per idle flow: every flow gets one packet, all are sent, then the growth is
/// what the engine keeps per flow.
fn bytes_per_flow(s: &Scenario, flows: u64) -> f64 {
    let before = live();
    let mut e = FastEngine::new(s.prog.clone());
    let base = live() - before;
    let mut now = 0;
    for f in 0..flows {
        let _ = e.enqueue((s.make)(f).1, now);
        while e.dequeue(now).is_some() {}
        now += 1_000;
    }
    while e.backlog() > 0 {
        now = e.next_wakeup().unwrap_or(now + 1);
        while e.dequeue(now).is_some() {}
    }
    let grown = live() - before - base;
    // Flows are drawn at random: count the ones the engine actually saw.
    let seen = e.flow_counters().len().max(1);
    drop(e);
    grown as f64 / seen as f64
}

/// Runs every scenario (or those whose name contains `only`), each mode `rounds` times (the
/// figures are medians), with `backlog` packets queued (default: 4,096, or four per flow
/// when fewer); returns the rows, or, when `only` matches no scenario, every scenario's name
/// (the table's first column) before measuring anything.
pub fn run(
    quick: bool,
    rounds: usize,
    progress: bool,
    backlog: Option<u64>,
    only: Option<&str>,
) -> Result<Vec<Row>, Vec<String>> {
    let all = scenarios(quick);
    // Case aside: `--only SENIC` is `senic`.
    let only = only.map(str::to_lowercase);
    let only = only.as_deref();
    let picked = |name: &str| only.is_none_or(|o| name.to_lowercase().contains(o));
    if !all.iter().any(|s| picked(&s.name)) {
        return Err(all.into_iter().map(|s| s.name).collect());
    }
    let mut rows = Vec::new();
    let ops_fast = if quick { 100_000 } else { 1_000_000 };
    let ops_ref = if quick { 20_000 } else { 100_000 };
    // Memory per rate limiter: a policy with 4,096 shaping classes vs the same without;
    // the engine's state (what a NIC keeps per class) and the compiled policy's (names,
    // classifier tables) apart.
    let (engine_per_limiter, policy_per_limiter) = {
        let per = |dsts: u32| {
            let before = live();
            let prog = compile("l.yaml", &synth::scaled(64, 16, dsts));
            let mid = live();
            let e = FastEngine::new(prog.clone());
            let after = live();
            drop((e, prog));
            ((mid - before) as f64, (after - mid) as f64)
        };
        let (p1, e1) = per(64);
        let (p0, e0) = per(0);
        ((e1 - e0) / 4096.0, (p1 - p0) / 4096.0)
    };
    // Engine state per senic class before any packet: 10,000 classes vs 1,000.
    let engine_per_senic_class = {
        let per = |classes: u64| {
            let prog = compile("senic.yaml", &synth::senic_flat(classes));
            let before = live();
            let e = FastEngine::new(prog.clone());
            let after = live();
            drop((e, prog));
            (after - before) as f64
        };
        (per(10_000) - per(1_000)) / 9_000.0
    };
    for s in all {
        if !picked(&s.name) {
            continue;
        }
        if progress {
            crate::out::errln!("bench: {}", s.name);
        }
        let backlog = backlog.unwrap_or(4_096.min(s.flows * 4).max(64));
        let fast_in =
            |mode| throughput(FastEngine::new(s.prog.clone()), &s, backlog, ops_fast, mode);
        // `rounds` rounds, each running every mode once and the reference once classifying
        // and once with per-flow queues, so that a slow moment of the machine touches one
        // sample of each rather than all of one.
        let mut samples: [Vec<f64>; 6] = Default::default();
        let mut backlog_at_end = usize::MAX;
        for _ in 0..rounds.max(1) {
            let runs = [
                fast_in(Mode::Classify),
                fast_in(Mode::PerFlowQueues),
                fast_in(Mode::Batch),
                fast_in(Mode::PerFlowBatch),
                throughput(
                    ReferenceEngine::new(s.prog.clone()),
                    &s,
                    backlog,
                    ops_ref,
                    Mode::Classify,
                ),
                // The same baseline for per-flow queues: the reference driven the same way.
                throughput(
                    ReferenceEngine::new(s.prog.clone()),
                    &s,
                    backlog,
                    ops_ref,
                    Mode::PerFlowQueues,
                ),
            ];
            for (v, r) in samples.iter_mut().zip(runs) {
                v.push(r.packets_per_s);
                backlog_at_end = backlog_at_end.min(r.backlog_at_end);
            }
        }
        if (backlog_at_end as u64) < backlog / 2 {
            crate::out::errln!(
                "bench: {}: a run ended with {backlog_at_end} packets queued of {backlog} (drops?); its figures are for a part-empty tree",
                s.name
            );
        }
        let [fast, per_flow, batched, per_flow_batched, reference, reference_per_flow] = samples
            .each_ref()
            .map(|v| median(v).expect("one round at least"));
        let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let flows_for_memory = s.flows.min(if quick { 10_000 } else { 100_000 });
        rows.push(Row {
            scenario: s.name.clone(),
            flows: s.flows,
            engine: "fast",
            rounds: rounds.max(1),
            packets_per_s: fast.round(),
            packets_per_s_best: best(&samples[0]).round(),
            ns_per_packet: (1e9 / fast * 10.0).round() / 10.0,
            reference_packets_per_s: reference.round(),
            ratio_vs_reference: (fast / reference * 100.0).round() / 100.0,
            batch16_packets_per_s: batched.round(),
            per_flow_queues_packets_per_s: per_flow.round(),
            per_flow_queues_ns_per_packet: (1e9 / per_flow * 10.0).round() / 10.0,
            reference_per_flow_queues_packets_per_s: reference_per_flow.round(),
            per_flow_queues_ratio_vs_reference: (per_flow / reference_per_flow * 100.0).round()
                / 100.0,
            per_flow_batch16_packets_per_s: per_flow_batched.round(),
            bytes_per_idle_flow: bytes_per_flow(&s, flows_for_memory).round(),
            // Shaping classes of this row's policy (B/limit is shown for rows that have them;
            // the figure itself comes from one comparison for every row, above).
            shaping_classes: s.prog.shapers.len(),
            bytes_per_rate_limiter: engine_per_limiter.round(),
            policy_bytes_per_rate_limiter: policy_per_limiter.round(),
            engine_bytes_per_senic_class: engine_per_senic_class.round(),
            backlog_packets: backlog,
            backlog_at_end_min: backlog_at_end,
        });
    }
    Ok(rows)
}

/// Prints the rows as a table.
pub fn print_table(rows: &[Row]) -> Result<(), (u8, String)> {
    crate::out::outln!(
        "{:<44} {:>11} {:>7} {:>11} {:>6} {:>11} {:>12} {:>8} {:>12} {:>7} {:>7}",
        "scenario",
        "fast pkt/s",
        "ns/pkt",
        "ref pkt/s",
        "ratio",
        "batch16/s",
        "per-flow-q/s",
        "pf ratio",
        "pf-batch16/s",
        "B/flow",
        "B/limit"
    )?;
    for r in rows {
        let f = |v: f64, digits: usize| crate::out::number(finite(v).unwrap_or(0.0), digits);
        // Only a policy with shaping classes has rate limiters to count.
        let limit = if r.shaping_classes > 0 {
            f(r.bytes_per_rate_limiter, 0)
        } else {
            "-".to_string()
        };
        crate::out::outln!(
            "{:<44} {:>11} {:>7} {:>11} {:>6} {:>11} {:>12} {:>8} {:>12} {:>7} {:>7}",
            r.scenario,
            f(r.packets_per_s, 0),
            f(r.ns_per_packet, 1),
            f(r.reference_packets_per_s, 0),
            f(r.ratio_vs_reference, 2),
            f(r.batch16_packets_per_s, 0),
            f(r.per_flow_queues_packets_per_s, 0),
            f(r.per_flow_queues_ratio_vs_reference, 2),
            f(r.per_flow_batch16_packets_per_s, 0),
            f(r.bytes_per_idle_flow, 0),
            limit
        )?;
    }
    let first = |k: fn(&Row) -> f64| rows.first().map_or(0.0, |r| finite(k(r)).unwrap_or(0.0));
    let rounds = match rows.first().map_or(0, |r| r.rounds) {
        1 => "one round, running every mode and the reference once per mode".into(),
        r => format!(
            "medians of {r} rounds, each running every mode and the reference once per mode"
        ),
    };
    crate::out::outln!(
        "(throughputs: {rounds}; ratio: classifying, both engines; pf ratio: per-flow queues, both engines)"
    )?;
    crate::out::outln!(
        "(B/limit: engine state per shaping class; the compiled policy adds {:.0} B per class: names and classifier tables)",
        first(|r| r.policy_bytes_per_rate_limiter)
    )?;
    crate::out::outln!(
        "(a senic class is a leaf node: {:.0} B of engine state before its first packet, plus its B/flow once used)",
        first(|r| r.engine_bytes_per_senic_class)
    )?;
    Ok(())
}

/// The fastest of a row's four fast-engine modes, packets/s, and the mode's name.
fn best_mode(r: &Row) -> (f64, &'static str) {
    [
        (r.packets_per_s, "classifying"),
        (r.batch16_packets_per_s, "batch 16"),
        (r.per_flow_queues_packets_per_s, "per-flow queues"),
        (r.per_flow_batch16_packets_per_s, "per-flow batch 16"),
    ]
    .into_iter()
    .map(|(v, name)| (finite(v).unwrap_or(0.0), name))
    .fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a })
}

/// The scheduling core's targets against these rows, one line each: `(target,
/// measured, met)` (`met` is `None` for a distance asked for, not a target). A row the run
/// did not measure (`--quick`, `--only`) leaves its target out.
pub fn targets(rows: &[Row]) -> Vec<(String, String, Option<bool>)> {
    let mut out = Vec::new();
    let fig1 = |flows: u64| {
        rows.iter()
            .find(|r| r.flows == flows && r.scenario.starts_with("loom-fig1"))
    };
    let mpps = |v: f64| format!("{:.2} M", v / 1e6);
    let mut best_64k = None;
    for (flows, goal, what) in [
        (65_536, 8.13e6, "100 GbE of 1518-byte frames"),
        (1_048_576, 3.25e6, "Loom's BESS prototype"),
    ] {
        if let Some(r) = fig1(flows) {
            let (best, mode) = best_mode(r);
            if flows == 65_536 {
                best_64k = Some(best);
            }
            out.push((
                format!(
                    "Loom Fig. 1, {flows} flows: >= {} pkt/s ({what})",
                    mpps(goal)
                ),
                format!("{} ({mode})", mpps(best)),
                Some(best >= goal),
            ));
        }
    }
    if let Some(best) = best_64k {
        out.push((
            "400 GbE of 1518-byte frames: 32.5 M pkt/s (how far)".into(),
            format!("{:.1}x short", 32.5e6 / best.max(1.0)),
            None,
        ));
    }
    let idle: Vec<f64> = [65_536, 1_048_576]
        .into_iter()
        .filter_map(|f| fig1(f).and_then(|r| finite(r.bytes_per_idle_flow)))
        .collect();
    if let Some(worst) = idle.iter().copied().reduce(f64::max) {
        out.push((
            "<= 64 B per idle flow (64k and 1M flows)".into(),
            format!("{worst:.0} B"),
            Some(worst <= 64.0),
        ));
    }
    if let Some(r) = rows.first() {
        let limiter = finite(r.bytes_per_rate_limiter).unwrap_or(f64::MAX);
        out.push((
            "<= 32 B per rate limiter".into(),
            format!("{limiter:.0} B"),
            Some(limiter <= 32.0),
        ));
        let class = finite(r.engine_bytes_per_senic_class).unwrap_or(f64::MAX);
        out.push((
            "SENIC: 30 B per class".into(),
            format!("{class:.0} B before its first packet"),
            Some(class <= 30.0),
        ));
    }
    let lowest = rows
        .iter()
        .flat_map(|r| {
            let name = r.scenario.as_str();
            let ratio = |v: f64| finite(v).unwrap_or(0.0);
            [
                (ratio(r.ratio_vs_reference), name, "classifying"),
                (
                    ratio(r.per_flow_queues_ratio_vs_reference),
                    name,
                    "per-flow queues",
                ),
            ]
        })
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((low, name, mode)) = lowest {
        out.push((
            ">= 5x the reference (every row, both modes)".into(),
            format!("lowest {low:.2}x ({name}, {mode})"),
            Some(low >= 5.0),
        ));
    }
    out
}

/// [`targets`] as one JSON object, the last line of `weft bench --json`:
/// `{"targets": [{"target", "measured", "met"}, ...]}` (`met` null for a distance).
pub fn targets_json(rows: &[Row]) -> Targets {
    let targets = targets(rows)
        .into_iter()
        .map(|(target, measured, met)| Target {
            target,
            measured,
            met,
        })
        .collect();
    Targets { targets }
}

/// The targets as `--json` prints them: one line of JSON.
impl std::fmt::Display for Targets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

/// Prints [`targets`] under the table, in columns as wide as their longest entry.
pub fn print_targets(rows: &[Row]) -> Result<(), (u8, String)> {
    let t = targets(rows);
    if t.is_empty() {
        return Ok(());
    }
    crate::out::outln!(
        "\ntargets of the scheduling core (this machine, this run; docs/performance.md has a quiet spell's figures):"
    )?;
    let w0 = t.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let w1 = t.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    for (target, measured, met) in t {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "not met",
            None => "",
        };
        crate::out::outln!("  {target:<w0$}  {measured:<w1$}  {verdict}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A row as `run` makes it, with the fields `targets` reads.
    fn row(flows: u64, modes: [f64; 4], ratios: (f64, f64), idle: f64) -> super::Row {
        super::Row {
            scenario: format!("loom-fig1 {flows} flows, 4096 shaping classes"),
            flows,
            packets_per_s: modes[0],
            batch16_packets_per_s: modes[1],
            per_flow_queues_packets_per_s: modes[2],
            per_flow_batch16_packets_per_s: modes[3],
            ratio_vs_reference: ratios.0,
            per_flow_queues_ratio_vs_reference: ratios.1,
            bytes_per_idle_flow: idle,
            bytes_per_rate_limiter: 32.0,
            engine_bytes_per_senic_class: 168.0,
            ..Default::default()
        }
    }

    #[test]
    fn targets_take_the_best_mode_and_the_worst_ratio() {
        let rows = [
            row(65_536, [4e6, 4.2e6, 5.9e6, 6.2e6], (4.9, 6.6), 58.0),
            row(1_048_576, [2.7e6, 3.2e6, 4.6e6, 5.8e6], (3.6, 6.2), 56.0),
        ];
        let t = super::targets(&rows);
        let find = |what: &str| t.iter().find(|(k, _, _)| k.contains(what)).unwrap();
        let (_, measured, met) = find("65536 flows");
        assert_eq!(
            (measured.as_str(), *met),
            ("6.20 M (per-flow batch 16)", Some(false))
        );
        let (_, measured, met) = find("1048576 flows");
        assert_eq!(
            (measured.as_str(), *met),
            ("5.80 M (per-flow batch 16)", Some(true))
        );
        assert_eq!(
            (find("400 GbE").1.as_str(), find("400 GbE").2),
            ("5.2x short", None)
        );
        assert_eq!(find("idle flow").1, "58 B");
        assert_eq!(find("idle flow").2, Some(true));
        assert_eq!(find("rate limiter").2, Some(true));
        assert_eq!(find("SENIC").2, Some(false));
        let (_, measured, met) = find("5x the reference");
        assert_eq!(
            (measured.as_str(), *met),
            (
                "lowest 3.60x (loom-fig1 1048576 flows, 4096 shaping classes, classifying)",
                Some(false)
            )
        );
    }

    #[test]
    fn targets_leave_out_what_was_not_measured() {
        // `--quick`: Fig. 1 with 1k flows only, so no throughput or idle-flow target.
        let t = super::targets(&[row(1_000, [1e7; 4], (6.0, 7.0), 102.0)]);
        let names: Vec<&str> = t.iter().map(|(k, _, _)| k.as_str()).collect();
        assert!(
            !names
                .iter()
                .any(|n| n.contains("flows:") || n.contains("idle")),
            "{names:?}"
        );
        assert!(t
            .iter()
            .any(|(k, _, met)| k.contains("5x") && *met == Some(true)));
        assert!(super::targets(&[]).is_empty());
    }

    /// `--json`'s last line carries the same verdicts as the table's targets.
    #[test]
    fn targets_as_json_match_the_table() {
        let rows = [row(65_536, [9e6; 4], (6.0, 7.0), 50.0)];
        let j: serde_json::Value =
            serde_json::from_str(&super::targets_json(&rows).to_string()).unwrap();
        let t = super::targets(&rows);
        let list = j["targets"].as_array().unwrap();
        assert_eq!(list.len(), t.len());
        for (v, (target, measured, met)) in list.iter().zip(&t) {
            assert_eq!(v["target"], target.as_str());
            assert_eq!(v["measured"], measured.as_str());
            assert_eq!(v["met"], serde_json::json!(met));
        }
        assert!(list
            .iter()
            .any(|v| v["target"].as_str().unwrap().contains("65536 flows") && v["met"] == true));
    }
}
