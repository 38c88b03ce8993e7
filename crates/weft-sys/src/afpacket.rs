//! AF_PACKET sockets with a memory-mapped receive ring, written by hand over `libc` (no
//! packet library), in one of two TPACKET versions (`Documentation/networking/packet_mmap.rst`):
//!
//! * **TPACKET_V2, the default** (`RingVersion::V2`): fixed 2 KiB frame slots, each handed
//!   over by its own `tp_status` (`TP_STATUS_USER`) as soon as the kernel has written it, and
//!   given back with `TP_STATUS_KERNEL`. A lone frame is seen at once: the low-latency ring
//!   (docs/dataplane.md, latency). Frames longer than a slot arrive truncated and are
//!   counted as such, never passed on.
//! * **TPACKET_V3** (`RingVersion::V3`, `--ring-version v3`): `PACKET_RX_RING` with
//!   `tpacket_req3`; the kernel fills a block with frames (`tpacket3_hdr` + frame, chained
//!   by `tp_next_offset`) and hands it over by setting `TP_STATUS_USER` in the block header;
//!   the reader walks its frames and gives the block back. A block is handed over when full
//!   or when its retire timer (`tp_retire_blk_tov`, 1 ms here, the timer's unit) expires, so
//!   at low load a frame waits up to 1 ms — even in the smallest block (one page, two
//!   full-size frames), a lone request fills nothing and waits for the timer. Fewer ring
//!   handovers under load is what V3 buys with that. Blocks are 32 KiB.
//!
//! **Transmission** goes through a memory-mapped transmit ring (`PACKET_TX_RING`, in the
//! socket's TPACKET version; 256 slots of 4 KiB, so every frame of the dataplane's 2 KiB
//! buffers fits): [`PacketSocket::send`] copies a frame into the next slot and hands it over
//! (`TP_STATUS_SEND_REQUEST`); [`PacketSocket::flush`] kicks the kernel once (a zero-length
//! `send(2)`), which transmits every slot handed over, in ring order, and gives each back
//! (`TP_STATUS_AVAILABLE`) when its buffer is freed. One system call per batch instead of
//! one per frame: at 64 B most of a frame's cost was that call (docs/dataplane.md). With a
//! transmit ring every `send(2)` on the socket is such a kick; a socket opened without one
//! ([`RingConfig::tx_ring`], the benchmark's blasters) sends each frame by its own
//! `send(2)`, as an application does.
//!
//! A frame longer than the interface's MTU plus its Ethernet header (and a VLAN tag, if it
//! carries one) is refused by `send` itself, as `send(2)` would refuse it (`EMSGSIZE`).
//! `PACKET_LOSS` is set so that a slot the kernel refuses anyway (the MTU lowered after the
//! socket opened) is given back instead of stalling every slot behind it; such a kick sends
//! fewer bytes than were handed over, which is counted (`tx_kick_short`,
//! `tx_skipped_bytes`), and makes the socket read the MTU again, so later frames too long
//! for it are refused by `send` and counted by the caller. (A frame that seems too long
//! also makes it read the MTU again: it may have been raised.) The socket is bound to the interface, with
//! `PACKET_QDISC_BYPASS`. Our own transmissions are not looped back to the receive ring
//! (`PACKET_IGNORE_OUTGOING`, and outgoing frames are skipped by `sll_pkttype` on older
//! kernels). The socket's descriptor polls readable when a frame (V2) or block (V3) is ready.
//!
//! Both rings are one `mmap` (receive ring first, then the transmit ring).
//!
//! **Unfinished checksums.** A frame sent by a stack that left its TCP/UDP checksum to the
//! device (transmit checksum offload, veth's default) arrives marked
//! `TP_STATUS_CSUMNOTREADY`, its checksum field holding only the pseudo-header's sum. Its
//! checksum is completed in place, in the ring slot, before the frame is passed on
//! ([`crate::csum::complete_checksum`]; counted as `rx_csum_completed`), or, when it
//! cannot be (not TCP/UDP over IPv4/IPv6, a fragment, shorter than its headers say), the
//! frame is dropped and counted (`rx_csum_dropped`). Truncated frames are not completed: in
//! V2 they stay counted as `rx_truncated` and are never passed on; in V3 (cut to the block)
//! they are passed on as before, and the dataplane drops them as too long.
//!
//! Invariants: a slot or block is read only while `TP_STATUS_USER` is set (acquire fence
//! after the load), and returned with a release fence before `TP_STATUS_KERNEL` is stored;
//! frame offsets are bounds-checked against the slot or block before any byte is read, so a
//! corrupt ring cannot make us read outside the mapping. Of a received frame, only the two
//! bytes of an unfinished checksum are ever written (completing it), while the slot or
//! block is ours. A transmit slot is written only while the kernel has given it back
//! (`TP_STATUS_AVAILABLE`, acquire fence after the load), and handed over with a release
//! fence before `TP_STATUS_SEND_REQUEST` is stored; slots are handed over in ring order (the
//! kernel walks them from its own head and stops at the first not handed over). Frames
//! handed over and not yet kicked are kicked at the latest when the socket is dropped.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

