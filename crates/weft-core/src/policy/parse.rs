//! Reading one policy file: YAML (via `yaml.rs`, which keeps every value's position
//! and text) into declarations that remember where each value was written. The entries of
//! `nodes:` are read and declared one at a time, so the YAML of one node is held at a time.
//!
//! This layer checks what one file can check alone: YAML syntax, known keys (with a
//! did-you-mean), value types, units, positive weights and rates. Graph rules (parents,
//! cycles, the restricted DAG) are checked on the composed policy by `compile`.
//!
//! Integers are read exactly over their whole range (to 2⁶⁴−1), never through `f64`: the
//! core schema's resolution turns a plain integer beyond `i64` into a float, so integers are
//! read from the text written (`Parser::integer`), and a value out of range is reported as
//! written.
//!
//! Cost: linear in the file size.

/// The largest `weight` a policy (or a live update) may give.
pub const MAX_WEIGHT: u64 = 1_000_000;
use std::sync::Arc;

use saphyr::Scalar;
use saphyr_parser::Event;

use super::error::{Diagnostic, FileId, Rule, Sources, Span};
use super::yaml::{Data, Keys, Node, ReadError, Reader, Start};
use crate::classifier::{proto_number, Field, Match, Prefix, FIELDS};
use crate::units::{self, UnitError};

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Spanned<T> {
        Spanned { value, span }
    }
}

/// Node types a policy can name in `type:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `fifo`: children's packets in arrival order.
    Fifo,
    /// `prio`: strict priority among children.
    Prio,
    /// `wfq`: weighted fair queuing (start-time fair queuing on bytes sent).
    Wfq,
    /// `rr`: round robin, one packet per child per round.
    Rr,
    /// `drr`: deficit round robin, a quantum of bytes per child per round.
    Drr,
    /// `lstf`: least slack time first.
    Lstf,
    /// `edf`: earliest deadline first.
    Edf,
    /// `senic`: SENIC's rate-limited classes (WF2Q+ with eligibility).
    Senic,
    /// `shape`: a shaping class (token bucket) on the edges below it.
    Shape,
    /// `leaf`: a queue of packets (of flows).
    Leaf,
    /// `attach`: a point another policy file fills (a leaf until filled).
    Attach,
}

impl Kind {
    /// Every node type, in the order the docs list them.
    pub const ALL: [Kind; 11] = [
        Kind::Fifo,
        Kind::Prio,
        Kind::Wfq,
        Kind::Rr,
        Kind::Drr,
        Kind::Lstf,
        Kind::Edf,
        Kind::Senic,
        Kind::Shape,
        Kind::Leaf,
        Kind::Attach,
    ];

    /// The name used in `type:`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fifo => "fifo",
            Kind::Prio => "prio",
            Kind::Wfq => "wfq",
            Kind::Rr => "rr",
            Kind::Drr => "drr",
            Kind::Lstf => "lstf",
            Kind::Edf => "edf",
            Kind::Senic => "senic",
            Kind::Shape => "shape",
            Kind::Leaf => "leaf",
            Kind::Attach => "attach",
        }
    }

    /// Work-conserving scheduling nodes (everything but shaping nodes, leaves and
    /// attachment points).
    pub fn is_scheduling(self) -> bool {
        !matches!(self, Kind::Shape | Kind::Leaf | Kind::Attach)
    }

    /// The edge key a child of a node of this kind carries, if any.
    pub fn child_key(self) -> Option<&'static str> {
        match self {
            Kind::Prio => Some("priority"),
            Kind::Wfq => Some("weight"),
            Kind::Drr => Some("quantum"),
            Kind::Senic => Some("rate"),
            _ => None,
        }
    }
}

/// How a leaf groups packets into flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowKey {
    /// Source and destination address and port, and protocol.
    FiveTuple,
    /// The packet's `flow` metadata (set by the host).
    Flow,
    /// One queue for the whole leaf.
    None,
}

/// How a leaf orders its flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowSched {
    /// Arrival order across flows.
    Fifo,
    /// Deficit round robin across backlogged flows (sch_fq style).
    Fair,
}

/// Queue limits (`limit:` / `flow_limit:`); absent members are unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QueueLimit {
    /// Packets.
    pub packets: Option<Spanned<u64>>,
    /// Bytes.
    pub bytes: Option<Spanned<u64>>,
}

/// One entry of `nodes:` as written.
#[derive(Debug, Clone)]
pub(crate) struct NodeDecl {
    pub name: Spanned<String>,
    pub kind: Spanned<Kind>,
    /// Parent names in the order written.
    pub parents: Vec<Spanned<String>>,
    pub matches: Option<Spanned<Match>>,
    /// Edge keys (interpreted by the scheduling parent).
    pub priority: Option<Spanned<u64>>,
    pub weight: Option<Spanned<u64>>,
    /// Bytes.
    pub quantum: Option<Spanned<u64>>,
    /// Bits per second: a `senic` child's limit, a `shape` node's rate, a `senic` node's
    /// capacity.
    pub rate: Option<Spanned<u64>>,
    /// Bytes.
    pub burst: Option<Spanned<u64>>,
    /// Picoseconds.
    pub default_slack: Option<Spanned<u64>>,
    /// Picoseconds.
    pub default_deadline: Option<Spanned<u64>>,
    pub flows_by: Option<Spanned<FlowKey>>,
    pub flows_sched: Option<Spanned<FlowSched>>,
    /// Bytes.
    pub flows_quantum: Option<Spanned<u64>>,
    pub flows_span: Option<Span>,
    /// Boxed, as `flow_limit`: few nodes set them, and a policy of 100,000 classes holds
    /// every declaration at once.
    pub limit: Option<Box<Spanned<QueueLimit>>>,
    pub flow_limit: Option<Box<Spanned<QueueLimit>>>,
    pub outstanding: Option<Spanned<u64>>,
    /// Sub-policy file filling an attachment point.
    pub policy: Option<Spanned<String>>,
}

