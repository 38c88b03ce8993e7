//! Packet captures as replay traces: `weft replay --trace FILE.pcap` (or `.pcapng`; the
//! format is told by the file's first bytes, not its name).
//!
//! * **Reading**: `pcap-parser`'s streaming readers (legacy pcap in either byte order, with
//!   micro- or nanosecond timestamps; pcapng with any number of interfaces, each with its own
//!   link type, timestamp resolution and offset), one block at a time, so memory does not
//!   grow with the capture.
//! * **Packets**: a record's time is its timestamp less the first record's, in picoseconds
//!   (captures carry wall-clock time, past the 64-bit picosecond clock); its size is the
//!   original length on the wire (`origlen`: a capture cut at a snap length still replays at
//!   full size); its classifier fields come from its headers as the software NIC reads them
//!   (`weft_nic::parse`: addresses, protocol, DSCP, ports, and the 5-tuple hash as `flow`),
//!   sliced leniently (`etherparse`'s lax slicer), so a header cut short by the snap length
//!   leaves only the fields it holds. A capture has no tenant, VM or tag: a policy for one
//!   matches on addresses, ports, protocol or DSCP. Non-IP frames (ARP) carry no fields and
//!   are classified as such (usually to the policy's catch-all, else dropped as
//!   unclassified).
//! * **Link types**: Ethernet, raw IP (101, 228, 229) and Linux cooked captures (SLL and
//!   SLL2, as `tcpdump -i any` writes). Others are refused with their number.
//! * **Order**: captures from several queues or interfaces can step back in time by a few
//!   microseconds. Such a record is replayed at the latest time seen so far (the replay needs
//!   times in order), and the summary counts it (`capture.reordered`) rather than losing it.
//!
//! Errors name the file and the record (`c.pcap: record 12: ...`). Cost: one header parse per
//! record (tens of nanoseconds).

use std::fs::File;
use std::path::Path;

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket};
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{Block, Linktype, PcapBlockOwned, PcapError};
use weft_core::sched::{Packet, LAST_ARRIVAL_PS};
use weft_nic::parse::{parsed, ports, Net};

/// Reader buffer, bytes (doubled when a block is larger, up to [`MAX_BUFFER`]).
const BUFFER: usize = 1 << 20;

/// The largest block read, bytes.
const MAX_BUFFER: usize = 64 << 20;

/// Picoseconds per second.
const PS: u128 = 1_000_000_000_000;

/// Whether `head` (a file's first bytes) starts a pcap or pcapng capture.
pub fn is_capture(head: &[u8]) -> bool {
    const MAGICS: [[u8; 4]; 5] = [
        [0xd4, 0xc3, 0xb2, 0xa1], // pcap, little-endian, microseconds
        [0xa1, 0xb2, 0xc3, 0xd4], // pcap, big-endian, microseconds
        [0x4d, 0x3c, 0xb2, 0xa1], // pcap, little-endian, nanoseconds
        [0xa1, 0xb2, 0x3c, 0x4d], // pcap, big-endian, nanoseconds
        [0x0a, 0x0d, 0x0d, 0x0a], // pcapng section header
    ];
    head.len() >= 4 && MAGICS.iter().any(|m| head[..4] == *m)
}

/// How a link type's frames are sliced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Ethernet,
    Ip,
    /// Linux cooked capture v1 (16-byte header) or v2 (20 bytes).
    Sll,
    Sll2,
}

fn framing(l: Linktype) -> Option<Framing> {
    match l {
        Linktype::ETHERNET => Some(Framing::Ethernet),
        Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => Some(Framing::Ip),
        Linktype::LINUX_SLL => Some(Framing::Sll),
        Linktype::LINUX_SLL2 => Some(Framing::Sll2),
        _ => None,
    }
}

/// A pcapng interface: its framing, timestamp units per second and offset (seconds).
#[derive(Debug, Clone, Copy)]
struct Interface {
    framing: Option<Framing>,
    linktype: i32,
    per_second: u64,
    offset_s: i64,
}

/// A capture being read (see the module doc).
pub struct Capture {
    reader: Box<dyn PcapReaderIterator + Send>,
    /// The reader's buffer size, bytes.
    buffer: usize,
    state: State,
}

