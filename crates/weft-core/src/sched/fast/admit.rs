//! The fast engine's admission: a packet's rank at each level of its path and its entries
//! in the tree (or a busy class's queue), one packet or a staged batch at a time.

use super::*;

impl FastEngine {
    /// Advances the system virtual time of the senic group whose top is `senic[top]` to `now`
    /// (on the senic records alone, so that callers may hold other fields).
    #[inline]
    pub(super) fn advance_group(senic: &mut [SenicRt], top: u32, now: u64) {
        let g = &mut senic[top as usize];
        if now > g.t {
            let dt = ((now - g.t) as u128) << FRAC;
            g.v += senic::advance_by(&mut g.carry, dt, g.capacity as u128, g.backlog_rate);
            g.t = now;
        }
    }

    /// The rank a node of any algorithm but `senic` gives a child (`c_param`, `c_last`: the
    /// child's edge parameter and last finish tag; `c_off`: its correction at a `wfq` node,
    /// see [`PerChild`](crate::sched::pifo::PerChild)) for a packet of `bytes`, and the child's new
    /// finish tag for the fair algorithms. One definition for both paths that push levels
    /// ([`Self::push_levels`] and the general one).
    #[inline(always)]
    pub(super) fn plain_rank(
        node: &NodeRt,
        c_param: u64,
        c_last: u128,
        c_off: i128,
        bytes: u32,
        s: &Slot,
        now: u64,
    ) -> (Rank, Option<u128>) {
        match node.kind {
            Kind::Fifo => (fifo::rank(now), None),
            Kind::Prio => (prio::rank(c_param), None),
            Kind::Wfq => {
                let (start, finish) = wfq::tags(node.vtime, c_last, c_off, bytes, c_param);
                (start, Some(finish))
            }
            Kind::Rr => {
                let (start, finish) = rr::tags(node.vtime, c_last);
                (start, Some(finish))
            }
            Kind::Drr => {
                let (round, finish) = drr::tags(node.vtime, c_last, bytes, c_param);
                (round, Some(finish))
            }
            Kind::Lstf => (lstf::rank(now, s.slack(), node.own), None),
            Kind::Edf => (edf::rank(now, s.deadline(), node.own), None),
            Kind::Senic | Kind::Leaf => unreachable!("plain_rank: a {:?} node", node.kind),
        }
    }

    /// Computes the packet's ranks at every level (stored in `ranks` for a re-entry) and
    /// pushes its entries, or sends it to the shaping queue at once (the "currently limited"
    /// fast path).
    #[inline(always)]
    pub(super) fn admit(&mut self, slot: u32, now: u64) {
        let s = &self.slots[slot as usize];
        let (leaf, leaf_node, flow, bytes) = (s.leaf, s.leaf_node, s.flow, s.bytes);
        self.admit_slot(slot, leaf, leaf_node, flow, bytes, now);
    }

    /// [`Self::admit`] for a caller that has the slot's leaf, leaf node, flow and bytes at
    /// hand (the enqueue, which just wrote them).
    #[inline(always)]
    pub(super) fn admit_slot(
        &mut self,
        slot: u32,
        leaf: u32,
        leaf_node: u32,
        flow: u32,
        bytes: u32,
        now: u64,
    ) {
        debug_assert!(
            {
                let s = &self.slots[slot as usize];
                (s.leaf, s.leaf_node, s.flow, s.bytes) == (leaf, leaf_node, flow, bytes)
            },
            "admit_slot: slot {slot} is {:?}, not leaf {leaf} node {leaf_node} flow {flow} bytes {bytes}",
            self.slots[slot as usize]
        );
        let base = slot as usize * self.stride;
        // What the packet counts for at fair shares (and shaping classes): frame + overhead.
        let wire = bytes.saturating_add(self.overhead);
        let l = &mut self.leaves[leaf as usize];
        l.admitted += 1;
        let leaf_rank = if l.fair {
            let rt = &self.nodes[leaf_node as usize];
            let (quantum, vtime) = (rt.own, rt.vtime);
            let f = self.flows.get_mut(flow);
            if f.fair == NO {
                f.fair = self.fair_last.len() as u32;
                self.fair_last.push(0);
            }
            let last = &mut self.fair_last[f.fair as usize];
            let start;
            (start, *last) = leaf::fair_tags(vtime, *last, wire, quantum);
            let max = &mut self.fair_max[leaf as usize];
            *max = (*max).max(*last);
            start
        } else {
            now as u128
        };
        self.ranks[base] = leaf_rank;
        // Into the queue of a shaping class that holds packets at once (the "currently
        // limited" fast path), or into the tree: then each level's entry is pushed as soon as
        // its rank is known.
        let busy = self.admission_class(slot);
        let seq = if busy.is_none() {
            let q = self.next_seq();
            self.push_slot(leaf_node, leaf_rank, q, slot);
            Some(q)
        } else {
            None
        };
        if self.nodes[leaf_node as usize].parent != NO {
            match seq {
                Some(q) if !self.leaves[leaf as usize].senic_path => {
                    self.push_levels(leaf_node, wire, slot, base, q, now)
                }
                _ => self.admit_levels(slot, base, seq, now),
            }
        }
        if let Some(i) = busy {
            self.slots[slot as usize].flags |= UNRANKED;
            let c = self.shaping[slot as usize].as_slice()[i].get();
            let again = self.reserve_inner(slot, i);
            self.hold(slot, c, now);
            self.schedule_positions(slot, again, now);
        }
    }

