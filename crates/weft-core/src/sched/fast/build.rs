//! Building a fast engine from a compiled policy, in steps: each node's kind and own
//! parameter, SENIC's groups (each `senic` node's runtime record and the top of its
//! nested group), each node's PIFO (a sorted ring, a bitmap of priority levels, per-child
//! queues or a calendar, a heap), the node records, and the leaves' records.
//!
//! Invariants: the vectors built here are indexed by node id (`kinds`, `pifos`, node
//! records), senic number or leaf id, and the compiler numbers parents before children, so
//! one pass in node order sees a node's parent first. Cost: linear in the policy's nodes
//! and edges.

use super::*;

impl FastEngine {
    /// [`Self::with_options`], with nodes keeping their entries in a calendar, or in queues
    /// per child and a heap of their heads, as `calendar` says (the departures are the same;
    /// tests and benchmarks choose).
    pub fn with_calendar(
        prog: Arc<Program>,
        options: EngineOptions,
        calendar: CalendarUse,
    ) -> FastEngine {
        let params = Params::new(&prog);
        let (kind, own) = kinds(&prog, &params);
        let parent: Vec<u32> = prog
            .nodes
            .iter()
            .map(|x| x.parent.map_or(NO, NodeId::get))
            .collect();
        let stride = prog.depth().max(1) as usize;
        let (senic_of, senic) = senic_groups(&kind, &parent, &params);
        let senic_tops: Vec<u32> = (0..senic.len() as u32)
            .filter(|&i| senic[i as usize].top == i)
            .collect();
        let senic_waiting = vec![MinHeap::default(); senic.len()];
        let pifo = pifos(&prog, &params, calendar);
        let nodes = node_records(&params, &kind, &own, &parent, &senic_of, &pifo);
        let leaves: Vec<LeafRt> = prog
            .leaves
            .iter()
            .map(|&v| {
                let mut l = LeafRt::new(params.specs[v.index()].as_ref().expect("a leaf"));
                let mut a = parent[v.index()];
                while a != NO {
                    l.senic_path |= kind[a as usize] == Kind::Senic;
                    a = parent[a as usize];
                }
                l
            })
            .collect();
        let fair_max = if leaves.iter().any(|l: &LeafRt| l.fair) {
            vec![0; prog.leaves.len()]
        } else {
            Vec::new()
        };
        FastEngine {
            nodes,
            leaves,
            waiting: FxHashMap::default(),
            waiting_packets: 0,
            senic,
            stride,
            pifo,
            flows: FlowArena::default(),
            flow_table: FlowIndex::default(),
            free_flows: Vec::new(),
            idle_fair: FxHashMap::default(),
            fair_last: Vec::new(),
            fair_max,
            flow_drops: FxHashMap::default(),
            slots: Vec::new(),
            shaping: Vec::new(),
            revoked: Vec::new(),
            ranks: Vec::new(),
            links: Vec::new(),
            park_next: Vec::new(),
            park_prev: Vec::new(),
            park_head: NO,
            tags: Vec::new(),
            free: Vec::new(),
            shaping_queue: MinHeap::default(),
            classes: prog
                .shapers
                .iter()
                .map(|s| ClassRt {
                    b: Bucket::new(s.rate_bps, s.burst_bytes),
                    ..ClassRt::default()
                })
                .collect(),
            class_pifo_of: FxHashMap::default(),
            class_roots: Vec::new(),
            class_parents: Vec::new(),
            class_vtime: Vec::new(),
            class_last: Vec::new(),
            class_max_cost: Vec::new(),
            class_pifos: PairingHeaps::default(),
            class_backlog: 0,
            overhead: prog.link.counted_overhead(),
            senic_waiting,
            senic_tops,
            senic_deferred: 0,
            costs: [0; crate::policy::program::MAX_SHAPING_PER_PACKET],
            popped: vec![(0, 0, 0); stride * STAGED],
            burst: [(NO, 0); STAGED],
            seq: 0,
            held: 0,
            node_drops: FxHashMap::default(),
            options,
            nested: prog.nested_shapers(),
            class_out: vec![0; prog.shapers.len()],
            class_parked: vec![0; prog.shapers.len()],
            released_head: vec![NO; prog.shapers.len()],
            calendar,
            prog,
        }
    }
}

