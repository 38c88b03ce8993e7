//! The OS/NIC interface (Loom §4.3–4.4, SENIC §6.2.3), sans-IO: per-flow descriptor rings,
//! per-core doorbell queues carrying batches of queue ids and inline metadata updates,
//! completions back to the host, queue ownership and bounded outstanding descriptors per
//! class. No sockets, no clock: the dataplane (`crate::dataplane`) and the tests drive it.
//!
//! Model. A *driver* (a tenant's VNIC, or the OS on one core) owns descriptor queues, one per
//! flow (Loom §4.3: a queue per flow, so the NIC sees flows without parsing packets). Each
//! queue is bound to a scheduling *class* (a leaf of the policy) and optionally to a shaping
//! class. The driver writes descriptors into its queue's ring ([`Interface::post`]: host
//! memory, no PCIe write) and then makes them visible with one *doorbell write* per batch
//! ([`Interface::ring_doorbell`]), a batch of entries on its core's doorbell queue: `Kick(q)`
//! (queue `q` has new descriptors) and inline metadata updates (`Meta(q, ...)`: a rank for
//! the next descriptors, a rate change of the queue's shaping class, a move of the flow to
//! another leaf). Loom's point is that one doorbell write covers many queues and updates.
//!
//! The NIC side processes doorbells ([`Interface::nic_doorbells`]) trusting nothing (SENIC's
//! *trust-but-verify*, Loom §4.4): an entry naming a queue that does not exist, or that
//! another driver owns, is rejected and counted against the writing driver; the others are
//! unaffected. It then fetches descriptors ([`Interface::nic_fetch`], round robin over ready
//! queues) as long as the queue's class has fewer than `outstanding_per_class` descriptors in
//! the NIC (Loom §4.2.3 / PicNIC: bounded NIC memory per class; a class at its bound leaves
//! its descriptors in host rings, so back-pressure reaches the host as full rings, never as
//! unbounded NIC buffering). Every fetched descriptor is completed exactly once
//! ([`Interface::nic_complete`]: sent or dropped with a reason), and the completion goes to
//! the owner's completion queue ([`Interface::poll_completions`]).
//!
//! Invariants (checked by the unit and property tests):
//! * conservation: every descriptor accepted by `post` is completed exactly once (sent or
//!   dropped with a reason) or is still in its ring; every refused one returns a [`Reject`]
//!   that is counted;
//! * ownership: a driver's posts, doorbell entries and completions concern only its queues;
//! * per ring: `head ≤ fetched ≤ announced ≤ tail` and `tail − head ≤ ring capacity`;
//! * per class: outstanding descriptors ≤ `outstanding_per_class`.
//!
//! Cost: rings live in one arena (`max_queues × ring_capacity` slots) addressed by integer
//! handles, so posting, kicking, fetching and completing are O(1) with no allocation in
//! steady state (the doorbell and ready queues are preallocated `VecDeque`s). A class that
//! reaches its bound parks its queues; a completion of that class re-readies them.

use std::collections::VecDeque;

use weft_core::sched::DropReason;

/// A descriptor queue's id (an index into the interface's queue arena).
pub type QueueId = u32;
/// A driver's id (tenant, VNIC).
pub type DriverId = u32;

/// What a driver posts: a buffer handle and its length, plus an opaque cookie returned in the
/// completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// The driver's buffer handle.
    pub buf: u32,
    /// Frame length, bytes.
    pub bytes: u32,
    /// Returned as is in the completion.
    pub cookie: u64,
}

/// An inline metadata update carried by a doorbell (Loom §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaUpdate {
    /// Rank metadata (e.g. slack or deadline offset, ps) for the queue's next descriptors.
    Rank(u64),
    /// New rate of the queue's shaping class.
    Rate { rate_bps: u64, burst_bytes: u64 },
    /// Move the flow to another class (leaf); descriptors fetched afterwards go there.
    MoveClass { class: u32 },
}

/// One entry of a doorbell batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoorbellEntry {
    /// The queue has new descriptors (everything posted so far becomes visible).
    Kick(QueueId),
    /// An inline metadata update for the queue.
    Meta(QueueId, MetaUpdate),
}

