//! Compiling a large policy holds little more than its declarations and its program: the
//! YAML is read one node at a time (`policy/yaml.rs`), and the declarations are not copied.
//!
//! A tracking global allocator (this test binary's own) records the largest number of bytes
//! live at once while one policy compiles. Allocation sizes do not depend on the machine or
//! its load, so the bound is exact, not a timing. Before the streaming reader, a `senic`
//! node of 20,000 classes peaked at 133 MB (6.8 KB a class: `saphyr`'s whole-document tree
//! next to the declarations); now 2.6 KB a class.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use weft_core::policy::{compile_str, synth, LoadOptions};

/// The system allocator, tracking the bytes live and their peak.
struct Tracking;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; the bookkeeping touches two atomics
// (no allocation, no reentry).
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as the new block allocated before the old one is freed, as a copy would be.
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Bytes live at the peak of compiling `text`, beyond those live before.
fn peak_of_compile(text: &str) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let program = compile_str(Path::new("big.yaml"), text, &LoadOptions::default()).unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    drop(program);
    peak
}

#[test]
fn a_large_policy_compiles_in_a_few_kilobytes_a_class() {
    // One test in this binary: the tracker counts every thread's allocations.
    let classes = 20_000;
    let text = synth::senic_flat(classes);
    let peak = peak_of_compile(&text);
    let per_class = peak / classes as usize;
    eprintln!(
        "senic node of {classes} classes ({} KB of YAML): peak {} KB, {per_class} B a class",
        text.len() / 1024,
        peak / 1024
    );
    assert!(
        per_class <= 3_200,
        "compiling {classes} classes peaked at {peak} bytes ({per_class} a class; 2.6 KB \
         expected): is the whole document's YAML, or a second copy of the declarations, held?"
    );
}
