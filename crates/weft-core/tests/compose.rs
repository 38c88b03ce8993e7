//! Composition of sub-policies (Loom §3): attachment points filled from files, renaming,
//! inherited edge keys and matches, and the errors of bad compositions.

use std::path::{Path, PathBuf};

use weft_core::policy::{load, Classification, LoadOptions, Rule};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("weft-compose-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const TOP: &str = "weft: 1
nodes:
  - {name: tenants, type: wfq}
  - {name: vm1, type: attach, parent: tenants, weight: 3, match: {vm: 1}, policy: sub.yaml}
  - {name: vm2, type: attach, parent: tenants, weight: 1, match: {vm: 2}}
";

fn rules(path: &Path, opts: &LoadOptions) -> Vec<Rule> {
    match load(path, opts) {
        Ok(_) => vec![],
        Err(e) => e.diagnostics.iter().map(|d| d.rule).collect(),
    }
}

#[test]
fn sub_policy_takes_the_points_place() {
    let s = Scratch::new("ok");
    s.write(
        "sub.yaml",
        "weft: 1\nnodes:\n  - {name: apps, type: prio}\n  - {name: kvs, type: leaf, parent: apps, priority: 0, match: {dport: 11211}}\n  - {name: rest, type: leaf, parent: apps, priority: 1}\n",
    );
    let top = s.write("top.yaml", TOP);
    let p = load(&top, &LoadOptions::default()).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let vm1 = p
        .node_id("vm1")
        .expect("the sub-policy root is named after the point");
    assert_eq!(p.node(vm1).edge.weight, 3, "edge keys come from the point");
    assert!(p.node_id("vm1/kvs").is_some() && p.node_id("vm1/rest").is_some());
    // The point's match scopes the whole sub-policy; vm2 stays a FIFO leaf.
    let leaf_of = |pkt: &str| match p.classify(&pkt.parse().unwrap()) {
        Classification::Leaf { node, .. } => p.node(node).name.clone(),
        Classification::Unclassified { .. } => "-".into(),
    };
    assert_eq!(leaf_of("vm=1,dport=11211"), "vm1/kvs");
    assert_eq!(leaf_of("vm=1,dport=80"), "vm1/rest");
    assert_eq!(leaf_of("vm=2,dport=11211"), "vm2");
    assert_eq!(leaf_of("vm=3"), "-");
}

#[test]
fn attach_override_fills_a_point_from_the_command_line() {
    let s = Scratch::new("override");
    s.write(
        "sub.yaml",
        "weft: 1\nnodes:\n  - {name: only, type: leaf}\n",
    );
    let other = s.write("other.yaml", "weft: 1\nnodes:\n  - {name: apps, type: rr}\n  - {name: a, type: leaf, parent: apps, match: {dport: 1}}\n  - {name: b, type: leaf, parent: apps}\n");
    let top = s.write("top.yaml", TOP);
    let opts = LoadOptions {
        attach: vec![("vm2".into(), other.clone())],
        ..LoadOptions::default()
    };
    let p = load(&top, &opts).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    assert!(p.node_id("vm2/a").is_some());
    let twice = LoadOptions {
        attach: vec![("vm2".into(), other.clone()), ("vm2".into(), other.clone())],
        ..LoadOptions::default()
    };
    assert!(rules(&top, &twice).contains(&Rule::Attach));
    let unknown = LoadOptions {
        attach: vec![("vm9".into(), other)],
        ..LoadOptions::default()
    };
    assert!(rules(&top, &unknown).contains(&Rule::Attach));
}

#[test]
fn empty_or_many_rooted_sub_policies_are_refused() {
    let s = Scratch::new("bad");
    let top = s.write("top.yaml", TOP);
    s.write("sub.yaml", "weft: 1\nnodes: []\n");
    assert_eq!(rules(&top, &LoadOptions::default()), vec![Rule::Attach]);
    s.write(
        "sub.yaml",
        "weft: 1\nnodes:\n  - {name: a, type: leaf}\n  - {name: b, type: leaf}\n",
    );
    assert_eq!(rules(&top, &LoadOptions::default()), vec![Rule::Attach]);
    s.write(
        "sub.yaml",
        "weft: 1\nlink: {rate: 1gbit}\nnodes:\n  - {name: a, type: leaf}\n",
    );
    assert_eq!(
        rules(&top, &LoadOptions::default()),
        vec![Rule::MisplacedKey]
    );
    s.write(
        "sub.yaml",
        "weft: 1\nnodes:\n  - {name: a, type: leaf, match: {vm: 7}}\n",
    );
    assert_eq!(
        rules(&top, &LoadOptions::default()),
        vec![Rule::MatchConflict]
    );
}

/// A node whose match contradicts the matches above it can never be reached (a packet
/// descends from the root through the children it matches): refused as a match conflict,
/// once, at the node, while agreeing or narrower matches compile.
#[test]
fn a_node_no_packet_can_reach_is_refused() {
    let s = Scratch::new("reach");
    let opts = LoadOptions::default();
    let bad = s.write(
        "bad.yaml",
        "weft: 1
nodes:
  - {name: root, type: wfq, match: {tag: 1}}
  - {name: a, type: prio, parent: root, match: {tag: 2}}
  - {name: a1, type: leaf, parent: a, priority: 0, match: {dport: 80}}
  - {name: b, type: leaf, parent: root, match: {dst: 10.1.0.0/16}}
  - {name: c, type: prio, parent: root, match: {dst: 10.0.0.0/8}}
  - {name: c1, type: leaf, parent: c, priority: 0, match: {dst: 11.0.0.0/8}}
",
    );
    let e = load(&bad, &opts).unwrap_err();
    let conflicts: Vec<&str> = e
        .diagnostics
        .iter()
        .filter(|d| d.rule == Rule::MatchConflict)
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(conflicts.len(), 2, "{conflicts:?}");
    assert!(
        conflicts[0].starts_with("`a` (match {tag: 2}) can never be reached"),
        "{conflicts:?}"
    );
    assert!(
        conflicts[1].starts_with("`c1` (match {dst: 11.0.0.0/8})"),
        "{conflicts:?}"
    );
    let good = s.write(
        "good.yaml",
        "weft: 1
nodes:
  - {name: root, type: wfq, match: {tag: [1, 2]}}
  - {name: a, type: prio, parent: root, match: {tag: 2}}
  - {name: a1, type: leaf, parent: a, priority: 0, match: {tag: 2, dport: 80}}
  - {name: c, type: prio, parent: root, match: {dst: 10.0.0.0/8}}
  - {name: c1, type: leaf, parent: c, priority: 0, match: {dst: 10.1.0.0/16}}
",
    );
    assert_eq!(rules(&good, &opts), vec![]);
}

/// A sub-policy that is not UTF-8 is `unreadable-file` at its first bad byte, in its own file
/// and under the point that attaches it; one that cannot be read at all is `attach` at the
/// point; a top-level file that cannot be read is `unreadable-file`.
#[test]
fn unreadable_files_are_named_with_their_rule() {
    let s = Scratch::new("unreadable");
    let sub = s.0.join("sub.yaml");
    std::fs::write(
        &sub,
        b"weft: 1\nnodes:\n  - {name: caf\xe9, type: fifo}\n".as_slice(),
    )
    .unwrap();
    let top = s.write("top.yaml", TOP);
    let e = load(&top, &LoadOptions::default()).expect_err("the sub-policy is Latin-1");
    let d: Vec<_> = e
        .diagnostics
        .iter()
        .map(|d| (d.rule, e.sources.location(d.span), d.node.clone()))
        .collect();
    assert_eq!(
        d,
        vec![(
            Rule::UnreadableFile,
            (sub.display().to_string(), 3, 15),
            Some("vm1".to_string())
        )]
    );
    std::fs::remove_file(&sub).unwrap();
    assert_eq!(rules(&top, &LoadOptions::default()), vec![Rule::Attach]);
    assert_eq!(
        rules(&s.0.join("missing.yaml"), &LoadOptions::default()),
        vec![Rule::UnreadableFile]
    );
    assert_eq!(
        rules(&s.0, &LoadOptions::default()),
        vec![Rule::UnreadableFile]
    );
}

/// A caller's reader (`LoadOptions::reader`) reads every file of the policy, each once:
/// the policy, its `policy:` sub-policies (nested too) and an `attach` override. Before,
/// the compiler read them all itself, by path, so a caller's checks on a file (the daemon's:
/// its size, its type, who may read it) were made on a read the compiler did not use. What
/// the reader refuses is the diagnostic, with its words.
#[test]
fn a_callers_reader_reads_every_file_once() {
    use std::sync::{Arc, Mutex};
    use weft_core::policy::PolicyReader;
    let s = Scratch::new("reader");
    s.write(
        "sub.yaml",
        "weft: 1\nnodes:\n  - {name: apps, type: prio}\n  - {name: kvs, type: leaf, parent: apps, priority: 0, match: {dport: 11211}}\n  - {name: nested, type: attach, parent: apps, priority: 1, policy: nested.yaml}\n",
    );
    s.write(
        "nested.yaml",
        "weft: 1\nnodes:\n  - {name: bulk, type: leaf}\n",
    );
    let other = s.write(
        "other.yaml",
        "weft: 1\nnodes:\n  - {name: only, type: leaf}\n",
    );
    let top = s.write("top.yaml", TOP);
    let read = Arc::new(Mutex::new(Vec::new()));
    let refuse = Arc::new(Mutex::new(None::<PathBuf>));
    let reader = {
        let (read, refuse) = (read.clone(), refuse.clone());
        PolicyReader::new(move |p: &Path| {
            read.lock().unwrap().push(p.file_name().unwrap().to_owned());
            if refuse.lock().unwrap().as_deref() == Some(p) {
                return Err(std::io::Error::other("the caller says no"));
            }
            std::fs::read(p)
        })
    };
    let opts = LoadOptions {
        attach: vec![("vm2".into(), other.clone())],
        reader: Some(reader),
        ..LoadOptions::default()
    };
    let p = load(&top, &opts).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let mut names = read.lock().unwrap().clone();
    names.sort();
    assert_eq!(
        names,
        ["nested.yaml", "other.yaml", "sub.yaml", "top.yaml"],
        "each file once"
    );
    assert!(p.node_id("vm1/nested").is_some() && p.node_id("vm2").is_some());
    // The same program as weft's own reader makes.
    let own = load(
        &top,
        &LoadOptions {
            reader: None,
            ..opts.clone()
        },
    )
    .unwrap();
    let names_of =
        |p: &weft_core::policy::Program| p.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
    assert_eq!(names_of(&p), names_of(&own));
    // Refused: the top file is `unreadable-file`, a sub-policy `attach`, each with its words.
    for (file, rule) in [(&top, Rule::UnreadableFile), (&other, Rule::Attach)] {
        *refuse.lock().unwrap() = Some(file.clone());
        let e = load(&top, &opts).expect_err("refused by the reader");
        assert_eq!(e.diagnostics[0].rule, rule, "{}", e.render_plain());
        assert!(
            e.diagnostics[0].message.contains(&format!(
                "cannot read {}{}: the caller says no",
                if rule == Rule::Attach {
                    "sub-policy "
                } else {
                    ""
                },
                file.display()
            )),
            "{}",
            e.render_plain()
        );
    }
}
