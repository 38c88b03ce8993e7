//! An interface's link state, from `/sys/class/net/NAME/operstate` (the namespace's own
//! sysfs under `ip netns exec`). weft-nic's loop asks the uplink's every `LINK_CHECK_PS`
//! (100 ms): [`LinkState`] keeps the file open and reads it again from its start into a
//! buffer on the stack, so that a check allocates nothing (one `pread(2)`). Each port
//! ([`crate::afpacket::PacketSocket`], the AF_XDP port) holds one. Invariant: an answer is
//! about the interface that has the name now. No unsafe.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// The most bytes of `operstate` read: the kernel's states (`unknown`, `notpresent`,
/// `down`, `lowerlayerdown`, `testing`, `dormant`, `up`) are at most 14 bytes and a line
/// feed (a longer text would be read cut).
pub const OPERSTATE_MAX: usize = 64;

/// Whether an `operstate` text says the link is up: `down`, `lowerlayerdown` (a veth whose
/// peer is down) and `notpresent` are down; `up`, `unknown` (no carrier notion) and the
/// rest are up (whitespace around the word does not count); `None` when it is not UTF-8.
pub fn operstate_up(text: &[u8]) -> Option<bool> {
    let s = std::str::from_utf8(text).ok()?;
    Some(!matches!(
        s.trim(),
        "down" | "lowerlayerdown" | "notpresent"
    ))
}

/// One interface's `operstate`, read again and again without allocating: the path is
/// formatted once, the file opened at the first read and kept open, each read a `pread(2)`
/// from its start (sysfs makes the text anew for a read at offset 0) into a buffer on the
/// stack.
///
/// It answers as opening the path at every read would: a read of the file kept open that
/// fails (its interface was removed, and perhaps made again under the name) opens the path
/// again, once, so the answer is about the interface of that name now, and `None` while
/// there is none.
#[derive(Debug)]
pub struct LinkState {
    /// `None` for a name that cannot be an interface's (empty, or with a `/`).
    path: Option<PathBuf>,
    /// The file, once opened.
    file: Mutex<Option<File>>,
}

impl LinkState {
    /// Interface `name`'s state (nothing is opened yet).
    pub fn new(name: &str) -> LinkState {
        let path = (!name.is_empty() && !name.contains('/'))
            .then(|| PathBuf::from(format!("/sys/class/net/{name}/operstate")));
        LinkState {
            path,
            file: Mutex::new(None),
        }
    }

    /// The state at `path`, for tests of the reading over a file of their own.
    #[cfg(test)]
    fn at(path: PathBuf) -> LinkState {
        LinkState {
            path: Some(path),
            file: Mutex::new(None),
        }
    }

    /// Whether the link is up ([`operstate_up`]); `None` when it cannot be read (no such
    /// interface, a name that cannot be one), which the loop takes as up.
    pub fn up(&self) -> Option<bool> {
        let path = self.path.as_ref()?;
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let mut buf = [0u8; OPERSTATE_MAX];
        if let Some(f) = file.as_ref() {
            if let Ok(n) = read_from_start(f, &mut buf) {
                return operstate_up(&buf[..n]);
            }
            *file = None;
        }
        // The standard library builds a short path's C string on the stack: no allocation
        // here either, also while the interface is missing.
        let f = File::open(path).ok()?;
        let n = read_from_start(&f, &mut buf).ok()?;
        *file = Some(f);
        operstate_up(&buf[..n])
    }
}

/// Reads `f` from offset 0 until its end or until `buf` is full; the bytes read.
fn read_from_start(f: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operstate_words_are_read_as_the_kernel_writes_them() {
        for (text, up) in [
            (&b"up\n"[..], Some(true)),
            (b"unknown\n", Some(true)),
            (b"dormant\n", Some(true)),
            (b"testing\n", Some(true)),
            (b"down\n", Some(false)),
            (b"lowerlayerdown\n", Some(false)),
            (b"notpresent\n", Some(false)),
            (b"  down \n", Some(false)),
            (b"down\n\n", Some(false)),
            (b"", Some(true)),
            (b"downstairs\n", Some(true)),
            (b"DOWN\n", Some(true)),
            (b"\xff\xfe\n", None),
        ] {
            assert_eq!(
                operstate_up(text),
                up,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn names_that_cannot_be_interfaces_are_not_read() {
        for name in ["", "../lo", "a/b"] {
            assert_eq!(LinkState::new(name).up(), None, "{name:?}");
        }
        assert_eq!(LinkState::new("no-such-if0").up(), None);
    }

    /// The file kept open is read from its start each time: a new state is seen, a longer
    /// one does not leave the tail of a shorter one behind or the other way round, and a
    /// text longer than the buffer is read cut.
    #[test]
    fn the_file_kept_open_is_read_anew_from_its_start() {
        let path = std::env::temp_dir().join(format!("weft-operstate-{}", std::process::id()));
        std::fs::write(&path, "up\n").unwrap();
        let link = LinkState::at(path.clone());
        assert_eq!(link.up(), Some(true));
        for (text, up) in [
            ("lowerlayerdown\n", Some(false)),
            ("down\n", Some(false)),
            ("up\n", Some(true)),
            ("notpresent\n", Some(false)),
        ] {
            // Truncated and written again: the same file, as sysfs's stays.
            std::fs::write(&path, text).unwrap();
            assert_eq!(link.up(), up, "{text:?}");
        }
        let long = format!("down{}", " ".repeat(OPERSTATE_MAX));
        std::fs::write(&path, &long).unwrap();
        assert_eq!(link.up(), Some(false));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(LinkState::at(path).up(), None);
    }
}
