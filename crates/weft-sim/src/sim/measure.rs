//! What a run records: the raw results of one NIC model's run ([`NicRun`]: bytes per
//! throughput window, packets, drops, latencies, requests, counters), the gaps between an
//! application's departures ([`Gaps`], SENIC Table 3's jitter), and how a frame's bytes are
//! credited to the windows its wire time spans ([`credit_windows`]).
//!
//! Invariants: no window holds more bytes than its link can carry, and bytes are credited
//! only for the part of a frame's wire time within the run; a frame's parts add up exactly.
//!
//! Cost: O(1) per departure for a frame within one window (nearly all of them), one step
//! per window a longer frame spans; [`Gaps`] keeps at most 1,024 buckets per power of two
//! of the gaps.

use rustc_hash::FxHashMap;
use weft_core::stats::{weighted_quantile, Histogram};

use crate::metrics::Latency;
use crate::nic::{NicCounters, NicKind};

/// What one run of one NIC model produced (raw; [`crate::metrics`] summarizes it).
#[derive(Debug, Clone)]
pub struct NicRun {
    pub kind: NicKind,
    /// Simulated time, ps.
    pub duration_ps: u64,
    /// Bytes sent per throughput window per application: `[window][app]`. A frame's
    /// bytes are spread over the windows its wire time spans, in proportion.
    pub window_bytes: Vec<Vec<u64>>,
    /// Per application: packets sent (that started on the wire), bytes sent within the
    /// run (the sum of the windows: a frame still on the wire at the end counts in part),
    /// drops.
    pub app_packets: Vec<u64>,
    pub app_bytes: Vec<u64>,
    pub app_drops: Vec<u64>,
    /// Per application: latency over the run (response completion for request/response
    /// applications, with the unfinished requests' ages at the end; packet sojourn from write
    /// to wire otherwise, with the ages at the end of the packets still queued then), ps.
    pub app_latency: Vec<Latency>,
    /// Per application: packets written outside requests (bulk, UDP) that were neither sent
    /// nor dropped by the end of the run: still queued in the host or the NIC.
    pub app_queued: Vec<u64>,
    /// Per latency window (of the request's arrival), per request/response application:
    /// completion times and unfinished requests' ages, ps (`None` for other applications).
    pub window_latency: Vec<Vec<Option<Latency>>>,
    /// Bytes on the wire including per-frame overhead (of every frame that started).
    pub wire_bytes: u64,
    /// Time the links spent transmitting within the run, ps, summed over the sending hosts'
    /// links: the part of a frame still on the wire when the run ends is not counted (at
    /// 1 bit/s a 1500 B frame takes 12,000 s).
    pub wire_busy_ps: u64,
    /// Sending hosts' links (`network.hosts`; 1 without a network).
    pub links: u64,
    /// Packets transmitted.
    pub packets: u64,
    /// The model's counters.
    pub counters: NicCounters,
    /// Per application: requests that arrived within the run (request/response
    /// applications; 0 for others).
    pub requests_issued: Vec<u64>,
    /// Per application: requests whose response's last bit left within the run; the others
    /// issued are unfinished.
    pub requests_done: Vec<u64>,
    /// Per application: inter-departure times of its packets (SENIC Table 3).
    pub app_gaps: Vec<Gaps>,
    /// Per application of kind `tcp`: its connections' counts (`None` for the others).
    pub app_tcp: Vec<Option<TcpTotals>>,
    /// Per application over TCP: how long its packets waited in the receiving host, from
    /// reaching its NIC to a receive core finishing with them (ring and CPU), ps, for the
    /// packets finished within the run (empty for the others).
    pub app_rx_delay: Vec<Latency>,
    /// The switch port's counts, when the run had TCP applications.
    pub switch: Option<SwitchTotals>,
    /// The receiving host's counts, when the run had TCP applications.
    pub receiver: Option<ReceiverTotals>,
    /// The run's work, events: every timed event handled, flow started or stopped, packet
    /// written to the NIC model, and instant at which the link and the model were visited
    /// (see [`crate::scenario::DEFAULT_MAX_EVENTS`]).
    pub events: u64,
}

