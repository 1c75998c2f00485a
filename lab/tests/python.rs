//! A Python algorithm as a ccp-lab scheme (`agent:py:file.py:Class`, the path relative to the
//! experiment file): the shipped Python Reno and the native Reno on the same link in one run.

mod common;

use ccp_lab::config;
use ccp_lab::run::{run_experiment, RunOptions};

#[test]
fn a_python_scheme_runs_beside_its_native_twin() {
    if !common::can_run("a_python_scheme_runs_beside_its_native_twin") {
        return;
    }
    let dir = common::scratch("pyscheme");
    // The example beside the experiment file, so the scheme names it relatively.
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/python/examples");
    std::fs::copy(examples.join("reno.py"), dir.join("reno.py")).unwrap();
    let file = dir.join("py.toml");
    std::fs::write(
        &file,
        r#"
duration_s = 3
sample_interval_ms = 100
[network]
rtt_ms = 20
buffer_pkts = 60
[[links]]
kind = "fixed"
name = "fixed-24"
rate_mbps = 24
[[schemes]]
name = "py-reno"
cc = "agent:py:reno.py:Reno"
[[schemes]]
name = "reno"
cc = "agent:reno"
"#,
    )
    .unwrap();
    let loaded = config::load(&file).unwrap();
    let o = RunOptions {
        out: dir.join("out"),
        quiet: true,
        no_plots: true,
        agent: Some(common::agent_binary()),
        ..RunOptions::default()
    };
    let outcome = run_experiment(&loaded, &o).unwrap();
    assert_eq!(outcome.records.len(), 2);
    let mut util = vec![];
    for r in &outcome.records {
        assert!(r.ok, "{}: {:?}", r.scheme, r.error);
        assert!(common::namespaces_with(&r.namespace_prefix).is_empty());
        util.push(r.link_metrics.as_ref().unwrap().utilisation);
    }
    eprintln!("utilisation: py-reno {:.3}, reno {:.3}", util[0], util[1]);
    assert!(util[0] > 0.7, "the Python Reno fills the link: {}", util[0]);
    assert!((util[0] - util[1]).abs() < 0.1, "like the native Reno: {util:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
