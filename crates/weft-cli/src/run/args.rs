//! The grammar of `weft run`, `weft ctl` and `weft testbed` ([`NicCommand`]): their flags,
//! defaults, ranges and help texts, as clap derives them.
//!
//! Invariants: a flag's range is checked here, before any command runs (so `--buffers 0`
//! is refused with clap's message); what clap cannot check (a rate's units, a tenant's
//! addresses) is checked by the command. Cost: none past parsing.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use weft_nic::{ctl, dataplane};

#[derive(Subcommand)]
pub(crate) enum NicCommand {
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
pub(crate) struct RunArgs {
    /// Policy file.
    #[arg(long)]
    pub(super) policy: PathBuf,
    /// Uplink interface (frames are transmitted here).
    #[arg(long)]
    pub(super) uplink: String,
    /// Uplink rate, e.g. `500mbit` (overrides the policy's link rate).
    #[arg(long)]
    pub(super) rate: String,
    /// A tenant: NAME=IFACE; repeatable. Tenant ids follow the order given (1, 2, ...).
    /// `NAME=IFACE,ip=PREFIX[,ip=...]` lists the IP prefixes its frames' source addresses
    /// (IPv4, IPv6, ARP's sender) must lie in (others are dropped and counted).
    /// `NAME=IFACE,mac=MAC[,mac=MAC...]` lists the only source addresses the port may use;
    /// without `mac=` a port learns its addresses from its frames and keeps them (no other
    /// port may use them: such frames are dropped and counted).
    #[arg(long, value_name = "NAME=IFACE[,mac=MAC][,ip=PREFIX]", required = true)]
    pub(super) tenant: Vec<String>,
    /// Source addresses a port without `mac=` may learn; one idle for --mac-age-s makes room
    /// for a new one, else frames from a new address are dropped and counted.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(super) macs_per_tenant: u32,
    /// Seconds a learned address must be idle before its port's new address replaces it.
    #[arg(long, default_value_t = 300)]
    pub(super) mac_age_s: u64,
    /// Flow queues held for each tenant whatever the others do (default: half of
    /// --max-queues, split evenly; at most --max-queues ÷ tenants); beyond it a tenant uses
    /// what the others leave.
    #[arg(long, value_name = "N")]
    pub(super) reserved_queues: Option<u32>,
    /// Frame buffers held for each tenant (default: half of --buffers, split evenly; at
    /// most --buffers ÷ tenants).
    #[arg(long, value_name = "N")]
    pub(super) reserved_buffers: Option<u32>,
    /// Log lines on stderr: `text` (one line each: time, level, message, fields) or `json`
    /// (one JSON object each, for a log collector).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub(super) log_format: String,
    /// Run in a cgroup of its own (`weft-PID`) with this CPU weight, 1-10000 (a default
    /// group weighs 100), so the loop gets its core on a busy host: with autogroup
    /// scheduling, `nice` alone orders tasks only within their session. 0: stay where
    /// started. Needs root and a cgroup CPU controller (else a warning).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub(super) cpu_weight: u32,
    /// Control socket.
    #[arg(long, default_value = ctl::DEFAULT_SOCKET)]
    pub(super) ctl: PathBuf,
    /// Serve Prometheus text metrics on this loopback address, e.g. `127.0.0.1:9464`.
    #[arg(long, value_name = "ADDR")]
    pub(super) metrics: Option<String>,
    /// `weft ctl reload` refuses a policy of more bytes than this (its file and sub-policies
    /// together); only regular files are read.
    #[arg(long, value_name = "BYTES", default_value_t = ctl::DEFAULT_MAX_POLICY_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) max_policy_bytes: u64,
    /// Give the control socket (mode 0660: owner and group) to this group, whose members may
    /// then use `weft ctl`; a group that does not exist exits 2.
    #[arg(long, value_name = "NAME")]
    pub(super) ctl_group: Option<String>,
    /// Frame buffers in the pool (2 KB each: 64 to 1,048,576, i.e. up to 2 GB).
    #[arg(long, default_value_t = 32768, value_parser = clap::value_parser!(u32).range(64..=1 << 20))]
    pub(super) buffers: u32,
    /// Descriptors per flow ring (1 to 65,536; --ring × --max-queues at most 2^25).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1 << 16))]
    pub(super) ring: u32,
    /// Descriptors of one class the NIC holds at most.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) outstanding: u32,
    /// Flow queues at most (16 to 1,048,576).
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(16..=1 << 20))]
    pub(super) max_queues: u32,
    /// When idle, wait at most this many microseconds for a frame (in ppoll(2) on the rings:
    /// an arriving frame wakes the loop at once); 0: pure busy polling. At most 1000: control
    /// requests (`weft ctl`, also `stop`) are answered between waits, about once a
    /// millisecond, and a longer wait would hold them up (past 10 s `weft ctl` gives up).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub(super) idle_sleep_us: u64,
    /// Pin the dataplane thread to this CPU (a software NIC owns its core).
    #[arg(long, value_name = "N")]
    pub(super) cpu: Option<usize>,
    /// The dataplane thread's scheduler slice in microseconds (Linux >= 6.12, EEVDF: 100 to
    /// 100000): a short slice lets it preempt an application on its CPU as soon as it wakes
    /// from an idle wait, without raising its CPU share.
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub(super) slice_us: Option<u64>,
    /// Test hook: tenant N (1-based) also posts to other tenants' and invalid queues and
    /// rings doorbells naming them, every 100 µs; all refused and counted (`ctl stats`).
    #[arg(long, value_name = "N")]
    pub(super) rogue: Option<usize>,
    /// Receive ring: v2 (TPACKET_V2: every frame handed over as it arrives) or v3
    /// (TPACKET_V3: frames batched per block, a block handed over when full or after 1 ms,
    /// so a frame may wait up to 1 ms at low load).
    #[arg(long, default_value = "v2", value_parser = ["v2", "v3"])]
    pub(super) ring_version: String,
    /// How frames reach the NIC: af-packet (TPACKET rings) or af-xdp (AF_XDP sockets in copy
    /// mode and an XDP redirect program attached in generic mode while weft runs; needs the
    /// `af-xdp` cargo feature, on by default). --ring-version applies to af-packet only.
    #[arg(long, default_value = "af-packet", value_parser = dataplane::Backend::NAMES)]
    pub(super) backend: String,
    /// At start-up, turn off the ports' transmit checksum, TSO, GSO and GRO offloads where
    /// they are on, saying what changed (the default).
    #[arg(long, overrides_with = "no_fix_offloads")]
    pub(super) fix_offloads: bool,
    /// Leave the ports' offloads as they are, and refuse to start (exit 2, printing the
    /// `ethtool -K` command that turns them off) if any of them is on.
    #[arg(long, overrides_with = "fix_offloads")]
    pub(super) no_fix_offloads: bool,
}

#[derive(Subcommand)]
pub(crate) enum CtlCommand {
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
pub(crate) enum TestbedCommand {
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
