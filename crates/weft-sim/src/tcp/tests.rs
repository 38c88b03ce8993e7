//! Unit tests of the TCP model, one rule at a time. The expected values are worked out from
//! the RFCs' definitions in each test, with hand-made ACKs (the sender's tests do not use
//! the receiver).

use super::*;

const MSS: u64 = 1448;
const US: u64 = 1_000_000;
const MS: u64 = 1_000_000_000;
const SEC: u64 = 1_000_000_000_000;

/// Linux defaults with a data-centre RTO floor of 1 ms.
fn cfg() -> TcpConfig {
    TcpConfig {
        min_rto_ps: MS,
        ..TcpConfig::default()
    }
}

fn bulk(cfg: TcpConfig) -> TcpSender {
    let mut s = TcpSender::new(cfg);
    s.write(u64::MAX);
    s
}

/// Every segment the sender sends at `now`; each leaves the host at once (TSQ is idle).
fn drain(s: &mut TcpSender, now: u64) -> Vec<Segment> {
    let mut out = Vec::new();
    while let Some(seg) = s.poll_send(now) {
        s.on_left_host(seg.len);
        out.push(seg);
        assert!(out.len() < 100_000, "the sender never stops");
    }
    out
}

fn ack(s: &mut TcpSender, now: u64, a: u64) {
    s.on_ack(
        now,
        Ack {
            ack: a,
            ece: false,
            dsack: false,
        },
    );
}

fn ack_ece(s: &mut TcpSender, now: u64, a: u64) {
    s.on_ack(
        now,
        Ack {
            ack: a,
            ece: true,
            dsack: false,
        },
    );
}

fn end(seg: &Segment) -> u64 {
    seg.seq + u64::from(seg.len)
}

fn new_data(seq: u64, n: u64) -> Segment {
    Segment {
        seq,
        len: (n * MSS) as u32,
        retransmit: false,
    }
}

fn resend(seq: u64) -> Segment {
    Segment {
        seq,
        len: MSS as u32,
        retransmit: true,
    }
}

#[test]
fn default_config_is_valid_and_errors_are_reported() {
    assert_eq!(TcpConfig::default().validate(), Ok(()));
    let d = TcpConfig::default();
    assert_eq!(
        TcpConfig { mss: 0, ..d }.validate(),
        Err(TcpConfigError::ZeroMss)
    );
    assert_eq!(
        TcpConfig {
            tso_bytes: 2000,
            ..d
        }
        .validate(),
        Err(TcpConfigError::Tso {
            tso: 2000,
            mss: 1448
        })
    );
    assert_eq!(
        TcpConfig {
            min_rto_ps: 2,
            max_rto_ps: 1,
            ..d
        }
        .validate(),
        Err(TcpConfigError::RtoBounds {
            min_ps: 2,
            max_ps: 1
        })
    );
    assert_eq!(
        TcpConfig {
            rwnd_bytes: 10,
            ..d
        }
        .validate(),
        Err(TcpConfigError::Rwnd {
            rwnd: 10,
            mss: 1448
        })
    );
    assert_eq!(
        TcpConfig {
            dctcp_g_shift: 21,
            ..d
        }
        .validate(),
        Err(TcpConfigError::GShift(21))
    );
    let bad = TcpConfig {
        mss: 0,
        init_cwnd: 0,
        tso_bytes: 0,
        dupthresh: 0,
        ..d
    };
    assert_eq!(bad.normalized().validate(), Ok(()));
    assert_eq!(d.normalized(), d);
    // A sender built from it works.
    let mut s = bulk(bad);
    assert_eq!(drain(&mut s, 0).len(), 1);
}

/// RFC 5681 §3.1: in slow start cwnd grows by at most one SMSS per ACK of new data, so one
/// ACK per segment doubles it every round trip. cwnd starts at init_cwnd · MSS and
/// ssthresh is unlimited.
#[test]
fn slow_start_doubles_cwnd_per_rtt() {
    let mut s = bulk(cfg());
    assert_eq!(s.cwnd_bytes(), 10 * MSS);
    assert_eq!(s.ssthresh_bytes(), u64::MAX);
    let mut t = 0;
    let mut want = 10;
    for round in 0..5 {
        let segs = drain(&mut s, t);
        assert_eq!(segs.len() as u64, want, "round {round}: {segs:?}");
        assert!(segs
            .iter()
            .all(|g| u64::from(g.len) == MSS && !g.retransmit));
        t += 100 * US;
        for g in &segs {
            ack(&mut s, t, end(g));
        }
        want *= 2;
        assert_eq!(s.cwnd_bytes(), want * MSS, "round {round}");
    }
    assert_eq!(s.stats().retransmitted_segments, 0);
}

