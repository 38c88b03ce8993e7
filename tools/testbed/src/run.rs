//! Running an experiment: [`run`] takes each mode on a fresh testbed, starts the scheduler
//! (weft's daemon with its log followed, or bridge + HTB), runs the applications and writes
//! the report.
//!
//! Invariants: a mode's testbed is torn down before the next starts. Cost: the experiment's
//! duration per mode.

use super::*;

/// Runs `exp` once per mode on a fresh testbed; writes `out/report.json` and `report.md`.
pub fn run(exp: &Experiment, prefix: &str, modes: &[Mode], weft: &Path, out: &Path) -> R<Report> {
    install_tools();
    if let Some(why) = missing_prerequisite() {
        return Err(TestbedError(format!("cannot run the testbed: {why}")));
    }
    std::fs::create_dir_all(out).map_err(|e| TestbedError(format!("{}: {e}", out.display())))?;
    let mut results = Vec::new();
    for &m in modes {
        results.push(run_mode(exp, prefix, m, weft, out)?);
    }
    let report = Report {
        experiment: exp.name.clone(),
        rate_bps: exp.rate_bps,
        seconds: exp.seconds,
        tenants: exp
            .tenants
            .iter()
            .map(|t| TenantSetup {
                weight: t.weight,
                flows: t.flows,
            })
            .collect(),
        results,
    };
    let _ = std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    );
    let _ = std::fs::write(out.join("report.md"), markdown(&report));
    Ok(report)
}

/// Lines of the daemon's log a report keeps ([`WeftLog`]).
pub(super) const LOG_LINES: usize = 2_000;

/// The daemon's log (`weft run --log-format json`, one object a line), echoed to stderr
/// as it comes and kept, its first [`LOG_LINES`] lines, for the report (`weft_log`): what
/// an operator would read of the run.
#[derive(Clone, Default)]
pub(super) struct WeftLog(Arc<Mutex<LogState>>);

/// The lines kept, and the thread that follows the daemon's stderr.
pub(super) type LogState = (Vec<String>, Option<std::thread::JoinHandle<()>>);

impl WeftLog {
    /// Follows `stderr` on a thread of its own until the daemon closes it.
    fn follow(&self, stderr: std::process::ChildStderr) {
        let lines = self.clone();
        let t = std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(stderr).lines() {
                let Ok(l) = l else { break };
                eprintln!("{l}");
                let mut g = lines.0.lock().unwrap_or_else(|e| e.into_inner());
                if g.0.len() < LOG_LINES {
                    g.0.push(l);
                }
            }
        });
        self.0.lock().unwrap_or_else(|e| e.into_inner()).1 = Some(t);
    }

    /// The lines so far, once the daemon has exited: each as the JSON object it is, or as
    /// a string (`ready`, a start-up line).
    fn json(&self) -> Vec<Value> {
        let t = self.0.lock().unwrap_or_else(|e| e.into_inner()).1.take();
        if let Some(t) = t {
            let _ = t.join();
        }
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.0.iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.clone())))
            .collect()
    }
}

