//! Random hierarchies through the fast engine against an independent fluid max-min model
//! (`tests/common/fluid.rs`): every leaf's steady throughput must match the model's within
//! 0.5 % of the link with 1500-byte packets, 2 % with mixed sizes.
//!
//! Policies: a 10 Gbit/s link with `overhead: 0b` (frame bytes = wire bytes, the model's
//! unit), a tree of depth 1-3 of `prio`/`wfq` nodes over 2-6 leaves (weights 1-8, distinct
//! priorities), shaping classes of 0.5-8 Gbit/s with bursts of 16-64 KiB. Leaves are
//! backlogged (kept 16 packets deep) or demand-limited: a constant bit rate of 0.2-6 Gbit/s
//! (fed backlogged when the model's share for it is below that: see [`feeds`]). Each case
//! runs 12 ms of simulated time and measures from 4 ms on, the shaping classes' buckets
//! emptied at the start (`drive::empty_buckets`: a full 64 KiB bucket over a class a little
//! above its share would take longer than the run to spend). The warm-up is long because
//! starting with empty buckets has its own transient: the classes' first packets are
//! deferred and come back with their old ranks, a credit that took 0.5 ms to spend in a
//! case found at 0.4 ms of warm-up, and, with nested classes or several leaves under a
//! class, up to about 2 ms (five of 12,000 cases measured from 1 ms of a 3 ms run missed
//! by 0.5-1.7 % of the link and matched the model measured from 4 ms).
//!
//! One test per class of policy and packet sizes, so a failure says which class breaks:
//! (a) no shaping, (b) a shaping class over a single leaf, (c) a shaping class covering several
//! leaves (over an inner node, or one class shared by several siblings), (d) nested classes;
//! each with 1500-byte packets (`_fixed`), one size per leaf from {64, 200, 576, 1500}
//! (`_per_leaf_sizes`) and sizes alternating within a leaf (`_alternating_sizes`).
//!
//! `WEFT_FLUID_CASES=N` runs N cases per test (default 100) and the seeds of [`FOUND`]
//! beyond them; `WEFT_FLUID_SEED=S` runs only seed S (each failure prints the command that
//! reproduces it, test name included);
//! `WEFT_FLUID_ENGINE=reference`
//! (or `heads`) drives the reference engine (or the head engine) instead; the `head_engine_`
//! tests run the head engine on the policies it takes (classes over one edge each); `WEFT_FLUID_RUN_MS` sets a case's simulated run (12 by
//! default); `WEFT_FLUID_FULL_BUCKETS=1` leaves the buckets full at the start;
//! `WEFT_FLUID_FAST_PATH=1` turns on Loom's "currently limited" fast path
//! (`EngineOptions::limited_fast_path`); `WEFT_FLUID_VERBOSE=1` prints every case (with `-- --nocapture`). A failure prints each failing case's seed, policy
//! YAML and per-leaf model and measured rates.

#[path = "common/drive.rs"]
mod drive;
#[path = "common/fluid.rs"]
mod fluid;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use drive::{Feed, Source};
use fluid::{Item, Kind, Node, Sched};
use weft_core::policy::{compile_str, LoadOptions, Program};
use weft_core::sched::fast::FastEngine;
use weft_core::sched::heads::HeadEngine;
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::EngineOptions;

