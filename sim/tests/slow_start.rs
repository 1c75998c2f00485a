//! Cubic's slow-start exit with and without HyStart++ (RFC 9406) on paths with room for a
//! queue: conservative slow start after the RTT rises should cost far fewer drops than doubling
//! into the buffer's limit.

mod common;

use std::path::Path;

use ccp_sim::config::load;

/// configs/sim/cubic-slow-start.toml at `rate_gbps`, `rtt_ms` base RTT and a buffer of
/// `buffer_bdp` bandwidth-delay products: (buffer drops, retransmissions, utilisation).
fn slow_start(rate_gbps: f64, rtt_ms: f64, buffer_bdp: f64, hystart: bool) -> (u64, u64, f64) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/cubic-slow-start.toml");
    let bdp_bytes = rate_gbps * 1e9 / 8.0 * rtt_ms / 1e3;
    let host_delay_us = 5.0;
    let overrides = vec![
        format!("topology.bottleneck_gbps={rate_gbps}"),
        format!("topology.bottleneck_delay_us={}", rtt_ms * 1e3 / 2.0 - 2.0 * host_delay_us),
        format!("switch.port_buffer_bytes={}", (buffer_bdp * bdp_bytes) as u64),
        format!("switch.buffer_bytes={}", (4.0 * buffer_bdp * bdp_bytes) as u64),
        format!("cc.params={{ hystart = {hystart} }}"),
    ];
    let loaded = load(&path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let (_, r) = common::run(&loaded);
    let goodput: f64 = r.flows.iter().map(|f| f.goodput_gbps).sum();
    (r.counters.dropped_buffer, r.counters.retransmits, goodput / rate_gbps)
}

#[test]
fn hystart_leaves_slow_start_with_a_fraction_of_standard_slow_starts_drops() {
    // Three paths (rate, RTT, buffer): the claim must not hang on one.
    for (rate_gbps, rtt_ms, buffer_bdp) in [(0.1, 20.0, 2.0), (0.05, 60.0, 1.0), (0.2, 10.0, 4.0)] {
        let (drops_std, retx_std, util_std) = slow_start(rate_gbps, rtt_ms, buffer_bdp, false);
        let (drops_hy, retx_hy, util_hy) = slow_start(rate_gbps, rtt_ms, buffer_bdp, true);
        eprintln!(
            "{rate_gbps} Gbit/s, {rtt_ms} ms, {buffer_bdp} BDP: standard slow start {drops_std} drops / {retx_std} retransmissions / \
             {util_std:.2} utilisation; HyStart++ {drops_hy} / {retx_hy} / {util_hy:.2}"
        );
        assert!(drops_std > 50, "standard slow start overflows the buffer ({drops_std} drops): nothing to compare");
        assert!(drops_hy * 3 <= drops_std, "HyStart++ {drops_hy} drops vs standard {drops_std}");
        assert!(util_hy > 0.8 * util_std, "HyStart++ gave up throughput: {util_hy:.2} vs {util_std:.2}");
    }
}
