//! End-to-end tests of the `weft` binary: exit codes, summaries and JSON output.
//!
//! Commands run from the workspace root so paths read `examples/policies/...` as in the docs.

use std::fs;
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

/// `*.yaml` directly in `dir` (relative to the workspace root), as relative paths, sorted.
fn yaml_files(dir: &str) -> Vec<String> {
    let mut files: Vec<String> = fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("cannot read {dir}: {e}"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no policies in {dir}");
    files
}

/// `(rule, line)` from a file's `# expect: RULE line N` comment.
fn expectation(file: &str) -> (String, usize) {
    let text = fs::read_to_string(root().join(file)).expect("readable example");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# expect:"))
        .unwrap_or_else(|| panic!("{file}: no `# expect:` comment"));
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        [rule, "line", n] => (rule.to_string(), n.parse().expect("line number")),
        _ => panic!("{file}: malformed `# expect:{line}`"),
    }
}

#[test]
fn check_accepts_every_valid_example() {
    let files = yaml_files("examples/policies");
    let mut cmd = weft();
    cmd.args(["policy", "check"]).args(&files);
    let mut assert = cmd.assert().success();
    for f in &files {
        assert = assert.stdout(predicate::str::contains(format!("{f}: ok: ")));
    }
}

#[test]
fn check_rejects_every_invalid_example_with_its_rule_and_line() {
    for file in yaml_files("examples/policies/invalid") {
        let (rule, line) = expectation(&file);
        weft()
            .args(["policy", "check", &file])
            .assert()
            .code(2)
            .stdout(predicate::str::contains(format!("{file}: invalid: ")))
            .stdout(predicate::str::contains(format!("{rule} (")))
            .stdout(predicate::str::contains(format!("line {line})")));
        // The plain form names the rule too, one line per diagnostic.
        weft()
            .args(["policy", "check", "--plain", &file])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("error[{rule}]")));
    }
}

#[test]
fn check_of_valid_and_invalid_together_fails() {
    weft()
        .args([
            "policy",
            "check",
            "examples/policies/loom-fig1.yaml",
            "examples/policies/invalid/cycle.yaml",
        ])
        .assert()
        .code(2)
        .stdout(predicate::str::contains(
            "examples/policies/loom-fig1.yaml: ok: ",
        ))
        .stdout(predicate::str::contains(
            "examples/policies/invalid/cycle.yaml: invalid: cycle",
        ))
        .stderr(predicate::str::contains("1 of 2 policies invalid"));
}

#[test]
fn help_version_and_completions() {
    weft()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("policy"));
    weft()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::contains(env!("CARGO_PKG_VERSION")));
    weft()
        .args(["completions", "bash"])
        .assert()
        .success()
        .stdout(predicate::str::contains("weft"));
}

