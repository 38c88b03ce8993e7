//! What a scenario may ask of the simulator: its limits (`limits:`, the CLI's overrides or
//! the defaults) and the offered load, the most all applications offer together at any
//! instant, in multiples of the link rate, refused above the limit.
//!
//! Invariants: the peak is taken over every instant a schedule changes a flow count, so no
//! instant of the run offers more than it says.
//!
//! Cost: O(schedule steps × applications).

use serde_saphyr::Spanned;
use weft_core::policy::Link;
use weft_core::units;

use super::ctx::Ctx;
use super::model::{App, AppKind, Host, Tenant};
use super::raw::{RawApp, RawLimits};
use super::{
    Overrides, ScenarioError, DEFAULT_MAX_EVENTS, DEFAULT_MAX_TOTAL_OFFERED_LOAD, MAX_OFFERED_LOAD,
};

/// What a scenario may ask of the simulator: its `limits:`, or the CLI's overrides, or the
/// defaults.
pub(super) struct Limits {
    /// Multiples of the link rate.
    pub(super) max_offered_load: u64,
    /// Where the cap came from, for messages: `--max-offered-load`, `file:line:col` or
    /// `None` (the default).
    pub(super) max_offered_load_from: Option<String>,
    /// Events of one model's run.
    pub(super) max_events: u64,
    /// As `max_offered_load_from`, for `max_events`.
    pub(super) max_events_from: Option<String>,
}

/// Why the offered load is capped, and how to raise the cap, for messages.
pub(super) const OFFERED_WHY: &str =
    "the simulator handles every packet offered (a timed event and a \
     write, whether it is sent or dropped at the socket or in the NIC), so a run's work \
     grows with the offered load, not with what the link carries. Give fewer flows or lower \
     rates, or raise the cap with `limits: {max_offered_load: N}` in the scenario or \
     `--max-offered-load N`";

/// The worst instant of the applications' offered load ([`peak_offered`]).
pub(super) struct Peak {
    /// When it starts, ps.
    pub(super) at_ps: u64,
    /// What the UDP flows offer then, bit/s, exactly; what the responses offer, bit/s.
    pub(super) udp_bps: u128,
    pub(super) rr_bps: f64,
    /// Each application's flows then.
    pub(super) flows: Vec<u32>,
}

/// The worst instant of what the applications offer together in a run of `duration_ps`
/// (see [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]): flow counts change at the applications'
/// schedule steps, taken in time order as the simulator takes them (steps at or after the
/// end never happen); `None` when no step happens. O(steps × log steps).
pub(super) fn peak_offered(
    apps: &[App],
    host: &Host,
    link: &Link,
    duration_ps: u64,
) -> Option<Peak> {
    let mut steps: Vec<(u64, usize, usize)> = apps
        .iter()
        .enumerate()
        .flat_map(|(ai, a)| {
            a.schedule
                .iter()
                .enumerate()
                .filter(|(_, s)| s.0 < duration_ps)
                .map(move |(si, s)| (s.0, ai, si))
        })
        .collect();
    steps.sort_unstable();
    // Per application its flows now; the sums: UDP exactly, responses in f64.
    let mut now_flows = vec![0u32; apps.len()];
    let (mut udp, mut rr) = (0u128, 0.0f64);
    // The worst instant so far, and how many steps had happened by its end (its flow
    // counts are replayed from those once the worst is known: copying them at every new
    // worst would cost applications × steps).
    let mut worst: Option<(Peak, usize)> = None;
    let mut i = 0;
    while i < steps.len() {
        let t = steps[i].0;
        while i < steps.len() && steps[i].0 == t {
            let (_, ai, si) = steps[i];
            let (u0, r0, _) = offered(&apps[ai], now_flows[ai], host, link);
            now_flows[ai] = apps[ai].schedule[si].1;
            let (u1, r1, _) = offered(&apps[ai], now_flows[ai], host, link);
            udp = udp - u0 + u1;
            rr += r1 - r0;
            i += 1;
        }
        let total = udp as f64 + rr.max(0.0);
        if worst
            .as_ref()
            .is_none_or(|(w, _)| total > w.udp_bps as f64 + w.rr_bps.max(0.0))
        {
            let peak = Peak {
                at_ps: t,
                udp_bps: udp,
                rr_bps: rr.max(0.0),
                flows: Vec::new(),
            };
            worst = Some((peak, i));
        }
    }
    let (mut peak, done) = worst?;
    peak.flows = vec![0u32; apps.len()];
    for &(_, ai, si) in &steps[..done] {
        peak.flows[ai] = apps[ai].schedule[si].1;
    }
    Some(peak)
}

