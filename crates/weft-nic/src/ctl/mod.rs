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
//!
//! The files: `server.rs` (binding, the accepting threads and pools, the way to the loop),
//! `conn.rs` (one connection's request and answer, the metrics cache), `files.rs` (reading
//! a reload's policy files), `redact.rs` (what a reload's errors may quote), `metrics.rs`
//! (the Prometheus text), `client.rs` (`weft ctl`'s side), [`proto`] (the messages).

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
use weft_core::policy::Rule;
use weft_core::policy::{Kind, NODE_KEYS, TOP_KEYS};
use weft_core::sched::DropReason;

use crate::iface::Reject;
use crate::stats::{DataplaneStats, PortStats, Stats, XdpKernelStats, TENANT_DROPS};

pub mod proto;

pub use proto::{Reloaded, Reply, ReplyError, Request, RequestError};

mod client;
mod conn;
mod files;
mod metrics;
mod redact;
mod server;
#[cfg(test)]
mod tests;

pub use self::client::*;
pub use self::conn::*;
pub use self::files::*;
pub use self::metrics::*;
pub use self::redact::*;
pub use self::server::*;

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

/// The default control socket path.
pub const DEFAULT_SOCKET: &str = "/run/weft/weft.sock";
