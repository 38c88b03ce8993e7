//! `weft sim` and `weft demo`: run scenario files through the simulator's NIC models
//! (crate `weft-sim`) and write reports; `weft sim --bench` measures simulated packets per
//! wall-clock second.
//!
//! Output conventions: tables and JSON on stdout, progress and file notes on stderr; a bad
//! scenario exits 2 with `file:line:col: message`, and so does one that asks the simulator
//! for more than its limits (an offered load refused when loading, a run that reaches its
//! event budget: `--max-offered-load`, `--max-events` and the scenario's `limits:` raise
//! them; `weft_sim::scenario` says why they exist).
//!
//! Progress ([`Progress`], `weft replay`'s too): an indicatif bar when stderr is a
//! terminal; with `--progress` on another stderr, a line at most once a second (simulated
//! time done of the total, the model, its events, wall time) and one at the end.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};
// Stdout: after a closed pipe a command ends quietly, its files written before.
use crate::out::print;
use weft_sim::{NicKind, Scenario};

/// Loom Fig. 9/10, embedded so that `weft demo` runs from any directory.
pub const FIG9: &str = include_str!("../../../examples/scenarios/loom-fig9.yaml");
/// The small priority hierarchy.
pub const HIERARCHY: &str = include_str!("../../../examples/scenarios/hierarchy.yaml");

/// Models `weft demo` compares.
const DEMO_MODELS: [NicKind; 5] = [
    NicKind::Sq,
    NicKind::Mq,
    NicKind::Qpf,
    NicKind::Tonic,
    NicKind::Loom,
];

/// Options of `weft sim`.
pub struct SimArgs {
    pub scenario: PathBuf,
    pub nics: Vec<String>,
    pub seed: Option<u64>,
    /// `--seeds`: a run per seed ([`parse_seeds`]), each seed's report in `OUT/seed-N/`
    /// and their statistics in `OUT/aggregate.json`.
    pub seeds: Option<String>,
    pub duration: Option<String>,
    pub policy: Option<PathBuf>,
    pub link: Option<String>,
    pub set: Vec<String>,
    pub out: PathBuf,
    pub json: bool,
    pub quiet: bool,
    /// Progress lines on stderr even when it is not a terminal.
    pub progress: bool,
    /// `--max-offered-load`: multiples of the link rate.
    pub max_offered_load: Option<u64>,
    /// `--max-events`: events per model's run.
    pub max_events: Option<u64>,
}

/// Progress on stderr: an indicatif bar when stderr is a terminal, else (when asked for) a
/// plain line, `LABEL: MESSAGE`, at most once a second, and a last one at the end. One
/// implementation for the commands that report progress (`weft sim`, `weft demo`, `weft
/// replay`): each gives its bar's template and its messages.
pub(crate) struct Progress {
    label: String,
    bar: Option<indicatif::ProgressBar>,
    /// Plain lines (stderr is not a terminal, and they were asked for).
    lines: bool,
    started: Instant,
    last_line: Instant,
}

impl Progress {
    /// Progress out of `total` (the bar's length), labelled `label`; `template` is the
    /// bar's (indicatif's `{prefix}` is the label, `{msg}` the message). `lines`: plain
    /// lines when stderr is not a terminal (`--progress`); `bar`: a bar when it is.
    pub(crate) fn new(label: &str, total: u64, template: &str, bar: bool, lines: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (bar && terminal).then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(indicatif::ProgressStyle::with_template(template).expect("template"));
            b.set_prefix(label.to_string());
            b
        });
        let now = Instant::now();
        Progress {
            label: label.to_string(),
            bar,
            lines: lines && !terminal,
            started: now,
            last_line: now,
        }
    }

    /// Wall time since the start, seconds.
    pub(crate) fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Moves the bar to `position`, or prints `message()` as a line when a second has
    /// passed since the last one.
    pub(crate) fn tick(&mut self, position: u64, message: impl FnOnce(&Self) -> String) {
        if let Some(b) = &self.bar {
            b.set_position(position);
            b.set_message(message(self));
        } else if self.lines && self.last_line.elapsed().as_secs() >= 1 {
            self.last_line = Instant::now();
            crate::out::errln!("{}: {}", self.label, message(self));
        }
    }

    /// Clears the bar, or prints the last line, `message (done)`.
    pub(crate) fn finish(&self, message: impl FnOnce(&Self) -> String) {
        match &self.bar {
            Some(b) => b.finish_and_clear(),
            None if self.lines => {
                crate::out::errln!("{}: {} (done)", self.label, message(self))
            }
            None => {}
        }
    }
}