/// What a TCP application's connections counted over the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpTotals {
    /// Connections opened.
    pub connections: u64,
    /// Payload bytes that reached the receivers in order within the run (goodput).
    pub delivered_bytes: u64,
    /// Sized flows (`size`): how many completed within the run, when the first started and
    /// when the last completed, ps.
    pub flows_completed: u64,
    pub first_start_ps: Option<u64>,
    pub last_completion_ps: u64,
    /// Their events, as summary.json writes them.
    pub counts: TcpCounts,
}

/// The events of a TCP application's connections (summary.json's `tcp`, after
/// `goodput_bps`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TcpCounts {
    /// Segments sent again, of them by fast retransmit, and retransmission timeouts.
    pub retransmitted_segments: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    /// Fast recoveries undone: D-SACKs showed every retransmission of one was spurious.
    pub undos: u64,
    /// Window cuts on ECN echoes (DCTCP).
    pub ecn_reductions: u64,
    /// Segments that reached a receiver beyond a hole, and segments that arrived after one
    /// further on in the stream had (reordering, retransmissions aside).
    pub out_of_order: u64,
    pub reordered: u64,
}

/// What the switch port counted over the run ([`crate::net::SwitchPort`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SwitchTotals {
    /// Frames forwarded, dropped for want of buffer, and marked CE.
    pub forwarded: u64,
    pub dropped: u64,
    pub marked: u64,
    /// The largest backlog a frame joined at one port, and the mean over the run of what
    /// all the ports hold together, wire bytes (counts are of all ports together).
    pub max_backlog_bytes: u64,
    pub mean_backlog_bytes: f64,
}

/// What the receiving host's path counted over the run ([`crate::net::RxPath`]), as
/// summary.json's `receiver` writes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiverTotals {
    /// Packets its cores processed, and packets dropped at a full ring.
    pub processed: u64,
    pub dropped: u64,
    /// The most packets a core's ring held when one arrived.
    pub max_ring: u64,
}

/// Running statistics of the gaps between an application's departures, ps: their mean and
/// standard deviation, and their distribution for the jitter ([`Gaps::abs_dev_quantile_ps`]).
///
/// The distribution is kept in the buckets of a 3-digit [`Histogram`], each holding its
/// gaps' count and exact sum: gaps below 2,048 ps one bucket each, larger ones 1,024 buckets
/// per power of two (a bucket is at most 1/1,024 of its gaps wide, 0.1 %). A gap's distance
/// from the mean is taken as its bucket's mean gap's, so it is exact when a bucket's gaps
/// are equal (a constant rate gives 0, not a bucket's width) and off by less than a
/// bucket's width otherwise; the quantile over the buckets is then exact
/// ([`weighted_quantile`]). Memory: the buckets in use, at most 1,024 per power of two of
/// the gaps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gaps {
    last_ps: Option<u64>,
    /// Gaps seen.
    pub n: u64,
    sum: f64,
    sum_sq: f64,
    /// Per bucket (keyed by its lowest gap, ps): gaps in it and their sum, ps.
    buckets: FxHashMap<u64, (u64, u128)>,
}

impl Gaps {
    pub(super) fn add(&mut self, t_ps: u64) {
        if let Some(l) = self.last_ps {
            let gap = t_ps - l;
            let g = gap as f64;
            self.n += 1;
            self.sum += g;
            self.sum_sq += g * g;
            let b = self
                .buckets
                .entry(Histogram::<3>::bucket_of(gap).0)
                .or_default();
            b.0 += 1;
            b.1 += gap as u128;
        }
        self.last_ps = Some(t_ps);
    }

