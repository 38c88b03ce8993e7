//! `weft ctl`: requests to a running `weft run` over its control socket (stats, reload,
//! stop), and its stats as a table.
//!
//! Invariants: an answer that does not read as the reply to its request is an error (exit
//! 1), never counters taken as 0; a policy to reload is checked here first, at the rate the
//! daemon runs at, so an invalid one is said before the daemon sees it. Cost: one request
//! (two for a reload) and its answer.

use serde_json::Value;
use weft_core::policy::{self, LoadOptions};
use weft_core::sched::DropReason;
use weft_core::units;
use weft_nic::ctl::{self, Reply, Request};
use weft_nic::iface::Reject;
use weft_nic::stats::Stats;

use super::args::CtlCommand;
use super::{usage, Fail};

/// The daemon's reply to `req`: a refusal is exit 2 with the daemon's reason; no answer,
/// or one that does not read as the reply to `req` (a field missing, renamed or of another
/// type, as from a `weft run` of another version: [`ctl::ReplyError`], naming the field),
/// exit 1; a path that is not a control socket, exit 2.
fn ask(socket: &std::path::Path, req: Request) -> Result<Reply, Fail> {
    match ctl::request(socket, &req) {
        Ok(Reply::Refused(e)) => Err((2, e)),
        Ok(reply) => Ok(reply),
        // A path that is not a control socket was given: an input error.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Err((2, e.to_string())),
        Err(e) => Err((1, e.to_string())),
    }
}

/// The daemon's stats ([`ask`]): never counters taken as 0 from an answer that does not
/// read.
fn ask_stats(socket: &std::path::Path) -> Result<Stats, Fail> {
    match ask(socket, Request::Stats)? {
        Reply::Stats(s) => Ok(*s),
        // Cannot be: `ctl::request` reads a stats answer as stats or a refusal.
        _ => Err((
            1,
            format!("{}: answered stats with another reply", socket.display()),
        )),
    }
}

pub(super) fn ctl_cmd(c: CtlCommand) -> Result<(), Fail> {
    match c {
        CtlCommand::Stats { json: j, socket } => {
            let stats = ask_stats(&socket)?;
            if j {
                crate::out::outln!(
                    "{}",
                    serde_json::to_string_pretty(&stats).unwrap_or_default()
                )?;
            } else {
                print_stats(&stats)?;
            }
            Ok(())
        }
        CtlCommand::Reload { policy: p, socket } => {
            // Checked here as the daemon will check it: at the uplink rate it runs at (its
            // `--rate`, which stands for the file's `link: {rate}`; a senic policy's limits
            // are judged against it). Without an answer, at the file's rate: an invalid
            // policy is said before a daemon that is not there. An answer that does not
            // read is an error: the rate would be a guess.
            let rate = match ctl::request(&socket, &Request::Stats) {
                Ok(Reply::Stats(s)) => Some(s.rate_bps),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err((1, e.to_string()))
                }
                _ => None,
            };
            let opts = LoadOptions {
                link_rate_bps: rate,
                ..LoadOptions::default()
            };
            match policy::load(&p, &opts) {
                Ok(prog) => crate::diagnostics::warn(&prog, false),
                Err(e) => {
                    crate::diagnostics::report(&e, false);
                    return Err(usage(format!(
                        "{}: invalid policy; the running one is untouched",
                        p.display()
                    )));
                }
            }
            let abs = std::fs::canonicalize(&p).map_err(|e| usage(e.to_string()))?;
            let Reply::Reloaded(r) = ask(&socket, Request::Reload { policy: abs })? else {
                return Err((1, format!("{}: not a reload's answer", socket.display())));
            };
            // What `weft run` warns of at start, for the new policy and the running tenants.
            for w in &r.warnings {
                crate::out::errln!("warning: {w}");
            }
            crate::out::outln!(
                "reloaded: policy {} (generation {})",
                r.policy,
                r.generation
            )?;
            Ok(())
        }
        CtlCommand::Stop { socket } => {
            ask(&socket, Request::Stop)?;
            crate::out::errln!(
                "weft ctl: {} stops at its next control poll (about 1 ms), printing its final \
                 stats on its own stdout",
                socket.display()
            );
            Ok(())
        }
    }
}

