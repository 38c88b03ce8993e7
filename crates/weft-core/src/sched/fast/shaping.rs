//! The fast engine's shaping classes: which class holds a packet back, the classes' own
//! queues, reservations, and the global shaping queue that releases them.

use super::*;

impl FastEngine {
    /// Where the admitted packet in `slot` goes, as a position on its shaping path: into a
    /// busy class's queue at once (Loom's "currently limited" fast path), or (`None`) into
    /// the tree. As the reference's `admission_class`: by default only a packet that passes
    /// one class, which nests with no other; with [`EngineOptions::limited_fast_path`] the
    /// first busy class of any path.
    #[inline(always)]
    pub(super) fn admission_class(&self, slot: u32) -> Option<usize> {
        let busy = |c: ShaperId| self.classes[c.index()].busy();
        let path = self.shaping[slot as usize].as_slice();
        match *path {
            [] => None,
            _ if self.options.limited_fast_path => path.iter().position(|&c| busy(c)),
            [c] if !self.nested[c.index()] && busy(c) => Some(0),
            _ => None,
        }
    }

    /// Ranks the packet in `slot`, which its class's queue took at admission, at the
    /// `wfq`, `rr` and `drr` nodes of its path as the class releases it (the reference's
    /// `rank_on_release` says why).
    #[cold]
    #[inline(never)]
    pub(super) fn rank_on_release(&mut self, slot: u32, now: u64) {
        let base = slot as usize * self.stride;
        let s = self.slots[slot as usize];
        let wire = s.bytes.saturating_add(self.overhead);
        let mut child = s.leaf_node;
        let mut i = 1;
        while self.nodes[child as usize].parent != NO {
            let n = self.nodes[child as usize].parent;
            let node = &self.nodes[n as usize];
            if matches!(node.kind, Kind::Wfq | Kind::Rr | Kind::Drr) {
                let c = &self.nodes[child as usize];
                let off = if node.kind == Kind::Wfq {
                    self.pifo[n as usize].offset(child)
                } else {
                    0
                };
                let (rank, last) = Self::plain_rank(node, c.param, c.last, off, wire, &s, now);
                if let Some(last) = last {
                    self.nodes[child as usize].last = last;
                }
                self.ranks[base + i] = rank;
            }
            child = n;
            i += 1;
        }
        self.slots[slot as usize].flags &= !UNRANKED;
    }

    /// The shaping class that holds back the popped packet in `slot` at `now`, if one does:
    /// the first on its path (leaf side first) that lacks the tokens for it, or that is busy
    /// and has not released it before (as the reference's `holding_class`). Leaves the
    /// packet's cost at each class it checked in `self.costs`.
    #[inline(always)]
    pub(super) fn holding_class(&mut self, s: &Slot, slot: u32, now: u64) -> Option<usize> {
        let wire = s.bytes.saturating_add(self.overhead);
        let FastEngine {
            shaping,
            classes,
            costs,
            ..
        } = self;
        for (i, &c) in shaping[slot as usize].as_slice().iter().enumerate() {
            let q = &classes[c.index()];
            let bk = &q.b;
            let cost = bk.cost(wire);
            costs[i] = cost;
            let short = bk.earliest_cost(cost, now) > now;
            // Read before the test, not inside it: 9 instructions a packet fewer on the
            // senic profile (scripts/instructions.sh), the record being in cache already.
            let busy = q.busy();
            if short || (s.passed & (1 << i) == 0 && busy) {
                return Some(i);
            }
        }
        None
    }

    /// The index of the PIFO of class `c`'s queue at node `n`, made on first use with those
    /// of the nodes above it.
    pub(super) fn class_pifo(&mut self, c: u32, n: u32) -> u32 {
        if let Some(&i) = self.class_pifo_of.get(&(c, n)) {
            return i;
        }
        let parent = match self.nodes[n as usize].parent {
            NO => NO,
            p => self.class_pifo(c, p),
        };
        let i = self.class_roots.len() as u32;
        self.class_pifo_of.insert((c, n), i);
        self.class_roots.push(NO);
        self.class_parents.push(parent);
        self.class_vtime.push(0);
        self.class_last.push(0);
        self.class_max_cost.push(0);
        i
    }

