//! The sending end: the send buffer's pointers, the congestion window (RFC 5681, RFC 3465,
//! RFC 6582, RFC 8257), the retransmission timer (RFC 6298) and TCP small queues.
//!
//! Cost: O(1) amortized per call; one record per new-data segment in flight.

use std::collections::VecDeque;

use super::{Ack, Cc, Segment, TcpConfig, CLOCK_GRANULARITY_PS};

/// DCTCP's α in fixed point: `ALPHA_ONE` stands for 1.0.
const ALPHA_SHIFT: u32 = 20;
const ALPHA_ONE: u64 = 1 << ALPHA_SHIFT;

/// Counters of a [`TcpSender`], since its creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments handed to the NIC, retransmissions included.
    pub segments_sent: u64,
    /// Payload bytes handed to the NIC, retransmissions included.
    pub bytes_sent: u64,
    /// Segments that resent bytes sent before (fast, partial-ACK and timeout resends).
    pub retransmitted_segments: u64,
    /// Fast retransmits: entries into fast recovery on `dupthresh` duplicate ACKs.
    pub fast_retransmits: u64,
    /// Retransmission timeouts that fired.
    pub timeouts: u64,
    /// DCTCP window cuts on ECN echoes (none with [`Cc::NewReno`]).
    pub ecn_reductions: u64,
    /// Duplicate ACKs received (RFC 5681 §2).
    pub dup_acks: u64,
    /// RTT samples taken (RFC 6298 §3; Karn's algorithm skips ACKs of resent data).
    pub rtt_samples: u64,
    /// ACKs ignored: below `snd_una` (stale) or above the highest byte sent (invalid).
    pub ignored_acks: u64,
    /// Window reductions undone: every retransmission of a fast recovery was reported
    /// received twice (D-SACK), so the loss was reordering.
    pub undos: u64,
}

/// Linux's `tcp_max_reordering`: the most the duplicate-ACK threshold grows to.
pub const MAX_REORDERING: u32 = 300;

/// A new-data segment in flight: bytes `[start, end)`, first sent at `sent_ps`.
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// First byte not yet acknowledged of the segment.
    start: u64,
    /// One past its last byte.
    end: u64,
    /// When it was handed to the NIC, ps.
    sent_ps: u64,
    /// Some of it was sent again (Karn: its ACK gives no RTT sample).
    retransmitted: bool,
}

/// A fast recovery that may prove spurious.
#[derive(Debug, Clone, Copy)]
struct Undo {
    cwnd: u64,
    ssthresh: u64,
    retrans: u32,
    reordering: u32,
}

