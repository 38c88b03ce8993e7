//! `weft`: the command line of weft, a programmable NIC packet scheduler in software.
//!
//! Data goes to stdout ([`out`]), diagnostics and progress to stderr. Exit codes: 0
//! success, 2 usage or input errors (an invalid policy, a malformed packet), 1 anything
//! else, 141 when stdout's reader has gone (`weft … | head`).

mod args;
mod bench;
mod diagnostics;
mod out;
mod policy_cmd;
mod replay_table;
mod rte_sched;
mod run;
mod sim;

/// mimalloc (compiling a 100,000-leaf policy allocates and frees millions of small YAML
/// nodes; it halves the allocator's share of compile time), counting live bytes for
/// `weft bench`'s memory figures.
#[global_allocator]
static GLOBAL: bench::CountingAlloc = bench::CountingAlloc;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use weft_core::policy::show;
use weft_replay::{self as replay, updates};

use args::{BenchWorkload, Cli, Command, PolicyCommand, RteSchedArgs};
use policy_cmd::{check, classify, load, options};
use replay_table::print_summary;

/// A failure with its exit code; the message has already been printed or is printed by main.
struct Failure {
    code: u8,
    message: Option<String>,
}

/// The drivers' modules (`sim`, `run`) fail with `(exit code, message)`.
impl From<(u8, String)> for Failure {
    fn from((code, message): (u8, String)) -> Failure {
        Failure {
            code,
            message: Some(message),
        }
    }
}

/// A replay's failure: its input (exit 2) or its outputs (exit 1).
impl From<replay::Error> for Failure {
    fn from(e: replay::Error) -> Failure {
        let code = match e {
            replay::Error::Input(_) => 2,
            replay::Error::Output(_) => 1,
        };
        Failure {
            code,
            message: Some(e.to_string()),
        }
    }
}

impl Failure {
    fn usage(msg: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: Some(msg.into()),
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Sim {
            scenario,
            nic,
            seed,
            seeds,
            duration,
            policy,
            link,
            set,
            out,
            json: j,
            quiet,
            progress,
            max_offered_load,
            max_events,
            bench,
        } => {
            let r = if bench {
                sim::bench(scenario.as_deref(), &nic, j)
            } else {
                sim::sim(sim::SimArgs {
                    scenario: scenario.unwrap_or_default(),
                    nics: nic,
                    seed,
                    seeds,
                    duration,
                    policy,
                    link,
                    set,
                    out,
                    json: j,
                    quiet,
                    progress,
                    max_offered_load,
                    max_events,
                })
            };
            r.map_err(Failure::from)
        }
        Command::Demo { out, quiet } => sim::demo(&out, quiet).map_err(Failure::from),
        Command::Nic(c) => run::main(c).map_err(Failure::from),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "weft", &mut script);
            out::print(&String::from_utf8_lossy(&script))?;
            Ok(())
        }
        Command::Bench {
            workload: Some(BenchWorkload::RteSched(a)),
            ..
        } => rte_sched_bench(a),
        Command::Bench {
            workload: None,
            json: j,
            quick,
            rounds,
            backlog,
            only,
        } => {
            let rows = bench::run(quick, rounds as usize, true, backlog, only.as_deref()).map_err(
                |names| {
                    Failure::usage(format!(
                        "--only `{}`: no scenario's name contains it; the scenarios{}: {}",
                        only.as_deref().unwrap_or_default(),
                        if quick { " with --quick" } else { "" },
                        names.join("; ")
                    ))
                },
            )?;
            if j {
                for r in &rows {
                    out::outln!("{r}")?;
                }
                out::outln!("{}", bench::targets_json(&rows))?;
            } else {
                bench::print_table(&rows)?;
                bench::print_targets(&rows)?;
            }
            Ok(())
        }
        command @ Command::Replay { .. } => replay_command(command),
        Command::Policy(cmd) => match cmd {
            PolicyCommand::Check {
                files,
                load,
                plain,
                json,
            } => check(&files, &load, plain, json),
            PolicyCommand::Show {
                file,
                json: j,
                load: l,
            } => {
                let p = load(&file, &l)?;
                if j {
                    // Streamed: a policy of 100,000 nodes is not held as one JSON value.
                    let mut o = std::io::BufWriter::new(std::io::stdout().lock());
                    serde_json::to_writer_pretty(&mut o, &show::Json(&p))
                        .map_err(std::io::Error::from)
                        .and_then(|()| o.write_all(b"\n"))
                        .and_then(|()| o.flush())
                        .map_err(out::failed)?;
                } else {
                    out::print(&show::tree(&p))?;
                }
                Ok(())
            }
            PolicyCommand::Dot { file, load: l } => {
                let p = load(&file, &l)?;
                out::print(&show::dot(&p))?;
                Ok(())
            }
            PolicyCommand::Classify {
                file,
                packet,
                json: j,
                load: l,
            } => {
                let p = load(&file, &l)?;
                classify(&p, &packet, j)
            }
        },
    }
}

