//! `weft`: the command line of weft, a programmable NIC packet scheduler in software.
//!
//! Data goes to stdout ([`out`]), diagnostics and progress to stderr. Exit codes: 0
//! success, 2 usage or input errors (an invalid policy, a malformed packet), 1 anything
//! else, 141 when stdout's reader has gone (`weft … | head`).

mod bench;
mod delays;
mod diagnostics;
mod out;
mod replay;
mod rte_sched;
mod run;
mod sim;
mod timeline;
mod updates;

/// mimalloc (compiling a 100,000-leaf policy allocates and frees millions of small YAML
/// nodes; it halves the allocator's share of compile time), counting live bytes for
/// `weft bench`'s memory figures.
#[global_allocator]
static GLOBAL: bench::CountingAlloc = bench::CountingAlloc;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::json;
use weft_cli::capture;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{self, show, Classification, LoadOptions, PolicyError, Program};
use weft_core::units::{self, format_rate, format_size};

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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        #[arg(long, value_enum, default_value_t = replay::EngineKind::Fast)]
        engine: replay::EngineKind,
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
    /// a policy, a host, tenants' applications (bulk, request/response, UDP) and the NIC
    /// models to compare: sq (policy in software on one core), mq (queue per core, XPS),
    /// qpf (queue per flow), mq-pri / mq-fair (8 DCB classes), tonic (tenant queue pools,
    /// head insertion), senic (schedule and pull), loom (per-flow queues, batched doorbells,
    /// the policy on the NIC). Deterministic: the same scenario and seed give the same files.
    ///
    /// Writes OUT/summary.json (per model: jain_min, link_utilization, doorbell_writes_per_s,
    /// dma_reads_per_s; per tenant and application: mean_bps, share, ideal_share, rel_error,
    /// latency_us p50/p90/p99, drops; requests issued/completed/unfinished, or for bulk and
    /// UDP applications packets sent/queued_at_end; interdeparture_us mean/std/p99_abs_dev,
    /// the jitter of an application's departures), timeseries.csv
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
struct LoadArgs {
    /// Refuse policies deeper than this many levels (default: the file's `limits`, else 16;
    /// at least 1, as in a file).
    #[arg(long, value_name = "LEVELS", value_parser = clap::value_parser!(u32).range(1..))]
    max_depth: Option<u32>,
    /// Refuse policies with more nodes than this (default: the file's `limits`, else 2097152;
    /// at least 1).
    #[arg(long, value_name = "NODES", value_parser = clap::value_parser!(u32).range(1..))]
    max_nodes: Option<u32>,
    /// Fill attachment point POINT with the sub-policy FILE (overrides its `policy:` key).
    #[arg(long, value_name = "POINT=FILE")]
    attach: Vec<String>,
    /// Override the link rate, e.g. `40gbit`.
    #[arg(long, value_name = "RATE")]
    link: Option<String>,
}

