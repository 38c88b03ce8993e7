//! Live control of a running software NIC: a Unix stream socket speaking one JSON request
//! line and one JSON answer line (`{"cmd":"stats"}`, `{"cmd":"reload","policy":PATH}`), and
//! an optional Prometheus text endpoint on a localhost TCP port.
//!
//! The dataplane never blocks on control. Threads of their own accept the connections and
//! read each request (a thread per connection, at most [`MAX_CONNECTIONS`] at once; a client
//! gets [`READ_DEADLINE`] to send its line), and do the request's own slow part there (a
//! [`Prepare`] hook: a reload's policy is read and compiled on the connection's thread); the
//! request, with what was prepared, goes to the dataplane over a channel, and the busy loop,
//! about once a millisecond, answers what has arrived ([`Server::poll`]: a `try_recv` when
//! nothing has). A client that connects and sends nothing, or one byte at a time, costs the
//! loop nothing.
//!
//! Cost: two threads blocked in `accept(2)` (they inherit the loop's CPU, where they sleep),
//! one short-lived thread per control connection.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Control connections served at once; more are closed unanswered (the client sees the
/// connection closed) until one ends.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a client has to send its request (a line of at most 1 MiB, or an HTTP request's
/// first 2 KiB), from its connection.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// How long a connection waits for the dataplane's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// What a [`Prepare`] hook hands the loop with a request.
pub type Payload = Box<dyn std::any::Any + Send>;

/// A request's slow part, run on its connection's thread before the loop sees it:
/// `Ok(payload)` sends the request on with `payload`, `Err(answer)` answers it at once (the
/// loop never sees it).
pub type Prepare = Arc<dyn Fn(&Value) -> Result<Option<Payload>, Value> + Send + Sync>;

/// A request on its way to the dataplane, what was prepared for it, and where its answer
/// goes.
struct Pending {
    req: Value,
    payload: Option<Payload>,
    reply: SyncSender<Value>,
}

/// What the accepting threads share.
#[derive(Clone)]
struct Shared {
    to_loop: Sender<Pending>,
    prepare: Prepare,
    stop: Arc<AtomicBool>,
    open: Arc<AtomicUsize>,
}

/// The server side: the dataplane polls it.
pub struct Server {
    requests: Receiver<Pending>,
    stop: Arc<AtomicBool>,
    /// The accepting threads, and how to wake each from `accept(2)` at shutdown.
    acceptors: Vec<(JoinHandle<()>, Wake)>,
    unix_path: Option<PathBuf>,
    /// Directories made for the control socket, outermost first: removed at drop, if empty.
    made_dirs: Vec<PathBuf>,
}

enum Wake {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl Server {
    /// Binds the control socket at `path` (replacing a stale one) and, if given, the metrics
    /// endpoint (must be a loopback address), and starts their accepting threads; `prepare`
    /// runs on each control request's thread first.
    pub fn bind(
        path: Option<&Path>,
        metrics: Option<&str>,
        prepare: Prepare,
    ) -> io::Result<Server> {
        let (to_loop, requests) = mpsc::channel();
        let shared = Shared {
            to_loop,
            prepare,
            stop: Arc::new(AtomicBool::new(false)),
            open: Arc::new(AtomicUsize::new(0)),
        };
        let mut server = Server {
            requests,
            stop: shared.stop.clone(),
            acceptors: Vec::new(),
            unix_path: None,
            made_dirs: Vec::new(),
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
            let t = spawn_acceptor("weft-metrics", l, accept, &shared, serve_metrics)?;
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
            let l = UnixListener::bind(p).map_err(at)?;
            server.unix_path = Some(p.to_path_buf());
            let accept = |l: &UnixListener| l.accept().map(|(s, _)| s);
            let t = spawn_acceptor("weft-ctl", l, accept, &shared, serve_unix)?;
            server.acceptors.push((t, Wake::Unix(p.to_path_buf())));
        }
        Ok(server)
    }

