//! A process whose resource usage is read when it is reaped (a datapath, a sub-benchmark),
//! stopped and reaped on drop, so an error half-way leaves nothing running. Agents are the
//! harness's `process::Proc`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
pub use ccp_bench_harness::process::tail;
use ccp_bench_harness::process::terminate;

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
