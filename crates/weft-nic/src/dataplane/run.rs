//! Running the loop: [`run`] opens the ports and places the process, [`run_ports`] drives
//! given ports (tests pass memory ports) until stopped, and a reload's policy is read and
//! compiled off the loop ([`prepare_reload`]) before the loop swaps it in.
//!
//! Invariants: the loop never blocks on control; stopping (signal, `ctl stop`,
//! [`request_stop`]) ends it at its next control poll with final stats. Cost: one pass per
//! iteration over receive, doorbells, scheduling, transmission and completions.

use super::*;

pub(super) static STOP: AtomicBool = AtomicBool::new(false);

/// Stops `run` at its next control poll (also set by SIGINT, SIGTERM and SIGHUP).
pub fn request_stop() {
    STOP.store(true, Ordering::Relaxed);
}

pub(super) fn load(cfg: &Config, path: &std::path::Path) -> Result<Program, String> {
    let mut o = cfg.load.clone();
    o.link_rate_bps = Some(cfg.rate_bps);
    policy::load(path, &o).map_err(|e| e.to_string())
}

/// What the policy does with the tenants given (tenant ids are positions in `--tenant`,
/// 1-based): a tenant no leaf can take (every path to a leaf matches other tenants), whose
/// frames would all be dropped as `unclassified`, and tenant ids the policy matches on that
/// no `--tenant` has. Warnings, not errors: a policy may be written for more tenants than
/// run today.
pub fn tenant_warnings(prog: &policy::Program, tenants: &[(String, String)]) -> Vec<String> {
    let admits = |leaf: NodeId, tenant: u32| {
        let mut n = Some(leaf);
        while let Some(i) = n {
            let m = &prog.node(i).matches;
            if !m.tenant.is_empty() && !m.tenant.contains(&tenant) {
                return false;
            }
            n = prog.node(i).parent;
        }
        true
    };
    let mut out = Vec::new();
    for (i, (name, iface)) in tenants.iter().enumerate() {
        let id = i as u32 + 1;
        if !prog.leaves.iter().any(|&l| admits(l, id)) {
            out.push(format!(
                "no leaf of {} takes tenant {id} ({name} on {iface}): its frames will be \
                 dropped as unclassified",
                prog.name
            ));
        }
    }
    let mut beyond: Vec<u32> = prog
        .nodes
        .iter()
        .flat_map(|n| n.matches.tenant.iter().copied())
        .filter(|&t| t == 0 || t as usize > tenants.len())
        .collect();
    beyond.sort_unstable();
    beyond.dedup();
    if !beyond.is_empty() {
        out.push(format!(
            "{} matches tenant {} but {} given (--tenant, numbered from 1)",
            prog.name,
            beyond
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            match tenants.len() {
                1 => "only 1 tenant is".to_string(),
                n => format!("only {n} tenants are"),
            }
        ));
    }
    out
}

/// A reload's new policy and its engine, made off the loop by [`prepare_reload`].
pub(super) type Reloaded = (Arc<Program>, FastEngine);

/// A control request as the loop takes it: what the control thread made of a [`Request`]
/// (the server's [`ctl::Prepare`] hook), a reload's policy already read and compiled.
pub(super) enum Command {
    /// [`Request::Stats`].
    Stats,
    /// [`Request::Reload`], its policy compiled and its engine made.
    Reload(Box<Reloaded>),
    /// [`Request::ResetTiming`].
    ResetTiming,
    /// [`Request::Stop`].
    Stop,
}

/// Reads and compiles the policy at `path` for a reload and makes its engine (on a control
/// thread: a large policy takes tens of milliseconds, which the loop does not wait for), or
/// the error answer: the policy does not compile, or has more leaves than the `classes` the
/// dataplane was started for. Its files, `attach` overrides included, are read once each,
/// through `files` (the control socket's bounds and checks).
pub(super) fn prepare_reload(
    cfg: &Config,
    classes: u32,
    path: &std::path::Path,
    files: &ctl::ReloadReader,
) -> Result<Reloaded, Reply> {
    let mut o = cfg.load.clone();
    o.link_rate_bps = Some(cfg.rate_bps);
    o.reader = Some(files.reader());
    // The client may not be allowed to read the files: nothing of them in the answer.
    let prog =
        Arc::new(policy::load(path, &o).map_err(|e| Reply::Refused(files.client_error(&e)))?);
    if prog.leaves.len() as u32 > classes {
        return Err(Reply::Refused(format!(
            "the new policy has {} leaves; this dataplane was started for at most {classes}",
            prog.leaves.len()
        )));
    }
    let engine = FastEngine::new(prog.clone());
    Ok((prog, engine))
}

