//! The loop under a datapath that never runs dry.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ccp_contract::{Capabilities, Command, Report, Settings};

use super::*;
use crate::datapath::{ApplyError, FlowInfo, FlowRef};

/// Always has more reports than any budget, like a ring that refills faster than it is read.
struct Flood {
    ticks: Arc<AtomicU64>,
    read: Arc<AtomicU64>,
    started: bool,
    /// Wakes the loop once: after that only the runtime's own "more may be waiting" brings it back.
    waker: Option<std::os::unix::net::UnixDatagram>,
    wake_rx: std::os::unix::net::UnixDatagram,
}

const FLOW: FlowRef = FlowRef { peer: 0, sid: 1 };

/// What the test datapaths here can carry: bytes, wide registers, no RTT counting.
const CAPS: Capabilities = Capabilities {
    max_cwnd_bytes: 1 << 32,
    max_rate_bytes_per_s: 1 << 32,
    can_clear_pacing: true,
    per_rtt_reports: false,
    cwnd_packets: None,
};

impl Datapath for Flood {
    fn describe(&self) -> String {
        "flood".into()
    }
    fn capabilities(&self) -> Capabilities {
        CAPS
    }
    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        registry.register(&mut mio::unix::SourceFd(&self.wake_rx.as_raw_fd()), token, mio::Interest::READABLE)?;
        if let Some(w) = self.waker.take() {
            w.send(b"x")?;
        }
        Ok(())
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, out: &mut Vec<DatapathEvent>, budget: usize, _: Now) -> usize {
        if !self.started {
            self.started = true;
            let info = FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, ..FlowInfo::default() };
            out.push(DatapathEvent::FlowStarted { flow: FLOW, info });
        }
        let n = budget.min(1 << 20);
        for i in 0..n {
            let report = Report { now_us: i as u64, mss_bytes: 1000, acked_bytes: 1000, acked_pkts: 1, ..Report::default() };
            out.push(DatapathEvent::Report { flow: FLOW, report });
        }
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        n
    }
    fn apply(&mut self, _: FlowRef, _: &Settings, _: &Command, _: Now) -> Result<(), ApplyError> {
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "flood".into()
    }
    fn tick(&mut self, _: Now) {
        // The eBPF adapter refreshes the heartbeat here: every flow on the host falls back if
        // it does not run.
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_datapath_that_never_runs_dry_does_not_starve_ticks_or_stop() {
    let ticks = Arc::new(AtomicU64::new(0));
    let read = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let (t, r) = (ticks.clone(), read.clone());
    std::thread::spawn(move || {
        let (waker, wake_rx) = std::os::unix::net::UnixDatagram::pair().unwrap();
        wake_rx.set_nonblocking(true).unwrap();
        let dp = Flood { ticks: t, read: r, started: false, waker: Some(waker), wake_rx };
        let config = AgentConfig::defaults(&Overrides::default()).unwrap();
        let mut rt = Runtime::new(&config, vec![Box::new(dp)], Services::default()).unwrap();
        stop_tx.send(rt.stop.clone()).unwrap();
        rt.run().unwrap();
        done_tx.send(rt.flows.counters).unwrap();
    });
    let stop = stop_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let seen_ticks = ticks.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let asked = Instant::now();
    let counters = done_rx.recv_timeout(Duration::from_secs(5)).expect("the loop must notice the stop flag under a flood");
    assert!(asked.elapsed() < Duration::from_secs(1), "stopping took {:?}", asked.elapsed());
    // 1.5 s of 100 ms datapath ticks; the old drain-to-empty loop ran none.
    assert!(seen_ticks >= 8, "only {seen_ticks} datapath ticks in 1.5 s under a flood");
    assert!(read.load(Ordering::Relaxed) > 10 * WORK_BUDGET as u64, "the flood must actually be served");
    assert!(counters.loop_budget_exhausted > 10, "{counters:?}");
    assert!(counters.reports > 10 * WORK_BUDGET as u64, "{counters:?}");
}

/// Never has anything to read; counts how often it is asked.
struct Idle {
    polls: Arc<AtomicU64>,
    busy: bool,
}

impl Datapath for Idle {
    fn describe(&self) -> String {
        "idle".into()
    }
    fn capabilities(&self) -> Capabilities {
        CAPS
    }
    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> io::Result<()> {
        Ok(())
    }
    fn busy_poll(&self) -> bool {
        self.busy
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, _: &mut Vec<DatapathEvent>, _: usize, _: Now) -> usize {
        self.polls.fetch_add(1, Ordering::Relaxed);
        0
    }
    fn apply(&mut self, _: FlowRef, _: &Settings, _: &Command, _: Now) -> Result<(), ApplyError> {
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "idle".into()
    }
}

/// How often the loop reads a datapath with nothing to read in `for_ms`.
fn polls_of_a_quiet_datapath(busy: bool, for_ms: u64) -> u64 {
    let polls = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = mpsc::channel();
    let p = polls.clone();
    let loop_thread = std::thread::spawn(move || {
        let config = AgentConfig::defaults(&Overrides::default()).unwrap();
        let mut rt = Runtime::new(&config, vec![Box::new(Idle { polls: p, busy })], Services::default()).unwrap();
        stop_tx.send(rt.stop.clone()).unwrap();
        rt.run().unwrap();
    });
    let stop = stop_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    // Counted from the first turn on: start-up is not the loop's.
    let before = polls.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(for_ms));
    stop.store(true, Ordering::Relaxed);
    loop_thread.join().unwrap();
    polls.load(Ordering::Relaxed) - before
}

