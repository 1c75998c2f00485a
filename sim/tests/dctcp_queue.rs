//! DCTCP's queue bound (specs/dc.md §7.1 D1): 2 flows at 1 Gbit/s with K = 20 keep the queue
//! near K + N = 22 packets at full throughput, and TCP over drop-tail needs an order of
//! magnitude more. The scenario files are the shipped ones, shortened.

mod common;

use std::path::Path;

use ccp_sim::config::load;

fn shipped(name: &str, overrides: &[&str]) -> ccp_sim::config::Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim").join(name);
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load(&path, &o).unwrap_or_else(|e| panic!("{e}"))
}

const SHORT: &[&str] = &["duration_ms=150", "warmup_ms=30"];

#[test]
fn dctcp_holds_the_queue_at_k_plus_n_with_full_throughput() {
    let (_, r) = common::run(&shipped("dctcp-k20.toml", SHORT));
    let port = &r.ports[0];
    let (k, n) = (20.0, 2.0);
    assert!(port.queue_p50_pkts >= k - 3.0 && port.queue_p50_pkts <= k + n + 5.0, "median queue {} packets", port.queue_p50_pkts);
    assert!(port.queue_p99_pkts <= k + n + 5.0, "p99 queue {} packets", port.queue_p99_pkts);
    assert!(port.utilization >= 0.99, "link utilization {}", port.utilization);
    let goodput: f64 = r.flows.iter().map(|f| f.goodput_gbps).sum();
    assert!(goodput >= 0.94, "aggregate goodput {goodput} Gbit/s of 1");
    for f in &r.flows {
        assert!((f.goodput_gbps - goodput / 2.0).abs() < 0.05 * goodput, "flow {} gets {} of {goodput}", f.id, f.goodput_gbps);
    }
    assert_eq!(r.counters.dropped_buffer, 0);
}

#[test]
fn tcp_droptail_queue_is_an_order_of_magnitude_larger() {
    let (_, dctcp) = common::run(&shipped("dctcp-k20.toml", SHORT));
    let (_, tcp) = common::run(&shipped("tcp-droptail.toml", SHORT));
    let ratio = tcp.ports[0].queue_p50_pkts / dctcp.ports[0].queue_p50_pkts;
    assert!(ratio >= 5.0, "TCP/DCTCP median queue ratio {ratio}");
    assert!(tcp.ports[0].utilization >= 0.99);
}
