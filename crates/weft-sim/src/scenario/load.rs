//! Loading a scenario's text ([`load_str`]): the YAML read into `raw` structures, then the
//! policy (file or inline, compiled with the scenario's link override), times, NIC models
//! and parameters, host, tenants and applications, limits and names, each checked at its
//! place in the file. Each is a pass of its own (a function, or a method of the `Loader`
//! that holds what they all read), run in that order by `load_str`.
//!
//! Invariants: what it returns holds the module's invariants; the first broken rule is
//! returned as the error, naming the file, line and column of its value.
//!
//! Cost: linear in the file, plus the policy's compilation and the offered-load check
//! (O(schedule steps × applications)).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_saphyr::Spanned;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{self, Link, LoadOptions, Program};

use super::ctx::Ctx;
use super::messages::{first_line, without_location, yaml_message};
use super::model::App;
use super::model::{Host, Placement, Scenario, Tenant};
use super::raw::{RawApp, RawScenario, RawTenant};
use super::time::{check_cells, check_times, fmt_ps, parse_time_scale, TimeRule};
use super::{Overrides, ScenarioError, MAX_BURST_PACKETS, MAX_FLOWS, MTU_RANGE};
use crate::net::Network;
use crate::nic::{NicKind, NicParams};

/// A hint for a scenario that fails to parse because it is a policy file (top-level `weft:`
/// and `nodes:` keys): what to do instead. Empty otherwise.
fn policy_hint(text: &str) -> &'static str {
    let top = |key: &str| text.lines().any(|l| l.starts_with(key));
    if top("weft:") && top("nodes:") {
        " (this file is a policy, not a scenario: a scenario names its policy with \
         `policy: FILE`, see examples/scenarios/README.md; `weft sim SCENARIO --policy FILE` \
         runs a scenario with another policy, `weft replay --policy FILE` replays a trace)"
    } else {
        ""
    }
}

/// Parses scenario text. `path` is used in messages and to resolve a relative `policy:`.
///
/// The passes run in the file's order of concerns, and each returns the first rule its part
/// breaks, so the error of a file that breaks several is always the same one.
pub fn load_str(path: &Path, text: &str, ov: &Overrides) -> Result<Scenario, ScenarioError> {
    let p = path.display().to_string();
    let raw = parse(&p, text)?;
    let mut l = Loader {
        path,
        text,
        ov,
        raw: &raw,
        ctx: Ctx {
            path: &p,
            link: Link::default(),
            link_from_cli: false,
        },
    };
    let program = l.policy()?;
    // The applications' rates are checked against the link the policy schedules onto.
    l.ctx.link = program.link;
    l.ctx.link_from_cli = ov.link_rate_bps.is_some();
    let times = l.times()?;
    let nics = l.nics()?;
    let nic_params = l.nic_params()?;
    let host = l.host()?;
    let mut network = l.ctx.network(raw.network.as_ref(), &host)?;
    network.rx_policy = l.receiver_policy()?;
    let apps = l.tenants(&host, &network, times.duration_ps)?;
    check_cells(
        times.duration_ps,
        times.window_ps,
        times.latency_window_ps,
        apps.apps.len(),
    )
    .map_err(|m| l.time_rule(m))?;
    let limits = l.ctx.limits(raw.limits.as_ref(), ov)?;
    let offered_load = l.ctx.offered_load(
        &apps.apps,
        &apps.raw_apps,
        &apps.tenants,
        &host,
        times.duration_ps,
        &limits,
    )?;
    let name = l.name()?;
    let time_scale_ratio = l.time_scale()?;
    let policy_warnings = l.policy_warnings(&program);
    Ok(Scenario {
        name,
        description: raw
            .description
            .as_ref()
            .map(|d| d.value.clone())
            .unwrap_or_default(),
        path: p.clone(),
        program: Arc::new(program),
        duration_ps: times.duration_ps,
        seed: raw.seed.unwrap_or(1),
        window_ps: times.window_ps,
        window_at: raw.window.as_ref().map(|w| l.ctx.at(&w.referenced)),
        latency_window_ps: times.latency_window_ps,
        nics,
        nic_params,
        host,
        network,
        tenants: apps.tenants,
        apps: apps.apps,
        time_scale: raw.time_scale.as_ref().map(|t| t.value.clone()),
        time_scale_ratio,
        latency_window_at: raw.latency_window.as_ref().map(|w| l.ctx.at(&w.referenced)),
        policy_warnings,
        offered_load,
        max_offered_load: limits.max_offered_load,
        max_events: limits.max_events,
        max_events_from: limits.max_events_from,
    })
}

