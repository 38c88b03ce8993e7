//! Checking single values at their place in the scenario file: times, sizes, rates, names
//! and free text, and each application with its kind's keys; every error names the file,
//! line and column of the value.
//!
//! Invariants: a value it returns holds its bound (sizes at most `MAX_SIZE_BYTES`, rates at
//! most `MAX_OFFERED_LOAD` times the link, names by the policy's name rule).
//!
//! Cost: linear in the value's text; an application's schedule, in its steps.

use serde_saphyr::Spanned;
use weft_core::classifier::PacketMeta;
use weft_core::policy::{self, Link};
use weft_core::units;

use super::model::{App, AppKind, Host, SizeDist, EXP_MAX_OVER_MEAN};
use super::raw::{RawApp, Scalar};
use super::ScenarioError;
use super::{MAX_OFFERED_LOAD, MAX_SIZE_BYTES};
use crate::net::Network;

/// An application's flow counts over time, `(time ps, flows)` steps, and where each step was
/// written ([`App::schedule`], [`App::schedule_at`]).
type Schedule = (Vec<(u64, u32)>, Vec<Option<String>>);

/// Where values are checked: the scenario file and the link its rates are checked against.
pub(super) struct Ctx<'a> {
    pub(super) path: &'a str,
    /// The link of the policy (the applications' rates are checked against it), and
    /// whether its rate came from `--link`.
    pub(super) link: Link,
    pub(super) link_from_cli: bool,
}

