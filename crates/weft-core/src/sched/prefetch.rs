//! A hint that a record will be read soon: weft-core's one `unsafe` block.
//!
//! **What.** [`prefetch`] asks the CPU to start bringing the cache line holding a record
//! towards the core, so that a batch's cache misses overlap with the work before the record
//! is used (the head engine's batches, when its records outgrow the caches). On x86_64 it
//! is `prefetcht0`; elsewhere it does nothing.
//!
//! **Why `unsafe`.** Rust's stable prefetch is the `_mm_prefetch` intrinsic, which is an
//! `unsafe fn` (it carries `#[target_feature(enable = "sse")]`). A plain load kept with
//! `black_box` starts the same miss without `unsafe`, but it is an instruction that cannot
//! retire until its line arrives, so a batch of them fills the core's reorder window and
//! stalls it; a prefetch retires at once.
//!
//! **Invariant (the audit).** The address comes from a reference, so it is valid and
//! aligned; a prefetch neither reads into the program nor writes, never faults, and does
//! not change what any load returns: it cannot change behaviour, only timing.
//!
//! **Cost.** One instruction.

/// Starts loading the cache line of `record` (see the module doc).
#[inline(always)]
pub(crate) fn prefetch<T>(record: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it is part of the
    // target's baseline), and a prefetch of any address is sound: it is a hint that never
    // faults and has no effect on memory. The pointer comes from a live reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((record as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = record;
}