impl NodeDecl {
    /// (key, span) of every optional key present, for placement checks.
    pub fn present_keys(&self) -> Vec<(&'static str, Span)> {
        let mut v = Vec::new();
        let mut add = |k: &'static str, s: Option<Span>| {
            if let Some(s) = s {
                v.push((k, s));
            }
        };
        add("priority", self.priority.as_ref().map(|x| x.span));
        add("weight", self.weight.as_ref().map(|x| x.span));
        add("quantum", self.quantum.as_ref().map(|x| x.span));
        add("rate", self.rate.as_ref().map(|x| x.span));
        add("burst", self.burst.as_ref().map(|x| x.span));
        add("default_slack", self.default_slack.as_ref().map(|x| x.span));
        add(
            "default_deadline",
            self.default_deadline.as_ref().map(|x| x.span),
        );
        add("flows", self.flows_span);
        add("limit", self.limit.as_ref().map(|x| x.span));
        add("flow_limit", self.flow_limit.as_ref().map(|x| x.span));
        add("outstanding", self.outstanding.as_ref().map(|x| x.span));
        add("policy", self.policy.as_ref().map(|x| x.span));
        v
    }
}

/// The `link:` section.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkDecl {
    /// Bits per second.
    pub rate: Option<Spanned<u64>>,
    /// Bytes added to every frame on the wire (preamble, SFD, IFG; 20 on Ethernet).
    pub overhead: Option<Spanned<u64>>,
    /// Largest frame in bytes.
    pub mtu: Option<Spanned<u64>>,
    /// `count: wire` (true) or `count: frame` (false).
    pub count_overhead: Option<Spanned<bool>>,
    pub span: Span,
}

/// The `limits:` section.
#[derive(Debug, Clone, Default)]
pub(crate) struct LimitsDecl {
    pub max_depth: Option<Spanned<u64>>,
    pub max_nodes: Option<Spanned<u64>>,
    pub max_shaping_depth: Option<Spanned<u64>>,
    pub max_match_shapes: Option<Spanned<u64>>,
    pub span: Span,
}

/// One parsed policy file.
#[derive(Debug, Clone)]
pub(crate) struct Document {
    pub file: FileId,
    pub name: Option<Spanned<String>>,
    pub link: Option<LinkDecl>,
    pub limits: Option<LimitsDecl>,
    pub nodes: Vec<NodeDecl>,
    /// Span of the whole document (used for file-level errors).
    pub span: Span,
    /// Span of the `nodes` key, if given (where an empty policy is refused).
    pub nodes_span: Option<Span>,
}

impl Document {
    /// A copy of everything but the nodes (cheap, whatever the policy's size).
    pub fn clone_sections(&self) -> Document {
        Document {
            file: self.file,
            name: self.name.clone(),
            link: self.link.clone(),
            limits: self.limits.clone(),
            nodes: Vec::new(),
            span: self.span,
            nodes_span: self.nodes_span,
        }
    }
}

/// The keys of a policy file's top level.
pub const TOP_KEYS: &[&str] = &["weft", "name", "description", "link", "limits", "nodes"];
/// The keys of a node, and of its sub-sections.
pub const NODE_KEYS: &[&str] = &[
    "name",
    "type",
    "parent",
    "match",
    "description",
    "priority",
    "weight",
    "quantum",
    "rate",
    "burst",
    "default_slack",
    "default_deadline",
    "flows",
    "limit",
    "flow_limit",
    "outstanding",
    "policy",
];
const LINK_KEYS: &[&str] = &["rate", "overhead", "mtu", "count"];
const LIMIT_KEYS: &[&str] = &[
    "max_depth",
    "max_nodes",
    "max_shaping_depth",
    "max_match_shapes",
];
const FLOWS_KEYS: &[&str] = &["by", "sched", "quantum"];
const QLIMIT_KEYS: &[&str] = &["packets", "bytes"];

/// The policy format version this build reads.
pub const FORMAT_VERSION: i64 = 1;

/// Whether `name` can name a node: non-empty, without whitespace, control characters, commas
/// or double quotes, without invisible formatting characters (zero-width spaces and
/// joiners, bidirectional overrides, the byte-order mark), which make two names look alike
/// or a name read backwards, and in Unicode's composed form (NFC), so that a name typed with
/// a combining accent and the same name typed precomposed are not two names that look the
/// same. Names are columns of weft's CSV outputs (departures, timelines), written unquoted,
/// and cells of its tables. (The simulator holds its scenarios' tenant and application
/// names to the same rule.) [`name_problem`] says what is wrong.
pub fn valid_name(name: &str) -> bool {
    name_problem(name).is_none()
}

/// Whether a name may hold `c` ([`valid_name`]): no whitespace, control character, comma,
/// double quote or invisible formatting character.
pub fn name_char(c: char) -> bool {
    !(c.is_whitespace() || c.is_control() || invisible_formatting(c) || c == '"' || c == ',')
}

/// Invisible formatting characters: zero-width spaces and joiners, the bidirectional
/// controls ([`bidi_control`]), word joiners and invisible operators, the byte-order mark,
/// the soft hyphen. Text holding them looks like other text.
pub fn invisible_formatting(c: char) -> bool {
    bidi_control(c)
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{00ad}')
}

