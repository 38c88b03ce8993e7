//! The policy compiler: composes sub-policies into one graph, checks Loom's restricted-DAG rules
//! and weft's limits, and builds the immutable [`Program`].
//!
//! Composition (Loom §3, "Composing Sub-Policies"): a node of type `attach` is an attachment
//! point. Its `policy:` file (or `--attach POINT=FILE`) is loaded, its nodes are renamed
//! `POINT/NAME`, and its root takes the point's place: the point's name, parents, edge keys,
//! and the intersection of both matches. An unfilled point becomes a FIFO leaf.
//!
//! Graph rules, on the composed whole (Loom §3, "Restricted DAG Hierarchy", Fig. 5):
//! 1. a node whose parent is a scheduling node has exactly one parent (`multiple-parents`);
//!    several parents only when all are shaping nodes;
//! 2. parallel shaping nodes share one parent: every shaping-only path up from a node reaches
//!    the same scheduling node, so removing shaping nodes leaves a tree (`parallel-shaping`);
//! 3. no cycles; exactly one root, a scheduling node or leaf;
//! 4. leaves have no children, scheduling and shaping nodes have some.
//!
//! Cost: O(nodes + edges) for the graph checks, plus the classifier build (see `classifier`).
//!
//! Layout: this file holds the entry points and the driver ([`load`], [`compile_str`], the
//! compiler's state and its pass order); `read` reads policy files (size and UTF-8 checks),
//! `compose` splices sub-policies into attachment points, `graph` checks the graph rules and
//! numbers the scheduling tree, `checks` checks keys, SENIC's form and shaping depth, `emit`
//! lays out the program's nodes and shaping classes, and `tables` builds the classifier
//! tables (with the shadowed-match checks).

mod checks;
mod compose;
mod emit;
mod graph;
mod read;
mod tables;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{Diagnostic, PolicyError, Rule, Sources, Span, Warnings};
use super::parse::{parse_document, suggest, Document, Kind, NodeDecl, Spanned};
use super::program::{Limits, Link, Program};
use compose::canonical;
use read::{read_with, utf8, Unreadable};

pub use checks::senic_oversubscribed_message;
pub use read::{file_kind, MAX_POLICY_FILE_BYTES};

/// Options for loading a policy.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Overrides the file's `limits: {max_depth}` (and the default, 16): levels of the
    /// scheduling tree, root and leaves included.
    pub max_depth: Option<u32>,
    /// Overrides the file's `limits: {max_nodes}` (and the default, 2,097,152): nodes of
    /// every kind.
    pub max_nodes: Option<u32>,
    /// `(point, file)` pairs filling attachment points, overriding `policy:`.
    pub attach: Vec<(String, PathBuf)>,
    /// Overrides the link rate (bits per second).
    pub link_rate_bps: Option<u64>,
    /// Reads the policy file and every sub-policy file (`policy:` and [`Self::attach`]),
    /// each once, in place of weft's own reader (regular files of at most
    /// [`MAX_POLICY_FILE_BYTES`]): a caller with rules of its own (the daemon's, which bound
    /// what a reload reads and check who may read it) reads through it alone.
    pub reader: Option<PolicyReader>,
}

/// A policy file reader ([`LoadOptions::reader`]): a file's bytes, or why they cannot be had
/// (its text follows `cannot read FILE: ` in the `unreadable-file` diagnostic, or
/// `cannot read sub-policy FILE: ` in the `attach` one). The compiler checks that they are
/// UTF-8.
#[derive(Clone)]
pub struct PolicyReader(pub Arc<ReadFile>);

/// What a [`PolicyReader`] calls: a file's path to its bytes.
pub type ReadFile = dyn Fn(&Path) -> std::io::Result<Vec<u8>> + Send + Sync;

impl PolicyReader {
    /// A reader calling `f` for each file.
    pub fn new(
        f: impl Fn(&Path) -> std::io::Result<Vec<u8>> + Send + Sync + 'static,
    ) -> PolicyReader {
        PolicyReader(Arc::new(f))
    }
}

impl std::fmt::Debug for PolicyReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyReader(..)")
    }
}

/// The bucket depth of a shaping node without `burst`, and the least one that does not warn
/// (`small-burst`): two frames of the link (`2 × link.mtu`). A packet of the class can wait
/// behind one other frame on the link; the bucket keeps filling while it waits, so it must
/// hold a second frame's tokens besides the packet's own, or they overflow and the class
/// loses rate.
pub fn default_burst_bytes(link: &Link) -> u64 {
    link.mtu_bytes.saturating_mul(2)
}

/// Loads, composes and compiles the policy in `path` (read with [`LoadOptions::reader`],
/// if given).
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Program, PolicyError> {
    load_result(path, read_with(opts, path), opts)
}

