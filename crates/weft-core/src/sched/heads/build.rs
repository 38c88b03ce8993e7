//! Building a head engine from a compiled policy: what it refuses, each node's record,
//! ties and arrival rings, each parent's set.

use super::*;

impl HeadEngine {
    /// An engine for `prog`, or what in it this engine does not implement.
    pub fn new(prog: Arc<Program>) -> Result<HeadEngine, Unsupported> {
        let refuse = |name: &str, origin: &Origin, reason| Unsupported {
            node: name.to_string(),
            file: origin.file.clone(),
            line: origin.line,
            reason,
        };
        let count = prog.nodes.len();
        let mut nodes = vec![Node::default(); count];
        let mut leaf_nodes = Vec::with_capacity(prog.leaves.len());
        let mut specs = Vec::with_capacity(prog.leaves.len());
        let mut classes = Vec::new();
        let mut class_span = vec![(0u32, 0u32); count];
        let mut weights = vec![1u64; count];
        for (i, n) in prog.nodes.iter().enumerate() {
            // The hot path walks down from node 0 and relies on parents coming first.
            assert!(
                n.parent.is_none_or(|p| (p as usize) < i),
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
                    leaf_nodes.push(i as u32);
                    specs.push(spec.clone());
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
            let at = classes.len() as u32;
            let mut next = n.shaping_parents.first().copied();
            while let Some(c) = next {
                let s = &prog.shapers[c as usize];
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
                classes.push(c);
                next = s.shaping_parents.first().copied();
            }
            class_span[i] = (at, classes.len() as u32 - at);
            weights[i] = n.edge.weight.max(1);
            nodes[i] = Node {
                parent: n.parent.unwrap_or(NIL),
                kind,
                leaf: n.leaf.unwrap_or(NIL),
                ring_up: NIL,
                q: queue,
                ..Node::default()
            };
        }
        // A class covers one edge: a shape node over one child (a class shared by siblings
        // would need the class-local ranks of the PIFO engines' class queues).
        let mut edges = vec![0u32; prog.shapers.len()];
        for &(at, len) in &class_span {
            for &c in &classes[at as usize..(at + len) as usize] {
                edges[c as usize] += 1;
            }
        }
        if let Some(c) = edges.iter().position(|&e| e > 1) {
            let s = &prog.shapers[c];
            return Err(refuse(
                &s.name,
                &s.origin,
                "a shaping node over several children (a class they share)",
            ));
        }
        // Keys, ties and arrival rings.
        let rings = vec![Ring::new(); count];
        for (i, n) in prog.nodes.iter().enumerate() {
            let Some(p) = n.parent else { continue };
            let parent = &prog.nodes[p as usize];
            let mut prios: Vec<u64> = parent
                .children
                .clone()
                .map(|c| prog.nodes[c as usize].edge.priority)
                .collect();
            prios.sort_unstable();
            prios.dedup();
            let node = &mut nodes[i];
            (node.under, node.start) = match nodes_kind(&prog, p) {
                Kind::Wfq => (Under::Wfq, 0),
                Kind::Rr => (Under::Rr, 0),
                Kind::Prio => (
                    Under::Fixed,
                    prios.partition_point(|&q| q < n.edge.priority) as Rank,
                ),
                _ => (Under::Fixed, 0),
            };
            node.ties = match nodes_kind(&prog, p) {
                Kind::Prio => parent
                    .children
                    .clone()
                    .filter(|&s| s as usize != i)
                    .any(|s| prog.nodes[s as usize].edge.priority == n.edge.priority),
                _ => parent.children.len() > 1,
            };
        }
        for (i, n) in prog.nodes.iter().enumerate() {
            let Some(p) = n.parent else { continue };
            let mut a = p;
            nodes[i].ring_up = loop {
                if nodes[a as usize].ties && nodes[a as usize].kind != Kind::Leaf {
                    break a;
                }
                match prog.nodes[a as usize].parent {
                    Some(up) => a = up,
                    None => break NIL,
                }
            };
        }
        // Each parent's set.
        let mut sets = vec![Children::default(); count];
        let mut by_level = Vec::new();
        for (i, n) in prog.nodes.iter().enumerate() {
            if n.leaf.is_some() {
                continue;
            }
            let kids: Vec<u32> = n.children.clone().collect();
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
        let buckets: Vec<Bucket> = prog
            .shapers
            .iter()
            .map(|s| Bucket::new(s.rate_bps, s.burst_bytes))
            .collect();
        let depth = prog.depth() as usize;
        Ok(HeadEngine {
            overhead: prog.link.counted_overhead(),
            prog,
            nodes,
            sets,
            by_level,
            rings,
            weights,
            class_span,
            leaf_nodes,
            specs,
            classes,
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
            depth: 0,
            preload: count * std::mem::size_of::<Node>() >= PRELOAD_BYTES,
        })
    }
}

/// The kind of node `p` of `prog`.
fn nodes_kind(prog: &Program, p: u32) -> Kind {
    match prog.nodes[p as usize].algo {
        Algo::Fifo => Kind::Fifo,
        Algo::Prio => Kind::Prio,
        Algo::Wfq => Kind::Wfq,
        Algo::Rr => Kind::Rr,
        _ => Kind::Leaf,
    }
}
