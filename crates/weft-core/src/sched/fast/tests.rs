use super::*;
use crate::classifier::{Field, PacketMeta};
use crate::policy::{compile_str, synth, LoadOptions};
use crate::sched::reference::ReferenceEngine;

/// A fast engine and the reference engine on one flat senic node, offered the same
/// packets.
struct Twins {
    fast: FastEngine,
    reference: ReferenceEngine,
    /// Packets offered so far.
    id: u64,
}

impl Twins {
    /// `classes` classes of 200–690 Mbit/s on 100 Gbit/s (oversubscribed from 250
    /// classes on, so heads stay eligible and leave one at a time); the fast engine
    /// moves to a calendar as `calendar` says.
    fn senic(classes: u64, calendar: CalendarUse) -> Twins {
        let text = synth::senic_flat(classes).replace("mbit,", "0mbit,");
        let prog = Arc::new(
            compile_str(
                std::path::Path::new("senic.yaml"),
                &text,
                &LoadOptions::default(),
            )
            .expect("senic_flat compiles"),
        );
        Twins {
            fast: FastEngine::with_calendar(prog.clone(), EngineOptions::default(), calendar),
            reference: ReferenceEngine::new(prog),
            id: 0,
        }
    }

    /// A 1,500-byte packet to `class` at `now`, to both: they take or drop it alike.
    fn offer(&mut self, class: u64, now: u64) {
        let mut m = PacketMeta::default();
        m.set_int(Field::Tag, class);
        let p = Packet::new(self.id, 1500, m);
        self.id += 1;
        assert_eq!(
            self.fast.enqueue(p, now),
            self.reference.enqueue(p, now),
            "enqueue {}",
            self.id
        );
    }
}

/// A chain of 70 `wfq` nodes, each with a leaf of its own beside the next, above a
/// `prio` of two leaves, fed packets of mixed sizes: every `wfq` level corrects its
/// charge, those past the 63rd too (found by their kind, not by the path's bitmask), and
/// the departures are the reference engine's.
#[test]
fn a_deep_chain_of_wfq_nodes_charges_every_level() {
    let mut text = String::from("weft: 1\nlimits: {max_depth: 80}\nnodes:\n");
    text += "  - {name: w0, type: wfq}\n";
    for d in 1..70 {
        text += &format!(
            "  - {{name: side{d}, type: leaf, parent: w{}, weight: {}, match: {{tag: {d}}}}}\n",
            d - 1,
            1 + d % 3
        );
        text += &format!(
            "  - {{name: w{d}, type: wfq, parent: w{}, weight: 2}}\n",
            d - 1
        );
    }
    text += "  - {name: p, type: prio, parent: w69}\n";
    text += "  - {name: hi, type: leaf, parent: p, priority: 0, match: {tag: 100}}\n";
    text += "  - {name: lo, type: leaf, parent: p, priority: 1}\n";
    let prog = Arc::new(compile_str("deep.yaml".as_ref(), &text, &LoadOptions::default()).unwrap());
    let mut fast = FastEngine::new(prog.clone());
    let mut reference = ReferenceEngine::new(prog);
    let mut now = 0u64;
    let mut rng = 7u64;
    for i in 0..20_000u64 {
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1442695040888963407);
        let r = rng >> 33;
        let tag = match r % 4 {
            0 => 100,
            1 => 101,
            _ => 1 + r % 69,
        };
        let mut m = PacketMeta::default();
        m.set_int(Field::Tag, tag);
        let p = Packet::new(i, [64, 1500, 600][(r % 3) as usize], m);
        assert_eq!(
            fast.enqueue(p, now),
            reference.enqueue(p, now),
            "packet {i}"
        );
        if i % 3 == 2 {
            now += 1_000_000;
            assert_eq!(fast.dequeue(now), reference.dequeue(now), "at {now} ps");
        }
    }
    while fast.backlog() + reference.backlog() > 0 {
        now += 1_000_000;
        assert_eq!(
            fast.dequeue(now),
            reference.dequeue(now),
            "drain at {now} ps"
        );
    }
}