    /// Holds the popped packet in `slot` at the `i`-th class of its path, giving it back to
    /// the classes it is out for that are not inner to that class (see the reference).
    #[cold]
    #[inline(never)]
    pub(super) fn hold_at(&mut self, slot: u32, from: u32, i: usize, now: u64) {
        let path = self.shaping[slot as usize];
        let c = path.as_slice()[i].get();
        let mut again = if self.slots[slot as usize].out != 0 {
            self.give_back(slot, Some(c))
        } else {
            0
        };
        if from != NO {
            again |= 1
                << path
                    .as_slice()
                    .iter()
                    .position(|&y| y.get() == from)
                    .expect("on its path");
        }
        again |= self.reserve_inner(slot, i);
        again &= !(1 << i);
        self.hold(slot, c, now);
        // Then those classes' next packets (and its releasing class's).
        self.schedule_positions(slot, again, now);
    }

    /// Before the packet in `slot` waits at the `i`-th class of its path: reserves the tokens
    /// of the classes before it there that passed it and nest inside that class (see the
    /// reference's `reserve_inner`). Returns the positions reserved.
    pub(super) fn reserve_inner(&mut self, slot: u32, i: usize) -> u8 {
        let path = self.shaping[slot as usize];
        let c = path.as_slice()[i].get();
        let (out, bytes) = {
            let s = &self.slots[slot as usize];
            (s.out, s.bytes)
        };
        let wire = bytes.saturating_add(self.overhead);
        let mut done = 0u8;
        for (j, &x) in path.as_slice()[..i].iter().enumerate() {
            if out & (1 << j) == 0 && self.inner(x.get(), c) {
                let b = &mut self.classes[x.index()].b;
                b.reserve(wire);
                done |= 1 << j;
                self.class_backlog += 1;
            }
        }
        let s = &mut self.slots[slot as usize];
        s.out |= done;
        s.passed |= done;
        done
    }

    /// [`Self::schedule`] for the classes at the positions `mask` of the packet's path.
    pub(super) fn schedule_positions(&mut self, slot: u32, mask: u8, now: u64) {
        let path = self.shaping[slot as usize];
        for (j, &x) in path.as_slice().iter().enumerate() {
            if mask & (1 << j) != 0 {
                self.schedule(x.get(), now);
            }
        }
    }

    /// Gives back the reservations of the packet in `slot`: all of them for a departure
    /// (`hold` `None`); for a hold at class `h`, those at `h` and at the classes not inner to
    /// it. Returns the positions on its path given back.
    pub(super) fn give_back(&mut self, slot: u32, hold: Option<u32>) -> u8 {
        let mut done = 0;
        let path = self.shaping[slot as usize];
        for (j, &x) in path.as_slice().iter().enumerate() {
            if self.slots[slot as usize].out & (1 << j) == 0 {
                continue;
            }
            if hold.is_some_and(|h| x.get() != h && self.inner(x.get(), h)) {
                continue;
            }
            done |= 1 << j;
            let wire = self.slots[slot as usize]
                .bytes
                .saturating_add(self.overhead);
            let b = &mut self.classes[x.index()].b;
            b.unreserve(wire);
            self.slots[slot as usize].out &= !(1 << j);
            self.class_backlog -= 1;
        }
        done
    }

    /// Whether shaping class `a` nests inside `b` in the classes' one total order (the
    /// reference's `inner`: deeper edge first, then more shaping nodes above on the edge,
    /// then id). Out of the hot path: only a packet
    /// a class released and another holds asks.
    pub(super) fn inner(&self, a: u32, b: u32) -> bool {
        let key = |c: u32| {
            let mut n = self.prog.shapers[c as usize].sched_parent.get();
            let mut d = 0u32;
            while self.nodes[n as usize].parent != NO {
                n = self.nodes[n as usize].parent;
                d += 1;
            }
            (
                std::cmp::Reverse(d),
                std::cmp::Reverse(self.prog.shaping_depth(ShaperId::new(c))),
                c,
            )
        };
        key(a) < key(b)
    }

