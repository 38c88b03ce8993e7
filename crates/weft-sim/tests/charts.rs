//! The report's SVG charts as a reader sees them: latency on a logarithmic axis, legends
//! that fit, one x axis (the run's) with round ticks for every chart of a report, and a
//! shorter last window that does not read as a drop. The geometry is report/svg.rs's: a
//! 520 × 300 chart whose plot spans x 60..410 and y 28..260.

use std::path::{Path, PathBuf};

use weft_sim::nic::NicKind;
use weft_sim::report::{self, Series};

const PLOT_LEFT: f64 = 60.0;
const PLOT_WIDTH: f64 = 350.0;
const PLOT_BOTTOM: f64 = 260.0;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios")
}

/// A scenario from the examples, shortened to `duration_ps`.
fn example(name: &str, duration_ps: u64) -> weft_sim::Scenario {
    let mut sc =
        weft_sim::load(&scenarios_dir().join(name), &Default::default()).expect("scenario loads");
    sc.set_duration(duration_ps).expect("duration");
    sc
}

/// Two tenants, A (bulk) and B (bulk and a request/response application), under `head`.
fn two_tenants(head: &str) -> weft_sim::Scenario {
    let text = format!(
        "{head}policy_inline: |\n  weft: 1\n  nodes:\n    - {{name: r, type: wfq}}\n\
         \x20   - {{name: a, type: leaf, parent: r, match: {{tenant: 1}}}}\n\
         \x20   - {{name: b, type: leaf, parent: r, match: {{tenant: 2}}}}\ntenants:\n\
         \x20 - {{name: A, meta: {{tenant: 1}}, apps: [{{name: bulk, kind: bulk}}]}}\n\
         \x20 - {{name: B, meta: {{tenant: 2}}, apps: [{{name: bulk, kind: bulk}}, \
         {{name: kv, kind: request-response, rate: 100000/s}}]}}\n"
    );
    weft_sim::load_str(Path::new("v.yaml"), &text, &Default::default()).expect("loads")
}

/// Writes the report of `sc` run on `models` into a fresh scratch directory.
fn report(name: &str, sc: &weft_sim::Scenario, models: &[NicKind]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-charts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let runs = weft_sim::run_all(sc, models, &mut |_, _| {});
    report::write(&dir, sc, &runs).unwrap();
    dir
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

/// The value of attribute `name` in the element text `el`.
fn attr<'a>(el: &'a str, name: &str) -> Option<&'a str> {
    let i = el.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&el[i..i + el[i..].find('"')?])
}

/// Every `<text>` element: its attributes' text and its content.
fn texts(svg: &str) -> Vec<(&str, &str)> {
    svg.split("<text")
        .skip(1)
        .filter_map(|s| {
            let (head, rest) = s.split_once('>')?;
            Some((head, rest.split_once("</text>")?.0))
        })
        .collect()
}

/// The x axis's labels, left to right (centred under the plot, 14 px below it).
fn x_labels(svg: &str) -> Vec<(f64, String)> {
    texts(svg)
        .into_iter()
        .filter(|(h, _)| attr(h, "y") == Some("274.0") && h.contains("middle"))
        .map(|(h, c)| (attr(h, "x").unwrap().parse().unwrap(), c.to_string()))
        .collect()
}