/// A wide node queued deep: 2,000 classes of 50 rates, 10 packets each. Classes of
/// equal rates backlogged at once have finish tags that tie group by group, and the
/// groups of different rates interleave closely, so the calendar grows past its
/// children's 2,048 buckets and some pushes walk too far into a bucket and go to its
/// heap; the departures stay the reference engine's throughout.
#[test]
fn a_deep_wide_node_matches_the_reference() {
    // Oversubscribed 9 times.
    let mut t = Twins::senic(2000, CalendarUse::default());
    let mut now = 0u64;
    for _ in 0..10 {
        for c in 0..2000 {
            t.offer(c, now);
        }
    }
    // One packet more to a class per departure: the node stays 20,000 packets deep.
    let (mut most, mut cut_short) = (0, 0);
    for k in 0..40_000u64 {
        now += 120_000;
        let d = t.fast.dequeue(now);
        assert_eq!(d, t.reference.dequeue(now), "step {k}");
        if let Some(d) = d {
            t.offer(u64::from(d.leaf.get()), now);
        }
        if let Pifo::Calendar(c) = &t.fast.pifo[0] {
            most = most.max(c.entries.buckets());
            cut_short = cut_short.max(c.entries.cut_short());
        }
    }
    assert!(most > 2048, "the calendar stayed at {most} buckets");
    assert!(cut_short > 0, "no push walked too far into a bucket");
}

/// A policy of one leaf (`leaf`: its extra fields) on a 10 Gbit/s link, and its engine.
fn one_leaf(leaf: &str) -> (Arc<Program>, FastEngine) {
    let text =
        format!("weft: 1\nlink: {{rate: 10gbit}}\nnodes:\n  - {{name: q, type: leaf, {leaf}}}\n");
    let prog = Arc::new(compile_str("q.yaml".as_ref(), &text, &LoadOptions::default()).unwrap());
    (prog.clone(), FastEngine::new(prog))
}

/// A class whose first held packet changes at every hold, each time to a smaller one
/// (every packet has a leaf of its own and an earlier deadline at the `edf` node above
/// them), is rescheduled at every hold a little earlier, at one instant: the stale
/// entries that leaves behind the live one in the shaping queue are dropped once they
/// outnumber the live ones, so the queue stays bounded by the classes, not the holds
/// (without the compaction it reached 398 entries here); the departures match the
/// reference engine's.
#[test]
fn a_class_rescheduled_at_every_hold_keeps_the_shaping_queue_bounded() {
    let mut text = "weft: 1\nlink: {rate: 10gbit}\nnodes:\n  - {name: root, type: edf}\n  - {name: slow, type: shape, parent: root, rate: 1mbit, burst: 1514b}\n".to_string();
    for l in 0..400 {
        text += &format!("  - {{name: l{l}, type: leaf, parent: slow, match: {{tag: {l}}}}}\n");
    }
    let prog = Arc::new(compile_str("slow.yaml".as_ref(), &text, &LoadOptions::default()).unwrap());
    let mut fast = FastEngine::new(prog.clone());
    let mut reference = ReferenceEngine::new(prog.clone());
    let mut most = 0;
    for i in 0..400u64 {
        let meta = format!("tag={i}").parse::<PacketMeta>().unwrap();
        let mut p = Packet::new(i, 1500 - 3 * i as u32, meta);
        p.deadline_ps = Some(1_000_000_000_000_000 - i);
        fast.enqueue(p, 0).unwrap();
        reference.enqueue(p, 0).unwrap();
        let (f, r) = (fast.dequeue(0), reference.dequeue(0));
        assert_eq!(f.map(|d| d.id), r.map(|d| d.id), "packet {i}");
        assert_eq!(fast.next_wakeup(), reference.next_wakeup(), "packet {i}");
        most = most.max(fast.shaping_queue.len());
    }
    assert_eq!(fast.backlog(), 399, "all but the first held");
    assert!(
        most <= 2 * prog.shapers.len() + 64,
        "the shaping queue reached {most} entries for one class"
    );
}

/// A 100-byte packet from source port `port` (also its id): one five-tuple per port.
fn port_packet(port: u64) -> Packet {
    let mut m = PacketMeta::default();
    m.set_int(Field::Sport, port);
    Packet::new(port, 100, m)
}

