//! Raw bytes → policy text. Layout: `TEXT [0x00 PACKET-BYTES]`: everything before the first
//! NUL byte is the policy (skipped unless UTF-8); the bytes after it seed the probe packets.
//! See `weft_fuzz::check_policy_text` for the checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (text, extra) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(text) = std::str::from_utf8(text) {
        weft_fuzz::check_policy_text(text, extra);
    }
});
