//! The DPDK datapath end to end: `ccp-dpdk send` on a `net_af_xdp` virtual device over a veth
//! pair, talking to an unmodified kernel TCP receiver (`ccp-dpdk sink`, a plain socket program
//! that hashes the stream), steered by ccp-agent through libccp — directly or through
//! `ccp-router` (20 ms, 50 Mbit/s, 100 packets).
//!
//! Needs root (namespaces, AF_XDP); skips loudly without it, or when DPDK cannot create the
//! virtual device here.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccp_integration_tests::{bin, is_root, send_malformed_libccp, Agent};
use serde_json::Value;

#[path = "ebpf/support.rs"]
#[allow(dead_code)]
mod support;
use support::{Router, SERIAL};

const MSS: f64 = 1448.0;
const LINK_MBPS: u32 = 50;

fn skip(test: &str) -> bool {
    if !is_root() {
        eprintln!("SKIPPED {test}: needs root (network namespaces, AF_XDP sockets); CI runs it as root");
        return true;
    }
    false
}

fn tag() -> String {
    format!("{}", std::process::id() % 100_000)
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn offloads_off(ns: &str, dev: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "gso", "off", "tso", "off", "gro", "off"])
        .output()
        .expect("run ethtool");
    assert!(out.status.success(), "ethtool -K {dev}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The sender's namespace and its veth: either to a receiver namespace of its own
/// (10.99.0.2/24), or into a ccp-router's sender namespace (10.98.0.1/24, forwarding on).
struct Net {
    dp_ns: String,
    rx_ns: Option<String>,
    dev: String,
    our_ip: &'static str,
    gateway: Option<&'static str>,
    /// A closed port on the receiving host, for the probe run.
    probe: &'static str,
}

impl Net {
    fn direct(name: &str) -> Net {
        let t = tag();
        let (dp_ns, rx_ns, a, b) =
            (format!("{name}{t}-dp"), format!("{name}{t}-rx"), format!("cd{t}{name}a"), format!("cd{t}{name}b"));
        ip(&["netns", "add", &dp_ns]);
        let net = Net {
            dp_ns: dp_ns.clone(),
            rx_ns: Some(rx_ns.clone()),
            dev: a.clone(),
            our_ip: "10.99.0.1",
            gateway: None,
            probe: "10.99.0.2:9",
        };
        ip(&["netns", "add", &rx_ns]);
        ip(&["link", "add", &a, "netns", &dp_ns, "type", "veth", "peer", "name", &b, "netns", &rx_ns]);
        ip(&["-n", &rx_ns, "addr", "add", "10.99.0.2/24", "dev", &b]);
        for (ns, dev) in [(&dp_ns, &a), (&rx_ns, &b)] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            offloads_off(ns, dev);
        }
        net
    }

    fn via_router(name: &str, router: &Router) -> Net {
        let t = tag();
        let (dp_ns, a, b) = (format!("{name}{t}-dp"), format!("cd{t}{name}a"), format!("cd{t}{name}b"));
        ip(&["netns", "add", &dp_ns]);
        let net = Net {
            dp_ns: dp_ns.clone(),
            rx_ns: None,
            dev: a.clone(),
            our_ip: "10.98.0.2",
            gateway: Some("10.98.0.1"),
            probe: "10.77.0.2:9",
        };
        let snd = &router.sender_ns;
        ip(&["link", "add", &a, "netns", &dp_ns, "type", "veth", "peer", "name", &b, "netns", snd]);
        ip(&["-n", snd, "addr", "add", "10.98.0.1/24", "dev", &b]);
        let out = Command::new("ip").args(["netns", "exec", snd, "sysctl", "-qw", "net.ipv4.ip_forward=1"]).output().unwrap();
        assert!(out.status.success(), "ip_forward: {}", String::from_utf8_lossy(&out.stderr));
        for (ns, dev) in [(&dp_ns, &a), (snd, &b)] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            offloads_off(ns, dev);
        }
        net
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and with it the peer.
        let _ = Command::new("ip").args(["netns", "del", &self.dp_ns]).status();
        if let Some(rx) = &self.rx_ns {
            let _ = Command::new("ip").args(["netns", "del", rx]).status();
        }
    }
}