fn print_stats(s: &Stats) -> Result<(), Fail> {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "policy {} (generation {}), up {:.1} s, uplink {}",
        s.policy,
        s.generation,
        s.uptime_s,
        units::format_rate(s.rate_bps)
    );
    let _ = writeln!(
        o,
        "{:<24} {:>6} {:>12} {:>14} {:>10} {:>10}  drops by reason",
        "node", "type", "packets", "bytes", "Mbit/s", "drops"
    );
    for n in &s.nodes {
        let total: u64 = n.drops.iter().sum();
        let reasons: Vec<String> = DropReason::ALL
            .iter()
            .zip(n.drops)
            .filter(|&(_, c)| c > 0)
            .map(|(r, c)| format!("{}={c}", r.name()))
            .collect();
        let _ = writeln!(
            o,
            "{:<24} {:>6} {:>12} {:>14} {:>10.1} {:>10}  {}",
            n.name,
            n.algo,
            n.packets,
            n.bytes,
            n.rate_bps / 1e6,
            total,
            reasons.join(" ")
        );
    }
    if !s.shapers.is_empty() {
        let _ = writeln!(
            o,
            "{:<24} {:>12} {:>14} {:>10} {:>12}",
            "shaping class", "packets", "bytes", "Mbit/s", "limit Mbit/s"
        );
        for c in &s.shapers {
            let _ = writeln!(
                o,
                "{:<24} {:>12} {:>14} {:>10.1} {:>12.1}",
                c.name,
                c.packets,
                c.bytes,
                c.rate_bps / 1e6,
                c.limit_bps as f64 / 1e6,
            );
        }
    }
    for t in &s.tenants {
        let refused: Vec<String> = Reject::ALL
            .iter()
            .zip(t.rejects)
            .filter(|&(_, c)| c > 0)
            .map(|(r, c)| format!("{}={c}", r.name()))
            .collect();
        let _ = writeln!(
            o,
            "tenant {} ({} on {}): {} frames received, refused: {}",
            t.tenant,
            t.name,
            t.iface,
            t.rx_frames,
            if refused.is_empty() {
                "none".to_string()
            } else {
                refused.join(" ")
            }
        );
    }
    let _ = writeln!(o, "dataplane: {}", counters(&s.dataplane, "all 0"));
    for p in &s.ports {
        let _ = writeln!(o, "port: {}", counters(p, "all 0"));
    }
    let _ = writeln!(o, "iface: {}", counters(&s.iface, "all 0"));
    crate::out::print(&o)
}

/// A section of the stats as `name=value` words for the table, by its fields' names in
/// `--json` (its serde form), nested sections' names joined with `.`
/// (`rejects.foreign_queue=12`); zeros left out (`--json` has them all), and `none_left`
/// when nothing is left.
fn counters(section: &impl serde::Serialize, none_left: &str) -> String {
    fn walk(v: &Value, name: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    let n = if name.is_empty() {
                        k.clone()
                    } else {
                        format!("{name}.{k}")
                    };
                    walk(c, &n, out);
                }
            }
            Value::Number(n) if n.as_f64() == Some(0.0) => {}
            Value::Null => {}
            Value::String(s) => out.push(format!("{name}={s}")),
            other => out.push(format!("{name}={other}")),
        }
    }
    let mut out = Vec::new();
    // Cannot fail: the stats' maps have string keys.
    walk(
        &serde_json::to_value(section).unwrap_or_default(),
        "",
        &mut out,
    );
    if out.is_empty() {
        none_left.to_string()
    } else {
        out.join(" ")
    }
}