/// The first pass: the text read as YAML into the file's shape ([`RawScenario`]), or the
/// YAML library's error in the scenario's terms (with a hint when the file is a policy).
fn parse(p: &str, text: &str) -> Result<RawScenario, ScenarioError> {
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        let message = yaml_message(&e, text, line, column)
            .unwrap_or_else(|| without_location(&first_line(&e.to_string())));
        ScenarioError::At {
            path: p.to_string(),
            line: line.max(1),
            column: column.max(1),
            message: message + policy_hint(text),
        }
    })
}

/// What every pass after the YAML's reads: the file's path and text, its YAML, the CLI's
/// overrides, and where values are checked ([`Ctx`], whose link is the policy's once
/// [`Loader::policy`] has compiled it).
struct Loader<'a> {
    path: &'a Path,
    text: &'a str,
    ov: &'a Overrides,
    raw: &'a RawScenario,
    ctx: Ctx<'a>,
}

/// The run's length and its windows, ps.
struct Times {
    duration_ps: u64,
    window_ps: u64,
    latency_window_ps: u64,
}

/// The tenants and their applications, in the file's order, and where each application was
/// written (for the offered load's message).
struct Tenants<'a> {
    tenants: Vec<Tenant>,
    apps: Vec<App>,
    raw_apps: Vec<&'a RawApp>,
}

/// The flows of the applications so far, and the packets they write at once, each
/// against its limit ([`MAX_FLOWS`], [`MAX_BURST_PACKETS`]).
#[derive(Default)]
struct Totals {
    flows: u64,
    burst: u64,
}

impl Totals {
    /// Counts `app` (`ra` of tenant `rt`) in: the first limit it breaks is the error.
    fn add(
        &mut self,
        ctx: &Ctx<'_>,
        rt: &RawTenant,
        ra: &RawApp,
        app: &App,
        host: &Host,
        net: &Network,
    ) -> Result<(), ScenarioError> {
        self.flows += app.max_flows() as u64;
        let flows = self.flows;
        if flows > MAX_FLOWS {
            return Err(ctx.err(
                &ra.kind.referenced,
                format!(
                    "{}/{}: the applications have {flows} flows so far; at most \
                     {MAX_FLOWS} in all (every flow is simulated one by one)",
                    rt.name.value, ra.name.value
                ),
            ));
        }
        self.burst = self.burst.saturating_add(app.burst_packets(host, net));
        let burst = self.burst;
        if burst > MAX_BURST_PACKETS {
            return Err(ctx.err(
                &ra.kind.referenced,
                format!(
                    "{}/{}: the applications write {burst} packets at once so far (every \
                     bulk flow its window, every closed-loop flow its largest response, \
                     in {} B packets, every TCP connection its `network.tcp` tsq and rwnd \
                     in segments); at most {MAX_BURST_PACKETS} in all (each is held in \
                     memory until it leaves): give fewer flows or smaller windows",
                    rt.name.value, ra.name.value, host.mtu_bytes
                ),
            ));
        }
        Ok(())
    }
}

