//! The processes under test — the shim with a portus agent, and ccp-agent on the native eBPF
//! path — with their logs and CPU time. Each is stopped on drop (SIGTERM, so it cleans up).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A child whose stderr is collected.
pub struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
    what: &'static str,
}

impl Proc {
    fn spawn(mut cmd: Command, what: &'static str) -> anyhow::Result<Proc> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let stderr = child.stderr.take().context("stderr")?;
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut l) = sink.lock() {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        });
        Ok(Proc { child, log, what })
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn wait_log(&mut self, needle: &str) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while !self.log().contains(needle) {
            if let Ok(Some(st)) = self.child.try_wait() {
                bail!("{} exited ({st}):\n{}", self.what, self.log());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("{} did not start:\n{}", self.what, self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// CPU time so far, seconds (user + system).
    pub fn cpu_s(&self) -> f64 {
        process_cpu_s(self.child.id())
    }

    /// SIGTERM, then its whole log once it exited cleanly.
    pub fn stop(mut self) -> anyhow::Result<String> {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait()?;
        std::thread::sleep(Duration::from_millis(50));
        if !status.success() {
            bail!("{} failed: {status}\n{}", self.what, self.log());
        }
        Ok(self.log())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}

/// CPU time of a process, seconds (user + system), from /proc/PID/stat.
pub fn process_cpu_s(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// The value of `key=` in a tracing log line.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    Some(&rest[..rest.find(' ').unwrap_or(rest.len())])
}

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
pub fn start_agent(bin: &Path, cc: &str) -> anyhow::Result<(Proc, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("agent.toml");
    // Normal scheduling, as the shim has: neither side gets a real-time advantage.
    std::fs::write(
        &config,
        format!(
            "[control]\nsocket = \"{}\"\n[datapath]\nkind = \"ebpf\"\n[datapath.ebpf]\nname = \"{cc}\"\n\
             pin_dir = \"/sys/fs/bpf/ccpshim-bench-{cc}\"\nstate_file = \"{}\"\nrealtime_priority = 0\n\
             [default]\nalgorithm = \"reno\"\n",
            dir.path().join("ctl.sock").display(),
            dir.path().join("attach.json").display()
        ),
    )?;
    let mut cmd = Command::new(bin);
    cmd.args(["--log-level", "info", "run", "-c"]).arg(&config);
    let mut agent = Proc::spawn(cmd, "ccp-agent")?;
    agent.wait_log("ebpf congestion control registered")?;
    Ok((agent, dir))
}