pub use crate::net::ifindex;

const TPACKET_V2: libc::c_int = 1;
const TPACKET_V3: libc::c_int = 2;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_LOSS: libc::c_int = 14;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// The frame's L4 checksum is unfinished (`CHECKSUM_PARTIAL`: the sender left it to the
/// device), in a frame's `tp_status`.
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// Transmit ring slot states (`<linux/if_packet.h>`): ours to write; handed to the kernel.
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
/// Transmit ring: `TX_SLOTS` slots of `TX_FRAME` bytes (header and frame), in blocks of
/// `TX_BLOCK` bytes (a whole number of pages and of slots).
const TX_SLOTS: u32 = 256;
const TX_FRAME: u32 = 4096;
const TX_BLOCK: u32 = 64 * 1024;
const PACKET_OUTGOING: u8 = 4;
const ETH_P_ALL: u16 = 0x0003;

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// `struct tpacket_block_desc` with `struct tpacket_hdr_v1` (the fields we read).
#[repr(C)]
struct BlockDesc {
    version: u32,
    offset_to_priv: u32,
    block_status: u32,
    num_pkts: u32,
    offset_to_first_pkt: u32,
    blk_len: u32,
}

/// `struct tpacket3_hdr` (its first fields).
#[repr(C)]
struct Tpacket3Hdr {
    tp_next_offset: u32,
    tp_sec: u32,
    tp_nsec: u32,
    tp_snaplen: u32,
    tp_len: u32,
    tp_status: u32,
    tp_mac: u16,
    tp_net: u16,
}

/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the `sockaddr_ll` follows.
const TPACKET3_HDRLEN: usize = 48;

/// `struct tpacket2_hdr` (the fields we read).
#[repr(C)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
}

