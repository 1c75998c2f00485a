//! Fixtures for the kernel datapath tests: the link emulator, the agent on the eBPF datapath,
//! iperf3 in the emulator's namespaces. Everything started here is stopped on drop, by pid or by
//! name, even when the test fails.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ccp_integration_tests::{bin, Agent};

/// One test at a time: each moves real traffic and registers a congestion control.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// A per-test tag: names, prefixes and paths of one test never collide with another's (or with
/// a real agent's `ccp`).
pub fn tag(test: &str) -> String {
    format!("{test}{}", std::process::id() % 100_000)
}

/// `ccp-router run`: two namespaces joined through a delay line and a rate-limited link.
pub struct Router {
    child: Child,
    pub prefix: String,
    pub sender_ns: String,
    pub receiver_ns: String,
    pub receiver_addr: String,
}

impl Router {
    pub fn start(prefix: &str, delay_ms: u32, rate_mbps: u32, queue_pkts: u32) -> Router {
        Self::start_with(prefix, delay_ms, rate_mbps, queue_pkts, &[])
    }

    /// The router with `extra` `run` arguments (a queue discipline and its options).
    pub fn start_with(prefix: &str, delay_ms: u32, rate_mbps: u32, queue_pkts: u32, extra: &[&str]) -> Router {
        let mut child = Command::new(bin("ccp-router"))
            .args(["run", "--netns-prefix", prefix, "--delay-ms", &delay_ms.to_string()])
            .args(["--rate-mbps", &rate_mbps.to_string(), "--queue-pkts", &queue_pkts.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ccp-router");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout).read_line(&mut line).expect("read the router's ready line");
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = child.kill();
                panic!("ccp-router did not get ready ({e}): {line:?}");
            }
        };
        assert_eq!(v["event"], "ready", "{line}");
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Router {
            prefix: prefix.to_string(),
            sender_ns: s("sender_ns"),
            receiver_ns: s("receiver_ns"),
            receiver_addr: s("receiver_addr"),
            child,
        }
    }

    pub fn netns_path(ns: &str) -> PathBuf {
        Path::new("/run/netns").join(ns)
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new(bin("ccp-router")).args(["cleanup", "--netns-prefix", &self.prefix]).status();
    }
}

/// The agent's configuration for one test, in a directory of its own.
pub struct AgentSetup {
    /// Holds the configuration, the attach state, the control socket and the flow trace.
    dir: tempfile::TempDir,
    pub name: String,
    pub config: PathBuf,
    tag: String,
}

impl AgentSetup {
    /// `[datapath.ebpf]` under a test name and pin directory, plus `extra` TOML.
    pub fn new(tag: &str, extra: &str) -> AgentSetup {
        let dir = tempfile::tempdir().expect("tempdir");
        let name = format!("ccp{tag}");
        assert!(name.len() <= 15, "congestion control name {name} too long");
        let config = dir.path().join("agent.toml");
        let text = format!(
            "[control]\nsocket = \"{}\"\n\n[datapath]\nkind = \"ebpf\"\n\n[datapath.ebpf]\nname = \"{name}\"\n\
             pin_dir = \"/sys/fs/bpf/ccp-e2e-{tag}\"\nstate_file = \"{}\"\n{extra}\n",
            dir.path().join("ctl.sock").display(),
            dir.path().join("attach.json").display()
        );
        std::fs::write(&config, text).expect("write config");
        AgentSetup { dir, name, config, tag: tag.to_string() }
    }

    pub fn start(&self) -> Agent {
        self.start_with("info,ccp_agent::datapath::ebpf=trace", &[])
    }

    /// The agent with a log filter and extra `run` arguments.
    pub fn start_with(&self, log: &str, extra: &[&str]) -> Agent {
        let agent = Agent::spawn(self.command(Command::new(bin("ccp-agent")), log, extra), None);
        agent.wait_log("ebpf congestion control registered", Duration::from_secs(10));
        agent
    }

    /// `cmd` (the agent's binary, or a launcher and then it) with `--log-level LOG run -c CONFIG`
    /// and `extra` arguments.
    pub fn command(&self, mut cmd: Command, log: &str, extra: &[&str]) -> Command {
        cmd.args(["--log-level", log, "run", "-c"]).arg(&self.config).args(extra);
        cmd
    }

    pub fn control_socket(&self) -> PathBuf {
        self.dir.path().join("ctl.sock")
    }

    /// Where `--trace-flows` output goes for this test.
    pub fn trace_path(&self) -> PathBuf {
        self.dir.path().join("trace.jsonl")
    }

    pub fn pin_dir(&self) -> PathBuf {
        PathBuf::from(format!("/sys/fs/bpf/ccp-e2e-{}", self.tag))
    }