/// In slow start an ACK grows cwnd by every byte it acknowledges, a stretch ACK too (as
/// Linux's `tcp_slow_start`), up to ssthresh; the rest counts towards congestion avoidance.
#[test]
fn slow_start_counts_every_byte_a_stretch_ack_covers() {
    let mut s = bulk(cfg());
    let segs = drain(&mut s, 0);
    ack(&mut s, 10 * US, end(&segs[3])); // a stretch ACK of 4 segments
    assert_eq!(s.cwnd_bytes(), 14 * MSS);
    ack(&mut s, 10 * US, end(&segs[3]) + 100); // 100 bytes
    assert_eq!(s.cwnd_bytes(), 14 * MSS + 100);

    // Slow start ends at ssthresh: of an ACK that crosses it, only the part below counts
    // in full (after a timeout, ssthresh = 5 MSS and cwnd = 1 MSS).
    let mut s = bulk(cfg());
    let segs = drain(&mut s, 0);
    let t = s.timer_ps().expect("armed");
    s.on_timer(t);
    assert_eq!((s.cwnd_bytes(), s.ssthresh_bytes()), (MSS, 5 * MSS));
    ack(&mut s, t + 10 * US, end(&segs[6]));
    assert_eq!(
        s.cwnd_bytes(),
        5 * MSS,
        "7 MSS acknowledged: 4 to reach ssthresh"
    );
}

/// Sends everything allowed, then acknowledges each segment one by one, one RTT later.
fn round(s: &mut TcpSender, t: &mut u64) {
    let segs = drain(s, *t);
    *t += 100 * US;
    for g in &segs {
        ack(s, *t, end(g));
    }
}

/// RFC 5681 §3.1 and RFC 3465 §2.1: in congestion avoidance cwnd grows by one SMSS each time
/// a window's worth of bytes has been acknowledged: about one SMSS per round trip.
#[test]
fn congestion_avoidance_adds_about_one_mss_per_rtt() {
    let mut s = bulk(cfg());
    let mut t = 0;
    let segs = drain(&mut s, t);
    assert_eq!(segs.len(), 10);
    // A timeout with 10 segments out: ssthresh = 5 MSS, cwnd = 1 MSS.
    let fire = s.timer_ps().unwrap();
    s.on_timer(fire);
    t = fire;
    assert_eq!(s.ssthresh_bytes(), 5 * MSS);
    while s.cwnd_bytes() < s.ssthresh_bytes() {
        round(&mut s, &mut t);
    }
    let start = s.cwnd_bytes();
    let rounds = 12;
    let mut prev = start;
    for r in 0..rounds {
        round(&mut s, &mut t);
        let grew = s.cwnd_bytes() - prev;
        assert!(grew <= MSS, "round {r}: cwnd grew by {grew} bytes");
        prev = s.cwnd_bytes();
    }
    let total = s.cwnd_bytes() - start;
    assert!(
        (rounds - 1) * MSS <= total && total <= rounds * MSS,
        "grew {total} bytes in {rounds} round trips"
    );
}

/// Ten segments out, slow start; segment 3 is lost. ACKs of segments 0 to 2 arrive (cwnd
/// 13 MSS, 6 new segments go out: 16 sent), then duplicate ACKs for byte 3 MSS.
fn lose_segment_3() -> (TcpSender, u64) {
    let mut s = bulk(cfg());
    let segs = drain(&mut s, 0);
    assert_eq!(segs.len(), 10);
    let t = 50 * US;
    for g in &segs[..3] {
        ack(&mut s, t, end(g));
    }
    let more = drain(&mut s, t);
    assert_eq!(more.len(), 6);
    assert_eq!(s.highest_sent(), 16 * MSS);
    (s, t)
}

