//! The software NIC's dataplane: one busy-polling thread that plays both sides of
//! the OS/NIC interface ([`crate::iface`], Loom §4.3) around weft's scheduling core.
//!
//! The loop runs in *passes*, each with `now_ps` read once from [`crate::clock`]. A pass
//! does all the cheap work there is and at most **one expensive step**: a `send(2)` (with a
//! transmit ring, the kick that sends what the step queued there), which
//! on veth runs the receiving side's network stack inside the call (the receiver's TCP, or a
//! tenant's TCP acting on an ACK and sending its next segments), 4–50 µs. So a frame that
//! arrives while a send is in progress is seen right after it, whatever else is queued:
//! 1. **Host side, ingress**: frames from each tenant interface's receive ring
//!    ([`crate::afpacket`], at most [`RX_BATCH`] per ring and pass) are parsed
//!    ([`crate::parse`]; the tenant is the ingress interface's position in the
//!    configuration, 1-based), checked against the source addresses the port owns
//!    ([`crate::isolation::MacTable`]: configured, or learned and pinned; another tenant's
//!    address is dropped and counted), copied into a buffer of the pool (within the
//!    tenant's [`Budget`]), and posted to their flow's
//!    descriptor queue (one queue per five-tuple, owned by the tenant's driver, created on
//!    the flow's first frame, within the tenant's budget of queues, and bound to the leaf
//!    and shaping classes the policy
//!    classifies it into: classification once per flow, as in Loom). A frame whose
//!    classifier fields differ from its flow's (a DSCP re-marked mid-flow) classifies the
//!    flow again; if its class changed, the tenant's driver moves the queue with an inline
//!    metadata update (`MoveClass`, Loom §4.3) in its next doorbell. Each tenant then rings
//!    one doorbell for every queue it posted to.
//! 2. **NIC side**: doorbells are processed (validated: ownership), descriptors fetched
//!    (bounded per class) and posted to the engine's own queue for their flow (opened once
//!    per flow with [`Engine::open_flow`], again when a doorbell moves the flow to another
//!    class or a reload replaces the engine): the engine finds the flow by its queue, with
//!    no lookup per packet (Loom §4.2.1).
//! 3. **The expensive step**: if the paced link is free (`next_free_ps ≤ now`), the engine's
//!    next departure is sent on the uplink and its descriptor completed; the link becomes
//!    free again after the frame's wire time at the configured rate (policy link overhead
//!    included). Frames start back to back as long as the loop is less than
//!    [`CATCH_UP_PS`] late, so loop jitter does not lower the rate. Otherwise one frame of
//!    the reverse path goes to its tenant, tenants served round robin.
//! 4. **Host side, completions**: buffers of completed descriptors return to the pool.
//! 5. **Reverse path, receive side**: frames arriving on the uplink (ACKs, replies, ARP)
//!    are copied into per-tenant FIFOs by destination MAC (the table of step 1; broadcast and
//!    multicast are copied to every tenant, unicast to an address no tenant owns is dropped
//!    and counted, never flooded; each tenant's FIFO within its budget of the return path's
//!    buffers). They are not scheduled by the
//!    policy, but one tenant's burst of ACKs delays another tenant's frame by at most one
//!    send. While [`REVERSE_BUFFERS`] frames wait, the rest stay in the ring.
//! 6. About every millisecond: control requests ([`crate::ctl`]), rate sampling, idle-queue
//!    reclamation, the stop flag; every 100 ms the uplink's link state (departures wait
//!    while it is down, logged and counted).
//! 7. **Idle**: after a few passes with nothing to do, the loop waits in `ppoll(2)` on its
//!    rings (a frame wakes it at once) until the next paced departure, at most
//!    `idle_sleep_us` (0: it never waits, pure busy polling).
//!
//! Where the time goes (loop passes, sends, ring waits, NIC sojourn per tenant) is measured
//! by `timing` histograms in the stats (docs/dataplane.md, latency).
//!
//! Invariants: the daemon never panics on input (bad frames are counted: `parse_errors`,
//! `oversize`); every frame taken from a ring is transmitted or dropped with a counted
//! reason (`source_rejected`, `no_buffer`, `ring_full`, `no_queue`, `unclassified`, engine
//! drops, `tx_errors`, `reverse_unknown`, `reverse_dropped`), per tenant where a tenant
//! caused it; no tenant's frames can take another tenant's address, its reserved queues or
//! buffers;
//! a reload swaps the engine only after the new policy compiled, and the old engine keeps
//! draining until empty (no admitted packet is lost); memory is bounded by the pool.
//!
//! Cost: per frame, one parse, one hash lookup (flow → queue), one comparison of its
//! classifier fields with the flow's, one copy into the pool, one post, a share of a
//! doorbell, one engine enqueue/dequeue, a copy into the transmit ring and a share of a
//! kick (a `send(2)` per transmit step, not per frame); with shaping classes, one more hash
//! lookup (queue → flow) at the departure, to count it at its classes (`shapers`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;
use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{self, Classification, LoadOptions, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::link::wire_ps;
use weft_core::sched::{DropReason, Engine, FlowHandle, FlowQueue, Packet, Update};

use crate::afpacket::{PacketSocket, PacketSocketStats, RingConfig};
use crate::isolation::{
    fmt_mac, source_ip, Budget, Destination, Mac, MacTable, Prefix, SourceReject,
};
use crate::link::LinkState;
use crate::stats::{
    DataplaneStats, NodeStats, PortStats, ShaperStats, Stats, TenantStats, TenantTiming,
    TimingStats, TENANT_DROPS,
};

/// Where frames come from and go to: an AF_PACKET socket in production, memory in tests
/// (so the loop's conservation and robustness are tested without root).
pub trait Port {
    /// Calls `f` on the frames ready now, about `max_frames` at most (a TPACKET_V3 ring
    /// hands over whole blocks), with the kernel's receive timestamp (`CLOCK_REALTIME` ns;
    /// 0 when unknown).
    fn recv_batch(&mut self, max_frames: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize;
    /// Sends a frame; `Ok(false)` when it could not be queued.
    fn send(&self, frame: &[u8]) -> std::io::Result<bool>;
    /// Pushes out frames `send` queued without a system call (AF_XDP batches its kicks);
    /// called after each transmit step of the loop.
    fn flush(&self) {}
    /// A descriptor that `poll(2)` reports readable when frames are ready, if the port has
    /// one: an idle loop then waits in `ppoll(2)` and wakes at once when a frame arrives
    /// (otherwise it sleeps a fixed time).
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Whether the port's link is up (`None`: unknown, taken as up). The loop asks the
    /// uplink's every [`LINK_CHECK_PS`] and holds departures while it is down.
    fn link_up(&self) -> Option<bool> {
        None
    }
    /// The port's own counters for `ctl stats` (`ports`), if it has any.
    fn stats(&self) -> Option<PortStats> {
        None
    }
    /// [`Port::stats`] as JSON, `Null` when it has none.
    fn counters(&self) -> Value {
        self.stats()
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_default()
    }
}

/// Where `weft run` gets and puts frames (`--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// AF_PACKET with TPACKET rings ([`crate::afpacket`]).
    #[default]
    AfPacket,
    /// AF_XDP sockets and an XDP redirect program (`crate::afxdp`, cargo feature `af-xdp`).
    AfXdp,
}

impl Backend {
    pub const NAMES: [&'static str; 2] = ["af-packet", "af-xdp"];

    pub fn name(self) -> &'static str {
        match self {
            Backend::AfPacket => "af-packet",
            Backend::AfXdp => "af-xdp",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "af-packet" => Some(Backend::AfPacket),
            "af-xdp" => Some(Backend::AfXdp),
            _ => None,
        }
    }

    /// Whether this build has the backend (AF_XDP needs the `af-xdp` feature).
    pub fn available(self) -> bool {
        match self {
            Backend::AfPacket => true,
            Backend::AfXdp => cfg!(feature = "af-xdp"),
        }
    }
}

/// Descriptors of all flow rings together (`ring × max_queues`) that [`run`] accepts (checked
/// before it opens anything; [`run_ports`], given its ports, does not check).
pub const MAX_DESCRIPTORS: u64 = 1 << 25;

/// An interface claimed by this daemon (see [`claim_interface`]): the lock file, held open
/// (the lock lasts as long as the descriptor).
#[derive(Debug)]
struct Claim {
    /// The lock file, locked; closing it (at drop, or when the process dies) releases it.
    _lock: std::fs::File,
    /// Its path, removed at drop while still locked.
    path: std::path::PathBuf,
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Removed while locked, so a daemon that opened it meanwhile finds, once it holds
        // the lock, that the path no longer names its file, and takes a new one (below).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Claims interface `ifname` for this process: an exclusive `flock(2)` on
/// `/run/weft/iface-NETNS-IFINDEX.lock` (NETNS: the network namespace's inode), held while the
/// daemon runs. Two daemons on one interface would each receive every frame (AF_PACKET hands
/// each socket a copy) and both forward it; the second is refused, naming the first's pid.
/// The lock ends with its process, so a killed daemon leaves no claim behind (only its file,
/// which the next claim reuses); a daemon that exits removes its file. A lock is good only
/// while the path still names the locked file (a daemon that exited may have removed it
/// between our open and our lock): otherwise the claim starts again. `None` when there is
/// nothing to claim (no such interface: opening it reports that) or no lock can be made
/// (`/run/weft` not writable: not root).
/// Where the interface claims' lock files are.
pub const CLAIM_DIR: &str = "/run/weft";

/// The start of the name of every claim lock file in the network namespace with inode
/// `netns` (`iface-NETNS-IFINDEX.lock`): a daemon killed with SIGKILL leaves its files, which
/// `weft testbed down` removes by it with the namespace.
pub fn claim_prefix(netns: u64) -> String {
    format!("iface-{netns}-")
}

fn claim_interface(ifname: &str, what: &str) -> Result<Option<Claim>, RunError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::MetadataExt;
    // No such interface: nothing to claim (opening its port says why).
    let Ok(ifindex) = crate::afpacket::ifindex(ifname) else {
        return Ok(None);
    };
    let netns = std::fs::metadata("/proc/self/ns/net").map_or(0, |m| m.ino());
    let dir = std::path::Path::new(CLAIM_DIR);
    if std::fs::create_dir_all(dir).is_err() {
        return Ok(None);
    }
    let path = dir.join(format!("{}{ifindex}.lock", claim_prefix(netns)));
    // Each retry follows another daemon's exit between our open and our lock: a few suffice.
    for _ in 0..16 {
        let Ok(mut f) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
        else {
            return Ok(None);
        };
        if !matches!(weft_sys::fs::try_lock_exclusive(&f), Ok(true)) {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            return Err(RunError::Config(format!(
                "{what}: `{ifname}` is in use by another weft run (pid {}) in this network \
                 namespace; two would both forward every frame",
                pid.trim()
            )));
        }
        let same =
            |a: &std::fs::Metadata, b: &std::fs::Metadata| (a.dev(), a.ino()) == (b.dev(), b.ino());
        match (f.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) if same(&a, &b) => {
                let _ = f.set_len(0);
                let _ = f.rewind();
                let _ = write!(f, "{}", std::process::id());
                return Ok(Some(Claim { _lock: f, path }));
            }
            _ => continue,
        }
    }
    Ok(None)
}