/// Each node's kind, and its own parameter: an `lstf` node's default slack or an `edf`
/// node's default deadline (ps), a leaf's quantum across flows (bytes), 0 otherwise.
fn kinds(prog: &Program, params: &Params) -> (Vec<Kind>, Vec<u64>) {
    prog.nodes
        .iter()
        .enumerate()
        .map(|(v, node)| match node.algo {
            Algo::Fifo => (Kind::Fifo, 0),
            Algo::Prio => (Kind::Prio, 0),
            Algo::Wfq => (Kind::Wfq, 0),
            Algo::Rr => (Kind::Rr, 0),
            Algo::Drr => (Kind::Drr, 0),
            Algo::Lstf { default_slack_ps } => (Kind::Lstf, default_slack_ps),
            Algo::Edf {
                default_deadline_ps,
            } => (Kind::Edf, default_deadline_ps),
            Algo::Senic { .. } => (Kind::Senic, 0),
            Algo::Leaf(_) => (
                Kind::Leaf,
                params.specs[v].as_ref().expect("a leaf").flow_quantum_bytes,
            ),
        })
        .unzip()
}

/// Senic nodes, numbered in node order (a parent before its children): each node's senic
/// number (`NO` for the others) and the senic records, each knowing the top of its group
/// (the outermost of directly nested `senic` nodes).
fn senic_groups(kind: &[Kind], parent: &[u32], params: &Params) -> (Vec<u32>, Vec<SenicRt>) {
    let mut senic_of = vec![NO; kind.len()];
    let mut senic: Vec<SenicRt> = Vec::new();
    for v in 0..kind.len() {
        if kind[v] == Kind::Senic {
            let p = parent[v];
            let top = if p != NO && kind[p as usize] == Kind::Senic {
                senic[senic_of[p as usize] as usize].top
            } else {
                senic.len() as u32
            };
            senic_of[v] = senic.len() as u32;
            senic.push(SenicRt {
                v: 0,
                backlog_rate: 0,
                carry: senic::Carry::default(),
                t: 0,
                capacity: params.capacities[v],
                top,
            });
        }
    }
    (senic_of, senic)
}

/// Each node's PIFO, the cheapest form that gives its ranks' order.
fn pifos(prog: &Program, params: &Params, calendar: CalendarUse) -> Vec<Pifo> {
    prog.nodes
        .iter()
        .enumerate()
        .map(|(v, x)| match x.algo {
            // Arrival-time ranks: one sorted queue.
            Algo::Fifo => Pifo::Sorted(Ring::new()),
            Algo::Prio if Ffs::new(x.children.start().get(), &prios(params, x)).is_some() => {
                Pifo::Ffs(Ffs::new(x.children.start().get(), &prios(params, x)).expect("checked"))
            }
            // Ranks corrected by what a child's packets sent cost.
            Algo::Wfq => Pifo::wfq(x.children.start().get(), x.children.len(), calendar),
            // Ranks a child's packets in push order except on re-entry.
            Algo::Prio | Algo::Rr | Algo::Drr | Algo::Senic { .. } => {
                Pifo::per_child(x.children.start().get(), x.children.len(), calendar)
            }
            Algo::Leaf(_) => match &params.specs[v] {
                Some(l) if l.flow_sched == FlowSched::Fifo => Pifo::LeafSorted(SlotList::EMPTY),
                _ => Pifo::LeafHeap(MinHeap::default()),
            },
            _ => Pifo::Heap(MinHeap::default()),
        })
        .collect()
}

/// Each node's runtime record: its edge parameter as its parent reads it, what a
/// departure updates at it (`on_send`), and its position under an `Ffs` parent.
fn node_records(
    params: &Params,
    kind: &[Kind],
    own: &[u64],
    parent: &[u32],
    senic_of: &[u32],
    pifo: &[Pifo],
) -> Vec<NodeRt> {
    let mut nodes = (0..kind.len())
        .map(|v| NodeRt {
            vtime: 0,
            last: 0,
            param: match parent[v] {
                NO => 0,
                p => edge_param(kind[p as usize], &params.edges[v]),
            },
            own: own[v],
            parent: parent[v],
            senic: senic_of[v],
            backlog: 0,
            kind: kind[v],
            on_send: match kind[v] {
                Kind::Wfq | Kind::Rr => OnSend::Vtime,
                Kind::Drr => OnSend::DrrVtime,
                Kind::Senic => OnSend::Senic,
                Kind::Leaf if matches!(pifo[v], Pifo::LeafHeap(_)) => OnSend::Vtime,
                _ => OnSend::Nothing,
            },
            ffs_pos: 0,
        })
        .collect::<Vec<_>>();
    // Each child of an `Ffs` node learns its position (`at` is in priority order).
    for f in pifo.iter().filter_map(|p| match p {
        Pifo::Ffs(f) => Some(f),
        _ => None,
    }) {
        for (p, c) in f.at.iter().enumerate() {
            nodes[c.child as usize].ffs_pos = p as u8;
        }
    }
    nodes
}
