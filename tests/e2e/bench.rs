//! `ccp-bench --quick`: the one command that runs every issue-19 figure next to its anchor runs
//! to the end and produces every row, each a finite number, positive where a figure cannot be
//! zero (reports, CPU, throughput, latency). The figures themselves are never asserted: a short
//! run on a shared CI machine measures nothing reliably.
//!
//! Needs root (namespaces, BPF, portus's private mount namespace); skips loudly without it. With
//! root, every part must run (`--require-all`): iperf3 and the portus binaries are prerequisites
//! that scripts/setup.sh installs, as for the portus tests.

use std::process::Command;

use ccp_integration_tests::{bin, is_root};
use serde_json::Value;

/// Every row ccp-bench must produce, per part, and whether its figures must be positive (else
/// only finite and not negative).
const ROWS: &[(&str, &[(&str, bool)])] = &[
    (
        "libccp",
        &[
            ("libccp.cpu_per_mb.reno", true),
            ("libccp.cpu_per_mb.reno_floor10", true),
            ("libccp.cpu_per_mb.reno_floor10_10ms", true),
            ("libccp.us_per_report.reno", true),
            ("libccp.us_per_report.reno_floor10", true),
            ("libccp.us_per_report.reno_floor10_10ms", true),
            ("libccp.reports_per_cpu_s.reno", true),
            ("libccp.reports_per_cpu_s.reno_floor10", true),
            ("libccp.reports_per_cpu_s.reno_floor10_10ms", true),
            ("libccp.reports_per_flow_s.reno", true),
            ("libccp.reports_per_flow_s.reno_floor10", true),
            ("libccp.reports_per_flow_s.reno_floor10_10ms", true),
            ("libccp.utilisation.reno", true),
            ("libccp.utilisation.reno_floor10", true),
            ("libccp.utilisation.reno_floor10_10ms", true),
            ("libccp.rtos.reno", false),
            ("libccp.rtos.reno_floor10", false),
            ("libccp.rtos.reno_floor10_10ms", false),
            ("libccp.warn_lines.reno", false),
            ("libccp.warn_lines.reno_floor10", false),
            ("libccp.warn_lines.reno_floor10_10ms", false),
        ],
    ),
    (
        "ebpf",
        &[
            ("ebpf.veth.gbps_vs_cubic", true),
            ("ebpf.veth.gbps_vs_reno", true),
            ("ebpf.loopback.gbps_vs_cubic", true),
            ("ebpf.loopback.gbps_vs_reno", true),
            ("ebpf.veth.bpf_ns_per_ack", true),
            ("ebpf.loopback.bpf_ns_per_ack", true),
            ("ebpf.many_flows.us_per_report", true),
            ("ebpf.many_flows.latency_p99_us", true),
        ],
    ),
    (
        "shim",
        &[
            ("shim.loopback.cpu_us_per_ack", true),
            ("shim.loopback.cpu_us_per_ack_net_of_idle", false),
            ("shim.loopback.gbps_vs_kernel_reno", true),
            ("shim.veth.cpu_us_per_ack", true),
            ("shim.veth.cpu_us_per_ack_net_of_idle", false),
            ("shim.veth.gbps_vs_kernel_reno", true),
        ],
    ),
    (
        "dpdk",
        &[
            ("dpdk.1.gbps_vs_kernel_offloads", true),
            ("dpdk.1.gbps_vs_kernel_same_segments", true),
            ("dpdk.16.gbps_vs_kernel_offloads", true),
            ("dpdk.16.gbps_vs_kernel_same_segments", true),
            ("dpdk.agent.gbps", true),
            ("dpdk.agent.libccp_ns_per_ack", true),
            ("dpdk.agent.report_to_command_p99_us", true),
        ],
    ),
];

