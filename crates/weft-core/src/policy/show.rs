//! Rendering a compiled program: a readable tree, stable JSON and Graphviz.
//!
//! The JSON is the *normalized* policy: composed (sub-policies inlined, names prefixed),
//! defaults made explicit, units normalized. It is itself a valid policy file (JSON is YAML),
//! and compiling it yields the same program — a property the tests check on random policies.
//! Key order is fixed, so the output is stable and diffable.
//!
//! The tree view is built without recursion and its size stays linear in the policy's:
//! nodes deeper than depth 32 (the root is at depth 1) are drawn at the indentation of depth
//! 32 with their depth written out (`└── [depth 1234] n1233  wfq`), and when listing the
//! shaping nodes above an edge with every shared ancestor repeated would take more than 256
//! lines, a shaping node whose ancestors were already listed gets one line saying so (see
//! [`tree`]).

use serde_json::{json, Map, Value};

use super::program::{Algo, FlowKey, FlowSched, Node, NodeId, Program, Shaper, ShaperId};
use crate::classifier::{proto_name, Field, Match, FIELDS};
use crate::units::{format_rate, format_size, format_time};

fn match_json(m: &Match) -> Value {
    let mut o = Map::new();
    for f in FIELDS {
        if m.count(f) == 0 {
            continue;
        }
        let vals: Vec<Value> = match f {
            Field::Src | Field::Dst => m.prefixes(f).iter().map(|p| json!(p.to_string())).collect(),
            Field::Proto => m.proto.iter().map(|&p| json!(proto_name(p))).collect(),
            _ => m.ints(f).into_iter().map(|v| json!(v)).collect(),
        };
        o.insert(f.name().to_string(), Value::Array(vals));
    }
    Value::Object(o)
}

/// `parent:` of a node or shaping class: its shaping parents' names if it has any, else its
/// scheduling parent's; one name as a string, several as a list.
fn parent_json(p: &Program, sched_parent: NodeId, shaping_parents: &[ShaperId]) -> Value {
    let names: Vec<&str> = if shaping_parents.is_empty() {
        vec![&p.node(sched_parent).name]
    } else {
        shaping_parents
            .iter()
            .map(|&s| p.shaper(s).name.as_str())
            .collect()
    };
    if names.len() == 1 {
        json!(names[0])
    } else {
        json!(names)
    }
}

/// The normalized policy as JSON (see the module doc). [`Json`] writes the same text
/// without holding the whole value (a policy of 100,000 nodes took 650 MB as one value).
pub fn to_json(p: &Program) -> Value {
    let mut v = head_json(p);
    let nodes = p
        .nodes
        .iter()
        .map(|n| node_json(p, n))
        .chain(p.shapers.iter().map(|s| shaper_json(p, s)))
        .collect();
    v["nodes"] = Value::Array(nodes);
    v
}

/// [`to_json`] for `serde_json::to_writer_pretty` and the like: the same text, one node's
/// value at a time.
pub struct Json<'p>(pub &'p Program);

