//! Reading policy and sub-policy files: through the caller's
//! [`PolicyReader`](super::PolicyReader) or weft's own
//! reader, and the `unreadable-file` diagnostics of files that cannot be read or are not
//! UTF-8.
//!
//! Invariants: weft's own reader reads only a regular file (checked again on the opened
//! handle) of at most [`MAX_POLICY_FILE_BYTES`], so a FIFO or `/dev/zero` is refused rather
//! than read for ever; text is UTF-8 or refused with the place of its first bad byte.
//!
//! Cost: one read of the file, linear in its size.

use std::path::Path;
use std::sync::Arc;

use super::{Compiler, LoadOptions};
use crate::policy::error::{Diagnostic, Rule, Span};

/// Why a policy file's text could not be had.
pub(super) enum Unreadable {
    /// The system's refusal: no such file, a directory, no permission.
    Io(std::io::Error),
    /// The bytes are not UTF-8.
    NotUtf8(NotUtf8),
}

/// A policy file that is not UTF-8 text.
pub(super) struct NotUtf8 {
    /// Its text with U+FFFD in place of each invalid sequence (identical to the file up to
    /// `offset`, so line and column there are the file's).
    text: String,
    /// Byte offset of the first invalid sequence.
    offset: usize,
    /// Its first byte.
    byte: u8,
    /// The file starts with a UTF-16 byte-order mark (as Windows editors and PowerShell's
    /// `>` write text).
    utf16: bool,
}

/// The most bytes a policy file (or sub-policy file) may have: far beyond any policy (a
/// million-node one is about 100 MB of YAML only when generated; its sub-policies are files
/// of their own), and small enough that `policy: /dev/zero` cannot exhaust memory.
pub const MAX_POLICY_FILE_BYTES: u64 = 64 << 20;

/// A policy or sub-policy file's text, through `opts`' reader or weft's own.
pub(super) fn read_with(opts: &LoadOptions, path: &Path) -> Result<String, Unreadable> {
    match &opts.reader {
        Some(r) => (r.0)(path).map_err(Unreadable::Io).and_then(utf8),
        None => read_policy(path),
    }
}

/// A policy file's text: YAML is UTF-8 here (the parser reads `str`), so other bytes are
/// refused with the place of the first one, not read as something else. Only a regular file
/// of at most [`MAX_POLICY_FILE_BYTES`] is read: a FIFO would block the reader for ever, a
/// device (`/dev/zero`) would never end.
fn read_policy(path: &Path) -> Result<String, Unreadable> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(Unreadable::Io)?;
    if !meta.is_file() {
        return Err(Unreadable::Io(not_regular(meta.file_type())));
    }
    let f = std::fs::File::open(path).map_err(Unreadable::Io)?;
    // Again on what was opened (the path may have changed in between).
    let meta = f.metadata().map_err(Unreadable::Io)?;
    if !meta.is_file() {
        return Err(Unreadable::Io(not_regular(meta.file_type())));
    }
    if meta.len() > MAX_POLICY_FILE_BYTES {
        return Err(Unreadable::Io(too_long_policy()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_POLICY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(Unreadable::Io)?;
    if bytes.len() as u64 > MAX_POLICY_FILE_BYTES {
        return Err(Unreadable::Io(too_long_policy()));
    }
    utf8(bytes)
}

/// What a file that is not a regular file is, for a person (`None`: a regular file). One
/// definition for every reader of policy files (the control socket's too).
pub fn file_kind(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        } else if t.is_char_device() {
            return Some("a character device");
        } else if t.is_block_device() {
            return Some("a block device");
        } else if t.is_socket() {
            return Some("a socket");
        }
    }
    Some(if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    })
}

/// Why a policy path that is not a regular file is not read.
fn not_regular(t: std::fs::FileType) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "it is {}, not a regular file",
            file_kind(t).unwrap_or("a regular file")
        ),
    )
}

/// Why a policy file over [`MAX_POLICY_FILE_BYTES`] is not read.
fn too_long_policy() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("longer than {MAX_POLICY_FILE_BYTES} bytes"),
    )
}

/// A policy's bytes as text, or where they stop being UTF-8.
pub(super) fn utf8(bytes: Vec<u8>) -> Result<String, Unreadable> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[offset];
        let utf16 = matches!(e.as_bytes(), [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..]);
        Unreadable::NotUtf8(NotUtf8 {
            text: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            offset,
            byte,
            utf16,
        })
    })
}

impl Compiler<'_> {
    /// The `unreadable-file` diagnostic of a file that is not UTF-8, at its first bad byte
    /// (the file joins the sources as [`NotUtf8::text`], so the place renders with its line).
    pub(super) fn not_utf8(&mut self, path: &Path, bad: NotUtf8) -> Diagnostic {
        let (offset, byte, utf16) = (bad.offset, bad.byte, bad.utf16);
        let file = self.sources.add(path.to_path_buf(), Arc::from(bad.text));
        // U+FFFD, which stands for the bad sequence in the text, is 3 bytes.
        let span = Span {
            file,
            offset,
            len: 3,
        };
        if utf16 {
            return Diagnostic::new(
                Rule::UnreadableFile,
                span,
                format!(
                    "{} is UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8",
                    path.display()
                ),
            )
            .help(
                "policies are UTF-8; convert the file, e.g. `iconv -f utf-16 -t utf-8 OLD > NEW`",
            );
        }
        Diagnostic::new(
            Rule::UnreadableFile,
            span,
            format!(
                "{} is not UTF-8 text: byte 0x{byte:02X} here is not valid UTF-8",
                path.display()
            ),
        )
        .help("policies are UTF-8; convert the file, e.g. `iconv -f latin1 -t utf-8 OLD > NEW`")
    }
}