    /// Moves a held packet into shaping class `c`'s queue: its entries from the leaf up to
    /// the root, with its stored ranks.
    #[cold]
    #[inline(never)]
    pub(super) fn hold(&mut self, slot: u32, c: u32, now: u64) {
        let seq = self.next_seq();
        let leaf_node = self.slots[slot as usize].leaf_node;
        let wire = self.slots[slot as usize]
            .bytes
            .saturating_add(self.overhead);
        // A packet this class released before comes back first in line: at fair nodes it
        // takes the class's virtual time there, and is not charged again.
        let again = {
            let s = &self.slots[slot as usize];
            self.shaping[slot as usize]
                .as_slice()
                .iter()
                .position(|&x| x.get() == c)
                .is_some_and(|i| (s.passed | self.revoked[slot as usize]) & (1 << i) != 0)
        };
        let base = slot as usize * self.stride;
        let backlogged = self.leaves[self.slots[slot as usize].leaf as usize].held_packets > 1;
        // Each entry above the leaf links to the PIFO below it, so a walk down the class's
        // tree looks up only its root.
        let mut at = self.class_pifo(c, leaf_node);
        let mut e = HeapEntry::new(self.ranks[base], seq, slot);
        let mut child = leaf_node;
        let mut i = 1;
        // Whether it is first anywhere: if not, the queue's first packet is what it was.
        let mut first = false;
        loop {
            let root = &mut self.class_roots[at as usize];
            self.class_pifos.push(root, e);
            first |= self.class_pifos.peek(*root).is_some_and(|t| t.seq == seq);
            let up = self.class_parents[at as usize];
            if up == NO {
                break;
            }
            let n = self.nodes[child as usize].parent;
            let node = &self.nodes[n as usize];
            let rank = match node.kind {
                // Fair shares among the class's own packets, on the class's virtual time.
                Kind::Wfq | Kind::Rr | Kind::Drr if again => self.class_vtime[up as usize],
                kind @ (Kind::Wfq | Kind::Rr | Kind::Drr) => {
                    let cost = match kind {
                        Kind::Rr => rr::COST,
                        _ => wfq::cost(wire, self.nodes[child as usize].param),
                    };
                    let max_cost = &mut self.class_max_cost[up as usize];
                    *max_cost = (*max_cost).max(cost);
                    let (vt, last) = (self.class_vtime[up as usize], self.class_last[at as usize]);
                    // A backlogged leaf starts where it last finished, at most one largest
                    // cost behind (see the reference's `hold`).
                    let start = if i == 1 && backlogged {
                        last.max(vt.saturating_sub(*max_cost))
                    } else {
                        vt.max(last)
                    };
                    let finish = start + cost;
                    self.class_last[at as usize] = finish;
                    if kind == Kind::Drr {
                        drr::round(finish)
                    } else {
                        start
                    }
                }
                _ => self.ranks[base + i],
            };
            e = HeapEntry::new(rank, seq, child).linked(at);
            child = n;
            (at, i) = (up, i + 1);
        }
        self.park(slot);
        let q = &mut self.classes[c as usize];
        q.held += 1;
        self.class_backlog += 1;
        // A class without an entry needs one whatever came first.
        if first || q.state & CLASS_DUE == 0 {
            self.schedule(c, now);
        }
    }

    /// The slot at the front of class `c`'s queue, and takes it out when `take`.
    pub(super) fn class_front(&mut self, c: u32, take: bool) -> Option<u32> {
        let mut n = 0;
        let mut i = *self.class_pifo_of.get(&(c, n))?;
        loop {
            let root = &mut self.class_roots[i as usize];
            let e = if take {
                self.class_pifos.pop(root)?
            } else {
                *self.class_pifos.peek(*root)?
            };
            let kind = self.nodes[n as usize].kind;
            if kind == Kind::Leaf {
                if take {
                    self.classes[c as usize].held -= 1;
                }
                return Some(e.v);
            }
            if take {
                let v = &mut self.class_vtime[i as usize];
                match kind {
                    Kind::Wfq | Kind::Rr => *v = (*v).max(e.rank()),
                    Kind::Drr => *v = (*v).max(e.rank().saturating_sub(1 << FRAC)),
                    _ => {}
                }
            }
            (n, i) = (e.v, e.link);
        }
    }

    /// Gives class `c` a new entry in the shaping queue for when the packet at the front of
    /// its queue conforms once the packets it has released are sent too (none while its
    /// queue is empty or the last packet it released is in the tree); its old entry, if
    /// any, goes stale.
    #[inline(always)]
    pub(super) fn schedule(&mut self, c: u32, now: u64) {
        let q = &self.classes[c as usize];
        if q.held != 0 || q.state & CLASS_DUE != 0 {
            self.schedule_held(c, now);
        }
    }