/// RFC 5681 §3.2 with RFC 6582 §3.2: the third duplicate ACK resends exactly the segment at
/// the ACK point, sets ssthresh = max(FlightSize / 2, 2 SMSS) and cwnd = ssthresh + 3 SMSS;
/// each further duplicate inflates cwnd by one SMSS and lets new data out when cwnd exceeds
/// the flight; the ACK that covers everything sent before the loss ends recovery with
/// cwnd = ssthresh.
#[test]
fn three_dup_acks_resend_the_lost_segment_then_newreno_recovers() {
    let (mut s, mut t) = lose_segment_3();
    t += 10 * US;
    let flight = 16 * MSS - 3 * MSS;
    for k in 1..=2 {
        ack(&mut s, t, 3 * MSS);
        assert_eq!(s.stats().dup_acks, k);
        assert!(drain(&mut s, t).is_empty(), "no limited transmit");
        assert!(!s.in_fast_recovery());
    }
    ack(&mut s, t, 3 * MSS);
    let ssthresh = (flight / 2).max(2 * MSS);
    assert!(s.in_fast_recovery());
    assert_eq!(s.stats().fast_retransmits, 1);
    assert_eq!(s.ssthresh_bytes(), ssthresh);
    assert_eq!(s.cwnd_bytes(), ssthresh + 3 * MSS);
    assert_eq!(drain(&mut s, t), vec![resend(3 * MSS)]);
    // Nine more duplicates (segments 4 to 9 and 10 to 15 arrived: 12 in all).
    let mut new_segs = Vec::new();
    for _ in 0..9 {
        ack(&mut s, t, 3 * MSS);
        new_segs.extend(drain(&mut s, t));
    }
    let cwnd = ssthresh + 12 * MSS;
    assert_eq!(s.cwnd_bytes(), cwnd);
    // New data while cwnd exceeds the flight, whole MSS only.
    let allowed = (cwnd - flight) / MSS;
    assert_eq!(new_segs.len() as u64, allowed, "{new_segs:?}");
    for (i, g) in new_segs.iter().enumerate() {
        assert_eq!(*g, new_data((16 + i as u64) * MSS, 1));
    }
    // The resent segment arrives: the receiver has everything up to 16 MSS.
    t += 50 * US;
    ack(&mut s, t, 16 * MSS);
    assert!(!s.in_fast_recovery());
    assert_eq!(s.cwnd_bytes(), ssthresh);
    assert_eq!(s.stats().retransmitted_segments, 1);
    assert_eq!(s.stats().timeouts, 0);
}

/// Segment 3 was only late (reordered behind 4 to 6): the third duplicate ACK resends it,
/// the original then arrives and the receiver reports the resent copy received twice
/// (D-SACK). Every retransmission of the recovery was spurious, so the window and
/// threshold go back to what they were before it (RFC 3708 detection, Linux's DSACK undo)
/// and the duplicate-ACK threshold grows to the reordering seen (3 duplicates: 4); a later
/// real loss needs that many duplicates, and is not undone without a D-SACK.
#[test]
fn a_dsack_for_every_retransmission_undoes_the_recovery() {
    let (mut s, mut t) = lose_segment_3();
    let (cwnd, ssthresh) = (s.cwnd_bytes(), s.ssthresh_bytes());
    t += 10 * US;
    for _ in 0..3 {
        ack(&mut s, t, 3 * MSS);
    }
    assert!(s.in_fast_recovery());
    assert_eq!(drain(&mut s, t), vec![resend(3 * MSS)]);
    assert!(s.cwnd_bytes() < cwnd);
    // The late original: everything up to segment 7 in order (4 to 6 had come).
    ack(&mut s, t, 7 * MSS);
    assert!(s.in_fast_recovery(), "a partial ACK: 16 MSS were sent");
    assert_eq!(s.stats().undos, 0);
    let dsack = |s: &mut TcpSender, a: u64| {
        s.on_ack(
            t,
            Ack {
                ack: a,
                ece: false,
                dsack: true,
            },
        )
    };
    // The partial ACK resent segment 7 (not lost either): two retransmissions to account
    // for before the recovery is undone.
    assert_eq!(drain(&mut s, t), vec![resend(7 * MSS)]);
    dsack(&mut s, 7 * MSS);
    assert_eq!(
        s.stats().undos,
        0,
        "one retransmission not reported twice yet"
    );
    ack(&mut s, t, 16 * MSS);
    dsack(&mut s, 16 * MSS);
    assert_eq!(s.stats().undos, 1);
    assert!(!s.in_fast_recovery());
    assert_eq!(s.cwnd_bytes(), cwnd, "the window before the recovery");
    assert_eq!(s.ssthresh_bytes(), ssthresh);
    // The threshold is now 4: three duplicate ACKs no longer resend.
    let sent = drain(&mut s, t);
    assert!(sent.len() > 5, "{sent:?}");
    let una = 17 * MSS;
    ack(&mut s, t, una);
    for k in 1..=3 {
        ack(&mut s, t, una);
        assert!(!s.in_fast_recovery(), "after {k} duplicates");
    }
    ack(&mut s, t, una);
    assert!(s.in_fast_recovery(), "the fourth duplicate");
    assert_eq!(drain(&mut s, t), vec![resend(una)]);
    // A D-SACK for something else does not undo a recovery with an unreported resend...
    let reduced = s.cwnd_bytes();
    let all = s.highest_sent();
    ack(&mut s, t + 50 * US, all);
    assert!(!s.in_fast_recovery());
    assert!(s.cwnd_bytes() < cwnd && s.cwnd_bytes() <= reduced);
    assert_eq!(s.stats().undos, 1);
}

