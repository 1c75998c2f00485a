//! The CNM path on a real flow: ccp-router's QCN congestion point (`--qdisc qcn`, a small Q_eq)
//! samples a kernel TCP flow on the eBPF datapath and sends CNMs into the sender's namespace; the
//! agent listens there (`--cnm-netns`), believes only the router's address, and delivers each CNM
//! to the flow it names, at once, through the flow's controller.
//!
//! Reno (which ignores CNMs) shows the delivery alone; Annulus (line rate 80 Mbit/s over the
//! 50 Mbit/s link) shows the reaction: each CNM is a rate cut the agent must apply to the kernel. The test prints the
//! CNM latencies: router sample → agent read, and read → decision applied.

use std::process::Command;
use std::time::Duration;

use ccp_integration_tests::bin;

use super::support::*;

const PORT: u16 = 5206;
const ROUTER_ADDR: &str = "10.77.0.254";

fn status(setup: &AgentSetup) -> serde_json::Value {
    let out = Command::new(bin("ccp-agent"))
        .args(["ctl", "--json", "--socket"])
        .arg(setup.control_socket())
        .arg("status")
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl status: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn quantile(mut v: Vec<u64>, q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[test]
fn cnms_from_the_routers_congestion_point_reach_the_right_kernel_flow() {
    if skip_without_root("cnms_from_the_routers_congestion_point_reach_the_right_kernel_flow") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run(&tag("cnmreno"), "reno", "");
    // Annulus on a 20 ms flow: a WAN-class flow (kernel-side BBR-like end-to-end loop in the
    // agent) whose near-source loop turns each CNM into a pacing rate the kernel applies.
    run(&tag("cnmann"), "annulus", "[default]\nalgorithm = \"annulus\"\n[algorithms.annulus]\nline_rate_gbps = 0.08\n");
}

/// One flow on `algorithm` through a fresh QCN router, with the agent listening for CNMs in the
/// sender's namespace; checks delivery (and, for a reaction point, the actions) and prints the
/// latencies.
fn run(tag: &str, algorithm: &str, config: &str) {
    let reaction_point = algorithm == "annulus";
    let qcn = ["--qdisc", "qcn", "--qcn-qeq-pkts", "2", "--qcn-sample", "prob:0.05", "--router-addr", ROUTER_ADDR];
    let router = Router::start_with(&format!("ccpebpf-{tag}"), 10, 50, 200, &qcn);
    let setup = AgentSetup::new(tag, config);
    let trace = setup.trace_path();
    // The sender's own address in its namespace: nothing else on the host can reach the socket.
    let agent = setup.start_with(
        "info",
        &[
            "--trace-flows",
            trace.to_str().unwrap(),
            "--cnm-listen",
            "10.77.0.1:7470",
            "--cnm-allow-from",
            ROUTER_ADDR,
            "--cnm-netns",
            &router.sender_ns,
        ],
    );
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, PORT);
    let client = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, PORT, 4, &setup.name);
    std::thread::sleep(Duration::from_millis(3000));
    let mid = status(&setup);
    let report = client.json();
    let local_port = report["start"]["connected"][0]["local_port"].as_u64().expect("iperf3's data connection");
    let mbps = report["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6;
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);

    for l in stopped.log.lines().filter(|l| l.contains("CNM dropped")) {
        eprintln!("agent: {l}");
    }
    let cnm = &mid["cnm"];
    let c = &cnm["counters"];
    let n = |k: &str| c[k].as_u64().unwrap_or(u64::MAX);
    let flows = mid["flows"].as_array().cloned().unwrap_or_default();
    let dst = format!("{}:{PORT}", router.receiver_addr);
    let fed: Vec<&serde_json::Value> = flows.iter().filter(|f| f["cnms"].as_u64().unwrap_or(0) > 0).collect();
    eprintln!("goodput {mbps:.1} Mbit/s\ncnm status 3 s in: {cnm:#}\nflows: {flows:#?}");
    assert!(n("delivered") >= 1, "CNMs reached the agent and a flow: {c}");
    // iperf3's data connection is the flow the router's queue is full of.
    let data = flows
        .iter()
        .find(|f| f["src"] == format!("10.77.0.1:{local_port}").as_str() && f["dst"] == dst.as_str())
        .unwrap_or_else(|| panic!("the data connection 10.77.0.1:{local_port} -> {dst} is on the agent: {flows:#?}"));
    assert!(data["cnms"].as_u64().unwrap_or(0) >= 1, "the data connection got CNMs: {data}");
    for f in &fed {
        // Any other flow fed (iperf3's control connection) is one the router sampled too.
        assert_eq!(f["dst"], dst.as_str(), "{f}");
        assert!(f["src"].as_str().unwrap_or("").starts_with("10.77.0.1:"), "{f}");
    }
    assert_eq!((n("not_allowed"), n("malformed"), n("other_netns"), n("ambiguous_flow")), (0, 0, 0, 0), "{c}");
    assert!(cnm["netns"].as_str().unwrap_or("").ends_with(&router.sender_ns), "{cnm}");

    // The trace: feedback reports on the fed flows' lines, with their latencies.
    let text = std::fs::read_to_string(&trace).expect("the agent's flow trace");
    let lines: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let ids: Vec<u64> = fed.iter().filter_map(|f| f["id"].as_u64()).collect();
    let data_id = data["id"].as_u64().unwrap();
    let fb: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("qcn_fb").is_some()).collect();
    assert!(!fb.is_empty(), "feedback appears in the traced reports");
    let on_data = fb.iter().filter(|l| l["flow"].as_u64() == Some(data_id)).count();
    assert!(on_data * 10 >= fb.len() * 9, "{on_data} of {} traced CNMs on the data connection", fb.len());
    for l in &fb {
        assert_eq!(l["acked_bytes"], 0, "a CNM's report counts nothing: {l}");
        assert!((1..=63).contains(&l["qcn_fb"].as_u64().unwrap_or(0)), "{l}");
    }
    let read_to_action: Vec<u64> = fb.iter().filter_map(|l| l["cnm_read_to_action_us"].as_u64()).collect();
    let sample_to_read: Vec<u64> = fb.iter().filter_map(|l| l["cnm_sample_to_read_us"].as_u64()).collect();
    let acted = n("actions");
    eprintln!(
        "algorithm {}: {} CNMs delivered, {acted} changed the flow's settings; read → applied p50 {} µs p99 {} µs max {} µs; \
         router sample → read p50 {} µs p99 {} µs ({} samples); clock clamps {}",
        algorithm,
        fb.len(),
        quantile(read_to_action.clone(), 0.5),
        quantile(read_to_action.clone(), 0.99),
        read_to_action.iter().max().copied().unwrap_or(0),
        quantile(sample_to_read.clone(), 0.5),
        quantile(sample_to_read.clone(), 0.99),
        sample_to_read.len(),
        mid["counters"]["feedback_clock_clamps"],
    );
    assert!(!sample_to_read.is_empty(), "the router's sample time is on this host's clock");
    if reaction_point {
        assert!(acted >= 1, "the reaction point's cuts reach the kernel: {c}");
        let paced = fb.iter().filter(|l| l["pacing_rate_bytes_per_s"].as_u64().is_some()).count();
        assert!(paced > 0, "the decision on a CNM is a pacing rate");
    }
    let times: Vec<(u64, u64)> = lines.iter().filter_map(|l| Some((l["flow"].as_u64()?, l["t_us"].as_u64()?))).collect();
    for id in &ids {
        let t: Vec<u64> = times.iter().filter(|(f, _)| f == id).map(|(_, t)| *t).collect();
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "flow {id}'s reports never go back in time");
    }
}
