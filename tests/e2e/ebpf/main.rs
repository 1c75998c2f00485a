//! The agent on this kernel's BPF datapath, with real TCP flows through the link emulator
//! (`ccp-router`: 20 ms RTT, 50 Mbit/s). Needs root; skips loudly without it.

mod cnm;
mod farm;
mod flood;
mod hardening;
mod hotswap;
mod inigo;
mod learned;
mod nimbus;
mod python;
mod seccomp;
mod support;
mod windows;

use std::path::PathBuf;
use std::time::Duration;

use ccp_ebpf::marker::CeMarker;
use ccp_ebpf::netns::Netns;
use support::*;

const RATE_MBPS: f64 = 50.0;

/// The reports of the flow whose window is `cwnd` bytes: its smoothed RTTs, µs.
fn srtts_at(log: &str, cwnd: u64) -> Vec<f64> {
    log.lines()
        .filter(|l| l.contains(" report ") || l.ends_with(" report"))
        .filter(|l| field(l, "cwnd").and_then(|c| c.parse::<u64>().ok()) == Some(cwnd))
        .filter(|l| field(l, "acked").and_then(|a| a.parse::<u64>().ok()).unwrap_or(0) > 0)
        .filter_map(|l| field(l, "srtt")?.trim_start_matches("Some(").trim_end_matches(')').parse().ok())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn cc_of_netns(ns: &str) -> String {
    let out = in_ns(ns).args(["cat", "/proc/sys/net/ipv4/tcp_congestion_control"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn available() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap()
}

#[test]
fn a_commanded_window_sets_the_throughput_of_a_real_flow() {
    if skip_without_root("a_commanded_window_sets_the_throughput_of_a_real_flow") {
        return;
    }
    commanded_window_sets_throughput("thr", "");
}

#[test]
fn a_busy_polling_agent_commands_the_same_window() {
    if skip_without_root("a_busy_polling_agent_commands_the_same_window") {
        return;
    }
    let log = commanded_window_sets_throughput("bpoll", "busy_poll = true\n");
    assert!(log.contains("busy_poll: the agent polls the ring without sleeping"), "busy-poll mode is on:\n{log}");
}

/// A 30-packet constant window on a real flow through a 20 ms path gives cwnd·MSS/RTT within
/// 10 %; `ebpf` goes into `[datapath.ebpf]`. The agent's log.
fn commanded_window_sets_throughput(tag: &str, ebpf: &str) -> String {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = self::tag(tag);
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS as u32, 200);
    let setup =
        AgentSetup::new(&tag, &format!("{ebpf}[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 30\n"));
    let agent = setup.start();
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5201);
    let iv = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5201, 5, &setup.name).finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    let log = stopped.log;

    // 30 packets of 1448 bytes per round trip, whatever the RTT turns out to be.
    let cwnd = 30 * 1448;
    let srtt_us = median(srtts_at(&log, cwnd));
    let expected = cwnd as f64 * 8.0 / srtt_us;
    let measured = mean_between(&iv, 1.0, 5.0);
    eprintln!("cwnd 30 pkts, srtt {srtt_us} us: expected {expected:.2} Mbit/s, measured {measured:.2} Mbit/s ({iv:?})");
    assert!((19_000.0..30_000.0).contains(&srtt_us), "the window is below the BDP: no queue, RTT ~20 ms; got {srtt_us}");
    assert!((measured / expected - 1.0).abs() <= 0.10, "throughput {measured:.2} vs cwnd*MSS/RTT {expected:.2} Mbit/s");
    assert!(!available().contains(&setup.name), "the congestion control is unregistered at shutdown");
    log
}

