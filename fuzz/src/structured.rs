//! A structured policy generator for `policy_structured`: `arbitrary` builds a [`Policy`]
//! (a list of nodes with names from a small alphabet, every node type, parents among earlier
//! or any names, small matches on `vm`/`dport`/`dst`, edge keys and leaf options), and
//! [`Policy::render`] writes it as YAML. Most generated policies are *almost* valid, so the
//! fuzzer spends its time in the compiler's graph checks, classifier build and `show`, not
//! in the YAML parser.
//!
//! `Debug` prints the rendered YAML, so `cargo fuzz fmt policy_structured ARTIFACT` shows the
//! reproducer as a policy file.

use std::fmt::{self, Write as _};

use arbitrary::{Arbitrary, Result, Unstructured};

/// Node names: a small alphabet so that parents often name existing nodes.
const NAMES: [&str; 12] = ["root", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"];
const TYPES: [&str; 11] = [
    "fifo", "prio", "wfq", "rr", "drr", "lstf", "edf", "senic", "shape", "leaf", "attach",
];
const RATES: [&str; 7] = ["1gbit", "10gbit", "500mbit", "2gbit", "4gbit", "100kbit", "100gbit"];
const SIZES: [&str; 6] = ["64kb", "1500b", "32kb", "1b", "9000b", "1mb"];
const TIMES: [&str; 4] = ["10us", "1ms", "0s", "250ns"];
const PORTS: [u16; 7] = [80, 443, 5432, 7077, 11211, 0, 65535];
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

/// A whole policy plus bytes for the probe packets.
pub struct Policy {
    pub name: bool,
    pub link: Option<(u8, Option<u8>, Option<u8>)>,
    pub limits: Option<[Option<u8>; 4]>,
    pub nodes: Vec<NodeSpec>,
    pub packet_bytes: Vec<u8>,
}

#[derive(Debug, Arbitrary)]
pub enum NameChoice {
    /// The alphabet's name at this node's position: unique names.
    Fresh,
    /// Any alphabet name: duplicates on purpose.
    Reuse(u8),
    /// A name the parser must refuse, or a sub-policy-like `x/y` name.
    Odd(u8),
}

#[derive(Debug, Arbitrary)]
pub enum ParentRef {
    /// One of the nodes declared before this one (index modulo their count).
    Earlier(u8),
    /// Any alphabet name: later nodes, itself, or a name never declared.
    Name(u8),
}

#[derive(Debug, Arbitrary)]
pub struct MatchSpec {
    pub any: bool,
    pub vm: Vec<u8>,
    pub dport: Vec<PortChoice>,
    pub dst: Vec<u8>,
    pub tag: Option<u8>,
}

#[derive(Debug, Arbitrary)]
pub enum PortChoice {
    Known(u8),
    Raw(u16),
}

#[derive(Debug, Arbitrary)]
pub struct NodeSpec {
    pub name: NameChoice,
    pub ty: u8,
    pub parents: Vec<ParentRef>,
    /// Written as a one-element list instead of a scalar.
    pub parent_as_list: bool,
    pub matches: Option<MatchSpec>,
    pub priority: Option<u8>,
    pub weight: Option<u8>,
    pub quantum: Option<u8>,
    pub rate: Option<u8>,
    pub burst: Option<u8>,
    pub slack: Option<u8>,
    pub deadline: Option<u8>,
    pub flows: Option<(u8, u8, Option<u8>)>,
    pub limit: Option<(Option<u8>, Option<u8>)>,
    pub outstanding: Option<u8>,
    /// `policy: tenants/vm1.yaml` (or a missing file) on an attachment point.
    pub policy: Option<bool>,
}

const MAX_NODES: usize = 24;

impl<'a> Arbitrary<'a> for Policy {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let name = u.arbitrary()?;
        let link = u.arbitrary()?;
        let limits = u.arbitrary()?;
        let n = u.int_in_range(0..=MAX_NODES)?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            let mut spec: NodeSpec = u.arbitrary()?;
            spec.parents.truncate(3);
            if let Some(m) = &mut spec.matches {
                m.vm.truncate(3);
                m.dport.truncate(3);
                m.dst.truncate(3);
            }
            nodes.push(spec);
        }
        let packet_bytes = u.arbitrary_take_rest()?.to_vec();
        Ok(Policy {
            name,
            link,
            limits,
            nodes,
            packet_bytes,
        })
    }
}

fn pick<T: Copy>(xs: &[T], i: u8) -> T {
    xs[i as usize % xs.len()]
}

