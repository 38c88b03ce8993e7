//! A TCP sender and receiver model: the state machines of one connection's two ends, with
//! no knowledge of the simulator. Time is an argument in integer picoseconds, sequence
//! numbers are byte offsets from 0 as `u64` (they never wrap), and nothing here reads a
//! clock, draws a random number or does I/O: the same calls give the same answers.
//!
//! The caller moves the data. It writes to a [`TcpSender`], asks it for segments with
//! [`TcpSender::poll_send`] (until `None`, after every event), carries them over its
//! network, hands each packet to a [`TcpReceiver`], carries the [`Ack`] it returns back to
//! [`TcpSender::on_ack`], tells the sender when a segment's bytes have left the host
//! ([`TcpSender::on_left_host`]) and when its retransmission timer fires
//! ([`TcpSender::timer_ps`], [`TcpSender::on_timer`]).
//!
//! # What it implements
//!
//! - Slow start and congestion avoidance (RFC 5681 §3.1) with appropriate byte counting
//!   (RFC 3465 §2.1): slow start grows the window by every byte an ACK acknowledges, up to
//!   the threshold, as Linux does (not RFC 3465 §2.2's limit of L = 2 MSS an ACK, which
//!   would slow a sender whose receiver merges packets and acknowledges them together).
//!   The congestion window starts at `init_cwnd` segments and the slow start threshold is
//!   unlimited until the first loss.
//! - Fast retransmit and fast recovery on `dupthresh` duplicate ACKs (RFC 5681 §2 and
//!   §3.2) with the NewReno response to partial ACKs (RFC 6582 §3.2): a recover point, one
//!   retransmission per partial ACK with partial window deflation, and `cwnd = ssthresh`
//!   on the full ACK. The retransmission timer is restarted by every ACK of new data,
//!   partial ones included (the "Slow-but-Steady" variant, RFC 6582 §6, as RFC 6298 §5.3
//!   reads).
//! - The retransmission timer of RFC 6298: SRTT and RTTVAR (§2, K = 4, α = 1/8, β = 1/4,
//!   a clock granularity of 1 ps), bounds `min_rto_ps`..`max_rto_ps`, Karn's algorithm
//!   (§3: no sample from an ACK that covers retransmitted data), exponential backoff and
//!   timer management (§5). A timeout sets `ssthresh = max(FlightSize / 2, 2 MSS)` (held
//!   on a repeated timeout of the same data, RFC 5681 §3.1), `cwnd = 1 MSS`, and goes back
//!   to `snd_una` to resend everything after it ("go back N"), one MSS per segment.
//! - DCTCP (RFC 8257 §3.3 to §3.5) with [`Cc::Dctcp`]: α (starting at 1, the cautious
//!   value Linux uses) estimated once per window of data from the fraction of
//!   acknowledged bytes that were ECN-echoed (§3.3), and on an ECN echo at
//!   most one window cut per window of data, `cwnd ← cwnd (1 − α/2)`, `ssthresh ← cwnd`,
//!   never below 2 MSS (the floor Linux uses), nor above the window before the cut (§3.4);
//!   losses are handled as NewReno handles them (§3.5).
//!   [`Cc::NewReno`] does not use ECN: it ignores the ECE flag entirely.
//! - TCP small queues (as Linux's `tcp_small_queue_check`): a segment goes below the socket
//!   only while less than `tsq_bytes` of the flow's payload handed to the NIC is not yet
//!   reported gone (or none is), so at most `tsq_bytes` plus one segment are there. A
//!   segment is reported gone as a whole, when its last packet is (the socket buffer is
//!   freed at once), so a sender held back by TSQ goes on with whole segments.
//! - Segmentation offload: a new-data segment is up to `tso_bytes` long; the NIC (the
//!   caller) cuts it into MSS-sized packets. Retransmissions are one MSS.
//! - A receiver that acknowledges every segment at once with its cumulative ACK and echoes
//!   that segment's CE mark (what the receiver state machine of RFC 8257 §3.2 sends when
//!   every segment is acknowledged), reports a segment it had already received whole
//!   (the D-SACK of RFC 2883, without the SACK blocks), and counts segments that arrive
//!   out of order, duplicated or reordered.
//! - Spurious fast retransmits undone (RFC 3708's D-SACK detection, the response Linux's
//!   `tcp_try_undo_dsack` gives): when D-SACKs account for every retransmission of the
//!   last fast recovery, the window and slow start threshold go back to what they were
//!   before it (the larger of those and the current ones), the recovery ends, and the
//!   duplicate-ACK threshold grows to the duplicate ACKs that had come when that recovery
//!   first saw new data acknowledged, plus one (the reordering, as Linux's
//!   `tcp_update_reordering` raises its threshold; at most [`MAX_REORDERING`]).
//!   A timeout is not undone.
//!
//! # Simplifications
//!
//! No SACK blocks (only the D-SACK flag above: holes are found one partial ACK at a time,
//! and reordering is measured in duplicate ACKs, not by SACK's finer account), no limited
//! transmit (RFC 3042), no delayed ACKs, no pacing, no
//! Nagle, no connection setup or teardown (data starts at byte 0, the connection is open
//! at creation), no window scaling nor flow control beyond a fixed receiver window
//! (`rwnd_bytes`), no congestion window validation (RFC 7661: an application-limited flow
//! keeps growing its window), no RACK, no F-RTO, no PRR (window reductions are
//! immediate), no timestamps (RTT samples come from the send time of the oldest
//! newly acknowledged segment, on every ACK that acknowledges new data, as Linux does
//! without timestamps). The receiver has unlimited buffer space. As in RFC 6582, whose
//! `recover` starts at the initial sequence number and whose duplicate ACKs must cover
//! more than `recover`, the loss of the very first segment, or of the segment that starts
//! exactly where the previous recovery ended, is not repaired by fast retransmit: it waits
//! for the timer.
//!
//! # Invariants
//!
//! `snd_una ≤ snd_nxt ≤ snd_max ≤ written` (acknowledged, next to send, highest sent,
//! written by the application); `cwnd ≥ 1 MSS`; a segment sent under the congestion window
//! (new data, or a resend after a timeout) leaves at most `max(cwnd, that segment)` bytes in
//! flight; fast retransmissions are sent outside the window, as RFC 5681 §3.2 says. The
//! receiver's `rcv_nxt` never decreases and its out-of-order ranges are disjoint, sorted
//! and above `rcv_nxt`. Debug builds check these with `debug_assert!`.
//!
//! # Cost
//!
//! O(1) amortized per segment sent and per ACK (an ACK pops the records of the segments it
//! acknowledges; a timeout is O(1)); memory is one 32-byte record per new-data segment in
//! flight, kept in a `VecDeque` whose capacity is reused, so the steady state allocates
//! nothing. The receiver costs O(log h) per segment, plus O(h) when a segment adds or
//! merges an out-of-order range, for h holes; its ranges live in a reused `VecDeque`.

