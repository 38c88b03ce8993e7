//! The forwarding benchmark ([`bench`]): a packet blaster, the configurations it is run
//! through (weft with a policy and a backend, or HTB with some classes: [`BenchConfig`]),
//! the receiver's counters, and the bridge HTB forwards through.
//!
//! Invariants: the benchmark's directory ([`bench_dir`]) is removed when it ends. Cost: the
//! benchmark's duration per configuration.

use super::*;

/// A packet blaster for the forwarding benchmark: UDP frames of `size` bytes (Ethernet
/// header included, no FCS) from `src` to `dst` (MAC `dst_mac`), source ports cycling over
/// `flows` values and destination ports over 11211, 8020, 7077, 9 (Loom Fig. 1's
/// applications), sent with `send(2)` on an AF_PACKET socket for `seconds`. Returns the
/// frames sent.
pub fn blast(
    iface: &str,
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    size: usize,
    flows: u16,
    seconds: f64,
) -> std::io::Result<u64> {
    use weft_nic::afpacket::{PacketSocket, RingConfig, RingVersion};
    let sock = PacketSocket::open(
        iface,
        RingConfig {
            version: RingVersion::V2,
            block_bytes: 4096,
            blocks: 1,
            retire_ms: 1,
            // One send(2) per frame, as an application sends.
            tx_ring: false,
        },
    )?;
    let payload = size.saturating_sub(14 + 20 + 8).max(1);
    let dports = [11211u16, 8020, 7077, 9];
    let mut frames = Vec::new();
    for f in 0..flows.max(1) {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x10], dst_mac)
            .ipv4(src, dst, 64)
            .udp(10_000 + f, dports[f as usize % dports.len()]);
        let mut v = Vec::with_capacity(size);
        b.write(&mut v, &vec![0u8; payload])
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        frames.push(v);
    }
    let t = Instant::now();
    let mut sent = 0u64;
    let mut i = 0usize;
    while t.elapsed().as_secs_f64() < seconds {
        for _ in 0..256 {
            if let Ok(true) = sock.send(&frames[i]) {
                sent += 1;
            }
            i = (i + 1) % frames.len();
        }
    }
    Ok(sent)
}

pub(super) fn rx_packets(ns: &str, dev: &str) -> u64 {
    let o = nsx(
        ns,
        &[
            "cat",
            &format!("/sys/class/net/{dev}/statistics/rx_packets"),
        ],
    );
    o.ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// One benchmark configuration.
#[derive(Debug, Clone)]
pub enum BenchConfig {
    /// weft with this policy file.
    Weft {
        label: String,
        policy: std::path::PathBuf,
        /// `weft run --backend`.
        backend: String,
    },
    /// Linux HTB with this many leaf classes (u32 filters on the UDP source port).
    Htb { classes: u32 },
}

/// The benchmark's uplink rate (`weft run --rate 100gbit`: unpaced on these links).
pub const BENCH_RATE_BPS: u64 = 100_000_000_000;

pub(super) const BENCH_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];

