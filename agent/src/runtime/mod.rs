//! The agent's event loop: datapath events in, the flow table's decisions out.
//!
//! One thread, one `mio::Poll` over every datapath adapter's sockets and the signal pipe. Each
//! adapter's events go to the one flow table (`crate::flows`), which runs the flow's controller
//! and applies its settings through the same adapter. Reports of flows whose algorithm is Python
//! (on the interpreter's thread) are begun there and decided when their answers are there: the
//! interpreter wakes the loop (its waker, shared with attach jobs), which never waits for a
//! Python report. Every 100 ms adapters do their protocol housekeeping and the table retries
//! what could not be applied; once a second it forgets flows that have been silent longer than
//! the idle timeout (they are adopted again if they report).
//! The same loop serves the control socket (`ops.rs`: status, swaps, reloads, attach/detach),
//! the optional metrics endpoint, the optional per-report flow trace and report record
//! (`crate::trace`), and the
//! optional CNM listener (`crate::cnm`): each CNM that names a flow is delivered to it at once,
//! after the reports its datapath already queued, and the decision is applied before the loop
//! moves on. At most `max_per_pass` CNMs are read per pass; when more may be waiting the loop
//! polls without sleeping, so timers, control requests and datapaths interleave with a flood.
//! SIGUSR1 logs a status line per flow; SIGINT/SIGTERM stop the loop.
//!
//! The runtime is the one reader of the clock (`crate::clock`): it reads it as it starts each
//! piece of work (a batch of one source, a CNM batch, a tick, a control request) and hands the
//! moment down.

mod jobs;
mod ops;
#[cfg(test)]
mod tests;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use mio::{Events, Poll, Token};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;
use tracing::{debug, info};

use crate::clock::{Clock, Now};
use crate::cnm::{CnmListener, Notice, Reason};
use crate::config::{AgentConfig, Overrides};
use crate::control::protocol::MAX_STATUS_ROWS;
use crate::control::server::ControlServer;
use crate::datapath::{Datapath, DatapathEvent};
pub use crate::flows::{Counters, FlowStatus};
use crate::flows::{FlowTable, Lookup};
use crate::metrics::MetricsServer;
use crate::trace::{CnmTrace, FlowTrace, ReportRecord};

const SIGNAL_TOKEN: Token = Token(usize::MAX);
/// The loop's one waker (mio allows one per poll), for its other threads: attach and detach jobs
/// are done, or Python answers may be there (`ccp_python::wake_on_answers`).
const WAKER: Token = Token(usize::MAX - 4);
/// Longest the loop sleeps while reports wait for Python answers, should a wake-up go missing.
const PYTHON_RECHECK: Duration = Duration::from_millis(10);
const TICK: Duration = Duration::from_secs(1);
/// How often datapath adapters do their housekeeping and undelivered settings are retried.
const DATAPATH_TICK: Duration = Duration::from_millis(100);
/// Most source items (ring records, datagrams) one adapter is served per loop turn, read in
/// chunks of `WORK_CHUNK`, and at most `TURN_TIME` of work: the heartbeat (100 ms), signals and
/// the control socket are looked at every few ms however hard datapaths push, in a debug build
/// as in a release one.
const WORK_BUDGET: usize = 1024;
const WORK_CHUNK: usize = 128;
const TURN_TIME: Duration = Duration::from_millis(2);

/// What the runtime serves besides datapaths; each is optional.
#[derive(Default)]
pub struct Services {
    pub control: Option<ControlServer>,
    pub metrics: Option<MetricsServer>,
    pub trace: Option<FlowTrace>,
    /// Every report given to an algorithm (`--record-reports`); the flow table writes it.
    pub record: Option<ReportRecord>,
    /// Congestion notification messages from QCN congestion points.
    pub cnm: Option<CnmListener>,
    /// Where `reload` re-reads the configuration from, with the command line's overrides.
    pub reload_from: Option<(std::path::PathBuf, Overrides)>,
}

