//! The Prometheus text exposition of a stats answer ([`prometheus`]): every number of the
//! dataplane, the interface, the tenants and the ports, with its HELP and TYPE lines and its
//! labels escaped.
//!
//! Invariants: each family is written once with all its samples; label values are escaped
//! as the text format requires. Cost: one pass over the stats, a string of a few KiB.

use super::*;

/// A label value in Prometheus's text format: backslash, double quote and line feed
/// escaped.
pub(super) fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A gauge's value as the text format gets it: JSON's form of the number (`5.0`, `1e16`).
pub(super) fn gauge(x: f64) -> String {
    serde_json::to_string(&x).unwrap_or_default()
}

/// Milliseconds as seconds in decimal (`1234` as `1.234`): exact, where a float would
/// round a large count.
pub(super) fn millis_as_seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// What a series is, for its family's `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MetricKind {
    /// Counts up from the daemon's start: its name ends in `_total`.
    Counter,
    /// A value now (a level, a rate, a setting).
    Gauge,
}

use MetricKind::{Counter, Gauge};

/// One number of a section of the stats, exported as `PREFIX_NAME` (`_total` added for a
/// counter), with its family's HELP text.
pub(super) type Sample = (&'static str, MetricKind, &'static str, u64);

/// The [`Sample`]s of numbers of `$section`, each named as its field: `NAME: KIND, HELP;`.
macro_rules! samples {
    ($section:ident; $($name:ident: $kind:ident, $help:expr;)*) => {
        [$((stringify!($name), $kind, $help, $section.$name)),*]
    };
}

/// The dataplane's numbers, exported as `weft_dataplane_NAME` (every number of
/// [`DataplaneStats`] but two: its one flag, `uplink_up`, is [`fam::UPLINK_UP`], and
/// `uplink_down_ms`, in seconds, is [`fam::UPLINK_DOWN_SECONDS`]).
pub(super) fn dataplane_samples(d: &DataplaneStats) -> [Sample; 29] {
    samples! { d;
        parse_errors: Counter, "Ingress frames dropped: they did not parse.";
        oversize: Counter, "Ingress frames dropped: longer than a pool buffer (2048 bytes).";
        no_buffer: Counter, "Ingress frames dropped for want of a frame buffer.";
        ring_full: Counter, "Ingress frames dropped: their flow queue's ring was full.";
        no_queue: Counter, "Ingress frames of new flows dropped for want of a flow queue.";
        unclassified: Counter, "Ingress frames dropped: no leaf of the policy matches them.";
        engine_drops: Counter, "Packets the engine dropped by the policy's limits.";
        tx_frames: Counter, "Frames sent on the uplink.";
        tx_bytes: Counter, "Bytes sent on the uplink (frame bytes).";
        tx_errors: Counter, "Frames the uplink refused to send.";
        reverse_frames: Counter, "Return path: frames read from the uplink.";
        reverse_flooded: Counter, "Return path: group frames copied to every tenant.";
        reverse_unknown: Counter, "Return path: unicast frames no tenant owns, dropped.";
        reverse_dropped: Counter, "Return path: frames dropped for want of a buffer.";
        source_rejected: Counter, "Ingress frames dropped for their source MAC or IP address.";
        reverse_queued: Gauge, "Return path: frames waiting to be sent to their tenants.";
        reloads: Counter, "Policy reloads done.";
        queues_live: Gauge, "Flow queues open.";
        queues_reclaimed: Counter, "Flow queues closed after their flow went idle.";
        class_moves: Counter, "Flows moved to another class.";
        uplink_downs: Counter, "Times the uplink's link went down.";
        flows_closed: Counter, "Flows the engine forgot once no queue used them.";
        engine_flows: Gauge, "Flows open in the engine.";
        backlog: Gauge, "Packets in the engines (the running one and those draining).";
        buffers_free: Gauge, "Frame buffers free.";
        reserved_queues: Gauge, "Flow queues reserved for each tenant.";
        reserved_buffers: Gauge, "Frame buffers reserved for each tenant.";
        ctl_dropped: Counter, "Control connections closed unanswered (every serving thread \
            busy, the queue full).";
        metrics_dropped: Counter, "Metrics connections closed unanswered (every serving \
            thread busy, the queue full).";
    }
}

