//! Criterion micro-benchmarks of the policy layer: compiling the example policies, and
//! classifying one packet with the fast and the reference twins (same process, same inputs).
//!
//! Run: `cargo bench -p weft-core --bench policy`.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use weft_core::classifier::PacketMeta;
use weft_core::policy::{compile_str, load, synth, LoadOptions};

fn examples(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies");
    let fig1 = root.join("loom-fig1.yaml");
    c.bench_function("compile/loom-fig1", |b| {
        b.iter(|| load(black_box(&fig1), &LoadOptions::default()).unwrap())
    });
    let p = load(&fig1, &LoadOptions::default()).unwrap();
    let pkt: PacketMeta = "vm=1,dport=11211,dst=10.0.2.7".parse().unwrap();
    let mut g = c.benchmark_group("classify/loom-fig1");
    g.bench_function("fast", |b| b.iter(|| p.classify(black_box(&pkt))));
    g.bench_function("reference", |b| {
        b.iter(|| p.classify_reference(black_box(&pkt)))
    });
    g.finish();
}

fn scaled(c: &mut Criterion) {
    let (vms, apps, dsts) = (100, 100, 10);
    let text = synth::scaled(vms, apps, dsts);
    let p = compile_str(Path::new("scaled.yaml"), &text, &LoadOptions::default()).unwrap();
    let packets: Vec<_> = (0..4096)
        .map(|i| synth::packet(i, vms, apps, dsts))
        .collect();
    let mut g = c.benchmark_group("classify/scaled-10k-leaves");
    g.bench_function("fast", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 4095;
            p.classify(black_box(&packets[i]))
        })
    });
    g.bench_function("reference", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 4095;
            p.classify_reference(black_box(&packets[i]))
        })
    });
    g.finish();
}

criterion_group!(benches, examples, scaled);
criterion_main!(benches);
