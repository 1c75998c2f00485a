//! The shipped Python examples against the native algorithms they port: the same reports in,
//! through the same controller, must give the same commands out — for recorded runs and for
//! generated sequences that reach every branch.

mod common;

use std::path::Path;

use ccp_contract::{Choice, FlowStart, ParamError, Report};
use common::*;

/// Drives a native and a Python choice through their own controllers, report by report, and
/// fails at the first report whose command or window differs.
fn same_commands(native: Choice, python: Choice, start_at: &FlowStart, reports: &[Report], what: &str) {
    // About equality, not speed: a budget no loaded test machine misses.
    ccp_python::set_call_budget(std::time::Duration::from_secs(2));
    let python_name = python.algorithm();
    let (mut n, n0) = start(native, start_at);
    let (mut p, p0) = start(python, start_at);
    assert_eq!(p0.fault, None, "{what}: init faulted");
    assert_eq!(n0.command, p0.command, "{what}: first command");
    for (i, r) in reports.iter().enumerate() {
        let now = r.now_us;
        let (a, b) = (n.on_report(r, now), p.on_report(r, now));
        assert_eq!(b.fault, None, "{what}: report {i} faulted");
        assert_eq!(a.command, b.command, "{what}: report {i} ({r:?})");
        assert_eq!(n.cwnd_bytes(), p.cwnd_bytes(), "{what}: window after report {i}");
    }
    // Never a fault, so never the fallback (which is native Reno) answering for Python.
    assert_eq!(p.algorithm_name(), python_name, "{what}");
    assert_eq!(p.total_faults(), 0, "{what}");
    let (ns, ps) = (n.algorithm_state(), p.algorithm_state());
    for v in &ns {
        let pv = ps.iter().find(|s| s.name == v.name).unwrap_or_else(|| panic!("{what}: no state {:?}", v.name));
        assert!(
            pv.value == v.value || (pv.value.is_infinite() && v.value.is_infinite()),
            "{what}: {} {} vs {}",
            v.name,
            v.value,
            pv.value
        );
    }
}

fn recordings() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

#[test]
fn python_reno_gives_native_renos_commands_on_recorded_runs() {
    let files = recordings();
    assert!(!files.is_empty(), "no recordings in tests/data");
    let mut reports = 0;
    for file in &files {
        for (flow, rs) in recording(file) {
            let start_at = FlowStart::new(rs[0].mss_bytes, 10 * u64::from(rs[0].mss_bytes));
            let what = format!("{} flow {flow}", file.display());
            same_commands(choose("reno"), choose(&example("reno.py", "Reno")), &start_at, &rs, &what);
            reports += rs.len();
        }
    }
    assert!(reports > 500, "the recordings hold only {reports} reports");
}

#[test]
fn python_reno_gives_native_renos_commands_on_every_branch() {
    for seed in 1..=5 {
        let rs = synthetic_reports(2_000, seed);
        let start_at = FlowStart::new(MSS, 10 * u64::from(MSS));
        same_commands(choose("reno"), choose(&example("reno.py", "Reno")), &start_at, &rs, &format!("seed {seed}"));
    }
}

#[test]
fn python_vegas_gives_native_vegas_commands() {
    for file in recordings() {
        for (flow, rs) in recording(&file) {
            let start_at = FlowStart::new(rs[0].mss_bytes, 10 * u64::from(rs[0].mss_bytes));
            let what = format!("{} flow {flow}", file.display());
            same_commands(choose("vegas"), choose(&example("vegas.py", "Vegas")), &start_at, &rs, &what);
        }
    }
    for seed in 1..=5 {
        let rs = synthetic_reports(2_000, seed);
        let start_at = FlowStart::new(MSS, 10 * u64::from(MSS));
        same_commands(choose("vegas"), choose(&example("vegas.py", "Vegas")), &start_at, &rs, &format!("seed {seed}"));
    }
}

#[test]
fn parameters_are_validated_and_reach_the_instance() {
    ccp_python::register();
    let name = example("reno.py", "Reno");
    let table = |v: f64| toml::Table::from_iter([("beta".to_string(), toml::Value::Float(v))]);
    let native = ccp_algorithms::registry::choose("reno", table(0.7), "test").unwrap();
    let python = ccp_algorithms::registry::choose(&name, table(0.7), "test").unwrap();
    same_commands(native, python, &FlowStart::new(MSS, 10 * u64::from(MSS)), &synthetic_reports(500, 9), "beta 0.7");
    let err = ccp_algorithms::registry::choose(&name, table(1.5), "test").unwrap_err();
    assert!(matches!(err, ParamError::OutOfRange { ref param, .. } if param == "beta"), "{err}");
    let unknown = toml::Table::from_iter([("gamma".to_string(), toml::Value::Float(1.0))]);
    let err = ccp_algorithms::registry::choose(&name, unknown, "test").unwrap_err();
    assert!(err.to_string().contains("gamma") && err.to_string().contains("beta"), "{err}");
    let info = ccp_algorithms::registry::resolve(&name).unwrap();
    assert!(info.summary.starts_with("TCP Reno/NewReno in Python"), "{}", info.summary);
    assert_eq!(info.params.iter().map(|p| p.name).collect::<Vec<_>>(), ["init_cwnd_pkts", "beta", "ecn", "recovery_by_data"]);
}

/// A hot swap seeds the Python algorithm exactly as it seeds a native one.
#[test]
fn a_swap_seeds_the_python_algorithm_like_the_native_one() {
    ccp_python::set_call_budget(std::time::Duration::from_secs(2));
    let rs = synthetic_reports(1_200, 3);
    let start_at = FlowStart::new(MSS, 10 * u64::from(MSS));
    for (native, python) in [("reno", example("reno.py", "Reno")), ("vegas", example("vegas.py", "Vegas"))] {
        let (mut n, _) = start(choose("cubic"), &start_at);
        let (mut p, _) = start(choose("cubic"), &start_at);
        for (i, r) in rs.iter().enumerate() {
            if i == 400 {
                assert_eq!(n.swap(choose(native), r.now_us).command, p.swap(choose(&python), r.now_us).command);
                assert_eq!(p.algorithm_name(), choose(&python).algorithm());
            }
            let (a, b) = (n.on_report(r, r.now_us), p.on_report(r, r.now_us));
            assert_eq!(b.fault, None);
            assert_eq!(a.command, b.command, "{native}: report {i}");
        }
    }
}
