//! What the real-traffic tests share (`tests/testbed.rs`, `tests/afxdp.rs`): why they cannot
//! run here, the guard that removes a testbed's namespaces and report directory, running
//! `weft testbed run` under a time limit, the daemon's stats in a report, and the dataplane's
//! conservation check.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `weft` binary of this build.
pub fn weft() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_weft"))
}

/// Why the namespace tests cannot run here, if they cannot: `WEFT_SKIP_NETNS`, not root,
/// tools missing (installed with apt-get when possible), no network namespaces or no veth.
/// The probe namespace is `PROBE<pid>`.
pub fn skip_reason(probe: &str) -> Option<String> {
    if std::env::var_os("WEFT_SKIP_NETNS").is_some() {
        return Some("WEFT_SKIP_NETNS is set".into());
    }
    if !weft_testbed::is_root() {
        return Some("not root (network namespaces need CAP_SYS_ADMIN)".into());
    }
    weft_testbed::install_tools();
    if let Some(r) = weft_testbed::missing_prerequisite() {
        return Some(r);
    }
    let probe = format!("{probe}{}", std::process::id() % 100_000);
    let ok = Command::new("ip")
        .args(["netns", "add", &probe])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let veth = ok
        && Command::new("ip")
            .args([
                "-n", &probe, "link", "add", "name", "pa", "type", "veth", "peer", "name", "pb",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    if !ok {
        return Some("`ip netns add` failed (no network namespaces here)".into());
    }
    if !veth {
        return Some("cannot create veth pairs here".into());
    }
    None
}

/// Removes the testbed's namespaces on drop (also when the test panics), and its report
/// directory unless the test failed (kept for the post-mortem).
pub struct Down(pub String, pub PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(weft())
            .args(["testbed", "down", "--prefix", &self.0])
            .status();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
}

/// Runs `weft testbed run EXPERIMENT --only weft --json --prefix PREFIX --seconds SECONDS
/// --rate 500mbit EXTRA...`, killed after `limit`; the report.
pub fn run_experiment(
    experiment: &str,
    prefix: &str,
    seconds: u32,
    limit: Duration,
    extra: &[&str],
) -> Value {
    println!("{experiment}: uplink 500mbit {}", extra.join(" "));
    let out = std::env::temp_dir().join(format!("weft-testbed-{prefix}"));
    let _down = Down(prefix.to_string(), out.clone());
    let mut child = Command::new(weft())
        .args(["testbed", "run", experiment, "--only", "weft", "--json"])
        .args(["--prefix", prefix, "--seconds", &seconds.to_string()])
        .args(["--rate", "500mbit"])
        .args(extra)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn weft testbed run");
    let t = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weft testbed run {experiment} took longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().expect("output");
    assert!(o.status.success(), "weft testbed run {experiment} failed");
    serde_json::from_slice(&o.stdout).expect("report JSON")
}

/// A report result's `weft_stats` (the daemon's last `ctl stats`), read as
/// [`weft_nic::stats::Stats`]: a field missing or renamed fails the test naming it, where
/// indexing the JSON read it as null (and an absent count as none).
pub fn weft_stats(w: &Value) -> weft_nic::stats::Stats {
    let s = &w["weft_stats"];
    weft_nic::stats::Stats::from_json(s).unwrap_or_else(|e| panic!("weft_stats: {e}: {s}"))
}

/// Conservation at quiescence ([`weft_nic::stats::Stats::check_balance`]) and nothing
/// left queued.
pub fn assert_balanced(s: &weft_nic::stats::Stats) {
    let text = || serde_json::to_string(s).unwrap_or_default();
    if let Err(e) = s.check_balance() {
        panic!("{e}: {}", text());
    }
    assert_eq!(s.dataplane.backlog, 0, "{}", text());
}
