//! One flow's controller: an algorithm instance inside a containment boundary.
//!
//! The algorithm is untrusted code as far as the flow is concerned. Every call runs under
//! `catch_unwind`; every `Action` is checked before it becomes a datapath `Command`:
//! - non-finite or non-positive windows/rates are refused (the flow keeps its last sane values);
//! - finite values outside what is safe or representable are clamped (window ≥ `min_cwnd_pkts`
//!   MSS so the flow can never stall, rates and windows within the datapath's registers);
//! - a panic rebuilds the algorithm, seeded from the flow's last sane state;
//! - too many faults within a window of time replace the algorithm with the fallback.
//!
//! Commands carry only what changed, so an algorithm that repeats itself costs no datapath traffic.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccp_algorithms::{Action, Algorithm, AlgorithmFactory, FlowStart, Pacing, Report, ReportPolicy, Seed, StateVar};

use crate::datapath::{Capabilities, Command, FlowInfo, PacingCommand};

/// The shortest report interval the agent will ask for, µs.
pub const MIN_REPORT_INTERVAL_US: u64 = 1_000;
/// The longest report interval the agent will ask for, µs.
pub const MAX_REPORT_INTERVAL_US: u64 = 10_000_000;
/// Bounds on a per-RTT report policy, in RTTs.
const REPORT_RTTS_RANGE: (f64, f64) = (0.1, 100.0);

/// An algorithm chosen for a flow, with the rule that chose it.
#[derive(Clone)]
pub struct Choice {
    pub factory: Arc<dyn AlgorithmFactory>,
    /// The parameters the factory was built from (as given; defaults fill the rest).
    pub params: toml::Table,
    /// Where the choice came from: "default", a rule name, "swap", "fallback".
    pub origin: String,
}

impl Choice {
    /// Validates `params` for `algorithm` and builds the choice.
    pub fn configure(
        algorithm: &str,
        params: toml::Table,
        origin: impl Into<String>,
    ) -> Result<Choice, ccp_algorithms::ParamError> {
        let factory = ccp_algorithms::registry::configure(algorithm, &params)?;
        Ok(Choice { factory, params, origin: origin.into() })
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

/// Safety limits applied to every flow.
#[derive(Debug, Clone)]
pub struct Limits {
    pub min_cwnd_pkts: f64,
    pub min_pacing_rate_bytes_per_s: u64,
    /// Faults tolerated within `fault_window` before the fallback algorithm takes over.
    pub max_faults: u32,
    pub fault_window: Duration,
    /// Report interval used until an algorithm asks for another one, µs.
    pub default_report_interval_us: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_cwnd_pkts: 2.0,
            min_pacing_rate_bytes_per_s: 12_500,
            max_faults: 3,
            fault_window: Duration::from_secs(60),
            default_report_interval_us: 10_000,
        }
    }
}

/// What went wrong inside an algorithm.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    Panicked(String),
    InvalidCwnd(f64),
    InvalidPacingRate(f64),
    InvalidReportRtts(f64),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Panicked(m) => write!(f, "panicked: {m}"),
            Fault::InvalidCwnd(v) => write!(f, "returned an invalid cwnd {v}"),
            Fault::InvalidPacingRate(v) => write!(f, "returned an invalid pacing rate {v}"),
            Fault::InvalidReportRtts(v) => write!(f, "returned an invalid per-RTT report policy {v}"),
        }
    }
}

/// What happened when a report was processed, for counting and logging.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    pub command: Command,
    pub fault: Option<Fault>,
    /// Values that were finite but had to be clamped.
    pub clamped: u32,
    /// The algorithm was replaced by the fallback because of repeated faults.
    pub fell_back_to: Option<&'static str>,
    /// The algorithm instance was rebuilt after a panic.
    pub restarted: bool,
}

/// The last sane values commanded to the datapath.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Commanded {
    cwnd_bytes: u64,
    pacing: Option<PacingCommand>,
    report_interval_us: u64,
    rtt_threshold_us: Option<u64>,
}