/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`.
const TPACKET2_HDRLEN: usize = 32;
/// Frame slot of a V2 ring.
const V2_FRAME: u32 = 2048;

/// Which TPACKET version the receive ring speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingVersion {
    /// Variable-size frames packed in blocks, handed over per block (full or timer).
    V3,
    /// One fixed slot per frame, handed over per frame.
    V2,
}

/// Ring geometry.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    /// The TPACKET version of both rings.
    pub version: RingVersion,
    /// Bytes per receive block (V3), or per group of 2 KiB slots (V2): a multiple of the
    /// page size.
    pub block_bytes: u32,
    /// Receive blocks.
    pub blocks: u32,
    /// V3's block retire timer, ms.
    pub retire_ms: u32,
    /// A transmit ring (the default). Without one, [`PacketSocket::send`] is one `send(2)`
    /// per frame, as an application sends, and [`PacketSocket::flush`] does nothing.
    pub tx_ring: bool,
}

impl Default for RingConfig {
    fn default() -> RingConfig {
        RingConfig {
            version: RingVersion::V2,
            block_bytes: 32 * 1024,
            blocks: 128,
            retire_ms: 1,
            tx_ring: true,
        }
    }
}

/// The transmit ring: where its slots are, where a slot's header keeps its fields, and what
/// is handed over but not yet kicked.
struct TxRing {
    /// The first slot (inside the socket's mapping, after the receive ring).
    base: *mut u8,
    /// Byte offsets in a slot: `tp_status`, `tp_len`, the frame (the header's size).
    status_at: usize,
    len_at: usize,
    data_at: usize,
    /// The interface's MTU, bytes: read when the socket opens, and again when a frame seems
    /// too long for it or a kick comes back short (the MTU changed meanwhile).
    mtu: Cell<usize>,
    /// The slot to write next.
    next: Cell<u32>,
    /// Frames and bytes handed over since the last kick that went through.
    unkicked: Cell<(u32, u64)>,
}

/// What the transmit side did (`ctl stats`, `ports`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Frames handed to the kernel (through the ring, or by their own `send(2)`).
    pub frames: u64,
    /// Frames refused as longer than the MTU allows (`EMSGSIZE`).
    pub oversize: u64,
    /// Kicks (zero-length `send(2)`s) that went through.
    pub kicks: u64,
    /// Kicks the kernel refused for now (EAGAIN, ENOBUFS, EBUSY): what was handed over stays
    /// so and goes with the next kick.
    pub kick_again: u64,
    /// Kicks that failed otherwise (what was handed over also stays so).
    pub kick_errors: u64,
    /// Kicks that sent fewer bytes than were handed over: the kernel skipped slots it
    /// refused (`PACKET_LOSS`), and `skipped_bytes` adds up what they held.
    pub kick_short: u64,
    /// Bytes in the slots such kicks skipped.
    pub skipped_bytes: u64,
    /// Sends refused because the next slot was still the kernel's (the ring full).
    pub ring_full: u64,
}

/// An AF_PACKET socket bound to one interface, with a TPACKET_V2 or V3 receive ring and a
/// transmit ring.
pub struct PacketSocket {
    fd: OwnedFd,
    ring: *mut u8,
    ring_bytes: usize,
    cfg: RingConfig,
    /// `None` without a transmit ring ([`RingConfig::tx_ring`]).
    tx: Option<TxRing>,
    tx_counters: Cell<TxCounters>,
    /// The block (V3) or frame slot (V2) to read next.
    block: u32,
    /// Frames that arrived truncated (longer than a V2 slot).
    pub truncated: u64,
    /// The kernel's receive counters added up ([`Self::kernel_stats`]): frames, drops.
    kernel: Cell<(u64, u64)>,
    /// Frames that arrived with an unfinished checksum, completed here.
    pub csum_completed: u64,
    /// Frames that arrived with an unfinished checksum that could not be completed (not
    /// TCP/UDP over IPv4/IPv6, a fragment, shorter than their headers say): dropped.
    pub csum_dropped: u64,
    /// Interface index.
    pub ifindex: i32,
    /// Interface name.
    pub name: String,
    /// Its link state ([`PacketSocket::link_up`]).
    link: crate::link::LinkState,
}

// SAFETY: the ring mapping is owned by this value alone; moving it to another thread moves
// that ownership (no aliasing pointers are kept elsewhere).
unsafe impl Send for PacketSocket {}

fn last_err(what: &str) -> io::Error {
    named_err(what, io::Error::last_os_error())
}

/// `e` saying what failed, with a hint when it was a permission.
fn named_err(what: &str, e: io::Error) -> io::Error {
    let hint = if e.kind() == io::ErrorKind::PermissionDenied {
        " (packet sockets need root or CAP_NET_RAW)"
    } else {
        ""
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

fn setopt<T>(fd: i32, level: i32, name: i32, v: &T, what: &str) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of `size_of::<T>()` bytes for the call's duration.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(last_err(what))
    } else {
        Ok(())
    }
}

/// Sets up the socket `raw` as `cfg` says: the TPACKET version, outgoing frames ignored
/// and the qdisc bypassed where the kernel allows, refused transmit slots given back, and
/// the receive ring (and the transmit ring if asked). Returns the transmit ring's blocks.
fn set_ring_options(raw: libc::c_int, cfg: &RingConfig) -> io::Result<u32> {
    let v: libc::c_int = match cfg.version {
        RingVersion::V3 => TPACKET_V3,
        RingVersion::V2 => TPACKET_V2,
    };
    setopt(raw, libc::SOL_PACKET, PACKET_VERSION, &v, "PACKET_VERSION")?;
    let one: libc::c_int = 1;
    let _ = setopt(
        raw,
        libc::SOL_PACKET,
        PACKET_IGNORE_OUTGOING,
        &one,
        "ignore outgoing",
    );
    let _ = setopt(
        raw,
        libc::SOL_PACKET,
        PACKET_QDISC_BYPASS,
        &one,
        "qdisc bypass",
    );
    // Before any ring exists (the kernel refuses it after): a transmit slot the kernel
    // refuses is given back rather than stalling the ring behind it.
    setopt(raw, libc::SOL_PACKET, PACKET_LOSS, &one, "PACKET_LOSS")?;
    let frame = 2048u32;
    let req = TpacketReq3 {
        tp_block_size: cfg.block_bytes,
        tp_block_nr: cfg.blocks,
        tp_frame_size: frame,
        tp_frame_nr: cfg.block_bytes / frame * cfg.blocks,
        tp_retire_blk_tov: cfg.retire_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    match cfg.version {
        RingVersion::V3 => {
            setopt(
                raw,
                libc::SOL_PACKET,
                PACKET_RX_RING,
                &req,
                "PACKET_RX_RING",
            )?;
        }
        RingVersion::V2 => {
            // `struct tpacket_req`: the first four fields of tpacket_req3.
            let req2 = [
                cfg.block_bytes,
                cfg.blocks,
                V2_FRAME,
                cfg.block_bytes / V2_FRAME * cfg.blocks,
            ];
            setopt(
                raw,
                libc::SOL_PACKET,
                PACKET_RX_RING,
                &req2,
                "PACKET_RX_RING",
            )?;
        }
    }
    // The transmit ring, in the same version: `struct tpacket_req` for V2; for V3
    // `tpacket_req3` with the receive-only fields zero (the kernel insists).
    let tx_req = TpacketReq3 {
        tp_block_size: TX_BLOCK,
        tp_block_nr: TX_SLOTS / (TX_BLOCK / TX_FRAME),
        tp_frame_size: TX_FRAME,
        tp_frame_nr: TX_SLOTS,
        tp_retire_blk_tov: 0,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    match cfg.version {
        _ if !cfg.tx_ring => {}
        RingVersion::V3 => setopt(
            raw,
            libc::SOL_PACKET,
            PACKET_TX_RING,
            &tx_req,
            "PACKET_TX_RING",
        )?,
        RingVersion::V2 => {
            let req2 = [
                tx_req.tp_block_size,
                tx_req.tp_block_nr,
                tx_req.tp_frame_size,
                tx_req.tp_frame_nr,
            ];
            setopt(
                raw,
                libc::SOL_PACKET,
                PACKET_TX_RING,
                &req2,
                "PACKET_TX_RING",
            )?
        }
    }
    Ok(tx_req.tp_block_nr)
}

/// Binds the socket `raw` to interface `ifindex` for every protocol and puts the interface
/// in promiscuous mode.
fn bind_promisc(raw: libc::c_int, ifindex: libc::c_int) -> io::Result<()> {
    // SAFETY: zeroed sockaddr_ll is valid; we fill the fields bind needs.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll of the given length.
    let r = unsafe {
        libc::bind(
            raw,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(last_err("bind(AF_PACKET)"));
    }
    // SAFETY: zeroed packet_mreq is valid; fields filled below.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    setopt(
        raw,
        libc::SOL_PACKET,
        libc::PACKET_ADD_MEMBERSHIP,
        &mr,
        "PACKET_ADD_MEMBERSHIP(promisc)",
    )?;
    Ok(())
}

impl PacketSocket {
    /// Opens a socket on interface `name` with a receive ring of `cfg`; the interface is put
    /// in promiscuous mode (frames for other MACs cross the software NIC).
    pub fn open(name: &str, cfg: RingConfig) -> io::Result<PacketSocket> {
        let ifindex = ifindex(name)?;
        // Protocol 0: no frame is queued before the ring exists and the socket is bound.
        use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
        let fd = socket_with(
            AddressFamily::PACKET,
            SocketType::RAW,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| named_err("socket(AF_PACKET)", e.into()))?;
        let raw = fd.as_raw_fd();
        let tx_blocks = set_ring_options(raw, &cfg)?;
        let rx_bytes = cfg.block_bytes as usize * cfg.blocks as usize;
        let tx_bytes = if cfg.tx_ring {
            (TX_BLOCK * tx_blocks) as usize
        } else {
            0
        };
        let ring_bytes = rx_bytes + tx_bytes;
        // SAFETY: maps the rings the kernel just allocated for this socket (receive ring
        // first, then the transmit ring); checked below.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(last_err("mmap(rings)"));
        }
        let ring = ring as *mut u8;
        // Header layouts: `tpacket2_hdr` (status at 0, len at 4) and `tpacket3_hdr` (len at
        // 16, status at 20); the frame follows the aligned header (the kernel's
        // `tp_hdrlen - sizeof(struct sockaddr_ll)`).
        let (status_at, len_at, data_at) = match cfg.version {
            RingVersion::V2 => (0, 4, TPACKET2_HDRLEN),
            RingVersion::V3 => (20, 16, TPACKET3_HDRLEN),
        };
        let mtu = mtu(raw, name)?;
        let sock = PacketSocket {
            fd,
            ring,
            ring_bytes,
            cfg,
            tx: cfg.tx_ring.then(|| TxRing {
                // SAFETY: `rx_bytes` is inside the mapping (the transmit ring follows).
                base: unsafe { ring.add(rx_bytes) },
                status_at,
                len_at,
                data_at,
                mtu: Cell::new(mtu),
                next: Cell::new(0),
                unkicked: Cell::new((0, 0)),
            }),
            tx_counters: Cell::new(TxCounters::default()),
            block: 0,
            truncated: 0,
            kernel: Cell::new((0, 0)),
            csum_completed: 0,
            csum_dropped: 0,
            ifindex,
            name: name.to_string(),
            link: crate::link::LinkState::new(name),
        };
        bind_promisc(raw, ifindex)?;
        Ok(sock)
    }

    /// Calls `f` on the received frames ready now, at most `max_frames` of them (V3: whole
    /// blocks until `max_frames` is reached, so up to a block's worth more), and returns
    /// their slots to the kernel. `f` also gets the kernel's receive timestamp
    /// (`CLOCK_REALTIME` ns, see [`crate::clock::realtime_ns`]). Returns the frames seen.
    pub fn recv_batch(&mut self, max_frames: u32, f: impl FnMut(&[u8], u64)) -> usize {
        match self.cfg.version {
            RingVersion::V3 => self.recv_v3(max_frames, f),
            RingVersion::V2 => self.recv_v2(max_frames, f),
        }
    }

    /// TPACKET_V2: one slot per frame, `tp_status` per slot.
    fn recv_v2(&mut self, max_frames: u32, mut f: impl FnMut(&[u8], u64)) -> usize {
        let slots = self.cfg.block_bytes / V2_FRAME * self.cfg.blocks;
        let fsz = V2_FRAME as usize;
        let mut frames = 0;
        for _ in 0..max_frames {
            // SAFETY: block < slots, so the slot lies inside the mapping (blocks are whole
            // multiples of the slot size).
            let base = unsafe { self.ring.add(self.block as usize * fsz) };
            let h = base as *mut Tpacket2Hdr;
            // SAFETY: aligned header inside the mapping; the kernel writes tp_status
            // concurrently, hence the volatile read.
            let status = unsafe { std::ptr::addr_of!((*h).tp_status).read_volatile() };
            if status & TP_STATUS_USER == 0 {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: the slot is ours while TP_STATUS_USER is set.
            let (len, snap, mac, ts) = unsafe {
                (
                    (*h).tp_len,
                    (*h).tp_snaplen as usize,
                    (*h).tp_mac as usize,
                    (*h).tp_sec as u64 * 1_000_000_000 + (*h).tp_nsec as u64,
                )
            };
            // SAFETY: the sockaddr_ll follows the aligned header, inside the slot.
            let pkttype = unsafe { *base.add(TPACKET2_HDRLEN + 10) };
            if snap < len as usize {
                self.truncated += 1;
            } else if pkttype != PACKET_OUTGOING && mac >= TPACKET2_HDRLEN && mac + snap <= fsz {
                // SAFETY: the frame lies inside the slot, after the header (checked); the
                // slot is ours while TP_STATUS_USER is set, the mapping is writable, and no
                // other reference into it exists (the header's fields were copied out).
                let frame = unsafe { std::slice::from_raw_parts_mut(base.add(mac), snap) };
                if self.checksum_ready(status, frame) {
                    f(frame, ts);
                    frames += 1;
                }
            }
            fence(Ordering::Release);
            // SAFETY: returning the slot to the kernel.
            unsafe { std::ptr::addr_of_mut!((*h).tp_status).write_volatile(TP_STATUS_KERNEL) };
            self.block = (self.block + 1) % slots;
        }
        frames
    }

    /// TPACKET_V3: blocks of frames.
    fn recv_v3(&mut self, max_frames: u32, mut f: impl FnMut(&[u8], u64)) -> usize {
        let mut frames = 0;
        let bsz = self.cfg.block_bytes as usize;
        while frames < max_frames as usize {
            // SAFETY: block < blocks, so the descriptor lies inside the mapping.
            let bd = unsafe { self.ring.add(self.block as usize * bsz) } as *mut BlockDesc;
            // SAFETY: `bd` is aligned (page-aligned block) and inside the mapping; the kernel
            // writes block_status concurrently, hence the volatile read.
            let status = unsafe { std::ptr::addr_of!((*bd).block_status).read_volatile() };
            if status & TP_STATUS_USER == 0 {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: the block is ours while TP_STATUS_USER is set.
            let (n, mut off) = unsafe { ((*bd).num_pkts, (*bd).offset_to_first_pkt as usize) };
            let base = bd as *mut u8;
            for _ in 0..n {
                if off + TPACKET3_HDRLEN + 12 > bsz {
                    break;
                }
                // SAFETY: `off + header` is inside the block (checked above); the fields are
                // copied out, so no reference to the header outlives this statement.
                let (next, status, mac, len, wire, ts) = unsafe {
                    let h = &*(base.add(off) as *const Tpacket3Hdr);
                    (
                        h.tp_next_offset,
                        h.tp_status,
                        h.tp_mac as usize,
                        h.tp_snaplen as usize,
                        h.tp_len as usize,
                        h.tp_sec as u64 * 1_000_000_000 + h.tp_nsec as u64,
                    )
                };
                // SAFETY: the sockaddr_ll follows the aligned header, inside the block.
                let pkttype = unsafe { *base.add(off + TPACKET3_HDRLEN + 10) };
                if pkttype != PACKET_OUTGOING && mac >= TPACKET3_HDRLEN && off + mac + len <= bsz {
                    // SAFETY: the frame lies inside the block, after its header (checked);
                    // the block is ours while TP_STATUS_USER is set, the mapping is
                    // writable, and no other reference into it exists.
                    let frame = unsafe { std::slice::from_raw_parts_mut(base.add(off + mac), len) };
                    // A frame cut to the block (len < wire) passes as before: too long for
                    // the dataplane's buffers, it is dropped there, checksum or not.
                    if len < wire || self.checksum_ready(status, frame) {
                        f(frame, ts);
                        frames += 1;
                    }
                }
                if next == 0 {
                    break;
                }
                off += next as usize;
            }
            fence(Ordering::Release);
            // SAFETY: returning the block to the kernel.
            unsafe { std::ptr::addr_of_mut!((*bd).block_status).write_volatile(TP_STATUS_KERNEL) };
            self.block = (self.block + 1) % self.cfg.blocks;
        }
        frames
    }

    /// Whether a whole received frame can be passed on: yes unless the kernel marked its
    /// checksum unfinished (`TP_STATUS_CSUMNOTREADY`) and it cannot be completed here
    /// ([`crate::csum::complete_checksum`]); counts both outcomes.
    fn checksum_ready(&mut self, status: u32, frame: &mut [u8]) -> bool {
        if status & TP_STATUS_CSUMNOTREADY == 0 {
            return true;
        }
        match crate::csum::complete_checksum(frame) {
            Ok(_) => {
                self.csum_completed += 1;
                true
            }
            Err(_) => {
                self.csum_dropped += 1;
                false
            }
        }
    }

    /// The socket's descriptor (for `poll(2)`: readable when a frame or block is ready).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Queues one frame for the interface in the transmit ring; [`PacketSocket::flush`]
    /// sends what is queued. `Ok(false)` when the ring is full (every slot still the
    /// kernel's: the caller counts the frame as a transmit error); `Err` (`EMSGSIZE`) for a
    /// frame longer than the interface takes. Without a transmit ring, sends it now by its
    /// own `send(2)` (`Ok(false)` on EAGAIN / ENOBUFS).
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        let Some(tx) = &self.tx else {
            let sent = self.send_now(frame);
            if let Ok(true) = sent {
                self.count(|c| c.frames += 1);
            }
            return sent;
        };
        // The Ethernet header, and a VLAN tag when the frame has one (802.1Q or 802.1ad).
        let tagged =
            frame.len() >= 14 && matches!([frame[12], frame[13]], [0x81, 0] | [0x88, 0xa8]);
        let longest = |mtu: usize| {
            (mtu + 14 + if tagged { 4 } else { 0 }).min(TX_FRAME as usize - tx.data_at)
        };
        if frame.len() > longest(tx.mtu.get()) {
            // The MTU may have been raised since it was read.
            self.refresh_mtu();
        }
        if frame.len() > longest(tx.mtu.get()) || frame.len() < 14 {
            self.count(|c| c.oversize += 1);
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a frame of {} bytes on {}: 14 to {} bytes fit (MTU {}, EMSGSIZE)",
                    frame.len(),
                    self.name,
                    longest(tx.mtu.get()),
                    tx.mtu.get()
                ),
            ));
        }
        let i = tx.next.get();
        // SAFETY: i < TX_SLOTS, so the slot lies inside the transmit ring.
        let slot = unsafe { tx.base.add(i as usize * TX_FRAME as usize) };
        // SAFETY: aligned `u32` inside the slot; the kernel writes it concurrently (when it
        // gives the slot back), hence the volatile read.
        let status = unsafe { (slot.add(tx.status_at) as *const u32).read_volatile() };
        if status != TP_STATUS_AVAILABLE {
            // The kernel has not given this slot back: every slot is in flight.
            self.count(|c| c.ring_full += 1);
            self.flush();
            return Ok(false);
        }
        fence(Ordering::Acquire);
        // SAFETY: the slot is ours while TP_STATUS_AVAILABLE; the frame fits after its header
        // (`frame.len() ≤ TX_FRAME - data_at`, checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(tx.data_at), frame.len());
            (slot.add(tx.len_at) as *mut u32).write_volatile(frame.len() as u32);
        }
        fence(Ordering::Release);
        // SAFETY: handing the slot over; the kernel reads it only after this store.
        unsafe { (slot.add(tx.status_at) as *mut u32).write_volatile(TP_STATUS_SEND_REQUEST) };
        tx.next.set((i + 1) % TX_SLOTS);
        let (n, bytes) = tx.unkicked.get();
        tx.unkicked.set((n + 1, bytes + frame.len() as u64));
        self.count(|c| c.frames += 1);
        Ok(true)
    }

    /// Kicks the kernel to transmit the frames [`PacketSocket::send`] queued (one system
    /// call for all of them). A kick the kernel refuses leaves them queued for the next.
    pub fn flush(&self) {
        let Some(tx) = &self.tx else { return };
        let (n, bytes) = tx.unkicked.get();
        if n == 0 {
            return;
        }
        // SAFETY: a zero-length send with no buffer: the transmit ring's kick.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r >= 0 {
            // The kernel returns the bytes of the frames it sent; slots it refused
            // (PACKET_LOSS) are given back unsent and make the sum short.
            tx.unkicked.set((0, 0));
            let skipped = bytes.saturating_sub(r as u64);
            self.count(|c| {
                c.kicks += 1;
                if skipped > 0 {
                    c.kick_short += 1;
                    c.skipped_bytes += skipped;
                }
            });
            if skipped > 0 {
                // Most likely the MTU was lowered: later frames too long for it are refused
                // by `send` (counted, as send(2) refused them) rather than skipped here.
                self.refresh_mtu();
            }
            return;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EBUSY) => {
                self.count(|c| c.kick_again += 1)
            }
            _ => self.count(|c| c.kick_errors += 1),
        }
        // Some frames may have gone before the kernel stopped: what is still handed over
        // is the run of slots before `next` the kernel has not taken.
        tx.unkicked.set(tx.still_handed_over());
    }

    /// The transmit side's counters.
    pub fn tx_counters(&self) -> TxCounters {
        self.tx_counters.get()
    }

    /// Reads the interface's MTU again (kept as it was if the read fails).
    fn refresh_mtu(&self) {
        if let (Some(tx), Ok(m)) = (&self.tx, mtu(self.fd.as_raw_fd(), &self.name)) {
            tx.mtu.set(m);
        }
    }
}

impl TxRing {
    /// Frames and bytes in the slots before `next` that are still `TP_STATUS_SEND_REQUEST`.
    fn still_handed_over(&self) -> (u32, u64) {
        let tx = self;
        let (mut n, mut bytes) = (0u32, 0u64);
        while n < TX_SLOTS {
            let i = (tx.next.get() + TX_SLOTS - 1 - n) % TX_SLOTS;
            // SAFETY: i < TX_SLOTS: a slot inside the ring; its status and length are
            // aligned `u32`s (volatile: the kernel may be writing them).
            let (status, len) = unsafe {
                let slot = tx.base.add(i as usize * TX_FRAME as usize);
                (
                    (slot.add(tx.status_at) as *const u32).read_volatile(),
                    (slot.add(tx.len_at) as *const u32).read_volatile(),
                )
            };
            if status != TP_STATUS_SEND_REQUEST {
                break;
            }
            n += 1;
            bytes += len as u64;
        }
        (n, bytes)
    }
}

impl PacketSocket {
    /// Whether its interface's link is up (`None`: the interface is gone, or no answer).
    pub fn link_up(&self) -> Option<bool> {
        self.link.up()
    }

    /// The kernel's receive counters for this socket since it opened: frames it offered the
    /// ring (those it dropped included) and frames dropped because the ring was full
    /// (`PACKET_STATISTICS`, which resets them at each read: added up here).
    pub fn kernel_stats(&self) -> (u64, u64) {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is a valid tpacket_stats of `len` bytes (the TPACKET_V2 and V3
        // structures begin with these two fields; the kernel writes at most `len`).
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        let (mut rx, mut drops) = self.kernel.get();
        if r == 0 {
            rx += st.tp_packets as u64;
            drops += st.tp_drops as u64;
            self.kernel.set((rx, drops));
        }
        (rx, drops)
    }

    fn count(&self, f: impl FnOnce(&mut TxCounters)) {
        let mut c = self.tx_counters.get();
        f(&mut c);
        self.tx_counters.set(c);
    }

    /// One frame by its own `send(2)` (a socket without a transmit ring).
    fn send_now(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: `frame` is valid for `frame.len()` bytes.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(false),
            _ => Err(e),
        }
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // Frames queued and not yet kicked leave now. (The kernel sends from the ring's
        // pages and holds its own references to them: unmapping does not pull them away.)
        self.flush();
        // SAFETY: unmaps exactly the mapping made in `open`; no reference into it outlives
        // `self` (frames are only lent to `recv_batch`'s callback).
        unsafe { libc::munmap(self.ring as *mut libc::c_void, self.ring_bytes) };
    }
}

/// The MTU of interface `name` (`SIOCGIFMTU` on the socket `fd`), bytes.
fn mtu(fd: i32, name: &str) -> io::Result<usize> {
    // SAFETY: all-zero is a valid `ifreq`.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, b) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = b as libc::c_char;
    }
    // SAFETY: `req` is a valid `ifreq` naming the interface (NUL-terminated: the name is at
    // most 15 bytes, checked by `ifindex`); the kernel writes `ifru_mtu`.
    let r = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    if r < 0 {
        return Err(last_err("SIOCGIFMTU"));
    }
    // SAFETY: SIOCGIFMTU filled the union's `ifru_mtu`.
    Ok(unsafe { req.ifr_ifru.ifru_mtu }.max(0) as usize)
}
