//! Real-traffic acceptance tests of the software NIC: `weft testbed run` in network
//! namespaces, real TCP (iperf3) over an uplink paced at 500 Mbit/s. A run during which
//! processes outside the testbed took more than a fifth of a CPU (`foreign_cpu` in the
//! report) measures the machine, not weft: the throughput tests then print why and skip
//! (the destination limit retries once first), rather than pass or fail on a starved run.
//!
//! The uplink runs at 500 Mbit/s in every build: the workspace optimizes weft-core and
//! weft-nic in test builds too (`profile.dev.package`), so `cargo test --workspace` forwards
//! at that rate on these 2-core machines.
//!
//! They need root, `ip netns`, `tc`, `ethtool` and `iperf3` (the testbed installs the last
//! two with apt-get when missing). Without them each test prints `skipped: REASON` and
//! passes. Every namespace and process they start is removed by guards, also on failure:
//! the `weft` child is killed on drop and `weft testbed down --prefix P` runs on drop. The
//! tests hold one lock, so they never run concurrently (each takes ~15-25 s).

mod common;

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::{assert_balanced, skip_reason, weft_stats};
use serde_json::Value;
use weft_nic::iface::Reject;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `weft testbed run EXPERIMENT` for 10 s at 500 Mbit/s, killed after `limit`.
fn run_experiment(experiment: &str, prefix: &str, limit: Duration) -> Value {
    common::run_experiment(experiment, prefix, 10, limit, &[])
}

fn weft_result(r: &Value) -> &Value {
    &r["results"][0]
}

/// CPUs the processes outside the testbed may take during a run before it counts as
/// starved (the testbed's applications and weft share 2 cores).
const MAX_FOREIGN_CPUS: f64 = 0.2;

/// Why a run (weft's or HTB's) says nothing about weft: processes outside the testbed took
/// more CPU than [`MAX_FOREIGN_CPUS`] while it measured (`foreign_cpu` in the report).
fn starved(r: &Value) -> Option<String> {
    r["results"].as_array().into_iter().flatten().find_map(|m| {
        let cpus = m["foreign_cpu"].as_f64().unwrap_or(f64::INFINITY);
        (cpus > MAX_FOREIGN_CPUS).then(|| {
            format!(
                "processes outside the testbed took {cpus} CPUs during the {} run (more \
                     than {MAX_FOREIGN_CPUS}): the machine, not weft, would be measured",
                m["scheduler"].as_str().unwrap_or("?")
            )
        })
    })
}

/// The CPUs processes outside the testbed took in each of a report's `phases`
/// (`foreign_cpu.PHASE`; unknown counts as starved).
fn foreign_cpus(w: &Value, phases: [&str; 2]) -> [f64; 2] {
    phases.map(|k| w["foreign_cpu"][k].as_f64().unwrap_or(f64::INFINITY))
}

/// Why attempt `attempt` is not judged, if a phase was starved ([`MAX_FOREIGN_CPUS`]);
/// printed.
fn starved_attempt(attempt: u32, foreign: [f64; 2]) -> Option<String> {
    let cpus = foreign.iter().copied().find(|&c| c > MAX_FOREIGN_CPUS)?;
    let why = format!(
        "attempt {attempt} starved, not judged: processes outside the testbed took {cpus} CPUs \
         (more than {MAX_FOREIGN_CPUS})"
    );
    println!("{why}");
    Some(why)
}

/// After every attempt failed or was starved: skip (printed) if none was judged, else fail
/// with each judged attempt's reasons.
fn no_attempt_passed(attempts: u32, failures: &[String], starved: &[String]) {
    if failures.is_empty() {
        println!(
            "skipped: every attempt was CPU-starved: {}",
            starved.join("; ")
        );
        return;
    }
    panic!(
        "{} of {attempts} attempts failed ({} starved):\n{}",
        failures.len(),
        starved.len(),
        failures.join("\n")
    );
}

#[test]
fn two_equal_tenants_1_vs_8_flows_jain_at_least_0_98() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wtf{}", std::process::id() % 100_000);
    let r = run_experiment("fair-1v8", &prefix, Duration::from_secs(60));
    if let Some(why) = starved(&r) {
        println!("skipped: {why}");
        return;
    }
    let w = weft_result(&r);
    println!("{}", serde_json::to_string(&w["tenants"]).unwrap());
    let jain = w["jain"].as_f64().unwrap();
    assert!(jain >= 0.98, "Jain {jain} < 0.98: {w}");
    // Both tenants got real service (the scheduler, not a stalled path, made them equal).
    for t in w["tenants"].as_array().unwrap() {
        assert!(t["mbps"].as_f64().unwrap() > 10.0, "{t}");
    }
    assert_balanced(&weft_stats(w));
}