/// `weft replay`'s progress ([`weft_replay::Progress`]) on a [`Progress`]: its bytes of the
/// trace read and its rows read a second, from the replay's start.
#[derive(Default)]
pub(crate) struct ReplayProgress(Option<Progress>);

impl ReplayProgress {
    /// The message: rows read and their rate.
    fn message(rows: u64, p: &Progress) -> String {
        let secs = p.elapsed_s().max(1e-9);
        format!("{rows} rows read, {:.0} packets/s", rows as f64 / secs)
    }
}

impl weft_replay::Progress for ReplayProgress {
    fn start(&mut self, total_bytes: u64) {
        self.0 = Some(Progress::new(
            "replay",
            total_bytes,
            "{prefix} {bar:30} {bytes}/{total_bytes} {msg} ({eta})",
            true,
            true,
        ));
    }

    fn rows(&mut self, rows: u64, bytes: u64) {
        if let Some(p) = self.0.as_mut() {
            p.tick(bytes, |p| Self::message(rows, p));
        }
    }

    fn finish(&mut self, rows: u64) {
        if let Some(p) = &self.0 {
            p.finish(|p| Self::message(rows, p));
        }
    }
}

/// A failure: exit code and message.
pub type Fail = (u8, String);

fn usage(m: impl Into<String>) -> Fail {
    (2, m.into())
}

/// The models of `--nic` (none given: the scenario's). A `--nic` that names none (`--nic ''`)
/// or a model twice is refused: results are keyed by model.
fn parse_models(names: &[String]) -> Result<Vec<NicKind>, Fail> {
    let mut models = Vec::new();
    for s in names
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let m = NicKind::from_name(s)
            .ok_or_else(|| usage(format!("--nic: {}", NicKind::unknown(s))))?;
        if models.contains(&m) {
            return Err(usage(format!(
                "--nic: `{s}` is given twice (results are keyed by model)"
            )));
        }
        models.push(m);
    }
    if !names.is_empty() && models.is_empty() {
        return Err(usage(format!(
            "--nic: no NIC model given (leave --nic out to run the scenario's `nics`; known: \
             {})",
            NicKind::names()
        )));
    }
    Ok(models)
}

/// `--policy`, `--link RATE` and `--set MODEL.KEY=VALUE`.
pub fn overrides(
    policy: Option<PathBuf>,
    link: Option<&str>,
    set: &[String],
) -> Result<weft_sim::Overrides, Fail> {
    let mut ov = weft_sim::Overrides {
        policy,
        ..Default::default()
    };
    if let Some(l) = link {
        ov.link_rate_bps =
            Some(weft_core::units::parse_rate(l).map_err(|e| usage(format!("--link: {e}")))?);
    }
    for s in set {
        let bad = || {
            usage(format!(
                "--set `{s}`: expected MODEL.KEY=VALUE, e.g. loom.batch=256kb"
            ))
        };
        let (lhs, v) = s.split_once('=').ok_or_else(bad)?;
        let (m, k) = lhs.split_once('.').ok_or_else(bad)?;
        ov.nic_params.push((m.into(), k.into(), v.into()));
    }
    Ok(ov)
}

fn apply_overrides(
    sc: &mut Scenario,
    seed: Option<u64>,
    duration: Option<&str>,
) -> Result<(), Fail> {
    if let Some(s) = seed {
        sc.seed = s;
    }
    if let Some(d) = duration {
        let ps =
            weft_core::units::parse_time(d, true).map_err(|e| usage(format!("--duration: {e}")))?;
        // At most 2^63 ps and 1,000,000 windows (Scenario::set_duration says why).
        sc.set_duration(ps)
            .map_err(|m| usage(format!("--duration: {m}")))?;
    }
    Ok(())
}