/// Namespaces up, the scheduler started (weft's daemon, with its log followed, or bridge +
/// HTB), every tenant able to reach its receiver address.
pub(super) fn setup(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
    sock: &Path,
) -> R<(Testbed, Option<Child>, WeftLog)> {
    let n = exp.tenants.len();
    let tb = Testbed::up(prefix, n)?;
    let mut daemon = None;
    let log = WeftLog::default();
    match mode {
        Mode::Weft => {
            let pol = out.join(format!("{}-policy.yaml", exp.name));
            std::fs::write(&pol, exp.policy_yaml())
                .map_err(|e| TestbedError(format!("{}: {e}", pol.display())))?;
            let mut c = Command::new("ip");
            // The software NIC gets its core ahead of the applications (nice -15, and the
            // cgroup of its own `weft run` makes by default against other sessions), as a
            // dedicated NIC core would; the kernel's softirq work (HTB's side) has that
            // precedence by construction.
            c.args(["netns", "exec", &tb.nic(), "nice", "-n", "-15"])
                .arg(weft)
                .arg("run")
                .arg("--policy")
                .arg(&pol)
                .args(["--uplink", "up", "--rate", &format!("{}bit", exp.rate_bps)])
                .arg("--ctl")
                .arg(sock)
                .args(["--idle-sleep-us", &exp.idle_sleep_us.to_string()])
                .args(["--ring-version", &exp.ring_version])
                .args(["--backend", &exp.backend])
                .args(["--log-format", "json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if exp.metrics_flood {
                c.args(["--metrics", &format!("127.0.0.1:{METRICS_PORT}")]);
            }
            if let Some(r) = exp.rogue {
                c.args(["--rogue", &r.to_string()]);
            }
            if let Some(cpu) = exp.weft_cpu {
                c.args(["--cpu", &cpu.to_string()]);
            }
            if let Some(us) = exp.weft_slice_us {
                c.args(["--slice-us", &us.to_string()]);
            }
            // Its own cgroup and CPU weight (`weft run`'s default 10,000; 0: none), so a
            // busy host's other sessions cannot take its core (`weft_nic::placement`).
            if let Ok(w) = std::env::var("WEFT_TESTBED_CPU_WEIGHT") {
                c.args(["--cpu-weight", &w]);
            }
            if let Some(q) = exp.max_queues {
                c.args(["--max-queues", &q.to_string()]);
            }
            for i in 1..=n {
                c.args(["--tenant", &format!("tenant{i}=t{i}")]);
            }
            let mut d = Child::spawn(&mut c)?;
            if let Some(e) = d.0.stderr.take() {
                log.follow(e);
            }
            let t = Instant::now();
            while weft_nic::ctl::request(sock, &Request::Stats).is_err() {
                if t.elapsed() > Duration::from_secs(10) {
                    return Err(TestbedError("weft run did not start within 10 s".into()));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            daemon = Some(d);
        }
        Mode::Htb => {
            let w: Vec<u64> = exp.tenants.iter().map(|t| t.weight).collect();
            tb.htb(
                &w,
                exp.rate_bps,
                exp.limit.as_ref(),
                exp.latency,
                exp.limit_prio,
            )?;
        }
    }
    if exp.limit.is_some() {
        nsx(
            &tb.rx(),
            &["ip", "addr", "add", &format!("{RX2}/24"), "dev", "eth0"],
        )?;
    }
    // Reachability first (ARP through the NIC), so the measurement starts warm.
    for i in 1..=n {
        let dst = exp.tenants[i - 1].dst.clone();
        let ok = (0..20).any(|_| nsx(&tb.tenant(i), &["ping", "-c", "1", "-W", "1", &dst]).is_ok());
        if !ok && sh(&["sh", "-c", "command -v ping"]).is_ok() {
            return Err(TestbedError(format!(
                "{}: tenant {i} cannot reach the receiver",
                mode.name()
            )));
        }
    }
    Ok((tb, daemon, log))
}

/// Runs `exp` under `mode` on a fresh testbed: the latency experiments apart
/// ([`run_latency`], [`run_limit_prio`]); else iperf3 from every tenant (with the
/// experiment's attackers), the daemon watched through the measured window, and the
/// tenants' rates weighed against their weights' shares. The mode's result, as the report
/// keeps it.
pub(super) fn run_mode(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
) -> R<ModeResult> {
    let exp = &exp.for_mode(mode);
    let sock = std::env::temp_dir().join(format!("weft-testbed-{prefix}.sock"));
    if exp.latency {
        return run_latency(exp, prefix, mode, weft, out, &sock);
    }
    if exp.limit_prio {
        return run_limit_prio(exp, prefix, mode, weft, out, &sock);
    }
    let (tb, daemon, log) = setup(exp, prefix, mode, weft, out, &sock)?;
    let servers = iperf3_servers(exp, &tb)?;
    std::thread::sleep(Duration::from_millis(300));
    let pid = daemon.as_ref().map(|d| d.0.id());
    let cpu0 = (pid.and_then(cpu_ticks_pid), cpu_ticks_system());
    // What processes outside the testbed take meanwhile: a run they starve measures them.
    let foreign = ForeignCpu::start(&tb.namespaces());
    let t0 = Instant::now();
    let _spoofer = match exp.spoof {
        Some(k) => Some(spoofer(&tb, k, exp.seconds + exp.warmup_s + 2)?),
        None => None,
    };
    let mac_flooder = match exp.mac_flood {
        Some(k) => Some(mac_flooder(&tb, k, exp.seconds + exp.warmup_s + 2)?),
        None => None,
    };
    // With a flooder, its tenant connects first (its flows hold their queues before its
    // flood spends the rest of its budget), the flood starts, and the other tenants connect
    // into it, `lead` seconds later; the flooding tenant's run is longer by as much, so
    // every tenant's measured seconds are the same.
    let lead: u32 = if exp.flood.is_some() { 2 } else { 0 };
    let (mut clients, _flooder) = iperf3_clients(exp, &tb, lead)?;
    let mut window = Window::default();
    if daemon.is_some() {
        window = watch_window(exp, &tb, &sock, out, pid, t0, lead)?;
    }
    let mut tenants = iperf3_results(exp, mode, &mut clients)?;
    let elapsed = t0.elapsed().as_secs_f64();
    let foreign_cpu = foreign.stop();
    let cpu1 = (pid.and_then(cpu_ticks_pid), cpu_ticks_system());
    let (weft_cpu, sys_cpu) = cpu_pct(cpu0, cpu1, elapsed);
    let mut stats = None;
    let mut weft_log = None;
    let mut metrics_flood = None;
    if let Some(mut d) = daemon {
        // Traffic is over: let the NIC drain, so its counters balance exactly.
        std::thread::sleep(Duration::from_millis(300));
        stats = ask_stats(&sock);
        if let Some((hold, (scrapes, control))) = window.metrics_hold.take().zip(window.metrics) {
            // `stop` on the control socket, the metrics endpoint's idle connections still
            // held: answered, and the daemon gone.
            let stop = stop_over_ctl(&mut d, &sock);
            let hold = last_line(hold);
            metrics_flood = Some(MetricsFlood {
                scrapes,
                control,
                stop,
                hold,
            });
        }
        d.stop(Duration::from_secs(3));
        weft_log = Some(log.json());
    }
    // Before its namespace goes.
    drop(mac_flooder);
    drop(servers);
    drop(tb);
    let (norm, total, max_rel_err) = weigh_shares(exp, &mut tenants);
    // Per-leaf rates from weft's own counters over the window (not across a reload).
    let mut leaf_mbps = None;
    let snaps = &window.snaps;
    if exp.reload_weights.is_none() && snaps.2 > 0.0 {
        leaf_mbps = Some(leaf_rates(snaps.0.as_ref(), snaps.1.as_ref(), snaps.2));
    }
    let limit = limit_rate(exp, mode, leaf_mbps.as_ref(), &tenants);
    let after_reload = after_reload(exp, &tenants);
    Ok(ModeResult::Throughput(Box::new(ThroughputResult {
        scheduler: mode.name().to_string(),
        app_cpus: exp.app_cpus.as_deref().unwrap_or("all").to_string(),
        leaf_mbps,
        limit,
        reload: window.reload,
        after_reload,
        jain: jain(&norm).map(|j| (j * 1e4).round() / 1e4),
        total_mbps: (total * 10.0).round() / 10.0,
        max_rel_error: (max_rel_err * 1e4).round() / 1e4,
        weft_cpu_pct: weft_cpu,
        system_cpu_pct: sys_cpu,
        foreign_cpu,
        tenants,
        weft_rss_kb: Rss {
            start: window.rss.0,
            end: window.rss.1,
        },
        metrics_flood,
        link_flap: window.flap,
        weft_stats: stats,
        weft_log,
    })))
}

/// One iperf3 server a tenant in the receiver's namespace (tenant i on port 5200 + i), each
/// for one test.
fn iperf3_servers(exp: &Experiment, tb: &Testbed) -> R<Vec<Child>> {
    let mut servers = Vec::new();
    for i in 1..=exp.tenants.len() {
        let port = format!("{}", 5200 + i);
        servers.push(Child::spawn(
            pinned(exp, &tb.rx())
                .args(["iperf3", "-s", "-1", "-p", &port])
                .stdout(Stdio::null()),
        )?);
    }
    Ok(servers)
}

/// Every tenant's iperf3 client, in tenant order, with the flow flooder if the experiment
/// has one: the flooding tenant connects first, its flood starts, and the others connect
/// `lead` seconds after it (its run longer by as much). The clients' JSON reports come on
/// their stdout.
fn iperf3_clients(exp: &Experiment, tb: &Testbed, lead: u32) -> R<(Vec<Child>, Option<Child>)> {
    let client = |i: usize, t: &TenantSpec, extra: u32| {
        Child::spawn(
            pinned(exp, &tb.tenant(i))
                .args(["iperf3", "-J", "-c", &t.dst])
                .args(["-p", &format!("{}", 5200 + i), "-P", &t.flows.to_string()])
                .args(["-t", &(exp.seconds + exp.warmup_s + extra).to_string()])
                .args(["-O", &(exp.warmup_s + extra).to_string()])
                .stdout(Stdio::piped()),
        )
    };
    let mut clients = Vec::new();
    let mut early = None;
    let mut flooder_child = None;
    if let Some(k) = exp.flood {
        early = Some(client(k, &exp.tenants[k - 1], lead)?);
        std::thread::sleep(Duration::from_millis(1_500));
        flooder_child = Some(flooder(tb, k, exp.seconds + exp.warmup_s + lead + 2)?);
        std::thread::sleep(Duration::from_millis(500));
    }
    for (i, t) in exp.tenants.iter().enumerate() {
        let i = i + 1;
        clients.push(match early.take_if(|_| exp.flood == Some(i)) {
            Some(c) => c,
            None => client(i, t, 0)?,
        });
    }
    Ok((clients, flooder_child))
}

/// What the daemon and the host said during the measured window ([`watch_window`]).
#[derive(Default)]
struct Window {
    /// `ctl stats` at the window's start and end, and the seconds between them.
    snaps: (Option<Stats>, Option<Stats>, f64),
    /// A reload halfway: the invalid policy's answer, the generation after it, the valid
    /// policy's answer.
    reload: Option<ReloadAnswers>,
    /// The daemon's resident memory at the start and end of the window (kB).
    rss: (Option<u64>, Option<u64>),
    /// `metrics-flood`'s scrapes and control-socket answers.
    metrics: Option<(Value, ControlAnswers)>,
    /// `metrics-flood`'s idle connections, still held.
    metrics_hold: Option<Child>,
    /// `link-flap`'s outage and the shares after it.
    flap: Option<LinkFlap>,
}

/// The measured window, with the daemon running (started at `t0`, the window `lead` +
/// warm-up seconds later): counters at its start and end, and what the experiment does
/// meanwhile: the metrics flood, the link flap, a reload halfway.
fn watch_window(
    exp: &Experiment,
    tb: &Testbed,
    sock: &Path,
    out: &Path,
    pid: Option<u32>,
    t0: Instant,
    lead: u32,
) -> R<Window> {
    let mut w = Window::default();
    // The timeline: counters at the start and end of the measured window; a reload halfway.
    let ask = |req: Request| ask_json(sock, &req);
    let at = |s: f64| {
        let d = Duration::from_secs_f64(s).saturating_sub(t0.elapsed());
        std::thread::sleep(d);
    };
    let mut after_flap = (None, 0.0);
    let mut outage = None;
    let end = (lead + exp.warmup_s + exp.seconds) as f64;
    at((lead + exp.warmup_s) as f64 + 0.2);
    let ta = t0.elapsed().as_secs_f64();
    w.snaps.0 = ask_stats(sock);
    w.rss.0 = pid.and_then(rss_kb);
    if exp.metrics_flood {
        let (scrapes, control, hold) =
            metrics_flood(exp, tb, sock, || t0.elapsed().as_secs_f64() < end - 0.7)?;
        w.metrics = Some((scrapes, control));
        w.metrics_hold = Some(hold);
    }
    if exp.link_flap {
        at((lead + exp.warmup_s) as f64 + 1.0);
        outage = Some(link_flap(tb, sock)?);
        // The shares once TCP is back (its retransmission timer backs off while the
        // link is down): from three seconds after the outage to the window's end.
        at(((lead + exp.warmup_s) as f64 + 6.0).min(end - 1.2));
        after_flap = (ask_stats(sock), t0.elapsed().as_secs_f64());
    }
    if let Some(weights) = &exp.reload_weights {
        at((lead + exp.warmup_s) as f64 + exp.seconds as f64 / 2.0);
        let bad = out.join(format!("{}-invalid.yaml", exp.name));
        let good = out.join(format!("{}-reloaded.yaml", exp.name));
        let _ = std::fs::write(&bad, exp.policy_with(&[1, 0]));
        let _ = std::fs::write(&good, exp.policy_with(weights));
        let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or(p.to_path_buf());
        let r1 = ask(Request::Reload { policy: abs(&bad) });
        let g1 = ask_stats(sock).map(|s| s.generation);
        let r2 = ask(Request::Reload { policy: abs(&good) });
        w.reload = Some(ReloadAnswers {
            invalid: r1,
            generation_after_invalid: g1,
            valid: r2,
        });
    }
    at(end - 0.2);
    w.snaps.1 = ask_stats(sock);
    w.rss.1 = pid.and_then(rss_kb);
    w.snaps.2 = t0.elapsed().as_secs_f64() - ta;
    if let Some((down_ms, during)) = outage {
        let secs = t0.elapsed().as_secs_f64() - after_flap.1;
        let mbps = leaf_rates(after_flap.0.as_ref(), w.snaps.1.as_ref(), secs);
        let max_rel_error = leaf_share_error(exp, &mbps);
        w.flap = Some(LinkFlap {
            down_ms,
            during,
            after: AfterFlap {
                seconds: (secs * 100.0).round() / 100.0,
                leaf_mbps: mbps,
                max_rel_error,
            },
        });
    }
    Ok(w)
}

/// Each tenant's iperf3 report, once its client has ended: its goodput, its series per
/// second (after the warm-up) and its retransmissions; a client that failed is the mode's
/// error.
fn iperf3_results(exp: &Experiment, mode: Mode, clients: &mut [Child]) -> R<Vec<TenantResult>> {
    let mut tenants = Vec::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let mut stdout = Vec::new();
        if let Some(mut so) = c.0.stdout.take() {
            let _ = std::io::Read::read_to_end(&mut so, &mut stdout);
        }
        let _ = c.0.wait();
        let o = std::process::Output {
            status: std::process::ExitStatus::default(),
            stdout,
            stderr: Vec::new(),
        };
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if !v["error"].is_null() || v.is_null() {
            return Err(TestbedError(format!(
                "{}: iperf3 of tenant {} failed: {}",
                mode.name(),
                i + 1,
                v["error"]
            )));
        }
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or(0.0);
        let series: Vec<f64> = v["intervals"]
            .as_array()
            .into_iter()
            .flatten()
            .skip(exp.warmup_s as usize)
            .filter_map(|x| x["sum"]["bits_per_second"].as_f64())
            .map(|b| (b / 1e6 * 10.0).round() / 10.0)
            .collect();
        let retr = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
        tenants.push(TenantResult {
            tenant: i + 1,
            weight: exp.tenants[i].weight,
            flows: exp.tenants[i].flows,
            mbps: (bps / 1e5).round() / 10.0,
            mbps_per_second: series,
            retransmits: retr,
            // Set once every tenant's rate is known (`weigh_shares`).
            ideal_mbps: 0.0,
            rel_error: 0.0,
        });
    }
    Ok(tenants)
}

/// The daemon's share of a CPU and the system's busy share, percent, between the tick
/// counts `cpu0` and `cpu1` taken `elapsed` seconds apart (null where not known).
fn cpu_pct(
    cpu0: (Option<u64>, Option<(u64, u64)>),
    cpu1: (Option<u64>, Option<(u64, u64)>),
    elapsed: f64,
) -> (Option<f64>, Option<f64>) {
    let hz = weft_sys::process::clock_ticks_per_second() as f64;
    let weft_cpu = match (cpu0.0, cpu1.0) {
        (Some(a), Some(b)) => Some(((b - a) as f64 / hz / elapsed * 1000.0).round() / 10.0),
        _ => None,
    };
    let sys_cpu = match (cpu0.1, cpu1.1) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            Some(((b1 - b0) as f64 / (t1 - t0) as f64 * 1000.0).round() / 10.0)
        }
        _ => None,
    };
    (weft_cpu, sys_cpu)
}

