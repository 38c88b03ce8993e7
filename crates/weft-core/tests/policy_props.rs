//! Property tests of the policy compiler:
//! * random valid policies compile, satisfy the program invariants, round-trip through the
//!   normalized JSON of `weft policy show --json`, and classify identically with the fast and
//!   reference twins;
//! * a random valid policy with one rule broken is rejected, naming that rule.

mod common;

use std::path::Path;

use proptest::prelude::*;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{compile_str, show, LeafId, LoadOptions, Rule};

/// A node of a generated policy, rendered to YAML by [`render`].
#[derive(Debug, Clone)]
struct GenNode {
    name: String,
    kind: &'static str,
    parents: Vec<String>,
    keys: Vec<(String, String)>,
    matches: Option<String>,
}

#[derive(Debug, Clone)]
struct GenPolicy {
    nodes: Vec<GenNode>,
    extra_top: Vec<String>,
    version: u32,
}

fn render(p: &GenPolicy) -> String {
    let mut s = format!(
        "weft: {}\nname: generated\nlink: {{rate: 10gbit}}\n",
        p.version
    );
    for l in &p.extra_top {
        s += l;
        s += "\n";
    }
    s += "nodes:\n";
    for n in &p.nodes {
        s += &format!("  - name: {}\n    type: {}\n", n.name, n.kind);
        match n.parents.len() {
            0 => {}
            1 => s += &format!("    parent: {}\n", n.parents[0]),
            _ => s += &format!("    parent: [{}]\n", n.parents.join(", ")),
        }
        for (k, v) in &n.keys {
            s += &format!("    {k}: {v}\n");
        }
        if let Some(m) = &n.matches {
            s += &format!("    match: {m}\n");
        }
    }
    s
}

const SCHED: [&str; 8] = ["fifo", "prio", "wfq", "rr", "drr", "lstf", "edf", "senic"];

/// Fields a generated node may match on, as `match:` keys, with the values they take.
const MATCH_FIELDS: [&str; 6] = ["tag", "dport", "sport", "vm", "tenant", "cgroup"];

