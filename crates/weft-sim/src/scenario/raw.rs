//! The scenario file's shape as deserialized: each key and value as written, with its place
//! in the file (`Spanned`), before any check. Unknown keys are refused here
//! (`deny_unknown_fields`); `load` checks the values.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Scalar {
    Int(u64),
    Float(f64),
    Str(String),
}

impl Scalar {
    pub(super) fn text(&self) -> String {
        match self {
            Scalar::Int(v) => v.to_string(),
            Scalar::Float(v) => v.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: Option<Spanned<String>>,
    pub(super) description: Option<Spanned<String>>,
    pub(super) time_scale: Option<Spanned<String>>,
    pub(super) policy: Option<Spanned<String>>,
    pub(super) policy_inline: Option<Spanned<String>>,
    pub(super) duration: Spanned<String>,
    pub(super) seed: Option<u64>,
    pub(super) window: Option<Spanned<String>>,
    pub(super) latency_window: Option<Spanned<String>>,
    pub(super) nics: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) host: Option<RawHost>,
    pub(super) nic: Option<BTreeMap<String, BTreeMap<String, Spanned<Scalar>>>>,
    pub(super) limits: Option<RawLimits>,
    pub(super) network: Option<RawNetwork>,
    pub(super) tenants: Vec<RawTenant>,
}

/// `network:` of a scenario: the path behind the link for TCP applications.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    pub(super) hosts: Option<Spanned<u16>>,
    pub(super) delay: Option<Spanned<String>>,
    pub(super) completion: Option<Spanned<String>>,
    pub(super) switch: Option<RawSwitch>,
    pub(super) receiver: Option<RawReceiver>,
    pub(super) tcp: Option<RawTcp>,
}

/// `network.receiver:`, the receiving host's path.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReceiver {
    pub(super) cores: Option<Spanned<u16>>,
    pub(super) ring: Option<Spanned<u32>>,
    pub(super) cpu_per_packet: Option<Spanned<String>>,
    pub(super) policy_inline: Option<Spanned<String>>,
}

/// `network.switch:`, the output port towards the receivers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSwitch {
    pub(super) rate: Option<Spanned<String>>,
    pub(super) buffer: Option<Spanned<String>>,
    pub(super) ecn: Option<Spanned<String>>,
}

/// `network.tcp:`, every TCP flow's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTcp {
    pub(super) cc: Option<Spanned<String>>,
    pub(super) init_cwnd: Option<Spanned<u32>>,
    pub(super) min_rto: Option<Spanned<String>>,
    pub(super) tsq: Option<Spanned<String>>,
    pub(super) tso: Option<Spanned<String>>,
    pub(super) rwnd: Option<Spanned<String>>,
}

/// `limits:` of a scenario: what it may ask of the simulator.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_offered_load: Option<Spanned<u64>>,
    pub(super) max_events: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub(super) cores: Option<Spanned<u16>>,
    pub(super) segment: Option<Spanned<String>>,
    pub(super) mtu: Option<Spanned<String>>,
    pub(super) cpu_per_packet: Option<Spanned<String>>,
    pub(super) cpu_per_doorbell: Option<Spanned<String>>,
    pub(super) placement: Option<Spanned<String>>,
    pub(super) retry: Option<Spanned<String>>,
    pub(super) migrate: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) meta: BTreeMap<String, Spanned<Scalar>>,
    pub(super) apps: Spanned<Vec<RawApp>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApp {
    pub(super) name: Spanned<String>,
    pub(super) kind: Spanned<String>,
    #[serde(default)]
    pub(super) meta: BTreeMap<String, Spanned<Scalar>>,
    pub(super) cores: Option<Spanned<Vec<u16>>>,
    pub(super) flows: Option<u32>,
    pub(super) window: Option<Spanned<String>>,
    pub(super) start: Option<Spanned<String>>,
    pub(super) stop: Option<Spanned<String>>,
    pub(super) schedule: Option<Vec<RawStep>>,
    pub(super) rate: Option<Spanned<String>>,
    pub(super) size: Option<Spanned<String>>,
    pub(super) size_dist: Option<Spanned<String>>,
    pub(super) socket_limit: Option<Spanned<String>>,
    pub(super) prioritized: Option<bool>,
    pub(super) dcb_class: Option<Spanned<u8>>,
    pub(super) closed_loop: Option<Spanned<bool>>,
    pub(super) transport: Option<Spanned<String>>,
    pub(super) host: Option<Spanned<u16>>,
    pub(super) to: Option<Spanned<Scalar>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub(super) at: Spanned<String>,
    pub(super) flows: u32,
}