/// The interface's counters, exported as `weft_iface_NAME_total` (its refusals by reason
/// are `weft_iface_rejects_total{reason=...}`).
pub(super) fn iface_samples(i: &crate::iface::Counters) -> [Sample; 7] {
    samples! { i;
        doorbell_writes: Counter, "Doorbell writes (batches) of the drivers, accepted or not.";
        doorbell_entries: Counter, "Doorbell entries processed by the NIC.";
        posted: Counter, "Descriptors the drivers posted.";
        fetched: Counter, "Descriptors fetched by the NIC.";
        sent: Counter, "Descriptors completed as sent.";
        dropped: Counter, "Descriptors completed as dropped or aborted.";
        meta_updates: Counter, "Inline metadata updates accepted.";
    }
}

/// A port's numbers, exported as `weft_port_NAME{iface=...}` (AF_XDP's kernel statistics
/// are [`xdp_kernel_samples`]). A name both backends have has the same help.
pub(super) fn port_samples(p: &PortStats) -> Vec<Sample> {
    const TX_FRAMES: &str = "Frames handed to the kernel to send.";
    const TX_OVERSIZE: &str = "Frames refused as longer than the port can send.";
    const TX_RING_FULL: &str = "Sends refused with the transmit ring full.";
    const KICKS: &str = "Transmit kicks that went through.";
    const KICK_AGAIN: &str = "Transmit kicks the kernel refused for now.";
    const KICK_ERRORS: &str = "Transmit kicks that failed otherwise.";
    match p {
        PortStats::AfPacket(p) => samples! { p;
            rx_truncated: Counter, "Frames longer than a receive slot, read cut.";
            rx_kernel_seen: Counter, "Frames the kernel offered the receive ring, those it \
                dropped included.";
            rx_kernel_drops: Counter, "Frames the kernel dropped with the receive ring full.";
            rx_csum_completed: Counter, "Frames whose TCP or UDP checksum the port completed.";
            rx_csum_dropped: Counter, "Frames dropped as their checksum could not be completed.";
            tx_frames: Counter, TX_FRAMES;
            tx_oversize: Counter, TX_OVERSIZE;
            tx_ring_full: Counter, TX_RING_FULL;
            kicks: Counter, KICKS;
            kick_again: Counter, KICK_AGAIN;
            kick_errors: Counter, KICK_ERRORS;
            tx_kick_short: Counter, "Kicks that sent fewer bytes than were handed over.";
            tx_skipped_bytes: Counter, "Bytes in the slots short kicks skipped.";
        }
        .to_vec(),
        PortStats::AfXdp(p) => samples! { p;
            queues: Gauge, "Receive queues (an AF_XDP socket each).";
            rx_frames: Counter, "Frames received.";
            rx_bytes: Counter, "Bytes received (frame bytes).";
            rx_bad_desc: Counter, "Receive descriptors skipped as naming no chunk the kernel \
                holds.";
            bad_index: Counter, "Ring indices skipped as more than a ring ahead.";
            tx_frames: Counter, TX_FRAMES;
            tx_completed: Counter, "Transmitted frames the kernel completed.";
            tx_no_frame: Counter, "Sends refused for want of a free transmit chunk.";
            tx_ring_full: Counter, TX_RING_FULL;
            tx_oversize: Counter, TX_OVERSIZE;
            tx_bad_completion: Counter, "Completions skipped for a chunk not in flight.";
            kicks: Counter, KICKS;
            kick_again: Counter, KICK_AGAIN;
            kick_errors: Counter, KICK_ERRORS;
        }
        .to_vec(),
    }
}

/// An AF_XDP port's kernel statistics (its `kernel` section), exported as
/// `weft_port_kernel_NAME_total{iface=...}`: counters, in `XDP_STATISTICS` order.
pub(super) fn xdp_kernel_samples(k: &XdpKernelStats) -> [Sample; 6] {
    samples! { k;
        rx_dropped: Counter, "Frames the kernel dropped for other reasons than the rest.";
        rx_invalid_descs: Counter, "Frames the kernel dropped for invalid fill-ring descriptors.";
        tx_invalid_descs: Counter, "Transmit descriptors the kernel found invalid.";
        rx_ring_full: Counter, "Frames the kernel dropped with the receive ring full.";
        rx_fill_ring_empty_descs: Counter, "Times the kernel found the fill ring empty.";
        tx_ring_empty_descs: Counter, "Times the kernel found the transmit ring empty.";
    }
}