impl Peak {
    /// What is offered, in multiples of the link rate.
    pub(super) fn load(&self, link: &Link) -> f64 {
        (self.udp_bps as f64 + self.rr_bps) / link.rate_bps.max(1) as f64
    }

    /// More than `cap` times the link rate (exactly when only UDP flows offer).
    pub(super) fn over(&self, cap: u64, link: &Link) -> bool {
        let cap = u128::from(cap) * u128::from(link.rate_bps.max(1));
        if self.rr_bps <= 0.0 {
            self.udp_bps > cap
        } else {
            self.udp_bps as f64 + self.rr_bps > cap as f64
        }
    }

    /// What is offered at the worst instant, for messages (`the applications offer 20000.0
    /// times the link rate, ... at once (from the start: t/u: 10000 UDP flows × ...), about
    /// ... packets per simulated second`), and the application that offers most.
    pub(super) fn describe(
        &self,
        apps: &[App],
        tenants: &[Tenant],
        host: &Host,
        link: &Link,
        link_text: &str,
    ) -> (String, usize) {
        let link_bps = link.rate_bps.max(1) as f64;
        let mut parts: Vec<(f64, usize, f64)> = apps
            .iter()
            .enumerate()
            .filter_map(|(ai, a)| {
                let (u, r, pps) = offered(a, self.flows[ai], host, link);
                let bps = u as f64 + r;
                (bps > 0.0).then_some((bps, ai, pps))
            })
            .collect();
        parts.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let pps: f64 = parts.iter().map(|p| p.2).sum();
        let what = |ai: usize, bps: f64| {
            let a = &apps[ai];
            let name = format!("{}/{}", tenants[a.tenant].name, a.name);
            let times = bps / link_bps;
            match &a.kind {
                AppKind::Udp { rate_bps, .. } => format!(
                    "{name}: {} UDP flows × {}{}, {times:.1} times the link",
                    self.flows[ai],
                    units::format_rate(
                        rate_bps.unwrap_or(link.rate_bps.saturating_mul(MAX_OFFERED_LOAD))
                    ),
                    if rate_bps.is_none() {
                        " (`unlimited`)"
                    } else {
                        ""
                    }
                ),
                _ => format!("{name}: responses, {times:.1} times the link"),
            }
        };
        let mut list: Vec<String> = parts
            .iter()
            .take(3)
            .map(|&(bps, ai, _)| what(ai, bps))
            .collect();
        if parts.len() > 3 {
            list.push(format!("and {} more applications", parts.len() - 3));
        }
        let when = if self.at_ps == 0 {
            "from the start".to_string()
        } else {
            format!("from {}", units::format_time(self.at_ps))
        };
        (
            format!(
                "the applications offer {:.1} times the link rate, {link_text}, at once \
                 ({when}: {}), about {pps:.3e} packets per simulated second",
                self.load(link),
                list.join("; ")
            ),
            parts.first().map_or(0, |p| p.1),
        )
    }
}

