//! The summary's figures as text for people, shared by `index.html` and a caller's table
//! (`weft replay` prints one): spans, rates, limits and delays in their units, and the rows
//! of a long list worth showing.
//!
//! Invariants: functions of the summary alone; a long list is cut to its busiest rows, in
//! policy order. Cost: one sort per list cut.

use crate::delays;
use crate::summary::CaptureInterface;
use weft_core::units::format_rate;
use weft_sim::report::number;

/// A span of picoseconds in the largest unit it reaches, to 3 decimals: `1.950 ms`,
/// `1.859 us`, `640 ps`.
pub fn span_text(ps: u64) -> String {
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
pub fn rates_note(span_ps: u64) -> String {
    format!(
        "mean Mbit/s: over the whole {}, the drain of every queue included; active Mbit/s:\n\
         over each row's own span, from its first packet's arrival to the end of its last frame",
        span_text(span_ps)
    )
}

/// A shaping class's limit in Mbit/s, to a tenth (`10,000.0`); a limit below 0.1 Mbit/s
/// (which would read 0.0) with its own unit (`50kbit/s`, `1bit/s`).
pub fn limit_mbit(bps: u64) -> String {
    let m = bps as f64 / 1e6;
    if m < 0.1 {
        format!("{}/s", format_rate(bps))
    } else {
        number(m, 1)
    }
}

/// A queueing-delay figure (ps) in microseconds, or `-` without packets.
pub fn delay_us(d: Option<&delays::Summary>, q: fn(&delays::Summary) -> u64) -> String {
    d.map_or("-".to_string(), |d| number(q(d) as f64 / 1e6, 3))
}

/// The rows of a summary table (leaves or shaping classes) it shows, and what it leaves out
/// (`summary.json` has every row).
pub struct Shown<'a, T> {
    /// In policy order.
    pub rows: Vec<&'a (String, T)>,
    /// Rows left out that saw no packet and no drop.
    pub idle: usize,
    /// Busy rows left out: quieter than the `MAX_ROWS` shown.
    pub quieter: usize,
}

/// Rows of a summary table worth showing: all of them in a policy of at most 32
/// (`ALL_ROWS`), else those that saw a packet or a drop (`offered`: packets sent and
/// dropped), and of those at most 64 (`MAX_ROWS`): the busiest (ties: the first in the
/// policy), shown in policy order.
pub fn shown_rows<T>(rows: &[(String, T)], offered: impl Fn(&T) -> u64) -> Shown<'_, T> {
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
    pub fn left_out(&self, what: &str, idle: &str) -> Option<String> {
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
pub fn interface_name(i: &CaptureInterface) -> String {
    i.name
        .as_ref()
        .map_or(format!("interface {}", i.index), String::clone)
}

/// A capture interface's tenant id and name, if `--tenant` gave it one.
pub fn interface_tenant(i: &CaptureInterface) -> Option<(u32, &str)> {
    Some((i.tenant?, i.tenant_name.as_deref()?))
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
