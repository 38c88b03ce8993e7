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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{Diagnostic, PolicyError, Rule, Sources, Span, Warnings};
use super::parse::{
    parse_document, suggest, Document, FlowKey, FlowSched, Kind, NodeDecl, Spanned,
};
use super::program::{
    Algo, Edge, HotNode, LeafSpec, Limits, Link, Node, NodeId, Origin, Program, Shaper, Tables,
    MAX_SHAPING_PER_PACKET, NO_ID,
};
use crate::classifier::tss::{AddError, Dispatch, DispatchBuilder};
use crate::classifier::Match;

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

/// A policy or sub-policy file's text, through `opts`' reader or weft's own.
fn read_with(opts: &LoadOptions, path: &Path) -> Result<String, Unreadable> {
    match &opts.reader {
        Some(r) => (r.0)(path).map_err(Unreadable::Io).and_then(utf8),
        None => read_policy(path),
    }
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

/// Why a policy file's text could not be had.
enum Unreadable {
    /// The system's refusal: no such file, a directory, no permission.
    Io(std::io::Error),
    /// The bytes are not UTF-8.
    NotUtf8(NotUtf8),
}

/// A policy file that is not UTF-8 text.
struct NotUtf8 {
    /// Its text with U+FFFD in place of each invalid sequence (identical to the file up to
    /// `offset`, so line and column there are the file's).
    text: String,
    /// Byte offset of the first invalid sequence.
    offset: usize,
    /// Its first byte.
    byte: u8,
    /// The file starts with a UTF-16 byte-order mark (as Windows editors and PowerShell's
    /// `>` write text).
    utf16: bool,
}

/// The most bytes a policy file (or sub-policy file) may have: far beyond any policy (a
/// million-node one is about 100 MB of YAML only when generated; its sub-policies are files
/// of their own), and small enough that `policy: /dev/zero` cannot exhaust memory.
pub const MAX_POLICY_FILE_BYTES: u64 = 64 << 20;

/// A policy file's text: YAML is UTF-8 here (the parser reads `str`), so other bytes are
/// refused with the place of the first one, not read as something else. Only a regular file
/// of at most [`MAX_POLICY_FILE_BYTES`] is read: a FIFO would block the reader for ever, a
/// device (`/dev/zero`) would never end.
fn read_policy(path: &Path) -> Result<String, Unreadable> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(Unreadable::Io)?;
    if !meta.is_file() {
        return Err(Unreadable::Io(not_regular(meta.file_type())));
    }
    let f = std::fs::File::open(path).map_err(Unreadable::Io)?;
    // Again on what was opened (the path may have changed in between).
    let meta = f.metadata().map_err(Unreadable::Io)?;
    if !meta.is_file() {
        return Err(Unreadable::Io(not_regular(meta.file_type())));
    }
    if meta.len() > MAX_POLICY_FILE_BYTES {
        return Err(Unreadable::Io(too_long_policy()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_POLICY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(Unreadable::Io)?;
    if bytes.len() as u64 > MAX_POLICY_FILE_BYTES {
        return Err(Unreadable::Io(too_long_policy()));
    }
    utf8(bytes)
}

/// What a file that is not a regular file is, for a person (`None`: a regular file). One
/// definition for every reader of policy files (the control socket's too).
pub fn file_kind(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        } else if t.is_char_device() {
            return Some("a character device");
        } else if t.is_block_device() {
            return Some("a block device");
        } else if t.is_socket() {
            return Some("a socket");
        }
    }
    Some(if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    })
}

/// Why a policy path that is not a regular file is not read.
fn not_regular(t: std::fs::FileType) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "it is {}, not a regular file",
            file_kind(t).unwrap_or("a regular file")
        ),
    )
}

/// Why a policy file over [`MAX_POLICY_FILE_BYTES`] is not read.
fn too_long_policy() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("longer than {MAX_POLICY_FILE_BYTES} bytes"),
    )
}

/// A policy's bytes as text, or where they stop being UTF-8.
fn utf8(bytes: Vec<u8>) -> Result<String, Unreadable> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[offset];
        let utf16 = matches!(e.as_bytes(), [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..]);
        Unreadable::NotUtf8(NotUtf8 {
            text: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            offset,
            byte,
            utf16,
        })
    })
}

/// Compiles policy text; `path` names it in diagnostics and anchors relative `policy:` files.
pub fn compile_str(path: &Path, text: &str, opts: &LoadOptions) -> Result<Program, PolicyError> {
    Compiler::new(opts).compile(path.to_path_buf(), text.to_string())
}

