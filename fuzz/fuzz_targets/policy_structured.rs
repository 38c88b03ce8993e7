//! Structured policies: `arbitrary` builds a `weft_fuzz::structured::Policy` (nodes from a
//! small name alphabet, every node type, parents among earlier or any names, small matches),
//! rendered to YAML and checked like `policy_compile` (see `weft_fuzz::check_policy_text`).
//! `cargo +nightly fuzz fmt policy_structured ARTIFACT` prints an input as YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_fuzz::structured::Policy;

fuzz_target!(|p: Policy| {
    weft_fuzz::check_policy_text(&p.render(), &p.packet_bytes);
});
