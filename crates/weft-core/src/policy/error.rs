//! Policy diagnostics: every error names the file, line, column, node and the rule broken.
//!
//! Rules are a closed set ([`Rule`]) with stable kebab-case names; the files in
//! `examples/policies/invalid/` are named after the error rules and tests check each file
//! produces its rule at its line. Errors are collected, not thrown one at a time, so one
//! `check` shows every problem it can find. A few rules are warnings ([`Severity`]): the
//! policy compiles and carries them ([`Warnings`], in `Program::warnings`).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The rule a policy broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// The policy file cannot be read: it does not exist, is not readable, is not a file, or
    /// is not UTF-8 text.
    UnreadableFile,
    /// The file is not YAML.
    YamlSyntax,
    /// A key weft does not know (with a did-you-mean).
    UnknownKey,
    /// A required key is absent.
    MissingKey,
    /// A key valid elsewhere but not on this node (e.g. `weight` under a `prio` parent).
    MisplacedKey,
    /// A value of the wrong YAML type or out of its range.
    BadValue,
    /// A `bps`-style rate unit or bare number, which tc reads as bytes per second.
    AmbiguousUnit,
    /// `weft:` is missing or names a format version this build does not read.
    Version,
    /// `type:` names no algorithm weft has.
    UnknownAlgorithm,
    /// A weight of zero, negative or fractional.
    NonPositiveWeight,
    /// A rate of zero or less.
    NonPositiveRate,
    /// Two nodes share one name.
    DuplicateName,
    /// `parent:` names a node that does not exist.
    UnknownNode,
    /// A node under a scheduling node has more than one parent (Loom §3).
    MultipleParents,
    /// Parallel shaping nodes do not share one parent (the graph without shaping nodes would
    /// not be a tree) (Loom §3, Fig. 5c/d).
    ParallelShaping,
    /// Following parents leads back to the start.
    Cycle,
    /// No node without a parent.
    NoRoot,
    /// Several nodes without a parent.
    MultipleRoots,
    /// The root is a shaping node.
    ShapingRoot,
    /// A leaf is named as a parent.
    LeafWithChildren,
    /// A scheduling or shaping node that nothing feeds.
    ChildlessNode,
    /// A sibling's match is covered by an earlier sibling's, so it can never be chosen.
    ShadowedMatch,
    /// A node's match contradicts the matches of the nodes above it (no packet can reach
    /// it), or a sub-policy root's its attachment point's.
    MatchConflict,
    /// Too many match shapes at one node, or a match list with too many combinations.
    MatchLimit,
    /// The policy is deeper than the configured limit.
    DepthLimit,
    /// The policy has more nodes than the configured limit.
    NodeLimit,
    /// A sub-policy file cannot be loaded or fills an attachment point twice.
    Attach,
    /// Sub-policies include each other.
    AttachCycle,
    /// SENIC's two-level form is exceeded: a `senic` node under two `senic` ancestors.
    SenicDepth,
    /// SENIC §4.2: the L1 classes' rate limits add up to more than the capacity.
    SenicOversubscribed,
    /// A warning: a shaping node's `burst` holds less than two frames of the link, so the
    /// class loses rate when the link delays its packet behind another frame.
    SmallBurst,
}

