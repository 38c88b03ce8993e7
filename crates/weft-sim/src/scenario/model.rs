//! The loaded scenario: its host, tenants, applications (with their kinds, flow schedules
//! and offered traffic) and the run's settings, and what may change after loading
//! ([`Scenario::set_duration`], [`Scenario::scale_time`]) with the checks that keep the
//! module's invariants.
//!
//! Invariants: those of a loaded [`Scenario`] (see the `scenario` module); a change that would
//! break one is refused and leaves the scenario as it was.
//!
//! Cost: an application's queries are O(schedule steps); a duration change re-checks the
//! offered load over every schedule step (O(steps × applications)).

use std::sync::Arc;

use weft_core::classifier::PacketMeta;
use weft_core::policy::Program;
use weft_core::units;

use super::offered::{peak_offered, OFFERED_WHY};
use super::time::{check_cells, check_times, fmt_ps};
use crate::nic::{NicKind, NicParams};

/// Largest exponential draw over its mean: [`crate::rng::Rng::exp`] takes the logarithm of
/// a uniform number of 53 bits, so a draw is at most 53 × ln 2 ≈ 36.7 means.
pub(super) const EXP_MAX_OVER_MEAN: f64 = 53.0 * std::f64::consts::LN_2;

/// Size of each response of a request/response application.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(u64),
    /// Exponentially distributed with this mean, bytes (at least 1).
    Exponential(u64),
}

impl SizeDist {
    /// The largest size a response can have, bytes: an exponential draw is at most about
    /// 36.7 times its mean.
    pub fn max_bytes(&self) -> u64 {
        match *self {
            SizeDist::Fixed(b) => b,
            SizeDist::Exponential(m) => ((m as f64 * EXP_MAX_OVER_MEAN) as u64).max(1),
        }
    }

    /// The mean size, bytes.
    pub fn mean_bytes(&self) -> u64 {
        match *self {
            SizeDist::Fixed(b) | SizeDist::Exponential(b) => b,
        }
    }
}

/// What an application does.
#[derive(Debug, Clone, PartialEq)]
pub enum AppKind {
    /// Backlogged flows, each keeping at most `window_bytes` queued in the host and NIC
    /// (TCP small queues / backpressure): when a flow's queued bytes fall to
    /// `window_bytes - segment_bytes` it writes another segment.
    Bulk { window_bytes: u64 },
    /// Requests arrive as a Poisson process (`rate_per_s`; the responses offer at most
    /// [`MAX_OFFERED_LOAD`](super::MAX_OFFERED_LOAD) times the link rate); each makes the host send
    /// a response; latency = response completion (last byte on the wire) − request arrival.
    /// `closed_loop` (sockperf ping-pong, TONIC §V-D): each flow has one request at a time, the
    /// next arriving when the previous response completes; `rate_per_s` is unused.
    ///
    /// `tcp` (`transport: tcp`): requests come from a client behind the scenario's network
    /// ([`crate::net`]) and each flow's responses are sent over a TCP connection; latency
    /// is then the client's: from sending the request (which reaches the host after the
    /// network's return path) to the response's last byte arriving in order, and a closed
    /// loop sends its next request then.
    RequestResponse {
        rate_per_s: f64,
        size: SizeDist,
        closed_loop: bool,
        tcp: bool,
    },
    /// UDP: each flow offers `rate_bps` (at most [`MAX_OFFERED_LOAD`](super::MAX_OFFERED_LOAD)
    /// times the link rate; `None`: unlimited, i.e. exactly that) in MTU packets; a packet is
    /// dropped at the socket when the flow already holds `socket_limit_bytes`.
    Udp {
        rate_bps: Option<u64>,
        socket_limit_bytes: u64,
    },
    /// TCP connections across the scenario's network ([`crate::net`]), each sending what its
    /// congestion window, the receiver's window and TCP small queues allow
    /// ([`crate::tcp`]): backlogged (iperf) without `size`; with `size`, each flow sends
    /// `size` bytes once, from its start, and its flow completion time is its latency (the
    /// application's job completes when all its flows have).
    Tcp { size: Option<u64> },
}

impl AppKind {
    /// Its flows are TCP connections: a `tcp` application, or requests and responses with
    /// `transport: tcp`.
    pub fn over_tcp(&self) -> bool {
        matches!(
            self,
            AppKind::Tcp { .. } | AppKind::RequestResponse { tcp: true, .. }
        )
    }

    /// Requests and responses over TCP.
    pub fn requests_over_tcp(&self) -> bool {
        matches!(self, AppKind::RequestResponse { tcp: true, .. })
    }

