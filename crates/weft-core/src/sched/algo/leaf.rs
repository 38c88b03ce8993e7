//! `leaf`: a traffic class holding per-flow queues. Its flows are grouped by `flow_key`
//! ([`flow_key_of`]: the host's flow id, the 5-tuple, or none) and ordered either in
//! arrival order (rank `now`, as [`super::fifo`]) or fairly: STFQ across flows with the
//! leaf's flow quantum as every flow's weight ([`fair_tags`], the arithmetic of
//! [`super::wfq`]), `V` the rank of the last packet sent from the leaf.
//!
//! Engines: the reference keeps a leaf's packets in a sorted map and each flow's last
//! finish tag in a hash map; the fast engine in a list of slots (arrival order) or a heap
//! (fair), flows in an arena indexed by a flow table. The head engine implements
//! arrival-order leaves only.

use std::hash::{Hash, Hasher};

use super::super::shared::Rank;
use super::super::Packet;
use super::wfq;
use crate::classifier::Field;
use crate::policy::program::{FlowKey, LeafSpec};

/// A fair leaf's rank for a packet of `bytes` wire bytes from a flow that last finished at
/// `last`, at the leaf's virtual time `vtime` and flow quantum `quantum_bytes`; and the
/// flow's new finish tag.
#[inline]
pub(crate) fn fair_tags(vtime: u128, last: u128, bytes: u32, quantum_bytes: u64) -> (Rank, u128) {
    let start = vtime.max(last);
    (start, start + wfq::cost(bytes, quantum_bytes))
}

/// A packet's flow key within leaf `spec`.
pub(crate) fn flow_key(spec: &LeafSpec, pkt: &Packet) -> u64 {
    flow_key_of(spec.flow_key, pkt)
}

/// A packet's flow key within a leaf that groups flows `by`.
pub(crate) fn flow_key_of(by: FlowKey, pkt: &Packet) -> u64 {
    match by {
        FlowKey::Flow => pkt.flow,
        FlowKey::None => 0,
        FlowKey::FiveTuple => {
            let m = &pkt.meta;
            let mut h = rustc_hash::FxHasher::default();
            (m.src, m.dst, m.sport, m.dport, m.proto).hash(&mut h);
            // Packets without addresses or ports fall back to the host's flow id.
            if m.present
                & (Field::Src.bit() | Field::Dst.bit() | Field::Sport.bit() | Field::Dport.bit())
                == 0
            {
                pkt.flow.hash(&mut h);
            }
            h.finish()
        }
    }
}