/// The tenants' rates against their weights: each tenant's ideal share of the total and
/// its relative error are added to its result; returns the rates over the weights (for
/// Jain's index), the total and the largest relative error.
fn weigh_shares(exp: &Experiment, tenants: &mut [TenantResult]) -> (Vec<f64>, f64, f64) {
    let mbps = |t: &TenantResult| finite(t.mbps).unwrap_or(0.0);
    let norm: Vec<f64> = tenants.iter().map(|t| mbps(t) / t.weight as f64).collect();
    let total: f64 = tenants.iter().map(mbps).sum();
    let wsum: u64 = exp.tenants.iter().map(|t| t.weight).sum();
    let mut max_rel_err = 0.0f64;
    for (t, spec) in tenants.iter_mut().zip(&exp.tenants) {
        let ideal = total * spec.weight as f64 / wsum as f64;
        let err = (mbps(t) - ideal).abs() / ideal.max(1e-9);
        max_rel_err = max_rel_err.max(err);
        t.ideal_mbps = (ideal * 10.0).round() / 10.0;
        t.rel_error = (err * 1e4).round() / 1e4;
    }
    (norm, total, max_rel_err)
}

/// The limited class's rate at L2 (frame bytes, as the limit counts them): weft's leaf
/// counter; for HTB, goodput × 1514/1448 (full-size TCP segments with timestamps).
fn limit_rate(
    exp: &Experiment,
    mode: Mode,
    leaf_mbps: Option<&Rates>,
    tenants: &[TenantResult],
) -> Option<LimitRate> {
    exp.limit.as_ref().map(|(dst, rate)| {
        let i = exp.tenants.iter().position(|t| &t.dst == dst).unwrap_or(0);
        let l2 = match mode {
            Mode::Weft => leaf_mbps
                .and_then(|r| r.get(&format!("tenant{}", i + 1)))
                .unwrap_or(0.0),
            Mode::Htb => finite(tenants[i].mbps).unwrap_or(0.0) * 1514.0 / 1448.0,
        };
        let lim = *rate as f64 / 1e6;
        LimitRate {
            dst: dst.clone(),
            limit_mbps: lim,
            l2_mbps: (l2 * 100.0).round() / 100.0,
            rel_error: (((l2 - lim) / lim).abs() * 1e4).round() / 1e4,
        }
    })
}