impl Policy {
    /// The policy as YAML text.
    pub fn render(&self) -> String {
        let mut s = String::from("weft: 1\n");
        if self.name {
            s.push_str("name: fuzzed\n");
        }
        if let Some((rate, overhead, mtu)) = self.link {
            let _ = writeln!(s, "link:\n  rate: {}", pick(&RATES, rate));
            if let Some(o) = overhead {
                let _ = writeln!(s, "  overhead: {}b", o % 32);
            }
            if let Some(m) = mtu {
                let _ = writeln!(s, "  mtu: {}", pick(&SIZES, m));
            }
        }
        if let Some(lims) = &self.limits {
            let keys = ["max_depth", "max_nodes", "max_shaping_depth", "max_match_shapes"];
            let set: Vec<_> = keys.iter().zip(lims).filter_map(|(k, v)| v.map(|v| (k, v))).collect();
            if !set.is_empty() {
                s.push_str("limits:\n");
                for (k, v) in set {
                    let _ = writeln!(s, "  {k}: {}", 1 + v % 8);
                }
            }
        }
        s.push_str("nodes:\n");
        let mut declared: Vec<String> = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let name = match n.name {
                NameChoice::Fresh => NAMES[i % NAMES.len()].to_string(),
                NameChoice::Reuse(x) => pick(&NAMES, x).to_string(),
                NameChoice::Odd(x) => match x % 4 {
                    0 => format!("{}/x", pick(&NAMES, x / 4)),
                    1 => "\"\"".to_string(),
                    2 => "\"a b\"".to_string(),
                    _ => format!("{}", x),
                },
            };
            let ty = pick(&TYPES, n.ty);
            let _ = write!(s, "  - {{name: {name}, type: {ty}");
            let parents: Vec<String> = n
                .parents
                .iter()
                .map(|p| match *p {
                    ParentRef::Earlier(x) if !declared.is_empty() => {
                        declared[x as usize % declared.len()].clone()
                    }
                    ParentRef::Earlier(x) | ParentRef::Name(x) => pick(&NAMES, x).to_string(),
                })
                .collect();
            match parents.len() {
                0 => {}
                1 if !n.parent_as_list => {
                    let _ = write!(s, ", parent: {}", parents[0]);
                }
                _ => {
                    let _ = write!(s, ", parent: [{}]", parents.join(", "));
                }
            }
            if let Some(v) = n.priority {
                let _ = write!(s, ", priority: {}", v % 4);
            }
            if let Some(v) = n.weight {
                let _ = write!(s, ", weight: {}", v % 6);
            }
            if let Some(v) = n.quantum {
                let _ = write!(s, ", quantum: {}", pick(&SIZES, v));
            }
            if let Some(v) = n.rate {
                let _ = write!(s, ", rate: {}", pick(&RATES, v));
            }
            if let Some(v) = n.burst {
                let _ = write!(s, ", burst: {}", pick(&SIZES, v));
            }
            if let Some(v) = n.slack {
                let _ = write!(s, ", default_slack: {}", pick(&TIMES, v));
            }
            if let Some(v) = n.deadline {
                let _ = write!(s, ", default_deadline: {}", pick(&TIMES, v));
            }
            if let Some((by, sched, q)) = n.flows {
                let by = pick(&["five-tuple", "flow", "none"], by);
                let sched = pick(&["fifo", "fair"], sched);
                let _ = write!(s, ", flows: {{by: {by}, sched: {sched}");
                if let Some(q) = q {
                    let _ = write!(s, ", quantum: {}", pick(&SIZES, q));
                }
                s.push('}');
            }
            if let Some((p, b)) = n.limit {
                let mut parts = Vec::new();
                if let Some(p) = p {
                    parts.push(format!("packets: {}", p));
                }
                if let Some(b) = b {
                    parts.push(format!("bytes: {}", pick(&SIZES, b)));
                }
                let _ = write!(s, ", limit: {{{}}}", parts.join(", "));
            }
            if let Some(o) = n.outstanding {
                let _ = write!(s, ", outstanding: {o}");
            }
            if let Some(real) = n.policy {
                let file = if real { "tenants/vm1.yaml" } else { "tenants/missing.yaml" };
                let _ = write!(s, ", policy: {file}");
            }
            if let Some(m) = &n.matches {
                if m.any {
                    s.push_str(", match: any");
                } else {
                    let mut parts = Vec::new();
                    if !m.vm.is_empty() {
                        let v: Vec<String> = m.vm.iter().map(|x| (x % 4).to_string()).collect();
                        parts.push(format!("vm: [{}]", v.join(", ")));
                    }
                    if !m.dport.is_empty() {
                        let v: Vec<String> = m
                            .dport
                            .iter()
                            .map(|p| match *p {
                                PortChoice::Known(i) => pick(&PORTS, i).to_string(),
                                PortChoice::Raw(x) => x.to_string(),
                            })
                            .collect();
                        parts.push(format!("dport: [{}]", v.join(", ")));
                    }
                    if !m.dst.is_empty() {
                        let v: Vec<&str> = m.dst.iter().map(|&i| pick(&PREFIXES, i)).collect();
                        parts.push(format!("dst: [{}]", v.join(", ")));
                    }
                    if let Some(t) = m.tag {
                        parts.push(format!("tag: {}", t % 4));
                    }
                    let _ = write!(s, ", match: {{{}}}", parts.join(", "));
                }
            }
            s.push_str("}\n");
            declared.push(name);
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