/// Runs the models, each within the scenario's event budget (exit 2 when one reaches it),
/// with progress on stderr: a bar on a terminal unless `quiet`, lines elsewhere with
/// `lines` (`--progress`); returns the runs and the wall time.
fn run_models(
    sc: &Scenario,
    models: &[NicKind],
    quiet: bool,
    lines: bool,
    label: &str,
) -> Result<(Vec<weft_sim::NicRun>, f64), Fail> {
    let list: Vec<NicKind> = if models.is_empty() {
        sc.nics.clone()
    } else {
        models.to_vec()
    };
    // The bar counts simulated microseconds, model after model.
    let per = (sc.duration_ps / 1_000_000).max(1);
    let mut progress = Progress::new(
        label,
        per * list.len() as u64,
        "{prefix} {bar:30} {msg} ({eta})",
        !quiet,
        lines,
    );
    let mut events = 0u64;
    let mut last = weft_sim::Progress {
        model: 0,
        now_ps: 0,
        events: 0,
    };
    let n = list.len();
    let end = sc.duration_ps;
    // Simulated times in the unit of the whole run's (`0.274 of 2 ms`).
    let (unit, scale) = [("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)]
        .into_iter()
        .find(|&(_, sc)| end as f64 >= sc)
        .unwrap_or(("ps", 1.0));
    let message = |p: &weft_sim::Progress, total: u64, pr: &Progress| {
        format!(
            "{} ({} of {n}): {:.3} of {} {unit} simulated, {} events ({} in all), {:.1} s",
            list[p.model].name(),
            p.model + 1,
            p.now_ps as f64 / scale,
            end as f64 / scale,
            p.events,
            total,
            pr.elapsed_s()
        )
    };
    let runs = weft_sim::try_run_all(sc, &list, &mut |p| {
        if p.model != last.model {
            events += last.events;
        }
        last = p;
        progress.tick(p.model as u64 * per + p.now_ps / 1_000_000, |pr| {
            message(&p, events + p.events, pr)
        });
    })
    .map_err(|e| usage(e.to_string()))?;
    progress.finish(|pr| message(&last, events + last.events, pr));
    Ok((runs, progress.elapsed_s()))
}

/// A figure of a summary for a table ([`crate::out::number`]), `-` when there is none.
fn fmt(v: &Value, scale: f64, digits: usize) -> String {
    v.as_f64()
        .map_or("-".to_string(), |x| crate::out::number(x * scale, digits))
}

/// A summary's `duration_s` for a title: as a person writes it (`0.2`, never `2e-1`).
fn seconds(v: &Value) -> String {
    v.as_f64().map_or("-".to_string(), |x| x.to_string())
}

/// Prints the per-model table of a summary.
pub fn print_table(sum: &Value) -> Result<(), Fail> {
    print(&table(sum))
}

/// A percentile of a `latency_us` object, `≥ ` before a lower bound (it falls on requests
/// unfinished at the end of the run).
fn fmt_pct(lat: &Value, key: &str) -> String {
    let v = fmt(&lat[key], 1.0, 1);
    if lat[format!("{key}_at_least")].as_bool() == Some(true) {
        format!("≥ {v}")
    } else {
        v
    }
}

/// The per-model table of a summary; under it, for each model whose p90 is a lower bound,
/// how many of the headline application's requests were unfinished (or, for a bulk or UDP
/// application, how many of its packets were still queued).
pub fn table(sum: &Value) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let headline = sum["headline_app"].as_str().unwrap_or("");
    let (ht, ha) = headline.split_once('/').unwrap_or(("", ""));
    let _ = writeln!(
        s,
        "{}  ({} s simulated{})",
        sum["scenario"].as_str().unwrap_or(""),
        seconds(&sum["duration_s"]),
        sum["time_scale"]
            .as_str()
            .map_or(String::new(), |s| format!("; {s}"))
    );
    let _ = writeln!(
        s,
        "{:<8} {:>9} {:>15} {:>9} {:>12} {:>12} {:>8}",
        "model",
        "jain_min",
        format!("{ht} p90 us"),
        "link_util",
        "doorbells/s",
        "dma_reads/s",
        "drops"
    );
    let mut notes = String::new();
    if let Some(m) = sum["nics"].as_object() {
        for (k, v) in m {
            let app = &v["tenants"][ht]["apps"][ha];
            let _ = writeln!(
                s,
                "{:<8} {:>9} {:>15} {:>9} {:>12} {:>12} {:>8}",
                k,
                fmt(&v["jain_min"], 1.0, 4),
                fmt_pct(&app["latency_us"], "p90"),
                fmt(&v["link_utilization"], 1.0, 3),
                fmt(&v["doorbell_writes_per_s"], 1.0, 0),
                fmt(&v["dma_reads_per_s"], 1.0, 0),
                fmt(&v["drops"], 1.0, 0)
            );
            if app["latency_us"]["p90_at_least"].as_bool() == Some(true) {
                let _ = if app["requests"].is_object() {
                    writeln!(
                        notes,
                        "≥ {k}: {} of {headline}'s {} requests unfinished at the end, counted \
                         at their age then: the p90 is at least that",
                        app["requests"]["unfinished"], app["requests"]["issued"]
                    )
                } else {
                    // A bulk or UDP application: its packet delay (write to wire).
                    writeln!(
                        notes,
                        "≥ {k}: {} of {headline}'s packets still queued at the end ({} sent), \
                         counted at their age then: the p90 packet delay is at least that",
                        app["packets"]["queued_at_end"], app["packets"]["sent"]
                    )
                };
            }
        }
    }
    s + &notes
}

/// The most seeds `--seeds` may ask for: each is a whole run of every model and a
/// directory of files.
pub const MAX_SEEDS: usize = 1000;

/// The seeds of `--seeds`: a list of seeds and inclusive ranges, comma separated: `1..10`
/// (1 to 10; `1..=10` alike), `1,2,5`, `1..3,7`. Refused (exit 2): an empty list or item,
/// what is not a whole number, a range whose end is below its start, a seed given twice,
/// more than [`MAX_SEEDS`].
pub fn parse_seeds(spec: &str) -> Result<Vec<u64>, Fail> {
    let bad = |m: String| {
        usage(format!(
            "--seeds `{spec}`: {m}; expected seeds and ranges, comma separated: `1..10` (1 to \
             10, both included), `1,2,5`, `1..3,7`"
        ))
    };
    let number = |s: &str| {
        s.trim().parse::<u64>().map_err(|_| {
            bad(format!(
                "`{}` is not a seed (a whole number from 0 to {})",
                s.trim(),
                u64::MAX
            ))
        })
    };
    let mut seeds: Vec<u64> = Vec::new();
    for item in spec.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad("an empty item".into()));
        }
        let (lo, hi) = match item.split_once("..") {
            Some((a, b)) => {
                let b = b.strip_prefix('=').unwrap_or(b);
                let (lo, hi) = (number(a)?, number(b)?);
                if hi < lo {
                    return Err(bad(format!(
                        "the range `{item}` is empty ({lo} > {hi}); write the smaller seed first, \
                         `{hi}..{lo}`"
                    )));
                }
                (lo, hi)
            }
            None => {
                let n = number(item)?;
                (n, n)
            }
        };
        if hi - lo >= MAX_SEEDS as u64 || seeds.len() + (hi - lo) as usize >= MAX_SEEDS {
            return Err(bad(format!(
                "more than {MAX_SEEDS} seeds (each is a run of every model and a directory of \
                 files)"
            )));
        }
        for s in lo..=hi {
            if seeds.contains(&s) {
                return Err(bad(format!("seed {s} is given twice")));
            }
            seeds.push(s);
        }
    }
    Ok(seeds)
}