/// The most an application offers while it has `flows` flows, bit/s on the link's terms
/// (a UDP flow's rate counts its packets' bytes, as the rate is written; a response counts
/// its frames' overhead too, as the application's own check does), and packets per second.
/// Bulk and closed-loop applications offer nothing: their windows hold them back.
fn offered(app: &App, flows: u32, host: &Host, link: &Link) -> (u128, f64, f64) {
    let mtu = u64::from(host.mtu_bytes.max(1));
    match &app.kind {
        AppKind::Udp { rate_bps, .. } => {
            let rate = rate_bps.map_or(
                u128::from(link.rate_bps) * u128::from(MAX_OFFERED_LOAD),
                u128::from,
            );
            let bps = rate * u128::from(flows);
            (bps, 0.0, bps as f64 / (mtu * 8) as f64)
        }
        AppKind::RequestResponse {
            rate_per_s,
            size,
            closed_loop: false,
            ..
        } if flows > 0 => {
            let mean = size.mean_bytes();
            let packets = mean.div_ceil(mtu);
            let wire = mean.saturating_add(packets.saturating_mul(link.overhead_bytes));
            (
                0,
                rate_per_s * wire as f64 * 8.0,
                rate_per_s * packets as f64,
            )
        }
        _ => (0, 0.0, 0.0),
    }
}

impl Ctx<'_> {
    /// The scenario's `limits:` under the CLI's overrides: each a whole number, at least 1.
    pub(super) fn limits(
        &self,
        raw: Option<&RawLimits>,
        ov: &Overrides,
    ) -> Result<Limits, ScenarioError> {
        let pick = |cli: Option<u64>,
                    flag: &'static str,
                    written: Option<&Spanned<u64>>,
                    default: u64|
         -> Result<(u64, Option<String>), ScenarioError> {
            if let Some(v) = cli {
                if v == 0 {
                    return Err(ScenarioError::Override {
                        what: flag,
                        message: "0: it must be at least 1".into(),
                    });
                }
                return Ok((v, Some(flag.to_string())));
            }
            match written {
                Some(w) if w.value == 0 => Err(self.err(
                    &w.referenced,
                    format!(
                        "`{}: 0`: it must be at least 1",
                        flag.trim_start_matches('-').replace('-', "_")
                    ),
                )),
                Some(w) => Ok((w.value, Some(self.at(&w.referenced)))),
                None => Ok((default, None)),
            }
        };
        let (max_offered_load, max_offered_load_from) = pick(
            ov.max_offered_load,
            "--max-offered-load",
            raw.and_then(|l| l.max_offered_load.as_ref()),
            DEFAULT_MAX_TOTAL_OFFERED_LOAD,
        )?;
        let (max_events, max_events_from) = pick(
            ov.max_events,
            "--max-events",
            raw.and_then(|l| l.max_events.as_ref()),
            DEFAULT_MAX_EVENTS,
        )?;
        Ok(Limits {
            max_offered_load,
            max_offered_load_from,
            max_events,
            max_events_from,
        })
    }

    /// The most the applications offer together at any instant of the run, in multiples
    /// of the link rate, refused above `limits.max_offered_load` (see
    /// [`DEFAULT_MAX_TOTAL_OFFERED_LOAD`]); the error points at the application that offers
    /// most at the worst instant.
    pub(super) fn offered_load(
        &self,
        apps: &[App],
        raw_apps: &[&RawApp],
        tenants: &[Tenant],
        host: &Host,
        duration_ps: u64,
        limits: &Limits,
    ) -> Result<f64, ScenarioError> {
        let Some(peak) = peak_offered(apps, host, &self.link, duration_ps) else {
            return Ok(0.0);
        };
        if !peak.over(limits.max_offered_load, &self.link) {
            return Ok(peak.load(&self.link));
        }
        let (what, top) = peak.describe(apps, tenants, host, &self.link, &self.link_text());
        let cap_from = match &limits.max_offered_load_from {
            None => "by default".to_string(),
            Some(f) if f.starts_with("--") => format!("under {f}"),
            Some(f) => format!("under the scenario's `limits: {{max_offered_load}}` at {f}"),
        };
        let ra = raw_apps[top];
        let at = ra
            .rate
            .as_ref()
            .map_or(&ra.kind.referenced, |r| &r.referenced);
        Err(self.err(
            at,
            format!(
                "{what}; a scenario may offer at most {} times the link rate {cap_from}: \
                 {OFFERED_WHY}",
                limits.max_offered_load
            ),
        ))
    }
}
