//! NIC models: how packets written by the host's cores reach the wire under each NIC design
//! the papers compare. Two families:
//!
//! * [`hwq`]: hardware transmit queues served by the NIC's own fixed arbiter (round robin /
//!   DRR, DCB classes): `mq`, `qpf`, `mq-pri`, `mq-fair`, `tonic`. The policy is only
//!   approximated (by queue assignment and software qdiscs).
//! * [`engine`]: the policy enforced by the weft-core scheduling engine, either in host
//!   software on one core (`sq`) or on the NIC (`loom`, `senic`), where the NIC schedules
//!   first and then pulls the payload over DMA.
//!
//! Every model counts doorbell (PCIe MMIO) writes, descriptor and payload DMA reads, and the
//! CPU time it models ([`NicCounters`]). Models are driven by the simulator through [`Nic`]:
//! the simulator calls `advance(now)` at every instant something happens, in time order, so
//! models can process their internal events lazily and causally.
//!
//! Time: the simulator runs until at most `weft_core::sched::LAST_ARRIVAL_PS` (2^63 ps); a
//! model's latencies and costs may be anything up to 2^64 − 1 ps, so a time a model computes
//! (now + a latency) that falls past the end of the clock is `u64::MAX`, never, as in the
//! scheduling core.

pub mod engine;
pub mod hwq;

use weft_core::classifier::PacketMeta;
use weft_core::policy::names::suggest;

/// A packet as the simulator tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pkt {
    /// Global flow index.
    pub flow: u32,
    /// Application index.
    pub app: u16,
    /// Core that wrote it.
    pub core: u16,
    /// Frame bytes.
    pub bytes: u32,
    /// When the application wrote it, ps.
    pub submit_ps: u64,
    /// Request slot (request/response apps), or `u32::MAX`.
    pub req: u32,
    /// A TCP packet's first payload byte in its connection's stream (0 for others).
    pub seq: u64,
    /// The frame bytes of its TSO segment in all (the segment a descriptor carries and the
    /// NIC model splits into frames; a frame written on its own is its own segment:
    /// `tso_bytes == bytes`).
    pub tso_bytes: u32,
    /// Frames in its segment (at least 1).
    pub tso_frames: u16,
    /// Frames of its segment written after it (0: the segment's last frame).
    pub tso_more: u16,
}

impl Pkt {
    /// Whether it starts a segment (a descriptor).
    #[inline]
    pub fn starts_segment(&self) -> bool {
        self.tso_more + 1 == self.tso_frames
    }
}

/// Per-application facts a model may use to place packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppInfo {
    /// Tenant index.
    pub tenant: u16,
    /// Prioritized (TONIC head insertion; `mq-pri` high class).
    pub prioritized: bool,
    /// DCB class (0..8) for `mq-pri` / `mq-fair`.
    pub dcb_class: u8,
    /// Tenant weight (TONIC queue pools).
    pub tenant_weight: u64,
}

/// What a model counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicCounters {
    /// Doorbell (MMIO) writes by the host.
    pub doorbell_writes: u64,
    /// Descriptor DMA reads by the NIC.
    pub descriptor_reads: u64,
    /// Payload DMA reads by the NIC (one per packet).
    pub payload_reads: u64,
    /// Host CPU time the model spends (driver, software scheduling, doorbells), ps (128
    /// bits: a cost per packet may be as long as the clock, and every packet pays it).
    pub cpu_ps: u128,
}

/// The interface between the simulator and a NIC model.
pub trait Nic {
    /// The host writes a packet at `now_ps` (from `pkt.core`).
    fn submit(&mut self, now_ps: u64, pkt: Pkt, meta: &PacketMeta);
    /// The end of a burst of writes by `core` at `now_ps` (where drivers ring doorbells).
    fn flush(&mut self, now_ps: u64, core: u16);
    /// Processes internal events up to `now_ps`.
    fn advance(&mut self, now_ps: u64);
    /// The link is free at `now_ps`: the packet that starts transmission now, if any.
    fn poll(&mut self, now_ps: u64) -> Option<Pkt>;
    /// The earliest time after `now_ps` the model's state changes on its own (or a packet
    /// becomes ready for the link).
    fn next_event(&self, now_ps: u64) -> Option<u64>;
    /// Moves packets the model dropped since the last call into `out`.
    fn take_drops(&mut self, out: &mut Vec<Pkt>);
    /// Counters so far.
    fn counters(&self) -> NicCounters;
}

/// The NIC designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NicKind {
    Sq,
    Mq,
    Qpf,
    MqPri,
    MqFair,
    Tonic,
    Senic,
    Loom,
}

