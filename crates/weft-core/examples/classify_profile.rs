//! Profiling driver for `Program::classify` alone: the `weft bench` Loom Fig. 1 scenario's
//! policy and packets (64k flows), each packet classified once, for
//! `valgrind --tool=callgrind`. Usage: classify_profile [packets] [single|batch|null]
//! (with `WEFT_PROFILE_POOL_ONLY=1` it only builds the policy and the packets: subtract that
//! run's instruction count and divide by `packets` for the cost of one classification;
//! `null` runs the same loop with a fixed answer instead of `classify`: the loop's own cost).
use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{compile_str, synth, Classification, NodeId};

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(200_000, |s| s.parse().unwrap());
    let mode = args.get(2).map_or("single", |s| s.as_str());
    let flows = 65_536u64;
    let text = synth::scaled(64, 16, 64).replace("rate: 1", "rate: 10");
    let prog = compile_str(
        std::path::Path::new("fig1.yaml"),
        &text,
        &Default::default(),
    )
    .unwrap();
    let pool: Vec<PacketMeta> = (0..n)
        .map(|i| {
            let f = mix(i) % flows;
            let mut p = synth::packet(f, 64, 16, 64);
            p.set_int(Field::Sport, f & 0xffff);
            p.set_int(Field::Src, 0xffff_0a00_0000u64 | (f >> 16));
            p
        })
        .collect();
    if std::env::var_os("WEFT_PROFILE_POOL_ONLY").is_some() {
        println!("pool of {} packets", pool.len());
        return;
    }
    // Cheap on purpose: `black_box` makes the whole answer (shaping classes included) real;
    // the sum of leaves is the checksum.
    let fold = |acc: u64, c: &Classification| match std::hint::black_box(c) {
        Classification::Leaf { leaf, .. } => acc.wrapping_add(u64::from(leaf.get())),
        Classification::Unclassified { at } => acc.wrapping_add(u64::from(at.get()) << 32),
    };
    let mut acc = 0u64;
    if mode == "batch" {
        let mut out = vec![Classification::Unclassified { at: NodeId::ROOT }; pool.len()];
        prog.classify_batch(&pool, &mut out);
        for c in &out {
            acc = fold(acc, c);
        }
    } else if mode == "null" {
        let fixed = prog.classify(&pool[0]);
        for p in &pool {
            let c = if std::hint::black_box(p).present != 0 {
                fixed
            } else {
                Classification::Unclassified { at: NodeId::ROOT }
            };
            acc = fold(acc, &c);
        }
    } else {
        for p in &pool {
            acc = fold(acc, &prog.classify(std::hint::black_box(p)));
        }
    }
    println!("{} packets classified, checksum {acc:#x}", pool.len());
}
