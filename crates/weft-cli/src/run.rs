//! `weft run` (the software NIC on real Linux interfaces), `weft ctl` (live stats and
//! reload over its Unix socket) and `weft testbed` (namespaces, veth, real applications,
//! Linux HTB side by side). The work is done by the `weft-nic` crate; this module parses
//! arguments, prints, and maps failures to exit codes (2: usage or input, 1: the system).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;
use weft_core::policy::{self, LoadOptions};
use weft_core::sched::DropReason;
use weft_core::units;
use weft_nic::ctl::{Reply, Request};
use weft_nic::iface::Reject;
use weft_nic::isolation::{self, Mac};
use weft_nic::stats::Stats;
use weft_nic::{ctl, dataplane, testbed};

type Fail = (u8, String);

fn usage(m: impl Into<String>) -> Fail {
    (2, m.into())
}

#[derive(Subcommand)]
pub enum NicCommand {
    /// Run the software NIC: schedule tenants' frames onto a paced uplink.
    ///
    /// Frames from each tenant interface (AF_PACKET, TPACKET_V2 rings; or AF_XDP with
    /// --backend af-xdp) are parsed, classified (tenant = the interface's position in the
    /// --tenant list, 1-based; ports; destination prefix), scheduled by the policy and
    /// transmitted on the uplink at RATE. Frames arriving on the uplink go back to the
    /// tenant that owns their destination MAC. Runs until SIGINT, SIGTERM
    /// or SIGHUP (or `weft ctl stop`), then prints its stats as JSON on stdout. Needs root
    /// (CAP_NET_RAW); run it inside the namespace that holds the interfaces.
    ///
    /// Example:
    ///   ip netns exec nic weft run --policy fair.yaml --uplink up --rate 500mbit \
    ///       --tenant a=t1 --tenant b=t2
    #[command(verbatim_doc_comment)]
    Run(Box<RunArgs>),
    /// Talk to a running `weft run`: stats, reload, stop.
    #[command(subcommand)]
    Ctl(CtlCommand),
    /// A testbed of network namespaces with real applications, weft vs Linux HTB.
    #[command(subcommand)]
    Testbed(TestbedCommand),
}

#[derive(Args)]
pub struct RunArgs {
    /// Policy file.
    #[arg(long)]
    policy: PathBuf,
    /// Uplink interface (frames are transmitted here).
    #[arg(long)]
    uplink: String,
    /// Uplink rate, e.g. `500mbit` (overrides the policy's link rate).
    #[arg(long)]
    rate: String,
    /// A tenant: NAME=IFACE; repeatable. Tenant ids follow the order given (1, 2, ...).
    /// `NAME=IFACE,ip=PREFIX[,ip=...]` lists the IP prefixes its frames' source addresses
    /// (IPv4, IPv6, ARP's sender) must lie in (others are dropped and counted).
    /// `NAME=IFACE,mac=MAC[,mac=MAC...]` lists the only source addresses the port may use;
    /// without `mac=` a port learns its addresses from its frames and keeps them (no other
    /// port may use them: such frames are dropped and counted).
    #[arg(long, value_name = "NAME=IFACE[,mac=MAC][,ip=PREFIX]", required = true)]
    tenant: Vec<String>,
    /// Source addresses a port without `mac=` may learn; one idle for --mac-age-s makes room
    /// for a new one, else frames from a new address are dropped and counted.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    macs_per_tenant: u32,
    /// Seconds a learned address must be idle before its port's new address replaces it.
    #[arg(long, default_value_t = 300)]
    mac_age_s: u64,
    /// Flow queues held for each tenant whatever the others do (default: half of
    /// --max-queues, split evenly; at most --max-queues ÷ tenants); beyond it a tenant uses
    /// what the others leave.
    #[arg(long, value_name = "N")]
    reserved_queues: Option<u32>,
    /// Frame buffers held for each tenant (default: half of --buffers, split evenly; at
    /// most --buffers ÷ tenants).
    #[arg(long, value_name = "N")]
    reserved_buffers: Option<u32>,
    /// Log lines on stderr: `text` (one line each: time, level, message, fields) or `json`
    /// (one JSON object each, for a log collector).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Run in a cgroup of its own (`weft-PID`) with this CPU weight, 1-10000 (a default
    /// group weighs 100), so the loop gets its core on a busy host: with autogroup
    /// scheduling, `nice` alone orders tasks only within their session. 0: stay where
    /// started. Needs root and a cgroup CPU controller (else a warning).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    cpu_weight: u32,
    /// Control socket.
    #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
    ctl: PathBuf,
    /// Serve Prometheus text metrics on this loopback address, e.g. `127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// `weft ctl reload` refuses a policy of more bytes than this (its file and sub-policies
    /// together); only regular files are read.
    #[arg(long, value_name = "BYTES", default_value_t = ctl::DEFAULT_MAX_POLICY_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_policy_bytes: u64,
    /// Give the control socket (mode 0660: owner and group) to this group, whose members may
    /// then use `weft ctl`; a group that does not exist exits 2.
    #[arg(long, value_name = "NAME")]
    ctl_group: Option<String>,
    /// Frame buffers in the pool (2 KB each: 64 to 1,048,576, i.e. up to 2 GB).
    #[arg(long, default_value_t = 32768, value_parser = clap::value_parser!(u32).range(64..=1 << 20))]
    buffers: u32,
    /// Descriptors per flow ring (1 to 65,536; --ring × --max-queues at most 2^25).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1 << 16))]
    ring: u32,
    /// Descriptors of one class the NIC holds at most.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    outstanding: u32,
    /// Flow queues at most (16 to 1,048,576).
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(16..=1 << 20))]
    max_queues: u32,
    /// When idle, wait at most this many microseconds for a frame (in ppoll(2) on the rings:
    /// an arriving frame wakes the loop at once); 0: pure busy polling. At most 1000: control
    /// requests (`weft ctl`, also `stop`) are answered between waits, about once a
    /// millisecond, and a longer wait would hold them up (past 10 s `weft ctl` gives up).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    idle_sleep_us: u64,
    /// Pin the dataplane thread to this CPU (a software NIC owns its core).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// The dataplane thread's scheduler slice in microseconds (Linux >= 6.12, EEVDF: 100 to
    /// 100000): a short slice lets it preempt an application on its CPU as soon as it wakes
    /// from an idle wait, without raising its CPU share.
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(100..=100_000))]
    slice_us: Option<u64>,
    /// Test hook: tenant N (1-based) also posts to other tenants' and invalid queues and
    /// rings doorbells naming them, every 100 µs; all refused and counted (`ctl stats`).
    #[arg(long, value_name = "N")]
    rogue: Option<usize>,
    /// Receive ring: v2 (TPACKET_V2: every frame handed over as it arrives) or v3
    /// (TPACKET_V3: frames batched per block, a block handed over when full or after 1 ms,
    /// so a frame may wait up to 1 ms at low load).
    #[arg(long, default_value = "v2", value_parser = ["v2", "v3"])]
    ring_version: String,
    /// How frames reach the NIC: af-packet (TPACKET rings) or af-xdp (AF_XDP sockets in copy
    /// mode and an XDP redirect program attached in generic mode while weft runs; needs the
    /// `af-xdp` cargo feature, on by default). --ring-version applies to af-packet only.
    #[arg(long, default_value = "af-packet", value_parser = dataplane::Backend::NAMES)]
    backend: String,
    /// At start-up, turn off the ports' transmit checksum, TSO, GSO and GRO offloads where
    /// they are on, saying what changed (the default).
    #[arg(long, overrides_with = "no_fix_offloads")]
    fix_offloads: bool,
    /// Leave the ports' offloads as they are, and refuse to start (exit 2, printing the
    /// `ethtool -K` command that turns them off) if any of them is on.
    #[arg(long, overrides_with = "fix_offloads")]
    no_fix_offloads: bool,
}

