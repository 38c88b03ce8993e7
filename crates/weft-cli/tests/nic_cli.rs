//! `weft run`, `weft ctl` and `weft testbed` argument handling (no root needed): usage and
//! input errors exit 2 with a message, a missing daemon exits 1.

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;
use weft_nic::iface::Reject;
use weft_nic::stats::{AfXdpPort, NodeStats, PortStats, Stats, TenantStats, XdpKernelStats};

fn weft() -> Command {
    Command::cargo_bin("weft").unwrap()
}

#[test]
fn run_refuses_bad_arguments_with_exit_2() {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/loom-fig1.yaml"
    );
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "500bps", "--tenant", "a=t",
        ])
        .assert()
        .code(2)
        .stderr(contains("ambiguous"));
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a",
        ])
        .assert()
        .code(2)
        .stderr(contains("NAME=IFACE"));
    let bad = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/invalid/ambiguous-unit.yaml"
    );
    weft()
        .args([
            "run", "--policy", bad, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t",
        ])
        .assert()
        .code(2)
        .stderr(contains("invalid policy"));
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t",
        ])
        .args(["--rogue", "3"])
        .assert()
        .code(2)
        .stderr(contains("only 1 tenants"));
    // A longer idle wait would hold up control requests (`weft ctl stop` too).
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t",
        ])
        .args(["--idle-sleep-us", "30000000"])
        .assert()
        .code(2)
        .stderr(contains("--idle-sleep-us").and(contains("0..=1000")));
    // A reservation that does not fit in its pool (reservation × tenants > pool) was cut
    // down to what fits without a word: refused, with the most each tenant can have.
    let two = [
        "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t", "--tenant",
        "b=t2",
    ];
    weft()
        .args(two)
        .args(["--max-queues", "16", "--reserved-queues", "9"])
        .assert()
        .code(2)
        .stderr(
            contains("--reserved-queues 9 for 2 tenants is 18 flow queues")
                .and(contains("(--max-queues)"))
                .and(contains("at most 8 per tenant")),
        );
    weft()
        .args(two)
        .args(["--buffers", "100", "--reserved-buffers", "51"])
        .assert()
        .code(2)
        .stderr(
            contains("--reserved-buffers 51 for 2 tenants is 102 frame buffers")
                .and(contains("(--buffers)"))
                .and(contains("at most 50 per tenant")),
        );
    // Reservations that fill their pools exactly are not refused for it (the run goes on,
    // to fail later on interfaces that do not exist here).
    weft()
        .args(two)
        .args(["--max-queues", "16", "--reserved-queues", "8"])
        .args(["--buffers", "100", "--reserved-buffers", "50"])
        .assert()
        .stderr(contains("per tenant").not());
    // A negative number is a value its flag refuses, not an unknown argument `-5`.
    weft()
        .args([
            "run", "--policy", p, "--uplink", "u", "--rate", "1gbit", "--tenant", "a=t",
        ])
        .args(["--buffers", "-5"])
        .assert()
        .code(2)
        .stderr(
            contains("invalid value '-5' for '--buffers")
                .and(contains("64..=1048576"))
                .and(contains("unexpected argument").not()),
        );
}

#[test]
fn ctl_without_daemon_exits_1_and_bad_reload_exits_2() {
    let sock = std::env::temp_dir().join(format!("weft-no-daemon-{}.sock", std::process::id()));
    weft()
        .args(["ctl", "stats", "--socket"])
        .arg(&sock)
        .assert()
        .code(1)
        .stderr(contains("is `weft run` running?"));
    let bad = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/invalid/ambiguous-unit.yaml"
    );
    weft()
        .args(["ctl", "reload", bad, "--socket"])
        .arg(&sock)
        .assert()
        .code(2)
        .stderr(contains("the running one is untouched"));
}

#[test]
fn testbed_refuses_unknown_experiment_and_bad_prefix() {
    // --help says what a prefix may be before a wrong one is refused.
    for sub in ["up", "down", "run", "bench"] {
        let a = weft().args(["testbed", sub, "--help"]).assert().code(0);
        let help = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
        let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains("1 to 10 letters, digits or underscores"),
            "testbed {sub} --help:\n{help}"
        );
    }
    weft()
        .args(["testbed", "run", "nope"])
        .assert()
        .code(2)
        .stderr(contains("fair-1v8"));
    weft()
        .args(["testbed", "down", "--prefix", "a/b"])
        .assert()
        .code(2);
    // Zero seconds used to be run as one, the report saying "1 s measured".
    weft()
        .args(["testbed", "run", "fair-1v8", "--seconds", "0"])
        .assert()
        .code(2)
        .stderr(contains("--seconds").and(contains("1..=86400")));
}

