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

mod pcapng;
use pcapng::{block, epb, idb, shb};

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

/// A pcapng section with interfaces `(linktype, if_tsresol)` and enhanced packets
/// `(interface, timestamp in the interface's units, frame)`.
fn pcapng(interfaces: &[(u16, Option<u8>)], packets: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    let named: Vec<_> = interfaces.iter().map(|&(l, r)| (l, r, None)).collect();
    pcapng_named(&named, packets)
}

/// [`pcapng`] with an `if_name` for some interfaces.
fn pcapng_named(
    interfaces: &[(u16, Option<u8>, Option<&str>)],
    packets: &[(u32, u64, Vec<u8>)],
) -> Vec<u8> {
    let mut out = shb();
    for &(linktype, tsresol, name) in interfaces {
        out.extend(idb(linktype, tsresol, name));
    }
    for (iface, ts, frame) in packets {
        out.extend(epb(*iface, *ts, frame));
    }
    out
}

/// Replays `trace` with [`POLICY`] into `dir/OUT.out`; returns (exit code, stdout, stderr, summary.json if any).
fn replay(dir: &Path, trace: &Path, out: &str) -> (i32, String, String, serde_json::Value) {
    replay_with(dir, POLICY, trace, out, &[])
}

/// [`replay`] with another policy and more arguments.
fn replay_with(
    dir: &Path,
    policy_text: &str,
    trace: &Path,
    out: &str,
    args: &[&str],
) -> (i32, String, String, serde_json::Value) {
    let policy = dir.join(format!("{out}.yaml"));
    fs::write(&policy, policy_text).unwrap();
    let o = weft()
        .args(["replay", "--quiet", "--policy"])
        .arg(&policy)
        .arg("--trace")
        .arg(trace)
        .arg("--out")
        .arg(dir.join(format!("{out}.out")))
        .args(args)
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

/// `csv` (a header, then rows) with column `col` of every row rewritten by `f`.
fn map_column(csv: &str, col: usize, f: impl Fn(&str) -> String) -> String {
    let mut lines = csv.lines();
    let mut out = format!("{}\n", lines.next().unwrap_or_default());
    for l in lines {
        let mut fields: Vec<String> = l.split(',').map(String::from).collect();
        fields[col] = f(&fields[col]);
        out += &fields.join(",");
        out.push('\n');
    }
    out
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
    let ip_csv = map_column(&csv(&specs), 1, |b| {
        (b.parse::<u64>().unwrap() - 14).to_string()
    });
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

/// BSD loopback captures (`tcpdump -i lo0` on macOS and the BSDs: link type 0, the address
/// family in the host's byte order, or 108, in network order) replay as the raw-IP capture
/// of the same packets with 4 more bytes each; a legacy pcap whose link-type field also says
/// its frames end in a 4-byte frame check sequence (upper bits set) is read as Ethernet, its
/// packets classified as those of the capture without.
#[test]
fn loopback_and_fcs_flagged_captures_replay() {
    let dir = scratch("loop");
    let specs = traffic();
    let base = 1_700_000_000u32;
    let with_header = |header: &[u8], tail: &[u8]| -> Vec<(u32, u32, Vec<u8>)> {
        specs
            .iter()
            .map(|sp| {
                let mut f = header.to_vec();
                f.extend_from_slice(&ip_packet(sp));
                f.extend_from_slice(tail);
                (
                    base + (sp.0 / 1_000_000) as u32,
                    (sp.0 % 1_000_000) as u32,
                    f,
                )
            })
            .collect()
    };
    // The raw-IP CSV with the loopback header's 4 bytes.
    let lo_csv = map_column(&csv(&specs), 1, |b| {
        (b.parse::<u64>().unwrap() - 14 + 4).to_string()
    });
    fs::write(dir.join("lo.csv"), lo_csv).unwrap();
    assert_eq!(replay(&dir, &dir.join("lo.csv"), "locsv").0, 0);
    let expected = departures(&dir, "locsv");
    for (name, linktype, family) in [
        ("null.pcap", 0u32, 2u32.to_le_bytes()),
        ("loop.pcap", 108, 2u32.to_be_bytes()),
    ] {
        fs::write(
            dir.join(name),
            pcap(linktype, false, &with_header(&family, &[]), 65535),
        )
        .unwrap();
        let (code, _, err, s) = replay(&dir, &dir.join(name), name);
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(s["capture_interfaces"][0]["link_type"], linktype, "{name}");
        assert_eq!(departures(&dir, name), expected, "{name}");
    }
    // LT_FCS_DATALINK_EXT(4) | Ethernet: 4-byte FCS present.
    let eth_header = &ethernet(&[])[..];
    let fcs = pcap(0x4400_0001, false, &with_header(eth_header, &[0; 4]), 65535);
    fs::write(dir.join("fcs.pcap"), fcs).unwrap();
    let plain = pcap(1, false, &with_header(eth_header, &[]), 65535);
    fs::write(dir.join("plain.pcap"), plain).unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("fcs.pcap"), "fcs");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["capture_interfaces"][0]["link_type"], 1);
    let (_, _, _, p) = replay(&dir, &dir.join("plain.pcap"), "plain");
    for leaf in ["web", "db", "other"] {
        assert_eq!(
            s["leaves"][leaf]["packets"], p["leaves"][leaf]["packets"],
            "{leaf}"
        );
    }
    assert!(p["leaves"]["db"]["packets"].as_u64().unwrap() > 0);
    let _ = fs::remove_dir_all(&dir);
}

