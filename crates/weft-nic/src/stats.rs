//! The answer to `weft ctl stats` (`{"cmd": "stats"}` on the control socket), typed: the
//! dataplane builds a [`Stats`] and serializes it; the balance check
//! ([`Stats::check_balance`]) and the Prometheus exporter ([`crate::ctl::prometheus`]) read
//! its fields. The JSON is these types' serde form, field for field in declaration order;
//! docs/dataplane.md's "`ctl stats` schema" lists it.
//!
//! Counters count since the daemon started (node and shaping-class counters are carried
//! across reloads by name). Counts by reason are arrays in the reasons' counter order
//! ([`DropReason::ALL`], [`Reject::ALL`], [`TENANT_DROPS`]), answered as objects from the
//! reason's name to its count.
//!
//! [`Stats::from_json`] reads an answer back (`weft ctl`, the metrics endpoint, the tests):
//! a field missing, renamed or of another type is an error naming it and its place, never a
//! count taken as 0.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use weft_core::sched::DropReason;

use crate::iface::{self, Reject};

/// One `ctl stats` answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The request was answered: always `true` in a stats answer (a refused request is
    /// answered `{"ok": false, "error": ...}` instead).
    pub ok: bool,
    /// The running policy's name.
    pub policy: String,
    /// The running policy's generation: 1, plus one per reload.
    pub generation: u64,
    /// Seconds since the loop started.
    pub uptime_s: f64,
    /// The uplink's transmit rate, bits per second.
    pub rate_bps: u64,
    /// Per node of the running policy, in its order.
    pub nodes: Vec<NodeStats>,
    /// Per shaping class of the running policy, in its order.
    pub shapers: Vec<ShaperStats>,
    /// Per `--tenant`, in their order.
    pub tenants: Vec<TenantStats>,
    /// The loop's own counters.
    pub dataplane: DataplaneStats,
    /// Where the loop's time goes and how long frames wait.
    pub timing: TimingStats,
    /// The OS/NIC interface's counters (descriptors, doorbells, refusals).
    pub iface: iface::Counters,
    /// Per port that has counters: the tenants' ports in their order, then the uplink.
    pub ports: Vec<PortStats>,
}

/// One node of the running policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStats {
    /// Its index in the policy's nodes.
    pub id: usize,
    pub name: String,
    /// Its algorithm's name (`wfq`, `prio`, `leaf`, ...).
    #[serde(rename = "type")]
    pub algo: String,
    /// Whether it is a leaf.
    pub leaf: bool,
    /// Packets sent through it.
    pub packets: u64,
    /// Bytes sent through it (frame bytes).
    pub bytes: u64,
    /// Packets the engine dropped at it, by [`DropReason`] (`DropReason::ALL` order).
    #[serde(with = "drop_counts")]
    pub drops: [u64; DropReason::ALL.len()],
    /// Bits per second sent through it over the last second (rounded; 0 until two samples
    /// a second apart).
    pub rate_bps: f64,
}

/// One shaping class of the running policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShaperStats {
    /// Its index in the policy's shaping classes.
    pub id: usize,
    pub name: String,
    /// Its rate limit, bits per second.
    pub limit_bps: u64,
    /// Its burst, bytes.
    pub burst_bytes: u64,
    /// Packets sent through it.
    pub packets: u64,
    /// Bytes sent through it (frame bytes).
    pub bytes: u64,
    /// Bits per second sent through it over the last second (rounded; 0 until two samples
    /// a second apart).
    pub rate_bps: f64,
}

/// The names of a tenant's drop reasons ([`TenantStats::drops`]), in counter order: the
/// source refusals first (`SourceReject`'s), then the rest.
pub const TENANT_DROPS: [&str; 8] = [
    "spoofed_source",
    "group_source",
    "unconfigured_source",
    "mac_table_full",
    "ip_source",
    "no_queue",
    "no_buffer",
    "reverse_dropped",
];

