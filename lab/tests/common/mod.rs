//! Shared helpers of the network tests: the root check (they need namespaces and /dev/net/tun)
//! and scratch directories.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;

/// Whether the network tests can run; prints why not (so a skipped test is visible).
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no failure mode.
    let root = unsafe { libc::geteuid() } == 0;
    let tun = std::path::Path::new("/dev/net/tun").exists();
    if !(root && tun) {
        eprintln!("SKIPPED {test}: needs root and /dev/net/tun (CI runs as root)");
    }
    root && tun
}

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ccplab-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Namespaces whose name starts with `prefix`.
pub fn namespaces_with(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with(prefix)).collect())
        .unwrap_or_default()
}

/// The agent binary the experiments start (`cargo build --workspace` puts it beside ccp-lab).
pub fn agent_binary() -> PathBuf {
    let agent = ccp_lab::agent::default_binary();
    assert!(
        agent.is_file(),
        "{} is missing: `cargo build --workspace` builds it before the tests (./test.sh does)",
        agent.display()
    );
    agent
}

/// Runs the one cell of a shipped experiment (`configs/experiments/<file>`) that `options`
/// selects, in a scratch directory it removes afterwards; checks the run succeeded and left no
/// namespaces behind.
pub fn run_shipped_cell(file: &str, options: ccp_lab::run::RunOptions) -> ccp_lab::output::RunRecord {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/experiments").join(file);
    let loaded = ccp_lab::config::load(&path).unwrap();
    let dir = scratch(file.trim_end_matches(".toml"));
    let o = ccp_lab::run::RunOptions { out: dir.clone(), quiet: true, no_plots: true, agent: Some(agent_binary()), ..options };
    let outcome = ccp_lab::run::run_experiment(&loaded, &o).unwrap();
    assert_eq!(outcome.records.len(), 1, "the options select one run of {file}");
    let r = outcome.records.into_iter().next().unwrap();
    assert!(r.ok, "the run failed: {:?}", r.error);
    assert!(namespaces_with(&r.namespace_prefix).is_empty(), "namespaces of {} left", r.namespace_prefix);
    let _ = std::fs::remove_dir_all(&dir);
    r
}