/// `weft bench`'s other workloads.
#[derive(Subcommand)]
enum BenchWorkload {
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
struct RteSchedArgs {
    /// Pipes (16 queues each), 1 to 65536.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pipes: u32,
    /// Where new packets go: `uniform` (the stream's next queue) or `pipe` (the pipe of the
    /// packet that left).
    #[arg(long, value_enum, default_value_t = rte_sched::Arrivals::Uniform)]
    arrivals: rte_sched::Arrivals,
    /// `noshape` (no pipe limited) or `shape` (odd pipes at R/(2P)).
    #[arg(long, value_enum, default_value_t = rte_sched::Profile::Noshape)]
    profile: rte_sched::Profile,
    /// Departures timed (k and m suffixes: 3m).
    #[arg(long, default_value = "10m", value_parser = rte_sched::count)]
    packets: u64,
    /// Departures before the clock starts.
    #[arg(long, default_value = "1m", value_parser = rte_sched::count)]
    warmup: u64,
    /// Packets kept queued (default 4096, or one a pipe with `pipe` arrivals when there
    /// are more pipes).
    #[arg(long, value_parser = rte_sched::count)]
    backlog: Option<u64>,
    /// Most packets dequeued at once (1 to 256); as many are then enqueued.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=256))]
    burst: u32,
    /// The arrival stream's seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The engine: `fast` (the PIFO tree) or `heads` (ranks only each child's first
    /// entry; the same departures on this workload's unshaped profile).
    #[arg(long, value_enum, default_value_t = rte_sched::Scheduler::Fast)]
    engine: rte_sched::Scheduler,
    /// Write the timed departures to FILE: little-endian u32 pairs (queue, departures
    /// before the packet was enqueued), the harness's check.py format (at most 100m
    /// departures: the log is kept in memory).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Instead of the loop: fill every queue with K packets (1 to 64) and drain them (needs
    /// `--log`).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=64), requires = "log")]
    drain: Option<u32>,
    /// One JSON object on stdout instead of a line of text.
    #[arg(long)]
    json: bool,
    /// Print the policy (YAML) that the workload compiles, and nothing else.
    #[arg(long)]
    print_policy: bool,
}

#[derive(Subcommand)]
enum PolicyCommand {
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

/// A failure with its exit code; the message has already been printed or is printed by main.
struct Failure {
    code: u8,
    message: Option<String>,
}

/// The drivers' modules (`sim`, `run`) fail with `(exit code, message)`.
impl From<(u8, String)> for Failure {
    fn from((code, message): (u8, String)) -> Failure {
        Failure {
            code,
            message: Some(message),
        }
    }
}

/// A replay's failure: its input (exit 2) or its outputs (exit 1).
impl From<replay::Error> for Failure {
    fn from(e: replay::Error) -> Failure {
        Failure {
            code: e.code(),
            message: Some(e.message().to_string()),
        }
    }
}

impl Failure {
    fn usage(msg: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: Some(msg.into()),
        }
    }
}

fn options(args: &LoadArgs) -> Result<LoadOptions, Failure> {
    let mut o = LoadOptions {
        max_depth: args.max_depth,
        max_nodes: args.max_nodes,
        ..LoadOptions::default()
    };
    for a in &args.attach {
        let (p, f) = a
            .split_once('=')
            .ok_or_else(|| Failure::usage(format!("--attach `{a}`: expected POINT=FILE")))?;
        if f == "-" {
            // Only the policy itself may come from standard input.
            return Err(Failure::usage(format!(
                "--attach `{a}`: a sub-policy is read from a file, not from standard input"
            )));
        }
        o.attach.push((p.to_string(), PathBuf::from(f)));
    }
    if let Some(r) = &args.link {
        o.link_rate_bps =
            Some(units::parse_rate(r).map_err(|e| Failure::usage(format!("--link: {e}")))?);
    }
    Ok(o)
}

/// Loads the policy in `file`, or from standard input when `file` is `-` (named `<stdin>`
/// in diagnostics; its `policy:` files relative to the current directory).
fn load_policy(file: &std::path::Path, opts: &LoadOptions) -> Result<Program, PolicyError> {
    if file.as_os_str() != "-" {
        return policy::load(file, opts);
    }
    // At most one byte past the limit is read: `yes | weft policy check -` ends at once.
    let limit = policy::MAX_POLICY_FILE_BYTES;
    let mut bytes = Vec::new();
    let read = std::io::Read::read_to_end(
        &mut std::io::Read::take(std::io::stdin().lock(), limit + 1),
        &mut bytes,
    )
    .and_then(|n| {
        if n as u64 > limit {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("standard input holds more than {limit} bytes, the most a policy may have"),
            ))
        } else {
            Ok(n)
        }
    });
    policy::load_bytes(std::path::Path::new("<stdin>"), read.map(|_| bytes), opts)
}

/// Loads a policy for a command: its errors (exit 2) or its warnings on stderr.
fn load(file: &std::path::Path, args: &LoadArgs) -> Result<Program, Failure> {
    let opts = options(args)?;
    let p = load_policy(file, &opts).map_err(|e| {
        diagnostics::report(&e, false);
        Failure {
            code: 2,
            message: None,
        }
    })?;
    diagnostics::warn(&p, false);
    Ok(p)
}

