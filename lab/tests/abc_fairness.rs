//! Spec target 17 (abc.md §2.7.5) on a short run of the shipped
//! `configs/experiments/abc-fairness.toml`: 4 ABC flows starting together on a fixed 24 Mbit/s
//! link share it with Jain's index ≥ 0.95 and keep it busy. Accelerates and brakes alone are MIMD,
//! which keeps whatever ratio the start-up noise leaves; the additive increase (spec §3.2) is what
//! pulls the flows together, so the index could fail if it were missing or broken.

mod common;

use ccp_lab::run::RunOptions;

#[test]
fn four_abc_flows_share_a_fixed_link_fairly() {
    if !common::can_run("four_abc_flows_share_a_fixed_link_fairly") {
        return;
    }
    let o = RunOptions {
        duration_s: Some(30.0),
        scenarios: vec!["4-flows".into()],
        links: vec!["fixed-24mbps".into()],
        ..RunOptions::default()
    };
    let r = common::run_shipped_cell("abc-fairness.toml", o);
    let utilisation = r.link_metrics.as_ref().expect("link metrics").utilisation;
    let jain = r.jain.expect("Jain's index over the 4 flows");
    let per_flow: Vec<String> = r.flows.iter().map(|f| format!("{:.2}", f.throughput_mbps)).collect();
    let summary = format!("Jain {jain:.3}, utilisation {:.1} %, flows {per_flow:?} Mbit/s", utilisation * 100.0);
    eprintln!("{summary}");
    assert_eq!(r.flows.len(), 4, "{summary}");
    assert!(jain >= 0.95, "spec target 17: {summary}");
    assert!(utilisation >= 0.9, "{summary}");
}
