//! Sockets and network namespaces outside the packet rings: the credentials of a Unix
//! socket's peer (`SO_PEERCRED`), interface indices by name (`if_nametoindex(3)`), shutting a
//! socket down (`shutdown(2)`), and moving the calling thread into a network namespace
//! (`setns(2)`).
//!
//! Invariants: the kernel writes at most the length it is given. Cost: one system call each.
//! `shutdown` and `setns` go through rustix; the first two stay over libc: rustix's `socket_peercred` reads the peer's pid as a non-zero `Pid`,
//! and the kernel reports 0 for a peer outside this process's pid namespace.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;

/// The (pid, uid, gid) of the process at the other end of `s` (`SO_PEERCRED`, as it was
/// when it connected); `None` when the kernel does not say. The pid is 0 for a peer in
/// another pid namespace.
pub fn peer_credentials(s: &UnixStream) -> Option<(u32, u32, u32)> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` is a valid, writable ucred of `len` bytes, alive for the call; the kernel
    // writes at most `len` bytes; `s` keeps the descriptor open.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut c as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some((c.pid as u32, c.uid, c.gid))
}

/// The index of an interface, by name. A name no interface could have (empty, or longer
/// than Linux's 15 bytes) says so rather than "no interface".
pub fn ifindex(name: &str) -> io::Result<i32> {
    // IFNAMSIZ (16) less the terminating NUL.
    const MAX_NAME: usize = 15;
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            if name.is_empty() {
                "an empty interface name".to_string()
            } else {
                format!(
                    "`{name}` is {} bytes long: Linux interface names have at most {MAX_NAME}",
                    name.len()
                )
            },
        ));
    }
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface `{name}` in this network namespace"),
        ))
    } else {
        Ok(i as i32)
    }
}

/// Shuts `socket` down both ways (`shutdown(SHUT_RDWR)`): a thread blocked in `accept` or
/// `read` on it returns.
pub fn shutdown(socket: &impl AsFd) -> io::Result<()> {
    rustix::net::shutdown(socket, rustix::net::Shutdown::Both).map_err(io::Error::from)
}

/// Moves the calling thread (only it) into the network namespace `ns` refers to (a file
/// under `/run/netns`, or `/proc/PID/ns/net`), `setns(CLONE_NEWNET)`.
pub fn enter_netns(ns: &impl AsFd) -> io::Result<()> {
    rustix::thread::move_into_link_name_space(
        ns.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    /// A name no interface can have says why, not "no interface" (an empty `--uplink ""`
    /// read "no interface ``", a 16-byte name as if it were merely missing).
    #[test]
    fn impossible_interface_names_say_why() {
        let e = super::ifindex("").unwrap_err();
        assert_eq!(e.to_string(), "an empty interface name");
        let e = super::ifindex("sixteen-bytes-xx").unwrap_err();
        assert!(e.to_string().contains("16 bytes long"), "{e}");
        // 15 bytes is a possible name: merely missing here.
        let e = super::ifindex("fifteen-bytes-x").unwrap_err();
        assert!(e.to_string().contains("no interface"), "{e}");
        assert!(super::ifindex("lo").unwrap() > 0);
    }

    #[test]
    fn a_socket_pair_names_this_process() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (pid, uid, _) = super::peer_credentials(&a).unwrap();
        assert_eq!(pid, std::process::id());
        assert_eq!(uid, rustix::process::geteuid().as_raw());
    }
}