const LINK_BPS: f64 = 10e9;
/// A case's simulated run, ps: 12 ms, or `WEFT_FLUID_RUN_MS` (it measures from a third of
/// the way in).
fn run_ps() -> u64 {
    std::env::var("WEFT_FLUID_RUN_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(12)
        * 1_000_000_000
}
const DEPTH: usize = 16;
/// Seeds beyond the default range that once missed the model, each found at 2,000 cases a
/// kind and fixed since; they run with their test's default seeds (the millions digit
/// names the test, as in `run`). A busy class's new packets waiting in the tree
/// (8000810: 17.7 % of the link) and the others of classes over several leaves; a class
/// releasing one packet at a time over several edges of a `wfq` node (8000217, 9000191);
/// nested classes (11000686, 11000850); an inner class's tokens reserved by low-priority
/// packets waiting at the outer class while its high-priority packets waited (10001404:
/// 11.5 % of the link); a class's tokens reserved by a lower-ranked packet it released
/// before its higher-ranked packets reached its queue (11001174: 6.8 %); a backlogged leaf
/// that left a class's queue for a moment starting again at its virtual time (11001774,
/// 12001442: 2.2 and 2.6 %); a class comparing only its first packet with those it released
/// (11003825, found at 5,000 cases: 7.9 %).
const FOUND: &[u64] = &[
    8_000_707, 8_000_715, 8_000_810, 8_000_842, 8_001_256, 8_001_553, 8_001_685, 8_001_964,
    8_001_968, 8_000_217, 9_000_645, 9_000_683, 9_000_807, 9_001_361, 9_001_432, 9_001_555,
    9_001_727, 9_000_191, 11_000_686, 11_000_850, 10_001_404, 11_001_174, 11_001_332, 11_001_436,
    12_001_287,
];
const SIZES: [u32; 4] = [64, 200, 576, 1500];

/// splitmix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// In `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.next() as usize % xs.len()]
    }
    fn pick_vec<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.next() as usize % xs.len()].clone()
    }
    fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.range(0, i as u64) as usize;
            xs.swap(i, j);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    NoShaping,
    SingleLeaf,
    SeveralLeaves,
    Nested,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sizes {
    Fixed,
    PerLeaf,
    Alternating,
}

/// One generated case: the model's tree (the source of truth; the YAML is rendered from it),
/// each shaping class's burst, each leaf's packet sizes.
struct Case {
    seed: u64,
    root: Node,
    bursts: BTreeMap<String, u64>,
    sizes: BTreeMap<String, Vec<u32>>,
    /// Leaf name → its tag (the classifier field that reaches it).
    tags: BTreeMap<String, u32>,
}

// ---------------------------------------------------------------------------------------
// Generation.

struct Gen<'a> {
    rng: &'a mut Rng,
    leaves: u32,
    inner: u32,
    shapes: u32,
    bursts: BTreeMap<String, u64>,
}

impl Gen<'_> {
    /// An inner node over `n ≥ 2` leaves, at most `depth` levels of scheduling nodes.
    fn inner_node(&mut self, n: usize, depth: u32, name: String) -> Node {
        let sched = if self.rng.chance(1, 2) {
            Sched::Prio
        } else {
            Sched::Wfq
        };
        let k = if depth == 1 {
            n
        } else {
            self.rng.range(2, n as u64) as usize
        };
        let mut parts = vec![1usize; k];
        for _ in k..n {
            let j = self.rng.range(0, k as u64 - 1) as usize;
            parts[j] += 1;
        }
        let mut prios: Vec<u64> = (0..k as u64).collect();
        self.rng.shuffle(&mut prios);
        let children = parts
            .into_iter()
            .zip(prios)
            .map(|(p, prio)| {
                let node = if p == 1 {
                    let name = format!("l{}", self.leaves);
                    self.leaves += 1;
                    let demand = if self.rng.chance(1, 2) {
                        fluid::BACKLOGGED
                    } else {
                        self.rng.range(2, 60) as f64 * 1e8
                    };
                    Node::leaf(&name, demand)
                } else {
                    self.inner += 1;
                    let name = format!("n{}", self.inner);
                    self.inner_node(p, depth - 1, name)
                };
                Item::Node(node.weight(self.rng.range(1, 8)).priority(prio))
            })
            .collect();
        Node::inner(&name, sched, children)
    }

    /// A new shaping class around `items`.
    fn shape(&mut self, children: Vec<Item>) -> Item {
        let name = format!("s{}", self.shapes);
        self.shapes += 1;
        self.bursts
            .insert(name.clone(), self.rng.pick(&[16u64, 32, 48, 64]) * 1024);
        Item::Shape {
            name,
            rate_bps: self.rng.range(5, 80) as f64 * 1e8,
            children,
        }
    }
}

/// What an item is, for choosing where shaping goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Leaf,
    Inner,
    Shape,
}

fn what(it: &Item) -> What {
    match it {
        Item::Node(Node {
            kind: Kind::Leaf { .. },
            ..
        }) => What::Leaf,
        Item::Node(_) => What::Inner,
        Item::Shape { .. } => What::Shape,
    }
}

fn kids(it: &Item) -> &[Item] {
    match it {
        Item::Node(Node {
            kind: Kind::Inner { children, .. },
            ..
        })
        | Item::Shape { children, .. } => children,
        Item::Node(_) => &[],
    }
}