impl RunError {
    /// The error with what it concerns in front (`--tenant b=t2: ...`).
    fn naming(self, what: &str) -> RunError {
        match self {
            RunError::Io(e) => RunError::Io(std::io::Error::new(e.kind(), format!("{what}: {e}"))),
            RunError::Policy(m) => RunError::Policy(m),
            RunError::Config(m) => RunError::Config(format!("{what}: {m}")),
            RunError::Backend(m) => RunError::Backend(format!("{what}: {m}")),
        }
    }
}

fn open_port(cfg: &Config, ifname: &str, ring: RingConfig) -> Result<Box<dyn Port>, RunError> {
    match cfg.backend {
        Backend::AfPacket => Ok(Box::new(PacketSocket::open(ifname, ring)?)),
        #[cfg(feature = "af-xdp")]
        Backend::AfXdp => crate::afxdp::XdpPort::open(ifname)
            .map(|p| Box::new(p) as Box<dyn Port>)
            .map_err(|e| RunError::Backend(e.to_string())),
        #[cfg(not(feature = "af-xdp"))]
        Backend::AfXdp => Err(RunError::Backend(
            "the af-xdp backend is not in this build (cargo feature `af-xdp` of weft-nic)".into(),
        )),
    }
}

/// The counters of the ports that have them, the tenants' then the uplink's.
fn port_stats(tenants: &[Box<dyn Port>], uplink: &dyn Port) -> Vec<PortStats> {
    tenants
        .iter()
        .map(|p| p.stats())
        .chain(std::iter::once(uplink.stats()))
        .flatten()
        .collect()
}

/// Whether interface `name`'s link is up, read once ([`LinkState::up`]: from
/// `/sys/class/net/NAME/operstate`; `None` when it cannot be read). A port that is asked
/// again and again keeps a [`LinkState`] instead, which reads without allocating.
pub fn link_up(name: &str) -> Option<bool> {
    LinkState::new(name).up()
}

/// How often the loop reads the uplink's link state, ps (100 ms).
pub const LINK_CHECK_PS: u64 = 100_000_000_000;

impl Port for PacketSocket {
    fn recv_batch(&mut self, max_frames: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        PacketSocket::recv_batch(self, max_frames, f)
    }
    fn send(&self, frame: &[u8]) -> std::io::Result<bool> {
        PacketSocket::send(self, frame)
    }
    fn flush(&self) {
        PacketSocket::flush(self)
    }
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd())
    }
    fn stats(&self) -> Option<PortStats> {
        Some(PortStats::AfPacket(self.port_stats()))
    }
    fn link_up(&self) -> Option<bool> {
        PacketSocket::link_up(self)
    }
}
use crate::ctl::{self, Reply, Request};
use crate::iface::{self, Control, Descriptor, DoorbellEntry, Interface, QueueId, Status};
use crate::timing::Hist;
use crate::{clock, parse};

/// Bytes per pool buffer (frames longer than this are dropped as `oversize`).
pub const BUF_BYTES: usize = 2048;
/// How late the loop may be and still send the next frame back to back, ps (500 µs: on a
/// shared 2-core machine the loop is preempted for hundreds of microseconds at a time; a
/// 50 µs window lost ~10% of the line rate, 500 µs none, at the cost of bursts of at most
/// 500 µs of line rate after a preemption, like a qdisc's burst).
pub const CATCH_UP_PS: u64 = 500_000_000;
/// Frames read from one receive ring per pass of the loop (bounds the time between two
/// transmit decisions).
pub const RX_BATCH: u32 = 32;
/// Uplink frames held for the reverse path at once (beyond, they wait in the ring).
pub const REVERSE_BUFFERS: u32 = 1024;
/// The uplink ring is read while this many reverse buffers are free: more than a TPACKET_V3
/// block can hold (32 KiB of minimum-size frames with their headers, ~290), so a batch never
/// finds the pool empty.
const REVERSE_ROOM: usize = 512;
/// A sparse tenant's reverse frame goes before a due departure unless the uplink is this far
/// behind (50 µs, two full-size frames at 500 Mbit/s; the pacer catches up within
/// [`CATCH_UP_PS`]).
const SPARSE_LATE_PS: u64 = 50_000_000;
/// A backlogged tenant's reverse frame is not started when a departure is due within 10 µs
/// (about two median reverse sends), so departures leave on time.
const REVERSE_GUARD_PS: u64 = 10_000_000;
/// Passes that found nothing to do before the loop waits (`Config::idle_sleep_us`).
const IDLE_SPINS: u32 = 16;

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

/// Where the loop's time goes and how long frames wait (`ctl stats`: `timing`; reset with
/// `{"cmd": "reset_timing"}`).
#[derive(Default)]
struct Timing {
    /// Duration of loop iterations that did some work.
    busy_iter: Hist,
    /// One frame handed to the uplink / to a tenant (reverse path): a `send(2)`, or with a
    /// transmit ring (AF_PACKET's, AF_XDP's) a copy into it.
    uplink_send: Hist,
    reverse_send: Hist,
    /// The flush after a transmit step: with a transmit ring the kick (one `send(2)` that
    /// sends what the step queued, and on veth runs the receiving side's stack).
    uplink_kick: Hist,
    reverse_kick: Hist,
    /// How late departures start: transmit start − the later of the paced start time and
    /// the frame's arrival (the engine's choice aside, how long the loop kept it waiting).
    departure_late: Hist,
    /// Per tenant: receive-ring wait of its frames (kernel timestamp → read by the loop),
    /// NIC sojourn (read → transmission starts), receive-ring wait of the uplink frames
    /// addressed to it.
    rx_wait: Vec<Hist>,
    queue: Vec<Hist>,
    reverse_wait: Vec<Hist>,
    /// Per pool buffer: when its frame was read and its tenant.
    posted: Vec<(u64, u32)>,
}

impl Timing {
    fn new(tenants: usize, buffers: usize) -> Timing {
        Timing {
            rx_wait: vec![Hist::default(); tenants],
            queue: vec![Hist::default(); tenants],
            reverse_wait: vec![Hist::default(); tenants],
            posted: vec![(0, 0); buffers],
            ..Timing::default()
        }
    }

    fn clear(&mut self) {
        self.busy_iter.clear();
        self.uplink_send.clear();
        self.reverse_send.clear();
        self.uplink_kick.clear();
        self.reverse_kick.clear();
        self.departure_late.clear();
        for h in self
            .rx_wait
            .iter_mut()
            .chain(&mut self.queue)
            .chain(&mut self.reverse_wait)
        {
            h.clear();
        }
    }

    fn stats(&self) -> TimingStats {
        TimingStats {
            busy_iteration: self.busy_iter.summary(),
            uplink_send: self.uplink_send.summary(),
            reverse_send: self.reverse_send.summary(),
            uplink_kick: self.uplink_kick.summary(),
            reverse_kick: self.reverse_kick.summary(),
            departure_late: self.departure_late.summary(),
            tenants: (0..self.rx_wait.len())
                .map(|t| TenantTiming {
                    tenant: t + 1,
                    rx_wait: self.rx_wait[t].summary(),
                    queue: self.queue[t].summary(),
                    reverse_wait: self.reverse_wait[t].summary(),
                })
                .collect(),
        }
    }
}

/// Flushes `port` (with a transmit ring, the kick) and records how long it took, in ns.
fn timed_flush(port: &dyn Port, hist: &mut Hist) {
    let t0 = clock::now_ps();
    port.flush();
    hist.record(clock::now_ps().saturating_sub(t0) / 1000);
}

/// Ring wait from a kernel receive timestamp (ns, `CLOCK_REALTIME`) to `now_real`; `None`
/// when there is no timestamp.
fn ring_wait(ts: u64, now_real: u64) -> Option<u64> {
    (ts != 0).then(|| now_real.saturating_sub(ts))
}

/// The reverse path's frames waiting for their tenant: a pool of buffers and one FIFO per
/// tenant. A tenant whose FIFO was empty when a frame arrived is *sparse* and served first
/// (its frame waits for no other tenant's backlog: a request/response tenant's replies pass a
/// bulk tenant's ACKs, as in DRR++ / fq_codel's new flows); tenants with a backlog are
/// served round robin, one frame per turn. No allocation after start.
struct Reverse {
    /// Buffers per tenant: one tenant's flood of return traffic leaves the others theirs.
    budget: Budget,
    pool: Vec<u8>,
    lens: Vec<u16>,
    ts: Vec<u64>,
    free: Vec<u32>,
    queues: Vec<VecDeque<u32>>,
    /// Sparse tenants in arrival order (each at most once: `is_sparse`).
    sparse: VecDeque<usize>,
    is_sparse: Vec<bool>,
    next: usize,
}

impl Reverse {
    fn new(tenants: usize, buffers: u32) -> Reverse {
        Reverse {
            budget: Budget::new(buffers, tenants, Budget::default_reserve(buffers, tenants)),
            pool: vec![0; buffers as usize * BUF_BYTES],
            lens: vec![0; buffers as usize],
            ts: vec![0; buffers as usize],
            free: (0..buffers).rev().collect(),
            queues: (0..tenants)
                .map(|_| VecDeque::with_capacity(buffers as usize))
                .collect(),
            sparse: VecDeque::with_capacity(tenants),
            is_sparse: vec![false; tenants],
            next: 0,
        }
    }

    /// Whether a sparse tenant's frame (probably) waits.
    fn has_sparse(&self) -> bool {
        !self.sparse.is_empty()
    }

    /// Whether any frame waits.
    fn pending(&self) -> bool {
        self.free.len() < self.lens.len()
    }

    /// Copies `frame` (at most [`BUF_BYTES`]) into a buffer queued for tenant `t`; false
    /// when no buffer is free.
    fn push(&mut self, t: usize, frame: &[u8], ts: u64) -> bool {
        if !self.budget.try_take(t) {
            return false;
        }
        let Some(b) = self.free.pop() else {
            self.budget.give(t);
            return false;
        };
        let off = b as usize * BUF_BYTES;
        self.pool[off..off + frame.len()].copy_from_slice(frame);
        self.lens[b as usize] = frame.len() as u16;
        self.ts[b as usize] = ts;
        if self.queues[t].is_empty() && !self.is_sparse[t] {
            self.is_sparse[t] = true;
            self.sparse.push_back(t);
        }
        self.queues[t].push_back(b);
        true
    }

    /// Frees tenant `t`'s buffer `b` (sent).
    fn give(&mut self, t: usize, b: u32) {
        self.free.push(b);
        self.budget.give(t);
    }

    /// The oldest frame of the first sparse tenant, else of the next tenant in round robin
    /// (the caller frees the buffer with [`Self::give`]).
    fn pop(&mut self) -> Option<(usize, u32)> {
        while let Some(t) = self.sparse.pop_front() {
            self.is_sparse[t] = false;
            if let Some(b) = self.queues[t].pop_front() {
                return Some((t, b));
            }
        }
        let n = self.queues.len();
        for i in 0..n {
            let t = (self.next + i) % n;
            if let Some(b) = self.queues[t].pop_front() {
                self.next = (t + 1) % n;
                return Some((t, b));
            }
        }
        None
    }
}

struct Flow {
    tenant: u32,
    key: u64,
    meta: PacketMeta,
    /// The class the NIC side has bound the flow to (its engine queue's).
    class: Classification,
    /// The class the host side last asked for: `class`, or where a `MoveClass` still
    /// waiting in the tenant's doorbell will bind it.
    requested: Classification,
    /// The engine's queue for this flow (`Engine::open_flow` of `class` on the current
    /// engine); `None` while `class` is unclassified (after a reload).
    queue: Option<FlowQueue>,
    pending_kick: bool,
    last_ps: u64,
}

