//! The control plane holds against what a control client or a metrics scraper can do to it
//! (no root needed): a reload reads only regular files, refuses a device or a FIFO by name
//! at once and a file past the size limit, and never quotes the file it names in its
//! error; idle metrics connections do not hold up a control request (`stop` included); 200
//! scrapes at once are all answered; the control socket is not world-writable; clients
//! reloading back to back are never refused for reloads still reading.
//!
//! Reloads go through the real dataplane loop (in-memory ports); the connection tests drive
//! [`ctl::Server`] with a loop of their own. Bounds are seconds, not margins: every wait is
//! for an answer that comes at once when the code is right.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::TempDir;
use serde_json::Value;
use weft_core::policy::LoadOptions;
use weft_nic::afpacket::RingVersion;
use weft_nic::ctl::{self, Reply, Request};
use weft_nic::dataplane::{self, Port};
use weft_nic::stats::{NodeStats, Stats};

/// A port that never receives and takes every frame.
struct Idle;

impl Port for Idle {
    fn recv_batch(&mut self, _: u32, _: &mut dyn FnMut(&[u8], u64)) -> usize {
        0
    }
    fn send(&self, _: &[u8]) -> std::io::Result<bool> {
        Ok(true)
    }
}

const POLICY: &str = "weft: 1\nname: two\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, weight: 1, match: {tenant: 1}}\n  - {name: b, type: leaf, parent: root, weight: 2, match: {tenant: 2}}\n";

/// The dataplane loop over idle ports, with its control socket (and metrics endpoint) in a
/// directory of its own; stopped, joined and cleaned up on drop.
struct Daemon {
    sock: PathBuf,
    metrics: Option<std::net::SocketAddr>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Stats>>,
    dir: TempDir,
}

impl Daemon {
    fn start(tag: &str, metrics: bool) -> Daemon {
        Daemon::start_with(TempDir::new(tag), metrics, POLICY, LoadOptions::default())
    }

    /// In `dir`, running `policy` (written to `policy.yaml`) loaded with `load`.
    fn start_with(dir: TempDir, metrics: bool, policy: &str, load: LoadOptions) -> Daemon {
        let sock = dir.0.join("ctl.sock");
        let file = dir.0.join("policy.yaml");
        std::fs::write(&file, policy).unwrap();
        let cfg = dataplane::Config {
            policy: file,
            load,
            uplink: "mem".into(),
            rate_bps: 10_000_000_000,
            tenants: vec![("a".into(), "m1".into()), ("b".into(), "m2".into())],
            ctl: Some(sock.clone()),
            metrics: metrics.then(|| "127.0.0.1:0".to_string()),
            buffers: 1024,
            max_queues: 64,
            ring: 64,
            outstanding: 64,
            idle_sleep_us: 0,
            cpu: None,
            slice_us: None,
            rogue: None,
            ring_version: RingVersion::V3,
            backend: dataplane::Backend::AfPacket,
            cpu_weight: None,
            isolation: Default::default(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let ports: Vec<Box<dyn Port>> = vec![Box::new(Idle), Box::new(Idle)];
                dataplane::run_ports(cfg, ports, Box::new(Idle), &stop, |m| {
                    let _ = tx.send(m);
                })
                .expect("dataplane runs")
            })
        };
        let metrics = rx.recv_timeout(Duration::from_secs(30)).expect("ready");
        Daemon {
            sock,
            metrics,
            stop,
            handle: Some(handle),
            dir,
        }
    }

    /// `request` on a thread, so that a test still ends (and says so) if no answer comes:
    /// the answer and how long it took.
    fn ask(&self, req: Request) -> (Result<Value, String>, Duration) {
        ask(&self.sock, req)
    }

    fn reload(&self, path: &Path) -> (Result<Value, String>, Duration) {
        self.ask(Request::Reload {
            policy: path.to_path_buf(),
        })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One control request and how long its answer took (`ctl::request` gives up after 10 s).
fn ask(sock: &Path, req: Request) -> (Result<Value, String>, Duration) {
    let start = Instant::now();
    // As the wire has it: the tests check the keys clients read.
    let a = ctl::request(sock, &req)
        .map(|r| r.to_json())
        .map_err(|e| e.to_string());
    (a, start.elapsed())
}

/// The process's resident memory, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Set in the process [`reloading_dev_zero_is_refused_at_once_and_reads_nothing`] starts.
const CHILD: &str = "WEFT_CTL_HARDENING_CHILD";

/// `weft ctl reload /dev/zero` grew the daemon by gigabytes until the kernel killed it: it
/// read the device to its (absent) end. The reload is refused at once, naming what the file
/// is, and the daemon's memory does not grow. Run in a process of its own whose address
/// space is capped at 1 GiB, so that the old behaviour fails this test instead of taking
/// the machine's memory.
#[test]
fn reloading_dev_zero_is_refused_at_once_and_reads_nothing() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = TempDir::new("devzero");
    let log = dir.0.join("out.txt");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 || exit 99; exec \"$0\" \"$@\"")
        .arg(std::env::current_exe().unwrap())
        .args([
            "dev_zero_in_a_capped_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        // Fewer malloc arenas (each reserves 64 MiB of address space) under the cap.
        .env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("sh runs");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        Some(s) if s.code() == Some(99) => {
            eprintln!("skipped: `ulimit -v` is not available here");
        }
        Some(s) => assert!(
            s.success() && text.contains("1 passed"),
            "the capped process failed ({s}):\n{text}"
        ),
        None => panic!("the capped process did not end in 120 s:\n{text}"),
    }
}