/// 100,000 flows one after another, each opened, sent one packet and closed, as a
/// software NIC's connections come and go: the flow records and the index stay at the
/// size of the flows open at once (eight), not of every flow seen, and lookups stay
/// right through the index's refills (a closed flow opened again is a new flow; a
/// stale queue is refused).
#[test]
fn closed_flows_give_back_their_records() {
    let (prog, mut e) = one_leaf("flows: {by: five-tuple, sched: fair}");
    let mut open: VecDeque<FlowQueue> = VecDeque::new();
    for port in 0..100_000u64 {
        let p = port_packet(port);
        let q = e.open_flow(&p, prog.classify(&p.meta)).unwrap();
        assert_eq!(e.enqueue_flow(p, &q, port), Ok(()));
        assert_eq!(e.dequeue(port).map(|d| d.id), Some(port));
        open.push_back(q);
        if open.len() > 8 {
            let old = open.pop_front().unwrap();
            assert!(e.close_flow(&old), "an idle flow closes");
        }
    }
    assert!(e.flows.len <= 9, "{} flow records", e.flows.len);
    assert!(
        e.flow_table.occupied() <= 64,
        "{} index entries",
        e.flow_table.occupied()
    );
    // The eight open flows keep their counters; a closed one is gone.
    let counters = e.flow_counters();
    assert_eq!(counters.len(), 8);
    // An open flow is found again by its key (the same queue); a closed flow opened
    // again is a new one.
    let last = port_packet(99_999);
    assert_eq!(
        e.open_flow(&last, prog.classify(&last.meta)),
        open.back().copied()
    );
    let first = port_packet(0);
    let again = e.open_flow(&first, prog.classify(&first.meta)).unwrap();
    assert!(!open.iter().any(|q| q.same_flow(&again)));
    assert_eq!(e.flow_counters().len(), 9);
    // A flow holding a packet stays open.
    assert_eq!(e.enqueue_flow(first, &again, 200_000), Ok(()));
    assert!(!e.close_flow(&again));
    assert!(e.dequeue(200_000).is_some());
    assert!(e.close_flow(&again));
}

/// With `forget_idle_flows`, a stream of 60,000 flows through the classifying calls
/// (one packet each, sent before the next arrives, or dropped at a limit of one packet
/// per flow) keeps only the flows holding packets; a fair leaf's flows are kept.
#[test]
fn forgetting_idle_flows_keeps_only_those_holding_packets() {
    let forget = EngineOptions {
        forget_idle_flows: true,
        ..EngineOptions::default()
    };
    // Each flow sends and leaves before the next: its leaf's busy period ends with it
    // (at a fair leaf, the virtual time then passes every finish tag).
    for leaf in [
        "flows: {by: five-tuple}, flow_limit: {packets: 1}",
        "flows: {by: five-tuple, sched: fair}",
    ] {
        let (prog, _) = one_leaf(leaf);
        let mut e = FastEngine::with_options(prog, forget);
        for port in 0..60_000u64 {
            assert_eq!(e.enqueue(port_packet(port), port), Ok(()));
            if port % 2 == 0 {
                // A second packet of the flow: over its limit in the first leaf.
                let _ = e.enqueue(port_packet(port), port);
            }
            while e.dequeue(port).is_some() {}
        }
        assert_eq!(e.open_flows(), 0, "{leaf}");
        assert!(e.flows.len <= 2, "{} records: {leaf}", e.flows.len);
        assert!(e.flow_table.occupied() <= 64, "{leaf}");
    }
}