/// `seeds` as a reader writes them: runs of three or more as ranges, `1..3, 7`.
pub fn seeds_text(seeds: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seeds.len() {
        let mut j = i;
        while j + 1 < seeds.len() && seeds[j + 1] == seeds[j].wrapping_add(1) {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}..{}", seeds[i], seeds[j]));
        } else {
            parts.extend(seeds[i..=j].iter().map(|s| s.to_string()));
        }
        i = j + 1;
    }
    parts.join(", ")
}

/// The directory of seed `seed`'s report in `out`.
fn seed_dir(out: &Path, seed: u64) -> PathBuf {
    out.join(format!("seed-{seed}"))
}

/// The statistics over seeds a run with `--seeds` writes in `--out`.
pub const AGGREGATE: &str = "aggregate.json";

/// Removes what an earlier `--seeds` run left in `out` that this one does not write, so
/// that the directory never mixes runs: `aggregate.json`, and the report files (only
/// those, [`weft_sim::report::remove_outputs`]) of every `seed-N/` whose seed is not in
/// `keep`, the directory too when that leaves it empty. (The reports written remove their
/// own directory's earlier files.) A single-seed run leaves them: its report is `out`'s
/// own files, and a `seed-N/` may be one written with `--seed N --out OUT/seed-N`.
fn remove_earlier(out: &Path, keep: &[u64]) -> Result<(), Fail> {
    let cannot = |p: &Path, e: std::io::Error| (1, format!("cannot remove {}: {e}", p.display()));
    let agg = out.join(AGGREGATE);
    match std::fs::remove_file(&agg) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(cannot(&agg, e)),
        _ => {}
    }
    let Ok(entries) = std::fs::read_dir(out) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(seed) = name
            .to_str()
            .and_then(|n| n.strip_prefix("seed-"))
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|s| name.to_str() == Some(&format!("seed-{s}")))
        else {
            continue;
        };
        let dir = e.path();
        if keep.contains(&seed) || !dir.is_dir() {
            continue;
        }
        weft_sim::report::remove_outputs(&dir).map_err(|e| (1, e.to_string()))?;
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(())
}

