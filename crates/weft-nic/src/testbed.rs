//! A testbed of network namespaces for real-traffic experiments: tenant
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

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weft_core::stats::jain;

use crate::ctl::Request;

/// The daemon's answer to `req` on its control socket `sock`, as the JSON it sent (what
/// the reports keep), or null without an answer that reads.
fn ask_json(sock: &Path, req: &Request) -> Value {
    crate::ctl::request(sock, req).map_or(Value::Null, |r| r.to_json())
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

/// [`down`], and the directory a killed `weft testbed bench` left ([`bench_dir`]): what
/// `weft testbed down` and an interrupted testbed clean up.
pub fn down_all(prefix: &str) -> Removed {
    let _ = std::fs::remove_dir_all(bench_dir(prefix));
    down(prefix)
}

/// Deletes every namespace named `prefix-*` (killing the processes inside first) and the
/// control sockets a killed daemon may have left. What a testbed's setup and teardown run;
/// the benchmark's directory stays (see [`down_all`]).
pub fn down(prefix: &str) -> Removed {
    let mut removed = Removed::default();
    for f in [
        format!("weft-testbed-{prefix}.sock"),
        format!("weft-bench-{prefix}.sock"),
    ] {
        let _ = std::fs::remove_file(std::env::temp_dir().join(f));
    }
    let list = sh(&["ip", "netns", "list"]).unwrap_or_default();
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if name.starts_with(&format!("{prefix}-")) {
            // Before it goes: the namespace's inode names the lock files of the interfaces
            // a `weft run` claimed there, which SIGKILL leaves behind.
            let ino = std::fs::metadata(Path::new("/run/netns").join(name))
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .ok();
            if let Ok(pids) = sh(&["ip", "netns", "pids", name]) {
                let mut killed = Vec::new();
                for pid in pids.split_whitespace() {
                    if let Ok(p) = pid.parse::<u32>() {
                        weft_sys::process::kill(p);
                        killed.push(p);
                    }
                }
                removed.killed += killed.len();
                wait_gone(&killed);
            }
            let _ = sh(&["ip", "netns", "del", name]);
            if let Some(ino) = ino {
                remove_claims(ino);
            }
            removed.namespaces.push(name.to_string());
        }
    }
    removed
}