    /// [`Self::schedule`] for a class that holds packets or has an entry (out of line: the
    /// departures of an unsaturated class never come here).
    #[cold]
    #[inline(never)]
    pub(super) fn schedule_held(&mut self, c: u32, now: u64) {
        if self.class_parked[c as usize] != 0 || self.released_head[c as usize] != NO {
            if let Some(front) = self.class_front(c, false) {
                self.revoke_after(c, front, now);
            }
        }
        let want = self.class_front(c, false).map(|slot| {
            let wire = self.slots[slot as usize]
                .bytes
                .saturating_add(self.overhead);
            let b = &self.classes[c as usize].b;
            b.estimate_cost(b.cost(wire), now)
        });
        let st = &mut self.classes[c as usize].state;
        *st &= !CLASS_DUE;
        if let Some(t) = want {
            let generation = (*st + 1) & CLASS_GEN;
            *st = (*st & CLASS_OUT) | CLASS_DUE | generation;
            let seq = self.next_seq();
            self.shaping_queue
                .push(HeapEntry::new(t as Rank, seq, c).linked(generation));
        }
        self.purge_stale();
    }

    /// Drops stale entries from the front of the shaping queue, so that its first entry is
    /// live.
    pub(super) fn purge_stale(&mut self) {
        while let Some(e) = self.shaping_queue.peek() {
            if self.live(e) {
                break;
            }
            self.shaping_queue.pop();
        }
        // Stale entries further back go only when they reach the front; a class far in
        // the future rescheduled again and again (a slow class whose first packet keeps
        // changing) would pile them up. At most one entry a class is live, so past twice
        // that the queue keeps only the live ones (O(n log n), at most once per as many
        // schedules: O(log n) each, amortized).
        if self.shaping_queue.len() > 2 * self.classes.len() + 64 {
            let classes = &self.classes;
            self.shaping_queue.retain(|e| Self::live_in(classes, e));
        }
    }

    /// Whether a shaping-queue entry is its class's current one.
    pub(super) fn live(&self, e: &HeapEntry) -> bool {
        Self::live_in(&self.classes, e)
    }

    pub(super) fn live_in(classes: &[ClassRt], e: &HeapEntry) -> bool {
        let st = classes[e.v as usize].state;
        st & CLASS_DUE != 0 && st & CLASS_GEN == e.link
    }

    /// Puts the packet in `slot`, which is going into a class's queue, on the parked list
    /// if it holds reservations at inner classes.
    pub(super) fn park(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        debug_assert!(
            s.flags & PARKED == 0,
            "slot {slot}: parked twice (out {:#b}, passed {:#b})",
            s.out,
            s.passed
        );
        if s.out == 0 {
            return;
        }
        s.flags |= PARKED;
        let out = s.out;
        for (j, &x) in self.shaping[slot as usize].as_slice().iter().enumerate() {
            if out & (1 << j) != 0 {
                self.class_parked[x.index()] += 1;
            }
        }
        self.link(slot, None);
    }

    /// Takes the packet in `slot` off the parked list, if it is on it, as it leaves its
    /// class's queue.
    pub(super) fn unpark(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if s.flags & PARKED == 0 {
            return;
        }
        s.flags &= !PARKED;
        let out = s.out;
        for (j, &x) in self.shaping[slot as usize].as_slice().iter().enumerate() {
            if out & (1 << j) != 0 {
                self.class_parked[x.index()] -= 1;
            }
        }
        self.unlink(slot, None);
    }

    /// The first slot of the parked list (`None`) or of class `c`'s list of the packets it
    /// released into the tree (`Some(c)`).
    fn list_head(&mut self, list: Option<u32>) -> &mut u32 {
        match list {
            None => &mut self.park_head,
            Some(c) => &mut self.released_head[c as usize],
        }
    }

    /// Puts `slot` first on the parked list (`None`) or on class `c`'s released list.
    pub(super) fn link(&mut self, slot: u32, list: Option<u32>) {
        let head = std::mem::replace(self.list_head(list), slot);
        self.park_next[slot as usize] = head;
        self.park_prev[slot as usize] = NO;
        if head != NO {
            self.park_prev[head as usize] = slot;
        }
    }

