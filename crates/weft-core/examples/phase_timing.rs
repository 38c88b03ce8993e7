//! Where does compile time go? Times the YAML parser's events alone (the floor: weft reads
//! the policy from them, `policy/yaml.rs`) vs the whole compile.
use std::time::Instant;

/// The allocator the `weft` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let text = weft_core::policy::synth::scaled(
        std::env::args().nth(1).map_or(1000, |a| a.parse().unwrap()),
        100,
        10,
    );
    let t = Instant::now();
    let mut events = 0;
    for e in saphyr_parser::Parser::new_from_str(&text) {
        e.expect("valid YAML");
        events += 1;
    }
    println!(
        "YAML events: {:.3}s ({events} events)",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let p =
        weft_core::policy::compile_str(std::path::Path::new("s.yaml"), &text, &Default::default())
            .unwrap();
    println!(
        "full compile: {:.3}s ({} nodes)",
        t.elapsed().as_secs_f64(),
        p.nodes.len()
    );
}
