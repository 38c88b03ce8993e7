//! Tuple-space search dispatch: the fast classifier twin (see the parent module doc).
//!
//! Hand-written because no crate does first-match over conjunctive rules with per-field value
//! lists and prefixes. Each rule expands into *atoms* (one value per constrained field); atoms
//! of the same shape share a hash table from masked packet words to the lowest rule index.
//!
//! Invariants: within a table a key maps to the earliest rule that has it; tuples are sorted by
//! the earliest rule they hold, so a lookup may stop at the first tuple whose earliest rule is
//! not earlier than the best hit so far.
//!
//! Cost: build O(atoms × shapes) (the shadowing check probes every compatible shape); lookup
//! O(shapes) hash probes of a 64-byte key, independent of the number of rules.

use rustc_hash::FxHashMap;

use super::{prefix_mask, Field, FieldMask, Match, PacketMeta, FIELDS};

/// Masked packet words: the key of one tuple's table.
type Key = [u64; 8];

#[derive(Debug, Clone)]
struct Tuple {
    /// Fields this shape constrains.
    fields: FieldMask,
    /// Source prefix length (128-bit space) when `fields` has `Src`.
    src_len: u8,
    /// Destination prefix length when `fields` has `Dst`.
    dst_len: u8,
    /// Word masks selecting the constrained fields from [`PacketMeta::words`].
    mask: Key,
    /// Earliest rule index held by this tuple.
    min_rule: u32,
    /// The single entry when the table has exactly one (skips hashing).
    single: Option<(Key, u32)>,
    table: FxHashMap<Key, u32>,
}

/// Why a rule could not be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddError {
    /// Every packet this rule accepts is accepted by the earlier rule `by` (a rule index).
    Shadowed { by: u32 },
    /// The dispatch point would need more than `limit` distinct match shapes.
    TooManyShapes { limit: usize },
    /// The rule's value lists expand into more than `limit` combinations.
    TooManyCombinations { combinations: u128, limit: u128 },
}

/// Most combinations one rule may expand into (e.g. 64 ports × 64 prefixes).
pub const MAX_COMBINATIONS: u128 = 1 << 16;

fn word_mask(fields: FieldMask, src_len: u8, dst_len: u8) -> Key {
    let has = |f: Field| fields & f.bit() != 0;
    let sel = |f: Field, m: u64| if has(f) { m } else { 0 };
    let src = if has(Field::Src) {
        prefix_mask(src_len)
    } else {
        0
    };
    let dst = if has(Field::Dst) {
        prefix_mask(dst_len)
    } else {
        0
    };
    [
        sel(Field::Tenant, 0xffff_ffff) | sel(Field::Vm, 0xffff_ffff << 32),
        sel(Field::Cgroup, u64::MAX),
        sel(Field::Tag, 0xffff_ffff)
            | sel(Field::Sport, 0xffff << 32)
            | sel(Field::Dport, 0xffff << 48),
        sel(Field::Proto, 0xff) | sel(Field::Dscp, 0xff << 8),
        (src >> 64) as u64,
        src as u64,
        (dst >> 64) as u64,
        dst as u64,
    ]
}

#[inline]
fn and(a: &Key, m: &Key) -> Key {
    let mut k = [0u64; 8];
    for i in 0..8 {
        k[i] = a[i] & m[i];
    }
    k
}

/// One atom of a rule: a packet-shaped value plus its shape.
struct Atom {
    fields: FieldMask,
    src_len: u8,
    dst_len: u8,
    words: Key,
}

fn atoms(m: &Match) -> Vec<Atom> {
    let mut out = vec![(PacketMeta::default(), 0u8, 0u8)];
    for f in FIELDS {
        let n = m.count(f);
        if n == 0 {
            continue;
        }
        let mut next = Vec::with_capacity(out.len() * n);
        for (p, sl, dl) in &out {
            match f {
                Field::Src | Field::Dst => {
                    for q in m.prefixes(f) {
                        let mut p2 = *p;
                        p2.set_int(f, 0);
                        if f == Field::Src {
                            p2.src = q.addr;
                            next.push((p2, q.len, *dl));
                        } else {
                            p2.dst = q.addr;
                            next.push((p2, *sl, q.len));
                        }
                    }
                }
                _ => {
                    for v in m.ints(f) {
                        let mut p2 = *p;
                        p2.set_int(f, v);
                        next.push((p2, *sl, *dl));
                    }
                }
            }
        }
        out = next;
    }
    out.into_iter()
        .map(|(p, src_len, dst_len)| Atom {
            fields: p.present,
            src_len,
            dst_len,
            words: p.words(),
        })
        .collect()
}

/// Builds a [`Dispatch`] rule by rule, in priority (declaration) order.
#[derive(Debug, Clone)]
pub struct DispatchBuilder {
    tuples: Vec<Tuple>,
    targets: Vec<u32>,
    max_shapes: usize,
}

impl DispatchBuilder {
    /// A builder that refuses more than `max_shapes` distinct match shapes.
    pub fn new(max_shapes: usize) -> DispatchBuilder {
        DispatchBuilder {
            tuples: Vec::new(),
            targets: Vec::new(),
            max_shapes,
        }
    }