impl Flow {
    /// The flow's packet as the engine sees it: its classifier fields and flow id (a
    /// fetched frame's own id and size are filled in by [`State::offer`]).
    fn packet(&self) -> Packet {
        Packet {
            id: 0,
            bytes: 0,
            meta: self.meta,
            flow: self.key,
            deadline_ps: None,
            slack_ps: None,
        }
    }

    /// Opens the flow's queue on `engine` for its current class (`None` if unclassified),
    /// and lets go of the queue it had on that engine (`held` closes that queue's flow
    /// when no other queue uses it).
    fn open(&mut self, engine: &mut FastEngine, held: &mut EngineFlows) {
        let old = self.queue.take();
        self.queue = engine.open_flow(&self.packet(), self.class);
        held.opened(self.queue);
        held.release(engine, old);
    }
}

/// The engine's flows our queues use, so a flow is closed ([`Engine::close_flow`]) once no
/// queue uses it. One connection's queue is one engine flow at a leaf that keeps a flow per
/// five-tuple, but every connection of a leaf that keeps one flow for all (`by: none`)
/// shares it: closing it when the first connection goes idle would leave the others with a
/// closed queue (the engine refuses it with a panic). A flow that still holds packets when
/// its last queue lets go (a flow moved to another class with packets still at its old
/// leaf) is closed on a later try ([`Self::retry`]), unless a queue has opened it again.
#[derive(Default)]
struct EngineFlows {
    /// Per engine flow: our queues open on it.
    opens: HashMap<FlowHandle, u32>,
    /// Flows no queue uses that still held packets when the last let go.
    pending: Vec<FlowQueue>,
    /// Flows closed (counted in `flows_closed`).
    closed: u64,
}

impl EngineFlows {
    fn opened(&mut self, q: Option<FlowQueue>) {
        if let Some(q) = q {
            *self.opens.entry(q.handle()).or_default() += 1;
            // In use again: no longer waiting to be closed.
            self.pending.retain(|p| !p.same_flow(&q));
        }
    }

    /// One queue of `q`'s flow is done with it: the flow is closed if it was the last.
    fn release(&mut self, engine: &mut FastEngine, q: Option<FlowQueue>) {
        let Some(q) = q else { return };
        let h = q.handle();
        let Some(n) = self.opens.get_mut(&h) else {
            debug_assert!(
                false,
                "released queue {q:?} was never opened: {:?}",
                self.opens
            );
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.opens.remove(&h);
            if engine.close_flow(&q) {
                self.closed += 1;
            } else {
                self.pending.push(q);
            }
        }
    }

    /// Closes the pending flows that have drained. (A pending flow has no queue open on
    /// it: [`Self::opened`] takes it off the list, so each waits once, and is never
    /// closed under a queue.)
    fn retry(&mut self, engine: &mut FastEngine) {
        let EngineFlows {
            pending, closed, ..
        } = self;
        pending.retain(|q| {
            let done = engine.close_flow(q);
            *closed += u64::from(done);
            !done
        });
    }

    /// A new engine: the queues of the old one (now draining) are no longer ours to close.
    fn clear(&mut self) {
        self.opens.clear();
        self.pending.clear();
    }
}

/// An engine of an earlier policy, sending what it still holds.
struct Draining {
    engine: FastEngine,
    /// Per node of its policy: whether every policy since has had a node of that name, so
    /// its counts are still the running policy's node's (a name that left and came back
    /// counts from zero, without them).
    kept: Vec<bool>,
}

impl Draining {
    /// `engine`, whose policy just gave way to one with the nodes `names`.
    fn new(engine: FastEngine, names: &HashSet<&str>) -> Draining {
        let kept = keeps(&engine, names).collect();
        Draining { engine, kept }
    }

    /// The running policy gave way to one with the nodes `names`.
    fn keep_only(&mut self, names: &HashSet<&str>) {
        for (k, keep) in self.kept.iter_mut().zip(keeps(&self.engine, names)) {
            *k &= keep;
        }
    }
}

/// Per node of `engine`'s policy: whether `names` has it.
fn keeps<'a>(engine: &'a FastEngine, names: &'a HashSet<&str>) -> impl Iterator<Item = bool> + 'a {
    engine
        .program()
        .nodes
        .iter()
        .map(|n| names.contains(n.name.as_str()))
}

struct State {
    prog: Arc<Program>,
    engine: FastEngine,
    draining: Vec<Draining>,
    /// Per node name of the running policy: what engines of earlier policies counted there,
    /// once they have drained (node counters survive a reload for the nodes the new policy
    /// keeps, by name; a name the new policy drops is forgotten, so it counts from zero
    /// should it come back, and reloads with ever new names hold no more than the policy).
    carried: HashMap<String, weft_core::sched::Counters>,
    /// Per shaping class name of the running policy: packets and bytes counted under
    /// earlier policies (kept and forgotten as `carried`).
    shaped_carried: HashMap<String, (u64, u64)>,
    /// The current engine's flows our queues use.
    engine_flows: EngineFlows,
    generation: u64,
    iface: Interface,
    drivers: Vec<iface::DriverId>,
    flows: HashMap<(u32, u64), QueueId>,
    queues: HashMap<QueueId, Flow>,
    kicks: Vec<Vec<DoorbellEntry>>,
    pool: Vec<u8>,
    lens: Vec<u16>,
    free: Vec<u32>,
    /// Which port owns which source address ([`MacTable`]).
    macs: MacTable,
    /// Flow queues and frame buffers, budgeted per tenant ([`Budget`]).
    queue_budget: Budget,
    buffer_budget: Budget,
    /// When each tenant's last refused-source line was logged, ps (at most one a second).
    source_logged_ps: Vec<u64>,
    /// Since when the uplink's link has been down, ps (`None`: up). Departures wait while
    /// it is down: the policy's queues hold (and, full, drop with counted reasons) what
    /// would have been sent into a dead link and counted as sent.
    uplink_down_since: Option<u64>,
    /// Per tenant: its drop counters when last logged ([`State::log_tenant_drops`]).
    drops_logged: Vec<[u64; 8]>,
    rev: Reverse,
    /// The reverse path goes next if both directions wait (they alternate).
    reverse_turn: bool,
    c: DpCounters,
    timing: Timing,
    next_free_ps: u64,
    cfg: Config,
    started_ps: u64,
    /// (time, bytes per node then per shaping class) at the last two samples, for
    /// `rate_bps`.
    samples: [(u64, Vec<u64>); 2],
    /// Per shaping class of the current policy: packets and bytes sent through it by the
    /// current engine (a reload adds them to `shaped_carried`, by class name).
    shaped: Vec<(u64, u64)>,
}

/// Scratch for [`State::nic_side`]: one fetch's packets and the engine's outcomes.
#[derive(Default)]
struct Offers {
    /// Packets posted to their flows' queues, in fetch order.
    posted: Vec<(Packet, FlowQueue)>,
    /// For each posted packet, its index in the fetch.
    index: Vec<usize>,
    /// The engine's outcomes for `posted`.
    results: Vec<Result<(), DropReason>>,
    /// Per fetched descriptor, its outcome.
    outcome: Vec<Result<(), DropReason>>,
}

static STOP: AtomicBool = AtomicBool::new(false);

/// Stops `run` at its next control poll (also set by SIGINT, SIGTERM and SIGHUP).
pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}

fn load(cfg: &Config, path: &std::path::Path) -> Result<Program, String> {
    let mut o = cfg.load.clone();
    o.link_rate_bps = Some(cfg.rate_bps);
    policy::load(path, &o).map_err(|e| e.to_string())
}

/// What the policy does with the tenants given (tenant ids are positions in `--tenant`,
/// 1-based): a tenant no leaf can take (every path to a leaf matches other tenants), whose
/// frames would all be dropped as `unclassified`, and tenant ids the policy matches on that
/// no `--tenant` has. Warnings, not errors: a policy may be written for more tenants than
/// run today.
pub fn tenant_warnings(prog: &policy::Program, tenants: &[(String, String)]) -> Vec<String> {
    let admits = |leaf: u32, tenant: u32| {
        let mut n = Some(leaf);
        while let Some(i) = n {
            let m = &prog.nodes[i as usize].matches;
            if !m.tenant.is_empty() && !m.tenant.contains(&tenant) {
                return false;
            }
            n = prog.nodes[i as usize].parent;
        }
        true
    };
    let mut out = Vec::new();
    for (i, (name, iface)) in tenants.iter().enumerate() {
        let id = i as u32 + 1;
        if !prog.leaves.iter().any(|&l| admits(l, id)) {
            out.push(format!(
                "no leaf of {} takes tenant {id} ({name} on {iface}): its frames will be \
                 dropped as unclassified",
                prog.name
            ));
        }
    }
    let mut beyond: Vec<u32> = prog
        .nodes
        .iter()
        .flat_map(|n| n.matches.tenant.iter().copied())
        .filter(|&t| t == 0 || t as usize > tenants.len())
        .collect();
    beyond.sort_unstable();
    beyond.dedup();
    if !beyond.is_empty() {
        out.push(format!(
            "{} matches tenant {} but {} given (--tenant, numbered from 1)",
            prog.name,
            beyond
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            match tenants.len() {
                1 => "only 1 tenant is".to_string(),
                n => format!("only {n} tenants are"),
            }
        ));
    }
    out
}

/// A reload's new policy and its engine, made off the loop by [`prepare_reload`].
type Reloaded = (Arc<Program>, FastEngine);

/// A control request as the loop takes it: what the control thread made of a [`Request`]
/// (the server's [`ctl::Prepare`] hook), a reload's policy already read and compiled.
enum Command {
    /// [`Request::Stats`].
    Stats,
    /// [`Request::Reload`], its policy compiled and its engine made.
    Reload(Box<Reloaded>),
    /// [`Request::ResetTiming`].
    ResetTiming,
    /// [`Request::Stop`].
    Stop,
}

/// Reads and compiles the policy at `path` for a reload and makes its engine (on a control
/// thread: a large policy takes tens of milliseconds, which the loop does not wait for), or
/// the error answer: the policy does not compile, or has more leaves than the `classes` the
/// dataplane was started for. Its files, `attach` overrides included, are read once each,
/// through `files` (the control socket's bounds and checks).
fn prepare_reload(
    cfg: &Config,
    classes: u32,
    path: &std::path::Path,
    files: &ctl::ReloadReader,
) -> Result<Reloaded, Reply> {
    let mut o = cfg.load.clone();
    o.link_rate_bps = Some(cfg.rate_bps);
    o.reader = Some(files.reader());
    // The client may not be allowed to read the files: nothing of them in the answer.
    let prog =
        Arc::new(policy::load(path, &o).map_err(|e| Reply::Refused(files.client_error(&e)))?);
    if prog.leaves.len() as u32 > classes {
        return Err(Reply::Refused(format!(
            "the new policy has {} leaves; this dataplane was started for at most {classes}",
            prog.leaves.len()
        )));
    }
    let engine = FastEngine::new(prog.clone());
    Ok((prog, engine))
}

