//! The replay's `index.html`: the summary as a page (the run's head figures, a table per leaf,
//! node and shaping class) with links to the other outputs.
//!
//! Invariants: every value from the policy or the trace is escaped
//! ([`esc`](weft_sim::report::esc)); the page is a function of the summary alone. Cost: linear in
//! the number of leaves, nodes and classes.

use super::summary::ReplaySummary;

/// `index.html`: the replay's summary tables and its two charts, for a browser.
pub(super) fn index_html(summary: &ReplaySummary) -> String {
    use std::fmt::Write as _;
    use weft_sim::report::esc;
    let s = &summary.head;
    let us = crate::text::delay_us;
    let mbps = |bps: u64| format!("{:.1}", bps as f64 / 1e6);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>weft replay: {0}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th:first-child{{text-align:left}}</style></head><body>\
         <h1>{0}</h1><p>Trace <code>{1}</code> ({2}), {3} engine, link {4} Gbit/s: {5} packets, \
         {6} sent, {7} dropped, {8} held at the end.</p>",
        esc(&s.policy),
        esc(&s.trace),
        esc(s.trace_format),
        esc(s.engine),
        s.link_bps as f64 / 1e9,
        s.packets,
        s.sent,
        s.dropped,
        s.held_at_end,
    );
    if !s.updates.is_empty() {
        h.push_str("<p>Updates:");
        for u in &s.updates {
            let _ = write!(
                h,
                " <code>{}</code>{}",
                esc(&u.update),
                if u.applied { "" } else { " (refused)" }
            );
        }
        h.push_str("</p>");
    }
    h.push_str("<p><img src=\"throughput.svg\" alt=\"throughput\"> <img src=\"delay.svg\" alt=\"delay\"></p>");
    h.push_str("<h2>Leaves</h2><table><tr><th>leaf</th><th>packets</th><th>bytes</th><th>mean Mbit/s</th><th>active Mbit/s</th><th>drops</th><th>p50 delay µs</th><th>p99 delay µs</th><th>max delay µs</th></tr>");
    let leaves = crate::text::shown_rows(&summary.leaves, |v| v.packets + v.dropped);
    for (name, v) in &leaves.rows {
        let d = v.queueing_delay_ps.as_ref();
        let _ = write!(
            h,
            "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            v.packets,
            v.bytes,
            mbps(v.mean_bps),
            mbps(v.active_bps),
            v.dropped,
            us(d, |d| d.p50),
            us(d, |d| d.p99),
            us(d, |d| d.max)
        );
    }
    h.push_str("</table>");
    let _ = write!(h, "<p>{}</p>", esc(&crate::text::rates_note(s.span_ps)));
    if let Some(out) = leaves.left_out("leaves", "without packets or drops") {
        let _ = write!(h, "<p>Not shown: {out} (summary.json has every leaf).</p>");
    }
    let shapers = crate::text::shown_rows(&summary.shapers, |v| v.packets);
    if !shapers.rows.is_empty() {
        h.push_str("<h2>Shaping classes</h2><table><tr><th>class</th><th>limit Mbit/s</th><th>packets</th><th>bytes</th><th>mean Mbit/s</th><th>active Mbit/s</th><th>p50 delay µs</th><th>p99 delay µs</th></tr>");
        for (name, v) in &shapers.rows {
            let limit = match v.rate_bps_at_end {
                Some(end) => format!(
                    "{} → {}",
                    crate::text::limit_mbit(v.rate_bps),
                    crate::text::limit_mbit(end)
                ),
                None => crate::text::limit_mbit(v.rate_bps),
            };
            let d = v.queueing_delay_ps.as_ref();
            let _ = write!(
                h,
                "<tr><th>{}</th><td>{limit}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                v.packets,
                v.bytes,
                mbps(v.mean_bps),
                mbps(v.active_bps),
                us(d, |d| d.p50),
                us(d, |d| d.p99)
            );
        }
        h.push_str("</table>");
    }
    if let Some(out) = shapers.left_out("shaping classes", "without packets") {
        let _ = write!(h, "<p>Not shown: {out} (summary.json has every one).</p>");
    }
    if let Some(ifaces) = &s.capture_interfaces {
        h.push_str("<h2>Capture interfaces</h2><table><tr><th>interface</th><th>section</th><th>link type</th><th>records</th><th>tenant</th></tr>");
        for i in ifaces {
            let name = esc(&crate::text::interface_name(i));
            let tenant = crate::text::interface_tenant(i)
                .map_or("–".to_string(), |(t, n)| format!("{t} ({})", esc(n)));
            let _ = write!(
                h,
                "<tr><th>{name}</th><td>{}</td><td>{}</td><td>{}</td><td>{tenant}</td></tr>",
                i.section, i.link_type, i.records
            );
        }
        h.push_str("</table>");
        if let Some(more) = s
            .capture_interfaces_unlisted
            .as_ref()
            .filter(|m| m.interfaces > 0)
        {
            let _ = write!(
                h,
                "<p>Not listed: {} more interfaces, {} records ({} skipped).</p>",
                more.interfaces, more.records, more.skipped
            );
        }
    }
    h.push_str(
        "<p>Files: departures.csv, drops.csv, summary.json, timeseries.csv.</p></body></html>\n",
    );
    h
}
