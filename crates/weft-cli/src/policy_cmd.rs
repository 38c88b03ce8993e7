//! Loading a policy for a command (`--attach`, `--link`, `--max-depth`, standard input) and
//! the `weft policy check` and `weft policy classify` commands.
//!
//! Invariants: a policy's errors are reported once, on stderr, and fail with exit 2; its
//! warnings are printed and do not fail. Standard input is read to at most one byte past the
//! largest policy allowed.

use super::args::LoadArgs;
use super::{diagnostics, out, Failure};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{self, show, Classification, LoadOptions, PolicyError, Program};
use weft_core::units::{self, format_rate, format_size};

pub(super) fn options(args: &LoadArgs) -> Result<LoadOptions, Failure> {
    let mut o = LoadOptions {
        max_depth: args.max_depth,
        max_nodes: args.max_nodes,
        ..LoadOptions::default()
    };
    for a in &args.attach {
        let (p, f) = a
            .split_once('=')
            .ok_or_else(|| Failure::usage(format!("--attach `{a}`: expected POINT=FILE")))?;
        if f == "-" {
            // Only the policy itself may come from standard input.
            return Err(Failure::usage(format!(
                "--attach `{a}`: a sub-policy is read from a file, not from standard input"
            )));
        }
        o.attach.push((p.to_string(), PathBuf::from(f)));
    }
    if let Some(r) = &args.link {
        o.link_rate_bps =
            Some(units::parse_rate(r).map_err(|e| Failure::usage(format!("--link: {e}")))?);
    }
    Ok(o)
}

/// Loads the policy in `file`, or from standard input when `file` is `-` (named `<stdin>`
/// in diagnostics; its `policy:` files relative to the current directory).
fn load_policy(file: &std::path::Path, opts: &LoadOptions) -> Result<Program, PolicyError> {
    if file.as_os_str() != "-" {
        return policy::load(file, opts);
    }
    // At most one byte past the limit is read: `yes | weft policy check -` ends at once.
    let limit = policy::MAX_POLICY_FILE_BYTES;
    let mut bytes = Vec::new();
    let read = std::io::Read::read_to_end(
        &mut std::io::Read::take(std::io::stdin().lock(), limit + 1),
        &mut bytes,
    )
    .and_then(|n| {
        if n as u64 > limit {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("standard input holds more than {limit} bytes, the most a policy may have"),
            ))
        } else {
            Ok(n)
        }
    });
    policy::load_bytes(std::path::Path::new("<stdin>"), read.map(|_| bytes), opts)
}

/// Loads a policy for a command: its errors (exit 2) or its warnings on stderr.
pub(super) fn load(file: &std::path::Path, args: &LoadArgs) -> Result<Program, Failure> {
    let opts = options(args)?;
    let p = load_policy(file, &opts).map_err(|e| {
        diagnostics::report(&e, false);
        Failure {
            code: 2,
            message: None,
        }
    })?;
    diagnostics::warn(&p, false);
    Ok(p)
}