    /// Takes `slot` off the list it is on: the parked list (`None`) or class `c`'s released
    /// list.
    pub(super) fn unlink(&mut self, slot: u32, list: Option<u32>) {
        let (next, prev) = (self.park_next[slot as usize], self.park_prev[slot as usize]);
        if prev == NO {
            *self.list_head(list) = next;
        } else {
            self.park_next[prev as usize] = next;
        }
        if next != NO {
            self.park_prev[next as usize] = prev;
        }
    }

    /// When class `c`'s queue's first packet (in `front`) must wait for its tokens, takes
    /// back the class's reservations for the parked packets, and for the packets it released
    /// into the tree, that its policy ranks after a packet its queue holds (as the
    /// reference's `revoke_after`).
    #[cold]
    #[inline(never)]
    pub(super) fn revoke_after(&mut self, c: u32, front: u32, now: u64) {
        let wire = self.slots[front as usize]
            .bytes
            .saturating_add(self.overhead);
        let b = &self.classes[c as usize].b;
        if b.estimate_cost(b.cost(wire), now) <= now {
            return;
        }
        // Walks the parked list until it has seen every packet holding `c`'s reservation.
        let mut left = self.class_parked[c as usize];
        let mut at = self.park_head;
        while at != NO && left != 0 {
            let next = self.park_next[at as usize];
            if let Some(j) = self.out_at(at, c) {
                left -= 1;
                if self.outranked(c, at) {
                    self.class_parked[c as usize] -= 1;
                    if self.revoke(at, c, j) == 0 {
                        self.slots[at as usize].flags &= !PARKED;
                        self.unlink(at, None);
                    }
                }
            }
            at = next;
        }
        debug_assert!(
            left == 0,
            "class {c}: {} parked packets hold its reservation, {left} of them not on the list",
            self.class_parked[c as usize]
        );
        // Its released packets stay on its list until popped (`Slot::from`).
        let mut at = self.released_head[c as usize];
        while at != NO {
            if let Some(j) = self.out_at(at, c) {
                if self.outranked(c, at) {
                    self.revoke(at, c, j);
                }
            }
            at = self.park_next[at as usize];
        }
    }

    /// The position of class `c` on the path of the packet in `slot`, if `c` holds a
    /// reservation for it.
    fn out_at(&self, slot: u32, c: u32) -> Option<usize> {
        let out = self.slots[slot as usize].out;
        self.shaping[slot as usize]
            .as_slice()
            .iter()
            .position(|&x| x.get() == c)
            .filter(|&j| out & (1 << j) != 0)
    }

    /// Class `c`, the `j`-th of the packet in `slot`'s path, takes its reservation for it
    /// back: the packet queues there again, ranked, if the class is busy when it comes
    /// back. Returns the classes still holding reservations for it.
    fn revoke(&mut self, slot: u32, c: u32, j: usize) -> u8 {
        let sl = &mut self.slots[slot as usize];
        sl.out &= !(1 << j);
        sl.passed &= !(1 << j);
        let (out, wire) = (sl.out, sl.bytes.saturating_add(self.overhead));
        // A packet `c` released that is still in the tree keeps `c` busy until it is popped
        // (`class_out`), so it stays in `class_backlog` until then (`send`).
        if sl.from == c {
            sl.flags |= TAKEN_BACK;
        } else {
            self.class_backlog -= 1;
        }
        self.revoked[slot as usize] |= 1 << j;
        self.classes[c as usize].b.unreserve(wire);
        out
    }

    /// Whether class `c`'s queue holds a packet that the policy ranks strictly before the
    /// one in `slot` where their paths meet, at a node that ranks packets by their own ranks
    /// (the reference's `outranked`: at each node above the packet's leaf, the queue's first
    /// packet below that node).
    fn outranked(&self, c: u32, slot: u32) -> bool {
        let stride = self.stride;
        let leaf_r = self.slots[slot as usize].leaf_node;
        let (mut m, mut j) = (leaf_r, 0usize);
        loop {
            if let Some(q) = self.class_first_below(c, m).filter(|&q| q != slot) {
                let leaf_q = self.slots[q as usize].leaf_node;
                let (i, jj, own) = meeting(&self.prog, leaf_q, leaf_r);
                if jj == j
                    && own
                    && self.ranks[q as usize * stride + i] < self.ranks[slot as usize * stride + j]
                {
                    return true;
                }
            }
            let p = self.nodes[m as usize].parent;
            if p == NO {
                return false;
            }
            (m, j) = (p, j + 1);
        }
    }

