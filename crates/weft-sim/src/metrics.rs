//! Measurements: latency histograms, the ideal (policy) allocation per window, Jain's index
//! and relative error (TONIC §V-A eq. 3), and the per-model summary.
//!
//! * Ideal allocation: in each throughput window the bytes actually sent are divided as the
//!   policy would divide them: a top-down water-fill over the policy tree (`prio`: in
//!   priority order; `wfq`: by weight; `drr`: by quantum; `senic`: by rate, capped at the
//!   rate; other nodes: equally), where an application that is backlogged throughout the
//!   window (bulk or unlimited UDP) demands without bound and any other demands what it sent.
//!   A shaping class caps the sum of the applications passing it at rate × window (the
//!   water-fill is repeated with their demands fixed at their scaled-down allocation).
//!   Applications in the same leaf share it equally.
//! * Jain's index per window over the tenants backlogged throughout it, on throughput
//!   normalized by the ideal allocation ([`weft_core::stats::jain`]: (Σx)² / (n Σx²), none
//!   when all are zero); `jain_min` is the lowest over windows with at least two such
//!   tenants.
//! * Histograms ([`Hist`]): [`weft_core::stats::Histogram`] of 2 significant digits, read at
//!   the resolution the figures are published at ([`GRID`]): log-linear, 32 sub-buckets per
//!   power of two (relative error ≤ 3.2 %), each figure its bucket's middle.
//! * Request latency ([`Latency`]): every request that arrived within the run counts, the
//!   unfinished ones (no response by the end, or one lost to a drop) as their age at the end,
//!   a lower bound (right-censored). The true quantile then lies between the rank-th
//!   smallest of all of them (an unfinished request can only take longer than its age) and
//!   the rank-th smallest completed one (larger than any value with fewer completed than the
//!   rank): the former is reported, as a lower bound (`at_least`) unless the latter is in its
//!   bucket or the next (the unfinished requests move it by no more than the histogram's
//!   precision).
//!   Percentiles of completed requests alone read low when many are unfinished: a NIC that
//!   finishes a third of its requests showed the p90 of that third.
//! * Packet delay (bulk and UDP applications: write to wire) likewise: a packet still queued
//!   at the end counts as its age then, a lower bound; a model that starves an application
//!   showed the delays of the few packets it sent, or none.
//!
//! Cost: O(nodes + apps) per window; the histograms are O(1) per sample, a quantile or a
//! CDF O(buckets) (plus sorting them while a histogram is sparse).

use weft_core::policy::{Algo, Classification, NodeId, Program};
use weft_core::stats::{at_rank, jain, rank, Grid, Histogram};

use crate::scenario::Scenario;
use crate::sim::NicRun;

/// The resolution latency figures are published at: 32 buckets per power of two (exact below
/// 64 ps, then at most 1/32 of their values wide), every value from 2^53 ps (2.5 hours) up in
/// the last bucket. A figure is its bucket's middle ([`middle`]).
pub const GRID: Grid = Grid::new(5, 52);

/// A histogram of picosecond values: 2 significant digits (128 buckets per power of two,
/// each within one of [`GRID`]'s), read at [`GRID`] ([`quantile`], [`Latency`]), so its
/// figures are those of a histogram kept on [`GRID`] itself.
pub type Hist = Histogram<2>;

/// The figure of [`GRID`]'s bucket `index`: its middle, ps (the upper of two middles).
pub fn middle(index: u32) -> u64 {
    let (low, width) = GRID.bucket(index);
    low + width / 2
}

/// The `q`-quantile (0..=1) of `h` at [`GRID`] (a bucket's [`middle`], ps), or `None`
/// without samples.
pub fn quantile(h: &Hist, q: f64) -> Option<u64> {
    at_rank(h.coarse(GRID), rank(q, h.count())).map(middle)
}

/// Latencies known exactly (completed requests, packets that left) or only from below
/// (requests unfinished when the run ended, packets still queued then, each counted as its
/// age at the end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latency {
    /// Exact values, ps.
    pub done: Hist,
    /// Lower bounds, ps: the ages at the end of the run of unfinished requests
    /// (request/response applications) or of packets still queued (bulk and UDP
    /// applications).
    pub unfinished: Hist,
}

