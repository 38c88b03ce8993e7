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

/// A match shape while building: full 8-word keys.
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
    /// Masked key → earliest rule with it.
    table: FxHashMap<Key, u32>,
}

/// A frozen match shape. Values pack `rule << 32 | target`, so the minimum value is the
/// earliest rule and the answer comes without a second lookup.
#[derive(Debug, Clone)]
struct Shape {
    /// Fields this shape constrains (a packet lacking one cannot match).
    fields: FieldMask,
    /// Earliest rule in this shape (for the early exit).
    min_rule: u32,
    /// The table, in the cheapest form the shape's keys allow.
    table: ShapeTable,
}

/// How one shape's keys are looked up.
#[derive(Debug, Clone)]
enum ShapeTable {
    /// Dense values of one word (ids, ports, sibling prefixes of one length): an array,
    /// `slots[((words[word] & mask) >> shift) - base]` (`u64::MAX` = no rule), valid when
    /// `words[check_word] & check_mask == check_value`. No hashing.
    Direct {
        word: u8,
        shift: u8,
        check_word: u8,
        mask: u64,
        base: u64,
        check_mask: u64,
        check_value: u64,
        slots: Box<[u64]>,
    },
    /// At most two words: hashed as a two-word key (the common sparse case).
    Small {
        pick: [u8; 2],
        pick_mask: [u64; 2],
        map: FxHashMap<[u64; 2], u64>,
    },
    /// More than two words (e.g. source and destination prefixes): full masked keys.
    Full(Box<(Key, FxHashMap<Key, u64>)>),
}

impl Shape {
    #[inline]
    fn get(&self, words: &Key) -> Option<u64> {
        match &self.table {
            ShapeTable::Direct {
                word,
                shift,
                check_word,
                mask,
                base,
                check_mask,
                check_value,
                slots,
            } => {
                if words[*check_word as usize] & check_mask != *check_value {
                    return None;
                }
                let v = ((words[*word as usize] & mask) >> shift).wrapping_sub(*base);
                slots.get(v as usize).copied().filter(|&x| x != u64::MAX)
            }
            ShapeTable::Small {
                pick,
                pick_mask,
                map,
            } => {
                let k = [
                    words[pick[0] as usize] & pick_mask[0],
                    words[pick[1] as usize] & pick_mask[1],
                ];
                map.get(&k).copied()
            }
            ShapeTable::Full(full) => full.1.get(&and(words, &full.0)).copied(),
        }
    }

