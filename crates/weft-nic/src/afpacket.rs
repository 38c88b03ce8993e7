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
//! Either ring is one `mmap`. Transmission uses `send(2)` on the same socket, bound to the
//! interface, with `PACKET_QDISC_BYPASS`: one system call per frame (a TX ring is future
//! work). Our own transmissions are not looped back to the receive ring
//! (`PACKET_IGNORE_OUTGOING`, and outgoing frames are skipped by `sll_pkttype` on older
//! kernels). The socket's descriptor polls readable when a frame (V2) or block (V3) is ready.
//!
//! Invariants: a slot or block is read only while `TP_STATUS_USER` is set (acquire fence
//! after the load), and returned with a release fence before `TP_STATUS_KERNEL` is stored;
//! frame offsets are bounds-checked against the slot or block before any byte is read, so a
//! corrupt ring cannot make us read outside the mapping.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

const TPACKET_V2: libc::c_int = 1;
const TPACKET_V3: libc::c_int = 2;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
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
    pub version: RingVersion,
    pub block_bytes: u32,
    pub blocks: u32,
    pub retire_ms: u32,
}

impl Default for RingConfig {
    fn default() -> RingConfig {
        RingConfig {
            version: RingVersion::V2,
            block_bytes: 32 * 1024,
            blocks: 128,
            retire_ms: 1,
        }
    }
}

/// An AF_PACKET socket bound to one interface, with a TPACKET_V2 or V3 receive ring.
pub struct PacketSocket {
    fd: OwnedFd,
    ring: *mut u8,
    ring_bytes: usize,
    cfg: RingConfig,
    /// The block (V3) or frame slot (V2) to read next.
    block: u32,
    /// Frames that arrived truncated (longer than a V2 slot).
    pub truncated: u64,
    /// Interface index.
    pub ifindex: i32,
    /// Interface name.
    pub name: String,
}

// SAFETY: the ring mapping is owned by this value alone; moving it to another thread moves
// that ownership (no aliasing pointers are kept elsewhere).
unsafe impl Send for PacketSocket {}

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
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

/// The index of an interface, by name. A name no interface could have (empty, or longer
/// than Linux's 15 bytes) says so rather than "no interface".
pub fn ifindex(name: &str) -> io::Result<i32> {
    // IFNAMSIZ (16) less the terminating NUL.
    const MAX_NAME: usize = 15;
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            if name.is_empty() {
                "an empty interface name".to_string()
            } else {
                format!(
                    "`{name}` is {} bytes long: Linux interface names have at most {MAX_NAME}",
                    name.len()
                )
            },
        ));
    }
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface `{name}` in this network namespace"),
        ))
    } else {
        Ok(i as i32)
    }
}

impl PacketSocket {
    /// Opens a socket on interface `name` with a receive ring of `cfg`; the interface is put
    /// in promiscuous mode (frames for other MACs cross the software NIC).
    pub fn open(name: &str, cfg: RingConfig) -> io::Result<PacketSocket> {
        let ifindex = ifindex(name)?;
        // Protocol 0: no frame is queued before the ring exists and the socket is bound.
        // SAFETY: plain system call.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(last_err("socket(AF_PACKET)"));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
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
        let ring_bytes = cfg.block_bytes as usize * cfg.blocks as usize;
        // SAFETY: maps the ring the kernel just allocated for this socket; checked below.
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
            return Err(last_err("mmap(rx ring)"));
        }
        let sock = PacketSocket {
            fd,
            ring: ring as *mut u8,
            ring_bytes,
            cfg,
            block: 0,
            truncated: 0,
            ifindex,
            name: name.to_string(),
        };
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
            } else if pkttype != PACKET_OUTGOING && mac + snap <= fsz {
                // SAFETY: the frame lies inside the slot (checked).
                f(
                    unsafe { std::slice::from_raw_parts(base.add(mac), snap) },
                    ts,
                );
                frames += 1;
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
            let base = bd as *const u8;
            for _ in 0..n {
                if off + TPACKET3_HDRLEN + 12 > bsz {
                    break;
                }
                // SAFETY: `off + header` is inside the block (checked above).
                let h = unsafe { &*(base.add(off) as *const Tpacket3Hdr) };
                // SAFETY: the sockaddr_ll follows the aligned header, inside the block.
                let pkttype = unsafe { *base.add(off + TPACKET3_HDRLEN + 10) };
                let (mac, len) = (h.tp_mac as usize, h.tp_snaplen as usize);
                if pkttype != PACKET_OUTGOING && off + mac + len <= bsz {
                    // SAFETY: the frame lies inside the block (checked).
                    let frame = unsafe { std::slice::from_raw_parts(base.add(off + mac), len) };
                    f(frame, h.tp_sec as u64 * 1_000_000_000 + h.tp_nsec as u64);
                    frames += 1;
                }
                if h.tp_next_offset == 0 {
                    break;
                }
                off += h.tp_next_offset as usize;
            }
            fence(Ordering::Release);
            // SAFETY: returning the block to the kernel; the only write we make to the ring.
            unsafe { std::ptr::addr_of_mut!((*bd).block_status).write_volatile(TP_STATUS_KERNEL) };
            self.block = (self.block + 1) % self.cfg.blocks;
        }
        frames
    }

    /// The socket's descriptor (for `poll(2)`: readable when a frame or block is ready).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Sends one frame out of the interface. `Ok(false)` when the socket is full (EAGAIN /
    /// ENOBUFS: the caller counts the frame as a transmit error).
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
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
        // SAFETY: unmaps exactly the mapping made in `open`; no reference into it outlives
        // `self` (frames are only lent to `recv_batch`'s callback).
        unsafe { libc::munmap(self.ring as *mut libc::c_void, self.ring_bytes) };
    }
}

#[cfg(test)]
mod tests {
    /// A name no interface can have says why, not "no interface" (an empty `--uplink ""`
    /// read "no interface ``", a 16-byte name as if it were merely missing).
    #[test]
    fn impossible_interface_names_say_why() {
        let e = super::ifindex("").unwrap_err();
        assert_eq!(e.to_string(), "an empty interface name");
        let e = super::ifindex("sixteen-bytes-xx").unwrap_err();
        assert!(e.to_string().contains("16 bytes long"), "{e}");
        // 15 bytes is a possible name: merely missing here.
        let e = super::ifindex("fifteen-bytes-x").unwrap_err();
        assert!(e.to_string().contains("no interface"), "{e}");
    }
}