/// A fair leaf that stays busy (one flow always backlogged) while 60,000 short flows
/// pass through: a short flow is forgotten once the leaf's virtual time has passed its
/// finish tag, so the records follow the flows of the last round or so, not every flow.
#[test]
fn a_busy_fair_leaf_forgets_its_finished_flows() {
    let (prog, _) = one_leaf("flows: {by: five-tuple, sched: fair}");
    let mut e = FastEngine::with_options(
        prog,
        EngineOptions {
            forget_idle_flows: true,
            ..EngineOptions::default()
        },
    );
    let mut most = 0;
    for port in 1..60_000u64 {
        // The long flow (port 0) keeps two packets queued; a short flow sends one, at
        // half the rate the leaf sends (new flows arriving as fast as it sends would
        // take all of it, each starting at the virtual time, which then stands still).
        assert_eq!(e.enqueue(port_packet(port), port), Ok(()));
        for _ in 0..2 {
            while e.backlog() < 3 {
                assert_eq!(e.enqueue(port_packet(0), port), Ok(()));
            }
            assert!(e.dequeue(port).is_some());
        }
        most = most.max(e.open_flows());
    }
    assert!(most <= 8, "{most} flows open at once");
    // Drained, the leaf forgets every flow (its virtual time passes every finish tag).
    while e.dequeue(60_000).is_some() {}
    assert_eq!(e.open_flows(), 0);
    assert!(
        e.idle_fair.values().all(|l| l.is_empty()),
        "{:?}",
        e.idle_fair
    );
    assert!(e.flows.len <= 8, "{} records", e.flows.len);
    assert!(
        e.idle_fair.values().map(|l| l.len()).sum::<usize>() <= 8,
        "idle lists {:?}",
        e.idle_fair
    );
}

/// A queue of a closed flow is refused, even once its record serves another flow of the
/// same leaf (the handle's generation differs).
#[test]
#[should_panic(expected = "or its flow was closed")]
fn a_closed_flows_queue_is_refused() {
    let (prog, mut e) = one_leaf("flows: {by: five-tuple}");
    let (a, b) = (port_packet(1), port_packet(2));
    let qa = e.open_flow(&a, prog.classify(&a.meta)).unwrap();
    assert!(e.close_flow(&qa));
    let qb = e.open_flow(&b, prog.classify(&b.meta)).unwrap();
    assert_eq!(qb.leaf(), qa.leaf());
    assert!(
        !qa.same_flow(&qb),
        "the record is reused with the next generation"
    );
    let _ = e.enqueue_flow(a, &qa, 0);
}

/// A node of many children keeps its heads in a heap until they reach `min_heads`, its
/// entries in a calendar until they fall below `back_below`, and so on, with entries
/// to move at a switch each way; its departures stay the reference engine's throughout.
#[test]
fn a_wide_node_switches_between_heap_and_calendar() {
    let calendar = CalendarUse {
        min_children: 256,
        min_heads: 64,
        back_below: 16,
    };
    let mut t = Twins::senic(300, calendar);
    let (mut to_calendar, mut to_heap, mut was_calendar) = (0, 0, false);
    let mut now = 0u64;
    for round in 0..6u64 {
        // A burst to every class (the heads grow past 64), then a drain while a few
        // classes keep sending (they shrink below 16, not to nothing).
        for c in 0..300 {
            t.offer((c * 7 + round) % 300, now);
        }
        for k in 0..1200u64 {
            now += 100_000;
            if k % 3 == 0 {
                t.offer(k % 5, now);
            }
            assert_eq!(
                t.fast.dequeue(now),
                t.reference.dequeue(now),
                "round {round}, step {k}"
            );
            let is_calendar = matches!(t.fast.pifo[0], Pifo::Calendar(_));
            if is_calendar && !was_calendar {
                to_calendar += 1;
            } else if was_calendar && !is_calendar {
                to_heap += 1;
            }
            was_calendar = is_calendar;
        }
    }
    // Drain both: every packet leaves, at the same times.
    while t.fast.backlog() + t.reference.backlog() > 0 {
        now += 1_000_000;
        assert_eq!(
            t.fast.dequeue(now),
            t.reference.dequeue(now),
            "drain at {now} ps"
        );
        assert!(
            now < 1 << 50,
            "never drained: {} packets left",
            t.fast.backlog()
        );
    }
    let moved_back = super::super::pifo::tests::MOVED_BACK.with(|m| m.get());
    assert!(moved_back > 0, "every switch back found the calendar empty");
    assert!(
        to_calendar >= 3 && to_heap >= 3,
        "{to_calendar} switches to a calendar, {to_heap} back"
    );
}

