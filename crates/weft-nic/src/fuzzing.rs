//! Entry points for fuzzing what the software NIC reads from tenants and control clients:
//! the functions the fuzz targets in `fuzz/` call (`cargo +nightly fuzz run frame`,
//! `... control`), and that the unit tests below run on random and mutated inputs with the
//! ordinary test suite, so every build exercises them on stable.
//!
//! Each checks what must hold whatever the input: no panic; the checksum completion changes
//! at most the two bytes of one checksum field, and only when it says it did; a control
//! request line reads into a typed request that is sent back as it was read, or into a
//! short refusal; and a refused reload's answer quotes nothing of the policy file. Cost: a copy of the input per call; for
//! fuzzing and tests only.

use crate::ctl;
use crate::isolation::MacTable;
use crate::{offload, parse};

/// What stands for the policy file's secret content in [`control`]: every `@` of the input
/// becomes it, so the fuzzer places it in keys, names, values and comments.
const CANARY: &str = "QZXSECRETQZX";

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

/// Bytes a control client sends, through what the daemon does with them before a request
/// reaches the dataplane: the request line's parse ([`ctl::request_of`]: a request reads
/// back from its own wire form as itself; a refusal is short); then the same bytes as a policy file a reload names (every `@`
/// a canary), whose compiler error a client receives as a refused reload answers it
/// ([`ctl::client_error`]): the answer must not quote the file.
pub fn control(data: &[u8]) {
    match ctl::request_of(data) {
        Ok(req) => {
            let text = serde_json::to_string(&req).expect("a request read from JSON writes");
            assert_eq!(
                ctl::Request::from_json(text.as_bytes()),
                Ok(req),
                "read back from {text}"
            );
        }
        Err(answer) => {
            let e = answer.error().expect("a refusal that says ok");
            assert!(e.len() <= 512, "a refusal of {} bytes", e.len());
        }
    }
    let text = String::from_utf8_lossy(data).replace('@', CANARY);
    // A sub-policy would be read from the working directory: not the fuzzer's business.
    if text.contains("attach") {
        return;
    }
    let options = weft_core::policy::LoadOptions::default();
    if let Err(e) = weft_core::policy::compile_str("p.yaml".as_ref(), &text, &options) {
        let answer = ctl::client_error(&e);
        assert!(
            !answer.contains(CANARY),
            "a refused reload quotes the file: {answer}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small valid policy for [`policies_with_a_secret`] to break.
    const SAMPLE: &str = "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: wfq}\n  - {name: a, type: leaf, parent: root, weight: 1, match: {tag: 1}}\n  - {name: b, type: leaf, parent: root, weight: 2, match: {dst: 10.0.0.0/8}}\n";

    /// What a request says of its client (`peer`) or of the server's limits is not read:
    /// the server hands both beside the request, from the kernel and its flags. A bad line
    /// is refused.
    #[test]
    fn a_request_cannot_choose_its_client() {
        let req = ctl::request_of(
            b"{\"cmd\": \"reload\", \"policy\": \"/p.yaml\", \"peer\": {\"uid\": 0}, \
              \"max_policy_bytes\": 1e12}\n",
        )
        .unwrap();
        assert_eq!(
            req,
            ctl::Request::Reload {
                policy: "/p.yaml".into()
            }
        );
        assert!(ctl::request_of(b"not json\n").is_err());
    }

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

        /// Random control requests and policy texts.
        #[test]
        fn random_control_input(data in prop::collection::vec(any::<u8>(), 0..300)) {
            control(&data);
        }

        /// Policies with the canary in random places: in names, keys, values, matches.
        #[test]
        fn policies_with_a_secret(
            edits in prop::collection::vec((0usize..400, prop::sample::select(vec![
                "@", "`@`", "\"@\"", "@: 1", "{name: @}", "parent: @", "#@", "\n", "`",
            ])), 1..5),
        ) {
            let mut text = String::from(SAMPLE);
            for (at, piece) in edits {
                let mut at = at % (text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                text.insert_str(at, piece);
            }
            control(text.as_bytes());
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