fn check(files: &[PathBuf], args: &LoadArgs, plain: bool, json: bool) -> Result<(), Failure> {
    let opts = options(args)?;
    // Standard input reads once: a second `-` would be checked as an empty file.
    let stdin = files.iter().filter(|f| f.as_os_str() == "-").count();
    if stdin > 1 {
        return Err(Failure::usage(format!(
            "`-` (standard input) is given {stdin} times; it can be read once"
        )));
    }
    let mut failed = 0;
    let mut out = std::io::stdout().lock();
    for f in files {
        let loaded = load_policy(f, &opts);
        if json {
            let v = match &loaded {
                Ok(p) => json!({
                    "file": f.display().to_string(),
                    "valid": true,
                    "summary": show::summary(p),
                    "diagnostics": [],
                    "warnings": diagnostics::warnings_json(p),
                }),
                Err(e) => json!({
                    "file": f.display().to_string(),
                    "valid": false,
                    "diagnostics": diagnostics::to_json(e),
                }),
            };
            failed += usize::from(loaded.is_err());
            writeln!(out, "{v}").map_err(out::failed)?;
            continue;
        }
        match loaded {
            Ok(p) => {
                writeln!(out, "{}: ok: {}", f.display(), show::summary(&p)).map_err(out::failed)?;
                if p.warnings.is_some() {
                    out.flush().map_err(out::failed)?;
                    diagnostics::warn(&p, plain);
                }
            }
            Err(e) => {
                failed += 1;
                writeln!(out, "{}: invalid: {}", f.display(), first_rules(f, &e))
                    .map_err(out::failed)?;
                out.flush().map_err(out::failed)?;
                diagnostics::report(&e, plain);
            }
        }
    }
    if failed > 0 {
        if files.len() > 1 && !json {
            out::errln!("{failed} of {} policies invalid", files.len());
        }
        return Err(Failure {
            code: 2,
            message: None,
        });
    }
    Ok(())
}

/// `rule (line N)` per diagnostic, or `rule (other.yaml line N)` inside a sub-policy.
fn first_rules(checked: &std::path::Path, e: &PolicyError) -> String {
    let shown = checked.display().to_string();
    let mut v: Vec<String> = e
        .locations()
        .iter()
        .map(|(r, file, l)| {
            if *file == shown {
                format!("{r} (line {l})")
            } else {
                format!("{r} ({file} line {l})")
            }
        })
        .collect();
    v.dedup();
    let n = v.len();
    v.truncate(5);
    let mut s = v.join(", ");
    if n > 5 {
        s += &format!(" and {} more", n - 5);
    }
    s
}

fn classify(p: &Program, packets: &[String], json_out: bool) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    for spec in packets {
        let pkt: PacketMeta = spec
            .parse()
            .map_err(|e| Failure::usage(format!("--packet `{spec}`: {e}")))?;
        let result = p.classify(&pkt);
        debug_assert_eq!(
            result,
            p.classify_reference(&pkt),
            "twins disagree on {pkt}"
        );
        match result {
            Classification::Leaf { node, shaping, .. } => {
                let n = &p.nodes[node as usize];
                let shaping: Vec<_> = shaping
                    .as_slice()
                    .iter()
                    .map(|&s| &p.shapers[s as usize])
                    .collect();
                if json_out {
                    let v = json!({
                        "packet": pkt.to_string(),
                        "leaf": n.name,
                        "path": p.path(node),
                        "shaping": shaping.iter().map(|s| json!({
                            "name": s.name, "rate_bps": s.rate_bps, "burst_bytes": s.burst_bytes,
                        })).collect::<Vec<_>>(),
                    });
                    writeln!(out, "{v}").map_err(out::failed)?;
                } else {
                    writeln!(out, "packet {pkt}").map_err(out::failed)?;
                    writeln!(
                        out,
                        "  leaf     {}  (path {})",
                        n.name,
                        p.path(node).join(" > ")
                    )
                    .map_err(out::failed)?;
                    if shaping.is_empty() {
                        writeln!(out, "  shaping  none").map_err(out::failed)?;
                    }
                    for s in shaping {
                        writeln!(
                            out,
                            "  shaping  {}  rate {} burst {}",
                            s.name,
                            format_rate(s.rate_bps),
                            format_size(s.burst_bytes)
                        )
                        .map_err(out::failed)?;
                    }
                }
            }
            Classification::Unclassified { at } => {
                let name = &p.nodes[at as usize].name;
                if json_out {
                    writeln!(
                        out,
                        "{}",
                        json!({"packet": pkt.to_string(), "leaf": null, "unclassified_at": name})
                    )
                    .map_err(out::failed)?;
                } else {
                    writeln!(out, "packet {pkt}").map_err(out::failed)?;
                    writeln!(
                        out,
                        "  unclassified: no child of `{name}` matches; the packet would be dropped (reason: unclassified)"
                    ).map_err(out::failed)?;
                }
            }
        }
    }
    Ok(())
}