/// The scheduling tree that passes 4-6 derive from the declarations (indices into them).
struct Tree {
    root: usize,
    /// Each declaration's parents as written, shaping nodes included.
    parents: Vec<Vec<usize>>,
    /// The declarations from the root down, parents before children.
    order: Vec<usize>,
    /// Each declaration's scheduling parents through shaping nodes (one when valid).
    sched_up: Vec<Option<Vec<usize>>>,
    /// Each node's scheduling children, in declaration order.
    sched_kids: Vec<Vec<usize>>,
    /// Each node's position among its parent's scheduling children (the default priority).
    kid_pos: Vec<u64>,
    /// The scheduling nodes breadth-first: a node's id is its position here.
    bfs: Vec<usize>,
    id_of: Vec<u32>,
    depth_of: Vec<u32>,
    /// The shaping nodes in declaration order: a class's id is its position here.
    shape_ids: Vec<usize>,
    sid_of: Vec<u32>,
}

impl Tree {
    /// The scheduling parent of declaration `v` (through shaping nodes).
    fn sched_parent(&self, v: usize) -> Option<usize> {
        self.sched_up[v].as_ref().and_then(|s| s.first().copied())
    }
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

/// Edge keys that belong to the point, not to a sub-policy root.
const EDGE_KEYS: [&str; 4] = ["priority", "weight", "quantum", "rate"];

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

