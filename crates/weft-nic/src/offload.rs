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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SIOCETHTOOL` (`<linux/sockios.h>`).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// `<linux/ethtool.h>` commands and constants.
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;
/// More feature names than any kernel has (about 70 today): a bound on what is allocated.
const MAX_FEATURES: u32 = 1024;

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

/// One kernel feature of an interface (`ETH_SS_FEATURES` entry and its bits).
#[derive(Debug, Clone)]
struct Feature {
    name: String,
    /// Changeable (`available`: in the device's `hw_features`).
    available: bool,
    active: bool,
}

/// `struct ethtool_sset_info` with room for one `data` word.
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: u32,
}

/// A socket for the ethtool ioctl on one interface (also AF_XDP's channel count,
/// `afxdp::rx_queues`).
pub(crate) struct Ethtool<'a> {
    fd: OwnedFd,
    iface: &'a str,
}

impl<'a> Ethtool<'a> {
    pub(crate) fn open(iface: &'a str) -> Result<Ethtool<'a>, OffloadError> {
        if iface.is_empty() || iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
            return Err(OffloadError::BadName {
                iface: iface.to_string(),
            });
        }
        // SAFETY: plain system call.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(OffloadError::Socket {
                iface: iface.to_string(),
                errno: e.raw_os_error().unwrap_or(0),
                source: e,
            });
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Ethtool { fd, iface })
    }

    /// One `SIOCETHTOOL` whose argument is at `arg`: an ethtool structure that starts with
    /// its command word, writable and as long as that command makes the kernel read and
    /// write. Returns the ioctl's (non-negative) result.
    pub(crate) fn ioctl(
        &self,
        arg: *mut libc::c_void,
        name: &'static str,
    ) -> Result<i32, OffloadError> {
        // SAFETY: all-zero is a valid `ifreq`.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        // The name is at most 15 bytes without NUL (checked in `open`): the 16th stays 0.
        for (d, b) in ifr.ifr_name.iter_mut().zip(self.iface.bytes()) {
            *d = b as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = arg.cast();
        // SAFETY: `ifr` is a valid `ifreq` naming the interface (NUL-terminated) whose
        // `ifru_data` is `arg`, which the callers keep live for the call and size for what
        // the command reads and writes (the lengths they put in it match its allocation).
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(OffloadError::Ioctl {
                iface: self.iface.to_string(),
                ioctl: name,
                errno: e.raw_os_error().unwrap_or(0),
                source: e,
            });
        }
        Ok(r)
    }

    fn answer(&self, ioctl: &'static str, what: String) -> OffloadError {
        OffloadError::Answer {
            iface: self.iface.to_string(),
            ioctl,
            what,
        }
    }

    /// Every feature of the interface: names, then their state.
    fn features(&self) -> Result<Vec<Feature>, OffloadError> {
        let mut info = SsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_FEATURES,
            data: 0,
        };
        self.ioctl((&mut info as *mut SsetInfo).cast(), "ETHTOOL_GSSET_INFO")?;
        let n = info.data;
        if info.sset_mask & (1 << ETH_SS_FEATURES) == 0 || n == 0 || n > MAX_FEATURES {
            return Err(self.answer(
                "ETHTOOL_GSSET_INFO",
                format!("{n} feature names (mask {:#x})", info.sset_mask),
            ));
        }
        let n = n as usize;
        // `struct ethtool_gstrings`: cmd, string_set, len, then `len` names of 32 bytes.
        let mut strings = vec![0u32; 3 + n * ETH_GSTRING_LEN / 4];
        strings[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_FEATURES, n as u32]);
        self.ioctl(strings.as_mut_ptr().cast(), "ETHTOOL_GSTRINGS")?;
        if strings[2] as usize != n {
            return Err(self.answer("ETHTOOL_GSTRINGS", format!("{} names, not {n}", strings[2])));
        }
        let bytes: Vec<u8> = strings[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        // `struct ethtool_gfeatures`: cmd, size, then `size` blocks of 32 features.
        let blocks = n.div_ceil(32);
        let mut g = vec![0u32; 2 + 4 * blocks];
        g[..2].copy_from_slice(&[ETHTOOL_GFEATURES, blocks as u32]);
        self.ioctl(g.as_mut_ptr().cast(), "ETHTOOL_GFEATURES")?;
        Ok((0..n)
            .map(|i| {
                let name = &bytes[i * ETH_GSTRING_LEN..(i + 1) * ETH_GSTRING_LEN];
                let end = name.iter().position(|&b| b == 0).unwrap_or(ETH_GSTRING_LEN);
                // Block {available, requested, active, never_changed}.
                let (block, bit) = (2 + 4 * (i / 32), 1u32 << (i % 32));
                Feature {
                    name: String::from_utf8_lossy(&name[..end]).into_owned(),
                    available: g[block] & bit != 0,
                    active: g[block + 2] & bit != 0,
                }
            })
            .collect())
    }

    /// Turns the features at `off` (indices into [`Ethtool::features`]) off.
    fn turn_off(&self, n: usize, off: &[usize]) -> Result<(), OffloadError> {
        // `struct ethtool_sfeatures`: cmd, size, then `size` blocks {valid, requested}.
        let blocks = n.div_ceil(32);
        let mut s = vec![0u32; 2 + 2 * blocks];
        s[..2].copy_from_slice(&[ETHTOOL_SFEATURES, blocks as u32]);
        for &i in off {
            s[2 + 2 * (i / 32)] |= 1 << (i % 32);
        }
        // A positive answer (ETHTOOL_F_WISH: not all applied) is judged by reading back.
        self.ioctl(s.as_mut_ptr().cast(), "ETHTOOL_SFEATURES")
            .map(|_| ())
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

// ---------------------------------------------------------------------------------------
// Completing a partial checksum.
// ---------------------------------------------------------------------------------------

/// The transport of a frame whose checksum was completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Tcp,
    Udp,
}

/// Why a checksum could not be completed (the frame is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CsumError {
    #[error("neither IPv4 nor IPv6")]
    NotIp,
    #[error("neither TCP nor UDP")]
    NotTcpUdp,
    #[error("an IP fragment")]
    Fragment,
    #[error("IP headers not handled (IPv6 jumbogram, routing header with segments left, or too many extension headers)")]
    Unsupported,
    #[error("shorter than its headers say")]
    Truncated,
}

fn be16(b: &[u8], at: usize) -> usize {
    u16::from_be_bytes([b[at], b[at + 1]]) as usize
}

/// The ones'-complement sum of `b` as big-endian 16-bit words (an odd last byte padded with
/// zero), added to `sum` without folding.
fn sum_words(mut sum: u64, b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(4);
    for c in &mut chunks {
        sum += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u32::from_be_bytes(tail) as u64
}

fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Computes the TCP or UDP checksum of Ethernet frame `frame` and writes it into the
/// frame's checksum field (see the module's documentation for the frames it takes and why
/// recomputing is the kernel's completion). Bytes after the IP packet (Ethernet padding)
/// are left out. Never panics; on `Err` the frame is unchanged.
pub fn complete_checksum(frame: &mut [u8]) -> Result<L4, CsumError> {
    let (mut ethertype, mut l3) = (frame.get(12..14).ok_or(CsumError::Truncated)?, 14);
    // Up to two VLAN tags (802.1Q, 802.1ad).
    for _ in 0..2 {
        if ethertype == [0x81, 0x00] || ethertype == [0x88, 0xa8] {
            ethertype = frame.get(l3 + 2..l3 + 4).ok_or(CsumError::Truncated)?;
            l3 += 4;
        }
    }
    // Pseudo-header sum (without the length), protocol, L4 start and end.
    let (pseudo, proto, l4, end) = match *ethertype {
        [0x08, 0x00] => {
            let ip = frame.get(l3..l3 + 20).ok_or(CsumError::Truncated)?;
            let ihl = (ip[0] & 0x0f) as usize * 4;
            if ip[0] >> 4 != 4 || ihl < 20 {
                return Err(CsumError::NotIp);
            }
            let total = be16(ip, 2);
            if be16(ip, 6) & 0x3fff != 0 {
                return Err(CsumError::Fragment);
            }
            if total < ihl || l3 + total > frame.len() {
                return Err(CsumError::Truncated);
            }
            let proto = ip[9];
            (sum_words(0, &ip[12..20]), proto, l3 + ihl, l3 + total)
        }
        [0x86, 0xdd] => {
            let ip = frame.get(l3..l3 + 40).ok_or(CsumError::Truncated)?;
            if ip[0] >> 4 != 6 {
                return Err(CsumError::NotIp);
            }
            let payload = be16(ip, 4);
            if payload == 0 {
                return Err(CsumError::Unsupported);
            }
            let end = l3 + 40 + payload;
            if end > frame.len() {
                return Err(CsumError::Truncated);
            }
            let pseudo = sum_words(0, &ip[8..40]);
            let (mut next, mut at) = (ip[6], l3 + 40);
            // Extension headers: hop-by-hop, routing (none left to visit), destination options.
            for _ in 0..8 {
                match next {
                    0 | 43 | 60 => {
                        let h = frame.get(at..at + 8).ok_or(CsumError::Truncated)?;
                        if next == 43 && h[3] != 0 {
                            return Err(CsumError::Unsupported);
                        }
                        next = h[0];
                        at += (h[1] as usize + 1) * 8;
                        if at > end {
                            return Err(CsumError::Truncated);
                        }
                    }
                    44 => return Err(CsumError::Fragment),
                    _ => break,
                }
            }
            if matches!(next, 0 | 43 | 60) {
                return Err(CsumError::Unsupported);
            }
            (pseudo, next, at, end)
        }
        _ => return Err(CsumError::NotIp),
    };
    let (kind, field, len) = match proto {
        6 => {
            if end - l4 < 20 {
                return Err(CsumError::Truncated);
            }
            (L4::Tcp, l4 + 16, end - l4)
        }
        17 => {
            if end - l4 < 8 {
                return Err(CsumError::Truncated);
            }
            let ulen = be16(frame, l4 + 4);
            if ulen < 8 || ulen > end - l4 {
                return Err(CsumError::Truncated);
            }
            (L4::Udp, l4 + 6, ulen)
        }
        _ => return Err(CsumError::NotTcpUdp),
    };
    frame[field] = 0;
    frame[field + 1] = 0;
    let sum = sum_words(pseudo + proto as u64 + len as u64, &frame[l4..l4 + len]);
    let mut c = !fold(sum);
    if kind == L4::Udp && c == 0 {
        c = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(kind)
}

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
