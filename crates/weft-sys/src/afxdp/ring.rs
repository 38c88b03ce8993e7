//! AF_XDP rings: the index arithmetic and descriptor checks ([`ring_ready`], [`ring_free`],
//! [`rx_chunk`], [`completion_chunk`]; pure, unit-tested without a kernel), and the mappings
//! of the UMEM and the four rings with their producer and consumer indices.
//!
//! Invariants: no index the kernel writes is trusted for memory safety (an index more than a
//! ring ahead is refused; a descriptor outside its chunk is refused); a mapping is unmapped
//! exactly once, on drop. Cost: an atomic load or store per index read or published.

use super::*;

// ---------------------------------------------------------------------------------------
// Ring arithmetic and descriptor validation (pure; unit-tested without a kernel).
// ---------------------------------------------------------------------------------------

/// Entries a consumer may read: `prod - cons` (free-running `u32` indices, so wrapping),
/// or `None` when that is more than the ring holds (a corrupt index: read nothing).
pub fn ring_ready(prod: u32, cons: u32, size: u32) -> Option<u32> {
    let n = prod.wrapping_sub(cons);
    (n <= size).then_some(n)
}

/// Slots a producer may fill: `size - (prod - cons)`, or `None` when the consumer index is
/// ahead of the producer or more than a ring behind (corrupt: write nothing).
pub fn ring_free(prod: u32, cons: u32, size: u32) -> Option<u32> {
    let used = prod.wrapping_sub(cons);
    (used <= size).then(|| size - used)
}

/// UMEM geometry: `chunk`-byte chunks (a power of two), receive chunks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per chunk.
    pub chunk: u32,
    /// Receive chunks (numbered from 0).
    pub rx_chunks: u32,
    /// Transmit chunks (numbered after the receive chunks).
    pub tx_chunks: u32,
}

impl Geometry {
    /// UMEM bytes.
    pub fn umem_bytes(&self) -> u64 {
        self.chunk as u64 * (self.rx_chunks as u64 + self.tx_chunks as u64)
    }
}

/// The receive chunk of an RX descriptor, if its frame (`addr .. addr + len`) lies inside
/// one receive chunk, is not empty and has no option bits (no multi-buffer frames: the
/// socket is bound without `XDP_USE_SG`).
pub fn rx_chunk(g: &Geometry, addr: u64, len: u32, options: u32) -> Option<u32> {
    if len == 0 || options != 0 {
        return None;
    }
    let chunk = addr / g.chunk as u64;
    let last = addr.checked_add(len as u64 - 1)? / g.chunk as u64;
    (chunk == last && chunk < g.rx_chunks as u64).then_some(chunk as u32)
}

/// The transmit chunk a completion names: the start of a transmit chunk (we post frames at
/// offset 0 of their chunk), or `None`.
pub fn completion_chunk(g: &Geometry, addr: u64) -> Option<u32> {
    if !addr.is_multiple_of(g.chunk as u64) {
        return None;
    }
    let chunk = addr / g.chunk as u64;
    let tx = g.rx_chunks as u64..g.rx_chunks as u64 + g.tx_chunks as u64;
    tx.contains(&chunk).then_some(chunk as u32)
}

// Memory mappings and rings.
// ---------------------------------------------------------------------------------------

/// An owned mapping, unmapped on drop.
pub(super) struct Mmap {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
}

impl Mmap {
    pub(super) fn map(len: usize, flags: i32, fd: RawFd, offset: libc::off_t) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping at an address the kernel picks; nothing aliases it yet.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned 0"))?,
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; no reference into it outlives
        // the value that owns it (frames are only lent to `recv_batch`'s callback).
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// One mapped ring: producer and consumer indices and `size` entries of `entry` bytes.
pub(super) struct Ring {
    map: Mmap,
    producer: usize,
    consumer: usize,
    entries: usize,
    pub(super) size: u32,
    entry: usize,
}

impl Ring {
    /// Maps the ring of `fd` at page offset `pgoff`, after checking that the kernel's
    /// offsets put both indices and every entry inside the mapping, aligned.
    pub(super) fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        pgoff: u64,
        size: u32,
        entry: usize,
    ) -> io::Result<Ring> {
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "inconsistent ring offsets");
        let entries = usize::try_from(off.desc).map_err(|_| bad())?;
        let len = entries.checked_add(size as usize * entry).ok_or_else(bad)?;
        let (p, c) = (off.producer as usize, off.consumer as usize);
        if p % 4 != 0 || c % 4 != 0 || entries % 8 != 0 || p + 4 > len || c + 4 > len {
            return Err(bad());
        }
        let map = Mmap::map(
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff as libc::off_t,
        )?;
        Ok(Ring {
            map,
            producer: p,
            consumer: c,
            entries,
            size,
            entry,
        })
    }

    pub(super) fn producer(&self) -> &AtomicU32 {
        // SAFETY: in bounds and 4-aligned (checked in `map`, the mapping is page-aligned);
        // the kernel updates it concurrently, which is what the atomic type is for.
        unsafe { &*(self.map.ptr.as_ptr().add(self.producer) as *const AtomicU32) }
    }

    pub(super) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*(self.map.ptr.as_ptr().add(self.consumer) as *const AtomicU32) }
    }

    /// Entry `idx` (masked to the ring).
    fn slot(&self, idx: u32) -> *mut u8 {
        let i = (idx & (self.size - 1)) as usize;
        // SAFETY: `entries + i * entry < len` (checked in `map`; i < size).
        unsafe { self.map.ptr.as_ptr().add(self.entries + i * self.entry) }
    }

    pub(super) fn read_desc(&self, idx: u32) -> libc::xdp_desc {
        // SAFETY: an 8-aligned `xdp_desc` slot inside the mapping; the kernel does not write
        // slots between our consumer index and its producer index (acquired by the caller).
        unsafe { (self.slot(idx) as *const libc::xdp_desc).read_volatile() }
    }

    pub(super) fn write_desc(&self, idx: u32, d: libc::xdp_desc) {
        // SAFETY: as for `read_desc`; slots between the kernel's consumer index and our
        // producer index are ours to write.
        unsafe { (self.slot(idx) as *mut libc::xdp_desc).write_volatile(d) }
    }

    pub(super) fn read_addr(&self, idx: u32) -> u64 {
        // SAFETY: an 8-aligned `u64` slot inside the mapping, ours to read (see `read_desc`).
        unsafe { (self.slot(idx) as *const u64).read_volatile() }
    }

    pub(super) fn write_addr(&self, idx: u32, a: u64) {
        // SAFETY: an 8-aligned `u64` slot inside the mapping, ours to write.
        unsafe { (self.slot(idx) as *mut u64).write_volatile(a) }
    }
}
