//! The agent's CNM listener fed crafted datagrams on loopback, with one libccp test-datapath flow
//! to deliver to: a valid CNM reaches the flow (status, trace); malformed, unknown-flow, non-TCP
//! and forged (a source outside the allow-list) ones are counted by reason and dropped; a flood of
//! forged ones is read in bounded passes, logged a line per reason at most, and leaves the
//! control socket answering. No root needed.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ccp_integration_tests::{bin, finish_datapath, spawn_datapath, Agent};

const FLOW_SRC: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 9, 0, 1), 40_000);
const FLOW_DST: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 9, 0, 2), 5201);
const FLOOD: usize = 2000;

fn status(dir: &Path) -> serde_json::Value {
    let out = Command::new(bin("ccp-agent"))
        .args(["ctl", "--json", "--socket"])
        .arg(dir.join("control.sock"))
        .arg("status")
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl status: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The CNM wire format (ccp_cnm_wire, as ccp-router sends it), written out by hand so
/// that the test checks the agent against the layout rather than against the same encoder.
fn cnm(qfb: u8, proto: u8, src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16)) -> Vec<u8> {
    let mut sample = vec![0u8; 40];
    sample[0] = 0x45;
    sample[9] = proto;
    sample[12..16].copy_from_slice(&src.0.octets());
    sample[16..20].copy_from_slice(&dst.0.octets());
    sample[20..22].copy_from_slice(&src.1.to_be_bytes());
    sample[22..24].copy_from_slice(&dst.1.to_be_bytes());
    let mut b = b"QCNM".to_vec();
    b.extend_from_slice(&[1, qfb, 0, sample.len() as u8]);
    for v in [4500i32, 3000, 750] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(&77u32.to_be_bytes());
    b.extend_from_slice(&0u64.to_be_bytes());
    b.extend_from_slice(&sample);
    b
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_status(dir: &Path, what: &str, cond: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let s = status(dir);
        if cond(&s) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out waiting for {what}: {s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn crafted_cnms_are_delivered_or_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let listen = format!("127.0.0.1:{port}");
    let trace = dir.path().join("trace.jsonl");
    let agent = Agent::start_unix(
        dir.path(),
        &["--cnm-listen", &listen, "--cnm-allow-from", "127.0.0.1", "--trace-flows", trace.to_str().unwrap()],
    );
    agent.wait_log("CNM listener", Duration::from_secs(5));
    agent.wait_log("control socket", Duration::from_secs(5));
    let ip = |a: Ipv4Addr| a.to_string();
    let dp = spawn_datapath(
        dir.path(),
        "dp",
        &[
            "--flows",
            "1",
            "--duration-ms",
            "3000",
            "--link-mbps",
            "10",
            "--src-ip",
            &ip(FLOW_SRC.0),
            "--dst-ip",
            &ip(FLOW_DST.0),
            "--src-port",
            &FLOW_SRC.1.to_string(),
            "--dst-port",
            &FLOW_DST.1.to_string(),
        ],
    );
    wait_status(dir.path(), "the flow", |s| {
        s["flows"].as_array().is_some_and(|f| f.len() == 1 && f[0]["reports"].as_u64().unwrap_or(0) > 0)
    });

    let to: SocketAddr = listen.parse().unwrap();
    let allowed = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Loopback holds all of 127/8: a local process can send from 127.0.0.2, which is not listed.
    let forger = UdpSocket::bind("127.0.0.2:0").unwrap();
    for qfb in [10, 20, 30] {
        allowed.send_to(&cnm(qfb, 6, FLOW_SRC, FLOW_DST), to).unwrap();
    }
    allowed.send_to(b"not a CNM at all", to).unwrap();
    allowed.send_to(&cnm(64, 6, FLOW_SRC, FLOW_DST), to).unwrap(); // qFb out of range
    allowed.send_to(&cnm(5, 6, FLOW_DST, FLOW_SRC), to).unwrap(); // the reverse direction: no such flow
    allowed.send_to(&cnm(5, 6, (FLOW_SRC.0, 40_001), FLOW_DST), to).unwrap(); // another port: no such flow
    allowed.send_to(&cnm(5, 17, FLOW_SRC, FLOW_DST), to).unwrap(); // UDP
    let forged = cnm(63, 6, FLOW_SRC, FLOW_DST);
    // The flood waits in the socket for an agent held still, so it is there as a backlog however
    // fast the agent reads (an agent that kept up would never need a second pass).
    agent.signal(libc::SIGSTOP);
    let t0 = Instant::now();
    let mut sent = 0;
    for _ in 0..FLOOD {
        sent += usize::from(forger.send_to(&forged, to).is_ok());
    }
    agent.signal(libc::SIGCONT);
    // The control socket answers in the middle of it.
    status(dir.path());
    let flood_s = t0.elapsed().as_secs_f64();
    // The kernel reports a full buffer's drops with the next datagram it delivers.
    std::thread::sleep(Duration::from_millis(300));
    allowed.send_to(b"sentinel", to).unwrap();

    let s = wait_status(dir.path(), "every datagram read or dropped", |s| {
        let c = &s["cnm"]["counters"];
        let n = |k: &str| c[k].as_u64().unwrap_or(0);
        n("received") + n("socket_overflows") >= 9 + sent as u64
    });
    let finished = finish_datapath(dp);
    assert!(finished.status.success(), "{}", finished.stderr);
    let stopped = agent.stop();
    assert!(stopped.status.success(), "{}", stopped.log);

    let c = &s["cnm"]["counters"];
    let n = |k: &str| c[k].as_u64().unwrap_or(u64::MAX);
    eprintln!("{FLOOD} forged datagrams sent in {flood_s:.3} s; cnm status: {:#}", s["cnm"]);
    assert_eq!(n("delivered"), 3, "{c}");
    assert_eq!(n("malformed"), 3, "{c}");
    assert_eq!(n("unknown_flow"), 2, "{c}");
    assert_eq!(n("not_tcp"), 1, "{c}");
    assert_eq!(n("not_allowed") + n("socket_overflows"), sent as u64, "every forged datagram is counted: {c}");
    assert!(n("not_allowed") > 0, "{c}");
    assert!(n("deferred_passes") > 0, "a flood is read in bounded passes: {c}");
    let flow = &s["flows"][0];
    assert_eq!(flow["src"], format!("{}:{}", FLOW_SRC.0, FLOW_SRC.1));
    assert_eq!(flow["cnms"], 3, "the flow got the three real CNMs and none of the forged ones: {flow}");
    assert_eq!(s["counters"]["feedback_reports"], 3);

    // One log line per reason at most (the flood would otherwise write thousands).
    let drops: Vec<&str> = stopped.log.lines().filter(|l| l.contains("CNM dropped")).collect();
    for reason in ["not_allowed", "malformed", "unknown_flow", "not_tcp"] {
        let k = drops.iter().filter(|l| l.contains(reason)).count();
        assert_eq!(k, 1, "one line for {reason} within ten seconds:\n{}", drops.join("\n"));
    }
    assert!(stopped.log.contains("cnms=3"), "the flow's close line counts its CNMs:\n{}", stopped.log);

    // The trace: three feedback reports on the flow's line, in order, on the datapath's clock.
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let fb: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("qcn_fb").is_some()).collect();
    assert_eq!(fb.iter().map(|l| l["qcn_fb"].as_u64().unwrap()).collect::<Vec<_>>(), vec![10, 20, 30]);
    for l in &fb {
        assert_eq!((l["acked_bytes"].as_u64(), l["cnm_cpid"].as_u64()), (Some(0), Some(77)), "{l}");
        assert_eq!(l["qcn_q_off_bytes"], 3000);
        assert!(l["cnm_read_to_action_us"].as_u64().is_some(), "{l}");
    }
    let times: Vec<u64> = lines.iter().map(|l| l["t_us"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "the flow's reports never go back in time: {times:?}");
    let lat: Vec<u64> = fb.iter().map(|l| l["cnm_read_to_action_us"].as_u64().unwrap()).collect();
    eprintln!("read → decision applied, µs: {lat:?}");
}

#[test]
fn a_listener_without_an_allow_list_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin("ccp-agent"))
        .args(["run", "--datapath", "unix", "--ipc-dir"])
        .arg(dir.path())
        .arg("--control-socket")
        .arg(dir.path().join("control.sock"))
        .args(["--cnm-listen", "127.0.0.1:7470"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--cnm-allow-from") && err.contains("forged CNM"), "{err}");
    assert!(!dir.path().join("control.sock").exists(), "nothing was opened");
}
