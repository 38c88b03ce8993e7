//! Unit tests of live control: the server, the pools, policy files, redaction, metrics.

use super::*;
use crate::stats::{AfPacketPort, AfXdpPort, NodeStats, ShaperStats, TenantStats};

/// The metrics queue fits the descriptor limit with the control socket's needs and the
/// reserve to spare, and is the whole queue where the limit holds it.
#[test]
fn the_metrics_queue_leaves_the_control_socket_its_descriptors() {
    let others = RESERVED_FDS as usize + MAX_CONNECTIONS + CTL_QUEUE + MAX_METRICS_CONNECTIONS;
    for limit in [
        0u64,
        64,
        256,
        368,
        369,
        1024,
        1392,
        1393,
        4096,
        1 << 20,
        u64::MAX,
    ] {
        let q = metrics_queue_for(limit);
        assert!(q <= METRICS_QUEUE, "{limit}: {q}");
        if limit != u64::MAX {
            assert!(
                (q + others) as u64 <= limit.max(others as u64),
                "{limit}: {q}"
            );
        }
        let whole = limit >= (others + METRICS_QUEUE) as u64;
        assert_eq!(q == METRICS_QUEUE, whole, "{limit}: {q}");
    }
    assert_eq!(metrics_queue_for(1024), 1024 - others);
    assert_eq!(metrics_queue_for(100), 0);
}

fn nothing_to_prepare() -> Prepare {
    Arc::new(|req, _| Ok(req))
}

fn socket(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("weft-ctl-{name}-{}.sock", std::process::id()))
}

/// Stats whose generation is `n` (what [`poll_until`] counts in it).
fn counted(n: u64) -> Reply {
    Reply::Stats(Box::new(Stats {
        ok: true,
        generation: n,
        ..Stats::default()
    }))
}

/// The count [`counted`] put in a stats reply, if it is one.
fn count_of(r: &Reply) -> Option<u64> {
    match r {
        Reply::Stats(s) => Some(s.generation),
        _ => None,
    }
}