    /// Its latency is not its packets' delay: requests over TCP, or sized TCP flows (their
    /// completion times).
    pub fn completes_over_tcp(&self) -> bool {
        matches!(
            self,
            AppKind::RequestResponse { tcp: true, .. } | AppKind::Tcp { size: Some(_) }
        )
    }
}

/// One application of a tenant.
#[derive(Debug, Clone)]
pub struct App {
    /// Name (unique within its tenant: it keys the tenant's applications in the reports).
    pub name: String,
    /// Index of its tenant.
    pub tenant: usize,
    /// Packet metadata: the tenant's merged with the application's.
    pub meta: PacketMeta,
    /// What it does.
    pub kind: AppKind,
    /// Cores its threads run on; flows are placed on them (see `Host::placement`).
    pub cores: Vec<u16>,
    /// Flow count over time: `(at_ps, flows)`, sorted, first at `start`; the last entry
    /// with flows 0 is the stop.
    pub schedule: Vec<(u64, u32)>,
    /// Where each entry of `schedule` was written, `file:line:column` (`None`: not written,
    /// as a start of 0 or the stop at the end; and stops), for warnings.
    pub schedule_at: Vec<Option<String>>,
    /// Prioritized application (TONIC head insertion, the `mq-pri` high class). `None`:
    /// derived from the policy (its leaf is the most urgent child of a `prio` node).
    pub prioritized: Option<bool>,
    /// DCB class for `mq-pri`/`mq-fair` (`None`: derived).
    pub dcb_class: Option<u8>,
    /// The sending host its flows run on (`network.hosts`; 0 with one host).
    pub host: u16,
    /// Where its TCP connections go: a sending host's index, or `network.hosts` for the
    /// receiver at the far end of the switch (the default).
    pub to: u16,
}

impl App {
    /// Whether the application always has data (bulk or unlimited UDP): its tenant is
    /// backlogged while it runs.
    pub fn greedy(&self) -> bool {
        match self.kind {
            AppKind::Bulk { .. } | AppKind::Tcp { size: None } => true,
            AppKind::Tcp { size: Some(_) } => false,
            AppKind::Udp { rate_bps, .. } => rate_bps.is_none(),
            AppKind::RequestResponse { .. } => false,
        }
    }

    /// Most flows the application ever has.
    pub fn max_flows(&self) -> u32 {
        self.schedule.iter().map(|s| s.1).max().unwrap_or(0)
    }

    /// Packets the application holds at once by its own limits when all its flows start:
    /// each bulk flow its window (whole segments of MTU packets), each closed-loop request/response
    /// flow its largest response, each TCP connection (of `net`) what TCP small queues let it
    /// keep in the host and the segments its receive window lets it keep in flight (see
    /// [`MAX_BURST_PACKETS`](super::MAX_BURST_PACKETS)).
    pub fn burst_packets(&self, host: &Host, net: &crate::net::Network) -> u64 {
        let mtu = u64::from(host.mtu_bytes.max(1));
        if self.kind.over_tcp() {
            let t = &net.tcp;
            let held = t.tsq_bytes + u64::from(t.tso_bytes) + t.rwnd_bytes;
            return held
                .div_ceil(u64::from(t.mss.max(1)))
                .saturating_mul(u64::from(self.max_flows()));
        }
        let per_flow = match &self.kind {
            AppKind::Bulk { window_bytes } => {
                // As `Sim::refill` writes: segments of min(segment, window) bytes.
                let seg = host.segment_bytes.min(*window_bytes).max(1);
                (window_bytes / seg).saturating_mul(seg.div_ceil(mtu))
            }
            AppKind::RequestResponse {
                size,
                closed_loop: true,
                ..
            } => size.max_bytes().div_ceil(mtu),
            AppKind::RequestResponse { .. } | AppKind::Udp { .. } | AppKind::Tcp { .. } => 0,
        };
        per_flow.saturating_mul(u64::from(self.max_flows()))
    }

    /// Flows active at `t_ps`.
    pub fn flows_at(&self, t_ps: u64) -> u32 {
        let mut n = 0;
        for &(at, f) in &self.schedule {
            if at <= t_ps {
                n = f;
            }
        }
        n
    }

    /// True when the application has at least one flow during all of `[from, to)`.
    pub fn active_throughout(&self, from_ps: u64, to_ps: u64) -> bool {
        if self.flows_at(from_ps) == 0 {
            return false;
        }
        self.schedule
            .iter()
            .all(|&(at, f)| at <= from_ps || at >= to_ps || f > 0)
    }
}

/// A tenant: a name and its applications (indices into `Scenario::apps`).
#[derive(Debug, Clone)]
pub struct Tenant {
    /// Name (unique: it keys the tenants in the reports).
    pub name: String,
    pub apps: Vec<usize>,
}

