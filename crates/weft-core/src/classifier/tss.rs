//! Tuple-space search dispatch: the fast classifier twin (see the parent module doc).
//!
//! Hand-written because no crate does first-match over conjunctive rules with per-field value
//! lists and prefixes. Each rule expands into *atoms* (one value per constrained field); atoms
//! of the same shape share a table from masked packet words to the lowest rule index. A
//! shape's table is a direct array when its keys are dense values of one word (ids, ports,
//! sibling prefixes of one length), else a hash table. A catch-all rule is lifted out of the
//! shapes. How a lookup proceeds is chosen once, when the dispatch is built (`Path`): no
//! shape (only the catch-all), one direct array (read inline by the caller, the catch-all
//! stored in its empty slots), one hashed shape, or several shapes.
//!
//! Invariants: within a table a key maps to the earliest rule that has it; tuples are sorted by
//! the earliest rule they hold, so a lookup may stop at the first tuple whose earliest rule is
//! not earlier than the best hit so far; the catch-all, if any, is the last rule, so it
//! answers exactly the packets no shape holds.
//!
//! Cost: build O(atoms × shapes) (the shadowing check probes every compatible shape). Lookup:
//! a one-array dispatch (the common case) is about twenty instructions inline — a field-mask
//! test, a mask, a shift, a bounds check, two loads — with no call and no hashing; otherwise
//! O(shapes) probes (hashed ones of a 16- or 64-byte key), independent of the number of rules.

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

/// "No rule" in packed values (`rule << 32 | target`) and in direct slots.
const NONE: u64 = u64::MAX;

/// "No target" from [`Dispatch::lookup_target`]; targets (node and shaper ids) are below it.
pub const NO_TARGET: u32 = u32::MAX;

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
    /// Dense values of one word: see [`Direct`]. No hashing.
    Direct(Direct),
    /// At most two words: hashed as a two-word key (the common sparse case).
    Small {
        pick: [u8; 2],
        pick_mask: [u64; 2],
        map: FxHashMap<[u64; 2], u64>,
    },
    /// More than two words (e.g. source and destination prefixes): full masked keys.
    Full(Box<(Key, FxHashMap<Key, u64>)>),
}

/// A direct table: dense values of one word (ids, ports, sibling prefixes of one length) as
/// an array, `slots[((words[word] & mask) >> shift) - base]`, valid when
/// `words[check_word] & check_mask == check_value` (`check_mask` 0 when the shape reads one
/// word only, and then the check is skipped). Empty slots hold `NONE`, or, in a dispatch
/// whose only shape this is, the catch-all (so a miss needs no second step). A lookup is a
/// load, a mask, a shift, a bounds check and a second load (plus a load and a compare for
/// the check).
#[derive(Debug, Clone)]
struct Direct {
    mask: u64,
    base: u64,
    check_mask: u64,
    check_value: u64,
    /// Word indices are below 8 (masked with 7 on use, so no bounds check is needed).
    word: u8,
    shift: u8,
    check_word: u8,
    slots: Box<[u64]>,
}

impl Direct {
    /// The slot for the packet's words, or `miss` outside the table. `CHECK` must be true
    /// when `check_mask` is not 0.
    #[inline(always)]
    fn get<const CHECK: bool>(&self, words: &Key, miss: u64) -> u64 {
        if CHECK && words[usize::from(self.check_word & 7)] & self.check_mask != self.check_value {
            return miss;
        }
        let v =
            ((words[usize::from(self.word & 7)] & self.mask) >> self.shift).wrapping_sub(self.base);
        match self.slots.get(v as usize) {
            Some(&x) => x,
            None => miss,
        }
    }
}

impl Shape {
    /// The packed value of the earliest rule of this shape the packet's words hit, or `NONE`.
    /// The caller has checked `fields` against the packet's present fields.
    #[inline]
    fn get(&self, words: &Key) -> u64 {
        match &self.table {
            ShapeTable::Direct(d) => d.get::<true>(words, NONE),
            ShapeTable::Small {
                pick,
                pick_mask,
                map,
            } => small_get(map, pick, pick_mask, words),
            ShapeTable::Full(full) => full_get(&full.1, &full.0, words),
        }
    }

