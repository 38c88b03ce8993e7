//! `weft replay`'s table on stdout: the summary's leaves, nodes, shaping classes and a
//! capture's interfaces, with their rates, drops and queueing delays.
//!
//! Invariants: a function of the summary alone; long lists are cut to their busiest rows
//! (with what the rest add up to), so the table stays readable for 100,000 classes. Cost:
//! one sort per list.

use super::{out, Failure};
use weft_core::sched::DropReason;
use weft_replay::text::{
    delay_us, interface_name, interface_tenant, limit_mbit, rates_note, shown_rows, span_text,
};

/// The replay summary as a table: one row per leaf, then one per shaping class (in a large
/// policy, only the busiest: [`shown_rows`]).
pub(super) fn print_summary(summary: &weft_replay::ReplaySummary) -> Result<(), Failure> {
    let s = &summary.head;
    // Drops by reason, the nonzero ones: "3 dropped (unclassified 2, leaf_packets 1)".
    let reasons: Vec<String> = DropReason::ALL
        .iter()
        .zip(s.drops.0)
        .filter(|&(_, n)| n > 0)
        .map(|(r, n)| format!("{} {n}", r.name()))
        .collect();
    let why = if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join(", "))
    };
    // Packets the clock ran out on, when there are any (packets = sent + dropped + held).
    let held = match s.held_at_end {
        0 => String::new(),
        n => format!(", {n} held at the end"),
    };
    // The span the mean rates are over: the first arrival to the end of the last frame (not
    // `end_ps`, a time on the trace's clock: a trace may start at 1 s).
    let span = match s.packets {
        0 => String::new(),
        _ => format!(", {} from the first arrival", span_text(s.span_ps)),
    };
    out::outln!(
        "{} packets, {} sent, {} dropped{why}{held}{span}",
        out::count(s.packets),
        out::count(s.sent),
        out::count(s.dropped),
    )?;
    // A capture's interfaces: "capture: ta (tenant 1, a): 1100 records, tb ...".
    if let Some(ifaces) = &s.capture_interfaces {
        let mut list: Vec<String> = ifaces
            .iter()
            .map(|i| {
                let tenant = interface_tenant(i)
                    .map_or(String::new(), |(t, n)| format!(" (tenant {t}, {n})"));
                format!("{}{tenant}: {} records", interface_name(i), i.records)
            })
            .collect();
        // The interfaces the summary does not list (see `capture::listed`).
        if let Some(more) = s.capture_interfaces_unlisted.as_ref() {
            if more.interfaces > 0 {
                list.push(format!(
                    "and {} more interfaces: {} records",
                    more.interfaces, more.records
                ));
            }
        }
        out::outln!("capture: {}", list.join(", "))?;
    }
    out::outln!(
        "{:<24} {:>10} {:>14} {:>12} {:>13} {:>8} {:>12} {:>12}",
        "leaf",
        "packets",
        "bytes",
        "mean Mbit/s",
        "active Mbit/s",
        "drops",
        "p50 delay us",
        "p99 delay us"
    )?;
    let leaves = shown_rows(&summary.leaves, |v| v.packets + v.dropped);
    for (name, v) in &leaves.rows {
        let d = v.queueing_delay_ps.as_ref();
        out::outln!(
            "{:<24} {:>10} {:>14} {:>12} {:>13} {:>8} {:>12} {:>12}",
            name,
            out::count(v.packets),
            out::count(v.bytes),
            out::number(v.mean_bps as f64 / 1e6, 1),
            out::number(v.active_bps as f64 / 1e6, 1),
            out::count(v.dropped),
            delay_us(d, |d| d.p50),
            delay_us(d, |d| d.p99)
        )?;
    }
    if let Some(out) = leaves.left_out("leaves", "without packets or drops") {
        out::outln!("(not shown: {out}; summary.json has every leaf)")?;
    }
    let shapers = shown_rows(&summary.shapers, |v| v.packets);
    if !shapers.rows.is_empty() {
        out::outln!(
            "{:<24} {:>10} {:>14} {:>12} {:>13} {:>12} {:>12} {:>12}",
            "shaping class",
            "packets",
            "bytes",
            "mean Mbit/s",
            "active Mbit/s",
            "limit Mbit/s",
            "p50 delay us",
            "p99 delay us"
        )?;
        let mut updated = false;
        for (name, v) in &shapers.rows {
            // The limit at the end, marked when `--update` changed it.
            let (limit, mark) = match v.rate_bps_at_end {
                Some(r) => {
                    updated = true;
                    (r, "*")
                }
                None => (v.rate_bps, " "),
            };
            let d = v.queueing_delay_ps.as_ref();
            out::outln!(
                "{:<24} {:>10} {:>14} {:>12} {:>13} {:>11}{mark} {:>12} {:>12}",
                name,
                out::count(v.packets),
                out::count(v.bytes),
                out::number(v.mean_bps as f64 / 1e6, 1),
                out::number(v.active_bps as f64 / 1e6, 1),
                limit_mbit(limit),
                delay_us(d, |d| d.p50),
                delay_us(d, |d| d.p99)
            )?;
        }
        if updated {
            out::outln!("(* the limit at the end, changed by --update; summary.json: rate_bps is the policy's)")?;
        }
    }
    if let Some(out) = shapers.left_out("shaping classes", "without packets") {
        out::outln!("(not shown: {out}; summary.json has every one)")?;
    }
    if s.sent > 0 {
        out::outln!("({})", rates_note(s.span_ps))?;
    }
    Ok(())
}
