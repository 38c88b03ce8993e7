//! The node count and the graph passes of `Compiler::build`: names, parents, cycles, the
//! root, scheduling parents through shaping nodes, and the numbering of the scheduling tree
//! into a [`Tree`].
//!
//! Invariants of a [`Tree`] these passes return without errors: every name is unique and
//! every parent exists and can have children; the graph is acyclic with one root, not a
//! shaping node; every node but the root has exactly one scheduling parent (Loom's restricted
//! DAG: several parents only when all are parallel shaping nodes over one scheduling node);
//! node ids are breadth-first and within `max_depth`, so a node's children have consecutive
//! ids.
//!
//! Cost: O(nodes + edges), plus did-you-mean hints for unknown parents bounded by
//! [`MAX_SUGGESTION_WORK`] candidates in all.

use std::collections::HashMap;

use super::Compiler;
use crate::policy::error::{Diagnostic, Rule, Span};
use crate::policy::parse::{suggest, Document, Kind, NodeDecl};
use crate::policy::program::Limits;

/// The scheduling tree that passes 4-6 derive from the declarations (indices into them).
pub(super) struct Tree {
    pub(super) root: usize,
    /// Each declaration's parents as written, shaping nodes included.
    pub(super) parents: Vec<Vec<usize>>,
    /// The declarations from the root down, parents before children.
    pub(super) order: Vec<usize>,
    /// Each declaration's scheduling parents through shaping nodes (one when valid).
    pub(super) sched_up: Vec<Option<Vec<usize>>>,
    /// Each node's scheduling children, in declaration order.
    pub(super) sched_kids: Vec<Vec<usize>>,
    /// Each node's position among its parent's scheduling children (the default priority).
    pub(super) kid_pos: Vec<u64>,
    /// The scheduling nodes breadth-first: a node's id is its position here.
    pub(super) bfs: Vec<usize>,
    pub(super) id_of: Vec<u32>,
    pub(super) depth_of: Vec<u32>,
    /// The shaping nodes in declaration order: a class's id is its position here.
    pub(super) shape_ids: Vec<usize>,
    pub(super) sid_of: Vec<u32>,
}

impl Tree {
    /// The scheduling parent of declaration `v` (through shaping nodes).
    pub(super) fn sched_parent(&self, v: usize) -> Option<usize> {
        self.sched_up[v].as_ref().and_then(|s| s.first().copied())
    }
}