/// A child whose stdout lines and stderr are collected.
struct Proc {
    child: Child,
    out: Arc<Mutex<Vec<String>>>,
    err: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let (o, e) = (Arc::clone(&out), Arc::clone(&err));
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                o.lock().unwrap().push(l);
            }
        });
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut s = e.lock().unwrap();
                s.push_str(&l);
                s.push('\n');
            }
        });
        Proc { child, out, err }
    }

    fn lines(&self) -> Vec<Value> {
        self.out.lock().unwrap().iter().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// Waits for the exit (killing it after `timeout`); whether it exited 0.
    fn wait(&mut self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                // Let the readers drain the pipes.
                std::thread::sleep(Duration::from_millis(100));
                return st.success();
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child; SIGTERM first so DPDK releases its device.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(3) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn sink(ns: &str, addr: &str, count: u32) -> Proc {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).arg(bin("ccp-dpdk")).args(["sink", "--listen", addr, "--count", &count.to_string()]);
    let p = Proc::spawn(cmd);
    let t0 = Instant::now();
    while !p.stderr().contains("listening") {
        assert!(t0.elapsed() < Duration::from_secs(5), "the sink did not start: {}", p.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

fn send(net: &Net, dst: &str, ipc_dir: Option<&Path>, extra: &[&str]) -> Proc {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.dp_ns]).arg(bin("ccp-dpdk")).arg("send");
    cmd.args(["--vdev", &format!("net_af_xdp0,iface={}", net.dev), "--ip", net.our_ip, "--dst", dst, "--json"]);
    if let Some(gw) = net.gateway {
        cmd.args(["--gateway", gw]);
    }
    match ipc_dir {
        Some(dir) => {
            cmd.arg("--ipc-dir").arg(dir).args(["--agent", "agent", "--ipc-name", "dpdk"]);
        }
        None => {
            cmd.arg("--no-agent");
        }
    }
    cmd.args(extra);
    cmd.env("CCP_LOG", "info");
    Proc::spawn(cmd)
}

fn summary(p: &Proc) -> Value {
    p.lines().into_iter().find(|v| v["summary"] == true).unwrap_or_else(|| panic!("no summary line; stderr:\n{}", p.stderr()))
}

/// Every sink line: the stream arrived whole and in order.
fn assert_intact(sink: &Proc, flows: usize, bytes: Option<u64>) {
    let lines = sink.lines();
    assert_eq!(lines.len(), flows, "one line per connection: {lines:?}\n{}", sink.stderr());
    for l in &lines {
        assert_eq!(l["intact"], true, "the stream is the sender's pattern, in order: {l}");
        if let Some(b) = bytes {
            assert_eq!(l["bytes"].as_u64(), Some(b), "{l}");
        }
    }
}

/// Whether DPDK can drive an AF_XDP device here at all (a short run to a closed port).
fn dpdk_works(net: &Net) -> Result<(), String> {
    let mut p = send(net, net.probe, None, &["--seconds", "1"]);
    p.wait(Duration::from_secs(20));
    let err = p.stderr();
    if err.contains("DPDK port started") {
        Ok(())
    } else {
        Err(err)
    }
}

#[test]
fn a_bulk_transfer_to_a_kernel_receiver_arrives_intact() {
    if skip("a_bulk_transfer_to_a_kernel_receiver_arrives_intact") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = Net::direct("bt");
    if let Err(e) = dpdk_works(&net) {
        eprintln!(
            "SKIPPED a_bulk_transfer_to_a_kernel_receiver_arrives_intact: DPDK cannot drive net_af_xdp on a veth here:\n{e}"
        );
        return;
    }
    let rx = sink(net.rx_ns.as_ref().unwrap(), "10.99.0.2:5201", 2);
    let bytes = 8_000_000u64;
    let mut tx = send(&net, "10.99.0.2:5201", None, &["--flows", "2", "--bytes", &bytes.to_string()]);
    assert!(tx.wait(Duration::from_secs(60)), "the sender exits 0 once both connections closed; stderr:\n{}", tx.stderr());
    let mut rx = rx;
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 2, Some(bytes));
    let s = summary(&tx);
    assert_eq!(s["closed"], 2, "{s}");
    assert_eq!(s["bytes_acked"].as_u64(), Some(2 * bytes), "{s}");
    assert!(s["acks_to_fallback"].as_u64().unwrap() > 0, "no agent: the fallback steered: {s}");
}

/// One report of the agent's trace: (agent seconds, commanded window in packets, smoothed RTT in
/// seconds).
type Point = (f64, f64, f64);

#[test]
fn three_hundred_connections_at_once_all_arrive_intact() {
    if skip("three_hundred_connections_at_once_all_arrive_intact") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = Net::direct("mc");
    dpdk_works(&net).expect("DPDK drives net_af_xdp");
    let flows = 300;
    let rx = sink(net.rx_ns.as_ref().unwrap(), "10.99.0.2:5201", flows);
    let bytes = 300_000u64;
    let mut tx = send(&net, "10.99.0.2:5201", None, &["--flows", &flows.to_string(), "--bytes", &bytes.to_string()]);
    assert!(tx.wait(Duration::from_secs(60)), "every connection closes; stderr:\n{}", tx.stderr());
    let mut rx = rx;
    rx.wait(Duration::from_secs(20));
    assert_intact(&rx, flows as usize, Some(bytes));
    let s = summary(&tx);
    assert_eq!(s["closed"], flows, "{s}");
}

/// The agent's per-report trace (`--trace-flows`) of the one flow.
fn trace(path: &Path) -> Vec<Point> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            (
                v["agent_us"].as_f64().unwrap_or(0.0) / 1e6,
                v["commanded_cwnd_bytes"].as_f64().unwrap_or(0.0) / MSS,
                v["srtt_us"].as_f64().unwrap_or(0.0) / 1e6,
            )
        })
        .collect()
}

