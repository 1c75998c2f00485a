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

impl Datapath for Flood {
    fn describe(&self) -> String {
        "flood".into()
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
        use std::os::fd::AsRawFd;
        registry.register(&mut mio::unix::SourceFd(&self.wake_rx.as_raw_fd()), token, mio::Interest::READABLE)?;
        if let Some(w) = self.waker.take() {
            w.send(b"x")?;
        }
        Ok(())
    }
    fn poll_events(&mut self, _: &dyn Fn(FlowRef) -> bool, out: &mut Vec<DatapathEvent>, budget: usize) -> usize {
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
    fn apply(&mut self, _: FlowRef, _: &Settings, _: &Command) -> Result<(), ApplyError> {
        Ok(())
    }
    fn peer_name(&self, _: u32) -> String {
        "flood".into()
    }
    fn tick(&mut self, _: Instant) {
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

#[test]
fn every_service_has_a_token_of_its_own() {
    use crate::cnm::CnmListener;
    use crate::metrics::MetricsServer;
    let fixed = [SIGNAL_TOKEN, crate::control::server::LISTENER, crate::metrics::LISTENER, crate::cnm::TOKEN, jobs::WAKER];
    for (i, a) in fixed.iter().enumerate() {
        for b in &fixed[i + 1..] {
            assert_ne!(a, b, "two services share a token");
        }
        // No fixed token falls in another service's range, nor among the datapaths'.
        let owners =
            [ControlServer::owns(*a), MetricsServer::owns(*a), CnmListener::owns(*a), *a == jobs::WAKER, *a == SIGNAL_TOKEN];
        assert_eq!(owners.iter().filter(|o| **o).count(), 1, "{a:?} is claimed by {owners:?}");
        assert!(a.0 > 1 << 31, "{a:?} could be a datapath's");
    }
}
