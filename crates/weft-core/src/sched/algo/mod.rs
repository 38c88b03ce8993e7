//! What each node algorithm means, one file per algorithm: the rank a node gives a packet
//! arriving from its child `c`, and the arithmetic for it that every engine uses, defined
//! once so that the engines agree to the bit.
//!
//! A node's rank orders the entries it holds (smaller first; equal ranks in arrival order,
//! Loom §4.1). For a packet of `L` wire bytes (frame plus `link.count` overhead) arriving
//! at `now` from child `c`:
//!
//! | `type:` | rank | file |
//! |---|---|---|
//! | `fifo` | `now` | [`fifo`] |
//! | `prio` | `c`'s `priority` | [`prio`] |
//! | `wfq` | start tag `S = max(V, last[c])`, `last[c] = S + L/weight` | [`wfq`] |
//! | `rr` | as `wfq`, every packet costing one unit | [`rr`] |
//! | `drr` | the round in which `c`'s quanta cover the packet | [`drr`] |
//! | `lstf` | `now + slack` | [`lstf`] |
//! | `edf` | the packet's deadline, or `now + default_deadline` | [`edf`] |
//! | `senic` | WF2Q+ finish tag `F`, eligible once `S ≤ V(now)` | [`senic`] |
//! | `leaf` | its flows in arrival order (`now`), or fairly (STFQ by flow quantum) | [`leaf`] |
//!
//! `V` is a node's virtual time: the largest rank sent through it (`wfq`, `rr`, a fair
//! leaf), the start of the round being served (`drr`), or SENIC's system virtual time.
//! Virtual times carry [`FRAC`](super::FRAC) fractional bits.
//!
//! What the engines do not share: where entries live (the reference engine's sorted maps;
//! the fast engine's rings, bitmaps, per-child queues and calendars, chosen per node in
//! `fast/build.rs`; the head engine's sets of first entries), and shaping, which each
//! engine restates (see the parent module). Each file's header says what its algorithm's
//! engines keep and which engines implement it.
//!
//! Cost: every function here is O(1), integer arithmetic, no allocation.

pub(crate) mod drr;
pub(crate) mod edf;
pub(crate) mod fifo;
pub(crate) mod leaf;
pub(crate) mod lstf;
pub(crate) mod prio;
pub(crate) mod rr;
pub(crate) mod senic;
pub(crate) mod wfq;
