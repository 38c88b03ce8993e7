//! The dataplane's clock: `clock_gettime(CLOCK_MONOTONIC_RAW)` (the vDSO reads the TSC, so
//! one read costs tens of nanoseconds and no system call) converted to integer picoseconds,
//! the core's unit. The core never reads it: the dataplane passes `now_ps` in.
//!
//! Invariant: non-decreasing within a process. Cost: one vDSO call per read.

/// Picoseconds since an arbitrary origin (boot), from `CLOCK_MONOTONIC_RAW`.
pub fn now_ps() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC_RAW exists on Linux ≥ 2.6.28.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000_000 + ts.tv_nsec as u64 * 1_000
}

/// Nanoseconds since the epoch from `CLOCK_REALTIME`: the clock of the kernel's receive
/// timestamps in TPACKET ring headers (used to measure how long a frame waited in a ring).
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic() {
        let a = super::now_ps();
        let b = super::now_ps();
        assert!(b >= a);
    }
}
