//! `weft policy show`'s tree view: unchanged for ordinary policies, and bounded for deep or
//! heavily shaped ones. It once recursed once per level and indented every level, so a
//! 50,000-level chain took gigabytes (the output grew with the square of the depth) and
//! then overflowed the stack.

use std::path::Path;

use weft_core::policy::{compile_str, load, show, LoadOptions, Program};

fn compile(text: &str) -> Program {
    compile_str(Path::new("show.yaml"), text, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{}\n---\n{text}", e.render_plain()))
}

/// A chain: `root` (wfq) → `n2` → … → `n{depth-1}` (wfq) → `leaf`, `depth` levels in all.
fn chain(depth: usize) -> String {
    let mut text = format!(
        "weft: 1\nlimits: {{max_depth: {}}}\nnodes:\n  - {{name: root, type: wfq}}\n",
        depth + 1
    );
    let mut parent = "root".to_string();
    for d in 2..depth {
        text += &format!("  - {{name: n{d}, type: wfq, parent: {parent}}}\n");
        parent = format!("n{d}");
    }
    text += &format!("  - {{name: leaf, type: leaf, parent: {parent}}}\n");
    text
}

/// Renders on a thread with a small stack: the tree view must not recurse per level.
fn tree_on_small_stack(p: Program) -> String {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || show::tree(&p))
        .expect("spawn")
        .join()
        .expect("the tree view panicked")
}

#[test]
fn a_deep_chain_renders_in_linear_size_without_recursion() {
    let depth = 20_000;
    let p = compile(&chain(depth));
    assert_eq!(p.depth() as usize, depth);
    let started = std::time::Instant::now();
    let out = tree_on_small_stack(p);
    let elapsed = started.elapsed();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), depth + 1, "a header and one line a node");
    // Every line is bounded (the indentation stops at depth 32), so the output is linear.
    let longest = lines.iter().map(|l| l.len()).max().unwrap();
    assert!(longest <= 300, "a line of {longest} bytes");
    assert!(
        out.len() <= 250 * depth,
        "{} bytes for {depth} nodes",
        out.len()
    );
    let indent = format!("{}└── ", "    ".repeat(30));
    assert_eq!(lines[32], format!("{indent}n32  wfq  [weight 1]"));
    assert_eq!(
        lines[33],
        format!("{indent}[depth 33] n33  wfq  [weight 1]")
    );
    assert_eq!(
        lines[depth],
        format!("{indent}[depth {depth}] leaf  leaf (fifo flows by 5-tuple)  [weight 1]")
    );
    assert!(
        elapsed.as_secs() < 20,
        "{elapsed:?} to render {depth} nodes"
    );
}

#[test]
fn indentation_stops_at_depth_32_and_resumes_for_shallower_siblings() {
    // root → [deep (a 40-level chain), after (leaf)]: the deep branch is not the last child,
    // so its descendants' lines carry its `│`, and `after` comes back to depth 2.
    let mut text = "weft: 1\nlimits: {max_depth: 64}\nnodes:\n  - {name: root, type: wfq}\n  \
                    - {name: deep, type: wfq, parent: root, match: {tag: 1}}\n"
        .to_string();
    let mut parent = "deep".to_string();
    for d in 3..=40 {
        let kind = if d == 40 { "leaf" } else { "wfq" };
        text += &format!("  - {{name: d{d}, type: {kind}, parent: {parent}}}\n");
        parent = format!("d{d}");
    }
    text += "  - {name: after, type: leaf, parent: root}\n";
    let out = show::tree(&compile(&text));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1 + 40 + 1);
    assert_eq!(lines[1], "root  wfq");
    assert_eq!(lines[2], "├── deep  wfq  [weight 1]  match {tag: 1}");
    // Line d shows the node at depth d (line 0 is the header).
    for (d, line) in lines.iter().enumerate().take(41).skip(3) {
        let label = if d == 40 {
            "d40  leaf (fifo flows by 5-tuple)  [weight 1]".to_string()
        } else {
            format!("d{d}  wfq  [weight 1]")
        };
        // Depth d is indented d − 2 steps, at most 30 (depth 32), then says its depth.
        let steps = (d - 2).min(30);
        let marker = if d > 32 {
            format!("[depth {d}] ")
        } else {
            String::new()
        };
        let want = format!("│   {}└── {marker}{label}", "    ".repeat(steps - 1));
        assert_eq!(*line, want, "depth {d}");
    }
    assert_eq!(
        lines.last().unwrap(),
        &"└── after  leaf (fifo flows by 5-tuple)  [weight 1]"
    );
}

