//! The reference classifier twin: a linear first-match scan over the rules of one dispatch
//! point. Obviously correct, O(rules × fields) per lookup; used by property tests and as the
//! baseline of the classifier benchmark.

use super::{Match, PacketMeta};

/// Rules in declaration order, each with its target.
#[derive(Debug, Clone, Default)]
pub struct ReferenceDispatch {
    rules: Vec<(Match, u32)>,
}

impl ReferenceDispatch {
    /// Appends a rule.
    pub fn add(&mut self, m: Match, target: u32) {
        self.rules.push((m, target));
    }

    /// The target of the first rule `p` satisfies.
    pub fn lookup(&self, p: &PacketMeta) -> Option<u32> {
        self.rules
            .iter()
            .find(|(m, _)| m.matches(p))
            .map(|&(_, t)| t)
    }

    /// Index of the first earlier rule that accepts every packet `m` accepts, checked
    /// field by field (the reference for the fast builder's shadowing check).
    pub fn covering_rule(&self, m: &Match) -> Option<usize> {
        self.rules
            .iter()
            .position(|(earlier, _)| covers(earlier, m))
    }
}

/// Does `a` accept every packet `b` accepts? Exact for single-rule covering.
pub fn covers(a: &Match, b: &Match) -> bool {
    fn ints<T: PartialEq>(a: &[T], b: &[T]) -> bool {
        a.is_empty() || (!b.is_empty() && b.iter().all(|x| a.contains(x)))
    }
    fn pre(a: &[super::Prefix], b: &[super::Prefix]) -> bool {
        a.is_empty() || (!b.is_empty() && b.iter().all(|x| a.iter().any(|y| y.covers(x))))
    }
    ints(&a.tenant, &b.tenant)
        && ints(&a.vm, &b.vm)
        && ints(&a.cgroup, &b.cgroup)
        && ints(&a.tag, &b.tag)
        && ints(&a.sport, &b.sport)
        && ints(&a.dport, &b.dport)
        && ints(&a.proto, &b.proto)
        && ints(&a.dscp, &b.dscp)
        && pre(&a.src, &b.src)
        && pre(&a.dst, &b.dst)
}

impl ReferenceDispatch {
    /// The reference twin of the fast builder's shadowing check: `m` is shadowed when each
    /// of its single-valued combinations is accepted by some earlier rule; returns the
    /// earliest such rule.
    pub fn shadowed_by(&self, m: &Match) -> Option<usize> {
        let mut earliest: Option<usize> = None;
        for atom in single_valued(m) {
            let first = self.covering_rule(&atom)?;
            earliest = Some(earliest.map_or(first, |e| e.min(first)));
        }
        earliest
    }
}

/// Every single-valued match a match expands into.
pub fn single_valued(m: &Match) -> Vec<Match> {
    use super::{Field, FIELDS};
    let mut out = vec![Match::any()];
    for f in FIELDS {
        if m.count(f) == 0 {
            continue;
        }
        let mut next = Vec::new();
        for base in &out {
            match f {
                Field::Src | Field::Dst => {
                    for p in m.prefixes(f) {
                        let mut x = base.clone();
                        if f == Field::Src {
                            x.src = vec![*p];
                        } else {
                            x.dst = vec![*p];
                        }
                        next.push(x);
                    }
                }
                _ => {
                    for v in m.ints(f) {
                        let mut x = base.clone();
                        x.push_int(f, v);
                        next.push(x);
                    }
                }
            }
        }
        out = next;
    }
    out
}
