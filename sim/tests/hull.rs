//! HULL's host side (specs/dc.md §3.4, §7.2): with bursty hosts (interrupt coalescing, §8 A31)
//! the pacer smooths the associated flows' bursts, so the phantom queue's real queue stays
//! shorter at no cost in throughput (H5/H6), and packets that wait in a pacer or an interrupt
//! batch are never lost. The scenario is the shipped `hull-pacer.toml`, shortened.

mod common;

use std::path::Path;

use ccp_sim::config::load;

fn shipped(name: &str, overrides: &[&str]) -> ccp_sim::config::Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim").join(name);
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&path, &o).unwrap_or_else(|e| panic!("{e}"))
}

const SHORT: [&str; 2] = ["duration_ms=200", "warmup_ms=50"];

#[test]
fn the_pacer_shortens_the_queue_bursty_hosts_build() {
    let (_, paced) = common::run(&shipped("hull-pacer.toml", &SHORT));
    let unpaced_set = [SHORT[0], SHORT[1], "pacer.enabled=false"];
    let (_, unpaced) = common::run(&shipped("hull-pacer.toml", &unpaced_set));
    let (p, u) = (&paced.ports[0], &unpaced.ports[0]);
    let pacer = paced.pacer.as_ref().expect("the pacer reports");
    assert!(unpaced.pacer.is_none(), "no pacer, no pacer section");
    assert_eq!(pacer.associations, 2, "both long flows got ECN-Echo and were associated");
    assert!(pacer.packets > 10_000, "the long flows went through the bucket: {}", pacer.packets);
    assert!(
        p.queue_delay_p99_us < 0.8 * u.queue_delay_p99_us,
        "p99 queueing delay paced {} µs vs unpaced {} µs",
        p.queue_delay_p99_us,
        u.queue_delay_p99_us
    );
    assert!(p.queue_delay_mean_us < u.queue_delay_mean_us, "mean {} vs {} µs", p.queue_delay_mean_us, u.queue_delay_mean_us);
    assert!(
        p.throughput_gbps >= u.throughput_gbps - 0.01,
        "throughput paced {} vs unpaced {}",
        p.throughput_gbps,
        u.throughput_gbps
    );
    assert!(p.throughput_gbps < 0.95, "the phantom queue leaves its headroom: {}", p.throughput_gbps);
}

#[test]
fn packets_in_pacers_and_interrupt_batches_are_never_lost() {
    // Finite flows of 3 MB each, from three senders, so the pacers fill and the run drains.
    let text = r#"
name = "hull-drain"
duration_ms = 400

[topology]
kind = "star"
hosts = 4
link_gbps = 1.0
link_delay_us = 25.0

[switch.qdisc]
kind = "phantom"
drain_fraction = 0.9
mark_threshold_bytes = 1000.0

[transport]
rx_coalesce_us = 100.0

[pacer]
fifo_bytes = 6000
associate_probability = 1.0

[cc]
algorithm = "dctcp"
reporting = "per_ack"

[[workload.flows]]
src = 0
dst = 3
bytes = 3_000_000

[[workload.flows]]
src = 1
dst = 3
bytes = 3_000_000

[[workload.flows]]
src = 2
dst = 3
bytes = 3_000_000
"#;
    let (sim, r) = common::run(&common::scenario(text));
    assert_eq!(r.flows_completed, 3, "every flow finished");
    assert_eq!(sim.packets_alive(), 0);
    assert_eq!(sim.host_nic_backlog(), 0);
    let c = &r.counters;
    assert_eq!(c.injected, c.delivered + c.dropped_buffer + c.dropped_aqm);
    let pacer = r.pacer.expect("pacer");
    assert!(pacer.peak_backlog_bytes <= 6000 && pacer.peak_backlog_bytes >= 3000, "peak {}", pacer.peak_backlog_bytes);
}

#[test]
fn bad_pacer_settings_are_named() {
    let base = "name = \"x\"\nduration_ms = 1\n[topology]\nkind = \"star\"\nhosts = 2\nlink_gbps = 1.0\nlink_delay_us = 1.0\n";
    for (table, key) in [("eta = 1.5", "pacer.eta"), ("fifo_bytes = 100", "pacer.fifo_bytes"), ("tick_us = 0.0", "pacer.tick_us")]
    {
        let text = format!("{base}[pacer]\n{table}\n");
        let err = ccp_sim::config::load_str(Path::new("x.toml"), &text, &[]).map(|_| ()).expect_err("rejected").to_string();
        assert!(err.contains(key), "{table}: {err}");
    }
    let text = format!("{base}[transport]\nrx_coalesce_us = -1.0\n");
    let err = ccp_sim::config::load_str(Path::new("x.toml"), &text, &[]).map(|_| ()).expect_err("rejected").to_string();
    assert!(err.contains("transport.rx_coalesce_us"), "{err}");

    // The testbed's bucket (3 KB every 16 µs) on a 10 Gbit/s NIC could never pass line rate.
    let fast = base.replace("link_gbps = 1.0", "link_gbps = 10.0") + "[pacer]\n";
    let loaded = ccp_sim::config::load_str(Path::new("x.toml"), &fast, &[]).unwrap_or_else(|e| panic!("{e}"));
    let err = ccp_sim::Sim::new(&loaded).map(|_| ()).expect_err("a pacer that caps flows below line rate");
    assert!(err.contains("pacer.tick_us"), "{err}");
    let scaled = fast + "tick_us = 1.6\n";
    let loaded = ccp_sim::config::load_str(Path::new("x.toml"), &scaled, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(ccp_sim::Sim::new(&loaded).is_ok(), "ticks scaled to the line rate");
}

#[test]
fn the_dynamic_workload_sends_every_response_to_the_client() {
    let set = ["duration_ms=1500", "warmup_ms=50", "workload.random.stop_ms=1200.0", "workload.random.load=0.6"];
    let (_, r) = common::run(&shipped("hull-dynamic.toml", &set));
    assert!(r.flows.len() > 20, "{} flows in 1.2 s at 60 % load", r.flows.len());
    assert!(r.flows.iter().all(|f| f.dst == 4 && f.src != 4), "every flow into host 4 from another host");
    let sources: std::collections::BTreeSet<u32> = r.flows.iter().map(|f| f.src).collect();
    assert!(sources.len() >= 6, "responses come from across the servers: {sources:?}");
    let small = r.flows.iter().filter(|f| f.bytes == Some(1000)).count();
    let large = r.flows.iter().filter(|f| f.bytes == Some(10_000_000)).count();
    assert_eq!(small + large, r.flows.len(), "1 KB and 10 MB only");
    assert!(small > 2 * large, "80 % of requests are for 1 KB: {small} vs {large}");
    let client = r.ports.iter().find(|p| p.name == "sw0->h4").expect("the client's port is monitored");
    assert!(client.throughput_gbps > 0.2, "the client's link carries the load: {} Gbit/s", client.throughput_gbps);

    let rejected = |sets: &[&str]| {
        let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/hull-dynamic.toml");
        load(&path, &o).map(|_| ()).expect_err("rejected").to_string()
    };
    let e = rejected(&["workload.random.receiver=10"]);
    assert!(e.contains("workload.random.receiver") && e.contains("below 10"), "{e}");
}
