//! A DC/WAN mix on one bottleneck: per-sender access delays on the dumbbell
//! (`topology.host_delays_us`) give flows their own RTT, and a per-flow `cc` override runs
//! another algorithm on some flows; labels and algorithms reach the per-flow output.

mod common;

use ccp_sim::Results;

/// Two senders into one receiver through a 1 Gbit/s bottleneck with DCTCP marking (K = 20).
/// `{delays}`, `{flow0}` and `{flow1}` are filled in per test.
const MIX: &str = r#"
duration_ms = 120
warmup_ms = 30

[topology]
kind = "dumbbell"
senders = 2
receivers = 1
host_gbps = 10.0
host_delay_us = 2.0
{delays}
bottleneck_gbps = 1.0
bottleneck_delay_us = 10.0

[switch]
admission = "static"
port_buffer_bytes = 400_000

[switch.qdisc]
kind = "dctcp"
k_pkts = 20

[cc]
algorithm = "reno"

[[workload.flows]]
src = 0
dst = 2
label = "dc"
{flow0}

[[workload.flows]]
src = 1
dst = 2
label = "wan"
{flow1}

[output]
sample_interval_us = 100
"#;

fn mix(delays: &str, flow0: &str, flow1: &str) -> Results {
    common::run(&common::scenario(&MIX.replace("{delays}", delays).replace("{flow0}", flow0).replace("{flow1}", flow1))).1
}

/// Everything a run produced that depends on the simulation itself.
fn fingerprint(r: &Results) -> String {
    let flows: Vec<String> = r
        .flows
        .iter()
        .map(|f| format!("{}:{:?}:{}:{}:{:?}", f.id, f.fct_us, f.retransmits, f.goodput_gbps, f.min_rtt_us))
        .collect();
    format!("{:?}|{}|{:?}|{}", r.counters, flows.join(","), r.samples.queue_bytes, r.events)
}

#[test]
fn senders_with_their_own_delay_see_their_own_rtt() {
    // The DC flow starts 1 ms after the WAN flow, when the WAN flow's first window has drained
    // and its second has not yet arrived: each flow's first packet finds an empty queue.
    let r = mix("host_delays_us = [2.0, 400.0]", "start_us = 1000.0", "");
    // Propagation: 2 × (sender link + bottleneck + receiver link).
    let prop_us = [2.0 * (2.0 + 10.0 + 2.0), 2.0 * (400.0 + 10.0 + 2.0)];
    for (f, prop) in r.flows.iter().zip(prop_us) {
        let min = f.min_rtt_us.unwrap();
        // Above it: serialization only (1500 B: 12 µs at 1 Gbit/s, 1.2 µs at 10; the ACKs less).
        eprintln!(
            "flow {} ({:?}): propagation {prop} µs, min RTT {min:.1} µs, mean {:.1} µs",
            f.id,
            f.label,
            f.mean_rtt_us.unwrap()
        );
        assert!(min >= prop + 14.0 && min <= prop + 20.0, "flow {}: min RTT {min} µs for {prop} µs of propagation", f.id);
        assert!(f.mean_rtt_us.unwrap() >= min);
        assert!(f.ideal_us == 0.0 || f.ideal_us >= prop / 2.0);
    }
    assert_eq!(r.flows.iter().map(|f| f.label.as_deref()).collect::<Vec<_>>(), [Some("dc"), Some("wan")]);
    assert_eq!(r.flows.iter().map(|f| f.algorithm).collect::<Vec<_>>(), ["reno", "reno"]);

    // The same delay for everyone is the default topology, result for result.
    let same = mix("host_delays_us = [2.0, 2.0]", "", "");
    let default = mix("", "", "");
    assert_eq!(fingerprint(&same), fingerprint(&default));
    assert_ne!(fingerprint(&r), fingerprint(&default));
}

