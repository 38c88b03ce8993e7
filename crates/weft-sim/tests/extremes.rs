//! Parameters at the ends of their ranges: link rates of 1 bit/s and 2^64 − 1 bit/s, runs
//! ending at the last arrival time the scheduling core accepts (2^63 ps), model latencies and
//! costs past the end of the clock, huge DRR quanta and queue counts. Each case once
//! overflowed, truncated, hung or reported nonsense; meaningless values are refused with a
//! message naming the value and the rule. Debug builds check every addition for overflow.

use std::path::Path;

use weft_sim::metrics::{quantile, Hist};
use weft_sim::nic::{NicKind, NicParams};
use weft_sim::scenario::{AppKind, SizeDist};
use weft_sim::{report, Overrides, Scenario};

/// A scenario with `head` (duration, host, window lines) on a policy of one weighted pair of
/// tenants on a link of `link`, with a bulk application, an unlimited UDP application and
/// a request/response application.
fn text(head: &str, link: &str, apps_extra: &str) -> String {
    format!(
        "{head}\npolicy_inline: |\n  weft: 1\n  link: {{rate: {link}}}\n  nodes:\n\
         \x20   - {{name: r, type: wfq}}\n\
         \x20   - {{name: a, type: leaf, parent: r, weight: 3, match: {{tenant: 1}}}}\n\
         \x20   - {{name: b, type: leaf, parent: r, weight: 1, match: {{tenant: 2}}, limit: {{packets: 4}}}}\n\
         tenants:\n\
         \x20 - name: A\n    meta: {{tenant: 1}}\n    apps:\n\
         \x20     - {{name: bulk, kind: bulk, flows: 2, window: 64kb{apps_extra}}}\n\
         \x20     - {{name: kv, kind: request-response, rate: 100000/s, size: 3000b{apps_extra}}}\n\
         \x20 - name: B\n    meta: {{tenant: 2}}\n    apps:\n\
         \x20     - {{name: udp, kind: udp, rate: unlimited, flows: 2{apps_extra}}}\n\
         \x20     - {{name: bulk, kind: bulk, flows: 2{apps_extra}}}\n"
    )
}

/// [`text`] for a slow link (1 bit/s, 1 Mbit/s): its request/response application runs in
/// closed loop, for at 100,000 requests a second it would offer more than twice the link
/// rate, which is refused.
fn slow_link(t: String) -> String {
    t.replace("rate: 100000/s,", "closed_loop: true,")
}

fn load(t: &str, ov: &Overrides) -> Result<Scenario, String> {
    weft_sim::load_str(Path::new("x.yaml"), t, ov).map_err(|e| e.to_string())
}

fn summary(sc: &Scenario, models: &[NicKind]) -> serde_json::Value {
    let runs = weft_sim::run_all(sc, models, &mut |_, _| {});
    report::summary(sc, &report::analyse(sc, &runs))
}

/// The link utilization counts the time frames spend on the wire within the run: a frame
/// that starts near the end of a 1 ms run on a 1 bit/s link (12,000 s on the wire) once
/// counted whole, and the link was "4,160,000 times" busy.
#[test]
fn utilization_counts_only_the_wire_time_within_the_run() {
    for (link, dur) in [("1bit", "1ms"), ("10gbit", "100us"), ("400gbit", "20us")] {
        let t = text(&format!("duration: {dur}\nhost: {{mtu: 9000b}}"), link, "");
        let t = if link == "1bit" { slow_link(t) } else { t };
        let sc = load(&t, &Overrides::default()).unwrap();
        let s = summary(&sc, &NicKind::ALL);
        for m in NicKind::ALL {
            let u = s["nics"][m.name()]["link_utilization"].as_f64().unwrap();
            assert!(u <= 1.0, "{link}, {}: link_utilization {u}", m.name());
            // Every model keeps a saturated link busy (sq is CPU-bound only at high rates).
            if link == "1bit" {
                assert!(u > 0.9, "{link}, {}: link_utilization {u}", m.name());
            }
        }
    }
}

