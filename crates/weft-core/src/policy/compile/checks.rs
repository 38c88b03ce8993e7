//! The checks of `Compiler::build` on the numbered tree: each key where its
//! reader is, the keys each node needs, SENIC's two-level form and capacities, and the
//! shaping depth per edge and per packet.
//!
//! Invariants after them without errors: every key present is read (by the node's type or
//! its scheduling parent's); shaping nodes and classes of a `senic` node have a `rate`; the
//! children of a `prio` node all have a priority or none do; at most two levels of `senic`
//! nodes, L1 rates within their node's capacity; at most `max_shaping_depth` shaping nodes
//! stacked on an edge and `MAX_SHAPING_PER_PACKET` on a packet's path. A `burst` under two
//! frames is a warning (`small-burst`), not an error.
//!
//! Cost: O(nodes + edges).

use std::collections::HashMap;

use super::graph::Tree;
use super::{default_burst_bytes, Compiler};
use crate::policy::error::{Diagnostic, Rule};
use crate::policy::parse::{Kind, NodeDecl};
use crate::policy::program::{Limits, Link, MAX_SHAPING_PER_PACKET};

impl Compiler<'_> {
    /// Pass 4, the checks on the numbered tree, each reporting all it finds (a policy's
    /// misplaced keys and its SENIC or depth errors are told at once). Establishes that
    /// every key is read where it is, SENIC's form and the shaping depth limits, for the
    /// layout to fill in defaults without second-guessing; `None` when any of them, or the
    /// numbering before them, reported an error.
    pub(super) fn check(
        &mut self,
        decls: &[NodeDecl],
        t: &Tree,
        link: &Link,
        limits: &Limits,
    ) -> Option<()> {
        self.check_keys(decls, t, link);
        self.check_senic(decls, t, link);
        self.check_shaping_depth(decls, t, limits)
    }

    /// Check, keys in their places: each key on a node whose parent (or own type) reads
    /// it, the keys a node needs, priorities on all children of a `prio` node or none.
    /// A bucket under two frames is a warning.
    fn check_keys(&mut self, decls: &[NodeDecl], t: &Tree, link: &Link) {
        let kind = |i: usize| decls[i].kind.value;
        let (root, sched_kids) = (t.root, &t.sched_kids);
        let sched_parent = |v: usize| t.sched_parent(v);
        let mut priority_siblings: HashMap<usize, (usize, usize)> = HashMap::new(); // parent -> (with, without)
        for v in 0..decls.len() {
            let d = &decls[v];
            let k = kind(v);
            let parent_kind = if k == Kind::Shape || v == root {
                None
            } else {
                sched_parent(v).map(kind)
            };
            for (key, span) in d.present_keys() {
                let reason = misplaced_key(key, k, parent_kind, &d.name.value);
                if let Some(r) = reason {
                    self.diags.push(
                        Diagnostic::new(Rule::MisplacedKey, span, r).node(d.name.value.clone()),
                    );
                }
            }
            if let Some(b) = d.burst.as_ref().filter(|_| k == Kind::Shape) {
                let least = default_burst_bytes(link);
                if b.value < least {
                    self.warnings.push(
                        Diagnostic::new(
                            Rule::SmallBurst,
                            b.span,
                            format!(
                                "the bucket of `{}` holds {} bytes, less than two frames of the link (2 × mtu {} = {least} bytes)",
                                d.name.value, b.value, link.mtu_bytes
                            ),
                        )
                        .node(d.name.value.clone())
                        .help(format!("a bucket under two frames loses rate when the link delays the class's packet behind another frame; use at least {least}b (2 × mtu) or omit burst for the default")),
                    );
                }
            }
            if k == Kind::Shape && d.rate.is_none() {
                self.diags.push(
                    Diagnostic::new(
                        Rule::MissingKey,
                        d.name.span,
                        format!("shaping node `{}` needs a `rate`", d.name.value),
                    )
                    .node(d.name.value.clone()),
                );
            }
            if parent_kind == Some(Kind::Senic) && d.rate.is_none() {
                self.diags.push(
                    Diagnostic::new(Rule::MissingKey, d.name.span, format!("`{}` is a class of the senic node `{}` and needs a `rate` (its rate limit)", d.name.value, decls[sched_parent(v).unwrap_or(root)].name.value))
                        .node(d.name.value.clone()),
                );
            }
            if parent_kind == Some(Kind::Prio) {
                let e = priority_siblings
                    .entry(sched_parent(v).unwrap_or(root))
                    .or_insert((0, 0));
                if d.priority.is_some() {
                    e.0 += 1;
                } else {
                    e.1 += 1;
                }
            }
        }
        for (&p, &(with, without)) in &priority_siblings {
            if with > 0 && without > 0 {
                let missing = sched_kids[p]
                    .iter()
                    .find(|&&c| decls[c].priority.is_none())
                    .copied()
                    .unwrap_or(p);
                self.diags.push(
                    Diagnostic::new(Rule::MissingKey, decls[missing].name.span, format!("`{}` has no `priority` while its siblings under `{}` do; give every child of a prio node a priority, or none (declaration order)", decls[missing].name.value, decls[p].name.value))
                        .node(decls[missing].name.value.clone()),
                );
            }
        }
    }

    /// Check, SENIC's two-level form (SENIC §4.2): two levels at most, L1 rates within
    /// their node's capacity.
    fn check_senic(&mut self, decls: &[NodeDecl], t: &Tree, link: &Link) {
        let kind = |i: usize| decls[i].kind.value;
        let sched_kids = &t.sched_kids;
        let sched_parent = |v: usize| t.sched_parent(v);
        for v in 0..decls.len() {
            if kind(v) != Kind::Senic {
                continue;
            }
            let up = sched_parent(v);
            let upup = up.and_then(sched_parent);
            if up.map(kind) == Some(Kind::Senic) && upup.map(kind) == Some(Kind::Senic) {
                self.diags.push(
                    Diagnostic::new(Rule::SenicDepth, decls[v].kind.span, format!("`{}` is a third level of senic nodes; SENIC's hierarchy has two levels (L1 classes and their L2 classes)", decls[v].name.value))
                        .node(decls[v].name.value.clone()),
                );
            }
            let has_l1_groups = sched_kids[v].iter().any(|&c| kind(c) == Kind::Senic);
            if has_l1_groups && up.map(kind) != Some(Kind::Senic) {
                let capacity = decls[v].rate.as_ref().map_or(link.rate_bps, |r| r.value);
                let sum: u128 = sched_kids[v]
                    .iter()
                    .filter_map(|&c| decls[c].rate.as_ref())
                    .map(|r| r.value as u128)
                    .sum();
                if sum > capacity as u128 {
                    self.diags.push(
                        Diagnostic::new(Rule::SenicOversubscribed, decls[v].name.span, senic_oversubscribed_message(&decls[v].name.value, sum, capacity))
                            .node(decls[v].name.value.clone())
                            .help("lower the L1 rates; oversubscription falls back to sharing only among L2 classes"),
                    );
                }
            }
        }
    }

    /// Check, shaping depth per edge and per packet, within the limits (what the engines'
    /// per-packet arrays hold). `None` when any error was reported so far.
    fn check_shaping_depth(&mut self, decls: &[NodeDecl], t: &Tree, limits: &Limits) -> Option<()> {
        let kind = |i: usize| decls[i].kind.value;
        let (root, parents, order, bfs) = (t.root, &t.parents, &t.order, &t.bfs);
        let sched_parent = |v: usize| t.sched_parent(v);
        let mut chain: Vec<u32> = vec![0; decls.len()]; // longest shaping chain above a node's edge
        for &v in order {
            chain[v] = parents[v]
                .iter()
                .filter(|&&p| kind(p) == Kind::Shape)
                .map(|&p| 1 + chain[p])
                .max()
                .unwrap_or(0);
            if kind(v) != Kind::Shape && chain[v] > limits.max_shaping_depth {
                self.diags.push(
                    Diagnostic::new(Rule::DepthLimit, decls[v].name.span, format!("{} shaping nodes are stacked on the edge above `{}`, more than the limit of {}", chain[v], decls[v].name.value, limits.max_shaping_depth))
                        .node(decls[v].name.value.clone()),
                );
            }
        }
        let mut path_shaping: Vec<u32> = vec![0; decls.len()];
        for &v in bfs {
            let up = if v == root {
                0
            } else {
                sched_parent(v).map_or(0, |p| path_shaping[p])
            };
            path_shaping[v] = up + chain[v];
            if matches!(kind(v), Kind::Leaf | Kind::Attach)
                && path_shaping[v] as usize > MAX_SHAPING_PER_PACKET
            {
                self.diags.push(
                    Diagnostic::new(Rule::DepthLimit, decls[v].name.span, format!("packets of `{}` can pass {} shaping nodes; weft supports at most {MAX_SHAPING_PER_PACKET} per packet", decls[v].name.value, path_shaping[v]))
                        .node(decls[v].name.value.clone()),
                );
            }
        }
        self.diags.is_empty().then_some(())
    }
}

