//! `weft replay --update WHEN:NAME.FIELD=VALUE`: live updates of weights, priorities,
//! quanta, rates, token buckets and limits at points of a replay's virtual time (Loom's
//! inline metadata updates, through [`Engine::update`](weft_core::sched::Engine::update)).
//!
//! * **Fields**: `weight` (a `wfq` child), `priority` (a `prio` child), `quantum` (a `drr`
//!   child, a size), `rate` (a `senic` class, a `senic` node's capacity, or a shaping
//!   class), `burst` (a shaping class, a size), and a leaf's `limit.packets`,
//!   `limit.bytes`, `flow_limit.packets`, `flow_limit.bytes` and `outstanding` (`none`
//!   lifts a limit). Units as in a policy file (`5gbit`, `64kb`, `1ms`).
//! * **One field at a time.** The engine takes a shaping class's rate and burst together,
//!   and a leaf's five limits together; the others keep the values they have at that time
//!   (the policy's, or an earlier update's), so updates are resolved here in time order.
//! * **Checked before the run**: an unknown name, a field the node's parent does not read,
//!   or a value a policy file could not hold is a usage error (exit 2) naming the flag, and
//!   [`check_update`] is asked what the engines would refuse; so is a `senic` rate that
//!   breaks rule senic-oversubscribed with the rates the earlier flags left
//!   (`check_senic`). An update applies to packets that arrive at its time or later (it
//!   goes before them), and changes nothing queued.
//!
//! Cost: O(nodes) per flag to find its name, once.

use weft_core::policy::names::suggest;
use weft_core::policy::senic_oversubscribed_message;
use weft_core::policy::{Algo, NodeId, Program, ShaperId};
use weft_core::sched::{check_update, Update, LAST_ARRIVAL_PS};
use weft_core::units::{parse_rate, parse_size, parse_time};

/// Fields an update may name, the longest first (so `flow_limit.packets` is not read as
/// a name ending in `flow_` with the field `limit.packets`).
const FIELDS: [&str; 10] = [
    "flow_limit.packets",
    "flow_limit.bytes",
    "limit.packets",
    "outstanding",
    "limit.bytes",
    "priority",
    "quantum",
    "weight",
    "burst",
    "rate",
];

/// An update at a point of the replay's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// When, picoseconds on the trace's clock.
    pub at_ps: u64,
    /// The flag as given (for the summary and messages).
    pub text: String,
    pub update: Update,
}

/// A leaf's five limits (`None`: unlimited).
type Limits = [Option<u64>; 5];

/// Parses every `--update` flag against `prog`; the result is in time order (flags of equal
/// times in the order given).
pub fn parse_all(prog: &Program, flags: &[String]) -> Result<Vec<Scheduled>, String> {
    let mut parsed = Vec::with_capacity(flags.len());
    for f in flags {
        parsed.push(parse_one(prog, f).map_err(|e| format!("--update `{f}`: {e}"))?);
    }
    parsed.sort_by_key(|p| p.0);
    // The values each shaping class and leaf has as time goes on.
    let mut shapers: Vec<(u64, u64)> = prog
        .shapers
        .iter()
        .map(|s| (s.rate_bps, s.burst_bytes))
        .collect();
    let mut limits: Vec<Option<Limits>> = prog
        .nodes
        .iter()
        .map(|n| match &n.algo {
            Algo::Leaf(l) => Some([
                l.limit_packets,
                l.limit_bytes,
                l.flow_limit_packets,
                l.flow_limit_bytes,
                l.outstanding,
            ]),
            _ => None,
        })
        .collect();
    let mut out = Vec::with_capacity(parsed.len());
    for (at_ps, text, change) in parsed {
        let update = match change {
            Change::Direct(u) => u,
            Change::ShaperRate(c, rate) => {
                shapers[c.index()].0 = rate;
                shaper(c, shapers[c.index()])
            }
            Change::ShaperBurst(c, burst) => {
                shapers[c.index()].1 = burst;
                shaper(c, shapers[c.index()])
            }
            Change::Limit(node, i, v) => {
                let l = limits[node.index()].as_mut().expect("checked: a leaf");
                l[i] = v;
                Update::LeafLimits {
                    node,
                    limit_packets: l[0],
                    limit_bytes: l[1],
                    flow_limit_packets: l[2],
                    flow_limit_bytes: l[3],
                    outstanding: l[4],
                }
            }
        };
        check_update(prog, &update).map_err(|e| format!("--update `{text}`: {e}"))?;
        out.push(Scheduled {
            at_ps,
            text,
            update,
        });
    }
    check_senic(prog, &out)?;
    Ok(out)
}

