//! The ethtool ioctl (`SIOCETHTOOL` over an `AF_INET` datagram socket, as `ethtool -k`/`-K`
//! does): an interface's features by name with their state (`ETHTOOL_GSSET_INFO`,
//! `ETHTOOL_GSTRINGS` of `ETH_SS_FEATURES`, `ETHTOOL_GFEATURES`), turning some off
//! (`ETHTOOL_SFEATURES`), and its channel counts (`ETHTOOL_GCHANNELS`). Which features
//! matter and what to do about them is weft-nic's `offload`.
//!
//! Invariants: no ioctl is made on a name longer than 15 bytes or containing a NUL (the
//! `ifreq` name stays NUL-terminated); every ethtool buffer is as long as the kernel is told
//! it is and lives for the whole call (the one raw ioctl is private, each command sizes its
//! own buffer). Cost: three ioctls to read the features, one to change them, one for the
//! channels. The socket comes from rustix; the ioctl itself stays over libc (its argument is
//! a pointer into a buffer whose length the command decides).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

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

const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct EthtoolChannels {
    pub(crate) cmd: u32,
    pub(crate) max_rx: u32,
    pub(crate) max_tx: u32,
    pub(crate) max_other: u32,
    pub(crate) max_combined: u32,
    pub(crate) rx_count: u32,
    pub(crate) tx_count: u32,
    pub(crate) other_count: u32,
    pub(crate) combined_count: u32,
}

/// A failure, naming the interface and the step; the errno is the source's.
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    /// Not a name an interface can have.
    #[error("`{iface}` is not an interface name (empty, over 15 bytes, or with a NUL)")]
    BadName {
        /// The name given.
        iface: String,
    },
    /// The socket for the ioctl could not be made.
    #[error("`{iface}`: socket(AF_INET, SOCK_DGRAM) for the ethtool ioctl failed: {source}")]
    Socket {
        /// The interface.
        iface: String,
        /// The error, with its errno.
        source: io::Error,
    },
    /// The kernel refused a command.
    #[error("`{iface}`: ioctl(SIOCETHTOOL, {ioctl}) failed: {source}")]
    Ioctl {
        /// The interface.
        iface: String,
        /// The command (`ETHTOOL_GFEATURES`, ...).
        ioctl: &'static str,
        /// The error, with its errno.
        source: io::Error,
    },
    /// The kernel's answer made no sense.
    #[error("`{iface}`: ioctl(SIOCETHTOOL, {ioctl}) answered {what}")]
    Answer {
        /// The interface.
        iface: String,
        /// The command.
        ioctl: &'static str,
        /// What it answered.
        what: String,
    },
}

/// One kernel feature of an interface (`ETH_SS_FEATURES` entry and its bits).
#[derive(Debug, Clone)]
pub struct Feature {
    /// Its name (`tx-checksum-ipv4`, `rx-gro`, ...).
    pub name: String,
    /// Changeable (`available`: in the device's `hw_features`).
    pub available: bool,
    /// On now.
    pub active: bool,
}

/// `struct ethtool_sset_info` with room for one `data` word.
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: u32,
}

/// A socket for the ethtool ioctl on one interface.
pub struct Ethtool<'a> {
    fd: OwnedFd,
    iface: &'a str,
}

impl<'a> Ethtool<'a> {
    /// A socket for the ioctl on `iface`; a name no interface can have (empty, 16 bytes or
    /// more, a NUL) is refused before any system call.
    pub fn open(iface: &'a str) -> Result<Ethtool<'a>, EthtoolError> {
        if iface.is_empty() || iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
            return Err(EthtoolError::BadName {
                iface: iface.to_string(),
            });
        }
        use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
        let fd = socket_with(
            AddressFamily::INET,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| EthtoolError::Socket {
            iface: iface.to_string(),
            source: e.into(),
        })?;
        Ok(Ethtool { fd, iface })
    }