    /// Mean gap, ps.
    pub fn mean_ps(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// Standard deviation of the gaps, ps.
    pub fn std_ps(&self) -> Option<f64> {
        let m = self.mean_ps()?;
        Some((self.sum_sq / self.n as f64 - m * m).max(0.0).sqrt())
    }

    /// The `q`-quantile (0..=1) of the gaps' distances from their mean, |gap − mean|, ps
    /// (the rank-th smallest, rank = ⌈q n⌉), or `None` without a gap: the jitter. Each gap
    /// counts at its bucket's mean gap (see [`Gaps`]).
    pub fn abs_dev_quantile_ps(&self, q: f64) -> Option<f64> {
        let mean = self.mean_ps()?;
        let mut devs: Vec<(f64, u64)> = self
            .buckets
            .values()
            .map(|&(c, sum)| ((sum as f64 / c as f64 - mean).abs(), c))
            .collect();
        weighted_quantile(&mut devs, q)
    }
}

/// Credits a frame's `bytes` to the throughput windows its wire time `[start, start + wire)`
/// overlaps, in proportion to the overlap, and returns how many were credited: the bytes
/// whose share of the wire time falls within the run (`< duration`). A frame within one
/// window (nearly all of them) is credited whole without a division; one spanning windows
/// is split with the running floor `bytes × elapsed / wire`, so the parts add up exactly.
/// `window_bytes` has a row for every window that starts before `duration`.
/// At 1 bit/s a 1500 B frame spans 12,000 s: counted at its start, as it once was, a window
/// read megabits per second on a link of one bit per second.
pub(super) fn credit_windows(
    window_bytes: &mut [Vec<u64>],
    app: usize,
    bytes: u64,
    start: u64,
    wire: u64,
    window_ps: u64,
    duration: u64,
) -> u64 {
    debug_assert!(window_ps > 0, "windows of no time");
    if start >= duration {
        // The run's last instant polls the link once more: that frame is all after the run.
        return 0;
    }
    let end = start.saturating_add(wire).min(duration);
    let first = start / window_ps;
    // The window holding the frame's last instant within the run.
    let last = end.saturating_sub(1).max(start) / window_ps;
    if first == last && end - start == wire {
        window_bytes[first as usize][app] += bytes;
        return bytes;
    }
    // Bytes credited once `t - start` ps of the frame have been sent. (A frame of no wire
    // time, on the fastest links, took the whole-frame path above.)
    debug_assert!(wire > 0, "a frame of no wire time spans no windows");
    let upto = |t: u64| (bytes as u128 * (t - start) as u128 / wire as u128) as u64;
    let mut credited = 0;
    for w in first..=last {
        let to = ((w + 1) * window_ps).min(end);
        let c = upto(to);
        window_bytes[w as usize][app] += c - credited;
        credited = c;
    }
    credited
}

#[cfg(test)]
mod tests {
    use super::{credit_windows, Gaps, Histogram};

    fn windows(n: usize) -> Vec<Vec<u64>> {
        vec![vec![0; 2]; n]
    }

    #[test]
    fn a_frame_within_one_window_is_credited_whole() {
        let mut w = windows(3);
        assert_eq!(
            credit_windows(&mut w, 1, 1500, 1_000, 500, 1_000, 3_000),
            1500
        );
        assert_eq!(w, vec![vec![0, 0], vec![0, 1500], vec![0, 0]]);
        // Ending exactly at the window's end.
        assert_eq!(
            credit_windows(&mut w, 0, 100, 2_900, 100, 1_000, 3_000),
            100
        );
        assert_eq!(w[2], vec![100, 0]);
    }

    #[test]
    fn a_frame_across_windows_is_split_by_its_wire_time() {
        let mut w = windows(4);
        // 1,000 bytes over [500, 3,500): a sixth, a third, a third, a sixth.
        assert_eq!(
            credit_windows(&mut w, 0, 1000, 500, 3_000, 1_000, 4_000),
            1000
        );
        let got: Vec<u64> = w.iter().map(|r| r[0]).collect();
        assert_eq!(got, vec![166, 334, 333, 167]);
    }

