//! `weft bench rte-sched`: DPDK rte_sched's benchmark workload replayed through one of
//! weft's engines (the fast engine, or the head engine with `--engine heads`), so that the
//! schedulers can be compared packet for packet.
//!
//! **What.** One port of 1 Gbit/s carrying 1,514-byte frames with 24 bytes of overhead, one
//! subport, P pipes of 16 queues: traffic classes 0..11 in strict priority (one queue each)
//! and class 12 best effort, four queues under weights 1:2:4:8; pipes share the port
//! equally; 64 packets a queue. Profile `shape` limits odd pipes to R/(2P) with a bucket of
//! backlog/P frames (4 to 64); even pipes stay unlimited, so the link never idles. The
//! hierarchy is written as a policy ([`policy_yaml`]) and compiled like any other. Queue q
//! (= pipe × 16 + i) is the flow queue of leaf `p{pipe}-q{i}`, opened once before the clock
//! starts. Arrivals come from the peer harness's splitmix64 stream ([`stream`]): `uniform`
//! sends each new packet to the stream's next queue, `pipe` replaces a packet that left
//! pipe p by one to pipe p (queue = entry & 15). The loop dequeues a burst of up to `burst`
//! packets at one instant (`dequeue_batch`), advances a virtual clock by each frame's wire
//! time and enqueues as many new packets in one batch (`enqueue_flow_batch`).
//!
//! **Invariants.** The stream is the harness's: [`seq_checksum`] of its first 1,024 entries
//! equals the harness's `seq_checksum` for the same seed and pipe count (a test pins one
//! value measured with the harness). The engine holds `backlog` packets at every dequeue,
//! less the packets dropped at a full queue (counted as `drops`). A departure's packet id
//! carries its queue (low 32 bits) and its mark (high 32 bits): the departures made up to
//! the one it replaced, that one included (the harness's mark: the burst's later departures
//! are not counted), 0 for the initial fill. The log records `(queue, mark)` as
//! little-endian u32 pairs, as the harness's does.
//!
//! **Cost.** Setup compiles a policy of 18 nodes a pipe (294,913 at 16,384 pipes: 8.5 s on
//! this project's machine half busy, 23 s under a heavy load) and opens 16 P flow queues;
//! the stream takes 4 MiB. The timed loop allocates nothing: the burst, the batch, its
//! results and the log (when one is asked for, 8 bytes a departure, reserved before the
//! clock starts) live in buffers sized up front. Per packet it does one stream read, one
//! departure and one enqueue of the engine, and the driver's share is about 56
//! instructions (callgrind). Packets per second are counted over the timed loop by the
//! thread's CPU time, after the warm-up.

use std::path::Path;
use std::sync::Arc;

use weft_core::classifier::PacketMeta;
use weft_core::policy::{compile_str, LoadOptions, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::heads::HeadEngine;
use weft_core::sched::link::wire_ps;
use weft_core::sched::{Departure, Engine, FlowQueue, Packet};

/// The port's rate, bits/s.
pub const PORT_BPS: u64 = 1_000_000_000;
/// Frame bytes (without the overhead).
pub const FRAME: u32 = 1_514;
/// Per-frame overhead on the wire, bytes.
pub const OVERHEAD: u32 = 24;
/// Packets a queue holds.
pub const QSIZE: u32 = 64;
/// Entries of the arrival stream, reused cyclically.
pub const SEQ_LEN: usize = 1 << 20;
/// Largest burst the loop dequeues at once.
pub const MAX_BURST: u32 = 256;
/// Most timed departures a run may log (`--log`): the log is reserved before the clock
/// starts, 8 bytes a departure (800 MB at this bound).
pub const MAX_LOGGED: u64 = 100_000_000;

/// Where new packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrivals {
    /// The stream's next queue.
    Uniform,
    /// The pipe of the packet that left, the queue within it from the stream.
    Pipe,
}

/// Which of weft's engines schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheduler {
    /// The PIFO-tree engine (`sched::fast`).
    Fast,
    /// The head engine (`sched::heads`): ranks only each child's first entry.
    Heads,
}

impl Scheduler {
    /// The name the JSON row gives it.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Fast => "fast",
            Scheduler::Heads => "heads",
        }
    }
}

/// Which pipes are rate-limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// No pipe is limited.
    Noshape,
    /// Odd pipes limited to R/(2P); even pipes unlimited.
    Shape,
}

