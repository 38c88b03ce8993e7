//! [`RowLimit`]: a reader that bounds the length of a CSV row before the csv reader has read
//! it whole.
//!
//! Invariants: it counts a row's bytes exactly as the csv reader splits records (quoted line
//! breaks and doubled quotes count, comment and blank lines do not) and refuses a row at its
//! start offset once more than its limit of its bytes have passed, so no record longer than
//! the limit reaches the reader. Cost: one state step per byte read, with shortcuts over runs
//! of plain bytes that count as every step would (the tests check both agree).

use std::io::Read;
use weft_core::policy::names::excerpt;

/// The longest row of a CSV trace read by default (`--max-trace-row-bytes`), bytes: a row of
/// every column is a few hundred bytes, so this leaves room for any padding, and a file that
/// is no trace (one line of megabytes) is refused before it fills memory.
pub const DEFAULT_MAX_ROW_BYTES: usize = 64 << 10;

/// The longest value of a CSV trace's cell (trimmed), bytes: the longest any column takes is
/// an IPv6 address, 45 characters.
pub const MAX_CELL_BYTES: usize = 256;

/// Bytes of a refused row kept for its error, which quotes the first 64 characters
/// ([`excerpt`]; one more byte tells it the row goes on).
const ROW_HEAD_BYTES: usize = 65;

/// Where csv-core's reader is in a record, with the settings weft gives it (`,` between
/// values, `"` quoting with `""` for a quote, `#` comment lines, `\r`, `\n` or `\r\n` line
/// ends): enough to tell where each record begins and ends, as it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between records: line ends, blank lines.
    Record,
    /// After a comma.
    Field,
    /// In an unquoted value (a quote in it is a character).
    Unquoted,
    /// In a quoted value (line ends included).
    Quoted,
    /// A quote in a quoted value: its end, or the first of a doubled one.
    QuoteInQuoted,
    /// In a comment line (which the reader skips without holding it).
    Comment,
}

/// A CSV trace's bytes on their way to the csv reader, which holds a whole record in memory
/// (a 50 MB cell took 50 MB before its error): the read fails once a record passes `max`
/// bytes, so the reader never holds more than that. A record's bytes are counted from its
/// first to its last (a quoted value's line ends included; the line end after it, blank
/// lines and comment lines not). Cost: about 0.1 ns a byte (see [`RowLimit::scan`]).
pub(super) struct RowLimit<R> {
    inner: R,
    /// The longest record, bytes.
    max: usize,
    lex: Lex,
    /// Bytes of the current record so far.
    len: usize,
    /// Bytes of the trace read so far (the offset of the next byte).
    offset: u64,
    /// The byte offset of the current record's first byte.
    start: u64,
    /// Its first [`ROW_HEAD_BYTES`], for the error.
    head: Vec<u8>,
    /// A record passed `max`: the reads fail from then on.
    exceeded: bool,
}

impl<R> RowLimit<R> {
    pub(super) fn new(inner: R, max: usize) -> RowLimit<R> {
        RowLimit {
            inner,
            max,
            lex: Lex::Record,
            len: 0,
            offset: 0,
            start: 0,
            head: Vec::with_capacity(ROW_HEAD_BYTES),
            exceeded: false,
        }
    }

    /// Takes byte `b`, at byte offset `at`; false once the record it is part of is longer
    /// than `max`.
    #[inline]
    fn step(&mut self, b: u8, at: u64) -> bool {
        use Lex::*;
        let next = match (self.lex, b) {
            (Comment, b'\n') => Record,
            (Comment, _) => Comment,
            (Record, b'\r' | b'\n') => Record,
            (Record, b'#') => Comment,
            (Quoted, b'"') => QuoteInQuoted,
            (Quoted, _) => Quoted,
            (Record | Field | QuoteInQuoted, b'"') => Quoted,
            (_, b',') => Field,
            (_, b'\r' | b'\n') => Record,
            _ => Unquoted,
        };
        if matches!(next, Record | Comment) {
            self.len = 0;
        } else {
            if self.lex == Record {
                // A record begins.
                self.start = at;
                self.head.clear();
            }
            self.len += 1;
            if self.head.len() < ROW_HEAD_BYTES {
                self.head.push(b);
            }
        }
        self.lex = next;
        self.len <= self.max
    }

    /// Takes the bytes of `buf` (the trace's from [`RowLimit::offset`] on); the position of
    /// a byte past the limit, if one is. In the common case (no quote in `buf`, outside a
    /// quoted value, and the record under way still within the limit with all of `buf`)
    /// every record ending in `buf` is within the limit, and after its last `\n` the reader
    /// is between records (a comment ends there too): only the bytes after it are taken, as
    /// [`RowLimit::scan_each`] takes them. Reading 2 M rows of 45 bytes through the csv
    /// reader took 60 ns a row; stepping through every byte added 145 (3.4 ns a byte), the
    /// shortcuts add 4.
    fn scan(&mut self, buf: &[u8]) -> Option<usize> {
        let quoted = matches!(self.lex, Lex::Quoted);
        if !quoted && self.len.saturating_add(buf.len()) <= self.max && !buf.contains(&b'"') {
            if let Some(last) = buf.iter().rposition(|&b| b == b'\n') {
                self.lex = Lex::Record;
                self.len = 0;
                let tail = last + 1;
                return self.scan_each(&buf[tail..], tail).map(|k| tail + k);
            }
        }
        self.scan_each(buf, 0)
    }

