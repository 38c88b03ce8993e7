//! The process's identity, limits and signals: whether it runs as root, signalling another
//! process, the clock-tick rate of `/proc`'s CPU times, raising the open-descriptor limit,
//! looking a group up by name, and signal handlers that only store to an atomic.
//!
//! Invariants: a signal handler installed here does one atomic load and one atomic store,
//! nothing else (async-signal-safe); the group lookup reads back only what `getgrnam_r`
//! says it filled. Cost: one system call each (the group lookup: what NSS costs, once).
//! Only the group lookup and the signal handlers need unsafe: rustix has no safe
//! `getgrnam_r` or `signal`.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Sends SIGKILL to process `pid`. `false` when it could not be sent (no such process, not
/// ours to signal, or a pid no process can have).
pub fn kill(pid: u32) -> bool {
    signal(pid, rustix::process::Signal::KILL)
}

/// Sends SIGTERM to process `pid`; as [`kill`].
pub fn terminate(pid: u32) -> bool {
    signal(pid, rustix::process::Signal::TERM)
}

fn signal(pid: u32, sig: rustix::process::Signal) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    rustix::process::kill_process(pid, sig).is_ok()
}

/// Clock ticks per second: the unit of the CPU times in `/proc/PID/stat` and `/proc/stat`
/// (`sysconf(_SC_CLK_TCK)`), at least 1.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

/// Raises the process's soft limit on open descriptors to its hard limit, where it is
/// lower; returns the soft limit then (`u64::MAX` when unlimited or unknown).
pub fn raise_fd_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    match (l.current, l.maximum) {
        (Some(cur), Some(max)) if cur < max => {
            let raised = Rlimit {
                current: Some(max),
                maximum: Some(max),
            };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                max
            } else {
                cur
            }
        }
        (Some(cur), None) => {
            let raised = Rlimit {
                current: None,
                maximum: None,
            };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                u64::MAX
            } else {
                cur
            }
        }
        (Some(cur), Some(_)) => cur,
        (None, _) => u64::MAX,
    }
}

/// The id of group `name` in the system's group database (`/etc/group`, or what NSS
/// serves): `Ok(None)` when there is no such group, `Err` when it could not be looked up or
/// the name has a NUL.
pub fn group_id(name: &str) -> io::Result<Option<u32>> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
    let mut buf: Vec<libc::c_char> = vec![0; 4096];
    loop {
        let mut grp = std::mem::MaybeUninit::<libc::group>::zeroed();
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: getgrnam_r reads the NUL-terminated `c` and writes the entry into `grp`,
        // its strings into `buf` (whose length it is given), and `found` (null or `grp`);
        // all of them live across the call. Only the gid is read back, and only when
        // `found` says `grp` was filled.
        let rc = unsafe {
            libc::getgrnam_r(
                c.as_ptr(),
                grp.as_mut_ptr(),
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if found.is_null() {
            return Ok(None);
        }
        // SAFETY: `found` is not null, so getgrnam_r filled `grp` (it was zeroed before, so
        // every field is initialized either way).
        let gid = unsafe { grp.assume_init_ref() }.gr_gid;
        return Ok(Some(gid));
    }
}

/// The flag [`stop_on`]'s handler sets (null: none installed yet).
static STOP_FLAG: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());
/// Where [`record_on`]'s handler stores the signal's number (null: none installed yet).
static SIGNAL_SLOT: AtomicPtr<AtomicI32> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn set_stop_flag(_: libc::c_int) {
    let p = STOP_FLAG.load(Ordering::Relaxed);
    // SAFETY: the pointer is null or came from a `&'static AtomicBool` ([`stop_on`]), so it
    // is valid for the whole process; an atomic store is async-signal-safe.
    if let Some(flag) = unsafe { p.as_ref() } {
        flag.store(true, Ordering::Relaxed);
    }
}

extern "C" fn store_signal(sig: libc::c_int) {
    let p = SIGNAL_SLOT.load(Ordering::Relaxed);
    // SAFETY: the pointer is null or came from a `&'static AtomicI32` ([`record_on`]), so it
    // is valid for the whole process; an atomic store is async-signal-safe.
    if let Some(slot) = unsafe { p.as_ref() } {
        slot.store(sig, Ordering::Relaxed);
    }
}

/// Installs, for each of `signals`, a handler that sets `flag` (and does nothing else).
/// The last call's flag is the one set.
pub fn stop_on(signals: &[libc::c_int], flag: &'static AtomicBool) {
    STOP_FLAG.store(
        flag as *const AtomicBool as *mut AtomicBool,
        Ordering::Relaxed,
    );
    for &sig in signals {
        // SAFETY: the handler is async-signal-safe (an atomic load and store), and the
        // flag it reaches is `'static`.
        unsafe { libc::signal(sig, set_stop_flag as *const () as libc::sighandler_t) };
    }
}

/// Installs, for each of `signals`, a handler that stores the signal's number in `slot`
/// (and does nothing else). The last call's slot is the one written.
pub fn record_on(signals: &[libc::c_int], slot: &'static AtomicI32) {
    SIGNAL_SLOT.store(
        slot as *const AtomicI32 as *mut AtomicI32,
        Ordering::Relaxed,
    );
    for &sig in signals {
        // SAFETY: the handler is async-signal-safe (an atomic load and store), and the
        // slot it reaches is `'static`.
        unsafe { libc::signal(sig, store_signal as *const () as libc::sighandler_t) };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pid_no_process_has_is_not_signalled() {
        assert!(!super::kill(0));
        assert!(!super::kill(u32::MAX));
    }

    #[test]
    fn ticks_are_positive() {
        assert!(super::clock_ticks_per_second() >= 1);
    }

    #[test]
    fn the_root_group_is_found_and_a_made_up_one_is_not() {
        assert_eq!(super::group_id("root").unwrap(), Some(0));
        assert_eq!(super::group_id("weft-no-such-group-here").unwrap(), None);
        assert!(super::group_id("a\0b").is_err());
    }
}
