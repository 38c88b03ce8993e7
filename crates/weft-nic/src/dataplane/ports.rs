//! Where frames come from and go to: the [`Port`] trait, the backends that open one
//! ([`Backend`]), claiming an interface for one `weft run` per network namespace (a lock
//! file under [`CLAIM_DIR`]), and AF_PACKET sockets as ports.
//!
//! Invariants: at most one daemon forwards an interface in a namespace (the `flock` on its
//! claim file is held while the port is open). Cost: a file and a lock per port, at start.

use super::*;

/// Where frames come from and go to: an AF_PACKET socket in production, memory in tests
/// (so the loop's conservation and robustness are tested without root).
pub trait Port {
    /// Calls `f` on the frames ready now, about `max_frames` at most (a TPACKET_V3 ring
    /// hands over whole blocks), with the kernel's receive timestamp (`CLOCK_REALTIME` ns;
    /// 0 when unknown).
    fn recv_batch(&mut self, max_frames: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize;
    /// Sends a frame; `Ok(false)` when it could not be queued.
    fn send(&self, frame: &[u8]) -> std::io::Result<bool>;
    /// Pushes out frames `send` queued without a system call (AF_XDP batches its kicks);
    /// called after each transmit step of the loop.
    fn flush(&self) {}
    /// A descriptor that `poll(2)` reports readable when frames are ready, if the port has
    /// one: an idle loop then waits in `ppoll(2)` and wakes at once when a frame arrives
    /// (otherwise it sleeps a fixed time).
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Whether the port's link is up (`None`: unknown, taken as up). The loop asks the
    /// uplink's every [`LINK_CHECK_PS`] and holds departures while it is down.
    fn link_up(&self) -> Option<bool> {
        None
    }
    /// The port's own counters for `ctl stats` (`ports`), if it has any.
    fn stats(&self) -> Option<PortStats> {
        None
    }
}

/// Where `weft run` gets and puts frames (`--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// AF_PACKET with TPACKET rings ([`crate::afpacket`]).
    #[default]
    AfPacket,
    /// AF_XDP sockets and an XDP redirect program (`crate::afxdp`, cargo feature `af-xdp`).
    AfXdp,
}

impl Backend {
    pub const NAMES: [&'static str; 2] = ["af-packet", "af-xdp"];

    pub fn name(self) -> &'static str {
        match self {
            Backend::AfPacket => "af-packet",
            Backend::AfXdp => "af-xdp",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "af-packet" => Some(Backend::AfPacket),
            "af-xdp" => Some(Backend::AfXdp),
            _ => None,
        }
    }

    /// Whether this build has the backend (AF_XDP needs the `af-xdp` feature).
    pub fn available(self) -> bool {
        match self {
            Backend::AfPacket => true,
            Backend::AfXdp => cfg!(feature = "af-xdp"),
        }
    }
}

/// Descriptors of all flow rings together (`ring × max_queues`) that [`run`] accepts (checked
/// before it opens anything; [`run_ports`], given its ports, does not check).
pub const MAX_DESCRIPTORS: u64 = 1 << 25;

