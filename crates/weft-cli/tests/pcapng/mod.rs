//! pcapng blocks written by hand, little-endian, for the capture tests
//! (`tests/replay_capture.rs`, `tests/trace_bounds.rs`): the format is small, and a test
//! that writes its bytes can also write them wrong on purpose.
#![allow(dead_code)] // each test crate uses its own subset

/// A block: type, total length, body padded to 4 bytes, total length.
pub fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    let len = (body.len() + 12) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&body);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// A section header block (version 1.0, section length unknown): 28 bytes.
pub fn shb() -> Vec<u8> {
    let mut body = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&(-1i64).to_le_bytes());
    block(0x0a0d_0d0a, &body)
}

/// An interface description block of `linktype`, with `if_name` and `if_tsresol` if given
/// (with neither: 20 bytes, no options).
pub fn idb(linktype: u16, tsresol: Option<u8>, name: Option<&str>) -> Vec<u8> {
    let mut body = linktype.to_le_bytes().to_vec();
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&65535u32.to_le_bytes());
    // An option: code, length, value padded to 4 bytes.
    let option = |body: &mut Vec<u8>, code: u16, value: &[u8]| {
        body.extend_from_slice(&code.to_le_bytes());
        body.extend_from_slice(&(value.len() as u16).to_le_bytes());
        body.extend_from_slice(value);
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
    };
    if let Some(n) = name {
        option(&mut body, 2, n.as_bytes()); // if_name
    }
    if let Some(r) = tsresol {
        option(&mut body, 9, &[r]); // if_tsresol
    }
    if name.is_some() || tsresol.is_some() {
        option(&mut body, 0, &[]); // opt_endofopt
    }
    block(1, &body)
}

/// An enhanced packet block: `frame`, whole, captured on interface `iface` at `ts` (in the
/// interface's units).
pub fn epb(iface: u32, ts: u64, frame: &[u8]) -> Vec<u8> {
    let mut body = iface.to_le_bytes().to_vec();
    body.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ts as u32).to_le_bytes());
    body.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    body.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    body.extend_from_slice(frame);
    block(6, &body)
}
