//! A structured policy generator for `policy_structured`.
//!
//! `arbitrary` builds a [`Policy`]: a list of nodes with names from a small alphabet, every
//! node type (`fifo prio wfq rr drr lstf edf senic shape leaf`, and `attach`), parents among
//! the earlier nodes (sometimes any name: later nodes, itself, undeclared), small matches on
//! `vm`/`dport`/`dst` (and `tag`), the edge key the parent reads, and leaf options.
//! [`Policy::render`] writes it as YAML.
//!
//! Generation is biased towards *valid* policies (fresh names, parents that can have
//! children, the right edge key, `rate`/`burst` on shaping nodes, childless scheduling nodes
//! turned into leaves), with a small chance at every choice of breaking a rule. So the
//! fuzzer spends its time in the compiler's graph checks, classifier build, `show` and the
//! classifiers, not in the YAML parser (the `policy_compile` target covers that).
//!
//! `Debug` prints the rendered YAML, so `cargo +nightly fuzz fmt policy_structured ARTIFACT`
//! shows a reproducer as a policy file.

use std::fmt::{self, Write as _};

use arbitrary::{Arbitrary, Result, Unstructured};

/// Node names: a small alphabet so that stray parent references often name existing nodes.
const NAMES: [&str; 16] = [
    "root", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
];
const SCHED: [&str; 8] = ["fifo", "prio", "wfq", "rr", "drr", "lstf", "edf", "senic"];
const RATES: [&str; 8] = [
    "1gbit", "10gbit", "500mbit", "2gbit", "4gbit", "100kbit", "100gbit", "3gbit",
];
/// Rates for senic classes: several fit in any link.
const SMALL_RATES: [&str; 4] = ["100kbit", "500mbit", "1gbit", "250mbit"];
const SIZES: [&str; 6] = ["64kb", "1500b", "32kb", "1b", "9000b", "1mb"];
const TIMES: [&str; 4] = ["10us", "1ms", "0s", "250ns"];
const PORTS: [u16; 8] = [80, 443, 5432, 7077, 11211, 0, 65535, 8020];
const PREFIXES: [&str; 12] = [
    "10.0.1.0/24",
    "10.0.2.0/24",
    "10.0.0.0/16",
    "10.0.1.128/25",
    "10.0.1.7/32",
    "10.0.0.0/8",
    "0.0.0.0/0",
    "::/0",
    "2001:db8::/32",
    "2001:db8::1/128",
    "::ffff:10.0.1.0/120",
    "10.0.3.0/24",
];
const MAX_NODES: usize = 24;

/// One node, ready to render: every value is already text.
#[derive(Clone, Debug)]
pub struct NodeOut {
    pub name: String,
    pub ty: &'static str,
    pub parents: Vec<String>,
    pub parent_as_list: bool,
    /// Extra `key: value` pairs, in order.
    pub keys: Vec<(&'static str, String)>,
    pub matches: Option<MatchGen>,
}

/// A whole policy plus the bytes that seed the probe packets.
pub struct Policy {
    pub header: String,
    pub nodes: Vec<NodeOut>,
    pub packet_bytes: Vec<u8>,
}

fn pick<'a, T: Copy>(u: &mut Unstructured<'a>, xs: &[T]) -> Result<T> {
    Ok(*u.choose(xs)?)
}

/// `true` with probability 1/n: an optional feature.
fn rarely(u: &mut Unstructured, n: u8) -> Result<bool> {
    u.ratio(1, n)
}

/// `true` with probability 1/n in a chaos policy (one in four), never otherwise: "break a
/// rule here".
fn breaks(u: &mut Unstructured, chaos: bool, n: u8) -> Result<bool> {
    if chaos {
        u.ratio(1, n)
    } else {
        Ok(false)
    }
}