/// pcapng with two interfaces of different timestamp resolutions (microseconds and 2^-20 s,
/// a power of two) and link types (Ethernet and raw IP), written as `dumpcap -i a -i b`
/// writes: each interface's records in runs of 50, so half the records step back in time.
/// The reorder window replays them as the time-sorted capture (the same departures, each
/// packet keeping its record's id); with a window of 1 record they replay at the latest
/// time seen, are counted and said on stderr; nothing is lost either way.
#[test]
fn a_merged_pcapng_replays_in_time_order() {
    let dir = scratch("ng");
    let specs = traffic();
    let base_s = 1_700_000_000u64;
    // (interface, timestamp in its units, frame, position in time order); 2^-20 s units
    // hold whole microseconds exactly only at multiples of 15,625 µs, so interface 1's
    // records sit at 16 µs steps (2^-20 s × 16.777216 ≈ 16 µs; the times are kept exact).
    let record = |k: usize, sp: &Spec| -> (u32, u64, Vec<u8>, usize) {
        if k.is_multiple_of(2) {
            (0, base_s * 1_000_000 + sp.0, ethernet(&ip_packet(sp)), k)
        } else {
            (1, (base_s << 20) + sp.0 * 16, ip_packet(sp), k)
        }
    };
    // The same records in time order: interface 1's at t·16·2^-20 s = t·15.2587890625 µs.
    let at_ps = |r: &(u32, u64, Vec<u8>, usize)| -> u128 {
        if r.0 == 0 {
            (r.1 - base_s * 1_000_000) as u128 * 1_000_000
        } else {
            (r.1 - (base_s << 20)) as u128 * 1_000_000_000_000 / (1 << 20)
        }
    };
    let mut sorted: Vec<_> = specs
        .iter()
        .enumerate()
        .map(|(k, sp)| record(k, sp))
        .collect();
    sorted.sort_by_key(|r| (at_ps(r), r.3));
    // File order: runs of 50 records of one interface, then of the other.
    let mut runs: Vec<_> = sorted.clone();
    runs.sort_by_key(|r| (r.3 / 100, r.0, r.3));
    let write = |name: &str, rs: &[(u32, u64, Vec<u8>, usize)]| {
        let packets: Vec<_> = rs.iter().map(|r| (r.0, r.1, r.2.clone())).collect();
        fs::write(
            dir.join(name),
            pcapng(&[(1, None), (101, Some(0x80 | 20))], &packets),
        )
        .unwrap();
    };
    write("sorted.pcapng", &sorted);
    write("runs.pcapng", &runs);
    let (code, _, err, s) = replay(&dir, &dir.join("sorted.pcapng"), "sorted");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["capture_out_of_order"], 0, "{s:#}");
    let (code, _, err, s) = replay(&dir, &dir.join("runs.pcapng"), "runs");
    assert_eq!(code, 0, "{err}");
    let back = s["capture_out_of_order"].as_u64().unwrap();
    assert!(back > 100, "{s:#}");
    assert_eq!(s["capture_reordered"], 0, "{s:#}");
    // Nothing lost: a note, which `--quiet` silences.
    assert_eq!(err, "");
    let o = weft()
        .args(["replay", "--policy"])
        .arg(dir.join("runs.yaml"))
        .arg("--trace")
        .arg(dir.join("runs.pcapng"))
        .arg("--out")
        .arg(dir.join("runs-noted.out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("note: {back} records of "))
            && err.contains("replayed them in time order"),
        "{err}"
    );
    // Each record's id in runs.pcapng is its position there; mapped to its position in
    // sorted.pcapng, the departures are the same.
    let pos_in_sorted: std::collections::HashMap<usize, usize> =
        sorted.iter().enumerate().map(|(i, r)| (r.3, i)).collect();
    let remapped = map_column(&departures(&dir, "runs"), 1, |id| {
        pos_in_sorted[&runs[id.parse::<usize>().unwrap()].3].to_string()
    });
    assert_eq!(remapped, departures(&dir, "sorted"));

    // Without the window: replayed at the latest time seen, counted, said; none lost.
    let (code, _, err, s) = replay_with(
        &dir,
        POLICY,
        &dir.join("runs.pcapng"),
        "nowindow",
        &["--reorder-window", "1"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["capture_reordered"], back, "{s:#}");
    assert!(
        err.contains("a larger --reorder-window sorts them"),
        "{err}"
    );
    let n = specs.len() as u64;
    assert_eq!(s["packets"], n);
    assert_eq!(
        s["sent"].as_u64().unwrap() + s["dropped"].as_u64().unwrap(),
        n,
        "{s:#}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A capture cut inside its last record (still being written, or copied short) replays the
/// records before it, with a warning; so does one read from a pipe. A simple packet block
/// (no timestamp) first in the file arrives with the first timed record.
#[test]
fn a_capture_cut_short_or_piped_replays_what_it_holds() {
    let dir = scratch("cut");
    let frame = ethernet(&ip_packet(&(0, 80, true, 100, 0)));
    let records: Vec<_> = (0..10).map(|i| (1, i * 5, frame.clone())).collect();
    let whole = pcap(1, false, &records, 65535);
    fs::write(dir.join("cut.pcap"), &whole[..whole.len() - 30]).unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("cut.pcap"), "cut");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["packets"], 9, "{s:#}");
    assert_eq!(s["capture_truncated_at"], 10, "{s:#}");
    assert!(
        err.contains("cut.pcap: record 10: the file ends inside this record"),
        "{err}"
    );
    // The whole capture through a pipe.
    fs::write(dir.join("p.yaml"), POLICY).unwrap();
    let mut child = weft()
        .args(["replay", "--quiet", "--policy"])
        .arg(dir.join("p.yaml"))
        .args(["--trace", "/dev/stdin", "--out"])
        .arg(dir.join("pipe.out"))
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Written in pieces, the first of 3 bytes: the format is told from a short read.
    let mut stdin = child.stdin.take().unwrap();
    for piece in whole.chunks(3) {
        std::io::Write::write_all(&mut stdin, piece).unwrap();
    }
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("pipe.out/summary.json")).unwrap()).unwrap();
    assert_eq!(s["packets"], 10, "{s:#}");
    assert_eq!(s["capture_truncated_at"], serde_json::Value::Null);
    // A simple packet block, then an enhanced one at a wall-clock time (2023, in µs).
    let mut ng = pcapng(&[(1, None)], &[(0, 1_700_000_000_000_007, frame.clone())]);
    let mut spb = (frame.len() as u32).to_le_bytes().to_vec();
    spb.extend_from_slice(&frame);
    let at = ng.len() - block(6, &[0; 20]).len() - frame.len().next_multiple_of(4);
    ng.splice(at..at, block(3, &spb));
    fs::write(dir.join("spb.pcapng"), ng).unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("spb.pcapng"), "spb");
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["packets"], 2, "{s:#}");
    assert_eq!(s["first_arrival_ps"], 0, "{s:#}");
    let _ = fs::remove_dir_all(&dir);
}

