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
//!
//! The files: this one reads the blocks ([`Capture::next_packet`]: the buffer, its growth
//! and its bounds, a file cut short); `blocks.rs` says what each block means (interfaces,
//! records, errors), `window.rs` holds the reorder window's records and places them on the
//! replay's clock, `frames.rs` slices a frame's headers by its link type, and
//! `interfaces.rs` keeps the interfaces as the summary lists them.

mod blocks;
mod frames;
mod interfaces;
mod window;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::PcapError;
use weft_core::sched::Packet;

use blocks::State;

pub use frames::LINK_TYPES;
pub use interfaces::{listed, InterfaceSeen, Unlisted};

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

/// A capture being read (see the module doc).
pub struct Capture {
    reader: Box<dyn PcapReaderIterator + Send>,
    /// The reader's buffer size, bytes.
    buffer: usize,
    state: State,
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

#[cfg(test)]
mod tests {
    use super::blocks::hex_excerpt;
    use super::interfaces::kept_name;
    use super::*;

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