/// The exposition being written: each family's `# HELP` and `# TYPE` lines, then all of its
/// series together (the text format wants a family's lines in one group), families in the
/// order they were first given a sample; a family without a sample is not written.
#[derive(Default)]
pub(super) struct Exposition {
    families: Vec<(String, MetricKind, &'static str, String)>,
    index: rustc_hash::FxHashMap<String, usize>,
}

impl Exposition {
    /// Adds the series `name{labels}` (`labels` escaped, without braces; empty for none)
    /// with `value` to family `name`.
    fn add(
        &mut self,
        (name, kind, help): (&str, MetricKind, &'static str),
        labels: &str,
        value: impl std::fmt::Display,
    ) {
        debug_assert_eq!(kind == Counter, name.ends_with("_total"), "{name}");
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.families
                    .push((name.to_string(), kind, help, String::new()));
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        let lines = &mut self.families[i].3;
        use std::fmt::Write as _;
        let _ = if labels.is_empty() {
            writeln!(lines, "{name} {value}")
        } else {
            writeln!(lines, "{name}{{{labels}}} {value}")
        };
    }

    /// [`Exposition::add`] for a section's number: `PREFIX_NAME`, `_total` added for a
    /// counter.
    fn sample(&mut self, prefix: &str, (k, kind, help, v): Sample, labels: &str) {
        let name = match kind {
            Counter => format!("{prefix}_{k}_total"),
            Gauge => format!("{prefix}_{k}"),
        };
        self.add((&name, kind, help), labels, v);
    }

    fn text(self) -> String {
        let mut o = String::new();
        for (name, kind, help, lines) in self.families {
            let kind = match kind {
                Counter => "counter",
                Gauge => "gauge",
            };
            o += &format!("# HELP {name} {}\n# TYPE {name} {kind}\n", help_text(help));
            o += &lines;
        }
        o
    }
}

/// A HELP text in Prometheus's text format: backslash and line feed escaped.
pub(super) fn help_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A family of series: its name (a counter's ends in `_total`), kind and HELP text.
pub(super) type Family = (&'static str, MetricKind, &'static str);

/// The families of series that are not a section's numbers named as its fields.
pub(super) mod fam {
    use super::Family;
    use super::MetricKind::{Counter, Gauge};

    pub const NODE_PACKETS: Family = (
        "weft_node_packets_total",
        Counter,
        "Packets sent through the node.",
    );
    pub const NODE_BYTES: Family = (
        "weft_node_bytes_total",
        Counter,
        "Bytes sent through the node (frame bytes).",
    );
    pub const NODE_RATE_BPS: Family = (
        "weft_node_rate_bps",
        Gauge,
        "Bits per second sent through the node over the last second.",
    );
    pub const NODE_DROPS: Family = (
        "weft_node_drops_total",
        Counter,
        "Packets the engine dropped at the node, by reason.",
    );
    pub const SHAPER_PACKETS: Family = (
        "weft_shaper_packets_total",
        Counter,
        "Packets sent through the shaping class.",
    );
    pub const SHAPER_BYTES: Family = (
        "weft_shaper_bytes_total",
        Counter,
        "Bytes sent through the shaping class (frame bytes).",
    );
    pub const SHAPER_RATE_BPS: Family = (
        "weft_shaper_rate_bps",
        Gauge,
        "Bits per second sent through the shaping class over the last second.",
    );
    pub const SHAPER_LIMIT_BPS: Family = (
        "weft_shaper_limit_bps",
        Gauge,
        "The shaping class's rate limit, bits per second.",
    );
    pub const IFACE_REJECTS: Family = (
        "weft_iface_rejects_total",
        Counter,
        "Posts, doorbell entries and completions of every driver refused, by reason.",
    );
    pub const TENANT_RX_FRAMES: Family = (
        "weft_tenant_rx_frames_total",
        Counter,
        "Frames read from the tenant's port.",
    );
    pub const TENANT_RX_BYTES: Family = (
        "weft_tenant_rx_bytes_total",
        Counter,
        "Bytes read from the tenant's port (frame bytes).",
    );
    pub const TENANT_DROPS: Family = (
        "weft_tenant_drops_total",
        Counter,
        "The tenant's frames dropped, by reason.",
    );
    pub const TENANT_REJECTS: Family = (
        "weft_tenant_rejects_total",
        Counter,
        "Posts, doorbell entries and completions of the tenant's driver refused, by reason.",
    );
    pub const TENANT_MACS: Family = (
        "weft_tenant_macs",
        Gauge,
        "Source MAC addresses the tenant owns.",
    );
    pub const TENANT_QUEUES: Family =
        ("weft_tenant_queues", Gauge, "Flow queues the tenant holds.");
    pub const UPLINK_UP: Family = (
        "weft_dataplane_uplink_up",
        Gauge,
        "1 while the uplink's link is up, 0 while it is down.",
    );
    pub const UPLINK_DOWN_SECONDS: Family = (
        "weft_dataplane_uplink_down_seconds_total",
        Counter,
        "Seconds the uplink's link was down (the current period included).",
    );
    pub const TENANT_BUFFERS: Family = (
        "weft_tenant_buffers",
        Gauge,
        "Frame buffers the tenant holds.",
    );
}

/// The stats answer in Prometheus text format (0.0.4): every family with its `# HELP` and
/// `# TYPE` lines and its series together, every counter's name ending in `_total`. The
/// labels are the running policy's node and shaping-class names, the `--tenant` names and
/// interfaces the daemon was started with, and reasons from fixed lists: nothing a tenant
/// sends adds a series.
pub fn prometheus(stats: &Stats) -> String {
    let mut x = Exposition::default();
    for n in &stats.nodes {
        let l = format!("node=\"{}\"", label(&n.name));
        x.add(fam::NODE_PACKETS, &l, n.packets);
        x.add(fam::NODE_BYTES, &l, n.bytes);
        x.add(fam::NODE_RATE_BPS, &l, gauge(n.rate_bps));
        for (r, v) in DropReason::ALL.iter().zip(n.drops) {
            let l = format!("{l},reason=\"{}\"", label(r.name()));
            x.add(fam::NODE_DROPS, &l, v);
        }
    }
    for c in &stats.shapers {
        let l = format!("shaper=\"{}\"", label(&c.name));
        x.add(fam::SHAPER_PACKETS, &l, c.packets);
        x.add(fam::SHAPER_BYTES, &l, c.bytes);
        x.add(fam::SHAPER_RATE_BPS, &l, gauge(c.rate_bps));
        x.add(fam::SHAPER_LIMIT_BPS, &l, c.limit_bps);
    }
    for s in dataplane_samples(&stats.dataplane) {
        x.sample("weft_dataplane", s, "");
    }
    x.add(fam::UPLINK_UP, "", u64::from(stats.dataplane.uplink_up));
    x.add(
        fam::UPLINK_DOWN_SECONDS,
        "",
        millis_as_seconds(stats.dataplane.uplink_down_ms),
    );
    for s in iface_samples(&stats.iface) {
        x.sample("weft_iface", s, "");
    }
    // The interface's refusals of every driver, by reason (every reason).
    for (r, v) in Reject::ALL.iter().zip(stats.iface.rejects) {
        let l = format!("reason=\"{}\"", label(r.name()));
        x.add(fam::IFACE_REJECTS, &l, v);
    }
    // Per tenant: frames received, drops and refusals by reason (every reason), what it
    // holds.
    for t in &stats.tenants {
        let l = format!(
            "tenant=\"{}\",iface=\"{}\"",
            label(&t.name),
            label(&t.iface)
        );
        x.add(fam::TENANT_RX_FRAMES, &l, t.rx_frames);
        x.add(fam::TENANT_RX_BYTES, &l, t.rx_bytes);
        for (r, v) in TENANT_DROPS.iter().zip(t.drops) {
            let l = format!("{l},reason=\"{}\"", label(r));
            x.add(fam::TENANT_DROPS, &l, v);
        }
        for (r, v) in Reject::ALL.iter().zip(t.rejects) {
            let l = format!("{l},reason=\"{}\"", label(r.name()));
            x.add(fam::TENANT_REJECTS, &l, v);
        }
        x.add(fam::TENANT_MACS, &l, t.macs);
        x.add(fam::TENANT_QUEUES, &l, t.queues);
        x.add(fam::TENANT_BUFFERS, &l, t.buffers);
    }
    // Per port: every number the port reports (receive ring, transmit ring, kernel drops),
    // and an AF_XDP port's kernel statistics of its sockets.
    for p in &stats.ports {
        let l = format!("iface=\"{}\"", label(p.iface()));
        for s in port_samples(p) {
            x.sample("weft_port", s, &l);
        }
        if let PortStats::AfXdp(p) = p {
            for s in xdp_kernel_samples(&p.kernel) {
                x.sample("weft_port_kernel", s, &l);
            }
        }
    }
    x.text()
}
