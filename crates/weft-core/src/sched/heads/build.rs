//! Building a head engine from a compiled policy: what it refuses, each node's record,
//! ties and arrival rings, each parent's set.

use super::*;
use crate::policy::NodeId;

impl HeadEngine {
    /// An engine for `prog`, or what in it this engine does not implement.
    ///
    /// Built in passes over the nodes: each node's record and the classes on its edge, then
    /// the refusal of a class shared by several edges, each child's key and ties at its
    /// parent, the ring each node's arrivals go to, and the bitmaps of `prio` parents.
    pub fn new(prog: Arc<Program>) -> Result<HeadEngine, Unsupported> {
        let count = prog.nodes.len();
        let mut r = Records {
            nodes: vec![Node::default(); count],
            leaf_nodes: Vec::with_capacity(prog.leaves.len()),
            specs: Vec::with_capacity(prog.leaves.len()),
            classes: Vec::new(),
            class_span: vec![(0u32, 0u32); count],
            weights: vec![1u64; count],
        };
        for i in 0..count {
            r.add(&prog, i)?;
        }
        refuse_shared_classes(&prog, &r.class_span, &r.classes)?;
        set_keys(&prog, &mut r.nodes);
        set_rings_up(&prog, &mut r.nodes);
        let (sets, by_level) = prio_sets(&prog, &mut r.nodes);
        let buckets: Vec<Bucket> = prog
            .shapers
            .iter()
            .map(|s| Bucket::new(s.rate_bps, s.burst_bytes))
            .collect();
        let depth = prog.depth() as usize;
        Ok(HeadEngine {
            overhead: prog.link.counted_overhead(),
            nodes: r.nodes,
            sets,
            by_level,
            rings: vec![Ring::new(); count],
            weights: r.weights,
            class_span: r.class_span,
            leaf_nodes: r.leaf_nodes,
            specs: r.specs,
            classes: r.classes,
            buckets,
            shaping_queue: MinHeap::default(),
            slots: Pool::default(),
            flows: Vec::new(),
            flow_drops: Vec::new(),
            free_flows: Vec::new(),
            flow_of: FxHashMap::default(),
            drops: FxHashMap::default(),
            seq: 0,
            backlog: 0,
            path: vec![NIL; depth + 1].into_boxed_slice(),
            preload: count * std::mem::size_of::<Node>() >= PRELOAD_BYTES,
            prog,
        })
    }
}

/// What is built node by node: the records, the leaves and their specs, and each edge's
/// shaping classes (`classes[at..at + len]` for `class_span[i] = (at, len)`, innermost
/// first) and weight.
struct Records {
    nodes: Vec<Node>,
    leaf_nodes: Vec<u32>,
    specs: Vec<LeafSpec>,
    classes: Vec<u32>,
    class_span: Vec<(u32, u32)>,
    weights: Vec<u64>,
}

/// The refusal of node or class `name` declared at `origin`, for `reason`.
fn refuse(name: &str, origin: &Origin, reason: &'static str) -> Unsupported {
    Unsupported {
        node: name.to_string(),
        file: origin.file.clone(),
        line: origin.line,
        reason,
    }
}

impl Records {
    /// Node `i`'s record, its leaf queue if it is a leaf, and the classes on the edge to its
    /// parent; or what in it this engine refuses.
    fn add(&mut self, prog: &Program, i: usize) -> Result<(), Unsupported> {
        let n = &prog.nodes[i];
        // The hot path walks down from node 0 and relies on parents coming first.
        assert!(
            n.parent.is_none_or(|p| p.index() < i),
            "node {i} ({}): its parent {:?} comes after it; the compiler numbers parents first",
            n.name,
            n.parent
        );
        let mut queue = Leaf::default();
        let kind = match &n.algo {
            Algo::Fifo => Kind::Fifo,
            Algo::Prio => Kind::Prio,
            Algo::Wfq => Kind::Wfq,
            Algo::Rr => Kind::Rr,
            Algo::Leaf(spec) => {
                if spec.flow_sched == FlowSched::Fair {
                    return Err(refuse(
                        &n.name,
                        &n.origin,
                        "a leaf ordering its flows fairly",
                    ));
                }
                if spec.outstanding.is_some() {
                    return Err(refuse(&n.name, &n.origin, "`outstanding`"));
                }
                queue = Leaf {
                    head: NIL,
                    tail: NIL,
                    ..Leaf::default()
                };
                queue.limits(spec);
                self.leaf_nodes.push(i as u32);
                self.specs.push(spec.clone());
                Kind::Leaf
            }
            Algo::Drr => return Err(refuse(&n.name, &n.origin, "a `drr` node")),
            Algo::Lstf { .. } => return Err(refuse(&n.name, &n.origin, "an `lstf` node")),
            Algo::Edf { .. } => return Err(refuse(&n.name, &n.origin, "an `edf` node")),
            Algo::Senic { .. } => return Err(refuse(&n.name, &n.origin, "a `senic` node")),
        };
        if n.shaping_parents.len() > 1 {
            return Err(refuse(
                &n.name,
                &n.origin,
                "parallel shaping nodes on one edge (a class chosen per packet)",
            ));
        }
        let at = self.classes.len() as u32;
        let mut next = n.shaping_parents.first().copied();
        while let Some(c) = next {
            let s = prog.shaper(c);
            if s.shaping_parents.len() > 1 {
                return Err(refuse(
                    &s.name,
                    &s.origin,
                    "parallel shaping nodes on one edge (a class chosen per packet)",
                ));
            }
            if !s.matches.is_any() {
                return Err(refuse(&s.name, &s.origin, "a shaping node with `match`"));
            }
            self.classes.push(c.get());
            next = s.shaping_parents.first().copied();
        }
        self.class_span[i] = (at, self.classes.len() as u32 - at);
        self.weights[i] = n.edge.weight.max(1);
        self.nodes[i] = Node {
            parent: n.parent.map_or(NIL, NodeId::get),
            kind,
            leaf: n.leaf.map_or(NIL, LeafId::get),
            ring_up: NIL,
            q: queue,
            ..Node::default()
        };
        Ok(())
    }
}