/// Polls `server` as the dataplane does (answering `stats` with a count of the requests
/// answered so far as its generation) until `done`.
fn poll_until(server: &Server, done: impl Fn() -> bool) {
    let mut answered = 0u64;
    let start = Instant::now();
    while !done() {
        server.poll(|req| {
            answered += 1;
            match req {
                Request::Stats => counted(answered),
                _ => Reply::Done,
            }
        });
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no answer in 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A client that connects and sends its request one byte at a time, slower than the
/// old per-read timeout, held the whole loop: `poll` read that connection until the
/// line was complete. Now a second client is answered while the first still drips, and
/// the drip is cut at the read deadline.
#[test]
fn a_dripping_client_holds_up_neither_the_loop_nor_other_clients() {
    let path = socket("drip");
    let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
    let dripping = Arc::new(AtomicBool::new(true));
    let drip = {
        let (path, dripping) = (path.clone(), dripping.clone());
        let mut a = UnixStream::connect(&path).unwrap();
        std::thread::spawn(move || {
            // Three seconds of `{"cmd":"stats"` without its end, a byte every 50 ms.
            let text = br#"{"cmd":"stats"                                                      "#;
            for b in text.iter().take(60) {
                if a.write_all(&[*b]).is_err() {
                    break; // the server cut it off
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            dripping.store(false, Ordering::SeqCst);
            let mut rest = String::new();
            let _ = a.read_to_string(&mut rest);
            drop(path);
            rest
        })
    };
    let other = {
        let path = path.clone();
        let dripping = dripping.clone();
        std::thread::spawn(move || {
            let answer = request(&path, &Request::Stats).unwrap();
            (answer, dripping.load(Ordering::SeqCst))
        })
    };
    poll_until(&server, || other.is_finished());
    let (answer, still_dripping) = other.join().unwrap();
    assert!(count_of(&answer).is_some(), "{answer:?}");
    assert!(still_dripping, "answered only after the slow client ended");
    poll_until(&server, || drip.is_finished());
    // The slow client got no answer (its request never ended within the deadline).
    assert_eq!(drip.join().unwrap(), "");
    drop(server);
    assert!(!path.exists(), "socket left behind");
}

/// The prepare hook runs on the connection's thread: a request it answers never reaches
/// the loop (answered here without a single `poll`), and what it prepares reaches the
/// loop's handler with its request.
#[test]
fn prepared_work_is_done_off_the_loop() {
    let path = socket("prep");
    let prepare: Prepare<Option<u64>> = Arc::new(|req: Request, _: &Client| match req {
        Request::Stop => Err(Reply::refused("refused before the loop")),
        Request::Stats => Ok(Some(42)),
        _ => Ok(None),
    });
    let server = Server::bind(Some(&path), None, prepare).unwrap();
    let refused = request(&path, &Request::Stop).unwrap();
    assert_eq!(refused.error(), Some("refused before the loop"));
    let carried = {
        let path = path.clone();
        std::thread::spawn(move || request(&path, &Request::Stats).unwrap())
    };
    let start = Instant::now();
    while !carried.is_finished() {
        server.poll(|n| counted(n.unwrap_or_default()));
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(count_of(&carried.join().unwrap()), Some(42));
}

/// A reload gave its place among the [`RELOADS_AT_ONCE`] back only after its answer was
/// on its way, so a client reloading back to back could find its own finished reloads
/// still holding every place, and be refused. The place is free before the answer goes.
#[test]
fn a_reload_gives_its_place_back_before_it_answers() {
    let reloads = Arc::new(AtomicUsize::new(1));
    let mut answered = None;
    in_place(
        Place(reloads.clone()),
        || "compiled",
        |r| answered = Some((r, reloads.load(Ordering::SeqCst))),
    );
    assert_eq!(
        answered,
        Some(("compiled", 0)),
        "(answer, places held then)"
    );
    // However the work ends.
    reloads.fetch_add(1, Ordering::SeqCst);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        in_place(Place(reloads.clone()), || panic!("compiler bug"), |()| {})
    }));
    assert!(r.is_err());
    assert_eq!(reloads.load(Ordering::SeqCst), 0);
}

/// Shared state for driving a [`Pool`] directly.
fn shared() -> Shared<Request> {
    Shared {
        to_loop: mpsc::channel().0,
        prepare: nothing_to_prepare(),
        stop: Arc::new(AtomicBool::new(false)),
        max_policy_bytes: DEFAULT_MAX_POLICY_BYTES,
        reloads: Arc::new(AtomicUsize::new(0)),
        metrics: Arc::new(MetricsCache::default()),
    }
}

/// Connections closed unanswered (every thread busy, the queue full) went uncounted:
/// nothing told an operator that clients were being turned away. A full pool counts
/// each one it closes, and only those.
#[test]
fn a_full_pool_counts_what_it_closes_unanswered() {
    // A "connection" is served until its sender says so (or is dropped).
    fn serve(c: Receiver<()>, _: &Shared<Request>) -> io::Result<()> {
        let _ = c.recv();
        Ok(())
    }
    let dropped = Dropped::new("test");
    let pool = Pool::new("weft-test-conn", 2, 3, serve, dropped.clone());
    let sh = shared();
    let senders: Vec<Sender<()>> = (0..9)
        .map(|_| {
            let (tx, rx) = mpsc::channel();
            pool.submit(rx, &sh);
            tx
        })
        .collect();
    // Two served, three waiting, four closed unanswered.
    assert_eq!(dropped.count(), 4);
    let closed = senders.iter().filter(|tx| tx.send(()).is_err()).count();
    assert_eq!(closed, 4, "the connections counted are the ones closed");
    // The served and waiting ones end; the pool takes new ones without counting them.
    let start = Instant::now();
    while lock(&pool.state).running > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the pool never drained"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let (tx, rx) = mpsc::channel();
    pool.submit(rx, &sh);
    tx.send(()).unwrap();
    assert_eq!(dropped.count(), 4);
}

/// The log line about closed connections comes at most once a [`DROPPED_LOG_EVERY`],
/// with the count since the last line and in all (times given, not waited for).
#[test]
fn closed_connections_are_logged_at_most_once_a_second() {
    let d = Dropped::new("test");
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    assert_eq!(d.counted(at(0)), Some((1, 1)));
    assert_eq!(d.counted(at(10)), None);
    assert_eq!(d.counted(at(999)), None);
    assert_eq!(d.counted(at(1000)), Some((3, 4)));
    assert_eq!(d.counted(at(1500)), None);
    assert_eq!(d.counted(at(5000)), Some((2, 6)));
    assert_eq!(d.count(), 6);
}

/// Past [`MAX_CONNECTIONS`] a connection waits for a thread, and is served once one is
/// free; past [`CTL_QUEUE`] waiting too it is closed unanswered, and the client says why
/// it got nothing; once the silent ones go, requests are served again.
#[test]
fn connections_past_the_limit_wait_then_are_closed_and_the_client_says_so() {
    let path = socket("full");
    let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
    let silent: Vec<UnixStream> = (0..MAX_CONNECTIONS)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    let waiting = {
        let path = path.clone();
        std::thread::spawn(move || request(&path, &Request::Stats))
    };
    // Served once a thread is free: the silent ones' threads end at EOF.
    std::thread::sleep(Duration::from_millis(100));
    drop(silent);
    poll_until(&server, || waiting.is_finished());
    assert!(count_of(&waiting.join().unwrap().unwrap()).is_some());

    let silent: Vec<UnixStream> = (0..MAX_CONNECTIONS + CTL_QUEUE)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    // The accepting thread takes connections in order: the next finds every thread busy
    // and the queue full.
    let Err(refused) = request(&path, &Request::Stats) else {
        panic!("answered with {} silent connections open", silent.len());
    };
    assert!(
        refused
            .to_string()
            .contains("closed the connection without an answer"),
        "{refused}"
    );
    assert_eq!(server.dropped(), DroppedConnections { ctl: 1, metrics: 0 });
    drop(silent);
    let served = {
        let path = path.clone();
        std::thread::spawn(move || loop {
            if let Ok(v) = request(&path, &Request::Stats) {
                return v;
            }
            std::thread::sleep(Duration::from_millis(20));
        })
    };
    poll_until(&server, || served.is_finished());
    assert!(count_of(&served.join().unwrap()).is_some());
}

#[test]
fn a_malformed_request_gets_an_error_answer_and_the_next_is_served() {
    let path = socket("bad");
    let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
    let bad = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut s = UnixStream::connect(&path).unwrap();
            s.write_all(b"stats please\n").unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(&s), &mut line).unwrap();
            line
        })
    };
    let line = bad.join().unwrap();
    assert!(line.contains("bad request"), "{line}");
    let good = {
        let path = path.clone();
        std::thread::spawn(move || request(&path, &Request::Stats).unwrap())
    };
    poll_until(&server, || good.is_finished());
    assert_eq!(count_of(&good.join().unwrap()), Some(1));
}