impl Ctx<'_> {
    pub(super) fn err(&self, at: &serde_saphyr::Location, message: String) -> ScenarioError {
        ScenarioError::At {
            path: self.path.to_string(),
            line: at.line(),
            column: at.column(),
            message,
        }
    }

    /// `file:line:column` of a location, for messages that name a second place.
    pub(super) fn at(&self, at: &serde_saphyr::Location) -> String {
        format!("{}:{}:{}", self.path, at.line(), at.column())
    }

    /// The link rate for messages: `10gbit (the policy's link)`.
    pub(super) fn link_text(&self) -> String {
        format!(
            "{} ({})",
            units::format_rate(self.link.rate_bps),
            if self.link_from_cli {
                "--link"
            } else {
                "the policy's link"
            }
        )
    }

    pub(super) fn time(&self, s: &Spanned<String>, positive: bool) -> Result<u64, ScenarioError> {
        units::parse_time(&s.value, positive).map_err(|e| self.err(&s.referenced, e.to_string()))
    }

    /// A tenant's or application's name, refused unless a policy node could have it
    /// ([`policy::names::valid_name`]): names are columns of the CSV files (written
    /// unquoted) and cells of the terminal table. A tenant's name has no `/` either, which
    /// joins it to its applications' names (`T1/kv`).
    pub(super) fn name(&self, name: &Spanned<String>, tenant: bool) -> Result<(), ScenarioError> {
        let n = &name.value;
        let q = policy::names::excerpt(n);
        let message = if let Some(problem) = policy::names::name_problem(n) {
            format!(
                "{} name {q} {problem}: names are columns of timeseries.csv and the other CSV \
                 files (written unquoted) and cells of the terminal table, as policy node \
                 names are",
                if tenant { "tenant" } else { "application" }
            )
        } else if tenant && n.contains('/') {
            format!(
                "tenant name {q} must not contain `/`: `tenant/app` names an application \
                 (summary.json's `headline_app`, the terminal table)"
            )
        } else {
            return Ok(());
        };
        Err(self.err(&name.referenced, message))
    }

    /// The scenario's `name`: a name as a tenant's ([`Ctx::name`]: it heads the terminal
    /// table and summary.json), and not `.` or `..`: `weft demo` makes it a directory.
    pub(super) fn scenario_name(&self, name: &Spanned<String>) -> Result<(), ScenarioError> {
        let n = &name.value;
        let why = "as tenant names: it heads the terminal table and summary.json, and `weft \
                   demo` writes a directory of that name";
        let q = policy::names::excerpt(n);
        let message = if let Some(problem) = policy::names::name_problem(n) {
            format!("scenario name {q} {problem}, {why}")
        } else if n.contains('/') {
            format!("scenario name {q} must not contain `/`, {why}")
        } else if n == "." || n == ".." {
            format!(
                "scenario name {n:?} names a directory already (`weft demo` writes one of the \
                 scenario's name)"
            )
        } else {
            return Ok(());
        };
        Err(self.err(&name.referenced, message))
    }

    /// Free text (`description`, `time_scale`): any characters but control ones (an escape
    /// sequence would reach the terminal, which prints `time_scale`) and bidirectional
    /// overrides (text that reads in another order than it is stored). `multiline` text
    /// (`description`) may hold newlines and tabs; a one-line note (`time_scale`, the
    /// table's heading) none.
    pub(super) fn free_text(
        &self,
        text: &Spanned<String>,
        key: &str,
        multiline: bool,
    ) -> Result<(), ScenarioError> {
        let allowed = |c: char| multiline && (c == '\n' || c == '\t');
        let bad = text
            .value
            .chars()
            .enumerate()
            .find(|&(_, c)| (c.is_control() && !allowed(c)) || policy::names::bidi_control(c));
        let Some((i, c)) = bad else {
            return Ok(());
        };
        let rule = if multiline {
            "free text may hold newlines and tabs but no other control characters (they \
             reach the terminal and index.html) nor bidirectional overrides"
        } else {
            "a one-line note (the terminal table's heading prints it): no newlines, tabs or \
             other control characters, nor bidirectional overrides"
        };
        Err(self.err(
            &text.referenced,
            format!(
                "`{key}` has {} U+{:04X} at character {}: {rule}",
                if c.is_control() {
                    "the control character"
                } else {
                    "the bidirectional formatting character"
                },
                c as u32,
                i + 1
            ),
        ))
    }

    pub(super) fn size(&self, s: &Spanned<String>) -> Result<u64, ScenarioError> {
        units::parse_size(&s.value, true).map_err(|e| self.err(&s.referenced, e.to_string()))
    }

    /// A size of at most [`MAX_SIZE_BYTES`]; `what` names the key in the message.
    pub(super) fn bounded_size(
        &self,
        s: &Spanned<String>,
        what: &str,
    ) -> Result<u64, ScenarioError> {
        let b = self.size(s)?;
        if b > MAX_SIZE_BYTES {
            return Err(self.err(
                &s.referenced,
                format!(
                    "{what} `{}` ({b} B) is too large: at most {} ({MAX_SIZE_BYTES} B: what an \
                     application writes or holds is cut into MTU packets, each held in memory \
                     until it leaves)",
                    s.value,
                    units::format_size(MAX_SIZE_BYTES)
                ),
            ));
        }
        Ok(b)
    }

    pub(super) fn rate(&self, s: &Spanned<String>) -> Result<u64, ScenarioError> {
        units::parse_rate(&s.value).map_err(|e| self.err(&s.referenced, e.to_string()))
    }

    /// A UDP flow's rate: at most [`MAX_OFFERED_LOAD`] times the link rate.
    fn udp_rate(&self, s: &Spanned<String>) -> Result<u64, ScenarioError> {
        let r = self.rate(s)?;
        let max = u128::from(self.link.rate_bps) * u128::from(MAX_OFFERED_LOAD);
        if u128::from(r) > max {
            return Err(self.err(
                &s.referenced,
                format!(
                    "rate `{}` ({r} bit/s) is more than {MAX_OFFERED_LOAD} times the link rate, \
                     {}: a UDP flow offers at most that ({max} bit/s), which is what \
                     `unlimited` offers; more would only be dropped at the socket, and make \
                     the run longer",
                    s.value,
                    self.link_text()
                ),
            ));
        }
        Ok(r)
    }

    /// Refuses a key that the application's kind does not read (`rate` on a bulk
    /// application, `window` on a UDP one): it would be ignored without a word.
    fn misplaced_keys(&self, ra: &RawApp) -> Result<(), ScenarioError> {
        const RR: &str = "request-response";
        let kind = ra.kind.value.as_str();
        let keys: [(&str, Option<&serde_saphyr::Location>, &[&str]); 7] = [
            (
                "transport",
                ra.transport.as_ref().map(|v| &v.referenced),
                &[RR],
            ),
            (
                "window",
                ra.window.as_ref().map(|v| &v.referenced),
                &["bulk"],
            ),
            (
                "rate",
                ra.rate.as_ref().map(|v| &v.referenced),
                &[RR, "udp"],
            ),
            (
                "size",
                ra.size.as_ref().map(|v| &v.referenced),
                &[RR, "tcp"],
            ),
            (
                "size_dist",
                ra.size_dist.as_ref().map(|v| &v.referenced),
                &[RR],
            ),
            (
                "closed_loop",
                ra.closed_loop.as_ref().map(|v| &v.referenced),
                &[RR],
            ),
            (
                "socket_limit",
                ra.socket_limit.as_ref().map(|v| &v.referenced),
                &["udp"],
            ),
        ];
        let does = match kind {
            "bulk" => "keeps `window` bytes queued per flow",
            RR => "answers requests with responses of `size` bytes",
            "udp" => "sends MTU packets at `rate` per flow",
            "tcp" => "keeps its TCP connections backlogged",
            // The kind itself is refused where it is read.
            _ => return Ok(()),
        };
        for (key, at, kinds) in keys {
            if let Some(at) = at.filter(|_| !kinds.contains(&kind)) {
                let belongs = kinds
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and ");
                return Err(self.err(
                    at,
                    format!(
                        "`{key}` belongs to {belongs} applications; `{}` is a `{kind}` \
                         application, which {does}",
                        ra.name.value
                    ),
                ));
            }
        }
        Ok(())
    }

    /// An application of tenant number `tenant` (`tmeta` its packet metadata): its kind's
    /// keys, metadata, cores, schedule and DCB class, checked in that order.
    pub(super) fn app(
        &self,
        ra: &RawApp,
        tenant: usize,
        tmeta: &PacketMeta,
        host: &Host,
        net: &Network,
        duration_ps: u64,
    ) -> Result<App, ScenarioError> {
        self.misplaced_keys(ra)?;
        let meta = self.app_meta(ra, tmeta)?;
        let kind = match ra.kind.value.as_str() {
            "bulk" => self.bulk(ra, host)?,
            "request-response" => self.request_response(ra, host)?,
            "udp" => self.udp(ra)?,
            "tcp" => AppKind::Tcp {
                size: match &ra.size {
                    None => None,
                    Some(s) => match self.bounded_size(s, "size")? {
                        0 => {
                            return Err(self.err(
                                &s.referenced,
                                "a TCP flow's `size` is at least 1 byte".into(),
                            ))
                        }
                        b => Some(b),
                    },
                },
            },
            other => {
                return Err(self.err(
                    &ra.kind.referenced,
                    format!("kind `{other}`: expected `bulk`, `request-response`, `udp` or `tcp`"),
                ))
            }
        };
        let cores = self.app_cores(ra, tenant, host)?;
        let (on, to) = self.app_hosts(ra, &kind, net)?;
        let (schedule, schedule_at) = self.schedule(ra, &kind, duration_ps)?;
        let dcb_class = match &ra.dcb_class {
            Some(c) if c.value > 7 => {
                return Err(self.err(&c.referenced, "dcb_class must be 0..=7".into()))
            }
            Some(c) => Some(c.value),
            None => None,
        };
        Ok(App {
            name: ra.name.value.clone(),
            tenant,
            meta,
            kind,
            cores,
            schedule,
            schedule_at,
            prioritized: ra.prioritized,
            dcb_class,
            host: on,
            to,
        })
    }

    /// The sending host the application runs on (`host`) and where its TCP connections go
    /// (`to`: a host's index or `receiver`, the default), each within `network.hosts`.
    fn app_hosts(
        &self,
        ra: &RawApp,
        kind: &AppKind,
        net: &Network,
    ) -> Result<(u16, u16), ScenarioError> {
        let on = match &ra.host {
            None => 0,
            Some(h) if h.value < net.hosts => h.value,
            Some(h) => {
                return Err(self.err(
                    &h.referenced,
                    format!(
                        "host {}: the network has {} sending host{} (`network.hosts`), \
                         numbered from 0",
                        h.value,
                        net.hosts,
                        if net.hosts == 1 { "" } else { "s" }
                    ),
                ))
            }
        };
        let to = match &ra.to {
            None => net.hosts,
            Some(t) if !kind.over_tcp() => {
                return Err(self.err(
                    &t.referenced,
                    "`to` belongs to applications over TCP (`tcp`, or request-response with \
                     `transport: tcp`): other packets end at the far end of the link"
                        .into(),
                ))
            }
            Some(t) => match &t.value {
                Scalar::Str(s) if s == "receiver" => net.hosts,
                Scalar::Int(i) if *i < u64::from(net.hosts) && *i != u64::from(on) => *i as u16,
                other => {
                    return Err(self.err(
                        &t.referenced,
                        format!(
                            "to `{}`: expected `receiver` or another sending host's index, \
                             0..{} (`network.hosts`)",
                            other.text(),
                            net.hosts
                        ),
                    ))
                }
            },
        };
        Ok((on, to))
    }

    /// The application's packet metadata: its tenant's, with its own `meta` over it.
    fn app_meta(&self, ra: &RawApp, tmeta: &PacketMeta) -> Result<PacketMeta, ScenarioError> {
        let mut meta = *tmeta;
        for (k, v) in &ra.meta {
            meta.set_field(k, &v.value.text())
                .map_err(|m| self.err(&v.referenced, format!("meta `{k}`: {m}")))?;
        }
        Ok(meta)
    }

    /// A `bulk` application: its `window` (two segments without one).
    fn bulk(&self, ra: &RawApp, host: &Host) -> Result<AppKind, ScenarioError> {
        Ok(AppKind::Bulk {
            window_bytes: match &ra.window {
                Some(w) => self.bounded_size(w, "window")?,
                None => 2 * host.segment_bytes,
            },
        })
    }

    /// A `request-response` application: its request rate (1/s for a closed loop without
    /// one), its responses' size, and, open loop, the load the responses offer.
    fn request_response(&self, ra: &RawApp, host: &Host) -> Result<AppKind, ScenarioError> {
        let closed_loop = ra.closed_loop.as_ref().is_some_and(|c| c.value);
        let rate = match (&ra.rate, closed_loop) {
            (Some(r), _) => r.clone(),
            (None, true) => Spanned {
                value: "1/s".to_string(),
                referenced: ra.kind.referenced,
                defined: ra.kind.defined,
            },
            (None, false) => {
                return Err(self.err(
                    &ra.kind.referenced,
                    "request-response needs `rate` (e.g. 10000/s) or `closed_loop: true`".into(),
                ))
            }
        };
        let rate = &rate;
        let rate_per_s = rate
            .value
            .trim_end_matches("/s")
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|r| *r > 0.0 && r.is_finite())
            .ok_or_else(|| {
                self.err(
                    &rate.referenced,
                    format!(
                        "rate `{}`: expected requests per second, e.g. `10000/s`",
                        rate.value
                    ),
                )
            })?;
        let size = self.response_size(ra)?;
        if !closed_loop {
            self.response_load(rate, rate_per_s, &size, host)?;
        }
        let tcp = match &ra.transport {
            None => false,
            Some(t) => match t.value.as_str() {
                "tcp" => true,
                "none" => false,
                other => {
                    return Err(self.err(
                        &t.referenced,
                        format!(
                            "transport `{other}`: expected `tcp` (responses over TCP across \
                             `network`) or `none` (written at once, the default)"
                        ),
                    ))
                }
            },
        };
        Ok(AppKind::RequestResponse {
            rate_per_s,
            size,
            closed_loop,
            tcp,
        })
    }

    /// A request/response application's `size` and `size_dist`: an exponential size's
    /// largest draw within [`MAX_SIZE_BYTES`].
    fn response_size(&self, ra: &RawApp) -> Result<SizeDist, ScenarioError> {
        let bytes = match &ra.size {
            Some(s) => self.bounded_size(s, "size")?,
            None => 1000,
        };
        let size = match ra.size_dist.as_ref().map(|d| d.value.as_str()) {
            None | Some("fixed") => SizeDist::Fixed(bytes),
            Some("exponential") => SizeDist::Exponential(bytes),
            Some(other) => {
                return Err(self.err(
                    &ra.size_dist.as_ref().expect("some").referenced,
                    format!("size_dist `{other}`: expected `fixed` or `exponential`"),
                ))
            }
        };
        if size.max_bytes() > MAX_SIZE_BYTES {
            // Only an exponential size gets here: its draws reach 36.7 means.
            let s = ra.size.as_ref().expect("a size past the bound was given");
            let max_mean = (MAX_SIZE_BYTES as f64 / EXP_MAX_OVER_MEAN) as u64;
            return Err(self.err(
                &s.referenced,
                format!(
                    "size `{}` ({bytes} B): exponential sizes are drawn up to \
                     {EXP_MAX_OVER_MEAN:.1} times their mean ({} B), and a response \
                     is at most {} ({MAX_SIZE_BYTES} B): the mean is at most \
                     {max_mean} B",
                    s.value,
                    size.max_bytes(),
                    units::format_size(MAX_SIZE_BYTES)
                ),
            ));
        }
        Ok(size)
    }

    /// An open-loop request/response application's responses on the wire, frame overhead
    /// included, as a UDP flow's rate is: at most [`MAX_OFFERED_LOAD`] times the link rate.
    fn response_load(
        &self,
        rate: &Spanned<String>,
        rate_per_s: f64,
        size: &SizeDist,
        host: &Host,
    ) -> Result<(), ScenarioError> {
        let mean = size.mean_bytes();
        let mtu = u64::from(host.mtu_bytes);
        let wire_bytes =
            mean.saturating_add(mean.div_ceil(mtu).saturating_mul(self.link.overhead_bytes));
        let offered = rate_per_s * wire_bytes as f64 * 8.0;
        let max = self.link.rate_bps as f64 * MAX_OFFERED_LOAD as f64;
        if offered > max {
            let max_rate = (max / (wire_bytes as f64 * 8.0) * 1000.0).floor() / 1000.0;
            return Err(self.err(
                &rate.referenced,
                format!(
                    "rate `{}` of {mean} B responses ({wire_bytes} B on the wire \
                     with {} B of overhead a frame) offers {offered:.0} bit/s, more than \
                     {MAX_OFFERED_LOAD} times the link rate, {}: an application \
                     offers at most that, as `unlimited` UDP does; at most \
                     {max_rate}/s here",
                    rate.value,
                    self.link.overhead_bytes,
                    self.link_text()
                ),
            ));
        }
        Ok(())
    }

    /// A `udp` application: its rate per flow (`unlimited` without one) and socket limit.
    fn udp(&self, ra: &RawApp) -> Result<AppKind, ScenarioError> {
        Ok(AppKind::Udp {
            rate_bps: match &ra.rate {
                Some(r) if r.value == "unlimited" => None,
                Some(r) => Some(self.udp_rate(r)?),
                None => None,
            },
            socket_limit_bytes: match &ra.socket_limit {
                Some(s) => self.bounded_size(s, "socket_limit")?,
                None => 212_992,
            },
        })
    }

    /// The application's `cores`, each on the host (without the key, one core: the tenant's
    /// number modulo the cores).
    fn app_cores(
        &self,
        ra: &RawApp,
        tenant: usize,
        host: &Host,
    ) -> Result<Vec<u16>, ScenarioError> {
        Ok(match &ra.cores {
            Some(c) => {
                if c.value.is_empty() {
                    return Err(self.err(&c.referenced, "`cores` is empty".into()));
                }
                if let Some(bad) = c.value.iter().find(|&&x| x >= host.cores) {
                    return Err(self.err(
                        &c.referenced,
                        format!(
                            "core {bad} does not exist (the host has {} cores)",
                            host.cores
                        ),
                    ));
                }
                c.value.clone()
            }
            None => vec![(tenant as u16) % host.cores],
        })
    }

    /// The application's flow counts over time (`start`, `schedule`, `stop`), and where
    /// each step was written (`None` for a default or the stop).
    fn schedule(
        &self,
        ra: &RawApp,
        kind: &AppKind,
        duration_ps: u64,
    ) -> Result<Schedule, ScenarioError> {
        let start = match &ra.start {
            Some(s) => self.time(s, false)?,
            None => 0,
        };
        let stop = match &ra.stop {
            Some(s) => self.time(s, false)?,
            None => duration_ps,
        };
        if let (Some(s), true) = (&ra.stop, stop <= start) {
            return Err(self.err(&s.referenced, "stop must come after start".into()));
        }
        let default_flows = if matches!(kind, AppKind::RequestResponse { .. }) {
            1
        } else {
            ra.flows.unwrap_or(1)
        };
        let mut schedule = vec![(start, ra.flows.unwrap_or(default_flows))];
        let mut schedule_at = vec![ra.start.as_ref().map(|s| self.at(&s.referenced))];
        if let Some(steps) = &ra.schedule {
            let mut last = start;
            for st in steps {
                let at = self.time(&st.at, false)?;
                if at < last {
                    return Err(self.err(
                        &st.at.referenced,
                        "schedule steps must be in time order, after `start`".into(),
                    ));
                }
                if let (Some(s), true) = (&ra.stop, at >= stop) {
                    // Taken after the stop, the step would start the flows again.
                    return Err(self.err(
                        &st.at.referenced,
                        format!(
                            "schedule step to {} flows at {} is at or after {}'s `stop` ({}, \
                             at {}): it would start the application's flows again after it \
                             ended; end the schedule before `stop`, or move `stop`",
                            st.flows,
                            units::format_time(at),
                            ra.name.value,
                            units::format_time(stop),
                            self.at(&s.referenced),
                        ),
                    ));
                }
                last = at;
                schedule.push((at, st.flows));
                schedule_at.push(Some(self.at(&st.at.referenced)));
            }
        }
        if stop < duration_ps || ra.stop.is_some() {
            schedule.push((stop, 0));
            schedule_at.push(None);
        }
        Ok((schedule, schedule_at))
    }
}