/// What a capture's reader has learnt (apart from the reader, which lends its blocks).
struct State {
    name: String,
    /// Legacy pcap: the file's framing, link type and timestamp units per second.
    legacy: Option<(Option<Framing>, i32, u64)>,
    /// pcapng: the current section's interfaces, by id.
    interfaces: Vec<Interface>,
    /// The first record's absolute time, picoseconds.
    first_ps: Option<i128>,
    /// The latest time replayed, picoseconds from the first record.
    last_ps: u64,
    /// Records read so far (the next packet's id).
    records: u64,
    /// Records replayed later than their timestamp (see the module doc).
    pub reordered: u64,
    /// Bytes of the file consumed (for progress).
    consumed: u64,
}

impl Capture {
    /// Opens `path` (a pcap or pcapng file).
    pub fn open(path: &Path) -> Result<Capture, String> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        let reader = pcap_parser::create_reader(BUFFER, file)
            .map_err(|e| format!("{name}: not a pcap or pcapng capture ({e:?})"))?;
        Ok(Capture {
            reader,
            buffer: BUFFER,
            state: State {
                name,
                legacy: None,
                interfaces: Vec::new(),
                first_ps: None,
                last_ps: 0,
                records: 0,
                reordered: 0,
                consumed: 0,
            },
        })
    }

    /// Bytes of the file read so far.
    pub fn position(&self) -> u64 {
        self.state.consumed
    }

    /// Records replayed later than their timestamp (see the module doc).
    pub fn reordered(&self) -> u64 {
        self.state.reordered
    }

    /// The next packet and its arrival time (picoseconds from the first record), `None` at
    /// the end, or the error that stops the replay.
    pub fn next_packet(&mut self) -> Option<Result<(u64, Packet), String>> {
        let st = &mut self.state;
        loop {
            let (offset, record) = match self.reader.next() {
                Ok((offset, block)) => (offset, st.block(block)),
                Err(PcapError::Eof) => return None,
                Err(PcapError::Incomplete(_)) => {
                    if let Err(e) = self.reader.refill() {
                        return Some(Err(st.error(format!("cannot read on: {e:?}"))));
                    }
                    continue;
                }
                Err(PcapError::BufferTooSmall) => {
                    // A block larger than the buffer: double it, up to a bound.
                    if self.buffer >= MAX_BUFFER || !self.reader.grow(self.buffer * 2) {
                        return Some(Err(
                            st.error(format!("a block larger than {} MiB", MAX_BUFFER >> 20))
                        ));
                    }
                    self.buffer *= 2;
                    continue;
                }
                Err(PcapError::UnexpectedEof) => {
                    return Some(Err(
                        st.error("the file ends inside this record (a capture cut short?)")
                    ))
                }
                Err(e) => return Some(Err(st.error(format!("malformed capture ({e:?})")))),
            };
            self.reader.consume(offset);
            st.consumed += offset as u64;
            match record {
                Ok(Some(r)) => return Some(st.packet(r)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl State {
    fn error(&self, what: impl std::fmt::Display) -> String {
        format!("{}: record {}: {what}", self.name, self.records + 1)
    }

    /// A block's packet, if it is one: (absolute time in ps, framing, link type, origlen, the
    /// captured bytes' classifier fields); headers and interfaces are recorded.
    fn block(&mut self, block: PcapBlockOwned) -> Result<Option<Record>, String> {
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                let per_second = if h.is_nanosecond_precision() {
                    1_000_000_000
                } else {
                    1_000_000
                };
                self.legacy = Some((framing(h.network), h.network.0, per_second));
                Ok(None)
            }
            PcapBlockOwned::Legacy(b) => {
                let (framing, linktype, per_second) = self
                    .legacy
                    .ok_or_else(|| self.error("a record before the file header"))?;
                let ps = b.ts_sec as i128 * PS as i128
                    + b.ts_usec as i128 * (PS / per_second as u128) as i128;
                self.record(ps, framing, linktype, b.origlen, b.data)
                    .map(Some)
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                // Interface ids restart with every section.
                self.interfaces.clear();
                Ok(None)
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                let per_second = i.ts_resolution().ok_or_else(|| {
                    self.error(format!(
                        "interface {}: timestamp resolution {} is out of range",
                        self.interfaces.len(),
                        i.if_tsresol
                    ))
                })?;
                self.interfaces.push(Interface {
                    framing: framing(i.linktype),
                    linktype: i.linktype.0,
                    per_second,
                    offset_s: i.ts_offset(),
                });
                Ok(None)
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(e)) => {
                let i = *self.interfaces.get(e.if_id as usize).ok_or_else(|| {
                    self.error(format!(
                        "a packet of interface {}, which was not described",
                        e.if_id
                    ))
                })?;
                let units = (e.ts_high as u128) << 32 | e.ts_low as u128;
                let ps =
                    (units * PS / i.per_second as u128) as i128 + i.offset_s as i128 * PS as i128;
                let data = &e.data[..(e.caplen as usize).min(e.data.len())];
                self.record(ps, i.framing, i.linktype, e.origlen, data)
                    .map(Some)
            }
            PcapBlockOwned::NG(Block::SimplePacket(s)) => {
                // No timestamp: it arrives with the previous record.
                let i = *self
                    .interfaces
                    .first()
                    .ok_or_else(|| self.error("a simple packet before any interface"))?;
                let ps = self.first_ps.unwrap_or(0) + self.last_ps as i128;
                self.record(ps, i.framing, i.linktype, s.origlen, s.data)
                    .map(Some)
            }
            // Statistics, name resolution, comments, ...
            PcapBlockOwned::NG(_) => Ok(None),
        }
    }

    /// A packet record's fields (before its time is placed on the replay's clock).
    fn record(
        &self,
        ps: i128,
        framing: Option<Framing>,
        linktype: i32,
        origlen: u32,
        data: &[u8],
    ) -> Result<Record, String> {
        let framing = framing.ok_or_else(|| {
            self.error(format!(
                "link type {linktype} is not supported (Ethernet 1, raw IP 101/228/229, Linux cooked 113/276)"
            ))
        })?;
        if origlen == 0 {
            return Err(self.error("a packet of 0 bytes"));
        }
        let (net, ports) = headers(framing, data);
        Ok(Record {
            ps,
            origlen,
            parsed: parsed(net, ports, None),
        })
    }

    /// Places a record on the replay's clock and makes its packet.
    fn packet(&mut self, r: Record) -> Result<(u64, Packet), String> {
        let first = *self.first_ps.get_or_insert(r.ps);
        let rel = r.ps - first;
        let t = if rel < self.last_ps as i128 {
            self.reordered += 1;
            self.last_ps
        } else if rel > LAST_ARRIVAL_PS as i128 {
            return Err(self.error(format!(
                "{rel} ps after the first record, past the last arrival weft schedules (2^63 ps, about 106.7 days)"
            )));
        } else {
            rel as u64
        };
        self.last_ps = t;
        let mut p = Packet::new(self.records, r.origlen, r.parsed.meta);
        p.flow = r.parsed.flow;
        self.records += 1;
        Ok((t, p))
    }
}

/// A packet record read from a block.
struct Record {
    /// Absolute time, picoseconds (wall clock: may exceed 64 bits).
    ps: i128,
    origlen: u32,
    parsed: weft_nic::parse::Parsed,
}

/// The IP and transport fields of a captured frame, as far as its bytes go.
fn headers(framing: Framing, data: &[u8]) -> (Option<Net>, Option<(u16, u16)>) {
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
        Framing::Sll | Framing::Sll2 => None,
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
    fn fields_match_the_software_nic_less_the_tenant() {
        let frame = udp(4242, 11211, 64);
        let (net, ports) = headers(Framing::Ethernet, &frame);
        let ours = parsed(net, ports, None);
        let nic = weft_nic::parse::parse(&frame, 3).unwrap();
        let expected: PacketMeta =
            "sport=4242,dport=11211,proto=udp,dscp=0,src=10.0.0.1,dst=10.0.2.9"
                .parse()
                .unwrap();
        assert_eq!(ours.meta, expected);
        assert_eq!(nic.meta.dport, ours.meta.dport);
        assert_ne!(ours.flow, 0);
    }

    #[test]
    fn magic_numbers() {
        for m in [
            [0xd4, 0xc3, 0xb2, 0xa1],
            [0xa1, 0xb2, 0x3c, 0x4d],
            [0x0a, 0x0d, 0x0d, 0x0a],
        ] {
            assert!(is_capture(&m));
        }
        assert!(!is_capture(b"arrive_ps,bytes\n"));
        assert!(!is_capture(b"ab"));
    }
}
