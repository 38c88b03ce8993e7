//! The control server: binding the socket (mode 0660, its group, appearing only once it
//! has both) and the metrics listener, the accepting threads and the bounded pools that
//! serve connections, handing requests to the dataplane and waiting for its answers, and
//! the reload thread with its deadline.
//!
//! Invariants: at most [`MAX_CONNECTIONS`] (control) and [`MAX_METRICS_CONNECTIONS`]
//! (metrics) connections served at once, the rest queued up to [`CTL_QUEUE`] and the
//! metrics queue, then closed, counted and logged; the loop is never blocked by a client.
//! Cost: two accepting threads, a thread per connection served, one per reload.

use super::*;

/// A request on its way to the dataplane, as [`Prepare`] made it, and where its answer
/// goes.
pub(super) struct Pending<C> {
    cmd: C,
    reply: SyncSender<Reply>,
}

/// What the accepting and serving threads share.
pub(super) struct Shared<C> {
    pub(super) to_loop: Sender<Pending<C>>,
    pub(super) prepare: Prepare<C>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) max_policy_bytes: u64,
    /// Reloads reading or compiling now.
    pub(super) reloads: Arc<AtomicUsize>,
    pub(super) metrics: Arc<MetricsCache>,
}

impl<C> Clone for Shared<C> {
    fn clone(&self) -> Shared<C> {
        Shared {
            to_loop: self.to_loop.clone(),
            prepare: self.prepare.clone(),
            stop: self.stop.clone(),
            max_policy_bytes: self.max_policy_bytes,
            reloads: self.reloads.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

/// The server side: the dataplane polls it for the commands `C` its [`Prepare`] hook makes
/// of the requests.
pub struct Server<C = Request> {
    requests: Receiver<Pending<C>>,
    stop: Arc<AtomicBool>,
    /// The accepting threads, and how to wake each from `accept(2)` at shutdown.
    pub(super) acceptors: Vec<(JoinHandle<()>, Wake)>,
    unix_path: Option<PathBuf>,
    /// Directories made for the control socket, outermost first: removed at drop, if empty.
    made_dirs: Vec<PathBuf>,
    /// Control connections closed unanswered.
    ctl_dropped: Arc<Dropped>,
    /// Metrics connections closed unanswered.
    metrics_dropped: Arc<Dropped>,
}

/// Connections [`Server`] closed unanswered (every thread of their pool busy and its queue
/// full) since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DroppedConnections {
    /// On the control socket.
    pub ctl: u64,
    /// On the metrics endpoint.
    pub metrics: u64,
}

/// A pool's count of connections closed unanswered, and its log line about them: at most
/// one each [`DROPPED_LOG_EVERY`].
pub(super) struct Dropped {
    /// Which listener, for the log: `control` or `metrics`.
    listener: &'static str,
    count: AtomicU64,
    /// The count at the last log line, and when it was written.
    logged: Mutex<(u64, Option<Instant>)>,
}

impl Dropped {
    pub(super) fn new(listener: &'static str) -> Arc<Dropped> {
        Arc::new(Dropped {
            listener,
            count: AtomicU64::new(0),
            logged: Mutex::new((0, None)),
        })
    }

    pub(super) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Counts a connection closed unanswered (before it is closed) and logs it, with the
    /// others since the last line, unless a line was written within [`DROPPED_LOG_EVERY`].
    fn one(&self) {
        if let Some((since, total)) = self.counted(Instant::now()) {
            tracing::warn!(
                listener = self.listener,
                closed = since,
                total,
                "connections closed unanswered: every serving thread busy and the queue of \
                 waiting connections full"
            );
        }
    }

    /// [`Dropped::one`] at `now`: what to log (closed since the last line, and in all), if
    /// a line is due.
    pub(super) fn counted(&self, now: Instant) -> Option<(u64, u64)> {
        let total = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let mut logged = lock(&self.logged);
        if logged
            .1
            .is_some_and(|at| now.saturating_duration_since(at) < DROPPED_LOG_EVERY)
        {
            return None;
        }
        let since = total.saturating_sub(logged.0);
        *logged = (total, Some(now));
        Some((since, total))
    }
}

pub(super) enum Wake {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl<C: Send + 'static> Server<C> {
    /// [`Server::bind_with`] the process's [`Options::defaults`].
    pub fn bind(
        path: Option<&Path>,
        metrics: Option<&str>,
        prepare: Prepare<C>,
    ) -> io::Result<Server<C>> {
        Server::bind_with(path, metrics, prepare, &Options::defaults())
    }

    /// Binds the control socket at `path` (replacing a stale one; mode 0660, given to
    /// `opts.group`) and, if given, the metrics endpoint (must be a loopback address), and
    /// starts their accepting threads; `prepare` runs on a control thread for each control
    /// request first.
    pub fn bind_with(
        path: Option<&Path>,
        metrics: Option<&str>,
        prepare: Prepare<C>,
        opts: &Options,
    ) -> io::Result<Server<C>> {
        let (to_loop, requests) = mpsc::channel();
        let shared = Shared {
            to_loop,
            prepare,
            stop: Arc::new(AtomicBool::new(false)),
            max_policy_bytes: opts.max_policy_bytes,
            reloads: Arc::new(AtomicUsize::new(0)),
            metrics: Arc::new(MetricsCache::default()),
        };
        let mut server = Server {
            requests,
            stop: shared.stop.clone(),
            acceptors: Vec::new(),
            unix_path: None,
            made_dirs: Vec::new(),
            ctl_dropped: Dropped::new("control"),
            metrics_dropped: Dropped::new("metrics"),
        };
        if let Some(a) = metrics {
            let at = |e: io::Error| io::Error::new(e.kind(), format!("metrics address `{a}`: {e}"));
            // Checked before binding: a port on another address is never opened, even briefly.
            let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(a)
                .map_err(at)?
                .collect();
            if addrs.iter().any(|s| !s.ip().is_loopback()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "metrics address `{a}`: not a loopback address (the endpoint has no \
                         access control; give 127.0.0.1:PORT or [::1]:PORT)"
                    ),
                ));
            }
            let l = TcpListener::bind(&addrs[..]).map_err(at)?;
            let addr = l.local_addr()?;
            let accept = |l: &TcpListener| l.accept().map(|(s, _)| s);
            let limit = raise_fd_limit();
            let queue = metrics_queue_for(limit);
            if queue < METRICS_QUEUE {
                tracing::warn!(
                    fd_limit = limit,
                    queue,
                    "the descriptor limit leaves the metrics endpoint room for {queue} \
                     waiting connections (of {METRICS_QUEUE}); more are closed unanswered and \
                     counted, so they cannot take the descriptors the control socket needs"
                );
            }
            let pool = Pool::new(
                "weft-metrics-conn",
                MAX_METRICS_CONNECTIONS,
                queue,
                serve_metrics,
                server.metrics_dropped.clone(),
            );
            let t = spawn_acceptor("weft-metrics", l, accept, &shared, pool)?;
            server.acceptors.push((t, Wake::Tcp(addr)));
        }
        if let Some(p) = path {
            let at = |e: io::Error| {
                io::Error::new(e.kind(), format!("control socket {}: {e}", p.display()))
            };
            if let Some(dir) = p.parent() {
                server.made_dirs = make_dirs(dir).map_err(at)?;
            }
            claim_socket_path(p).map_err(at)?;
            let l = bind_control(p, opts.group.as_ref()).map_err(at)?;
            server.unix_path = Some(p.to_path_buf());
            let accept = |l: &UnixListener| l.accept().map(|(s, _)| s);
            let pool = Pool::new(
                "weft-ctl-conn",
                MAX_CONNECTIONS,
                CTL_QUEUE,
                serve_unix,
                server.ctl_dropped.clone(),
            );
            let t = spawn_acceptor("weft-ctl", l, accept, &shared, pool)?;
            server.acceptors.push((t, Wake::Unix(p.to_path_buf())));
        }
        Ok(server)
    }

    /// Answers the requests that have arrived (none waits: without requests this is one
    /// `try_recv`): `handle` answers each as [`Prepare`] made it (the metrics endpoint asks
    /// for what the hook makes of [`Request::Stats`]).
    pub fn poll(&self, mut handle: impl FnMut(C) -> Reply) {
        while let Ok(p) = self.requests.try_recv() {
            // The connection may have given up waiting: its answer is dropped.
            let _ = p.reply.send(handle(p.cmd));
        }
    }
}