#[test]
fn metrics_are_served_from_the_loops_stats() {
    let server = Server::bind(None, Some("127.0.0.1:0"), nothing_to_prepare()).unwrap();
    let Wake::Tcp(addr) = server.acceptors[0].1 else {
        panic!("no metrics listener")
    };
    let client = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    });
    let start = Instant::now();
    while !client.is_finished() {
        server.poll(|_| {
            Reply::Stats(Box::new(Stats {
                ok: true,
                nodes: vec![NodeStats {
                    name: "root".into(),
                    packets: 3,
                    bytes: 300,
                    ..NodeStats::default()
                }],
                ..Stats::default()
            }))
        });
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(1));
    }
    let text = client.join().unwrap();
    assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
    assert!(
        text.contains("weft_node_packets_total{node=\"root\"} 3"),
        "{text}"
    );
}

/// A metrics address that is not loopback is refused, naming it, before anything binds.
#[test]
fn a_metrics_address_that_is_not_loopback_is_refused_by_name() {
    for a in ["0.0.0.0:0", "[::]:0"] {
        let e = Server::bind(None, Some(a), nothing_to_prepare())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        let m = e.to_string();
        assert!(
            m.contains(&format!("`{a}`")) && m.contains("not a loopback"),
            "{m}"
        );
    }
    let e = Server::bind(None, Some("nonsense"), nothing_to_prepare())
        .err()
        .expect("refused");
    assert!(
        e.to_string().starts_with("metrics address `nonsense`"),
        "{e}"
    );
}

