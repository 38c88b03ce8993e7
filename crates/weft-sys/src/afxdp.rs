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

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

// ---------------------------------------------------------------------------------------
// Kernel UAPI that `libc` 0.2 does not export. `libc` has the AF_XDP socket side
// (`sockaddr_xdp`, `xdp_umem_reg`, `xdp_mmap_offsets`, `xdp_desc`, `xdp_statistics`,
// `SOL_XDP`, `XDP_*` options and page offsets, `SYS_bpf`); the bpf(2) side and a few
// netdevice constants are copied here from <linux/bpf.h>, <linux/if_link.h>,
// <linux/ethtool.h> and <linux/bpf_common.h> (checked against the 6.x headers; the layouts
// are asserted in the tests).
// ---------------------------------------------------------------------------------------

/// `enum bpf_cmd`.
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_LINK_CREATE: u32 = 28;
/// `enum bpf_map_type`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `enum bpf_prog_type`.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`.
const BPF_XDP: u32 = 37;
/// `BPF_FUNC_redirect_map` (helper id).
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `BPF_PSEUDO_MAP_FD`: an `ld_imm64` whose immediate is a map fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_ANY` for `BPF_MAP_UPDATE_ELEM`.
const BPF_ANY: u64 = 0;
/// `XDP_FLAGS_SKB_MODE` (<linux/if_link.h>): generic XDP, any driver.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `enum xdp_action`.
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `XDP_PACKET_HEADROOM`: where copy mode writes a frame inside its chunk.
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// `struct bpf_insn`: opcode, `dst_reg:4 | src_reg:4`, offset, immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfInsn {
    /// The opcode.
    pub code: u8,
    /// The destination register (low four bits) and the source register (high four).
    pub regs: u8,
    /// The offset.
    pub off: i16,
    /// The immediate.
    pub imm: i32,
}

impl BpfInsn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
}

/// `union bpf_attr` for `BPF_MAP_CREATE` (the fields up to `map_name`).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `union bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for `BPF_PROG_LOAD` (the fields up to `expected_attach_type`).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` (no target-specific tail).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// The XDP program, six instruction slots (r1 = `struct xdp_md *ctx` on entry):
///
/// ```text
/// 0: r2 = *(u32 *)(r1 + 16)    ldxw: key = ctx->rx_queue_index
/// 1: r1 = map[xsks] (2 slots)  ld_imm64 with src = BPF_PSEUDO_MAP_FD: the loader puts the
/// 2:                           XSKMAP's address in r1 (the upper half-slot is all zero)
/// 3: r3 = XDP_PASS             mov64 imm: the action when xsks[key] is empty
/// 4: call bpf_redirect_map     r0 = XDP_REDIRECT to the socket of this queue, or XDP_PASS
/// 5: exit                      return r0
/// ```
pub fn redirect_program(map_fd: i32) -> [BpfInsn; 6] {
    // Opcodes (<linux/bpf_common.h>, <linux/bpf.h>): class | size | mode, or class | op | src.
    const LDX_MEM_W: u8 = 0x01 | 0x60; // BPF_LDX | BPF_MEM | BPF_W
    const LD_IMM_DW: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
    const ALU64_MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const JMP_CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
    const JMP_EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT
    [
        BpfInsn::new(LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        BpfInsn::new(LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        BpfInsn::new(0, 0, 0, 0, 0),
        BpfInsn::new(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        BpfInsn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        BpfInsn::new(JMP_EXIT, 0, 0, 0, 0),
    ]
}

// ---------------------------------------------------------------------------------------
// Ring arithmetic and descriptor validation (pure; unit-tested without a kernel).
// ---------------------------------------------------------------------------------------

/// Entries a consumer may read: `prod - cons` (free-running `u32` indices, so wrapping),
/// or `None` when that is more than the ring holds (a corrupt index: read nothing).
pub fn ring_ready(prod: u32, cons: u32, size: u32) -> Option<u32> {
    let n = prod.wrapping_sub(cons);
    (n <= size).then_some(n)
}

/// Slots a producer may fill: `size - (prod - cons)`, or `None` when the consumer index is
/// ahead of the producer or more than a ring behind (corrupt: write nothing).
pub fn ring_free(prod: u32, cons: u32, size: u32) -> Option<u32> {
    let used = prod.wrapping_sub(cons);
    (used <= size).then(|| size - used)
}

/// UMEM geometry: `chunk`-byte chunks (a power of two), receive chunks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per chunk.
    pub chunk: u32,
    /// Receive chunks (numbered from 0).
    pub rx_chunks: u32,
    /// Transmit chunks (numbered after the receive chunks).
    pub tx_chunks: u32,
}

impl Geometry {
    /// UMEM bytes.
    pub fn umem_bytes(&self) -> u64 {
        self.chunk as u64 * (self.rx_chunks as u64 + self.tx_chunks as u64)
    }
}

/// The receive chunk of an RX descriptor, if its frame (`addr .. addr + len`) lies inside
/// one receive chunk, is not empty and has no option bits (no multi-buffer frames: the
/// socket is bound without `XDP_USE_SG`).
pub fn rx_chunk(g: &Geometry, addr: u64, len: u32, options: u32) -> Option<u32> {
    if len == 0 || options != 0 {
        return None;
    }
    let chunk = addr / g.chunk as u64;
    let last = addr.checked_add(len as u64 - 1)? / g.chunk as u64;
    (chunk == last && chunk < g.rx_chunks as u64).then_some(chunk as u32)
}

/// The transmit chunk a completion names: the start of a transmit chunk (we post frames at
/// offset 0 of their chunk), or `None`.
pub fn completion_chunk(g: &Geometry, addr: u64) -> Option<u32> {
    if !addr.is_multiple_of(g.chunk as u64) {
        return None;
    }
    let chunk = addr / g.chunk as u64;
    let tx = g.rx_chunks as u64..g.rx_chunks as u64 + g.tx_chunks as u64;
    tx.contains(&chunk).then_some(chunk as u32)
}

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
// Memory mappings and rings.
// ---------------------------------------------------------------------------------------

/// An owned mapping, unmapped on drop.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mmap {
    fn map(len: usize, flags: i32, fd: RawFd, offset: libc::off_t) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel picks; nothing aliases it yet.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned 0"))?,
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; no reference into it outlives
        // the value that owns it (frames are only lent to `recv_batch`'s callback).
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// One mapped ring: producer and consumer indices and `size` entries of `entry` bytes.
struct Ring {
    map: Mmap,
    producer: usize,
    consumer: usize,
    entries: usize,
    size: u32,
    entry: usize,
}

impl Ring {
    /// Maps the ring of `fd` at page offset `pgoff`, after checking that the kernel's
    /// offsets put both indices and every entry inside the mapping, aligned.
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        pgoff: u64,
        size: u32,
        entry: usize,
    ) -> io::Result<Ring> {
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "inconsistent ring offsets");
        let entries = usize::try_from(off.desc).map_err(|_| bad())?;
        let len = entries.checked_add(size as usize * entry).ok_or_else(bad)?;
        let (p, c) = (off.producer as usize, off.consumer as usize);
        if p % 4 != 0 || c % 4 != 0 || entries % 8 != 0 || p + 4 > len || c + 4 > len {
            return Err(bad());
        }
        let map = Mmap::map(
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff as libc::off_t,
        )?;
        Ok(Ring {
            map,
            producer: p,
            consumer: c,
            entries,
            size,
            entry,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: in bounds and 4-aligned (checked in `map`, the mapping is page-aligned);
        // the kernel updates it concurrently, which is what the atomic type is for.
        unsafe { &*(self.map.ptr.as_ptr().add(self.producer) as *const AtomicU32) }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*(self.map.ptr.as_ptr().add(self.consumer) as *const AtomicU32) }
    }

    /// Entry `idx` (masked to the ring).
    fn slot(&self, idx: u32) -> *mut u8 {
        let i = (idx & (self.size - 1)) as usize;
        // SAFETY: `entries + i * entry < len` (checked in `map`; i < size).
        unsafe { self.map.ptr.as_ptr().add(self.entries + i * self.entry) }
    }

    fn read_desc(&self, idx: u32) -> libc::xdp_desc {
        // SAFETY: an 8-aligned `xdp_desc` slot inside the mapping; the kernel does not write
        // slots between our consumer index and its producer index (acquired by the caller).
        unsafe { (self.slot(idx) as *const libc::xdp_desc).read_volatile() }
    }

    fn write_desc(&self, idx: u32, d: libc::xdp_desc) {
        // SAFETY: as for `read_desc`; slots between the kernel's consumer index and our
        // producer index are ours to write.
        unsafe { (self.slot(idx) as *mut libc::xdp_desc).write_volatile(d) }
    }

    fn read_addr(&self, idx: u32) -> u64 {
        // SAFETY: an 8-aligned `u64` slot inside the mapping, ours to read (see `read_desc`).
        unsafe { (self.slot(idx) as *const u64).read_volatile() }
    }

    fn write_addr(&self, idx: u32, a: u64) {
        // SAFETY: an 8-aligned `u64` slot inside the mapping, ours to write.
        unsafe { (self.slot(idx) as *mut u64).write_volatile(a) }
    }
}

// ---------------------------------------------------------------------------------------
// One socket (one queue).
// ---------------------------------------------------------------------------------------

/// Ring and UMEM sizes of one queue's socket.
#[derive(Debug, Clone, Copy)]
pub struct XdpConfig {
    /// Bytes per UMEM chunk (a power of two, at least 2048).
    pub frame_size: u32,
    /// Receive chunks (a power of two); the RX ring has as many slots, the fill ring twice.
    pub rx_frames: u32,
    /// Transmit chunks on queue 0 (a power of two); the TX ring has twice as many slots,
    /// the completion ring as many.
    pub tx_frames: u32,
}

impl Default for XdpConfig {
    fn default() -> XdpConfig {
        XdpConfig {
            frame_size: 2048,
            rx_frames: 2048,
            tx_frames: 2048,
        }
    }
}

/// Kick the kernel after this many unkicked transmit descriptors (its generic xmit sends at
/// most 32 per `sendto`).
pub const KICK_BATCH: u32 = 32;

#[derive(Debug, Default, Clone)]
struct RxCounters {
    frames: u64,
    bytes: u64,
    bad_desc: u64,
    bad_index: u64,
}

#[derive(Debug, Default, Clone)]
struct TxCounters {
    frames: u64,
    completed: u64,
    no_frame: u64,
    ring_full: u64,
    oversize: u64,
    bad_completion: u64,
    bad_index: u64,
    kicks: u64,
    kick_again: u64,
    kick_errors: u64,
}

/// The transmit side, behind a `RefCell` because [`XdpPort::send`] takes `&self`.
struct TxSide {
    tx_prod: u32,
    comp_cons: u32,
    /// Free transmit chunks (absolute chunk numbers).
    free: Vec<u32>,
    /// Per transmit chunk: posted to the kernel and not yet completed.
    in_kernel: Vec<bool>,
    unkicked: u32,
    kick_needed: bool,
    c: TxCounters,
}

struct Queue {
    // Rings before the socket and the UMEM: unmapped first on drop.
    fill: Ring,
    comp: Ring,
    rx: Ring,
    tx: Option<Ring>,
    fd: OwnedFd,
    umem: Mmap,
    geo: Geometry,
    queue_id: u32,
    // Receive side.
    fill_prod: u32,
    rx_cons: u32,
    /// Per receive chunk: in the kernel's hands (fill ring or about to be written).
    rx_in_kernel: Vec<bool>,
    /// Receive chunks back from the kernel, waiting for fill-ring room.
    refill: Vec<u32>,
    rxc: RxCounters,
    txs: RefCell<TxSide>,
}

fn setsockopt<T>(fd: RawFd, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of `size_of::<T>()` bytes for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Queue {
    fn open(iface: &str, ifindex: u32, queue_id: u32, cfg: &XdpConfig, tx: bool) -> R<Queue> {
        let q = queue_id;
        let err = |step: &str, e: io::Error| XdpError::new(iface, format!("{step} (queue {q})"), e);
        let pow2 = |n: u32| n.is_power_of_two();
        if !pow2(cfg.frame_size)
            || cfg.frame_size < 2048
            || !pow2(cfg.rx_frames)
            || !pow2(cfg.tx_frames)
        {
            return Err(err(
                "ring geometry",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "frame size (≥ 2048) and frame counts must be powers of two",
                ),
            ));
        }
        let geo = Geometry {
            chunk: cfg.frame_size,
            rx_chunks: cfg.rx_frames,
            tx_chunks: if tx { cfg.tx_frames } else { 0 },
        };
        // SAFETY: plain system call.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(err("socket(AF_XDP)", io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Mmap::map(
            geo.umem_bytes() as usize,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
        .map_err(|e| err("mmap(UMEM)", e))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: geo.chunk,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| err("setsockopt(XDP_UMEM_REG)", e))?;
        let fill_n = geo.rx_chunks * 2;
        let comp_n = geo.tx_chunks.max(64);
        let rx_n = geo.rx_chunks;
        let tx_n = geo.tx_chunks * 2;
        setsockopt(raw, libc::XDP_UMEM_FILL_RING, &fill_n)
            .map_err(|e| err("setsockopt(XDP_UMEM_FILL_RING)", e))?;
        setsockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &comp_n)
            .map_err(|e| err("setsockopt(XDP_UMEM_COMPLETION_RING)", e))?;
        setsockopt(raw, libc::XDP_RX_RING, &rx_n).map_err(|e| err("setsockopt(XDP_RX_RING)", e))?;
        if tx {
            setsockopt(raw, libc::XDP_TX_RING, &tx_n)
                .map_err(|e| err("setsockopt(XDP_TX_RING)", e))?;
        }
        // SAFETY: all-zero is a valid `xdp_mmap_offsets` (plain integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` is writable for `len` bytes; the kernel writes at most that many.
        let r = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(err(
                "getsockopt(XDP_MMAP_OFFSETS)",
                io::Error::last_os_error(),
            ));
        }
        if len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(err(
                "getsockopt(XDP_MMAP_OFFSETS)",
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "old offsets layout (kernel before 5.4)",
                ),
            ));
        }
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let fill = Ring::map(raw, &off.fr, libc::XDP_UMEM_PGOFF_FILL_RING, fill_n, 8)
            .map_err(|e| err("mmap(fill ring)", e))?;
        let comp = Ring::map(
            raw,
            &off.cr,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            comp_n,
            8,
        )
        .map_err(|e| err("mmap(completion ring)", e))?;
        let rx = Ring::map(raw, &off.rx, libc::XDP_PGOFF_RX_RING as u64, rx_n, desc)
            .map_err(|e| err("mmap(RX ring)", e))?;
        let txr = if tx {
            Some(
                Ring::map(raw, &off.tx, libc::XDP_PGOFF_TX_RING as u64, tx_n, desc)
                    .map_err(|e| err("mmap(TX ring)", e))?,
            )
        } else {
            None
        };
        let mut q = Queue {
            fill,
            comp,
            rx,
            tx: txr,
            fd,
            umem,
            geo,
            queue_id,
            fill_prod: 0,
            rx_cons: 0,
            rx_in_kernel: vec![false; geo.rx_chunks as usize],
            refill: (0..geo.rx_chunks).rev().collect(),
            rxc: RxCounters::default(),
            txs: RefCell::new(TxSide {
                tx_prod: 0,
                comp_cons: 0,
                free: (geo.rx_chunks..geo.rx_chunks + geo.tx_chunks)
                    .rev()
                    .collect(),
                in_kernel: vec![false; geo.tx_chunks as usize],
                unkicked: 0,
                kick_needed: false,
                c: TxCounters::default(),
            }),
        };
        // Every receive chunk to the fill ring before the socket is bound.
        q.refill_pending();
        // SAFETY: all-zero is a valid `sockaddr_xdp`; the fields bind needs are set below.
        let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_flags = libc::XDP_COPY;
        sa.sxdp_ifindex = ifindex;
        sa.sxdp_queue_id = queue_id;
        // SAFETY: `sa` is a valid `sockaddr_xdp` of the given length.
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(err("bind(AF_XDP, XDP_COPY)", io::Error::last_os_error()));
        }
        Ok(q)
    }

    /// Gives back to the fill ring as many waiting receive chunks as it has room for.
    fn refill_pending(&mut self) {
        if self.refill.is_empty() {
            return;
        }
        let cons = self.fill.consumer().load(Ordering::Acquire);
        let Some(room) = ring_free(self.fill_prod, cons, self.fill.size) else {
            self.rxc.bad_index += 1;
            return;
        };
        let n = room.min(self.refill.len() as u32);
        for i in 0..n {
            let c = self.refill.pop().expect("n ≤ len");
            self.rx_in_kernel[c as usize] = true;
            self.fill.write_addr(
                self.fill_prod.wrapping_add(i),
                c as u64 * self.geo.chunk as u64,
            );
        }
        if n > 0 {
            self.fill_prod = self.fill_prod.wrapping_add(n);
            self.fill
                .producer()
                .store(self.fill_prod, Ordering::Release);
        }
    }

    /// Calls `f` on up to `budget` received frames; returns how many.
    fn recv(&mut self, budget: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let Some(n) = ring_ready(prod, self.rx_cons, self.rx.size) else {
            self.rxc.bad_index += 1;
            return 0;
        };
        let n = n.min(budget);
        let mut frames = 0;
        for i in 0..n {
            let d = self.rx.read_desc(self.rx_cons.wrapping_add(i));
            match rx_chunk(&self.geo, d.addr, d.len, d.options) {
                Some(c) if self.rx_in_kernel[c as usize] => {
                    self.rx_in_kernel[c as usize] = false;
                    // SAFETY: the frame lies inside receive chunk `c` of the UMEM (checked
                    // by `rx_chunk`), which the kernel handed to us and does not write
                    // until it is back in the fill ring (after this loop).
                    let frame = unsafe {
                        std::slice::from_raw_parts(
                            self.umem.ptr.as_ptr().add(d.addr as usize),
                            d.len as usize,
                        )
                    };
                    f(frame, 0);
                    self.refill.push(c);
                    self.rxc.frames += 1;
                    self.rxc.bytes += d.len as u64;
                    frames += 1;
                }
                _ => self.rxc.bad_desc += 1,
            }
        }
        if n > 0 {
            self.rx_cons = self.rx_cons.wrapping_add(n);
            self.rx.consumer().store(self.rx_cons, Ordering::Release);
        }
        self.refill_pending();
        frames
    }

    /// Takes completed transmit chunks back into the free list.
    fn reap(&self, t: &mut TxSide) {
        let prod = self.comp.producer().load(Ordering::Acquire);
        let Some(n) = ring_ready(prod, t.comp_cons, self.comp.size) else {
            t.c.bad_index += 1;
            return;
        };
        for i in 0..n {
            let a = self.comp.read_addr(t.comp_cons.wrapping_add(i));
            match completion_chunk(&self.geo, a) {
                Some(c) if t.in_kernel[(c - self.geo.rx_chunks) as usize] => {
                    t.in_kernel[(c - self.geo.rx_chunks) as usize] = false;
                    t.free.push(c);
                    t.c.completed += 1;
                }
                _ => t.c.bad_completion += 1,
            }
        }
        if n > 0 {
            t.comp_cons = t.comp_cons.wrapping_add(n);
            self.comp.consumer().store(t.comp_cons, Ordering::Release);
        }
    }

    /// `sendto(MSG_DONTWAIT)`: the kernel transmits up to 32 posted descriptors.
    fn kick(&self, t: &mut TxSide) {
        t.unkicked = 0;
        t.c.kicks += 1;
        // SAFETY: a zero-length sendto with no buffer and no address: the AF_XDP "kick".
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            t.kick_needed = false;
            return;
        }
        match io::Error::last_os_error().raw_os_error() {
            // Budget spent, completion ring full, or the device busy: kick again later.
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => t.c.kick_again += 1,
            _ => t.c.kick_errors += 1,
        }
        t.kick_needed = true;
    }

    fn send(&self, frame: &[u8]) -> bool {
        let Some(tx) = &self.tx else { return false };
        let mut guard = self.txs.borrow_mut();
        let t = &mut *guard;
        if frame.is_empty() || frame.len() > self.geo.chunk as usize {
            t.c.oversize += 1;
            return false;
        }
        if t.free.is_empty() {
            self.reap(t);
        }
        let Some(c) = t.free.pop() else {
            t.c.no_frame += 1;
            if t.kick_needed {
                self.kick(t);
            }
            return false;
        };
        let cons = tx.consumer().load(Ordering::Acquire);
        if ring_free(t.tx_prod, cons, tx.size).unwrap_or(0) == 0 {
            t.free.push(c);
            t.c.ring_full += 1;
            self.kick(t);
            return false;
        }
        let addr = c as u64 * self.geo.chunk as u64;
        // SAFETY: transmit chunk `c` is free (not in the kernel's hands, checked by the
        // free list), lies inside the UMEM, and `frame.len() ≤ chunk` (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.umem.ptr.as_ptr().add(addr as usize),
                frame.len(),
            )
        };
        tx.write_desc(
            t.tx_prod,
            libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            },
        );
        t.in_kernel[(c - self.geo.rx_chunks) as usize] = true;
        t.tx_prod = t.tx_prod.wrapping_add(1);
        tx.producer().store(t.tx_prod, Ordering::Release);
        t.c.frames += 1;
        t.unkicked += 1;
        t.kick_needed = true;
        if t.unkicked >= KICK_BATCH {
            self.kick(t);
        }
        true
    }

    fn flush(&self) {
        if self.tx.is_none() {
            return;
        }
        let mut guard = self.txs.borrow_mut();
        let t = &mut *guard;
        if t.kick_needed {
            self.kick(t);
        }
        self.reap(t);
    }

    fn kernel_stats(&self) -> Option<libc::xdp_statistics> {
        // SAFETY: all-zero is a valid `xdp_statistics`.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `s` is writable for `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut s as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        (r == 0).then_some(s)
    }
}