#[derive(Subcommand)]
pub enum CtlCommand {
    /// Per node and leaf: packets, bytes, drops by reason, current rate; dataplane and
    /// OS/NIC interface counters.
    Stats {
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Control socket.
        #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Swap the running policy: validated here first (diagnostics, exit 2) and again by the
    /// daemon; a rejected policy leaves the running one untouched; queued packets drain.
    Reload {
        /// Policy file.
        policy: PathBuf,
        /// Control socket.
        #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
    /// Stop the daemon.
    Stop {
        /// Control socket.
        #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
        socket: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum TestbedCommand {
    /// Create namespaces PREFIX-t1..tN (tenants), PREFIX-nic (the software NIC),
    /// PREFIX-rx (the receiver) and their veth pairs. Namespaces PREFIX-* that exist already
    /// are deleted first, and the processes in them killed (it says which).
    Up {
        /// Namespaces are PREFIX-t1.., PREFIX-nic, PREFIX-rx (1 to 10 letters, digits or
        /// underscores); what exists under it already is deleted first.
        #[arg(long, default_value = "wt")]
        prefix: String,
        /// Tenant namespaces (1 to 16).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
        tenants: u8,
    },
    /// Delete every namespace named PREFIX-* (and the processes in them).
    Down {
        /// Deletes the namespaces PREFIX-* (1 to 10 letters, digits or underscores).
        #[arg(long, default_value = "wt")]
        prefix: String,
    },
    /// Run an experiment with weft and with Linux HTB on the same uplink; write a report.
    ///
    /// Experiments:
    ///   fair-1v8     two equal tenants, 1 vs 8 iperf3 flows (Jain's index);
    ///   weights-123  three tenants weighted 1:2:3, 4 flows each (relative error);
    ///   dest-limit   a 100 Mbit/s limit on one destination address;
    ///   limit-priority
    ///                one tenant's sockperf ping-pong and 4 iperf3 flows to one address
    ///                under a limit of a fifth of the uplink, sockperf first under it:
    ///                p50/p99 with iperf3 off then on, iperf3's rate against the limit;
    ///   latency      a strict-priority tenant's sockperf ping-pong, idle then under the
    ///                other tenant's 8 iperf3 flows (p50/p99, loaded over idle);
    ///   memcached    the same with memcached and memaslap (Debian's libmemcached-tools);
    ///   rogue        tenant 1 also posts to foreign and invalid queues (refusals counted);
    ///   spoof        tenant 2 also sends frames with tenant 1's source MAC (dropped and
    ///                counted; tenant 1's return traffic stays its own);
    ///   flood        tenant 2 also floods new flows in a pool of 256 flow queues (its
    ///                new flows refused past its budget; tenant 1's are not);
    ///   mac-flood    tenant 2 also sends 10,000 frames a second from random source MACs
    ///                (refused past its MAC table's bound, counted and logged);
    ///   metrics-flood
    ///                concurrent scrapes, then idle connections held to the metrics
    ///                endpoint while the control socket is asked; `stop` at the end;
    ///   link-flap    the uplink's wire down for 2 s mid-run (nothing sent meanwhile;
    ///                the outage counted and logged; shares after it);
    ///   reload       halfway, an invalid policy, then weights 1:1 -> 1:3 (nothing lost).
    ///
    /// Root only. Installs iperf3, ethtool, sockperf, memcached with apt-get when missing.
    /// Under weft the applications run on every CPU but weft's (WEFT_TESTBED_APP_CPUS);
    /// docs/dataplane.md lists every environment knob. Writes DIR/report.json, report.md
    /// and throughput.svg.
    #[command(verbatim_doc_comment)]
    Run {
        /// Experiment name.
        experiment: String,
        /// Namespaces are PREFIX-t1.., PREFIX-nic, PREFIX-rx (1 to 10 letters, digits or
        /// underscores); what exists under it already is deleted first.
        #[arg(long, default_value = "wt")]
        prefix: String,
        /// Uplink rate.
        #[arg(long, default_value = "500mbit")]
        rate: String,
        /// Measured seconds (after 2 s of warm-up): 1 to 86400.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=86_400))]
        seconds: u32,
        /// Only this scheduler: weft or htb (default both).
        #[arg(long)]
        only: Option<String>,
        /// Report directory.
        #[arg(long, default_value = "weft-testbed")]
        out: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// weft's backend (`weft run --backend`): af-packet or af-xdp (default: env
        /// WEFT_TESTBED_BACKEND, else af-packet).
        #[arg(long, value_parser = dataplane::Backend::NAMES)]
        backend: Option<String>,
    },
    /// Forwarding benchmark: packets/s through weft (Loom Fig. 1 policy, FIFO policy) and
    /// Linux HTB (1 and 1,000 classes) at 64 and 1500-byte frames, unpaced (100 Gbit/s).
    Bench {
        /// Namespaces are PREFIX-t1.., PREFIX-nic, PREFIX-rx (1 to 10 letters, digits or
        /// underscores); what exists under it already is deleted first.
        #[arg(long, default_value = "wtb")]
        prefix: String,
        /// The Loom Fig. 1 policy.
        #[arg(long, default_value = "examples/policies/loom-fig1.yaml")]
        fig1: PathBuf,
        /// Seconds per configuration (more than 0).
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
        /// Frame sizes, bytes (60 to 1514).
        #[arg(long, value_delimiter = ',', default_value = "64,1500")]
        sizes: Vec<usize>,
        /// weft's backends, each measured with both policies: af-packet, af-xdp or both
        /// (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "af-packet", value_parser = dataplane::Backend::NAMES)]
        backend: Vec<String>,
        /// One JSON document on stdout instead of the table: the rows (with weft's drop
        /// counters and port counters) and the ratios.
        #[arg(long)]
        json: bool,
    },
    /// (Internal) send UDP frames on IFACE for the benchmark; prints the frames sent.
    #[command(hide = true)]
    Blast {
        #[arg(long)]
        iface: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        seconds: f64,
        #[arg(long, default_value_t = 1000)]
        flows: u16,
        #[arg(long)]
        src: std::net::Ipv4Addr,
        #[arg(long)]
        dst: std::net::Ipv4Addr,
        #[arg(long)]
        dst_mac: String,
    },
}

pub fn main(c: NicCommand) -> Result<(), Fail> {
    match c {
        NicCommand::Run(a) => run(*a),
        NicCommand::Ctl(c) => ctl_cmd(c),
        NicCommand::Testbed(t) => testbed_cmd(t),
    }
}

/// Each tenant's `--tenant` options: the `NAME=IFACE` part, its `mac=` addresses and its
/// `ip=` prefixes.
type TenantOptions = (Vec<String>, Vec<Vec<Mac>>, Vec<Vec<isolation::Prefix>>);

/// Splits `--tenant NAME=IFACE,mac=MAC,ip=PREFIX,...` into `NAME=IFACE`, each tenant's
/// addresses and its prefixes.
fn tenant_macs(flags: &[String]) -> Result<TenantOptions, String> {
    let (mut plain, mut macs, mut ips) = (Vec::new(), Vec::new(), Vec::new());
    for f in flags {
        let mut parts = f.split(',');
        plain.push(parts.next().unwrap_or_default().to_string());
        let (mut own, mut nets) = (Vec::new(), Vec::new());
        for p in parts {
            if let Some(m) = p.strip_prefix("mac=") {
                own.push(isolation::parse_mac(m).ok_or_else(|| {
                    format!("--tenant `{f}`: `{m}` is not a MAC address (aa:bb:cc:dd:ee:ff)")
                })?);
            } else if let Some(n) = p.strip_prefix("ip=") {
                nets.push(isolation::Prefix::parse(n).ok_or_else(|| {
                    format!("--tenant `{f}`: `{n}` is not an IP prefix (10.0.1.0/24, fd00::5)")
                })?);
            } else {
                return Err(format!(
                    "--tenant `{f}`: `{p}`: expected mac=MAC or ip=PREFIX"
                ));
            }
        }
        macs.push(own);
        ips.push(nets);
    }
    Ok((plain, macs, ips))
}

/// The daemon's structured log on stderr (`--log-format`); `RUST_LOG`-style filtering is
/// not offered: the daemon logs only what an operator acts on, at a bounded rate.
fn init_log(format: &str) {
    let b = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_max_level(tracing::Level::INFO);
    // A second init (tests that run `run` twice in one process) keeps the first.
    let _ = if format == "json" {
        b.json().flatten_event(true).try_init()
    } else {
        b.with_ansi(false).try_init()
    };
}

fn run(a: RunArgs) -> Result<(), Fail> {
    init_log(&a.log_format);
    let rate_bps = units::parse_rate(&a.rate).map_err(|e| usage(format!("--rate: {e}")))?;
    let (plain, macs, ips) = tenant_macs(&a.tenant).map_err(usage)?;
    let tenants = crate::tenant_pairs(&plain).map_err(usage)?;
    let backend = dataplane::Backend::parse(&a.backend)
        .ok_or_else(|| usage(format!("--backend `{}`", a.backend)))?;
    if backend == dataplane::Backend::AfXdp && !cfg!(feature = "af-xdp") {
        return Err(usage(format!(
            "--backend {}: this weft was built without it (cargo feature `af-xdp`); \
             use --backend af-packet or rebuild with `--features af-xdp`",
            a.backend
        )));
    }
    // The control server's guards (the dataplane binds it with them); a --ctl-group that
    // does not exist is said before anything opens.
    let group = match &a.ctl_group {
        None => None,
        Some(g) => Some(ctl::lookup_group(g).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::InvalidInput => usage(e.to_string()),
            _ => (1, e.to_string()),
        })?),
    };
    ctl::set_defaults(ctl::Options {
        max_policy_bytes: a.max_policy_bytes,
        group,
    });
    // Validate the policy with diagnostics before touching any socket.
    let opts = LoadOptions {
        link_rate_bps: Some(rate_bps),
        ..LoadOptions::default()
    };
    match policy::load(&a.policy, &opts) {
        Ok(prog) => {
            crate::diagnostics::warn(&prog, false);
            for w in dataplane::tenant_warnings(&prog, &tenants) {
                crate::out::errln!("warning: {w}");
            }
        }
        Err(e) => {
            crate::diagnostics::report(&e, false);
            return Err(usage(format!("{}: invalid policy", a.policy.display())));
        }
    }
    let cfg = dataplane::Config {
        policy: a.policy,
        load: opts,
        uplink: a.uplink,
        rate_bps,
        tenants,
        ctl: Some(a.ctl.clone()),
        metrics: a.metrics,
        buffers: a.buffers,
        max_queues: a.max_queues,
        ring: a.ring,
        outstanding: a.outstanding,
        idle_sleep_us: a.idle_sleep_us,
        cpu: a.cpu,
        slice_us: a.slice_us,
        backend,
        ring_version: if a.ring_version == "v2" {
            weft_nic::afpacket::RingVersion::V2
        } else {
            weft_nic::afpacket::RingVersion::V3
        },
        cpu_weight: (a.cpu_weight > 0).then_some(a.cpu_weight),
        isolation: dataplane::IsolationConfig {
            macs,
            ips,
            macs_per_tenant: a.macs_per_tenant as usize,
            mac_age_s: a.mac_age_s,
            reserved_queues: a.reserved_queues,
            reserved_buffers: a.reserved_buffers,
        },
        rogue: match a.rogue {
            Some(0) => return Err(usage("--rogue: tenants are numbered from 1")),
            Some(n) if n > a.tenant.len() => {
                return Err(usage(format!(
                    "--rogue {n}: only {} tenants",
                    a.tenant.len()
                )))
            }
            r => r.map(|n| n - 1),
        },
    };
    // Before any interface is touched (the offloads below change them).
    cfg.check_reservations().map_err(usage)?;
    // Before any ring opens: offloads that would hand it unfinished checksums and frames
    // longer than a slot are turned off (or, with --no-fix-offloads, refused).
    let ports: Vec<&str> = cfg
        .tenants
        .iter()
        .map(|(_, i)| i.as_str())
        .chain([cfg.uplink.as_str()])
        .collect();
    // The last of the two flags wins (`overrides_with`); neither: fix.
    let fix = a.fix_offloads || !a.no_fix_offloads;
    match weft_nic::offload::prepare_ports(&ports, fix) {
        Ok(lines) => lines
            .iter()
            .for_each(|l| tracing::info!(check = "offloads", "{l}")),
        Err(e @ weft_nic::offload::PrepareError::OffloadsOn(_)) => {
            return Err(usage(e.to_string()))
        }
        Err(e) => return Err((1, e.to_string())),
    }
    let ctl_path = a.ctl;
    let stats = dataplane::run(cfg, |metrics| match metrics {
        Some(a) => crate::out::errln!(
            "weft run: ready (control socket {}, metrics http://{a}/metrics)",
            ctl_path.display()
        ),
        None => crate::out::errln!("weft run: ready (control socket {})", ctl_path.display()),
    })
    .map_err(|e| match e {
        // A path or address given on the command line that cannot be used.
        dataplane::RunError::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::AddrInUse
                    | std::io::ErrorKind::AlreadyExists
                    | std::io::ErrorKind::InvalidInput
            ) =>
        {
            usage(e.to_string())
        }
        dataplane::RunError::Config(m) => usage(m),
        // The backend is not in this build, or the kernel refused one of its steps (the
        // message names the step and the errno): the choice cannot be used here.
        dataplane::RunError::Backend(m) => usage(m),
        e => (1, e.to_string()),
    })?;
    // As the control socket answers `stats`: one line of `Stats`'s serde form.
    let line = serde_json::to_string(&stats).map_err(|e| (1, e.to_string()))?;
    crate::out::outln!("{line}")?;
    Ok(())
}

/// The daemon's reply to `req`: a refusal is exit 2 with the daemon's reason; no answer,
/// or one that does not read as the reply to `req` (a field missing, renamed or of another
/// type, as from a `weft run` of another version: [`ctl::ReplyError`], naming the field),
/// exit 1; a path that is not a control socket, exit 2.
fn ask(socket: &std::path::Path, req: Request) -> Result<Reply, Fail> {
    match ctl::request(socket, &req) {
        Ok(Reply::Refused(e)) => Err((2, e)),
        Ok(reply) => Ok(reply),
        // A path that is not a control socket was given: an input error.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Err((2, e.to_string())),
        Err(e) => Err((1, e.to_string())),
    }
}

/// The daemon's stats ([`ask`]): never counters taken as 0 from an answer that does not
/// read.
fn ask_stats(socket: &std::path::Path) -> Result<Stats, Fail> {
    match ask(socket, Request::Stats)? {
        Reply::Stats(s) => Ok(*s),
        // Cannot be: `ctl::request` reads a stats answer as stats or a refusal.
        _ => Err((
            1,
            format!("{}: answered stats with another reply", socket.display()),
        )),
    }
}

fn ctl_cmd(c: CtlCommand) -> Result<(), Fail> {
    match c {
        CtlCommand::Stats { json: j, socket } => {
            let stats = ask_stats(&socket)?;
            if j {
                crate::out::outln!(
                    "{}",
                    serde_json::to_string_pretty(&stats).unwrap_or_default()
                )?;
            } else {
                print_stats(&stats)?;
            }
            Ok(())
        }
        CtlCommand::Reload { policy: p, socket } => {
            // Checked here as the daemon will check it: at the uplink rate it runs at (its
            // `--rate`, which stands for the file's `link: {rate}`; a senic policy's limits
            // are judged against it). Without an answer, at the file's rate: an invalid
            // policy is said before a daemon that is not there. An answer that does not
            // read is an error: the rate would be a guess.
            let rate = match ctl::request(&socket, &Request::Stats) {
                Ok(Reply::Stats(s)) => Some(s.rate_bps),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err((1, e.to_string()))
                }
                _ => None,
            };
            let opts = LoadOptions {
                link_rate_bps: rate,
                ..LoadOptions::default()
            };
            match policy::load(&p, &opts) {
                Ok(prog) => crate::diagnostics::warn(&prog, false),
                Err(e) => {
                    crate::diagnostics::report(&e, false);
                    return Err(usage(format!(
                        "{}: invalid policy; the running one is untouched",
                        p.display()
                    )));
                }
            }
            let abs = std::fs::canonicalize(&p).map_err(|e| usage(e.to_string()))?;
            let Reply::Reloaded(r) = ask(&socket, Request::Reload { policy: abs })? else {
                return Err((1, format!("{}: not a reload's answer", socket.display())));
            };
            // What `weft run` warns of at start, for the new policy and the running tenants.
            for w in &r.warnings {
                crate::out::errln!("warning: {w}");
            }
            crate::out::outln!(
                "reloaded: policy {} (generation {})",
                r.policy,
                r.generation
            )?;
            Ok(())
        }
        CtlCommand::Stop { socket } => {
            ask(&socket, Request::Stop)?;
            crate::out::errln!(
                "weft ctl: {} stops at its next control poll (about 1 ms), printing its final \
                 stats on its own stdout",
                socket.display()
            );
            Ok(())
        }
    }
}