/// How bad a diagnostic is: whether the policy is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The policy is refused.
    Error,
    /// The policy compiles, but likely does not do what was meant.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Rule {
    /// Every rule, for documentation and tests (the warnings last).
    pub const ALL: [Rule; 31] = [
        Rule::UnreadableFile,
        Rule::YamlSyntax,
        Rule::UnknownKey,
        Rule::MissingKey,
        Rule::MisplacedKey,
        Rule::BadValue,
        Rule::AmbiguousUnit,
        Rule::Version,
        Rule::UnknownAlgorithm,
        Rule::NonPositiveWeight,
        Rule::NonPositiveRate,
        Rule::DuplicateName,
        Rule::UnknownNode,
        Rule::MultipleParents,
        Rule::ParallelShaping,
        Rule::Cycle,
        Rule::NoRoot,
        Rule::MultipleRoots,
        Rule::ShapingRoot,
        Rule::LeafWithChildren,
        Rule::ChildlessNode,
        Rule::ShadowedMatch,
        Rule::MatchConflict,
        Rule::MatchLimit,
        Rule::DepthLimit,
        Rule::NodeLimit,
        Rule::Attach,
        Rule::AttachCycle,
        Rule::SenicDepth,
        Rule::SenicOversubscribed,
        Rule::SmallBurst,
    ];

    /// The stable kebab-case name (`multiple-parents`).
    pub fn name(self) -> &'static str {
        match self {
            Rule::UnreadableFile => "unreadable-file",
            Rule::YamlSyntax => "yaml-syntax",
            Rule::UnknownKey => "unknown-key",
            Rule::MissingKey => "missing-key",
            Rule::MisplacedKey => "misplaced-key",
            Rule::BadValue => "bad-value",
            Rule::AmbiguousUnit => "ambiguous-unit",
            Rule::Version => "version",
            Rule::UnknownAlgorithm => "unknown-algorithm",
            Rule::NonPositiveWeight => "non-positive-weight",
            Rule::NonPositiveRate => "non-positive-rate",
            Rule::DuplicateName => "duplicate-name",
            Rule::UnknownNode => "unknown-node",
            Rule::MultipleParents => "multiple-parents",
            Rule::ParallelShaping => "parallel-shaping",
            Rule::Cycle => "cycle",
            Rule::NoRoot => "no-root",
            Rule::MultipleRoots => "multiple-roots",
            Rule::ShapingRoot => "shaping-root",
            Rule::LeafWithChildren => "leaf-with-children",
            Rule::ChildlessNode => "childless-node",
            Rule::ShadowedMatch => "shadowed-match",
            Rule::MatchConflict => "match-conflict",
            Rule::MatchLimit => "match-limit",
            Rule::DepthLimit => "depth-limit",
            Rule::NodeLimit => "node-limit",
            Rule::Attach => "attach",
            Rule::AttachCycle => "attach-cycle",
            Rule::SenicDepth => "senic-depth",
            Rule::SenicOversubscribed => "senic-oversubscribed",
            Rule::SmallBurst => "small-burst",
        }
    }

    /// Whether breaking the rule refuses the policy ([`Severity::Error`]) or only warns.
    pub fn severity(self) -> Severity {
        match self {
            Rule::SmallBurst => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// Looks a rule up by its name.
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One loaded policy file.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as the user gave it (or as resolved relative to the including file).
    pub path: PathBuf,
    /// The file's text.
    pub text: Arc<str>,
    line_starts: Vec<usize>,
    /// Byte offset of every character, for non-ASCII files (empty when the text is ASCII,
    /// where character indices are byte offsets).
    char_offsets: Vec<usize>,
}

impl SourceFile {
    /// Wraps a file's text.
    pub fn new(path: PathBuf, text: Arc<str>) -> SourceFile {
        // Line breaks as YAML counts them: `\n`, `\r\n` and a lone `\r`.
        let bytes = text.as_bytes();
        let mut line_starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            let lone_cr = b == b'\r' && bytes.get(i + 1) != Some(&b'\n');
            if b == b'\n' || lone_cr {
                line_starts.push(i + 1);
            }
        }
        let char_offsets = if text.is_ascii() {
            Vec::new()
        } else {
            text.char_indices().map(|(i, _)| i).collect()
        };
        SourceFile {
            path,
            text,
            line_starts,
            char_offsets,
        }
    }

    /// Byte offset of a character index (what the YAML parser reports).
    pub fn byte_offset(&self, char_index: usize) -> usize {
        if self.char_offsets.is_empty() {
            char_index.min(self.text.len())
        } else {
            self.char_offsets
                .get(char_index)
                .copied()
                .unwrap_or(self.text.len())
        }
    }

    /// (1-based line, 1-based column in characters) of a byte offset. O(log size): a file
    /// of one long line (200,000 keys in one flow mapping) costs no scan per diagnostic.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1);
        let start = self.line_starts[line - 1].min(offset);
        // The index of the character at a byte offset (of the one it falls inside), or the
        // count of characters at the end.
        let chars_before = |b: usize| {
            if self.char_offsets.is_empty() {
                b
            } else if b >= self.text.len() {
                self.char_offsets.len()
            } else {
                self.char_offsets.partition_point(|&o| o <= b) - 1
            }
        };
        (line, chars_before(offset) - chars_before(start) + 1)
    }
}

