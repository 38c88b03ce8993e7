//! Bounds on the compiler's work: did-you-mean hints and the cross-level shadowing check.

use super::graph::MAX_SUGGESTION_WORK;
use super::tables::CROSS_LEVEL_MAX_BLOCKERS;

/// Did-you-mean hints for unknown parents score each distinct unknown name once (one
/// without any close match included: it was scored again for every node naming it),
/// and at most [`MAX_SUGGESTION_WORK`] candidates in all.
#[test]
fn unknown_parents_score_a_bounded_number_of_candidates() {
    let nodes = |interior: usize, leaves: usize, parent: &dyn Fn(usize) -> String| {
        let mut t = String::from("weft: 1\nnodes:\n  - {name: root, type: wfq}\n");
        for i in 0..interior {
            t += &format!("  - {{name: inner{i}, type: wfq, parent: root}}\n");
        }
        for i in 0..leaves {
            t += &format!(
                "  - {{name: leaf{i}, type: leaf, parent: {}, match: {{tag: {i}}}}}\n",
                parent(i)
            );
        }
        t
    };
    let steps = |text: &str| {
        crate::steps::take();
        let r = crate::policy::compile_str(
            "p.yaml".as_ref(),
            text,
            &crate::policy::LoadOptions::default(),
        );
        assert!(r.is_err(), "unknown parents accepted");
        crate::steps::take()
    };
    // One unknown name, close to nothing, named by 3,000 leaves: scored once.
    let once = steps(&nodes(500, 3_000, &|_| "zzzzzzzz".to_string()));
    assert!(once <= 502, "{once} candidates scored for one unknown name");
    // 2,000 distinct unknown names among 2,000 interior nodes: at most the budget.
    let many = steps(&nodes(2_000, 2_000, &|i| format!("innr{i}")));
    assert!(
        many <= (MAX_SUGGESTION_WORK + 2_001) as u64,
        "{many} candidates scored"
    );
}

/// The cross-level shadowing check walks only the levels that have earlier siblings, and
/// at most [`CROSS_LEVEL_MAX_BLOCKERS`] of them a node: a chain of 20,000 levels costs no
/// walk at all (it took every node's whole depth: 54 s at 100,000 levels), and a comb of
/// 3,000 levels, each with an earlier sibling, at most that many steps a node.
#[test]
fn the_cross_level_check_walks_a_bounded_number_of_levels() {
    let chain = |levels: usize, comb: bool| {
        let mut t = format!(
            "weft: 1\nlimits: {{max_depth: {}, max_nodes: {}}}\nnodes:\n  - {{name: n0, type: fifo}}\n",
            levels + 2,
            2 * levels + 2
        );
        for i in 1..levels {
            if comb {
                t += &format!(
                    "  - {{name: side{i}, type: leaf, parent: n{}, match: {{tag: {i}}}}}\n",
                    i - 1
                );
            }
            t += &format!("  - {{name: n{i}, type: fifo, parent: n{}}}\n", i - 1);
        }
        t += &format!("  - {{name: leaf, type: leaf, parent: n{}}}\n", levels - 1);
        t
    };
    for (levels, comb, most) in [
        (20_000, false, 0),
        (3_000, true, (CROSS_LEVEL_MAX_BLOCKERS as u64 + 1) * 6_000),
    ] {
        let text = chain(levels, comb);
        crate::steps::take();
        let prog = crate::policy::compile_str(
            "chain.yaml".as_ref(),
            &text,
            &crate::policy::LoadOptions::default(),
        );
        let steps = crate::steps::take();
        assert!(prog.is_ok(), "{levels} levels, comb {comb}: refused");
        assert!(
            steps <= most,
            "{levels} levels, comb {comb}: {steps} steps, more than {most}"
        );
    }
}
