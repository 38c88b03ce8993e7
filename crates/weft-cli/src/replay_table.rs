//! `weft replay`'s table on stdout: the summary's leaves, nodes, shaping classes and a
//! capture's interfaces, with their rates, drops and queueing delays.
//!
//! Invariants: a function of the summary alone; long lists are cut to their busiest rows
//! (with what the rest add up to), so the table stays readable for 100,000 classes. Cost:
//! one sort per list.

use super::{delays, out, replay, Failure};
use replay::CaptureInterface;
use weft_core::sched::DropReason;
use weft_core::units::format_rate;

/// A span of picoseconds in the largest unit it reaches, to 3 decimals: `1.950 ms`,
/// `1.859 us`, `640 ps`.
fn span_text(ps: u64) -> String {
    for (unit, scale) in [("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)] {
        // (999.9996 us reads 1.000 ms, not 1000.000 us.)
        if ps as f64 >= scale * 0.9995 {
            return format!("{:.3} {unit}", ps as f64 / scale);
        }
    }
    format!("{ps} ps")
}

/// What the rate columns of a replay's tables are measured over: `mean` over the whole span
/// (`span_ps`, the drain of every queue included), `active` over each row's own span.
pub(super) fn rates_note(span_ps: u64) -> String {
    format!(
        "mean Mbit/s: over the whole {}, the drain of every queue included; active Mbit/s:\n\
         over each row's own span, from its first packet's arrival to the end of its last frame",
        span_text(span_ps)
    )
}

/// A shaping class's limit in Mbit/s, to a tenth (`10,000.0`); a limit below 0.1 Mbit/s
/// (which would read 0.0) with its own unit (`50kbit/s`, `1bit/s`).
pub(super) fn limit_mbit(bps: u64) -> String {
    let m = bps as f64 / 1e6;
    if m < 0.1 {
        format!("{}/s", format_rate(bps))
    } else {
        out::number(m, 1)
    }
}

/// A queueing-delay figure (ps) in microseconds, or `-` without packets.
pub(super) fn delay_us(d: Option<&delays::Summary>, q: fn(&delays::Summary) -> u64) -> String {
    d.map_or("-".to_string(), |d| out::number(q(d) as f64 / 1e6, 3))
}

/// The rows of a summary table (leaves or shaping classes) it shows, and what it leaves out
/// (`summary.json` has every row).
pub(super) struct Shown<'a, T> {
    /// In policy order.
    pub(super) rows: Vec<&'a (String, T)>,
    /// Rows left out that saw no packet and no drop.
    pub(super) idle: usize,
    /// Busy rows left out: quieter than the `MAX_ROWS` shown.
    pub(super) quieter: usize,
}

/// Rows of a summary table worth showing: all of them in a policy of at most 32
/// (`ALL_ROWS`), else those that saw a packet or a drop (`offered`: packets sent and
/// dropped), and of those at most 64 (`MAX_ROWS`): the busiest (ties: the first in the
/// policy), shown in policy order.
pub(super) fn shown_rows<T>(rows: &[(String, T)], offered: impl Fn(&T) -> u64) -> Shown<'_, T> {
    /// Up to this many rows, idle ones are shown too (they say something in a small policy).
    const ALL_ROWS: usize = 32;
    /// At most this many busy rows: a table of 10,000 SENIC classes is for `summary.json`.
    const MAX_ROWS: usize = 64;
    let mut busy: Vec<(usize, &(String, T))> = rows
        .iter()
        .enumerate()
        .filter(|(_, (_, v))| rows.len() <= ALL_ROWS || offered(v) > 0)
        .collect();
    let idle = rows.len() - busy.len();
    let quieter = busy.len().saturating_sub(MAX_ROWS);
    if quieter > 0 {
        busy.sort_by_key(|&(i, (_, v))| (std::cmp::Reverse(offered(v)), i));
        busy.truncate(MAX_ROWS);
        busy.sort_by_key(|&(i, _)| i);
    }
    Shown {
        rows: busy.into_iter().map(|(_, r)| r).collect(),
        idle,
        quieter,
    }
}

impl<T> Shown<'_, T> {
    /// What the table leaves out, e.g. "38 leaves without packets or drops" or "9932 leaves
    /// with no more packets sent and dropped than the 64 shown"; `None` if nothing.
    /// `what`: the rows' plural noun; `idle`: what the idle ones lack.
    pub(super) fn left_out(&self, what: &str, idle: &str) -> Option<String> {
        let mut parts = Vec::new();
        if self.idle > 0 {
            parts.push(format!("{} {what} {idle}", self.idle));
        }
        if self.quieter > 0 {
            parts.push(format!(
                "{} {what} with no more packets sent and dropped than the {} shown",
                self.quieter,
                self.rows.len()
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A capture interface of the summary (`capture_interfaces`): its name, or `interface N`.
pub(super) fn interface_name(i: &CaptureInterface) -> String {
    i.name
        .as_ref()
        .map_or(format!("interface {}", i.index), String::clone)
}

/// A capture interface's tenant id and name, if `--tenant` gave it one.
pub(super) fn interface_tenant(i: &CaptureInterface) -> Option<(u32, &str)> {
    Some((i.tenant?, i.tenant_name.as_deref()?))
}

/// The replay summary as a table: one row per leaf, then one per shaping class (in a large
/// policy, only the busiest: [`shown_rows`]).
pub(super) fn print_summary(summary: &replay::ReplaySummary) -> Result<(), Failure> {
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

#[cfg(test)]
mod tests {
    /// A limit below 0.1 Mbit/s keeps its digits (a 1 bit/s class read 0.0).
    #[test]
    fn small_limits_keep_their_digits() {
        assert_eq!(super::limit_mbit(10_000_000_000), "10,000.0");
        assert_eq!(super::limit_mbit(100_000), "0.1");
        assert_eq!(super::limit_mbit(1), "1bit/s");
        assert_eq!(super::limit_mbit(50_000), "50kbit/s");
        assert_eq!(super::limit_mbit(1_500), "1500bit/s");
    }
}