impl NicKind {
    /// Every model, in report order.
    pub const ALL: [NicKind; 8] = [
        NicKind::Sq,
        NicKind::Mq,
        NicKind::Qpf,
        NicKind::MqPri,
        NicKind::MqFair,
        NicKind::Tonic,
        NicKind::Senic,
        NicKind::Loom,
    ];

    /// Its name in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            NicKind::Sq => "sq",
            NicKind::Mq => "mq",
            NicKind::Qpf => "qpf",
            NicKind::MqPri => "mq-pri",
            NicKind::MqFair => "mq-fair",
            NicKind::Tonic => "tonic",
            NicKind::Senic => "senic",
            NicKind::Loom => "loom",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<NicKind> {
        NicKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// All names, comma separated.
    pub fn names() -> String {
        NicKind::ALL.map(|k| k.name()).join(", ")
    }

    /// What to say of `name`, which names no model: the closest model if one is close, and
    /// the list.
    pub fn unknown(name: &str) -> String {
        let hint = suggest(name, &NicKind::ALL.map(|k| k.name()))
            .map_or(String::new(), |s| format!("; did you mean `{s}`?"));
        format!(
            "unknown NIC model `{name}`{hint} (known: {})",
            NicKind::names()
        )
    }
}

/// The NIC parameters `--set MODEL.KEY=VALUE` (and a scenario's `set`) may name: those
/// [`NicParams::set`] takes.
pub const PARAMETERS: &[&str] = &[
    "sq.cpu_per_packet",
    "sq.ring",
    "hw.ring",
    "hw.quantum",
    "hw.queue_rate",
    "hw.qdisc_limit",
    "mq.qdisc",
    "dcb.qdisc",
    "tonic.queues",
    "senic.dma",
    "senic.max_pulls",
    "loom.batch",
    "loom.batch_timeout",
    "loom.descriptor_dma",
    "loom.payload_dma",
    "loom.pipeline",
    "all.descriptors_per_read",
    "all.engine",
];

/// The software qdisc per hardware queue of `mq`, `mq-pri`, `mq-fair`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MqQdisc {
    /// Per-flow deficit round robin.
    Fq,
    /// One FIFO.
    Fifo,
    /// The scenario's policy (a weft-core engine per queue).
    Policy,
}

/// Smallest `hw.quantum`, bytes: the smallest Ethernet frame (and `host.mtu`'s least). The
/// NIC's round robin adds a quantum per visit to a queue until it covers the head frame, so
/// its work per frame grows as frame / quantum.
pub const MIN_QUANTUM_BYTES: u64 = 64;

/// Most hardware queues `tonic.queues` may ask for: more than NICs have (TONIC uses 16 to
/// 64), and within the model's 32-bit queue numbers; every queue is simulated.
pub const MAX_TONIC_QUEUES: usize = 65_536;

/// Parameters of every model (defaults in [`NicParams::default`]); set in a scenario under
/// `nic: {MODEL: {key: value}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct NicParams {
    /// `sq`: software scheduling cost per packet on the one scheduling core, ps. The default
    /// (1.3 µs) saturates the core at ≈ 9.3 Gbit/s with 1500 B packets: Loom Fig. 9a's SQ
    /// below 10 Gbit/s line rate.
    pub sq_cpu_ps_per_packet: u64,
    /// `sq`: hardware ring depth, packets.
    pub sq_ring_packets: usize,
    /// `mq`/`qpf`/`mq-*`/`tonic`: hardware ring depth per queue (BQL-limited), descriptors
    /// (a TSO segment is one; see [`hwq`]).
    pub hw_ring_packets: usize,
    /// `mq`/`qpf`/`mq-*`/`tonic`: NIC DRR quantum per queue per round, bytes (at least
    /// [`MIN_QUANTUM_BYTES`]).
    pub hw_quantum_bytes: u64,
    /// `mq`/`qpf`/`mq-*`/`tonic`: NIC rate limit per queue, bits per second (none by default;
    /// `hw.queue_rate=none` lifts one).
    pub hw_queue_rate_bps: Option<u64>,
    /// `mq`/`mq-*`/`tonic`: software qdisc limit per queue, packets (tail drop).
    pub qdisc_limit_packets: usize,
    /// `mq`: per-queue software qdisc: `fq` (per-flow DRR, Linux fq_codel without AQM;
    /// default), `fifo` (pfifo), or `policy` (the scenario's policy per queue).
    pub mq_qdisc: MqQdisc,
    /// `mq-pri`/`mq-fair`: the software part of the DCB hybrids (Loom Fig. 4), per queue;
    /// default `policy`.
    pub dcb_qdisc: MqQdisc,
    /// `tonic`: hardware queues shared among the tenants' pools (at most
    /// [`MAX_TONIC_QUEUES`]).
    pub tonic_queues: usize,
    /// `senic`: payload DMA latency of a pull, ps.
    pub senic_dma_ps: u64,
    /// `senic`: pulls outstanding at once (scheduled, not yet on the wire), packets.
    pub senic_max_pulls: usize,
    /// `loom`: per-core doorbell batch, bytes of descriptors announced per doorbell.
    pub loom_batch_bytes: u64,
    /// `loom`: a partial batch is announced after this long, ps.
    pub loom_batch_timeout_ps: u64,
    /// `loom`: descriptor DMA latency after a doorbell, ps.
    pub loom_descriptor_dma_ps: u64,
    /// `loom`: payload DMA latency after scheduling, ps.
    pub loom_payload_dma_ps: u64,
    /// `loom`: packets scheduled ahead of the wire (DMA pipeline depth).
    pub loom_pipeline_packets: usize,
    /// Descriptors fetched per descriptor DMA read (every model).
    pub descriptors_per_read: u64,
    /// `sq`/`senic`/`loom`: run weft-core's reference engine instead of the fast one
    /// (`all.engine=reference`; same departures, slower: a cross-check).
    pub reference_engine: bool,
}

