//! AF_XDP ports for the software NIC (an optional backend, cargo feature `af-xdp`;
//! `weft run --backend af-xdp`), written by hand over `libc` like [`crate::afpacket`]. What
//! weft-nic makes of a port (the dataplane's `Port`, the `ctl stats` entry) is weft-nic's.
//!
//! **Why by hand.** The Rust AF_XDP crates either wrap libbpf (`xsk-rs`, `afxdp`, `xdpsock`:
//! a C toolchain, `libbpf-sys`, libelf and zlib at build time) or are pure Rust but young and
//! load no XDP program (`xdp`, `xdp-socket`: the redirect program would still need `aya` and
//! an eBPF compiler). What weft needs is small: one UMEM, four rings and a six-slot XDP
//! program, assembled below instruction by instruction. So the feature builds with `libc`
//! alone, on any Linux machine with a Rust toolchain, and no system package.
//!
//! **Per interface** ([`XdpPort::open`]):
//! 1. One AF_XDP socket per receive queue (`ETHTOOL_GCHANNELS`; veth has one queue unless
//!    created with `numrxqueues`), each with its own UMEM: an anonymous mapping of `frames`
//!    chunks of `frame_size` bytes, registered with `XDP_UMEM_REG`; fill, completion, RX and
//!    TX rings sized with `setsockopt`, located with `getsockopt(XDP_MMAP_OFFSETS)` and
//!    mapped at the `XDP_PGOFF_*` offsets; bound with `sockaddr_xdp` in `XDP_COPY` mode (no
//!    zero-copy on veth). Queue 0's socket transmits; every socket receives.
//! 2. `bpf(BPF_MAP_CREATE)` an XSKMAP with one slot per queue, each socket inserted at its
//!    queue (`BPF_MAP_UPDATE_ELEM`).
//! 3. `bpf(BPF_PROG_LOAD)` [`redirect_program`]: `bpf_redirect_map(&xsks,
//!    ctx->rx_queue_index, XDP_PASS)` (a queue without a socket passes to the stack), then
//!    `bpf(BPF_LINK_CREATE)` attaches it in generic (SKB) mode through a **bpf_link**. The
//!    link's fd is the only reference to the attachment, so it is detached when the port is
//!    dropped *or the process dies*: a crashed `weft run` leaves no program behind. An
//!    interface that already has an XDP program is refused (`EBUSY`), never taken over.
//! 4. Promiscuous mode, held by an AF_PACKET socket that receives nothing (protocol 0): the
//!    kernel counts it per socket and releases it when the socket closes (veth does not
//!    filter by MAC; physical NICs do).
//!
//! **Rings** (`Documentation/networking/af_xdp.rst`): single producer, single consumer, free-
//! running `u32` indices, a power-of-two size. A producer writes entries, then stores its
//! index with release ordering; a consumer loads the other side's index with acquire
//! ordering before it reads entries and stores its own index with release ordering when it
//! is done with them ([`ring_ready`], [`ring_free`]). The fill ring has twice as many slots
//! as receive chunks, because the kernel publishes its fill consumer index lazily (only when
//! its cached entries run out): with 2× slots a recycled chunk always finds room.
//!
//! **UMEM layout**: chunk `i` starts at `i * frame_size`; chunks `[0, rx)` receive (owned by
//! the kernel while in the fill ring, by us from the RX ring until recycled after the
//! callback), chunks `[rx, rx + tx)` transmit (free list → TX ring → completion ring → free
//! list). In copy mode the kernel writes a frame at `XDP_PACKET_HEADROOM` (256) into its
//! chunk, so 2048-byte chunks carry frames up to 1792 bytes (the MTU is 1500); longer frames
//! are dropped by the kernel and counted in its `rx_dropped`.
//!
//! **Trust**: nothing the kernel writes into shared memory is trusted for memory safety. An
//! index that runs more than a ring's size ahead is counted (`bad_index`) and ignored; a
//! descriptor whose frame is not inside one receive chunk, or whose chunk is not one we gave
//! the kernel, is counted (`rx_bad_desc`) and skipped; a completion naming anything but a
//! chunk we queued for transmission is counted (`tx_bad_completion`) and its chunk stays
//! out of the free list ([`rx_chunk`], [`completion_chunk`], per-chunk ownership flags).
//!
//! **TX**: [`XdpPort::send`] copies the frame into a free transmit chunk and posts a
//! descriptor; the kernel transmits (generic xmit, `__dev_direct_xmit`, no qdisc) when kicked
//! with `sendto(MSG_DONTWAIT)`, which it does 32 descriptors per call: the port kicks every
//! [`KICK_BATCH`] posts and on [`XdpPort::flush`] (once per dataplane iteration), and again
//! while the kernel answers `EAGAIN` (budget spent, completion ring full).
//!
//! Cost per frame: receive, no system call (the loop busy-polls the RX producer index), one
//! copy out of the UMEM by the dataplane; transmit, one copy into the UMEM and a share of
//! one `sendto`. No allocation after [`XdpPort::open`]. The kernel still builds an skb per
//! frame in copy mode (generic XDP on receive, generic xmit on transmit).
//!
//! The files: `bpf.rs` (the UAPI, the program, its attachment), `ring.rs` (ring arithmetic,
//! descriptor checks, the mappings), `queue.rs` (one socket: receive and transmit), this
//! file (errors and [`XdpPort`]).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

