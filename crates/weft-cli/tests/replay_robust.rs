//! `weft replay` on random, often malformed traces (docs/design.md, invariant 8: bad input gets a
//! clear error, never a panic, and nothing is lost silently). Each case writes a CSV trace
//! with a random header (the columns shuffled, some missing, some unknown) and random cells
//! (numbers at and past their ranges, signs, blanks, text, addresses, quotes), replays it
//! with one of the example policies, and demands:
//! * exit 0 or 2 only, and no panic message;
//! * exit 2: an `error:` naming the trace (or the output directory) with a line where it is
//!   the trace, and none of the outputs left;
//! * exit 0: every data row is accounted for: `packets` equals the rows, and `sent`,
//!   `dropped` and `held_at_end` add up to it; `departures.csv` lists the sent ones, and
//!   `drops.csv` the dropped ones, as many at each leaf as its `dropped` and as many without
//!   a leaf as were `unclassified`.
//!
//! 64 cases by default (each runs the binary once), `PROPTEST_CASES` for more.

use std::path::PathBuf;
use std::process::Command;

use proptest::prelude::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

const POLICIES: [&str; 5] = [
    "loom-fig11",
    "strict-priority",
    "senic-fig4",
    "dscp-classes",
    "wfq-1-2-4",
];

/// Metadata columns a trace may have beside `arrive_ps` and `bytes`.
const EXTRA: [&str; 8] = [
    "tag",
    "dst",
    "dport",
    "dscp",
    "proto",
    "flow",
    "deadline_ps",
    "slack_ps",
];

/// A valid value for column `name` (`i` picks it).
fn valid(name: &str, i: u64) -> String {
    match name {
        "dst" => format!("10.0.{}.{}", i % 4, 1 + i % 250),
        "dport" => (1000 + i % 20).to_string(),
        "dscp" => (i % 64).to_string(),
        "proto" => ["6", "17", "tcp", "udp"][i as usize % 4].to_string(),
        "tag" => (i % 4).to_string(),
        _ => (i * 1_000).to_string(),
    }
}

/// Junk: numbers at and past their ranges, signs, blanks, text, addresses, quotes.
const JUNK: [&str; 21] = [
    "",
    "0",
    "-1",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775808",
    "1e3",
    " 7 ",
    "0x10",
    "abc",
    "10.0.1.1",
    "10.0.2.300",
    "::1",
    "\"5\"",
    "\"a,b\"",
    "1.5",
    "+3",
    "\u{feff}1",
    "#1",
];

