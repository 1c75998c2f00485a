//! The queue disciplines the simulator shares with the router (`ccp-qdisc`), exercised end to end
//! through simulated switches: phantom-queue marking, QCN notifications reaching the flow's
//! algorithm as `NetworkFeedback::Qcn`, CoDel drops; plus PFC and pacing.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ccp_contract::{Action, Algorithm, AlgorithmFactory, FlowStart, NetworkFeedback, Report};
use ccp_sim::Sim;

/// Two long flows into one receiver at 1 Gbit/s (100 µs base RTT).
fn two_flows(qdisc: &str, cc: &str, extra: &str) -> String {
    format!(
        r#"
duration_ms = 60
warmup_ms = 20

[topology]
kind = "star"
hosts = 3
link_gbps = 1.0
link_delay_us = 25.0

[switch.qdisc]
{qdisc}

[cc]
{cc}

[[workload.flows]]
src = 0
dst = 2

[[workload.flows]]
src = 1
dst = 2

[output]
sample_interval_us = 20.0
monitor = ["sw0->h2"]
{extra}
"#
    )
}

#[test]
fn phantom_queue_keeps_the_real_queue_near_empty_below_the_drain_rate() {
    let text = two_flows("kind = \"phantom\"\ndrain_fraction = 0.9\nmark_threshold_bytes = 3000", "algorithm = \"dctcp\"", "");
    let (_, r) = common::run(&common::scenario(&text));
    let p = &r.ports[0];
    assert!(p.marks > 0);
    assert!(p.utilization < 0.92 && p.utilization > 0.7, "utilization {} with a 90 % phantom drain", p.utilization);
    assert!(p.queue_p99_pkts < 8.0, "real queue p99 {} packets", p.queue_p99_pkts);
}

#[test]
fn codel_drops_to_hold_the_sojourn_time() {
    let text = two_flows(
        "kind = \"codel\"\ntarget_us = 100.0\ninterval_us = 1000.0",
        "algorithm = \"reno\"\nparams = { ecn = false }",
        "[transport]\necn = false",
    );
    let (_, codel) = common::run(&common::scenario(&text));
    let (_, tail) = common::run(&common::scenario(&two_flows(
        "kind = \"droptail\"",
        "algorithm = \"reno\"\nparams = { ecn = false }",
        "[transport]\necn = false",
    )));
    assert!(codel.counters.dropped_aqm > 0);
    assert!(
        codel.ports[0].queue_mean_pkts * 3.0 < tail.ports[0].queue_mean_pkts,
        "{} vs {}",
        codel.ports[0].queue_mean_pkts,
        tail.ports[0].queue_mean_pkts
    );
    assert!(codel.ports[0].utilization > 0.9);
}

/// Holds a fixed window and counts the QCN feedback it is given.
struct FeedbackCounter {
    seen: Arc<AtomicU64>,
}

impl Algorithm for FeedbackCounter {
    fn name(&self) -> &'static str {
        "feedback-counter"
    }
    fn init(&mut self, start: &FlowStart) -> Action {
        Action::cwnd(f64::from(start.mss_bytes) * 40.0)
    }
    fn on_report(&mut self, report: &Report) -> Action {
        if let Some(NetworkFeedback::Qcn { fb_quantized, .. }) = report.feedback {
            assert!((1..=63).contains(&fb_quantized));
            self.seen.fetch_add(1, Ordering::Relaxed);
        }
        Action::default()
    }
}

struct CounterFactory(Arc<AtomicU64>);

impl AlgorithmFactory for CounterFactory {
    fn name(&self) -> &'static str {
        "feedback-counter"
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(FeedbackCounter { seen: self.0.clone() })
    }
}

#[test]
fn qcn_notifications_reach_the_algorithm_as_network_feedback() {
    let text = two_flows(
        "kind = \"qcn\"\nq_eq_bytes = 15000\nsampling_probability = 0.05",
        "reporting = \"interval\"\nreport_interval_us = 1000.0",
        "",
    );
    let loaded = common::scenario(&text);
    let seen = Arc::new(AtomicU64::new(0));
    let mut sim = Sim::with_algorithm(&loaded, Arc::new(CounterFactory(seen.clone()))).unwrap();
    sim.run(|_, _| {});
    assert!(sim.counters.cnms > 10, "the congestion point sampled a queue above Q_eq: {}", sim.counters.cnms);
    assert_eq!(seen.load(Ordering::Relaxed), sim.counters.cnms, "every CNM arrived as a report with feedback");
}

#[test]
fn pfc_makes_an_incast_lossless() {
    let incast = |pfc: &str| {
        format!(
            r#"
duration_ms = 50
stop_when_done = true

[topology]
kind = "star"
hosts = 9
link_gbps = 10.0
link_delay_us = 2.0

[switch]
buffer_bytes = 200_000
{pfc}

[cc]
algorithm = "constant"
params = {{ cwnd_pkts = 64 }}

[transport]
rto_min_us = 1000.0
rto_initial_us = 1000.0

[workload.incast]
degree = 8
total_bytes = 4_000_000
interval_us = 10000.0
bursts = 1
"#
        )
    };
    let (_, lossy) = common::run(&common::scenario(&incast("")));
    assert!(lossy.counters.dropped_buffer > 0);
    // XOFF × 8 ingresses plus one hop-RTT of headroom each (4 µs at 10 Gbit/s ≈ 5 KB + a packet)
    // fits the 200 KB buffer.
    let (sim, lossless) =
        common::run(&common::scenario(&incast("[switch.pfc]\nenabled = true\nxoff_bytes = 12_000\nxon_bytes = 9_000")));
    assert_eq!(lossless.counters.dropped_buffer, 0);
    assert!(lossless.counters.pfc_frames > 0);
    assert_eq!(lossless.flows_completed, 8);
    let paused: u64 = sim.ports.iter().map(|p| p.stats.pfc_paused_time).sum();
    assert!(paused > 0, "host NICs were paused");
    // The dynamic threshold (11 % of the free buffer, the datacenter baselines' PFC): 8 ingresses
    // at XOFF ≤ 0.11 × free plus headroom leave the buffer room, so the incast stays lossless.
    let (_, dynamic) = common::run(&common::scenario(&incast("[switch.pfc]\nenabled = true\nfree_fraction = 0.11")));
    assert_eq!(dynamic.counters.dropped_buffer, 0);
    assert!(dynamic.counters.pfc_frames > 0);
    assert_eq!(dynamic.flows_completed, 8);
}

#[test]
fn pacing_spreads_a_window() {
    // A constant window of 100 packets paced at 200 Mbit/s on a 1 Gbit/s path: throughput is the
    // pacing rate, not the window's 1.2 Gbit/s.
    let text = r#"
duration_ms = 30
warmup_ms = 5

[topology]
kind = "star"
hosts = 2
link_gbps = 1.0
link_delay_us = 25.0

[cc]
algorithm = "constant"
params = { cwnd_pkts = 100, rate_mbit_per_s = 200 }

[[workload.flows]]
src = 0
dst = 1

[output]
monitor = ["sw0->h1"]
"#;
    let (_, r) = common::run(&common::scenario(text));
    // The pacer spaces packets by their wire size, so the link carries the pacing rate.
    let gbps = r.ports[0].throughput_gbps;
    assert!((gbps - 0.2).abs() < 0.01, "{gbps}");
    assert!(r.ports[0].queue_p99_pkts < 1.5);
}