/// The y axis's labels, bottom to top (right-aligned left of the plot).
fn y_labels(svg: &str) -> Vec<(f64, String)> {
    let mut v: Vec<(f64, String)> = texts(svg)
        .into_iter()
        .filter(|(h, _)| attr(h, "x") == Some("56.0") && h.contains(r#"text-anchor="end""#))
        .map(|(h, c)| {
            (
                attr(h, "y").unwrap().parse::<f64>().unwrap() - 4.0,
                c.to_string(),
            )
        })
        .collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
    v
}

/// The drawn lines (paths without fill), each as its points.
fn lines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<path ")
        .skip(1)
        .filter(|el| el.contains(r#"fill="none""#))
        .map(|el| {
            attr(&format!(" {el}"), "d")
                .unwrap()
                .split(['M', 'L', ' '])
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

/// Loom Fig. 10's point is that the models' latencies differ by orders of magnitude: on a
/// linear axis the low ones lay flat on zero under the high ones (the hierarchy: loom's
/// 8 µs under mq's 100 µs and more). latency.svg's y axis is logarithmic, ticks at whole
/// decades labelled plainly, the range the data's; throughput and Jain stay linear.
#[test]
fn latency_chart_is_logarithmic_in_decades() {
    let sc = example("hierarchy.yaml", 20_000_000_000);
    let dir = report("log", &sc, &[NicKind::Mq, NicKind::Loom]);
    let svg = read(&dir, "latency.svg");
    assert!(svg.contains(">µs (log scale)</text>"), "{svg}");
    let labels: Vec<String> = y_labels(&svg).into_iter().map(|l| l.1).collect();
    assert!(labels.len() >= 3, "{labels:?}");
    // 1, 10, 100 ... written out (0.1, 0.01 below 1).
    let plain = |l: &str| {
        l == "1"
            || l.strip_prefix('1')
                .is_some_and(|z| z.chars().all(|c| c == '0'))
            || l.strip_prefix("0.")
                .is_some_and(|z| z.ends_with('1') && z[..z.len() - 1].chars().all(|c| c == '0'))
    };
    for w in labels.windows(2) {
        assert!(plain(&w[0]) && plain(&w[1]), "{labels:?}");
        let (a, b): (f64, f64) = (w[0].parse().unwrap(), w[1].parse().unwrap());
        assert!((b / a - 10.0).abs() < 1e-9, "{labels:?}");
    }
    // Equal steps per decade.
    let ys: Vec<f64> = y_labels(&svg).into_iter().map(|l| l.0).collect();
    let step = ys[0] - ys[1];
    assert!(
        ys.windows(2).all(|w| (w[0] - w[1] - step).abs() < 0.15),
        "{ys:?}"
    );
    // The lines: mq's above loom's by at least a decade, loom's off the floor.
    let [mq, loom] = &lines(&svg)[..] else {
        panic!("two lines: {svg}")
    };
    let mean = |l: &Vec<(f64, f64)>| l.iter().map(|p| p.1).sum::<f64>() / l.len() as f64;
    assert!(mean(loom) - mean(mq) > step, "{svg}");
    assert!(loom.iter().all(|p| p.1 < PLOT_BOTTOM - 10.0), "{svg}");
    // Nothing was at or below 0.
    assert!(!svg.contains("on the axis floor"), "{svg}");
    for f in ["jain.svg", "throughput-mq.svg"] {
        let svg = read(&dir, f);
        assert!(!svg.contains("log scale"), "{f}: {svg}");
        assert_eq!(y_labels(&svg)[0].1, "0", "{f}: {svg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A chart of 1000 series drew 1000 lines and 1000 legend entries (443 KB; the entries cut
/// off at the chart's bottom after 17). It draws the 32 series with the largest totals,
/// names what fits and says how many more there are and where they are.
#[test]
fn legends_fit_and_say_what_they_leave_out() {
    let series: Vec<Series> = (0..1000)
        .map(|i| Series {
            name: format!("c{i}"),
            // c500..c531 carry the most.
            points: (0..20)
                .map(|w| (w as f64, if (500..532).contains(&i) { 2.0 } else { 1.0 }))
                .collect(),
        })
        .collect();
    let svg = report::line_chart("many", "x", "y", &series, None);
    assert!(svg.len() < 50_000, "{} bytes", svg.len());
    assert_eq!(lines(&svg).len(), 32, "{svg}");
    let names: Vec<&str> = texts(&svg)
        .into_iter()
        .map(|t| t.1)
        .filter(|c| c.starts_with('c'))
        .collect();
    assert!((12..=16).contains(&names.len()), "{names:?}");
    // The drawn ones, in order.
    assert_eq!(names[0], "c500");
    assert_eq!(names[names.len() - 1], format!("c{}", 499 + names.len()));
    assert!(
        svg.contains(&format!(">+ {} more</text>", 1000 - names.len())),
        "{svg}"
    );
    assert!(svg.contains(">968 not drawn</text>") && svg.contains(">(32 largest are)</text>"));
    // Every text within the chart.
    for (h, c) in texts(&svg) {
        let y: f64 = attr(h, "y").unwrap().parse().unwrap();
        assert!(y <= 296.0, "{c} at y {y}");
    }
    // 20 series: all drawn, 16 named at most, the rest counted.
    let svg = report::line_chart("some", "x", "y", &series[..20], None);
    assert_eq!(lines(&svg).len(), 20);
    let named = texts(&svg).iter().filter(|t| t.1.starts_with('c')).count();
    assert!((14..=16).contains(&named), "{svg}");
    assert!(
        svg.contains(&format!(">+ {} more</text>", 20 - named)),
        "{svg}"
    );
    assert!(!svg.contains("not drawn"), "{svg}");
    // A report names the file with every series: SENIC Table 3's 100 classes.
    let sc = example("senic-table3-n100.yaml", 30_000_000_000);
    let dir = report("legend", &sc, &[NicKind::Senic]);
    let svg = read(&dir, "throughput-senic.svg");
    assert_eq!(lines(&svg).len(), 32, "{svg}");
    assert!(
        svg.contains(" more (see</text>") && svg.contains(">timeseries.csv)</text>"),
        "{svg}"
    );
    assert!(svg.contains(">68 not drawn</text>"), "{svg}");
    assert!(svg.len() < 20_000, "{} bytes", svg.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The x axis ended at the last window's start, a different one per chart (Jain's at the
/// last window with two backlogged tenants), with odd ticks (0.449, 0.898, 1.35). Every
/// chart of a report runs over the run's duration with round ticks, each window's point at
/// its middle (the axis label says so).
#[test]
fn charts_share_the_runs_x_axis_with_round_ticks() {
    // 1.8 ms in windows of 0.1 ms, latency windows of 0.5 ms.
    let sc = two_tenants("duration: 1800us\nwindow: 100us\nlatency_window: 500us\n");
    let dir = report("xaxis", &sc, &[NicKind::Loom]);
    let ticks = ["0", "0.0005", "0.001", "0.0015"];
    for f in ["throughput-loom.svg", "latency.svg", "jain.svg"] {
        let svg = read(&dir, f);
        let labels = x_labels(&svg);
        assert_eq!(
            labels.iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
            ticks,
            "{f}: {svg}"
        );
        // At 0, 0.0005 / 0.0018 of the plot's width, ...
        for (x, v) in &labels {
            let want = PLOT_LEFT + PLOT_WIDTH * v.parse::<f64>().unwrap() / 0.0018;
            assert!((x - want).abs() < 0.06, "{f}: {v} at {x}, not {want}");
        }
        assert!(
            svg.contains(">time (s, simulated; window midpoints)</text>"),
            "{f}: {svg}"
        );
        let x = |t: f64| PLOT_LEFT + PLOT_WIDTH * t / 0.0018;
        let (first, last, n) = match f {
            // The last latency window is 0.3 ms: 1.5 to 1.8 ms.
            "latency.svg" => (x(0.00025), x(0.00165), 4),
            _ => (x(0.00005), x(0.00175), 18),
        };
        for l in lines(&svg) {
            assert_eq!(l.len(), n, "{f}: {svg}");
            assert!((l[0].0 - first).abs() < 0.06, "{f}: {l:?}");
            assert!((l[n - 1].0 - last).abs() < 0.06, "{f}: {l:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run that is not a whole number of windows ends in a shorter window: its bytes over a
/// whole window's time read as a drop in throughput (SENIC Table 3, N = 100: 304 ms in
/// windows of 15 ms, the last a third of the others). The chart divides by the window's
/// length within the run and puts the point at its middle; timeseries.csv keeps the bytes.
#[test]
fn a_shorter_last_window_is_no_drop() {
    // 3.5 ms in windows of 1 ms: the last is 0.5 ms. The two bulk tenants keep the link busy.
    let sc = two_tenants("duration: 3500us\nwindow: 1ms\nnics: [loom]\n");
    let dir = report("partial", &sc, &[NicKind::Loom]);
    let csv = read(&dir, "timeseries.csv");
    let bytes = |start: &str| -> u64 {
        csv.lines()
            .filter(|l| l.starts_with(&format!("{start},loom,")))
            .map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let (full, last) = (bytes("0.002"), bytes("0.003"));
    assert!(
        (last as f64 / full as f64 - 0.5).abs() < 0.05,
        "the CSV has the window's bytes: {full} then {last}"
    );
    let svg = read(&dir, "throughput-loom.svg");
    // The tenants' sum per window: the link rate in every window, the last one too.
    let ls = lines(&svg);
    let height = |w: usize| ls.iter().map(|l| PLOT_BOTTOM - l[w].1).sum::<f64>();
    assert!(ls.iter().all(|l| l.len() == 4), "{svg}");
    let (h2, h3) = (height(2), height(3));
    assert!(
        h2 > 100.0 && (h3 / h2 - 1.0).abs() < 0.05,
        "{h2} then {h3}: {svg}"
    );
    let x = PLOT_LEFT + PLOT_WIDTH * 3.25 / 3.5;
    assert!((ls[0][3].0 - x).abs() < 0.06, "{:?} (want x {x})", ls[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The y axis's top label and unit (the rotated text left of the plot).
fn y_unit(svg: &str) -> &str {
    texts(svg)
        .into_iter()
        .find(|(h, _)| h.contains("rotate(-90"))
        .map(|t| t.1)
        .unwrap()
}

/// Loom Fig. 11 plots the jobs of tenant T1 (J0, J1, J2): the report drew throughput per
/// tenant only, T1 one line, so the figure's point (J1 + J2 held to the shared limit, J0 the
/// rest) was not to be seen. A tenant with several applications gets a chart per
/// application and model, `tenant/app` in the legend, shown in index.html; a scenario whose
/// tenants have one application each does not.
#[test]
fn per_application_throughput_is_charted_when_a_tenant_has_several() {
    let sc = example("loom-fig11.yaml", 12_000_000_000);
    let dir = report("apps", &sc, &[NicKind::Mq, NicKind::Loom]);
    for m in ["mq", "loom"] {
        let svg = read(&dir, &format!("throughput-apps-{m}.svg"));
        assert!(
            svg.contains(&format!(">{m}: throughput per application</text>")),
            "{svg}"
        );
        for app in ["T1/J0", "T1/J1", "T1/J2", "T2/bulk", "T3/bulk"] {
            assert!(svg.contains(&format!(">{app}</text>")), "{app}: {svg}");
        }
        assert_eq!(lines(&svg).len(), 5, "{svg}");
    }
    // loom holds J1 + J2 to 10 Gbit/s together: each line near 5 of the 40 Gbit/s.
    let svg = read(&dir, "throughput-apps-loom.svg");
    let ls = lines(&svg);
    let labels = y_labels(&svg);
    let per_px: f64 = {
        let (y0, v0) = (&labels[0].0, 0.0);
        let (y1, v1) = (&labels[1].0, labels[1].1.parse::<f64>().unwrap());
        (v1 - v0) / (y0 - y1)
    };
    let rate = |l: &Vec<(f64, f64)>| (PLOT_BOTTOM - l[3].1) * per_px;
    assert!(
        (rate(&ls[1]) - 5.0).abs() < 0.5 && (rate(&ls[2]) - 5.0).abs() < 0.5,
        "{svg}"
    );
    assert!(rate(&ls[0]) > 25.0, "{svg}");
    let html = read(&dir, "index.html");
    assert!(
        html.contains("<h2>Throughput per application</h2>")
            && html.contains(r#"<img src="throughput-apps-loom.svg""#),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    // One application per tenant: the tenants' chart says it all.
    let sc = example("loom-fig3.yaml", 2_000_000_000);
    let dir = report("apps1", &sc, &[NicKind::Loom]);
    assert!(!dir.join("throughput-apps-loom.svg").exists());
    assert!(!read(&dir, "index.html").contains("per application"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The throughput axis ran to the link rate whatever the rates: classes of 10 Mbit/s on a
/// 10 Gbit/s link (SENIC Table 3, N = 100) lay flat on the floor, a pixel high. The axis
/// fits the rates drawn (5 % above the largest, round ticks, a unit that reads) and marks
/// the link rate with a dashed line when the rates come near it; otherwise a note says it
/// is above the axis.
#[test]
fn throughput_axis_fits_the_rates_and_marks_the_link() {
    let sc = example("senic-table3-n100.yaml", 30_000_000_000);
    let dir = report("axis-low", &sc, &[NicKind::Senic]);
    let svg = read(&dir, "throughput-senic.svg");
    assert_eq!(y_unit(&svg), "Mbit/s", "{svg}");
    let labels: Vec<f64> = y_labels(&svg)
        .iter()
        .map(|l| l.1.parse().unwrap())
        .collect();
    // Each class at 1.5 × 10 Mbit/s offered, 10 Mbit/s sent: the axis to 12.5 or 15.
    let top = labels[labels.len() - 1];
    assert!((10.0..=20.0).contains(&top), "{labels:?}");
    // Round steps from 0.
    let step = labels[1];
    assert!([1.0, 2.0, 2.5, 5.0].contains(&step), "{labels:?}");
    assert!(labels
        .iter()
        .enumerate()
        .all(|(i, v)| (v - i as f64 * step).abs() < 1e-9));
    // The lines are well off the floor: more than half the plot's height up.
    let plot_h = PLOT_BOTTOM - 28.0;
    for l in lines(&svg) {
        let mid = l[l.len() / 2].1;
        assert!(PLOT_BOTTOM - mid > plot_h / 2.0, "{l:?}");
    }
    assert!(
        svg.contains(">link 10 Gbit/s:</text>") && svg.contains(">above the axis</text>"),
        "{svg}"
    );
    assert!(!svg.contains(r#"stroke-dasharray="4 4""#), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
    // Two tenants sharing a 10 Gbit/s link, each below half of it: the axis fits them. Each
    // gets half the wire time, so its frames carry 1500/1520 of 5 Gbit/s (4.93); windows of
    // 500 us keep a window's fair-queueing lead (a frame or so) under that margin.
    let sc = two_tenants("duration: 2ms\nwindow: 500us\n");
    let dir = report("axis-share", &sc, &[NicKind::Loom]);
    let svg = read(&dir, "throughput-loom.svg");
    let labels: Vec<String> = y_labels(&svg).into_iter().map(|l| l.1).collect();
    assert_eq!(labels, ["0", "1", "2", "3", "4", "5", "6"], "{svg}");
    assert!(svg.contains(">above the axis</text>"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
    // Loom Fig. 11's T1 alone fills most of the 40 Gbit/s link: the axis runs past it (to
    // 50, by 10), a dashed line at 40 labelled.
    let sc = example("loom-fig11.yaml", 4_000_000_000);
    let dir = report("axis-link", &sc, &[NicKind::Loom]);
    let svg = read(&dir, "throughput-loom.svg");
    assert_eq!(y_unit(&svg), "Gbit/s", "{svg}");
    let labels: Vec<String> = y_labels(&svg).into_iter().map(|l| l.1).collect();
    assert_eq!(labels, ["0", "10", "20", "30", "40", "50"], "{svg}");
    let y40 = y_labels(&svg)[4].0;
    let dashed = svg
        .split("<line ")
        .find(|e| e.contains(r#"stroke-dasharray="4 4""#))
        .unwrap_or_else(|| panic!("no link line: {svg}"));
    let y: f64 = attr(&format!(" {}", dashed.split('>').next().unwrap()), "y1")
        .unwrap()
        .parse()
        .unwrap();
    assert!((y - y40).abs() < 0.11, "link at {y}, 40 at {y40}");
    assert!(svg.contains(">link 40 Gbit/s</text>"), "{svg}");
    assert!(!svg.contains("above the axis"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Colours came from a palette of ten: lines 1 and 11 (and 21, 31) looked the same, in the
/// plot and the legend. Each pass through the palette has its own dash pattern (solid,
/// dashed, dotted, dash-dot), the legend's sample drawn alike.
#[test]
fn lines_past_the_palette_differ_in_dash_and_legend() {
    let series: Vec<Series> = (0..32)
        .map(|i| Series {
            name: format!("s{i}"),
            points: (0..5).map(|w| (w as f64, 1.0 + i as f64)).collect(),
        })
        .collect();
    let svg = report::line_chart("many", "x", "y", &series, None);
    // The attributes of an element split off at its start.
    let style = |el: &str| {
        let el = format!(" {}", el.split('>').next().unwrap());
        (
            attr(&el, "stroke").unwrap().to_string(),
            attr(&el, "stroke-dasharray").map(str::to_string),
        )
    };
    let paths: Vec<(String, Option<String>)> = svg
        .split("<path ")
        .skip(1)
        .filter(|e| e.contains(r#"fill="none""#))
        .map(style)
        .collect();
    assert_eq!(paths.len(), 32);
    let mut distinct = paths.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 32, "{paths:?}");
    assert_eq!(paths[0].1, None);
    assert_eq!((&paths[10].0, paths[10].1.is_some()), (&paths[0].0, true));
    // The legend's samples (thick lines right of the plot) match their lines.
    let legend: Vec<(String, Option<String>)> = svg
        .split("<line ")
        .skip(1)
        .filter(|e| e.contains(r#"stroke-width="3""#))
        .map(style)
        .collect();
    assert!(legend.len() >= 12, "{legend:?}");
    assert_eq!(legend[..], paths[..legend.len()]);
}

/// A model at exactly 1 in every window (the policy held) was drawn on the plot's top
/// edge, under the frame, and could not be seen. Jain's axis leaves room above 1: the line
/// of a constant 1.0 lies strictly inside the plot, below its top and labelled 1 on the
/// axis; a second model below it is drawn as before.
#[test]
fn a_jain_line_at_one_is_inside_the_plot() {
    const PLOT_TOP: f64 = 28.0;
    let series = [
        Series {
            name: "loom".into(),
            points: (0..10).map(|w| (w as f64 * 0.1 + 0.05, 1.0)).collect(),
        },
        Series {
            name: "mq".into(),
            points: (0..10).map(|w| (w as f64 * 0.1 + 0.05, 0.5)).collect(),
        },
    ];
    let svg = report::jain_chart(&series, &report::TimeAxis::simulated(1.0));
    let ls = lines(&svg);
    assert_eq!(ls.len(), 2, "{svg}");
    for &(x, y) in &ls[0] {
        assert!(
            x > PLOT_LEFT && x < PLOT_LEFT + PLOT_WIDTH,
            "x {x} outside the plot: {svg}"
        );
        assert!(
            y > PLOT_TOP + 5.0 && y < PLOT_BOTTOM,
            "y {y} of Jain 1.0 not inside the plot (top {PLOT_TOP}): {svg}"
        );
    }
    // 1 at 1/1.05 of the plot's height, where the axis's top label is.
    let one = PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) / report::UNIT_TOP;
    assert!(
        ls[0].iter().all(|p| (p.1 - one).abs() < 0.06),
        "{:?}",
        ls[0]
    );
    let labels = y_labels(&svg);
    assert_eq!(
        labels.iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
        ["0", "0.25", "0.5", "0.75", "1"],
        "{svg}"
    );
    assert!((labels[4].0 - one).abs() < 0.06, "{labels:?}");
    let half = PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) * 0.5 / report::UNIT_TOP;
    assert!(
        ls[1].iter().all(|p| (p.1 - half).abs() < 0.06),
        "{:?}",
        ls[1]
    );
}

/// The markers a chart draws: `(colour, shape, x of its centre, y of its centre)`, shape
/// `circle`, `square`, `diamond` or `triangle` (filled paths, the lines' own are not).
fn markers(svg: &str) -> Vec<(String, &'static str, f64, f64)> {
    let num = |el: &str, a: &str| attr(el, a).unwrap().parse::<f64>().unwrap();
    let mut out = Vec::new();
    for (tag, shape) in [("<circle", "circle"), ("<rect", "square"), ("<path", "")] {
        for el in svg.split(tag).skip(1) {
            let el = format!(" {}", el.split("/>").next().unwrap());
            let colour = match (attr(&el, "fill"), attr(&el, "stroke")) {
                (Some("white"), Some(c)) => c.to_string(),
                (Some(c), _) if c != "none" => c.to_string(),
                _ => continue,
            };
            let (shape, x, y) = match shape {
                "circle" => (shape, num(&el, "cx"), num(&el, "cy")),
                "square" if attr(&el, "width") == Some("6") => {
                    (shape, num(&el, "x") + 3.0, num(&el, "y") + 3.0)
                }
                "square" => continue,
                _ => {
                    let d = attr(&el, "d").unwrap();
                    let first = d[1..].split(' ').next().unwrap();
                    let (x, y) = first.split_once(',').unwrap();
                    let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                    // A diamond starts at its top, a downward triangle at its top left.
                    match d.matches('L').count() {
                        3 => ("diamond", x, y + 4.0),
                        _ => ("triangle", x + 4.0, y + 3.0),
                    }
                }
            };
            out.push((colour, shape, x, y));
        }
    }
    out
}

/// Models at the same index drew as one line: of sq, tonic and loom at 1.0 in Loom Fig. 9,
/// only loom's showed. Every line of a Jain chart carries markers of its own colour and
/// shape, each line in slots of its own along x, so that lines that overlap all show (the
/// legend drawn alike), and a note under the legend names the lines that coincide
/// throughout; the 1.0 line stays strictly inside the plot.
#[test]
fn overlapping_jain_lines_each_show_and_are_named() {
    const PLOT_TOP: f64 = 28.0;
    let at = |name: &str, v: f64| Series {
        name: name.into(),
        points: (0..40).map(|w| (w as f64 * 0.025 + 0.0125, v)).collect(),
    };
    let series = [at("sq", 1.0), at("mq", 0.5), at("loom", 1.0)];
    let svg = report::jain_chart(&series, &report::TimeAxis::simulated(1.0));
    let ls = lines(&svg);
    assert_eq!(ls.len(), 3, "{svg}");
    for &(_, y) in ls[0].iter().chain(&ls[2]) {
        assert!(y > PLOT_TOP + 5.0 && y < PLOT_BOTTOM, "{y}: {svg}");
    }
    let all = markers(&svg);
    let in_plot = |x: f64| x < PLOT_LEFT + PLOT_WIDTH;
    let styles: Vec<(String, &str)> = (0..3)
        .map(|k| {
            let line = format!(" {}", svg.split("<path ").nth(k + 1).unwrap());
            let colour = attr(&line, "stroke").unwrap();
            let mine: Vec<_> = all.iter().filter(|m| m.0 == colour).collect();
            let plotted = mine.iter().filter(|m| in_plot(m.2)).count();
            assert!(plotted >= 3, "line {k}: {mine:?}");
            // And one in the legend, beside its name.
            assert_eq!(mine.len() - plotted, 1, "{mine:?}");
            assert!(mine.iter().all(|m| m.1 == mine[0].1), "{mine:?}");
            (colour.to_string(), mine[0].1)
        })
        .collect();
    let mut shapes: Vec<&str> = styles.iter().map(|s| s.1).collect();
    shapes.sort();
    shapes.dedup();
    assert_eq!(shapes.len(), 3, "{styles:?}");
    // sq's and loom's markers on the shared line never stand on one another.
    let xs = |k: usize| -> Vec<f64> {
        all.iter()
            .filter(|m| m.0 == styles[k].0 && in_plot(m.2))
            .map(|m| m.2)
            .collect()
    };
    for a in xs(0) {
        assert!(
            xs(2).iter().all(|b| (a - b).abs() >= 6.0),
            "{a}: {:?}",
            xs(2)
        );
    }
    let note: Vec<&str> = texts(&svg)
        .into_iter()
        .filter(|(h, _)| h.contains(r##"fill="#555""##))
        .map(|t| t.1)
        .collect();
    assert_eq!(note.join(" "), "sq and loom coincide at 1.0", "{svg}");
    // Lines that part anywhere are not named.
    let mut apart = at("loom", 1.0);
    apart.points[20].1 = 0.9;
    let svg = report::jain_chart(&[at("sq", 1.0), apart], &report::TimeAxis::simulated(1.0));
    assert!(!svg.contains("coincide"), "{svg}");
}

/// Papers give latency as a CDF (TONIC's query completion times): latency-cdf.csv has every
/// application's distribution per model, tidy, a row per histogram bucket, its fraction
/// rising to 1; latency-cdf.svg draws the headline application's per model on a
/// logarithmic x axis in decades (loom's well left of mq's), each line ending at 1
/// inside the plot; index.html shows it and links the file.
#[test]
fn latency_cdf_per_model_in_csv_and_on_a_log_axis() {
    let sc = example("hierarchy.yaml", 20_000_000_000);
    let dir = report("cdf", &sc, &[NicKind::Mq, NicKind::Loom]);
    let csv = read(&dir, "latency-cdf.csv");
    let mut rows = csv.lines();
    assert_eq!(rows.next(), Some("nic,tenant,app,latency_us,fraction"));
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows {
        let f: Vec<&str> = r.split(',').collect();
        assert_eq!(f.len(), 5, "{r}");
        let key = f[..3].join(",");
        let p = (f[3].parse::<f64>().unwrap(), f[4].parse::<f64>().unwrap());
        match curves.last_mut() {
            Some((k, v)) if *k == key => v.push(p),
            _ => curves.push((key, vec![p])),
        }
    }
    let keys: Vec<&str> = curves.iter().map(|c| c.0.as_str()).collect();
    for k in ["mq,A,kv", "mq,A,bulk", "loom,B,kv", "loom,C,bulk"] {
        assert!(keys.contains(&k), "{k}: {keys:?}");
    }
    assert_eq!(keys.len(), 2 * sc.apps.len(), "{keys:?}");
    for (k, c) in &curves {
        assert!(
            c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
            "{k}: {c:?}"
        );
        assert_eq!(c.last().unwrap().1, 1.0, "{k}");
        assert!(c[0].1 > 0.0, "{k}");
    }
    let svg = read(&dir, "latency-cdf.svg");
    assert!(
        svg.contains(">CDF of A/kv&#39;s request latency<")
            || svg.contains(">CDF of A/kv's request latency<"),
        "{svg}"
    );
    assert!(
        svg.contains(">completion time, µs (log scale)</text>"),
        "{svg}"
    );
    let labels: Vec<String> = x_labels(&svg).into_iter().map(|l| l.1).collect();
    assert!(labels.len() >= 2, "{labels:?}");
    for w in labels.windows(2) {
        let (a, b): (f64, f64) = (w[0].parse().unwrap(), w[1].parse().unwrap());
        assert!((b / a - 10.0).abs() < 1e-9, "{labels:?}");
    }
    assert_eq!(
        y_labels(&svg)
            .iter()
            .map(|l| l.1.as_str())
            .collect::<Vec<_>>(),
        ["0", "0.25", "0.5", "0.75", "1"],
        "{svg}"
    );
    let [mq, loom] = &lines(&svg)[..] else {
        panic!("two lines: {svg}")
    };
    let top = PLOT_BOTTOM - (PLOT_BOTTOM - 28.0) / report::UNIT_TOP;
    for l in [mq, loom] {
        // From the floor at the smallest latency, then a point per bucket.
        assert!(
            (l[0].1 - PLOT_BOTTOM).abs() < 0.06 && l[0].0 == l[1].0,
            "{l:?}"
        );
        assert!(
            l[1..]
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1),
            "{l:?}"
        );
        assert!((l.last().unwrap().1 - top).abs() < 0.06, "{l:?}");
        assert!(
            l.iter()
                .all(|p| p.0 >= PLOT_LEFT && p.0 <= PLOT_LEFT + PLOT_WIDTH),
            "{l:?}"
        );
    }
    // The median: loom's most of a decade left of mq's.
    let x_at_half = |l: &Vec<(f64, f64)>| {
        l.iter()
            .find(|p| p.1 <= PLOT_BOTTOM - (PLOT_BOTTOM - 28.0) * 0.5 / report::UNIT_TOP)
            .unwrap()
            .0
    };
    let decade = PLOT_WIDTH / (labels.len() - 1) as f64;
    assert!(x_at_half(mq) - x_at_half(loom) > decade / 2.0, "{svg}");
    let html = read(&dir, "index.html");
    assert!(
        html.contains(r#"<img src="latency-cdf.svg""#)
            && html.contains(r#"href="latency-cdf.csv""#),
        "{html}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A packet delay of 0 (a model without doorbell or DMA latency, the link idle) has no
/// place on a logarithmic axis: it is drawn on the left edge, and a note says so.
#[test]
fn latency_cdf_puts_zero_on_the_left_edge_and_says_so() {
    let sc = example("senic-table3-n1.yaml", 2_000_000_000);
    let dir = report("cdf0", &sc, &[NicKind::Mq]);
    let svg = read(&dir, "latency-cdf.svg");
    assert!(svg.contains(">CDF of c0/udp"), "{svg}");
    assert!(
        svg.contains(">write to wire, µs (log scale)</text>"),
        "{svg}"
    );
    let csv = read(&dir, "latency-cdf.csv");
    assert!(csv.contains("\nmq,c0,udp,0,"), "{csv}");
    assert!(svg.contains(">1 point at x \u{2264} 0<"), "{svg}");
    assert!(svg.contains(">drawn on the left edge<"), "{svg}");
    assert!((lines(&svg)[0][0].0 - PLOT_LEFT).abs() < 0.06, "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scenario that scales the paper's time (`time_scale`) was charted in simulated
/// seconds: Loom Fig. 9's phases at 0.2, 0.4 .. s where the paper has 2, 4 .. s. Its
/// charts' time axes are in paper seconds, the label saying so and what one stands for;
/// the CSV files keep simulated seconds; a scenario without a time scale is unchanged.
#[test]
fn time_axes_show_paper_time_when_the_scenario_scales_it() {
    let sc = two_tenants(
        "time_scale: \"1 paper second = 1 ms simulated\"\nduration: 1800us\nwindow: 100us\n\
         latency_window: 500us\n",
    );
    assert_eq!(
        report::TimeAxis::of(&sc),
        report::TimeAxis {
            label: "time (paper s; 1 paper s = 1 ms simulated; window midpoints)".into(),
            per_simulated_s: 1000.0,
            end: 1.8,
        }
    );
    let dir = report("paper", &sc, &[NicKind::Loom]);
    for f in [
        "throughput-loom.svg",
        "throughput-apps-loom.svg",
        "latency.svg",
        "jain.svg",
    ] {
        let svg = read(&dir, f);
        assert!(
            svg.contains(">time (paper s; 1 paper s = 1 ms simulated; window midpoints)</text>"),
            "{f}: {svg}"
        );
        let labels = x_labels(&svg);
        assert_eq!(
            labels.iter().map(|l| l.1.as_str()).collect::<Vec<_>>(),
            ["0", "0.5", "1", "1.5"],
            "{f}: {svg}"
        );
        // The first window's point at its middle, 0.05 paper seconds (50 µs simulated).
        let first = lines(&svg)[0][0].0;
        let mid = if f == "latency.svg" { 0.25 } else { 0.05 };
        assert!(
            (first - (PLOT_LEFT + PLOT_WIDTH * mid / 1.8)).abs() < 0.06,
            "{f}: {first}"
        );
    }
    // Not time: the CDF's latency axis.
    assert!(!read(&dir, "latency-cdf.svg").contains("paper"));
    let csv = read(&dir, "timeseries.csv");
    assert!(csv.lines().nth(1).unwrap().starts_with("0,loom,"), "{csv}");
    assert!(csv.contains("\n0.0001,loom,"), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);

    let sc = two_tenants("duration: 1800us\n");
    assert_eq!(
        report::TimeAxis::of(&sc),
        report::TimeAxis::simulated(0.0018)
    );
    let sc = two_tenants("time_scale: 1 minute = 1.5 s\nduration: 3s\n");
    let t = report::TimeAxis::of(&sc);
    assert_eq!((t.per_simulated_s, t.end), (40.0, 120.0));
    assert!(t.label.contains("1 paper s = 25 ms simulated"), "{t:?}");
}
