//! What a capture's blocks mean: the reader's [`State`] (its interfaces, sections, byte
//! order, clock and counts), each block read into interfaces and packet records
//! ([`State::block`]), and the errors that name a record or a block with its byte offset
//! and at most [`QUOTED_BYTES`] of its bytes.
//!
//! Invariants: a record's id is its position in the file (skipped records keep their
//! numbers); a block's length is checked against its fields before the parser takes it
//! (see [`super::Capture::next_packet`]); no error quotes more than [`QUOTED_BYTES`] bytes.
//! Cost: per block, one match on its type; per packet record, one header parse
//! ([`headers`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::{Block, Linktype, PcapBlockOwned};
use weft_nic::parse::parsed;

use super::frames::{framing, headers, LINK_TYPES};
use super::interfaces::{kept_name, tenant_of, Interface, InterfaceSeen};
use super::window::Record;
use super::{DEFAULT_MAX_INTERFACES, PS, QUOTED_BYTES};

/// A pcapng interface's timestamp units per second from its `if_tsresol` byte: 10^r, or with
/// the top bit set 2^(r & 0x7f); `None` past 64 bits. (`pcap-parser` 0.17 refuses every
/// power of two.)
fn units_per_second(tsresol: u8) -> Option<u64> {
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(tsresol as u32)
    } else {
        1u64.checked_shl((tsresol & 0x7f) as u32)
    }
}

/// At most the first [`QUOTED_BYTES`] of `data` in hex (`0a 0d 0d 0a ...`), with `…` when
/// there are more.
pub(super) fn hex_excerpt(data: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(3 * QUOTED_BYTES + 4);
    for (k, b) in data.iter().take(QUOTED_BYTES).enumerate() {
        let _ = write!(s, "{}{b:02x}", if k > 0 { " " } else { "" });
    }
    if data.len() > QUOTED_BYTES {
        s.push_str(" …");
    }
    s
}

/// What a capture's reader has learnt (apart from the reader, which lends its blocks).
pub(super) struct State {
    pub(super) name: String,
    /// `--tenant` pairs (NAME, IFACE); a tenant's id is its position, 1-based.
    pub(super) tenants: Vec<(String, String)>,
    /// Legacy pcap: the file's interface (its timestamp units per second stand for
    /// `per_second`; no offset).
    pub(super) legacy: Option<Interface>,
    /// pcapng: the current section's interfaces, by id.
    pub(super) interfaces: Vec<Interface>,
    /// Every interface described so far, in order.
    pub(super) seen: Vec<InterfaceSeen>,
    /// pcapng sections begun (0 for a legacy pcap).
    pub(super) sections: u32,
    /// Records read, not yet replayed, earliest first (the reorder window).
    pub(super) pending: BinaryHeap<Reverse<Record>>,
    /// Records the window holds before it replays the earliest (1: none held).
    pub(super) window: usize,
    /// The reader reached the end of the file.
    pub(super) eof: bool,
    /// The latest absolute time read, picoseconds.
    pub(super) latest_read_ps: Option<i128>,
    /// The first replayed record's absolute time, picoseconds, and its index (the replay's time 0).
    pub(super) first_ps: Option<(i128, u64)>,
    /// The latest time replayed, picoseconds from the first replayed record.
    pub(super) last_ps: u64,
    /// Records read so far (the next record's id).
    pub(super) records: u64,
    /// Records earlier than one before them in the file.
    pub(super) out_of_order: u64,
    /// Records replayed later than their timestamp (see the module doc).
    pub(super) reordered: u64,
    /// The file ended inside this record (0-based; see [`Capture::truncated_at`](super::Capture::truncated_at)).
    pub(super) truncated_at: Option<u64>,
    /// Bytes of the file consumed (for progress; while a block is read, its byte offset).
    pub(super) consumed: u64,
    /// Blocks read whole (a legacy pcap's header and records, or pcapng blocks).
    pub(super) blocks: u64,
    /// The current section's (or legacy pcap's) byte order.
    pub(super) big_endian: bool,
    /// The most interfaces the capture may describe (`--max-interfaces`).
    pub(super) max_interfaces: usize,
    /// The capture is a pcapng file (else a legacy pcap).
    pub(super) ng: bool,
    /// A legacy pcap record's header, bytes (16; 24 in the "modified" format).
    pub(super) record_header: u64,
}