#[test]
fn testbed_down_says_what_it_deleted_even_when_nothing() {
    let prefix = format!("wqnone{}", std::process::id() % 10_000);
    // What a killed `weft testbed bench` leaves besides namespaces: its FIFO policy.
    let bench = std::env::temp_dir().join(format!("weft-bench-{prefix}"));
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("fifo.yaml"), "weft: 1\n").unwrap();
    weft()
        .args(["testbed", "down", "--prefix", &prefix])
        .assert()
        .code(0)
        .stdout("")
        .stderr(contains(format!(
            "testbed: nothing to delete: no namespace {prefix}-*"
        )));
    let left = bench.exists();
    let _ = std::fs::remove_dir_all(&bench);
    assert!(!left, "{} left behind", bench.display());
}

#[test]
fn ctl_given_a_path_that_is_not_a_socket_exits_2_and_says_so() {
    let file = std::env::temp_dir().join(format!("wq-not-a-socket-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    let a = weft()
        .args(["ctl", "stats", "--socket"])
        .arg(&file)
        .assert();
    std::fs::remove_file(&file).unwrap();
    a.code(2)
        .stderr(contains("is a file, not a control socket"));
    weft()
        .args(["ctl", "stop", "--socket"])
        .arg(std::env::temp_dir())
        .assert()
        .code(2)
        .stderr(contains("is a directory, not a control socket"));
}

/// A stand-in daemon on a socket of its own: answers one request with `answer` and returns
/// the request line (join the handle); the socket is removed when the handle is joined.
fn fake_daemon(
    tag: &str,
    answer: serde_json::Value,
) -> (std::path::PathBuf, std::thread::JoinHandle<String>) {
    let (sock, daemon) = fake_daemon_answering(tag, vec![answer]);
    (
        sock,
        std::thread::spawn(move || daemon.join().unwrap().join("")),
    )
}

/// [`fake_daemon`] answering one connection per answer, in order, or fewer if the client
/// stops asking (the socket then goes when the client's last connection has been served and
/// no other comes within 5 s); returns the request lines.
fn fake_daemon_answering(
    tag: &str,
    answers: Vec<serde_json::Value>,
) -> (std::path::PathBuf, std::thread::JoinHandle<Vec<String>>) {
    use std::io::{BufRead, Write};
    let sock = std::env::temp_dir().join(format!("wq-fake-{tag}-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    l.set_nonblocking(true).unwrap();
    let path = sock.clone();
    let daemon = std::thread::spawn(move || {
        let mut reqs = Vec::new();
        for answer in answers {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let s = loop {
                match l.accept() {
                    Ok((s, _)) => break Some(s),
                    Err(_) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(5))
                    }
                    Err(_) => break None,
                }
            };
            let Some(s) = s else { break };
            s.set_nonblocking(false).unwrap();
            let mut req = String::new();
            std::io::BufReader::new(&s).read_line(&mut req).unwrap();
            writeln!(&s, "{answer}").unwrap();
            reqs.push(req);
        }
        let _ = std::fs::remove_file(&path);
        reqs
    });
    (sock, daemon)
}

/// A stats answer as the daemon gives it: `stats`'s serde form.
fn answer(stats: &Stats) -> serde_json::Value {
    serde_json::to_value(stats).unwrap()
}

/// A daemon's stats with nothing in them but its rate.
fn stats_at(rate_bps: u64) -> serde_json::Value {
    answer(&Stats {
        ok: true,
        rate_bps,
        ..Stats::default()
    })
}

/// `weft ctl reload` prints the daemon's warnings for the new policy on stderr (as `weft run`
/// does at start) and the policy's name, unquoted, on stdout.
#[test]
fn ctl_reload_prints_the_daemons_warnings() {
    let (sock, daemon) = fake_daemon_answering(
        "reload",
        vec![
            stats_at(500_000_000),
            serde_json::json!({"ok": true, "policy": "two-tenants", "generation": 2,
                "warnings": ["no leaf of two-tenants takes tenant 3 (c on t3): dropped"]}),
        ],
    );
    let good = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/two-tenants.yaml"
    );
    let a = weft()
        .args(["ctl", "reload", good, "--socket"])
        .arg(&sock)
        .assert();
    let reqs = daemon.join().unwrap();
    assert!(reqs[1].contains("\"cmd\":\"reload\""), "{reqs:?}");
    a.code(0)
        .stdout("reloaded: policy two-tenants (generation 2)\n")
        .stderr(contains(
            "warning: no leaf of two-tenants takes tenant 3 (c on t3): dropped",
        ));
}

/// `weft ctl reload` checks the policy at the rate the daemon runs at (its `--rate`, which
/// stands for the file's link rate), as the daemon will: a SENIC policy whose L1 classes
/// (7 Gbit/s) fit its file's 10 Gbit/s but not a daemon's 5 is refused here with the rule,
/// and nothing is sent; at 10 Gbit/s it is sent. It was checked at the file's rate, so the
/// daemon refused what the client had passed, with only its one-line error.
#[test]
fn ctl_reload_checks_the_policy_at_the_daemons_rate() {
    let policy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/senic-two-level.yaml"
    );
    let reload_ok = serde_json::json!({"ok": true, "policy": "senic-two-level", "generation": 2});
    // Only the stats request is answered: a reload request would find no socket (exit 1).
    let (sock, daemon) = fake_daemon_answering("reload-rate-low", vec![stats_at(5_000_000_000)]);
    let a = weft()
        .args(["ctl", "reload", policy, "--socket"])
        .arg(&sock)
        .assert();
    let reqs = daemon.join().unwrap();
    a.code(2).stderr(contains("senic-oversubscribed"));
    assert!(reqs[0].contains("\"cmd\":\"stats\""), "{reqs:?}");
    let (sock, daemon) =
        fake_daemon_answering("reload-rate-ok", vec![stats_at(10_000_000_000), reload_ok]);
    let a = weft()
        .args(["ctl", "reload", policy, "--socket"])
        .arg(&sock)
        .assert();
    let reqs = daemon.join().unwrap();
    a.code(0);
    assert!(reqs[1].contains("\"cmd\":\"reload\""), "{reqs:?}");
}