/// A run may end at the last arrival the core accepts (2^63 ps, 106.7 days), not later: the
/// rest of the 64-bit clock is headroom for what is queued then. Near that end every time
/// the simulator and its models compute stays within the clock.
#[test]
fn runs_end_by_the_last_arrival_time() {
    let last = weft_core::sched::LAST_ARRIVAL_PS;
    let e = load(
        &text(&format!("duration: {}ps", last + 1), "10gbit", ""),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(
        e.contains(&format!("{}ps", last + 1)) && e.contains("2^63"),
        "{e}"
    );
    // The same rule for `--duration` (an override), and for the largest time there is.
    let ov = Overrides {
        duration_ps: Some(u64::MAX),
        ..Overrides::default()
    };
    let e = load(&text("duration: 1ms", "10gbit", ""), &ov).unwrap_err();
    assert!(e.contains("--duration") && e.contains("2^63"), "{e}");
    // The last millisecond before the last arrival: all models run there.
    let start = last - 1_000_000_000;
    let head = format!("duration: {last}ps\nwindow: {}ps", 1u64 << 61);
    let sc = load(
        &text(&head, "10gbit", &format!(", start: {start}ps")),
        &Overrides::default(),
    )
    .unwrap();
    let s = summary(&sc, &NicKind::ALL);
    for m in NicKind::ALL {
        let u = s["nics"][m.name()]["link_utilization"].as_f64().unwrap();
        assert!(u > 0.0 && u <= 1.0, "{}: {u}", m.name());
    }
}

/// A window longer than the clock is one window (its default latency window, five
/// windows, overflowed); more windows than the report can hold are refused, where they
/// once made the simulator allocate without end.
#[test]
fn windows_at_the_ends_of_their_range() {
    let sc = load(
        &text(
            &format!("duration: 100us\nwindow: {}ps", u64::MAX),
            "10gbit",
            "",
        ),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(sc.latency_window_ps, u64::MAX);
    let s = summary(&sc, &[NicKind::Loom]);
    assert!(s["nics"]["loom"]["link_utilization"].as_f64().unwrap() > 0.5);
    let e = load(
        &text("duration: 1000s\nwindow: 1us", "10gbit", ""),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("window") && e.contains("1000000000"), "{e}");
    let e = load(
        &text("duration: 1s\nlatency_window: 1ns", "10gbit", ""),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("latency_window"), "{e}");
    // `--duration` is checked against the scenario's windows too.
    let ov = Overrides {
        duration_ps: Some(1_000_000_000_000_000),
        ..Overrides::default()
    };
    let e = load(&text("duration: 1ms\nwindow: 1us", "10gbit", ""), &ov).unwrap_err();
    assert!(e.contains("--duration") && e.contains("window"), "{e}");
}

/// Model latencies and costs as long as the clock: what they delay never happens (as the
/// core says of times past the end of the clock), and the CPU time counted is exact. Each of
/// these once overflowed a `u64` addition.
#[test]
fn model_times_past_the_end_of_the_clock() {
    let max = format!("{}ps", u64::MAX);
    for (model, key) in [
        ("sq", "cpu_per_packet"),
        ("loom", "descriptor_dma"),
        ("loom", "payload_dma"),
        ("loom", "batch_timeout"),
        ("senic", "dma"),
    ] {
        let ov = Overrides {
            nic_params: vec![
                (model.into(), key.into(), max.clone()),
                ("senic".into(), "max_pulls".into(), "64".into()),
            ],
            ..Overrides::default()
        };
        let sc = load(&text("duration: 200us", "10gbit", ""), &ov).unwrap();
        let runs = weft_sim::run_all(
            &sc,
            &[NicKind::Sq, NicKind::Senic, NicKind::Loom],
            &mut |_, _| {},
        );
        let r = runs.iter().find(|r| r.kind.name() == model).unwrap();
        if key == "batch_timeout" {
            // Partial batches wait for ever; full ones (64 KiB of bulk) ring the doorbell.
            assert!(r.packets > 0, "{model}.{key}: {} packets", r.packets);
        } else {
            // Nothing delayed by the whole clock reaches the wire (sq's first packet goes:
            // its cost is paid after it).
            assert!(r.packets <= 1, "{model}.{key}: {} packets", r.packets);
        }
    }
    let sc = load(
        &text(
            &format!("duration: 100us\nhost: {{cpu_per_packet: {max}, cpu_per_doorbell: {max}}}"),
            "10gbit",
            "",
        ),
        &Overrides::default(),
    )
    .unwrap();
    for r in weft_sim::run_all(&sc, &NicKind::ALL, &mut |_, _| {}) {
        let floor = (r.packets as u128 + r.counters.doorbell_writes as u128) * u64::MAX as u128;
        assert!(
            r.counters.cpu_ps >= floor,
            "{:?}: cpu_ps {}",
            r.kind,
            r.counters.cpu_ps
        );
    }
}

/// A bulk flow that lost packets retries after `host.retry`; a retry past the end of the
/// clock never happens (it overflowed).
#[test]
fn retry_past_the_end_of_the_clock() {
    let sc = load(
        &text(
            &format!("duration: 200us\nhost: {{retry: {}ps}}", u64::MAX),
            "10gbit",
            "",
        ),
        &Overrides::default(),
    )
    .unwrap();
    let s = summary(&sc, &[NicKind::Loom]);
    assert!(
        s["nics"]["loom"]["tenants"]["B"]["drops"].as_u64().unwrap() > 0,
        "{s}"
    );
}

/// `mq-fair`'s class DRR with a quantum of 2^63 bytes or more: the class deficit took the
/// quantum as a signed 64-bit number (negative: the arbiter looped for ever; 2^63: overflow).
#[test]
fn huge_quantum() {
    for q in ["8589934592gb", "17179869183gb", "18446744073709551615b"] {
        let ov = Overrides {
            nic_params: vec![("hw".into(), "quantum".into(), q.into())],
            ..Overrides::default()
        };
        let sc = load(&text("duration: 100us", "10gbit", ""), &ov).unwrap();
        for r in weft_sim::run_all(
            &sc,
            &[
                NicKind::Mq,
                NicKind::Qpf,
                NicKind::MqPri,
                NicKind::MqFair,
                NicKind::Tonic,
            ],
            &mut |_, _| {},
        ) {
            assert!(r.packets > 50, "{q}, {:?}: {} packets", r.kind, r.packets);
        }
    }
}

/// A quantum below the smallest frame made the NIC's round robin visit every queue up to
/// 1500 times per frame (`hw.quantum=1b`: a 20 ms run took seconds): refused, with the rule,
/// from `--set` and from the scenario file; 64 B, the smallest frame, runs.
#[test]
fn a_quantum_below_the_smallest_frame_is_refused() {
    let set = |q: &str| Overrides {
        nic_params: vec![("hw".into(), "quantum".into(), q.into())],
        ..Overrides::default()
    };
    let t = text("duration: 100us", "10gbit", "");
    for q in ["1b", "63b"] {
        let e = load(&t, &set(q)).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "--set: `hw.quantum={q}`: `{q}` is less than 64 B, the smallest frame"
            )) && e.ends_with("at least 64b"),
            "{e}"
        );
    }
    let e = load(
        &text("duration: 100us\nnic: {hw: {quantum: 1b}}", "10gbit", ""),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(e.starts_with("x.yaml:2:21: `1b` is less than 64 B"), "{e}");
    let sc = load(&t, &set("64b")).unwrap();
    assert_eq!(sc.nic_params.hw_quantum_bytes, 64);
    let runs = weft_sim::run_all(&sc, &[NicKind::Qpf], &mut |_, _| {});
    assert!(runs[0].packets > 50, "{} packets", runs[0].packets);
}

