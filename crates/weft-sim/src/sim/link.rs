//! What the link and the NIC model hand back: a packet that starts on the wire
//! ([`Sim::depart`]: throughput windows, latency, a request's completion, a bulk flow's
//! refill) and the packets the model dropped ([`Sim::drain_drops`]: a failed request, a
//! bulk flow's retry), and the bookkeeping both share (a request that did not complete, a
//! packet that left its application's queue).
//!
//! Invariants: every packet written leaves its flow's queued bytes exactly once, sent or
//! dropped; a request that arrived within the run is recorded once, done or unfinished:
//! when its last packet leaves or is dropped, or at the end of the run if still open then.
//!
//! Cost: O(1) per packet (plus the windows a frame spans), a refill per segment.

use rustc_hash::FxHashMap;

use super::event_loop::{Ev, Sim};
use super::measure::credit_windows;
use crate::nic::{Nic, Pkt};
use crate::scenario::AppKind;

/// A packet written at `written_ps` (outside requests) left its application's `queued`
/// counts: sent or dropped.
fn left_queue(queued: &mut FxHashMap<u64, u64>, written_ps: u64) {
    match queued.get_mut(&written_ps) {
        Some(n) if *n > 1 => *n -= 1,
        Some(_) => {
            queued.remove(&written_ps);
        }
        None => debug_assert!(false, "a packet written at {written_ps} ps left twice"),
    }
}

impl<N: Nic> Sim<'_, N> {
    /// Request `slot` did not complete within the run: its latency is at least its age at
    /// the end.
    pub(super) fn unfinished(&mut self, slot: u32) {
        let sc = self.sc;
        let r = self.reqs[slot];
        if !r.counted {
            return;
        }
        let app = self.flows[r.flow as usize].app as usize;
        let age = sc.duration_ps - r.arrival_ps;
        let o = &mut self.out;
        o.app_latency[app].unfinished.record(age);
        let lw = ((r.arrival_ps / sc.latency_window_ps) as usize).min(o.window_latency.len() - 1);
        if let Some(h) = &mut o.window_latency[lw][app] {
            h.unfinished.record(age);
        }
    }

    /// Request `slot`'s response is complete at `t`: its latency is recorded when it
    /// arrived within the run, did not fail and completes within it; else it is
    /// unfinished. Its slot is freed (a closed loop's next request follows at `t`).
    pub(super) fn complete_request(&mut self, t: u64, slot: u32) {
        let sc = self.sc;
        let r = self.reqs[slot];
        let app = self.flows[r.flow as usize].app as usize;
        if r.counted && !r.failed && t <= sc.duration_ps {
            let o = &mut self.out;
            let lat = t - r.arrival_ps;
            o.app_latency[app].done.record(lat);
            let lw =
                ((r.arrival_ps / sc.latency_window_ps) as usize).min(o.window_latency.len() - 1);
            if let Some(h) = &mut o.window_latency[lw][app] {
                h.done.record(lat);
            }
            o.requests_done[app] += 1;
        } else {
            self.unfinished(slot);
        }
        self.request_done(t, slot);
    }

    pub(super) fn depart(&mut self, now: u64, wire: u64, p: Pkt) {
        let sc = self.sc;
        let o = &mut self.out;
        let app = p.app as usize;
        o.app_bytes[app] += credit_windows(
            &mut o.window_bytes,
            app,
            p.bytes as u64,
            now,
            wire,
            sc.window_ps,
            sc.duration_ps,
        );
        o.app_packets[app] += 1;
        o.app_gaps[app].add(now);
        o.packets += 1;
        o.wire_bytes += p.bytes as u64 + sc.program.link.overhead_bytes;
        // Frames never overlap (the next starts when this one ends), so the sum stays within
        // the run's length.
        o.wire_busy_ps += wire.min(sc.duration_ps - now);
        if p.req != u32::MAX {
            let r = &mut self.reqs[p.req];
            r.remaining -= 1;
            if r.remaining == 0 {
                // Completed when its last bit leaves: within the run, or unfinished.
                self.complete_request(now + wire, p.req);
            }
        } else if !sc.apps[app].kind.completes_over_tcp() {
            o.app_latency[app].done.record(now - p.submit_ps);
            left_queue(&mut self.queued[app], p.submit_ps);
        }
        let f = &mut self.flows[p.flow as usize];
        f.queued_bytes -= p.bytes as u64;
        if sc.apps[app].kind.over_tcp() {
            self.tcp_departed(now, wire, p);
        } else if let AppKind::Bulk { window_bytes } = sc.apps[app].kind {
            let seg = sc.host.segment_bytes.min(window_bytes).max(1);
            // A flow that lost packets writes nothing until its retry: the lost bytes left
            // its queue, and refilling here would rewrite them at once.
            if f.active && !f.retry_pending && f.queued_bytes + seg <= window_bytes {
                self.refill(now, p.flow);
            }
        }
    }

    pub(super) fn drain_drops(&mut self, now: u64) {
        for n in &mut self.nics {
            n.take_drops(&mut self.drops);
        }
        if self.drops.is_empty() {
            return;
        }
        let drops = std::mem::take(&mut self.drops);
        for p in &drops {
            self.out.app_drops[p.app as usize] += 1;
            self.flows[p.flow as usize].queued_bytes -= p.bytes as u64;
            let kind = &self.sc.apps[p.app as usize].kind;
            if kind.completes_over_tcp() {
                // The connection resends it; the request or flow is still open.
                self.tcp_dropped(now, p);
                continue;
            }
            if p.req == u32::MAX {
                left_queue(&mut self.queued[p.app as usize], p.submit_ps);
            } else {
                let r = &mut self.reqs[p.req];
                r.failed = true;
                r.remaining -= 1;
                if r.remaining == 0 {
                    self.unfinished(p.req);
                    self.request_done(now, p.req);
                }
            }
            if kind.over_tcp() {
                self.tcp_dropped(now, p);
                continue;
            }
            let f = &mut self.flows[p.flow as usize];
            if matches!(self.sc.apps[p.app as usize].kind, AppKind::Bulk { .. })
                && f.active
                && !f.retry_pending
            {
                f.retry_pending = true;
                // A retry past the end of the clock never happens.
                let t = now.saturating_add(self.sc.host.retry_ps);
                self.at(t, Ev::Retry { flow: p.flow });
            }
        }
        let mut d = drops;
        d.clear();
        self.drops = d;
    }
}