fn kids_mut(it: &mut Item) -> &mut Vec<Item> {
    match it {
        Item::Node(Node {
            kind: Kind::Inner { children, .. },
            ..
        })
        | Item::Shape { children, .. } => children,
        Item::Node(_) => panic!("a leaf has no children"),
    }
}

fn top_mut(root: &mut Node) -> &mut Vec<Item> {
    match &mut root.kind {
        Kind::Inner { children, .. } => children,
        Kind::Leaf { .. } => unreachable!(),
    }
}

/// Every item's path (child indices from the root's children down).
fn paths(items: &[Item], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    for (i, it) in items.iter().enumerate() {
        prefix.push(i);
        out.push(prefix.clone());
        paths(kids(it), prefix, out);
        prefix.pop();
    }
}

fn all_paths(root: &Node) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    if let Kind::Inner { children, .. } = &root.kind {
        paths(children, &mut Vec::new(), &mut out);
    }
    out
}

fn at<'a>(root: &'a Node, path: &[usize]) -> &'a Item {
    let Kind::Inner { children, .. } = &root.kind else {
        unreachable!()
    };
    let mut it = &children[path[0]];
    for &i in &path[1..] {
        it = &kids(it)[i];
    }
    it
}

/// The list that holds the item at `path`.
fn container_mut<'a>(root: &'a mut Node, path: &[usize]) -> &'a mut Vec<Item> {
    let mut v = top_mut(root);
    for &i in &path[..path.len() - 1] {
        v = kids_mut(&mut v[i]);
    }
    v
}

/// Puts a new shaping class around the item at `path`.
fn wrap(g: &mut Gen, root: &mut Node, path: &[usize]) {
    let v = container_mut(root, path);
    let i = *path.last().unwrap();
    let placeholder = Item::Shape {
        name: String::new(),
        rate_bps: 0.0,
        children: vec![],
    };
    let it = std::mem::replace(&mut v[i], placeholder);
    v[i] = g.shape(vec![it]);
}

/// One shaping class shared by the items at `idx` of the list holding `path`'s item.
fn share(g: &mut Gen, root: &mut Node, path: &[usize], mut idx: Vec<usize>) {
    let v = container_mut(root, path);
    idx.sort_unstable();
    let first = idx[0];
    let mut taken: Vec<Item> = idx.iter().rev().map(|&i| v.remove(i)).collect();
    taken.reverse();
    let s = g.shape(taken);
    v.insert(first, s);
}

/// Whether the list holding `path`'s item is a scheduling node's children (not a shaping
/// class's), and the indices of its items of kinds `ok`.
fn siblings(root: &Node, path: &[usize], ok: &[What]) -> (bool, Vec<usize>) {
    let list: &[Item] = if path.len() == 1 {
        match &root.kind {
            Kind::Inner { children, .. } => children,
            Kind::Leaf { .. } => unreachable!(),
        }
    } else {
        kids(at(root, &path[..path.len() - 1]))
    };
    let sched = path.len() == 1 || what(at(root, &path[..path.len() - 1])) == What::Inner;
    let idx = (0..list.len())
        .filter(|&i| ok.contains(&what(&list[i])))
        .collect();
    (sched, idx)
}

fn paths_of(root: &Node, w: What) -> Vec<Vec<usize>> {
    all_paths(root)
        .into_iter()
        .filter(|p| what(at(root, p)) == w)
        .collect()
}

/// A shaping class covering several leaves, without nesting in anything shaped: over an inner
/// node, or shared by 2-3 unshaped siblings under one scheduling node.
fn several_leaves(g: &mut Gen, root: &mut Node, over_inner: bool) {
    let inner = paths_of(root, What::Inner);
    if over_inner {
        let p = g.rng.pick_vec(&inner);
        wrap(g, root, &p);
        return;
    }
    // Lists (identified by one member's path) with at least two unshaped nodes.
    let mut lists: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for p in all_paths(root) {
        if *p.last().unwrap() != 0 {
            continue;
        }
        let (sched, idx) = siblings(root, &p, &[What::Leaf, What::Inner]);
        if sched && idx.len() >= 2 {
            lists.push((p, idx));
        }
    }
    let (p, mut idx) = g.rng.pick_vec(&lists);
    g.rng.shuffle(&mut idx);
    let k = g.rng.range(2, idx.len().min(3) as u64) as usize;
    idx.truncate(k);
    share(g, root, &p, idx);
}