/// The signal that interrupted this process's testbed ([`tear_down_on_signal`]; 0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// SIGKILLs every descendant of this process (found through /proc), children first;
/// returns how many.
fn kill_descendants() -> usize {
    let me = std::process::id();
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`; COMM may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(c, pp)| pp == p && c != me)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    let mut killed = Vec::new();
    for &pid in &found[1..] {
        if weft_sys::process::kill(pid) {
            killed.push(pid);
        }
    }
    wait_gone(&killed);
    killed.len()
}

/// Waits, at most two seconds, until every process of `pids` has exited (gone, or a zombie
/// whose parent has yet to reap it). SIGKILL takes effect at once, but a process releasing
/// its memory and sockets (a `weft run` unmapping its rings) still shows in `/proc` as
/// running for some milliseconds: whoever looks right after a teardown must not find it.
fn wait_gone(pids: &[u32]) {
    let exited = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    };
    let t = Instant::now();
    while !pids.iter().all(exited) && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The signal [`tear_down_on_signal`] caught, if one came.
fn interrupted() -> Option<i32> {
    Some(INTERRUPTED.load(Ordering::Relaxed)).filter(|&s| s != 0)
}

/// After a signal [`tear_down_on_signal`] caught, never returns: its thread is tearing the
/// testbed down and ends the process with 128 + the signal's number. Otherwise returns at
/// once. The main thread calls it when its work ends, which a signal may have cut short
/// (`interrupted by signal 15`): ending the process there would exit 1 before the teardown
/// is done, and leave part of the testbed behind.
pub fn wait_if_interrupted() {
    if interrupted().is_some() {
        loop {
            std::thread::park();
        }
    }
}

/// From now on SIGINT, SIGTERM or SIGHUP tear down everything under `prefix` ([`down`]: the
/// processes in its namespaces, among them `weft run` and the applications, the namespaces
/// and the control sockets), say so on stderr and exit with 128 + the signal's number, as a
/// shell reports a process the signal killed. Without it the signal kills only this process
/// and leaves all of that behind (`weft testbed run` and `bench`, which start them). The
/// handler only records the signal; a thread of its own does the work (Ctrl-C also reaches
/// the children, whose exits the main thread may be handling meanwhile).
pub fn tear_down_on_signal(prefix: &str) -> R<()> {
    let prefix = prefix.to_string();
    std::thread::Builder::new()
        .name("weft-testbed-signals".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(20));
            let Some(sig) = interrupted() else { continue };
            let name = match sig {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            eprintln!("testbed: {name}: deleting {prefix}-* and the processes in them");
            // This process's own children first (`weft run`, the applications): one started
            // just before a namespace is deleted would run on, unseen, in the deleted
            // namespace. Twice, as the main thread may have been starting a process or
            // making a namespace meanwhile (it starts and makes no more once the signal is
            // recorded: [`Child::spawn`] and [`Testbed::up`] refuse).
            let mut r = Removed {
                killed: kill_descendants(),
                ..down_all(&prefix)
            };
            std::thread::sleep(Duration::from_millis(50));
            let killed = kill_descendants();
            let again = down_all(&prefix);
            r.killed += killed + again.killed;
            r.namespaces.extend(again.namespaces);
            eprintln!("testbed: {}", r.describe(&prefix));
            std::process::exit(128 + sig);
        })
        .map_err(|e| TestbedError(format!("cannot start the signal thread: {e}")))?;
    weft_sys::process::record_on(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP], &INTERRUPTED);
    Ok(())
}

/// Removes the interface claims' lock files of the network namespace with inode `ino`.
fn remove_claims(ino: u64) {
    let start = crate::dataplane::claim_prefix(ino);
    for e in std::fs::read_dir(crate::dataplane::CLAIM_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&start))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What [`down`] removed.
#[derive(Debug, Default)]
pub struct Removed {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes killed in them.
    pub killed: usize,
}

impl Removed {
    /// What was removed, for a person: `deleted P-nic, P-t1 (2 processes in them killed)`,
    /// or that there was nothing to delete.
    pub fn describe(&self, prefix: &str) -> String {
        if self.namespaces.is_empty() {
            return format!("nothing to delete: no namespace {prefix}-*");
        }
        format!(
            "deleted {} ({} in them killed)",
            self.namespaces.join(", "),
            match self.killed {
                1 => "1 process".to_string(),
                n => format!("{n} processes"),
            }
        )
    }
}

/// Live namespaces; deleted on drop unless [`Testbed::keep`] was called.
pub struct Testbed {
    pub prefix: String,
    pub tenants: usize,
    keep: bool,
}

impl Testbed {
    /// Namespace names.
    pub fn nic(&self) -> String {
        format!("{}-nic", self.prefix)
    }
    pub fn rx(&self) -> String {
        format!("{}-rx", self.prefix)
    }
    pub fn tenant(&self, i: usize) -> String {
        format!("{}-t{i}", self.prefix)
    }
    /// Every namespace, tenants first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = (1..=self.tenants).map(|i| self.tenant(i)).collect();
        v.push(self.nic());
        v.push(self.rx());
        v
    }

    /// Creates the namespaces and links (removing leftovers of the same prefix first).
    pub fn up(prefix: &str, tenants: usize) -> R<Testbed> {
        if !(1..=16).contains(&tenants) {
            return Err(TestbedError("1 to 16 tenants".into()));
        }
        if let Some(sig) = interrupted() {
            return Err(TestbedError(format!("interrupted by signal {sig}")));
        }
        let removed = down(prefix);
        if !removed.namespaces.is_empty() {
            eprintln!(
                "testbed: replaced what was there: {}",
                removed.describe(prefix)
            );
        }
        let tb = Testbed {
            prefix: prefix.to_string(),
            tenants,
            keep: false,
        };
        for ns in tb.namespaces() {
            sh(&["ip", "netns", "add", &ns])?;
            nsx(&ns, &["ip", "link", "set", "lo", "up"])?;
            let _ = nsx(&ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            let _ = nsx(
                &ns,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            );
        }
        let nic = tb.nic();
        let mut links: Vec<(String, String, String)> = (1..=tenants)
            .map(|i| (tb.tenant(i), format!("t{i}"), format!("10.77.0.{i}/24")))
            .collect();
        links.push((tb.rx(), "up".to_string(), "10.77.0.100/24".to_string()));
        for (ns, nic_if, addr) in &links {
            sh(&[
                "ip", "-n", &nic, "link", "add", "name", nic_if, "type", "veth", "peer", "name",
                "eth0", "netns", ns,
            ])?;
            nsx(ns, &["ip", "addr", "add", addr, "dev", "eth0"])?;
            nsx(ns, &["ip", "link", "set", "eth0", "up"])?;
            nsx(
                ns,
                &[
                    "ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                ],
            )?;
            sh(&["ip", "-n", &nic, "link", "set", "dev", nic_if, "up"])?;
            let _ = nsx(
                &nic,
                &[
                    "ethtool", "-K", nic_if, "gro", "off", "tso", "off", "gso", "off",
                ],
            );
        }
        Ok(tb)
    }

    /// Leaves the namespaces in place after drop (`weft testbed up`).
    pub fn keep(mut self) {
        self.keep = true;
    }

    /// Interfaces of the software-NIC namespace bridged, with HTB on the uplink: the Linux
    /// baseline for `weights` (per tenant) at `rate_bps`. With `limit_prio` (`limit-priority`)
    /// the limit's class has two children, sockperf's port first (see [`Experiment::limit_prio`]).
    pub fn htb(
        &self,
        weights: &[u64],
        rate_bps: u64,
        limit: Option<&(String, u64)>,
        prio: bool,
        limit_prio: bool,
    ) -> R<()> {
        let nic = self.nic();
        self.bridge()?;
        let rate = format!("{rate_bps}bit");
        nsx(
            &nic,
            &[
                "tc", "qdisc", "add", "dev", "up", "root", "handle", "1:", "stab", "overhead",
                "20", "htb", "default", "999",
            ],
        )?;
        nsx(
            &nic,
            &[
                "tc", "class", "add", "dev", "up", "parent", "1:", "classid", "1:1", "htb", "rate",
                &rate, "ceil", &rate, "quantum", "1514",
            ],
        )?;
        let total: u64 = weights.iter().sum::<u64>().max(1);
        for (i, w) in weights.iter().enumerate() {
            let id = format!("1:{}", 10 + i);
            let r = format!("{}bit", rate_bps * w / total);
            // Strict priority's nearest HTB form: `prio` (lower first) on the classes.
            let p = i.to_string();
            let mut args = vec![
                "tc", "class", "add", "dev", "up", "parent", "1:1", "classid", &id, "htb", "rate",
                &r, "ceil", &rate, "quantum", "1514",
            ];
            if prio {
                args.extend(["prio", &p]);
            }
            nsx(&nic, &args)?;
            nsx(
                &nic,
                &[
                    "tc", "qdisc", "add", "dev", "up", "parent", &id, "pfifo", "limit", "1000",
                ],
            )?;
            nsx(
                &nic,
                &[
                    "tc",
                    "filter",
                    "add",
                    "dev",
                    "up",
                    "parent",
                    "1:",
                    "protocol",
                    "ip",
                    "prio",
                    "2",
                    "u32",
                    "match",
                    "ip",
                    "src",
                    &format!("10.77.0.{}/32", i + 1),
                    "flowid",
                    &id,
                ],
            )?;
        }
        if let (Some((dst, lim)), true) = (limit, limit_prio) {
            self.htb_limit_prio(dst, *lim)?;
        } else if let Some((dst, lim)) = limit {
            // The per-destination limit: its own class with rate = ceil, matched first.
            let r = format!("{lim}bit");
            nsx(
                &nic,
                &[
                    "tc", "class", "add", "dev", "up", "parent", "1:1", "classid", "1:5", "htb",
                    "rate", &r, "ceil", &r, "quantum", "1514",
                ],
            )?;
            nsx(
                &nic,
                &[
                    "tc", "qdisc", "add", "dev", "up", "parent", "1:5", "pfifo", "limit", "1000",
                ],
            )?;
            nsx(
                &nic,
                &[
                    "tc",
                    "filter",
                    "add",
                    "dev",
                    "up",
                    "parent",
                    "1:",
                    "protocol",
                    "ip",
                    "prio",
                    "1",
                    "u32",
                    "match",
                    "ip",
                    "dst",
                    &format!("{dst}/32"),
                    "flowid",
                    "1:5",
                ],
            )?;
        }
        // Everything else (ARP) in a small class of its own.
        nsx(
            &nic,
            &[
                "tc", "class", "add", "dev", "up", "parent", "1:1", "classid", "1:999", "htb",
                "rate", "1mbit", "ceil", &rate,
            ],
        )?;
        Ok(())
    }
}

impl Testbed {
    /// `limit-priority`'s limit in HTB, as weft's policy has it: a class 1:5 with rate =
    /// ceil = `lim` for everything sent to `dst`, and beneath it sockperf's class 1:51
    /// (prio 0, a fifth of the limit) and the rest's 1:52 (prio 1, the other four fifths),
    /// both with ceil = `lim`; each class's burst is weft's bucket
    /// ([`LIMIT_PRIO_BURST`]); filters at `prio 1`, ahead of the tenants' (`prio 2`),
    /// sockperf's (UDP to [`SOCKPERF_PORT`]) first.
    fn htb_limit_prio(&self, dst: &str, lim: u64) -> R<()> {
        let nic = self.nic();
        let burst = LIMIT_PRIO_BURST.to_string();
        let class = |parent: &str, id: &str, rate: u64, ceil: u64, prio: Option<&str>| {
            let (r, c) = (format!("{rate}bit"), format!("{ceil}bit"));
            let mut a = vec![
                "tc", "class", "add", "dev", "up", "parent", parent, "classid", id, "htb", "rate",
                &r, "ceil", &c, "burst", &burst, "cburst", &burst, "quantum", "1514",
            ];
            if let Some(p) = prio {
                a.extend(["prio", p]);
            }
            nsx(&nic, &a).map(|_| ())
        };
        class("1:1", "1:5", lim, lim, None)?;
        class("1:5", "1:51", lim / 5, lim, Some("0"))?;
        class("1:5", "1:52", lim - lim / 5, lim, Some("1"))?;
        let dst = format!("{dst}/32");
        let port = SOCKPERF_PORT.to_string();
        for id in ["1:51", "1:52"] {
            nsx(
                &nic,
                &[
                    "tc", "qdisc", "add", "dev", "up", "parent", id, "pfifo", "limit", "1000",
                ],
            )?;
        }
        let mut first = vec![
            "tc", "filter", "add", "dev", "up", "parent", "1:", "protocol", "ip", "prio", "1",
            "u32", "match", "ip", "dst", &dst, "match", "ip", "protocol", "17", "0xff", "match",
            "ip", "dport", &port, "0xffff", "flowid", "1:51",
        ];
        nsx(&nic, &first)?;
        first.truncate(16); // through `dst X/32`
        first.extend(["flowid", "1:52"]);
        nsx(&nic, &first).map(|_| ())
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if !self.keep {
            down(&self.prefix);
        }
    }
}

/// A child process killed (and reaped) on drop.
pub struct Child(pub std::process::Child);

impl Child {
    pub fn spawn(cmd: &mut Command) -> R<Child> {
        if let Some(sig) = interrupted() {
            return Err(TestbedError(format!("interrupted by signal {sig}")));
        }
        cmd.stdin(Stdio::null())
            .spawn()
            .map(Child)
            .map_err(|e| TestbedError(format!("{cmd:?}: {e}")))
    }
    /// Sends SIGTERM and waits up to `grace`, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        // Already gone (and reaped): its pid may be another process's by now.
        if let Ok(Some(s)) = self.0.try_wait() {
            return Some(s);
        }
        // Our own child, not yet reaped: its pid is still its own.
        weft_sys::process::terminate(self.0.id());
        let t = Instant::now();
        while t.elapsed() < grace {
            if let Ok(Some(s)) = self.0.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        self.0.wait().ok()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Which scheduler runs the uplink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Weft,
    Htb,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Weft => "weft",
            Mode::Htb => "htb",
        }
    }
}

/// One tenant's application in an experiment.
#[derive(Debug, Clone)]
pub struct TenantSpec {
    pub weight: u64,
    /// Parallel iperf3 TCP flows.
    pub flows: u32,
    /// The receiver address it sends to.
    pub dst: String,
}

/// A real-traffic experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub name: String,
    pub tenants: Vec<TenantSpec>,
    pub rate_bps: u64,
    /// Measured seconds (after `warmup_s`).
    pub seconds: u32,
    pub warmup_s: u32,
    /// `weft run --idle-sleep-us` (0: pure busy polling).
    pub idle_sleep_us: u64,
    /// A per-destination limit: (destination address, rate): a shaping class in weft, an
    /// HTB class with `rate = ceil` in the baseline.
    pub limit: Option<(String, u64)>,
    /// weft only: `weft run --rogue N` (1-based).
    pub rogue: Option<usize>,
    /// This tenant (1-based) also sends, a hundred a second, UDP frames whose source is
    /// tenant 1's MAC address (`spoof`: return-path isolation).
    pub spoof: Option<usize>,
    /// This tenant (1-based) also floods the receiver with UDP frames from its own
    /// addresses, each from a new random source port (a new flow), [`FLOOD_FLOWS_PER_S`]
    /// a second (`flood`: per-tenant flow-queue budgets, as `hping3 --flood --rand-source`
    /// from inside a tenant would).
    pub flood: Option<usize>,
    /// This tenant (1-based) also sends UDP frames to the receiver from its own IP address,
    /// each with a new random source MAC address, [`MAC_FLOOD_PER_S`] a second
    /// (`mac-flood`: the MAC table's bound per tenant, as a switch-table flood would).
    pub mac_flood: Option<usize>,
    /// weft only: `weft run --metrics 127.0.0.1:`[`METRICS_PORT`]; once the traffic runs,
    /// [`METRICS_SCRAPES`] concurrent scrapes, then [`METRICS_IDLE`] idle connections held
    /// to the metrics endpoint (each opened again when the daemon closes it) while the
    /// control socket is asked for stats every quarter of a second, and `stop` at the end
    /// with them still held (`metrics-flood`: the control socket's pool is not the metrics
    /// endpoint's).
    pub metrics_flood: bool,
    /// weft only: the uplink's link down for [`LINK_DOWN`] (the receiver's end of the wire
    /// set down, as a pulled cable) a second into the measurement, then up again
    /// (`link-flap`).
    pub link_flap: bool,
    /// weft only: `weft run --max-queues` (default: the daemon's).
    pub max_queues: Option<u32>,
    /// weft only: halfway through the measurement, try an invalid policy (must be refused
    /// with the running one untouched), then reload with these weights.
    pub reload_weights: Option<Vec<u64>>,
    /// Strict priority instead of weights (tenant 1 first), and tenant 1 runs sockperf
    /// ping-pong (idle, then under the others' iperf3 load) instead of iperf3.
    pub latency: bool,
    /// `weft run --ring-version` (v2 or v3; env `WEFT_TESTBED_RING`, default v2).
    pub ring_version: String,
    /// With `latency`: tenant 1 runs memaslap against memcached instead of sockperf.
    pub memcached: bool,
    /// With `latency`: the niceness of the latency-sensitive application's client and
    /// server, the same under weft and HTB (env `WEFT_TESTBED_APP_NICE`; default -10: the
    /// applications share a core, and a latency-sensitive tenant's process is not made to
    /// wait for the bulk tenants' iperf3 there, as an operator would give it priority or a
    /// core of its own; docs/dataplane.md, latency).
    pub app_nice: i32,
    /// The applications' CPUs (`taskset -c`, every iperf3, sockperf and memcached process).
    /// Default: under weft, every CPU but the one weft busy-polls ([`Experiment::weft_cpu`]),
    /// as a NIC's own cores are not the host's (an application sharing that core waits for
    /// weft's slice, and weft for the application's: millisecond tails); under HTB, which has
    /// no core of its own, all CPUs. Env `WEFT_TESTBED_APP_CPUS`: a `taskset -c` list for
    /// both schedulers, or `all`. Resolved per scheduler by [`Experiment::for_mode`].
    pub app_cpus: Option<String>,
    /// With `latency`: the latency-sensitive application's scheduler slice, µs (see
    /// [`crate::dataplane::set_slice`]), the same under weft and HTB (env
    /// `WEFT_TESTBED_APP_SLICE_US`).
    pub app_slice_us: Option<u64>,
    /// `weft run --cpu`: the last CPU when there are several (env `WEFT_TESTBED_CPU`: a
    /// number, or `none`).
    pub weft_cpu: Option<usize>,
    /// `weft run --slice-us` (env `WEFT_TESTBED_SLICE_US`: a number, or `none`; default 100).
    pub weft_slice_us: Option<u64>,
    /// With `latency`: sockperf's `--mps` (env `WEFT_TESTBED_SOCKPERF_MPS`; default `max`,
    /// a closed loop: each request leaves when the previous reply is in. A fixed rate makes
    /// sockperf busy-wait between requests, so on a small machine its figures measure its
    /// own CPU scheduling more than the network: docs/dataplane.md, latency).
    pub sockperf_mps: String,
    /// `weft run --backend` (af-packet or af-xdp; env `WEFT_TESTBED_BACKEND`, default
    /// af-packet; `weft testbed run --backend`).
    pub backend: String,
    /// With `limit` (`limit-priority`): tenant 1 runs sockperf ping-pong *and* iperf3 to
    /// the limited destination, sockperf (UDP port [`SOCKPERF_PORT`]) first under the
    /// limit: in weft a `prio` node beneath the shaping node, in HTB two child classes of
    /// the limit's class (prio 0 and 1, rates splitting the limit, ceil = the limit).
    /// sockperf alone, then with iperf3 saturating the limit.
    pub limit_prio: bool,
}

/// The environment variable `name` parsed, `None` if it says `none`, `default` if unset or
/// unparsable.
fn env_or<T: std::str::FromStr>(name: &str, default: Option<T>) -> Option<T> {
    match std::env::var(name) {
        Ok(v) if v == "none" => None,
        Ok(v) => v.parse().ok().or(default),
        Err(_) => default,
    }
}

const RX: &str = "10.77.0.100";
const RX2: &str = "10.77.0.200";
/// sockperf's server port (UDP), which `limit-priority`'s policy and filters match.
pub const SOCKPERF_PORT: u16 = 11111;
/// `limit-priority`'s shaping class's bucket: four full frames (an explicit burst of a
/// few MTUs; HTB's classes get the same `burst`).
const LIMIT_PRIO_BURST: u64 = 4 * 1514;

impl Experiment {
    pub const NAMES: [&'static str; 13] = [
        "fair-1v8",
        "weights-123",
        "dest-limit",
        "limit-priority",
        "rogue",
        "spoof",
        "flood",
        "mac-flood",
        "metrics-flood",
        "link-flap",
        "reload",
        "latency",
        "memcached",
    ];

    pub fn named(name: &str, rate_bps: u64, seconds: u32) -> Option<Experiment> {
        let t = |weight, flows| TenantSpec {
            weight,
            flows,
            dst: RX.to_string(),
        };
        let mut e = Experiment {
            name: name.into(),
            tenants: vec![],
            rate_bps,
            seconds: seconds.max(1),
            warmup_s: 2,
            idle_sleep_us: std::env::var("WEFT_TESTBED_IDLE_SLEEP_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(20),
            limit: None,
            rogue: None,
            spoof: None,
            flood: None,
            mac_flood: None,
            metrics_flood: false,
            link_flap: false,
            max_queues: None,
            reload_weights: None,
            latency: false,
            ring_version: std::env::var("WEFT_TESTBED_RING").unwrap_or_else(|_| "v2".into()),
            memcached: false,
            app_nice: std::env::var("WEFT_TESTBED_APP_NICE")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(-10),
            app_cpus: std::env::var("WEFT_TESTBED_APP_CPUS").ok(),
            app_slice_us: std::env::var("WEFT_TESTBED_APP_SLICE_US")
                .ok()
                .and_then(|v| v.parse().ok()),
            weft_cpu: env_or(
                "WEFT_TESTBED_CPU",
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .ok()
                    .filter(|&n| n > 1)
                    .map(|n| n - 1),
            ),
            weft_slice_us: env_or("WEFT_TESTBED_SLICE_US", Some(100)),
            sockperf_mps: std::env::var("WEFT_TESTBED_SOCKPERF_MPS")
                .unwrap_or_else(|_| "max".into()),
            backend: std::env::var("WEFT_TESTBED_BACKEND").unwrap_or_else(|_| "af-packet".into()),
            limit_prio: false,
        };
        match name {
            "fair-1v8" => e.tenants = vec![t(1, 1), t(1, 8)],
            "weights-123" => e.tenants = (1..=3).map(|w| t(w, 4)).collect(),
            "dest-limit" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.tenants[0].dst = RX2.to_string();
                // 100 Mbit/s on the 500 Mbit/s uplink (a fifth of the uplink at other rates).
                e.limit = Some((RX2.to_string(), rate_bps / 5));
            }
            "limit-priority" => {
                // Tenant 1: sockperf and 4 iperf3 flows to RX2, limited to a fifth of the
                // uplink; tenant 2 idle (its own leaf under the `wfq` root).
                e.tenants = vec![t(1, 4), t(1, 0)];
                e.tenants[0].dst = RX2.to_string();
                e.limit = Some((RX2.to_string(), rate_bps / 5));
                e.limit_prio = true;
            }
            "rogue" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.rogue = Some(1);
            }
            "spoof" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.spoof = Some(2);
            }
            "flood" => {
                // A pool of 256 flow queues (64 reserved for each tenant) that the flood's
                // new flows would take in a tenth of a second without budgets.
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.flood = Some(2);
                e.max_queues = Some(256);
            }
            "mac-flood" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.mac_flood = Some(2);
            }
            "metrics-flood" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.metrics_flood = true;
            }
            "link-flap" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.link_flap = true;
            }
            "latency" => {
                e.tenants = vec![t(1, 0), t(1, 8)];
                e.latency = true;
            }
            "memcached" => {
                e.tenants = vec![t(1, 0), t(1, 8)];
                e.latency = true;
                e.memcached = true;
            }
            "reload" => {
                e.tenants = vec![t(1, 4), t(1, 4)];
                e.reload_weights = Some(vec![1, 3]);
            }
            _ => return None,
        }
        Some(e)
    }

    /// This experiment as run under `mode`: [`Experiment::app_cpus`] resolved (`None`: no
    /// pinning).
    pub fn for_mode(&self, mode: Mode) -> Experiment {
        let mut e = self.clone();
        e.app_cpus = match (self.app_cpus.as_deref(), mode, self.weft_cpu) {
            (Some("all"), _, _) => None,
            (Some(list), _, _) => Some(list.to_string()),
            (None, Mode::Weft, Some(cpu)) => host_cpus(cpu),
            (None, _, _) => None,
        };
        e
    }

    /// The weft policy: a `wfq` root with one leaf per tenant (matched on `tenant`), the
    /// per-destination limit as a shaping node on the leaves' edge.
    pub fn policy_yaml(&self) -> String {
        let w: Vec<u64> = self.tenants.iter().map(|t| t.weight).collect();
        self.policy_with(&w)
    }

    fn policy_with(&self, weights: &[u64]) -> String {
        if let (true, Some((dst, rate))) = (self.limit_prio, &self.limit) {
            return self.limit_prio_policy(dst, *rate, weights);
        }
        let mut s = format!(
            "weft: 1\nname: testbed-{}\nlink: {{rate: {}bit}}\nnodes:\n  - {{name: root, type: {}}}\n",
            self.name,
            self.rate_bps,
            if self.latency { "prio" } else { "wfq" }
        );
        let mut parent = "root".to_string();
        if let Some((dst, rate)) = &self.limit {
            s += &format!(
                "  - {{name: limit, type: shape, parent: root, rate: {rate}bit, burst: 64kb, match: {{dst: {dst}/32}}}}\n"
            );
            parent = "[limit]".into();
        }
        for (i, w) in weights.iter().enumerate() {
            s += &format!(
                "  - {{name: tenant{n}, type: leaf, parent: {parent}, {key}: {v}, match: {{tenant: {n}}}, limit: {{packets: 1000}}}}\n",
                n = i + 1,
                key = if self.latency { "priority" } else { "weight" },
                v = if self.latency { i as u64 } else { *w },
            );
        }
        s
    }

    /// `limit-priority`'s policy: a `wfq` root over the tenants; tenant 1's traffic to
    /// `dst` passes a shaping node (`rate`, a burst of four frames) above a `prio` node that
    /// puts sockperf's port (priority 0) before everything else tenant 1 sends (priority 1):
    /// the saturated class's tokens go to the packet the `prio` beneath it ranks first.
    fn limit_prio_policy(&self, dst: &str, rate: u64, weights: &[u64]) -> String {
        let mut s = format!(
            "weft: 1\nname: testbed-{}\nlink: {{rate: {}bit}}\nnodes:\n  - {{name: root, type: wfq}}\n  \
             - {{name: limit, type: shape, parent: root, rate: {rate}bit, burst: {LIMIT_PRIO_BURST}b, match: {{dst: {dst}/32}}}}\n",
            self.name, self.rate_bps
        );
        for (i, w) in weights.iter().enumerate() {
            let n = i + 1;
            if n == 1 {
                s += &format!(
                    "  - {{name: tenant1, type: prio, parent: [limit], weight: {w}, match: {{tenant: 1}}}}\n  \
                     - {{name: t1-latency, type: leaf, parent: tenant1, priority: 0, match: {{dport: {SOCKPERF_PORT}}}, limit: {{packets: 1000}}}}\n  \
                     - {{name: t1-bulk, type: leaf, parent: tenant1, priority: 1, limit: {{packets: 1000}}}}\n"
                );
            } else {
                s += &format!(
                    "  - {{name: tenant{n}, type: leaf, parent: root, weight: {w}, match: {{tenant: {n}}}, limit: {{packets: 1000}}}}\n"
                );
            }
        }
        s
    }
}

/// Every CPU but `nic_cpu`, as a `taskset -c` list (`None` on a single CPU).
fn host_cpus(nic_cpu: usize) -> Option<String> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let v: Vec<String> = (0..n)
        .filter(|&c| c != nic_cpu)
        .map(|c| c.to_string())
        .collect();
    (!v.is_empty()).then(|| v.join(","))
}

/// `ip netns exec NS` with the applications' CPUs ([`Experiment::app_cpus`]).
fn pinned(exp: &Experiment, ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    if let Some(cpus) = &exp.app_cpus {
        c.args(["taskset", "-c", cpus]);
    }
    c
}

fn cpu_ticks_pid(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn cpu_ticks_system() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let l = s.lines().next()?;
    let v: Vec<u64> = l
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Runs `exp` once per mode on a fresh testbed; writes `out/report.json` and `report.md`.
pub fn run(exp: &Experiment, prefix: &str, modes: &[Mode], weft: &Path, out: &Path) -> R<Value> {
    install_tools();
    if let Some(why) = missing_prerequisite() {
        return Err(TestbedError(format!("cannot run the testbed: {why}")));
    }
    std::fs::create_dir_all(out).map_err(|e| TestbedError(format!("{}: {e}", out.display())))?;
    let mut results = Vec::new();
    for &m in modes {
        results.push(run_mode(exp, prefix, m, weft, out)?);
    }
    let report = json!({
        "experiment": exp.name,
        "rate_bps": exp.rate_bps,
        "seconds": exp.seconds,
        "tenants": exp.tenants.iter().map(|t| json!({"weight": t.weight, "flows": t.flows})).collect::<Vec<_>>(),
        "results": results,
    });
    let _ = std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    );
    let _ = std::fs::write(out.join("report.md"), markdown(&report));
    Ok(report)
}

/// Lines of the daemon's log a report keeps ([`WeftLog`]).
const LOG_LINES: usize = 2_000;

/// The daemon's log (`weft run --log-format json`, one object a line), echoed to stderr
/// as it comes and kept, its first [`LOG_LINES`] lines, for the report (`weft_log`): what
/// an operator would read of the run.
#[derive(Clone, Default)]
struct WeftLog(Arc<Mutex<LogState>>);

/// The lines kept, and the thread that follows the daemon's stderr.
type LogState = (Vec<String>, Option<std::thread::JoinHandle<()>>);

impl WeftLog {
    /// Follows `stderr` on a thread of its own until the daemon closes it.
    fn follow(&self, stderr: std::process::ChildStderr) {
        let lines = self.clone();
        let t = std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(stderr).lines() {
                let Ok(l) = l else { break };
                eprintln!("{l}");
                let mut g = lines.0.lock().unwrap_or_else(|e| e.into_inner());
                if g.0.len() < LOG_LINES {
                    g.0.push(l);
                }
            }
        });
        self.0.lock().unwrap_or_else(|e| e.into_inner()).1 = Some(t);
    }

    /// The lines so far, once the daemon has exited: each as the JSON object it is, or as
    /// a string (`ready`, a start-up line).
    fn json(&self) -> Value {
        let t = self.0.lock().unwrap_or_else(|e| e.into_inner()).1.take();
        if let Some(t) = t {
            let _ = t.join();
        }
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.0.iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.clone())))
            .collect()
    }
}

/// Namespaces up, the scheduler started (weft's daemon, with its log followed, or bridge +
/// HTB), every tenant able to reach its receiver address.
fn setup(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
    sock: &Path,
) -> R<(Testbed, Option<Child>, WeftLog)> {
    let n = exp.tenants.len();
    let tb = Testbed::up(prefix, n)?;
    let mut daemon = None;
    let log = WeftLog::default();
    match mode {
        Mode::Weft => {
            let pol = out.join(format!("{}-policy.yaml", exp.name));
            std::fs::write(&pol, exp.policy_yaml())
                .map_err(|e| TestbedError(format!("{}: {e}", pol.display())))?;
            let mut c = Command::new("ip");
            // The software NIC gets its core ahead of the applications (nice -15, and the
            // cgroup of its own `weft run` makes by default against other sessions), as a
            // dedicated NIC core would; the kernel's softirq work (HTB's side) has that
            // precedence by construction.
            c.args(["netns", "exec", &tb.nic(), "nice", "-n", "-15"])
                .arg(weft)
                .arg("run")
                .arg("--policy")
                .arg(&pol)
                .args(["--uplink", "up", "--rate", &format!("{}bit", exp.rate_bps)])
                .arg("--ctl")
                .arg(sock)
                .args(["--idle-sleep-us", &exp.idle_sleep_us.to_string()])
                .args(["--ring-version", &exp.ring_version])
                .args(["--backend", &exp.backend])
                .args(["--log-format", "json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if exp.metrics_flood {
                c.args(["--metrics", &format!("127.0.0.1:{METRICS_PORT}")]);
            }
            if let Some(r) = exp.rogue {
                c.args(["--rogue", &r.to_string()]);
            }
            if let Some(cpu) = exp.weft_cpu {
                c.args(["--cpu", &cpu.to_string()]);
            }
            if let Some(us) = exp.weft_slice_us {
                c.args(["--slice-us", &us.to_string()]);
            }
            // Its own cgroup and CPU weight (`weft run`'s default 10,000; 0: none), so a
            // busy host's other sessions cannot take its core (`crate::placement`).
            if let Ok(w) = std::env::var("WEFT_TESTBED_CPU_WEIGHT") {
                c.args(["--cpu-weight", &w]);
            }
            if let Some(q) = exp.max_queues {
                c.args(["--max-queues", &q.to_string()]);
            }
            for i in 1..=n {
                c.args(["--tenant", &format!("tenant{i}=t{i}")]);
            }
            let mut d = Child::spawn(&mut c)?;
            if let Some(e) = d.0.stderr.take() {
                log.follow(e);
            }
            let t = Instant::now();
            while crate::ctl::request(sock, &Request::Stats).is_err() {
                if t.elapsed() > Duration::from_secs(10) {
                    return Err(TestbedError("weft run did not start within 10 s".into()));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            daemon = Some(d);
        }
        Mode::Htb => {
            let w: Vec<u64> = exp.tenants.iter().map(|t| t.weight).collect();
            tb.htb(
                &w,
                exp.rate_bps,
                exp.limit.as_ref(),
                exp.latency,
                exp.limit_prio,
            )?;
        }
    }
    if exp.limit.is_some() {
        nsx(
            &tb.rx(),
            &["ip", "addr", "add", &format!("{RX2}/24"), "dev", "eth0"],
        )?;
    }
    // Reachability first (ARP through the NIC), so the measurement starts warm.
    for i in 1..=n {
        let dst = exp.tenants[i - 1].dst.clone();
        let ok = (0..20).any(|_| nsx(&tb.tenant(i), &["ping", "-c", "1", "-W", "1", &dst]).is_ok());
        if !ok && sh(&["sh", "-c", "command -v ping"]).is_ok() {
            return Err(TestbedError(format!(
                "{}: tenant {i} cannot reach the receiver",
                mode.name()
            )));
        }
    }
    Ok((tb, daemon, log))
}

fn run_mode(exp: &Experiment, prefix: &str, mode: Mode, weft: &Path, out: &Path) -> R<Value> {
    let exp = &exp.for_mode(mode);
    let n = exp.tenants.len();
    let sock = std::env::temp_dir().join(format!("weft-testbed-{prefix}.sock"));
    if exp.latency {
        return run_latency(exp, prefix, mode, weft, out, &sock);
    }
    if exp.limit_prio {
        return run_limit_prio(exp, prefix, mode, weft, out, &sock);
    }
    let (tb, daemon, log) = setup(exp, prefix, mode, weft, out, &sock)?;
    let mut servers = Vec::new();
    for i in 1..=n {
        let port = format!("{}", 5200 + i);
        servers.push(Child::spawn(
            pinned(exp, &tb.rx())
                .args(["iperf3", "-s", "-1", "-p", &port])
                .stdout(Stdio::null()),
        )?);
    }
    std::thread::sleep(Duration::from_millis(300));
    let pid = daemon.as_ref().map(|d| d.0.id());
    let cpu0 = (pid.and_then(cpu_ticks_pid), cpu_ticks_system());
    // What processes outside the testbed take meanwhile: a run they starve measures them.
    let foreign = ForeignCpu::start(&tb.namespaces());
    let t0 = Instant::now();
    let mut clients = Vec::new();
    let _spoofer = match exp.spoof {
        Some(k) => Some(spoofer(&tb, k, exp.seconds + exp.warmup_s + 2)?),
        None => None,
    };
    let mac_flooder = match exp.mac_flood {
        Some(k) => Some(mac_flooder(&tb, k, exp.seconds + exp.warmup_s + 2)?),
        None => None,
    };
    // With a flooder, its tenant connects first (its flows hold their queues before its
    // flood spends the rest of its budget), the flood starts, and the other tenants connect
    // into it, `lead` seconds later; the flooding tenant's run is longer by as much, so
    // every tenant's measured seconds are the same.
    let lead: u32 = if exp.flood.is_some() { 2 } else { 0 };
    let client = |i: usize, t: &TenantSpec, extra: u32| {
        Child::spawn(
            pinned(exp, &tb.tenant(i))
                .args(["iperf3", "-J", "-c", &t.dst])
                .args(["-p", &format!("{}", 5200 + i), "-P", &t.flows.to_string()])
                .args(["-t", &(exp.seconds + exp.warmup_s + extra).to_string()])
                .args(["-O", &(exp.warmup_s + extra).to_string()])
                .stdout(Stdio::piped()),
        )
    };
    let mut early = None;
    let mut _flooder = None;
    if let Some(k) = exp.flood {
        early = Some(client(k, &exp.tenants[k - 1], lead)?);
        std::thread::sleep(Duration::from_millis(1_500));
        _flooder = Some(flooder(&tb, k, exp.seconds + exp.warmup_s + lead + 2)?);
        std::thread::sleep(Duration::from_millis(500));
    }
    for (i, t) in exp.tenants.iter().enumerate() {
        let i = i + 1;
        clients.push(match early.take_if(|_| exp.flood == Some(i)) {
            Some(c) => c,
            None => client(i, t, 0)?,
        });
    }
    // The timeline: counters at the start and end of the measured window; a reload halfway.
    let ask = |req: Request| ask_json(&sock, &req);
    let at = |s: f64| {
        let d = Duration::from_secs_f64(s).saturating_sub(t0.elapsed());
        std::thread::sleep(d);
    };
    let mut snaps = (Value::Null, Value::Null, 0.0);
    let mut reload = Value::Null;
    // The daemon's resident memory at the start and end of the window (kB).
    let mut rss = (None, None);
    let mut metrics = Value::Null;
    let mut metrics_hold = None;
    let mut flap = Value::Null;
    let mut after_flap = (Value::Null, 0.0);
    let end = (lead + exp.warmup_s + exp.seconds) as f64;
    if daemon.is_some() {
        at((lead + exp.warmup_s) as f64 + 0.2);
        let ta = t0.elapsed().as_secs_f64();
        snaps.0 = ask(Request::Stats);
        rss.0 = pid.and_then(rss_kb);
        if exp.metrics_flood {
            let (m, hold) =
                metrics_flood(exp, &tb, &sock, || t0.elapsed().as_secs_f64() < end - 0.7)?;
            metrics = m;
            metrics_hold = Some(hold);
        }
        if exp.link_flap {
            at((lead + exp.warmup_s) as f64 + 1.0);
            flap = link_flap(&tb, &sock)?;
            // The shares once TCP is back (its retransmission timer backs off while the
            // link is down): from three seconds after the outage to the window's end.
            at(((lead + exp.warmup_s) as f64 + 6.0).min(end - 1.2));
            after_flap = (ask(Request::Stats), t0.elapsed().as_secs_f64());
        }
        if let Some(w) = &exp.reload_weights {
            at((lead + exp.warmup_s) as f64 + exp.seconds as f64 / 2.0);
            let bad = out.join(format!("{}-invalid.yaml", exp.name));
            let good = out.join(format!("{}-reloaded.yaml", exp.name));
            let _ = std::fs::write(&bad, exp.policy_with(&[1, 0]));
            let _ = std::fs::write(&good, exp.policy_with(w));
            let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or(p.to_path_buf());
            let r1 = ask(Request::Reload { policy: abs(&bad) });
            let g1 = ask(Request::Stats)["generation"].clone();
            let r2 = ask(Request::Reload { policy: abs(&good) });
            reload = json!({"invalid": r1, "generation_after_invalid": g1, "valid": r2});
        }
        at(end - 0.2);
        snaps.1 = ask(Request::Stats);
        rss.1 = pid.and_then(rss_kb);
        snaps.2 = t0.elapsed().as_secs_f64() - ta;
        if exp.link_flap {
            let secs = t0.elapsed().as_secs_f64() - after_flap.1;
            let mbps = leaf_rates(&after_flap.0, &snaps.1, secs);
            flap["after"] = json!({
                "seconds": (secs * 100.0).round() / 100.0,
                "leaf_mbps": mbps,
                "max_rel_error": leaf_share_error(exp, &mbps),
            });
        }
    }
    let mut tenants = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let mut stdout = Vec::new();
        if let Some(mut so) = c.0.stdout.take() {
            let _ = std::io::Read::read_to_end(&mut so, &mut stdout);
        }
        let _ = c.0.wait();
        let o = std::process::Output {
            status: std::process::ExitStatus::default(),
            stdout,
            stderr: Vec::new(),
        };
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if !v["error"].is_null() || v.is_null() {
            return Err(TestbedError(format!(
                "{}: iperf3 of tenant {} failed: {}",
                mode.name(),
                i + 1,
                v["error"]
            )));
        }
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        let series: Vec<f64> = v["intervals"]
            .as_array()
            .into_iter()
            .flatten()
            .skip(exp.warmup_s as usize)
            .filter_map(|x| x["sum"]["bits_per_second"].as_f64())
            .map(|b| (b / 1e6 * 10.0).round() / 10.0)
            .collect();
        let retr = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
        tenants.push(json!({
            "tenant": i + 1, "weight": exp.tenants[i].weight, "flows": exp.tenants[i].flows,
            "mbps": (bps / 1e5).round() / 10.0, "mbps_per_second": series, "retransmits": retr,
        }));
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let foreign_cpu = foreign.stop();
    let cpu1 = (pid.and_then(cpu_ticks_pid), cpu_ticks_system());
    let hz = weft_sys::process::clock_ticks_per_second() as f64;
    let weft_cpu = match (cpu0.0, cpu1.0) {
        (Some(a), Some(b)) => json!(((b - a) as f64 / hz / elapsed * 1000.0).round() / 10.0),
        _ => Value::Null,
    };
    let sys_cpu = match (cpu0.1, cpu1.1) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            json!(((b1 - b0) as f64 / (t1 - t0) as f64 * 1000.0).round() / 10.0)
        }
        _ => Value::Null,
    };
    let mut stats = Value::Null;
    let mut weft_log = Value::Null;
    if let Some(mut d) = daemon {
        // Traffic is over: let the NIC drain, so its counters balance exactly.
        std::thread::sleep(Duration::from_millis(300));
        stats = ask_json(&sock, &Request::Stats);
        if let Some(hold) = metrics_hold.take() {
            // `stop` on the control socket, the metrics endpoint's idle connections still
            // held: answered, and the daemon gone.
            metrics["stop"] = stop_over_ctl(&mut d, &sock);
            metrics["hold"] = last_line(hold);
        }
        d.stop(Duration::from_secs(3));
        weft_log = log.json();
    }
    // Before its namespace goes.
    drop(mac_flooder);
    drop(servers);
    drop(tb);
    let norm: Vec<f64> = tenants
        .iter()
        .map(|t| t["mbps"].as_f64().unwrap_or(0.0) / t["weight"].as_f64().unwrap_or(1.0))
        .collect();
    let total: f64 = tenants
        .iter()
        .map(|t| t["mbps"].as_f64().unwrap_or(0.0))
        .sum();
    let wsum: u64 = exp.tenants.iter().map(|t| t.weight).sum();
    let mut max_rel_err = 0.0f64;
    for (t, spec) in tenants.iter_mut().zip(&exp.tenants) {
        let ideal = total * spec.weight as f64 / wsum as f64;
        let err = (t["mbps"].as_f64().unwrap_or(0.0) - ideal).abs() / ideal.max(1e-9);
        max_rel_err = max_rel_err.max(err);
        t["ideal_mbps"] = json!((ideal * 10.0).round() / 10.0);
        t["rel_error"] = json!((err * 1e4).round() / 1e4);
    }
    // Per-leaf rates from weft's own counters over the window (not across a reload).
    let mut leaf_mbps = Value::Null;
    if exp.reload_weights.is_none() && snaps.2 > 0.0 {
        leaf_mbps = leaf_rates(&snaps.0, &snaps.1, snaps.2);
    }
    // The limited class's rate at L2 (frame bytes, as the limit counts them): weft's leaf
    // counter; for HTB, goodput × 1514/1448 (full-size TCP segments with timestamps).
    let limit = exp.limit.as_ref().map(|(dst, rate)| {
        let i = exp.tenants.iter().position(|t| &t.dst == dst).unwrap_or(0);
        let l2 = match mode {
            Mode::Weft => leaf_mbps[format!("tenant{}", i + 1)]
                .as_f64()
                .unwrap_or(0.0),
            Mode::Htb => tenants[i]["mbps"].as_f64().unwrap_or(0.0) * 1514.0 / 1448.0,
        };
        let lim = *rate as f64 / 1e6;
        json!({"dst": dst, "limit_mbps": lim, "l2_mbps": (l2 * 100.0).round() / 100.0,
               "rel_error": (((l2 - lim) / lim).abs() * 1e4).round() / 1e4})
    });
    // After a reload: the shares over the second half's last seconds.
    let after_reload = exp.reload_weights.as_ref().map(|w| {
        let k = (exp.seconds / 2).saturating_sub(1).max(1) as usize;
        let means: Vec<f64> = tenants
            .iter()
            .map(|t| {
                let v: Vec<f64> = t["mbps_per_second"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .collect();
                let tail = &v[v.len().saturating_sub(k)..];
                tail.iter().sum::<f64>() / tail.len().max(1) as f64
            })
            .collect();
        json!({"weights": w, "mbps_last_seconds": means})
    });
    Ok(json!({
        "scheduler": mode.name(),
        "app_cpus": exp.app_cpus.as_deref().unwrap_or("all"),
        "leaf_mbps": leaf_mbps,
        "limit": limit,
        "reload": reload,
        "after_reload": after_reload,
        "jain": jain(&norm).map(|j| (j * 1e4).round() / 1e4),
        "total_mbps": (total * 10.0).round() / 10.0,
        "max_rel_error": (max_rel_err * 1e4).round() / 1e4,
        "weft_cpu_pct": weft_cpu,
        "system_cpu_pct": sys_cpu,
        "foreign_cpu": foreign_cpu,
        "tenants": tenants,
        "weft_rss_kb": {"start": rss.0, "end": rss.1},
        "metrics_flood": metrics,
        "link_flap": flap,
        "weft_stats": stats,
        "weft_log": weft_log,
    }))
}

/// Each node's rate between two `ctl stats` answers `secs` apart, Mbit/s by name (from its
/// byte counter).
fn leaf_rates(a: &Value, b: &Value, secs: f64) -> Value {
    let bytes = |v: &Value, i: usize| v["nodes"][i]["bytes"].as_u64().unwrap_or(0);
    let m: serde_json::Map<String, Value> = b["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, nd)| {
            let r = (bytes(b, i) - bytes(a, i).min(bytes(b, i))) as f64 * 8.0 / secs / 1e6;
            (
                nd["name"].as_str().unwrap_or("").to_string(),
                json!((r * 100.0).round() / 100.0),
            )
        })
        .collect();
    Value::Object(m)
}

/// The largest relative error of a tenant's leaf rate (`tenantI` in `mbps`) against its
/// weight's share of the leaves' sum (null without traffic).
fn leaf_share_error(exp: &Experiment, mbps: &Value) -> Value {
    let r: Vec<f64> = (1..=exp.tenants.len())
        .map(|i| mbps[format!("tenant{i}")].as_f64().unwrap_or(0.0))
        .collect();
    let total: f64 = r.iter().sum();
    let wsum: u64 = exp.tenants.iter().map(|t| t.weight).sum();
    if total <= 0.0 || wsum == 0 {
        return Value::Null;
    }
    let err = r
        .iter()
        .zip(&exp.tenants)
        .map(|(m, t)| {
            let ideal = total * t.weight as f64 / wsum as f64;
            (m - ideal).abs() / ideal
        })
        .fold(0.0f64, f64::max);
    json!((err * 1e4).round() / 1e4)
}

/// `pid`'s resident memory (`VmRSS`), kB.
fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The port of `metrics-flood`'s metrics endpoint (on the NIC namespace's loopback).
pub const METRICS_PORT: u16 = 9464;
/// `metrics-flood`'s concurrent scrapes.
pub const METRICS_SCRAPES: u32 = 200;
/// `metrics-flood`'s idle connections to the metrics endpoint: more than it serves and
/// queues together, so some are closed unanswered.
pub const METRICS_IDLE: usize =
    crate::ctl::MAX_METRICS_CONNECTIONS + crate::ctl::METRICS_QUEUE + 200;

/// `metrics-flood`'s client (Python's standard library, with a descriptor limit raised
/// to what it needs where it may): `burst` makes [`METRICS_SCRAPES`]
/// scrapes at once and prints how many got the metrics; `hold` keeps [`METRICS_IDLE`]
/// connections open that send nothing, each opened again (at most 200 a second once all
/// were open) when the daemon closes it, and prints what it holds once a second.
const METRICS_SCRIPT: &str = "import socket,sys,threading,json,time,resource,selectors\n\
    mode,port,n=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])\n\
    _,hard=resource.getrlimit(resource.RLIMIT_NOFILE)\n\
    lim=max(hard,n+512)\n\
    try:resource.setrlimit(resource.RLIMIT_NOFILE,(lim,lim))\n\
    except (ValueError,OSError):resource.setrlimit(resource.RLIMIT_NOFILE,(hard,hard))\n\
    addr=('127.0.0.1',port)\n\
    if mode=='burst':\n\
    \x20got=[];go=threading.Event()\n\
    \x20def scrape():\n\
    \x20\x20go.wait();b=b''\n\
    \x20\x20try:\n\
    \x20\x20\x20s=socket.create_connection(addr,timeout=10)\n\
    \x20\x20\x20s.sendall(b'GET /metrics HTTP/1.0\\r\\n\\r\\n')\n\
    \x20\x20\x20while True:\n\
    \x20\x20\x20\x20d=s.recv(65536)\n\
    \x20\x20\x20\x20if not d:break\n\
    \x20\x20\x20\x20b+=d\n\
    \x20\x20\x20s.close()\n\
    \x20\x20except OSError:pass\n\
    \x20\x20got.append(b.startswith(b'HTTP/1.0 200') and b'weft_dataplane_tx_frames_total' in b)\n\
    \x20ts=[threading.Thread(target=scrape) for _ in range(n)]\n\
    \x20for t in ts:t.start()\n\
    \x20t0=time.time();go.set()\n\
    \x20for t in ts:t.join()\n\
    \x20print(json.dumps({'scrapes':n,'answered':sum(got),'seconds':round(time.time()-t0,3)}))\n\
    \x20sys.exit(0)\n\
    sel=selectors.DefaultSelector();held=opened=closed=refused=peak=0;last=0;cap=n\n\
    while True:\n\
    \x20k=0\n\
    \x20while held<n and k<cap:\n\
    \x20\x20k+=1\n\
    \x20\x20try:s=socket.socket();s.settimeout(1);s.connect(addr)\n\
    \x20\x20except OSError:refused+=1;continue\n\
    \x20\x20s.setblocking(False);sel.register(s,selectors.EVENT_READ);held+=1;opened+=1\n\
    \x20cap=10;peak=max(peak,held);time.sleep(0.05)\n\
    \x20for key,_ in sel.select(0):\n\
    \x20\x20s=key.fileobj\n\
    \x20\x20try:d=s.recv(4096)\n\
    \x20\x20except BlockingIOError:continue\n\
    \x20\x20except OSError:d=b''\n\
    \x20\x20if not d:sel.unregister(s);s.close();held-=1;closed+=1\n\
    \x20if time.time()-last>=1:\n\
    \x20\x20last=time.time()\n\
    \x20\x20print(json.dumps({'held':held,'peak':peak,'opened':opened,'closed_by_server':closed,'refused':refused}),flush=True)\n";

/// `metrics-flood`'s client in the NIC's namespace, on the applications' CPUs.
fn metrics_client(exp: &Experiment, tb: &Testbed, mode: &str, n: usize) -> Command {
    let mut c = pinned(exp, &tb.nic());
    c.args(["python3", "-c", METRICS_SCRIPT, mode])
        .arg(METRICS_PORT.to_string())
        .arg(n.to_string());
    c
}

/// `metrics-flood` while the traffic runs: [`METRICS_SCRAPES`] scrapes at once, then
/// [`METRICS_IDLE`] idle connections held (the returned child) while the control socket is
/// asked for stats every quarter of a second, as long as `more()`: the scrapes' answers and
/// the control socket's.
fn metrics_flood(
    exp: &Experiment,
    tb: &Testbed,
    sock: &Path,
    more: impl Fn() -> bool,
) -> R<(Value, Child)> {
    let burst = output(
        &mut metrics_client(exp, tb, "burst", METRICS_SCRAPES as usize),
        &["python3 (metrics burst)"],
    )?;
    let burst: Value = serde_json::from_str(burst.trim()).unwrap_or(Value::Null);
    let hold = Child::spawn(metrics_client(exp, tb, "hold", METRICS_IDLE).stdout(Stdio::piped()))?;
    // Once the first connections are in, the control socket is asked throughout.
    std::thread::sleep(Duration::from_millis(1_500));
    let (mut asked, mut answered, mut max_ms) = (0u32, 0u32, 0.0f64);
    let mut errors = Vec::new();
    while more() {
        let t = Instant::now();
        asked += 1;
        match crate::ctl::request(sock, &Request::Stats) {
            Ok(r) if r.to_json()["ok"] == true => answered += 1,
            Ok(r) => errors.push(r.to_json().to_string()),
            Err(e) => errors.push(e.to_string()),
        }
        max_ms = max_ms.max(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(250));
    }
    errors.truncate(5);
    Ok((
        json!({
            "scrapes": burst,
            "control": {"asked": asked, "answered": answered,
                        "max_ms": (max_ms * 10.0).round() / 10.0, "errors": errors},
        }),
        hold,
    ))
}

/// Asks the daemon to `stop` over its control socket: the answer, and the seconds until
/// the daemon exited (null if it did not within 10 s).
fn stop_over_ctl(d: &mut Child, sock: &Path) -> Value {
    let t = Instant::now();
    let answer = match crate::ctl::request(sock, &Request::Stop) {
        Ok(r) => r.to_json(),
        Err(e) => json!({"error": e.to_string()}),
    };
    let mut exited = Value::Null;
    while t.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = d.0.try_wait() {
            exited = json!((t.elapsed().as_secs_f64() * 1e3).round() / 1e3);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    json!({"answer": answer, "exited_s": exited})
}

/// Kills `c` and reads the last line it printed, as JSON (null if none).
fn last_line(mut c: Child) -> Value {
    let _ = c.0.kill();
    let mut text = String::new();
    if let Some(mut o) = c.0.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut text);
    }
    let _ = c.0.wait();
    text.lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null)
}

/// How long `link-flap`'s uplink is down.
pub const LINK_DOWN: Duration = Duration::from_secs(2);

/// `link-flap`'s outage: the receiver's end of the uplink set down (the uplink's carrier
/// goes, as with a pulled cable) for [`LINK_DOWN`], then up. The daemon's counters half a
/// second into the outage and at its end (what it sent meanwhile), and the outage's length
/// as the testbed timed it (from the command that took the link down returning to the
/// one that brought it up returning).
fn link_flap(tb: &Testbed, sock: &Path) -> R<Value> {
    let rx = tb.rx();
    nsx(&rx, &["ip", "link", "set", "eth0", "down"])?;
    let down = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let a = ask_json(sock, &Request::Stats);
    std::thread::sleep(LINK_DOWN.saturating_sub(down.elapsed()));
    let b = ask_json(sock, &Request::Stats);
    let up = nsx(&rx, &["ip", "link", "set", "eth0", "up"]);
    let down_ms = down.elapsed().as_millis() as u64;
    up?;
    let uplink_tx = |v: &Value| {
        v["ports"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["iface"] == "up"))
            .map_or(Value::Null, |p| p["tx_frames"].clone())
    };
    Ok(json!({
        "down_ms": down_ms,
        "during": {
            "uplink_up": [a["dataplane"]["uplink_up"], b["dataplane"]["uplink_up"]],
            "tx_frames": [a["dataplane"]["tx_frames"], b["dataplane"]["tx_frames"]],
            "uplink_port_tx_frames": [uplink_tx(&a), uplink_tx(&b)],
            "engine_drops": [a["dataplane"]["engine_drops"], b["dataplane"]["engine_drops"]],
        },
    }))
}

/// In tenant `k`'s namespace, a process that sends a UDP frame with tenant 1's source MAC
/// address every 10 ms for `seconds` (raw `AF_PACKET`, from Python's standard library):
/// what a tenant that wants another's return traffic does.
fn spoofer(tb: &Testbed, k: usize, seconds: u32) -> R<Child> {
    let victim = nsx(&tb.tenant(1), &["cat", "/sys/class/net/eth0/address"])?;
    const SCRIPT: &str = "import socket,sys,time\n\
        src=bytes.fromhex(sys.argv[1].strip().replace(':',''))\n\
        f=bytes.fromhex('020000000099')+src+bytes.fromhex('0800'\
        '4500001c0000400040110000c0a80001c0a80002'\
        'd431d43100080000')\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        end=time.time()+float(sys.argv[2])\n\
        while time.time()<end:\n s.send(f)\n time.sleep(0.01)\n";
    Child::spawn(
        Command::new("ip")
            .args(["netns", "exec", &tb.tenant(k), "python3", "-c", SCRIPT])
            .arg(victim.trim())
            .arg(seconds.to_string())
            .stdout(Stdio::null()),
    )
}

/// Frames a second of the `mac-flood` experiment's flooder, each from a new source MAC.
pub const MAC_FLOOD_PER_S: u32 = 10_000;

/// In tenant `k`'s namespace, a process that sends UDP frames to the receiver from the
/// tenant's own IP address, each with a new random (unicast, locally administered) source
/// MAC address and the same ports, [`MAC_FLOOD_PER_S`] a second for `seconds` (raw
/// `AF_PACKET`, from Python's standard library), as `macof` does to a switch's table.
fn mac_flooder(tb: &Testbed, k: usize, seconds: u32) -> R<Child> {
    const SCRIPT: &str = "import socket,sys,time,os,struct\n\
        h=bytearray(bytes.fromhex('4500002000004000401100000000000000000000'))\n\
        h[12:20]=socket.inet_aton(sys.argv[1])+socket.inet_aton(sys.argv[2])\n\
        c=sum(struct.unpack('!10H',bytes(h)))\n\
        c=(c&0xffff)+(c>>16)\n\
        c=(c&0xffff)+(c>>16)\n\
        h[10:12]=struct.pack('!H',c^0xffff)\n\
        t=bytes.fromhex('0800')+bytes(h)+struct.pack('!HHHH',40000,9,12,0)+b'weft'\n\
        d=bytes.fromhex('020000000099')\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        n=int(sys.argv[4])//100\n\
        end=time.time()+float(sys.argv[3])\n\
        while time.time()<end:\n\
        \x20for _ in range(n):\n\
        \x20\x20m=bytearray(os.urandom(6));m[0]=(m[0]&0xfc)|2\n\
        \x20\x20s.send(d+bytes(m)+t)\n\
        \x20time.sleep(0.01)\n";
    Child::spawn(
        Command::new("ip")
            .args(["netns", "exec", &tb.tenant(k), "python3", "-c", SCRIPT])
            .arg(format!("10.77.0.{k}"))
            .arg(RX)
            .arg(seconds.to_string())
            .arg(MAC_FLOOD_PER_S.to_string())
            .stdout(Stdio::null()),
    )
}

/// New flows a second of the `flood` experiment's flooder.
pub const FLOOD_FLOWS_PER_S: u32 = 2_000;

/// In tenant `k`'s namespace, a process that sends UDP frames to the receiver from the
/// tenant's own MAC and IP addresses, each from a random source port, so each is a new
/// flow: [`FLOOD_FLOWS_PER_S`] a second for `seconds` (raw `AF_PACKET`, from Python's
/// standard library), as a tenant flooding with `hping3 --rand-source` from its own
/// address would.
fn flooder(tb: &Testbed, k: usize, seconds: u32) -> R<Child> {
    let mac = nsx(&tb.tenant(k), &["cat", "/sys/class/net/eth0/address"])?;
    const SCRIPT: &str = "import socket,sys,time,random,struct\n\
        src=bytes.fromhex(sys.argv[1].strip().replace(':',''))\n\
        ip=bytes(socket.inet_aton(sys.argv[2]))+socket.inet_aton(sys.argv[3])\n\
        h=bytearray(bytes.fromhex('4500002000004000401100000000000000000000'))\n\
        h[12:20]=ip\n\
        c=sum(struct.unpack('!10H',bytes(h)))\n\
        c=(c&0xffff)+(c>>16)\n\
        c=(c&0xffff)+(c>>16)\n\
        h[10:12]=struct.pack('!H',c^0xffff)\n\
        e=bytes.fromhex('020000000099')+src+bytes.fromhex('0800')+bytes(h)\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        n=int(sys.argv[5])//100\n\
        end=time.time()+float(sys.argv[4])\n\
        p=lambda:struct.pack('!HHHH',random.randrange(1024,65536),9,12,0)+b'weft'\n\
        while time.time()<end:\n for _ in range(n): s.send(e+p())\n time.sleep(0.01)\n";
    Child::spawn(
        Command::new("ip")
            .args(["netns", "exec", &tb.tenant(k), "python3", "-c", SCRIPT])
            .arg(mac.trim())
            .arg(format!("10.77.0.{k}"))
            .arg(RX)
            .arg(seconds.to_string())
            .arg(FLOOD_FLOWS_PER_S.to_string())
            .stdout(Stdio::null()),
    )
}

/// Percentiles (µs) from sockperf's summary.
fn sockperf_percentiles(text: &str) -> Value {
    let mut m = serde_json::Map::new();
    for l in text.lines() {
        if let Some(rest) = l.split("percentile ").nth(1) {
            let mut it = rest.split('=');
            let (Some(p), Some(v)) = (it.next(), it.next()) else {
                continue;
            };
            let key = match p.trim() {
                "50.000" => "p50_us",
                "90.000" => "p90_us",
                "99.000" => "p99_us",
                "99.900" => "p999_us",
                _ => continue,
            };
            if let Ok(x) = v.trim().parse::<f64>() {
                m.insert(key.into(), json!(x));
            }
        }
    }
    Value::Object(m)
}

/// memaslap's "Total Statistics" global line: operations/s and latency (µs).
fn memaslap_totals(text: &str) -> Value {
    let mut in_total = false;
    for l in text.lines() {
        if l.starts_with("Total Statistics") {
            in_total = true;
        }
        if in_total && l.starts_with("Global") {
            let f: Vec<f64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            // Time, Ops, TPS, Net, Get_miss, Min, Max, Avg, Std_dev, Geo_dist
            if f.len() >= 9 {
                return json!({"ops_per_s": f[2], "min_us": f[5], "max_us": f[6], "avg_us": f[7], "std_us": f[8]});
            }
        }
    }
    Value::Null
}

/// `ip netns exec NS` with the applications' CPUs ([`pinned`]), `nice -n N`
/// ([`Experiment::app_nice`]) and the application's scheduler slice
/// ([`Experiment::app_slice_us`]) set before `exec`: how the latency-sensitive application
/// starts, the same under weft and HTB.
fn app_command(exp: &Experiment, ns: &str) -> Command {
    let mut c = pinned(exp, ns);
    c.args(["nice", "-n", &exp.app_nice.to_string()]);
    if let Some(us) = exp.app_slice_us {
        weft_sys::sched::slice_in_child(&mut c, us);
    }
    c
}

fn app_output(exp: &Experiment, ns: &str, args: &[&str]) -> R<String> {
    output(app_command(exp, ns).args(args), args)
}

fn memaslap(tb: &Testbed, exp: &Experiment, dst: &str, seconds: u32) -> R<Value> {
    let (server, t) = (format!("{dst}:11211"), format!("{seconds}s"));
    let args = [
        "memcaslap",
        "-s",
        &server,
        "-t",
        &t,
        "-T",
        "1",
        "-c",
        "4",
        "-S",
        &t,
    ];
    let o = app_output(exp, &tb.tenant(1), &args)?;
    Ok(memaslap_totals(&o))
}

fn sockperf(tb: &Testbed, exp: &Experiment, dst: &str, seconds: u32) -> R<Value> {
    Ok(sockperf_percentiles(&sockperf_output(
        tb, exp, dst, seconds,
    )?))
}

/// A sockperf request's frame: its default 14-byte message in UDP, IPv4 and Ethernet
/// headers (8 + 20 + 14 bytes).
const SOCKPERF_FRAME: u64 = 56;

/// sockperf's ping-pong client to `dst` for `seconds` at the experiment's message rate.
fn sockperf_args(exp: &Experiment, dst: &str, seconds: u32) -> [String; 10] {
    [
        "sockperf".into(),
        "ping-pong".into(),
        "-i".into(),
        dst.into(),
        "-p".into(),
        SOCKPERF_PORT.to_string(),
        "-t".into(),
        seconds.to_string(),
        "--mps".into(),
        exp.sockperf_mps.clone(),
    ]
}

fn sockperf_output(tb: &Testbed, exp: &Experiment, dst: &str, seconds: u32) -> R<String> {
    let args = sockperf_args(exp, dst, seconds);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    app_output(exp, &tb.tenant(1), &args)
}

/// Installs `pkgs` with apt-get unless `tool` and the first package's command are there.
fn ensure_tool(tool: &str, pkgs: &[&str]) {
    if sh(&[
        "sh",
        "-c",
        &format!("command -v {tool} && command -v {}", pkgs[0]),
    ])
    .is_err()
    {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(pkgs)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status();
    }
}

/// How much CPU the processes outside a testbed used while it measured: a thread samples
/// every process's `utime + stime` (`/proc/PID/stat`) every 200 ms, leaving out kernel
/// threads (softirq work: HTB's, and the veth deliveries), this process, and every process
/// in the testbed's network namespaces (weft, the applications). A process that started
/// during the window counts from zero; one that lived less than a sample period is missed.
/// What another session's build or profiler takes from the testbed's applications shows
/// here: a run with a CPU-bound neighbour measures the neighbour (docs/dataplane.md).
pub struct ForeignCpu {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<f64>>,
}

impl ForeignCpu {
    /// Starts sampling; `namespaces` are the testbed's (`ip netns` names).
    pub fn start(namespaces: &[String]) -> ForeignCpu {
        use std::os::unix::fs::MetadataExt;
        let own: Vec<u64> = namespaces
            .iter()
            .filter_map(|n| std::fs::metadata(Path::new("/run/netns").join(n)).ok())
            .map(|m| m.ino())
            .collect();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weft-testbed-cpu".into())
            .spawn(move || {
                let hz = weft_sys::process::clock_ticks_per_second() as f64;
                let uptime = || {
                    std::fs::read_to_string("/proc/uptime")
                        .ok()
                        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
                        .unwrap_or(0.0)
                };
                let since = (uptime() * hz) as u64;
                let t0 = Instant::now();
                let me = std::process::id();
                // pid -> (ticks when first seen, or 0 if it started in the window; last).
                let mut seen: std::collections::HashMap<u32, (u64, u64)> = Default::default();
                loop {
                    let last_round = halt.load(Ordering::Relaxed);
                    for (pid, ticks, start) in foreign_ticks(&own, me) {
                        let e = seen
                            .entry(pid)
                            .or_insert((if start >= since { 0 } else { ticks }, ticks));
                        e.1 = e.1.max(ticks);
                    }
                    if last_round {
                        break;
                    }
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(200) && !halt.load(Ordering::Relaxed)
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                let ticks: u64 = seen.values().map(|(a, b)| b.saturating_sub(*a)).sum();
                ticks as f64 / hz / t0.elapsed().as_secs_f64().max(1e-3)
            })
            .ok();
        ForeignCpu { stop, thread }
    }

    /// Stops sampling: the CPUs (1.0 = one CPU's time) the processes outside the testbed
    /// used on average since [`ForeignCpu::start`], to two decimals (`None`: could not tell).
    pub fn stop(mut self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let cpus = self.thread.take()?.join().ok()?;
        Some((cpus * 100.0).round() / 100.0)
    }
}

impl Drop for ForeignCpu {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (pid, utime + stime, start time in ticks since boot) of every user-space process but
/// `me` whose network namespace is not one of `own` (inodes).
fn foreign_ticks(own: &[u64], me: u32) -> Vec<(u32, u64, u64)> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`: after the last `)`, field 3 (state) is index 0.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
        let (Some(flags), Some(ut), Some(st), Some(start)) = (num(6), num(11), num(12), num(19))
        else {
            continue;
        };
        if flags & PF_KTHREAD != 0 {
            continue;
        }
        let ns = std::fs::read_link(e.path().join("ns/net"))
            .ok()
            .and_then(|l| {
                let l = l.to_string_lossy().into_owned();
                l.strip_prefix("net:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            });
        if ns.is_some_and(|ino| own.contains(&ino)) {
            continue;
        }
        v.push((pid, ut + st, start));
    }
    v
}

/// weft's counters (`ctl stats`), or null without a daemon.
fn weft_stats(daemon: bool, sock: &Path) -> Value {
    if !daemon {
        return Value::Null;
    }
    ask_json(sock, &Request::Stats)
}

/// (bytes, packets) received on `dev` in namespace `ns`.
fn rx_counters(ns: &str, dev: &str) -> (u64, u64) {
    let read = |what: &str| {
        nsx(
            ns,
            &["cat", &format!("/sys/class/net/{dev}/statistics/{what}")],
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
    };
    (read("rx_bytes"), read("rx_packets"))
}

/// sockperf ping-pong from tenant 1 to `dst` for `seconds`, as [`sockperf_output`], calling
/// `sample` twice while its test runs: 0.5 s after it says `Starting test` (its first 0.4 s
/// are a warm-up it does not measure) and 0.2 s before its `seconds` are up. Its output and
/// both samples (the second is taken at once if the test ended sooner).
fn sockperf_windowed<T>(
    tb: &Testbed,
    exp: &Experiment,
    dst: &str,
    seconds: u32,
    mut sample: impl FnMut() -> T,
) -> R<(String, T, T)> {
    use std::io::BufRead;
    let args = sockperf_args(exp, dst, seconds);
    let mut c = Child::spawn(
        app_command(exp, &tb.tenant(1))
            .args(&args)
            .stdout(Stdio::piped()),
    )?;
    let so =
        c.0.stdout
            .take()
            .ok_or_else(|| TestbedError("sockperf: no stdout".into()))?;
    let mut lines = std::io::BufReader::new(so);
    let mut text = String::new();
    // Its warm-up (about 2 s) first.
    loop {
        let mut l = String::new();
        let n = lines.read_line(&mut l).unwrap_or(0);
        text += &l;
        if n == 0 || l.contains("Starting test") {
            break;
        }
    }
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let a = sample();
    let end = Duration::from_secs_f64((seconds as f64 - 0.2).max(0.6));
    std::thread::sleep(end.saturating_sub(started.elapsed()));
    let b = sample();
    let _ = std::io::Read::read_to_string(&mut lines, &mut text);
    let status =
        c.0.wait()
            .map_err(|e| TestbedError(format!("sockperf: {e}")))?;
    if !status.success() {
        return Err(TestbedError(format!(
            "`{}` failed: {status}",
            args.join(" ")
        )));
    }
    Ok((text, a, b))
}

/// UDP datagrams received in namespace `ns` (`Udp: InDatagrams` of `/proc/net/snmp`).
fn udp_in(ns: &str) -> u64 {
    let snmp = nsx(ns, &["cat", "/proc/net/snmp"]).unwrap_or_default();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "InDatagrams")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Seconds of `limit-priority`'s first phase (sockperf alone, iperf3 off).
const BULK_OFF_S: u32 = 4;

/// `limit-priority`: tenant 1's sockperf ping-pong alone for [`BULK_OFF_S`], then with
/// tenant 1's iperf3 to the same address saturating the per-destination limit (after the
/// warm-up) for `seconds`; sockperf has strict priority under the limit
/// ([`Experiment::limit_prio`]). Reports both phases' percentiles, iperf3's goodput, the
/// limited destination's wire rate at the receiver (frames + 20 bytes, as the limit counts
/// them) and the CPU the processes outside the testbed took in each phase ([`ForeignCpu`]).
fn run_limit_prio(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
    sock: &Path,
) -> R<Value> {
    ensure_tool("sockperf", &["sockperf"]);
    let (tb, daemon, _log) = setup(exp, prefix, mode, weft, out, sock)?;
    let t1 = &exp.tenants[0];
    let dst = t1.dst.clone();
    let limit_bps = exp.limit.as_ref().map_or(0, |l| l.1);
    let port = SOCKPERF_PORT.to_string();
    let _server = Child::spawn(
        app_command(exp, &tb.rx())
            .args(["sockperf", "server", "-i", &dst, "-p", &port])
            .stdout(Stdio::null()),
    )?;
    let _iperf_server = Child::spawn(
        pinned(exp, &tb.rx())
            .args(["iperf3", "-s", "-1", "-p", "5201"])
            .stdout(Stdio::null()),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let namespaces = tb.namespaces();
    // Phase 1: sockperf alone.
    let cpu = ForeignCpu::start(&namespaces);
    let off = sockperf(&tb, exp, &dst, BULK_OFF_S)?;
    let foreign_off = cpu.stop();
    // Phase 2: iperf3 on (after its warm-up), sockperf again.
    let mut client = Child::spawn(
        pinned(exp, &tb.tenant(1))
            .args(["iperf3", "-J", "-c", &dst, "-p", "5201"])
            .args(["-P", &t1.flows.to_string()])
            // Beyond the probe, which spends about 2 s in its own warm-up before its test's
            // `seconds` begin; the client's report is read once it ends.
            .args(["-t", &(exp.seconds + exp.warmup_s + 5).to_string()])
            .args(["-O", &exp.warmup_s.to_string()])
            .stdout(Stdio::piped()),
    )?;
    std::thread::sleep(Duration::from_secs(exp.warmup_s as u64));
    let cpu = ForeignCpu::start(&namespaces);
    let (on_text, w0, w1) = sockperf_windowed(&tb, exp, &dst, exp.seconds, || {
        (
            weft_stats(daemon.is_some(), sock),
            rx_counters(&tb.rx(), "eth0"),
            udp_in(&tb.rx()),
            Instant::now(),
        )
    })?;
    let on = sockperf_percentiles(&on_text);
    let foreign_on = cpu.stop();
    let mut stdout = Vec::new();
    if let Some(mut so) = client.0.stdout.take() {
        let _ = std::io::Read::read_to_end(&mut so, &mut stdout);
    }
    let _ = client.0.wait();
    let v: Value = serde_json::from_slice(&stdout).unwrap_or(Value::Null);
    if v.is_null() || !v["error"].is_null() {
        return Err(TestbedError(format!(
            "{}: iperf3 of tenant 1 failed: {}",
            mode.name(),
            v["error"]
        )));
    }
    // iperf3's own goodput, over its whole measured run (which began with sockperf's warm-up
    // and outlasts its test).
    let goodput = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    let retransmits = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    let stats = match daemon {
        Some(mut d) => {
            // Traffic is over: let the NIC drain, so its counters balance exactly.
            std::thread::sleep(Duration::from_millis(300));
            let s = weft_stats(true, sock);
            d.stop(Duration::from_secs(3));
            s
        }
        None => Value::Null,
    };
    drop(tb);
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    // What reached the receiver while sockperf's test ran, at the limit's measure (frame +
    // 20 bytes of preamble and gap): tenant 2 is idle, so all of it is tenant 1's traffic to
    // the limited destination; sockperf's requests are its UDP datagrams, the rest is
    // iperf3's. The share the limit leaves iperf3 is the limit less sockperf's requests.
    let (s0, rx0, udp0, t0) = w0;
    let (s1, rx1, udp1, t1w) = w1;
    let dt = t1w.duration_since(t0).as_secs_f64().max(1e-3);
    let (db, dp) = (rx1.0.saturating_sub(rx0.0), rx1.1.saturating_sub(rx0.1));
    let wire = (db + 20 * dp) as f64 * 8.0 / dt / 1e6;
    let latency_wire =
        udp1.saturating_sub(udp0) as f64 * (SOCKPERF_FRAME + 20) as f64 * 8.0 / dt / 1e6;
    let lim = limit_bps as f64 / 1e6;
    let (bulk_wire, share) = (wire - latency_wire, lim - latency_wire);
    // weft's own counters over the same window: each leaf's frame bytes.
    let leaf_mbps: serde_json::Map<String, Value> = s1["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["leaf"] == true)
        .map(|n| {
            let before = s0["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["name"] == n["name"])
                .and_then(|m| m["bytes"].as_u64())
                .unwrap_or(0);
            let b = n["bytes"].as_u64().unwrap_or(0).saturating_sub(before);
            (
                n["name"].as_str().unwrap_or("").to_string(),
                json!(r2(b as f64 * 8.0 / dt / 1e6)),
            )
        })
        .collect();
    let p99 = |p: &Value| p["p99_us"].as_f64();
    let ratio = match (p99(&on), p99(&off)) {
        (Some(l), Some(i)) if i > 0.0 => json!((l / i * 1000.0).round() / 1000.0),
        _ => Value::Null,
    };
    Ok(json!({
        "scheduler": mode.name(),
        "app_cpus": exp.app_cpus.as_deref().unwrap_or("all"),
        "app": "sockperf ping-pong",
        "latency_bulk_off": off,
        "latency_bulk_on": on,
        "p99_on_over_off": ratio,
        "window_s": r2(dt),
        "latency_app_wire_mbps": r2(latency_wire),
        "bulk": {"app": "iperf3", "flows": t1.flows, "mbps": r2(goodput),
                 "retransmits": retransmits, "wire_mbps": r2(bulk_wire),
                 "share_mbps": r2(share),
                 "share_rel_error": (((bulk_wire - share) / share.max(1e-9)).abs() * 1e4).round() / 1e4},
        "limit": {"dst": dst, "limit_mbps": lim, "burst_bytes": LIMIT_PRIO_BURST,
                  "wire_mbps": r2(wire),
                  "rel_error": (((wire - lim) / lim.max(1e-9)).abs() * 1e4).round() / 1e4},
        "leaf_mbps": if mode == Mode::Weft { Value::Object(leaf_mbps) } else { Value::Null },
        "foreign_cpu": {"bulk_off": foreign_off, "bulk_on": foreign_on},
        "weft_stats": stats,
    }))
}

/// The latency experiment: tenant 1's sockperf ping-pong (UDP; `--mps` from
/// [`Experiment::sockperf_mps`], a closed loop by default) alone, then
/// under the other tenants' iperf3 load; tenant 1 has strict priority.
fn run_latency(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
    sock: &Path,
) -> R<Value> {
    if exp.memcached {
        ensure_tool("memcaslap", &["memcached", "libmemcached-tools"]);
    } else {
        ensure_tool("sockperf", &["sockperf"]);
    }
    let (tb, daemon, _log) = setup(exp, prefix, mode, weft, out, sock)?;
    let dst = exp.tenants[0].dst.clone();
    let mut server = app_command(exp, &tb.rx());
    if exp.memcached {
        server.args([
            "memcached",
            "-u",
            "root",
            "-l",
            &dst,
            "-p",
            "11211",
            "-t",
            "1",
        ]);
    } else {
        server.args([
            "sockperf",
            "server",
            "-i",
            &dst,
            "-p",
            &SOCKPERF_PORT.to_string(),
        ]);
    }
    let _server = Child::spawn(server.stdout(Stdio::null()))?;
    std::thread::sleep(Duration::from_millis(300));
    let probe = |s: u32| {
        if exp.memcached {
            memaslap(&tb, exp, &dst, s)
        } else {
            sockperf(&tb, exp, &dst, s)
        }
    };
    let namespaces = tb.namespaces();
    let cpu = ForeignCpu::start(&namespaces);
    let idle = probe(4)?;
    let foreign_idle = cpu.stop();
    // weft's timing histograms of the idle phase; then a fresh start for the loaded one.
    let timing_idle = match daemon {
        Some(_) => {
            let t = ask_json(sock, &Request::Stats)["timing"].clone();
            let _ = crate::ctl::request(sock, &Request::ResetTiming);
            t
        }
        None => Value::Null,
    };
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for (i, t) in exp.tenants.iter().enumerate().skip(1) {
        let port = format!("{}", 5201 + i);
        servers.push(Child::spawn(
            pinned(exp, &tb.rx())
                .args(["iperf3", "-s", "-1", "-p", &port])
                .stdout(Stdio::null()),
        )?);
        std::thread::sleep(Duration::from_millis(200));
        clients.push(Child::spawn(
            pinned(exp, &tb.tenant(i + 1))
                .args(["iperf3", "-c", &t.dst])
                .args(["-p", &port, "-P", &t.flows.to_string()])
                // Longer than the probe, which takes a second or two beyond its measured
                // seconds (start, sockperf's own warm-up); the clients are killed after it.
                .args(["-t", &(exp.seconds + exp.warmup_s + 10).to_string()])
                .stdout(Stdio::null()),
        )?);
    }
    std::thread::sleep(Duration::from_secs(exp.warmup_s as u64));
    let cpu = ForeignCpu::start(&namespaces);
    let loaded = probe(exp.seconds)?;
    let foreign_loaded = cpu.stop();
    let stats = match daemon {
        Some(mut d) => {
            let s = ask_json(sock, &Request::Stats);
            d.stop(Duration::from_secs(3));
            s
        }
        None => Value::Null,
    };
    drop(clients);
    drop(servers);
    drop(tb);
    let key = if exp.memcached { "avg_us" } else { "p99_us" };
    let ratio = match (loaded[key].as_f64(), idle[key].as_f64()) {
        (Some(l), Some(i)) if i > 0.0 => json!((l / i * 1000.0).round() / 1000.0),
        _ => Value::Null,
    };
    Ok(json!({
        "scheduler": mode.name(),
        "app_cpus": exp.app_cpus.as_deref().unwrap_or("all"),
        "latency_idle": idle,
        "latency_loaded": loaded,
        "app": if exp.memcached { "memcached (memaslap)" } else { "sockperf ping-pong" },
        "loaded_over_idle": key,
        "p99_loaded_over_idle": ratio,
        "foreign_cpu": {"idle": foreign_idle, "loaded": foreign_loaded},
        "weft_timing_idle": timing_idle,
        "weft_stats": stats,
    }))
}

/// The report as Markdown: per-tenant throughput (and its series) for the throughput
/// experiments, percentiles idle and under load for the latency ones, and for
/// `limit-priority` the percentiles with the bulk application off and on beside its rates.
pub fn markdown(r: &Value) -> String {
    let results: Vec<&Value> = r["results"].as_array().into_iter().flatten().collect();
    let name = |m: &Value| m["scheduler"].as_str().unwrap_or("").to_string();
    let mut s = format!(
        "# testbed: {} at {} Mbit/s, {} s measured\n",
        r["experiment"].as_str().unwrap_or(""),
        r["rate_bps"].as_f64().unwrap_or(0.0) / 1e6,
        r["seconds"]
    );
    let mut rows = String::new();
    for m in &results {
        for t in m["tenants"].as_array().into_iter().flatten() {
            rows += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                name(m),
                t["tenant"],
                t["weight"],
                t["flows"],
                t["mbps"],
                t["ideal_mbps"],
                t["rel_error"],
                t["retransmits"]
            );
        }
    }
    if !rows.is_empty() {
        s += "\n| scheduler | tenant | weight | flows | Mbit/s | ideal | rel. error | retransmits |\n|---|---|---|---|---|---|---|---|\n";
        s += &rows;
    }
    // Latency: one row per scheduler and phase, the columns the tool reported.
    let lat: Vec<&&Value> = results
        .iter()
        .filter(|m| m["latency_idle"].is_object())
        .collect();
    if let Some(first) = lat.first() {
        let keys: Vec<String> = first["latency_idle"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        s += &format!(
            "\nTenant 1's {} (µs unless named), idle and under the other tenants' load:\n\n| scheduler | phase | {} | loaded/idle ({}) | bulk tenants' Mbit/s |\n|---|---|{}---|---|\n",
            first["app"].as_str().unwrap_or(""),
            keys.join(" | "),
            first["loaded_over_idle"].as_str().unwrap_or(""),
            "---|".repeat(keys.len())
        );
        for m in &lat {
            // The bulk tenants' rate from weft's counters (weft only; HTB has none).
            let bulk: f64 = m["weft_stats"]["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["leaf"] == true && n["name"] != "tenant1")
                .filter_map(|n| n["rate_bps"].as_f64())
                .sum();
            for (phase, key) in [("idle", "latency_idle"), ("loaded", "latency_loaded")] {
                let cells: Vec<String> = keys.iter().map(|k| m[key][k].to_string()).collect();
                let (ratio, rate) = if phase == "loaded" {
                    (
                        m["p99_loaded_over_idle"].to_string(),
                        if bulk > 0.0 {
                            format!("{:.1}", bulk / 1e6)
                        } else {
                            "–".into()
                        },
                    )
                } else {
                    (String::new(), String::new())
                };
                s += &format!(
                    "| {} | {phase} | {} | {ratio} | {rate} |\n",
                    name(m),
                    cells.join(" | ")
                );
            }
        }
    }
    // limit-priority: one row per scheduler and phase.
    let lp: Vec<&&Value> = results
        .iter()
        .filter(|m| m["latency_bulk_off"].is_object())
        .collect();
    if let Some(first) = lp.first() {
        s += &format!(
            "\nTenant 1's sockperf ping-pong (µs) and iperf3 (Mbit/s) to {} under a {} Mbit/s \
             limit (sockperf first under it), iperf3 off then on; rates at the wire (frames + \
             20 bytes) are taken at the receiver while sockperf's test ran:\n\n\
             | scheduler | phase | p50_us | p99_us | p99 on/off | iperf3 goodput | iperf3 at the wire / its share of the limit | destination at the wire | other processes' CPUs |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            first["limit"]["dst"].as_str().unwrap_or(""),
            first["limit"]["limit_mbps"]
        );
        for m in &lp {
            for (phase, key, cpu) in [
                ("iperf3 off", "latency_bulk_off", "bulk_off"),
                ("iperf3 on", "latency_bulk_on", "bulk_on"),
            ] {
                let on = phase == "iperf3 on";
                let cell = |v: String| if on { v } else { String::new() };
                let b = &m["bulk"];
                s += &format!(
                    "| {} | {phase} | {} | {} | {} | {} | {} | {} | {} |\n",
                    name(m),
                    m[key]["p50_us"],
                    m[key]["p99_us"],
                    cell(m["p99_on_over_off"].to_string()),
                    cell(b["mbps"].to_string()),
                    cell(format!("{} / {}", b["wire_mbps"], b["share_mbps"])),
                    cell(m["limit"]["wire_mbps"].to_string()),
                    m["foreign_cpu"][cpu]
                );
            }
        }
    }
    let mut series = String::new();
    for m in &results {
        for t in m["tenants"].as_array().into_iter().flatten() {
            let v: Vec<String> = t["mbps_per_second"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| format!("{x}"))
                .collect();
            if !v.is_empty() {
                series += &format!("| {} | {} | {} |\n", name(m), t["tenant"], v.join(" "));
            }
        }
    }
    if !series.is_empty() {
        s += "\nThroughput over time (Mbit/s per second, sender side; plot: throughput.svg):\n\n| scheduler | tenant | per second |\n|---|---|---|\n";
        s += &series;
    }
    if results.iter().any(|m| !m["total_mbps"].is_null()) {
        s += "\n| scheduler | Jain (weighted) | total Mbit/s | max rel. error | weft CPU % | system CPU % |\n|---|---|---|---|---|---|\n";
        for m in &results {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                name(m),
                m["jain"],
                m["total_mbps"],
                m["max_rel_error"],
                m["weft_cpu_pct"],
                m["system_cpu_pct"]
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `down` removes the claim lock files a SIGKILLed `weft run` left for the namespaces
    /// it deletes (root only; skipped elsewhere).
    #[test]
    fn down_removes_the_claim_lock_files_of_its_namespaces() {
        let prefix = format!("wqlk{}", std::process::id() % 10_000);
        let ns = format!("{prefix}-nic");
        if !is_root() || sh(&["ip", "netns", "add", &ns]).is_err() {
            eprintln!("skipped: cannot make a network namespace here");
            return;
        }
        struct Gone(String, Option<std::path::PathBuf>);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = sh(&["ip", "netns", "del", &self.0]);
                if let Some(p) = &self.1 {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
        let mut guard = Gone(ns.clone(), None);
        let ino = std::os::unix::fs::MetadataExt::ino(
            &std::fs::metadata(Path::new("/run/netns").join(&ns)).unwrap(),
        );
        std::fs::create_dir_all(crate::dataplane::CLAIM_DIR).unwrap();
        let lock = Path::new(crate::dataplane::CLAIM_DIR)
            .join(format!("{}7.lock", crate::dataplane::claim_prefix(ino)));
        std::fs::write(&lock, "1").unwrap();
        guard.1 = Some(lock.clone());
        let r = down(&prefix);
        assert_eq!(r.namespaces, [ns]);
        assert!(!lock.exists(), "{} left behind", lock.display());
    }

    #[test]
    fn what_down_removed_is_said_in_words() {
        let none = Removed::default();
        assert_eq!(none.describe("wq"), "nothing to delete: no namespace wq-*");
        let one = Removed {
            namespaces: vec!["wq-nic".into(), "wq-t1".into()],
            killed: 1,
        };
        assert_eq!(
            one.describe("wq"),
            "deleted wq-nic, wq-t1 (1 process in them killed)"
        );
        let two = Removed {
            namespaces: vec!["wq-nic".into()],
            killed: 2,
        };
        assert_eq!(
            two.describe("wq"),
            "deleted wq-nic (2 processes in them killed)"
        );
    }

    #[test]
    fn applications_avoid_the_nic_core_under_weft_only() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut e = Experiment::named("latency", 500_000_000, 10).expect("known experiment");
        e.app_cpus = None;
        e.weft_cpu = Some(n - 1);
        let weft = e.for_mode(Mode::Weft).app_cpus;
        if n > 1 {
            let list = weft.expect("pinned under weft");
            let cpus: Vec<usize> = list.split(',').map(|c| c.parse().unwrap()).collect();
            assert_eq!(cpus, (0..n - 1).collect::<Vec<_>>(), "{list}");
        } else {
            assert_eq!(weft, None);
        }
        assert_eq!(e.for_mode(Mode::Htb).app_cpus, None);
        e.weft_cpu = None;
        assert_eq!(e.for_mode(Mode::Weft).app_cpus, None);
        e.app_cpus = Some("all".into());
        assert_eq!(e.for_mode(Mode::Weft).app_cpus, None);
        e.app_cpus = Some("0-1".into());
        assert_eq!(e.for_mode(Mode::Htb).app_cpus.as_deref(), Some("0-1"));
    }

    #[test]
    fn latency_report_has_a_table_and_no_empty_throughput_rows() {
        let r = json!({
            "experiment": "latency", "rate_bps": 500_000_000u64, "seconds": 10,
            "results": [{
                "scheduler": "weft", "app": "sockperf ping-pong", "loaded_over_idle": "p99_us",
                "latency_idle": {"p99_us": 30.0, "p50_us": 21.5},
                "latency_loaded": {"p99_us": 55.0, "p50_us": 25.0},
                "p99_loaded_over_idle": 1.833,
                "weft_stats": {"nodes": [
                    {"name": "root", "leaf": false, "rate_bps": 5e8},
                    {"name": "tenant1", "leaf": true, "rate_bps": 8e6},
                    {"name": "tenant2", "leaf": true, "rate_bps": 4.8e8}]}
            }, {
                "scheduler": "htb", "app": "sockperf ping-pong", "loaded_over_idle": "p99_us",
                "latency_idle": {"p99_us": 17.0, "p50_us": 12.0},
                "latency_loaded": {"p99_us": 110.0, "p50_us": 26.0},
                "p99_loaded_over_idle": 6.47, "weft_stats": null
            }]
        });
        let md = markdown(&r);
        assert!(
            md.contains("| scheduler | phase | p99_us | p50_us | loaded/idle (p99_us) |"),
            "{md}"
        );
        assert!(
            md.contains("| weft | loaded | 55.0 | 25.0 | 1.833 | 480.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| htb | loaded | 110.0 | 26.0 | 6.47 | – |"),
            "{md}"
        );
        assert!(!md.contains("null"), "{md}");
        assert!(!md.contains("retransmits"), "{md}");
    }

    #[test]
    fn limit_priority_report_has_a_row_per_scheduler_and_phase() {
        let r = json!({
            "experiment": "limit-priority", "rate_bps": 500_000_000u64, "seconds": 5,
            "results": [{
                "scheduler": "weft", "app": "sockperf ping-pong",
                "latency_bulk_off": {"p50_us": 20.0, "p99_us": 30.0},
                "latency_bulk_on": {"p50_us": 25.0, "p99_us": 45.0},
                "p99_on_over_off": 1.5,
                "bulk": {"mbps": 90.1, "wire_mbps": 95.4, "share_mbps": 96.0},
                "limit": {"dst": "10.77.0.200", "limit_mbps": 100.0, "wire_mbps": 99.8},
                "foreign_cpu": {"bulk_off": 0.01, "bulk_on": 0.02}
            }]
        });
        let md = markdown(&r);
        assert!(md.contains("under a 100.0 Mbit/s limit"), "{md}");
        assert!(
            md.contains("| weft | iperf3 off | 20.0 | 30.0 |  |  |  |  | 0.01 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| weft | iperf3 on | 25.0 | 45.0 | 1.5 | 90.1 | 95.4 / 96.0 | 99.8 | 0.02 |"
            ),
            "{md}"
        );
        assert!(!md.contains("null"), "{md}");
    }

    #[test]
    fn limit_priority_policy_puts_sockperf_first_under_the_limit() {
        let e = Experiment::named("limit-priority", 500_000_000, 5).unwrap();
        if let Err(err) = weft_core::policy::compile_str(
            Path::new("x.yaml"),
            &e.policy_yaml(),
            &Default::default(),
        ) {
            panic!("{err}");
        }
        assert_eq!(e.limit, Some((RX2.to_string(), 100_000_000)));
        let y = e.policy_yaml();
        assert!(y.contains("rate: 100000000bit, burst: 6056b, match: {dst: 10.77.0.200/32}"));
        assert!(y.contains("priority: 0, match: {dport: 11111}"), "{y}");
    }

    /// A busy process outside the listed namespaces is counted; this process is not.
    #[test]
    fn foreign_cpu_counts_other_processes() {
        let cpu = ForeignCpu::start(&[]);
        let mut hog = Command::new("sh")
            .args(["-c", "exec timeout 1.5 sh -c 'while :; do :; done'"])
            .spawn()
            .expect("sh");
        let _ = hog.wait();
        let used = cpu.stop().expect("measured");
        // The hog's share of a CPU, whatever else the machine runs, is well above nothing.
        assert!(used > 0.1, "{used}");
    }

    #[test]
    fn tool_outputs_parse() {
        let sp = "sockperf: ---> percentile 99.000 = 1997.688\nsockperf: ---> percentile 50.000 =   15.704\nnoise";
        assert_eq!(
            sockperf_percentiles(sp),
            json!({"p99_us": 1997.688, "p50_us": 15.704})
        );
        let ms = "Total Statistics\nType     Time(s)  Ops  TPS(ops/s)   Net(M/s)   Get_miss   Min(us)  Max(us)    Avg(us)    Std_dev    Geo_dist\nPeriod   2  151371  75685  78.5  0  16  2751  52  50.54  46.47\nGlobal   2  151371  75685  78.5  0  16  2751  52  50.54  46.47\n";
        assert_eq!(memaslap_totals(ms)["ops_per_s"], json!(75685.0));
        assert_eq!(memaslap_totals(ms)["avg_us"], json!(52.0));
        assert_eq!(memaslap_totals("garbage"), Value::Null);
    }

    #[test]
    fn experiment_policies_compile() {
        for n in Experiment::NAMES {
            let e = Experiment::named(n, 500_000_000, 10).unwrap();
            let p = weft_core::policy::compile_str(
                Path::new("x.yaml"),
                &e.policy_yaml(),
                &Default::default(),
            );
            assert!(p.is_ok(), "{n}: {:?}", p.err().map(|e| e.to_string()));
        }
        assert!(check_prefix("wt").is_ok());
        assert!(check_prefix("a/b").is_err());
    }
}

/// A packet blaster for the forwarding benchmark: UDP frames of `size` bytes (Ethernet
/// header included, no FCS) from `src` to `dst` (MAC `dst_mac`), source ports cycling over
/// `flows` values and destination ports over 11211, 8020, 7077, 9 (Loom Fig. 1's
/// applications), sent with `send(2)` on an AF_PACKET socket for `seconds`. Returns the
/// frames sent.
pub fn blast(
    iface: &str,
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    size: usize,
    flows: u16,
    seconds: f64,
) -> std::io::Result<u64> {
    use crate::afpacket::{PacketSocket, RingConfig, RingVersion};
    let sock = PacketSocket::open(
        iface,
        RingConfig {
            version: RingVersion::V2,
            block_bytes: 4096,
            blocks: 1,
            retire_ms: 1,
            // One send(2) per frame, as an application sends.
            tx_ring: false,
        },
    )?;
    let payload = size.saturating_sub(14 + 20 + 8).max(1);
    let dports = [11211u16, 8020, 7077, 9];
    let mut frames = Vec::new();
    for f in 0..flows.max(1) {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x10], dst_mac)
            .ipv4(src, dst, 64)
            .udp(10_000 + f, dports[f as usize % dports.len()]);
        let mut v = Vec::with_capacity(size);
        b.write(&mut v, &vec![0u8; payload])
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        frames.push(v);
    }
    let t = Instant::now();
    let mut sent = 0u64;
    let mut i = 0usize;
    while t.elapsed().as_secs_f64() < seconds {
        for _ in 0..256 {
            if let Ok(true) = sock.send(&frames[i]) {
                sent += 1;
            }
            i = (i + 1) % frames.len();
        }
    }
    Ok(sent)
}

fn rx_packets(ns: &str, dev: &str) -> u64 {
    let o = nsx(
        ns,
        &[
            "cat",
            &format!("/sys/class/net/{dev}/statistics/rx_packets"),
        ],
    );
    o.ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// One benchmark configuration.
#[derive(Debug, Clone)]
pub enum BenchConfig {
    /// weft with this policy file.
    Weft {
        label: String,
        policy: std::path::PathBuf,
        /// `weft run --backend`.
        backend: String,
    },
    /// Linux HTB with this many leaf classes (u32 filters on the UDP source port).
    Htb { classes: u32 },
}

/// The benchmark's uplink rate (`weft run --rate 100gbit`: unpaced on these links).
pub const BENCH_RATE_BPS: u64 = 100_000_000_000;

const BENCH_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];

/// The forwarding benchmark: two tenants blast UDP frames of each size through the
/// software-NIC namespace (uplink rate 100 Gbit/s, so nothing is paced); forwarded packets
/// per second are counted at the receiver's interface. Each configuration gets a fresh
/// testbed. The frames are addressed to a MAC nobody owns, so the receiver drops them on
/// arrival and its stack costs next to nothing.
pub fn bench(
    prefix: &str,
    weft: &Path,
    configs: &[BenchConfig],
    sizes: &[usize],
    seconds: f64,
) -> R<Value> {
    install_tools();
    if let Some(why) = missing_prerequisite() {
        return Err(TestbedError(format!("cannot run the benchmark: {why}")));
    }
    let mut rows = Vec::new();
    for cfg in configs {
        for &size in sizes {
            let tb = Testbed::up(prefix, 2)?;
            let rx = tb.rx();
            // A destination MAC nobody owns: the receiver's kernel drops the frames as
            // "other host" right after counting them; the bridge sends that MAC to the
            // uplink only (a static entry, no flooding).
            let dst_mac = BENCH_DST_MAC;
            let sock = std::env::temp_dir().join(format!("weft-bench-{prefix}.sock"));
            let (label, mut daemon) = match cfg {
                BenchConfig::Weft {
                    label,
                    policy,
                    backend,
                } => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", &tb.nic(), "nice", "-n", "-15"])
                        .arg(weft)
                        .args(["run", "--policy"])
                        .arg(policy)
                        .args([
                            "--uplink",
                            "up",
                            "--rate",
                            &format!("{BENCH_RATE_BPS}bit"),
                            "--ctl",
                        ])
                        .arg(&sock)
                        .args(["--tenant", "a=t1", "--tenant", "b=t2"])
                        .args(["--backend", backend])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    let d = Child::spawn(&mut c)?;
                    let t = Instant::now();
                    while crate::ctl::request(&sock, &Request::Stats).is_err() {
                        if t.elapsed() > Duration::from_secs(10) {
                            return Err(TestbedError("weft run did not start".into()));
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    (format!("weft {label}"), Some(d))
                }
                BenchConfig::Htb { classes } => {
                    tb.htb_classes(*classes)?;
                    (
                        format!(
                            "htb {classes} class{}",
                            if *classes == 1 { "" } else { "es" }
                        ),
                        None,
                    )
                }
            };
            let before = rx_packets(&rx, "eth0");
            let t0 = Instant::now();
            let mut blasters = Vec::new();
            for i in 1..=2usize {
                blasters.push(Child::spawn(
                    Command::new("ip")
                        .args(["netns", "exec", &tb.tenant(i)])
                        .arg(weft)
                        .args([
                            "testbed",
                            "blast",
                            "--iface",
                            "eth0",
                            "--size",
                            &size.to_string(),
                        ])
                        .args(["--seconds", &seconds.to_string(), "--flows", "1000"])
                        .args(["--src", &format!("10.77.0.{i}"), "--dst", RX])
                        .args(["--dst-mac", &dst_mac.map(|b| format!("{b:02x}")).join(":")])
                        .stdout(Stdio::piped()),
                )?);
            }
            let mut sent = 0u64;
            for b in blasters.iter_mut() {
                let mut o = String::new();
                if let Some(mut so) = b.0.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut so, &mut o);
                }
                let _ = b.0.wait();
                sent += o.trim().parse::<u64>().unwrap_or(0);
            }
            // Let queued frames drain (weft's backlog, HTB's queues).
            std::thread::sleep(Duration::from_millis(300));
            let dt = t0.elapsed().as_secs_f64() - 0.3;
            let fwd = rx_packets(&rx, "eth0").saturating_sub(before);
            let stats = match daemon.as_mut() {
                Some(d) => {
                    let s = ask_json(&sock, &Request::Stats);
                    d.stop(Duration::from_secs(3));
                    s
                }
                None => Value::Null,
            };
            drop(tb);
            let row = json!({
                "config": label,
                "frame_bytes": size,
                "offered_pps": (sent as f64 / dt).round(),
                "forwarded_pps": (fwd as f64 / dt).round(),
                "weft_drops": stats["iface"]["dropped"],
                "weft_ring_full": stats["dataplane"]["ring_full"],
                "weft_no_buffer": stats["dataplane"]["no_buffer"],
                "weft_ports": stats["ports"],
            });
            eprintln!("{row}");
            rows.push(row);
        }
    }
    Ok(json!({"seconds": seconds, "rows": rows}))
}

impl Testbed {
    /// Bridges the tenant links and the uplink (`up`) in the NIC namespace (`br0`), the
    /// wiring under Linux HTB (the kernel forwards; weft is not running).
    fn bridge(&self) -> R<()> {
        let nic = self.nic();
        sh(&[
            "ip", "-n", &nic, "link", "add", "name", "br0", "type", "bridge",
        ])?;
        for i in 1..=self.tenants {
            let dev = format!("t{i}");
            sh(&[
                "ip", "-n", &nic, "link", "set", "dev", &dev, "master", "br0",
            ])?;
        }
        sh(&[
            "ip", "-n", &nic, "link", "set", "dev", "up", "master", "br0",
        ])?;
        sh(&["ip", "-n", &nic, "link", "set", "dev", "br0", "up"])?;
        Ok(())
    }

    /// Bridge plus HTB with `classes` leaf classes sharing the link, selected by u32
    /// filters on the UDP source port (10000 + i), one filter per class, linear.
    pub fn htb_classes(&self, classes: u32) -> R<()> {
        let nic = self.nic();
        self.bridge()?;
        let mac = BENCH_DST_MAC.map(|b| format!("{b:02x}")).join(":");
        nsx(
            &nic,
            &[
                "bridge", "fdb", "add", &mac, "dev", "up", "master", "static",
            ],
        )?;
        let mut batch = String::new();
        batch += "qdisc add dev up root handle 1: htb default 1\n";
        batch += "class add dev up parent 1: classid 1:ffff htb rate 100gbit ceil 100gbit\n";
        for c in 1..=classes {
            batch += &format!(
                "class add dev up parent 1:ffff classid 1:{c:x} htb rate {}kbit ceil 100gbit\n",
                (100_000_000 / classes as u64).max(8)
            );
            if classes > 1 {
                batch += &format!(
                    "filter add dev up parent 1: protocol ip prio 1 u32 match ip sport {} 0xffff flowid 1:{c:x}\n",
                    10_000 + c - 1
                );
            }
        }
        let f = std::env::temp_dir().join(format!("weft-htb-{}.tc", self.prefix));
        std::fs::write(&f, batch).map_err(|e| TestbedError(e.to_string()))?;
        let r = nsx(&nic, &["tc", "-batch", &f.display().to_string()]);
        let _ = std::fs::remove_file(&f);
        r.map(|_| ())
    }
}
