//! How the calling thread is scheduled: the CPUs it may run on (`sched_getaffinity(2)`,
//! `sched_setaffinity(2)`), its EEVDF slice (`sched_setattr(2)`, also for a child between
//! `fork` and `exec`), its timer slack (`prctl(PR_SET_TIMERSLACK)`), and waiting for a
//! descriptor to become readable (`ppoll(2)`).
//!
//! Invariants: CPU ids handed to the kernel are below [`MAX_CPUS`] (the set's size);
//! [`set_slice_raw`] allocates nothing and takes no lock, so it may run between `fork` and
//! `exec`. Cost: one system call each. The affinity, nice value and timer slack go through
//! rustix's safe wrappers; `sched_setattr` (no wrapper anywhere) and `ppoll` over plain
//! `pollfd`s stay over libc.

use std::io;
use std::process::Command;

use rustix::thread::CpuSet;

/// How many CPUs a CPU set can name (`CPU_SETSIZE`).
pub const MAX_CPUS: usize = CpuSet::MAX_CPU;

/// The CPUs the calling thread may run on (`sched_getaffinity(2)`).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None)?;
    Ok((0..MAX_CPUS).filter(|&i| set.is_set(i)).collect())
}

/// Lets the calling thread run on `cpus` only (`sched_setaffinity(2)`). Ids at or above
/// [`MAX_CPUS`] are refused (`InvalidInput`) before the call; the kernel answers `EINVAL`
/// when none of them is a CPU this process may run on.
pub fn set_cpus(cpus: &[usize]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        if c >= MAX_CPUS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {c} out of range"),
            ));
        }
        set.set(c);
    }
    rustix::thread::sched_setaffinity(None, &set).map_err(io::Error::from)
}

/// Sets the calling thread's timer slack to `ns` nanoseconds (`prctl(PR_SET_TIMERSLACK)`;
/// 0 restores the default).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(ns)).map_err(io::Error::from)
}

/// Sets the calling thread's EEVDF slice to `us` microseconds (`sched_setattr(2)`,
/// SCHED_OTHER with `sched_runtime`; the kernel accepts 100 µs to 100 ms), keeping its nice
/// value. Only system calls, no allocation: usable between `fork` and `exec` (see
/// [`slice_in_child`]; the slice is inherited across `exec`).
pub fn set_slice_raw(us: u64) -> io::Result<()> {
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    // -1 is a valid nice value: rustix tells an error from it by errno, as getpriority(2)
    // asks. A failed read keeps nice 0, as the unchecked call did.
    let nice = rustix::process::getpriority_process(None).unwrap_or(0);
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: us.saturating_mul(1000),
        deadline: 0,
        period: 0,
    };
    // SAFETY: `attr` is a valid `struct sched_attr` (SCHED_ATTR_SIZE_VER0 layout) of the
    // size it declares, alive for the call; the kernel only reads it.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes `cmd`'s child set its slice to `us` microseconds ([`set_slice_raw`]) between
/// `fork` and `exec`; the program it runs inherits it.
pub fn slice_in_child(cmd: &mut Command, us: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook only makes system calls (no allocation, no locks), as required
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || set_slice_raw(us));
    }
}

/// Waits until one of `fds` is readable or `ns` nanoseconds have passed (`ppoll(2)`, no
/// signal mask). A descriptor number that is not open is the kernel's to report
/// (`POLLNVAL` in its `revents`), not a memory error.
pub fn wait_readable(fds: &mut [libc::pollfd], ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `fds` is a valid, writable array of `fds.len()` pollfd (the kernel writes
    // only their `revents`); `ts` a valid timespec; no signal mask is passed.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_thread_may_run_somewhere_and_out_of_range_cpus_are_refused() {
        assert!(!super::allowed_cpus().unwrap().is_empty());
        let e = super::set_cpus(&[super::MAX_CPUS]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn an_empty_wait_times_out() {
        let t = std::time::Instant::now();
        super::wait_readable(&mut [], 1_000_000);
        assert!(t.elapsed() >= std::time::Duration::from_micros(900));
    }
}