#[test]
fn weights_1_2_3_within_5_percent() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wtw{}", std::process::id() % 100_000);
    let r = run_experiment("weights-123", &prefix, Duration::from_secs(60));
    if let Some(why) = starved(&r) {
        println!("skipped: {why}");
        return;
    }
    let w = weft_result(&r);
    println!("{}", serde_json::to_string(&w["tenants"]).unwrap());
    let err = w["max_rel_error"].as_f64().unwrap();
    assert!(err <= 0.05, "max relative error {err} > 5%: {w}");
}

#[test]
fn per_destination_limit_holds_within_2_percent() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    // The limited class's TCP senders share a loaded 2-core machine: in a slow period they
    // can fall short of the limit (97.8 Mbit/s once, with the whole link at 477 instead of
    // 492), so one attempt outside 2% is retried, printed; the second decides.
    for attempt in 1..=2 {
        let prefix = format!("wtl{attempt}{}", std::process::id() % 10_000);
        let r = run_experiment("dest-limit", &prefix, Duration::from_secs(60));
        if let Some(why) = starved(&r) {
            println!("attempt {attempt} starved, not judged: {why}");
            if attempt == 2 {
                println!("skipped: every attempt was starved");
                return;
            }
            continue;
        }
        let w = weft_result(&r);
        println!("attempt {attempt}: {} {}", w["limit"], w["leaf_mbps"]);
        let err = w["limit"]["rel_error"].as_f64().unwrap();
        if err > 0.02 && attempt == 1 {
            println!("attempt 1 failed: limited class off by {err}");
            continue;
        }
        assert!(err <= 0.02, "limited class off by {err}: {w}");
        // The other tenant used the rest of the link (the limit is not a cap on everyone).
        let other = w["leaf_mbps"]["tenant2"].as_f64().unwrap();
        let lim = w["limit"]["limit_mbps"].as_f64().unwrap();
        assert!(other > lim, "{w}");
        assert_balanced(&weft_stats(w));
        return;
    }
}

#[test]
fn rogue_tenant_is_refused_and_counted_while_shares_hold() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wtr{}", std::process::id() % 100_000);
    let r = run_experiment("rogue", &prefix, Duration::from_secs(60));
    let w = weft_result(&r);
    let s = weft_stats(w);
    let text = serde_json::to_string(&s.tenants).unwrap();
    println!("{} {text}", w["jain"]);
    let jain = w["jain"].as_f64().unwrap();
    assert!(jain >= 0.98, "Jain {jain}: {w}");
    let rogue = &s.tenants[0].rejects;
    let foreign = rogue[Reject::ForeignQueue as usize];
    let unknown = rogue[Reject::UnknownQueue as usize];
    assert!(foreign > 1000 && unknown > 1000, "{text}");
    // The well-behaved tenant is never charged for the rogue's attempts.
    let good = &s.tenants[1].rejects;
    for r in [
        Reject::ForeignQueue,
        Reject::UnknownQueue,
        Reject::ForeignClass,
    ] {
        assert_eq!(good[r as usize], 0, "{}: {text}", r.name());
    }
    assert_balanced(&s);
}

/// `weft testbed run EXPERIMENT` for an experiment whose misbehaving tenant sends raw
/// frames from a Python script (`tool`), with `tag` for its namespaces' prefix: `None`,
/// having said why, when the machine cannot run it (not root, no python3) or starved it.
fn run_with_raw_sender(experiment: &str, tool: &str, tag: &str, limit: Duration) -> Option<Value> {
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return None;
    }
    let python = Command::new("python3")
        .arg("-c")
        .arg("import socket")
        .status();
    if !python.is_ok_and(|s| s.success()) {
        println!("skipped: python3 (the {tool}) not found");
        return None;
    }
    run_judged(experiment, tag, limit)
}

/// `weft testbed run EXPERIMENT` with `tag` for its namespaces' prefix: `None`, having said
/// why, when the run was starved.
fn run_judged(experiment: &str, tag: &str, limit: Duration) -> Option<Value> {
    let prefix = format!("{tag}{}", std::process::id() % 100_000);
    let r = run_experiment(experiment, &prefix, limit);
    if let Some(why) = starved(&r) {
        println!("skipped: {why}");
        return None;
    }
    Some(r)
}