/// Runs the software NIC until SIGINT/SIGTERM/SIGHUP (or [`request_stop`]); `ready` is called once
/// the sockets are open, with the metrics endpoint's address if there is one (its port, when
/// the system chose it). Returns the final stats (what `ctl stats` would have answered).
pub fn run(
    cfg: Config,
    ready: impl FnOnce(Option<std::net::SocketAddr>),
) -> Result<Stats, RunError> {
    if cfg.tenants.is_empty() {
        return Err(RunError::Config("at least one --tenant NAME=IFACE".into()));
    }
    if let Some((name, _)) = cfg.tenants.iter().find(|(_, i)| *i == cfg.uplink) {
        return Err(RunError::Config(format!(
            "--tenant {name}={}: `{}` is the uplink; a tenant needs an interface of its own",
            cfg.uplink, cfg.uplink
        )));
    }
    cfg.check_reservations().map_err(RunError::Config)?;
    // Each flow queue's ring is allocated up front (about 24 bytes a descriptor).
    let descriptors = u64::from(cfg.ring) * u64::from(cfg.max_queues);
    if descriptors > MAX_DESCRIPTORS {
        return Err(RunError::Config(format!(
            "--ring {} × --max-queues {} = {descriptors} descriptors: at most {MAX_DESCRIPTORS} \
             (about 800 MB)",
            cfg.ring, cfg.max_queues
        )));
    }
    let ring = RingConfig {
        version: cfg.ring_version,
        ..RingConfig::default()
    };
    let mut tenants: Vec<Box<dyn Port>> = Vec::new();
    // Held while the loop runs (dropped on return: the claims end with the run).
    let mut claims = Vec::new();
    for (name, ifname) in &cfg.tenants {
        let what = format!("--tenant {name}={ifname}");
        claims.push(claim_interface(ifname, &what)?);
        tenants.push(open_port(&cfg, ifname, ring).map_err(|e| e.naming(&what))?);
    }
    let what = format!("--uplink `{}`", cfg.uplink);
    claims.push(claim_interface(&cfg.uplink, &what)?);
    let uplink = open_port(&cfg, &cfg.uplink, ring).map_err(|e| e.naming(&what))?;
    if let Some(cpu) = cfg.cpu {
        pin_to_cpu(cpu).map_err(|e| RunError::Config(e.to_string()))?;
    }
    if let Some(us) = cfg.slice_us {
        set_slice(us).map_err(|e| RunError::Config(e.to_string()))?;
    }
    // Held while the loop runs: the process goes back to the root group on return.
    let _placement = cfg.cpu_weight.and_then(|w| {
        let placed = crate::placement::find().and_then(|(root, version, mounted)| {
            crate::placement::Placement::at(root, version, std::process::id(), w)
                .map(|p| (p, mounted))
        });
        match placed {
            Ok((p, mounted)) => {
                tracing::info!(
                    cgroup = %p.group().display(),
                    cpu_weight = w,
                    "runs in a cgroup of its own (a default group weighs 100)"
                );
                // The placement first (back to the root group), then the mount.
                Some((p, mounted))
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "no cgroup of its own: on a busy host the loop gets its session's share \
                     of a core (--cpu-weight 0 silences this)"
                );
                None
            }
        }
    });
    // SIGHUP: the terminal it was started from closing (SSH dropped): stop cleanly too, not
    // die with the socket left behind and no final stats.
    weft_sys::process::stop_on(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP], &STOP);
    run_ports(cfg, tenants, uplink, &STOP, ready)
}

/// The loop over given ports (one per tenant, in `cfg.tenants` order, and the uplink) until
/// `stop` (or SIGINT/SIGTERM, or `ctl stop`) is set. Returns the final stats.
pub fn run_ports(
    cfg: Config,
    tenants: Vec<Box<dyn Port>>,
    uplink: Box<dyn Port>,
    stop: &AtomicBool,
    ready: impl FnOnce(Option<std::net::SocketAddr>),
) -> Result<Stats, RunError> {
    let mut ready = Some(ready);
    loop_ports(cfg, tenants, uplink, stop, &mut |metrics| {
        if let Some(f) = ready.take() {
            f(metrics)
        }
    })
}

