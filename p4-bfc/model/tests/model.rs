//! Unit tests of the BFC behavioural model: specs/bfc.md §17 U1–U9 (the CI tests).
//! Time is passed in ns; packets are 1000 B (the spec's MTU) unless a test needs otherwise.

use ccp_bfc_model::*;

const LEN: u32 = 1000;
const G100: u64 = 100_000_000_000;

fn pkt(ingress: u8, egress: u8, hash: u32, upstream_q: u16) -> IngressPacket {
    IngressPacket {
        ingress_port: ingress,
        egress_port: egress,
        flow_hash: hash,
        bfc: BfcHeader { upstream_q, ether_type: 0x0800 },
        len_bytes: LEN,
    }
}

/// A hash landing in flow-table slot `slot` of its egress slice (inverse of the multiply-shift).
fn hash_for_slot(slot: u32) -> u32 {
    let h = (slot << 16).div_ceil(FLOW_TABLE_PER_PORT);
    assert_eq!((h * FLOW_TABLE_PER_PORT) >> 16, slot);
    h
}

/// A switch whose every port has Th rows for `rate_bps` at the default 2 µs hop RTT.
fn switch(rate_bps: u64, seed: u64) -> Bfc {
    let mut b = Bfc::with_defaults(seed);
    for p in 0..NUM_PORTS as u8 {
        b.install_th_row(p, u64::from(HRTT_NS), rate_bps, 1000);
    }
    b
}

/// Pauses every queue of `port` except those in `keep`, as a downstream bitmap frame would.
fn pause_all_but(b: &mut Bfc, port: u8, keep: &[u8]) {
    let mut bits = u32::MAX;
    for &q in keep {
        bits &= !(1 << q);
    }
    b.on_control(port, &CtrlHeader { op: CTRL_BITMAP, word_index: 0, upstream_q: 0, bitmap: bits });
}

// ---- U1: pause threshold table ----

#[test]
fn u1_threshold_is_hop_bdp_over_active_queues() {
    assert_eq!(th_bytes(2000, G100, 1, 1000), 25_000);
    assert_eq!(th_bytes(2000, G100, 4, 1000), 6_250);
    assert_eq!(th_bytes(2000, G100, 32, 1000), 781, "781.25 B, floored");
    assert_eq!(th_bytes(2000, 4 * G100, 1, 1000), 100_000);
    assert_eq!(th_bytes(2000, G100, 1, 1500), 37_500, "the artifact's 1.5x");
    let b = switch(G100, 1);
    assert_eq!(b.th_lookup(3, 1), Some(25_000));
    assert_eq!(b.th_lookup(3, 4), Some(6_250));
    assert_eq!(b.th_lookup(3, 0), Some(25_000), "N_active 0 counts as 1");
    assert_eq!(Bfc::with_defaults(1).th_lookup(3, 1), None, "no entry until the controller installs one");
}

#[test]
fn u1_the_threshold_used_follows_the_active_queue_count() {
    // 12 KB queued on one queue: under Th(1) = 25 KB, over Th(4) = 6.25 KB.
    let mut b = switch(G100, 2);
    let mut c = Vec::new();
    let flow = hash_for_slot(0);
    for _ in 0..12 {
        b.ingress(0, &pkt(1, 0, flow, 0), &mut c);
    }
    let m = b.ingress(0, &pkt(2, 0, flow, 9), &mut c);
    assert_eq!(b.n_active(0), 1);
    assert!(!m.counter_incr && c.is_empty(), "12 KB < Th(1) = 25 KB");
    // Three more flows make 4 queues active: Th drops to 6.25 KB.
    for s in 1..4 {
        b.ingress(0, &pkt(1, 0, hash_for_slot(s), 0), &mut c);
    }
    assert_eq!(b.n_active(0), 4);
    let m = b.ingress(0, &pkt(2, 0, flow, 9), &mut c);
    assert!(m.counter_incr, "13 KB > Th(4) = 6.25 KB");
    assert_eq!(c, vec![Control { port: 2, hdr: CtrlHeader { op: CTRL_PAUSE, word_index: 0, upstream_q: 9, bitmap: 0 } }]);
    // Paused queues are not active: pausing three of them brings Th back up.
    let q = m.qid;
    pause_all_but(&mut b, 0, &[q]);
    assert_eq!(b.n_active(0), 1);
}