fn print_stats(s: &Stats) -> Result<(), Fail> {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "policy {} (generation {}), up {:.1} s, uplink {}",
        s.policy,
        s.generation,
        s.uptime_s,
        units::format_rate(s.rate_bps)
    );
    let _ = writeln!(
        o,
        "{:<24} {:>6} {:>12} {:>14} {:>10} {:>10}  drops by reason",
        "node", "type", "packets", "bytes", "Mbit/s", "drops"
    );
    for n in &s.nodes {
        let total: u64 = n.drops.iter().sum();
        let reasons: Vec<String> = DropReason::ALL
            .iter()
            .zip(n.drops)
            .filter(|&(_, c)| c > 0)
            .map(|(r, c)| format!("{}={c}", r.name()))
            .collect();
        let _ = writeln!(
            o,
            "{:<24} {:>6} {:>12} {:>14} {:>10.1} {:>10}  {}",
            n.name,
            n.algo,
            n.packets,
            n.bytes,
            n.rate_bps / 1e6,
            total,
            reasons.join(" ")
        );
    }
    if !s.shapers.is_empty() {
        let _ = writeln!(
            o,
            "{:<24} {:>12} {:>14} {:>10} {:>12}",
            "shaping class", "packets", "bytes", "Mbit/s", "limit Mbit/s"
        );
        for c in &s.shapers {
            let _ = writeln!(
                o,
                "{:<24} {:>12} {:>14} {:>10.1} {:>12.1}",
                c.name,
                c.packets,
                c.bytes,
                c.rate_bps / 1e6,
                c.limit_bps as f64 / 1e6,
            );
        }
    }
    for t in &s.tenants {
        let refused: Vec<String> = Reject::ALL
            .iter()
            .zip(t.rejects)
            .filter(|&(_, c)| c > 0)
            .map(|(r, c)| format!("{}={c}", r.name()))
            .collect();
        let _ = writeln!(
            o,
            "tenant {} ({} on {}): {} frames received, refused: {}",
            t.tenant,
            t.name,
            t.iface,
            t.rx_frames,
            if refused.is_empty() {
                "none".to_string()
            } else {
                refused.join(" ")
            }
        );
    }
    let _ = writeln!(o, "dataplane: {}", counters(&s.dataplane, "all 0"));
    for p in &s.ports {
        let _ = writeln!(o, "port: {}", counters(p, "all 0"));
    }
    let _ = writeln!(o, "iface: {}", counters(&s.iface, "all 0"));
    crate::out::print(&o)
}