/// Binds the control socket at `p` with mode 0660 and, given `group`, that group: made
/// under a temporary name beside `p` and linked to `p` once it has both, so it is never
/// reachable with other permissions. (Should the temporary name be too long for a socket
/// address where `p` is not, it is bound at `p` and changed there.)
pub(super) fn bind_control(p: &Path, group: Option<&Group>) -> io::Result<UnixListener> {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    let finish = |at: &Path| -> io::Result<()> {
        std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o660))?;
        if let Some(g) = group {
            std::os::unix::fs::chown(at, None, Some(g.gid)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot give it to group `{}` ({}): {e}", g.name, g.gid),
                )
            })?;
        }
        Ok(())
    };
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".weft-{:x}-{n:x}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let l = match UnixListener::bind(&tmp) {
        Ok(l) => l,
        // The longer name does not fit a socket address.
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            let l = UnixListener::bind(p)?;
            if let Err(e) = finish(p) {
                let _ = std::fs::remove_file(p);
                return Err(e);
            }
            return Ok(l);
        }
        Err(e) => return Err(e),
    };
    let linked = finish(&tmp).and_then(|()| {
        // Never replaces: a daemon that took the path meanwhile keeps it.
        std::fs::hard_link(&tmp, p).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => io::Error::new(
                io::ErrorKind::AddrInUse,
                "another weft took the path meanwhile (give this one another --ctl path)",
            ),
            _ => e,
        })
    });
    let _ = std::fs::remove_file(&tmp);
    linked.map(|()| l)
}

