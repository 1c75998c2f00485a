//! Issue 31 item 4: the anchors — the Nimbus authors' `nimbus` (portus 0.8) and the CCP authors'
//! `bbr` (portus 0.6) — steer real kernel flows in ccp-lab's `portus:` schemes, through
//! `ccp-libccp-shim` with a run-private IPC directory: one short cell of each shipped parity
//! experiment. Steering is read from the shim's own counters (its last `shim stats` line: flows
//! created, messages from the agent, control entries written), not inferred from throughput,
//! which the shim's in-kernel Cubic fallback would also give.
//!
//! Needs root and the anchors' binaries (scripts/anchors.sh builds them from ../shared/anchors,
//! or CCP_ANCHORS_BIN_DIR points at them); without either it skips, saying why. A clean clone (CI)
//! has no anchors.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ccp_lab::output::RunRecord;
use ccp_lab::run::RunOptions;

/// One run at a time: the shim's per-ACK work and the emulator share two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Whether the anchors' binaries are there; prints why not.
fn anchors_present(test: &str) -> bool {
    let dir = ccp_lab::portus::default_bin_dir();
    let missing: Vec<&str> = ["nimbus", "bbr"].into_iter().filter(|b| !dir.join(b).is_file()).collect();
    if !missing.is_empty() {
        eprintln!(
            "SKIPPED {test}: no {} in {}: build the anchors with scripts/anchors.sh (from ../shared/anchors or \
             CCP_ANCHORS_DIR), or point CCP_ANCHORS_BIN_DIR at them",
            missing.join(", "),
            dir.display()
        );
    }
    missing.is_empty()
}

/// Runs one cell of a shipped experiment; returns its record and the run's directory (the
/// caller removes `out`).
fn run_cell(file: &str, out: &Path, options: RunOptions) -> (RunRecord, PathBuf) {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let shim = ccp_lab::agent::sibling_binary("ccp-libccp-shim");
    assert!(shim.is_file(), "{} is missing: `cargo build --workspace` builds it before the tests", shim.display());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/experiments").join(file);
    let loaded = ccp_lab::config::load(&path).unwrap();
    let o = RunOptions { out: out.to_path_buf(), quiet: true, no_plots: true, agent: Some(common::agent_binary()), ..options };
    let outcome = ccp_lab::run::run_experiment(&loaded, &o).unwrap();
    assert_eq!(outcome.records.len(), 1, "the options select one run of {file}");
    let r = outcome.records.into_iter().next().unwrap();
    assert!(r.ok, "the run failed: {:?}", r.error);
    assert!(common::namespaces_with(&r.namespace_prefix).is_empty(), "namespaces of {} left", r.namespace_prefix);
    let dir = out.join(&r.dir);
    (r, dir)
}

/// A counter of the shim's last `shim stats` line.
fn shim_counter(log: &str, key: &str) -> u64 {
    let line = log.lines().rfind(|l| l.contains("shim stats")).unwrap_or_else(|| panic!("no `shim stats` line:\n{log}"));
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// The shim's log shows the portus agent steered at least one flow.
fn assert_steered(dir: &Path, what: &str) {
    let log = std::fs::read_to_string(dir.join("portus-shim.log")).expect("portus-shim.log");
    let (created, from_agent, writes) =
        (shim_counter(&log, "flows_created"), shim_counter(&log, "from_agent"), shim_counter(&log, "control_writes"));
    eprintln!("{what}: shim flows_created {created}, from_agent {from_agent}, control_writes {writes}");
    assert!(created >= 1, "{what}: the shim saw no flow");
    assert!(from_agent > 0 && writes > 0, "{what}: the agent never commanded the flow (fallback only)");
}

#[test]
fn the_nimbus_authors_code_steers_a_flow_and_is_classified() {
    let test = "the_nimbus_authors_code_steers_a_flow_and_is_classified";
    if !common::can_run(test) || !anchors_present(test) {
        return;
    }
    let out = common::scratch("portus-nimbus");
    // 20 s: the first 15 are warm-up (no mode switch before), the rest scored.
    let o = RunOptions {
        duration_s: Some(20.0),
        repetitions: Some(1),
        schemes: vec!["theirs-oracle".into()],
        links: vec!["48mbps-50ms".into()],
        scenarios: vec!["cbr-50pct".into()],
        ..RunOptions::default()
    };
    let (r, dir) = run_cell("parity-nimbus.toml", &out, o);
    assert_steered(&dir, "nimbus");
    let log = std::fs::read_to_string(dir.join("portus-nimbus.log")).expect("portus-nimbus.log");
    assert!(log.contains("[nimbus] got ack"), "no report reached the Nimbus agent:\n{log}");
    let tput = r.scheme_throughput_mbps.unwrap_or(0.0);
    assert!(tput > 1.0, "Nimbus flow throughput {tput} Mbit/s");
    assert!(r.agent_trace_records.unwrap_or(0) > 0, "no mode records from the Nimbus log");
    let c = r.classification.as_ref().expect("classification of the portus Nimbus");
    assert!(!c.points.is_empty() && c.accuracy.is_some(), "no classification point: {c:?}");
    eprintln!("nimbus: {tput:.1} Mbit/s, accuracy {:?} over {} points", c.accuracy, c.points.len());
    assert!(dir.join("classification.csv").is_file());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_ccp_authors_bbr_steers_a_flow() {
    let test = "the_ccp_authors_bbr_steers_a_flow";
    if !common::can_run(test) || !anchors_present(test) {
        return;
    }
    let out = common::scratch("portus-bbr");
    let o = RunOptions {
        duration_s: Some(10.0),
        repetitions: Some(1),
        schemes: vec!["theirs".into()],
        links: vec!["50mbps-10ms".into()],
        ..RunOptions::default()
    };
    let (r, dir) = run_cell("parity-bbr-ccp.toml", &out, o);
    assert_steered(&dir, "bbr");
    let tput = r.scheme_throughput_mbps.unwrap_or(0.0);
    eprintln!("bbr: {tput:.1} Mbit/s on 50 Mbit/s");
    assert!(tput > 10.0, "BBR flow throughput {tput} Mbit/s on a 50 Mbit/s link");
    let _ = std::fs::remove_dir_all(&out);
}