/// Builds a valid policy from random choices: a tree of scheduling nodes and leaves (each
/// child matched on a unique value of a field none of its ancestors matches on, so nothing
/// is shadowed and every node can be reached; some leaves catch-all as a last child), with
/// parallel shaping sets on random edges.
fn build(choices: &[(u8, u8, u8, u8)]) -> GenPolicy {
    let mut nodes: Vec<GenNode> = Vec::new();
    let mut kinds: Vec<&'static str> = Vec::new();
    let mut children: Vec<usize> = Vec::new();
    let root_kind = SCHED[choices[0].0 as usize % SCHED.len()];
    nodes.push(GenNode {
        name: "root".into(),
        kind: root_kind,
        parents: vec![],
        keys: vec![],
        matches: None,
    });
    kinds.push(root_kind);
    children.push(0);
    let mut unique = 0u32;
    let mut senic_depth = vec![u32::from(root_kind == "senic")];
    // Per node: the `MATCH_FIELDS` it and its ancestors match on (bit i: field i).
    let mut matched: Vec<u8> = vec![0];
    let every_field = (1u8 << MATCH_FIELDS.len()) - 1;
    for (i, &(a, b, c, d)) in choices.iter().enumerate().skip(1) {
        // Pick a scheduling parent among existing ones.
        let sched: Vec<usize> = (0..nodes.len())
            .filter(|&j| kinds[j] != "leaf" && kinds[j] != "shape")
            .collect();
        let mut parent = sched[a as usize % sched.len()];
        if matched[parent] == every_field {
            // Its ancestors match on every field: a child there could not be told apart.
            parent = 0;
        }
        let depth_ok = senic_depth[parent] < 2;
        let kind = if b % 3 == 0 && nodes.len() < 40 {
            let k = SCHED[c as usize % SCHED.len()];
            if k == "senic" && !depth_ok {
                "wfq"
            } else {
                k
            }
        } else {
            "leaf"
        };
        let mut keys = Vec::new();
        match kinds[parent] {
            "prio" => keys.push((
                "priority".to_string(),
                (children[parent] as u64).to_string(),
            )),
            "wfq" => keys.push(("weight".to_string(), (1 + d % 7).to_string())),
            "drr" => keys.push((
                "quantum".to_string(),
                format!("{}b", 500 + 100 * u32::from(d)),
            )),
            "senic" => keys.push(("rate".to_string(), format!("{}mbit", 1 + u32::from(d) % 50))),
            _ => {}
        }
        match kind {
            "lstf" => keys.push(("default_slack".into(), format!("{}us", 1 + u32::from(d)))),
            "edf" => keys.push(("default_deadline".into(), format!("{}us", 1 + u32::from(d)))),
            "leaf" if d % 4 == 0 => keys.push(("flows".into(), "{by: flow, sched: fair}".into())),
            "leaf" if d % 4 == 1 => {
                keys.push(("limit".into(), "{packets: 500, bytes: 1mb}".into()))
            }
            "leaf" if d % 4 == 2 => keys.push(("outstanding".into(), "32".into())),
            _ => {}
        }
        unique += 1;
        // The first field, from one picked by `c`, that no ancestor matches on.
        let field = (0..MATCH_FIELDS.len())
            .map(|k| (usize::from(c % 2) + k) % MATCH_FIELDS.len())
            .find(|&f| matched[parent] & (1 << f) == 0)
            .expect("a free field (checked above)");
        // Ports from 1000, the other fields from 1 (as `packets` draws them).
        let value = if MATCH_FIELDS[field].ends_with("port") {
            1000 + unique
        } else {
            unique
        };
        let matches = Some(format!("{{{}: {value}}}", MATCH_FIELDS[field]));
        let name = format!("n{i}");
        let mut parents = vec![nodes[parent].name.clone()];
        // A parallel shaping set on this edge, sometimes nested one level.
        if a % 4 == 0 {
            let set = 1 + (b % 3) as usize;
            parents.clear();
            for s in 0..set {
                let sname = format!("{name}-s{s}");
                let mut sparents = vec![nodes[parent].name.clone()];
                if d % 5 == 0 && s == 0 {
                    // Nested: two shaping nodes above this one.
                    let outer: Vec<String> = (0..2).map(|o| format!("{sname}-o{o}")).collect();
                    for (o, on) in outer.iter().enumerate() {
                        nodes.push(GenNode {
                            name: on.clone(),
                            kind: "shape",
                            parents: vec![nodes[parent].name.clone()],
                            keys: vec![("rate".into(), format!("{}mbit", 10 + o))],
                            matches: Some(format!(
                                "{{proto: {}}}",
                                if o == 0 { "tcp" } else { "udp" }
                            )),
                        });
                        kinds.push("shape");
                        children.push(0);
                        senic_depth.push(0);
                        matched.push(0);
                    }
                    sparents = outer;
                }
                nodes.push(GenNode {
                    name: sname.clone(),
                    kind: "shape",
                    parents: sparents,
                    keys: vec![
                        ("rate".into(), format!("{}gbit", 1 + s)),
                        ("burst".into(), "64kb".into()),
                    ],
                    matches: if s + 1 == set && b % 2 == 0 {
                        None
                    } else {
                        Some(format!("{{dst: 10.{s}.0.0/16}}"))
                    },
                });
                kinds.push("shape");
                children.push(0);
                senic_depth.push(0);
                matched.push(0);
                parents.push(sname);
            }
        }
        nodes.push(GenNode {
            name,
            kind,
            parents,
            keys,
            matches,
        });
        kinds.push(kind);
        children.push(0);
        children[parent] += 1;
        senic_depth.push(if kind == "senic" {
            senic_depth[parent] + 1
        } else {
            0
        });
        matched.push(matched[parent] | 1 << field);
    }
    // Scheduling nodes without children get a catch-all leaf.
    let n = nodes.len();
    for j in 0..n {
        if kinds[j] != "leaf" && kinds[j] != "shape" && children[j] == 0 {
            let mut keys = Vec::new();
            match kinds[j] {
                "prio" => keys.push(("priority".into(), "0".into())),
                "senic" => keys.push(("rate".into(), "50mbit".into())),
                _ => {}
            }
            nodes.push(GenNode {
                name: format!("{}-all", nodes[j].name),
                kind: "leaf",
                parents: vec![nodes[j].name.clone()],
                keys,
                matches: None,
            });
            kinds.push("leaf");
        }
    }
    GenPolicy {
        nodes,
        extra_top: vec![],
        version: 1,
    }
}

