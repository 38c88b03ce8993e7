//! The dataplane's clock: `clock_gettime(CLOCK_MONOTONIC_RAW)` (the vDSO reads the TSC, so
//! one read costs tens of nanoseconds and no system call) converted to integer picoseconds,
//! the core's unit. The core never reads it: the dataplane passes `now_ps` in.
//!
//! Invariant: non-decreasing within a process. Its origin is the process's first read, not
//! the boot: 64 bits of picoseconds last 213 days, and counted from boot they ran out on any
//! host up longer than that (the product wrapped in release builds, sending time back to
//! near zero). So a process may run for 213 days; past that, [`now_ps`] panics with a
//! message saying so rather than hand the engine a time that went backwards. Every read takes
//! the origin before its own reading (whichever thread set it), so no reading is older than
//! the origin it is counted from. Cost: one vDSO call per read, through libc's
//! `clock_gettime`. Not rustix's: it finds the vDSO by parsing the auxiliary vector's ELF
//! image itself, which crashes under valgrind (its first read faulted in `check_elf_base`),
//! and the benchmarks' instruction counts are taken under valgrind.

use std::sync::OnceLock;

/// The process's first reading of `CLOCK_MONOTONIC_RAW`: (seconds, nanoseconds).
static ORIGIN: OnceLock<(u64, u64)> = OnceLock::new();

/// Picoseconds since this process first read the clock, from `CLOCK_MONOTONIC_RAW`.
pub fn now_ps() -> u64 {
    // The origin first, then the reading: the origin is a reading some thread took before
    // this one, so it is never later. Read the other way round, a thread could take its
    // reading, then find an origin another thread had just set from a later one.
    let origin = *ORIGIN.get_or_init(monotonic_raw);
    since(origin, monotonic_raw())
}

/// `CLOCK_MONOTONIC_RAW` as (seconds, nanoseconds).
fn monotonic_raw() -> (u64, u64) {
    read(libc::CLOCK_MONOTONIC_RAW)
}

/// Clock `id` as (seconds, nanoseconds).
fn read(id: libc::clockid_t) -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; the clocks read
    // here exist on every Linux weft runs on, so the call cannot fail.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    debug_assert_eq!(r, 0, "clock_gettime({id}) failed");
    (ts.tv_sec as u64, ts.tv_nsec as u64)
}

/// Picoseconds from `origin` to `now`, both (seconds, nanoseconds) of one clock; 0 when
/// `now` is before `origin`.
fn since(origin: (u64, u64), now: (u64, u64)) -> u64 {
    let ns = |(s, n): (u64, u64)| u128::from(s) * 1_000_000_000 + u128::from(n);
    // Saturating: [`now_ps`] never hands this a reading older than its origin, but a clock
    // that stepped back (a hypervisor's, say) must cost a time of 0, not an overflow (a
    // panic in debug builds, a time near 2^64 ps in release ones).
    let ns = ns(now).saturating_sub(ns(origin));
    u64::try_from(ns * 1_000).unwrap_or_else(|_| {
        panic!(
            "weft's picosecond clock covers 213 days from the process's start and this one \
             has run {} days: restart it",
            ns / 86_400_000_000_000
        )
    })
}

/// Nanoseconds since the epoch from `CLOCK_REALTIME`: the clock of the kernel's receive
/// timestamps in TPACKET ring headers (used to measure how long a frame waited in a ring).
pub fn realtime_ns() -> u64 {
    let (s, n) = read(libc::CLOCK_REALTIME);
    s * 1_000_000_000 + n
}

/// Nanoseconds of CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`): what a
/// benchmark charges to the code it runs on one thread.
pub fn thread_cpu_ns() -> u64 {
    let (s, n) = read(libc::CLOCK_THREAD_CPUTIME_ID);
    s * 1_000_000_000 + n
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic() {
        let a = super::now_ps();
        let b = super::now_ps();
        assert!(b >= a);
    }

    /// Counted from the process's first read, not the boot: a host up 300 days (whose
    /// uptime in picoseconds no longer fits in 64 bits) still gets small, exact times.
    #[test]
    fn counts_from_the_first_read_not_the_boot() {
        const DAY_S: u64 = 86_400;
        let origin = (300 * DAY_S, 999_999_999);
        assert_eq!(super::since(origin, origin), 0);
        assert_eq!(super::since(origin, (300 * DAY_S + 1, 0)), 1_000);
        assert_eq!(
            super::since(origin, (301 * DAY_S + 1, 999_999_999)),
            (DAY_S + 1) * 1_000_000_000_000
        );
        // 213 days fit; 214 do not.
        let _ = super::since((0, 0), (213 * DAY_S, 0));
        let late = std::panic::catch_unwind(|| super::since((0, 0), (214 * DAY_S, 0)));
        assert!(
            late.is_err(),
            "214 days past the origin must not wrap silently"
        );
    }

    /// A reading before the origin (the origin set by another thread from a later reading,
    /// as it could be before [`super::now_ps`] read the origin first) is no time at all, not
    /// an overflow: it panicked in debug builds.
    #[test]
    fn a_reading_before_the_origin_is_zero() {
        let origin = (100, 500);
        assert_eq!(super::since(origin, (100, 499)), 0);
        assert_eq!(super::since(origin, (99, 999_999_999)), 0);
        assert_eq!(super::since(origin, (0, 0)), 0);
        assert_eq!(super::since(origin, (100, 501)), 1_000);
    }
}
