//! The receiving end: the cumulative ACK point, the out-of-order data above it, and an
//! immediate ACK for every segment that echoes the segment's CE mark and reports a
//! segment received twice (D-SACK).
//!
//! Cost: O(log h) per segment, plus O(h) when it fills or merges holes (h holes).

use std::collections::VecDeque;

use super::Ack;

/// Counters of a [`TcpReceiver`], since its creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Segments received (each one acknowledged).
    pub segments: u64,
    /// Segments that arrived beyond `rcv_nxt`, with a hole before them.
    pub out_of_order: u64,
    /// Segments entirely below `rcv_nxt` (already delivered: a retransmission or a copy).
    pub duplicates: u64,
    /// Segments that arrived after a segment with a higher sequence number, and are not a
    /// retransmission as far as the receiver can tell: their first byte is below the
    /// highest end seen before them, and they carry at least one byte not received before.
    /// (A retransmission that fills a hole is counted too: without timestamps the receiver
    /// cannot tell it from a late original.)
    pub reordered: u64,
    /// Segments that arrived CE-marked.
    pub ce_marked: u64,
}

/// The receiving end of a TCP connection (see the [module](super) documentation).
#[derive(Debug, Clone, Default)]
pub struct TcpReceiver {
    /// Next byte expected: every byte below it has arrived (delivered in order).
    rcv_nxt: u64,
    /// One past the highest byte that has arrived.
    highest_end: u64,
    /// Data received above `rcv_nxt`: disjoint, non-adjacent `[start, end)` ranges in
    /// order, each starting above `rcv_nxt`.
    ooo: VecDeque<(u64, u64)>,
    /// Bytes in `ooo`.
    ooo_bytes: u64,
    stats: ReceiverStats,
}

impl TcpReceiver {
    /// A receiver expecting byte 0.
    pub fn new() -> TcpReceiver {
        TcpReceiver::default()
    }

    /// A segment `[seq, seq + len)` arrived, CE-marked or not: the ACK to send at once
    /// (every segment is acknowledged immediately: no delayed ACKs; `ece` = this segment's
    /// CE mark, which is what RFC 8257 §3.2's receiver state machine sends when every
    /// segment is acknowledged). The ACK is cumulative (RFC 9293 §3.10.7.4): the first byte
    /// not yet received in order.
    pub fn on_segment(&mut self, seq: u64, len: u32, ce: bool) -> Ack {
        let st = &mut self.stats;
        st.segments += 1;
        if ce {
            st.ce_marked += 1;
        }
        let end = seq.saturating_add(u64::from(len));
        let mut dsack = false;
        if end > seq {
            if end <= self.rcv_nxt {
                st.duplicates += 1;
                dsack = true;
            } else if seq > self.rcv_nxt {
                st.out_of_order += 1;
                let fresh = self.insert(seq, end);
                dsack = !fresh;
                if fresh && seq < self.highest_end {
                    self.stats.reordered += 1;
                }
            } else {
                // Byte rcv_nxt is in it: always new.
                if seq < self.highest_end {
                    st.reordered += 1;
                }
                self.rcv_nxt = end;
                while let Some(&(s, e)) = self.ooo.front() {
                    if s > self.rcv_nxt {
                        break;
                    }
                    self.rcv_nxt = self.rcv_nxt.max(e);
                    self.ooo_bytes -= e - s;
                    self.ooo.pop_front();
                }
            }
            self.highest_end = self.highest_end.max(end);
        }
        self.check();
        Ack {
            ack: self.rcv_nxt,
            ece: ce,
            dsack,
        }
    }

    /// Adds `[seq, end)` (above `rcv_nxt`) to the out-of-order ranges; false if every byte
    /// of it was there already.
    fn insert(&mut self, seq: u64, end: u64) -> bool {
        // The first range that ends at or after `seq`: it may overlap or touch.
        let i = self.ooo.partition_point(|&(_, e)| e < seq);
        match self.ooo.get(i).copied() {
            Some((s, e)) if s <= seq && end <= e => false,
            Some((s, e)) if s <= end => {
                let mut old = e - s;
                self.ooo[i] = (s.min(seq), e.max(end));
                while let Some(&(s2, e2)) = self.ooo.get(i + 1) {
                    if s2 > self.ooo[i].1 {
                        break;
                    }
                    old += e2 - s2;
                    self.ooo[i].1 = self.ooo[i].1.max(e2);
                    self.ooo.remove(i + 1);
                }
                self.ooo_bytes += (self.ooo[i].1 - self.ooo[i].0) - old;
                true
            }
            _ => {
                self.ooo.insert(i, (seq, end));
                self.ooo_bytes += end - seq;
                true
            }
        }
    }

    fn check(&self) {
        debug_assert!(
            self.ooo.front().is_none_or(|&(s, _)| s > self.rcv_nxt)
                && self
                    .ooo
                    .iter()
                    .zip(self.ooo.iter().skip(1))
                    .all(|(a, b)| a.0 < a.1 && a.1 < b.0),
            "out-of-order ranges not disjoint and above rcv_nxt {}: {:?}",
            self.rcv_nxt,
            self.ooo,
        );
        debug_assert_eq!(
            self.ooo_bytes,
            self.ooo.iter().map(|&(s, e)| e - s).sum::<u64>(),
            "out-of-order byte count"
        );
    }

    /// Bytes delivered in order (rcv_nxt).
    pub fn delivered(&self) -> u64 {
        self.rcv_nxt
    }

    /// Distinct payload bytes that have arrived, in order or not: [`TcpReceiver::delivered`]
    /// plus the bytes held above a hole.
    pub fn received_bytes(&self) -> u64 {
        self.rcv_nxt + self.ooo_bytes
    }

    /// One past the highest byte that has arrived.
    pub fn highest_received(&self) -> u64 {
        self.highest_end
    }

    /// Holes: out-of-order ranges held above `rcv_nxt`.
    pub fn holes(&self) -> usize {
        self.ooo.len()
    }

    /// Counters since creation.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }
}