/// [`run_ports`] without a type parameter, so the loop is compiled (and optimized) in this
/// crate, not instantiated in the caller's: a debug build of `weft` ran the whole loop at
/// the binary's opt-level 0 before.
pub(super) fn loop_ports(
    cfg: Config,
    mut tenants: Vec<Box<dyn Port>>,
    mut uplink: Box<dyn Port>,
    stop: &AtomicBool,
    ready: &mut dyn FnMut(Option<std::net::SocketAddr>),
) -> Result<Stats, RunError> {
    if tenants.len() != cfg.tenants.len() || tenants.is_empty() {
        return Err(RunError::Config("one port per tenant".into()));
    }
    cfg.check_reservations().map_err(RunError::Config)?;
    let prog = Arc::new(load(&cfg, &cfg.policy).map_err(RunError::Policy)?);
    let classes = (prog.leaves.len() as u32).max(4096);
    let server = ctl::Server::bind(
        cfg.ctl.as_deref(),
        cfg.metrics.as_deref(),
        reload_hook(&cfg, classes),
    )?;
    if cfg.idle_sleep_us > 0 {
        // 1 µs of slack (best effort, as before).
        let _ = weft_sys::sched::set_timer_slack(1000);
    }
    let now = clock::now_ps();
    let mut st = State::new(cfg, prog, classes, now)?;
    // Said before `ready`: an uplink down at start is not a running NIC's normal state.
    st.check_link(&*uplink, now);
    ready(server.metrics_addr());
    poll(&mut st, &mut tenants, &mut *uplink, &server, stop, now);
    let ports = port_stats(&tenants, &*uplink);
    Ok(st.stats(clock::now_ps(), ports, server.dropped()))
}

/// The control server's hook: a reload's policy is read, compiled and given its engine on
/// the control connection's thread ([`prepare_reload`], for at most `classes` leaves); the
/// loop only swaps it in.
fn reload_hook(cfg: &Config, classes: u32) -> ctl::Prepare<Command> {
    let cfg = cfg.clone();
    Arc::new(move |req: Request, client: &ctl::Client| match req {
        Request::Stats => Ok(Command::Stats),
        Request::Reload { policy } => {
            let files = ctl::ReloadReader::new(client);
            let r = prepare_reload(&cfg, classes, &policy, &files)?;
            Ok(Command::Reload(Box::new(r)))
        }
        Request::ResetTiming => Ok(Command::ResetTiming),
        Request::Stop => Ok(Command::Stop),
    })
}

/// What an idle loop waits on: every port's descriptor (all or none).
fn wait_fds(tenants: &[Box<dyn Port>], uplink: &dyn Port) -> Option<Vec<libc::pollfd>> {
    tenants
        .iter()
        .map(|p| p.wait_fd())
        .chain(std::iter::once(uplink.wait_fd()))
        .map(|fd| {
            fd.map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
        })
        .collect()
}

