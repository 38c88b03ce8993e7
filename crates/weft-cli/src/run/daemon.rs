//! `weft run`: its flags checked (rate, tenants and their addresses, backend, control
//! socket group, the policy with its diagnostics, reservations, offloads) before anything
//! opens, then the dataplane run until it stops, and its final stats printed as one JSON
//! line.
//!
//! Invariants: every check that can fail on what was given runs before a ring opens or an
//! interface changes (exit 2 names the flag); the offloads are the last step before the
//! dataplane. Cost: one policy compilation before the dataplane's own.

use weft_core::policy::{self, LoadOptions};
use weft_core::units;
use weft_nic::isolation::{self, Mac};
use weft_nic::{ctl, dataplane};

use super::args::RunArgs;
use super::{usage, Fail};
/// Each tenant's `--tenant` options: the `NAME=IFACE` part, its `mac=` addresses and its
/// `ip=` prefixes.
type TenantOptions = (Vec<String>, Vec<Vec<Mac>>, Vec<Vec<isolation::Prefix>>);

/// Splits `--tenant NAME=IFACE,mac=MAC,ip=PREFIX,...` into `NAME=IFACE`, each tenant's
/// addresses and its prefixes.
fn tenant_macs(flags: &[String]) -> Result<TenantOptions, String> {
    let (mut plain, mut macs, mut ips) = (Vec::new(), Vec::new(), Vec::new());
    for f in flags {
        let mut parts = f.split(',');
        plain.push(parts.next().unwrap_or_default().to_string());
        let (mut own, mut nets) = (Vec::new(), Vec::new());
        for p in parts {
            if let Some(m) = p.strip_prefix("mac=") {
                own.push(isolation::parse_mac(m).ok_or_else(|| {
                    format!("--tenant `{f}`: `{m}` is not a MAC address (aa:bb:cc:dd:ee:ff)")
                })?);
            } else if let Some(n) = p.strip_prefix("ip=") {
                nets.push(isolation::Prefix::parse(n).ok_or_else(|| {
                    format!("--tenant `{f}`: `{n}` is not an IP prefix (10.0.1.0/24, fd00::5)")
                })?);
            } else {
                return Err(format!(
                    "--tenant `{f}`: `{p}`: expected mac=MAC or ip=PREFIX"
                ));
            }
        }
        macs.push(own);
        ips.push(nets);
    }
    Ok((plain, macs, ips))
}

/// The daemon's structured log on stderr (`--log-format`); `RUST_LOG`-style filtering is
/// not offered: the daemon logs only what an operator acts on, at a bounded rate.
fn init_log(format: &str) {
    let b = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_max_level(tracing::Level::INFO);
    // A second init (tests that run `run` twice in one process) keeps the first.
    let _ = if format == "json" {
        b.json().flatten_event(true).try_init()
    } else {
        b.with_ansi(false).try_init()
    };
}

/// `weft run`: the dataplane configured from `a` ([`config`]), its ports' offloads fixed
/// ([`prepare_offloads`]), then run until stopped; prints its final stats.
pub(super) fn run(a: RunArgs) -> Result<(), Fail> {
    init_log(&a.log_format);
    // The last of the two flags wins (`overrides_with`); neither: fix.
    let fix = a.fix_offloads || !a.no_fix_offloads;
    let ctl_path = a.ctl.clone();
    let cfg = config(a)?;
    // Before any interface is touched (the offloads below change them).
    cfg.check_reservations().map_err(usage)?;
    prepare_offloads(&cfg, fix)?;
    let stats = dataplane::run(cfg, |metrics| match metrics {
        Some(a) => crate::out::errln!(
            "weft run: ready (control socket {}, metrics http://{a}/metrics)",
            ctl_path.display()
        ),
        None => crate::out::errln!("weft run: ready (control socket {})", ctl_path.display()),
    })
    .map_err(run_failure)?;
    // As the control socket answers `stats`: one line of `Stats`'s serde form.
    let line = serde_json::to_string(&stats).map_err(|e| (1, e.to_string()))?;
    crate::out::outln!("{line}")?;
    Ok(())
}