impl State {
    /// An error at the record being read.
    pub(super) fn error(&self, what: impl std::fmt::Display) -> String {
        self.error_at(self.records, what)
    }

    /// An error at record `id` (0-based; named 1-based).
    pub(super) fn error_at(&self, id: u64, what: impl std::fmt::Display) -> String {
        format!("{}: record {}: {what}", self.name, id + 1)
    }

    /// An error at the block being read, with its byte offset in the file: a legacy pcap's
    /// record, or a pcapng block (numbered from 1, the section header included).
    pub(super) fn block_error(&self, what: impl std::fmt::Display) -> String {
        let (kind, n) = match self.legacy {
            Some(_) => ("record", self.records + 1),
            None => ("block", self.blocks + 1),
        };
        format!(
            "{}: {kind} {n} at byte {}: {what}",
            self.name, self.consumed
        )
    }

    /// The 32-bit number at byte `at` of `data`, in byte order `big` (`None` past its end).
    fn u32_at(data: &[u8], at: usize, big: bool) -> Option<u32> {
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    /// The byte order of the pcapng block at the start of `data`: a section header's own
    /// (its byte-order magic follows its length), else the current section's.
    fn order_of(&self, data: &[u8]) -> bool {
        match data.get(..4) {
            Some([0x0a, 0x0d, 0x0d, 0x0a]) => data.get(8..12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d]),
            _ => self.big_endian,
        }
    }

    /// The length in bytes the block at the start of `data` claims: a pcapng block's total
    /// length field, or a legacy pcap record's captured length and its header.
    pub(super) fn block_length(&self, data: &[u8]) -> Option<u64> {
        if self.legacy.is_some() {
            return Some(self.record_header + Self::u32_at(data, 8, self.big_endian)? as u64);
        }
        Some(Self::u32_at(data, 4, self.order_of(data))? as u64)
    }

    /// What is wrong with the block at the start of `data`: its type and length fields
    /// (pcapng), `why` (the parser's word, if it has one) and its first bytes.
    pub(super) fn malformed(&self, data: &[u8], why: Option<&str>) -> String {
        let fields = match self.block_length(data).filter(|_| self.ng) {
            Some(len) => {
                let kind = Self::u32_at(data, 0, self.order_of(data)).unwrap_or(0);
                let hint = if len < 12 {
                    ", less than a block's 12 bytes"
                } else if len % 4 != 0 {
                    ", not a multiple of 4"
                } else {
                    ""
                };
                format!(": block type 0x{kind:08x} with total length {len}{hint}")
            }
            None => String::new(),
        };
        let why = why.map_or(String::new(), |w| format!(" ({w})"));
        format!("malformed{fields}{why}; it begins {}", hex_excerpt(data))
    }

