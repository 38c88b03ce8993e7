//! Reading a reload's policy files: regular files only (opened with `O_NONBLOCK` and
//! checked with `fstat`), within the byte limit for the file and its sub-policies together,
//! and readable by the client that asked (its credentials from the kernel, checked against
//! the file's mode bits) — [`ReloadReader`], [`read_policy_file`].
//!
//! Invariants: a FIFO or device is refused by name, never waited on or read; what is checked
//! is what is compiled (each file is read once). Cost: an `open`, an `fstat` and the reads
//! per file.

use super::*;

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
pub(super) fn too_large(
    p: &str,
    size: Option<u64>,
    limit: u64,
    before: u64,
    quoted: bool,
) -> String {
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
pub(super) fn peer_of(s: &UnixStream) -> Option<Peer> {
    let (pid, uid, gid) = weft_sys::net::peer_credentials(s)?;
    Some(Peer { pid, uid, gid })
}

/// Whether `peer` may read the file of metadata `m` by its mode bits (owner, group with
/// its supplementary groups, others); root may read anything; a client the kernel could
/// not name may read only what everyone may. (Access lists and the directories on the way
/// are not checked.)
pub(super) fn may_read(
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
pub(super) fn read_within(
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
