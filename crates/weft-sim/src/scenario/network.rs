//! `network:` of a scenario: the path behind the link that TCP applications cross
//! ([`crate::net`] says what each key means), each value checked where it is written.
//!
//! Invariants of what it returns: the port's rate is positive and its buffer holds at
//! least one full frame; the TCP segment size leaves room for headers in the host's MTU;
//! TSO segments are whole segments of at most 64 KiB; the initial window is 1..=1,000
//! segments; times are at most 2^62 ps (so that adding two never overflows the clock).

use serde_saphyr::Spanned;

use super::ctx::Ctx;
use super::raw::RawNetwork;
use super::{Host, ScenarioError};
use crate::net::{Network, MAX_HOSTS, TCP_HEADER_BYTES};
use crate::tcp::Cc;

/// The longest delay or timeout a scenario may give, ps.
const MAX_NET_TIME_PS: u64 = 1 << 62;

impl Ctx<'_> {
    /// A delay or timeout of at most [`MAX_NET_TIME_PS`]; `positive`: 0 refused.
    fn net_time(&self, s: &Spanned<String>, positive: bool) -> Result<u64, ScenarioError> {
        let t = self.time(s, positive)?;
        if t > MAX_NET_TIME_PS {
            return Err(self.err(
                &s.referenced,
                format!(
                    "`{}` is too long: network delays and timeouts are at most 2^62 ps \
                     (about 53 days)",
                    s.value
                ),
            ));
        }
        Ok(t)
    }

    /// `network:` with each key's default where it is left out.
    pub(super) fn network(
        &self,
        raw: Option<&RawNetwork>,
        host: &Host,
    ) -> Result<Network, ScenarioError> {
        let mut n = Network::defaults(&self.link, host.mtu_bytes);
        let Some(raw) = raw else {
            return Ok(n);
        };
        if let Some(h) = &raw.hosts {
            if !(1..=MAX_HOSTS).contains(&h.value) {
                return Err(self.err(
                    &h.referenced,
                    format!(
                        "hosts {}: a network has 1..={MAX_HOSTS} sending hosts",
                        h.value
                    ),
                ));
            }
            n.hosts = h.value;
        }
        if let Some(d) = &raw.delay {
            n.delay_ps = self.net_time(d, false)?;
        }
        if let Some(c) = &raw.completion {
            n.completion_ps = self.net_time(c, false)?;
        }
        let frame = u64::from(host.mtu_bytes) + self.link.overhead_bytes;
        if let Some(sw) = &raw.switch {
            if let Some(r) = &sw.rate {
                // Positive: `units::parse_rate` refuses 0.
                n.port.rate_bps = self.rate(r)?;
            }
            if let Some(b) = &sw.buffer {
                n.port.buffer_bytes = self.bounded_size(b, "buffer")?;
                if n.port.buffer_bytes < frame {
                    return Err(self.err(
                        &b.referenced,
                        format!(
                            "buffer `{}` ({} B) cannot hold one full frame ({frame} wire bytes: \
                             the host's mtu and the link's overhead)",
                            b.value, n.port.buffer_bytes
                        ),
                    ));
                }
            }
            if let Some(k) = &sw.ecn {
                n.port.ecn_bytes = Some(self.bounded_size(k, "ecn")?);
            }
        }
        // The default buffer (1 MiB) holds the largest frame (64 KiB and its overhead), and
        // an mtu is at least 64 bytes, more than the headers.
        debug_assert!(n.port.buffer_bytes >= frame && host.mtu_bytes > TCP_HEADER_BYTES);
        if let Some(rx) = &raw.receiver {
            if let Some(c) = &rx.cores {
                if c.value == 0 {
                    return Err(self.err(
                        &c.referenced,
                        "`cores: 0`: a receiver has at least 1 core".into(),
                    ));
                }
                n.rx.cores = c.value;
            }
            if let Some(r) = &rx.ring {
                if r.value == 0 {
                    return Err(self.err(
                        &r.referenced,
                        "`ring: 0`: a receive ring holds at least 1 packet".into(),
                    ));
                }
                n.rx.ring_packets = r.value;
            }
            if let Some(c) = &rx.cpu_per_packet {
                n.rx.cpu_ps_per_packet = self.net_time(c, false)?;
            }
        }
        let Some(t) = &raw.tcp else {
            return Ok(n);
        };
        if let Some(cc) = &t.cc {
            n.tcp.cc = match cc.value.as_str() {
                "newreno" => Cc::NewReno,
                "dctcp" => Cc::Dctcp,
                other => {
                    return Err(self.err(
                        &cc.referenced,
                        format!("cc `{other}`: expected `newreno` or `dctcp`"),
                    ))
                }
            };
        }
        if let Some(w) = &t.init_cwnd {
            if !(1..=1000).contains(&w.value) {
                return Err(self.err(
                    &w.referenced,
                    format!("init_cwnd {}: 1..=1000 segments", w.value),
                ));
            }
            n.tcp.init_cwnd = w.value;
        }
        if let Some(r) = &t.min_rto {
            n.tcp.min_rto_ps = self.net_time(r, true)?;
            n.tcp.init_rto_ps = n.tcp.init_rto_ps.max(n.tcp.min_rto_ps);
            n.tcp.max_rto_ps = n.tcp.max_rto_ps.max(n.tcp.min_rto_ps);
        }
        if let Some(q) = &t.tsq {
            n.tcp.tsq_bytes = self.bounded_size(q, "tsq")?;
        }
        if let Some(r) = &t.rwnd {
            n.tcp.rwnd_bytes = self.bounded_size(r, "rwnd")?;
        }
        if let Some(s) = &t.tso {
            let b = self.size(s)?;
            let mss = u64::from(n.tcp.mss);
            if b < mss || b > 65_536 {
                return Err(self.err(
                    &s.referenced,
                    format!(
                        "tso `{}` ({b} B): a TSO segment is 1 to 45 segments of {mss} bytes \
                         (the mtu less {TCP_HEADER_BYTES} bytes of headers), at most 64 KiB",
                        s.value
                    ),
                ));
            }
            // Whole segments: what the host cuts into full packets.
            n.tcp.tso_bytes = (b / mss * mss) as u32;
        }
        Ok(n)
    }
}
