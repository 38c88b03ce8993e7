//! Where the software NIC's process runs, so its busy-polling loop gets its core on a busy
//! host.
//!
//! With the kernel's autogroup scheduling (`/proc/sys/kernel/sched_autogroup_enabled`, on in
//! most distributions), CPU time is shared first between *sessions*, and `nice` only orders
//! tasks within one: `nice -n -15 weft run` started from a shell whose session also runs a
//! build still gets one session's share of a contended core (measured: a third of it, and
//! 162-180 Mbit/s against HTB's 458-469 on the same topology). A cgroup of its own with a
//! large CPU weight takes the process out of its session's autogroup and gives it the weight
//! asked for against every other group: [`Placement::new`] makes `weft-PID` under the CPU
//! controller's root (cgroup v2 at `/sys/fs/cgroup` when it has the `cpu` controller, else
//! cgroup v1's `/sys/fs/cgroup/cpu`; inside `ip netns exec`, whose sysfs has no cgroups,
//! the same hierarchy mounted for the process: [`find`]), sets its weight (v2 `cpu.weight`, 1-10,000, default
//! 100; v1 `cpu.shares`, the same weight × 1,024 / 100) and moves the process in. Dropping
//! it moves the process back to the root and removes the group; groups left by a killed
//! daemon (`weft-PID` whose process is gone) are removed at the next start, as are the empty
//! mount points (`weft-cgroup-PID` in the temporary directory) such a daemon left.
//!
//! Invariants: only groups named `weft-PID` are created or removed, and only empty ones of a
//! process that no longer exists (or this one's). Cost: a few file writes at start and exit.
//! Hand-written: a handful of writes to the cgroup file system; no crate needed.

use std::io;
use std::path::{Path, PathBuf};

/// Which cgroup interface holds the CPU controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// A process placed in a cgroup of its own (see the module doc); put back on drop.
#[derive(Debug)]
pub struct Placement {
    /// The controller's root.
    root: PathBuf,
    /// The group made.
    group: PathBuf,
    pid: u32,
    version: Version,
    /// The weight written (v2 scale).
    pub weight: u32,
}

/// Errors name the path and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "no cgroup CPU controller found (looked for {v2}/cgroup.controllers with `cpu`, and {v1})"
    )]
    NoController { v2: String, v1: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: io::Error,
    },
    #[error(
        "--cpu-weight {0}: between 1 and 10000 (the cgroup v2 scale; 100 is a default group's)"
    )]
    Weight(u32),
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> PlacementError {
    let path = path.display().to_string();
    move |source| PlacementError::Io { what, path, source }
}

/// The CPU controller under `cgroup_fs` (normally `/sys/fs/cgroup`): its root and version.
pub fn controller(cgroup_fs: &Path) -> Result<(PathBuf, Version), PlacementError> {
    let v2 = cgroup_fs.join("cgroup.controllers");
    if std::fs::read_to_string(&v2).is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu")) {
        return Ok((cgroup_fs.to_path_buf(), Version::V2));
    }
    let v1 = cgroup_fs.join("cpu");
    if v1.join("cpu.shares").exists() {
        return Ok((v1, Version::V1));
    }
    Err(PlacementError::NoController {
        v2: cgroup_fs.display().to_string(),
        v1: v1.display().to_string(),
    })
}

/// The CPU controller mounted by [`find`] (unmounted and its directory removed on drop).
#[derive(Debug)]
pub struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        umount(&self.0);
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Mounts a cgroup file system of `fstype` (`cgroup2`, or `cgroup` with `options`) at `at`.
fn mount(fstype: &str, options: &str, at: &Path) -> io::Result<()> {
    weft_sys::fs::mount_cgroup(fstype, options, at)
}

/// The CPU controller: under `/sys/fs/cgroup`, or, when this mount namespace has none
/// there (`ip netns exec` mounts a sysfs of its own, without cgroups), mounted for the
/// process in a directory of its own under the temporary directory (cgroup v2 if it has the
/// `cpu` controller, else v1's `cpu` hierarchy: the host's own hierarchy either way).
pub fn find() -> Result<(PathBuf, Version, Option<Mounted>), PlacementError> {
    let fs = Path::new("/sys/fs/cgroup");
    let first = match controller(fs) {
        Ok((root, v)) => return Ok((root, v, None)),
        Err(e) => e,
    };
    remove_stale(&std::env::temp_dir(), "weft-cgroup-");
    let at = std::env::temp_dir().join(format!("weft-cgroup-{}", std::process::id()));
    std::fs::create_dir_all(&at).map_err(io_err("creating", &at))?;
    let guard = Mounted(at.clone());
    if mount("cgroup2", "", &at).is_ok() {
        if let Ok((root, Version::V2)) = controller(&at) {
            return Ok((root, Version::V2, Some(guard)));
        }
        umount(&at);
    }
    if mount("cgroup", "cpu", &at).is_ok() && at.join("cpu.shares").exists() {
        return Ok((at, Version::V1, Some(guard)));
    }
    Err(first)
}

/// `weight` (v2 scale) as v1 `cpu.shares`.
pub fn shares(weight: u32) -> u64 {
    (weight as u64 * 1024 / 100).clamp(2, 262_144)
}

