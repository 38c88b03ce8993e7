//! `weft testbed`: namespaces up and down, an experiment run with weft and with Linux HTB
//! (its report printed, and its per-tenant throughput drawn as `throughput.svg`), the
//! forwarding benchmark (its table or JSON, and the ratios between configurations), and
//! the benchmark's hidden packet blaster.
//!
//! Invariants: every argument is checked before a namespace is made (a bad `--seconds`,
//! frame size or `--fig1` policy is exit 2 with nothing set up); the testbed is torn down on
//! a signal and when the command ends. Cost: the experiment's or benchmark's duration.

use std::path::{Path, PathBuf};

use weft_core::policy::{self, LoadOptions};
use weft_core::units;
use weft_testbed as testbed;

use super::args::TestbedCommand;
use super::{usage, Fail};

/// Frame sizes `weft testbed bench --sizes` takes, bytes.
const BENCH_FRAME_BYTES: std::ops::RangeInclusive<usize> = 60..=1514;

/// The FIFO policy `weft testbed bench` measures beside `--fig1`.
const BENCH_FIFO_POLICY: &str = "weft: 1\nname: fifo\nlink: {rate: 100gbit}\nnodes:\n  - {name: root, type: fifo}\n  - {name: all, type: leaf, parent: root}\n";

pub(super) fn testbed_cmd(t: TestbedCommand) -> Result<(), Fail> {
    match t {
        TestbedCommand::Up { prefix, tenants } => up(&prefix, tenants),
        TestbedCommand::Down { prefix } => down(&prefix),
        TestbedCommand::Run {
            experiment,
            prefix,
            rate,
            seconds,
            only,
            out,
            json,
            backend,
        } => {
            testbed::check_prefix(&prefix).map_err(usage)?;
            let exp = experiment_named(&experiment, &rate, seconds, backend)?;
            let modes = modes(only.as_deref())?;
            run_experiment(&exp, &prefix, &modes, &out, json)
        }
        TestbedCommand::Bench {
            prefix,
            fig1,
            seconds,
            sizes,
            backend,
            json,
        } => {
            testbed::check_prefix(&prefix).map_err(usage)?;
            check_bench_args(seconds, &sizes, &fig1)?;
            let r = run_bench(&prefix, &fig1, &backend, &sizes, seconds)?;
            print_bench(r, &sizes, &backend, json)
        }
        TestbedCommand::Blast {
            iface,
            size,
            seconds,
            flows,
            src,
            dst,
            dst_mac,
        } => {
            let n = testbed::blast(
                &iface,
                dst_mac_address(&dst_mac)?,
                src.octets(),
                dst.octets(),
                size,
                flows,
                seconds,
            )
            .map_err(|e| (1, e.to_string()))?;
            crate::out::outln!("{n}")?;
            Ok(())
        }
    }
}

/// `weft testbed blast --dst-mac`'s address (`aa:bb:cc:dd:ee:ff`).
fn dst_mac_address(dst_mac: &str) -> Result<[u8; 6], Fail> {
    let mac: Vec<u8> = dst_mac
        .split(':')
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    mac.try_into()
        .map_err(|_| usage(format!("--dst-mac `{dst_mac}`")))
}

/// `weft testbed up`: the namespaces made and kept; their names on stdout.
fn up(prefix: &str, tenants: u8) -> Result<(), Fail> {
    testbed::check_prefix(prefix).map_err(usage)?;
    let tb = testbed::Testbed::up(prefix, usize::from(tenants)).map_err(|e| (1, e.to_string()))?;
    let names = tb.namespaces();
    tb.keep();
    crate::out::outln!("{}", names.join(" "))?;
    Ok(())
}

/// `weft testbed down`: every namespace `PREFIX-*` deleted; what went, on stderr.
fn down(prefix: &str) -> Result<(), Fail> {
    testbed::check_prefix(prefix).map_err(usage)?;
    crate::out::errln!("testbed: {}", testbed::down_all(prefix).describe(prefix));
    Ok(())
}

