//! The agent under test: `ccp-agent run` on the eBPF datapath, its log and its CPU time.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ccp_bench_harness::agent::EbpfAgent;
use ccp_bench_harness::process::field;

/// The congestion control's name in every benchmark run.
pub const CC: &str = "ccpbench";

pub struct Agent(EbpfAgent);

/// Where every agent of this run pins its maps (the many-flows run reads their counters).
pub fn pin_dir() -> PathBuf {
    PathBuf::from(format!("/sys/fs/bpf/ccp-bench-{}", std::process::id()))
}

/// What the agent said at shutdown.
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
    pub reports: u64,
}

impl Agent {
    /// Starts the agent with Reno by default and the given `[datapath.ebpf]` lines.
    pub fn start(bin: &Path, ebpf: &str) -> anyhow::Result<Agent> {
        Ok(Agent(EbpfAgent::start(bin, CC, &pin_dir(), ebpf)?))
    }

    /// Starts the agent with every flow on `algorithm`.
    pub fn start_running(bin: &Path, algorithm: &str, ebpf: &str) -> anyhow::Result<Agent> {
        Ok(Agent(EbpfAgent::start_running(bin, CC, &pin_dir(), ebpf, algorithm)?))
    }

    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// The id of the per-ACK program (cong_control), from the agent's start-up line.
    pub fn cong_control_id(&self) -> Option<u32> {
        let log = self.0.log();
        let at = log.find("ccp_cong_control=")? + "ccp_cong_control=".len();
        let digits: String = log[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    }

    pub fn status_summary(&self) -> anyhow::Result<serde_json::Value> {
        self.0.status_summary()
    }

    /// Stops the agent cleanly; its whole log.
    pub fn stop_log(self) -> anyhow::Result<String> {
        self.0.stop()
    }

    /// Stops the agent cleanly and reads its final statistics.
    pub fn stop(self) -> anyhow::Result<Summary> {
        let log = self.0.stop()?;
        let line = log.lines().rev().find(|l| l.contains("ebpf datapath stats")).context("no statistics in the agent's log")?;
        let num = |k: &str| field(line, k).and_then(|v| v.parse().ok()).unwrap_or(0);
        let reports = field(line, "stats")
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .and_then(|v| v["reports"].as_u64())
            .unwrap_or(0);
        Ok(Summary { latency_p50_us: num("latency_p50_us"), latency_p99_us: num("latency_p99_us"), reports })
    }
}