/// The polling loop itself (the module doc of `dataplane` gives its passes), from `now`
/// until `stop` (or SIGINT/SIGTERM, or `ctl stop`) is seen at a control poll.
///
/// One function on purpose: it is the hot loop, one pass per iteration, and its numbered
/// steps share the pass's `now`, its work count and the timers; each step is a call into
/// [`State`] already, and what is left here is the order of the steps and their schedule.
fn poll(
    st: &mut State,
    tenants: &mut [Box<dyn Port>],
    uplink: &mut dyn Port,
    server: &ctl::Server<Command>,
    stop: &AtomicBool,
    now: u64,
) {
    let mut next_link_ps = now + LINK_CHECK_PS;
    let mut fetched = Vec::with_capacity(256);
    let mut offers = Offers::default();
    let mut completions = Vec::with_capacity(256);
    let mut next_ctl_ps = now;
    let mut next_sample_ps = now;
    let mut next_rogue_ps = now;
    let mut idle_iters = 0u32;
    let mut pollfds = wait_fds(tenants, &*uplink);
    loop {
        let now = clock::now_ps();
        let mut work = 0usize;
        // 1. Cheap work first, every pass: ingress from every tenant ring (a bounded batch),
        //    doorbells, fetches, offers to the engine. So the decision below always sees the
        //    frames that arrived during the previous pass's send.
        for (t, sock) in tenants.iter_mut().enumerate() {
            let real = clock::realtime_ns();
            work += sock.recv_batch(RX_BATCH, &mut |f, ts| {
                if let Some(w) = ring_wait(ts, real) {
                    st.timing.rx_wait[t].record(w);
                }
                st.ingress(t, f, now)
            });
            st.ring_doorbell(t);
        }
        let received = work;
        st.nic_side(now, &mut fetched, &mut offers);
        // 2. One expensive step (a `send(2)`, which on veth runs the receiver's stack), the
        //    first of: a sparse tenant's reverse frame (a reply), unless the uplink is
        //    already SPARSE_LATE_PS behind; the uplink's due departures; a backlogged
        //    tenant's reverse frame, unless a departure is due within REVERSE_GUARD_PS (then
        //    the loop waits for it, so departures leave on time). Departures and backlogged
        //    reverse frames alternate when both wait. Due departures go one more than the
        //    frames this pass received, at most: one in the paced steady state (a frame that
        //    arrives meanwhile is seen before the next), as many as arrive when the loop is
        //    the bottleneck (unpaced, or catching up), so receiving cannot outrun sending.
        let stepped = st.expensive_step(tenants, uplink, now, received);
        work += stepped as usize;
        // 3. Completions.
        for (t, &d) in st.drivers.iter().enumerate() {
            completions.clear();
            st.iface.poll_completions(d, usize::MAX, &mut completions);
            for c in &completions {
                st.free.push(c.desc.buf);
                st.buffer_budget.give(t);
            }
        }
        if let Some(r) = st.cfg.rogue {
            if now >= next_rogue_ps {
                next_rogue_ps = now + 100_000_000;
                st.misbehave(r);
            }
        }
        // 4. Reverse path, receive side: uplink frames into per-tenant queues (a copy each;
        //    while the queues hold REVERSE_BUFFERS frames, the rest wait in the ring).
        if st.rev.free.len() >= REVERSE_ROOM {
            work += uplink.recv_batch(RX_BATCH, &mut |f, ts| st.reverse_in(f, ts));
        }
        // 5. Housekeeping.
        if now >= next_link_ps {
            next_link_ps = now + LINK_CHECK_PS;
            st.check_link(uplink, now);
        }
        if now >= next_ctl_ps {
            next_ctl_ps = now + 1_000_000_000;
            server.poll(|cmd| {
                let ports = || port_stats(tenants, uplink);
                st.handle(cmd, now, ports, server.dropped())
            });
            if now >= next_sample_ps {
                next_sample_ps = now + 1_000_000_000_000;
                st.sample(now);
                st.reclaim(now);
                st.log_tenant_drops();
            }
            if STOP.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if work > 0 {
            st.timing
                .busy_iter
                .record(clock::now_ps().saturating_sub(now) / 1000);
        }
        if work == 0 && st.cfg.idle_sleep_us > 0 {
            idle_iters += 1;
            // Nothing received or sent: give the core back (on a 2-core machine the
            // applications and the kernel's TCP need it) until a frame arrives, or the next
            // paced departure. `prctl(PR_SET_TIMERSLACK)` above keeps the timeout precise.
            if idle_iters > IDLE_SPINS {
                let mut ns = st.cfg.idle_sleep_us * 1000;
                let backlog = st.engine.backlog() > 0 || !st.draining.is_empty();
                if backlog {
                    ns = ns.min(st.next_free_ps.saturating_sub(now) / 1000);
                }
                if ns > 0 {
                    match pollfds.as_mut() {
                        Some(fds) => wait_readable(fds, ns),
                        None => std::thread::sleep(std::time::Duration::from_nanos(ns)),
                    }
                }
            }
        } else {
            idle_iters = 0;
        }
    }
}

/// Adds a finished engine's node counters to `carried`, by node name, for the nodes `kept`
/// says the running policy still has (by position in the engine's policy).
pub(super) fn carry(
    carried: &mut HashMap<String, weft_core::sched::Counters>,
    e: &FastEngine,
    kept: impl IntoIterator<Item = bool>,
) {
    let st = e.stats();
    for ((n, c), keep) in e.program().nodes.iter().zip(&st.nodes).zip(kept) {
        if keep {
            carried.entry(n.name.clone()).or_default().add(c);
        }
    }
}