    /// [`RowLimit::scan`] of `buf`, at `skipped` bytes into what was read: the bytes inside
    /// a value or a comment in a tight loop, the others one [`RowLimit::step`] at a time.
    fn scan_each(&mut self, buf: &[u8], skipped: usize) -> Option<usize> {
        let base = self.offset + skipped as u64;
        let mut i = 0;
        while i < buf.len() {
            let rest = &buf[i..];
            let (k, counted) = match self.lex {
                // Commas only move between these two; what a quote does depends on the
                // byte before it (after a comma it opens a quoted value).
                Lex::Unquoted | Lex::Field => {
                    let k = find(rest, |b| matches!(b, b'"' | b'\r' | b'\n'));
                    if k > 0 {
                        self.lex = match rest[k - 1] {
                            b',' => Lex::Field,
                            _ => Lex::Unquoted,
                        };
                    }
                    (k, true)
                }
                Lex::Quoted => (find(rest, |b| b == b'"'), true),
                Lex::Comment => (find(rest, |b| b == b'\n'), false),
                Lex::Record | Lex::QuoteInQuoted => (0, false),
            };
            if counted && k > 0 {
                let room = ROW_HEAD_BYTES.saturating_sub(self.head.len()).min(k);
                self.head.extend_from_slice(&rest[..room]);
                self.len += k;
                if self.len > self.max {
                    return Some(i);
                }
            }
            i += k;
            if i < buf.len() {
                if !self.step(buf[i], base + i as u64) {
                    return Some(i);
                }
                i += 1;
            }
        }
        None
    }

    /// The record that passed the limit, if one did: the byte offset of its first byte and
    /// the error.
    pub(super) fn refusal(&self) -> Option<(u64, String)> {
        self.exceeded
            .then(|| (self.start, row_too_long(self.max, &self.head)))
    }
}

impl<R: Read> Read for RowLimit<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.exceeded {
            let n = self.inner.read(buf)?;
            let k = self.scan(&buf[..n]);
            self.offset += k.unwrap_or(n) as u64;
            match k {
                None => return Ok(n),
                Some(k) => {
                    self.exceeded = true;
                    // The rows before it are read first, so an error in one of them comes
                    // first.
                    if k > 0 {
                        return Ok(k);
                    }
                }
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a row longer than {} bytes", self.max),
        ))
    }
}

/// The position of the first byte of `bytes` that is `stop`, or their length. Sixteen at a
/// time while none is (a loop the compiler turns into vector instructions), then one at a
/// time.
#[inline]
fn find(bytes: &[u8], stop: impl Fn(u8) -> bool + Copy) -> usize {
    let mut i = 0;
    for chunk in bytes.chunks_exact(16) {
        if chunk.iter().fold(false, |any, &b| any | stop(b)) {
            break;
        }
        i += 16;
    }
    i + bytes[i..]
        .iter()
        .position(|&b| stop(b))
        .unwrap_or(bytes.len() - i)
}