/// Runs the software NIC until SIGINT/SIGTERM/SIGHUP (or [`request_stop`]); `ready` is called once
/// the sockets are open, with the metrics endpoint's address if there is one (its port, when
/// the system chose it). Returns the final stats.
pub fn run(
    cfg: Config,
    ready: impl FnOnce(Option<std::net::SocketAddr>),
) -> Result<Value, RunError> {
    if cfg.tenants.is_empty() {
        return Err(RunError::Config("at least one --tenant NAME=IFACE".into()));
    }
    if let Some((name, _)) = cfg.tenants.iter().find(|(_, i)| *i == cfg.uplink) {
        return Err(RunError::Config(format!(
            "--tenant {name}={}: `{}` is the uplink; a tenant needs an interface of its own",
            cfg.uplink, cfg.uplink
        )));
    }
    cfg.check_reservations().map_err(RunError::Config)?;
    // Each flow queue's ring is allocated up front (about 24 bytes a descriptor).
    let descriptors = u64::from(cfg.ring) * u64::from(cfg.max_queues);
    if descriptors > MAX_DESCRIPTORS {
        return Err(RunError::Config(format!(
            "--ring {} × --max-queues {} = {descriptors} descriptors: at most {MAX_DESCRIPTORS} \
             (about 800 MB)",
            cfg.ring, cfg.max_queues
        )));
    }
    let ring = RingConfig {
        version: cfg.ring_version,
        ..RingConfig::default()
    };
    let mut tenants: Vec<Box<dyn Port>> = Vec::new();
    // Held while the loop runs (dropped on return: the claims end with the run).
    let mut claims = Vec::new();
    for (name, ifname) in &cfg.tenants {
        let what = format!("--tenant {name}={ifname}");
        claims.push(claim_interface(ifname, &what)?);
        tenants.push(open_port(&cfg, ifname, ring).map_err(|e| e.naming(&what))?);
    }
    let what = format!("--uplink `{}`", cfg.uplink);
    claims.push(claim_interface(&cfg.uplink, &what)?);
    let uplink = open_port(&cfg, &cfg.uplink, ring).map_err(|e| e.naming(&what))?;
    if let Some(cpu) = cfg.cpu {
        pin_to_cpu(cpu).map_err(|e| RunError::Config(e.to_string()))?;
    }
    if let Some(us) = cfg.slice_us {
        set_slice(us).map_err(|e| RunError::Config(e.to_string()))?;
    }
    // Held while the loop runs: the process goes back to the root group on return.
    let _placement = cfg.cpu_weight.and_then(|w| {
        let placed = crate::placement::find().and_then(|(root, version, mounted)| {
            crate::placement::Placement::at(root, version, std::process::id(), w)
                .map(|p| (p, mounted))
        });
        match placed {
            Ok((p, mounted)) => {
                tracing::info!(
                    cgroup = %p.group().display(),
                    cpu_weight = w,
                    "runs in a cgroup of its own (a default group weighs 100)"
                );
                // The placement first (back to the root group), then the mount.
                Some((p, mounted))
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "no cgroup of its own: on a busy host the loop gets its session's share \
                     of a core (--cpu-weight 0 silences this)"
                );
                None
            }
        }
    });
    // SIGHUP: the terminal it was started from closing (SSH dropped): stop cleanly too, not
    // die with the socket left behind and no final stats.
    weft_sys::process::stop_on(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP], &STOP);
    run_ports(cfg, tenants, uplink, &STOP, ready)
}

/// The loop over given ports (one per tenant, in `cfg.tenants` order, and the uplink) until
/// `stop` (or SIGINT/SIGTERM, or `ctl stop`) is set. Returns the final stats.
pub fn run_ports(
    cfg: Config,
    tenants: Vec<Box<dyn Port>>,
    uplink: Box<dyn Port>,
    stop: &AtomicBool,
    ready: impl FnOnce(Option<std::net::SocketAddr>),
) -> Result<Value, RunError> {
    let mut ready = Some(ready);
    loop_ports(cfg, tenants, uplink, stop, &mut |metrics| {
        if let Some(f) = ready.take() {
            f(metrics)
        }
    })
}

/// [`run_ports`] without a type parameter, so the loop is compiled (and optimized) in this
/// crate, not instantiated in the caller's: a debug build of `weft` ran the whole loop at
/// the binary's opt-level 0 before.
fn loop_ports(
    cfg: Config,
    mut tenants: Vec<Box<dyn Port>>,
    mut uplink: Box<dyn Port>,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(Option<std::net::SocketAddr>),
) -> Result<Value, RunError> {
    if tenants.len() != cfg.tenants.len() || tenants.is_empty() {
        return Err(RunError::Config("one port per tenant".into()));
    }
    cfg.check_reservations().map_err(RunError::Config)?;
    let prog = Arc::new(load(&cfg, &cfg.policy).map_err(RunError::Policy)?);
    let classes = (prog.leaves.len() as u32).max(4096);
    let mut iface = Interface::new(iface::Config {
        max_queues: cfg.max_queues,
        ring_capacity: cfg.ring,
        cores: 1,
        doorbell_capacity: 8192,
        classes,
        outstanding_per_class: cfg.outstanding,
    });
    let drivers: Vec<_> = cfg.tenants.iter().map(|_| iface.add_driver(None)).collect();
    // A reload's policy is read, compiled and given its engine on the control connection's
    // thread; the loop only swaps it in.
    let prepare: ctl::Prepare<Command> = {
        let cfg = cfg.clone();
        Arc::new(move |req: Request, client: &ctl::Client| match req {
            Request::Stats => Ok(Command::Stats),
            Request::Reload { policy } => {
                let files = ctl::ReloadReader::new(client);
                let r = prepare_reload(&cfg, classes, &policy, &files)?;
                Ok(Command::Reload(Box::new(r)))
            }
            Request::ResetTiming => Ok(Command::ResetTiming),
            Request::Stop => Ok(Command::Stop),
        })
    };
    let server = ctl::Server::bind(cfg.ctl.as_deref(), cfg.metrics.as_deref(), prepare)?;
    if cfg.idle_sleep_us > 0 {
        // 1 µs of slack (best effort, as before).
        let _ = weft_sys::sched::set_timer_slack(1000);
    }
    let (nodes, shapers) = (prog.nodes.len(), prog.shapers.len());
    let mut configured = cfg.isolation.macs.clone();
    configured.resize(cfg.tenants.len(), Vec::new());
    let macs = MacTable::new(
        &configured,
        cfg.isolation.macs_per_tenant,
        cfg.isolation.mac_age_s.saturating_mul(1_000_000_000_000),
    )
    .map_err(RunError::Config)?;
    let now = clock::now_ps();
    let mut st = State {
        engine: FastEngine::new(prog.clone()),
        prog,
        draining: Vec::new(),
        carried: HashMap::new(),
        shaped_carried: HashMap::new(),
        engine_flows: EngineFlows::default(),
        generation: 1,
        iface,
        kicks: vec![Vec::new(); cfg.tenants.len()],
        drivers,
        flows: HashMap::new(),
        queues: HashMap::new(),
        pool: vec![0; cfg.buffers as usize * BUF_BYTES],
        lens: vec![0; cfg.buffers as usize],
        free: (0..cfg.buffers).rev().collect(),
        macs,
        queue_budget: Budget::new(
            cfg.max_queues,
            cfg.tenants.len(),
            cfg.isolation
                .reserved_queues
                .unwrap_or_else(|| Budget::default_reserve(cfg.max_queues, cfg.tenants.len())),
        ),
        buffer_budget: Budget::new(
            cfg.buffers,
            cfg.tenants.len(),
            cfg.isolation
                .reserved_buffers
                .unwrap_or_else(|| Budget::default_reserve(cfg.buffers, cfg.tenants.len())),
        ),
        source_logged_ps: vec![0; cfg.tenants.len()],
        uplink_down_since: None,
        drops_logged: vec![[0; 8]; cfg.tenants.len()],
        rev: Reverse::new(cfg.tenants.len(), REVERSE_BUFFERS),
        reverse_turn: false,
        c: DpCounters {
            rx_frames: vec![0; cfg.tenants.len()],
            rx_bytes: vec![0; cfg.tenants.len()],
            source_rejects: vec![[0; 4]; cfg.tenants.len()],
            ip_rejects: vec![0; cfg.tenants.len()],
            tenant_no_queue: vec![0; cfg.tenants.len()],
            tenant_no_buffer: vec![0; cfg.tenants.len()],
            tenant_reverse_dropped: vec![0; cfg.tenants.len()],
            ..DpCounters::default()
        },
        timing: Timing::new(cfg.tenants.len(), cfg.buffers as usize),
        next_free_ps: now,
        started_ps: now,
        samples: [
            (now, vec![0; nodes + shapers]),
            (now, vec![0; nodes + shapers]),
        ],
        shaped: vec![(0, 0); shapers],
        cfg,
    };
    // Said before `ready`: an uplink down at start is not a running NIC's normal state.
    st.check_link(&*uplink, now);
    ready(server.metrics_addr());
    let mut next_link_ps = now + LINK_CHECK_PS;
    let mut fetched = Vec::with_capacity(256);
    let mut offers = Offers::default();
    let mut completions = Vec::with_capacity(256);
    let mut next_ctl_ps = now;
    let mut next_sample_ps = now;
    let mut next_rogue_ps = now;
    let mut idle_iters = 0u32;
    // What an idle loop waits on: every port's descriptor (all or none).
    let mut pollfds: Option<Vec<libc::pollfd>> = tenants
        .iter()
        .map(|p| p.wait_fd())
        .chain(std::iter::once(uplink.wait_fd()))
        .map(|fd| {
            fd.map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
        })
        .collect();
    loop {
        let now = clock::now_ps();
        let mut work = 0usize;
        // 1. Cheap work first, every pass: ingress from every tenant ring (a bounded batch),
        //    doorbells, fetches, offers to the engine. So the decision below always sees the
        //    frames that arrived during the previous pass's send.
        for (t, sock) in tenants.iter_mut().enumerate() {
            let real = clock::realtime_ns();
            work += sock.recv_batch(RX_BATCH, &mut |f, ts| {
                if let Some(w) = ring_wait(ts, real) {
                    st.timing.rx_wait[t].record(w);
                }
                st.ingress(t, f, now)
            });
            st.ring_doorbell(t);
        }
        let received = work;
        st.nic_side(now, &mut fetched, &mut offers);
        // 2. One expensive step (a `send(2)`, which on veth runs the receiver's stack), the
        //    first of: a sparse tenant's reverse frame (a reply), unless the uplink is
        //    already SPARSE_LATE_PS behind; the uplink's due departures; a backlogged
        //    tenant's reverse frame, unless a departure is due within REVERSE_GUARD_PS (then
        //    the loop waits for it, so departures leave on time). Departures and backlogged
        //    reverse frames alternate when both wait. Due departures go one more than the
        //    frames this pass received, at most: one in the paced steady state (a frame that
        //    arrives meanwhile is seen before the next), as many as arrive when the loop is
        //    the bottleneck (unpaced, or catching up), so receiving cannot outrun sending.
        let stepped = st.expensive_step(&tenants, &*uplink, now, received);
        work += stepped as usize;
        // 3. Completions.
        for (t, &d) in st.drivers.iter().enumerate() {
            completions.clear();
            st.iface.poll_completions(d, usize::MAX, &mut completions);
            for c in &completions {
                st.free.push(c.desc.buf);
                st.buffer_budget.give(t);
            }
        }
        if let Some(r) = st.cfg.rogue {
            if now >= next_rogue_ps {
                next_rogue_ps = now + 100_000_000;
                st.misbehave(r);
            }
        }
        // 4. Reverse path, receive side: uplink frames into per-tenant queues (a copy each;
        //    while the queues hold REVERSE_BUFFERS frames, the rest wait in the ring).
        if st.rev.free.len() >= REVERSE_ROOM {
            work += uplink.recv_batch(RX_BATCH, &mut |f, ts| st.reverse_in(f, ts));
        }
        // 5. Housekeeping.
        if now >= next_link_ps {
            next_link_ps = now + LINK_CHECK_PS;
            st.check_link(&*uplink, now);
        }
        if now >= next_ctl_ps {
            next_ctl_ps = now + 1_000_000_000;
            server.poll(|cmd| {
                let ports = || port_stats(&tenants, &*uplink);
                st.handle(cmd, now, ports, server.dropped())
            });
            if now >= next_sample_ps {
                next_sample_ps = now + 1_000_000_000_000;
                st.sample(now);
                st.reclaim(now);
                st.log_tenant_drops();
            }
            if STOP.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if work > 0 {
            st.timing
                .busy_iter
                .record(clock::now_ps().saturating_sub(now) / 1000);
        }
        if work == 0 && st.cfg.idle_sleep_us > 0 {
            idle_iters += 1;
            // Nothing received or sent: give the core back (on a 2-core machine the
            // applications and the kernel's TCP need it) until a frame arrives, or the next
            // paced departure. `prctl(PR_SET_TIMERSLACK)` above keeps the timeout precise.
            if idle_iters > IDLE_SPINS {
                let mut ns = st.cfg.idle_sleep_us * 1000;
                let backlog = st.engine.backlog() > 0 || !st.draining.is_empty();
                if backlog {
                    ns = ns.min(st.next_free_ps.saturating_sub(now) / 1000);
                }
                if ns > 0 {
                    match pollfds.as_mut() {
                        Some(fds) => wait_readable(fds, ns),
                        None => std::thread::sleep(std::time::Duration::from_nanos(ns)),
                    }
                }
            }
        } else {
            idle_iters = 0;
        }
    }
    let ports = port_stats(&tenants, &*uplink);
    Ok(answer(&st.stats(clock::now_ps(), ports, server.dropped())))
}

/// `stats` as the JSON the control socket answers.
fn answer(stats: &Stats) -> Value {
    // Cannot fail: every map's keys are strings.
    serde_json::to_value(stats).unwrap_or_default()
}

/// Adds a finished engine's node counters to `carried`, by node name, for the nodes `kept`
/// says the running policy still has (by position in the engine's policy).
fn carry(
    carried: &mut HashMap<String, weft_core::sched::Counters>,
    e: &FastEngine,
    kept: impl IntoIterator<Item = bool>,
) {
    let st = e.stats();
    for ((n, c), keep) in e.program().nodes.iter().zip(&st.nodes).zip(kept) {
        if keep {
            carried.entry(n.name.clone()).or_default().add(c);
        }
    }
}

/// [`Stats::check_balance`] on a `ctl stats` answer as JSON: the dataplane's conservation
/// laws, on a snapshot taken at quiescence. `Err` names the law that failed, with its
/// figures, or says why `stats` is not a stats answer.
pub fn check_balance(stats: &Value) -> Result<(), String> {
    Stats::from_json(stats)
        .map_err(|e| format!("not a stats answer: {e}"))?
        .check_balance()
}

/// Waits until one of `fds` is readable or `ns` nanoseconds have passed (`ppoll(2)`).
fn wait_readable(fds: &mut [libc::pollfd], ns: u64) {
    weft_sys::sched::wait_readable(fds, ns)
}

/// The CPUs the control threads run on once the loop is pinned ([`pin_to_cpu`]): those the
/// process could use before, less the loop's. Unset while nothing is pinned, or when the
/// loop's CPU was the only one.
static CONTROL_CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// The CPUs the calling thread may run on (`sched_getaffinity(2)`).
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    weft_sys::sched::allowed_cpus()
}