/// A span of picoseconds in the largest unit it reaches, to 3 decimals: `1.950 ms`,
/// `1.859 us`, `640 ps`.
fn span_text(ps: u64) -> String {
    for (unit, scale) in [("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)] {
        // (999.9996 us reads 1.000 ms, not 1000.000 us.)
        if ps as f64 >= scale * 0.9995 {
            return format!("{:.3} {unit}", ps as f64 / scale);
        }
    }
    format!("{ps} ps")
}

/// What the rate columns of a replay's tables are measured over: `mean` over the whole span
/// (`span_ps`, the drain of every queue included), `active` over each row's own span.
fn rates_note(span_ps: &serde_json::Value) -> String {
    format!(
        "mean Mbit/s: over the whole {}, the drain of every queue included; active Mbit/s:\n\
         over each row's own span, from its first packet's arrival to the end of its last frame",
        span_text(span_ps.as_u64().unwrap_or(0))
    )
}

/// A shaping class's limit in Mbit/s, to a tenth (`10,000.0`); a limit below 0.1 Mbit/s
/// (which would read 0.0) with its own unit (`50kbit/s`, `1bit/s`).
fn limit_mbit(bps: u64) -> String {
    let m = bps as f64 / 1e6;
    if m < 0.1 {
        format!("{}/s", format_rate(bps))
    } else {
        out::number(m, 1)
    }
}

/// A queueing-delay figure (ps) in microseconds, or `-` without packets.
fn delay_us(d: Option<&delays::Summary>, q: fn(&delays::Summary) -> u64) -> String {
    d.map_or("-".to_string(), |d| out::number(q(d) as f64 / 1e6, 3))
}

/// The rows of a summary table (leaves or shaping classes) it shows, and what it leaves out
/// (`summary.json` has every row).
struct Shown<'a, T> {
    /// In policy order.
    rows: Vec<&'a (String, T)>,
    /// Rows left out that saw no packet and no drop.
    idle: usize,
    /// Busy rows left out: quieter than the `MAX_ROWS` shown.
    quieter: usize,
}

/// Rows of a summary table worth showing: all of them in a policy of at most 32
/// (`ALL_ROWS`), else those that saw a packet or a drop (`offered`: packets sent and
/// dropped), and of those at most 64 (`MAX_ROWS`): the busiest (ties: the first in the
/// policy), shown in policy order.
fn shown_rows<T>(rows: &[(String, T)], offered: impl Fn(&T) -> u64) -> Shown<'_, T> {
    /// Up to this many rows, idle ones are shown too (they say something in a small policy).
    const ALL_ROWS: usize = 32;
    /// At most this many busy rows: a table of 10,000 SENIC classes is for `summary.json`.
    const MAX_ROWS: usize = 64;
    let mut busy: Vec<(usize, &(String, T))> = rows
        .iter()
        .enumerate()
        .filter(|(_, (_, v))| rows.len() <= ALL_ROWS || offered(v) > 0)
        .collect();
    let idle = rows.len() - busy.len();
    let quieter = busy.len().saturating_sub(MAX_ROWS);
    if quieter > 0 {
        busy.sort_by_key(|&(i, (_, v))| (std::cmp::Reverse(offered(v)), i));
        busy.truncate(MAX_ROWS);
        busy.sort_by_key(|&(i, _)| i);
    }
    Shown {
        rows: busy.into_iter().map(|(_, r)| r).collect(),
        idle,
        quieter,
    }
}

