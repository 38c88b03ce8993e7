//! A tenant's frame, as the dataplane's ingress takes it: the parser, the source-address
//! check, and the checksum completion the receive ring applies to a frame the kernel marked
//! unfinished. None may panic, read or write outside the frame, or change anything but the
//! two checksum bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weft_nic::fuzzing::frame(data);
});