impl<'a> Loader<'a> {
    /// The policy: `--policy`'s file, `policy`'s (relative to the scenario) or
    /// `policy_inline`, compiled with the link override.
    fn policy(&self) -> Result<Program, ScenarioError> {
        let (p, raw, ctx) = (self.ctx.path, self.raw, &self.ctx);
        let lopts = LoadOptions {
            link_rate_bps: self.ov.link_rate_bps,
            ..LoadOptions::default()
        };
        Ok(
            match (self.ov.policy.as_deref(), &raw.policy, &raw.policy_inline) {
                (Some(f), _, _) => load_policy_file(p, f, &lopts)?,
                (None, Some(f), None) => {
                    let base = self.path.parent().unwrap_or(Path::new("."));
                    let file: PathBuf = base.join(&f.value);
                    if !file.exists() {
                        return Err(ctx.err(
                            &f.referenced,
                            format!("policy file {} not found", file.display()),
                        ));
                    }
                    load_policy_file(p, &file, &lopts)?
                }
                (None, None, Some(inline)) => {
                    let name = format!("{p} (policy_inline)");
                    policy::compile_str(Path::new(&name), &inline.value, &lopts).map_err(|e| {
                        ScenarioError::PolicyInline {
                            message: inline_diagnostics(
                                &e.diagnostics,
                                &e.sources,
                                p,
                                self.text,
                                ("policy_inline", inline),
                            )
                            .join("\n"),
                        }
                    })?
                }
                (None, Some(f), Some(_)) => {
                    return Err(ctx.err(
                        &f.referenced,
                        "give `policy` or `policy_inline`, not both".into(),
                    ))
                }
                (None, None, None) => {
                    return Err(ScenarioError::At {
                        path: p.to_string(),
                        line: 1,
                        column: 1,
                        message: "missing `policy` (a file) or `policy_inline` (the policy's YAML)"
                            .into(),
                    })
                }
            },
        )
    }

    /// `duration` (or `--duration`), `window` and `latency_window`, and their rules.
    fn times(&self) -> Result<Times, ScenarioError> {
        let (ctx, raw) = (&self.ctx, self.raw);
        let duration_ps = ctx.time(&raw.duration, true)?;
        let window_ps = match &raw.window {
            Some(w) => ctx.time(w, true)?,
            None => (duration_ps / 100).max(1),
        };
        let latency_window_ps = match &raw.latency_window {
            Some(w) => ctx.time(w, true)?,
            // Five windows; a window as long as the clock is one window, whatever its length.
            None => window_ps.saturating_mul(5),
        };
        let duration_ps = self.ov.duration_ps.unwrap_or(duration_ps);
        check_times(duration_ps, window_ps, latency_window_ps).map_err(|m| self.time_rule(m))?;
        Ok(Times {
            duration_ps,
            window_ps,
            latency_window_ps,
        })
    }

    /// A rule of the run's length broken: `--duration`'s, or the key's that makes it so.
    fn time_rule(&self, m: TimeRule) -> ScenarioError {
        let raw = self.raw;
        match self.ov.duration_ps {
            Some(d) => ScenarioError::Override {
                what: "--duration",
                message: format!("{}: {m}", fmt_ps(d)),
            },
            None => {
                let at = match m.what {
                    "window" => raw.window.as_ref().unwrap_or(&raw.duration),
                    "latency_window" => raw.latency_window.as_ref().unwrap_or(&raw.duration),
                    _ => &raw.duration,
                };
                self.ctx.err(&at.referenced, format!("{}: {m}", at.value))
            }
        }
    }

    /// `nics`: the NIC models to run, each once (all of them without the key).
    fn nics(&self) -> Result<Vec<NicKind>, ScenarioError> {
        let ctx = &self.ctx;
        let Some(list) = &self.raw.nics else {
            return Ok(NicKind::ALL.to_vec());
        };
        if list.value.is_empty() {
            return Err(ctx.err(
                &list.referenced,
                "`nics` is empty: list the NIC models to run, or leave `nics` out to run \
                 them all"
                    .into(),
            ));
        }
        let mut nics: Vec<(NicKind, &Spanned<String>)> = Vec::new();
        for n in &list.value {
            let k = NicKind::from_name(&n.value)
                .ok_or_else(|| ctx.err(&n.referenced, NicKind::unknown(&n.value)))?;
            if let Some((_, first)) = nics.iter().find(|(f, _)| *f == k) {
                return Err(ctx.err(
                    &n.referenced,
                    format!(
                        "NIC model `{}` is listed twice (first at {}): results are keyed \
                         by model",
                        n.value,
                        ctx.at(&first.referenced)
                    ),
                ));
            }
            nics.push((k, n));
        }
        Ok(nics.into_iter().map(|(k, _)| k).collect())
    }

