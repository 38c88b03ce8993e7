//! `weft run --backend af-xdp`: usage errors exit 2 with a clear message (without root);
//! with root and `ip netns`, the fair-1v8 experiment through the AF_XDP backend (two equal
//! tenants, 1 vs 8 iperf3 flows, 500 Mbit/s uplink): Jain ≥ 0.98, counters balance, every
//! port is AF_XDP and counted no bad descriptor. Namespaces `wxf<pid>-*` (apart from the
//! testbed tests' `wt*`), removed by a guard also on failure.

mod common;

use std::process::Command;
use std::time::Duration;

use common::weft;
use weft_nic::stats::{AfXdpPort, PortStats};

fn policy() -> &'static str {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/loom-fig1.yaml"
    )
}

fn run_weft(args: &[&str]) -> (i32, String) {
    let o = Command::new(weft()).args(args).output().expect("run weft");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn unknown_backend_is_a_usage_error() {
    let (code, err) = run_weft(&[
        "run",
        "--policy",
        policy(),
        "--uplink",
        "u",
        "--rate",
        "1gbit",
        "--tenant",
        "a=t",
        "--backend",
        "dpdk",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("af-packet") && err.contains("af-xdp"), "{err}");
}

/// In a build with the feature, a missing interface is named with the step that failed;
/// without it, the flag is refused before any socket is opened. Both exit 2.
#[test]
fn af_xdp_errors_exit_2_and_say_why() {
    let (code, err) = run_weft(&[
        "run",
        "--policy",
        policy(),
        "--uplink",
        "wxnope0",
        "--rate",
        "1gbit",
        "--tenant",
        "a=wxnope1",
        "--backend",
        "af-xdp",
        "--ctl",
        "/tmp/weft-afxdp-cli-test.sock",
    ]);
    assert_eq!(code, 2, "{err}");
    if cfg!(feature = "af-xdp") {
        assert!(err.contains("AF_XDP on `wxnope1`"), "{err}");
        assert!(err.contains("find the interface"), "{err}");
    } else {
        assert!(err.contains("built without"), "{err}");
    }
}

/// Why the AF_XDP testbed test cannot run here: the feature, then the namespace checks.
fn skip_reason() -> Option<String> {
    if !cfg!(feature = "af-xdp") {
        return Some("built without the af-xdp feature".into());
    }
    common::skip_reason("wxprobe")
}

#[test]
fn fair_1v8_through_af_xdp_jain_at_least_0_98_and_counters_balance() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wxf{}", std::process::id() % 100_000);
    let r = common::run_experiment(
        "fair-1v8",
        &prefix,
        8,
        Duration::from_secs(90),
        &["--backend", "af-xdp"],
    );
    let w = &r["results"][0];
    println!("{}", serde_json::to_string(&w["tenants"]).unwrap());
    let jain = w["jain"].as_f64().unwrap();
    assert!(jain >= 0.98, "Jain {jain} < 0.98: {w}");
    for t in w["tenants"].as_array().unwrap() {
        assert!(t["mbps"].as_f64().unwrap() > 10.0, "{t}");
    }
    let s = common::weft_stats(w);
    let text = serde_json::to_string(&s).unwrap();
    // The dataplane's balance, as for AF_PACKET (tests/testbed.rs).
    common::assert_balanced(&s);
    // And the ports': tenants then uplink, all AF_XDP. What the dataplane read is what the
    // sockets delivered; what it sent on the uplink was posted to the uplink's TX ring and
    // completed by the kernel; no bad descriptor, no kernel drop.
    let ports: Vec<&AfXdpPort> = s
        .ports
        .iter()
        .map(|p| match p {
            PortStats::AfXdp(p) => p,
            PortStats::AfPacket(_) => panic!("an AF_PACKET port: {text}"),
        })
        .collect();
    assert_eq!(ports.len(), 3, "{text}");
    for p in &ports {
        assert_eq!(
            [
                p.rx_bad_desc,
                p.bad_index,
                p.tx_bad_completion,
                p.kick_errors
            ],
            [0; 4],
            "rx_bad_desc, bad_index, tx_bad_completion, kick_errors: {p:?}"
        );
        assert_eq!(p.kernel.rx_invalid_descs, 0, "{p:?}");
        assert_eq!(p.kernel.tx_invalid_descs, 0, "{p:?}");
    }
    assert_eq!(s.tenants.len(), 2, "{text}");
    for (p, t) in ports.iter().zip(&s.tenants) {
        assert_eq!(p.rx_frames, t.rx_frames, "{text}");
    }
    assert_eq!(ports[2].tx_frames, s.dataplane.tx_frames, "{text}");
    assert_eq!(ports[2].tx_completed, ports[2].tx_frames, "{text}");
    assert_eq!(ports[2].rx_frames, s.dataplane.reverse_frames, "{text}");
}