impl Compiler<'_> {
    /// Pass 2, the node count: the policy has nodes, and at most `max_nodes` of them.
    /// Establishes a non-empty list within the limit, so that the graph passes' memory and
    /// time are bounded before they start.
    pub(super) fn count(
        &mut self,
        decls: &[NodeDecl],
        top: &Document,
        limits: &Limits,
    ) -> Option<()> {
        let doc_span = top.span;
        if decls.len() > limits.max_nodes as usize {
            self.diags.push(
                Diagnostic::new(
                    Rule::NodeLimit,
                    decls[limits.max_nodes as usize].name.span,
                    format!(
                        "the policy has {} nodes, more than the limit of {}",
                        decls.len(),
                        limits.max_nodes
                    ),
                )
                .help(
                    "raise `limits: {max_nodes: N}` or pass --max-nodes if the machine can run it",
                ),
            );
            return None;
        }
        if decls.is_empty() {
            // At `nodes:` (its list is empty), else at the file's start.
            let at = top
                .nodes_span
                .unwrap_or_else(|| self.sources.first_char(doc_span));
            self.diags
                .push(Diagnostic::new(Rule::NoRoot, at, "the policy has no nodes"));
            return None;
        }
        Some(())
    }

    /// Pass 3, the graph: the steps below in turn, each stopping the build when it finds an
    /// error the next would trip over. Establishes the [`Tree`] (a valid restricted DAG,
    /// numbered) that the checks, the layout and the tables read; the numbering's own
    /// errors (childless nodes, depth) are reported without stopping, for the checks to
    /// report theirs too.
    pub(super) fn tree(
        &mut self,
        decls: &[NodeDecl],
        doc_span: Span,
        limits: &Limits,
    ) -> Option<Tree> {
        let index = self.names(decls);
        let parents = self.parents(decls, &index)?;
        self.cycles(decls, &parents)?;
        let root = self.root(decls, doc_span)?;
        let up = self.scheduling_parents(decls, &parents, root)?;
        Some(self.number(decls, parents, root, up, limits))
    }

    /// Graph step, names: each declared once (a duplicate is reported at its second place).
    /// Establishes the name → declaration index that parents are resolved through.
    fn names<'d>(&mut self, decls: &'d [NodeDecl]) -> HashMap<&'d str, usize> {
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(decls.len());
        for (i, d) in decls.iter().enumerate() {
            if let Some(&first) = index.get(d.name.value.as_str()) {
                self.diags.push(
                    Diagnostic::new(
                        Rule::DuplicateName,
                        d.name.span,
                        format!("a node named `{}` already exists", d.name.value),
                    )
                    .node(d.name.value.clone())
                    .label(decls[first].name.span, "first defined here"),
                );
            } else {
                index.insert(&d.name.value, i);
            }
        }
        index
    }

    /// Graph step, parents: each names a node that can have children, once; only parallel
    /// shaping nodes share a child. Establishes each declaration's parents as indices, every
    /// one an inner node.
    fn parents(
        &mut self,
        decls: &[NodeDecl],
        index: &HashMap<&str, usize>,
    ) -> Option<Vec<Vec<usize>>> {
        let kind = |i: usize| decls[i].kind.value;
        let mut parents: Vec<Vec<usize>> = vec![Vec::new(); decls.len()];
        let mut parent_candidates: Option<Vec<&str>> = None;
        let mut suggested: HashMap<&str, Option<String>> = HashMap::new();
        let mut suggestion_work = 0usize;
        for (i, d) in decls.iter().enumerate() {
            for p in &d.parents {
                match index.get(p.value.as_str()) {
                    Some(&j) => {
                        if parents[i].contains(&j) {
                            self.diags.push(
                                Diagnostic::new(
                                    Rule::DuplicateName,
                                    p.span,
                                    format!("parent `{}` is listed twice", p.value),
                                )
                                .node(d.name.value.clone()),
                            );
                            continue;
                        }
                        if matches!(kind(j), Kind::Leaf | Kind::Attach) {
                            self.diags.push(
                                Diagnostic::new(Rule::LeafWithChildren, p.span, format!("`{}` is a {} and cannot be a parent", p.value, kind(j).name()))
                                    .node(d.name.value.clone())
                                    .label(decls[j].kind.span, "declared here")
                                    .help("give it a scheduling type (fifo, prio, wfq, ...) to make it an inner node"),
                            );
                            continue;
                        }
                        parents[i].push(j);
                    }
                    None => {
                        // Suggest only nodes that could be its parent: not itself, not
                        // a leaf or attachment point. The candidates are listed once, and
                        // each unknown name is looked up once however many nodes name it
                        // (40,000 leaves under one misspelt parent scanned every name for
                        // each leaf: 17 s).
                        let candidates = parent_candidates.get_or_insert_with(|| {
                            index
                                .iter()
                                .filter(|&(_, &j)| !matches!(kind(j), Kind::Leaf | Kind::Attach))
                                .map(|(&n, _)| n)
                                .collect::<Vec<&str>>()
                        });
                        let own = d.name.value.as_str();
                        let cached = suggested
                            .entry(p.value.as_str())
                            .or_insert_with(|| {
                                budgeted_suggest(&p.value, candidates, &mut suggestion_work)
                            })
                            .clone();
                        let s = match cached {
                            // Rare: the best match was the node itself.
                            Some(s) if s == own => {
                                let others: Vec<&str> =
                                    candidates.iter().copied().filter(|&n| n != own).collect();
                                budgeted_suggest(&p.value, &others, &mut suggestion_work)
                            }
                            other => other,
                        };
                        let mut diag = Diagnostic::new(
                            Rule::UnknownNode,
                            p.span,
                            format!(
                                "parent `{}` is not a node of this policy",
                                crate::policy::parse::excerpt(&p.value).trim_matches('"')
                            ),
                        )
                        .node(d.name.value.clone());
                        if let Some(s) = s {
                            diag = diag.help(format!("did you mean `{s}`?"));
                        }
                        self.diags.push(diag);
                    }
                }
            }
            if parents[i].len() > 1 {
                if let Some(&sched) = parents[i].iter().find(|&&j| kind(j) != Kind::Shape) {
                    let span = d
                        .parents
                        .iter()
                        .find(|p| p.value == decls[sched].name.value)
                        .map_or(d.name.span, |p| p.span);
                    self.diags.push(
                        Diagnostic::new(Rule::MultipleParents, span, format!("`{}` has {} parents but `{}` is a {} node; a node under a scheduling node has exactly one parent", d.name.value, parents[i].len(), decls[sched].name.value, kind(sched).name()))
                            .node(d.name.value.clone())
                            .help("only parallel shaping nodes (type: shape) may share a child (Loom §3)"),
                    );
                }
            }
        }
        self.diags.is_empty().then_some(parents)
    }

    /// Graph step, cycles: an iterative depth-first search over the parent edges.
    /// Establishes that the graph is acyclic, so the walks from the root down terminate.
    fn cycles(&mut self, decls: &[NodeDecl], parents: &[Vec<usize>]) -> Option<()> {
        let mut color = vec![0u8; decls.len()]; // 0 new, 1 on stack, 2 done
        for start in 0..decls.len() {
            if color[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            color[start] = 1;
            while let Some(&mut (v, ref mut k)) = stack.last_mut() {
                if *k < parents[v].len() {
                    let p = parents[v][*k];
                    *k += 1;
                    match color[p] {
                        0 => {
                            color[p] = 1;
                            stack.push((p, 0));
                        }
                        1 => {
                            let pos = stack.iter().position(|&(x, _)| x == p).unwrap_or(0);
                            let mut names: Vec<&str> = stack[pos..]
                                .iter()
                                .map(|&(x, _)| decls[x].name.value.as_str())
                                .collect();
                            names.push(&decls[p].name.value);
                            let span = decls[v]
                                .parents
                                .iter()
                                .find(|s| s.value == decls[p].name.value)
                                .map_or(decls[v].name.span, |s| s.span);
                            self.diags.push(
                                Diagnostic::new(
                                    Rule::Cycle,
                                    span,
                                    format!("parents form a cycle: {}", names.join(" → ")),
                                )
                                .node(decls[v].name.value.clone()),
                            );
                        }
                        _ => {}
                    }
                } else {
                    color[v] = 2;
                    stack.pop();
                }
            }
        }
        self.diags.is_empty().then_some(())
    }

    /// Graph step, the root: exactly one node without a parent, and not a shaping node.
    /// Establishes the one node every walk from the top starts at.
    fn root(&mut self, decls: &[NodeDecl], doc_span: Span) -> Option<usize> {
        let kind = |i: usize| decls[i].kind.value;
        let roots: Vec<usize> = (0..decls.len())
            .filter(|&i| decls[i].parents.is_empty())
            .collect();
        let root = match roots.as_slice() {
            [] => {
                self.diags.push(Diagnostic::new(
                    Rule::NoRoot,
                    self.sources.first_char(doc_span),
                    "every node has a parent: there is no root",
                ));
                return None;
            }
            [r] => *r,
            [first, rest @ ..] => {
                let mut d = Diagnostic::new(
                    Rule::MultipleRoots,
                    decls[rest[0]].name.span,
                    format!(
                        "`{}` has no parent, but `{}` is already the root; a policy has one root",
                        decls[rest[0]].name.value, decls[*first].name.value
                    ),
                )
                .node(decls[rest[0]].name.value.clone())
                .label(decls[*first].name.span, "the first root");
                for r in &rest[1..] {
                    d = d.label(decls[*r].name.span, "another root");
                }
                self.diags
                    .push(d.help("give each of these nodes a `parent`"));
                return None;
            }
        };
        if kind(root) == Kind::Shape {
            self.diags.push(
                Diagnostic::new(Rule::ShapingRoot, decls[root].kind.span, format!("the root `{}` is a shaping node", decls[root].name.value))
                    .node(decls[root].name.value.clone())
                    .help("put a scheduling node (e.g. `type: fifo`) above it; shaping nodes sit on edges"),
            );
            return None;
        }
        Some(root)
    }

    /// Graph step, scheduling parents through shaping nodes (memoized; the graph is
    /// acyclic): the declarations from the root down (parents first) and each one's
    /// scheduling parents. Establishes that removing shaping nodes leaves a tree: every
    /// node but the root has exactly one scheduling parent (`parallel-shaping`), and every
    /// shaping node has children.
    #[allow(clippy::type_complexity)]
    fn scheduling_parents(
        &mut self,
        decls: &[NodeDecl],
        parents: &[Vec<usize>],
        root: usize,
    ) -> Option<(Vec<usize>, Vec<Option<Vec<usize>>>)> {
        let kind = |i: usize| decls[i].kind.value;
        let mut sched_up: Vec<Option<Vec<usize>>> = vec![None; decls.len()];
        let mut order: Vec<usize> = Vec::new();
        {
            // Topological order from the root down: parents before children.
            let mut indeg: Vec<usize> = parents.iter().map(Vec::len).collect();
            let mut kids: Vec<Vec<usize>> = vec![Vec::new(); decls.len()];
            for (i, ps) in parents.iter().enumerate() {
                for &p in ps {
                    kids[p].push(i);
                }
            }
            let mut queue: Vec<usize> = vec![root];
            while let Some(v) = queue.pop() {
                order.push(v);
                for &c in &kids[v] {
                    indeg[c] -= 1;
                    if indeg[c] == 0 {
                        queue.push(c);
                    }
                }
            }
            for (i, k) in kids.iter().enumerate() {
                if k.is_empty() && matches!(kind(i), Kind::Shape) {
                    self.diags.push(
                        Diagnostic::new(
                            Rule::ChildlessNode,
                            decls[i].name.span,
                            format!(
                                "shaping node `{}` has no children: nothing passes through it",
                                decls[i].name.value
                            ),
                        )
                        .node(decls[i].name.value.clone()),
                    );
                }
            }
        }
        let mut bad = vec![false; decls.len()];
        for &v in &order {
            if v == root {
                sched_up[v] = Some(Vec::new());
                continue;
            }
            let mut set: Vec<usize> = Vec::new();
            let mut inherited_bad = false;
            for &p in &parents[v] {
                if kind(p) == Kind::Shape {
                    inherited_bad |= bad[p];
                    for &s in sched_up[p].as_deref().unwrap_or(&[]) {
                        if !set.contains(&s) {
                            set.push(s);
                        }
                    }
                } else if !set.contains(&p) {
                    set.push(p);
                }
            }
            if set.len() > 1 {
                bad[v] = true;
                if !inherited_bad {
                    let names: Vec<String> = set
                        .iter()
                        .map(|&s| format!("`{}`", decls[s].name.value))
                        .collect();
                    let span = decls[v]
                        .parents
                        .first()
                        .map_or(decls[v].name.span, |p| p.span);
                    self.diags.push(
                        Diagnostic::new(Rule::ParallelShaping, span, format!("the parallel shaping nodes above `{}` lead to different scheduling nodes {}; parallel shaping nodes must share one parent and one child", decls[v].name.value, names.join(" and ")))
                            .node(decls[v].name.value.clone())
                            .help("without shaping nodes the policy must be a tree (Loom §3): give every parallel shaping node the same parent"),
                    );
                }
            }
            sched_up[v] = Some(set);
        }
        self.diags.is_empty().then_some((order, sched_up))
    }

    /// Graph step, numbering: scheduling children in declaration order, node ids
    /// breadth-first (within the depth limit), shaping classes in declaration order.
    /// Establishes the [`Tree`]: ids such that a node's children are consecutive, depths,
    /// default priorities (positions among siblings); scheduling nodes without children and
    /// nodes past `max_depth` are reported.
    fn number(
        &mut self,
        decls: &[NodeDecl],
        parents: Vec<Vec<usize>>,
        root: usize,
        (order, sched_up): (Vec<usize>, Vec<Option<Vec<usize>>>),
        limits: &Limits,
    ) -> Tree {
        let kind = |i: usize| decls[i].kind.value;
        let sched_parent =
            |v: usize| -> Option<usize> { sched_up[v].as_ref().and_then(|s| s.first().copied()) };
        let mut sched_kids: Vec<Vec<usize>> = vec![Vec::new(); decls.len()];
        // Each node's position among its parent's scheduling children (the default priority).
        let mut kid_pos: Vec<u64> = vec![0; decls.len()];
        for (v, pos) in kid_pos.iter_mut().enumerate() {
            if kind(v) != Kind::Shape && v != root {
                if let Some(p) = sched_parent(v) {
                    *pos = sched_kids[p].len() as u64;
                    sched_kids[p].push(v);
                }
            }
        }
        for v in 0..decls.len() {
            if kind(v).is_scheduling() && sched_kids[v].is_empty() {
                self.diags.push(
                    Diagnostic::new(
                        Rule::ChildlessNode,
                        decls[v].name.span,
                        format!(
                            "{} node `{}` has no children",
                            kind(v).name(),
                            decls[v].name.value
                        ),
                    )
                    .node(decls[v].name.value.clone())
                    .help("give it children, or make it a `leaf` (or an `attach` point)"),
                );
            }
        }
        let mut bfs: Vec<usize> = vec![root];
        let mut id_of: Vec<u32> = vec![u32::MAX; decls.len()];
        let mut depth_of: Vec<u32> = vec![0; decls.len()];
        let mut head = 0;
        while head < bfs.len() {
            let v = bfs[head];
            id_of[v] = head as u32;
            head += 1;
            for &c in &sched_kids[v] {
                depth_of[c] = depth_of[v] + 1;
                if depth_of[c] + 1 > limits.max_depth {
                    self.diags.push(
                        Diagnostic::new(Rule::DepthLimit, decls[c].name.span, format!("`{}` is at level {} of the scheduling tree, deeper than the limit of {}", decls[c].name.value, depth_of[c] + 1, limits.max_depth))
                            .node(decls[c].name.value.clone())
                            .help("flatten the policy, or raise `limits: {max_depth: N}` / --max-depth"),
                    );
                    continue;
                }
                bfs.push(c);
            }
        }
        // Shaping classes in declaration order.
        let shape_ids: Vec<usize> = (0..decls.len())
            .filter(|&i| kind(i) == Kind::Shape)
            .collect();
        let mut sid_of: Vec<u32> = vec![u32::MAX; decls.len()];
        for (k, &i) in shape_ids.iter().enumerate() {
            sid_of[i] = k as u32;
        }
        Tree {
            root,
            parents,
            order,
            sched_up,
            sched_kids,
            kid_pos,
            bfs,
            id_of,
            depth_of,
            shape_ids,
            sid_of,
        }
    }
}

/// Candidate names the did-you-mean hints of one policy's unknown parents score at most;
/// past it, the remaining diagnostics go without a hint (20,000 distinct misspelt parents
/// among 20,000 nodes would otherwise score 400 million pairs).
pub(super) const MAX_SUGGESTION_WORK: usize = 1_000_000;

/// [`suggest`] of `word` among `candidates`, charged to `work` (candidates scored so far):
/// `None` once [`MAX_SUGGESTION_WORK`] is spent.
fn budgeted_suggest(word: &str, candidates: &[&str], work: &mut usize) -> Option<String> {
    if *work >= MAX_SUGGESTION_WORK {
        return None;
    }
    *work += candidates.len();
    #[cfg(test)]
    crate::steps::add(candidates.len() as u64);
    suggest(word, candidates)
}