    /// The NIC models' parameters: `nic:`'s, then `--set`'s over them.
    fn nic_params(&self) -> Result<NicParams, ScenarioError> {
        let mut nic_params = NicParams::default();
        if let Some(m) = &self.raw.nic {
            for (model, params) in m {
                for (key, v) in params {
                    nic_params
                        .set(model, key, &v.value.text())
                        .map_err(|msg| self.ctx.err(&v.referenced, msg))?;
                }
            }
        }
        for (model, key, v) in &self.ov.nic_params {
            nic_params
                .set(model, key, v)
                .map_err(|message| ScenarioError::Override {
                    what: "--set",
                    message: format!("`{model}.{key}={v}`: {message}"),
                })?;
        }
        Ok(nic_params)
    }

    /// `network.receiver.policy_inline`, compiled (its diagnostics at the scenario's lines).
    fn receiver_policy(&self) -> Result<Option<Arc<Program>>, ScenarioError> {
        let Some(inline) = self
            .raw
            .network
            .as_ref()
            .and_then(|n| n.receiver.as_ref())
            .and_then(|r| r.policy_inline.as_ref())
        else {
            return Ok(None);
        };
        let p = self.ctx.path;
        let name = format!("{p} (network.receiver.policy_inline)");
        let program = policy::compile_str(Path::new(&name), &inline.value, &LoadOptions::default())
            .map_err(|e| ScenarioError::PolicyInline {
                message: inline_diagnostics(
                    &e.diagnostics,
                    &e.sources,
                    p,
                    self.text,
                    ("network.receiver.policy_inline", inline),
                )
                .join("\n"),
            })?;
        Ok(Some(Arc::new(program)))
    }

    /// `host:`, each key's default where it is left out.
    fn host(&self) -> Result<Host, ScenarioError> {
        let ctx = &self.ctx;
        let rh = self.raw.host.as_ref();
        Ok(Host {
            cores: match rh.and_then(|h| h.cores.as_ref()) {
                Some(c) if c.value == 0 => {
                    return Err(ctx.err(
                        &c.referenced,
                        "`cores: 0`: a host has at least 1 core".into(),
                    ))
                }
                Some(c) => c.value,
                None => 8,
            },
            segment_bytes: match rh.and_then(|h| h.segment.as_ref()) {
                Some(s) => ctx.bounded_size(s, "segment")?,
                None => 65_536,
            },
            mtu_bytes: match rh.and_then(|h| h.mtu.as_ref()) {
                Some(s) => {
                    let m = ctx.size(s)?;
                    if !MTU_RANGE.contains(&m) {
                        return Err(ctx.err(
                            &s.referenced,
                            format!(
                                "mtu `{}` ({m} B) is out of range: it must be {}b..={}b",
                                s.value,
                                MTU_RANGE.start(),
                                MTU_RANGE.end()
                            ),
                        ));
                    }
                    m as u32
                }
                None => 1500,
            },
            cpu_ps_per_packet: match rh.and_then(|h| h.cpu_per_packet.as_ref()) {
                Some(s) => ctx.time(s, false)?,
                None => 100_000,
            },
            cpu_ps_per_doorbell: match rh.and_then(|h| h.cpu_per_doorbell.as_ref()) {
                Some(s) => ctx.time(s, false)?,
                None => 50_000,
            },
            placement: match rh.and_then(|h| h.placement.as_ref()) {
                None => Placement::Random,
                Some(s) => match s.value.as_str() {
                    "random" => Placement::Random,
                    "round-robin" => Placement::RoundRobin,
                    other => {
                        return Err(ctx.err(
                            &s.referenced,
                            format!("placement `{other}`: expected `random` or `round-robin`"),
                        ))
                    }
                },
            },
            retry_ps: match rh.and_then(|h| h.retry.as_ref()) {
                Some(s) => ctx.time(s, true)?,
                None => 200_000_000,
            },
            migrate_ps: match rh.and_then(|h| h.migrate.as_ref()) {
                Some(s) => Some(ctx.time(s, true)?),
                None => None,
            },
        })
    }