impl serde::Serialize for Json<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Nodes<'p>(&'p Program);
        impl serde::Serialize for Nodes<'_> {
            fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
                let p = self.0;
                let mut seq = ser.serialize_seq(Some(p.nodes.len() + p.shapers.len()))?;
                for n in &p.nodes {
                    seq.serialize_element(&node_json(p, n))?;
                }
                for s in &p.shapers {
                    seq.serialize_element(&shaper_json(p, s))?;
                }
                seq.end()
            }
        }
        let head = head_json(self.0);
        let head = head.as_object().expect("an object");
        let mut m = ser.serialize_map(Some(head.len()))?;
        for (k, v) in head {
            if k == "nodes" {
                m.serialize_entry(k, &Nodes(self.0))?;
            } else {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

/// The document's keys in order, `nodes` empty.
fn head_json(p: &Program) -> Value {
    json!({
        "weft": 1,
        "name": p.name,
        "link": {
            "rate": format_rate(p.link.rate_bps),
            "overhead": format_size(p.link.overhead_bytes),
            "mtu": format_size(p.link.mtu_bytes),
        },
        "limits": {
            "max_depth": p.limits.max_depth,
            "max_nodes": p.limits.max_nodes,
            "max_shaping_depth": p.limits.max_shaping_depth,
            "max_match_shapes": p.limits.max_match_shapes,
        },
        "nodes": [],
    })
}

/// Node `n`'s entry.
fn node_json(p: &Program, n: &Node) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(n.name));
    let ty = match &n.algo {
        Algo::Leaf(l) if l.unfilled_attachment => "attach",
        a => a.name(),
    };
    o.insert("type".into(), json!(ty));
    if let Some(parent) = n.parent {
        o.insert("parent".into(), parent_json(p, parent, &n.shaping_parents));
        match &p.node(parent).algo {
            Algo::Prio => {
                o.insert("priority".into(), json!(n.edge.priority));
            }
            Algo::Wfq => {
                o.insert("weight".into(), json!(n.edge.weight));
            }
            Algo::Drr => {
                o.insert("quantum".into(), json!(format_size(n.edge.quantum_bytes)));
            }
            _ => {}
        }
    }
    if n.edge.rate_bps != 0 {
        o.insert("rate".into(), json!(format_rate(n.edge.rate_bps)));
    }
    match &n.algo {
        Algo::Lstf { default_slack_ps } => {
            o.insert(
                "default_slack".into(),
                json!(format_time(*default_slack_ps)),
            );
        }
        Algo::Edf {
            default_deadline_ps,
        } => {
            o.insert(
                "default_deadline".into(),
                json!(format_time(*default_deadline_ps)),
            );
        }
        Algo::Leaf(l) => {
            let by = match l.flow_key {
                FlowKey::FiveTuple => "five-tuple",
                FlowKey::Flow => "flow",
                FlowKey::None => "none",
            };
            let sched = match l.flow_sched {
                FlowSched::Fifo => "fifo",
                FlowSched::Fair => "fair",
            };
            o.insert(
                "flows".into(),
                json!({"by": by, "sched": sched, "quantum": format_size(l.flow_quantum_bytes)}),
            );
            let lim = |pk: Option<u64>, by: Option<u64>| {
                let mut m = Map::new();
                if let Some(v) = pk {
                    m.insert("packets".into(), json!(v));
                }
                if let Some(v) = by {
                    m.insert("bytes".into(), json!(format_size(v)));
                }
                m
            };
            let l1 = lim(l.limit_packets, l.limit_bytes);
            if !l1.is_empty() {
                o.insert("limit".into(), Value::Object(l1));
            }
            let l2 = lim(l.flow_limit_packets, l.flow_limit_bytes);
            if !l2.is_empty() {
                o.insert("flow_limit".into(), Value::Object(l2));
            }
            if let Some(v) = l.outstanding {
                o.insert("outstanding".into(), json!(v));
            }
        }
        _ => {}
    }
    if !n.matches.is_any() {
        o.insert("match".into(), match_json(&n.matches));
    }
    Value::Object(o)
}

/// Shaping class `s`'s entry.
fn shaper_json(p: &Program, s: &Shaper) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(s.name));
    o.insert("type".into(), json!("shape"));
    o.insert(
        "parent".into(),
        parent_json(p, s.sched_parent, &s.shaping_parents),
    );
    o.insert("rate".into(), json!(format_rate(s.rate_bps)));
    o.insert("burst".into(), json!(format_size(s.burst_bytes)));
    if !s.matches.is_any() {
        o.insert("match".into(), match_json(&s.matches));
    }
    Value::Object(o)
}

/// One-line summary: nodes, leaves, shaping classes, depth.
pub fn summary(p: &Program) -> String {
    // "1 leaf", "2 leaves", "0 shaping classes".
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} ({} scheduling, {}, {}), depth {}",
        count(p.nodes.len() + p.shapers.len(), "node", "nodes"),
        p.scheduling_nodes(),
        count(p.leaves.len(), "leaf", "leaves"),
        count(p.shapers.len(), "shaping class", "shaping classes"),
        p.depth()
    )
}

