//! Interface offloads and what weft does about them: reading and turning off an interface's
//! checksum and segmentation offloads (the `ethtool` ioctl), the start-up check of `weft run`
//! ([`prepare_ports`]), and completing in software the checksum of a frame the kernel hands
//! over unfinished ([`complete_checksum`], called by the AF_PACKET receive path).
//!
//! Why: a Linux stack sending through an interface with transmit checksum offload (veth's
//! default) leaves the TCP/UDP checksum to the device (`CHECKSUM_PARTIAL`), and with TSO/GSO
//! hands it TCP super-frames of up to 64 KiB to segment. A packet socket on the receiving
//! interface sees them as they are: the checksum unfinished (`TP_STATUS_CSUMNOTREADY` in the
//! TPACKET header) and the super-frame whole (longer than a ring slot). Forwarded unchanged,
//! the first are dropped by the destination's stack as corrupt and the second cannot be
//! forwarded at all; GRO on a port coalesces received frames into super-frames the same way.
//!
//! * Offloads are read and set as `ethtool -k`/`-K` does, with `SIOCETHTOOL` over an
//!   `AF_INET` datagram socket: the feature names (`ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS`
//!   of `ETH_SS_FEATURES`), their state (`ETHTOOL_GFEATURES`) and changes
//!   (`ETHTOOL_SFEATURES`). An [`Offload`] is ethtool's group of features: `tx` is every
//!   `tx-checksum-*`, `tso` every `tx-tcp*-segmentation`, `sg` `tx-scatter-gather*`, `gso`
//!   `tx-generic-segmentation`, `gro` `rx-gro`, `rx` `rx-checksum`; a group is on when one
//!   of its features is. (The legacy per-group commands, `ETHTOOL_GTSO` and the like, miss
//!   features newer than themselves: on Linux 6.18 `ETHTOOL_STSO` leaves
//!   `tx-tcp-accecn-segmentation` on, and `ethtool -k` then still says TSO is on.)
//!   Reading needs no privilege; changing needs `CAP_NET_ADMIN`.
//! * [`fix`] turns off every changeable feature of transmit checksumming, TSO, GSO and GRO
//!   ([`Offload::FIX`]) on an interface where one of them is on, as `ethtool -K IFACE tx off
//!   tso off gso off gro off` does, then reads them back: what it reports as turned off is
//!   what the kernel says is off, and one still on (a feature the driver fixes on) is an
//!   error. Scatter-gather stays as it is (TSO off does not need it off).
//! * The settings that produce partial checksums and super-frames are the *sender's*: for a
//!   veth port, its peer's (in the tenant's namespace), which weft does not touch. Turning
//!   them off on weft's ports stops GRO on them and covers what weft's ports send; frames
//!   from a peer with its own offloads on still arrive with partial checksums (completed
//!   here) or as super-frames (counted as truncated by the receive ring).
//! * [`complete_checksum`] recomputes the TCP or UDP checksum of an Ethernet frame (up to two
//!   VLAN tags; IPv4, or IPv6 with hop-by-hop, routing and destination-options headers) from
//!   scratch: the pseudo-header, then the L4 header and payload with the checksum field
//!   taken as zero, folded and complemented (a UDP result of 0 is sent as `0xffff`). With
//!   `CHECKSUM_PARTIAL` the sender has stored in the field the folded, uncomplemented sum of
//!   the pseudo-header, and a device finishes it by summing from the L4 header to the end
//!   with the field as is and storing the complement; that gives the same value, so
//!   recomputing needs neither the field's contents nor the kernel's `csum_start` (which the
//!   TPACKET header does not carry). Fragments, other protocols, IPv6 jumbograms, a routing
//!   header with segments left, and frames shorter than their headers say are refused.
//!
//! The ioctl itself ([`weft_sys::ethtool`]) and the checksum code ([`weft_sys::csum`], beside
//! the receive ring that calls it; re-exported here) are weft-sys's; this module decides which
//! features matter and what to do about them.
//!
//! Invariants: no ioctl is made on a name longer than 15 bytes or containing a NUL (the
//! `ifreq` name stays NUL-terminated); every ethtool buffer is as long as the kernel is told
//! it is and lives for the whole call; [`complete_checksum`] never reads or writes outside
//! the frame and writes only the two checksum bytes, and only when it returns `Ok`.
//!
//! Cost: the start-up check is three ioctls per port to read (five more to change and read
//! back), once. A completed checksum is one pass over the frame's L4 bytes (about 100 ns
//! for 1,500 bytes), paid only by frames the kernel marked unfinished; other frames pay one
//! bit test in the receive ring.

use std::io;

use weft_sys::ethtool::{Ethtool, EthtoolError, Feature};

