//! An independent fluid model of what a policy means: weighted max-min sharing, written from
//! the definition, not from weft's engines (it reads no weft type).
//!
//! A policy is a tree of [`Node`]s: `prio` and `wfq` scheduling nodes and leaves. Between a
//! scheduling node and its children may stand shaping classes ([`Item::Shape`]): a rate limit
//! on the total throughput of everything below it. A shaping class may cover one child (a
//! leaf or an inner node, i.e. several leaves), several sibling children at once (a shared
//! rate-limit class, Loom Fig. 11) or another shaping class (nested limits); shaping classes
//! are transparent to scheduling: the children below them are the scheduling node's children
//! and their `weight`/`priority` are read by it.
//!
//! **Units.** Every rate is in bits per second *of wire time*, as the link counts it: a frame
//! of `L` bytes costs `L + overhead` bytes. The generated policies set the link's per-frame
//! overhead to 0 (`overhead: 0b`), so there wire bytes = frame bytes and a leaf's measured
//! frame bytes compare directly with the model; a driver with an overhead converts (a leaf's
//! frame rate is its wire rate × `L / (L + overhead)`).
//!
//! **Semantics.** `allocate(node, c)` gives the node's leaves their steady rates when the node
//! may send at most `c`:
//! * a leaf gets `min(c, demand)` (`demand` = [`f64::INFINITY`] for a backlogged leaf);
//! * every child's *demand* is what it would send alone on an infinite link: a leaf's demand,
//!   an inner node's the sum of its items', a shaping class's `min(rate, sum of its items')`;
//! * `prio`: children in increasing `priority` (ties in declaration order), each taking
//!   `min(its demand, what is left of c, what is left of every shaping class above it)`;
//! * `wfq`: progressive filling (water-filling). A level `t` rises from 0; every child not
//!   yet frozen gets `weight × t`. A child freezes when it reaches its demand, the members of a
//!   shaping class freeze when the class's total reaches its rate, everybody freezes when the
//!   total reaches `c`. So a child that wants less than its weighted share gets its demand and
//!   the rest is re-divided among the others by weight, and a class's members share its rate
//!   by weight;
//! * each child then runs `allocate(child, its share)`.

#![allow(dead_code)] // each test binary uses a part

use std::collections::BTreeMap;

/// A scheduling discipline of an inner node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sched {
    /// Strict priority, smaller `priority` first.
    Prio,
    /// Weighted max-min share by `weight`.
    Wfq,
}

/// A node of the scheduling tree.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    /// Read by a `wfq` parent.
    pub weight: u64,
    /// Read by a `prio` parent.
    pub priority: u64,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// Where packets enter; `demand_bps` = `f64::INFINITY` when backlogged.
    Leaf { demand_bps: f64 },
    /// A scheduling node.
    Inner { sched: Sched, children: Vec<Item> },
}

/// What hangs below a scheduling node (or a shaping class).
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Node(Node),
    /// A shaping class: the total of `children` is at most `rate_bps`.
    Shape {
        name: String,
        rate_bps: f64,
        children: Vec<Item>,
    },
}

impl Node {
    pub(crate) fn leaf(name: &str, demand_bps: f64) -> Node {
        Node {
            name: name.into(),
            weight: 1,
            priority: 0,
            kind: Kind::Leaf { demand_bps },
        }
    }
    pub(crate) fn inner(name: &str, sched: Sched, children: Vec<Item>) -> Node {
        Node {
            name: name.into(),
            weight: 1,
            priority: 0,
            kind: Kind::Inner { sched, children },
        }
    }
    pub(crate) fn weight(mut self, w: u64) -> Node {
        self.weight = w;
        self
    }
    pub(crate) fn priority(mut self, p: u64) -> Node {
        self.priority = p;
        self
    }
    /// This node as an item.
    pub(crate) fn item(self) -> Item {
        Item::Node(self)
    }
    /// This node below a shaping class of `rate_bps`.
    pub(crate) fn shaped(self, name: &str, rate_bps: f64) -> Item {
        Item::Shape {
            name: name.into(),
            rate_bps,
            children: vec![Item::Node(self)],
        }
    }
}

/// A backlogged leaf's demand.
pub(crate) const BACKLOGGED: f64 = f64::INFINITY;