/// The experiment `name` at `rate` for `seconds`, on `backend` if given.
fn experiment_named(
    name: &str,
    rate: &str,
    seconds: u32,
    backend: Option<String>,
) -> Result<testbed::Experiment, Fail> {
    let rate_bps = units::parse_rate(rate).map_err(|e| usage(format!("--rate: {e}")))?;
    let mut exp = testbed::Experiment::named(name, rate_bps, seconds).ok_or_else(|| {
        usage(format!(
            "unknown experiment `{name}`; known: {}",
            testbed::Experiment::NAMES.join(", ")
        ))
    })?;
    if let Some(b) = backend {
        exp.backend = b;
    }
    Ok(exp)
}

/// The schedulers `--only` asks for (both without it).
fn modes(only: Option<&str>) -> Result<Vec<testbed::Mode>, Fail> {
    Ok(match only {
        None => vec![testbed::Mode::Weft, testbed::Mode::Htb],
        Some("weft") => vec![testbed::Mode::Weft],
        Some("htb") => vec![testbed::Mode::Htb],
        Some(o) => return Err(usage(format!("--only `{o}`: weft or htb"))),
    })
}

/// `weft testbed run`: the experiment on each mode (torn down on a signal), its chart
/// written beside the report, and the report printed (Markdown, or JSON with `json`).
fn run_experiment(
    exp: &testbed::Experiment,
    prefix: &str,
    modes: &[testbed::Mode],
    out: &Path,
    json: bool,
) -> Result<(), Fail> {
    let weft = std::env::current_exe().map_err(|e| (1, e.to_string()))?;
    testbed::tear_down_on_signal(prefix).map_err(|e| (1, e.to_string()))?;
    let report = testbed::run(exp, prefix, modes, &weft, out);
    testbed::wait_if_interrupted();
    let report = report.map_err(|e| (1, e.to_string()))?;
    write_throughput_chart(out, &report);
    if json {
        crate::out::outln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        )?;
    } else {
        crate::out::print(&testbed::markdown(&report))?;
        crate::out::errln!("wrote {}/report.json and report.md", out.display());
    }
    Ok(())
}

/// `weft testbed bench`'s arguments, checked before any namespace is made: a zero, NaN or
/// negative duration and frames the wires cannot carry gave a table of zeros that exited 0;
/// `--fig1`'s diagnostics here, not `weft run did not start` after the namespaces are up.
fn check_bench_args(seconds: f64, sizes: &[usize], fig1: &Path) -> Result<(), Fail> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(usage(format!(
            "--seconds {seconds}: a positive number of seconds per configuration"
        )));
    }
    if let Some(&bad) = sizes.iter().find(|&&b| !(BENCH_FRAME_BYTES.contains(&b))) {
        return Err(usage(format!(
            "--sizes {bad}: frames are {} to {} bytes (Ethernet without FCS; the \
             testbed's links have a 1500-byte MTU)",
            BENCH_FRAME_BYTES.start(),
            BENCH_FRAME_BYTES.end()
        )));
    }
    if !fig1.exists() {
        return Err(usage(format!("--fig1 {}: no such file", fig1.display())));
    }
    let opts = LoadOptions {
        link_rate_bps: Some(testbed::BENCH_RATE_BPS),
        ..LoadOptions::default()
    };
    match policy::load(fig1, &opts) {
        Ok(prog) => crate::diagnostics::warn(&prog, false),
        Err(e) => {
            crate::diagnostics::report(&e, false);
            return Err(usage(format!("--fig1 {}: invalid policy", fig1.display())));
        }
    }
    Ok(())
}

/// The benchmark's configurations: for each weft backend, `fig1` and the FIFO policy
/// (`fifo`, a file the caller wrote); then HTB with 1 and 1,000 classes.
fn bench_configs(fig1: &Path, fifo: &Path, backends: &[String]) -> Vec<testbed::BenchConfig> {
    let mut configs = Vec::new();
    for b in backends {
        // The backend in the label only when it is not the default.
        let tag = backend_tag(b);
        configs.push(testbed::BenchConfig::Weft {
            label: format!("loom-fig1{tag}"),
            policy: fig1.to_path_buf(),
            backend: b.clone(),
        });
        configs.push(testbed::BenchConfig::Weft {
            label: format!("fifo{tag}"),
            policy: fifo.to_path_buf(),
            backend: b.clone(),
        });
    }
    configs.push(testbed::BenchConfig::Htb { classes: 1 });
    configs.push(testbed::BenchConfig::Htb { classes: 1000 });
    configs
}

