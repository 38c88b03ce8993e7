//! The reorder window's records and their place on the replay's clock: records leave the
//! window earliest first ([`Record`]'s order: time, then position in the file), and each is
//! placed at its time from the first record's, or at the latest time replayed when it comes
//! later than that (counted: `capture_reordered`).
//!
//! Invariants: times placed never go back; a time past the last arrival weft schedules is an
//! error naming the record and the replay's time 0. Cost: 112 bytes a record in the window;
//! a heap push and pop per record (log2 of the window).

use std::cmp::Ordering;

use weft_core::sched::{Packet, LAST_ARRIVAL_PS};

use super::blocks::State;

impl State {
    /// Places a record leaving the window on the replay's clock and makes its packet.
    pub(super) fn place(&mut self, r: Record) -> Result<(u64, Packet), String> {
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
pub(super) struct Record {
    /// Absolute time, picoseconds (wall clock: may exceed 64 bits).
    pub(super) ps: i128,
    /// Whether the record has a time of its own (a simple packet block has none).
    pub(super) timed: bool,
    /// Its position in the file, from 0 (the packet's id).
    pub(super) id: u64,
    pub(super) origlen: u32,
    pub(super) parsed: weft_nic::parse::Parsed,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The reorder window's memory, as the module doc and `--help` give it.
    #[test]
    fn a_record_in_the_window_takes_112_bytes() {
        assert_eq!(std::mem::size_of::<Record>(), 112);
    }
}
