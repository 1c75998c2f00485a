//! `ccp-bench --part soak --minutes 2`: two minutes of the soak (1,000 libccp and 1,000 kernel
//! flows churning at 100 per second, `ctl swap --all` every 10 s, both agents killed with
//! SIGKILL and started again after one minute) loses and freezes no flow, produces every row as a
//! finite number, and leaves each agent with the same open files (± 2) at the same point of both
//! lives; both agents stop cleanly at the end and the eBPF one removes its pins. The slopes are
//! not judged: two minutes of RSS say nothing reliable about a leak (the 60-minute run does).
//!
//! Needs root (a network namespace, BPF); skips loudly without. A test binary of its own, so
//! that no other test shares the machine with it.

use std::process::Command;

use ccp_integration_tests::{bin, is_root};
use serde_json::Value;

/// The series every soak reports, each as slope within lives, drift across lives, min and max.
const SERIES: [&str; 9] = [
    "libccp_agent.rss_mib",
    "libccp_agent.fds",
    "libccp_agent.log_lines_per_min",
    "ebpf_agent.rss_mib",
    "ebpf_agent.fds",
    "ebpf_agent.log_lines_per_min",
    "maps.flow_info",
    "maps.ctrl_used",
    "maps.ctrl_moved",
];

/// Rows with a target of their own: nothing lost or frozen, open files steady.
const JUDGED: [&str; 6] = [
    "soak.libccp.lost",
    "soak.libccp.frozen",
    "soak.ebpf.lost",
    "soak.ebpf.frozen",
    "soak.libccp_agent.fds_spread_at_phase",
    "soak.ebpf_agent.fds_spread_at_phase",
];

#[test]
fn a_two_minute_soak_loses_and_freezes_no_flow() {
    if !is_root() {
        eprintln!("SKIPPED a_two_minute_soak_loses_and_freezes_no_flow: needs root (a network namespace, BPF)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("soak.json");
    let out = Command::new(bin("ccp-bench"))
        .args(["--part", "soak", "--minutes", "2", "--restart-every-s", "60", "--swap-every-s", "10", "--require-all", "--json"])
        .arg(&json)
        .output()
        .expect("run ccp-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(out.status.success(), "ccp-bench --part soak failed ({}):\n{stdout}\n{stderr}", out.status);

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file")).expect("JSON");
    let soak = &doc["parts"]["soak"];
    assert_eq!(soak["status"], "ran", "{soak}");
    let rows = soak["rows"].as_array().unwrap_or_else(|| panic!("no rows: {soak}"));
    let row = |key: &str| rows.iter().find(|r| r["key"] == key).unwrap_or_else(|| panic!("no row {key} in {rows:?}"));
    let mut expected: Vec<String> = SERIES
        .iter()
        .flat_map(|s| ["slope_per_h", "drift_per_h", "min", "max"].map(|f| format!("soak.{s}.{f}")))
        .chain(JUDGED.iter().map(|k| k.to_string()))
        .collect();
    expected.push("soak.ebpf.flow_info_left".into());
    for key in &expected {
        let r = row(key);
        let v = r["ccp_agent"].as_f64().unwrap_or_else(|| panic!("{key} is not a number: {r}"));
        assert!(v.is_finite(), "{key} is {v}");
        assert!(stdout.contains(r["figure"].as_str().expect("figure")), "{key} is printed:\n{stdout}");
    }
    assert_eq!(rows.len(), expected.len(), "the rows are exactly the expected ones: {rows:?}");
    for key in JUDGED {
        assert_eq!(row(key)["met"], true, "{key}: {}\n{stdout}", row(key));
    }
    // Samples rest on running agents: memory and open files were read.
    for s in ["libccp_agent.rss_mib", "ebpf_agent.rss_mib", "libccp_agent.fds", "ebpf_agent.fds"] {
        assert!(row(&format!("soak.{s}.min"))["ccp_agent"].as_f64().unwrap_or(0.0) > 0.0, "{s} was sampled");
    }

    let raw = &soak["raw"];
    assert_eq!(raw["restarts"].as_array().map(Vec::len), Some(1), "one kill -9 and restart: {}", raw["restarts"]);
    assert_eq!(raw["swaps"]["failed"], 0, "every swap went through: {}", raw["swaps"]);
    assert!(raw["swaps"]["requests"].as_u64().unwrap_or(0) >= 20, "a swap every 10 s: {}", raw["swaps"]);
    let censuses = raw["censuses"].as_array().expect("censuses");
    let labels: Vec<&str> = censuses.iter().filter_map(|c| c["label"].as_str()).collect();
    assert!(labels.contains(&"after restart 1") && labels.contains(&"end"), "{labels:?}");
    for c in censuses {
        for dp in ["libccp", "ebpf"] {
            assert!(c[dp]["checked"].as_u64().unwrap_or(0) > 100, "a census judged flows: {c}");
        }
    }
    // The restarted agents took every flow back (the census after the restart found none
    // lost), by re-adopting them.
    let after = censuses.iter().find(|c| c["label"] == "after restart 1").expect("the census after the restart");
    for k in ["libccp_adopted", "ebpf_adopted"] {
        assert!(after[k].as_u64().unwrap_or(0) > 100, "{k}: {after}");
    }
    assert_eq!(raw["shutdown_clean"]["libccp"], true, "{}", raw["shutdown_clean"]);
    assert_eq!(raw["shutdown_clean"]["ebpf"], true, "{}", raw["shutdown_clean"]);
    assert_eq!(raw["pins_left"], false);
}
