//! weft's software NIC: a userspace NIC that takes tenants' frames from Linux
//! interfaces, classifies them, schedules them with weft's sans-IO core and transmits them on
//! an uplink paced at a configured rate (Loom and SENIC prototyped their NICs the same way,
//! in software).
//!
//! * [`iface`]: the OS/NIC interface (Loom §4.3–4.4, SENIC §6.2.3), sans-IO: per-flow
//!   descriptor rings, per-core doorbells with inline metadata updates, completions, queue
//!   ownership, bounded outstanding descriptors per class.
//! * [`parse`]: Ethernet/IP/L4 frames to classifier metadata (never panics).
//! * [`link`]: an interface's link state from sysfs, read without allocating.
//! * [`afpacket`]: AF_PACKET sockets with TPACKET_V2 (default) or V3 receive rings (Linux only).
//! * `afxdp` (cargo feature `af-xdp`, on by default): AF_XDP sockets with a hand-assembled
//!   XDP redirect program, the optional backend (`weft run --backend af-xdp`).
//! * [`dataplane`]: the busy-polling loop: receive, post, doorbell, fetch, schedule, pace,
//!   transmit, complete; live stats and reload over a Unix socket ([`ctl`]).
//! * [`stats`]: the typed answer of `weft ctl stats`.

#![forbid(unsafe_code)]

pub mod afpacket;
#[cfg(feature = "af-xdp")]
pub mod afxdp;
pub use weft_sys::clock;
pub mod ctl;
pub mod dataplane;
pub mod fuzzing;
pub mod iface;
pub mod isolation;
pub mod link;
pub mod offload;
pub mod parse;
pub mod placement;
pub mod stats;
pub mod timing;
