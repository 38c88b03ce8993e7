//! Entry points for fuzzing what the software NIC reads from tenants: the functions the
//! fuzz targets in `fuzz/` call (`cargo +nightly fuzz run frame`), and that the unit tests
//! below run on random and mutated frames with the ordinary test suite, so every build
//! exercises them on stable.
//!
//! Each checks what must hold whatever the input: no panic, and the checksum completion
//! changes at most the two bytes of one checksum field, and only when it says it did.
//! Cost: a copy of the frame per call; for fuzzing and tests only.

use crate::isolation::MacTable;
use crate::{offload, parse};

/// A frame from tenant port 1, through everything ingress does to it before queueing it.
pub fn frame(data: &[u8]) {
    let _ = parse::parse(data, 1);
    if data.len() >= 12 {
        let mut t = MacTable::new(&[vec![], vec![]], 4, 1_000).expect("no configured address");
        let mut src = [0u8; 6];
        src.copy_from_slice(&data[6..12]);
        let first = t.check_source(0, src, 1);
        // The same address from the other port is never accepted once the first owns it.
        if first.is_ok() {
            assert!(t.check_source(1, src, 2).is_err(), "an owned address moved");
        }
    }
    let mut copy = data.to_vec();
    let done = offload::complete_checksum(&mut copy);
    let changed: Vec<usize> = (0..data.len()).filter(|&i| copy[i] != data[i]).collect();
    match done {
        Ok(_) => assert!(
            changed.len() <= 2 && changed.windows(2).all(|w| w[1] == w[0] + 1),
            "completion changed bytes {changed:?}"
        ),
        Err(_) => assert!(changed.is_empty(), "a refused frame changed at {changed:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tcp4() -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(1000, 5201, 1, 1000);
        let mut v = Vec::new();
        b.write(&mut v, &[7u8; 40]).unwrap();
        v
    }

    fn udp6() -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6([0xfd; 16], [0xfe; 16], 64)
            .udp(53, 5353);
        let mut v = Vec::new();
        b.write(&mut v, &[9u8; 30]).unwrap();
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Random bytes.
        #[test]
        fn random_frames(data in prop::collection::vec(any::<u8>(), 0..200)) {
            frame(&data);
        }

        /// Valid frames with a few bytes changed and cut anywhere: the inputs that reach
        /// deepest into the parsers.
        #[test]
        fn mutated_frames(
            v6 in any::<bool>(),
            edits in prop::collection::vec((0usize..200, any::<u8>()), 0..6),
            cut in 0usize..200,
        ) {
            let mut f = if v6 { udp6() } else { tcp4() };
            for (at, b) in edits {
                let n = f.len();
                f[at % n] = b;
            }
            f.truncate(cut.max(1));
            frame(&f);
        }
    }
}