/// A shaping class around one of the existing ones: directly (shape over shape), around a
/// node above it, or shared by it (or a node above it) and a sibling.
fn nest_over(g: &mut Gen, root: &mut Node) {
    let shapes = paths_of(root, What::Shape);
    let s = g.rng.pick_vec(&shapes);
    // Candidates: the class itself and every non-root inner node above it.
    let mut over: Vec<Vec<usize>> = vec![s.clone()];
    for len in 1..s.len() {
        if what(at(root, &s[..len])) == What::Inner {
            over.push(s[..len].to_vec());
        }
    }
    let target = g.rng.pick_vec(&over);
    let (sched, idx) = siblings(root, &target, &[What::Leaf, What::Inner, What::Shape]);
    let me = *target.last().unwrap();
    if sched && idx.len() >= 2 && g.rng.chance(1, 3) {
        let other = g
            .rng
            .pick_vec(&idx.iter().copied().filter(|&i| i != me).collect::<Vec<_>>());
        share(g, root, &target, vec![me, other]);
    } else {
        wrap(g, root, &target);
    }
}

fn generate(seed: u64, class: Class, sizes: Sizes) -> Case {
    let mut rng = Rng(seed);
    let n = rng.range(2, 6) as usize;
    let depth = rng.range(1, 3) as u32;
    let mut g = Gen {
        rng: &mut rng,
        leaves: 0,
        inner: 0,
        shapes: 0,
        bursts: BTreeMap::new(),
    };
    let mut root = g.inner_node(n, depth, "root".into());
    // Half the classes over several leaves go over an inner node (below the root): build
    // trees until one has such a node.
    let over_inner = g.rng.chance(1, 2);
    while over_inner
        && matches!(class, Class::SeveralLeaves | Class::Nested)
        && paths_of(&root, What::Inner).is_empty()
    {
        g.leaves = 0;
        g.inner = 0;
        let n = g.rng.range(3, 6) as usize;
        let depth = g.rng.range(2, 3) as u32;
        root = g.inner_node(n, depth, "root".into());
    }
    match class {
        Class::NoShaping => {}
        Class::SingleLeaf => {
            let mut leaves = paths_of(&root, What::Leaf);
            g.rng.shuffle(&mut leaves);
            let k = g.rng.range(1, 2.min(leaves.len() as u64)) as usize;
            // Wrapping a leaf changes no other leaf's path.
            for p in leaves.into_iter().take(k) {
                wrap(&mut g, &mut root, &p);
            }
        }
        Class::SeveralLeaves => several_leaves(&mut g, &mut root, over_inner),
        Class::Nested => {
            // A first class over one leaf or several, then one or two around it.
            if g.rng.chance(1, 3) {
                let p = g.rng.pick_vec(&paths_of(&root, What::Leaf));
                wrap(&mut g, &mut root, &p);
            } else {
                several_leaves(&mut g, &mut root, over_inner);
            }
            nest_over(&mut g, &mut root);
            if g.rng.chance(1, 3) {
                nest_over(&mut g, &mut root);
            }
        }
    }
    let bursts = std::mem::take(&mut g.bursts);
    let leaf_count = g.leaves;
    let mut sz = BTreeMap::new();
    let mut tags = BTreeMap::new();
    for i in 0..leaf_count {
        let s = match sizes {
            Sizes::Fixed => vec![1500],
            Sizes::PerLeaf => vec![rng.pick(&SIZES)],
            Sizes::Alternating => {
                let mut all = SIZES.to_vec();
                rng.shuffle(&mut all);
                all.truncate(rng.range(2, 3) as usize);
                all
            }
        };
        sz.insert(format!("l{i}"), s);
        tags.insert(format!("l{i}"), i);
    }
    Case {
        seed,
        root,
        bursts,
        sizes: sz,
        tags,
    }
}

// ---------------------------------------------------------------------------------------
// Rendering.

fn leaf_tags(n: &Node, tags: &BTreeMap<String, u32>, out: &mut Vec<u32>) {
    match &n.kind {
        Kind::Leaf { .. } => out.push(tags[&n.name]),
        Kind::Inner { children, .. } => {
            for it in children {
                item_tags(it, tags, out);
            }
        }
    }
}

