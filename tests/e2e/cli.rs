//! The command line as a user meets it.

use std::process::Command;

use ccp_integration_tests::bin;

fn agent(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin("ccp-agent")).args(args).output().expect("run ccp-agent");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn algorithms_lists_baselines_with_parameters() {
    let (ok, out, err) = agent(&["algorithms"]);
    assert!(ok, "{err}");
    for name in ["reno", "cubic", "dctcp"] {
        assert!(out.lines().any(|l| l.starts_with(&format!("{name} — "))), "{name} missing:\n{out}");
    }
    // Parameters with defaults, ranges, units and references.
    assert!(out.contains("RFC 9438"), "{out}");
    assert!(out.contains("beta") && out.contains("default 0.7"), "{out}");
    assert!(out.contains("  g ") && out.contains("0.0625"), "{out}");
    assert!(out.contains("init_cwnd_pkts") && out.contains("packets"), "{out}");
}

#[test]
fn algorithms_json_is_machine_readable() {
    let (ok, out, err) = agent(&["algorithms", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let names: Vec<_> = v.as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_string()).collect();
    assert!(names.contains(&"dctcp".to_string()), "{names:?}");
    let dctcp = v.as_array().unwrap().iter().find(|a| a["name"] == "dctcp").unwrap();
    assert!(dctcp["params"].as_array().unwrap().iter().any(|p| p["name"] == "g"));
}

#[test]
fn check_config_accepts_the_shipped_config() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/agent.toml");
    let (ok, out, err) = agent(&["check-config", path]);
    assert!(ok, "{err}");
    assert!(out.contains("OK"), "{out}");
}

#[test]
fn check_config_points_at_the_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[default]\nalgorithm = \"reno\"\n\n[[rules]]\nmatch = { port = 80 }\nalgorithm = \"cubic\"\nparams = { beta = 1.5 }\n",
    )
    .unwrap();
    let (ok, _, err) = agent(&["check-config", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("bad.toml:7"), "{err}");
    assert!(err.contains("beta") && err.contains("out of range"), "{err}");
}

#[test]
fn run_rejects_unknown_algorithm_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = agent(&["run", "--algorithm", "nosuch", "--ipc-dir", dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("unknown algorithm") && err.contains("reno"), "{err}");
    assert!(!dir.path().join("portus").exists(), "no socket left behind");
}

#[test]
fn run_rejects_bad_param() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = agent(&["run", "-a", "dctcp", "-p", "g=2", "--ipc-dir", dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("\"g\"") && err.contains("out of range"), "{err}");
}

#[test]
fn help_documents_every_command() {
    let (ok, out, _) = agent(&["--help"]);
    assert!(ok);
    for c in ["run", "algorithms", "check-config"] {
        assert!(out.contains(c), "{out}");
    }
    let (ok, out, _) = agent(&["run", "--help"]);
    assert!(ok);
    for f in ["--algorithm", "--config", "--datapath", "--ipc-dir", "--param"] {
        assert!(out.contains(f), "{out}");
    }
}
