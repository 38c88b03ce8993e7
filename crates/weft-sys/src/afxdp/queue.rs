//! One AF_XDP socket (one receive queue): its UMEM and rings set up, receiving (fill ring
//! kept full, frames handed to a callback, chunks recycled), transmitting (free list,
//! descriptors posted, the kernel kicked, completions reaped) and the kernel's statistics.
//!
//! Invariants: a chunk is owned by exactly one side at a time (per-chunk flags); a completion
//! or descriptor naming anything else is counted and skipped. Cost: per frame, no system
//! call to receive and a share of one `sendto` to transmit, one copy each way.

use super::*;

// ---------------------------------------------------------------------------------------
// One socket (one queue).
// ---------------------------------------------------------------------------------------

/// Ring and UMEM sizes of one queue's socket.
#[derive(Debug, Clone, Copy)]
pub struct XdpConfig {
    /// Bytes per UMEM chunk (a power of two, at least 2048).
    pub frame_size: u32,
    /// Receive chunks (a power of two); the RX ring has as many slots, the fill ring twice.
    pub rx_frames: u32,
    /// Transmit chunks on queue 0 (a power of two); the TX ring has twice as many slots,
    /// the completion ring as many.
    pub tx_frames: u32,
}

impl Default for XdpConfig {
    fn default() -> XdpConfig {
        XdpConfig {
            frame_size: 2048,
            rx_frames: 2048,
            tx_frames: 2048,
        }
    }
}

/// Kick the kernel after this many unkicked transmit descriptors (its generic xmit sends at
/// most 32 per `sendto`).
pub const KICK_BATCH: u32 = 32;

#[derive(Debug, Default, Clone)]
pub(super) struct RxCounters {
    pub(super) frames: u64,
    pub(super) bytes: u64,
    pub(super) bad_desc: u64,
    pub(super) bad_index: u64,
}

#[derive(Debug, Default, Clone)]
pub(super) struct TxCounters {
    pub(super) frames: u64,
    pub(super) completed: u64,
    pub(super) no_frame: u64,
    pub(super) ring_full: u64,
    pub(super) oversize: u64,
    pub(super) bad_completion: u64,
    pub(super) bad_index: u64,
    pub(super) kicks: u64,
    pub(super) kick_again: u64,
    pub(super) kick_errors: u64,
}

/// The transmit side, behind a `RefCell` because [`XdpPort::send`] takes `&self`.
pub(super) struct TxSide {
    tx_prod: u32,
    comp_cons: u32,
    /// Free transmit chunks (absolute chunk numbers).
    free: Vec<u32>,
    /// Per transmit chunk: posted to the kernel and not yet completed.
    in_kernel: Vec<bool>,
    unkicked: u32,
    kick_needed: bool,
    pub(super) c: TxCounters,
}

pub(super) struct Queue {
    // Rings before the socket and the UMEM: unmapped first on drop.
    fill: Ring,
    comp: Ring,
    rx: Ring,
    tx: Option<Ring>,
    pub(super) fd: OwnedFd,
    umem: Mmap,
    geo: Geometry,
    pub(super) queue_id: u32,
    // Receive side.
    fill_prod: u32,
    rx_cons: u32,
    /// Per receive chunk: in the kernel's hands (fill ring or about to be written).
    rx_in_kernel: Vec<bool>,
    /// Receive chunks back from the kernel, waiting for fill-ring room.
    refill: Vec<u32>,
    pub(super) rxc: RxCounters,
    pub(super) txs: RefCell<TxSide>,
}