/// Runs the benchmark's configurations ([`bench_configs`]) on frames of `sizes` for
/// `seconds` each, the FIFO policy written to the bench directory for the run and removed
/// after it (also after a signal).
fn run_bench(
    prefix: &str,
    fig1: &Path,
    backends: &[String],
    sizes: &[usize],
    seconds: f64,
) -> Result<testbed::BenchReport, Fail> {
    let dir = testbed::bench_dir(prefix);
    std::fs::create_dir_all(&dir).map_err(|e| (1, e.to_string()))?;
    let fifo = dir.join("fifo.yaml");
    std::fs::write(&fifo, BENCH_FIFO_POLICY).map_err(|e| (1, e.to_string()))?;
    let abs: PathBuf = std::fs::canonicalize(fig1).map_err(|e| usage(e.to_string()))?;
    let configs = bench_configs(&abs, &fifo, backends);
    let weft = std::env::current_exe().map_err(|e| (1, e.to_string()))?;
    testbed::tear_down_on_signal(prefix).map_err(|e| (1, e.to_string()))?;
    let r = testbed::bench(prefix, &weft, &configs, sizes, seconds);
    testbed::wait_if_interrupted();
    let _ = std::fs::remove_dir_all(&dir);
    r.map_err(|e| (1, e.to_string()))
}

/// A row's number as the benchmark's JSON reads it: NaN for one that is not finite (which
/// the JSON writes null).
fn num(x: f64) -> f64 {
    testbed::finite(x).unwrap_or(f64::NAN)
}

/// The ratios of forwarded packets per second, per frame size and weft backend, from this
/// run's rows (the backend named as in the configurations' labels): weft's Fig. 1 policy
/// over HTB with 1 and 1,000 classes, and over weft's FIFO policy. A size or backend
/// missing a configuration has none.
fn bench_ratios(
    rows: &[testbed::BenchRow],
    sizes: &[usize],
    backends: &[String],
) -> Vec<testbed::BenchRatio> {
    let mut ratios = Vec::new();
    for &size in sizes {
        let fwd = |config: &str| {
            rows.iter()
                .find(|r| r.frame_bytes == size && r.config == config)
                .map(|r| num(r.forwarded_pps))
        };
        for b in backends {
            let tag = backend_tag(b);
            if let (Some(fig1), Some(fifo), Some(h1), Some(h1000)) = (
                fwd(&format!("weft loom-fig1{tag}")),
                fwd(&format!("weft fifo{tag}")),
                fwd("htb 1 class"),
                fwd("htb 1000 classes"),
            ) {
                ratios.push(testbed::BenchRatio {
                    frame_bytes: size,
                    backend: b.clone(),
                    fig1_over_htb_1_class: fig1 / h1,
                    fig1_over_htb_1000_classes: fig1 / h1000,
                    fig1_over_fifo: fig1 / fifo,
                });
            }
        }
    }
    ratios
}

/// The benchmark's result on stdout: with `json`, its report with the ratios
/// ([`bench_ratios`]) added; else a table of its rows, then the ratios in words.
fn print_bench(
    mut r: testbed::BenchReport,
    sizes: &[usize],
    backends: &[String],
    json: bool,
) -> Result<(), Fail> {
    let ratios = bench_ratios(&r.rows, sizes, backends);
    if json {
        r.ratios = Some(ratios);
        crate::out::outln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default())?;
        return Ok(());
    }
    crate::out::outln!(
        "{:<22} {:>6} {:>14} {:>14}",
        "config",
        "bytes",
        "offered pps",
        "forwarded pps"
    )?;
    for row in &r.rows {
        crate::out::outln!(
            "{:<22} {:>6} {:>14.0} {:>14.0}",
            row.config,
            row.frame_bytes,
            num(row.offered_pps),
            num(row.forwarded_pps)
        )?;
    }
    for q in &ratios {
        let said = match q.backend.as_str() {
            "af-packet" => String::new(),
            b => format!(" ({b})"),
        };
        crate::out::outln!(
            "{} B, forwarded{said}: weft Fig. 1 / HTB 1 class {:.2}, / HTB 1,000 classes {:.2}; weft Fig. 1 / weft FIFO {:.2}",
            q.frame_bytes,
            num(q.fig1_over_htb_1_class),
            num(q.fig1_over_htb_1000_classes),
            num(q.fig1_over_fifo)
        )?;
    }
    Ok(())
}