/// What the commanded windows show: the first window, seconds to 8× it, the ratios of each
/// decrease after the first, and the growth per RTT (packets) between decreases after the first.
fn shape(t: &[Point]) -> (f64, Option<f64>, Vec<f64>, Vec<f64>) {
    assert!(t.len() >= 20, "too few reports to judge: {t:?}");
    let (t0, w0) = (t[0].0, t[0].1);
    let to_8x = t.iter().find(|x| x.1 >= 8.0 * w0).map(|x| x.0 - t0);
    let mut ratios = Vec::new();
    let mut growth = Vec::new();
    let mut decreases = 0;
    let mut run_start: Option<(f64, f64)> = None;
    for p in t.windows(2) {
        let (a, b) = (p[0], p[1]);
        if b.1 < a.1 * 0.95 {
            decreases += 1;
            if decreases > 1 {
                ratios.push(b.1 / a.1);
            }
            if let Some((ts, ws)) = run_start.take() {
                // Growth per RTT over the run since the last decrease (at least 5 RTTs of it).
                let rtt = a.2.max(0.001);
                if a.0 - ts >= 5.0 * rtt {
                    growth.push((a.1 - ws) / ((a.0 - ts) / rtt));
                }
            }
            run_start = Some((b.0, b.1));
        }
    }
    (w0, to_8x, ratios, growth)
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The agent steering the sender through the router; its trace file.
fn agent_run(test: &str, alg: &str, seconds: u32) -> (Vec<Point>, Value, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start(&format!("cd{}{test}", tag()), 10, LINK_MBPS, 100);
    let net = Net::via_router(test, &router);
    if let Err(e) = dpdk_works(&net) {
        panic!("DPDK cannot drive net_af_xdp here:\n{e}");
    }
    let trace_path = dir.path().join("trace.jsonl");
    let agent = Agent::start_unix(dir.path(), &["--algorithm", alg, "--trace-flows", trace_path.to_str().unwrap()]);
    let mut rx = sink(&router.receiver_ns, "10.77.0.2:5201", 1);
    let mut tx = send(&net, "10.77.0.2:5201", Some(dir.path()), &["--seconds", &seconds.to_string(), "--report-ms", "500"]);
    let ok = tx.wait(Duration::from_secs(u64::from(seconds) + 30));
    assert!(ok, "sender exit; stderr:\n{}\nagent:\n{}", tx.stderr(), agent.log());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 1, None);
    drop(agent);
    (trace(&trace_path), summary(&tx), rx.lines())
}

