//! A packet capture as `weft replay --trace` reads it (`weft_replay::capture`, the same code):
//! any bytes, most of them refused. Nothing may panic or hang; every error names the file and
//! is short (an error once quoted the parser's whole buffer); arrival times come out in
//! order and every packet has a size; the interfaces stay within `--max-interfaces` (small
//! here, so the fuzzer reaches it), their names within their bound, and the summary's list
//! within its own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_replay::capture::{self, Capture};

/// `--max-interfaces` for the run.
const MAX_INTERFACES: usize = 8;

/// The longest error message allowed, bytes (the longest weft writes is about 500).
const MAX_MESSAGE: usize = 1024;

fuzz_target!(|data: &[u8]| {
    let name = "fuzz.pcapng";
    let check = |e: &str| {
        assert!(e.starts_with(name), "{e}");
        let head: String = e.chars().take(200).collect();
        assert!(e.len() <= MAX_MESSAGE, "{} bytes: {head}", e.len());
    };
    // Tenants by number and by name, as `--tenant` gives them.
    let tenants = [
        ("a".to_string(), "0".to_string()),
        ("b".to_string(), "eth1".to_string()),
    ];
    // A small reorder window, so records are placed as they are read.
    let input = std::io::Cursor::new(data.to_vec());
    let mut c = match Capture::open(name.into(), input, &tenants, 4, MAX_INTERFACES) {
        Ok(c) => c,
        Err(e) => return check(&e),
    };
    let mut last = 0u64;
    while let Some(next) = c.next_packet() {
        match next {
            Ok((t, p)) => {
                assert!(t >= last, "{t} after {last}");
                assert!(p.bytes > 0);
                last = t;
            }
            Err(e) => {
                check(&e);
                break;
            }
        }
    }
    let all = c.interfaces();
    assert!(all.len() <= MAX_INTERFACES, "{} interfaces", all.len());
    for i in all {
        let n = i.name.as_ref().map_or(0, String::len);
        assert!(n <= capture::MAX_INTERFACE_NAME_BYTES + '…'.len_utf8());
        assert!(i.skipped <= i.records);
    }
    let (listed, rest) = capture::listed(all);
    assert!(listed.len() <= capture::LISTED_INTERFACES);
    assert_eq!(listed.len() as u64 + rest.interfaces, all.len() as u64);
});