impl Placement {
    /// Moves process `pid` into `weft-PID` under the CPU controller found under
    /// `cgroup_fs`, with CPU weight `weight` (1-10,000; see the module doc).
    pub fn new(cgroup_fs: &Path, pid: u32, weight: u32) -> Result<Placement, PlacementError> {
        if !(1..=10_000).contains(&weight) {
            return Err(PlacementError::Weight(weight));
        }
        let (root, version) = controller(cgroup_fs)?;
        Placement::at(root, version, pid, weight)
    }

    /// [`Self::new`] under the controller root `root` of `version` (from [`find`]).
    pub fn at(
        root: PathBuf,
        version: Version,
        pid: u32,
        weight: u32,
    ) -> Result<Placement, PlacementError> {
        if !(1..=10_000).contains(&weight) {
            return Err(PlacementError::Weight(weight));
        }
        remove_stale(&root, "weft-");
        let group = root.join(format!("weft-{pid}"));
        match std::fs::create_dir(&group) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("creating", &group)(e)),
        }
        let p = Placement {
            root,
            group,
            pid,
            version,
            weight,
        };
        let (file, value) = match version {
            Version::V2 => ("cpu.weight", weight.to_string()),
            Version::V1 => ("cpu.shares", shares(weight).to_string()),
        };
        let f = p.group.join(file);
        std::fs::write(&f, value).map_err(io_err("writing", &f))?;
        let procs = p.group.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string()).map_err(io_err("moving the process to", &procs))?;
        Ok(p)
    }

    /// The group's directory.
    pub fn group(&self) -> &Path {
        &self.group
    }

    /// Which interface it used.
    pub fn version(&self) -> Version {
        self.version
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        let _ = std::fs::write(self.root.join("cgroup.procs"), self.pid.to_string());
        let _ = std::fs::remove_dir(&self.group);
    }
}

/// Removes the empty directories `PREFIXPID` under `dir` whose process is gone: the
/// `weft-cgroup-PID` mount points of daemons killed before they could remove their own (their
/// mounts went with their mount namespaces), and the `weft-PID` groups under a cgroup root
/// (rmdir fails on a group that still holds tasks, and `remove_dir` on a directory that is
/// not empty, so nothing live is touched).
fn remove_stale(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Detaches the mount at `at` (errors ignored: nothing may be mounted there any more).
fn umount(at: &Path) {
    let _ = weft_sys::fs::detach(at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_of_gone_processes_are_removed_and_only_those() {
        let dir = std::env::temp_dir().join(format!("weft-mp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid no process has (above the kernel's pid_max), ours, and one holding a file.
        let gone = dir.join("weft-cgroup-4294967295");
        let ours = dir.join(format!("weft-cgroup-{}", std::process::id()));
        let full = dir.join("weft-cgroup-4294967294");
        for d in [&gone, &ours, &full] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(full.join("keep"), "x").unwrap();
        remove_stale(&dir, "weft-cgroup-");
        assert!(!gone.exists());
        assert!(ours.exists() && full.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn weights_map_to_v1_shares() {
        assert_eq!(shares(100), 1024);
        assert_eq!(shares(10_000), 102_400);
        assert_eq!(shares(1), 10);
    }

    #[test]
    fn a_weight_out_of_range_is_refused_by_name() {
        let e = Placement::new(Path::new("/nonexistent"), 1, 0).unwrap_err();
        assert!(e.to_string().contains("--cpu-weight 0"), "{e}");
        let e = Placement::new(Path::new("/nonexistent"), 1, 100).unwrap_err();
        assert!(e.to_string().contains("no cgroup CPU controller"), "{e}");
    }

    /// As root with a CPU controller: a child process is moved into `weft-PID` with the
    /// weight asked for, and back out (the group removed) on drop.
    #[test]
    fn a_process_is_placed_and_put_back() {
        if !weft_sys::process::is_root() {
            eprintln!("skipped: needs root to make a cgroup");
            return;
        }
        let fs = Path::new("/sys/fs/cgroup");
        let Ok((_, version)) = controller(fs) else {
            eprintln!("skipped: no cgroup CPU controller here");
            return;
        };
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let placed = Placement::new(fs, pid, 5_000);
        let cgroup_of = || std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let result = (|| {
            let p = placed.map_err(|e| e.to_string())?;
            assert_eq!(p.version(), version);
            let name = format!("weft-{pid}");
            assert!(cgroup_of().contains(&name), "{}", cgroup_of());
            let (file, want) = match version {
                Version::V2 => ("cpu.weight", "5000".to_string()),
                Version::V1 => ("cpu.shares", shares(5_000).to_string()),
            };
            let got = std::fs::read_to_string(p.group().join(file)).unwrap();
            assert_eq!(got.trim(), want);
            let group = p.group().to_path_buf();
            drop(p);
            assert!(!group.exists(), "{} left behind", group.display());
            assert!(!cgroup_of().contains(&name), "{}", cgroup_of());
            Ok::<(), String>(())
        })();
        let _ = child.kill();
        let _ = child.wait();
        result.unwrap();
    }
}