    /// Answers the requests that have arrived (none waits: without requests this is one
    /// `try_recv`): `handle` answers a request (a JSON object; the metrics endpoint asks
    /// `{"cmd":"stats"}`) with what [`Prepare`] made for it.
    pub fn poll(&self, mut handle: impl FnMut(&Value, Option<Payload>) -> Value) {
        while let Ok(p) = self.requests.try_recv() {
            // The connection may have given up waiting: its answer is dropped.
            let _ = p.reply.send(handle(&p.req, p.payload));
        }
    }
}

/// Makes `p` free for a new control socket: a stale socket (nobody answers on it: a daemon
/// that was killed) is removed; a socket another daemon answers on, or anything that is not
/// a socket, is left alone and refused (`AddrInUse`, `AlreadyExists`), so a second `weft run`
/// cannot take over a running one's socket (which then could not be stopped) or delete a file
/// named by mistake.
fn claim_socket_path(p: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
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

impl Server {
    /// The address the metrics endpoint listens on (its port, when `:0` let the system
    /// choose), if it has one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.acceptors.iter().find_map(|(_, w)| match w {
            Wake::Tcp(a) => Some(*a),
            Wake::Unix(_) => None,
        })
    }
}

impl Drop for Server {
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

/// Starts the thread that accepts `listener`'s connections (blocked in `accept(2)` until
/// one comes) and serves each with `conn` ([`serve`]), until [`Server`]'s drop sets `stop`.
fn spawn_acceptor<L: Send + 'static, S: Send + 'static>(
    name: &str,
    listener: L,
    accept: fn(&L) -> io::Result<S>,
    shared: &Shared,
    conn: fn(S, &Shared) -> io::Result<()>,
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
                    Ok(s) => serve(&sh, move |sh| conn(s, sh)),
                    // Out of descriptors, say: try again a little later rather than spin.
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
}

/// Runs `conn` on a thread of its own, unless [`MAX_CONNECTIONS`] are open (then the
/// connection is dropped unanswered, and the client sees it closed).
fn serve(sh: &Shared, conn: impl FnOnce(&Shared) -> io::Result<()> + Send + 'static) {
    if sh.open.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
        sh.open.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let mine = sh.clone();
    let spawned = std::thread::Builder::new()
        .name("weft-ctl-conn".into())
        .spawn(move || {
            let _ = conn(&mine);
            mine.open.fetch_sub(1, Ordering::Relaxed);
        });
    if spawned.is_err() {
        sh.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Prepares `req`, sends it to the dataplane and waits for its answer.
fn ask(sh: &Shared, req: Value) -> Value {
    let payload = match (sh.prepare)(&req) {
        Ok(p) => p,
        Err(answer) => return answer,
    };
    let (reply, answer) = mpsc::sync_channel(1);
    if sh
        .to_loop
        .send(Pending {
            req,
            payload,
            reply,
        })
        .is_err()
    {
        return json!({"ok": false, "error": "the dataplane is stopping"});
    }
    answer
        .recv_timeout(ANSWER_WAIT)
        .unwrap_or_else(|_| json!({"ok": false, "error": "the dataplane did not answer"}))
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

fn serve_unix(s: UnixStream, sh: &Shared) -> io::Result<()> {
    s.set_write_timeout(Some(Duration::from_secs(1)))?;
    let buf = read_until(
        &s,
        |t| s.set_read_timeout(Some(t)),
        1 << 20,
        |b| b.contains(&b'\n'),
    )?;
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let answer = match serde_json::from_slice::<Value>(line) {
        Ok(req) => ask(sh, req),
        Err(e) => json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    let mut w = &s;
    writeln!(w, "{answer}")
}

fn serve_metrics(s: TcpStream, sh: &Shared) -> io::Result<()> {
    s.set_write_timeout(Some(Duration::from_secs(1)))?;
    // The request itself does not matter (every path answers the metrics): read its head,
    // or what arrives within the deadline, so that the answer does not race it.
    let _ = read_until(
        &s,
        |t| s.set_read_timeout(Some(t)),
        2048,
        |b| b.windows(4).any(|w| w == b"\r\n\r\n"),
    );
    let body = prometheus(&ask(sh, json!({"cmd": "stats"})));
    let mut w = &s;
    write!(
        w,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The stats answer in Prometheus text format.
pub fn prometheus(stats: &Value) -> String {
    let mut o = String::new();
    o += "# TYPE weft_node_packets_total counter\n# TYPE weft_node_bytes_total counter\n";
    o += "# TYPE weft_node_drops_total counter\n# TYPE weft_node_rate_bps gauge\n";
    for n in stats["nodes"].as_array().into_iter().flatten() {
        let name = label(n["name"].as_str().unwrap_or(""));
        let l = format!("node=\"{name}\"");
        o += &format!("weft_node_packets_total{{{l}}} {}\n", n["packets"]);
        o += &format!("weft_node_bytes_total{{{l}}} {}\n", n["bytes"]);
        o += &format!("weft_node_rate_bps{{{l}}} {}\n", n["rate_bps"]);
        for (r, v) in n["drops"].as_object().into_iter().flatten() {
            o += &format!("weft_node_drops_total{{{l},reason=\"{r}\"}} {v}\n");
        }
    }
    o += "# TYPE weft_shaper_packets_total counter\n# TYPE weft_shaper_bytes_total counter\n";
    o += "# TYPE weft_shaper_rate_bps gauge\n# TYPE weft_shaper_limit_bps gauge\n";
    for c in stats["shapers"].as_array().into_iter().flatten() {
        let l = format!("shaper=\"{}\"", label(c["name"].as_str().unwrap_or("")));
        o += &format!("weft_shaper_packets_total{{{l}}} {}\n", c["packets"]);
        o += &format!("weft_shaper_bytes_total{{{l}}} {}\n", c["bytes"]);
        o += &format!("weft_shaper_rate_bps{{{l}}} {}\n", c["rate_bps"]);
        o += &format!("weft_shaper_limit_bps{{{l}}} {}\n", c["limit_bps"]);
    }
    for (k, v) in stats["dataplane"].as_object().into_iter().flatten() {
        if v.is_number() {
            o += &format!("weft_dataplane_{k} {v}\n");
        }
    }
    for (k, v) in stats["iface"].as_object().into_iter().flatten() {
        if v.is_number() {
            o += &format!("weft_iface_{k} {v}\n");
        }
    }
    o
}

/// Why connecting to the control socket `path` failed, for a person: nothing there, a path
/// that is not a socket (`InvalidInput`: the wrong path was given), or a socket nobody
/// listens on any more (left by a `weft run` that was killed).
fn connect_error(path: &Path, e: io::Error) -> io::Error {
    use std::os::unix::fs::FileTypeExt;
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

/// The client side: sends one request and returns the answer.
pub fn request(path: &Path, req: &Value) -> io::Result<Value> {
    let mut s = UnixStream::connect(path).map_err(|e| connect_error(path, e))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    // Closed unanswered (the server had MAX_CONNECTIONS open): the client sees a broken pipe,
    // a reset or an empty answer, depending on timing; all three say the same.
    let closed = |e: io::Error| {
        match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof => {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{} closed the connection without an answer (more than {MAX_CONNECTIONS} control connections open?)",
                    path.display()
                ),
            )
        }
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer from {} within 10 s (is it a weft control socket?)", path.display()),
        ),
        _ => e,
    }
    };
    writeln!(s, "{req}").map_err(closed)?;
    let mut line = String::new();
    if BufReader::new(&s).read_line(&mut line).map_err(closed)? == 0 {
        return Err(closed(io::ErrorKind::UnexpectedEof.into()));
    }
    serde_json::from_str(&line).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} did not answer like a weft control socket ({e})",
                path.display()
            ),
        )
    })
}