/// More TONIC queues than the model's 32-bit queue numbers (or any NIC) hold are refused
/// (they truncated to an empty pool, then indexed out of bounds, or allocated without end).
#[test]
fn tonic_queue_count_is_bounded() {
    let mut p = NicParams::default();
    let e = p.set("tonic", "queues", "4294967296").unwrap_err();
    assert!(e.contains("4294967296") && e.contains("65536"), "{e}");
    p.set("tonic", "queues", "65536").unwrap();
    let ov = Overrides {
        nic_params: vec![("tonic".into(), "queues".into(), "65536".into())],
        ..Overrides::default()
    };
    let sc = load(&text("duration: 50us", "10gbit", ""), &ov).unwrap();
    let r = &weft_sim::run_all(&sc, &[NicKind::Tonic], &mut |_, _| {})[0];
    assert!(r.packets > 10);
}

/// "Unlimited" UDP offers twice the link rate; at a link of 2^64 − 1 bit/s that doubled
/// rate overflowed.
#[test]
fn unlimited_udp_on_the_fastest_link() {
    let ov = Overrides {
        link_rate_bps: Some(u64::MAX),
        ..Overrides::default()
    };
    let sc = load(&text("duration: 20ns", "10gbit", ""), &ov).unwrap();
    let s = summary(&sc, &[NicKind::Mq, NicKind::Loom]);
    assert!(s["nics"]["mq"]["packets"].as_u64().unwrap() > 0, "{s}");
}

