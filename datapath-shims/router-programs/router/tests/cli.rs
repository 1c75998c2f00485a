//! The `ccp-router run` contract other components rely on: one JSON ready line and nothing else
//! on stdout, full teardown on SIGTERM, recovery from a crashed run's leftovers, and errors that
//! name the file and line.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::{netns_exists, Prefix};

const BIN: &str = env!("CARGO_BIN_EXE_ccp-router");
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A router child process, killed by pid if a test fails before stopping it.
struct Router {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Router {
    fn start(prefix: &str, extra: &[&str]) -> Router {
        let mut child = Command::new(BIN)
            .args(["run", "--netns-prefix", prefix, "--delay-ms", "5", "--rate-mbps", "10"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Router { child, stdout }
    }

    /// Reads the ready line (a blocking read; the deadline guards against a hung router).
    fn ready_line(&mut self) -> String {
        let t = Instant::now();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(t.elapsed() < READY_TIMEOUT, "no ready line within {READY_TIMEOUT:?}");
        line
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    /// Waits for exit; returns (status code, rest of stdout, stderr).
    fn wait(mut self) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "router did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status.code(), rest, err)
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn run_prints_one_ready_line_and_tears_down_on_sigterm() {
    require_network!();
    let prefix = Prefix::new();
    let summary = std::env::temp_dir().join(format!("{}-summary.json", prefix.name));
    let mut r = Router::start(&prefix.name, &["--summary-json", summary.to_str().unwrap()]);
    let line = r.ready_line();
    let expected = format!(
        "{{\"event\":\"ready\",\"sender_ns\":\"{p}-snd\",\"receiver_ns\":\"{p}-rcv\",\"sender_addr\":\"10.77.0.1\",\"receiver_addr\":\"10.77.0.2\"}}\n",
        p = prefix.name
    );
    assert_eq!(line, expected);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["event"], "ready");
    assert!(netns_exists(&format!("{}-snd", prefix.name)) && netns_exists(&format!("{}-rcv", prefix.name)));
    r.signal(libc::SIGTERM);
    let (code, rest, err) = r.wait();
    assert_eq!(code, Some(0), "stderr: {err}");
    assert_eq!(rest, "", "nothing but the ready line on stdout");
    assert!(err.contains("ccp-router summary"), "{err}");
    assert!(!netns_exists(&format!("{}-snd", prefix.name)) && !netns_exists(&format!("{}-rcv", prefix.name)));
    assert!(!std::path::Path::new(&format!("/run/ccp-router/{}.lock", prefix.name)).exists());
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    std::fs::remove_file(&summary).unwrap();
    // Capacity is bytes offered over the run divided by the run's length: 10 up to rounding.
    let capacity = s["down"]["capacity_mbps"].as_f64().unwrap();
    assert!((capacity - 10.0).abs() < 1e-9, "capacity {capacity}");
    assert_eq!(s["down"]["qdisc"], "droptail");
}

#[test]
fn sigint_works_too_and_a_crashed_runs_leftovers_are_recovered() {
    require_network!();
    let prefix = Prefix::new();
    let mut crashed = Router::start(&prefix.name, &[]);
    crashed.ready_line();
    crashed.signal(libc::SIGKILL);
    crashed.wait();
    // SIGKILL leaves the namespaces (bind mounts) behind; the TUN devices die with the process.
    assert!(netns_exists(&format!("{}-snd", prefix.name)));
    let mut again = Router::start(&prefix.name, &[]);
    assert!(again.ready_line().starts_with("{\"event\":\"ready\""));
    again.signal(libc::SIGINT);
    let (code, _, err) = again.wait();
    assert_eq!(code, Some(0));
    assert!(err.contains("left behind by a ccp-router"), "{err}");
    assert!(!netns_exists(&format!("{}-snd", prefix.name)));
}

#[test]
fn duration_stops_by_itself() {
    require_network!();
    let prefix = Prefix::new();
    let mut r = Router::start(&prefix.name, &["--duration-s", "0.5", "--qdisc", "codel"]);
    r.ready_line();
    let (code, rest, _) = r.wait();
    assert_eq!((code, rest.as_str()), (Some(0), ""));
    assert!(!netns_exists(&format!("{}-rcv", prefix.name)));
}

#[test]
fn bad_input_is_refused_before_anything_is_created() {
    let prefix = Prefix::new();
    let never = prefix.name.as_str();
    let trace = std::env::temp_dir().join(format!("ccprt-bad-{}.trace", std::process::id()));
    std::fs::write(&trace, "1\n2\n2\nx7\n").unwrap();
    let out = Command::new(BIN).args(["run", "--netns-prefix", never, "--trace", trace.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains(&format!("{}:4:", trace.display())), "{err}");
    assert!(out.stdout.is_empty());
    assert!(!netns_exists(&format!("{never}-snd")));

    let out = Command::new(BIN).args(["check-trace", trace.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::write(&trace, "1\n").unwrap();
    let out = Command::new(BIN).args(["check-trace", trace.to_str().unwrap()]).output().unwrap();
    std::fs::remove_file(&trace).unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("mean 12.000 Mbit/s"));

    let out = Command::new(BIN)
        .args(["run", "--netns-prefix", never, "--rate-mbps", "10", "--qdisc", "abc", "--abc-eta", "1.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--abc-eta"));
}

#[test]
fn demo_prints_each_second_and_writes_a_png() {
    require_network!();
    let _net = common::network_lock();
    let prefix = Prefix::new();
    let dir = std::env::temp_dir();
    let png = dir.join(format!("{}.png", prefix.name));
    let trace = dir.join(format!("{}.trace", prefix.name));
    std::fs::write(&trace, "1\n2\n2\n3\n").unwrap(); // 4 opportunities per 3 ms: 16 Mbit/s
    let out = Command::new(BIN)
        .args(["demo", "--netns-prefix", &prefix.name, "--trace", trace.to_str().unwrap(), "--delay-ms", "10"])
        .args(["--queue-pkts", "100", "--cc", "reno", "--seconds", "2", "--plot", png.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let per_second: Vec<&str> = stdout.lines().filter(|l| l.trim_start().starts_with(['1', '2'])).collect();
    assert_eq!(per_second.len(), 2, "{stdout}");
    let png_bytes = std::fs::read(&png).unwrap();
    std::fs::remove_file(&png).unwrap();
    std::fs::remove_file(&trace).unwrap();
    assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(!netns_exists(&format!("{}-snd", prefix.name)));
}