// ---- U2: dynamic queue assignment ----

#[test]
fn u2_distinct_flows_get_distinct_queues_until_they_run_out() {
    let mut b = switch(G100, 3);
    let mut c = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in 0..DATA_QUEUES_PER_PORT {
        let m = b.ingress(0, &pkt(1, 4, hash_for_slot(s), 0), &mut c);
        assert!(u32::from(m.qid) < DATA_QUEUES_PER_PORT, "never the control queue");
        assert!(seen.insert(m.qid), "flow {s} got queue {} that another active flow holds", m.qid);
    }
    let m = b.ingress(0, &pkt(1, 4, hash_for_slot(100), 0), &mut c);
    assert!(seen.contains(&m.qid), "with every queue busy the next flow shares one");
    // Two flows whose hashes collide in the flow table share the entry, hence the queue.
    let h = hash_for_slot(200);
    let a = b.ingress(0, &pkt(1, 5, h, 0), &mut c);
    let b2 = b.ingress(0, &pkt(1, 5, h | 0xABCD_0000, 0), &mut c);
    assert_eq!((a.flow_idx, a.qid), (b2.flow_idx, b2.qid));
}

#[test]
fn u2_the_fallback_queue_is_spread_over_all_data_queues() {
    // With every queue busy, the choice is uniform (§16.7): every data queue shows up over many
    // new flows.
    let mut b = switch(G100, 4);
    let mut c = Vec::new();
    for s in 0..DATA_QUEUES_PER_PORT {
        b.ingress(0, &pkt(1, 0, hash_for_slot(s), 0), &mut c);
    }
    let mut hits = [0u32; QUEUES_PER_PORT as usize];
    for s in 0..3000 {
        let m = b.ingress(0, &pkt(1, 0, hash_for_slot(100 + s % 3000), 0), &mut c);
        hits[usize::from(m.qid)] += 1;
    }
    assert_eq!(hits[CONTROL_QID as usize], 0);
    assert!(hits[..DATA_QUEUES_PER_PORT as usize].iter().all(|&h| h > 50), "{hits:?}");
}

// ---- U3: sticky reassignment ----

#[test]
fn u3_a_queue_is_reassigned_only_after_drain_and_two_hop_rtts_idle() {
    let mut b = switch(G100, 5);
    let mut c = Vec::new();
    let flow = hash_for_slot(7);
    let t0 = 1_000_000;
    let m = b.ingress(t0, &pkt(1, 0, flow, 0), &mut c);
    let q = m.qid;
    // Backlogged (size > 0): never moves, however long it has been.
    let m2 = b.ingress(t0 + 1_000_000_000, &pkt(1, 0, flow, 0), &mut c);
    assert_eq!(m2.qid, q);
    // Drain both at t.
    let t = t0 + 1_000_000_100;
    b.egress(t, &m, BfcHeader::default(), &mut c);
    b.egress(t, &m2, BfcHeader::default(), &mut c);
    assert_eq!(b.flow_table[m.flow_idx as usize].size, 0);
    // Make the old queue unattractive (paused downstream), so any reassignment must move.
    pause_all_but(&mut b, 0, &[(q + 1) % DATA_QUEUES_PER_PORT as u8]);
    // Drained but idle 3 µs < STICKY (4 µs): stays.
    let m3 = b.ingress(t + 3_000, &pkt(1, 0, flow, 0), &mut c);
    assert_eq!(m3.qid, q, "within the sticky time the flow keeps its queue");
    b.egress(t + 3_100, &m3, BfcHeader::default(), &mut c);
    // Idle 5 µs > STICKY since the last dequeue: moves to the only empty unpaused queue.
    let m4 = b.ingress(t + 3_100 + 5_000, &pkt(1, 0, flow, 0), &mut c);
    assert_eq!(m4.qid, (q + 1) % DATA_QUEUES_PER_PORT as u8, "after drain + 2 HRTT idle the entry is reassigned");
    // Exactly at the sticky time it does not move yet (strictly greater is required).
    b.egress(t + 10_000, &m4, BfcHeader::default(), &mut c);
    pause_all_but(&mut b, 0, &[q]);
    let m5 = b.ingress(t + 10_000 + u64::from(STICKY_NS), &pkt(1, 0, flow, 0), &mut c);
    assert_eq!(m5.qid, m4.qid);
}

