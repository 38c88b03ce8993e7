//! Runs the fuzz targets' checks (`weft_fuzz::check_policy_text`) on policy files, without
//! libFuzzer or sanitizers: the quickest way to replay a reproducer written as YAML text.
//!
//!     cargo +nightly run --release --example check_policy -- FILE...
//!
//! A file may carry probe-packet bytes after a NUL byte, as `policy_compile` inputs do.
fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: check_policy FILE...");
        std::process::exit(2);
    }
    for f in files {
        let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let (text, extra) = match data.iter().position(|&b| b == 0) {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (&data[..], &[][..]),
        };
        let text = std::str::from_utf8(text).unwrap_or_else(|e| panic!("{f}: not UTF-8: {e}"));
        weft_fuzz::check_policy_text(text, extra);
        println!("{f}: ok");
    }
}