impl<T> Shown<'_, T> {
    /// What the table leaves out, e.g. "38 leaves without packets or drops" or "9932 leaves
    /// with no more packets sent and dropped than the 64 shown"; `None` if nothing.
    /// `what`: the rows' plural noun; `idle`: what the idle ones lack.
    fn left_out(&self, what: &str, idle: &str) -> Option<String> {
        let mut parts = Vec::new();
        if self.idle > 0 {
            parts.push(format!("{} {what} {idle}", self.idle));
        }
        if self.quieter > 0 {
            parts.push(format!(
                "{} {what} with no more packets sent and dropped than the {} shown",
                self.quieter,
                self.rows.len()
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A capture interface of the summary (`capture_interfaces`): its name, or `interface N`.
fn interface_name(i: &serde_json::Value) -> String {
    i["name"]
        .as_str()
        .map_or(format!("interface {}", i["index"]), String::from)
}

/// A capture interface's tenant id and name, if `--tenant` gave it one.
fn interface_tenant(i: &serde_json::Value) -> Option<(u64, &str)> {
    Some((i["tenant"].as_u64()?, i["tenant_name"].as_str()?))
}

/// The replay summary as a table: one row per leaf, then one per shaping class (in a large
/// policy, only the busiest: [`shown_rows`]).
fn print_summary(summary: &replay::ReplaySummary) -> Result<(), Failure> {
    let s = &summary.head;
    // Drops by reason, the nonzero ones: "3 dropped (unclassified 2, leaf_packets 1)".
    let reasons: Vec<String> = s["drops"]
        .as_object()
        .map(|d| {
            d.iter()
                .filter_map(|(r, n)| n.as_u64().filter(|&n| n > 0).map(|n| format!("{r} {n}")))
                .collect()
        })
        .unwrap_or_default();
    let why = if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join(", "))
    };
    // Packets the clock ran out on, when there are any (packets = sent + dropped + held).
    let held = match s["held_at_end"].as_u64().unwrap_or(0) {
        0 => String::new(),
        n => format!(", {n} held at the end"),
    };
    // The span the mean rates are over: the first arrival to the end of the last frame (not
    // `end_ps`, a time on the trace's clock: a trace may start at 1 s).
    let span = match s["packets"].as_u64().unwrap_or(0) {
        0 => String::new(),
        _ => format!(
            ", {} from the first arrival",
            span_text(s["span_ps"].as_u64().unwrap_or(0))
        ),
    };
    let n = |v: &serde_json::Value| v.as_u64().map_or("-".to_string(), out::count);
    out::outln!(
        "{} packets, {} sent, {} dropped{why}{held}{span}",
        n(&s["packets"]),
        n(&s["sent"]),
        n(&s["dropped"]),
    )?;
    // A capture's interfaces: "capture: ta (tenant 1, a): 1100 records, tb ...".
    if let Some(ifaces) = s["capture_interfaces"].as_array() {
        let mut list: Vec<String> = ifaces
            .iter()
            .map(|i| {
                let tenant = interface_tenant(i)
                    .map_or(String::new(), |(t, n)| format!(" (tenant {t}, {n})"));
                format!("{}{tenant}: {} records", interface_name(i), i["records"])
            })
            .collect();
        // The interfaces the summary does not list (see `capture::listed`).
        let more = &s["capture_interfaces_unlisted"];
        if let Some(n) = more["interfaces"].as_u64().filter(|&n| n > 0) {
            list.push(format!(
                "and {n} more interfaces: {} records",
                more["records"]
            ));
        }
        out::outln!("capture: {}", list.join(", "))?;
    }
    out::outln!(
        "{:<24} {:>10} {:>14} {:>12} {:>13} {:>8} {:>12} {:>12}",
        "leaf",
        "packets",
        "bytes",
        "mean Mbit/s",
        "active Mbit/s",
        "drops",
        "p50 delay us",
        "p99 delay us"
    )?;
    let leaves = shown_rows(&summary.leaves, |v| v.packets + v.dropped);
    for (name, v) in &leaves.rows {
        let d = v.queueing_delay_ps.as_ref();
        out::outln!(
            "{:<24} {:>10} {:>14} {:>12} {:>13} {:>8} {:>12} {:>12}",
            name,
            out::count(v.packets),
            out::count(v.bytes),
            out::number(v.mean_bps as f64 / 1e6, 1),
            out::number(v.active_bps as f64 / 1e6, 1),
            out::count(v.dropped),
            delay_us(d, |d| d.p50),
            delay_us(d, |d| d.p99)
        )?;
    }
    if let Some(out) = leaves.left_out("leaves", "without packets or drops") {
        out::outln!("(not shown: {out}; summary.json has every leaf)")?;
    }
    let shapers = shown_rows(&summary.shapers, |v| v.packets);
    if !shapers.rows.is_empty() {
        out::outln!(
            "{:<24} {:>10} {:>14} {:>12} {:>13} {:>12} {:>12} {:>12}",
            "shaping class",
            "packets",
            "bytes",
            "mean Mbit/s",
            "active Mbit/s",
            "limit Mbit/s",
            "p50 delay us",
            "p99 delay us"
        )?;
        let mut updated = false;
        for (name, v) in &shapers.rows {
            // The limit at the end, marked when `--update` changed it.
            let (limit, mark) = match v.rate_bps_at_end {
                Some(r) => {
                    updated = true;
                    (r, "*")
                }
                None => (v.rate_bps, " "),
            };
            let d = v.queueing_delay_ps.as_ref();
            out::outln!(
                "{:<24} {:>10} {:>14} {:>12} {:>13} {:>11}{mark} {:>12} {:>12}",
                name,
                out::count(v.packets),
                out::count(v.bytes),
                out::number(v.mean_bps as f64 / 1e6, 1),
                out::number(v.active_bps as f64 / 1e6, 1),
                limit_mbit(limit),
                delay_us(d, |d| d.p50),
                delay_us(d, |d| d.p99)
            )?;
        }
        if updated {
            out::outln!("(* the limit at the end, changed by --update; summary.json: rate_bps is the policy's)")?;
        }
    }
    if let Some(out) = shapers.left_out("shaping classes", "without packets") {
        out::outln!("(not shown: {out}; summary.json has every one)")?;
    }
    if s["sent"].as_u64().unwrap_or(0) > 0 {
        out::outln!("({})", rates_note(&s["span_ps"]))?;
    }
    Ok(())
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

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Sim {
            scenario,
            nic,
            seed,
            seeds,
            duration,
            policy,
            link,
            set,
            out,
            json: j,
            quiet,
            progress,
            max_offered_load,
            max_events,
            bench,
        } => {
            let r = if bench {
                sim::bench(scenario.as_deref(), &nic, j)
            } else {
                sim::sim(sim::SimArgs {
                    scenario: scenario.unwrap_or_default(),
                    nics: nic,
                    seed,
                    seeds,
                    duration,
                    policy,
                    link,
                    set,
                    out,
                    json: j,
                    quiet,
                    progress,
                    max_offered_load,
                    max_events,
                })
            };
            r.map_err(Failure::from)
        }
        Command::Demo { out, quiet } => sim::demo(&out, quiet).map_err(Failure::from),
        Command::Nic(c) => run::main(c).map_err(Failure::from),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "weft", &mut script);
            out::print(&String::from_utf8_lossy(&script))?;
            Ok(())
        }
        Command::Bench {
            workload: Some(BenchWorkload::RteSched(a)),
            ..
        } => rte_sched_bench(a),
        Command::Bench {
            workload: None,
            json: j,
            quick,
            rounds,
            backlog,
            only,
        } => {
            let rows = bench::run(quick, rounds as usize, true, backlog, only.as_deref()).map_err(
                |names| {
                    Failure::usage(format!(
                        "--only `{}`: no scenario's name contains it; the scenarios{}: {}",
                        only.as_deref().unwrap_or_default(),
                        if quick { " with --quick" } else { "" },
                        names.join("; ")
                    ))
                },
            )?;
            if j {
                for r in &rows {
                    out::outln!("{r}")?;
                }
                out::outln!("{}", bench::targets_json(&rows))?;
            } else {
                bench::print_table(&rows)?;
                bench::print_targets(&rows)?;
            }
            Ok(())
        }
        Command::Replay {
            policy: file,
            trace,
            out,
            json: j,
            quiet,
            progress,
            engine,
            limited_fast_path,
            burst,
            update,
            tenant,
            reorder_window,
            max_interfaces,
            max_trace_row_bytes,
            load: l,
        } => {
            if file == std::path::Path::new("-") && replay::is_stdin(&trace) {
                return Err(Failure::usage(
                    "--policy - and --trace -: standard input can give only one of them",
                ));
            }
            let p = std::sync::Arc::new(load(&file, &l)?);
            let updates = updates::parse_all(&p, &update).map_err(Failure::usage)?;
            let tenants = tenant_pairs(&tenant).map_err(Failure::usage)?;
            let progress =
                progress || (!quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()));
            let opts = replay::Options {
                engine,
                progress,
                quiet,
                // A replay streams: flows are forgotten once they hold nothing, so memory
                // follows the packets queued, not the trace's distinct flows (exact: see
                // `forget_idle_flows`; the summary reports no per-flow counters).
                engine_options: weft_core::sched::EngineOptions {
                    limited_fast_path,
                    forget_idle_flows: true,
                },
                burst: burst.into(),
                updates,
                tenants,
                reorder_window: reorder_window as usize,
                max_interfaces: max_interfaces as usize,
                max_row_bytes: max_trace_row_bytes as usize,
                inputs: std::iter::once(file.clone())
                    .chain(options(&l)?.attach.into_iter().map(|(_, f)| f))
                    .collect(),
            };
            let summary = replay::replay(p, &trace, &out, opts)?;
            if let Some(held) = summary.head["held_at_end"].as_u64().filter(|&h| h > 0) {
                out::errln!(
                    "warning: {held} packets were still queued when the 64-bit picosecond clock \
                     ran out (213.5 days; a class too slow for its backlog): neither sent nor \
                     dropped (summary.json: held_at_end)"
                );
            }
            // The files first: a reader of the table that stops early (`| head`) must not
            // cost the summary.
            let summary_path = out.join("summary.json");
            // The other outputs go too (see `replay::discard`).
            let cannot = |e: std::io::Error| {
                let e =
                    replay::Error::Output(format!("cannot write {}: {e}", summary_path.display()));
                Failure::from(replay::discard(&out, &summary.created, e))
            };
            if j {
                // The text once, for the file and for stdout.
                let text = serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n";
                std::fs::write(&summary_path, &text).map_err(cannot)?;
                out::print(&text)?;
            } else {
                // Straight to the file (the summary of 100,000 classes is 44 MB of text).
                let mut file =
                    std::io::BufWriter::new(std::fs::File::create(&summary_path).map_err(cannot)?);
                serde_json::to_writer_pretty(&mut file, &summary).map_err(|e| cannot(e.into()))?;
                file.write_all(b"\n").map_err(cannot)?;
                file.into_inner().map_err(|e| cannot(e.into_error()))?;
                if !quiet {
                    out::errln!("wrote {}/{}", out.display(), replay::OUTPUTS.join(", "));
                }
                print_summary(&summary)?;
            }
            Ok(())
        }
        Command::Policy(cmd) => match cmd {
            PolicyCommand::Check {
                files,
                load,
                plain,
                json,
            } => check(&files, &load, plain, json),
            PolicyCommand::Show {
                file,
                json: j,
                load: l,
            } => {
                let p = load(&file, &l)?;
                if j {
                    // Streamed: a policy of 100,000 nodes is not held as one JSON value.
                    let mut o = std::io::BufWriter::new(std::io::stdout().lock());
                    serde_json::to_writer_pretty(&mut o, &show::Json(&p))
                        .map_err(std::io::Error::from)
                        .and_then(|()| o.write_all(b"\n"))
                        .and_then(|()| o.flush())
                        .map_err(out::failed)?;
                } else {
                    out::print(&show::tree(&p))?;
                }
                Ok(())
            }
            PolicyCommand::Dot { file, load: l } => {
                let p = load(&file, &l)?;
                out::print(&show::dot(&p))?;
                Ok(())
            }
            PolicyCommand::Classify {
                file,
                packet,
                json: j,
                load: l,
            } => {
                let p = load(&file, &l)?;
                classify(&p, &packet, j)
            }
        },
    }
}

