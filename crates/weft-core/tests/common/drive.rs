//! A closed-loop link driver for throughput tests: it offers each leaf's packets from a
//! [`Source`] (backlogged: kept topped up; or a constant bit rate), dequeues whenever the
//! link is free (the engine's `next_wakeup` when nothing is eligible), transmits at the link
//! rate with its per-frame overhead, and counts what each leaf sent in a steady window.
//!
//! Unlike `weft_core::sched::link::run`, which takes every arrival up front, a backlogged
//! source here is refilled as its packets leave: it always holds `depth` packets in the
//! engine (queued, waiting for admission or deferred), however fast it is served, and never
//! meets its leaf's limits.

#![allow(dead_code)] // each test binary uses a part

use std::collections::VecDeque;
use std::sync::Arc;

use weft_core::classifier::PacketMeta;
use weft_core::policy::{Classification, Program};
use weft_core::sched::link::wire_ps;
use weft_core::sched::{Engine, Packet, Update};

/// Empties every shaping class's token bucket at time 0, through the public live-update API
/// (a bucket's tokens are kept across an update, capped at the new depth: set the depth to
/// one byte, then back). A bucket starts full; a class that runs only a little above its rate
/// then spends a 64 KiB burst over milliseconds, which a short run would measure as rate.
/// Starting empty, the steady state begins at once. `fluid_check`'s
/// `premise_emptied_buckets_start_empty` checks the premise on both engines.
pub(crate) fn empty_buckets<E: Engine>(engine: &mut E, prog: &Program) {
    for (shaper, s) in prog.shaper_ids() {
        for burst_bytes in [1, s.burst_bytes] {
            let u = Update::Shaper {
                shaper,
                rate_bps: s.rate_bps,
                burst_bytes,
            };
            engine
                .update(u, 0)
                .unwrap_or_else(|e| panic!("update {u:?}: {e}"));
        }
    }
}

/// How a leaf's packets arrive.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// Always `depth` packets held by the engine: one arrives as soon as one leaves (the
    /// first `depth` at time 0). Sizes cycle through the list.
    Backlog { depth: usize, sizes: Vec<u32> },
    /// A constant bit rate of frame bytes (`rate_bps` bits/s of frames, without the link's
    /// overhead), no randomness: packet `k` arrives when the frames before it, at that rate,
    /// are done. Sizes cycle through the list. Above the leaf's share this floods it: the
    /// queue fills to its limits and arrivals are dropped.
    Cbr { rate_bps: f64, sizes: Vec<u32> },
}

/// One leaf's traffic: which leaf (by node name), the packet fields that classify to it, and
/// its source.
#[derive(Debug, Clone)]
pub(crate) struct Feed {
    pub leaf: String,
    pub meta: PacketMeta,
    pub source: Source,
}

impl Feed {
    pub(crate) fn new(leaf: &str, meta: &str, source: Source) -> Feed {
        Feed {
            leaf: leaf.into(),
            meta: meta
                .parse()
                .unwrap_or_else(|e| panic!("packet fields {meta:?}: {e:?}")),
            source,
        }
    }
}

/// What one leaf did.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeafResult {
    /// Frame bytes of the packets that started in the window.
    pub bytes: u64,
    /// Those packets.
    pub packets: u64,
    /// Their queueing delays (start of transmission − arrival), ps.
    pub delays_ps: Vec<u64>,
    /// Ages at the end of the run of the packets still held then, ps.
    pub held_ages_ps: Vec<u64>,
    /// Packets dropped on arrival over the whole run.
    pub dropped: u64,
}

/// What a run did: per feed, in the order given.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub leaves: Vec<LeafResult>,
    /// The measurement window, ps.
    pub window_ps: u64,
    /// The link's per-frame overhead, bytes.
    pub overhead: u64,
}

impl Outcome {
    /// Feed `i`'s frame throughput over the window, bits/s.
    pub(crate) fn frame_bps(&self, i: usize) -> f64 {
        self.leaves[i].bytes as f64 * 8.0 / (self.window_ps as f64 * 1e-12)
    }
    /// Feed `i`'s wire throughput (frames + the link's per-frame overhead), bits/s.
    pub(crate) fn wire_bps(&self, i: usize) -> f64 {
        let l = &self.leaves[i];
        (l.bytes + l.packets * self.overhead) as f64 * 8.0 / (self.window_ps as f64 * 1e-12)
    }
    /// Median delay of feed `i`'s packets: those sent in the window and, as lower bounds,
    /// those still held at the end (a class never served has the run's length as its delay).
    pub(crate) fn median_delay_ps(&self, i: usize) -> Option<u64> {
        let l = &self.leaves[i];
        let mut all: Vec<u64> = l.delays_ps.iter().chain(&l.held_ages_ps).copied().collect();
        all.sort_unstable();
        all.get(all.len() / 2).copied()
    }
}