/// Checks `--out` before a run: refused if it is a file, or if a report file would replace
/// an input (the scenario, `--policy`); with `seeds`, likewise each `seed-N/` and
/// `aggregate.json`. The report itself removes the files of an earlier one there
/// ([`weft_sim::report::write`], [`remove_earlier`]), so a directory never mixes two runs.
fn check_out(out: &Path, inputs: &[&Path], seeds: Option<&[u64]>) -> Result<(), Fail> {
    if out.exists() && !out.is_dir() {
        return Err(usage(format!(
            "--out {}: a file, not a directory",
            out.display()
        )));
    }
    for &s in seeds.unwrap_or(&[]) {
        let d = seed_dir(out, s);
        if d.exists() && !d.is_dir() {
            return Err(usage(format!(
                "--out {}: {} is a file, where seed {s}'s report would go; move it or choose \
                 another directory",
                out.display(),
                d.display()
            )));
        }
        check_names(&d, inputs, out)?;
    }
    check_names(out, inputs, out)
}

/// Refuses a report in `dir` that would replace one of `inputs`.
fn check_names(dir: &Path, inputs: &[&Path], out: &Path) -> Result<(), Fail> {
    let same = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    };
    let names = weft_sim::report::output_names();
    for name in names.iter().map(String::as_str).chain([AGGREGATE]) {
        if let Some(input) = inputs.iter().find(|i| same(&dir.join(name), i)) {
            let name = dir.join(name);
            let name = name.strip_prefix(out).unwrap_or(&name);
            return Err(usage(format!(
                "--out {}: the report would replace its own input {} with its {}; choose \
                 another directory",
                out.display(),
                input.display(),
                name.display()
            )));
        }
    }
    Ok(())
}

/// `weft sim`.
pub fn sim(a: SimArgs) -> Result<(), Fail> {
    let models = parse_models(&a.nics)?;
    let mut ov = overrides(a.policy.clone(), a.link.as_deref(), &a.set)?;
    ov.max_offered_load = a.max_offered_load;
    ov.max_events = a.max_events;
    let seeds = a.seeds.as_deref().map(parse_seeds).transpose()?;
    let mut inputs = vec![a.scenario.as_path()];
    inputs.extend(a.policy.as_deref());
    check_out(&a.out, &inputs, seeds.as_deref())?;
    let mut sc = weft_sim::load(&a.scenario, &ov).map_err(|e| usage(e.to_string()))?;
    apply_overrides(&mut sc, a.seed, a.duration.as_deref())?;
    for w in &sc.policy_warnings {
        crate::out::errln!("{w}");
    }
    for w in sc.warnings() {
        crate::out::errln!("warning: {w}");
    }
    for app in sc.unclassified_apps() {
        crate::out::errln!(
            "warning: {app}: no leaf of policy `{}` matches its packets; models that run the \
             policy drop them (reason: unclassified)",
            sc.program.name
        );
    }
    if let Some(seeds) = seeds {
        return sim_seeds(&a, &mut sc, &models, &seeds);
    }
    let (runs, secs) = run_models(&sc, &models, a.quiet, a.progress, "sim")?;
    let sum = weft_sim::report::write(&a.out, &sc, &runs)
        .map_err(|e| (1, format!("cannot write {}: {e}", a.out.display())))?;
    if a.json {
        print(&(serde_json::to_string_pretty(&sum).unwrap_or_default() + "\n"))?;
    } else {
        print_table(&sum)?;
    }
    if !a.quiet {
        let pk: u64 = runs.iter().map(|r| r.packets).sum();
        let ev: u64 = runs.iter().map(|r| r.events).sum();
        crate::out::errln!(
            "{pk} packets ({ev} events) simulated in {secs:.2} s; wrote {0}/summary.json, timeseries.csv, latency.csv, latency-cdf.csv, jain.csv, *.svg, index.html",
            a.out.display()
        );
    }
    Ok(())
}