// ---- U4: pause counter ----

/// Three 1 KB packets from (ingress 1, upstreamQ 0) so the flow's queue holds 3 KB, above the
/// 2.5 KB threshold of a 10 G egress; returns their metadata.
fn fill_over_threshold(b: &mut Bfc, flow: u32, c: &mut Vec<Control>) -> Vec<BfcMeta> {
    (0..3).map(|_| b.ingress(0, &pkt(1, 0, flow, 0), c)).collect()
}

#[test]
fn u4_pause_on_zero_to_one_and_resume_on_one_to_zero() {
    let mut b = switch(10_000_000_000, 6); // Th(1) = 2500 B
    let mut c = Vec::new();
    let flow = hash_for_slot(3);
    let fill = fill_over_threshold(&mut b, flow, &mut c);
    assert!(c.is_empty() && fill.iter().all(|m| !m.counter_incr), "0, 1 and 2 KB ahead are not above 2.5 KB");
    assert_eq!(b.pause_count(1, 0), 0, "packets enqueued below Th leave the counter alone");
    let p: Vec<BfcMeta> = (0..3).map(|_| b.ingress(0, &pkt(2, 0, flow, 7), &mut c)).collect();
    assert!(p.iter().all(|m| m.counter_incr));
    assert_eq!(b.pause_count(2, 7), 3);
    assert_eq!(c, vec![Control { port: 2, hdr: CtrlHeader { op: CTRL_PAUSE, word_index: 0, upstream_q: 7, bitmap: 0 } }]);
    c.clear();
    for m in fill.iter().chain(&p[..2]) {
        b.egress(10, m, BfcHeader::default(), &mut c);
    }
    assert!(c.is_empty(), "no message until the last counted packet leaves");
    assert_eq!(b.pause_count(2, 7), 1);
    b.egress(10, &p[2], BfcHeader::default(), &mut c);
    assert_eq!(c, vec![Control { port: 2, hdr: CtrlHeader { op: CTRL_RESUME, word_index: 0, upstream_q: 7, bitmap: 0 } }]);
    assert_eq!((b.pause_count(2, 7), b.pauses_sent, b.resumes_sent), (0, 1, 1));
}

// ---- U5: one upstream queue feeding two egresses ----

#[test]
fn u5_shared_upstream_queue_resumes_when_the_congested_packets_leave() {
    let mut b = switch(10_000_000_000, 7);
    let mut c = Vec::new();
    let (fa, fb) = (hash_for_slot(1), hash_for_slot(2));
    let fill = fill_over_threshold(&mut b, fa, &mut c); // egress 0 congested
    let a = b.ingress(0, &pkt(2, 0, fa, 5), &mut c);
    let bq: Vec<BfcMeta> = (0..2).map(|_| b.ingress(0, &pkt(2, 1, fb, 5), &mut c)).collect(); // egress 1 idle
    assert!(a.counter_incr && bq.iter().all(|m| !m.counter_incr));
    assert_eq!(b.pause_count(2, 5), 1);
    c.clear();
    for m in &fill {
        b.egress(1, m, BfcHeader::default(), &mut c);
    }
    b.egress(2, &a, BfcHeader::default(), &mut c);
    assert_eq!(c, vec![Control { port: 2, hdr: CtrlHeader { op: CTRL_RESUME, word_index: 0, upstream_q: 5, bitmap: 0 } }]);
    assert!(b.depth(1, bq[0].qid) > 0, "B's packets are still queued on the other egress");
}

