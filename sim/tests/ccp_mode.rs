//! CCP-style reporting: reports every interval (plus urgent ones) with the action arriving after
//! the agent delay, versus per-ACK in-datapath control.

mod common;

use std::path::Path;

use ccp_sim::config::load;

fn dctcp(overrides: &[&str]) -> ccp_sim::config::Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/dctcp-k20.toml");
    let mut o: Vec<String> = vec!["duration_ms=100".into(), "warmup_ms=20".into()];
    o.extend(overrides.iter().map(|s| s.to_string()));
    load(&path, &o).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn per_ack_mode_reports_on_every_ack() {
    let (_, r) = common::run(&dctcp(&[]));
    // Every ACK a sender received produced one report; ACKs still in the network did not.
    assert_eq!(r.counters.dropped_buffer, 0);
    assert!(r.counters.reports <= r.counters.acks);
    assert!(
        r.counters.reports >= r.counters.acks - r.packets_alive_at_end as u64,
        "{} reports, {} ACKs",
        r.counters.reports,
        r.counters.acks
    );
}

#[test]
fn interval_mode_reports_per_interval_plus_urgent_and_still_controls() {
    let (_, r) = common::run(&dctcp(&["cc.reporting=\"interval\"", "cc.report_interval_us=1000", "cc.agent_delay_us=20"]));
    let periodic = 2 * 100; // 2 flows × 100 ms / 1 ms
    assert!(r.counters.reports >= periodic as u64 - 4, "{} reports", r.counters.reports);
    // Urgent reports on the first ECN-Echo of each window come on top, but far fewer than ACKs.
    assert!(r.counters.reports < r.counters.acks / 5, "{} reports for {} ACKs", r.counters.reports, r.counters.acks);
    let goodput: f64 = r.flows.iter().map(|f| f.goodput_gbps).sum();
    assert!(goodput > 0.9, "{goodput}");
    assert!(r.ports[0].queue_p99_pkts < 60.0, "DCTCP through CCP still bounds the queue: {}", r.ports[0].queue_p99_pkts);
}