/// After a reload: the shares over the second half's last seconds.
fn after_reload(exp: &Experiment, tenants: &[TenantResult]) -> Option<AfterReload> {
    exp.reload_weights.as_ref().map(|w| {
        let k = (exp.seconds / 2).saturating_sub(1).max(1) as usize;
        let means: Vec<f64> = tenants
            .iter()
            .map(|t| {
                let v: Vec<f64> = t
                    .mbps_per_second
                    .iter()
                    .copied()
                    .filter_map(finite)
                    .collect();
                let tail = &v[v.len().saturating_sub(k)..];
                tail.iter().sum::<f64>() / tail.len().max(1) as f64
            })
            .collect();
        AfterReload {
            weights: w.clone(),
            mbps_last_seconds: means,
        }
    })
}

/// Each node's rate between two `ctl stats` answers `secs` apart, Mbit/s by name (from its
/// byte counter).
pub(super) fn leaf_rates(a: Option<&Stats>, b: Option<&Stats>, secs: f64) -> Rates {
    let bytes = |s: Option<&Stats>, i: usize| s.and_then(|s| s.nodes.get(i)).map_or(0, |n| n.bytes);
    Rates(
        b.into_iter()
            .flat_map(|s| &s.nodes)
            .enumerate()
            .map(|(i, nd)| {
                let r = (bytes(b, i) - bytes(a, i).min(bytes(b, i))) as f64 * 8.0 / secs / 1e6;
                (nd.name.clone(), (r * 100.0).round() / 100.0)
            })
            .collect(),
    )
}

/// The largest relative error of a tenant's leaf rate (`tenantI` in `mbps`) against its
/// weight's share of the leaves' sum (null without traffic).
pub(super) fn leaf_share_error(exp: &Experiment, mbps: &Rates) -> Option<f64> {
    let r: Vec<f64> = (1..=exp.tenants.len())
        .map(|i| mbps.get(&format!("tenant{i}")).unwrap_or(0.0))
        .collect();
    let total: f64 = r.iter().sum();
    let wsum: u64 = exp.tenants.iter().map(|t| t.weight).sum();
    if total <= 0.0 || wsum == 0 {
        return None;
    }
    let err = r
        .iter()
        .zip(&exp.tenants)
        .map(|(m, t)| {
            let ideal = total * t.weight as f64 / wsum as f64;
            (m - ideal).abs() / ideal
        })
        .fold(0.0f64, f64::max);
    Some((err * 1e4).round() / 1e4)
}

/// `pid`'s resident memory (`VmRSS`), kB.
pub(super) fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
