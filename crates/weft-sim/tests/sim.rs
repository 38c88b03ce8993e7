//! Simulator tests: determinism, every example scenario runs, TONIC's dequeue sequences
//! (TONIC Fig. 6–8) exactly, and the papers' qualitative claims on short (time-scaled)
//! versions of the experiments. No timing assertions.

use std::path::{Path, PathBuf};

use weft_core::classifier::PacketMeta;
use weft_sim::nic::hwq::HwqNic;
use weft_sim::nic::{AppInfo, Nic, NicKind, NicParams, Pkt};
use weft_sim::report;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios")
}

fn load(name: &str) -> weft_sim::Scenario {
    weft_sim::load(&scenarios_dir().join(name), &Default::default()).expect("scenario loads")
}

fn summary(sc: &weft_sim::Scenario, models: &[NicKind]) -> serde_json::Value {
    let runs = weft_sim::run_all(sc, models, &mut |_, _| {});
    let an = report::analyse(sc, &runs);
    report::summary(sc, &an)
}

#[test]
fn same_seed_same_summary_other_seed_differs() {
    let mut sc = load("hierarchy.yaml");
    sc.duration_ps = 8_000_000_000; // 8 ms
    let models = [NicKind::Mq, NicKind::Loom];
    let a = serde_json::to_string(&summary(&sc, &models)).unwrap();
    let b = serde_json::to_string(&summary(&sc, &models)).unwrap();
    assert_eq!(a, b, "same seed, same summary.json");
    sc.seed = 99;
    let c = serde_json::to_string(&summary(&sc, &models)).unwrap();
    assert_ne!(a, c, "the seed matters (flow placement, request arrivals)");
}