fn item_tags(it: &Item, tags: &BTreeMap<String, u32>, out: &mut Vec<u32>) {
    match it {
        Item::Node(n) => leaf_tags(n, tags, out),
        Item::Shape { children, .. } => {
            for c in children {
                item_tags(c, tags, out);
            }
        }
    }
}

fn sched_name(s: Sched) -> &'static str {
    match s {
        Sched::Prio => "prio",
        Sched::Wfq => "wfq",
    }
}

fn render_items(c: &Case, items: &[Item], parent: &str, sched: Sched, out: &mut String) {
    for it in items {
        match it {
            Item::Shape {
                name,
                rate_bps,
                children,
            } => {
                let _ = writeln!(
                    out,
                    "  - {{name: {name}, type: shape, parent: {parent}, rate: {}mbit, burst: {}kb}}",
                    (rate_bps / 1e6).round(),
                    c.bursts[name] / 1024
                );
                render_items(c, children, name, sched, out);
            }
            Item::Node(n) => {
                let edge = match sched {
                    Sched::Prio => format!("priority: {}", n.priority),
                    Sched::Wfq => format!("weight: {}", n.weight),
                };
                match &n.kind {
                    Kind::Leaf { .. } => {
                        let _ = writeln!(
                            out,
                            "  - {{name: {}, type: leaf, parent: {parent}, {edge}, match: {{tag: {}}}, flows: {{by: none}}, limit: {{packets: 1000000}}, flow_limit: {{packets: 1000000}}}}",
                            n.name, c.tags[&n.name]
                        );
                    }
                    Kind::Inner { sched: s, children } => {
                        let mut tags = Vec::new();
                        leaf_tags(n, &c.tags, &mut tags);
                        let list: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
                        let _ = writeln!(
                            out,
                            "  - {{name: {}, type: {}, parent: {parent}, {edge}, match: {{tag: [{}]}}}}",
                            n.name,
                            sched_name(*s),
                            list.join(", ")
                        );
                        render_items(c, children, &n.name, *s, out);
                    }
                }
            }
        }
    }
}

fn yaml(c: &Case) -> String {
    let Kind::Inner { sched, children } = &c.root.kind else {
        unreachable!()
    };
    let mut s = format!(
        "weft: 1\nname: fluid-{}\nlink: {{rate: 10gbit, overhead: 0b}}\nnodes:\n  - {{name: root, type: {}}}\n",
        c.seed,
        sched_name(*sched)
    );
    render_items(c, children, "root", *sched, &mut s);
    s
}

// ---------------------------------------------------------------------------------------
// Running.

/// The leaves' feeds. A leaf whose demand the model does not meet (its share is smaller) is
/// fed backlogged: in the model its demand then changes nothing (it is frozen by another
/// constraint), and a constant bit rate above its share would grow its queue for the whole
/// run, which is no steady state (the PIFO tree charges a parent's entries with the sizes of
/// the packets that pushed them, so while one child's queue grows a parent's fair shares
/// follow that child's arrivals, not its departures).
fn feeds(c: &Case, model: &BTreeMap<String, f64>, leaf: &Node, out: &mut Vec<Feed>) {
    match &leaf.kind {
        Kind::Leaf { demand_bps } => {
            let sizes = c.sizes[&leaf.name].clone();
            let source = if demand_bps.is_infinite() || model[&leaf.name] < demand_bps - 1e6 {
                Source::Backlog {
                    depth: DEPTH,
                    sizes,
                }
            } else {
                Source::Cbr {
                    rate_bps: *demand_bps,
                    sizes,
                }
            };
            out.push(Feed::new(
                &leaf.name,
                &format!("tag={}", c.tags[&leaf.name]),
                source,
            ));
        }
        Kind::Inner { children, .. } => {
            let mut stack: Vec<&Item> = children.iter().collect();
            while let Some(it) = stack.pop() {
                match it {
                    Item::Node(n) => feeds(c, model, n, out),
                    Item::Shape { children, .. } => stack.extend(children.iter()),
                }
            }
        }
    }
}

