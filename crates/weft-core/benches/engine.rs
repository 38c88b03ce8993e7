//! Criterion benchmarks of the scheduling engines: one "dequeue one, enqueue one" step with a
//! full backlog, fast engine and reference engine on the same policy and packets.
//!
//! Run: `cargo bench -p weft-core --bench engine` (`weft bench` prints the same comparison at
//! larger scales with ratios and memory).

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use weft_core::policy::{compile_str, synth, Classification, LoadOptions};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{Engine, Packet};

fn steady<'a, E: Engine + 'a>(mut e: E, packets: &'a [Packet]) -> impl FnMut() -> u64 + 'a {
    let mut now = 0u64;
    let mut i = 0usize;
    for p in packets.iter().take(1024) {
        let _ = e.enqueue(*p, 0);
    }
    move || {
        i = (i + 1) % packets.len();
        now += 123_000;
        let d = e.dequeue(now).map_or(0, |d| d.id);
        let _ = e.enqueue(packets[i], now);
        d
    }
}

fn engines(c: &mut Criterion) {
    let text = synth::scaled(16, 8, 16);
    let p =
        Arc::new(compile_str(Path::new("scaled.yaml"), &text, &LoadOptions::default()).unwrap());
    // Only packets some leaf accepts: one that misses every leaf is dropped at once, and
    // each would shrink the backlog by one until the "full backlog" is gone.
    let packets: Vec<Packet> = (0..)
        .map(|i| Packet::new(i, 1500, synth::packet(i, 16, 8, 16)))
        .filter(|pkt| matches!(p.classify(&pkt.meta), Classification::Leaf { .. }))
        .take(8192)
        .collect();
    let mut g = c.benchmark_group("engine/loom-fig1-16x8-256-shapers");
    let mut fast = steady(FastEngine::new(p.clone()), &packets);
    g.bench_function("fast", |b| b.iter(|| black_box(fast())));
    let mut reference = steady(ReferenceEngine::new(p.clone()), &packets);
    g.bench_function("reference", |b| b.iter(|| black_box(reference())));
    g.finish();
}

criterion_group!(benches, engines);
criterion_main!(benches);