/// `weft sim --seeds`: the scenario once per seed, each seed's report in `OUT/seed-N/`
/// exactly as `--seed N` writes it, then `OUT/aggregate.json` ([`weft_sim::aggregate`])
/// and its table on stdout (the JSON with `--json`); a line per seed on stderr.
fn sim_seeds(
    a: &SimArgs,
    sc: &mut Scenario,
    models: &[NicKind],
    seeds: &[u64],
) -> Result<(), Fail> {
    // An earlier run's aggregate and seeds not run again, and a single report's files, do
    // not belong beside these seeds' directories.
    remove_earlier(&a.out, seeds)?;
    weft_sim::report::remove_outputs(&a.out).map_err(|e| (1, e.to_string()))?;
    let started = Instant::now();
    let mut sums = Vec::with_capacity(seeds.len());
    for (k, &seed) in seeds.iter().enumerate() {
        sc.seed = seed;
        let label = format!("sim seed {seed}");
        let (runs, secs) = run_models(sc, models, a.quiet, a.progress, &label)?;
        let dir = seed_dir(&a.out, seed);
        let sum = weft_sim::report::write(&dir, sc, &runs)
            .map_err(|e| (1, format!("cannot write {}: {e}", dir.display())))?;
        if !a.quiet {
            let pk: u64 = runs.iter().map(|r| r.packets).sum();
            let ev: u64 = runs.iter().map(|r| r.events).sum();
            crate::out::errln!(
                "seed {seed} ({} of {}): {pk} packets ({ev} events) simulated in {secs:.2} s; \
                 wrote {}/",
                k + 1,
                seeds.len(),
                dir.display()
            );
        }
        sums.push((seed, sum));
    }
    let agg = weft_sim::aggregate::aggregate(&sums);
    let text = serde_json::to_string_pretty(&agg).unwrap_or_default() + "\n";
    let path = a.out.join(AGGREGATE);
    std::fs::write(&path, &text)
        .map_err(|e| (1, format!("cannot write {}: {e}", path.display())))?;
    if a.json {
        print(&text)?;
    } else {
        print(&aggregate_table(&agg))?;
    }
    if !a.quiet {
        crate::out::errln!(
            "{} seeds in {:.2} s; wrote {} and a report per seed in {}/seed-N/",
            seeds.len(),
            started.elapsed().as_secs_f64(),
            path.display(),
            a.out.display()
        );
    }
    Ok(())
}

/// A statistic of aggregate.json (`{mean, ci95_half_width, min, max}`) as the table's
/// cells: mean, ± half width, min, max, times `scale`, to `digits` decimals (`-` where
/// there is none).
fn stat_cells(v: &Value, scale: f64, digits: usize) -> [String; 4] {
    ["mean", "ci95_half_width", "min", "max"].map(|k| fmt(&v[k], scale, digits))
}