pub(super) fn check(
    files: &[PathBuf],
    args: &LoadArgs,
    plain: bool,
    json: bool,
) -> Result<(), Failure> {
    let opts = options(args)?;
    // Standard input reads once: a second `-` would be checked as an empty file.
    let stdin = files.iter().filter(|f| f.as_os_str() == "-").count();
    if stdin > 1 {
        return Err(Failure::usage(format!(
            "`-` (standard input) is given {stdin} times; it can be read once"
        )));
    }
    let mut failed = 0;
    let mut out = std::io::stdout().lock();
    for f in files {
        let loaded = load_policy(f, &opts);
        if json {
            let v = match &loaded {
                Ok(p) => json!({
                    "file": f.display().to_string(),
                    "valid": true,
                    "summary": show::summary(p),
                    "diagnostics": [],
                    "warnings": diagnostics::warnings_json(p),
                }),
                Err(e) => json!({
                    "file": f.display().to_string(),
                    "valid": false,
                    "diagnostics": diagnostics::to_json(e),
                }),
            };
            failed += usize::from(loaded.is_err());
            writeln!(out, "{v}").map_err(out::failed)?;
            continue;
        }
        match loaded {
            Ok(p) => {
                writeln!(out, "{}: ok: {}", f.display(), show::summary(&p)).map_err(out::failed)?;
                if p.warnings.is_some() {
                    out.flush().map_err(out::failed)?;
                    diagnostics::warn(&p, plain);
                }
            }
            Err(e) => {
                failed += 1;
                writeln!(out, "{}: invalid: {}", f.display(), first_rules(f, &e))
                    .map_err(out::failed)?;
                out.flush().map_err(out::failed)?;
                diagnostics::report(&e, plain);
            }
        }
    }
    if failed > 0 {
        if files.len() > 1 && !json {
            out::errln!("{failed} of {} policies invalid", files.len());
        }
        return Err(Failure {
            code: 2,
            message: None,
        });
    }
    Ok(())
}

/// `rule (line N)` per diagnostic, or `rule (other.yaml line N)` inside a sub-policy.
fn first_rules(checked: &std::path::Path, e: &PolicyError) -> String {
    let shown = checked.display().to_string();
    let mut v: Vec<String> = e
        .locations()
        .iter()
        .map(|(r, file, l)| {
            if *file == shown {
                format!("{r} (line {l})")
            } else {
                format!("{r} ({file} line {l})")
            }
        })
        .collect();
    v.dedup();
    let n = v.len();
    v.truncate(5);
    let mut s = v.join(", ");
    if n > 5 {
        s += &format!(" and {} more", n - 5);
    }
    s
}

pub(super) fn classify(p: &Program, packets: &[String], json_out: bool) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    for spec in packets {
        let pkt: PacketMeta = spec
            .parse()
            .map_err(|e| Failure::usage(format!("--packet `{spec}`: {e}")))?;
        let result = p.classify(&pkt);
        debug_assert_eq!(
            result,
            p.classify_reference(&pkt),
            "twins disagree on {pkt}"
        );
        match result {
            Classification::Leaf { node, shaping, .. } => {
                let n = p.node(node);
                let shaping: Vec<_> = shaping.as_slice().iter().map(|&s| p.shaper(s)).collect();
                if json_out {
                    let v = json!({
                        "packet": pkt.to_string(),
                        "leaf": n.name,
                        "path": p.path(node),
                        "shaping": shaping.iter().map(|s| json!({
                            "name": s.name, "rate_bps": s.rate_bps, "burst_bytes": s.burst_bytes,
                        })).collect::<Vec<_>>(),
                    });
                    writeln!(out, "{v}").map_err(out::failed)?;
                } else {
                    writeln!(out, "packet {pkt}").map_err(out::failed)?;
                    writeln!(
                        out,
                        "  leaf     {}  (path {})",
                        n.name,
                        p.path(node).join(" > ")
                    )
                    .map_err(out::failed)?;
                    if shaping.is_empty() {
                        writeln!(out, "  shaping  none").map_err(out::failed)?;
                    }
                    for s in shaping {
                        writeln!(
                            out,
                            "  shaping  {}  rate {} burst {}",
                            s.name,
                            format_rate(s.rate_bps),
                            format_size(s.burst_bytes)
                        )
                        .map_err(out::failed)?;
                    }
                }
            }
            Classification::Unclassified { at } => {
                let name = &p.node(at).name;
                if json_out {
                    writeln!(
                        out,
                        "{}",
                        json!({"packet": pkt.to_string(), "leaf": null, "unclassified_at": name})
                    )
                    .map_err(out::failed)?;
                } else {
                    writeln!(out, "packet {pkt}").map_err(out::failed)?;
                    writeln!(
                        out,
                        "  unclassified: no child of `{name}` matches; the packet would be dropped (reason: unclassified)"
                    ).map_err(out::failed)?;
                }
            }
        }
    }
    Ok(())
}
