//! `weft replay`'s trace readers are bounded by their limits, not by what a hostile or broken
//! trace holds: a capture with more interfaces than `--max-interfaces` is refused at the
//! first one too many; a malformed or oversized pcapng block is refused with its block, byte
//! offset and a short excerpt (never the parser's whole buffer); a CSV row longer than
//! `--max-trace-row-bytes` is refused with its line, without being read whole, and a cell
//! longer than a value can be is refused with an excerpt; and a capture of many interfaces
//! under the limit writes a summary, a table and a page that list a bounded number of them.
//! Scaled down: the limits are lowered with the options where that keeps a case small.
//! Everything is asserted on sizes in bytes, never on wall time.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod pcapng;
use pcapng::{epb, idb, shb};

fn weft() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft"))
}

/// A fresh directory for one test (removed by the test).
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-bounds-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// One leaf that takes every packet.
const POLICY: &str = "weft: 1
link: {rate: 1gbit}
nodes:
  - {name: root, type: wfq}
  - {name: all, type: leaf, parent: root, weight: 1}
";

/// What a replay left: exit code, stdout, stderr, and the sizes in bytes of `summary.json`
/// and `index.html` (`None`: not there).
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    summary: Option<serde_json::Value>,
    summary_bytes: Option<u64>,
    html_bytes: Option<u64>,
}

