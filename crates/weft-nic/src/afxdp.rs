//! AF_XDP ports (cargo feature `af-xdp`): the rings, UMEM and XDP program are weft-sys's
//! ([`weft_sys::afxdp`], re-exported here so `weft_nic::afxdp::XdpPort` names them as
//! before); this module makes an [`XdpPort`] a dataplane [`Port`] and its counters the
//! `ports` entry of `ctl stats` ([`XdpPortStats`]).
//!
//! Invariants and costs are the rings' (see weft-sys); reading the stats is one
//! `getsockopt(XDP_STATISTICS)` per queue.

use std::io;
use std::os::fd::RawFd;

use crate::dataplane::Port;
use crate::stats::{AfXdpBackend, AfXdpPort, PortStats, XdpKernelStats};

pub use weft_sys::afxdp::*;

/// A port's counters as `ctl stats` reports them.
pub trait XdpPortStats {
    /// The port's counters and the kernel's per-socket statistics (`XDP_STATISTICS`),
    /// summed over queues (`ctl stats`, `ports`).
    fn port_stats(&self) -> AfXdpPort;
}

impl XdpPortStats for XdpPort {
    fn port_stats(&self) -> AfXdpPort {
        let c = self.xdp_counters();
        let k = c.kernel;
        AfXdpPort {
            iface: self.name.clone(),
            backend: AfXdpBackend::AfXdp,
            queues: c.queues,
            rx_frames: c.rx_frames,
            rx_bytes: c.rx_bytes,
            rx_bad_desc: c.rx_bad_desc,
            bad_index: c.bad_index,
            tx_frames: c.tx_frames,
            tx_completed: c.tx_completed,
            tx_no_frame: c.tx_no_frame,
            tx_ring_full: c.tx_ring_full,
            tx_oversize: c.tx_oversize,
            tx_bad_completion: c.tx_bad_completion,
            kicks: c.kicks,
            kick_again: c.kick_again,
            kick_errors: c.kick_errors,
            kernel: XdpKernelStats {
                rx_dropped: k.rx_dropped,
                rx_invalid_descs: k.rx_invalid_descs,
                tx_invalid_descs: k.tx_invalid_descs,
                rx_ring_full: k.rx_ring_full,
                rx_fill_ring_empty_descs: k.rx_fill_ring_empty_descs,
                tx_ring_empty_descs: k.tx_ring_empty_descs,
            },
        }
    }
}

impl Port for XdpPort {
    fn recv_batch(&mut self, max_frames: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        XdpPort::recv_batch(self, max_frames, f)
    }

    fn send(&self, frame: &[u8]) -> io::Result<bool> {
        XdpPort::send(self, frame)
    }

    fn flush(&self) {
        XdpPort::flush(self)
    }

    fn link_up(&self) -> Option<bool> {
        XdpPort::link_up(self)
    }

    fn wait_fd(&self) -> Option<RawFd> {
        XdpPort::wait_fd(self)
    }

    fn stats(&self) -> Option<PortStats> {
        Some(PortStats::AfXdp(self.port_stats()))
    }
}