/// An offload, as `ethtool -k` groups features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Offload {
    /// Transmit checksumming (`tx-checksumming`): the stack leaves L4 checksums unfinished.
    TxChecksum,
    /// Receive checksumming (`rx-checksumming`): read, never changed.
    RxChecksum,
    /// Scatter-gather (`scatter-gather`): read, never changed.
    ScatterGather,
    /// TCP segmentation offload (`tcp-segmentation-offload`): TCP super-frames sent whole.
    Tso,
    /// Generic segmentation offload (`generic-segmentation-offload`).
    Gso,
    /// Generic receive offload (`generic-receive-offload`): received frames coalesced.
    Gro,
}

impl Offload {
    /// Every offload read.
    pub const ALL: [Offload; 6] = [
        Offload::TxChecksum,
        Offload::RxChecksum,
        Offload::ScatterGather,
        Offload::Tso,
        Offload::Gso,
        Offload::Gro,
    ];
    /// The offloads weft turns off.
    pub const FIX: [Offload; 4] = [
        Offload::TxChecksum,
        Offload::Tso,
        Offload::Gso,
        Offload::Gro,
    ];

    /// The keyword of `ethtool -K` (`tx`, `rx`, `sg`, `tso`, `gso`, `gro`).
    pub fn keyword(self) -> &'static str {
        match self {
            Offload::TxChecksum => "tx",
            Offload::RxChecksum => "rx",
            Offload::ScatterGather => "sg",
            Offload::Tso => "tso",
            Offload::Gso => "gso",
            Offload::Gro => "gro",
        }
    }

    /// The name `ethtool -k` prints.
    pub fn long_name(self) -> &'static str {
        match self {
            Offload::TxChecksum => "tx-checksumming",
            Offload::RxChecksum => "rx-checksumming",
            Offload::ScatterGather => "scatter-gather",
            Offload::Tso => "tcp-segmentation-offload",
            Offload::Gso => "generic-segmentation-offload",
            Offload::Gro => "generic-receive-offload",
        }
    }

    /// Whether kernel feature `name` (`ETH_SS_FEATURES`) belongs to this group (ethtool's
    /// patterns).
    pub fn has_feature(self, name: &str) -> bool {
        match self {
            Offload::TxChecksum => name.starts_with("tx-checksum-"),
            Offload::RxChecksum => name == "rx-checksum",
            Offload::ScatterGather => name.starts_with("tx-scatter-gather"),
            Offload::Tso => name.starts_with("tx-tcp") && name.ends_with("-segmentation"),
            Offload::Gso => name == "tx-generic-segmentation",
            Offload::Gro => name == "rx-gro",
        }
    }
}

impl std::fmt::Display for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.keyword())
    }
}

/// Which offloads of one interface are on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offloads {
    pub tx_checksum: bool,
    pub rx_checksum: bool,
    pub scatter_gather: bool,
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
}

impl Offloads {
    /// Whether `o` is on.
    pub fn is_on(&self, o: Offload) -> bool {
        match o {
            Offload::TxChecksum => self.tx_checksum,
            Offload::RxChecksum => self.rx_checksum,
            Offload::ScatterGather => self.scatter_gather,
            Offload::Tso => self.tso,
            Offload::Gso => self.gso,
            Offload::Gro => self.gro,
        }
    }

    fn set(&mut self, o: Offload, on: bool) {
        *match o {
            Offload::TxChecksum => &mut self.tx_checksum,
            Offload::RxChecksum => &mut self.rx_checksum,
            Offload::ScatterGather => &mut self.scatter_gather,
            Offload::Tso => &mut self.tso,
            Offload::Gso => &mut self.gso,
            Offload::Gro => &mut self.gro,
        } = on;
    }

    /// The offloads on, in [`Offload::ALL`] order.
    pub fn on(&self) -> Vec<Offload> {
        Offload::ALL
            .into_iter()
            .filter(|&o| self.is_on(o))
            .collect()
    }

    /// The offloads on that weft turns off ([`Offload::FIX`]).
    pub fn to_fix(&self) -> Vec<Offload> {
        Offload::FIX
            .into_iter()
            .filter(|&o| self.is_on(o))
            .collect()
    }
}

/// One interface's offloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceOffloads {
    pub iface: String,
    pub offloads: Offloads,
}

/// What [`fix`] did on one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixed {
    pub iface: String,
    /// The offloads that were on and are now off, in [`Offload::FIX`] order.
    pub turned_off: Vec<Offload>,
    /// The offloads as read back after the change.
    pub now: Offloads,
}

