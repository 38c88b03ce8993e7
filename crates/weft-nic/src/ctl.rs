//! Live control of a running software NIC: a Unix stream socket speaking one JSON request
//! line and one JSON answer line (`{"cmd":"stats"}`, `{"cmd":"reload","policy":PATH}`), and
//! an optional Prometheus text endpoint on a localhost TCP port. The messages are typed in
//! [`proto`]: the line a client sends is read once, where it arrives, into a [`Request`]
//! ([`request_of`]; a line that is not one is refused there, naming the command and the
//! field), and every answer is a [`Reply`], written as the JSON clients have always read.
//!
//! The dataplane never blocks on control. Threads of their own accept the connections and
//! serve them, and do each request's slow part there: a [`Prepare`] hook makes of the
//! request the loop's own command (`C` of [`Server`]: a reload's policy is read and compiled
//! off the loop), which goes to the dataplane over a channel, and the busy loop, about once
//! a millisecond, answers what has arrived ([`Server::poll`]: a `try_recv` when nothing
//! has). A client that connects and sends nothing, or one byte at a time, costs the loop
//! nothing.
//!
//! The control socket and the metrics endpoint have pools of their own: each its accepting
//! thread, at most [`MAX_CONNECTIONS`] (control) or [`MAX_METRICS_CONNECTIONS`] (metrics)
//! connections served at once, a thread each, and a queue of accepted connections waiting
//! for one ([`CTL_QUEUE`], [`METRICS_QUEUE`]; past it a connection is closed unanswered,
//! counted ([`Server::dropped`]) and logged, at most a line a second per listener).
//! Every connection gets [`READ_DEADLINE`] to send its request and [`WRITE_DEADLINE`] to
//! take its answer, so idle or slow metrics clients never hold up a control request. A
//! scrape is answered from the latest stats, asked of the loop at most once per
//! [`METRICS_MAX_AGE`] whatever the number of scrapers.
//!
//! A reload's policy is read only from regular files ([`read_policy_file`]: opened with
//! `O_NONBLOCK` and checked with `fstat`, so a FIFO or a device is refused by name, never
//! waited on or read), at most [`Options::max_policy_bytes`] for the file and its
//! sub-policies together, on a thread of its own that the connection waits for at most
//! [`RELOAD_DEADLINE`]. The [`Prepare`] hook compiles it with a [`ReloadReader`], which
//! reads each file (`attach` overrides too) once, as it checks it: what is checked is what
//! is compiled, whatever replaces a file meanwhile. The errors it
//! answers name the file, the place and the rule broken, but never quote the file: the
//! policy's diagnostics lose their excerpts and hints, and what their messages quote from
//! the file is replaced by `…` ([`redact`]): the daemon may run as root, and a client must
//! not learn what is in a file it names.
//!
//! The control socket is made with mode 0660 (owner and group), given to
//! [`Options::group`] when there is one, and appears at its path only once it has both.
//!
//! Cost: two threads blocked in `accept(2)` (off the loop's CPU when it is pinned), a thread
//! per connection being served (at most [`MAX_CONNECTIONS`] + [`MAX_METRICS_CONNECTIONS`])
//! and one per reload while it reads and compiles.

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use weft_core::policy::parse::{self, Kind};
use weft_core::policy::Rule;
use weft_core::sched::DropReason;

use crate::iface::Reject;
use crate::stats::{DataplaneStats, PortStats, Stats, XdpKernelStats, TENANT_DROPS};

pub mod proto;

pub use proto::{Reloaded, Reply, ReplyError, Request, RequestError};

/// Control connections served at once; more wait in a queue of [`CTL_QUEUE`] for one to end.
pub const MAX_CONNECTIONS: usize = 16;
/// Control connections waiting for a thread; past them a connection is closed unanswered
/// (the client sees the connection closed).
pub const CTL_QUEUE: usize = 64;
/// Metrics connections served at once; more wait in a queue of [`METRICS_QUEUE`].
pub const MAX_METRICS_CONNECTIONS: usize = 32;
/// Metrics connections waiting for a thread; past them a connection is closed unanswered.
/// Fewer where the process's descriptor limit would not hold them ([`metrics_queue_for`]).
pub const METRICS_QUEUE: usize = 1024;
/// Descriptors kept, whatever the metrics endpoint's clients do, for the rest of the
/// process: its rings, sockets and lock files, the control socket's connections beyond
/// their pool's own, reloads' files.
pub const RESERVED_FDS: u64 = 256;
/// Connections closed unanswered are logged at most this often, each line with the count
/// since the last ([`Server::dropped`] counts them all).
pub const DROPPED_LOG_EVERY: Duration = Duration::from_secs(1);
/// How long a client has to send its request (a line of at most 1 MiB, or an HTTP request's
/// first 2 KiB), from when a thread takes its connection.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// How long a client has to take its answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(2);
/// How long a connection waits for the dataplane's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// How long a reload may take to read and compile its policy (`weft ctl` waits 10 s for the
/// whole answer); past it the client is told so and the policy is not used.
pub const RELOAD_DEADLINE: Duration = Duration::from_secs(8);
/// Reloads reading or compiling at once (one stuck past its deadline, on a file system that
/// does not answer, say, keeps its place until it ends).
const RELOADS_AT_ONCE: usize = 2;
/// How old the stats a scrape is answered with may be: newer scrapes share one question to
/// the loop.
pub const METRICS_MAX_AGE: Duration = Duration::from_secs(1);
/// The default of [`Options::max_policy_bytes`] (`weft run --max-policy-bytes`): 4 MiB.
pub const DEFAULT_MAX_POLICY_BYTES: u64 = 4 << 20;

/// The most bytes [`request`] takes as an answer: far beyond the stats of any policy within
/// the default limits (about 200 bytes a node), so that a socket that is not weft's, or a
/// weft gone wrong, cannot make the client buffer without end.
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// How long [`request`] waits for its whole answer (not each read: a peer sending a byte a
/// second would otherwise hold it for ever).
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// A request's slow part, run on a control thread before the loop sees it: `Ok(command)`
/// sends the loop `command`, the loop's own form of the request (`C`: a reload's policy
/// read and compiled, say), `Err(answer)` answers it at once (the loop never sees it). Beside
/// the request it is given its [`Client`] (who sent it, from the kernel, and the server's
/// `--max-policy-bytes`), which the request cannot set: a reload's hook reads the policy's
/// files with a [`ReloadReader`] of it, which checks them. The metrics endpoint's scrapes
/// ask it too, with [`Request::Stats`] and no peer.
pub type Prepare<C = Request> = Arc<dyn Fn(Request, &Client) -> Result<C, Reply> + Send + Sync>;

/// Who sent a request, and the bounds the server holds it to: set by the server, never
/// read from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    /// Its credentials (`SO_PEERCRED`); `None` when the kernel did not say, or for the
    /// server's own requests (a metrics scrape's `stats`).
    pub peer: Option<Peer>,
    /// The most bytes a reload reads for it (`weft run --max-policy-bytes`).
    pub max_policy_bytes: u64,
}

/// How the control server guards itself (`weft run --max-policy-bytes`, `--ctl-group`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The most bytes a reload reads: its policy file and sub-policies together.
    pub max_policy_bytes: u64,
    /// The group the control socket is given (its members may use it), if any.
    pub group: Option<Group>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_policy_bytes: DEFAULT_MAX_POLICY_BYTES,
            group: None,
        }
    }
}

/// What [`Server::bind`] uses: set by [`set_defaults`] (`weft run` sets its flags there).
static DEFAULTS: RwLock<Option<Options>> = RwLock::new(None);

/// Makes `o` what [`Server::bind`] uses from now on in this process (`weft run` hands its
/// flags to the server the dataplane binds this way).
pub fn set_defaults(o: Options) {
    *DEFAULTS.write().unwrap_or_else(PoisonError::into_inner) = Some(o);
}

impl Options {
    /// What [`set_defaults`] set, or [`Options::default`].
    pub fn defaults() -> Options {
        DEFAULTS
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }
}

/// A group, by name and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its name as given.
    pub name: String,
    /// Its id.
    pub gid: u32,
}

/// The group named `name` (the system's group database: `/etc/group`, or what NSS serves).
/// A group that does not exist is `NotFound`, naming it.
pub fn lookup_group(name: &str) -> io::Result<Group> {
    let what = |m: String| format!("--ctl-group `{name}`: {m}");
    if name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            what("a NUL in the name".into()),
        ));
    }
    match weft_sys::process::group_id(name) {
        Ok(Some(gid)) => Ok(Group {
            name: name.to_string(),
            gid,
        }),
        Ok(None) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            what("no such group (`getent group NAME` lists the groups there are)".into()),
        )),
        Err(e) => Err(io::Error::new(
            e.kind(),
            what(format!("cannot look it up: {e}")),
        )),
    }
}

/// A request on its way to the dataplane, as [`Prepare`] made it, and where its answer
/// goes.
struct Pending<C> {
    cmd: C,
    reply: SyncSender<Reply>,
}

/// What the accepting and serving threads share.
struct Shared<C> {
    to_loop: Sender<Pending<C>>,
    prepare: Prepare<C>,
    stop: Arc<AtomicBool>,
    max_policy_bytes: u64,
    /// Reloads reading or compiling now.
    reloads: Arc<AtomicUsize>,
    metrics: Arc<MetricsCache>,
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
    acceptors: Vec<(JoinHandle<()>, Wake)>,
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
struct Dropped {
    /// Which listener, for the log: `control` or `metrics`.
    listener: &'static str,
    count: AtomicU64,
    /// The count at the last log line, and when it was written.
    logged: Mutex<(u64, Option<Instant>)>,
}

impl Dropped {
    fn new(listener: &'static str) -> Arc<Dropped> {
        Arc::new(Dropped {
            listener,
            count: AtomicU64::new(0),
            logged: Mutex::new((0, None)),
        })
    }

