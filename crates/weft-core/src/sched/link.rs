//! A virtual-time link driver: feeds timed arrivals to an [`Engine`] and transmits what it
//! dequeues at the link rate, one frame at a time (wire time counts the link's per-frame
//! overhead). Used by trace replay and the tests; pure computation, no clock.
//!
//! Invariant: a frame starts only when the previous one has finished; the driver asks the
//! engine for a packet at every instant the link is free and something may be sent (an
//! arrival, a deferred packet's wakeup, or the end of a transmission).

use super::{Departure, DropReason, Engine, Packet, Update, UpdateError};
use crate::policy::{Classification, LeafId, Link};

/// Wire time of a frame, ps (rounded up); `u64::MAX` (never done within the clock) when it
/// does not fit in 64 bits (a 4 GB frame at 1 bit/s).
pub fn wire_ps(bytes: u32, link: &Link) -> u64 {
    let bits = (bytes as u128 + link.overhead_bytes as u128) * 8;
    let ps = (bits * 1_000_000_000_000).div_ceil(link.rate_bps.max(1) as u128);
    u64::try_from(ps).unwrap_or(u64::MAX)
}

/// Most packets of one instant offered in one [`Engine::enqueue_batch`] call (more arriving
/// at that instant go in the next calls, before any dequeue: the same result, since a batch
/// enqueues as one packet after another does). A bound, so that a trace of millions of
/// packets at one timestamp replays in bounded memory.
pub const ARRIVAL_BATCH: usize = 64;

/// Something offered to the engine at a point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A packet arrives.
    Packet(Packet),
    /// A packet arrives that the driver has classified (with `Program::classify`, or bound
    /// to any valid class): offered with [`Engine::enqueue_classified_batch`], so a driver
    /// that needs the class itself does not classify twice.
    Classified(Packet, Classification),
    /// The policy changes (weights, rates, limits).
    Update(Update),
}

/// What happened to one packet (or update).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An update was refused; the running policy is unchanged.
    Rejected {
        /// When it was due, ps.
        at_ps: u64,
        /// The update.
        update: Update,
        /// Why the engine refused it.
        error: UpdateError,
    },
    /// It started transmission at `at_ps`.
    Sent {
        /// When its transmission started, ps.
        at_ps: u64,
        /// The packet.
        departure: Departure,
    },
    /// It was dropped on arrival.
    Dropped {
        /// When it arrived, ps.
        at_ps: u64,
        /// The packet's id.
        id: u64,
        /// The leaf it was classified to; `None` for [`DropReason::Unclassified`].
        leaf: Option<LeafId>,
        /// Why.
        reason: DropReason,
    },
}

/// Runs arrivals (sorted by time) through `engine` on `link` until everything is sent or
/// `until_ps` passes; calls `on_event` for every departure and drop, in time order.
/// Returns the time the link went idle for good (or `until_ps`).
pub fn run<E: Engine>(
    engine: &mut E,
    link: &Link,
    arrivals: impl IntoIterator<Item = (u64, Packet)>,
    until_ps: u64,
    on_event: impl FnMut(Event),
) -> u64 {
    let inputs = arrivals.into_iter().map(|(t, p)| (t, Input::Packet(p)));
    run_inputs(engine, link, inputs, until_ps, on_event)
}

/// As [`run`], with live updates interleaved with the arrivals (sorted by time; at equal
/// times, in the order given).
pub fn run_inputs<E: Engine>(
    engine: &mut E,
    link: &Link,
    inputs: impl IntoIterator<Item = (u64, Input)>,
    until_ps: u64,
    on_event: impl FnMut(Event),
) -> u64 {
    run_bursts(engine, link, inputs, until_ps, 1, on_event)
}