/// The demand the generator gave leaf `name`.
fn demand(c: &Case, name: &str) -> f64 {
    fn find(n: &Node, name: &str) -> Option<f64> {
        match &n.kind {
            Kind::Leaf { demand_bps } => (n.name == name).then_some(*demand_bps),
            Kind::Inner { children, .. } => children.iter().find_map(|it| find_item(it, name)),
        }
    }
    fn find_item(it: &Item, name: &str) -> Option<f64> {
        match it {
            Item::Node(n) => find(n, name),
            Item::Shape { children, .. } => children.iter().find_map(|c| find_item(c, name)),
        }
    }
    find(&c.root, name).expect("a leaf of the case")
}

/// Runs one case; `Err` with a report when a leaf is off by more than `tol` of the link
/// (`test`: the test's name, for the command that reproduces it).
fn check(c: &Case, tol: f64, test: &str, engine: &str) -> Result<bool, String> {
    let text = yaml(c);
    let prog: Arc<Program> = Arc::new(
        compile_str(Path::new("fluid.yaml"), &text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("seed {}: {}\n{text}", c.seed, e.render_plain())),
    );
    let model = fluid::rates(&c.root, LINK_BPS);
    let mut fs = Vec::new();
    feeds(c, &model, &c.root, &mut fs);
    fs.sort_by(|a, b| a.leaf.cmp(&b.leaf));
    // `WEFT_FLUID_FAST_PATH=1`: Loom's "currently limited" fast path on.
    let options = EngineOptions {
        limited_fast_path: std::env::var_os("WEFT_FLUID_FAST_PATH").is_some(),
        ..EngineOptions::default()
    };
    let out = if engine == "heads" {
        // Policies the head engine does not run (parallel classes on an edge) pass.
        let Ok(mut e) = HeadEngine::new(prog.clone()) else {
            return Ok(false);
        };
        if std::env::var("WEFT_FLUID_FULL_BUCKETS").is_err() {
            drive::empty_buckets(&mut e, &prog);
        }
        drive::drive(&mut e, &prog, &fs, run_ps() / 3, run_ps())
    } else if engine == "reference" {
        let mut e = ReferenceEngine::with_options(prog.clone(), options);
        if std::env::var("WEFT_FLUID_FULL_BUCKETS").is_err() {
            drive::empty_buckets(&mut e, &prog);
        }
        drive::drive(&mut e, &prog, &fs, run_ps() / 3, run_ps())
    } else {
        let mut e = FastEngine::with_options(prog.clone(), options);
        if std::env::var("WEFT_FLUID_FULL_BUCKETS").is_err() {
            drive::empty_buckets(&mut e, &prog);
        }
        drive::drive(&mut e, &prog, &fs, run_ps() / 3, run_ps())
    };
    let mut worst = 0.0f64;
    let mut table = String::new();
    for (i, f) in fs.iter().enumerate() {
        let want = model[&f.leaf];
        let got = out.wire_bps(i);
        let err = (got - want).abs() / LINK_BPS;
        worst = worst.max(err);
        let _ = writeln!(
            table,
            "  {:>4}  model {:>8.1} Mbit/s  measured {:>8.1} Mbit/s  error {:>6.2} % of link  ({}, sizes {:?}, dropped {}){}",
            f.leaf,
            want / 1e6,
            got / 1e6,
            err * 100.0,
            match f.source {
                Source::Backlog { .. } => match demand(c, &f.leaf) {
                    d if d.is_finite() => format!("backlogged: demand {:.0} Mbit/s > share", d / 1e6),
                    _ => "backlogged".to_string(),
                },
                Source::Cbr { rate_bps, .. } => format!("cbr {:.0} Mbit/s", rate_bps / 1e6),
            },
            c.sizes[&f.leaf],
            out.leaves[i].dropped,
            if err > tol { "  <--" } else { "" }
        );
    }
    if std::env::var("WEFT_FLUID_VERBOSE").is_ok() {
        eprintln!(
            "seed {}: worst {:.2} %\n{text}{table}",
            c.seed,
            worst * 100.0
        );
    }
    if worst > tol {
        Err(format!(
            "seed {} (WEFT_FLUID_SEED={} cargo test -p weft-core --test fluid_check {test}): worst leaf error {:.2} % of the link > {:.2} %\n{text}{table}",
            c.seed,
            c.seed,
            worst * 100.0,
            tol * 100.0
        ))
    } else {
        Ok(true)
    }
}