impl Arrivals {
    fn name(self) -> &'static str {
        match self {
            Arrivals::Uniform => "uniform",
            Arrivals::Pipe => "pipe",
        }
    }
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Noshape => "noshape",
            Profile::Shape => "shape",
        }
    }
}

/// One run's parameters (the harness's options of the same names).
#[derive(Debug, Clone)]
pub struct Config {
    pub pipes: u32,
    pub arrivals: Arrivals,
    pub profile: Profile,
    /// Departures timed.
    pub packets: u64,
    /// Departures before the clock starts.
    pub warmup: u64,
    /// Packets kept queued.
    pub backlog: u32,
    /// Most packets dequeued (and then enqueued) at once.
    pub burst: u32,
    pub seed: u64,
    /// The engine that schedules.
    pub engine: Scheduler,
}

impl Config {
    /// Queues in all (16 a pipe).
    pub fn queues(&self) -> u32 {
        self.pipes * 16
    }

    /// Frames a shaped pipe's bucket holds: backlog / pipes, 4 to 64 (as the harness).
    pub fn shaped_bucket_frames(&self) -> u32 {
        (self.backlog / self.pipes).clamp(4, 64)
    }

    /// A shaped pipe's rate, bits/s: R/(2P), rounded down to a whole bit/s.
    pub fn shaped_rate_bps(&self) -> u64 {
        PORT_BPS / (2 * self.pipes as u64)
    }
}

/// The harness's pseudo-random generator (splitmix64): the next output, the state moved on
/// by one step ([`crate::bench::mix`] is the output of the state's next step).
fn splitmix(state: &mut u64) -> u64 {
    let z = crate::bench::mix(*state);
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z
}

/// The arrival stream: [`SEQ_LEN`] queue ids in `0..queues`, entry k = `((z >> 32) *
/// queues) >> 32` for the k-th splitmix64 output from state `seed`.
pub fn stream(seed: u64, queues: u32) -> Vec<u32> {
    let mut st = seed;
    (0..SEQ_LEN)
        .map(|_| (((splitmix(&mut st) >> 32) * queues as u64) >> 32) as u32)
        .collect()
}

/// The sum of the stream's first 1,024 entries: the harness prints it as `seq_checksum`.
pub fn seq_checksum(seq: &[u32]) -> u64 {
    seq.iter().take(1024).map(|&q| q as u64).sum()
}

/// The policy of `cfg`'s hierarchy: a `wfq` root (the port) over one `prio` node a pipe
/// (`match: {vm: pipe}`, weight 1), each over twelve leaves (traffic classes 0..11,
/// `match: {tag: i}`, priorities 0..11) and a `wfq` node of priority 12 over four leaves of
/// weights 1, 2, 4, 8 (`tag` 12..15); every leaf one queue (`flows: {by: none}`) of
/// [`QSIZE`] packets. Under `shape`, an odd pipe's edge passes a shaping node of its own.
pub fn policy_yaml(cfg: &Config) -> String {
    use std::fmt::Write;
    let mut y = String::with_capacity(cfg.pipes as usize * 2_000);
    let _ = writeln!(
        y,
        "# rte_sched's benchmark hierarchy: {} pipes, profile {}.\n\
         weft: 1\n\
         name: rte-sched-{}-pipes-{}\n\
         link: {{rate: {}bit, overhead: {}b, mtu: {}b}}\n\
         nodes:\n  \
         - {{name: port, type: wfq}}",
        cfg.pipes,
        cfg.profile.name(),
        cfg.pipes,
        cfg.profile.name(),
        PORT_BPS,
        OVERHEAD,
        FRAME,
    );
    let leaf = format!("flows: {{by: none}}, limit: {{packets: {QSIZE}}}");
    for p in 0..cfg.pipes {
        let shaped = cfg.profile == Profile::Shape && p % 2 == 1;
        let parent = if shaped {
            let _ = writeln!(
                y,
                "  - {{name: p{p}-shape, type: shape, parent: port, rate: {}bit, burst: {}b}}",
                cfg.shaped_rate_bps(),
                cfg.shaped_bucket_frames() as u64 * (FRAME + OVERHEAD) as u64,
            );
            format!("p{p}-shape")
        } else {
            "port".to_string()
        };
        let _ = writeln!(
            y,
            "  - {{name: p{p}, type: prio, parent: {parent}, weight: 1, match: {{vm: {p}}}}}"
        );
        for i in 0..12 {
            let _ = writeln!(
                y,
                "  - {{name: p{p}-q{i}, type: leaf, parent: p{p}, priority: {i}, match: {{tag: {i}}}, {leaf}}}"
            );
        }
        let _ = writeln!(
            y,
            "  - {{name: p{p}-be, type: wfq, parent: p{p}, priority: 12, match: {{tag: [12, 13, 14, 15]}}}}"
        );
        for (j, w) in [1, 2, 4, 8].into_iter().enumerate() {
            let i = 12 + j;
            let _ = writeln!(
                y,
                "  - {{name: p{p}-q{i}, type: leaf, parent: p{p}-be, weight: {w}, match: {{tag: {i}}}, {leaf}}}"
            );
        }
    }
    y
}