/// A section of the stats as `name=value` words for the table, by its fields' names in
/// `--json` (its serde form), nested sections' names joined with `.`
/// (`rejects.foreign_queue=12`); zeros left out (`--json` has them all), and `none_left`
/// when nothing is left.
fn counters(section: &impl serde::Serialize, none_left: &str) -> String {
    fn walk(v: &Value, name: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    let n = if name.is_empty() {
                        k.clone()
                    } else {
                        format!("{name}.{k}")
                    };
                    walk(c, &n, out);
                }
            }
            Value::Number(n) if n.as_f64() == Some(0.0) => {}
            Value::Null => {}
            Value::String(s) => out.push(format!("{name}={s}")),
            other => out.push(format!("{name}={other}")),
        }
    }
    let mut out = Vec::new();
    // Cannot fail: the stats' maps have string keys.
    walk(
        &serde_json::to_value(section).unwrap_or_default(),
        "",
        &mut out,
    );
    if out.is_empty() {
        none_left.to_string()
    } else {
        out.join(" ")
    }
}

/// Frame sizes `weft testbed bench --sizes` takes, bytes.
const BENCH_FRAME_BYTES: std::ops::RangeInclusive<usize> = 60..=1514;

fn testbed_cmd(t: TestbedCommand) -> Result<(), Fail> {
    match t {
        TestbedCommand::Up { prefix, tenants } => {
            testbed::check_prefix(&prefix).map_err(usage)?;
            let tb = testbed::Testbed::up(&prefix, usize::from(tenants))
                .map_err(|e| (1, e.to_string()))?;
            let names = tb.namespaces();
            tb.keep();
            crate::out::outln!("{}", names.join(" "))?;
            Ok(())
        }
        TestbedCommand::Bench {
            prefix,
            fig1,
            seconds,
            sizes,
            backend,
            json: j,
        } => {
            testbed::check_prefix(&prefix).map_err(usage)?;
            // Checked before any namespace is made: a zero, NaN or negative duration and
            // frames the wires cannot carry gave a table of zeros that exited 0.
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(usage(format!(
                    "--seconds {seconds}: a positive number of seconds per configuration"
                )));
            }
            if let Some(&bad) = sizes.iter().find(|&&b| !(BENCH_FRAME_BYTES.contains(&b))) {
                return Err(usage(format!(
                    "--sizes {bad}: frames are {} to {} bytes (Ethernet without FCS; the \
                     testbed's links have a 1500-byte MTU)",
                    BENCH_FRAME_BYTES.start(),
                    BENCH_FRAME_BYTES.end()
                )));
            }
            if !fig1.exists() {
                return Err(usage(format!("--fig1 {}: no such file", fig1.display())));
            }
            // Its diagnostics here, not `weft run did not start` after the namespaces are up.
            let opts = LoadOptions {
                link_rate_bps: Some(testbed::BENCH_RATE_BPS),
                ..LoadOptions::default()
            };
            match policy::load(&fig1, &opts) {
                Ok(prog) => crate::diagnostics::warn(&prog, false),
                Err(e) => {
                    crate::diagnostics::report(&e, false);
                    return Err(usage(format!("--fig1 {}: invalid policy", fig1.display())));
                }
            }
            let dir = testbed::bench_dir(&prefix);
            std::fs::create_dir_all(&dir).map_err(|e| (1, e.to_string()))?;
            let fifo = dir.join("fifo.yaml");
            std::fs::write(
                &fifo,
                "weft: 1\nname: fifo\nlink: {rate: 100gbit}\nnodes:\n  - {name: root, type: fifo}\n  - {name: all, type: leaf, parent: root}\n",
            )
            .map_err(|e| (1, e.to_string()))?;
            let abs = std::fs::canonicalize(&fig1).map_err(|e| usage(e.to_string()))?;
            let mut configs = Vec::new();
            for b in &backend {
                // The backend in the label only when it is not the default.
                let tag = backend_tag(b);
                configs.push(testbed::BenchConfig::Weft {
                    label: format!("loom-fig1{tag}"),
                    policy: abs.clone(),
                    backend: b.clone(),
                });
                configs.push(testbed::BenchConfig::Weft {
                    label: format!("fifo{tag}"),
                    policy: fifo.clone(),
                    backend: b.clone(),
                });
            }
            configs.push(testbed::BenchConfig::Htb { classes: 1 });
            configs.push(testbed::BenchConfig::Htb { classes: 1000 });
            let weft = std::env::current_exe().map_err(|e| (1, e.to_string()))?;
            testbed::tear_down_on_signal(&prefix).map_err(|e| (1, e.to_string()))?;
            let r = testbed::bench(&prefix, &weft, &configs, &sizes, seconds);
            testbed::wait_if_interrupted();
            let _ = std::fs::remove_dir_all(&dir);
            let mut r = r.map_err(|e| (1, e.to_string()))?;
            let rows: Vec<serde_json::Value> = r["rows"].as_array().cloned().unwrap_or_default();
            let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
            // The ratios the issue asks for, per frame size and weft backend, from this
            // run's rows (the backend named as in the configurations' labels).
            let mut ratios = Vec::new();
            for &size in &sizes {
                let fwd = |config: &str| {
                    rows.iter()
                        .find(|r| {
                            r["frame_bytes"].as_u64() == Some(size as u64)
                                && r["config"].as_str() == Some(config)
                        })
                        .map(|r| num(&r["forwarded_pps"]))
                };
                for b in &backend {
                    let tag = backend_tag(b);
                    if let (Some(fig1), Some(fifo), Some(h1), Some(h1000)) = (
                        fwd(&format!("weft loom-fig1{tag}")),
                        fwd(&format!("weft fifo{tag}")),
                        fwd("htb 1 class"),
                        fwd("htb 1000 classes"),
                    ) {
                        ratios.push(serde_json::json!({
                            "frame_bytes": size, "backend": b,
                            "fig1_over_htb_1_class": fig1 / h1,
                            "fig1_over_htb_1000_classes": fig1 / h1000,
                            "fig1_over_fifo": fig1 / fifo,
                        }));
                    }
                }
            }
            if j {
                r["ratios"] = serde_json::Value::Array(ratios);
                crate::out::outln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default())?;
                return Ok(());
            }
            crate::out::outln!(
                "{:<22} {:>6} {:>14} {:>14}",
                "config",
                "bytes",
                "offered pps",
                "forwarded pps"
            )?;
            for row in &rows {
                crate::out::outln!(
                    "{:<22} {:>6} {:>14.0} {:>14.0}",
                    row["config"].as_str().unwrap_or(""),
                    row["frame_bytes"].as_u64().unwrap_or(0),
                    num(&row["offered_pps"]),
                    num(&row["forwarded_pps"])
                )?;
            }
            for q in &ratios {
                let said = match q["backend"].as_str() {
                    Some("af-packet") | None => String::new(),
                    Some(b) => format!(" ({b})"),
                };
                crate::out::outln!(
                    "{} B, forwarded{said}: weft Fig. 1 / HTB 1 class {:.2}, / HTB 1,000 classes {:.2}; weft Fig. 1 / weft FIFO {:.2}",
                    q["frame_bytes"],
                    num(&q["fig1_over_htb_1_class"]),
                    num(&q["fig1_over_htb_1000_classes"]),
                    num(&q["fig1_over_fifo"])
                )?;
            }
            Ok(())
        }
        TestbedCommand::Blast {
            iface,
            size,
            seconds,
            flows,
            src,
            dst,
            dst_mac,
        } => {
            let mac: Vec<u8> = dst_mac
                .split(':')
                .filter_map(|h| u8::from_str_radix(h, 16).ok())
                .collect();
            let mac: [u8; 6] = mac
                .try_into()
                .map_err(|_| usage(format!("--dst-mac `{dst_mac}`")))?;
            let n = testbed::blast(
                &iface,
                mac,
                src.octets(),
                dst.octets(),
                size,
                flows,
                seconds,
            )
            .map_err(|e| (1, e.to_string()))?;
            crate::out::outln!("{n}")?;
            Ok(())
        }
        TestbedCommand::Down { prefix } => {
            testbed::check_prefix(&prefix).map_err(usage)?;
            crate::out::errln!("testbed: {}", testbed::down_all(&prefix).describe(&prefix));
            Ok(())
        }
        TestbedCommand::Run {
            experiment,
            prefix,
            rate,
            seconds,
            only,
            out,
            json: j,
            backend,
        } => {
            testbed::check_prefix(&prefix).map_err(usage)?;
            let rate_bps = units::parse_rate(&rate).map_err(|e| usage(format!("--rate: {e}")))?;
            let mut exp =
                testbed::Experiment::named(&experiment, rate_bps, seconds).ok_or_else(|| {
                    usage(format!(
                        "unknown experiment `{experiment}`; known: {}",
                        testbed::Experiment::NAMES.join(", ")
                    ))
                })?;
            if let Some(b) = backend {
                exp.backend = b;
            }
            let modes: Vec<testbed::Mode> = match only.as_deref() {
                None => vec![testbed::Mode::Weft, testbed::Mode::Htb],
                Some("weft") => vec![testbed::Mode::Weft],
                Some("htb") => vec![testbed::Mode::Htb],
                Some(o) => return Err(usage(format!("--only `{o}`: weft or htb"))),
            };
            let weft = std::env::current_exe().map_err(|e| (1, e.to_string()))?;
            testbed::tear_down_on_signal(&prefix).map_err(|e| (1, e.to_string()))?;
            let report = testbed::run(&exp, &prefix, &modes, &weft, &out);
            testbed::wait_if_interrupted();
            let report = report.map_err(|e| (1, e.to_string()))?;
            write_throughput_chart(&out, &report);
            if j {
                crate::out::outln!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                )?;
            } else {
                crate::out::print(&testbed::markdown(&report))?;
                crate::out::errln!("wrote {}/report.json and report.md", out.display());
            }
            Ok(())
        }
    }
}

