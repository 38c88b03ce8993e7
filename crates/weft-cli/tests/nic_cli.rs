//! `weft run`, `weft ctl` and `weft testbed` argument handling (no root needed): usage and
//! input errors exit 2 with a message, a missing daemon exits 1.

use assert_cmd::Command;
use predicates::str::contains;

fn weft() -> Command {
    Command::cargo_bin("weft").unwrap()
}

#[test]
fn run_refuses_bad_arguments_with_exit_2() {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/loom-fig1.yaml"
    );
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "500bps", "--tenant", "a=t",
        ])
        .assert()
        .code(2)
        .stderr(contains("ambiguous"));
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a",
        ])
        .assert()
        .code(2)
        .stderr(contains("NAME=IFACE"));
    let bad = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/invalid/ambiguous-unit.yaml"
    );
    weft()
        .args([
            "run", "--policy", bad, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t",
        ])
        .assert()
        .code(2)
        .stderr(contains("invalid policy"));
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t",
        ])
        .args(["--rogue", "3"])
        .assert()
        .code(2)
        .stderr(contains("only 1 tenants"));
}

#[test]
fn ctl_without_daemon_exits_1_and_bad_reload_exits_2() {
    let sock = std::env::temp_dir().join(format!("weft-no-daemon-{}.sock", std::process::id()));
    weft()
        .args(["ctl", "stats", "--socket"])
        .arg(&sock)
        .assert()
        .code(1)
        .stderr(contains("is `weft run` running?"));
    let bad = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/invalid/ambiguous-unit.yaml"
    );
    weft()
        .args(["ctl", "reload", bad, "--socket"])
        .arg(&sock)
        .assert()
        .code(2)
        .stderr(contains("the running one is untouched"));
}

#[test]
fn testbed_refuses_unknown_experiment_and_bad_prefix() {
    weft()
        .args(["testbed", "run", "nope"])
        .assert()
        .code(2)
        .stderr(contains("fair-1v8"));
    weft()
        .args(["testbed", "down", "--prefix", "a/b"])
        .assert()
        .code(2);
}