/// A quantile of a [`Latency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantile {
    /// The value, ps (a bucket's [`middle`], as [`quantile`]).
    pub value: u64,
    /// The quantile is only known to be at least `value`: it falls on unfinished requests.
    pub at_least: bool,
}

impl Latency {
    /// Samples, exact and lower bounds.
    pub fn count(&self) -> u64 {
        self.done.count() + self.unfinished.count()
    }

    /// Adds another's samples.
    pub fn merge(&mut self, o: &Latency) {
        self.done.add(&o.done);
        self.unfinished.add(&o.unfinished);
    }

    /// Per [`GRID`] bucket holding any sample, in increasing order: its index, the exact
    /// samples in it and the lower bounds.
    fn buckets(&self) -> Vec<(u32, u64, u64)> {
        let done = self.done.coarse(GRID).into_iter().map(|(i, c)| (i, c, 0));
        let unfinished = self.unfinished.coarse(GRID).into_iter();
        let mut out: Vec<(u32, u64, u64)> =
            done.chain(unfinished.map(|(i, c)| (i, 0, c))).collect();
        out.sort_unstable_by_key(|r| r.0);
        out.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
                kept.2 += later.2;
            }
            same
        });
        out
    }

    /// The empirical distribution over every sample, exact and lower bounds alike: per
    /// [`GRID`] bucket holding any, in increasing order, its value (the bucket's
    /// [`middle`], ps) and the fraction of the samples at or below it; the last fraction
    /// is 1. Empty without samples. An unfinished request counts at its age, so the true
    /// distribution lies at or right of this one.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let n = self.count();
        let mut seen = 0u64;
        self.buckets()
            .into_iter()
            .map(|(i, d, u)| {
                seen += d + u;
                (middle(i), seen as f64 / n as f64)
            })
            .collect()
    }

    /// The `q`-quantile (0..=1) over every sample, or `None` without samples: the rank-th
    /// smallest, a lower bound of the true quantile, which is at most the rank-th smallest
    /// completed sample; `at_least` unless that is in the same [`GRID`] bucket or the next.
    pub fn quantile(&self, q: f64) -> Option<Quantile> {
        let rank = rank(q, self.count());
        let rows = self.buckets();
        let lo = at_rank(rows.iter().map(|&(i, d, u)| (i, d + u)), rank)?;
        let done: u64 = rows.iter().take_while(|r| r.0 <= lo + 1).map(|r| r.1).sum();
        Some(Quantile {
            value: middle(lo),
            at_least: done < rank,
        })
    }
}

/// Weighted max-min fair division of `total` among `(weight, demand)` items.
pub fn waterfill(total: f64, items: &[(f64, f64)]) -> Vec<f64> {
    let mut out = vec![0.0; items.len()];
    let mut open: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].1 > 0.0 && items[i].0 > 0.0)
        .collect();
    let mut left = total;
    while !open.is_empty() && left > 1e-9 {
        let wsum: f64 = open.iter().map(|&i| items[i].0).sum();
        let mut saturated = Vec::new();
        for &i in &open {
            let share = left * items[i].0 / wsum;
            if items[i].1 - out[i] <= share {
                saturated.push(i);
            }
        }
        if saturated.is_empty() {
            for &i in &open {
                out[i] += left * items[i].0 / wsum;
            }
            break;
        }
        for &i in &saturated {
            left -= items[i].1 - out[i];
            out[i] = items[i].1;
        }
        open.retain(|i| !saturated.contains(i));
    }
    out
}

/// The policy's division of a window's bytes among applications.
pub struct IdealModel {
    prog: std::sync::Arc<Program>,
    /// Leaf node of each application (`None`: unclassified).
    leaf: Vec<Option<NodeId>>,
    /// Shaping classes and the applications whose packets pass them: `(rate_bps, apps)`.
    /// A class caps the sum of its applications.
    shapers: Vec<(u64, Vec<usize>)>,
    /// Applications per leaf node, `(node, apps)`.
    members: Vec<(usize, Vec<usize>)>,
}