/// Index of a file in a [`Sources`].
pub type FileId = u32;

/// Where something was written: a byte range in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// The file.
    pub file: FileId,
    /// Byte offset of the start.
    pub offset: usize,
    /// Length in bytes (at least 1 when the file is not empty).
    pub len: usize,
}

/// Every file a policy was composed from.
#[derive(Debug, Default)]
pub struct Sources {
    /// Files by [`FileId`].
    pub files: Vec<SourceFile>,
}

impl Sources {
    /// Adds a file and returns its id.
    pub fn add(&mut self, path: PathBuf, text: Arc<str>) -> FileId {
        self.files.push(SourceFile::new(path, text));
        (self.files.len() - 1) as FileId
    }

    /// The file of a span.
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id as usize]
    }

    /// The first character of `span` (empty at the end of the file): a point to underline.
    pub fn first_char(&self, span: Span) -> Span {
        let text = &self.file(span.file).text;
        let offset = span.offset.min(text.len());
        let len = text[offset..].chars().next().map_or(0, char::len_utf8);
        Span {
            offset,
            len,
            ..span
        }
    }

    /// `path:line:column` of a span.
    pub fn location(&self, span: Span) -> (String, usize, usize) {
        let f = self.file(span.file);
        let (l, c) = f.line_col(span.offset);
        (f.path.display().to_string(), l, c)
    }
}

/// A secondary location attached to a diagnostic ("first defined here").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What it says there.
    pub text: String,
}

/// One problem found in a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule broken.
    pub rule: Rule,
    /// What is wrong, in one sentence.
    pub message: String,
    /// The node concerned, when there is one.
    pub node: Option<String>,
    /// The primary location.
    pub span: Span,
    /// Other locations that explain the problem.
    pub labels: Vec<Label>,
    /// How to fix it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic for `rule` at `span`.
    pub fn new(rule: Rule, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            rule,
            message: message.into(),
            node: None,
            span,
            labels: Vec::new(),
            help: None,
        }
    }

    /// Names the node concerned.
    pub fn node(mut self, node: impl Into<String>) -> Diagnostic {
        self.node = Some(node.into());
        self
    }

    /// Adds a secondary location.
    pub fn label(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.labels.push(Label {
            span,
            text: text.into(),
        });
        self
    }

    /// Adds a hint.
    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Its rule's severity.
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }
}

/// `file:line:col: SEVERITY[rule]: message (node `x`); help: hint` (the node and the hint
/// where there are): a diagnostic as one line, its span in `sources`.
pub fn render_line(sources: &Sources, d: &Diagnostic) -> String {
    let (file, line, col) = sources.location(d.span);
    let node = d
        .node
        .as_ref()
        .map(|n| format!(" (node `{n}`)"))
        .unwrap_or_default();
    let help = d
        .help
        .as_ref()
        .map(|h| format!("; help: {h}"))
        .unwrap_or_default();
    format!(
        "{file}:{line}:{col}: {}[{}]: {}{node}{help}",
        d.severity(),
        d.rule,
        d.message
    )
}