/// Composes and compiles a policy read by the caller (standard input, say): `bytes` as read
/// (a failure to read them is reported as [`load`] reports a file it cannot read), named
/// `path` in diagnostics, its `policy:` files relative to `path`'s directory. Bytes that are
/// not UTF-8 are refused as [`load`] refuses such a file.
pub fn load_bytes(
    path: &Path,
    bytes: std::io::Result<Vec<u8>>,
    opts: &LoadOptions,
) -> Result<Program, PolicyError> {
    load_result(path, bytes.map_err(Unreadable::Io).and_then(utf8), opts)
}

/// [`load`] once the text is read, or not.
fn load_result(
    path: &Path,
    text: Result<String, Unreadable>,
    opts: &LoadOptions,
) -> Result<Program, PolicyError> {
    let mut c = Compiler::new(opts);
    match text {
        Ok(text) => c.compile(path.to_path_buf(), text),
        Err(Unreadable::Io(e)) => {
            let file = c.sources.add(path.to_path_buf(), Arc::from(""));
            c.diags.push(
                Diagnostic::new(
                    Rule::UnreadableFile,
                    Span {
                        file,
                        offset: 0,
                        len: 0,
                    },
                    format!("cannot read {}: {e}", path.display()),
                )
                .help("give the path of a policy file (YAML, UTF-8 text)"),
            );
            Err(c.finish_err())
        }
        Err(Unreadable::NotUtf8(bad)) => {
            let d = c.not_utf8(path, bad);
            c.diags.push(d);
            Err(c.finish_err())
        }
    }
}

/// Compiles policy text; `path` names it in diagnostics and anchors relative `policy:` files.
pub fn compile_str(path: &Path, text: &str, opts: &LoadOptions) -> Result<Program, PolicyError> {
    Compiler::new(opts).compile(path.to_path_buf(), text.to_string())
}

struct Compiler<'o> {
    opts: &'o LoadOptions,
    sources: Sources,
    diags: Vec<Diagnostic>,
    /// Diagnostics of warning rules: they do not stop the compilation (and are dropped when
    /// an error does).
    warnings: Vec<Diagnostic>,
    /// (canonical, as written) paths of the files being loaded (cycle detection).
    stack: Vec<(PathBuf, PathBuf)>,
    /// Composed nodes, in declaration order.
    nodes: Vec<NodeDecl>,
    used_overrides: HashSet<String>,
    /// The most nodes composition may produce (the policy's `max_nodes`), charged as
    /// attachments expand: once passed, nothing more is composed.
    node_budget: usize,
    /// Composition stopped at [`Self::node_budget`]: the span of the first node beyond it.
    over_budget: Option<Span>,
}