/// Runs the cases of one class and size mode on the engine `WEFT_FLUID_ENGINE` names
/// (`fast` by default); fails with every failing case's report (the first three in full).
fn run(class: Class, sizes: Sizes) {
    let engine = std::env::var("WEFT_FLUID_ENGINE").unwrap_or_default();
    run_on(&engine, class, sizes, "");
}

/// [`run`] on the head engine, whatever `WEFT_FLUID_ENGINE` says. It runs the policies
/// whose classes each cover one edge (a class over an inner node, nested classes over
/// one child each) and refuses those where siblings share a class; at least a third of
/// the cases must run.
fn run_heads(class: Class, sizes: Sizes) {
    run_on("heads", class, sizes, "head_engine_");
}

fn run_on(engine: &str, class: Class, sizes: Sizes, prefix: &str) {
    let test = format!(
        "{prefix}{}_{}",
        match class {
            Class::NoShaping => "no_shaping",
            Class::SingleLeaf => "class_over_single_leaf",
            Class::SeveralLeaves => "class_over_several_leaves",
            Class::Nested => "nested_classes",
        },
        match sizes {
            Sizes::Fixed => "fixed",
            Sizes::PerLeaf => "per_leaf_sizes",
            Sizes::Alternating => "alternating_sizes",
        }
    );
    let tol = if sizes == Sizes::Fixed { 0.005 } else { 0.02 };
    let seeds: Vec<u64> = match std::env::var("WEFT_FLUID_SEED") {
        Ok(s) => vec![s.parse().expect("WEFT_FLUID_SEED: an integer")],
        Err(_) => {
            let n: u64 = std::env::var("WEFT_FLUID_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(100);
            // Distinct seeds per test: the class and size mode pick the stream.
            let base = 1_000_000 * (1 + class as u64 * 3 + sizes as u64);
            let found = FOUND
                .iter()
                .copied()
                .filter(|&s| s / 1_000_000 == base / 1_000_000 && s >= base + n);
            (0..n).map(|i| base + i).chain(found).collect()
        }
    };
    let mut failures = Vec::new();
    let mut ran = 0;
    for &seed in &seeds {
        let c = generate(seed, class, sizes);
        match check(&c, tol, &test, engine) {
            Ok(r) => ran += r as usize,
            Err(report) => failures.push(report),
        }
    }
    let ran = ran + failures.len();
    // A seed given alone may be one the head engine refuses; among many, a third must run.
    let one_seed = std::env::var_os("WEFT_FLUID_SEED").is_some();
    assert!(
        engine != "heads" || one_seed || 3 * ran >= seeds.len(),
        "{test}: the head engine ran only {ran} of {} cases",
        seeds.len()
    );
    if !failures.is_empty() {
        let mut msg = format!(
            "{class:?}, {sizes:?}: {} of {} cases off the fluid model by more than {:.1} % of the link\n\n",
            failures.len(),
            seeds.len(),
            tol * 100.0
        );
        for f in failures.iter().take(3) {
            msg += f;
            msg += "\n";
        }
        let rest: Vec<&str> = failures
            .iter()
            .skip(3)
            .map(|f| f.split(" (").next().unwrap_or(""))
            .collect();
        if !rest.is_empty() {
            msg += &format!("also: {}\n", rest.join(", "));
        }
        panic!("{msg}");
    }
}

#[test]
fn no_shaping_fixed() {
    run(Class::NoShaping, Sizes::Fixed);
}
#[test]
fn no_shaping_per_leaf_sizes() {
    run(Class::NoShaping, Sizes::PerLeaf);
}
#[test]
fn no_shaping_alternating_sizes() {
    run(Class::NoShaping, Sizes::Alternating);
}
#[test]
fn class_over_single_leaf_fixed() {
    run(Class::SingleLeaf, Sizes::Fixed);
}
#[test]
fn class_over_single_leaf_per_leaf_sizes() {
    run(Class::SingleLeaf, Sizes::PerLeaf);
}
#[test]
fn class_over_single_leaf_alternating_sizes() {
    run(Class::SingleLeaf, Sizes::Alternating);
}
#[test]
fn class_over_several_leaves_fixed() {
    run(Class::SeveralLeaves, Sizes::Fixed);
}
#[test]
fn class_over_several_leaves_per_leaf_sizes() {
    run(Class::SeveralLeaves, Sizes::PerLeaf);
}
#[test]
fn class_over_several_leaves_alternating_sizes() {
    run(Class::SeveralLeaves, Sizes::Alternating);
}
#[test]
fn nested_classes_fixed() {
    run(Class::Nested, Sizes::Fixed);
}
#[test]
fn nested_classes_per_leaf_sizes() {
    run(Class::Nested, Sizes::PerLeaf);
}
#[test]
fn nested_classes_alternating_sizes() {
    run(Class::Nested, Sizes::Alternating);
}

#[test]
fn head_engine_class_over_single_leaf_fixed() {
    run_heads(Class::SingleLeaf, Sizes::Fixed);
}
#[test]
fn head_engine_class_over_several_leaves_fixed() {
    run_heads(Class::SeveralLeaves, Sizes::Fixed);
}
#[test]
fn head_engine_class_over_several_leaves_per_leaf_sizes() {
    run_heads(Class::SeveralLeaves, Sizes::PerLeaf);
}
#[test]
fn head_engine_nested_classes_fixed() {
    run_heads(Class::Nested, Sizes::Fixed);
}
#[test]
fn head_engine_nested_classes_alternating_sizes() {
    run_heads(Class::Nested, Sizes::Alternating);
}

/// The driver's premise: after `drive::empty_buckets` a class starts with (almost) no
/// tokens. A 1 Gbit/s class with a 64 KiB bucket, backlogged alone on the link, sends at
/// most 1 Gbit/s × 200 µs plus one frame in its first 200 µs (a full bucket would let 64 KiB
/// more through at the link's rate).
#[test]
fn premise_emptied_buckets_start_empty() {
    let text = "weft: 1\nlink: {rate: 10gbit, overhead: 0b}\nnodes:\n  - {name: root, type: wfq}\n  - {name: s, type: shape, parent: root, rate: 1gbit, burst: 64kb}\n  - {name: a, type: leaf, parent: s, match: {tag: 0}}\n";
    let prog =
        Arc::new(compile_str(Path::new("premise.yaml"), text, &LoadOptions::default()).unwrap());
    let fs = [Feed::new(
        "a",
        "tag=0",
        Source::Backlog {
            depth: DEPTH,
            sizes: vec![1500],
        },
    )];
    let run_ps = 200_000_000;
    let limit = 1e9 / 8.0 * 200e-6 + 1500.0;
    let mut r = ReferenceEngine::new(prog.clone());
    drive::empty_buckets(&mut r, &prog);
    let got = drive::drive(&mut r, &prog, &fs, 0, run_ps).leaves[0].bytes as f64;
    assert!(got <= limit, "reference: {got} bytes in 200 us > {limit}");
    let mut f = FastEngine::new(prog.clone());
    drive::empty_buckets(&mut f, &prog);
    let got = drive::drive(&mut f, &prog, &fs, 0, run_ps).leaves[0].bytes as f64;
    assert!(got <= limit, "fast: {got} bytes in 200 us > {limit}");
}

/// The generator makes what each class promises, and every policy compiles.
#[test]
fn generator_covers_each_class() {
    for seed in 0..200 {
        for class in [
            Class::NoShaping,
            Class::SingleLeaf,
            Class::SeveralLeaves,
            Class::Nested,
        ] {
            let c = generate(seed, class, Sizes::Fixed);
            let text = yaml(&c);
            compile_str(Path::new("fluid.yaml"), &text, &LoadOptions::default())
                .unwrap_or_else(|e| panic!("seed {seed}: {}\n{text}", e.render_plain()));
            let shapes = paths_of(&c.root, What::Shape);
            let covers = |p: &Vec<usize>| {
                let mut t = Vec::new();
                item_tags(at(&c.root, p), &c.tags, &mut t);
                t.len()
            };
            let nested = shapes
                .iter()
                .any(|p| shapes.iter().any(|q| q.len() > p.len() && q.starts_with(p)));
            match class {
                Class::NoShaping => assert!(shapes.is_empty()),
                Class::SingleLeaf => {
                    assert!(
                        !shapes.is_empty() && shapes.iter().all(|p| covers(p) == 1),
                        "{text}"
                    )
                }
                Class::SeveralLeaves => {
                    assert!(shapes.len() == 1 && covers(&shapes[0]) >= 2, "{text}")
                }
                Class::Nested => assert!(nested, "{text}"),
            }
        }
    }
}