/// The classifier fields of queue `q`'s packets.
fn meta_of(q: u32) -> PacketMeta {
    let mut m = PacketMeta::default();
    m.set_int(weft_core::classifier::Field::Vm, (q >> 4) as u64);
    m.set_int(weft_core::classifier::Field::Tag, (q & 15) as u64);
    m
}

/// The workload set up: the engine, every queue's flow queue, the stream.
pub struct Workload {
    pub cfg: Config,
    pub prog: Arc<Program>,
    engine: Box<dyn Engine>,
    queues: Vec<FlowQueue>,
    seq: Vec<u32>,
    /// Stream entries used.
    ai: usize,
    /// Departures so far.
    done: u64,
    /// The virtual clock, ps.
    now: u64,
    /// One frame's wire time, ps.
    wire: u64,
    /// Dequeues that found nothing to send.
    empty: u64,
    /// Packets dropped at a full queue.
    drops: u64,
    // The loop's buffers, sized once.
    out: Vec<Departure>,
    posted: Vec<(Packet, FlowQueue)>,
    results: Vec<Result<(), weft_core::sched::DropReason>>,
}

/// Where departures are recorded: nowhere (the timed loop), a log file's pairs, or a test's
/// list.
pub trait Sink {
    /// Queue `queue`'s packet left in the burst dequeued at `at_ps` (the instant its shaping
    /// class, if any, was charged); `mark` departures had been made before it was enqueued.
    fn departed(&mut self, queue: u32, mark: u32, at_ps: u64);
}

/// Records nothing.
pub struct NoLog;

impl Sink for NoLog {
    #[inline(always)]
    fn departed(&mut self, _: u32, _: u32, _: u64) {}
}

/// The log file's content: `(queue, mark)` pairs.
impl Sink for Vec<u32> {
    #[inline]
    fn departed(&mut self, queue: u32, mark: u32, _: u64) {
        self.push(queue);
        self.push(mark);
    }
}

/// Every departure in full: `(queue, mark, departure time in ps)`.
impl Sink for Vec<(u32, u32, u64)> {
    fn departed(&mut self, queue: u32, mark: u32, at_ps: u64) {
        self.push((queue, mark, at_ps));
    }
}

impl Workload {
    /// Compiles the policy, opens every queue's flow queue and builds the stream; no packet
    /// is queued yet.
    pub fn new(cfg: &Config) -> Result<Workload, String> {
        if cfg.pipes == 0 || cfg.pipes > 1 << 16 {
            return Err(format!("--pipes {}: 1 to 65536", cfg.pipes));
        }
        if cfg.burst == 0 || cfg.burst > MAX_BURST {
            return Err(format!("--burst {}: 1 to {MAX_BURST}", cfg.burst));
        }
        if cfg.backlog == 0 {
            return Err("--backlog 0: at least one packet".into());
        }
        let yaml = policy_yaml(cfg);
        let prog = compile_str(Path::new("rte-sched.yaml"), &yaml, &LoadOptions::default())
            .map_err(|e| format!("the workload's policy: {}", e.render_plain()))?;
        let prog = Arc::new(prog);
        let mut engine: Box<dyn Engine> = match cfg.engine {
            Scheduler::Fast => Box::new(FastEngine::new(prog.clone())),
            Scheduler::Heads => Box::new(HeadEngine::new(prog.clone()).map_err(|e| e.to_string())?),
        };
        let mut queues = Vec::with_capacity(cfg.queues() as usize);
        for q in 0..cfg.queues() {
            let p = Packet::new(0, FRAME, meta_of(q));
            let class = prog.classify(&p.meta);
            let fq = engine
                .open_flow(&p, class)
                .ok_or_else(|| format!("queue {q}: its packets reach no leaf of the policy"))?;
            queues.push(fq);
        }
        let wire = wire_ps(FRAME, &prog.link);
        let burst = cfg.burst as usize;
        // The batch's packets differ only in their ids and queues, written in place.
        let posted = vec![(Packet::new(0, FRAME, PacketMeta::default()), queues[0]); burst];
        Ok(Workload {
            cfg: cfg.clone(),
            prog,
            engine,
            queues,
            seq: stream(cfg.seed, cfg.queues()),
            ai: 0,
            done: 0,
            now: 0,
            wire,
            empty: 0,
            drops: 0,
            out: Vec::with_capacity(burst),
            posted,
            results: Vec::with_capacity(burst),
        })
    }