#[test]
fn the_agents_reno_doubles_adds_one_packet_per_rtt_and_halves_through_the_router() {
    if skip("the_agents_reno_doubles_adds_one_packet_per_rtt_and_halves_through_the_router") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (t, s, rx) = agent_run("reno", "reno", 8);
    let (w0, to_8x, ratios, growth) = shape(&t);
    eprintln!("reno: w0 {w0:.1} pkts, 8x in {to_8x:?} s, decreases {ratios:?}, growth/RTT {growth:?}; {s}; sink {rx:?}");
    assert!(s["acks_to_agent"].as_u64().unwrap() > 1000, "the agent steered: {s}");
    // Slow start doubles per RTT (20 ms + queueing): 8x in 3 RTTs, well under a second;
    // additive increase would need ~70 RTTs.
    let t8 = to_8x.expect("slow start grew the window 8-fold");
    assert!(t8 < 0.6, "8x the initial window took {t8:.2} s");
    assert!(!ratios.is_empty(), "losses after slow start halve the window: {t:?}");
    let r = median(ratios);
    assert!((0.4..=0.6).contains(&r), "Reno halves: median decrease ratio {r:.2}");
    let g = median(growth);
    assert!((0.5..=2.0).contains(&g), "congestion avoidance adds ~1 packet per RTT: median {g:.2}");
    let kbps = rx[0]["kbps"].as_u64().unwrap() as f64;
    assert!(kbps > 0.7 * f64::from(LINK_MBPS) * 1000.0, "the flow fills the link: {kbps} kbit/s");
}

#[test]
fn the_agents_cubic_cuts_to_seven_tenths_through_the_router() {
    if skip("the_agents_cubic_cuts_to_seven_tenths_through_the_router") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (t, s, _) = agent_run("cubic", "cubic", 8);
    let (_, _, ratios, _) = shape(&t);
    eprintln!("cubic: decreases {ratios:?}; {s}");
    assert!(!ratios.is_empty(), "losses after slow start cut the window: {t:?}");
    let r = median(ratios);
    assert!((0.6..=0.8).contains(&r), "Cubic cuts to 0.7: median decrease ratio {r:.2}");
}

#[test]
fn one_percent_random_loss_still_delivers_the_stream_intact() {
    if skip("one_percent_random_loss_still_delivers_the_stream_intact") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let router = Router::start_with(&format!("cd{}loss", tag()), 10, LINK_MBPS, 100, &["--loss-pct", "1", "--loss-seed", "3"]);
    let net = Net::via_router("loss", &router);
    dpdk_works(&net).expect("DPDK drives net_af_xdp");
    let mut rx = sink(&router.receiver_ns, "10.77.0.2:5201", 2);
    let bytes = 3_000_000u64;
    let mut tx = send(&net, "10.77.0.2:5201", None, &["--flows", "2", "--bytes", &bytes.to_string(), "--fallback", "reno"]);
    assert!(tx.wait(Duration::from_secs(90)), "sender exit; stderr:\n{}", tx.stderr());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 2, Some(bytes));
    let s = summary(&tx);
    // 2 × ~2,070 segments at 1 %: ~40 lost; their retransmissions are what delivered the stream.
    assert!(s["retx_segs"].as_u64().unwrap() >= 10, "losses were repaired by retransmission: {s}");
}

