//! Policies: the restricted policy DAG of Loom §3 (with SENIC §4's rate-limit classes) as a
//! YAML file format, its compiler and its compiled [`Program`].
//!
//! Pipeline: `parse` (one file → declarations with source spans) → `compile` (compose
//! sub-policies, check the graph rules and limits, build classifier tables) → [`Program`]
//! (immutable, index-addressed). `show` renders a program as a tree, JSON or Graphviz.
//! The format is documented in `docs/policy.md`.

pub mod compile;
pub mod error;
pub mod parse;
pub mod program;
pub mod show;
pub mod synth;
mod yaml;

pub use compile::{
    compile_str, file_kind, load, load_bytes, LoadOptions, PolicyReader, MAX_POLICY_FILE_BYTES,
};
pub use error::{Diagnostic, PolicyError, Rule, Severity, Warnings};
pub use program::{
    Algo, Classification, Edge, LeafId, LeafSpec, Limits, Link, Node, NodeId, Program, Shaper,
    ShaperId, ShapingPath,
};
