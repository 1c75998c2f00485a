//! One flow's controller: an algorithm instance inside the containment boundary.
//!
//! The algorithm is untrusted code as far as the flow is concerned. Every call runs under
//! `catch_unwind`; every `Action` is checked before it becomes datapath [`Settings`]:
//! - non-finite or non-positive windows, rates and per-RTT policies are refused: the whole action
//!   is dropped and the flow keeps its last sane settings;
//! - finite values outside what is safe or representable are clamped (window ≥ `min_cwnd_pkts`
//!   MSS so the flow can never stall, windows and rates within the datapath's registers, report
//!   intervals within the limits);
//! - a panic rebuilds the algorithm, seeded from the flow's last sane state;
//! - a hosted algorithm's failed call ([`CallError`]: it raised, returned the wrong type, ran past
//!   its time budget) is a fault too; one that was abandoned mid-call is rebuilt like a panic;
//! - more than `max_faults` faults within `fault_window_us` replace the algorithm with the fallback
//!   (the one its factory names, else the caller's);
//! - a window that does not limit the flow is held to twice what the flow has in flight
//!   ([`crate::ceiling`]), so no algorithm can build a window nobody uses and release it at once.
//!
//! The report policy is kept in the datapath's own terms: a per-RTT policy goes to a datapath
//! that counts RTTs as it is, and to any other as an interval that follows the smoothed RTT.
//!
//! Every caller — the agent for each datapath adapter, the simulator — drives its flows through
//! this type; nothing else may turn an `Action` into datapath settings.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::action::{Action, Pacing, ReportPolicy};
use crate::algorithm::{Algorithm, AlgorithmFactory, CallError, FlowStart, Seed, StateVar};
use crate::ceiling::WindowCeiling;
use crate::limits::{Limits, INTERVAL_BEFORE_RTT_US, MAX_REPORT_ACKED_PKTS, MAX_REPORT_INTERVAL_US, REPORT_RTTS_RANGE};
use crate::report::Report;
use crate::settings::{Capabilities, Command, PacingCommand, Settings};

/// An algorithm chosen for a flow, with the parameters and the rule that chose it.
#[derive(Clone)]
pub struct Choice {
    pub factory: Arc<dyn AlgorithmFactory>,
    /// The parameters the factory was built from (as given; defaults fill the rest).
    pub params: toml::Table,
    /// Where the choice came from: "default", a rule name, "swap", "fallback".
    pub origin: String,
}

impl Choice {
    pub fn new(factory: Arc<dyn AlgorithmFactory>, params: toml::Table, origin: impl Into<String>) -> Choice {
        Choice { factory, params, origin: origin.into() }
    }

    pub fn algorithm(&self) -> &'static str {
        self.factory.name()
    }

    /// The same algorithm with the same parameters (wherever the choice came from).
    pub fn same_setup(&self, other: &Choice) -> bool {
        self.algorithm() == other.algorithm() && self.params == other.params
    }
}

impl std::fmt::Debug for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.factory.name(), self.origin)
    }
}

/// What went wrong inside an algorithm.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    Panicked(String),
    /// A hosted algorithm's call failed without a panic.
    Call(CallError),
    InvalidCwnd(f64),
    InvalidPacingRate(f64),
    InvalidReportRtts(f64),
    InvalidAggregationRate(f64),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Panicked(m) => write!(f, "panicked: {m}"),
            Fault::Call(e) => write!(f, "{e}"),
            Fault::InvalidCwnd(v) => write!(f, "returned an invalid cwnd {v}"),
            Fault::InvalidPacingRate(v) => write!(f, "returned an invalid pacing rate {v}"),
            Fault::InvalidReportRtts(v) => write!(f, "returned an invalid per-RTT report policy {v}"),
            Fault::InvalidAggregationRate(v) => write!(f, "returned an invalid ACK-aggregation rate {v}"),
        }
    }
}

/// What happened when the controller ran the algorithm, for applying, counting and logging.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    /// The settings that changed (everything, when the flow starts).
    pub command: Command,
    pub fault: Option<Fault>,
    /// Values that were finite but had to be clamped.
    pub clamped: u32,
    /// The algorithm was replaced by the fallback because of repeated faults.
    pub fell_back_to: Option<&'static str>,
    /// The algorithm instance was rebuilt after a panic.
    pub restarted: bool,
}

