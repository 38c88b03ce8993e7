//! The parser's readings of values: zero and negative times, and key suggestions.

use std::path::Path;

use crate::policy::{compile_str, Algo, LoadOptions, Rule};

/// `default_deadline: 0ms` and `default_slack: 0ms` were accepted while a negative value
/// was refused as "must be greater than zero". Zero is a time these nodes use (`edf`: a
/// packet without a deadline is due at arrival; `lstf`: no slack), so it stays valid and
/// a negative value is refused as negative.
#[test]
fn default_deadline_and_slack_may_be_zero_but_not_negative() {
    for (kind, key) in [("edf", "default_deadline"), ("lstf", "default_slack")] {
        let policy = |value: &str| {
            format!(
                "weft: 1\nnodes:\n  - {{name: r, type: {kind}, {key}: {value}}}\n  \
                 - {{name: a, type: leaf, parent: r}}\n"
            )
        };
        let p = compile_str(Path::new("t.yaml"), &policy("0ms"), &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{key}: 0ms: {}", e.render_plain()));
        let r = p.nodes.iter().find(|n| n.name == "r").expect("node r");
        match r.algo {
            Algo::Edf {
                default_deadline_ps,
            } => assert_eq!(default_deadline_ps, 0),
            Algo::Lstf { default_slack_ps } => assert_eq!(default_slack_ps, 0),
            ref a => panic!("{a:?}"),
        }
        let e = compile_str(
            Path::new("t.yaml"),
            &policy("-1ms"),
            &LoadOptions::default(),
        )
        .err()
        .unwrap_or_else(|| panic!("{key}: -1ms accepted"));
        assert_eq!(e.rules_and_lines(), [(Rule::BadValue, 3)]);
        let m = e.render_plain();
        assert!(
            m.contains(&format!("`{key}`: `-1ms` must not be negative")),
            "{m}"
        );
        assert!(!m.contains("greater than zero"), "{m}");
    }
}

/// A word that extends a known one (`loom.batchsize`) was told of a longer, further key
/// (`loom.batch_timeout`), and one written without its `_` (`latencywindow`) of nothing:
/// a word containing or contained in a known one, or equal to it but for case, `_` and
/// `-`, is suggested first, and plain misspellings still are.
#[test]
fn suggestions_prefer_the_key_a_word_extends_or_respells() {
    use super::suggest;
    let nic = [
        "loom.batch",
        "loom.batch_timeout",
        "loom.pipeline",
        "hw.queue_rate",
    ];
    let top = ["duration", "window", "latency_window", "seed"];
    let host = ["cores", "cpu_per_packet", "cpu_per_doorbell", "segment"];
    for (word, known, want) in [
        ("loom.batchsize", &nic[..], Some("loom.batch")),
        ("loom.batch_size", &nic[..], Some("loom.batch")),
        ("loom.bach", &nic[..], Some("loom.batch")),
        ("loom.pipelines", &nic[..], Some("loom.pipeline")),
        ("hw.queuerate", &nic[..], Some("hw.queue_rate")),
        ("HW.Queue-Rate", &nic[..], Some("hw.queue_rate")),
        ("latencywindow", &top[..], Some("latency_window")),
        ("latency", &top[..], Some("latency_window")),
        ("duraton", &top[..], Some("duration")),
        ("seeds", &top[..], Some("seed")),
        ("cpu", &host[..], Some("cpu_per_packet")),
        (
            "cpu",
            &["mtu", "cpu_per_packet"][..],
            Some("cpu_per_packet"),
        ),
        ("tenat", &["ten", "tenant"][..], Some("tenant")),
        ("segments", &host[..], Some("segment")),
        // Two letters contained in a key are too little to go on.
        ("du", &top[..], None),
        ("colour", &top[..], None),
    ] {
        assert_eq!(suggest(word, known).as_deref(), want, "{word}");
    }
}
