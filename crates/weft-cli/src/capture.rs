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
//!   leaves only the fields it holds. Non-IP frames (ARP) carry no header fields and are
//!   classified as such (usually to the policy's catch-all, else dropped as unclassified).
//! * **Tenants**: a frame holds no tenant, VM or tag. As in `weft run`, where the tenant is
//!   the ingress interface's position in the `--tenant NAME=IFACE` list, a capture's records
//!   take the tenant (as `tenant` and `vm`, and in the flow key, as the software NIC sets
//!   them) of the interface they were captured on: a pcapng interface whose `if_name` is
//!   IFACE, or else whose number in its section is IFACE (a legacy pcap is interface 0).
//!   Records of other interfaces carry no tenant; without the list, none does, and a policy
//!   matches on addresses, ports, protocol or DSCP. The summary lists every interface with
//!   its records and tenant.
//! * **Link types**: Ethernet, raw IP (101, 228, 229), Linux cooked captures (SLL and
//!   SLL2, as `tcpdump -i any` writes) and BSD loopback (0 and 108, as `tcpdump -i lo0`
//!   writes on macOS and the BSDs: a 4-byte address family, then the IP packet). Others are
//!   refused with their number. A legacy pcap's link type is the low 16 bits of its header's
//!   field (the upper bits say whether frames end in a frame check sequence).
//! * **Order**: a capture of several interfaces is not in time order: `dumpcap -i a -i b`
//!   writes each interface's packets in runs, and one interface's records step back tens of
//!   milliseconds (thousands of records) behind the other's. Records pass through a reorder
//!   window (a min-heap by time of the last `--reorder-window` records, 65,536 by default),
//!   which replays them in time order when none is displaced further than the window; the
//!   summary counts them (`capture_out_of_order`). A record displaced further is replayed at
//!   the latest time seen so far (the replay needs times in order) and counted
//!   (`capture_reordered`), not lost. Each packet's id is its record's position in the file.
//!
//! * **Limits**: what a capture holds does not set what reading it costs. A block (a pcapng
//!   block, or a legacy pcap record with its 16-byte header) is read whole into a buffer of
//!   1 MiB that grows to hold it as its bytes arrive (a file cut inside a block that claims
//!   more costs no more than its bytes), up to [`MAX_BLOCK_BYTES`] (64 MiB): a block whose
//!   length field says more is refused at once, and one whose fields do not fit its length
//!   (less than 12 bytes: `pcap-parser` 0.17 panics on a process information block of 4; or
//!   a captured length past its end) is refused as malformed, not taken for a capture cut
//!   short. A capture describes at most `--max-interfaces` interfaces (all its pcapng
//!   sections together, so any one section too; [`DEFAULT_MAX_INTERFACES`], 4,096, by
//!   default): each costs memory (about 300 bytes) and a line of the summary, and a 20 MB
//!   capture of a million interface descriptions took 3.1 GB and wrote a 186 MB summary
//!   without the limit. An interface's name is kept to [`MAX_INTERFACE_NAME_BYTES`]
//!   (tenants are matched on the whole name), and the summary lists at most
//!   [`LISTED_INTERFACES`] interfaces ([`listed`]), counting the rest.
//!
//! Errors name the file and the record (`c.pcap: record 12: ...`), or for a block that cannot
//! be read, the block and its byte offset in the file (`c.pcapng: block 7 at byte 1024:
//! ...`) with at most its first [`QUOTED_BYTES`] bytes in hex: never the parser's buffer,
//! which `pcap-parser`'s errors carry whole (a block of length 0 printed 3.1 MB). Cost: one
//! header parse per record (tens of nanoseconds) and a heap push and pop (log2 of the
//! window: 16 steps); memory: the window's records, 112 bytes each (7 MiB for 65,536), the
//! buffer, and the interfaces.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io::Read;

use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket};
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{Block, Linktype, PcapBlockOwned, PcapError};
use weft_core::sched::{Packet, LAST_ARRIVAL_PS};
use weft_nic::parse::{parsed, ports, Net};

/// Reader buffer, bytes (grown when a block is larger, to hold at most [`MAX_BLOCK_BYTES`],
/// as the block's bytes arrive).
const BUFFER: usize = 1 << 20;

/// The largest block read, bytes (64 MiB): a pcapng block's total length, or a legacy pcap
/// record's 16-byte header and captured bytes. A jumbo frame is 9 KiB, a TSO segment 64 KiB.
pub const MAX_BLOCK_BYTES: usize = 64 << 20;