/// One `--tenant`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantStats {
    /// Its id: its position in the `--tenant` list, from 1.
    pub tenant: usize,
    pub name: String,
    /// Its port's interface.
    pub iface: String,
    /// Frames read from its port.
    pub rx_frames: u64,
    /// Bytes read from its port (frame bytes).
    pub rx_bytes: u64,
    /// Frames of its dropped, by reason ([`TENANT_DROPS`] order): refused at its port for
    /// their source address, refused for want of a flow queue or a frame buffer, and
    /// return-path frames to it dropped for want of a buffer.
    #[serde(with = "tenant_drop_counts")]
    pub drops: [u64; TENANT_DROPS.len()],
    /// Source MAC addresses it owns now.
    pub macs: u64,
    /// Flow queues it holds now.
    pub queues: u64,
    /// Frame buffers it holds now.
    pub buffers: u64,
    /// Its driver's posts, doorbell entries and completions refused by the OS/NIC
    /// interface, by [`Reject`] (`Reject::ALL` order); only reasons above 0 are answered.
    #[serde(
        serialize_with = "reject_counts::serialize_nonzero",
        deserialize_with = "reject_counts::deserialize_nonzero"
    )]
    pub rejects: [u64; Reject::ALL.len()],
}

/// The loop's own counters (frames unless said otherwise). Not [`crate::dataplane::DpCounters`]:
/// that holds per-tenant vectors that this answers summed (and per tenant in
/// [`TenantStats`]), and the loop's state (live queues, free buffers, the uplink's link)
/// is not in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataplaneStats {
    /// Ingress drops: frames that did not parse.
    pub parse_errors: u64,
    /// Ingress drops: frames longer than a pool buffer (2,048 bytes).
    pub oversize: u64,
    /// Ingress drops: frames refused for want of a frame buffer (every tenant's
    /// `no_buffer`).
    pub no_buffer: u64,
    /// Ingress drops: frames whose flow queue's ring was full.
    pub ring_full: u64,
    /// Ingress drops: new flows refused for want of a flow queue (every tenant's
    /// `no_queue`).
    pub no_queue: u64,
    /// Ingress drops: frames no leaf of the policy matches.
    pub unclassified: u64,
    /// Packets the engine dropped (by the policy's limits).
    pub engine_drops: u64,
    /// Frames sent on the uplink.
    pub tx_frames: u64,
    /// Bytes sent on the uplink (frame bytes).
    pub tx_bytes: u64,
    /// Frames the uplink refused to send.
    pub tx_errors: u64,
    /// Return path: frames read from the uplink.
    pub reverse_frames: u64,
    /// Return path: group (broadcast, multicast) frames copied to every tenant.
    pub reverse_flooded: u64,
    /// Return path: unicast frames to an address no tenant owns (dropped, never flooded).
    pub reverse_unknown: u64,
    /// Return path: frames dropped for want of a buffer.
    pub reverse_dropped: u64,
    /// Ingress drops: frames refused for their source MAC or IP address (every tenant's
    /// source refusals).
    pub source_rejected: u64,
    /// Return path: frames waiting to be sent to their tenants now.
    pub reverse_queued: u64,
    /// Reloads done.
    pub reloads: u64,
    /// Flow queues open now.
    pub queues_live: u64,
    /// Flow queues closed after a flow went idle.
    pub queues_reclaimed: u64,
    /// Flows moved to another class (their classifier fields changed).
    pub class_moves: u64,
    /// Whether the uplink's link is up now.
    pub uplink_up: bool,
    /// Times the uplink's link went down.
    pub uplink_downs: u64,
    /// Milliseconds the uplink's link was down in all (the current period included).
    pub uplink_down_ms: u64,
    /// Flows the engine forgot once no queue used them (reclaimed queues', and a moved
    /// flow's at its old leaf).
    pub flows_closed: u64,
    /// Flows open in the engine now.
    pub engine_flows: u64,
    /// Packets in the engines now (the running one and those still draining).
    pub backlog: u64,
    /// Frame buffers free now.
    pub buffers_free: u64,
    /// Flow queues reserved for each tenant.
    pub reserved_queues: u64,
    /// Frame buffers reserved for each tenant.
    pub reserved_buffers: u64,
    /// Control connections closed unanswered (every serving thread busy, the queue full).
    pub ctl_dropped: u64,
    /// Metrics connections closed unanswered (the same).
    pub metrics_dropped: u64,
}