/// `weft replay`: loads the policy, replays the trace into `--out`, writes `summary.json`
/// (removing the other outputs if it cannot) and prints the table or the JSON.
fn replay_command(command: Command) -> Result<(), Failure> {
    let Command::Replay {
        policy: file,
        trace,
        out,
        json: j,
        quiet,
        progress,
        engine,
        limited_fast_path,
        burst,
        update,
        tenant,
        reorder_window,
        max_interfaces,
        max_trace_row_bytes,
        load: l,
    } = command
    else {
        unreachable!("replay_command is given `weft replay`'s arguments")
    };
    if file == std::path::Path::new("-") && replay::is_stdin(&trace) {
        return Err(Failure::usage(
            "--policy - and --trace -: standard input can give only one of them",
        ));
    }
    let p = std::sync::Arc::new(load(&file, &l)?);
    let updates = updates::parse_all(&p, &update).map_err(Failure::usage)?;
    let tenants = tenant_pairs(&tenant).map_err(Failure::usage)?;
    let progress = progress || (!quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let opts = replay::Options {
        engine: engine.into(),
        // A replay streams: flows are forgotten once they hold nothing, so memory
        // follows the packets queued, not the trace's distinct flows (exact: see
        // `forget_idle_flows`; the summary reports no per-flow counters).
        engine_options: weft_core::sched::EngineOptions {
            limited_fast_path,
            forget_idle_flows: true,
        },
        burst: burst.into(),
        updates,
        tenants,
        reorder_window: reorder_window as usize,
        max_interfaces: max_interfaces as usize,
        max_row_bytes: max_trace_row_bytes as usize,
        inputs: std::iter::once(file.clone())
            .chain(options(&l)?.attach.into_iter().map(|(_, f)| f))
            .collect(),
    };
    let mut bar = sim::ReplayProgress::default();
    let summary = replay::replay(
        p,
        &trace,
        &out,
        opts,
        progress.then_some(&mut bar as &mut dyn replay::Progress),
        &mut Stderr { quiet },
    )?;
    if let Some(held) = Some(summary.head.held_at_end).filter(|&h| h > 0) {
        out::errln!(
            "warning: {held} packets were still queued when the 64-bit picosecond clock \
             ran out (213.5 days; a class too slow for its backlog): neither sent nor \
             dropped (summary.json: held_at_end)"
        );
    }
    // The files first: a reader of the table that stops early (`| head`) must not
    // cost the summary.
    if j {
        // The text once, for the file and for stdout.
        let text = summary.json();
        summary.write(&out, Some(&text))?;
        out::print(&text)?;
    } else {
        summary.write(&out, None)?;
        if !quiet {
            out::errln!("wrote {}/{}", out.display(), replay::OUTPUTS.join(", "));
        }
        print_summary(&summary)?;
    }
    Ok(())
}

/// A replay's warnings and notes on stderr: `warning: ...` always, `note: ...` not with
/// `--quiet`.
struct Stderr {
    quiet: bool,
}

impl replay::Diagnostics for Stderr {
    fn warning(&mut self, message: &str) {
        out::errln!("warning: {message}");
    }

    fn note(&mut self, message: &str) {
        if !self.quiet {
            out::errln!("note: {message}");
        }
    }
}

/// `--tenant NAME=IFACE` flags (of `weft run` and `weft replay`) as (NAME, IFACE) pairs, in
/// order (a tenant's id is its position, 1-based); a malformed flag or a NAME or IFACE given
/// twice is refused.
fn tenant_pairs(flags: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for t in flags {
        let (n, i) = t
            .split_once('=')
            .ok_or_else(|| format!("--tenant `{t}`: expected NAME=IFACE"))?;
        if n.is_empty() || i.is_empty() {
            let empty = if n.is_empty() { "name" } else { "interface" };
            return Err(format!(
                "--tenant `{t}`: the tenant's {empty} is empty (expected NAME=IFACE)"
            ));
        }
        if let Some(k) = pairs.iter().position(|(pn, pi)| pn == n || pi == i) {
            return Err(format!(
                "--tenant `{t}`: tenant {} is already `{}={}`",
                k + 1,
                pairs[k].0,
                pairs[k].1
            ));
        }
        pairs.push((n.to_string(), i.to_string()));
    }
    Ok(pairs)
}

/// `weft bench rte-sched`.
fn rte_sched_bench(a: RteSchedArgs) -> Result<(), Failure> {
    let backlog = a.backlog.unwrap_or(match a.arrivals {
        rte_sched::Arrivals::Pipe => 4096.max(a.pipes as u64),
        rte_sched::Arrivals::Uniform => 4096,
    });
    let backlog = u32::try_from(backlog)
        .ok()
        .filter(|&b| (1..=1 << 24).contains(&b))
        .ok_or_else(|| Failure::usage(format!("--backlog {backlog}: 1 to 16777216")))?;
    let cfg = rte_sched::Config {
        pipes: a.pipes,
        arrivals: a.arrivals,
        profile: a.profile,
        packets: a.packets,
        warmup: a.warmup,
        backlog,
        burst: a.burst,
        seed: a.seed,
        engine: a.engine,
    };
    if a.print_policy {
        return Ok(out::print(&rte_sched::policy_yaml(&cfg))?);
    }
    let write_log = |path: &std::path::Path, log: &[u32]| {
        std::fs::write(path, rte_sched::log_bytes(log))
            .map_err(|e| Failure::from((1, format!("cannot write {}: {e}", path.display()))))
    };
    if let Some(k) = a.drain {
        let mut w = rte_sched::Workload::new(&cfg).map_err(Failure::usage)?;
        w.fill_drain(k);
        let mut log = Vec::new();
        let got = w.drain(&mut log, 100_000_000);
        write_log(
            a.log.as_deref().expect("clap: --drain requires --log"),
            &log,
        )?;
        let row = rte_sched::DrainRow {
            bench: "weft",
            drain: k,
            pipes: cfg.pipes,
            packets: got,
            empty_dequeues: w.empty_dequeues(),
            drops: w.drops(),
        };
        out::outln!("{row}")?;
        return Ok(());
    }
    let mut log = Vec::new();
    let m =
        rte_sched::measure(&cfg, a.log.is_some().then_some(&mut log)).map_err(Failure::usage)?;
    if let Some(path) = &a.log {
        write_log(path, &log)?;
    }
    let row = rte_sched::json_row(&cfg, &m, a.log.is_some());
    if a.json {
        out::outln!("{row}")?;
    } else {
        out::outln!(
            "weft rte-sched: {} pipes, {} arrivals, {}: {:.3} Mpps by CPU time ({:.1} ns a packet), {} packets after {} warm-up, {} drops, {} empty dequeues, seq_checksum {}",
            cfg.pipes,
            row.arrivals,
            row.profile,
            finite(row.cpu_mpps),
            finite(row.cpu_ns_per_packet),
            m.packets,
            m.start,
            m.drops,
            m.empty_dequeues,
            m.seq_checksum
        )?;
    }
    Ok(())
}

/// A figure of a JSON row for a line of text: one that JSON cannot carry (NaN, an infinity;
/// `null` in `--json`) reads 0.
fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// The command line's grammar: `Cli`'s, with negative numbers taken as values everywhere, so
/// `--buffers -5` is refused by the flag's own range ("invalid value '-5' for '--buffers'")
/// rather than as an unknown argument `-5`. No weft flag is a digit, so nothing is shadowed.
fn grammar() -> clap::Command {
    fn negatives_are_values(c: clap::Command) -> clap::Command {
        c.allow_negative_numbers(true)
            .mut_subcommands(negatives_are_values)
    }
    negatives_are_values(Cli::command())
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&grammar().get_matches()).unwrap_or_else(|e| e.exit());
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // (No message after a closed pipe: the reader has gone.)
            if let Some(m) = f.message.filter(|m| !m.is_empty()) {
                out::errln!("error: {m}");
            }
            ExitCode::from(f.code)
        }
    }
}