    /// The stream's checksum ([`seq_checksum`]).
    pub fn seq_checksum(&self) -> u64 {
        seq_checksum(&self.seq)
    }

    /// Departures so far.
    pub fn departures(&self) -> u64 {
        self.done
    }

    /// Dequeues that found nothing eligible.
    pub fn empty_dequeues(&self) -> u64 {
        self.empty
    }

    /// Packets dropped at a full queue.
    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// Packets queued.
    pub fn backlog(&self) -> usize {
        self.engine.backlog()
    }

    /// The next stream entry.
    #[inline(always)]
    fn next_entry(&mut self) -> u32 {
        let r = self.seq[self.ai & (SEQ_LEN - 1)];
        self.ai += 1;
        r
    }

    /// Offers `packets` at once, each `(queue, mark)`, at the current time.
    fn offer(&mut self, packets: impl Iterator<Item = (u32, u32)>) {
        for (q, mark) in packets {
            let id = ((mark as u64) << 32) | q as u64;
            let p = Packet::new(id, FRAME, PacketMeta::default());
            if self
                .engine
                .enqueue_flow(p, &self.queues[q as usize], self.now)
                .is_err()
            {
                self.drops += 1;
            }
        }
    }

    /// Queues the initial backlog (the harness's fill: the stream's next queues, or under
    /// `pipe` arrivals packet j to pipe j mod P).
    pub fn fill(&mut self) {
        let (pipes, uniform) = (self.cfg.pipes, self.cfg.arrivals == Arrivals::Uniform);
        let fill: Vec<u32> = (0..self.cfg.backlog)
            .map(|j| {
                let r = self.next_entry();
                if uniform {
                    r
                } else {
                    ((j % pipes) << 4) | (r & 15)
                }
            })
            .collect();
        self.offer(fill.into_iter().map(|q| (q, 0)));
    }

    /// Fills every queue with `k` packets (queue j mod 16 P for the j-th), as the harness's
    /// `--drain`.
    pub fn fill_drain(&mut self, k: u32) {
        let nq = self.cfg.queues();
        self.offer((0..k as u64 * nq as u64).map(|j| ((j % nq as u64) as u32, 0)));
    }

    /// Dequeues a burst of up to `burst` packets at the current instant into `self.out`;
    /// when nothing is eligible, counts an empty dequeue and advances the clock to the next
    /// release (at least one picosecond). Returns how many packets left.
    fn burst(&mut self, burst: usize) -> usize {
        self.out.clear();
        let k = self.engine.dequeue_batch(self.now, burst, &mut self.out);
        if k == 0 {
            self.empty += 1;
            self.now = self
                .engine
                .next_wakeup()
                .unwrap_or(self.now + 1)
                .max(self.now + 1);
        }
        k
    }

    /// Dequeues until the engine is empty (or `max_dequeues` calls), recording each
    /// departure; returns the departures.
    pub fn drain(&mut self, sink: &mut impl Sink, max_dequeues: u64) -> u64 {
        let burst = self.cfg.burst as usize;
        let mut got = 0;
        let mut calls = 0;
        while self.engine.backlog() > 0 && calls < max_dequeues {
            calls += 1;
            let k = self.burst(burst);
            if k == 0 {
                continue;
            }
            for d in &self.out {
                sink.departed(d.id as u32, (d.id >> 32) as u32, self.now);
            }
            self.now += k as u64 * self.wire;
            got += k as u64;
            self.done += k as u64;
        }
        got
    }