    /// The packed value of every entry (used to lift a catch-all out of the shapes).
    fn values(&self) -> Vec<u64> {
        match &self.table {
            ShapeTable::Direct { slots, .. } => {
                slots.iter().copied().filter(|&v| v != u64::MAX).collect()
            }
            ShapeTable::Small { map, .. } => map.values().copied().collect(),
            ShapeTable::Full(full) => full.1.values().copied().collect(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.table {
            ShapeTable::Direct { slots, .. } => slots.len() * 8,
            ShapeTable::Small { map, .. } => map.capacity() * (16 + 8 + 1),
            ShapeTable::Full(full) => 64 + full.1.capacity() * (64 + 8 + 1),
        }
    }
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
        let targets = &self.targets;
        let pack = |rule: u32| (u64::from(rule) << 32) | u64::from(targets[rule as usize]);
        let mut shapes: Vec<Shape> = self
            .tuples
            .into_iter()
            .map(|t| {
                let used: Vec<usize> = (0..8).filter(|&i| t.mask[i] != 0).collect();
                let table = if used.len() <= 2 {
                    direct_table(&t, &pack).unwrap_or_else(|| {
                        let a = used.first().copied().unwrap_or(0);
                        let b = used.get(1).copied().unwrap_or(a);
                        let pick_mask = [t.mask[a], if used.len() == 2 { t.mask[b] } else { 0 }];
                        let map = t
                            .table
                            .iter()
                            .map(|(k, r)| ([k[a] & pick_mask[0], k[b] & pick_mask[1]], pack(*r)))
                            .collect();
                        ShapeTable::Small {
                            pick: [a as u8, b as u8],
                            pick_mask,
                            map,
                        }
                    })
                } else {
                    let map = t.table.iter().map(|(k, r)| (*k, pack(*r))).collect();
                    ShapeTable::Full(Box::new((t.mask, map)))
                };
                Shape {
                    fields: t.fields,
                    min_rule: t.min_rule,
                    table,
                }
            })
            .collect();
        let mut any = u64::MAX;
        if let Some(i) = shapes.iter().position(|s| s.fields == 0) {
            let catch_all = shapes.remove(i);
            any = catch_all.values().into_iter().min().unwrap_or(u64::MAX);
        }
        let head = if shapes.is_empty() {
            None
        } else {
            Some(shapes.remove(0))
        };
        Dispatch {
            head,
            rest: shapes,
            any,
            rules: self.targets.len() as u32,
        }
    }
}

/// A direct table when, among the (at most two) words a compact shape reads, one word's
/// masked values are dense (at most `max(256, 4 × entries)` slots) and the other is the same
/// for every entry: ids, ports, and sibling prefixes of one length (per-destination limits).
fn direct_table(t: &Tuple, pack: &impl Fn(u32) -> u64) -> Option<ShapeTable> {
    let used: Vec<usize> = (0..8).filter(|&i| t.mask[i] != 0).collect();
    let first = t.table.keys().next()?;
    let varies = |w: usize| {
        t.table
            .keys()
            .any(|k| k[w] & t.mask[w] != first[w] & t.mask[w])
    };
    let (word, check) = match used.as_slice() {
        [a] => (*a, None),
        [a, b] => match (varies(*a), varies(*b)) {
            (_, false) => (*a, Some(*b)),
            (false, true) => (*b, Some(*a)),
            (true, true) => return None,
        },
        _ => return None,
    };
    let mask = t.mask[word];
    let shift = mask.trailing_zeros();
    let values: Vec<(u64, u32)> = t
        .table
        .iter()
        .map(|(k, &r)| ((k[word] & mask) >> shift, r))
        .collect();
    let lo = values.iter().map(|v| v.0).min()?;
    let hi = values.iter().map(|v| v.0).max()?;
    let span = hi - lo + 1;
    if span > 256.max(4 * values.len() as u64) {
        return None;
    }
    let mut slots = vec![u64::MAX; span as usize].into_boxed_slice();
    for (v, r) in values {
        slots[(v - lo) as usize] = pack(r);
    }
    let (check_word, check_mask) = check.map_or((word, 0), |c| (c, t.mask[c]));
    Some(ShapeTable::Direct {
        word: word as u8,
        shift: shift as u8,
        check_word: check_word as u8,
        mask,
        base: lo,
        check_mask,
        check_value: first[check_word] & check_mask,
        slots,
    })
}

/// A frozen first-match dispatch point. The first shape is stored inline so the common
/// single-shape dispatch costs one hash probe and no extra pointer chase.
#[derive(Debug, Clone)]
pub struct Dispatch {
    head: Option<Shape>,
    rest: Vec<Shape>,
    /// The catch-all rule (empty match), packed; it is always the last rule because it
    /// shadows everything after it, so it answers only when no shape does.
    any: u64,
    rules: u32,
}

impl Default for Dispatch {
    /// A dispatch with no rules: every lookup misses.
    fn default() -> Dispatch {
        Dispatch {
            head: None,
            rest: Vec::new(),
            any: u64::MAX,
            rules: 0,
        }
    }
}

impl Dispatch {
    /// The target of the first rule the packet satisfies, given the packet's words.
    #[inline]
    pub fn lookup_words(&self, words: &Key, present: FieldMask) -> Option<u32> {
        let Some(head) = &self.head else {
            return (self.any != u64::MAX).then_some(self.any as u32);
        };
        let mut best = self.any;
        if present & head.fields == head.fields {
            if let Some(v) = head.get(words) {
                best = v;
            }
        }
        for s in &self.rest {
            if u64::from(s.min_rule) >= best >> 32 {
                break;
            }
            if present & s.fields != s.fields {
                continue;
            }
            if let Some(v) = s.get(words) {
                best = best.min(v);
            }
        }
        (best != u64::MAX).then_some(best as u32)
    }

    /// The target of the first rule `p` satisfies.
    pub fn lookup(&self, p: &PacketMeta) -> Option<u32> {
        self.lookup_words(&p.words(), p.present)
    }

    /// Number of distinct match shapes (the hash probes a lookup may cost).
    pub fn shapes(&self) -> usize {
        self.rest.len() + usize::from(self.head.is_some()) + usize::from(self.any != u64::MAX)
    }

    /// Number of rules.
    pub fn rules(&self) -> usize {
        self.rules as usize
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.head
            .iter()
            .chain(&self.rest)
            .map(Shape::heap_bytes)
            .sum::<usize>()
            + self.rest.capacity() * std::mem::size_of::<Shape>()
    }
}