/// The forwarding benchmark: two tenants blast UDP frames of each size through the
/// software-NIC namespace (uplink rate 100 Gbit/s, so nothing is paced); forwarded packets
/// per second are counted at the receiver's interface. Each configuration gets a fresh
/// testbed. The frames are addressed to a MAC nobody owns, so the receiver drops them on
/// arrival and its stack costs next to nothing.
pub fn bench(
    prefix: &str,
    weft: &Path,
    configs: &[BenchConfig],
    sizes: &[usize],
    seconds: f64,
) -> R<BenchReport> {
    install_tools();
    if let Some(why) = missing_prerequisite() {
        return Err(TestbedError(format!("cannot run the benchmark: {why}")));
    }
    let mut rows = Vec::new();
    for cfg in configs {
        for &size in sizes {
            let tb = Testbed::up(prefix, 2)?;
            let rx = tb.rx();
            // A destination MAC nobody owns: the receiver's kernel drops the frames as
            // "other host" right after counting them; the bridge sends that MAC to the
            // uplink only (a static entry, no flooding).
            let dst_mac = BENCH_DST_MAC;
            let sock = std::env::temp_dir().join(format!("weft-bench-{prefix}.sock"));
            let (label, mut daemon) = match cfg {
                BenchConfig::Weft {
                    label,
                    policy,
                    backend,
                } => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", &tb.nic(), "nice", "-n", "-15"])
                        .arg(weft)
                        .args(["run", "--policy"])
                        .arg(policy)
                        .args([
                            "--uplink",
                            "up",
                            "--rate",
                            &format!("{BENCH_RATE_BPS}bit"),
                            "--ctl",
                        ])
                        .arg(&sock)
                        .args(["--tenant", "a=t1", "--tenant", "b=t2"])
                        .args(["--backend", backend])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    let d = Child::spawn(&mut c)?;
                    let t = Instant::now();
                    while weft_nic::ctl::request(&sock, &Request::Stats).is_err() {
                        if t.elapsed() > Duration::from_secs(10) {
                            return Err(TestbedError("weft run did not start".into()));
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    (format!("weft {label}"), Some(d))
                }
                BenchConfig::Htb { classes } => {
                    tb.htb_classes(*classes)?;
                    (
                        format!(
                            "htb {classes} class{}",
                            if *classes == 1 { "" } else { "es" }
                        ),
                        None,
                    )
                }
            };
            let before = rx_packets(&rx, "eth0");
            let t0 = Instant::now();
            let mut blasters = Vec::new();
            for i in 1..=2usize {
                blasters.push(Child::spawn(
                    Command::new("ip")
                        .args(["netns", "exec", &tb.tenant(i)])
                        .arg(weft)
                        .args([
                            "testbed",
                            "blast",
                            "--iface",
                            "eth0",
                            "--size",
                            &size.to_string(),
                        ])
                        .args(["--seconds", &seconds.to_string(), "--flows", "1000"])
                        .args(["--src", &format!("10.77.0.{i}"), "--dst", RX])
                        .args(["--dst-mac", &dst_mac.map(|b| format!("{b:02x}")).join(":")])
                        .stdout(Stdio::piped()),
                )?);
            }
            let mut sent = 0u64;
            for b in blasters.iter_mut() {
                let mut o = String::new();
                if let Some(mut so) = b.0.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut so, &mut o);
                }
                let _ = b.0.wait();
                sent += o.trim().parse::<u64>().unwrap_or(0);
            }
            // Let queued frames drain (weft's backlog, HTB's queues).
            std::thread::sleep(Duration::from_millis(300));
            let dt = t0.elapsed().as_secs_f64() - 0.3;
            let fwd = rx_packets(&rx, "eth0").saturating_sub(before);
            let stats = match daemon.as_mut() {
                Some(d) => {
                    let s = ask_stats(&sock);
                    d.stop(Duration::from_secs(3));
                    s
                }
                None => None,
            };
            drop(tb);
            let row = BenchRow {
                config: label,
                frame_bytes: size,
                offered_pps: (sent as f64 / dt).round(),
                forwarded_pps: (fwd as f64 / dt).round(),
                weft_drops: stats.as_ref().map(|s| s.iface.dropped),
                weft_ring_full: stats.as_ref().map(|s| s.dataplane.ring_full),
                weft_no_buffer: stats.as_ref().map(|s| s.dataplane.no_buffer),
                weft_ports: stats.map(|s| s.ports),
            };
            eprintln!("{}", serde_json::to_string(&row).unwrap_or_default());
            rows.push(row);
        }
    }
    Ok(BenchReport {
        seconds,
        rows,
        ratios: None,
    })
}

impl Testbed {
    /// Bridges the tenant links and the uplink (`up`) in the NIC namespace (`br0`), the
    /// wiring under Linux HTB (the kernel forwards; weft is not running).
    pub(super) fn bridge(&self) -> R<()> {
        let nic = self.nic();
        sh(&[
            "ip", "-n", &nic, "link", "add", "name", "br0", "type", "bridge",
        ])?;
        for i in 1..=self.tenants {
            let dev = format!("t{i}");
            sh(&[
                "ip", "-n", &nic, "link", "set", "dev", &dev, "master", "br0",
            ])?;
        }
        sh(&[
            "ip", "-n", &nic, "link", "set", "dev", "up", "master", "br0",
        ])?;
        sh(&["ip", "-n", &nic, "link", "set", "dev", "br0", "up"])?;
        Ok(())
    }

    /// Bridge plus HTB with `classes` leaf classes sharing the link, selected by u32
    /// filters on the UDP source port (10000 + i), one filter per class, linear.
    pub fn htb_classes(&self, classes: u32) -> R<()> {
        let nic = self.nic();
        self.bridge()?;
        let mac = BENCH_DST_MAC.map(|b| format!("{b:02x}")).join(":");
        nsx(
            &nic,
            &[
                "bridge", "fdb", "add", &mac, "dev", "up", "master", "static",
            ],
        )?;
        let mut batch = String::new();
        batch += "qdisc add dev up root handle 1: htb default 1\n";
        batch += "class add dev up parent 1: classid 1:ffff htb rate 100gbit ceil 100gbit\n";
        for c in 1..=classes {
            batch += &format!(
                "class add dev up parent 1:ffff classid 1:{c:x} htb rate {}kbit ceil 100gbit\n",
                (100_000_000 / classes as u64).max(8)
            );
            if classes > 1 {
                batch += &format!(
                    "filter add dev up parent 1: protocol ip prio 1 u32 match ip sport {} 0xffff flowid 1:{c:x}\n",
                    10_000 + c - 1
                );
            }
        }
        let f = std::env::temp_dir().join(format!("weft-htb-{}.tc", self.prefix));
        std::fs::write(&f, batch).map_err(|e| TestbedError(e.to_string()))?;
        let r = nsx(&nic, &["tc", "-batch", &f.display().to_string()]);
        let _ = std::fs::remove_file(&f);
        r.map(|_| ())
    }
}