/// Replays `trace` with [`POLICY`] into `dir/OUT.out`, with `args`.
fn replay(dir: &Path, trace: &Path, out: &str, args: &[&str]) -> Run {
    let policy = dir.join("p.yaml");
    fs::write(&policy, POLICY).unwrap();
    let out = dir.join(format!("{out}.out"));
    let o = weft()
        .args(["replay", "--quiet", "--policy"])
        .arg(&policy)
        .arg("--trace")
        .arg(trace)
        .arg("--out")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    let size = |name: &str| fs::metadata(out.join(name)).ok().map(|m| m.len());
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
        summary: fs::read(out.join("summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok()),
        summary_bytes: size("summary.json"),
        html_bytes: size("index.html"),
    }
}

/// At most the first `n` bytes of `s`, for assertion messages.
fn head(s: &str, n: usize) -> &str {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A 60-byte Ethernet frame: IPv4, UDP from 10.0.0.1:1000 to 10.0.0.2:2000 (checksums are
/// not checked).
fn frame() -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&2000u16.to_be_bytes());
    f.extend_from_slice(&26u16.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(60, 0);
    f
}

/// A capture of `n` interfaces (Ethernet, unnamed), then one packet on each.
fn interfaces(n: u32) -> Vec<u8> {
    let mut b = shb();
    for _ in 0..n {
        b.extend(idb(1, None, None));
    }
    for i in 0..n {
        b.extend(epb(i, 1_000 + i as u64, &frame()));
    }
    b
}

/// One interface more than `--max-interfaces` is refused at its block, with the file, the
/// block and its byte offset, the limit and the option that raises it, and nothing is kept;
/// at the limit the capture replays. (A capture of 1,000,000 interfaces took 63 s and 3.1 GB
/// and wrote a 186 MB summary.)
#[test]
fn a_capture_with_more_interfaces_than_the_limit_is_refused() {
    let dir = scratch("ifaces");
    let trace = dir.join("nine.pcapng");
    fs::write(&trace, interfaces(9)).unwrap();
    let r = replay(&dir, &trace, "eight", &["--max-interfaces", "8"]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    // The ninth interface is block 10: after the 28-byte section header and eight 20-byte
    // interface descriptions.
    for want in [
        "nine.pcapng: block 10 at byte 188: ",
        "8 interfaces",
        "--max-interfaces",
    ] {
        assert!(r.stderr.contains(want), "{want}: {}", head(&r.stderr, 4096));
    }
    assert!(r.stderr.len() < 1024, "{} bytes of stderr", r.stderr.len());
    assert!(
        r.summary_bytes.is_none(),
        "a refused capture keeps no summary"
    );
    let r = replay(&dir, &trace, "nine", &["--max-interfaces", "9"]);
    assert_eq!(r.code, 0, "{}", head(&r.stderr, 4096));
    assert_eq!(r.summary.unwrap()["packets"], 9);
    // The option's range: at least one interface.
    let r = replay(&dir, &trace, "zero", &["--max-interfaces", "0"]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    let _ = fs::remove_dir_all(&dir);
}

/// A block of total length 0 followed by a megabyte: the error names the block, its byte
/// offset and its length field, quotes at most 64 of its bytes, and fits in 2 KB of stderr.
/// (It printed the parser's whole buffer as numbers: 3.1 MB.)
#[test]
fn a_block_of_total_length_zero_gets_a_short_error() {
    let dir = scratch("zero");
    let mut b = shb();
    b.extend(idb(1, None, None));
    b.extend(epb(0, 1_000, &frame()));
    let at = b.len();
    b.extend_from_slice(&6u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend(std::iter::repeat_n(0x5a, 1 << 20));
    let trace = dir.join("zero.pcapng");
    fs::write(&trace, &b).unwrap();
    let r = replay(&dir, &trace, "zero", &[]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    assert!(r.stderr.len() < 2048, "{} bytes of stderr", r.stderr.len());
    for want in [
        format!("zero.pcapng: block 4 at byte {at}: "),
        "total length 0".to_string(),
        "06 00 00 00 00 00 00 00 5a 5a".to_string(),
    ] {
        assert!(r.stderr.contains(&want), "{want}: {}", r.stderr);
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A block whose length field is past the largest block read (64 MiB) is refused at once,
/// naming the block, its length and the limit, in a few hundred bytes.
#[test]
fn a_block_larger_than_the_largest_read_names_the_limit() {
    let dir = scratch("large");
    let mut b = shb();
    b.extend(idb(1, None, None));
    let at = b.len();
    b.extend_from_slice(&6u32.to_le_bytes());
    b.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
    b.extend(std::iter::repeat_n(0, 2 << 20));
    let trace = dir.join("large.pcapng");
    fs::write(&trace, &b).unwrap();
    let r = replay(&dir, &trace, "large", &[]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    assert!(r.stderr.len() < 1024, "{} bytes of stderr", r.stderr.len());
    for want in [
        format!("large.pcapng: block 3 at byte {at}: "),
        "4294967280 bytes".to_string(),
        "64 MiB".to_string(),
    ] {
        assert!(r.stderr.contains(&want), "{want}: {}", r.stderr);
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Blocks whose fields do not fit their total length: a process information block of total
/// length 4 (which `pcap-parser` 0.17 checks against its own 4-byte header and then takes 12
/// from: a panic, found by the `capture` fuzz target), one of length 12 (no room for its
/// process id) and an enhanced packet whose captured length runs past its block, each
/// followed by a megabyte. Each is refused with its block, not replayed as a capture cut
/// short (which they were), nor read to the end of the buffer.
#[test]
fn a_block_whose_fields_do_not_fit_is_refused() {
    let dir = scratch("fit");
    let mut start = shb();
    start.extend(idb(1, None, None));
    let at = start.len();
    let mut short = 0x8000_0001u32.to_le_bytes().to_vec();
    short.extend_from_slice(&4u32.to_le_bytes());
    let mut empty = 0x8000_0001u32.to_le_bytes().to_vec();
    empty.extend_from_slice(&12u32.to_le_bytes());
    empty.extend_from_slice(&12u32.to_le_bytes());
    let mut over = epb(0, 1, &frame());
    over[20..28].copy_from_slice(&[0xe8, 3, 0, 0, 0xe8, 3, 0, 0]);
    for (name, block, want) in [
        (
            "short",
            short,
            "total length 4, less than a block's 12 bytes",
        ),
        (
            "empty",
            empty,
            "total length 12 (its fields run past its total length)",
        ),
        (
            "over",
            over,
            "total length 92 (its fields run past its total length)",
        ),
    ] {
        let mut b = start.clone();
        b.extend(block);
        b.extend(std::iter::repeat_n(0, 1 << 20));
        let trace = dir.join(format!("{name}.pcapng"));
        fs::write(&trace, &b).unwrap();
        let r = replay(&dir, &trace, name, &[]);
        assert_eq!(r.code, 2, "{name}: {}", head(&r.stderr, 4096));
        assert!(r.stderr.len() < 1024, "{name}: {} bytes", r.stderr.len());
        let place = format!("{name}.pcapng: block 3 at byte {at}: malformed");
        assert!(
            r.stderr.contains(&place) && r.stderr.contains(want),
            "{name}: {}",
            r.stderr
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A 2 MB cell: refused at its line by the row limit (default 64 KiB), naming the limit and
/// the option, in a short message; with the row limit raised past it, refused by the cell
/// limit with an excerpt. A quoted value's line breaks do not restart the row's count. A
/// small `--max-trace-row-bytes` refuses a row just over it and takes one at it. Comment
/// lines do not count. (The cell was quoted whole: 50 MB of stderr for a 50 MB cell.)
#[test]
fn a_huge_csv_cell_is_refused_with_a_bounded_message() {
    let dir = scratch("csv");
    let big = "x".repeat(2 << 20);
    let trace = dir.join("t.csv");
    fs::write(
        &trace,
        format!("arrive_ps,bytes,dst\n0,100,10.0.0.1\n1,100,{big}\n2,100,\n"),
    )
    .unwrap();
    let r = replay(&dir, &trace, "row", &[]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    assert!(r.stderr.len() < 1024, "{} bytes of stderr", r.stderr.len());
    for want in ["t.csv:3: ", "65536 bytes", "--max-trace-row-bytes"] {
        assert!(r.stderr.contains(want), "{want}: {}", head(&r.stderr, 4096));
    }
    let r = replay(&dir, &trace, "cell", &["--max-trace-row-bytes", "4194304"]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    assert!(r.stderr.len() < 1024, "{} bytes of stderr", r.stderr.len());
    for want in ["t.csv:3: ", "`dst`", "2097152 bytes", "\"xxxxxxxx"] {
        assert!(r.stderr.contains(want), "{want}: {}", head(&r.stderr, 4096));
    }

    // A quoted value over many lines is one row.
    let lines = "x\n".repeat(40_000);
    fs::write(
        &trace,
        format!("arrive_ps,bytes,dst\n0,100,10.0.0.1\n1,100,\"{lines}\"\n"),
    )
    .unwrap();
    let r = replay(&dir, &trace, "quoted", &[]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    assert!(r.stderr.len() < 1024, "{} bytes of stderr", r.stderr.len());
    assert!(
        r.stderr.contains("t.csv:3: ") && r.stderr.contains("65536 bytes"),
        "{}",
        head(&r.stderr, 4096)
    );

    // A row of 64 bytes (its line end not counted) passes `--max-trace-row-bytes 64`; one
    // of 65 does not. A long comment line does not count.
    let row = |len: usize| format!("5,100,10.0.0.1{}", " ".repeat(len - 14));
    let comment = format!("# {}\n", "c".repeat(200_000));
    fs::write(
        &trace,
        format!("arrive_ps,bytes,dst\n{comment}{}\n", row(64)),
    )
    .unwrap();
    let r = replay(&dir, &trace, "at", &["--max-trace-row-bytes", "64"]);
    assert_eq!(r.code, 0, "{}", head(&r.stderr, 4096));
    assert_eq!(r.summary.unwrap()["packets"], 1);
    fs::write(&trace, format!("arrive_ps,bytes,dst\n{}\n", row(65))).unwrap();
    let r = replay(&dir, &trace, "over", &["--max-trace-row-bytes", "64"]);
    assert_eq!(r.code, 2, "{}", head(&r.stderr, 4096));
    assert!(
        r.stderr.contains("t.csv:2: ") && r.stderr.contains("64 bytes"),
        "{}",
        head(&r.stderr, 4096)
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A capture of 1,000 interfaces (under the default limit), named, 500 of them of a link
/// type weft does not read, and a `--tenant` for an interface it lacks: the table on
/// stdout, `summary.json`, `index.html` and the warnings on stderr all stay small, listing a
/// bounded number of interfaces and counting the rest; an interface with a tenant is listed
/// wherever it is.
#[test]
fn a_capture_of_many_interfaces_has_bounded_outputs() {
    let dir = scratch("many");
    let n = 1000u32;
    let mut b = shb();
    for i in 0..n {
        b.extend(idb(
            if i % 2 == 0 { 1 } else { 105 },
            None,
            Some(&format!("veth{i:04}")),
        ));
    }
    for i in 0..n {
        b.extend(epb(i, 1_000 + i as u64, &frame()));
    }
    let trace = dir.join("many.pcapng");
    fs::write(&trace, &b).unwrap();
    let r = replay(
        &dir,
        &trace,
        "many",
        &["--tenant", "a=veth0998", "--tenant", "b=nope"],
    );
    assert_eq!(r.code, 0, "{}", head(&r.stderr, 4096));
    assert!(
        r.stdout.len() < 8 << 10,
        "{} bytes of stdout",
        r.stdout.len()
    );
    assert!(
        r.stderr.len() < 4 << 10,
        "{} bytes of stderr",
        r.stderr.len()
    );
    let summary_bytes = r.summary_bytes.unwrap();
    assert!(
        summary_bytes < 32 << 10,
        "{summary_bytes} bytes of summary.json"
    );
    let html_bytes = r.html_bytes.unwrap();
    assert!(html_bytes < 32 << 10, "{html_bytes} bytes of index.html");
    let s = r.summary.unwrap();
    assert_eq!(s["packets"], 500, "{}", head(&s.to_string(), 4096));
    let listed = s["capture_interfaces"].as_array().unwrap();
    assert!(listed.len() <= 64, "{} interfaces listed", listed.len());
    let unlisted = &s["capture_interfaces_unlisted"];
    assert_eq!(
        unlisted["interfaces"].as_u64().unwrap() + listed.len() as u64,
        n as u64,
        "{unlisted}"
    );
    let records: u64 = listed.iter().map(|i| i["records"].as_u64().unwrap()).sum();
    assert_eq!(records + unlisted["records"].as_u64().unwrap(), n as u64);
    assert!(
        listed
            .iter()
            .any(|i| i["name"] == "veth0998" && i["tenant"] == 1),
        "{listed:?}"
    );
    assert!(r.stdout.contains("more interfaces"), "{}", r.stdout);
    assert!(
        r.stderr.contains("--tenant b=nope") && r.stderr.contains("more"),
        "{}",
        r.stderr
    );
    let _ = fs::remove_dir_all(&dir);
}

/// An interface name of 10 KB: kept and shown cut (to 128 bytes and `…`), matched to its
/// `--tenant` on the whole name.
#[test]
fn a_long_interface_name_is_cut_but_still_takes_its_tenant() {
    let dir = scratch("name");
    let name = "v".repeat(10_000);
    let mut b = shb();
    b.extend(idb(1, None, Some(&name)));
    b.extend(epb(0, 1_000, &frame()));
    let trace = dir.join("name.pcapng");
    fs::write(&trace, &b).unwrap();
    let tenant = format!("a={name}");
    let r = replay(&dir, &trace, "name", &["--tenant", &tenant]);
    assert_eq!(r.code, 0, "{}", head(&r.stderr, 4096));
    let s = r.summary.unwrap();
    let i = &s["capture_interfaces"][0];
    assert_eq!(i["tenant"], 1, "{}", head(&i.to_string(), 4096));
    let shown = i["name"].as_str().unwrap();
    assert!(shown.len() <= 128 + 3, "{} bytes", shown.len());
    assert!(shown.starts_with("vvvv") && shown.ends_with('…'), "{shown}");
    assert!(r.stdout.len() < 2048, "{} bytes of stdout", r.stdout.len());
    let _ = fs::remove_dir_all(&dir);
}
