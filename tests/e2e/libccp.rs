//! The agent against the real libccp C library: `ccp-test-datapath` links libccp 1.2, emulates
//! flows with synthetic ACKs and speaks libccp's unix-socket IPC to the agent, exactly as a
//! user-space libccp datapath does. The windows it reports are the ones libccp applied.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use ccp_integration_tests::{finish_datapath, run_datapath, spawn_datapath, Agent, DatapathRun};

const MSS: u64 = 1448;

/// Ratios new/old of every window decrease after `after_us`.
fn cuts(run: &DatapathRun, sid: u64, after_us: u64) -> Vec<(u64, f64)> {
    let trace = run.cwnd_trace(sid);
    trace.windows(2).filter(|w| w[1].1 < w[0].1 && w[1].0 > after_us).map(|w| (w[1].0, w[1].1 as f64 / w[0].1 as f64)).collect()
}

fn assert_clean(run: &DatapathRun) {
    assert!(run.status.success(), "datapath failed: {}\n{}", run.status, run.stderr);
    for end in run.of_kind("end") {
        assert_eq!(end["invoke_errors"], 0, "libccp rejected something: {}", run.stderr);
    }
}

#[test]
fn reno_doubles_per_rtt_in_slow_start_and_halves_once_per_rtt_on_loss() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start_unix(dir.path(), &["-a", "reno"]);
    // 100 Mbit/s, 40 ms: a BDP of 345 packets, so slow start has several clean doublings
    // before the 300-packet queue overflows.
    let run = run_datapath(
        dir.path(),
        "dp",
        &["--flows", "1", "--rtt-ms", "40", "--link-mbps", "100", "--queue-pkts", "300", "--duration-ms", "1500"],
    );
    assert_clean(&run);

    // Slow start: the window doubles every RTT. The emulation runs in real time, so a late agent
    // (a loaded CI machine, or a cold debug binary faulting in its pages) holds the window for a
    // while and the ACK clock then credits it in a burst; a fixed wall-clock window can catch such
    // a stall. The growth is measured over every three-RTT span of slow start (before the first
    // loss): the fastest must be a doubling per RTT — Reno's rule — and none may beat it.
    let first_loss_us = run.of_kind("loss").next().expect("the queue overflows")["t_us"].as_u64().unwrap();
    let rtts = 3;
    let factors: Vec<(u64, f64)> = (50_000..first_loss_us.saturating_sub(40_000 * rtts))
        .step_by(10_000)
        .filter_map(|t| {
            let a = run.cwnd_at(1, t)? as f64;
            let b = run.cwnd_at(1, t + 40_000 * rtts)? as f64;
            Some((t / 1000, (b / a).powf(1.0 / rtts as f64)))
        })
        .collect();
    assert!(!factors.is_empty(), "no slow start before the first loss at {first_loss_us} µs");
    let fastest = factors.iter().map(|(_, f)| *f).fold(0.0, f64::max);
    assert!((1.6..=2.4).contains(&fastest), "fastest slow-start growth ×{fastest:.2} per RTT (ms, factor): {factors:.2?}");

    // Loss: the first window decrease after the first reported loss halves the window.
    let first_loss = first_loss_us;
    let cuts = cuts(&run, 1, first_loss);
    let (t_cut, ratio) = *cuts.first().expect("a decrease after the loss");
    assert!((0.45..=0.55).contains(&ratio), "first cut ×{ratio:.3}");
    assert!(t_cut - first_loss < 100_000, "cut {} µs after the loss", t_cut - first_loss);
    // Once per RTT: losses keep arriving every report, but cuts are a round trip apart.
    for w in cuts.windows(2) {
        assert!(w[1].0 - w[0].0 >= 40_000, "two cuts within one RTT: {cuts:?}");
    }
    let stopped = agent.stop();
    assert!(stopped.status.success());
    assert!(stopped.log.contains("\"flows_started\":1") && stopped.log.contains("\"flows_closed\":1"), "{}", stopped.log);
}

