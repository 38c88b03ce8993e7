//! Shared checks for weft's fuzz targets.
//!
//! [`check_policy_text`] is the oracle both targets run on a policy text:
//!
//! 1. `compile_str` must not panic. On `Err`, the diagnostics must render (`Display`); with
//!    `WEFT_FUZZ_STRICT_SPANS=1`, every span must also lie inside its file, on character
//!    boundaries.
//! 2. On `Ok`, `Program::check_invariants` must hold; the normalized JSON
//!    (`show::to_json`) must compile again, re-emit byte-identical JSON, and classify every
//!    probe packet the same way (compared by node and shaping-class *names*).
//! 3. For every probe packet, the fast classifier equals the reference twin
//!    (`classify == classify_reference`).
//!
//! Probe packets: the empty packet; for every leaf, a packet built to satisfy the matches on
//! its path (so deep leaves are reached, not only `Unclassified`); and up to
//! [`MAX_RANDOM_PACKETS`] packets decoded from the fuzzer's extra bytes, whose field values
//! are mostly drawn from the values the policy itself mentions (and their neighbours).

pub mod structured;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::Unstructured;
use weft_core::classifier::{prefix_mask, Field, Match, PacketMeta, FIELDS};
use weft_core::policy::{compile_str, show, Classification, LoadOptions, PolicyError, Program};

/// Packets decoded from the extra bytes, at most.
pub const MAX_RANDOM_PACKETS: usize = 16;
/// Leaves probed with a path-satisfying packet, at most.
const MAX_LEAF_PROBES: usize = 64;

/// The path policies are compiled under: inside `examples/policies`, so a fuzzed
/// `policy: tenants/vm1.yaml` attaches a real sub-policy.
pub fn policy_path() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/policies/fuzz-input.yaml")
    })
}

/// Texts that could make the compiler read a device or a huge file through `policy:`
/// (e.g. `/dev/zero` blocks forever): skipped, they would only find the fuzzer's own hazard.
fn unsafe_to_compile(text: &str) -> bool {
    text.contains("policy")
        && ["dev", "proc", "sys", "\\", "fd"]
            .iter()
            .any(|w| text.contains(w))
}

/// Runs every check on `text`; `extra` seeds the random probe packets.
pub fn check_policy_text(text: &str, extra: &[u8]) {
    if unsafe_to_compile(text) {
        return;
    }
    let path = policy_path();
    let opts = LoadOptions::default();
    let prog = match compile_str(path, text, &opts) {
        Ok(p) => p,
        Err(e) => {
            check_error(&e);
            return;
        }
    };
    prog.check_invariants();

    let packets = probe_packets(&prog, extra);
    for pkt in &packets {
        let fast = prog.classify(pkt);
        let reference = prog.classify_reference(pkt);
        assert_eq!(
            fast, reference,
            "classify != classify_reference for packet {pkt:?}\n  fast: {}\n  reference: {}\npolicy:\n{text}",
            describe(&prog, &fast),
            describe(&prog, &reference),
        );
    }

    let json = serde_json::to_string_pretty(&show::to_json(&prog)).expect("JSON serializes");
    let again = match compile_str(path, &json, &opts) {
        Ok(p) => p,
        Err(e) => panic!(
            "normalized JSON does not compile:\n{e}\n--- JSON ---\n{json}\n--- policy ---\n{text}"
        ),
    };
    again.check_invariants();
    let json2 = serde_json::to_string_pretty(&show::to_json(&again)).expect("JSON serializes");
    assert!(
        json == json2,
        "normalized JSON is not a fixed point\n--- first ---\n{json}\n--- second ---\n{json2}\n--- policy ---\n{text}"
    );
    for pkt in &packets {
        let a = describe(&prog, &prog.classify(pkt));
        let b = describe(&again, &again.classify(pkt));
        assert_eq!(
            a, b,
            "the policy and its normalized JSON classify packet {pkt:?} differently\npolicy:\n{text}"
        );
    }
}

/// A classification by names, comparable across two compilations.
pub fn describe(p: &Program, c: &Classification) -> String {
    match c {
        Classification::Leaf { leaf, node, shaping } => {
            let sh: Vec<&str> = shaping
                .as_slice()
                .iter()
                .map(|&s| p.shaper(s).name.as_str())
                .collect();
            format!("leaf#{leaf} `{}` via {sh:?}", p.node(*node).name)
        }
        Classification::Unclassified { at } => {
            format!("unclassified at `{}`", p.node(*at).name)
        }
    }
}

/// `WEFT_FUZZ_STRICT_SPANS=1` also asserts that every diagnostic span is a char range inside
/// its file. Off by default: a span one past the end (e.g. on files with `\r` line breaks) is
/// a diagnostics-quality issue, not a crash, and would stop the fuzzer on every run.
fn strict_spans() -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    *S.get_or_init(|| std::env::var_os("WEFT_FUZZ_STRICT_SPANS").is_some_and(|v| v != "0"))
}

fn check_error(e: &PolicyError) {
    let _ = e.to_string();
    let _ = e.rules_and_lines();
    if !strict_spans() {
        return;
    }
    for d in &e.diagnostics {
        let mut spans = vec![d.span];
        spans.extend(d.labels.iter().map(|l| l.span));
        for s in spans {
            let f = e.sources.file(s.file);
            let end = s.offset.checked_add(s.len);
            assert!(
                end.is_some_and(|end| end <= f.text.len())
                    && f.text.is_char_boundary(s.offset)
                    && f.text.is_char_boundary(s.offset + s.len),
                "diagnostic span {s:?} is not a char range of its {}-byte file ({}): {:?}\ntext: {:?}",
                f.text.len(),
                f.path.display(),
                d.message,
                f.text,
            );
        }
    }
}

