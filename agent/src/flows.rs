//! The agent's one flow table: every flow of every datapath, its controller, and what its
//! datapath holds of the controller's settings.
//!
//! Datapath events come in (`handle`, or a batch of them: `handle_batch`, which begins the
//! reports of Python flows and decides them when their answers are there, `pending`), each flow's
//! `Controller` (the containment boundary of `ccp-contract`) turns reports into settings, and the
//! flow's latch applies what changed through the flow's adapter; what could not be applied is
//! retried when the adapter says its peer has room (`retry_peer`) or on the next tick (`retry`),
//! and a newer decision supersedes it. Flows that stop reporting are forgotten after the idle
//! timeout (`expire`); one that reports again is adopted again by its adapter, like a flow running
//! before the agent started. Adapters keep no flow lifecycle of their own: `contains` is what they
//! ask.
//!
//! Network feedback (a CNM from a congestion point, `crate::cnm`) reaches a flow found by its
//! 5-tuple (`lookup`) as a report of its own (`network_feedback`), through the same controller and
//! latch as a datapath's report and at once, not at the next report interval. That report carries:
//! - the feedback, and `urgent: None`: the simulator's CNM report has no urgent cause either, and
//!   `feedback` already says why the report came early;
//! - zero counters and no per-interval samples (`rtt`, rates: `None`), `interval_us = 0`: nothing
//!   was newly acknowledged, so nothing is counted twice when the datapath's next report covers
//!   the same time;
//! - the gauges of the flow's last datapath report (mss, cwnd, inflight, pending, pacing,
//!   app_limited). Before the flow's first datapath report the datapath's clock is unknown (a
//!   report at time 0 followed by the datapath's real clock would look to an algorithm like a jump
//!   of days: BBR entered PROBE_RTT at once), so the feedback is held and travels in that first
//!   report instead (the latest, if several arrive; `feedback_held`);
//! - `now_us` on the datapath's clock: the last report's `now_us` plus the agent's time since that
//!   report arrived, never below what the flow was last given. It lags the datapath's clock by
//!   the report's delivery delay, so the datapath's next report is normally later still; one that
//!   is not is raised to the feedback's time (`feedback_clock_clamps`), so a flow's reports never
//!   go back in time.
//!
//! Time comes in as `now` (`crate::clock`): the controllers see its `agent_us`, the runtime's
//! clock (microseconds since the agent started).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;

use ccp_contract::{Command, Controller, Limits, NetworkFeedback, Outcome, PacingCommand, Report, ReportPolicy};
use serde::Serialize;
use tracing::{debug, info, warn};

pub mod admission;
pub mod latch;
mod pending;

use crate::clock::Now;
use crate::datapath::{ApplyError, Datapath, DatapathEvent, FlowInfo, FlowRef, Tuple};
use crate::log_limit::LogLimit;
use crate::rules::Policy;
use crate::trace::{FlowTrace, ReportRecord};
use latch::Latch;

/// A flow: the index of its datapath adapter and the adapter's reference.
pub type FlowKey = (usize, FlowRef);

/// Which flow a 5-tuple names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Found(FlowKey),
    /// No flow has it (or it closed).
    Unknown,
    /// Only flows in other network namespaces than the one asked about have it.
    OtherNetns,
    /// More than one flow has it and nothing tells them apart.
    Ambiguous,
}

