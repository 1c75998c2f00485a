//! The agent under test: `ccp-agent run` on the eBPF datapath, its log and its CPU time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The congestion control's name in every benchmark run.
pub const CC: &str = "ccpbench";

pub struct Agent {
    child: Child,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

/// What the agent said at shutdown.
#[derive(Debug, Default, Clone, Copy)]
pub struct Summary {
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
    pub reports: u64,
}

/// The value of `key=` in a log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    Some(&rest[..rest.find(' ').unwrap_or(rest.len())])
}

impl Agent {
    /// Starts the agent with Reno by default and the given `[datapath.ebpf]` lines.
    pub fn start(bin: &Path, ebpf: &str) -> anyhow::Result<Agent> {
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "[datapath]\nkind = \"ebpf\"\n[datapath.ebpf]\nname = \"{CC}\"\npin_dir = \"/sys/fs/bpf/ccp-bench-{}\"\n\
                 state_file = \"{}\"\n{ebpf}\n[default]\nalgorithm = \"reno\"\n",
                std::process::id(),
                dir.path().join("attach.json").display()
            ),
        )?;
        let mut child = Command::new(bin)
            .args(["--log-level", "info", "run", "-c"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let stderr = child.stderr.take().context("agent stderr")?;
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut l) = sink.lock() {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        });
        let agent = Agent { child, log, _dir: dir };
        let t0 = Instant::now();
        while !agent.log().contains("ebpf congestion control registered") {
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("the agent did not start:\n{}", agent.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(agent)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The id of the per-ACK program (cong_control), from the agent's start-up line.
    pub fn cong_control_id(&self) -> Option<u32> {
        let log = self.log();
        let at = log.find("ccp_cong_control=")? + "ccp_cong_control=".len();
        let digits: String = log[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    }

    /// Stops the agent cleanly and reads its final statistics.
    pub fn stop(mut self) -> anyhow::Result<Summary> {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait()?;
        std::thread::sleep(Duration::from_millis(50));
        let log = self.log();
        if !status.success() {
            bail!("the agent failed: {status}\n{log}");
        }
        let line = log.lines().rev().find(|l| l.contains("ebpf datapath stats")).context("no statistics in the agent's log")?;
        let num = |k: &str| field(line, k).and_then(|v| v.parse().ok()).unwrap_or(0);
        let reports = field(line, "stats")
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .and_then(|v| v["reports"].as_u64())
            .unwrap_or(0);
        Ok(Summary { latency_p50_us: num("latency_p50_us"), latency_p99_us: num("latency_p99_us"), reports })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child; a clean stop undoes what it installed.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}