/// The loop's latency histograms (reset with `{"cmd": "reset_timing"}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingStats {
    /// Loop passes that did some work.
    pub busy_iteration: HistSummary,
    /// One frame handed to the uplink (with a transmit ring, a copy into it).
    pub uplink_send: HistSummary,
    /// One frame handed to a tenant's port (return path).
    pub reverse_send: HistSummary,
    /// The kick after an uplink transmit step (the `send(2)` that runs the receiver's
    /// stack on veth).
    pub uplink_kick: HistSummary,
    /// The kick after a return-path transmit step.
    pub reverse_kick: HistSummary,
    /// How late departures start: transmit start − the later of the paced start and the
    /// frame's arrival.
    pub departure_late: HistSummary,
    /// Per tenant, in `--tenant` order.
    pub tenants: Vec<TenantTiming>,
}

/// One tenant's waits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantTiming {
    /// Its id (from 1).
    pub tenant: usize,
    /// Its frames' receive-ring wait: kernel timestamp to read by the loop (none without
    /// kernel timestamps, as with AF_XDP).
    pub rx_wait: HistSummary,
    /// Its frames' NIC sojourn: read to transmission start.
    pub queue: HistSummary,
    /// The receive-ring wait of the uplink frames addressed to it.
    pub reverse_wait: HistSummary,
}

/// A histogram of durations ([`crate::timing::Hist::summary`]); durations in
/// microseconds, rounded to 0.1 µs, percentiles within 1/16 of the true value; all 0 when
/// empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistSummary {
    /// Values recorded.
    pub n: u64,
    /// Their mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

/// One port's counters, by backend (told apart by their `backend` field: read as that
/// backend's, so that a missing or misspelt field is named, not lost in "no variant
/// matches").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PortStats {
    AfPacket(AfPacketPort),
    AfXdp(AfXdpPort),
}

impl PortStats {
    /// The port's interface.
    pub fn iface(&self) -> &str {
        match self {
            PortStats::AfPacket(p) => &p.iface,
            PortStats::AfXdp(p) => &p.iface,
        }
    }
}

impl<'de> Deserialize<'de> for PortStats {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PortStats, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        match v.get("backend").and_then(serde_json::Value::as_str) {
            Some("af-packet") => AfPacketPort::deserialize(v)
                .map(PortStats::AfPacket)
                .map_err(D::Error::custom),
            Some("af-xdp") => AfXdpPort::deserialize(v)
                .map(PortStats::AfXdp)
                .map_err(D::Error::custom),
            Some(other) => Err(D::Error::unknown_variant(other, &["af-packet", "af-xdp"])),
            None => Err(D::Error::missing_field("backend")),
        }
    }
}

/// The `backend` field of an AF_PACKET port: `"af-packet"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AfPacketBackend {
    #[default]
    #[serde(rename = "af-packet")]
    AfPacket,
}

/// The `backend` field of an AF_XDP port: `"af-xdp"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AfXdpBackend {
    #[default]
    #[serde(rename = "af-xdp")]
    AfXdp,
}

