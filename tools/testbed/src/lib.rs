//! weft-testbed: a testbed of network namespaces for real-traffic experiments, behind
//! `weft testbed` (a tool of the repository, not published: it runs `ip`, `tc`, `apt-get`
//! and real applications, which no library user of weft wants linked in). Tenant
//! namespaces `P-t1..P-tN` → software-NIC namespace `P-nic` → uplink → receiver namespace
//! `P-rx`, one veth pair per link, all on 10.77.0.0/24 (tenant i is 10.77.0.i, the
//! receiver 10.77.0.100). Tenant and receiver links have checksum offload, TSO and GSO off
//! (frames cross the software NIC as real, complete, MTU-sized frames).
//!
//! Two schedulers on the same wires:
//! * **weft**: `weft run` in `P-nic` (no addresses there, so the kernel forwards nothing);
//! * **HTB**: a Linux bridge in `P-nic` and HTB on the uplink's egress, one class per tenant
//!   with `rate` in the ratio of the weights and `ceil` the link (borrowing shares spare
//!   capacity in the ratio of rates), u32 filters on the tenant's source address, a
//!   1000-packet pfifo per class (the weft policy's leaves hold 1000 packets too), and
//!   `stab overhead 20` so both count the same 20 bytes of preamble and gap per frame.
//!
//! Applications are real: iperf3 (bulk TCP). Every namespace and process started is
//! removed by guards' `Drop`, also on errors and panics ([`Testbed`], [`Child`]).
//!
//! The files: `topo.rs` (the namespaces and links, the children), `teardown.rs` (removing
//! them, also on a signal), `experiment.rs` (what an experiment is), `run.rs` (running one
//! and writing its report), `apps.rs` (sockperf, memaslap, the CPU others take), `stress.rs`
//! (the robustness experiments' tools), `latency.rs` (the latency experiments), `results.rs`
//! (what `report.json` and the benchmark's JSON hold, as types), `report.rs` (the report as
//! Markdown), `bench.rs` (the forwarding benchmark).

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weft_core::stats::jain;
use weft_nic::ctl::{Reply, Request};
use weft_nic::stats::{PortStats, Stats};

mod apps;
mod bench;
mod experiment;
mod latency;
mod report;
mod results;
mod run;
mod stress;
mod teardown;
#[cfg(test)]
mod tests;
mod topo;

pub use self::apps::*;
pub use self::bench::*;
pub use self::experiment::*;
use self::latency::*;
pub use self::report::*;
pub use self::results::*;
pub use self::run::*;
pub use self::stress::*;
pub use self::teardown::*;
pub use self::topo::*;

/// The daemon's answer to `req` on its control socket `sock`, as the JSON it sent (what
/// the reports keep), or null without an answer that reads.
fn ask_json(sock: &Path, req: &Request) -> Value {
    weft_nic::ctl::request(sock, req).map_or(Value::Null, |r| r.to_json())
}

/// The daemon's stats (`ctl stats`), or `None` without an answer that reads as them (the
/// reports keep them as the daemon sent them: `Stats`'s serde form, or null).
fn ask_stats(sock: &Path) -> Option<Stats> {
    match weft_nic::ctl::request(sock, &Request::Stats) {
        Ok(Reply::Stats(s)) => Some(*s),
        _ => None,
    }
}

/// A command's failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TestbedError(pub String);

type R<T> = Result<T, TestbedError>;

fn sh(args: &[&str]) -> R<String> {
    output(Command::new(args[0]).args(&args[1..]), args)
}

/// Runs `c` (stdin closed) to completion: its stdout, or an error naming `args` with its
/// stderr.
fn output(c: &mut Command, args: &[&str]) -> R<String> {
    let o = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestbedError(format!("{}: {e}", args.join(" "))))?;
    if !o.status.success() {
        return Err(TestbedError(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn nsx(ns: &str, args: &[&str]) -> R<String> {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    sh(&v)
}

/// A prefix must be short (interface and namespace names) and plain.
pub fn check_prefix(p: &str) -> Result<(), String> {
    if p.is_empty() || p.len() > 10 || !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "--prefix `{p}`: 1 to 10 letters, digits or underscores"
        ));
    }
    Ok(())
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    weft_sys::process::is_root()
}

/// Why the testbed cannot run here, if it cannot (not root, no `ip netns`, tools missing).
pub fn missing_prerequisite() -> Option<String> {
    if !is_root() {
        return Some("not root".into());
    }
    for t in ["ip", "tc", "ethtool", "iperf3"] {
        if sh(&["sh", "-c", &format!("command -v {t}")]).is_err() {
            return Some(format!("`{t}` not found"));
        }
    }
    None
}

/// Installs iperf3 and ethtool with apt-get when missing (root only).
pub fn install_tools() {
    let missing: Vec<&str> = ["iperf3", "ethtool"]
        .into_iter()
        .filter(|t| sh(&["sh", "-c", &format!("command -v {t}")]).is_err())
        .collect();
    if missing.is_empty() {
        return;
    }
    eprintln!("testbed: installing {} with apt-get", missing.join(" "));
    let _ = sh(&["sh", "-c", "apt-get update -qq >/dev/null 2>&1 || true"]);
    let mut v = vec!["apt-get", "install", "-y", "-qq"];
    v.extend(missing);
    if let Err(e) = Command::new(v[0])
        .args(&v[1..])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
    {
        eprintln!("testbed: apt-get failed: {e}");
    }
}

/// Where `weft testbed bench` writes its FIFO policy: removed when it ends and by
/// [`down_all`] (not by [`down`]: each configuration's testbed is torn down while the bench
/// still needs the file).
pub fn bench_dir(prefix: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("weft-bench-{prefix}"))
}