// ---- U6: upstreamQ rewrite ----

#[test]
fn u6_upstream_q_is_rewritten_and_the_counter_key_keeps_the_incoming_value() {
    let mut b = switch(10_000_000_000, 8);
    let mut c = Vec::new();
    pause_all_but(&mut b, 0, &[11]);
    let flow = hash_for_slot(9);
    let fill = fill_over_threshold(&mut b, flow, &mut c);
    assert_eq!(fill[0].qid, 11, "the only empty unpaused queue");
    let m = b.ingress(0, &pkt(2, 0, flow, 3), &mut c);
    assert!(m.counter_incr);
    assert_eq!((b.pause_count(2, 3), b.pause_count(2, 11)), (1, 0));
    for f in &fill {
        b.egress(1, f, BfcHeader::default(), &mut c);
    }
    let out = b.egress(1, &m, BfcHeader { upstream_q: 3, ether_type: 0x0800 }, &mut c);
    assert_eq!(out, BfcHeader { upstream_q: 11, ether_type: 0x0800 });
    assert_eq!((b.pause_count(2, 3), b.pause_count(2, 11)), (0, 0));
    assert_eq!(c.last().unwrap().hdr.upstream_q, 3, "the resume names the queue the packet came from");
}

// ---- U7: idempotent pause level and bitmap ----

#[test]
fn u7_the_pause_bitmap_is_idempotent_and_repairs_a_lost_resume() {
    // Downstream switch `d` pauses upstream queue 7 on its port 2; upstream switch `u` owns that
    // queue on its port 4.
    let mut d = switch(10_000_000_000, 9);
    let mut u = switch(10_000_000_000, 10);
    let mut c = Vec::new();
    let flow = hash_for_slot(4);
    let fill = fill_over_threshold(&mut d, flow, &mut c);
    let p = d.ingress(0, &pkt(2, 0, flow, 7), &mut c);
    let frames = d.bitmap_frames(2);
    assert_eq!(frames.len(), BITMAP_WORDS_PER_PORT as usize);
    assert_eq!(frames[0].hdr, CtrlHeader { op: CTRL_BITMAP, word_index: 0, upstream_q: 0, bitmap: 1 << 7 });
    assert!(frames[1..].iter().all(|f| f.hdr.bitmap == 0));
    // Deliver the PAUSE twice, then the bitmap twice: the state never changes after the first.
    u.on_control(4, &c[0].hdr);
    let after_pause = u.paused_q.clone();
    u.on_control(4, &c[0].hdr);
    assert_eq!(u.paused_q, after_pause, "a duplicate PAUSE adds no state");
    for f in frames.iter().chain(&frames) {
        u.on_control(4, &f.hdr);
        assert_eq!(u.paused_q, after_pause, "the same bitmap again changes nothing");
    }
    assert!(u.is_paused(4, 7));
    // The RESUME is lost: u stays paused until the next bitmap, which clears it.
    c.clear();
    for m in fill.iter().chain([&p]) {
        d.egress(5, m, BfcHeader::default(), &mut c);
    }
    assert_eq!(c.len(), 1, "the RESUME that we drop");
    assert!(u.is_paused(4, 7));
    for f in d.bitmap_frames(2) {
        u.on_control(4, &f.hdr);
    }
    assert!(!u.is_paused(4, 7), "the periodic bitmap repairs the lost RESUME");
    let repaired = u.paused_q.clone();
    for f in d.bitmap_frames(2) {
        u.on_control(4, &f.hdr);
    }
    assert_eq!(u.paused_q, repaired);
}

// ---- U8: empty-queue choice skips paused queues ----