fn header(u: &mut Unstructured, chaos: bool) -> Result<String> {
    let mut s = String::from("weft: 1\n");
    if u.arbitrary()? {
        s.push_str("name: fuzzed\n");
    }
    if u.ratio(1, 3)? {
        let _ = writeln!(s, "link:\n  rate: {}", pick(u, &RATES)?);
        if u.arbitrary()? {
            let _ = writeln!(s, "  overhead: {}b", u.int_in_range(0..=40u8)?);
        }
        if rarely(u, 4)? {
            let _ = writeln!(s, "  mtu: {}", pick(u, &SIZES)?);
        }
    }
    if rarely(u, 6)? {
        s.push_str("limits:\n");
        for k in ["max_depth", "max_nodes", "max_shaping_depth", "max_match_shapes"] {
            if u.arbitrary()? {
                let v = if chaos {
                    u.int_in_range(1..=8u32)?
                } else {
                    u.int_in_range(24..=64u32)?
                };
                let _ = writeln!(s, "  {k}: {v}");
            }
        }
    }
    Ok(s)
}

/// A match, kept structured so the generator can avoid shadowed siblings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MatchGen {
    pub any: bool,
    pub vm: Vec<u8>,
    pub dport: Vec<u16>,
    /// Indices into `PREFIXES`.
    pub dst: Vec<usize>,
    pub tag: Option<u16>,
    /// Write single values as scalars rather than one-element lists.
    pub scalars: bool,
}

fn prefix(i: usize) -> (u128, u8) {
    let (a, l) = PREFIXES[i].split_once('/').expect("prefix has a length");
    let l: u8 = l.parse().expect("prefix length");
    match a.parse::<std::net::IpAddr>().expect("prefix address") {
        std::net::IpAddr::V4(v4) => (u128::from(v4.to_ipv6_mapped()), l + 96),
        std::net::IpAddr::V6(v6) => (u128::from(v6), l),
    }
}

fn prefix_covers(outer: usize, inner: usize) -> bool {
    let ((oa, ol), (ia, il)) = (prefix(outer), prefix(inner));
    let mask = if ol == 0 { 0 } else { u128::MAX << (128 - u32::from(ol)) };
    ol <= il && ia & mask == oa
}

impl MatchGen {
    fn gen(u: &mut Unstructured) -> Result<MatchGen> {
        let mut m = MatchGen {
            scalars: u.arbitrary()?,
            ..MatchGen::default()
        };
        if rarely(u, 16)? {
            m.any = true;
            return Ok(m);
        }
        let which: u8 = u.int_in_range(0..=7)?;
        if which & 1 != 0 || which == 0 {
            for _ in 0..u.int_in_range(1..=2)? {
                m.vm.push(u.int_in_range(0..=4u8)?);
            }
        }
        if which & 2 != 0 {
            for _ in 0..u.int_in_range(1..=3)? {
                m.dport.push(if u.ratio(7, 8)? {
                    pick(u, &PORTS)?
                } else {
                    u.arbitrary()?
                });
            }
        }
        if which & 4 != 0 {
            for _ in 0..u.int_in_range(1..=2)? {
                m.dst.push(u.choose_index(PREFIXES.len())?);
            }
        }
        if rarely(u, 8)? {
            m.tag = Some(u.int_in_range(0..=3)?);
        }
        Ok(m)
    }

    /// Does every packet `other` accepts also satisfy `self`? (`self` would shadow `other`.)
    fn covers(&self, other: &MatchGen) -> bool {
        fn ints<T: PartialEq>(outer: &[T], inner: &[T]) -> bool {
            outer.is_empty() || (!inner.is_empty() && inner.iter().all(|v| outer.contains(v)))
        }
        if self.any {
            return true;
        }
        if other.any {
            return self.vm.is_empty()
                && self.dport.is_empty()
                && self.dst.is_empty()
                && self.tag.is_none();
        }
        ints(&self.vm, &other.vm)
            && ints(&self.dport, &other.dport)
            && (self.dst.is_empty()
                || (!other.dst.is_empty()
                    && other
                        .dst
                        .iter()
                        .all(|&i| self.dst.iter().any(|&o| prefix_covers(o, i)))))
            && (self.tag.is_none() || self.tag == other.tag)
    }