/// The body of [`reloading_dev_zero_is_refused_at_once_and_reads_nothing`], in its capped
/// process (a no-op run any other way).
#[test]
#[ignore = "run by reloading_dev_zero_is_refused_at_once_and_reads_nothing in a capped process"]
fn dev_zero_in_a_capped_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let d = Daemon::start("zero", false);
    // Settled: the control threads exist, their first allocations made.
    let (a, _) = d.ask(Request::Stats);
    a.unwrap();
    let before = rss_kib();
    let (a, took) = d.reload(Path::new("/dev/zero"));
    let grew = rss_kib().saturating_sub(before);
    let a = a.expect("an answer");
    assert_eq!(a["ok"], false, "{a}");
    let e = a["error"].as_str().unwrap();
    assert!(
        e.contains("/dev/zero") && e.contains("is a character device"),
        "{e}"
    );
    assert!(e.contains("unreadable-file"), "names the rule: {e}");
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    assert!(grew < 32 * 1024, "the daemon grew by {grew} KiB");
    // And it still serves.
    let (a, _) = d.ask(Request::Stats);
    assert_eq!(a.unwrap()["policy"], "two");
}

/// `weft run --max-policy-bytes`'s default, 4 MiB (`ctl::DEFAULT_MAX_POLICY_BYTES`).
const DEFAULT_LIMIT: u64 = 4 << 20;

/// A regular file longer than `--max-policy-bytes` (default 4 MiB) is refused before it is
/// read, the limit named; one holding the limit's worth is read and compiled.
#[test]
fn a_policy_file_past_the_size_limit_is_refused_naming_the_limit() {
    let d = Daemon::start("big", false);
    let big = d.dir.0.join("big.yaml");
    // Sparse: 5 MiB long, nothing on disk.
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(DEFAULT_LIMIT + (1 << 20)).unwrap();
    drop(f);
    let before = rss_kib();
    let (a, took) = d.reload(&big);
    let grew = rss_kib().saturating_sub(before);
    let a = a.expect("an answer");
    assert_eq!(a["ok"], false, "{a}");
    let e = a["error"].as_str().unwrap();
    assert!(e.contains(&big.display().to_string()), "{e}");
    assert!(
        e.contains("more than the limit of 4194304 bytes") && e.contains("--max-policy-bytes"),
        "{e}"
    );
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    assert!(grew < 32 * 1024, "grew by {grew} KiB");
    // A valid policy padded with a comment to just under the limit still reloads.
    let padded = d.dir.0.join("padded.yaml");
    let mut text = POLICY.to_string();
    let pad = DEFAULT_LIMIT as usize - text.len() - 1;
    text.push('#');
    text.push_str(&"x".repeat(pad));
    std::fs::write(&padded, &text).unwrap();
    let (a, _) = d.reload(&padded);
    let a = a.expect("an answer");
    assert_eq!(a["ok"], true, "{a}");
}

