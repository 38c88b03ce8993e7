//! `weft replay --trace FILE.pcap|.pcapng`: a packet capture replays exactly as the CSV trace
//! of the same packets (times from the first record, sizes from the original length, fields
//! from the headers), in both capture formats and every supported link type; records that
//! step back in time are counted, not lost; bad captures are refused with their record.
//! The captures are written here byte by byte (the formats are small), the frames built with
//! `etherparse`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use etherparse::PacketBuilder;

fn weft() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft"))
}

/// A fresh directory for one test (removed by the test).
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-cap-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Two leaves by destination port, sharing 1 Gbit/s 1:3, and one for the rest.
const POLICY: &str = "weft: 1
link: {rate: 1gbit}
nodes:
  - {name: root, type: wfq}
  - {name: web, type: leaf, parent: root, weight: 1, match: {dport: 80}}
  - {name: db, type: leaf, parent: root, weight: 3, match: {dport: 5432, proto: tcp}}
  - {name: other, type: leaf, parent: root, weight: 1}
";

/// One packet of the test traffic: (arrival in µs, destination port, TCP?, payload bytes,
/// DSCP).
type Spec = (u64, u16, bool, usize, u8);

fn traffic() -> Vec<Spec> {
    let mut v = Vec::new();
    for i in 0..300u64 {
        v.push((i * 3, 80, true, 1400, 0));
        v.push((i * 3 + 1, 5432, true, 1000 + (i as usize % 7) * 50, 46));
        if i % 10 == 0 {
            v.push((i * 3 + 2, 53, false, 60, 0));
        }
    }
    v
}

/// The IP packet (no link header) of a spec, from 10.0.0.1:40000+port to 10.0.9.9:port.
fn ip_packet(&(_, port, tcp, payload, dscp): &Spec) -> Vec<u8> {
    let ip = PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 9, 9], 64);
    let mut v = Vec::new();
    let body = vec![0u8; payload];
    if tcp {
        ip.tcp(40000 + port, port, 1, 65535)
            .write(&mut v, &body)
            .unwrap();
    } else {
        ip.udp(40000 + port, port).write(&mut v, &body).unwrap();
    }
    // DSCP: the upper six bits of byte 1 (the checksum is not checked here).
    v[1] = dscp << 2;
    v
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// The CSV trace of the same packets (`bytes`: the Ethernet frame's length).
fn csv(specs: &[Spec]) -> String {
    let mut s = String::from("arrive_ps,bytes,src,dst,proto,sport,dport,dscp\n");
    for sp in specs {
        let (t, port, tcp, _, dscp) = *sp;
        s += &format!(
            "{},{},10.0.0.1,10.0.9.9,{},{},{port},{dscp}\n",
            t * 1_000_000,
            ethernet(&ip_packet(sp)).len(),
            if tcp { 6 } else { 17 },
            40000 + port
        );
    }
    s
}

/// A little-endian legacy pcap of link type `linktype`; `(seconds, fraction, frame)` records,
/// the fraction in microseconds or, with `nanos`, nanoseconds; `snap` cuts the captured bytes
/// (the original length stays).
fn pcap(linktype: u32, nanos: bool, records: &[(u32, u32, Vec<u8>)], snap: usize) -> Vec<u8> {
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut b = Vec::new();
    b.extend_from_slice(&magic.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&0i32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&(snap as u32).to_le_bytes());
    b.extend_from_slice(&linktype.to_le_bytes());
    for (sec, frac, frame) in records {
        let cap = frame.len().min(snap);
        b.extend_from_slice(&sec.to_le_bytes());
        b.extend_from_slice(&frac.to_le_bytes());
        b.extend_from_slice(&(cap as u32).to_le_bytes());
        b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        b.extend_from_slice(&frame[..cap]);
    }
    b
}

/// A pcapng block: type, total length, body (padded to 4 bytes), total length.
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    let len = (body.len() + 12) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&body);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// A pcapng section with interfaces `(linktype, if_tsresol)` and enhanced packets
/// `(interface, timestamp in the interface's units, frame)`.
fn pcapng(interfaces: &[(u16, Option<u8>)], packets: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut out = block(0x0a0d_0d0a, &shb);
    for &(linktype, tsresol) in interfaces {
        let mut idb = linktype.to_le_bytes().to_vec();
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&65535u32.to_le_bytes());
        if let Some(r) = tsresol {
            // if_tsresol (option 9, one byte, padded), then opt_endofopt.
            idb.extend_from_slice(&9u16.to_le_bytes());
            idb.extend_from_slice(&1u16.to_le_bytes());
            idb.extend_from_slice(&[r, 0, 0, 0]);
            idb.extend_from_slice(&[0, 0, 0, 0]);
        }
        out.extend(block(1, &idb));
    }
    for (iface, ts, frame) in packets {
        let mut epb = iface.to_le_bytes().to_vec();
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(*ts as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(frame);
        out.extend(block(6, &epb));
    }
    out
}

