//! `weft replay`: a trace replayed through the scheduling core in virtual time.
//!
//! Streaming: the trace is read row by row and departures are written as they happen, so
//! memory is bounded by what the scheduler holds, not by the trace's length.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use weft_core::classifier::{Field, PacketMeta};
use weft_core::policy::Program;
use weft_core::sched::link::{self, Event};
use weft_core::sched::reference::ReferenceEngine;
use weft_core::sched::{DropReason, Packet};

/// Columns a trace may carry besides `arrive_ps` and `bytes`.
const META_COLUMNS: &[&str] = &[
    "tenant",
    "vm",
    "cgroup",
    "tag",
    "sport",
    "dport",
    "app",
    "proto",
    "dscp",
    "src",
    "dst",
    "flow",
    "deadline_ps",
    "slack_ps",
];

/// A trace problem, with its line.
#[derive(Debug)]
pub struct TraceError {
    pub line: u64,
    pub message: String,
}

enum Col {
    Arrive,
    Bytes,
    Field(Field),
    Flow,
    Deadline,
    Slack,
}

fn columns(headers: &csv::StringRecord) -> Result<Vec<(usize, Col, String)>, TraceError> {
    let mut cols = Vec::new();
    let mut seen_arrive = false;
    let mut seen_bytes = false;
    for (i, h) in headers.iter().enumerate() {
        let name = h.trim();
        let col = match name {
            "arrive_ps" => {
                seen_arrive = true;
                Col::Arrive
            }
            "bytes" => {
                seen_bytes = true;
                Col::Bytes
            }
            "flow" => Col::Flow,
            "deadline_ps" => Col::Deadline,
            "slack_ps" => Col::Slack,
            other => match Field::from_name(other) {
                Some(f) => Col::Field(f),
                None => {
                    return Err(TraceError {
                        line: 1,
                        message: format!(
                            "unknown column `{other}`; columns are arrive_ps, bytes and any of {}",
                            META_COLUMNS.join(", ")
                        ),
                    })
                }
            },
        };
        cols.push((i, col, name.to_string()));
    }
    if !seen_arrive || !seen_bytes {
        return Err(TraceError {
            line: 1,
            message: "the header must name `arrive_ps` and `bytes`".into(),
        });
    }
    Ok(cols)
}

fn parse_row(
    rec: &csv::StringRecord,
    cols: &[(usize, Col, String)],
    id: u64,
    line: u64,
) -> Result<(u64, Packet), TraceError> {
    let err = |message: String| TraceError { line, message };
    let mut t = 0u64;
    let mut meta = PacketMeta::default();
    let mut pkt = Packet::new(id, 0, meta);
    for (i, col, name) in cols {
        let v = rec.get(*i).unwrap_or("").trim();
        if v.is_empty() {
            continue;
        }
        let int = || -> Result<u64, TraceError> {
            v.parse::<u64>()
                .map_err(|_| err(format!("`{name}` = `{v}` is not a non-negative integer")))
        };
        match col {
            Col::Arrive => t = int()?,
            Col::Bytes => {
                let b = int()?;
                if b == 0 || b > u32::MAX as u64 {
                    return Err(err(format!("`bytes` = {b} is out of range 1..=4294967295")));
                }
                pkt.bytes = b as u32;
            }
            Col::Flow => pkt.flow = int()?,
            Col::Deadline => pkt.deadline_ps = Some(int()?),
            Col::Slack => pkt.slack_ps = Some(int()?),
            Col::Field(f) => meta.set_field(f.name(), v).map_err(err)?,
        }
    }
    if pkt.bytes == 0 {
        return Err(err("`bytes` is empty".into()));
    }
    pkt.meta = meta;
    Ok((t, pkt))
}

/// Per-leaf statistics.
struct LeafStats {
    delay_ps: Histogram<u64>,
    first_ps: u64,
    last_ps: u64,
}

