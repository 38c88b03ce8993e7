//! End-to-end tests of the `weft` binary: exit codes, summaries and JSON output.
//!
//! Commands run from the workspace root so paths read `examples/policies/...` as in the docs.

use std::collections::BTreeMap;
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

/// `weft replay --quiet --policy POLICY --trace TRACE --out OUT`.
fn replay_quiet(policy: &str, trace: &Path, out: &Path) -> Command {
    let mut cmd = weft();
    cmd.args(["replay", "--quiet", "--policy", policy])
        .arg("--trace")
        .arg(trace)
        .arg("--out")
        .arg(out);
    cmd
}

/// An empty scratch directory `weft-{tag}-{pid}` (tests run in parallel: a tag per test).
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
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
    // Lossy: `unreadable-file.yaml` is not UTF-8 on purpose (its comments are ASCII).
    let text = String::from_utf8_lossy(&fs::read(root().join(file)).expect("readable example"))
        .into_owned();
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
    // The hint comes along on the same line.
    weft()
        .args([
            "policy",
            "check",
            "--plain",
            "examples/policies/invalid/unknown-key.yaml",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown-key.yaml:19:5: error[unknown-key]: unknown key `wieght` in a node; help: did you mean `weight`?\n",
        ));
}

/// `--json`: one object per file on stdout, in the order given, each invalid example's
/// expected rule at its expected line among its diagnostics (with a location and the hint
/// where the rule has one), the valid ones with their summary; nothing on stderr; exit 2.
#[test]
fn check_json_reports_every_file_and_diagnostic() {
    let invalid = yaml_files("examples/policies/invalid");
    let valid = yaml_files("examples/policies");
    let out = weft()
        .args(["policy", "check", "--json"])
        .args(&invalid)
        .args(&valid)
        .assert()
        .code(2)
        .stderr(predicate::str::is_empty())
        .get_output()
        .stdout
        .clone();
    let (rows, _) = json_lines(out);
    assert_eq!(rows.len(), invalid.len() + valid.len());
    for (row, file) in rows.iter().zip(&invalid) {
        let (rule, line) = expectation(file);
        assert_eq!(row["file"], file.as_str());
        assert_eq!(row["valid"], false, "{file}");
        let d = row["diagnostics"].as_array().unwrap();
        assert!(
            d.iter().any(|d| d["rule"] == rule.as_str()
                && d["at"]["line"] == line
                && d["at"]["column"].as_u64().is_some_and(|c| c >= 1)
                && d["message"].as_str().is_some_and(|m| !m.is_empty())),
            "{file}: no {rule} at line {line} in {d:?}"
        );
    }
    for (row, file) in rows[invalid.len()..].iter().zip(&valid) {
        assert_eq!(row["file"], file.as_str());
        assert_eq!(row["valid"], true, "{file}: {row}");
        assert!(row["summary"].as_str().unwrap().contains("nodes"), "{row}");
        assert_eq!(row["diagnostics"], serde_json::json!([]));
    }
    // The secondary labels and the hint come along: a duplicate name points at the first,
    // a misspelt key gets its correction.
    let first = |name: &str| {
        rows[invalid.iter().position(|f| f.ends_with(name)).unwrap()]["diagnostics"][0].clone()
    };
    let dup = first("duplicate-name.yaml");
    assert_eq!(dup["node"], "vm1");
    assert_eq!(dup["labels"][0]["text"], "first defined here", "{dup}");
    assert_eq!(dup["labels"][0]["at"]["line"], 11, "{dup}");
    assert_eq!(first("unknown-key.yaml")["help"], "did you mean `weight`?");
}

/// A `burst` under two frames of the link is a warning, not an error: `weft policy check`
/// says `ok` and exits 0 with the warning on stderr (file, line, column, rule, hint), in each
/// form (annotated, `--plain`, and `--json` under `warnings`, nothing on stderr); the
/// commands that load a policy print it too and go on. The default burst warns of nothing.
#[test]
fn a_small_burst_is_a_warning_and_exit_0() {
    let dir = scratch("small-burst");
    let policy = |burst: &str| {
        format!(
            "weft: 1\nnodes:\n  - {{name: root, type: wfq}}\n  \
             - {{name: cap, type: shape, parent: root, rate: 1gbit{burst}}}\n  \
             - {{name: a, type: leaf, parent: cap}}\n"
        )
    };
    let small = dir.join("small.yaml");
    fs::write(&small, policy(", burst: 64b")).unwrap();
    let file = small.display().to_string();
    // `64b` on line 4.
    let at = format!("{file}:4:64:");
    let help = "a bucket under two frames loses rate when the link delays the class's packet \
                behind another frame; use at least 3028b (2 × mtu) or omit burst for the default";
    weft()
        .args(["policy", "check"])
        .arg(&small)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(format!("{file}: ok: ")))
        .stderr(predicate::str::contains(&at))
        .stderr(predicate::str::contains("weft::policy::small-burst"))
        .stderr(predicate::str::contains("error").not());
    weft()
        .args(["policy", "check", "--plain"])
        .arg(&small)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(format!("{file}: ok: ")))
        .stderr(format!(
            "{at} warning[small-burst]: the bucket of `cap` holds 64 bytes, less than two \
             frames of the link (2 × mtu 1514 = 3028 bytes) (node `cap`); help: {help}\n"
        ));
    let out = weft()
        .args(["policy", "check", "--json"])
        .arg(&small)
        .assert()
        .code(0)
        .stderr(predicate::str::is_empty())
        .get_output()
        .stdout
        .clone();
    let (rows, _) = json_lines(out);
    assert_eq!(rows[0]["valid"], true, "{}", rows[0]);
    assert_eq!(rows[0]["diagnostics"], serde_json::json!([]));
    let w = &rows[0]["warnings"];
    assert_eq!(w.as_array().map(Vec::len), Some(1), "{w}");
    assert_eq!(w[0]["rule"], "small-burst");
    assert_eq!(w[0]["node"], "cap");
    assert_eq!(w[0]["at"]["line"], 4);
    assert_eq!(w[0]["at"]["column"], 64);
    assert_eq!(w[0]["help"], help);
    // `policy show` shows the burst as written, and warns.
    weft()
        .args(["policy", "show"])
        .arg(&small)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("cap  shape 1gbit burst 64b"))
        .stderr(predicate::str::contains(&at))
        .stderr(predicate::str::contains("small-burst"));
    // A replay warns and runs.
    let trace = dir.join("t.csv");
    fs::write(&trace, "arrive_ps,bytes\n0,100\n1000000,100\n").unwrap();
    replay_quiet(&file, &trace, &dir.join("out"))
        .assert()
        .code(0)
        .stderr(predicate::str::contains(&at))
        .stderr(predicate::str::contains("small-burst"));
    assert!(dir.join("out/summary.json").is_file());
    // Without `burst`: two frames of the link, and no warning.
    let default = dir.join("default.yaml");
    fs::write(&default, policy("")).unwrap();
    weft()
        .args(["policy", "show"])
        .arg(&default)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("cap  shape 1gbit burst 3028b"))
        .stderr(predicate::str::is_empty());
    let out = weft()
        .args(["policy", "check", "--json"])
        .arg(&default)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let (rows, _) = json_lines(out);
    assert_eq!(rows[0]["warnings"], serde_json::json!([]));
    let _ = fs::remove_dir_all(&dir);
}