/// Why a post, a doorbell entry or a completion was refused. Every refusal is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Reject {
    #[error("no such queue")]
    UnknownQueue,
    #[error("the queue belongs to another driver")]
    ForeignQueue,
    #[error("the queue's ring is full")]
    RingFull,
    #[error("the core's doorbell queue is full")]
    DoorbellFull,
    #[error("no such core")]
    BadCore,
    #[error("no such driver")]
    UnknownDriver,
    #[error("the driver may not use that class")]
    ForeignClass,
    #[error("the queue has no shaping class")]
    NoShaper,
    /// A rate update whose rate or burst is zero (the engine refuses both).
    #[error("a rate and its burst must be greater than zero")]
    BadRate,
    #[error("no such outstanding descriptor")]
    BadCompletion,
    #[error("no free queue")]
    NoQueue,
    #[error("the queue still holds descriptors")]
    Busy,
}

impl Reject {
    /// All reasons, in counter order.
    pub const ALL: [Reject; 12] = [
        Reject::UnknownQueue,
        Reject::ForeignQueue,
        Reject::RingFull,
        Reject::DoorbellFull,
        Reject::BadCore,
        Reject::UnknownDriver,
        Reject::ForeignClass,
        Reject::NoShaper,
        Reject::BadRate,
        Reject::BadCompletion,
        Reject::NoQueue,
        Reject::Busy,
    ];

    /// Name used in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            Reject::UnknownQueue => "unknown_queue",
            Reject::ForeignQueue => "foreign_queue",
            Reject::RingFull => "ring_full",
            Reject::DoorbellFull => "doorbell_full",
            Reject::BadCore => "bad_core",
            Reject::UnknownDriver => "unknown_driver",
            Reject::ForeignClass => "foreign_class",
            Reject::NoShaper => "no_shaper",
            Reject::BadRate => "bad_rate",
            Reject::BadCompletion => "bad_completion",
            Reject::NoQueue => "no_queue",
            Reject::Busy => "busy",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a descriptor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Transmitted.
    Sent,
    /// Dropped by the scheduler, with its reason.
    Dropped(DropReason),
    /// Dropped by the driver of the NIC side (e.g. a transmit error), not the policy.
    Aborted,
}

/// A completion returned to a queue's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub queue: QueueId,
    pub desc: Descriptor,
    pub status: Status,
}

/// A descriptor the NIC fetched: hand it to the scheduler, then complete it by `handle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetched {
    /// Identifies the descriptor for [`Interface::nic_complete`].
    pub handle: u64,
    pub queue: QueueId,
    pub desc: Descriptor,
    /// The queue's class when it was fetched.
    pub class: u32,
    /// The queue's rank metadata when it was fetched.
    pub rank: u64,
}

/// A metadata update the NIC accepted and that concerns the scheduler (rank updates are
/// absorbed by the interface itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Set the shaping class's token bucket.
    Rate {
        queue: QueueId,
        shaper: u32,
        rate_bps: u64,
        burst_bytes: u64,
    },
    /// The flow moved from one class to another.
    Moved { queue: QueueId, from: u32, to: u32 },
}

/// Sizes of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Queues in the arena.
    pub max_queues: u32,
    /// Descriptors per ring (rounded up to a power of two).
    pub ring_capacity: u32,
    /// Cores, one doorbell queue each.
    pub cores: u32,
    /// Entries per core's doorbell queue.
    pub doorbell_capacity: u32,
    /// Classes (leaves) the queues bind to.
    pub classes: u32,
    /// Descriptors of one class the NIC holds at most.
    pub outstanding_per_class: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_queues: 4096,
            ring_capacity: 256,
            cores: 1,
            doorbell_capacity: 4096,
            classes: 1,
            outstanding_per_class: 1024,
        }
    }
}

