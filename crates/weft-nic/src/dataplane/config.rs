//! What `weft run` is given ([`Config`], [`IsolationConfig`]), how it fails ([`RunError`]),
//! and the loop's own counters ([`DpCounters`]).
//!
//! Invariants: a configuration is checked before the loop starts (reservations, one port
//! per tenant). Cost: none at run time.

use super::*;

/// What `weft run` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Policy file.
    pub policy: PathBuf,
    /// Options for loading it (the link rate is overridden by `rate_bps`).
    pub load: LoadOptions,
    /// Uplink interface.
    pub uplink: String,
    /// Transmit rate, bits per second.
    pub rate_bps: u64,
    /// Tenants: (name, interface); tenant id = position + 1.
    pub tenants: Vec<(String, String)>,
    /// Control socket.
    pub ctl: Option<PathBuf>,
    /// Prometheus endpoint (loopback address).
    pub metrics: Option<String>,
    /// Pool buffers (frames held at once).
    pub buffers: u32,
    /// Descriptor queues (flows) at once.
    pub max_queues: u32,
    /// Descriptors per flow ring.
    pub ring: u32,
    /// Descriptors of one class in the NIC at once.
    pub outstanding: u32,
    /// When passes of the loop find nothing to do, wait at most this long for a frame
    /// (`ppoll(2)` on the rings, so a frame wakes the loop at once; or the next paced
    /// departure); 0: pure busy polling.
    pub idle_sleep_us: u64,
    /// Pin the loop's thread to this CPU (`sched_setaffinity`).
    pub cpu: Option<usize>,
    /// The loop thread's scheduler slice, µs (`sched_setattr` `sched_runtime` for
    /// SCHED_OTHER, Linux ≥ 6.12's EEVDF): a short slice makes the loop preempt the task
    /// running on its CPU as soon as it wakes from its idle wait, without raising its share.
    pub slice_us: Option<u64>,
    /// Test hook (`weft run --rogue N`): tenant N's driver also behaves like a buggy or
    /// malicious VNIC, every 100 µs posting to other tenants' queues and to invalid ids and
    /// ringing doorbells that name them (kicks, class moves, rate changes). The interface
    /// must refuse and count all of it without touching the others (Loom §4.4).
    pub rogue: Option<usize>,
    /// Receive ring version (V3 batches per block, V2 hands over every frame at once).
    pub ring_version: crate::afpacket::RingVersion,
    /// AF_PACKET or AF_XDP.
    pub backend: Backend,
    /// Who may use which source addresses, and each tenant's share of the shared pools.
    pub isolation: IsolationConfig,
    /// Run in a cgroup of its own with this CPU weight (cgroup v2 scale, 1-10,000; a
    /// default group weighs 100), so the loop gets its core whatever else the host runs
    /// ([`crate::placement`]); `None`: stay where started.
    pub cpu_weight: Option<u32>,
}

impl Config {
    /// Refuses reservations that do not fit in their pool (`--reserved-queues` ×
    /// tenants > `--max-queues`, or `--reserved-buffers` × tenants > `--buffers`), naming the
    /// most each tenant can have: cut down silently, an operator's reservation would not be
    /// what it says.
    pub fn check_reservations(&self) -> Result<(), String> {
        let tenants = self.tenants.len().max(1) as u64;
        let pools = [
            (
                self.isolation.reserved_queues,
                "--reserved-queues",
                self.max_queues,
                "--max-queues",
                "flow queues",
            ),
            (
                self.isolation.reserved_buffers,
                "--reserved-buffers",
                self.buffers,
                "--buffers",
                "frame buffers",
            ),
        ];
        for (reserve, flag, pool, pool_flag, what) in pools {
            let Some(r) = reserve else { continue };
            let wanted = u64::from(r) * tenants;
            if wanted > u64::from(pool) {
                return Err(format!(
                    "{flag} {r} for {tenants} tenant{s} is {wanted} {what}, more than the \
                     {pool} of the pool ({pool_flag}): at most {most} per tenant",
                    s = if tenants == 1 { "" } else { "s" },
                    most = u64::from(pool) / tenants,
                ));
            }
        }
        Ok(())
    }
}