/// A simulator scenario given where a policy goes: its missing version says what it is and
/// which command runs it; a file that is neither keeps the plain advice.
#[test]
fn check_of_a_scenario_points_to_weft_sim() {
    weft()
        .args(["policy", "check", "examples/scenarios/loom-fig9.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing `weft: 1`"))
        .stderr(predicate::str::contains("looks like a simulator scenario"))
        .stderr(predicate::str::contains("`weft sim FILE`"));
    let dir = std::env::temp_dir().join(format!("weft-noversion-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let f = dir.join("p.yaml");
    fs::write(&f, "nodes:\n  - {name: only, type: leaf}\n").unwrap();
    weft()
        .args(["policy", "check"])
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("start the file with `weft: 1`"))
        .stderr(predicate::str::contains("simulator scenario").not());
    let _ = fs::remove_dir_all(&dir);
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

/// Every `examples/traces/NAME.csv` (or capture) with a `NAME.expected.csv` replays to
/// exactly that (with the arguments of `NAME.args`, if any).
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
            .arg("--trace")
            .arg(example_trace(stem))
            .arg("--out")
            .arg(&out)
            .args(example_args(stem))
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

/// The ends of the examples' trace files: CSV traces and captures.
const TRACE_KINDS: [&str; 3] = [".csv", ".pcap", ".pcapng"];

/// An example's trace: `examples/traces/NAME.csv`, or a capture, `NAME.pcap` or
/// `NAME.pcapng`.
fn example_trace(stem: &str) -> String {
    TRACE_KINDS
        .iter()
        .map(|k| format!("examples/traces/{stem}{k}"))
        .find(|f| root().join(f).is_file())
        .unwrap_or_else(|| panic!("no trace for the example {stem}"))
}

/// The extra arguments an example's replay takes: `examples/traces/NAME.args`, one a line
/// (a capture's `--tenant` pairs), or none.
fn example_args(stem: &str) -> Vec<String> {
    fs::read_to_string(root().join(format!("examples/traces/{stem}.args")))
        .map(|t| t.lines().map(String::from).collect())
        .unwrap_or_default()
}

/// `NAME` of every example trace (`examples/traces/NAME.csv`, `.pcap` or `.pcapng`) with a
/// policy of the same name.
fn example_traces() -> Vec<String> {
    let mut stems: Vec<String> = std::fs::read_dir(root().join("examples/traces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter_map(|n| {
            let stem = TRACE_KINDS.iter().find_map(|k| n.strip_suffix(k))?;
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
    replay_example_printing(stem, tag, args).0
}

/// [`replay_example`], also returning what the replay printed (its table).
fn replay_example_printing(stem: &str, tag: &str, args: &[&str]) -> (PathBuf, String) {
    let out = std::env::temp_dir().join(format!("weft-{tag}-{stem}-{}", std::process::id()));
    let printed = weft()
        .args(["replay", "--policy"])
        .arg(format!("examples/policies/{stem}.yaml"))
        .args(["--trace", &example_trace(stem), "--out"])
        .arg(&out)
        .args(example_args(stem))
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    (out, String::from_utf8(printed).unwrap())
}

/// The fast and the reference engine write byte-identical departures, drops and timelines
/// on every example trace, and summaries that differ only in the engine's name.
#[test]
fn replay_engines_agree_byte_for_byte_on_every_example() {
    let stems = example_traces();
    assert!(stems.len() >= 3, "{stems:?}");
    for stem in &stems {
        let fast = replay_example(stem, "fast", &["--engine", "fast"]);
        let refr = replay_example(stem, "ref", &["--engine", "reference"]);
        for f in [
            "departures.csv",
            "drops.csv",
            "timeseries.csv",
            "throughput.svg",
            "delay.svg",
        ] {
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

/// `--engine heads` replays the example without shaping to the same departures as the fast
/// engine, and refuses a policy it cannot run with exit 2, naming the node and its line,
/// keeping nothing.
#[test]
fn replay_head_engine_agrees_or_refuses_naming_the_node() {
    let fast = replay_example("iperf3-udp", "heads-fast", &["--engine", "fast"]);
    let heads = replay_example("iperf3-udp", "heads", &["--engine", "heads"]);
    let a = fs::read(fast.join("departures.csv")).unwrap();
    let b = fs::read(heads.join("departures.csv")).unwrap();
    assert!(a.len() > 1000 && a == b, "iperf3-udp: departures differ");
    let summary: serde_json::Value =
        serde_json::from_slice(&fs::read(heads.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["engine"], "heads");
    let _ = fs::remove_dir_all(&fast);
    let _ = fs::remove_dir_all(&heads);
    let out = std::env::temp_dir().join(format!("weft-heads-refused-{}", std::process::id()));
    let err = weft()
        .args([
            "replay",
            "--policy",
            "examples/policies/senic-fig4.yaml",
            "--trace",
        ])
        .arg(example_trace("senic-fig4"))
        .arg("--out")
        .arg(&out)
        .args(["--engine", "heads"])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("node `nic`")
            && err.contains("senic-fig4.yaml:")
            && err.contains("--engine fast"),
        "{err}"
    );
    assert!(!out.exists(), "a refused replay kept {}", out.display());
}

/// Replays `stem` with `args` on both engines and demands the same departures; returns the
/// two output directories (the caller removes them) and the departures.
fn replay_with_both_engines(stem: &str, tag: &str, args: &[&str]) -> (PathBuf, PathBuf, String) {
    let fast = replay_example(
        stem,
        &format!("{tag}-fast"),
        &[&["--engine", "fast"], args].concat(),
    );
    let refr = replay_example(
        stem,
        &format!("{tag}-ref"),
        &[&["--engine", "reference"], args].concat(),
    );
    let a = fs::read_to_string(fast.join("departures.csv")).unwrap();
    let b = fs::read_to_string(refr.join("departures.csv")).unwrap();
    assert_eq!(a, b, "{stem}: departures differ between the engines");
    (fast, refr, a)
}

/// With Loom's "currently limited" fast path both engines still agree, and every packet of a
/// shaped example is still sent exactly once.
#[test]
fn replay_limited_fast_path_engines_agree() {
    for stem in ["loom-fig8", "loom-fig11"] {
        let (fast, refr, a) = replay_with_both_engines(stem, "fp", &["--limited-fast-path"]);
        let rows = fs::read_to_string(root().join(format!("examples/traces/{stem}.csv"))).unwrap();
        let packets = rows
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .count()
            - 1;
        assert_eq!(
            a.lines().count() - 1,
            packets,
            "{stem}: every packet sent once"
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&fs::read(fast.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["limited_fast_path"], true);
        let _ = fs::remove_dir_all(&fast);
        let _ = fs::remove_dir_all(&refr);
    }
}

/// A link that takes bursts (`--burst`): both engines still agree byte for byte, every
/// packet is sent once, WFQ 1:2:4 keeps its shares, and a burst of 0 is a usage error.
#[test]
fn replay_in_bursts() {
    for stem in ["wfq-1-2-4", "loom-fig11"] {
        let (fast, refr, a) = replay_with_both_engines(stem, "burst", &["--burst", "16"]);
        let summary: serde_json::Value =
            serde_json::from_slice(&fs::read(fast.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["burst"], 16);
        assert_eq!(
            summary["sent"], summary["packets"],
            "{stem}: every packet sent"
        );
        if stem == "wfq-1-2-4" {
            // A burst is chosen at one instant: packets arriving while it is on the wire
            // wait for the next, so the order differs from one frame at a time.
            let single = replay_example(stem, "burst-1", &[]);
            let c = fs::read_to_string(single.join("departures.csv")).unwrap();
            let _ = fs::remove_dir_all(&single);
            assert_eq!(c.lines().count(), a.lines().count());
            assert_ne!(c, a, "bursts of 16 sent exactly as one at a time");
            let g = wire_gbps_by_leaf(&fast, 0, 1_000_000_000);
            assert!((g["b"] / g["a"] - 2.0).abs() < 0.05, "{g:?}");
            assert!((g["c"] / g["a"] - 4.0).abs() < 0.1, "{g:?}");
        }
        let _ = fs::remove_dir_all(&fast);
        let _ = fs::remove_dir_all(&refr);
    }
    weft()
        .args(["replay", "--policy", "examples/policies/wfq-1-2-4.yaml"])
        .args(["--trace", "examples/traces/wfq-1-2-4.csv", "--burst", "0"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--burst"));
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
        (
            "arrive_ps,bytes,tag,bytes\n0,100,1,200\n",
            "t.csv:1: column `bytes` appears twice",
        ),
        ("arrive_ps,bytes,tag\n10,100,1\n5,100,1\n", "sort the trace"),
        // An empty time is refused, not read as 0 (which the order check then misreported).
        (
            "arrive_ps,bytes,tag\n10,100,1\n,100,1\n",
            "t.csv:3: `arrive_ps` is empty",
        ),
        ("arrive_ps,bytes,tag\n10,,1\n", "t.csv:2: `bytes` is empty"),
        // Past 2^63 ps: no room left in the 64-bit clock for the packet to leave.
        (
            "arrive_ps,bytes,tag\n0,100,1\n9223372036854775809,100,1\n",
            "t.csv:3: `arrive_ps` = 9223372036854775809 is past the last arrival",
        ),
        // Field counts and encodings, in the trace's terms (not the CSV reader's record
        // number and byte offset).
        (
            "arrive_ps,bytes,tag\n0,100,1\n5,100\n",
            "t.csv:3: this row has 2 fields, the header 3",
        ),
        (
            "arrive_ps,bytes,tag\n0,100,1,7\n",
            "t.csv:2: this row has 4 fields, the header 3",
        ),
        (
            "arrive_ps,bytes,tag\n0,100,1\n5,100,~\n",
            "t.csv:3: not UTF-8 (field 3, byte 0 of it)",
        ),
        // Past 2^64 − 1: past the last arrival as well, said so.
        (
            "arrive_ps,bytes,tag\n0,100,1\n99999999999999999999,100,1\n",
            "t.csv:3: `arrive_ps` = 99999999999999999999 is past the last arrival",
        ),
        // A control character is shown escaped (a `^` stands for a NUL byte).
        ("arrive_ps,bytes,tag\n0,1^00,1\n", "`bytes` = `1\\u{0}00`"),
    ] {
        // A `~` stands for the byte 0xff, which is not UTF-8, and `^` for a NUL.
        let bytes: Vec<u8> = rows
            .bytes()
            .map(|b| match b {
                b'~' => 0xff,
                b'^' => 0,
                b => b,
            })
            .collect();
        std::fs::write(&trace, bytes).unwrap();
        replay_quiet(
            "examples/policies/senic-fig4.yaml",
            &trace,
            &dir.join("out"),
        )
        .assert()
        .code(2)
        .stderr(predicate::str::contains(message));
    }
    // Files that are not a trace as written: a compressed one (it read as "not UTF-8"), and
    // a capture cut short inside its header (it printed the parser's `Incomplete(..)`).
    for (bytes, message) in [
        (
            &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0][..],
            "a gzip-compressed file",
        ),
        (
            &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0][..],
            "ends inside its capture header",
        ),
    ] {
        std::fs::write(&trace, bytes).unwrap();
        replay_quiet(
            "examples/policies/senic-fig4.yaml",
            &trace,
            &dir.join("out"),
        )
        .assert()
        .code(2)
        .stderr(predicate::str::contains(message));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `weft ARGS`, which must succeed; returns its stdout's JSON lines, and the text itself
/// for assertion messages.
fn json_rows(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let out = weft().args(args).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    json_lines(out.stdout)
}

/// `stdout` as one JSON value per line, and as text for assertion messages.
fn json_lines(stdout: Vec<u8>) -> (Vec<serde_json::Value>, String) {
    let text = String::from_utf8(stdout).unwrap();
    let rows = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    (rows, text)
}

/// `weft bench --json`'s rows, and its last line, the targets.
fn bench_json(args: &[&str]) -> (Vec<serde_json::Value>, serde_json::Value, String) {
    let (mut rows, text) = json_rows(args);
    let targets = rows.pop().expect("a targets line");
    assert!(targets["targets"].is_array(), "last line: {targets}");
    (rows, targets, text)
}

#[test]
fn bench_quick_reports_ratios_against_the_reference() {
    let (rows, targets, text) = bench_json(&["bench", "--quick", "--json", "--rounds", "2"]);
    assert_eq!(rows.len(), 3, "{text}");
    // The targets the table prints under it, with their verdicts.
    assert!(
        targets["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(
                |t| t["target"].as_str().unwrap().contains("5x the reference")
                    && t["met"].is_boolean()
            ),
        "{targets}"
    );
    for r in rows {
        assert_eq!(r["rounds"], 2, "{r}");
        let flows = r["flows"].as_u64().unwrap();
        assert!(
            r["scenario"].as_str().unwrap().contains(&flows.to_string()) || flows == 128 * 64,
            "flows {flows}: {r}"
        );
        assert!(r["packets_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["packets_per_s_best"].as_f64().unwrap() >= r["packets_per_s"].as_f64().unwrap());
        assert!(r["reference_packets_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["ratio_vs_reference"].is_number());
        assert!(
            r["reference_per_flow_queues_packets_per_s"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        let pf = r["per_flow_queues_packets_per_s"].as_f64().unwrap()
            / r["reference_per_flow_queues_packets_per_s"]
                .as_f64()
                .unwrap();
        let pf_ratio = r["per_flow_queues_ratio_vs_reference"].as_f64().unwrap();
        assert!((pf_ratio - pf).abs() < 0.01, "{r}");
        for mode in [
            "batch16_packets_per_s",
            "per_flow_queues_packets_per_s",
            "per_flow_batch16_packets_per_s",
        ] {
            assert!(r[mode].as_f64().unwrap() > 0.0, "{mode}: {r}");
        }
        assert!(r["bytes_per_idle_flow"].is_number());
        assert!(r["engine_bytes_per_senic_class"].as_f64().unwrap() > 0.0);
        // The tree stays backlogged: no run drains it (packets that miss every leaf, or
        // are dropped, would shrink the backlog by one each).
        let (target, kept) = (
            r["backlog_packets"].as_u64().unwrap(),
            r["backlog_at_end_min"].as_u64().unwrap(),
        );
        assert!(
            kept >= target / 2,
            "backlog fell to {kept} of {target}: {r}"
        );
    }
}

#[test]
fn bench_runs_one_scenario_at_the_backlog_asked_for() {
    let (rows, _, text) = bench_json(&[
        "bench",
        "--quick",
        "--json",
        "--rounds",
        "1",
        "--only",
        "senic",
        "--backlog",
        "2000",
    ]);
    assert_eq!(rows.len(), 1, "{text}");
    let r = &rows[0];
    assert!(r["scenario"].as_str().unwrap().contains("senic"), "{r}");
    assert_eq!(r["backlog_packets"], 2000, "{r}");
    assert!(r["backlog_at_end_min"].as_u64().unwrap() >= 1000, "{r}");
    assert!(r["ratio_vs_reference"].as_f64().unwrap() > 0.0, "{r}");
    // A name that matches nothing is a usage error that lists the names.
    weft()
        .args(["bench", "--quick", "--only", "fig9"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--only `fig9`"))
        .stderr(predicate::str::contains("senic flat, 1000 classes"));
}

/// `weft bench rte-sched`: one JSON object with the harness's fields, the harness's stream
/// (its `seq_checksum` at 64 pipes, seed 0), a departure log of 8 bytes a departure, and
/// exit 2 for a malformed count or a drain without a log.
#[test]
fn bench_rte_sched_replays_the_harness_workload() {
    let dir = scratch("bench-rte-sched");
    let log = dir.join("d.bin");
    let out = weft()
        .args(["bench", "rte-sched", "--pipes", "64", "--arrivals", "pipe"])
        .args([
            "--profile",
            "shape",
            "--packets",
            "20k",
            "--warmup",
            "1k",
            "--json",
            "--log",
        ])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["bench"], "weft", "{r}");
    assert_eq!(r["seq_checksum"], 516_595, "{r}");
    assert_eq!(r["backlog_at_end"], 4096, "{r}");
    assert!(r["cpu_mpps"].as_f64().unwrap() > 0.0, "{r}");
    let packets = r["packets"].as_u64().unwrap();
    assert!((20_000..20_032).contains(&packets), "{r}");
    assert_eq!(fs::metadata(&log).unwrap().len(), 8 * packets);
    for bad in [["--packets", "3g"], ["--drain", "4"]] {
        weft()
            .args(["bench", "rte-sched", "--pipes", "4"])
            .args(bad)
            .assert()
            .code(2);
    }
    // The other scenarios' flags do not mix with a workload.
    weft()
        .args(["bench", "--quick", "rte-sched"])
        .assert()
        .code(2);
    fs::remove_dir_all(&dir).unwrap();
}

/// Bytes per leaf among the departures of `dir/departures.csv` starting in [from, to), as
/// Gbit/s over that window.
fn gbps_by_leaf(dir: &Path, from_ps: u64, to_ps: u64) -> std::collections::BTreeMap<String, f64> {
    gbps_by_leaf_counting(dir, from_ps, to_ps, 0)
}

/// The per-frame overhead of the example policies' links (`link.overhead`, 20 bytes by
/// default), which shaping classes and fair shares count with each frame.
const LINK_OVERHEAD: u64 = 20;

/// [`gbps_by_leaf`] in wire bytes (each frame plus [`LINK_OVERHEAD`]): the bytes that fair
/// shares and shaping classes count, so shares of mixed packet sizes read exactly.
fn wire_gbps_by_leaf(
    dir: &Path,
    from_ps: u64,
    to_ps: u64,
) -> std::collections::BTreeMap<String, f64> {
    gbps_by_leaf_counting(dir, from_ps, to_ps, LINK_OVERHEAD)
}

/// [`gbps_by_leaf`], each departure counting its bytes plus `overhead`.
fn gbps_by_leaf_counting(
    dir: &Path,
    from_ps: u64,
    to_ps: u64,
    overhead: u64,
) -> std::collections::BTreeMap<String, f64> {
    let text = fs::read_to_string(dir.join("departures.csv")).unwrap();
    let mut bytes = std::collections::BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let t: u64 = f[0].parse().unwrap();
        if (from_ps..to_ps).contains(&t) {
            *bytes.entry(f[2].to_string()).or_insert(0u64) +=
                f[4].parse::<u64>().unwrap() + overhead;
        }
    }
    let secs = (to_ps - from_ps) as f64 / 1e12;
    bytes
        .into_iter()
        .map(|(l, b)| (l, b as f64 * 8.0 / secs / 1e9))
        .collect()
}

/// WFQ 1:2:4 (`examples/traces/wfq-1-2-4.csv`): all three classes backlogged for the first
/// millisecond share the link's wire bytes (frame plus the link's 20 bytes of overhead)
/// 1:2:4, whatever their packet sizes.
#[test]
fn replay_wfq_1_2_4_shares() {
    let out = replay_example("wfq-1-2-4", "shares", &[]);
    let g = wire_gbps_by_leaf(&out, 0, 1_000_000_000);
    let _ = fs::remove_dir_all(&out);
    let (a, b, c) = (g["a"], g["b"], g["c"]);
    assert!((b / a - 2.0).abs() < 0.02, "b/a = {} ({g:?})", b / a);
    assert!((c / a - 4.0).abs() < 0.04, "c/a = {} ({g:?})", c / a);
    // Work conservation: the link (10 Gbit/s of wire bytes) is full.
    assert!(a + b + c > 9.95, "{g:?}");
}

/// Per series, its windows' `(start_ps, bytes)` in order.
type WindowsBySeries = BTreeMap<String, Vec<(u64, u64)>>;

/// `timeseries.csv`: per (window, series) bytes; returns the windows' width, per series its
/// windows' `(start_ps, bytes)` in order, and the last window's width (up to the last
/// frame's end).
fn timeseries(out: &Path) -> (u64, WindowsBySeries, u64) {
    let text = fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("window_start_ps,window_ps,series,bytes,mean_bps,departures,mean_delay_ps")
    );
    let (mut width, mut last_width) = (0, 0);
    let mut series = WindowsBySeries::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        last_width = f[1].parse().unwrap();
        if width == 0 {
            width = last_width;
        }
        series
            .entry(f[2].to_string())
            .or_default()
            .push((f[0].parse().unwrap(), f[3].parse().unwrap()));
    }
    (width, series, last_width)
}

/// The replay's timeline (`timeseries.csv`, `throughput.svg`, `delay.svg`): every leaf's
/// bytes add up to its summary, windows never read more than the link carries, and the
/// windows of the first millisecond show the 1:2:4 shares.
#[test]
fn replay_timeline_adds_up_and_shows_the_shares() {
    let out = replay_example("wfq-1-2-4", "timeline", &[]);
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    let (width, series, last_width) = timeseries(&out);
    let svg = fs::read_to_string(out.join("throughput.svg")).unwrap();
    let delay_svg = fs::read_to_string(out.join("delay.svg")).unwrap();
    let _ = fs::remove_dir_all(&out);
    assert_eq!(s["timeline"]["series"], "leaves", "{s:#}");
    assert_eq!(s["timeline"]["window_ps"], width);
    let windows = s["timeline"]["windows"].as_u64().unwrap();
    assert!((1..=512).contains(&windows), "{windows} windows");
    assert_eq!(series.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    for (leaf, w) in &series {
        assert_eq!(w.len() as u64, windows, "{leaf}");
        let total: u64 = w.iter().map(|&(_, b)| b).sum();
        assert_eq!(total, s["leaves"][leaf]["bytes"], "{leaf}");
    }
    // 10 Gbit/s: no window holds more than the link carried in it.
    assert!(last_width <= width, "{last_width} > {width}");
    for i in 0..windows as usize {
        let all: u64 = series.values().map(|w| w[i].1).sum();
        let width = if i + 1 == windows as usize {
            last_width
        } else {
            width
        };
        assert!(
            all as u128 * 8 * 1_000_000_000_000 <= 10_000_000_000u128 * width as u128,
            "window {i}: {all} bytes in {width} ps"
        );
    }
    // Shares over the windows wholly inside the first millisecond.
    let first_ms = |leaf: &str| -> f64 {
        series[leaf]
            .iter()
            .filter(|&&(t, _)| t + width <= 1_000_000_000)
            .map(|&(_, b)| b as f64)
            .sum()
    };
    let (a, b, c) = (first_ms("a"), first_ms("b"), first_ms("c"));
    assert!((b / a - 2.0).abs() < 0.05, "b/a = {}", b / a);
    assert!((c / a - 4.0).abs() < 0.1, "c/a = {}", c / a);
    for chart in [&svg, &delay_svg] {
        assert!(chart.starts_with("<svg"), "{chart}");
        assert_eq!(chart.matches("<path").count(), 3, "{chart}");
        for leaf in ["a", "b", "c"] {
            assert!(chart.contains(&format!(">{leaf}</text>")), "{chart}");
        }
    }
}

/// `timeseries.csv`'s rate per window, over every series: `(window_start_ps, window_ps,
/// bit/s)`, in order.
fn window_rates(out: &Path) -> Vec<(u64, u64, u64)> {
    let text = fs::read_to_string(out.join("timeseries.csv")).unwrap();
    let mut rates: Vec<(u64, u64, u64)> = Vec::new();
    for l in text.lines().skip(1) {
        let f: Vec<u64> = l
            .split(',')
            .enumerate()
            .filter(|&(i, _)| [0, 1, 4].contains(&i))
            .map(|(_, v)| v.parse().unwrap())
            .collect();
        match rates.last_mut() {
            Some(r) if r.0 == f[0] => r.2 += f[2],
            _ => rates.push((f[0], f[1], f[2])),
        }
    }
    rates
}

/// No window of `timeseries.csv` reads more than the link's rate, however its whole bytes
/// round. Without per-frame overhead a busy 10 Gbit/s link carries a fraction of a byte per
/// window (1.28 B in the 2^10 ps windows of a two-frame trace, 40.96 B in loom-fig8's 2^15
/// ps), and the windows read 2 B (15.6 Gbit/s) and 41 B (0.1 % over) when rates came from
/// whole bytes; so did a backlogged trace of 1500-byte frames (2,622 B for 2,621.44). The
/// busy windows still read the link's rate, to within 3 bit/s a series (each series' rate
/// and each part of a frame round down: see `timeline::tests`).
#[test]
fn replay_timeline_never_reads_over_the_link_rate() {
    const LINK_BPS: u64 = 10_000_000_000;
    let dir = scratch("link-rate");
    let policy = dir.join("p.yaml");
    fs::write(
        &policy,
        "weft: 1\nlink: {rate: 10gbit, overhead: 0b}\nnodes:\n  - {name: root, type: wfq}\n  \
         - {name: a, type: leaf, parent: root, match: {tag: 1}, limit: {packets: 10000}, \
         flow_limit: {packets: 10000}}\n  - {name: b, type: leaf, parent: root, weight: 2, \
         match: {tag: 2}, limit: {packets: 10000}, flow_limit: {packets: 10000}}\n",
    )
    .unwrap();
    let mut backlogged = String::from("arrive_ps,bytes,tag\n");
    for i in 0..3000 {
        backlogged += &format!("0,1500,{}\n", 1 + i % 2);
    }
    let cases = [
        ("two", "arrive_ps,bytes,tag\n0,64,1\n0,64,2\n".to_string()),
        ("backlogged", backlogged),
    ];
    for (name, trace) in &cases {
        let t = dir.join(format!("{name}.csv"));
        fs::write(&t, trace).unwrap();
        let out = dir.join(name);
        replay_quiet(policy.to_str().unwrap(), &t, &out)
            .assert()
            .success();
        let rates = window_rates(&out);
        assert!(rates.len() >= 100, "{name}: {} windows", rates.len());
        // The link is busy from the first arrival to the end: every window reads its rate.
        for &(start, width, bps) in &rates {
            assert!(
                bps <= LINK_BPS,
                "{name}: the window at {start} ps ({width} ps) reads {bps} bit/s"
            );
            assert!(
                bps + 6 >= LINK_BPS,
                "{name}: the window at {start} ps ({width} ps) reads {bps} bit/s"
            );
        }
    }
    // loom-fig8 (no overhead either; its link idles between D2's shaped packets).
    let out = replay_example("loom-fig8", "link-rate", &[]);
    let rates = window_rates(&out);
    let _ = fs::remove_dir_all(&out);
    assert!(rates.iter().any(|r| r.2 + 6 >= LINK_BPS), "{rates:?}");
    for (start, width, bps) in rates {
        assert!(
            bps <= LINK_BPS,
            "loom-fig8: the window at {start} ps ({width} ps) reads {bps} bit/s"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// `--update`: Loom Fig. 11's shared destination limit drops from 10 to 5 Gbit/s halfway
/// through the trace; j1 and j2 together follow it (read from the timeline), j0 takes what
/// they leave (up to its 35 Gbit/s offered), both engines agree, and the summary records the
/// update as applied.
#[test]
fn replay_update_lowers_a_shared_limit_mid_trace() {
    let args = ["--update", "500us:dst2-limit.rate=5gbit"];
    let (fast, refr, _) = replay_with_both_engines("loom-fig11", "update", &args);
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(fast.join("summary.json")).unwrap()).unwrap();
    let (width, series, _) = timeseries(&fast);
    let _ = fs::remove_dir_all(&fast);
    let _ = fs::remove_dir_all(&refr);
    assert_eq!(
        s["updates"][0]["update"], "500us:dst2-limit.rate=5gbit",
        "{s:#}"
    );
    assert_eq!(s["updates"][0]["at_ps"], 500_000_000u64);
    assert_eq!(s["updates"][0]["applied"], true);
    // The shaping class's entry keeps the policy's limit and gives the one at the end.
    let lim = &s["shapers"]["dst2-limit"];
    assert_eq!(lim["rate_bps"], 10_000_000_000u64, "{lim}");
    assert_eq!(lim["rate_bps_at_end"], 5_000_000_000u64, "{lim}");
    assert_eq!(lim["burst_bytes_at_end"], lim["burst_bytes"], "{lim}");
    // Gbit/s of `names` over the windows wholly inside [from, to) ps.
    let gbps = |names: &[&str], from: u64, to: u64| -> f64 {
        let bytes: u64 = names
            .iter()
            .flat_map(|n| series[*n].iter())
            .filter(|&&(t, _)| t >= from && t + width <= to)
            .map(|&(_, b)| b)
            .sum();
        bytes as f64 * 8.0 / ((to - from) as f64 / 1e12) / 1e9
    };
    let before = gbps(&["j1", "j2"], 150_000_000, 500_000_000);
    let after = gbps(&["j1", "j2"], 600_000_000, 950_000_000);
    assert!((before - 10.0).abs() < 0.6, "before: {before} Gbit/s");
    assert!((after - 5.0).abs() < 0.4, "after: {after} Gbit/s");
    let j0 = gbps(&["j0"], 600_000_000, 950_000_000);
    assert!(j0 > 32.0, "j0 after: {j0} Gbit/s");
}

/// A `--update` that names nothing, or a field its node's parent does not read, is a usage
/// error before the replay starts.
#[test]
fn replay_refuses_a_bad_update() {
    for (update, message) in [
        (
            "1ms:nobody.weight=2",
            "no node or shaping class is named `nobody`",
        ),
        (
            "1ms:j1.priority=2",
            "`priority` is read by a `prio` parent; `j1`'s parent is a `wfq`",
        ),
        (
            "1ms:dst2-limit.rate=0gbit",
            "--update `1ms:dst2-limit.rate=0gbit`",
        ),
        // A time of 0 is valid, so a negative one is refused as negative.
        ("-1ms:j1.weight=2", "`-1ms` must not be negative"),
    ] {
        weft()
            .args([
                "replay",
                "--quiet",
                "--policy",
                "examples/policies/loom-fig11.yaml",
            ])
            .args(["--trace", "examples/traces/loom-fig11.csv", "--out"])
            .arg(std::env::temp_dir().join(format!("weft-badupdate-{}", std::process::id())))
            .arg(format!("--update={update}"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(message));
    }
}

/// A `--update` of a `senic` rate that breaks rule senic-oversubscribed (the L1 classes of
/// SENIC's two-level form adding up to more than their node's capacity) is refused as a
/// policy file would be, exit 2 naming the flag and the sum, on the rates the earlier flags
/// left; flags of one instant are judged together (no packet sees the state between them).
#[test]
fn replay_refuses_an_update_that_oversubscribes_senic_l1_classes() {
    let dir = scratch("senic-l1-update");
    let trace = dir.join("t.csv");
    fs::write(
        &trace,
        "arrive_ps,bytes,vm,dport\n0,1500,1,80\n0,1500,2,80\n0,1500,3,80\n",
    )
    .unwrap();
    let replay = |updates: &[&str]| {
        let mut c = weft();
        c.args([
            "replay",
            "--quiet",
            "--policy",
            "examples/policies/senic-two-level.yaml",
            "--trace",
        ])
        .arg(&trace)
        .arg("--out")
        .arg(dir.join("out"));
        for u in updates {
            c.args(["--update", u]);
        }
        c.output().unwrap()
    };
    // The policy: nic 10gbit over vm-a 4, vm-b 2, vm-c 1.
    for (updates, message) in [
        (
            &["1us:vm-a.rate=9gbit"][..],
            "--update `1us:vm-a.rate=9gbit`: the L1 classes of `nic` add up to 12gbit, more \
             than its capacity 10gbit",
        ),
        (
            &["1us:nic.rate=1gbit"],
            "--update `1us:nic.rate=1gbit`: the L1 classes of `nic` add up to 7gbit, more than \
             its capacity 1gbit",
        ),
        // vm-b gives up its gigabit only after vm-a took it.
        (
            &["2us:vm-b.rate=1gbit", "1us:vm-a.rate=8gbit"],
            "--update `1us:vm-a.rate=8gbit`: the L1 classes of `nic` add up to 11gbit",
        ),
        // The capacity and rates the earlier flags left: 6 + 1 + 2 on 8.
        (
            &[
                "1us:vm-b.rate=1gbit",
                "2us:nic.rate=8gbit",
                "3us:vm-a.rate=6gbit",
                "4us:vm-c.rate=2gbit",
            ],
            "--update `4us:vm-c.rate=2gbit`: the L1 classes of `nic` add up to 9gbit, more \
             than its capacity 8gbit",
        ),
    ] {
        let o = replay(updates);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{updates:?}: {err}");
        assert!(err.contains(message), "{updates:?}: {err}");
        assert!(err.contains("senic-oversubscribed"), "{updates:?}: {err}");
    }
    for updates in [
        &["1us:vm-a.rate=8gbit", "1us:vm-b.rate=1gbit"][..],
        &["1us:vm-b.rate=1gbit", "2us:vm-a.rate=8gbit"],
        &[
            "1us:vm-b.rate=1gbit",
            "2us:nic.rate=8gbit",
            "3us:vm-a.rate=6gbit",
        ],
        // L2 classes may oversubscribe their L1 class (they fall back to sharing).
        &["1us:a-web.rate=100gbit"],
    ] {
        let o = replay(updates);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{updates:?}: {err}");
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// A policy of more leaves than a timeline keeps has a series per child of the root (a leaf
/// counts in the child above it); with more children still, one series for the link.
#[test]
fn replay_timeline_of_a_large_policy() {
    let mut grouped =
        String::from("weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: wfq}\n");
    let mut flat = grouped.clone();
    for g in 0..2 {
        grouped += &format!("  - {{name: g{g}, type: wfq, parent: root, match: {{vm: {g}}}}}\n");
    }
    let mut trace = String::from("arrive_ps,bytes,vm,tenant\n");
    for t in 0..300 {
        grouped += &format!(
            "  - {{name: l{t}, type: leaf, parent: g{}, match: {{tenant: {t}}}}}\n",
            t % 2
        );
        flat += &format!("  - {{name: l{t}, type: leaf, parent: root, match: {{tenant: {t}}}}}\n");
        trace += &format!("{},1000,{},{t}\n", t * 1000, t % 2);
    }
    for (policy, kind, names) in [
        (&grouped, "root children", vec!["g0", "g1"]),
        (&flat, "link", vec!["link"]),
    ] {
        let dir = std::env::temp_dir().join(format!("weft-tl-{}-{}", names[0], std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (p, t, out) = (dir.join("p.yaml"), dir.join("t.csv"), dir.join("out"));
        fs::write(&p, policy).unwrap();
        fs::write(&t, &trace).unwrap();
        weft()
            .args(["replay", "--quiet", "--policy"])
            .arg(&p)
            .arg("--trace")
            .arg(&t)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let s: serde_json::Value =
            serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
        let (_, series, _) = timeseries(&out);
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(s["timeline"]["series"], kind, "{s:#}");
        assert_eq!(series.keys().collect::<Vec<_>>(), names);
        for (name, w) in &series {
            let total: u64 = w.iter().map(|&(_, b)| b).sum();
            let expected = if name == "link" { 300_000 } else { 150_000 };
            assert_eq!(total, expected, "{name}");
        }
        if kind == "root children" {
            assert_eq!(s["nodes"]["g1"]["bytes"], 150_000);
        }
    }
}

/// A real capture (`examples/traces/iperf3-udp.pcap`, two iperf3 UDP streams recorded with
/// tcpdump): while both are backlogged (10–25 ms), port 5202 gets three times 5201's bytes
/// and the 1 Gbit/s link is full.
#[test]
fn replay_iperf3_capture_shares() {
    let out = replay_example("iperf3-udp", "shares", &[]);
    let g = gbps_by_leaf(&out, 10_000_000_000, 25_000_000_000);
    let _ = fs::remove_dir_all(&out);
    let (a, b) = (g["p5201"], g["p5202"]);
    assert!((b / a - 3.0).abs() < 0.15, "5202/5201 = {} ({g:?})", b / a);
    assert!(a + b > 0.95, "{g:?}");
}

/// A real two-interface capture (`examples/traces/two-tenants.pcapng`, dumpcap's records out
/// of time order), tenants by interface: while both are backlogged, tenant 1 (weight 3)
/// sends three times tenant 2's bytes; the file's disorder is counted and undone.
#[test]
fn replay_two_tenants_capture_shares() {
    let (out, table) = replay_example_printing("two-tenants", "shares", &[]);
    assert!(
        table.contains("capture: ta (tenant 1, a): 1100 records, tb (tenant 2, b): 1039 records"),
        "{table}"
    );
    let g = gbps_by_leaf(&out, 3_000_000_000, 18_000_000_000);
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    let _ = fs::remove_dir_all(&out);
    let (a, b) = (g["tenant-a"], g["tenant-b"]);
    assert!((a / b - 3.0).abs() < 0.1, "a/b = {} ({g:?})", a / b);
    assert!(a + b > 0.98, "{g:?}");
    assert_eq!(s["capture_out_of_order"], 1052, "{s:#}");
    assert_eq!(s["capture_reordered"], 0, "{s:#}");
    assert_eq!(s["capture_interfaces"][1]["name"], "tb", "{s:#}");
    assert_eq!(s["capture_interfaces"][1]["tenant"], 2, "{s:#}");
}

/// Loom Fig. 11 (`examples/traces/loom-fig11.csv`): J1 and J2 share one 10 Gbit/s
/// destination limit equally; J0 (offering 35 Gbit/s) takes the rest of the 40 Gbit/s link.
/// Measured in wire bytes (the class counts each frame plus the link's 20 bytes of
/// overhead), after the shaping class's 64 KiB burst has been spent.
#[test]
fn replay_loom_fig11_shares() {
    let out = replay_example("loom-fig11", "shares", &[]);
    let g = wire_gbps_by_leaf(&out, 100_000_000, 1_000_000_000);
    let _ = fs::remove_dir_all(&out);
    let (j0, j1, j2) = (g["j0"], g["j1"], g["j2"]);
    assert!(
        (j1 + j2 - 10.0).abs() < 0.1,
        "j1 + j2 = {} ({g:?})",
        j1 + j2
    );
    assert!((j1 - j2).abs() < 0.1, "{g:?}");
    // The rest: 40 Gbit/s of wire bytes, less Dst-2's 10.
    let rest = 40.0 - 10.0;
    assert!(
        (j0 - rest).abs() < 0.2,
        "j0 = {j0}, the rest is {rest} ({g:?})"
    );
}

/// summary.json's `shapers`: Loom Fig. 11's shared limit counts both jobs' packets and keeps
/// its mean within rate plus burst over the span (invariant 4 over the whole trace), and
/// holds it (the jobs offer more); the table has a row for it.
#[test]
fn replay_summary_counts_shaping_classes() {
    let (out, table) = replay_example_printing("loom-fig11", "shapers", &[]);
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    let _ = fs::remove_dir_all(&out);
    let lim = &s["shapers"]["dst2-limit"];
    let leaf = |n: &str, k: &str| s["leaves"][n][k].as_u64().unwrap();
    assert_eq!(
        lim["packets"].as_u64(),
        Some(leaf("j1", "packets") + leaf("j2", "packets")),
        "{s:#}"
    );
    assert_eq!(
        lim["bytes"].as_u64(),
        Some(leaf("j1", "bytes") + leaf("j2", "bytes"))
    );
    assert_eq!(
        (lim["rate_bps"].as_u64(), lim["burst_bytes"].as_u64()),
        (Some(10_000_000_000), Some(65_536))
    );
    let span_s = s["span_ps"].as_f64().unwrap() / 1e12;
    let mean = lim["mean_bps"].as_f64().unwrap();
    let bound = 10e9 + 65_536.0 * 8.0 / span_s;
    assert!(
        mean <= bound && mean >= 0.97e10,
        "dst2-limit mean {mean} b/s, bound {bound}"
    );
    assert!(lim["queueing_delay_ps"]["p99"].as_u64().unwrap() > 0);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("dst2-limit ") && l.contains("10,000.0")),
        "{table}"
    );
}

/// Replays `trace` (CSV text) with `policy` (YAML text) and `args` in a temporary directory
/// (removed after); returns summary.json, departures.csv and drops.csv.
fn replay_texts(
    tag: &str,
    policy: &str,
    trace: &str,
    args: &[&str],
) -> (serde_json::Value, String, String) {
    let dir = std::env::temp_dir().join(format!("weft-{tag}-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let (p, t, out) = (dir.join("p.yaml"), dir.join("t.csv"), dir.join("out"));
    fs::write(&p, policy).unwrap();
    fs::write(&t, trace).unwrap();
    weft()
        .args(["replay", "--quiet", "--policy"])
        .arg(&p)
        .arg("--trace")
        .arg(&t)
        .arg("--out")
        .arg(&out)
        .args(args)
        .assert()
        .success();
    let read = |f: &str| fs::read_to_string(out.join(f)).unwrap();
    let files = (
        serde_json::from_str(&read("summary.json")).unwrap(),
        read("departures.csv"),
        read("drops.csv"),
    );
    let _ = fs::remove_dir_all(&dir);
    files
}

/// Nested shaping: a packet counts at every class on its path, an unshaped or dropped one at
/// none.
#[test]
fn replay_counts_a_packet_at_every_shaping_class_it_passes() {
    let policy = "weft: 1
link: {rate: 10gbit}
nodes:
  - {name: root, type: wfq}
  - {name: cap, type: shape, parent: root, rate: 4gbit, burst: 16kb}
  - {name: near, type: shape, parent: cap, rate: 1gbit, burst: 16kb, match: {dst: 10.0.1.0/24}}
  - {name: a, type: leaf, parent: near, match: {tag: 1}}
  - {name: b, type: leaf, parent: root, match: {tag: 2}}
";
    let mut rows = String::from("arrive_ps,bytes,tag,dst\n");
    for i in 0..200u64 {
        rows += &format!(
            "{},1000,1,10.0.1.5\n{},1000,2,10.0.2.5\n",
            i * 1_000_000,
            i * 1_000_000
        );
    }
    let (s, _, _) = replay_texts("nested", policy, &rows, &[]);
    assert_eq!(s["sent"], 400, "{s:#}");
    for c in ["near", "cap"] {
        assert_eq!(s["shapers"][c]["packets"], 200, "{c}: {s:#}");
        assert_eq!(s["shapers"][c]["bytes"], 200_000, "{c}");
    }
    assert_eq!(s["leaves"]["b"]["packets"], 200);
    // With a 10-packet limit on `a`, shaped packets are also dropped: the classes count only
    // those that left (and the replay's debug assertion checks that no dropped packet's
    // classes stay behind).
    let limited = policy.replace("match: {tag: 1}}", "match: {tag: 1}, limit: {packets: 10}}");
    let (s, _, _) = replay_texts("nested-drops", &limited, &rows, &[]);
    let a = &s["leaves"]["a"];
    assert!(a["drops"]["leaf_packets"].as_u64().unwrap() > 0, "{s:#}");
    for c in ["near", "cap"] {
        assert_eq!(s["shapers"][c]["packets"], a["packets"], "{c}: {s:#}");
        assert_eq!(s["shapers"][c]["bytes"], a["bytes"], "{c}");
    }
}

/// A WFQ 1:2:4 replay printed 3256 / 3254 / 3255 Mbit/s, each leaf's bytes over the whole
/// trace, the drain included, and said nothing of that span: the table says it now, and
/// gives each leaf's rate over its own span (`active_bps` in `summary.json`): its rate while
/// backlogged, as each leaf here stays backlogged from its first packet to its last.
#[test]
fn replay_rates_say_their_span_and_give_each_rows_own() {
    let dir = scratch("active");
    let done = replay_quiet(
        "examples/policies/wfq-1-2-4.yaml",
        &root().join("examples/traces/wfq-1-2-4.csv"),
        &dir,
    )
    .assert()
    .success();
    let stdout = String::from_utf8_lossy(&done.get_output().stdout).to_string();
    assert!(stdout.contains("active Mbit/s"), "{stdout}");
    assert!(
        stdout.contains("(mean Mbit/s: over the whole 3.073 ms, the drain of every queue included"),
        "{stdout}"
    );
    let sum: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let span = sum["span_ps"].as_u64().unwrap();
    let leaf = |n: &str| &sum["leaves"][n];
    let active = |n: &str| leaf(n)["active_bps"].as_u64().unwrap();
    for n in ["a", "b", "c"] {
        let (bytes, ps) = (
            leaf(n)["bytes"].as_u64().unwrap(),
            leaf(n)["active_ps"].as_u64().unwrap(),
        );
        assert!(ps > 0 && ps <= span, "{n}: {ps}");
        assert_eq!(
            active(n) as u128,
            bytes as u128 * 8_000_000_000_000 / ps as u128,
            "{n}"
        );
    }
    // `c` (weight 4) drains first, then `b`; `a` is sent until the end.
    assert!(active("c") > active("b") && active("b") > active("a"));
    assert!(active("c") > 5_000_000_000, "{}", active("c"));
    assert_eq!(leaf("a")["active_ps"].as_u64().unwrap(), span);
    assert_eq!(active("a"), leaf("a")["mean_bps"].as_u64().unwrap());
    assert_eq!(
        sum["nodes"]["root"]["active_bps"],
        sum["nodes"]["root"]["mean_bps"]
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// Queueing delays' max and mean are exact, not HdrHistogram buckets': two 1,481-byte
/// packets at once on 10 Gbit/s (20 B of overhead), so the second waits the first's wire
/// time, 1,501 × 800 = 1,200,800 ps, which lies in the bucket 1,200,128..=1,201,151. The
/// buckets made the max 1,201,151 and the mean 600,320 (p90 and p99 1,201,151 too); now max,
/// p90 and p99 are 1,200,800 and the mean 600,400, for the leaf and for its node, and the
/// summary says how its delays were measured.
#[test]
fn replay_delay_max_and_mean_are_exact() {
    let policy = "weft: 1
link: {rate: 10gbit}
nodes:
  - {name: root, type: fifo}
  - {name: a, type: leaf, parent: root}
";
    let (s, deps, _) = replay_texts(
        "exact-delay",
        policy,
        "arrive_ps,bytes\n0,1481\n0,1481\n",
        &[],
    );
    assert_eq!(
        deps,
        "depart_ps,id,leaf,flow,bytes\n0,0,a,0,1481\n1200800,1,a,0,1481\n"
    );
    for d in [
        &s["leaves"]["a"]["queueing_delay_ps"],
        &s["nodes"]["root"]["queueing_delay_ps"],
    ] {
        assert_eq!(
            *d,
            serde_json::json!({"p50": 0, "p90": 1_200_800, "p99": 1_200_800,
                "max": 1_200_800, "mean": 600_400}),
            "{s:#}"
        );
    }
    let precision = s["queueing_delay_precision"].as_str().unwrap_or_default();
    assert!(
        precision.contains("3 significant digits") && precision.contains("max and mean are exact"),
        "{s:#}"
    );
}

/// drops.csv names each dropped packet's leaf (`arrive_ps,id,leaf,reason`), and leaves it
/// empty for a packet no leaf takes (`unclassified`): leaf and flow limits, with more rows at
/// one instant than the engine is offered at once (64), with and without shaping classes
/// (which the driver classifies itself). Each leaf's rows match its drops in summary.json.
#[test]
fn replay_drops_name_their_leaf() {
    let shaped = "weft: 1
link: {rate: 10gbit}
nodes:
  - {name: root, type: wfq}
  - {name: cap, type: shape, parent: root, rate: 1gbit, burst: 16kb}
  - {name: a, type: leaf, parent: cap, match: {tag: 1}, limit: {packets: 5}}
  - {name: b, type: leaf, parent: root, match: {tag: 2}, flow_limit: {packets: 3}}
";
    let unshaped = shaped
        .replace(
            "  - {name: cap, type: shape, parent: root, rate: 1gbit, burst: 16kb}\n",
            "",
        )
        .replace("parent: cap", "parent: root");
    // Tags 1, 2 and 9 (no leaf) in turn: 200 rows at 0, then 100 rows 1 ns apart.
    let tag = |id: usize| [1, 2, 9][id % 3];
    let mut trace = String::from("arrive_ps,bytes,tag\n");
    for id in 0..300usize {
        trace += &format!("{},500,{}\n", id.saturating_sub(199) * 1000, tag(id));
    }
    for (name, policy) in [("shaped", shaped.to_string()), ("unshaped", unshaped)] {
        let (s, _, drops) = replay_texts(&format!("drop-leaf-{name}"), &policy, &trace, &[]);
        let mut lines = drops.lines();
        assert_eq!(lines.next(), Some("arrive_ps,id,leaf,reason"), "{name}");
        let mut per_leaf: BTreeMap<String, u64> = BTreeMap::new();
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 4, "{name}: {l}");
            let id: usize = f[1].parse().unwrap();
            let (leaf, reason) = match tag(id) {
                1 => ("a", "leaf_packets"),
                2 => ("b", "flow_packets"),
                _ => ("", "unclassified"),
            };
            assert_eq!((f[2], f[3]), (leaf, reason), "{name}: {l}");
            *per_leaf.entry(leaf.to_string()).or_default() += 1;
        }
        assert_eq!(per_leaf[""], 100, "{name}: {drops}");
        for leaf in ["a", "b"] {
            assert!(per_leaf[leaf] > 60, "{name}: {drops}");
            assert_eq!(
                s["leaves"][leaf]["dropped"], per_leaf[leaf],
                "{name}: {leaf}"
            );
        }
    }
}

/// summary.json: an interior node aggregates its subtree (packets, bytes, drops by reason,
/// delay histogram) plus its own drops; leaf counts match departures.csv and drops.csv.
#[test]
fn replay_summary_aggregates_subtrees() {
    let policy = "weft: 1
link: {rate: 10gbit}
nodes:
  - {name: root, type: prio}
  - {name: mid, type: wfq, parent: root, priority: 1, match: {tenant: [1, 2]}}
  - {name: a, type: leaf, parent: mid, match: {tenant: 1}, limit: {packets: 2}}
  - {name: b, type: leaf, parent: mid, match: {tenant: 2}}
  - {name: hi, type: leaf, parent: root, priority: 0, match: {tenant: 3}}
";
    let mut rows = String::from("arrive_ps,bytes,tenant\n");
    rows += &"0,1000,1\n".repeat(5);
    rows += "0,100,3\n0,100,9\n";
    for i in 1..=5 {
        rows += &format!("{i}000,500,2\n");
    }
    rows += "2000000,100,3\n";
    let (s, deps, drops) = replay_texts("summary", policy, &rows, &["--json"]);
    let leaf = |n: &str| &s["leaves"][n];
    let node = |n: &str| &s["nodes"][n];
    // Five tenant-1 packets at t=0 into a leaf of two: three dropped; tenant 9 unclassified.
    assert_eq!(leaf("a")["packets"], 2, "{s:#}");
    assert_eq!(leaf("a")["drops"]["leaf_packets"], 3);
    assert_eq!(leaf("b")["packets"], 5);
    assert_eq!(leaf("hi")["packets"], 2);
    assert_eq!(node("mid")["packets"], 7);
    assert_eq!(node("mid")["bytes"], 2 * 1000 + 5 * 500);
    assert_eq!(node("mid")["drops"]["leaf_packets"], 3);
    assert_eq!(node("mid")["drops"]["unclassified"], 0);
    assert_eq!(node("root")["packets"], 9);
    assert_eq!(node("root")["drops"]["leaf_packets"], 3);
    assert_eq!(node("root")["drops"]["unclassified"], 1);
    assert_eq!(node("root")["dropped"], 4);
    assert_eq!(s["sent"], 9);
    assert_eq!(s["dropped"], 4);
    assert_eq!(s["drops"]["leaf_packets"], 3, "{s:#}");
    assert_eq!(s["drops"]["unclassified"], 1, "{s:#}");
    assert_eq!(s["drops"]["flow_bytes"], 0, "{s:#}");
    assert_eq!(deps.lines().count() - 1, 9);
    assert_eq!(drops.lines().count() - 1, 4);
    for (n, l) in [("a", 2), ("b", 5), ("hi", 2)] {
        assert_eq!(deps.matches(&format!(",{n},")).count(), l, "{deps}");
    }
    // Delay percentiles: a node's max is its subtree's max, its p50 lies between its
    // leaves' p50s; the link's busy time sets mean_bps.
    let d = |v: &serde_json::Value, q: &str| v["queueing_delay_ps"][q].as_u64().unwrap();
    let leaves = [leaf("a"), leaf("b"), leaf("hi")];
    let max = leaves.iter().map(|l| d(l, "max")).max().unwrap();
    assert_eq!(d(node("root"), "max"), max);
    assert_eq!(
        d(node("mid"), "max"),
        d(leaf("a"), "max").max(d(leaf("b"), "max"))
    );
    let p50s = [d(leaf("a"), "p50"), d(leaf("b"), "p50")];
    let p50 = d(node("mid"), "p50");
    assert!(p50 >= *p50s.iter().min().unwrap() && p50 <= *p50s.iter().max().unwrap());
    assert!(
        d(leaf("hi"), "max") < d(leaf("b"), "max"),
        "priority: {s:#}"
    );
    let span = s["span_ps"].as_u64().unwrap();
    let bps = node("root")["mean_bps"].as_u64().unwrap();
    let bytes = node("root")["bytes"].as_u64().unwrap();
    assert_eq!(
        bps,
        (bytes as u128 * 8 * 1_000_000_000_000 / span as u128) as u64
    );
}

/// The table's first line says why packets were dropped, the nonzero reasons only.
#[test]
fn replay_table_names_the_drop_reasons() {
    let dir = std::env::temp_dir().join(format!("weft-dropline-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let (p, t) = (dir.join("p.yaml"), dir.join("t.csv"));
    let policy = "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: a, type: leaf, match: {tenant: 1}, limit: {packets: 1}}\n";
    fs::write(&p, policy).unwrap();
    fs::write(
        &t,
        "arrive_ps,bytes,tenant\n0,1000,1\n0,1000,1\n0,1000,7\n0,1000,7\n",
    )
    .unwrap();
    let out = weft()
        .args(["replay", "--policy"])
        .arg(&p)
        .arg("--trace")
        .arg(&t)
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let _ = fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("4 packets, 1 sent, 3 dropped (unclassified 2, leaf_packets 1),"),
        "{text}"
    );
}

/// The table's first line gives the span the mean rates are over, from the first arrival
/// (it printed `duration_ps`, the end on the trace's clock: 1000.002 ms for a trace of
/// 1.9 µs starting at 1 s); `summary.json` keeps its keys.
#[test]
fn replay_table_gives_the_span_from_the_first_arrival() {
    let dir = scratch("span");
    let trace = dir.join("t.csv");
    fs::write(
        &trace,
        "arrive_ps,bytes,tag\n1000000000000,1500,1\n1000000000000,1500,2\n1000000000000,1500,3\n",
    )
    .unwrap();
    let out = dir.join("out");
    let o = weft()
        .args([
            "replay",
            "--policy",
            "examples/policies/wfq-1-2-4.yaml",
            "--trace",
        ])
        .arg(&trace)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    let span = s["span_ps"].as_u64().unwrap();
    // Three 1,500-byte frames back to back at 10 Gbit/s.
    assert!((3_600_000..3_700_000).contains(&span), "{s}");
    assert_eq!(s["duration_ps"], s["end_ps"], "{s}");
    assert_eq!(s["first_arrival_ps"], 1_000_000_000_000u64, "{s}");
    assert_eq!(
        text.lines().next().unwrap_or_default(),
        format!(
            "3 packets, 3 sent, 0 dropped, {:.3} us from the first arrival",
            span as f64 / 1e6
        ),
        "{text}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// A policy that matches on a field the trace's packets do not carry gets a warning before
/// the run, naming the field and the nodes: its packets were all dropped as `unclassified`
/// without a word. A CSV trace carries the fields it has columns for; a capture never
/// carries `tag` or `cgroup`, and `tenant` only with `--tenant`.
#[test]
fn replay_warns_of_matched_fields_the_trace_lacks() {
    let dir = scratch("unmatched");
    let trace = dir.join("t.csv");
    fs::write(&trace, "arrive_ps,bytes,dport\n0,1500,80\n").unwrap();
    let replay = |policy: &str, trace: &str, extra: &[&str]| {
        let o = weft()
            .args(["replay", "--quiet", "--policy", policy, "--trace", trace])
            .arg("--out")
            .arg(dir.join("out"))
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let wfq = "examples/policies/wfq-1-2-4.yaml";
    let err = replay(wfq, trace.to_str().unwrap(), &[]);
    assert!(
        err.contains(&format!(
            "warning: wfq-1-2-4 matches on tag (a, b, c), which {} has no column for",
            trace.display()
        )),
        "{err}"
    );
    assert!(err.contains("dropped as unclassified"), "{err}");
    // The example trace has the column.
    let err = replay(wfq, "examples/traces/wfq-1-2-4.csv", &[]);
    assert!(!err.contains("warning"), "{err}");
    // A capture: tenants only from --tenant.
    let (p, c) = (
        "examples/policies/two-tenants.yaml",
        "examples/traces/two-tenants.pcapng",
    );
    let err = replay(p, c, &[]);
    assert!(
        err.contains(
            "warning: two-tenants matches on tenant (tenant-a, tenant-b), which the packets of"
        ),
        "{err}"
    );
    let err = replay(p, c, &["--tenant", "a=ta", "--tenant", "b=tb"]);
    assert!(!err.contains("warning"), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

/// Streaming: a 200,000-row trace under load (30 of 40 Gbit/s offered) replays with the
/// scheduler holding a handful of packets at a time, i.e. rows are read as time reaches them,
/// not all up front. (Memory at 10 M rows:
/// docs/perf/2026-11-24-replay-at-scale.md.)
#[test]
fn replay_streams_with_backlog_bounded_by_occupancy() {
    let dir = std::env::temp_dir().join(format!("weft-stream-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.csv");
    let mut w = std::io::BufWriter::new(fs::File::create(&trace).unwrap());
    use std::io::Write;
    writeln!(w, "arrive_ps,bytes,tag,dst").unwrap();
    // A packet every 400 ns, 1500 bytes (30 Gbit/s): of every seven, five for J0, one each
    // for J1 and J2 (8.6 Gbit/s together, under their 10 Gbit/s limit).
    let rows = 200_000u64;
    for i in 0..rows {
        let (tag, dst) = match i % 7 {
            0..5 => (0, "10.0.1.1"),
            5 => (1, "10.0.2.1"),
            _ => (2, "10.0.2.2"),
        };
        writeln!(w, "{},1500,{tag},{dst}", i * 400_000).unwrap();
    }
    drop(w);
    let out = dir.join("out");
    weft()
        .args([
            "replay",
            "--quiet",
            "--policy",
            "examples/policies/loom-fig11.yaml",
        ])
        .arg("--trace")
        .arg(&trace)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(s["packets"], rows);
    assert_eq!(s["sent"], rows, "nothing dropped under load");
    let backlog = s["max_backlog_packets"].as_u64().unwrap();
    assert!((1..=8).contains(&backlog), "max backlog {backlog}");
}

/// SENIC's fallback (`examples/traces/senic-fallback.csv`): limits 8 and 4 Gbit/s on a
/// 10 Gbit/s link share it 2:1 while both classes are backlogged (the first 150 µs; the
/// quantum is one 1.2 µs packet, so the ratio is checked within 2.5 %) and fill it.
#[test]
fn replay_senic_fallback_shares() {
    let out = replay_example("senic-fallback", "shares", &[]);
    let g = gbps_by_leaf(&out, 0, 150_000_000);
    let _ = fs::remove_dir_all(&out);
    let (c1, c2) = (g["c1"], g["c2"]);
    assert!((c1 / c2 - 2.0).abs() < 0.05, "c1/c2 = {} ({g:?})", c1 / c2);
    assert!(c1 + c2 > 9.8, "the link is full: {g:?}");
}

/// Strict priority (`examples/traces/strict-priority.csv`): no low packet starts while a
/// high packet is queued (a high packet that has arrived by then has already started).
#[test]
fn replay_strict_priority_never_serves_low_while_high_waits() {
    let out = replay_example("strict-priority", "prio", &[]);
    let departures = fs::read_to_string(out.join("departures.csv")).unwrap();
    let _ = fs::remove_dir_all(&out);
    let trace = fs::read_to_string(root().join("examples/traces/strict-priority.csv")).unwrap();
    // Trace row id -> arrival (ids count data rows from 0).
    let arrivals: Vec<u64> = trace
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let mut high = Vec::new(); // (arrival, departure)
    let mut low_starts = Vec::new();
    for line in departures.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (t, id): (u64, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        match f[2] {
            "high" => high.push((arrivals[id], t)),
            "low" => low_starts.push(t),
            other => panic!("unexpected leaf {other}"),
        }
    }
    assert!(high.len() > 100 && low_starts.len() > 100);
    let mut contended = 0;
    for &tl in &low_starts {
        for &(a, d) in &high {
            if a <= tl {
                assert!(
                    d < tl,
                    "low started at {tl} ps while high (arrived {a}) waited until {d}"
                );
                contended += usize::from(d + 2_000_000 > tl);
            }
        }
    }
    assert!(
        contended > 10,
        "the trace must make the classes contend ({contended})"
    );
}

/// A class too slow for its backlog: 1,600 frames of 1,500 B at 1 bit/s need 12,000 s each,
/// more than the 64-bit picosecond clock holds (213.5 days). The replay says how many were
/// still queued when the clock ran out, in summary.json and on stderr, and the counts add up.
#[test]
fn replay_reports_packets_still_queued_when_the_clock_runs_out() {
    let dir = std::env::temp_dir().join(format!("weft-replay-clock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("slow.yaml");
    std::fs::write(
        &policy,
        "weft: 1\nlink: {rate: 1gbit}\nnodes:\n  - {name: root, type: fifo}\n  - {name: slow, type: shape, parent: root, rate: 1bit, burst: 1514b, match: {tag: 1}}\n  - {name: a, type: leaf, parent: slow, match: {tag: 1}, limit: {packets: 5000}, flow_limit: {packets: 5000}}\n",
    )
    .unwrap();
    let trace = dir.join("t.csv");
    let mut rows = String::from("arrive_ps,bytes,tag\n");
    for _ in 0..1600 {
        rows += "0,1500,1\n";
    }
    std::fs::write(&trace, rows).unwrap();
    let out = dir.join("out");
    let table = weft()
        .args(["replay", "--policy"])
        .arg(&policy)
        .arg("--trace")
        .arg(&trace)
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "were still queued when the 64-bit picosecond clock ran out",
        ))
        .get_output()
        .stdout
        .clone();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let (sent, dropped, held) = (
        s["sent"].as_u64().unwrap(),
        s["dropped"].as_u64().unwrap(),
        s["held_at_end"].as_u64().unwrap(),
    );
    assert!(held > 0, "{s}");
    assert_eq!((dropped, sent + held), (0, 1600), "{s}");
    // The table's first line counts them too (in groups of three digits: 1,000 <= sent and
    // held < 1,000).
    let table = String::from_utf8_lossy(&table);
    assert!(
        table.starts_with(&format!(
            "1,600 packets, {},{:03} sent, 0 dropped, {held} held at the end, ",
            sent / 1000,
            sent % 1000
        )),
        "{table}"
    );
    // The class's rate holds to the end: 12,000 s (one 1,500-byte frame at 1 bit/s) between
    // departures, none rushed out as the clock runs out.
    let times: Vec<u64> = std::fs::read_to_string(out.join("departures.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(times.len() as u64, sent);
    let frame_ps = 12_000 * 1_000_000_000_000u64;
    for w in times.windows(2).skip(1) {
        assert!(
            w[1] - w[0] >= frame_ps,
            "departures {w:?} closer than 12,000 s"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Replays `trace` through a flat `wfq` policy of `leaves` leaves `l0`, `l1`, ... (leaf i
/// matches tag i) in a fresh directory named after `tag`: the directory (output in `o/`),
/// the printed table and `summary.json`.
fn replay_flat(tag: &str, leaves: usize, trace: &str) -> (PathBuf, String, serde_json::Value) {
    let dir = std::env::temp_dir().join(format!("weft-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let mut policy =
        String::from("weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: wfq}\n");
    for i in 0..leaves {
        policy += &format!("  - {{name: l{i}, type: leaf, parent: root, match: {{tag: {i}}}}}\n");
    }
    fs::write(dir.join("p.yaml"), policy).unwrap();
    fs::write(dir.join("t.csv"), trace).unwrap();
    let out = weft()
        .args(["replay", "--policy"])
        .arg(dir.join("p.yaml"))
        .arg("--trace")
        .arg(dir.join("t.csv"))
        .arg("--out")
        .arg(dir.join("o"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s = serde_json::from_slice(&fs::read(dir.join("o/summary.json")).unwrap()).unwrap();
    (dir, String::from_utf8(out).unwrap(), s)
}

/// A policy of many leaves: the table (and index.html) shows the leaves that saw packets or
/// drops and says how many others it left out; summary.json keeps every leaf. A small
/// policy's table shows its idle leaves too.
#[test]
fn replay_table_of_a_large_policy_shows_the_busy_leaves() {
    let (dir, table, s) = replay_flat("busy", 40, "arrive_ps,bytes,tag\n0,1500,3\n5,1500,17\n");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('l')).collect();
    assert_eq!(rows.len(), 3, "{table}"); // the header, l3 and l17
    assert!(
        rows[1].starts_with("l3 ") && rows[2].starts_with("l17 "),
        "{table}"
    );
    assert!(
        table.contains("(not shown: 38 leaves without packets or drops; summary.json"),
        "{table}"
    );
    let html = fs::read_to_string(dir.join("o/index.html")).unwrap();
    assert!(
        html.contains("Not shown: 38 leaves without packets or drops (summary.json"),
        "{html}"
    );
    assert!(!html.contains("<th>l0</th>"), "{html}");
    assert_eq!(s["leaves"].as_object().unwrap().len(), 40);
    let _ = fs::remove_dir_all(&dir);
}

/// Above 64 busy leaves the table shows the 64 busiest (packets sent and dropped), in policy
/// order, and says how many busy and idle ones it left out; summary.json keeps them all.
#[test]
fn replay_table_of_many_busy_leaves_shows_the_busiest() {
    // Leaves 0-69 are busy, leaf i with 1 + i % 35 packets: the 64 busiest are those with at
    // least 4 packets (leaves 3-34 and 38-69); 0-2 and 35-37 are busy but quieter; 70-99 idle.
    let mut trace = String::from("arrive_ps,bytes,tag\n");
    let mut t = 0;
    for i in 0..70 {
        for _ in 0..1 + i % 35 {
            trace += &format!("{t},100,{i}\n");
            t += 1;
        }
    }
    let (dir, table, s) = replay_flat("busiest", 100, &trace);
    let shown: Vec<usize> = table
        .lines()
        .filter_map(|l| l.strip_prefix('l')?.split(' ').next()?.parse().ok())
        .collect();
    let busiest: Vec<usize> = (3..35).chain(38..70).collect();
    assert_eq!(shown, busiest, "{table}");
    assert!(
        table.contains(
            "(not shown: 30 leaves without packets or drops; 6 leaves with no more packets \
             sent and dropped than the 64 shown; summary.json has every leaf)"
        ),
        "{table}"
    );
    let html = fs::read_to_string(dir.join("o/index.html")).unwrap();
    assert!(
        html.contains("<th>l69</th>") && !html.contains("<th>l2</th>"),
        "{html}"
    );
    assert_eq!(s["leaves"].as_object().unwrap().len(), 100);
    let _ = fs::remove_dir_all(&dir);
}

/// A CSV trace read from a pipe (`--trace /dev/stdin`) replays as the file does: the format
/// is told from the first bytes without reading them twice.
#[test]
fn replay_reads_a_csv_trace_from_a_pipe() {
    let out = std::env::temp_dir().join(format!("weft-pipe-{}", std::process::id()));
    let trace = fs::read(root().join("examples/traces/wfq-1-2-4.csv")).unwrap();
    weft()
        .args([
            "replay",
            "--quiet",
            "--policy",
            "examples/policies/wfq-1-2-4.yaml",
            "--trace",
            "/dev/stdin",
            "--out",
        ])
        .arg(&out)
        .write_stdin(trace)
        .assert()
        .success();
    let got = fs::read_to_string(out.join("departures.csv")).unwrap();
    let _ = fs::remove_dir_all(&out);
    let want = fs::read_to_string(root().join("examples/traces/wfq-1-2-4.expected.csv")).unwrap();
    assert!(got == want, "departures from a pipe differ from the file's");
}

/// A wide policy whose `policy dot` is far larger than a pipe's buffer (64 KiB).
fn wide_policy(dir: &Path) -> PathBuf {
    let mut text = String::from("weft: 1\nnodes:\n  - {name: root, type: wfq}\n");
    for i in 0..3000 {
        text += &format!("  - {{name: leaf{i}, type: leaf, parent: root, match: {{tag: {i}}}}}\n");
    }
    let p = dir.join("wide.yaml");
    fs::write(&p, text).unwrap();
    p
}

/// A reader that stops early (`weft … | head -1`) ends weft quietly with status 141, as
/// SIGPIPE ends a Unix tool, not with a panic; a replay's files are written all the same.
#[test]
fn a_closed_pipe_ends_weft_quietly() {
    use std::io::BufRead;
    let dir = scratch("closedpipe");
    let policy = wide_policy(&dir);
    let out = dir.join("out");
    let trace = dir.join("t.csv");
    // Every leaf sends a packet: the replay's table is long too.
    let mut rows = String::from("arrive_ps,bytes,tag\n");
    for i in 0..3000 {
        rows += &format!("{},100,{i}\n", i * 1000);
    }
    fs::write(&trace, rows).unwrap();
    let p = policy.to_str().unwrap();
    let replay = [
        "replay",
        "--json",
        "--policy",
        p,
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    for args in [
        &["policy", "dot", p][..],
        &["policy", "show", "--json", p],
        &replay,
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?}");
        // The reader goes away here.
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["sent"], 3000);
    fs::remove_dir_all(&dir).unwrap();
}

/// Output that cannot be written (a full disk) is an error, exit 1, not a panic nor a
/// silent success.
#[test]
fn a_full_stdout_is_an_error() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    for args in [
        &["policy", "check", "examples/policies/loom-fig1.yaml"][..],
        &["policy", "show", "examples/policies/loom-fig1.yaml"],
        &["completions", "bash"],
    ] {
        let done = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .current_dir(root())
            .args(args)
            .stdout(full())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to standard output"),
            "{args:?}: {stderr}"
        );
    }
}

/// A stderr that cannot be written (`2>/dev/full`) does not make weft panic (exit 101): the
/// diagnostics are lost, the exit status stands.
#[test]
fn a_full_stderr_is_not_a_panic() {
    let dir = scratch("fullstderr");
    let out = dir.join("out");
    let replay = [
        "replay",
        "--quiet",
        "--policy",
        "examples/policies/wfq-1-2-4.yaml",
        "--trace",
        "examples/traces/wfq-1-2-4.csv",
        "--out",
        out.to_str().unwrap(),
    ];
    for (args, code) in [
        (&replay[..], 0),
        (
            &["policy", "check", "examples/policies/invalid/cycle.yaml"],
            2,
        ),
        (&["policy", "check", "examples/policies/loom-fig1.yaml"], 0),
    ] {
        let done = std::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .current_dir(root())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(
                fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .output()
            .unwrap();
        assert_eq!(done.status.code(), Some(code), "{args:?}");
    }
    assert!(out.join("summary.json").is_file());
    fs::remove_dir_all(&dir).unwrap();
}

/// An output a replay cannot write (a file size limit: `ulimit -f`) exits 1, not 2 (the
/// input was fine), and the outputs written until then are removed.
#[test]
fn a_replay_that_cannot_write_its_outputs_exits_1_and_keeps_nothing() {
    let dir = scratch("efbig");
    let out = dir.join("out");
    // 50 blocks of 512 bytes: wfq-1-2-4's departures.csv is larger. SIGXFSZ ignored, so the
    // write fails with EFBIG instead of ending the process.
    let done = std::process::Command::new("sh")
        .current_dir(root())
        .args(["-c", "trap '' XFSZ; ulimit -f 50 && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_weft"))
        .args([
            "replay",
            "--quiet",
            "--policy",
            "examples/policies/wfq-1-2-4.yaml",
            "--trace",
            "examples/traces/wfq-1-2-4.csv",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot write {}",
            out.join("departures.csv").display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was kept"), "{stderr}");
    // The replay made `out`: it goes too.
    assert!(!out.exists(), "{stderr}");
    fs::remove_dir_all(&dir).unwrap();
}

/// A failed replay into a directory it made left that directory behind, empty, while it
/// said nothing was kept: the directories it made go too. One that was there before stays,
/// with what it held.
#[test]
fn a_failed_replay_removes_only_the_directories_it_made() {
    let dir = scratch("made");
    let bad = dir.join("bad.csv");
    fs::write(&bad, "arrive_ps,bytes,tag\n0,100,1\n5,xx,1\n").unwrap();
    let replay = |out: &Path| {
        weft()
            .args([
                "replay",
                "--quiet",
                "--policy",
                "examples/policies/wfq-1-2-4.yaml",
                "--trace",
            ])
            .arg(&bad)
            .arg("--out")
            .arg(out)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("bad.csv:3:"))
    };
    // New, with new parents: all removed, up to the directory that was there.
    let fresh = dir.join("a/b/out");
    replay(&fresh).stderr(predicate::str::contains(format!(
        "{} was removed (the replay had created it)",
        fresh.display()
    )));
    assert!(!dir.join("a").exists());
    assert!(dir.exists() && bad.exists());
    // There before, empty or not: kept, with what the user put there.
    let empty = dir.join("empty");
    fs::create_dir(&empty).unwrap();
    replay(&empty).stderr(predicate::str::contains(format!(
        "note: nothing was kept in {}: a replay that fails removes what it wrote",
        empty.display()
    )));
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);
    let mine = dir.join("mine");
    fs::create_dir_all(mine.join("sub")).unwrap();
    fs::write(mine.join("notes.txt"), "mine").unwrap();
    replay(&mine);
    assert_eq!(fs::read_to_string(mine.join("notes.txt")).unwrap(), "mine");
    assert!(mine.join("sub").is_dir());
    assert!(!mine.join("departures.csv").exists());
    // A new directory under one that was there: only the new one goes.
    replay(&mine.join("new"));
    assert!(!mine.join("new").exists() && mine.join("notes.txt").exists());
    fs::remove_dir_all(&dir).unwrap();
}

/// `--out` is made safe to reuse: a replay that would overwrite its own trace is refused
/// (the trace intact), `--out FILE` is named as a file, and a failed replay leaves no
/// mixture of two runs (an earlier run's summary would describe other departures).
#[test]
fn replay_out_directory_is_safe_to_reuse() {
    let dir = scratch("outdir");
    let good = root().join("examples/traces/wfq-1-2-4.csv");
    let policy = "examples/policies/wfq-1-2-4.yaml";
    let out = dir.join("out");
    let replay = |trace: &Path, out: &Path| {
        let mut c = weft();
        c.args(["replay", "--quiet", "--policy", policy, "--trace"])
            .arg(trace)
            .arg("--out")
            .arg(out);
        c.assert()
    };
    replay(&good, &out).success();
    // The same directory's departures as the next trace: refused, nothing touched.
    let own = out.join("departures.csv");
    let before = fs::read(&own).unwrap();
    replay(&own, &out)
        .code(2)
        .stderr(predicate::str::contains("would overwrite its own input"));
    assert_eq!(fs::read(&own).unwrap(), before);
    // A trace that fails at its 3001st row, into the same directory: nothing is left (the
    // earlier run's outputs are gone, and so are the new departures and drops, which looked
    // complete), and stderr says so.
    let text = fs::read_to_string(&good).unwrap();
    let mut bad: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .take(3000)
        .map(|l| format!("{l}\n"))
        .collect();
    bad += "bad,1,1,1\n";
    let bad_path = dir.join("bad.csv");
    fs::write(&bad_path, bad).unwrap();
    replay(&bad_path, &out)
        .code(2)
        .stderr(predicate::str::contains("bad.csv:3001:"))
        .stderr(predicate::str::contains(format!(
            "note: nothing was kept in {}",
            out.display()
        )));
    assert_eq!(fs::read_dir(&out).unwrap().count(), 0);
    // `--out` naming a file.
    replay(&good, &bad_path)
        .code(2)
        .stderr(predicate::str::contains("a file, not a directory"));
    fs::remove_dir_all(&dir).unwrap();
}

/// A trace error names the line a text editor shows: with CRLF line ends, blank lines,
/// comments before the header, and a blank line where the header should be.
#[test]
fn trace_errors_name_the_editors_line() {
    let dir = scratch("lines");
    let cases = [
        (
            "crlf",
            "arrive_ps,bytes,tag\r\n0,100,1\r\n1,x,1\r\n",
            ":3: `bytes` = `x`",
        ),
        (
            "blank",
            "arrive_ps,bytes,tag\n0,100,1\n\n\n1,x,1\n",
            ":5: `bytes` = `x`",
        ),
        (
            "crlf-blank",
            "arrive_ps,bytes,tag\r\n\r\n0,100,1\r\n\r\n1,x,1\r\n",
            ":5: `bytes`",
        ),
        (
            "comments",
            "# a\narrive_ps,bytes,zzz\n0,100,1\n",
            ":2: unknown column `zzz`",
        ),
        (
            "comment-rows",
            "arrive_ps,bytes\n# b\n\n# c\n1,x\n",
            ":5: `bytes`",
        ),
        (
            "width",
            "arrive_ps,bytes,tag\n\n0,100\n",
            ":3: this row has 2 fields",
        ),
        (
            "no-header",
            "\n\n  \narrive_ps,bytes\n0,100\n",
            ":3: column 1 of the header has no name",
        ),
        (
            "overflow",
            "arrive_ps,bytes,flow\n0,100,18446744073709551616\n",
            ":2: `flow` = `18446744073709551616` is larger than 2^64 − 1",
        ),
        (
            "alias",
            "arrive_ps,bytes,app,dport\n0,100,80,81\n",
            ":1: columns `app` and `dport` are the same field (`dport`)",
        ),
    ];
    for (name, text, want) in cases {
        let trace = dir.join(format!("{name}.csv"));
        fs::write(&trace, text).unwrap();
        weft()
            .args([
                "replay",
                "--quiet",
                "--policy",
                "examples/policies/wfq-1-2-4.yaml",
            ])
            .arg("--trace")
            .arg(&trace)
            .arg("--out")
            .arg(dir.join("out"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("{name}.csv{want}")));
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// `weft run` refuses, before touching any interface, what would misbehave once running: the
/// uplink given as a tenant's interface too (its replies were sent back out on the uplink),
/// sizes that would allocate terabytes (memory grew until the machine ran out, and SIGTERM
/// went unanswered meanwhile), and values the help gives a range for. Each is a usage error
/// (exit 2) naming the option.
#[test]
fn run_refuses_an_uplink_tenant_and_absurd_sizes() {
    let base = [
        "run",
        "--policy",
        "examples/policies/two-tenants.yaml",
        "--uplink",
        "up",
        "--rate",
        "100mbit",
        "--tenant",
        "a=t1",
    ];
    let cases: [(&[&str], &str); 6] = [
        (&["--tenant", "b=up"], "`up` is the uplink"),
        (
            &["--tenant", "b=t2", "--buffers", "4000000000"],
            "--buffers",
        ),
        (&["--tenant", "b=t2", "--buffers", "0"], "--buffers"),
        (&["--tenant", "b=t2", "--ring", "100000000"], "--ring"),
        (
            &[
                "--tenant",
                "b=t2",
                "--ring",
                "65536",
                "--max-queues",
                "1048576",
            ],
            "at most 33554432",
        ),
        (&["--tenant", "b=t2", "--slice-us", "5"], "--slice-us"),
    ];
    for (extra, says) in cases {
        let out = weft().args(base).args(extra).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
    }
}

/// `weft run` warns, before it opens anything, about a policy that would drop a tenant's
/// frames (no leaf takes tenant 1 or 2) and about tenant ids it matches that no `--tenant`
/// gives (all traffic was dropped as `unclassified` without a word). The run itself then
/// fails on the missing interfaces here.
#[test]
fn run_warns_when_no_leaf_takes_a_tenant() {
    let dir = scratch("tenant-warn");
    let policy = dir.join("p.yaml");
    fs::write(
        &policy,
        "weft: 1\nlink: {rate: 1gbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, weight: 1, match: {tenant: [1, 7]}}\n  - {name: b, type: leaf, parent: root, weight: 1, match: {tenant: 9}}\n",
    )
    .unwrap();
    let out = weft()
        .args(["run", "--policy"])
        .arg(&policy)
        .args(["--uplink", "wqnone0", "--rate", "1gbit"])
        .args(["--tenant", "a=wqnone1", "--tenant", "b=wqnone2"])
        .args(["--ctl"])
        .arg(dir.join("c.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("takes tenant 2 (b on wqnone2)") && !err.contains("takes tenant 1 "),
        "{err}"
    );
    assert!(
        err.contains("matches tenant 7, 9 but only 2 tenants are given"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

/// An update timed after the last frame has left changed nothing (a time in the wrong unit,
/// most likely): the replay says so, and the one within the trace goes unmentioned.
#[test]
fn replay_warns_of_an_update_after_the_end() {
    let out = scratch("late-update");
    replay_quiet(
        "examples/policies/loom-fig11.yaml",
        Path::new("examples/traces/loom-fig11.csv"),
        &out,
    )
    .args(["--update", "10s:j1.weight=2", "--update", "1ms:j2.weight=2"])
    .assert()
    .success()
    .stderr(predicate::str::contains(
        "warning: --update `10s:j1.weight=2`: after the last frame left",
    ))
    .stderr(predicate::str::contains("1ms:j2").not());
    let _ = fs::remove_dir_all(&out);
}

/// A bad input's diagnostics stay bounded: a node name of a megabyte is refused by its
/// length and quoted by its first characters only, and of 300 unknown keys 100 are printed
/// and the rest counted; in the annotated and the plain form.
#[test]
fn diagnostics_stay_bounded_on_huge_inputs() {
    let big = format!(
        "weft: 1\nnodes:\n  - {{name: root, type: wfq}}\n  - {{name: {}, type: leaf, parent: root}}\n",
        "x".repeat(1 << 20)
    );
    let keys: Vec<String> = (0..300).map(|i| format!("k{i}: 1")).collect();
    let many = format!(
        "weft: 1\nnodes:\n  - {{name: root, type: wfq, {}}}\n  - {{name: a, type: leaf, parent: root}}\n",
        keys.join(", ")
    );
    for plain in [false, true] {
        let mut args = vec!["policy", "check"];
        if plain {
            args.push("--plain");
        }
        args.push("-");
        let out = weft().args(&args).write_stdin(big.clone()).assert().code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(err.len() < 16 << 10, "{} bytes of diagnostics", err.len());
        assert!(err.contains("a name has at most 256"), "{err}");
        let out = weft()
            .args(&args)
            .write_stdin(many.clone())
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(err.contains("and 200 more diagnostics"), "{err}");
    }
}

/// Standard input longer than a policy may be (`yes | weft policy check -` never ends) is
/// refused once the limit is passed, saying so, instead of read until memory runs out.
#[test]
fn policy_from_standard_input_is_read_up_to_the_limit() {
    let too_long = vec![b'y'; weft_core::policy::MAX_POLICY_FILE_BYTES as usize + 10];
    weft()
        .args(["policy", "check", "--plain", "-"])
        .write_stdin(too_long)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("standard input holds more than"));
}

/// `-` reads the policy from standard input (named `<stdin>` in diagnostics), for every
/// `weft policy` command; `--max-depth 0` is refused as a file's `max_depth: 0` is.
#[test]
fn policy_commands_read_standard_input() {
    let text = fs::read(root().join("examples/policies/wfq-1-2-4.yaml")).unwrap();
    weft()
        .args(["policy", "check", "-"])
        .write_stdin(text.clone())
        .assert()
        .success()
        .stdout(predicate::str::contains("-: ok: 4 nodes"));
    weft()
        .args(["policy", "show", "--json", "-"])
        .write_stdin(text)
        .assert()
        .success()
        .stdout(predicate::str::contains("\"name\": \"wfq-1-2-4\""));
    weft()
        .args(["policy", "check", "--plain", "-"])
        .write_stdin("weft: 1\nnodes: [{name: r, type: wfq, wieght: 1}]\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("<stdin>:2:30: error[unknown-key]"));
    weft()
        .args([
            "policy",
            "check",
            "--max-depth",
            "0",
            "examples/policies/wfq-1-2-4.yaml",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--max-depth"));
}

/// Rows larger than the link's MTU are replayed as they are, with a warning that counts them
/// (a capture of offloaded segments, or `bytes` in another unit); rows within it get none.
#[test]
fn replay_warns_of_packets_larger_than_the_mtu() {
    let dir = scratch("oversize");
    let trace = dir.join("t.csv");
    fs::write(
        &trace,
        "arrive_ps,bytes,tag\n0,1500,1\n0,65000,1\n0,9000,2\n",
    )
    .unwrap();
    replay_quiet(
        "examples/policies/senic-fig4.yaml",
        &trace,
        &dir.join("out"),
    )
    .assert()
    .success()
    // `--quiet`: the warning all the same.
    .stderr(predicate::str::contains("warning: 2 packets of"))
    .stderr(predicate::str::contains(
        "larger than the link's MTU (1514 B; the largest 65000 B)",
    ));
    let _ = fs::remove_dir_all(&dir);
}

/// `--quiet` silences the progress and the notes on stderr (the files written), never a
/// warning about the input or an error; the table (or `--json`'s summary) is the data and
/// still goes to stdout. It used to silence only the progress: `wrote ...` was printed
/// all the same.
#[test]
fn replay_quiet_keeps_only_warnings_and_errors() {
    let dir = scratch("quiet");
    let trace = dir.join("t.csv");
    // A row over the MTU: a warning.
    fs::write(&trace, "arrive_ps,bytes,tag\n0,1500,1\n0,9000,2\n").unwrap();
    let run = |args: &[&str]| {
        let o = weft()
            .args([
                "replay",
                "--policy",
                "examples/policies/senic-fig4.yaml",
                "--trace",
            ])
            .arg(&trace)
            .arg("--out")
            .arg(dir.join("out"))
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let warning = "warning: 1 packets of";
    let (code, out, err) = run(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("2 packets, 2 sent"), "{out}");
    assert!(err.contains("wrote ") && err.contains(warning), "{err}");
    let (code, out, err) = run(&["--quiet"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("2 packets, 2 sent"), "{out}");
    assert!(
        err.starts_with(warning) && err.lines().count() == 1,
        "{err}"
    );
    let (code, out, err) = run(&["--quiet", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["sent"], 2, "{out}");
    assert!(
        err.starts_with(warning) && err.lines().count() == 1,
        "{err}"
    );
    // An error, quiet or not.
    fs::write(&trace, "arrive_ps,bytes,tag\n0,x,1\n").unwrap();
    let (code, out, err) = run(&["--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(out, "");
    assert!(
        err.starts_with("error: ") && err.contains("t.csv:2:"),
        "{err}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Every `weft policy` command reads `-` as standard input, and says so in its help; the
/// classify help names every protocol `proto=` takes.
#[test]
fn policy_help_names_stdin_and_every_protocol() {
    for cmd in ["check", "show", "dot", "classify"] {
        weft()
            .args(["policy", cmd, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("`-`: standard input"));
    }
    let help = weft()
        .args(["policy", "classify", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for proto in ["tcp", "udp", "icmp", "icmpv6", "sctp"] {
        assert!(help.contains(proto), "{proto}: {help}");
        weft()
            .args(["policy", "classify", "-", "-p"])
            .arg(format!("proto={proto}"))
            .write_stdin("weft: 1\nnodes:\n  - {name: root, type: leaf}\n")
            .assert()
            .success()
            .stdout(predicate::str::contains(format!("packet proto={proto}")));
    }
}

/// Standard input can be read once: `weft policy check - -` is a usage error, not a valid
/// policy followed by an "empty file".
#[test]
fn check_refuses_standard_input_twice() {
    weft()
        .args(["policy", "check", "-", "-"])
        .write_stdin("weft: 1\nnodes:\n  - {name: root, type: leaf}\n")
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "`-` (standard input) is given 2 times",
        ));
}

/// `--attach POINT=-` is a usage error that says standard input is for the policy only,
/// not an unreadable sub-policy file named `-`.
#[test]
fn attach_from_standard_input_is_a_usage_error() {
    weft()
        .args([
            "policy",
            "check",
            "examples/policies/loom-fig1.yaml",
            "--attach",
            "vm2=-",
        ])
        .write_stdin("weft: 1\nnodes:\n  - {name: root, type: leaf}\n")
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "--attach `vm2=-`: a sub-policy is read from a file, not from standard input",
        ));
}

/// `--trace -` reads the trace from standard input (as `--policy -` reads the policy), named
/// `<stdin>` in messages; it used to be "cannot read -: No such file or directory".
#[test]
fn replay_reads_the_trace_from_standard_input() {
    let dir = scratch("stdin-trace");
    let trace = fs::read(root().join("examples/traces/senic-fig4.csv")).unwrap();
    let from_file = dir.join("file");
    replay_quiet(
        "examples/policies/senic-fig4.yaml",
        Path::new("examples/traces/senic-fig4.csv"),
        &from_file,
    )
    .assert()
    .success();
    let from_stdin = dir.join("stdin");
    replay_quiet(
        "examples/policies/senic-fig4.yaml",
        Path::new("-"),
        &from_stdin,
    )
    .write_stdin(trace)
    .assert()
    .success();
    assert_eq!(
        fs::read(from_file.join("departures.csv")).unwrap(),
        fs::read(from_stdin.join("departures.csv")).unwrap()
    );
    replay_quiet(
        "examples/policies/senic-fig4.yaml",
        Path::new("-"),
        &dir.join("bad"),
    )
    .write_stdin("arrive_ps,bytes,tag\n0,x,1\n")
    .assert()
    .code(2)
    .stderr(predicate::str::contains("<stdin>:2: `bytes`"));
    // Not both the policy and the trace.
    weft()
        .args(["replay", "--policy", "-", "--trace", "-", "--out"])
        .arg(dir.join("both"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("standard input can give only one"));
    let _ = fs::remove_dir_all(&dir);
}

/// A trace with a header and no rows replays, with a warning: most likely the wrong file.
#[test]
fn replay_warns_of_a_trace_without_packets() {
    let dir = scratch("empty-trace");
    let trace = dir.join("t.csv");
    fs::write(&trace, "arrive_ps,bytes,tag\n").unwrap();
    replay_quiet(
        "examples/policies/senic-fig4.yaml",
        &trace,
        &dir.join("out"),
    )
    .assert()
    .success()
    .stderr(predicate::str::contains(
        "holds no packets (a header and no rows)",
    ));
    let _ = fs::remove_dir_all(&dir);
}
