//! Issue 29: honest windows on real kernel flows that their window does not limit. The agent's
//! Reno steers a flow through a 100 Mbit/s, 20 ms path (a ~250 kB BDP) whose application sends
//! at 2 Mbit/s, and one whose receiver holds it to a 64 kB buffer. Neither fills its window, so
//! the window the kernel uses stays within twice what the flow has in flight (or the 10-packet
//! restart window), where it used to grow by ~3 MSS a second without end; when the application
//! turns bulk, the window grows from there, at most doubling per round trip, instead of releasing
//! a stale window at line rate. The flows are `app_flow.py`'s, which samples TCP_INFO every 5 ms.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use super::support::*;

const RATE_MBPS: u32 = 100;
const RESTART_WINDOW_PKTS: u64 = 10;

fn script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/ebpf/app_flow.py").display().to_string()
}

/// The sink in the receiver's namespace, killed on drop.
struct Sink(Child);

impl Sink {
    fn start(ns: &str, addr: &str, port: u16, rcvbuf: Option<u32>) -> Sink {
        let mut cmd = in_ns(ns);
        cmd.args(["python3", &script(), "sink", "--addr", addr, "--port", &port.to_string()]);
        if let Some(b) = rcvbuf {
            cmd.args(["--rcvbuf", &b.to_string()]);
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("spawn the sink");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the sink's ready line");
        assert!(line.contains("listening"), "the sink did not start: {line:?}");
        Sink(child)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One TCP_INFO sample of the sending socket.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t: f64,
    bulk: bool,
    cwnd_bytes: u64,
    inflight_bytes: u64,
    acked: u64,
}

/// Runs the sender to the end; its samples.
fn send(ns: &str, addr: &str, port: u16, cc: &str, phases: &[&str]) -> Vec<Sample> {
    let out = in_ns(ns)
        .args(["python3", &script(), "send", "--addr", addr, "--port", &port.to_string(), "--cc", cc])
        .args(phases)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run the sender");
    assert!(out.status.success(), "the sender failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let samples: Vec<Sample> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("sample {l:?}: {e}"));
            let n = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
            let mss = n("mss") as u64;
            Sample {
                t: n("t"),
                bulk: v["phase"] == "bulk",
                cwnd_bytes: n("cwnd") as u64 * mss,
                inflight_bytes: n("unacked") as u64 * mss,
                acked: n("acked") as u64,
            }
        })
        .collect();
    assert!(samples.len() > 100, "{} samples", samples.len());
    samples
}

/// The most in flight over the second before each sample, bytes.
fn used_over_last_second(samples: &[Sample], i: usize) -> u64 {
    let t = samples[i].t;
    samples[..=i].iter().rev().take_while(|s| s.t >= t - 1.0).map(|s| s.inflight_bytes).max().unwrap_or(0)
}

fn agent_with_reno(tag: &str) -> (AgentSetup, ccp_integration_tests::Agent) {
    let setup = AgentSetup::new(tag, "[default]\nalgorithm = \"reno\"\n");
    let trace = setup.trace_path();
    let agent = setup.start_with("info", &["--trace-flows", trace.to_str().unwrap()]);
    (setup, agent)
}

/// The reports the agent traced: (cwnd_limited, inflight, window the kernel held).
fn traced(setup: &AgentSetup) -> Vec<(bool, u64, u64)> {
    let text = std::fs::read_to_string(setup.trace_path()).expect("the flow trace");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| (v["cwnd_limited"].as_bool().unwrap(), v["inflight_bytes"].as_u64().unwrap(), v["cwnd_bytes"].as_u64().unwrap()))
        .collect()
}