#[test]
fn a_per_flow_cc_override_runs_another_algorithm() {
    // Reno halves on every ECN-marked window, DCTCP cuts by α/2: on a marking queue the DCTCP
    // flow takes most of the link. Without the override both flows run Reno and share it.
    let both_reno = mix("", "", "");
    let mixed = mix("", "", "cc = { algorithm = \"dctcp\", params = { g = 0.0625 } }");
    let share = |r: &Results| {
        let g: Vec<f64> = r.flows.iter().map(|f| f.goodput_gbps).collect();
        eprintln!("{:?}: goodput {g:?} Gbit/s", r.flows.iter().map(|f| f.algorithm).collect::<Vec<_>>());
        g[1] / (g[0] + g[1])
    };
    assert_eq!(mixed.flows.iter().map(|f| f.algorithm).collect::<Vec<_>>(), ["reno", "dctcp"]);
    assert_eq!(mixed.algorithm, "reno", "the scenario's algorithm is still [cc]'s");
    let (fair, dctcp_share) = (share(&both_reno), share(&mixed));
    assert!((fair - 0.5).abs() < 0.1, "two Reno flows split {fair:.2} / {:.2}", 1.0 - fair);
    assert!(dctcp_share > 0.65, "the DCTCP flow got only {dctcp_share:.2} of the link against Reno");
    // The run is still deterministic.
    let again = mix("", "", "cc = { algorithm = \"dctcp\", params = { g = 0.0625 } }");
    assert_eq!(fingerprint(&mixed), fingerprint(&again));
}

#[test]
fn flows_csv_carries_rtt_algorithm_and_label() {
    let r = mix("host_delays_us = [2.0, 400.0]", "", "cc = { algorithm = \"dctcp\" }");
    let dir = std::env::temp_dir().join(format!("ccp-sim-per-flow-{}", std::process::id()));
    ccp_sim::output::write_data(&r, &dir).unwrap();
    let csv = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[header.len() - 4..], ["min_rtt_us", "mean_rtt_us", "algorithm", "label"]);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2);
    for (row, (alg, label)) in rows.iter().zip([("reno", "dc"), ("dctcp", "wan")]) {
        assert_eq!(row.len(), header.len());
        assert_eq!((row[row.len() - 2], row[row.len() - 1]), (alg, label));
    }
    let min_rtt: Vec<f64> = rows.iter().map(|r| r[header.len() - 4].parse().unwrap()).collect();
    assert!(min_rtt[1] > min_rtt[0] + 700.0, "{min_rtt:?}");
}

/// `transfers`: each flow of an entry sends its transfers back to back, each a flow of its own
/// that opens when the previous one's last byte is acknowledged (so after the receiver had it).
#[test]
fn back_to_back_transfers_follow_each_other() {
    let r = mix("", "bytes = 200_000\ncount = 2\ntransfers = 3", "bytes = 100_000\ntransfers = 4");
    let of = |label: &str| r.flows.iter().filter(|f| f.label.as_deref() == Some(label)).collect::<Vec<_>>();
    let (dc, wan) = (of("dc"), of("wan"));
    assert_eq!((dc.len(), wan.len()), (6, 4), "2 flows × 3 transfers and 1 × 4");
    assert!(r.flows.iter().all(|f| f.finish_us.is_some()), "every transfer completed");
    // Sender 1's transfers form one chain: each starts after the one before it finished, at once.
    for w in wan.windows(2) {
        let (prev_finish, next_start) = (w[0].finish_us.unwrap(), w[1].start_us);
        assert!(next_start >= prev_finish, "a transfer started at {next_start} µs before the previous finished at {prev_finish}");
        assert!(next_start - prev_finish < 1_000.0, "the next transfer waited {} µs", next_start - prev_finish);
    }
    // Sender 0 runs two chains at once: two transfers start at 0, the others later.
    assert_eq!(dc.iter().filter(|f| f.start_us == 0.0).count(), 2);
    assert!(dc.iter().all(|f| f.bytes == Some(200_000)) && wan.iter().all(|f| f.bytes == Some(100_000)));
    // A run that stops once every flow is done waits for the transfers not opened yet: the last
    // byte of one reaches the receiver (it completes) before its ACK opens the next.
    let text =
        MIX.replace("{delays}", "").replace("{flow0}", "bytes = 200_000\ntransfers = 3").replace("{flow1}", "bytes = 1000");
    let text = text.replace("duration_ms = 120", "duration_ms = 1000\nstop_when_done = true");
    let r = common::run(&common::scenario(&text)).1;
    assert_eq!(r.flows.len(), 4, "three transfers and the other flow");
    assert!(r.flows.iter().all(|f| f.finish_us.is_some()));
}

#[test]
fn back_to_back_transfers_are_validated() {
    let err = |flow1: &str| {
        let text = MIX.replace("{delays}", "").replace("{flow0}", "bytes = 1000").replace("{flow1}", flow1);
        ccp_sim::config::load_str(std::path::Path::new("t.toml"), &text, &[]).unwrap_err().to_string()
    };
    assert!(err("transfers = 3").contains("back-to-back transfers need `bytes`"), "{}", err("transfers = 3"));
    assert!(err("bytes = 1000\ntransfers = 0").contains("`workload.flows[1].transfers`: must be 1 to 1000000, got 0"));
}
