//! Issue 29's acceptance test for Python blocked inside C: one flow's Python algorithm sleeps 2 s
//! in `on_report`, and the agent's loop — 100 native flows, the control socket — does not notice.
//! The agent runs in this process on a datapath fed by a thread of the test, which stamps each
//! report as it sends it; the datapath measures each native flow's report→command latency when
//! the command reaches it. A process of its own: the stuck call keeps the process's one Python
//! interpreter busy for its 2 s.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccp_agent::clock::Now;
use ccp_agent::config::{AgentConfig, Overrides};
use ccp_agent::control::protocol::Request;
use ccp_agent::control::server::ControlServer;
use ccp_agent::datapath::{ApplyError, Datapath, DatapathEvent, FlowInfo, FlowRef};
use ccp_agent::runtime::{Runtime, Services};
use ccp_contract::{Capabilities, Command, Report, RttStats, Settings};

const NATIVE_FLOWS: u32 = 100;
/// The Python flow's id; the native flows are 1..=NATIVE_FLOWS.
const PYTHON_SID: u32 = NATIVE_FLOWS + 1;
const REPORT_EVERY: Duration = Duration::from_millis(10);
const RUN: Duration = Duration::from_millis(3500);
/// When, on the datapath's clock, the Python flow's report comes that it sleeps 2 s on.
const SLEEP_AT_US: u64 = 500_000;

/// Per answered report: its flow, when it was sent, how long its command took.
type Latencies = Arc<Mutex<Vec<(u32, Instant, Duration)>>>;

/// A datapath whose reports come from the test's feeder thread, each stamped when sent.
struct Fed {
    reports: Receiver<(FlowRef, Report, Instant)>,
    /// The feeder's wake-ups (one datagram a burst), what the loop polls.
    wake: UnixDatagram,
    announced: bool,
    /// When each flow's oldest report no command has answered yet was sent.
    unanswered: HashMap<FlowRef, Instant>,
    latencies: Latencies,
}

impl Datapath for Fed {
    fn describe(&self) -> String {
        "fed".into()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_cwnd_bytes: 1 << 32,
            max_rate_bytes_per_s: 1 << 32,
            can_clear_pacing: true,
            per_rtt_reports: false,
            cwnd_packets: None,
        }
    }
    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut mio::unix::SourceFd(&self.wake.as_raw_fd()), token, mio::Interest::READABLE)
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, out: &mut Vec<DatapathEvent>, budget: usize, _: Now) -> usize {
        let mut buf = [0u8; 64];
        while self.wake.recv(&mut buf).is_ok() {}
        if !self.announced {
            self.announced = true;
            for sid in 1..=PYTHON_SID {
                let cong_alg = (sid == PYTHON_SID).then(|| "sleepy".to_string());
                let info = FlowInfo { mss_bytes: 1448, init_cwnd_bytes: 14_480, cong_alg, ..FlowInfo::default() };
                out.push(DatapathEvent::FlowStarted { flow: FlowRef { peer: 0, sid }, info });
            }
        }
        let mut read = 0;
        while read < budget {
            let Ok((flow, report, sent)) = self.reports.try_recv() else { break };
            self.unanswered.entry(flow).or_insert(sent);
            out.push(DatapathEvent::Report { flow, report });
            read += 1;
        }
        read
    }
    fn apply(&mut self, flow: FlowRef, _: &Settings, _: &Command, _: Now) -> Result<(), ApplyError> {
        if let Some(sent) = self.unanswered.remove(&flow) {
            self.latencies.lock().unwrap().push((flow.sid, sent, sent.elapsed()));
        }
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "fed".into()
    }
}

/// Every flow's reports, one every `REPORT_EVERY` for `RUN`, the flows in ten groups a tenth of
/// that apart (the Python flow in the first): slow start, every report acknowledging ten packets,
/// so every native report changes the window and is answered.
fn feed(to: std::sync::mpsc::Sender<(FlowRef, Report, Instant)>, wake: UnixDatagram) {
    let rtt = RttStats { min_us: 20_000, max_us: 20_000, last_us: 20_000, srtt_us: 20_000, mean_us: 20_000, samples: 10 };
    let started = Instant::now();
    let group = REPORT_EVERY / 10;
    for tick in 10.. {
        let at = started + group * tick;
        if at > started + RUN {
            return;
        }
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let now_us = u64::from(tick / 10) * REPORT_EVERY.as_micros() as u64;
        let first = (tick % 10) * 10;
        let sids = if first == 0 { vec![PYTHON_SID] } else { vec![] }.into_iter().chain(first + 1..=first + 10);
        for sid in sids {
            let report = Report {
                now_us,
                interval_us: REPORT_EVERY.as_micros() as u64,
                mss_bytes: 1448,
                acked_bytes: 14_480,
                acked_pkts: 10,
                rtt: Some(rtt),
                inflight_bytes: 14_480,
                ..Report::default()
            };
            let _ = to.send((FlowRef { peer: 0, sid }, report, Instant::now()));
        }
        let _ = wake.send(b"!");
    }
}

/// What a `ctl status` during the run said, and how long it took.
struct Asked {
    at: Duration,
    took: Duration,
    python_algorithm: String,
    python_faults: u64,
    flows: usize,
}

