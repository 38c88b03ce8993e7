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
    std::fs::create_dir_all(weft_nic::dataplane::CLAIM_DIR).unwrap();
    let lock = Path::new(weft_nic::dataplane::CLAIM_DIR)
        .join(format!("{}7.lock", weft_nic::dataplane::claim_prefix(ino)));
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

/// A latency result of `scheduler` with sockperf's p99 and p50 idle and loaded, their
/// ratio, and weft's nodes' rates (name, leaf, bits/s), if any.
fn latency_result(
    scheduler: &str,
    idle: (f64, f64),
    loaded: (f64, f64),
    ratio: f64,
    nodes: Option<&[(&str, bool, f64)]>,
) -> ModeResult {
    let probe = |(p99, p50): (f64, f64)| {
        Probe::Sockperf(Percentiles {
            p99_us: Some(p99),
            p50_us: Some(p50),
            ..Percentiles::default()
        })
    };
    let stats = nodes.map(|nodes| Stats {
        nodes: nodes
            .iter()
            .map(|&(name, leaf, rate_bps)| weft_nic::stats::NodeStats {
                name: name.into(),
                leaf,
                rate_bps,
                ..Default::default()
            })
            .collect(),
        ..Stats::default()
    });
    ModeResult::Latency(Box::new(LatencyResult {
        scheduler: scheduler.into(),
        app_cpus: "all".into(),
        latency_idle: probe(idle),
        latency_loaded: probe(loaded),
        app: "sockperf ping-pong".into(),
        loaded_over_idle: "p99_us".into(),
        p99_loaded_over_idle: Some(ratio),
        foreign_cpu: LatencyCpu {
            idle: None,
            loaded: None,
        },
        weft_timing_idle: None,
        weft_stats: stats,
    }))
}

#[test]
fn latency_report_has_a_table_and_no_empty_throughput_rows() {
    let nodes = [
        ("root", false, 5e8),
        ("tenant1", true, 8e6),
        ("tenant2", true, 4.8e8),
    ];
    let r = Report {
        experiment: "latency".into(),
        rate_bps: 500_000_000,
        seconds: 10,
        tenants: Vec::new(),
        results: vec![
            latency_result("weft", (30.0, 21.5), (55.0, 25.0), 1.833, Some(&nodes)),
            latency_result("htb", (17.0, 12.0), (110.0, 26.0), 6.47, None),
        ],
    };
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
    let p = |p50: f64, p99: f64| Percentiles {
        p50_us: Some(p50),
        p99_us: Some(p99),
        ..Percentiles::default()
    };
    let weft = LimitPriorityResult {
        scheduler: "weft".into(),
        app_cpus: "all".into(),
        app: "sockperf ping-pong".into(),
        latency_bulk_off: p(20.0, 30.0),
        latency_bulk_on: p(25.0, 45.0),
        p99_on_over_off: Some(1.5),
        window_s: 4.0,
        latency_app_wire_mbps: 4.0,
        bulk: BulkRate {
            app: "iperf3".into(),
            flows: 4,
            mbps: 90.1,
            retransmits: 0,
            wire_mbps: 95.4,
            share_mbps: 96.0,
            share_rel_error: 0.0063,
        },
        limit: WireLimit {
            dst: "10.77.0.200".into(),
            limit_mbps: 100.0,
            burst_bytes: LIMIT_PRIO_BURST,
            wire_mbps: 99.8,
            rel_error: 0.002,
        },
        leaf_mbps: None,
        foreign_cpu: BulkCpu {
            bulk_off: Some(0.01),
            bulk_on: Some(0.02),
        },
        weft_stats: None,
    };
    let r = Report {
        experiment: "limit-priority".into(),
        rate_bps: 500_000_000,
        seconds: 5,
        tenants: Vec::new(),
        results: vec![ModeResult::LimitPriority(Box::new(weft))],
    };
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
        Percentiles {
            p99_us: Some(1997.688),
            p50_us: Some(15.704),
            ..Percentiles::default()
        }
    );
    let ms = "Total Statistics\nType     Time(s)  Ops  TPS(ops/s)   Net(M/s)   Get_miss   Min(us)  Max(us)    Avg(us)    Std_dev    Geo_dist\nPeriod   2  151371  75685  78.5  0  16  2751  52  50.54  46.47\nGlobal   2  151371  75685  78.5  0  16  2751  52  50.54  46.47\n";
    let totals = memaslap_totals(ms).expect("a global line");
    assert_eq!((totals.ops_per_s, totals.avg_us), (75685.0, 52.0));
    assert_eq!(memaslap_totals("garbage"), None);
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

