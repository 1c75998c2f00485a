//! The agent's event loop: datapath events in, algorithm decisions out.
//!
//! One thread, one `mio::Poll` over every datapath adapter's sockets and the signal pipe.
//! For each event the flow table routes the report to the flow's `Controller` and sends the
//! resulting command back through the same adapter. A once-a-second tick forgets flows that
//! have been silent longer than the idle timeout (they are adopted again if they report).
//! The same loop serves the control socket (`ops.rs`: status, swaps, reloads, attach/detach),
//! the optional metrics endpoint, and the optional per-report flow trace (`trace.rs`).
//! SIGUSR1 logs a status line per flow; SIGINT/SIGTERM stop the loop.

mod ops;
mod trace;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use mio::{Events, Poll, Token};
use serde::Serialize;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;
use tracing::{debug, info, warn};

use crate::config::{AgentConfig, Overrides};
use crate::control::server::ControlServer;
use crate::controller::{Controller, Limits, Outcome};
use crate::datapath::{Command, Datapath, DatapathEvent, FlowInfo, FlowRef, PacingCommand};
use crate::metrics::MetricsServer;
use crate::rules::Policy;
pub use trace::FlowTrace;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
const TICK: Duration = Duration::from_secs(1);
/// How often datapath adapters get to retry undelivered messages.
const DATAPATH_TICK: Duration = Duration::from_millis(100);

/// Agent-wide counters.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    pub flows_started: u64,
    pub flows_adopted: u64,
    pub flows_closed: u64,
    pub flows_forgotten: u64,
    pub reports: u64,
    pub reports_for_unknown_flows: u64,
    pub commands_sent: u64,
    pub apply_errors: u64,
    pub algorithm_faults: u64,
    pub algorithm_panics: u64,
    pub clamped_values: u64,
    pub fallbacks: u64,
    pub swaps: u64,
    pub control_requests: u64,
}

/// One flow's row in a status snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct FlowStatus {
    pub id: u64,
    pub datapath: String,
    pub sid: u32,
    pub src: Option<String>,
    pub dst: Option<String>,
    pub algorithm: &'static str,
    pub chosen_by: String,
    pub cwnd_bytes: u64,
    pub pacing_rate_bytes_per_s: Option<u64>,
    pub srtt_us: Option<u64>,
    pub report_interval_us: u64,
    pub reports: u64,
    pub report_age_ms: Option<u64>,
    pub faults: u64,
    /// The algorithm's own state variables (e.g. ssthresh, alpha, Nimbus's mode).
    pub state: BTreeMap<&'static str, f64>,
}

/// What the runtime serves besides datapaths; each is optional.
#[derive(Default)]
pub struct Services {
    pub control: Option<ControlServer>,
    pub metrics: Option<MetricsServer>,
    pub trace: Option<FlowTrace>,
    /// Where `reload` re-reads the configuration from, with the command line's overrides.
    pub reload_from: Option<(std::path::PathBuf, Overrides)>,
}

struct Flow {
    id: u64,
    info: FlowInfo,
    controller: Controller,
    last_activity: Instant,
    last_report: Option<Instant>,
    reports: u64,
}

pub struct Runtime {
    poll: Poll,
    signals: Signals,
    datapaths: Vec<Box<dyn Datapath>>,
    flows: BTreeMap<(usize, FlowRef), Flow>,
    next_flow_id: u64,
    policy: Policy,
    limits: Limits,
    idle_timeout: Duration,
    counters: Counters,
    stop: Arc<AtomicBool>,
    algorithm_params: BTreeMap<String, toml::Table>,
    services: Services,
    config_source: String,
    started: Instant,
}

impl Runtime {
    pub fn new(config: &AgentConfig, mut datapaths: Vec<Box<dyn Datapath>>, mut services: Services) -> anyhow::Result<Runtime> {
        let poll = Poll::new().context("creating the event loop")?;
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
        Ok(Runtime {
            poll,
            signals,
            datapaths,
            flows: BTreeMap::new(),
            next_flow_id: 1,
            policy: config.policy.clone(),
            limits: config.limits.clone(),
            idle_timeout: config.flow_idle_timeout,
            counters: Counters::default(),
            stop: Arc::new(AtomicBool::new(false)),
            algorithm_params: config.algorithm_params.clone(),
            services,
            config_source: config.source.clone(),
            started: Instant::now(),
        })
    }