    /// [`Self::admit_levels`] for the common case: no `senic` node on the path (no tags) and
    /// the packet goes into the tree now (every level's entry is pushed; its rank is also
    /// kept in `ranks`, for a re-entry should the dequeue defer the packet).
    #[inline(never)]
    pub(super) fn push_levels(
        &mut self,
        leaf_node: u32,
        bytes: u32,
        slot: u32,
        base: usize,
        seq: u64,
        now: u64,
    ) {
        let FastEngine {
            nodes,
            slots,
            pifo,
            ranks,
            stride,
            ..
        } = self;
        let ranks = &mut ranks[base + 1..base + *stride];
        let s = &slots[slot as usize];
        // One length for both per-node arrays: a node's index checked against `nodes` is
        // then known to be in `pifo` too (one bounds check a level instead of two).
        let pifo = &mut pifo[..nodes.len()];
        let mut child = leaf_node;
        for rank_out in ranks.iter_mut() {
            let c = &nodes[child as usize];
            let (n, c_param, c_last, ffs_pos) = (c.parent, c.param, c.last, c.ffs_pos);
            if n == NO {
                break;
            }
            let node = &nodes[n as usize];
            debug_assert!(
                !matches!(node.kind, Kind::Senic | Kind::Leaf),
                "push_levels: a {:?} parent above leaf node {leaf_node}",
                node.kind
            );
            *rank_out = match &mut pifo[n as usize] {
                // A `prio` node's rank is the child's priority, and its entries are counts.
                Pifo::Ffs(f) => {
                    debug_assert_eq!(node.kind, Kind::Prio, "an ffs node is a prio node");
                    debug_assert_eq!(
                        f.at[ffs_pos as usize].child, child,
                        "ffs node {n}: position of child {child}"
                    );
                    f.push(ffs_pos);
                    c_param as Rank
                }
                p => {
                    let off = if node.kind == Kind::Wfq {
                        p.offset(child)
                    } else {
                        0
                    };
                    let (rank, last) = Self::plain_rank(node, c_param, c_last, off, bytes, s, now);
                    if let Some(last) = last {
                        nodes[child as usize].last = last;
                    }
                    p.push(rank, seq, child, ffs_pos, bytes);
                    rank
                }
            };
            child = n;
        }
    }