#[test]
fn prometheus_has_a_series_per_shaping_class() {
    let stats = Stats {
        shapers: vec![ShaperStats {
            id: 0,
            name: "dst\"2".into(),
            limit_bps: 10_000_000_000,
            burst_bytes: 65536,
            packets: 7,
            bytes: 700,
            rate_bps: 5.0,
        }],
        ..Stats::default()
    };
    let text = prometheus(&stats);
    for line in [
        r#"weft_shaper_packets_total{shaper="dst\"2"} 7"#,
        r#"weft_shaper_bytes_total{shaper="dst\"2"} 700"#,
        r#"weft_shaper_rate_bps{shaper="dst\"2"} 5.0"#,
        r#"weft_shaper_limit_bps{shaper="dst\"2"} 10000000000"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
}

/// A peer that answers too slowly in all (a byte at a time), too much, or not in UTF-8:
/// the client gives up within its deadline and limit, naming the socket.
#[test]
fn a_misbehaving_peer_is_given_up_on_by_name() {
    let serve = |name: &str, answer: &'static [&'static [u8]], gap: Duration| {
        let p = socket(name);
        let l = UnixListener::bind(&p).unwrap();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                // Read the whole request line: closing with part of it unread would reset
                // the connection, and the client would see that instead of the answer.
                let mut request = Vec::new();
                let mut buf = [0u8; 256];
                while !request.contains(&b'\n') {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                for part in answer {
                    if s.write_all(part).is_err() {
                        return;
                    }
                    std::thread::sleep(gap);
                }
            }
        });
        p
    };
    let req = Request::Stats;
    let slow = serve(
        "slow",
        &[b"{", b"\"", b"o", b"k", b"\"", b":", b"1", b"}", b"\n"],
        Duration::from_millis(300),
    );
    let e = request_within(&slow, &req, Duration::from_millis(500), 1 << 20).unwrap_err();
    assert!(
        e.to_string().contains("no whole answer") && e.to_string().contains("slow"),
        "{e}"
    );
    let _ = std::fs::remove_file(&slow);
    let big = serve("big", &[&[b'x'; 4096], &[b'x'; 4096]], Duration::ZERO);
    let e = request_within(&big, &req, Duration::from_secs(5), 5000).unwrap_err();
    assert!(
        e.to_string().contains("more than 5000 bytes") && e.to_string().contains("big"),
        "{e}"
    );
    let _ = std::fs::remove_file(&big);
    let bad = serve("utf8", &[b"\"\xff\xfe\"\n"], Duration::ZERO);
    let e = request_within(&bad, &req, Duration::from_secs(5), 1 << 20).unwrap_err();
    assert!(e.to_string().contains("utf8"), "{e}");
    let _ = std::fs::remove_file(&bad);
}

