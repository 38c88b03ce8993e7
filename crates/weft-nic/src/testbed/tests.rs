//! Unit tests of the testbed: teardown, application placement, reports, tool outputs and
//! the experiments' policies.

use super::*;

/// `down` removes the claim lock files a SIGKILLed `weft run` left for the namespaces
/// it deletes (root only; skipped elsewhere).
#[test]
fn down_removes_the_claim_lock_files_of_its_namespaces() {
    let prefix = format!("wqlk{}", std::process::id() % 10_000);
    let ns = format!("{prefix}-nic");
    if !is_root() || sh(&["ip", "netns", "add", &ns]).is_err() {
        eprintln!("skipped: cannot make a network namespace here");
        return;
    }
    struct Gone(String, Option<std::path::PathBuf>);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = sh(&["ip", "netns", "del", &self.0]);
            if let Some(p) = &self.1 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let mut guard = Gone(ns.clone(), None);
    let ino = std::os::unix::fs::MetadataExt::ino(
        &std::fs::metadata(Path::new("/run/netns").join(&ns)).unwrap(),
    );
    std::fs::create_dir_all(crate::dataplane::CLAIM_DIR).unwrap();
    let lock = Path::new(crate::dataplane::CLAIM_DIR)
        .join(format!("{}7.lock", crate::dataplane::claim_prefix(ino)));
    std::fs::write(&lock, "1").unwrap();
    guard.1 = Some(lock.clone());
    let r = down(&prefix);
    assert_eq!(r.namespaces, [ns]);
    assert!(!lock.exists(), "{} left behind", lock.display());
}

#[test]
fn what_down_removed_is_said_in_words() {
    let none = Removed::default();
    assert_eq!(none.describe("wq"), "nothing to delete: no namespace wq-*");
    let one = Removed {
        namespaces: vec!["wq-nic".into(), "wq-t1".into()],
        killed: 1,
    };
    assert_eq!(
        one.describe("wq"),
        "deleted wq-nic, wq-t1 (1 process in them killed)"
    );
    let two = Removed {
        namespaces: vec!["wq-nic".into()],
        killed: 2,
    };
    assert_eq!(
        two.describe("wq"),
        "deleted wq-nic (2 processes in them killed)"
    );
}

#[test]
fn applications_avoid_the_nic_core_under_weft_only() {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut e = Experiment::named("latency", 500_000_000, 10).expect("known experiment");
    e.app_cpus = None;
    e.weft_cpu = Some(n - 1);
    let weft = e.for_mode(Mode::Weft).app_cpus;
    if n > 1 {
        let list = weft.expect("pinned under weft");
        let cpus: Vec<usize> = list.split(',').map(|c| c.parse().unwrap()).collect();
        assert_eq!(cpus, (0..n - 1).collect::<Vec<_>>(), "{list}");
    } else {
        assert_eq!(weft, None);
    }
    assert_eq!(e.for_mode(Mode::Htb).app_cpus, None);
    e.weft_cpu = None;
    assert_eq!(e.for_mode(Mode::Weft).app_cpus, None);
    e.app_cpus = Some("all".into());
    assert_eq!(e.for_mode(Mode::Weft).app_cpus, None);
    e.app_cpus = Some("0-1".into());
    assert_eq!(e.for_mode(Mode::Htb).app_cpus.as_deref(), Some("0-1"));
}

#[test]
fn latency_report_has_a_table_and_no_empty_throughput_rows() {
    let r = json!({
        "experiment": "latency", "rate_bps": 500_000_000u64, "seconds": 10,
        "results": [{
            "scheduler": "weft", "app": "sockperf ping-pong", "loaded_over_idle": "p99_us",
            "latency_idle": {"p99_us": 30.0, "p50_us": 21.5},
            "latency_loaded": {"p99_us": 55.0, "p50_us": 25.0},
            "p99_loaded_over_idle": 1.833,
            "weft_stats": {"nodes": [
                {"name": "root", "leaf": false, "rate_bps": 5e8},
                {"name": "tenant1", "leaf": true, "rate_bps": 8e6},
                {"name": "tenant2", "leaf": true, "rate_bps": 4.8e8}]}
        }, {
            "scheduler": "htb", "app": "sockperf ping-pong", "loaded_over_idle": "p99_us",
            "latency_idle": {"p99_us": 17.0, "p50_us": 12.0},
            "latency_loaded": {"p99_us": 110.0, "p50_us": 26.0},
            "p99_loaded_over_idle": 6.47, "weft_stats": null
        }]
    });
    let md = markdown(&r);
    assert!(
        md.contains("| scheduler | phase | p99_us | p50_us | loaded/idle (p99_us) |"),
        "{md}"
    );
    assert!(
        md.contains("| weft | loaded | 55.0 | 25.0 | 1.833 | 480.0 |"),
        "{md}"
    );
    assert!(
        md.contains("| htb | loaded | 110.0 | 26.0 | 6.47 | – |"),
        "{md}"
    );
    assert!(!md.contains("null"), "{md}");
    assert!(!md.contains("retransmits"), "{md}");
}

