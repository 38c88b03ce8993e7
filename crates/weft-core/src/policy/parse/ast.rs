//! The syntax tree of one policy file: declarations as written, each value with the span it
//! was written at, and the keys the format knows.
//!
//! Invariants: a declaration holds what one file says, checked only for what one file can
//! check (types, units, ranges); names of parents are not resolved here (`compile` does
//! that on the composed policy). Optional keys are `None` when not written: defaults are
//! the compiler's.

use crate::classifier::Match;
use crate::policy::error::{FileId, Span};

/// The largest `weight` a policy (or a live update) may give.
pub const MAX_WEIGHT: u64 = 1_000_000;

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub(crate) fn new(value: T, span: Span) -> Spanned<T> {
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
    pub(crate) fn present_keys(&self) -> Vec<(&'static str, Span)> {
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
    pub(crate) fn clone_sections(&self) -> Document {
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

pub(super) const LINK_KEYS: &[&str] = &["rate", "overhead", "mtu", "count"];

pub(super) const LIMIT_KEYS: &[&str] = &[
    "max_depth",
    "max_nodes",
    "max_shaping_depth",
    "max_match_shapes",
];

pub(super) const FLOWS_KEYS: &[&str] = &["by", "sched", "quantum"];

pub(super) const QLIMIT_KEYS: &[&str] = &["packets", "bytes"];

/// The policy format version this build reads.
pub const FORMAT_VERSION: i64 = 1;