    /// The packed value of every entry (used to lift a catch-all out of the shapes).
    fn values(&self) -> Vec<u64> {
        match &self.table {
            ShapeTable::Direct(d) => d.slots.iter().copied().filter(|&v| v != NONE).collect(),
            ShapeTable::Small { map, .. } => map.values().copied().collect(),
            ShapeTable::Full(full) => full.1.values().copied().collect(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.table {
            ShapeTable::Direct(d) => d.slots.len() * 8,
            ShapeTable::Small { map, .. } => map.capacity() * (16 + 8 + 1),
            ShapeTable::Full(full) => 64 + full.1.capacity() * (64 + 8 + 1),
        }
    }
}

/// A two-word hashed probe (out of line: the hashing code would bloat every caller).
#[inline(never)]
fn small_get(
    map: &FxHashMap<[u64; 2], u64>,
    pick: &[u8; 2],
    pick_mask: &[u64; 2],
    words: &Key,
) -> u64 {
    let k = [
        words[usize::from(pick[0] & 7)] & pick_mask[0],
        words[usize::from(pick[1] & 7)] & pick_mask[1],
    ];
    map.get(&k).copied().unwrap_or(NONE)
}

/// A full-key hashed probe.
#[inline(never)]
fn full_get(map: &FxHashMap<Key, u64>, mask: &Key, words: &Key) -> u64 {
    map.get(&and(words, mask)).copied().unwrap_or(NONE)
}

/// Why a rule could not be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddError {
    /// Every packet this rule accepts is accepted by the earlier rule `by` (a rule index).
    Shadowed {
        /// The earlier rule's index.
        by: u32,
    },
    /// The dispatch point would need more than `limit` distinct match shapes.
    TooManyShapes {
        /// The most shapes a dispatch point may have.
        limit: usize,
    },
    /// The rule's value lists expand into more than `limit` combinations.
    TooManyCombinations {
        /// The combinations the rule expands into.
        combinations: u128,
        /// The most a rule may expand into.
        limit: u128,
    },
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
        src as u64,
        (src >> 64) as u64,
        dst as u64,
        (dst >> 64) as u64,
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
        let mut any = NONE;
        if let Some(i) = shapes.iter().position(|s| s.fields == 0) {
            let catch_all = shapes.remove(i);
            any = catch_all.values().into_iter().min().unwrap_or(NONE);
        }
        let path = match shapes.len() {
            0 => Path::AnyOnly,
            1 => {
                let s = shapes.pop().expect("one shape");
                match s.table {
                    ShapeTable::Direct(mut table) => {
                        // The catch-all answers every miss: store it in the empty slots.
                        for slot in table.slots.iter_mut().filter(|v| **v == NONE) {
                            *slot = any;
                        }
                        Path::Direct {
                            fields: s.fields,
                            table,
                        }
                    }
                    _ => Path::One(s),
                }
            }
            _ => Path::Many(shapes.into_boxed_slice()),
        };
        Dispatch {
            path,
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
    let mut slots = vec![NONE; span as usize].into_boxed_slice();
    for (v, r) in values {
        slots[(v - lo) as usize] = pack(r);
    }
    let (check_word, check_mask) = check.map_or((word, 0), |c| (c, t.mask[c]));
    Some(ShapeTable::Direct(Direct {
        mask,
        base: lo,
        check_mask,
        check_value: first[check_word] & check_mask,
        word: word as u8,
        shift: shift as u8,
        check_word: check_word as u8,
        slots,
    }))
}

/// A frozen first-match dispatch point. How a lookup proceeds is decided when it is built
/// (see the module doc), so the common dispatches (one direct array: ids, ports, sibling
/// prefixes) cost a few instructions inline and no call.
#[derive(Debug, Clone)]
pub struct Dispatch {
    path: Path,
    /// The catch-all rule (empty match), packed; it is always the last rule because it
    /// shadows everything after it, so it answers only when no shape does.
    any: u64,
    rules: u32,
}

/// The lookup strategy of a [`Dispatch`], chosen at build time. `repr(u8)`: a plain tag byte,
/// so telling the paths apart is one compare (a niche-packed tag costs several).
#[derive(Debug, Clone)]
#[repr(u8)]
enum Path {
    /// No shape: only the catch-all answers (if there is one).
    AnyOnly,
    /// One shape stored as a direct array (inline, no hashing); its empty slots hold the
    /// catch-all. A second, constant word is checked when the table has a check mask (e.g.
    /// sibling IPv4 prefixes: the address's upper 64 bits).
    Direct { fields: FieldMask, table: Direct },
    /// One hashed shape (stored inline: one probe, no extra pointer chase).
    One(Shape),
    /// Several shapes, sorted by their earliest rule.
    Many(Box<[Shape]>),
}

impl Default for Dispatch {
    /// A dispatch with no rules: every lookup misses.
    fn default() -> Dispatch {
        Dispatch {
            path: Path::AnyOnly,
            any: NONE,
            rules: 0,
        }
    }
}

impl Dispatch {
    /// The target of the first rule the packet satisfies, given the packet's words. The
    /// direct-array cases are inlined into the caller; the others are one call away.
    #[inline(always)]
    pub fn lookup_words(&self, words: &Key, present: FieldMask) -> Option<u32> {
        let best = self.lookup_packed(words, present);
        (best != NONE).then_some(best as u32)
    }

    /// [`Dispatch::lookup_words`] without the `Option`: the target, or [`NO_TARGET`] on a
    /// miss. For callers whose targets are all below `NO_TARGET` (node and shaper ids): a
    /// miss is then out of range of every index table, so the caller's bounds check doubles
    /// as the miss check.
    #[inline(always)]
    pub fn lookup_target(&self, words: &Key, present: FieldMask) -> u32 {
        // `NONE` truncates to `NO_TARGET`.
        self.lookup_packed(words, present) as u32
    }

    /// The packed answer (`rule << 32 | target`) or `NONE`.
    #[inline(always)]
    fn lookup_packed(&self, words: &Key, present: FieldMask) -> u64 {
        match &self.path {
            Path::Direct { fields, table } => {
                if present & fields != *fields {
                    self.any
                } else if table.check_mask != 0 {
                    table.get::<true>(words, self.any)
                } else {
                    table.get::<false>(words, self.any)
                }
            }
            _ => self.lookup_other(words, present),
        }
    }

    /// The paths with hashing or several shapes: the packed answer or `NONE`.
    #[inline(never)]
    fn lookup_other(&self, words: &Key, present: FieldMask) -> u64 {
        // The catch-all is the last rule, so `min` with it keeps any earlier hit.
        match &self.path {
            Path::AnyOnly => self.any,
            Path::Direct { .. } => unreachable!("direct paths are looked up inline"),
            Path::One(s) => {
                if present & s.fields == s.fields {
                    s.get(words).min(self.any)
                } else {
                    self.any
                }
            }
            Path::Many(shapes) => self.lookup_many(shapes, words, present),
        }
    }

    /// Several shapes: probe them in order of their earliest rule, stopping once no remaining
    /// shape can hold a rule earlier than the best hit.
    fn lookup_many(&self, shapes: &[Shape], words: &Key, present: FieldMask) -> u64 {
        let mut best = self.any;
        for s in shapes {
            if u64::from(s.min_rule) >= best >> 32 {
                break;
            }
            if present & s.fields != s.fields {
                continue;
            }
            best = best.min(s.get(words));
        }
        best
    }

    /// The target of the first rule `p` satisfies.
    pub fn lookup(&self, p: &PacketMeta) -> Option<u32> {
        self.lookup_words(&p.words(), p.present)
    }

    /// Number of distinct match shapes (the probes a lookup may cost).
    pub fn shapes(&self) -> usize {
        let n = match &self.path {
            Path::AnyOnly => 0,
            Path::Direct { .. } | Path::One(_) => 1,
            Path::Many(shapes) => shapes.len(),
        };
        n + usize::from(self.any != NONE)
    }

    /// Number of rules.
    pub fn rules(&self) -> usize {
        self.rules as usize
    }

    /// Approximate heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        match &self.path {
            Path::AnyOnly => 0,
            Path::Direct { table, .. } => table.slots.len() * 8,
            Path::One(s) => s.heap_bytes(),
            Path::Many(shapes) => shapes
                .iter()
                .map(|s| std::mem::size_of::<Shape>() + s.heap_bytes())
                .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(rules: &[Match]) -> Dispatch {
        let mut b = DispatchBuilder::new(8);
        for (i, m) in rules.iter().enumerate() {
            b.add(m, i as u32).unwrap();
        }
        b.build()
    }

    fn ports(ps: &[u16]) -> Vec<Match> {
        ps.iter()
            .map(|&p| Match {
                dport: vec![p],
                ..Match::default()
            })
            .collect()
    }

    /// The fast paths are chosen where they apply (the answers are the property tests' job).
    #[test]
    fn build_picks_the_cheapest_path() {
        let path = |d: &Dispatch| match &d.path {
            Path::AnyOnly => "any",
            Path::Direct { table, .. } if table.check_mask == 0 => "direct",
            Path::Direct { .. } => "direct-checked",
            Path::One(_) => "one",
            Path::Many(_) => "many",
        };
        let mut dense = ports(&[1000, 1001, 1005]);
        dense.push(Match::any());
        assert_eq!(path(&build(&dense)), "direct");
        assert_eq!(path(&build(&ports(&[22, 80, 11211, 65535]))), "one");
        let dsts: Vec<Match> = (0..8)
            .map(|d| Match {
                dst: vec![format!("10.0.{d}.0/24").parse().unwrap()],
                ..Match::default()
            })
            .collect();
        assert_eq!(path(&build(&dsts)), "direct-checked");
        let mut two = ports(&[80]);
        two.push(Match {
            vm: vec![1],
            ..Match::default()
        });
        assert_eq!(path(&build(&two)), "many");
        assert_eq!(path(&build(&[Match::any()])), "any");
        assert_eq!(path(&Dispatch::default()), "any");
    }
}
