//! A program under test (an agent, the shim, a portus agent): started with its stderr collected,
//! so a benchmark can wait for its start-up line and read its final statistics, its CPU time
//! read from /proc, and stopped with SIGTERM so it cleans up what it installed (also on drop,
//! when a benchmark fails half-way).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How long a stopped process has after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A child whose stderr is collected.
pub struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
    what: String,
    reaped: bool,
}

/// SIGTERM, up to `grace` for it to exit, then SIGKILL; its exit status.
pub fn terminate(child: &mut Child, grace: Duration) -> std::io::Result<ExitStatus> {
    if let Some(st) = child.try_wait()? {
        return Ok(st);
    }
    // SAFETY: kill(2) on our own child, not reaped yet (try_wait above).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait()
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Proc {
    /// Starts `cmd`; `what` names it in errors ("the agent").
    pub fn spawn(mut cmd: Command, what: impl Into<String>) -> anyhow::Result<Proc> {
        let what = what.into();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let stderr = child.stderr.take().context("stderr")?;
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut l) = sink.lock() {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        });
        Ok(Proc { child, log, reader: Some(reader), what, reaped: false })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Waits up to 10 s for `needle` in its log; fails at once if it exits.
    pub fn wait_log(&mut self, needle: &str) -> anyhow::Result<()> {
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

    /// Waits up to 10 s for `path` to exist (a socket it binds); fails at once if it exits.
    pub fn wait_for_path(&mut self, path: &Path) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while !path.exists() {
            if let Some(st) = self.child.try_wait()? {
                self.reaped = true;
                // Its last lines say why.
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                bail!("{} exited ({st}) before {} appeared:\n{}", self.what, path.display(), tail(&self.log(), 20));
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("{} did not create {} within 10 s:\n{}", self.what, path.display(), tail(&self.log(), 20));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// CPU time so far, seconds (user + system).
    pub fn cpu_s(&self) -> f64 {
        process_cpu_s(self.child.id())
    }

    /// SIGTERM (SIGKILL after 10 s); its exit status and whole log, whatever the status.
    pub fn finish(mut self) -> anyhow::Result<(ExitStatus, String)> {
        let status = terminate(&mut self.child, STOP_GRACE)?;
        self.reaped = true;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Ok((status, self.log()))
    }

    /// SIGTERM, then its whole log once it exited cleanly.
    pub fn stop(self) -> anyhow::Result<String> {
        let what = self.what.clone();
        let (status, log) = self.finish()?;
        if !status.success() {
            bail!("{what} failed: {status}\n{log}");
        }
        Ok(log)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = terminate(&mut self.child, Duration::from_secs(2));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_a_log_line() {
        let line = "2026-01-01T00:00:00Z  INFO shim stats flows=2 acks=1234 wakeups=7";
        assert_eq!(field(line, "acks"), Some("1234"));
        assert_eq!(field(line, "wakeups"), Some("7"));
        assert_eq!(field(line, "flows"), Some("2"));
        assert_eq!(field(line, "drops"), None);
    }

    #[test]
    fn a_process_is_stopped_with_its_log() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo ready >&2; trap 'echo bye >&2; exit 0' TERM; while :; do sleep 0.01; done"]);
        let mut p = Proc::spawn(cmd, "sh").unwrap();
        p.wait_log("ready").unwrap();
        assert!(p.cpu_s() >= 0.0);
        assert!(p.stop().unwrap().contains("bye"));
    }
}