    #[test]
    fn the_part_after_the_run_is_not_credited() {
        let mut w = windows(2);
        // Half the frame's wire time is past the 2,000 ps run.
        assert_eq!(
            credit_windows(&mut w, 0, 1000, 1_500, 1_000, 1_000, 2_000),
            500
        );
        assert_eq!(w, vec![vec![0, 0], vec![500, 0]]);
        // A frame of 12,000 s at 1 bit/s in a 1 ms run of 1 µs windows: each window gets its
        // microsecond's share, 1500 B / 1.2e10 µs, which rounds to nothing.
        let mut w = windows(1_000);
        let credited = credit_windows(
            &mut w,
            1,
            1500,
            0,
            12_000 * 10u64.pow(12),
            10u64.pow(6),
            10u64.pow(9),
        );
        assert_eq!(credited, 0);
        assert!(w.iter().all(|r| r[1] == 0));
    }

    #[test]
    fn a_frame_of_no_wire_time_is_credited_at_its_start() {
        let mut w = windows(2);
        assert_eq!(credit_windows(&mut w, 0, 64, 1_999, 0, 1_000, 2_000), 64);
        assert_eq!(w[1][0], 64);
    }

    /// Departures at the given gaps (ps), from 0.
    fn gaps(list: &[u64]) -> Gaps {
        let mut g = Gaps::default();
        let mut t = 0;
        g.add(t);
        for &d in list {
            t += d;
            g.add(t);
        }
        g
    }

    /// The jitter is the 99th percentile of |gap − mean| over the gaps: one late packet in a
    /// hundred is within it, two are not; a constant rate has none, exactly, whatever the
    /// buckets' width; gaps a bucket apart differ as they do.
    #[test]
    fn interdeparture_jitter_is_the_p99_distance_from_the_mean() {
        let mut one = vec![10_000_000u64; 99];
        one.push(20_000_000);
        let g = gaps(&one);
        assert_eq!((g.n, g.mean_ps()), (100, Some(10_100_000.0)));
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(100_000.0));
        assert_eq!(g.abs_dev_quantile_ps(1.0), Some(9_900_000.0));
        let mut two = vec![10_000_000u64; 98];
        two.extend([20_000_000, 20_000_000]);
        let g = gaps(&two);
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(9_800_000.0));
        assert!((g.std_ps().unwrap() - 1_400_000.0).abs() < 1.0, "{g:?}");

        // 12 µs (1500 B at 1 Gbit/s) every time: 0, not the bucket's 8 ns width.
        let g = gaps(&[12_000_000; 1000]);
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(0.0));
        assert_eq!(g.std_ps(), Some(0.0));
        // Small gaps have a bucket each: exact.
        let g = gaps(&[100, 300, 100, 300]);
        assert_eq!(g.abs_dev_quantile_ps(0.99), Some(100.0));
        // Larger ones within 0.1 %: 12 µs ± 200 ns alternating, the distance 200 ns.
        let g = gaps(&[11_800_000, 12_200_000].repeat(50));
        let d = g.abs_dev_quantile_ps(0.99).unwrap();
        assert!((d - 200_000.0).abs() <= 12_200_000.0 / 1024.0, "{d}");
        assert_eq!(Gaps::default().abs_dev_quantile_ps(0.99), None);
        assert_eq!(gaps(&[]).abs_dev_quantile_ps(0.99), None);
        // Buckets are at most 1/1024 of their gaps wide, and in order.
        for v in [
            1023u64,
            1024,
            1025,
            2047,
            2048,
            12_000_000,
            u64::MAX / 2,
            u64::MAX,
        ] {
            let bucket = |v: u64| Histogram::<3>::bucket_of(v).0;
            assert!(bucket(v) < bucket(v.saturating_add(v / 1000 + 2)) || v == u64::MAX);
            assert!(bucket(v) <= bucket(v.saturating_add(1)));
        }
    }
}
