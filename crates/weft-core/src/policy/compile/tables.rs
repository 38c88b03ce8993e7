//! The classifier tables (the last pass of `Compiler::build`): per node, the dispatch of its
//! children and of the parallel shaping nodes above it, first match in declaration order;
//! and the checks that every rule can be chosen.
//!
//! Invariants of the tables it returns: every node has a child dispatch (empty for leaves)
//! and a shaping dispatch, interned; no rule is shadowed by earlier siblings, contradicts the
//! matches above it, or is shadowed across levels ([`shadowed_across_levels`], within its
//! bounds); each dispatch uses at most `max_match_shapes` match shapes.
//!
//! Cost: the classifier build (see `classifier::tss`), plus the cross-level check, bounded
//! per node by [`CROSS_LEVEL_MAX_BLOCKERS`] and [`CROSS_LEVEL_MAX_ATOMS`].

use super::graph::Tree;
use super::Compiler;
use crate::classifier::tss::{AddError, Dispatch, DispatchBuilder};
use crate::classifier::Match;
use crate::policy::error::{Diagnostic, Rule};
use crate::policy::parse::{Kind, NodeDecl};
use crate::policy::program::{HotNode, LeafId, Limits, Node, NodeId, Tables, NO_ID};

impl Compiler<'_> {
    /// Pass 6, classifier tables: children and shaping dispatch per node, first match in
    /// declaration order; a rule shadowed by earlier ones, or unreachable under the
    /// matches above it, is refused. Establishes the program's tables: every packet that
    /// reaches a node is dispatched to one child (or none) by the first rule it matches.
    pub(super) fn classifier_tables(
        &mut self,
        decls: &[NodeDecl],
        t: &Tree,
        nodes: &[Node],
        shapers: usize,
        limits: &Limits,
    ) -> Option<Tables> {
        let Tree {
            root,
            parents,
            sched_kids,
            bfs,
            id_of,
            shape_ids,
            sid_of,
            ..
        } = t;
        let root = *root;
        let shapes = limits.max_match_shapes as usize;
        let mut tables = Tables {
            dispatches: vec![Dispatch::default()],
            hot: nodes
                .iter()
                .map(|n| HotNode {
                    leaf: n.leaf.map_or(NO_ID, LeafId::get),
                    child_dispatch: 0,
                    shape_dispatch: 0,
                    shape_up: NO_ID,
                })
                .collect(),
            shaper_dispatch: Vec::with_capacity(shapers),
            nested_shaping: false,
            root_match: nodes
                .first()
                .map(|n| n.matches.clone())
                .filter(|m| !m.is_any()),
        };
        // Per node, the scope of the packets that can reach it: its match and its
        // ancestors' (a packet descends from the root through matching children). A node
        // whose match contradicts that of the nodes above it can never be reached.
        let own = |i: usize| {
            decls[i]
                .matches
                .as_ref()
                .map(|m| m.value.clone())
                .unwrap_or_default()
        };
        let mut scope: Vec<Option<Match>> = vec![None; decls.len()];
        scope[root] = Some(own(root));
        // Shadowing across levels (see `shadowed_across_levels`): per node, its scheduling
        // parent, the earlier siblings whose matches meet its scope, and whether it is
        // already reported (or below a node that is).
        let any = Match::default();
        let owns: Vec<&Match> = decls
            .iter()
            .map(|d| d.matches.as_ref().map_or(&any, |m| &m.value))
            .collect();
        let mut sched_parent: Vec<Option<usize>> = vec![None; decls.len()];
        let mut blockers: Vec<Vec<usize>> = vec![Vec::new(); decls.len()];
        // The nearest node at or above each whose `blockers` are not empty (a chain's walk
        // skips the levels without).
        let mut blocked_above: Vec<Option<usize>> = vec![None; decls.len()];
        let mut dead = vec![false; decls.len()];
        for &v in bfs {
            let mut b = DispatchBuilder::new(shapes);
            for (k, &c) in sched_kids[v].iter().enumerate() {
                let reported_before = self.diags.len();
                sched_parent[c] = Some(v);
                let m = own(c);
                let above = scope[v].clone().unwrap_or_default();
                scope[c] = match above.intersect(&m) {
                    Some(s) => Some(s),
                    None => {
                        let d = &decls[c];
                        self.diags.push(
                            Diagnostic::new(
                                Rule::MatchConflict,
                                d.matches.as_ref().map_or(d.name.span, |m| m.span),
                                format!("`{}` (match {m}) can never be reached: the nodes above it take only packets matching {above}", d.name.value),
                            )
                            .node(d.name.value.clone())
                            .help("a packet descends from the root through the children it matches: widen the match above, or narrow this one to agree with it"),
                        );
                        // Checked further down against its own match alone (one report).
                        Some(m.clone())
                    }
                };
                if let Err(e) = b.add(&m, id_of[c]) {
                    let prior = |r: u32| sched_kids[v][r as usize];
                    self.match_error(
                        decls,
                        c,
                        e,
                        prior,
                        &format!("children of `{}`", decls[v].name.value),
                    );
                }
                if dead[v] || self.diags.len() > reported_before {
                    dead[c] = true;
                    continue;
                }
                let sc = scope[c].clone().unwrap_or_default();
                if sched_kids[v].len() <= CROSS_LEVEL_MAX_SIBLINGS {
                    blockers[c] = sched_kids[v][..k]
                        .iter()
                        .copied()
                        .filter(|&e| sc.intersect(owns[e]).is_some())
                        .collect();
                }
                blocked_above[c] = if blockers[c].is_empty() {
                    blocked_above[v]
                } else {
                    Some(c)
                };
                let levels = Levels {
                    sched_parent: &sched_parent,
                    blockers: &blockers,
                    blocked_above: &blocked_above,
                };
                if let Some(d) = shadowed_across_levels(decls, &owns, &levels, c, &sc) {
                    self.diags.push(d);
                    dead[c] = true;
                }
            }
            let children = if sched_kids[v].is_empty() {
                Dispatch::default()
            } else {
                b.build()
            };
            let id = tables.intern(children);
            tables.hot[id_of[v] as usize].child_dispatch = id;
            let shaping = self.shaping_dispatch(decls, v, &parents[v], sid_of, shapes);
            let id = tables.intern(shaping);
            tables.hot[id_of[v] as usize].shape_dispatch = id;
        }
        for &i in shape_ids {
            let shaping = self.shaping_dispatch(decls, i, &parents[i], sid_of, shapes);
            let id = tables.intern(shaping);
            tables.shaper_dispatch.push(id);
        }
        tables.link_shaping(|i| nodes[i].parent.map(NodeId::get));
        self.diags.is_empty().then_some(tables)
    }

    fn shaping_dispatch(
        &mut self,
        decls: &[NodeDecl],
        v: usize,
        parents: &[usize],
        sid_of: &[u32],
        shapes: usize,
    ) -> Dispatch {
        let shaping: Vec<usize> = parents
            .iter()
            .copied()
            .filter(|&p| decls[p].kind.value == Kind::Shape)
            .collect();
        if shaping.is_empty() {
            return Dispatch::default();
        }
        let mut b = DispatchBuilder::new(shapes);
        for &p in &shaping {
            let m = decls[p]
                .matches
                .as_ref()
                .map(|m| m.value.clone())
                .unwrap_or_default();
            if let Err(e) = b.add(&m, sid_of[p]) {
                self.match_error(
                    decls,
                    p,
                    e,
                    |r| shaping[r as usize],
                    &format!("parallel shaping nodes above `{}`", decls[v].name.value),
                );
            }
        }
        b.build()
    }

    fn match_error(
        &mut self,
        decls: &[NodeDecl],
        c: usize,
        e: AddError,
        prior: impl Fn(u32) -> usize,
        group: &str,
    ) {
        let d = &decls[c];
        let span = d.matches.as_ref().map_or(d.name.span, |m| m.span);
        let diag = match e {
            AddError::Shadowed { by } => {
                let earlier = &decls[prior(by)];
                let m = d.matches.as_ref().map_or(Match::any(), |m| m.value.clone());
                Diagnostic::new(
                    Rule::ShadowedMatch,
                    span,
                    format!("`{}` (match {m}) can never be chosen: the earlier `{}` among the {group} already takes all its packets (first match wins)", d.name.value, earlier.name.value),
                )
                .label(earlier.matches.as_ref().map_or(earlier.name.span, |m| m.span), "takes them first")
                .help("put the more specific node first, or narrow the earlier match")
            }
            AddError::TooManyShapes { limit } => Diagnostic::new(
                Rule::MatchLimit,
                span,
                format!("the {group} use more than {limit} distinct match shapes (field sets and prefix lengths), each one a table probe per packet"),
            )
            .help("use the same fields across siblings, or raise `limits: {max_match_shapes: N}`"),
            AddError::TooManyCombinations { combinations, limit } => Diagnostic::new(
                Rule::MatchLimit,
                span,
                format!("this match expands into {combinations} value combinations, more than {limit}"),
            ),
        };
        self.diags.push(diag.node(d.name.value.clone()));
    }
}

