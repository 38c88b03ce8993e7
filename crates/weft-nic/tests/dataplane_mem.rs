//! The dataplane loop over in-memory ports (no root, no sockets besides the control socket):
//! bad frames are counted and dropped, never a crash; counters balance (every frame received
//! is posted or dropped with a reason; every posted descriptor is sent or dropped with a
//! reason); the reverse path reaches the tenant that owns the destination MAC; a reload over
//! the control socket refuses an invalid policy and swaps a valid one without losing
//! packets; a rogue tenant's posts to foreign queues are refused and counted against it only;
//! packets the engine drops (a full leaf) complete their descriptors as dropped; a flow
//! re-marked mid-flow (DSCP) moves to its new class through a metadata update; the engine's
//! flows are closed once no queue uses them (a flow shared by connections outlives one
//! connection's reclaim; a moved flow's old record is closed once its packets have left);
//! counters are carried across reloads only for the running policy's names.
//! No timing assertions: the tests wait (bounded) for the frames to come out.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_core::policy::LoadOptions;
use weft_nic::afpacket::RingVersion;
use weft_nic::ctl::{self, Reloaded, Reply, Request};
use weft_nic::dataplane::{self, Port};
use weft_nic::iface::Reject;
use weft_nic::parse;
use weft_nic::stats::{Stats, TenantStats, TENANT_DROPS};

/// Every send of every port, numbered in the order they happened (across ports).
static SENDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Clone, Default)]
struct MemPort {
    rx: Arc<Mutex<VecDeque<Vec<u8>>>>,
    tx: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The global number ([`SENDS`]) of each frame in `tx`.
    tx_order: Arc<Mutex<Vec<u64>>>,
    /// The link is down (as `operstate` would say).
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl Port for MemPort {
    fn recv_batch(&mut self, max: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        let batch: Vec<Vec<u8>> = {
            let mut q = self.rx.lock().unwrap();
            let n = q.len().min(max as usize);
            q.drain(..n).collect()
        };
        for fr in &batch {
            f(fr, 0);
        }
        batch.len()
    }
    fn send(&self, frame: &[u8]) -> std::io::Result<bool> {
        let mut tx = self.tx.lock().unwrap();
        tx.push(frame.to_vec());
        let n = SENDS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.tx_order.lock().unwrap().push(n);
        Ok(true)
    }
    fn link_up(&self) -> Option<bool> {
        Some(!self.down.load(std::sync::atomic::Ordering::Relaxed))
    }
}

fn tcp(src_mac: u8, sport: u16, payload: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, src_mac], [2, 0, 0, 0, 0, 0x64])
        .ipv4([10, 77, 0, src_mac], [10, 77, 0, 100], 64)
        .tcp(sport, 5201, 1, 1000);
    let mut v = Vec::new();
    b.write(&mut v, &vec![0u8; payload]).unwrap();
    v
}

fn policy(dir: &std::path::Path, name: &str, w2: u64) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "weft: 1\nname: {name}\nlink: {{rate: 10gbit}}\nnodes:\n  - {{name: root, type: wfq}}\n  - {{name: a, type: leaf, parent: root, weight: 1, match: {{tenant: 1}}}}\n  - {{name: b, type: leaf, parent: root, weight: {w2}, match: {{tenant: 2}}}}\n"
        ),
    )
    .unwrap();
    p
}

struct Running {
    tenants: Vec<MemPort>,
    uplink: MemPort,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Stats>>,
    sock: PathBuf,
    dir: PathBuf,
}

impl Running {
    fn start(tag: &str, rogue: Option<usize>) -> Running {
        Running::start_with(tag, rogue, None, None)
    }

    /// With `policy_text`, that policy instead of [`policy`]'s.
    fn start_with(
        tag: &str,
        rogue: Option<usize>,
        metrics: Option<String>,
        policy_text: Option<&str>,
    ) -> Running {
        Running::start_tuned(tag, rogue, metrics, policy_text, |_| {})
    }

    /// [`Self::start_with`], its configuration changed by `tune` first.
    fn start_tuned(
        tag: &str,
        rogue: Option<usize>,
        metrics: Option<String>,
        policy_text: Option<&str>,
        tune: impl FnOnce(&mut dataplane::Config),
    ) -> Running {
        Running::start_full(tag, rogue, metrics, policy_text, tune, None)
    }

    /// [`Self::start`], the loop's log written to `log`.
    fn start_logged(tag: &str, log: &Log) -> Running {
        Running::start_full(tag, None, None, None, |_| {}, Some(log.clone()))
    }