/// Rule senic-oversubscribed's message: the L1 classes of `node` add up to `sum_bps`, more
/// than its `capacity_bps` (also said of a live update's rates, see
/// [`Program::senic_oversubscribed`](crate::policy::Program::senic_oversubscribed)).
pub fn senic_oversubscribed_message(node: &str, sum_bps: u128, capacity_bps: u64) -> String {
    format!(
        "the L1 classes of `{node}` add up to {}, more than its capacity {}; L1 classes are \
         strict limits (SENIC §4.2)",
        crate::units::format_rate(sum_bps.min(u64::MAX as u128) as u64),
        crate::units::format_rate(capacity_bps)
    )
}

/// Why `key` is misplaced on node `name`, a `k` whose scheduling parent is a `parent_kind`
/// (`None` for the root and shaping nodes); `None` when that node reads it there.
fn misplaced_key(key: &str, k: Kind, parent_kind: Option<Kind>, name: &str) -> Option<String> {
    match key {
        "priority" | "weight" | "quantum" => {
            if k == Kind::Shape {
                Some(format!("shaping nodes are transparent to scheduling; put `{key}` on the node below `{name}`"))
            } else {
                match parent_kind {
                    None => Some(format!(
                        "`{key}` is read by the parent, and `{name}` is the root"
                    )),
                    Some(pk) if pk.child_key() == Some(key) => None,
                    Some(pk) => Some(format!(
                        "`{key}` is read by a {} parent, but the parent of `{}` is a `{}` node{}",
                        expected_parent(key),
                        name,
                        pk.name(),
                        pk.child_key()
                            .map(|c| format!(", which reads `{c}`"))
                            .unwrap_or_default()
                    )),
                }
            }
        }
        "rate" => {
            if k == Kind::Shape || k == Kind::Senic || parent_kind == Some(Kind::Senic) {
                None
            } else {
                Some(format!("`rate` belongs to `shape` nodes, `senic` nodes and children of a `senic` node; `{name}` is a {} under a `{}`", k.name(), parent_kind.map_or("nothing", Kind::name)))
            }
        }
        "burst" => (k != Kind::Shape).then(|| "`burst` belongs to `shape` nodes".to_string()),
        "default_slack" => {
            (k != Kind::Lstf).then(|| "`default_slack` belongs to `lstf` nodes".to_string())
        }
        "default_deadline" => {
            (k != Kind::Edf).then(|| "`default_deadline` belongs to `edf` nodes".to_string())
        }
        "flows" | "limit" | "flow_limit" | "outstanding" => {
            (!matches!(k, Kind::Leaf | Kind::Attach))
                .then(|| format!("`{key}` belongs to leaves (and unfilled attachment points)"))
        }
        "policy" => (k != Kind::Attach).then(|| "`policy` belongs to `attach` nodes".to_string()),
        _ => None,
    }
}

fn expected_parent(key: &str) -> &'static str {
    match key {
        "priority" => "`prio`",
        "weight" => "`wfq`",
        "quantum" => "`drr`",
        _ => "`senic`",
    }
}