/// The table of an aggregate (aggregate.json): per model, its headline metrics' mean, the
/// half width of their 95 % confidence interval, minimum and maximum over the seeds;
/// under it, for each model whose headline p90 was a lower bound in some seeds (`≥`
/// before the mean, which is then one too), in how many.
pub fn aggregate_table(agg: &Value) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let seeds: Vec<u64> = agg["seeds"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let headline = agg["headline_app"].as_str().unwrap_or("");
    let (ht, ha) = headline.split_once('/').unwrap_or(("", ""));
    let _ = writeln!(
        s,
        "{}  ({} seed{}: {}; {} s simulated each{})",
        agg["scenario"].as_str().unwrap_or(""),
        seeds.len(),
        if seeds.len() == 1 { "" } else { "s" },
        seeds_text(&seeds),
        seconds(&agg["duration_s"]),
        agg["time_scale"]
            .as_str()
            .map_or(String::new(), |s| format!("; {s}"))
    );
    let _ = writeln!(
        s,
        "over the seeds: mean, ± half width of its 95 % confidence interval (Student t), min, max"
    );
    let row = |s: &mut String, cells: [&str; 6]| {
        let _ = writeln!(
            s,
            "{:<8} {:<16} {:>12} {:>12} {:>12} {:>12}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
        );
    };
    row(
        &mut s,
        ["model", "metric", "mean", "± 95% CI", "min", "max"],
    );
    let p90 = format!("{ht} p90 us");
    let mut notes = String::new();
    if let Some(m) = agg["nics"].as_object() {
        for (k, v) in m {
            let lat = &v["tenants"][ht]["apps"][ha]["latency_us"];
            let metrics: [(&str, &Value, f64, usize); 8] = [
                ("jain_min", &v["jain_min"], 1.0, 4),
                ("jain_mean", &v["jain_mean"], 1.0, 4),
                (&p90, &lat["p90"], 1.0, 1),
                ("link_util", &v["link_utilization"], 1.0, 3),
                ("Gbit/s", &v["throughput_bps"], 1e-9, 3),
                ("doorbells/s", &v["doorbell_writes_per_s"], 1.0, 0),
                ("dma_reads/s", &v["dma_reads_per_s"], 1.0, 0),
                ("drops", &v["drops"], 1.0, 0),
            ];
            let lower = lat["p90_at_least"]["true_in"].as_u64().unwrap_or(0);
            for (name, stat, scale, digits) in metrics {
                let mut c = stat_cells(stat, scale, digits);
                if name == p90 && lower > 0 {
                    c[0] = format!("≥ {}", c[0]);
                }
                row(&mut s, [k, name, &c[0], &c[1], &c[2], &c[3]]);
            }
            if lower > 0 {
                let what = if v["tenants"][ht]["apps"][ha]["requests"].is_object() {
                    "requests unfinished"
                } else {
                    "packets still queued"
                };
                let _ = writeln!(
                    notes,
                    "≥ {k}: {headline}'s p90 is a lower bound in {lower} of {} seeds ({what} \
                     at the end count at their age then)",
                    lat["p90_at_least"]["n"]
                );
            }
        }
    }
    s + &notes
}

/// `weft sim --bench`: simulated packets per wall-clock second, Loom Fig. 9 with `loom`
/// (or the given scenario and models), best of three runs.
pub fn bench(scenario: Option<&Path>, nics: &[String], json_out: bool) -> Result<(), Fail> {
    let mut models = parse_models(nics)?;
    let ov = weft_sim::Overrides::default();
    let sc = match scenario {
        Some(p) => weft_sim::load(p, &ov).map_err(|e| usage(e.to_string()))?,
        None => weft_sim::load_str(Path::new("examples/scenarios/loom-fig9.yaml"), FIG9, &ov)
            .map_err(|e| usage(e.to_string()))?,
    };
    if models.is_empty() {
        models = vec![NicKind::Loom];
    }
    for &m in &models {
        let mut best = 0.0f64;
        let mut packets = 0;
        for _ in 0..3 {
            let t0 = Instant::now();
            let runs =
                weft_sim::try_run_all(&sc, &[m], &mut |_| {}).map_err(|e| usage(e.to_string()))?;
            let secs = t0.elapsed().as_secs_f64();
            packets = runs[0].packets;
            best = best.max(packets as f64 / secs);
        }
        if json_out {
            print(&format!(
                "{}\n",
                json!({"scenario": sc.name, "nic": m.name(), "packets": packets, "packets_per_s": best.round()})
            ))?;
        } else {
            print(&format!(
                "{} {:<6} {:>11} packets  {:>6.2} M simulated packets/s (best of 3)\n",
                sc.name,
                m.name(),
                crate::out::count(packets),
                best / 1e6
            ))?;
        }
    }
    Ok(())
}

/// What `weft demo` prints under its tables, and its page under its headline table.
const DEMO_LEGEND: &str =
    "jain_min: lowest Jain's index over windows with two or more backlogged tenants, on
