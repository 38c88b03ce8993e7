//! The metrics endpoint's whole text ([`weft_nic::ctl::prometheus`]), parsed as a scraper
//! parses Prometheus's text format (0.0.4), for stats with every section filled in and
//! names that need escaping: every sample's family has one `# HELP` and one `# TYPE` line
//! before its samples, and its samples together; a counter's name ends in `_total` and
//! only a counter's does; no series is given twice; label values come back as the names
//! they were made from; tenants' series are labelled by the `--tenant` names only.

use std::collections::{BTreeMap, HashMap, HashSet};

use weft_core::sched::DropReason;
use weft_nic::ctl::prometheus;
use weft_nic::iface::Reject;
use weft_nic::stats::{
    AfPacketPort, AfXdpPort, NodeStats, PortStats, ShaperStats, Stats, TenantStats, XdpKernelStats,
    TENANT_DROPS,
};

/// One sample line: its name, labels (unescaped) and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A family's metadata and where its samples are.
#[derive(Debug, Default)]
struct Family {
    help: Option<String>,
    kind: Option<String>,
    /// Line numbers of its samples.
    lines: Vec<usize>,
}

fn is_name(s: &str, colon: bool) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || (colon && f == ':'))
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || (colon && ch == ':'))
}

/// A HELP text or label value with its escapes undone: `\\`, `\n` (and `\"` in a label
/// value); any other backslash is an error.
fn unescape(s: &str, quote: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut c = s.chars();
    while let Some(ch) = c.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match c.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quote => out.push('"'),
            other => return Err(format!("bad escape \\{other:?} in {s:?}")),
        }
    }
    Ok(out)
}

