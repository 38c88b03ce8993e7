//! `weft run --backend af-xdp`: usage errors exit 2 with a clear message (without root);
//! with root and `ip netns`, the fair-1v8 experiment through the AF_XDP backend (two equal
//! tenants, 1 vs 8 iperf3 flows, 500 Mbit/s uplink): Jain ≥ 0.98, counters balance, every
//! port is AF_XDP and counted no bad descriptor. Namespaces `wxf<pid>-*` (apart from the
//! testbed tests' `wt*`), removed by a guard also on failure.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn weft() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_weft"))
}

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

fn skip_reason() -> Option<String> {
    if !cfg!(feature = "af-xdp") {
        return Some("built without the af-xdp feature".into());
    }
    if std::env::var_os("WEFT_SKIP_NETNS").is_some() {
        return Some("WEFT_SKIP_NETNS is set".into());
    }
    if !weft_nic::testbed::is_root() {
        return Some("not root (network namespaces, XDP and AF_XDP need it)".into());
    }
    weft_nic::testbed::install_tools();
    if let Some(r) = weft_nic::testbed::missing_prerequisite() {
        return Some(r);
    }
    let probe = format!("wxprobe{}", std::process::id() % 100_000);
    let ok = Command::new("ip")
        .args(["netns", "add", &probe])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let veth = ok
        && Command::new("ip")
            .args([
                "-n", &probe, "link", "add", "name", "pa", "type", "veth", "peer", "name", "pb",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    if !ok {
        return Some("`ip netns add` failed (no network namespaces here)".into());
    }
    if !veth {
        return Some("cannot create veth pairs here".into());
    }
    None
}

/// `weft testbed down` for the prefix and the report directory removed (kept when the test
/// failed), also on panic.
struct Down(String, PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(weft())
            .args(["testbed", "down", "--prefix", &self.0])
            .status();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
}

#[test]
fn fair_1v8_through_af_xdp_jain_at_least_0_98_and_counters_balance() {
    if let Some(why) = skip_reason() {
        println!("skipped: {why}");
        return;
    }
    let prefix = format!("wxf{}", std::process::id() % 100_000);
    let out = std::env::temp_dir().join(format!("weft-testbed-{prefix}"));
    let _down = Down(prefix.clone(), out.clone());
    let mut child = Command::new(weft())
        .args(["testbed", "run", "fair-1v8", "--only", "weft", "--json"])
        .args(["--backend", "af-xdp", "--prefix", &prefix])
        .args(["--seconds", "8", "--rate", "500mbit", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn weft testbed run");
    let t = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weft testbed run fair-1v8 --backend af-xdp took longer than 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().expect("output");
    assert!(o.status.success(), "weft testbed run failed");
    let r: Value = serde_json::from_slice(&o.stdout).expect("report JSON");
    let w = &r["results"][0];
    println!("{}", serde_json::to_string(&w["tenants"]).unwrap());
    let jain = w["jain"].as_f64().unwrap();
    assert!(jain >= 0.98, "Jain {jain} < 0.98: {w}");
    for t in w["tenants"].as_array().unwrap() {
        assert!(t["mbps"].as_f64().unwrap() > 10.0, "{t}");
    }
    let s = &w["weft_stats"];
    let n = |p: &str| {
        s.pointer(p)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{p}: {s}"))
    };
    // The dataplane's balance, as for AF_PACKET (crates/weft-cli/tests/testbed.rs).
    let rx: u64 = (0..2).map(|i| n(&format!("/tenants/{i}/rx_frames"))).sum();
    let ingress_drops: u64 = [
        "parse_errors",
        "oversize",
        "no_buffer",
        "ring_full",
        "no_queue",
        "unclassified",
    ]
    .iter()
    .map(|k| n(&format!("/dataplane/{k}")))
    .sum();
    assert_eq!(rx, n("/iface/posted") + ingress_drops, "{s}");
    assert_eq!(
        n("/iface/posted"),
        n("/iface/sent") + n("/iface/dropped"),
        "{s}"
    );
    assert_eq!(n("/iface/sent"), n("/dataplane/tx_frames"), "{s}");
    // And the ports': tenants then uplink, all AF_XDP. What the dataplane read is what the
    // sockets delivered; what it sent on the uplink was posted to the uplink's TX ring and
    // completed by the kernel; no bad descriptor, no kernel drop.
    let ports = s["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 3, "{s}");
    for p in ports {
        assert_eq!(p["backend"], "af-xdp", "{p}");
        for k in [
            "rx_bad_desc",
            "bad_index",
            "tx_bad_completion",
            "kick_errors",
        ] {
            assert_eq!(p[k], 0, "{k}: {p}");
        }
        assert_eq!(p["kernel"]["rx_invalid_descs"], 0, "{p}");
        assert_eq!(p["kernel"]["tx_invalid_descs"], 0, "{p}");
    }
    for i in 0..2 {
        assert_eq!(ports[i]["rx_frames"], s["tenants"][i]["rx_frames"], "{s}");
    }
    assert_eq!(ports[2]["tx_frames"], s["dataplane"]["tx_frames"], "{s}");
    assert_eq!(ports[2]["tx_completed"], ports[2]["tx_frames"], "{s}");
    assert_eq!(
        ports[2]["rx_frames"], s["dataplane"]["reverse_frames"],
        "{s}"
    );
}