#[test]
fn a_busy_polling_datapath_is_read_on_every_turn_and_a_quiet_one_only_on_ticks() {
    // 500 ms: 5 datapath ticks, each reading once. Spinning reads thousands of times even on a
    // loaded CI machine (each turn is one zero-timeout epoll_wait).
    let quiet = polls_of_a_quiet_datapath(false, 500);
    let busy = polls_of_a_quiet_datapath(true, 500);
    assert!(quiet <= 10, "a datapath that does not busy-poll was read {quiet} times in 500 ms");
    assert!(busy >= 1000, "a busy-polling datapath was read only {busy} times in 500 ms");
}

#[test]
fn every_service_has_a_token_of_its_own() {
    use crate::cnm::CnmListener;
    use crate::metrics::MetricsServer;
    let fixed = [SIGNAL_TOKEN, crate::control::server::LISTENER, crate::metrics::LISTENER, crate::cnm::TOKEN, WAKER];
    for (i, a) in fixed.iter().enumerate() {
        for b in &fixed[i + 1..] {
            assert_ne!(a, b, "two services share a token");
        }
        // No fixed token falls in another service's range, nor among the datapaths'.
        let owners = [ControlServer::owns(*a), MetricsServer::owns(*a), CnmListener::owns(*a), *a == WAKER, *a == SIGNAL_TOKEN];
        assert_eq!(owners.iter().filter(|o| **o).count(), 1, "{a:?} is claimed by {owners:?}");
        assert!(a.0 > 1 << 31, "{a:?} could be a datapath's");
    }
}

#[test]
fn reload_without_a_config_file_gives_new_flows_a_changed_python_class() {
    ccp_python::register();
    // About reloading, not speed: a call budget no loaded test machine misses.
    ccp_python::set_call_budget(Duration::from_secs(2));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.py");
    let source = |w: u32| {
        format!(
            "from ccp_agent import Action, Algorithm\nclass W(Algorithm):\n    def init(self, flow):\n        return \
             Action({w}.0)\n    def on_report(self, r):\n        return Action({w}.0)\n"
        )
    };
    std::fs::write(&file, source(30_000)).unwrap();
    let name = format!("py:{}:W", file.canonicalize().unwrap().display());
    let config = AgentConfig::defaults(&Overrides { algorithm: Some(name.clone()), ..Overrides::default() }).unwrap();
    let mut rt = Runtime::new(&config, Vec::new(), Services::default()).unwrap();
    let window = |c: &ccp_contract::Choice| c.factory.create().try_init(&ccp_contract::FlowStart::new(1000, 10_000)).unwrap();
    assert_eq!(window(&rt.flows.policy.default).cwnd_bytes, Some(30_000.0));
    let running = rt.flows.policy.default.clone();

    let r = rt.reload(false);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.result["config"], serde_json::Value::Null);
    assert_eq!(r.result["python_reloaded"], serde_json::json!([name]));
    assert_eq!(r.result["python_changed"], serde_json::json!([]), "an unchanged file is the same version");

    std::fs::write(&file, source(40_000)).unwrap();
    let r = rt.reload(false);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.result["python_changed"], serde_json::json!([name]));
    assert_eq!(r.result["swapped"], serde_json::json!([]));
    assert_eq!(window(&rt.flows.policy.default).cwnd_bytes, Some(40_000.0), "new flows get the changed class");
    assert_eq!(window(&running).cwnd_bytes, Some(30_000.0), "what running flows were built from is kept");

    // A broken file refuses the reload and keeps the running policy.
    std::fs::write(&file, "class W(:\n").unwrap();
    let r = rt.reload(false);
    assert!(!r.ok && r.error.as_deref().unwrap_or("").contains("reload refused"), "{r:?}");
    assert_eq!(window(&rt.flows.policy.default).cwnd_bytes, Some(40_000.0));

    // Nothing Python and no configuration file: nothing to reload, as before.
    let native = AgentConfig::defaults(&Overrides::default()).unwrap();
    let mut rt = Runtime::new(&native, Vec::new(), Services::default()).unwrap();
    let r = rt.reload(false);
    assert!(!r.ok && r.error.as_deref().unwrap_or("").contains("nothing to reload"), "{r:?}");
}

