//! Policies: the restricted policy DAG of Loom §3 (with SENIC §4's rate-limit classes) as a
//! YAML file format, its compiler and its compiled [`Program`].
//!
//! Pipeline: `parse` (one file → declarations with source spans) → `compile` (compose
//! sub-policies, check the graph rules and limits, build classifier tables) → [`Program`]
//! (immutable, index-addressed). `show` renders a program as a tree, JSON or Graphviz.
//! The format is documented in `docs/policy.md`.

pub(crate) mod compile;
pub(crate) mod error;
mod ids;
pub(crate) mod parse;
pub(crate) mod program;
pub mod show;
#[doc(hidden)]
pub mod synth;
mod yaml;

pub use compile::{
    compile_str, default_burst_bytes, file_kind, load, load_bytes, senic_oversubscribed_message,
    LoadOptions, PolicyReader, ReadFile, MAX_POLICY_FILE_BYTES,
};
pub use error::{
    render_line, Diagnostic, FileId, Label, PolicyError, Rule, Severity, SourceFile, Sources, Span,
    Warnings,
};
pub use parse::names;
pub use parse::{FORMAT_VERSION, MAX_WEIGHT, NODE_KEYS, TOP_KEYS};
pub use program::{
    Algo, ChildIter, Children, Classification, Edge, FlowKey, FlowSched, Kind, LeafId, LeafSpec,
    Limits, Link, Node, NodeId, Origin, Program, Shaper, ShaperId, ShapingPath,
    MAX_SHAPING_PER_PACKET,
};