struct State {
    class: Classification,
    meta: PacketMeta,
    source: Source,
    /// Packets offered so far (indexes the size cycle).
    offered: u64,
    /// Frame bits offered so far (a CBR source's clock).
    bits: u128,
    /// Next CBR arrival, ps.
    next_ps: u64,
    /// Arrival times of the packets the engine holds, oldest first (one flow per leaf: they
    /// leave in this order).
    held: VecDeque<u64>,
}

impl State {
    fn size(&self) -> u32 {
        let sizes = match &self.source {
            Source::Backlog { sizes, .. } | Source::Cbr { sizes, .. } => sizes,
        };
        sizes[(self.offered % sizes.len() as u64) as usize]
    }
}

/// Runs `feeds` through `engine` (running `prog`) for `run_ps`, measuring from `warm_ps` on.
pub(crate) fn drive<E: Engine>(
    engine: &mut E,
    prog: &Arc<Program>,
    feeds: &[Feed],
    warm_ps: u64,
    run_ps: u64,
) -> Outcome {
    let link = prog.link;
    let mut by_leaf = vec![usize::MAX; prog.leaves.len()];
    let mut st: Vec<State> = feeds
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let class = prog.classify(&f.meta);
            let node = prog
                .node_id(&f.leaf)
                .unwrap_or_else(|| panic!("no node {}", f.leaf));
            match class {
                Classification::Leaf { leaf, node: n, .. } if n == node => {
                    by_leaf[leaf.index()] = i;
                }
                other => panic!("{:?} classifies to {other:?}, not leaf {}", f.meta, f.leaf),
            }
            State {
                class,
                meta: f.meta,
                source: f.source.clone(),
                offered: 0,
                bits: 0,
                next_ps: 0,
                held: VecDeque::new(),
            }
        })
        .collect();
    let mut res = vec![LeafResult::default(); feeds.len()];
    let mut next_id = 0u64;
    let mut offer = |s: &mut State, r: &mut LeafResult, engine: &mut E, at: u64| {
        let bytes = s.size();
        s.offered += 1;
        s.bits += bytes as u128 * 8;
        let pkt = Packet::new(next_id, bytes, s.meta);
        next_id += 1;
        match engine.enqueue_classified(pkt, s.class, at) {
            Ok(()) => s.held.push_back(at),
            Err(_) => r.dropped += 1,
        }
    };
    let mut now = 0u64;
    let mut link_free = 0u64;
    loop {
        // Arrivals due now, then refills.
        for (s, r) in st.iter_mut().zip(res.iter_mut()) {
            match s.source {
                Source::Cbr { rate_bps, .. } => {
                    while s.next_ps <= now {
                        let at = s.next_ps;
                        offer(s, r, engine, at);
                        s.next_ps = (s.bits as f64 * 1e12 / rate_bps).ceil() as u64;
                    }
                }
                Source::Backlog { depth, .. } => {
                    while s.held.len() < depth {
                        offer(s, r, engine, now);
                    }
                }
            }
        }
        if now >= run_ps {
            break;
        }
        if now >= link_free {
            if let Some(d) = engine.dequeue(now) {
                let i = by_leaf[d.leaf.index()];
                let s = &mut st[i];
                s.held.pop_front();
                if now >= warm_ps {
                    let r = &mut res[i];
                    r.bytes += d.bytes as u64;
                    r.packets += 1;
                    r.delays_ps.push(now - d.enqueued_ps);
                }
                link_free = now + wire_ps(d.bytes, &link);
                continue; // refill at this instant
            }
        }
        let mut next = run_ps;
        for s in &st {
            if let Source::Cbr { .. } = s.source {
                next = next.min(s.next_ps);
            }
        }
        if now < link_free {
            next = next.min(link_free);
        } else if let Some(w) = engine.next_wakeup() {
            next = next.min(w);
        }
        now = next.max(now + 1);
    }
    for (s, r) in st.iter().zip(res.iter_mut()) {
        r.held_ages_ps = s.held.iter().map(|&t| run_ps - t).collect();
    }
    Outcome {
        leaves: res,
        window_ps: run_ps - warm_ps,
        overhead: link.overhead_bytes,
    }
}