#[test]
fn dctcp_cuts_in_proportion_to_the_marked_fraction() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let agent = Agent::start_unix(dir.path(), &["-a", "dctcp", "--trace-flows", trace.to_str().unwrap()]);
    // Two datapaths at once, each marking a fixed fraction F of its packets: α converges to F
    // (g = 1/16) and every cut becomes cwnd·(1 − F/2). The windows are 3–10 packets, and the
    // datapath gets a new window only when its packet count changes (libccp datapaths send
    // whole segments), so two cuts can reach it as one: the cuts are read from the agent's
    // decisions, and the datapath's window is checked against them separately.
    let fractions = [0.1, 0.2];
    let children: Vec<_> = fractions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            spawn_datapath(
                dir.path(),
                &format!("dp{i}"),
                &["--flows", "1", "--rtt-ms", "10", "--mark-fraction", &f.to_string(), "--duration-ms", "3000"],
            )
        })
        .collect();
    let runs: Vec<DatapathRun> = children.into_iter().map(finish_datapath).collect();
    let log = agent.log();
    assert!(agent.stop().status.success());
    let decisions: Vec<serde_json::Value> =
        std::fs::read_to_string(&trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (i, (f, run)) in fractions.iter().zip(&runs).enumerate() {
        assert_clean(run);
        let flow = agent_flow_id(&log, &format!("dp{i}"));
        let decided: Vec<(u64, u64)> = decisions
            .iter()
            .filter(|d| d["flow"].as_u64() == Some(flow))
            .map(|d| (d["t_us"].as_u64().unwrap(), d["commanded_cwnd_bytes"].as_u64().unwrap()))
            .collect();
        let late: Vec<f64> = decided
            .windows(2)
            .filter(|w| w[1].1 < w[0].1 && w[1].0 > 1_500_000)
            .map(|w| w[1].1 as f64 / w[0].1 as f64)
            .filter(|r| *r > 0.5)
            .collect();
        assert!(late.len() >= 20, "F={f}: only {} cuts", late.len());
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        let expect = 1.0 - f / 2.0;
        assert!((mean - expect).abs() < 0.02, "F={f}: mean cut ×{mean:.4}, expected ×{expect:.4} ({late:?})");
        // Every window the datapath held is, in packets, one the agent decided.
        let decided_pkts: std::collections::HashSet<u64> = decided.iter().map(|(_, c)| c / MSS).collect();
        let held = run.cwnd_trace(1);
        assert!(held.len() >= 20, "F={f}: the datapath's window changed {} times", held.len());
        for (t, c) in held.iter().skip(1) {
            assert!(decided_pkts.contains(&(c / MSS)), "F={f}: at {t} µs the datapath holds {c} B, never decided");
        }
    }
}

/// The agent's id of the flow of the datapath whose socket is named `name` (from its log).
fn agent_flow_id(log: &str, name: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.contains("flow started") && l.contains(&format!("/{name} ")))
        .unwrap_or_else(|| panic!("no flow of {name} started: {log}"));
    let id = line.split_whitespace().find_map(|w| w.strip_prefix("flow=")).unwrap();
    id.parse().unwrap()
}

#[test]
fn rules_choose_the_algorithm_per_flow() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        "[default]\nalgorithm = \"reno\"\n\n[[rules]]\nname = \"pinned\"\nmatch = { src_port = 40001 }\nalgorithm = \"constant\"\nparams = { cwnd_pkts = 7 }\n",
    )
    .unwrap();
    let agent = Agent::start_unix(dir.path(), &["--config", config.to_str().unwrap()]);
    let run = run_datapath(dir.path(), "dp", &["--flows", "2", "--rtt-ms", "20", "--link-mbps", "20", "--duration-ms", "800"]);
    assert_clean(&run);
    // Flow 1 (src port 40000) runs Reno and grows; flow 2 (src port 40001) is pinned at 7 packets.
    let reno = run.cwnd_trace(1);
    assert!(reno.iter().any(|(_, c)| *c > 4 * 10 * MSS), "reno did not grow: {reno:?}");
    let pinned = run.cwnd_trace(2);
    assert_eq!(pinned.iter().map(|(_, c)| *c).collect::<Vec<_>>(), vec![7 * MSS], "{pinned:?}");
    let log = agent.log();
    assert!(log.contains("chosen_by=pinned") && log.contains("chosen_by=default"), "{log}");
    assert!(agent.stop().status.success());
}