/// The sending end of a TCP connection (see the [module](super) documentation).
#[derive(Debug, Clone)]
pub struct TcpSender {
    cfg: TcpConfig,
    /// Bytes the application wrote: the end of the send buffer.
    written: u64,
    /// First byte not acknowledged.
    snd_una: u64,
    /// Next byte to send (below `snd_max` while going back N after a timeout).
    snd_nxt: u64,
    /// One past the highest byte ever sent.
    snd_max: u64,
    /// Congestion window, bytes (inflated during fast recovery).
    cwnd: u64,
    /// Slow start threshold, bytes (`u64::MAX`: unlimited).
    ssthresh: u64,
    /// RFC 3465 §2.1's `bytes_acked` in congestion avoidance, bytes.
    ca_acked: u64,
    /// Consecutive duplicate ACKs.
    dupacks: u32,
    /// Duplicate ACKs that start a fast retransmit: `cfg.dupthresh`, raised to the
    /// reordering seen when a recovery proves spurious (at most [`MAX_REORDERING`]).
    dupthresh: u32,
    /// What the last fast recovery changed, while it may still be undone (RFC 3708
    /// detection, Linux's `tcp_try_undo_dsack`): the window and threshold before it, its
    /// retransmissions not yet reported received twice, and the duplicate ACKs that had
    /// come when new data was first acknowledged in it (how far the data was reordered).
    undo: Option<Undo>,
    /// In NewReno fast recovery.
    in_recovery: bool,
    /// RFC 6582's `recover`, as an exclusive end: one past the highest byte sent when fast
    /// recovery was entered or the timer last fired (0 at the start: nothing sent).
    recover: u64,
    /// A fast or partial-ACK retransmission of `[snd_una, snd_una + MSS)` is due.
    retx_pending: bool,
    /// Payload bytes handed to the NIC and not yet reported gone (TSQ).
    in_host: u64,
    /// Smoothed RTT, ps (`None` before the first sample).
    srtt: Option<u64>,
    /// RTT variation, ps.
    rttvar: u64,
    /// Current retransmission timeout, ps (backed off after timeouts).
    rto: u64,
    /// When the retransmission timer fires, ps, if armed.
    timer: Option<u64>,
    /// Timeouts since `snd_una` last advanced.
    backoffs: u32,
    /// Records of the new-data segments in flight, in order, covering `[snd_una, snd_max)`.
    sent: VecDeque<Sent>,
    /// Every byte below this was in flight when the timer fired: its ACK gives no sample.
    karn_below: u64,
    /// DCTCP's α, in units of `1 / ALPHA_ONE`.
    alpha: u64,
    /// DCTCP.WindowEnd: α is next updated by an ACK above this.
    window_end: u64,
    /// DCTCP.BytesAcked of the current observation window.
    dctcp_acked: u64,
    /// DCTCP.BytesMarked of the current observation window.
    dctcp_marked: u64,
    /// No ECN window cut for an ACK at or below this (once per window of data).
    cwr_end: u64,
    stats: SenderStats,
}

impl TcpSender {
    /// A sender with nothing written yet. An invalid `cfg` is replaced by
    /// [`TcpConfig::normalized`] (check it with [`TcpConfig::validate`] to report errors).
    pub fn new(cfg: TcpConfig) -> TcpSender {
        let cfg = cfg.normalized();
        TcpSender {
            cwnd: u64::from(cfg.init_cwnd) * u64::from(cfg.mss),
            ssthresh: u64::MAX,
            rto: cfg.init_rto_ps,
            cfg,
            written: 0,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            ca_acked: 0,
            dupacks: 0,
            dupthresh: cfg.dupthresh,
            undo: None,
            in_recovery: false,
            recover: 0,
            retx_pending: false,
            in_host: 0,
            srtt: None,
            rttvar: 0,
            timer: None,
            backoffs: 0,
            sent: VecDeque::new(),
            karn_below: 0,
            alpha: ALPHA_ONE,
            window_end: 0,
            dctcp_acked: 0,
            dctcp_marked: 0,
            cwr_end: 0,
            stats: SenderStats::default(),
        }
    }

    /// The application appends `bytes` to the send buffer (saturating; `u64::MAX` =
    /// unlimited bulk).
    pub fn write(&mut self, bytes: u64) {
        self.written = self.written.saturating_add(bytes);
    }

    fn mss(&self) -> u64 {
        u64::from(self.cfg.mss)
    }

    /// TCP small queues, as Linux checks them before each segment: one more segment may go
    /// below the socket while less than `tsq_bytes` of the flow are there (so at most
    /// `tsq_bytes` plus one segment less a byte are; one segment when `tsq_bytes` is 0).
    fn tsq_room(&self) -> u64 {
        if self.in_host < self.cfg.tsq_bytes || self.in_host == 0 {
            u64::MAX
        } else {
            0
        }
    }

