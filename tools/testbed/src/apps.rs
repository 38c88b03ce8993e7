//! The applications and what is read of them: sockperf and memaslap runs and their
//! outputs, installing tools, the CPU other processes take ([`ForeignCpu`]), and the
//! counters read from the kernel and the daemon.
//!
//! Invariants: outputs that do not parse give null, never a panic. Cost: a `/proc` walk every
//! 200 ms while [`ForeignCpu`] samples.

use super::*;

/// Percentiles (µs) from sockperf's summary: its 99.9th, 99th, 90th and 50th, those it gave.
pub(super) fn sockperf_percentiles(text: &str) -> Percentiles {
    let mut p = Percentiles::default();
    for l in text.lines() {
        if let Some(rest) = l.split("percentile ").nth(1) {
            let mut it = rest.split('=');
            let (Some(q), Some(v)) = (it.next(), it.next()) else {
                continue;
            };
            let slot = match q.trim() {
                "50.000" => &mut p.p50_us,
                "90.000" => &mut p.p90_us,
                "99.000" => &mut p.p99_us,
                "99.900" => &mut p.p999_us,
                _ => continue,
            };
            if let Ok(x) = v.trim().parse::<f64>() {
                *slot = Some(x);
            }
        }
    }
    p
}

/// memaslap's "Total Statistics" global line: operations/s and latency (µs); `None` if its
/// output has none.
pub(super) fn memaslap_totals(text: &str) -> Option<MemaslapTotals> {
    let mut in_total = false;
    for l in text.lines() {
        if l.starts_with("Total Statistics") {
            in_total = true;
        }
        if in_total && l.starts_with("Global") {
            let f: Vec<f64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            // Time, Ops, TPS, Net, Get_miss, Min, Max, Avg, Std_dev, Geo_dist
            if f.len() >= 9 {
                return Some(MemaslapTotals {
                    ops_per_s: f[2],
                    min_us: f[5],
                    max_us: f[6],
                    avg_us: f[7],
                    std_us: f[8],
                });
            }
        }
    }
    None
}

/// `ip netns exec NS` with the applications' CPUs ([`pinned`]), `nice -n N`
/// ([`Experiment::app_nice`]) and the application's scheduler slice
/// ([`Experiment::app_slice_us`]) set before `exec`: how the latency-sensitive application
/// starts, the same under weft and HTB.
pub(super) fn app_command(exp: &Experiment, ns: &str) -> Command {
    let mut c = pinned(exp, ns);
    c.args(["nice", "-n", &exp.app_nice.to_string()]);
    if let Some(us) = exp.app_slice_us {
        weft_sys::sched::slice_in_child(&mut c, us);
    }
    c
}

pub(super) fn app_output(exp: &Experiment, ns: &str, args: &[&str]) -> R<String> {
    output(app_command(exp, ns).args(args), args)
}

pub(super) fn memaslap(
    tb: &Testbed,
    exp: &Experiment,
    dst: &str,
    seconds: u32,
) -> R<Option<MemaslapTotals>> {
    let (server, t) = (format!("{dst}:11211"), format!("{seconds}s"));
    let args = [
        "memcaslap",
        "-s",
        &server,
        "-t",
        &t,
        "-T",
        "1",
        "-c",
        "4",
        "-S",
        &t,
    ];
    let o = app_output(exp, &tb.tenant(1), &args)?;
    Ok(memaslap_totals(&o))
}

pub(super) fn sockperf(tb: &Testbed, exp: &Experiment, dst: &str, seconds: u32) -> R<Percentiles> {
    Ok(sockperf_percentiles(&sockperf_output(
        tb, exp, dst, seconds,
    )?))
}

/// A sockperf request's frame: its default 14-byte message in UDP, IPv4 and Ethernet
/// headers (8 + 20 + 14 bytes).
pub(super) const SOCKPERF_FRAME: u64 = 56;

/// sockperf's ping-pong client to `dst` for `seconds` at the experiment's message rate.
pub(super) fn sockperf_args(exp: &Experiment, dst: &str, seconds: u32) -> [String; 10] {
    [
        "sockperf".into(),
        "ping-pong".into(),
        "-i".into(),
        dst.into(),
        "-p".into(),
        SOCKPERF_PORT.to_string(),
        "-t".into(),
        seconds.to_string(),
        "--mps".into(),
        exp.sockperf_mps.clone(),
    ]
}

pub(super) fn sockperf_output(
    tb: &Testbed,
    exp: &Experiment,
    dst: &str,
    seconds: u32,
) -> R<String> {
    let args = sockperf_args(exp, dst, seconds);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    app_output(exp, &tb.tenant(1), &args)
}

/// Installs `pkgs` with apt-get unless `tool` and the first package's command are there.
pub(super) fn ensure_tool(tool: &str, pkgs: &[&str]) {
    if sh(&[
        "sh",
        "-c",
        &format!("command -v {tool} && command -v {}", pkgs[0]),
    ])
    .is_err()
    {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(pkgs)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status();
    }
}

/// How much CPU the processes outside a testbed used while it measured: a thread samples
/// every process's `utime + stime` (`/proc/PID/stat`) every 200 ms, leaving out kernel
/// threads (softirq work: HTB's, and the veth deliveries), this process, and every process
/// in the testbed's network namespaces (weft, the applications). A process that started
/// during the window counts from zero; one that lived less than a sample period is missed.
/// What another session's build or profiler takes from the testbed's applications shows
/// here: a run with a CPU-bound neighbour measures the neighbour (docs/dataplane.md).
pub struct ForeignCpu {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<f64>>,
}