/// Moves the calling thread off the loop's CPU, onto the CPUs the process could use before
/// [`pin_to_cpu`] less the loop's (nothing when the loop is not pinned). The control
/// threads ([`crate::ctl`]: accepting connections, reading requests, compiling a reloaded
/// policy) start with it: threads inherit the affinity of the thread that makes them, and
/// the loop's thread, pinned first, makes them, so they would otherwise take turns with the
/// busy-polling loop on its one CPU (a reload's compile of ~90 ms would stall forwarding
/// for as long).
pub fn away_from_the_loop() {
    let Some(cpus) = CONTROL_CPUS.get() else {
        return;
    };
    // Best effort: a refusal leaves the thread where it was.
    let _ = weft_sys::sched::set_cpus(cpus);
}

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity(2)`); the control threads it
/// starts afterwards move to the other CPUs it could use ([`away_from_the_loop`]).
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    let before = allowed_cpus().unwrap_or_default();
    if let Err(e) = weft_sys::sched::set_cpus(&[cpu]) {
        if e.kind() == std::io::ErrorKind::InvalidInput && e.raw_os_error().is_none() {
            // Out of the set's range: refused before the call.
            return Err(e);
        }
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        // EINVAL: no CPU of the set is one this process may run on.
        let why = if e.raw_os_error() == Some(libc::EINVAL) {
            "not a CPU this process may run on".to_string()
        } else {
            e.to_string()
        };
        return Err(std::io::Error::new(
            e.kind(),
            format!("--cpu {cpu}: {why} (it may run on {cpus} CPUs; see `nproc`)"),
        ));
    }
    let others: Vec<usize> = before.into_iter().filter(|&c| c != cpu).collect();
    if !others.is_empty() {
        let _ = CONTROL_CPUS.set(others);
    }
    Ok(())
}

/// Sets the calling thread's EEVDF slice (`sched_setattr(2)`, SCHED_OTHER with
/// `sched_runtime`; the kernel accepts 100 µs to 100 ms), keeping its nice value.
pub fn set_slice(us: u64) -> std::io::Result<()> {
    set_slice_raw(us).map_err(|e| std::io::Error::new(e.kind(), format!("--slice-us {us}: {e}")))
}

/// [`set_slice`] without allocating (only system calls: usable between `fork` and `exec`,
/// e.g. in `CommandExt::pre_exec`; the slice is inherited across `exec`).
pub fn set_slice_raw(us: u64) -> std::io::Result<()> {
    weft_sys::sched::set_slice_raw(us)
}

impl State {
    fn ingress(&mut self, t: usize, frame: &[u8], now: u64) {
        self.c.rx_frames[t] += 1;
        self.c.rx_bytes[t] += frame.len() as u64;
        if frame.len() > BUF_BYTES {
            self.c.oversize += 1;
            return;
        }
        let p = match parse::parse(frame, t as u32 + 1) {
            Ok(p) => p,
            Err(_) => {
                self.c.parse_errors += 1;
                return;
            }
        };
        let mut src = [0u8; 6];
        src.copy_from_slice(&frame[6..12]);
        if let Err(why) = self.macs.check_source(t, src, now) {
            self.refuse_source(t, src, why, now);
            return;
        }
        if let Some(allowed) = self.cfg.isolation.ips.get(t).filter(|a| !a.is_empty()) {
            // An IP frame's source as parsed (however many tags it has); ARP's from the frame.
            let parsed = (p.meta.present & Field::Src.bit() != 0)
                .then(|| std::net::Ipv6Addr::from(p.meta.src).to_canonical());
            if let Some(ip) = parsed.or_else(|| source_ip(frame)) {
                if !allowed.iter().any(|p| p.contains(ip)) {
                    self.c.ip_rejects[t] += 1;
                    return;
                }
            }
        }
        let key = (t as u32, p.flow);
        let q = match self.flows.get(&key) {
            Some(&q) => {
                if self.queues[&q].meta != p.meta && !self.reclassify(t, q, &p.meta, frame, now) {
                    return;
                }
                q
            }
            None => {
                let class = self.prog.classify(&p.meta);
                let Classification::Leaf { leaf, shaping, .. } = class else {
                    self.c.unclassified += 1;
                    let pkt = Packet::new(0, frame.len() as u32, p.meta);
                    let _ = self.engine.enqueue_classified(pkt, class, now);
                    return;
                };
                let shaper = shaping.as_slice().first().copied();
                if !self.queue_budget.try_take(t) {
                    self.c.tenant_no_queue[t] += 1;
                    return;
                }
                match self.iface.create_queue(self.drivers[t], leaf, shaper) {
                    Ok(q) => {
                        let mut flow = Flow {
                            tenant: t as u32,
                            key: p.flow,
                            meta: p.meta,
                            class,
                            requested: class,
                            queue: None,
                            pending_kick: false,
                            last_ps: now,
                        };
                        flow.open(&mut self.engine, &mut self.engine_flows);
                        self.flows.insert(key, q);
                        self.queues.insert(q, flow);
                        q
                    }
                    Err(_) => {
                        self.queue_budget.give(t);
                        self.c.tenant_no_queue[t] += 1;
                        return;
                    }
                }
            }
        };
        if !self.buffer_budget.try_take(t) {
            self.c.tenant_no_buffer[t] += 1;
            return;
        }
        // The budget's total is the pool's size, so a unit taken is a buffer free.
        let buf = self
            .free
            .pop()
            .expect("a buffer for every unit of the budget");
        let off = buf as usize * BUF_BYTES;
        self.pool[off..off + frame.len()].copy_from_slice(frame);
        self.lens[buf as usize] = frame.len() as u16;
        self.timing.posted[buf as usize] = (now, t as u32);
        let d = Descriptor {
            buf,
            bytes: frame.len() as u32,
            cookie: 0,
        };
        if self.iface.post(self.drivers[t], q, d).is_err() {
            self.free.push(buf);
            self.buffer_budget.give(t);
            self.c.ring_full += 1;
            return;
        }
        let f = self.queues.get_mut(&q).expect("queue of a flow");
        f.last_ps = now;
        if !f.pending_kick {
            f.pending_kick = true;
            self.kicks[t].push(DoorbellEntry::Kick(q));
        }
    }

    /// A frame from tenant `t`'s port whose source address `src` it may not use: dropped,
    /// counted per tenant and reason, and logged: another tenant's address once per address
    /// and port, in a line of its own naming the address and its owner; the other reasons
    /// at most once a second per tenant.
    #[cold]
    fn refuse_source(&mut self, t: usize, src: Mac, why: SourceReject, now: u64) {
        self.c.source_rejects[t][why.index()] += 1;
        let reason = match why {
            SourceReject::Spoofed { owner } => return self.report_spoof(t, src, owner),
            SourceReject::Group => "a group address cannot be a source".into(),
            SourceReject::NotConfigured => "not one of the tenant's configured `mac=`".into(),
            SourceReject::Full => format!(
                "the port already uses {} addresses (--macs-per-tenant), none idle {} s",
                self.cfg.isolation.macs_per_tenant, self.cfg.isolation.mac_age_s
            ),
        };
        if now.saturating_sub(self.source_logged_ps[t]) >= 1_000_000_000_000
            || self.source_logged_ps[t] == 0
        {
            self.source_logged_ps[t] = now.max(1);
            tracing::warn!(
                tenant = t + 1,
                tenant_name = %self.cfg.tenants[t].0,
                source = %fmt_mac(&src),
                rule = why.name(),
                count = self.c.source_rejects[t][why.index()],
                "dropped a frame whose source address the port may not use: {reason} \
                 (logged at most once a second per tenant)"
            );
        }
    }

    /// Tenant `t`'s port sent a frame with `owner`'s address `src`: its own log line, once
    /// per address and port ([`MacTable::first_spoof`]), naming the address and its owner.
    #[cold]
    fn report_spoof(&mut self, t: usize, src: Mac, owner: usize) {
        if self.macs.first_spoof(t, &src) {
            tracing::warn!(
                tenant = t + 1,
                tenant_name = %self.cfg.tenants[t].0,
                source = %fmt_mac(&src),
                owner = owner + 1,
                owner_name = %self.cfg.tenants[owner].0,
                rule = "spoofed_source",
                "dropped a frame sent with another tenant's address: {} belongs to tenant \
                 {} ({}) (logged once per address and port; `spoofed_source` counts \
                 every such frame)",
                fmt_mac(&src),
                owner + 1,
                self.cfg.tenants[owner].0
            );
        }
    }

    /// A known flow's frame whose classifier fields differ from the flow's (a DSCP
    /// re-marked mid-flow): the flow is classified again, and if its class changed its
    /// driver moves it with an inline metadata update (`MoveClass`) in the tenant's next
    /// doorbell (Loom §4.3), which the NIC side processes before it fetches this frame: it
    /// binds the flow to the new leaf and that leaf's shaping classes ([`State::control`]). A frame that now
    /// classifies nowhere is dropped and counted (`unclassified`), and the flow keeps its
    /// class. Whether the frame goes on to its queue.
    fn reclassify(
        &mut self,
        t: usize,
        q: QueueId,
        meta: &PacketMeta,
        frame: &[u8],
        now: u64,
    ) -> bool {
        let class = self.prog.classify(meta);
        let Classification::Leaf { leaf, .. } = class else {
            self.c.unclassified += 1;
            let pkt = Packet::new(0, frame.len() as u32, *meta);
            let _ = self.engine.enqueue_classified(pkt, class, now);
            return false;
        };
        let f = self.queues.get_mut(&q).expect("queue of a flow");
        f.meta = *meta;
        if class != f.requested {
            f.requested = class;
            // At most one move per queue waits in the tenant's next doorbell (its latest
            // class), so a flow flipping its DSCP on every frame cannot grow the batch.
            let mv = DoorbellEntry::Meta(q, iface::MetaUpdate::MoveClass { class: leaf });
            let pending = self.kicks[t].iter_mut().find(|e| {
                matches!(e, DoorbellEntry::Meta(p, iface::MetaUpdate::MoveClass { .. }) if *p == q)
            });
            match pending {
                Some(e) => *e = mv,
                None => self.kicks[t].push(mv),
            }
            self.c.class_moves += 1;
        }
        true
    }

    /// Step 2 of a pass (see the loop): at most one expensive step; whether one was made.
    fn expensive_step(
        &mut self,
        tenants: &[Box<dyn Port>],
        uplink: &dyn Port,
        now: u64,
        received: usize,
    ) -> bool {
        let due = self.next_free_ps <= now;
        if self.rev.has_sparse()
            && now.saturating_sub(self.next_free_ps) <= SPARSE_LATE_PS
            && self.reverse_step(tenants)
        {
            return true;
        }
        if due
            && !(self.reverse_turn && self.rev.pending())
            && self.departures(uplink, now, received)
        {
            return true;
        }
        let backlog = self.engine.backlog() > 0 || !self.draining.is_empty();
        let imminent = backlog && !due && self.next_free_ps - now < REVERSE_GUARD_PS;
        !imminent && self.reverse_step(tenants)
    }

    /// Due departures, at most `1 + extra`; whether any left.
    fn departures(&mut self, uplink: &dyn Port, now: u64, extra: usize) -> bool {
        if self.uplink_down_since.is_some() {
            return false;
        }
        let mut sent = 0;
        while sent <= extra && self.next_free_ps <= now && self.transmit_one(uplink, now) {
            sent += 1;
        }
        if sent > 0 {
            timed_flush(uplink, &mut self.timing.uplink_kick);
            self.reverse_turn = true;
        }
        sent > 0
    }

    /// A tenant's drop counters, in [`TENANT_DROPS`] order.
    fn tenant_drops(&self, t: usize) -> [u64; 8] {
        let c = &self.c;
        let s = c.source_rejects[t];
        [
            s[0],
            s[1],
            s[2],
            s[3],
            c.ip_rejects[t],
            c.tenant_no_queue[t],
            c.tenant_no_buffer[t],
            c.tenant_reverse_dropped[t],
        ]
    }

    /// Once a second: one log line per tenant whose frames were dropped since the last,
    /// by reason (a flood of new flows shows as `no_queue`, of frames as `no_buffer`, of
    /// source addresses as `mac_table_full`). Spoofed sources are not repeated here: each
    /// address a port spoofs has its line ([`State::refuse_source`]).
    fn log_tenant_drops(&mut self) {
        for t in 0..self.drops_logged.len() {
            let now = self.tenant_drops(t);
            let was = std::mem::replace(&mut self.drops_logged[t], now);
            let by: Vec<String> = TENANT_DROPS
                .iter()
                .zip(now.iter().zip(was))
                .filter(|(k, (n, w))| **n > *w && **k != "spoofed_source")
                .map(|(k, (n, w))| format!("{k}={}", n - w))
                .collect();
            if by.is_empty() {
                continue;
            }
            tracing::warn!(
                tenant = t + 1,
                tenant_name = %self.cfg.tenants[t].0,
                drops = %by.join(" "),
                "dropped the tenant's frames in the last second"
            );
        }
    }

    /// Reads the uplink's link state; logs and counts a change.
    fn check_link(&mut self, uplink: &dyn Port, now: u64) {
        let up = uplink.link_up().unwrap_or(true);
        match (up, self.uplink_down_since) {
            (false, None) => {
                self.uplink_down_since = Some(now);
                self.c.uplink_downs += 1;
                tracing::warn!(
                    uplink = %self.cfg.uplink,
                    "uplink is down: departures wait (queues fill, then drop with counted \
                     reasons)"
                );
            }
            (true, Some(t)) => {
                let ms = now.saturating_sub(t) / 1_000_000_000;
                self.c.uplink_down_ms += ms;
                self.uplink_down_since = None;
                // The link was idle, not late: pacing starts again from now.
                self.next_free_ps = self.next_free_ps.max(now);
                tracing::info!(
                    uplink = %self.cfg.uplink,
                    down_s = ms as f64 / 1e3,
                    "uplink is up again"
                );
            }
            _ => {}
        }
    }

    /// One reverse frame to its tenant; whether one was waiting.
    fn reverse_step(&mut self, tenants: &[Box<dyn Port>]) -> bool {
        let Some(t) = self.reverse_send_one(tenants) else {
            return false;
        };
        timed_flush(&*tenants[t], &mut self.timing.reverse_kick);
        self.reverse_turn = false;
        true
    }

    /// The rogue driver's attempts (see [`Config::rogue`]); all are refused and counted.
    fn misbehave(&mut self, r: usize) {
        let Some(&d) = self.drivers.get(r) else {
            return;
        };
        let foreign: Vec<QueueId> = self
            .queues
            .iter()
            .filter(|(_, f)| f.tenant as usize != r)
            .map(|(&q, _)| q)
            .take(2)
            .collect();
        let bogus = Descriptor {
            buf: u32::MAX,
            bytes: 1500,
            cookie: u64::MAX,
        };
        let invalid = self.iface.config().max_queues + 7;
        let mut entries = vec![DoorbellEntry::Kick(invalid)];
        for &q in &foreign {
            let _ = self.iface.post(d, q, bogus);
            entries.push(DoorbellEntry::Kick(q));
            entries.push(DoorbellEntry::Meta(
                q,
                iface::MetaUpdate::MoveClass { class: 0 },
            ));
            entries.push(DoorbellEntry::Meta(
                q,
                iface::MetaUpdate::Rate {
                    rate_bps: 1,
                    burst_bytes: 1,
                },
            ));
        }
        let _ = self.iface.post(d, invalid, bogus);
        let _ = self.iface.ring_doorbell(0, d, &entries);
    }

    fn ring_doorbell(&mut self, t: usize) {
        if self.kicks[t].is_empty() {
            return;
        }
        // A refused batch (doorbell queue full) keeps its kicks for the next iteration.
        if self
            .iface
            .ring_doorbell(0, self.drivers[t], &self.kicks[t])
            .is_ok()
        {
            for e in self.kicks[t].drain(..) {
                if let DoorbellEntry::Kick(q) = e {
                    if let Some(f) = self.queues.get_mut(&q) {
                        f.pending_kick = false;
                    }
                }
            }
        }
    }

    fn control(&mut self, c: Control, now: u64) {
        match c {
            Control::Rate {
                shaper,
                rate_bps,
                burst_bytes,
                ..
            } => {
                // The interface checked what the engine checks (a shaping class the queue
                // has, a positive rate and burst), so the engine takes it.
                let taken = self.engine.update(
                    Update::Shaper {
                        shaper,
                        rate_bps,
                        burst_bytes,
                    },
                    now,
                );
                debug_assert_eq!(taken, Ok(()), "inline rate update on shaper {shaper}");
            }
            Control::Moved { queue, to, .. } => {
                // The flow's new leaf, shaped by the classes on that leaf's path that its
                // packets match (not by its old path's).
                if let Some(f) = self.queues.get_mut(&queue) {
                    if let Some(class) = self.prog.classify_at(to, &f.meta) {
                        f.class = class;
                        // Its flow at the old leaf is closed once no queue uses it and
                        // it holds no packet there.
                        f.open(&mut self.engine, &mut self.engine_flows);
                        if let Classification::Leaf { shaping, .. } = class {
                            self.iface
                                .rebind(queue, to, shaping.as_slice().first().copied());
                        }
                    }
                }
            }
        }
    }

    /// The packet a fetched descriptor carries, with its flow's queue in the engine (none
    /// for an unclassified flow or an unknown queue: the packet then goes to the engine with
    /// that classification, which counts its drop).
    fn offer(&self, f: &iface::Fetched) -> (Packet, Result<FlowQueue, Classification>) {
        let (pkt, queue) = match self.queues.get(&f.queue) {
            Some(fl) => (fl.packet(), fl.queue.ok_or(fl.class)),
            None => (
                Packet::new(0, 0, PacketMeta::default()),
                Err(Classification::Unclassified { at: 0 }),
            ),
        };
        let pkt = Packet {
            id: f.handle,
            bytes: f.desc.bytes,
            slack_ps: (f.rank != 0).then_some(f.rank),
            ..pkt
        };
        (pkt, queue)
    }

    /// Doorbells, fetches and offers to the engine (the NIC side of the interface). The
    /// fetched packets go to their flows' queues in the engine in one `enqueue_flow_batch`
    /// (per-flow queues and a doorbell's batch, Loom §4.2.1 and §4.3: no flow lookup, and the
    /// flow records' misses overlap); `scratch` holds the batch and its outcomes (kept by the
    /// caller, so the loop does not allocate).
    fn nic_side(&mut self, now: u64, fetched: &mut Vec<iface::Fetched>, scratch: &mut Offers) {
        let mut controls = Vec::new();
        self.iface.nic_doorbells(0, |c| controls.push(c));
        for c in controls {
            self.control(c, now);
        }
        fetched.clear();
        self.iface.nic_fetch(512, fetched);
        scratch.posted.clear();
        scratch.index.clear();
        scratch.results.clear();
        scratch.outcome.clear();
        for (i, f) in fetched.iter().enumerate() {
            match self.offer(f) {
                (pkt, Ok(q)) => {
                    scratch.posted.push((pkt, q));
                    scratch.index.push(i);
                    scratch.outcome.push(Ok(()));
                }
                // Dropped at once (and counted by the engine): its order among the others
                // does not matter.
                (pkt, Err(class)) => scratch
                    .outcome
                    .push(self.engine.enqueue_classified(pkt, class, now)),
            }
        }
        self.engine
            .enqueue_flow_batch(&scratch.posted, now, &mut scratch.results);
        debug_assert_eq!(
            scratch.results.len(),
            scratch.posted.len(),
            "one outcome per posted packet"
        );
        for (&i, &r) in scratch.index.iter().zip(&scratch.results) {
            scratch.outcome[i] = r;
        }
        for (f, r) in fetched.iter().zip(&scratch.outcome) {
            if let Err(r) = *r {
                self.c.engine_drops += 1;
                let _ = self.iface.nic_complete(f.handle, Status::Dropped(r));
            }
        }
    }

    /// Sends the engine's next departure on the uplink (the link is free at `now`); the link
    /// is then busy for the frame's wire time. False when nothing is queued.
    fn transmit_one(&mut self, uplink: &dyn Port, now: u64) -> bool {
        loop {
            // Engines of earlier policies drain first (a reload loses no admitted packet).
            let mut d = None;
            for old in &mut self.draining {
                d = old.engine.dequeue(now);
                if d.is_some() {
                    break;
                }
            }
            if self.draining.iter().any(|e| e.engine.backlog() == 0) {
                let done: Vec<Draining> = self
                    .draining
                    .extract_if(.., |e| e.engine.backlog() == 0)
                    .collect();
                for e in &done {
                    carry(&mut self.carried, &e.engine, e.kept.iter().copied());
                }
            }
            let current = d.is_none();
            if current {
                d = self.engine.dequeue(now);
            }
            let Some(d) = d else { return false };
            let Some(desc) = self.iface.outstanding_desc(d.id) else {
                continue;
            };
            let off = desc.buf as usize * BUF_BYTES;
            let len = self.lens[desc.buf as usize] as usize;
            let t0 = clock::now_ps();
            let (posted, tenant) = self.timing.posted[desc.buf as usize];
            if current && !self.shaped.is_empty() {
                self.count_shaped(&d);
            }
            self.timing
                .departure_late
                .record(t0.saturating_sub(self.next_free_ps.max(posted)) / 1000);
            if let Some(h) = self.timing.queue.get_mut(tenant as usize) {
                h.record(t0.saturating_sub(posted) / 1000);
            }
            let sent = uplink.send(&self.pool[off..off + len]);
            self.timing
                .uplink_send
                .record(clock::now_ps().saturating_sub(t0) / 1000);
            let status = match sent {
                Ok(true) => {
                    self.c.tx_frames += 1;
                    self.c.tx_bytes += len as u64;
                    Status::Sent
                }
                _ => {
                    self.c.tx_errors += 1;
                    Status::Aborted
                }
            };
            let _ = self.iface.nic_complete(d.id, status);
            let start = if now > self.next_free_ps + CATCH_UP_PS {
                now
            } else {
                self.next_free_ps
            };
            self.next_free_ps = start + wire_ps(d.bytes, &self.prog.link);
            return true;
        }
    }

    /// Reverse path, receive side: queues an uplink frame for the tenant that owns its
    /// destination MAC (a copy for every tenant for broadcast and multicast; a unicast frame
    /// no tenant owns is dropped and counted, `reverse_unknown`).
    fn reverse_in(&mut self, frame: &[u8], ts: u64) {
        if frame.len() < 14 || frame.len() > BUF_BYTES {
            self.c.reverse_dropped += 1;
            return;
        }
        self.c.reverse_frames += 1;
        let mut dst = [0u8; 6];
        dst.copy_from_slice(&frame[..6]);
        match self.macs.destination(&dst) {
            Destination::Tenant(t) => {
                if !self.rev.push(t, frame, ts) {
                    self.c.reverse_dropped += 1;
                    self.c.tenant_reverse_dropped[t] += 1;
                }
            }
            Destination::Group => {
                self.c.reverse_flooded += 1;
                for t in 0..self.rev.queues.len() {
                    if !self.rev.push(t, frame, ts) {
                        self.c.reverse_dropped += 1;
                        self.c.tenant_reverse_dropped[t] += 1;
                    }
                }
            }
            Destination::Unknown => self.c.reverse_unknown += 1,
        }
    }

    /// Reverse path, send side: one queued frame to its tenant, tenants in round robin (a
    /// tenant's flood of ACKs delays another tenant's frame by at most one send). Returns
    /// the tenant served, `None` when nothing is queued.
    fn reverse_send_one(&mut self, tenants: &[Box<dyn Port>]) -> Option<usize> {
        let (t, b) = self.rev.pop()?;
        let (off, len) = (b as usize * BUF_BYTES, self.rev.lens[b as usize] as usize);
        if let Some(w) = ring_wait(self.rev.ts[b as usize], clock::realtime_ns()) {
            self.timing.reverse_wait[t].record(w);
        }
        let t0 = clock::now_ps();
        let sent = tenants[t].send(&self.rev.pool[off..off + len]);
        self.timing
            .reverse_send
            .record(clock::now_ps().saturating_sub(t0) / 1000);
        if !matches!(sent, Ok(true)) {
            self.c.tx_errors += 1;
        }
        self.rev.give(t, b);
        Some(t)
    }

    /// Counts a departure of the current engine at the shaping classes it passed: those its
    /// flow's queue is bound to, or, for a packet queued before the flow moved to another
    /// leaf, those of its own leaf's path that the flow's packets match
    /// (`Program::classify_at`).
    fn count_shaped(&mut self, d: &weft_core::sched::Departure) {
        // The departure's id is its descriptor's handle.
        let Some(f) = self.queues.get(&Interface::handle_queue(d.id)) else {
            return;
        };
        let class = match f.class {
            c @ Classification::Leaf { leaf, .. } if leaf == d.leaf => Some(c),
            _ => self.prog.classify_at(d.leaf, &f.meta),
        };
        if let Some(Classification::Leaf { shaping, .. }) = class {
            for &c in shaping.as_slice() {
                let (p, b) = &mut self.shaped[c as usize];
                *p += 1;
                *b += d.bytes as u64;
            }
        }
    }

    fn sample(&mut self, now: u64) {
        let nodes = self.engine.stats().nodes.into_iter().map(|c| c.bytes);
        let bytes = nodes.chain(self.shaped.iter().map(|&(_, b)| b)).collect();
        self.samples[0] = std::mem::replace(&mut self.samples[1], (now, bytes));
    }

    /// Destroys queues idle for a second (their ids return to the arena), and closes their
    /// flows in the engine ([`Engine::close_flow`]), so the engine's flow records follow the
    /// flows alive, not every flow ever seen.
    fn reclaim(&mut self, now: u64) {
        let idle: Vec<QueueId> = self
            .queues
            .iter()
            .filter(|(q, f)| {
                now.saturating_sub(f.last_ps) > 1_000_000_000_000
                    && !f.pending_kick
                    && self.iface.ring_len(**q) == 0
            })
            .map(|(q, _)| *q)
            .collect();
        for q in idle {
            let f = &self.queues[&q];
            if self
                .iface
                .destroy_queue(self.drivers[f.tenant as usize], q)
                .is_ok()
            {
                let f = self.queues.remove(&q).expect("present");
                self.flows.remove(&(f.tenant, f.key));
                self.queue_budget.give(f.tenant as usize);
                self.c.queues_reclaimed += 1;
                // The engine forgets the flow too once no other queue uses it (and,
                // should it still hold packets, once they have left).
                self.engine_flows.release(&mut self.engine, f.queue);
            }
        }
        self.engine_flows.retry(&mut self.engine);
    }

    /// Swaps in a policy and its engine ([`prepare_reload`]'s): the old engine drains, every
    /// flow's queue is classified again.
    fn reload(&mut self, (prog, engine): Reloaded, now: u64) -> Reply {
        // Counters are carried for the names the new policy has, and only those.
        let names: HashSet<&str> = prog.nodes.iter().map(|n| n.name.as_str()).collect();
        let old = std::mem::replace(&mut self.engine, engine);
        self.carried.retain(|n, _| names.contains(n.as_str()));
        for d in &mut self.draining {
            d.keep_only(&names);
        }
        if old.backlog() > 0 {
            self.draining.push(Draining::new(old, &names));
        } else {
            carry(&mut self.carried, &old, keeps(&old, &names));
        }
        let classes: HashSet<&str> = prog.shapers.iter().map(|c| c.name.as_str()).collect();
        self.shaped_carried
            .retain(|n, _| classes.contains(n.as_str()));
        for (sh, &(p, b)) in self.prog.shapers.iter().zip(&self.shaped) {
            if classes.contains(sh.name.as_str()) {
                let c = self.shaped_carried.entry(sh.name.clone()).or_default();
                c.0 += p;
                c.1 += b;
            }
        }
        self.prog = prog;
        // Moves still waiting in a refused doorbell name the old policy's leaves; every
        // flow is classified again below (from its latest fields) instead.
        for k in &mut self.kicks {
            k.retain(|e| {
                !matches!(
                    e,
                    DoorbellEntry::Meta(_, iface::MetaUpdate::MoveClass { .. })
                )
            });
        }
        self.engine_flows.clear();
        for (&q, f) in self.queues.iter_mut() {
            f.class = self.prog.classify(&f.meta);
            f.requested = f.class;
            // Its queue on the old engine goes with that engine.
            f.queue = None;
            f.open(&mut self.engine, &mut self.engine_flows);
            if let Classification::Leaf { leaf, shaping, .. } = f.class {
                self.iface
                    .rebind(q, leaf, shaping.as_slice().first().copied());
            }
        }
        let n = self.prog.nodes.len() + self.prog.shapers.len();
        self.samples = [(now, vec![0; n]), (now, vec![0; n])];
        self.shaped = vec![(0, 0); self.prog.shapers.len()];
        self.generation += 1;
        self.c.reloads += 1;
        // The daemon's log says what runs now, and the client hears what `weft run` would
        // have warned of had it started with this policy (frames it will drop unclassified).
        let warnings = tenant_warnings(&self.prog, &self.cfg.tenants);
        tracing::info!(
            policy = %self.prog.name,
            generation = self.generation,
            "reloaded policy"
        );
        for w in &warnings {
            tracing::warn!(policy = %self.prog.name, "{w}");
        }
        Reply::Reloaded(ctl::Reloaded {
            policy: self.prog.name.clone(),
            generation: self.generation,
            warnings,
        })
    }

    /// Answers a control request as the control thread prepared it; `ports` and `dropped`:
    /// what `stats` answers of the ports and the control server ([`State::stats`]).
    fn handle(
        &mut self,
        cmd: Command,
        now: u64,
        ports: impl FnOnce() -> Vec<PortStats>,
        dropped: ctl::DroppedConnections,
    ) -> Reply {
        match cmd {
            Command::Stats => Reply::Stats(Box::new(self.stats(now, ports(), dropped))),
            Command::Reload(r) => self.reload(*r, now),
            Command::ResetTiming => {
                self.timing.clear();
                Reply::Done
            }
            Command::Stop => {
                request_stop();
                Reply::Done
            }
        }
    }

    /// The `ctl stats` answer, with the counters of the `ports` that have them and the
    /// control connections closed unanswered (`dropped`).
    fn stats(&self, now: u64, ports: Vec<PortStats>, dropped: ctl::DroppedConnections) -> Stats {
        let mut s = self.engine.stats();
        // Counters of the nodes this policy shares with earlier ones (by name): what their
        // engines counted, drained or still draining.
        for (i, n) in self.prog.nodes.iter().enumerate() {
            if let Some(c) = self.carried.get(&n.name) {
                s.nodes[i].add(c);
            }
        }
        if !self.draining.is_empty() {
            // One index of this policy's names for every draining engine's nodes (names are
            // stored normalized): linear in the nodes, on the loop's thread.
            let index: HashMap<&str, usize> = self
                .prog
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.as_str(), i))
                .collect();
            for d in &self.draining {
                let st = d.engine.stats();
                let nodes = d.engine.program().nodes.iter().zip(&st.nodes);
                for ((n, c), _) in nodes.zip(&d.kept).filter(|(_, &k)| k) {
                    if let Some(&i) = index.get(n.name.as_str()) {
                        s.nodes[i].add(c);
                    }
                }
            }
        }
        let (t0, b0) = &self.samples[0];
        let (t1, b1) = &self.samples[1];
        let dt = t1.saturating_sub(*t0).max(1) as f64 / 1e12;
        let nodes: Vec<NodeStats> = self
            .prog
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let c = &s.nodes[i];
                let rate = (b1[i].saturating_sub(b0[i])) as f64 * 8.0 / dt;
                NodeStats {
                    id: i,
                    name: n.name.clone(),
                    algo: n.algo.name().to_string(),
                    leaf: n.leaf.is_some(),
                    packets: c.packets,
                    bytes: c.bytes,
                    drops: DropReason::ALL.map(|r| c.drops[r.index()]),
                    rate_bps: if *t1 > *t0 { rate.round() } else { 0.0 },
                }
            })
            .collect();
        let n = self.prog.nodes.len();
        let shapers: Vec<ShaperStats> = self
            .prog
            .shapers
            .iter()
            .zip(&self.shaped)
            .enumerate()
            .map(|(i, (sh, &(packets, bytes)))| {
                let (p0, b0_) = self
                    .shaped_carried
                    .get(&sh.name)
                    .copied()
                    .unwrap_or_default();
                let rate = (b1[n + i].saturating_sub(b0[n + i])) as f64 * 8.0 / dt;
                ShaperStats {
                    id: i,
                    name: sh.name.clone(),
                    limit_bps: sh.rate_bps,
                    burst_bytes: sh.burst_bytes,
                    packets: packets + p0,
                    bytes: bytes + b0_,
                    rate_bps: if *t1 > *t0 { rate.round() } else { 0.0 },
                }
            })
            .collect();
        let tenants: Vec<TenantStats> = self
            .cfg
            .tenants
            .iter()
            .enumerate()
            .map(|(i, (name, ifn))| TenantStats {
                tenant: i + 1,
                name: name.clone(),
                iface: ifn.clone(),
                rx_frames: self.c.rx_frames[i],
                rx_bytes: self.c.rx_bytes[i],
                drops: self.tenant_drops(i),
                macs: self.macs.owned(i) as u64,
                queues: self.queue_budget.used(i).into(),
                buffers: self.buffer_budget.used(i).into(),
                rejects: self
                    .iface
                    .driver_rejects(self.drivers[i])
                    .copied()
                    .unwrap_or_default(),
            })
            .collect();
        let c = &self.c;
        let dataplane = DataplaneStats {
            parse_errors: c.parse_errors,
            oversize: c.oversize,
            no_buffer: c.tenant_no_buffer.iter().sum(),
            ring_full: c.ring_full,
            no_queue: c.tenant_no_queue.iter().sum(),
            unclassified: c.unclassified,
            engine_drops: c.engine_drops,
            tx_frames: c.tx_frames,
            tx_bytes: c.tx_bytes,
            tx_errors: c.tx_errors,
            reverse_frames: c.reverse_frames,
            reverse_flooded: c.reverse_flooded,
            reverse_unknown: c.reverse_unknown,
            reverse_dropped: c.reverse_dropped,
            source_rejected: c.source_rejects.iter().flatten().sum::<u64>()
                + c.ip_rejects.iter().sum::<u64>(),
            reverse_queued: self.rev.queues.iter().map(|q| q.len() as u64).sum(),
            reloads: c.reloads,
            queues_live: self.queues.len() as u64,
            queues_reclaimed: c.queues_reclaimed,
            class_moves: c.class_moves,
            uplink_up: self.uplink_down_since.is_none(),
            uplink_downs: c.uplink_downs,
            uplink_down_ms: c.uplink_down_ms
                + self
                    .uplink_down_since
                    .map_or(0, |t| now.saturating_sub(t) / 1_000_000_000),
            // Flows the engine forgot (`Engine::close_flow`) once no queue used them:
            // reclaimed queues', and a moved flow's at its old leaf.
            flows_closed: self.engine_flows.closed,
            engine_flows: self.engine.open_flows() as u64,
            backlog: (self.engine.backlog()
                + self
                    .draining
                    .iter()
                    .map(|e| e.engine.backlog())
                    .sum::<usize>()) as u64,
            buffers_free: self.free.len() as u64,
            reserved_queues: self.queue_budget.reserve().into(),
            reserved_buffers: self.buffer_budget.reserve().into(),
            ctl_dropped: dropped.ctl,
            metrics_dropped: dropped.metrics,
        };
        Stats {
            ok: true,
            policy: self.prog.name.clone(),
            generation: self.generation,
            uptime_s: now.saturating_sub(self.started_ps) as f64 / 1e12,
            rate_bps: self.cfg.rate_bps,
            nodes,
            shapers,
            tenants,
            dataplane,
            timing: self.timing.stats(),
            iface: self.iface.counters().clone(),
            ports,
        }
    }
}

#[cfg(test)]
mod tests {
    /// A thread pinned as the loop is starts control threads off its CPU: they move to the
    /// CPUs the process could use before ([`super::away_from_the_loop`]).
    #[test]
    fn control_threads_leave_the_loops_cpu() {
        let allowed = super::allowed_cpus().unwrap();
        if allowed.len() < 2 {
            return; // one CPU: nowhere else to go
        }
        let loop_cpu = allowed[0];
        let (mine, control) = std::thread::spawn(move || {
            super::pin_to_cpu(loop_cpu).unwrap();
            let mine = super::allowed_cpus().unwrap();
            let control = std::thread::spawn(|| {
                super::away_from_the_loop();
                super::allowed_cpus().unwrap()
            })
            .join()
            .unwrap();
            (mine, control)
        })
        .join()
        .unwrap();
        assert_eq!(mine, vec![loop_cpu]);
        assert!(
            !control.contains(&loop_cpu) && !control.is_empty(),
            "control thread on {control:?}, the loop on {loop_cpu}"
        );
    }

    /// A CPU this process may not run on is named as such (it read "Invalid argument (os
    /// error 22)"); the attempt leaves the thread's affinity as it was.
    #[test]
    fn a_cpu_out_of_reach_is_named() {
        let last = libc::CPU_SETSIZE as usize - 1;
        if std::thread::available_parallelism().map_or(0, |n| n.get()) > last {
            return; // a machine with every possible CPU: nothing out of reach
        }
        let e = super::pin_to_cpu(last).unwrap_err().to_string();
        assert!(e.contains("not a CPU this process may run on"), "{e}");
    }

    use super::*;

    /// A second claim on one interface is refused while the first is held, and free again
    /// once it is dropped (as when a daemon exits or is killed). Needs a writable /run/weft
    /// (root); elsewhere there is nothing to claim and the test says so.
    #[test]
    fn an_interface_is_claimed_by_one_daemon_at_a_time() {
        let first = claim_interface("lo", "--uplink lo").unwrap();
        if first.is_none() {
            eprintln!("skipped: /run/weft is not writable here");
            return;
        }
        let e = claim_interface("lo", "--tenant b=lo")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--tenant b=lo") && e.contains("in use by another weft run"),
            "{e}"
        );
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        let path = first.as_ref().unwrap().path.clone();
        assert!(path.exists());
        drop(first);
        assert!(!path.exists(), "{} is left behind", path.display());
        let second = claim_interface("lo", "--uplink lo").unwrap();
        assert!(second.is_some() && path.exists());
        drop(second);
        assert!(claim_interface("no-such-if0", "--uplink x")
            .unwrap()
            .is_none());
    }

    #[test]
    fn tenant_drop_names_begin_with_the_source_refusals() {
        assert_eq!(TENANT_DROPS[..4], SourceReject::NAMES);
    }

    #[test]
    fn link_state_is_read_from_sysfs() {
        // Loopback has no carrier notion: `unknown`, taken as up.
        assert_eq!(link_up("lo"), Some(true));
        assert_eq!(link_up("no-such-if0"), None);
        assert_eq!(link_up("../lo"), None);
    }

    /// The laws themselves are tested on [`Stats`] (`stats::tests`); here, that they are
    /// read from the JSON answer, and that what is not one is named.
    #[test]
    fn check_balance_reads_the_json_answer() {
        let mut s = answer(&Stats {
            ok: true,
            ..Stats::default()
        });
        assert_eq!(check_balance(&s), Ok(()));
        s["tenants"] = serde_json::json!([serde_json::to_value(TenantStats::default()).unwrap()]);
        s["tenants"][0]["rx_frames"] = serde_json::json!(3);
        assert!(check_balance(&s).unwrap_err().starts_with("received 3"));
        s["iface"].as_object_mut().unwrap().remove("sent");
        let e = check_balance(&s).unwrap_err();
        assert!(
            e.starts_with("not a stats answer: iface: missing field `sent`"),
            "{e}"
        );
    }

    /// A flow let go of while it still held packets waits to be closed, once, and only
    /// while no queue uses it: let go of twice (opened again in between, as a flow moved
    /// away, back and away again), or opened again and then closed at once, a second try
    /// would give the engine the closed queue, which it refuses with a panic.
    #[test]
    fn a_flow_let_go_twice_while_busy_is_closed_once() {
        let text =
            "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: q, type: leaf, flows: {by: none}}\n";
        let prog = Arc::new(
            policy::compile_str("q.yaml".as_ref(), text, &LoadOptions::default()).unwrap(),
        );
        let mut e = FastEngine::new(prog.clone());
        let p = Packet::new(1, 100, PacketMeta::default());
        let q = e.open_flow(&p, prog.classify(&p.meta)).unwrap();
        assert_eq!(e.enqueue_flow(p, &q, 0), Ok(()));
        let mut held = EngineFlows::default();
        for _ in 0..2 {
            held.opened(Some(q));
            held.release(&mut e, Some(q));
        }
        assert_eq!(held.closed, 0);
        assert!(e.dequeue(0).is_some());
        held.retry(&mut e);
        assert_eq!(held.closed, 1);
        assert!(held.pending.is_empty());
        assert_eq!(e.open_flows(), 0);
        // Let go of while busy, opened again, drained, let go of (closed at once): nothing
        // is left to try.
        let q = e.open_flow(&p, prog.classify(&p.meta)).unwrap();
        assert_eq!(e.enqueue_flow(p, &q, 0), Ok(()));
        held.opened(Some(q));
        held.release(&mut e, Some(q));
        held.opened(Some(q));
        assert!(e.dequeue(0).is_some());
        held.release(&mut e, Some(q));
        assert_eq!(held.closed, 2);
        held.retry(&mut e);
        assert_eq!(held.closed, 2);
        assert!(held.pending.is_empty());
    }
}