    /// The tenants and their applications, each name unique in its scope, within the
    /// limits on flows and on packets written at once.
    fn tenants(
        &self,
        host: &Host,
        network: &Network,
        duration_ps: u64,
    ) -> Result<Tenants<'a>, ScenarioError> {
        let (ctx, raw) = (&self.ctx, self.raw);
        let mut out = Tenants {
            tenants: Vec::new(),
            apps: Vec::new(),
            raw_apps: Vec::new(),
        };
        let mut totals = Totals::default();
        if raw.tenants.is_empty() {
            return Err(ScenarioError::At {
                path: ctx.path.to_string(),
                line: 1,
                column: 1,
                message: "no tenants".into(),
            });
        }
        // Where each tenant's name was given: names key the tenants in summary.json and the
        // CSV files, so a second tenant of the same name would hide the first's results.
        let mut tenant_names: BTreeMap<&str, &Spanned<String>> = BTreeMap::new();
        for (ti, rt) in raw.tenants.iter().enumerate() {
            ctx.name(&rt.name, true)?;
            if let Some(first) = tenant_names.insert(&rt.name.value, &rt.name) {
                return Err(ctx.err(
                    &rt.name.referenced,
                    format!(
                        "tenant `{}` is named twice (first at {}): tenant names key the \
                         results in summary.json and the CSV files",
                        rt.name.value,
                        ctx.at(&first.referenced)
                    ),
                ));
            }
            let mut tmeta = PacketMeta::default();
            for (k, v) in &rt.meta {
                tmeta
                    .set_field(k, &v.value.text())
                    .map_err(|m| ctx.err(&v.referenced, format!("meta `{k}`: {m}")))?;
            }
            let mut t = Tenant {
                name: rt.name.value.clone(),
                apps: Vec::new(),
            };
            let mut app_names: BTreeMap<&str, &Spanned<String>> = BTreeMap::new();
            if rt.apps.value.is_empty() {
                return Err(ctx.err(
                    &rt.apps.referenced,
                    format!(
                        "tenant `{}` has no applications (`apps` is empty): give it at least \
                         one, or leave the tenant out",
                        rt.name.value
                    ),
                ));
            }
            for ra in &rt.apps.value {
                ctx.name(&ra.name, false)?;
                if let Some(first) = app_names.insert(&ra.name.value, &ra.name) {
                    return Err(ctx.err(
                        &ra.name.referenced,
                        format!(
                            "application `{}` of tenant `{}` is named twice (first at {}): \
                             application names key a tenant's results in summary.json and the \
                             CSV files",
                            ra.name.value,
                            rt.name.value,
                            ctx.at(&first.referenced)
                        ),
                    ));
                }
                let app = ctx.app(ra, ti, &tmeta, host, network, duration_ps)?;
                totals.add(ctx, rt, ra, &app, host, network)?;
                t.apps.push(out.apps.len());
                out.apps.push(app);
                out.raw_apps.push(ra);
            }
            out.tenants.push(t);
        }
        Ok(out)
    }

    /// The scenario's name (`name`, else the file's), and `description` checked.
    fn name(&self) -> Result<String, ScenarioError> {
        let name = match &self.raw.name {
            Some(n) => {
                self.ctx.scenario_name(n)?;
                n.value.clone()
            }
            None => default_name(self.path),
        };
        if let Some(d) = &self.raw.description {
            self.ctx.free_text(d, "description", true)?;
        }
        Ok(name)
    }

    /// `time_scale`'s ratio, paper time to simulated time.
    fn time_scale(&self) -> Result<Option<(u64, u64)>, ScenarioError> {
        let Some(ts) = &self.raw.time_scale else {
            return Ok(None);
        };
        self.ctx.free_text(ts, "time_scale", false)?;
        Ok(Some(parse_time_scale(&ts.value).map_err(|m| {
            self.ctx
                .err(&ts.referenced, format!("time_scale {:?}: {m}", ts.value))
        })?))
    }

    /// The policy's warnings, each on a line; an inline policy's at their place in the
    /// scenario file.
    fn policy_warnings(&self, program: &Program) -> Vec<String> {
        let raw = self.raw;
        match (
            &program.warnings,
            self.ov.policy.as_deref(),
            &raw.policy,
            &raw.policy_inline,
        ) {
            (None, ..) => Vec::new(),
            (Some(w), None, None, Some(inline)) => inline_diagnostics(
                &w.diagnostics,
                &w.sources,
                self.ctx.path,
                self.text,
                ("policy_inline", inline),
            ),
            (Some(w), ..) => w.diagnostics.iter().map(|d| w.render_one(d)).collect(),
        }
    }
}