// ---------------------------------------------------------------------------------------
// The XDP program and its attachment.
// ---------------------------------------------------------------------------------------

fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<RawFd> {
    // SAFETY: `attr` is a live, initialized `bpf_attr` prefix of `size_of::<T>()` bytes;
    // the kernel reads at most that many (and writes nothing back for these commands).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as RawFd)
    }
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by bpf(2) and is owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// The XSKMAP, the program and the link that attaches it. Field order is drop order: the
/// link first (detaches the program), then the program, then the map.
struct Attachment {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
}

fn attach(iface: &str, ifindex: u32, queues: &[Queue]) -> R<Attachment> {
    let mut mc = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: queues.len() as u32,
        map_name: name16("weft_xsks"),
        ..MapCreateAttr::default()
    };
    let map = owned(
        bpf(BPF_MAP_CREATE, &mut mc)
            .map_err(|e| XdpError::new(iface, "bpf(BPF_MAP_CREATE, XSKMAP)", e))?,
    );
    for q in queues {
        let key: u32 = q.queue_id;
        let value: u32 = q.fd.as_raw_fd() as u32;
        let mut up = MapElemAttr {
            map_fd: map.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: BPF_ANY,
            ..MapElemAttr::default()
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut up).map_err(|e| {
            XdpError::new(
                iface,
                format!("bpf(BPF_MAP_UPDATE_ELEM, queue {})", q.queue_id),
                e,
            )
        })?;
    }
    let insns = redirect_program(map.as_raw_fd());
    let license = b"Apache-2.0\0";
    let load = |log: &mut [u8]| {
        let mut pl = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: u32::from(!log.is_empty()),
            log_size: log.len() as u32,
            log_buf: if log.is_empty() {
                0
            } else {
                log.as_mut_ptr() as u64
            },
            prog_name: name16("weft_xsk_redir"),
            expected_attach_type: BPF_XDP,
            ..ProgLoadAttr::default()
        };
        bpf(BPF_PROG_LOAD, &mut pl)
    };
    let prog = match load(&mut []) {
        Ok(fd) => owned(fd),
        Err(e) => {
            // Once more with the verifier's log, for the error message.
            let mut log = vec![0u8; 64 * 1024];
            if let Ok(fd) = load(&mut log) {
                owned(fd)
            } else {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                return Err(XdpError::new(iface, "bpf(BPF_PROG_LOAD, XDP)", e)
                    .with_log(&String::from_utf8_lossy(&log[..end])));
            }
        }
    };
    let mut lc = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: XDP_FLAGS_SKB_MODE,
    };
    let link = owned(
        bpf(BPF_LINK_CREATE, &mut lc)
            .map_err(|e| XdpError::new(iface, "bpf(BPF_LINK_CREATE, generic XDP)", e))?,
    );
    Ok(Attachment {
        _link: link,
        _prog: prog,
        _map: map,
    })
}