    /// Appends a rule that sends matching packets to `target`; returns its rule index.
    pub fn add(&mut self, m: &Match, target: u32) -> Result<u32, AddError> {
        let combinations = m.combinations();
        if combinations > MAX_COMBINATIONS {
            return Err(AddError::TooManyCombinations {
                combinations,
                limit: MAX_COMBINATIONS,
            });
        }
        let rule = self.targets.len() as u32;
        let atoms = atoms(m);
        // Shadowing: is every atom already accepted by an earlier rule?
        let mut shadowed_by = None;
        for a in &atoms {
            match self.covered_by(a) {
                Some(r) => shadowed_by = Some(shadowed_by.map_or(r, |b: u32| b.min(r))),
                None => {
                    shadowed_by = None;
                    break;
                }
            }
        }
        if let Some(by) = shadowed_by {
            return Err(AddError::Shadowed { by });
        }
        // Check the shape budget before mutating anything.
        let mut new_shapes = 0;
        for a in &atoms {
            if self.find_tuple(a).is_none() {
                new_shapes += 1;
            }
        }
        if new_shapes > 0 {
            let mut distinct: Vec<(FieldMask, u8, u8)> = atoms
                .iter()
                .filter(|a| self.find_tuple(a).is_none())
                .map(|a| (a.fields, a.src_len, a.dst_len))
                .collect();
            distinct.sort_unstable();
            distinct.dedup();
            if self.tuples.len() + distinct.len() > self.max_shapes {
                return Err(AddError::TooManyShapes {
                    limit: self.max_shapes,
                });
            }
        }
        for a in &atoms {
            let ti = match self.find_tuple(a) {
                Some(i) => i,
                None => {
                    let mask = word_mask(a.fields, a.src_len, a.dst_len);
                    self.tuples.push(Tuple {
                        fields: a.fields,
                        src_len: a.src_len,
                        dst_len: a.dst_len,
                        mask,
                        min_rule: rule,
                        single: None,
                        table: FxHashMap::default(),
                    });
                    self.tuples.len() - 1
                }
            };
            let t = &mut self.tuples[ti];
            t.table.entry(and(&a.words, &t.mask)).or_insert(rule);
        }
        self.targets.push(target);
        Ok(rule)
    }

    fn find_tuple(&self, a: &Atom) -> Option<usize> {
        self.tuples.iter().position(|t| {
            t.fields == a.fields
                && (a.fields & Field::Src.bit() == 0 || t.src_len == a.src_len)
                && (a.fields & Field::Dst.bit() == 0 || t.dst_len == a.dst_len)
        })
    }

    /// The earliest rule that accepts every packet of atom `a`, if any.
    fn covered_by(&self, a: &Atom) -> Option<u32> {
        let mut best: Option<u32> = None;
        for t in &self.tuples {
            if t.fields & !a.fields != 0 {
                continue;
            }
            if t.fields & Field::Src.bit() != 0 && t.src_len > a.src_len {
                continue;
            }
            if t.fields & Field::Dst.bit() != 0 && t.dst_len > a.dst_len {
                continue;
            }
            if let Some(&r) = t.table.get(&and(&a.words, &t.mask)) {
                best = Some(best.map_or(r, |b| b.min(r)));
            }
        }
        best
    }

    /// Number of rules added so far.
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// True when no rule was added.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Freezes the rules into a lookup structure.
    pub fn build(mut self) -> Dispatch {
        self.tuples.sort_by_key(|t| t.min_rule);
        for t in &mut self.tuples {
            if t.table.len() == 1 {
                t.single = t.table.iter().next().map(|(k, &v)| (*k, v));
            }
            t.table.shrink_to_fit();
        }
        Dispatch {
            tuples: self.tuples,
            targets: self.targets,
        }
    }
}

/// A frozen first-match dispatch point.
#[derive(Debug, Clone, Default)]
pub struct Dispatch {
    tuples: Vec<Tuple>,
    /// Rule index → target (a node or shaping-class index, chosen by the caller).
    targets: Vec<u32>,
}

impl Dispatch {
    /// The target of the first rule the packet satisfies, given the packet's words.
    #[inline]
    pub fn lookup_words(&self, words: &Key, present: FieldMask) -> Option<u32> {
        let mut best = u32::MAX;
        for t in &self.tuples {
            if t.min_rule >= best {
                break;
            }
            if present & t.fields != t.fields {
                continue;
            }
            let k = and(words, &t.mask);
            let hit = match &t.single {
                Some((key, r)) => (*key == k).then_some(*r),
                None => t.table.get(&k).copied(),
            };
            if let Some(r) = hit {
                best = best.min(r);
            }
        }
        self.targets.get(best as usize).copied()
    }

    /// The target of the first rule `p` satisfies.
    pub fn lookup(&self, p: &PacketMeta) -> Option<u32> {
        self.lookup_words(&p.words(), p.present)
    }

    /// Number of distinct match shapes (the hash probes a lookup may cost).
    pub fn shapes(&self) -> usize {
        self.tuples.len()
    }

    /// Number of rules.
    pub fn rules(&self) -> usize {
        self.targets.len()
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.targets.capacity() * 4
            + self
                .tuples
                .iter()
                .map(|t| std::mem::size_of::<Tuple>() + t.table.capacity() * (64 + 4 + 1))
                .sum::<usize>()
    }
}