/// The daemon's log lines in a report result (`weft_log`: `--log-format json`, one object
/// a line) that have every field of `fields` and whose message contains `message`.
fn log_lines<'a>(w: &'a Value, message: &str, fields: &[(&str, Value)]) -> Vec<&'a Value> {
    w["weft_log"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| {
            l["message"].as_str().is_some_and(|m| m.contains(message))
                && fields.iter().all(|(k, v)| &l[*k] == v)
        })
        .collect()
}

/// The daemon's log, for a failure's message.
fn log_text(w: &Value) -> String {
    w["weft_log"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Real traffic for return-path isolation: while both tenants run 4 iperf3 flows each,
/// tenant 2 also sends a hundred frames a second with tenant 1's source MAC address. They
/// are dropped and counted against tenant 2 (`spoofed_source`), tenant 1's ACKs keep coming
/// back to tenant 1, and the two keep equal shares (each within 5 % of its half).
#[test]
fn a_spoofing_tenant_cannot_take_the_other_tenants_return_traffic() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = run_with_raw_sender("spoof", "spoofer", "wtm", Duration::from_secs(60)) else {
        return;
    };
    let w = weft_result(&r);
    let s = weft_stats(w);
    let text = serde_json::to_string(&s.tenants).unwrap();
    println!("{} {text}", w["tenants"]);
    // `spoofed_source` is the first of a tenant's drops (`stats::TENANT_DROPS`).
    assert_eq!(weft_nic::stats::TENANT_DROPS[0], "spoofed_source");
    let spoofed = s.tenants[1].drops[0];
    assert!(
        spoofed >= 100,
        "tenant 2's spoofed frames: {spoofed}: {text}"
    );
    assert_eq!(s.tenants[0].drops[0], 0, "{text}");
    let err = w["max_rel_error"].as_f64().unwrap();
    assert!(err <= 0.05, "max relative error {err} > 5%: {w}");
    assert_balanced(&s);
}

/// Real traffic for per-tenant flow-queue budgets, in a pool of 256 flow queues (64
/// reserved for each tenant): tenant 2 connects, then floods the receiver with a new flow
/// per frame, 2,000 a second, as `hping3 --flood --rand-source` from its own address
/// would. Its new flows are refused once its budget is spent (`no_queue`, counted against
/// it alone); tenant 1 connects in the middle of the flood and gets at least its half of
/// what weft delivers (within 5 %; more when the flood costs tenant 2 its own flows).
#[test]
fn a_flooding_tenant_cannot_take_the_other_tenants_flow_queues() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = run_with_raw_sender("flood", "flooder", "wtf", Duration::from_secs(90)) else {
        return;
    };
    let w = weft_result(&r);
    let s = weft_stats(w);
    let text = serde_json::to_string(&s.tenants).unwrap();
    println!("{} {text}", w["tenants"]);
    // `no_queue` is the sixth of a tenant's drops (`stats::TENANT_DROPS`).
    assert_eq!(weft_nic::stats::TENANT_DROPS[5], "no_queue");
    let flooded = s.tenants[1].drops[5];
    assert!(
        flooded > 1000,
        "tenant 2's refused new flows: {flooded}: {text}"
    );
    assert_eq!(
        s.tenants[0].drops[5], 0,
        "tenant 1 was refused a queue: {text}"
    );
    let (t1, total) = (
        w["tenants"][0]["mbps"].as_f64().unwrap(),
        w["total_mbps"].as_f64().unwrap(),
    );
    assert!(
        t1 >= 0.95 * total / 2.0,
        "tenant 1 got {t1} of weft's {total} Mbit/s under the flood, less than its half: {w}"
    );
    assert_balanced(&s);
}