/// What `weft testbed bench` adds to a weft configuration's label for its backend: nothing
/// for the default (AF_PACKET), ` BACKEND` otherwise (`weft loom-fig1 af-xdp`).
fn backend_tag(backend: &str) -> String {
    if backend == "af-packet" {
        String::new()
    } else {
        format!(" {backend}")
    }
}

/// The testbed report's per-tenant throughput over time as `throughput.svg` (one line per
/// scheduler and tenant), linked from `report.md`. Nothing is written when the report has no
/// per-second series.
fn write_throughput_chart(out: &std::path::Path, report: &testbed::Report) {
    let Some(svg) = throughput_chart(report) else {
        return;
    };
    if std::fs::write(out.join("throughput.svg"), svg).is_ok() {
        let md = out.join("report.md");
        if let Ok(mut text) = std::fs::read_to_string(&md) {
            text += "\n![per-tenant throughput over time](throughput.svg)\n";
            let _ = std::fs::write(md, text);
        }
    }
}

/// The chart's SVG text, if the report has per-second throughput.
fn throughput_chart(report: &testbed::Report) -> Option<String> {
    let mut series = Vec::new();
    for m in &report.results {
        let testbed::ModeResult::Throughput(m) = m else {
            continue;
        };
        for t in &m.tenants {
            let points: Vec<(f64, f64)> = t
                .mbps_per_second
                .iter()
                .enumerate()
                .filter_map(|(i, &v)| Some(((i + 1) as f64, testbed::finite(v)?)))
                .collect();
            if !points.is_empty() {
                series.push(weft_sim::report::Series {
                    name: format!("{} t{}", m.scheduler, t.tenant),
                    points,
                });
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    let title = format!("{}: per-tenant throughput", report.experiment);
    Some(weft_sim::report::line_chart(
        &title, "second", "Mbit/s", &series, None,
    ))
}

#[cfg(test)]
mod chart_tests {
    use super::*;
    use testbed::{ModeResult, Report, ThroughputResult};

    /// A throughput result of `scheduler` whose tenants' per-second rates are `series`.
    fn result(scheduler: &str, series: &[&[f64]]) -> ModeResult {
        let tenants = series
            .iter()
            .enumerate()
            .map(|(i, s)| testbed::TenantResult {
                tenant: i + 1,
                weight: 1,
                flows: 1,
                mbps: 0.0,
                mbps_per_second: s.to_vec(),
                retransmits: 0,
                ideal_mbps: 0.0,
                rel_error: 0.0,
            })
            .collect();
        ModeResult::Throughput(Box::new(ThroughputResult {
            scheduler: scheduler.into(),
            app_cpus: "all".into(),
            leaf_mbps: None,
            limit: None,
            reload: None,
            after_reload: None,
            jain: None,
            total_mbps: 0.0,
            max_rel_error: 0.0,
            weft_cpu_pct: None,
            system_cpu_pct: None,
            foreign_cpu: None,
            tenants,
            weft_rss_kb: testbed::Rss::default(),
            metrics_flood: None,
            link_flap: None,
            weft_stats: None,
            weft_log: None,
        }))
    }

    #[test]
    fn throughput_chart_has_a_line_per_scheduler_and_tenant() {
        let report = |results| Report {
            experiment: "fair-1v8".into(),
            rate_bps: 500_000_000,
            seconds: 3,
            tenants: Vec::new(),
            results,
        };
        let r = report(vec![
            result("weft", &[&[240.0, 250.5, 249.0], &[250.0, 249.5, 251.0]]),
            result("htb", &[&[245.0, 248.0], &[]]),
        ]);
        let svg = throughput_chart(&r).expect("a chart");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<path").count(), 3, "{svg}");
        for name in ["weft t1", "weft t2", "htb t1"] {
            assert!(svg.contains(name), "{name} missing: {svg}");
        }
        assert!(throughput_chart(&report(Vec::new())).is_none());
    }
}