/// What `n` sends alone on an infinite link.
pub(crate) fn demand(n: &Node) -> f64 {
    match &n.kind {
        Kind::Leaf { demand_bps } => *demand_bps,
        Kind::Inner { children, .. } => children.iter().map(item_demand).sum(),
    }
}

fn item_demand(it: &Item) -> f64 {
    match it {
        Item::Node(n) => demand(n),
        Item::Shape {
            rate_bps, children, ..
        } => children.iter().map(item_demand).sum::<f64>().min(*rate_bps),
    }
}

/// Every leaf's steady rate (bits/s of wire time) when `root` runs on a link of `link_bps`.
pub(crate) fn rates(root: &Node, link_bps: f64) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    allocate(root, link_bps, &mut out);
    out
}

/// Gives `n`'s leaves their rates when `n` may send at most `cap`.
pub(crate) fn allocate(n: &Node, cap: f64, out: &mut BTreeMap<String, f64>) {
    match &n.kind {
        Kind::Leaf { demand_bps } => {
            out.insert(n.name.clone(), cap.min(*demand_bps));
        }
        Kind::Inner { sched, children } => {
            // The scheduling children, each with the shaping classes above it (indices in
            // `class_rates`).
            let mut kids: Vec<(&Node, Vec<usize>)> = Vec::new();
            let mut class_rates: Vec<f64> = Vec::new();
            flatten(children, &mut Vec::new(), &mut kids, &mut class_rates);
            let demands: Vec<f64> = kids.iter().map(|(k, _)| demand(k)).collect();
            let classes: Vec<&[usize]> = kids.iter().map(|(_, c)| c.as_slice()).collect();
            let shares = match sched {
                Sched::Prio => {
                    let prio: Vec<u64> = kids.iter().map(|(k, _)| k.priority).collect();
                    strict(cap, &prio, &demands, &class_rates, &classes)
                }
                Sched::Wfq => {
                    let w: Vec<f64> = kids.iter().map(|(k, _)| k.weight as f64).collect();
                    water_fill(cap, &w, &demands, &class_rates, &classes)
                }
            };
            for ((k, _), s) in kids.iter().zip(shares) {
                allocate(k, s, out);
            }
        }
    }
}

fn flatten<'a>(
    items: &'a [Item],
    above: &mut Vec<usize>,
    kids: &mut Vec<(&'a Node, Vec<usize>)>,
    class_rates: &mut Vec<f64>,
) {
    for it in items {
        match it {
            Item::Node(n) => kids.push((n, above.clone())),
            Item::Shape {
                rate_bps, children, ..
            } => {
                class_rates.push(*rate_bps);
                above.push(class_rates.len() - 1);
                flatten(children, above, kids, class_rates);
                above.pop();
            }
        }
    }
}

/// Strict priority: in increasing `prio` (stable), each child takes what its demand, the
/// capacity left and its classes' rates left allow.
fn strict(
    cap: f64,
    prio: &[u64],
    d: &[f64],
    class_rates: &[f64],
    classes: &[&[usize]],
) -> Vec<f64> {
    let mut order: Vec<usize> = (0..d.len()).collect();
    order.sort_by_key(|&i| prio[i]);
    let mut left = cap;
    let mut class_left = class_rates.to_vec();
    let mut x = vec![0.0; d.len()];
    for i in order {
        let mut v = d[i].min(left);
        for &c in classes[i] {
            v = v.min(class_left[c]);
        }
        let v = v.max(0.0);
        x[i] = v;
        left -= v;
        for &c in classes[i] {
            class_left[c] -= v;
        }
    }
    x
}