/// Goodput (kbit/s) and who steered, per JSON line of the sender, from `from_s` to `to_s`.
fn lines_between(p: &Proc, from_s: f64, to_s: f64) -> Vec<(f64, bool)> {
    p.lines()
        .into_iter()
        .filter(|v| v["summary"] != true)
        .filter_map(|v| {
            let t = v["t_us"].as_f64()? / 1e6;
            (t > from_s && t <= to_s).then(|| (v["goodput_kbps"].as_f64().unwrap_or(0.0), v["agent"] == true))
        })
        .collect()
}

/// Blocks until the sender has stamped a line at or past `t_s` seconds (within 30 s of wall time).
fn wait_for_sender_time(p: &Proc, t_s: f64) {
    let t0 = Instant::now();
    while !p.lines().iter().any(|v| v["t_us"].as_f64().is_some_and(|t| t / 1e6 >= t_s)) {
        assert!(t0.elapsed() < Duration::from_secs(30), "the sender never reached t = {t_s} s; stderr:\n{}", p.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn after_kill_9_of_the_agent_the_fallback_keeps_the_transfer_going_and_a_new_agent_readopts_it() {
    let test = "after_kill_9_of_the_agent_the_fallback_keeps_the_transfer_going_and_a_new_agent_readopts_it";
    if skip(test) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start(&format!("cd{}k9", tag()), 10, LINK_MBPS, 100);
    let net = Net::via_router("k9", &router);
    dpdk_works(&net).expect("DPDK drives net_af_xdp");
    let agent = Agent::start_unix(dir.path(), &["--algorithm", "reno"]);
    let mut rx = sink(&router.receiver_ns, "10.77.0.2:5201", 1);
    let mut tx = send(&net, "10.77.0.2:5201", Some(dir.path()), &["--seconds", "12", "--report-ms", "500"]);
    // Kill and restart on the sender's own clock, the one its lines are stamped with: its start-up
    // (DPDK, the port) takes a varying part of a second, and a wall-clock sleep once put the kill
    // before the sender's t = 3 s, inside the window that must show the agent steering.
    wait_for_sender_time(&tx, 3.0);
    agent.kill9();
    wait_for_sender_time(&tx, 7.0);
    let agent = Agent::start_unix(dir.path(), &["--algorithm", "reno"]);
    assert!(tx.wait(Duration::from_secs(40)), "sender exit; stderr:\n{}", tx.stderr());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 1, None);
    let before = lines_between(&tx, 1.5, 3.0);
    let gone = lines_between(&tx, 4.0, 7.0);
    let back = lines_between(&tx, 9.0, 12.0);
    eprintln!("agent: {before:?}\nfallback: {gone:?}\nreadopted: {back:?}\n{}", tx.stderr());
    assert!(before.iter().all(|l| l.1), "the agent steered before the kill: {before:?}");
    assert!(!gone.is_empty() && gone.iter().all(|l| !l.1), "the fallback steered while the agent was gone: {gone:?}");
    let mean = gone.iter().map(|l| l.0).sum::<f64>() / gone.len() as f64;
    assert!(mean >= 0.5 * f64::from(LINK_MBPS) * 1000.0, "the fallback keeps ≥ 50 % of the link: {mean:.0} kbit/s");
    assert!(!back.is_empty() && back.iter().all(|l| l.1), "a new agent re-adopted the connection: {back:?}");
    assert!(tx.stderr().contains("announcing the connections"), "{}", tx.stderr());
    agent.wait_log("flow", Duration::from_secs(1));
}

#[test]
fn malformed_agent_messages_are_rejected_and_the_transfer_goes_on() {
    if skip("malformed_agent_messages_are_rejected_and_the_transfer_goes_on") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let net = Net::direct("mf");
    dpdk_works(&net).expect("DPDK drives net_af_xdp");
    let agent = Agent::start_unix(dir.path(), &["--algorithm", "reno"]);
    let mut rx = sink(net.rx_ns.as_ref().unwrap(), "10.99.0.2:5201", 1);
    // A transfer of a fixed time, not a fixed size: the garbage below must arrive while it runs,
    // and a release build sends 20 MB in 52 ms (issue 29: only 20 of the 100 messages were
    // counted then).
    let mut tx = send(&net, "10.99.0.2:5201", Some(dir.path()), &["--seconds", "3"]);
    // Garbage from a local process that can write the datapath's socket.
    let sent_garbage_for = send_malformed_libccp(&dir.path().join("dpdk"), 25);
    assert!(tx.wait(Duration::from_secs(60)), "sender exit; stderr:\n{}", tx.stderr());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 1, None);
    let sum = summary(&tx);
    assert!(
        sent_garbage_for < Duration::from_secs(3),
        "the garbage went out while the 3 s transfer ran (took {sent_garbage_for:?})"
    );
    assert!(sum["rejected"].as_u64().unwrap() >= 50, "the bad messages were counted as rejected: {sum}");
    assert!(sum["acks_to_agent"].as_u64().unwrap() > 0, "the agent still steered: {sum}");
    drop(agent);
}

#[test]
fn a_constant_window_gives_window_over_rtt_through_the_router() {
    if skip("a_constant_window_gives_window_over_rtt_through_the_router") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start(&format!("cd{}cw", tag()), 10, LINK_MBPS, 100);
    let net = Net::via_router("cw", &router);
    dpdk_works(&net).expect("DPDK drives net_af_xdp");
    // 40 packets over a 20 ms path: 23 Mbit/s, under half the link, so no queue builds and the
    // RTT stays the path's 20 ms plus a packet's serialization.
    let window_pkts = 40.0;
    let agent = Agent::start_unix(dir.path(), &["--algorithm", "constant", "-p", "cwnd_pkts=40"]);
    let mut rx = sink(&router.receiver_ns, "10.77.0.2:5201", 1);
    let mut tx = send(&net, "10.77.0.2:5201", Some(dir.path()), &["--seconds", "5", "--report-ms", "500"]);
    assert!(tx.wait(Duration::from_secs(40)), "sender exit; stderr:\n{}", tx.stderr());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 1, None);
    let rtt_s = 0.020 + 1500.0 * 8.0 / (f64::from(LINK_MBPS) * 1e6);
    let expect_kbps = window_pkts * MSS * 8.0 / rtt_s / 1000.0;
    // Goodput per line once the agent's window holds (the first second carries the handshake
    // and the initial window).
    let lines = lines_between(&tx, 1.0, 5.0);
    assert!(lines.len() >= 6 && lines.iter().all(|l| l.1), "the agent steered throughout: {lines:?}");
    let mean = lines.iter().map(|l| l.0).sum::<f64>() / lines.len() as f64;
    eprintln!("constant window {window_pkts} pkts: {mean:.0} kbit/s, cwnd·MSS/RTT {expect_kbps:.0} kbit/s");
    assert!((mean / expect_kbps - 1.0).abs() <= 0.10, "throughput {mean:.0} kbit/s vs cwnd·MSS/RTT {expect_kbps:.0} kbit/s");
    drop(agent);
}