/// Histogram buckets count past 2^32 samples (a long run of one application at hundreds of
/// millions of packets per second); they were 32-bit.
#[test]
fn histogram_counts_past_u32() {
    let mut h = Hist::default();
    h.record(1_000);
    for _ in 0..33 {
        let c = h.clone();
        h.add(&c);
    }
    assert_eq!(h.count(), 1 << 33);
    let mut one = Hist::default();
    one.record(1_000);
    assert_eq!(quantile(&h, 0.99), quantile(&one, 0.5));
}

/// Meaningless sizes and counts are refused with the value and the rule, where they were
/// clamped silently (an MTU of 1 byte) or exhausted memory (four billion flows).
#[test]
fn meaningless_sizes_and_counts_are_refused() {
    for (mtu, ok) in [
        ("1b", false),
        ("63b", false),
        ("64b", true),
        ("65535b", true),
        ("64kb", false),
    ] {
        let r = load(
            &text(
                &format!("duration: 1ms\nhost: {{mtu: {mtu}}}"),
                "10gbit",
                "",
            ),
            &Overrides::default(),
        );
        match (ok, r) {
            (true, Ok(_)) => {}
            (false, Err(e)) => assert!(e.contains(mtu) && e.contains("64b..=65535b"), "{e}"),
            (_, r) => panic!("mtu {mtu}: {:?}", r.map(|_| ())),
        }
    }
    let e = load(
        &text("duration: 1ms", "10gbit", "")
            .replace("flows: 2, window", "flows: 4294967295, window"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("4294967295") && e.contains("1000000"), "{e}");
}

/// Scaling a schedule past the end of the clock makes its steps never happen; the scaled
/// time was truncated to 64 bits (2^63 ps × 4 became 0: a stop at the start).
#[test]
fn scale_time_past_the_end_of_the_clock() {
    let mut sc = load(
        &text("duration: 1ms", "10gbit", ", stop: 9223372036854775808ps"),
        &Overrides::default(),
    )
    .unwrap();
    sc.scale_time(4, 1);
    assert_eq!(sc.apps[0].schedule, vec![(0, 2), (u64::MAX, 0)]);
    assert_eq!(sc.duration_ps, 4_000_000_000);
}

/// A response completes when its last bit leaves; one that would complete after the run
/// ends is not a completed request (at 1 bit/s, a 3000 B response takes 24,000 s: it was
/// counted, with that latency, in a 1 ms run), but an unfinished one: its latency is at
/// least its age at the end, 1 ms. Closed loop: the first request comes at once
/// (open-loop requests are limited to twice what the link carries, here one in 3.4 hours).
#[test]
fn responses_completing_after_the_run_are_unfinished() {
    let t =
        "duration: 1ms\nhost: {mtu: 9000b}\npolicy_inline: |\n  weft: 1\n  link: {rate: 1bit}\n  \
             nodes:\n    - {name: l, type: leaf}\ntenants:\n  - name: A\n    apps:\n      \
             - {name: kv, kind: request-response, closed_loop: true, size: 3000b}\n";
    let sc = load(t, &Overrides::default()).unwrap();
    let s = summary(&sc, &NicKind::ALL);
    for m in NicKind::ALL {
        let kv = &s["nics"][m.name()]["tenants"]["A"]["apps"]["kv"];
        assert_eq!(s["nics"][m.name()]["packets"], 1, "{}: {s}", m.name());
        assert_eq!(
            kv["requests"],
            serde_json::json!({"issued": 1, "completed": 0, "unfinished": 1}),
            "{}: {kv}",
            m.name()
        );
        let lat = &kv["latency_us"];
        assert_eq!(
            (&lat["samples"], &lat["unfinished"]),
            (&1.into(), &1.into()),
            "{lat}"
        );
        // 1 ms, within the histogram's 3.2 %.
        let p90 = lat["p90"].as_f64().unwrap();
        assert!((p90 / 1000.0 - 1.0).abs() < 0.035, "{}: {lat}", m.name());
        assert_eq!(lat["p90_at_least"], true, "{}: {lat}", m.name());
    }
}

/// Throughput counts the bytes whose wire time falls within each window and within the run:
/// a frame is spread over the windows it spans. Counted whole at its start, a 9000 B frame
/// on a 1 bit/s link read 72 kbit/s in its window and 72 Mbit/s for a 1 ms run; on 1 Mbit/s
/// a window of 100 µs held the whole 72 ms frame.
#[test]
fn throughput_counts_only_the_bytes_on_the_wire_within_each_window() {
    for (link, rate_bps, dur) in [
        ("1bit", 1.0, "1ms"),
        ("1mbit", 1e6, "30ms"),
        ("10gbit", 1e10, "200us"),
    ] {
        let t = text(
            &format!("duration: {dur}\nwindow: 100us\nhost: {{mtu: 9000b}}"),
            link,
            "",
        );
        let t = if link == "10gbit" { t } else { slow_link(t) };
        let sc = load(&t, &Overrides::default()).unwrap();
        let runs = weft_sim::run_all(&sc, &NicKind::ALL, &mut |_, _| {});
        let an = report::analyse(&sc, &runs);
        let s = report::summary(&sc, &an);
        let window_s = sc.window_ps as f64 / 1e12;
        for r in &runs {
            let name = r.kind.name();
            let bps = s["nics"][name]["throughput_bps"].as_f64().unwrap();
            assert!(bps <= rate_bps, "{link}, {name}: throughput {bps} bit/s");
            for (w, row) in r.window_bytes.iter().enumerate() {
                let bits = row.iter().sum::<u64>() as f64 * 8.0;
                // Each window's share of a frame is rounded down, its running floor at most
                // one byte above the exact share.
                assert!(
                    bits <= rate_bps * window_s + 8.0,
                    "{link}, {name}, window {w}: {bits} bits in {window_s} s"
                );
            }
            // What the windows hold is what the summary counts.
            let total: u64 = r.window_bytes.iter().flatten().sum();
            assert_eq!(total, r.app_bytes.iter().sum::<u64>(), "{link}, {name}");
            if link == "10gbit" {
                // A saturated link: the data rate is its rate less the frame overhead.
                assert!(
                    bps > 0.9 * rate_bps,
                    "{link}, {name}: throughput {bps} bit/s"
                );
            }
        }
    }
}

/// A bulk flow that lost packets writes nothing until `host.retry` has passed: it once
/// refilled its window at its next departure, rewriting the lost bytes at once, so a
/// retry of 10 ms changed nothing in a 1 ms run.
#[test]
fn a_bulk_flow_that_lost_packets_waits_for_its_retry() {
    let t = |retry: &str| {
        format!(
            "duration: 1ms\nhost: {{retry: {retry}, segment: 64kb}}\npolicy_inline: |\n  weft: 1\n  \
             link: {{rate: 10gbit}}\n  nodes:\n    - {{name: l, type: leaf, limit: {{packets: 4}}}}\n\
             tenants:\n  - name: A\n    apps:\n      - {{name: bulk, kind: bulk, flows: 1, window: 64kb}}\n"
        )
    };
    // One window of 64 kB is 44 MTU packets (43 of 1500 B and one of 1036 B).
    for m in [NicKind::Loom, NicKind::Sq] {
        let waits = load(&t("10ms"), &Overrides::default()).unwrap();
        let s = summary(&waits, &[m]);
        let a = &s["nics"][m.name()]["tenants"]["A"];
        let (sent, drops) = (
            s["nics"][m.name()]["packets"].as_u64().unwrap(),
            a["drops"].as_u64().unwrap(),
        );
        assert!(drops > 0, "{}: {s}", m.name());
        assert!(
            sent + drops <= 44,
            "{}: {sent} sent, {drops} dropped",
            m.name()
        );
        // With a short retry the flow writes again within the run, and loses again.
        let soon = load(&t("20us"), &Overrides::default()).unwrap();
        let s2 = summary(&soon, &[m]);
        let sent2 = s2["nics"][m.name()]["packets"].as_u64().unwrap();
        assert!(
            sent2 > 2 * sent,
            "{}: {sent2} sent with a 20 µs retry, {sent} with 10 ms",
            m.name()
        );
    }
}

/// Sizes past 1 GiB (a segment, a bulk window, a response, a UDP socket limit) are refused
/// with the bound: 1 TiB ones were accepted, and the simulator wrote them as hundreds of
/// millions of packets at once until memory ran out (a 4 GiB response took 450 MB in a 5 ms
/// run). So are windows and closed-loop responses that together hold more packets at once
/// than memory does, and exponential sizes whose largest draw is past the bound.
#[test]
fn huge_sizes_are_refused_with_the_bound() {
    let base = text("duration: 1ms", "10gbit", "");
    let tib = "1099511627776b";
    for (what, from, to, line) in [
        (
            "segment",
            "duration: 1ms",
            format!("duration: 1ms\nhost: {{segment: {tib}}}"),
            2,
        ),
        ("window", "window: 64kb", format!("window: {tib}"), 13),
        ("size", "size: 3000b", format!("size: {tib}"), 14),
        (
            "socket_limit",
            "rate: unlimited,",
            format!("rate: unlimited, socket_limit: {tib},"),
            18,
        ),
    ] {
        let e = load(&base.replace(from, &to), &Overrides::default()).unwrap_err();
        assert!(
            e.starts_with(&format!("x.yaml:{line}:"))
                && e.contains(&format!("{what} `{tib}`"))
                && e.contains("at most 1gb (1073741824 B"),
            "{e}"
        );
    }
    // 1 GiB is allowed, and runs: 716,000 packets of a response at once.
    let sc = load(
        &base.replace("rate: 100000/s, size: 3000b", "rate: 1/s, size: 1gb"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(
        sc.apps[1].kind,
        AppKind::RequestResponse {
            rate_per_s: 1.0,
            size: SizeDist::Fixed(1 << 30),
            closed_loop: false,
            tcp: false
        }
    );
    let t = base
        .replace(
            "rate: 100000/s, size: 3000b",
            "closed_loop: true, size: 1gb",
        )
        .replace("duration: 1ms", "duration: 10us");
    let sc = load(&t, &Overrides::default()).unwrap();
    let r = &weft_sim::run_all(&sc, &[NicKind::Loom], &mut |_, _| {})[0];
    assert!(r.packets > 0);
    load(
        &base.replace("window: 64kb", "window: 1gb"),
        &Overrides::default(),
    )
    .unwrap();
    // An exponential size is drawn up to 36.7 times its mean: the mean is bounded so that
    // the largest draw is at most 1 GiB.
    let exp = |size: &str| {
        base.replace(
            "rate: 100000/s, size: 3000b",
            &format!("rate: 1/s, size: {size}, size_dist: exponential"),
        )
    };
    let e = load(&exp("1gb"), &Overrides::default()).unwrap_err();
    assert!(
        e.starts_with("x.yaml:14:") && e.contains("36.7 times") && e.contains("29227"),
        "{e}"
    );
    let sc = load(&exp("29227000b"), &Overrides::default()).unwrap();
    let AppKind::RequestResponse { size, .. } = &sc.apps[1].kind else {
        panic!("kv");
    };
    assert!(size.max_bytes() <= weft_sim::scenario::MAX_SIZE_BYTES);
    // A thousand bulk flows of 1 GiB windows are 720 million packets at once.
    let e = load(
        &base.replace("flows: 2, window: 64kb", "flows: 1000, window: 1gb"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(
        e.starts_with("x.yaml:13:") && e.contains("A/bulk") && e.contains("at most 67108864"),
        "{e}"
    );
}

/// An explicit rate is at most twice the link rate, what `unlimited` offers: a UDP flow's
/// bit rate, and a request/response application's requests times their responses' bytes
/// on the wire. `18446744073709551615bit` or `1000000000000/s` were accepted, and a 5 ms
/// run took minutes (the work grows with the rate).
#[test]
fn explicit_rates_are_at_most_twice_the_link_rate() {
    let base = text("duration: 1ms", "10gbit", "");
    let udp = |rate: &str| base.replace("rate: unlimited,", &format!("rate: {rate},"));
    for (rate, ok) in [
        ("20gbit", true),
        ("20000000001bit", false),
        ("18446744073709551615bit", false),
    ] {
        match load(&udp(rate), &Overrides::default()) {
            Ok(_) if ok => {}
            Err(e) if !ok => assert!(
                e.starts_with("x.yaml:18:")
                    && e.contains(&format!("rate `{rate}`"))
                    && e.contains("2 times the link rate, 10gbit (the policy's link)")
                    && e.contains("`unlimited`"),
                "{e}"
            ),
            r => panic!("udp rate {rate}: {:?}", r.map(|_| ())),
        }
    }
    // The link of `--link` counts.
    let ov = Overrides {
        link_rate_bps: Some(1_000_000_000),
        ..Overrides::default()
    };
    let e = load(&udp("20gbit"), &ov).unwrap_err();
    assert!(e.contains("1gbit (--link)"), "{e}");
    // 3000 B responses in two 1500 B frames of 20 B overhead: 3040 B on the wire, so at
    // most 2 × 10 Gbit/s / (3040 × 8 bit) = 822,368.4 requests a second.
    let rr = |rate: &str| base.replace("rate: 100000/s", &format!("rate: {rate}"));
    for (rate, ok) in [
        ("822368/s", true),
        ("822369/s", false),
        ("1000000000000/s", false),
    ] {
        match load(&rr(rate), &Overrides::default()) {
            Ok(_) if ok => {}
            Err(e) if !ok => assert!(
                e.starts_with("x.yaml:14:")
                    && e.contains(&format!("rate `{rate}`"))
                    && e.contains("at most 822368.421/s"),
                "{e}"
            ),
            r => panic!("request rate {rate}: {:?}", r.map(|_| ())),
        }
    }
    // A closed loop's rate is unused.
    load(
        &base.replace("rate: 100000/s", "rate: 1000000000000/s, closed_loop: true"),
        &Overrides::default(),
    )
    .unwrap();
}
