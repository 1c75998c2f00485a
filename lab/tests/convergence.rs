//! The Inigo thesis's metrics on a real run (specs/inigo.md §9.2): a 2-flow staggered
//! convergence with kernel Cubic on a small link (24 Mbit/s, 20 ms, 60 packets; flow 0 for
//! 0–6 s, flow 1 for 2–4 s), 6 s of traffic. run.json must carry the per-ACK SRTT histogram (from
//! the tcp_probe BPF program) with a plausible p99, the latency index, Jain's index over the ideal
//! shares derived from the schedule, the goodput index, %re-TX and %drop, and the experiment the
//! per-scheme index table and queue ECDF.

mod common;

use ccp_lab::config;
use ccp_lab::run::{run_experiment, RunOptions};

const CONVERGENCE: &str = r#"
duration_s = 6
sample_interval_ms = 100
[network]
rtt_ms = 20
buffer_pkts = 60
[[links]]
kind = "fixed"
name = "fixed-24"
rate_mbps = 24
[[schemes]]
name = "cubic"
cc = "kernel:cubic"
[[flows]]
start_s = 0
stop_s = 6
[[flows]]
start_s = 2
stop_s = 4
"#;

#[test]
fn staggered_convergence_records_the_thesis_metrics() {
    if !common::can_run("staggered_convergence_records_the_thesis_metrics") {
        return;
    }
    let dir = common::scratch("convergence");
    let file = dir.join("convergence.toml");
    std::fs::write(&file, CONVERGENCE).unwrap();
    let loaded = config::load(&file).unwrap();
    let out = dir.join("out");
    let o = RunOptions { out: out.clone(), quiet: true, ..RunOptions::default() };
    let outcome = run_experiment(&loaded, &o).unwrap();
    let r = &outcome.records[0];
    assert!(r.ok, "{:?}", r.error);
    let run = out.join("runs/fixed-24/solo/cubic/rep0");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));

    // Per-ACK SRTT: thousands of ACKs (24 Mbit/s ≈ 2000 packets/s, delayed ACKs), none of other
    // sockets, p99 at least the propagation RTT and at most RTT + the 60-packet buffer (30 ms) +
    // slack for the delayed ACK and the emulator.
    let srtt = &j["srtt"];
    assert!(srtt["samples"].as_u64().unwrap() > 2000, "{srtt}");
    assert_eq!(srtt["skipped_port"], 0, "{srtt}");
    let p99 = num(&srtt["p99_ms"]);
    assert!((20.0..=100.0).contains(&p99), "SRTT p99 {p99} ms: {srtt}");
    assert!(num(&srtt["p50_ms"]) >= 20.0 && num(&srtt["p50_ms"]) <= p99, "{srtt}");
    let hist = std::fs::read_to_string(run.join("srtt-histogram.csv")).unwrap();
    let counted: u64 = hist.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(counted, srtt["samples"].as_u64().unwrap());

    // The indices: ideal shares from the schedule (20 and 4 Mbit/s of 24), the goodput index
    // below the payload ceiling 1448/1500, the latency index from the SRTT p99.
    let x = &j["indices"];
    let ideal: Vec<f64> = x["ideal_mbps"].as_array().unwrap().iter().map(num).collect();
    assert!((ideal[0] - 20.0).abs() < 1e-9 && (ideal[1] - 4.0).abs() < 1e-9, "{ideal:?}");
    let jfi = num(&x["jain_ideal"]);
    assert!(jfi > 0.5 && jfi <= 1.0 + 1e-12, "{x}");
    let gi = num(&x["goodput_index"]);
    assert!(gi > 0.6 && gi < 1448.0 / 1500.0 + 1e-3, "{x}");
    let li = num(&x["latency_index"]);
    assert!((li - 20.0 / p99).abs() < 1e-9 && li <= 1.0, "{x}");
    for k in ["retx_pct", "drop_pct"] {
        let v = num(&x[k]);
        assert!((0.0..50.0).contains(&v), "{k} = {v}: {x}");
    }
    assert!(x["segs_out"].as_u64().unwrap() > 5000 && x["bottleneck_arrivals"].as_u64().unwrap() > 5000, "{x}");
    // Drops at the bottleneck are losses the senders repair.
    if x["bottleneck_drops"].as_u64().unwrap() > 10 {
        assert!(x["retrans_segs"].as_u64().unwrap() > 0, "{x}");
    }

    // The queue every 10 ms over the 6 s, within the buffer.
    let q = &j["queue_10ms"];
    assert_eq!(q["samples"], 600, "{q}");
    assert!(q["max_pkts"].as_u64().unwrap() <= 60, "{q}");

    // The per-scheme outputs.
    let indices = std::fs::read_to_string(out.join("indices.csv")).unwrap();
    assert!(indices.starts_with("link,scenario,scheme,runs_ok") && indices.lines().count() == 2, "{indices}");
    let ecdf = std::fs::read_to_string(out.join("queue-ecdf.csv")).unwrap();
    assert!(ecdf.lines().last().unwrap().ends_with(",1.000000"), "{ecdf}");
    if std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        assert!(out.join("plots/indices-fixed-24.png").is_file());
        assert!(out.join("plots/queue-ecdf-fixed-24.png").is_file());
    }
    assert!(common::namespaces_with(&r.namespace_prefix).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