/// The receiver marks an ACK D-SACK when every byte of the segment that triggered it had
/// arrived before: below the ACK point, or held above a hole; not for new bytes.
#[test]
fn receiver_reports_segments_received_twice() {
    let m = MSS as u32;
    let mut r = TcpReceiver::new();
    assert!(!r.on_segment(0, m, false).dsack);
    assert!(r.on_segment(0, m, false).dsack, "below the ACK point");
    assert!(!r.on_segment(2 * MSS, m, false).dsack, "new, above a hole");
    assert!(r.on_segment(2 * MSS, m, false).dsack, "held above the hole");
    assert!(
        !r.on_segment(MSS, 2 * m, false).dsack,
        "fills the hole, partly new"
    );
    assert_eq!(r.stats().duplicates, 1);
}

/// RFC 6582 §3.2 step 3: an ACK that covers new data but not everything up to `recover`
/// resends the next unacknowledged segment at once, deflates cwnd by the bytes it
/// acknowledged and adds one SMSS back (it acknowledged at least one), and recovery goes on.
#[test]
fn partial_ack_resends_the_next_hole() {
    // Segments 3 and 6 lost.
    let (mut s, mut t) = lose_segment_3();
    t += 10 * US;
    for _ in 0..3 {
        ack(&mut s, t, 3 * MSS); // from segments 4, 5, 7
    }
    assert_eq!(drain(&mut s, t), vec![resend(3 * MSS)]);
    for _ in 0..8 {
        ack(&mut s, t, 3 * MSS); // 8, 9, 10..15
        drain(&mut s, t);
    }
    let before = s.cwnd_bytes();
    let rto = s.rto_ps();
    // Segment 3's resend arrives; segment 6 is still missing.
    t += 50 * US;
    ack(&mut s, t, 6 * MSS);
    assert!(s.in_fast_recovery());
    assert_eq!(s.cwnd_bytes(), before - 3 * MSS + MSS);
    assert_eq!(
        s.timer_ps(),
        Some(t + rto),
        "the timer restarts on the partial ACK"
    );
    let out = drain(&mut s, t);
    assert_eq!(out.first(), Some(&resend(6 * MSS)), "{out:?}");
    assert!(out[1..].iter().all(|g| !g.retransmit));
    let recover_point = 16 * MSS;
    t += 50 * US;
    ack(&mut s, t, recover_point);
    assert!(!s.in_fast_recovery());
    assert_eq!(s.cwnd_bytes(), s.ssthresh_bytes());
    assert_eq!(s.stats().retransmitted_segments, 2);
    assert_eq!(s.stats().fast_retransmits, 1);
}

/// RFC 6582 §3.2 step 2: duplicate ACKs that do not cover more than `recover` (here, set by
/// a timeout) do not start a fast retransmit.
#[test]
fn dup_acks_below_recover_after_a_timeout_do_not_fast_retransmit() {
    let mut s = bulk(cfg());
    drain(&mut s, 0);
    let fire = s.timer_ps().unwrap();
    s.on_timer(fire);
    assert_eq!(drain(&mut s, fire), vec![resend(0)]);
    for _ in 0..5 {
        ack(&mut s, fire + US, 0);
    }
    assert_eq!(s.stats().fast_retransmits, 0);
    assert!(!s.in_fast_recovery());
}

/// RFC 6298 §2 by hand, in floating point: SRTT, RTTVAR and RTO over a series of samples.
struct Rfc6298 {
    srtt: f64,
    rttvar: f64,
    first: bool,
}

impl Rfc6298 {
    fn sample(&mut self, r: f64, min: f64, max: f64) -> f64 {
        if self.first {
            self.srtt = r;
            self.rttvar = r / 2.0;
            self.first = false;
        } else {
            self.rttvar = 0.75 * self.rttvar + 0.25 * (self.srtt - r).abs();
            self.srtt = 0.875 * self.srtt + 0.125 * r;
        }
        (self.srtt + (4.0 * self.rttvar).max(1.0)).clamp(min, max)
    }
}

/// Sends one MSS at `t` and acknowledges it `r` later.
fn one_sample(s: &mut TcpSender, t: u64, r: u64) {
    let before = s.highest_sent();
    s.write(MSS);
    let segs = drain(s, t);
    assert_eq!(segs, vec![new_data(before, 1)]);
    assert_eq!(s.timer_ps(), Some(t + s.rto_ps()), "RFC 6298 §5.1");
    ack(s, t + r, before + MSS);
    assert_eq!(s.timer_ps(), None, "RFC 6298 §5.2");
}