fn choices() -> impl Strategy<Value = Vec<(u8, u8, u8, u8)>> {
    prop::collection::vec(any::<(u8, u8, u8, u8)>(), 2..30)
}

fn packets() -> impl Strategy<Value = Vec<PacketMeta>> {
    prop::collection::vec(
        (
            prop::array::uniform6(0u32..40),
            any::<u8>(),
            0u8..3,
            any::<bool>(),
        )
            .prop_map(|(values, present, net, tcp)| {
                // Some of `MATCH_FIELDS` (a tag or a port at least), in the generator's
                // ranges: ports from 1000, the rest from 0.
                let present = if present & 3 == 0 {
                    present | 1
                } else {
                    present
                };
                let mut p = PacketMeta::default();
                for (k, field) in MATCH_FIELDS.iter().enumerate() {
                    if present & (1 << k) != 0 {
                        let v = if field.ends_with("port") {
                            1000 + values[k]
                        } else {
                            values[k]
                        };
                        p.set_field(field, &v.to_string()).unwrap();
                    }
                }
                p.set_field("dst", &format!("10.{net}.1.1")).unwrap();
                p.set_field("proto", if tcp { "tcp" } else { "udp" })
                    .unwrap();
                p
            }),
        1..32,
    )
}

/// `classify_at` (a packet bound to a leaf of the driver's choosing) against its reference
/// twin at every leaf, and against `classify` at the leaf the packet reaches by itself.
fn bound_like_the_reference(
    p: &weft_core::policy::Program,
    pkt: &weft_core::classifier::PacketMeta,
) -> Result<(), TestCaseError> {
    for leaf in (0..p.leaves.len() as u32 + 1).map(LeafId::new) {
        prop_assert_eq!(
            p.classify_at(leaf, pkt),
            p.classify_at_reference(leaf, pkt),
            "packet {} bound to leaf {}",
            pkt,
            leaf
        );
    }
    if let c @ weft_core::policy::Classification::Leaf { leaf, .. } = p.classify(pkt) {
        prop_assert_eq!(p.classify_at(leaf, pkt), Some(c), "packet {}", pkt);
    }
    Ok(())
}

