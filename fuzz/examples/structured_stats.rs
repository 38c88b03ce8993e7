//! How often `policy_structured`'s generator yields a policy that compiles, and which rules
//! the others break: a tool for tuning `src/structured.rs`.
//!
//!     cargo +nightly run --release --example structured_stats [-- RULE]
//!
//! With RULE (e.g. `shadowed-match`), also prints the first two policies refused for it.
use std::collections::BTreeMap;

use arbitrary::{Arbitrary, Unstructured};
use weft_core::policy::{compile_str, LoadOptions};
use weft_fuzz::structured::Policy;

fn main() {
    let show = std::env::args().nth(1);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut ok, mut total) = (0, 0);
    let mut rules = BTreeMap::<&'static str, usize>::new();
    for len in [64usize, 256, 1024, 4096] {
        for _ in 0..500 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let p = Policy::arbitrary(&mut Unstructured::new(&bytes)).expect("generates");
            let text = p.render();
            total += 1;
            match compile_str(weft_fuzz::policy_path(), &text, &LoadOptions::default()) {
                Ok(_) => ok += 1,
                Err(e) => {
                    let mut seen: Vec<&'static str> = e.diagnostics.iter().map(|d| d.rule.name()).collect();
                    seen.sort();
                    seen.dedup();
                    for r in seen {
                        let n = rules.entry(r).or_default();
                        *n += 1;
                        if show.as_deref() == Some(r) && *n <= 2 {
                            println!("{e}\n{text}");
                        }
                    }
                }
            }
        }
    }
    println!("{ok}/{total} compile; policies refused, by rule broken:");
    for (r, n) in rules {
        println!("  {r:24} {n}");
    }
}