/// Real traffic against the MAC table's bound: while both tenants run 4 iperf3 flows each,
/// tenant 2 also sends 10,000 frames a second, each from a new random source MAC address
/// (from its own IP address, one flow), as `macof` floods a switch's table. Tenant 2's port
/// learns at most `--macs-per-tenant` (16) addresses and refuses the others
/// (`mac_table_full`, counted against it alone, and logged: a line naming the rule, and the
/// tenant's line of drops by reason), tenant 1 keeps its share (both within 5 % of their
/// halves), and the daemon's resident memory grows by less than 4 MiB over the measured
/// window, in which the flood brings about 100,000 new addresses.
#[test]
fn a_random_source_mac_flood_stays_within_its_tenants_table_budget() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = run_with_raw_sender("mac-flood", "MAC flooder", "wtc", Duration::from_secs(60))
    else {
        return;
    };
    let w = weft_result(&r);
    let s = weft_stats(w);
    let text = serde_json::to_string(&s.tenants).unwrap();
    println!("{} {text} rss {}", w["tenants"], w["weft_rss_kb"]);
    // `mac_table_full` is the fourth of a tenant's drops (`stats::TENANT_DROPS`).
    assert_eq!(weft_nic::stats::TENANT_DROPS[3], "mac_table_full");
    let refused = s.tenants[1].drops[3];
    assert!(
        refused > 20_000,
        "tenant 2's frames refused for the table: {refused}: {text}"
    );
    assert_eq!(s.tenants[0].drops[3], 0, "{text}");
    assert_eq!(s.tenants[0].drops[0], 0, "{text}");
    // The table holds at most 16 addresses per port (the default --macs-per-tenant).
    assert!(s.tenants[1].macs <= 16, "{text}");
    assert!((1..=16).contains(&s.tenants[0].macs), "{text}");
    let err = w["max_rel_error"].as_f64().unwrap();
    assert!(err <= 0.05, "max relative error {err} > 5%: {w}");
    // Logged: the refused source with its rule, and the tenant's drops by reason.
    let t2 = || ("tenant", serde_json::json!(2));
    assert!(
        !log_lines(w, "may not use", &[t2(), ("rule", "mac_table_full".into())]).is_empty(),
        "no line for the refused sources:\n{}",
        log_text(w)
    );
    assert!(
        log_lines(w, "dropped the tenant's frames", &[t2()])
            .iter()
            .any(|l| l["drops"]
                .as_str()
                .is_some_and(|d| d.contains("mac_table_full="))),
        "no drop line with mac_table_full:\n{}",
        log_text(w)
    );
    assert!(
        log_lines(
            w,
            "",
            &[
                ("tenant", serde_json::json!(1)),
                ("rule", "mac_table_full".into())
            ]
        )
        .is_empty(),
        "{}",
        log_text(w)
    );
    let (a, b) = (
        w["weft_rss_kb"]["start"]
            .as_u64()
            .expect("rss at the start"),
        w["weft_rss_kb"]["end"].as_u64().expect("rss at the end"),
    );
    assert!(
        b < a + 4096,
        "the daemon's resident memory grew from {a} kB to {b} kB under the flood"
    );
    assert_balanced(&s);
}

/// Real traffic against metrics-port exhaustion: while both tenants run 4 iperf3 flows each,
/// 200 concurrent scrapes of the metrics endpoint all get the metrics; then 1,256 idle TCP
/// connections are held to it (more than it serves and queues together, each opened again
/// when the daemon closes it), and meanwhile every stats request on the control socket is
/// answered, the connections the metrics endpoint could not take are counted
/// (`metrics_dropped`; `ctl_dropped` stays 0) and logged (`listener` `metrics`), `stop` on
/// the control socket is answered and stops the daemon with them still held, and the two
/// tenants keep their shares (within 5 % of their halves).
#[test]
fn idle_metrics_connections_cannot_lock_out_the_control_socket() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = run_with_raw_sender(
        "metrics-flood",
        "metrics client",
        "wtn",
        Duration::from_secs(90),
    ) else {
        return;
    };
    let w = weft_result(&r);
    let s = weft_stats(w);
    let m = &w["metrics_flood"];
    println!("{} {m}", w["tenants"]);
    assert_eq!(
        m["scrapes"]["answered"],
        weft_testbed::METRICS_SCRAPES,
        "concurrent scrapes unanswered: {m}"
    );
    let asked = m["control"]["asked"].as_u64().unwrap();
    assert!(asked >= 10, "{m}");
    assert_eq!(m["control"]["answered"], asked, "{m}");
    assert!(
        m["hold"]["opened"]
            .as_u64()
            .is_some_and(|n| n >= weft_testbed::METRICS_IDLE as u64),
        "the idle connections were not all opened: {m}"
    );
    assert_eq!(m["stop"]["answer"]["ok"], true, "{m}");
    assert!(
        m["stop"]["exited_s"].is_number(),
        "still running after stop: {m}"
    );
    assert!(s.dataplane.metrics_dropped > 0, "{m}");
    assert_eq!(s.dataplane.ctl_dropped, 0, "{m}");
    assert!(
        !log_lines(w, "closed unanswered", &[("listener", "metrics".into())]).is_empty(),
        "no line for the metrics connections closed:\n{}",
        log_text(w)
    );
    let err = w["max_rel_error"].as_f64().unwrap();
    assert!(err <= 0.05, "max relative error {err} > 5%: {w}");
    assert_balanced(&s);
}