impl<'o> Compiler<'o> {
    fn new(opts: &'o LoadOptions) -> Compiler<'o> {
        Compiler {
            opts,
            sources: Sources::default(),
            diags: Vec::new(),
            warnings: Vec::new(),
            stack: Vec::new(),
            nodes: Vec::new(),
            used_overrides: HashSet::new(),
            node_budget: usize::MAX,
            over_budget: None,
        }
    }

    fn finish_err(self) -> PolicyError {
        let sources = Arc::new(self.sources);
        let mut diagnostics = self.diags;
        diagnostics.sort_by_key(|d| (d.span.file, d.span.offset));
        diagnostics.dedup();
        PolicyError {
            diagnostics,
            sources,
        }
    }

    fn compile(mut self, path: PathBuf, text: String) -> Result<Program, PolicyError> {
        let file = self.sources.add(path.clone(), Arc::from(text));
        self.stack.push((canonical(&path), path.clone()));
        let mut seen_points: Vec<&str> = Vec::new();
        for (point, f) in &self.opts.attach {
            if seen_points.contains(&point.as_str()) {
                self.diags.push(Diagnostic::new(
                    Rule::Attach,
                    Span { file, offset: 0, len: 0 },
                    format!("--attach fills `{point}` twice (again with {}); give each attachment point one sub-policy", f.display()),
                ));
            }
            seen_points.push(point);
        }
        let (doc, diags) = parse_document(&self.sources, file);
        self.diags.extend(diags);
        let Some(doc) = doc else {
            return Err(self.finish_err());
        };
        // Keep the top-level sections; the nodes move into the composed list.
        let top = Document {
            nodes: Vec::new(),
            ..doc.clone_sections()
        };
        self.node_budget = self.limits(&top).max_nodes as usize;
        self.splice(doc, None, &path);
        if let Some(at) = self.over_budget {
            let max = self.node_budget;
            self.diags.push(
                Diagnostic::new(
                    Rule::NodeLimit,
                    at,
                    format!(
                        "the policy composes more than {max} nodes, the limit (composition \
                         stopped here)"
                    ),
                )
                .help(
                    "raise `limits: {max_nodes: N}` or pass --max-nodes if the machine can run it",
                ),
            );
            return Err(self.finish_err());
        }
        for (point, _) in &self.opts.attach {
            if !self.used_overrides.contains(point) {
                let mut d = Diagnostic::new(
                    Rule::Attach,
                    Span { file, offset: 0, len: 0 },
                    format!("--attach names `{point}`, but the policy has no attachment point of that name"),
                );
                let points: Vec<&str> = self
                    .nodes
                    .iter()
                    .filter(|n| n.kind.value == Kind::Attach)
                    .map(|n| n.name.value.as_str())
                    .collect();
                if let Some(s) = suggest(point, &points) {
                    d = d.help(format!("did you mean `{s}`?"));
                }
                self.diags.push(d);
            }
        }
        if !self.diags.is_empty() {
            return Err(self.finish_err());
        }
        let program = self.build(&top, &path);
        match program {
            Some(mut p) if self.diags.is_empty() => {
                #[cfg(debug_assertions)]
                p.check_invariants();
                if !self.warnings.is_empty() {
                    let mut diagnostics = self.warnings;
                    diagnostics.sort_by_key(|d| (d.span.file, d.span.offset));
                    diagnostics.dedup();
                    p.warnings = Some(Warnings {
                        diagnostics,
                        sources: Arc::new(self.sources),
                    });
                }
                Ok(p)
            }
            _ => Err(self.finish_err()),
        }
    }

    /// Settings: the limits in force, the file's `limits:` under the command line's
    /// overrides, over the defaults. Establishes the bounds every later pass checks against
    /// (and composition's node budget).
    fn limits(&self, top: &Document) -> Limits {
        let mut l = Limits::default();
        if let Some(d) = &top.limits {
            let get =
                |v: &Option<Spanned<u64>>, dflt: u32| v.as_ref().map_or(dflt, |s| s.value as u32);
            l.max_depth = get(&d.max_depth, l.max_depth);
            l.max_nodes = get(&d.max_nodes, l.max_nodes);
            l.max_shaping_depth = get(&d.max_shaping_depth, l.max_shaping_depth);
            l.max_match_shapes = get(&d.max_match_shapes, l.max_match_shapes);
        }
        if let Some(v) = self.opts.max_depth {
            l.max_depth = v;
        }
        if let Some(v) = self.opts.max_nodes {
            l.max_nodes = v;
        }
        l
    }

    /// Settings: the link the policy schedules onto, the file's `link:` (its rate under
    /// `--link`) over the defaults. Establishes the rate, MTU and overhead that the checks
    /// (SENIC capacities, bucket sizes) and the program's defaults read.
    fn link(&self, top: &Document) -> Link {
        let mut link = Link::default();
        if let Some(l) = &top.link {
            if let Some(r) = &l.rate {
                link.rate_bps = r.value;
            }
            if let Some(o) = &l.overhead {
                link.overhead_bytes = o.value;
            }
            if let Some(m) = &l.mtu {
                link.mtu_bytes = m.value;
            }
            if let Some(c) = &l.count_overhead {
                link.count_overhead = c.value;
            }
        }
        if let Some(r) = self.opts.link_rate_bps {
            link.rate_bps = r;
        }
        link
    }

    /// Builds the program from the spliced declarations, in named passes:
    ///
    /// 1. settings: [`Self::limits`] and [`Self::link`];
    /// 2. the node count ([`Self::count`]): some nodes, and no more than the limit;
    /// 3. the graph ([`Self::tree`]): names, parents, cycles, the root and scheduling parents,
    ///    then the numbered scheduling [`Tree`](graph::Tree);
    /// 4. the checks on it ([`Self::check`]): keys in their places, SENIC's form, shaping
    ///    depth;
    /// 5. the layout ([`Self::program_nodes`]): the program's nodes and shaping classes;
    /// 6. the classifier tables ([`Self::classifier_tables`]), with the shadowed-match checks.
    ///
    /// Each pass reports its diagnostics; one whose errors would mislead the next (an unknown
    /// parent makes every later rule's message wrong) stops the build with `None`.
    fn build(&mut self, top: &Document, path: &Path) -> Option<Program> {
        let limits = self.limits(top);
        let link = self.link(top);
        let decls = std::mem::take(&mut self.nodes);
        self.count(&decls, top, &limits)?;
        let t = self.tree(&decls, top.span, &limits)?;
        self.check(&decls, &t, &link, &limits)?;
        let (nodes, leaves, shapers) = self.program_nodes(&decls, &t, &link);
        let tables = self.classifier_tables(&decls, &t, &nodes, shapers.len(), &limits)?;
        Some(Program {
            name: program_name(top, path),
            link,
            limits,
            nodes,
            shapers,
            leaves,
            warnings: None,
            tables,
        })
    }
}

/// The program's name: the file's `name:`, else its file's stem.
fn program_name(top: &Document, path: &Path) -> String {
    top.name
        .as_ref()
        .map(|n| n.value.clone())
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}