    /// The next segment the sender may hand to the NIC at `now_ps` (limited by cwnd, the
    /// receiver window and TSQ; retransmissions first), or None. The caller calls it until
    /// None after every event.
    ///
    /// A fast or partial-ACK retransmission (RFC 5681 §3.2 step 2, RFC 6582 §3.2 step 3) is
    /// one MSS from `snd_una`, sent whatever the congestion window. After a timeout the
    /// sender goes back to `snd_una` (RFC 6298 §5.4, RFC 5681 §3.1) and resends one MSS
    /// at a time under the congestion window. New data goes out in segments of
    /// `min(tso_bytes, room)` with the room left by cwnd, the receiver window and TSQ
    /// rounded down to whole MSS, unless the rest of the send buffer is shorter than both.
    pub fn poll_send(&mut self, now_ps: u64) -> Option<Segment> {
        let mss = self.mss();
        let tsq_room = self.tsq_room();
        if self.retx_pending {
            let len = mss.min(self.snd_max - self.snd_una);
            if len == 0 {
                self.retx_pending = false;
            } else if len <= tsq_room {
                self.retx_pending = false;
                let seq = self.snd_una;
                self.mark_retransmitted(seq + len);
                return Some(self.emit(now_ps, seq, len, true));
            } else {
                // TSQ holds it back; it stays first in line.
                return None;
            }
        }
        let flight = self.snd_nxt - self.snd_una;
        let room = self
            .cwnd
            .saturating_sub(flight)
            .min(self.cfg.rwnd_bytes.saturating_sub(flight))
            .min(tsq_room);
        if self.snd_nxt < self.snd_max {
            // Going back N after a timeout.
            let len = mss.min(self.snd_max - self.snd_nxt);
            if len > room {
                return None;
            }
            let seq = self.snd_nxt;
            self.snd_nxt += len;
            self.check_window(len);
            return Some(self.emit(now_ps, seq, len, true));
        }
        let remaining = self.written - self.snd_nxt;
        let limit = room.min(u64::from(self.cfg.tso_bytes));
        let len = if remaining <= limit {
            remaining
        } else {
            limit / mss * mss
        };
        if len == 0 {
            return None;
        }
        let seq = self.snd_nxt;
        self.snd_nxt += len;
        self.snd_max = self.snd_nxt;
        self.sent.push_back(Sent {
            start: seq,
            end: seq + len,
            sent_ps: now_ps,
            retransmitted: false,
        });
        self.check_window(len);
        Some(self.emit(now_ps, seq, len, false))
    }

    /// Invariant after sending `len` bytes under the congestion window.
    fn check_window(&self, len: u64) {
        debug_assert!(
            self.snd_nxt - self.snd_una <= self.cwnd.max(len),
            "sent beyond the window: flight {} > max(cwnd {}, segment {len}); {self:?}",
            self.snd_nxt - self.snd_una,
            self.cwnd,
        );
    }

    /// Accounts for a segment handed to the NIC; arms the timer if idle (RFC 6298 §5.1).
    fn emit(&mut self, now_ps: u64, seq: u64, len: u64, retransmit: bool) -> Segment {
        let st = &mut self.stats;
        st.segments_sent += 1;
        st.bytes_sent += len;
        if retransmit {
            st.retransmitted_segments += 1;
            if let Some(u) = &mut self.undo {
                u.retrans += 1;
            }
        }
        self.in_host += len;
        if self.timer.is_none() {
            self.timer = Some(now_ps.saturating_add(self.rto));
        }
        self.check_pointers();
        Segment {
            seq,
            // At most max(mss, tso_bytes), both u32.
            len: u32::try_from(len).unwrap_or(u32::MAX),
            retransmit,
        }
    }

    /// Karn: the records of the bytes below `end`, resent from `snd_una`, give no RTT
    /// sample. A record only partly resent is split so that its rest still can.
    fn mark_retransmitted(&mut self, end: u64) {
        let mut i = 0;
        while i < self.sent.len() {
            let r = self.sent[i];
            if r.start >= end {
                break;
            }
            if r.end > end && !r.retransmitted {
                self.sent[i].end = end;
                self.sent[i].retransmitted = true;
                self.sent.insert(i + 1, Sent { start: end, ..r });
                break;
            }
            self.sent[i].retransmitted = true;
            i += 1;
        }
    }