    fn render(&self) -> String {
        if self.any {
            return "any".into();
        }
        let list = |vals: Vec<String>| {
            if vals.len() == 1 && self.scalars {
                vals[0].clone()
            } else {
                format!("[{}]", vals.join(", "))
            }
        };
        let mut parts = Vec::new();
        if !self.vm.is_empty() {
            parts.push(format!("vm: {}", list(self.vm.iter().map(u8::to_string).collect())));
        }
        if !self.dport.is_empty() {
            parts.push(format!("dport: {}", list(self.dport.iter().map(u16::to_string).collect())));
        }
        if !self.dst.is_empty() {
            parts.push(format!("dst: {}", list(self.dst.iter().map(|&i| PREFIXES[i].to_string()).collect())));
        }
        if let Some(t) = self.tag {
            parts.push(format!("tag: {t}"));
        }
        format!("{{{}}}", parts.join(", "))
    }
}

fn leaf_keys(u: &mut Unstructured, keys: &mut Vec<(&'static str, String)>) -> Result<()> {
    if u.ratio(1, 4)? {
        let by = pick(u, &["five-tuple", "flow", "none"])?;
        let sched = pick(u, &["fifo", "fair"])?;
        let q = if rarely(u, 4)? {
            format!(", quantum: {}", pick(u, &SIZES)?)
        } else {
            String::new()
        };
        keys.push(("flows", format!("{{by: {by}, sched: {sched}{q}}}")));
    }
    for key in ["limit", "flow_limit"] {
        if rarely(u, 6)? {
            let mut parts = Vec::new();
            if u.arbitrary()? {
                parts.push(format!("packets: {}", u.int_in_range(1..=1000u16)?));
            }
            if u.arbitrary()? {
                parts.push(format!("bytes: {}", pick(u, &SIZES)?));
            }
            keys.push((key, format!("{{{}}}", parts.join(", "))));
        }
    }
    if rarely(u, 6)? {
        keys.push(("outstanding", u.int_in_range(1..=64u8)?.to_string()));
    }
    Ok(())
}

/// A key in the wrong place, or a value out of range.
fn chaos_key(u: &mut Unstructured, keys: &mut Vec<(&'static str, String)>) -> Result<()> {
    let (k, v) = match u.int_in_range(0..=8u8)? {
        0 => ("priority", u.int_in_range(0..=3u8)?.to_string()),
        1 => ("weight", u.int_in_range(0..=5u8)?.to_string()),
        2 => ("quantum", pick(u, &SIZES)?.to_string()),
        3 => ("rate", pick(u, &RATES)?.to_string()),
        4 => ("burst", pick(u, &SIZES)?.to_string()),
        5 => ("default_slack", pick(u, &TIMES)?.to_string()),
        6 => ("default_deadline", pick(u, &TIMES)?.to_string()),
        7 => ("outstanding", "0".to_string()),
        _ => ("policy", "tenants/vm1.yaml".to_string()),
    };
    keys.push((k, v));
    Ok(())
}

impl<'a> Arbitrary<'a> for Policy {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let chaos = u.ratio(1, 4)?;
        let header = header(u, chaos)?;
        let count = u.int_in_range(1..=MAX_NODES)?;
        let mut nodes: Vec<NodeOut> = Vec::with_capacity(count);
        // Per earlier node: can it take children (scheduling or shaping)?
        for i in 0..count {
            if u.is_empty() {
                break;
            }
            let name = if breaks(u, chaos, 12)? {
                match u.int_in_range(0..=3u8)? {
                    0 => pick(u, &NAMES)?.to_string(),
                    1 => format!("{}/x", pick(u, &NAMES)?),
                    2 => "\"a b\"".to_string(),
                    _ => u.int_in_range(0..=9u8)?.to_string(),
                }
            } else if i < NAMES.len() {
                NAMES[i].to_string()
            } else {
                format!("n{i}")
            };
            let ty: &'static str = match u.int_in_range(0..=15u8)? {
                0..=7 => pick(u, &SCHED)?,
                8..=9 => "shape",
                10..=14 => "leaf",
                _ => "attach",
            };
            // The root: a scheduling node, now and then a lone leaf or attachment point.
            let ty = if i == 0 && ty == "shape" && !breaks(u, chaos, 4)? {
                "wfq"
            } else if i == 0 && matches!(ty, "leaf" | "attach") && !rarely(u, 8)? {
                pick(u, &SCHED)?
            } else {
                ty
            };
            // Parents: none for the first node; usually one earlier container.
            let containers: Vec<usize> = (0..nodes.len())
                .filter(|&j| !matches!(nodes[j].ty, "leaf" | "attach"))
                .collect();
            // Sets of parallel shaping nodes: shaping nodes with the same parents.
            let mut sets: Vec<Vec<usize>> = Vec::new();
            for &j in containers.iter().filter(|&&j| nodes[j].ty == "shape") {
                match sets.iter_mut().find(|s| nodes[s[0]].parents == nodes[j].parents) {
                    Some(s) => s.push(j),
                    None => sets.push(vec![j]),
                }
            }
            sets.retain(|s| s.len() > 1);
            let mut parents = Vec::new();
            if i == 0 {
                if breaks(u, chaos, 8)? {
                    parents.push(pick(u, &NAMES)?.to_string());
                }
            } else if breaks(u, chaos, 8)? {
                // Stray parents: none (a second root), undeclared, later, itself, or several.
                let n = u.int_in_range(0..=3)?;
                for _ in 0..n {
                    parents.push(pick(u, &NAMES)?.to_string());
                }
            } else if !sets.is_empty() && u.ratio(1, 3)? {
                let set = u.choose(&sets)?.clone();
                let n = u.int_in_range(2..=set.len().min(3))?;
                for &j in &set[..n] {
                    parents.push(nodes[j].name.clone());
                }
            } else if !containers.is_empty() {
                parents.push(nodes[pick(u, &containers)?].name.clone());
            }
            // The key the (first) parent reads, when it is a scheduling node.
            let mut keys = Vec::new();
            // The scheduling node above, through shaping nodes.
            let mut parent_ty = None;
            let mut up = parents.first().cloned();
            for _ in 0..MAX_NODES {
                let Some(p) = up.take() else { break };
                match nodes.iter().find(|n| n.name == p) {
                    Some(n) if n.ty == "shape" => up = n.parents.first().cloned(),
                    Some(n) => parent_ty = Some(n.ty),
                    None => {}
                }
            }
            if ty != "shape" && !breaks(u, chaos, 8)? {
                match parent_ty {
                    Some("prio") => keys.push(("priority", u.int_in_range(0..=7u8)?.to_string())),
                    Some("wfq") => keys.push(("weight", u.int_in_range(1..=5u8)?.to_string())),
                    Some("drr") => keys.push(("quantum", pick(u, &SIZES)?.to_string())),
                    Some("senic") => keys.push(("rate", pick(u, &SMALL_RATES)?.to_string())),
                    _ => {}
                }
            }
            match ty {
                "shape" => {
                    if !breaks(u, chaos, 8)? {
                        keys.push(("rate", pick(u, &RATES)?.to_string()));
                    }
                    if u.arbitrary()? {
                        keys.push(("burst", pick(u, &SIZES)?.to_string()));
                    }
                }
                "senic" if u.ratio(1, 4)? && parent_ty != Some("senic") => {
                    keys.push(("rate", pick(u, &RATES)?.to_string()));
                }
                "lstf" if u.ratio(1, 3)? => {
                    keys.push(("default_slack", pick(u, &TIMES)?.to_string()))
                }
                "edf" if u.ratio(1, 3)? => {
                    keys.push(("default_deadline", pick(u, &TIMES)?.to_string()))
                }
                "leaf" => leaf_keys(u, &mut keys)?,
                "attach" => {
                    if u.ratio(3, 4)? {
                        let file = if breaks(u, chaos, 8)? {
                            "tenants/missing.yaml"
                        } else {
                            "tenants/vm1.yaml"
                        };
                        keys.push(("policy", file.to_string()));
                    } else {
                        leaf_keys(u, &mut keys)?;
                    }
                }
                _ => {}
            }
            if breaks(u, chaos, 8)? {
                chaos_key(u, &mut keys)?;
            }
            let matches = if i > 0 && u.ratio(3, 4)? || i == 0 && rarely(u, 4)? {
                Some(MatchGen::gen(u)?)
            } else {
                None
            };
            nodes.push(NodeOut {
                name,
                ty,
                parents,
                parent_as_list: rarely(u, 4)?,
                keys,
                matches,
            });
        }
        // Scheduling and shaping nodes nobody names as a parent become leaves (usually).
        if !breaks(u, chaos, 4)? {
            for j in 0..nodes.len() {
                let has_child = nodes.iter().any(|n| n.parents.contains(&nodes[j].name));
                if !has_child && !matches!(nodes[j].ty, "leaf" | "attach") {
                    // `rate` stays valid on a leaf only under a senic parent.
                    let under_senic = nodes[j].parents.len() == 1
                        && nodes
                            .iter()
                            .any(|p| p.name == nodes[j].parents[0] && p.ty == "senic");
                    let n = &mut nodes[j];
                    n.ty = "leaf";
                    n.keys.retain(|(k, _)| {
                        !matches!(*k, "burst" | "default_slack" | "default_deadline")
                            && (*k != "rate" || under_senic)
                    });
                }
            }
        }
        if !breaks(u, chaos, 4)? {
            unshadow(&mut nodes);
        }
        let rest = u.len();
        let packet_bytes = u.bytes(rest)?.to_vec();
        Ok(Policy {
            header,
            nodes,
            packet_bytes,
        })
    }
}