#[test]
fn prometheus_has_series_per_tenant_and_port() {
    let mut stats = Stats {
        tenants: vec![TenantStats {
            tenant: 1,
            name: "a\nb".into(),
            iface: "t1".into(),
            rx_frames: 9,
            rx_bytes: 900,
            drops: [2, 0, 0, 0, 0, 1, 0, 0],
            macs: 1,
            queues: 3,
            buffers: 4,
            ..TenantStats::default()
        }],
        ports: vec![
            PortStats::AfXdp(AfXdpPort {
                iface: "x\"y".into(),
                kernel: XdpKernelStats {
                    rx_ring_full: 3,
                    ..XdpKernelStats::default()
                },
                ..AfXdpPort::default()
            }),
            PortStats::AfPacket(AfPacketPort {
                iface: "up".into(),
                rx_kernel_drops: 5,
                tx_frames: 11,
                ..AfPacketPort::default()
            }),
        ],
        ..Stats::default()
    };
    stats.iface.rejects[Reject::Busy as usize] = 4;
    stats.tenants[0].rejects[Reject::BadRate as usize] = 6;
    let text = prometheus(&stats);
    for line in [
        r#"weft_tenant_rx_frames_total{tenant="a\nb",iface="t1"} 9"#,
        r#"weft_tenant_drops_total{tenant="a\nb",iface="t1",reason="spoofed_source"} 2"#,
        r#"weft_tenant_queues{tenant="a\nb",iface="t1"} 3"#,
        r#"weft_tenant_rejects_total{tenant="a\nb",iface="t1",reason="bad_rate"} 6"#,
        r#"weft_tenant_rejects_total{tenant="a\nb",iface="t1",reason="busy"} 0"#,
        r#"weft_port_rx_kernel_drops_total{iface="up"} 5"#,
        r#"weft_port_tx_frames_total{iface="up"} 11"#,
        r#"weft_port_kernel_rx_ring_full_total{iface="x\"y"} 3"#,
        r#"weft_port_kernel_rx_dropped_total{iface="x\"y"} 0"#,
        r#"weft_iface_rejects_total{reason="busy"} 4"#,
        r#"weft_iface_rejects_total{reason="unknown_queue"} 0"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from:\n{text}"
        );
    }
    assert!(
        !text.contains("backend"),
        "a string is not a sample:\n{text}"
    );
    assert!(
        !text.contains(r#"weft_port_kernel_rx_dropped_total{iface="up"}"#),
        "an AF_PACKET port has no AF_XDP kernel statistics:\n{text}"
    );
}