/// What delivering feedback did.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    /// The report that carried the feedback to the controller; `None` when the feedback waits
    /// for the flow's first datapath report.
    pub report: Option<Report>,
    /// The decision changed the flow's settings and a command was sent.
    pub action: bool,
}

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
    /// Applies held back because the datapath's queue was full (retried when it has room).
    pub apply_deferred: u64,
    pub algorithm_faults: u64,
    pub algorithm_panics: u64,
    pub clamped_values: u64,
    pub fallbacks: u64,
    pub swaps: u64,
    pub control_requests: u64,
    /// Reports carrying network feedback (CNMs) delivered to flows.
    pub feedback_reports: u64,
    /// Datapath reports older than feedback the flow was given, raised to its time.
    pub feedback_clock_clamps: u64,
    /// Feedback for flows with no datapath report yet, held for their first report.
    pub feedback_held: u64,
    /// Loop turns in which a datapath had more waiting than the work budget (a flood, or a
    /// burst): the rest was served after timers, signals and the control socket.
    pub loop_budget_exhausted: u64,
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
    /// The report policy the datapath has: an interval, or a number of RTTs it counts itself.
    pub report_interval_us: Option<u64>,
    pub report_rtts: Option<f64>,
    pub reports: u64,
    pub report_age_ms: Option<u64>,
    pub faults: u64,
    /// Network feedback reports (CNMs) delivered to the flow.
    pub cnms: u64,
    /// The algorithm's own state variables (e.g. ssthresh, alpha, Nimbus's mode); none while a
    /// report of the flow is with its (Python) algorithm.
    pub state: BTreeMap<&'static str, f64>,
}

/// What a flow's reports added up to, for the log line when it closes.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    acked_bytes: u64,
    lost_pkts: u64,
    ce_pkts: u64,
    timeouts: u64,
}

/// The gauges of a flow's last datapath report, for the reports network feedback makes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Gauges {
    now_us: u64,
    mss_bytes: u32,
    inflight_bytes: u64,
    unacked_bytes: u64,
    pending_bytes: u64,
    cwnd_bytes: u64,
    pacing_rate_bytes_per_s: Option<u64>,
    app_limited: bool,
}

impl Gauges {
    fn of(r: &Report) -> Gauges {
        Gauges {
            now_us: r.now_us,
            mss_bytes: r.mss_bytes,
            inflight_bytes: r.inflight_bytes,
            unacked_bytes: r.unacked_bytes,
            pending_bytes: r.pending_bytes,
            cwnd_bytes: r.cwnd_bytes,
            pacing_rate_bytes_per_s: r.pacing_rate_bytes_per_s,
            app_limited: r.app_limited,
        }
    }
}

pub struct Flow {
    pub id: u64,
    pub info: FlowInfo,
    pub controller: Controller,
    latch: Latch,
    last_activity_us: u64,
    last_report_us: Option<u64>,
    reports: u64,
    totals: Totals,
    /// The last datapath report's gauges.
    gauges: Option<Gauges>,
    /// The latest `now_us` the controller was given (datapath clock).
    given_now_us: u64,
    /// Feedback was given a `now_us` later than the datapath's last report.
    feedback_ahead: bool,
    /// Feedback that arrived before the first datapath report, for that report to carry.
    held_feedback: Option<NetworkFeedback>,
    cnms: u64,
}

impl Flow {
    /// The report that carries `feedback` to the controller, from the last datapath report's
    /// gauges `g` (see the module's documentation).
    fn feedback_report(&self, g: Gauges, feedback: NetworkFeedback, now_us: u64) -> Report {
        let since = self.last_report_us.map_or(0, |arrived| now_us.saturating_sub(arrived));
        let (t, gauges) = (g.now_us.saturating_add(since), g);
        Report {
            now_us: t.max(self.given_now_us),
            interval_us: 0,
            mss_bytes: gauges.mss_bytes,
            inflight_bytes: gauges.inflight_bytes,
            unacked_bytes: gauges.unacked_bytes,
            pending_bytes: gauges.pending_bytes,
            cwnd_bytes: gauges.cwnd_bytes,
            pacing_rate_bytes_per_s: gauges.pacing_rate_bytes_per_s,
            app_limited: gauges.app_limited,
            urgent: None,
            feedback: Some(feedback),
            ..Report::default()
        }
    }
}