fn node_label(p: &Program, n: &Node) -> String {
    let mut s = format!("{}  {}", n.name, n.algo.name());
    match &n.algo {
        Algo::Senic { capacity_bps } if n.parent.is_none() || *capacity_bps != p.link.rate_bps => {
            s += &format!(" capacity {}", format_rate(*capacity_bps));
        }
        Algo::Lstf { default_slack_ps } => {
            s += &format!(" (default slack {})", format_time(*default_slack_ps))
        }
        Algo::Edf {
            default_deadline_ps,
        } => s += &format!(" (default deadline {})", format_time(*default_deadline_ps)),
        Algo::Leaf(l) => {
            let flows = match (l.flow_key, l.flow_sched) {
                (FlowKey::None, _) => "one queue".to_string(),
                (k, sched) => format!(
                    "{} flows by {}",
                    if sched == FlowSched::Fair {
                        "fair"
                    } else {
                        "fifo"
                    },
                    if k == FlowKey::Flow {
                        "flow id"
                    } else {
                        "5-tuple"
                    }
                ),
            };
            s += &format!(" ({flows}");
            if let Some(o) = l.outstanding {
                s += &format!(", ≤{o} outstanding");
            }
            if l.unfilled_attachment {
                s += ", unfilled attachment point";
            }
            s += ")";
        }
        _ => {}
    }
    if let Some(parent) = n.parent {
        match p.node(parent).algo {
            Algo::Prio => s += &format!("  [priority {}]", n.edge.priority),
            Algo::Wfq => s += &format!("  [weight {}]", n.edge.weight),
            Algo::Drr => s += &format!("  [quantum {}]", format_size(n.edge.quantum_bytes)),
            Algo::Senic { .. } => s += &format!("  [rate {}]", format_rate(n.edge.rate_bps)),
            _ => {}
        }
    }
    if !n.matches.is_any() {
        s += &format!("  match {}", n.matches);
    }
    s
}

/// Depth (the root is at depth 1) down to which the tree view indents: deeper nodes are
/// drawn at the indentation of this depth, with their depth written out.
const INDENT_DEPTH: usize = 32;

/// Levels of nested shaping nodes (the ones on a node's edge are level 1) the tree view
/// indents; deeper ones are drawn at this indentation with their level written out.
const INDENT_SHAPING_LEVEL: usize = 32;

/// Lines one node's shaping nodes may take when each is shown with all the shaping nodes
/// above it (see [`tree`]).
const FULL_SHAPING_LINES: u64 = 256;

/// For each shaping node, the lines it takes shown with all the shaping nodes above it
/// (1 + those of its shaping parents, saturating): a node's shaping parents may share
/// ancestors, so this grows exponentially with the levels. Iterative; linear in the
/// shaping nodes and their edges.
fn full_shaping_lines(p: &Program) -> Vec<u64> {
    // 0: not computed yet (every shaping node takes at least its own line).
    let mut lines = vec![0u64; p.shapers.len()];
    let mut stack: Vec<(usize, bool)> = Vec::new();
    for start in 0..p.shapers.len() {
        stack.push((start, false));
        while let Some((s, parents_done)) = stack.pop() {
            if lines[s] != 0 {
                continue;
            }
            let parents = &p.shapers[s].shaping_parents;
            if parents_done {
                lines[s] = parents
                    .iter()
                    .fold(1u64, |acc, &q| acc.saturating_add(lines[q.index()]));
            } else {
                stack.push((s, true));
                stack.extend(
                    parents
                        .iter()
                        .filter(|&&q| lines[q.index()] == 0)
                        .map(|&q| (q.index(), false)),
                );
            }
        }
    }
    lines
}

