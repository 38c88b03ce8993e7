//! weft-core: the sans-IO heart of weft, a programmable NIC packet scheduler in software.
//!
//! * [`policy`] — the policy DAG format (Loom §3, SENIC §4), its compiler and the compiled
//!   [`policy::Program`];
//! * [`classifier`] — packet metadata → (leaf, shaping classes), a tuple-space-search fast
//!   twin and a linear reference twin;
//! * [`units`] — rates, sizes and times as `tc` writes them.
//!
//! Nothing here reads a clock or touches a socket: drivers own time and I/O.

#![forbid(unsafe_code)]

pub mod classifier;
pub mod policy;
pub mod sched;
pub mod units;