#[test]
fn u8_new_flows_never_land_on_a_paused_empty_queue() {
    for seed in 0..50 {
        let mut b = switch(G100, seed);
        let mut c = Vec::new();
        let keep = [2u8, 17, 30];
        pause_all_but(&mut b, 0, &keep);
        for s in 0..3 {
            let m = b.ingress(0, &pkt(1, 0, hash_for_slot(s), 0), &mut c);
            assert!(keep.contains(&m.qid), "seed {seed}: flow {s} got paused queue {}", m.qid);
        }
    }
}

// ---- U9: deadlock allow-table (§10) ----

#[test]
fn u9_no_backpressure_on_removed_edges() {
    let mut b = switch(10_000_000_000, 11);
    b.set_backpressure_allowed(2, 0, false);
    let mut c = Vec::new();
    let flow = hash_for_slot(6);
    fill_over_threshold(&mut b, flow, &mut c);
    let m = b.ingress(0, &pkt(2, 0, flow, 7), &mut c);
    assert!(!m.counter_incr && c.is_empty() && b.pause_count(2, 7) == 0, "above Th, but the edge is removed");
    // The same ingress toward another egress still gets backpressure.
    let other = hash_for_slot(8);
    for _ in 0..3 {
        b.ingress(0, &pkt(1, 1, other, 0), &mut c);
    }
    assert!(b.ingress(0, &pkt(2, 1, other, 7), &mut c).counter_incr);
}

// ---- Conservation ----

#[test]
fn every_counter_returns_to_zero_after_the_switch_drains() {
    // A pseudo-random mix of arrivals and departures over 4 ports: once everything has left,
    // every register that counts packets is back to zero and pauses balance resumes.
    let mut b = switch(10_000_000_000, 12);
    let mut c = Vec::new();
    let mut queued: Vec<BfcMeta> = Vec::new();
    let mut x: u64 = 0x1234_5678;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for t in 0..20_000u64 {
        let r = next();
        if r % 3 != 0 || queued.is_empty() {
            let p = pkt((r >> 8) as u8 % 4, (r >> 16) as u8 % 4, hash_for_slot((r >> 24) as u32 % 40), (r >> 40) as u16 % 300);
            queued.push(b.ingress(t * 100, &p, &mut c));
        } else {
            let i = (r >> 8) as usize % queued.len();
            let m = queued.swap_remove(i);
            b.egress(t * 100, &m, BfcHeader::default(), &mut c);
        }
    }
    for m in queued.drain(..) {
        b.egress(3_000_000, &m, BfcHeader::default(), &mut c);
    }
    assert!(b.pauses_sent > 0, "the mix should have crossed Th");
    assert_eq!(b.pauses_sent, b.resumes_sent);
    assert!(b.pause_counter.iter().all(|&v| v == 0));
    assert!(b.pause_bitmap.iter().all(|&v| v == 0));
    assert!(b.flow_table.iter().all(|e| e.size == 0));
    assert!(b.queue_depth.iter().all(|&v| v == 0));
    assert!(b.nonempty_q.iter().all(|&v| v == 0));
}

// ---- BFC 128: the thesis's stress configuration, beyond the P4's 32 queues ----

/// A 128-queue switch (every port has Th rows for 100 G at the default hop RTT).
fn switch128(seed: u64) -> Bfc {
    let mut b = Bfc::new(MAX_QUEUES_PER_PORT, STICKY_NS, seed);
    for p in 0..NUM_PORTS as u8 {
        b.install_th_row(p, u64::from(HRTT_NS), G100, 1000);
    }
    b
}

/// A hash landing in flow-table slot `slot` of a table with `per_port` entries per egress.
fn hash_for_slot_in(slot: u32, per_port: u32) -> u32 {
    let h = (slot << 16).div_ceil(per_port);
    assert_eq!((h * per_port) >> 16, slot);
    h
}