/// Every number of the dataplane's, the interface's and each backend's port counters
/// is a sample, under its own name and with its value; so is every count of their
/// nested sections (the interface's refusals by reason, AF_XDP's kernel statistics),
/// under a counter's name with a TYPE line.
#[test]
fn prometheus_exports_every_counter() {
    let mut stats = Stats::default();
    let mut next = 0u64;
    fn count(v: &mut serde_json::Value, next: &mut u64) {
        for (_, n) in v.as_object_mut().unwrap() {
            if n.is_u64() {
                *next += 1;
                *n = (*next).into();
            } else if n.is_object() {
                count(n, next);
            }
        }
    }
    let mut d = serde_json::to_value(&stats.dataplane).unwrap();
    count(&mut d, &mut next);
    stats.dataplane = serde_json::from_value(d.clone()).unwrap();
    let mut i = serde_json::to_value(&stats.iface).unwrap();
    count(&mut i, &mut next);
    stats.iface = serde_json::from_value(i.clone()).unwrap();
    let mut ports = serde_json::json!([
        PortStats::AfPacket(AfPacketPort {
            iface: "p".into(),
            ..AfPacketPort::default()
        }),
        PortStats::AfXdp(AfXdpPort {
            iface: "x".into(),
            ..AfXdpPort::default()
        }),
    ]);
    for p in ports.as_array_mut().unwrap() {
        count(p, &mut next);
    }
    stats.ports = serde_json::from_value(ports.clone()).unwrap();
    let text = prometheus(&stats);
    // Each number's sample: one of its possible lines (`weft_SECTION_NAME_total` for a
    // counter, `weft_SECTION_NAME` for a gauge).
    let mut want: Vec<Vec<String>> = Vec::new();
    // A nested section's counts: under `name{labels,key="..."}` or
    // `prefix_KEY_total{labels}`.
    let nested = |section: &str, k: &str, n: &serde_json::Value, l: &str| match section {
        "iface.rejects" => vec![format!("weft_iface_rejects_total{{reason=\"{k}\"}} {n}")],
        "port.kernel" => vec![format!("weft_port_kernel_{k}_total{{{l}}} {n}")],
        _ => panic!("{section} is a section of counters the exporter does not know"),
    };
    let mut sections = Vec::new();
    for (prefix, v) in [("dataplane", &d), ("iface", &i)] {
        for (k, n) in v.as_object().unwrap() {
            if k == "uplink_down_ms" {
                // In Prometheus's unit of time, seconds.
                let ms = n.as_u64().unwrap();
                want.push(vec![format!(
                    "weft_dataplane_uplink_down_seconds_total {}.{:03}",
                    ms / 1000,
                    ms % 1000
                )]);
            } else if n.is_u64() {
                want.push(vec![
                    format!("weft_{prefix}_{k}_total {n}"),
                    format!("weft_{prefix}_{k} {n}"),
                ]);
            } else if let Some(m) = n.as_object() {
                sections.push(format!("{prefix}.{k}"));
                for (r, n) in m {
                    want.push(nested(&format!("{prefix}.{k}"), r, n, ""));
                }
            }
        }
    }
    for p in ports.as_array().unwrap() {
        let l = format!("iface=\"{}\"", p["iface"].as_str().unwrap());
        for (k, n) in p.as_object().unwrap() {
            if n.is_u64() {
                want.push(vec![
                    format!("weft_port_{k}_total{{{l}}} {n}"),
                    format!("weft_port_{k}{{{l}}} {n}"),
                ]);
            } else if let Some(m) = n.as_object() {
                sections.push(format!("port.{k}"));
                for (r, n) in m {
                    want.push(nested(&format!("port.{k}"), r, n, &l));
                }
            }
        }
    }
    assert_eq!(sections, ["iface.rejects", "port.kernel"]);
    assert!(want.len() > 80, "{want:?}");
    for lines in want {
        assert_eq!(
            lines
                .iter()
                .filter(|&line| text.lines().any(|l| l == line))
                .count(),
            1,
            "{lines:?} not once in:\n{text}"
        );
    }
    // Every series is declared once, before its samples; a counter is a `_total` and
    // only a counter is (tests/prometheus_text.rs parses the whole text).
    let mut declared = HashSet::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').unwrap();
            assert!(declared.insert(name), "{name} declared twice:\n{text}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{l}");
        } else if !l.starts_with("# HELP ") {
            let name = &l[..l.find(['{', ' ']).unwrap()];
            assert!(
                declared.contains(name),
                "{name} has no TYPE line before it:\n{text}"
            );
        }
    }
}

/// A second daemon cannot take over a running one's socket (the first could then never
/// be stopped), a path that is not a socket is never deleted, and a stale socket (its
/// daemon killed) is replaced.
#[test]
fn the_control_socket_path_is_claimed_only_when_free() {
    let live = socket("claim-live");
    let _ = std::fs::remove_file(&live);
    let first = Server::bind(Some(&live), None, nothing_to_prepare()).unwrap();
    let e = Server::bind(Some(&live), None, nothing_to_prepare())
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
    assert!(e.to_string().contains("in use by a running weft"), "{e}");
    // The first still answers.
    let asked = std::thread::spawn({
        let live = live.clone();
        move || request(&live, &Request::Stats).unwrap()
    });
    poll_until(&first, || asked.is_finished());
    assert!(asked.join().unwrap().is_ok());
    drop(first);

    let file = socket("claim-file");
    std::fs::write(&file, "precious").unwrap();
    let e = Server::bind(Some(&file), None, nothing_to_prepare())
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
    std::fs::remove_file(&file).unwrap();

    // A socket file nobody listens on (a listener dropped without removing it).
    let stale = socket("claim-stale");
    let _ = std::fs::remove_file(&stale);
    drop(UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let server = Server::bind(Some(&stale), None, nothing_to_prepare()).unwrap();
    drop(server);
}

/// A client given the wrong path hears what is there: a file or a directory is not a
/// control socket (`InvalidInput`); a socket nobody listens on was left by a daemon
/// that is gone.
#[test]
fn a_client_says_what_is_at_a_path_that_does_not_answer() {
    let file = socket("client-file");
    std::fs::write(&file, "not a socket").unwrap();
    let e = request(&file, &Request::Stats).unwrap_err();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string().contains("is a file, not a control socket"),
        "{e}"
    );

    let dir = std::env::temp_dir();
    let e = request(&dir, &Request::Stats).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string()
            .contains("is a directory, not a control socket"),
        "{e}"
    );

    let stale = socket("client-stale");
    let _ = std::fs::remove_file(&stale);
    drop(UnixListener::bind(&stale).unwrap());
    let e = request(&stale, &Request::Stats).unwrap_err();
    std::fs::remove_file(&stale).unwrap();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    assert!(e.to_string().contains("nothing listens on"), "{e}");

    let none = socket("client-none");
    let _ = std::fs::remove_file(&none);
    let e = request(&none, &Request::Stats).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("is `weft run` running?"), "{e}");
}

