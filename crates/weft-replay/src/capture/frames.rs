//! A captured frame's link-layer framing and its classifier fields: which link types weft
//! reads ([`LINK_TYPES`]) and how each is sliced down to its IP and transport headers, as the
//! software NIC reads them (`weft_nic::parse`).
//!
//! Invariants: slicing is lenient (`etherparse`'s lax slicer): a frame cut by the snap
//! length keeps the fields its bytes hold, and a frame too short for its link header has
//! none; nothing here panics on any bytes. Cost: one header parse per record (tens of
//! nanoseconds).

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket};
use pcap_parser::Linktype;
use weft_nic::parse::{ports, Net};

/// How a link type's frames are sliced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    Ethernet,
    Ip,
    /// Linux cooked capture v1 (16-byte header) or v2 (20 bytes).
    Sll,
    Sll2,
    /// BSD loopback (`DLT_NULL`, `DLT_LOOP`): a 4-byte address family (in the capturing
    /// host's byte order, or network order), then an IPv4 or IPv6 packet.
    Loopback,
}

/// The link types weft reads (`framing`), as messages name them.
pub const LINK_TYPES: &str =
    "Ethernet 1, raw IP 101/228/229, Linux cooked 113/276, BSD loopback 0/108";

pub(super) fn framing(l: Linktype) -> Option<Framing> {
    match l {
        Linktype::ETHERNET => Some(Framing::Ethernet),
        Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => Some(Framing::Ip),
        Linktype::LINUX_SLL => Some(Framing::Sll),
        Linktype::LINUX_SLL2 => Some(Framing::Sll2),
        Linktype::NULL | Linktype::LOOP => Some(Framing::Loopback),
        _ => None,
    }
}

/// The IP and transport fields of a captured frame, as far as its bytes go.
pub(super) fn headers(framing: Framing, data: &[u8]) -> (Option<Net>, Option<(u16, u16)>) {
    let sliced = match framing {
        Framing::Ethernet => LaxSlicedPacket::from_ethernet(data).ok(),
        Framing::Ip => LaxSlicedPacket::from_ip(data).ok(),
        // The protocol (an EtherType) at bytes 14..16 of a 16-byte header, or 0..2 of 20.
        Framing::Sll if data.len() >= 16 => Some(LaxSlicedPacket::from_ether_type(
            EtherType(u16::from_be_bytes([data[14], data[15]])),
            &data[16..],
        )),
        Framing::Sll2 if data.len() >= 20 => Some(LaxSlicedPacket::from_ether_type(
            EtherType(u16::from_be_bytes([data[0], data[1]])),
            &data[20..],
        )),
        // The address family is not read: the IP header's version tells v4 from v6 (the
        // family's value for IPv6 differs between the BSDs), and anything else is not IP.
        Framing::Loopback if data.len() >= 4 => LaxSlicedPacket::from_ip(&data[4..]).ok(),
        Framing::Sll | Framing::Sll2 | Framing::Loopback => None,
    };
    let Some(p) = sliced else {
        return (None, None);
    };
    let net = match &p.net {
        Some(LaxNetSlice::Ipv4(v4)) => Some(Net::v4(&v4.header())),
        Some(LaxNetSlice::Ipv6(v6)) => Some(Net::v6(&v6.header(), v6.payload().ip_number)),
        None => None,
    };
    (net, p.transport.as_ref().and_then(ports))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;
    use weft_nic::parse::parsed;

    fn addr(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    use etherparse::PacketBuilder;
    use weft_core::classifier::PacketMeta;

    /// A UDP frame from 10.0.0.1:`sport` to 10.0.2.9:`dport` with `payload` bytes.
    fn udp(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
        let mut v = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 2, 9], 64)
            .udp(sport, dport)
            .write(&mut v, &vec![0u8; payload])
            .unwrap();
        v
    }

    #[test]
    fn headers_of_every_framing() {
        let frame = udp(1000, 53, 20);
        let expect = |(net, ports): (Option<Net>, Option<(u16, u16)>)| {
            let n = net.expect("an IP header");
            assert_eq!(
                (n.src, n.dst, n.proto),
                (addr("10.0.0.1"), addr("10.0.2.9"), 17)
            );
            assert_eq!(ports, Some((1000, 53)));
        };
        expect(headers(Framing::Ethernet, &frame));
        expect(headers(Framing::Ip, &frame[14..]));
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&0x0800u16.to_be_bytes());
        sll.extend_from_slice(&frame[14..]);
        expect(headers(Framing::Sll, &sll));
        let mut sll2 = 0x0800u16.to_be_bytes().to_vec();
        sll2.extend_from_slice(&[0u8; 18]);
        sll2.extend_from_slice(&frame[14..]);
        expect(headers(Framing::Sll2, &sll2));
        // BSD loopback: AF_INET in little-endian (DLT_NULL) or network order (DLT_LOOP).
        for family in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
            let mut lo = family.to_vec();
            lo.extend_from_slice(&frame[14..]);
            expect(headers(Framing::Loopback, &lo));
        }
        assert_eq!(headers(Framing::Loopback, &[2, 0]), (None, None));
        assert_eq!(
            headers(Framing::Loopback, &[2, 0, 0, 0, 0x99]),
            (None, None)
        );
    }

    #[test]
    fn a_frame_cut_by_the_snap_length_keeps_its_headers() {
        let frame = udp(1000, 53, 1400);
        // 14 + 20 + 8: the UDP header and no payload, as `tcpdump -s 42` keeps.
        let (net, ports) = headers(Framing::Ethernet, &frame[..42]);
        assert!(net.is_some());
        assert_eq!(ports, Some((1000, 53)));
        // Cut inside the IP header: no fields, no panic.
        assert_eq!(headers(Framing::Ethernet, &frame[..20]), (None, None));
        assert_eq!(headers(Framing::Sll, &frame[..10]), (None, None));
    }

    #[test]
    fn fields_match_the_software_nic() {
        let frame = udp(4242, 11211, 64);
        let (net, ports) = headers(Framing::Ethernet, &frame);
        let ours = parsed(net, ports, None);
        let expected: PacketMeta =
            "sport=4242,dport=11211,proto=udp,dscp=0,src=10.0.0.1,dst=10.0.2.9"
                .parse()
                .unwrap();
        assert_eq!(ours.meta, expected);
        assert_ne!(ours.flow, 0);
        // With the interface's tenant, exactly what `weft run` makes of the frame.
        let nic = weft_nic::parse::parse(&frame, 3).unwrap();
        assert_eq!(parsed(net, ports, Some(3)), nic);
    }
}
