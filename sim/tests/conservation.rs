//! Every packet a host injects is delivered to a host or counted as dropped; at any instant the
//! difference is exactly the packets alive in the network.

mod common;

use ccp_sim::Sim;

/// An incast into a small drop-tail buffer, with losses and timeouts, run until the network is
/// empty.
const LOSSY: &str = r#"
duration_ms = 200

[topology]
kind = "star"
hosts = 9
link_gbps = 10.0
link_delay_us = 5.0

[switch]
buffer_bytes = 60_000
admission = "static"
port_buffer_bytes = 40_000

[transport]
ecn = false
rto_min_us = 1000.0
rto_initial_us = 1000.0

[cc]
algorithm = "reno"
params = { ecn = false }

[workload.incast]
degree = 8
total_bytes = 2_000_000
interval_us = 2000.0
bursts = 3

[workload.random]
cdf = "{cdf}"
load = 0.3
stop_ms = 5.0

[output]
sample_interval_us = 100.0
"#;

#[test]
fn every_packet_is_delivered_or_dropped() {
    let loaded = common::scenario(LOSSY);
    let mut sim = Sim::new(&loaded).unwrap();
    let mut last = 0;
    sim.run(|_, events| last = events);
    let c = &sim.counters;
    assert!(c.dropped_buffer > 0, "the scenario must drop packets");
    assert!(c.timeouts > 0 || c.retransmits > 0);
    assert_eq!(sim.packets_alive(), 0, "the network drained");
    assert_eq!(c.injected, c.delivered + c.dropped_buffer + c.dropped_aqm);
    assert_eq!(sim.host_nic_backlog(), 0);
    let r = sim.results("t", 1, &[], 1.0);
    assert_eq!(r.flows_completed, r.flows_total, "every flow completed despite the losses");
    assert_eq!(last, r.events, "the last progress call reports every event");
}

#[test]
fn invariant_holds_mid_run() {
    for ms in [1.0, 2.5, 4.0] {
        let loaded = common::scenario(&LOSSY.replace("duration_ms = 200", &format!("duration_ms = {ms}")));
        let (sim, r) = common::run(&loaded);
        let c = &r.counters;
        assert!(sim.packets_alive() > 0, "stopped mid-flight at {ms} ms");
        assert_eq!(c.injected, c.delivered + c.dropped_buffer + c.dropped_aqm + sim.packets_alive() as u64, "at {ms} ms");
    }
}

/// Sums what every report says was delivered.
struct Tally(std::sync::Arc<std::sync::atomic::AtomicU64>);

struct Tallied {
    inner: Box<dyn ccp_contract::Algorithm>,
    delivered: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ccp_contract::Algorithm for Tallied {
    fn name(&self) -> &'static str {
        "tallied"
    }
    fn init(&mut self, s: &ccp_contract::FlowStart) -> ccp_contract::Action {
        self.inner.init(s)
    }
    fn on_report(&mut self, r: &ccp_contract::Report) -> ccp_contract::Action {
        self.delivered.fetch_add(r.acked_bytes + r.sacked_bytes, std::sync::atomic::Ordering::Relaxed);
        self.inner.on_report(r)
    }
}

impl ccp_contract::AlgorithmFactory for Tally {
    fn name(&self) -> &'static str {
        "tallied"
    }
    fn create(&self) -> Box<dyn ccp_contract::Algorithm> {
        let inner = ccp_algorithms::registry::configure("reno", &toml::Table::new()).unwrap().create();
        Box::new(Tallied { inner, delivered: self.0.clone() })
    }
}

/// Reports count each byte the sender learns was delivered once: an in-order segment the ACK
/// also names as its trigger is cumulatively acknowledged, not SACKed too.
#[test]
fn reports_count_each_delivered_byte_once() {
    let loaded = common::scenario(
        r#"
duration_ms = 100
[topology]
kind = "star"
hosts = 2
link_gbps = 1.0
link_delay_us = 10.0
[switch]
buffer_bytes = 4_000_000
[cc]
algorithm = "reno"
reporting = "interval"
report_interval_us = 200.0
[[workload.flows]]
src = 0
dst = 1
bytes = 3_000_000
"#,
    );
    let delivered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut sim = Sim::with_algorithm(&loaded, std::sync::Arc::new(Tally(delivered.clone()))).unwrap();
    sim.run(|_, _| {});
    assert_eq!(sim.counters.retransmits, 0, "a loss-free run");
    // The last few ACKs arrive after the last report; counted twice, in-order data would add up
    // to one and a half to two times the flow.
    let reported = delivered.load(std::sync::atomic::Ordering::Relaxed);
    assert!((2_900_000..=3_000_000).contains(&reported), "reports say {reported} bytes of 3,000,000 were delivered");
}