/// `synth::scaled`'s Loom Fig. 1 shape with `vms` tenants (two applications each, no
/// shaping), its node of tenants a `drr` node (quanta of 1 to 4 frames) instead of
/// `wfq` (which keeps a heap of heads: [`super::super::wfq_queues`]), and that node's id.
fn scaled_tenants(vms: u32) -> (Arc<Program>, usize) {
    let text = synth::scaled(vms, 2, 0)
        .replace("{name: tenants, type: wfq,", "{name: tenants, type: drr,")
        .replace(", weight: ", ", quantum: 1500b, weight: ");
    let text = (1..=4).fold(text, |t, w| {
        t.replace(
            &format!("quantum: 1500b, weight: {w},"),
            &format!("quantum: {}b,", 1500 * w),
        )
    });
    let prog = Arc::new(compile_str("s.yaml".as_ref(), &text, &LoadOptions::default()).unwrap());
    let tenants = prog
        .node_id("tenants")
        .expect("scaled has a tenants node")
        .index();
    (prog, tenants)
}

/// With the default [`CalendarUse`], a node of 64 backlogged tenants (Loom Fig. 1's
/// `tenants`, as `drr`) keeps its entries in a calendar, and one of 16 in queues and a
/// heap; both send what the reference engine sends, at the same times.
#[test]
fn the_default_puts_a_node_of_many_backlogged_children_on_a_calendar() {
    for (vms, on_calendar) in [(64u32, true), (16, false)] {
        let (prog, tenants) = scaled_tenants(vms);
        let mut fast = FastEngine::new(prog.clone());
        let mut reference = ReferenceEngine::new(prog.clone());
        let mut now = 0;
        for i in 0..4096u64 {
            let p = Packet::new(i, 1500, synth::packet(i, vms, 2, 0));
            assert_eq!(
                fast.enqueue(p, now),
                reference.enqueue(p, now),
                "packet {i}"
            );
        }
        assert_eq!(
            matches!(fast.pifo[tenants], Pifo::Calendar(_)),
            on_calendar,
            "{vms} tenants holding {} packets",
            fast.backlog()
        );
        while fast.backlog() + reference.backlog() > 0 {
            now += 1_200_000;
            assert_eq!(
                fast.dequeue(now),
                reference.dequeue(now),
                "{vms} tenants at {now} ps"
            );
        }
    }
}

/// Loom Fig. 1's `wfq` node of 64 tenants holds packets of one size on its calendar;
/// the first packet of another size moves them back to the queues (it charges sent
/// bytes from then on), and once the node empties it takes the calendar again for
/// packets of a third size. Every departure is the reference engine's, at the same time.
#[test]
fn a_wfq_node_of_one_packet_size_keeps_a_calendar_until_sizes_mix() {
    let text = synth::scaled(64, 2, 0);
    let prog = Arc::new(compile_str("s.yaml".as_ref(), &text, &LoadOptions::default()).unwrap());
    let tenants = prog
        .node_id("tenants")
        .expect("scaled has a tenants node")
        .index();
    let mut fast = FastEngine::new(prog.clone());
    let mut reference = ReferenceEngine::new(prog);
    let on_calendar = |f: &FastEngine| match &f.pifo[tenants] {
        Pifo::Wfq(w) => w.on_calendar(),
        _ => panic!("the tenants node is not a wfq node's queue"),
    };
    let now = std::cell::Cell::new(0u64);
    let mut id = 0u64;
    let mut offer = |f: &mut FastEngine, r: &mut ReferenceEngine, n: u64, size: u32| {
        let now = now.get();
        for _ in 0..n {
            let p = Packet::new(id, size, synth::packet(id, 64, 2, 0));
            assert_eq!(f.enqueue(p, now), r.enqueue(p, now), "packet {id}");
            id += 1;
        }
    };
    let send = |f: &mut FastEngine, r: &mut ReferenceEngine, n: usize| {
        for _ in 0..n {
            now.set(now.get() + 1_200_000);
            let t = now.get();
            assert_eq!(f.dequeue(t), r.dequeue(t), "at {t} ps");
        }
    };
    offer(&mut fast, &mut reference, 2048, 1500);
    assert!(on_calendar(&fast), "2,048 packets of 1,500 B: no calendar");
    send(&mut fast, &mut reference, 1000);
    offer(&mut fast, &mut reference, 1, 64);
    assert!(
        !on_calendar(&fast),
        "a 64 B packet joined: still on the calendar"
    );
    offer(&mut fast, &mut reference, 2048, 1500);
    assert!(!on_calendar(&fast), "sizes mixed: back on the calendar");
    send(&mut fast, &mut reference, 1500);
    offer(&mut fast, &mut reference, 500, 64);
    while fast.backlog() + reference.backlog() > 0 {
        send(&mut fast, &mut reference, 1);
    }
    offer(&mut fast, &mut reference, 2048, 600);
    assert!(
        on_calendar(&fast),
        "emptied, then 2,048 packets of 600 B: no calendar"
    );
    while fast.backlog() + reference.backlog() > 0 {
        send(&mut fast, &mut reference, 1);
    }
}

