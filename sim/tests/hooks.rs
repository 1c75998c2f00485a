//! The BFC hooks: per-queue pause/resume between hops. A minimal BFC-style hook (pause the
//! upstream queue while its packets sit above a threshold here, resume when they have left;
//! specs/bfc.md §6.2) keeps a line-rate incast's queue bounded without drops and without any
//! end-to-end congestion control.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use ccp_sim::hook::{HookPacket, QueueControl, SwitchHook};
use ccp_sim::packet::PacketId;
use ccp_sim::switch::Port;
use ccp_sim::time::Time;
use ccp_sim::topology::PortId;
use ccp_sim::Sim;

struct Backpressure {
    threshold_bytes: u64,
    counters: BTreeMap<(PortId, u16), u32>,
    counted: BTreeSet<PacketId>,
}

impl SwitchHook for Backpressure {
    fn on_enqueue(&mut self, _now: Time, egress: &Port, queue: u16, p: &HookPacket, controls: &mut Vec<QueueControl>) {
        if egress.queues()[queue as usize].qdisc.len_bytes() > self.threshold_bytes {
            self.counted.insert(p.id);
            let c = self.counters.entry((p.ingress, p.upstream_q)).or_insert(0);
            *c += 1;
            if *c == 1 {
                controls.push(QueueControl { ingress: p.ingress, queue: p.upstream_q, paused: true });
            }
        }
    }

    fn on_dequeue(&mut self, _now: Time, _egress: &Port, _queue: u16, p: &HookPacket, controls: &mut Vec<QueueControl>) {
        if self.counted.remove(&p.id) {
            let c = self.counters.get_mut(&(p.ingress, p.upstream_q)).expect("counted on enqueue");
            *c -= 1;
            if *c == 0 {
                controls.push(QueueControl { ingress: p.ingress, queue: p.upstream_q, paused: false });
            }
        }
    }
}

const INCAST: &str = r#"
duration_ms = 20
stop_when_done = true

[topology]
kind = "star"
hosts = 9
link_gbps = 100.0
link_delay_us = 1.0

[switch]
buffer_bytes = 1_000_000
queues_per_port = 8

[cc]
algorithm = "constant"
params = { cwnd_pkts = 1000 }

[transport]
mss_bytes = 1000
rto_min_us = 1000.0
rto_initial_us = 1000.0

[workload.incast]
degree = 8
total_bytes = 8_000_000
interval_us = 100000.0
receiver = 8
bursts = 1

[output]
sample_interval_us = 1.0
monitor = ["sw0->h8"]
"#;

#[test]
fn per_queue_backpressure_bounds_the_queue_without_drops() {
    let loaded = common::scenario(INCAST);
    let (_, plain) = common::run(&loaded);
    assert!(plain.counters.dropped_buffer > 0, "without backpressure 8 windows of 1000 packets overflow");

    let mut sim = Sim::new(&loaded).unwrap();
    sim.set_switch_hook(
        0,
        Box::new(Backpressure { threshold_bytes: 25_000, counters: BTreeMap::new(), counted: BTreeSet::new() }),
    );
    sim.run(|_, _| {});
    let r = sim.results("t", 1, &[], 1.0);
    assert_eq!(r.counters.dropped_buffer, 0);
    assert!(r.counters.queue_controls > 0);
    assert_eq!(r.flows_completed, 8);
    // Each of the 8 queues stops near the threshold plus one hop-RTT of line-rate arrivals.
    let max = r.ports[0].queue_max_bytes;
    assert!(max < 8.0 * (25_000.0 + 2.0 * 2e-6 * 100e9 / 8.0), "max queue {max} B");
    assert!(r.ports[0].utilization > 0.5);
}
