//! The processes under test — the shim with a portus agent, and ccp-agent on the native eBPF
//! path — with their logs and CPU time. Each is stopped on drop (SIGTERM, so it cleans up).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccp_bench_harness::agent::EbpfAgent;
use ccp_bench_harness::process::{field, Proc};

/// `ccp-libccp-shim run` and a portus agent on its socket directory.
pub struct ShimPair {
    pub shim: Proc,
    pub portus: Proc,
    _dir: tempfile::TempDir,
    pin_dir: PathBuf,
}

/// What the shim counted over its life (its last "shim stats" line).
#[derive(Debug, Default, Clone, Copy)]
pub struct ShimStats {
    pub acks: u64,
    pub invoke_errors: u64,
    pub ring_drops: u64,
    pub wakeups: u64,
    pub control_writes: u64,
    pub reports: u64,
}

impl ShimPair {
    /// The portus agent runs in a private mount namespace whose /tmp/ccp is our socket
    /// directory (portus 0.7 binds /tmp/ccp/portus, hard-coded): nobody else's is touched.
    pub fn start(shim_bin: &Path, portus_bin: &Path, cc: &str) -> anyhow::Result<ShimPair> {
        let dir = tempfile::tempdir()?;
        let ipc = dir.path().join("ipc");
        std::fs::create_dir(&ipc)?;
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg("mkdir -p /tmp/ccp && mount --bind \"$1\" /tmp/ccp && exec \"$2\"")
            .arg("sh")
            .arg(&ipc)
            .arg(portus_bin);
        let portus = Proc::spawn(cmd, "the portus agent")?;
        let t0 = Instant::now();
        while !ipc.join("portus").exists() {
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("the portus agent {} never bound its socket", portus_bin.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let pin_dir = PathBuf::from(format!("/sys/fs/bpf/ccpshim-bench-{cc}"));
        let mut cmd = Command::new(shim_bin);
        cmd.args(["--log-level", "info", "run", "--name", cc, "--ipc-dir"])
            .arg(&ipc)
            .arg("--pin-dir")
            .arg(&pin_dir)
            .arg("--state-file")
            .arg(dir.path().join("attach.json"));
        let mut shim = Proc::spawn(cmd, "ccp-libccp-shim")?;
        shim.wait_log("per-ACK congestion control registered")?;
        Ok(ShimPair { shim, portus, _dir: dir, pin_dir })
    }

    /// Stops both; the shim's life-long counters.
    pub fn stop(self) -> anyhow::Result<ShimStats> {
        let ShimPair { shim, portus, pin_dir, _dir } = self;
        let log = shim.stop()?;
        drop(portus);
        let _ = std::fs::remove_dir(&pin_dir);
        let line = log.lines().rev().find(|l| l.contains("shim stats")).context("no statistics in the shim's log")?;
        let num = |k: &str| field(line, k).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(ShimStats {
            acks: num("acks"),
            invoke_errors: num("invoke_errors"),
            ring_drops: num("ring_drops"),
            wakeups: num("wakeups"),
            control_writes: num("control_writes"),
            reports: num("reports"),
        })
    }
}

/// `ccp-agent run` on the eBPF datapath with Reno, under the congestion control name `cc`.
pub fn start_agent(bin: &Path, cc: &str) -> anyhow::Result<EbpfAgent> {
    let pin_dir = PathBuf::from(format!("/sys/fs/bpf/ccpshim-bench-{cc}"));
    // Normal scheduling, as the shim has: neither side gets a real-time advantage.
    EbpfAgent::start(bin, cc, &pin_dir, "realtime_priority = 0")
}
