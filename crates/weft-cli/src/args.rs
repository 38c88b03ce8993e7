//! The command line's grammar: `weft`'s subcommands and their flags, as clap derives them,
//! with the help texts that go with them.
//!
//! Invariants: definitions only (no behaviour beyond clap's parsing and its value ranges);
//! what a command does is `main.rs`'s dispatch and the driver modules'.

use super::{rte_sched, run};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use weft_replay::{self as replay, capture};

const ABOUT: &str = "weft: programmable NIC packet scheduling in software.

One hierarchical policy (Loom's restricted DAG: priorities, weighted fair shares, SENIC rate
limits, per-destination shaping) compiled once and enforced by one sans-IO scheduling core.";

const POLICY_HELP: &str = "\
A policy is a YAML file (format: docs/policy.md). Nodes name their parent; scheduling nodes
(fifo, prio, wfq, rr, drr, lstf, edf, senic) order packets, shaping nodes (shape) give them
transmit times, leaves hold per-flow queues, attach points take sub-policies.

Examples:
  weft policy check examples/policies/*.yaml
  weft policy show examples/policies/loom-fig1.yaml
  weft policy show --json examples/policies/loom-fig1.yaml > normalized.json
  weft policy dot examples/policies/loom-fig1.yaml | dot -Tsvg > fig1.svg
  weft policy classify examples/policies/loom-fig1.yaml --packet vm=1,dport=11211,dst=10.0.2.7";

#[derive(Parser)]
#[command(name = "weft", version, about = ABOUT, long_about = ABOUT, propagate_version = true)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Check, show, draw and query policies.
    #[command(subcommand, after_help = POLICY_HELP)]
    Policy(PolicyCommand),
    /// Replay a packet trace through the scheduler in virtual time.
    ///
    /// The trace is CSV with a header: `arrive_ps` and `bytes`, plus any metadata the policy
    /// matches on (tenant, vm, cgroup, tag, sport, dport or its alias app, proto, dscp, src,
    /// dst) and `flow`,
    /// `deadline_ps`, `slack_ps`. Rows must be sorted by `arrive_ps`, at most 2^63 ps (106.7
    /// days: the rest of the 64-bit picosecond clock is headroom); every row gives both, and
    /// an empty metadata cell means the field is absent; `#` starts a comment.
    ///
    /// Or the trace is a packet capture (pcap or pcapng, told by its first bytes; Ethernet,
    /// raw IP or Linux cooked frames): times from the first record, sizes from the original
    /// length (a snap length does not shrink them), and src, dst, proto, dscp, sport and
    /// dport from the headers; tenant (and vm) from the interface a record was captured on,
    /// given with `--tenant` as to `weft run`; records in time order through a reorder
    /// window (a capture of several interfaces is not in order in its file); a file that
    /// ends inside a record replays the records before it, with a warning.
    ///
    /// Writes DIR/departures.csv (depart_ps,id,leaf,flow,bytes), DIR/drops.csv
    /// (arrive_ps,id,leaf,reason; leaf empty for a packet no leaf takes, reason
    /// unclassified) and DIR/summary.json (per leaf and node: packets, bytes, drops by reason,
    /// mean rate over the whole trace and over the row's own span (first arrival to last
    /// frame: its rate while backlogged), queueing delay: percentiles to 3 significant digits,
    /// exact max and mean;
    /// per shaping class its rate and burst and the same figures for the packets that passed
    /// it), DIR/timeseries.csv with DIR/throughput.svg and
    /// DIR/delay.svg (bytes and mean queueing delay per time window for each leaf, or each
    /// child of the root in a policy of over 256 leaves; at most 512 windows, widened as the
    /// trace goes on), DIR/index.html (the tables and charts for a browser), and prints the
    /// summary table.
    ///
    /// On stderr: progress, the files written and notes (e.g. a capture's records sorted back
    /// into time order), which --quiet silences; warnings about the input (a field no packet
    /// carries, rows larger than the MTU, a capture cut short, ...) and errors, which it
    /// never silences. The table (or --json's summary) is the data, on stdout either way.
    #[command(after_long_help = REPLAY_EXAMPLES)]
    Replay {
        /// Policy file.
        #[arg(long)]
        policy: PathBuf,
        /// Trace file: CSV, or a pcap or pcapng capture (read once, from its start to its end:
        /// `-` reads standard input, e.g. `zcat t.csv.gz | weft replay --trace - ...`).
        #[arg(long)]
        trace: PathBuf,
        /// Output directory (created if need be). An earlier replay's outputs there are
        /// replaced; one that would overwrite the trace or the policy is refused.
        #[arg(long, default_value = "weft-replay")]
        out: PathBuf,
        /// Print summary.json to stdout instead of a table.
        #[arg(long)]
        json: bool,
        /// Print no progress and no notes on stderr (the files written, a capture's records
        /// sorted back into time order). Warnings about the input and errors still go to
        /// stderr; the table (or --json's summary) still goes to stdout.
        #[arg(long)]
        quiet: bool,
        /// Progress on stderr (rows read, packets/s) even when stderr is not a terminal.
        #[arg(long, conflicts_with = "quiet")]
        progress: bool,
        /// Scheduling engine: `fast` and `reference` give identical departures; `heads`
        /// ranks only each queue's first packet, gives the same departures on policies
        /// without shaping, shapes like HTB, and refuses (naming the node) the policies it
        /// cannot run (docs/scheduling.md, "The head engine").
        #[arg(long, value_enum, default_value_t = ReplayEngine::Fast)]
        engine: ReplayEngine,
        /// Loom's "currently limited" fast path for nested shaping classes too: a packet
        /// whose class is busy goes straight into the class's queue at admission (by
        /// default only packets of a single, non-nested class do; docs/scheduling.md).
        #[arg(long)]
        limited_fast_path: bool,
        /// Frames the link takes at once: whenever it is free it asks the engine for up to N
        /// packets at that instant and sends them back to back, as a software NIC fills its
        /// transmit ring (1: one frame at a time, the exact schedule; at most 4096).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4096))]
        burst: u16,
        /// A live update at a point of the trace's clock (repeat the flag for more): a
        /// `wfq` child's weight, a `prio` child's priority, a `drr` child's quantum, a
        /// `senic` class's rate (or a `senic` node's: its capacity), a shaping class's rate
        /// or burst, a leaf's limit.packets, limit.bytes, flow_limit.packets,
        /// flow_limit.bytes or outstanding (`none` lifts it). WHEN is a time with its unit
        /// (`250ns`, `500us`, `1.5ms`, `2s`), from the trace's first timestamp for a
        /// capture, else on its `arrive_ps` clock. It applies to packets arriving from then
        /// on; queued ones keep their place. E.g. `--update 1ms:vm2.weight=4 --update
        /// 2ms:dst2-limit.rate=5gbit`.
        #[arg(long, value_name = "WHEN:NAME.FIELD=VALUE")]
        update: Vec<String>,
        /// A capture's tenant: NAME=IFACE; repeatable. Tenant ids follow the order given (1,
        /// 2, ...), as with `weft run`: records captured on the pcapng interface named IFACE
        /// (or, failing a name, numbered IFACE in its section; a pcap's only interface is 0)
        /// carry that tenant and vm, as the software NIC gives frames from IFACE. E.g.
        /// `--tenant a=t1 --tenant b=t2`.
        #[arg(long, value_name = "NAME=IFACE")]
        tenant: Vec<String>,
        /// A capture's records are replayed in time order through a window of this many
        /// records (a min-heap: 112 bytes a record); a record further out of order than the
        /// window replays at the latest time seen, and is counted. A capture of several
        /// interfaces (`dumpcap -i a -i b`) needs thousands; 1 replays records in file order
        /// (at most 2^24).
        #[arg(long, value_name = "RECORDS", default_value_t = 65_536,
              value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
        reorder_window: u32,
        /// The most interfaces a capture may describe, its pcapng sections together (about
        /// 300 bytes of memory each); one with more is refused at the first one over. The
        /// summary lists 64 of them and counts the rest (at most 2^20).
        #[arg(long, value_name = "N",
              default_value_t = capture::DEFAULT_MAX_INTERFACES as u32,
              value_parser = clap::value_parser!(u32)
                  .range(1..=capture::MAX_INTERFACES_CAP as i64))]
        max_interfaces: u32,
        /// The longest row of a CSV trace, bytes (a line, or the lines of a quoted value;
        /// comment lines do not count): a longer row is refused with its line, without
        /// being read whole. A trace's rows are a few hundred bytes (at least 16, at most
        /// 2^30).
        #[arg(long, value_name = "BYTES", default_value_t = replay::DEFAULT_MAX_ROW_BYTES as u32,
              value_parser = clap::value_parser!(u32).range(16..=(1 << 30)))]
        max_trace_row_bytes: u32,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Measure the scheduling engines: enqueue+dequeue throughput and memory.
    ///
    /// Scenarios: Loom Fig. 1 scaled to 4,096 per-destination shaping classes with 1k, 64k
    /// and 1M flows; a flat senic node with 10k classes; an 8-level policy. Every row carries
    /// the reference engine's figure from the same process (`ratio_vs_reference`).
    ///
    /// Columns: the fast engine classifying every packet ("dequeue one, enqueue one" with a
    /// 4,096-packet backlog, `--backlog` to change it: each departure is replaced by one
    /// packet that some leaf accepts, so the tree stays full; `backlog_at_end_min` in the JSON shows it did; packets made
    /// before the clock starts); the reference engine the
    /// same way and the ratio; the fast engine sending bursts of up to 16 packets at one
    /// instant and offered 16 packets at a time (`batch16`: a transmit ring's burst and a
    /// doorbell's batch, whose memory accesses overlap); the fast engine with per-flow queues
    /// (each flow's queue opened once, as Loom's OS gives each flow its own descriptor
    /// queue: no classification or flow lookup per packet), one packet at a time
    /// (`per-flow-q`), and its ratio to the reference driven the same way (`pf ratio`,
    /// `per_flow_queues_ratio_vs_reference`), and in bursts and batches of 16 (`pf-batch16`); heap bytes per idle
    /// flow; engine bytes per shaping class. Throughputs are medians over `--rounds`. The machine's load moves
    /// these figures; docs/scheduling.md has instruction counts that it does not.
    ///
    /// Under the table: the scheduling core's targets (Loom Fig. 1 at 8.13 M packets/s with
    /// 64k flows and 3.25 M with 1M, in its fastest mode; 64 B per idle flow; 32 B per rate
    /// limiter; SENIC's 30 B per class; 5x the reference in every row), each met or not on
    /// this run, and how far 64k flows are from 400 GbE (32.5 M packets/s).
    ///
    /// `weft bench rte-sched` runs instead DPDK rte_sched's benchmark workload through the
    /// fast engine, for comparison with that scheduler (scripts/vs-rte-sched.sh).
    #[command(args_conflicts_with_subcommands = true)]
    Bench {
        #[command(subcommand)]
        workload: Option<BenchWorkload>,
        /// One JSON object per row on stdout, then one with the targets:
        /// `{"targets": [{"target", "measured", "met"}, ...]}` (met is null for a distance).
        #[arg(long)]
        json: bool,
        /// Smaller scenarios (seconds instead of a minute).
        #[arg(long)]
        quick: bool,
        /// Rounds: each round runs every mode and the reference once; the figures are the
        /// medians over the rounds (`packets_per_s_best` in JSON: the best classifying
        /// round), so one slow moment of a shared machine does not set a figure (1 to 100).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Packets kept queued in every run (default: 4,096, or four per flow when the
        /// scenario has fewer than 1,024 flows). A deep backlog measures the engines where
        /// a node holds tens of thousands of entries (e.g. `--only senic --backlog 65536`);
        /// at least 16 and at most 2,000,000 (the packets are made in memory before the
        /// clock starts).
        #[arg(long, value_name = "PACKETS", value_parser = clap::value_parser!(u64).range(16..=2_000_000))]
        backlog: Option<u64>,
        /// Only the scenarios whose name contains this text, in any case (`loom-fig1`,
        /// `65536 flows`, `senic`, `8-level`; the table's first column).
        #[arg(long, value_name = "TEXT")]
        only: Option<String>,
    },
    /// Simulate NIC designs side by side on a scenario (Loom, SENIC, TONIC experiments).
    ///
    /// A scenario (YAML, examples/scenarios/, format in examples/scenarios/README.md) gives
    /// a policy, a host, tenants' applications (bulk, request/response, UDP, TCP) and the NIC
    /// models to compare: sq (policy in software on one core), mq (queue per core, XPS),
    /// qpf (queue per flow), mq-pri / mq-fair (8 DCB classes), tonic (tenant queue pools,
    /// head insertion), senic (schedule and pull), loom (per-flow queues, batched doorbells,
    /// the policy on the NIC). TCP applications cross a network behind the link (`network:`
    /// a switch port with a buffer and ECN marking, link delays, receive cores, a receive
    /// policy; several sending hosts). Deterministic: the same scenario and seed give the
    /// same files.
    ///
    /// Writes OUT/summary.json (per model: jain_min, link_utilization, doorbell_writes_per_s,
    /// dma_reads_per_s; per tenant and application: mean_bps, share, ideal_share, rel_error,
    /// latency_us p50/p90/p99, drops; requests issued/completed/unfinished, or for bulk and
    /// UDP applications packets sent/queued_at_end; interdeparture_us mean/std/p99_abs_dev,
    /// the jitter of an application's departures; for TCP applications tcp: goodput,
    /// retransmissions, timeouts, reordering, rx_delay_us and a sized job's completion; per
    /// model switch and receiver counts), timeseries.csv
    /// (window_start_s,nic,tenant,app,bytes), latency.csv, latency-cdf.csv (every
    /// application's latency distribution: nic,tenant,app,latency_us,fraction), jain.csv,
    /// SVG plots (throughput per tenant, and per application when a tenant has several;
    /// Jain's index; the headline latency per window and its CDF, on a log axis) and
    /// index.html, replacing an earlier report's files in OUT (only those); prints a table
    /// per model. Latency percentiles count every request that arrived (every packet
    /// written, for bulk and UDP applications: write to wire), an unfinished one (a packet
    /// still queued) as its age at the end: `≥` (`p90_at_least`) marks a lower bound.
    ///
    /// With --seeds (`1..10`, `1,2,5`): a run per seed, its report in OUT/seed-N/ (byte for
    /// byte what `--seed N` writes), and OUT/aggregate.json: every numeric metric of the
    /// summaries per model, tenant and application as mean, 95 % confidence interval
    /// (Student t), std, min and max over the seeds; the table shows the headline ones.
    /// A --seeds run removes an earlier one's aggregate.json and seed-N/ reports not run
    /// again, and a single report's files in OUT.
    ///
    /// Examples:
    ///   weft sim examples/scenarios/loom-fig9.yaml
    ///   weft sim examples/scenarios/hierarchy.yaml --nic mq,tonic,loom --seed 7 --out h
    ///   weft sim examples/scenarios/hierarchy.yaml --seeds 1..10 --out h   (statistics)
    ///   weft sim --bench                      (simulated packets per second, Fig. 9, loom)
    #[command(verbatim_doc_comment)]
    Sim {
        /// Scenario file (YAML).
        #[arg(required_unless_present = "bench")]
        scenario: Option<PathBuf>,
        /// NIC models to run, comma separated (default: the scenario's `nics`).
        #[arg(long, value_name = "MODELS", value_delimiter = ',')]
        nic: Vec<String>,
        /// Seed of every random stream (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Run once per seed: a range, both ends included (`1..10`), a list (`1,2,5`) or
        /// both (`1..3,7`). Each seed's report goes to OUT/seed-N/, the same files `--seed
        /// N` writes; OUT/aggregate.json has every summary metric per model, tenant and
        /// application over the seeds: mean, 95 % confidence interval (Student t: mean ±
        /// t(0.975, n-1) × s/√n), std, min and max. Prints their table (--json:
        /// aggregate.json) and a line per seed on stderr. At most 1000 seeds.
        #[arg(long, value_name = "SEEDS", conflicts_with = "seed")]
        seeds: Option<String>,
        /// Simulate only this long, e.g. `50ms` (later schedule steps do not happen: a
        /// warning names them).
        #[arg(long, value_name = "TIME")]
        duration: Option<String>,
        /// Use this policy file instead of the scenario's.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Override the policy's link rate, e.g. `40gbit`.
        #[arg(long, value_name = "RATE")]
        link: Option<String>,
        /// Set a NIC model parameter, e.g. `loom.batch=256kb`, `sq.cpu_per_packet=300ns`,
        /// `tonic.queues=32`, `hw.ring=8`, `mq.qdisc=fifo`, `senic.max_pulls=2`; repeatable.
        #[arg(long, value_name = "MODEL.KEY=VALUE")]
        set: Vec<String>,
        /// Output directory.
        #[arg(long, default_value = "weft-sim")]
        out: PathBuf,
        /// Print summary.json to stdout instead of the table (with --seeds:
        /// aggregate.json).
        #[arg(long)]
        json: bool,
        /// No progress bar or notes on stderr.
        #[arg(long)]
        quiet: bool,
        /// Progress on stderr (simulated time done of the total, the model, its events, wall
        /// time) even when stderr is not a terminal: a line at most once a second.
        #[arg(long, conflicts_with = "quiet")]
        progress: bool,
        /// The most the applications may offer together, in multiples of the link rate
        /// (default: the scenario's `limits: {max_offered_load}`, else 64); a scenario that
        /// offers more is refused when loading (the simulator's work grows with it).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_offered_load: Option<u64>,
        /// Event budget of each model's run (default: the scenario's `limits:
        /// {max_events}`, else 2^28): a run that reaches it stops, and weft exits 2.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        max_events: Option<u64>,
        /// Measure simulated packets per wall-clock second (default: Loom Fig. 9 with
        /// `loom`; best of three runs) instead of writing a report.
        #[arg(long)]
        bench: bool,
    },
    /// Run the papers' headline experiment: Loom Fig. 9/10 and a weighted priority hierarchy
    /// for sq, mq, qpf, tonic and loom; write ./weft-report/ and print, per NIC model,
    /// Jain's index (lowest window), the latency app's p90 and the link utilization.
    /// weft-report/index.html: that table, what to look for beside what the paper found,
    /// and links to each scenario's report, charts and CSV/JSON files.
    ///
    /// Example: weft demo && xdg-open weft-report/index.html
    Demo {
        /// Output directory.
        #[arg(long, default_value = "weft-report")]
        out: PathBuf,
        /// No progress bar or notes on stderr.
        #[arg(long)]
        quiet: bool,
    },
    #[command(flatten)]
    Nic(run::NicCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    ///
    /// Example: weft completions bash > /etc/bash_completion.d/weft
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Args, Clone)]
pub(super) struct LoadArgs {
    /// Refuse policies deeper than this many levels (default: the file's `limits`, else 16;
    /// at least 1, as in a file).
    #[arg(long, value_name = "LEVELS", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_depth: Option<u32>,
    /// Refuse policies with more nodes than this (default: the file's `limits`, else 2097152;
    /// at least 1).
    #[arg(long, value_name = "NODES", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) max_nodes: Option<u32>,
    /// Fill attachment point POINT with the sub-policy FILE (overrides its `policy:` key).
    #[arg(long, value_name = "POINT=FILE")]
    pub(super) attach: Vec<String>,
    /// Override the link rate, e.g. `40gbit`.
    #[arg(long, value_name = "RATE")]
    pub(super) link: Option<String>,
}

/// `weft bench`'s other workloads.
#[derive(Subcommand)]
pub(super) enum BenchWorkload {
    /// DPDK rte_sched's benchmark workload through the fast engine: one 1 Gbit/s port,
    /// P pipes of 16 queues (12 strict-priority classes, a best-effort class of four queues
    /// weighted 1:2:4:8), a constant backlog, bursts dequeued and as many packets enqueued.
    ///
    /// The same workload, arrival stream (splitmix64; `seq_checksum`) and departure log as
    /// the peer harness's sched_bench (see scripts/vs-rte-sched.sh, which runs both).
    /// Packets per second by the thread's CPU time over the timed loop, after the warm-up.
    /// Prints one line (`--json`: one JSON object, the harness's fields) on stdout; the
    /// policy it compiles is `--print-policy`'s.
    ///
    /// Examples:
    ///   weft bench rte-sched --pipes 4096 --arrivals uniform --profile noshape --packets 3m
    ///   weft bench rte-sched --pipes 64 --arrivals pipe --profile shape --log d.bin --json
    ///   weft bench rte-sched --pipes 64 --drain 64 --log drain.bin
    #[command(verbatim_doc_comment)]
    RteSched(RteSchedArgs),
}

/// `weft bench rte-sched`'s options (the harness's names and defaults, but `--seed`).
#[derive(Args)]
pub(super) struct RteSchedArgs {
    /// Pipes (16 queues each), 1 to 65536.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(super) pipes: u32,
    /// Where new packets go: `uniform` (the stream's next queue) or `pipe` (the pipe of the
    /// packet that left).
    #[arg(long, value_enum, default_value_t = rte_sched::Arrivals::Uniform)]
    pub(super) arrivals: rte_sched::Arrivals,
    /// `noshape` (no pipe limited) or `shape` (odd pipes at R/(2P)).
    #[arg(long, value_enum, default_value_t = rte_sched::Profile::Noshape)]
    pub(super) profile: rte_sched::Profile,
    /// Departures timed (k and m suffixes: 3m).
    #[arg(long, default_value = "10m", value_parser = rte_sched::count)]
    pub(super) packets: u64,
    /// Departures before the clock starts.
    #[arg(long, default_value = "1m", value_parser = rte_sched::count)]
    pub(super) warmup: u64,
    /// Packets kept queued (default 4096, or one a pipe with `pipe` arrivals when there
    /// are more pipes).
    #[arg(long, value_parser = rte_sched::count)]
    pub(super) backlog: Option<u64>,
    /// Most packets dequeued at once (1 to 256); as many are then enqueued.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(super) burst: u32,
    /// The arrival stream's seed.
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// The engine: `fast` (the PIFO tree) or `heads` (ranks only each child's first
    /// entry; the same departures on this workload's unshaped profile).
    #[arg(long, value_enum, default_value_t = rte_sched::Scheduler::Fast)]
    pub(super) engine: rte_sched::Scheduler,
    /// Write the timed departures to FILE: little-endian u32 pairs (queue, departures
    /// before the packet was enqueued), the harness's check.py format (at most 100m
    /// departures: the log is kept in memory).
    #[arg(long, value_name = "FILE")]
    pub(super) log: Option<PathBuf>,
    /// Instead of the loop: fill every queue with K packets (1 to 64) and drain them (needs
    /// `--log`).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=64), requires = "log")]
    pub(super) drain: Option<u32>,
    /// One JSON object on stdout instead of a line of text.
    #[arg(long)]
    pub(super) json: bool,
    /// Print the policy (YAML) that the workload compiles, and nothing else.
    #[arg(long)]
    pub(super) print_policy: bool,
}

#[derive(Subcommand)]
pub(super) enum PolicyCommand {
    /// Validate policy files: one summary line per file on stdout, diagnostics on stderr.
    ///
    /// Exits 0 when every file is valid, 2 otherwise.
    Check {
        /// Policy files (`-`: standard input; every `weft policy` command takes it).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        load: LoadArgs,
        /// Print diagnostics as one line each (`file:line:col: error[rule]: message (node
        /// `name`); help: hint`) instead of annotated source.
        #[arg(long, conflicts_with = "json")]
        plain: bool,
        /// One JSON object per file on stdout instead (`file`, `valid`, `summary` when valid,
        /// `diagnostics`: `rule`, `message`, `node`, `at` {file, line, column}, `labels`,
        /// `help`), for editors and CI; nothing on stderr. The exit code is the same.
        #[arg(long)]
        json: bool,
    },
    /// Print the compiled policy as a tree, or as normalized JSON (itself a valid policy).
    Show {
        /// Policy file (`-`: standard input).
        file: PathBuf,
        /// Stable, normalized JSON instead of the tree.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Print the policy as a Graphviz graph (scheduling nodes boxes, shaping nodes dashed
    /// hexagons, leaves ellipses).
    Dot {
        /// Policy file (`-`: standard input).
        file: PathBuf,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Show which leaf and shaping classes packets are classified into.
    ///
    /// Fields: tenant, vm, cgroup, tag, sport, dport (alias app), proto (tcp, udp, icmp,
    /// icmpv6, sctp or a number), dscp, src, dst (IPv4 or IPv6 addresses).
    Classify {
        /// Policy file (`-`: standard input).
        file: PathBuf,
        /// A packet as FIELD=VALUE pairs, e.g. `vm=1,dport=11211,dst=10.0.2.7`; repeatable.
        #[arg(long, short, required = true, value_name = "FIELDS")]
        packet: Vec<String>,
        /// JSON lines instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
}

/// `weft replay --help`'s examples, one command a line (clap would wrap a long paragraph in
/// the middle of a command).
const REPLAY_EXAMPLES: &str = "Examples:
  weft replay --policy examples/policies/senic-fig4.yaml \\
      --trace examples/traces/senic-fig4.csv
  weft replay --policy examples/policies/loom-fig11.yaml \\
      --trace examples/traces/loom-fig11.csv --update 500us:dst2-limit.rate=5gbit
  weft replay --policy examples/policies/two-tenants.yaml \\
      --trace examples/traces/two-tenants.pcapng --tenant a=ta --tenant b=tb";

/// `weft replay --engine`: the engine that replays the trace ([`replay::EngineKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplayEngine {
    /// The fast engine (arenas, heap PIFOs).
    Fast,
    /// The reference engine (per-packet entries at every level).
    Reference,
    /// The head engine (ranks only each queue's first packet; the same departures without
    /// shaping, its own shaping semantics, and it refuses what it cannot run).
    Heads,
}

impl From<ReplayEngine> for replay::EngineKind {
    fn from(e: ReplayEngine) -> replay::EngineKind {
        match e {
            ReplayEngine::Fast => replay::EngineKind::Fast,
            ReplayEngine::Reference => replay::EngineKind::Reference,
            ReplayEngine::Heads => replay::EngineKind::Heads,
        }
    }
}