/// `mkfifo PATH`, or why not.
fn mkfifo(p: &Path) -> Result<(), String> {
    match Command::new("mkfifo").arg(p).status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("mkfifo: {s}")),
        Err(e) => Err(format!("mkfifo: {e}")),
    }
}

/// Unblocks whoever is stuck opening the FIFO `p` for reading (a writer's open completes
/// theirs; closing it gives them end of file). Nobody is, when the code is right.
fn release_fifo(p: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p);
}

/// A reload naming a FIFO wedged the control socket: its open waited for a writer that
/// never came. It is answered at once, naming what the file is, and the next request is
/// served; so is a policy that attaches a FIFO as a sub-policy.
#[test]
fn a_fifo_is_refused_by_name_and_the_next_request_is_served() {
    let d = Daemon::start("fifo", false);
    let fifo = d.dir.0.join("policy.fifo");
    if let Err(e) = mkfifo(&fifo) {
        eprintln!("skipped: {e}");
        return;
    }
    let (a, took) = d.reload(&fifo);
    release_fifo(&fifo);
    let a = a.expect("an answer");
    assert_eq!(a["ok"], false, "{a}");
    let e = a["error"].as_str().unwrap();
    assert!(
        e.contains(&fifo.display().to_string()) && e.contains("is a FIFO"),
        "{e}"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    let (a, _) = d.ask(Request::Stats);
    assert_eq!(a.expect("stats answered")["policy"], "two");

    let attaching = d.dir.0.join("attaching.yaml");
    std::fs::write(
        &attaching,
        "weft: 1\nname: att\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, weight: 1, match: {tenant: 1}}\n  - {name: b, type: attach, parent: root, weight: 1, policy: policy.fifo, match: {tenant: 2}}\n",
    )
    .unwrap();
    let (a, took) = d.reload(&attaching);
    release_fifo(&fifo);
    let a = a.expect("an answer");
    assert_eq!(a["ok"], false, "{a}");
    let e = a["error"].as_str().unwrap();
    assert!(
        e.starts_with(&format!("{}:7:", attaching.display()))
            && e.contains("error[attach]")
            && e.contains("is a FIFO"),
        "{e}"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    let (a, _) = d.ask(Request::Stats);
    assert_eq!(a.expect("stats answered")["policy"], "two");
}

/// A reload's files were checked by the daemon's reader and then read again, by path, by
/// the compiler's own, which never saw the checks: an `attach` override (the daemon's
/// `LoadOptions::attach`, which the check did not follow) was read unchecked, whatever its
/// size. Every file is read once now, through the daemon's reader: an override past
/// `--max-policy-bytes` (4 MiB) is refused naming the limit, and within it, reloads.
#[test]
fn attach_overrides_are_read_through_the_daemons_reader() {
    let dir = TempDir::new("override");
    let sub = dir.0.join("sub.yaml");
    std::fs::write(&sub, "weft: 1\nnodes:\n  - {name: only, type: leaf}\n").unwrap();
    let policy = "weft: 1\nname: att\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, weight: 1, match: {tenant: 1}}\n  - {name: b, type: attach, parent: root, weight: 2, match: {tenant: 2}}\n";
    let load = LoadOptions {
        attach: vec![("b".into(), sub.clone())],
        ..LoadOptions::default()
    };
    let d = Daemon::start_with(dir, false, policy, load);
    let top = d.dir.0.join("policy.yaml");
    let (a, _) = d.reload(&top);
    assert_eq!(a.expect("an answer")["ok"], true);
    // The same override, padded with a comment past the limit (the compiler's own reader
    // takes 64 MiB).
    let mut text = std::fs::read_to_string(&sub).unwrap();
    text.push('#');
    text.push_str(&"x".repeat(DEFAULT_LIMIT as usize));
    text.push('\n');
    std::fs::write(&sub, &text).unwrap();
    let (a, took) = d.reload(&top);
    let a = a.expect("an answer");
    assert_eq!(a["ok"], false, "{a}");
    let e = a["error"].as_str().unwrap();
    assert!(
        e.starts_with(&format!("{}:7:", top.display()))
            && e.contains("error[attach]")
            && e.contains(&format!("it is {} bytes", text.len()))
            && e.contains("more than the limit of 4194304 bytes")
            && e.contains("--max-policy-bytes"),
        "{e}"
    );
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    let (a, _) = d.ask(Request::Stats);
    assert_eq!(
        a.unwrap()["generation"],
        2,
        "the running policy is untouched"
    );
}

/// A reload naming `/etc/shadow` quoted its lines back (`unknown key `root:$6$…``). The
/// error names the file, the place and the rule, and quotes nothing of the file: not for a
/// file that is not YAML (a key given twice, which the YAML reader quotes), not for YAML
/// that is not a policy, not for a policy whose node names or values are the secret, not
/// for a value whose own backticks break the compiler's quotes.
#[test]
fn a_reload_error_names_the_file_but_never_quotes_it() {
    let d = Daemon::start("secret", false);
    const SECRET: &str = "s3cr3t-Hunter2-ZQX";
    let cases = [
        (
            "not-yaml",
            format!("{SECRET}: 1\n{SECRET}: 2\n"),
            "yaml-syntax",
        ),
        (
            "shadow",
            format!("root:$6${SECRET}$abc:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"),
            "unknown-key",
        ),
        (
            "policy",
            format!(
                "weft: 1\nname: x\nlink: {{rate: {SECRET}}}\nnodes:\n  - {{name: {SECRET}, type: {SECRET}}}\n  - {{name: a, type: leaf, parent: {SECRET}x}}\n"
            ),
            "bad-value",
        ),
        ("scalar", format!("{SECRET}\n"), "bad-value"),
        // Backticks of the file's own break the compiler's quotes: `10.0`SECRET`.0.0/8`
        // left the secret between two quoted fragments.
        (
            "backticks",
            format!(
                "weft: 1\nnodes:\n  - {{name: root, type: wfq}}\n  - {{name: a, type: leaf, parent: root, match: {{dst: 10.0`{SECRET}`.0.0/8}}}}\n"
            ),
            "bad-value",
        ),
    ];
    for (name, text, rule) in cases {
        let file = d.dir.0.join(format!("{name}.txt"));
        std::fs::write(&file, &text).unwrap();
        let (a, _) = d.reload(&file);
        let a = a.expect("an answer");
        let whole = a.to_string();
        assert_eq!(a["ok"], false, "{name}: {whole}");
        let e = a["error"].as_str().unwrap();
        assert!(
            e.contains(&format!("{}:", file.display())),
            "{name}: the file is not named: {e}"
        );
        assert!(
            e.contains(&format!("[{rule}]")),
            "{name}: the rule is not named: {e}"
        );
        for (i, secret) in [SECRET, "Hunter2", "99999:7"].into_iter().enumerate() {
            assert!(
                !whole.contains(secret),
                "{name}: the answer quotes the file (#{i}): {whole}"
            );
        }
    }
    // Still running its policy.
    let (a, _) = d.ask(Request::Stats);
    assert_eq!(a.unwrap()["policy"], "two");
}

/// Clients reloading back to back, each reload after its last one's answer, are never
/// refused for reloads still reading: a reload gives its place back before it answers, so
/// two clients (as many as the reloads let in at once) never find a third place taken by
/// one of their finished reloads. Valid and refused policies alternate (a refused one is
/// answered without the loop, the quickest turn-around).
#[test]
fn back_to_back_reloads_are_never_refused_for_places() {
    let d = Daemon::start("b2b", false);
    let good = d.dir.0.join("good.yaml");
    let bad = d.dir.0.join("bad.yaml");
    std::fs::write(&good, POLICY).unwrap();
    std::fs::write(&bad, "weft: 1\nnodes: []\n").unwrap();
    let sock = d.sock.clone();
    let clients: Vec<_> = (0..2)
        .map(|c| {
            let (sock, good, bad) = (sock.clone(), good.clone(), bad.clone());
            std::thread::spawn(move || {
                for i in 0..300 {
                    let file = if i % 2 == 0 { &good } else { &bad };
                    let req = Request::Reload {
                        policy: file.clone(),
                    };
                    let a = ask(&sock, req)
                        .0
                        .map_err(|e| format!("client {c}, #{i}: {e}"))?;
                    let e = a["error"].as_str().unwrap_or_default();
                    if e.contains("still reading") || a["ok"] != (i % 2 == 0) {
                        return Err(format!("client {c}, reload #{i}: {a}"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap().unwrap();
    }
}

/// A stand-in for the dataplane: polls `server` every millisecond until told to stop,
/// answering `stats` with one node's counters and `stop` with ok (and stopping).
fn serve(server: ctl::Server, quit: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !quit.load(Ordering::Relaxed) {
            server.poll(|req| match req {
                Request::Stop => {
                    quit.store(true, Ordering::Relaxed);
                    Reply::Done
                }
                _ => Reply::Stats(Box::new(Stats {
                    ok: true,
                    nodes: vec![NodeStats {
                        name: "root".into(),
                        packets: 7,
                        bytes: 700,
                        ..NodeStats::default()
                    }],
                    ..Stats::default()
                })),
            });
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}

/// Twenty idle connections to the metrics port locked the control socket out, `stop`
/// included: both shared one limit of 16. Each has its own pool now: with 64 idle metrics
/// connections open, `stop` is answered within 2 s.
#[test]
fn stop_is_answered_with_64_idle_metrics_connections_open() {
    let dir = TempDir::new("idle");
    let sock = dir.0.join("ctl.sock");
    let prepare: ctl::Prepare = Arc::new(|req, _| Ok(req));
    let server = ctl::Server::bind(Some(&sock), Some("127.0.0.1:0"), prepare).unwrap();
    let addr = server.metrics_addr().unwrap();
    let quit = Arc::new(AtomicBool::new(false));
    let looping = serve(server, quit.clone());
    let idle: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Let the metrics thread take them all (not an assertion: only so the control request
    // comes after them).
    std::thread::sleep(Duration::from_millis(300));
    let (a, took) = ask(&sock, Request::Stop);
    drop(idle);
    let stopped = a.map(|a| a["ok"] == true);
    quit.store(true, Ordering::Relaxed);
    looping.join().unwrap();
    assert_eq!(stopped, Ok(true));
    assert!(took < Duration::from_secs(2), "answered after {took:?}");
    assert!(!sock.exists(), "the socket is left behind");
}

/// One scrape: connects, asks, reads the whole answer (20 s at most).
fn scrape(addr: std::net::SocketAddr) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(20))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("read: {e} after {text:?}"))?;
    Ok(text)
}

/// 159 of 200 parallel scrapes got no answer (closed past 16 connections). All 200 get a
/// whole answer now, from the running dataplane's stats.
#[test]
fn two_hundred_parallel_scrapes_are_all_answered() {
    let d = Daemon::start("scrapes", true);
    let addr = d.metrics.expect("a metrics address");
    let n = 200;
    let go = Arc::new(Barrier::new(n));
    let start = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let go = go.clone();
            std::thread::spawn(move || {
                go.wait();
                scrape(addr)
            })
        })
        .collect();
    let answers: Vec<Result<String, String>> =
        clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = start.elapsed();
    let mut failed = Vec::new();
    for (i, a) in answers.iter().enumerate() {
        let whole = a.as_ref().is_ok_and(|t| {
            let (head, body) = t.split_once("\r\n\r\n").unwrap_or((t, ""));
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.parse::<usize>().ok());
            head.starts_with("HTTP/1.0 200 OK")
                && length == Some(body.len())
                && body.contains("weft_node_packets_total{node=\"root\"}")
        });
        if !whole {
            failed.push(format!("#{i}: {a:?}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {n} scrapes without a whole answer, e.g. {}",
        failed.len(),
        failed[0]
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// A control connection closed unanswered (every serving thread busy, the queue full)
/// was counted nowhere. The daemon counts it: `dataplane.ctl_dropped` in `ctl stats`, and
/// `weft_dataplane_ctl_dropped_total` on the metrics endpoint (`metrics_dropped` beside them).
#[test]
fn connections_closed_unanswered_are_counted_in_stats_and_metrics() {
    let d = Daemon::start("dropped", true);
    let silent: Vec<std::os::unix::net::UnixStream> = (0..ctl::MAX_CONNECTIONS + ctl::CTL_QUEUE)
        .map(|_| std::os::unix::net::UnixStream::connect(&d.sock).unwrap())
        .collect();
    // The accepting thread takes connections in order: this one finds every thread busy
    // and the queue full.
    let (refused, _) = d.ask(Request::Stats);
    assert!(refused.is_err(), "answered: {refused:?}");
    drop(silent);
    let start = Instant::now();
    let stats = loop {
        if let (Ok(v), _) = d.ask(Request::Stats) {
            break v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never served again"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let dp = &stats["dataplane"];
    let ctl_dropped = dp["ctl_dropped"]
        .as_u64()
        .expect("ctl_dropped in the stats");
    assert!(ctl_dropped >= 1, "{dp}");
    assert_eq!(dp["metrics_dropped"], 0, "{dp}");
    let text = scrape(d.metrics.unwrap()).unwrap();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse::<u64>().ok())
    };
    assert!(
        value("weft_dataplane_ctl_dropped_total").is_some_and(|n| n >= ctl_dropped),
        "{text}"
    );
    assert_eq!(
        value("weft_dataplane_metrics_dropped_total"),
        Some(0),
        "{text}"
    );
}

/// The control socket was created with the process's umask (world-connectable under 0000,
/// and anyone who can connect can reload and stop): it is 0660 now.
#[test]
fn the_control_socket_is_not_world_writable() {
    let dir = TempDir::new("mode");
    let sock = dir.0.join("ctl.sock");
    let prepare: ctl::Prepare = Arc::new(|req, _| Ok(req));
    let server = ctl::Server::bind(Some(&sock), None, prepare).unwrap();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o660, "mode {mode:o}");
    // Nothing else made beside it.
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["ctl.sock"]);
    drop(server);
    assert!(!sock.exists());
}

/// A reload reads only files its client may read itself (`SO_PEERCRED`): a member of the
/// socket's group (here: anyone, the socket opened to all for the test) cannot have the root
/// daemon compile a root-only file, and can reload one it may read.
#[test]
fn a_reload_reads_only_files_its_client_may_read() {
    if !weft_sys::process::is_root() {
        println!("skipped: needs root (the daemon) and setpriv (an unprivileged client)");
        return;
    }
    let setpriv = Command::new("setpriv").arg("--version").output();
    let python = Command::new("python3")
        .arg("-c")
        .arg("import socket")
        .status();
    if !setpriv.is_ok_and(|o| o.status.success()) || !python.is_ok_and(|s| s.success()) {
        println!("skipped: setpriv or python3 not found");
        return;
    }
    let d = Daemon::start("peer", false);
    std::fs::set_permissions(&d.dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let secret = d.dir.0.join("secret.yaml");
    let public = d.dir.0.join("public.yaml");
    for (p, mode) in [(&secret, 0o600), (&public, 0o644)] {
        std::fs::write(p, POLICY).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    const CLIENT: &str = "import socket,sys,json\n\
        s=socket.socket(socket.AF_UNIX)\n\
        s.connect(sys.argv[1])\n\
        s.sendall((json.dumps({'cmd':'reload','policy':sys.argv[2]})+'\\n').encode())\n\
        print(s.makefile().readline())\n";
    let as_nobody = |file: &Path| -> Value {
        let out = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(["/usr/bin/python3", "-c", CLIENT])
            .arg(&d.sock)
            .arg(file)
            .output()
            .expect("client runs");
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "no answer ({e}): {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    let a = as_nobody(&secret);
    assert_eq!(a["ok"], false, "{a}");
    assert!(
        a["error"].as_str().unwrap().contains("may not read it"),
        "{a}"
    );
    let a = as_nobody(&public);
    assert_eq!(a["ok"], true, "{a}");
}