/// Receive queues of `iface` (`ETHTOOL_GCHANNELS`: rx + combined), 1 when the driver does
/// not say.
pub fn rx_queues(iface: &str) -> u32 {
    match crate::ethtool::Ethtool::open(iface).and_then(|e| e.channels()) {
        Ok((rx, combined)) => (rx + combined).clamp(1, 256),
        Err(_) => 1,
    }
}

/// An AF_PACKET socket that receives nothing (protocol 0) and holds the interface in
/// promiscuous mode while it is open.
fn promisc(iface: &str, ifindex: u32) -> R<OwnedFd> {
    // SAFETY: plain system call.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(XdpError::new(
            iface,
            "socket(AF_PACKET) for promiscuous mode",
            io::Error::last_os_error(),
        ));
    }
    let fd = owned(raw);
    // SAFETY: all-zero is a valid `packet_mreq`.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex as i32;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    // SAFETY: `mr` is a live `packet_mreq` of the given size.
    let r = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            &mr as *const libc::packet_mreq as *const libc::c_void,
            std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(XdpError::new(
            iface,
            "PACKET_ADD_MEMBERSHIP(promisc)",
            io::Error::last_os_error(),
        ));
    }
    Ok(fd)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn uapi_layouts_match_the_kernel_headers() {
        // Offsets inside `union bpf_attr` (<linux/bpf.h>).
        assert_eq!(offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(offset_of!(MapElemAttr, key), 8);
        assert_eq!(offset_of!(MapElemAttr, value), 16);
        assert_eq!(offset_of!(MapElemAttr, flags), 24);
        assert_eq!(offset_of!(ProgLoadAttr, insns), 8);
        assert_eq!(offset_of!(ProgLoadAttr, license), 16);
        assert_eq!(offset_of!(ProgLoadAttr, log_level), 24);
        assert_eq!(offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(size_of::<ProgLoadAttr>(), 72);
        assert_eq!(offset_of!(LinkCreateAttr, flags), 12);
        assert_eq!(size_of::<BpfInsn>(), 8);
        assert_eq!(size_of::<crate::ethtool::EthtoolChannels>(), 36);
        // The AF_XDP structs `libc` exports.
        assert_eq!(size_of::<libc::xdp_desc>(), 16);
        assert_eq!(size_of::<libc::xdp_umem_reg>(), 32);
        assert_eq!(size_of::<libc::xdp_mmap_offsets>(), 128);
    }

    #[test]
    fn program_encoding() {
        let p = redirect_program(7);
        // ldxw r2, [r1 + 16]
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        // ld_imm64 r1, map fd 7 (src_reg = BPF_PSEUDO_MAP_FD), then the zero upper half
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!(p[2], BpfInsn::new(0, 0, 0, 0, 0));
        // mov64 r3, XDP_PASS; call 51; exit
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, 2));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
    }

    #[test]
    fn ring_indices_wrap() {
        assert_eq!(ring_ready(5, 5, 8), Some(0));
        assert_eq!(ring_ready(13, 5, 8), Some(8));
        assert_eq!(ring_ready(14, 5, 8), None, "more than a ring ahead");
        assert_eq!(ring_ready(4, 5, 8), None, "producer behind the consumer");
        // Across the u32 wrap.
        assert_eq!(ring_ready(2, u32::MAX - 1, 8), Some(4));
        assert_eq!(ring_free(2, u32::MAX - 1, 8), Some(4));
        assert_eq!(ring_free(0, 0, 8), Some(8));
        assert_eq!(ring_free(8, 0, 8), Some(0));
        assert_eq!(ring_free(9, 0, 8), None, "consumer more than a ring behind");
        assert_eq!(ring_free(0, 1, 8), None, "consumer ahead of the producer");
        // ready + free = size for every consistent pair.
        for prod in [0u32, 1, 7, u32::MAX, u32::MAX - 3] {
            for used in 0..=8u32 {
                let cons = prod.wrapping_sub(used);
                assert_eq!(ring_ready(prod, cons, 8), Some(used));
                assert_eq!(ring_free(prod, cons, 8), Some(8 - used));
            }
        }
    }

    const G: Geometry = Geometry {
        chunk: 2048,
        rx_chunks: 4,
        tx_chunks: 2,
    };

    #[test]
    fn rx_descriptors_inside_one_receive_chunk_only() {
        assert_eq!(G.umem_bytes(), 6 * 2048);
        assert_eq!(rx_chunk(&G, 256, 1500, 0), Some(0));
        assert_eq!(
            rx_chunk(&G, 3 * 2048 + 256, 1792, 0),
            Some(3),
            "up to the chunk end"
        );
        assert_eq!(
            rx_chunk(&G, 3 * 2048 + 256, 1793, 0),
            None,
            "crosses into chunk 4"
        );
        assert_eq!(
            rx_chunk(&G, 4 * 2048 + 256, 60, 0),
            None,
            "a transmit chunk"
        );
        assert_eq!(rx_chunk(&G, 1 << 40, 60, 0), None, "outside the UMEM");
        assert_eq!(rx_chunk(&G, u64::MAX - 10, 60, 0), None, "overflowing end");
        assert_eq!(rx_chunk(&G, 256, 0, 0), None, "empty");
        assert_eq!(rx_chunk(&G, 256, 60, 1), None, "multi-buffer continuation");
    }

    #[test]
    fn completions_name_transmit_chunk_starts_only() {
        assert_eq!(completion_chunk(&G, 4 * 2048), Some(4));
        assert_eq!(completion_chunk(&G, 5 * 2048), Some(5));
        assert_eq!(completion_chunk(&G, 6 * 2048), None, "past the UMEM");
        assert_eq!(completion_chunk(&G, 0), None, "a receive chunk");
        assert_eq!(
            completion_chunk(&G, 4 * 2048 + 8),
            None,
            "not a chunk start"
        );
        assert_eq!(completion_chunk(&G, u64::MAX), None);
    }

    #[test]
    fn errors_name_the_step_and_errno() {
        let e = XdpError::new(
            "t1",
            "bpf(BPF_LINK_CREATE, generic XDP)",
            io::Error::from_raw_os_error(libc::EBUSY),
        );
        let s = e.to_string();
        assert!(s.contains("`t1`") && s.contains("BPF_LINK_CREATE"), "{s}");
        assert!(s.contains("os error 16") && s.contains("EBUSY"), "{s}");
        assert!(s.contains("another XDP program"), "{s}");
        assert_eq!(e.errno(), Some(libc::EBUSY));
    }
}