/// A throughput result with every optional section, two tenants and a rate that is not a
/// number.
fn sample_throughput() -> ThroughputResult {
    let tenant = |i: usize| TenantResult {
        tenant: i,
        weight: i as u64,
        flows: 4,
        mbps: 120.5,
        mbps_per_second: vec![118.0, 121.5],
        retransmits: 3,
        ideal_mbps: 121.0,
        rel_error: 0.0041,
    };
    let rates = Rates(vec![
        ("tenant1".into(), 100.25),
        ("tenant2".into(), f64::NAN),
    ]);
    ThroughputResult {
        scheduler: "weft".into(),
        app_cpus: "0-2".into(),
        leaf_mbps: Some(rates.clone()),
        limit: Some(LimitRate {
            dst: RX2.into(),
            limit_mbps: 100.0,
            l2_mbps: 99.5,
            rel_error: 0.005,
        }),
        reload: Some(ReloadAnswers {
            invalid: json!({"ok": false, "error": "x.yaml:7:55: error"}),
            generation_after_invalid: Some(1),
            valid: json!({"ok": true, "policy": "p", "generation": 2, "warnings": []}),
        }),
        after_reload: Some(AfterReload {
            weights: vec![1, 3],
            mbps_last_seconds: vec![121.5, 340.25],
        }),
        jain: Some(0.9998),
        total_mbps: 470.9,
        max_rel_error: 0.0134,
        weft_cpu_pct: Some(85.9),
        system_cpu_pct: None,
        foreign_cpu: Some(0.54),
        tenants: vec![tenant(1), tenant(2)],
        weft_rss_kb: Rss {
            start: Some(196508),
            end: None,
        },
        metrics_flood: Some(MetricsFlood {
            scrapes: json!({"scrapes": 200, "answered": 200, "seconds": 0.149}),
            control: ControlAnswers {
                asked: 18,
                answered: 17,
                max_ms: 48.4,
                errors: vec!["timed out".into()],
            },
            stop: StopAnswer {
                answer: json!({"ok": true}),
                exited_s: Some(0.175),
            },
            hold: Value::Null,
        }),
        link_flap: Some(LinkFlap {
            down_ms: 2030,
            during: FlapCounters {
                uplink_up: [Some(false), None],
                tx_frames: [Some(123408), None],
                uplink_port_tx_frames: [Some(123408), None],
                engine_drops: [Some(0), None],
            },
            after: AfterFlap {
                seconds: 1.8,
                leaf_mbps: rates,
                max_rel_error: None,
            },
        }),
        weft_stats: Some(Stats::default()),
        weft_log: Some(vec![
            json!({"level": "INFO", "message": "ready"}),
            json!("ready"),
        ]),
    }
}

/// A latency result of memaslap, idle figures read and loaded ones not.
fn sample_latency() -> LatencyResult {
    LatencyResult {
        scheduler: "htb".into(),
        app_cpus: "all".into(),
        latency_idle: Probe::Memaslap(Some(MemaslapTotals {
            ops_per_s: 75685.0,
            min_us: 16.0,
            max_us: 2751.0,
            avg_us: 52.0,
            std_us: 50.54,
        })),
        latency_loaded: Probe::Memaslap(None),
        app: "memcached (memaslap)".into(),
        loaded_over_idle: "avg_us".into(),
        p99_loaded_over_idle: None,
        foreign_cpu: LatencyCpu {
            idle: Some(1.13),
            loaded: None,
        },
        weft_timing_idle: None,
        weft_stats: None,
    }
}

/// A report of every kind of result, with every optional section, reads back from its JSON
/// to the same bytes (the schema is the types', both ways), and keeps its keys in the order
/// the reports have always had.
#[test]
fn report_json_reads_back_byte_for_byte() {
    let latency = sample_latency();
    let sockperf = LatencyResult {
        latency_idle: Probe::Sockperf(Percentiles::default()),
        latency_loaded: Probe::Sockperf(Percentiles {
            p999_us: Some(4284.727),
            p50_us: Some(58.87),
            ..Percentiles::default()
        }),
        ..latency.clone()
    };
    let r = Report {
        experiment: "mixed".into(),
        rate_bps: 500_000_000,
        seconds: 8,
        tenants: vec![TenantSetup {
            weight: 1,
            flows: 8,
        }],
        results: vec![
            ModeResult::Throughput(Box::new(sample_throughput())),
            ModeResult::Latency(Box::new(latency)),
            ModeResult::Latency(Box::new(sockperf)),
        ],
    };
    let text = serde_json::to_string_pretty(&r).unwrap();
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
    let v: Value = serde_json::from_str(&text).unwrap();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(&v["results"][0]),
        [
            "scheduler",
            "app_cpus",
            "leaf_mbps",
            "limit",
            "reload",
            "after_reload",
            "jain",
            "total_mbps",
            "max_rel_error",
            "weft_cpu_pct",
            "system_cpu_pct",
            "foreign_cpu",
            "tenants",
            "weft_rss_kb",
            "metrics_flood",
            "link_flap",
            "weft_stats",
            "weft_log"
        ]
    );
    // A rate that is not a number is written null; sockperf's percentiles only as given.
    assert_eq!(v["results"][0]["leaf_mbps"]["tenant2"], Value::Null);
    assert_eq!(
        keys(&v["results"][2]["latency_loaded"]),
        ["p999_us", "p50_us"]
    );
    let bench = BenchReport {
        seconds: 0.5,
        rows: vec![BenchRow {
            config: "htb 1 class".into(),
            frame_bytes: 64,
            offered_pps: 464779.0,
            forwarded_pps: 223260.0,
            weft_drops: None,
            weft_ring_full: None,
            weft_no_buffer: None,
            weft_ports: None,
        }],
        ratios: None,
    };
    let text = serde_json::to_string_pretty(&bench).unwrap();
    assert!(!text.contains("ratios"), "{text}");
    let back: BenchReport = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
}