/// A header (`arrive_ps`, `bytes` and some metadata columns, shuffled; in one case in
/// eight a column missing, repeated or unknown) and rows: in half the cases every cell is
/// valid (arrival times non-decreasing), in the others each cell is junk with probability
/// 1/8.
fn trace() -> impl Strategy<Value = (Vec<&'static str>, Vec<Vec<String>>)> {
    let header = (
        prop::sample::subsequence(EXTRA.to_vec(), 0..4),
        prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
    )
        .prop_map(|(extra, flaw)| {
            let mut h = vec!["arrive_ps", "bytes"];
            h.extend(extra);
            match flaw {
                1 => h.retain(|&c| c != "arrive_ps"),
                2 => h.retain(|&c| c != "bytes"),
                3 => h.push("colour"),
                4 => h.push(" bytes"),
                _ => {}
            }
            h
        })
        .prop_shuffle();
    header
        .prop_flat_map(|h| {
            let n = h.len();
            let row = prop::collection::vec((0u64..2000, 0u8..8, 0usize..JUNK.len()), n);
            (Just(h), any::<bool>(), prop::collection::vec(row, 0..40))
        })
        .prop_map(|(h, clean, rows)| {
            let mut t = 0u64;
            let rows = rows
                .into_iter()
                .map(|cells| {
                    t += cells.first().map_or(0, |c| c.0);
                    h.iter()
                        .zip(cells)
                        .map(|(&name, (v, dice, junk))| {
                            if !clean && dice == 0 {
                                JUNK[junk].to_string()
                            } else {
                                match name {
                                    "arrive_ps" => t.to_string(),
                                    "bytes" | " bytes" => (64 + v % 1500).to_string(),
                                    "colour" => "red".to_string(),
                                    other => valid(other, v),
                                }
                            }
                        })
                        .collect()
                })
                .collect();
            (h, rows)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn replay_accounts_for_every_row_or_says_where_it_stopped(
        (header, rows) in trace(),
        policy in prop::sample::select(POLICIES.to_vec()),
        link in prop::sample::select(vec![None, Some("1bit"), Some("10gbit")]),
    ) {
        let dir = std::env::temp_dir().join(format!(
            "weft-replay-robust-{}-{}",
            std::process::id(),
            rows.len() * 31 + header.len()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("t.csv");
        let mut text = header.join(",") + "\n";
        for r in &rows {
            text += &r.join(",");
            text += "\n";
        }
        std::fs::write(&trace, &text).unwrap();
        let out = dir.join("out");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
        cmd.current_dir(root())
            .args(["replay", "--quiet", "--policy"])
            .arg(format!("examples/policies/{policy}.yaml"))
            .arg("--trace")
            .arg(&trace)
            .arg("--out")
            .arg(&out);
        if let Some(l) = link {
            cmd.args(["--link", l]);
        }
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        let code = o.status.code();
        let summary = std::fs::read(out.join("summary.json")).ok();
        let departures = std::fs::read_to_string(out.join("departures.csv")).ok();
        let drops = std::fs::read_to_string(out.join("drops.csv")).ok();
        let _ = std::fs::remove_dir_all(&dir);
        prop_assert!(!stderr.contains("panicked"), "panic on\n{text}\n{stderr}");
        match code {
            Some(2) => {
                prop_assert!(
                    stderr.contains("error: ") && stderr.contains("t.csv:"),
                    "exit 2 without the trace's name and line:\n{text}\n{stderr}"
                );
                // A failed replay keeps none of its outputs (no partial departures).
                prop_assert!(
                    summary.is_none() && departures.is_none(),
                    "outputs left after a failure:\n{text}\n{stderr}"
                );
            }
            Some(0) => {
                let s: serde_json::Value = serde_json::from_slice(&summary.unwrap()).unwrap();
                let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}"));
                // A line that starts with `#` is a comment (the format says so), not a row.
                let data = rows.iter().filter(|r| !r.join(",").starts_with('#')).count();
                prop_assert_eq!(n("packets"), data as u64, "rows lost:\n{}", text);
                prop_assert_eq!(n("sent") + n("dropped") + n("held_at_end"), n("packets"));
                let listed = departures.unwrap().lines().count() as u64 - 1;
                prop_assert_eq!(listed, n("sent"));
                // drops.csv: `arrive_ps,id,leaf,reason`, counted by leaf ("" for none).
                let drops = drops.unwrap();
                let mut lines = drops.lines();
                prop_assert_eq!(lines.next(), Some("arrive_ps,id,leaf,reason"));
                let mut by_leaf = std::collections::BTreeMap::<String, u64>::new();
                for l in lines {
                    let f: Vec<&str> = l.split(',').collect();
                    prop_assert_eq!(f.len(), 4, "{}", l);
                    prop_assert_eq!(f[2].is_empty(), f[3] == "unclassified", "{}", l);
                    *by_leaf.entry(f[2].to_string()).or_default() += 1;
                }
                prop_assert_eq!(by_leaf.values().sum::<u64>(), n("dropped"));
                prop_assert_eq!(by_leaf.remove("").unwrap_or(0), s["drops"]["unclassified"].as_u64().unwrap());
                for (leaf, v) in s["leaves"].as_object().unwrap() {
                    let counted = by_leaf.get(leaf).copied().unwrap_or(0);
                    prop_assert_eq!(counted, v["dropped"].as_u64().unwrap(), "leaf {}:\n{}", leaf, drops);
                }
            }
            other => prop_assert!(false, "exit {:?} on\n{}\n{}", other, text, stderr),
        }
    }
}