pub(super) fn setsockopt<T>(fd: RawFd, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of `size_of::<T>()` bytes for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A step of opening a queue that failed: the call, and the error it returned.
type Step<T> = Result<T, (&'static str, io::Error)>;

/// The geometry `cfg` asks for, if its sizes are powers of two and a frame holds 2048 bytes.
fn geometry(cfg: &XdpConfig, tx: bool) -> Step<Geometry> {
    let pow2 = |n: u32| n.is_power_of_two();
    if !pow2(cfg.frame_size)
        || cfg.frame_size < 2048
        || !pow2(cfg.rx_frames)
        || !pow2(cfg.tx_frames)
    {
        return Err((
            "ring geometry",
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame size (≥ 2048) and frame counts must be powers of two",
            ),
        ));
    }
    Ok(Geometry {
        chunk: cfg.frame_size,
        rx_chunks: cfg.rx_frames,
        tx_chunks: if tx { cfg.tx_frames } else { 0 },
    })
}

/// Maps the UMEM of `geo` and registers it with the socket `raw`.
fn register_umem(raw: libc::c_int, geo: &Geometry) -> Step<Mmap> {
    let umem = Mmap::map(
        geo.umem_bytes() as usize,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
        -1,
        0,
    )
    .map_err(|e| ("mmap(UMEM)", e))?;
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr.as_ptr() as u64,
        len: umem.len as u64,
        chunk_size: geo.chunk,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(raw, libc::XDP_UMEM_REG, &reg).map_err(|e| ("setsockopt(XDP_UMEM_REG)", e))?;
    Ok(umem)
}

/// Where the kernel put the rings of socket `raw` (a kernel from 5.4 on).
fn ring_offsets(raw: libc::c_int) -> Step<libc::xdp_mmap_offsets> {
    // SAFETY: all-zero is a valid `xdp_mmap_offsets` (plain integers).
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: `off` is writable for `len` bytes; the kernel writes at most that many.
    let r = unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            &mut off as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(("getsockopt(XDP_MMAP_OFFSETS)", io::Error::last_os_error()));
    }
    if len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err((
            "getsockopt(XDP_MMAP_OFFSETS)",
            io::Error::new(
                io::ErrorKind::Unsupported,
                "old offsets layout (kernel before 5.4)",
            ),
        ));
    }
    Ok(off)
}

