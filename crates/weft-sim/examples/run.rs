//! `cargo run --release -p weft-sim --example run -- SCENARIO [OUTDIR]`: runs a scenario's
//! models and prints the summary (a development aid; the CLI is `weft sim`).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sc =
        weft_sim::load(std::path::Path::new(&args[1]), &Default::default()).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
    let t0 = std::time::Instant::now();
    let runs = weft_sim::run_all(&sc, &[], &mut |_, _| {});
    let el = t0.elapsed().as_secs_f64();
    let pk: u64 = runs.iter().map(|r| r.packets).sum();
    eprintln!("{pk} packets in {el:.2} s: {:.2} M/s", pk as f64 / el / 1e6);
    let out = args
        .get(2)
        .map(|s| s.as_str())
        .unwrap_or("/tmp/weft-sim-out");
    let sum = weft_sim::report::write(std::path::Path::new(out), &sc, &runs).unwrap();
    for (k, v) in sum["nics"].as_object().unwrap() {
        println!(
            "{k:8} jain_min {:<10} util {:<10} p90 {:<10} db/s {:<10}",
            v["jain_min"].to_string(),
            v["link_utilization"].to_string(),
            v["tenants"]["T0"]["latency_us"]["p90"].to_string(),
            v["doorbell_writes_per_s"].to_string()
        );
        for (t, tv) in v["tenants"].as_object().unwrap() {
            println!(
                "    {t}: {:.3} Gbit/s share {} ideal {} p90 {}",
                tv["mean_bps"].as_f64().unwrap() / 1e9,
                tv["share"],
                tv["ideal_share"],
                tv["latency_us"]["p90"]
            );
        }
    }
}