pub struct Controller {
    choice: Choice,
    fallback: Choice,
    algorithm: Box<dyn Algorithm>,
    caps: Capabilities,
    limits: Limits,
    mss: u32,
    report_policy: ReportPolicy,
    commanded: Commanded,
    srtt_us: Option<u64>,
    min_rtt_us: Option<u64>,
    last_report: Option<Report>,
    faults: VecDeque<Instant>,
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
    /// Creates the controller for a new (or adopted) flow and the first command to send.
    pub fn start(choice: Choice, fallback: Choice, caps: Capabilities, limits: Limits, info: &FlowInfo) -> (Controller, Outcome) {
        let mss = info.mss_bytes.max(1);
        let start_cwnd = info.existing.as_ref().map_or(info.init_cwnd_bytes, |s| s.cwnd_bytes);
        let algorithm = choice.factory.create();
        let mut c = Controller {
            choice,
            fallback,
            algorithm,
            caps,
            mss,
            report_policy: ReportPolicy::EveryUs(limits.default_report_interval_us),
            commanded: Commanded {
                cwnd_bytes: start_cwnd.max(1),
                pacing: None,
                report_interval_us: limits.default_report_interval_us,
                rtt_threshold_us: None,
            },
            limits,
            srtt_us: info.existing.as_ref().and_then(|s| s.srtt_us),
            min_rtt_us: info.existing.as_ref().and_then(|s| s.min_rtt_us),
            last_report: info.existing.as_ref().and_then(|s| s.last_report.clone()),
            faults: VecDeque::new(),
            total_faults: 0,
        };
        let start = FlowStart { now_us: 0, mss_bytes: mss, init_cwnd_bytes: info.init_cwnd_bytes, seed: info.existing.clone() };
        let mut outcome = c.run(Instant::now(), |alg| alg.init(&start));
        // The datapath starts with the default interval; say so explicitly so that a datapath
        // program left over from elsewhere cannot keep a different one.
        if outcome.command.report_interval_us.is_none() {
            outcome.command.report_interval_us = Some(c.commanded.report_interval_us);
        }
        (c, outcome)
    }

    pub fn choice(&self) -> &Choice {
        &self.choice
    }