/// Values the policy mentions, per field (addresses as 128-bit words), plus neighbours.
struct Pool {
    ints: [Vec<u64>; 8],
    addrs: [Vec<u128>; 2],
}

fn int_slot(f: Field) -> Option<usize> {
    FIELDS[..8].iter().position(|&g| g == f)
}

impl Pool {
    fn new(p: &Program) -> Pool {
        let mut pool = Pool {
            ints: Default::default(),
            addrs: Default::default(),
        };
        let matches = p.nodes.iter().map(|n| &n.matches).chain(p.shapers.iter().map(|s| &s.matches));
        for m in matches {
            for f in FIELDS {
                match int_slot(f) {
                    Some(i) => {
                        for v in m.ints(f) {
                            let near = [Some(v), v.checked_add(1), v.checked_sub(1)];
                            pool.ints[i].extend(near.into_iter().flatten().filter(|&x| x <= f.max_value()));
                        }
                    }
                    None => {
                        let i = usize::from(f == Field::Dst);
                        for pr in m.prefixes(f) {
                            let last = pr.addr | !prefix_mask(pr.len);
                            pool.addrs[i].extend([
                                pr.addr,
                                last,
                                pr.addr.wrapping_sub(1),
                                last.wrapping_add(1),
                            ]);
                        }
                    }
                }
            }
        }
        for v in pool.ints.iter_mut() {
            v.sort_unstable();
            v.dedup();
            v.truncate(256);
        }
        for v in pool.addrs.iter_mut() {
            v.sort_unstable();
            v.dedup();
            v.truncate(256);
        }
        pool
    }
}

fn set(p: &mut PacketMeta, f: Field, v: u128) {
    match f {
        Field::Src => p.src = v,
        Field::Dst => p.dst = v,
        _ => {
            p.set_int(f, v as u64);
            return;
        }
    }
    p.present |= f.bit();
}

/// A value for `f` accepted by every match in `ms` that constrains `f`, if one is easy to find.
fn common_value(f: Field, ms: &[&Match]) -> Option<u128> {
    let constraining: Vec<&&Match> = ms.iter().filter(|m| m.count(f) > 0).collect();
    let first = constraining.first()?;
    let cands: Vec<u128> = match int_slot(f) {
        Some(_) => first.ints(f).into_iter().map(u128::from).collect(),
        None => {
            // The most specific prefix is the best candidate.
            let mut all: Vec<_> = constraining.iter().flat_map(|m| m.prefixes(f).iter().copied()).collect();
            all.sort_by_key(|p| std::cmp::Reverse(p.len));
            all.into_iter().map(|p| p.addr).collect()
        }
    };
    let probe = |v: u128| {
        let mut pkt = PacketMeta::default();
        set(&mut pkt, f, v);
        pkt
    };
    cands.into_iter().find(|&v| {
        let pkt = probe(v);
        constraining.iter().all(|m| {
            // Only `f` is present in `pkt`: compare on that field alone.
            let mut only = Match::default();
            match f {
                Field::Src => only.src = m.src.clone(),
                Field::Dst => only.dst = m.dst.clone(),
                _ => {
                    for x in m.ints(f) {
                        only.push_int(f, x);
                    }
                }
            }
            only.matches(&pkt)
        })
    })
}

fn probe_packets(prog: &Program, extra: &[u8]) -> Vec<PacketMeta> {
    let mut out = vec![PacketMeta::default()];
    // One packet per leaf that satisfies its path's matches (shaping matches included).
    for &n in prog.leaves.iter().take(MAX_LEAF_PROBES) {
        let mut ms: Vec<&Match> = Vec::new();
        let mut cur = Some(n);
        while let Some(i) = cur {
            let node = prog.node(i);
            ms.push(&node.matches);
            if let Some(&s) = node.shaping_parents.first() {
                ms.push(&prog.shaper(s).matches);
            }
            cur = node.parent;
        }
        let mut pkt = PacketMeta::default();
        for f in FIELDS {
            if let Some(v) = common_value(f, &ms) {
                set(&mut pkt, f, v);
            }
        }
        out.push(pkt);
    }
    // Packets from the fuzzer's bytes, mostly from the policy's own values.
    let pool = Pool::new(prog);
    let mut u = Unstructured::new(extra);
    while out.len() < 1 + MAX_LEAF_PROBES + MAX_RANDOM_PACKETS && !u.is_empty() {
        let Ok(pkt) = random_packet(&mut u, &pool) else { break };
        out.push(pkt);
    }
    out
}

fn random_packet(u: &mut Unstructured, pool: &Pool) -> arbitrary::Result<PacketMeta> {
    let mut pkt = PacketMeta::default();
    let present: u16 = u.arbitrary()?;
    for (bit, f) in FIELDS.into_iter().enumerate() {
        if present & (1 << bit) == 0 {
            continue;
        }
        let from_pool: bool = u.ratio(3, 4)?;
        let v: u128 = match int_slot(f) {
            Some(i) if from_pool && !pool.ints[i].is_empty() => u128::from(*u.choose(&pool.ints[i])?),
            Some(_) => u128::from(u.arbitrary::<u64>()? % (f.max_value().saturating_add(1)).max(1)),
            None => {
                let i = usize::from(f == Field::Dst);
                if from_pool && !pool.addrs[i].is_empty() {
                    *u.choose(&pool.addrs[i])?
                } else {
                    u.arbitrary()?
                }
            }
        };
        set(&mut pkt, f, v);
    }
    Ok(pkt)
}
