//! Tearing a testbed down: deleting its namespaces (the processes inside killed first),
//! the control sockets and interface claims a killed daemon left, and doing so on SIGINT,
//! SIGTERM or SIGHUP ([`tear_down_on_signal`]) rather than leave it all behind.
//!
//! Invariants: only namespaces named `PREFIX-*` are touched; after a teardown no process of
//! the testbed is left in `/proc`. Cost: a few `ip` commands and a `/proc` walk.

use super::*;

/// [`down`], and the directory a killed `weft testbed bench` left ([`bench_dir`]): what
/// `weft testbed down` and an interrupted testbed clean up.
pub fn down_all(prefix: &str) -> Removed {
    let _ = std::fs::remove_dir_all(bench_dir(prefix));
    down(prefix)
}

/// Deletes every namespace named `prefix-*` (killing the processes inside first) and the
/// control sockets a killed daemon may have left. What a testbed's setup and teardown run;
/// the benchmark's directory stays (see [`down_all`]).
pub fn down(prefix: &str) -> Removed {
    let mut removed = Removed::default();
    for f in [
        format!("weft-testbed-{prefix}.sock"),
        format!("weft-bench-{prefix}.sock"),
    ] {
        let _ = std::fs::remove_file(std::env::temp_dir().join(f));
    }
    let list = sh(&["ip", "netns", "list"]).unwrap_or_default();
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if name.starts_with(&format!("{prefix}-")) {
            // Before it goes: the namespace's inode names the lock files of the interfaces
            // a `weft run` claimed there, which SIGKILL leaves behind.
            let ino = std::fs::metadata(Path::new("/run/netns").join(name))
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .ok();
            if let Ok(pids) = sh(&["ip", "netns", "pids", name]) {
                let mut killed = Vec::new();
                for pid in pids.split_whitespace() {
                    if let Ok(p) = pid.parse::<u32>() {
                        weft_sys::process::kill(p);
                        killed.push(p);
                    }
                }
                removed.killed += killed.len();
                wait_gone(&killed);
            }
            let _ = sh(&["ip", "netns", "del", name]);
            if let Some(ino) = ino {
                remove_claims(ino);
            }
            removed.namespaces.push(name.to_string());
        }
    }
    removed
}

/// The signal that interrupted this process's testbed ([`tear_down_on_signal`]; 0: none).
pub(super) static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// SIGKILLs every descendant of this process (found through /proc), children first;
/// returns how many.
pub(super) fn kill_descendants() -> usize {
    let me = std::process::id();
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`; COMM may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![me];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(c, pp)| pp == p && c != me)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    let mut killed = Vec::new();
    for &pid in &found[1..] {
        if weft_sys::process::kill(pid) {
            killed.push(pid);
        }
    }
    wait_gone(&killed);
    killed.len()
}

/// Waits, at most two seconds, until every process of `pids` has exited (gone, or a zombie
/// whose parent has yet to reap it). SIGKILL takes effect at once, but a process releasing
/// its memory and sockets (a `weft run` unmapping its rings) still shows in `/proc` as
/// running for some milliseconds: whoever looks right after a teardown must not find it.
pub(super) fn wait_gone(pids: &[u32]) {
    let exited = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    };
    let t = Instant::now();
    while !pids.iter().all(exited) && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The signal [`tear_down_on_signal`] caught, if one came.
pub(super) fn interrupted() -> Option<i32> {
    Some(INTERRUPTED.load(Ordering::Relaxed)).filter(|&s| s != 0)
}

/// After a signal [`tear_down_on_signal`] caught, never returns: its thread is tearing the
/// testbed down and ends the process with 128 + the signal's number. Otherwise returns at
/// once. The main thread calls it when its work ends, which a signal may have cut short
/// (`interrupted by signal 15`): ending the process there would exit 1 before the teardown
/// is done, and leave part of the testbed behind.
pub fn wait_if_interrupted() {
    if interrupted().is_some() {
        loop {
            std::thread::park();
        }
    }
}

/// From now on SIGINT, SIGTERM or SIGHUP tear down everything under `prefix` ([`down`]: the
/// processes in its namespaces, among them `weft run` and the applications, the namespaces
/// and the control sockets), say so on stderr and exit with 128 + the signal's number, as a
/// shell reports a process the signal killed. Without it the signal kills only this process
/// and leaves all of that behind (`weft testbed run` and `bench`, which start them). The
/// handler only records the signal; a thread of its own does the work (Ctrl-C also reaches
/// the children, whose exits the main thread may be handling meanwhile).
pub fn tear_down_on_signal(prefix: &str) -> R<()> {
    let prefix = prefix.to_string();
    std::thread::Builder::new()
        .name("weft-testbed-signals".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(20));
            let Some(sig) = interrupted() else { continue };
            let name = match sig {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            eprintln!("testbed: {name}: deleting {prefix}-* and the processes in them");
            // This process's own children first (`weft run`, the applications): one started
            // just before a namespace is deleted would run on, unseen, in the deleted
            // namespace. Twice, as the main thread may have been starting a process or
            // making a namespace meanwhile (it starts and makes no more once the signal is
            // recorded: [`Child::spawn`] and [`Testbed::up`] refuse).
            let mut r = Removed {
                killed: kill_descendants(),
                ..down_all(&prefix)
            };
            std::thread::sleep(Duration::from_millis(50));
            let killed = kill_descendants();
            let again = down_all(&prefix);
            r.killed += killed + again.killed;
            r.namespaces.extend(again.namespaces);
            eprintln!("testbed: {}", r.describe(&prefix));
            std::process::exit(128 + sig);
        })
        .map_err(|e| TestbedError(format!("cannot start the signal thread: {e}")))?;
    weft_sys::process::record_on(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP], &INTERRUPTED);
    Ok(())
}

/// Removes the interface claims' lock files of the network namespace with inode `ino`.
pub(super) fn remove_claims(ino: u64) {
    let start = weft_nic::dataplane::claim_prefix(ino);
    for e in std::fs::read_dir(weft_nic::dataplane::CLAIM_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&start))
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// What [`down`] removed.
#[derive(Debug, Default)]
pub struct Removed {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes killed in them.
    pub killed: usize,
}

impl Removed {
    /// What was removed, for a person: `deleted P-nic, P-t1 (2 processes in them killed)`,
    /// or that there was nothing to delete.
    pub fn describe(&self, prefix: &str) -> String {
        if self.namespaces.is_empty() {
            return format!("nothing to delete: no namespace {prefix}-*");
        }
        format!(
            "deleted {} ({} in them killed)",
            self.namespaces.join(", "),
            match self.killed {
                1 => "1 process".to_string(),
                n => format!("{n} processes"),
            }
        )
    }
}