/// How flows are placed on an application's cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each flow on a core drawn at random (seeded): the uneven spread XPS sees in TONIC §V.
    Random,
    /// Flow k on core k mod |cores|.
    RoundRobin,
}

/// The sending host.
#[derive(Debug, Clone)]
pub struct Host {
    /// Cores (at least 1).
    pub cores: u16,
    /// Bytes an application writes at once (a sendmsg; no TSO: it is cut into MTU packets).
    pub segment_bytes: u64,
    /// Frame size of full packets, bytes.
    pub mtu_bytes: u32,
    /// Driver CPU time per packet, ps (counted, not a bottleneck, in every model).
    pub cpu_ps_per_packet: u64,
    /// CPU time of one doorbell (MMIO) write, ps (counted).
    pub cpu_ps_per_doorbell: u64,
    /// Flow placement.
    pub placement: Placement,
    /// When a bulk flow lost packets to a drop, it resends after this long, ps.
    pub retry_ps: u64,
    /// Every this long, each flow moves to a core of its application drawn at random
    /// (seeded), as the OS moves threads between cores: under XPS its packets then go to
    /// another queue. `None`: flows stay where they were placed.
    pub migrate_ps: Option<u64>,
}

/// A loaded, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name: the `name` key (a name as tenants' are, and no `/`, `.` or `..`: `weft demo`
    /// makes it a directory), else the file's stem with such characters replaced by `_`.
    pub name: String,
    /// Free text shown in index.html (escaped there): no control characters but newlines
    /// and tabs, no bidirectional overrides.
    pub description: String,
    /// Where it was read from (for messages).
    pub path: String,
    /// The compiled policy.
    pub program: Arc<Program>,
    /// Simulated time, ps.
    pub duration_ps: u64,
    /// Seed of every random stream.
    pub seed: u64,
    /// Throughput window, ps.
    pub window_ps: u64,
    /// Where `window` was written (`file:line:column`), for warnings; `None`: the default.
    pub window_at: Option<String>,
    /// Latency percentile window, ps.
    pub latency_window_ps: u64,
    /// NIC models to run, in order (at least one, none twice: results are keyed by model).
    pub nics: Vec<NicKind>,
    /// Parameters of the models.
    pub nic_params: NicParams,
    pub host: Host,
    /// The path behind the link that TCP applications cross (defaults when not written).
    pub network: crate::net::Network,
    pub tenants: Vec<Tenant>,
    pub apps: Vec<App>,
    /// Time scale note shown in reports as written (e.g. "1 paper second = 25 ms
    /// simulated (phases of 50 ms)"); [`Scenario::time_scale_ratio`] is what it says.
    pub time_scale: Option<String>,
    /// What `time_scale` means: `(paper_ps, simulated_ps)`, both positive: `paper_ps` of
    /// the paper's time are `simulated_ps` here (`1 paper second = 100 ms`: 10^12, 10^11).
    pub time_scale_ratio: Option<(u64, u64)>,
    /// Where `latency_window` was written (`file:line:column`), for warnings; `None`: the
    /// default (five throughput windows).
    pub latency_window_at: Option<String>,
    /// The policy's warnings (`small-burst`), a line each: `file:line:col:
    /// warning[rule]: ...`, or for `policy_inline` at the scenario file's line and column as
    /// its errors are (`file:line:col: policy_inline: warning[rule]: ...`).
    pub policy_warnings: Vec<String>,
    /// Most the applications offer together at any instant, in multiples of the link rate (at most
    /// [`Scenario::max_offered_load`]; see
    /// [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`](super::DEFAULT_MAX_TOTAL_OFFERED_LOAD)).
    pub offered_load: f64,
    /// The cap on [`Scenario::offered_load`] the scenario was loaded under, multiples of
    /// the link rate.
    pub max_offered_load: u64,
    /// Event budget of each model's run, events ([`DEFAULT_MAX_EVENTS`](super::DEFAULT_MAX_EVENTS)
    /// says what counts).
    pub max_events: u64,
    /// Where the budget came from, for the message when a run reaches it: `--max-events`,
    /// `file:line:col` of `limits.max_events`, or `None` (the default).
    pub max_events_from: Option<String>,
}