/// Siblings a node may have for [`shadowed_across_levels`] to weigh them at its level: the
/// pairwise check is quadratic in them (a flat `senic` node of 100,000 classes is left to
/// the sibling rule's tables).
const CROSS_LEVEL_MAX_SIBLINGS: usize = 256;

/// Single-valued combinations of a scope the cross-level check expands at most.
const CROSS_LEVEL_MAX_ATOMS: usize = 1024;

/// Earlier siblings along a node's path the cross-level check weighs at most (a chain of
/// 100,000 levels, each with a sibling, would otherwise weigh 100,000 a node).
pub(super) const CROSS_LEVEL_MAX_BLOCKERS: usize = 256;

/// What [`shadowed_across_levels`] reads of the levels above a node, per node: its
/// scheduling parent, its earlier siblings whose matches meet its scope, and the nearest
/// node at or above it that has such siblings.
struct Levels<'a> {
    sched_parent: &'a [Option<usize>],
    blockers: &'a [Vec<usize>],
    blocked_above: &'a [Option<usize>],
}

/// Rule shadowed-match across levels: node `c`, whose scope (its match and its ancestors')
/// is `scope`, can never be chosen when every packet of that scope is taken first by an
/// earlier sibling of `c` or of one of its ancestors (first match wins at each level):
/// `web {dport: 80}` before `vm1 {vm: 1}` takes all of `vm1-web {dport: 80}`'s packets, and
/// `tenant-a {vm: 1}` before a catch-all sibling under a parent that takes only `vm: 1`
/// takes all of the catch-all's. Exact for what it reports (each single-valued combination
/// of the scope is covered by one earlier rule, as the sibling rule demands); a scope of
/// more than [`CROSS_LEVEL_MAX_ATOMS`] combinations, siblings beyond
/// [`CROSS_LEVEL_MAX_SIBLINGS`] at a level, or more than [`CROSS_LEVEL_MAX_BLOCKERS`]
/// earlier siblings along the path, are not weighed. Cost: per node, the levels above it
/// that have earlier siblings (at most [`CROSS_LEVEL_MAX_BLOCKERS`]) and, when there are
/// any, its combinations times them.
fn shadowed_across_levels(
    decls: &[NodeDecl],
    owns: &[&Match],
    levels: &Levels,
    c: usize,
    scope: &Match,
) -> Option<Diagnostic> {
    use crate::classifier::reference;
    // The earlier siblings along the path, nearest level first.
    let mut along: Vec<usize> = Vec::new();
    let mut x = levels.blocked_above[c];
    while let Some(n) = x {
        #[cfg(test)]
        crate::steps::count();
        along.extend_from_slice(&levels.blockers[n]);
        if along.len() > CROSS_LEVEL_MAX_BLOCKERS {
            return None;
        }
        x = levels.sched_parent[n].and_then(|p| levels.blocked_above[p]);
    }
    let sched_parent = levels.sched_parent;
    if along.is_empty() {
        return None;
    }
    if scope.combinations() > CROSS_LEVEL_MAX_ATOMS as u128 {
        return None;
    }
    let mut first = None;
    for atom in reference::single_valued(scope) {
        let by = along
            .iter()
            .copied()
            .find(|&e| reference::covers(owns[e], &atom))?;
        first.get_or_insert(by);
    }
    let by = first?;
    let d = &decls[c];
    let e = &decls[by];
    let above = sched_parent[by].map_or("", |p| decls[p].name.value.as_str());
    Some(
        Diagnostic::new(
            Rule::ShadowedMatch,
            d.matches.as_ref().map_or(d.name.span, |m| m.span),
            format!(
                "`{}` can never be chosen: every packet that can reach it (match {scope}) is \
                 taken first by `{}` (match {}), an earlier child of `{above}` (first match \
                 wins at each level)",
                d.name.value, e.name.value, owns[by]
            ),
        )
        .label(
            e.matches.as_ref().map_or(e.name.span, |m| m.span),
            "takes them first",
        )
        .help("put the more specific node first, or narrow the earlier match")
        .node(d.name.value.clone()),
    )
}
