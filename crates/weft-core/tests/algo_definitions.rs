//! The rank formulas of `edf`, `lstf` and `drr` against models written from the algorithms'
//! definitions, not from the engines' code (both engines share the formulas in
//! `sched/algo/`, so the twin tests cannot catch a wrong one):
//!
//! * `edf`: packets leave by deadline (the packet's, else arrival + `default_deadline`),
//!   ties in arrival order;
//! * `lstf`: by arrival + slack (the packet's, else `default_slack`), ties in arrival order;
//! * `drr`: round by round, a child of quantum `q` sending `q` bytes' worth a round: a
//!   child's packet whose cumulative bytes are `B` is served in round `⌈B / q⌉`; within a
//!   round, in arrival order.
//!
//! Each case: one leaf per tenant under the root, packets arriving at increasing times (no
//! dequeue in between), then drained at the last arrival; both engines must give the
//! model's order. Random cases from a fixed-seed generator; `WEFT_ALGO_CASES` for more.

use std::path::Path;
use std::sync::Arc;

use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::{compile_str, LoadOptions, Program};
use weft_core::sched::{Engine, FastEngine, Packet, ReferenceEngine};

const LEAVES: u64 = 6;

/// splitmix64.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn cases() -> u64 {
    std::env::var("WEFT_ALGO_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// A policy of `root` over `LEAVES` leaves, leaf `i` matching tenant `i` with `edge(i)` as
/// its edge keys; shares count frame bytes only.
fn program(root: &str, edge: impl Fn(u64) -> String) -> Arc<Program> {
    let mut y = format!(
        "weft: 1\nlink: {{rate: 10gbit, count: frame}}\nnodes:\n  - {{name: root, type: {root}}}\n"
    );
    for i in 0..LEAVES {
        y += &format!(
            "  - {{name: l{i}, type: leaf, parent: root, {}match: {{tenant: {i}}}, \
             limit: {{packets: 100000}}, flow_limit: {{packets: 100000}}}}\n",
            edge(i)
        );
    }
    Arc::new(
        compile_str(Path::new("algo.yaml"), &y, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.render_plain())),
    )
}

/// The ids in departure order when `arrivals` (time, packet) are enqueued in order and the
/// engine is drained at the last arrival.
fn order<E: Engine>(mut e: E, arrivals: &[(u64, Packet)]) -> Vec<u64> {
    for &(t, p) in arrivals {
        e.enqueue(p, t).expect("admitted");
    }
    let now = arrivals.last().map_or(0, |a| a.0);
    std::iter::from_fn(|| e.dequeue(now).map(|d| d.id)).collect()
}

fn packet(id: u64, tenant: u64, bytes: u32) -> Packet {
    let mut m = PacketMeta::default();
    m.set_int(Field::Tenant, tenant);
    Packet::new(id, bytes, m)
}

fn check(prog: &Arc<Program>, arrivals: &[(u64, Packet)], want: &[u64], what: &str) {
    let fast = order(FastEngine::new(prog.clone()), arrivals);
    let reference = order(ReferenceEngine::new(prog.clone()), arrivals);
    assert_eq!(fast, want, "{what}: fast engine against the model");
    assert_eq!(
        reference, want,
        "{what}: reference engine against the model"
    );
}

#[test]
fn edf_and_lstf_serve_by_deadline_and_by_arrival_plus_slack() {
    const DEFAULT_PS: u64 = 1_000_000_000; // 1 ms, the nodes' default
    let mut s = 7;
    let mut checked = [0u64; 2];
    for case in 0..cases() {
        let n = 1 + next(&mut s) % 12;
        let mut t = 0u64;
        let mut edf = Vec::new();
        let mut lstf = Vec::new();
        let mut tenants = Vec::new();
        for id in 0..n {
            t += next(&mut s) % 3_000_000;
            let tenant = next(&mut s) % LEAVES;
            tenants.push(tenant);
            // Keys of the order of the arrival gaps, so that arrival time changes the order.
            let key = (!next(&mut s).is_multiple_of(4)).then(|| next(&mut s) % 20_000_000);
            let mut p = packet(id, tenant, 100 + (next(&mut s) % 1400) as u32);
            p.deadline_ps = key.map(|k| t + k);
            edf.push((t, p));
            let mut p = packet(id, tenant, p.bytes);
            p.slack_ps = key;
            lstf.push((t, p));
        }
        // The model needs a leaf's packets to rank in its arrival order (a leaf is FIFO:
        // its later packet cannot leave first), so keep only cases where they do.
        let edf_key = |(t, p): &(u64, Packet)| p.deadline_ps.unwrap_or(t + DEFAULT_PS);
        let lstf_key = |(t, p): &(u64, Packet)| t + p.slack_ps.unwrap_or(DEFAULT_PS);
        let fifo_ok = |a: &[(u64, Packet)], key: &dyn Fn(&(u64, Packet)) -> u64| {
            (0..LEAVES).all(|l| {
                let ks: Vec<u64> = a
                    .iter()
                    .filter(|x| tenants[x.1.id as usize] == l)
                    .map(key)
                    .collect();
                ks.windows(2).all(|w| w[0] <= w[1])
            })
        };
        let model = |a: &[(u64, Packet)], key: &dyn Fn(&(u64, Packet)) -> u64| {
            let mut v: Vec<(u64, u64)> = a.iter().map(|x| (key(x), x.1.id)).collect();
            v.sort();
            v.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
        };
        if fifo_ok(&edf, &edf_key) {
            let prog = program("edf", |_| String::new());
            check(
                &prog,
                &edf,
                &model(&edf, &edf_key),
                &format!("edf case {case}"),
            );
            checked[0] += 1;
        }
        if fifo_ok(&lstf, &lstf_key) {
            let prog = program("lstf", |_| String::new());
            check(
                &prog,
                &lstf,
                &model(&lstf, &lstf_key),
                &format!("lstf case {case}"),
            );
            checked[1] += 1;
        }
    }
    // About a third of the cases keep each leaf's keys in order; a filter that let few
    // through would test little.
    assert!(
        checked.iter().all(|&c| c * 4 >= cases()),
        "cases checked (edf, lstf): {checked:?} of {}",
        cases()
    );
}

#[test]
fn drr_serves_round_by_round_each_child_its_quantum() {
    let mut s = 11;
    for case in 0..cases() {
        let quanta: Vec<u64> = (0..LEAVES).map(|_| 200 + next(&mut s) % 3000).collect();
        let prog = program("drr", |i| format!("quantum: {}b, ", quanta[i as usize]));
        let n = 1 + next(&mut s) % 40;
        let mut sent = vec![0u64; LEAVES as usize];
        let mut arrivals = Vec::new();
        let mut rounds = Vec::new();
        for id in 0..n {
            let tenant = next(&mut s) % LEAVES;
            let bytes = 64 + (next(&mut s) % 1500) as u32;
            sent[tenant as usize] += u64::from(bytes);
            let q = quanta[tenant as usize];
            rounds.push((sent[tenant as usize].div_ceil(q), id));
            arrivals.push((id * 1_000, packet(id, tenant, bytes)));
        }
        rounds.sort();
        let want: Vec<u64> = rounds.into_iter().map(|(_, id)| id).collect();
        check(
            &prog,
            &arrivals,
            &want,
            &format!("drr case {case}, quanta {quanta:?}"),
        );
    }
}
