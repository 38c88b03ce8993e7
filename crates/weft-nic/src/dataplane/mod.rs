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
//!
//! The files: `ports.rs` (the [`Port`] trait, backends, interface claims), `config.rs` (what
//! `weft run` is given, its errors and counters), `state.rs` (the loop's state), `run.rs`
//! (starting and running the loop, reloads), `cpu.rs` (pinning, slice, idle wait), and
//! `State`'s methods by side: `rx.rs` (tenants' frames in), `tx.rs` (the engine and the
//! uplink, the reverse path), `upkeep.rs` (sampling, reclaiming, reloads, stats).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{self, Classification, LeafId, LoadOptions, NodeId, Program, ShaperId};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::link::wire_ps;
use weft_core::sched::{DropReason, Engine, FlowHandle, FlowQueue, Packet, Update};

use crate::afpacket::{PacketSocket, PacketSocketStats, RingConfig};
use crate::ctl::{self, Reply, Request};
use crate::iface::{self, Control, Descriptor, DoorbellEntry, Interface, QueueId, Status};
use crate::isolation::{
    fmt_mac, source_ip, Budget, Destination, Mac, MacTable, Prefix, SourceReject,
};
use crate::link::LinkState;
use crate::stats::{
    DataplaneStats, NodeStats, PortStats, ShaperStats, Stats, TenantStats, TenantTiming,
    TimingStats, TENANT_DROPS,
};
use crate::timing::Hist;
use crate::{clock, parse};

mod config;
mod cpu;
mod ports;
mod run;
mod rx;
mod state;
#[cfg(test)]
mod tests;
mod tx;
mod upkeep;

pub use self::config::*;
pub use self::cpu::*;
pub use self::ports::*;
pub use self::run::*;
use self::state::*;

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