fn compile(text: &str) -> Result<weft_core::policy::Program, weft_core::policy::PolicyError> {
    compile_str(Path::new("generated.yaml"), text, &LoadOptions::default())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(200)))]

    #[test]
    fn valid_policies_compile_and_round_trip(c in choices(), pkts in packets()) {
        let text = render(&build(&c));
        let p = match compile(&text) {
            Ok(p) => p,
            Err(e) => return Err(TestCaseError::fail(format!("{}\n---\n{text}", e.render_plain()))),
        };
        p.check_invariants();
        let json = serde_json::to_string_pretty(&show::to_json(&p)).unwrap();
        let again = compile(&json).map_err(|e| TestCaseError::fail(format!("{}\n---\n{json}", e.render_plain())))?;
        let json2 = serde_json::to_string_pretty(&show::to_json(&again)).unwrap();
        prop_assert_eq!(&json, &json2);
        // The streamed form (`weft policy show --json`) writes the same text.
        let streamed = serde_json::to_string_pretty(&show::Json(&p)).unwrap();
        prop_assert_eq!(&json, &streamed);
        for pkt in &pkts {
            prop_assert_eq!(p.classify(pkt), p.classify_reference(pkt), "packet {}", pkt);
            prop_assert_eq!(p.classify(pkt), again.classify(pkt));
            bound_like_the_reference(&p, pkt)?;
        }
        let mut batch = vec![weft_core::policy::Classification::Unclassified { at: weft_core::policy::NodeId::ROOT }; pkts.len()];
        p.classify_batch(&pkts, &mut batch);
        for (pkt, got) in pkts.iter().zip(&batch) {
            prop_assert_eq!(*got, p.classify(pkt), "batch differs for {}", pkt);
        }
    }

    #[test]
    fn one_broken_rule_is_named(c in choices(), which in 0usize..16, pick in any::<u16>()) {
        let mut g = build(&c);
        let n = g.nodes.len();
        let at = |k: u16| 1 + (k as usize) % (n - 1);
        let sched: Vec<usize> = (0..n).filter(|&j| !matches!(g.nodes[j].kind, "leaf" | "shape")).collect();
        let leaves: Vec<usize> = (0..n).filter(|&j| g.nodes[j].kind == "leaf").collect();
        let expected = match which {
            0 => {
                let mut dup = g.nodes[leaves[pick as usize % leaves.len()]].clone();
                dup.matches = Some("{tag: 999999}".into());
                g.nodes.push(dup);
                Rule::DuplicateName
            }
            1 => { g.nodes[at(pick)].parents = vec!["nowhere".into()]; Rule::UnknownNode }
            2 => {
                // A second, scheduling parent for a non-root node.
                let j = at(pick);
                let other = sched.iter().copied().find(|&s| !g.nodes[j].parents.contains(&g.nodes[s].name) && s != j).unwrap_or(0);
                if g.nodes[j].parents.contains(&g.nodes[other].name) { return Ok(()); }
                let other_name = g.nodes[other].name.clone();
                g.nodes[j].parents.push(other_name);
                Rule::MultipleParents
            }
            3 => {
                // The root's parent becomes one of its scheduling descendants.
                let Some(&d) = sched.iter().find(|&&s| s != 0) else { return Ok(()) };
                g.nodes[0].parents = vec![g.nodes[d].name.clone()];
                Rule::Cycle
            }
            4 => { g.nodes[at(pick)].kind = "wf2q"; Rule::UnknownAlgorithm }
            5 => {
                let j = at(pick);
                g.nodes[j].keys.retain(|(k, _)| k != "weight");
                g.nodes[j].keys.push(("weight".into(), "0".into()));
                Rule::NonPositiveWeight
            }
            6 => {
                g.nodes.push(GenNode { name: "bad-shaper".into(), kind: "shape", parents: vec!["root".into()], keys: vec![("rate".into(), "0gbit".into())], matches: None });
                Rule::NonPositiveRate
            }
            7 => { g.nodes[at(pick)].keys.push(("colour".into(), "red".into())); Rule::UnknownKey }
            8 => {
                let l = leaves[pick as usize % leaves.len()];
                let name = g.nodes[l].name.clone();
                g.nodes.push(GenNode { name: "orphan".into(), kind: "leaf", parents: vec![name], keys: vec![], matches: None });
                Rule::LeafWithChildren
            }
            9 => {
                // A catch-all first child of the root shadows the root's other children.
                let keys = match g.nodes[0].kind {
                    "prio" => return Ok(()), // would also need priorities on every sibling
                    "senic" => vec![("rate".to_string(), "1mbit".to_string())],
                    _ => vec![],
                };
                g.nodes.insert(1, GenNode { name: "grabber".into(), kind: "leaf", parents: vec!["root".into()], keys, matches: None });
                Rule::ShadowedMatch
            }
            10 => {
                let keys = match g.nodes[0].kind {
                    "prio" => vec![("priority".to_string(), "99".to_string())],
                    "senic" => vec![("rate".to_string(), "1mbit".to_string())],
                    _ => vec![],
                };
                g.nodes.insert(1, GenNode { name: "empty".into(), kind: "fifo", parents: vec!["root".into()], keys, matches: Some("{tag: 888888}".into()) });
                Rule::ChildlessNode
            }
            11 => {
                g.nodes.push(GenNode { name: "second-root".into(), kind: "leaf", parents: vec![], keys: vec![], matches: None });
                Rule::MultipleRoots
            }
            12 => { g.version = 2; Rule::Version }
            13 => {
                let Some(&inner) = sched.iter().find(|&&s| s != 0) else { return Ok(()) };
                let inner_name = g.nodes[inner].name.clone();
                let inner_kind = g.nodes[inner].kind;
                g.nodes.push(GenNode { name: "ps-a".into(), kind: "shape", parents: vec!["root".into()], keys: vec![("rate".into(), "1gbit".into())], matches: Some("{dst: 10.9.0.0/16}".into()) });
                g.nodes.push(GenNode { name: "ps-b".into(), kind: "shape", parents: vec![inner_name], keys: vec![("rate".into(), "1gbit".into())], matches: None });
                let keys = match inner_kind { "senic" => vec![("rate".to_string(), "1mbit".to_string())], _ => vec![] };
                g.nodes.push(GenNode { name: "torn".into(), kind: "leaf", parents: vec!["ps-a".into(), "ps-b".into()], keys, matches: Some("{tag: 777777}".into()) });
                Rule::ParallelShaping
            }
            14 => { g.extra_top.push("limits: {max_depth: 1}".into()); Rule::DepthLimit }
            _ => { g.extra_top.push("limits: {max_nodes: 1}".into()); Rule::NodeLimit }
        };
        let text = render(&g);
        match compile(&text) {
            Ok(_) => prop_assert!(false, "accepted a policy breaking {}:\n{}", expected, text),
            Err(e) => {
                let rules: Vec<Rule> = e.diagnostics.iter().map(|d| d.rule).collect();
                prop_assert!(rules.contains(&expected), "expected {} but got:\n{}\n---\n{}", expected, e.render_plain(), text);
            }
        }
    }
}

