//! Synthetic policies for benchmarks and scale tests: Loom Fig. 1's shape, scaled.
//!
//! `scaled(vms, apps, dsts)` writes a policy whose root gives management traffic priority over
//! a `wfq` of `vms` tenants; each VM is a `prio` node with `apps` leaves (one per L4 port) and
//! sits below a parallel shaping set of `dsts` per-destination limits. Leaves: `vms × apps + 1`;
//! shaping classes: `vms × dsts`. Packets for it come from [`packet`].

use std::fmt::Write;

use crate::classifier::{Field, PacketMeta};

/// The policy text (YAML).
pub fn scaled(vms: u32, apps: u32, dsts: u32) -> String {
    let mut s = String::with_capacity((vms as usize) * (apps as usize + dsts as usize) * 96);
    s.push_str("weft: 1\nname: scaled\nlink: {rate: 100gbit}\n");
    s.push_str("limits: {max_nodes: 4000000, max_shaping_depth: 4, max_match_shapes: 32}\n");
    s.push_str("nodes:\n- {name: root, type: prio}\n");
    s.push_str("- {name: mgmt, type: leaf, parent: root, priority: 0, match: {tag: 1}}\n");
    s.push_str("- {name: tenants, type: wfq, parent: root, priority: 1}\n");
    for v in 0..vms {
        let mut parents = Vec::with_capacity(dsts as usize);
        for d in 0..dsts {
            let _ = writeln!(
                s,
                "- {{name: vm{v}-d{d}, type: shape, parent: tenants, rate: {}mbit, burst: 64kb, match: {{dst: 10.{}.{}.0/24}}}}",
                100 + d,
                d / 256,
                d % 256
            );
            parents.push(format!("vm{v}-d{d}"));
        }
        let parent = if parents.is_empty() {
            "tenants".to_string()
        } else {
            format!("[{}]", parents.join(", "))
        };
        let _ = writeln!(
            s,
            "- {{name: vm{v}, type: prio, parent: {parent}, weight: {}, match: {{vm: {v}}}}}",
            1 + v % 4
        );
        for a in 0..apps {
            let _ = writeln!(
                s,
                "- {{name: vm{v}-app{a}, type: leaf, parent: vm{v}, priority: {a}, match: {{dport: {}}}}}",
                1000 + a
            );
        }
    }
    s
}

/// An 8-level policy: a binary tree of `wfq`, `prio`, `drr` and `rr` nodes whose 128 leaves
/// match `tag` 0–127 (every node matches its leaves' tags), for benchmarks of a deep tree.
pub fn eight_levels() -> String {
    let mut s = String::from("weft: 1\nlink: {rate: 100gbit}\nnodes:\n  - {name: n1, type: wfq}\n");
    let kinds = ["wfq", "prio", "drr", "wfq", "rr", "wfq", "prio"];
    for id in 2u32..256 {
        let parent = id / 2;
        let level = 32 - id.leading_zeros(); // root is level 1
        let parent_kind = if parent == 1 {
            "wfq"
        } else {
            kinds[(32 - parent.leading_zeros()) as usize % kinds.len()]
        };
        let edge = match parent_kind {
            "wfq" => format!("weight: {}, ", 1 + id % 3),
            "prio" => format!("priority: {}, ", id % 2),
            "drr" => "quantum: 1518b, ".to_string(),
            _ => String::new(),
        };
        let kind = if level == 8 {
            "leaf"
        } else {
            kinds[level as usize % kinds.len()]
        };
        let tags = (0..(1u32 << (8 - level)))
            .map(|k| ((id << (8 - level)) + k - 128).to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "  - {{name: n{id}, type: {kind}, parent: n{parent}, {edge}match: {{tag: [{tags}]}}}}"
        );
    }
    s
}

/// A packet's fields for [`eight_levels`]: leaf `leaf` (0–127, its `tag`), source port
/// `port`, destination port 80.
pub fn eight_levels_meta(leaf: u64, port: u64) -> PacketMeta {
    let mut m = PacketMeta::default();
    m.set_int(Field::Tag, leaf);
    m.set_int(Field::Sport, port);
    m.set_int(Field::Dport, 80);
    m
}