throughput divided by the policy's share (1 = the policy held). p90: the first
request/response application's 90th percentile completion time over every request
that arrived, an unfinished one counting as its age at the end (≥: a lower bound).
link_util: the fraction of the run the link was transmitting. Paper figures and
commands: docs/reproduction.md.
";

/// `weft demo`'s scenarios: file, text, what to look for in its figures, what the paper
/// found (qualitatively, the figure cited; every number on the page is the run's own).
const DEMO_SCENARIOS: [(&str, &str, &str, &str); 2] = [
    (
        "examples/scenarios/loom-fig9.yaml",
        FIG9,
        "sq keeps fairness (jain_min near 1) but runs out of CPU below line rate (the lowest \
         link utilization); mq and qpf lose tenant fairness (the tenants with more flows take \
         more) and the latency app's priority (T0's p90 far above the others'); tonic and loom \
         keep both. The utilization is over the whole run, including the phases where only T0 \
         sends. In the charts: throughput per tenant as each tenant starts its flows, Jain's \
         index per window, T0's p90 per window on a log axis.",
        "Loom (NSDI '19) Fig. 9/10: SQ fair but below line rate; MQ and QPF give tenants with \
         more flows more; Loom fair at line rate. T0's p90 latency: all similar with few flows, \
         only Loom stays low with many; QPF worst.",
    ),
    (
        "examples/scenarios/hierarchy.yaml",
        HIERARCHY,
        "The tenants share by weight and run different numbers of bulk flows: a design that \
         shares by queue (mq) or by flow (qpf) gets the weights wrong (jain_min below 1), one \
         that enforces the policy (sq, tonic, loom) holds them. Inside each tenant the latency \
         app has priority over bulk: tenant A's p90 stays low where the priority holds and \
         grows where the NIC's round robin ignores it (≥: requests still unfinished at the end).",
        "Loom (NSDI '19) Fig. 4/13: with tenant fairness and memcached's strict priority \
         together, the DCB hybrids (MQ-Pri, MQ-Fair) get one but not the other; Loom gets both. \
         The hierarchy is drawn after TONIC Fig. 1 and Loom Fig. 13.",
    ),
];

/// `weft demo`: Loom Fig. 9/10 and the hierarchy for sq, mq, qpf, tonic and loom; report in
/// `out` (a report per scenario and a top page, `index.html`, with the headline table and
/// what to look for); a table per scenario on stdout.
pub fn demo(out: &Path, quiet: bool) -> Result<(), Fail> {
    let t0 = Instant::now();
    let mut tables = String::new();
    let mut pages = Vec::new();
    for (file, text, look_for, paper) in DEMO_SCENARIOS {
        let sc = weft_sim::load_str(Path::new(file), text, &weft_sim::Overrides::default())
            .map_err(|e| usage(e.to_string()))?;
        let (runs, _) = run_models(&sc, &DEMO_MODELS, quiet, false, &sc.name)?;
        let dir = out.join(&sc.name);
        let sum = weft_sim::report::write(&dir, &sc, &runs)
            .map_err(|e| (1, format!("cannot write {}: {e}", dir.display())))?;
        // Printed once the whole report is written (a reader that stops early costs no file).
        tables += &(table(&sum) + "\n");
        pages.push(weft_sim::report::TopScenario {
            dir: sc.name.clone(),
            summary: sum,
            look_for: look_for.into(),
            paper: paper.into(),
        });
    }
    tables.push_str(DEMO_LEGEND);
    let models: Vec<&str> = DEMO_MODELS.iter().map(|m| m.name()).collect();
    let index = weft_sim::report::top_page(
        "weft demo",
        &format!(
            "Two experiments, each run on five NIC designs ({}) in the simulator, seeds as in \
             the scenario files: the figures below are this run's (the same as `weft demo` \
             prints). The designs are models of mechanisms, not calibrated to the papers' \
             testbeds: compare the designs, not absolute numbers (docs/reproduction.md).",
            models.join(", ")
        ),
        &DEMO_LEGEND.trim_end().replace('\n', " "),
        &pages,
    );
    std::fs::write(out.join("index.html"), index)
        .map_err(|e| (1, format!("cannot write {}: {e}", out.display())))?;
    print(&tables)?;
    if !quiet {
        crate::out::errln!(
            "report: {}/index.html ({:.1} s)",
            out.display(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
