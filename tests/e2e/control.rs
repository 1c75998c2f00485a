//! Operating a running agent: the control socket (`ccp-agent ctl`), the metrics endpoint, and
//! who may use them. The agent serves libccp test-datapath flows here, so no kernel datapath is
//! needed; the hot swap of real kernel flows is in the eBPF tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ccp_integration_tests::{bin, finish_datapath, is_root, spawn_datapath, Agent};

/// A directory others can traverse (tempdirs are 0700), so permission checks are about the socket.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// An agent on `DIR/agent`, controlled through `DIR/control.sock` (what `Agent::start_unix` gives it).
fn start(dir: &Path, extra: &[&str]) -> Agent {
    let agent = Agent::start_unix(dir, extra);
    agent.wait_log("control socket", Duration::from_secs(5));
    agent
}

/// `ccp-agent ctl --socket DIR/control.sock ARGS`, as root; (success, stdout, stderr).
fn ctl(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin("ccp-agent")).args(["ctl", "--socket"]).arg(dir.join("control.sock")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn status(dir: &Path) -> serde_json::Value {
    let (ok, out, err) = ctl(dir, &["--json", "status"]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn flows(s: &serde_json::Value) -> Vec<serde_json::Value> {
    s["flows"].as_array().cloned().unwrap_or_default()
}

/// Waits until the agent has `n` flows.
fn wait_flows(dir: &Path, n: usize) -> serde_json::Value {
    for _ in 0..100 {
        let s = status(dir);
        if flows(&s).len() == n {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("never saw {n} flows: {}", status(dir));
}

#[test]
fn status_swap_default_and_reload_through_the_control_socket() {
    let dir = open_dir();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, "[[rules]]\nname = \"pinned\"\nmatch = { src_port = 40001 }\nalgorithm = \"cubic\"\n").unwrap();
    let agent = start(dir.path(), &["-c", config.to_str().unwrap()]);
    let dp = spawn_datapath(dir.path(), "dp", &["--flows", "3", "--rtt-ms", "20", "--link-mbps", "20", "--duration-ms", "4000"]);

    let s = wait_flows(dir.path(), 3);
    let by_port =
        |s: &serde_json::Value, port: &str| flows(s).into_iter().find(|f| f["src"].as_str().unwrap().ends_with(port)).unwrap();
    assert_eq!(by_port(&s, ":40000")["algorithm"], "reno");
    assert_eq!(by_port(&s, ":40001")["algorithm"], "cubic");
    assert_eq!(by_port(&s, ":40001")["chosen_by"], "pinned");
    assert!(by_port(&s, ":40000")["cwnd_bytes"].as_u64().unwrap() > 0);

    // The human table names every flow.
    let (ok, table, _) = ctl(dir.path(), &["status"]);
    assert!(ok && table.contains("127.0.0.1:40002") && table.contains("CWND KB"), "{table}");

    // Swap by match: only the reno flows, with parameters.
    let (ok, out, err) = ctl(dir.path(), &["swap", "--match", "algorithm=reno", "dctcp", "-p", "g=0.125"]);
    assert!(ok && out.contains("swapped 2 flow(s) to dctcp"), "{out}{err}");
    let s = status(dir.path());
    assert_eq!(by_port(&s, ":40000")["algorithm"], "dctcp");
    assert_eq!(by_port(&s, ":40000")["chosen_by"], "swap");
    assert_eq!(by_port(&s, ":40001")["algorithm"], "cubic");

    // One flow by id.
    let id = by_port(&s, ":40001")["id"].as_u64().unwrap().to_string();
    let (ok, _, err) = ctl(dir.path(), &["swap", "--flow", &id, "reno"]);
    assert!(ok, "{err}");
    assert_eq!(by_port(&status(dir.path()), ":40001")["algorithm"], "reno");

    // Clear errors, and nothing changes.
    let (ok, _, err) = ctl(dir.path(), &["swap", "--flow", "999", "reno"]);
    assert!(!ok && err.contains("unknown flow 999"), "{err}");
    let (ok, _, err) = ctl(dir.path(), &["swap", "--all", "nosuch"]);
    assert!(!ok && err.contains("unknown algorithm") && err.contains("cubic"), "{err}");
    let (ok, _, err) = ctl(dir.path(), &["swap", "--all", "dctcp", "-p", "g=3"]);
    assert!(!ok && err.contains("\"g\"") && err.contains("out of range"), "{err}");
    let (ok, _, err) = ctl(dir.path(), &["swap", "--match", "dst_addr=not-an-address", "reno"]);
    assert!(!ok && err.contains("dst_addr"), "{err}");
    let (ok, _, err) = ctl(dir.path(), &["attach", "--port", "5201"]);
    assert!(!ok && err.contains("attach and detach need a datapath whose flows live in this kernel"), "{err}");

    // Default for new flows; reload restores the file's policy and, on request, re-applies it.
    let (ok, out, _) = ctl(dir.path(), &["default", "vegas"]);
    assert!(ok && out.contains("vegas"), "{out}");
    assert_eq!(status(dir.path())["default"]["algorithm"], "vegas");
    let (ok, out, err) = ctl(dir.path(), &["reload", "--apply-existing"]);
    assert!(ok, "{err}");
    assert!(out.contains("default reno, 1 rule(s); 3 existing flow(s) swapped"), "{out}");
    let s = status(dir.path());
    assert_eq!(s["default"]["algorithm"], "reno");
    assert_eq!(by_port(&s, ":40000")["algorithm"], "reno");
    assert_eq!(by_port(&s, ":40001")["algorithm"], "cubic");

    // A broken file is refused and the running policy stays.
    std::fs::write(&config, "[[rules]]\nmatch = { port = 1 }\nalgorithm = \"cubic\"\nparams = { beta = 9 }\n").unwrap();
    let (ok, _, err) = ctl(dir.path(), &["reload"]);
    assert!(!ok && err.contains("reload refused") && err.contains("agent.toml:4"), "{err}");
    assert_eq!(status(dir.path())["rules"].as_array().unwrap().len(), 1);

    let run = finish_datapath(dp);
    assert!(run.status.success(), "{}", run.stderr);
    let stopped = agent.stop();
    assert!(stopped.status.success());
    assert!(stopped.log.contains("\"swaps\":"), "{}", stopped.log);
}

#[test]
fn malformed_requests_get_errors_and_the_agent_keeps_serving() {
    let dir = open_dir();
    let agent = start(dir.path(), &[]);
    let sock = dir.path().join("control.sock");
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"this is not json\n{\"cmd\":\"reboot\"}\n{\"cmd\":\"status\",\"x\":1}\n{\"cmd\":\"status\"}\n").unwrap();
    let mut lines = BufReader::new(s.try_clone().unwrap()).lines();
    for _ in 0..3 {
        let v: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(v["ok"], false, "{v}");
        assert!(v["error"].as_str().unwrap().contains("bad request"), "{v}");
    }
    let v: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    // An over-long line is refused and the connection closed; the agent carries on.
    let mut s2 = UnixStream::connect(&sock).unwrap();
    let _ = s2.write_all(&vec![b'x'; 200 * 1024]);
    let mut buf = String::new();
    let _ = s2.read_to_string(&mut buf);
    assert!(buf.contains("longer than"), "{buf}");
    assert!(status(dir.path())["flows"].is_array());
    assert!(agent.stop().status.success());
}

#[test]
fn metrics_are_served_on_loopback_only() {
    let dir = open_dir();
    let agent = start(dir.path(), &["--metrics", "127.0.0.1:0"]);
    // Port 0: find the one the kernel chose in the log.
    let log = agent.log();
    let addr =
        log.lines().find(|l| l.contains("metrics endpoint")).and_then(|l| l.split("addr=").nth(1)).unwrap().trim().to_string();
    let dp = spawn_datapath(dir.path(), "dp", &["--flows", "2", "--rtt-ms", "20", "--duration-ms", "1500"]);
    std::thread::sleep(Duration::from_millis(800));
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    conn.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.0 200"), "{body}");
    assert!(body.contains("ccp_flows{algorithm=\"reno\"} 2"), "{body}");
    assert!(body.contains("# TYPE ccp_reports_total counter"), "{body}");
    finish_datapath(dp);
    assert!(agent.stop().status.success());

    let out = Command::new(bin("ccp-agent"))
        .args(["run", "--no-control", "--metrics", "0.0.0.0:9464", "--ipc-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}

/// Runs the agent binary as `nobody` (from a copy nobody can execute).
struct AsNobody {
    _dir: tempfile::TempDir,
    exe: PathBuf,
}

impl AsNobody {
    fn new() -> AsNobody {
        let dir = open_dir();
        let exe = dir.path().join("ccp-agent");
        std::fs::copy(bin("ccp-agent"), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        AsNobody { _dir: dir, exe }
    }

    fn ctl(&self, sock: &Path, args: &[&str], groups: &str) -> (bool, String) {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", groups])
            .arg(&self.exe)
            .args(["ctl", "--socket"])
            .arg(sock)
            .args(args)
            .output()
            .expect("setpriv (util-linux)");
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn an_unprivileged_user_cannot_swap_attach_or_read_flow_details() {
    if !is_root() {
        eprintln!("SKIPPED an_unprivileged_user_cannot_…: needs root to create the agent and switch to `nobody`");
        return;
    }
    let dir = open_dir();
    let agent = start(dir.path(), &[]);
    let sock = dir.path().join("control.sock");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sock), 0o600, "control socket is owner-only");
    assert_eq!(mode(&dir.path().join("agent")), 0o600, "the datapath socket is not writable by others");

    let nobody = AsNobody::new();
    for args in [&["status"][..], &["swap", "--all", "cubic"], &["attach", "--all"], &["--json", "status"]] {
        let (ok, out) = nobody.ctl(&sock, args, "--clear-groups");
        assert!(!ok, "nobody ran ctl {args:?}: {out}");
        assert!(out.contains("permission denied"), "{args:?}: {out}");
        assert!(!out.contains("flows"), "no flow details leak: {out}");
    }

    // Even if the file's mode is opened up by mistake, the agent checks the peer itself.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (ok, out) = nobody.ctl(&sock, &["status"], "--clear-groups");
    assert!(!ok && out.contains("permission denied"), "{out}");
    assert!(agent.log().contains("control connection refused"), "{}", agent.log());
    assert!(agent.stop().status.success());

    // A configured group may control it.
    let dir = open_dir();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, "[control]\ngroup = \"65534\"\n").unwrap();
    let agent = start(dir.path(), &["-c", config.to_str().unwrap()]);
    let sock = dir.path().join("control.sock");
    assert_eq!(mode(&sock), 0o660);
    let (ok, out) = nobody.ctl(&sock, &["status"], "--init-groups");
    assert!(ok, "a member of the control group is allowed: {out}");
    assert!(agent.stop().status.success());
}
