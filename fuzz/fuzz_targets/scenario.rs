//! Raw bytes → scenario text → `weft_sim::scenario::load_str`, as `weft sim` loads a file
//! (after its size cap and UTF-8 check, which `read_scenario` applies first). The loader
//! must never panic, and must stay in proportion to its input: whatever a small text asks
//! for (a billion flows, a million windows, sizes, rates, the offered load) is refused with
//! a message when loading, before anything is allocated per flow, window or packet. A
//! loaded scenario's warnings and unclassified applications are computed too (what
//! `weft sim` prints before running); nothing is simulated.
//!
//! The scenario is named `examples/scenarios/fuzz-input.yaml` (a path that does not exist),
//! so `policy: ../policies/loom-fig1.yaml` loads a real example policy. Inputs that name a
//! `policy` together with `dev`, `proc`, `sys`, `fd` or a backslash are skipped, as the
//! policy targets skip them: the fuzzer must not make the reader open `/proc/self/mem` and
//! the like (`/dev/zero` itself is refused as not a regular file).
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use weft_sim::scenario::{load_str, Overrides};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains("policy")
        && ["dev", "proc", "sys", "fd", "\\"]
            .iter()
            .any(|w| text.contains(w))
    {
        return;
    }
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "examples",
        "scenarios",
        "fuzz-input.yaml",
    ]
    .iter()
    .collect();
    match load_str(&path, text, &Overrides::default()) {
        Ok(sc) => {
            // What the CLI prints before a run; the invariants the simulator relies on.
            let _ = sc.warnings();
            let _ = sc.unclassified_apps();
            assert!(sc.duration_ps > 0 && sc.window_ps > 0 && sc.latency_window_ps > 0);
            assert!(!sc.nics.is_empty() && !sc.tenants.is_empty());
            assert!(sc.offered_load <= sc.max_offered_load as f64 * (1.0 + 1e-9));
            let flows: u64 = sc.apps.iter().map(|a| u64::from(a.max_flows())).sum();
            assert!(flows <= weft_sim::scenario::MAX_FLOWS);
        }
        Err(e) => {
            // Every error renders, with the file's name.
            let m = e.to_string();
            assert!(!m.is_empty());
        }
    }
});