/// Stats with a little in every section the table shows.
fn some_stats() -> Stats {
    let mut b = TenantStats {
        tenant: 2,
        name: "b".into(),
        iface: "t2".into(),
        rx_frames: 7,
        ..TenantStats::default()
    };
    b.rejects[Reject::ForeignQueue as usize] = 3;
    let mut s = Stats {
        ok: true,
        policy: "p".into(),
        generation: 1,
        uptime_s: 1.0,
        rate_bps: 500_000_000,
        nodes: vec![NodeStats {
            id: 0,
            name: "root".into(),
            algo: "wfq".into(),
            packets: 12,
            bytes: 1200,
            drops: [0, 2, 0, 0, 1],
            rate_bps: 2.5e6,
            ..NodeStats::default()
        }],
        tenants: vec![
            TenantStats {
                tenant: 1,
                name: "a".into(),
                iface: "t1".into(),
                rx_frames: 5,
                ..TenantStats::default()
            },
            b,
        ],
        ports: vec![PortStats::AfXdp(AfXdpPort {
            iface: "up".into(),
            rx_frames: 4,
            kernel: XdpKernelStats {
                rx_ring_full: 1,
                ..XdpKernelStats::default()
            },
            ..AfXdpPort::default()
        })],
        ..Stats::default()
    };
    s.dataplane.tx_frames = 12;
    s.iface.posted = 12;
    s.iface.rejects[Reject::RingFull as usize] = 2;
    s
}

/// The stats table gives counters as `name=value` words (zeros left out), not JSON text.
#[test]
fn ctl_stats_table_gives_counters_as_words_not_json() {
    let (sock, daemon) = fake_daemon("stats", answer(&some_stats()));
    let a = weft()
        .args(["ctl", "stats", "--socket"])
        .arg(&sock)
        .assert();
    daemon.join().unwrap();
    let out = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    a.code(0);
    for line in [
        "policy p (generation 1), up 1.0 s, uplink 500mbit",
        "root                        wfq           12           1200        2.5          3  \
         leaf_packets=2 flow_bytes=1",
        "tenant 1 (a on t1): 5 frames received, refused: none",
        "tenant 2 (b on t2): 7 frames received, refused: foreign_queue=3",
        "dataplane: tx_frames=12 uplink_up=false",
        "port: iface=up backend=af-xdp rx_frames=4 kernel.rx_ring_full=1",
        "iface: posted=12 rejects.ring_full=2",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "no line `{line}` in:\n{out}"
        );
    }
}