impl Scenario {
    /// Sets the simulated time (e.g. the CLI's `--duration`), keeping the windows; refused past
    /// [`LAST_ARRIVAL_PS`](weft_core::sched::LAST_ARRIVAL_PS), beyond
    /// [`MAX_WINDOWS`](super::MAX_WINDOWS) windows or [`MAX_WINDOW_CELLS`](super::MAX_WINDOW_CELLS)
    /// windows × applications, or when the longer run reaches schedule steps that offer more than
    /// [`Scenario::max_offered_load`] (the message says why).
    pub fn set_duration(&mut self, duration_ps: u64) -> Result<(), String> {
        check_times(duration_ps, self.window_ps, self.latency_window_ps)
            .and_then(|()| {
                check_cells(
                    duration_ps,
                    self.window_ps,
                    self.latency_window_ps,
                    self.apps.len(),
                )
            })
            .map_err(|m| format!("{}: {m}", fmt_ps(duration_ps)))?;
        // A longer run may reach schedule steps that raise the offered load.
        let link = &self.program.link;
        let peak = peak_offered(&self.apps, &self.host, link, duration_ps);
        if let Some(peak) = peak
            .as_ref()
            .filter(|p| p.over(self.max_offered_load, link))
        {
            let (what, _) = peak.describe(
                &self.apps,
                &self.tenants,
                &self.host,
                link,
                &units::format_rate(link.rate_bps),
            );
            return Err(format!(
                "{}: {what}; a scenario may offer at most {} times the link rate: \
                 {OFFERED_WHY}",
                fmt_ps(duration_ps),
                self.max_offered_load
            ));
        }
        self.offered_load = peak.map_or(0.0, |p| p.load(link));
        self.duration_ps = duration_ps;
        Ok(())
    }

    /// What in the scenario does nothing in a run of its duration, a line each (`file:line:col:
    /// ...` where written): an application that starts at or after the end, a schedule step
    /// at or after the end, a throughput window longer than the run, a `latency_window`
    /// longer than the run.
    pub fn warnings(&self) -> Vec<String> {
        let end = self.duration_ps;
        let mut out = Vec::new();
        for a in &self.apps {
            let name = format!("{}/{}", self.tenants[a.tenant].name, a.name);
            for (i, (&(t, flows), at)) in a.schedule.iter().zip(&a.schedule_at).enumerate() {
                let Some(at) = at.as_ref().filter(|_| t >= end) else {
                    continue;
                };
                out.push(if i == 0 {
                    format!(
                        "{at}: {name} starts at {}, at or after the end of the run ({}): it \
                         sends nothing",
                        units::format_time(t),
                        units::format_time(end)
                    )
                } else {
                    format!(
                        "{at}: {name}'s schedule step to {flows} flows at {} is at or after the \
                         end of the run ({}): it never happens",
                        units::format_time(t),
                        units::format_time(end)
                    )
                });
            }
        }
        if self.window_ps > end {
            out.push(format!(
                "{}: the throughput window ({}) is longer than the run ({}): no whole window, so \
                 no Jain's index (jain_min is null)",
                self.window_at.as_deref().unwrap_or(&self.path),
                units::format_time(self.window_ps),
                units::format_time(end)
            ));
        }
        // A latency window longer than the run, where written (the default, five throughput
        // windows, is one window of the whole run when the run is shorter: not a mistake).
        if let Some(at) = self
            .latency_window_at
            .as_deref()
            .filter(|_| self.latency_window_ps > end)
        {
            out.push(format!(
                "{at}: the latency window ({}) is longer than the run ({}): latency.csv and \
                 latency.svg have one window, the whole run, and no latency over time",
                units::format_time(self.latency_window_ps),
                units::format_time(end)
            ));
        }
        out
    }

    /// `tenant/app` of every application whose packets no leaf of the policy matches (the
    /// engine-based models drop them as unclassified).
    pub fn unclassified_apps(&self) -> Vec<String> {
        self.apps
            .iter()
            .filter(|a| {
                matches!(
                    self.program.classify(&a.meta),
                    weft_core::policy::Classification::Unclassified { .. }
                )
            })
            .map(|a| format!("{}/{}", self.tenants[a.tenant].name, a.name))
            .collect()
    }

    /// Multiplies every time of the scenario (duration, windows, schedules) by `num / den`,
    /// e.g. to run a short version of an experiment; rates and sizes are unchanged. A time
    /// scaled past the end of the clock is `u64::MAX` (a schedule step then never happens;
    /// a duration past 2^63 ps is refused by the simulator).
    pub fn scale_time(&mut self, num: u64, den: u64) {
        let f = |t: u64| {
            u64::try_from(t as u128 * num as u128 / den.max(1) as u128).unwrap_or(u64::MAX)
        };
        self.duration_ps = f(self.duration_ps).max(1);
        self.window_ps = f(self.window_ps).max(1);
        self.latency_window_ps = f(self.latency_window_ps).max(1);
        for a in &mut self.apps {
            for s in &mut a.schedule {
                s.0 = f(s.0);
            }
        }
    }
}