/// The default control socket path.
pub const DEFAULT_SOCKET: &str = "/run/weft/weft.sock";

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing_to_prepare() -> Prepare {
        Arc::new(|_| Ok(None))
    }

    fn socket(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("weft-ctl-{name}-{}.sock", std::process::id()))
    }

    /// Polls `server` as the dataplane does (answering `stats` with a count of the requests
    /// answered so far) until `done`.
    fn poll_until(server: &Server, done: impl Fn() -> bool) {
        let mut answered = 0u64;
        let start = Instant::now();
        while !done() {
            server.poll(|req, _| {
                answered += 1;
                json!({"ok": true, "cmd": req["cmd"], "answered": answered})
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
                let answer = request(&path, &json!({"cmd": "stats"})).unwrap();
                (answer, dripping.load(Ordering::SeqCst))
            })
        };
        poll_until(&server, || other.is_finished());
        let (answer, still_dripping) = other.join().unwrap();
        assert_eq!(answer["cmd"], "stats", "{answer}");
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
        let prepare: Prepare = Arc::new(|req: &Value| match req["cmd"].as_str() {
            Some("refuse") => Err(json!({"ok": false, "error": "refused before the loop"})),
            Some("carry") => Ok(Some(Box::new(42u32) as Payload)),
            _ => Ok(None),
        });
        let server = Server::bind(Some(&path), None, prepare).unwrap();
        let refused = request(&path, &json!({"cmd": "refuse"})).unwrap();
        assert_eq!(refused["error"], "refused before the loop");
        let carried = {
            let path = path.clone();
            std::thread::spawn(move || request(&path, &json!({"cmd": "carry"})).unwrap())
        };
        let start = Instant::now();
        while !carried.is_finished() {
            server.poll(|req, payload| {
                let n = payload.and_then(|p| p.downcast::<u32>().ok()).map(|b| *b);
                json!({"cmd": req["cmd"], "payload": n})
            });
            assert!(start.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(carried.join().unwrap()["payload"], 42);
    }

    /// Past [`MAX_CONNECTIONS`] a connection is closed unanswered, and the client says why it
    /// got nothing; once the silent ones time out, requests are served again.
    #[test]
    fn connections_past_the_limit_are_closed_and_the_client_says_so() {
        let path = socket("full");
        let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
        let silent: Vec<UnixStream> = (0..MAX_CONNECTIONS)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        // The accepting thread takes connections in order: the next finds all 16 open.
        let Err(refused) = request(&path, &json!({"cmd": "stats"})) else {
            panic!("answered with {MAX_CONNECTIONS} silent connections open");
        };
        assert!(
            refused
                .to_string()
                .contains("closed the connection without an answer"),
            "{refused}"
        );
        drop(silent);
        let served = {
            let path = path.clone();
            std::thread::spawn(move || loop {
                // The silent ones' threads end at EOF (now) or their deadline.
                if let Ok(v) = request(&path, &json!({"cmd": "stats"})) {
                    return v;
                }
                std::thread::sleep(Duration::from_millis(20));
            })
        };
        poll_until(&server, || served.is_finished());
        assert_eq!(served.join().unwrap()["cmd"], "stats");
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
                BufReader::new(&s).read_line(&mut line).unwrap();
                line
            })
        };
        let line = bad.join().unwrap();
        assert!(line.contains("bad request"), "{line}");
        let good = {
            let path = path.clone();
            std::thread::spawn(move || request(&path, &json!({"cmd": "stats"})).unwrap())
        };
        poll_until(&server, || good.is_finished());
        assert_eq!(good.join().unwrap()["answered"], 1);
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
            server.poll(|_, _| json!({"nodes": [{"name": "root", "packets": 3, "bytes": 300}]}));
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
        let stats = json!({
            "nodes": [],
            "shapers": [{"id": 0, "name": "dst\"2", "limit_bps": 10_000_000_000u64,
                         "burst_bytes": 65536, "packets": 7, "bytes": 700, "rate_bps": 5.0}],
        });
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
            move || request(&live, &json!({"cmd": "stats"})).unwrap()
        });
        poll_until(&first, || asked.is_finished());
        assert_eq!(asked.join().unwrap()["ok"], true);
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
        let e = request(&file, &json!({"cmd": "stats"})).unwrap_err();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(
            e.to_string().contains("is a file, not a control socket"),
            "{e}"
        );

        let dir = std::env::temp_dir();
        let e = request(&dir, &json!({"cmd": "stats"})).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(
            e.to_string()
                .contains("is a directory, not a control socket"),
            "{e}"
        );

        let stale = socket("client-stale");
        let _ = std::fs::remove_file(&stale);
        drop(UnixListener::bind(&stale).unwrap());
        let e = request(&stale, &json!({"cmd": "stats"})).unwrap_err();
        std::fs::remove_file(&stale).unwrap();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        assert!(e.to_string().contains("nothing listens on"), "{e}");

        let none = socket("client-none");
        let _ = std::fs::remove_file(&none);
        let e = request(&none, &json!({"cmd": "stats"})).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("is `weft run` running?"), "{e}");
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