/// Counters of the interface (Loom Tables 1–2 count doorbell writes: PCIe writes); also
/// `ctl stats`' `iface` ([`crate::stats::Stats::iface`]), in this serde form.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    /// Doorbell writes (batches), accepted or not.
    pub doorbell_writes: u64,
    /// Doorbell entries processed by the NIC.
    pub doorbell_entries: u64,
    /// Descriptors accepted by `post`.
    pub posted: u64,
    /// Descriptors fetched by the NIC.
    pub fetched: u64,
    /// Completions with `Status::Sent`.
    pub sent: u64,
    /// Completions with `Status::Dropped` or `Status::Aborted`.
    pub dropped: u64,
    /// Metadata updates accepted.
    pub meta_updates: u64,
    /// Refusals by reason ([`Reject::ALL`] order), of every driver; answered as
    /// `{reason: n}` with every reason.
    #[serde(with = "crate::stats::reject_counts")]
    pub rejects: [u64; 12],
}

const FREE: DriverId = DriverId::MAX;

#[derive(Debug, Clone)]
struct Queue {
    owner: DriverId,
    class: u32,
    shaper: Option<u32>,
    rank: u64,
    head: u32,
    fetched: u32,
    announced: u32,
    tail: u32,
    ready: bool,
    parked: bool,
}

#[derive(Debug, Clone)]
struct Driver {
    /// Classes the driver may bind queues to (`None`: any).
    classes: Option<Vec<u32>>,
    completions: VecDeque<Completion>,
    rejects: [u64; 12],
}

/// The interface: rings, doorbells, completions.
#[derive(Debug, Clone)]
pub struct Interface {
    cfg: Config,
    mask: u32,
    queues: Vec<Queue>,
    free: Vec<QueueId>,
    descs: Vec<Descriptor>,
    /// Per slot: completed (out of order completions wait for the head).
    done: Vec<bool>,
    /// Per slot: the class charged at fetch.
    slot_class: Vec<u32>,
    doorbells: Vec<VecDeque<(DriverId, DoorbellEntry)>>,
    ready: VecDeque<QueueId>,
    /// Per class: outstanding descriptors and parked queues.
    outstanding: Vec<u32>,
    parked: Vec<Vec<QueueId>>,
    drivers: Vec<Driver>,
    counters: Counters,
}

impl Interface {
    /// An interface with every ring empty and no driver.
    pub fn new(cfg: Config) -> Interface {
        let cap = cfg.ring_capacity.max(1).next_power_of_two();
        let slots = cfg.max_queues as usize * cap as usize;
        let cfg = Config {
            ring_capacity: cap,
            cores: cfg.cores.max(1),
            classes: cfg.classes.max(1),
            outstanding_per_class: cfg.outstanding_per_class.max(1),
            ..cfg
        };
        Interface {
            mask: cap - 1,
            queues: (0..cfg.max_queues)
                .map(|_| Queue {
                    owner: FREE,
                    class: 0,
                    shaper: None,
                    rank: 0,
                    head: 0,
                    fetched: 0,
                    announced: 0,
                    tail: 0,
                    ready: false,
                    parked: false,
                })
                .collect(),
            free: (0..cfg.max_queues).rev().collect(),
            descs: vec![Descriptor::default(); slots],
            done: vec![false; slots],
            slot_class: vec![0; slots],
            doorbells: (0..cfg.cores)
                .map(|_| VecDeque::with_capacity(cfg.doorbell_capacity as usize))
                .collect(),
            ready: VecDeque::with_capacity(cfg.max_queues as usize),
            outstanding: vec![0; cfg.classes as usize],
            parked: vec![Vec::new(); cfg.classes as usize],
            drivers: Vec::new(),
            counters: Counters::default(),
            cfg,
        }
    }

    /// The configuration (ring capacity rounded up).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Refusals counted against one driver ([`Reject::ALL`] order).
    pub fn driver_rejects(&self, driver: DriverId) -> Option<&[u64; 12]> {
        self.drivers.get(driver as usize).map(|d| &d.rejects)
    }

    /// Registers a driver allowed to bind queues to `classes` (`None`: any class).
    pub fn add_driver(&mut self, classes: Option<Vec<u32>>) -> DriverId {
        self.drivers.push(Driver {
            classes,
            completions: VecDeque::new(),
            rejects: [0; 12],
        });
        (self.drivers.len() - 1) as DriverId
    }