/// As [`run_inputs`], the link taking up to `burst` frames at a time, as a software NIC
/// fills its transmit ring: whenever the link is free it asks for a burst at that instant
/// ([`Engine::dequeue_batch`]; `burst` 1 asks [`Engine::dequeue`]) and sends its frames back
/// to back.
pub fn run_bursts<E: Engine>(
    engine: &mut E,
    link: &Link,
    inputs: impl IntoIterator<Item = (u64, Input)>,
    until_ps: u64,
    burst: usize,
    mut on_event: impl FnMut(Event),
) -> u64 {
    let burst = burst.max(1);
    let mut sent = Vec::with_capacity(burst);
    let mut arrivals = inputs.into_iter().peekable();
    let mut now = 0u64;
    let mut link_free = 0u64;
    // Packets arriving at the same instant are offered in batches (`Engine::enqueue_batch`)
    // of at most `ARRIVAL_BATCH`, so memory stays bounded however many share an instant.
    let mut batch: Vec<Packet> = Vec::with_capacity(ARRIVAL_BATCH);
    let mut classified: Vec<(Packet, Classification)> = Vec::with_capacity(ARRIVAL_BATCH);
    let mut results = Vec::with_capacity(ARRIVAL_BATCH);
    loop {
        while let Some(&(t, input)) = arrivals.peek() {
            if t > now {
                break;
            }
            arrivals.next();
            match input {
                Input::Packet(pkt) => {
                    batch.clear();
                    batch.push(pkt);
                    while let Some(&(t2, Input::Packet(p2))) = arrivals.peek() {
                        if t2 != t || batch.len() == ARRIVAL_BATCH {
                            break;
                        }
                        batch.push(p2);
                        arrivals.next();
                    }
                    results.clear();
                    engine.enqueue_batch(&batch, t, &mut results);
                    // A dropped packet's leaf: classified again, only for the drops.
                    let prog = engine.program();
                    let drops = batch.iter().map(|p| (p.id, || prog.classify(&p.meta)));
                    report_drops(drops, &results, t, &mut on_event);
                }
                Input::Classified(pkt, class) => {
                    classified.clear();
                    classified.push((pkt, class));
                    while let Some(&(t2, Input::Classified(p2, c2))) = arrivals.peek() {
                        if t2 != t || classified.len() == ARRIVAL_BATCH {
                            break;
                        }
                        classified.push((p2, c2));
                        arrivals.next();
                    }
                    results.clear();
                    engine.enqueue_classified_batch(&classified, t, &mut results);
                    let drops = classified.iter().map(|&(p, c)| (p.id, move || c));
                    report_drops(drops, &results, t, &mut on_event);
                }
                Input::Update(update) => {
                    if let Err(error) = engine.update(update, t) {
                        on_event(Event::Rejected {
                            at_ps: t,
                            update,
                            error,
                        });
                    }
                }
            }
        }
        if now >= until_ps {
            return until_ps;
        }
        if now >= link_free {
            sent.clear();
            if burst == 1 {
                sent.extend(engine.dequeue(now));
            } else {
                engine.dequeue_batch(now, burst, &mut sent);
            }
            if !sent.is_empty() {
                link_free = now;
                for &d in &sent {
                    on_event(Event::Sent {
                        at_ps: link_free,
                        departure: d,
                    });
                    // Saturating: arrivals up to `LAST_ARRIVAL_PS` never get near the end of
                    // the clock, and later ones stop there rather than wrap.
                    link_free = link_free.saturating_add(wire_ps(d.bytes, link));
                }
                now = link_free;
                continue;
            }
        }
        // The next instant anything can change: an arrival, the end of the frame on the
        // wire, or (with the link free) a deferred packet's wakeup.
        let mut next = arrivals.peek().map(|&(t, _)| t);
        let busy_until = (now < link_free).then_some(link_free);
        let wake = if now >= link_free {
            engine.next_wakeup()
        } else {
            None
        };
        for t in [busy_until, wake].into_iter().flatten() {
            next = Some(next.map_or(t, |n: u64| n.min(t)));
        }
        let Some(next) = next else {
            debug_assert_eq!(
                engine.backlog(),
                0,
                "engine holds packets but offers none and sets no wakeup at {now} ps"
            );
            return link_free.max(now);
        };
        debug_assert!(next > now, "time must advance: next {next} <= now {now}");
        now = next.max(now.saturating_add(1));
    }
}