mod bpf;
mod queue;
mod ring;
#[cfg(test)]
mod tests;

pub use self::bpf::*;
pub use self::queue::*;
pub use self::ring::*;

// ---------------------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------------------

/// A step of opening an AF_XDP port that the kernel refused: which step, on which interface,
/// the errno, and what usually causes it.
#[derive(Debug, thiserror::Error)]
#[error("AF_XDP on `{iface}`: {step} failed: {source}{hint}")]
pub struct XdpError {
    /// The interface.
    pub iface: String,
    /// The step that failed (`bpf(BPF_PROG_LOAD)`, ...).
    pub step: String,
    /// The kernel's error, with its errno.
    #[source]
    pub source: io::Error,
    hint: String,
}

impl XdpError {
    fn new(iface: &str, step: impl Into<String>, source: io::Error) -> XdpError {
        let step = step.into();
        let errno = source.raw_os_error();
        let name = errno.and_then(errno_name);
        let why = match errno {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                " (needs root: CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF or CAP_SYS_ADMIN)"
            }
            Some(libc::EAFNOSUPPORT) => " (kernel built without CONFIG_XDP_SOCKETS)",
            Some(libc::EBUSY) | Some(libc::EEXIST) if step.contains("LINK_CREATE") => {
                " (another XDP program is attached to this interface; `ip link show` names it)"
            }
            Some(libc::EBUSY) if step.starts_with("bind") => {
                " (another AF_XDP socket is bound to this queue: is another weft running here? One that just exited releases it within moments)"
            }
            Some(libc::ENOMEM) if step.contains("UMEM") => {
                " (locked-memory limit: run as root or raise RLIMIT_MEMLOCK)"
            }
            _ => "",
        };
        let hint = match name {
            Some(n) => format!(" [{n}]{why}"),
            None => why.to_string(),
        };
        XdpError {
            iface: iface.to_string(),
            step,
            source,
            hint,
        }
    }

    fn with_log(mut self, log: &str) -> XdpError {
        let log = log.trim();
        if !log.is_empty() {
            self.hint += &format!("; verifier log:\n{log}");
        }
        self
    }

    /// The errno, when the failure was a system call's.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

fn errno_name(e: i32) -> Option<&'static str> {
    Some(match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::E2BIG => "E2BIG",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ENOSYS => "ENOSYS",
        _ => return None,
    })
}

type R<T> = Result<T, XdpError>;

// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// The port.
// ---------------------------------------------------------------------------------------

/// An interface driven through AF_XDP: one socket per receive queue, the redirect program
/// attached in generic mode while the port lives.
pub struct XdpPort {
    // Drop order: detach the program first, then close the sockets and unmap.
    _xdp: Attachment,
    queues: Vec<Queue>,
    _promisc: OwnedFd,
    /// Interface name.
    pub name: String,
    /// Interface index.
    pub ifindex: u32,
    /// Its link state ([`XdpPort::link_up`]).
    link: crate::link::LinkState,
}

// SAFETY: the UMEM and ring mappings are owned by this value alone (no pointer into them is
// kept elsewhere); moving the port to another thread moves that ownership. It is not
// `Sync` (the transmit side is a `RefCell`).
unsafe impl Send for XdpPort {}

impl XdpPort {
    /// Opens `iface` with the default geometry.
    pub fn open(iface: &str) -> R<XdpPort> {
        XdpPort::open_with(iface, &XdpConfig::default())
    }

    /// Opens `iface`: sockets on every receive queue, the XDP program attached.
    pub fn open_with(iface: &str, cfg: &XdpConfig) -> R<XdpPort> {
        let ifindex = crate::net::ifindex(iface)
            .map_err(|e| XdpError::new(iface, "find the interface", e))?
            as u32;
        let n = rx_queues(iface);
        let mut queues = Vec::with_capacity(n as usize);
        for q in 0..n {
            queues.push(Queue::open(iface, ifindex, q, cfg, q == 0)?);
        }
        let xdp = attach(iface, ifindex, &queues)?;
        let promisc = promisc(iface, ifindex)?;
        Ok(XdpPort {
            _xdp: xdp,
            queues,
            _promisc: promisc,
            name: iface.to_string(),
            ifindex,
            link: crate::link::LinkState::new(iface),
        })
    }