/// The bidirectional embeddings, overrides and isolates: text holding them can read in
/// another order than it is stored, in a terminal or a browser.
pub fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What keeps `name` from being a name ([`valid_name`]), as the end of a sentence that
/// starts with the name: "must be non-empty, without ..." or "is not in Unicode's composed
/// form ...". `None` for a valid name.
pub fn name_problem(name: &str) -> Option<String> {
    if name.len() > MAX_NAME_BYTES {
        return Some(format!(
            "is {} bytes long: a name has at most {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.is_empty() || !name.chars().all(name_char) {
        return Some(
            "must be non-empty, without spaces, commas, double quotes, control or invisible \
             formatting characters"
                .to_string(),
        );
    }
    use unicode_normalization::UnicodeNormalization;
    if unicode_normalization::is_nfc(name) {
        return None;
    }
    let nfc: String = name.nfc().collect();
    Some(format!(
        "is not in Unicode's composed form (NFC): it spells a character as a letter and a \
         combining mark, so the same name typed with the composed character would be a \
         different name that looks the same; write it as {nfc:?}"
    ))
}

/// The longest name a node, leaf or flow class may have, bytes: names are printed in every
/// table, trace and report, so one name of megabytes made every output line as long.
pub const MAX_NAME_BYTES: usize = 256;

/// At most the first 64 characters of `s`, quoted as Rust quotes a string, with `…` when
/// there is more: what a diagnostic quotes of an input it refuses.
pub fn excerpt(s: &str) -> String {
    const CHARS: usize = 64;
    match s.char_indices().nth(CHARS) {
        None => format!("{s:?}"),
        Some((at, _)) => format!("{:?}…", &s[..at]),
    }
}

/// At most the first 64 characters of `s`, with `…` when there is more (unquoted).
fn excerpt_plain(s: &str) -> String {
    match s.char_indices().nth(64) {
        None => s.to_string(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

/// `s` in Unicode's composed form (NFC), as every valid name is ([`valid_name`]): a name a
/// user types (a command-line flag, a terminal that decomposes accents) finds its node
/// whichever form it was typed in. Borrowed when `s` already is.
pub fn to_nfc(s: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    if unicode_normalization::is_nfc(s) {
        std::borrow::Cow::Borrowed(s)
    } else {
        std::borrow::Cow::Owned(s.nfc().collect())
    }
}

/// Closest known word, for did-you-mean hints: `None` when none is close enough.
///
/// Words are compared without case, `_` and `-` (`latencywindow` is `latency_window`). A
/// known word is close when it is within a few edits of `word` (at most 2, or a third of
/// its length), or when one contains the other and the shorter has at least 3 characters
/// (`loom.batch` for `loom.batchsize`, `latency_window` for `latency`), however long the
/// rest. Containing is worth fewer than 2 edits: a one-letter slip (`tenant` for `tenat`)
/// beats it, a two-letter one (`mtu` for `cpu`) does not. Ties go to a containing or
/// contained word, then to the nearer in length, then to the word that sorts first.
pub fn suggest(word: &str, known: &[&str]) -> Option<String> {
    let word = normalized(word, &mut String::new()).to_string();
    let chars = word.chars().count();
    let mut buf = String::new();
    // Scored in half edits: (score, not containing, length apart, word).
    known
        .iter()
        .filter_map(|k| {
            let n = normalized(k, &mut buf);
            let n_chars = n.chars().count();
            let apart = chars.abs_diff(n_chars);
            // One contains the other: as many edits as their lengths differ, at most 1.5.
            let (short, long) = if chars <= n_chars {
                (&*word, n)
            } else {
                (n, &*word)
            };
            if short.chars().count() >= 3 && long.contains(short) {
                return Some(((2 * apart).min(3), false, apart, *k));
            }
            // A word further in length from `k` than the distance allowed cannot be close
            // to it: skipped before the distance (quadratic in the lengths) is computed.
            let allowed = 2.max(n_chars / 3);
            if apart > allowed {
                return None;
            }
            let d = strsim::damerau_levenshtein(&word, n);
            (d <= allowed).then_some((2 * d, true, apart, *k))
        })
        .min()
        .map(|(_, _, _, k)| k.to_string())
}

/// `s` lowercased without `_` and `-`, in `buf` (borrowed as is when there is nothing to
/// change).
fn normalized<'a>(s: &'a str, buf: &'a mut String) -> &'a str {
    if !s.chars().any(|c| c == '_' || c == '-' || c.is_uppercase()) {
        return s;
    }
    buf.clear();
    buf.extend(
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase),
    );
    buf
}

struct Parser<'a> {
    file: FileId,
    sources: &'a Sources,
    diags: Vec<Diagnostic>,
}

impl<'a> Parser<'a> {
    fn span(&self, n: &Node) -> Span {
        self.span_of(n.start, n.end)
    }

    /// The span of the characters `start..end` (as the YAML parser counts them).
    fn span_of(&self, start: usize, end: usize) -> Span {
        let f = self.sources.file(self.file);
        let len = f.text.len();
        let start = f.byte_offset(start).min(len);
        let mut end = f.byte_offset(end).clamp(start, len);
        if end == start {
            // Scalars sometimes end where they start; underline to the end of the token.
            let rest = &f.text[start..];
            end = start
                + rest
                    .find(['\n', '\r', ',', '}', ']', '#'])
                    .unwrap_or(rest.len());
        }
        // Trim trailing whitespace and newlines so underlines stay on the value; never
        // shorter than one character unless at the end of the file.
        let trimmed = f.text[start..end].trim_end().len();
        let len = if trimmed > 0 {
            trimmed
        } else {
            f.text[start..].chars().next().map_or(0, char::len_utf8)
        };
        Span {
            file: self.file,
            offset: start,
            len,
        }
    }

    fn err(&mut self, rule: Rule, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(rule, span, msg));
    }

    fn describe(n: &Node) -> String {
        if let Data::Value(None, w) = &n.data {
            if let Some(t) = &w.tag {
                let tag = excerpt_plain(&crate::policy::yaml::tag_text(t));
                return if crate::policy::yaml::is_core_tag(t) {
                    format!("a value its tag `{tag}` does not fit")
                } else {
                    format!(
                        "a value tagged `{tag}`, a YAML tag weft does not read (only the core \
                         schema's: !!str, !!int, !!float, !!bool, !!null)"
                    )
                };
            }
        }
        match &n.data {
            Data::Value(Some(Scalar::Null), _) => "nothing",
            Data::Value(Some(Scalar::Boolean(_)), _) => "a boolean",
            Data::Value(Some(Scalar::Integer(_)), _) => "an integer",
            Data::Value(Some(Scalar::FloatingPoint(_)), _) => "a decimal number",
            Data::Value(Some(Scalar::String(_)), _) => "a string",
            Data::Sequence(_) => "a list",
            Data::Mapping(_) => "a mapping",
            Data::Value(None, _) | Data::Other => "an unsupported YAML value",
        }
        .to_string()
    }

    /// Entries of a mapping with their key names; reports unknown keys against `known`.
    fn mapping<'n, 'i>(
        &mut self,
        n: &'n Node<'i>,
        what: &str,
        known: &[&str],
    ) -> Option<Vec<(std::borrow::Cow<'n, str>, Span, &'n Node<'i>)>> {
        let Data::Mapping(map) = &n.data else {
            let span = self.span(n);
            self.err(
                Rule::BadValue,
                span,
                format!("{what} must be a mapping, found {}", Self::describe(n)),
            );
            return None;
        };
        let mut out = Vec::new();
        for (k, v) in map.iter() {
            if let Some((key, kspan)) = self.key(k, what, known) {
                out.push((key, kspan, v));
            }
        }
        Some(out)
    }

    /// A mapping's key and its span, if it is a word in `known`; else reports it.
    fn key<'n>(
        &mut self,
        k: &'n Node,
        what: &str,
        known: &[&str],
    ) -> Option<(std::borrow::Cow<'n, str>, Span)> {
        let kspan = self.span(k);
        let key: std::borrow::Cow<'n, str> = match (k.scalar(), k.written()) {
            (Some(Scalar::String(s)), _) => std::borrow::Cow::Borrowed(s.as_ref()),
            (Some(Scalar::Integer(_)), Some(w)) => std::borrow::Cow::Borrowed(w.text.as_ref()),
            _ => {
                self.err(Rule::BadValue, kspan, format!("{what}: keys must be words"));
                return None;
            }
        };
        if !known.contains(&key.as_ref()) {
            let mut d = Diagnostic::new(
                Rule::UnknownKey,
                kspan,
                format!("unknown key `{key}` in {what}"),
            );
            d = match suggest(&key, known) {
                // YAML 1.1's merge key: not part of YAML 1.2, whose reader takes it as a key.
                _ if key == "<<" => d.help(
                    "YAML merge keys (`<<: *anchor`) are not supported (YAML 1.2 has none): \
                     write the keys out; an alias may stand for a whole value (`match: *web`)",
                ),
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help(format!("known keys: {}", known.join(", "))),
            };
            self.diags.push(d);
            return None;
        }
        Some((key, kspan))
    }

    fn string(&mut self, n: &Node, what: &str) -> Option<Spanned<String>> {
        let span = self.span(n);
        match (n.scalar(), n.written()) {
            (Some(Scalar::String(s)), _) => Some(Spanned::new(s.to_string(), span)),
            // As written: a name `007` stays `007`, `1e3` stays `1e3`.
            (Some(Scalar::Integer(_) | Scalar::FloatingPoint(_)), Some(w)) => {
                Some(Spanned::new(w.text.to_string(), span))
            }
            _ => {
                self.err(
                    Rule::BadValue,
                    span,
                    format!("{what} must be a string, found {}", Self::describe(n)),
                );
                None
            }
        }
    }

    /// A scalar as text, for unit parsing (`10gbit`, or a bare integer). Numbers are given
    /// exactly: integers of any size in decimal, decimals from their text (`1.5e3` as
    /// `1500`), never through `f64`.
    fn scalar_text(&mut self, n: &Node, what: &str) -> Option<(String, Span)> {
        let span = self.span(n);
        if let Some(i) = self.integer(n) {
            return Some((i.value.map_or(i.text, |v| v.to_string()), span));
        }
        match (n.scalar(), n.written()) {
            (Some(Scalar::String(s)), _) => Some((s.to_string(), span)),
            (Some(Scalar::FloatingPoint(_)), Some(w)) => Some((plain_decimal(&w.text), span)),
            _ => {
                self.err(
                    Rule::BadValue,
                    span,
                    format!("{what} must be a value, found {}", Self::describe(n)),
                );
                None
            }
        }
    }

    /// The text of scalar `n` as written, for messages about the `given` text it was read as
    /// (they differ for numbers: `0x10` is given as `16`, `1.5e3` as `1500`).
    fn written_text(&self, n: &Node, given: &str) -> String {
        match (self.integer(n), n.scalar(), n.written()) {
            (Some(i), _, _) => i.text,
            (None, Some(Scalar::FloatingPoint(_)), Some(w)) => w.text.to_string(),
            _ => given.to_string(),
        }
    }

    fn unit_err(&mut self, span: Span, key: &str, e: UnitError, zero_rule: Rule) {
        let rule = match e {
            UnitError::AmbiguousRate { .. } => Rule::AmbiguousUnit,
            UnitError::Malformed { hint, .. } if hint.contains("ambiguous") => Rule::AmbiguousUnit,
            UnitError::NotPositive { .. } => zero_rule,
            _ => Rule::BadValue,
        };
        self.err(rule, span, format!("`{key}`: {e}"));
    }

    fn rate(&mut self, n: &Node, key: &str) -> Option<Spanned<u64>> {
        let (text, span) = self.scalar_text(n, key)?;
        match units::parse_rate(&text) {
            Ok(v) => Some(Spanned::new(v, span)),
            Err(e) => {
                let e = quoting(e, &text, &self.written_text(n, &text));
                self.unit_err(span, key, e, Rule::NonPositiveRate);
                None
            }
        }
    }

    fn size(&mut self, n: &Node, key: &str, positive: bool) -> Option<Spanned<u64>> {
        let (text, span) = self.scalar_text(n, key)?;
        match units::parse_size(&text, positive) {
            Ok(v) => Some(Spanned::new(v, span)),
            Err(e) => {
                let e = quoting(e, &text, &self.written_text(n, &text));
                self.unit_err(span, key, e, Rule::BadValue);
                None
            }
        }
    }

    fn time(&mut self, n: &Node, key: &str) -> Option<Spanned<u64>> {
        let (text, span) = self.scalar_text(n, key)?;
        match units::parse_time(&text, false) {
            Ok(v) => Some(Spanned::new(v, span)),
            // Zero is a time here (`edf`: due at arrival; `lstf`: no slack): only a negative
            // one is refused ("must not be negative").
            Err(e) => {
                let e = quoting(e, &text, &self.written_text(n, &text));
                self.unit_err(span, key, e, Rule::BadValue);
                None
            }
        }
    }

    fn int(&mut self, n: &Node, key: &str, min: i64, max: u64, rule: Rule) -> Option<Spanned<u64>> {
        let span = self.span(n);
        if let Some(i) = self.integer(n) {
            let lo = i128::from(min.max(0));
            match i.value {
                Some(v) if v >= lo && v <= i128::from(max) => {
                    return Some(Spanned::new(v as u64, span))
                }
                _ => {
                    self.err(
                        rule,
                        span,
                        format!(
                            "`{key}` must be an integer in {min}..={max}, found {}",
                            i.text
                        ),
                    );
                    return None;
                }
            }
        }
        match (n.scalar(), n.written()) {
            (Some(Scalar::FloatingPoint(_)), Some(w)) => {
                let found = w.text.to_string();
                // A whole number written with an exponent or a fraction of zeros (`1e3`,
                // `1000.0`) is read from its text exactly, as a size is; never through a float.
                let whole = units::parse_size(&plain_decimal(&found), false);
                if let Ok(v) = whole {
                    if v >= min.max(0) as u64 && v <= max {
                        return Some(Spanned::new(v, span));
                    }
                }
                let what = if whole.is_ok() {
                    "an integer"
                } else {
                    "a whole number"
                };
                self.err(
                    rule,
                    span,
                    format!("`{key}` must be {what} in {min}..={max}, found {found}"),
                );
                None
            }
            _ => {
                self.err(
                    Rule::BadValue,
                    span,
                    format!("`{key}` must be an integer, found {}", Self::describe(n)),
                );
                None
            }
        }
    }

    /// An integer scalar read exactly, whatever its size, from its text: plain (or tagged
    /// `!!int`) and written as a YAML 1.2 core-schema integer (`[-+]?[0-9]+`, `0o…`, `0x…`).
    /// The core schema's resolution reads a plain integer beyond `i64` as a float, a hex or
    /// octal one as a string, and one tagged `!!int` as no value; the text reads them all.
    /// `None` for anything but an integer.
    fn integer(&self, n: &Node) -> Option<Integer> {
        let w = n.written()?;
        if let Some(Scalar::Integer(i)) = n.scalar() {
            return Some(Integer {
                value: Some(i128::from(*i)),
                text: w.text.to_string(),
            });
        }
        let untagged_or_int = w
            .tag
            .as_ref()
            .is_none_or(|t| t.is_yaml_core_schema() && t.suffix == "int");
        if !w.plain || !untagged_or_int {
            return None;
        }
        Some(Integer {
            value: int_literal(&w.text)?,
            text: w.text.to_string(),
        })
    }

    /// The stream: one document, whose value starts at the stream's first value.
    fn stream(&mut self, r: &mut Reader<'a>) -> Result<Option<Document>, ReadError> {
        let mut doc = None;
        let mut documents = 0;
        loop {
            match r.event()? {
                (Event::DocumentStart(_), ..) => {
                    documents += 1;
                    let first = r.next()?;
                    if documents == 1 {
                        doc = self.document(r, first)?;
                    } else {
                        let second = r.finish(first)?;
                        if documents == 2 {
                            let span = self.span(&second);
                            self.err(
                                Rule::YamlSyntax,
                                span,
                                "a policy file holds one YAML document; found a second one",
                            );
                        }
                    }
                }
                (Event::StreamEnd, ..) => break,
                // The stream's start, a document's end.
                _ => {}
            }
        }
        if documents == 0 {
            let span = Span {
                file: self.file,
                offset: 0,
                len: 0,
            };
            self.err(
                Rule::MissingKey,
                span,
                "the file is empty: a policy needs `weft: 1` and `nodes:`",
            );
        }
        Ok(doc)
    }

    /// The document whose value `first` starts: a mapping read one entry at a time, and
    /// `nodes:` one node at a time (see the module doc).
    fn document(
        &mut self,
        r: &mut Reader<'a>,
        first: Start<'a>,
    ) -> Result<Option<Document>, ReadError> {
        let Start::Mapping(_, start) = first else {
            // Not a mapping: read whole, for the message.
            let root = r.finish(first)?;
            if matches!(root.data, Data::Value(Some(Scalar::Null), _)) {
                let span = self.span(&root);
                self.err(
                    Rule::MissingKey,
                    span,
                    "the file is empty: a policy needs `weft: 1` and `nodes:`",
                );
            } else {
                self.mapping(&root, "the policy", TOP_KEYS);
            }
            return Ok(None);
        };
        let mut doc = Document {
            file: self.file,
            name: None,
            link: None,
            limits: None,
            nodes: Vec::new(),
            span: self.span_of(start, start),
            nodes_span: None,
        };
        let mut version_seen = false;
        let mut nodes_seen = false;
        // A simulator scenario (it has `tenants:`) given where a policy goes: say so once.
        let mut scenario = false;
        let mut keys = Keys::default();
        let end = loop {
            let k = match r.key(&mut keys)? {
                Ok(k) => k,
                Err(end) => break end,
            };
            scenario |= matches!(k.scalar(), Some(Scalar::String(s)) if s.as_ref() == "tenants");
            let known = self
                .key(&k, "the policy", TOP_KEYS)
                .map(|(k, s)| (k.into_owned(), s));
            let value = r.next()?;
            let Some((key, kspan)) = known else {
                r.finish(value)?;
                continue;
            };
            if key == "nodes" {
                nodes_seen = true;
                doc.nodes_span = Some(kspan);
                if let Start::Sequence(..) = value {
                    loop {
                        match r.next()? {
                            Start::End(_) => break,
                            item => {
                                let item = r.finish(item)?;
                                if let Some(n) = self.node(&item) {
                                    doc.nodes.push(n);
                                }
                            }
                        }
                    }
                } else {
                    let v = r.finish(value)?;
                    self.err(
                        Rule::BadValue,
                        kspan,
                        format!(
                            "`nodes` must be a list of nodes, found {}",
                            Self::describe(&v)
                        ),
                    );
                }
                continue;
            }
            let v = r.finish(value)?;
            match key.as_str() {
                "weft" => {
                    version_seen = true;
                    if !matches!(v.scalar(), Some(Scalar::Integer(FORMAT_VERSION))) {
                        let vspan = self.span(&v);
                        self.err(
                            Rule::Version,
                            vspan,
                            format!("this weft reads policy format version {FORMAT_VERSION}; write `weft: {FORMAT_VERSION}`"),
                        );
                    }
                }
                "name" => doc.name = self.string(&v, "`name`"),
                "description" => {}
                "link" => doc.link = self.link(&v),
                "limits" => doc.limits = self.limits(&v),
                _ => unreachable!("key() filters unknown keys"),
            }
        };
        doc.span = self.span_of(start, end);
        let span = doc.span;
        if !version_seen {
            let at = self.sources.first_char(span);
            self.diags.push(
                Diagnostic::new(
                    Rule::Version,
                    at,
                    "missing `weft: 1` (the policy format version)",
                )
                .help(if scenario {
                    "this file looks like a simulator scenario (it has `tenants:`): run it with \
                     `weft sim FILE`; a policy starts with `weft: 1`"
                } else {
                    "start the file with `weft: 1`"
                }),
            );
        }
        if !nodes_seen {
            let at = self.sources.first_char(span);
            self.err(
                Rule::MissingKey,
                at,
                "missing `nodes:` (the list of scheduling, shaping and leaf nodes)",
            );
        }
        Ok(Some(doc))
    }

    fn link(&mut self, n: &Node) -> Option<LinkDecl> {
        let entries = self.mapping(n, "`link`", LINK_KEYS)?;
        let mut l = LinkDecl {
            span: self.span(n),
            ..LinkDecl::default()
        };
        for (key, _, v) in entries {
            match key.as_ref() {
                "rate" => l.rate = self.rate(v, "rate"),
                "overhead" => l.overhead = self.size(v, "overhead", false),
                "mtu" => l.mtu = self.size(v, "mtu", true),
                "count" => {
                    if let Some(s) = self.string(v, "`link.count`") {
                        match s.value.as_str() {
                            "wire" => l.count_overhead = Some(Spanned::new(true, s.span)),
                            "frame" => l.count_overhead = Some(Spanned::new(false, s.span)),
                            _ => self.diags.push(
                                Diagnostic::new(
                                    Rule::BadValue,
                                    s.span,
                                    format!("unknown byte count `{}`", s.value),
                                )
                                .help("`count: wire` counts each frame with the link's overhead at shaping classes and fair shares (the default); `count: frame` counts frame bytes only"),
                            ),
                        }
                    }
                }
                _ => unreachable!(),
            }
        }
        Some(l)
    }

    fn limits(&mut self, n: &Node) -> Option<LimitsDecl> {
        let entries = self.mapping(n, "`limits`", LIMIT_KEYS)?;
        let mut l = LimitsDecl {
            span: self.span(n),
            ..LimitsDecl::default()
        };
        for (key, _, v) in entries {
            let val = self.int(v, &key, 1, u32::MAX as u64, Rule::BadValue);
            match key.as_ref() {
                "max_depth" => l.max_depth = val,
                "max_nodes" => l.max_nodes = val,
                "max_shaping_depth" => l.max_shaping_depth = val,
                "max_match_shapes" => l.max_match_shapes = val,
                _ => unreachable!(),
            }
        }
        Some(l)
    }

    fn node(&mut self, n: &Node) -> Option<NodeDecl> {
        let span = self.span(n);
        let entries = self.mapping(n, "a node", NODE_KEYS)?;
        let entries_have_name = entries.iter().any(|(k, _, _)| k == "name");
        let mut name = None;
        let mut kind = None;
        let mut kind_missing_ok = true;
        let mut d = NodeDecl {
            name: Spanned::new(String::new(), span),
            kind: Spanned::new(Kind::Leaf, span),
            parents: Vec::new(),
            matches: None,
            priority: None,
            weight: None,
            quantum: None,
            rate: None,
            burst: None,
            default_slack: None,
            default_deadline: None,
            flows_by: None,
            flows_sched: None,
            flows_quantum: None,
            flows_span: None,
            limit: None,
            flow_limit: None,
            outstanding: None,
            policy: None,
        };
        for (key, _kspan, v) in entries {
            match key.as_ref() {
                "name" => {
                    name = self.string(v, "`name`");
                    if let Some(n) = &name {
                        if let Some(problem) = name_problem(&n.value) {
                            self.err(
                                Rule::BadValue,
                                n.span,
                                format!("node name {} {problem}", excerpt(&n.value)),
                            );
                        }
                    }
                }
                "type" => {
                    if let Some(t) = self.string(v, "`type`") {
                        match Kind::ALL.iter().find(|k| k.name() == t.value) {
                            Some(k) => kind = Some(Spanned::new(*k, t.span)),
                            None => {
                                kind_missing_ok = false;
                                let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                                let mut diag = Diagnostic::new(
                                    Rule::UnknownAlgorithm,
                                    t.span,
                                    format!("unknown node type `{}`", t.value),
                                );
                                diag = match suggest(&t.value, &names) {
                                    Some(s) => diag.help(format!(
                                        "did you mean `{s}`? known types: {}",
                                        names.join(", ")
                                    )),
                                    None => diag.help(format!("known types: {}", names.join(", "))),
                                };
                                self.diags.push(diag);
                            }
                        }
                    } else {
                        kind_missing_ok = false;
                    }
                }
                "parent" => match &v.data {
                    Data::Sequence(items) => {
                        if items.is_empty() {
                            let s = self.span(v);
                            self.err(
                                Rule::BadValue,
                                s,
                                "`parent` lists no node; omit it for the root",
                            );
                        }
                        d.parents.reserve_exact(items.len());
                        for it in items {
                            if let Some(p) = self.string(it, "a parent") {
                                d.parents.push(p);
                            }
                        }
                    }
                    _ => {
                        // `vec!`: room for one (a push would make room for four).
                        if let Some(p) = self.string(v, "`parent`") {
                            d.parents = vec![p];
                        }
                    }
                },
                "match" => d.matches = self.matches(v),
                "description" => {}
                "priority" => {
                    d.priority = self.int(v, "priority", 0, u32::MAX as u64, Rule::BadValue)
                }
                "weight" => {
                    d.weight = self.int(v, "weight", 1, MAX_WEIGHT, Rule::NonPositiveWeight)
                }
                "quantum" => d.quantum = self.size(v, "quantum", true),
                "rate" => d.rate = self.rate(v, "rate"),
                "burst" => d.burst = self.size(v, "burst", true),
                "default_slack" => d.default_slack = self.time(v, "default_slack"),
                "default_deadline" => d.default_deadline = self.time(v, "default_deadline"),
                "flows" => {
                    d.flows_span = Some(self.span(v));
                    if let Some(es) = self.mapping(v, "`flows`", FLOWS_KEYS) {
                        for (k, _, fv) in es {
                            match k.as_ref() {
                                "by" => {
                                    if let Some(s) = self.string(fv, "`flows.by`") {
                                        let key = match s.value.as_str() {
                                            "five-tuple" | "5-tuple" => Some(FlowKey::FiveTuple),
                                            "flow" => Some(FlowKey::Flow),
                                            "none" => Some(FlowKey::None),
                                            _ => None,
                                        };
                                        match key {
                                            Some(k) => d.flows_by = Some(Spanned::new(k, s.span)),
                                            None => self.err(Rule::BadValue, s.span, format!("`flows.by` is `five-tuple`, `flow` or `none`, not `{}`", s.value)),
                                        }
                                    }
                                }
                                "sched" => {
                                    if let Some(s) = self.string(fv, "`flows.sched`") {
                                        match s.value.as_str() {
                                            "fifo" => d.flows_sched = Some(Spanned::new(FlowSched::Fifo, s.span)),
                                            "fair" => d.flows_sched = Some(Spanned::new(FlowSched::Fair, s.span)),
                                            _ => self.diags.push(Diagnostic::new(Rule::UnknownAlgorithm, s.span, format!("unknown flow scheduler `{}`", s.value)).help("per-flow queues are scheduled `fifo` or `fair`")),
                                        }
                                    }
                                }
                                "quantum" => d.flows_quantum = self.size(fv, "flows.quantum", true),
                                _ => unreachable!(),
                            }
                        }
                    }
                }
                "limit" => d.limit = self.queue_limit(v, "limit"),
                "flow_limit" => d.flow_limit = self.queue_limit(v, "flow_limit"),
                "outstanding" => {
                    d.outstanding = self.int(v, "outstanding", 1, u32::MAX as u64, Rule::BadValue)
                }
                "policy" => d.policy = self.string(v, "`policy`"),
                _ => unreachable!(),
            }
        }
        match name {
            Some(n) => d.name = n,
            None => {
                // A `name` given but refused has had its diagnostic.
                if !entries_have_name {
                    self.err(Rule::MissingKey, span, "a node needs a `name`");
                }
                return None;
            }
        }
        match kind {
            Some(k) => d.kind = k,
            None => {
                if kind_missing_ok {
                    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                    self.diags.push(
                        Diagnostic::new(
                            Rule::MissingKey,
                            d.name.span,
                            format!("node `{}` needs a `type`", d.name.value),
                        )
                        .node(d.name.value.clone())
                        .help(format!("known types: {}", names.join(", "))),
                    );
                }
                return None;
            }
        }
        Some(d)
    }

    fn queue_limit(&mut self, n: &Node, key: &str) -> Option<Box<Spanned<QueueLimit>>> {
        let span = self.span(n);
        let es = self.mapping(n, &format!("`{key}`"), QLIMIT_KEYS)?;
        let mut q = QueueLimit::default();
        for (k, _, v) in es {
            match k.as_ref() {
                "packets" => {
                    q.packets = self.int(
                        v,
                        &format!("{key}.packets"),
                        1,
                        u32::MAX as u64,
                        Rule::BadValue,
                    )
                }
                "bytes" => q.bytes = self.size(v, &format!("{key}.bytes"), true),
                _ => unreachable!(),
            }
        }
        Some(Box::new(Spanned::new(q, span)))
    }

    fn matches(&mut self, n: &Node) -> Option<Spanned<Match>> {
        let span = self.span(n);
        if let Some(Scalar::String(s)) = n.scalar() {
            if s == "any" {
                return Some(Spanned::new(Match::any(), span));
            }
        }
        let names: Vec<&str> = FIELDS.iter().map(|f| f.name()).chain(["app"]).collect();
        let es = self.mapping(n, "`match`", &names)?;
        let mut m = Match::default();
        let mut ok = true;
        for (k, kspan, v) in es {
            let field = Field::from_name(&k).expect("filtered by mapping()");
            if m.count(field) > 0 {
                self.err(
                    Rule::DuplicateName,
                    kspan,
                    format!("`{}` is matched twice (`app` is `dport`)", field.name()),
                );
                ok = false;
                continue;
            }
            let items: Vec<&Node> = match &v.data {
                Data::Sequence(items) => items.iter().collect(),
                _ => vec![v],
            };
            if items.is_empty() {
                let s = self.span(v);
                self.err(
                    Rule::BadValue,
                    s,
                    format!("`{k}` lists no value; omit it to match any"),
                );
                ok = false;
            }
            for it in items {
                let ispan = self.span(it);
                match field {
                    Field::Src | Field::Dst => {
                        let Some(t) = self.string(it, &format!("`{k}`")) else {
                            ok = false;
                            continue;
                        };
                        match t.value.parse::<Prefix>() {
                            Ok(p) => match field {
                                Field::Src => m.src.push(p),
                                _ => m.dst.push(p),
                            },
                            Err(e) => {
                                self.err(Rule::BadValue, ispan, format!("`{k}`: {e}"));
                                ok = false;
                            }
                        }
                    }
                    Field::Proto => {
                        let text = match (it.scalar(), it.written()) {
                            (Some(Scalar::String(s)), _) => s.to_string(),
                            (_, Some(w)) => w.text.to_string(),
                            _ => String::new(),
                        };
                        match proto_number(&text) {
                            Some(p) => m.proto.push(p),
                            None => {
                                self.err(Rule::BadValue, ispan, format!("`proto`: `{text}` is not tcp, udp, icmp, icmpv6, sctp or a number 0..=255"));
                                ok = false;
                            }
                        }
                    }
                    _ => match self.int(it, field.name(), 0, field.max_value(), Rule::BadValue) {
                        Some(v) => m.push_int(field, v.value),
                        None => ok = false,
                    },
                }
            }
        }
        ok.then_some(Spanned::new(m, span))
    }
}