/// A policy that could not be loaded: its diagnostics and the files they point into.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render_plain())]
pub struct PolicyError {
    /// The problems, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// The files the spans point into.
    pub sources: Arc<Sources>,
}

impl PolicyError {
    /// `file:line:col: error[rule]: message (node `x`); help: hint`, one line per diagnostic
    /// (the node and the hint where there are).
    pub fn render_plain(&self) -> String {
        render_lines(&self.sources, &self.diagnostics)
    }

    /// One diagnostic as a single line.
    pub fn render_one(&self, d: &Diagnostic) -> String {
        render_line(&self.sources, d)
    }

    /// The (rule, file, line) of each diagnostic.
    pub fn locations(&self) -> Vec<(Rule, String, usize)> {
        locations(&self.sources, &self.diagnostics)
    }

    /// The (rule, line) of each diagnostic, for tests and scripts.
    pub fn rules_and_lines(&self) -> Vec<(Rule, usize)> {
        self.diagnostics
            .iter()
            .map(|d| (d.rule, self.sources.location(d.span).1))
            .collect()
    }
}

/// The warnings of a policy that compiled (diagnostics of rules whose [`Severity`] is
/// `Warning`, in file order) and the files they point into.
#[derive(Debug, Clone)]
pub struct Warnings {
    /// The warnings, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// The files the spans point into.
    pub sources: Arc<Sources>,
}

impl Warnings {
    /// `file:line:col: warning[rule]: message (node `x`); help: hint`, one line per warning.
    pub fn render_plain(&self) -> String {
        render_lines(&self.sources, &self.diagnostics)
    }

    /// One warning as a single line.
    pub fn render_one(&self, d: &Diagnostic) -> String {
        render_line(&self.sources, d)
    }

    /// The (rule, file, line) of each warning.
    pub fn locations(&self) -> Vec<(Rule, String, usize)> {
        locations(&self.sources, &self.diagnostics)
    }
}

/// Every diagnostic of `ds` as a line of its own ([`render_line`]).
fn render_lines(sources: &Sources, ds: &[Diagnostic]) -> String {
    ds.iter()
        .map(|d| render_line(sources, d))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The (rule, file, line) of each diagnostic of `ds`.
fn locations(sources: &Sources, ds: &[Diagnostic]) -> Vec<(Rule, String, usize)> {
    ds.iter()
        .map(|d| {
            let (file, line, _) = sources.location(d.span);
            (d.rule, file, line)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines and columns count characters, on ASCII text and on text with multi-byte
    /// characters (the column of a byte inside a character is that character's), at the
    /// end of a long line too.
    #[test]
    fn line_col_counts_characters() {
        let ascii = SourceFile::new("a.yaml".into(), "ab\ncd\r\nef\rg".into());
        assert_eq!(ascii.line_col(0), (1, 1));
        assert_eq!(ascii.line_col(4), (2, 2));
        assert_eq!(ascii.line_col(7), (3, 1));
        assert_eq!(ascii.line_col(10), (4, 1));
        assert_eq!(ascii.line_col(99), (4, 2));
        let text = "é: 1\nx: {ü: 2, ñ: 3}\n";
        let f = SourceFile::new("u.yaml".into(), text.into());
        let at = |s: &str| text.find(s).unwrap();
        assert_eq!(f.line_col(at(": 1")), (1, 2));
        assert_eq!(f.line_col(at("ü")), (2, 5));
        assert_eq!(f.line_col(at("ü") + 1), (2, 5), "inside a character");
        assert_eq!(f.line_col(at("ñ")), (2, 11));
        assert_eq!(f.line_col(at("3}")), (2, 14));
        let long: String = (0..20_000).map(|i| format!("k{i}: 1, ")).collect();
        let f = SourceFile::new("l.yaml".into(), format!("é\n{{{long}}}").into());
        let last = f.text.rfind("k19999").unwrap();
        assert_eq!(f.line_col(last), (2, last - "é\n".len() + 1));
    }
}