/// Real traffic across an uplink outage: while both tenants run 4 iperf3 flows each, the
/// receiver's end of the uplink is set down for 2 s, then up. While it is down the daemon
/// says so (`uplink_up` false) and sends nothing (its `tx_frames` and the uplink port's
/// stand still: frames wait in the policy's queues, not counted as sent into a dead link);
/// it counts one outage and its length (`uplink_down_ms`, within 400 ms of the outage as
/// the testbed timed it: the link is read every 100 ms) and logs the link going down and
/// coming back (with the seconds it was down); once TCP is back, the two tenants share
/// within 5 % of their halves.
#[test]
fn frames_wait_while_the_uplink_is_down_and_shares_hold_after() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    let Some(r) = run_judged("link-flap", "wtu", Duration::from_secs(60)) else {
        return;
    };
    let w = weft_result(&r);
    let s = weft_stats(w);
    let f = &w["link_flap"];
    println!("{} {f}", w["tenants"]);
    let d = &f["during"];
    assert_eq!(d["uplink_up"], serde_json::json!([false, false]), "{f}");
    assert!(d["tx_frames"][0].is_u64(), "{f}");
    assert_eq!(d["tx_frames"][0], d["tx_frames"][1], "sent while down: {f}");
    assert_eq!(
        d["uplink_port_tx_frames"][0], d["uplink_port_tx_frames"][1],
        "the uplink port sent while down: {f}"
    );
    assert!(s.dataplane.uplink_up);
    assert_eq!(s.dataplane.uplink_downs, 1, "{f}");
    let timed = f["down_ms"].as_u64().unwrap();
    let counted = s.dataplane.uplink_down_ms;
    assert!(
        counted.abs_diff(timed) <= 400,
        "down {counted} ms by the daemon's count, {timed} ms as timed"
    );
    let up = || ("uplink", serde_json::Value::from("up"));
    assert!(
        !log_lines(w, "uplink is down", &[up(), ("level", "WARN".into())]).is_empty(),
        "no line for the link going down:\n{}",
        log_text(w)
    );
    let back = log_lines(w, "uplink is up again", &[up()]);
    assert_eq!(back.len(), 1, "{}", log_text(w));
    let down_s = back[0]["down_s"].as_f64().unwrap_or(-1.0);
    assert!(
        (down_s * 1e3 - counted as f64).abs() < 1.0,
        "the line says {down_s} s, the counter {counted} ms"
    );
    let after = &f["after"]["leaf_mbps"];
    for t in ["tenant1", "tenant2"] {
        assert!(after[t].as_f64().is_some_and(|m| m > 10.0), "{f}");
    }
    let err = f["after"]["max_rel_error"].as_f64().unwrap();
    assert!(
        err <= 0.05,
        "after the outage, max relative error {err} > 5%: {f}"
    );
    assert_balanced(&s);
}

#[test]
fn reload_under_load_refuses_bad_policy_and_loses_nothing() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wtx{}", std::process::id() % 100_000);
    let r = run_experiment("reload", &prefix, Duration::from_secs(60));
    let w = weft_result(&r);
    println!("{} {}", w["reload"], w["after_reload"]);
    assert_eq!(w["reload"]["invalid"]["ok"], false, "{w}");
    assert_eq!(w["reload"]["generation_after_invalid"], 1, "{w}");
    assert_eq!(w["reload"]["valid"]["ok"], true, "{w}");
    let s = weft_stats(w);
    assert_eq!(s.generation, 2);
    assert_balanced(&s);
    assert_eq!(s.dataplane.tx_errors, 0);
    // The new weights (1:3) took effect.
    let m = w["after_reload"]["mbps_last_seconds"].as_array().unwrap();
    let ratio = m[1].as_f64().unwrap() / m[0].as_f64().unwrap().max(1e-9);
    assert!(
        (ratio - 3.0).abs() / 3.0 <= 0.15,
        "ratio {ratio} after reload to 1:3: {w}"
    );
}