impl Policy {
    /// The policy as YAML text.
    pub fn render(&self) -> String {
        let mut s = self.header.clone();
        s.push_str("nodes:\n");
        for n in &self.nodes {
            let _ = write!(s, "  - {{name: {}, type: {}", n.name, n.ty);
            match n.parents.len() {
                0 => {}
                1 if !n.parent_as_list => {
                    let _ = write!(s, ", parent: {}", n.parents[0]);
                }
                _ => {
                    let _ = write!(s, ", parent: [{}]", n.parents.join(", "));
                }
            }
            for (k, v) in &n.keys {
                let _ = write!(s, ", {k}: {v}");
            }
            if let Some(m) = &n.matches {
                let _ = write!(s, ", match: {}", m.render());
            }
            s.push_str("}\n");
        }
        s
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "--- policy ---")?;
        f.write_str(&self.render())?;
        writeln!(f, "--- packet bytes ({}) ---", self.packet_bytes.len())?;
        write!(f, "{:02x?}", self.packet_bytes)
    }
}

/// Reorders siblings (nodes with the same first parent) so that no earlier one covers a later
/// one's match (first match wins, so the later one would be refused as shadowed); identical
/// matches get a distinguishing `tag`. Best effort, bounded.
fn unshadow(nodes: &mut [NodeOut]) {
    let any = MatchGen {
        any: true,
        ..MatchGen::default()
    };
    for _pass in 0..8 {
        let mut changed = false;
        for a in 0..nodes.len() {
            for b in a + 1..nodes.len() {
                if nodes[a].parents.first() != nodes[b].parents.first() || nodes[a].parents.is_empty() {
                    continue;
                }
                let ma = nodes[a].matches.clone().unwrap_or_else(|| any.clone());
                let mb = nodes[b].matches.clone().unwrap_or_else(|| any.clone());
                if !ma.covers(&mb) {
                    continue;
                }
                if mb.covers(&ma) {
                    // Same packets: make the later one narrower, then it goes first.
                    let mut m = mb;
                    m.any = false;
                    m.tag = Some(100 + b as u16);
                    nodes[b].matches = Some(m);
                }
                nodes.swap(a, b);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}
