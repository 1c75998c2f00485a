//! The Annulus testbed's plumbing on a short run (configs/experiments/annulus-testbed.toml in
//! small): a 20 ms-RTT backlogged flow and a burst of two 1 ms-RTT flows of 300 KB through a
//! 20 Mbit/s QCN congestion point, every flow on the agent's `annulus`. The agent must start
//! after the namespaces (its arguments name the sender's namespace and the router's address),
//! receive the router's CNMs there and deliver them to the flows, WAN class included; the burst's
//! flows must complete and the run must record the burst, the queue split by delay class and the
//! CNMs. Nothing here judges Annulus's performance (the experiment does): only that the pieces
//! are connected, so the bounds are loose.

mod common;

use ccp_lab::config;
use ccp_lab::run::{run_experiment, RunOptions};

const ANNULUS: &str = r#"
duration_s = 6
warmup_s = 1
sample_interval_ms = 100
[network]
rtt_ms = 1
buffer_pkts = 60
class_delays = ["dport=5201:down=10,up=10"]
[[links]]
kind = "fixed"
name = "fixed-20"
rate_mbps = 20
[[flows]]
count = 1
[[flows]]
count = 2
start_s = 2
bytes = 300_000
[router]
realtime = true
[[schemes]]
name = "annulus"
cc = "agent:annulus"
params = { near_source = true, wan_rtt_threshold_us = 8000, line_rate_gbps = 0.08 }
qdisc = { kind = "qcn", qeq_pkts = 5, w = 2, sample = "bytes:15000", quantization = "standard", ecn_k_pkts = 5 }
sender_sysctls = { "net.ipv4.tcp_ecn" = 1 }
receiver_ce_echo = true
agent_args = ["--cnm-listen", "{sender_addr}:7470", "--cnm-allow-from", "{router_addr}", "--cnm-netns", "{sender_ns}"]
"#;

#[test]
fn cnms_reach_the_annulus_flows_and_the_burst_is_recorded() {
    if !common::can_run("cnms_reach_the_annulus_flows_and_the_burst_is_recorded") {
        return;
    }
    let agent = ccp_lab::agent::default_binary();
    assert!(agent.is_file(), "{} is missing: `cargo build --workspace` builds it before the tests", agent.display());
    let dir = common::scratch("annulus");
    let file = dir.join("annulus.toml");
    std::fs::write(&file, ANNULUS).unwrap();
    let loaded = config::load(&file).unwrap();
    let out = dir.join("out");
    let o = RunOptions { out: out.clone(), quiet: true, no_plots: true, agent: Some(agent), ..RunOptions::default() };
    let outcome = run_experiment(&loaded, &o).unwrap();
    let r = &outcome.records[0];
    assert!(r.ok, "{:?}", r.error);
    assert!(common::namespaces_with(&r.namespace_prefix).is_empty(), "namespaces of {} left", r.namespace_prefix);

    let c = r.cnm.as_ref().expect("the router sent CNMs");
    eprintln!(
        "CNMs: router {} delivered {} (WAN {:?}), qFb mean {:?}, sample → read {:?} µs, read → applied {:?} µs",
        c.router_sent, c.delivered, c.delivered_wan, c.qfb_mean, c.sample_to_read_us, c.read_to_action_us
    );
    assert!(c.router_sent > 0, "{c:?}");
    // Every CNM names a flow of the agent's (those in flight at the end may be lost).
    assert!(c.delivered > 0 && c.delivered as f64 >= 0.9 * c.router_sent as f64, "{c:?}");
    assert!(c.delivered_wan.is_some_and(|w| w > 0), "the 20 ms flow is classed WAN and gets CNMs: {c:?}");
    assert!(c.sample_to_read_us.is_some() && c.read_to_action_us.is_some(), "{c:?}");

    let b = r.bursts.as_ref().expect("a burst of sized flows");
    assert_eq!(b.bursts.len(), 1, "{b:?}");
    let burst = &b.bursts[0];
    assert_eq!((burst.flows, burst.completed, burst.bytes), (2, 2, 600_000), "{burst:?}");
    let fct = burst.fct_max_s.expect("the burst completed");
    assert!(fct > 0.0 && fct < 3.5, "{burst:?}");
    assert_eq!(burst.during.start_s, 2.0);
    assert!(b.between.as_ref().is_some_and(|p| p.seconds > 1.0), "{b:?}");
    for f in r.flows.iter().skip(1) {
        assert_eq!(f.size_bytes, Some(300_000));
        assert!(f.completion_s.is_some(), "{f:?}");
    }
    // The queue split by propagation delay: the default (1 ms) and the WAN (20 ms) class.
    let w = r.window.as_ref().expect("class delays give the per-class queue");
    let classes: Vec<(&str, f64)> = w.queue_by_class.iter().map(|q| (q.class.as_str(), q.delay_ms)).collect();
    assert_eq!(classes, [("default", 0.5), ("dport=5201", 10.0)]);
    let held: f64 = w.queue_by_class.iter().map(|q| q.mean_pkts).sum();
    assert!((held - w.queue_mean_pkts.unwrap_or(0.0)).abs() < 0.5, "{w:?}");
    assert!(out.join("bursts.csv").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}
