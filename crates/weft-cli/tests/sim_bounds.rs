//! `weft sim` within its bounds, from the outside: a scenario that offers too much is
//! refused when loading (exit 2), a run that reaches its event budget stops (exit 2), both
//! saying how to raise the bound; `--progress` reports on a stderr that is not a terminal;
//! a scenario that is not a regular file is refused, not read for ever. Counted in events
//! and refusals, never in wall time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-sim-bounds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A scenario of `flows` unlimited UDP flows (each offers twice the link rate) on a
/// 10 Gbit/s link, with `head` (duration, limits) first, written in `dir`.
fn scenario(dir: &Path, flows: u32, head: &str) -> PathBuf {
    let p = dir.join("udp.yaml");
    std::fs::write(
        &p,
        format!(
            "{head}\nnics: [loom]\nhost: {{cores: 4}}\npolicy_inline: |\n  weft: 1\n  name: p\n  \
             link: {{rate: 10gbit}}\n  nodes:\n    - {{name: root, type: wfq}}\n    - {{name: a, \
             type: leaf, parent: root, match: {{tag: 0}}}}\ntenants:\n  - name: t\n    meta: \
             {{tag: 0}}\n    apps:\n      - {{name: u, kind: udp, rate: unlimited, flows: \
             {flows}, cores: [0, 1, 2, 3]}}\n"
        ),
    )
    .unwrap();
    p
}

/// `weft sim FILE --out DIR/out ARGS`, given at most a minute (a run away fails the test).
fn sim(file: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("sim")
        .arg(file)
        .arg("--out")
        .arg(dir.join("out"))
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The reported case scaled down (10,000 flows offered 20,000 times the link): 40 flows
/// offer 80 times, past the default 64: exit 2 with the file, line, flows and figures;
/// `--max-offered-load` lets it load, and `--max-events` then stops the run.
#[test]
fn too_much_offered_load_and_an_exhausted_budget_exit_2() {
    let d = tmp("load");
    let f = scenario(&d, 40, "duration: 1ms");
    let o = sim(&f, &d, &["--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    for want in [
        "udp.yaml:15:",
        "the applications offer 80.0 times the link rate",
        "t/u: 40 UDP flows × 20gbit (`unlimited`)",
        "at most 64 times the link rate by default",
        "--max-offered-load N",
    ] {
        assert!(e.contains(want), "{want:?} not in: {e}");
    }
    assert!(!d.join("out").exists(), "refused before any output");
    let o = sim(
        &f,
        &d,
        &[
            "--quiet",
            "--max-offered-load",
            "80",
            "--max-events",
            "5000",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    for want in [
        ": loom: the run reached its budget of 5000 events (--max-events) at ",
        "of 1ms simulated",
        "Raise the budget with `--max-events N`",
    ] {
        assert!(e.contains(want), "{want:?} not in: {e}");
    }
    // A budget of nothing is refused by the options.
    let o = sim(&f, &d, &["--quiet", "--max-events", "0"]);
    assert_eq!(o.status.code(), Some(2));
    // Within both bounds, the run ends and writes its report.
    let f = scenario(&d, 40, "duration: 20us\nlimits: {max_offered_load: 80}");
    let o = sim(&f, &d, &["--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.join("out/summary.json").exists());
    let _ = std::fs::remove_dir_all(&d);
}

/// `--progress` on a stderr that is not a terminal (here a pipe): lines `sim: MODEL (I of
/// N): DONE of TOTAL UNIT simulated, E events (ALL in all), S s`, the last marked done;
/// without it, no such line.
#[test]
fn progress_lines_on_a_pipe() {
    let d = tmp("progress");
    let f = scenario(&d, 2, "duration: 200us");
    let o = sim(&f, &d, &["--progress", "--nic", "loom,mq"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("sim: ")).collect();
    let last = lines
        .last()
        .unwrap_or_else(|| panic!("no progress line in: {e}"));
    assert!(
        last.starts_with("sim: mq (2 of 2): 200.000 of 200 us simulated, ")
            && last.ends_with(" s (done)"),
        "{last}"
    );
    // The events: mq's, then both models' together.
    let num = |after: &str| -> u64 {
        let rest = &last[last.find(after).unwrap() + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (mq, all) = (num("simulated, "), num("events ("));
    assert!(mq > 1000 && all > mq, "{last}");
    // The closing note counts the same events.
    assert!(e.contains(&format!("({all} events) simulated in")), "{e}");
    let o = sim(&f, &d, &[]);
    assert!(o.status.success());
    assert!(!stderr(&o).lines().any(|l| l.starts_with("sim: ")));
    // --progress and --quiet contradict each other.
    assert_eq!(
        sim(&f, &d, &["--progress", "--quiet"]).status.code(),
        Some(2)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A scenario that is a FIFO is refused at once (it was read until a writer closed it,
/// for ever without one), and so is a device: exit 2 naming the file and the limit.
#[test]
fn a_scenario_that_is_not_a_regular_file_exits_2() {
    let d = tmp("fifo");
    let fifo = d.join("s.yaml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for f in [fifo.as_path(), Path::new("/dev/zero")] {
        let o = sim(f, &d, &["--quiet"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains(&format!("{}: it is a ", f.display()))
                && e.contains("not a regular file")
                && e.contains("at most 16mb (16777216 bytes)"),
            "{e}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}
