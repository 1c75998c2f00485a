//! The processes ccp-bench starts, each stopped (and reaped) on drop, so an error half-way
//! leaves nothing running: an agent with its stderr collected, a datapath whose resource usage
//! is read when it is reaped, and a sub-benchmark.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a child of ours that has not been reaped (callers check).
    unsafe { libc::kill(pid as i32, sig) };
}

/// SIGTERM, up to `grace` for it to exit, then SIGKILL; its exit status.
fn terminate(child: &mut Child, grace: Duration) -> std::io::Result<ExitStatus> {
    if let Some(st) = child.try_wait()? {
        return Ok(st);
    }
    signal(child.id(), libc::SIGTERM);
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

/// An agent under test: stderr collected, stopped with SIGTERM.
pub struct Agent {
    child: Child,
    done: bool,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
    what: String,
}

impl Agent {
    pub fn spawn(mut cmd: Command, what: impl Into<String>) -> anyhow::Result<Agent> {
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
        Ok(Agent { child, done: false, log, reader: Some(reader), what })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Waits up to 10 s for `path` to exist (the agent's socket); fails at once if it exits.
    pub fn wait_for(&mut self, path: &Path) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while !path.exists() {
            if let Some(st) = self.child.try_wait()? {
                self.done = true;
                // Its last lines, which say why.
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

    /// SIGTERM (SIGKILL after 10 s); its exit status and whole log.
    pub fn stop(mut self) -> anyhow::Result<(ExitStatus, String)> {
        let st = terminate(&mut self.child, Duration::from_secs(10))?;
        self.done = true;
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        Ok((st, self.log()))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if !self.done {
            let _ = terminate(&mut self.child, Duration::from_secs(2));
        }
    }
}

/// What a reaped process used.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Exit code, or 128 + the signal that ended it.
    pub code: i32,
    pub wall_s: f64,
    pub cpu_s: f64,
}

/// A process whose resource usage is read when it is reaped (wait4), killed on drop.
pub struct Timed {
    child: Child,
    started: Instant,
    reaped: bool,
}

impl Timed {
    pub fn spawn(mut cmd: Command, what: &str) -> anyhow::Result<Timed> {
        let started = Instant::now();
        let child = cmd.stdin(Stdio::null()).spawn().with_context(|| format!("starting {what}"))?;
        Ok(Timed { child, started, reaped: false })
    }

    /// Waits for it to exit, at most `timeout` (then it is killed and this fails).
    pub fn wait(mut self, timeout: Duration) -> anyhow::Result<Usage> {
        let pid = self.child.id() as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: an all-zero rusage is a valid value to be overwritten.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: wait4 on our own child with valid out-pointers.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
            if r == pid {
                self.reaped = true;
                let wall_s = self.started.elapsed().as_secs_f64();
                let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
                let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
                return Ok(Usage { code, wall_s, cpu_s: tv(ru.ru_utime) + tv(ru.ru_stime) });
            }
            if r < 0 {
                bail!("wait4: {}", std::io::Error::last_os_error());
            }
            if self.started.elapsed() > timeout {
                bail!("did not finish within {} s", timeout.as_secs());
            }
            // Short, so the wall time is exact to a few ms; the polling costs this process only.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = terminate(&mut self.child, Duration::from_secs(5));
        }
    }
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