/// The host part's rows: per path and flow count, CPU per Gbit and throughput of the agent's
/// reno and cubic against the kernel's.
fn host_rows() -> Vec<String> {
    let mut keys = Vec::new();
    for path in ["veth_held", "veth", "loopback"] {
        for flows in [1, 100, 1000] {
            for algo in ["reno", "cubic"] {
                keys.push(format!("host.{path}.{flows}.cpu_per_gbit.{algo}"));
                keys.push(format!("host.{path}.{flows}.gbps.{algo}"));
            }
        }
    }
    keys
}

fn check_figure(key: &str, what: &str, v: &Value, positive: bool) {
    let x = v.as_f64().unwrap_or_else(|| panic!("{key}: {what} is not a number: {v}"));
    assert!(x.is_finite(), "{key}: {what} is {x}");
    if positive {
        assert!(x > 0.0, "{key}: {what} must be positive, is {x}");
    } else {
        assert!(x >= 0.0, "{key}: {what} must not be negative, is {x}");
    }
}

#[test]
fn ccp_bench_quick_produces_every_row() {
    if !is_root() {
        eprintln!("SKIPPED ccp_bench_quick_produces_every_row: needs root (network namespaces, BPF, mounts)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("bench.json");
    let out =
        Command::new(bin("ccp-bench")).args(["--quick", "--require-all", "--json"]).arg(&json).output().expect("run ccp-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(out.status.success(), "ccp-bench --quick failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(!stdout.contains("SKIPPED") && !stdout.contains("FAILED"), "every part ran:\n{stdout}");

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file")).expect("JSON");
    assert_eq!(doc["settings"]["quick"], true, "{}", doc["settings"]);
    let host: Vec<(String, bool)> = host_rows().into_iter().map(|k| (k, true)).collect();
    let host: Vec<(&str, bool)> = host.iter().map(|(k, p)| (k.as_str(), *p)).collect();
    let parts: Vec<(&str, &[(&str, bool)])> =
        std::iter::once(("host", host.as_slice())).chain(ROWS.iter().map(|(p, r)| (*p, *r))).collect();
    for (part, expected) in parts {
        let p = &doc["parts"][part];
        assert_eq!(p["status"], "ran", "{part}: {p}");
        assert!(p["raw"].is_object() || p["raw"].is_array(), "{part}: everything measured is written");
        let rows = p["rows"].as_array().unwrap_or_else(|| panic!("{part} has no rows: {p}"));
        for (key, positive) in expected {
            let row = rows.iter().find(|r| r["key"] == *key).unwrap_or_else(|| panic!("{part}: no row {key} in {rows:?}"));
            check_figure(key, "ccp-agent's figure", &row["ccp_agent"], *positive);
            if !row["anchor"].is_null() {
                check_figure(key, "the anchor", &row["anchor"], *positive);
            }
            if *positive && !row["anchor"].is_null() {
                check_figure(key, "the ratio", &row["ratio"], true);
            }
            if !row["target"].is_null() {
                assert!(row["met"].is_boolean(), "{key}: a row with a target says whether it is met: {row}");
            }
            assert!(stdout.contains(row["figure"].as_str().expect("figure")), "{key} is printed:\n{stdout}");
        }
        assert_eq!(rows.len(), expected.len(), "{part}: the rows are exactly the expected ones: {rows:?}");
    }
    // Every host figure rests on bytes moved and CPU counted in every run. The agent's share may
    // read 0 in a --quick window: /proc counts its CPU in 10 ms ticks.
    for cell in doc["parts"]["host"]["raw"]["host"]["cells"].as_array().expect("host cells") {
        for run in cell["runs"].as_array().expect("host runs") {
            for k in ["gbps", "cores_busy", "cpu_ms_per_gbit"] {
                check_figure(k, "a host run's", &run[k], true);
            }
            check_figure("agent_share", "a host run's", &run["agent_share"], false);
        }
    }
    // Every figure of the libccp part rests on reports and CPU actually measured.
    for run in doc["parts"]["libccp"]["raw"]["runs"].as_array().expect("libccp runs") {
        for k in ["reports", "agent_cpu_s", "delivered_bytes", "datapath_wall_s", "datapath_cpu_s"] {
            check_figure(k, "a libccp run's", &run[k], true);
        }
    }
}