/// Rule senic-oversubscribed as the updates change rates (`updates` in time order): in
/// SENIC's two-level form the L1 classes' rates must not add up to more than their node's
/// capacity, as in a policy file. Checked once the flags of an instant are all applied (no
/// packet sees the state between two of them: `1ms:a.rate=8gbit --update 1ms:b.rate=1gbit`
/// moves a gigabit from b to a), on the rates and capacities the earlier flags left.
fn check_senic(prog: &Program, updates: &[Scheduled]) -> Result<(), String> {
    if !updates
        .iter()
        .any(|u| matches!(u.update, Update::Rate { .. }))
    {
        return Ok(());
    }
    let is_senic = |n: NodeId| matches!(prog.node(n).algo, Algo::Senic { .. });
    // A node's rate under its parent, and a senic node's capacity (0 for the others).
    let mut rate: Vec<u64> = prog.nodes.iter().map(|n| n.edge.rate_bps).collect();
    let mut capacity: Vec<u64> = prog
        .nodes
        .iter()
        .map(|n| match n.algo {
            Algo::Senic { capacity_bps } => capacity_bps,
            _ => 0,
        })
        .collect();
    for instant in updates.chunk_by(|a, b| a.at_ps == b.at_ps) {
        // The nodes whose L1 classes these flags changed (a class's parent, or a node's own
        // capacity), with the flags.
        let mut touched: Vec<(NodeId, &str)> = Vec::new();
        for u in instant {
            let Update::Rate { node, rate_bps } = u.update else {
                continue;
            };
            rate[node.index()] = rate_bps;
            if is_senic(node) {
                // The engine takes a senic node's rate as its capacity too.
                capacity[node.index()] = rate_bps;
                touched.push((node, &u.text));
            }
            if let Some(p) = prog.node(node).parent {
                touched.push((p, &u.text));
            }
        }
        for &(node, _) in &touched {
            let cap = capacity[node.index()];
            if let Some(sum) = prog.senic_oversubscribed(node, cap, |c| rate[c.index()]) {
                let flags: Vec<String> = touched
                    .iter()
                    .filter(|&&(n, _)| n == node)
                    .map(|(_, f)| format!("`{f}`"))
                    .collect();
                return Err(format!(
                    "--update {}: {} (rule senic-oversubscribed, as in a policy file)",
                    flags.join(", "),
                    senic_oversubscribed_message(&prog.node(node).name, sum, cap)
                ));
            }
        }
    }
    Ok(())
}

fn shaper(shaper: ShaperId, (rate_bps, burst_bytes): (u64, u64)) -> Update {
    Update::Shaper {
        shaper,
        rate_bps,
        burst_bytes,
    }
}

/// What one flag changes, before the values it leaves alone are filled in.
enum Change {
    Direct(Update),
    ShaperRate(ShaperId, u64),
    ShaperBurst(ShaperId, u64),
    /// A leaf's limit: node, index in [`Limits`], value.
    Limit(NodeId, usize, Option<u64>),
}

/// The name and field a `NAME.FIELD` that names no field most likely meant: each field
/// against as many dot-separated words at the end of `lhs` as it has, the closest if close
/// enough to suggest (see [`suggest`]).
fn field_hint(lhs: &str) -> Option<(&str, &'static str)> {
    FIELDS
        .iter()
        .filter_map(|&f| {
            let cut = lhs.rmatch_indices('.').nth(f.matches('.').count())?.0;
            let tail = &lhs[cut + 1..];
            suggest(tail, &[f]).map(|_| (strsim::damerau_levenshtein(tail, f), &lhs[..cut], f))
        })
        .min()
        .map(|(_, name, f)| (name, f))
}

