//! Per-flow fair queueing (`switch.qdisc.kind = "fq"`, the switch half of the BFC thesis's
//! Ideal-FQ oracle) end to end: two long flows into one 40 Gbit/s port, one holding ten times the
//! other's window. A shared FIFO gives each about its window's share of the queue, hence of the
//! link; per-flow queues give each half.

mod common;

/// Two constant-window flows, 1,000 and 100 packets, sharing sw0->h2 (base RTT 8 µs, a BDP of
/// about 27 packets: both windows exceed it, so both can fill their share); their goodputs.
fn two_windows(qdisc: &str) -> (f64, f64) {
    let text = format!(
        r#"
seed = 1
duration_ms = 20
warmup_ms = 5

[topology]
kind = "star"
hosts = 3
link_gbps = 40.0
link_delay_us = 2.0

[switch]
buffer_bytes = 100_000_000

[switch.qdisc]
{qdisc}

[cc]
algorithm = "constant"
params = {{ cwnd_pkts = 1000 }}

[[workload.flows]]
src = 0
dst = 2
label = "big"

[[workload.flows]]
src = 1
dst = 2
label = "small"
cc = {{ algorithm = "constant", params = {{ cwnd_pkts = 100 }} }}
"#
    );
    let r = common::run(&common::scenario(&text)).1;
    assert_eq!(r.counters.dropped_buffer, 0, "the buffer is never full");
    let g = |label: &str| r.flows.iter().find(|f| f.label.as_deref() == Some(label)).expect(label).goodput_gbps;
    (g("big"), g("small"))
}

#[test]
fn per_flow_queues_split_the_link_evenly_where_a_fifo_follows_the_windows() {
    let (big, small) = two_windows("kind = \"droptail\"");
    assert!(big > 6.0 * small, "a FIFO shares by window (10:1): {big:.2} vs {small:.2} Gbit/s");
    let (big, small) = two_windows("kind = \"fq\"");
    assert!((big / small - 1.0).abs() < 0.05, "per-flow DRR: {big:.2} vs {small:.2} Gbit/s");
    assert!(big + small > 0.95 * 40.0, "work-conserving: {:.2} Gbit/s", big + small);
}