pub struct Runtime {
    poll: Poll,
    signals: Signals,
    datapaths: Vec<Box<dyn Datapath>>,
    flows: FlowTable,
    stop: Arc<AtomicBool>,
    algorithm_params: std::collections::BTreeMap<String, toml::Table>,
    services: Services,
    config_source: String,
    clock: Clock,
    /// CNMs read in one pass, waiting for their flows.
    notices: Vec<Notice>,
    /// Per adapter: its last turn ended at the work budget, so more may be waiting.
    pending: Vec<bool>,
    /// Attach and detach requests, run off the loop.
    jobs: jobs::Jobs,
    /// The version of each Python algorithm in the policy, for `reload` to tell which changed.
    python_versions: std::collections::BTreeMap<&'static str, usize>,
    /// Registered with the Python host while the runtime lives: wakes the loop for answers.
    _python_waker: Arc<dyn Fn() + Send + Sync>,
}

impl Runtime {
    pub fn new(config: &AgentConfig, mut datapaths: Vec<Box<dyn Datapath>>, mut services: Services) -> anyhow::Result<Runtime> {
        let poll = Poll::new().context("creating the event loop")?;
        let n_datapaths = datapaths.len();
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGUSR1]).context("installing signal handlers")?;
        poll.registry().register(&mut signals, SIGNAL_TOKEN, mio::Interest::READABLE)?;
        for (i, dp) in datapaths.iter_mut().enumerate() {
            dp.register(poll.registry(), Token(i)).with_context(|| format!("registering {}", dp.describe()))?;
            info!(datapath = %dp.describe(), "listening");
        }
        if let Some(c) = services.control.as_mut() {
            c.register(poll.registry()).context("registering the control socket")?;
            info!(socket = %c.path().display(), "control socket");
        }
        if let Some(m) = services.metrics.as_mut() {
            m.register(poll.registry()).context("registering the metrics endpoint")?;
            info!(addr = %m.local_addr(), "metrics endpoint");
        }
        if let Some(c) = services.cnm.as_mut() {
            c.register(poll.registry()).context("registering the CNM listener")?;
        }
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER).context("creating the loop's waker")?);
        let jobs = jobs::Jobs::new(Arc::clone(&waker));
        let python_waker: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            let _ = waker.wake();
        });
        ccp_python::wake_on_answers(&python_waker);
        let mut flows = FlowTable::new(config.policy.clone(), config.limits.clone(), config.flow_idle_timeout.as_micros() as u64);
        flows.set_flow_limits(config.flow_limits);
        flows.record = services.record.take();
        Ok(Runtime {
            poll,
            signals,
            datapaths,
            flows,
            stop: Arc::new(AtomicBool::new(false)),
            algorithm_params: config.algorithm_params.clone(),
            services,
            config_source: config.source.clone(),
            clock: Clock::start(),
            notices: Vec::new(),
            pending: vec![false; n_datapaths],
            jobs,
            python_versions: ops::python_versions(&config.policy),
            _python_waker: python_waker,
        })
    }

    /// Set, it stops `run` at its next turn (as SIGINT/SIGTERM do): for a caller running the
    /// loop on a thread of its own.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Reads the clock for a piece of work, whose moment the modules below are given.
    fn now(&self) -> Now {
        self.clock.now()
    }

    /// Runs until SIGINT/SIGTERM or the stop flag.
    pub fn run(&mut self) -> anyhow::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut next_tick = Instant::now() + TICK;
        let mut next_dp_tick = Instant::now() + DATAPATH_TICK;
        let mut dp_events = Vec::with_capacity(256);
        let busy: Vec<bool> = self.datapaths.iter().map(|d| d.busy_poll()).collect();
        while !self.stop.load(Ordering::Relaxed) {
            let mut timeout = next_tick.min(next_dp_tick).saturating_duration_since(Instant::now());
            if self.services.cnm.as_ref().is_some_and(CnmListener::pending)
                || self.pending.contains(&true)
                || busy.contains(&true)
            {
                // The last pass left CNMs or records waiting, or an adapter busy-polls: look at
                // everything else, then read on.
                timeout = Duration::ZERO;
            }
            if self.flows.has_waiting() {
                timeout = timeout.min(PYTHON_RECHECK);
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("waiting for events");
            }
            let mut cnm_served = false;
            let mut served = vec![false; self.datapaths.len()];
            for ev in events.iter() {
                match ev.token() {
                    SIGNAL_TOKEN => {
                        let pending: Vec<i32> = self.signals.pending().collect();
                        for sig in pending {
                            if sig == SIGUSR1 {
                                self.log_status();
                            } else {
                                info!(signal = sig, "shutting down");
                                self.stop.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                    Token(i) if i < self.datapaths.len() => {
                        // Readable and timer events of one adapter share its token: once a turn.
                        if !served[i] {
                            served[i] = true;
                            self.service(i, &mut dp_events);
                        }
                    }
                    t if ControlServer::owns(t) => self.serve_control(t),
                    WAKER => {
                        self.finish_jobs();
                        self.settle();
                    }
                    t if MetricsServer::owns(t) => self.serve_metrics(t),
                    t if CnmListener::owns(t) => {
                        self.serve_cnm(&mut dp_events);
                        cnm_served = true;
                    }
                    Token(_) => {}
                }
            }
            if !cnm_served && self.services.cnm.as_ref().is_some_and(CnmListener::pending) {
                self.serve_cnm(&mut dp_events);
            }
            for (i, served) in served.into_iter().enumerate() {
                if (self.pending[i] || busy[i]) && !served {
                    self.service(i, &mut dp_events);
                }
            }
            if self.flows.has_waiting() {
                self.settle();
            }
            let now = self.now();
            if now.instant >= next_dp_tick {
                for i in 0..self.datapaths.len() {
                    self.datapaths[i].tick(now);
                    self.service(i, &mut dp_events);
                    self.flows.retry(i, self.datapaths[i].as_mut(), now);
                }
                next_dp_tick = now.instant + DATAPATH_TICK;
            }
            if now.instant >= next_tick {
                self.tick(now);
                next_tick = now.instant + TICK;
            }
        }
        let now = self.now();
        for dp in &mut self.datapaths {
            dp.shutdown(now);
        }
        if let Some(t) = self.services.trace.as_mut() {
            t.flush();
        }
        if let Some(r) = self.flows.record.as_mut() {
            r.flush();
        }
        self.log_summary();
        Ok(())
    }

    /// Serves one adapter for at most `WORK_BUDGET` items, including events its own sends
    /// produced; marks it pending when it may hold more, so the loop comes back to it without
    /// sleeping once timers, signals and the other sources had their turn.
    fn service(&mut self, dp: usize, buf: &mut Vec<DatapathEvent>) {
        let mut left = WORK_BUDGET;
        let started = Instant::now();
        self.pending[dp] = false;
        loop {
            buf.clear();
            let flows = &self.flows;
            let chunk = left.min(WORK_CHUNK);
            let now = self.now();
            let read = self.datapaths[dp].poll_events(&|f| flows.contains(dp, f), buf, chunk, now);
            left -= read.min(left);
            self.flows.handle_batch(dp, self.datapaths[dp].as_mut(), buf, now, self.services.trace.as_mut());
            if left == 0 || (read > 0 && started.elapsed() >= TURN_TIME) {
                self.pending[dp] = true;
                self.flows.counters.loop_budget_exhausted += 1;
                return;
            }
            // Fewer than asked for: the source ran dry (reading again would only find it empty).
            if read < chunk && !self.datapaths[dp].has_queued_events() {
                return;
            }
        }
    }

    /// Decides the reports whose Python answers are there (`crate::flows::pending`).
    fn settle(&mut self) {
        let now = self.now();
        for (dp, adapter) in self.datapaths.iter_mut().enumerate() {
            self.flows.settle(dp, adapter.as_mut(), now, self.services.trace.as_mut());
        }
    }

    /// One pass over the CNM socket: reads a bounded batch, lets every datapath hand over the
    /// reports it has queued (the feedback follows them and copies their gauges), then delivers
    /// each CNM to its flow and applies the decision at once.
    fn serve_cnm(&mut self, buf: &mut Vec<DatapathEvent>) {
        let Some(mut cnm) = self.services.cnm.take() else { return };
        let mut notices = std::mem::take(&mut self.notices);
        cnm.read_batch(&mut notices, self.now());
        if !notices.is_empty() {
            for i in 0..self.datapaths.len() {
                self.service(i, buf);
            }
        }
        for n in notices.drain(..) {
            let now = self.now();
            let key = match self.flows.lookup(&n.tuple, cnm.netns_cookie()) {
                Lookup::Found(key) => key,
                miss => {
                    let reason = match miss {
                        Lookup::OtherNetns => Reason::OtherNetns,
                        Lookup::Ambiguous => Reason::AmbiguousFlow,
                        _ => Reason::UnknownFlow,
                    };
                    let ((sa, sp), (da, dp)) = n.tuple;
                    cnm.drop_one(reason, Some(n.from), &format!("no single flow {sa}:{sp} -> {da}:{dp}"), now);
                    continue;
                }
            };
            let adapter = self.datapaths[key.0].as_mut();
            let Some(d) = self.flows.network_feedback(key, adapter, n.feedback, now, self.services.trace.as_mut()) else {
                cnm.drop_one(Reason::UnknownFlow, Some(n.from), "the flow closed", now);
                continue;
            };
            // From the read to the decision applied: the clock again, now that it is.
            let latency = n.received.elapsed();
            if let (Some(t), Some(report), Some(f)) = (self.services.trace.as_mut(), d.report, self.flows.get(&key)) {
                let how = CnmTrace { cpid: n.cpid, read_to_action_us: latency.as_micros() as u64, sample_to_read_us: n.age_us };
                t.record(now.agent_us, f.id, &report, &f.controller, Some(&how));
            }
            cnm.delivered(&n, latency, d.action);
        }
        self.notices = notices;
        self.services.cnm = Some(cnm);
    }

    fn tick(&mut self, now: Now) {
        for (dp, flow) in self.flows.expire(now) {
            // The adapter forgets it too, so a report that does come later adopts it afresh.
            self.datapaths[dp].forget(flow);
        }
        if let Some(t) = self.services.trace.as_mut() {
            t.flush();
        }
        if let Some(r) = self.flows.record.as_mut() {
            r.flush();
        }
        if let Some(c) = self.services.control.as_mut() {
            c.tick(self.poll.registry(), now.instant);
        }
        debug!(flows = self.flows.len(), counters = ?self.flows.counters, "tick");
    }

    /// SIGUSR1: one log line per flow, as JSON.
    /// SIGUSR1: the counters, and a line per flow for the first `MAX_STATUS_ROWS` flows (a
    /// line each for 100,000 flows would hold the loop past the heartbeat).
    fn log_status(&self) {
        let rows = self.flows.status_page(&self.datapaths, self.now(), 0, MAX_STATUS_ROWS);
        info!(
            flows = self.flows.len(),
            rows = rows.len(),
            counters = %serde_json::to_string(&self.flows.counters).unwrap_or_default(),
            "status"
        );
        for f in rows {
            info!(flow = %serde_json::to_string(&f).unwrap_or_default(), "status");
        }
        self.log_cnm();
    }

    fn log_summary(&self) {
        info!(flows_open = self.flows.len(), counters = %serde_json::to_string(&self.flows.counters).unwrap_or_default(), "agent stopped");
        self.log_cnm();
    }

    fn log_cnm(&self) {
        if let Some(c) = self.services.cnm.as_ref() {
            info!(cnm = %c.status_json(), "CNM listener status");
        }
    }
}