    /// One `SIOCETHTOOL` whose argument is at `arg`: an ethtool structure that starts with
    /// its command word, writable and as long as that command makes the kernel read and
    /// write. Returns the ioctl's (non-negative) result.
    ///
    /// # Safety
    ///
    /// `arg` must point to such a structure, live and writable for the call.
    unsafe fn ioctl(
        &self,
        arg: *mut libc::c_void,
        name: &'static str,
    ) -> Result<i32, EthtoolError> {
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
            return Err(EthtoolError::Ioctl {
                iface: self.iface.to_string(),
                ioctl: name,
                source: io::Error::last_os_error(),
            });
        }
        Ok(r)
    }

    fn answer(&self, ioctl: &'static str, what: String) -> EthtoolError {
        EthtoolError::Answer {
            iface: self.iface.to_string(),
            ioctl,
            what,
        }
    }

    /// Every feature of the interface: names, then their state.
    pub fn features(&self) -> Result<Vec<Feature>, EthtoolError> {
        let mut info = SsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_FEATURES,
            data: 0,
        };
        // SAFETY: `info` is a live `ethtool_sset_info` with room for the one `data` word its
        // mask asks for.
        unsafe { self.ioctl((&mut info as *mut SsetInfo).cast(), "ETHTOOL_GSSET_INFO")? };
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
        // SAFETY: `strings` is an `ethtool_gstrings` whose `len` (n) names of 32 bytes it
        // has room for, live for the call.
        unsafe { self.ioctl(strings.as_mut_ptr().cast(), "ETHTOOL_GSTRINGS")? };
        if strings[2] as usize != n {
            return Err(self.answer("ETHTOOL_GSTRINGS", format!("{} names, not {n}", strings[2])));
        }
        let bytes: Vec<u8> = strings[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        // `struct ethtool_gfeatures`: cmd, size, then `size` blocks of 32 features.
        let blocks = n.div_ceil(32);
        let mut g = vec![0u32; 2 + 4 * blocks];
        g[..2].copy_from_slice(&[ETHTOOL_GFEATURES, blocks as u32]);
        // SAFETY: `g` is an `ethtool_gfeatures` with room for the `size` blocks it says.
        unsafe { self.ioctl(g.as_mut_ptr().cast(), "ETHTOOL_GFEATURES")? };
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

    /// Turns the features at `off` (indices into [`Ethtool::features`], of `n` features) off.
    /// Indices at or past `n` are refused before the call.
    pub fn turn_off(&self, n: usize, off: &[usize]) -> Result<(), EthtoolError> {
        if let Some(&i) = off.iter().find(|&&i| i >= n) {
            return Err(self.answer("ETHTOOL_SFEATURES", format!("feature {i} of {n}")));
        }
        // `struct ethtool_sfeatures`: cmd, size, then `size` blocks {valid, requested}.
        let blocks = n.div_ceil(32);
        let mut s = vec![0u32; 2 + 2 * blocks];
        s[..2].copy_from_slice(&[ETHTOOL_SFEATURES, blocks as u32]);
        for &i in off {
            s[2 + 2 * (i / 32)] |= 1 << (i % 32);
        }
        // A positive answer (ETHTOOL_F_WISH: not all applied) is judged by reading back.
        // SAFETY: `s` is an `ethtool_sfeatures` with room for the `size` blocks it says.
        unsafe { self.ioctl(s.as_mut_ptr().cast(), "ETHTOOL_SFEATURES") }.map(|_| ())
    }

    /// The interface's receive and combined channels (`ETHTOOL_GCHANNELS`).
    pub fn channels(&self) -> Result<(u32, u32), EthtoolError> {
        let mut ch = EthtoolChannels {
            cmd: ETHTOOL_GCHANNELS,
            ..EthtoolChannels::default()
        };
        // SAFETY: `ch` is a live `ethtool_channels`, which the kernel fills in.
        unsafe {
            self.ioctl(
                (&mut ch as *mut EthtoolChannels).cast(),
                "ETHTOOL_GCHANNELS",
            )?
        };
        Ok((ch.rx_count, ch.combined_count))
    }
}