#[test]
fn ordinary_policies_render_as_before() {
    // The outputs of the recursive renderer this replaced, byte for byte.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies");
    let p = load(&dir.join("loom-fig1.yaml"), &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render_plain()));
    assert_eq!(
        show::tree(&p),
        "\
policy loom-fig1 — link 100gbit (overhead 20b, mtu 1514b) — 15 nodes (4 scheduling, 8 leaves, 3 shaping classes), depth 5
root  prio
├── mgmt  leaf (fifo flows by 5-tuple)  [priority 0]  match {tag: 1}
├── hypervisor  leaf (fifo flows by 5-tuple)  [priority 1]  match {tag: 2}
└── tenants  wfq  [priority 2]
    ├── vm1  prio  [weight 1]  match {vm: 1}
    │   │   ~ shaped by vm1-dst1  shape 10gbit burst 64kb  if {dst: 10.0.1.0/24}
    │   │     or vm1-dst2  shape 5gbit burst 64kb  if {dst: 10.0.2.0/24}
    │   │     or vm1-dst3  shape 1gbit burst 32kb  if {dst: 10.0.3.0/24}
    │   ├── vm1/kvs  leaf (fifo flows by 5-tuple, ≤64 outstanding)  [priority 0]  match {dport: 11211}
    │   └── vm1/batch  wfq  [priority 1]
    │       ├── vm1/hadoop  leaf (fair flows by 5-tuple)  [weight 1]  match {dport: [8020, 9000]}
    │       ├── vm1/spark  leaf (fair flows by 5-tuple)  [weight 1]  match {dport: 7077}
    │       └── vm1/other  leaf (fifo flows by 5-tuple)  [weight 1]
    ├── vm2  leaf (fifo flows by 5-tuple, unfilled attachment point)  [weight 2]  match {vm: 2}
    └── vm3  leaf (fair flows by 5-tuple)  [weight 4]  match {vm: 3}
"
    );
    // Nested shaping nodes sharing an ancestor: shown in full under each.
    let p = compile(
        "weft: 1
name: shared
nodes:
  - {name: root, type: wfq}
  - {name: top, type: shape, parent: root, rate: 10gbit}
  - {name: p1, type: shape, parent: top, rate: 1gbit, match: {dst: 10.0.1.0/24}}
  - {name: p2, type: shape, parent: top, rate: 2gbit}
  - {name: j1, type: leaf, parent: [p1, p2], match: {tag: 1}}
  - {name: j2, type: leaf, parent: [p1, p2], match: {tag: 2}}
  - {name: j3, type: leaf, parent: root, weight: 2}
",
    );
    assert_eq!(
        show::tree(&p),
        "\
policy shared — link 10gbit (overhead 20b, mtu 1514b) — 7 nodes (1 scheduling, 3 leaves, 3 shaping classes), depth 2
root  wfq
├── j1  leaf (fifo flows by 5-tuple)  [weight 1]  match {tag: 1}
│       ~ shaped by p1  shape 1gbit burst 3028b  if {dst: 10.0.1.0/24}
│           ~ shaped by top  shape 10gbit burst 3028b
│         or p2  shape 2gbit burst 3028b
│           ~ shaped by top  shape 10gbit burst 3028b
├── j2  leaf (fifo flows by 5-tuple)  [weight 1]  match {tag: 2}
│       ~ shaped by p1  shape 1gbit burst 3028b  if {dst: 10.0.1.0/24}
│           ~ shaped by top  shape 10gbit burst 3028b
│         or p2  shape 2gbit burst 3028b
│           ~ shaped by top  shape 10gbit burst 3028b
└── j3  leaf (fifo flows by 5-tuple)  [weight 2]
"
    );
}

