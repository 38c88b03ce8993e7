//! What a scenario may ask of the simulator, and what the loader reads. Each case once ran
//! away or read without end: 10,000 `unlimited` UDP flows (20,000 times the link rate) took
//! 38 s for 2 ms of simulated time and 100,000 did not finish; a schedule step visited every
//! flow of its application and a request scanned the whole schedule; a scenario named
//! `/dev/zero` or a FIFO was read whole, for ever. Scaled down here, and counted in events
//! or refusals, never in wall time.

use std::path::{Path, PathBuf};

use weft_sim::scenario::{
    DEFAULT_MAX_EVENTS, DEFAULT_MAX_TOTAL_OFFERED_LOAD, MAX_SCENARIO_FILE_BYTES, MAX_WINDOW_CELLS,
};
use weft_sim::{NicKind, Overrides, Scenario, ScenarioError};

/// A scenario on a 10 Gbit/s link: `head` (duration, limits, ...) and the applications of
/// tenant `t` (`apps`, YAML flow mappings a line each).
fn text(head: &str, apps: &[String]) -> String {
    let mut t = format!(
        "{head}\nnics: [loom]\nhost: {{cores: 4}}\npolicy_inline: |\n  weft: 1\n  name: p\n  \
         link: {{rate: 10gbit}}\n  nodes:\n    - {{name: root, type: wfq}}\n    - {{name: a, \
         type: leaf, parent: root, match: {{tag: 0}}}}\ntenants:\n  - name: t\n    meta: \
         {{tag: 0}}\n    apps:\n"
    );
    for a in apps {
        t += &format!("      - {a}\n");
    }
    t
}

/// `n` unlimited UDP flows named `name`, with `extra` keys.
fn udp(name: &str, n: u32, extra: &str) -> String {
    format!("{{name: {name}, kind: udp, rate: unlimited, flows: {n}, cores: [0, 1, 2, 3]{extra}}}")
}

fn load(t: &str, ov: &Overrides) -> Result<Scenario, String> {
    weft_sim::load_str(Path::new("b.yaml"), t, ov).map_err(|e| e.to_string())
}