/// An AF_PACKET port ([`crate::afpacket::PacketSocketStats::port_stats`]). Not
/// [`crate::afpacket::TxCounters`] with the receive side beside it: the answer names the
/// transmit counters `tx_*` and orders them among the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AfPacketPort {
    /// Its interface.
    pub iface: String,
    pub backend: AfPacketBackend,
    /// Frames longer than a receive slot, read cut.
    pub rx_truncated: u64,
    /// Frames the kernel offered the receive ring, those it dropped included
    /// (`PACKET_STATISTICS`).
    pub rx_kernel_seen: u64,
    /// Frames the kernel dropped with the receive ring full.
    pub rx_kernel_drops: u64,
    /// Frames whose TCP or UDP checksum the port completed (`TP_STATUS_CSUMNOTREADY`).
    pub rx_csum_completed: u64,
    /// Frames dropped because their checksum could not be completed.
    pub rx_csum_dropped: u64,
    /// Frames handed to the kernel.
    pub tx_frames: u64,
    /// Frames refused as longer than the MTU allows (`EMSGSIZE`).
    pub tx_oversize: u64,
    /// Sends refused with the transmit ring full.
    pub tx_ring_full: u64,
    /// Kicks (zero-length `send(2)`s) that went through.
    pub kicks: u64,
    /// Kicks the kernel refused for now (`EAGAIN`, `ENOBUFS`, `EBUSY`).
    pub kick_again: u64,
    /// Kicks that failed otherwise.
    pub kick_errors: u64,
    /// Kicks that sent fewer bytes than were handed over (`PACKET_LOSS` skipped slots).
    pub tx_kick_short: u64,
    /// Bytes in the slots those kicks skipped.
    pub tx_skipped_bytes: u64,
}

/// An AF_XDP port (`afxdp::XdpPortStats::port_stats`), summed over its receive
/// queues. Its own counters are kept per queue and per side; this is their sum, named as
/// answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AfXdpPort {
    /// Its interface.
    pub iface: String,
    pub backend: AfXdpBackend,
    /// Receive queues (one AF_XDP socket each).
    pub queues: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received (frame bytes).
    pub rx_bytes: u64,
    /// Receive descriptors outside one receive chunk or naming a chunk the kernel does
    /// not hold, skipped.
    pub rx_bad_desc: u64,
    /// Ring indices more than a ring ahead, skipped (receive and transmit side).
    pub bad_index: u64,
    /// Frames posted for transmission.
    pub tx_frames: u64,
    /// Transmitted frames the kernel completed.
    pub tx_completed: u64,
    /// Sends refused for want of a free transmit chunk.
    pub tx_no_frame: u64,
    /// Sends refused with the transmit ring full.
    pub tx_ring_full: u64,
    /// Frames longer than a transmit chunk, refused.
    pub tx_oversize: u64,
    /// Completions for a chunk not in flight, skipped.
    pub tx_bad_completion: u64,
    /// Kicks (`sendto(MSG_DONTWAIT)`) that went through.
    pub kicks: u64,
    /// Kicks the kernel refused for now.
    pub kick_again: u64,
    /// Kicks that failed otherwise.
    pub kick_errors: u64,
    /// The kernel's statistics of its sockets, summed.
    pub kernel: XdpKernelStats,
}

/// The kernel's `struct xdp_statistics` (`XDP_STATISTICS`), in its order: libc's has no
/// serde form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct XdpKernelStats {
    /// Frames dropped for other reasons than the ones below.
    pub rx_dropped: u64,
    /// Frames dropped for invalid fill-ring descriptors.
    pub rx_invalid_descs: u64,
    /// Transmit descriptors the kernel found invalid.
    pub tx_invalid_descs: u64,
    /// Frames dropped with the RX ring full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when the kernel needed a chunk (the loop fell
    /// behind).
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the TX ring empty.
    pub tx_ring_empty_descs: u64,
}

/// A stats answer that does not read as [`Stats`]: where in it (`tenants[1]`,
/// `dataplane.tx_frames`) and why (``missing field `rx_frames` ``).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", at(.path))]
pub struct ReadError {
    /// Where: the path of the field or of the section it is missing from, empty for the
    /// answer itself.
    pub path: String,
    /// Why, as serde says it (a missing field, a field of another type, an unknown
    /// reason).
    pub message: String,
}

/// `path: `, or nothing for the answer itself.
fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