    /// Receive queues (one socket each).
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// The port's counters and the kernel's per-socket statistics (`XDP_STATISTICS`),
    /// summed over queues.
    pub fn xdp_counters(&self) -> XdpCounters {
        let mut rx = RxCounters::default();
        let mut k = [0u64; 6];
        for q in &self.queues {
            rx.frames += q.rxc.frames;
            rx.bytes += q.rxc.bytes;
            rx.bad_desc += q.rxc.bad_desc;
            rx.bad_index += q.rxc.bad_index;
            if let Some(s) = q.kernel_stats() {
                for (a, b) in k.iter_mut().zip([
                    s.rx_dropped,
                    s.rx_invalid_descs,
                    s.tx_invalid_descs,
                    s.rx_ring_full,
                    s.rx_fill_ring_empty_descs,
                    s.tx_ring_empty_descs,
                ]) {
                    *a += b;
                }
            }
        }
        let t = self.queues[0].txs.borrow().c.clone();
        XdpCounters {
            queues: self.queues.len() as u64,
            rx_frames: rx.frames,
            rx_bytes: rx.bytes,
            rx_bad_desc: rx.bad_desc,
            bad_index: rx.bad_index + t.bad_index,
            tx_frames: t.frames,
            tx_completed: t.completed,
            tx_no_frame: t.no_frame,
            tx_ring_full: t.ring_full,
            tx_oversize: t.oversize,
            tx_bad_completion: t.bad_completion,
            kicks: t.kicks,
            kick_again: t.kick_again,
            kick_errors: t.kick_errors,
            kernel: XdpKernelCounters {
                rx_dropped: k[0],
                rx_invalid_descs: k[1],
                tx_invalid_descs: k[2],
                rx_ring_full: k[3],
                rx_fill_ring_empty_descs: k[4],
                tx_ring_empty_descs: k[5],
            },
        }
    }

    /// Frames posted for transmission and not yet completed by the kernel.
    pub fn tx_in_flight(&self) -> u64 {
        let t = self.queues[0].txs.borrow();
        t.c.frames - t.c.completed
    }

    /// Calls `f` on the frames received now, at most `max_frames` per queue (at least one),
    /// and recycles their chunks; `f` also gets the receive time (0: AF_XDP has none).
    /// Returns the frames seen.
    pub fn recv_batch(&mut self, max_frames: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        let budget = max_frames.max(1);
        let mut n = 0;
        for q in &mut self.queues {
            n += q.recv(budget, f);
        }
        n
    }

    /// Copies `frame` into a free transmit chunk and posts it (on queue 0): `Ok(false)` when
    /// no chunk or ring slot is free, or the frame is longer than a chunk (counted).
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        Ok(self.queues[0].send(frame))
    }

    /// Kicks the kernel to transmit what was posted.
    pub fn flush(&self) {
        self.queues[0].flush();
    }

    /// Whether its interface's link is up (`None`: the interface is gone, or no answer).
    pub fn link_up(&self) -> Option<bool> {
        self.link.up()
    }

    /// Queue 0's socket: `poll(2)` reports it readable while its RX ring holds frames (the
    /// kernel wakes it as it fills the ring). Frames on further queues are seen after the
    /// idle wait's timeout at the latest.
    pub fn wait_fd(&self) -> Option<RawFd> {
        Some(self.queues[0].fd.as_raw_fd())
    }
}

/// An [`XdpPort`]'s counters, summed over its queues ([`XdpPort::xdp_counters`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Receive queues (one AF_XDP socket each).
    pub queues: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received (frame bytes).
    pub rx_bytes: u64,
    /// Receive descriptors outside one receive chunk or naming a chunk the kernel does not
    /// hold, skipped.
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
    pub kernel: XdpKernelCounters,
}

/// The kernel's `struct xdp_statistics` (`XDP_STATISTICS`), summed over a port's sockets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdpKernelCounters {
    /// Frames dropped for other reasons than the ones below.
    pub rx_dropped: u64,
    /// Frames dropped for invalid fill-ring descriptors.
    pub rx_invalid_descs: u64,
    /// Transmit descriptors the kernel found invalid.
    pub tx_invalid_descs: u64,
    /// Frames dropped with the RX ring full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when the kernel needed a chunk.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the TX ring empty.
    pub tx_ring_empty_descs: u64,
}
