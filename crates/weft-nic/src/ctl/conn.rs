//! One connection's exchange: reading a request line within [`READ_DEADLINE`], writing
//! the answer within [`WRITE_DEADLINE`] ([`request_of`]), serving control and metrics
//! connections, and the metrics cache that asks the loop for stats at most once per
//! [`METRICS_MAX_AGE`].
//!
//! Invariants: a slow or idle client costs its own thread only, never the loop. Cost: one
//! read and one write per request; a scrape is answered from the cache when it is fresh.

use super::*;

/// The Prometheus text scrapes are answered with, and when it was asked of the loop.
#[derive(Default)]
pub(super) struct MetricsCache {
    state: Mutex<Cached>,
    /// Signalled when a question to the loop is answered.
    answered: Condvar,
}

#[derive(Default)]
pub(super) struct Cached {
    latest: Option<(Instant, Arc<str>)>,
    /// A scrape is asking the loop now.
    asking: bool,
}

/// The metrics text: the latest stats if they are younger than [`METRICS_MAX_AGE`], else
/// the loop's answer now (one scrape asks; those that come meanwhile wait for its answer).
pub(super) fn scrape<C>(sh: &Shared<C>) -> Result<Arc<str>, String> {
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
pub(super) fn read_until(
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
pub(super) fn write_within(
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

pub(super) fn serve_unix<C: Send + 'static>(s: UnixStream, sh: &Shared<C>) -> io::Result<()> {
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

pub(super) fn serve_metrics<C>(s: TcpStream, sh: &Shared<C>) -> io::Result<()> {
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