/// A flat `senic` node with `classes` rate-limited classes (20–69 Mbit/s, one queue each,
/// matched by `tag`) on a 100 Gbit/s link: SENIC's many-rate-limiter case.
pub fn senic_flat(classes: u64) -> String {
    let mut s =
        String::from("weft: 1\nlink: {rate: 100gbit}\nnodes:\n  - {name: nic, type: senic}\n");
    for c in 0..classes {
        let _ = writeln!(
            s,
            "  - {{name: c{c}, type: leaf, parent: nic, rate: {}mbit, match: {{tag: {c}}}, flows: {{by: none}}}}",
            20 + c % 50
        );
    }
    s
}

/// A packet for [`scaled`] from a pseudo-random `seed`: VM, port and destination vary, and
/// some packets miss every leaf: one application value in `apps + 1` and one destination in
/// `dsts + 1` match none (about 7 % of packets at 16 applications and 64 destinations).
pub fn packet(seed: u64, vms: u32, apps: u32, dsts: u32) -> PacketMeta {
    // SplitMix64: cheap, well-mixed, deterministic.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let mut p = PacketMeta::default();
    let vm = (z % u64::from(vms.max(1))) as u32;
    let app = ((z >> 20) % u64::from(apps.max(1) + 1)) as u32;
    let d = ((z >> 40) % u64::from(dsts.max(1) + 1)) as u32;
    p.set_int(crate::classifier::Field::Vm, u64::from(vm));
    p.set_int(crate::classifier::Field::Dport, u64::from(1000 + app));
    let dst = std::net::Ipv4Addr::new(10, (d / 256) as u8, (d % 256) as u8, (z >> 8) as u8);
    p.set_addr(crate::classifier::Field::Dst, dst.into());
    p.set_int(crate::classifier::Field::Proto, 6);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{
        compile_str, Classification, LeafId, LoadOptions, NodeId, ShaperId, ShapingPath,
    };

    #[test]
    fn scaled_policy_compiles_and_twins_agree() {
        let text = scaled(20, 5, 3);
        let p = compile_str(
            std::path::Path::new("scaled.yaml"),
            &text,
            &LoadOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{}", e.render_plain()));
        assert_eq!(p.leaves.len(), 20 * 5 + 1);
        assert_eq!(p.shapers.len(), 20 * 3);
        let mut shaped = 0;
        for i in 0..2000 {
            let pkt = packet(i, 20, 5, 3);
            let c = p.classify(&pkt);
            assert_eq!(c, p.classify_reference(&pkt), "{pkt}");
            if let Classification::Leaf { shaping, .. } = c {
                shaped += usize::from(!shaping.as_slice().is_empty());
            }
        }
        assert!(
            shaped > 1000,
            "most packets should hit a per-destination class: {shaped}"
        );
    }

    /// Every answer of the classifier is a valid class; a leaf paired with another leaf's
    /// node, an unknown shaping class or an unknown node is not; a leaf moved to another
    /// leaf with its own node is.
    #[test]
    fn valid_classes() {
        let p = compile_str(
            std::path::Path::new("scaled.yaml"),
            &scaled(4, 3, 2),
            &LoadOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{}", e.render_plain()));
        let mut leaf_seen = None;
        for i in 0..200 {
            let c = p.classify(&packet(i, 4, 3, 2));
            assert!(p.is_valid_class(&c), "{c:?}");
            if let Classification::Leaf { shaping, .. } = c {
                if !shaping.as_slice().is_empty() {
                    leaf_seen = Some(c);
                }
            }
        }
        let Some(Classification::Leaf {
            leaf,
            node,
            shaping,
        }) = leaf_seen
        else {
            panic!("no shaped leaf among 200 packets");
        };
        let other = LeafId::from_index((leaf.index() + 1) % p.leaves.len());
        let moved = Classification::Leaf {
            leaf: other,
            node: p.leaf_node(other),
            shaping,
        };
        assert!(p.is_valid_class(&moved));
        let wrong_node = Classification::Leaf {
            leaf: other,
            node,
            shaping,
        };
        assert!(!p.is_valid_class(&wrong_node));
        let mut bad_shaping = ShapingPath::default();
        bad_shaping.push(ShaperId::from_index(p.shapers.len()));
        let bad = Classification::Leaf {
            leaf,
            node,
            shaping: bad_shaping,
        };
        assert!(!p.is_valid_class(&bad));
        let unknown_node = Classification::Unclassified {
            at: NodeId::from_index(p.nodes.len()),
        };
        assert!(!p.is_valid_class(&unknown_node));
        assert!(p.is_valid_class(&Classification::Unclassified { at: NodeId::ROOT }));
    }
}