/// Shaping sets at several levels of one path (with a level between them that has none),
/// sets nested two deep, dispatches on several fields and catch-alls: the random policies above rarely
/// send a packet through more than one of these.
const SHAPED_LEVELS: &str = "weft: 1
name: shaped-levels
link: {rate: 10gbit}
nodes:
  - {name: root, type: prio}
  - {name: mgmt, type: leaf, parent: root, priority: 0, match: {tag: 1}}
  - {name: top-a, type: shape, parent: root, rate: 1gbit, match: {dst: 10.0.0.0/16}}
  - {name: top-b, type: shape, parent: root, rate: 2gbit, match: {proto: udp}}
  - {name: tenants, type: wfq, parent: [top-a, top-b], priority: 1}
  - {name: t1, type: prio, parent: tenants, weight: 1, match: {vm: 1}}
  - {name: t2, type: leaf, parent: tenants, weight: 2, match: {vm: 2}}
  - {name: t3, type: wfq, parent: tenants, weight: 3}
  - {name: cap, type: shape, parent: t1, rate: 5gbit, match: {dst: 10.0.0.0/8}}
  - {name: out-tcp, type: shape, parent: cap, rate: 1gbit, match: {proto: tcp}}
  - {name: out-udp, type: shape, parent: t1, rate: 1gbit, match: {proto: udp}}
  - {name: in-near, type: shape, parent: [out-tcp, out-udp], rate: 1gbit, match: {dst: 10.0.1.0/24}}
  - {name: in-far, type: shape, parent: t1, rate: 1gbit, match: {dst: 10.1.0.0/16}}
  - {name: web, type: leaf, parent: [in-near, in-far], priority: 0, match: {dport: [80, 443]}}
  - {name: rest, type: leaf, parent: t1, priority: 1}
  - {name: t3-a, type: leaf, parent: t3, match: {dport: 80}}
  - {name: t3-lim, type: shape, parent: t3, rate: 1gbit, match: {dst: 10.0.1.0/24}}
  - {name: t3-b, type: leaf, parent: t3-lim, match: {sport: 9}}
  - {name: t3-c, type: leaf, parent: t3}
