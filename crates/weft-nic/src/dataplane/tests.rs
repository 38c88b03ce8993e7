//! Unit tests of the dataplane: CPU placement, interface claims, link state, the stats
//! balance check and flows let go while busy.

/// A thread pinned as the loop is starts control threads off its CPU: they move to the
/// CPUs the process could use before ([`super::away_from_the_loop`]).
#[test]
fn control_threads_leave_the_loops_cpu() {
    let allowed = super::allowed_cpus().unwrap();
    if allowed.len() < 2 {
        return; // one CPU: nowhere else to go
    }
    let loop_cpu = allowed[0];
    let (mine, control) = std::thread::spawn(move || {
        super::pin_to_cpu(loop_cpu).unwrap();
        let mine = super::allowed_cpus().unwrap();
        let control = std::thread::spawn(|| {
            super::away_from_the_loop();
            super::allowed_cpus().unwrap()
        })
        .join()
        .unwrap();
        (mine, control)
    })
    .join()
    .unwrap();
    assert_eq!(mine, vec![loop_cpu]);
    assert!(
        !control.contains(&loop_cpu) && !control.is_empty(),
        "control thread on {control:?}, the loop on {loop_cpu}"
    );
}

/// A CPU this process may not run on is named as such (it read "Invalid argument (os
/// error 22)"); the attempt leaves the thread's affinity as it was.
#[test]
fn a_cpu_out_of_reach_is_named() {
    let last = libc::CPU_SETSIZE as usize - 1;
    if std::thread::available_parallelism().map_or(0, |n| n.get()) > last {
        return; // a machine with every possible CPU: nothing out of reach
    }
    let e = super::pin_to_cpu(last).unwrap_err().to_string();
    assert!(e.contains("not a CPU this process may run on"), "{e}");
}

use super::*;

/// A second claim on one interface is refused while the first is held, and free again
/// once it is dropped (as when a daemon exits or is killed). Needs a writable /run/weft
/// (root); elsewhere there is nothing to claim and the test says so.
#[test]
fn an_interface_is_claimed_by_one_daemon_at_a_time() {
    let first = claim_interface("lo", "--uplink lo").unwrap();
    if first.is_none() {
        eprintln!("skipped: /run/weft is not writable here");
        return;
    }
    let e = claim_interface("lo", "--tenant b=lo")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--tenant b=lo") && e.contains("in use by another weft run"),
        "{e}"
    );
    assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
    let path = first.as_ref().unwrap().path.clone();
    assert!(path.exists());
    drop(first);
    assert!(!path.exists(), "{} is left behind", path.display());
    let second = claim_interface("lo", "--uplink lo").unwrap();
    assert!(second.is_some() && path.exists());
    drop(second);
    assert!(claim_interface("no-such-if0", "--uplink x")
        .unwrap()
        .is_none());
}

#[test]
fn tenant_drop_names_begin_with_the_source_refusals() {
    assert_eq!(TENANT_DROPS[..4], SourceReject::NAMES);
}

#[test]
fn link_state_is_read_from_sysfs() {
    // Loopback has no carrier notion: `unknown`, taken as up.
    assert_eq!(link_up("lo"), Some(true));
    assert_eq!(link_up("no-such-if0"), None);
    assert_eq!(link_up("../lo"), None);
}

/// A flow let go of while it still held packets waits to be closed, once, and only
/// while no queue uses it: let go of twice (opened again in between, as a flow moved
/// away, back and away again), or opened again and then closed at once, a second try
/// would give the engine the closed queue, which it refuses with a panic.
#[test]
fn a_flow_let_go_twice_while_busy_is_closed_once() {
    let text =
        "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: q, type: leaf, flows: {by: none}}\n";
    let prog =
        Arc::new(policy::compile_str("q.yaml".as_ref(), text, &LoadOptions::default()).unwrap());
    let mut e = FastEngine::new(prog.clone());
    let p = Packet::new(1, 100, PacketMeta::default());
    let q = e.open_flow(&p, prog.classify(&p.meta)).unwrap();
    assert_eq!(e.enqueue_flow(p, &q, 0), Ok(()));
    let mut held = EngineFlows::default();
    for _ in 0..2 {
        held.opened(Some(q));
        held.release(&mut e, Some(q));
    }
    assert_eq!(held.closed, 0);
    assert!(e.dequeue(0).is_some());
    held.retry(&mut e);
    assert_eq!(held.closed, 1);
    assert!(held.pending.is_empty());
    assert_eq!(e.open_flows(), 0);
    // Let go of while busy, opened again, drained, let go of (closed at once): nothing
    // is left to try.
    let q = e.open_flow(&p, prog.classify(&p.meta)).unwrap();
    assert_eq!(e.enqueue_flow(p, &q, 0), Ok(()));
    held.opened(Some(q));
    held.release(&mut e, Some(q));
    held.opened(Some(q));
    assert!(e.dequeue(0).is_some());
    held.release(&mut e, Some(q));
    assert_eq!(held.closed, 2);
    held.retry(&mut e);
    assert_eq!(held.closed, 2);
    assert!(held.pending.is_empty());
}