    fn reject(&mut self, driver: DriverId, r: Reject) -> Reject {
        self.counters.rejects[r.index()] += 1;
        if let Some(d) = self.drivers.get_mut(driver as usize) {
            d.rejects[r.index()] += 1;
        }
        r
    }

    fn may_use(&self, driver: DriverId, class: u32) -> bool {
        class < self.cfg.classes
            && self.drivers[driver as usize]
                .classes
                .as_ref()
                .is_none_or(|c| c.contains(&class))
    }

    /// Creates a queue owned by `driver`, bound to `class` and optionally a shaping class.
    pub fn create_queue(
        &mut self,
        driver: DriverId,
        class: u32,
        shaper: Option<u32>,
    ) -> Result<QueueId, Reject> {
        if driver as usize >= self.drivers.len() {
            return Err(self.reject(driver, Reject::UnknownDriver));
        }
        if !self.may_use(driver, class) {
            return Err(self.reject(driver, Reject::ForeignClass));
        }
        let Some(q) = self.free.pop() else {
            return Err(self.reject(driver, Reject::NoQueue));
        };
        let s = &mut self.queues[q as usize];
        s.owner = driver;
        s.class = class;
        s.shaper = shaper;
        s.rank = 0;
        Ok(q)
    }

    /// Destroys an empty queue of `driver` (its id may be reused).
    pub fn destroy_queue(&mut self, driver: DriverId, q: QueueId) -> Result<(), Reject> {
        self.owned(driver, q)?;
        let s = &self.queues[q as usize];
        if s.head != s.tail || s.ready || s.parked {
            return Err(self.reject(driver, Reject::Busy));
        }
        self.queues[q as usize].owner = FREE;
        self.free.push(q);
        Ok(())
    }

    /// Rebinds a queue (e.g. after a policy reload); descriptors fetched afterwards use it.
    /// Host-side and privileged: no ownership check.
    pub fn rebind(&mut self, q: QueueId, class: u32, shaper: Option<u32>) {
        if let Some(s) = self.queues.get_mut(q as usize) {
            if s.owner != FREE {
                s.class = class.min(self.cfg.classes - 1);
                s.shaper = shaper;
            }
        }
    }

    fn owned(&mut self, driver: DriverId, q: QueueId) -> Result<(), Reject> {
        match self.queues.get(q as usize).map(|s| s.owner) {
            None | Some(FREE) => Err(self.reject(driver, Reject::UnknownQueue)),
            Some(o) if o != driver => Err(self.reject(driver, Reject::ForeignQueue)),
            Some(_) => Ok(()),
        }
    }

    /// Descriptors in a queue's ring (posted and not completed).
    pub fn ring_len(&self, q: QueueId) -> u32 {
        self.queues
            .get(q as usize)
            .map_or(0, |s| s.tail.wrapping_sub(s.head))
    }

    /// Writes a descriptor into the queue's ring (not yet visible to the NIC).
    pub fn post(&mut self, driver: DriverId, q: QueueId, desc: Descriptor) -> Result<(), Reject> {
        self.owned(driver, q)?;
        let s = &mut self.queues[q as usize];
        if s.tail.wrapping_sub(s.head) > self.mask {
            return Err(self.reject(driver, Reject::RingFull));
        }
        let slot = q as usize * (self.mask as usize + 1) + (s.tail & self.mask) as usize;
        s.tail = s.tail.wrapping_add(1);
        self.descs[slot] = desc;
        self.done[slot] = false;
        self.counters.posted += 1;
        Ok(())
    }

    /// One doorbell write: a batch of entries on `core`'s doorbell queue. The whole batch is
    /// refused when it does not fit (nothing is lost: a later kick announces the same
    /// descriptors). Entries are validated by the NIC, not here.
    pub fn ring_doorbell(
        &mut self,
        core: u32,
        driver: DriverId,
        entries: &[DoorbellEntry],
    ) -> Result<(), Reject> {
        self.counters.doorbell_writes += 1;
        let cap = self.cfg.doorbell_capacity as usize;
        let Some(db) = self.doorbells.get_mut(core as usize) else {
            return Err(self.reject(driver, Reject::BadCore));
        };
        if db.len() + entries.len() > cap {
            return Err(self.reject(driver, Reject::DoorbellFull));
        }
        db.extend(entries.iter().map(|&e| (driver, e)));
        Ok(())
    }