impl IdealModel {
    /// Classifies every application's packets.
    pub fn new(sc: &Scenario) -> IdealModel {
        let prog = sc.program.clone();
        let mut leaf = Vec::new();
        let mut shapers: Vec<(u64, Vec<usize>)> = prog
            .shapers
            .iter()
            .map(|s| (s.rate_bps, Vec::new()))
            .collect();
        for (i, a) in sc.apps.iter().enumerate() {
            match prog.classify(&a.meta) {
                Classification::Leaf { node, shaping, .. } => {
                    leaf.push(Some(node));
                    for &s in shaping.as_slice() {
                        shapers[s.index()].1.push(i);
                    }
                }
                Classification::Unclassified { .. } => leaf.push(None),
            }
        }
        shapers.retain(|s| !s.1.is_empty());
        let mut index: rustc_hash::FxHashMap<NodeId, usize> = Default::default();
        let mut members: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, l) in leaf.iter().enumerate() {
            if let Some(l) = *l {
                let k = *index.entry(l).or_insert_with(|| {
                    members.push((l.index(), Vec::new()));
                    members.len() - 1
                });
                members[k].1.push(i);
            }
        }
        IdealModel {
            prog,
            leaf,
            shapers,
            members,
        }
    }

    /// Ideal bytes per application, given each one's demand (`f64::INFINITY` when
    /// backlogged), the window's capacity in bytes and its length in seconds. Shaping
    /// classes cap the sum of their applications: a class over its rate × window has its
    /// applications' demands fixed at their allocation scaled down to the cap, and the
    /// division is repeated so the others get the rest.
    pub fn divide(&self, demand: &[f64], capacity: f64, window_s: f64) -> Vec<f64> {
        let mut d = demand.to_vec();
        let mut alloc = self.divide_tree(&d, capacity, window_s);
        for _ in 0..=self.shapers.len() {
            let mut changed = false;
            for (rate, apps) in &self.shapers {
                let cap = *rate as f64 * window_s / 8.0;
                let total: f64 = apps.iter().map(|&i| alloc[i]).sum();
                if total > cap * (1.0 + 1e-9) {
                    for &i in apps {
                        d[i] = alloc[i] * cap / total;
                    }
                    changed = true;
                }
            }
            if !changed {
                break;
            }
            alloc = self.divide_tree(&d, capacity, window_s);
        }
        alloc
    }

    /// The tree water-fill, without shaping classes.
    fn divide_tree(&self, demand: &[f64], capacity: f64, window_s: f64) -> Vec<f64> {
        let p = &self.prog;
        let n = p.nodes.len();
        let mut node_demand = vec![0.0f64; n];
        let app_demand = demand;
        for (i, d) in app_demand.iter().enumerate() {
            if let Some(l) = self.leaf[i] {
                node_demand[l.index()] += *d;
            }
        }
        for id in (1..n).rev() {
            let mut d = node_demand[id];
            if let Some(parent) = p.nodes[id].parent {
                if let Algo::Senic { .. } = p.node(parent).algo {
                    d = d.min(p.nodes[id].edge.rate_bps as f64 * window_s / 8.0);
                    node_demand[id] = d;
                }
                node_demand[parent.index()] += d;
            }
        }
        let mut alloc = vec![0.0f64; n];
        alloc[0] = capacity.min(node_demand[0]);
        for id in 0..n {
            let node = &p.nodes[id];
            let kids: Vec<usize> = node.children.indices().collect();
            if kids.is_empty() {
                continue;
            }
            let total = alloc[id];
            match node.algo {
                Algo::Prio => {
                    let mut order = kids.clone();
                    order.sort_by_key(|&c| (p.nodes[c].edge.priority, c));
                    let mut left = total;
                    for c in order {
                        let g = left.min(node_demand[c]);
                        alloc[c] = g;
                        left -= g;
                    }
                }
                ref algo => {
                    let items: Vec<(f64, f64)> = kids
                        .iter()
                        .map(|&c| {
                            let e = p.nodes[c].edge;
                            let w = match algo {
                                Algo::Wfq => e.weight as f64,
                                Algo::Drr => e.quantum_bytes as f64,
                                Algo::Senic { .. } => e.rate_bps as f64,
                                _ => 1.0,
                            };
                            (w, node_demand[c])
                        })
                        .collect();
                    for (k, a) in kids.iter().zip(waterfill(total, &items)) {
                        alloc[*k] = a;
                    }
                }
            }
        }
        // Leaves to applications: equal shares within a leaf.
        let mut out = vec![0.0; demand.len()];
        for (l, members) in &self.members {
            let items: Vec<(f64, f64)> = members.iter().map(|&i| (1.0, app_demand[i])).collect();
            for (i, a) in members.iter().zip(waterfill(alloc[*l], &items)) {
                out[*i] = a;
            }
        }
        out
    }
}