/// Why a sockperf test cannot run here (no namespaces or root, or no sockperf and none to be
/// installed), if it cannot.
fn sockperf_skip_reason() -> Option<String> {
    if let Some(why) = skip_reason("wtprobe") {
        return Some(why);
    }
    let installed = Command::new("sh")
        .args([
            "-c",
            "command -v sockperf >/dev/null || apt-get install -y -qq sockperf >/dev/null 2>&1",
        ])
        .status()
        .is_ok_and(|s| s.success());
    (!installed).then(|| "sockperf not found and not installable".to_string())
}

#[test]
fn prioritized_sockperf_p99_within_2x_of_idle_under_iperf3_load() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = sockperf_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    // The criterion on the defaults (TPACKET_V2 rings, the loop pinned to the last CPU with a
    // short scheduler slice, sockperf in a closed loop at nice -10 on the applications' core;
    // docs/dataplane.md, latency), with two guards: the idle p99 must itself be low (the test
    // cannot pass by making idle slow, as TPACKET_V3's 1 ms block timer did), and the load
    // must be real. Latency tails on a shared 2-core machine move with whatever else runs
    // there (loaded/idle was 1.7-2.2x across runs of the same build, 2.0-3.0x for a whole
    // afternoon in which every CPU-bound figure of the machine was 1.7x slower), so a failed
    // attempt is retried, printed, up to eight attempts in all; a broken priority (loaded p99
    // many times idle: milliseconds behind the bulk tenants' queue) fails all eight.
    const ATTEMPTS: u32 = 8;
    let mut failures = Vec::new();
    let mut starved = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let prefix = format!("wts{attempt}{}", std::process::id() % 10_000);
        let r = run_experiment("latency", &prefix, Duration::from_secs(60));
        let w = weft_result(&r);
        if let Some(why) = starved_attempt(attempt, foreign_cpus(w, ["idle", "loaded"])) {
            starved.push(why);
            continue;
        }
        let idle = w["latency_idle"]["p99_us"].as_f64().expect("idle p99");
        let loaded = w["latency_loaded"]["p99_us"].as_f64().expect("loaded p99");
        let ratio = loaded / idle;
        // The bulk tenant's rate over the last second of the loaded phase (weft's counters).
        let bulk_mbps = weft_stats(w)
            .nodes
            .iter()
            .find(|n| n.name == "tenant2")
            .expect("the bulk tenant's node")
            .rate_bps
            / 1e6;
        println!(
            "attempt {attempt}: idle {} loaded {} (p99 ratio {ratio:.2}; bulk tenant at \
             {bulk_mbps:.0} Mbit/s)",
            w["latency_idle"], w["latency_loaded"]
        );
        let mut why = Vec::new();
        if idle >= 500.0 {
            why.push(format!("idle p99 {idle} µs is not below 500 µs"));
        }
        if ratio > 2.0 {
            why.push(format!("p99 under load is {ratio:.2}x the idle p99"));
        }
        if bulk_mbps < 250.0 {
            why.push(format!("the bulk tenant sent only {bulk_mbps:.0} Mbit/s"));
        }
        if why.is_empty() {
            return;
        }
        println!("attempt {attempt} failed: {}", why.join("; "));
        failures.push(format!("{}: {w}", why.join("; ")));
    }
    no_attempt_passed(ATTEMPTS, &failures, &starved);
}