/// What `weft testbed bench` adds to a weft configuration's label for its backend: nothing
/// for the default (AF_PACKET), ` BACKEND` otherwise (`weft loom-fig1 af-xdp`).
fn backend_tag(backend: &str) -> String {
    if backend == "af-packet" {
        String::new()
    } else {
        format!(" {backend}")
    }
}

/// The testbed report's per-tenant throughput over time as `throughput.svg` (one line per
/// scheduler and tenant), linked from `report.md`. Nothing is written when the report has no
/// per-second series.
fn write_throughput_chart(out: &std::path::Path, report: &Value) {
    let Some(svg) = throughput_chart(report) else {
        return;
    };
    if std::fs::write(out.join("throughput.svg"), svg).is_ok() {
        let md = out.join("report.md");
        if let Ok(mut text) = std::fs::read_to_string(&md) {
            text += "\n![per-tenant throughput over time](throughput.svg)\n";
            let _ = std::fs::write(md, text);
        }
    }
}

/// The chart's SVG text, if the report has per-second throughput.
fn throughput_chart(report: &Value) -> Option<String> {
    let mut series = Vec::new();
    for m in report["results"].as_array().into_iter().flatten() {
        let scheduler = m["scheduler"].as_str().unwrap_or("?");
        for t in m["tenants"].as_array().into_iter().flatten() {
            let points: Vec<(f64, f64)> = t["mbps_per_second"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(i, v)| Some(((i + 1) as f64, v.as_f64()?)))
                .collect();
            if !points.is_empty() {
                series.push(weft_sim::report::Series {
                    name: format!("{scheduler} t{}", t["tenant"]),
                    points,
                });
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    let title = format!(
        "{}: per-tenant throughput",
        report["experiment"].as_str().unwrap_or("testbed")
    );
    Some(weft_sim::report::line_chart(
        &title, "second", "Mbit/s", &series, None,
    ))
}

#[cfg(test)]
mod chart_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn throughput_chart_has_a_line_per_scheduler_and_tenant() {
        let r = json!({"experiment": "fair-1v8", "results": [
            {"scheduler": "weft", "tenants": [
                {"tenant": 1, "mbps_per_second": [240.0, 250.5, 249.0]},
                {"tenant": 2, "mbps_per_second": [250.0, 249.5, 251.0]}]},
            {"scheduler": "htb", "tenants": [
                {"tenant": 1, "mbps_per_second": [245.0, 248.0]},
                {"tenant": 2, "mbps_per_second": []}]}]});
        let svg = throughput_chart(&r).expect("a chart");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<path").count(), 3, "{svg}");
        for name in ["weft t1", "weft t2", "htb t1"] {
            assert!(svg.contains(name), "{name} missing: {svg}");
        }
        assert!(throughput_chart(&json!({"results": []})).is_none());
    }
}