impl Default for NicParams {
    fn default() -> NicParams {
        NicParams {
            sq_cpu_ps_per_packet: 1_300_000,
            sq_ring_packets: 16,
            hw_ring_packets: 4,
            hw_quantum_bytes: 1514,
            hw_queue_rate_bps: None,
            qdisc_limit_packets: 100_000,
            mq_qdisc: MqQdisc::Fq,
            dcb_qdisc: MqQdisc::Policy,
            tonic_queues: 16,
            senic_dma_ps: 1_000_000,
            senic_max_pulls: 4,
            loom_batch_bytes: 65_536,
            loom_batch_timeout_ps: 1_000_000,
            loom_descriptor_dma_ps: 500_000,
            loom_payload_dma_ps: 500_000,
            loom_pipeline_packets: 2,
            descriptors_per_read: 8,
            reference_engine: false,
        }
    }
}

impl NicParams {
    /// The per-queue qdisc of model `kind` (`mq`, `mq-pri`, `mq-fair`; FIFO elsewhere).
    pub fn qdisc_of(&self, kind: NicKind) -> MqQdisc {
        match kind {
            NicKind::Mq => self.mq_qdisc,
            NicKind::MqPri | NicKind::MqFair => self.dcb_qdisc,
            _ => MqQdisc::Fifo,
        }
    }