#[test]
fn a_restarted_agent_adopts_running_flows() {
    let dir = tempfile::tempdir().unwrap();
    let first = Agent::start_unix(dir.path(), &["-a", "reno"]);
    let dp = spawn_datapath(dir.path(), "dp", &["--flows", "2", "--rtt-ms", "20", "--link-mbps", "20", "--duration-ms", "4000"]);
    first.wait_log("flow started", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1000));
    first.kill9();
    // The datapath keeps its flows (libccp holds the last window); a new agent takes over.
    std::thread::sleep(Duration::from_millis(700));
    let second = Agent::start_unix(dir.path(), &["-a", "reno"]);
    let t_restart_us = 1_800_000;
    second.wait_log("adopting a running flow", Duration::from_secs(5));
    let run = finish_datapath(dp);
    assert_clean(&run);
    for sid in [1, 2] {
        let after: Vec<_> = run.cwnd_trace(sid).into_iter().filter(|(t, _)| *t > t_restart_us + 200_000).collect();
        assert!(!after.is_empty(), "flow {sid} got no window from the restarted agent");
    }
    let stopped = second.stop();
    assert!(stopped.status.success());
    assert!(stopped.log.contains("\"flows_adopted\":2"), "{}", stopped.log);
}

#[test]
fn malformed_datagrams_do_not_disturb_running_flows() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start_unix(dir.path(), &["-a", "reno"]);
    let dp = spawn_datapath(dir.path(), "dp", &["--flows", "1", "--rtt-ms", "20", "--link-mbps", "50", "--duration-ms", "2000"]);
    agent.wait_log("flow started", Duration::from_secs(5));
    // A misbehaving peer with a named socket so the agent could reply.
    let evil_path = dir.path().join("evil");
    let evil = UnixDatagram::bind(&evil_path).unwrap();
    let junk: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xff; 3],
        vec![0, 0, 12, 0, 1, 0, 0, 0, 9, 9, 9, 9], // CREATE cut short
        vec![1, 0, 21, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7, 7, 7, 7, 7], // MEASURE, 5 bytes of field
        vec![2, 0, 20, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // INSTALL sent to the agent
        vec![9, 0, 8, 0, 0, 0, 0, 0],              // unknown type
        (0..200u8).collect(),
    ];
    for _ in 0..20 {
        for j in &junk {
            let _ = evil.send_to(j, &agent.socket);
        }
    }
    let run = finish_datapath(dp);
    assert_clean(&run);
    let trace = run.cwnd_trace(1);
    assert!(trace.iter().any(|(t, _)| *t > 1_000_000), "the flow stopped being controlled: {trace:?}");
    let log = agent.log();
    // Any process that reaches the socket can send junk: it is counted and logged at a bounded
    // rate, not once per datagram.
    let lines = log.lines().filter(|l| l.contains("malformed libccp datagram")).count();
    assert!((1..=2).contains(&lines), "{lines} log lines for 140 malformed datagrams:\n{log}");
    assert!(agent.stop().status.success(), "the agent must survive junk");
}

#[test]
fn a_hundred_flows_are_all_controlled_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start_unix(dir.path(), &["-a", "cubic"]);
    let run = run_datapath(dir.path(), "dp", &["--flows", "100", "--rtt-ms", "40", "--link-mbps", "5", "--duration-ms", "2500"]);
    assert_clean(&run);
    for sid in 1..=100 {
        let trace = run.cwnd_trace(sid);
        assert!(trace.len() >= 2, "flow {sid} barely controlled: {trace:?}");
    }
    let stopped = agent.stop();
    assert!(stopped.status.success());
    let log = stopped.log;
    assert!(log.contains("\"flows_started\":100") && log.contains("\"flows_closed\":100"), "{log}");
    assert!(log.contains("\"algorithm_faults\":0"), "{log}");
}

/// The libccp half of the flood figure: the datapath socket is 0600 in a directory no one else
/// can write, so uid 65534 can neither connect nor send a datagram to it.
#[test]
fn an_unprivileged_user_cannot_reach_the_libccp_socket() {
    if !ccp_integration_tests::is_root() {
        eprintln!(
            "SKIPPED an_unprivileged_user_cannot_reach_the_libccp_socket: it drops to uid 65534 itself; CI runs it as root"
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let outer = tempfile::tempdir().unwrap();
    // Everyone may traverse the outer directory: only the agent's own directory stands guard.
    std::fs::set_permissions(outer.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = outer.path().join("ccp");
    let agent = Agent::start_unix(&dir, &["-a", "reno"]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&dir.join("agent")), 0o600, "the datapath socket");
    assert_eq!(mode(&dir) & 0o022, 0, "no one else can write the socket directory");
    let out = std::process::Command::new(ccp_integration_tests::bin("ccp-flood"))
        .args(["connect", "--path", dir.join("agent").to_str().unwrap(), "--secs", "1"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(out.contains("\"stream_ok\":0") && out.contains("\"dgram_ok\":0"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    let stopped = agent.stop();
    assert!(stopped.status.success());
    assert!(!stopped.log.contains("new datapath"), "{}", stopped.log);
}