    /// Runs the loop until `packets` more departures have been made (a burst may carry it
    /// past by less than a burst): dequeue a burst at one instant, advance the clock by the
    /// frames sent, enqueue as many new packets in one batch. A dequeue that finds nothing
    /// eligible advances the clock to the next release instead.
    pub fn steps(&mut self, packets: u64, sink: &mut impl Sink) {
        let target = self.done + packets;
        let burst = self.cfg.burst as usize;
        let uniform = self.cfg.arrivals == Arrivals::Uniform;
        while self.done < target {
            let k = self.burst(burst);
            if k == 0 {
                continue;
            }
            let at = self.now;
            for i in 0..k {
                let d = self.out[i].id;
                let old = d as u32;
                let r = self.seq[self.ai & (SEQ_LEN - 1)];
                self.ai += 1;
                let q = if uniform { r } else { (old & !15) | (r & 15) };
                sink.departed(old, (d >> 32) as u32, at);
                self.done += 1;
                // The new packet's mark: the departures so far, this one's included (the
                // harness's).
                let (p, fq) = &mut self.posted[i];
                p.id = (self.done << 32) | q as u64;
                *fq = self.queues[q as usize];
            }
            self.now += k as u64 * self.wire;
            self.results.clear();
            self.engine
                .enqueue_flow_batch(&self.posted[..k], self.now, &mut self.results);
            self.drops += self.results.iter().filter(|r| r.is_err()).count() as u64;
        }
    }
}

/// The calling thread's CPU time, seconds.
pub fn thread_cpu_s() -> f64 {
    weft_sys::clock::thread_cpu_ns() as f64 * 1e-9
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Departures timed.
    pub packets: u64,
    /// Departures before the timed loop (the warm-up, to a burst): check.py's `--start`.
    pub start: u64,
    pub seconds: f64,
    pub cpu_seconds: f64,
    /// Setup: compiling the policy, opening the queues, building the stream, the fill.
    pub setup_seconds: f64,
    pub empty_dequeues: u64,
    pub drops: u64,
    pub backlog_at_end: usize,
    pub seq_checksum: u64,
    pub nodes: usize,
}

/// Sets up, fills, warms up and times `cfg.packets` departures, recording the timed ones
/// in `log` when given (`(queue, mark)` pairs, reserved before the clock starts).
pub fn measure(cfg: &Config, mut log: Option<&mut Vec<u32>>) -> Result<Measured, String> {
    if log.is_some() && cfg.packets > MAX_LOGGED {
        return Err(format!(
            "--packets {} with --log: at most {MAX_LOGGED} (the log is kept in memory until \
             the run ends, 8 bytes a departure)",
            cfg.packets
        ));
    }
    let t0 = std::time::Instant::now();
    let mut w = Workload::new(cfg)?;
    w.fill();
    let setup_seconds = t0.elapsed().as_secs_f64();
    w.steps(cfg.warmup, &mut NoLog);
    let start = w.departures();
    let empty_warm = w.empty;
    let burst = cfg.burst as u64;
    if let Some(l) = log.as_mut() {
        l.clear();
        l.reserve(2 * (cfg.packets + burst) as usize);
    }
    let (t, c) = (std::time::Instant::now(), thread_cpu_s());
    match log {
        Some(l) => w.steps(cfg.packets, l),
        None => w.steps(cfg.packets, &mut NoLog),
    }
    let cpu_seconds = thread_cpu_s() - c;
    let seconds = t.elapsed().as_secs_f64();
    Ok(Measured {
        packets: w.departures() - start,
        start,
        seconds,
        cpu_seconds,
        setup_seconds,
        empty_dequeues: w.empty - empty_warm,
        drops: w.drops,
        backlog_at_end: w.backlog(),
        seq_checksum: w.seq_checksum(),
        nodes: w.prog.nodes.len(),
    })
}