/// Makes `p` free for a new control socket: a stale socket (nobody answers on it: a daemon
/// that was killed) is removed; a socket another daemon answers on, or anything that is not
/// a socket, is left alone and refused (`AddrInUse`, `AlreadyExists`), so a second `weft run`
/// cannot take over a running one's socket (which then could not be stopped) or delete a file
/// named by mistake.
pub(super) fn claim_socket_path(p: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(p).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "in use by a running weft (stop it with `weft ctl stop --socket {}`, or \
                         give this one another --ctl path)",
                        p.display()
                    ),
                ));
            }
            std::fs::remove_file(p)
        }
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket (give --ctl a path of its own)",
        )),
    }
}

impl<C> Server<C> {
    /// Connections closed unanswered so far (`ctl_dropped`, `metrics_dropped` in the
    /// dataplane's stats).
    pub fn dropped(&self) -> DroppedConnections {
        DroppedConnections {
            ctl: self.ctl_dropped.count(),
            metrics: self.metrics_dropped.count(),
        }
    }

    /// The address the metrics endpoint listens on (its port, when `:0` let the system
    /// choose), if it has one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.acceptors.iter().find_map(|(_, w)| match w {
            Wake::Tcp(a) => Some(*a),
            Wake::Unix(_) => None,
        })
    }
}