/// Runs the replay; returns the summary JSON.
pub fn replay(
    prog: Arc<Program>,
    trace: &Path,
    out: &Path,
    progress: bool,
) -> Result<Value, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let file = File::open(trace).map_err(|e| format!("cannot read {}: {e}", trace.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut rdr = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(file);
    let trace_name = trace.display().to_string();
    let headers = rdr
        .headers()
        .map_err(|e| format!("{trace_name}:1: {e}"))?
        .clone();
    let cols = columns(&headers).map_err(|e| format!("{trace_name}:{}: {}", e.line, e.message))?;
    let dep_path: PathBuf = out.join("departures.csv");
    let drop_path: PathBuf = out.join("drops.csv");
    let mut deps = BufWriter::new(
        File::create(&dep_path).map_err(|e| format!("cannot write {}: {e}", dep_path.display()))?,
    );
    let mut drops = BufWriter::new(
        File::create(&drop_path)
            .map_err(|e| format!("cannot write {}: {e}", drop_path.display()))?,
    );
    let _ = writeln!(deps, "depart_ps,id,leaf,flow,bytes");
    let _ = writeln!(drops, "arrive_ps,id,reason");

    let bar = progress.then(|| {
        let b = indicatif::ProgressBar::new(size);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "replay {bar:40} {bytes}/{total_bytes} {msg} ({eta})",
            )
            .expect("template"),
        );
        b
    });

    // Rows stream through an iterator; a bad row stops the replay with its line.
    let mut error: Option<String> = None;
    let mut last_t = 0u64;
    let mut rows = 0u64;
    let mut record = csv::StringRecord::new();
    let arrivals = std::iter::from_fn(|| {
        if error.is_some() {
            return None;
        }
        match rdr.read_record(&mut record) {
            Ok(false) => None,
            Ok(true) => {
                let line = record.position().map_or(rows + 2, |p| p.line());
                match parse_row(&record, &cols, rows, line) {
                    Ok((t, _)) if t < last_t => {
                        error = Some(format!(
                            "{trace_name}:{line}: arrive_ps {t} is earlier than the previous row's {last_t}; sort the trace by arrive_ps"
                        ));
                        None
                    }
                    Ok((t, p)) => {
                        last_t = t;
                        rows += 1;
                        if let Some(b) = &bar {
                            if rows % 65_536 == 0 {
                                b.set_position(record.position().map_or(0, |p| p.byte()));
                                b.set_message(format!("{rows} packets"));
                            }
                        }
                        Some((t, p))
                    }
                    Err(e) => {
                        error = Some(format!("{trace_name}:{}: {}", e.line, e.message));
                        None
                    }
                }
            }
            Err(e) => {
                error = Some(format!("{trace_name}: {e}"));
                None
            }
        }
    });

    let mut engine = ReferenceEngine::new(prog.clone());
    let mut stats: Vec<LeafStats> = (0..prog.leaves.len())
        .map(|_| LeafStats {
            delay_ps: Histogram::new(3).expect("histogram"),
            first_ps: u64::MAX,
            last_ps: 0,
        })
        .collect();
    let mut sent = 0u64;
    let mut dropped = 0u64;
    let mut end_ps = 0u64;
    let leaf_names: Vec<String> = prog
        .leaves
        .iter()
        .map(|&n| prog.nodes[n as usize].name.clone())
        .collect();
    link::run(&mut engine, &prog.link, arrivals, u64::MAX, |ev| match ev {
        Event::Sent { at_ps, departure } => {
            sent += 1;
            end_ps = at_ps;
            let _ = writeln!(
                deps,
                "{at_ps},{},{},{},{}",
                departure.id, leaf_names[departure.leaf as usize], departure.flow, departure.bytes
            );
            let s = &mut stats[departure.leaf as usize];
            let _ = s
                .delay_ps
                .record(at_ps.saturating_sub(departure.enqueued_ps));
            s.first_ps = s.first_ps.min(at_ps);
            s.last_ps = s.last_ps.max(at_ps);
        }
        Event::Dropped { at_ps, id, reason } => {
            dropped += 1;
            let _ = writeln!(drops, "{at_ps},{id},{}", reason.name());
        }
        // Traces carry no updates.
        Event::Rejected { .. } => {}
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    deps.flush().map_err(|e| e.to_string())?;
    drops.flush().map_err(|e| e.to_string())?;
    if let Some(e) = error {
        return Err(e);
    }
    let duration_ps = end_ps.max(1);
    let counters = &engine.stats.nodes;
    let node_json = |n: usize| -> Value {
        let c = counters[n];
        let mut d = Map::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            d.insert(r.name().into(), json!(c.drops[i]));
        }
        json!({
            "packets": c.packets,
            "bytes": c.bytes,
            "drops": d,
            "mean_bps": (c.bytes as f64 * 8.0 / (duration_ps as f64 / 1e12)).round(),
        })
    };
    let mut leaves = Map::new();
    for (l, &n) in prog.leaves.iter().enumerate() {
        let mut v = node_json(n as usize);
        let h = &stats[l].delay_ps;
        if !h.is_empty() {
            v["queueing_delay_ps"] = json!({
                "p50": h.value_at_quantile(0.5),
                "p90": h.value_at_quantile(0.9),
                "p99": h.value_at_quantile(0.99),
                "max": h.max(),
                "mean": h.mean().round(),
            });
        }
        leaves.insert(prog.nodes[n as usize].name.clone(), v);
    }
    let mut nodes = Map::new();
    for (n, node) in prog.nodes.iter().enumerate() {
        if node.leaf.is_none() {
            nodes.insert(node.name.clone(), node_json(n));
        }
    }
    Ok(json!({
        "policy": prog.name,
        "trace": trace_name,
        "engine": "reference",
        "link_bps": prog.link.rate_bps,
        "packets": rows,
        "sent": sent,
        "dropped": dropped,
        "duration_ps": end_ps,
        "leaves": leaves,
        "nodes": nodes,
    }))
}
