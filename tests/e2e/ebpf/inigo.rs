//! Inigo's RTT mode on a real kernel flow: the eBPF datapath counts late RTT samples against the
//! threshold the agent sets (RTT_min·1.17) and reports every W_sub = 10 packets acknowledged; the
//! sub-window response then keeps the bottleneck queue near 0.17·RTT where Cubic, on the same
//! path, fills the drop-tail buffer. 48 Mbit/s, 20 ms RTT, a 400-packet buffer (5 BDP, 100 ms).
//!
//! Margins are wide (2 shared cores); the thesis's experiments are in ccp-lab
//! (`configs/experiments/inigo-*.toml`).

use super::support::*;

const RATE_MBPS: u32 = 48;
const ONE_WAY_DELAY_MS: u32 = 10;
const QUEUE_PKTS: u32 = 400;
const FLOW_S: u32 = 10;

/// Per report of the bulk flow (the one with the most reports): (seconds, queueing delay ms,
/// packets the report covers, the algorithm's state).
fn records(trace: &str, algorithm: &str) -> Vec<(f64, f64, f64, serde_json::Value)> {
    let lines: Vec<serde_json::Value> = trace
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["algorithm"] == algorithm)
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for v in &lines {
        *counts.entry(v["flow"].as_u64().unwrap_or(0)).or_insert(0usize) += 1;
    }
    let Some(flow) = counts.iter().max_by_key(|(_, n)| **n).map(|(f, _)| *f) else { return Vec::new() };
    let mine: Vec<&serde_json::Value> = lines.iter().filter(|v| v["flow"].as_u64() == Some(flow)).collect();
    let t0 = mine.first().and_then(|v| v["t_us"].as_f64()).unwrap_or(0.0);
    let mut min_rtt = f64::INFINITY;
    mine.iter()
        .filter_map(|v| {
            let srtt = v["srtt_us"].as_f64()?;
            min_rtt = min_rtt.min(v["min_rtt_us"].as_f64().unwrap_or(f64::INFINITY));
            let mss = v["mss_bytes"].as_f64().unwrap_or(1448.0).max(1.0);
            let pkts = (v["acked_bytes"].as_f64().unwrap_or(0.0) + v["sacked_bytes"].as_f64().unwrap_or(0.0)) / mss;
            Some(((v["t_us"].as_f64()? - t0) / 1e6, (srtt - min_rtt).max(0.0) / 1e3, pkts, v["state"].clone()))
        })
        .collect()
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// `ccp-agent receiver ARGS`; panics with its output on failure.
fn receiver(args: &[&str]) -> String {
    let out = std::process::Command::new(ccp_integration_tests::bin("ccp-agent")).arg("receiver").args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "ccp-agent receiver {args:?}: {text}");
    text
}

/// One flow on `algorithm` through a fresh router; returns its trace records and goodput.
/// `ecn_receiver`: the sender asks for ECN and the Inigo receiver marks late segments.
fn run(tag: &str, algorithm: &str, params: &str) -> (Vec<(f64, f64, f64, serde_json::Value)>, f64) {
    run_with(tag, algorithm, params, false).0
}

#[allow(clippy::type_complexity)]
fn run_with(
    tag: &str,
    algorithm: &str,
    params: &str,
    ecn_receiver: bool,
) -> ((Vec<(f64, f64, f64, serde_json::Value)>, f64), (u64, u64)) {
    // SCHED_FIFO for the emulator: Inigo's RTT mode calls an RTT late 17 % above the minimum
    // (3.4 ms here), and on a loaded machine the emulator's own lateness reaches that. Two busy
    // loops beside the test: 14.2 Mbit/s without it (CI: 10.8 and 5.7), 45.0 and 46.0 with it.
    let router = Router::start_with(&format!("ccpebpf-{tag}"), ONE_WAY_DELAY_MS, RATE_MBPS, QUEUE_PKTS, &["--realtime"]);
    let rcv_ns = Router::netns_path(&router.receiver_ns);
    let rcv_ns = rcv_ns.to_str().unwrap().to_string();
    if ecn_receiver {
        let ok = in_ns(&router.sender_ns).args(["sh", "-c", "echo 1 > /proc/sys/net/ipv4/tcp_ecn"]).status().unwrap();
        assert!(ok.success());
        receiver(&["enable", "--netns", &rcv_ns, "--dev", "ccp0", "--mode", "mark"]);
    }
    let setup = AgentSetup::new(tag, &format!("[default]\nalgorithm = \"{algorithm}\"\n[algorithms.{algorithm}]\n{params}\n"));
    let trace_path = setup.trace_path();
    let agent = setup.start_with("info", &["--trace-flows", trace_path.to_str().unwrap()]);
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5203);
    let iv = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5203, FLOW_S, &setup.name).finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    let trace = std::fs::read_to_string(&trace_path).expect("the agent's flow trace");
    let mut ce = (0, 0);
    if ecn_receiver {
        let status: serde_json::Value =
            serde_json::from_str(&receiver(&["status", "--json", "--netns", &rcv_ns, "--dev", "ccp0"])).unwrap_or_default();
        receiver(&["disable", "--netns", &rcv_ns, "--dev", "ccp0"]);
        let reported: u64 = trace
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["ce_pkts"].as_u64())
            .sum();
        ce = (status["counters"]["ingress"]["ce_set"].as_u64().unwrap_or(0), reported);
    }
    ((records(&trace, algorithm), mean_between(&iv, 3.0, FLOW_S as f64)), ce)
}