#[test]
fn limit_priority_report_has_a_row_per_scheduler_and_phase() {
    let r = json!({
        "experiment": "limit-priority", "rate_bps": 500_000_000u64, "seconds": 5,
        "results": [{
            "scheduler": "weft", "app": "sockperf ping-pong",
            "latency_bulk_off": {"p50_us": 20.0, "p99_us": 30.0},
            "latency_bulk_on": {"p50_us": 25.0, "p99_us": 45.0},
            "p99_on_over_off": 1.5,
            "bulk": {"mbps": 90.1, "wire_mbps": 95.4, "share_mbps": 96.0},
            "limit": {"dst": "10.77.0.200", "limit_mbps": 100.0, "wire_mbps": 99.8},
            "foreign_cpu": {"bulk_off": 0.01, "bulk_on": 0.02}
        }]
    });
    let md = markdown(&r);
    assert!(md.contains("under a 100.0 Mbit/s limit"), "{md}");
    assert!(
        md.contains("| weft | iperf3 off | 20.0 | 30.0 |  |  |  |  | 0.01 |"),
        "{md}"
    );
    assert!(
        md.contains("| weft | iperf3 on | 25.0 | 45.0 | 1.5 | 90.1 | 95.4 / 96.0 | 99.8 | 0.02 |"),
        "{md}"
    );
    assert!(!md.contains("null"), "{md}");
}

#[test]
fn limit_priority_policy_puts_sockperf_first_under_the_limit() {
    let e = Experiment::named("limit-priority", 500_000_000, 5).unwrap();
    if let Err(err) =
        weft_core::policy::compile_str(Path::new("x.yaml"), &e.policy_yaml(), &Default::default())
    {
        panic!("{err}");
    }
    assert_eq!(e.limit, Some((RX2.to_string(), 100_000_000)));
    let y = e.policy_yaml();
    assert!(y.contains("rate: 100000000bit, burst: 6056b, match: {dst: 10.77.0.200/32}"));
    assert!(y.contains("priority: 0, match: {dport: 11111}"), "{y}");
}

/// A busy process outside the listed namespaces is counted; this process is not.
#[test]
fn foreign_cpu_counts_other_processes() {
    let cpu = ForeignCpu::start(&[]);
    let mut hog = Command::new("sh")
        .args(["-c", "exec timeout 1.5 sh -c 'while :; do :; done'"])
        .spawn()
        .expect("sh");
    let _ = hog.wait();
    let used = cpu.stop().expect("measured");
    // The hog's share of a CPU, whatever else the machine runs, is well above nothing.
    assert!(used > 0.1, "{used}");
}

#[test]
fn tool_outputs_parse() {
    let sp = "sockperf: ---> percentile 99.000 = 1997.688\nsockperf: ---> percentile 50.000 =   15.704\nnoise";
    assert_eq!(
        sockperf_percentiles(sp),
        json!({"p99_us": 1997.688, "p50_us": 15.704})
    );
    let ms = "Total Statistics\nType     Time(s)  Ops  TPS(ops/s)   Net(M/s)   Get_miss   Min(us)  Max(us)    Avg(us)    Std_dev    Geo_dist\nPeriod   2  151371  75685  78.5  0  16  2751  52  50.54  46.47\nGlobal   2  151371  75685  78.5  0  16  2751  52  50.54  46.47\n";
    assert_eq!(memaslap_totals(ms)["ops_per_s"], json!(75685.0));
    assert_eq!(memaslap_totals(ms)["avg_us"], json!(52.0));
    assert_eq!(memaslap_totals("garbage"), Value::Null);
}

#[test]
fn experiment_policies_compile() {
    for n in Experiment::NAMES {
        let e = Experiment::named(n, 500_000_000, 10).unwrap();
        let p = weft_core::policy::compile_str(
            Path::new("x.yaml"),
            &e.policy_yaml(),
            &Default::default(),
        );
        assert!(p.is_ok(), "{n}: {:?}", p.err().map(|e| e.to_string()));
    }
    assert!(check_prefix("wt").is_ok());
    assert!(check_prefix("a/b").is_err());
}