#[test]
fn rto_follows_rfc6298_with_min_bound_backoff_and_karn() {
    let c = TcpConfig {
        min_rto_ps: MS,
        max_rto_ps: 60 * SEC,
        init_rto_ps: SEC,
        ..cfg()
    };
    let mut s = TcpSender::new(c);
    assert_eq!(s.rto_ps(), SEC, "RFC 6298 §2.1");
    assert_eq!(s.srtt_ps(), None);
    let mut hand = Rfc6298 {
        srtt: 0.0,
        rttvar: 0.0,
        first: true,
    };
    let (min, max) = (MS as f64, 60.0 * SEC as f64);
    let mut t = 0;
    let mut floored = 0;
    for r_us in [100, 300, 200, 2_000, 5_000, 1_000, 1_000, 1_000] {
        let r = r_us * US;
        one_sample(&mut s, t, r);
        t += r + 10 * US;
        let want = hand.sample(r as f64, min, max);
        let got = s.rto_ps() as f64;
        assert!(
            (got - want).abs() <= 32.0,
            "sample {r_us} us: rto {got} ps, RFC 6298 gives {want}"
        );
        assert!((s.srtt_ps().unwrap() as f64 - hand.srtt).abs() <= 8.0);
        assert!((s.rttvar_ps() as f64 - hand.rttvar).abs() <= 8.0);
        if want == min {
            floored += 1;
        }
    }
    assert!(floored >= 2, "the samples exercise min_rto");
    assert_eq!(s.stats().rtt_samples, 8);

    // Backoff (RFC 6298 §5.5, §5.6): each expiry doubles the RTO and restarts the timer.
    let rto0 = s.rto_ps();
    s.write(MSS);
    let seq = s.highest_sent();
    assert_eq!(drain(&mut s, t).len(), 1);
    let deadline = t + rto0;
    assert_eq!(s.timer_ps(), Some(deadline));
    s.on_timer(deadline - 1);
    assert_eq!(
        s.stats().timeouts,
        0,
        "a call before the deadline does nothing"
    );
    s.on_timer(deadline);
    assert_eq!(s.stats().timeouts, 1);
    assert_eq!(s.rto_ps(), 2 * rto0);
    assert_eq!(s.timer_ps(), Some(deadline + 2 * rto0));
    assert_eq!(drain(&mut s, deadline), vec![resend(seq)]);
    let second = deadline + 2 * rto0;
    s.on_timer(second);
    assert_eq!(s.rto_ps(), 4 * rto0);
    assert_eq!(s.timer_ps(), Some(second + 4 * rto0));
    assert_eq!(drain(&mut s, second), vec![resend(seq)]);

    // Karn (RFC 6298 §3): the ACK of resent data gives no sample; the backed-off RTO stays.
    let srtt = s.srtt_ps();
    ack(&mut s, second + 3 * MS, seq + MSS);
    assert_eq!(s.stats().rtt_samples, 8);
    assert_eq!(s.srtt_ps(), srtt);
    assert_eq!(s.rto_ps(), 4 * rto0);
    assert_eq!(s.timer_ps(), None);
    s.on_timer(second + 100 * MS);
    assert_eq!(s.stats().timeouts, 2, "no timer armed: nothing happens");

    // A new sample recomputes the RTO from SRTT and RTTVAR: the backoff collapses.
    let t = second + 10 * MS;
    one_sample(&mut s, t, 1_000 * US);
    let want = hand.sample((1_000 * US) as f64, min, max);
    assert!((s.rto_ps() as f64 - want).abs() <= 32.0);
}

#[test]
fn rto_backoff_stops_at_max_rto() {
    let c = TcpConfig {
        min_rto_ps: 100 * MS,
        max_rto_ps: 300 * MS,
        init_rto_ps: 100 * MS,
        ..cfg()
    };
    let mut s = TcpSender::new(c);
    s.write(MSS);
    drain(&mut s, 0);
    let mut rtos = Vec::new();
    for _ in 0..4 {
        let t = s.timer_ps().unwrap();
        s.on_timer(t);
        drain(&mut s, t);
        rtos.push(s.rto_ps() / MS);
    }
    assert_eq!(rtos, vec![200, 300, 300, 300]);
}

/// RFC 6298 §5.3: an ACK of new data restarts the timer at now + RTO.
#[test]
fn new_ack_restarts_the_timer() {
    let mut s = bulk(cfg());
    let segs = drain(&mut s, 0);
    let rto = s.rto_ps();
    assert_eq!(s.timer_ps(), Some(rto));
    ack(&mut s, 70 * US, end(&segs[0]));
    assert_eq!(s.timer_ps(), Some(70 * US + s.rto_ps()));
}

