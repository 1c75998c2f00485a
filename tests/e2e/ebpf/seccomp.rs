//! The agent under the systemd unit's system call filter (`SystemCallFilter=`, issue 29 item 5),
//! loaded by `ccp-unit-seccomp` from the unit compiled into ccp-agent, as systemd would load it:
//! the eBPF datapath with real kernel flows (load, SCHED_FIFO, the ring buffer, `ctl attach` and
//! `detach` into a namespace, status, a hot swap to a Python algorithm, a clean shutdown), the
//! libccp unix datapath with a Python algorithm, and a negative control (without `bpf` the agent
//! stops with an error that says so). A call the filter refuses fails with EPERM: each run's log
//! must show none.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ccp_agent::control::client::call;
use ccp_agent::control::protocol::{Request, Target};
use ccp_agent::datapath::Selection;
use ccp_integration_tests::{bin, finish_datapath, spawn_datapath, Agent};

use super::support::*;

/// `ccp-unit-seccomp [--without CALL]... -- ccp-agent`: the agent's arguments follow.
fn under_unit_filter(without: &[&str]) -> Command {
    let mut cmd = Command::new(bin("ccp-unit-seccomp"));
    for call in without {
        cmd.args(["--without", call]);
    }
    cmd.arg("--").arg(bin("ccp-agent"));
    cmd
}

fn python_reno() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/python/examples/reno.py");
    format!("py:{}:Reno", path.canonicalize().unwrap().display())
}

/// Lines of a run's log that say a system call was refused.
fn refusals(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("Operation not permitted") || l.contains("os error 1)") || l.contains("EPERM")).collect()
}

/// The scheduling policy of process `pid` (field 41 of /proc/PID/stat; 1 is SCHED_FIFO).
fn sched_policy(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(41 - 3).unwrap().parse().unwrap()
}

fn status_flows(socket: &Path) -> Vec<serde_json::Value> {
    let r = call(socket, &Request::Status { summary: false, offset: None, limit: None }).expect("ctl status");
    assert!(r.ok, "{r:?}");
    r.result["flows"].as_array().cloned().unwrap_or_default()
}

/// Polls `cond` every 100 ms for up to `secs`.
fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    (0..secs * 10).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        cond()
    })
}

#[test]
fn the_agent_steers_kernel_flows_under_the_units_system_call_filter() {
    if skip_without_root("the_agent_steers_kernel_flows_under_the_units_system_call_filter") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("scf");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, 50, 100);
    let setup = AgentSetup::new(&tag, "[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 10\n");
    // The filter is what is under test, not the call budget (a loaded machine can take more than
    // the default 10 ms over a class's first call).
    let agent = Agent::spawn(setup.command(under_unit_filter(&[]), "info", &["--python-call-budget-ms", "200"]), None);
    agent.wait_log("ebpf congestion control registered", Duration::from_secs(10));
    assert!(agent.log().contains("ccp-unit-seccomp: SystemCallFilter=@system-service"), "{}", agent.log());
    assert_eq!(sched_policy(agent.pid()), 1, "the agent switched itself to SCHED_FIFO:\n{}", agent.log());
    let socket = setup.control_socket();

    // One flow born on the agent's congestion control, one on cubic that `ctl attach` moves over.
    let _server = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5211);
    let _server2 = IperfServer::start(&router.receiver_ns, &router.receiver_addr, 5212);
    let born = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5211, 6, &setup.name);
    let moved = IperfClient::start(&mut in_ns(&router.sender_ns), &router.receiver_addr, 5212, 6, "cubic");
    std::thread::sleep(Duration::from_millis(1000));
    let netns = vec![Router::netns_path(&router.sender_ns)];
    let spec = Selection { ports: vec![5212], netns: netns.clone(), ..Selection::default() };
    let r = call(&socket, &Request::Attach { spec }).expect("ctl attach");
    assert!(r.ok && r.result["switched"].as_array().is_some_and(|s| !s.is_empty()), "{r:?}\n{}", agent.log());

    // Both data flows on the agent, at the constant window.
    let on_port = |flows: &[serde_json::Value], port: &str| {
        flows.iter().filter(|f| f["dst"].as_str().is_some_and(|d| d.ends_with(port))).cloned().collect::<Vec<_>>()
    };
    let controlled = eventually(3, || {
        let flows = status_flows(&socket);
        [":5211", ":5212"].iter().all(|p| {
            on_port(&flows, p)
                .iter()
                .any(|f| f["algorithm"] == "constant" && f["cwnd_bytes"] == 14_480 && f["reports"].as_u64() > Some(5))
        })
    });
    assert!(controlled, "{:#?}\n{}", status_flows(&socket), agent.log());

    // A hot swap to a Python algorithm: the interpreter starts and runs under the filter.
    let reno = python_reno();
    let r = call(&socket, &Request::Swap { target: Target::All, algorithm: reno.clone(), params: toml::Table::new() })
        .expect("ctl swap");
    assert!(r.ok && r.result["swapped"].as_array().is_some_and(|s| s.len() >= 2), "{r:?}");
    let reports_now = |flows: &[serde_json::Value]| -> u64 { flows.iter().filter_map(|f| f["reports"].as_u64()).sum() };
    let before = reports_now(&status_flows(&socket));
    let python_steers = eventually(3, || {
        let flows = status_flows(&socket);
        let data = [on_port(&flows, ":5211"), on_port(&flows, ":5212")].concat();
        reports_now(&flows) > before + 50
            && data.iter().all(|f| f["algorithm"] == reno.as_str() && f["faults"] == 0)
            && data.iter().any(|f| f["cwnd_bytes"].as_u64() != Some(14_480))
    });
    assert!(python_steers, "{:#?}\n{}", status_flows(&socket), agent.log());

    let spec = Selection { ports: vec![5212], netns, ..Selection::default() };
    let r = call(&socket, &Request::Detach { spec }).expect("ctl detach");
    assert!(r.ok, "{r:?}");
    born.finish();
    moved.finish();
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);
    assert!(refusals(&stopped.log).is_empty(), "refused system calls:\n{}", refusals(&stopped.log).join("\n"));
    assert!(!std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap().contains(&setup.name));
}

