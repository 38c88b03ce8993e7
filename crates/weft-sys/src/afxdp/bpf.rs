//! The XDP side of an AF_XDP port: the kernel UAPI `libc` does not export (`bpf_attr`
//! layouts, constants), the six-instruction redirect program ([`redirect_program`]), the
//! XSKMAP and the program loaded and attached through a bpf_link, the channel count and the
//! promiscuous-mode socket.
//!
//! Invariants: every `bpf_attr` is zeroed beyond the fields set and as long as the kernel is
//! told; an interface that already has an XDP program is refused, never taken over; the
//! attachment ends with the link's descriptor (also when the process dies). Cost: a few
//! `bpf(2)` calls at open.

use super::*;

// ---------------------------------------------------------------------------------------
// Kernel UAPI that `libc` 0.2 does not export. `libc` has the AF_XDP socket side
// (`sockaddr_xdp`, `xdp_umem_reg`, `xdp_mmap_offsets`, `xdp_desc`, `xdp_statistics`,
// `SOL_XDP`, `XDP_*` options and page offsets, `SYS_bpf`); the bpf(2) side and a few
// netdevice constants are copied here from <linux/bpf.h>, <linux/if_link.h>,
// <linux/ethtool.h> and <linux/bpf_common.h> (checked against the 6.x headers; the layouts
// are asserted in the tests).
// ---------------------------------------------------------------------------------------

/// `enum bpf_cmd`.
pub(super) const BPF_MAP_CREATE: u32 = 0;
pub(super) const BPF_MAP_UPDATE_ELEM: u32 = 2;
pub(super) const BPF_PROG_LOAD: u32 = 5;
pub(super) const BPF_LINK_CREATE: u32 = 28;
/// `enum bpf_map_type`.
pub(super) const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `enum bpf_prog_type`.
pub(super) const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`.
pub(super) const BPF_XDP: u32 = 37;
/// `BPF_FUNC_redirect_map` (helper id).
pub(super) const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `BPF_PSEUDO_MAP_FD`: an `ld_imm64` whose immediate is a map fd.
pub(super) const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_ANY` for `BPF_MAP_UPDATE_ELEM`.
pub(super) const BPF_ANY: u64 = 0;
/// `XDP_FLAGS_SKB_MODE` (<linux/if_link.h>): generic XDP, any driver.
pub(super) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `enum xdp_action`.
pub(super) const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
pub(super) const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
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
    pub(super) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
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
pub(super) struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    pub(super) map_name: [u8; 16],
}

/// `union bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
#[derive(Default)]
pub(super) struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    pub(super) key: u64,
    pub(super) value: u64,
    pub(super) flags: u64,
}

/// `union bpf_attr` for `BPF_PROG_LOAD` (the fields up to `expected_attach_type`).
#[repr(C)]
#[derive(Default)]
pub(super) struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    pub(super) insns: u64,
    pub(super) license: u64,
    pub(super) log_level: u32,
    log_size: u32,
    pub(super) log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    pub(super) prog_name: [u8; 16],
    prog_ifindex: u32,
    pub(super) expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` (no target-specific tail).
#[repr(C)]
#[derive(Default)]
pub(super) struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    pub(super) flags: u32,
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
// The XDP program and its attachment.
// ---------------------------------------------------------------------------------------

pub(super) fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<RawFd> {
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

pub(super) fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by bpf(2) and is owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub(super) fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// The XSKMAP, the program and the link that attaches it. Field order is drop order: the
/// link first (detaches the program), then the program, then the map.
pub(super) struct Attachment {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
}

pub(super) fn attach(iface: &str, ifindex: u32, queues: &[Queue]) -> R<Attachment> {
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
pub(super) fn promisc(iface: &str, ifindex: u32) -> R<OwnedFd> {
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
