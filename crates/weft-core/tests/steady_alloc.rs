//! The fast engine allocates nothing per packet in steady state (the brief's rule and the
//! fast engine's module doc): once a load has run long enough for every slab, queue, heap,
//! calendar and map to reach its peak, more of the same load allocates nothing.
//!
//! A counting global allocator (this test binary's own) counts the allocations of the
//! current thread; each case warms an engine up with a load, then runs more of the same
//! load and demands zero. The loads cover the engine's structures: Loom Fig. 1 with shaping
//! (the shaping queue, deferral lists, the "currently limited" fast path), every node kind,
//! fair leaves and `outstanding` (waiting lists), a `senic` node whose entries move to a
//! calendar and back again and again, and the batch calls. With `WEFT_ALLOC_TRACE=1` a
//! failing case prints each allocation's backtrace.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{compile_str, synth, LoadOptions, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::link::wire_ps;
use weft_core::sched::{Departure, Engine, EngineOptions, FlowQueue, Packet};

/// The system allocator, counting the allocations (and growths) of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Print where each allocation happens (the measured phase, with `WEFT_ALLOC_TRACE`).
    static TRACE: Cell<bool> = const { Cell::new(false) };
    /// Inside the tracer (its own allocations are neither counted nor traced).
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    // `try_with`: a thread being torn down has no counter left; its allocations do not
    // matter here.
    if TRACING.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    if TRACE.try_with(Cell::get).unwrap_or(false) {
        TRACING.with(|t| t.set(true));
        eprintln!(
            "allocation at:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        TRACING.with(|t| t.set(false));
    }
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches a thread-local
// `Cell` only (no allocation, no reentry).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn program(text: &str) -> Arc<Program> {
    Arc::new(
        compile_str(Path::new("steady.yaml"), text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.render_plain())),
    )
}

/// SplitMix64, as the benchmarks use: a packet's pseudo-random choices from its index.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How a case offers packets and takes departures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drive {
    /// `enqueue` and `dequeue`, one packet at a time.
    One,
    /// `enqueue_batch` and `dequeue_batch`, 16 at a time.
    Batch,
    /// `enqueue_flow_batch` on queues opened beforehand, and `dequeue_batch`.
    FlowBatch,
}

/// A load: how it is driven, the packets (the `i`-th offered is `make(i)`), and the backlog
/// it keeps at each step.
struct Load<'a> {
    name: &'a str,
    drive: Drive,
    make: &'a dyn Fn(u64) -> Packet,
    target: &'a dyn Fn(u64) -> usize,
}

/// Runs `steps` of `load` on `e` from time `*now`: each step sends what the link can at
/// `now` (one packet, or up to 16 in a batch), then, while fewer than `target(step)` packets
/// are queued, offers 24 packets (so the backlog hovers at the target, or the leaves fill to
/// their limits and drop what they cannot hold). Time advances by the wire time of what was
/// sent, or to the next wakeup when nothing was eligible. With [`Drive::FlowBatch`] a packet
/// goes to `queues[flow % queues.len()]` (a queue's class, not the packet's fields, decides
/// where it goes).
fn run(
    e: &mut FastEngine,
    now: &mut u64,
    steps: std::ops::Range<u64>,
    load: &Load,
    queues: &[FlowQueue],
    scratch: &mut Scratch,
) {
    let Load {
        drive,
        make,
        target,
        ..
    } = *load;
    let frame = wire_ps(1518, &e.program().link);
    for step in steps {
        scratch.out.clear();
        let sent = match drive {
            Drive::One => e.dequeue(*now).map(|d| scratch.out.push(d)).is_some() as usize,
            Drive::Batch | Drive::FlowBatch => e.dequeue_batch(*now, 16, &mut scratch.out),
        };
        if sent == 0 {
            if let Some(t) = e.next_wakeup() {
                *now = (*now).max(t);
            }
        }
        let n = if e.backlog() < target(step) { 24 } else { 0 };
        scratch.pkts.clear();
        scratch.flow_pkts.clear();
        scratch.results.clear();
        for k in 0..n {
            let p = make(step * 32 + k);
            match drive {
                Drive::One => {
                    let _ = e.enqueue(p, *now);
                }
                Drive::Batch => scratch.pkts.push(p),
                Drive::FlowBatch => {
                    let q = queues[(p.flow % queues.len() as u64) as usize];
                    scratch.flow_pkts.push((p, q));
                }
            }
        }
        match drive {
            Drive::One => {}
            Drive::Batch => e.enqueue_batch(&scratch.pkts, *now, &mut scratch.results),
            Drive::FlowBatch => {
                e.enqueue_flow_batch(&scratch.flow_pkts, *now, &mut scratch.results)
            }
        }
        *now += frame * sent.max(1) as u64;
    }
}

