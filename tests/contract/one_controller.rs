//! One contract, one controller: the same algorithm on the same reports gives the same datapath
//! changes through the agent's path (its flow table, latch and a datapath adapter) and through
//! the simulator's (its per-flow adapter), faults and fallbacks included.
//!
//! The reports are a recorded sequence (`reports.csv`: one flow of a simulated 48 Mbit/s,
//! 20 ms dumbbell with ECN marking and a finite buffer, one of a QCN dumbbell whose reports carry
//! congestion notifications, and hand-written edge cases). Regenerate it with
//! `cargo test -p ccp-integration-tests --test one_controller -- --ignored record`.
//! Each algorithm runs clean, wrapped so that it returns NaN and absurd values on some reports,
//! and wrapped so that it panics — four times in a row at the end, which replaces it with the
//! fallback.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ccp_agent::clock::{Clock, Now};
use ccp_agent::datapath::{ApplyError, Datapath, DatapathEvent, FlowInfo, FlowRef};
use ccp_agent::flows::FlowTable;
use ccp_agent::rules::Policy;
use ccp_contract::{
    Action, Algorithm, AlgorithmFactory, Capabilities, Choice, Command, FlowStart, Limits, NetworkFeedback, Pacing, Report,
    ReportPolicy, RttStats, Settings, StateVar, Urgent,
};
use ccp_sim::cc::{FlowCc, CAPABILITIES};
use ccp_sim::time::PS_PER_US;

const ALGORITHMS: &[&str] = &["reno", "cubic", "dctcp", "nimbus", "abc"];
const MSS: u32 = 1448;
const INIT_CWND_BYTES: u64 = 10 * MSS as u64;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contract/reports.csv")
}

// --- the fixture's format: one report per line, fixed columns ------------------------------------

const HEADER: &str = "now_us,interval_us,mss_bytes,acked_bytes,acked_pkts,sacked_bytes,sacked_pkts,lost_pkts,timeouts,\
ce_bytes,ce_pkts,ece_acks,rtt_min_us,rtt_max_us,rtt_last_us,rtt_srtt_us,rtt_mean_us,rtt_samples,rtt_samples_over_threshold,\
send_rate,recv_rate,inflight_bytes,pending_bytes,cwnd_bytes,pacing_rate,app_limited,cwnd_limited,urgent,qcn_fb,qcn_q_off,qcn_q_delta";

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn to_line(r: &Report) -> String {
    let rtt = r.rtt;
    let (fb, off, delta) = match r.feedback {
        Some(NetworkFeedback::Qcn { fb_quantized, q_off_bytes, q_delta_bytes }) => {
            (Some(fb_quantized), Some(q_off_bytes), Some(q_delta_bytes))
        }
        Some(NetworkFeedback::Int(_)) | None => (None, None, None),
    };
    [
        r.now_us.to_string(),
        r.interval_us.to_string(),
        r.mss_bytes.to_string(),
        r.acked_bytes.to_string(),
        r.acked_pkts.to_string(),
        r.sacked_bytes.to_string(),
        r.sacked_pkts.to_string(),
        r.lost_pkts.to_string(),
        r.timeouts.to_string(),
        r.ce_bytes.to_string(),
        r.ce_pkts.to_string(),
        r.ece_acks.to_string(),
        opt(rtt.map(|x| x.min_us)),
        opt(rtt.map(|x| x.max_us)),
        opt(rtt.map(|x| x.last_us)),
        opt(rtt.map(|x| x.srtt_us)),
        opt(rtt.map(|x| x.mean_us)),
        opt(rtt.map(|x| x.samples)),
        r.rtt_samples_over_threshold.to_string(),
        opt(r.send_rate_bytes_per_s),
        opt(r.recv_rate_bytes_per_s),
        r.inflight_bytes.to_string(),
        r.pending_bytes.to_string(),
        r.cwnd_bytes.to_string(),
        opt(r.pacing_rate_bytes_per_s),
        u8::from(r.app_limited).to_string(),
        u8::from(r.cwnd_limited).to_string(),
        match r.urgent {
            None => String::new(),
            Some(Urgent::Loss) => "loss".into(),
            Some(Urgent::Timeout) => "timeout".into(),
            Some(Urgent::StateChange) => "state".into(),
        },
        opt(fb),
        opt(off),
        opt(delta),
    ]
    .join(",")
}