pub struct FlowTable {
    flows: BTreeMap<FlowKey, Flow>,
    /// Flows by their addresses, for network feedback (flows whose datapath gave both ends).
    by_tuple: HashMap<Tuple, Vec<FlowKey>>,
    /// Flows whose datapath does not hold their settings yet (an apply failed).
    unapplied: BTreeSet<FlowKey>,
    next_id: u64,
    pub policy: Policy,
    pub limits: Limits,
    pub idle_timeout_us: u64,
    pub counters: Counters,
    pub admission: admission::Admission,
    /// What the agent knew of flows it forgot while they were idle (their addresses, cgroup,
    /// owner), for when they report again: a datapath that re-announces a flow from its
    /// reports alone (libccp) does not repeat them, and the flow's rules need them.
    dormant: HashMap<FlowKey, (FlowInfo, u64)>,
    apply_errors_log: LogLimit,
    /// Where each (adapter, peer)'s next round of retries starts (`retry_peer`).
    retry_cursor: HashMap<(usize, u32), u32>,
    /// `--record-reports`: every report a controller is given, as given.
    pub record: Option<ReportRecord>,
    /// Per adapter, the reports begun and waiting for their answers and the events waiting
    /// behind them, in event order (`pending`).
    pending: HashMap<usize, std::collections::VecDeque<pending::Later>>,
    /// The flows with something in `pending`.
    waiting: HashMap<FlowKey, pending::Waiting>,
}

/// How an apply went, as far as retrying goes.
#[derive(Debug, PartialEq, Eq)]
enum Flushed {
    /// Applied, nothing to apply, or failed for a reason of its own.
    Done,
    /// The peer's queue is full: further applies to it would fail too.
    Backpressure,
}

/// How long a forgotten flow's identity is kept, in idle timeouts.
const DORMANT_IDLE_TIMEOUTS: u64 = 12;

impl FlowTable {
    pub fn new(policy: Policy, limits: Limits, idle_timeout_us: u64) -> FlowTable {
        FlowTable {
            flows: BTreeMap::new(),
            by_tuple: HashMap::new(),
            unapplied: BTreeSet::new(),
            next_id: 1,
            policy,
            limits,
            idle_timeout_us,
            counters: Counters::default(),
            admission: admission::Admission::new(admission::FlowLimits::default()),
            dormant: HashMap::new(),
            apply_errors_log: LogLimit::default(),
            retry_cursor: HashMap::new(),
            record: None,
            pending: HashMap::new(),
            waiting: HashMap::new(),
        }
    }

    pub fn set_flow_limits(&mut self, limits: admission::FlowLimits) {
        self.admission.set_limits(limits);
    }

    /// Whether the agent holds the flow: controls it, or refused it (a refused flow's reports
    /// must not adopt it again each time).
    pub fn contains(&self, dp: usize, flow: FlowRef) -> bool {
        self.flows.contains_key(&(dp, flow)) || self.admission.refused(&(dp, flow))
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&FlowKey, &Flow)> {
        self.flows.iter()
    }

    pub fn get(&self, key: &FlowKey) -> Option<&Flow> {
        self.flows.get(key)
    }

    /// One datapath event for the flows of adapter `dp`.
    pub fn handle(&mut self, dp: usize, adapter: &mut dyn Datapath, ev: DatapathEvent, now: Now, trace: Option<&mut FlowTrace>) {
        match ev {
            DatapathEvent::FlowStarted { flow, info } => self.start(dp, adapter, flow, info, now),
            DatapathEvent::Report { flow, report } => {
                if let Some(report) = self.accept((dp, flow), report, now) {
                    self.decide((dp, flow), adapter, &report, now, trace);
                }
            }
            DatapathEvent::FlowClosed { flow, reason } => {
                let key = (dp, flow);
                self.unapplied.remove(&key);
                self.admission.release(&key);
                self.dormant.remove(&key);
                if let Some(f) = self.remove(&key) {
                    self.counters.flows_closed += 1;
                    let t = f.totals;
                    info!(
                        flow = f.id, datapath_flow = %flow, ?reason, reports = f.reports, acked_bytes = t.acked_bytes,
                        lost_pkts = t.lost_pkts, ce_pkts = t.ce_pkts, timeouts = t.timeouts, cnms = f.cnms, "flow closed"
                    );
                }
            }
            DatapathEvent::SettingsLost { flow } => {
                let key = (dp, flow);
                if let Some(f) = self.flows.get_mut(&key) {
                    f.latch.reset();
                    self.flush(key, adapter, &Command::default(), false, now);
                }
            }
            DatapathEvent::Writable { peer } => self.retry_peer(dp, peer, adapter, now),
        }
    }