/// The name of a scenario without `name`: its file's stem in Unicode's composed form, each
/// character a name may not have (see [`Ctx::scenario_name`]) replaced by `_` (`my
/// run.yaml`: `my_run`); `scenario` for a stem of none, `.` or `..`.
fn default_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| policy::names::to_nfc(&s.to_string_lossy()).into_owned())
        .unwrap_or_default();
    let name: String = stem
        .chars()
        .map(|c| {
            if c == '/' || !policy::names::name_char(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    if name.is_empty() || name == "." || name == ".." {
        "scenario".into()
    } else {
        name
    }
}

fn load_policy_file(
    scenario: &str,
    file: &Path,
    opts: &LoadOptions,
) -> Result<Program, ScenarioError> {
    policy::load(file, opts).map_err(|e| ScenarioError::Policy {
        path: scenario.to_string(),
        message: e.render_plain(),
    })
}

/// Where `policy_inline`'s text lies in the scenario file: the file line of its first line
/// and the columns its lines are indented by (the YAML library places the value at its first
/// character). Only a literal block (`policy_inline: |`) keeps the lines as written, and
/// only when every line is found where it should be; `None` otherwise (a quoted or folded
/// value).
fn block_origin(text: &str, inline: &Spanned<String>) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = inline.referenced;
    let first = usize::try_from(at.line()).ok()?;
    let start = lines.get(first.checked_sub(1)?)?;
    // Columns count characters; the indentation is spaces, one byte each.
    let indent = usize::try_from(at.column()).ok()?.checked_sub(1)?;
    if !start.get(..indent)?.chars().all(|c| c == ' ') {
        return None;
    }
    let body = inline.value.strip_suffix('\n').unwrap_or(&inline.value);
    let found = body.lines().enumerate().all(|(i, l)| {
        lines.get(first - 1 + i).is_some_and(|f| {
            if l.is_empty() {
                f.trim().is_empty()
            } else {
                f.len() == indent + l.len() && f[..indent].trim().is_empty() && f[indent..] == *l
            }
        })
    });
    found.then_some((first, indent))
}

/// The diagnostics of an inline policy (errors or warnings), each at its line and column in
/// the scenario file (`file:line:col: KEY: error[rule]: ...`, KEY the block's key:
/// `policy_inline` or `network.receiver.policy_inline`); when the block's lines cannot be
/// found in the file, at the line and column within the block, naming where it starts.
fn inline_diagnostics(
    diagnostics: &[policy::Diagnostic],
    sources: &policy::Sources,
    path: &str,
    text: &str,
    (key, inline): (&str, &Spanned<String>),
) -> Vec<String> {
    let origin = block_origin(text, inline);
    diagnostics
        .iter()
        .map(|d| {
            let one = policy::render_line(sources, d);
            if d.span.file != 0 {
                // A sub-policy file the inline policy attaches names its own place.
                return one;
            }
            let (file, line, col) = sources.location(d.span);
            let rest = one
                .strip_prefix(&format!("{file}:{line}:{col}: "))
                .unwrap_or(&one);
            match origin {
                Some((first, indent)) => format!(
                    "{path}:{}:{}: {key}: {rest}",
                    first + line - 1,
                    col + indent
                ),
                None => format!(
                    "{path}:{}:{}: {key} (line {line}, column {col} of its text): {rest}",
                    inline.referenced.line(),
                    inline.referenced.column()
                ),
            }
        })
        .collect()
}
