//! Profiling driver: the `weft bench` Loom Fig. 1 scenario (64k flows) on one engine, for
//! `valgrind --tool=callgrind`. Usage: engine_profile [fast|reference] [ops] [flows] [classify|per-flow|batch|per-flow-batch] [fig1|senic|deep]
//! (with `WEFT_PROFILE_POOL_ONLY=1` it only makes the packets: subtract that run's count;
//! with `WEFT_PROFILE_FIFO=1` the `fig1` packets go to a one-leaf FIFO policy instead, the
//! engine's fixed cost per packet; with `WEFT_PROFILE_POLICY=FILE`, to that policy: the
//! `fig1` packets carry `vm` 0–63, `dport` 1000–1016 and `dst` 10.0.0–64.x, so a policy
//! matching on those measures what its levels cost; with `WEFT_PROFILE_CALENDAR=C:H`, nodes
//! of at least C children move their entries to a calendar once their heads reach H, and
//! back below H/4 entries, see `CalendarUse`; with `WEFT_PROFILE_WFQ=1` the `senic` scenario's node is a `wfq` node of
//! the same children, weighted 20–69; with `WEFT_PROFILE_BACKLOG=N`, N packets stay queued
//! instead of 4,096: the pool-only run does not enqueue them, so subtracting it leaves their
//! first enqueue in the count; with `WEFT_PROFILE_MIXED=1` one `fig1` packet in four has 64
//! bytes instead of 1,518, so its `wfq` node charges the bytes each tenant sends).
use std::sync::Arc;
use weft_core::classifier::Field;
use weft_core::policy::{compile_str, synth};
use weft_core::sched::{
    fast::{CalendarUse, FastEngine},
    link::wire_ps,
    reference::ReferenceEngine,
    Engine, FlowQueue, Packet,
};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn run<E: Engine>(
    mut e: E,
    link: weft_core::policy::Link,
    ops: u64,
    make: &dyn Fn(u64) -> Packet,
    per_flow: bool,
    batch: bool,
) {
    let prog = e.program().clone();
    let backlog = backlog();
    // Packets (and classifications) made before the measured loop, as `weft bench` does,
    // and, as it does, only packets some leaf accepts: one that misses every leaf would be
    // dropped and shrink the backlog by one.
    // A policy that refuses most of the scenario's packets (`WEFT_PROFILE_POLICY` matching on
    // other fields) would make this search endless: it gives up after a million packets
    // with none accepted.
    let wanted = backlog + ops as usize;
    let mut pool: Vec<(Packet, weft_core::policy::Classification)> = Vec::with_capacity(wanted);
    for i in 0.. {
        if pool.is_empty() && i == 1_000_000 {
            eprintln!(
                "error: none of the first 1,000,000 packets of this scenario reaches a leaf of \
                 the policy: does it match on fields the scenario's packets do not carry \
                 (fig1: vm 0-63, dport 1000-1016, dst 10.0.0-64.x; senic: tag; see the \
                 example's doc)?"
            );
            std::process::exit(2);
        }
        let p = make(i);
        let c = prog.classify(&p.meta);
        if matches!(c, weft_core::policy::Classification::Leaf { .. }) {
            pool.push((p, c));
            if pool.len() == wanted {
                break;
            }
        }
    }
    // Per-flow queues (Loom §4.2.1): every packet's flow queue, opened before the clock
    // starts (as a flow's queue is opened when the flow starts).
    let posted: Vec<(Packet, FlowQueue)> = if per_flow {
        pool.iter()
            .map(|&(p, c)| (p, e.open_flow(&p, c).expect("pool packets reach a leaf")))
            .collect()
    } else {
        Vec::new()
    };
    if std::env::var_os("WEFT_PROFILE_POOL_ONLY").is_some() {
        // Baseline for instruction counts: everything but the engine's work
        // (opening the flows' queues included: a flow's, not a packet's, cost).
        println!("pool of {} packets", pool.len());
        return;
    }
    let wire = wire_ps(1518, &link);
    let mut now = 0u64;
    let mut next = 0usize;
    let mut offer = |e: &mut E, now: u64| {
        let i = next % pool.len();
        next += 1;
        let _ = if per_flow {
            let (p, q) = &posted[i];
            e.enqueue_flow(*p, q, now)
        } else {
            e.enqueue(pool[i].0, now)
        };
    };
    for _ in 0..backlog {
        offer(&mut e, now);
    }
    // The batch modes' packets without their classes, made before the clock starts.
    let packets: Vec<Packet> = if batch {
        pool.iter().map(|&(p, _)| p).collect()
    } else {
        Vec::new()
    };
    let t = std::time::Instant::now();
    let mut done = 0;
    // Dequeues that found nothing eligible (everything held by shaping).
    let mut idle = 0u64;
    // Every departure is replaced (one packet offered per packet sent), so the backlog stays
    // where it started; a dequeue that finds nothing eligible advances time and is not
    // replaced.
    if batch {
        // A burst of up to 16 departures at one instant (`dequeue_batch`, a transmit ring's
        // burst), then as many packets as were sent in one `enqueue_batch` (a doorbell's
        // batch), or posted to their flows' queues in one `enqueue_flow_batch` (`per_flow`).
        let mut results = Vec::with_capacity(16);
        let mut burst = Vec::with_capacity(16);
        let mut next_batch = backlog;
        while done < ops {
            burst.clear();
            let sent = e.dequeue_batch(now, 16, &mut burst);
            if sent == 0 {
                idle += 1;
                now = e.next_wakeup().unwrap_or(now + 1).max(now + 1);
            }
            now += wire * sent as u64;
            done += sent as u64;
            let at = next_batch % packets.len();
            let end = (at + sent).min(packets.len());
            results.clear();
            if per_flow {
                e.enqueue_flow_batch(&posted[at..end], now, &mut results);
            } else {
                e.enqueue_batch(&packets[at..end], now, &mut results);
            }
            next_batch += end - at;
        }
    }
    while done < ops {
        match e.dequeue(now) {
            Some(_) => {
                now += wire;
                done += 1;
                offer(&mut e, now);
            }
            None => {
                idle += 1;
                now = e.next_wakeup().unwrap_or(now + 1).max(now + 1)
            }
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{ops} ops in {s:.3}s: {:.0} pkt/s (backlog at the end {}, {idle} idle dequeues)",
        ops as f64 / s,
        e.backlog()
    );
}

/// The packets queued throughout (`WEFT_PROFILE_BACKLOG`, default 4,096 as in `weft bench`).
fn backlog() -> usize {
    std::env::var("WEFT_PROFILE_BACKLOG")
        .map_or(4096, |v| v.parse().expect("WEFT_PROFILE_BACKLOG=PACKETS"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let engine = args.get(1).map_or("fast", |s| s.as_str());
    let ops = args.get(2).map_or(1_000_000, |s| s.parse().unwrap());
    let flows = args.get(3).map_or(65_536, |s| s.parse().unwrap());
    let mode = args.get(4).map_or("classify", |s| s.as_str());
    let per_flow = mode == "per-flow" || mode == "per-flow-batch";
    let batch = mode == "batch" || mode == "per-flow-batch";
    let senic = args.get(5).is_some_and(|s| s == "senic");
    // `deep`: `weft bench`'s 8-level policy and its packets (leaf tag, 64 ports each).
    let deep = args.get(5).is_some_and(|s| s == "deep");
    let mixed = std::env::var_os("WEFT_PROFILE_MIXED").is_some();
    let fig1 = move |i: u64| {
        let f = mix(i) % flows;
        let mut p = synth::packet(f, 64, 16, 64);
        p.set_int(Field::Sport, f & 0xffff);
        p.set_int(Field::Src, 0xffff_0a00_0000u64 | (f >> 16));
        let small = mixed && mix(i ^ 0x5bd1_e995).is_multiple_of(4);
        Packet::new(i, if small { 64 } else { 1518 }, p)
    };
    // `senic`: a flat senic node with `flows` classes (as in `weft bench`).
    let flat = move |i: u64| {
        let mut m = weft_core::classifier::PacketMeta::default();
        m.set_int(Field::Tag, mix(i) % flows);
        Packet::new(i, 1518, m)
    };
    let eight = |i: u64| {
        Packet::new(
            i,
            1518,
            synth::eight_levels_meta(mix(i) % 128, mix(i + 7) % 64),
        )
    };
    let make: &dyn Fn(u64) -> Packet = if senic {
        &flat
    } else if deep {
        &eight
    } else {
        &fig1
    };
    let text = if senic && std::env::var_os("WEFT_PROFILE_WFQ").is_some() {
        // The senic scenario's shape as a flat `wfq` node: weights 20-69 instead of rates.
        synth::senic_flat(flows)
            .replace("type: senic", "type: wfq")
            .replace("parent: nic, rate:", "parent: nic, weight:")
            .replace("mbit,", ",")
    } else if senic {
        synth::senic_flat(flows)
    } else if deep {
        synth::eight_levels()
    } else if let Some(file) = std::env::var_os("WEFT_PROFILE_POLICY") {
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("WEFT_PROFILE_POLICY={}: {e}", file.to_string_lossy()))
    } else if std::env::var_os("WEFT_PROFILE_FIFO").is_some() {
        "weft: 1\nlink: {rate: 100gbit}\nnodes:\n  - {name: only, type: leaf, flows: {by: five-tuple}}\n"
            .to_string()
    } else {
        synth::scaled(64, 16, 64).replace("rate: 1", "rate: 10")
    };
    let prog = Arc::new(
        compile_str(
            std::path::Path::new("fig1.yaml"),
            &text,
            &Default::default(),
        )
        .unwrap(),
    );
    let link = prog.link;
    match engine {
        "fast" => {
            // WEFT_PROFILE_CALENDAR=CHILDREN:HEADS (see `CalendarUse`).
            let mut calendar = CalendarUse::default();
            if let Ok(v) = std::env::var("WEFT_PROFILE_CALENDAR") {
                let (c, h) = v
                    .split_once(':')
                    .expect("WEFT_PROFILE_CALENDAR=CHILDREN:HEADS");
                calendar.min_children = c.parse().expect("CHILDREN: a number");
                calendar.min_heads = h.parse().expect("HEADS: a number");
                calendar.back_below = calendar.min_heads / 4;
            }
            let e = FastEngine::with_calendar(prog, Default::default(), calendar);
            run(e, link, ops, make, per_flow, batch)
        }
        _ => run(ReferenceEngine::new(prog), link, ops, make, per_flow, batch),
    }
}