#[test]
fn classify_json_names_leaf_and_shaping_class() {
    let out = weft()
        .args([
            "policy",
            "classify",
            "examples/policies/loom-fig1.yaml",
            "--packet",
            "vm=1,dport=11211,dst=10.0.2.7",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).expect("utf-8 stdout");
    let line = text.lines().next().expect("one JSON line");
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(v["leaf"], "vm1/kvs", "{text}");
    let shaping: Vec<&str> = v["shaping"]
        .as_array()
        .expect("shaping list")
        .iter()
        .map(|s| s["name"].as_str().expect("shaping name"))
        .collect();
    assert_eq!(shaping, ["vm1-dst2"], "{text}");
}

#[test]
fn classify_rejects_unknown_packet_field() {
    weft()
        .args([
            "policy",
            "classify",
            "examples/policies/loom-fig1.yaml",
            "--packet",
            "colour=red",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("colour"));
}

/// Every `examples/traces/NAME.csv` with a `NAME.expected.csv` replays to exactly that.
#[test]
fn replay_examples_match_their_expected_departures() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("examples/traces")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".expected.csv") else {
            continue;
        };
        let out = std::env::temp_dir().join(format!("weft-replay-{stem}-{}", std::process::id()));
        weft()
            .args([
                "replay",
                "--quiet",
                "--policy",
                &format!("examples/policies/{stem}.yaml"),
            ])
            .args(["--trace", &format!("examples/traces/{stem}.csv"), "--out"])
            .arg(&out)
            .assert()
            .success();
        let got = std::fs::read_to_string(out.join("departures.csv")).unwrap();
        let want = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(
            got,
            want,
            "{stem}: departures differ from {}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 3, "expected example traces, found {checked}");
}

/// `examples/traces/NAME.csv` for every trace with a policy of the same name.
fn example_traces() -> Vec<String> {
    let mut stems: Vec<String> = std::fs::read_dir(root().join("examples/traces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter_map(|n| {
            let stem = n.strip_suffix(".csv")?;
            (!stem.ends_with(".expected")
                && root()
                    .join(format!("examples/policies/{stem}.yaml"))
                    .is_file())
            .then(|| stem.to_string())
        })
        .collect();
    stems.sort();
    stems
}

/// Replays `stem` with `args`; returns the output directory (the caller removes it).
fn replay_example(stem: &str, tag: &str, args: &[&str]) -> PathBuf {
    let out = std::env::temp_dir().join(format!("weft-{tag}-{stem}-{}", std::process::id()));
    weft()
        .args(["replay", "--quiet", "--policy"])
        .arg(format!("examples/policies/{stem}.yaml"))
        .args(["--trace", &format!("examples/traces/{stem}.csv"), "--out"])
        .arg(&out)
        .args(args)
        .assert()
        .success();
    out
}

/// The fast and the reference engine write byte-identical departures and drops on every
/// example trace, and summaries that differ only in the engine's name.
#[test]
fn replay_engines_agree_byte_for_byte_on_every_example() {
    let stems = example_traces();
    assert!(stems.len() >= 3, "{stems:?}");
    for stem in &stems {
        let fast = replay_example(stem, "fast", &["--engine", "fast"]);
        let refr = replay_example(stem, "ref", &["--engine", "reference"]);
        for f in ["departures.csv", "drops.csv"] {
            let a = fs::read(fast.join(f)).unwrap();
            let b = fs::read(refr.join(f)).unwrap();
            assert!(a.len() > 20 || f == "drops.csv", "{stem}: {f} is empty");
            assert!(a == b, "{stem}: {f} differs between the engines");
        }
        let mut sa: serde_json::Value =
            serde_json::from_slice(&fs::read(fast.join("summary.json")).unwrap()).unwrap();
        let mut sb: serde_json::Value =
            serde_json::from_slice(&fs::read(refr.join("summary.json")).unwrap()).unwrap();
        assert_eq!(sa["engine"], "fast");
        assert_eq!(sb["engine"], "reference");
        sa["engine"] = serde_json::Value::Null;
        sb["engine"] = serde_json::Value::Null;
        assert_eq!(sa, sb, "{stem}: summaries differ");
        let _ = fs::remove_dir_all(&fast);
        let _ = fs::remove_dir_all(&refr);
    }
}

#[test]
fn replay_progress_on_request_when_stderr_is_not_a_terminal() {
    let out = std::env::temp_dir().join(format!("weft-progress-{}", std::process::id()));
    weft()
        .args([
            "replay",
            "--progress",
            "--policy",
            "examples/policies/senic-fig4.yaml",
        ])
        .args(["--trace", "examples/traces/senic-fig4.csv", "--out"])
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains("replay: 16 rows read"))
        .stderr(predicate::str::contains("packets/s"));
    // Without --progress (and not on a terminal): silent.
    weft()
        .args(["replay", "--policy", "examples/policies/senic-fig4.yaml"])
        .args(["--trace", "examples/traces/senic-fig4.csv", "--out"])
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains("rows read").not());
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn replay_reports_bad_rows_with_their_line() {
    let dir = std::env::temp_dir().join(format!("weft-replay-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.csv");
    for (rows, message) in [
        (
            "arrive_ps,bytes,tag\n0,100,1\n5,abc,1\n",
            "t.csv:3: `bytes` = `abc`",
        ),
        (
            "arrive_ps,bytes,colour\n0,100,red\n",
            "unknown column `colour`",
        ),
        ("arrive_ps,bytes,tag\n10,100,1\n5,100,1\n", "sort the trace"),
    ] {
        std::fs::write(&trace, rows).unwrap();
        weft()
            .args([
                "replay",
                "--quiet",
                "--policy",
                "examples/policies/senic-fig4.yaml",
                "--trace",
            ])
            .arg(&trace)
            .arg("--out")
            .arg(dir.join("out"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(message));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_quick_reports_ratios_against_the_reference() {
    let out = weft()
        .args(["bench", "--quick", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    for r in rows {
        assert!(r["packets_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["reference_packets_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["ratio_vs_reference"].is_number());
        assert!(r["bytes_per_idle_flow"].is_number());
    }
}