    /// `bytes` of this flow's payload left the host (the NIC finished sending them): frees
    /// TSQ budget. More than is in the host is taken as all of it.
    pub fn on_left_host(&mut self, bytes: u32) {
        self.in_host = self.in_host.saturating_sub(u64::from(bytes));
    }

    /// An ACK arrived at `now_ps`.
    ///
    /// An ACK above the highest byte sent, or below `snd_una`, is ignored. An ACK of new
    /// data takes an RTT sample (RFC 6298 §3, Karn), restarts or stops the timer (RFC 6298
    /// §5.2, §5.3), and grows the window (RFC 5681 §3.1, RFC 3465) or, in fast recovery,
    /// handles a partial or full ACK (RFC 6582 §3.2 step 3). An ACK equal to `snd_una`
    /// with data outstanding is a duplicate (RFC 5681 §2): it inflates the window in fast
    /// recovery (RFC 5681 §3.2 step 4) or, the `dupthresh`-th time, enters fast
    /// retransmit if it covers more than `recover` (RFC 6582 §3.2 step 2). With DCTCP the
    /// ACK also feeds α (RFC 8257 §3.3) and, if it echoes ECN, may cut the window (§3.4).
    pub fn on_ack(&mut self, now_ps: u64, ack: Ack) {
        let a = ack.ack;
        if a > self.snd_max || a < self.snd_una {
            self.stats.ignored_acks += 1;
            return;
        }
        let mss = self.mss();
        let newly = a - self.snd_una;
        let dctcp = self.cfg.cc == Cc::Dctcp;
        // RFC 8257 §3.4 and RFC 3168 §6.1.2: at most one cut per window of data; none
        // during loss recovery, whose reduction already covers that window. (Checked again
        // below: this ACK may start a fast recovery.)
        let cut = dctcp && ack.ece && a > self.cwr_end && !self.in_recovery;
        if ack.dsack {
            self.on_dsack();
        }
        if newly > 0 {
            if self.in_recovery {
                if let Some(u) = &mut self.undo {
                    if u.reordering == 0 {
                        u.reordering = self.dupacks;
                    }
                }
            }
            self.take_rtt_sample(now_ps, a);
            self.snd_una = a;
            self.snd_nxt = self.snd_nxt.max(a);
            self.backoffs = 0;
            self.dupacks = 0;
            // RFC 6298 §5.2 and §5.3 (every partial ACK too: RFC 6582 §6 Slow-but-Steady).
            self.timer = if self.snd_una == self.snd_max {
                None
            } else {
                Some(now_ps.saturating_add(self.rto))
            };
            if self.in_recovery {
                if a >= self.recover {
                    // Full ACK (RFC 6582 §3.2 step 3): "all of the data up to and
                    // including recover", with recover exclusive here.
                    self.in_recovery = false;
                    self.cwnd = self.ssthresh.max(mss);
                    self.ca_acked = 0;
                } else {
                    // Partial ACK: resend the next hole, deflate by what it acknowledged,
                    // add back one MSS if it acknowledged at least one.
                    self.retx_pending = true;
                    self.cwnd = self.cwnd.saturating_sub(newly);
                    if newly >= mss {
                        self.cwnd += mss;
                    }
                    self.cwnd = self.cwnd.max(mss);
                }
            } else if !cut {
                self.grow(newly);
            }
        } else if a == self.snd_una && self.snd_max > self.snd_una {
            self.stats.dup_acks += 1;
            self.dupacks = self.dupacks.saturating_add(1);
            if self.in_recovery {
                self.cwnd += mss;
            } else if self.dupacks == self.dupthresh && a > self.recover {
                self.enter_fast_recovery();
            }
        }
        if dctcp {
            self.dctcp_on_ack(newly, ack.ece);
            if cut && !self.in_recovery {
                self.ecn_cut();
            }
        }
        self.check_pointers();
    }