/// The lines of the shaping nodes on one node's edge, each followed by the shaping nodes
/// above it, indented one level further. `full`: repeat shared ancestors in full wherever
/// they recur; otherwise a shaping node whose ancestors were already shown (`shown`) is
/// given one line saying so. Iterative.
fn shaping_lines(
    p: &Program,
    ids: &[ShaperId],
    base: &str,
    full: bool,
    shown: &mut [bool],
    out: &mut String,
) {
    // (shaping node, first of its siblings, level from 1), the next on top.
    let mut stack: Vec<(ShaperId, bool, usize)> = Vec::new();
    let push = |stack: &mut Vec<(ShaperId, bool, usize)>, ids: &[ShaperId], level: usize| {
        stack.extend(
            ids.iter()
                .enumerate()
                .rev()
                .map(|(i, &sid)| (sid, i == 0, level)),
        );
    };
    push(&mut stack, ids, 1);
    while let Some((sid, first, level)) = stack.pop() {
        let s = p.shaper(sid);
        let sep = if first { "~ shaped by" } else { "  or" };
        out.push_str(base);
        for _ in 1..level.min(INDENT_SHAPING_LEVEL) {
            out.push_str("    ");
        }
        out.push_str(sep);
        out.push(' ');
        if level > INDENT_SHAPING_LEVEL {
            out.push_str(&format!("[level {level}] "));
        }
        out.push_str(&format!(
            "{}  shape {} burst {}{}",
            s.name,
            format_rate(s.rate_bps),
            format_size(s.burst_bytes),
            if s.matches.is_any() {
                String::new()
            } else {
                format!("  if {}", s.matches)
            }
        ));
        if s.shaping_parents.is_empty() {
            out.push('\n');
        } else if !full && shown[sid.index()] {
            out.push_str("  (and the shaping above it, shown earlier)\n");
        } else {
            out.push('\n');
            shown[sid.index()] = true;
            push(&mut stack, &s.shaping_parents, level + 1);
        }
    }
}

/// The program as an indented tree, shaping nodes shown on the edges they shape.
///
/// Built without recursion, and its size stays linear in the size of the policy:
/// * nodes deeper than depth 32 (the root is at depth 1, as in the summary's `depth`) are
///   drawn at the indentation of depth 32 with their depth written after the branch,
///   `└── [depth 1234] n1233  wfq`: the node is a child of the nearest line above it at
///   the depth one less; nested shaping nodes beyond level 32 likewise, `[level 40]`;
/// * a node's shaping nodes are listed with all the shaping nodes above each, shared ones
///   repeated, unless that takes more than 256 lines (stacked levels of parallel shaping
///   nodes multiply); then a shaping node whose ancestors were already listed, for this
///   node or an earlier one, gets one line saying so.
pub fn tree(p: &Program) -> String {
    let mut out = format!(
        "policy {} — link {} (overhead {}, mtu {}) — {}\n",
        p.name,
        format_rate(p.link.rate_bps),
        format_size(p.link.overhead_bytes),
        format_size(p.link.mtu_bytes),
        summary(p)
    );
    let full_lines = full_shaping_lines(p);
    let mut shown = vec![false; p.shapers.len()];
    // The ancestors' continuation segments (`│   ` or four spaces) drawn before a line:
    // `prefix[..ends[k]]` holds the first `k`, for the ancestors at depths 2..=k+1.
    let mut prefix = String::new();
    let mut ends: Vec<usize> = vec![0];
    // (node, last of its siblings), the next on top: a depth-first walk in child order.
    let mut stack: Vec<(NodeId, bool)> = vec![(NodeId::ROOT, true)];
    while let Some((id, last)) = stack.pop() {
        let n = p.node(id);
        // Depth from 1 at the root.
        let depth = n.depth as usize + 1;
        let (branch, cont) = if depth == 1 {
            ("", "")
        } else if last {
            ("└── ", "    ")
        } else {
            ("├── ", "│   ")
        };
        let drawn = depth.min(INDENT_DEPTH).saturating_sub(2);
        prefix.truncate(ends[drawn]);
        ends.truncate(drawn + 1);
        out.push_str(&prefix);
        out.push_str(branch);
        if depth > INDENT_DEPTH {
            out.push_str(&format!("[depth {depth}] "));
        }
        out.push_str(&node_label(p, n));
        out.push('\n');
        if !n.shaping_parents.is_empty() {
            let bar = if n.children.is_empty() {
                "    "
            } else {
                "│   "
            };
            let base = format!("{prefix}{cont}{bar}");
            let lines = n
                .shaping_parents
                .iter()
                .fold(0u64, |acc, &s| acc.saturating_add(full_lines[s.index()]));
            shaping_lines(
                p,
                &n.shaping_parents,
                &base,
                lines <= FULL_SHAPING_LINES,
                &mut shown,
                &mut out,
            );
        }
        if (2..INDENT_DEPTH).contains(&depth) {
            prefix.push_str(cont);
            ends.push(prefix.len());
        }
        let last = n.children.last();
        stack.extend(n.children.iter().rev().map(|c| (c, Some(c) == last)));
    }
    out
}

