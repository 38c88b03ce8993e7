//! The reference engine's SENIC groups (SENIC §4.1–4.2; the parent module gives the
//! ranks): a group's virtual time `V`, advanced with real time slowed by `max(1, φ)`, the
//! tag that binds a popped packet, and the queue it waits in until `V` reaches its start
//! tag. Integer arithmetic from `super::super::shared`, as the fast engine's.

use super::*;

impl ReferenceEngine {
    /// Capacity of a senic node, bps.
    pub(super) fn senic_capacity(&self, n: u32) -> u64 {
        self.params.capacities[n as usize]
    }

    pub(super) fn is_senic(&self, n: u32) -> bool {
        matches!(self.prog.nodes[n as usize].algo, Algo::Senic { .. })
    }

    /// The top of the chain of senic nodes containing `n`.
    pub(super) fn senic_top(&self, mut n: u32) -> u32 {
        while let Some(p) = self.parent(n) {
            if !self.is_senic(p) {
                break;
            }
            n = p;
        }
        n
    }

    /// Advances a top senic node's virtual time to `now`.
    pub(super) fn senic_advance(&mut self, top: u32, now: u64) {
        let cap = self.senic_capacity(top) as u128;
        let s = &mut self.nodes[top as usize].senic;
        if now > s.t {
            let dt = ((now - s.t) as u128) << FRAC;
            s.v += algo::senic::advance_by(&mut s.carry, dt, cap, s.backlog_rate);
            s.t = now;
        }
    }

    /// Whether a packet with SENIC tags `held_senic` may leave at `now`: `None` if every
    /// group's `V` has reached its tag; else the tag that binds, `(top, S)`, the first of
    /// those whose wait at the current φ is longest, and when that wait ends.
    pub(super) fn senic_binding(
        &mut self,
        held_senic: &[(u32, u128)],
        now: u64,
    ) -> Option<(u32, u128, u64)> {
        let mut bind = None;
        for &(n, s) in held_senic {
            let top = self.senic_top(n);
            self.senic_advance(top, now);
            let st = &self.nodes[top as usize].senic;
            if st.v < s {
                let cap = self.senic_capacity(top) as u128;
                let at = now.saturating_add(algo::senic::wait_ps(s, st.v, cap, st.backlog_rate));
                if bind.is_none_or(|(_, _, b)| at > b) {
                    bind = Some((top, s, at));
                }
            }
        }
        bind
    }

    /// Moves a popped packet to its senic group's queue until the group's `V` reaches `s`.
    /// It needs no record to keep its flow in order: a later packet of the flow has a larger
    /// tag at every senic node of their path (`S = max(V, lastF)`, and `lastF` is past this
    /// packet's `S`), so it is not eligible at this group before this packet is, and this
    /// packet is back in the tree by then (every dequeue releases first).
    pub(super) fn defer_senic(&mut self, slot: usize, top: u32, s: u128) {
        let seq = self.next_seq();
        self.nodes[top as usize]
            .senic
            .waiting
            .insert((s, seq), slot);
    }
}