/// The simulator's Loom Fig. 1 check on real traffic, for a saturated shaping class: one tenant's sockperf
/// ping-pong and iperf3 to one address under a per-destination limit (a fifth of the
/// uplink) that iperf3 saturates, sockperf first under the limit (`limit-priority`). The
/// limit's tokens go to sockperf's requests first, so its p99 with iperf3 on stays within 2x
/// of its p99 with iperf3 off, while iperf3 takes the rest of the limit (within 10% of the
/// limit less sockperf's requests, at the wire) and the destination gets the limit (within
/// 10%, at the receiver).
///
/// The latency test's guard holds here too: the p99 with iperf3 off must be below 500 µs, so
/// the test cannot pass by making the baseline slow. A run whose applications did not get
/// the CPU they need says nothing either way: `ForeignCpu` in the report counts the CPU
/// that processes outside the testbed (another session's build, a profiler) took in each
/// phase, and an attempt where they took more than a fifth of a CPU is printed as starved and
/// not judged (on these 2-core machines such a neighbour sends the idle p99 to milliseconds
/// and holds iperf3 under the limit). A failed attempt is retried, printed (tails move from
/// run to run on shared machines); the test skips, saying why, when every attempt was
/// starved.
#[test]
fn sockperf_keeps_its_p99_under_a_destination_limit_iperf3_saturates() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = sockperf_skip_reason() {
        println!("skipped: {why}");
        return;
    }
    const ATTEMPTS: u32 = 4;
    let mut failures = Vec::new();
    let mut starved = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let prefix = format!("wtp{attempt}{}", std::process::id() % 10_000);
        let r = common::run_experiment("limit-priority", &prefix, 5, Duration::from_secs(90), &[]);
        let w = weft_result(&r);
        let off = w["latency_bulk_off"]["p99_us"]
            .as_f64()
            .expect("p99, iperf3 off");
        let on = w["latency_bulk_on"]["p99_us"]
            .as_f64()
            .expect("p99, iperf3 on");
        let ratio = on / off;
        let foreign = foreign_cpus(w, ["bulk_off", "bulk_on"]);
        println!(
            "attempt {attempt}: iperf3 off {} on {} (p99 ratio {ratio:.2}); iperf3 {}; \
             destination {}; latency app {} Mbit/s at the wire; other processes' CPUs {:?}",
            w["latency_bulk_off"],
            w["latency_bulk_on"],
            w["bulk"],
            w["limit"],
            w["latency_app_wire_mbps"],
            foreign
        );
        if let Some(why) = starved_attempt(attempt, foreign) {
            starved.push(why);
            continue;
        }
        let mut why = Vec::new();
        if off >= 500.0 {
            why.push(format!("p99 with iperf3 off {off} µs is not below 500 µs"));
        }
        if ratio > 2.0 {
            why.push(format!(
                "p99 with iperf3 on is {ratio:.2}x the p99 with it off"
            ));
        }
        let dst_err = w["limit"]["rel_error"].as_f64().unwrap_or(f64::INFINITY);
        if dst_err > 0.10 {
            why.push(format!(
                "the destination got {} Mbit/s at the wire against the limit's {}",
                w["limit"]["wire_mbps"], w["limit"]["limit_mbps"]
            ));
        }
        let share_err = w["bulk"]["share_rel_error"]
            .as_f64()
            .unwrap_or(f64::INFINITY);
        if share_err > 0.10 {
            why.push(format!(
                "iperf3 got {} Mbit/s at the wire against its share of the limit, {}",
                w["bulk"]["wire_mbps"], w["bulk"]["share_mbps"]
            ));
        }
        if why.is_empty() {
            assert_balanced(&weft_stats(w));
            return;
        }
        println!("attempt {attempt} failed: {}", why.join("; "));
        failures.push(format!("{}: {w}", why.join("; ")));
    }
    no_attempt_passed(ATTEMPTS, &failures, &starved);
}