#[test]
fn a_running_cubic_flow_is_attached_controlled_and_detached_without_stopping() {
    if skip_without_root("a_running_cubic_flow_is_attached_controlled_and_detached_without_stopping") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("att");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS as u32, 100);
    let setup = AgentSetup::new(&tag, "[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 20\n");
    let agent = setup.start();
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5202);
    let client = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5202, 7, "cubic");

    std::thread::sleep(Duration::from_millis(2000));
    let snd = Router::netns_path(&router.sender_ns);
    let (ok, out) = setup.cli(&["attach", "--netns", snd.to_str().unwrap(), "--port", "5202"]);
    assert!(ok, "attach: {out}");
    assert!(out.contains(&format!("cubic -> {}: ok", setup.name)), "the data flow leaves cubic: {out}");
    std::thread::sleep(Duration::from_millis(2500));
    let (ok, out) = setup.cli(&["detach"]);
    assert!(ok, "detach: {out}");
    assert!(out.contains(&format!("{} -> cubic: ok", setup.name)), "back to the previous congestion control: {out}");
    let iv = client.finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    let log = stopped.log;
    eprintln!("{iv:?}");

    // 20 packets per ~20 ms is ~11.5 Mbit/s; cubic fills the 50 Mbit/s link.
    let before = mean_between(&iv, 1.0, 2.0);
    let attached = mean_between(&iv, 3.0, 4.5);
    let after = mean_between(&iv, 5.5, 7.0);
    assert!(before > 0.7 * RATE_MBPS, "cubic fills the link before attach: {before:.1}");
    assert!(attached < 16.0 && attached > 7.0, "the agent's window controls the flow: {attached:.1} Mbit/s");
    assert!(after > 0.5 * RATE_MBPS, "cubic again after detach: {after:.1}");
    assert!(iv.iter().all(|(_, m)| *m > 1.0), "the transfer never stops: {iv:?}");
    assert!(log.contains("existing") || log.contains("adopted=true"), "the attached flow is seeded as an existing flow");
}

/// A cgroup v2 directory of the test's, removed on drop.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn new(tag: &str) -> TestCgroup {
        let root = ccp_ebpf::cgroup::root().expect("a cgroup2 mount");
        let dir = root.join(format!("ccpebpf-{tag}"));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).expect("create a test cgroup");
        TestCgroup(dir)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn sockops_and_a_namespace_default_take_new_flows_and_detach_removes_both() {
    if skip_without_root("sockops_and_a_namespace_default_take_new_flows_and_detach_removes_both") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("new");
    let router = Router::start(&format!("ccpebpf-{tag}"), 2, 100, 100);
    let setup = AgentSetup::new(&tag, "");
    let agent = setup.start();
    let cgroup = TestCgroup::new(&tag);
    let rcv = Router::netns_path(&router.receiver_ns);
    let allowed_before = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    let default_before = cc_of_netns(&router.receiver_ns);

    let (ok, out) = setup.cli(&["attach", "--cgroup", cgroup.0.to_str().unwrap(), "--netns", rcv.to_str().unwrap(), "--default"]);
    assert!(ok, "attach: {out}");
    assert_eq!(cc_of_netns(&router.receiver_ns), setup.name, "{out}");

    // The receiver's listener takes the namespace default; the client runs in the cgroup.
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5203);
    // Join the cgroup before `ip netns exec`, which mounts a sysfs without the cgroup tree.
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec ip netns exec {} iperf3 -c {} -p 5203 -t 2 -J",
        cgroup.0.display(),
        router.sender_ns,
        router.receiver_addr
    );
    let out = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "iperf3 in the cgroup: {}", String::from_utf8_lossy(&out.stderr));

    let (ok, out) = setup.cli(&["detach"]);
    assert!(ok, "detach: {out}");
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    let log = stopped.log;

    let cg_name = format!("cgroup=\"/ccpebpf-{tag}\"");
    let created: Vec<&str> = log.lines().filter(|l| l.contains("ebpf flow created")).collect();
    assert!(created.iter().filter(|l| l.contains(&cg_name)).count() >= 2, "the client's flows come from sockops:\n{log}");
    assert!(created.iter().any(|l| l.contains("5203") && !l.contains(&cg_name)), "server flows from the default:\n{log}");
    assert_eq!(cc_of_netns(&router.receiver_ns), default_before, "the default is restored");
    assert_eq!(std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap(), allowed_before);
    assert!(out.contains("sockops detached"), "{out}");
}

