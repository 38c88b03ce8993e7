//! Integers in policies are read exactly over their whole documented range: `cgroup` and the
//! byte sizes go up to 2⁶⁴−1. The YAML layer (`saphyr`) reads a plain integer beyond `i64`
//! as a float, which once refused everything from 2⁶³ up with a rounded number in the message
//! (`found 18446744073709552000`); a value out of range is reported as it was written.

use std::path::Path;

use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{compile_str, Algo, Classification, LoadOptions, Program, Rule};

fn compile(text: &str) -> Result<Program, weft_core::policy::PolicyError> {
    compile_str(Path::new("integers.yaml"), text, &LoadOptions::default())
}

/// The one diagnostic of an invalid policy: (rule, line, rendered message).
fn refusal(text: &str) -> (Rule, usize, String) {
    let e = match compile(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    };
    let found = e.rules_and_lines();
    assert_eq!(found.len(), 1, "{}", e.render_plain());
    (found[0].0, found[0].1, e.render_plain())
}

fn cgroup_policy(cgroup: &str) -> String {
    format!(
        "weft: 1\n\
         nodes:\n  \
           - {{name: root, type: fifo}}\n  \
           - {{name: big, type: leaf, parent: root, match: {{cgroup: {cgroup}}}}}\n  \
           - {{name: rest, type: leaf, parent: root}}\n"
    )
}

fn leaf_named(p: &Program, c: Classification) -> &str {
    match c {
        Classification::Leaf { node, .. } => &p.node(node).name,
        Classification::Unclassified { .. } => "(unclassified)",
    }
}

#[test]
fn the_largest_cgroup_is_matched_exactly() {
    for written in [
        "18446744073709551615",
        "0xffffffffffffffff",
        "!!int 18446744073709551615",
    ] {
        let p = compile(&cgroup_policy(written))
            .unwrap_or_else(|e| panic!("cgroup {written}: {}", e.render_plain()));
        for (cgroup, leaf) in [
            (u64::MAX, "big"),
            // The neighbours a float would round to the same value.
            (u64::MAX - 1, "rest"),
            (u64::MAX - 1000, "rest"),
            (1 << 63, "rest"),
        ] {
            let mut pkt = PacketMeta::default();
            pkt.set_int(Field::Cgroup, cgroup);
            assert_eq!(
                leaf_named(&p, p.classify(&pkt)),
                leaf,
                "{written}: {cgroup}"
            );
            assert_eq!(p.classify(&pkt), p.classify_reference(&pkt), "{cgroup}");
        }
    }
}

#[test]
fn cgroups_from_two_to_the_63_are_matched_exactly() {
    let text = "weft: 1\n\
                nodes:\n  \
                  - {name: root, type: fifo}\n  \
                  - {name: a, type: leaf, parent: root, match: {cgroup: [9223372036854775808, 9223372036854775809]}}\n  \
                  - {name: b, type: leaf, parent: root, match: {cgroup: 12345678901234567890}}\n  \
                  - {name: rest, type: leaf, parent: root}\n";
    let p = compile(text).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    for (cgroup, leaf) in [
        (1u64 << 63, "a"),
        ((1 << 63) + 1, "a"),
        ((1 << 63) + 2, "rest"),
        (12_345_678_901_234_567_890, "b"),
        (12_345_678_901_234_567_891, "rest"),
    ] {
        let mut pkt = PacketMeta::default();
        pkt.set_int(Field::Cgroup, cgroup);
        assert_eq!(leaf_named(&p, p.classify(&pkt)), leaf, "{cgroup}");
    }
}

#[test]
fn a_cgroup_beyond_the_range_is_quoted_as_written() {
    for written in [
        "18446744073709551616",
        "0x10000000000000000",
        "99999999999999999999999999999999999999999999",
        "-9223372036854775809",
    ] {
        let (rule, line, msg) = refusal(&cgroup_policy(written));
        assert_eq!((rule, line), (Rule::BadValue, 4), "{msg}");
        assert!(
            msg.contains(&format!("found {written}")),
            "{written} not quoted: {msg}"
        );
        assert!(msg.contains("0..=18446744073709551615"), "{msg}");
    }
}