fn parse_one(prog: &Program, flag: &str) -> Result<(u64, String, Change), String> {
    let (when, rest) = flag
        .split_once(':')
        .ok_or("expected WHEN:NAME.FIELD=VALUE, e.g. `1ms:vm2.weight=4`")?;
    let at_ps = parse_time(when.trim(), false).map_err(|e| e.to_string())?;
    if at_ps > LAST_ARRIVAL_PS {
        return Err(format!(
            "{when} is past the last arrival weft schedules (2^63 ps)"
        ));
    }
    let (lhs, value) = rest
        .split_once('=')
        .ok_or("expected NAME.FIELD=VALUE after the time")?;
    let (name, field) = FIELDS
        .iter()
        .find_map(|f| {
            lhs.strip_suffix(f)
                .and_then(|n| n.strip_suffix('.'))
                .map(|n| (n, *f))
        })
        .ok_or_else(|| {
            let hint =
                field_hint(lhs).map_or(String::new(), |(n, f)| format!("did you mean `{n}.{f}`? "));
            format!(
                "`{lhs}` names no field; {hint}the fields are {}",
                FIELDS.join(", ")
            )
        })?;
    let value = value.trim();
    let int = |what: &str| -> Result<u64, String> {
        value
            .parse::<u64>()
            .map_err(|_| format!("{what} `{value}` is not a non-negative integer"))
    };
    // `none` lifts a limit.
    let limit = |size: bool| -> Result<Option<u64>, String> {
        if value == "none" {
            Ok(None)
        } else if size {
            parse_size(value, true).map(Some).map_err(|e| e.to_string())
        } else {
            int(field).map(Some)
        }
    };
    // The lookups find a name typed in either Unicode form (a terminal may decompose it).
    let change = if let Some(c) = prog.shaper_id(name) {
        match field {
            "rate" => Change::ShaperRate(c, parse_rate(value).map_err(|e| e.to_string())?),
            "burst" => Change::ShaperBurst(c, parse_size(value, true).map_err(|e| e.to_string())?),
            _ => {
                return Err(format!(
                    "`{name}` is a shaping class: its fields are rate and burst"
                ))
            }
        }
    } else {
        let node = prog.node_id(name).ok_or_else(|| {
            let names: Vec<&str> = (prog.nodes.iter().map(|n| n.name.as_str()))
                .chain(prog.shapers.iter().map(|s| s.name.as_str()))
                .collect();
            let hint =
                suggest(name, &names).map_or(String::new(), |s| format!("; did you mean `{s}`?"));
            format!("no node or shaping class is named `{name}`{hint}")
        })?;
        let n = prog.node(node);
        let parent = n.parent.map(|p| &prog.node(p).algo);
        let under = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "`{field}` is read by a `{what}` parent; `{name}`'s parent is {}",
                    parent.map_or("none (it is the root)".to_string(), |a| format!(
                        "a `{}`",
                        a.name()
                    ))
                ))
            }
        };
        match field {
            "weight" => {
                under(matches!(parent, Some(Algo::Wfq)), "wfq")?;
                Change::Direct(Update::Weight {
                    node,
                    weight: int("weight")?,
                })
            }
            "priority" => {
                under(matches!(parent, Some(Algo::Prio)), "prio")?;
                Change::Direct(Update::Priority {
                    node,
                    priority: int("priority")?,
                })
            }
            "quantum" => {
                under(matches!(parent, Some(Algo::Drr)), "drr")?;
                Change::Direct(Update::Quantum {
                    node,
                    bytes: parse_size(value, true).map_err(|e| e.to_string())?,
                })
            }
            "rate" => {
                if !matches!(n.algo, Algo::Senic { .. }) {
                    under(matches!(parent, Some(Algo::Senic { .. })), "senic")?;
                }
                Change::Direct(Update::Rate {
                    node,
                    rate_bps: parse_rate(value).map_err(|e| e.to_string())?,
                })
            }
            "burst" => {
                return Err(format!(
                    "`{name}` is not a shaping class (burst is a shaping class's)"
                ))
            }
            limit_field => {
                if n.leaf.is_none() {
                    return Err(format!("`{name}` is not a leaf (limits are a leaf's)"));
                }
                let (i, size) = match limit_field {
                    "limit.packets" => (0, false),
                    "limit.bytes" => (1, true),
                    "flow_limit.packets" => (2, false),
                    "flow_limit.bytes" => (3, true),
                    _ => (4, false),
                };
                Change::Limit(node, i, limit(size)?)
            }
        }
    };
    Ok((at_ps, flag.to_string(), change))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use weft_core::policy::{compile_str, LoadOptions};

    fn prog() -> Program {
        let text = "weft: 1
link: {rate: 10gbit}
nodes:
  - {name: root, type: prio}
  - {name: hi, type: leaf, parent: root, priority: 0, match: {tag: 1}}
  - {name: t, type: wfq, parent: root, priority: 1}
  - {name: cap, type: shape, parent: t, rate: 1gbit, burst: 10kb, match: {dst: 10.0.0.0/8}}
  - {name: a, type: leaf, parent: cap, weight: 1, match: {tag: 2}, limit: {packets: 100}}
  - {name: b.x, type: leaf, parent: t, weight: 2}
";
        compile_str(Path::new("p.yaml"), text, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.render_plain()))
    }

    fn flags(f: &[&str]) -> Vec<String> {
        f.iter().map(|s| s.to_string()).collect()
    }

    fn node(p: &Program, name: &str) -> NodeId {
        NodeId::from_index(p.nodes.iter().position(|n| n.name == name).unwrap())
    }

    /// A name typed decomposed (a terminal's `e` + combining acute) finds the node, which
    /// the policy spells composed.
    #[test]
    fn a_name_typed_decomposed_finds_its_node() {
        let text = "weft: 1\nnodes:\n  - {name: root, type: wfq}\n  - {name: caf\u{e9}, type: leaf, parent: root, weight: 1}\n";
        let p = compile_str(Path::new("p.yaml"), text, &LoadOptions::default()).unwrap();
        let u = parse_all(&p, &flags(&["1ms:cafe\u{301}.weight=3"])).unwrap();
        assert_eq!(
            u[0].update,
            Update::Weight {
                node: node(&p, "caf\u{e9}"),
                weight: 3
            }
        );
    }

    #[test]
    fn fields_become_engine_updates_in_time_order() {
        let p = prog();
        let u = parse_all(
            &p,
            &flags(&[
                "2ms:b.x.weight=5",
                "1ms:hi.priority=3",
                "1500us:cap.rate=2gbit",
                "3ms:cap.burst=20kb",
                "4ms:a.limit.packets=none",
                "4ms:a.outstanding=8",
            ]),
        )
        .unwrap();
        let (a, bx, hi) = (node(&p, "a"), node(&p, "b.x"), node(&p, "hi"));
        let got: Vec<(u64, Update)> = u.iter().map(|s| (s.at_ps, s.update)).collect();
        let ms = 1_000_000_000;
        let Algo::Leaf(spec) = &p.node(a).algo else {
            panic!("a is a leaf")
        };
        let limits = |limit_packets, outstanding| Update::LeafLimits {
            node: a,
            limit_packets,
            limit_bytes: None,
            flow_limit_packets: spec.flow_limit_packets,
            flow_limit_bytes: spec.flow_limit_bytes,
            outstanding,
        };
        assert_eq!(
            got,
            vec![
                (
                    ms,
                    Update::Priority {
                        node: hi,
                        priority: 3
                    }
                ),
                (
                    ms * 3 / 2,
                    Update::Shaper {
                        shaper: ShaperId::new(0),
                        rate_bps: 2_000_000_000,
                        burst_bytes: 10_240
                    }
                ),
                (
                    2 * ms,
                    Update::Weight {
                        node: bx,
                        weight: 5
                    }
                ),
                // The burst changes (kb: 1,024 bytes, as tc); the rate is the earlier update's.
                (
                    3 * ms,
                    Update::Shaper {
                        shaper: ShaperId::new(0),
                        rate_bps: 2_000_000_000,
                        burst_bytes: 20_480
                    }
                ),
                (4 * ms, limits(None, None)),
                // The second limit keeps the first one's change.
                (4 * ms, limits(None, Some(8))),
            ]
        );
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        let p = prog();
        for (flag, message) in [
            ("vm2.weight=4", "expected WHEN:NAME.FIELD=VALUE"),
            (
                "1ms:nobody.weight=4",
                "no node or shaping class is named `nobody`",
            ),
            // Near misses get a hint: a node's name, a shaping class's, a field.
            ("1ms:hii.weight=4", "named `hii`; did you mean `hi`?"),
            ("1ms:cp.rate=1gbit", "named `cp`; did you mean `cap`?"),
            ("1ms:cap.rat=1gbit", "did you mean `cap.rate`?"),
            ("1ms:a.limit.pakets=5", "did you mean `a.limit.packets`?"),
            (
                "1ms:hi.weight=4",
                "`weight` is read by a `wfq` parent; `hi`'s parent is a `prio`",
            ),
            ("1ms:root.priority=1", "parent is none (it is the root)"),
            ("1ms:a.color=red", "names no field"),
            (
                "1ms:cap.weight=2",
                "is a shaping class: its fields are rate and burst",
            ),
            ("1ms:t.limit.packets=5", "`t` is not a leaf"),
            ("1ms:b.x.weight=0", "weight must be"),
            ("1ms:a.limit.packets=0", "limit.packets must be in 1..="),
            ("1ms:cap.rate=fast", "rate"),
            ("soon:b.x.weight=2", "time"),
        ] {
            let e = parse_all(&p, &flags(&[flag])).unwrap_err();
            assert!(e.starts_with(&format!("--update `{flag}`: ")), "{e}");
            assert!(e.contains(message), "{flag}: {e}");
        }
    }
}