/// [`Config::isolation`]: see [`crate::isolation`].
#[derive(Debug, Clone)]
pub struct IsolationConfig {
    /// Per tenant (in `--tenant` order): the source MACs its port may use (`mac=` in
    /// `--tenant`); empty: learned and pinned. Shorter than the tenants: the rest learn.
    pub macs: Vec<Vec<Mac>>,
    /// Per tenant: the IP prefixes its frames' source addresses must lie in (`ip=` in
    /// `--tenant`); empty: not checked.
    pub ips: Vec<Vec<Prefix>>,
    /// Addresses a port may learn (`--macs-per-tenant`).
    pub macs_per_tenant: usize,
    /// A learned address idle this long makes room for its port's new one (`--mac-age-s`).
    pub mac_age_s: u64,
    /// Flow queues held for each tenant (`--reserved-queues`); default: half of
    /// `max_queues`, split evenly. At most `max_queues` ÷ tenants
    /// ([`Config::check_reservations`]).
    pub reserved_queues: Option<u32>,
    /// Frame buffers held for each tenant (`--reserved-buffers`); default: half of
    /// `buffers`, split evenly; at most `buffers` ÷ tenants. The return path's buffers are
    /// split the same way.
    pub reserved_buffers: Option<u32>,
}

impl Default for IsolationConfig {
    fn default() -> IsolationConfig {
        IsolationConfig {
            macs: Vec::new(),
            ips: Vec::new(),
            macs_per_tenant: 16,
            mac_age_s: 300,
            reserved_queues: None,
            reserved_buffers: None,
        }
    }
}

/// Errors that stop `weft run` before it starts.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("policy: {0}")]
    Policy(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Config(String),
    /// The chosen backend cannot be used (not in this build, or the kernel refused a step).
    #[error("{0}")]
    Backend(String),
}

/// Dataplane counters (beyond the engine's and the interface's).
#[derive(Debug, Clone, Default)]
pub struct DpCounters {
    pub rx_frames: Vec<u64>,
    pub rx_bytes: Vec<u64>,
    pub parse_errors: u64,
    pub oversize: u64,
    pub ring_full: u64,
    pub unclassified: u64,
    pub engine_drops: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
    pub reverse_frames: u64,
    /// Group (broadcast, multicast) frames copied to every tenant.
    pub reverse_flooded: u64,
    /// Unicast frames to an address no tenant owns: dropped, never flooded.
    pub reverse_unknown: u64,
    pub reverse_dropped: u64,
    /// Per tenant: frames refused at its port for their source address, by
    /// [`SourceReject::index`].
    pub source_rejects: Vec<[u64; 4]>,
    /// Per tenant: frames whose source IP lies outside its `ip=` prefixes.
    pub ip_rejects: Vec<u64>,
    /// Per tenant: new flows refused for want of a queue (`no_queue` is their sum).
    pub tenant_no_queue: Vec<u64>,
    /// Per tenant: frames refused for want of a buffer (`no_buffer` is their sum).
    pub tenant_no_buffer: Vec<u64>,
    /// Per tenant: return-path frames dropped for want of a buffer.
    pub tenant_reverse_dropped: Vec<u64>,
    pub reloads: u64,
    pub queues_reclaimed: u64,
    /// Times the uplink's link went down, and for how long in all, ms (ended periods).
    pub uplink_downs: u64,
    pub uplink_down_ms: u64,
    /// Class changes of flows whose classifier fields changed mid-flow: each asks for a
    /// `MoveClass` (moves of one queue that wait in the same doorbell are merged, the latest
    /// winning).
    pub class_moves: u64,
}
