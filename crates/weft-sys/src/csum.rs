//! Completing in software the TCP or UDP checksum of a frame the kernel hands over
//! unfinished (`TP_STATUS_CSUMNOTREADY` in an AF_PACKET ring: the sender left it to a
//! device, `CHECKSUM_PARTIAL`). It sits here, beside the receive ring that calls it
//! ([`crate::afpacket`]); weft-nic's `offload` says why such frames arrive and re-exports it.
//!
//! [`complete_checksum`] recomputes the checksum of an Ethernet frame (up to two VLAN tags;
//! IPv4, or IPv6 with hop-by-hop, routing and destination-options headers) from scratch: the
//! pseudo-header, then the L4 header and payload with the checksum field taken as zero,
//! folded and complemented (a UDP result of 0 is sent as `0xffff`). With `CHECKSUM_PARTIAL`
//! the sender has stored in the field the folded, uncomplemented sum of the pseudo-header,
//! and a device finishes it by summing from the L4 header to the end with the field as is
//! and storing the complement; that gives the same value, so recomputing needs neither the
//! field's contents nor the kernel's `csum_start` (which the TPACKET header does not carry).
//! Fragments, other protocols, IPv6 jumbograms, a routing header with segments left, and
//! frames shorter than their headers say are refused.
//!
//! Invariants: never reads or writes outside the frame, and writes only the two checksum
//! bytes, and only when it returns `Ok`. Cost: one pass over the frame's L4 bytes (about
//! 100 ns for 1,500 bytes). Safe code only.

/// The transport of a frame whose checksum was completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// Why a checksum could not be completed (the frame is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CsumError {
    #[error("neither IPv4 nor IPv6")]
    /// Neither IPv4 nor IPv6.
    NotIp,
    #[error("neither TCP nor UDP")]
    /// Neither TCP nor UDP.
    NotTcpUdp,
    #[error("an IP fragment")]
    /// An IP fragment.
    Fragment,
    #[error("IP headers not handled (IPv6 jumbogram, routing header with segments left, or too many extension headers)")]
    /// IP headers not handled.
    Unsupported,
    #[error("shorter than its headers say")]
    /// Shorter than its headers say.
    Truncated,
}

fn be16(b: &[u8], at: usize) -> usize {
    u16::from_be_bytes([b[at], b[at + 1]]) as usize
}

/// The ones'-complement sum of `b` as big-endian 16-bit words (an odd last byte padded with
/// zero), added to `sum` without folding.
fn sum_words(mut sum: u64, b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(4);
    for c in &mut chunks {
        sum += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u32::from_be_bytes(tail) as u64
}

fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Computes the TCP or UDP checksum of Ethernet frame `frame` and writes it into the
/// frame's checksum field (see the module's documentation for the frames it takes and why
/// recomputing is the kernel's completion). Bytes after the IP packet (Ethernet padding)
/// are left out. Never panics; on `Err` the frame is unchanged.
pub fn complete_checksum(frame: &mut [u8]) -> Result<L4, CsumError> {
    let (mut ethertype, mut l3) = (frame.get(12..14).ok_or(CsumError::Truncated)?, 14);
    // Up to two VLAN tags (802.1Q, 802.1ad).
    for _ in 0..2 {
        if ethertype == [0x81, 0x00] || ethertype == [0x88, 0xa8] {
            ethertype = frame.get(l3 + 2..l3 + 4).ok_or(CsumError::Truncated)?;
            l3 += 4;
        }
    }
    // Pseudo-header sum (without the length), protocol, L4 start and end.
    let (pseudo, proto, l4, end) = match *ethertype {
        [0x08, 0x00] => {
            let ip = frame.get(l3..l3 + 20).ok_or(CsumError::Truncated)?;
            let ihl = (ip[0] & 0x0f) as usize * 4;
            if ip[0] >> 4 != 4 || ihl < 20 {
                return Err(CsumError::NotIp);
            }
            let total = be16(ip, 2);
            if be16(ip, 6) & 0x3fff != 0 {
                return Err(CsumError::Fragment);
            }
            if total < ihl || l3 + total > frame.len() {
                return Err(CsumError::Truncated);
            }
            let proto = ip[9];
            (sum_words(0, &ip[12..20]), proto, l3 + ihl, l3 + total)
        }
        [0x86, 0xdd] => {
            let ip = frame.get(l3..l3 + 40).ok_or(CsumError::Truncated)?;
            if ip[0] >> 4 != 6 {
                return Err(CsumError::NotIp);
            }
            let payload = be16(ip, 4);
            if payload == 0 {
                return Err(CsumError::Unsupported);
            }
            let end = l3 + 40 + payload;
            if end > frame.len() {
                return Err(CsumError::Truncated);
            }
            let pseudo = sum_words(0, &ip[8..40]);
            let (mut next, mut at) = (ip[6], l3 + 40);
            // Extension headers: hop-by-hop, routing (none left to visit), destination options.
            for _ in 0..8 {
                match next {
                    0 | 43 | 60 => {
                        let h = frame.get(at..at + 8).ok_or(CsumError::Truncated)?;
                        if next == 43 && h[3] != 0 {
                            return Err(CsumError::Unsupported);
                        }
                        next = h[0];
                        at += (h[1] as usize + 1) * 8;
                        if at > end {
                            return Err(CsumError::Truncated);
                        }
                    }
                    44 => return Err(CsumError::Fragment),
                    _ => break,
                }
            }
            if matches!(next, 0 | 43 | 60) {
                return Err(CsumError::Unsupported);
            }
            (pseudo, next, at, end)
        }
        _ => return Err(CsumError::NotIp),
    };
    let (kind, field, len) = match proto {
        6 => {
            if end - l4 < 20 {
                return Err(CsumError::Truncated);
            }
            (L4::Tcp, l4 + 16, end - l4)
        }
        17 => {
            if end - l4 < 8 {
                return Err(CsumError::Truncated);
            }
            let ulen = be16(frame, l4 + 4);
            if ulen < 8 || ulen > end - l4 {
                return Err(CsumError::Truncated);
            }
            (L4::Udp, l4 + 6, ulen)
        }
        _ => return Err(CsumError::NotTcpUdp),
    };
    frame[field] = 0;
    frame[field + 1] = 0;
    let sum = sum_words(pseudo + proto as u64 + len as u64, &frame[l4..l4 + len]);
    let mut c = !fold(sum);
    if kind == L4::Udp && c == 0 {
        c = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(kind)
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_and_odd_frames_are_refused_without_panicking() {
        for n in 0..80 {
            let mut f = vec![0u8; n];
            if n >= 14 {
                f[12] = 0x08;
            }
            let before = f.clone();
            assert!(super::complete_checksum(&mut f).is_err());
            assert_eq!(f, before);
        }
    }
}