/// Interfaces a capture may describe by default, all its sections together
/// (`--max-interfaces`), interfaces.
pub const DEFAULT_MAX_INTERFACES: usize = 4096;

/// The most `--max-interfaces` may allow, interfaces (about 300 MB of memory).
pub const MAX_INTERFACES_CAP: usize = 1 << 20;

/// The longest interface name kept, bytes: a longer `if_name` is cut (at a character) and
/// ends in `…` wherever it is shown. (Linux names are at most 15 bytes, Windows' NPF device
/// names about 50.)
pub const MAX_INTERFACE_NAME_BYTES: usize = 128;

/// The most interfaces a replay's summary lists (`summary.json`, its table, `index.html`),
/// interfaces: see [`listed`].
pub const LISTED_INTERFACES: usize = 64;

/// Bytes of a block an error quotes (in hex), at most.
pub const QUOTED_BYTES: usize = 64;

/// Picoseconds per second.
const PS: u128 = 1_000_000_000_000;

/// A reader whose every `read` fills the buffer unless the input ends: `pcap-parser` tells
/// the format from its reader's first `read`, which a pipe (or the replay's first bytes, read
/// ahead to tell a capture from a CSV trace) may return short.
struct Filled<R>(R);

impl<R: Read> Read for Filled<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.0.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // What was read first; the error comes again at the next call.
                Err(_) if n > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}

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

/// What `pcap-parser` says went wrong, without the input it carries: its parse errors hold
/// the rest of the reader's buffer (up to [`MAX_BLOCK_BYTES`]), which its `Display` and
/// `Debug` print whole, as numbers.
fn parser_error<I>(e: &PcapError<I>) -> String {
    match e {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("parser error {kind:?}")
        }
        PcapError::Eof => "end of file".into(),
        PcapError::BufferTooSmall => "buffer too small".into(),
        PcapError::UnexpectedEof => "unexpected end of file".into(),
        PcapError::ReadError => "read error".into(),
        PcapError::Incomplete(n) => format!("incomplete read ({n} bytes more)"),
        PcapError::HeaderNotRecognized => "header not recognized as pcap or pcapng".into(),
    }
}