    /// `ccp-agent attach|detach ARGS -c CONFIG`; returns (success, stdout + stderr).
    pub fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(bin("ccp-agent")).args(args).arg("-c").arg(&self.config).output().expect("run ccp-agent");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }
}

impl Drop for AgentSetup {
    /// A test that failed before the agent's clean shutdown leaves its pins behind.
    fn drop(&mut self) {
        let dir = PathBuf::from(format!("/sys/fs/bpf/ccp-e2e-{}", self.tag));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

/// Runs a command inside a namespace.
pub fn in_ns(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    c
}

/// `iperf3 -s -1` in the receiver's namespace, killed on drop.
pub struct IperfServer(Child);

impl IperfServer {
    pub fn start(ns: &str, addr: &str, port: u16) -> IperfServer {
        let child = in_ns(ns)
            .args(["iperf3", "-s", "-1", "-B", addr, "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn iperf3 -s (scripts/setup.sh installs iperf3)");
        std::thread::sleep(Duration::from_millis(300));
        IperfServer(child)
    }
}

impl Drop for IperfServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `iperf3 -c ... -J`; its per-interval throughput once finished.
pub struct IperfClient(Child);

/// Throughput of consecutive intervals: (end of interval s, Mbit/s).
pub type Intervals = Vec<(f64, f64)>;

impl IperfClient {
    pub fn start(cmd: &mut Command, addr: &str, port: u16, seconds: u32, cc: &str) -> IperfClient {
        Self::start_parallel(cmd, addr, port, seconds, cc, 1)
    }

    /// `streams` parallel TCP connections (iperf3 -P).
    pub fn start_parallel(cmd: &mut Command, addr: &str, port: u16, seconds: u32, cc: &str, streams: u32) -> IperfClient {
        cmd.args(["iperf3", "-c", addr, "-p", &port.to_string(), "-t", &seconds.to_string(), "-i", "0.5", "-J", "-C", cc]);
        cmd.args(["-P", &streams.to_string()]);
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn iperf3 -c");
        IperfClient(child)
    }

    /// iperf3's JSON report once it finished.
    pub fn json(mut self) -> serde_json::Value {
        let mut out = String::new();
        self.0.stdout.take().expect("stdout").read_to_string(&mut out).expect("read iperf3 output");
        let _ = self.0.wait();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("iperf3 JSON ({e}): {out}"));
        assert!(v["error"].is_null(), "iperf3 failed: {}", v["error"]);
        v
    }

    pub fn finish(self) -> Intervals {
        self.json()["intervals"]
            .as_array()
            .expect("intervals")
            .iter()
            .map(|i| (i["sum"]["end"].as_f64().unwrap_or(0.0), i["sum"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6))
            .collect()
    }
}

impl Drop for IperfClient {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Mean throughput of the intervals ending in (from, to].
pub fn mean_between(iv: &Intervals, from: f64, to: f64) -> f64 {
    let sel: Vec<f64> = iv.iter().filter(|(end, _)| *end > from + 1e-6 && *end <= to + 1e-6).map(|(_, m)| *m).collect();
    assert!(!sel.is_empty(), "no intervals in ({from}, {to}]: {iv:?}");
    sel.iter().sum::<f64>() / sel.len() as f64
}

/// The value of `key=` in a log line (tracing's `key=value` fields).
pub fn field(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"').to_string())
}

/// The setup script and CI run as root; a developer without root sees why these are skipped.
pub fn skip_without_root(test: &str) -> bool {
    if !ccp_integration_tests::is_root() {
        eprintln!("SKIPPED {test}: needs root (BPF struct_ops, network namespaces, cgroups)");
        return true;
    }
    false
}

/// The lines of a flow trace (`--trace-flows`), one JSON object per report.
pub fn trace_lines(trace: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(trace).expect("flow trace").lines().map(|l| serde_json::from_str(l).expect("trace line")).collect()
}

/// The lines of the flow that carried the most data (iperf3's data connection).
pub fn data_flow(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    let mut acked: std::collections::BTreeMap<u64, u64> = Default::default();
    for l in lines {
        *acked.entry(l["flow"].as_u64().unwrap()).or_default() += l["acked_bytes"].as_u64().unwrap();
    }
    let flow = acked.iter().max_by_key(|(_, a)| **a).map(|(f, _)| *f).expect("no flow in the trace");
    lines.iter().filter(|l| l["flow"].as_u64() == Some(flow)).collect()
}

/// `ctl status` every 50 ms for `period`, each answered: the slowest answer.
pub fn slowest_status(socket: &Path, period: Duration) -> Duration {
    use ccp_agent::control::{client::call, protocol::Request};
    let mut slowest = Duration::ZERO;
    let t0 = Instant::now();
    while t0.elapsed() < period {
        let t = Instant::now();
        let r = call(socket, &Request::Status { summary: true, offset: None, limit: None }).expect("status");
        assert!(r.ok);
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    slowest
}