    /// Sets `model.key` (one of [`PARAMETERS`]) from text with units; the error names the
    /// known keys.
    pub fn set(&mut self, model: &str, key: &str, v: &str) -> Result<(), String> {
        use weft_core::units::{parse_size, parse_time};
        let time = |v: &str| parse_time(v, false).map_err(|e| e.to_string());
        let size = |v: &str| parse_size(v, true).map_err(|e| e.to_string());
        let count = |v: &str| {
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("`{v}`: expected a positive count"))
        };
        match (model, key) {
            ("sq", "cpu_per_packet") => self.sq_cpu_ps_per_packet = time(v)?,
            ("sq", "ring") => self.sq_ring_packets = count(v)?,
            ("hw", "ring") => self.hw_ring_packets = count(v)?,
            ("hw", "quantum") => {
                let q = size(v)?;
                if q < MIN_QUANTUM_BYTES {
                    return Err(format!(
                        "`{v}` is less than {MIN_QUANTUM_BYTES} B, the smallest frame: the \
                         NIC's round robin adds a quantum per visit to a queue until it pays for \
                         the head frame, so a {q} B quantum takes up to {} visits per 1500 B \
                         frame, and the run as much longer; at least {MIN_QUANTUM_BYTES}b",
                        1500u64.div_ceil(q.max(1))
                    ));
                }
                self.hw_quantum_bytes = q
            }
            // `none` lifts a limit a scenario set (Loom Fig. 2's policy per queue).
            ("hw", "queue_rate") if v == "none" => self.hw_queue_rate_bps = None,
            ("hw", "queue_rate") => {
                self.hw_queue_rate_bps =
                    Some(weft_core::units::parse_rate(v).map_err(|e| e.to_string())?)
            }
            ("hw", "qdisc_limit") => self.qdisc_limit_packets = count(v)?,
            (m @ ("mq" | "dcb"), "qdisc") => {
                let q = match v {
                    "fq" => MqQdisc::Fq,
                    "fifo" => MqQdisc::Fifo,
                    "policy" => MqQdisc::Policy,
                    _ => return Err(format!("qdisc `{v}`: expected `fq`, `fifo` or `policy`")),
                };
                if m == "mq" {
                    self.mq_qdisc = q;
                } else {
                    self.dcb_qdisc = q;
                }
            }
            ("tonic", "queues") => {
                let n = count(v)?;
                if n > MAX_TONIC_QUEUES {
                    return Err(format!(
                        "tonic.queues = {n}: at most {MAX_TONIC_QUEUES} hardware queues"
                    ));
                }
                self.tonic_queues = n;
            }
            ("senic", "dma") => self.senic_dma_ps = time(v)?,
            ("senic", "max_pulls") => self.senic_max_pulls = count(v)?,
            ("loom", "batch") => self.loom_batch_bytes = size(v)?,
            ("loom", "batch_timeout") => self.loom_batch_timeout_ps = time(v)?,
            ("loom", "descriptor_dma") => self.loom_descriptor_dma_ps = time(v)?,
            ("loom", "payload_dma") => self.loom_payload_dma_ps = time(v)?,
            ("loom", "pipeline") => self.loom_pipeline_packets = count(v)?,
            ("all", "descriptors_per_read") => self.descriptors_per_read = count(v)? as u64,
            ("all", "engine") => {
                self.reference_engine = match v {
                    "fast" => false,
                    "reference" => true,
                    _ => return Err(format!("engine `{v}`: expected `fast` or `reference`")),
                }
            }
            _ => {
                let name = format!("{model}.{key}");
                let hint = parameter_hint(model, key)
                    .map_or(String::new(), |s| format!("; did you mean `{s}`?"));
                return Err(format!(
                    "unknown NIC parameter `{name}`{hint} (known: {})",
                    PARAMETERS.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// The parameter `MODEL.KEY`, which names none, most likely meant: the closest key of the
/// same model (`hw.rate` is `hw.queue_rate`), else the closest name (`lom.batch` is
/// `loom.batch`).
fn parameter_hint(model: &str, key: &str) -> Option<String> {
    let keys: Vec<&str> = PARAMETERS
        .iter()
        .filter_map(|p| p.strip_prefix(model)?.strip_prefix('.'))
        .collect();
    suggest(key, &keys)
        .map(|k| format!("{model}.{k}"))
        .or_else(|| suggest(&format!("{model}.{key}"), PARAMETERS))
}

#[cfg(test)]
mod parameter_tests {
    use super::*;

    /// Every name the error message lists (and hints from) is one `set` takes.
    #[test]
    fn every_listed_parameter_is_settable() {
        let value = |name: &str| match name {
            "mq.qdisc" | "dcb.qdisc" => "fifo",
            "all.engine" => "reference",
            "hw.queue_rate" => "1gbit",
            "sq.cpu_per_packet"
            | "senic.dma"
            | "loom.batch_timeout"
            | "loom.descriptor_dma"
            | "loom.payload_dma" => "1us",
            "hw.quantum" | "loom.batch" => "1kb",
            _ => "4",
        };
        for name in PARAMETERS {
            let (model, key) = name.split_once('.').unwrap();
            NicParams::default()
                .set(model, key, value(name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let e = NicParams::default().set("loom", "bach", "1kb").unwrap_err();
        assert!(e.contains("did you mean `loom.batch`?"), "{e}");
    }

    /// `loom.batchsize` was told of `loom.batch_timeout`: a name that extends or respells a
    /// parameter, or names part of a key of its model, is told of that parameter.
    #[test]
    fn a_near_parameter_name_is_told_the_parameter_meant() {
        for (model, key, want) in [
            ("loom", "batchsize", "loom.batch"),
            ("loom", "batch_size", "loom.batch"),
            ("loom", "bach", "loom.batch"),
            ("loom", "batchtimeout", "loom.batch_timeout"),
            ("hw", "queuerate", "hw.queue_rate"),
            ("hw", "rate", "hw.queue_rate"),
            ("lom", "batch", "loom.batch"),
            ("senic", "pulls", "senic.max_pulls"),
        ] {
            let e = NicParams::default().set(model, key, "1").unwrap_err();
            assert!(
                e.contains(&format!("; did you mean `{want}`? (known:")),
                "{model}.{key}: {e}"
            );
        }
    }

    /// A scenario's per-queue limit (Loom Fig. 2 sets 125 Mbit/s) could not be lifted from
    /// the command line, so the paper's other setup (the policy as each queue's qdisc, no
    /// NIC limit) could not be run from that file: `hw.queue_rate=none` lifts it.
    #[test]
    fn a_queue_rate_can_be_lifted() {
        let mut p = NicParams::default();
        p.set("hw", "queue_rate", "125mbit").unwrap();
        assert_eq!(p.hw_queue_rate_bps, Some(125_000_000));
        p.set("hw", "queue_rate", "none").unwrap();
        assert_eq!(p.hw_queue_rate_bps, None);
    }
}