    fn count(&self) -> u64 {
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
    fn counted(&self, now: Instant) -> Option<(u64, u64)> {
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

enum Wake {
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
fn bind_control(p: &Path, group: Option<&Group>) -> io::Result<UnixListener> {
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
fn claim_socket_path(p: &Path) -> io::Result<()> {
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
fn make_dirs(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    std::fs::create_dir_all(dir)?;
    Ok(missing.into_iter().rev().map(Path::to_path_buf).collect())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The connections of one listener: at most `limit` served at once, a thread each (a thread
/// that ends a connection takes the next waiting one), at most `queue` waiting.
struct Pool<S, C> {
    thread_name: &'static str,
    limit: usize,
    queue: usize,
    serve: fn(S, &Shared<C>) -> io::Result<()>,
    state: Mutex<PoolState<S>>,
    /// Connections closed unanswered.
    dropped: Arc<Dropped>,
}

struct PoolState<S> {
    /// Threads serving.
    running: usize,
    /// Accepted connections no thread has taken yet.
    waiting: VecDeque<S>,
}

impl<S: Send + 'static, C: Send + 'static> Pool<S, C> {
    fn new(
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
    fn submit(self: &Arc<Self>, s: S, sh: &Shared<C>) {
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
fn raise_fd_limit() -> u64 {
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
fn spawn_acceptor<L: Send + 'static, S: Send + 'static, C: Send + 'static>(
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
fn ask<C: Send + 'static>(sh: &Shared<C>, req: Request, client: &Client) -> Reply {
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
fn ask_loop<C>(sh: &Shared<C>, cmd: C) -> Reply {
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
fn prepare_reload<C: Send + 'static>(
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
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Does a reload's `work` in its `place`, gives the place back, and only then hands the
/// result to `answer`: a client told its answer can start its next reload at once. (Given
/// back after the answer, a client reloading back to back could find its own previous
/// reloads still holding every place, and be refused.)
fn in_place<R>(place: Place, work: impl FnOnce() -> R, answer: impl FnOnce(R)) {
    let r = work();
    drop(place);
    answer(r);
}

/// Why a policy file is not read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    /// It cannot be opened or examined (no such file, no permission).
    #[error("cannot read {}: {source}", .path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The system's refusal.
        source: io::Error,
    },
    /// It is not a regular file: `what` says what it is ("a FIFO", "a character device").
    #[error("{} is {what}, not a regular file (policies are read from regular files only)", .path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// It holds more than the limit (`size` when its length says so before it is read).
    #[error("{}", too_large(&.path.display().to_string(), *.size, *.limit, *.before, true))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length, when known before reading.
        size: Option<u64>,
        /// The limit.
        limit: u64,
        /// Bytes of the policy's files read before it (its sub-policies count too).
        before: u64,
    },
    /// Reading it failed.
    #[error("reading {} failed: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// [`PolicyFileError::TooLarge`]'s message, about `p` (the path, or `it`); the flag in
/// backticks when `quoted` (not in a compiler diagnostic, whose quotes [`redact`] takes
/// for the file's).
fn too_large(p: &str, size: Option<u64>, limit: u64, before: u64, quoted: bool) -> String {
    let flag = if quoted {
        "(`weft run --max-policy-bytes`)"
    } else {
        "(weft run --max-policy-bytes)"
    };
    match (size, before) {
        (Some(size), 0) => {
            format!("{p} is {size} bytes, more than the limit of {limit} bytes {flag}")
        }
        (None, 0) => format!("{p} is more than the limit of {limit} bytes {flag}"),
        (size, before) => format!(
            "{p} is {}; with the {before} bytes read before it, more than the limit of \
             {limit} bytes for a policy and its sub-policies together {flag}",
            size.map_or(format!("more than {} bytes", limit - before), |s| format!(
                "{s} bytes"
            )),
        ),
    }
}

impl PolicyFileError {
    /// Why, without the path: what follows `cannot read FILE: ` in the compiler's
    /// diagnostic when a [`ReloadReader`] refuses a file.
    pub fn reason(&self) -> String {
        match self {
            PolicyFileError::Open { source, .. } => source.to_string(),
            PolicyFileError::NotRegular { what, .. } => format!(
                "it is {what}, not a regular file (policies are read from regular files only)"
            ),
            PolicyFileError::TooLarge {
                size,
                limit,
                before,
                ..
            } => too_large("it", *size, *limit, *before, false),
            PolicyFileError::Read { source, .. } => format!("reading it failed: {source}"),
        }
    }

    fn kind(&self) -> io::ErrorKind {
        match self {
            PolicyFileError::Open { source, .. } | PolicyFileError::Read { source, .. } => {
                source.kind()
            }
            PolicyFileError::NotRegular { .. } | PolicyFileError::TooLarge { .. } => {
                io::ErrorKind::InvalidInput
            }
        }
    }
}

/// How a reload reads its policy's files, for the [`Client`] the server hands
/// [`Prepare`]: [`ReloadReader::reader`] reads the policy and each sub-policy once, as
/// [`read_policy_file`] does (regular files only, checked before they are opened and again
/// on what was opened, with `O_NONBLOCK`: a FIFO cannot hold the open, whenever it replaced
/// the file), at most the server's `--max-policy-bytes` for all of them together (a file
/// attached at two points counts twice), and only files the request's client may read by
/// their mode bits (`may_read`, on what was opened too); [`ReloadReader::client_error`]
/// is the answer to a policy that does not compile.
#[derive(Clone)]
pub struct ReloadReader {
    reader: weft_core::policy::PolicyReader,
    /// The reader's refusals so far ([`PolicyFileError::reason`]s): weft's words.
    refusals: Arc<Mutex<Vec<String>>>,
}

impl ReloadReader {
    /// For a reload from `client`: only files its `peer` may read, at most its
    /// `max_policy_bytes` in all.
    pub fn new(client: &Client) -> ReloadReader {
        let peer = client.peer;
        let limit = client.max_policy_bytes;
        let left = Mutex::new(limit);
        let refusals = Arc::new(Mutex::new(Vec::new()));
        let refused = refusals.clone();
        let reader = weft_core::policy::PolicyReader::new(move |path: &Path| {
            let mut left = lock(&left);
            let access = |m: &std::fs::Metadata| may_read(peer.as_ref(), m, path);
            let bytes = read_within(path, *left, limit, &access).map_err(|e| {
                let reason = e.reason();
                lock(&refused).push(reason.clone());
                io::Error::new(e.kind(), reason)
            })?;
            *left -= bytes.len() as u64;
            Ok(bytes)
        });
        ReloadReader { reader, refusals }
    }

    /// The reader to compile with ([`LoadOptions::reader`]).
    ///
    /// [`LoadOptions::reader`]: weft_core::policy::LoadOptions::reader
    pub fn reader(&self) -> weft_core::policy::PolicyReader {
        self.reader.clone()
    }

    /// [`client_error`], except that this reader's refusals (`cannot read FILE: REASON`)
    /// keep their reasons whole: those are weft's words, not the file's, though a file may
    /// hold some of them (a node named `a` took the `a` of `is a FIFO`). The file's name is
    /// redacted as any other part of a message.
    pub fn client_error(&self, e: &weft_core::policy::PolicyError) -> String {
        let texts: Vec<&str> = e.sources.files.iter().map(|f| &*f.text).collect();
        let refusals = lock(&self.refusals);
        // Each reason stands aside as a mark no redaction touches (no quote, no word a
        // file can hold that is not weft's: a number), and comes back after.
        let mark = |i: usize| format!("\u{1}{i}\u{1}");
        let mut text = e.to_string();
        for (i, r) in refusals.iter().enumerate() {
            text = text.replace(&format!(": {r}"), &format!(": {}", mark(i)));
        }
        let mut out = unquote_files(&redact(&text), &texts);
        for (i, r) in refusals.iter().enumerate() {
            out = out.replace(&mark(i), r);
        }
        out
    }
}

/// A control client, as `SO_PEERCRED` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Peer {
    /// Its supplementary groups (`/proc/PID/status`), empty if unknown.
    fn groups(&self) -> Vec<u32> {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|s| {
                let l = s.lines().find(|l| l.starts_with("Groups:"))?;
                Some(
                    l["Groups:".len()..]
                        .split_whitespace()
                        .filter_map(|g| g.parse().ok())
                        .collect(),
                )
            })
            .unwrap_or_default()
    }
}

/// The credentials of the process at the other end of `s`.
fn peer_of(s: &UnixStream) -> Option<Peer> {
    let (pid, uid, gid) = weft_sys::net::peer_credentials(s)?;
    Some(Peer { pid, uid, gid })
}

/// Whether `peer` may read the file of metadata `m` by its mode bits (owner, group with
/// its supplementary groups, others); root may read anything; a client the kernel could
/// not name may read only what everyone may. (Access lists and the directories on the way
/// are not checked.)
fn may_read(
    peer: Option<&Peer>,
    m: &std::fs::Metadata,
    path: &Path,
) -> Result<(), PolicyFileError> {
    use std::os::unix::fs::MetadataExt;
    let mode = m.mode();
    let ok = match peer {
        Some(p) if p.uid == 0 => true,
        Some(p) if p.uid == m.uid() => mode & 0o400 != 0,
        Some(p) if p.gid == m.gid() || p.groups().contains(&m.gid()) => mode & 0o040 != 0,
        _ => mode & 0o004 != 0,
    };
    if ok {
        Ok(())
    } else {
        Err(PolicyFileError::Open {
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the client ({}) may not read it, so the daemon does not either",
                    peer.map_or("uid unknown".to_string(), |p| format!("uid {}", p.uid))
                ),
            ),
        })
    }
}

/// The bytes of the policy file `path`, at most `limit` of them: only a regular file is read
/// (it is checked before it is opened, then opened with `O_NONBLOCK`, so that a FIFO cannot
/// hold the open, and checked again with `fstat` on what was opened); a longer one is
/// refused after `limit + 1` bytes, whatever its length said.
pub fn read_policy_file(path: &Path, limit: u64) -> Result<Vec<u8>, PolicyFileError> {
    read_within(path, limit, limit, &|_| Ok(()))
}

/// [`read_policy_file`] with `left` of `limit` bytes left to read (the files read before
/// took the rest), and `access` asked of the file (before it is opened, and of what was
/// opened) whether it may be read.
fn read_within(
    path: &Path,
    left: u64,
    limit: u64,
    access: &dyn Fn(&std::fs::Metadata) -> Result<(), PolicyFileError>,
) -> Result<Vec<u8>, PolicyFileError> {
    let open = |source| PolicyFileError::Open {
        path: path.to_path_buf(),
        source,
    };
    let check = |m: &std::fs::Metadata| {
        access(m)?;
        if let Some(what) = weft_core::policy::file_kind(m.file_type()) {
            return Err(PolicyFileError::NotRegular {
                path: path.to_path_buf(),
                what,
            });
        }
        if m.len() > left {
            return Err(PolicyFileError::TooLarge {
                path: path.to_path_buf(),
                size: Some(m.len()),
                limit,
                before: limit - left,
            });
        }
        Ok(())
    };
    // A device or FIFO is not even opened (opening some has effects).
    check(&std::fs::metadata(path).map_err(open)?)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(open)?;
    // What was opened, which may not be what was there a moment before.
    let m = f.metadata().map_err(open)?;
    check(&m)?;
    let mut bytes = Vec::with_capacity(m.len() as usize + 1);
    (&f).take(left.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| PolicyFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > left {
        return Err(PolicyFileError::TooLarge {
            path: path.to_path_buf(),
            size: None,
            limit,
            before: limit - left,
        });
    }
    Ok(bytes)
}

/// Words of weft's policy format (keys, node types, match fields, units, rule names): what a
/// message may quote without quoting the file.
fn vocabulary() -> &'static HashSet<&'static str> {
    static WORDS: std::sync::OnceLock<HashSet<&'static str>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        let mut w: HashSet<&'static str> = HashSet::new();
        w.extend(parse::TOP_KEYS.iter().copied());
        w.extend(parse::NODE_KEYS.iter().copied());
        w.extend(Kind::ALL.map(Kind::name));
        w.extend(weft_core::classifier::FIELDS.map(|f| f.name()));
        w.extend(Rule::ALL.map(Rule::name));
        w.extend([
            "app",
            "overhead",
            "mtu",
            "count",
            "wire",
            "frame",
            "max_depth",
            "max_nodes",
            "max_shaping_depth",
            "max_match_shapes",
            "by",
            "sched",
            "packets",
            "bytes",
            "five",
            "tuple",
            "flow",
            "none",
            "fair",
            "bit",
            "kbit",
            "mbit",
            "gbit",
            "tbit",
            "kibit",
            "mibit",
            "gibit",
            "kb",
            "kib",
            "mb",
            "mib",
            "gb",
            "gib",
        ]);
        w
    })
}

/// Whether a quoted fragment of a message is weft's own words (kept) rather than something
/// from the file (replaced by `…`): short ASCII, every run of letters in it a word of
/// [`vocabulary`] (of two letters or more), no run of more than three digits.
fn own_words(fragment: &str) -> bool {
    fragment.len() <= 64
        && fragment.is_ascii()
        && fragment
            .split(|c: char| !(c.is_ascii_alphabetic() || c == '_'))
            .filter(|w| !w.is_empty())
            .all(|w| w.len() > 1 && vocabulary().contains(w))
        && fragment
            .split(|c: char| !c.is_ascii_digit())
            .all(|digits| digits.len() <= 3)
}

/// A policy that does not compile, as a control client that may not read its files is told:
/// [`redact`]ed, then [`unquote_files`] with every file the policy was composed from.
pub fn client_error(e: &weft_core::policy::PolicyError) -> String {
    let texts: Vec<&str> = e.sources.files.iter().map(|f| &*f.text).collect();
    unquote_files(&redact(&e.to_string()), &texts)
}

/// Whether `c` belongs to a word for [`unquote_files`]: letters, digits, `_`, and every
/// character outside ASCII.
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || !c.is_ascii()
}

/// [`redact`]'s second pass for a reload whose files' texts are known: a word of `answer`'s
/// messages (after each line's `error[rule]: `) that one of `texts` holds as a whole word
/// becomes `…`, unless it is weft's own (a word of the policy format, a number of at most
/// three digits). Quotes alone cannot say where a file's text ends when it holds quote
/// characters itself: the value `10.0`x`.0.0/8`, quoted in backticks by the compiler, left
/// `x` between two quoted fragments. Cost: one pass over the texts (a set of their words)
/// and one over the answer.
pub fn unquote_files(answer: &str, texts: &[&str]) -> String {
    let words: HashSet<&str> = texts
        .iter()
        .flat_map(|t| t.split(|c: char| !word_char(c)))
        .filter(|w| !w.is_empty())
        .collect();
    let unquote = |message: &str| {
        let mut out = String::with_capacity(message.len());
        let mut rest = message;
        while let Some(i) = rest.find(word_char) {
            out.push_str(&rest[..i]);
            let w = &rest[i..];
            let end = w.find(|c: char| !word_char(c)).unwrap_or(w.len());
            let (word, after) = w.split_at(end);
            out.push_str(if words.contains(word) && !own_words(word) {
                "…"
            } else {
                word
            });
            rest = after;
        }
        out.push_str(rest);
        out
    };
    answer
        .lines()
        .map(|line| match line.find("]: ") {
            Some(i) => format!("{}{}", &line[..i + 3], unquote(&line[i + 3..])),
            None => unquote(line),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A policy error (the compiler's diagnostic lines) fit for a control client, who may not be
/// allowed to read the file: each line keeps its `file:line:col: error[rule]:` and message,
/// loses the node and the hint, and what the message quotes from the file (between backticks
/// or double quotes, node names in a chain `a → b`, a byte's value) becomes `…`.
pub fn redact(error: &str) -> String {
    error
        .lines()
        .map(redact_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn redact_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    // Quoted fragments: `…` and "…" (with \" inside, as `{:?}` writes them).
    while let Some(i) = rest.find(['`', '"']) {
        let q = rest.as_bytes()[i] as char;
        out.push_str(&rest[..=i]);
        let after = &rest[i + 1..];
        let mut end = None;
        let mut escaped = false;
        for (j, c) in after.char_indices() {
            if q == '"' && c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            if c == q && !escaped {
                end = Some(j);
                break;
            }
            escaped = false;
        }
        let Some(j) = end else {
            // An unmatched quote: what follows may be the file's; it goes.
            out.push('…');
            rest = "";
            break;
        };
        let inner = &after[..j];
        out.push_str(if own_words(inner) { inner } else { "…" });
        out.push(q);
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    // Chains of names: `parents form a cycle: a → b → a`.
    let words: Vec<&str> = out.split(' ').collect();
    let mut chained = vec![false; words.len()];
    for (i, w) in words.iter().enumerate() {
        if *w == "→" {
            chained[i.saturating_sub(1)] = true;
            if i + 1 < words.len() {
                chained[i + 1] = true;
            }
        }
    }
    let mut out: String = words
        .iter()
        .zip(&chained)
        .map(|(w, &c)| {
            if !c || own_words(w.trim_end_matches([',', ';', ')'])) {
                (*w).to_string()
            } else {
                let tail = &w[w.trim_end_matches([',', ';', ')']).len()..];
                format!("…{tail}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    // A byte of a file that is not UTF-8.
    while let Some(i) = out.find("byte 0x") {
        let end = (i + "byte 0x".len() + 2).min(out.len());
        if !out.is_char_boundary(end) {
            break;
        }
        out.replace_range(i..end, "a byte");
    }
    // The node and the hint: `… (node `x`); help: …` (their quotes are redacted already,
    // so neither holds a `; help: ` of the file's).
    if let Some(i) = out.find("; help: ") {
        out.truncate(i);
    }
    if let Some(i) = out.rfind(" (node `") {
        if out.ends_with("`)") {
            out.truncate(i);
        }
    }
    out
}

/// The Prometheus text scrapes are answered with, and when it was asked of the loop.
#[derive(Default)]
struct MetricsCache {
    state: Mutex<Cached>,
    /// Signalled when a question to the loop is answered.
    answered: Condvar,
}

#[derive(Default)]
struct Cached {
    latest: Option<(Instant, Arc<str>)>,
    /// A scrape is asking the loop now.
    asking: bool,
}

/// The metrics text: the latest stats if they are younger than [`METRICS_MAX_AGE`], else
/// the loop's answer now (one scrape asks; those that come meanwhile wait for its answer).
fn scrape<C>(sh: &Shared<C>) -> Result<Arc<str>, String> {
    let c = &sh.metrics;
    let start = Instant::now();
    let mut st = lock(&c.state);
    loop {
        if let Some((at, text)) = &st.latest {
            if at.elapsed() < METRICS_MAX_AGE {
                return Ok(text.clone());
            }
        }
        if !st.asking {
            st.asking = true;
            drop(st);
            /// Lets the others ask, however the question ends.
            struct Asking<'a>(&'a MetricsCache);
            impl Drop for Asking<'_> {
                fn drop(&mut self) {
                    lock(&self.0.state).asking = false;
                    self.0.answered.notify_all();
                }
            }
            let asking = Asking(c);
            let asked = (sh.prepare)(
                Request::Stats,
                &Client {
                    peer: None,
                    max_policy_bytes: sh.max_policy_bytes,
                },
            )
            .map(|cmd| ask_loop(sh, cmd));
            let text = match asked.unwrap_or_else(|refused| refused) {
                Reply::Stats(stats) => {
                    let text: Arc<str> = Arc::from(prometheus(&stats));
                    lock(&c.state).latest = Some((Instant::now(), text.clone()));
                    Ok(text)
                }
                Reply::Refused(e) => Err(e),
                _ => Err("the dataplane answered stats with something else".into()),
            };
            drop(asking);
            return text;
        }
        let left = ANSWER_WAIT.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err("the dataplane did not answer".into());
        }
        st = c
            .answered
            .wait_timeout(st, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Reads from `r` until `done` says the bytes so far are complete, at most `max` bytes,
/// within [`READ_DEADLINE`] of now (`set_timeout` sets the socket's read timeout).
fn read_until(
    mut r: impl Read,
    set_timeout: impl Fn(Duration) -> io::Result<()>,
    max: usize,
    done: impl Fn(&[u8]) -> bool,
) -> io::Result<Vec<u8>> {
    let deadline = Instant::now() + READ_DEADLINE;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !done(&buf) && buf.len() < max {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request too slow"));
        }
        set_timeout(left)?;
        let n = r.read(&mut chunk[..(max - buf.len()).min(2048)])?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(buf)
}

/// Writes all of `parts` to `w` within [`WRITE_DEADLINE`] of now (`set_timeout` sets the
/// socket's write timeout): a client that takes its answer slowly is cut off.
fn write_within(
    mut w: impl Write,
    set_timeout: impl Fn(Duration) -> io::Result<()>,
    parts: &[&[u8]],
) -> io::Result<()> {
    let deadline = Instant::now() + WRITE_DEADLINE;
    for part in parts {
        let mut part: &[u8] = part;
        while !part.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "answer taken too slowly",
                ));
            }
            set_timeout(left)?;
            match w.write(part) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => part = &part[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    w.flush()
}

/// A control client's request: the first line of what it sent, read once into a
/// [`Request`] ([`Request::from_json`]). A line that is not a request gets the refusal to
/// answer, naming the command and the field at fault. Who sent it is not part of it: the
/// server hands the kernel's word beside it ([`Client`]).
pub fn request_of(buf: &[u8]) -> Result<Request, Reply> {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    Request::from_json(line).map_err(|e| Reply::Refused(e.to_string()))
}

fn serve_unix<C: Send + 'static>(s: UnixStream, sh: &Shared<C>) -> io::Result<()> {
    let buf = read_until(
        &s,
        |t| s.set_read_timeout(Some(t)),
        1 << 20,
        |b| b.contains(&b'\n'),
    )?;
    let client = Client {
        peer: peer_of(&s),
        max_policy_bytes: sh.max_policy_bytes,
    };
    let answer = match request_of(&buf) {
        Ok(req) => ask(sh, req, &client),
        Err(answer) => answer,
    };
    // Cannot fail: every map's keys are strings.
    let text = serde_json::to_string(&answer).unwrap_or_default() + "\n";
    write_within(&s, |t| s.set_write_timeout(Some(t)), &[text.as_bytes()])
}

fn serve_metrics<C>(s: TcpStream, sh: &Shared<C>) -> io::Result<()> {
    // The request itself does not matter (every path answers the metrics): read its head,
    // or what arrives within the deadline, so that the answer does not race it.
    let _ = read_until(
        &s,
        |t| s.set_read_timeout(Some(t)),
        2048,
        |b| b.windows(4).any(|w| w == b"\r\n\r\n"),
    );
    let (status, body) = match scrape(sh) {
        Ok(text) => ("200 OK", text),
        Err(e) => ("503 Service Unavailable", Arc::from(format!("# {e}\n"))),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    write_within(
        &s,
        |t| s.set_write_timeout(Some(t)),
        &[head.as_bytes(), body.as_bytes()],
    )
}

/// A label value in Prometheus's text format: backslash, double quote and line feed
/// escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A gauge's value as the text format gets it: JSON's form of the number (`5.0`, `1e16`).
fn gauge(x: f64) -> String {
    serde_json::to_string(&x).unwrap_or_default()
}

/// Milliseconds as seconds in decimal (`1234` as `1.234`): exact, where a float would
/// round a large count.
fn millis_as_seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// What a series is, for its family's `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetricKind {
    /// Counts up from the daemon's start: its name ends in `_total`.
    Counter,
    /// A value now (a level, a rate, a setting).
    Gauge,
}

use MetricKind::{Counter, Gauge};

/// One number of a section of the stats, exported as `PREFIX_NAME` (`_total` added for a
/// counter), with its family's HELP text.
type Sample = (&'static str, MetricKind, &'static str, u64);

/// The [`Sample`]s of numbers of `$section`, each named as its field: `NAME: KIND, HELP;`.
macro_rules! samples {
    ($section:ident; $($name:ident: $kind:ident, $help:expr;)*) => {
        [$((stringify!($name), $kind, $help, $section.$name)),*]
    };
}

/// The dataplane's numbers, exported as `weft_dataplane_NAME` (every number of
/// [`DataplaneStats`] but two: its one flag, `uplink_up`, is [`fam::UPLINK_UP`], and
/// `uplink_down_ms`, in seconds, is [`fam::UPLINK_DOWN_SECONDS`]).
fn dataplane_samples(d: &DataplaneStats) -> [Sample; 29] {
    samples! { d;
        parse_errors: Counter, "Ingress frames dropped: they did not parse.";
        oversize: Counter, "Ingress frames dropped: longer than a pool buffer (2048 bytes).";
        no_buffer: Counter, "Ingress frames dropped for want of a frame buffer.";
        ring_full: Counter, "Ingress frames dropped: their flow queue's ring was full.";
        no_queue: Counter, "Ingress frames of new flows dropped for want of a flow queue.";
        unclassified: Counter, "Ingress frames dropped: no leaf of the policy matches them.";
        engine_drops: Counter, "Packets the engine dropped by the policy's limits.";
        tx_frames: Counter, "Frames sent on the uplink.";
        tx_bytes: Counter, "Bytes sent on the uplink (frame bytes).";
        tx_errors: Counter, "Frames the uplink refused to send.";
        reverse_frames: Counter, "Return path: frames read from the uplink.";
        reverse_flooded: Counter, "Return path: group frames copied to every tenant.";
        reverse_unknown: Counter, "Return path: unicast frames no tenant owns, dropped.";
        reverse_dropped: Counter, "Return path: frames dropped for want of a buffer.";
        source_rejected: Counter, "Ingress frames dropped for their source MAC or IP address.";
        reverse_queued: Gauge, "Return path: frames waiting to be sent to their tenants.";
        reloads: Counter, "Policy reloads done.";
        queues_live: Gauge, "Flow queues open.";
        queues_reclaimed: Counter, "Flow queues closed after their flow went idle.";
        class_moves: Counter, "Flows moved to another class.";
        uplink_downs: Counter, "Times the uplink's link went down.";
        flows_closed: Counter, "Flows the engine forgot once no queue used them.";
        engine_flows: Gauge, "Flows open in the engine.";
        backlog: Gauge, "Packets in the engines (the running one and those draining).";
        buffers_free: Gauge, "Frame buffers free.";
        reserved_queues: Gauge, "Flow queues reserved for each tenant.";
        reserved_buffers: Gauge, "Frame buffers reserved for each tenant.";
        ctl_dropped: Counter, "Control connections closed unanswered (every serving thread \
            busy, the queue full).";
        metrics_dropped: Counter, "Metrics connections closed unanswered (every serving \
            thread busy, the queue full).";
    }
}

/// The interface's counters, exported as `weft_iface_NAME_total` (its refusals by reason
/// are `weft_iface_rejects_total{reason=...}`).
fn iface_samples(i: &crate::iface::Counters) -> [Sample; 7] {
    samples! { i;
        doorbell_writes: Counter, "Doorbell writes (batches) of the drivers, accepted or not.";
        doorbell_entries: Counter, "Doorbell entries processed by the NIC.";
        posted: Counter, "Descriptors the drivers posted.";
        fetched: Counter, "Descriptors fetched by the NIC.";
        sent: Counter, "Descriptors completed as sent.";
        dropped: Counter, "Descriptors completed as dropped or aborted.";
        meta_updates: Counter, "Inline metadata updates accepted.";
    }
}

/// A port's numbers, exported as `weft_port_NAME{iface=...}` (AF_XDP's kernel statistics
/// are [`xdp_kernel_samples`]). A name both backends have has the same help.
fn port_samples(p: &PortStats) -> Vec<Sample> {
    const TX_FRAMES: &str = "Frames handed to the kernel to send.";
    const TX_OVERSIZE: &str = "Frames refused as longer than the port can send.";
    const TX_RING_FULL: &str = "Sends refused with the transmit ring full.";
    const KICKS: &str = "Transmit kicks that went through.";
    const KICK_AGAIN: &str = "Transmit kicks the kernel refused for now.";
    const KICK_ERRORS: &str = "Transmit kicks that failed otherwise.";
    match p {
        PortStats::AfPacket(p) => samples! { p;
            rx_truncated: Counter, "Frames longer than a receive slot, read cut.";
            rx_kernel_seen: Counter, "Frames the kernel offered the receive ring, those it \
                dropped included.";
            rx_kernel_drops: Counter, "Frames the kernel dropped with the receive ring full.";
            rx_csum_completed: Counter, "Frames whose TCP or UDP checksum the port completed.";
            rx_csum_dropped: Counter, "Frames dropped as their checksum could not be completed.";
            tx_frames: Counter, TX_FRAMES;
            tx_oversize: Counter, TX_OVERSIZE;
            tx_ring_full: Counter, TX_RING_FULL;
            kicks: Counter, KICKS;
            kick_again: Counter, KICK_AGAIN;
            kick_errors: Counter, KICK_ERRORS;
            tx_kick_short: Counter, "Kicks that sent fewer bytes than were handed over.";
            tx_skipped_bytes: Counter, "Bytes in the slots short kicks skipped.";
        }
        .to_vec(),
        PortStats::AfXdp(p) => samples! { p;
            queues: Gauge, "Receive queues (an AF_XDP socket each).";
            rx_frames: Counter, "Frames received.";
            rx_bytes: Counter, "Bytes received (frame bytes).";
            rx_bad_desc: Counter, "Receive descriptors skipped as naming no chunk the kernel \
                holds.";
            bad_index: Counter, "Ring indices skipped as more than a ring ahead.";
            tx_frames: Counter, TX_FRAMES;
            tx_completed: Counter, "Transmitted frames the kernel completed.";
            tx_no_frame: Counter, "Sends refused for want of a free transmit chunk.";
            tx_ring_full: Counter, TX_RING_FULL;
            tx_oversize: Counter, TX_OVERSIZE;
            tx_bad_completion: Counter, "Completions skipped for a chunk not in flight.";
            kicks: Counter, KICKS;
            kick_again: Counter, KICK_AGAIN;
            kick_errors: Counter, KICK_ERRORS;
        }
        .to_vec(),
    }
}

/// An AF_XDP port's kernel statistics (its `kernel` section), exported as
/// `weft_port_kernel_NAME_total{iface=...}`: counters, in `XDP_STATISTICS` order.
fn xdp_kernel_samples(k: &XdpKernelStats) -> [Sample; 6] {
    samples! { k;
        rx_dropped: Counter, "Frames the kernel dropped for other reasons than the rest.";
        rx_invalid_descs: Counter, "Frames the kernel dropped for invalid fill-ring descriptors.";
        tx_invalid_descs: Counter, "Transmit descriptors the kernel found invalid.";
        rx_ring_full: Counter, "Frames the kernel dropped with the receive ring full.";
        rx_fill_ring_empty_descs: Counter, "Times the kernel found the fill ring empty.";
        tx_ring_empty_descs: Counter, "Times the kernel found the transmit ring empty.";
    }
}

/// The exposition being written: each family's `# HELP` and `# TYPE` lines, then all of its
/// series together (the text format wants a family's lines in one group), families in the
/// order they were first given a sample; a family without a sample is not written.
#[derive(Default)]
struct Exposition {
    families: Vec<(String, MetricKind, &'static str, String)>,
    index: rustc_hash::FxHashMap<String, usize>,
}

impl Exposition {
    /// Adds the series `name{labels}` (`labels` escaped, without braces; empty for none)
    /// with `value` to family `name`.
    fn add(
        &mut self,
        (name, kind, help): (&str, MetricKind, &'static str),
        labels: &str,
        value: impl std::fmt::Display,
    ) {
        debug_assert_eq!(kind == Counter, name.ends_with("_total"), "{name}");
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.families
                    .push((name.to_string(), kind, help, String::new()));
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        let lines = &mut self.families[i].3;
        use std::fmt::Write as _;
        let _ = if labels.is_empty() {
            writeln!(lines, "{name} {value}")
        } else {
            writeln!(lines, "{name}{{{labels}}} {value}")
        };
    }

    /// [`Exposition::add`] for a section's number: `PREFIX_NAME`, `_total` added for a
    /// counter.
    fn sample(&mut self, prefix: &str, (k, kind, help, v): Sample, labels: &str) {
        let name = match kind {
            Counter => format!("{prefix}_{k}_total"),
            Gauge => format!("{prefix}_{k}"),
        };
        self.add((&name, kind, help), labels, v);
    }

    fn text(self) -> String {
        let mut o = String::new();
        for (name, kind, help, lines) in self.families {
            let kind = match kind {
                Counter => "counter",
                Gauge => "gauge",
            };
            o += &format!("# HELP {name} {}\n# TYPE {name} {kind}\n", help_text(help));
            o += &lines;
        }
        o
    }
}

/// A HELP text in Prometheus's text format: backslash and line feed escaped.
fn help_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A family of series: its name (a counter's ends in `_total`), kind and HELP text.
type Family = (&'static str, MetricKind, &'static str);

/// The families of series that are not a section's numbers named as its fields.
mod fam {
    use super::Family;
    use super::MetricKind::{Counter, Gauge};

    pub const NODE_PACKETS: Family = (
        "weft_node_packets_total",
        Counter,
        "Packets sent through the node.",
    );
    pub const NODE_BYTES: Family = (
        "weft_node_bytes_total",
        Counter,
        "Bytes sent through the node (frame bytes).",
    );
    pub const NODE_RATE_BPS: Family = (
        "weft_node_rate_bps",
        Gauge,
        "Bits per second sent through the node over the last second.",
    );
    pub const NODE_DROPS: Family = (
        "weft_node_drops_total",
        Counter,
        "Packets the engine dropped at the node, by reason.",
    );
    pub const SHAPER_PACKETS: Family = (
        "weft_shaper_packets_total",
        Counter,
        "Packets sent through the shaping class.",
    );
    pub const SHAPER_BYTES: Family = (
        "weft_shaper_bytes_total",
        Counter,
        "Bytes sent through the shaping class (frame bytes).",
    );
    pub const SHAPER_RATE_BPS: Family = (
        "weft_shaper_rate_bps",
        Gauge,
        "Bits per second sent through the shaping class over the last second.",
    );
    pub const SHAPER_LIMIT_BPS: Family = (
        "weft_shaper_limit_bps",
        Gauge,
        "The shaping class's rate limit, bits per second.",
    );
    pub const IFACE_REJECTS: Family = (
        "weft_iface_rejects_total",
        Counter,
        "Posts, doorbell entries and completions of every driver refused, by reason.",
    );
    pub const TENANT_RX_FRAMES: Family = (
        "weft_tenant_rx_frames_total",
        Counter,
        "Frames read from the tenant's port.",
    );
    pub const TENANT_RX_BYTES: Family = (
        "weft_tenant_rx_bytes_total",
        Counter,
        "Bytes read from the tenant's port (frame bytes).",
    );
    pub const TENANT_DROPS: Family = (
        "weft_tenant_drops_total",
        Counter,
        "The tenant's frames dropped, by reason.",
    );
    pub const TENANT_REJECTS: Family = (
        "weft_tenant_rejects_total",
        Counter,
        "Posts, doorbell entries and completions of the tenant's driver refused, by reason.",
    );
    pub const TENANT_MACS: Family = (
        "weft_tenant_macs",
        Gauge,
        "Source MAC addresses the tenant owns.",
    );
    pub const TENANT_QUEUES: Family =
        ("weft_tenant_queues", Gauge, "Flow queues the tenant holds.");
    pub const UPLINK_UP: Family = (
        "weft_dataplane_uplink_up",
        Gauge,
        "1 while the uplink's link is up, 0 while it is down.",
    );
    pub const UPLINK_DOWN_SECONDS: Family = (
        "weft_dataplane_uplink_down_seconds_total",
        Counter,
        "Seconds the uplink's link was down (the current period included).",
    );
    pub const TENANT_BUFFERS: Family = (
        "weft_tenant_buffers",
        Gauge,
        "Frame buffers the tenant holds.",
    );
}

/// The stats answer in Prometheus text format (0.0.4): every family with its `# HELP` and
/// `# TYPE` lines and its series together, every counter's name ending in `_total`. The
/// labels are the running policy's node and shaping-class names, the `--tenant` names and
/// interfaces the daemon was started with, and reasons from fixed lists: nothing a tenant
/// sends adds a series.
pub fn prometheus(stats: &Stats) -> String {
    let mut x = Exposition::default();
    for n in &stats.nodes {
        let l = format!("node=\"{}\"", label(&n.name));
        x.add(fam::NODE_PACKETS, &l, n.packets);
        x.add(fam::NODE_BYTES, &l, n.bytes);
        x.add(fam::NODE_RATE_BPS, &l, gauge(n.rate_bps));
        for (r, v) in DropReason::ALL.iter().zip(n.drops) {
            let l = format!("{l},reason=\"{}\"", label(r.name()));
            x.add(fam::NODE_DROPS, &l, v);
        }
    }
    for c in &stats.shapers {
        let l = format!("shaper=\"{}\"", label(&c.name));
        x.add(fam::SHAPER_PACKETS, &l, c.packets);
        x.add(fam::SHAPER_BYTES, &l, c.bytes);
        x.add(fam::SHAPER_RATE_BPS, &l, gauge(c.rate_bps));
        x.add(fam::SHAPER_LIMIT_BPS, &l, c.limit_bps);
    }
    for s in dataplane_samples(&stats.dataplane) {
        x.sample("weft_dataplane", s, "");
    }
    x.add(fam::UPLINK_UP, "", u64::from(stats.dataplane.uplink_up));
    x.add(
        fam::UPLINK_DOWN_SECONDS,
        "",
        millis_as_seconds(stats.dataplane.uplink_down_ms),
    );
    for s in iface_samples(&stats.iface) {
        x.sample("weft_iface", s, "");
    }
    // The interface's refusals of every driver, by reason (every reason).
    for (r, v) in Reject::ALL.iter().zip(stats.iface.rejects) {
        let l = format!("reason=\"{}\"", label(r.name()));
        x.add(fam::IFACE_REJECTS, &l, v);
    }
    // Per tenant: frames received, drops and refusals by reason (every reason), what it
    // holds.
    for t in &stats.tenants {
        let l = format!(
            "tenant=\"{}\",iface=\"{}\"",
            label(&t.name),
            label(&t.iface)
        );
        x.add(fam::TENANT_RX_FRAMES, &l, t.rx_frames);
        x.add(fam::TENANT_RX_BYTES, &l, t.rx_bytes);
        for (r, v) in TENANT_DROPS.iter().zip(t.drops) {
            let l = format!("{l},reason=\"{}\"", label(r));
            x.add(fam::TENANT_DROPS, &l, v);
        }
        for (r, v) in Reject::ALL.iter().zip(t.rejects) {
            let l = format!("{l},reason=\"{}\"", label(r.name()));
            x.add(fam::TENANT_REJECTS, &l, v);
        }
        x.add(fam::TENANT_MACS, &l, t.macs);
        x.add(fam::TENANT_QUEUES, &l, t.queues);
        x.add(fam::TENANT_BUFFERS, &l, t.buffers);
    }
    // Per port: every number the port reports (receive ring, transmit ring, kernel drops),
    // and an AF_XDP port's kernel statistics of its sockets.
    for p in &stats.ports {
        let l = format!("iface=\"{}\"", label(p.iface()));
        for s in port_samples(p) {
            x.sample("weft_port", s, &l);
        }
        if let PortStats::AfXdp(p) = p {
            for s in xdp_kernel_samples(&p.kernel) {
                x.sample("weft_port_kernel", s, &l);
            }
        }
    }
    x.text()
}

/// Why connecting to the control socket `path` failed, for a person: nothing there, a path
/// that is not a socket (`InvalidInput`: the wrong path was given), or a socket nobody
/// listens on any more (left by a `weft run` that was killed).
fn connect_error(path: &Path, e: io::Error) -> io::Error {
    let p = path.display();
    match std::fs::metadata(path) {
        Ok(m) if !m.file_type().is_socket() => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{p} is {}, not a control socket (give --socket the path `weft run --ctl` was \
                 given)",
                if m.is_dir() { "a directory" } else { "a file" }
            ),
        ),
        Ok(_) if e.kind() == io::ErrorKind::ConnectionRefused => io::Error::new(
            e.kind(),
            format!(
                "nothing listens on {p}: the `weft run` that made it is gone (killed?); the \
                 next `weft run --ctl {p}` replaces it"
            ),
        ),
        _ => io::Error::new(
            e.kind(),
            format!("cannot connect to {p}: {e} (is `weft run` running?)"),
        ),
    }
}

/// The client side: sends one request and returns the answer, read as the reply to `req`
/// ([`Reply::read`]; a refusal is [`Reply::Refused`]). An answer that is not JSON, or does
/// not read as that reply (a field missing or of another type: [`ReplyError`], naming
/// it), is `InvalidData`; a reload of a path that is not UTF-8 (JSON cannot carry it) is
/// `InvalidInput`.
pub fn request(path: &Path, req: &Request) -> io::Result<Reply> {
    request_within(path, req, ANSWER_DEADLINE, MAX_ANSWER_BYTES)
}

/// [`request`] with its deadline and size limit given.
fn request_within(
    path: &Path,
    req: &Request,
    answer_deadline: Duration,
    max_answer: usize,
) -> io::Result<Reply> {
    let line = serde_json::to_string(req).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot send {}: {e}", req.cmd()),
        )
    })?;
    let mut s = UnixStream::connect(path).map_err(|e| connect_error(path, e))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    // Closed unanswered (the server had MAX_CONNECTIONS open and CTL_QUEUE waiting): the
    // client sees a broken pipe, a reset or an empty answer, depending on timing; all three
    // say the same.
    let closed = |e: io::Error| {
        match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof => {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{} closed the connection without an answer (more than {} control connections open?)",
                    path.display(),
                    MAX_CONNECTIONS + CTL_QUEUE
                ),
            )
        }
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no whole answer from {} within {} s (is it a weft control socket?)",
                path.display(),
                answer_deadline.as_secs_f64()
            ),
        ),
        _ => e,
    }
    };
    writeln!(s, "{line}").map_err(closed)?;
    // One line, within the deadline and the size limit in all.
    let deadline = Instant::now() + answer_deadline;
    let mut line = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    while !line.contains(&b'\n') {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(closed(io::ErrorKind::TimedOut.into()));
        }
        s.set_read_timeout(Some(left))?;
        let n = match (&s).read(&mut chunk) {
            Ok(0) if line.is_empty() => return Err(closed(io::ErrorKind::UnexpectedEof.into())),
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(closed(e)),
        };
        line.extend_from_slice(&chunk[..n]);
        if line.len() > max_answer {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} answered more than {max_answer} bytes without ending its line \
                     (is it a weft control socket?)",
                    path.display()
                ),
            ));
        }
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let v: Value = serde_json::from_slice(&line[..end]).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} did not answer like a weft control socket ({e})",
                path.display()
            ),
        )
    })?;
    Reply::read(req, &v).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// The default control socket path.