#[test]
fn ce_marks_from_the_router_reach_the_agents_dctcp() {
    if skip("ce_marks_from_the_router_reach_the_agents_dctcp") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start_with(&format!("cd{}ce", tag()), 10, LINK_MBPS, 100, &["--qdisc", "dctcp", "--dctcp-k-pkts", "20"]);
    let net = Net::via_router("ce", &router);
    dpdk_works(&net).expect("DPDK drives net_af_xdp");
    let trace_path = dir.path().join("trace.jsonl");
    let agent = Agent::start_unix(dir.path(), &["--algorithm", "dctcp", "--trace-flows", trace_path.to_str().unwrap()]);
    let mut rx = sink(&router.receiver_ns, "10.77.0.2:5201", 1);
    let mut tx = send(&net, "10.77.0.2:5201", Some(dir.path()), &["--seconds", "5", "--report-ms", "500"]);
    assert!(tx.wait(Duration::from_secs(40)), "sender exit; stderr:\n{}", tx.stderr());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 1, None);
    drop(agent);
    // The kernel receiver (tcp_ecn = 2) accepts the ECN-setup SYN; the router marks ECT data
    // above 20 packets; the receiver's ECE reaches the agent as CE-marked packets.
    let text = std::fs::read_to_string(&trace_path).unwrap();
    let reports: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let ce: u64 = reports.iter().filter_map(|v| v["ce_pkts"].as_u64()).sum();
    let lost: u64 = reports.iter().filter_map(|v| v["lost_pkts"].as_u64()).sum();
    let s = summary(&tx);
    eprintln!("dctcp: {} reports, CE {ce}, lost {lost}; {s}", reports.len());
    assert!(ce > 0, "CE marks reached the agent's reports");
    // DCTCP keeps the queue near K = 20 packets, far below the 100-packet buffer: after slow
    // start, marks, not drops, steer it.
    let kbps = rx.lines()[0]["kbps"].as_u64().unwrap() as f64;
    assert!(kbps > 0.7 * f64::from(LINK_MBPS) * 1000.0, "the flow fills the link: {kbps} kbit/s");
}

