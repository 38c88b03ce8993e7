//! Composition (Loom §3, "Composing Sub-Policies"): splices each file's nodes into the
//! compiler's one list, filling attachment points from their sub-policy files.
//!
//! Invariants of what it leaves in `Compiler::nodes`: no `attach` node that has a file (each
//! is replaced by its sub-policy's nodes, renamed `POINT/NAME`, whose root takes the point's
//! name, parents, edge keys and the intersection of both matches); unfilled points stay as
//! they are (FIFO leaves later); no file is included inside itself (a cycle is reported
//! with its chain of files); at most `Compiler::node_budget` nodes (past it,
//! `Compiler::over_budget` says where composition stopped).
//!
//! Cost: linear in the composed nodes, plus one read and parse per sub-policy file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::read::{read_with, Unreadable};
use super::Compiler;
use crate::policy::error::{Diagnostic, Rule};
use crate::policy::parse::{parse_document, Document, Kind, NodeDecl, Spanned};

/// Edge keys that belong to the point, not to a sub-policy root.
const EDGE_KEYS: [&str; 4] = ["priority", "weight", "quantum", "rate"];

impl Compiler<'_> {
    /// Adds a document's nodes; `point` is the attachment point it fills, if any.
    pub(super) fn splice(&mut self, doc: Document, point: Option<&NodeDecl>, path: &Path) {
        if let Some(p) = point {
            if let Some(l) = &doc.link {
                self.diags.push(
                    Diagnostic::new(
                        Rule::MisplacedKey,
                        l.span,
                        "a sub-policy cannot set `link`; the top-level policy owns the link",
                    )
                    .label(p.name.span, "attached here"),
                );
            }
            if let Some(l) = &doc.limits {
                self.diags.push(
                    Diagnostic::new(
                        Rule::MisplacedKey,
                        l.span,
                        "a sub-policy cannot set `limits`; the top-level policy owns them",
                    )
                    .label(p.name.span, "attached here"),
                );
            }
        }
        let roots: Vec<usize> = doc
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.parents.is_empty())
            .map(|(i, _)| i)
            .collect();
        let sub_root = if roots.len() == 1 {
            Some(roots[0])
        } else {
            None
        };
        let sub_root_name = sub_root.map(|r| doc.nodes[r].name.value.clone());
        self.nodes.reserve(
            doc.nodes
                .len()
                .min(self.node_budget.saturating_sub(self.nodes.len())),
        );
        for (i, mut n) in doc.nodes.into_iter().enumerate() {
            if self.over_budget.is_some() {
                return;
            }
            if self.nodes.len() >= self.node_budget {
                self.over_budget = Some(n.name.span);
                return;
            }
            if let Some(p) = point {
                let prefix = &p.name.value;
                if Some(i) == sub_root {
                    for (k, s) in n.present_keys() {
                        if EDGE_KEYS.contains(&k) && !(k == "rate" && n.kind.value == Kind::Senic) {
                            self.diags.push(
                                Diagnostic::new(Rule::MisplacedKey, s, format!("`{k}` on a sub-policy root has no parent to read it; set it on the attachment point `{prefix}`"))
                                    .node(n.name.value.clone())
                                    .label(p.name.span, "attachment point"),
                            );
                        }
                    }
                    n.name = Spanned::new(prefix.clone(), n.name.span);
                    n.parents = p.parents.clone();
                    n.priority = p.priority.clone();
                    n.weight = p.weight.clone();
                    n.quantum = p.quantum.clone();
                    if n.kind.value != Kind::Senic || n.rate.is_none() {
                        n.rate = p.rate.clone();
                    }
                    let point_match = p.matches.clone().map(|m| m.value).unwrap_or_default();
                    let own = n.matches.clone().map(|m| m.value).unwrap_or_default();
                    match point_match.intersect(&own) {
                        Some(m) => {
                            let span = n.matches.as_ref().map(|m| m.span).or(p.matches.as_ref().map(|m| m.span)).unwrap_or(n.name.span);
                            n.matches = Some(Spanned::new(m, span));
                        }
                        None => self.diags.push(
                            Diagnostic::new(Rule::MatchConflict, n.matches.as_ref().map_or(n.name.span, |m| m.span), format!("the root's match {own} contradicts the attachment point's match {point_match}: no packet can reach this sub-policy"))
                                .node(prefix.clone())
                                .label(p.matches.as_ref().map_or(p.name.span, |m| m.span), "attachment point's match"),
                        ),
                    }
                } else {
                    n.name.value = format!("{prefix}/{}", n.name.value);
                    for par in &mut n.parents {
                        par.value = if Some(&par.value) == sub_root_name.as_ref() {
                            prefix.clone()
                        } else {
                            format!("{prefix}/{}", par.value)
                        };
                    }
                }
            }
            if n.kind.value == Kind::Attach {
                self.fill(n, path);
            } else {
                self.nodes.push(n);
            }
        }
    }

    /// Fills an attachment point from its file, or turns it into a FIFO leaf.
    fn fill(&mut self, point: NodeDecl, including: &Path) {
        let name = point.name.value.clone();
        let over = self.opts.attach.iter().find(|(p, _)| *p == name).cloned();
        let (file_path, span) = match (&over, &point.policy) {
            (Some((_, f)), _) => {
                self.used_overrides.insert(name.clone());
                (f.clone(), point.name.span)
            }
            (None, Some(p)) => {
                let base = including.parent().unwrap_or(Path::new("."));
                (base.join(&p.value), p.span)
            }
            (None, None) => {
                self.nodes.push(point);
                return;
            }
        };
        for (k, s) in point.present_keys() {
            if matches!(k, "flows" | "limit" | "flow_limit" | "outstanding") {
                self.diags.push(
                    Diagnostic::new(Rule::MisplacedKey, s, format!("`{k}` applies only to an unfilled attachment point; `{name}` is filled by {}", file_path.display()))
                        .node(name.clone()),
                );
            }
        }
        let canon = canonical(&file_path);
        if self.stack.iter().any(|(c, _)| *c == canon) {
            let chain: Vec<String> = self
                .stack
                .iter()
                .map(|(_, shown)| shown)
                .chain(std::iter::once(&file_path))
                .map(|p| p.display().to_string())
                .collect();
            self.diags.push(
                Diagnostic::new(
                    Rule::AttachCycle,
                    span,
                    format!("sub-policies include each other: {}", chain.join(" → ")),
                )
                .node(name),
            );
            return;
        }
        let text = match read_with(self.opts, &file_path) {
            Ok(t) => t,
            Err(Unreadable::NotUtf8(bad)) => {
                let d = self.not_utf8(&file_path, bad).node(name);
                self.diags.push(d);
                return;
            }
            Err(Unreadable::Io(e)) => {
                self.diags.push(
                    Diagnostic::new(
                        Rule::Attach,
                        span,
                        format!("cannot read sub-policy {}: {e}", file_path.display()),
                    )
                    .node(name),
                );
                return;
            }
        };
        let file = self.sources.add(file_path.clone(), Arc::from(text));
        let (doc, diags) = parse_document(&self.sources, file);
        self.diags.extend(diags);
        if let Some(doc) = doc {
            if doc.nodes.is_empty() {
                self.diags.push(
                    Diagnostic::new(Rule::Attach, span, format!("sub-policy {} has no nodes, so nothing can fill `{name}`", file_path.display()))
                        .node(name.clone())
                        .help("give the sub-policy a root node, or remove `policy:` to leave the point a FIFO leaf"),
                );
                return;
            }
            let roots: Vec<&str> = doc
                .nodes
                .iter()
                .filter(|n| n.parents.is_empty())
                .map(|n| n.name.value.as_str())
                .collect();
            if roots.len() > 1 {
                self.diags.push(
                    Diagnostic::new(Rule::Attach, span, format!("sub-policy {} has {} roots ({}); exactly one root fills the attachment point `{name}`", file_path.display(), roots.len(), roots.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")))
                        .node(name.clone())
                        .help("put the roots under one scheduling node"),
                );
                return;
            }
            self.stack.push((canon, file_path.clone()));
            self.splice(doc, Some(&point), &file_path);
            self.stack.pop();
        }
    }
}

pub(super) fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