/// Only regular files are read, at most the limit: a device, a directory and a FIFO are
/// refused by what they are (without opening the FIFO), and a file whose length says 0
/// (as `/proc`'s do) is cut off after the limit's worth.
#[test]
fn a_policy_file_is_read_only_when_regular_and_within_the_limit() {
    let e = read_policy_file(Path::new("/dev/null"), 1 << 20).unwrap_err();
    assert!(
        e.to_string().contains("/dev/null is a character device"),
        "{e}"
    );
    let dir = std::env::temp_dir();
    let e = read_policy_file(&dir, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("is a directory"), "{e}");
    let status = Path::new("/proc/self/status");
    assert_eq!(std::fs::metadata(status).unwrap().len(), 0);
    let e = read_policy_file(status, 64).unwrap_err();
    assert!(
        matches!(
            e,
            PolicyFileError::TooLarge {
                size: None,
                limit: 64,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .ends_with("is more than the limit of 64 bytes (`weft run --max-policy-bytes`)"),
        "{e}"
    );
    assert!(read_policy_file(status, 1 << 20).unwrap().len() > 64);
    let e = read_policy_file(&socket("absent"), 1 << 20).unwrap_err();
    assert!(e.to_string().starts_with("cannot read "), "{e}");
}

/// The limit counts a policy and its sub-policies together, and the refusal says where
/// the sub-policy is attached.
#[test]
fn sub_policies_count_against_the_limit_and_are_named_where_attached() {
    let dir = socket("subs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let main = dir.join("main.yaml");
    std::fs::write(
        &main,
        "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - {name: t, type: attach, parent: root, policy: part.yaml}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("part.yaml"),
        format!(
            "weft: 1\nnodes:\n  - {{name: x, type: leaf}}\n#{}\n",
            "x".repeat(200)
        ),
    )
    .unwrap();
    let main_len = std::fs::metadata(&main).unwrap().len();
    let part_len = std::fs::metadata(dir.join("part.yaml")).unwrap().len();
    let load = |limit: u64| {
        let files = ReloadReader::new(&Client {
            peer: None,
            max_policy_bytes: limit,
        });
        let o = weft_core::policy::LoadOptions {
            reader: Some(files.reader()),
            ..Default::default()
        };
        weft_core::policy::load(&main, &o).map_err(|e| files.client_error(&e))
    };
    assert!(load(main_len + 300).is_ok());
    let e = load(main_len + 100).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        e.starts_with(&format!(
            "{}:4:51: error[attach]: cannot read sub-policy ",
            main.display()
        )),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            ": it is {part_len} bytes; with the {main_len} bytes read before it, more than the \
             limit of {} bytes for a policy and its sub-policies together (weft run \
             --max-policy-bytes)",
            main_len + 100
        )),
        "{e}"
    );
}