    /// NIC side: processes every entry on `core`'s doorbell queue; accepted metadata updates
    /// that concern the scheduler go to `on_control`. Returns the entries processed.
    pub fn nic_doorbells(&mut self, core: u32, mut on_control: impl FnMut(Control)) -> usize {
        let Some(db) = self.doorbells.get_mut(core as usize) else {
            return 0;
        };
        let mut batch = std::mem::take(db);
        let n = batch.len();
        self.counters.doorbell_entries += n as u64;
        for (driver, e) in batch.drain(..) {
            match e {
                DoorbellEntry::Kick(q) => {
                    if self.owned(driver, q).is_ok() {
                        let s = &mut self.queues[q as usize];
                        s.announced = s.tail;
                        if s.announced != s.fetched && !s.ready && !s.parked {
                            s.ready = true;
                            self.ready.push_back(q);
                        }
                    }
                }
                DoorbellEntry::Meta(q, m) => {
                    if self.owned(driver, q).is_err() {
                        continue;
                    }
                    if let Some(c) = self.meta(driver, q, m) {
                        on_control(c);
                    }
                }
            }
        }
        // Give the allocation back (no allocation per batch in steady state).
        *self.doorbells.get_mut(core as usize).expect("checked") = batch;
        n
    }

    fn meta(&mut self, driver: DriverId, q: QueueId, m: MetaUpdate) -> Option<Control> {
        match m {
            MetaUpdate::Rank(r) => {
                self.queues[q as usize].rank = r;
                self.counters.meta_updates += 1;
                None
            }
            MetaUpdate::Rate {
                rate_bps,
                burst_bytes,
            } => {
                let Some(shaper) = self.queues[q as usize].shaper else {
                    self.reject(driver, Reject::NoShaper);
                    return None;
                };
                if rate_bps == 0 || burst_bytes == 0 {
                    self.reject(driver, Reject::BadRate);
                    return None;
                }
                self.counters.meta_updates += 1;
                Some(Control::Rate {
                    queue: q,
                    shaper,
                    rate_bps,
                    burst_bytes,
                })
            }
            MetaUpdate::MoveClass { class } => {
                if !self.may_use(driver, class) {
                    self.reject(driver, Reject::ForeignClass);
                    return None;
                }
                let from = std::mem::replace(&mut self.queues[q as usize].class, class);
                self.counters.meta_updates += 1;
                Some(Control::Moved {
                    queue: q,
                    from,
                    to: class,
                })
            }
        }
    }

    /// NIC side: fetches up to `max` announced descriptors, round robin over ready queues,
    /// never letting a class hold more than `outstanding_per_class`. Returns how many.
    pub fn nic_fetch(&mut self, max: usize, out: &mut Vec<Fetched>) -> usize {
        let cap = self.mask as usize + 1;
        let mut n = 0;
        while n < max {
            let Some(q) = self.ready.pop_front() else {
                break;
            };
            let s = &mut self.queues[q as usize];
            s.ready = false;
            let class = s.class;
            if self.outstanding[class as usize] >= self.cfg.outstanding_per_class {
                s.parked = true;
                self.parked[class as usize].push(q);
                continue;
            }
            let slot = q as usize * cap + (s.fetched & self.mask) as usize;
            let handle = (q as u64) << 32 | s.fetched as u64;
            s.fetched = s.fetched.wrapping_add(1);
            if s.fetched != s.announced {
                s.ready = true;
                self.ready.push_back(q);
            }
            let rank = s.rank;
            self.outstanding[class as usize] += 1;
            self.slot_class[slot] = class;
            self.counters.fetched += 1;
            out.push(Fetched {
                handle,
                queue: q,
                desc: self.descs[slot],
                class,
                rank,
            });
            n += 1;
        }
        n
    }