/// `{a="x",b="y"}` (after the name) into its labels, and the rest of the line.
fn labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut out = BTreeMap::new();
    let Some(mut rest) = s.strip_prefix('{') else {
        return Ok((out, s));
    };
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((out, r));
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("no `=` in {rest:?}"))?;
        let name = &rest[..eq];
        if !is_name(name, false) {
            return Err(format!("bad label name {name:?}"));
        }
        let v = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or_else(|| format!("label {name} unquoted"))?;
        // The closing quote: the first not escaped.
        let mut end = None;
        let mut escaped = false;
        for (i, ch) in v.char_indices() {
            match (escaped, ch) {
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let end = end.ok_or_else(|| format!("label {name} not closed"))?;
        let value = unescape(&v[..end], true)?;
        if out.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &v[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// The text's families and samples; `Err` for a line that is not in the format, a family's
/// HELP or TYPE given twice or after its samples, and a family whose samples are apart.
fn parse(text: &str) -> Result<(BTreeMap<String, Family>, Vec<Sample>), String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut samples = Vec::new();
    let mut last: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", i + 1);
        if let Some(c) = line.strip_prefix('#') {
            let mut words = c.trim_start().splitn(3, ' ');
            let (key, name, rest) = (words.next(), words.next(), words.next());
            let (Some(key @ ("HELP" | "TYPE")), Some(name)) = (key, name) else {
                continue; // a comment
            };
            if !is_name(name, true) {
                return Err(at(format!("bad metric name {name:?}")));
            }
            let f = families.entry(name.to_string()).or_default();
            if !f.lines.is_empty() {
                return Err(at(format!("{key} after {name}'s samples")));
            }
            let rest = rest.unwrap_or_default().to_string();
            let slot = if key == "HELP" {
                &mut f.help
            } else {
                &mut f.kind
            };
            if slot.replace(rest).is_some() {
                return Err(at(format!("a second {key} line for {name}")));
            }
            if key == "HELP" {
                unescape(f.help.as_deref().unwrap_or_default(), false).map_err(at)?;
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..end];
        if !is_name(name, true) {
            return Err(at(format!("bad metric name {name:?}")));
        }
        let (labels, rest) = labels(&line[end..]).map_err(at)?;
        let mut fields = rest.split_whitespace();
        let value: f64 = fields
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| at("no number".into()))?;
        if fields.next().is_some_and(|t| t.parse::<i64>().is_err()) || fields.next().is_some() {
            return Err(at("more than a value and a timestamp".into()));
        }
        let f = families.entry(name.to_string()).or_default();
        if last.as_deref() != Some(name) && !f.lines.is_empty() {
            return Err(at(format!("{name}'s samples are not together")));
        }
        f.lines.push(i + 1);
        last = Some(name.to_string());
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok((families, samples))
}

/// Names a scraper would have to escape every way.
const NASTY: [&str; 3] = ["q\"uote", "back\\slash", "line\nfeed"];

/// Stats with every section filled in, every count different, both kinds of port.
fn stats() -> Stats {
    let mut next = 0u64;
    let mut n = || {
        next += 1;
        next
    };
    let mut s = Stats {
        ok: true,
        policy: "p".into(),
        generation: 2,
        rate_bps: 1_000_000_000,
        ..Stats::default()
    };
    for name in ["root"].into_iter().chain(NASTY) {
        s.nodes.push(NodeStats {
            id: s.nodes.len(),
            name: name.into(),
            algo: "wfq".into(),
            packets: n(),
            bytes: n(),
            drops: [n(), n(), n(), n(), n()],
            rate_bps: 1.5e6,
            ..NodeStats::default()
        });
        s.shapers.push(ShaperStats {
            id: s.shapers.len(),
            name: format!("{name}-cap"),
            limit_bps: n(),
            burst_bytes: n(),
            packets: n(),
            bytes: n(),
            rate_bps: 2e6,
        });
    }
    for (i, name) in ["a"].into_iter().chain(NASTY).enumerate() {
        let mut t = TenantStats {
            tenant: i + 1,
            name: name.into(),
            iface: format!("t{}", i + 1),
            rx_frames: n(),
            rx_bytes: n(),
            macs: n(),
            queues: n(),
            buffers: n(),
            ..TenantStats::default()
        };
        t.drops = t.drops.map(|_| n());
        t.rejects[Reject::ForeignQueue as usize] = n();
        s.tenants.push(t);
    }
    let mut d = serde_json::to_value(&s.dataplane).unwrap();
    for (_, v) in d.as_object_mut().unwrap() {
        if v.is_u64() {
            *v = n().into();
        }
    }
    s.dataplane = serde_json::from_value(d).unwrap();
    s.dataplane.uplink_up = true;
    s.iface.posted = n();
    s.iface.rejects = s.iface.rejects.map(|_| n());
    s.ports = vec![
        PortStats::AfPacket(AfPacketPort {
            iface: "t1".into(),
            tx_frames: n(),
            rx_kernel_drops: n(),
            ..AfPacketPort::default()
        }),
        PortStats::AfXdp(AfXdpPort {
            iface: "up\"link".into(),
            queues: 2,
            tx_frames: n(),
            kernel: XdpKernelStats {
                rx_ring_full: n(),
                ..XdpKernelStats::default()
            },
            ..AfXdpPort::default()
        }),
        PortStats::AfXdp(AfXdpPort {
            iface: "up2".into(),
            tx_frames: n(),
            ..AfXdpPort::default()
        }),
    ];
    s
}

#[test]
fn the_whole_text_parses_with_help_and_type_for_every_family() {
    let s = stats();
    let text = prometheus(&s);
    let (families, samples) = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(samples.len() > 200, "{}", samples.len());

    // Every sample's family: HELP (not empty) and TYPE, a counter's name and only a
    // counter's ending in `_total`.
    for (name, f) in &families {
        assert!(!f.lines.is_empty(), "{name} declared without a sample");
        let help = f
            .help
            .as_deref()
            .unwrap_or_else(|| panic!("{name}: no HELP"));
        assert!(!help.trim().is_empty(), "{name}: empty HELP");
        match f.kind.as_deref() {
            Some("counter") => assert!(name.ends_with("_total"), "counter {name}"),
            Some("gauge") => assert!(!name.ends_with("_total"), "gauge {name}"),
            other => panic!("{name}: TYPE {other:?}"),
        }
    }

    // No series twice; counters count, so none is negative.
    let mut series = HashSet::new();
    for x in &samples {
        assert!(
            series.insert((x.name.clone(), x.labels.clone())),
            "{} {:?} given twice",
            x.name,
            x.labels
        );
        if families[&x.name].kind.as_deref() == Some("counter") {
            assert!(x.value >= 0.0, "{x:?}");
        }
    }

    // Label values come back as the names they were made from.
    let values = |label: &str| -> HashSet<String> {
        samples
            .iter()
            .filter_map(|x| x.labels.get(label).cloned())
            .collect()
    };
    let names = |v: Vec<&str>| -> HashSet<String> { v.into_iter().map(String::from).collect() };
    assert_eq!(
        values("node"),
        names(s.nodes.iter().map(|n| n.name.as_str()).collect())
    );
    assert_eq!(
        values("shaper"),
        names(s.shapers.iter().map(|c| c.name.as_str()).collect())
    );
    // Tenants' series: labelled by the `--tenant` names and nothing else.
    assert_eq!(
        values("tenant"),
        names(s.tenants.iter().map(|t| t.name.as_str()).collect())
    );
    let ifaces: HashSet<String> = s
        .tenants
        .iter()
        .map(|t| t.iface.clone())
        .chain(s.ports.iter().map(|p| p.iface().to_string()))
        .collect();
    assert_eq!(values("iface"), ifaces);
    let mut reasons: HashSet<String> = names(DropReason::ALL.iter().map(|r| r.name()).collect());
    reasons.extend(TENANT_DROPS.map(String::from));
    reasons.extend(Reject::ALL.map(|r| r.name().to_string()));
    assert!(
        values("reason").is_subset(&reasons),
        "{:?}",
        values("reason")
    );

    // Per tenant: its drops and its refusals by reason, every reason, with their counts.
    let by_tenant = |family: &str| -> HashMap<(String, String), f64> {
        samples
            .iter()
            .filter(|x| x.name == family)
            .map(|x| {
                (
                    (x.labels["tenant"].clone(), x.labels["reason"].clone()),
                    x.value,
                )
            })
            .collect()
    };
    let drops = by_tenant("weft_tenant_drops_total");
    let rejects = by_tenant("weft_tenant_rejects_total");
    for t in &s.tenants {
        for (r, &v) in TENANT_DROPS.iter().zip(&t.drops) {
            assert_eq!(drops[&(t.name.clone(), r.to_string())], v as f64);
        }
        for (r, &v) in Reject::ALL.iter().zip(&t.rejects) {
            assert_eq!(rejects[&(t.name.clone(), r.name().to_string())], v as f64);
        }
    }
    assert_eq!(rejects.len(), s.tenants.len() * Reject::ALL.len());

    // The series the old names' users look for.
    for (family, labels, value) in [
        (
            "weft_dataplane_tx_frames_total",
            vec![],
            s.dataplane.tx_frames,
        ),
        (
            "weft_dataplane_queues_live",
            vec![],
            s.dataplane.queues_live,
        ),
        ("weft_dataplane_uplink_up", vec![], 1),
        ("weft_iface_posted_total", vec![], s.iface.posted),
        ("weft_port_tx_frames_total", vec![("iface", "t1")], 0),
        ("weft_port_queues", vec![("iface", "up\"link")], 2),
        (
            "weft_port_kernel_rx_ring_full_total",
            vec![("iface", "up\"link")],
            0,
        ),
    ] {
        let x = samples
            .iter()
            .find(|x| {
                x.name == family
                    && labels
                        .iter()
                        .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .unwrap_or_else(|| panic!("no {family} {labels:?}:\n{text}"));
        if value > 0 {
            assert_eq!(x.value, value as f64, "{family}");
        }
    }
}

/// Time is exported in Prometheus's base unit: the uplink's down time, `uplink_down_ms` in
/// `ctl stats`, as `weft_dataplane_uplink_down_seconds_total` in seconds (exact to the
/// millisecond), and no family is named after another unit of time.
#[test]
fn the_uplinks_down_time_is_exported_in_seconds() {
    let mut s = stats();
    for (ms, text) in [
        (0, "0.000"),
        (7, "0.007"),
        (2_345, "2.345"),
        (86_400_123, "86400.123"),
    ] {
        s.dataplane.uplink_down_ms = ms;
        let prom = prometheus(&s);
        let (families, samples) = parse(&prom).unwrap_or_else(|e| panic!("{e}\n{prom}"));
        let family = "weft_dataplane_uplink_down_seconds_total";
        assert_eq!(families[family].kind.as_deref(), Some("counter"));
        assert!(
            prom.lines().any(|l| l == format!("{family} {text}")),
            "{ms} ms: no `{family} {text}` in:\n{prom}"
        );
        let x = samples.iter().find(|x| x.name == family).unwrap();
        assert_eq!(x.value, ms as f64 / 1000.0, "{ms} ms");
        for name in families.keys() {
            assert!(
                !["_ms", "_us", "_ns", "_millis"]
                    .iter()
                    .any(|u| name.contains(&format!("{u}_")) || name.ends_with(u)),
                "{name} is named after a unit other than seconds"
            );
        }
    }
}

/// The parser itself refuses what the format does not allow.
#[test]
fn the_parser_refuses_what_a_scraper_would() {
    let ok = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\\\"\\\\\\n\"} 1\n";
    let (_, samples) = parse(ok).unwrap();
    assert_eq!(samples[0].labels["x"], "1\"\\\n");
    for bad in [
        "a_total{x=\"1\\t\"} 1\n",
        "a_total{x=\"1} 1\n",
        "a_total{x=1} 1\n",
        "a_total{x=\"1\",x=\"2\"} 1\n",
        "a_total 1\nb 2\na_total{x=\"1\"} 3\n",
        "a 1\n# TYPE a gauge\n",
        "# TYPE a gauge\n# TYPE a counter\na 1\n",
        "a one\n",
        "1a 1\n",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} passed");
    }
}