/// An integer scalar read exactly (see `Parser::integer`).
struct Integer {
    /// The value; `None` beyond the range of `i128` (so beyond every field's range).
    value: Option<i128>,
    /// The text written (`0x100`), for messages.
    text: String,
}

/// `e` with the text the unit parser was given replaced by the text written (they differ
/// for numbers: `1.5e3` is given as `1500`).
fn quoting(e: UnitError, given: &str, written: &str) -> UnitError {
    if given == written {
        return e;
    }
    let fix = |t: String| if t == given { written.to_string() } else { t };
    match e {
        UnitError::Malformed { text, what, hint } => UnitError::Malformed {
            text: fix(text),
            what,
            hint,
        },
        UnitError::NotPositive { text } => UnitError::NotPositive { text: fix(text) },
        UnitError::Negative { text } => UnitError::Negative { text: fix(text) },
        UnitError::OutOfRange { text, base } => UnitError::OutOfRange {
            text: fix(text),
            base,
        },
        e @ UnitError::AmbiguousRate { .. } => e,
    }
}

/// Reads a YAML 1.2 core-schema integer (`[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`)
/// exactly: `None` if `s` is not one, `Some(None)` if it is beyond the range of `i128`.
fn int_literal(s: &str) -> Option<Option<i128>> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x") {
        (h, 16)
    } else if let Some(o) = s.strip_prefix("0o") {
        (o, 8)
    } else {
        (s.strip_prefix(['-', '+']).unwrap_or(s), 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok();
    Some(magnitude.and_then(|m| {
        if s.starts_with('-') {
            0i128.checked_sub_unsigned(m)
        } else {
            i128::try_from(m).ok()
        }
    }))
}

/// A decimal in exponent notation (`1.5e3`) rewritten without it (`1500`), exactly, for
/// the unit parser (which reads plain decimals). Anything else, and exponents beyond any
/// 64-bit quantity, come back as they are (and the unit parser refuses them).
fn plain_decimal(s: &str) -> String {
    let Some((mantissa, exp)) = s.split_once(['e', 'E']) else {
        return s.to_string();
    };
    let Ok(exp) = exp.parse::<i64>() else {
        return s.to_string();
    };
    let (sign, mantissa) = match mantissa.strip_prefix(['-', '+']) {
        Some(m) => (&mantissa[..1], m),
        None => ("", mantissa),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let is_digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    if exp.abs() > 64
        || (int_part.is_empty() && frac_part.is_empty())
        || !is_digits(int_part)
        || !is_digits(frac_part)
    {
        return s.to_string();
    }
    let digits = format!("{int_part}{frac_part}");
    let sign = if sign == "-" { "-" } else { "" };
    // Where the decimal point falls in `digits`.
    let point = int_part.len() as i64 + exp;
    if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!(
            "{sign}{digits}{}",
            "0".repeat(point as usize - digits.len())
        )
    } else {
        let (i, f) = digits.split_at(point as usize);
        format!("{sign}{i}.{f}")
    }
}

/// Parses one file's text. Diagnostics are returned even when a document is produced; a
/// YAML syntax error anywhere in the file is the only diagnostic.
pub(crate) fn parse_document(
    sources: &Sources,
    file: FileId,
) -> (Option<Document>, Vec<Diagnostic>) {
    let text: Arc<str> = sources.file(file).text.clone();
    let mut p = Parser {
        file,
        sources,
        diags: Vec::new(),
    };
    let mut reader = Reader::new(&text);
    match p.stream(&mut reader) {
        Ok(doc) => (doc, p.diags),
        Err(e) => {
            let span = sources.first_char(Span {
                file,
                offset: sources.file(file).byte_offset(e.at),
                len: 0,
            });
            (
                None,
                vec![Diagnostic::new(
                    Rule::YamlSyntax,
                    span,
                    format!("not valid YAML: {}", e.message),
                )],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::policy::{compile_str, Algo, LoadOptions, Rule};

    /// `default_deadline: 0ms` and `default_slack: 0ms` were accepted while a negative value
    /// was refused as "must be greater than zero". Zero is a time these nodes use (`edf`: a
    /// packet without a deadline is due at arrival; `lstf`: no slack), so it stays valid and
    /// a negative value is refused as negative.
    #[test]
    fn default_deadline_and_slack_may_be_zero_but_not_negative() {
        for (kind, key) in [("edf", "default_deadline"), ("lstf", "default_slack")] {
            let policy = |value: &str| {
                format!(
                    "weft: 1\nnodes:\n  - {{name: r, type: {kind}, {key}: {value}}}\n  \
                     - {{name: a, type: leaf, parent: r}}\n"
                )
            };
            let p = compile_str(Path::new("t.yaml"), &policy("0ms"), &LoadOptions::default())
                .unwrap_or_else(|e| panic!("{key}: 0ms: {}", e.render_plain()));
            let r = p.nodes.iter().find(|n| n.name == "r").expect("node r");
            match r.algo {
                Algo::Edf {
                    default_deadline_ps,
                } => assert_eq!(default_deadline_ps, 0),
                Algo::Lstf { default_slack_ps } => assert_eq!(default_slack_ps, 0),
                ref a => panic!("{a:?}"),
            }
            let e = compile_str(
                Path::new("t.yaml"),
                &policy("-1ms"),
                &LoadOptions::default(),
            )
            .err()
            .unwrap_or_else(|| panic!("{key}: -1ms accepted"));
            assert_eq!(e.rules_and_lines(), [(Rule::BadValue, 3)]);
            let m = e.render_plain();
            assert!(
                m.contains(&format!("`{key}`: `-1ms` must not be negative")),
                "{m}"
            );
            assert!(!m.contains("greater than zero"), "{m}");
        }
    }

    /// A word that extends a known one (`loom.batchsize`) was told of a longer, further key
    /// (`loom.batch_timeout`), and one written without its `_` (`latencywindow`) of nothing:
    /// a word containing or contained in a known one, or equal to it but for case, `_` and
    /// `-`, is suggested first, and plain misspellings still are.
    #[test]
    fn suggestions_prefer_the_key_a_word_extends_or_respells() {
        use super::suggest;
        let nic = [
            "loom.batch",
            "loom.batch_timeout",
            "loom.pipeline",
            "hw.queue_rate",
        ];
        let top = ["duration", "window", "latency_window", "seed"];
        let host = ["cores", "cpu_per_packet", "cpu_per_doorbell", "segment"];
        for (word, known, want) in [
            ("loom.batchsize", &nic[..], Some("loom.batch")),
            ("loom.batch_size", &nic[..], Some("loom.batch")),
            ("loom.bach", &nic[..], Some("loom.batch")),
            ("loom.pipelines", &nic[..], Some("loom.pipeline")),
            ("hw.queuerate", &nic[..], Some("hw.queue_rate")),
            ("HW.Queue-Rate", &nic[..], Some("hw.queue_rate")),
            ("latencywindow", &top[..], Some("latency_window")),
            ("latency", &top[..], Some("latency_window")),
            ("duraton", &top[..], Some("duration")),
            ("seeds", &top[..], Some("seed")),
            ("cpu", &host[..], Some("cpu_per_packet")),
            (
                "cpu",
                &["mtu", "cpu_per_packet"][..],
                Some("cpu_per_packet"),
            ),
            ("tenat", &["ten", "tenant"][..], Some("tenant")),
            ("segments", &host[..], Some("segment")),
            // Two letters contained in a key are too little to go on.
            ("du", &top[..], None),
            ("colour", &top[..], None),
        ] {
            assert_eq!(suggest(word, known).as_deref(), want, "{word}");
        }
    }
}
