//! The uplink's link state as the loop reads it every 100 ms ([`LinkState`]): every read
//! allocates nothing (this test binary counts its threads' allocations), and a real veth's
//! state is followed as it goes down, comes up, is removed and is made again under its
//! name.
//!
//! The veth test needs root and `ip netns`; without them it prints `skipped: REASON` and
//! passes. It reads the namespace's own sysfs from a thread that has joined the namespace
//! and mounted sysfs in a mount namespace of its own (as `ip netns exec` does), so the
//! host's mounts are untouched.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use common::{ip, Ns};
use weft_nic::link::LinkState;

/// The system allocator, counting the allocations (and growths) of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches a thread-local
// `Cell` only (no allocation, no reentry).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `link.up()` and the allocations it made on this thread.
fn read(link: &LinkState) -> (Option<bool>, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let up = link.up();
    (up, ALLOCATIONS.with(Cell::get) - before)
}

/// Loopback (in the test's own namespace; `unknown`, taken as up), a missing interface and
/// a name that cannot be one: read again and again, never an allocation, the first read
/// (which opens the file) included.
#[test]
fn reads_allocate_nothing() {
    for (name, want) in [("lo", Some(true)), ("no-such-if0", None), ("../lo", None)] {
        let link = LinkState::new(name);
        for i in 0..1000 {
            assert_eq!(read(&link), (want, 0), "{name}, read {i}");
        }
    }
}

/// Reads `link` until it says `want` (link changes reach sysfs asynchronously: the kernel's
/// link watch delays an up by up to a second), every read allocation-free.
fn until(link: &LinkState, want: Option<bool>, what: &str) {
    let t = Instant::now();
    loop {
        let (up, allocations) = read(link);
        assert_eq!(allocations, 0, "{what}: a read allocated");
        if up == want {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: still {up:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Moves this thread into namespace `ns` with the namespace's own sysfs at /sys, in a mount
/// namespace of the thread's own; `Err` says why it cannot.
fn enter_with_sysfs(ns: &str) -> Result<(), String> {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).map_err(|e| e.to_string())?;
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: plain system calls on this thread, with valid C strings; the mount calls
    // change only the mount namespace this thread has just made its own (mounts made
    // slaves first, so nothing propagates back to the host's).
    unsafe {
        if libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) != 0 {
            return Err(os("setns"));
        }
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(os("unshare a mount namespace"));
        }
        let root = c("/");
        let sys = c("/sys");
        let sysfs = c("sysfs");
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        ) != 0
        {
            return Err(os("make the mounts slaves"));
        }
        libc::umount2(sys.as_ptr(), libc::MNT_DETACH);
        if libc::mount(
            sysfs.as_ptr(),
            sys.as_ptr(),
            sysfs.as_ptr(),
            0,
            std::ptr::null(),
        ) != 0
        {
            return Err(os("mount the namespace's sysfs"));
        }
    }
    Ok(())
}

/// A veth end's state followed with one [`LinkState`], as the loop follows the uplink's:
/// up; down when its peer goes down (`lowerlayerdown`); up again; unknown (`None`) once it
/// is removed; up when an interface of its name is made again (the file kept open is given
/// up and the path opened anew).
#[test]
fn a_veths_state_is_followed_through_down_up_removal_and_return() {
    let Some(ns) = Ns::or_skip("ls") else {
        return;
    };
    let n = ns.0.clone();
    let skipped = ns.run(move || {
        if let Err(why) = enter_with_sysfs(&n) {
            return Some(why);
        }
        let link = LinkState::new("xa");
        until(&link, Some(true), "both ends up");
        assert!(ip(&["-n", &n, "link", "set", "xb", "down"]));
        until(&link, Some(false), "its peer down");
        assert!(ip(&["-n", &n, "link", "set", "xb", "up"]));
        until(&link, Some(true), "its peer up again");
        assert!(ip(&["-n", &n, "link", "del", "xa"]));
        until(&link, None, "removed");
        assert!(
            ip(&["-n", &n, "link", "add", "xa", "type", "veth", "peer", "name", "xb"])
                && ip(&["-n", &n, "link", "set", "xa", "up"])
                && ip(&["-n", &n, "link", "set", "xb", "up"])
        );
        until(&link, Some(true), "made again");
        None
    });
    if let Some(why) = skipped {
        println!("skipped: {why}");
    }
}
