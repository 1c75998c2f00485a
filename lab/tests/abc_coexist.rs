//! Issue 18 item 2 (abc.md §7, Fig. 2-13) on a short run of the shipped
//! `configs/experiments/abc-coexist.toml`: 3 ABC and 3 Cubic long flows on 96 Mbit/s. With one
//! FIFO the ABC router's brakes reach the Cubic flows too (every flow negotiates ECN in ccp-lab's
//! sender namespace) and Cubic is starved; with ABC's packets in their own queue and max-min
//! weights, both classes get a fair part of the link.

mod common;

use ccp_lab::metrics::FlowSummary;
use ccp_lab::run::RunOptions;
use ccp_lab::traffic::Role;

/// Mean throughput of the ABC flows and of the long Cubic flows, Mbit/s.
fn class_means(flows: &[FlowSummary]) -> (f64, f64) {
    let mean = |pick: &dyn Fn(&FlowSummary) -> bool| {
        let v: Vec<f64> = flows.iter().filter(|f| pick(f)).map(|f| f.throughput_mbps).collect();
        assert_eq!(v.len(), 3, "three flows of each class: {flows:?}");
        v.iter().sum::<f64>() / v.len() as f64
    };
    (mean(&|f| f.role == Some(Role::Scheme)), mean(&|f| f.role == Some(Role::Cross) && f.kind == "tcp"))
}

fn run(scheme: &str) -> (f64, f64) {
    let o = RunOptions {
        duration_s: Some(25.0),
        schemes: vec![scheme.into()],
        scenarios: vec!["no-shorts".into()],
        ..RunOptions::default()
    };
    let r = common::run_shipped_cell("abc-coexist.toml", o);
    let (abc, cubic) = class_means(&r.flows);
    let utilisation = r.link_metrics.as_ref().expect("link metrics").utilisation;
    eprintln!("{scheme}: ABC {abc:.2} Mbit/s per flow, Cubic {cubic:.2}, utilisation {:.1} %", utilisation * 100.0);
    assert!(utilisation >= 0.9, "{scheme}: utilisation {utilisation}");
    (abc, cubic)
}

#[test]
fn abc_and_cubic_share_the_link_only_with_the_coexistence_queue() {
    if !common::can_run("abc_and_cubic_share_the_link_only_with_the_coexistence_queue") {
        return;
    }
    let (abc, cubic) = run("abc-one-queue");
    assert!(cubic < 0.1 * abc, "one FIFO: ABC's brakes starve ECN-capable Cubic ({abc:.2} vs {cubic:.2})");
    let (abc, cubic) = run("abc-coexist");
    // Target 20 is a 5 % gap over 40 s runs; this 25 s run checks that neither class starves or
    // dominates (one FIFO: Cubic gets under a hundredth of ABC's). The gap of such runs moved
    // between 9 and 37 % (the experiment file's header; a CI run of 2026-11-29 measured 37 % and
    // failed a 35 % bound), so the bound is 50 %: sharing, not starving.
    let gap = (abc - cubic).abs() / ((abc + cubic) / 2.0);
    assert!(gap < 0.5, "coexistence queue: ABC {abc:.2} vs Cubic {cubic:.2} Mbit/s per flow, gap {:.0} %", gap * 100.0);
}