#[test]
fn a_python_call_blocked_in_c_for_2_s_stalls_no_native_flow_and_no_control_request() {
    ccp_python::register();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sleepy.py"),
        format!(
            "import time
from ccp_agent import Action, Algorithm
class Sleepy(Algorithm):
    def on_report(self, report):
        if report.now_us == {SLEEP_AT_US}:
            time.sleep(2)
        return Action(20_000.0)
"
        ),
    )
    .unwrap();
    let config_file = dir.path().join("agent.toml");
    std::fs::write(
        &config_file,
        "[default]\nalgorithm = \"reno\"\n\
         [[rules]]\nname = \"sleepy\"\nmatch = { cong_alg = \"sleepy\" }\nalgorithm = \"py:sleepy.py:Sleepy\"\n",
    )
    .unwrap();
    let config = AgentConfig::load(&config_file, &Overrides::default()).unwrap();
    let socket = dir.path().join("control.sock");
    let services = Services { control: Some(ControlServer::bind(&socket, None).unwrap()), ..Services::default() };

    let (to, reports) = channel();
    let (wake_tx, wake) = UnixDatagram::pair().unwrap();
    wake.set_nonblocking(true).unwrap();
    let latencies = Latencies::default();
    let fed = Fed { reports, wake, announced: false, unanswered: HashMap::new(), latencies: latencies.clone() };
    // The runtime (its datapaths) stays on the thread that runs it.
    let (stop_tx, stop_rx) = channel();
    let agent = std::thread::spawn(move || {
        let mut runtime = Runtime::new(&config, vec![Box::new(fed)], services).unwrap();
        stop_tx.send(runtime.stop_flag()).unwrap();
        runtime.run().unwrap();
    });
    let stop = stop_rx.recv().unwrap();
    let started = Instant::now();
    let feeder = std::thread::spawn(move || feed(to, wake_tx));

    // `ctl status` every 100 ms, through the stall and after it.
    let mut asked = Vec::new();
    std::thread::sleep(Duration::from_millis(300));
    while started.elapsed() < RUN - Duration::from_millis(200) {
        let t = Instant::now();
        // The last row is the Python flow's (rows come in flow order).
        let request = Request::Status { summary: false, offset: Some(NATIVE_FLOWS as usize), limit: Some(1) };
        let response = ccp_agent::control::client::call(&socket, &request).unwrap();
        let took = t.elapsed();
        assert!(response.ok, "{response:?}");
        let flows = response.result["flows"].as_array().unwrap();
        let python = flows.iter().find(|f| f["sid"] == PYTHON_SID).expect("the Python flow is listed");
        asked.push(Asked {
            at: t - started,
            took,
            python_algorithm: python["algorithm"].as_str().unwrap().to_string(),
            python_faults: python["faults"].as_u64().unwrap(),
            flows: response.result["flow_count"].as_u64().unwrap_or(0) as usize,
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    feeder.join().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    agent.join().unwrap();

    // Native reports are answered within 10 ms, the stall included. On a quiet machine every one
    // is (p99 0.1-1 ms, the slowest 0.3-8 ms); a test machine busy with other work delays this
    // loop now and then whatever Python does: runs without the stuck call show the same tail, up
    // to 1-2 % of reports at 10 ms or more and tens of ms at worst. A loop that waited for the
    // call would hold every report sent in those 2 s, for up to 2 s (with `inline`: half of them
    // at 10 ms or more, p99 2 s).
    let latencies = latencies.lock().unwrap();
    let mut native: Vec<(Duration, Duration)> =
        latencies.iter().filter(|(sid, ..)| *sid <= NATIVE_FLOWS).map(|(_, sent, l)| (*l, *sent - started)).collect();
    native.sort();
    let worst: Vec<String> = native.iter().rev().take(5).map(|(l, at)| format!("{l:?} at {at:?}")).collect();
    let native: Vec<Duration> = native.into_iter().map(|(l, _)| l).collect();
    let expected = (RUN.as_millis() / REPORT_EVERY.as_millis()) as usize * NATIVE_FLOWS as usize;
    let (p99, max) = (native[native.len() * 99 / 100], native[native.len() - 1]);
    let over = native.iter().filter(|l| **l >= Duration::from_millis(10)).count();
    eprintln!(
        "{} native reports: report->command p50 {:?}, p99 {p99:?}, max {max:?}, {over} at 10 ms or more; the longest: {worst:?}",
        native.len(),
        native[native.len() / 2]
    );
    assert!(native.len() >= expected * 9 / 10, "{} of about {expected} native reports answered", native.len());
    assert!(over * 20 < native.len(), "{over} of {} native reports took 10 ms or more; the longest: {worst:?}", native.len());
    assert!(max < Duration::from_millis(250), "a native flow waited {max:?} for its command; the longest: {worst:?}");

    // The control socket answered throughout, and showed the Python flow on the fallback.
    let slowest = asked.iter().map(|a| a.took).max().unwrap();
    eprintln!("{} ctl status answered, slowest in {slowest:?}", asked.len());
    assert!(asked.len() >= 20, "only {} status requests", asked.len());
    assert!(asked.iter().all(|a| a.flows == PYTHON_SID as usize));
    assert!(slowest < Duration::from_millis(250), "a status request took {slowest:?}");
    let sleeping = Duration::from_micros(SLEEP_AT_US) + Duration::from_millis(300)
        ..Duration::from_micros(SLEEP_AT_US) + Duration::from_millis(1900);
    let during: Vec<&Asked> = asked.iter().filter(|a| sleeping.contains(&a.at)).collect();
    assert!(during.len() >= 10, "{} status requests while the call sleeps", during.len());
    for a in during {
        assert_eq!(a.python_algorithm, "reno", "at {:?}, the Python flow is on the fallback", a.at);
        assert!(a.python_faults >= 4, "at {:?}: {} faults", a.at, a.python_faults);
    }
}
