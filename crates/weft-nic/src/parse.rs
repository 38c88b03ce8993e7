//! Frames to classifier metadata: Ethernet (with up to two VLAN tags), IPv4/IPv6, TCP/UDP
//! ports, DSCP, with `etherparse`'s slicing parser (zero copy). The tenant comes from the
//! ingress interface, not the frame; it is given as both `tenant` and `vm` (a tenant's
//! interface is its VM's VNIC), so policies written per VM (Loom Fig. 1) run unchanged. A frame that cannot be parsed as far as its headers
//! claim is an error the dataplane counts and drops; this module never panics on input.
//! Non-IP frames (ARP) are valid: they carry only the tenant and are classified on it.
//!
//! Cost: one pass over the headers (tens of nanoseconds).

use std::net::IpAddr;

use etherparse::{
    IpNumber, Ipv4HeaderSlice, Ipv6HeaderSlice, NetSlice, SlicedPacket, TransportSlice,
};
use weft_core::classifier::{Field, PacketMeta};

/// What was read from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// Classifier fields (tenant included).
    pub meta: PacketMeta,
    /// A flow key: a hash of (tenant, proto, addresses, ports); 0 for non-IP frames.
    pub flow: u64,
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Parses a frame received on the interface of `tenant`.
pub fn parse(frame: &[u8], tenant: u32) -> Result<Parsed, ParseError> {
    let p = SlicedPacket::from_ethernet(frame).map_err(|e| ParseError::Malformed(e.to_string()))?;
    let net = match &p.net {
        Some(NetSlice::Ipv4(v4)) => Some(Net::v4(&v4.header())),
        Some(NetSlice::Ipv6(v6)) => Some(Net::v6(&v6.header(), v6.payload().ip_number)),
        _ => None,
    };
    Ok(parsed(
        net,
        p.transport.as_ref().and_then(ports),
        Some(tenant),
    ))
}

/// An IP header's classifier fields: addresses, protocol and DSCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub dscp: u8,
}

impl Net {
    /// An IPv4 header's fields.
    pub fn v4(h: &Ipv4HeaderSlice) -> Net {
        Net {
            src: h.source_addr().into(),
            dst: h.destination_addr().into(),
            proto: h.protocol().0,
            dscp: h.dcp().value(),
        }
    }

    /// An IPv6 header's fields; `proto`: the payload's protocol after extension headers.
    pub fn v6(h: &Ipv6HeaderSlice, proto: IpNumber) -> Net {
        Net {
            src: h.source_addr().into(),
            dst: h.destination_addr().into(),
            proto: proto.0,
            dscp: h.traffic_class() >> 2,
        }
    }
}

/// A TCP or UDP header's ports, `(source, destination)`.
pub fn ports(t: &TransportSlice) -> Option<(u16, u16)> {
    match t {
        TransportSlice::Tcp(t) => Some((t.source_port(), t.destination_port())),
        TransportSlice::Udp(u) => Some((u.source_port(), u.destination_port())),
        _ => None,
    }
}

/// The classifier fields and flow key of a frame's headers (as the dataplane's [`parse`] and
/// a capture's reader slice them); `tenant`, when known, is set as both `tenant` and `vm`.
/// Non-IP frames carry only the tenant, and flow key 0.
pub fn parsed(net: Option<Net>, ports: Option<(u16, u16)>, tenant: Option<u32>) -> Parsed {
    let mut meta = PacketMeta::default();
    if let Some(t) = tenant {
        meta.set_int(Field::Tenant, t as u64);
        meta.set_int(Field::Vm, t as u64);
    }
    let Some(n) = net else {
        return Parsed { meta, flow: 0 };
    };
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ tenant.unwrap_or(0) as u64;
    let mut mix = |v: u128| {
        h ^= v as u64 ^ (v >> 64) as u64;
        h = h.wrapping_mul(0x100_0000_01b3).rotate_left(29);
    };
    meta.set_addr(Field::Src, n.src);
    meta.set_addr(Field::Dst, n.dst);
    meta.set_int(Field::Proto, n.proto as u64);
    meta.set_int(Field::Dscp, n.dscp as u64);
    mix(meta.src);
    mix(meta.dst);
    mix(n.proto as u128);
    if let Some((sport, dport)) = ports {
        meta.set_int(Field::Sport, sport as u64);
        meta.set_int(Field::Dport, dport as u64);
    }
    mix((meta.sport as u128) << 16 | meta.dport as u128);
    Parsed { meta, flow: h | 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 3, 7], 64)
            .tcp(sport, dport, 1, 1000);
        let mut v = Vec::new();
        b.write(&mut v, &[0u8; 100]).unwrap();
        v
    }

    #[test]
    fn tcp_fields() {
        let p = parse(&tcp(1234, 5201), 2).unwrap();
        assert_eq!(p.meta.tenant, 2);
        assert_eq!(p.meta.sport, 1234);
        assert_eq!(p.meta.dport, 5201);
        assert_eq!(p.meta.proto, 6);
        let m: PacketMeta =
            "tenant=2,vm=2,sport=1234,dport=5201,proto=tcp,dscp=0,src=10.0.0.1,dst=10.0.3.7"
                .parse()
                .unwrap();
        assert_eq!(p.meta, m);
        assert_ne!(p.flow, parse(&tcp(1235, 5201), 2).unwrap().flow);
        assert_ne!(p.flow, parse(&tcp(1234, 5201), 3).unwrap().flow);
    }

    /// The dataplane's reclassification relies on this: the flow key leaves the DSCP out,
    /// the classifier fields keep it (IPv4 and IPv6).
    #[test]
    fn a_remarked_frame_is_the_same_flow_with_another_dscp() {
        let v4 = |tos: u8| {
            let mut f = tcp(1234, 5201);
            f[15] = tos;
            f
        };
        let v6 = |tc: u8| {
            let b = PacketBuilder::ethernet2([1; 6], [2; 6])
                .ipv6([1; 16], [2; 16], 64)
                .udp(53, 5353);
            let mut f = Vec::new();
            b.write(&mut f, &[0u8; 20]).unwrap();
            // Traffic class: the low nibble of byte 14 and the high nibble of byte 15.
            f[14] = (f[14] & 0xf0) | (tc >> 4);
            f[15] = (f[15] & 0x0f) | (tc << 4);
            f
        };
        for (be, ef) in [(v4(0), v4(46 << 2)), (v6(0), v6(46 << 2))] {
            let (be, ef) = (parse(&be, 1).unwrap(), parse(&ef, 1).unwrap());
            assert_eq!(be.flow, ef.flow);
            assert_eq!((be.meta.dscp, ef.meta.dscp), (0, 46));
            assert_ne!(be.meta, ef.meta);
        }
    }

    #[test]
    fn truncated_and_garbage_never_panic() {
        let f = tcp(1, 2);
        for n in 0..f.len() {
            let _ = parse(&f[..n], 1);
        }
        assert!(parse(&f[..20], 1).is_err());
        let mut x = 0x1234_5678u32;
        for _ in 0..2000 {
            let len = (x % 200) as usize;
            let v: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = parse(&v, 1);
        }
    }

    #[test]
    fn arp_is_tenant_only() {
        let mut f = vec![0xffu8; 6];
        f.extend([2u8; 6]);
        f.extend([0x08, 0x06]);
        f.extend([0u8; 28]);
        let p = parse(&f, 4).unwrap();
        assert_eq!(p.meta.tenant, 4);
        assert_eq!(p.flow, 0);
    }
}