/// The dataplane's configuration from `weft run`'s flags, each checked in the order given
/// here (the first bad one is the error); the control server's defaults are set on the way,
/// and the policy is compiled once for its diagnostics and warnings before any socket is
/// touched.
fn config(a: RunArgs) -> Result<dataplane::Config, Fail> {
    let rate_bps = units::parse_rate(&a.rate).map_err(|e| usage(format!("--rate: {e}")))?;
    let (plain, macs, ips) = tenant_macs(&a.tenant).map_err(usage)?;
    let tenants = crate::tenant_pairs(&plain).map_err(usage)?;
    let backend = dataplane::Backend::parse(&a.backend)
        .ok_or_else(|| usage(format!("--backend `{}`", a.backend)))?;
    if backend == dataplane::Backend::AfXdp && !cfg!(feature = "af-xdp") {
        return Err(usage(format!(
            "--backend {}: this weft was built without it (cargo feature `af-xdp`); \
             use --backend af-packet or rebuild with `--features af-xdp`",
            a.backend
        )));
    }
    // The control server's guards (the dataplane binds it with them); a --ctl-group that
    // does not exist is said before anything opens.
    let group = match &a.ctl_group {
        None => None,
        Some(g) => Some(ctl::lookup_group(g).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::InvalidInput => usage(e.to_string()),
            _ => (1, e.to_string()),
        })?),
    };
    ctl::set_defaults(ctl::Options {
        max_policy_bytes: a.max_policy_bytes,
        group,
    });
    // Validate the policy with diagnostics before touching any socket.
    let opts = LoadOptions {
        link_rate_bps: Some(rate_bps),
        ..LoadOptions::default()
    };
    match policy::load(&a.policy, &opts) {
        Ok(prog) => {
            crate::diagnostics::warn(&prog, false);
            for w in dataplane::tenant_warnings(&prog, &tenants) {
                crate::out::errln!("warning: {w}");
            }
        }
        Err(e) => {
            crate::diagnostics::report(&e, false);
            return Err(usage(format!("{}: invalid policy", a.policy.display())));
        }
    }
    Ok(dataplane::Config {
        policy: a.policy,
        load: opts,
        uplink: a.uplink,
        rate_bps,
        tenants,
        ctl: Some(a.ctl.clone()),
        metrics: a.metrics,
        buffers: a.buffers,
        max_queues: a.max_queues,
        ring: a.ring,
        outstanding: a.outstanding,
        idle_sleep_us: a.idle_sleep_us,
        cpu: a.cpu,
        slice_us: a.slice_us,
        backend,
        ring_version: if a.ring_version == "v2" {
            weft_nic::afpacket::RingVersion::V2
        } else {
            weft_nic::afpacket::RingVersion::V3
        },
        cpu_weight: (a.cpu_weight > 0).then_some(a.cpu_weight),
        isolation: dataplane::IsolationConfig {
            macs,
            ips,
            macs_per_tenant: a.macs_per_tenant as usize,
            mac_age_s: a.mac_age_s,
            reserved_queues: a.reserved_queues,
            reserved_buffers: a.reserved_buffers,
        },
        rogue: match a.rogue {
            Some(0) => return Err(usage("--rogue: tenants are numbered from 1")),
            Some(n) if n > a.tenant.len() => {
                return Err(usage(format!(
                    "--rogue {n}: only {} tenants",
                    a.tenant.len()
                )))
            }
            r => r.map(|n| n - 1),
        },
    })
}

/// Before any ring opens: offloads that would hand it unfinished checksums and frames
/// longer than a slot are turned off (or, without `fix`, refused: exit 2).
fn prepare_offloads(cfg: &dataplane::Config, fix: bool) -> Result<(), Fail> {
    let ports: Vec<&str> = cfg
        .tenants
        .iter()
        .map(|(_, i)| i.as_str())
        .chain([cfg.uplink.as_str()])
        .collect();
    match weft_nic::offload::prepare_ports(&ports, fix) {
        Ok(lines) => lines
            .iter()
            .for_each(|l| tracing::info!(check = "offloads", "{l}")),
        Err(e @ weft_nic::offload::PrepareError::OffloadsOn(_)) => {
            return Err(usage(e.to_string()))
        }
        Err(e) => return Err((1, e.to_string())),
    }
    Ok(())
}

/// A dataplane's failure as an exit code: what was given cannot be used (2), or the
/// system failed (1).
fn run_failure(e: dataplane::RunError) -> Fail {
    match e {
        // A path or address given on the command line that cannot be used.
        dataplane::RunError::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::AddrInUse
                    | std::io::ErrorKind::AlreadyExists
                    | std::io::ErrorKind::InvalidInput
            ) =>
        {
            usage(e.to_string())
        }
        dataplane::RunError::Config(m) => usage(m),
        // The backend is not in this build, or the kernel refused one of its steps (the
        // message names the step and the errno): the choice cannot be used here.
        dataplane::RunError::Backend(m) => usage(m),
        e => (1, e.to_string()),
    }
}