/// Weighted progressive filling with per-child demands and class rates (see the module doc).
fn water_fill(
    cap: f64,
    w: &[f64],
    d: &[f64],
    class_rates: &[f64],
    classes: &[&[usize]],
) -> Vec<f64> {
    let n = w.len();
    let mut x = vec![0.0; n];
    let mut frozen = vec![false; n];
    // `level ≤ bound` within rounding counts as reaching the bound.
    let reached = |bound: f64, level: f64| bound <= level * (1.0 + 1e-12) + 1e-9;
    while frozen.iter().any(|f| !f) {
        let active = |i: usize| !frozen[i];
        let fixed_total: f64 = (0..n).filter(|&i| frozen[i]).map(|i| x[i]).sum();
        let active_w: f64 = (0..n).filter(|&i| active(i)).map(|i| w[i]).sum();
        // The level at which each constraint binds.
        let link_level = (cap - fixed_total).max(0.0) / active_w;
        let class_level: Vec<f64> = (0..class_rates.len())
            .map(|c| {
                let members = (0..n).filter(|&i| classes[i].contains(&c));
                let (fixed, wsum) = members.fold((0.0, 0.0), |(f, ws), i| {
                    if frozen[i] {
                        (f + x[i], ws)
                    } else {
                        (f, ws + w[i])
                    }
                });
                if wsum == 0.0 {
                    f64::INFINITY
                } else {
                    (class_rates[c] - fixed).max(0.0) / wsum
                }
            })
            .collect();
        let mut level = link_level;
        for i in (0..n).filter(|&i| active(i)) {
            level = level.min(d[i] / w[i]);
        }
        for &l in &class_level {
            level = level.min(l);
        }
        // Freeze what binds at `level`.
        let mut freeze = vec![false; n];
        for i in (0..n).filter(|&i| active(i)) {
            if reached(d[i] / w[i], level)
                || reached(link_level, level)
                || classes[i].iter().any(|&c| reached(class_level[c], level))
            {
                freeze[i] = true;
            }
        }
        for i in 0..n {
            if freeze[i] {
                frozen[i] = true;
                x[i] = (w[i] * level).min(d[i]);
            }
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = 1e9;

    fn close(got: &BTreeMap<String, f64>, want: &[(&str, f64)]) {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (name, v) in want {
            let g = got[*name];
            assert!((g - v).abs() < 1.0, "{name}: {g} != {v} ({got:?})");
        }
    }

    /// One child: root (wfq) → item. The root of a policy is a scheduling node.
    fn under_root(it: Item) -> Node {
        Node::inner("root", Sched::Wfq, vec![it])
    }

    #[test]
    fn wfq_1_7_under_a_4g_class() {
        let t = Node::inner(
            "t",
            Sched::Wfq,
            vec![
                Node::leaf("a", BACKLOGGED).weight(1).item(),
                Node::leaf("b", BACKLOGGED).weight(7).item(),
            ],
        );
        let root = under_root(t.shaped("cls", 4.0 * G));
        close(&rates(&root, 10.0 * G), &[("a", 0.5 * G), ("b", 3.5 * G)]);
    }

    #[test]
    fn prio_kvs_above_batch_under_a_2g_class() {
        let t = Node::inner(
            "t",
            Sched::Prio,
            vec![
                Node::leaf("kvs", BACKLOGGED).priority(0).item(),
                Node::leaf("batch", BACKLOGGED).priority(1).item(),
            ],
        );
        let root = under_root(t.shaped("cls", 2.0 * G));
        close(&rates(&root, 10.0 * G), &[("kvs", 2.0 * G), ("batch", 0.0)]);
    }

    #[test]
    fn nested_limits_4g_over_a_capped_half_and_b_unlimited() {
        let t = Node::inner(
            "t",
            Sched::Wfq,
            vec![
                Node::leaf("a", BACKLOGGED).shaped("sa", 0.5 * G),
                Node::leaf("b", BACKLOGGED).item(),
            ],
        );
        let root = under_root(t.shaped("cls", 4.0 * G));
        close(&rates(&root, 10.0 * G), &[("a", 0.5 * G), ("b", 3.5 * G)]);
    }

    #[test]
    fn a_demand_limited_childs_leftover_goes_to_its_siblings() {
        // 10G among weights 1:1:2; a wants 1G (its share is 2.5G): b and c share the other 9G
        // 1:2.
        let root = Node::inner(
            "root",
            Sched::Wfq,
            vec![
                Node::leaf("a", 1.0 * G).weight(1).item(),
                Node::leaf("b", BACKLOGGED).weight(1).item(),
                Node::leaf("c", BACKLOGGED).weight(2).item(),
            ],
        );
        close(
            &rates(&root, 10.0 * G),
            &[("a", 1.0 * G), ("b", 3.0 * G), ("c", 6.0 * G)],
        );
    }

    #[test]
    fn a_capped_childs_leftover_goes_to_its_siblings() {
        // wfq 1:1 on 10G, a capped at 2G: b gets 8G.
        let root = Node::inner(
            "root",
            Sched::Wfq,
            vec![
                Node::leaf("a", BACKLOGGED).shaped("sa", 2.0 * G),
                Node::leaf("b", BACKLOGGED).item(),
            ],
        );
        close(&rates(&root, 10.0 * G), &[("a", 2.0 * G), ("b", 8.0 * G)]);
    }

    #[test]
    fn prio_gives_the_rest_to_lower_priorities() {
        // 10G: hi wants 4G, mid is capped at 3G, lo backlogged gets the last 3G.
        let root = Node::inner(
            "root",
            Sched::Prio,
            vec![
                Node::leaf("lo", BACKLOGGED).priority(2).item(),
                Node::leaf("hi", 4.0 * G).priority(0).item(),
                Node::leaf("mid", BACKLOGGED)
                    .priority(1)
                    .shaped("sm", 3.0 * G),
            ],
        );
        close(
            &rates(&root, 10.0 * G),
            &[("hi", 4.0 * G), ("mid", 3.0 * G), ("lo", 3.0 * G)],
        );
    }

    #[test]
    fn shared_class_loom_fig11() {
        // 40G, three jobs 1:1:1, j1 and j2 limited together to 10G: 5, 5, and j0 30.
        let root = Node::inner(
            "jobs",
            Sched::Wfq,
            vec![
                Node::leaf("j0", BACKLOGGED).item(),
                Item::Shape {
                    name: "dst2".into(),
                    rate_bps: 10.0 * G,
                    children: vec![
                        Node::leaf("j1", BACKLOGGED).item(),
                        Node::leaf("j2", BACKLOGGED).item(),
                    ],
                },
            ],
        );
        close(
            &rates(&root, 40.0 * G),
            &[("j0", 30.0 * G), ("j1", 5.0 * G), ("j2", 5.0 * G)],
        );
    }

    #[test]
    fn shared_class_with_weights_and_a_demand_limited_member() {
        // A shared 6G class over x (weight 1, wants 1G) and y (weight 3); z (weight 4) outside.
        // The level t rises: x freezes at its demand (t = 1G); the link binds next, at
        // 1 + 3t + 4t = 10 → t = 9/7 G, before the class would (1 + 3t = 6 → t = 5/3 G):
        // y = 27/7 G, z = 36/7 G.
        let root = Node::inner(
            "root",
            Sched::Wfq,
            vec![
                Item::Shape {
                    name: "s".into(),
                    rate_bps: 6.0 * G,
                    children: vec![
                        Node::leaf("x", 1.0 * G).weight(1).item(),
                        Node::leaf("y", BACKLOGGED).weight(3).item(),
                    ],
                },
                Node::leaf("z", BACKLOGGED).weight(4).item(),
            ],
        );
        close(
            &rates(&root, 10.0 * G),
            &[("x", 1.0 * G), ("y", 27.0 / 7.0 * G), ("z", 36.0 / 7.0 * G)],
        );
    }

    #[test]
    fn nested_shape_over_shape_and_an_inner_node() {
        // Outer 3G class over (inner 1G class over a) and an inner wfq node {b, c} 1:1, all
        // under a wfq root with d (weight 1) on a 10G link. Root: the class's child group
        // {a, n} and d; a ≤ 1G, a + n ≤ 3G → a = 1, n = 2 (level 1.5 would give a 1.5 > 1),
        // d gets 7. n splits 2G → b 1, c 1.
        let n = Node::inner(
            "n",
            Sched::Wfq,
            vec![
                Node::leaf("b", BACKLOGGED).item(),
                Node::leaf("c", BACKLOGGED).item(),
            ],
        );
        let root = Node::inner(
            "root",
            Sched::Wfq,
            vec![
                Item::Shape {
                    name: "outer".into(),
                    rate_bps: 3.0 * G,
                    children: vec![
                        Node::leaf("a", BACKLOGGED).shaped("inner", 1.0 * G),
                        n.item(),
                    ],
                },
                Node::leaf("d", BACKLOGGED).item(),
            ],
        );
        close(
            &rates(&root, 10.0 * G),
            &[
                ("a", 1.0 * G),
                ("b", 1.0 * G),
                ("c", 1.0 * G),
                ("d", 7.0 * G),
            ],
        );
    }

    #[test]
    fn everything_demand_limited_gets_its_demand() {
        let root = Node::inner(
            "root",
            Sched::Prio,
            vec![
                Node::leaf("a", 2.0 * G).priority(1).item(),
                Node::leaf("b", 3.0 * G).priority(0).item(),
            ],
        );
        close(&rates(&root, 10.0 * G), &[("a", 2.0 * G), ("b", 3.0 * G)]);
    }
}