    /// Slow start and congestion avoidance (RFC 5681 §3.1) with byte counting (RFC 3465):
    /// in slow start `cwnd += acked`, up to `ssthresh` (as Linux's `tcp_slow_start`, which
    /// counts every segment a stretch ACK covers: RFC 3465's limit of 2 MSS an ACK would
    /// hold a sender whose receiver merges packets (GRO) to 2 MSS an ACK); what is left
    /// over, and in congestion avoidance everything, adds one MSS each time the bytes
    /// acknowledged reach `cwnd` (§2.1).
    fn grow(&mut self, mut acked: u64) {
        let mss = self.mss();
        if self.cwnd < self.ssthresh {
            let inc = acked.min(self.ssthresh - self.cwnd);
            self.cwnd = self.cwnd.saturating_add(inc);
            acked -= inc;
        }
        if acked > 0 {
            self.ca_acked += acked;
            if self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
    }

    /// Fast retransmit (RFC 5681 §3.2 steps 2 and 3, RFC 6582 §3.2 step 2):
    /// `ssthresh = max(FlightSize / 2, 2 MSS)`, `recover` = highest byte sent,
    /// `cwnd = ssthresh + dupthresh MSS`, and the segment at `snd_una` is resent.
    fn enter_fast_recovery(&mut self) {
        let mss = self.mss();
        let flight = self.snd_nxt - self.snd_una;
        self.undo = Some(Undo {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            retrans: 0,
            reordering: 0,
        });
        self.ssthresh = (flight / 2).max(2 * mss);
        self.recover = self.snd_max;
        self.cwnd = self.ssthresh + u64::from(self.dupthresh) * mss;
        self.in_recovery = true;
        self.retx_pending = true;
        self.ca_acked = 0;
        self.cwr_end = self.snd_max;
        self.stats.fast_retransmits += 1;
    }

    /// A D-SACK: one segment sent twice got there twice, so the duplicate-ACK threshold
    /// grows to the reordering the last fast recovery saw (as Linux's
    /// `tcp_update_reordering`, without SACK's finer measure). When D-SACKs account for
    /// every retransmission of that recovery, nothing was lost: the window and the
    /// threshold go back to what they were before it (the larger of those and the current
    /// ones) and the recovery ends (Linux's DSACK undo).
    fn on_dsack(&mut self) {
        let Some(u) = &mut self.undo else {
            return;
        };
        // A segment resent in the recovery got there twice: its original was late, not
        // lost, whether or not the others were.
        self.dupthresh = self
            .dupthresh
            .max(u.reordering.saturating_add(1))
            .min(MAX_REORDERING.max(self.cfg.dupthresh));
        u.retrans = u.retrans.saturating_sub(1);
        if u.retrans > 0 {
            return;
        }
        let u = *u;
        self.undo = None;
        self.cwnd = self.cwnd.max(u.cwnd);
        self.ssthresh = self.ssthresh.max(u.ssthresh);
        self.in_recovery = false;
        self.retx_pending = false;
        self.ca_acked = 0;
        self.stats.undos += 1;
    }

    /// An RTT sample from the ACK of the bytes below `ack` (RFC 6298 §3): the send time of
    /// the oldest newly acknowledged segment, unless any of those bytes were resent
    /// (Karn's algorithm). Pops the records the ACK completes.
    fn take_rtt_sample(&mut self, now_ps: u64, ack: u64) {
        let mut oldest: Option<u64> = None;
        let mut karn = false;
        while let Some(r) = self.sent.front_mut() {
            if r.start >= ack {
                break;
            }
            if r.retransmitted || r.start < self.karn_below {
                karn = true;
            }
            oldest.get_or_insert(r.sent_ps);
            if r.end <= ack {
                self.sent.pop_front();
            } else {
                r.start = ack;
                break;
            }
        }
        if let (false, Some(sent_ps)) = (karn, oldest) {
            self.rtt_sample(now_ps.saturating_sub(sent_ps));
        }
    }

    /// RFC 6298 §2.2 and §2.3 (RTTVAR before SRTT, with the old SRTT), then §2.4 and §2.5:
    /// `RTO = SRTT + max(G, 4 RTTVAR)` within `[min_rto_ps, max_rto_ps]`. Integer
    /// arithmetic, rounding down. A new RTO also ends any backoff (RFC 6298 §5).
    fn rtt_sample(&mut self, r: u64) {
        self.stats.rtt_samples += 1;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let d = u128::from(s.abs_diff(r));
                let var = (3 * u128::from(self.rttvar) + d) / 4;
                let srtt = (7 * u128::from(s) + u128::from(r)) / 8;
                self.rttvar = u64::try_from(var).unwrap_or(u64::MAX);
                self.srtt = Some(u64::try_from(srtt).unwrap_or(u64::MAX));
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        let rto = srtt.saturating_add(CLOCK_GRANULARITY_PS.max(self.rttvar.saturating_mul(4)));
        self.rto = rto.clamp(self.cfg.min_rto_ps, self.cfg.max_rto_ps);
    }

    /// When the retransmission timer fires, if armed.
    pub fn timer_ps(&self) -> Option<u64> {
        self.timer
    }

    /// The timer fired (the caller calls this at or after `timer_ps()`; a call before it, or
    /// with no timer armed, does nothing).
    ///
    /// RFC 5681 §3.1: `ssthresh = max(FlightSize / 2, 2 MSS)` (kept as it is when the
    /// timer fires again before any progress), `cwnd = 1 MSS`. RFC 6582 §3.2 step 4:
    /// `recover` = highest byte sent, fast recovery ends. RFC 6298 §5.4 to §5.6: the
    /// sender goes back to `snd_una`, the RTO doubles (up to `max_rto_ps`) and the timer
    /// restarts. Everything in flight is excluded from RTT samples (Karn).
    pub fn on_timer(&mut self, now_ps: u64) {
        match self.timer {
            Some(t) if now_ps >= t => {}
            _ => return,
        }
        if self.snd_una == self.snd_max {
            self.timer = None;
            return;
        }
        let mss = self.mss();
        self.stats.timeouts += 1;
        if self.backoffs == 0 {
            self.ssthresh = ((self.snd_nxt - self.snd_una) / 2).max(2 * mss);
        }
        self.backoffs = self.backoffs.saturating_add(1);
        self.undo = None;
        self.cwnd = mss;
        self.ca_acked = 0;
        self.dupacks = 0;
        self.in_recovery = false;
        self.retx_pending = false;
        self.recover = self.snd_max;
        self.cwr_end = self.snd_max;
        self.snd_nxt = self.snd_una;
        self.karn_below = self.snd_max;
        self.rto = self.rto.saturating_mul(2).min(self.cfg.max_rto_ps);
        self.timer = Some(now_ps.saturating_add(self.rto));
        self.check_pointers();
    }

    /// DCTCP's estimate (RFC 8257 §3.3): count the bytes this ACK acknowledges, and those
    /// of an ECN-echoing ACK as marked; once an ACK passes `WindowEnd`, update
    /// `α ← (1 − g) α + g F` with `F` = marked / acknowledged bytes of the window, and start
    /// the next window at `SND.NXT` (the highest byte sent, here).
    fn dctcp_on_ack(&mut self, newly: u64, ece: bool) {
        self.dctcp_acked += newly;
        if ece {
            self.dctcp_marked += newly;
        }
        if self.snd_una <= self.window_end {
            return;
        }
        let g = u32::from(self.cfg.dctcp_g_shift);
        let f = if self.dctcp_acked == 0 {
            0
        } else {
            let num = u128::from(self.dctcp_marked) << ALPHA_SHIFT;
            u64::try_from(num / u128::from(self.dctcp_acked)).unwrap_or(ALPHA_ONE)
        };
        self.alpha = self.alpha - (self.alpha >> g) + (f >> g);
        self.window_end = self.snd_max;
        self.dctcp_acked = 0;
        self.dctcp_marked = 0;
    }

    /// DCTCP's window cut (RFC 8257 §3.4): `cwnd ← cwnd (1 − α/2)`, at least 2 MSS but never
    /// above the window before the cut; `ssthresh ← max(cwnd, 2 MSS)`. No other cut until
    /// an ACK covers data sent after this one (RFC 3168 §6.1.2).
    fn ecn_cut(&mut self) {
        let mss = self.mss();
        let cut = u128::from(self.cwnd) * u128::from(self.alpha) / u128::from(2 * ALPHA_ONE);
        let reduced = self.cwnd - u64::try_from(cut).unwrap_or(self.cwnd);
        self.cwnd = reduced.max(2 * mss).min(self.cwnd);
        self.ssthresh = self.cwnd.max(2 * mss);
        self.ca_acked = 0;
        self.cwr_end = self.snd_max;
        self.stats.ecn_reductions += 1;
    }

    /// Invariants of the pointers and the window.
    fn check_pointers(&self) {
        debug_assert!(
            self.snd_una <= self.snd_nxt
                && self.snd_nxt <= self.snd_max
                && self.snd_max <= self.written,
            "pointers out of order: snd_una {} snd_nxt {} snd_max {} written {}; {self:?}",
            self.snd_una,
            self.snd_nxt,
            self.snd_max,
            self.written,
        );
        debug_assert!(
            self.cwnd >= self.mss(),
            "cwnd {} below one MSS; {self:?}",
            self.cwnd
        );
        debug_assert!(
            self.sent.front().is_none_or(|r| r.start == self.snd_una)
                && self.sent.back().is_none_or(|r| r.end == self.snd_max),
            "send records do not cover [snd_una {}, snd_max {}); {self:?}",
            self.snd_una,
            self.snd_max,
        );
    }

    /// First byte not yet acknowledged (snd_una).
    pub fn acked(&self) -> u64 {
        self.snd_una
    }

    /// Every byte written has been acknowledged.
    pub fn all_acked(&self) -> bool {
        self.snd_una == self.written
    }

    /// Congestion window, bytes (inflated by duplicate ACKs during fast recovery).
    pub fn cwnd_bytes(&self) -> u64 {
        self.cwnd
    }

    /// Smoothed RTT, ps (`None` before the first sample).
    pub fn srtt_ps(&self) -> Option<u64> {
        self.srtt
    }

    /// Counters since creation.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// The configuration in use (after [`TcpConfig::normalized`]).
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    /// Slow start threshold, bytes (`u64::MAX` until the first loss or ECN cut).
    pub fn ssthresh_bytes(&self) -> u64 {
        self.ssthresh
    }

    /// RTT variation (RFC 6298's RTTVAR), ps; 0 before the first sample.
    pub fn rttvar_ps(&self) -> u64 {
        self.rttvar
    }

    /// Current retransmission timeout, ps, backoff included.
    pub fn rto_ps(&self) -> u64 {
        self.rto
    }

    /// Bytes written by the application so far (`u64::MAX`: unlimited).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Next byte to send (snd_nxt; below [`TcpSender::highest_sent`] while resending after
    /// a timeout).
    pub fn next_seq(&self) -> u64 {
        self.snd_nxt
    }

    /// One past the highest byte ever sent (snd_max).
    pub fn highest_sent(&self) -> u64 {
        self.snd_max
    }

    /// Bytes in flight as the window counts them: `snd_nxt − snd_una`.
    pub fn flight_bytes(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    /// Payload bytes handed to the NIC and not yet reported gone ([`TcpSender::on_left_host`]).
    pub fn in_host_bytes(&self) -> u64 {
        self.in_host
    }

    /// In NewReno fast recovery.
    pub fn in_fast_recovery(&self) -> bool {
        self.in_recovery
    }

    /// DCTCP's α, in `[0, 1]` (1 until the first window ends; unused by NewReno).
    pub fn dctcp_alpha(&self) -> f64 {
        self.alpha as f64 / ALPHA_ONE as f64
    }
}