/// The caller's buffers, made before the measured phase (they are the driver's, not the
/// engine's).
struct Scratch {
    out: Vec<Departure>,
    pkts: Vec<Packet>,
    flow_pkts: Vec<(Packet, FlowQueue)>,
    results: Vec<Result<(), weft_core::sched::DropReason>>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            out: Vec::with_capacity(64),
            pkts: Vec::with_capacity(64),
            flow_pkts: Vec::with_capacity(64),
            results: Vec::with_capacity(64),
        }
    }
}

/// Warms `e` up with `warm` steps of `load`, then demands that `more` steps allocate
/// nothing; returns the engine. For [`Drive::FlowBatch`], queues are opened first for the
/// packets `make(0..flows)`.
fn assert_steady(mut e: FastEngine, load: &Load, flows: u64, warm: u64, more: u64) -> FastEngine {
    let Load {
        name, drive, make, ..
    } = *load;
    let queues: Vec<FlowQueue> = if drive == Drive::FlowBatch {
        (0..flows)
            .filter_map(|f| {
                let mut p = make(f);
                p.flow = f;
                let class = e.program().classify(&p.meta);
                e.open_flow(&p, class)
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut scratch = Scratch::new();
    let mut now = 0;
    run(&mut e, &mut now, 0..warm, load, &queues, &mut scratch);
    let backlog = e.backlog();
    let trace = std::env::var_os("WEFT_ALLOC_TRACE").is_some();
    let before = allocations();
    TRACE.with(|t| t.set(trace));
    run(
        &mut e,
        &mut now,
        warm..warm + more,
        load,
        &queues,
        &mut scratch,
    );
    TRACE.with(|t| t.set(false));
    let grew = allocations() - before;
    assert!(
        backlog > 0 && e.backlog() > 0,
        "{name}: the load should keep packets queued (backlog {backlog} after warm-up, {} at the end)",
        e.backlog()
    );
    assert_eq!(
        grew,
        0,
        "{name} ({drive:?}): {grew} allocations in {more} steps after {warm} steps of warm-up (backlog {} packets; WEFT_ALLOC_TRACE=1 prints where)",
        e.backlog()
    );
    e
}

/// Loom Fig. 1 at 4,096 flows with its per-destination shaping classes, 2,048 packets
/// queued: shaped classes keep packets deferred.
fn fig1(fast_path: bool, drive: Drive) {
    let prog = program(&synth::scaled(16, 8, 16));
    let make = |i: u64| {
        let f = mix(i) % 4096;
        let mut m = synth::packet(f, 16, 8, 16);
        m.set_int(Field::Sport, f);
        let mut p = Packet::new(i, 1518, m);
        p.flow = f;
        p
    };
    let e = FastEngine::with_options(
        prog,
        EngineOptions {
            limited_fast_path: fast_path,
            ..EngineOptions::default()
        },
    );
    let name = format!("fig1 fast path {fast_path}");
    let load = Load {
        name: &name,
        drive,
        make: &make,
        target: &|_| 2048,
    };
    assert_steady(e, &load, 4096, 60_000, 30_000);
}

#[test]
fn loom_fig1_with_shaping_allocates_nothing_in_steady_state() {
    for drive in [Drive::One, Drive::Batch, Drive::FlowBatch] {
        fig1(false, drive);
        fig1(true, drive);
    }
}

/// Every node kind, fair and FIFO leaves, DRR flows, a leaf limited by `outstanding` (its
/// packets wait in a list) and a shaping class, under a load that overflows the leaves'
/// limits (drops too must not allocate once every node has dropped).
#[test]
fn every_node_kind_allocates_nothing_in_steady_state() {
    let text = "weft: 1
link: {rate: 10gbit}
nodes:
  - {name: root, type: prio}
  - {name: ops, type: leaf, parent: root, priority: 0, match: {tag: 0}, outstanding: 4}
  - {name: t, type: wfq, parent: root, priority: 1}
  - {name: a, type: drr, parent: t, weight: 2, match: {tag: [1, 2]}}
  - {name: a1, type: leaf, parent: a, quantum: 1500b, match: {tag: 1}, flows: {by: flow, sched: fair}, limit: {packets: 300}}
  - {name: a2, type: leaf, parent: a, quantum: 3000b, match: {tag: 2}, limit: {packets: 300}}
  - {name: b, type: rr, parent: t, weight: 1, match: {tag: [3, 4]}}
  - {name: b1, type: edf, parent: b, match: {tag: 3}}
  - {name: b1l, type: leaf, parent: b1, match: {tag: 3}, limit: {packets: 300}}
  - {name: b2, type: lstf, parent: b, match: {tag: 4}}
  - {name: b2l, type: leaf, parent: b2, match: {tag: 4}, limit: {packets: 300}}
  - {name: s, type: shape, parent: t, rate: 1gbit, burst: 16kb}
  - {name: c, type: fifo, parent: s, weight: 3, match: {tag: 5}}
  - {name: c1, type: leaf, parent: c, match: {tag: 5}, limit: {packets: 300}, flows: {by: flow, sched: fair}}
";
    let prog = program(text);
    let make = |i: u64| {
        let r = mix(i);
        let tag = r % 6;
        let mut m = PacketMeta::default();
        m.set_int(Field::Tag, tag);
        let mut p = Packet::new(i, 200 + (r >> 8) as u32 % 1300, m);
        p.flow = (r >> 24) % 64;
        if tag == 3 {
            p.deadline_ps = Some(i * 1_000_000 + (r >> 32) % 50_000_000);
        }
        if tag == 4 && r & 1 == 0 {
            p.slack_ps = Some((r >> 32) % 50_000_000);
        }
        p
    };
    for drive in [Drive::One, Drive::Batch, Drive::FlowBatch] {
        let e = FastEngine::new(prog.clone());
        // More wanted queued than the leaves' limits allow: they fill up and drop.
        let load = Load {
            name: "every node kind",
            drive,
            make: &make,
            target: &|_| 4000,
        };
        let e = assert_steady(e, &load, 384, 60_000, 30_000);
        let drops: u64 = e.stats().nodes.iter().flat_map(|c| c.drops).sum();
        assert!(drops > 0, "{drive:?}: the load should overflow the leaves");
    }
}

/// A `senic` node of 1,024 classes whose load swings between many backlogged classes (its
/// entries move to a calendar) and few (they move back), again and again. The classes share
/// one rate and take packets in turn, so every cycle fills the node and the shaping queue as
/// far as the one before, and their pools meet their peak within the warm-up. (Under a
/// random load the packets waiting in the shaping queue at once reach a new most now and
/// then, ever more rarely, up to the backlog's bound, and its pool grows to it: growth to a
/// peak, not per packet.)
#[test]
fn a_senic_node_switching_to_its_calendar_and_back_allocates_nothing() {
    let mut text =
        String::from("weft: 1\nlink: {rate: 100gbit}\nnodes:\n  - {name: nic, type: senic}\n");
    for c in 0..1024 {
        text += &format!("  - {{name: c{c}, type: leaf, parent: nic, rate: 40mbit, match: {{tag: {c}}}, flows: {{by: none}}}}\n");
    }
    let prog = program(&text);
    // 4,000 steps of 1,024 classes and 2,048 packets queued, then 4,000 of 8 classes and 32
    // packets, and so on.
    let wide = |step: u64| (step / 4_000).is_multiple_of(2);
    let make = |i: u64| {
        let classes = if wide(i / 32) { 1024 } else { 8 };
        let mut m = PacketMeta::default();
        // Round robin over the classes (see above).
        m.set_int(Field::Tag, i % classes);
        Packet::new(i, 1518, m)
    };
    for drive in [Drive::One, Drive::Batch] {
        let e = FastEngine::new(prog.clone());
        let target = |step: u64| if wide(step) { 2048 } else { 32 };
        let load = Load {
            name: "senic calendar",
            drive,
            make: &make,
            target: &target,
        };
        assert_steady(e, &load, 1024, 48_000, 24_000);
    }
}