#[test]
fn inigo_rtt_mode_holds_the_queue_that_cubic_fills() {
    if skip_without_root("inigo_rtt_mode_holds_the_queue_that_cubic_fills") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (inigo, inigo_goodput) = run(&tag("inigo"), "inigo", "mode = \"rtt\"");
    let (cubic, cubic_goodput) = run(&tag("cubic"), "cubic", "");
    let settled =
        |r: &[(f64, f64, f64, serde_json::Value)]| -> Vec<f64> { r.iter().filter(|x| x.0 >= 3.0).map(|x| x.1).collect() };
    let (iq, cq) = (settled(&inigo), settled(&cubic));
    assert!(iq.len() > 200 && cq.len() > 50, "{} inigo and {} cubic reports after 3 s", iq.len(), cq.len());
    let (i95, c95) = (quantile(iq.clone(), 0.95), quantile(cq.clone(), 0.95));
    let (i50, c50) = (quantile(iq, 0.5), quantile(cq, 0.5));
    // The packet trigger: a report per ten packets (delayed ACKs make some eleven).
    let covered: Vec<f64> = inigo.iter().filter(|x| x.0 >= 3.0 && x.2 > 0.0).map(|x| x.2).collect();
    let cover50 = quantile(covered, 0.5);
    let reductions = inigo.last().and_then(|x| x.3["reductions"].as_f64()).unwrap_or(0.0);
    eprintln!(
        "inigo: queue p50 {i50:.1} ms p95 {i95:.1} ms, goodput {inigo_goodput:.1} Mbit/s, {cover50:.1} packets per report, \
         {reductions} reductions; cubic: queue p50 {c50:.1} ms p95 {c95:.1} ms, goodput {cubic_goodput:.1} Mbit/s"
    );
    assert!((9.0..=13.0).contains(&cover50), "the datapath reports every W_sub packets: median {cover50}");
    assert!(reductions > 0.0, "late RTTs reached the algorithm");
    // 0.17 × 20 ms ≈ 3.4 ms is where Inigo aims; Cubic fills 100 ms of buffer.
    assert!(c95 > 40.0, "cubic fills the buffer: p95 {c95:.1} ms");
    assert!(i95 < 20.0 && i95 < c95 / 3.0, "inigo's queue p95 {i95:.1} ms against cubic's {c95:.1} ms");
    assert!(inigo_goodput > 0.6 * f64::from(RATE_MBPS), "inigo keeps the link busy: {inigo_goodput:.1} Mbit/s");
}

#[test]
fn inigo_ecn_mode_reacts_to_the_inigo_receivers_marks() {
    if skip_without_root("inigo_ecn_mode_reacts_to_the_inigo_receivers_marks") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // No ECN→RTT fallback: the queue must be held by the receiver's marks alone. (With the
    // default fallback a window with late RTTs but no marks — the receiver's millisecond
    // timestamps are coarser than the sender's RTT samples — switches the flow to RTT mode.)
    let ((recs, goodput), (marked, reported)) = run_with(&tag("inirc"), "inigo", "fallback = \"off\"", true);
    let queue: Vec<f64> = recs.iter().filter(|x| x.0 >= 3.0).map(|x| x.1).collect();
    assert!(queue.len() > 100, "{} reports after 3 s", queue.len());
    let q95 = quantile(queue, 0.95);
    let last = recs.last().map(|x| x.3.clone()).unwrap_or_default();
    eprintln!(
        "inigo ECN + receiver: receiver set CE on {marked} segments, the sender's reports counted {reported} CE packets; \
         queue p95 {q95:.1} ms, goodput {goodput:.1} Mbit/s, state {last}"
    );
    assert!(marked > 0, "the receiver marked late segments");
    assert!(reported > 0, "the sender's reports count the receiver's marks");
    assert_eq!(last["rtt_mode"].as_f64(), Some(0.0), "ECN negotiated: ECN mode throughout");
    assert!(q95 < 20.0, "the receiver's marks hold the queue: p95 {q95:.1} ms");
}