/// Binds the socket `raw` to queue `queue_id` of interface `ifindex`, in copy mode.
fn bind_queue(raw: libc::c_int, ifindex: u32, queue_id: u32) -> Step<()> {
    // SAFETY: all-zero is a valid `sockaddr_xdp`; the fields bind needs are set below.
    let mut sa: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
    sa.sxdp_family = libc::AF_XDP as u16;
    sa.sxdp_flags = libc::XDP_COPY;
    sa.sxdp_ifindex = ifindex;
    sa.sxdp_queue_id = queue_id;
    // SAFETY: `sa` is a valid `sockaddr_xdp` of the given length.
    let r = unsafe {
        libc::bind(
            raw,
            &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(("bind(AF_XDP, XDP_COPY)", io::Error::last_os_error()));
    }
    Ok(())
}

impl Queue {
    /// Opens queue `queue_id` of interface `iface` (index `ifindex`): a socket, its UMEM,
    /// its fill, completion and receive rings (and transmit ring if `tx`), every receive
    /// chunk given to the fill ring, then the bind.
    pub(super) fn open(
        iface: &str,
        ifindex: u32,
        queue_id: u32,
        cfg: &XdpConfig,
        tx: bool,
    ) -> R<Queue> {
        let err = |(step, e): (&str, io::Error)| {
            XdpError::new(iface, format!("{step} (queue {queue_id})"), e)
        };
        let geo = geometry(cfg, tx).map_err(err)?;
        // SAFETY: plain system call.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(err(("socket(AF_XDP)", io::Error::last_os_error())));
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = register_umem(raw, &geo).map_err(err)?;
        let fill_n = geo.rx_chunks * 2;
        let comp_n = geo.tx_chunks.max(64);
        let rx_n = geo.rx_chunks;
        let tx_n = geo.tx_chunks * 2;
        let size = |name, opt, n: &u32| setsockopt(raw, opt, n).map_err(|e| (name, e));
        size(
            "setsockopt(XDP_UMEM_FILL_RING)",
            libc::XDP_UMEM_FILL_RING,
            &fill_n,
        )
        .map_err(err)?;
        size(
            "setsockopt(XDP_UMEM_COMPLETION_RING)",
            libc::XDP_UMEM_COMPLETION_RING,
            &comp_n,
        )
        .map_err(err)?;
        size("setsockopt(XDP_RX_RING)", libc::XDP_RX_RING, &rx_n).map_err(err)?;
        if tx {
            size("setsockopt(XDP_TX_RING)", libc::XDP_TX_RING, &tx_n).map_err(err)?;
        }
        let off = ring_offsets(raw).map_err(err)?;
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let map = |name, o, pgoff, n, entry| {
            Ring::map(raw, o, pgoff, n, entry).map_err(|e| err((name, e)))
        };
        let fill = map(
            "mmap(fill ring)",
            &off.fr,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            fill_n,
            8,
        )?;
        let comp = map(
            "mmap(completion ring)",
            &off.cr,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            comp_n,
            8,
        )?;
        let rx = map(
            "mmap(RX ring)",
            &off.rx,
            libc::XDP_PGOFF_RX_RING as u64,
            rx_n,
            desc,
        )?;
        let txr = if tx {
            Some(map(
                "mmap(TX ring)",
                &off.tx,
                libc::XDP_PGOFF_TX_RING as u64,
                tx_n,
                desc,
            )?)
        } else {
            None
        };
        let mut q = Queue {
            fill,
            comp,
            rx,
            tx: txr,
            fd,
            umem,
            geo,
            queue_id,
            fill_prod: 0,
            rx_cons: 0,
            rx_in_kernel: vec![false; geo.rx_chunks as usize],
            refill: (0..geo.rx_chunks).rev().collect(),
            rxc: RxCounters::default(),
            txs: RefCell::new(TxSide {
                tx_prod: 0,
                comp_cons: 0,
                free: (geo.rx_chunks..geo.rx_chunks + geo.tx_chunks)
                    .rev()
                    .collect(),
                in_kernel: vec![false; geo.tx_chunks as usize],
                unkicked: 0,
                kick_needed: false,
                c: TxCounters::default(),
            }),
        };
        // Every receive chunk to the fill ring before the socket is bound.
        q.refill_pending();
        bind_queue(raw, ifindex, queue_id).map_err(err)?;
        Ok(q)
    }

    /// Gives back to the fill ring as many waiting receive chunks as it has room for.
    fn refill_pending(&mut self) {
        if self.refill.is_empty() {
            return;
        }
        let cons = self.fill.consumer().load(Ordering::Acquire);
        let Some(room) = ring_free(self.fill_prod, cons, self.fill.size) else {
            self.rxc.bad_index += 1;
            return;
        };
        let n = room.min(self.refill.len() as u32);
        for i in 0..n {
            let c = self.refill.pop().expect("n ≤ len");
            self.rx_in_kernel[c as usize] = true;
            self.fill.write_addr(
                self.fill_prod.wrapping_add(i),
                c as u64 * self.geo.chunk as u64,
            );
        }
        if n > 0 {
            self.fill_prod = self.fill_prod.wrapping_add(n);
            self.fill
                .producer()
                .store(self.fill_prod, Ordering::Release);
        }
    }

    /// Calls `f` on up to `budget` received frames; returns how many.
    pub(super) fn recv(&mut self, budget: u32, f: &mut dyn FnMut(&[u8], u64)) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let Some(n) = ring_ready(prod, self.rx_cons, self.rx.size) else {
            self.rxc.bad_index += 1;
            return 0;
        };
        let n = n.min(budget);
        let mut frames = 0;
        for i in 0..n {
            let d = self.rx.read_desc(self.rx_cons.wrapping_add(i));
            match rx_chunk(&self.geo, d.addr, d.len, d.options) {
                Some(c) if self.rx_in_kernel[c as usize] => {
                    self.rx_in_kernel[c as usize] = false;
                    // SAFETY: the frame lies inside receive chunk `c` of the UMEM (checked
                    // by `rx_chunk`), which the kernel handed to us and does not write
                    // until it is back in the fill ring (after this loop).
                    let frame = unsafe {
                        std::slice::from_raw_parts(
                            self.umem.ptr.as_ptr().add(d.addr as usize),
                            d.len as usize,
                        )
                    };
                    f(frame, 0);
                    self.refill.push(c);
                    self.rxc.frames += 1;
                    self.rxc.bytes += d.len as u64;
                    frames += 1;
                }
                _ => self.rxc.bad_desc += 1,
            }
        }
        if n > 0 {
            self.rx_cons = self.rx_cons.wrapping_add(n);
            self.rx.consumer().store(self.rx_cons, Ordering::Release);
        }
        self.refill_pending();
        frames
    }

    /// Takes completed transmit chunks back into the free list.
    fn reap(&self, t: &mut TxSide) {
        let prod = self.comp.producer().load(Ordering::Acquire);
        let Some(n) = ring_ready(prod, t.comp_cons, self.comp.size) else {
            t.c.bad_index += 1;
            return;
        };
        for i in 0..n {
            let a = self.comp.read_addr(t.comp_cons.wrapping_add(i));
            match completion_chunk(&self.geo, a) {
                Some(c) if t.in_kernel[(c - self.geo.rx_chunks) as usize] => {
                    t.in_kernel[(c - self.geo.rx_chunks) as usize] = false;
                    t.free.push(c);
                    t.c.completed += 1;
                }
                _ => t.c.bad_completion += 1,
            }
        }
        if n > 0 {
            t.comp_cons = t.comp_cons.wrapping_add(n);
            self.comp.consumer().store(t.comp_cons, Ordering::Release);
        }
    }

    /// `sendto(MSG_DONTWAIT)`: the kernel transmits up to 32 posted descriptors.
    fn kick(&self, t: &mut TxSide) {
        t.unkicked = 0;
        t.c.kicks += 1;
        // SAFETY: a zero-length sendto with no buffer and no address: the AF_XDP "kick".
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            t.kick_needed = false;
            return;
        }
        match io::Error::last_os_error().raw_os_error() {
            // Budget spent, completion ring full, or the device busy: kick again later.
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => t.c.kick_again += 1,
            _ => t.c.kick_errors += 1,
        }
        t.kick_needed = true;
    }

    pub(super) fn send(&self, frame: &[u8]) -> bool {
        let Some(tx) = &self.tx else { return false };
        let mut guard = self.txs.borrow_mut();
        let t = &mut *guard;
        if frame.is_empty() || frame.len() > self.geo.chunk as usize {
            t.c.oversize += 1;
            return false;
        }
        if t.free.is_empty() {
            self.reap(t);
        }
        let Some(c) = t.free.pop() else {
            t.c.no_frame += 1;
            if t.kick_needed {
                self.kick(t);
            }
            return false;
        };
        let cons = tx.consumer().load(Ordering::Acquire);
        if ring_free(t.tx_prod, cons, tx.size).unwrap_or(0) == 0 {
            t.free.push(c);
            t.c.ring_full += 1;
            self.kick(t);
            return false;
        }
        let addr = c as u64 * self.geo.chunk as u64;
        // SAFETY: transmit chunk `c` is free (not in the kernel's hands, checked by the
        // free list), lies inside the UMEM, and `frame.len() ≤ chunk` (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.umem.ptr.as_ptr().add(addr as usize),
                frame.len(),
            )
        };
        tx.write_desc(
            t.tx_prod,
            libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            },
        );
        t.in_kernel[(c - self.geo.rx_chunks) as usize] = true;
        t.tx_prod = t.tx_prod.wrapping_add(1);
        tx.producer().store(t.tx_prod, Ordering::Release);
        t.c.frames += 1;
        t.unkicked += 1;
        t.kick_needed = true;
        if t.unkicked >= KICK_BATCH {
            self.kick(t);
        }
        true
    }

    pub(super) fn flush(&self) {
        if self.tx.is_none() {
            return;
        }
        let mut guard = self.txs.borrow_mut();
        let t = &mut *guard;
        if t.kick_needed {
            self.kick(t);
        }
        self.reap(t);
    }

    pub(super) fn kernel_stats(&self) -> Option<libc::xdp_statistics> {
        // SAFETY: all-zero is a valid `xdp_statistics`.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `s` is writable for `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut s as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        (r == 0).then_some(s)
    }
}