fn from_line(n: usize, line: &str) -> Report {
    let c: Vec<&str> = line.split(',').collect();
    assert_eq!(c.len(), HEADER.split(',').count(), "reports.csv:{n}: wrong number of columns");
    let num = |i: usize| c[i].parse::<u64>().unwrap_or_else(|e| panic!("reports.csv:{n}: column {i} {:?}: {e}", c[i]));
    let o = |i: usize| (!c[i].is_empty()).then(|| num(i));
    let rtt = o(17).map(|samples| RttStats {
        min_us: num(12),
        max_us: num(13),
        last_us: num(14),
        srtt_us: num(15),
        mean_us: num(16),
        samples: samples as u32,
    });
    Report {
        now_us: num(0),
        interval_us: num(1),
        mss_bytes: num(2) as u32,
        acked_bytes: num(3),
        acked_pkts: num(4),
        sacked_bytes: num(5),
        sacked_pkts: num(6),
        lost_pkts: num(7),
        timeouts: num(8) as u32,
        ce_bytes: num(9),
        ce_pkts: num(10),
        ece_acks: num(11),
        rtt,
        rtt_samples_over_threshold: num(18),
        send_rate_bytes_per_s: o(19),
        recv_rate_bytes_per_s: o(20),
        // The recorded columns predate the field: none, as from a datapath without per-ACK samples.
        max_delivery_rate_bytes_per_s: None,
        extra_acked_bytes: None,
        inflight_bytes: num(21),
        // The recorded columns predate the field: unknown, as from a libccp datapath.
        unacked_bytes: 0,
        pending_bytes: num(22),
        cwnd_bytes: num(23),
        pacing_rate_bytes_per_s: o(24),
        app_limited: num(25) == 1,
        cwnd_limited: num(26) == 1,
        urgent: match c[27] {
            "" => None,
            "loss" => Some(Urgent::Loss),
            "timeout" => Some(Urgent::Timeout),
            "state" => Some(Urgent::StateChange),
            other => panic!("reports.csv:{n}: urgent {other:?}"),
        },
        feedback: o(28).map(|fb| NetworkFeedback::Qcn {
            fb_quantized: fb as u8,
            q_off_bytes: c[29].parse().unwrap_or_else(|e| panic!("reports.csv:{n}: qcn_q_off: {e}")),
            q_delta_bytes: c[30].parse().unwrap_or_else(|e| panic!("reports.csv:{n}: qcn_q_delta: {e}")),
        }),
    }
}

fn load_reports() -> Vec<Report> {
    let text = std::fs::read_to_string(fixture()).expect("tests/contract/reports.csv (see the module doc to regenerate it)");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER), "reports.csv: header");
    lines.enumerate().map(|(i, l)| from_line(i + 2, l)).collect()
}

// --- algorithms that misbehave on cue ---------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    None,
    /// NaN and absurd values on a few reports.
    Nan,
    /// A panic, then four in a row (the fourth fault within a minute exceeds `max_faults` = 3).
    Panic,
}

/// Wraps an algorithm and misbehaves on the reports the script names. The report count is
/// shared by every instance its factory makes, so a rebuilt instance carries on where the
/// faulty one stopped (a bug that reproduces), as a real one would.
struct Faulty {
    inner: Box<dyn Algorithm>,
    how: Misbehaviour,
    seen: Arc<AtomicUsize>,
}

impl Algorithm for Faulty {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn init(&mut self, start: &FlowStart) -> Action {
        self.inner.init(start)
    }
    fn on_report(&mut self, r: &Report) -> Action {
        let i = self.seen.fetch_add(1, Ordering::SeqCst);
        let a = self.inner.on_report(r);
        match (self.how, i) {
            (Misbehaviour::Nan, 40) => Action { cwnd_bytes: Some(f64::NAN), ..a },
            (Misbehaviour::Nan, 90) => a.with_pacing(Pacing::BytesPerSec(f64::INFINITY)),
            (Misbehaviour::Nan, 150) => Action { cwnd_bytes: Some(-3.0), ..a },
            (Misbehaviour::Nan, 220) => a.with_report(ReportPolicy::PerRtt { rtts: f64::NAN }),
            (Misbehaviour::Nan, 300) => Action { cwnd_bytes: Some(1e300), ..a },
            (Misbehaviour::Nan, 310) => a.with_pacing(Pacing::BytesPerSec(1e-9)),
            (Misbehaviour::Panic, 60) => panic!("misbehaving on cue"),
            (Misbehaviour::Panic, n) if (400..404).contains(&n) => panic!("misbehaving on cue, again"),
            _ => a,
        }
    }
    fn state(&self) -> Vec<StateVar> {
        self.inner.state()
    }
}

