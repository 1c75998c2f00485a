//! `ccp-sim run` as a command in a pipeline.

use std::path::Path;
use std::process::{Command, Stdio};

/// `ccp-sim run … | head -1`: the reader goes away before the summary is written. The results are
/// on disk by then, so that is a success, not the panic `println!` gives on a broken pipe.
#[test]
fn a_reader_that_closes_early_is_not_an_error() {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sim/dctcp-k20.toml");
    let out = std::env::temp_dir().join(format!("ccp-sim-cli-{}", std::process::id()));
    for json in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ccp-sim"));
        cmd.args(["run", scenario.to_str().unwrap(), "--out", out.to_str().unwrap(), "--no-plots"]).args([
            "--set",
            "duration_ms=50",
            "--set",
            "warmup_ms=5",
        ]);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "json {json}: exit {:?}\n{stderr}", o.status);
        assert!(!stderr.contains("panicked"), "json {json}: {stderr}");
        assert!(out.join("summary.json").exists(), "the results were written");
    }
    let _ = std::fs::remove_dir_all(&out);
}
