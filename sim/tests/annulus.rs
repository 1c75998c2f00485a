//! Annulus on the shipped dumbbell (configs/sim/annulus-dumbbell.toml): DC and WAN flows through a
//! QCN congestion point with ECN marking, with and without the near-source loop
//! (specs/annulus.md §13.4 items 25–26; the issue's CI check).

mod common;

use std::path::Path;

use ccp_sim::config::load;

const Q_EQ_BYTES: f64 = 90_000.0;

fn run_with(overrides: &[String]) -> ccp_sim::Results {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/annulus-dumbbell.toml");
    let loaded = load(&file, overrides).unwrap_or_else(|e| panic!("{e}"));
    common::run(&loaded).1
}

fn run(near_source: bool) -> ccp_sim::Results {
    run_with(&[format!("cc.params.near_source={near_source}"), "duration_ms=40".to_string()])
}

/// Issue 38: "a lone WAN flow must reach the link". With the WAN distance on the sender's own
/// access link (the dumbbell until 2026-11-30) the congestion point was 1 ms away from the sender,
/// a cut came after 1 ms of line-rate data had left, and the CNMs that data raised drove the
/// near-source rate to its floor: 0.01 Gbit/s.
#[test]
fn a_lone_wan_flow_reaches_the_link() {
    let r = run_with(&[r#"workload.flows=[{src=4,dst=7,label="wan"}]"#.to_string(), "duration_ms=60".to_string()]);
    let f = &r.flows[0];
    assert!(f.min_rtt_us.expect("RTT samples") > 2_000.0, "the flow is a WAN flow: {:?}", f.min_rtt_us);
    let goodput_gbps = f.goodput_gbps;
    assert!(goodput_gbps > 8.0, "a lone WAN flow got {goodput_gbps} Gbit/s of the 10 Gbit/s bottleneck");
    assert_eq!(r.counters.dropped_buffer, 0);
    assert!(r.counters.cnms > 0, "the near-source loop was exercised");
}

#[test]
fn annulus_holds_the_queue_near_q_eq_without_drops_where_dctcp_and_bbr_overflow_it() {
    let annulus = run(true);
    let baseline = run(false);
    let (a, b) = (&annulus.ports[0], &baseline.ports[0]);
    assert!(annulus.counters.cnms > 0, "no CNMs reached the flows");
    assert_eq!(annulus.counters.dropped_buffer, 0, "Annulus dropped at the congestion point");
    assert!(a.queue_p99_bytes <= 2.0 * Q_EQ_BYTES, "Annulus queue p99 {} B, Q_eq {Q_EQ_BYTES}", a.queue_p99_bytes);
    assert!(a.utilization > 0.9, "Annulus utilisation {}", a.utilization);
    // The same flows without the near-source loop: BBR's WAN flows fill the 1 MB buffer.
    assert!(baseline.counters.dropped_buffer > 100, "DCTCP + BBR dropped only {}", baseline.counters.dropped_buffer);
    assert!(b.queue_p99_bytes > 5.0 * Q_EQ_BYTES, "DCTCP + BBR queue p99 {} B", b.queue_p99_bytes);
    // The mix really is two classes: the WAN flows see ≈ 2 ms, the DC flows tens of µs.
    for f in &annulus.flows {
        let rtt = f.min_rtt_us.expect("every flow has RTT samples");
        if f.label.as_deref() == Some("wan") {
            assert!(rtt > 1_000.0, "WAN flow {} min RTT {rtt} µs", f.id);
        } else {
            assert!(rtt < 100.0, "DC flow {} min RTT {rtt} µs", f.id);
        }
    }
}
