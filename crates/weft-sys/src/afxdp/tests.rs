//! Unit tests of the AF_XDP code that need no kernel: the UAPI layouts, the program's
//! encoding, ring indices, descriptor and completion checks, error messages.

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