/// The reported case scaled down: every unlimited UDP flow offers twice the link rate, so
/// 33 flows offer 66 times, past the default cap of 64 (10,000 offered 20,000 times). The
/// refusal names the file, the application, its flows and the figures, and how to raise
/// the cap; 32 flows (64 times) load, and so do 33 under a raised cap.
#[test]
fn an_offered_load_past_the_cap_is_refused_when_loading() {
    assert_eq!(DEFAULT_MAX_TOTAL_OFFERED_LOAD, 64);
    let ok = load(
        &text("duration: 1ms", &[udp("u", 32, "")]),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(ok.offered_load, 64.0);
    assert_eq!(ok.max_offered_load, 64);
    let over = text("duration: 1ms", &[udp("u", 33, "")]);
    let e = load(&over, &Overrides::default()).unwrap_err();
    assert!(!e.contains("  "), "{e}");
    for want in [
        "b.yaml:15:",
        "66.0 times the link rate, 10gbit (the policy's link)",
        "t/u: 33 UDP flows × 20gbit (`unlimited`)",
        "at most 64 times the link rate by default",
        "limits: {max_offered_load: N}",
        "--max-offered-load N",
    ] {
        assert!(e.contains(want), "{want:?} not in: {e}");
    }
    // Raised by the scenario, or by the command line (which wins over the scenario).
    let raised = over.replace(
        "duration: 1ms",
        "duration: 1ms\nlimits: {max_offered_load: 66}",
    );
    assert_eq!(
        load(&raised, &Overrides::default())
            .unwrap()
            .max_offered_load,
        66
    );
    let cli = |n| Overrides {
        max_offered_load: Some(n),
        ..Overrides::default()
    };
    assert!(load(&over, &cli(66)).is_ok());
    let e = load(&raised, &cli(65)).unwrap_err();
    assert!(e.contains("under --max-offered-load"), "{e}");
    let e = load(&raised.replace(": 66}", ": 65}"), &Overrides::default()).unwrap_err();
    assert!(
        e.contains("under the scenario's `limits: {max_offered_load}` at b.yaml:2:"),
        "{e}"
    );
    // 0 is no cap at all, and refused.
    let e = load(&raised.replace(": 66}", ": 0}"), &Overrides::default()).unwrap_err();
    assert!(
        e.contains("b.yaml:2:") && e.contains("`max_offered_load: 0`"),
        "{e}"
    );
    let e = load(&over, &cli(0)).unwrap_err();
    assert!(e.contains("--max-offered-load"), "{e}");
    let e = load(
        &over.replace("duration: 1ms", "duration: 1ms\nlimits: {max_offered: 9}"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(e.contains("max_offered"), "{e}");
}

/// The cap holds at every instant, not for the sum of every application's most: two
/// groups of 20 flows that take turns offer 40 times the link, and load; together they
/// offer 80 times, refused from the instant they overlap. Open-loop responses count too.
#[test]
fn the_offered_load_is_what_runs_at_once() {
    let turns = text(
        "duration: 2ms",
        &[udp("a", 20, ", stop: 1ms"), udp("b", 20, ", start: 1ms")],
    );
    assert_eq!(
        load(&turns, &Overrides::default()).unwrap().offered_load,
        40.0
    );
    let overlap = turns.replace("start: 1ms", "start: 500us");
    let e = load(&overlap, &Overrides::default()).unwrap_err();
    assert!(e.contains("80.0 times") && e.contains("from 500us"), "{e}");
    // A schedule step that raises the count counts from its instant.
    let step = text(
        "duration: 2ms",
        &[udp("a", 1, ", schedule: [{at: 1ms, flows: 40}]")],
    );
    let e = load(&step, &Overrides::default()).unwrap_err();
    // A step at or after the end never happens; a longer run (`--duration`) reaches it.
    let later = step.replace("duration: 2ms", "duration: 1ms");
    let mut sc = load(&later, &Overrides::default()).unwrap();
    assert_eq!(sc.offered_load, 2.0);
    let e2 = sc.set_duration(2_000_000_000).unwrap_err();
    assert!(
        e2.contains("80.0 times") && e2.contains("--max-offered-load") && !e2.contains("  "),
        "{e2}"
    );
    assert_eq!(sc.duration_ps, 1_000_000_000);
    sc.set_duration(500_000_000).unwrap();
    assert_eq!(sc.offered_load, 2.0);
    sc.max_offered_load = 80;
    sc.set_duration(2_000_000_000).unwrap();
    assert_eq!(sc.offered_load, 80.0);
    let ov = Overrides {
        duration_ps: Some(2_000_000_000),
        ..Overrides::default()
    };
    assert!(load(&later, &ov).unwrap_err().contains("80.0 times"));
    assert!(
        e.contains("80.0 times") && e.contains("from 1ms") && e.contains("40 UDP flows"),
        "{e}"
    );
    // 31 flows (62 times) and responses of 1460 B + 20 B on the wire at 500,000/s
    // (5.92 Gbit/s, 0.592 times): 62.592 times, under 64; 32 flows and the same responses
    // 64.592 times.
    let rr = |flows: u32| {
        text(
            "duration: 1ms",
            &[
                udp("u", flows, ""),
                "{name: kv, kind: request-response, rate: 500000/s, size: 1460b}".to_string(),
            ],
        )
    };
    let sc = load(&rr(31), &Overrides::default()).unwrap();
    assert!(
        (sc.offered_load - 62.592).abs() < 1e-9,
        "{}",
        sc.offered_load
    );
    let e = load(&rr(32), &Overrides::default()).unwrap_err();
    assert!(
        e.contains("64.6 times") && e.contains("t/kv: responses, 0.6 times the link"),
        "{e}"
    );
}

/// A UDP flow costs a timed event and a packet written per tick, sent or not: the run's
/// events follow the offered load, flows × ticks, which is why the load is capped. With the
/// cap raised, the event budget stops the run, and the error names the budget, where the
/// run was and how to raise it; a budget large enough lets it finish.
#[test]
fn a_run_stops_at_its_event_budget() {
    assert_eq!(DEFAULT_MAX_EVENTS, 1 << 28);
    let events = |flows: u32| {
        let sc = load(
            &text(
                "duration: 100us\nlimits: {max_offered_load: 1000}",
                &[udp("u", flows, "")],
            ),
            &Overrides::default(),
        )
        .unwrap();
        let runs = weft_sim::try_run_all(&sc, &[], &mut |_| {}).unwrap();
        runs[0].events
    };
    // A tick every 1500 B × 8 / 20 Gbit/s = 600 ns: 167 per flow in 100 µs, each a timed
    // event, and a packet written unless the flow's socket is full.
    let (e10, e40) = (events(10), events(40));
    eprintln!("events: 10 flows {e10}, 40 flows {e40}");
    assert!(e10 >= 10 * 167, "{e10}");
    assert!(e40 >= 40 * 167, "{e40}");
    // Linear in the flows: 4 times the flows, 4 times the events, give or take the
    // instants the link visits (the same in both).
    let ratio = e40 as f64 / e10 as f64;
    assert!((3.5..=4.5).contains(&ratio), "{e10} → {e40}: {ratio}");

    let budget = 20_000;
    let t = text(
        &format!("duration: 1ms\nlimits: {{max_offered_load: 1000, max_events: {budget}}}"),
        &[udp("u", 40, "")],
    );
    let sc = load(&t, &Overrides::default()).unwrap();
    assert_eq!(sc.max_events, budget);
    let mut last = None;
    let e = weft_sim::try_run_all(&sc, &[], &mut |p| last = Some(p)).unwrap_err();
    // Checked after every event: the run stops at the first past the budget, a tick and
    // the packet it writes at most here.
    assert!((budget + 1..=budget + 2).contains(&e.events), "{e:?}");
    assert_eq!(e.model, NicKind::Loom);
    assert!(e.at_ps > 0 && e.at_ps < e.duration_ps, "{e:?}");
    let m = e.to_string();
    assert!(!m.contains("  "), "{m}");
    for want in [
        "b.yaml: loom: the run reached its budget of 20000 events",
        "(`limits: {max_events}` at b.yaml:2:",
        "of 1ms simulated",
        "--max-events N",
        "limits: {max_events: N}",
    ] {
        assert!(m.contains(want), "{want:?} not in: {m}");
    }
    // The panicking form says the same.
    let r = std::panic::catch_unwind(|| weft_sim::run_all(&sc, &[], &mut |_, _| {}));
    assert!(r.is_err());
    // The command line's budget wins, and is named.
    let ov = Overrides {
        max_events: Some(1000),
        ..Overrides::default()
    };
    let sc = load(&t, &ov).unwrap();
    let e = weft_sim::try_run_all(&sc, &[], &mut |_| {}).unwrap_err();
    assert!((1001..=1002).contains(&e.events), "{e:?}");
    assert!(e.to_string().contains("events (--max-events) at"), "{e}");
    // Enough budget: the run ends, its events within it; progress reports them.
    let ov = Overrides {
        max_events: Some(10_000_000),
        ..Overrides::default()
    };
    let sc = load(&t.replace("duration: 1ms", "duration: 50us"), &ov).unwrap();
    let mut seen = Vec::new();
    let runs = weft_sim::try_run_all(&sc, &[], &mut |p| seen.push(p)).unwrap();
    let last = seen.last().unwrap();
    assert_eq!((last.now_ps, last.events), (sc.duration_ps, runs[0].events));
    assert!(runs[0].events <= 10_000_000);
}

/// A step costs the flows it starts or stops, not every flow its application may have:
/// 20,000 steps between 1 and 2 flows of an application of 200,000 (its last step, after
/// the run, never happens) visited 4 billion flows.
#[test]
fn a_schedule_step_costs_the_flows_it_changes() {
    let steps: Vec<String> = (1..=20_000u64)
        .map(|i| format!("{{at: {}ns, flows: {}}}", i * 40, 1 + i % 2))
        .chain(std::iter::once("{at: 10ms, flows: 200000}".to_string()))
        .collect();
    let app = format!(
        "{{name: u, kind: udp, rate: 1mbit, flows: 1, cores: [0], schedule: [{}]}}",
        steps.join(", ")
    );
    let sc = load(&text("duration: 1ms", &[app]), &Overrides::default()).unwrap();
    assert_eq!(sc.apps[0].max_flows(), 200_000);
    let r = &weft_sim::try_run_all(&sc, &[NicKind::Mq], &mut |_| {}).unwrap()[0];
    // Each start of the second flow sends one packet (the next is 12 ms later), the first
    // flow one at the start: 10,001 packets, sent, dropped or queued.
    let written = r.app_packets[0] + r.app_drops[0] + r.app_queued[0];
    assert_eq!(written, 10_001);
    // Steps, flows started or stopped, ticks, packets written, instants: a few per step.
    assert!(r.events < 200_000, "{} events", r.events);
}

/// A schedule step at or after its application's `stop` started the application's flows
/// again after it had ended. Refused where the step is written (file, line, column),
/// naming the stop and where it is; a step just before the stop loads, and so does a step
/// after the end of the run when no `stop` is written (a warning: it never happens).
#[test]
fn a_schedule_step_at_or_after_stop_is_refused_where_it_is_written() {
    let app = |steps: &str| {
        format!("{{name: u, kind: udp, rate: 1mbit, cores: [0], stop: 2ms, schedule: [{steps}]}}")
    };
    for (steps, step) in [
        ("{at: 1ms, flows: 2}, {at: 3ms, flows: 4}", "at: 3ms"),
        ("{at: 2ms, flows: 4}", "at: 2ms"),
    ] {
        let t = text("duration: 5ms", &[app(steps)]);
        // Line 15 holds the application; columns count from 1.
        let line = t.lines().nth(14).unwrap();
        let column = |s: &str| line.find(s).unwrap() + 1;
        let e = load(&t, &Overrides::default()).unwrap_err();
        for want in [
            format!(
                "b.yaml:15:{}: schedule step to 4 flows at",
                column(step) + 4
            ),
            format!(
                "is at or after u's `stop` (2ms, at b.yaml:15:{})",
                column("stop: ") + 6
            ),
            "would start the application's flows again after it ended".to_string(),
        ] {
            assert!(e.contains(&want), "{want:?} not in: {e}");
        }
    }
    let before = load(
        &text("duration: 5ms", &[app("{at: 1999us, flows: 4}")]),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(before.apps[0].flows_at(1_999_000_000), 4);
    assert_eq!(before.apps[0].flows_at(2_000_000_000), 0);
    let no_stop = "{name: u, kind: udp, rate: 1mbit, cores: [0], schedule: [{at: 9ms, flows: 4}]}";
    let sc = load(
        &text("duration: 5ms", &[no_stop.to_string()]),
        &Overrides::default(),
    )
    .unwrap();
    assert!(
        sc.warnings().iter().any(|w| w.contains("it never happens")),
        "{:?}",
        sc.warnings()
    );
}

/// A request looks its application's flow count up by binary search: 40,000 schedule steps
/// and 100,000 requests once made 4 billion comparisons (and each step's look-back 1.6
/// billion more).
#[test]
fn a_request_does_not_scan_the_schedule() {
    let steps: Vec<String> = (1..=40_000u64)
        .map(|i| format!("{{at: {}ns, flows: {}}}", i * 2_000, 1 + i % 3))
        .collect();
    let app = format!(
        "{{name: kv, kind: request-response, rate: 1000000/s, size: 100b, cores: [0], \
         schedule: [{}]}}",
        steps.join(", ")
    );
    let sc = load(&text("duration: 100ms", &[app]), &Overrides::default()).unwrap();
    let r = &weft_sim::try_run_all(&sc, &[NicKind::Mq], &mut |_| {}).unwrap()[0];
    // A million a second for 100 ms.
    let issued = r.requests_issued[0];
    assert!((98_000..=102_000).contains(&issued), "{issued}");
    assert!(r.events < 1_000_000, "{} events", r.events);
}

/// Windows times applications are bounded: 50 applications (a 3.5 KB scenario) in windows
/// of 1 µs for 1 s asked for 50 million throughput counters a model (3.8 GB of memory, a
/// 1.4 GB report), within the 1,000,000 windows allowed. Refused when loading, naming the
/// key to lengthen, and so is a `--duration` or `set_duration` that would make as many.
#[test]
fn windows_times_applications_are_bounded() {
    assert_eq!(MAX_WINDOW_CELLS, 1 << 22);
    let apps: Vec<String> = (0..50)
        .map(|i| format!("{{name: a{i}, kind: udp, rate: 1kbit}}"))
        .collect();
    let t = text("duration: 1s\nwindow: 1us\nlatency_window: 1ms", &apps);
    let e = load(&t, &Overrides::default()).unwrap_err();
    for want in [
        "b.yaml:2:9: 1us: a duration of",
        "makes 1000000 windows of 50 applications, 50000000 counters; at most 4194304",
        "timeseries.csv",
        "give a longer `window`",
    ] {
        assert!(e.contains(want), "{want:?} not in: {e}");
    }
    // 80,000 windows of 50 applications: 4,000,000 counters, within.
    let mut sc = load(
        &t.replace("window: 1us", "window: 12500ns"),
        &Overrides::default(),
    )
    .unwrap();
    // The same rule for a longer run asked afterwards.
    let e = sc.set_duration(2_000_000_000_000).unwrap_err();
    assert!(e.contains("8000000 counters"), "{e}");
    assert_eq!(sc.duration_ps, 1_000_000_000_000);
    let ov = Overrides {
        duration_ps: Some(2_000_000_000_000),
        ..Overrides::default()
    };
    let e = load(&t.replace("window: 1us", "window: 12500ns"), &ov).unwrap_err();
    assert!(
        e.starts_with("--duration: ") && e.contains("8000000 counters"),
        "{e}"
    );
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-sim-bounds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn refusal(path: &Path) -> String {
    match weft_sim::load(path, &Overrides::default()) {
        Err(e @ ScenarioError::NotRead { .. }) => e.to_string(),
        r => panic!("{}: {:?}", path.display(), r.map(|s| s.name)),
    }
}

/// A scenario is read from a regular file of at most 16 MiB: a FIFO (read whole, it blocked
/// for ever), a device (`/dev/zero` never ends), a directory and a longer file are refused
/// with the file's name and the limit, without being read.
#[test]
fn scenario_files_are_regular_and_capped() {
    assert_eq!(MAX_SCENARIO_FILE_BYTES, 16 << 20);
    let d = tmp("files");
    let fifo = d.join("s.yaml");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(ok.success());
    let m = refusal(&fifo);
    assert!(
        m.starts_with(&format!(
            "{}: it is a FIFO, not a regular file",
            fifo.display()
        )) && m.contains("at most 16mb (16777216 bytes)"),
        "{m}"
    );
    let m = refusal(Path::new("/dev/zero"));
    assert!(m.contains("/dev/zero: it is a character device"), "{m}");
    assert!(refusal(&d).contains("it is a directory"));
    let long = d.join("long.yaml");
    let f = std::fs::File::create(&long).unwrap();
    f.set_len(MAX_SCENARIO_FILE_BYTES + 1).unwrap();
    let m = refusal(&long);
    assert!(
        m.contains("it holds 16777217 bytes") && m.contains("16mb"),
        "{m}"
    );
    // Not UTF-8: the place of the first byte that is not.
    let bad = d.join("bad.yaml");
    std::fs::write(&bad, b"duration: 1ms\nname: x\xff\n").unwrap();
    let e = weft_sim::load(&bad, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "{}:2:8: byte 0xff at offset 21 is not UTF-8",
            bad.display()
        )),
        "{e}"
    );
    // A missing file is the system's refusal, named.
    let e = weft_sim::load(&d.join("none.yaml"), &Overrides::default()).unwrap_err();
    assert!(matches!(e, ScenarioError::Io { .. }), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A scenario's `policy:` goes through the policy reader, which refuses what is not a
/// regular file (and caps its size: weft-core's `MAX_POLICY_FILE_BYTES`).
#[test]
fn a_policy_file_is_read_capped_too() {
    let d = tmp("policy");
    let fifo = d.join("p.yaml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (policy, kind) in [("p.yaml", "a FIFO"), ("/dev/zero", "a character device")] {
        let t = text("duration: 1ms", &[udp("u", 1, "")]);
        let start = t.find("policy_inline").unwrap();
        let end = t.find("tenants:").unwrap();
        let t = format!("{}policy: {policy}\n{}", &t[..start], &t[end..]);
        let e = weft_sim::load_str(&d.join("s.yaml"), &t, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(kind) && e.contains("not a regular file"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Every shipped scenario is within the default limits, with room: its file under the
/// size cap, its windows × applications under theirs, its offered load under the default
/// cap (the most, senic-fallback's, 12 times). (Their runs' events are in
/// docs/reproduction.md: at most 3.3 million, under the budget of 2^28.)
#[test]
fn shipped_scenarios_are_within_the_default_limits() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
    let mut n = 0;
    let mut most: f64 = 0.0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("yaml") {
            continue;
        }
        assert!(std::fs::metadata(&p).unwrap().len() <= MAX_SCENARIO_FILE_BYTES / 64);
        let sc = weft_sim::load(&p, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sc.max_events, DEFAULT_MAX_EVENTS);
        let cells = sc.duration_ps.div_ceil(sc.window_ps) * sc.apps.len() as u64;
        assert!(cells <= MAX_WINDOW_CELLS / 64, "{}: {cells}", p.display());
        most = most.max(sc.offered_load);
        n += 1;
    }
    assert!(n >= 20, "{n} scenarios");
    assert!(
        most * 4.0 <= DEFAULT_MAX_TOTAL_OFFERED_LOAD as f64,
        "{most}"
    );
}