/// The filter is really in force: without `bpf`, the agent cannot load its datapath and stops
/// with an error saying so, instead of running unfiltered.
#[test]
fn without_bpf_in_the_filter_the_agent_stops_with_an_error_that_says_so() {
    if skip_without_root("without_bpf_in_the_filter_the_agent_stops_with_an_error_that_says_so") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("scn");
    let setup = AgentSetup::new(&tag, "");
    let agent = Agent::spawn(setup.command(under_unit_filter(&["bpf"]), "info", &[]), None);
    let stopped = agent.wait_exit(Duration::from_secs(10), "exit without bpf(2)");
    assert!(!stopped.status.success(), "{}", stopped.log);
    let log = stopped.log.to_lowercase();
    assert!(log.contains("bpf") && log.contains("operation not permitted"), "the error names BPF and EPERM:\n{}", stopped.log);
    assert!(!log.contains("registered"), "{}", stopped.log);
}

/// The libccp unix datapath and a Python algorithm under the filter (no root needed: the filter
/// comes with no_new_privs, as NoNewPrivileges=yes in the unit).
#[test]
fn a_libccp_datapath_runs_a_python_algorithm_under_the_units_system_call_filter() {
    let dir = tempfile::tempdir().unwrap();
    let reno = python_reno();
    let mut cmd = under_unit_filter(&[]);
    cmd.args(["--log-level", "info", "run", "--datapath", "unix", "--ipc-dir"])
        .arg(dir.path())
        .args(["--ipc-name", "agent", "--control-socket"])
        .arg(dir.path().join("control.sock"))
        .args(["-a", &reno])
        // The filter is what is under test, not the call budget: a loaded machine can take more
        // than the default 10 ms over a class's first call.
        .args(["--python-call-budget-ms", "200"]);
    let agent = Agent::spawn(cmd, Some(dir.path().join("agent")));
    let run = finish_datapath(spawn_datapath(
        dir.path(),
        "dp",
        &["--flows", "2", "--rtt-ms", "20", "--link-mbps", "50", "--queue-pkts", "100", "--duration-ms", "1500"],
    ));
    assert!(run.status.success(), "datapath: {}\n{}", run.stderr, agent.log());
    for end in run.of_kind("end") {
        assert_eq!(end["invoke_errors"], 0, "{}", run.stderr);
    }
    for sid in [1, 2] {
        assert!(
            run.cwnd_trace(sid).len() >= 10,
            "flow {sid}: the agent's windows reached the datapath: {:?}",
            run.cwnd_trace(sid)
        );
    }
    let socket: PathBuf = dir.path().join("control.sock");
    let r = call(&socket, &Request::Status { summary: true, offset: None, limit: None }).expect("ctl status");
    assert!(r.ok, "{r:?}");
    let stopped = agent.stop();
    assert!(stopped.status.success(), "{}", stopped.log);
    let log = &stopped.log;
    assert!(log.contains("ccp-unit-seccomp: SystemCallFilter=") && log.contains("reno.py:Reno"), "{log}");
    assert!(log.contains("\"flows_started\":2") && log.contains("\"algorithm_faults\":0"), "{log}");
    assert!(refusals(log).is_empty(), "refused system calls:\n{}", refusals(log).join("\n"));
}
