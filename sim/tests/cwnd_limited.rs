//! Issue 29: the simulated transport says whether the window limits the sender
//! (`Report::cwnd_limited`), and the controller holds a window the flow does not fill to twice
//! what it has in flight. A constant window smaller than the path's BDP limits the flow; a
//! constant window far above it, paced well below the link, does not — and its datapath window
//! stays near twice the flight instead of the 1,000 packets asked for.

mod common;

use ccp_contract::RecordedReport;
use ccp_sim::record::ReportRecord;
use ccp_sim::Sim;

const DUMBBELL: &str = r#"
duration_ms = 50
warmup_ms = 10

[topology]
kind = "dumbbell"
senders = 1
receivers = 1
host_gbps = 10.0
host_delay_us = 5.0
bottleneck_gbps = 1.0
bottleneck_delay_us = 100.0

[switch]
admission = "static"
port_buffer_bytes = 1_000_000

[switch.qdisc]
kind = "droptail"

[cc]
algorithm = "constant"
params = { {params} }
reporting = "interval"
report_interval_us = 200.0

[[workload.flows]]
src = 0
dst = 1
"#;

fn reports(params: &str) -> Vec<RecordedReport> {
    let loaded = common::scenario(&DUMBBELL.replace("{params}", params));
    let path = std::env::temp_dir().join(format!("ccp-sim-cwnd-limited-{}-{}.jsonl", std::process::id(), params.len()));
    let mut sim = Sim::new(&loaded).unwrap();
    sim.record = Some(ReportRecord::create(&path).unwrap());
    sim.run(|_, _| {});
    sim.record.take().unwrap().finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_small_window_limits_the_flow() {
    // 8 packets against a ~25-packet BDP (1 Gbit/s, ~210 µs).
    let r = reports("cwnd_pkts = 8");
    let limited = r.iter().filter(|l| l.report.cwnd_limited).count();
    assert!(r.len() > 100, "{} reports", r.len());
    assert_eq!(limited, r.len(), "every report of a flow its window holds back");
}

#[test]
fn a_window_the_flow_does_not_fill_is_held_near_its_flight() {
    // 1,000 packets, paced at 100 Mbit/s on a 1 Gbit/s path: about 3 packets in flight.
    let r = reports("cwnd_pkts = 1000, rate_mbit_per_s = 100");
    let steady: Vec<_> = r.iter().filter(|l| l.report.now_us > 5_000).collect();
    assert!(steady.iter().all(|l| !l.report.cwnd_limited), "pacing, not the window, limits the flow");
    let most_in_flight = steady.iter().map(|l| l.report.inflight_bytes).max().unwrap();
    let widest = steady.iter().map(|l| l.report.cwnd_bytes).max().unwrap();
    assert!(most_in_flight < 10 * 1460, "{most_in_flight}");
    assert!(widest <= 10 * 1460, "the datapath's window {widest} B: the restart window, not 1,000 packets");
}