impl Stats {
    /// Reads a `ctl stats` answer: a field missing, renamed or of another type is an error
    /// that names it and where it is, never a count taken as 0. Fields it does not know are
    /// passed over (a newer daemon may answer more).
    pub fn from_json(v: &serde_json::Value) -> Result<Stats, ReadError> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            ReadError {
                path: if path == "." { String::new() } else { path },
                message: e.into_inner().to_string(),
            }
        })
    }

    /// The dataplane's conservation laws, on a snapshot taken at quiescence: every frame
    /// received from a tenant was posted or dropped with a counted reason; every posted
    /// descriptor was sent or dropped with a counted reason; every sent descriptor is a
    /// transmitted frame. `Err` names the law that failed, with its figures.
    pub fn check_balance(&self) -> Result<(), String> {
        let rx: u64 = self.tenants.iter().map(|t| t.rx_frames).sum();
        let d = &self.dataplane;
        let ingress_drops = d.parse_errors
            + d.oversize
            + d.source_rejected
            + d.no_buffer
            + d.ring_full
            + d.no_queue
            + d.unclassified;
        let i = &self.iface;
        let (posted, sent, dropped, tx) = (i.posted, i.sent, i.dropped, d.tx_frames);
        if rx != posted + ingress_drops {
            return Err(format!(
                "received {rx} != posted {posted} + ingress drops {ingress_drops}"
            ));
        }
        if posted != sent + dropped {
            return Err(format!(
                "posted {posted} != sent {sent} + dropped {dropped}"
            ));
        }
        if sent != tx {
            return Err(format!("sent {sent} != transmitted frames {tx}"));
        }
        Ok(())
    }
}

/// Writes `counts` as an object from each reason's name to its count, in order, leaving
/// out the zeros when `nonzero`.
fn write_counts<S: Serializer>(
    names: impl Iterator<Item = &'static str>,
    counts: &[u64],
    nonzero: bool,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(
        names
            .zip(counts.iter().copied())
            .filter(|&(_, n)| !nonzero || n > 0),
    )
}