mod receiver;
mod sender;
#[cfg(test)]
mod tests;

pub use receiver::{ReceiverStats, TcpReceiver};
pub use sender::{SenderStats, TcpSender, MAX_REORDERING};

/// One picosecond: the clock granularity `G` of RFC 6298 §2 (the model's time unit).
pub const CLOCK_GRANULARITY_PS: u64 = 1;

/// Congestion control algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cc {
    /// NewReno (RFC 5681, RFC 6582); ignores ECN echoes.
    NewReno,
    /// DCTCP (RFC 8257): NewReno's loss response plus window cuts in proportion to the
    /// fraction of ECN-marked bytes.
    Dctcp,
}

/// A connection's parameters. [`TcpConfig::default`] gives Linux-like values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    /// Payload bytes of a full segment (SMSS), e.g. 1448 (a 1500-byte IPv4 packet with TCP
    /// timestamps).
    pub mss: u32,
    /// Initial congestion window, segments (Linux: 10).
    pub init_cwnd: u32,
    /// Retransmission timeout before any RTT sample, ps (RFC 6298 §2.1: 1 s).
    pub init_rto_ps: u64,
    /// Lower bound of the retransmission timeout, ps (Linux: 200 ms; data centres often
    /// 1 to 10 ms; RFC 6298 §2.4 says 1 s).
    pub min_rto_ps: u64,
    /// Upper bound of the retransmission timeout after backoff, ps (RFC 6298 §2.5: at least
    /// 60 s; Linux: 120 s).
    pub max_rto_ps: u64,
    /// Congestion control algorithm.
    pub cc: Cc,
    /// DCTCP's gain `g = 1 / 2^dctcp_g_shift` (RFC 8257 suggests 1/16: 4); at most 20.
    pub dctcp_g_shift: u8,
    /// TCP small queues: payload bytes of this flow handed to the NIC and not yet left the
    /// host, at most this many (one segment is always allowed when none are).
    pub tsq_bytes: u64,
    /// Largest segment handed to the NIC at once, payload bytes: a multiple of `mss`
    /// (`mss`: no TSO/GSO).
    pub tso_bytes: u32,
    /// The receiver's window: bytes in flight at most this many.
    pub rwnd_bytes: u64,
    /// Duplicate ACKs that trigger fast retransmit (RFC 5681: 3).
    pub dupthresh: u32,
}

impl Default for TcpConfig {
    /// Linux-like: MSS 1448, 10 initial segments, RTO 1 s initially, 200 ms to 120 s,
    /// NewReno, g = 1/16, TSQ 1 MiB (Linux's `tcp_limit_output_bytes`), no TSO, a receiver
    /// window of 6 MiB (Linux's largest default receive buffer), 3 duplicate ACKs.
    fn default() -> TcpConfig {
        TcpConfig {
            mss: 1448,
            init_cwnd: 10,
            init_rto_ps: 1_000_000_000_000,
            min_rto_ps: 200_000_000_000,
            max_rto_ps: 120_000_000_000_000,
            cc: Cc::NewReno,
            dctcp_g_shift: 4,
            tsq_bytes: 1 << 20,
            tso_bytes: 1448,
            rwnd_bytes: 6 << 20,
            dupthresh: 3,
        }
    }
}

