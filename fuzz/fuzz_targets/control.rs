//! What a control client sends, as the daemon takes it: the request line's parse into a
//! typed request (or a short refusal); then the same bytes as the policy file
//! a reload names, whose compiler error the client gets redacted. The answer may not quote
//! the file (`weft_nic::fuzzing::control`: every `@` of the input becomes a canary that
//! must not come back).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weft_nic::fuzzing::control(data);
});