/// Reads an object from reason names to counts into their array. A name not among `names`
/// is refused; a reason left out is refused too when `every` (the answer has every
/// reason), and counts 0 otherwise (only those above 0 are answered).
fn read_counts<'de, D: Deserializer<'de>, const N: usize>(
    names: [&'static str; N],
    every: bool,
    d: D,
) -> Result<[u64; N], D::Error> {
    let map = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
    let mut counts = [0; N];
    let mut seen = [false; N];
    for (k, n) in map {
        let Some(i) = names.iter().position(|&name| name == k) else {
            return Err(serde::de::Error::custom(format_args!(
                "unknown reason `{k}` (the reasons: {})",
                names.join(", ")
            )));
        };
        (counts[i], seen[i]) = (n, true);
    }
    if every {
        if let Some(i) = seen.iter().position(|&s| !s) {
            return Err(serde::de::Error::missing_field(names[i]));
        }
    }
    Ok(counts)
}

/// `[u64; 5]` by [`DropReason`], as `{reason: n}` (every reason).
mod drop_counts {
    use super::*;

    const N: usize = DropReason::ALL.len();

    pub fn serialize<S: Serializer>(c: &[u64; N], s: S) -> Result<S::Ok, S::Error> {
        write_counts(DropReason::ALL.iter().map(|r| r.name()), c, false, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; N], D::Error> {
        read_counts(DropReason::ALL.map(DropReason::name), true, d)
    }
}

/// `[u64; 8]` by [`TENANT_DROPS`], as `{reason: n}` (every reason).
mod tenant_drop_counts {
    use super::*;

    const N: usize = TENANT_DROPS.len();

    pub fn serialize<S: Serializer>(c: &[u64; N], s: S) -> Result<S::Ok, S::Error> {
        write_counts(TENANT_DROPS.into_iter(), c, false, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; N], D::Error> {
        read_counts(TENANT_DROPS, true, d)
    }
}

/// `[u64; 12]` by [`Reject`], as `{reason: n}`: every reason ([`iface::Counters`]'s), or
/// only those above 0 (a tenant's), read back the same way.
pub(crate) mod reject_counts {
    use super::*;

    const N: usize = Reject::ALL.len();

    pub fn serialize<S: Serializer>(c: &[u64; N], s: S) -> Result<S::Ok, S::Error> {
        write_counts(Reject::ALL.iter().map(|r| r.name()), c, false, s)
    }

    pub fn serialize_nonzero<S: Serializer>(c: &[u64; N], s: S) -> Result<S::Ok, S::Error> {
        write_counts(Reject::ALL.iter().map(|r| r.name()), c, true, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; N], D::Error> {
        read_counts(Reject::ALL.map(Reject::name), true, d)
    }

    pub fn deserialize_nonzero<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; N], D::Error> {
        read_counts(Reject::ALL.map(Reject::name), false, d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts by reason go under each reason's own name, in counter order, and come back.
    #[test]
    fn counts_by_reason_are_named_by_their_reasons() {
        let node = NodeStats {
            drops: [1, 2, 3, 4, 5],
            ..NodeStats::default()
        };
        let v = serde_json::to_value(&node).unwrap();
        let drops: Vec<(&str, u64)> = v["drops"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, n)| (k.as_str(), n.as_u64().unwrap()))
            .collect();
        let want: Vec<(&str, u64)> = DropReason::ALL
            .iter()
            .map(|r| (r.name(), node.drops[r.index()]))
            .collect();
        assert_eq!(drops, want);
        assert_eq!(serde_json::from_value::<NodeStats>(v).unwrap(), node);

        let mut t = TenantStats::default();
        t.drops[TENANT_DROPS.iter().position(|&k| k == "ip_source").unwrap()] = 7;
        t.rejects[Reject::BadRate as usize] = 2;
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["drops"]["ip_source"], 7, "{v}");
        assert_eq!(v["drops"].as_object().unwrap().len(), 8, "{v}");
        assert_eq!(v["rejects"], serde_json::json!({"bad_rate": 2}), "{v}");
        assert_eq!(serde_json::from_value::<TenantStats>(v).unwrap(), t);

        let i = iface::Counters {
            rejects: t.rejects,
            ..iface::Counters::default()
        };
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(v["rejects"].as_object().unwrap().len(), 12, "{v}");
        assert_eq!(v["rejects"]["bad_rate"], 2, "{v}");
        assert_eq!(serde_json::from_value::<iface::Counters>(v).unwrap(), i);

        let e = serde_json::from_str::<TenantStats>(
            &serde_json::to_string(&t)
                .unwrap()
                .replace("bad_rate", "bad_mood"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown reason `bad_mood`"), "{e}");

        // A section answered with every reason is refused without one, naming it; a
        // tenant's refusals, answered only above 0, are not.
        let mut v = serde_json::to_value(&i).unwrap();
        v["rejects"].as_object_mut().unwrap().remove("busy");
        let e = serde_json::from_value::<iface::Counters>(v).unwrap_err();
        assert!(e.to_string().contains("missing field `busy`"), "{e}");
        let mut v = serde_json::to_value(&t).unwrap();
        v["drops"].as_object_mut().unwrap().remove("no_buffer");
        let e = serde_json::from_value::<TenantStats>(v).unwrap_err();
        assert!(e.to_string().contains("missing field `no_buffer`"), "{e}");
        let mut v = serde_json::to_value(&node).unwrap();
        v["drops"].as_object_mut().unwrap().remove("flow_bytes");
        let e = serde_json::from_value::<NodeStats>(v).unwrap_err();
        assert!(e.to_string().contains("missing field `flow_bytes`"), "{e}");
        let mut v = serde_json::to_value(&t).unwrap();
        v["rejects"] = serde_json::json!({});
        let none = serde_json::from_value::<TenantStats>(v).unwrap();
        assert_eq!(none.rejects, [0; 12]);
    }

    /// A port's counters are read back as its own backend's.
    #[test]
    fn ports_are_told_apart_by_backend() {
        let ports = vec![
            PortStats::AfPacket(AfPacketPort {
                iface: "t1".into(),
                tx_frames: 3,
                ..AfPacketPort::default()
            }),
            PortStats::AfXdp(AfXdpPort {
                iface: "up".into(),
                tx_frames: 4,
                ..AfXdpPort::default()
            }),
        ];
        let text = serde_json::to_string(&ports).unwrap();
        assert!(
            text.starts_with(r#"[{"iface":"t1","backend":"af-packet","#),
            "{text}"
        );
        assert!(
            text.contains(r#"{"iface":"up","backend":"af-xdp","#),
            "{text}"
        );
        let back: Vec<PortStats> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ports);
        assert_eq!(back[1].iface(), "up");
        // What is wrong with a port is said of its own backend's fields.
        for (from, to, says) in [
            (
                "\"tx_frames\":4",
                "\"tx_frame\":4",
                "missing field `tx_frames`",
            ),
            ("\"af-xdp\"", "\"af_xdp\"", "unknown variant `af_xdp`"),
            ("\"backend\":\"af-xdp\",", "", "missing field `backend`"),
        ] {
            let e = serde_json::from_str::<Vec<PortStats>>(&text.replace(from, to)).unwrap_err();
            assert!(e.to_string().contains(says), "{from}: {e}");
        }
    }

    /// An answer that does not read names the field at fault and where it is.
    #[test]
    fn a_stats_answer_that_does_not_read_names_the_field_and_its_place() {
        let s = Stats {
            ok: true,
            tenants: vec![TenantStats::default(), TenantStats::default()],
            ports: vec![PortStats::AfPacket(AfPacketPort::default())],
            ..Stats::default()
        };
        let good = serde_json::to_value(&s).unwrap();
        assert_eq!(Stats::from_json(&good), Ok(s));
        let broken = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = good.clone();
            f(&mut v);
            Stats::from_json(&v).unwrap_err().to_string()
        };
        for (e, says) in [
            (
                broken(&|v| {
                    v["tenants"][1].as_object_mut().unwrap().remove("rx_frames");
                }),
                "tenants[1]: missing field `rx_frames`",
            ),
            (
                broken(&|v| v["dataplane"]["tx_frames"] = serde_json::json!(-1)),
                "dataplane.tx_frames: invalid value: integer `-1`",
            ),
            (
                broken(&|v| {
                    v.as_object_mut().unwrap().remove("ok");
                }),
                "missing field `ok`",
            ),
            (
                broken(&|v| {
                    v["ports"][0].as_object_mut().unwrap().remove("kicks");
                }),
                "ports[0]: missing field `kicks`",
            ),
        ] {
            assert!(e.starts_with(says), "{e}");
        }
    }

    #[test]
    fn check_balance_names_the_broken_law() {
        let mut s = Stats {
            tenants: vec![TenantStats::default(), TenantStats::default()],
            ..Stats::default()
        };
        s.tenants[0].rx_frames = 10;
        s.tenants[1].rx_frames = 5;
        s.dataplane.parse_errors = 1;
        s.dataplane.no_buffer = 2;
        s.dataplane.tx_frames = 11;
        (s.iface.posted, s.iface.sent, s.iface.dropped) = (12, 11, 1);
        assert_eq!(s.check_balance(), Ok(()));
        s.tenants[1].rx_frames = 6;
        assert!(s.check_balance().unwrap_err().starts_with("received 16"));
        s.tenants[1].rx_frames = 5;
        s.iface.dropped = 0;
        assert!(s.check_balance().unwrap_err().starts_with("posted 12"));
        s.iface.dropped = 1;
        s.dataplane.tx_frames = 10;
        assert!(s.check_balance().unwrap_err().starts_with("sent 11"));
    }
}