    /// [`Self::admit`] above the leaf: each level's rank, and its entry when `seq` is given;
    /// without `seq` (the packet goes into a class's queue) no rank at `wfq`, `rr` and `drr`
    /// nodes yet.
    #[inline(never)]
    pub(super) fn admit_levels(&mut self, slot: u32, base: usize, seq: Option<u64>, now: u64) {
        let FastEngine {
            nodes,
            senic,
            slots,
            ranks,
            tags,
            pifo,
            stride,
            overhead,
            ..
        } = self;
        let s = &mut slots[slot as usize];
        let wire = s.bytes.saturating_add(*overhead);
        let ranks = &mut ranks[base..base + *stride];
        let tags = &mut tags[base..base + *stride];
        let mut n_senic = 0usize;
        let mut inner: Option<(u128, u128)> = None;
        let mut child = s.leaf_node;
        for rank_out in ranks.iter_mut().skip(1) {
            let c = &nodes[child as usize];
            let (n, c_param, c_last, c_kind) = (c.parent, c.param, c.last, c.kind);
            if n == NO {
                break;
            }
            let nu = n as usize;
            let cu = child as usize;
            let node = &nodes[nu];
            let kind = node.kind;
            let rank = match kind {
                Kind::Senic => {
                    let si = node.senic as usize;
                    let top = senic[si].top;
                    Self::advance_group(senic, top, now);
                    let rate = c_param.max(1);
                    let cn = &mut nodes[cu];
                    cn.backlog += 1;
                    if cn.backlog == 1 {
                        senic[si].backlog_rate += rate as u128;
                    }
                    let child_senic = c_kind == Kind::Senic;
                    let (st, f) = match inner {
                        Some(tags) if child_senic => tags,
                        _ => {
                            let g = &senic[si];
                            let eff = if si as u32 != top {
                                senic::inner_rate(rate, g.capacity as u128, g.backlog_rate)
                            } else {
                                rate
                            };
                            let (st, f) = senic::tags(senic[top as usize].v, cn.last, wire, eff);
                            cn.last = f;
                            (st, f)
                        }
                    };
                    if !(child_senic && inner.is_some()) {
                        tags[n_senic] = (top, st);
                        n_senic += 1;
                    }
                    inner = Some((st, f));
                    f
                }
                Kind::Leaf => unreachable!("a leaf is never a parent"),
                // Into a class's queue at admission: ranked at fair nodes when the class
                // releases it (`rank_on_release`).
                Kind::Wfq | Kind::Rr | Kind::Drr if seq.is_none() => 0,
                _ => {
                    let off = if kind == Kind::Wfq {
                        pifo[nu].offset(child)
                    } else {
                        0
                    };
                    let (rank, last) = Self::plain_rank(node, c_param, c_last, off, wire, s, now);
                    if let Some(last) = last {
                        nodes[cu].last = last;
                    }
                    rank
                }
            };
            if kind != Kind::Senic {
                inner = None;
            }
            *rank_out = rank;
            if let Some(q) = seq {
                pifo[nu].push(rank, q, child, nodes[cu].ffs_pos, wire);
            }
            child = n;
        }
        s.n_senic = n_senic as u8;
    }

    /// Enqueues `n <= STAGED` packets arriving together, `packet(i)` and `class(i)` giving
    /// the i-th and its classification (asked once), in passes, so that the cache misses of
    /// different packets overlap instead of waiting one after another: classify and hash
    /// every packet's flow key; find every packet's candidate in the flow index; read every
    /// candidate's flow record (at 64k flows, a miss per packet); then, in packet order,
    /// look up the flows not found that way (created on first sight) and enqueue. Same
    /// result as enqueuing one by one: the first passes only read state, and flows are
    /// created in packet order (a flow new in this batch is created by its first packet and
    /// found by the later ones).
    #[inline(always)]
    pub(super) fn enqueue_staged<'a>(
        &mut self,
        n: usize,
        packet: impl Fn(usize) -> &'a Packet,
        class: impl Fn(usize) -> Classification,
        now: u64,
        out: &mut Vec<Result<(), DropReason>>,
    ) {
        debug_assert!(n <= STAGED, "{n} packets in one stage");
        let mut classes = [Classification::Unclassified { at: NodeId::ROOT }; STAGED];
        // Per packet: (leaf node, flow key, hash); `NO` as the leaf node when unclassified.
        let mut keys = [(NO, 0u64, 0u64); STAGED];
        let mut found = [NO; STAGED];
        for i in 0..n {
            classes[i] = class(i);
            keys[i] = match classes[i] {
                Classification::Leaf { leaf, node, .. } => {
                    let key = flow_key_of(self.leaves[leaf.index()].flow_key, packet(i));
                    (node.get(), key, flow_hash(node.get(), key))
                }
                Classification::Unclassified { .. } => (NO, 0, 0),
            };
        }
        for i in 0..n {
            found[i] = if keys[i].0 == NO {
                NO
            } else {
                self.flow_table.candidate(keys[i].2).unwrap_or(NO)
            };
        }
        for i in 0..n {
            let (leaf_node, key, _) = keys[i];
            if found[i] != NO {
                let r = self.flows.get(found[i]);
                if r.key != key || r.leaf_node != leaf_node {
                    found[i] = NO;
                }
            }
        }
        for i in 0..n {
            let pkt = packet(i);
            // Forgetting idle flows, an earlier packet of the batch may have had a record
            // forgotten (a fair flow's, idle but kept, when its packet was dropped) and
            // perhaps given to another flow: found again.
            if self.options.forget_idle_flows && found[i] != NO {
                let r = self.flows.get(found[i]);
                if r.key != keys[i].1 || r.leaf_node != keys[i].0 {
                    found[i] = NO;
                }
            }
            let r = match self.locate(pkt, classes[i], found[i]) {
                Ok(at) => self.enqueue_located(pkt, at, now),
                Err(r) => Err(r),
            };
            out.push(r);
        }
    }
}