    fn start_full(
        tag: &str,
        rogue: Option<usize>,
        metrics: Option<String>,
        policy_text: Option<&str>,
        tune: impl FnOnce(&mut dataplane::Config),
        log: Option<Log>,
    ) -> Running {
        let dir = std::env::temp_dir().join(format!("weft-dp-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("ctl.sock");
        let policy = match policy_text {
            Some(text) => {
                let p = dir.join("given.yaml");
                std::fs::write(&p, text).unwrap();
                p
            }
            None => policy(&dir, "p1.yaml", 1),
        };
        let mut cfg = dataplane::Config {
            policy,
            load: LoadOptions::default(),
            uplink: "mem".into(),
            rate_bps: 10_000_000_000,
            tenants: vec![("a".into(), "m1".into()), ("b".into(), "m2".into())],
            ctl: Some(sock.clone()),
            metrics,
            buffers: 4096,
            max_queues: 256,
            ring: 256,
            outstanding: 128,
            idle_sleep_us: 0,
            cpu: None,
            slice_us: None,
            rogue,
            ring_version: RingVersion::V3,
            backend: dataplane::Backend::AfPacket,
            isolation: Default::default(),
            cpu_weight: None,
        };
        tune(&mut cfg);
        install_log();
        let tenants = vec![MemPort::default(), MemPort::default()];
        let uplink = MemPort::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (t, u, s) = (tenants.clone(), uplink.clone(), stop.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let ports: Vec<Box<dyn Port>> = t.into_iter().map(|p| Box::new(p) as _).collect();
            // The loop logs on its own thread, this one.
            LOG_TO.with(|l| *l.borrow_mut() = log);
            dataplane::run_ports(cfg, ports, Box::new(u), &s, |_| {
                let _ = tx.send(());
            })
            .expect("dataplane runs")
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("ready");
        Running {
            tenants,
            uplink,
            stop,
            handle: Some(handle),
            sock,
            dir,
        }
    }

    fn inject(&self, t: usize, frames: impl IntoIterator<Item = Vec<u8>>) {
        self.tenants[t].rx.lock().unwrap().extend(frames);
    }

    fn stats(&self) -> Stats {
        match ctl::request(&self.sock, &Request::Stats).unwrap() {
            Reply::Stats(s) => *s,
            other => panic!("not a stats answer: {other:?}"),
        }
    }

    /// The answer to reloading `policy`.
    fn reload(&self, policy: &std::path::Path) -> Reply {
        let req = Request::Reload {
            policy: policy.to_path_buf(),
        };
        ctl::request(&self.sock, &req).unwrap()
    }

    /// Waits (bounded) until every received frame is accounted for and nothing is held.
    fn settle(&self, expect_rx: u64) -> Stats {
        let t = Instant::now();
        loop {
            let s = self.stats();
            let rx: u64 = s.tenants.iter().map(|t| t.rx_frames).sum();
            let i = &s.iface;
            if rx == expect_rx && i.sent + i.dropped == i.posted {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "did not settle: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The stats once `done` holds of them, polled every `every` for at most 10 s, `tick`
    /// run before each poll (to keep a connection alive, say); the last stats if it never
    /// does (the caller's assertions then say what is missing).
    fn wait_until(
        &self,
        every: Duration,
        mut tick: impl FnMut(&Running),
        done: impl Fn(&Stats) -> bool,
    ) -> Stats {
        let t = Instant::now();
        loop {
            tick(self);
            let s = self.stats();
            if done(&s) || t.elapsed() > Duration::from_secs(10) {
                return s;
            }
            std::thread::sleep(every);
        }
    }

    fn finish(mut self) -> Stats {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the loop logged ([`Running::start_logged`]).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

thread_local! {
    /// Where this thread's log lines go, if anywhere ([`install_log`]).
    static LOG_TO: std::cell::RefCell<Option<Log>> = const { std::cell::RefCell::new(None) };
}

/// Writes a line to the calling thread's [`LOG_TO`].
struct ThreadLog;

impl std::io::Write for ThreadLog {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        LOG_TO.with(|l| {
            if let Some(log) = &*l.borrow() {
                log.0.lock().unwrap().extend_from_slice(b);
            }
        });
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One subscriber for the whole test process, each thread's lines to its [`LOG_TO`]: a
/// subscriber of one thread's own (`with_default`) missed events at times, while tests
/// on other threads, without one, reached the same places in the code first.
fn install_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let sub = tracing_subscriber::fmt()
            .with_writer(|| ThreadLog)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(sub).expect("the only subscriber");
    });
}

impl Log {
    /// The lines logged so far that contain every one of `words`.
    fn lines_with(&self, words: &[&str]) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| words.iter().all(|w| l.contains(w)))
            .map(str::to_string)
            .collect()
    }
}

fn balanced(s: &Stats) {
    if let Err(e) = s.check_balance() {
        panic!("{e}: {s:?}");
    }
}

/// Tenant `t`'s frames dropped for `reason` (one of [`TENANT_DROPS`]).
fn dropped(t: &TenantStats, reason: &str) -> u64 {
    let i = TENANT_DROPS.iter().position(|&n| n == reason);
    t.drops[i.unwrap_or_else(|| panic!("no drop reason `{reason}`"))]
}

/// Tenant `t`'s driver's requests the interface refused for `reason` (a [`Reject`]'s name).
fn rejected(t: &TenantStats, reason: &str) -> u64 {
    let i = Reject::ALL.iter().position(|r| r.name() == reason);
    t.rejects[i.unwrap_or_else(|| panic!("no reject reason `{reason}`"))]
}

/// `reply` as a reload carried out.
fn reloaded(reply: Reply) -> Reloaded {
    match reply {
        Reply::Reloaded(a) => a,
        other => panic!("not reloaded: {other:?}"),
    }
}

#[test]
fn bad_frames_are_counted_and_everything_balances() {
    let r = Running::start("bad", None);
    let mut frames = Vec::new();
    for i in 0..200u16 {
        frames.push(tcp(1, 1000 + i % 7, 100 + i as usize));
    }
    let good = tcp(1, 1, 200);
    let mut bad = vec![
        vec![],
        vec![0u8; 5],
        good[..20].to_vec(),
        good[..40].to_vec(),
    ];
    let mut x = 0x9e37_79b9u32;
    for _ in 0..300 {
        let len = (x % 120) as usize;
        bad.push(
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect(),
        );
    }
    bad.push(tcp(1, 9, 3000)); // longer than a buffer
    let expect_parse_errors = bad
        .iter()
        .filter(|f| f.len() <= dataplane::BUF_BYTES && parse::parse(f, 1).is_err())
        .count() as u64;
    let n = (frames.len() + bad.len()) as u64;
    r.inject(0, frames.clone());
    r.inject(0, bad);
    for i in 0..100u16 {
        r.inject(1, [tcp(2, 2000 + i % 3, 500)]);
    }
    let s = r.settle(n + 100);
    balanced(&s);
    assert_eq!(s.dataplane.parse_errors, expect_parse_errors, "{s:?}");
    assert_eq!(s.dataplane.oversize, 1);
    // Every well-formed frame came out on the uplink, byte for byte, per flow in order.
    let out = r.uplink.tx.lock().unwrap().clone();
    let from_a: Vec<&Vec<u8>> = out.iter().filter(|f| f[11] == 1).collect();
    let sent_ok = s.iface.sent;
    assert!(sent_ok >= 300, "{s:?}");
    for sport in 1000..1007u16 {
        let want: Vec<&Vec<u8>> = frames
            .iter()
            .filter(|f| u16::from_be_bytes([f[34], f[35]]) == sport)
            .collect();
        let got: Vec<&Vec<u8>> = from_a
            .iter()
            .copied()
            .filter(|f| f.len() > 35 && u16::from_be_bytes([f[34], f[35]]) == sport)
            .collect();
        assert_eq!(got, want, "flow {sport} not delivered in order");
    }
    // Reverse path: a frame for tenant 2's MAC reaches tenant 2 only; broadcast reaches both.
    let mut back = tcp(0x64, 5201, 10);
    back[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    r.uplink.rx.lock().unwrap().push_back(back.clone());
    r.uplink.rx.lock().unwrap().push_back(vec![0xff; 60]);
    let t = Instant::now();
    while r.tenants[0].tx.lock().unwrap().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        r.tenants[1].tx.lock().unwrap().as_slice(),
        [back, vec![0xff; 60]]
    );
    assert_eq!(r.tenants[0].tx.lock().unwrap().as_slice(), [vec![0xff; 60]]);
    let fin = r.finish();
    balanced(&fin);
}

#[test]
fn reload_refuses_invalid_and_swaps_valid_without_loss() {
    let r = Running::start("reload", None);
    r.inject(0, (0..300u16).map(|i| tcp(1, 3000 + i % 5, 800)));
    r.inject(1, (0..300u16).map(|i| tcp(2, 4000 + i % 5, 800)));
    let bad = r.dir.join("bad.yaml");
    std::fs::write(&bad, "weft: 1\nnodes:\n  - {name: root, type: wfq\n").unwrap();
    let a = r.reload(&bad);
    assert!(matches!(a, Reply::Refused(_)), "{a:?}");
    assert_eq!(r.stats().generation, 1);
    let good = policy(&r.dir, "p2.yaml", 3);
    let a = r.reload(&good);
    assert_eq!(reloaded(a).generation, 2);
    r.inject(0, (0..200u16).map(|i| tcp(1, 3000 + i % 5, 800)));
    r.inject(1, (0..200u16).map(|i| tcp(2, 4000 + i % 5, 800)));
    let s = r.settle(1000);
    balanced(&s);
    // Nothing admitted was lost in the swap (rings hold 256, so no burst here overflows).
    assert_eq!(s.iface.dropped, 0, "{s:?}");
    assert_eq!(s.dataplane.ring_full, 0, "{s:?}");
    assert_eq!(s.dataplane.tx_frames, 1000, "{s:?}");
    assert_eq!(s.policy, "p2.yaml");
    // The nodes both policies have count across the reload: every packet sent.
    let packets = |name: &str| s.nodes.iter().find(|n| n.name == name).map(|n| n.packets);
    assert_eq!(packets("root"), Some(1000), "{s:?}");
    assert_eq!(packets("a").unwrap() + packets("b").unwrap(), 1000, "{s:?}");
}

/// A reload answers with the warnings `weft run` gives at start, for the new policy and the
/// running tenants: a tenant no leaf takes (its frames dropped as unclassified), a tenant id
/// no `--tenant` has; none for a policy that takes every tenant.
#[test]
fn reload_answers_with_the_tenant_warnings_of_the_new_policy() {
    let r = Running::start("reload-warn", None);
    let only3 = r.dir.join("only3.yaml");
    std::fs::write(
        &only3,
        "weft: 1\nname: only3\nnodes:\n  - {name: root, type: wfq}\n  - {name: c, type: leaf, parent: root, match: {tenant: 3}}\n",
    )
    .unwrap();
    let a = r.reload(&only3);
    let w = reloaded(a).warnings;
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(
        w[0].contains("no leaf of only3 takes tenant 1 (a on m1)"),
        "{w:?}"
    );
    assert!(w[1].contains("tenant 2 (b on m2)"), "{w:?}");
    assert!(
        w[2].contains("matches tenant 3 but only 2 tenants are given"),
        "{w:?}"
    );
    let good = policy(&r.dir, "p2.yaml", 3);
    let a = r.reload(&good);
    assert_eq!(reloaded(a).warnings, Vec::<String>::new());
}

#[test]
fn rogue_driver_is_refused_and_counted_against_itself_only() {
    let r = Running::start("rogue", Some(0));
    r.inject(1, (0..200u16).map(|i| tcp(2, 5000 + i % 4, 300)));
    r.inject(0, (0..50u16).map(|i| tcp(1, 6000 + i % 4, 300)));
    let s = r.settle(250);
    // Let the rogue try for a while with the other tenant's queues alive.
    let t = Instant::now();
    let s = loop {
        let s2 = r.stats();
        if rejected(&s2.tenants[0], "foreign_queue") > 10 {
            break s2;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{s:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    balanced(&s);
    assert!(rejected(&s.tenants[0], "unknown_queue") > 0);
    assert!(s.tenants[1].rejects.iter().all(|&n| n == 0), "{s:?}");
    assert_eq!(s.dataplane.tx_frames, 250, "{s:?}");
    assert_eq!(s.iface.dropped, 0);
}

#[test]
fn prometheus_endpoint_serves_counters() {
    use std::io::{Read, Write};
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let r = Running::start_with("prom", None, Some(addr.clone()), None);
    r.inject(0, (0..10u16).map(|i| tcp(1, 7000 + i, 100)));
    r.settle(10);
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    c.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
    assert!(
        body.contains("weft_node_packets_total{node=\"a\"} 10"),
        "{body}"
    );
    assert!(body.contains("weft_node_drops_total{node=\"b\",reason=\"leaf_packets\"} 0"));
    assert!(body.contains("weft_iface_doorbell_writes_total "), "{body}");
}

/// The reverse path serves tenants round robin: one frame for tenant 1 queued behind a burst
/// of 200 for tenant 2 in the uplink ring is delivered after a handful of tenant 2's, not
/// after all of them (a tenant's ACK storm does not hold another tenant's replies).
#[test]
fn reverse_path_serves_tenants_round_robin() {
    let r = Running::start("rr", None);
    // Ingress first, so the NIC learns both tenants' MAC addresses.
    r.inject(0, [tcp(1, 100, 64)]);
    r.inject(1, [tcp(2, 200, 64)]);
    r.settle(2);
    let to = |mac: u8, i: u16| {
        let mut f = tcp(0x64, 5201, 20);
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, mac]);
        f[40..42].copy_from_slice(&i.to_be_bytes());
        f
    };
    {
        let mut q = r.uplink.rx.lock().unwrap();
        q.extend((0..200).map(|i| to(2, i)));
        q.push_back(to(1, 999));
    }
    let t = Instant::now();
    while r.tenants[1].tx.lock().unwrap().len() < 200 || r.tenants[0].tx.lock().unwrap().is_empty()
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "reverse frames not delivered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Per tenant in order, byte for byte.
    let got2 = r.tenants[1].tx.lock().unwrap().clone();
    assert_eq!(got2, (0..200).map(|i| to(2, i)).collect::<Vec<_>>());
    assert_eq!(r.tenants[0].tx.lock().unwrap().as_slice(), [to(1, 999)]);
    // Tenant 1's frame overtook most of tenant 2's: it was read with the last batch of the
    // ring (after at most 200 - RX_BATCH of tenant 2's were queued ahead of it) and then
    // waited for at most one of them.
    let t1 = r.tenants[0].tx_order.lock().unwrap()[0];
    let after = r.tenants[1]
        .tx_order
        .lock()
        .unwrap()
        .iter()
        .filter(|&&n| n > t1)
        .count();
    assert!(
        after >= 150,
        "only {after} of tenant 2's frames went after tenant 1's"
    );
    let s = r.stats();
    assert_eq!(s.dataplane.reverse_frames, 201, "{s:?}");
    assert_eq!(s.dataplane.reverse_dropped, 0, "{s:?}");
}

/// A leaf that holds at most 4 packets, on a slow uplink, offered 300 frames at once: the
/// engine drops most of each fetched batch (one `enqueue_classified_batch`), every dropped
/// descriptor completes as dropped, the counters balance, and what is sent keeps each flow's
/// order.
#[test]
fn engine_drops_complete_their_descriptors() {
    let text = "weft: 1\nname: tiny\nlink: {rate: 10mbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, match: {tenant: 1}, limit: {packets: 4}}\n  - {name: b, type: leaf, parent: root, match: {tenant: 2}}\n";
    let r = Running::start_with("enginedrops", None, None, Some(text));
    // Each frame of a flow is told apart by its length.
    let frames: Vec<Vec<u8>> = (0..300u16)
        .map(|i| tcp(1, 1000 + i % 3, 64 + i as usize / 3))
        .collect();
    r.inject(0, frames.clone());
    let s = r.settle(300);
    balanced(&s);
    let engine_drops = s.dataplane.engine_drops;
    let sent = s.iface.sent;
    assert!(engine_drops > 0, "the 4-packet leaf dropped nothing: {s:?}");
    assert_eq!(
        sent + engine_drops,
        s.iface.posted,
        "every posted frame is sent or dropped by the engine: {s:?}"
    );
    // What was sent is, per flow, a subsequence of what was offered, in order.
    let out = r.uplink.tx.lock().unwrap().clone();
    assert_eq!(out.len() as u64, sent, "{s:?}");
    for sport in 1000..1003u16 {
        let of_flow = |f: &&Vec<u8>| u16::from_be_bytes([f[34], f[35]]) == sport;
        let offered: Vec<&Vec<u8>> = frames.iter().filter(of_flow).collect();
        let positions: Vec<usize> = out
            .iter()
            .filter(of_flow)
            .map(|f| {
                offered
                    .iter()
                    .position(|o| *o == f)
                    .expect("a sent frame that was never offered")
            })
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "flow {sport} out of order: {positions:?}"
        );
    }
    balanced(&r.finish());
}

/// `tcp(..)` with the IPv4 DSCP set (header checksum recomputed).
fn tcp_dscp(src_mac: u8, sport: u16, payload: usize, dscp: u8) -> Vec<u8> {
    let mut v = tcp(src_mac, sport, payload);
    let (mut ip, _) = etherparse::Ipv4Header::from_slice(&v[14..]).unwrap();
    ip.dscp = etherparse::Ipv4Dscp::try_new(dscp).unwrap();
    ip.header_checksum = ip.calc_header_checksum();
    v[14..34].copy_from_slice(&ip.to_bytes());
    v
}

#[test]
fn a_remarked_flow_moves_to_its_new_class() {
    // DSCP 46 (EF) goes to `ef`, under a shaping class; anything else to `be`.
    let text = "weft: 1\nname: remark\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: prio}\n  - {name: cap, type: shape, parent: root, rate: 5gbit, burst: 64kb}\n  - {name: ef, type: leaf, parent: [cap], priority: 0, match: {dscp: 46}}\n  - {name: be, type: leaf, parent: root, priority: 1}\n";
    let r = Running::start_with("remark", None, None, Some(text));
    let leaf_packets = |s: &Stats, name: &str| -> u64 {
        s.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}: {s:?}"))
            .packets
    };
    // Packets of `be` and `ef`, and class moves so far.
    let counts = |s: &Stats| {
        let moves = s.dataplane.class_moves;
        (leaf_packets(s, "be"), leaf_packets(s, "ef"), moves)
    };
    // One flow (one five-tuple): 10 best-effort frames, 20 re-marked EF, 5 back to 0. A
    // second flow stays best effort throughout.
    r.inject(0, (0..10).map(|_| tcp_dscp(1, 1000, 100, 0)));
    r.inject(0, (0..4).map(|_| tcp_dscp(1, 2000, 100, 0)));
    let s = r.settle(14);
    assert_eq!(counts(&s), (14, 0, 0), "{s:?}");
    r.inject(0, (0..20).map(|_| tcp_dscp(1, 1000, 100, 46)));
    let s = r.settle(34);
    assert_eq!(counts(&s), (14, 20, 1), "{s:?}");
    // The moved flow's queue is bound to `ef`'s shaping class (counted from the binding).
    assert_eq!(s.shapers[0].name, "cap", "{s:?}");
    assert_eq!(s.shapers[0].packets, 20, "{s:?}");
    assert_eq!(s.shapers[0].bytes, 20 * 154, "{s:?}");
    assert_eq!(s.shapers[0].limit_bps, 5_000_000_000u64, "{s:?}");
    r.inject(0, (0..5).map(|_| tcp_dscp(1, 1000, 100, 0)));
    r.inject(0, (0..4).map(|_| tcp_dscp(1, 2000, 100, 0)));
    let s = r.settle(43);
    assert_eq!(counts(&s), (23, 20, 2), "{s:?}");
    assert_eq!(s.shapers[0].packets, 20, "back in `be`, unshaped: {s:?}");
    // The moves went through the tenant's doorbells as metadata updates, and the flow kept
    // its queue (no new queue per class).
    assert_eq!(s.iface.meta_updates, 2, "{s:?}");
    assert_eq!(s.dataplane.queues_live, 2, "{s:?}");
    // Each move left the flow's record at its old leaf idle, and the engine forgot it: two
    // flows open in the engine, not one per leaf each has been in.
    assert_eq!(s.dataplane.flows_closed, 2, "{s:?}");
    assert_eq!(s.dataplane.engine_flows, 2, "{s:?}");
    assert_eq!(r.uplink.tx.lock().unwrap().len(), 43, "{s:?}");
    balanced(&s);
    // Flipping on every frame, ending best effort (20 frames: one receive batch, so one
    // doorbell carries every move): the flow ends in `be`, so the next frames, unchanged,
    // go there too.
    r.inject(
        0,
        (0..20).map(|i| tcp_dscp(1, 1000, 100, if i % 2 == 0 { 46 } else { 0 })),
    );
    let s = r.settle(63);
    let ef = leaf_packets(&s, "ef");
    r.inject(0, (0..5).map(|_| tcp_dscp(1, 1000, 100, 0)));
    let s = r.settle(68);
    assert_eq!(leaf_packets(&s, "ef"), ef, "{s:?}");
    assert_eq!(leaf_packets(&s, "be") + ef, 68, "{s:?}");
    balanced(&r.finish());
}

/// Queues idle for a second are reclaimed, and the engine forgets their flows: the engine's
/// flow records follow the flows alive, not every five-tuple ever seen (a NIC's connections
/// come and go; kept, their records grew without bound).
#[test]
fn reclaimed_queues_close_their_flows_in_the_engine() {
    let text = "weft: 1\nname: churn\nlink: {rate: 10gbit}\nnodes:\n  - {name: only, type: leaf, flows: {by: five-tuple}}\n";
    let r = Running::start_with("churn", None, None, Some(text));
    // Twelve connections (source ports), three frames each.
    r.inject(0, (0..36).map(|i| tcp(1, 3000 + (i % 12) as u16, 100)));
    let s = r.settle(36);
    assert_eq!(s.dataplane.engine_flows, 12, "{s:?}");
    // After a second of silence every queue is reclaimed (bounded wait).
    let s = r.wait_until(
        Duration::from_millis(100),
        |_| {},
        |s| s.dataplane.queues_reclaimed == 12,
    );
    assert_eq!(s.dataplane.queues_reclaimed, 12, "{s:?}");
    assert_eq!(s.dataplane.flows_closed, 12, "{s:?}");
    assert_eq!(s.dataplane.engine_flows, 0, "{s:?}");
    assert_eq!(s.dataplane.queues_live, 0, "{s:?}");
    // A connection seen again is a new flow, with a new queue.
    r.inject(0, (0..3).map(|_| tcp(1, 3000, 100)));
    let s = r.settle(39);
    assert_eq!(s.dataplane.engine_flows, 1, "{s:?}");
    balanced(&s);
}

/// A leaf that keeps one queue for all its flows (`by: none`) gives every connection the
/// same flow in the engine: reclaiming one idle connection's queue must not close the flow
/// another connection still posts to (that queue would then be refused, and the loop
/// would panic on it).
#[test]
fn a_flow_shared_by_connections_outlives_one_connections_reclaim() {
    let text = "weft: 1\nname: shared\nlink: {rate: 10gbit}\nnodes:\n  - {name: only, type: leaf, flows: {by: none}}\n";
    let r = Running::start_with("shared", None, None, Some(text));
    // Connection A once; connection B every 50 ms until A's queue is reclaimed, then more.
    r.inject(0, (0..3).map(|_| tcp(1, 3000, 100)));
    let mut rx = 3;
    r.settle(rx);
    let s = r.wait_until(
        Duration::from_millis(50),
        |r| {
            r.inject(0, [tcp(1, 4000, 100)]);
            rx += 1;
            r.settle(rx);
        },
        |s| s.dataplane.queues_reclaimed == 1,
    );
    assert_eq!(s.dataplane.queues_reclaimed, 1, "{s:?}");
    assert_eq!(s.dataplane.engine_flows, 1, "{s:?}");
    r.inject(0, (0..5).map(|_| tcp(1, 4000, 100)));
    rx += 5;
    let s = r.settle(rx);
    balanced(&s);
    // Once B is reclaimed too, the flow closes.
    let s = r.wait_until(
        Duration::from_millis(100),
        |_| {},
        |s| s.dataplane.queues_reclaimed == 2,
    );
    assert_eq!(s.dataplane.queues_reclaimed, 2, "{s:?}");
    assert_eq!(s.dataplane.engine_flows, 0, "{s:?}");
    assert_eq!(s.dataplane.flows_closed, 1, "{s:?}");
}

/// A flow moved to another class while its packets still wait at its old leaf (here behind
/// a 100 kbit/s shaping class) cannot be closed there at once; it is closed once they have
/// left, while the connection lives on in its new class.
#[test]
fn a_moved_flows_old_record_is_closed_once_its_packets_have_left() {
    let text = "weft: 1\nname: slowmove\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: prio}\n  - {name: cap, type: shape, parent: root, rate: 100kbit, burst: 2kb}\n  - {name: slow, type: leaf, parent: [cap], priority: 0, match: {dscp: 46}}\n  - {name: be, type: leaf, parent: root, priority: 1}\n";
    let r = Running::start_with("slowmove", None, None, Some(text));
    // 20 frames of 154 B at 100 kbit/s: about 200 ms at `slow` once the burst is spent;
    // once the engine holds them, the flow moves to `be`.
    r.inject(0, (0..20).map(|_| tcp_dscp(1, 1000, 100, 46)));
    let s = r.wait_until(
        Duration::from_millis(2),
        |_| {},
        |s| s.dataplane.backlog >= 5,
    );
    assert!(s.dataplane.backlog >= 5, "never held: {s:?}");
    r.inject(0, [tcp_dscp(1, 1000, 100, 0)]);
    let mut rx = 21;
    let s = r.settle(rx);
    assert_eq!(s.dataplane.class_moves, 1, "{s:?}");
    // The connection keeps sending (its queue is not reclaimed) until the old record is
    // closed (bounded wait: the retry runs every second).
    let s = r.wait_until(
        Duration::from_millis(100),
        |r| {
            r.inject(0, [tcp_dscp(1, 1000, 100, 0)]);
            rx += 1;
            r.settle(rx);
        },
        |s| s.dataplane.flows_closed == 1,
    );
    assert_eq!(s.dataplane.flows_closed, 1, "{s:?}");
    assert_eq!(s.dataplane.engine_flows, 1, "{s:?}");
    assert_eq!(s.dataplane.queues_reclaimed, 0, "{s:?}");
    balanced(&r.finish());
}

/// A frame from `src` (any address) with source port `sport`.
fn tcp_from(src: [u8; 6], sport: u16) -> Vec<u8> {
    let mut f = tcp(9, sport, 64);
    f[6..12].copy_from_slice(&src);
    f
}

/// A return-path frame to `dst`, numbered `i` (in its TCP destination port).
fn reply_to(dst: [u8; 6], i: u16) -> Vec<u8> {
    let mut f = tcp(0x64, 5201, 20);
    f[..6].copy_from_slice(&dst);
    f[36..38].copy_from_slice(&i.to_be_bytes());
    f
}

/// Waits (bounded) until tenant `t` has been sent `n` frames; returns them.
fn delivered(r: &Running, t: usize, n: usize) -> Vec<Vec<u8>> {
    let start = Instant::now();
    loop {
        let got = r.tenants[t].tx.lock().unwrap().clone();
        if got.len() >= n || start.elapsed() > Duration::from_secs(10) {
            return got;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One frame from tenant 2 carrying tenant 1's source address does not take tenant 1's
/// return traffic: it is dropped and counted against tenant 2 (`spoofed_source`), and every
/// reply to tenant 1's address still reaches tenant 1 only. (Before, the address moved to
/// the last port that used it: tenant 2 received tenant 1's traffic.)
#[test]
fn a_spoofed_source_address_is_dropped_and_the_victim_keeps_its_traffic() {
    let r = Running::start("spoof", None);
    let a = [2, 0, 0, 0, 0, 1];
    r.inject(0, [tcp_from(a, 100)]);
    r.settle(1);
    r.inject(1, [tcp_from(a, 200), tcp_from([2, 0, 0, 0, 0, 2], 201)]);
    let s = r.settle(3);
    assert_eq!(dropped(&s.tenants[1], "spoofed_source"), 1, "{s:?}");
    assert_eq!(dropped(&s.tenants[0], "spoofed_source"), 0, "{s:?}");
    assert_eq!(s.dataplane.source_rejected, 1, "{s:?}");
    balanced(&s);
    r.uplink
        .rx
        .lock()
        .unwrap()
        .extend((0..50).map(|i| reply_to(a, i)));
    let got = delivered(&r, 0, 50);
    assert_eq!(got, (0..50).map(|i| reply_to(a, i)).collect::<Vec<_>>());
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        r.tenants[1].tx.lock().unwrap().is_empty(),
        "tenant 2 received tenant 1's replies"
    );
}

/// A port spoofing another tenant's address was logged in the per-tenant line of refused
/// sources, at most once a second whatever the reason, so the spoof could go unsaid behind
/// another refusal, or be said again every second; and the once-a-second drop summary
/// repeated it. Now it has a line of its own, once per address and port, naming the address
/// and its owner, and the summary leaves it out (it still counts every such frame).
#[test]
fn a_spoofed_address_is_logged_once_per_address_and_port_by_itself() {
    let log = Log::default();
    let r = Running::start_logged("spoof-log", &log);
    let a = [2, 0, 0, 0, 0, 1];
    let group = [3, 0, 0, 0, 0, 9];
    r.inject(0, [tcp_from(a, 100)]);
    r.settle(1);
    // A refused group source first: its line comes in the same second as the spoofs.
    r.inject(1, [tcp_from(group, 200)]);
    r.inject(1, (0..3).map(|i| tcp_from(a, 201 + i)));
    r.settle(5);
    let summary = ["dropped the tenant's frames in the last second", "tenant=2"];
    let wait_for_summaries = |n: usize| {
        let t = Instant::now();
        while log.lines_with(&summary).len() < n {
            assert!(t.elapsed() < Duration::from_secs(20), "no drop summary");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for_summaries(1);
    // A second later, and past another summary.
    r.inject(1, [tcp_from(group, 210)]);
    r.inject(1, (0..3).map(|i| tcp_from(a, 211 + i)));
    let s = r.settle(9);
    wait_for_summaries(2);
    assert_eq!(dropped(&s.tenants[1], "spoofed_source"), 6, "{s:?}");
    assert_eq!(dropped(&s.tenants[1], "group_source"), 2, "{s:?}");
    // The address and its owner, named once.
    let spoofs = log.lines_with(&["02:00:00:00:00:01", "belongs to tenant 1 (a)"]);
    assert_eq!(spoofs.len(), 1, "{spoofs:?}");
    assert!(spoofs[0].contains("tenant=2"), "{}", spoofs[0]);
    for l in log.lines_with(&summary) {
        assert!(!l.contains("spoofed_source"), "the summary repeats it: {l}");
        assert!(l.contains("group_source=1"), "{l}");
    }
    balanced(&s);
}

/// A return-path frame to a unicast address no tenant owns is dropped and counted
/// (`reverse_unknown`), not copied to every tenant; broadcast still reaches every tenant.
#[test]
fn unknown_unicast_is_dropped_and_broadcast_reaches_every_tenant() {
    let r = Running::start("unknown", None);
    r.inject(0, [tcp(1, 100, 64)]);
    r.inject(1, [tcp(2, 200, 64)]);
    r.settle(2);
    {
        let mut q = r.uplink.rx.lock().unwrap();
        q.extend((0..20).map(|i| reply_to([2, 0, 0, 0, 0, 0x77], i)));
        q.push_back(reply_to([0xff; 6], 999));
    }
    let got0 = delivered(&r, 0, 1);
    let got1 = delivered(&r, 1, 1);
    assert_eq!(got0, vec![reply_to([0xff; 6], 999)]);
    assert_eq!(got1, vec![reply_to([0xff; 6], 999)]);
    let s = r.wait_until(
        Duration::from_millis(10),
        |_| {},
        |s| s.dataplane.reverse_unknown == 20,
    );
    assert_eq!(s.dataplane.reverse_unknown, 20, "{s:?}");
    assert_eq!(s.dataplane.reverse_flooded, 1, "{s:?}");
}

/// A tenant sending from thousands of random source addresses learns at most
/// `--macs-per-tenant` of them (the rest are dropped and counted as `mac_table_full`), and
/// the other tenant's traffic is untouched.
#[test]
fn a_random_source_flood_is_bounded_per_tenant() {
    let r = Running::start_tuned("macflood", None, None, None, |c| {
        c.isolation.macs_per_tenant = 8;
    });
    r.inject(0, [tcp(1, 100, 64)]);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    r.inject(
        1,
        (0..5_000u32).map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_be_bytes();
            tcp_from([b[0] & 0xfe, b[1], b[2], b[3], b[4], b[5]], i as u16)
        }),
    );
    let s = r.settle(5_001);
    balanced(&s);
    assert_eq!(s.tenants[1].macs, 8, "{s:?}");
    assert_eq!(dropped(&s.tenants[1], "mac_table_full"), 5_000 - 8, "{s:?}");
    assert_eq!(s.tenants[0].macs, 1, "{s:?}");
    assert_eq!(dropped(&s.tenants[0], "mac_table_full"), 0, "{s:?}");
}

/// A tenant opening flows without end (random five-tuples, as `hping3 --flood
/// --rand-source`) takes at most what the other tenants leave unreserved of the flow
/// queues: the other tenant still gets a queue for each of its new flows. (Before, the
/// flood took every queue and the other tenant's new flows were dropped as `no_queue`.)
#[test]
fn a_flow_flood_leaves_the_other_tenant_its_reserved_queues() {
    let r = Running::start_tuned("qflood", None, None, None, |c| {
        c.max_queues = 64;
        c.rate_bps = 1_000_000;
    });
    // Tenant 2: 1,000 flows on a slow link, so its queues stay busy.
    r.inject(1, (0..1_000u16).map(|i| tcp(2, 1_000 + i, 64)));
    let s = r.wait_until(
        Duration::from_millis(10),
        |_| {},
        |s| s.tenants[1].rx_frames == 1_000,
    );
    assert!(dropped(&s.tenants[1], "no_queue") > 0, "{s:?}");
    // Tenant 1: 16 new flows, each gets a queue (16 = its reservation, a quarter of 64).
    r.inject(0, (0..16u16).map(|i| tcp(1, 100 + i, 64)));
    let s = r.wait_until(
        Duration::from_millis(10),
        |_| {},
        |s| s.tenants[0].rx_frames == 16,
    );
    assert_eq!(dropped(&s.tenants[0], "no_queue"), 0, "{s:?}");
    assert_eq!(s.tenants[0].queues, 16, "{s:?}");
    assert_eq!(s.dataplane.reserved_queues, 16, "{s:?}");
}

/// A tenant flooding frames on a slow link fills at most what the other tenant leaves
/// unreserved of the frame buffers: the other tenant's frames still find buffers.
#[test]
fn a_frame_flood_leaves_the_other_tenant_its_reserved_buffers() {
    let r = Running::start_tuned("bflood", None, None, None, |c| {
        c.buffers = 256;
        c.rate_bps = 1_000_000;
    });
    // Tenant 2: 2,000 frames over 16 flows, far more than the link drains.
    r.inject(1, (0..2_000u16).map(|i| tcp(2, 1_000 + i % 16, 64)));
    let s = r.wait_until(
        Duration::from_millis(10),
        |_| {},
        |s| s.tenants[1].rx_frames == 2_000,
    );
    assert!(dropped(&s.tenants[1], "no_buffer") > 0, "{s:?}");
    r.inject(0, (0..32u16).map(|i| tcp(1, 100 + i % 4, 64)));
    let s = r.wait_until(
        Duration::from_millis(10),
        |_| {},
        |s| s.tenants[0].rx_frames == 32,
    );
    assert_eq!(dropped(&s.tenants[0], "no_buffer"), 0, "{s:?}");
    assert_eq!(s.dataplane.reserved_buffers, 64, "{s:?}");
}

/// While the uplink's link is down nothing is sent into it (before, frames were counted as
/// sent into a dead link), the stats say so, and when it comes back the held frames leave.
#[test]
fn departures_wait_while_the_uplink_is_down() {
    use std::sync::atomic::Ordering::Relaxed;
    let r = Running::start("linkdown", None);
    r.uplink.down.store(true, Relaxed);
    let s = r.wait_until(
        Duration::from_millis(20),
        |_| {},
        |s| !s.dataplane.uplink_up,
    );
    assert_eq!(s.dataplane.uplink_downs, 1, "{s:?}");
    r.inject(0, (0..50u16).map(|i| tcp(1, 100 + i % 3, 64)));
    let s = r.wait_until(
        Duration::from_millis(20),
        |_| {},
        |s| s.tenants[0].rx_frames == 50,
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        r.uplink.tx.lock().unwrap().is_empty(),
        "sent into a dead link: {s:?}"
    );
    assert_eq!(r.stats().dataplane.tx_frames, 0);
    r.uplink.down.store(false, Relaxed);
    let s = r.settle(50);
    assert_eq!(s.dataplane.tx_frames, 50, "{s:?}");
    assert!(s.dataplane.uplink_up, "{s:?}");
    assert!(s.dataplane.uplink_down_ms >= 100, "{s:?}");
    balanced(&s);
}

/// A port configured with `ip=` prefixes sends only from them: a frame whose source IP
/// lies outside is dropped and counted (`ip_source`), the rest pass.
#[test]
fn a_port_sends_only_from_its_configured_prefixes() {
    let r = Running::start_tuned("ipsrc", None, None, None, |c| {
        c.isolation.ips = vec![vec![
            weft_nic::isolation::Prefix::parse("10.77.0.1/32").unwrap()
        ]];
    });
    // `tcp(m, ..)` sends from 10.77.0.m; the source MAC is tenant 1's in both.
    let mut other = tcp(1, 300, 64);
    other[29] = 9; // source 10.77.0.9
    r.inject(0, [tcp(1, 100, 64), other, tcp(1, 101, 64)]);
    let s = r.settle(3);
    assert_eq!(dropped(&s.tenants[0], "ip_source"), 1, "{s:?}");
    assert_eq!(s.dataplane.tx_frames, 2, "{s:?}");
    balanced(&s);
}

/// Two VLAN tags do not hide a frame's source from the `ip=` check (the check read past one
/// tag only, and let a frame it could not read through).
#[test]
fn a_frame_with_two_vlan_tags_is_checked_against_the_prefixes_too() {
    let r = Running::start_tuned("ipsrc2", None, None, None, |c| {
        c.isolation.ips = vec![vec![
            weft_nic::isolation::Prefix::parse("10.77.0.1/32").unwrap()
        ]];
    });
    let mut other = tcp(1, 300, 64);
    other[29] = 9; // source 10.77.0.9
    let mut tagged = other[..12].to_vec();
    tagged.extend_from_slice(&[0x88, 0xa8, 0x00, 0x05, 0x81, 0x00, 0x00, 0x07]);
    tagged.extend_from_slice(&other[12..]);
    r.inject(0, [tcp(1, 100, 64), tagged]);
    let s = r.settle(2);
    assert_eq!(dropped(&s.tenants[0], "ip_source"), 1, "{s:?}");
    balanced(&s);
}

/// A policy `file` in `dir` whose tenant 1 goes to leaf `leaf` under shaping class
/// `class` (tenant 2 to leaf `other`).
fn renamed(dir: &std::path::Path, file: &str, leaf: &str, class: &str) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(
        &p,
        format!(
            "weft: 1\nname: {file}\nlink: {{rate: 10gbit}}\nnodes:\n  - {{name: root, type: prio}}\n  - {{name: {class}, type: shape, parent: root, rate: 5gbit, burst: 64kb}}\n  - {{name: {leaf}, type: leaf, parent: [{class}], priority: 0, match: {{tenant: 1}}}}\n  - {{name: other, type: leaf, parent: root, priority: 1}}\n"
        ),
    )
    .unwrap();
    p
}

/// A node's and a shaping class's packets in `s`, by name (`None`: not in the policy).
fn packets_of(s: &Stats, node: &str, class: &str) -> (Option<u64>, Option<u64>) {
    (
        s.nodes.iter().find(|n| n.name == node).map(|n| n.packets),
        s.shapers
            .iter()
            .find(|c| c.name == class)
            .map(|c| c.packets),
    )
}

fn reload(r: &Running, policy: &std::path::Path) {
    reloaded(r.reload(policy));
}

/// Counters were carried across reloads for every node and shaping class name ever
/// loaded, so a daemon reloaded with ever new names grew without bound, and a name that
/// came back took up its old counts. Only the running policy's names are carried: one a
/// reload drops is forgotten, and counts from zero if it comes back; names kept throughout
/// (`root`) keep counting.
#[test]
fn counters_are_carried_only_for_the_names_the_running_policy_has() {
    let r = Running::start("carried", None);
    let x = renamed(&r.dir, "x.yaml", "x", "sx");
    let y = renamed(&r.dir, "y.yaml", "y", "sy");
    reload(&r, &x);
    r.inject(0, (0..50u16).map(|i| tcp(1, 100 + i % 3, 64)));
    let s = r.settle(50);
    assert_eq!(packets_of(&s, "x", "sx"), (Some(50), Some(50)), "{s:?}");
    reload(&r, &y);
    r.inject(0, (0..30u16).map(|i| tcp(1, 100 + i % 3, 64)));
    let s = r.settle(80);
    assert_eq!(packets_of(&s, "y", "sy"), (Some(30), Some(30)), "{s:?}");
    assert_eq!(packets_of(&s, "x", "sx"), (None, None), "{s:?}");
    // `x` and `sx` come back: from zero.
    reload(&r, &x);
    let s = r.settle(80);
    assert_eq!(packets_of(&s, "x", "sx"), (Some(0), Some(0)), "{s:?}");
    assert_eq!(packets_of(&s, "root", "").0, Some(80), "{s:?}");
    r.inject(0, (0..10u16).map(|i| tcp(1, 100 + i % 3, 64)));
    let s = r.settle(90);
    assert_eq!(packets_of(&s, "x", "sx"), (Some(10), Some(10)), "{s:?}");
    assert_eq!(packets_of(&s, "root", "").0, Some(90), "{s:?}");
    balanced(&s);
}

/// The same for an engine still draining across two reloads (the uplink down holds its
/// packets): its counts go to the names every policy since has kept (`root`), not to a
/// name that left and came back (`x`), neither while it drains nor once it has drained.
#[test]
fn a_draining_engine_counts_only_for_names_kept_since() {
    use std::sync::atomic::Ordering::Relaxed;
    let r = Running::start("carried-drain", None);
    let x = renamed(&r.dir, "x.yaml", "x", "sx");
    let y = renamed(&r.dir, "y.yaml", "y", "sy");
    reload(&r, &x);
    r.uplink.down.store(true, Relaxed);
    r.wait_until(
        Duration::from_millis(20),
        |_| {},
        |s| !s.dataplane.uplink_up,
    );
    r.inject(0, (0..20u16).map(|i| tcp(1, 100 + i % 3, 64)));
    let s = r.wait_until(
        Duration::from_millis(20),
        |_| {},
        |s| s.dataplane.backlog == 20,
    );
    assert_eq!(s.dataplane.backlog, 20, "{s:?}");
    reload(&r, &y);
    reload(&r, &x);
    let s = r.stats();
    assert_eq!(s.dataplane.backlog, 20, "still draining: {s:?}");
    assert_eq!(packets_of(&s, "x", "sx"), (Some(0), Some(0)), "{s:?}");
    r.uplink.down.store(false, Relaxed);
    let s = r.settle(20);
    assert_eq!(s.dataplane.tx_frames, 20, "{s:?}");
    assert_eq!(s.dataplane.backlog, 0, "{s:?}");
    assert_eq!(packets_of(&s, "x", "sx"), (Some(0), Some(0)), "{s:?}");
    assert_eq!(packets_of(&s, "root", "").0, Some(20), "{s:?}");
    balanced(&s);
}

/// The answer line to `{"cmd":"stats"}` on `sock`, as the daemon wrote it (without its
/// line feed).
fn stats_line(sock: &std::path::Path) -> String {
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(sock).expect("control socket");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"{\"cmd\":\"stats\"}\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).expect("the answer");
    text.strip_suffix('\n').expect("one line").to_string()
}

/// `ctl stats` of the running loop, the very bytes it answered: they read into [`Stats`]
/// and serialize back to themselves; read as the [`Reply`] to `{"cmd":"stats"}` they are
/// that `Stats`; and the final stats the loop returns are the same type, balanced.
#[test]
fn a_running_loops_stats_answer_reads_into_stats_byte_for_byte() {
    let r = Running::start("schema", None);
    r.inject(0, (0..40u16).map(|i| tcp(1, 7000 + i % 4, 200)));
    r.inject(1, (0..20u16).map(|i| tcp(2, 8000 + i % 2, 300)));
    r.settle(60);
    let line = stats_line(&r.sock);
    let stats: Stats = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(serde_json::to_string(&stats).unwrap(), line);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        Reply::read(&Request::Stats, &v),
        Ok(Reply::Stats(Box::new(stats.clone())))
    );
    assert!(stats.ok && stats.generation == 1, "{line}");
    assert_eq!(stats.dataplane.tx_frames, 60, "{line}");
    assert_eq!(stats.tenants.len(), 2, "{line}");
    assert_eq!(stats.tenants[0].rx_frames, 40, "{line}");
    assert_eq!(
        stats
            .nodes
            .iter()
            .filter(|n| n.leaf)
            .map(|n| n.packets)
            .sum::<u64>(),
        60,
        "{line}"
    );
    assert!(stats.timing.busy_iteration.n > 0, "{line}");
    let fin = r.finish();
    balanced(&fin);
    assert_eq!(fin.dataplane.tx_frames, 60, "{fin:?}");
}