    /// The `unreadable-file` diagnostic of a file that is not UTF-8, at its first bad byte
    /// (the file joins the sources as [`NotUtf8::text`], so the place renders with its line).
    fn not_utf8(&mut self, path: &Path, bad: NotUtf8) -> Diagnostic {
        let (offset, byte, utf16) = (bad.offset, bad.byte, bad.utf16);
        let file = self.sources.add(path.to_path_buf(), Arc::from(bad.text));
        // U+FFFD, which stands for the bad sequence in the text, is 3 bytes.
        let span = Span {
            file,
            offset,
            len: 3,
        };
        if utf16 {
            return Diagnostic::new(
                Rule::UnreadableFile,
                span,
                format!(
                    "{} is UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8",
                    path.display()
                ),
            )
            .help(
                "policies are UTF-8; convert the file, e.g. `iconv -f utf-16 -t utf-8 OLD > NEW`",
            );
        }
        Diagnostic::new(
            Rule::UnreadableFile,
            span,
            format!(
                "{} is not UTF-8 text: byte 0x{byte:02X} here is not valid UTF-8",
                path.display()
            ),
        )
        .help("policies are UTF-8; convert the file, e.g. `iconv -f latin1 -t utf-8 OLD > NEW`")
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

    /// Adds a document's nodes; `point` is the attachment point it fills, if any.
    fn splice(&mut self, doc: Document, point: Option<&NodeDecl>, path: &Path) {
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

    fn origin(&self, span: Span) -> Origin {
        let (file, line, _) = self.sources.location(span);
        Origin {
            file,
            line: line as u32,
        }
    }

    /// Builds the program from the spliced declarations, pass by pass (each pass's
    /// diagnostics; a pass whose errors would mislead the next stops the build).
    fn build(&mut self, top: &Document, path: &Path) -> Option<Program> {
        let limits = self.limits(top);
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
        let decls = std::mem::take(&mut self.nodes);
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

        let index = self.names(&decls);
        let parents = self.parents(&decls, &index)?;
        self.cycles(&decls, &parents)?;
        let root = self.root(&decls, doc_span)?;
        let up = self.scheduling_parents(&decls, &parents, root)?;
        let t = self.number(&decls, parents, root, up, &limits);
        self.check_keys(&decls, &t, &link);
        self.check_senic(&decls, &t, &link);
        self.check_shaping_depth(&decls, &t, &limits)?;
        let (nodes, leaves, shapers) = self.program_nodes(&decls, &t, &link);
        let tables = self.classifier_tables(&decls, &t, &nodes, shapers.len(), &limits)?;
        let name = top
            .name
            .as_ref()
            .map(|n| n.value.clone())
            .unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        Some(Program {
            name,
            link,
            limits,
            nodes,
            shapers,
            leaves,
            warnings: None,
            tables,
        })
    }

    /// Pass 1, names: each declared once (a duplicate is reported at its second place).
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

    /// Pass 2, parents: each names a node that can have children, once; only parallel
    /// shaping nodes share a child. Each declaration's parents, as indices.
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

    /// Pass 3, cycles: an iterative depth-first search over the parent edges.
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

    /// Pass 4, the root: exactly one node without a parent, and not a shaping node.
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

    /// Pass 5, scheduling parents through shaping nodes (memoized; the graph is acyclic):
    /// the declarations from the root down (parents first) and each one's scheduling
    /// parents, one when the policy is valid.
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

    /// Pass 6, numbering: scheduling children in declaration order, node ids breadth-first
    /// (within the depth limit), shaping classes in declaration order.
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

    /// Pass 7, keys in their places: each key on a node whose parent (or own type) reads
    /// it, the keys a node needs, priorities on all children of a `prio` node or none.
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
                let reason: Option<String> = match key {
                    "priority" | "weight" | "quantum" => {
                        if k == Kind::Shape {
                            Some(format!("shaping nodes are transparent to scheduling; put `{key}` on the node below `{}`", d.name.value))
                        } else {
                            match parent_kind {
                                None => Some(format!("`{key}` is read by the parent, and `{}` is the root", d.name.value)),
                                Some(pk) if pk.child_key() == Some(key) => None,
                                Some(pk) => Some(format!("`{key}` is read by a {} parent, but the parent of `{}` is a `{}` node{}", expected_parent(key), d.name.value, pk.name(), pk.child_key().map(|c| format!(", which reads `{c}`")).unwrap_or_default())),
                            }
                        }
                    }
                    "rate" => {
                        if k == Kind::Shape || k == Kind::Senic || parent_kind == Some(Kind::Senic)
                        {
                            None
                        } else {
                            Some(format!("`rate` belongs to `shape` nodes, `senic` nodes and children of a `senic` node; `{}` is a {} under a `{}`", d.name.value, k.name(), parent_kind.map_or("nothing", Kind::name)))
                        }
                    }
                    "burst" => {
                        (k != Kind::Shape).then(|| "`burst` belongs to `shape` nodes".to_string())
                    }
                    "default_slack" => (k != Kind::Lstf)
                        .then(|| "`default_slack` belongs to `lstf` nodes".to_string()),
                    "default_deadline" => (k != Kind::Edf)
                        .then(|| "`default_deadline` belongs to `edf` nodes".to_string()),
                    "flows" | "limit" | "flow_limit" | "outstanding" => {
                        (!matches!(k, Kind::Leaf | Kind::Attach)).then(|| {
                            format!("`{key}` belongs to leaves (and unfilled attachment points)")
                        })
                    }
                    "policy" => (k != Kind::Attach)
                        .then(|| "`policy` belongs to `attach` nodes".to_string()),
                    _ => None,
                };
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

    /// Pass 8, SENIC's two-level form (SENIC §4.2): two levels at most, L1 rates within
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

    /// Pass 9, shaping depth per edge and per packet, within the limits.
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

    /// Pass 10, the program's nodes (breadth-first) and shaping classes.
    fn program_nodes(
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
            let algo = match kind(v) {
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
                        flow_quantum_bytes: d
                            .flows_quantum
                            .as_ref()
                            .map_or(link.mtu_bytes, |s| s.value),
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
                        unfilled_attachment: kind(v) == Kind::Attach,
                    })
                }
                Kind::Shape => unreachable!("shaping nodes are not in the tree"),
            };
            let is_leaf = matches!(algo, Algo::Leaf(_));
            let kids = &sched_kids[v];
            let children = if kids.is_empty() {
                0..0
            } else {
                id_of[kids[0]]..id_of[kids[kids.len() - 1]] + 1
            };
            let leaf = if is_leaf {
                leaves.push(nodes.len() as NodeId);
                Some((leaves.len() - 1) as u32)
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
                    sched_parent(v).map(|p| id_of[p])
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
                    .map(|&p| sid_of[p])
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
                        .map(|&p| sid_of[p])
                        .collect(),
                    sched_parent: sched_parent(i).map_or(0, |p| id_of[p]),
                    origin: self.origin(d.name.span),
                }
            })
            .collect();
        (nodes, leaves, shapers)
    }

    /// Pass 11, classifier tables: children and shaping dispatch per node, first match in
    /// declaration order; a rule shadowed by earlier ones, or unreachable under the
    /// matches above it, is refused.
    fn classifier_tables(
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
                    leaf: n.leaf.unwrap_or(NO_ID),
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
        tables.link_shaping(|i| nodes[i].parent);
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

/// Candidate names the did-you-mean hints of one policy's unknown parents score at most;
/// past it, the remaining diagnostics go without a hint (20,000 distinct misspelt parents
/// among 20,000 nodes would otherwise score 400 million pairs).
const MAX_SUGGESTION_WORK: usize = 1_000_000;

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

/// Siblings a node may have for [`shadowed_across_levels`] to weigh them at its level: the
/// pairwise check is quadratic in them (a flat `senic` node of 100,000 classes is left to
/// the sibling rule's tables).
const CROSS_LEVEL_MAX_SIBLINGS: usize = 256;

/// Single-valued combinations of a scope the cross-level check expands at most.
const CROSS_LEVEL_MAX_ATOMS: usize = 1024;

/// Earlier siblings along a node's path the cross-level check weighs at most (a chain of
/// 100,000 levels, each with a sibling, would otherwise weigh 100,000 a node).
const CROSS_LEVEL_MAX_BLOCKERS: usize = 256;

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

/// Rule senic-oversubscribed's message: the L1 classes of `node` add up to `sum_bps`, more
/// than its `capacity_bps` (also said of a live update's rates, see
/// [`Program::senic_oversubscribed`]).
pub fn senic_oversubscribed_message(node: &str, sum_bps: u128, capacity_bps: u64) -> String {
    format!(
        "the L1 classes of `{node}` add up to {}, more than its capacity {}; L1 classes are \
         strict limits (SENIC §4.2)",
        crate::units::format_rate(sum_bps.min(u64::MAX as u128) as u64),
        crate::units::format_rate(capacity_bps)
    )
}

fn expected_parent(key: &str) -> &'static str {
    match key {
        "priority" => "`prio`",
        "weight" => "`wfq`",
        "quantum" => "`drr`",
        _ => "`senic`",
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Did-you-mean hints for unknown parents score each distinct unknown name once (one
    /// without any close match included: it was scored again for every node naming it),
    /// and at most [`MAX_SUGGESTION_WORK`] candidates in all.
    #[test]
    fn unknown_parents_score_a_bounded_number_of_candidates() {
        let nodes = |interior: usize, leaves: usize, parent: &dyn Fn(usize) -> String| {
            let mut t = String::from("weft: 1\nnodes:\n  - {name: root, type: wfq}\n");
            for i in 0..interior {
                t += &format!("  - {{name: inner{i}, type: wfq, parent: root}}\n");
            }
            for i in 0..leaves {
                t += &format!(
                    "  - {{name: leaf{i}, type: leaf, parent: {}, match: {{tag: {i}}}}}\n",
                    parent(i)
                );
            }
            t
        };
        let steps = |text: &str| {
            crate::steps::take();
            let r = crate::policy::compile_str(
                "p.yaml".as_ref(),
                text,
                &crate::policy::LoadOptions::default(),
            );
            assert!(r.is_err(), "unknown parents accepted");
            crate::steps::take()
        };
        // One unknown name, close to nothing, named by 3,000 leaves: scored once.
        let once = steps(&nodes(500, 3_000, &|_| "zzzzzzzz".to_string()));
        assert!(once <= 502, "{once} candidates scored for one unknown name");
        // 2,000 distinct unknown names among 2,000 interior nodes: at most the budget.
        let many = steps(&nodes(2_000, 2_000, &|i| format!("innr{i}")));
        assert!(
            many <= (MAX_SUGGESTION_WORK + 2_001) as u64,
            "{many} candidates scored"
        );
    }

    /// The cross-level shadowing check walks only the levels that have earlier siblings, and
    /// at most [`CROSS_LEVEL_MAX_BLOCKERS`] of them a node: a chain of 20,000 levels costs no
    /// walk at all (it took every node's whole depth: 54 s at 100,000 levels), and a comb of
    /// 3,000 levels, each with an earlier sibling, at most that many steps a node.
    #[test]
    fn the_cross_level_check_walks_a_bounded_number_of_levels() {
        let chain = |levels: usize, comb: bool| {
            let mut t = format!(
                "weft: 1\nlimits: {{max_depth: {}, max_nodes: {}}}\nnodes:\n  - {{name: n0, type: fifo}}\n",
                levels + 2,
                2 * levels + 2
            );
            for i in 1..levels {
                if comb {
                    t += &format!(
                        "  - {{name: side{i}, type: leaf, parent: n{}, match: {{tag: {i}}}}}\n",
                        i - 1
                    );
                }
                t += &format!("  - {{name: n{i}, type: fifo, parent: n{}}}\n", i - 1);
            }
            t += &format!("  - {{name: leaf, type: leaf, parent: n{}}}\n", levels - 1);
            t
        };
        for (levels, comb, most) in [
            (20_000, false, 0),
            (3_000, true, (CROSS_LEVEL_MAX_BLOCKERS as u64 + 1) * 6_000),
        ] {
            let text = chain(levels, comb);
            crate::steps::take();
            let prog = crate::policy::compile_str(
                "chain.yaml".as_ref(),
                &text,
                &crate::policy::LoadOptions::default(),
            );
            let steps = crate::steps::take();
            assert!(prog.is_ok(), "{levels} levels, comb {comb}: refused");
            assert!(
                steps <= most,
                "{levels} levels, comb {comb}: {steps} steps, more than {most}"
            );
        }
    }
}