/// Replays `trace` with [`POLICY`] into `dir/OUT.out`; returns (exit code, stdout, stderr, summary.json if any).
fn replay(dir: &Path, trace: &Path, out: &str) -> (i32, String, String, serde_json::Value) {
    let policy = dir.join("p.yaml");
    fs::write(&policy, POLICY).unwrap();
    let o = weft()
        .args(["replay", "--quiet", "--policy"])
        .arg(&policy)
        .arg("--trace")
        .arg(trace)
        .arg("--out")
        .arg(dir.join(format!("{out}.out")))
        .output()
        .unwrap();
    let summary = fs::read(dir.join(format!("{out}.out")).join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
        summary,
    )
}

fn departures(dir: &Path, out: &str) -> String {
    fs::read_to_string(dir.join(format!("{out}.out")).join("departures.csv")).unwrap()
}

/// A pcap (microseconds, then nanoseconds, then cut at 54 bytes) and a pcapng of Ethernet
/// frames replay exactly as the CSV trace of the same packets; so do raw-IP and Linux
/// cooked captures, whose `bytes` are their own frames' lengths.
#[test]
fn a_capture_replays_as_its_csv_trace() {
    let dir = scratch("same");
    let specs = traffic();
    fs::write(dir.join("t.csv"), csv(&specs)).unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("t.csv"), "csv");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["trace_format"], "csv");
    let expected = departures(&dir, "csv");
    assert!(expected.lines().count() > 600, "{expected}");
    // Wall-clock timestamps: the replay starts at the first record.
    let base = 1_700_000_000u64 * 1_000_000;
    let frames: Vec<(u64, Vec<u8>)> = specs
        .iter()
        .map(|sp| (base + sp.0, ethernet(&ip_packet(sp))))
        .collect();
    let us: Vec<_> = frames
        .iter()
        .map(|(t, f)| ((t / 1_000_000) as u32, (t % 1_000_000) as u32, f.clone()))
        .collect();
    let ns: Vec<_> = us
        .iter()
        .map(|(s, f, fr)| (*s, f * 1000, fr.clone()))
        .collect();
    let captures = [
        ("us.pcap", pcap(1, false, &us, 65535)),
        ("ns.pcap", pcap(1, true, &ns, 65535)),
        // 14 + 20 + 20: the TCP header's ports survive, the payload does not.
        ("snap.pcap", pcap(1, false, &us, 54)),
        (
            "t.pcapng",
            pcapng(
                &[(1, None)],
                &frames
                    .iter()
                    .map(|(t, f)| (0, *t, f.clone()))
                    .collect::<Vec<_>>(),
            ),
        ),
    ];
    for (name, bytes) in captures {
        fs::write(dir.join(name), bytes).unwrap();
        let (code, _, err, s) = replay(&dir, &dir.join(name), name);
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(s["trace_format"], "capture", "{name}");
        assert_eq!(s["capture_reordered"], 0, "{name}");
        assert_eq!(departures(&dir, name), expected, "{name}");
    }
    // Raw IP (101) and Linux cooked (113) captures: the same departures but for the sizes,
    // which are those frames' own (the CSV names the Ethernet frame's).
    let ip_csv = csv(&specs)
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                return format!("{l}\n");
            }
            let mut f: Vec<String> = l.split(',').map(String::from).collect();
            f[1] = (f[1].parse::<u64>().unwrap() - 14).to_string();
            format!("{}\n", f.join(","))
        })
        .collect::<String>();
    fs::write(dir.join("ip.csv"), ip_csv).unwrap();
    assert_eq!(replay(&dir, &dir.join("ip.csv"), "ipcsv").0, 0);
    let ip_expected = departures(&dir, "ipcsv");
    let raw: Vec<_> = us
        .iter()
        .map(|(s, f, fr)| (*s, *f, fr[14..].to_vec()))
        .collect();
    fs::write(dir.join("raw.pcap"), pcap(101, false, &raw, 65535)).unwrap();
    assert_eq!(replay(&dir, &dir.join("raw.pcap"), "raw").0, 0);
    assert_eq!(departures(&dir, "raw"), ip_expected, "raw IP");
    let sll_csv_bytes = |f: &[u8]| f.len() + 2; // 16-byte header for a 14-byte one
    let sll: Vec<_> = us
        .iter()
        .map(|(s, f, fr)| {
            let mut h = vec![0u8; 14];
            h.extend_from_slice(&[0x08, 0x00]);
            h.extend_from_slice(&fr[14..]);
            assert_eq!(h.len(), sll_csv_bytes(fr));
            (*s, *f, h)
        })
        .collect();
    fs::write(dir.join("sll.pcap"), pcap(113, false, &sll, 65535)).unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("sll.pcap"), "sll");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["packets"], specs.len());
    // Classified alike: every leaf sends as many packets as from the Ethernet capture.
    let (_, _, _, eth) = replay(&dir, &dir.join("us.pcap"), "us2");
    for leaf in ["web", "db", "other"] {
        assert_eq!(
            s["leaves"][leaf]["packets"], eth["leaves"][leaf]["packets"],
            "{leaf}"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// pcapng with two interfaces of different timestamp resolutions (microseconds and
/// nanoseconds) and link types (Ethernet and raw IP), merged with one record out of order:
/// it is replayed at the latest time seen, counted, and said on stderr; nothing is lost.
#[test]
fn a_merged_pcapng_keeps_every_record() {
    let dir = scratch("ng");
    let specs = traffic();
    let base_s = 1_700_000_000u64;
    let mut packets: Vec<(u32, u64, Vec<u8>)> = specs
        .iter()
        .enumerate()
        .map(|(i, sp)| {
            if i % 2 == 0 {
                (0, base_s * 1_000_000 + sp.0, ethernet(&ip_packet(sp)))
            } else {
                (1, (base_s * 1_000_000 + sp.0) * 1000, ip_packet(sp))
            }
        })
        .collect();
    // Record 11 steps back 2 µs before record 10.
    packets.swap(9, 10);
    fs::write(
        dir.join("m.pcapng"),
        pcapng(&[(1, None), (101, Some(9))], &packets),
    )
    .unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("m.pcapng"), "o");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["capture_reordered"], 1, "{s:#}");
    assert!(err.contains("1 records of"), "{err}");
    let n = specs.len() as u64;
    assert_eq!(s["packets"], n);
    assert_eq!(
        s["sent"].as_u64().unwrap() + s["dropped"].as_u64().unwrap(),
        n,
        "{s:#}"
    );
    // The last record arrives 897 µs after the first.
    let last = specs.last().unwrap().0 - specs[0].0;
    let deps = departures(&dir, "o");
    let latest = deps
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse::<u64>().unwrap())
        .max()
        .unwrap();
    assert!(latest >= last * 1_000_000, "{latest} < {last} µs");
    let _ = fs::remove_dir_all(&dir);
}