/// The error for a row longer than `max` bytes that begins with `head`.
fn row_too_long(max: usize, head: &[u8]) -> String {
    format!(
        "a row longer than {max} bytes, the most a trace's row may have (a row is a few \
         hundred bytes; --max-trace-row-bytes raises the limit, default \
         {DEFAULT_MAX_ROW_BYTES}): refused without reading it whole; it begins {}",
        excerpt(&String::from_utf8_lossy(head))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Reads `text` as the replay does, through a [`RowLimit`] of `max` bytes: its records,
    /// or the byte offset of the refused record.
    fn read(text: &[u8], max: usize) -> Result<Vec<csv::ByteRecord>, u64> {
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .has_headers(false)
            .flexible(true)
            .from_reader(RowLimit::new(text, max));
        let mut out = Vec::new();
        loop {
            let mut rec = csv::ByteRecord::new();
            match rdr.read_byte_record(&mut rec) {
                Ok(false) => return Ok(out),
                Ok(true) => out.push(rec),
                Err(e) => {
                    let (byte, _) = rdr.get_ref().refusal().unwrap_or_else(|| panic!("{e}"));
                    return Err(byte);
                }
            }
        }
    }

    /// Rows of exactly `max` bytes pass a limit of `max` and are refused at one less,
    /// whatever their line ends, their quoted line breaks and doubled quotes (counted), and
    /// the comment lines (with an odd quote) and blank lines around them (not counted).
    #[test]
    fn a_row_at_the_limit_passes_and_one_byte_more_does_not() {
        for end in ["\n", "\r\n", "\r"] {
            let quoted = format!("\"a\"\"b{end}c\",0123456");
            let max = quoted.len();
            let plain = "0".repeat(max);
            let text = format!("# it's \"odd\n{end}{plain}{end}{end}# more\n{quoted}{end}");
            let records = read(text.as_bytes(), max).unwrap();
            assert_eq!(records.len(), 2, "{end:?}");
            assert_eq!(&records[1][0], format!("a\"b{end}c").as_bytes());
            // The first row: after the comment and a blank line.
            let at = "# it's \"odd\n".len() + end.len();
            assert_eq!(
                read(text.as_bytes(), max - 1).unwrap_err(),
                at as u64,
                "{end:?}"
            );
        }
    }

    /// A reader that counts the bytes taken from it.
    struct Counting<R>(R, Rc<Cell<usize>>);

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n);
            Ok(n)
        }
    }

    /// A row of 16 MiB with a limit of 64 KiB: refused (at its first byte) once the limit
    /// is passed, having read at most the limit and the csv reader's buffer.
    #[test]
    fn a_long_row_is_refused_before_it_is_read_whole() {
        let mut text = b"arrive_ps,bytes\n0,1".to_vec();
        text.resize(16 << 20, b'7');
        let taken = Rc::new(Cell::new(0));
        let mut rdr = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(RowLimit::new(
                Counting(&text[..], taken.clone()),
                DEFAULT_MAX_ROW_BYTES,
            ));
        let mut rec = csv::StringRecord::new();
        assert!(rdr.read_record(&mut rec).is_err());
        let (byte, message) = rdr.get_ref().refusal().unwrap();
        assert_eq!(byte, 16);
        assert!(message.contains("65536 bytes"), "{message}");
        assert!(message.len() < 400, "{message}");
        assert!(
            taken.get() <= DEFAULT_MAX_ROW_BYTES + (64 << 10),
            "{}",
            taken.get()
        );
    }

    /// Random text of commas, quotes, line ends, `#` and letters: whatever the csv reader
    /// makes of it, no record it returns holds more than the limit of values and commas
    /// (its memory is bounded); a refused text has such a record, or quotes (which count
    /// and are not kept); and a limit as long as the text refuses nothing.
    #[test]
    fn no_record_passes_the_limit() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // A record's values and the commas between them.
        let seen = |r: &csv::ByteRecord| r.as_slice().len() + r.len().saturating_sub(1);
        for _ in 0..3000 {
            let len = (next() % 200) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| b"aa,\"\r\n#b"[(next() % 8) as usize])
                .collect();
            let max = 1 + (next() % 24) as usize;
            let shown = String::from_utf8_lossy(&text);
            match read(&text, max) {
                Ok(records) => {
                    for r in &records {
                        assert!(seen(r) <= max, "{shown:?} at {max}: {r:?}");
                    }
                }
                Err(_) => {
                    let records = read(&text, usize::MAX).unwrap();
                    assert!(
                        records.iter().any(|r| seen(r) > max) || text.contains(&b'"'),
                        "{shown:?} refused at {max}: {records:?}"
                    );
                }
            }
            assert!(read(&text, len.max(1)).is_ok(), "{shown:?}");
        }
    }

    /// A reader that gives `data` in pieces of the sizes `sizes` gives, in turn.
    struct Pieces<'a> {
        data: &'a [u8],
        sizes: Vec<usize>,
        turn: usize,
    }

    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let want = self.sizes[self.turn % self.sizes.len()].max(1);
            self.turn += 1;
            let n = want.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Random text (with quotes or without, lines short and long) read in random pieces
    /// through [`RowLimit::scan`] and its shortcuts refuses what stepping through every
    /// byte refuses, at the same record.
    #[test]
    fn the_shortcuts_count_as_every_step_does() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..2000 {
            let alphabet: &[u8] = match case % 3 {
                0 => b"aaaaaaa,,\n",
                1 => b"aaaaaa,,\n\r#\"",
                _ => b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,\n#",
            };
            let len = (next() % 3000) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let max = 1 + (next() % 400) as usize;
            let mut every = RowLimit::new(std::io::empty(), max);
            let expected = text
                .iter()
                .enumerate()
                .find(|&(k, &b)| !every.step(b, k as u64))
                .map(|_| every.start);
            let sizes = (0..4).map(|_| (next() % 700) as usize).collect();
            let pieces = Pieces {
                data: &text,
                sizes,
                turn: 0,
            };
            let mut limited = RowLimit::new(pieces, max);
            let mut buf = [0u8; 512];
            let got = loop {
                match limited.read(&mut buf) {
                    Ok(0) => break None,
                    Ok(_) => {}
                    Err(_) => break limited.refusal().map(|(at, _)| at),
                }
            };
            let shown = String::from_utf8_lossy(&text);
            assert_eq!(got, expected, "case {case}, max {max}: {shown:?}");
        }
    }
}
