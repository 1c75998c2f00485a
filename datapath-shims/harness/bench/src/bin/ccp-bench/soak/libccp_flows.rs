//! The soak's libccp flows: one `ccp-test-datapath` (the real libccp, emulated TCP-like flows)
//! with a steady population, each flow replaced by a new connection after its life
//! (`--flow-life-ms`: libccp hands the freed sid out again), writing only its start and end
//! records (`--quiet`), which a thread reads to know the flows the datapath runs.
//!
//! Each flow has a path of its own, slow enough that a thousand of them cost little: 50 ms,
//! 0.2 Mbit/s (17 packets per second), a 12-packet buffer, so Reno's sawtooth loses a packet
//! every few seconds and recovers by fast retransmit, and a flow always has data in flight.
//! While the agent is down, the flows keep the program libccp holds, their reports go nowhere,
//! and a new flow's CREATE waits for the agent to come back (the datapath sends it again).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use ccp_bench_harness::process::terminate;
use serde::Serialize;

use super::census::Snapshot;
use super::process::tie_to_this_process;

/// The datapath's socket name in the agent's socket directory.
pub const NAME: &str = "soak-dp";

/// What the datapath reported so far.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub started: u64,
    pub ended: u64,
    /// Reports the ended flows sent, and their failed invokes and timeouts.
    pub ended_reports: u64,
    pub invoke_errors: u64,
    pub timeouts: u64,
    /// Ended flows that never sent a report.
    pub ended_without_reports: u64,
    pub bad_lines: u64,
    /// sid → its start (µs of the datapath's clock), for flows running now.
    #[serde(skip)]
    pub live: Snapshot,
}

/// The running datapath, stopped on drop.
pub struct LibccpFlows {
    child: Option<Child>,
    reader: Option<JoinHandle<()>>,
    tally: Arc<Mutex<Tally>>,
}

impl LibccpFlows {
    /// Starts `flows` flows living `life` each, on the agent socket `portus` in `ipc_dir`,
    /// for at most `limit`; diagnostics go to `stderr_to`.
    pub fn start(
        bin: &Path,
        ipc_dir: &Path,
        flows: usize,
        life: Duration,
        limit: Duration,
        stderr_to: &PathBuf,
    ) -> anyhow::Result<Self> {
        let mut cmd = Command::new(bin);
        cmd.arg("--dir").arg(ipc_dir).args(["--name", NAME, "--agent", "portus", "--quiet"]);
        cmd.args(["--flows", &flows.to_string(), "--flow-life-ms", &life.as_millis().to_string()]);
        cmd.args(["--rtt-ms", "50", "--link-mbps", "0.2", "--queue-pkts", "12"]);
        cmd.args(["--duration-ms", &limit.as_millis().to_string(), "--wait-agent-ms", "20000"]);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::from(std::fs::File::create(stderr_to)?));
        tie_to_this_process(&mut cmd);
        let mut child = cmd.spawn().with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("the datapath's stdout")?;
        let tally = Arc::new(Mutex::new(Tally::default()));
        let t = Arc::clone(&tally);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(mut t) = t.lock() {
                    record(&mut t, &line);
                }
            }
        });
        Ok(LibccpFlows { child: Some(child), reader: Some(reader), tally })
    }

    pub fn tally(&self) -> Tally {
        self.tally.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// The flows running now.
    pub fn live(&self) -> Snapshot {
        self.tally.lock().map(|t| t.live.clone()).unwrap_or_default()
    }

    /// Whether the datapath still runs.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGTERM: the datapath closes every flow (the agent sees them close) and exits 0.
    pub fn stop(mut self) -> anyhow::Result<Tally> {
        if let Some(mut c) = self.child.take() {
            let st = terminate(&mut c, Duration::from_secs(10))?;
            if let Some(r) = self.reader.take() {
                let _ = r.join();
            }
            if !st.success() {
                bail!("ccp-test-datapath exited with {st}");
            }
        }
        Ok(self.tally())
    }
}

impl Drop for LibccpFlows {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = terminate(&mut c, Duration::from_secs(5));
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// Takes one JSON line of the datapath's output into the tally.
fn record(t: &mut Tally, line: &str) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        t.bad_lines += 1;
        return;
    };
    let (Some(sid), Some(t_us)) = (v["sid"].as_u64().and_then(|s| u32::try_from(s).ok()), v["t_us"].as_u64()) else {
        t.bad_lines += 1;
        return;
    };
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    match v["ev"].as_str() {
        Some("start") => {
            t.started += 1;
            t.live.insert(sid, t_us);
        }
        Some("end") => {
            t.ended += 1;
            t.live.remove(&sid);
            t.ended_reports += n("reports");
            t.ended_without_reports += u64::from(n("reports") == 0);
            t.invoke_errors += n("invoke_errors");
            t.timeouts += n("timeouts");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_ends_track_the_flows_running() {
        let mut t = Tally::default();
        for l in [
            r#"{"t_us":0,"sid":1,"ev":"start","flow":0}"#,
            r#"{"t_us":5,"sid":2,"ev":"start","flow":1}"#,
            r#"{"t_us":900,"sid":1,"ev":"end","reason":"life","reports":12,"invoke_errors":0,"timeouts":1}"#,
            r#"{"t_us":900,"sid":1,"ev":"start","flow":0}"#,
            "not json",
        ] {
            record(&mut t, l);
        }
        assert_eq!(t.live, [(1, 900), (2, 5)].into_iter().collect());
        assert_eq!((t.started, t.ended, t.ended_reports, t.timeouts, t.bad_lines), (3, 1, 12, 1, 1));
    }
}
