//! Axes and links: round ticks and tops, decades, the logarithmic axis's floor, URL
//! segments.

use super::pages::url_segment;
use super::svg::axes::{decade_label, decades, nice_top, ticks};
use super::svg::{chart, Axes, Series};

/// A report's x axis is the run's with round ticks: 0, 0.5, 1, 1.5 for 1.8 s (the
/// charts read 0, 0.449, 0.898, 1.35, 1.8).
#[test]
fn ticks_are_round() {
    assert_eq!(ticks(1.8), [0.0, 0.5, 1.0, 1.5]);
    assert_eq!(ticks(0.304), [0.0, 0.1, 0.2, 0.3]);
    assert_eq!(ticks(3.04), [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(ticks(2.89), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);
    assert_eq!(ticks(0.2), [0.0, 0.05, 0.1, 0.15, 0.2]);
    assert_eq!(ticks(0.001), [0.0, 0.00025, 0.0005, 0.00075, 0.001]);
    for max in [3e-12, 0.7, 1.0, 7.0, 12.0, 99.0, 1e6, 9.2e6] {
        let t = ticks(max);
        assert!((4..=7).contains(&t.len()), "{max}: {t:?}");
        assert!(t[t.len() - 1] <= max * (1.0 + 1e-9), "{max}: {t:?}");
    }
    assert_eq!(ticks(0.0), [0.0]);
}

/// A linear axis's top is a round step's multiple at or above the value, its ticks
/// every step: 12.5 by 2.5 for 10.5 (a 10 Gbit/s link with 5 % room), 8 by 2 for 7.4
/// (where the ticks of 8 alone would be 0, 2.5, 5, 7.5 and leave the top unlabelled).
#[test]
fn axis_tops_are_round_multiples_of_their_step() {
    assert_eq!(nice_top(10.5), (12.5, 2.5));
    assert_eq!(nice_top(42.0), (50.0, 10.0));
    assert_eq!(nice_top(7.4), (8.0, 2.0));
    assert_eq!(nice_top(10.0), (10.0, 2.5));
    assert_eq!(nice_top(0.0105), (0.0125, 0.0025));
    assert_eq!(nice_top(0.0), (1.0, 0.25));
    for v in [0.003, 0.7, 1.0, 3.3, 9.99, 12.0, 99.0, 1e6, 9.2e6] {
        let (top, step) = nice_top(v);
        let n = top / step;
        assert!(
            top >= v && (n - n.round()).abs() < 1e-6,
            "{v}: {top} {step}"
        );
        assert!((3.0..=8.0).contains(&n.round()), "{v}: {top} by {step}");
    }
}

/// A directory name links as itself where it can, percent-encoded where it cannot.
#[test]
fn url_segments_are_encoded() {
    assert_eq!(url_segment("loom-fig9"), "loom-fig9");
    assert_eq!(url_segment("a#b%c?d"), "a%23b%25c%3Fd");
    assert_eq!(url_segment("é"), "%C3%A9");
}

#[test]
fn decades_cover_the_positive_values() {
    assert_eq!(decades([0.42, 5.0, 680.0].into_iter()), (-1, 3));
    assert_eq!(decades([10.0, 100.0].into_iter()), (1, 2));
    assert_eq!(decades([5.0].into_iter()), (0, 1));
    assert_eq!(decades([0.001, 1000.0].into_iter()), (-3, 3));
    assert_eq!(decades([0.0, -1.0, f64::NAN].into_iter()), (0, 1));
    assert_eq!(decade_label(3), "1000");
    assert_eq!(decade_label(0), "1");
    assert_eq!(decade_label(-2), "0.01");
}

/// A point at or below 0 has no place on a logarithmic axis: it is drawn on the floor,
/// and a note under the legend says how many are.
#[test]
fn log_axis_puts_zero_on_its_floor_and_says_so() {
    let one = |points: Vec<(f64, f64)>| {
        let s = [Series {
            name: "m".into(),
            points,
        }];
        let ax = Axes {
            xmax: Some(3.0),
            log_y: true,
            ..Axes::default()
        };
        chart("t", "x", "µs", &s, &ax)
    };
    let svg = one(vec![(0.5, 0.0), (1.5, 20.0), (2.5, 300.0)]);
    assert!(
        svg.contains(">1 point \u{2264} 0 drawn</text>")
            && svg.contains(">on the axis floor</text>"),
        "{svg}"
    );
    // 10 to 1000, the zero on the floor (y 260), 20 log10(2) of a decade (116 px) above 10.
    assert!(
        svg.contains(r#"<path d="M118.3,260.0 L235.0,225.1 L351.7,88.7""#),
        "{svg}"
    );
    for l in [
        ">10</text>",
        ">100</text>",
        ">1000</text>",
        ">µs (log scale)<",
    ] {
        assert!(svg.contains(l), "{l}: {svg}");
    }
    assert!(!svg.contains(r#"text-anchor="end">1</text>"#), "{svg}");
    let svg = one(vec![(0.5, 2.0), (1.5, 20.0)]);
    assert!(!svg.contains("axis floor"), "{svg}");
}

/// Lines that coincide throughout are named in a note, with their level when they are
/// flat (not here: they rise), wrapped to the legend's column; lines that do not are not.
#[test]
fn marked_charts_name_the_lines_that_coincide() {
    let rising = |name: &str, k: f64| Series {
        name: name.into(),
        points: (0..10).map(|w| (w as f64, k * w as f64)).collect(),
    };
    let s = [
        rising("alpha", 1.0),
        rising("beta", 1.0),
        rising("d", 2.0),
        rising("gamma", 1.0),
    ];
    let ax = Axes {
        mark_lines: true,
        ..Axes::default()
    };
    let svg = chart("t", "x", "y", &s, &ax);
    for line in [">alpha, beta and</text>", ">gamma coincide</text>"] {
        assert!(svg.contains(line), "{line}: {svg}");
    }
    assert!(
        !svg.contains(" at ") && !svg.contains("d coincide"),
        "{svg}"
    );
}