/// The pids in namespace `ns` (`ip netns pids`).
fn pids_in(ns: &str) -> Vec<u32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` still runs (gone or a zombie waiting for init: not running).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn sigterm_mid_run_leaves_no_namespace_process_or_socket_behind() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    use std::time::Instant;
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wqprobe") {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wqsig{}", std::process::id() % 10_000);
    let out = std::env::temp_dir().join(format!("weft-testbed-{prefix}"));
    let _down = common::Down(prefix.clone(), out.clone());
    let sock = std::env::temp_dir().join(format!("weft-testbed-{prefix}.sock"));
    // In the report directory, which the guard removes (kept if the test fails).
    std::fs::create_dir_all(&out).expect("report directory");
    let log = out.join("stderr.txt");
    // Killed on any failure below, before the guard above deletes the namespaces.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Kill(
        Command::new(common::weft())
            .args([
                "testbed",
                "run",
                "fair-1v8",
                "--only",
                "weft",
                "--seconds",
                "60",
            ])
            .args(["--prefix", &prefix])
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::null())
            // A file, not a pipe: children left running would hold a pipe open forever.
            .stderr(std::fs::File::create(&log).expect("stderr file"))
            .spawn()
            .expect("spawn weft testbed run"),
    );
    // Wait until the traffic runs: `weft run` in P-nic and iperf3 in the tenants.
    let nic = format!("{prefix}-nic");
    let t1 = format!("{prefix}-t1");
    let t = Instant::now();
    let mut pids = Vec::new();
    while pids_in(&nic).is_empty() || pids_in(&t1).is_empty() || !sock.exists() {
        if let Some(s) = child.0.try_wait().expect("wait") {
            panic!("weft testbed run ended before its traffic started: {s}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no traffic after 120 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for ns in [nic.as_str(), t1.as_str()] {
        pids.extend(pids_in(ns));
    }
    let term = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    assert!(term.is_ok_and(|s| s.success()), "kill -TERM failed");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "still running 60 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        (status.code(), status.signal()),
        (Some(128 + 15), None), // SIGTERM is 15
        "{err}"
    );
    assert!(err.contains(&format!("deleting {prefix}-*")), "{err}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("{prefix}-")))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}\n{err}");
    let alive: Vec<u32> = pids.into_iter().filter(|&p| running(p)).collect();
    assert!(alive.is_empty(), "processes left running: {alive:?}\n{err}");
    assert!(!sock.exists(), "{} left behind\n{err}", sock.display());
}

/// `weft testbed bench` measures every configuration: each gets a testbed of its own, set up
/// and torn down in turn, and no teardown may take what a later configuration needs (one took
/// the FIFO policy's file, and every configuration after the first failed with "weft run did
/// not start"). A short run: rates are not judged here, only that each configuration
/// forwarded frames, and that the bench leaves nothing behind.
#[test]
fn bench_measures_every_configuration_and_cleans_up() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("wtprobe") {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wtbb{}", std::process::id() % 10_000);
    let dir = weft_testbed::bench_dir(&prefix);
    let _down = common::Down(prefix.clone(), dir.clone());
    // Both backends where the build has AF_XDP: each gets its own ratio line.
    let xdp = cfg!(feature = "af-xdp");
    let backends = if xdp { "af-packet,af-xdp" } else { "af-packet" };
    let out = Command::new(common::weft())
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["testbed", "bench", "--prefix", &prefix])
        .args(["--seconds", "0.5", "--sizes", "64", "--backend", backends])
        .output()
        .expect("weft testbed bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The AF_PACKET rows' labels end at the policy's name (a space follows in the table).
    let mut configs = vec![
        "weft loom-fig1 ",
        "weft fifo ",
        "htb 1 class",
        "htb 1000 classes",
    ];
    if xdp {
        configs.extend(["weft loom-fig1 af-xdp", "weft fifo af-xdp"]);
    }
    for config in configs {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(config))
            .unwrap_or_else(|| panic!("no row for {config}:\n{stdout}\n{stderr}"));
        let forwarded: f64 = row
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no forwarded figure in {row:?}"));
        assert!(
            forwarded > 0.0,
            "{config} forwarded nothing:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        stdout.contains("64 B, forwarded: weft Fig. 1 / HTB 1 class"),
        "{stdout}"
    );
    assert_eq!(
        stdout.contains("64 B, forwarded (af-xdp): weft Fig. 1 / HTB 1 class"),
        xdp,
        "{stdout}"
    );
    // `--json`: the same rows and ratios for machines, with weft's port counters (the
    // uplink's transmit ring carried every frame weft forwarded).
    let out = Command::new(common::weft())
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["testbed", "bench", "--prefix", &prefix, "--json"])
        .args(["--seconds", "0.3", "--sizes", "64"])
        .output()
        .expect("weft testbed bench --json runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON document on stdout");
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "{v}");
    let ratios = v["ratios"].as_array().expect("ratios");
    assert_eq!(ratios.len(), 1, "{v}");
    assert_eq!(ratios[0]["backend"], "af-packet", "{v}");
    assert!(
        ratios[0]["fig1_over_htb_1_class"]
            .as_f64()
            .is_some_and(|r| r > 0.0),
        "{v}"
    );
    for row in rows
        .iter()
        .filter(|r| r["config"].as_str().is_some_and(|c| c.starts_with("weft")))
    {
        let up = row["weft_ports"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["iface"] == "up"))
            .unwrap_or_else(|| panic!("no uplink port counters: {row}"));
        assert!(up["tx_frames"].as_u64().is_some_and(|n| n > 0), "{row}");
        assert_eq!(up["kick_errors"], 0, "{row}");
    }
    assert!(!dir.exists(), "{} left behind", dir.display());
    let left: Vec<String> = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .lines()
    .filter(|l| l.starts_with(&format!("{prefix}-")))
    .map(String::from)
    .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}
