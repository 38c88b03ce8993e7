//! AF_PACKET sockets: the ring code is weft-sys's ([`weft_sys::afpacket`], re-exported here
//! so `weft_nic::afpacket::PacketSocket` names it as before); this module adds what weft-nic
//! makes of a socket's counters, the `ports` entry of `ctl stats` ([`PacketSocketStats`]).
//!
//! Invariants and costs are the ring's (see weft-sys); reading the stats is one
//! `getsockopt(PACKET_STATISTICS)`.

use crate::stats::{AfPacketBackend, AfPacketPort};

pub use weft_sys::afpacket::*;

/// A socket's counters as `ctl stats` reports them.
pub trait PacketSocketStats {
    /// This socket's counters for `ctl stats` (`ports`).
    fn port_stats(&self) -> AfPacketPort;
}

impl PacketSocketStats for PacketSocket {
    fn port_stats(&self) -> AfPacketPort {
        let c = self.tx_counters();
        let (kernel_rx, kernel_drops) = self.kernel_stats();
        AfPacketPort {
            iface: self.name.clone(),
            backend: AfPacketBackend::AfPacket,
            rx_truncated: self.truncated,
            rx_kernel_seen: kernel_rx,
            rx_kernel_drops: kernel_drops,
            rx_csum_completed: self.csum_completed,
            rx_csum_dropped: self.csum_dropped,
            tx_frames: c.frames,
            tx_oversize: c.oversize,
            tx_ring_full: c.ring_full,
            kicks: c.kicks,
            kick_again: c.kick_again,
            kick_errors: c.kick_errors,
            tx_kick_short: c.kick_short,
            tx_skipped_bytes: c.skipped_bytes,
        }
    }
}