#[test]
fn bfc128_widens_every_per_queue_register_and_the_flow_table() {
    let b = switch128(1);
    assert_eq!((b.data_queues(), b.queues_per_port()), (128, 128));
    assert_eq!(b.flow_table.len(), (NUM_PORTS * 100 * 128) as usize, "100 × the queues per port (specs/bfc.md §4)");
    assert_eq!(b.queue_depth.len(), (NUM_PORTS * 128) as usize);
    assert_eq!(b.th_table.len(), (NUM_PORTS * 128) as usize);
    // Th keeps falling as N_active grows past the P4's 32.
    assert_eq!(b.th_lookup(0, 100), Some(th_bytes(u64::from(HRTT_NS), G100, 100, 1000)));
    assert!(b.th_lookup(0, 128) < b.th_lookup(0, 32));
    // Up to 32 queues the layout is the P4's.
    let p4 = Bfc::new(16, STICKY_NS, 1);
    assert_eq!(
        (p4.queues_per_port(), p4.flow_table.len(), p4.th_table.len()),
        (QUEUES_PER_PORT, FLOW_TABLE_SIZE as usize, TH_TABLE_SIZE as usize)
    );
}

#[test]
fn bfc128_gives_128_active_flows_128_distinct_queues() {
    let mut b = switch128(3);
    let per_port = 100 * MAX_QUEUES_PER_PORT;
    let mut c = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in 0..MAX_QUEUES_PER_PORT {
        // Slots 100 apart: distinct flow-table entries.
        let m = b.ingress(0, &pkt(1, 4, hash_for_slot_in(s * 100, per_port), 0), &mut c);
        assert!(seen.insert(m.qid), "flow {s} got queue {}, which another active flow holds", m.qid);
    }
    assert_eq!(seen.len(), 128);
    assert_eq!(b.n_active(4), 128, "every queue holds data and none is paused");
    let m = b.ingress(0, &pkt(1, 4, hash_for_slot_in(7, per_port), 0), &mut c);
    assert!(seen.contains(&m.qid), "with every queue busy the next flow shares one");
}

#[test]
fn bfc128_pause_resume_and_bitmap_reach_the_queues_above_32() {
    let mut u = switch128(5);
    for q in [31u16, 32, 100, 127] {
        u.on_control(2, &CtrlHeader { op: CTRL_PAUSE, word_index: 0, upstream_q: q, bitmap: 0 });
        assert!(u.is_paused(2, q as u8), "queue {q}");
    }
    u.on_control(2, &CtrlHeader { op: CTRL_RESUME, word_index: 0, upstream_q: 100, bitmap: 0 });
    assert!(!u.is_paused(2, 100) && u.is_paused(2, 127));
    // A bitmap word sets its 32 queues and leaves the others.
    u.on_control(2, &CtrlHeader { op: CTRL_BITMAP, word_index: 3, upstream_q: 0, bitmap: 1 << 5 });
    assert!(u.is_paused(2, 101) && !u.is_paused(2, 127), "word 3 is queues 96-127");
    assert!(u.is_paused(2, 31) && u.is_paused(2, 32), "words 0 and 1 untouched");
    // New flows avoid the paused empty queues there too.
    let keep = [40u8, 77, 120];
    let mut bits: u128 = u128::MAX;
    for &q in &keep {
        bits &= !(1u128 << q);
    }
    u.set_paused_queues(0, bits);
    let mut c = Vec::new();
    for s in 0..3 {
        let m = u.ingress(0, &pkt(1, 0, hash_for_slot_in(s * 100, 100 * MAX_QUEUES_PER_PORT), 0), &mut c);
        assert!(keep.contains(&m.qid), "flow {s} got paused queue {}", m.qid);
    }
    // The P4's layout ignores queues it does not have.
    let mut p4 = switch(G100, 5);
    p4.on_control(2, &CtrlHeader { op: CTRL_PAUSE, word_index: 0, upstream_q: 40, bitmap: 0 });
    p4.on_control(2, &CtrlHeader { op: CTRL_BITMAP, word_index: 1, upstream_q: 0, bitmap: u32::MAX });
    assert_eq!(p4.paused_q[2], 0);
}