/// Per-window results of one run.
#[derive(Debug, Clone)]
pub struct Windows {
    /// Ideal bytes per window per application.
    pub ideal: Vec<Vec<f64>>,
    /// Jain's index per window (`None` with fewer than two backlogged tenants, in the last
    /// window when it is shorter, or when none of the tenants sent anything).
    pub jain: Vec<Option<f64>>,
    /// Tenants backlogged throughout each window.
    pub backlogged: Vec<Vec<usize>>,
}

/// Computes ideal allocations and Jain's index for every window of a run.
pub fn windows(sc: &Scenario, run: &NicRun, model: &IdealModel) -> Windows {
    let napps = sc.apps.len();
    let wsec = sc.window_ps as f64 / 1e12;
    let mut out = Windows {
        ideal: Vec::new(),
        jain: Vec::new(),
        backlogged: Vec::new(),
    };
    for (w, bytes) in run.window_bytes.iter().enumerate() {
        let from = w as u64 * sc.window_ps;
        let to = (from + sc.window_ps).min(sc.duration_ps);
        let greedy: Vec<bool> = sc
            .apps
            .iter()
            .map(|a| a.greedy() && a.active_throughout(from, to))
            .collect();
        let demand: Vec<f64> = (0..napps)
            .map(|i| {
                if greedy[i] {
                    f64::INFINITY
                } else {
                    bytes[i] as f64
                }
            })
            .collect();
        // Each sending host divides what its own link sent by the policy among its own
        // applications.
        let ideal = if sc.network.hosts <= 1 {
            let total: f64 = bytes.iter().sum::<u64>() as f64;
            model.divide(&demand, total, wsec)
        } else {
            let mut ideal = vec![0.0; napps];
            for h in 0..sc.network.hosts {
                let on = |i: usize| sc.apps[i].host == h;
                let d: Vec<f64> = (0..napps)
                    .map(|i| if on(i) { demand[i] } else { 0.0 })
                    .collect();
                let total: f64 = (0..napps).filter(|&i| on(i)).map(|i| bytes[i] as f64).sum();
                for (i, x) in model.divide(&d, total, wsec).into_iter().enumerate() {
                    if on(i) {
                        ideal[i] += x;
                    }
                }
            }
            ideal
        };
        let mut tenants: Vec<usize> = Vec::new();
        for (t, ten) in sc.tenants.iter().enumerate() {
            if ten.apps.iter().any(|&a| greedy[a]) {
                tenants.push(t);
            }
        }
        let x: Vec<f64> = tenants
            .iter()
            .filter_map(|&t| {
                let apps = &sc.tenants[t].apps;
                let got: f64 = apps.iter().map(|&a| bytes[a] as f64).sum();
                let want: f64 = apps.iter().map(|&a| ideal[a]).sum();
                (want > 0.0).then(|| got / want)
            })
            .collect();
        let whole = to - from == sc.window_ps;
        out.jain
            .push((x.len() >= 2 && whole).then(|| jain(&x)).flatten());
        out.ideal.push(ideal);
        out.backlogged.push(tenants);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hist_quantiles_within_bucket_error() {
        let mut h = Hist::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = quantile(&h, 0.5).unwrap() as f64;
        assert!((p50 / 5_000_000.0 - 1.0).abs() < 0.035, "{p50}");
        let p99 = quantile(&h, 0.99).unwrap() as f64;
        assert!((p99 / 9_900_000.0 - 1.0).abs() < 0.035, "{p99}");
        for v in [0u64, 1, 31, 32, 33, 1 << 40, u64::MAX] {
            let back = middle(GRID.index(v));
            if v < 32 {
                assert_eq!(back, v);
            } else if v < 1 << 52 {
                assert!((back as f64 / v as f64 - 1.0).abs() < 0.035, "{v} {back}");
            }
        }
    }

    /// Unfinished requests count, as lower bounds: with most requests unfinished the p90 is
    /// their age, flagged; with one young unfinished request among many completed ones it is
    /// exact.
    #[test]
    fn latency_quantiles_count_unfinished_requests() {
        let mut l = Latency::default();
        for v in 1..=38u64 {
            l.done.record(v * 1_000);
        }
        for _ in 0..62 {
            l.unfinished.record(1_000_000);
        }
        let p90 = l.quantile(0.9).unwrap();
        assert!(p90.at_least, "{p90:?}");
        assert!((p90.value as f64 / 1e6 - 1.0).abs() < 0.035, "{p90:?}");
        // The completed requests alone gave 35 µs.
        let bucket = |v: u64| middle(GRID.index(v));
        assert_eq!(quantile(&l.done, 0.9), Some(bucket(35_000)));
        // Below the unfinished ones: exact.
        let p10 = l.quantile(0.1).unwrap();
        assert_eq!(
            p10,
            Quantile {
                value: bucket(10_000),
                at_least: false
            }
        );

        let mut l = Latency::default();
        for v in 0..1_000u64 {
            l.done.record(5_000 + v);
        }
        l.unfinished.record(10);
        let p90 = l.quantile(0.9).unwrap();
        assert!(!p90.at_least, "{p90:?}");
        assert_eq!(l.count(), 1_001);
        // The p90 falls on an unfinished request (1,000 ps old): exact when the next completed
        // one is in the next bucket (1,010 ps), a lower bound when it is further (2,000 ps).
        for (next, at_least) in [(1_010, false), (2_000, true)] {
            let mut l = Latency::default();
            for _ in 0..90 {
                l.done.record(1_000);
            }
            for _ in 0..10 {
                l.done.record(next);
            }
            l.unfinished.record(1_000);
            assert_eq!(
                l.quantile(0.9),
                Some(Quantile {
                    value: bucket(1_000),
                    at_least
                }),
                "{next}"
            );
        }
        // Nothing completed: every quantile is a lower bound.
        let mut l = Latency::default();
        l.unfinished.record(7);
        assert_eq!(
            l.quantile(0.5),
            Some(Quantile {
                value: 7,
                at_least: true
            })
        );
        assert_eq!(Latency::default().quantile(0.5), None);
    }

    /// The CDF counts every sample, finished or not, a point per bucket in use, ending at 1.
    #[test]
    fn latency_cdf_counts_every_sample() {
        let mut l = Latency::default();
        assert!(l.cdf().is_empty());
        l.done.record(10);
        l.done.record(10);
        l.done.record(5_000_000);
        l.unfinished.record(20);
        let bucket = |v: u64| middle(GRID.index(v));
        assert_eq!(l.cdf(), [(10, 0.5), (20, 0.75), (bucket(5_000_000), 1.0)]);
    }

    #[test]
    fn waterfill_max_min() {
        let a = waterfill(
            10.0,
            &[(1.0, 1.0), (1.0, f64::INFINITY), (2.0, f64::INFINITY)],
        );
        assert!(
            (a[0] - 1.0).abs() < 1e-9 && (a[1] - 3.0).abs() < 1e-9 && (a[2] - 6.0).abs() < 1e-9
        );
    }
}