pub const DEFAULT_SOCKET: &str = "/run/weft/weft.sock";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{AfPacketPort, AfXdpPort, NodeStats, ShaperStats, TenantStats};

    /// The metrics queue fits the descriptor limit with the control socket's needs and the
    /// reserve to spare, and is the whole queue where the limit holds it.
    #[test]
    fn the_metrics_queue_leaves_the_control_socket_its_descriptors() {
        let others = RESERVED_FDS as usize + MAX_CONNECTIONS + CTL_QUEUE + MAX_METRICS_CONNECTIONS;
        for limit in [
            0u64,
            64,
            256,
            368,
            369,
            1024,
            1392,
            1393,
            4096,
            1 << 20,
            u64::MAX,
        ] {
            let q = metrics_queue_for(limit);
            assert!(q <= METRICS_QUEUE, "{limit}: {q}");
            if limit != u64::MAX {
                assert!(
                    (q + others) as u64 <= limit.max(others as u64),
                    "{limit}: {q}"
                );
            }
            let whole = limit >= (others + METRICS_QUEUE) as u64;
            assert_eq!(q == METRICS_QUEUE, whole, "{limit}: {q}");
        }
        assert_eq!(metrics_queue_for(1024), 1024 - others);
        assert_eq!(metrics_queue_for(100), 0);
    }

    fn nothing_to_prepare() -> Prepare {
        Arc::new(|req, _| Ok(req))
    }

    fn socket(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("weft-ctl-{name}-{}.sock", std::process::id()))
    }

    /// Stats whose generation is `n` (what [`poll_until`] counts in it).
    fn counted(n: u64) -> Reply {
        Reply::Stats(Box::new(Stats {
            ok: true,
            generation: n,
            ..Stats::default()
        }))
    }

    /// The count [`counted`] put in a stats reply, if it is one.
    fn count_of(r: &Reply) -> Option<u64> {
        match r {
            Reply::Stats(s) => Some(s.generation),
            _ => None,
        }
    }

    /// Polls `server` as the dataplane does (answering `stats` with a count of the requests
    /// answered so far as its generation) until `done`.
    fn poll_until(server: &Server, done: impl Fn() -> bool) {
        let mut answered = 0u64;
        let start = Instant::now();
        while !done() {
            server.poll(|req| {
                answered += 1;
                match req {
                    Request::Stats => counted(answered),
                    _ => Reply::Done,
                }
            });
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no answer in 60 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A client that connects and sends its request one byte at a time, slower than the
    /// old per-read timeout, held the whole loop: `poll` read that connection until the
    /// line was complete. Now a second client is answered while the first still drips, and
    /// the drip is cut at the read deadline.
    #[test]
    fn a_dripping_client_holds_up_neither_the_loop_nor_other_clients() {
        let path = socket("drip");
        let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
        let dripping = Arc::new(AtomicBool::new(true));
        let drip = {
            let (path, dripping) = (path.clone(), dripping.clone());
            let mut a = UnixStream::connect(&path).unwrap();
            std::thread::spawn(move || {
                // Three seconds of `{"cmd":"stats"` without its end, a byte every 50 ms.
                let text =
                    br#"{"cmd":"stats"                                                      "#;
                for b in text.iter().take(60) {
                    if a.write_all(&[*b]).is_err() {
                        break; // the server cut it off
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                dripping.store(false, Ordering::SeqCst);
                let mut rest = String::new();
                let _ = a.read_to_string(&mut rest);
                drop(path);
                rest
            })
        };
        let other = {
            let path = path.clone();
            let dripping = dripping.clone();
            std::thread::spawn(move || {
                let answer = request(&path, &Request::Stats).unwrap();
                (answer, dripping.load(Ordering::SeqCst))
            })
        };
        poll_until(&server, || other.is_finished());
        let (answer, still_dripping) = other.join().unwrap();
        assert!(count_of(&answer).is_some(), "{answer:?}");
        assert!(still_dripping, "answered only after the slow client ended");
        poll_until(&server, || drip.is_finished());
        // The slow client got no answer (its request never ended within the deadline).
        assert_eq!(drip.join().unwrap(), "");
        drop(server);
        assert!(!path.exists(), "socket left behind");
    }

    /// The prepare hook runs on the connection's thread: a request it answers never reaches
    /// the loop (answered here without a single `poll`), and what it prepares reaches the
    /// loop's handler with its request.
    #[test]
    fn prepared_work_is_done_off_the_loop() {
        let path = socket("prep");
        let prepare: Prepare<Option<u64>> = Arc::new(|req: Request, _: &Client| match req {
            Request::Stop => Err(Reply::refused("refused before the loop")),
            Request::Stats => Ok(Some(42)),
            _ => Ok(None),
        });
        let server = Server::bind(Some(&path), None, prepare).unwrap();
        let refused = request(&path, &Request::Stop).unwrap();
        assert_eq!(refused.error(), Some("refused before the loop"));
        let carried = {
            let path = path.clone();
            std::thread::spawn(move || request(&path, &Request::Stats).unwrap())
        };
        let start = Instant::now();
        while !carried.is_finished() {
            server.poll(|n| counted(n.unwrap_or_default()));
            assert!(start.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(count_of(&carried.join().unwrap()), Some(42));
    }

    /// A reload gave its place among the [`RELOADS_AT_ONCE`] back only after its answer was
    /// on its way, so a client reloading back to back could find its own finished reloads
    /// still holding every place, and be refused. The place is free before the answer goes.
    #[test]
    fn a_reload_gives_its_place_back_before_it_answers() {
        let reloads = Arc::new(AtomicUsize::new(1));
        let mut answered = None;
        in_place(
            Place(reloads.clone()),
            || "compiled",
            |r| answered = Some((r, reloads.load(Ordering::SeqCst))),
        );
        assert_eq!(
            answered,
            Some(("compiled", 0)),
            "(answer, places held then)"
        );
        // However the work ends.
        reloads.fetch_add(1, Ordering::SeqCst);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            in_place(Place(reloads.clone()), || panic!("compiler bug"), |()| {})
        }));
        assert!(r.is_err());
        assert_eq!(reloads.load(Ordering::SeqCst), 0);
    }

    /// Shared state for driving a [`Pool`] directly.
    fn shared() -> Shared<Request> {
        Shared {
            to_loop: mpsc::channel().0,
            prepare: nothing_to_prepare(),
            stop: Arc::new(AtomicBool::new(false)),
            max_policy_bytes: DEFAULT_MAX_POLICY_BYTES,
            reloads: Arc::new(AtomicUsize::new(0)),
            metrics: Arc::new(MetricsCache::default()),
        }
    }

    /// Connections closed unanswered (every thread busy, the queue full) went uncounted:
    /// nothing told an operator that clients were being turned away. A full pool counts
    /// each one it closes, and only those.
    #[test]
    fn a_full_pool_counts_what_it_closes_unanswered() {
        // A "connection" is served until its sender says so (or is dropped).
        fn serve(c: Receiver<()>, _: &Shared<Request>) -> io::Result<()> {
            let _ = c.recv();
            Ok(())
        }
        let dropped = Dropped::new("test");
        let pool = Pool::new("weft-test-conn", 2, 3, serve, dropped.clone());
        let sh = shared();
        let senders: Vec<Sender<()>> = (0..9)
            .map(|_| {
                let (tx, rx) = mpsc::channel();
                pool.submit(rx, &sh);
                tx
            })
            .collect();
        // Two served, three waiting, four closed unanswered.
        assert_eq!(dropped.count(), 4);
        let closed = senders.iter().filter(|tx| tx.send(()).is_err()).count();
        assert_eq!(closed, 4, "the connections counted are the ones closed");
        // The served and waiting ones end; the pool takes new ones without counting them.
        let start = Instant::now();
        while lock(&pool.state).running > 0 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the pool never drained"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let (tx, rx) = mpsc::channel();
        pool.submit(rx, &sh);
        tx.send(()).unwrap();
        assert_eq!(dropped.count(), 4);
    }

    /// The log line about closed connections comes at most once a [`DROPPED_LOG_EVERY`],
    /// with the count since the last line and in all (times given, not waited for).
    #[test]
    fn closed_connections_are_logged_at_most_once_a_second() {
        let d = Dropped::new("test");
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(d.counted(at(0)), Some((1, 1)));
        assert_eq!(d.counted(at(10)), None);
        assert_eq!(d.counted(at(999)), None);
        assert_eq!(d.counted(at(1000)), Some((3, 4)));
        assert_eq!(d.counted(at(1500)), None);
        assert_eq!(d.counted(at(5000)), Some((2, 6)));
        assert_eq!(d.count(), 6);
    }

    /// Past [`MAX_CONNECTIONS`] a connection waits for a thread, and is served once one is
    /// free; past [`CTL_QUEUE`] waiting too it is closed unanswered, and the client says why
    /// it got nothing; once the silent ones go, requests are served again.
    #[test]
    fn connections_past_the_limit_wait_then_are_closed_and_the_client_says_so() {
        let path = socket("full");
        let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
        let silent: Vec<UnixStream> = (0..MAX_CONNECTIONS)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let waiting = {
            let path = path.clone();
            std::thread::spawn(move || request(&path, &Request::Stats))
        };
        // Served once a thread is free: the silent ones' threads end at EOF.
        std::thread::sleep(Duration::from_millis(100));
        drop(silent);
        poll_until(&server, || waiting.is_finished());
        assert!(count_of(&waiting.join().unwrap().unwrap()).is_some());

        let silent: Vec<UnixStream> = (0..MAX_CONNECTIONS + CTL_QUEUE)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        // The accepting thread takes connections in order: the next finds every thread busy
        // and the queue full.
        let Err(refused) = request(&path, &Request::Stats) else {
            panic!("answered with {} silent connections open", silent.len());
        };
        assert!(
            refused
                .to_string()
                .contains("closed the connection without an answer"),
            "{refused}"
        );
        assert_eq!(server.dropped(), DroppedConnections { ctl: 1, metrics: 0 });
        drop(silent);
        let served = {
            let path = path.clone();
            std::thread::spawn(move || loop {
                if let Ok(v) = request(&path, &Request::Stats) {
                    return v;
                }
                std::thread::sleep(Duration::from_millis(20));
            })
        };
        poll_until(&server, || served.is_finished());
        assert!(count_of(&served.join().unwrap()).is_some());
    }

    #[test]
    fn a_malformed_request_gets_an_error_answer_and_the_next_is_served() {
        let path = socket("bad");
        let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
        let bad = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&path).unwrap();
                s.write_all(b"stats please\n").unwrap();
                let mut line = String::new();
                std::io::BufRead::read_line(&mut std::io::BufReader::new(&s), &mut line).unwrap();
                line
            })
        };
        let line = bad.join().unwrap();
        assert!(line.contains("bad request"), "{line}");
        let good = {
            let path = path.clone();
            std::thread::spawn(move || request(&path, &Request::Stats).unwrap())
        };
        poll_until(&server, || good.is_finished());
        assert_eq!(count_of(&good.join().unwrap()), Some(1));
    }

    #[test]
    fn metrics_are_served_from_the_loops_stats() {
        let server = Server::bind(None, Some("127.0.0.1:0"), nothing_to_prepare()).unwrap();
        let Wake::Tcp(addr) = server.acceptors[0].1 else {
            panic!("no metrics listener")
        };
        let client = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            text
        });
        let start = Instant::now();
        while !client.is_finished() {
            server.poll(|_| {
                Reply::Stats(Box::new(Stats {
                    ok: true,
                    nodes: vec![NodeStats {
                        name: "root".into(),
                        packets: 3,
                        bytes: 300,
                        ..NodeStats::default()
                    }],
                    ..Stats::default()
                }))
            });
            assert!(start.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(1));
        }
        let text = client.join().unwrap();
        assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
        assert!(
            text.contains("weft_node_packets_total{node=\"root\"} 3"),
            "{text}"
        );
    }

    /// A metrics address that is not loopback is refused, naming it, before anything binds.
    #[test]
    fn a_metrics_address_that_is_not_loopback_is_refused_by_name() {
        for a in ["0.0.0.0:0", "[::]:0"] {
            let e = Server::bind(None, Some(a), nothing_to_prepare())
                .err()
                .expect("refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            let m = e.to_string();
            assert!(
                m.contains(&format!("`{a}`")) && m.contains("not a loopback"),
                "{m}"
            );
        }
        let e = Server::bind(None, Some("nonsense"), nothing_to_prepare())
            .err()
            .expect("refused");
        assert!(
            e.to_string().starts_with("metrics address `nonsense`"),
            "{e}"
        );
    }

    #[test]
    fn prometheus_has_a_series_per_shaping_class() {
        let stats = Stats {
            shapers: vec![ShaperStats {
                id: 0,
                name: "dst\"2".into(),
                limit_bps: 10_000_000_000,
                burst_bytes: 65536,
                packets: 7,
                bytes: 700,
                rate_bps: 5.0,
            }],
            ..Stats::default()
        };
        let text = prometheus(&stats);
        for line in [
            r#"weft_shaper_packets_total{shaper="dst\"2"} 7"#,
            r#"weft_shaper_bytes_total{shaper="dst\"2"} 700"#,
            r#"weft_shaper_rate_bps{shaper="dst\"2"} 5.0"#,
            r#"weft_shaper_limit_bps{shaper="dst\"2"} 10000000000"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }

    /// A peer that answers too slowly in all (a byte at a time), too much, or not in UTF-8:
    /// the client gives up within its deadline and limit, naming the socket.
    #[test]
    fn a_misbehaving_peer_is_given_up_on_by_name() {
        let serve = |name: &str, answer: &'static [&'static [u8]], gap: Duration| {
            let p = socket(name);
            let l = UnixListener::bind(&p).unwrap();
            std::thread::spawn(move || {
                if let Ok((mut s, _)) = l.accept() {
                    let mut buf = [0u8; 256];
                    let _ = s.read(&mut buf);
                    for part in answer {
                        if s.write_all(part).is_err() {
                            return;
                        }
                        std::thread::sleep(gap);
                    }
                }
            });
            p
        };
        let req = Request::Stats;
        let slow = serve(
            "slow",
            &[b"{", b"\"", b"o", b"k", b"\"", b":", b"1", b"}", b"\n"],
            Duration::from_millis(300),
        );
        let e = request_within(&slow, &req, Duration::from_millis(500), 1 << 20).unwrap_err();
        assert!(
            e.to_string().contains("no whole answer") && e.to_string().contains("slow"),
            "{e}"
        );
        let _ = std::fs::remove_file(&slow);
        let big = serve("big", &[&[b'x'; 4096], &[b'x'; 4096]], Duration::ZERO);
        let e = request_within(&big, &req, Duration::from_secs(5), 5000).unwrap_err();
        assert!(
            e.to_string().contains("more than 5000 bytes") && e.to_string().contains("big"),
            "{e}"
        );
        let _ = std::fs::remove_file(&big);
        let bad = serve("utf8", &[b"\"\xff\xfe\"\n"], Duration::ZERO);
        let e = request_within(&bad, &req, Duration::from_secs(5), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("utf8"), "{e}");
        let _ = std::fs::remove_file(&bad);
    }

    #[test]
    fn prometheus_has_series_per_tenant_and_port() {
        let mut stats = Stats {
            tenants: vec![TenantStats {
                tenant: 1,
                name: "a\nb".into(),
                iface: "t1".into(),
                rx_frames: 9,
                rx_bytes: 900,
                drops: [2, 0, 0, 0, 0, 1, 0, 0],
                macs: 1,
                queues: 3,
                buffers: 4,
                ..TenantStats::default()
            }],
            ports: vec![
                PortStats::AfXdp(AfXdpPort {
                    iface: "x\"y".into(),
                    kernel: XdpKernelStats {
                        rx_ring_full: 3,
                        ..XdpKernelStats::default()
                    },
                    ..AfXdpPort::default()
                }),
                PortStats::AfPacket(AfPacketPort {
                    iface: "up".into(),
                    rx_kernel_drops: 5,
                    tx_frames: 11,
                    ..AfPacketPort::default()
                }),
            ],
            ..Stats::default()
        };
        stats.iface.rejects[Reject::Busy as usize] = 4;
        stats.tenants[0].rejects[Reject::BadRate as usize] = 6;
        let text = prometheus(&stats);
        for line in [
            r#"weft_tenant_rx_frames_total{tenant="a\nb",iface="t1"} 9"#,
            r#"weft_tenant_drops_total{tenant="a\nb",iface="t1",reason="spoofed_source"} 2"#,
            r#"weft_tenant_queues{tenant="a\nb",iface="t1"} 3"#,
            r#"weft_tenant_rejects_total{tenant="a\nb",iface="t1",reason="bad_rate"} 6"#,
            r#"weft_tenant_rejects_total{tenant="a\nb",iface="t1",reason="busy"} 0"#,
            r#"weft_port_rx_kernel_drops_total{iface="up"} 5"#,
            r#"weft_port_tx_frames_total{iface="up"} 11"#,
            r#"weft_port_kernel_rx_ring_full_total{iface="x\"y"} 3"#,
            r#"weft_port_kernel_rx_dropped_total{iface="x\"y"} 0"#,
            r#"weft_iface_rejects_total{reason="busy"} 4"#,
            r#"weft_iface_rejects_total{reason="unknown_queue"} 0"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
        assert!(
            !text.contains("backend"),
            "a string is not a sample:\n{text}"
        );
        assert!(
            !text.contains(r#"weft_port_kernel_rx_dropped_total{iface="up"}"#),
            "an AF_PACKET port has no AF_XDP kernel statistics:\n{text}"
        );
    }

    /// Every number of the dataplane's, the interface's and each backend's port counters
    /// is a sample, under its own name and with its value; so is every count of their
    /// nested sections (the interface's refusals by reason, AF_XDP's kernel statistics),
    /// under a counter's name with a TYPE line.
    #[test]
    fn prometheus_exports_every_counter() {
        let mut stats = Stats::default();
        let mut next = 0u64;
        fn count(v: &mut serde_json::Value, next: &mut u64) {
            for (_, n) in v.as_object_mut().unwrap() {
                if n.is_u64() {
                    *next += 1;
                    *n = (*next).into();
                } else if n.is_object() {
                    count(n, next);
                }
            }
        }
        let mut d = serde_json::to_value(&stats.dataplane).unwrap();
        count(&mut d, &mut next);
        stats.dataplane = serde_json::from_value(d.clone()).unwrap();
        let mut i = serde_json::to_value(&stats.iface).unwrap();
        count(&mut i, &mut next);
        stats.iface = serde_json::from_value(i.clone()).unwrap();
        let mut ports = serde_json::json!([
            PortStats::AfPacket(AfPacketPort {
                iface: "p".into(),
                ..AfPacketPort::default()
            }),
            PortStats::AfXdp(AfXdpPort {
                iface: "x".into(),
                ..AfXdpPort::default()
            }),
        ]);
        for p in ports.as_array_mut().unwrap() {
            count(p, &mut next);
        }
        stats.ports = serde_json::from_value(ports.clone()).unwrap();
        let text = prometheus(&stats);
        // Each number's sample: one of its possible lines (`weft_SECTION_NAME_total` for a
        // counter, `weft_SECTION_NAME` for a gauge).
        let mut want: Vec<Vec<String>> = Vec::new();
        // A nested section's counts: under `name{labels,key="..."}` or
        // `prefix_KEY_total{labels}`.
        let nested = |section: &str, k: &str, n: &serde_json::Value, l: &str| match section {
            "iface.rejects" => vec![format!("weft_iface_rejects_total{{reason=\"{k}\"}} {n}")],
            "port.kernel" => vec![format!("weft_port_kernel_{k}_total{{{l}}} {n}")],
            _ => panic!("{section} is a section of counters the exporter does not know"),
        };
        let mut sections = Vec::new();
        for (prefix, v) in [("dataplane", &d), ("iface", &i)] {
            for (k, n) in v.as_object().unwrap() {
                if k == "uplink_down_ms" {
                    // In Prometheus's unit of time, seconds.
                    let ms = n.as_u64().unwrap();
                    want.push(vec![format!(
                        "weft_dataplane_uplink_down_seconds_total {}.{:03}",
                        ms / 1000,
                        ms % 1000
                    )]);
                } else if n.is_u64() {
                    want.push(vec![
                        format!("weft_{prefix}_{k}_total {n}"),
                        format!("weft_{prefix}_{k} {n}"),
                    ]);
                } else if let Some(m) = n.as_object() {
                    sections.push(format!("{prefix}.{k}"));
                    for (r, n) in m {
                        want.push(nested(&format!("{prefix}.{k}"), r, n, ""));
                    }
                }
            }
        }
        for p in ports.as_array().unwrap() {
            let l = format!("iface=\"{}\"", p["iface"].as_str().unwrap());
            for (k, n) in p.as_object().unwrap() {
                if n.is_u64() {
                    want.push(vec![
                        format!("weft_port_{k}_total{{{l}}} {n}"),
                        format!("weft_port_{k}{{{l}}} {n}"),
                    ]);
                } else if let Some(m) = n.as_object() {
                    sections.push(format!("port.{k}"));
                    for (r, n) in m {
                        want.push(nested(&format!("port.{k}"), r, n, &l));
                    }
                }
            }
        }
        assert_eq!(sections, ["iface.rejects", "port.kernel"]);
        assert!(want.len() > 80, "{want:?}");
        for lines in want {
            assert_eq!(
                lines
                    .iter()
                    .filter(|&line| text.lines().any(|l| l == line))
                    .count(),
                1,
                "{lines:?} not once in:\n{text}"
            );
        }
        // Every series is declared once, before its samples; a counter is a `_total` and
        // only a counter is (tests/prometheus_text.rs parses the whole text).
        let mut declared = HashSet::new();
        for l in text.lines() {
            if let Some(t) = l.strip_prefix("# TYPE ") {
                let (name, kind) = t.split_once(' ').unwrap();
                assert!(declared.insert(name), "{name} declared twice:\n{text}");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{l}");
            } else if !l.starts_with("# HELP ") {
                let name = &l[..l.find(['{', ' ']).unwrap()];
                assert!(
                    declared.contains(name),
                    "{name} has no TYPE line before it:\n{text}"
                );
            }
        }
    }

    /// A second daemon cannot take over a running one's socket (the first could then never
    /// be stopped), a path that is not a socket is never deleted, and a stale socket (its
    /// daemon killed) is replaced.
    #[test]
    fn the_control_socket_path_is_claimed_only_when_free() {
        let live = socket("claim-live");
        let _ = std::fs::remove_file(&live);
        let first = Server::bind(Some(&live), None, nothing_to_prepare()).unwrap();
        let e = Server::bind(Some(&live), None, nothing_to_prepare())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains("in use by a running weft"), "{e}");
        // The first still answers.
        let asked = std::thread::spawn({
            let live = live.clone();
            move || request(&live, &Request::Stats).unwrap()
        });
        poll_until(&first, || asked.is_finished());
        assert!(asked.join().unwrap().is_ok());
        drop(first);

        let file = socket("claim-file");
        std::fs::write(&file, "precious").unwrap();
        let e = Server::bind(Some(&file), None, nothing_to_prepare())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
        std::fs::remove_file(&file).unwrap();

        // A socket file nobody listens on (a listener dropped without removing it).
        let stale = socket("claim-stale");
        let _ = std::fs::remove_file(&stale);
        drop(UnixListener::bind(&stale).unwrap());
        assert!(stale.exists());
        let server = Server::bind(Some(&stale), None, nothing_to_prepare()).unwrap();
        drop(server);
    }

    /// A client given the wrong path hears what is there: a file or a directory is not a
    /// control socket (`InvalidInput`); a socket nobody listens on was left by a daemon
    /// that is gone.
    #[test]
    fn a_client_says_what_is_at_a_path_that_does_not_answer() {
        let file = socket("client-file");
        std::fs::write(&file, "not a socket").unwrap();
        let e = request(&file, &Request::Stats).unwrap_err();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(
            e.to_string().contains("is a file, not a control socket"),
            "{e}"
        );

        let dir = std::env::temp_dir();
        let e = request(&dir, &Request::Stats).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(
            e.to_string()
                .contains("is a directory, not a control socket"),
            "{e}"
        );

        let stale = socket("client-stale");
        let _ = std::fs::remove_file(&stale);
        drop(UnixListener::bind(&stale).unwrap());
        let e = request(&stale, &Request::Stats).unwrap_err();
        std::fs::remove_file(&stale).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        assert!(e.to_string().contains("nothing listens on"), "{e}");

        let none = socket("client-none");
        let _ = std::fs::remove_file(&none);
        let e = request(&none, &Request::Stats).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("is `weft run` running?"), "{e}");
    }

    /// Only regular files are read, at most the limit: a device, a directory and a FIFO are
    /// refused by what they are (without opening the FIFO), and a file whose length says 0
    /// (as `/proc`'s do) is cut off after the limit's worth.
    #[test]
    fn a_policy_file_is_read_only_when_regular_and_within_the_limit() {
        let e = read_policy_file(Path::new("/dev/null"), 1 << 20).unwrap_err();
        assert!(
            e.to_string().contains("/dev/null is a character device"),
            "{e}"
        );
        let dir = std::env::temp_dir();
        let e = read_policy_file(&dir, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let status = Path::new("/proc/self/status");
        assert_eq!(std::fs::metadata(status).unwrap().len(), 0);
        let e = read_policy_file(status, 64).unwrap_err();
        assert!(
            matches!(
                e,
                PolicyFileError::TooLarge {
                    size: None,
                    limit: 64,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .ends_with("is more than the limit of 64 bytes (`weft run --max-policy-bytes`)"),
            "{e}"
        );
        assert!(read_policy_file(status, 1 << 20).unwrap().len() > 64);
        let e = read_policy_file(&socket("absent"), 1 << 20).unwrap_err();
        assert!(e.to_string().starts_with("cannot read "), "{e}");
    }

    /// The limit counts a policy and its sub-policies together, and the refusal says where
    /// the sub-policy is attached.
    #[test]
    fn sub_policies_count_against_the_limit_and_are_named_where_attached() {
        let dir = socket("subs");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let main = dir.join("main.yaml");
        std::fs::write(
            &main,
            "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - {name: t, type: attach, parent: root, policy: part.yaml}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("part.yaml"),
            format!(
                "weft: 1\nnodes:\n  - {{name: x, type: leaf}}\n#{}\n",
                "x".repeat(200)
            ),
        )
        .unwrap();
        let main_len = std::fs::metadata(&main).unwrap().len();
        let part_len = std::fs::metadata(dir.join("part.yaml")).unwrap().len();
        let load = |limit: u64| {
            let files = ReloadReader::new(&Client {
                peer: None,
                max_policy_bytes: limit,
            });
            let o = weft_core::policy::LoadOptions {
                reader: Some(files.reader()),
                ..Default::default()
            };
            weft_core::policy::load(&main, &o).map_err(|e| files.client_error(&e))
        };
        assert!(load(main_len + 300).is_ok());
        let e = load(main_len + 100).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.starts_with(&format!(
                "{}:4:51: error[attach]: cannot read sub-policy ",
                main.display()
            )),
            "{e}"
        );
        assert!(
            e.contains(&format!(
                ": it is {part_len} bytes; with the {main_len} bytes read before it, more than the \
                 limit of {} bytes for a policy and its sub-policies together (weft run \
                 --max-policy-bytes)",
                main_len + 100
            )),
            "{e}"
        );
    }

    /// What a diagnostic quotes from the file goes; the place, the rule, weft's own words
    /// and the message's own text stay; the node and the hint go.
    #[test]
    fn redacted_errors_keep_the_place_and_the_rule_and_lose_the_files_words() {
        for (given, want) in [
            (
                "p.yaml:1:1: error[unknown-key]: unknown key `root:$6$x` in the policy; help: known keys: weft, name",
                "p.yaml:1:1: error[unknown-key]: unknown key `…` in the policy",
            ),
            (
                "p.yaml:2:3: error[missing-key]: missing `weft: 1` (the policy format version); help: start the file with `weft: 1`",
                "p.yaml:2:3: error[missing-key]: missing `weft: 1` (the policy format version)",
            ),
            (
                "p.yaml:3:9: error[cycle]: parents form a cycle: sec1 → sec2 → sec1 (node `sec1`)",
                "p.yaml:3:9: error[cycle]: parents form a cycle: … → … → …",
            ),
            (
                "p.yaml:4:9: error[bad-value]: node name \"se\\\"cret\" has a space (node `x`)",
                "p.yaml:4:9: error[bad-value]: node name \"…\" has a space",
            ),
            (
                "p.yaml:5:1: error[unreadable-file]: p.yaml is not UTF-8 text: byte 0xE9 here is not valid UTF-8; help: convert",
                "p.yaml:5:1: error[unreadable-file]: p.yaml is not UTF-8 text: a byte here is not valid UTF-8",
            ),
            (
                "p.yaml:6:1: error[yaml-syntax]: not valid YAML: unexpected character: `@' and more secret",
                "p.yaml:6:1: error[yaml-syntax]: not valid YAML: unexpected character: `…",
            ),
            (
                "the new policy has 9 leaves; this dataplane was started for at most 4",
                "the new policy has 9 leaves; this dataplane was started for at most 4",
            ),
        ] {
            assert_eq!(redact(given), want);
        }
        assert_eq!(redact("a `kb`\nb `secret`"), "a `kb`\nb `…`");
        // Numbers of four digits or more, and letters that are no word of weft's, go.
        assert_eq!(
            redact("the key `123456` is given twice"),
            "the key `…` is given twice"
        );
        assert_eq!(
            redact("x: `4b8m` and `10gbit` and `weft: 1` and `rate`"),
            "x: `…` and `10gbit` and `weft: 1` and `rate`"
        );
    }

    /// `--ctl-group`: a group that does not exist is refused by name (`NotFound`: exit 2);
    /// one the process belongs to gets the socket.
    #[test]
    fn the_control_socket_goes_to_the_group_given() {
        let e = lookup_group("weft-no-such-group-here").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(
            e.to_string()
                .starts_with("--ctl-group `weft-no-such-group-here`: no such group"),
            "{e}"
        );
        use std::os::unix::fs::MetadataExt;
        // The process's group: that of a file it makes (outside a setgid directory).
        let probe = socket("group-probe");
        std::fs::write(&probe, "").unwrap();
        let gid = std::fs::metadata(&probe).unwrap().gid();
        std::fs::remove_file(&probe).unwrap();
        let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
        let Some(name) = groups.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == gid.to_string()).then(|| f[0].to_string())
        }) else {
            eprintln!("skipped the chown: group {gid} is not in /etc/group");
            return;
        };
        let group = lookup_group(&name).unwrap();
        assert_eq!(group.gid, gid);
        let path = socket("group");
        let opts = Options {
            group: Some(group),
            ..Options::default()
        };
        let server = Server::bind_with(Some(&path), None, nothing_to_prepare(), &opts).unwrap();
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!((m.gid(), m.mode() & 0o777), (gid, 0o660));
        drop(server);
    }

    /// Directories made for the socket go with it; one that was there stays, and so does
    /// one that something else has been put in meanwhile.
    #[test]
    fn the_control_sockets_own_directories_are_removed() {
        let top = socket("dirs");
        let _ = std::fs::remove_dir_all(&top);
        let path = top.join("a/b/weft.sock");
        let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
        assert!(path.exists());
        drop(server);
        assert!(!top.exists(), "{} is left behind", top.display());

        std::fs::create_dir_all(top.join("a")).unwrap();
        let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
        std::fs::write(top.join("a/b/note"), "mine").unwrap();
        drop(server);
        assert!(top.join("a/b/note").exists() && !path.exists());
        std::fs::remove_dir_all(&top).unwrap();
    }
}
