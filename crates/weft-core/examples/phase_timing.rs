//! Where does compile time go? Times YAML parsing alone vs the whole compile.
use saphyr::LoadableYamlNode;
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
    let docs = saphyr::MarkedYaml::load_from_str(&text).unwrap();
    println!(
        "saphyr parse: {:.3}s ({} docs)",
        t.elapsed().as_secs_f64(),
        docs.len()
    );
    drop(docs);
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
