//! Helpers shared by the integration tests.

use weft_core::classifier::PacketMeta;

/// Cases for a property test: `default`, or `PROPTEST_CASES` when set, for longer runs
/// (`PROPTEST_CASES=20000 cargo test --release -p weft-core --test sched_invariants`); an
/// explicit `with_cases` would otherwise override the variable.
#[allow(dead_code)] // not every test file that shares this module uses every helper
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A packet with the named fields set where a value is given (`set_field` syntax), the
/// others absent: what the tests' random packet generators build.
#[allow(dead_code)]
pub(crate) fn meta(fields: &[(&str, Option<String>)]) -> PacketMeta {
    let mut p = PacketMeta::default();
    for (name, value) in fields {
        if let Some(v) = value {
            p.set_field(name, v)
                .unwrap_or_else(|e| panic!("{name}={v}: {e}"));
        }
    }
    p
}