/// At most the first [`QUOTED_BYTES`] of `data` in hex (`0a 0d 0d 0a ...`), with `…` when
/// there are more.
fn hex_excerpt(data: &[u8]) -> String {
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

/// An interface name as kept: at most [`MAX_INTERFACE_NAME_BYTES`] of it (cut at a
/// character), then `…` if it was longer.
fn kept_name(name: &str) -> String {
    if name.len() <= MAX_INTERFACE_NAME_BYTES {
        return name.to_string();
    }
    let mut end = MAX_INTERFACE_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

/// What a summary leaves out of a capture's interfaces ([`listed`]): how many, and their
/// records and skipped records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unlisted {
    pub interfaces: u64,
    pub records: u64,
    pub skipped: u64,
}

/// The interfaces a summary lists, in the capture's order: all of them up to
/// [`LISTED_INTERFACES`], else that many chosen: those with a tenant first, then those with
/// the most records (ties: the first in the capture). And what the rest add up to.
pub fn listed(all: &[InterfaceSeen]) -> (Vec<&InterfaceSeen>, Unlisted) {
    let mut chosen: Vec<(usize, &InterfaceSeen)> = all.iter().enumerate().collect();
    if chosen.len() > LISTED_INTERFACES {
        chosen.sort_by_key(|&(k, i)| (i.tenant.is_none(), std::cmp::Reverse(i.records), k));
        chosen.truncate(LISTED_INTERFACES);
        chosen.sort_by_key(|&(k, _)| k);
    }
    let total = |f: fn(&InterfaceSeen) -> u64| -> u64 {
        all.iter().map(f).sum::<u64>() - chosen.iter().map(|(_, i)| f(i)).sum::<u64>()
    };
    let unlisted = Unlisted {
        interfaces: (all.len() - chosen.len()) as u64,
        records: total(|i| i.records),
        skipped: total(|i| i.skipped),
    };
    (chosen.into_iter().map(|(_, i)| i).collect(), unlisted)
}

/// How a link type's frames are sliced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
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

fn framing(l: Linktype) -> Option<Framing> {
    match l {
        Linktype::ETHERNET => Some(Framing::Ethernet),
        Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => Some(Framing::Ip),
        Linktype::LINUX_SLL => Some(Framing::Sll),
        Linktype::LINUX_SLL2 => Some(Framing::Sll2),
        Linktype::NULL | Linktype::LOOP => Some(Framing::Loopback),
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
    /// Its tenant id (`--tenant`, 1-based), if listed.
    tenant: Option<u32>,
    /// Its entry in [`State::seen`].
    seen: usize,
}

/// An interface of the capture, as the summary lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceSeen {
    /// pcapng section, from 0 (a legacy pcap has one).
    pub section: u32,
    /// Its number in its section (a legacy pcap's is 0).
    pub index: u32,
    /// `if_name`, if the capture gives one (cut to [`MAX_INTERFACE_NAME_BYTES`]).
    pub name: Option<String>,
    pub linktype: i32,
    /// Packet records captured on it.
    pub records: u64,
    /// Of them, records skipped: the interface's link type is one weft does not read (a
    /// pcapng interface beside others; a legacy pcap's only link type is an error instead).
    pub skipped: u64,
    /// Its tenant id (the position in the `--tenant` list, 1-based), if listed.
    pub tenant: Option<u32>,
}

/// Which tenant `--tenant NAME=IFACE` pairs give an interface: the first pair whose IFACE is
/// its name, else the first whose IFACE is its number.
fn tenant_of(tenants: &[(String, String)], name: Option<&str>, index: u32) -> Option<u32> {
    let by = |want: &str| {
        tenants
            .iter()
            .position(|(_, iface)| iface == want)
            .map(|k| k as u32 + 1)
    };
    name.and_then(by).or_else(|| by(&index.to_string()))
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
    /// `--tenant` pairs (NAME, IFACE); a tenant's id is its position, 1-based.
    tenants: Vec<(String, String)>,
    /// Legacy pcap: the file's interface (its timestamp units per second stand for
    /// `per_second`; no offset).
    legacy: Option<Interface>,
    /// pcapng: the current section's interfaces, by id.
    interfaces: Vec<Interface>,
    /// Every interface described so far, in order.
    seen: Vec<InterfaceSeen>,
    /// pcapng sections begun (0 for a legacy pcap).
    sections: u32,
    /// Records read, not yet replayed, earliest first (the reorder window).
    pending: BinaryHeap<Reverse<Record>>,
    /// Records the window holds before it replays the earliest (1: none held).
    window: usize,
    /// The reader reached the end of the file.
    eof: bool,
    /// The latest absolute time read, picoseconds.
    latest_read_ps: Option<i128>,
    /// The first replayed record's absolute time, picoseconds, and its index (the replay's time 0).
    first_ps: Option<(i128, u64)>,
    /// The latest time replayed, picoseconds from the first replayed record.
    last_ps: u64,
    /// Records read so far (the next record's id).
    records: u64,
    /// Records earlier than one before them in the file.
    out_of_order: u64,
    /// Records replayed later than their timestamp (see the module doc).
    reordered: u64,
    /// The file ended inside this record (0-based; see [`Capture::truncated_at`]).
    truncated_at: Option<u64>,
    /// Bytes of the file consumed (for progress; while a block is read, its byte offset).
    consumed: u64,
    /// Blocks read whole (a legacy pcap's header and records, or pcapng blocks).
    blocks: u64,
    /// The current section's (or legacy pcap's) byte order.
    big_endian: bool,
    /// The most interfaces the capture may describe (`--max-interfaces`).
    max_interfaces: usize,
    /// The capture is a pcapng file (else a legacy pcap).
    ng: bool,
    /// A legacy pcap record's header, bytes (16; 24 in the "modified" format).
    record_header: u64,
}

impl Capture {
    /// Reads the capture `name` from `input` (a pcap or pcapng file, from its first byte: a
    /// pipe will do); `tenants` are `--tenant` pairs (NAME, IFACE); `window` is the reorder
    /// window in records (at least 1: see the module doc); `max_interfaces` the most
    /// interfaces it may describe (`--max-interfaces`, at least 1).
    pub fn open(
        name: String,
        input: impl Read + Send + 'static,
        tenants: &[(String, String)],
        window: usize,
        max_interfaces: usize,
    ) -> Result<Capture, String> {
        let reader = pcap_parser::create_reader(BUFFER, Filled(input)).map_err(|e| match e {
            PcapError::Incomplete(_) => format!(
                "{name}: the file ends inside its capture header (a pcap or pcapng file cut \
                 short)"
            ),
            e => format!(
                "{name}: not a pcap or pcapng capture ({})",
                parser_error(&e)
            ),
        })?;
        let ng = reader.data().starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]);
        Ok(Capture {
            reader,
            buffer: BUFFER,
            state: State {
                name,
                tenants: tenants.to_vec(),
                legacy: None,
                interfaces: Vec::new(),
                seen: Vec::new(),
                sections: 0,
                pending: BinaryHeap::new(),
                window: window.max(1),
                eof: false,
                latest_read_ps: None,
                first_ps: None,
                last_ps: 0,
                records: 0,
                out_of_order: 0,
                reordered: 0,
                truncated_at: None,
                consumed: 0,
                blocks: 0,
                big_endian: false,
                max_interfaces: max_interfaces.max(1),
                ng,
                record_header: 16,
            },
        })
    }

    /// Bytes of the file read so far.
    pub fn position(&self) -> u64 {
        self.state.consumed
    }

    /// Records replayed later than their timestamp: displaced further than the window.
    pub fn reordered(&self) -> u64 {
        self.state.reordered
    }

    /// The record (1-based) inside which the file ended, if it did: the records before it
    /// were replayed (a capture still being written, or cut short).
    pub fn truncated_at(&self) -> Option<u64> {
        self.state.truncated_at.map(|r| r + 1)
    }

    /// Records earlier than one before them in the file (sorted by the window, unless
    /// counted in [`Capture::reordered`] too).
    pub fn out_of_order(&self) -> u64 {
        self.state.out_of_order
    }

    /// The interfaces described so far, with their records and tenants.
    pub fn interfaces(&self) -> &[InterfaceSeen] {
        &self.state.seen
    }

    /// The next packet and its arrival time (picoseconds from the first record), `None` at
    /// the end, or the error that stops the replay.
    pub fn next_packet(&mut self) -> Option<Result<(u64, Packet), String>> {
        let st = &mut self.state;
        loop {
            if st.pending.len() >= st.window || st.eof {
                let Reverse(r) = st.pending.pop()?;
                return Some(st.place(r));
            }
            // A pcapng block shorter than its type and two length fields: `pcap-parser` 0.17
            // checks each block type against its own header size, 4 bytes for a process
            // information block, then takes 12 from the length (a panic on overflow).
            let data = self.reader.data();
            if st.ng && st.block_length(data).is_some_and(|n| n < 12) {
                let what = st.malformed(data, None);
                return Some(Err(st.block_error(what)));
            }
            // What the parser wants past the bytes a block claims: its fields run past its
            // end (an enhanced packet's captured length, say). Reading on would not help.
            let overrun = |st: &State, data: &[u8]| {
                let claimed = st.block_length(data)?;
                (claimed <= data.len() as u64).then(|| {
                    let what = st.malformed(data, Some("its fields run past its total length"));
                    st.block_error(what)
                })
            };
            let (offset, record) = match self.reader.next() {
                Ok((offset, block)) => (offset, st.block(block)),
                Err(PcapError::Eof) => {
                    st.eof = true;
                    continue;
                }
                Err(PcapError::Incomplete(_)) => {
                    if let Some(e) = overrun(st, self.reader.data()) {
                        return Some(Err(e));
                    }
                    if let Err(e) = self.reader.refill() {
                        let e = parser_error(&e);
                        return Some(Err(st.error(format!("cannot read on: {e}"))));
                    }
                    continue;
                }
                Err(PcapError::BufferTooSmall) => {
                    // A block larger than the buffer. One whose length field is past the
                    // bound is refused at once; else the buffer is filled before it grows
                    // (so a short file claiming a large block costs no more than its bytes),
                    // then doubled, up to the block's length and a byte (as the reader
                    // wants).
                    if let Some(e) = overrun(st, self.reader.data()) {
                        return Some(Err(e));
                    }
                    let claimed = st.block_length(self.reader.data());
                    let limit = MAX_BLOCK_BYTES as u64;
                    if claimed.is_some_and(|n| n > limit) || self.buffer > MAX_BLOCK_BYTES {
                        let (unit, by) = match st.legacy {
                            Some(_) => ("record", "its header and captured length"),
                            None => ("block", "its length field"),
                        };
                        let size =
                            claimed.map_or(String::new(), |n| format!(" of {n} bytes by {by}"));
                        return Some(Err(st.block_error(format!(
                            "a {unit}{size}, larger than the largest block weft reads, \
                             {limit} bytes (64 MiB)"
                        ))));
                    }
                    if self.reader.data().len() < self.buffer && !self.reader.reader_exhausted() {
                        if let Err(e) = self.reader.refill() {
                            let e = parser_error(&e);
                            return Some(Err(st.error(format!("cannot read on: {e}"))));
                        }
                        continue;
                    }
                    let most = claimed.map_or(MAX_BLOCK_BYTES, |n| n as usize) + 1;
                    let want = (self.buffer * 2).min(most).max(self.buffer + 1);
                    if !self.reader.grow(want) {
                        return Some(Err(st.block_error(format!(
                            "a block larger than the {} bytes read so far cannot be read",
                            self.buffer
                        ))));
                    }
                    self.buffer = want;
                    continue;
                }
                Err(PcapError::UnexpectedEof) => {
                    // The file ends, but the block is all there: it is malformed, not cut.
                    if let Some(e) = overrun(st, self.reader.data()) {
                        return Some(Err(e));
                    }
                    // A capture still being written, or cut short: replay what it holds.
                    st.truncated_at = Some(st.records);
                    st.eof = true;
                    continue;
                }
                Err(e) => {
                    let why = parser_error(&e);
                    let what = st.malformed(self.reader.data(), Some(&why));
                    return Some(Err(st.block_error(what)));
                }
            };
            self.reader.consume(offset);
            st.consumed += offset as u64;
            st.blocks += 1;
            match record {
                Ok(Some(r)) => st.pending.push(Reverse(r)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl State {
    /// An error at the record being read.
    fn error(&self, what: impl std::fmt::Display) -> String {
        self.error_at(self.records, what)
    }

    /// An error at record `id` (0-based; named 1-based).
    fn error_at(&self, id: u64, what: impl std::fmt::Display) -> String {
        format!("{}: record {}: {what}", self.name, id + 1)
    }

    /// An error at the block being read, with its byte offset in the file: a legacy pcap's
    /// record, or a pcapng block (numbered from 1, the section header included).
    fn block_error(&self, what: impl std::fmt::Display) -> String {
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
    fn block_length(&self, data: &[u8]) -> Option<u64> {
        if self.legacy.is_some() {
            return Some(self.record_header + Self::u32_at(data, 8, self.big_endian)? as u64);
        }
        Some(Self::u32_at(data, 4, self.order_of(data))? as u64)
    }

    /// What is wrong with the block at the start of `data`: its type and length fields
    /// (pcapng), `why` (the parser's word, if it has one) and its first bytes.
    fn malformed(&self, data: &[u8], why: Option<&str>) -> String {
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
    fn block(&mut self, block: PcapBlockOwned) -> Result<Option<Record>, String> {
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

    /// Places a record leaving the window on the replay's clock and makes its packet.
    fn place(&mut self, r: Record) -> Result<(u64, Packet), String> {
        let rel = if r.timed {
            r.ps - self.first_ps.get_or_insert((r.ps, r.id)).0
        } else {
            // No timestamp: with the latest record replayed.
            self.last_ps as i128
        };
        let t = if rel < self.last_ps as i128 {
            self.reordered += 1;
            self.last_ps
        } else if rel > LAST_ARRIVAL_PS as i128 {
            // The clock starts at the earliest record of the first window, which may be
            // the odd one out (a timestamp far before the rest): name it.
            let origin = self.first_ps.map_or(0, |f| f.1) + 1;
            return Err(self.error_at(
                r.id,
                format!(
                    "{rel} ps after record {origin} (the replay's time 0, the earliest of the \
                 first {} records), past the last arrival weft schedules (2^63 ps, about 106.7 \
                 days); if record {origin}'s timestamp is the odd one, a smaller \
                 --reorder-window replays it late instead",
                    self.window
                ),
            ));
        } else {
            rel as u64
        };
        self.last_ps = t;
        let mut p = Packet::new(r.id, r.origlen, r.parsed.meta);
        p.flow = r.parsed.flow;
        Ok((t, p))
    }
}

/// A packet record read from a block.
struct Record {
    /// Absolute time, picoseconds (wall clock: may exceed 64 bits).
    ps: i128,
    /// Whether the record has a time of its own (a simple packet block has none).
    timed: bool,
    /// Its position in the file, from 0 (the packet's id).
    id: u64,
    origlen: u32,
    parsed: weft_nic::parse::Parsed,
}

/// Records in the window: by time, then by position in the file.
impl Ord for Record {
    fn cmp(&self, other: &Record) -> Ordering {
        (self.ps, self.id).cmp(&(other.ps, other.id))
    }
}

impl PartialOrd for Record {
    fn partial_cmp(&self, other: &Record) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Record) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Record {}

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

    /// The reorder window's memory, as the module doc and `--help` give it.
    #[test]
    fn a_record_in_the_window_takes_112_bytes() {
        assert_eq!(std::mem::size_of::<Record>(), 112);
    }

    #[test]
    fn tenants_by_interface_name_then_number() {
        let t = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let list = t(&[("a", "veth1"), ("b", "1"), ("c", "0")]);
        assert_eq!(tenant_of(&list, Some("veth1"), 5), Some(1));
        // Named `1` or numbered 1: tenant 2; a name not listed falls back to the number.
        assert_eq!(tenant_of(&list, Some("1"), 0), Some(2));
        assert_eq!(tenant_of(&list, Some("eth0"), 1), Some(2));
        assert_eq!(tenant_of(&list, None, 0), Some(3));
        assert_eq!(tenant_of(&list, Some("eth0"), 7), None);
        assert_eq!(tenant_of(&[], None, 0), None);
    }

    /// The summary's interfaces: every one up to 64; past that, those with a tenant, then
    /// the busiest, in the capture's order, and the rest added up.
    #[test]
    fn listed_interfaces_are_bounded_and_the_rest_counted() {
        let iface = |k: u32, records: u64, tenant: Option<u32>| InterfaceSeen {
            section: 0,
            index: k,
            name: None,
            linktype: 1,
            records,
            skipped: records / 2,
            tenant,
        };
        let few: Vec<InterfaceSeen> = (0..10).map(|k| iface(k, 0, None)).collect();
        let (shown, rest) = listed(&few);
        assert_eq!(shown.len(), 10);
        assert_eq!(rest, Unlisted::default());
        // 1,000 interfaces, k with k records; interface 3 has a tenant.
        let many: Vec<InterfaceSeen> = (0..1000)
            .map(|k| iface(k, k as u64, (k == 3).then_some(1)))
            .collect();
        let (shown, rest) = listed(&many);
        let ids: Vec<u32> = shown.iter().map(|i| i.index).collect();
        let mut expected = vec![3];
        expected.extend(937..1000);
        assert_eq!(ids, expected);
        assert_eq!(rest.interfaces, 1000 - 64);
        let total: u64 = (0..1000).sum();
        let records: u64 = expected.iter().map(|&k| k as u64).sum();
        assert_eq!(rest.records, total - records);
        let skipped: u64 = many.iter().map(|i| i.skipped).sum::<u64>()
            - shown.iter().map(|i| i.skipped).sum::<u64>();
        assert_eq!(rest.skipped, skipped);
    }

    /// A long name is cut at a character; an error quotes 64 bytes of a block at most.
    #[test]
    fn names_and_excerpts_are_bounded() {
        assert_eq!(kept_name("eth0"), "eth0");
        let cut = kept_name(&"é".repeat(100));
        assert!(cut.ends_with('…'));
        assert_eq!(cut.len(), 128 + '…'.len_utf8());
        let cut = kept_name(&format!("a{}", "é".repeat(100)));
        assert_eq!(cut.len(), 127 + '…'.len_utf8());
        assert_eq!(hex_excerpt(&[0x0a, 0xff]), "0a ff");
        let long = hex_excerpt(&[7; 1 << 20]);
        assert_eq!(long.len(), 64 * 3 - 1 + " …".len());
        assert!(long.starts_with("07 07") && long.ends_with(" …"));
        // The parser's error carries its input; the message does not.
        let e = PcapError::NomError(&[1u8; 1000][..], nom_kind());
        assert!(parser_error(&e).len() < 40, "{}", parser_error(&e));
    }

    /// A parse error kind, as `pcap-parser`'s errors carry it.
    fn nom_kind() -> pcap_parser::nom::error::ErrorKind {
        pcap_parser::nom::error::ErrorKind::Verify
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