#[test]
fn the_largest_byte_sizes_are_read_exactly() {
    let text = "weft: 1\n\
                nodes:\n  \
                  - {name: root, type: drr}\n  \
                  - {name: s, type: shape, parent: root, rate: 1gbit, burst: 18446744073709551615}\n  \
                  - {name: a, type: leaf, parent: s, quantum: 18446744073709551615, match: {tag: 1}}\n  \
                  - {name: b, type: leaf, parent: root, quantum: 18446744073709551615b, \
                     limit: {bytes: 18446744073709551614}, flow_limit: {bytes: 9223372036854775809}}\n";
    let p = compile(text).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    assert_eq!(p.shapers[0].burst_bytes, u64::MAX);
    let node = |name: &str| p.nodes.iter().find(|n| n.name == name).unwrap();
    assert_eq!(node("a").edge.quantum_bytes, u64::MAX);
    assert_eq!(node("b").edge.quantum_bytes, u64::MAX);
    let Algo::Leaf(b) = &node("b").algo else {
        panic!("b is a leaf")
    };
    assert_eq!(b.limit_bytes, Some(u64::MAX - 1));
    assert_eq!(b.flow_limit_bytes, Some((1 << 63) + 1));
}

#[test]
fn a_byte_size_beyond_the_range_is_quoted_as_written() {
    for (key, written) in [
        ("quantum", "18446744073709551616"),
        ("quantum", "18446744073709551616b"),
        ("quantum", "1e30"),
        ("limit.bytes", "18446744073709551616"),
    ] {
        let value = match key {
            "limit.bytes" => format!("limit: {{bytes: {written}}}"),
            _ => format!("{key}: {written}"),
        };
        let text = format!(
            "weft: 1\n\
             nodes:\n  \
               - {{name: root, type: drr}}\n  \
               - {{name: a, type: leaf, parent: root, {value}}}\n"
        );
        let (rule, line, msg) = refusal(&text);
        assert_eq!((rule, line), (Rule::BadValue, 4), "{msg}");
        assert!(
            msg.contains(&format!("`{key}`: `{written}` is out of range")),
            "{written} not quoted: {msg}"
        );
    }
}

#[test]
fn numbers_for_sizes_are_read_from_their_text() {
    // Exponents are expanded exactly, not through a float; fractions stay refused.
    for (written, bytes) in [
        ("1e3", 1000),
        ("1.5e3", 1500),
        ("0x10", 16),
        ("1500.0", 1500),
    ] {
        let text = format!(
            "weft: 1\n\
             nodes:\n  \
               - {{name: root, type: drr}}\n  \
               - {{name: a, type: leaf, parent: root, quantum: {written}}}\n"
        );
        let p = compile(&text).unwrap_or_else(|e| panic!("{written}: {}", e.render_plain()));
        assert_eq!(p.nodes[1].edge.quantum_bytes, bytes, "{written}");
    }
    let (_, _, msg) = refusal(
        "weft: 1\nnodes:\n  - {name: root, type: drr}\n  - {name: a, type: leaf, parent: root, quantum: 1500.5}\n",
    );
    assert!(
        msg.contains("`1500.5` is out of range or not a whole number"),
        "{msg}"
    );
}

#[test]
fn a_big_integer_through_an_alias_is_read_exactly() {
    let text = "weft: 1\n\
                nodes:\n  \
                  - {name: root, type: fifo}\n  \
                  - {name: a, type: leaf, parent: root, match: {cgroup: &big 18446744073709551615, tag: 1}}\n  \
                  - name: b\n    type: leaf\n    parent: root\n    match: {cgroup: *big}\n  \
                  - {name: rest, type: leaf, parent: root}\n";
    let p = compile(text).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let mut pkt = PacketMeta::default();
    pkt.set_int(Field::Cgroup, u64::MAX);
    assert_eq!(leaf_named(&p, p.classify(&pkt)), "b");
    pkt.set_int(Field::Cgroup, u64::MAX - 1);
    assert_eq!(leaf_named(&p, p.classify(&pkt)), "rest");
}