/// `--tenant NAME=IFACE` flags (of `weft run` and `weft replay`) as (NAME, IFACE) pairs, in
/// order (a tenant's id is its position, 1-based); a malformed flag or a NAME or IFACE given
/// twice is refused.
fn tenant_pairs(flags: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for t in flags {
        let (n, i) = t
            .split_once('=')
            .ok_or_else(|| format!("--tenant `{t}`: expected NAME=IFACE"))?;
        if n.is_empty() || i.is_empty() {
            let empty = if n.is_empty() { "name" } else { "interface" };
            return Err(format!(
                "--tenant `{t}`: the tenant's {empty} is empty (expected NAME=IFACE)"
            ));
        }
        if let Some(k) = pairs.iter().position(|(pn, pi)| pn == n || pi == i) {
            return Err(format!(
                "--tenant `{t}`: tenant {} is already `{}={}`",
                k + 1,
                pairs[k].0,
                pairs[k].1
            ));
        }
        pairs.push((n.to_string(), i.to_string()));
    }
    Ok(pairs)
}

/// The command line's grammar: `Cli`'s, with negative numbers taken as values everywhere, so
/// `--buffers -5` is refused by the flag's own range ("invalid value '-5' for '--buffers'")
/// rather than as an unknown argument `-5`. No weft flag is a digit, so nothing is shadowed.
/// `weft bench rte-sched`.
fn rte_sched_bench(a: RteSchedArgs) -> Result<(), Failure> {
    let backlog = a.backlog.unwrap_or(match a.arrivals {
        rte_sched::Arrivals::Pipe => 4096.max(a.pipes as u64),
        rte_sched::Arrivals::Uniform => 4096,
    });
    let backlog = u32::try_from(backlog)
        .ok()
        .filter(|&b| (1..=1 << 24).contains(&b))
        .ok_or_else(|| Failure::usage(format!("--backlog {backlog}: 1 to 16777216")))?;
    let cfg = rte_sched::Config {
        pipes: a.pipes,
        arrivals: a.arrivals,
        profile: a.profile,
        packets: a.packets,
        warmup: a.warmup,
        backlog,
        burst: a.burst,
        seed: a.seed,
        engine: a.engine,
    };
    if a.print_policy {
        return Ok(out::print(&rte_sched::policy_yaml(&cfg))?);
    }
    let write_log = |path: &std::path::Path, log: &[u32]| {
        std::fs::write(path, rte_sched::log_bytes(log))
            .map_err(|e| Failure::from((1, format!("cannot write {}: {e}", path.display()))))
    };
    if let Some(k) = a.drain {
        let mut w = rte_sched::Workload::new(&cfg).map_err(Failure::usage)?;
        w.fill_drain(k);
        let mut log = Vec::new();
        let got = w.drain(&mut log, 100_000_000);
        write_log(
            a.log.as_deref().expect("clap: --drain requires --log"),
            &log,
        )?;
        out::outln!(
            "{}",
            json!({"bench": "weft", "drain": k, "pipes": cfg.pipes, "packets": got,
                   "empty_dequeues": w.empty_dequeues(), "drops": w.drops()})
        )?;
        return Ok(());
    }
    let mut log = Vec::new();
    let m =
        rte_sched::measure(&cfg, a.log.is_some().then_some(&mut log)).map_err(Failure::usage)?;
    if let Some(path) = &a.log {
        write_log(path, &log)?;
    }
    let row = rte_sched::json_row(&cfg, &m, a.log.is_some());
    if a.json {
        out::outln!("{row}")?;
    } else {
        out::outln!(
            "weft rte-sched: {} pipes, {} arrivals, {}: {:.3} Mpps by CPU time ({:.1} ns a packet), {} packets after {} warm-up, {} drops, {} empty dequeues, seq_checksum {}",
            cfg.pipes,
            row["arrivals"].as_str().unwrap_or(""),
            row["profile"].as_str().unwrap_or(""),
            row["cpu_mpps"].as_f64().unwrap_or(0.0),
            row["cpu_ns_per_packet"].as_f64().unwrap_or(0.0),
            m.packets,
            m.start,
            m.drops,
            m.empty_dequeues,
            m.seq_checksum
        )?;
    }
    Ok(())
}

fn grammar() -> clap::Command {
    fn negatives_are_values(c: clap::Command) -> clap::Command {
        c.allow_negative_numbers(true)
            .mut_subcommands(negatives_are_values)
    }
    negatives_are_values(Cli::command())
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&grammar().get_matches()).unwrap_or_else(|e| e.exit());
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // (No message after a closed pipe: the reader has gone.)
            if let Some(m) = f.message.filter(|m| !m.is_empty()) {
                out::errln!("error: {m}");
            }
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    /// A limit below 0.1 Mbit/s keeps its digits (a 1 bit/s class read 0.0).
    #[test]
    fn small_limits_keep_their_digits() {
        assert_eq!(super::limit_mbit(10_000_000_000), "10,000.0");
        assert_eq!(super::limit_mbit(100_000), "0.1");
        assert_eq!(super::limit_mbit(1), "1bit/s");
        assert_eq!(super::limit_mbit(50_000), "50kbit/s");
        assert_eq!(super::limit_mbit(1_500), "1500bit/s");
    }
}
