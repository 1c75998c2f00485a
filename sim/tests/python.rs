//! Scenarios naming a Python algorithm (`py:file.py:Class`, hosted by ccp-python) run like any
//! other: the example Reno completes its flows, a relative path is relative to the scenario
//! file, and `--record-reports` writes reports that read back as `ccp_contract::Report`s.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ccp_contract::RecordedReport;
use ccp_sim::config::load_str;
use ccp_sim::record::ReportRecord;

/// Two 300 KB flows into one host over a 1 Gbit/s star, CCP-style reports every 200 µs.
const SCENARIO: &str = r#"
name = "python-reno"
seed = 1
duration_ms = 200
stop_when_done = true

[topology]
kind = "star"
hosts = 3
link_gbps = 1.0
link_delay_us = 25.0

[switch]
buffer_bytes = 4_000_000
admission = "static"
port_buffer_bytes = 400_000

[switch.qdisc]
kind = "droptail"

[transport]
mss_bytes = 1460
header_bytes = 40
ecn = false

[cc]
algorithm = "{alg}"
params = { ecn = false }
reporting = "interval"
report_interval_us = 200

[[workload.flows]]
src = 0
dst = 2
bytes = 300_000

[[workload.flows]]
src = 1
dst = 2
bytes = 300_000
"#;

fn reno() -> PathBuf {
    ccp_python::register();
    // About the scenario, not speed: a call budget no loaded test machine misses.
    ccp_python::set_call_budget(Duration::from_secs(2));
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/python/examples/reno.py").canonicalize().unwrap()
}

#[test]
fn python_reno_completes_a_scenario_and_moves_data() {
    let name = format!("py:{}:Reno", reno().display());
    let loaded = common::scenario(&SCENARIO.replace("{alg}", &name));
    assert_eq!(loaded.scenario.cc.algorithm, name);
    let (_, r) = common::run(&loaded);
    assert_eq!(r.counters.algorithm_faults, 0, "{:?}", r.counters);
    assert!(r.counters.reports > 10, "the Python class was driven: {:?}", r.counters);
    assert_eq!((r.flows_total, r.flows_completed), (2, 2), "both flows finish");
    for f in &r.flows {
        assert!(f.fct_us.is_some() && f.goodput_gbps > 0.05, "{f:?}");
    }
}

#[test]
fn a_relative_python_path_is_relative_to_the_scenario_and_reports_are_recorded() {
    let dir = std::env::temp_dir().join(format!("ccp-sim-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(reno(), dir.join("my_reno.py")).unwrap();
    let file = dir.join("scenario.toml");
    let loaded = load_str(&file, &SCENARIO.replace("{alg}", "py:my_reno.py:Reno"), &[]).unwrap_or_else(|e| panic!("{e}"));
    let want = format!("py:{}:Reno", dir.canonicalize().unwrap().join("my_reno.py").display());
    assert_eq!(loaded.scenario.cc.algorithm, want);
    let e = load_str(&file, &SCENARIO.replace("{alg}", "py:missing.py:Reno"), &[]).unwrap_err().to_string();
    assert!(e.contains("cc.algorithm") && e.contains("missing.py"), "{e}");

    let path = dir.join("reports.jsonl");
    let record = ReportRecord::create(&path).unwrap();
    let r = ccp_sim::run_loaded_recording(&loaded, Some(record), |_, _, _| {}).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<RecordedReport> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    assert_eq!(lines.len() as u64, r.counters.reports, "one line per report");
    assert!(lines.iter().any(|l| l.flow == 0) && lines.iter().any(|l| l.flow == 1), "flows by index");
    assert!(lines.iter().all(|l| l.flow < 2 && l.report.mss_bytes == 1460));
    let acked: u64 = lines.iter().map(|l| l.report.acked_bytes).sum();
    assert!(acked > 300_000, "the recorded reports account for the data: {acked}");
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first.as_object().unwrap().keys().collect::<Vec<_>>(), ["flow", "report"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