/// What a diagnostic quotes from the file goes; the place, the rule, weft's own words
/// and the message's own text stay; the node and the hint go.
#[test]
fn redacted_errors_keep_the_place_and_the_rule_and_lose_the_files_words() {
    for (given, want) in [
        (
            "p.yaml:1:1: error[unknown-key]: unknown key `root:$6$x` in the policy; help: known keys: weft, name",
            "p.yaml:1:1: error[unknown-key]: unknown key `…` in the policy",
        ),
        (
            "p.yaml:2:3: error[missing-key]: missing `weft: 1` (the policy format version); help: start the file with `weft: 1`",
            "p.yaml:2:3: error[missing-key]: missing `weft: 1` (the policy format version)",
        ),
        (
            "p.yaml:3:9: error[cycle]: parents form a cycle: sec1 → sec2 → sec1 (node `sec1`)",
            "p.yaml:3:9: error[cycle]: parents form a cycle: … → … → …",
        ),
        (
            "p.yaml:4:9: error[bad-value]: node name \"se\\\"cret\" has a space (node `x`)",
            "p.yaml:4:9: error[bad-value]: node name \"…\" has a space",
        ),
        (
            "p.yaml:5:1: error[unreadable-file]: p.yaml is not UTF-8 text: byte 0xE9 here is not valid UTF-8; help: convert",
            "p.yaml:5:1: error[unreadable-file]: p.yaml is not UTF-8 text: a byte here is not valid UTF-8",
        ),
        (
            "p.yaml:6:1: error[yaml-syntax]: not valid YAML: unexpected character: `@' and more secret",
            "p.yaml:6:1: error[yaml-syntax]: not valid YAML: unexpected character: `…",
        ),
        (
            "the new policy has 9 leaves; this dataplane was started for at most 4",
            "the new policy has 9 leaves; this dataplane was started for at most 4",
        ),
    ] {
        assert_eq!(redact(given), want);
    }
    assert_eq!(redact("a `kb`\nb `secret`"), "a `kb`\nb `…`");
    // Numbers of four digits or more, and letters that are no word of weft's, go.
    assert_eq!(
        redact("the key `123456` is given twice"),
        "the key `…` is given twice"
    );
    assert_eq!(
        redact("x: `4b8m` and `10gbit` and `weft: 1` and `rate`"),
        "x: `…` and `10gbit` and `weft: 1` and `rate`"
    );
}

/// `--ctl-group`: a group that does not exist is refused by name (`NotFound`: exit 2);
/// one the process belongs to gets the socket.
#[test]
fn the_control_socket_goes_to_the_group_given() {
    let e = lookup_group("weft-no-such-group-here").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    assert!(
        e.to_string()
            .starts_with("--ctl-group `weft-no-such-group-here`: no such group"),
        "{e}"
    );
    use std::os::unix::fs::MetadataExt;
    // The process's group: that of a file it makes (outside a setgid directory).
    let probe = socket("group-probe");
    std::fs::write(&probe, "").unwrap();
    let gid = std::fs::metadata(&probe).unwrap().gid();
    std::fs::remove_file(&probe).unwrap();
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let Some(name) = groups.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == gid.to_string()).then(|| f[0].to_string())
    }) else {
        eprintln!("skipped the chown: group {gid} is not in /etc/group");
        return;
    };
    let group = lookup_group(&name).unwrap();
    assert_eq!(group.gid, gid);
    let path = socket("group");
    let opts = Options {
        group: Some(group),
        ..Options::default()
    };
    let server = Server::bind_with(Some(&path), None, nothing_to_prepare(), &opts).unwrap();
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!((m.gid(), m.mode() & 0o777), (gid, 0o660));
    drop(server);
}

/// Directories made for the socket go with it; one that was there stays, and so does
/// one that something else has been put in meanwhile.
#[test]
fn the_control_sockets_own_directories_are_removed() {
    let top = socket("dirs");
    let _ = std::fs::remove_dir_all(&top);
    let path = top.join("a/b/weft.sock");
    let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
    assert!(path.exists());
    drop(server);
    assert!(!top.exists(), "{} is left behind", top.display());

    std::fs::create_dir_all(top.join("a")).unwrap();
    let server = Server::bind(Some(&path), None, nothing_to_prepare()).unwrap();
    std::fs::write(top.join("a/b/note"), "mine").unwrap();
    drop(server);
    assert!(top.join("a/b/note").exists() && !path.exists());
    std::fs::remove_dir_all(&top).unwrap();
}