/// A `Dropped` event for every refused packet of a batch offered at `at_ps` (`packets` in
/// the batch's order: each id and how to get its classification, asked only of a dropped
/// one; `results` the engine's answers).
fn report_drops<C: FnOnce() -> Classification>(
    packets: impl Iterator<Item = (u64, C)>,
    results: &[Result<(), DropReason>],
    at_ps: u64,
    on_event: &mut impl FnMut(Event),
) {
    for ((id, class), r) in packets.zip(results) {
        if let Err(reason) = *r {
            let leaf = match class() {
                Classification::Leaf { leaf, .. } => Some(leaf),
                Classification::Unclassified { .. } => None,
            };
            debug_assert_eq!(
                leaf.is_none(),
                reason == DropReason::Unclassified,
                "packet {id} dropped ({reason:?}) with leaf {leaf:?}"
            );
            on_event(Event::Dropped {
                at_ps,
                id,
                leaf,
                reason,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::compile_str;
    use crate::sched::reference::ReferenceEngine;
    use crate::sched::{Counters, FlowQueue, Stats};
    use std::sync::Arc;

    /// The reference engine, recording the largest batch it was offered.
    struct Widest {
        inner: ReferenceEngine,
        widest: usize,
    }

    impl Engine for Widest {
        fn program(&self) -> &crate::policy::Program {
            self.inner.program()
        }
        fn enqueue_classified(
            &mut self,
            pkt: Packet,
            class: Classification,
            now_ps: u64,
        ) -> Result<(), DropReason> {
            self.inner.enqueue_classified(pkt, class, now_ps)
        }
        fn enqueue_batch(
            &mut self,
            pkts: &[Packet],
            now_ps: u64,
            out: &mut Vec<Result<(), DropReason>>,
        ) {
            self.widest = self.widest.max(pkts.len());
            self.inner.enqueue_batch(pkts, now_ps, out)
        }
        fn open_flow(&mut self, pkt: &Packet, class: Classification) -> Option<FlowQueue> {
            self.inner.open_flow(pkt, class)
        }
        fn enqueue_flow(
            &mut self,
            pkt: Packet,
            queue: &FlowQueue,
            now_ps: u64,
        ) -> Result<(), DropReason> {
            self.inner.enqueue_flow(pkt, queue, now_ps)
        }
        fn dequeue(&mut self, now_ps: u64) -> Option<Departure> {
            self.inner.dequeue(now_ps)
        }
        fn next_wakeup(&self) -> Option<u64> {
            self.inner.next_wakeup()
        }
        fn backlog(&self) -> usize {
            self.inner.backlog()
        }
        fn update(&mut self, u: Update, now_ps: u64) -> Result<(), UpdateError> {
            self.inner.update(u, now_ps)
        }
        fn stats(&self) -> Stats {
            self.inner.stats()
        }
        fn flow_counters(&self) -> Vec<(LeafId, u64, Counters)> {
            self.inner.flow_counters()
        }
        fn close_flow(&mut self, q: &FlowQueue) -> bool {
            self.inner.close_flow(q)
        }
    }

    /// Thousands of packets at one instant are offered in batches of at most
    /// `ARRIVAL_BATCH` (the whole instant was one batch, held in memory at once: a trace of
    /// 10 million rows at one timestamp took 2.3 GB), and every one is sent or dropped, in
    /// arrival order.
    #[test]
    fn one_instant_of_many_packets_is_offered_in_bounded_batches() {
        let text = "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: q, type: leaf, limit: {packets: 1000}}\n";
        let prog = Arc::new(compile_str("t.yaml".as_ref(), text, &Default::default()).unwrap());
        let link = prog.link;
        let mut e = Widest {
            inner: ReferenceEngine::new(prog),
            widest: 0,
        };
        let arrivals = (0..3000u64).map(|id| (5, Packet::new(id, 1500, Default::default())));
        let (mut sent, mut dropped) = (Vec::new(), 0);
        run(&mut e, &link, arrivals, u64::MAX, |ev| match ev {
            Event::Sent { departure, .. } => sent.push(departure.id),
            Event::Dropped { .. } => dropped += 1,
            Event::Rejected { .. } => unreachable!("no updates"),
        });
        assert_eq!(e.widest, ARRIVAL_BATCH);
        // The leaf holds 1,000; the rest of the instant is dropped, nothing is lost.
        assert_eq!((sent.len(), dropped), (1000, 2000));
        assert!(sent.iter().copied().eq(0..1000), "first come, first sent");
    }
}
