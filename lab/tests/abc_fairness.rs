//! Spec target 17 (abc.md §2.7.5) on a short run of the shipped
//! `configs/experiments/abc-fairness.toml`: 4 ABC flows starting together on a fixed 24 Mbit/s
//! link share it with Jain's index ≥ 0.95 and keep it busy. Accelerates and brakes alone are MIMD,
//! which keeps whatever ratio the start-up noise leaves; the additive increase (spec §3.2) is what
//! pulls the flows together, so the index could fail if it were missing or broken.

mod common;

use std::path::Path;

use ccp_lab::config;
use ccp_lab::run::{run_experiment, RunOptions};

#[test]
fn four_abc_flows_share_a_fixed_link_fairly() {
    if !common::can_run("four_abc_flows_share_a_fixed_link_fairly") {
        return;
    }
    let agent = ccp_lab::agent::default_binary();
    assert!(
        agent.is_file(),
        "{} is missing: `cargo build --workspace` builds it before the tests (./test.sh does)",
        agent.display()
    );
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/experiments/abc-fairness.toml");
    let loaded = config::load(&file).unwrap();
    let dir = common::scratch("abc-fairness");
    let o = RunOptions {
        out: dir.clone(),
        duration_s: Some(30.0),
        scenarios: vec!["4-flows".into()],
        quiet: true,
        no_plots: true,
        agent: Some(agent),
        ..RunOptions::default()
    };
    let outcome = run_experiment(&loaded, &o).unwrap();
    let r = outcome.records.first().expect("one run");
    assert!(r.ok, "the run failed: {:?}", r.error);
    assert!(common::namespaces_with(&r.namespace_prefix).is_empty(), "namespaces of {} left", r.namespace_prefix);
    let utilisation = r.link_metrics.as_ref().expect("link metrics").utilisation;
    let jain = r.jain.expect("Jain's index over the 4 flows");
    let per_flow: Vec<String> = r.flows.iter().map(|f| format!("{:.2}", f.throughput_mbps)).collect();
    let summary = format!("Jain {jain:.3}, utilisation {:.1} %, flows {per_flow:?} Mbit/s", utilisation * 100.0);
    eprintln!("{summary}");
    assert_eq!(r.flows.len(), 4, "{summary}");
    assert!(jain >= 0.95, "spec target 17: {summary}");
    assert!(utilisation >= 0.9, "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}
