//! weft-core: the sans-IO heart of weft, a programmable NIC packet scheduler in software.
//!
//! * [`policy`] — the policy DAG format (Loom §3, SENIC §4), its compiler and the compiled
//!   [`policy::Program`];
//! * [`classifier`] — packet metadata → (leaf, shaping classes), a tuple-space-search fast
//!   twin and a linear reference twin;
//! * [`sched`] — the scheduling engines: the [`sched::Engine`] trait, the fast engine and
//!   its reference twin, and a virtual-time link that drives either;
//! * [`units`] — rates, sizes and times as `tc` writes them;
//! * [`stats`] — statistics of measurements for the drivers' reports: Jain's fairness
//!   index, histograms and their quantiles.
//!
//! Nothing here reads a clock or touches a socket: drivers own time and I/O.
//!
//! # Quick start
//!
//! The entry points: [`policy::compile_str`] (or [`policy::load`] for a file) compiles a
//! policy into a [`policy::Program`]; [`sched::fast::FastEngine`] runs it; the
//! [`sched::Engine`] trait (import it) enqueues packets and dequeues them, with the time in
//! picoseconds. A packet is classified by its metadata ([`classifier::PacketMeta`]):
//!
//! ```
//! use std::{path::Path, sync::Arc};
//! use weft_core::classifier::{Field, PacketMeta};
//! use weft_core::policy::{compile_str, LeafId, LoadOptions};
//! use weft_core::sched::{fast::FastEngine, Engine, Packet};
//!
//! let policy = "weft: 1
//! nodes:
//!   - {name: root, type: prio}
//!   - {name: urgent, type: leaf, parent: root, match: {dport: 53}}
//!   - {name: bulk, type: leaf, parent: root}
//! ";
//! // A refused policy's error names the file, line, column and rule (`{e}` prints it).
//! let prog = compile_str(Path::new("inline.yaml"), policy, &LoadOptions::default())
//!     .unwrap_or_else(|e| panic!("{e}"));
//! let mut engine = FastEngine::new(Arc::new(prog));
//!
//! let mut dns = PacketMeta::default();
//! dns.set_int(Field::Dport, 53);
//! // Packet::new(id, bytes on the wire, metadata); enqueue(packet, now in ps).
//! engine.enqueue(Packet::new(1, 1500, PacketMeta::default()), 0).unwrap();
//! engine.enqueue(Packet::new(2, 100, dns), 0).unwrap();
//!
//! // Strict priority: the DNS packet leaves first, though it came second.
//! let first = engine.dequeue(0).unwrap();
//! assert_eq!((first.id, first.leaf), (2, LeafId::new(0)));
//! assert_eq!(engine.dequeue(0).unwrap().id, 1);
//! assert!(engine.dequeue(0).is_none());
//! ```
//!
//! # Embedding the scheduler
//!
//! A driver compiles a policy once, then calls the engine with the time in picoseconds. Here
//! two tenants share a 10 Gbit/s link 3:1; each flow gets its own queue once (Loom §4.2.1:
//! no classification and no flow lookup per packet), packets arrive in a doorbell's batch,
//! and the link takes a burst of four and then one frame at a time:
//!
//! ```
//! use std::{path::Path, sync::Arc};
//! use weft_core::classifier::{Field, PacketMeta};
//! use weft_core::policy::{compile_str, LeafId, LoadOptions};
//! use weft_core::sched::{fast::FastEngine, link::wire_ps, Engine, Packet, Update};
//!
//! let policy = "weft: 1
//! link: {rate: 10gbit}
//! nodes:
//!   - {name: root, type: wfq}
//!   - {name: gold, type: leaf, parent: root, weight: 3, match: {tenant: 1}}
//!   - {name: bronze, type: leaf, parent: root, weight: 1, match: {tenant: 2}}
//! ";
//! let prog = compile_str(Path::new("inline.yaml"), policy, &LoadOptions::default())
//!     .unwrap_or_else(|e| panic!("{}", e.render_plain()));
//! let prog = Arc::new(prog);
//! let mut engine = FastEngine::new(prog.clone());
//!
//! // One flow per tenant, its queue opened once.
//! let mut flows = Vec::new();
//! for tenant in [1, 2] {
//!     let mut meta = PacketMeta::default();
//!     meta.set_int(Field::Tenant, tenant);
//!     let first = Packet::new(0, 1500, meta);
//!     let queue = engine.open_flow(&first, prog.classify(&meta)).expect("a leaf matches");
//!     flows.push((first, queue));
//! }
//! // 16 packets, alternating tenants, posted at t = 0.
//! let batch: Vec<_> = (0..16u64)
//!     .map(|id| {
//!         let (p, q) = flows[id as usize % 2];
//!         (Packet { id, ..p }, q)
//!     })
//!     .collect();
//! let mut results = Vec::new();
//! engine.enqueue_flow_batch(&batch, 0, &mut results);
//! assert!(results.iter().all(|r| r.is_ok()));
//!
//! // The link: a burst of four at t = 0, then a frame whenever the last one has left.
//! let mut sent = Vec::new();
//! engine.dequeue_batch(0, 4, &mut sent);
//! let mut now: u64 = sent.iter().map(|d| wire_ps(d.bytes, &prog.link)).sum();
//! while let Some(d) = engine.dequeue(now) {
//!     now += wire_ps(d.bytes, &prog.link);
//!     sent.push(d);
//! }
//! assert_eq!(sent.len(), 16);
//! // While both are backlogged, gold (leaf 0) sends three packets for bronze's one.
//! let gold = sent[..8].iter().filter(|d| d.leaf == LeafId::new(0)).count();
//! assert_eq!(gold, 6);
//!
//! // A live update applies to later packets; counters per node, leaf and flow.
//! engine.update(Update::Weight { node: prog.leaves[1], weight: 3 }, now).unwrap();
//! assert_eq!(engine.stats().nodes[0].packets, 16);
//! assert_eq!(engine.flow_counters().len(), 2);
//!
//! // A flow done with is closed: the engine forgets its record (a queue of several flows'
//! // drivers counts its users per `FlowQueue::handle` first). Its queue is refused after.
//! assert!(engine.close_flow(&flows[1].1));
//! assert_eq!(engine.flow_counters().len(), 1);
//! ```

#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, unreachable_pub)]

pub mod classifier;
pub mod policy;
pub mod sched;
pub mod stats;
pub mod units;

/// Test builds count steps of the loops whose cost an input could blow up (the engines' tree
/// pops and shaping-queue releases, the policy checker's walks up the tree), so that tests
/// bound the work per packet or per node by counting, not by timing.
#[cfg(test)]
pub(crate) mod steps {
    use std::cell::Cell;

    thread_local! {
        static STEPS: Cell<u64> = const { Cell::new(0) };
    }

    /// One step taken.
    pub(crate) fn count() {
        STEPS.with(|s| s.set(s.get() + 1));
    }

    /// `n` steps taken.
    pub(crate) fn add(n: u64) {
        STEPS.with(|s| s.set(s.get() + n));
    }

    /// The steps taken in this thread since the last call.
    pub(crate) fn take() -> u64 {
        STEPS.with(|s| s.replace(0))
    }
}
