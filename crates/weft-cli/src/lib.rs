//! The parts of the `weft` command line that other crates build on: the packet capture
//! reader ([`capture`]), which `weft replay` uses and the fuzz target
//! `fuzz/fuzz_targets/capture.rs` drives with arbitrary bytes. Everything else is the
//! binary's (`src/main.rs`).

pub mod capture;