/// Issue 29: a receiver-limited connection once drove the agent's Reno window to 2.6 GB on this
/// datapath. Through the router (50 Mbit/s, 20 ms: a 125 kB BDP) to a receiver with a 64 kB
/// buffer, the flight is held by the receiver's window; the standard fold reports that the window
/// does not limit the sender, Reno stops growing it, and the window the sender holds stays within
/// twice what it has in flight (or the 10-packet restart window).
#[test]
fn a_receiver_limited_connection_keeps_its_window_near_its_flight() {
    if skip("a_receiver_limited_connection_keeps_its_window_near_its_flight") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let router = Router::start(&format!("cd{}rw", tag()), 10, LINK_MBPS, 100);
    let net = Net::via_router("rwnd", &router);
    if let Err(e) = dpdk_works(&net) {
        panic!("DPDK cannot drive net_af_xdp here:\n{e}");
    }
    let trace_path = dir.path().join("trace.jsonl");
    let agent = Agent::start_unix(dir.path(), &["--algorithm", "reno", "--trace-flows", trace_path.to_str().unwrap()]);
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &router.receiver_ns]).arg(bin("ccp-dpdk"));
    cmd.args(["sink", "--listen", "10.77.0.2:5201", "--count", "1", "--rcvbuf", "65536"]);
    let mut rx = Proc::spawn(cmd);
    let t0 = Instant::now();
    while !rx.stderr().contains("listening") {
        assert!(t0.elapsed() < Duration::from_secs(5), "the sink did not start: {}", rx.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut tx = send(&net, "10.77.0.2:5201", Some(dir.path()), &["--seconds", "6", "--report-ms", "500"]);
    assert!(tx.wait(Duration::from_secs(40)), "sender exit; stderr:\n{}\nagent:\n{}", tx.stderr(), agent.log());
    rx.wait(Duration::from_secs(10));
    assert_intact(&rx, 1, None);
    drop(agent);

    let lines: Vec<Value> =
        std::fs::read_to_string(&trace_path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(lines.len() > 100, "{} reports", lines.len());
    let t_end = lines.last().unwrap()["agent_us"].as_f64().unwrap();
    let late: Vec<&Value> = lines.iter().filter(|v| v["agent_us"].as_f64().unwrap() > t_end - 4e6).collect();
    let n = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"));
    let max_flight = late.iter().map(|v| n(v, "inflight_bytes")).fold(0.0, f64::max);
    let max_window = late.iter().map(|v| n(v, "commanded_cwnd_bytes")).fold(0.0, f64::max);
    let unused = late.iter().filter(|v| v["cwnd_limited"] == false).count();
    eprintln!(
        "64 kB receiver: window at most {max_window} B, flight at most {max_flight} B, {unused} of {} reports not window-limited",
        late.len()
    );
    assert!(max_flight <= 100_000.0, "the receiver's window holds the flight: {max_flight} B");
    assert!(unused * 2 > late.len(), "the fold reports a window that does not limit the sender");
    assert!(max_window <= (2.0 * max_flight).max(10.0 * MSS) + MSS, "window {max_window} B for {max_flight} B in flight");
}