";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(200)))]

    #[test]
    fn shaping_at_several_levels_classifies_like_the_reference(
        pkts in prop::collection::vec(
            (
                prop::option::of(0u32..4),
                prop::option::of(prop::sample::select(vec![80u16, 443, 22])),
                prop::option::of(prop::sample::select(vec!["tcp", "udp", "icmp"])),
                prop::option::of((0u32..3, 0u32..3)),
                prop::option::of(0u32..3),
                prop::option::of(8u16..11),
            )
                .prop_map(|(vm, dport, proto, dst, tag, sport)| {
                    common::meta(&[
                        ("vm", vm.map(|v| v.to_string())),
                        ("dport", dport.map(|v| v.to_string())),
                        ("proto", proto.map(str::to_string)),
                        ("dst", dst.map(|(a, b)| format!("10.{a}.{b}.5"))),
                        ("tag", tag.map(|v| v.to_string())),
                        ("sport", sport.map(|v| v.to_string())),
                    ])
                }),
            1..64,
        ),
    ) {
        let p = compile(SHAPED_LEVELS).map_err(|e| TestCaseError::fail(e.render_plain()))?;
        for pkt in &pkts {
            prop_assert_eq!(p.classify(pkt), p.classify_reference(pkt), "packet {}", pkt);
            bound_like_the_reference(&p, pkt)?;
        }
        let mut batch = vec![weft_core::policy::Classification::Unclassified { at: weft_core::policy::NodeId::ROOT }; pkts.len()];
        p.classify_batch(&pkts, &mut batch);
        for (pkt, got) in pkts.iter().zip(&batch) {
            prop_assert_eq!(*got, p.classify(pkt), "batch differs for {}", pkt);
        }
    }
}

#[test]
fn shaping_at_several_levels_is_found() {
    let p = compile(SHAPED_LEVELS).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let names = |pkt: &str| match p.classify(&pkt.parse().unwrap()) {
        weft_core::policy::Classification::Leaf { node, shaping, .. } => (
            p.node(node).name.clone(),
            shaping
                .as_slice()
                .iter()
                .map(|&s| p.shaper(s).name.clone())
                .collect::<Vec<_>>(),
        ),
        other => panic!("{pkt}: {other:?}"),
    };
    // Leaf side first: the nested sets (in-near, out-tcp above it, cap above that), then
    // the top set.
    assert_eq!(
        names("vm=1,dport=80,proto=tcp,dst=10.0.1.9"),
        (
            "web".into(),
            vec![
                "in-near".into(),
                "out-tcp".into(),
                "cap".into(),
                "top-a".into()
            ]
        )
    );
    assert_eq!(
        names("vm=1,dport=22,proto=udp,dst=10.1.1.9"),
        ("rest".into(), vec!["top-b".into()])
    );
    assert_eq!(
        names("vm=1,dport=443,proto=icmp,dst=10.1.2.9"),
        ("web".into(), vec!["in-far".into()])
    );
    assert_eq!(
        names("vm=3,sport=9,proto=udp,dst=10.0.1.1"),
        ("t3-b".into(), vec!["t3-lim".into(), "top-a".into()])
    );
}

/// Node names are columns of the CSV outputs: a comma, a double quote, a space or a control
/// character is refused where it is written.
#[test]
fn names_that_would_break_a_csv_column_are_refused() {
    for (name, shown) in [
        ("\"web,db\"", "\"web,db\""),
        ("'say\"hi\"'", "\"say\\\"hi\\\"\""),
        ("\"a\\tb\"", "\"a\\tb\""),
    ] {
        let text = format!(
            "weft: 1\nlink: {{rate: 1gbit}}\nnodes:\n  - {{name: root, type: wfq}}\n  - {{name: {name}, type: leaf, parent: root, weight: 1}}\n"
        );
        let e = compile(&text)
            .err()
            .unwrap_or_else(|| panic!("{name} compiled"));
        assert_eq!(e.rules_and_lines(), vec![(Rule::BadValue, 5)], "{name}");
        assert!(
            e.render_plain().contains(shown),
            "{name}: {}",
            e.render_plain()
        );
    }
    compile("weft: 1\nlink: {rate: 1gbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: web.db-1/x, type: leaf, parent: root, weight: 1}\n")
        .unwrap_or_else(|e| panic!("{}", e.render_plain()));
}