pub struct Controller {
    choice: Choice,
    fallback: Choice,
    algorithm: Box<dyn Algorithm>,
    caps: Capabilities,
    limits: Limits,
    mss: u32,
    /// The report policy as the algorithm asked for it (sanitized); `settings.report` is the
    /// same in the datapath's terms.
    report_policy: ReportPolicy,
    settings: Settings,
    /// The window the algorithm asked for (sanitized); `settings.cwnd_bytes` is the same under
    /// the ceiling.
    requested_cwnd_bytes: u64,
    ceiling: WindowCeiling,
    srtt_us: Option<u64>,
    min_rtt_us: Option<u64>,
    ecn: Option<bool>,
    last_report: Option<Report>,
    faults: VecDeque<u64>,
    total_faults: u64,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

impl Controller {
    /// Creates the controller for a new (or adopted: `start.seed`) flow. The outcome's command
    /// holds every setting: the datapath holds nothing of this controller's yet.
    pub fn start(
        choice: Choice,
        fallback: Choice,
        caps: Capabilities,
        limits: Limits,
        start: &FlowStart,
        now_us: u64,
    ) -> (Controller, Outcome) {
        let mss = start.mss_bytes.max(1);
        let seed = start.seed.as_ref();
        let algorithm = choice.factory.create();
        let mut c = Controller {
            choice,
            fallback,
            algorithm,
            caps,
            mss,
            report_policy: limits.default_report,
            settings: Settings {
                cwnd_bytes: start.start_cwnd_bytes().max(1),
                pacing: None,
                report: ReportPolicy::EveryUs(INTERVAL_BEFORE_RTT_US),
                rtt_threshold_us: None,
                report_acked_pkts: 0,
                ack_aggregation_bw_bytes_per_s: 0,
            },
            requested_cwnd_bytes: start.start_cwnd_bytes().max(1),
            ceiling: WindowCeiling::default(),
            limits,
            srtt_us: seed.and_then(|s| s.srtt_us),
            min_rtt_us: seed.and_then(|s| s.min_rtt_us),
            ecn: start.ecn,
            last_report: seed.and_then(|s| s.last_report.clone()),
            faults: VecDeque::new(),
            total_faults: 0,
        };
        c.settings.report = c.in_datapath_terms(c.report_policy).unwrap_or(c.settings.report);
        let start = FlowStart { mss_bytes: mss, ..start.clone() };
        let mut outcome = c.run(now_us, |alg| alg.try_init(&start));
        outcome.command = c.settings.changes_from(None);
        (c, outcome)
    }

    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    pub fn algorithm_name(&self) -> &'static str {
        self.algorithm.name()
    }