impl ForeignCpu {
    /// Starts sampling; `namespaces` are the testbed's (`ip netns` names).
    pub fn start(namespaces: &[String]) -> ForeignCpu {
        use std::os::unix::fs::MetadataExt;
        let own: Vec<u64> = namespaces
            .iter()
            .filter_map(|n| std::fs::metadata(Path::new("/run/netns").join(n)).ok())
            .map(|m| m.ino())
            .collect();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weft-testbed-cpu".into())
            .spawn(move || {
                let hz = weft_sys::process::clock_ticks_per_second() as f64;
                let uptime = || {
                    std::fs::read_to_string("/proc/uptime")
                        .ok()
                        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
                        .unwrap_or(0.0)
                };
                let since = (uptime() * hz) as u64;
                let t0 = Instant::now();
                let me = std::process::id();
                // pid -> (ticks when first seen, or 0 if it started in the window; last).
                let mut seen: std::collections::HashMap<u32, (u64, u64)> = Default::default();
                loop {
                    let last_round = halt.load(Ordering::Relaxed);
                    for (pid, ticks, start) in foreign_ticks(&own, me) {
                        let e = seen
                            .entry(pid)
                            .or_insert((if start >= since { 0 } else { ticks }, ticks));
                        e.1 = e.1.max(ticks);
                    }
                    if last_round {
                        break;
                    }
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(200) && !halt.load(Ordering::Relaxed)
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                let ticks: u64 = seen.values().map(|(a, b)| b.saturating_sub(*a)).sum();
                ticks as f64 / hz / t0.elapsed().as_secs_f64().max(1e-3)
            })
            .ok();
        ForeignCpu { stop, thread }
    }

    /// Stops sampling: the CPUs (1.0 = one CPU's time) the processes outside the testbed
    /// used on average since [`ForeignCpu::start`], to two decimals (`None`: could not tell).
    pub fn stop(mut self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let cpus = self.thread.take()?.join().ok()?;
        Some((cpus * 100.0).round() / 100.0)
    }
}

impl Drop for ForeignCpu {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (pid, utime + stime, start time in ticks since boot) of every user-space process but
/// `me` whose network namespace is not one of `own` (inodes).
pub(super) fn foreign_ticks(own: &[u64], me: u32) -> Vec<(u32, u64, u64)> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`: after the last `)`, field 3 (state) is index 0.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
        let (Some(flags), Some(ut), Some(st), Some(start)) = (num(6), num(11), num(12), num(19))
        else {
            continue;
        };
        if flags & PF_KTHREAD != 0 {
            continue;
        }
        let ns = std::fs::read_link(e.path().join("ns/net"))
            .ok()
            .and_then(|l| {
                let l = l.to_string_lossy().into_owned();
                l.strip_prefix("net:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            });
        if ns.is_some_and(|ino| own.contains(&ino)) {
            continue;
        }
        v.push((pid, ut + st, start));
    }
    v
}

/// weft's counters (`ctl stats`), or null without a daemon.
pub(super) fn weft_stats(daemon: bool, sock: &Path) -> Option<Stats> {
    if !daemon {
        return None;
    }
    ask_stats(sock)
}

/// (bytes, packets) received on `dev` in namespace `ns`.
pub(super) fn rx_counters(ns: &str, dev: &str) -> (u64, u64) {
    let read = |what: &str| {
        nsx(
            ns,
            &["cat", &format!("/sys/class/net/{dev}/statistics/{what}")],
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
    };
    (read("rx_bytes"), read("rx_packets"))
}

/// sockperf ping-pong from tenant 1 to `dst` for `seconds`, as [`sockperf_output`], calling
/// `sample` twice while its test runs: 0.5 s after it says `Starting test` (its first 0.4 s
/// are a warm-up it does not measure) and 0.2 s before its `seconds` are up. Its output and
/// both samples (the second is taken at once if the test ended sooner).
pub(super) fn sockperf_windowed<T>(
    tb: &Testbed,
    exp: &Experiment,
    dst: &str,
    seconds: u32,
    mut sample: impl FnMut() -> T,
) -> R<(String, T, T)> {
    use std::io::BufRead;
    let args = sockperf_args(exp, dst, seconds);
    let mut c = Child::spawn(
        app_command(exp, &tb.tenant(1))
            .args(&args)
            .stdout(Stdio::piped()),
    )?;
    let so =
        c.0.stdout
            .take()
            .ok_or_else(|| TestbedError("sockperf: no stdout".into()))?;
    let mut lines = std::io::BufReader::new(so);
    let mut text = String::new();
    // Its warm-up (about 2 s) first.
    loop {
        let mut l = String::new();
        let n = lines.read_line(&mut l).unwrap_or(0);
        text += &l;
        if n == 0 || l.contains("Starting test") {
            break;
        }
    }
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let a = sample();
    let end = Duration::from_secs_f64((seconds as f64 - 0.2).max(0.6));
    std::thread::sleep(end.saturating_sub(started.elapsed()));
    let b = sample();
    let _ = std::io::Read::read_to_string(&mut lines, &mut text);
    let status =
        c.0.wait()
            .map_err(|e| TestbedError(format!("sockperf: {e}")))?;
    if !status.success() {
        return Err(TestbedError(format!(
            "`{}` failed: {status}",
            args.join(" ")
        )));
    }
    Ok((text, a, b))
}

/// UDP datagrams received in namespace `ns` (`Udp: InDatagrams` of `/proc/net/snmp`).
pub(super) fn udp_in(ns: &str) -> u64 {
    let snmp = nsx(ns, &["cat", "/proc/net/snmp"]).unwrap_or_default();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (udp.next(), udp.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "InDatagrams")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}
