//! The soak's agents: `ccp-agent` on the libccp unix datapath (serving ccp-test-datapath) and on
//! the eBPF datapath (the kernel flows), each with a configuration, control socket and pin
//! directory of this soak's own, restarted with `kill -9` on the same configuration. Their
//! stderr is counted line by line (the log volume, over every life); what is not a per-flow line
//! goes to a file in the soak's directory, for reading after a run.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccp_bench_harness::process::terminate;
use serde_json::Value;

use super::census::Listed;
use super::process::tie_to_this_process;

/// How long an agent may take to answer on its control socket after it was started.
const START_LIMIT: Duration = Duration::from_secs(20);
/// How long a clean stop may take (the eBPF agent detaches and drains its ring).
const STOP_GRACE: Duration = Duration::from_secs(30);
/// Lines of each agent's log kept in memory for error messages.
const TAIL_LINES: usize = 40;
/// The messages an agent logs once per flow: counted, not kept.
const PER_FLOW: [&str; 3] = ["flow started", "flow closed", "adopting a running flow"];

/// Which datapath an agent serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Libccp,
    Ebpf,
}

impl Kind {
    pub fn key(self) -> &'static str {
        match self {
            Kind::Libccp => "libccp",
            Kind::Ebpf => "ebpf",
        }
    }
}

/// An agent's stderr over all its lives.
#[derive(Default)]
struct Tally {
    lines: AtomicU64,
    warnings: AtomicU64,
    tail: Mutex<VecDeque<String>>,
    file: Mutex<Option<File>>,
}

impl Tally {
    fn add(&self, line: String) {
        self.lines.fetch_add(1, Ordering::Relaxed);
        let warning = line.contains(" WARN ") || line.contains(" ERROR ");
        if warning {
            self.warnings.fetch_add(1, Ordering::Relaxed);
        }
        if warning || !PER_FLOW.iter().any(|m| line.contains(m)) {
            if let Ok(mut f) = self.file.lock() {
                if let Some(f) = f.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
            }
        }
        if let Ok(mut t) = self.tail.lock() {
            if t.len() == TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    }

    fn note(&self, line: &str) {
        if let Ok(mut f) = self.file.lock() {
            if let Some(f) = f.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        }
    }

    fn tail(&self) -> String {
        self.tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default()
    }
}

/// One agent, running or between lives.
pub struct Agent {
    pub kind: Kind,
    bin: PathBuf,
    config: PathBuf,
    socket: PathBuf,
    child: Option<Child>,
    reader: Option<JoinHandle<()>>,
    tally: Arc<Tally>,
}

impl Agent {
    /// An agent of `kind` whose configuration, control socket and log live in `dir`; `datapath`
    /// is its `[datapath]` section.
    pub fn new(kind: Kind, bin: &Path, dir: &Path, datapath: &str) -> anyhow::Result<Agent> {
        let config = dir.join(format!("agent-{}.toml", kind.key()));
        let socket = dir.join(format!("ctl-{}.sock", kind.key()));
        std::fs::write(
            &config,
            format!("[control]\nsocket = \"{}\"\n{datapath}\n[default]\nalgorithm = \"reno\"\n", socket.display()),
        )?;
        let log = File::create(dir.join(format!("agent-{}.log", kind.key())))?;
        let tally = Tally { file: Mutex::new(Some(log)), ..Tally::default() };
        Ok(Agent { kind, bin: bin.to_path_buf(), config, socket, child: None, reader: None, tally: Arc::new(tally) })
    }