    /// Runs until SIGINT/SIGTERM or the stop flag.
    pub fn run(&mut self) -> anyhow::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut next_tick = Instant::now() + TICK;
        let mut next_dp_tick = Instant::now() + DATAPATH_TICK;
        let mut dp_events = Vec::with_capacity(256);
        while !self.stop.load(Ordering::Relaxed) {
            let timeout = next_tick.min(next_dp_tick).saturating_duration_since(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("waiting for events");
            }
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
                    Token(i) if i < self.datapaths.len() => self.service(i, &mut dp_events),
                    t if ControlServer::owns(t) => self.serve_control(t),
                    t if MetricsServer::owns(t) => self.serve_metrics(t),
                    Token(_) => {}
                }
            }
            let now = Instant::now();
            if now >= next_dp_tick {
                for i in 0..self.datapaths.len() {
                    self.datapaths[i].tick(now);
                    self.service(i, &mut dp_events);
                }
                next_dp_tick = now + DATAPATH_TICK;
            }
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK;
            }
        }
        for dp in &mut self.datapaths {
            dp.shutdown();
        }
        if let Some(t) = self.services.trace.as_mut() {
            t.flush();
        }
        self.log_summary();
        Ok(())
    }

    /// Drains one adapter, including events its own sends produced.
    fn service(&mut self, dp: usize, buf: &mut Vec<DatapathEvent>) {
        loop {
            buf.clear();
            self.datapaths[dp].poll_events(buf);
            if buf.is_empty() {
                return;
            }
            for ev in buf.drain(..) {
                self.handle(dp, ev);
            }
        }
    }

    fn handle(&mut self, dp: usize, ev: DatapathEvent) {
        let now = Instant::now();
        match ev {
            DatapathEvent::FlowStarted { flow, info } => self.start_flow(dp, flow, info, now),
            DatapathEvent::Report { flow, report } => {
                self.counters.reports += 1;
                let Some(f) = self.flows.get_mut(&(dp, flow)) else {
                    self.counters.reports_for_unknown_flows += 1;
                    debug!(%flow, "report for a flow the adapter did not announce");
                    return;
                };
                f.reports += 1;
                f.last_report = Some(now);
                f.last_activity = now;
                let outcome = f.controller.on_report(&report, now);
                let id = f.id;
                if let Some(t) = self.services.trace.as_mut() {
                    t.record(self.started, id, &report, &f.controller);
                }
                self.account(id, dp, flow, outcome);
            }
            DatapathEvent::FlowClosed { flow, reason } => {
                if let Some(f) = self.flows.remove(&(dp, flow)) {
                    self.counters.flows_closed += 1;
                    info!(flow = f.id, datapath_flow = %flow, ?reason, reports = f.reports, "flow closed");
                }
            }
        }
    }

    fn start_flow(&mut self, dp: usize, flow: FlowRef, info: FlowInfo, now: Instant) {
        if let Some(old) = self.flows.remove(&(dp, flow)) {
            debug!(flow = old.id, "flow id re-used by the datapath");
        }
        let choice = self.policy.select(&info).clone();
        let caps = self.datapaths[dp].capabilities();
        let (controller, outcome) = Controller::start(choice, self.policy.fallback.clone(), caps, self.limits.clone(), &info);
        let id = self.next_flow_id;
        self.next_flow_id += 1;
        if info.existing.is_some() {
            self.counters.flows_adopted += 1;
        } else {
            self.counters.flows_started += 1;
        }
        info!(
            flow = id,
            datapath = %self.datapaths[dp].peer_name(flow.peer),
            sid = flow.sid,
            src = ?info.src,
            dst = ?info.dst,
            mss = info.mss_bytes,
            algorithm = controller.algorithm_name(),
            chosen_by = %controller.choice().origin,
            adopted = info.existing.is_some(),
            "flow started"
        );
        self.flows.insert((dp, flow), Flow { id, info, controller, last_activity: now, last_report: None, reports: 0 });
        self.account(id, dp, flow, outcome);
    }

    /// Counts and logs what a controller did, and sends its command.
    fn account(&mut self, id: u64, dp: usize, flow: FlowRef, outcome: Outcome) {
        self.counters.clamped_values += u64::from(outcome.clamped);
        if let Some(fault) = &outcome.fault {
            self.counters.algorithm_faults += 1;
            if outcome.restarted {
                self.counters.algorithm_panics += 1;
            }
            warn!(flow = id, %fault, restarted = outcome.restarted, "algorithm fault contained; flow keeps its last sane window");
        }
        if let Some(to) = outcome.fell_back_to {
            self.counters.fallbacks += 1;
            warn!(flow = id, fallback = to, "algorithm replaced after repeated faults");
        }
        self.send(dp, flow, &outcome.command);
    }

    fn send(&mut self, dp: usize, flow: FlowRef, cmd: &Command) {
        if cmd.is_empty() {
            return;
        }
        match self.datapaths[dp].apply(flow, cmd) {
            Ok(()) => self.counters.commands_sent += 1,
            Err(e) => {
                self.counters.apply_errors += 1;
                warn!(error = %e, "could not deliver command");
            }
        }
    }

    fn tick(&mut self, now: Instant) {
        let idle = self.idle_timeout;
        let stale: Vec<_> =
            self.flows.iter().filter(|(_, f)| now.duration_since(f.last_activity) > idle).map(|(k, _)| *k).collect();
        for key in stale {
            if let Some(f) = self.flows.remove(&key) {
                self.counters.flows_forgotten += 1;
                // The adapter forgets it too, so a report that does come later adopts it afresh.
                self.datapaths[key.0].forget(key.1);
                warn!(flow = f.id, idle_s = idle.as_secs(), "forgetting a flow that stopped reporting");
            }
        }
        if let Some(t) = self.services.trace.as_mut() {
            t.flush();
        }
        debug!(flows = self.flows.len(), counters = ?self.counters, "tick");
    }

    /// A snapshot of every flow.
    pub fn status(&self) -> Vec<FlowStatus> {
        let now = Instant::now();
        self.flows
            .iter()
            .map(|((dp, fref), f)| FlowStatus {
                id: f.id,
                datapath: self.datapaths[*dp].peer_name(fref.peer),
                sid: fref.sid,
                src: f.info.src.map(|(a, p)| format!("{a}:{p}")),
                dst: f.info.dst.map(|(a, p)| format!("{a}:{p}")),
                algorithm: f.controller.algorithm_name(),
                chosen_by: f.controller.choice().origin.clone(),
                cwnd_bytes: f.controller.cwnd_bytes(),
                pacing_rate_bytes_per_s: match f.controller.pacing() {
                    Some(PacingCommand::BytesPerSec(r)) => Some(r),
                    _ => None,
                },
                srtt_us: f.controller.srtt_us(),
                report_interval_us: f.controller.report_interval_us(),
                reports: f.reports,
                report_age_ms: f.last_report.map(|t| now.duration_since(t).as_millis() as u64),
                faults: f.controller.total_faults(),
                state: f.controller.algorithm_state().into_iter().map(|v| (v.name, v.value)).collect(),
            })
            .collect()
    }

    /// SIGUSR1: one log line per flow, as JSON.
    fn log_status(&self) {
        let flows = self.status();
        info!(flows = flows.len(), counters = %serde_json::to_string(&self.counters).unwrap_or_default(), "status");
        for f in flows {
            info!(flow = %serde_json::to_string(&f).unwrap_or_default(), "status");
        }
    }

    fn log_summary(&self) {
        info!(flows_open = self.flows.len(), counters = %serde_json::to_string(&self.counters).unwrap_or_default(), "agent stopped");
    }
}
