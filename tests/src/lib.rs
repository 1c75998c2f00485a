//! Harness for end-to-end tests: locate the workspace's binaries, run the agent and the libccp
//! test datapath as child processes, parse the datapath's JSON-lines trace.

pub mod syscall_filter;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `target/<profile>/` of this build.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test-binary>
    exe.parent().and_then(Path::parent).expect("test binary lives in target/<profile>/deps").to_path_buf()
}

/// Path of a workspace binary; fails with a clear message if it was not built.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(p.exists(), "{} is missing: run `cargo build --workspace` before the end-to-end tests", p.display());
    p
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A running agent, killed on drop; its stderr (the log) is captured.
pub struct Agent {
    child: Child,
    pub socket: PathBuf,
    log: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// How an agent ended, with everything it logged (including its shutdown summary).
pub struct Stopped {
    pub status: std::process::ExitStatus,
    pub log: String,
}

impl Agent {
    /// Starts `ccp-agent run` on a unix socket `<dir>/agent` plus `extra` arguments, and waits
    /// until the socket exists.
    pub fn start_unix(dir: &Path, extra: &[&str]) -> Agent {
        let mut cmd = Command::new(bin("ccp-agent"));
        cmd.args(["--log-level", "debug", "run", "--datapath", "unix", "--ipc-dir"])
            .arg(dir)
            .args(["--ipc-name", "agent"])
            // Tests run side by side: each agent gets its own control socket, never the system's.
            .arg("--control-socket")
            .arg(dir.join("control.sock"))
            .args(extra);
        Agent::spawn(cmd, Some(dir.join("agent")))
    }

    pub fn spawn(mut cmd: Command, socket: Option<PathBuf>) -> Agent {
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn ccp-agent");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let agent = Agent { child, socket: socket.clone().unwrap_or_default(), log, reader: Some(reader) };
        if let Some(sock) = socket {
            agent.wait_for(|| sock.exists(), Duration::from_secs(10), "the agent's socket to appear");
        }
        agent
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the agent logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        self.wait_for(|| self.log().contains(needle), timeout, &format!("log line containing {needle:?}"));
    }

    fn wait_for(&self, mut cond: impl FnMut() -> bool, timeout: Duration, what: &str) {
        let t0 = Instant::now();
        while !cond() {
            assert!(t0.elapsed() < timeout, "timed out waiting for {what}; agent log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(self) -> Stopped {
        self.signal(libc::SIGTERM);
        self.wait_exit(Duration::from_secs(10), "stop on SIGTERM")
    }

    /// Waits up to `timeout` for the agent to exit by itself (`what` it should have done, for the
    /// failure message).
    pub fn wait_exit(mut self, timeout: Duration, what: &str) -> Stopped {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return Stopped { status, log: self.log() };
            }
            assert!(t0.elapsed() < timeout, "agent did not {what}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, as a crash would.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One JSON line of the test datapath's trace.
pub type Event = serde_json::Value;

/// Output of a finished test-datapath run.
pub struct DatapathRun {
    pub events: Vec<Event>,
    pub stderr: String,
    pub status: std::process::ExitStatus,
}

impl DatapathRun {
    pub fn of_kind<'a>(&'a self, ev: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
        self.events.iter().filter(move |e| e["ev"] == ev)
    }

    /// (t_us, cwnd_bytes) for every commanded-cwnd change of `sid`.
    pub fn cwnd_trace(&self, sid: u64) -> Vec<(u64, u64)> {
        self.of_kind("cwnd")
            .filter(|e| e["sid"].as_u64() == Some(sid))
            .filter_map(|e| Some((e["t_us"].as_u64()?, e["cwnd_bytes"].as_u64()?)))
            .collect()
    }

    /// The commanded cwnd of `sid` in force at `t_us`.
    pub fn cwnd_at(&self, sid: u64, t_us: u64) -> Option<u64> {
        self.cwnd_trace(sid).iter().take_while(|(t, _)| *t <= t_us).last().map(|(_, c)| *c)
    }
}

/// A `ccp-test-datapath` process whose output is collected as it is written (an undrained
/// pipe would block the datapath).
pub struct RunningDatapath {
    child: Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

/// Runs `ccp-test-datapath` to completion against the agent socket in `dir`.
pub fn run_datapath(dir: &Path, name: &str, args: &[&str]) -> DatapathRun {
    finish_datapath(spawn_datapath(dir, name, args))
}

pub fn spawn_datapath(dir: &Path, name: &str, args: &[&str]) -> RunningDatapath {
    let mut child = Command::new(bin("ccp-test-datapath"))
        .arg("--dir")
        .arg(dir)
        .args(["--name", name, "--agent", "agent"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ccp-test-datapath");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    RunningDatapath { child, stdout, stderr }
}

pub fn finish_datapath(mut dp: RunningDatapath) -> DatapathRun {
    let status = dp.child.wait().expect("wait");
    let out = dp.stdout.join().expect("stdout reader");
    let err = dp.stderr.join().expect("stderr reader");
    let events = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect();
    DatapathRun { events, stderr: err, status }
}

/// Garbage a local process that can write a libccp datapath's socket might send: a truncated
/// header, a header claiming more bytes than sent, an unknown type, an INSTALL with nonsense
/// counts.
pub const MALFORMED_LIBCCP: [&[u8]; 4] = [
    &[1, 0],
    &[2, 0, 200, 0, 1, 0, 0, 0],
    &[99, 0, 8, 0, 1, 0, 0, 0],
    &[3, 0, 24, 0, 1, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0],
];

/// Sends [`MALFORMED_LIBCCP`] `rounds` times to the datapath socket `sock`, 10 ms apart, once
/// the socket exists (at most 10 s); how long that took.
pub fn send_malformed_libccp(sock: &Path, rounds: usize) -> Duration {
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "the datapath's socket {} did not appear", sock.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = std::os::unix::net::UnixDatagram::unbound().expect("a unix datagram socket");
    for _ in 0..rounds {
        for b in MALFORMED_LIBCCP {
            let _ = s.send_to(b, sock);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}