    /// A datapath report as the flow's controller is to be given it (see the module's
    /// documentation), counted and recorded; `None` when no flow has it.
    fn accept(&mut self, key: FlowKey, mut report: Report, now: Now) -> Option<Report> {
        self.counters.reports += 1;
        let Some(f) = self.flows.get_mut(&key) else {
            if self.admission.is_refused(&key, now) {
                return None;
            }
            self.counters.reports_for_unknown_flows += 1;
            debug!(flow = %key.1, "report for a flow the adapter did not announce");
            return None;
        };
        if f.feedback_ahead && report.now_us < f.given_now_us {
            self.counters.feedback_clock_clamps += 1;
            debug!(flow = f.id, by_us = f.given_now_us - report.now_us, "report older than the feedback before it");
            report.now_us = f.given_now_us;
        }
        f.feedback_ahead = false;
        if let Some(held) = f.held_feedback.take() {
            report.feedback.get_or_insert(held);
        }
        let now_us = now.agent_us;
        f.given_now_us = f.given_now_us.max(report.now_us);
        f.gauges = Some(Gauges::of(&report));
        f.reports += 1;
        f.last_report_us = Some(now_us);
        f.last_activity_us = now_us;
        f.totals.acked_bytes += report.acked_bytes;
        f.totals.lost_pkts += report.lost_pkts;
        f.totals.ce_pkts += report.ce_pkts;
        f.totals.timeouts += u64::from(report.timeouts);
        if let Some(r) = self.record.as_mut() {
            r.record(f.id, &report);
        }
        Some(report)
    }

    /// Gives an accepted report to the flow's controller and applies what it decided.
    fn decide(&mut self, key: FlowKey, adapter: &mut dyn Datapath, report: &Report, now: Now, trace: Option<&mut FlowTrace>) {
        let Some(f) = self.flows.get_mut(&key) else { return };
        let outcome = f.controller.on_report(report, now.agent_us);
        if let Some(t) = trace {
            t.record(now.agent_us, f.id, report, &f.controller, None);
        }
        self.account(key, adapter, &outcome, now);
    }

    fn start(&mut self, dp: usize, adapter: &mut dyn Datapath, flow: FlowRef, mut info: FlowInfo, now: Now) {
        let (key, now_us) = ((dp, flow), now.agent_us);
        if let Some(old) = self.remove(&key) {
            debug!(flow = old.id, "flow id re-used by the datapath");
        }
        if let Some((known, _)) = self.dormant.remove(&key) {
            if info.existing.is_some() {
                info = info.or_identity_of(known);
            }
        }
        if self.admission.admit(key, &info, now).is_err() {
            // The datapath's fallback steers it; its reports are dropped until it is examined again.
            return;
        }
        let choice = self.policy.select(&info).clone();
        let start = ccp_contract::FlowStart {
            now_us: info.existing.as_ref().and_then(|s| s.last_report.as_ref()).map_or(0, |r| r.now_us),
            mss_bytes: info.mss_bytes,
            init_cwnd_bytes: info.init_cwnd_bytes,
            ecn: info.ecn,
            seed: info.existing.clone(),
        };
        let (controller, outcome) =
            Controller::start(choice, self.policy.fallback.clone(), adapter.capabilities(), self.limits.clone(), &start, now_us);
        let id = self.next_id;
        self.next_id += 1;
        if info.existing.is_some() {
            self.counters.flows_adopted += 1;
        } else {
            self.counters.flows_started += 1;
        }
        info!(
            flow = id,
            datapath = %adapter.peer_name(flow.peer),
            sid = flow.sid,
            src = ?info.src,
            dst = ?info.dst,
            mss = info.mss_bytes,
            algorithm = controller.algorithm_name(),
            chosen_by = %controller.choice().origin,
            adopted = info.existing.is_some(),
            "flow started"
        );
        let flow = Flow {
            id,
            info,
            controller,
            latch: Latch::default(),
            last_activity_us: now_us,
            last_report_us: None,
            reports: 0,
            totals: Totals::default(),
            gauges: None,
            given_now_us: start.now_us,
            feedback_ahead: false,
            held_feedback: None,
            cnms: 0,
        };
        if let (Some(src), Some(dst)) = (flow.info.src, flow.info.dst) {
            self.by_tuple.entry((src, dst)).or_default().push(key);
        }
        self.flows.insert(key, flow);
        self.account(key, adapter, &outcome, now);
    }

