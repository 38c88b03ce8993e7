//! What the integration tests share: a namespace with a veth pair `xa` (two receive queues)
//! ↔ `xb`, deleted on drop; numbered test frames; a temporary directory of the test's own.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A directory of the test's own (`weft-TAG-PID` in the temporary directory), removed on
/// drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("weft-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Test frames carry a local experimental EtherType, so stray frames (none are expected:
/// IPv6 is off in the namespace) cannot be mistaken for them.
pub const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A namespace with the veth pair; deleted on drop.
pub struct Ns(pub String);

impl Ns {
    pub fn new(tag: &str) -> Result<Ns, String> {
        if std::env::var_os("WEFT_SKIP_NETNS").is_some() {
            return Err("WEFT_SKIP_NETNS is set".into());
        }
        if !weft_sys::process::is_root() {
            return Err("not root (namespaces and packet sockets need it)".into());
        }
        let name = format!("wx{}{tag}", std::process::id() % 100_000);
        let _ = ip(&["netns", "del", &name]);
        if !ip(&["netns", "add", &name]) {
            return Err("`ip netns add` failed (no network namespaces here)".into());
        }
        let ns = Ns(name);
        for k in ["all", "default"] {
            let _ = Command::new("ip")
                .args(["netns", "exec", &ns.0, "sysctl", "-qw"])
                .arg(format!("net.ipv6.conf.{k}.disable_ipv6=1"))
                .status();
        }
        let n = ns.0.as_str();
        let ok = ip(&[
            "-n",
            n,
            "link",
            "add",
            "xa",
            "numrxqueues",
            "2",
            "numtxqueues",
            "2",
            "type",
            "veth",
            "peer",
            "name",
            "xb",
        ]) && ip(&["-n", n, "link", "set", "xa", "up"])
            && ip(&["-n", n, "link", "set", "xb", "up"]);
        if !ok {
            return Err("cannot create veth pairs here".into());
        }
        Ok(ns)
    }

    /// [`Ns::new`], or `None` after printing why the test is skipped.
    pub fn or_skip(tag: &str) -> Option<Ns> {
        Ns::new(tag).map_err(|why| println!("skipped: {why}")).ok()
    }

    /// Runs `f` on a thread inside the namespace (the calling thread keeps its own).
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.0, f)
    }

    pub fn link_show(&self, dev: &str) -> String {
        let o = Command::new("ip")
            .args(["-n", &self.0, "link", "show", dev])
            .output()
            .expect("ip link show");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

/// Frame `i`: broadcast destination, a made-up source, the test EtherType, then `i` and a
/// pattern derived from it; 60 to 1514 bytes.
pub fn frame(i: u32) -> Vec<u8> {
    let len = 60 + (i as usize * 37) % (1514 - 60 + 1);
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x77, 0x01]);
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(&i.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ i) as u8);
    }
    f
}

/// Frame `i` cut or padded (with 0x5a) to `len` bytes.
pub fn frame_of_len(i: u32, len: usize) -> Vec<u8> {
    let mut f = frame(i);
    f.resize(len, 0x5a);
    f
}

pub fn test_frame_index(f: &[u8]) -> Option<u32> {
    (f.len() >= 18 && f[12..14] == ETHERTYPE)
        .then(|| u32::from_be_bytes(f[14..18].try_into().unwrap()))
}

/// Runs `f` on a thread inside network namespace `name` (`ip netns` name; the calling thread
/// keeps its own).
pub fn in_netns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{name}");
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(&path).expect("namespace file");
            // Moves only this thread into the namespace `file` refers to.
            weft_sys::net::enter_netns(&file).unwrap_or_else(|e| panic!("setns: {e}"));
            f()
        })
        .join()
        .expect("namespace thread")
    })
}