    /// Starts a life and waits until the agent answers on its control socket; how long that took.
    pub fn start(&mut self) -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--log-level", "info", "run", "-c"]).arg(&self.config);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        tie_to_this_process(&mut cmd);
        let mut child = cmd.spawn().with_context(|| format!("starting {}", self.bin.display()))?;
        let stderr = child.stderr.take().context("the agent's stderr")?;
        let tally = Arc::clone(&self.tally);
        tally.note(&format!("--- soak: agent started (pid {}) ---", child.id()));
        self.reader = Some(std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                tally.add(line);
            }
        }));
        self.child = Some(child);
        loop {
            if self.summary().is_ok() {
                return Ok(t0.elapsed());
            }
            if let Some(st) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                self.join_reader();
                bail!("the {} agent exited ({st}) while starting:\n{}", self.kind.key(), self.tally.tail());
            }
            if t0.elapsed() > START_LIMIT {
                bail!("the {} agent did not answer within {} s:\n{}", self.kind.key(), START_LIMIT.as_secs(), self.tally.tail());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kill -9`: the agent gets no chance to clean up, as in a crash.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut c) = self.child.take() {
            c.kill().context("kill -9 of the agent")?;
            let _ = c.wait();
            self.tally.note("--- soak: agent killed with SIGKILL ---");
        }
        self.join_reader();
        Ok(())
    }

    /// SIGTERM (SIGKILL after the grace): the agent's exit status.
    pub fn stop(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        let Some(mut c) = self.child.take() else { return Ok(None) };
        let st = terminate(&mut c, STOP_GRACE)?;
        self.join_reader();
        Ok(Some(st))
    }

    fn join_reader(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Lines written to stderr over every life.
    pub fn log_lines(&self) -> u64 {
        self.tally.lines.load(Ordering::Relaxed)
    }

    /// WARN and ERROR lines over every life.
    pub fn warnings(&self) -> u64 {
        self.tally.warnings.load(Ordering::Relaxed)
    }

    /// Why the agent is gone, if it exited on its own.
    pub fn exited(&mut self) -> Option<String> {
        let st = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        self.join_reader();
        Some(format!("the {} agent exited ({st}):\n{}", self.kind.key(), self.tally.tail()))
    }

    /// One request on the control socket; its `result`.
    fn request(&self, req: &Value) -> anyhow::Result<Value> {
        let mut s = std::os::unix::net::UnixStream::connect(&self.socket)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        writeln!(s, "{req}")?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line)?;
        let v: Value = serde_json::from_str(&line).with_context(|| format!("the agent's answer: {line}"))?;
        if v["ok"] != true {
            bail!("the {} agent refused {req}: {}", self.kind.key(), v["error"]);
        }
        Ok(v["result"].clone())
    }

    /// `ctl status --summary`.
    pub fn summary(&self) -> anyhow::Result<Value> {
        self.request(&serde_json::json!({ "cmd": "status", "summary": true }))
    }

    /// Every flow the agent lists (`ctl status`, page by page).
    pub fn flows(&self) -> anyhow::Result<Vec<Listed>> {
        let mut out = Vec::new();
        loop {
            let r = self.request(&serde_json::json!({ "cmd": "status", "offset": out.len() }))?;
            let rows = r["flows"].as_array().context("status without flow rows")?;
            for f in rows {
                let id = f["sid"].as_u64().context("a flow row without sid")?;
                out.push(Listed { id: u32::try_from(id)?, report_age_ms: f["report_age_ms"].as_u64() });
            }
            if r["flows_more"] != true || rows.is_empty() {
                return Ok(out);
            }
        }
    }

    /// `ccp-agent ctl swap --all ALG`, as an operator runs it: the number of flows swapped.
    pub fn swap_all(&self, algorithm: &str) -> anyhow::Result<u64> {
        let out = Command::new(&self.bin)
            .args(["ctl", "--socket"])
            .arg(&self.socket)
            .args(["--json", "swap", "--all", algorithm])
            .stdin(Stdio::null())
            .output()
            .context("running ccp-agent ctl swap")?;
        if !out.status.success() {
            bail!("ctl swap --all {algorithm} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        let v: Value = serde_json::from_slice(&out.stdout).context("ctl swap's JSON")?;
        let swapped = if v["swapped"].is_array() { &v["swapped"] } else { &v["result"]["swapped"] };
        Ok(swapped.as_array().map_or(0, |a| a.len() as u64))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = terminate(&mut c, STOP_GRACE);
        }
        self.join_reader();
    }
}