#[test]
fn after_kill_9_the_flow_runs_on_the_fallback_and_a_restarted_agent_readopts_it() {
    if skip_without_root("after_kill_9_the_flow_runs_on_the_fallback_and_a_restarted_agent_readopts_it") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("kill");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS as u32, 100);
    let setup = AgentSetup::new(
        &tag,
        "silence_timeout_ms = 300\n[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 10\n",
    );
    let agent = setup.start();
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5204);
    let client = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5204, 8, &setup.name);

    std::thread::sleep(Duration::from_millis(2000));
    agent.kill9();
    assert!(!available().contains(&setup.name), "kill -9 unregisters the name");
    std::thread::sleep(Duration::from_millis(2500));
    let agent = setup.start();
    agent.wait_log("adopting a running flow", Duration::from_secs(5));
    let iv = client.finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    let log = stopped.log;
    eprintln!("{iv:?}");

    let controlled = mean_between(&iv, 1.0, 2.0);
    let fallback = mean_between(&iv, 3.0, 4.5);
    let readopted = mean_between(&iv, 6.0, 8.0);
    assert!(controlled < 9.0, "10 packets per RTT before the crash: {controlled:.1} Mbit/s");
    assert!(fallback >= 0.5 * RATE_MBPS, "the fallback keeps at least half the link: {fallback:.1} Mbit/s");
    assert!(readopted < 12.0, "the restarted agent controls the flow again: {readopted:.1} Mbit/s\n{log}");
    assert!(log.contains("adopted_maps=true"), "the restarted agent reuses the pinned maps:\n{log}");
    assert!(!available().contains(&setup.name));
}

/// One 3 s iperf3 flow on the agent through a tc CE marker on the sender's side (every 10th
/// ECN-capable packet), with the sender's `net.ipv4.tcp_ecn` at `tcp_ecn`: the agent's log and the
/// marker's (seen, marked) counts.
fn flow_through_ce_marker(name: &str, tcp_ecn: u32) -> (String, u64, u64) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag(name);
    let router = Router::start(&format!("ccpebpf-{tag}"), 5, RATE_MBPS as u32, 200);
    // ECN is negotiated when the sender asks (tcp_ecn=1) and the receiver accepts (default 2).
    let ok =
        in_ns(&router.sender_ns).args(["sh", "-c", &format!("echo {tcp_ecn} > /proc/sys/net/ipv4/tcp_ecn")]).status().unwrap();
    assert!(ok.success());
    let snd = Netns::open(&Router::netns_path(&router.sender_ns)).unwrap();
    let marker = CeMarker::attach(&snd, "ccp0", 10).expect("attach the CE marker");
    let setup = AgentSetup::new(&tag, "");
    let agent = setup.start();
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5205);
    IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5205, 3, &setup.name).finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    let (seen, marked) = marker.counts();
    (stopped.log, seen, marked)
}

#[test]
fn a_flow_without_ecn_reports_no_ce_and_no_ece() {
    // The control for the test above: the same path and marker, but the sender does not ask for
    // ECN, so its packets are not ECN-capable and the marker leaves them alone. Any CE or ECE in
    // the reports would then be the datapath inventing congestion signals (e.g. reading a flag
    // bit that is not ECN-Echo), and Reno would cut on every one.
    if skip_without_root("a_flow_without_ecn_reports_no_ce_and_no_ece") {
        return;
    }
    let (log, seen, marked) = flow_through_ce_marker("noecn", 0);
    assert!(seen > 1000, "the flow sent packets past the marker ({seen})");
    assert_eq!(marked, 0, "the marker marks only ECN-capable packets");
    let reports: Vec<&str> = log.lines().filter(|l| l.contains(" report") && field(l, "ece").is_some()).collect();
    assert!(reports.len() > 10, "the agent logged the flow's reports:\n{log}");
    let signalled = |l: &str| ["ce_pkts", "ece"].iter().any(|k| field(l, k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) > 0);
    let with_signal: Vec<&str> = reports.iter().copied().filter(|l| signalled(l)).collect();
    assert!(
        with_signal.is_empty(),
        "{} of {} reports carry CE or ECE without ECN:\n{}",
        with_signal.len(),
        reports.len(),
        with_signal[..with_signal.len().min(5)].join("\n")
    );
}

#[test]
fn ce_marks_from_a_tc_marker_appear_in_the_reports() {
    if skip_without_root("ce_marks_from_a_tc_marker_appear_in_the_reports") {
        return;
    }
    let (log, seen, marked) = flow_through_ce_marker("ce", 1);
    assert!(marked > 0, "the marker marked ECN-capable packets ({marked} of {seen})");
    let reports_with_ce = log
        .lines()
        .filter(|l| l.contains(" report") && field(l, "ce_pkts").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) > 0)
        .count();
    let ece = log.lines().filter(|l| field(l, "ece").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) > 0).count();
    assert!(reports_with_ce > 0 && ece > 0, "CE counts and ECE ACKs reach the agent:\n{log}");
    let closed = log.lines().find(|l| l.contains("flow closed") && field(l, "ce_pkts").is_some_and(|v| v != "0"));
    assert!(closed.is_some(), "the flow's CE total is non-zero:\n{log}");
}