fn dot_id(s: &str) -> String {
    format!("\"{}\"", dot_text(s))
}

/// Text for a label (an "escString": `\n` breaks a line, `\N` names the node, ...): a
/// backslash in a name stays a backslash (`a\nb` is not drawn on two lines), a quote a quote.
fn dot_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz: scheduling nodes as boxes, leaves as ellipses, shaping nodes as dashed
/// hexagons; edges point from child to parent, leaves on top as in Loom's Fig. 1.
pub fn dot(p: &Program) -> String {
    let mut out = String::new();
    out.push_str(&format!("digraph {} {{\n", dot_id(&p.name)));
    out.push_str("  rankdir=BT;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    for n in &p.nodes {
        let (shape, style, kind) = match &n.algo {
            // An attachment point no sub-policy filled: a FIFO leaf, drawn as a place.
            Algo::Leaf(l) if l.unfilled_attachment => (
                "ellipse",
                "dotted,filled\", fillcolor=\"#f4f4f4",
                "attach (unfilled: a leaf)",
            ),
            Algo::Leaf(_) => ("ellipse", "filled\", fillcolor=\"#e8f4e8", "leaf"),
            a => ("box", "rounded,filled\", fillcolor=\"#e8eef8", a.name()),
        };
        let mut label = format!("{}\\n{kind}", dot_text(&n.name));
        if !n.matches.is_any() {
            label += &format!("\\n{}", dot_text(&n.matches.to_string().replace('"', "'")));
        }
        out.push_str(&format!(
            "  {} [shape={shape}, style=\"{style}\", label=\"{label}\"];\n",
            dot_id(&n.name),
        ));
    }
    for s in &p.shapers {
        let mut label = format!("{}\\nshape {}", dot_text(&s.name), format_rate(s.rate_bps));
        if !s.matches.is_any() {
            label += &format!("\\n{}", dot_text(&s.matches.to_string()));
        }
        out.push_str(&format!(
            "  {} [shape=hexagon, style=\"dashed,filled\", fillcolor=\"#fdf0e0\", label=\"{label}\"];\n",
            dot_id(&s.name),
        ));
    }
    for n in &p.nodes {
        let Some(parent) = n.parent else { continue };
        let edge_label = match p.node(parent).algo {
            Algo::Prio => format!("prio {}", n.edge.priority),
            Algo::Wfq => format!("w:{}", n.edge.weight),
            Algo::Drr => format!("q:{}", format_size(n.edge.quantum_bytes)),
            Algo::Senic { .. } => format_rate(n.edge.rate_bps),
            _ => String::new(),
        };
        let label = if edge_label.is_empty() {
            String::new()
        } else {
            format!("label=\"{edge_label}\"")
        };
        if n.shaping_parents.is_empty() {
            let attr = if label.is_empty() {
                String::new()
            } else {
                format!(" [{label}]")
            };
            out.push_str(&format!(
                "  {} -> {}{attr};\n",
                dot_id(&n.name),
                dot_id(&p.node(parent).name)
            ));
        } else {
            // Through shaping classes: the edge parameter the scheduling parent reads is
            // still this node's, so every dashed edge carries it.
            let attr = if label.is_empty() {
                " [style=dashed]".to_string()
            } else {
                format!(" [style=dashed, {label}]")
            };
            for &s in &n.shaping_parents {
                out.push_str(&format!(
                    "  {} -> {}{attr};\n",
                    dot_id(&n.name),
                    dot_id(&p.shaper(s).name)
                ));
            }
        }
    }
    for s in &p.shapers {
        if s.shaping_parents.is_empty() {
            out.push_str(&format!(
                "  {} -> {} [style=dashed];\n",
                dot_id(&s.name),
                dot_id(&p.node(s.sched_parent).name)
            ));
        } else {
            for &x in &s.shaping_parents {
                out.push_str(&format!(
                    "  {} -> {} [style=dashed];\n",
                    dot_id(&s.name),
                    dot_id(&p.shaper(x).name)
                ));
            }
        }
    }
    out.push_str("}\n");
    out
}