/// An interface claimed by this daemon (see [`claim_interface`]): the lock file, held open
/// (the lock lasts as long as the descriptor).
#[derive(Debug)]
pub(super) struct Claim {
    /// The lock file, locked; closing it (at drop, or when the process dies) releases it.
    _lock: std::fs::File,
    /// Its path, removed at drop while still locked.
    pub(super) path: std::path::PathBuf,
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Removed while locked, so a daemon that opened it meanwhile finds, once it holds
        // the lock, that the path no longer names its file, and takes a new one (below).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Claims interface `ifname` for this process: an exclusive `flock(2)` on
/// `/run/weft/iface-NETNS-IFINDEX.lock` (NETNS: the network namespace's inode), held while the
/// daemon runs. Two daemons on one interface would each receive every frame (AF_PACKET hands
/// each socket a copy) and both forward it; the second is refused, naming the first's pid.
/// The lock ends with its process, so a killed daemon leaves no claim behind (only its file,
/// which the next claim reuses); a daemon that exits removes its file. A lock is good only
/// while the path still names the locked file (a daemon that exited may have removed it
/// between our open and our lock): otherwise the claim starts again. `None` when there is
/// nothing to claim (no such interface: opening it reports that) or no lock can be made
/// (`/run/weft` not writable: not root).
/// Where the interface claims' lock files are.
pub const CLAIM_DIR: &str = "/run/weft";

/// The start of the name of every claim lock file in the network namespace with inode
/// `netns` (`iface-NETNS-IFINDEX.lock`): a daemon killed with SIGKILL leaves its files, which
/// `weft testbed down` removes by it with the namespace.
pub fn claim_prefix(netns: u64) -> String {
    format!("iface-{netns}-")
}

pub(super) fn claim_interface(ifname: &str, what: &str) -> Result<Option<Claim>, RunError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::MetadataExt;
    // No such interface: nothing to claim (opening its port says why).
    let Ok(ifindex) = crate::afpacket::ifindex(ifname) else {
        return Ok(None);
    };
    let netns = std::fs::metadata("/proc/self/ns/net").map_or(0, |m| m.ino());
    let dir = std::path::Path::new(CLAIM_DIR);
    if std::fs::create_dir_all(dir).is_err() {
        return Ok(None);
    }
    let path = dir.join(format!("{}{ifindex}.lock", claim_prefix(netns)));
    // Each retry follows another daemon's exit between our open and our lock: a few suffice.
    for _ in 0..16 {
        let Ok(mut f) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
        else {
            return Ok(None);
        };
        if !matches!(weft_sys::fs::try_lock_exclusive(&f), Ok(true)) {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            return Err(RunError::Config(format!(
                "{what}: `{ifname}` is in use by another weft run (pid {}) in this network \
                 namespace; two would both forward every frame",
                pid.trim()
            )));
        }
        let same =
            |a: &std::fs::Metadata, b: &std::fs::Metadata| (a.dev(), a.ino()) == (b.dev(), b.ino());
        match (f.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) if same(&a, &b) => {
                let _ = f.set_len(0);
                let _ = f.rewind();
                let _ = write!(f, "{}", std::process::id());
                return Ok(Some(Claim { _lock: f, path }));
            }
            _ => continue,
        }
    }
    Ok(None)
}

impl RunError {
    /// The error with what it concerns in front (`--tenant b=t2: ...`).
    pub(super) fn naming(self, what: &str) -> RunError {
        match self {
            RunError::Io(e) => RunError::Io(std::io::Error::new(e.kind(), format!("{what}: {e}"))),
            RunError::Policy(m) => RunError::Policy(m),
            RunError::Config(m) => RunError::Config(format!("{what}: {m}")),
            RunError::Backend(m) => RunError::Backend(format!("{what}: {m}")),
        }
    }
}

pub(super) fn open_port(
    cfg: &Config,
    ifname: &str,
    ring: RingConfig,
) -> Result<Box<dyn Port>, RunError> {
    match cfg.backend {
        Backend::AfPacket => Ok(Box::new(PacketSocket::open(ifname, ring)?)),
        #[cfg(feature = "af-xdp")]
        Backend::AfXdp => crate::afxdp::XdpPort::open(ifname)
            .map(|p| Box::new(p) as Box<dyn Port>)
            .map_err(|e| RunError::Backend(e.to_string())),
        #[cfg(not(feature = "af-xdp"))]
        Backend::AfXdp => Err(RunError::Backend(
            "the af-xdp backend is not in this build (cargo feature `af-xdp` of weft-nic)".into(),
        )),
    }
}

/// The counters of the ports that have them, the tenants' then the uplink's.
pub(super) fn port_stats(tenants: &[Box<dyn Port>], uplink: &dyn Port) -> Vec<PortStats> {
    tenants
        .iter()
        .map(|p| p.stats())
        .chain(std::iter::once(uplink.stats()))
        .flatten()
        .collect()
}

/// Whether interface `name`'s link is up, read once ([`LinkState::up`]: from
/// `/sys/class/net/NAME/operstate`; `None` when it cannot be read). A port that is asked
/// again and again keeps a [`LinkState`] instead, which reads without allocating.
pub fn link_up(name: &str) -> Option<bool> {
    LinkState::new(name).up()
}

/// How often the loop reads the uplink's link state, ps (100 ms).
pub const LINK_CHECK_PS: u64 = 100_000_000_000;

impl Port for PacketSocket {
    fn recv_batch(&mut self, max_frames: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        PacketSocket::recv_batch(self, max_frames, f)
    }
    fn send(&self, frame: &[u8]) -> std::io::Result<bool> {
        PacketSocket::send(self, frame)
    }
    fn flush(&self) {
        PacketSocket::flush(self)
    }
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd())
    }
    fn stats(&self) -> Option<PortStats> {
        Some(PortStats::AfPacket(self.port_stats()))
    }
    fn link_up(&self) -> Option<bool> {
        PacketSocket::link_up(self)
    }
}