/// A shaping class whose bucket holds less than one packet (64 bytes against 9,000-byte
/// packets, or the one-MTU default against them) holds every packet back in its queue:
/// each engine's steps (tree pops and releases) stay a few per packet however many it
/// holds, so a replay's time is linear in packets for any burst.
#[test]
fn a_bucket_smaller_than_a_packet_costs_steps_linear_in_packets() {
    fn drain<E: Engine>(mut e: E, packets: u64) -> (Vec<Departure>, u64) {
        crate::steps::take();
        for i in 0..packets {
            let mut m = PacketMeta::default();
            m.set_int(Field::Tag, 1 + i % 2);
            assert_eq!(e.enqueue(Packet::new(i, 9000, m), 0), Ok(()), "packet {i}");
        }
        let (mut out, mut t) = (Vec::new(), 0);
        loop {
            while let Some(d) = e.dequeue(t) {
                out.push(d);
            }
            match e.next_wakeup() {
                Some(w) if w > t => t = w,
                _ => break,
            }
        }
        assert_eq!(out.len() as u64, packets, "every packet sent");
        (out, crate::steps::take())
    }
    for burst in [", burst: 64b", ""] {
        let text = format!(
            "weft: 1\nlink: {{rate: 10gbit}}\nnodes:\n\
             - {{name: root, type: fifo}}\n\
             - {{name: s, type: shape, parent: root, rate: 1gbit{burst}}}\n\
             - {{name: w, type: wfq, parent: s}}\n\
             - {{name: a, type: leaf, parent: w, weight: 1, match: {{tag: 1}}, limit: {{packets: 100000}}, flow_limit: {{packets: 100000}}}}\n\
             - {{name: b, type: leaf, parent: w, weight: 2, match: {{tag: 2}}, limit: {{packets: 100000}}, flow_limit: {{packets: 100000}}}}\n"
        );
        let prog =
            Arc::new(compile_str("tiny.yaml".as_ref(), &text, &LoadOptions::default()).unwrap());
        for packets in [1_000u64, 4_000] {
            let (fast, fast_steps) = drain(FastEngine::new(prog.clone()), packets);
            let (reference, ref_steps) = drain(ReferenceEngine::new(prog.clone()), packets);
            assert_eq!(fast, reference, "{packets} packets, burst '{burst}'");
            for (engine, steps) in [("fast", fast_steps), ("reference", ref_steps)] {
                // Four a packet as measured (3,998 for 1,000 packets, both engines).
                assert!(
                    steps <= 5 * packets,
                    "{engine} engine, burst '{burst}': {steps} steps for {packets} packets"
                );
            }
        }
    }
}

#[test]
fn records_stay_compact() {
    assert_eq!(std::mem::size_of::<NodeRt>(), 64, "one cache line per node");
    // A leaf pays for the fair leaves' busy-period finish tags only in a policy that
    // has fair leaves (a senic class is a leaf: 168 B, not 184).
    let senic = compile_str(
        "s.yaml".as_ref(),
        &synth::senic_flat(100),
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(FastEngine::new(Arc::new(senic)).fair_max.is_empty());
    let (_, fair) = one_leaf("flows: {sched: fair}");
    assert_eq!(fair.fair_max.len(), 1);
    assert!(
        std::mem::size_of::<Pifo>() <= 32,
        "{}",
        std::mem::size_of::<Pifo>()
    );
    assert!(
        std::mem::size_of::<Slot>() <= 56,
        "{}",
        std::mem::size_of::<Slot>()
    );
    assert_eq!(std::mem::size_of::<FlowRec>(), 48);
    assert!(
        std::mem::size_of::<LeafRt>() == 64,
        "{}",
        std::mem::size_of::<LeafRt>()
    );
}