/// Bad captures: exit 2 and the record that is wrong.
#[test]
fn bad_captures_name_the_record() {
    let dir = scratch("bad");
    let frame = ethernet(&ip_packet(&(0, 80, true, 100, 0)));
    let good = pcap(
        1,
        false,
        &[(1, 0, frame.clone()), (1, 5, frame.clone())],
        65535,
    );
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "wifi.pcap",
            pcap(105, false, &[(1, 0, frame.clone())], 65535),
            "record 1: link type 105 is not supported",
        ),
        (
            "cut.pcap",
            good[..good.len() - 30].to_vec(),
            "record 2: the file ends inside this record",
        ),
        (
            "noiface.pcapng",
            pcapng(&[], &[(0, 5, frame.clone())]),
            "record 1: a packet of interface 0, which was not described",
        ),
        (
            "zero.pcap",
            pcap(
                1,
                false,
                &[(1, 0, frame.clone()), (1, 1, Vec::new())],
                65535,
            ),
            "record 2: a packet of 0 bytes",
        ),
    ];
    for (name, bytes, message) in cases {
        fs::write(dir.join(name), bytes).unwrap();
        let (code, _, err, _) = replay(&dir, &dir.join(name), name);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(&format!("{name}: {message}")), "{name}: {err}");
    }
    let _ = fs::remove_dir_all(&dir);
}

mod mutated {
    use super::*;
    use proptest::prelude::*;

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(48)
    }

    /// A small valid capture of either format to mutate.
    fn seed(ng: bool) -> Vec<u8> {
        let specs: Vec<Spec> = traffic().into_iter().take(12).collect();
        if ng {
            let packets: Vec<_> = specs
                .iter()
                .map(|sp| (0, sp.0, ethernet(&ip_packet(sp))))
                .collect();
            pcapng(&[(1, Some(6))], &packets)
        } else {
            let records: Vec<_> = specs
                .iter()
                .map(|sp| (7, sp.0 as u32, ethernet(&ip_packet(sp))))
                .collect();
            pcap(1, false, &records, 65535)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        /// Captures with bytes overwritten and cut short: exit 0 (every record accounted
        /// for) or 2 (an error naming the file), never a panic or a hang.
        #[test]
        fn mutated_captures_replay_or_are_refused(
            ng in any::<bool>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
            do_cut in any::<bool>(),
        ) {
            let mut bytes = seed(ng);
            // Keep the magic number, so the file is read as a capture.
            for (at, v) in &edits {
                let i = 4 + at.index(bytes.len() - 4);
                bytes[i] = *v;
            }
            if do_cut {
                bytes.truncate(4 + cut.index(bytes.len() - 4));
            }
            let dir = scratch("mutated");
            fs::write(dir.join("m.cap"), &bytes).unwrap();
            let (code, _, err, s) = replay(&dir, &dir.join("m.cap"), "o");
            let _ = fs::remove_dir_all(&dir);
            prop_assert!(!err.contains("panicked"), "{err}");
            prop_assert!(code == 0 || code == 2, "exit {code}: {err}");
            if code == 2 {
                prop_assert!(err.contains("m.cap"), "{err}");
            } else {
                let n = s["packets"].as_u64().unwrap();
                prop_assert_eq!(
                    s["sent"].as_u64().unwrap() + s["dropped"].as_u64().unwrap()
                        + s["held_at_end"].as_u64().unwrap(),
                    n
                );
            }
        }
    }
}