/// A failure, naming the interface, the step and the errno.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    #[error("`{iface}` is not an interface name (empty, over 15 bytes, or with a NUL)")]
    BadName { iface: String },
    #[error("`{iface}`: socket(AF_INET, SOCK_DGRAM) for the ethtool ioctl failed: {source} [{}]", errno_name(*.errno))]
    Socket {
        iface: String,
        errno: i32,
        source: io::Error,
    },
    #[error("`{iface}`: ioctl(SIOCETHTOOL, {ioctl}) failed: {source} [{}]{}", errno_name(*.errno), hint(*.errno))]
    Ioctl {
        iface: String,
        ioctl: &'static str,
        errno: i32,
        source: io::Error,
    },
    #[error("`{iface}`: ioctl(SIOCETHTOOL, {ioctl}) answered {what}")]
    Answer {
        iface: String,
        ioctl: &'static str,
        what: String,
    },
    #[error("`{iface}`: {} ({feature}) is still on after ioctl(SIOCETHTOOL, {ioctl}){}", .offload.long_name(), if *.fixed { " (fixed on by the driver)" } else { "" })]
    StillOn {
        iface: String,
        offload: Offload,
        feature: String,
        fixed: bool,
        ioctl: &'static str,
    },
}

impl OffloadError {
    /// The interface it concerns.
    pub fn iface(&self) -> &str {
        match self {
            OffloadError::BadName { iface }
            | OffloadError::Socket { iface, .. }
            | OffloadError::Ioctl { iface, .. }
            | OffloadError::Answer { iface, .. }
            | OffloadError::StillOn { iface, .. } => iface,
        }
    }

