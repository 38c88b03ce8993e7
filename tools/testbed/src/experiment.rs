//! What an experiment is ([`Experiment`], its tenants, [`Mode`]) with its policies and HTB
//! classes, and the CPUs the applications run on.
//!
//! Invariants: weft and HTB get the same topology, rates and applications. Cost: none at run
//! time.

use super::*;

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
    /// [`weft_nic::dataplane::set_slice`]), the same under weft and HTB (env
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
pub(super) fn env_or<T: std::str::FromStr>(name: &str, default: Option<T>) -> Option<T> {
    match std::env::var(name) {
        Ok(v) if v == "none" => None,
        Ok(v) => v.parse().ok().or(default),
        Err(_) => default,
    }
}

pub(super) const RX: &str = "10.77.0.100";
pub(super) const RX2: &str = "10.77.0.200";
/// sockperf's server port (UDP), which `limit-priority`'s policy and filters match.
pub const SOCKPERF_PORT: u16 = 11111;
/// `limit-priority`'s shaping class's bucket: four full frames (an explicit burst of a
/// few MTUs; HTB's classes get the same `burst`).
pub(super) const LIMIT_PRIO_BURST: u64 = 4 * 1514;

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

    pub(super) fn policy_with(&self, weights: &[u64]) -> String {
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
pub(super) fn host_cpus(nic_cpu: usize) -> Option<String> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let v: Vec<String> = (0..n)
        .filter(|&c| c != nic_cpu)
        .map(|c| c.to_string())
        .collect();
    (!v.is_empty()).then(|| v.join(","))
}

/// `ip netns exec NS` with the applications' CPUs ([`Experiment::app_cpus`]).
pub(super) fn pinned(exp: &Experiment, ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    if let Some(cpus) = &exp.app_cpus {
        c.args(["taskset", "-c", cpus]);
    }
    c
}

pub(super) fn cpu_ticks_pid(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

pub(super) fn cpu_ticks_system() -> Option<(u64, u64)> {
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
