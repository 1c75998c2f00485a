//! Learned policies (`onnx:model.onnx`, issue 36) steering real kernel TCP flows through the link
//! emulator (20 ms, 50 Mbit/s, 100 packets): a policy decides every report of a flow, and a
//! policy past its inference deadline leaves the flow on the classic algorithm its manifest names
//! while the agent keeps answering.
//!
//! The test models are ccp-learned's (algorithms/learned/tests/models: random weights, not a
//! trained policy); this debug build runs them far slower than a release agent does, so the
//! manifests here are copies with a budget set from the model's cost measured in this process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::support::*;

const RATE_MBPS: f64 = 50.0;

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/learned/tests/models")
}

/// A copy of test model `name` in `dir` with its manifest's budget set to `budget_us`.
fn with_budget(dir: &Path, name: &str, budget_us: u64) -> PathBuf {
    let model = dir.join(format!("{name}.onnx"));
    std::fs::copy(models().join(format!("{name}.onnx")), &model).unwrap();
    let manifest = std::fs::read_to_string(models().join(format!("{name}.toml"))).unwrap();
    let manifest = manifest.replace("budget_us = 200", &format!("budget_us = {budget_us}"));
    assert!(manifest.contains(&format!("budget_us = {budget_us}")));
    std::fs::write(dir.join(format!("{name}.toml")), manifest).unwrap();
    model
}

/// The median cost of one inference of test model `name` in this (debug) build, µs.
fn cost_us(name: &str) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let model = with_budget(dir.path(), name, 1_000_000);
    ccp_learned::load_policy(&model).unwrap().load_cost_us
}

/// Agent-readable: the agent checks owner and mode of the files (and their directory) it loads.
fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn a_learned_policy_decides_every_report_of_a_kernel_flow() {
    if skip_without_root("a_learned_policy_decides_every_report_of_a_kernel_flow") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("onnx");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS as u32, 100);
    let dir = private_dir();
    // A budget no debug-build hiccup reaches: this test is about the policy steering, the
    // deadline has its own test below.
    let model = with_budget(dir.path(), "mlp", 100_000);
    let name = format!("onnx:{}", model.canonicalize().unwrap().display());
    let setup = AgentSetup::new(&tag, &format!("[default]\nalgorithm = \"{name}\"\n"));
    let trace = setup.trace_path();
    let agent = setup.start_with("info", &["--trace-flows", trace.to_str().unwrap()]);
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5201);
    let iv = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5201, 5, &setup.name).finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    assert!(!stopped.log.contains("fault contained"), "no fault:\n{}", stopped.log);

    let lines = trace_lines(&trace);
    let flow = data_flow(&lines);
    assert!(flow.len() >= 50, "{} reports", flow.len());
    assert!(flow.iter().all(|l| l["algorithm"] == name.as_str()), "every report went to the policy");
    let windows: std::collections::BTreeSet<u64> = flow.iter().filter_map(|l| l["commanded_cwnd_bytes"].as_u64()).collect();
    let goodput = mean_between(&iv, 1.0, 5.0);
    eprintln!(
        "onnx MLP (random weights) on a kernel flow: {} reports, {} distinct windows, goodput {goodput:.1} Mbit/s",
        flow.len(),
        windows.len()
    );
    assert!(windows.len() >= 10, "the policy moved the window: {windows:?}");
    assert!(goodput > 0.5, "the flow moved data: {goodput:.2} Mbit/s");
}

#[test]
fn a_policy_past_its_deadline_leaves_the_flow_on_the_manifests_fallback_and_the_agent_answering() {
    if skip_without_root("a_policy_past_its_deadline_leaves_the_flow_on_the_manifests_fallback_and_the_agent_answering") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("onxs");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS as u32, 100);
    let dir = private_dir();
    // Every inference costs about five budgets: each one is late.
    let budget_us = ((cost_us("slow") / 5.0) as u64).max(1);
    let model = with_budget(dir.path(), "slow", budget_us);
    let name = format!("onnx:{}", model.canonicalize().unwrap().display());
    let setup = AgentSetup::new(&tag, &format!("[default]\nalgorithm = \"{name}\"\n"));
    let trace = setup.trace_path();
    let agent = setup.start_with("info", &["--trace-flows", trace.to_str().unwrap()]);
    let socket = setup.control_socket();
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5201);
    let client = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5201, 5, &setup.name);
    let slowest = slowest_status(&socket, Duration::from_secs(4));
    let iv = client.finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    assert!(
        stopped.log.contains("budget") && stopped.log.contains("algorithm replaced after repeated faults"),
        "{}",
        stopped.log
    );
    let lines = trace_lines(&trace);
    let flow = data_flow(&lines);
    // The manifest names cubic; the agent's own fallback is reno.
    assert_eq!(flow.last().unwrap()["algorithm"], "cubic", "the flow ends on the manifest's fallback");
    let goodput = mean_between(&iv, 2.0, 5.0);
    eprintln!(
        "slow policy (budget {budget_us} µs): status answered within {slowest:?}; goodput on the fallback {goodput:.1} Mbit/s"
    );
    assert!(slowest < Duration::from_millis(250), "status took {slowest:?}");
    assert!(goodput >= 0.5 * RATE_MBPS, "goodput {goodput:.1} Mbit/s");
}
