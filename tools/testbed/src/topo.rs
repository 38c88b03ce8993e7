//! The testbed's namespaces and links ([`Testbed`]: tenants, NIC, receiver, one veth pair
//! per link, offloads off) and the processes started in them ([`Child`]), both removed by
//! their `Drop`, also on errors and panics.
//!
//! Invariants: every namespace made is deleted on drop unless kept; every child is killed
//! and reaped. Cost: `ip`, `tc` and `ethtool` commands at setup.

use super::*;

/// Live namespaces; deleted on drop unless [`Testbed::keep`] was called.
pub struct Testbed {
    pub prefix: String,
    pub tenants: usize,
    keep: bool,
}

impl Testbed {
    /// Namespace names.
    pub fn nic(&self) -> String {
        format!("{}-nic", self.prefix)
    }
    pub fn rx(&self) -> String {
        format!("{}-rx", self.prefix)
    }
    pub fn tenant(&self, i: usize) -> String {
        format!("{}-t{i}", self.prefix)
    }
    /// Every namespace, tenants first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = (1..=self.tenants).map(|i| self.tenant(i)).collect();
        v.push(self.nic());
        v.push(self.rx());
        v
    }

    /// Creates the namespaces and links (removing leftovers of the same prefix first).
    pub fn up(prefix: &str, tenants: usize) -> R<Testbed> {
        if !(1..=16).contains(&tenants) {
            return Err(TestbedError("1 to 16 tenants".into()));
        }
        if let Some(sig) = interrupted() {
            return Err(TestbedError(format!("interrupted by signal {sig}")));
        }
        let removed = down(prefix);
        if !removed.namespaces.is_empty() {
            eprintln!(
                "testbed: replaced what was there: {}",
                removed.describe(prefix)
            );
        }
        let tb = Testbed {
            prefix: prefix.to_string(),
            tenants,
            keep: false,
        };
        for ns in tb.namespaces() {
            sh(&["ip", "netns", "add", &ns])?;
            nsx(&ns, &["ip", "link", "set", "lo", "up"])?;
            let _ = nsx(&ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            let _ = nsx(
                &ns,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            );
        }
        let nic = tb.nic();
        let mut links: Vec<(String, String, String)> = (1..=tenants)
            .map(|i| (tb.tenant(i), format!("t{i}"), format!("10.77.0.{i}/24")))
            .collect();
        links.push((tb.rx(), "up".to_string(), "10.77.0.100/24".to_string()));
        for (ns, nic_if, addr) in &links {
            sh(&[
                "ip", "-n", &nic, "link", "add", "name", nic_if, "type", "veth", "peer", "name",
                "eth0", "netns", ns,
            ])?;
            nsx(ns, &["ip", "addr", "add", addr, "dev", "eth0"])?;
            nsx(ns, &["ip", "link", "set", "eth0", "up"])?;
            nsx(
                ns,
                &[
                    "ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                ],
            )?;
            sh(&["ip", "-n", &nic, "link", "set", "dev", nic_if, "up"])?;
            let _ = nsx(
                &nic,
                &[
                    "ethtool", "-K", nic_if, "gro", "off", "tso", "off", "gso", "off",
                ],
            );
        }
        Ok(tb)
    }

    /// Leaves the namespaces in place after drop (`weft testbed up`).
    pub fn keep(mut self) {
        self.keep = true;
    }

    /// Interfaces of the software-NIC namespace bridged, with HTB on the uplink: the Linux
    /// baseline for `weights` (per tenant) at `rate_bps`. With `limit_prio` (`limit-priority`)
    /// the limit's class has two children, sockperf's port first (see [`Experiment::limit_prio`]).
    pub fn htb(
        &self,
        weights: &[u64],
        rate_bps: u64,
        limit: Option<&(String, u64)>,
        prio: bool,
        limit_prio: bool,
    ) -> R<()> {
        let nic = self.nic();
        self.bridge()?;
        let rate = format!("{rate_bps}bit");
        nsx(
            &nic,
            &[
                "tc", "qdisc", "add", "dev", "up", "root", "handle", "1:", "stab", "overhead",
                "20", "htb", "default", "999",
            ],
        )?;
        nsx(
            &nic,
            &[
                "tc", "class", "add", "dev", "up", "parent", "1:", "classid", "1:1", "htb", "rate",
                &rate, "ceil", &rate, "quantum", "1514",
            ],
        )?;
        let total: u64 = weights.iter().sum::<u64>().max(1);
        for (i, w) in weights.iter().enumerate() {
            let id = format!("1:{}", 10 + i);
            let r = format!("{}bit", rate_bps * w / total);
            // Strict priority's nearest HTB form: `prio` (lower first) on the classes.
            let p = i.to_string();
            let mut args = vec![
                "tc", "class", "add", "dev", "up", "parent", "1:1", "classid", &id, "htb", "rate",
                &r, "ceil", &rate, "quantum", "1514",
            ];
            if prio {
                args.extend(["prio", &p]);
            }
            nsx(&nic, &args)?;
            pfifo(&nic, &id)?;
            ip_filter(&nic, "2", "src", &format!("10.77.0.{}/32", i + 1), &id)?;
        }
        if let (Some((dst, lim)), true) = (limit, limit_prio) {
            self.htb_limit_prio(dst, *lim)?;
        } else if let Some((dst, lim)) = limit {
            // The per-destination limit: its own class with rate = ceil, matched first.
            let r = format!("{lim}bit");
            nsx(
                &nic,
                &[
                    "tc", "class", "add", "dev", "up", "parent", "1:1", "classid", "1:5", "htb",
                    "rate", &r, "ceil", &r, "quantum", "1514",
                ],
            )?;
            pfifo(&nic, "1:5")?;
            ip_filter(&nic, "1", "dst", &format!("{dst}/32"), "1:5")?;
        }
        // Everything else (ARP) in a small class of its own.
        nsx(
            &nic,
            &[
                "tc", "class", "add", "dev", "up", "parent", "1:1", "classid", "1:999", "htb",
                "rate", "1mbit", "ceil", &rate,
            ],
        )?;
        Ok(())
    }
}

impl Testbed {
    /// `limit-priority`'s limit in HTB, as weft's policy has it: a class 1:5 with rate =
    /// ceil = `lim` for everything sent to `dst`, and beneath it sockperf's class 1:51
    /// (prio 0, a fifth of the limit) and the rest's 1:52 (prio 1, the other four fifths),
    /// both with ceil = `lim`; each class's burst is weft's bucket
    /// ([`LIMIT_PRIO_BURST`]); filters at `prio 1`, ahead of the tenants' (`prio 2`),
    /// sockperf's (UDP to [`SOCKPERF_PORT`]) first.
    fn htb_limit_prio(&self, dst: &str, lim: u64) -> R<()> {
        let nic = self.nic();
        let burst = LIMIT_PRIO_BURST.to_string();
        let class = |parent: &str, id: &str, rate: u64, ceil: u64, prio: Option<&str>| {
            let (r, c) = (format!("{rate}bit"), format!("{ceil}bit"));
            let mut a = vec![
                "tc", "class", "add", "dev", "up", "parent", parent, "classid", id, "htb", "rate",
                &r, "ceil", &c, "burst", &burst, "cburst", &burst, "quantum", "1514",
            ];
            if let Some(p) = prio {
                a.extend(["prio", p]);
            }
            nsx(&nic, &a).map(|_| ())
        };
        class("1:1", "1:5", lim, lim, None)?;
        class("1:5", "1:51", lim / 5, lim, Some("0"))?;
        class("1:5", "1:52", lim - lim / 5, lim, Some("1"))?;
        let dst = format!("{dst}/32");
        let port = SOCKPERF_PORT.to_string();
        for id in ["1:51", "1:52"] {
            pfifo(&nic, id)?;
        }
        let mut first = vec![
            "tc", "filter", "add", "dev", "up", "parent", "1:", "protocol", "ip", "prio", "1",
            "u32", "match", "ip", "dst", &dst, "match", "ip", "protocol", "17", "0xff", "match",
            "ip", "dport", &port, "0xffff", "flowid", "1:51",
        ];
        nsx(&nic, &first)?;
        first.truncate(16); // through `dst X/32`
        first.extend(["flowid", "1:52"]);
        nsx(&nic, &first).map(|_| ())
    }
}

/// A 1000-packet FIFO under HTB class `id` of interface `up` in namespace `nic`.
fn pfifo(nic: &str, id: &str) -> R<()> {
    nsx(
        nic,
        &[
            "tc", "qdisc", "add", "dev", "up", "parent", id, "pfifo", "limit", "1000",
        ],
    )
    .map(|_| ())
}

/// A u32 filter at `prio` sending the IPv4 packets whose `dir` address (`src` or `dst`) is
/// in `cidr` to HTB class `flowid`.
fn ip_filter(nic: &str, prio: &str, dir: &str, cidr: &str, flowid: &str) -> R<()> {
    nsx(
        nic,
        &[
            "tc", "filter", "add", "dev", "up", "parent", "1:", "protocol", "ip", "prio", prio,
            "u32", "match", "ip", dir, cidr, "flowid", flowid,
        ],
    )
    .map(|_| ())
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if !self.keep {
            down(&self.prefix);
        }
    }
}

/// A child process killed (and reaped) on drop.
pub struct Child(pub std::process::Child);

impl Child {
    pub fn spawn(cmd: &mut Command) -> R<Child> {
        if let Some(sig) = interrupted() {
            return Err(TestbedError(format!("interrupted by signal {sig}")));
        }
        cmd.stdin(Stdio::null())
            .spawn()
            .map(Child)
            .map_err(|e| TestbedError(format!("{cmd:?}: {e}")))
    }
    /// Sends SIGTERM and waits up to `grace`, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        // Already gone (and reaped): its pid may be another process's by now.
        if let Ok(Some(s)) = self.0.try_wait() {
            return Some(s);
        }
        // Our own child, not yet reaped: its pid is still its own.
        weft_sys::process::terminate(self.0.id());
        let t = Instant::now();
        while t.elapsed() < grace {
            if let Ok(Some(s)) = self.0.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        self.0.wait().ok()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
