//! `weft sim` and `weft demo` from the outside: files written, determinism, exit codes and
//! messages for bad input. Short durations (`--duration`) keep debug-mode runs quick.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn weft() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.current_dir(root());
    cmd
}

/// `weft sim FILE --quiet --out OUT`.
fn sim_quiet(file: &std::path::Path, out: &std::path::Path) -> Command {
    let mut cmd = weft();
    cmd.arg("sim").arg(file).args(["--quiet", "--out"]).arg(out);
    cmd
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-sim-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn sim_writes_report_and_is_deterministic() {
    let a = tmp("a");
    let b = tmp("b");
    for d in [&a, &b] {
        weft()
            .args([
                "sim",
                "examples/scenarios/hierarchy.yaml",
                "--nic",
                "mq,tonic,loom",
            ])
            .args(["--duration", "6ms", "--quiet", "--out"])
            .arg(d)
            .assert()
            .success()
            .stdout(predicate::str::contains("jain_min").and(predicate::str::contains("tonic")));
    }
    for f in [
        "summary.json",
        "timeseries.csv",
        "latency.csv",
        "jain.csv",
        "index.html",
        "latency.svg",
        "latency-cdf.csv",
        "latency-cdf.svg",
        "jain.svg",
        "throughput-loom.svg",
    ] {
        assert!(a.join(f).exists(), "{f} missing");
    }
    let sa = std::fs::read(a.join("summary.json")).unwrap();
    let sb = std::fs::read(b.join("summary.json")).unwrap();
    assert_eq!(sa, sb, "same seed, same summary.json");
    let v: serde_json::Value = serde_json::from_slice(&sa).unwrap();
    let loom = &v["nics"]["loom"];
    for k in [
        "jain_min",
        "link_utilization",
        "doorbell_writes_per_s",
        "dma_reads_per_s",
    ] {
        assert!(loom[k].is_number(), "{k}: {loom}");
    }
    let t = &loom["tenants"]["A"];
    for k in ["mean_bps", "share", "ideal_share", "rel_error", "drops"] {
        assert!(t[k].is_number(), "{k}: {t}");
    }
    assert!(t["latency_us"]["p90"].is_number());
    let csv = std::fs::read_to_string(a.join("timeseries.csv")).unwrap();
    assert!(csv.starts_with("window_start_s,nic,tenant,app,bytes\n"));
    // Another seed: a different run.
    let c = tmp("c");
    weft()
        .args(["sim", "examples/scenarios/hierarchy.yaml", "--nic", "mq"])
        .args([
            "--duration",
            "6ms",
            "--quiet",
            "--seed",
            "5",
            "--json",
            "--out",
        ])
        .arg(&c)
        .assert()
        .success()
        .stdout(predicate::str::contains("\"seed\": 5"));
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn bad_input_exits_2_with_location() {
    let d = tmp("bad");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("bad.yaml");
    std::fs::write(
        &f,
        "duration: 10ms\npolicy_inline: |\n  weft: 1\n  nodes:\n    - {name: r, type: wfq}\n    - {name: l, type: leaf, parent: r}\ntenants:\n  - name: T\n    apps:\n      - {name: a, kind: bulk, window: 12 lightyears}\n",
    )
    .unwrap();
    weft()
        .arg("sim")
        .arg(&f)
        .arg("--quiet")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.yaml:10:"));
    // A tenant name with an escape sequence (a CSV column and a table cell) is refused
    // where written, quoted: the sequence does not reach the terminal.
    let g = d.join("escape.yaml");
    std::fs::write(
        &g,
        "duration: 10ms\npolicy_inline: |\n  weft: 1\n  nodes:\n    - {name: r, type: wfq}\n    - {name: l, type: leaf, parent: r}\ntenants:\n  - name: \"\\e[31mRED\"\n    apps:\n      - {name: a, kind: bulk}\n",
    )
    .unwrap();
    weft()
        .arg("sim")
        .arg(&g)
        .arg("--quiet")
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(
            predicate::str::contains(r#"escape.yaml:8:11: tenant name "\u{1b}[31mRED" must be"#)
                .and(predicate::str::contains("\u{1b}").not()),
        );
    weft()
        .args([
            "sim",
            "examples/scenarios/hierarchy.yaml",
            "--nic",
            "warp-drive",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown NIC model"));
    // A near miss gets a hint, a model's name or a parameter's.
    weft()
        .args(["sim", "examples/scenarios/hierarchy.yaml", "--nic", "lom"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown NIC model `lom`; did you mean `loom`?",
        ));
    weft()
        .args(["sim", "examples/scenarios/hierarchy.yaml", "--set"])
        .arg("loom.bach=1kb")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown NIC parameter `loom.bach`; did you mean `loom.batch`?",
        ));
    // A name that extends a parameter's is told of that one, not of a longer one that
    // shares its start (`loom.batch_timeout`).
    weft()
        .args(["sim", "examples/scenarios/hierarchy.yaml", "--set"])
        .arg("loom.batchsize=8kb")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown NIC parameter `loom.batchsize`; did you mean `loom.batch`?",
        ));
    // A bad value names its key.
    weft()
        .args([
            "sim",
            "examples/scenarios/hierarchy.yaml",
            "--set",
            "loom.batch=0",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--set: `loom.batch=0`: `0` must be greater than zero",
        ));
    weft()
        .args(["sim", "no/such/scenario.yaml"])
        .assert()
        .code(2);
    // A policy given where a scenario goes: the unknown key, and what to do instead.
    weft()
        .args(["sim", "examples/policies/loom-fig8.yaml"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("loom-fig8.yaml:").and(predicate::str::contains(
                "this file is a policy, not a scenario",
            )),
        );
    // A scenario with an unknown key gets no such hint.
    weft()
        .arg("sim")
        .arg({
            let g = d.join("typo.yaml");
            std::fs::write(&g, "durashun: 10ms\n").unwrap();
            g
        })
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("unknown key `durashun`")
                .and(predicate::str::contains("is a policy").not()),
        );
    // Past the last time the simulator schedules (2^63 ps): refused up front, where it once
    // ran out of memory allocating windows.
    weft()
        .args([
            "sim",
            "examples/scenarios/loom-fig9.yaml",
            "--nic",
            "loom",
            "--duration",
            "18446744073709551615ps",
        ])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--duration: 18446744073709551615ps")
                .and(predicate::str::contains("at most 2^63 ps")),
        );
    let _ = std::fs::remove_dir_all(d);
}