    /// Removes a flow and its tuple index entry, and frees its place.
    fn remove(&mut self, key: &FlowKey) -> Option<Flow> {
        let f = self.flows.remove(key)?;
        self.admission.release(key);
        if let (Some(src), Some(dst)) = (f.info.src, f.info.dst) {
            if let Some(keys) = self.by_tuple.get_mut(&(src, dst)) {
                keys.retain(|k| k != key);
                if keys.is_empty() {
                    self.by_tuple.remove(&(src, dst));
                }
            }
        }
        Some(f)
    }

    /// The flow whose sender sends as `tuple`. With `netns_cookie` (the namespace the feedback
    /// arrived in), a flow whose datapath knows its namespace must be in that one.
    pub fn lookup(&self, tuple: &Tuple, netns_cookie: Option<u64>) -> Lookup {
        let Some(keys) = self.by_tuple.get(tuple) else { return Lookup::Unknown };
        let mut found = None;
        let mut matching = 0;
        let mut elsewhere = false;
        for key in keys {
            let Some(f) = self.flows.get(key) else { continue };
            if let (Some(mine), Some(asked)) = (f.info.netns_cookie, netns_cookie) {
                if mine != asked {
                    elsewhere = true;
                    continue;
                }
            }
            matching += 1;
            found = Some(*key);
        }
        match (matching, found) {
            (1, Some(key)) => Lookup::Found(key),
            (0, _) if elsewhere => Lookup::OtherNetns,
            (0, _) => Lookup::Unknown,
            _ => Lookup::Ambiguous,
        }
    }

    /// Delivers network feedback to a flow at once: its report (see the module's documentation)
    /// goes through the flow's controller, and what the decision changed is applied through
    /// `adapter` right away, as for a datapath's report. `None` when the flow is gone. The
    /// runtime traces the report: how long the feedback took to act on is its to measure (and
    /// `trace` gets the decisions on the flow's reports still waiting for answers, made first).
    pub fn network_feedback(
        &mut self,
        key: FlowKey,
        adapter: &mut dyn Datapath,
        feedback: NetworkFeedback,
        now: Now,
        trace: Option<&mut FlowTrace>,
    ) -> Option<Delivered> {
        self.settle_flow(key, adapter, now, trace);
        let f = self.flows.get_mut(&key)?;
        f.cnms += 1;
        let Some(gauges) = f.gauges else {
            f.held_feedback = Some(feedback);
            self.counters.feedback_held += 1;
            return Some(Delivered { report: None, action: false });
        };
        let report = f.feedback_report(gauges, feedback, now.agent_us);
        if report.now_us > f.gauges.map_or(0, |g| g.now_us) {
            f.feedback_ahead = true;
        }
        f.given_now_us = report.now_us;
        self.counters.feedback_reports += 1;
        if let Some(r) = self.record.as_mut() {
            r.record(f.id, &report);
        }
        let outcome = f.controller.on_report(&report, now.agent_us);
        let sent = self.counters.commands_sent;
        self.account(key, adapter, &outcome, now);
        Some(Delivered { report: Some(report), action: self.counters.commands_sent > sent })
    }