    /// NIC side: the descriptor `handle` was sent or dropped; its completion goes to the
    /// queue's owner. A handle that is not outstanding is refused (and counted).
    pub fn nic_complete(&mut self, handle: u64, status: Status) -> Result<(), Reject> {
        let q = (handle >> 32) as u32;
        let seq = handle as u32;
        let cap = self.mask as usize + 1;
        let Some(s) = self.queues.get(q as usize) else {
            return Err(self.reject(FREE, Reject::BadCompletion));
        };
        // Outstanding: head ≤ seq < fetched (wrapping), and not completed yet.
        let slot = q as usize * cap + (seq & self.mask) as usize;
        if s.owner == FREE
            || seq.wrapping_sub(s.head) >= s.fetched.wrapping_sub(s.head)
            || self.done[slot]
        {
            return Err(self.reject(FREE, Reject::BadCompletion));
        }
        let owner = s.owner;
        self.done[slot] = true;
        let class = self.slot_class[slot] as usize;
        self.outstanding[class] -= 1;
        match status {
            Status::Sent => self.counters.sent += 1,
            _ => self.counters.dropped += 1,
        }
        self.drivers[owner as usize]
            .completions
            .push_back(Completion {
                queue: q,
                desc: self.descs[slot],
                status,
            });
        let s = &mut self.queues[q as usize];
        while s.head != s.fetched {
            let h = q as usize * cap + (s.head & self.mask) as usize;
            if !self.done[h] {
                break;
            }
            self.done[h] = false;
            s.head = s.head.wrapping_add(1);
        }
        // The class has room again: its parked queues become ready.
        for p in self.parked[class].drain(..) {
            let ps = &mut self.queues[p as usize];
            ps.parked = false;
            if ps.fetched != ps.announced && !ps.ready {
                ps.ready = true;
                self.ready.push_back(p);
            }
        }
        Ok(())
    }

    /// The queue a fetched descriptor's handle belongs to (a handle is the queue id and the
    /// descriptor's sequence number in it).
    pub fn handle_queue(handle: u64) -> QueueId {
        (handle >> 32) as QueueId
    }

    /// NIC side: the descriptor behind an outstanding handle (the NIC's copy, read when it
    /// transmits); `None` when the handle is not outstanding.
    pub fn outstanding_desc(&self, handle: u64) -> Option<Descriptor> {
        let q = Self::handle_queue(handle);
        let seq = handle as u32;
        let s = self.queues.get(q as usize)?;
        let slot = q as usize * (self.mask as usize + 1) + (seq & self.mask) as usize;
        let live = s.owner != FREE
            && seq.wrapping_sub(s.head) < s.fetched.wrapping_sub(s.head)
            && !self.done[slot];
        live.then(|| self.descs[slot])
    }

    /// Host side: takes `driver`'s completions (at most `max`).
    pub fn poll_completions(
        &mut self,
        driver: DriverId,
        max: usize,
        out: &mut Vec<Completion>,
    ) -> usize {
        let Some(d) = self.drivers.get_mut(driver as usize) else {
            return 0;
        };
        let n = d.completions.len().min(max);
        out.extend(d.completions.drain(..n));
        n
    }

    /// Descriptors the NIC holds for `class`.
    pub fn outstanding(&self, class: u32) -> u32 {
        self.outstanding.get(class as usize).copied().unwrap_or(0)
    }

