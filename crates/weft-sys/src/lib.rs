//! weft's system layer, Linux only: every `unsafe` of the software NIC, each behind a safe
//! function or type, so that weft-nic above it forbids unsafe code. Where rustix has a safe
//! wrapper for a call (identity, signals to a pid, `flock`, `mount`, CPU affinity, timer
//! slack, nice value, rlimits, clocks, plain sockets), it is used and no unsafe remains;
//! libc is called directly only where no safe wrapper exists (the TPACKET and AF_XDP rings
//! and their `mmap`s, `bpf(2)`, the ethtool and MTU ioctls, `sched_setattr`, `getgrnam_r`,
//! `SO_PEERCRED`, signal handlers, `ppoll` over `pollfd`s).
//!
//! * [`afpacket`]: AF_PACKET sockets with TPACKET_V2 or V3 receive rings and a transmit ring.
//! * `afxdp` (cargo feature `af-xdp`, on by default): AF_XDP sockets, their UMEM and rings,
//!   and a hand-assembled XDP redirect program.
//! * [`csum`]: completing the TCP/UDP checksum of a frame the kernel hands over unfinished.
//! * [`ethtool`]: the `SIOCETHTOOL` ioctl (features, channels).
//! * [`link`]: an interface's link state from sysfs, read without allocating.
//! * [`clock`]: the dataplane's picosecond clock and the other clocks it reads.
//! * [`process`], [`sched`], [`fs`], [`net`]: identity, signals, limits; CPU affinity, slice,
//!   timer slack, waiting; locks and mounts; peer credentials and interface indices.
//!
//! Invariants: every `unsafe` block says why it is sound (`// SAFETY:`, enforced by
//! `clippy::undocumented_unsafe_blocks`); no public function is unsafe. Cost: what each
//! system call costs; nothing here allocates on a per-frame path.

#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod afpacket;
#[cfg(feature = "af-xdp")]
pub mod afxdp;
pub mod clock;
pub mod csum;
pub mod ethtool;
pub mod fs;
pub mod link;
pub mod net;
pub mod process;
pub mod sched;
