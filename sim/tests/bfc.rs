//! BFC on a ccp-sim switch through `ccp_sim::bfc` (the P4 pipeline's behavioural model as a
//! switch hook; specs/bfc.md §6, §17 S7-style drop check): two senders start at line rate with no
//! end-to-end congestion control into one 100 G egress. Without BFC the shared buffer overflows;
//! with BFC the egress queues stay near Th = HRTT·μ/N_active plus one hop-RTT of overshoot, and
//! nothing is dropped.

mod common;

use ccp_sim::bfc::{install, BfcHook, BfcParams};
use ccp_sim::Sim;

const TWO_TO_ONE: &str = r#"
duration_ms = 5
stop_when_done = true

[topology]
kind = "star"
hosts = 3
link_gbps = 100.0
link_delay_us = 1.0

[switch]
buffer_bytes = 400_000
queues_per_port = 8

[cc]
algorithm = "constant"
params = { cwnd_pkts = 1000 }

[transport]
mss_bytes = 1000
rto_min_us = 1000.0
rto_initial_us = 1000.0

[workload.incast]
degree = 2
total_bytes = 4_000_000
interval_us = 100000.0
receiver = 2
bursts = 1

[output]
sample_interval_us = 1.0
monitor = ["sw0->h2"]
"#;

#[test]
fn bfc_holds_the_bottleneck_near_th_without_drops_where_plain_queues_drop() {
    let loaded = common::scenario(TWO_TO_ONE);
    let (_, plain) = common::run(&loaded);
    assert!(plain.counters.dropped_buffer > 0, "two 1 MB windows at line rate overflow a 400 KB buffer");

    let mut sim = Sim::new(&loaded).unwrap();
    install(&mut sim, &BfcParams::default()).unwrap();
    sim.run(|_, _| {});
    let r = sim.results("bfc", 1, &[], 1.0);
    assert_eq!(r.counters.dropped_buffer + r.counters.dropped_aqm, 0, "BFC: no drops");
    assert_eq!(r.flows_completed, 2);
    assert!(r.counters.queue_controls > 0, "pauses were sent");
    // Two active queues: Th = 2 µs × 100 Gb/s / 8 / 2 = 12.5 KB each. A pause acts one hop RTT
    // later, during which a queue grows at (100 − 50) Gb/s: about 12.5 KB more. So each queue
    // peaks near 25 KB, and the port (two queues) near 50 KB — an order of magnitude below the
    // unpaced 1 MB windows.
    let port = &r.ports[0];
    let th_total = 2.0 * 12_500.0;
    assert!(port.queue_max_bytes < 2.0 * (12_500.0 + 12_500.0) + 10_000.0, "max queue {} B", port.queue_max_bytes);
    assert!(port.queue_mean_bytes > 0.3 * th_total, "queue held near Th, not drained: mean {} B", port.queue_mean_bytes);
    assert!(port.utilization > 0.5, "utilization {}", port.utilization);
}

#[test]
fn every_switch_gets_a_pipeline_with_its_ports() {
    let loaded = common::scenario(TWO_TO_ONE);
    let sim = Sim::new(&loaded).unwrap();
    let hook = BfcHook::new(&sim, 0, &BfcParams::default()).unwrap();
    let m = hook.model();
    assert_eq!(m.port_index.len(), 3, "one local port per link of the star switch");
    assert_eq!(m.data_queues(), 8);
    // 1 µs links: HRTT = 2 µs, so Th(1) at 100 G is the thesis's 25 KB.
    assert_eq!(m.th_lookup(0, 1), Some(25_000));
    assert!(BfcHook::new(&sim, 1, &BfcParams::default()).is_err(), "the star has one switch");
}