/// RFC 5681 §3.1 on a timeout: ssthresh = max(FlightSize / 2, 2 SMSS), cwnd = 1 SMSS, and
/// the sender resends from snd_una one MSS at a time under a slow-starting window (go back
/// N). A second timeout of the same data keeps ssthresh.
#[test]
fn timeout_goes_back_n_from_snd_una() {
    let mut s = bulk(cfg());
    let segs = drain(&mut s, 0);
    // A stretch ACK of 2 segments: cwnd 12 MSS, 8 MSS in flight, 4 more go out.
    ack(&mut s, 50 * US, end(&segs[1]));
    let sent = drain(&mut s, 50 * US);
    assert_eq!(sent.len(), 4);
    let flight = s.highest_sent() - 2 * MSS;
    let fire = s.timer_ps().unwrap();
    s.on_timer(fire);
    assert_eq!(s.stats().timeouts, 1);
    assert_eq!(s.ssthresh_bytes(), (flight / 2).max(2 * MSS));
    assert_eq!(s.cwnd_bytes(), MSS);
    assert_eq!(s.next_seq(), 2 * MSS);
    assert_eq!(drain(&mut s, fire), vec![resend(2 * MSS)]);
    // Fires again before any progress: ssthresh is held, not halved from 1 MSS of flight.
    let again = s.timer_ps().unwrap();
    s.on_timer(again);
    assert_eq!(s.ssthresh_bytes(), (flight / 2).max(2 * MSS));
    assert_eq!(drain(&mut s, again), vec![resend(2 * MSS)]);
    // Slow start through the resends: 1, 2, 4 segments per round trip.
    let mut t = again + 100 * US;
    ack(&mut s, t, 3 * MSS);
    assert_eq!(drain(&mut s, t), vec![resend(3 * MSS), resend(4 * MSS)]);
    t += 100 * US;
    ack(&mut s, t, 4 * MSS);
    ack(&mut s, t, 5 * MSS);
    assert_eq!(
        drain(&mut s, t),
        (5..9).map(|i| resend(i * MSS)).collect::<Vec<_>>()
    );
    // Past the highest byte sent, new data again.
    let hi = s.highest_sent();
    t += 100 * US;
    for i in 6..=9 {
        ack(&mut s, t, i * MSS);
    }
    let out = drain(&mut s, t);
    assert!(out
        .iter()
        .all(|g| g.seq < hi && g.retransmit || g.seq >= hi && !g.retransmit));
    assert!(out.iter().any(|g| !g.retransmit));
}

/// An ACK beyond what was sent, or below snd_una, changes nothing.
#[test]
fn bogus_acks_are_ignored() {
    let mut s = bulk(cfg());
    drain(&mut s, 0);
    let cwnd = s.cwnd_bytes();
    ack(&mut s, US, 100 * MSS);
    assert_eq!((s.acked(), s.cwnd_bytes()), (0, cwnd));
    ack(&mut s, US, 2 * MSS);
    ack(&mut s, US, MSS);
    assert_eq!(s.acked(), 2 * MSS);
    assert_eq!(s.stats().ignored_acks, 2);
}

fn dctcp() -> TcpConfig {
    TcpConfig {
        cc: Cc::Dctcp,
        dctcp_g_shift: 4,
        ..cfg()
    }
}