struct FaultyFactory {
    inner: Arc<dyn AlgorithmFactory>,
    how: Misbehaviour,
    seen: Arc<AtomicUsize>,
}

impl AlgorithmFactory for FaultyFactory {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Faulty { inner: self.inner.create(), how: self.how, seen: Arc::clone(&self.seen) })
    }
}

fn choice(algorithm: &str, how: Misbehaviour) -> Choice {
    let inner = ccp_algorithms::registry::configure(algorithm, &toml::Table::new()).unwrap();
    Choice::new(Arc::new(FaultyFactory { inner, how, seen: Arc::default() }), toml::Table::new(), "test")
}

fn fallback() -> Choice {
    ccp_algorithms::registry::choose("reno", toml::Table::new(), "fallback").unwrap()
}

fn limits() -> Limits {
    ccp_sim::cc::limits(ReportPolicy::EveryUs(10_000))
}

/// What one path did: the changes it sent and when (the report's index; `usize::MAX` for the
/// start), and the faults and fallbacks it counted.
#[derive(Debug, PartialEq)]
struct Trace {
    changes: Vec<(usize, Command)>,
    faults: u64,
    fallbacks: u64,
    algorithm: String,
}

// --- the agent's path ---------------------------------------------------------------------------

/// A datapath adapter that records what it is asked to apply, with the simulator's capabilities.
struct Recorder {
    applied: Arc<Mutex<Vec<Command>>>,
}

impl Datapath for Recorder {
    fn describe(&self) -> String {
        "recorder".into()
    }
    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }
    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> std::io::Result<()> {
        Ok(())
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, _: &mut Vec<DatapathEvent>, _: usize, _: Now) -> usize {
        0
    }
    fn apply(&mut self, _: FlowRef, _: &Settings, changed: &Command, _: Now) -> Result<(), ApplyError> {
        self.applied.lock().unwrap().push(*changed);
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "recorder".into()
    }
}

fn agent_path(choice: Choice, reports: &[Report]) -> Trace {
    let policy = Policy { default: choice, rules: Vec::new(), fallback: fallback() };
    let mut table = FlowTable::new(policy, limits(), u64::MAX);
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut dp = Recorder { applied: Arc::clone(&applied) };
    let flow = FlowRef { peer: 0, sid: 1 };
    let info = FlowInfo { mss_bytes: MSS, init_cwnd_bytes: INIT_CWND_BYTES, ..FlowInfo::default() };
    let mut changes = Vec::new();
    let mut take = |at: usize| changes.extend(applied.lock().unwrap().drain(..).map(|c| (at, c)));
    // The agent's clock runs with the datapath's, as the simulator's does.
    let clock = Clock::start();
    table.handle(0, &mut dp, DatapathEvent::FlowStarted { flow, info }, clock.at(0), None);
    take(usize::MAX);
    for (i, r) in reports.iter().enumerate() {
        table.handle(0, &mut dp, DatapathEvent::Report { flow, report: r.clone() }, clock.at(r.now_us), None);
        take(i);
    }
    let algorithm = table.get(&(0, flow)).unwrap().controller.algorithm_name().to_string();
    Trace { changes, faults: table.counters.algorithm_faults, fallbacks: table.counters.fallbacks, algorithm }
}

// --- the simulator's path -----------------------------------------------------------------------

fn sim_path(choice: Choice, reports: &[Report]) -> Trace {
    let start = FlowStart::new(MSS, INIT_CWND_BYTES);
    let (mut cc, outcome) = FlowCc::start(choice, fallback(), limits(), &start, 0);
    let mut changes = vec![(usize::MAX, outcome.command)];
    let (mut faults, mut fallbacks) = (0, 0);
    for (i, r) in reports.iter().enumerate() {
        let o = cc.decide(r, r.now_us * PS_PER_US);
        faults += u64::from(o.fault.is_some());
        fallbacks += u64::from(o.fell_back_to.is_some());
        if !o.command.is_empty() {
            cc.apply_reporting(&o.command);
            changes.push((i, o.command));
        }
    }
    Trace { changes, faults, fallbacks, algorithm: cc.name().to_string() }
}

