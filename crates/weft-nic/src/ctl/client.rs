//! The client side: sending one request to a daemon's control socket and reading its
//! answer within [`ANSWER_DEADLINE`] and [`MAX_ANSWER_BYTES`] ([`request`]), with errors
//! that say what is wrong with the path.
//!
//! Invariants: never waits forever, never reads more than the limit. Cost: one connection
//! per request.

use super::*;

/// Why connecting to the control socket `path` failed, for a person: nothing there, a path
/// that is not a socket (`InvalidInput`: the wrong path was given), or a socket nobody
/// listens on any more (left by a `weft run` that was killed).
pub(super) fn connect_error(path: &Path, e: io::Error) -> io::Error {
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
pub(super) fn request_within(
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
    // One write: `writeln!` would send the line and its end in two, and a peer that reads
    // once and closes leaves the end unread, which resets the connection before its answer.
    let mut request = line.into_bytes();
    request.push(b'\n');
    s.write_all(&request).map_err(closed)?;
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