/// RFC 8257 §3.3: α starts at 1; when an ACK passes DCTCP.WindowEnd (initially snd_una),
/// α ← (1 − g) α + g F with F the fraction of the window's acknowledged bytes that were
/// ECN-echoed, and the next window ends at SND.NXT. §3.4: on an ECN echo,
/// cwnd ← cwnd (1 − α / 2) and ssthresh ← cwnd, at most once per window of data.
#[test]
fn dctcp_alpha_and_one_cut_per_window() {
    let g = 1.0 / 16.0;
    let mut s = bulk(dctcp());
    assert_eq!(s.dctcp_alpha(), 1.0);
    let segs = drain(&mut s, 0);
    let t = 100 * US;
    // The first ACK ends the first window (one unmarked segment): F = 0.
    ack(&mut s, t, end(&segs[0]));
    let mut alpha = (1.0 - g) * 1.0 + g * 0.0;
    assert!((s.dctcp_alpha() - alpha).abs() < 1e-5);
    // The next window ends at 10 MSS; segments 2, 5 and 8 are marked.
    let marked = [2, 5, 8];
    let mut cwnd_before_cut = 0;
    for (i, g_seg) in segs.iter().enumerate().skip(1) {
        if i == 2 {
            cwnd_before_cut = s.cwnd_bytes();
        }
        if marked.contains(&i) {
            ack_ece(&mut s, t, end(g_seg));
        } else {
            ack(&mut s, t, end(g_seg));
        }
        assert!(
            (s.dctcp_alpha() - alpha).abs() < 1e-5,
            "α changed within the window"
        );
    }
    assert_eq!(s.stats().ecn_reductions, 1, "one cut per window of data");
    let cut = cwnd_before_cut as f64 * (1.0 - alpha / 2.0);
    // After the cut the window only grows by congestion avoidance: at most 1 MSS here.
    let cwnd = s.cwnd_bytes() as f64;
    assert!(
        cwnd >= cut - 1.0 && cwnd <= cut + MSS as f64,
        "cwnd {cwnd}, cut to {cut}"
    );
    assert!(s.ssthresh_bytes() as f64 <= cut + 1.0);
    // Segment 10 (unmarked) passes WindowEnd = 10 MSS: F = 3 marked / 10 acknowledged.
    let segs = drain(&mut s, t);
    assert!(segs.len() >= 2);
    let t = t + 100 * US;
    ack(&mut s, t, end(&segs[0]));
    alpha = (1.0 - g) * alpha + g * (3.0 / 10.0);
    assert!(
        (s.dctcp_alpha() - alpha).abs() < 1e-5,
        "α {} want {alpha}",
        s.dctcp_alpha()
    );
    // A mark on data sent after the cut: a new window, a new cut.
    let before = s.cwnd_bytes();
    ack_ece(&mut s, t, end(&segs[1]));
    assert_eq!(s.stats().ecn_reductions, 2);
    let want = before as f64 * (1.0 - alpha / 2.0);
    assert!(
        (s.cwnd_bytes() as f64 - want).abs() <= 1.0,
        "{} vs {want}",
        s.cwnd_bytes()
    );
}

/// The DCTCP cut never takes cwnd below 2 MSS (the floor this model uses, as Linux).
#[test]
fn dctcp_cut_floor_is_two_mss() {
    let mut s = bulk(TcpConfig {
        init_cwnd: 2,
        ..dctcp()
    });
    let segs = drain(&mut s, 0);
    assert_eq!(segs.len(), 2);
    ack_ece(&mut s, US, end(&segs[0])); // α = 1: half of 2 MSS would be 1 MSS
    assert_eq!(s.stats().ecn_reductions, 1);
    assert_eq!(s.cwnd_bytes(), 2 * MSS);
    assert_eq!(s.ssthresh_bytes(), 2 * MSS);
}

/// NewReno does not use ECN: ECN echoes change nothing.
#[test]
fn newreno_ignores_ece() {
    let mut s = bulk(cfg());
    let segs = drain(&mut s, 0);
    for g in &segs {
        ack_ece(&mut s, US, end(g));
    }
    assert_eq!(s.stats().ecn_reductions, 0);
    assert_eq!(s.cwnd_bytes(), 20 * MSS);
}

/// TSQ as Linux checks it: a segment goes below the socket while less than tsq_bytes are
/// there (so one may pass the bound), one when none is in the host.
#[test]
fn tsq_blocks_and_left_host_releases() {
    let mut s = bulk(TcpConfig {
        tsq_bytes: 2 * MSS,
        ..cfg()
    });
    assert!(s.poll_send(0).is_some());
    assert!(s.poll_send(0).is_some());
    assert_eq!(s.poll_send(0), None, "cwnd allows 10, TSQ 2");
    assert_eq!(s.in_host_bytes(), 2 * MSS);
    s.on_left_host(MSS as u32);
    assert_eq!(s.poll_send(0), Some(new_data(2 * MSS, 1)));
    assert_eq!(s.poll_send(0), None);

    let mut s = bulk(TcpConfig {
        tsq_bytes: 0,
        tso_bytes: 4 * MSS as u32,
        ..cfg()
    });
    assert_eq!(
        s.poll_send(0),
        Some(new_data(0, 4)),
        "one segment when nothing is below"
    );
    assert_eq!(s.poll_send(0), None);
    s.on_left_host(4 * MSS as u32);
    assert_eq!(s.poll_send(0), Some(new_data(4 * MSS, 4)));

    // Below the bound by one byte: a whole segment more goes.
    let mut s = bulk(TcpConfig {
        tsq_bytes: 3 * MSS,
        tso_bytes: 2 * MSS as u32,
        ..cfg()
    });
    assert_eq!(s.poll_send(0), Some(new_data(0, 2)));
    assert_eq!(s.poll_send(0), Some(new_data(2 * MSS, 2)), "2 MSS < 3 MSS");
    assert_eq!(s.poll_send(0), None, "4 MSS held");
    s.on_left_host(MSS as u32);
    assert_eq!(s.poll_send(0), None, "3 MSS held");
    s.on_left_host(1);
    assert_eq!(s.poll_send(0), Some(new_data(4 * MSS, 2)));
}