/// The log's bytes: little-endian u32s.
pub fn log_bytes(log: &[u32]) -> Vec<u8> {
    log.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Parses a count with an optional `k` (×1,000) or `m` (×1,000,000) suffix, as the
/// harness: `3m`, `100k`, `4096`.
pub fn count(s: &str) -> Result<u64, String> {
    let (digits, mul) = match s.as_bytes().last() {
        Some(b'k') => (&s[..s.len() - 1], 1_000),
        Some(b'm') => (&s[..s.len() - 1], 1_000_000),
        _ => (s, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mul))
        .ok_or_else(|| format!("`{s}`: a whole number, optionally with k or m (3m, 100k)"))
}

/// One run's JSON object (`--json`: the harness's fields, in its order). Rates are of the
/// timed loop, after the warm-up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// Which driver ran: always `weft` (the harness's rows say `rte_sched`).
    pub bench: &'static str,
    /// The engine: `fast` or `heads`.
    pub engine: &'static str,
    /// Pipes (16 queues each), pipes.
    pub pipes: u32,
    /// `noshape` or `shape`.
    pub profile: &'static str,
    /// `uniform` or `pipe`.
    pub arrivals: &'static str,
    /// Packets kept queued, packets.
    pub backlog: u32,
    /// Most packets dequeued (and then enqueued) at once, packets.
    pub burst: u32,
    /// The arrival stream's seed.
    pub seed: u64,
    /// Departures timed, packets.
    pub packets: u64,
    /// Departures before the timed loop (check.py's `--start`), packets.
    pub start_departures: u64,
    /// Wall time of the timed loop, seconds, to 0.0001.
    pub seconds: f64,
    /// Packets by wall time, millions a second, to 0.001.
    pub mpps: f64,
    /// Wall time per packet, nanoseconds, to 0.01.
    pub ns_per_packet: f64,
    /// The thread's CPU time over the timed loop, seconds, to 0.0001.
    pub cpu_seconds: f64,
    /// Packets by CPU time, millions a second, to 0.001.
    pub cpu_mpps: f64,
    /// CPU time per packet, nanoseconds, to 0.01.
    pub cpu_ns_per_packet: f64,
    /// Setup (the policy compiled, the queues opened, the stream built, the fill), seconds,
    /// to 0.001.
    pub setup_seconds: f64,
    /// Dequeues that found nothing to send in the timed loop, dequeues.
    pub empty_dequeues: u64,
    /// Packets dropped, packets.
    pub drops: u64,
    /// Packets queued at the end, packets.
    pub backlog_at_end: usize,
    /// Nodes of the compiled policy, nodes.
    pub policy_nodes: usize,
    /// Whether the departures were logged (`--log`) for check.py.
    pub check: bool,
    /// The arrival stream's checksum (the harness's own for the same seed and pipes).
    pub seq_checksum: u64,
}

/// One run's [`Row`] (`"bench": "weft"`).
pub fn json_row(cfg: &Config, m: &Measured, logged: bool) -> Row {
    let mpps = m.packets as f64 / m.seconds / 1e6;
    let cpu_mpps = m.packets as f64 / m.cpu_seconds / 1e6;
    let round = |v: f64, d: i32| (v * 10f64.powi(d)).round() / 10f64.powi(d);
    Row {
        bench: "weft",
        engine: cfg.engine.name(),
        pipes: cfg.pipes,
        profile: cfg.profile.name(),
        arrivals: cfg.arrivals.name(),
        backlog: cfg.backlog,
        burst: cfg.burst,
        seed: cfg.seed,
        packets: m.packets,
        start_departures: m.start,
        seconds: round(m.seconds, 4),
        mpps: round(mpps, 3),
        ns_per_packet: round(1e3 / mpps, 2),
        cpu_seconds: round(m.cpu_seconds, 4),
        cpu_mpps: round(cpu_mpps, 3),
        cpu_ns_per_packet: round(1e3 / cpu_mpps, 2),
        setup_seconds: round(m.setup_seconds, 3),
        empty_dequeues: m.empty_dequeues,
        drops: m.drops,
        backlog_at_end: m.backlog_at_end,
        policy_nodes: m.nodes,
        check: logged,
        seq_checksum: m.seq_checksum,
    }
}

/// `--drain`'s JSON object: the queues filled and drained once.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DrainRow {
    /// Which driver ran: always `weft`.
    pub bench: &'static str,
    /// Packets each queue was filled with, packets.
    pub drain: u32,
    /// Pipes (16 queues each), pipes.
    pub pipes: u32,
    /// Packets drained, packets.
    pub packets: u64,
    /// Dequeues that found nothing to send, dequeues.
    pub empty_dequeues: u64,
    /// Packets dropped, packets.
    pub drops: u64,
}

/// A row as `--json` prints it: one line of JSON.
impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