#[test]
fn every_example_scenario_runs_every_model_briefly() {
    let mut n = 0;
    for e in std::fs::read_dir(scenarios_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("yaml") {
            continue;
        }
        let mut sc = weft_sim::load(&p, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
        // Half a millisecond of each model, scaled so that schedules still happen.
        let d = sc.duration_ps;
        sc.scale_time(500_000_000, d.max(1));
        let runs = weft_sim::run_all(&sc, &[], &mut |_, _| {});
        for r in &runs {
            let sent: u64 = r.app_packets.iter().sum();
            assert_eq!(sent, r.packets, "{}: {:?}", p.display(), r.kind);
            // Over every sending host's link.
            let util = r.wire_bytes as f64 * 8.0
                / (sc.program.link.rate_bps as f64 * sc.duration_ps as f64 / 1e12)
                / r.links as f64;
            // The last frame may end after the run does.
            let frame_s = (sc.host.mtu_bytes as f64 + 20.0) * 8.0 / sc.program.link.rate_bps as f64;
            let slack = frame_s / (sc.duration_ps as f64 / 1e12);
            assert!(
                util <= 1.0 + slack + 1e-9,
                "{}: {:?} utilization {util}",
                p.display(),
                r.kind
            );
        }
        n += 1;
    }
    assert!(n >= 2, "found {n} scenarios");
}

#[test]
fn bad_scenarios_name_file_and_line() {
    let policy = "policy_inline: |\n  weft: 1\n  nodes:\n    - {name: r, type: wfq}\n    - {name: l, type: leaf, parent: r}\n";
    let bad = format!("duration: 10ms\n{policy}tenants:\n  - name: T\n    apps:\n      - {{name: a, kind: bulky}}\n");
    let e = weft_sim::load_str(Path::new("bad.yaml"), &bad, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("bad.yaml:10:"), "{e}");
    assert!(e.contains("bulky"), "{e}");
    let bad = "duration: 10 parsecs\npolicy_inline: 'x'\ntenants: []\n";
    let e = weft_sim::load_str(Path::new("b.yaml"), bad, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("b.yaml:"), "{e}");
    let bad =
        format!("duration: 10ms\nnics: [sq, warp]\n{policy}tenants:\n  - {{name: T, apps: []}}\n");
    let e = weft_sim::load_str(Path::new("c.yaml"), &bad, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("c.yaml:2:") && e.contains("warp"), "{e}");
    let bad = "duration: 10ms\nunknown_key: 1\n";
    let e = weft_sim::load_str(Path::new("d.yaml"), bad, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("d.yaml:2:"), "{e}");
    // The location is said once, not repeated from the YAML library's own message.
    assert!(!e.contains("error:") && !e.contains(" column "), "{e}");
}

/// A TONIC NIC with rings of one descriptor and pure round robin (quantum = packet size).
fn tonic(apps: Vec<AppInfo>, queues: usize) -> HwqNic {
    let p = NicParams {
        tonic_queues: queues,
        hw_ring_packets: 1,
        hw_quantum_bytes: 1500,
        ..NicParams::default()
    };
    HwqNic::new(NicKind::Tonic, &p, 1, 64, apps, 0, 0)
}

fn info(tenant: u16, weight: u64, prioritized: bool) -> AppInfo {
    AppInfo {
        tenant,
        prioritized,
        dcb_class: 0,
        tenant_weight: weight,
    }
}

/// Submits `(app, label)` packets at time 0, then dequeues everything; returns labels.
fn sequence(nic: &mut HwqNic, pkts: &[(u16, u32)]) -> Vec<u32> {
    let meta = PacketMeta::default();
    for &(app, label) in pkts {
        let p = Pkt {
            flow: app as u32,
            app,
            core: 0,
            bytes: 1500,
            submit_ps: 0,
            req: label,
            seq: 0,
            tso_bytes: 1500,
            tso_frames: 1,
            tso_more: 0,
        };
        nic.submit(0, p, &meta);
    }
    nic.flush(0, 0);
    let mut out = Vec::new();
    while let Some(p) = nic.poll(0) {
        out.push(p.req);
    }
    out
}

/// TONIC Fig. 6: tenant 1 (weight 1) and tenant 2 (weight 2) with equal-BpR queues give the
/// dequeue sequence of WRR 1:2.
#[test]
fn tonic_fig6_weights_as_queue_counts_equal_wrr() {
    let mut nic = tonic(vec![info(0, 1, false), info(1, 2, false)], 3);
    // a1..a3 = 11..13 (tenant 1), b1..b6 = 21..26 (tenant 2).
    let pkts: Vec<(u16, u32)> = (11..=13)
        .map(|l| (0, l))
        .chain((21..=26).map(|l| (1, l)))
        .collect();
    let got = sequence(&mut nic, &pkts);
    // WRR 1:2, one MTU per weight per round.
    let (mut a, mut b) = (
        (11..=13).collect::<Vec<u32>>(),
        (21..=26).collect::<Vec<u32>>(),
    );
    let mut wrr = Vec::new();
    while !a.is_empty() || !b.is_empty() {
        if !a.is_empty() {
            wrr.push(a.remove(0));
        }
        for _ in 0..2 {
            if !b.is_empty() {
                wrr.push(b.remove(0));
            }
        }
    }
    assert_eq!(got, wrr);
    assert_eq!(got, vec![11, 21, 22, 12, 23, 24, 13, 25, 26]);
}

/// TONIC Fig. 7: one tenant, three queues; the NIC is busy (a descriptor in every ring), low
/// priority L1..L6 then high priority H1..H3 are written: head insertion gives the SPQ
/// sequence H1 H2 H3 L1 .. L6 out of plain round robin.
#[test]
fn tonic_fig7_head_insertion_equals_spq() {
    let mut nic = tonic(vec![info(0, 1, false), info(0, 1, true)], 3);
    let mut pkts = vec![(0u16, 1u32), (0, 2), (0, 3)]; // fillers in the three rings
    pkts.extend((11..=16).map(|l| (0u16, l))); // L1..L6
    pkts.extend((21..=23).map(|l| (1u16, l))); // H1..H3
    let got = sequence(&mut nic, &pkts);
    assert_eq!(got, vec![1, 2, 3, 21, 22, 23, 11, 12, 13, 14, 15, 16]);
}

/// TONIC Fig. 8: tenants 3:2, tenant 2's high-priority application first: the sequence of
/// hierarchical WRR(3:2) over SPQ, from round robin alone.
#[test]
fn tonic_fig8_hierarchy_preserved() {
    let mut nic = tonic(
        vec![info(0, 3, false), info(1, 2, false), info(1, 2, true)],
        5,
    );
    let mut pkts = vec![(0u16, 1u32), (0, 2), (0, 3), (1, 4), (1, 5)]; // fillers
    pkts.extend((11..=16).map(|l| (0u16, l))); // tenant 1: a1..a6
    pkts.extend((21..=24).map(|l| (1u16, l))); // tenant 2 low: l1..l4
    pkts.extend((31..=32).map(|l| (2u16, l))); // tenant 2 high: h1, h2
    let got = sequence(&mut nic, &pkts);
    assert_eq!(
        got,
        vec![1, 2, 3, 4, 5, 11, 12, 13, 31, 32, 14, 15, 16, 21, 22, 23, 24]
    );
}

/// Loom Fig. 9 (time-scaled by 1/40 more: 5 ms phases, 125 µs windows): in the 1:64 phase (all four bulk tenants backlogged)
/// Loom keeps Jain's index ≥ 0.99 while MQ and QPF fall below 0.8; SQ is fair but cannot
/// reach line rate; Loom keeps T0's p90 latency below MQ's and QPF's.
#[test]
fn loom_fig9_claims() {
    let mut sc = load("loom-fig9.yaml");
    sc.scale_time(1, 40);
    let models = [NicKind::Sq, NicKind::Mq, NicKind::Qpf, NicKind::Loom];
    let runs = weft_sim::run_all(&sc, &models, &mut |_, _| {});
    let an = report::analyse(&sc, &runs);
    let sum = report::summary(&sc, &an);
    let phase_jain = |k: usize| -> (f64, f64) {
        let a = &an[k];
        let mut lo: f64 = 1.0;
        let mut hi: f64 = 0.0;
        for (w, j) in a.windows.jain.iter().enumerate() {
            if a.windows.backlogged[w].len() == 4 {
                let j = j.expect("four backlogged tenants");
                lo = lo.min(j);
                hi = hi.max(j);
            }
        }
        (lo, hi)
    };
    let (sq_lo, _) = phase_jain(0);
    let (mq_lo, mq_hi) = phase_jain(1);
    let (qpf_lo, qpf_hi) = phase_jain(2);
    let (loom_lo, _) = phase_jain(3);
    assert!(loom_lo >= 0.99, "loom {loom_lo}");
    assert!(sq_lo >= 0.95, "sq {sq_lo}");
    assert!(
        mq_hi < 0.8 && qpf_hi < 0.8,
        "mq {mq_lo}..{mq_hi} qpf {qpf_lo}..{qpf_hi}"
    );
    let util = |m: &str| sum["nics"][m]["link_utilization"].as_f64().unwrap();
    assert!(
        util("sq") < 0.97 * util("loom"),
        "sq {} loom {}",
        util("sq"),
        util("loom")
    );
    let p90 = |m: &str| {
        sum["nics"][m]["tenants"]["T0"]["latency_us"]["p90"]
            .as_f64()
            .unwrap()
    };
    assert!(
        p90("loom") * 5.0 < p90("mq"),
        "{} {}",
        p90("loom"),
        p90("mq")
    );
    assert!(
        p90("loom") * 5.0 < p90("qpf"),
        "{} {}",
        p90("loom"),
        p90("qpf")
    );
}

/// The 3:2:1 hierarchy: TONIC and Loom give each tenant its weight (relative error below
/// 5 %), QPF shares by flows (tenant A, weight 3 and the fewest flows, far below its share),
/// and Loom serves the prioritized request/response applications faster than MQ.
#[test]
fn hierarchy_claims() {
    let mut sc = load("hierarchy.yaml");
    sc.scale_time(1, 5);
    let models = [NicKind::Mq, NicKind::Qpf, NicKind::Tonic, NicKind::Loom];
    let sum = summary(&sc, &models);
    for m in ["tonic", "loom"] {
        for t in ["A", "B", "C"] {
            let e = sum["nics"][m]["tenants"][t]["rel_error"].as_f64().unwrap();
            assert!(e < 0.05, "{m} {t} rel_error {e}");
        }
    }
    let a = &sum["nics"]["qpf"]["tenants"]["A"];
    assert!(a["rel_error"].as_f64().unwrap() > 0.5, "qpf A {a}");
    let p90 = |m: &str, t: &str| {
        sum["nics"][m]["tenants"][t]["apps"]["kv"]["latency_us"]["p90"]
            .as_f64()
            .unwrap()
    };
    for t in ["A", "B", "C"] {
        assert!(
            p90("loom", t) < p90("mq", t),
            "{t}: loom {} mq {}",
            p90("loom", t),
            p90("mq", t)
        );
    }
}

/// The engine-based models give the same results with weft-core's reference engine as with
/// the fast one (the engines promise the same departures).
#[test]
fn fast_and_reference_engines_agree() {
    let mut sc = load("hierarchy.yaml");
    sc.duration_ps = 4_000_000_000;
    let models = [NicKind::Sq, NicKind::Loom];
    let fast = serde_json::to_string(&summary(&sc, &models)).unwrap();
    sc.nic_params.reference_engine = true;
    let reference = serde_json::to_string(&summary(&sc, &models)).unwrap();
    assert_eq!(fast, reference);
}

/// A scenario of one policy (leaves for tenants 1 and 2) with `head` before it and
/// `tenants` after `tenants:`, loaded as `v.yaml`.
fn load_valid(head: &str, tenants: &str) -> Result<weft_sim::Scenario, String> {
    let t = format!(
        "duration: 1ms\n{head}policy_inline: |\n  weft: 1\n  nodes:\n    - {{name: r, type: wfq}}\n\
         \x20   - {{name: a, type: leaf, parent: r, match: {{tenant: 1}}}}\n\
         \x20   - {{name: b, type: leaf, parent: r, match: {{tenant: 2}}}}\ntenants:\n{tenants}"
    );
    weft_sim::load_str(Path::new("v.yaml"), &t, &Default::default()).map_err(|e| e.to_string())
}

/// Tenant names key summary.json and the CSV files, and application names within their
/// tenant: two tenants `A` or two applications `udp` of one tenant were accepted, and one's
/// results disappeared from the report. Refused, naming both places.
#[test]
fn duplicate_names_are_refused_naming_both_places() {
    let e = load_valid(
        "",
        "  - name: A\n    meta: {tenant: 1}\n    apps: [{name: bulk, kind: bulk}]\n\
         \x20 - name: A\n    meta: {tenant: 2}\n    apps: [{name: udp, kind: udp, rate: 1gbit}]\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("v.yaml:12:11:")
            && e.contains("tenant `A` is named twice (first at v.yaml:9:11)"),
        "{e}"
    );
    let e = load_valid(
        "",
        "  - name: B\n    meta: {tenant: 2}\n    apps:\n\
         \x20     - {name: udp, kind: udp, rate: 1gbit}\n\
         \x20     - {name: bulk, kind: bulk}\n\
         \x20     - {name: udp, kind: request-response, rate: 1000/s}\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("v.yaml:14:16:")
            && e.contains("application `udp` of tenant `B` is named twice (first at v.yaml:12:16)"),
        "{e}"
    );
    // The same application name in two tenants is two keys.
    let sc = load_valid(
        "",
        "  - {name: A, meta: {tenant: 1}, apps: [{name: bulk, kind: bulk}]}\n\
         \x20 - {name: B, meta: {tenant: 2}, apps: [{name: bulk, kind: bulk}]}\n",
    )
    .unwrap();
    let s = summary(&sc, &[NicKind::Mq]);
    for t in ["A", "B"] {
        assert!(
            s["nics"]["mq"]["tenants"][t]["apps"]["bulk"].is_object(),
            "{s}"
        );
    }
}

/// Tenant and application names are CSV columns (written unquoted) and terminal table
/// cells: a tenant `a,b` split timeseries.csv's rows, a newline or a quote broke them, an
/// empty name left a blank cell, an escape sequence reached the terminal, and a tenant `a/b`
/// made `a/b/app` (summary.json's `headline_app`), which the table split at the wrong `/`.
/// Refused where written, with the rule and the name quoted; names with `<` or `&` are
/// fine (index.html escapes them).
#[test]
fn names_that_break_the_csv_files_or_the_terminal_are_refused() {
    let rule = "must be non-empty, without spaces, commas, double quotes, control or invisible \
                formatting characters";
    for (written, shown) in [
        (r#""a,b""#, r#""a,b""#),
        (r#""a\u200bb""#, r#""a\u{200b}b""#),
        (r#""a\nb""#, r#""a\nb""#),
        (r#""a\"b""#, r#""a\"b""#),
        (r#""""#, r#""""#),
        (r#""a b""#, r#""a b""#),
        (r#""\e[31mRED\e[0m""#, r#""\u{1b}[31mRED\u{1b}[0m""#),
    ] {
        let e = load_valid(
            "",
            &format!("  - name: {written}\n    meta: {{tenant: 1}}\n    apps: [{{name: bulk, kind: bulk}}]\n"),
        )
        .unwrap_err();
        assert!(
            e.starts_with("v.yaml:9:11:") && e.contains(&format!("tenant name {shown} {rule}")),
            "{written}: {e}"
        );
        assert!(!e.contains('\u{1b}'), "{e}");
        let e = load_valid(
            "",
            &format!("  - name: T\n    meta: {{tenant: 1}}\n    apps: [{{name: {written}, kind: bulk}}]\n"),
        )
        .unwrap_err();
        assert!(
            e.starts_with("v.yaml:11:19:")
                && e.contains(&format!("application name {shown} {rule}")),
            "{written}: {e}"
        );
    }
    let e = load_valid(
        "",
        "  - name: a/b\n    meta: {tenant: 1}\n    apps: [{name: bulk, kind: bulk}]\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("v.yaml:9:11:") && e.contains(r#"tenant name "a/b" must not contain `/`"#),
        "{e}"
    );
    let sc = load_valid(
        "",
        "  - name: <T>&x\n    meta: {tenant: 1}\n    apps: [{name: a/b<c>, kind: bulk}]\n",
    )
    .unwrap();
    assert_eq!(
        (sc.tenants[0].name.as_str(), sc.apps[0].name.as_str()),
        ("<T>&x", "a/b<c>")
    );
}

/// A scratch directory for a report, empty.
fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// index.html wrote tenant names into its Shares table as they were: a tenant `<T>&x` was
/// markup. Every name is escaped, in the tables and the charts.
#[test]
fn report_escapes_names_in_html_and_svg() {
    let mut sc = load_valid(
        "",
        "  - name: <b>T&1\n    meta: {tenant: 1}\n    apps: [{name: a<p>, kind: bulk}]\n\
         \x20 - name: U\n    meta: {tenant: 2}\n    apps: [{name: kv, kind: request-response, rate: 1000/s}]\n",
    )
    .unwrap();
    sc.nics = vec![NicKind::Loom];
    let runs = weft_sim::run_all(&sc, &sc.nics, &mut |_, _| {});
    let dir = out_dir("escape");
    report::write(&dir, &sc, &runs).unwrap();
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.contains("<td>&lt;b&gt;T&amp;1</td>"), "{html}");
    let svg = std::fs::read_to_string(dir.join("throughput-loom.svg")).unwrap();
    assert!(svg.contains(">&lt;b&gt;T&amp;1</text>"), "{svg}");
    for (f, text) in [("index.html", html), ("throughput-loom.svg", svg)] {
        assert!(!text.contains("<b>") && !text.contains("&1"), "{f}: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// With no request/response application latency.svg was an empty chart whose x axis read
/// 0, 0.00000000000025, ... 0.000000000001 (and latency.csv only a header); jain.svg the
/// same when no window had two backlogged tenants. Such a chart says there is no data and
/// why, over the run's time; a chart with data keeps its lines and scales.
#[test]
fn charts_without_data_say_why() {
    let one_bulk = "  - {name: A, meta: {tenant: 1}, apps: [{name: bulk, kind: bulk}]}\n";
    let mut sc = load_valid("nics: [loom]\n", one_bulk).unwrap();
    let runs = weft_sim::run_all(&sc, &sc.nics, &mut |_, _| {});
    let dir = out_dir("nodata");
    report::write(&dir, &sc, &runs).unwrap();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let lat = read("latency.svg");
    assert!(
        lat.contains("No data: this scenario has no request/response")
            && lat.contains("The tables' p90 is A/bulk's packet delay"),
        "{lat}"
    );
    let jain = read("jain.svg");
    assert!(
        jain.contains("No data: no window has two or more tenants"),
        "{jain}"
    );
    // The x axis is the run's: 0 to 1 ms.
    for svg in [&lat, &jain] {
        assert!(
            svg.contains(">0.00025</text>") && svg.contains(">0.001</text>"),
            "{svg}"
        );
        assert!(!svg.contains("0.0000000000"), "{svg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Two backlogged tenants and a request/response application: lines, no note.
    let two = "  - {name: A, meta: {tenant: 1}, apps: [{name: bulk, kind: bulk}]}\n\
         \x20 - {name: B, meta: {tenant: 2}, apps: [{name: bulk, kind: bulk}, \
         {name: kv, kind: request-response, rate: 100000/s}]}\n";
    sc = load_valid("nics: [loom]\n", two).unwrap();
    let runs = weft_sim::run_all(&sc, &sc.nics, &mut |_, _| {});
    report::write(&dir, &sc, &runs).unwrap();
    for f in ["latency.svg", "jain.svg"] {
        let svg = read(f);
        assert!(
            !svg.contains("No data") && svg.contains(r#"<path d="M"#),
            "{f}: {svg}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    // One window: every point at its middle, a dot (a line of one point has no length),
    // and the x axis the run's, not 0 to 10^-12 s.
    sc = load_valid("nics: [loom]\nwindow: 1ms\n", two).unwrap();
    let runs = weft_sim::run_all(&sc, &sc.nics, &mut |_, _| {});
    report::write(&dir, &sc, &runs).unwrap();
    for f in ["latency.svg", "jain.svg", "throughput-loom.svg"] {
        let svg = read(f);
        assert!(
            !svg.contains("No data")
                && svg.contains(r#"<path d="M235.0,"#)
                && svg.contains(r#"<circle cx="235.0""#)
                && svg.contains(">0.001</text>")
                && !svg.contains("0.0000000000"),
            "{f}: {svg}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The SENIC Table 3 scenarios offer every class 1.5 times its limit (constant-rate UDP),
/// so that the limiter, not the sender, sets the gaps: the generator computed the offered
/// rate in whole Mbit/s, and N = 1000 (1 Mbit/s classes) offered 1 Mbit/s, the limit.
#[test]
fn senic_table3_offers_every_class_more_than_its_limit() {
    for n in [1, 10, 100, 1000] {
        let sc = load(&format!("senic-table3-n{n}.yaml"));
        assert_eq!(sc.apps.len(), n);
        for a in &sc.apps {
            let weft_core::policy::Classification::Leaf { node, .. } = sc.program.classify(&a.meta)
            else {
                panic!("n{n}: {} unclassified", a.name)
            };
            let limit = sc.program.node(node).edge.rate_bps;
            let weft_sim::scenario::AppKind::Udp {
                rate_bps: Some(offered),
                ..
            } = a.kind
            else {
                panic!("n{n}: {:?}", a.kind)
            };
            assert_eq!(
                (offered, limit),
                (limit * 3 / 2, 1_000_000_000 / n as u64),
                "n{n}: {}",
                sc.tenants[a.tenant].name
            );
        }
    }
}

/// Times that may be zero (`start`, `stop`, schedule steps, CPU costs) said "`-1ms` must
/// be greater than zero" of a negative value; they say it must not be negative.
#[test]
fn negative_times_are_refused_as_negative() {
    let app = |start: &str| {
        format!("  - {{name: A, meta: {{tenant: 1}}, apps: [{{name: b, kind: bulk, start: {start}}}]}}\n")
    };
    let e = load_valid("", &app("-1ms")).unwrap_err();
    assert!(
        e.starts_with("v.yaml:9:")
            && e.contains("`-1ms` must not be negative")
            && !e.contains("greater than zero"),
        "{e}"
    );
    assert_eq!(
        load_valid("", &app("0ms")).unwrap().apps[0].schedule[0].0,
        0
    );
}

/// A host of no cores was silently given one (`cores: [0]` then accepted); `nics: []` ran
/// nothing and wrote an empty report; a model listed twice was run twice, one run's results
/// overwriting the other's. Refused.
#[test]
fn zero_cores_and_empty_or_repeated_model_lists_are_refused() {
    let one = "  - {name: A, meta: {tenant: 1}, apps: [{name: bulk, kind: bulk, cores: [0]}]}\n";
    let e = load_valid("host: {cores: 0}\n", one).unwrap_err();
    assert!(
        e.starts_with("v.yaml:2:15:") && e.contains("`cores: 0`: a host has at least 1 core"),
        "{e}"
    );
    assert_eq!(load_valid("host: {cores: 1}\n", one).unwrap().host.cores, 1);
    let e = load_valid("nics: []\n", one).unwrap_err();
    assert!(
        e.starts_with("v.yaml:2:7:") && e.contains("`nics` is empty"),
        "{e}"
    );
    let e = load_valid("nics: [sq, loom, sq]\n", one).unwrap_err();
    assert!(
        e.starts_with("v.yaml:2:18:")
            && e.contains("NIC model `sq` is listed twice (first at v.yaml:2:8)"),
        "{e}"
    );
    assert_eq!(
        load_valid("nics: [loom, sq]\n", one).unwrap().nics,
        [NicKind::Loom, NicKind::Sq]
    );
}

/// Odd but valid inputs run to the end without panicking: tiny and huge rates, zero flows,
/// a window smaller than a segment, unclassified traffic (dropped and counted by the engine
/// models), one core, a window longer than the run.
#[test]
fn odd_inputs_do_not_panic() {
    let text = "duration: 2ms\nwindow: 5ms\nhost: {cores: 1, segment: 100kb, mtu: 64b}\n\
        policy_inline: |\n  weft: 1\n  nodes:\n    - {name: r, type: wfq}\n    - {name: l, type: leaf, parent: r, match: {tenant: 1}, limit: {packets: 3}}\n\
        tenants:\n  - name: T\n    meta: {tenant: 1}\n    apps:\n\
        \x20     - {name: a, kind: bulk, flows: 3, window: 1kb}\n\
        \x20     - {name: b, kind: udp, rate: 1bit}\n\
        \x20     - {name: c, kind: request-response, rate: 0.000001/s, size: 1b}\n\
        \x20     - {name: d, kind: bulk, flows: 0}\n\
        \x20     - {name: e, kind: udp, rate: unlimited, socket_limit: 1b}\n\
        \x20 - name: U\n    meta: {tenant: 9}\n    apps:\n\
        \x20     - {name: x, kind: bulk, flows: 2}\n";
    let sc = weft_sim::load_str(Path::new("odd.yaml"), text, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let runs = weft_sim::run_all(&sc, &NicKind::ALL, &mut |_, _| {});
    let an = report::analyse(&sc, &runs);
    let s = report::summary(&sc, &an);
    assert!(
        s["nics"]["loom"]["tenants"]["U"]["drops"].as_u64().unwrap() > 0,
        "{s}"
    );
}

/// Loom Fig. 2: the aggregate 2 Gbit/s limit holds with sq and loom; with the policy as a
/// qdisc on each of 16 queues (`mq.qdisc: policy`) every queue has its own 2 Gbit/s shaper
/// and the threads exceed the limit together; per-queue NIC limits of 2 Gbit/s / 16 leave
/// it under-used.
#[test]
fn loom_fig2_aggregate_limit() {
    let mut sc = load("loom-fig2.yaml");
    sc.duration_ps = 20_000_000_000;
    let rate =
        |sum: &serde_json::Value, m: &str| sum["nics"][m]["throughput_bps"].as_f64().unwrap() / 1e9;
    let s = summary(&sc, &[NicKind::Sq, NicKind::Mq, NicKind::Loom]);
    for m in ["sq", "loom"] {
        assert!((rate(&s, m) - 2.0).abs() < 0.1, "{m} {}", rate(&s, m));
    }
    assert!(
        rate(&s, "mq") < 1.3,
        "per-queue 125 Mbit/s: {}",
        rate(&s, "mq")
    );
    sc.nic_params.hw_queue_rate_bps = None;
    sc.nic_params.mq_qdisc = weft_sim::nic::MqQdisc::Policy;
    let s = summary(&sc, &[NicKind::Mq]);
    assert!(rate(&s, "mq") > 3.0, "policy per queue: {}", rate(&s, "mq"));
}

/// TONIC Fig. 14: head insertion serves T2's prioritized ping-pong application far faster
/// than XPS with a FIFO qdisc (it completes more messages, at lower latency), without
/// breaking the tenants' equal shares.
#[test]
fn tonic_fig14_priority_inside_a_tenant() {
    let mut sc = load("tonic-fig14.yaml");
    sc.duration_ps = 20_000_000_000;
    let s = summary(&sc, &[NicKind::Mq, NicKind::Tonic]);
    let app = |m: &str| s["nics"][m]["tenants"]["T2"]["apps"]["sockperf"].clone();
    let p50 = |m: &str| app(m)["latency_us"]["p50"].as_f64().unwrap();
    let done = |m: &str| app(m)["requests"]["completed"].as_u64().unwrap();
    assert!(
        p50("tonic") * 10.0 < p50("mq"),
        "{} {}",
        p50("tonic"),
        p50("mq")
    );
    assert!(
        done("tonic") > 10 * done("mq"),
        "{} {}",
        done("tonic"),
        done("mq")
    );
    assert!(s["nics"]["tonic"]["jain_min"].as_f64().unwrap() > 0.99);
}

/// Loom Fig. 11 (10 Gbit/s variant, time-scaled): J1 and J2 share one 2.5 Gbit/s limit, so
/// Loom keeps each job near its ideal (the water-fill respects the shared limit) while MQ,
/// which knows no limit, sends J1 and J2 far above it.
#[test]
fn loom_fig11_shared_limit() {
    let mut sc = load("loom-fig11-10g.yaml");
    sc.scale_time(1, 10);
    let s = summary(&sc, &[NicKind::Mq, NicKind::Loom]);
    let err = |m: &str, j: &str| {
        s["nics"][m]["tenants"]["T1"]["apps"][j]["rel_error"]
            .as_f64()
            .unwrap()
    };
    for j in ["J0", "J1", "J2"] {
        assert!(err("loom", j) < 0.05, "loom {j} {}", err("loom", j));
    }
    assert!(err("mq", "J1") > 0.3 && err("mq", "J2") > 0.3);
}

/// A request/response application offered 1.5 times the link: its queue grows all run, and
/// at the end about a third of its requests are unfinished. Their latency percentiles once
/// counted only the completed requests (the early ones, quick), and `requests` only those:
/// now every request counts, an unfinished one at its age at the end, and a percentile that
/// falls on unfinished requests is marked a lower bound, over the run and per window.
#[test]
fn unfinished_requests_count_in_the_latency_percentiles() {
    let mut sc = load_valid(
        "latency_window: 250us\n",
        "  - {name: A, meta: {tenant: 1}, apps: [{name: kv, kind: request-response, rate: 1500000/s, size: 1500b}]}\n",
    )
    .unwrap();
    sc.nics = vec![NicKind::Loom];
    let runs = weft_sim::run_all(&sc, &sc.nics, &mut |_, _| {});
    let an = report::analyse(&sc, &runs);
    let s = report::summary(&sc, &an);
    let kv = &s["nics"]["loom"]["tenants"]["A"]["apps"]["kv"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let (issued, done, unfinished) = (
        n(&kv["requests"]["issued"]),
        n(&kv["requests"]["completed"]),
        n(&kv["requests"]["unfinished"]),
    );
    // 1,500 requests expected in 1 ms; the link carries 822 a millisecond.
    assert!((1_350..1_650).contains(&issued), "{kv}");
    assert!(done < 850 && issued == done + unfinished, "{kv}");
    let lat = &kv["latency_us"];
    assert_eq!(
        (n(&lat["samples"]), n(&lat["unfinished"])),
        (issued, unfinished)
    );
    for p in ["p50_at_least", "p90_at_least", "p99_at_least"] {
        assert_eq!(lat[p], true, "{lat}");
    }
    // Per window (of arrival): every request counted, the late windows' p90 lower bounds.
    let csv = report::latency_csv(&sc, &an);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "window_start_s,nic,tenant,app,requests,unfinished,p50_us,p90_us,p99_us,\
             p50_at_least,p90_at_least,p99_at_least"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4, "{csv}");
    let total: u64 = rows.iter().map(|r| r[4].parse::<u64>().unwrap()).sum();
    let open: u64 = rows.iter().map(|r| r[5].parse::<u64>().unwrap()).sum();
    assert_eq!((total, open), (issued, unfinished), "{csv}");
    assert_eq!((rows[0][5], rows[0][10]), ("0", "false"), "{csv}");
    assert_eq!(rows[3][10], "true", "{csv}");
}

/// A report written where an earlier one was replaces it: the files the earlier run wrote
/// and this one does not (the charts of models not run again) are removed, and nothing else
/// in the directory is.
#[test]
fn a_report_replaces_an_earlier_one_and_nothing_else() {
    let mut sc = load_valid(
        "",
        "  - {name: A, meta: {tenant: 1}, apps: [{name: bulk, kind: bulk}]}\n",
    )
    .unwrap();
    let dir = out_dir("replace");
    let runs = weft_sim::run_all(&sc, &[NicKind::Sq, NicKind::Loom], &mut |_, _| {});
    report::write(&dir, &sc, &runs).unwrap();
    assert!(dir.join("throughput-sq.svg").exists());
    for keep in ["notes.txt", "throughput-x.svg"] {
        std::fs::write(dir.join(keep), "mine").unwrap();
    }
    sc.seed = 2;
    let runs = weft_sim::run_all(&sc, &[NicKind::Loom], &mut |_, _| {});
    report::write(&dir, &sc, &runs).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "index.html",
            "jain.csv",
            "jain.svg",
            "latency-cdf.csv",
            "latency-cdf.svg",
            "latency.csv",
            "latency.svg",
            "notes.txt",
            "summary.json",
            "throughput-loom.svg",
            "throughput-x.svg",
            "timeseries.csv"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An unknown key was reported in the YAML library's words (`unknown field`, `expected one
/// of`) with no hint: it is an unknown key now, with the key it most likely meant (one it
/// extends or respells, or a near misspelling) and the keys known where it is written.
#[test]
fn unknown_keys_are_told_the_key_meant() {
    let app =
        "  - name: A\n    meta: {tenant: 1}\n    apps:\n      - name: b\n        kind: bulk\n";
    for (head, tenants, want) in [
        ("latencywindow: 1ms\n", app, "v.yaml:2:1: unknown key `latencywindow`; did you mean `latency_window`? (known: name, description, time_scale, policy, policy_inline, duration, seed, window, latency_window, nics, host, nic, limits, network, tenants)"),
        ("latency: 1ms\n", app, "; did you mean `latency_window`?"),
        ("seeds: 1\n", app, "; did you mean `seed`?"),
        ("host: {segments: 64kb}\n", app, "v.yaml:2:8: unknown key `segments`; did you mean `segment`? (known: cores, segment, mtu, cpu_per_packet, cpu_per_doorbell, placement, retry, migrate)"),
        ("host: {cpu: 1us}\n", app, "; did you mean `cpu_per_packet`?"),
        ("", &format!("{app}        windw: 64kb\n"), "v.yaml:14:9: unknown key `windw`; did you mean `window`?"),
        ("", &format!("{app}        sizedist: fixed\n"), "; did you mean `size_dist`?"),
        ("", &format!("{app}        closedloop: true\n"), "; did you mean `closed_loop`?"),
        ("limits: {max_event: 5}\n", app, "; did you mean `max_events`?"),
        ("nic: {loom: {batchsize: 8kb}}\n", app, "unknown NIC parameter `loom.batchsize`; did you mean `loom.batch`?"),
        ("colour: blue\n", app, "v.yaml:2:1: unknown key `colour` (known: name,"),
    ] {
        let e = load_valid(head, tenants).unwrap_err();
        assert!(e.contains(want), "{head}{tenants}: {e}");
    }
}

/// A value of the wrong kind was reported in the YAML library's words (`invalid u16`,
/// `expected sequence start`, `duplicate mapping key: meta, set DuplicateKeyPolicy in
/// Options if acceptable`, `unexpected end of input`): each names its key and rule now, at
/// the value's line and column.
#[test]
fn wrong_kinds_of_values_name_the_key_and_its_rule() {
    let app =
        "  - name: A\n    meta: {tenant: 1}\n    apps:\n      - name: b\n        kind: bulk\n";
    for (head, tenants, want) in [
        ("host: {cores: eight}\n", app, "v.yaml:2:15: `cores` must be a whole number from 1 to 65535, not `eight`"),
        ("", &format!("{app}        flows: 3.5\n"), "v.yaml:14:16: `flows` must be a whole number from 0 to 4294967295, not `3.5`"),
        ("", &format!("{app}        flows: -3\n"), "v.yaml:14:16: `flows` must be a whole number from 0 to 4294967295, not `-3`"),
        ("seed: 1.5\n", app, "v.yaml:2:7: `seed` must be a whole number from 0 to 18446744073709551615, not `1.5`"),
        ("nics: loom\n", app, "v.yaml:2:7: `nics` must be a list, e.g. `[sq, loom]`"),
        ("", &format!("{app}        cores: 0\n"), "v.yaml:14:16: `cores` must be a list of core numbers, e.g. `[0, 1]`"),
        ("", &format!("{app}        cores: [0, x]\n"), "v.yaml:14:20: each entry of `cores` must be a core number, a whole number from 0 to 65534, not `x`"),
        ("", &format!("{app}        closed_loop: maybe\n"), "v.yaml:14:22: `closed_loop` must be `true` or `false`, not `maybe`"),
        ("", &format!("{app}        schedule: [{{at: 1ms, flows: x}}]\n"), "v.yaml:14:37: `flows` must be a whole number from 0 to 4294967295, not `x`"),
        ("", &app.replace("    meta: {tenant: 1}\n", "    meta: {tenant: 1}\n    meta: {tenant: 2}\n"), "v.yaml:11:5: key `meta` given twice: a mapping holds each key once"),
        ("host: 8\n", app, "v.yaml:2:7: `host` must be a mapping, e.g. `{cores: 8, mtu: 1500b}`"),
        ("", "  - 5\n", "v.yaml:9:5: each entry of `tenants` must be a mapping with `name` and `apps`"),
        ("", &app.replace("apps:\n      - name: b\n        kind: bulk\n", "apps: bulk\n"), "v.yaml:11:11: `apps` must be a list of applications, e.g. `[{name: bulk, kind: bulk}]`"),
        ("nic: {hw: {ring: [4]}}\n", app, "v.yaml:2:18: `ring` must be a single value (a number or text), not a list or a mapping"),
    ] {
        let e = load_valid(head, tenants).unwrap_err();
        assert_eq!(e, want);
    }
    let load = |t: &str| {
        weft_sim::load_str(Path::new("s.yaml"), t, &Default::default())
            .unwrap_err()
            .to_string()
    };
    for blank in ["", "\n# nothing yet\n", "---\n"] {
        let e = load(blank);
        assert!(e.contains(": the scenario file is empty"), "{blank:?}: {e}");
    }
    assert_eq!(
        load("just a string\n"),
        "s.yaml:1:1: a scenario is a mapping of keys (`duration:`, `policy:`, `tenants:` and \
         others; examples/scenarios/README.md), not a single value or a list"
    );
    assert_eq!(
        load("duration:\n"),
        "s.yaml:1:9: `duration` has no value: it must be a time, e.g. `10ms`"
    );
}

/// Errors in `policy_inline` named the line and column within the block (`7:59` for a typo
/// at line 20, column 61 of the file): they name the file's now. A block whose lines cannot
/// be found as written (a quoted string) names where it starts and the place within it.
#[test]
fn policy_inline_errors_point_into_the_scenario_file() {
    let tenants = "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk}]}\n";
    let text = |indicator: &str, policy: &str| {
        format!(
            "duration: 1ms\npolicy_inline: {indicator}\n    weft: 1\n    nodes:\n\n      \
             - {{name: r, type: wfq}}\n{policy}tenants:\n{tenants}"
        )
    };
    let typo = "      - {name: a, type: leaf, parent: r, match: {tenant: 1}, wieght: 3}\n";
    for indicator in ["|", "|-", "|4", "|  # the policy"] {
        let e = weft_sim::load_str(
            Path::new("i.yaml"),
            &text(indicator, typo),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "i.yaml:7:62: policy_inline: error[unknown-key]: unknown key `wieght` in a node; \
             help: did you mean `weight`?",
            "{indicator}"
        );
    }
    let unknown = "      - {name: a, type: leaf, parent: x, match: {tenant: 1}}\n";
    let e = weft_sim::load_str(
        Path::new("i.yaml"),
        &text("|", unknown),
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("i.yaml:7:39: policy_inline: error[unknown-node]: "),
        "{e}"
    );
    let quoted = format!(
        "duration: 1ms\npolicy_inline: \"weft: 1\\nnodes:\\n  - {{name: r, type: leaf, wieght: 1}}\"\ntenants:\n{tenants}"
    );
    let e = weft_sim::load_str(Path::new("q.yaml"), &quoted, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "q.yaml:2:16: policy_inline (line 3, column 27 of its text): error[unknown-key]"
        ),
        "{e}"
    );
}

/// A `policy_inline` with a `burst` under two frames of the link loads with its `small-burst`
/// warning, at the scenario file's line and column as its errors are; a file policy's names
/// its own file; the default burst warns of nothing.
#[test]
fn policy_inline_warnings_point_into_the_scenario_file() {
    let tenants = "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk}]}\n";
    let text = |burst: &str| {
        format!(
            "duration: 1ms\npolicy_inline: |\n  weft: 1\n  nodes:\n    - {{name: r, type: wfq}}\n    \
             - {{name: cap, type: shape, parent: r, rate: 1gbit{burst}}}\n    \
             - {{name: a, type: leaf, parent: cap, match: {{tenant: 1}}}}\ntenants:\n{tenants}"
        )
    };
    let sc = weft_sim::load_str(
        Path::new("w.yaml"),
        &text(", burst: 64b"),
        &Default::default(),
    )
    .expect("a small burst is a warning, not an error");
    assert_eq!(sc.program.shapers[0].burst_bytes, 64);
    assert_eq!(sc.policy_warnings.len(), 1, "{:?}", sc.policy_warnings);
    assert!(
        sc.policy_warnings[0].starts_with(
            "w.yaml:6:63: policy_inline: warning[small-burst]: the bucket of `cap` holds 64 bytes"
        ),
        "{:?}",
        sc.policy_warnings
    );
    let sc = weft_sim::load_str(Path::new("w.yaml"), &text(""), &Default::default()).unwrap();
    assert_eq!(sc.program.shapers[0].burst_bytes, 3028, "2 × mtu");
    assert!(sc.policy_warnings.is_empty(), "{:?}", sc.policy_warnings);
}

/// Keys an application's kind does not read were ignored without a word (`rate` on bulk,
/// `window` on UDP), and a tenant without applications ran nothing: refused, where written.
#[test]
fn keys_of_another_kind_and_tenants_without_applications_are_refused() {
    let one = |app: &str| format!("  - {{name: A, meta: {{tenant: 1}}, apps: [{app}]}}\n");
    for (app, want) in [
        ("{name: b, kind: bulk, rate: 5gbit}", "v.yaml:9:69: `rate` belongs to `request-response` and `udp` applications; `b` is a `bulk` application, which keeps `window` bytes queued per flow"),
        ("{name: b, kind: bulk, size: 5kb}", "v.yaml:9:69: `size` belongs to `request-response` and `tcp` applications"),
        ("{name: u, kind: udp, window: 64kb}", "v.yaml:9:70: `window` belongs to `bulk` applications; `u` is a `udp` application"),
        ("{name: u, kind: udp, closed_loop: true}", "v.yaml:9:75: `closed_loop` belongs to `request-response` applications"),
        ("{name: k, kind: request-response, rate: 10/s, socket_limit: 1kb}", "v.yaml:9:101: `socket_limit` belongs to `udp` applications; `k` is a `request-response` application"),
        ("{name: k, kind: request-response, rate: 10/s, window: 1kb}", "v.yaml:9:95: `window` belongs to `bulk` applications"),
    ] {
        let e = load_valid("", &one(app)).unwrap_err();
        assert!(e.starts_with(want), "{app}: {e}");
    }
    let e = load_valid("", "  - {name: A, meta: {tenant: 1}, apps: []}\n").unwrap_err();
    assert_eq!(
        e,
        "v.yaml:9:40: tenant `A` has no applications (`apps` is empty): give it at least one, \
         or leave the tenant out"
    );
}

/// An application starting at or after the end of the run, or a schedule step there, does
/// nothing; a window longer than the run holds no whole window. Accepted, with a warning
/// naming where each was written.
#[test]
fn what_a_run_never_reaches_is_warned_about() {
    let sc = load_valid(
        "window: 2ms\n",
        "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk, start: 1ms}]}\n\
         \x20 - {name: B, meta: {tenant: 2}, apps: [{name: b, kind: bulk, \
         schedule: [{at: 500us, flows: 2}, {at: 3ms, flows: 4}]}]}\n",
    )
    .unwrap();
    assert_eq!(
        sc.warnings(),
        [
            "v.yaml:10:70: A/b starts at 1ms, at or after the end of the run (1ms): it sends nothing",
            "v.yaml:11:102: B/b's schedule step to 4 flows at 3ms is at or after the end of the run (1ms): it never happens",
            "v.yaml:2:9: the throughput window (2ms) is longer than the run (1ms): no whole window, so no Jain's index (jain_min is null)",
        ]
    );
    let sc = load_valid(
        "",
        "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk, start: 999us}]}\n",
    )
    .unwrap();
    assert!(sc.warnings().is_empty(), "{:?}", sc.warnings());
}

/// The scenario's `name`, `description` and `time_scale` were taken as written: a name
/// with a space or `/` (the table's header, `weft demo`'s directory), a description or
/// time scale with an escape sequence (the terminal prints `time_scale`), and a time scale
/// that said nothing (`fast`) or nonsense (`1 s = 0 ms`). Each is refused where written;
/// a name left out is the file's stem made a name.
#[test]
fn scenario_name_description_and_time_scale_are_checked() {
    let tenants = "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk}]}\n";
    for (head, want) in [
        (
            "name: my run\n",
            r#"v.yaml:2:7: scenario name "my run" must be non-empty, without spaces"#,
        ),
        (
            "name: a/b\n",
            r#"v.yaml:2:7: scenario name "a/b" must not contain `/`"#,
        ),
        (
            "name: \"cafe\\u0301\"\n",
            r#"v.yaml:2:7: scenario name "cafe\u{301}" is not in Unicode's composed form"#,
        ),
        (
            "name: ..\n",
            r#"v.yaml:2:7: scenario name ".." names a directory"#,
        ),
        (
            "description: \"red \\e[31m\"\n",
            "v.yaml:2:14: `description` has the control character U+001B at character 5",
        ),
        (
            "description: \"a \\u202Eb\"\n",
            "v.yaml:2:14: `description` has the bidirectional formatting character U+202E",
        ),
        (
            "time_scale: \"1 s = 1 ms\\r\"\n",
            "v.yaml:2:13: `time_scale` has the control character U+000D",
        ),
        (
            "time_scale: \"1 s = 1 ms\\n(two lines)\"\n",
            "v.yaml:2:13: `time_scale` has the control character U+000A at character 11: a \
             one-line note",
        ),
        (
            "time_scale: fast\n",
            "v.yaml:2:13: time_scale \"fast\": no `=`: expected `PAPER = SIMULATED`",
        ),
        (
            "time_scale: 1 paper second = 0 ms simulated\n",
            "v.yaml:2:13: time_scale \"1 paper second = 0 ms simulated\": `0ms` must be \
             greater than zero",
        ),
        (
            "time_scale: 1 s = 100 parsecs\n",
            "`parsecs` is not a unit of time",
        ),
        ("time_scale: 1 s = -5 ms\n", "time_scale \"1 s = -5 ms\": "),
        ("time_scale: one second = 5 ms\n", "`one` is not a number"),
        (
            "time_scale: 1 second later = 5 ms\n",
            "`later` after the paper's time",
        ),
    ] {
        let e = load_valid(head, tenants).unwrap_err();
        assert!(e.contains(want), "{head}: {e}");
        assert!(!e.contains('\u{1b}'), "{e}");
    }
    // Free text may hold newlines and tabs; a time scale a note after its times.
    let sc = load_valid(
        "name: fig-9\ndescription: \"two\\nlines\\tand a <tag>\"\n\
         time_scale: \"1 paper second = 100 ms simulated (phases of 200 ms)\"\n",
        tenants,
    )
    .unwrap();
    assert_eq!(sc.name, "fig-9");
    assert_eq!(
        sc.time_scale_ratio,
        Some((1_000_000_000_000, 100_000_000_000))
    );
    let s = summary(&sc, &[NicKind::Loom]);
    assert_eq!(s["time_scale_ratio"], 0.1, "{s}");
    assert_eq!(
        s["time_scale"],
        "1 paper second = 100 ms simulated (phases of 200 ms)"
    );
    for (ts, ratio) in [
        ("2 min = 1.5s", (120_000_000_000_000, 1_500_000_000_000)),
        ("10s=1ms", (10_000_000_000_000, 1_000_000_000)),
        (
            "1 paper second = 25 milliseconds",
            (1_000_000_000_000, 25_000_000_000),
        ),
    ] {
        let sc = load_valid(&format!("time_scale: {ts}\n"), tenants).unwrap();
        assert_eq!(sc.time_scale_ratio, Some(ratio), "{ts}");
    }
    let sc = load_valid("", tenants).unwrap();
    assert_eq!((sc.name.as_str(), sc.time_scale_ratio), ("v", None));
    // Without `name`, the file's stem, made a name.
    let text = std::fs::read_to_string(scenarios_dir().join("loom-fig3.yaml"))
        .unwrap()
        .replace("name: loom-fig3\n", "");
    for (file, name) in [("my run,2.yaml", "my_run_2"), ("...yaml", "scenario")] {
        let sc = weft_sim::load_str(Path::new(file), &text, &Default::default()).unwrap();
        assert_eq!(sc.name, name, "{file}");
    }
}

/// A `latency_window` longer than the run was accepted without a word (latency.csv then has
/// one window, the whole run), while a throughput window longer than the run was warned
/// about. It is too, where written; the default (five windows) is not.
#[test]
fn a_latency_window_longer_than_the_run_is_warned_about() {
    let tenants = "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk}]}\n";
    let sc = load_valid("latency_window: 5ms\n", tenants).unwrap();
    assert_eq!(
        sc.warnings(),
        [
            "v.yaml:2:17: the latency window (5ms) is longer than the run (1ms): latency.csv and \
          latency.svg have one window, the whole run, and no latency over time"
        ]
    );
    // After --duration too.
    let mut sc = load_valid("latency_window: 500us\n", tenants).unwrap();
    assert!(sc.warnings().is_empty(), "{:?}", sc.warnings());
    sc.set_duration(400_000_000).unwrap();
    assert_eq!(sc.warnings().len(), 1, "{:?}", sc.warnings());
    // The default: five throughput windows, one window of the whole run here.
    let sc = load_valid("window: 400us\n", tenants).unwrap();
    assert!(sc.warnings().is_empty(), "{:?}", sc.warnings());
}

/// A bulk or UDP application's packet delay (write to wire) counted only the packets sent:
/// one starved by a strict priority had no delay at all (p90 null) while its socket stayed
/// full all run. Packets still queued at the end count as their age then, a lower bound
/// (`p90_at_least`), and `packets.queued_at_end` says how many.
#[test]
fn packets_still_queued_at_the_end_count_in_the_packet_delay() {
    let text = "duration: 20ms\nnics: [sq, loom]\npolicy_inline: |\n  weft: 1\n  link: {rate: 1gbit}\n  nodes:\n\
                \x20   - {name: r, type: prio}\n\
                \x20   - {name: hi, type: leaf, parent: r, priority: 0, match: {tenant: 1}}\n\
                \x20   - {name: lo, type: leaf, parent: r, priority: 1, match: {tenant: 2}}\n\
                tenants:\n\
                \x20 - {name: H, meta: {tenant: 1}, apps: [{name: udp, kind: udp}]}\n\
                \x20 - {name: L, meta: {tenant: 2}, apps: [{name: udp, kind: udp, socket_limit: 30000b}]}\n";
    let sc = weft_sim::load_str(Path::new("starve.yaml"), text, &Default::default()).unwrap();
    let s = summary(&sc, &[NicKind::Sq, NicKind::Loom]);
    for m in ["sq", "loom"] {
        let l = &s["nics"][m]["tenants"]["L"]["apps"]["udp"];
        // 20 packets of 1500 B fill the socket; a few leave at the start (before the
        // high-priority queue builds up, sq's ring holds them), then none.
        let sent = l["packets"]["sent"].as_u64().unwrap();
        assert!(sent <= 16, "{m}: {l}");
        assert_eq!(l["packets"]["queued_at_end"], 20, "{m}: {l}");
        let lat = &l["latency_us"];
        assert_eq!(
            (lat["samples"].as_u64(), lat["unfinished"].as_u64()),
            (Some(sent + 20), Some(20)),
            "{m}: {l}"
        );
        for p in ["p90", "p99"] {
            // Written in the first 0.2 ms: about 20 ms old at the end.
            let v = lat[p].as_f64().unwrap_or_else(|| panic!("{m} {p}: {lat}"));
            assert!((19_000.0..21_000.0).contains(&v), "{m} {p}: {lat}");
            assert_eq!(lat[format!("{p}_at_least")], true, "{m} {p}: {lat}");
        }
        // The tenant's latency is its application's.
        assert_eq!(s["nics"][m]["tenants"]["L"]["latency_us"], *lat);
        // The high-priority application's queue is full too (its socket's worth): its
        // delays are mostly exact, the packets queued at the end a small part.
        let h = &s["nics"][m]["tenants"]["H"]["apps"]["udp"];
        let (sent, queued) = (
            h["packets"]["sent"].as_u64().unwrap(),
            h["packets"]["queued_at_end"].as_u64().unwrap(),
        );
        assert!(sent > 100 && queued > 0, "{m}: {h}");
        assert_eq!(
            h["latency_us"]["samples"].as_u64(),
            Some(sent + queued),
            "{m}: {h}"
        );
        assert_eq!(h["latency_us"]["p50_at_least"], false, "{m}: {h}");
    }
    // Every packet written is sent, dropped or still queued, and only those queued count: a
    // bulk flow keeps one to two segments (64 KB: 44 packets each) queued, so 4 flows end
    // with 176 to 352 packets queued, whatever they sent.
    let sc = load_valid(
        "",
        "  - {name: A, meta: {tenant: 1}, apps: [{name: b, kind: bulk, flows: 4}]}\n",
    )
    .unwrap();
    for r in weft_sim::run_all(
        &sc,
        &[NicKind::Sq, NicKind::Mq, NicKind::Loom],
        &mut |_, _| {},
    ) {
        assert!(r.app_packets[0] > 500, "{:?}: {}", r.kind, r.app_packets[0]);
        assert!(
            (176..=352).contains(&r.app_queued[0]),
            "{:?}: {}",
            r.kind,
            r.app_queued[0]
        );
        assert_eq!(r.app_latency[0].unfinished.count(), r.app_queued[0]);
        assert_eq!(r.app_latency[0].count(), r.app_packets[0] + r.app_queued[0]);
    }
}

/// Loom Fig. 1: VM 1's kvs (`prio` above batch) and its batch job go to one destination,
/// whose 10 Gbit/s shaping class (`vm1-dst1`, 64 KiB burst) batch saturates. The class hands
/// its tokens to the packet the policy beneath it ranks first, so kvs keeps its priority:
/// its p99 stays within twice its p99 with the batch job absent (when kvs and batch split the
/// saturated class evenly, kvs waited as long as batch: hundreds of µs), batch gets the rest
/// of the limit, and the limit holds over the run and in every window. Time-scaled (20 ms).
#[test]
fn loom_fig1_kvs_keeps_its_priority_under_a_saturated_destination_limit() {
    const LIMIT_BPS: f64 = 10e9; // vm1-dst1 in examples/policies/loom-fig1.yaml
    const BURST_BYTES: f64 = 65_536.0;
    let run = |file: &str| {
        let mut sc = load(file);
        sc.duration_ps = 20_000_000_000;
        sc.nics = vec![NicKind::Loom];
        let runs = weft_sim::run_all(&sc, &sc.nics, &mut |_, _| {});
        let s = report::summary(&sc, &report::analyse(&sc, &runs));
        (sc, runs.into_iter().next().unwrap(), s)
    };
    let kvs_latency = |s: &serde_json::Value| {
        s["nics"]["loom"]["tenants"]["vm1"]["apps"]["kvs"]["latency_us"].clone()
    };
    let (_, _, alone) = run("loom-fig1-limits-kvs-alone.yaml");
    let (sc, r, shared) = run("loom-fig1-limits.yaml");
    let (alone, shared) = (kvs_latency(&alone), kvs_latency(&shared));
    let p99 = |l: &serde_json::Value| l["p99"].as_f64().unwrap();
    assert!(
        p99(&shared) <= 2.0 * p99(&alone),
        "kvs p99 with batch {} µs, alone {} µs",
        p99(&shared),
        p99(&alone)
    );
    assert!(
        alone["p99_at_least"] == false && shared["p99_at_least"] == false,
        "kvs p99 a lower bound (requests unfinished): with batch {shared}, alone {alone}"
    );

    // Rates as the class counts them: frames plus the link's per-frame overhead.
    let secs = sc.duration_ps as f64 / 1e12;
    let app = |name: &str| sc.apps.iter().position(|a| a.name == name).unwrap();
    let (kvs, batch) = (app("kvs"), app("batch"));
    assert_eq!(sc.tenants[sc.apps[batch].tenant].name, "vm1");
    let overhead = sc.program.link.overhead_bytes as f64;
    let wire_bps =
        |i: usize| (r.app_bytes[i] as f64 + r.app_packets[i] as f64 * overhead) * 8.0 / secs;
    let (kvs_bps, batch_bps) = (wire_bps(kvs), wire_bps(batch));
    let frame = sc.host.mtu_bytes as f64 + overhead;
    let most = LIMIT_BPS + (BURST_BYTES + frame) * 8.0 / secs;
    assert!(
        kvs_bps + batch_bps <= most,
        "kvs {kvs_bps} + batch {batch_bps} bit/s above the limit ({most})"
    );
    assert!(
        batch_bps >= 0.97 * (LIMIT_BPS - kvs_bps),
        "batch {batch_bps} bit/s, kvs {kvs_bps}: the limit is not used"
    );
    // And in every window (frame bytes: fewer than the class counts).
    let w_secs = sc.window_ps as f64 / 1e12;
    for (w, bytes) in r.window_bytes.iter().enumerate() {
        let sent = (bytes[kvs] + bytes[batch]) as f64;
        assert!(
            sent <= LIMIT_BPS * w_secs / 8.0 + BURST_BYTES + frame,
            "window {w}: {sent} bytes"
        );
    }
}

/// SENIC Table 3 measures rate accuracy by the gaps between a class's departures: their
/// mean, standard deviation and, as jitter, the 99th percentile of |gap − mean|. A class
/// of 1 Gbit/s held to its rate sends its frames 12.16 µs apart, every one: no jitter, and
/// exactly none (the gaps' buckets are 8 ns wide there). Poisson requests' responses depart
/// irregularly: some jitter, at most the 10 σ that Chebyshev allows at the 99th percentile.
#[test]
fn interdeparture_jitter_is_in_the_summary() {
    let jitter = |s: &serde_json::Value, m: &str, t: &str, a: &str| {
        let g = &s["nics"][m]["tenants"][t]["apps"][a]["interdeparture_us"];
        let keys: Vec<&str> = g.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["mean", "std", "p99_abs_dev", "gaps"], "{m}");
        let f = |k: &str| g[k].as_f64().unwrap_or_else(|| panic!("{m}: {k}: {g}"));
        (f("mean"), f("std"), f("p99_abs_dev"), f("gaps"))
    };
    let mut sc = load("senic-table3-n1.yaml");
    sc.set_duration(5_000_000_000).unwrap();
    let s = summary(&sc, &[NicKind::Senic, NicKind::Loom]);
    for m in ["senic", "loom"] {
        assert_eq!(jitter(&s, m, "c0", "udp"), (12.16, 0.0, 0.0, 411.0), "{m}");
    }
    let mut sc = load("hierarchy.yaml");
    sc.set_duration(5_000_000_000).unwrap();
    let s = summary(&sc, &[NicKind::Loom]);
    let (mean, std, p99, n) = jitter(&s, "loom", "A", "kv");
    assert!(
        n > 50.0 && mean > 0.0 && std > 0.0 && p99 > 0.0 && p99 <= 10.0 * std,
        "{mean} {std} {p99} {n}"
    );
}

/// SENIC Fig. 7 (`senic-fig7.yaml`): one class sends at most N packets every L + 50 ns (N
/// CF modules pulling in parallel, DMA latency L, 50 ns to dispatch the class), or the
/// link's rate. Over packet sizes of 64 to 1500 B, N of 1, 2 and 4 and L of 200 ns and
/// 1.25 µs, the senic model's throughput is that arithmetic within 1 %; at the paper's
/// point (1500 B, N = 1, L = 1.25 µs) it is 9.23 Gbit/s.
#[test]
fn senic_fig7_one_class_is_bounded_by_its_pulls() {
    let text = std::fs::read_to_string(scenarios_dir().join("senic-fig7.yaml")).unwrap();
    for size in [64u64, 200, 400, 1500] {
        for n in [1u64, 2, 4] {
            for l_ns in [200u64, 1250] {
                let t = text
                    .replace("mtu: 1500b", &format!("mtu: {size}b"))
                    .replace(
                        "{dma: 1300ns, max_pulls: 1}",
                        &format!("{{dma: {}ns, max_pulls: {n}}}", l_ns + 50),
                    );
                let sc = weft_sim::load_str(Path::new("senic-fig7.yaml"), &t, &Default::default())
                    .unwrap();
                let s = summary(&sc, &[NicKind::Senic]);
                let got = s["nics"]["senic"]["throughput_bps"].as_f64().unwrap();
                let want = (n as f64 * size as f64 * 8.0 / ((l_ns + 50) as f64 * 1e-9)).min(40e9);
                assert!(
                    (got - want).abs() <= 0.01 * want,
                    "{size} B, N {n}, L {l_ns} ns: {got} bit/s, want {want}"
                );
            }
        }
    }
}

/// Loom Fig. 12 (`loom-fig12.yaml`, time-scaled by 1/40 more): at 40 Gbit/s, while all
/// four bulk tenants are backlogged, SQ's one core drives less than 30 % of what Loom
/// sends (the paper: about 10 of 37 Gbit/s), Loom sends at least 95 % of the link and keeps
/// Jain's index at 0.99 or more, and MQ stays below 0.8: on every seed 1-10.
#[test]
fn loom_fig12_at_40_gbit() {
    let mut sc = load("loom-fig12.yaml");
    sc.scale_time(1, 40);
    let models = [NicKind::Sq, NicKind::Mq, NicKind::Loom];
    for seed in 1..=10 {
        sc.seed = seed;
        let runs = weft_sim::run_all(&sc, &models, &mut |_, _| {});
        let an = report::analyse(&sc, &runs);
        // Bytes a second and Jain's extremes over the windows with four tenants backlogged.
        let phase = |k: usize| -> (f64, f64, f64) {
            let (mut bytes, mut n, mut lo, mut hi) = (0u64, 0u64, 1.0f64, 0.0f64);
            for (w, j) in an[k].windows.jain.iter().enumerate() {
                if an[k].windows.backlogged[w].len() == 4 {
                    bytes += runs[k].window_bytes[w].iter().sum::<u64>();
                    n += 1;
                    let j = j.expect("four backlogged tenants");
                    lo = lo.min(j);
                    hi = hi.max(j);
                }
            }
            let bps = bytes as f64 * 8.0 / (n as f64 * sc.window_ps as f64 / 1e12);
            (bps, lo, hi)
        };
        let (sq, _, _) = phase(0);
        let (_, _, mq_hi) = phase(1);
        let (loom, loom_lo, _) = phase(2);
        assert!(sq < 0.3 * loom, "seed {seed}: sq {sq} bit/s, loom {loom}");
        assert!(
            loom >= 0.95 * 40e9 * 1500.0 / 1520.0,
            "seed {seed}: loom {loom} bit/s"
        );
        assert!(loom_lo >= 0.99, "seed {seed}: loom Jain {loom_lo}");
        assert!(mq_hi < 0.8, "seed {seed}: mq Jain up to {mq_hi}");
    }
}

/// TONIC Fig. 14 with TCP (`tonic-fig14-tcp.yaml`, 300 ms of its 1 s): sockperf's mean
/// latency (the run over the messages completed) is lower with TONIC than with XPS by a
/// ratio within twice the paper's 2.94× either way, and so is its 99th percentile (the
/// paper: 2.24×); TONIC keeps the tenants' Jain's index at 0.99 or more. Round-robin
/// placement draws nothing at random, so every seed gives the same run: seeds 1 and 2
/// give identical summaries, and the claim holds on them.
#[test]
fn tonic_fig14_with_tcp_within_twice_the_papers_ratios() {
    let ov = weft_sim::Overrides {
        duration_ps: Some(300_000_000_000),
        ..Default::default()
    };
    let mut sc =
        weft_sim::load(&scenarios_dir().join("tonic-fig14-tcp.yaml"), &ov).expect("scenario loads");
    let models = [NicKind::Mq, NicKind::Tonic];
    let mut first = None;
    for seed in [1, 2] {
        sc.seed = seed;
        let s = summary(&sc, &models);
        let app = |m: &str| s["nics"][m]["tenants"]["T2"]["apps"]["sockperf"].clone();
        let (xps, tonic) = (app("mq"), app("tonic"));
        let done = |a: &serde_json::Value| a["requests"]["completed"].as_f64().unwrap();
        let p99 = |a: &serde_json::Value| a["latency_us"]["p99"].as_f64().unwrap();
        let mean_ratio = done(&tonic) / done(&xps);
        let p99_ratio = p99(&xps) / p99(&tonic);
        println!("seed {seed}: mean latency XPS / TONIC {mean_ratio:.2}, p99 {p99_ratio:.2}");
        assert!(
            (2.94 / 2.0..=2.94 * 2.0).contains(&mean_ratio),
            "seed {seed}: mean latency ratio {mean_ratio} ({} and {} messages)",
            done(&xps),
            done(&tonic)
        );
        assert!(
            (2.24 / 2.0..=2.24 * 2.0).contains(&p99_ratio),
            "seed {seed}: p99 ratio {p99_ratio}"
        );
        let jain = s["nics"]["tonic"]["jain_min"].as_f64().unwrap();
        assert!(jain >= 0.99, "seed {seed}: TONIC's Jain {jain}");
        match &first {
            None => first = Some(s["nics"].clone()),
            Some(f) => assert_eq!(f, &s["nics"], "seed {seed} differs from seed 1"),
        }
    }
}

/// Loom Fig. 10 with TCP (`loom-fig9-tcp.yaml`, time-scaled by 1/4 more): as the bulk
/// tenants' connections add up (4 to 256), T0's sockperf latency stays low with Loom, its
/// p90 over the run less than a twentieth of MQ's and QPF's, on every seed 1-10. (The
/// paper's other claim, that SQ rises too, does not hold here: docs/reproduction.md.)
#[test]
fn loom_fig10_with_tcp_loom_keeps_t0_low() {
    let mut sc = load("loom-fig9-tcp.yaml");
    sc.scale_time(1, 4);
    let models = [NicKind::Mq, NicKind::Qpf, NicKind::Loom];
    for seed in 1..=10 {
        sc.seed = seed;
        let s = summary(&sc, &models);
        let p90 = |m: &str| {
            s["nics"][m]["tenants"]["T0"]["latency_us"]["p90"]
                .as_f64()
                .unwrap()
        };
        for other in ["mq", "qpf"] {
            assert!(
                p90("loom") * 20.0 < p90(other),
                "seed {seed}: T0 p90 loom {} µs, {other} {} µs",
                p90("loom"),
                p90(other)
            );
        }
    }
}