#[test]
fn an_application_limited_flow_keeps_its_window_near_its_flight_and_grows_from_there() {
    if skip_without_root("an_application_limited_flow_keeps_its_window_near_its_flight_and_grows_from_there") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("app");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS, 300);
    let (setup, agent) = agent_with_reno(&tag);
    let _sink = Sink::start(&router.receiver_ns, &router.receiver_addr, 5301, None);
    let samples = send(
        &router.sender_ns,
        &router.receiver_addr,
        5301,
        &setup.name,
        &["--rate-mbps", "2", "--rate-s", "6", "--bulk-s", "3"],
    );
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);

    let mss = 1448;
    let restart = RESTART_WINDOW_PKTS * mss;
    // The rate phase after its first second: the window within twice the flight or the restart
    // window (one MSS of slack: the kernel rounds to packets).
    let mut worst = 0.0f64;
    for (i, s) in samples.iter().enumerate().filter(|(_, s)| !s.bulk && s.t > 1.0) {
        let bound = (2 * used_over_last_second(&samples, i)).max(restart) + mss;
        worst = worst.max(s.cwnd_bytes as f64 / bound as f64);
        assert!(s.cwnd_bytes <= bound, "at {:.2} s the window {} B exceeds {bound} B", s.t, s.cwnd_bytes);
    }
    let rate: Vec<&Sample> = samples.iter().filter(|s| !s.bulk && s.t > 1.0).collect();
    let max_window = rate.iter().map(|s| s.cwnd_bytes).max().unwrap();
    let max_flight = rate.iter().map(|s| s.inflight_bytes).max().unwrap();
    eprintln!("2 Mbit/s: window at most {max_window} B, flight at most {max_flight} B, window/bound at most {worst:.2}");

    // Bulk: it starts from the window in use, not a stale one, and grows by slow start: at most
    // doubling per 20 ms round trip (one doubling of slack for the report and sample clocks),
    // checked over 45 ms, and then it fills the path.
    let start = samples.iter().position(|s| s.bulk).expect("a bulk phase");
    assert!(samples[start].cwnd_bytes <= (2 * max_flight).max(restart) + mss, "the bulk phase starts from the used window");
    let t0 = samples[start].t;
    for (i, s) in samples.iter().enumerate().skip(start) {
        let Some(before) = samples[..i].iter().rev().find(|p| p.t <= s.t - 0.045) else { continue };
        if before.t < t0 - 0.045 {
            continue;
        }
        let doublings = (s.t - before.t) / 0.020 + 1.0;
        assert!(
            s.cwnd_bytes as f64 <= before.cwnd_bytes.max(restart) as f64 * doublings.exp2() + mss as f64,
            "at {:.3} s the window jumped to {} B from {} B at {:.3} s",
            s.t,
            s.cwnd_bytes,
            before.cwnd_bytes,
            before.t
        );
    }
    let last = samples.last().unwrap();
    let one_s_before = samples.iter().rev().find(|s| s.t <= last.t - 1.0).unwrap();
    let mbps = (last.acked - one_s_before.acked) as f64 * 8.0 / (last.t - one_s_before.t) / 1e6;
    eprintln!(
        "bulk: the window grew from {} B to {} B; last second {mbps:.1} Mbit/s",
        samples[start].cwnd_bytes, last.cwnd_bytes
    );
    assert!(mbps > 0.6 * f64::from(RATE_MBPS), "bulk fills the path within 2 s: {mbps:.1} Mbit/s");

    let reports = traced(&setup);
    let unused = reports.iter().filter(|(limited, _, _)| !limited).count();
    assert!(unused * 2 > reports.len(), "most reports say the window did not limit ({unused} of {})", reports.len());
}

#[test]
fn a_receiver_limited_flow_keeps_its_window_near_its_flight() {
    if skip_without_root("a_receiver_limited_flow_keeps_its_window_near_its_flight") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("rwnd");
    let router = Router::start(&format!("ccpebpf-{tag}"), 10, RATE_MBPS, 300);
    let (setup, agent) = agent_with_reno(&tag);
    let _sink = Sink::start(&router.receiver_ns, &router.receiver_addr, 5302, Some(64 * 1024));
    let samples = send(&router.sender_ns, &router.receiver_addr, 5302, &setup.name, &["--bulk-s", "6"]);
    std::thread::sleep(Duration::from_millis(100));
    let stopped = agent.stop();
    assert!(stopped.status.success(), "clean shutdown:\n{}", stopped.log);

    let mss = 1448;
    let steady: Vec<(usize, &Sample)> = samples.iter().enumerate().filter(|(_, s)| s.t > 1.0).collect();
    for (i, s) in &steady {
        let bound = (2 * used_over_last_second(&samples, *i)).max(RESTART_WINDOW_PKTS * mss) + mss;
        assert!(s.cwnd_bytes <= bound, "at {:.2} s the window {} B exceeds {bound} B", s.t, s.cwnd_bytes);
    }
    let max_window = steady.iter().map(|(_, s)| s.cwnd_bytes).max().unwrap();
    let max_flight = steady.iter().map(|(_, s)| s.inflight_bytes).max().unwrap();
    eprintln!("64 kB receive buffer: window at most {max_window} B, flight at most {max_flight} B");
    assert!(max_flight <= 128 * 1024, "the receiver's window limits the flow: {max_flight} B in flight");
    // In slow start (no loss: the kernel's ssthresh is still infinite) Linux counts a window
    // below twice the largest flight as limiting, so the reports say "limited" and Reno grows the
    // window to about twice the flight, and stops there.
    let reports = traced(&setup);
    let limited = reports.iter().filter(|(limited, _, _)| *limited).count();
    eprintln!("{limited} of {} reports limited by the window (the slow-start rule)", reports.len());
    assert!(max_window >= max_flight, "{max_window} {max_flight}");
}