    /// Checks the ring and class invariants (for tests; O(queues)).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut per_class = vec![0u32; self.outstanding.len()];
        for (i, s) in self.queues.iter().enumerate() {
            if s.owner == FREE {
                continue;
            }
            let (h, f, a, t) = (s.head, s.fetched, s.announced, s.tail);
            let ok = f.wrapping_sub(h) <= a.wrapping_sub(h)
                && a.wrapping_sub(h) <= t.wrapping_sub(h)
                && t.wrapping_sub(h) <= self.mask + 1;
            if !ok {
                return Err(format!(
                    "queue {i}: head {h} fetched {f} announced {a} tail {t}"
                ));
            }
            let cap = self.mask as usize + 1;
            let mut seq = h;
            while seq != f {
                let slot = i * cap + (seq & self.mask) as usize;
                if !self.done[slot] {
                    per_class[self.slot_class[slot] as usize] += 1;
                }
                seq = seq.wrapping_add(1);
            }
        }
        for (c, (&n, &o)) in per_class.iter().zip(&self.outstanding).enumerate() {
            if n != o {
                return Err(format!("class {c}: {o} outstanding counted, {n} in rings"));
            }
            if o > self.cfg.outstanding_per_class {
                return Err(format!("class {c}: {o} outstanding > bound"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(ring: u32, outstanding: u32) -> Interface {
        Interface::new(Config {
            max_queues: 8,
            ring_capacity: ring,
            cores: 2,
            doorbell_capacity: 16,
            classes: 2,
            outstanding_per_class: outstanding,
        })
    }

    fn d(cookie: u64) -> Descriptor {
        Descriptor {
            buf: cookie as u32,
            bytes: 100,
            cookie,
        }
    }

    #[test]
    fn post_kick_fetch_complete() {
        let mut i = iface(4, 8);
        let a = i.add_driver(None);
        let q = i.create_queue(a, 0, None).unwrap();
        for c in 0..4 {
            i.post(a, q, d(c)).unwrap();
        }
        assert_eq!(i.post(a, q, d(9)), Err(Reject::RingFull));
        let mut out = Vec::new();
        assert_eq!(i.nic_fetch(10, &mut out), 0, "not announced yet");
        i.ring_doorbell(0, a, &[DoorbellEntry::Kick(q)]).unwrap();
        assert_eq!(i.nic_doorbells(0, |_| {}), 1);
        assert_eq!(i.nic_fetch(10, &mut out), 4);
        assert_eq!(i.outstanding_desc(out[2].handle), Some(d(2)));
        assert_eq!(
            out.iter().map(|f| f.desc.cookie).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        // Out of order completion: the head waits for the first.
        i.nic_complete(out[1].handle, Status::Sent).unwrap();
        assert_eq!(i.ring_len(q), 4);
        i.nic_complete(out[0].handle, Status::Sent).unwrap();
        assert_eq!(i.ring_len(q), 2);
        assert_eq!(
            i.nic_complete(out[0].handle, Status::Sent),
            Err(Reject::BadCompletion)
        );
        i.nic_complete(out[2].handle, Status::Dropped(DropReason::LeafPackets))
            .unwrap();
        i.nic_complete(out[3].handle, Status::Sent).unwrap();
        let mut c = Vec::new();
        i.poll_completions(a, 100, &mut c);
        assert_eq!(c.len(), 4);
        assert_eq!(i.counters().sent, 3);
        assert_eq!(i.counters().dropped, 1);
        assert_eq!(i.counters().doorbell_writes, 1);
        i.check_invariants().unwrap();
        i.destroy_queue(a, q).unwrap();
    }

    #[test]
    fn ownership_is_enforced_and_counted() {
        let mut i = iface(4, 8);
        let a = i.add_driver(Some(vec![0]));
        let b = i.add_driver(Some(vec![1]));
        let qa = i.create_queue(a, 0, None).unwrap();
        let qb = i.create_queue(b, 1, Some(3)).unwrap();
        assert_eq!(i.create_queue(a, 1, None), Err(Reject::ForeignClass));
        assert_eq!(i.post(a, qb, d(1)), Err(Reject::ForeignQueue));
        assert_eq!(i.post(a, 77, d(1)), Err(Reject::UnknownQueue));
        i.post(b, qb, d(2)).unwrap();
        // A foreign kick does not announce b's descriptor; b's own does.
        i.ring_doorbell(
            1,
            a,
            &[
                DoorbellEntry::Kick(qb),
                DoorbellEntry::Kick(1000),
                DoorbellEntry::Meta(qb, MetaUpdate::Rank(5)),
                DoorbellEntry::Meta(qa, MetaUpdate::MoveClass { class: 1 }),
                DoorbellEntry::Meta(
                    qa,
                    MetaUpdate::Rate {
                        rate_bps: 1,
                        burst_bytes: 1,
                    },
                ),
            ],
        )
        .unwrap();
        let mut ctl = Vec::new();
        i.nic_doorbells(1, |c| ctl.push(c));
        assert!(ctl.is_empty());
        let mut out = Vec::new();
        assert_eq!(i.nic_fetch(10, &mut out), 0);
        let ra = i.driver_rejects(a).unwrap();
        assert_eq!(ra[Reject::ForeignQueue.index()], 3);
        assert_eq!(ra[Reject::UnknownQueue.index()], 2);
        assert_eq!(ra[Reject::ForeignClass.index()], 2);
        assert_eq!(ra[Reject::NoShaper.index()], 1);
        assert_eq!(i.driver_rejects(b).unwrap().iter().sum::<u64>(), 0);
        i.ring_doorbell(
            0,
            b,
            &[
                DoorbellEntry::Meta(qb, MetaUpdate::Rank(7)),
                DoorbellEntry::Kick(qb),
                DoorbellEntry::Meta(
                    qb,
                    MetaUpdate::Rate {
                        rate_bps: 10,
                        burst_bytes: 2,
                    },
                ),
                // Refused and counted: a rate or burst of zero (the engine refuses both).
                DoorbellEntry::Meta(
                    qb,
                    MetaUpdate::Rate {
                        rate_bps: 10,
                        burst_bytes: 0,
                    },
                ),
                DoorbellEntry::Meta(
                    qb,
                    MetaUpdate::Rate {
                        rate_bps: 0,
                        burst_bytes: 2,
                    },
                ),
            ],
        )
        .unwrap();
        i.nic_doorbells(0, |c| ctl.push(c));
        assert_eq!(i.driver_rejects(b).unwrap()[Reject::BadRate.index()], 2);
        assert_eq!(
            ctl,
            [Control::Rate {
                queue: qb,
                shaper: 3,
                rate_bps: 10,
                burst_bytes: 2
            }]
        );
        assert_eq!(i.nic_fetch(10, &mut out), 1);
        assert_eq!(out[0].rank, 7);
        assert_eq!(out[0].class, 1);
    }

    #[test]
    fn outstanding_per_class_is_bounded_and_resumes() {
        let mut i = iface(8, 2);
        let a = i.add_driver(None);
        let q1 = i.create_queue(a, 0, None).unwrap();
        let q2 = i.create_queue(a, 0, None).unwrap();
        let q3 = i.create_queue(a, 1, None).unwrap();
        for c in 0..3 {
            i.post(a, q1, d(c)).unwrap();
            i.post(a, q2, d(10 + c)).unwrap();
            i.post(a, q3, d(20 + c)).unwrap();
        }
        i.ring_doorbell(
            0,
            a,
            &[
                DoorbellEntry::Kick(q1),
                DoorbellEntry::Kick(q2),
                DoorbellEntry::Kick(q3),
            ],
        )
        .unwrap();
        i.nic_doorbells(0, |_| {});
        let mut out = Vec::new();
        i.nic_fetch(100, &mut out);
        // Class 0 holds 2 (one of each queue, round robin), class 1 all three.
        assert_eq!(i.outstanding(0), 2);
        assert_eq!(i.outstanding(1), 2);
        assert_eq!(out.len(), 4);
        i.check_invariants().unwrap();
        i.nic_complete(out[0].handle, Status::Sent).unwrap();
        let n = i.nic_fetch(100, &mut out);
        assert_eq!(n, 1);
        assert_eq!(i.outstanding(0), 2);
        i.check_invariants().unwrap();
    }

    #[test]
    fn doorbell_overflow_loses_nothing() {
        let mut i = iface(4, 8);
        let a = i.add_driver(None);
        let q = i.create_queue(a, 0, None).unwrap();
        i.post(a, q, d(1)).unwrap();
        let big = [DoorbellEntry::Kick(q); 17];
        assert_eq!(i.ring_doorbell(0, a, &big), Err(Reject::DoorbellFull));
        assert_eq!(i.ring_doorbell(5, a, &big[..1]), Err(Reject::BadCore));
        i.ring_doorbell(0, a, &big[..1]).unwrap();
        i.nic_doorbells(0, |_| {});
        let mut out = Vec::new();
        assert_eq!(i.nic_fetch(10, &mut out), 1);
        assert_eq!(i.counters().doorbell_writes, 3);
    }
}