#[test]
fn stacked_parallel_shaping_nodes_render_in_linear_size() {
    // Four levels of 30 parallel shaping nodes, each level shaping all of the next: listing
    // every path would take 30⁴ lines (58 MB before); each shaping node's ancestors are
    // listed once instead.
    let width = 30;
    let mut text = "weft: 1\nnodes:\n  - {name: root, type: wfq}\n".to_string();
    let mut above = vec!["root".to_string()];
    for level in 0..4 {
        let mut names = Vec::new();
        for i in 0..width {
            let name = format!("s{level}_{i}");
            text += &format!(
                "  - {{name: {name}, type: shape, parent: [{}], rate: 1gbit, match: {{tag: {i}}}}}\n",
                above.join(", ")
            );
            names.push(name);
        }
        above = names;
    }
    for (vm, leaf) in ["a", "b"].iter().enumerate() {
        text += &format!(
            "  - {{name: {leaf}, type: leaf, parent: [{}], match: {{vm: {vm}}}}}\n",
            above.join(", ")
        );
    }
    text += "  - {name: c, type: leaf, parent: root}\n";
    let p = compile(&text);
    let shaping_edges = width + 3 * width * width + 2 * width;
    let out = tree_on_small_stack(p);
    let lines = out.lines().count();
    assert!(
        lines <= 1 + 4 + shaping_edges,
        "{lines} lines for {shaping_edges} shaping edges"
    );
    assert!(out.contains("~ shaped by s0_0  shape 1gbit burst 3028b  if {tag: 0}\n"));
    assert!(out.contains("(and the shaping above it, shown earlier)\n"));
    // Both leaves list their 30 shaping nodes; `b`'s refer to what `a`'s showed.
    let b = &out[out.find("── b  leaf").unwrap()..];
    assert_eq!(b.matches("shown earlier").count(), width);
}

/// `weft policy dot` on Loom Fig. 1: a node under parallel shaping classes carries its weight
/// on each dashed edge (it was drawn without), and an unfilled attachment point is drawn
/// as one, not as an ordinary leaf.
#[test]
fn dot_keeps_the_weight_through_shaping_classes_and_marks_unfilled_points() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies/loom-fig1.yaml");
    let p = load(&path, &LoadOptions::default()).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let dot = show::dot(&p);
    for dst in ["vm1-dst1", "vm1-dst2", "vm1-dst3"] {
        let edge = format!("\"vm1\" -> \"{dst}\" [style=dashed, label=\"w:1\"];");
        assert!(dot.contains(&edge), "no `{edge}` in\n{dot}");
    }
    assert!(
        dot.contains("\"vm2\" [shape=ellipse, style=\"dotted,filled\"")
            && dot.contains("vm2\\nattach (unfilled: a leaf)"),
        "{dot}"
    );
}

/// A backslash is allowed in a name, but in a Graphviz label `\n` breaks the line and `\N`
/// stands for the node's id: `weft policy dot` drew a leaf named `a\nb` as `a` over `b`, and
/// a shaping class named `x\N` with its id. Labels escape the backslash as ids do.
#[test]
fn dot_labels_keep_a_backslash_in_a_name() {
    let p = compile(
        "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  \
         - {name: 'x\\N', type: shape, parent: root, rate: 1gbit}\n  \
         - {name: 'a\\nb', type: leaf, parent: 'x\\N', match: {tag: 1}}\n  \
         - {name: c, type: leaf, parent: root}\n",
    );
    assert_eq!(p.nodes[1].name, "a\\nb");
    let dot = show::dot(&p);
    assert!(
        dot.contains("\"a\\\\nb\" [shape=ellipse, style=\"filled\", fillcolor=\"#e8f4e8\", label=\"a\\\\nb\\nleaf\\n{tag: 1}\"]"),
        "{dot}"
    );
    assert!(dot.contains("label=\"x\\\\N\\nshape 1gbit\""), "{dot}");
}

/// The one-line summary (`weft policy check`'s `ok:` line, `--json`'s `summary`) counts in
/// the singular where there is one: "1 leaf", not "1 leaves".
#[test]
fn the_summary_counts_one_in_the_singular() {
    let one = compile("weft: 1\nnodes:\n  - {name: root, type: leaf}\n");
    assert_eq!(
        show::summary(&one),
        "1 node (0 scheduling, 1 leaf, 0 shaping classes), depth 1"
    );
    let p = compile(
        "weft: 1\nnodes:\n  - {name: root, type: fifo}\n  \
         - {name: s, type: shape, parent: root, rate: 1gbit}\n  \
         - {name: a, type: leaf, parent: s, match: {tag: 1}}\n  - {name: b, type: leaf, parent: root}\n",
    );
    assert_eq!(
        show::summary(&p),
        "4 nodes (1 scheduling, 2 leaves, 1 shaping class), depth 2"
    );
}