/// `--json` prints the answer as the daemon gave it (the serde form of `Stats`).
#[test]
fn ctl_stats_json_is_the_answer() {
    let stats = some_stats();
    let (sock, daemon) = fake_daemon("stats-json", answer(&stats));
    let a = weft()
        .args(["ctl", "stats", "--json", "--socket"])
        .arg(&sock)
        .assert();
    daemon.join().unwrap();
    let out = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    a.code(0);
    assert_eq!(out, serde_json::to_string_pretty(&stats).unwrap() + "\n");
}

/// A stats answer that does not read as this weft's (a field missing or renamed, a count
/// by reason under a name it does not know, a port without its backend) is an error that
/// names the field and where it is, exit 1, for the table, `--json` and the reload's rate
/// alike: it was printed with the field as 0 or `?`.
#[test]
fn ctl_stats_that_do_not_read_are_refused_naming_the_field() {
    let good = answer(&some_stats());
    let broken = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v);
        v
    };
    let reload = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/two-tenants.yaml"
    );
    for (tag, v, says) in [
        (
            "missing",
            broken(&|v| {
                v["tenants"][1].as_object_mut().unwrap().remove("rx_frames");
            }),
            "tenants[1]: missing field `rx_frames`",
        ),
        (
            "renamed",
            broken(&|v| {
                let d = v["dataplane"].as_object_mut().unwrap();
                let n = d.remove("tx_frames").unwrap();
                d.insert("tx_frame".into(), n);
            }),
            "dataplane: missing field `tx_frames`",
        ),
        (
            "rate",
            broken(&|v| {
                v.as_object_mut().unwrap().remove("rate_bps");
            }),
            "missing field `rate_bps`",
        ),
        (
            "reason",
            broken(&|v| {
                let d = v["nodes"][0]["drops"].as_object_mut().unwrap();
                let n = d.remove("leaf_packets").unwrap();
                d.insert("leaf_pkts".into(), n);
            }),
            "nodes[0].drops: unknown reason `leaf_pkts`",
        ),
        (
            "type",
            broken(&|v| v["iface"]["posted"] = serde_json::json!("12")),
            "iface.posted: invalid type: string \"12\"",
        ),
        (
            "backend",
            broken(&|v| {
                v["ports"][0].as_object_mut().unwrap().remove("backend");
            }),
            "ports[0]: missing field `backend`",
        ),
    ] {
        for args in [&["ctl", "stats"][..], &["ctl", "stats", "--json"]] {
            let (sock, daemon) = fake_daemon(&format!("bad-{tag}"), v.clone());
            let a = weft().args(args).arg("--socket").arg(&sock).assert();
            daemon.join().unwrap();
            a.code(1)
                .stdout("")
                .stderr(contains(says).and(contains("do not read as this weft's")));
        }
        let (sock, daemon) = fake_daemon_answering(&format!("bad-reload-{tag}"), vec![v]);
        let a = weft()
            .args(["ctl", "reload", reload, "--socket"])
            .arg(&sock)
            .assert();
        let reqs = daemon.join().unwrap();
        a.code(1).stderr(contains(says));
        assert_eq!(reqs.len(), 1, "a reload was sent: {reqs:?}");
    }
}

/// `weft testbed bench` refuses what would measure nothing (a zero or NaN duration, frames
/// the links cannot carry) and an invalid --fig1 policy (its diagnostics), exit 2, before
/// any namespace is made; these ran and printed a table of zeros, or `weft run did not
/// start`.
#[test]
fn testbed_bench_refuses_what_would_measure_nothing() {
    let prefix = format!("wqbx{}", std::process::id() % 10_000);
    let fig1 = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/loom-fig1.yaml"
    );
    let bad = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/policies/invalid/cycle.yaml"
    );
    for (args, says) in [
        (vec!["--fig1", fig1, "--seconds", "0"], "--seconds 0"),
        (vec!["--fig1", fig1, "--seconds", "NaN"], "--seconds NaN"),
        (
            vec!["--fig1", fig1, "--sizes", "64,0"],
            "--sizes 0: frames are 60 to 1514 bytes",
        ),
        (vec!["--fig1", fig1, "--sizes", "20000"], "--sizes 20000"),
        (vec!["--fig1", bad], "invalid policy"),
    ] {
        weft()
            .args(["testbed", "bench", "--prefix", &prefix])
            .args(&args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(contains(says));
    }
    let list = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(!list.contains(&format!("{prefix}-")), "{list}");
}