/// A datapath that only takes settings: flows are started by hand.
struct Quiet;

impl Datapath for Quiet {
    fn describe(&self) -> String {
        "quiet".into()
    }
    fn capabilities(&self) -> Capabilities {
        CAPS
    }
    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> io::Result<()> {
        Ok(())
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, _: &mut Vec<DatapathEvent>, _: usize, _: Now) -> usize {
        0
    }
    fn apply(&mut self, _: FlowRef, _: &Settings, _: &Command, _: Now) -> Result<(), ApplyError> {
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "quiet".into()
    }
}

#[test]
fn reload_of_a_config_gives_a_changed_python_class_to_new_flows_and_with_apply_existing_to_all() {
    ccp_python::register();
    ccp_python::set_call_budget(Duration::from_secs(2));
    let dir = tempfile::tempdir().unwrap();
    let write = |w: u32| {
        let text = format!(
            "from ccp_agent import Action, Algorithm\nclass W(Algorithm):\n    def init(self, flow):\n        return \
             Action({w}.0)\n    def on_report(self, r):\n        return Action({w}.0)\n"
        );
        std::fs::write(dir.path().join("w.py"), text).unwrap();
    };
    write(30_000);
    let file = dir.path().join("agent.toml");
    std::fs::write(&file, "[default]\nalgorithm = \"py:w.py:W\"\n").unwrap();
    let config = AgentConfig::load(&file, &Overrides::default()).unwrap();
    let services = Services { reload_from: Some((file.clone(), Overrides::default())), ..Services::default() };
    let mut rt = Runtime::new(&config, vec![Box::new(Quiet)], services).unwrap();
    let start = |rt: &mut Runtime, sid: u32| {
        let info = FlowInfo { mss_bytes: 1000, init_cwnd_bytes: 10_000, ..FlowInfo::default() };
        rt.flows.handle(
            0,
            rt.datapaths[0].as_mut(),
            DatapathEvent::FlowStarted { flow: FlowRef { peer: 0, sid }, info },
            Now::at_us(0),
            None,
        );
    };
    let windows = |rt: &Runtime| -> Vec<u64> { rt.flows.iter().map(|(_, f)| f.controller.cwnd_bytes()).collect() };
    start(&mut rt, 1);
    assert_eq!(windows(&rt), [30_000]);

    write(40_000);
    let r = rt.reload(false);
    assert!(r.ok, "{r:?}");
    assert_eq!(r.result["python_changed"].as_array().unwrap().len(), 1, "{r:?}");
    start(&mut rt, 2);
    assert_eq!(windows(&rt), [30_000, 40_000], "the running flow keeps its class; the new one gets the changed one");

    write(50_000);
    let r = rt.reload(true);
    assert_eq!(r.result["swapped"].as_array().unwrap().len(), 2, "{r:?}");
    assert_eq!(windows(&rt), [50_000, 50_000], "apply_existing moves every flow of a changed class");
    let r = rt.reload(true);
    assert_eq!(r.result["python_changed"], serde_json::json!([]));
    assert_eq!(r.result["swapped"], serde_json::json!([]), "an unchanged class moves nobody: {r:?}");
}