/// Tenants by interface, as `weft run --tenant NAME=IFACE` gives them: two interfaces, named
/// in the capture, carry the same 5-tuples at 2 Gbit/s each into 1 Gbit/s; the policy weighs
/// tenant 1 three times tenant 2. Without `--tenant` every record goes to the catch-all.
#[test]
fn tenants_come_from_the_capture_interfaces() {
    let dir = scratch("tenants");
    let policy = "weft: 1
link: {rate: 1gbit}
nodes:
  - {name: root, type: wfq}
  - {name: gold, type: leaf, parent: root, weight: 3, match: {tenant: 1}, limit: {packets: 10000}}
  - {name: bronze, type: leaf, parent: root, weight: 1, match: {vm: 2}, limit: {packets: 10000}}
  - {name: rest, type: leaf, parent: root, weight: 1, limit: {packets: 10000}}
";
    let frame = ethernet(&ip_packet(&(0, 80, true, 1446, 0)));
    assert_eq!(frame.len(), 1500);
    let base_us = 1_700_000_000u64 * 1_000_000;
    // veth-b's records first at each instant: the order must not decide the shares.
    let packets: Vec<(u32, u64, Vec<u8>)> = (0..400u64)
        .map(|i| ((1 - i % 2) as u32, base_us + i / 2 * 6, frame.clone()))
        .collect();
    let trace = dir.join("two.pcapng");
    fs::write(
        &trace,
        pcapng_named(
            &[(1, None, Some("veth-a")), (1, None, Some("veth-b"))],
            &packets,
        ),
    )
    .unwrap();
    let (code, _, err, s) = replay_with(
        &dir,
        policy,
        &trace,
        "t",
        &["--tenant", "a=veth-a", "--tenant", "b=veth-b"],
    );
    assert_eq!(code, 0, "{err}");
    for (leaf, n) in [("gold", 200), ("bronze", 200), ("rest", 0)] {
        assert_eq!(s["leaves"][leaf]["packets"], n, "{leaf}: {s:#}");
    }
    let ifaces = &s["capture_interfaces"];
    assert_eq!(ifaces[0]["name"], "veth-a");
    assert_eq!(ifaces[0]["tenant"], 1);
    assert_eq!(ifaces[0]["tenant_name"], "a");
    assert_eq!(ifaces[1]["tenant"], 2);
    assert_eq!(ifaces[1]["records"], 200);
    let html = fs::read_to_string(dir.join("t.out").join("index.html")).unwrap();
    assert!(
        html.contains("<tr><th>veth-b</th><td>0</td><td>1</td><td>200</td><td>2 (b)</td></tr>"),
        "{html}"
    );
    // While both are backlogged (the first 200 departures), gold sends 3 for bronze's 1.
    let deps = departures(&dir, "t");
    let gold = deps
        .lines()
        .skip(1)
        .take(200)
        .filter(|l| l.split(',').nth(2) == Some("gold"))
        .count();
    assert!(
        (148..=152).contains(&gold),
        "gold sent {gold} of the first 200"
    );

    // Without tenants every record is the catch-all's; a listed interface the capture
    // lacks is said on stderr.
    let (code, _, err, s) = replay_with(&dir, policy, &trace, "none", &["--tenant", "a=veth-z"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["leaves"]["rest"]["packets"], 400, "{s:#}");
    assert!(
        err.contains("--tenant a=veth-z") && err.contains("its interfaces: veth-a, veth-b"),
        "{err}"
    );
    assert_eq!(
        s["capture_interfaces"][0]["tenant"],
        serde_json::Value::Null
    );

    // A legacy pcap's one interface is number 0.
    let us: Vec<_> = packets
        .iter()
        .map(|(_, t, f)| ((t / 1_000_000) as u32, (t % 1_000_000) as u32, f.clone()))
        .collect();
    fs::write(dir.join("one.pcap"), pcap(1, false, &us, 65535)).unwrap();
    let (code, _, err, s) = replay_with(
        &dir,
        policy,
        &dir.join("one.pcap"),
        "one",
        &["--tenant", "x=3", "--tenant", "y=0"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["leaves"]["bronze"]["packets"], 400, "{s:#}");
    assert!(err.contains("--tenant x=3"), "{err}");

    // Usage errors: a CSV trace, a malformed pair, an interface given twice.
    fs::write(dir.join("t.csv"), "arrive_ps,bytes\n0,100\n").unwrap();
    for (trace, args, message) in [
        (
            dir.join("t.csv"),
            vec!["--tenant", "a=veth-a"],
            "is a CSV trace (give it a `tenant` column)",
        ),
        (trace.clone(), vec!["--tenant", "a"], "expected NAME=IFACE"),
        (
            trace.clone(),
            vec!["--tenant", "=veth-a"],
            "the tenant's name is empty",
        ),
        (
            trace.clone(),
            vec!["--tenant", "a=veth-a", "--tenant", "b=veth-a"],
            "tenant 1 is already `a=veth-a`",
        ),
    ] {
        let (code, _, err, _) = replay_with(&dir, policy, &trace, "bad", &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
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
            "header.pcap",
            good[..20].to_vec(),
            "the file ends inside its capture header",
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

/// A record stamped far before the rest (a clock reset) becomes the replay's time 0 when it
/// falls in the first reorder window; the error then names it, not the record that came
/// out too late, and a small window replays it late instead.
#[test]
fn a_far_early_record_is_named_as_the_replays_origin() {
    let dir = scratch("early");
    let specs = traffic();
    let mut records: Vec<(u32, u32, Vec<u8>)> = specs[..10]
        .iter()
        .enumerate()
        .map(|(i, s)| (1_700_000_000, i as u32, ethernet(&ip_packet(s))))
        .collect();
    records.push((1, 0, ethernet(&ip_packet(&specs[10]))));
    let trace = dir.join("early.pcap");
    fs::write(&trace, pcap(1, false, &records, 65535)).unwrap();
    let (code, _, stderr, _) = replay(&dir, &trace, "early");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("record 1: ") && stderr.contains("after record 11 (the replay's time 0"),
        "{stderr}"
    );
    let (code, _, stderr, summary) =
        replay_with(&dir, POLICY, &trace, "early1", &["--reorder-window", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["packets"], 11, "{summary}");
    let _ = fs::remove_dir_all(&dir);
}

/// A pcapng interface whose link type weft does not read (here Wi-Fi, 105) beside an
/// Ethernet one: its records are skipped, counted in `capture_interfaces` and warned about,
/// and the Ethernet records replay as the capture without them. It stopped the whole replay
/// at its first record. (A legacy pcap's one link type stays an error: `bad_captures_…`.)
#[test]
fn a_pcapng_interface_of_another_link_type_is_skipped_with_a_warning() {
    let dir = scratch("skip");
    let specs = traffic();
    let base = 1_700_000_000u64 * 1_000_000;
    let eth: Vec<(u32, u64, Vec<u8>)> = specs
        .iter()
        .map(|sp| (0, base + sp.0, ethernet(&ip_packet(sp))))
        .collect();
    let mut mixed = eth.clone();
    for (k, sp) in specs.iter().enumerate().step_by(3) {
        mixed.push((1, base + sp.0, vec![(k % 128) as u8 | 0x80; 60]));
    }
    mixed.sort_by_key(|r| r.1);
    fs::write(dir.join("eth.pcapng"), pcapng(&[(1, None)], &eth)).unwrap();
    fs::write(
        dir.join("mixed.pcapng"),
        pcapng(&[(1, None), (105, None)], &mixed),
    )
    .unwrap();
    let (code, _, err, s) = replay(&dir, &dir.join("mixed.pcapng"), "mixed");
    assert_eq!(code, 0, "{err}");
    let skipped = mixed.len() - eth.len();
    assert!(
        err.contains("interface 1 has link type 105, which weft does not read")
            && err.contains(&format!("its {skipped} records were skipped")),
        "{err}"
    );
    assert_eq!(s["capture_interfaces"][1]["skipped"], skipped, "{s:#}");
    assert_eq!(s["capture_interfaces"][0]["skipped"], 0, "{s:#}");
    let (code, _, err, p) = replay(&dir, &dir.join("eth.pcapng"), "eth");
    assert_eq!(code, 0, "{err}");
    for leaf in ["web", "db", "other"] {
        assert_eq!(
            s["leaves"][leaf]["packets"], p["leaves"][leaf]["packets"],
            "{leaf}"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}