/// A row as `--drain` prints it: one line of JSON.
impl std::fmt::Display for DrainRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| std::fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness's `seq_checksum` (sched_bench.c in the peer harness directory, DPDK
    /// 22.11, run once with `--seed 0`: 516595 at `--pipes 64`, 33094638 at `--pipes 4096`):
    /// a cross-implementation vector that proves both drivers replay the same stream.
    #[test]
    fn the_stream_is_the_harness_stream() {
        assert_eq!(seq_checksum(&stream(0, 64 * 16)), 516_595);
        assert_eq!(seq_checksum(&stream(0, 4096 * 16)), 33_094_638);
    }

    fn cfg(pipes: u32, arrivals: Arrivals, profile: Profile) -> Config {
        Config {
            pipes,
            arrivals,
            profile,
            packets: 0,
            warmup: 0,
            backlog: 4096,
            burst: 32,
            seed: 0,
            engine: Scheduler::Fast,
        }
    }

    /// Traffic class of position i within a pipe.
    fn tc(q: u32) -> u32 {
        (q & 15).min(12)
    }

    /// A drain of 64 packets in every queue: no priority inversion within a pipe, the
    /// best-effort queues served 1:2:4:8 while all four are backlogged, and every pipe
    /// served alike (at half the drain, each pipe has sent about half its packets).
    #[test]
    fn a_drain_keeps_priority_wrr_and_pipe_shares() {
        let (k, pipes) = (64u32, 64u32);
        let mut w = Workload::new(&cfg(pipes, Arrivals::Uniform, Profile::Noshape)).unwrap();
        w.fill_drain(k);
        assert_eq!(w.drops(), 0);
        let mut log: Vec<(u32, u32, u64)> = Vec::new();
        w.drain(&mut log, u64::MAX);
        assert_eq!(log.len() as u64, k as u64 * 16 * pipes as u64);
        let mut last_tc = vec![0u32; pipes as usize];
        let mut be = vec![[0u32; 4]; pipes as usize];
        let mut be_first_empty: Vec<Option<[u32; 4]>> = vec![None; pipes as usize];
        let mut per_pipe = vec![0u32; pipes as usize];
        for (i, &(q, _, _)) in log.iter().enumerate() {
            let p = (q >> 4) as usize;
            assert!(
                tc(q) >= last_tc[p],
                "departure {i}: pipe {p} served tc {} after tc {}",
                tc(q),
                last_tc[p]
            );
            last_tc[p] = tc(q);
            if q & 15 >= 12 && be_first_empty[p].is_none() {
                let j = (q & 15) as usize - 12;
                be[p][j] += 1;
                if be[p][j] == k {
                    be_first_empty[p] = Some(be[p]);
                }
            }
            per_pipe[p] += 1;
            if i + 1 == log.len() / 2 {
                let half = 8 * k;
                for (p, &n) in per_pipe.iter().enumerate() {
                    assert!(
                        n.abs_diff(half) <= 16,
                        "pipe {p}: {n} sent at half the drain, fair {half}"
                    );
                }
            }
        }
        let mut tot = [0u32; 4];
        for c in be_first_empty
            .iter()
            .map(|c| c.expect("every BE queue drained"))
        {
            for j in 0..4 {
                tot[j] += c[j];
            }
        }
        let sum: u32 = tot.iter().sum();
        for (j, w) in [1.0, 2.0, 4.0, 8.0].into_iter().enumerate() {
            let share = tot[j] as f64 / sum as f64;
            assert!(
                (share / (w / 15.0) - 1.0).abs() < 0.05,
                "BE queue {j}: share {share}, expected {}",
                w / 15.0
            );
        }
    }

    /// `noshape`, `pipe` arrivals: every pipe gets an equal share of the departures, and the
    /// traffic classes' mean delays do not decrease with the class (strict priority).
    #[test]
    fn pipes_share_the_port_equally() {
        let pipes = 64u32;
        let mut w = Workload::new(&cfg(pipes, Arrivals::Pipe, Profile::Noshape)).unwrap();
        w.fill();
        w.steps(20_000, &mut NoLog);
        let start = w.departures();
        let mut log: Vec<(u32, u32, u64)> = Vec::new();
        w.steps(100_000, &mut log);
        assert_eq!(w.drops(), 0);
        assert_eq!(w.backlog(), 4096);
        let mut per_pipe = vec![0u64; pipes as usize];
        let mut delay = [(0u64, 0u64); 13];
        for (i, &(q, mark, _)) in log.iter().enumerate() {
            per_pipe[(q >> 4) as usize] += 1;
            let d = &mut delay[tc(q) as usize];
            d.0 += start + i as u64 + 1 - mark as u64;
            d.1 += 1;
        }
        let mean = log.len() as f64 / pipes as f64;
        for (p, &n) in per_pipe.iter().enumerate() {
            assert!(
                (n as f64 / mean - 1.0).abs() < 0.02,
                "pipe {p}: {n} departures, mean {mean}"
            );
        }
        let means: Vec<f64> = delay
            .iter()
            .map(|&(s, n)| s as f64 / n.max(1) as f64)
            .collect();
        for t in 1..13 {
            assert!(
                means[t - 1] <= means[t] * 1.05,
                "tc {} waits {} departures, tc {t} {}",
                t - 1,
                means[t - 1],
                means[t]
            );
        }
    }

    /// `shape`, `pipe` arrivals: every odd pipe conforms to its token bucket (rate R/(2P), depth of the
    /// bucket's frames, each frame charged its wire bytes, the bucket full at the start),
    /// and gets close to its limit; even pipes share the rest equally.
    #[test]
    fn shaped_pipes_conform_to_their_buckets() {
        let pipes = 64u32;
        let c = cfg(pipes, Arrivals::Pipe, Profile::Shape);
        let mut w = Workload::new(&c).unwrap();
        w.fill();
        let mut log: Vec<(u32, u32, u64)> = Vec::new();
        w.steps(200_000, &mut log);
        // Tokens in bits × 10^12, exact integers: a bucket gains `rate` (bits/s) of them a
        // picosecond, and a frame costs its wire bits × 10^12.
        let rate = c.shaped_rate_bps() as u128;
        let charge = (FRAME + OVERHEAD) as u128 * 8 * 1_000_000_000_000;
        let depth = c.shaped_bucket_frames() as u128 * charge;
        let mut tokens = vec![depth; pipes as usize];
        let mut last = vec![0u64; pipes as usize];
        let mut per_pipe = vec![0u64; pipes as usize];
        for &(q, _, at) in &log {
            let p = (q >> 4) as usize;
            per_pipe[p] += 1;
            if p % 2 == 1 {
                let t = (tokens[p] + (at - last[p]) as u128 * rate).min(depth);
                assert!(
                    t >= charge,
                    "pipe {p} sent at {at} ps with {} frames of tokens",
                    t as f64 / charge as f64
                );
                tokens[p] = t - charge;
                last[p] = at;
            }
        }
        let end = log.last().unwrap().2 as f64 * 1e-12;
        let limit_frames = c.shaped_rate_bps() as f64 / 8.0 / (FRAME + OVERHEAD) as f64 * end;
        let even: Vec<u64> = per_pipe.iter().step_by(2).copied().collect();
        let even_mean = even.iter().sum::<u64>() as f64 / even.len() as f64;
        for (p, &n) in per_pipe.iter().enumerate() {
            if p % 2 == 1 {
                let over = n as f64 / (limit_frames + c.shaped_bucket_frames() as f64);
                assert!(
                    over <= 1.0 && over > 0.9,
                    "shaped pipe {p}: {n} frames, limit {limit_frames:.0}"
                );
            } else {
                assert!(
                    (n as f64 / even_mean - 1.0).abs() < 0.02,
                    "unshaped pipe {p}: {n}, mean {even_mean}"
                );
            }
        }
    }

    #[test]
    fn a_log_longer_than_the_bound_is_refused_before_anything_runs() {
        let mut c = cfg(64, Arrivals::Uniform, Profile::Noshape);
        c.packets = MAX_LOGGED + 1;
        let err = measure(&c, Some(&mut Vec::new())).unwrap_err();
        assert!(err.contains("--log"), "{err}");
    }

    #[test]
    fn counts_take_k_and_m() {
        assert_eq!(count("3m"), Ok(3_000_000));
        assert_eq!(count("100k"), Ok(100_000));
        assert_eq!(count("4096"), Ok(4096));
        assert!(count("1g").is_err());
        assert!(count("").is_err());
        assert!(count("m").is_err());
    }

    /// The policy of four pipes under `shape` compiles to the hierarchy the module doc
    /// describes: a shaping class for each odd pipe.
    #[test]
    fn the_policy_has_a_class_per_odd_pipe() {
        let c = cfg(4, Arrivals::Uniform, Profile::Shape);
        let w = Workload::new(&c).unwrap();
        assert_eq!(w.prog.shapers.len(), 2);
        // The port, and per pipe its prio node, 16 leaves and the BE node (shaping nodes
        // are classes, not nodes of the tree).
        assert_eq!(w.prog.nodes.len(), 1 + 4 * 18);
    }
}