impl<C> Drop for Server<C> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (t, wake) in self.acceptors.drain(..) {
            // A connection of our own wakes the thread from `accept(2)`; it sees `stop`.
            let woke = match &wake {
                Wake::Unix(p) => UnixStream::connect(p).is_ok(),
                Wake::Tcp(a) => TcpStream::connect_timeout(a, Duration::from_secs(1)).is_ok(),
            };
            if woke {
                let _ = t.join();
            }
        }
        if let Some(p) = &self.unix_path {
            let _ = std::fs::remove_file(p);
        }
        for d in self.made_dirs.iter().rev() {
            // Fails, and keeps the directory, when something else is in it.
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// `create_dir_all`, returning the directories it made, outermost first.
pub(super) fn make_dirs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    std::fs::create_dir_all(dir)?;
    Ok(missing.into_iter().rev().map(Path::to_path_buf).collect())
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connections of one listener: at most `limit` served at once, a thread each (a thread
/// that ends a connection takes the next waiting one), at most `queue` waiting.
pub(super) struct Pool<S, C> {
    thread_name: &'static str,
    limit: usize,
    queue: usize,
    serve: fn(S, &Shared<C>) -> io::Result<()>,
    pub(super) state: Mutex<PoolState<S>>,
    /// Connections closed unanswered.
    dropped: Arc<Dropped>,
}

pub(super) struct PoolState<S> {
    /// Threads serving.
    pub(super) running: usize,
    /// Accepted connections no thread has taken yet.
    waiting: VecDeque<S>,
}

impl<S: Send + 'static, C: Send + 'static> Pool<S, C> {
    pub(super) fn new(
        thread_name: &'static str,
        limit: usize,
        queue: usize,
        serve: fn(S, &Shared<C>) -> io::Result<()>,
        dropped: Arc<Dropped>,
    ) -> Arc<Pool<S, C>> {
        Arc::new(Pool {
            thread_name,
            limit,
            queue,
            serve,
            state: Mutex::new(PoolState {
                running: 0,
                waiting: VecDeque::new(),
            }),
            dropped,
        })
    }

    /// Serves `s` on a new thread, or queues it when `limit` threads serve, or drops it
    /// (closed unanswered, counted and logged) when the queue is full too.
    pub(super) fn submit(self: &Arc<Self>, s: S, sh: &Shared<C>) {
        let mut st = lock(&self.state);
        if st.running >= self.limit {
            if st.waiting.len() < self.queue {
                st.waiting.push_back(s);
                return;
            }
            drop(st);
            // Counted before it is closed: a client that sees the close finds it counted.
            self.dropped.one();
            drop(s);
            return;
        }
        st.running += 1;
        drop(st);
        let (pool, sh) = (self.clone(), sh.clone());
        let spawned = std::thread::Builder::new()
            .name(self.thread_name.into())
            .spawn(move || pool.work(s, &sh));
        if spawned.is_err() {
            // The connection went with the closure: closed unanswered.
            lock(&self.state).running -= 1;
            self.dropped.one();
        }
    }

    /// Serves `first`, then waiting connections until there are none (or the server stops).
    fn work(&self, first: S, sh: &Shared<C>) {
        let mut next = Some(first);
        while let Some(s) = next.take() {
            let _ = (self.serve)(s, sh);
            let mut st = lock(&self.state);
            if sh.stop.load(Ordering::Relaxed) {
                st.waiting.clear();
            }
            next = st.waiting.pop_front();
            if next.is_none() {
                st.running -= 1;
            }
        }
    }
}

/// Raises the process's soft limit on open descriptors to its hard limit, where it is
/// lower; the soft limit then (unknown: [`METRICS_QUEUE`]'s needs, as if it were enough).
pub(super) fn raise_fd_limit() -> u64 {
    weft_sys::process::raise_fd_limit()
}

/// The metrics endpoint's queue under a limit of `fd_limit` open descriptors: at most
/// [`METRICS_QUEUE`], and no more than the limit leaves after [`RESERVED_FDS`] and both
/// pools' serving threads and the control queue, so that idle metrics connections are
/// closed unanswered (counted and logged) before they could exhaust the descriptors and
/// leave the control socket unable to accept, `stop` included.
pub fn metrics_queue_for(fd_limit: u64) -> usize {
    let others = RESERVED_FDS + (MAX_CONNECTIONS + CTL_QUEUE + MAX_METRICS_CONNECTIONS) as u64;
    fd_limit.saturating_sub(others).min(METRICS_QUEUE as u64) as usize
}

/// Starts the thread that accepts `listener`'s connections (blocked in `accept(2)` until
/// one comes) and hands each to `pool`, until [`Server`]'s drop sets `stop`.
pub(super) fn spawn_acceptor<L: Send + 'static, S: Send + 'static, C: Send + 'static>(
    name: &str,
    listener: L,
    accept: fn(&L) -> io::Result<S>,
    shared: &Shared<C>,
    pool: Arc<Pool<S, C>>,
) -> io::Result<JoinHandle<()>> {
    let sh = shared.clone();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // Off the pinned loop's CPU (its connection threads inherit this).
            crate::dataplane::away_from_the_loop();
            loop {
                let s = accept(&listener);
                if sh.stop.load(Ordering::Relaxed) {
                    break;
                }
                match s {
                    Ok(s) => pool.submit(s, &sh),
                    // Out of descriptors, say: try again a little later rather than spin.
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
}

/// Prepares `req` from `client` (a reload: [`prepare_reload`]), sends it to the dataplane
/// and waits for its answer.
pub(super) fn ask<C: Send + 'static>(sh: &Shared<C>, req: Request, client: &Client) -> Reply {
    let reload = match &req {
        Request::Reload { policy } => Some(policy.clone()),
        _ => None,
    };
    let prepared = match &reload {
        Some(policy) => prepare_reload(sh, policy, req, client),
        None => (sh.prepare)(req, client),
    };
    match prepared {
        Ok(cmd) => ask_loop(sh, cmd),
        Err(answer) => {
            if let Some(policy) = &reload {
                // The operator's log says why, as the client was told (redacted the same way).
                tracing::warn!(
                    policy = %policy.display(),
                    error = answer.error().unwrap_or_default(),
                    "reload refused; the running policy is untouched"
                );
            }
            answer
        }
    }
}

/// Sends `req` to the dataplane and waits for its answer.
pub(super) fn ask_loop<C>(sh: &Shared<C>, cmd: C) -> Reply {
    let (reply, answer) = mpsc::sync_channel(1);
    if sh.to_loop.send(Pending { cmd, reply }).is_err() {
        return Reply::refused("the dataplane is stopping");
    }
    answer
        .recv_timeout(ANSWER_WAIT)
        .unwrap_or_else(|_| Reply::refused("the dataplane did not answer"))
}

/// A reload's slow part (`req`, of the policy at `path`, from `client`), on a thread of its
/// own that the connection waits for at most [`RELOAD_DEADLINE`]: the [`Prepare`] hook reads
/// its files (through a [`ReloadReader`], each once) and compiles them; a refusal names the
/// file and the rule, and quotes nothing of it ([`redact`]).
pub(super) fn prepare_reload<C: Send + 'static>(
    sh: &Shared<C>,
    path: &Path,
    req: Request,
    client: &Client,
) -> Result<C, Reply> {
    let refuse = Reply::Refused;
    if sh.reloads.fetch_add(1, Ordering::SeqCst) >= RELOADS_AT_ONCE {
        sh.reloads.fetch_sub(1, Ordering::SeqCst);
        return Err(refuse(format!(
            "{}: {RELOADS_AT_ONCE} reloads are still reading or compiling their policies; \
             try again later (the running policy is untouched)",
            path.display()
        )));
    }
    let place = Place(sh.reloads.clone());
    let (tx, rx) = mpsc::sync_channel(1);
    let prepare = sh.prepare.clone();
    let client = *client;
    let spawned = std::thread::Builder::new()
        .name("weft-reload".into())
        .spawn(move || {
            in_place(
                place,
                || {
                    prepare(req, &client).map_err(|answer| match answer {
                        Reply::Refused(e) => Reply::Refused(redact(&e)),
                        other => other,
                    })
                },
                |r| {
                    let _ = tx.send(r);
                },
            )
        });
    if let Err(e) = spawned {
        return Err(refuse(format!(
            "{}: cannot start a reload: {e}",
            path.display()
        )));
    }
    match rx.recv_timeout(RELOAD_DEADLINE) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(refuse(format!(
            "{}: reading and compiling the policy took longer than {} s; the running policy \
             is untouched",
            path.display(),
            RELOAD_DEADLINE.as_secs()
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(refuse(format!(
            "{}: the reload failed (its thread ended without an answer); the running policy \
             is untouched",
            path.display()
        ))),
    }
}

/// A reload's place among the [`RELOADS_AT_ONCE`]: given back when dropped, however its
/// thread ends.
pub(super) struct Place(pub(super) Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Does a reload's `work` in its `place`, gives the place back, and only then hands the
/// result to `answer`: a client told its answer can start its next reload at once. (Given
/// back after the answer, a client reloading back to back could find its own previous
/// reloads still holding every place, and be refused.)
pub(super) fn in_place<R>(place: Place, work: impl FnOnce() -> R, answer: impl FnOnce(R)) {
    let r = work();
    drop(place);
    answer(r);
}