#[test]
fn the_agent_and_the_simulator_send_identical_changes() {
    // The panics on cue are contained; keep them out of the test's output, and nothing else.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<&str>().copied().unwrap_or_default();
        if !msg.starts_with("misbehaving on cue") {
            default_hook(info);
        }
    }));
    let reports = load_reports();
    assert!(reports.len() > 500, "the fixture holds {} reports", reports.len());
    assert!(reports.iter().any(|r| r.ce_pkts > 0) && reports.iter().any(|r| r.lost_pkts > 0));
    assert!(reports.iter().any(|r| r.feedback.is_some()) && reports.iter().any(|r| r.timeouts > 0));
    for &algorithm in ALGORITHMS {
        for how in [Misbehaviour::None, Misbehaviour::Nan, Misbehaviour::Panic] {
            let agent = agent_path(choice(algorithm, how), &reports);
            let sim = sim_path(choice(algorithm, how), &reports);
            let what = format!("{algorithm} ({how:?})");
            assert!(agent.changes.len() > 10, "{what}: the algorithm hardly acted ({} changes)", agent.changes.len());
            if let Some(i) = (0..agent.changes.len().min(sim.changes.len())).find(|&i| agent.changes[i] != sim.changes[i]) {
                panic!("{what}: change {i} differs: agent {:?}, simulator {:?}", agent.changes[i], sim.changes[i]);
            }
            assert_eq!(agent, sim, "{what}");
            match how {
                Misbehaviour::None => assert_eq!((agent.faults, agent.fallbacks), (0, 0), "{what}"),
                // NaN, ∞, −3 and a NaN policy: four faults within a minute, one more than
                // tolerated, so the fallback takes over (Reno is its own fallback).
                Misbehaviour::Nan => {
                    assert_eq!((agent.faults, agent.fallbacks), (4, u64::from(algorithm != "reno")), "{what}")
                }
                // Panics at reports 60 and 400-403: the fourth within a minute hands the flow to
                // the fallback, which does not panic. Reno is its own fallback: it is rebuilt
                // after every panic and never replaced.
                Misbehaviour::Panic => {
                    let expected = if algorithm == "reno" { (5, 0) } else { (4, 1) };
                    assert_eq!((agent.faults, agent.fallbacks), expected, "{what}");
                    assert_eq!(agent.algorithm, "reno", "{what}: the fallback took over");
                }
            }
        }
    }
}

// --- recording the fixture ----------------------------------------------------------------------

/// Wraps reno and keeps the reports of the first flow its factory makes.
struct Recording {
    inner: Arc<dyn AlgorithmFactory>,
    made: AtomicUsize,
    reports: Arc<Mutex<Vec<Report>>>,
}

struct Recorded {
    inner: Box<dyn Algorithm>,
    reports: Option<Arc<Mutex<Vec<Report>>>>,
}

impl Algorithm for Recorded {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn init(&mut self, start: &FlowStart) -> Action {
        self.inner.init(start)
    }
    fn on_report(&mut self, r: &Report) -> Action {
        if let Some(rs) = &self.reports {
            rs.lock().unwrap().push(r.clone());
        }
        self.inner.on_report(r)
    }
}

impl AlgorithmFactory for Recording {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn create(&self) -> Box<dyn Algorithm> {
        let first = self.made.fetch_add(1, Ordering::SeqCst) == 0;
        Box::new(Recorded { inner: self.inner.create(), reports: first.then(|| Arc::clone(&self.reports)) })
    }
}