    /// A block's packet, if it is one: (absolute time in ps, framing, link type, origlen, the
    /// captured bytes' classifier fields); headers and interfaces are recorded.
    pub(super) fn block(&mut self, block: PcapBlockOwned) -> Result<Option<Record>, String> {
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                let per_second = if h.is_nanosecond_precision() {
                    1_000_000_000
                } else {
                    1_000_000
                };
                // The link type is the field's low 16 bits; the upper ones tell whether
                // frames carry a frame check sequence (which the lax slicer ignores).
                let linktype = Linktype(h.network.0 & 0xffff);
                self.big_endian = h.is_bigendian();
                self.record_header = if h.is_modified_format() { 24 } else { 16 };
                self.legacy = Some(self.describe(linktype, per_second, 0, None));
                Ok(None)
            }
            PcapBlockOwned::Legacy(b) => {
                let i = self
                    .legacy
                    .ok_or_else(|| self.error("a record before the file header"))?;
                let ps = b.ts_sec as i128 * PS as i128
                    + b.ts_usec as i128 * (PS / i.per_second as u128) as i128;
                self.record(Some(ps), i, b.origlen, b.data)
            }
            PcapBlockOwned::NG(Block::SectionHeader(shb)) => {
                // Interface ids restart with every section.
                self.interfaces.clear();
                self.sections += 1;
                self.big_endian = shb.big_endian();
                Ok(None)
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(_))
                if self.seen.len() >= self.max_interfaces =>
            {
                let max = self.max_interfaces;
                Err(self.block_error(format!(
                    "interface {} of section {}: the capture describes more than {max} \
                     interface{}, the most weft reads (its sections together); \
                     --max-interfaces N raises the limit (default {DEFAULT_MAX_INTERFACES})",
                    self.interfaces.len(),
                    self.sections.saturating_sub(1),
                    if max == 1 { "" } else { "s" },
                )))
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                let per_second = units_per_second(i.if_tsresol).ok_or_else(|| {
                    self.error(format!(
                        "interface {}: timestamp resolution {} is out of range",
                        self.interfaces.len(),
                        i.if_tsresol
                    ))
                })?;
                let name = i.if_name().and_then(Result::ok);
                let iface = self.describe(i.linktype, per_second, i.ts_offset(), name);
                self.interfaces.push(iface);
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
                self.record(Some(ps), i, e.origlen, e.packet_data())
            }
            PcapBlockOwned::NG(Block::SimplePacket(s)) => {
                // No timestamp: it arrives with the record read before it.
                let i = *self
                    .interfaces
                    .first()
                    .ok_or_else(|| self.error("a simple packet before any interface"))?;
                self.record(None, i, s.origlen, s.packet_data())
            }
            // Statistics, name resolution, comments, ...
            PcapBlockOwned::NG(_) => Ok(None),
        }
    }

    /// The next interface of the current section (or the legacy pcap's), with its tenant,
    /// listed in [`State::seen`].
    fn describe(
        &mut self,
        linktype: Linktype,
        per_second: u64,
        offset_s: i64,
        name: Option<&str>,
    ) -> Interface {
        // A legacy pcap has no sections and one interface.
        let section = self.sections.saturating_sub(1);
        let index = self.interfaces.len() as u32;
        // The whole name is matched; a long one is kept cut.
        let tenant = tenant_of(&self.tenants, name, index);
        self.seen.push(InterfaceSeen {
            section,
            index,
            name: name.map(kept_name),
            linktype: linktype.0,
            records: 0,
            skipped: 0,
            tenant,
        });
        Interface {
            framing: framing(linktype),
            linktype: linktype.0,
            per_second,
            offset_s,
            tenant,
            seen: self.seen.len() - 1,
        }
    }

    /// A packet record's fields (before its time is placed on the replay's clock); `ps` is
    /// its absolute time, `None` for a record without one.
    /// `None`: a record of a pcapng interface whose link type weft does not read, counted
    /// in its [`InterfaceSeen::skipped`] and replayed as nothing.
    fn record(
        &mut self,
        ps: Option<i128>,
        i: Interface,
        origlen: u32,
        data: &[u8],
    ) -> Result<Option<Record>, String> {
        let Some(framing) = i.framing else {
            if self.legacy.is_some() {
                return Err(self.error(format!(
                    "link type {} is not supported ({LINK_TYPES})",
                    i.linktype
                )));
            }
            let seen = &mut self.seen[i.seen];
            seen.records += 1;
            seen.skipped += 1;
            // Still a record of the file: later ones keep their numbers in messages.
            self.records += 1;
            return Ok(None);
        };
        if origlen == 0 {
            return Err(self.error("a packet of 0 bytes"));
        }
        self.seen[i.seen].records += 1;
        if let Some(t) = ps {
            if self.latest_read_ps.is_some_and(|l| t < l) {
                self.out_of_order += 1;
            }
            self.latest_read_ps = self.latest_read_ps.max(ps);
        }
        let (net, ports) = headers(framing, data);
        let id = self.records;
        self.records += 1;
        Ok(Some(Record {
            // An untimed record stays after those read before it.
            ps: ps.or(self.latest_read_ps).unwrap_or(i128::MIN),
            timed: ps.is_some(),
            id,
            origlen,
            parsed: parsed(net, ports, i.tenant),
        }))
    }
}