/// Why a [`TcpConfig`] is not valid ([`TcpConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TcpConfigError {
    /// `mss` is 0.
    #[error("the MSS must be at least 1 byte")]
    ZeroMss,
    /// `init_cwnd` is 0.
    #[error("the initial window must be at least 1 segment")]
    ZeroInitCwnd,
    /// `init_rto_ps` is 0.
    #[error("the initial retransmission timeout must be at least 1 ps")]
    ZeroInitRto,
    /// `min_rto_ps > max_rto_ps`.
    #[error("the RTO bounds are reversed: min {min_ps} ps > max {max_ps} ps")]
    RtoBounds {
        /// The lower bound, ps.
        min_ps: u64,
        /// The upper bound, ps.
        max_ps: u64,
    },
    /// `tso_bytes` is not a positive multiple of `mss`.
    #[error("the TSO size ({tso} bytes) must be a positive multiple of the MSS ({mss} bytes)")]
    Tso {
        /// The TSO size, bytes.
        tso: u32,
        /// The MSS, bytes.
        mss: u32,
    },
    /// `rwnd_bytes < mss`.
    #[error("the receiver window ({rwnd} bytes) must hold at least one MSS ({mss} bytes)")]
    Rwnd {
        /// The receiver window, bytes.
        rwnd: u64,
        /// The MSS, bytes.
        mss: u32,
    },
    /// `dupthresh` is 0.
    #[error("the duplicate ACK threshold must be at least 1")]
    ZeroDupthresh,
    /// `dctcp_g_shift > 20`.
    #[error("the DCTCP gain shift ({0}) must be at most 20")]
    GShift(u8),
}

impl TcpConfig {
    /// Checks the configuration. [`TcpSender::new`] accepts any configuration and replaces
    /// each invalid value by the nearest valid one (see [`TcpConfig::normalized`]); callers
    /// that read configurations from users call this first to report mistakes.
    pub fn validate(&self) -> Result<(), TcpConfigError> {
        if self.mss == 0 {
            return Err(TcpConfigError::ZeroMss);
        }
        if self.init_cwnd == 0 {
            return Err(TcpConfigError::ZeroInitCwnd);
        }
        if self.init_rto_ps == 0 {
            return Err(TcpConfigError::ZeroInitRto);
        }
        if self.min_rto_ps > self.max_rto_ps {
            return Err(TcpConfigError::RtoBounds {
                min_ps: self.min_rto_ps,
                max_ps: self.max_rto_ps,
            });
        }
        if self.tso_bytes == 0 || !self.tso_bytes.is_multiple_of(self.mss) {
            return Err(TcpConfigError::Tso {
                tso: self.tso_bytes,
                mss: self.mss,
            });
        }
        if self.rwnd_bytes < u64::from(self.mss) {
            return Err(TcpConfigError::Rwnd {
                rwnd: self.rwnd_bytes,
                mss: self.mss,
            });
        }
        if self.dupthresh == 0 {
            return Err(TcpConfigError::ZeroDupthresh);
        }
        if self.dctcp_g_shift > 20 {
            return Err(TcpConfigError::GShift(self.dctcp_g_shift));
        }
        Ok(())
    }

    /// This configuration with each invalid value replaced by the nearest valid one: MSS,
    /// initial window, initial RTO and duplicate threshold at least 1, `max_rto_ps` at least
    /// `min_rto_ps`, `tso_bytes` rounded down to a multiple of the MSS (at least one),
    /// `rwnd_bytes` at least one MSS, the gain shift at most 20. A valid configuration is
    /// returned unchanged.
    pub fn normalized(&self) -> TcpConfig {
        let mut c = *self;
        c.mss = c.mss.max(1);
        c.init_cwnd = c.init_cwnd.max(1);
        c.init_rto_ps = c.init_rto_ps.max(1);
        c.max_rto_ps = c.max_rto_ps.max(c.min_rto_ps);
        c.tso_bytes = (c.tso_bytes / c.mss).max(1) * c.mss;
        c.rwnd_bytes = c.rwnd_bytes.max(u64::from(c.mss));
        c.dupthresh = c.dupthresh.max(1);
        c.dctcp_g_shift = c.dctcp_g_shift.min(20);
        c
    }
}

/// What the sender hands to the NIC: payload bytes `[seq, seq + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// First payload byte, a byte offset from the start of the stream.
    pub seq: u64,
    /// Payload bytes (at most `tso_bytes`; one MSS or less for a retransmission).
    pub len: u32,
    /// The bytes were sent before (a fast retransmission, a partial-ACK retransmission or a
    /// resend after a timeout).
    pub retransmit: bool,
}

/// What the receiver sends back for each segment it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Cumulative acknowledgment: the next byte expected (every byte below has arrived).
    pub ack: u64,
    /// ECN-Echo: the segment that triggered this ACK was CE-marked.
    pub ece: bool,
    /// D-SACK (RFC 2883): the segment that triggered this ACK had arrived before, every
    /// byte of it (a retransmission whose original got there, or a copy).
    pub dsack: bool,
}