/// A generated node: name, scheduling parent, matched values of tag, dport and vm (0: not
/// matched).
type SmallNode = (String, Option<usize>, [u8; 3]);

/// A small policy of overlapping matches for the cross-level shadowing check: per node after
/// the root, (parent pick, leaf?, tag, dport, vm), each field 0 (not matched) or a value 1–2.
fn overlapping(nodes: &[(u8, bool, u8, u8, u8)]) -> (String, Vec<SmallNode>) {
    // (name, parent, [tag, dport, vm]) per node; node 0 is the root.
    let mut tree: Vec<(String, Option<usize>, [u8; 3], bool)> =
        vec![("root".into(), None, [0; 3], false)];
    for (i, &(p, leaf, tag, dport, vm)) in nodes.iter().enumerate() {
        let inner: Vec<usize> = (0..tree.len()).filter(|&j| !tree[j].3).collect();
        let parent = inner[p as usize % inner.len()];
        tree.push((
            format!("n{}", i + 1),
            Some(parent),
            [tag % 3, dport % 3, vm % 3],
            leaf,
        ));
    }
    // A scheduling node without children becomes a leaf.
    for j in 0..tree.len() {
        if !tree[j].3 && !tree.iter().any(|n| n.1 == Some(j)) {
            tree[j].3 = true;
        }
    }
    let mut text = String::from("weft: 1\nnodes:\n");
    for (name, parent, m, leaf) in &tree {
        let kind = if *leaf { "leaf" } else { "wfq" };
        let mut keys = vec![format!("name: {name}"), format!("type: {kind}")];
        if let Some(p) = parent {
            keys.push(format!("parent: {}", tree[*p].0));
            keys.push("weight: 1".into());
        }
        let fields: Vec<String> = ["tag", "dport", "vm"]
            .iter()
            .zip(m)
            .filter(|(_, v)| **v != 0)
            .map(|(f, v)| format!("{f}: {v}"))
            .collect();
        if !fields.is_empty() {
            keys.push(format!("match: {{{}}}", fields.join(", ")));
        }
        text += &format!("  - {{{}}}\n", keys.join(", "));
    }
    let nodes = tree.into_iter().map(|(n, p, m, _)| (n, p, m)).collect();
    (text, nodes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(300)))]

    /// Rule shadowed-match across levels is sound: a node it reports is reached by no packet
    /// (every packet of the fields' values, absent or 1–3, descending by first match).
    #[test]
    fn a_node_shadowed_across_levels_is_never_reached(
        nodes in prop::collection::vec((any::<u8>(), any::<bool>(), 0u8..3, 0u8..3, 0u8..3), 1..8)
    ) {
        let (text, tree) = overlapping(&nodes);
        let Err(e) = compile(&text) else { return Ok(()) };
        for d in e.diagnostics.iter().filter(|d| {
            d.rule == Rule::ShadowedMatch && d.message.contains("every packet that can reach it")
        }) {
            let name = d.node.clone().expect("names its node");
            let target = tree.iter().position(|n| n.0 == name).unwrap();
            for pkt in 0..64u32 {
                // Each field absent (0) or 1–3.
                let values = [pkt % 4, pkt / 4 % 4, pkt / 16 % 4];
                let accepts = |m: &[u8; 3]| {
                    m.iter().zip(values).all(|(&want, got)| want == 0 || got == u32::from(want))
                };
                let mut at = 0;
                loop {
                    prop_assert_ne!(at, target, "packet {:?} reaches `{}`:\n{}", values, name, text);
                    match tree.iter().position(|n| n.1 == Some(at) && accepts(&n.2)) {
                        Some(c) => at = c,
                        None => break,
                    }
                }
            }
        }
    }
}