    /// The first packet of class `c`'s queue below node `m` (its class PIFOs followed down
    /// from `m`), without taking it.
    fn class_first_below(&self, c: u32, m: u32) -> Option<u32> {
        let mut n = m;
        let mut i = *self.class_pifo_of.get(&(c, n))?;
        loop {
            let e = *self.class_pifos.peek(self.class_roots[i as usize])?;
            if self.nodes[n as usize].kind == Kind::Leaf {
                return Some(e.v);
            }
            (n, i) = (e.v, e.link);
        }
    }

    pub(super) fn push_entries(&mut self, slot: u32) {
        let s = &self.slots[slot as usize];
        let (leaf_node, wire) = (s.leaf_node, s.bytes.saturating_add(self.overhead));
        let base = slot as usize * self.stride;
        let seq = self.next_seq();
        self.push_slot(leaf_node, self.ranks[base], seq, slot);
        let mut child = leaf_node;
        let mut i = 1;
        while self.nodes[child as usize].parent != NO {
            let n = self.nodes[child as usize].parent;
            let pos = self.nodes[child as usize].ffs_pos;
            self.pifo[n as usize].push(self.ranks[base + i], seq, child, pos, wire);
            child = n;
            i += 1;
        }
    }

    /// Moves a popped packet to its senic group's heap (`top`) until the group's `V`
    /// reaches `st`. No per-flow record: a later packet of the flow has a larger tag at this
    /// group, so it cannot overtake (see the reference's `defer_senic`).
    #[cold]
    #[inline(never)]
    pub(super) fn defer_senic(&mut self, slot: u32, top: u32, st: u128) {
        let seq = self.next_seq();
        self.senic_waiting[top as usize].push(HeapEntry::new(st, seq, slot));
        self.senic_deferred += 1;
    }

    /// [`Self::release_due`] when anything may be due: the shaping queue's first entry, or
    /// any packet in a senic group's heap (one compare each on the dequeue's path).
    #[inline(always)]
    pub(super) fn release_if_due(&mut self, now: u64) {
        if self.senic_deferred != 0
            || self
                .shaping_queue
                .peek()
                .is_some_and(|e| e.rank() <= now as Rank)
        {
            self.release_due(now);
        }
    }

    /// Moves due packets back into the tree: the first packet of each shaping class whose
    /// entry has come, in the shaping queue's order, then each senic group's (in node order)
    /// whose `S` its `V` has reached, in `(S, seq)` order (the reference's order).
    pub(super) fn release_due(&mut self, now: u64) {
        while let Some(e) = self.shaping_queue.peek() {
            if e.rank() > now as Rank {
                break;
            }
            let c = e.v;
            #[cfg(test)]
            crate::steps::count();
            self.shaping_queue.pop();
            let slot = self
                .class_front(c, true)
                .unwrap_or_else(|| panic!("class {c}: due with an empty queue"));
            self.unpark(slot);
            let st = &mut self.classes[c as usize].state;
            *st = (*st & !CLASS_DUE) | CLASS_OUT;
            self.class_out[c as usize] += 1;
            let i = self.shaping[slot as usize]
                .as_slice()
                .iter()
                .position(|&x| x.get() == c)
                .expect("a class holds only its own packets");
            let sl = &mut self.slots[slot as usize];
            sl.passed |= 1 << i;
            sl.out |= 1 << i;
            sl.from = c;
            let (wire, unranked) = (sl.bytes.saturating_add(self.overhead), sl.flags & UNRANKED);
            self.link(slot, Some(c));
            let b = &mut self.classes[c as usize].b;
            b.reserve(wire);
            if unranked != 0 {
                self.rank_on_release(slot, now);
            }
            self.push_entries(slot);
            self.purge_stale();
        }
        if self.senic_deferred == 0 {
            return;
        }
        for i in 0..self.senic_tops.len() {
            let top = self.senic_tops[i];
            if self.senic_waiting[top as usize].is_empty() {
                continue;
            }
            Self::advance_group(&mut self.senic, top, now);
            let v = self.senic[top as usize].v;
            while let Some(e) = self.senic_waiting[top as usize].peek() {
                if e.rank() > v {
                    break;
                }
                let slot = e.v;
                self.senic_waiting[top as usize].pop();
                self.senic_deferred -= 1;
                // No per-flow record to remove (see `defer_senic`).
                self.push_entries(slot);
            }
        }
    }
}
