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
            predicate::str::contains("unknown field `durashun`")
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
        weft()
            .arg("sim")
            .arg(&f)
            .args(["--quiet", "--out"])
            .arg(d.join("out"))
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
    weft()
        .args(["sim", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "weft sim examples/scenarios/loom-fig9.yaml",
        ));
    weft()
        .args(["demo", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("weft-report"));
}