/// Refuses a class that covers more than one edge: a shape node over one child only (a
/// class shared by siblings would need the class-local ranks of the PIFO engines' class
/// queues).
fn refuse_shared_classes(
    prog: &Program,
    class_span: &[(u32, u32)],
    classes: &[u32],
) -> Result<(), Unsupported> {
    let mut edges = vec![0u32; prog.shapers.len()];
    for &(at, len) in class_span {
        for &c in &classes[at as usize..(at + len) as usize] {
            edges[c as usize] += 1;
        }
    }
    match edges.iter().position(|&e| e > 1) {
        Some(c) => {
            let s = &prog.shapers[c];
            Err(refuse(
                &s.name,
                &s.origin,
                "a shaping node over several children (a class they share)",
            ))
        }
        None => Ok(()),
    }
}

/// Each child's key kind and fixed key at its parent (a `prio` parent's children are keyed
/// by the rank of their priority among their siblings'), and whether its parent can see a
/// tie between it and a sibling.
fn set_keys(prog: &Program, nodes: &mut [Node]) {
    for (i, n) in prog.nodes.iter().enumerate() {
        let Some(p) = n.parent else { continue };
        let parent = prog.node(p);
        let mut prios: Vec<u64> = parent
            .children
            .iter()
            .map(|c| prog.node(c).edge.priority)
            .collect();
        prios.sort_unstable();
        prios.dedup();
        let node = &mut nodes[i];
        (node.under, node.start) = match nodes_kind(prog, p) {
            Kind::Wfq => (Under::Wfq, 0),
            Kind::Rr => (Under::Rr, 0),
            Kind::Prio => (
                Under::Fixed,
                prios.partition_point(|&q| q < n.edge.priority) as Rank,
            ),
            _ => (Under::Fixed, 0),
        };
        node.ties = match nodes_kind(prog, p) {
            Kind::Prio => parent
                .children
                .iter()
                .filter(|&s| s.index() != i)
                .any(|s| prog.node(s).edge.priority == n.edge.priority),
            _ => parent.children.len() > 1,
        };
    }
}

/// Each node's `ring_up`: its nearest ancestor (itself excluded) whose parent can see a tie,
/// the ring its packets' arrival numbers go to.
fn set_rings_up(prog: &Program, nodes: &mut [Node]) {
    for (i, n) in prog.nodes.iter().enumerate() {
        let Some(p) = n.parent else { continue };
        let mut a = p;
        nodes[i].ring_up = loop {
            if nodes[a.index()].ties && nodes[a.index()].kind != Kind::Leaf {
                break a.get();
            }
            match prog.node(a).parent {
                Some(up) => a = up,
                None => break NIL,
            }
        };
    }
}

/// Each parent's set: a bitmap of levels for a `prio` node of at most 64 children whose
/// priorities differ (its children in priority order in `by_level`, each child's `level`
/// set), a heap otherwise.
fn prio_sets(prog: &Program, nodes: &mut [Node]) -> (Vec<Children>, Vec<u32>) {
    let mut sets = vec![Children::default(); prog.nodes.len()];
    let mut by_level = Vec::new();
    for (i, n) in prog.nodes.iter().enumerate() {
        if n.leaf.is_some() {
            continue;
        }
        let kids: Vec<u32> = n.children.iter().map(NodeId::get).collect();
        let mut prios: Vec<u64> = kids
            .iter()
            .map(|&c| prog.nodes[c as usize].edge.priority)
            .collect();
        prios.sort_unstable();
        let distinct = prios.windows(2).all(|w| w[0] != w[1]);
        if nodes[i].kind == Kind::Prio && distinct && prios.len() <= 64 {
            let at = by_level.len() as u32;
            for (l, &q) in prios.iter().enumerate() {
                let c = *kids
                    .iter()
                    .find(|&&c| prog.nodes[c as usize].edge.priority == q)
                    .expect("a child at each level");
                nodes[c as usize].level = l as u8;
                by_level.push(c);
            }
            sets[i] = Children::Levels { bits: 0, at };
        }
    }
    (sets, by_level)
}

/// The kind of node `p` of `prog`.
fn nodes_kind(prog: &Program, p: NodeId) -> Kind {
    match prog.node(p).algo {
        Algo::Fifo => Kind::Fifo,
        Algo::Prio => Kind::Prio,
        Algo::Wfq => Kind::Wfq,
        Algo::Rr => Kind::Rr,
        _ => Kind::Leaf,
    }
}
