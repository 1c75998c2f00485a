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

/// The error loading shipped scenario `name` with `overrides` gives.
fn rejected(name: &str, overrides: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim").join(name);
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&path, &o).map(|_| ()).expect_err("rejected").to_string()
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

    let e = rejected("hull-dynamic.toml", &["workload.random.receiver=10"]);
    assert!(e.contains("workload.random.receiver") && e.contains("below 10"), "{e}");
}

/// The 1 KB flows' FCTs (µs) of a run that finished.
fn small_fcts(r: &ccp_sim::stats::Results) -> Vec<f64> {
    let mut v: Vec<f64> = r.flows.iter().filter(|f| f.bytes == Some(1000)).filter_map(|f| f.fct_us).collect();
    v.sort_by(f64::total_cmp);
    v
}

const QOS_SHORT: [&str; 4] =
    ["duration_ms=3000", "warmup_ms=50", "workload.random[0].stop_ms=2500.0", "workload.random[1].stop_ms=2500.0"];

#[test]
fn strict_priority_lets_the_1kb_responses_skip_the_10mb_queue() {
    let (_, qos) = common::run(&shipped("hull-qos.toml", &QOS_SHORT));
    let s = &qos.samples;
    let (low, high) = (&s.queue_bytes_by_queue[0][0], &s.queue_bytes_by_queue[0][1]);
    assert_eq!(s.queue_bytes_by_queue[0].len(), 2, "one sample column per queue");
    let low_peak = low.iter().max().copied().unwrap_or(0);
    let high_peak = high.iter().max().copied().unwrap_or(0);
    assert!(low_peak > 200_000, "the 10 MB responses fill the low-priority queue: peak {low_peak} B");
    assert!(high_peak <= 3_000, "the 1 KB responses never queue more than a couple of packets: peak {high_peak} B");
    for (k, &total) in s.queue_bytes[0].iter().enumerate() {
        assert_eq!(total, low[k] + high[k], "sample {k}: the port's bytes are its queues' bytes");
    }

    // The same workload through one FIFO: the 1 KB responses wait behind the 10 MB ones.
    let mut fifo_set = QOS_SHORT.to_vec();
    fifo_set.extend(["switch.scheduler=\"round_robin\"", "switch.queues_per_port=1", "workload.random[0].priority=0"]);
    let (_, fifo) = common::run(&shipped("hull-qos.toml", &fifo_set));
    let (a, b) = (small_fcts(&qos), small_fcts(&fifo));
    assert!(a.len() > 30 && a.len() == b.len(), "{} and {} 1 KB flows finished", a.len(), b.len());
    let p90 = |v: &[f64]| v[v.len() * 9 / 10];
    assert!(p90(&a) * 3.0 < p90(&b), "1 KB FCT p90 {:.0} µs at high priority vs {:.0} µs in one FIFO", p90(&a), p90(&b));
}

#[test]
fn a_queue_buffer_caps_each_priority_on_its_own() {
    let mut set = QOS_SHORT.to_vec();
    set.push("switch.queue_buffer_bytes=15000");
    let (_, r) = common::run(&shipped("hull-qos.toml", &set));
    let by_queue = &r.samples.queue_bytes_by_queue[0];
    assert!(by_queue.iter().flatten().all(|&b| b <= 15_000), "no queue holds more than its 15,000 B");
    assert!(by_queue[0].iter().any(|&b| b > 10_000), "the low-priority queue does reach its cap");
    assert!(r.counters.dropped_buffer > 0, "and TCP overflows it");
    assert!(r.flows.iter().all(|f| f.fct_us.is_some()), "every flow still finishes");
}

#[test]
fn bad_priority_settings_are_named() {
    let rejected = |sets: &[&str]| rejected("hull-qos.toml", sets);
    let e = rejected(&["switch.queues_per_port=1"]);
    assert!(e.contains("switch.scheduler") && e.contains("≥ 2"), "{e}");
    let e = rejected(&["workload.random[0].priority=2"]);
    assert!(e.contains("workload.random[0].priority") && e.contains("0 to 1"), "{e}");
    let e = rejected(&["switch.scheduler=\"round_robin\""]);
    assert!(e.contains("workload.random[0].priority") && e.contains("strict_priority"), "{e}");
    let e = rejected(&["switch.queue_buffer_bytes=1000"]);
    assert!(e.contains("switch.queue_buffer_bytes") && e.contains("full packet"), "{e}");
    let e = rejected(&["switch.scheduler=\"weighted\""]);
    assert!(e.contains("switch.scheduler"), "{e}");
    let e = rejected(&["switch.bfc={}", "switch.queues_per_port=32"]);
    assert!(e.contains("switch.scheduler") && e.contains("BFC"), "{e}");
}