/// Scenarios the simulator cannot honour exit 2 naming the file, line and rule, where they
/// ran: a 1 TiB response (memory ran out), a UDP rate of 2^64 − 1 bit/s (minutes for 5 ms),
/// two tenants of one name (one's results vanished from summary.json), a host of no cores
/// (made one), `nics: []` (an empty report). `--nic ''` ran the scenario's models.
#[test]
fn scenarios_the_simulator_cannot_honour_exit_2() {
    let d = tmp("refused");
    std::fs::create_dir_all(&d).unwrap();
    let scenario = |head: &str, a: &str, b: &str| {
        format!(
            "duration: 1ms\n{head}policy_inline: |\n  weft: 1\n  link: {{rate: 1gbit}}\n  nodes:\n\
             \x20   - {{name: r, type: wfq}}\n\
             \x20   - {{name: a, type: leaf, parent: r, match: {{tenant: 1}}}}\n\
             \x20   - {{name: b, type: leaf, parent: r, match: {{tenant: 2}}}}\ntenants:\n\
             \x20 - name: {a}\n    meta: {{tenant: 1}}\n    apps:\n\
             \x20     - {{name: kv, kind: request-response, rate: 1000/s, size: 500b}}\n\
             \x20 - name: {b}\n    meta: {{tenant: 2}}\n    apps:\n\
             \x20     - {{name: udp, kind: udp, rate: 500mbit}}\n"
        )
    };
    for (file, text, at, rule) in [
        (
            "size.yaml",
            scenario("", "A", "B").replace("size: 500b", "size: 1099511627776b"),
            "size.yaml:13:",
            "at most 1gb",
        ),
        (
            "rate.yaml",
            scenario("", "A", "B").replace("rate: 500mbit", "rate: 18446744073709551615bit"),
            "rate.yaml:17:",
            "more than 2 times the link rate",
        ),
        (
            "dup.yaml",
            scenario("", "A", "A"),
            "dup.yaml:14:11:",
            "tenant `A` is named twice (first at ",
        ),
        (
            "cores.yaml",
            scenario("host: {cores: 0}\n", "A", "B"),
            "cores.yaml:2:",
            "a host has at least 1 core",
        ),
        (
            "nics.yaml",
            scenario("nics: []\n", "A", "B"),
            "nics.yaml:2:",
            "`nics` is empty",
        ),
    ] {
        let f = d.join(file);
        std::fs::write(&f, text).unwrap();
        sim_quiet(&f, &d.join("out"))
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(at).and(predicate::str::contains(rule)));
    }
    for (nic, rule) in [
        ("", "--nic: no NIC model given"),
        (" , ", "--nic: no NIC model given"),
        ("sq,loom,sq", "--nic: `sq` is given twice"),
    ] {
        weft()
            .args([
                "sim",
                "examples/scenarios/hierarchy.yaml",
                "--quiet",
                "--nic",
                nic,
            ])
            .arg("--out")
            .arg(d.join("out"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(rule));
    }
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn help_teaches() {
    weft().args(["sim", "--help"]).assert().success().stdout(
        predicate::str::contains("weft sim examples/scenarios/loom-fig9.yaml")
            .and(predicate::str::contains("--seeds 1..10"))
            .and(predicate::str::contains("--seeds <SEEDS>"))
            .and(predicate::str::contains("Student t"))
            .and(predicate::str::contains("latency-cdf.csv"))
            .and(predicate::str::contains("p99_abs_dev")),
    );
    weft()
        .args(["demo", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("weft-report"));
}

/// `--out DIR` holding an earlier report: its files are replaced, and those this run does
/// not write are removed (a `throughput-sq.svg` stayed beside the summary of a run without
/// sq); the user's own files stay. A file as `--out`, or a report that would replace its own
/// scenario, is refused.
#[test]
fn sim_out_replaces_an_earlier_report() {
    let d = tmp("replace");
    let run = |nics: &str| {
        weft()
            .args(["sim", "examples/scenarios/hierarchy.yaml", "--nic", nics])
            .args(["--duration", "2ms", "--quiet", "--out"])
            .arg(&d)
            .assert()
            .success();
    };
    run("sq,loom");
    assert!(d.join("throughput-sq.svg").exists());
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    run("loom");
    assert!(
        !d.join("throughput-sq.svg").exists(),
        "a stale chart stayed"
    );
    assert!(d.join("throughput-loom.svg").exists() && d.join("notes.txt").exists());
    weft()
        .args([
            "sim",
            "examples/scenarios/hierarchy.yaml",
            "--quiet",
            "--out",
        ])
        .arg(d.join("notes.txt"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "notes.txt: a file, not a directory",
        ));
    let own = d.join("index.html");
    std::fs::copy(root().join("examples/scenarios/hierarchy.yaml"), &own).unwrap();
    sim_quiet(&own, &d)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("would replace its own input"));
    assert!(own.exists());
    let _ = std::fs::remove_dir_all(d);
}

/// The latency app's p90 counted only completed requests: qpf, which finishes about a third
/// of tenant A's, showed the p90 of that third. Every request counts now; the table marks a
/// lower bound and says how many were unfinished, and summary.json has the counts.
#[test]
fn the_table_marks_latency_lower_bounds() {
    let d = tmp("censored");
    let out = weft()
        .args([
            "sim",
            "examples/scenarios/hierarchy.yaml",
            "--nic",
            "qpf,loom",
        ])
        .args(["--duration", "5ms", "--quiet", "--out"])
        .arg(&d)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    let line = |m: &str| out.lines().find(|l| l.starts_with(m)).unwrap().to_string();
    assert!(line("qpf ").contains(" ≥ "), "{out}");
    assert!(!line("loom ").contains('≥'), "{out}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("summary.json")).unwrap()).unwrap();
    let r = &v["nics"]["qpf"]["tenants"]["A"]["apps"]["kv"]["requests"];
    let n = |k: &str| r[k].as_u64().unwrap();
    assert!(
        n("unfinished") > 0 && n("issued") == n("completed") + n("unfinished"),
        "{r}"
    );
    assert!(
        out.contains(&format!(
            "≥ qpf: {} of A/kv's {} requests unfinished at the end",
            n("unfinished"),
            n("issued")
        )),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(d);
}

/// Scenario mistakes the YAML library described in its own words, or that were accepted
/// silently, exit 2 naming the file, line, column and rule.
#[test]
fn scenario_mistakes_exit_2_in_the_scenarios_terms() {
    let d = tmp("terms");
    std::fs::create_dir_all(&d).unwrap();
    let base = std::fs::read_to_string(root().join("examples/scenarios/loom-fig3.yaml")).unwrap();
    let apps = "        kind: bulk\n        flows: 3\n";
    assert!(base.contains("host: {cores: 8, placement: random}") && base.contains(apps));
    for (file, text, want) in [
        (
            "empty.yaml",
            String::new(),
            "empty.yaml:1:1: the scenario file is empty",
        ),
        (
            "cores.yaml",
            base.replace("cores: 8,", "cores: eight,"),
            "cores.yaml:12:15: `cores` must be a whole number from 1 to 65535, not `eight`",
        ),
        (
            "nics.yaml",
            base.replace("nics: [sq, mq, qpf, loom]", "nics: loom"),
            "nics.yaml:11:7: `nics` must be a list, e.g. `[sq, loom]`",
        ),
        (
            "rate.yaml",
            base.replacen(apps, &format!("{apps}        rate: 5gbit\n"), 1),
            "rate.yaml:28:15: `rate` belongs to `request-response` and `udp` applications",
        ),
        (
            "inline.yaml",
            base.replace("match: {tag: 2}}", "match: {tag: 2}, wieght: 3}"),
            "inline.yaml:20:61: policy_inline: error[unknown-key]: unknown key `wieght`",
        ),
    ] {
        let f = d.join(file);
        std::fs::write(&f, text).unwrap();
        sim_quiet(&f, &d.join("out"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(want));
    }
    weft()
        .args([
            "sim",
            "examples/scenarios/hierarchy.yaml",
            "--set",
            "hw.quantum=1b",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--set: `hw.quantum=1b`: `1b` is less than 64 B, the smallest frame",
        ));
    // What a run never reaches runs, with a warning naming where it was written.
    let f = d.join("late.yaml");
    std::fs::write(
        &f,
        base.replace("{at: 150ms, flows: 5}", "{at: 900ms, flows: 5}"),
    )
    .unwrap();
    weft()
        .arg("sim")
        .arg(&f)
        .args(["--quiet", "--nic", "loom", "--out"])
        .arg(d.join("out"))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "late.yaml:29:70: J1/spark's schedule step to 5 flows at 900ms is at or after the \
             end of the run (200ms)",
        ));
    let _ = std::fs::remove_dir_all(d);
}

/// The scenario's `name`, `description` and `time_scale` were not checked: a name with a
/// space headed the table, an escape sequence in `time_scale` reached the terminal, a time
/// scale said nothing parseable. Each exits 2 at its line and column; a `latency_window`
/// longer than the run runs with a warning, like a throughput window.
#[test]
fn scenario_name_time_scale_and_latency_window_are_checked() {
    let d = tmp("head");
    std::fs::create_dir_all(&d).unwrap();
    let base = std::fs::read_to_string(root().join("examples/scenarios/loom-fig3.yaml")).unwrap();
    assert!(base.contains("name: loom-fig3\n"));
    for (file, text, want) in [
        (
            "name.yaml",
            base.replace("name: loom-fig3\n", "name: loom fig3\n"),
            r#"name.yaml:6:7: scenario name "loom fig3" must be non-empty, without spaces"#,
        ),
        (
            "escape.yaml",
            base.replace(
                "name: loom-fig3\n",
                "name: loom-fig3\ntime_scale: \"1 s = 1 ms \\e[2J\"\n",
            ),
            "escape.yaml:7:13: `time_scale` has the control character U+001B at character 12",
        ),
        (
            "scale.yaml",
            base.replace(
                "name: loom-fig3\n",
                "name: loom-fig3\ntime_scale: 10x faster\n",
            ),
            r#"scale.yaml:7:13: time_scale "10x faster": no `=`: expected `PAPER = SIMULATED`"#,
        ),
    ] {
        let f = d.join(file);
        std::fs::write(&f, text).unwrap();
        let out = sim_quiet(&f, &d.join("out"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(want))
            .get_output()
            .stderr
            .clone();
        assert!(!out.contains(&0x1b), "{}", String::from_utf8_lossy(&out));
    }
    let f = d.join("lat.yaml");
    std::fs::write(
        &f,
        base.replace("name: loom-fig3\n", "name: loom-fig3\nlatency_window: 1s\n"),
    )
    .unwrap();
    weft()
        .arg("sim")
        .arg(&f)
        .args(["--quiet", "--nic", "loom", "--duration", "2ms", "--out"])
        .arg(d.join("out"))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "lat.yaml:7:17: the latency window (1s) is longer than the run (2ms)",
        ));
    let _ = std::fs::remove_dir_all(d);
}

/// A bulk or UDP headline application's packet delay counted only the packets sent: one
/// starved by a strict priority showed `-` (no delay at all). Its packets still queued at
/// the end count as their age: `≥` in the table, and a note says how many were queued.
#[test]
fn the_table_marks_packet_delay_lower_bounds() {
    let d = tmp("queued");
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("starve.yaml");
    std::fs::write(
        &f,
        "duration: 5ms\nnics: [sq]\npolicy_inline: |\n  weft: 1\n  link: {rate: 1gbit}\n  nodes:\n\
         \x20   - {name: r, type: prio}\n\
         \x20   - {name: hi, type: leaf, parent: r, priority: 0, match: {tenant: 1}}\n\
         \x20   - {name: lo, type: leaf, parent: r, priority: 1, match: {tenant: 2}}\n\
         tenants:\n\
         \x20 - {name: L, meta: {tenant: 2}, apps: [{name: udp, kind: udp, socket_limit: 30000b}]}\n\
         \x20 - {name: H, meta: {tenant: 1}, apps: [{name: udp, kind: udp}]}\n",
    )
    .unwrap();
    let out = sim_quiet(&f, &d.join("out"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    let row = out.lines().find(|l| l.starts_with("sq ")).unwrap();
    assert!(row.contains(" ≥ 4"), "{out}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("out/summary.json")).unwrap()).unwrap();
    let p = &v["nics"]["sq"]["tenants"]["L"]["apps"]["udp"]["packets"];
    assert_eq!(p["queued_at_end"], 20, "{p}");
    assert!(
        out.contains(&format!(
            "≥ sq: 20 of L/udp's packets still queued at the end ({} sent), counted at their \
             age then: the p90 packet delay is at least that",
            p["sent"]
        )),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(d);
}

/// Every file under `dir`, by its path relative to it, with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `weft sim --seeds`: a report per seed in OUT/seed-N/, each byte for byte what `--seed
/// N` writes; aggregate.json with every summary metric's mean, Student t interval, min
/// and max over the seeds; the table on stdout, a line per seed on stderr; the JSON with
/// `--json`. The same seeds give the same aggregate.
#[test]
fn sim_seeds_writes_a_report_per_seed_and_their_statistics() {
    let d = tmp("seeds");
    let args = [
        "sim",
        "examples/scenarios/hierarchy.yaml",
        "--nic",
        "mq,loom",
        "--duration",
        "3ms",
        "--out",
    ];
    let out = weft()
        .args(args)
        .arg(d.join("all"))
        .args(["--seeds", "1..3"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("seed 1 (1 of 3): ")
                .and(predicate::str::contains("seed 3 (3 of 3): "))
                .and(predicate::str::contains("aggregate.json")),
        )
        .get_output()
        .stdout
        .clone();
    let table = String::from_utf8(out).unwrap();
    assert!(
        table.starts_with("hierarchy  (3 seeds: 1..3; 0.003 s simulated each)\n"),
        "{table}"
    );
    for l in [
        "model    metric",
        "± 95% CI",
        "loom     jain_min",
        "mq       A p90 us",
    ] {
        assert!(table.contains(l), "{l}: {table}");
    }
    for seed in 1..=3 {
        let one = d.join(format!("one-{seed}"));
        weft()
            .args(args)
            .arg(&one)
            .args(["--seed", &seed.to_string(), "--quiet"])
            .assert()
            .success();
        let (a, b) = (files(&d.join(format!("all/seed-{seed}"))), files(&one));
        assert_eq!(
            a.iter().map(|f| &f.0).collect::<Vec<_>>(),
            b.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        for ((name, x), (_, y)) in a.iter().zip(&b) {
            assert!(x == y, "seed {seed}: {} differs", name.display());
        }
    }
    let summary = |seed: u64| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(d.join(format!("one-{seed}/summary.json"))).unwrap())
            .unwrap()
    };
    let agg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("all/aggregate.json")).unwrap()).unwrap();
    assert_eq!(agg["seeds"], serde_json::json!([1, 2, 3]));
    assert_eq!(agg["scenario"], "hierarchy");
    assert!(agg["statistics"]
        .as_str()
        .unwrap()
        .contains("t(0.975, n - 1)"));
    // A/kv's p90 on loom: the three values' mean, min, max, and the interval t(0.975, 2) s/√3.
    let xs: Vec<f64> = (1..=3)
        .map(|s| {
            summary(s)["nics"]["loom"]["tenants"]["A"]["apps"]["kv"]["latency_us"]["p90"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let st = &agg["nics"]["loom"]["tenants"]["A"]["apps"]["kv"]["latency_us"]["p90"];
    let f = |k: &str| st[k].as_f64().unwrap_or_else(|| panic!("{k}: {st}"));
    let mean = xs.iter().sum::<f64>() / 3.0;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1e-9);
    assert_eq!(st["n"], 3, "{st}");
    assert!(close(f("mean"), mean), "{st} {xs:?}");
    assert!(close(f("std"), sd), "{st} {xs:?}");
    assert!(
        close(f("ci95_half_width"), 4.302653 * sd / 3f64.sqrt()),
        "{st}"
    );
    assert!(
        close(f("ci95_low"), mean - 4.302653 * sd / 3f64.sqrt()),
        "{st}"
    );
    assert_eq!(f("min"), xs.iter().copied().fold(f64::INFINITY, f64::min));
    assert_eq!(f("max"), xs.iter().copied().fold(0.0, f64::max));
    // Every number of the summaries has its statistics: per model, tenant and application.
    for k in [
        "jain_min",
        "link_utilization",
        "throughput_bps",
        "doorbell_writes_per_s",
    ] {
        assert!(agg["nics"]["mq"][k]["mean"].is_number(), "{k}");
    }
    for k in ["mean_bps", "share", "rel_error"] {
        assert!(
            agg["nics"]["mq"]["tenants"]["B"][k]["ci95_high"].is_number(),
            "{k}"
        );
    }
    assert!(
        agg["nics"]["loom"]["tenants"]["A"]["apps"]["bulk"]["interdeparture_us"]["p99_abs_dev"]
            ["max"]
            .is_number()
    );
    assert_eq!(
        agg["nics"]["loom"]["tenants"]["A"]["apps"]["kv"]["kind"],
        "request-response"
    );

    // A list; --json prints aggregate.json; the same seeds, the same bytes.
    let out = weft()
        .args(args)
        .arg(d.join("list"))
        .args(["--seeds", "3,1,2", "--json", "--quiet"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([3, 1, 2]));
    assert_eq!(out, std::fs::read(d.join("list/aggregate.json")).unwrap());
    assert_eq!(
        json["nics"]["loom"]["tenants"]["A"]["apps"]["kv"]["latency_us"]["p90"]["mean"],
        st["mean"]
    );
    let _ = std::fs::remove_dir_all(d);
}

/// A `--seeds` run replaces an earlier one: seeds not run again lose their report (a user's
/// file there stays, and so does its directory), and a single report's files go. A
/// single-seed run replaces its own files only: the seeds' directories and aggregate.json
/// stay (a `seed-N/` may be a `--seed N` report the user put there).
#[test]
fn sim_seeds_replaces_an_earlier_run() {
    let d = tmp("seeds-replace");
    let run = |extra: &[&str]| {
        weft()
            .args(["sim", "examples/scenarios/hierarchy.yaml", "--nic", "loom"])
            .args(["--duration", "1ms", "--quiet", "--out"])
            .arg(&d)
            .args(extra)
            .assert()
            .success();
    };
    run(&[]);
    assert!(d.join("summary.json").exists());
    run(&["--seeds", "1..3"]);
    assert!(!d.join("summary.json").exists() && d.join("aggregate.json").exists());
    std::fs::write(d.join("seed-2/notes.txt"), "mine").unwrap();
    run(&["--seeds", "1"]);
    assert!(d.join("seed-1/summary.json").exists());
    assert!(!d.join("seed-3").exists(), "seed 3's report stayed");
    assert!(d.join("seed-2/notes.txt").exists() && !d.join("seed-2/summary.json").exists());
    let agg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("aggregate.json")).unwrap()).unwrap();
    let p90 = &agg["nics"]["loom"]["tenants"]["A"]["apps"]["kv"]["latency_us"]["p90"];
    assert_eq!(
        (&p90["n"], &p90["ci95_low"]),
        (&serde_json::json!(1), &serde_json::Value::Null)
    );
    run(&[]);
    assert!(d.join("summary.json").exists() && d.join("aggregate.json").exists());
    assert!(d.join("seed-1/summary.json").exists() && d.join("seed-2/notes.txt").exists());
    run(&["--seeds", "2"]);
    assert!(!d.join("summary.json").exists() && !d.join("seed-1").exists());
    assert!(d.join("seed-2/summary.json").exists() && d.join("seed-2/notes.txt").exists());
    let _ = std::fs::remove_dir_all(d);
}

/// A `--seeds` that names no seed, one twice, a backward range or too many, or that comes
/// with `--seed`, exits 2 saying what is wrong and what to write; nothing runs.
#[test]
fn bad_seeds_exit_2() {
    let d = tmp("seeds-bad");
    for (spec, says) in [
        (
            "5..1",
            "the range `5..1` is empty (5 > 1); write the smaller seed first, `1..5`",
        ),
        ("", "an empty item"),
        ("1,,2", "an empty item"),
        ("one", "`one` is not a seed"),
        ("1..x", "`x` is not a seed"),
        ("-3", "`-3` is not a seed"),
        ("1..3,2", "seed 2 is given twice"),
        ("0..1000", "more than 1000 seeds"),
        ("1..18446744073709551615", "more than 1000 seeds"),
    ] {
        weft()
            .args([
                "sim",
                "examples/scenarios/hierarchy.yaml",
                "--seeds",
                spec,
                "--out",
            ])
            .arg(&d)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(format!("--seeds `{spec}`: {says}"))
                    .and(predicate::str::contains("`1..10` (1 to 10, both included)")),
            );
    }
    assert!(!d.exists(), "nothing was written");
    weft()
        .args([
            "sim",
            "examples/scenarios/hierarchy.yaml",
            "--seed",
            "1",
            "--seeds",
            "1..2",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

/// The links (`href` and `src` values) of a page.
fn links(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\""] {
        for (i, _) in page.match_indices(attr) {
            let rest = &page[i + attr.len()..];
            out.push(rest[..rest.find('"').unwrap()].to_string());
        }
    }
    out
}

/// `weft demo --out DIR`: the top page holds the headline table, a row per scenario and
/// model with summary.json's figures as the terminal's table formats them (`≥ ` before a
/// lower bound), what to look for beside what the paper found, and links that all resolve
/// to files the run wrote; two runs write the same bytes.
#[test]
fn demo_top_page_has_the_headline_table_and_links_that_resolve() {
    let (a, b) = (tmp("demo-a"), tmp("demo-b"));
    for d in [&a, &b] {
        weft()
            .args(["demo", "--quiet", "--out"])
            .arg(d)
            .assert()
            .success();
    }
    assert_eq!(files(&a), files(&b), "two runs of weft demo differ");
    let page = std::fs::read_to_string(a.join("index.html")).unwrap();
    let number = weft_sim::report::number;
    for scenario in ["loom-fig9", "hierarchy"] {
        let sum: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(a.join(scenario).join("summary.json")).unwrap(),
        )
        .unwrap();
        let (t, app) = sum["headline_app"]
            .as_str()
            .unwrap()
            .split_once('/')
            .unwrap();
        let nics = sum["nics"].as_object().unwrap();
        assert_eq!(
            nics.keys().collect::<Vec<_>>(),
            ["sq", "mq", "qpf", "tonic", "loom"]
        );
        for (model, v) in nics {
            let lat = &v["tenants"][t]["apps"][app]["latency_us"];
            let mut p90 = number(lat["p90"].as_f64().unwrap(), 1);
            if lat["p90_at_least"].as_bool().unwrap() {
                p90 = format!("≥ {p90}");
            }
            let row = format!(
                "<th>{model}</th><td class=\"n\">{}</td><td class=\"n\">{p90}</td><td class=\"n\">{}</td></tr>",
                number(v["jain_min"].as_f64().unwrap(), 4),
                number(v["link_utilization"].as_f64().unwrap(), 3)
            );
            assert!(
                page.contains(&row),
                "{scenario} {model}: no {row} in {page}"
            );
        }
        assert!(
            page.contains(&format!("<h2 id=\"{scenario}\">{scenario}</h2>")),
            "{page}"
        );
    }
    assert!(
        page.contains("<h3>What to look for</h3>")
            && page.contains("<h3>What the paper found</h3><p>Loom (NSDI '19) Fig. 9/10"),
        "{page}"
    );
    let targets = links(&page);
    assert!(targets.len() > 20, "{targets:?}");
    for l in &targets {
        if let Some(anchor) = l.strip_prefix('#') {
            assert!(page.contains(&format!("id=\"{anchor}\"")), "{l}");
        } else {
            assert!(a.join(l).is_file(), "{l} does not resolve");
        }
    }
    for l in [
        "loom-fig9/index.html",
        "hierarchy/summary.json",
        "hierarchy/throughput-apps-qpf.svg",
        "loom-fig9/latency.svg",
    ] {
        assert!(targets.iter().any(|t| t == l), "no link to {l}");
    }
    for d in [a, b] {
        let _ = std::fs::remove_dir_all(d);
    }
}