    /// Counts and logs what a controller did, and applies the flow's settings.
    fn account(&mut self, key: FlowKey, adapter: &mut dyn Datapath, outcome: &Outcome, now: Now) {
        let id = self.flows.get(&key).map_or(0, |f| f.id);
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
        self.flush(key, adapter, &outcome.command, false, now);
    }

    /// Applies what the flow's datapath does not hold yet; `change` is the controller's latest.
    fn flush(&mut self, key: FlowKey, adapter: &mut dyn Datapath, change: &Command, retry: bool, now: Now) -> Flushed {
        let Some(f) = self.flows.get_mut(&key) else {
            self.unapplied.remove(&key);
            return Flushed::Done;
        };
        let want = *f.controller.settings();
        let changed = f.latch.pending(&want, change);
        if changed.is_empty() {
            if retry {
                self.unapplied.remove(&key);
            }
            return Flushed::Done;
        }
        match adapter.apply(key.1, &want, &changed, now) {
            Ok(()) => {
                f.latch.applied();
                self.unapplied.remove(&key);
                self.counters.commands_sent += 1;
            }
            Err(ApplyError::Backpressure(_)) => {
                // The peer is slow, not broken: what is missing stays missing, newer decisions
                // join it, and it all goes in one command once the peer has room.
                self.counters.apply_deferred += 1;
                f.latch.failed(&changed);
                self.unapplied.insert(key);
                return Flushed::Backpressure;
            }
            Err(e) => {
                self.counters.apply_errors += 1;
                f.latch.failed(&changed);
                if matches!(e, ApplyError::UnknownFlow(_)) {
                    // Nothing to retry: the adapter has no such flow (its close is on the way).
                    self.unapplied.remove(&key);
                    debug!(flow = f.id, error = %e, "settings for a flow the adapter has closed");
                    return Flushed::Done;
                }
                self.unapplied.insert(key);
                if let Some(not_logged) = self.apply_errors_log.allow(now.instant) {
                    warn!(
                        flow = f.id, error = %e, retry, not_logged, errors_total = self.counters.apply_errors,
                        "could not deliver settings; they stay pending and are retried (further failures are logged \
                         at most every {}s)",
                        crate::log_limit::LOG_EVERY.as_secs()
                    );
                }
            }
        }
        Flushed::Done
    }

    /// Retries what adapter `dp` could not apply.
    pub fn retry(&mut self, dp: usize, adapter: &mut dyn Datapath, now: Now) {
        let keys: Vec<FlowKey> =
            self.unapplied.range((dp, FlowRef { peer: 0, sid: 0 })..).take_while(|k| k.0 == dp).copied().collect();
        for key in keys {
            self.flush(key, adapter, &Command::default(), true, now);
        }
        let unapplied = &self.unapplied;
        self.retry_cursor.retain(|(d, peer), _| {
            unapplied.range((*d, FlowRef { peer: *peer, sid: 0 })..).next().is_some_and(|k| k.0 == *d && k.1.peer == *peer)
        });
    }

    /// Retries what adapter `dp` could not apply to the flows of `peer`, which has room again,
    /// until its queue is full again. The next round starts where this one stopped, so every
    /// waiting flow gets its turn however many wait.
    fn retry_peer(&mut self, dp: usize, peer: u32, adapter: &mut dyn Datapath, now: Now) {
        let from = self.retry_cursor.remove(&(dp, peer)).unwrap_or(0);
        let waiting = |t: &Self, lo: u32, hi: u32| -> Vec<FlowKey> {
            t.unapplied.range((dp, FlowRef { peer, sid: lo })..=(dp, FlowRef { peer, sid: hi })).copied().collect()
        };
        let mut keys = waiting(self, from, u32::MAX);
        if from > 0 {
            keys.extend(waiting(self, 0, from - 1));
        }
        for key in keys {
            if self.flush(key, adapter, &Command::default(), true, now) == Flushed::Backpressure {
                self.retry_cursor.insert((dp, peer), key.1.sid);
                return;
            }
        }
    }