/// A new-data segment is min(tso_bytes, room rounded down to whole MSS), unless the rest
/// of the send buffer is shorter; the receiver window bounds the flight.
#[test]
fn segments_are_tso_sized_and_whole_mss() {
    let mut s = TcpSender::new(TcpConfig {
        tso_bytes: 4 * MSS as u32,
        ..cfg()
    });
    s.write(9 * MSS + MSS / 2);
    let lens: Vec<u64> = drain(&mut s, 0).iter().map(|g| u64::from(g.len)).collect();
    assert_eq!(lens, vec![4 * MSS, 4 * MSS, MSS + MSS / 2]);

    let mut s = bulk(TcpConfig {
        tso_bytes: 4 * MSS as u32,
        rwnd_bytes: 5 * MSS + MSS / 2,
        ..cfg()
    });
    let lens: Vec<u64> = drain(&mut s, 0).iter().map(|g| u64::from(g.len)).collect();
    assert_eq!(
        lens,
        vec![4 * MSS, MSS],
        "rwnd room 1.5 MSS rounds down to 1 MSS"
    );

    // A short tail waits for room for all of it.
    let mut s = TcpSender::new(TcpConfig {
        init_cwnd: 1,
        ..cfg()
    });
    s.write(MSS + 10);
    assert_eq!(drain(&mut s, 0), vec![new_data(0, 1)]);
    ack(&mut s, US, MSS);
    let tail = drain(&mut s, US);
    assert_eq!(tail.len(), 1);
    assert_eq!((tail[0].seq, tail[0].len), (MSS, 10));
    ack(&mut s, 2 * US, MSS + 10);
    assert!(s.all_acked());
    assert_eq!(s.timer_ps(), None);
}

#[test]
fn receiver_acks_counts_and_echoes_ce() {
    let m = MSS as u32;
    let mm = MSS;
    let mut r = TcpReceiver::new();
    assert_eq!(
        r.on_segment(0, m, false),
        Ack {
            ack: mm,
            ece: false,
            dsack: false
        }
    );
    // Segment 2 before segment 1: out of order, hole before it.
    assert_eq!(
        r.on_segment(2 * mm, m, true),
        Ack {
            ack: mm,
            ece: true,
            dsack: false
        }
    );
    assert_eq!(r.stats().out_of_order, 1);
    assert_eq!(r.stats().reordered, 0);
    // Segment 1 late: fills the hole, reordered.
    assert_eq!(r.on_segment(mm, m, false).ack, 3 * mm);
    assert_eq!(r.stats().reordered, 1);
    // Segment 0 again: a duplicate, not reordered.
    assert_eq!(r.on_segment(0, m, false).ack, 3 * mm);
    assert_eq!(r.stats().duplicates, 1);
    assert_eq!(r.stats().reordered, 1);
    // 5, then 4 (reordered), then 4 again (already held: neither), then 3 fills.
    assert_eq!(r.on_segment(5 * mm, m, false).ack, 3 * mm);
    assert_eq!(r.on_segment(4 * mm, m, false).ack, 3 * mm);
    assert_eq!(r.holes(), 1, "4 and 5 merged");
    assert_eq!(r.stats().reordered, 2);
    assert_eq!(r.on_segment(4 * mm, m, false).ack, 3 * mm);
    assert_eq!(r.stats().reordered, 2);
    assert_eq!(
        r.on_segment(3 * mm, m, true),
        Ack {
            ack: 6 * mm,
            ece: true,
            dsack: false
        }
    );
    assert_eq!(r.holes(), 0);
    let st = r.stats();
    assert_eq!(st.segments, 8);
    assert_eq!(st.out_of_order, 4);
    assert_eq!(st.duplicates, 1);
    assert_eq!(st.reordered, 3);
    assert_eq!(st.ce_marked, 2);
    assert_eq!(r.delivered(), 6 * mm);
    // Ranges merging across several holes, and an overlapping segment.
    for i in [10, 12, 14, 8] {
        r.on_segment(i * mm, m, false);
    }
    assert_eq!(r.holes(), 4);
    assert_eq!(r.received_bytes(), 10 * mm);
    r.on_segment(9 * mm, 6 * m, false); // covers 9..15: merges 8..15 into one
    assert_eq!(r.holes(), 1);
    assert_eq!(r.received_bytes(), 6 * mm + 7 * mm);
    r.on_segment(6 * mm, 2 * m, false);
    assert_eq!(r.delivered(), 15 * mm);
    assert_eq!(r.holes(), 0);
    // A zero-length segment is acknowledged and changes nothing else.
    assert_eq!(r.on_segment(100 * mm, 0, false).ack, 15 * mm);
    assert_eq!(r.highest_received(), 15 * mm);
}