    /// The errno, when a system call failed.
    pub fn errno(&self) -> Option<i32> {
        match self {
            OffloadError::Socket { errno, .. } | OffloadError::Ioctl { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        _ => "errno",
    }
}

fn hint(e: i32) -> &'static str {
    match e {
        libc::EPERM => " (changing offloads needs root or CAP_NET_ADMIN)",
        libc::ENODEV => " (no such interface in this network namespace)",
        libc::EOPNOTSUPP => " (the driver does not support it)",
        _ => "",
    }
}

impl From<EthtoolError> for OffloadError {
    fn from(e: EthtoolError) -> OffloadError {
        let errno = |e: &io::Error| e.raw_os_error().unwrap_or(0);
        match e {
            EthtoolError::BadName { iface } => OffloadError::BadName { iface },
            EthtoolError::Socket { iface, source } => OffloadError::Socket {
                iface,
                errno: errno(&source),
                source,
            },
            EthtoolError::Ioctl {
                iface,
                ioctl,
                source,
            } => OffloadError::Ioctl {
                iface,
                ioctl,
                errno: errno(&source),
                source,
            },
            EthtoolError::Answer { iface, ioctl, what } => {
                OffloadError::Answer { iface, ioctl, what }
            }
        }
    }
}

fn summary(features: &[Feature]) -> Offloads {
    let mut s = Offloads::default();
    for o in Offload::ALL {
        s.set(
            o,
            features.iter().any(|f| f.active && o.has_feature(&f.name)),
        );
    }
    s
}

/// The offloads of interface `iface` (in the calling thread's network namespace).
pub fn read(iface: &str) -> Result<Offloads, OffloadError> {
    Ok(summary(&Ethtool::open(iface)?.features()?))
}

/// The offloads of each interface, in order.
pub fn detect<S: AsRef<str>>(ifaces: &[S]) -> Result<Vec<IfaceOffloads>, OffloadError> {
    ifaces
        .iter()
        .map(|i| {
            Ok(IfaceOffloads {
                iface: i.as_ref().to_string(),
                offloads: read(i.as_ref())?,
            })
        })
        .collect()
}

/// Turns off, on each interface where one of transmit checksumming, TSO, GSO and GRO is on,
/// every changeable feature of the four (`ethtool -K IFACE tx off tso off gso off gro off`),
/// and says what went off. A feature still on afterwards is an error
/// ([`OffloadError::StillOn`]); interfaces before the failing one keep their change.
pub fn fix<S: AsRef<str>>(ifaces: &[S]) -> Result<Vec<Fixed>, OffloadError> {
    ifaces.iter().map(|i| fix_one(i.as_ref())).collect()
}

fn fix_one(iface: &str) -> Result<Fixed, OffloadError> {
    let e = Ethtool::open(iface)?;
    let features = e.features()?;
    let before = summary(&features);
    if before.to_fix().is_empty() {
        return Ok(Fixed {
            iface: iface.to_string(),
            turned_off: Vec::new(),
            now: before,
        });
    }
    let in_fix = |f: &Feature| Offload::FIX.iter().any(|o| o.has_feature(&f.name));
    // Also those off only for now (TSO dropped by the kernel while transmit checksumming
    // is off, still requested on), as ethtool does: none comes back with another.
    let off: Vec<usize> = (0..features.len())
        .filter(|&i| features[i].available && in_fix(&features[i]))
        .collect();
    e.turn_off(features.len(), &off)?;
    let after = e.features()?;
    for o in Offload::FIX {
        if let Some(f) = after.iter().find(|f| f.active && o.has_feature(&f.name)) {
            return Err(OffloadError::StillOn {
                iface: iface.to_string(),
                offload: o,
                feature: f.name.clone(),
                fixed: !f.available,
                ioctl: "ETHTOOL_SFEATURES",
            });
        }
    }
    let now = summary(&after);
    Ok(Fixed {
        iface: iface.to_string(),
        turned_off: before
            .to_fix()
            .into_iter()
            .filter(|&o| !now.is_on(o))
            .collect(),
        now,
    })
}

/// The command that turns off what weft needs off on `iface`.
pub fn fix_command(iface: &str) -> String {
    format!("ethtool -K {iface} tx off tso off gso off gro off")
}

/// Why [`prepare_ports`] refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// An offload could not be read or turned off.
    #[error(transparent)]
    Offload(#[from] OffloadError),
    /// Offloads are on and weft was told not to change them.
    #[error("{}", offloads_on_message(.0))]
    OffloadsOn(Vec<IfaceOffloads>),
}

fn offloads_on_message(on: &[IfaceOffloads]) -> String {
    let mut m = String::from(
        "offloads are on, and --no-fix-offloads leaves them: with them, ports pass \
         frames with unfinished checksums and super-frames longer than a ring slot",
    );
    for i in on {
        let list: Vec<&str> = i.offloads.to_fix().iter().map(|o| o.long_name()).collect();
        m += &format!("\n  `{}`: {}", i.iface, list.join(", "));
    }
    m += "\nturn them off with:";
    for i in on {
        m += &format!("\n  {}", fix_command(&i.iface));
    }
    m += "\nor start without --no-fix-offloads (weft turns them off itself)";
    m
}

/// `weft run`'s start-up check of its ports (tenant interfaces and uplink), before any ring
/// is opened. An interface that does not exist is skipped (opening its port says so). With
/// `fix`, turns off the offloads of [`Offload::FIX`] that are on and returns one line per
/// interface saying what it turned off; without, returns no lines if they are all off and
/// refuses ([`PrepareError::OffloadsOn`], with the `ethtool` commands) otherwise.
pub fn prepare_ports<S: AsRef<str>>(ifaces: &[S], fix: bool) -> Result<Vec<String>, PrepareError> {
    let present: Vec<&str> = ifaces
        .iter()
        .map(|i| i.as_ref())
        .filter(|i| crate::afpacket::ifindex(i).is_ok())
        .collect();
    if !fix {
        let on: Vec<IfaceOffloads> = detect(&present)?
            .into_iter()
            .filter(|i| !i.offloads.to_fix().is_empty())
            .collect();
        return if on.is_empty() {
            Ok(Vec::new())
        } else {
            Err(PrepareError::OffloadsOn(on))
        };
    }
    Ok(self::fix(&present)?
        .into_iter()
        .map(|f| {
            if f.turned_off.is_empty() {
                format!(
                    "offloads on `{}`: tx, tso, gso and gro already off",
                    f.iface
                )
            } else {
                let list: Vec<&str> = f.turned_off.iter().map(|o| o.keyword()).collect();
                format!(
                    "offloads on `{}`: turned off {} (as `{}`; --no-fix-offloads leaves them)",
                    f.iface,
                    list.join(", "),
                    fix_command(&f.iface)
                )
            }
        })
        .collect())
}

/// Completing a partial checksum: in weft-sys, beside the AF_PACKET receive ring that calls
/// it; here too, where weft has always had it.
pub use weft_sys::csum::{complete_checksum, CsumError, L4};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_commands() {
        assert_eq!(
            fix_command("t1"),
            "ethtool -K t1 tx off tso off gso off gro off"
        );
        for o in Offload::FIX {
            assert!(fix_command("x").contains(&format!(" {} off", o.keyword())));
        }
        let e = read("").unwrap_err();
        assert!(e.to_string().contains("not an interface name"), "{e}");
        let e = read("sixteen-bytes-xx").unwrap_err();
        assert!(matches!(e, OffloadError::BadName { .. }), "{e}");
    }

    #[test]
    fn a_missing_interface_names_it_the_ioctl_and_the_errno() {
        let e = read("wxnope9").unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("`wxnope9`") && s.contains("ETHTOOL_GSSET_INFO") && s.contains("[ENODEV]"),
            "{s}"
        );
        assert_eq!(e.errno(), Some(libc::ENODEV));
        // The start-up check leaves missing interfaces to the step that opens them.
        assert!(prepare_ports(&["wxnope9"], false).unwrap().is_empty());
    }

    #[test]
    fn short_and_odd_frames_are_refused_without_panicking() {
        for n in 0..80 {
            let mut f = vec![0u8; n];
            if n >= 14 {
                f[12] = 0x08;
            }
            let before = f.clone();
            assert!(complete_checksum(&mut f).is_err());
            assert_eq!(f, before);
        }
    }
}