#[test]
fn other_integers_out_of_range_are_quoted_as_written() {
    for (value, key, range) in [
        ("weight: 18446744073709551616", "weight", "1..=1000000"),
        ("match: {dscp: 0x100}", "dscp", "0..=63"),
        (
            "outstanding: 9223372036854775808",
            "outstanding",
            "1..=4294967295",
        ),
    ] {
        let text = format!(
            "weft: 1\n\
             nodes:\n  \
               - {{name: root, type: wfq}}\n  \
               - {{name: a, type: leaf, parent: root, {value}}}\n"
        );
        let (_, line, msg) = refusal(&text);
        let written = value.rsplit(": ").next().unwrap().trim_end_matches('}');
        assert_eq!(line, 4, "{msg}");
        assert!(
            msg.contains(&format!(
                "`{key}` must be an integer in {range}, found {written}"
            )),
            "{msg}"
        );
    }
    let (_, _, msg) = refusal(
        "weft: 1\nnodes:\n  - {name: root, type: fifo}\n  - {name: a, type: leaf, parent: root, match: {proto: 18446744073709551616}}\n",
    );
    assert!(msg.contains("`18446744073709551616` is not tcp"), "{msg}");
}

#[test]
fn the_normalized_json_of_the_largest_values_reads_back_the_same() {
    // `show --json` writes `cgroup` as a JSON number; reading it back went through a float.
    let text = "weft: 1\n\
                nodes:\n  \
                  - {name: root, type: drr}\n  \
                  - {name: a, type: leaf, parent: root, quantum: 18446744073709551615, \
                     match: {cgroup: [9223372036854775808, 18446744073709551615]}}\n  \
                  - {name: b, type: leaf, parent: root}\n";
    let p = compile(text).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let json = serde_json::to_string_pretty(&weft_core::policy::show::to_json(&p)).unwrap();
    let again = compile(&json).unwrap_or_else(|e| panic!("{}\n---\n{json}", e.render_plain()));
    let json2 = serde_json::to_string_pretty(&weft_core::policy::show::to_json(&again)).unwrap();
    assert_eq!(json, json2);
    let mut pkt = PacketMeta::default();
    pkt.set_int(Field::Cgroup, u64::MAX);
    assert_eq!(leaf_named(&again, again.classify(&pkt)), "a");
}

/// A weight, port, id or packet count written with an exponent or a zero fraction (`1e3`,
/// `8.0e1`) is read from its text exactly, as sizes are (`quantum: 1e3` is 1000), not refused
/// as "not a whole number"; a fraction stays refused, and a whole number out of range is
/// named an integer out of range.
#[test]
fn whole_numbers_in_exponent_notation_are_integers_everywhere() {
    let text = "weft: 1\n\
                nodes:\n  \
                  - {name: root, type: wfq}\n  \
                  - {name: a, type: leaf, parent: root, weight: 1e3, limit: {packets: 2.5e3}, \
                     match: {dport: 8.0e1, cgroup: 1e19}}\n  \
                  - {name: b, type: leaf, parent: root, weight: 1.0}\n";
    let p = compile(text).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let a = p.nodes.iter().find(|n| n.name == "a").unwrap();
    assert_eq!(a.edge.weight, 1000);
    let Algo::Leaf(spec) = &a.algo else {
        panic!("a is a leaf")
    };
    assert_eq!(spec.limit_packets, Some(2500));
    let mut m = PacketMeta::default();
    m.set_int(Field::Dport, 80);
    m.set_int(Field::Cgroup, 10_000_000_000_000_000_000);
    assert_eq!(leaf_named(&p, p.classify(&m)), "a");
    let b = p.nodes.iter().find(|n| n.name == "b").unwrap();
    assert_eq!(b.edge.weight, 1);

    let with_weight = |w: &str| {
        format!(
            "weft: 1\nnodes:\n  - {{name: root, type: wfq}}\n  \
             - {{name: a, type: leaf, parent: root, weight: {w}}}\n"
        )
    };
    let (rule, _, msg) = refusal(&with_weight("1.5"));
    assert_eq!(rule, Rule::NonPositiveWeight);
    assert!(
        msg.contains("must be a whole number in 1..=1000000, found 1.5"),
        "{msg}"
    );
    let (rule, _, msg) = refusal(&with_weight("1e7"));
    assert_eq!(rule, Rule::NonPositiveWeight);
    assert!(
        msg.contains("must be an integer in 1..=1000000, found 1e7"),
        "{msg}"
    );
}