    pub fn algorithm_name(&self) -> &'static str {
        self.algorithm.name()
    }

    pub fn cwnd_bytes(&self) -> u64 {
        self.commanded.cwnd_bytes
    }

    pub fn pacing(&self) -> Option<PacingCommand> {
        self.commanded.pacing
    }

    pub fn srtt_us(&self) -> Option<u64> {
        self.srtt_us
    }

    pub fn report_interval_us(&self) -> u64 {
        self.commanded.report_interval_us
    }

    pub fn total_faults(&self) -> u64 {
        self.total_faults
    }

    pub fn algorithm_state(&self) -> Vec<StateVar> {
        catch_unwind(AssertUnwindSafe(|| self.algorithm.state())).unwrap_or_default()
    }

    /// Feeds one report to the algorithm.
    pub fn on_report(&mut self, report: &Report, now: Instant) -> Outcome {
        if report.mss_bytes > 0 {
            self.mss = report.mss_bytes;
        }
        if let Some(rtt) = report.rtt {
            self.srtt_us = Some(rtt.srtt_us.max(1));
            self.min_rtt_us = Some(self.min_rtt_us.map_or(rtt.min_us, |m| m.min(rtt.min_us)));
        }
        self.last_report = Some(report.clone());
        let mut outcome = self.run(now, |alg| alg.on_report(report));
        // A per-RTT policy follows the RTT even when the algorithm says nothing new.
        if outcome.command.report_interval_us.is_none() {
            if let ReportPolicy::PerRtt { rtts } = self.report_policy {
                if let Some(us) = self.per_rtt_interval(rtts) {
                    let cur = self.commanded.report_interval_us as f64;
                    if (us as f64 - cur).abs() > cur / 8.0 {
                        self.commanded.report_interval_us = us;
                        outcome.command.report_interval_us = Some(us);
                    }
                }
            }
        }
        outcome
    }

    /// Replaces the algorithm, seeding the new one from the flow's current state.
    pub fn swap(&mut self, choice: Choice, now: Instant) -> Outcome {
        self.choice = choice;
        self.algorithm = self.choice.factory.create();
        self.faults.clear();
        let start = self.seeded_start();
        self.run(now, |alg| alg.init(&start))
    }

    fn seed(&self) -> Seed {
        Seed {
            cwnd_bytes: self.commanded.cwnd_bytes,
            pacing_rate_bytes_per_s: match self.commanded.pacing {
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
            init_cwnd_bytes: self.commanded.cwnd_bytes,
            seed: Some(self.seed()),
        }
    }

    /// Runs one algorithm call under containment and converts its action.
    fn run(&mut self, now: Instant, call: impl FnOnce(&mut dyn Algorithm) -> Action) -> Outcome {
        let result = catch_unwind(AssertUnwindSafe(|| call(self.algorithm.as_mut())));
        let mut outcome = Outcome::default();
        match result {
            Ok(action) => match self.sanitize(&action) {
                Ok((command, clamped)) => {
                    outcome.command = command;
                    outcome.clamped = clamped;
                }
                Err(fault) => outcome.fault = Some(fault),
            },
            Err(payload) => {
                outcome.fault = Some(Fault::Panicked(panic_message(payload.as_ref())));
                // The instance's state is suspect after a panic: start a fresh one from the
                // flow's last sane state.
                outcome.restarted = true;
                self.algorithm = self.choice.factory.create();
                let start = self.seeded_start();
                if let Ok(action) = catch_unwind(AssertUnwindSafe(|| self.algorithm.init(&start))) {
                    if let Ok((command, clamped)) = self.sanitize(&action) {
                        outcome.command = command;
                        outcome.clamped += clamped;
                    }
                }
            }
        }
        if outcome.fault.is_some() {
            self.total_faults += 1;
            self.faults.push_back(now);
            while self.faults.front().is_some_and(|t| now.duration_since(*t) > self.limits.fault_window) {
                self.faults.pop_front();
            }
            if self.faults.len() as u32 > self.limits.max_faults && self.choice.algorithm() != self.fallback.algorithm() {
                let fallback = self.fallback.clone();
                let name = fallback.algorithm();
                let swapped = self.swap(fallback, now);
                outcome.command = swapped.command;
                outcome.fell_back_to = Some(name);
            }
        }
        outcome
    }

    fn per_rtt_interval(&self, rtts: f64) -> Option<u64> {
        let srtt = self.srtt_us? as f64;
        let us = (rtts * srtt).round() as u64;
        Some(us.clamp(MIN_REPORT_INTERVAL_US, MAX_REPORT_INTERVAL_US))
    }

    /// Checks an action and turns it into a command holding only the fields that change.
    /// Refuses the whole action if any value is non-finite or non-positive.
    fn sanitize(&mut self, action: &Action) -> Result<(Command, u32), Fault> {
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
            Some(Pacing::Off) => Some(PacingCommand::Off),
            None => None,
        };
        let interval = match action.report {
            Some(ReportPolicy::PerRtt { rtts }) if !rtts.is_finite() || rtts <= 0.0 => {
                return Err(Fault::InvalidReportRtts(rtts))
            }
            Some(ReportPolicy::PerRtt { rtts }) => {
                let rtts = clamp(rtts, REPORT_RTTS_RANGE.0, REPORT_RTTS_RANGE.1);
                self.report_policy = ReportPolicy::PerRtt { rtts };
                self.per_rtt_interval(rtts)
            }
            Some(ReportPolicy::EveryUs(us)) => {
                let us = clamp(us as f64, MIN_REPORT_INTERVAL_US as f64, MAX_REPORT_INTERVAL_US as f64) as u64;
                self.report_policy = ReportPolicy::EveryUs(us);
                Some(us)
            }
            None => None,
        };

        let mut cmd = Command::default();
        if let Some(c) = cwnd {
            if c != self.commanded.cwnd_bytes || self.last_report.is_none() {
                cmd.cwnd_bytes = Some(c);
            }
            self.commanded.cwnd_bytes = c;
        }
        if let Some(p) = pacing {
            let p = match p {
                // A datapath that cannot clear pacing gets no command; the old rate stays.
                PacingCommand::Off if !self.caps.can_clear_pacing => None,
                p => Some(p),
            };
            if let Some(p) = p {
                if self.commanded.pacing != Some(p) {
                    cmd.pacing = Some(p);
                }
                self.commanded.pacing = Some(p);
            }
        }
        if let Some(us) = interval {
            if us != self.commanded.report_interval_us {
                cmd.report_interval_us = Some(us);
            }
            self.commanded.report_interval_us = us;
        }
        if let Some(t) = action.rtt_threshold_us {
            if self.commanded.rtt_threshold_us != Some(t) {
                cmd.rtt_threshold_us = Some(t);
            }
            self.commanded.rtt_threshold_us = Some(t);
        }
        Ok((cmd, clamped))
    }
}

#[cfg(test)]
mod tests;