fn simulate(name: &str, scenario: &str, algorithm: &str) -> Vec<Report> {
    let loaded = ccp_sim::config::load_str(Path::new(name), scenario, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
    let reports = Arc::new(Mutex::new(Vec::new()));
    let inner = ccp_algorithms::registry::configure(algorithm, &toml::Table::new()).unwrap();
    let factory = Recording { inner, made: AtomicUsize::new(0), reports: Arc::clone(&reports) };
    let mut sim = ccp_sim::Sim::with_algorithm(&loaded, Arc::new(factory)).unwrap();
    sim.run(|_, _| {});
    let r = reports.lock().unwrap().clone();
    r
}

/// Two long flows through a 48 Mbit/s bottleneck with a 20 ms round trip, DCTCP-style marking at
/// 60 packets and a 65-packet buffer: slow start, marks, drops, rate samples.
const WAN: &str = r#"
name = "one-controller-wan"
seed = 7
duration_ms = 12000
[topology]
kind = "dumbbell"
senders = 2
receivers = 1
host_gbps = 1.0
host_delay_us = 100.0
bottleneck_gbps = 0.048
bottleneck_delay_us = 9800.0
[switch]
buffer_bytes = 100000
admission = "static"
port_buffer_bytes = 100000
[switch.qdisc]
kind = "dctcp"
k_pkts = 60
[transport]
mss_bytes = 1448
header_bytes = 52
ecn = true
rto_min_us = 200000.0
rto_initial_us = 1000000.0
[cc]
algorithm = "reno"
reporting = "interval"
report_interval_us = 10000.0
[[workload.flows]]
src = 0
dst = 2
[[workload.flows]]
src = 1
dst = 2
start_us = 3000000.0
"#;

/// A QCN congestion point: reports carry its notifications.
const QCN: &str = r#"
name = "one-controller-qcn"
seed = 3
duration_ms = 30
[topology]
kind = "dumbbell"
senders = 3
receivers = 1
host_gbps = 10.0
host_delay_us = 5.0
bottleneck_gbps = 10.0
bottleneck_delay_us = 40.0
[switch.qdisc]
kind = "qcn"
q_eq_bytes = 33000
sampling_probability = 0.05
ecn_k_bytes = 97500
[cc]
algorithm = "dctcp"
reporting = "interval"
report_interval_us = 200.0
[[workload.flows]]
src = 0
dst = 3
[[workload.flows]]
src = 1
dst = 3
[[workload.flows]]
src = 2
dst = 3
"#;

/// What no simulation produced but a datapath may send.
fn edge_cases(after_us: u64) -> Vec<Report> {
    let rtt = RttStats { min_us: 20_000, max_us: 90_000, last_us: 80_000, srtt_us: 60_000, mean_us: 70_000, samples: 3 };
    let base =
        Report { interval_us: 10_000, mss_bytes: MSS, cwnd_bytes: 40 * u64::from(MSS), rtt: Some(rtt), ..Report::default() };
    let t = |k: u64| after_us + 10_000 * k;
    vec![
        Report { now_us: t(1), timeouts: 1, urgent: Some(Urgent::Timeout), rtt: None, ..base.clone() },
        Report { now_us: t(2), timeouts: 2, lost_pkts: 40, urgent: Some(Urgent::Timeout), ..base.clone() },
        Report { now_us: t(3), mss_bytes: 0, acked_bytes: 5000, acked_pkts: 4, ..base.clone() },
        Report { now_us: t(4), acked_bytes: u64::MAX / 2, acked_pkts: u64::MAX / 4, ce_pkts: u64::MAX / 4, ..base.clone() },
        Report { now_us: t(5), urgent: Some(Urgent::StateChange), app_limited: true, ..base.clone() },
        Report { now_us: t(6), send_rate_bytes_per_s: Some(0), recv_rate_bytes_per_s: Some(u64::MAX), ..base.clone() },
        Report { now_us: t(6), acked_bytes: 1448, acked_pkts: 1, ..base.clone() },
        Report { now_us: t(7), acked_bytes: 14_480, acked_pkts: 10, ..base.clone() },
        // The window does not limit the flow (a slow application, a small receiver window).
        Report { now_us: t(8), acked_bytes: 7_240, acked_pkts: 5, inflight_bytes: 7_240, cwnd_limited: false, ..base.clone() },
        Report { now_us: t(9), acked_bytes: 7_240, acked_pkts: 5, inflight_bytes: 7_240, cwnd_limited: false, ..base },
    ]
}

#[test]
#[ignore = "regenerates tests/contract/reports.csv from the simulator"]
fn record() {
    let mut reports = simulate("wan", WAN, "reno");
    let qcn = simulate("qcn", QCN, "dctcp");
    let shift = reports.last().map_or(0, |r| r.now_us);
    reports.extend(qcn.into_iter().map(|r| Report { now_us: r.now_us + shift, ..r }));
    let end = reports.last().map_or(0, |r| r.now_us);
    reports.extend(edge_cases(end));
    let mut out = std::fs::File::create(fixture()).unwrap();
    writeln!(out, "{HEADER}").unwrap();
    for r in &reports {
        writeln!(out, "{}", to_line(r)).unwrap();
    }
    eprintln!("recorded {} reports into {}", reports.len(), fixture().display());
}

#[test]
fn the_fixture_format_round_trips() {
    for r in edge_cases(0).iter().chain(load_reports().iter().take(50)) {
        assert_eq!(&from_line(0, &to_line(r)), r);
    }
}
