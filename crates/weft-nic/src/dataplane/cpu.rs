//! Where the loop's thread runs: pinning it to one CPU and moving the control threads off
//! it, its scheduler slice, and the idle wait (all through weft-sys).
//!
//! Invariants: control threads never share the pinned loop's CPU when another is allowed.
//! Cost: one system call each, at start (the idle wait: one `ppoll` per idle pass).

/// Waits until one of `fds` is readable or `ns` nanoseconds have passed (`ppoll(2)`).
pub(super) fn wait_readable(fds: &mut [libc::pollfd], ns: u64) {
    weft_sys::sched::wait_readable(fds, ns)
}

/// The CPUs the control threads run on once the loop is pinned ([`pin_to_cpu`]): those the
/// process could use before, less the loop's. Unset while nothing is pinned, or when the
/// loop's CPU was the only one.
pub(super) static CONTROL_CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// The CPUs the calling thread may run on (`sched_getaffinity(2)`).
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    weft_sys::sched::allowed_cpus()
}

/// Moves the calling thread off the loop's CPU, onto the CPUs the process could use before
/// [`pin_to_cpu`] less the loop's (nothing when the loop is not pinned). The control
/// threads ([`crate::ctl`]: accepting connections, reading requests, compiling a reloaded
/// policy) start with it: threads inherit the affinity of the thread that makes them, and
/// the loop's thread, pinned first, makes them, so they would otherwise take turns with the
/// busy-polling loop on its one CPU (a reload's compile of ~90 ms would stall forwarding
/// for as long).
pub fn away_from_the_loop() {
    let Some(cpus) = CONTROL_CPUS.get() else {
        return;
    };
    // Best effort: a refusal leaves the thread where it was.
    let _ = weft_sys::sched::set_cpus(cpus);
}

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity(2)`); the control threads it
/// starts afterwards move to the other CPUs it could use ([`away_from_the_loop`]).
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    let before = allowed_cpus().unwrap_or_default();
    if let Err(e) = weft_sys::sched::set_cpus(&[cpu]) {
        if e.kind() == std::io::ErrorKind::InvalidInput && e.raw_os_error().is_none() {
            // Out of the set's range: refused before the call.
            return Err(e);
        }
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        // EINVAL: no CPU of the set is one this process may run on.
        let why = if e.raw_os_error() == Some(libc::EINVAL) {
            "not a CPU this process may run on".to_string()
        } else {
            e.to_string()
        };
        return Err(std::io::Error::new(
            e.kind(),
            format!("--cpu {cpu}: {why} (it may run on {cpus} CPUs; see `nproc`)"),
        ));
    }
    let others: Vec<usize> = before.into_iter().filter(|&c| c != cpu).collect();
    if !others.is_empty() {
        let _ = CONTROL_CPUS.set(others);
    }
    Ok(())
}

/// Sets the calling thread's EEVDF slice (`sched_setattr(2)`, SCHED_OTHER with
/// `sched_runtime`; the kernel accepts 100 µs to 100 ms), keeping its nice value.
pub fn set_slice(us: u64) -> std::io::Result<()> {
    set_slice_raw(us).map_err(|e| std::io::Error::new(e.kind(), format!("--slice-us {us}: {e}")))
}

/// [`set_slice`] without allocating (only system calls: usable between `fork` and `exec`,
/// e.g. in `CommandExt::pre_exec`; the slice is inherited across `exec`).
pub fn set_slice_raw(us: u64) -> std::io::Result<()> {
    weft_sys::sched::set_slice_raw(us)
}