    /// Forgets flows silent for longer than the idle timeout; returns them so that their
    /// adapters can drop what they keep for them.
    pub fn expire(&mut self, now: Now) -> Vec<FlowKey> {
        let (idle, now_us) = (self.idle_timeout_us, now.agent_us);
        let stale: Vec<FlowKey> =
            self.flows.iter().filter(|(_, f)| now_us.saturating_sub(f.last_activity_us) > idle).map(|(k, _)| *k).collect();
        for key in &stale {
            if let Some(f) = self.remove(key) {
                self.unapplied.remove(key);
                self.counters.flows_forgotten += 1;
                warn!(flow = f.id, idle_s = idle / 1_000_000, "forgetting a flow that stopped reporting");
                if self.dormant.len() < self.admission.limits().max_flows {
                    self.dormant.insert(*key, (f.info, now_us));
                }
            }
        }
        let keep = idle.saturating_mul(DORMANT_IDLE_TIMEOUTS);
        self.dormant.retain(|_, (_, at)| now_us.saturating_sub(*at) <= keep);
        self.admission.expire(now, idle);
        stale
    }

    /// Swaps each flow in `keys` to `choose(flow)`; returns the ids swapped.
    pub fn swap(
        &mut self,
        keys: &[FlowKey],
        choose: impl Fn(&Flow) -> ccp_contract::Choice,
        adapters: &mut [Box<dyn Datapath>],
        now: Now,
    ) -> Vec<u64> {
        let mut ids = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(f) = self.flows.get_mut(key) else { continue };
            let choice = choose(f);
            let outcome = f.controller.swap(choice, now.agent_us);
            ids.push(f.id);
            self.counters.swaps += 1;
            self.account(*key, adapters[key.0].as_mut(), &outcome, now);
        }
        ids
    }

    /// A snapshot of every flow.
    /// Flow rows in flow-key order: at most `limit` rows from the `offset`-th flow on: building rows is loop work, so a
    /// caller with very many flows pages through them.
    pub fn status_page(&self, adapters: &[Box<dyn Datapath>], now: Now, offset: usize, limit: usize) -> Vec<FlowStatus> {
        self.flows
            .iter()
            .skip(offset)
            .take(limit)
            .map(|((dp, fref), f)| {
                let settings = f.controller.settings();
                FlowStatus {
                    id: f.id,
                    datapath: adapters[*dp].peer_name(fref.peer),
                    sid: fref.sid,
                    src: f.info.src.map(|e| SocketAddr::from(e).to_string()),
                    dst: f.info.dst.map(|e| SocketAddr::from(e).to_string()),
                    algorithm: f.controller.algorithm_name(),
                    chosen_by: f.controller.choice().origin.clone(),
                    cwnd_bytes: settings.cwnd_bytes,
                    pacing_rate_bytes_per_s: match settings.pacing {
                        Some(PacingCommand::BytesPerSec(r)) => Some(r),
                        _ => None,
                    },
                    srtt_us: f.controller.srtt_us(),
                    report_interval_us: match settings.report {
                        ReportPolicy::EveryUs(us) => Some(us),
                        ReportPolicy::PerRtt { .. } => None,
                    },
                    report_rtts: match settings.report {
                        ReportPolicy::PerRtt { rtts } => Some(rtts),
                        ReportPolicy::EveryUs(_) => None,
                    },
                    reports: f.reports,
                    report_age_ms: f.last_report_us.map(|t| now.agent_us.saturating_sub(t) / 1000),
                    faults: f.controller.total_faults(),
                    cnms: f.cnms,
                    // Not asked of a flow whose report is still with Python: it would wait for it.
                    state: if self.waiting.contains_key(&(*dp, *fref)) {
                        BTreeMap::new()
                    } else {
                        f.controller.algorithm_state().into_iter().map(|v| (v.name, v.value)).collect()
                    },
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
