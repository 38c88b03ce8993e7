//! Profiling driver: the `weft bench` Loom Fig. 1 scenario (64k flows) on one engine, for
//! `valgrind --tool=callgrind`. Usage: engine_profile [fast|reference] [ops] [flows]
use std::sync::Arc;
use weft_core::classifier::Field;
use weft_core::policy::{compile_str, synth};
use weft_core::sched::{
    fast::FastEngine, link::wire_ps, reference::ReferenceEngine, Engine, Packet,
};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn run<E: Engine>(mut e: E, link: weft_core::policy::Link, ops: u64, flows: u64) {
    let make = |i: u64| {
        let f = mix(i) % flows;
        let mut p = synth::packet(f, 64, 16, 64);
        p.set_int(Field::Sport, f & 0xffff);
        p.set_int(Field::Src, 0xffff_0a00_0000u64 | (f >> 16));
        Packet::new(i, 1518, p)
    };
    let (mut now, mut next) = (0u64, 0u64);
    for _ in 0..4096 {
        let _ = e.enqueue(make(next), now);
        next += 1;
    }
    let t = std::time::Instant::now();
    let mut done = 0;
    while done < ops {
        match e.dequeue(now) {
            Some(d) => {
                now += wire_ps(d.bytes, &link);
                done += 1;
            }
            None => now = e.next_wakeup().unwrap_or(now + 1).max(now + 1),
        }
        let _ = e.enqueue(make(next), now);
        next += 1;
    }
    let s = t.elapsed().as_secs_f64();
    println!("{ops} ops in {s:.3}s: {:.0} pkt/s", ops as f64 / s);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let engine = args.get(1).map_or("fast", |s| s.as_str());
    let ops = args.get(2).map_or(1_000_000, |s| s.parse().unwrap());
    let flows = args.get(3).map_or(65_536, |s| s.parse().unwrap());
    let text = synth::scaled(64, 16, 64).replace("rate: 1", "rate: 10");
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
        "fast" => run(FastEngine::new(prog), link, ops, flows),
        _ => run(ReferenceEngine::new(prog), link, ops, flows),
    }
}
