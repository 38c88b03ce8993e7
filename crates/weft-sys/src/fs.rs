//! File-system calls: an exclusive lock on a file that is not waited for (`flock(2)`), and
//! mounting and detaching a cgroup hierarchy (`mount(2)`, `umount2(2)`).
//!
//! Invariants: none beyond the kernel's (the mount is asked for exactly as given). Cost: one
//! system call each. No unsafe: rustix wraps all three.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

/// Takes an exclusive `flock(2)` on `f` without waiting: `Ok(false)` when another open file
/// description holds a lock on it.
pub fn try_lock_exclusive(f: &impl AsFd) -> io::Result<bool> {
    match rustix::fs::flock(f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Mounts a cgroup file system of `fstype` (`cgroup2`, or `cgroup` with `options`, e.g.
/// `cpu`) at `at`, source `cgroup`, no flags.
pub fn mount_cgroup(fstype: &str, options: &str, at: &Path) -> io::Result<()> {
    let options = std::ffi::CString::new(options).map_err(|e| io::Error::other(e.to_string()))?;
    rustix::mount::mount(
        "cgroup",
        at,
        fstype,
        rustix::mount::MountFlags::empty(),
        options.as_c_str(),
    )
    .map_err(io::Error::from)
}

/// Detaches the mount at `at` (`umount2(MNT_DETACH)`: lazily, once nothing uses it).
pub fn detach(at: &Path) -> io::Result<()> {
    rustix::mount::unmount(at, rustix::mount::UnmountFlags::DETACH).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_second_lock_on_a_file_is_refused_until_the_first_goes() {
        let path = std::env::temp_dir().join(format!("weft-sys-lock-{}", std::process::id()));
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .unwrap()
        };
        let (a, b) = (open(), open());
        assert!(super::try_lock_exclusive(&a).unwrap());
        assert!(!super::try_lock_exclusive(&b).unwrap());
        drop(a);
        assert!(super::try_lock_exclusive(&b).unwrap());
        let _ = std::fs::remove_file(&path);
    }
}
