//! Laying out the program (the layout pass of `Compiler::build`): the program's nodes in
//! breadth-first order, with their algorithms, edges and defaults, and its shaping classes.
//!
//! Invariants of its output: node `i` is the tree's `i`th node breadth-first, so a node's
//! children are the id range `children`; leaves are numbered in node order; every default
//! the file leaves out is filled here (priority by position, weight 1, quantum and flow
//! quantum one MTU, queue limits 10,000 and 1,000 packets, bucket two frames, slack and
//! deadline 1 ms).
//!
//! Cost: O(nodes + edges).

use super::graph::Tree;
use super::{default_burst_bytes, Compiler};
use crate::policy::error::Span;
use crate::policy::parse::{FlowKey, FlowSched, Kind, NodeDecl};
use crate::policy::program::{
    Algo, Children, Edge, LeafId, LeafSpec, Link, Node, NodeId, Origin, Shaper, ShaperId,
};

impl Compiler<'_> {
    fn origin(&self, span: Span) -> Origin {
        let (file, line, _) = self.sources.location(span);
        Origin {
            file,
            line: line as u32,
        }
    }

    /// Pass 5, the layout: the program's nodes (breadth-first) and shaping classes, every
    /// default filled in. Establishes the nodes (ids, children ranges, edges, leaves) that
    /// the classifier tables dispatch to, and the program's final node and class lists.
    pub(super) fn program_nodes(
        &self,
        decls: &[NodeDecl],
        t: &Tree,
        link: &Link,
    ) -> (Vec<Node>, Vec<NodeId>, Vec<Shaper>) {
        let kind = |i: usize| decls[i].kind.value;
        let Tree {
            root,
            parents,
            sched_kids,
            kid_pos,
            bfs,
            id_of,
            depth_of,
            shape_ids,
            sid_of,
            ..
        } = t;
        let root = *root;
        let sched_parent = |v: usize| t.sched_parent(v);
        let mut nodes: Vec<Node> = Vec::with_capacity(bfs.len());
        let mut leaves = Vec::new();
        for &v in bfs {
            let d = &decls[v];
            let algo = algo(d, link);
            let is_leaf = matches!(algo, Algo::Leaf(_));
            let kids = &sched_kids[v];
            let children = if kids.is_empty() {
                Children::EMPTY
            } else {
                Children::new(
                    NodeId::new(id_of[kids[0]]),
                    NodeId::new(id_of[kids[kids.len() - 1]] + 1),
                )
            };
            let leaf = if is_leaf {
                leaves.push(NodeId::from_index(nodes.len()));
                Some(LeafId::from_index(leaves.len() - 1))
            } else {
                None
            };
            let position = sched_parent(v).map(|_| kid_pos[v]);
            nodes.push(Node {
                name: d.name.value.clone(),
                algo,
                parent: if v == root {
                    None
                } else {
                    sched_parent(v).map(|p| NodeId::new(id_of[p]))
                },
                children,
                edge: Edge {
                    priority: d
                        .priority
                        .as_ref()
                        .map(|s| s.value)
                        .or(position)
                        .unwrap_or(0),
                    weight: d.weight.as_ref().map_or(1, |s| s.value),
                    quantum_bytes: d.quantum.as_ref().map_or(link.mtu_bytes, |s| s.value),
                    rate_bps: d.rate.as_ref().map_or(0, |s| s.value),
                },
                depth: depth_of[v],
                leaf,
                matches: d
                    .matches
                    .as_ref()
                    .map(|m| m.value.clone())
                    .unwrap_or_default(),
                shaping_parents: parents[v]
                    .iter()
                    .filter(|&&p| kind(p) == Kind::Shape)
                    .map(|&p| ShaperId::new(sid_of[p]))
                    .collect(),
                origin: self.origin(d.name.span),
            });
        }
        let shapers: Vec<Shaper> = shape_ids
            .iter()
            .map(|&i| {
                let d = &decls[i];
                Shaper {
                    name: d.name.value.clone(),
                    rate_bps: d.rate.as_ref().map_or(0, |r| r.value),
                    burst_bytes: d
                        .burst
                        .as_ref()
                        .map_or(default_burst_bytes(link), |b| b.value),
                    matches: d
                        .matches
                        .as_ref()
                        .map(|m| m.value.clone())
                        .unwrap_or_default(),
                    shaping_parents: parents[i]
                        .iter()
                        .filter(|&&p| kind(p) == Kind::Shape)
                        .map(|&p| ShaperId::new(sid_of[p]))
                        .collect(),
                    sched_parent: sched_parent(i).map_or(NodeId::ROOT, |p| NodeId::new(id_of[p])),
                    origin: self.origin(d.name.span),
                }
            })
            .collect();
        (nodes, leaves, shapers)
    }
}

/// A scheduling node's or leaf's algorithm, with every default the file leaves out (slack
/// and deadline 1 ms, a `senic` node's capacity the link rate, flow quantum one MTU, queue
/// limits of 10,000 packets a leaf and 1,000 a flow).
fn algo(d: &NodeDecl, link: &Link) -> Algo {
    match d.kind.value {
        Kind::Fifo => Algo::Fifo,
        Kind::Prio => Algo::Prio,
        Kind::Wfq => Algo::Wfq,
        Kind::Rr => Algo::Rr,
        Kind::Drr => Algo::Drr,
        Kind::Lstf => Algo::Lstf {
            default_slack_ps: d.default_slack.as_ref().map_or(1_000_000_000, |s| s.value),
        },
        Kind::Edf => Algo::Edf {
            default_deadline_ps: d
                .default_deadline
                .as_ref()
                .map_or(1_000_000_000, |s| s.value),
        },
        Kind::Senic => Algo::Senic {
            capacity_bps: d.rate.as_ref().map_or(link.rate_bps, |r| r.value),
        },
        Kind::Leaf | Kind::Attach => {
            let lim = d.limit.as_ref().map(|l| &l.value);
            let flim = d.flow_limit.as_ref().map(|l| &l.value);
            Algo::Leaf(LeafSpec {
                flow_key: d.flows_by.as_ref().map_or(FlowKey::FiveTuple, |s| s.value),
                flow_sched: d.flows_sched.as_ref().map_or(FlowSched::Fifo, |s| s.value),
                flow_quantum_bytes: d.flows_quantum.as_ref().map_or(link.mtu_bytes, |s| s.value),
                limit_packets: lim
                    .and_then(|l| l.packets.as_ref())
                    .map(|s| s.value)
                    .or(Some(10_000)),
                limit_bytes: lim.and_then(|l| l.bytes.as_ref()).map(|s| s.value),
                flow_limit_packets: flim
                    .and_then(|l| l.packets.as_ref())
                    .map(|s| s.value)
                    .or(Some(1_000)),
                flow_limit_bytes: flim.and_then(|l| l.bytes.as_ref()).map(|s| s.value),
                outstanding: d.outstanding.as_ref().map(|s| s.value),
                unfilled_attachment: d.kind.value == Kind::Attach,
            })
        }
        Kind::Shape => unreachable!("shaping nodes are not in the tree"),
    }
}