    /// The settings the flow's datapath should hold: the last sane values.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn cwnd_bytes(&self) -> u64 {
        self.settings.cwnd_bytes
    }

    /// The ceiling on a window the flow does not use, while one holds the algorithm's window
    /// down ([`crate::ceiling`]).
    pub fn window_ceiling_bytes(&self) -> Option<u64> {
        self.ceiling.bytes().filter(|c| *c < self.requested_cwnd_bytes)
    }

    pub fn pacing(&self) -> Option<PacingCommand> {
        self.settings.pacing
    }

    pub fn srtt_us(&self) -> Option<u64> {
        self.srtt_us
    }

    pub fn total_faults(&self) -> u64 {
        self.total_faults
    }

    pub fn algorithm_state(&self) -> Vec<StateVar> {
        catch_unwind(AssertUnwindSafe(|| self.algorithm.state())).unwrap_or_default()
    }

    /// Feeds one report to the algorithm. `now_us` is the caller's clock (fault windows).
    pub fn on_report(&mut self, report: &Report, now_us: u64) -> Outcome {
        if report.mss_bytes > 0 {
            self.mss = report.mss_bytes;
        }
        if let Some(rtt) = report.rtt {
            self.srtt_us = Some(rtt.srtt_us.max(1));
            self.min_rtt_us = Some(self.min_rtt_us.map_or(rtt.min_us, |m| m.min(rtt.min_us)));
        }
        self.last_report = Some(report.clone());
        let paced = match self.settings.pacing {
            Some(PacingCommand::BytesPerSec(r)) => Some(r),
            _ => None,
        };
        self.ceiling.observe(report, u64::from(self.mss), self.srtt_us, paced);
        let mut outcome = self.run(now_us, |alg| alg.try_on_report(report));
        // An interval standing in for a per-RTT policy follows the RTT even when the algorithm
        // says nothing new; within an eighth it is not worth a message.
        if outcome.command.report.is_none() && !self.caps.per_rtt_reports {
            if let (ReportPolicy::PerRtt { rtts }, ReportPolicy::EveryUs(cur)) = (self.report_policy, self.settings.report) {
                if let Some(us) = self.per_rtt_interval(rtts) {
                    if (us as f64 - cur as f64).abs() > cur as f64 / 8.0 {
                        self.settings.report = ReportPolicy::EveryUs(us);
                        outcome.command.report = Some(self.settings.report);
                    }
                }
            }
        }
        outcome
    }

    /// Lets an algorithm hosted elsewhere start on `report` before [`Controller::on_report`] is
    /// given it ([`Algorithm::begin_on_report`]); whether it did. If it did, the next
    /// `on_report` must be given this same report (reports begun one after the other are given
    /// in that order): it collects the answer, under the same containment, budget and fault
    /// counting as a call made there. A caller with many flows begins every report it can,
    /// handles the others' meanwhile, and decides the begun ones once they are ready
    /// ([`Controller::begun_ready`]), so it never waits for them.
    pub fn begin_report(&mut self, report: &Report) -> bool {
        catch_unwind(AssertUnwindSafe(|| self.algorithm.begin_on_report(report))).unwrap_or(false)
    }

    /// Whether `on_report` for the oldest report begun ahead would return at once; true when
    /// none is begun (or the algorithm was replaced since: the report is then the new one's).
    pub fn begun_ready(&self) -> bool {
        catch_unwind(AssertUnwindSafe(|| self.algorithm.begun_ready())).unwrap_or(true)
    }

    /// Replaces the algorithm, seeding the new one from the flow's current state.
    pub fn swap(&mut self, choice: Choice, now_us: u64) -> Outcome {
        self.choice = choice;
        self.algorithm = self.choice.factory.create();
        self.faults.clear();
        let start = self.seeded_start();
        self.run(now_us, |alg| alg.try_init(&start))
    }

    fn seed(&self) -> Seed {
        Seed {
            cwnd_bytes: self.settings.cwnd_bytes,
            pacing_rate_bytes_per_s: match self.settings.pacing {
                Some(PacingCommand::BytesPerSec(r)) => Some(r),
                _ => None,
            },
            srtt_us: self.srtt_us,
            min_rtt_us: self.min_rtt_us,
            last_report: self.last_report.clone(),
        }
    }

    fn seeded_start(&self) -> FlowStart {
        FlowStart {
            now_us: self.last_report.as_ref().map_or(0, |r| r.now_us),
            mss_bytes: self.mss,
            init_cwnd_bytes: self.settings.cwnd_bytes,
            ecn: self.ecn,
            seed: Some(self.seed()),
        }
    }

    /// Runs one algorithm call under containment and applies its action.
    fn run(&mut self, now_us: u64, call: impl FnOnce(&mut dyn Algorithm) -> Result<Action, CallError>) -> Outcome {
        let entry = self.settings;
        let result = catch_unwind(AssertUnwindSafe(|| call(self.algorithm.as_mut())));
        let mut outcome = Outcome::default();
        let rebuild = match result {
            Ok(Ok(action)) => {
                match self.sanitize(&action) {
                    Ok(clamped) => outcome.clamped = clamped,
                    Err(fault) => outcome.fault = Some(fault),
                }
                false
            }
            Ok(Err(error)) => {
                // An abandoned call may still be changing the instance: only a fresh one is sane.
                // After an exception, a wrong type or a busy host the instance is intact.
                let abandoned = matches!(error, CallError::TimedOut { .. });
                outcome.fault = Some(Fault::Call(error));
                abandoned
            }
            Err(payload) => {
                // The instance's state is suspect after a panic.
                outcome.fault = Some(Fault::Panicked(panic_message(payload.as_ref())));
                true
            }
        };
        if rebuild {
            // A fresh instance from the flow's last sane state.
            outcome.restarted = true;
            self.algorithm = self.choice.factory.create();
            let start = self.seeded_start();
            if let Ok(Ok(action)) = catch_unwind(AssertUnwindSafe(|| self.algorithm.try_init(&start))) {
                outcome.clamped += self.sanitize(&action).unwrap_or(0);
            }
        }
        if outcome.fault.is_some() {
            self.total_faults += 1;
            self.faults.push_back(now_us);
            while self.faults.front().is_some_and(|t| now_us.saturating_sub(*t) > self.limits.fault_window_us) {
                self.faults.pop_front();
            }
            // The algorithm's own fallback, where it names one, else the caller's.
            let fallback = self.choice.factory.fallback().unwrap_or_else(|| self.fallback.clone());
            if self.faults.len() as u32 > self.limits.max_faults && self.choice.algorithm() != fallback.algorithm() {
                outcome.fell_back_to = Some(fallback.algorithm());
                outcome.clamped += self.swap(fallback, now_us).clamped;
            }
        }
        self.settings.cwnd_bytes = self.ceiling.apply(self.requested_cwnd_bytes);
        outcome.command = self.settings.changes_from(Some(&entry));
        if let (Some(cwnd), Some(unit)) = (outcome.command.cwnd_bytes, self.caps.cwnd_packets) {
            let mss = u64::from(self.mss);
            if unit.packets(cwnd, mss) == unit.packets(entry.cwnd_bytes, mss) {
                outcome.command.cwnd_bytes = None;
            }
        }
        outcome
    }

    fn per_rtt_interval(&self, rtts: f64) -> Option<u64> {
        let srtt = self.srtt_us? as f64;
        let us = (rtts * srtt).round() as u64;
        Some(us.clamp(self.limits.min_report_interval_us, MAX_REPORT_INTERVAL_US))
    }

    /// A sanitized policy in the datapath's terms; `None` when a per-RTT policy must wait for the
    /// first RTT sample on a datapath that cannot count RTTs.
    fn in_datapath_terms(&self, policy: ReportPolicy) -> Option<ReportPolicy> {
        match policy {
            ReportPolicy::PerRtt { rtts } if !self.caps.per_rtt_reports => self.per_rtt_interval(rtts).map(ReportPolicy::EveryUs),
            p => Some(p),
        }
    }

    /// Checks an action and applies it to the settings; returns how many values were clamped.
    /// Refuses the whole action if any value is non-finite or non-positive.
    fn sanitize(&mut self, action: &Action) -> Result<u32, Fault> {
        let mss = f64::from(self.mss);
        let mut clamped = 0;
        let mut clamp = |v: f64, lo: f64, hi: f64| {
            if v < lo {
                clamped += 1;
                lo
            } else if v > hi {
                clamped += 1;
                hi
            } else {
                v
            }
        };

        let cwnd = match action.cwnd_bytes {
            Some(c) if !c.is_finite() || c <= 0.0 => return Err(Fault::InvalidCwnd(c)),
            Some(c) => {
                let hi = self.caps.max_cwnd_bytes as f64;
                let lo = (self.limits.min_cwnd_pkts * mss).min(hi);
                Some(clamp(c, lo, hi).round() as u64)
            }
            None => None,
        };
        let pacing = match action.pacing {
            Some(Pacing::BytesPerSec(r)) if !r.is_finite() || r <= 0.0 => return Err(Fault::InvalidPacingRate(r)),
            Some(Pacing::BytesPerSec(r)) => {
                let hi = self.caps.max_rate_bytes_per_s as f64;
                let lo = (self.limits.min_pacing_rate_bytes_per_s as f64).min(hi);
                Some(PacingCommand::BytesPerSec(clamp(r, lo, hi).round() as u64))
            }
            // A datapath that cannot clear pacing keeps its old rate.
            Some(Pacing::Off) if self.caps.can_clear_pacing => Some(PacingCommand::Off),
            Some(Pacing::Off) | None => None,
        };
        let policy = match action.report {
            Some(ReportPolicy::PerRtt { rtts }) if !rtts.is_finite() || rtts <= 0.0 => {
                return Err(Fault::InvalidReportRtts(rtts))
            }
            Some(ReportPolicy::PerRtt { rtts }) => {
                Some(ReportPolicy::PerRtt { rtts: clamp(rtts, REPORT_RTTS_RANGE.0, REPORT_RTTS_RANGE.1) })
            }
            Some(ReportPolicy::EveryUs(us)) => Some(ReportPolicy::EveryUs(clamp(
                us as f64,
                self.limits.min_report_interval_us as f64,
                MAX_REPORT_INTERVAL_US as f64,
            ) as u64)),
            None => None,
        };
        let aggregation = match action.ack_aggregation_bw_bytes_per_s {
            Some(r) if !r.is_finite() || r < 0.0 => return Err(Fault::InvalidAggregationRate(r)),
            Some(r) => Some(clamp(r, 0.0, self.caps.max_rate_bytes_per_s as f64).round() as u64),
            None => None,
        };

        if let Some(c) = cwnd {
            self.requested_cwnd_bytes = c;
        }
        if pacing.is_some() {
            self.settings.pacing = pacing;
        }
        if let Some(p) = policy {
            self.report_policy = p;
            if let Some(r) = self.in_datapath_terms(p) {
                self.settings.report = r;
            }
        }
        if action.rtt_threshold_us.is_some() {
            self.settings.rtt_threshold_us = action.rtt_threshold_us;
        }
        if let Some(n) = action.report_acked_pkts {
            self.settings.report_acked_pkts = clamp(f64::from(n), 0.0, f64::from(MAX_REPORT_ACKED_PKTS)) as u32;
        }
        if let Some(r) = aggregation {
            self.settings.ack_aggregation_bw_bytes_per_s = r;
        }
        Ok(clamped)
    }
}

#[cfg(test)]
mod tests;
