//! The latency experiments: `limit-priority` (sockperf alone, then beside a bulk flow
//! under one destination limit) and `latency` (sockperf under the other tenants' load).
//!
//! Invariants: both schedulers run the same phases for the same time. Cost: the
//! experiment's duration.

use super::*;

/// Seconds of `limit-priority`'s first phase (sockperf alone, iperf3 off).
pub(super) const BULK_OFF_S: u32 = 4;

/// `limit-priority`: tenant 1's sockperf ping-pong alone for [`BULK_OFF_S`], then with
/// tenant 1's iperf3 to the same address saturating the per-destination limit (after the
/// warm-up) for `seconds`; sockperf has strict priority under the limit
/// ([`Experiment::limit_prio`]). Reports both phases' percentiles, iperf3's goodput, the
/// limited destination's wire rate at the receiver (frames + 20 bytes, as the limit counts
/// them) and the CPU the processes outside the testbed took in each phase ([`ForeignCpu`]).
pub(super) fn run_limit_prio(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
    sock: &Path,
) -> R<ModeResult> {
    ensure_tool("sockperf", &["sockperf"]);
    let (tb, daemon, _log) = setup(exp, prefix, mode, weft, out, sock)?;
    let t1 = &exp.tenants[0];
    let dst = t1.dst.clone();
    let limit_bps = exp.limit.as_ref().map_or(0, |l| l.1);
    let port = SOCKPERF_PORT.to_string();
    let _server = Child::spawn(
        app_command(exp, &tb.rx())
            .args(["sockperf", "server", "-i", &dst, "-p", &port])
            .stdout(Stdio::null()),
    )?;
    let _iperf_server = Child::spawn(
        pinned(exp, &tb.rx())
            .args(["iperf3", "-s", "-1", "-p", "5201"])
            .stdout(Stdio::null()),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let namespaces = tb.namespaces();
    // Phase 1: sockperf alone.
    let cpu = ForeignCpu::start(&namespaces);
    let off = sockperf(&tb, exp, &dst, BULK_OFF_S)?;
    let foreign_off = cpu.stop();
    // Phase 2: iperf3 on (after its warm-up), sockperf again.
    let mut client = Child::spawn(
        pinned(exp, &tb.tenant(1))
            .args(["iperf3", "-J", "-c", &dst, "-p", "5201"])
            .args(["-P", &t1.flows.to_string()])
            // Beyond the probe, which spends about 2 s in its own warm-up before its test's
            // `seconds` begin; the client's report is read once it ends.
            .args(["-t", &(exp.seconds + exp.warmup_s + 5).to_string()])
            .args(["-O", &exp.warmup_s.to_string()])
            .stdout(Stdio::piped()),
    )?;
    std::thread::sleep(Duration::from_secs(exp.warmup_s as u64));
    let cpu = ForeignCpu::start(&namespaces);
    let (on_text, w0, w1) = sockperf_windowed(&tb, exp, &dst, exp.seconds, || {
        (
            weft_stats(daemon.is_some(), sock),
            rx_counters(&tb.rx(), "eth0"),
            udp_in(&tb.rx()),
            Instant::now(),
        )
    })?;
    let on = sockperf_percentiles(&on_text);
    let foreign_on = cpu.stop();
    let (goodput, retransmits) = iperf3_goodput(&mut client, mode)?;
    let stats = match daemon {
        Some(mut d) => {
            // Traffic is over: let the NIC drain, so its counters balance exactly.
            std::thread::sleep(Duration::from_millis(300));
            let s = weft_stats(true, sock);
            d.stop(Duration::from_secs(3));
            s
        }
        None => None,
    };
    drop(tb);
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    // What reached the receiver while sockperf's test ran, at the limit's measure (frame +
    // 20 bytes of preamble and gap): tenant 2 is idle, so all of it is tenant 1's traffic to
    // the limited destination; sockperf's requests are its UDP datagrams, the rest is
    // iperf3's. The share the limit leaves iperf3 is the limit less sockperf's requests.
    let (s0, rx0, udp0, t0) = w0;
    let (s1, rx1, udp1, t1w) = w1;
    let dt = t1w.duration_since(t0).as_secs_f64().max(1e-3);
    let (db, dp) = (rx1.0.saturating_sub(rx0.0), rx1.1.saturating_sub(rx0.1));
    let wire = (db + 20 * dp) as f64 * 8.0 / dt / 1e6;
    let latency_wire =
        udp1.saturating_sub(udp0) as f64 * (SOCKPERF_FRAME + 20) as f64 * 8.0 / dt / 1e6;
    let lim = limit_bps as f64 / 1e6;
    let (bulk_wire, share) = (wire - latency_wire, lim - latency_wire);
    // weft's own counters over the same window: each leaf's frame bytes.
    let leaf_mbps = leaf_rates_between(s0.as_ref(), s1.as_ref(), dt);
    let p99 = |p: &Percentiles| p.p99_us.and_then(finite);
    let ratio = match (p99(&on), p99(&off)) {
        (Some(l), Some(i)) if i > 0.0 => Some((l / i * 1000.0).round() / 1000.0),
        _ => None,
    };
    Ok(ModeResult::LimitPriority(Box::new(LimitPriorityResult {
        scheduler: mode.name().to_string(),
        app_cpus: exp.app_cpus.as_deref().unwrap_or("all").to_string(),
        app: "sockperf ping-pong".to_string(),
        latency_bulk_off: off,
        latency_bulk_on: on,
        p99_on_over_off: ratio,
        window_s: r2(dt),
        latency_app_wire_mbps: r2(latency_wire),
        bulk: BulkRate {
            app: "iperf3".to_string(),
            flows: t1.flows,
            mbps: r2(goodput),
            retransmits,
            wire_mbps: r2(bulk_wire),
            share_mbps: r2(share),
            share_rel_error: (((bulk_wire - share) / share.max(1e-9)).abs() * 1e4).round() / 1e4,
        },
        limit: WireLimit {
            dst,
            limit_mbps: lim,
            burst_bytes: LIMIT_PRIO_BURST,
            wire_mbps: r2(wire),
            rel_error: (((wire - lim) / lim.max(1e-9)).abs() * 1e4).round() / 1e4,
        },
        leaf_mbps: (mode == Mode::Weft).then_some(leaf_mbps),
        foreign_cpu: BulkCpu {
            bulk_off: foreign_off,
            bulk_on: foreign_on,
        },
        weft_stats: stats,
    })))
}

/// Tenant 1's iperf3 client's report, once it has ended: its goodput (Mbit/s) over its whole
/// measured run (which began with sockperf's warm-up and outlasts its test), and its
/// retransmissions; a client that failed is the mode's error.
fn iperf3_goodput(client: &mut Child, mode: Mode) -> R<(f64, u64)> {
    let mut stdout = Vec::new();
    if let Some(mut so) = client.0.stdout.take() {
        let _ = std::io::Read::read_to_end(&mut so, &mut stdout);
    }
    let _ = client.0.wait();
    let v: Value = serde_json::from_slice(&stdout).unwrap_or(Value::Null);
    if v.is_null() || !v["error"].is_null() {
        return Err(TestbedError(format!(
            "{}: iperf3 of tenant 1 failed: {}",
            mode.name(),
            v["error"]
        )));
    }
    let goodput = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    let retransmits = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    Ok((goodput, retransmits))
}

/// Each leaf's rate between weft's counters `s0` and `s1`, `dt` seconds apart, Mbit/s to a
/// hundredth, by name (from its frame bytes; a leaf new since `s0` counts from 0).
fn leaf_rates_between(s0: Option<&Stats>, s1: Option<&Stats>, dt: f64) -> Rates {
    Rates(
        s1.iter()
            .flat_map(|s| &s.nodes)
            .filter(|n| n.leaf)
            .map(|n| {
                let before = s0
                    .iter()
                    .flat_map(|s| &s.nodes)
                    .find(|m| m.name == n.name)
                    .map_or(0, |m| m.bytes);
                let b = n.bytes.saturating_sub(before);
                (
                    n.name.clone(),
                    (b as f64 * 8.0 / dt / 1e6 * 100.0).round() / 100.0,
                )
            })
            .collect(),
    )
}

/// The latency experiment: tenant 1's sockperf ping-pong (UDP; `--mps` from
/// [`Experiment::sockperf_mps`], a closed loop by default) alone, then
/// under the other tenants' iperf3 load; tenant 1 has strict priority.
pub(super) fn run_latency(
    exp: &Experiment,
    prefix: &str,
    mode: Mode,
    weft: &Path,
    out: &Path,
    sock: &Path,
) -> R<ModeResult> {
    if exp.memcached {
        ensure_tool("memcaslap", &["memcached", "libmemcached-tools"]);
    } else {
        ensure_tool("sockperf", &["sockperf"]);
    }
    let (tb, daemon, _log) = setup(exp, prefix, mode, weft, out, sock)?;
    let dst = exp.tenants[0].dst.clone();
    let mut server = app_command(exp, &tb.rx());
    if exp.memcached {
        server.args([
            "memcached",
            "-u",
            "root",
            "-l",
            &dst,
            "-p",
            "11211",
            "-t",
            "1",
        ]);
    } else {
        server.args([
            "sockperf",
            "server",
            "-i",
            &dst,
            "-p",
            &SOCKPERF_PORT.to_string(),
        ]);
    }
    let _server = Child::spawn(server.stdout(Stdio::null()))?;
    std::thread::sleep(Duration::from_millis(300));
    let probe = |s: u32| {
        if exp.memcached {
            memaslap(&tb, exp, &dst, s).map(Probe::Memaslap)
        } else {
            sockperf(&tb, exp, &dst, s).map(Probe::Sockperf)
        }
    };
    let namespaces = tb.namespaces();
    let cpu = ForeignCpu::start(&namespaces);
    let idle = probe(4)?;
    let foreign_idle = cpu.stop();
    // weft's timing histograms of the idle phase; then a fresh start for the loaded one.
    let timing_idle = match daemon {
        Some(_) => {
            let t = ask_stats(sock).map(|s| s.timing);
            let _ = weft_nic::ctl::request(sock, &Request::ResetTiming);
            t
        }
        None => None,
    };
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for (i, t) in exp.tenants.iter().enumerate().skip(1) {
        let port = format!("{}", 5201 + i);
        servers.push(Child::spawn(
            pinned(exp, &tb.rx())
                .args(["iperf3", "-s", "-1", "-p", &port])
                .stdout(Stdio::null()),
        )?);
        std::thread::sleep(Duration::from_millis(200));
        clients.push(Child::spawn(
            pinned(exp, &tb.tenant(i + 1))
                .args(["iperf3", "-c", &t.dst])
                .args(["-p", &port, "-P", &t.flows.to_string()])
                // Longer than the probe, which takes a second or two beyond its measured
                // seconds (start, sockperf's own warm-up); the clients are killed after it.
                .args(["-t", &(exp.seconds + exp.warmup_s + 10).to_string()])
                .stdout(Stdio::null()),
        )?);
    }
    std::thread::sleep(Duration::from_secs(exp.warmup_s as u64));
    let cpu = ForeignCpu::start(&namespaces);
    let loaded = probe(exp.seconds)?;
    let foreign_loaded = cpu.stop();
    let stats = match daemon {
        Some(mut d) => {
            let s = ask_stats(sock);
            d.stop(Duration::from_secs(3));
            s
        }
        None => None,
    };
    drop(clients);
    drop(servers);
    drop(tb);
    let key = if exp.memcached { "avg_us" } else { "p99_us" };
    let ratio = match (loaded.get(key), idle.get(key)) {
        (Some(l), Some(i)) if i > 0.0 => Some((l / i * 1000.0).round() / 1000.0),
        _ => None,
    };
    let app = if exp.memcached {
        "memcached (memaslap)"
    } else {
        "sockperf ping-pong"
    };
    Ok(ModeResult::Latency(Box::new(LatencyResult {
        scheduler: mode.name().to_string(),
        app_cpus: exp.app_cpus.as_deref().unwrap_or("all").to_string(),
        latency_idle: idle,
        latency_loaded: loaded,
        app: app.to_string(),
        loaded_over_idle: key.to_string(),
        p99_loaded_over_idle: ratio,
        foreign_cpu: LatencyCpu {
            idle: foreign_idle,
            loaded: foreign_loaded,
        },
        weft_timing_idle: timing_idle,
        weft_stats: stats,
    })))
}
