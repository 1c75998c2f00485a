//! The congestion-control adapter: folds per-ACK measurements into the `Report` of the
//! measurement contract, runs the flow's `ccp_contract::Controller` — the same containment
//! boundary the agent drives every datapath's flows through — and holds its settings until they
//! reach the datapath.
//!
//! Two modes (`cc.reporting`):
//! - `per_ack`: a report after every ACK, the settings applied at once when `agent_delay_us` is 0
//!   (an in-datapath controller; the baseline CCP is compared against).
//! - `interval`: CCP-style. Reports every `report_interval_us` (or as the algorithm asks with
//!   `Action::report`; this datapath counts RTTs itself), plus urgent reports on loss, timeout
//!   and — optionally — the first ECN-Echo of a window; every change takes effect
//!   `agent_delay_us` after its report (the CCP paper's "staleness"). Between changes the
//!   datapath keeps the last window and rate: ACK clocking still paces the flow, as in libccp
//!   datapaths without a fold program.
//!
//! The controller runs when the report is built (the algorithm is a pure function of its
//! inputs, so running it later would give the same decision); the delay applies to the change.
//! Time crosses the contract in µs (`to_us`); the simulator's own clock is in ps.

use std::collections::VecDeque;

use ccp_contract::{
    Capabilities, Choice, Command, Controller, FlowStart, Limits, NetworkFeedback, Outcome, Report, ReportPolicy, RttStats,
    Urgent,
};

use crate::time::{to_us, Time, PS_PER_SEC, PS_PER_US};

/// Report interval used for `PerRtt` policies before the first RTT sample, ps, unless the
/// scenario says otherwise (`[cc] initial_rtt_us`).
pub const FALLBACK_RTT: Time = 100 * PS_PER_US;

/// What the simulated datapath can carry: windows up to 1 GB, rates up to 8 Pbit/s, pacing that
/// can be switched off, and RTTs counted by the transport itself.
pub const CAPABILITIES: Capabilities = Capabilities {
    max_cwnd_bytes: 1_000_000_000,
    max_rate_bytes_per_s: 1_000_000_000_000_000,
    can_clear_pacing: true,
    per_rtt_reports: true,
    cwnd_packets: None,
};

/// The controller's limits in the simulator: the agent's, except that reports may come as often
/// as every microsecond (datacenter RTTs are tens of microseconds; the agent's 1 ms floor is for
/// real datapaths and their wakeups).
pub fn limits(default_report: ReportPolicy) -> Limits {
    Limits { min_report_interval_us: 1, default_report, ..Limits::default() }
}

/// Counters and RTT statistics since the last report.
#[derive(Debug, Clone, Default)]
struct Fold {
    acked_bytes: u64,
    acked_pkts: u64,
    sacked_bytes: u64,
    sacked_pkts: u64,
    lost_pkts: u64,
    timeouts: u32,
    ce_bytes: u64,
    ce_pkts: u64,
    ece_acks: u64,
    rtt_min_us: u64,
    rtt_max_us: u64,
    rtt_last_us: u64,
    rtt_sum_us: u64,
    rtt_samples: u32,
    over_threshold: u64,
    send_rate: Option<u64>,
    recv_rate: Option<u64>,
    max_delivery_rate: Option<u64>,
    app_limited: bool,
    cwnd_limited: bool,
    urgent: Option<Urgent>,
    feedback: Option<NetworkFeedback>,
}

/// What one ACK contributed, as the transport measured it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckSample {
    pub acked_bytes: u64,
    pub acked_pkts: u64,
    pub sacked_bytes: u64,
    pub sacked_pkts: u64,
    pub ce_bytes: u64,
    pub ce_pkts: u64,
    pub ece: bool,
    pub lost_pkts: u64,
    /// RTT sample, when the ACK acknowledged something new.
    pub rtt: Option<Time>,
    /// Rate sample over the same packets: (send rate, delivery rate), bytes/s.
    pub rates: Option<(u64, u64)>,
}

/// The datapath's gauges at the moment a report is sent.
#[derive(Debug, Clone, Copy)]
pub struct Gauges {
    pub mss: u32,
    pub inflight_bytes: u64,
    /// Sent and not cumulatively acknowledged (snd_nxt − snd_una).
    pub unacked_bytes: u64,
    pub pending_bytes: u64,
    pub cwnd_bytes: u64,
    pub pacing: Option<f64>,
    pub srtt: Option<Time>,
    /// The window limits the sender now or did within its last window of data.
    pub cwnd_limited: bool,
}

/// One flow's controller, its report fold and the settings on their way to the datapath.
pub struct FlowCc {
    controller: Controller,
    fold: Fold,
    /// The report policy the datapath applies (its timer follows it).
    report: ReportPolicy,
    /// The RTT threshold the datapath counts late samples against.
    pub rtt_threshold_us: Option<u64>,
    /// Report once this many packets were acknowledged since the last report; 0: off.
    report_acked_pkts: u32,
    /// Changes decided but not yet in the datapath, oldest first.
    pub pending: VecDeque<Command>,
    /// A report-timer event is outstanding.
    pub timer_armed: bool,
    pub last_report: Time,
    pub reports: u64,
    /// The RTT `PerRtt` report intervals count before the flow's first sample.
    pub initial_rtt: Time,
}

fn urgency(u: Urgent) -> u8 {
    match u {
        Urgent::Timeout => 3,
        Urgent::Loss => 2,
        Urgent::StateChange => 1,
    }
}

impl FlowCc {
    /// Starts a flow's controller; the outcome's command holds every setting for the datapath.
    pub fn start(choice: Choice, fallback: Choice, limits: Limits, start: &FlowStart, now: Time) -> (FlowCc, Outcome) {
        let report = limits.default_report;
        let (controller, outcome) = Controller::start(choice, fallback, CAPABILITIES, limits, start, to_us(now));
        let cc = FlowCc {
            controller,
            fold: Fold::default(),
            report,
            rtt_threshold_us: None,
            report_acked_pkts: 0,
            pending: VecDeque::new(),
            timer_armed: false,
            last_report: now,
            reports: 0,
            initial_rtt: FALLBACK_RTT,
        };
        (cc, outcome)
    }

    pub fn name(&self) -> &'static str {
        self.controller.algorithm_name()
    }

    pub fn on_ack(&mut self, s: &AckSample) {
        let f = &mut self.fold;
        f.acked_bytes += s.acked_bytes;
        f.acked_pkts += s.acked_pkts;
        f.sacked_bytes += s.sacked_bytes;
        f.sacked_pkts += s.sacked_pkts;
        f.ce_bytes += s.ce_bytes;
        f.ce_pkts += s.ce_pkts;
        f.ece_acks += u64::from(s.ece);
        f.lost_pkts += s.lost_pkts;
        if let Some(rtt) = s.rtt {
            let us = to_us(rtt).max(1);
            f.rtt_min_us = if f.rtt_samples == 0 { us } else { f.rtt_min_us.min(us) };
            f.rtt_max_us = f.rtt_max_us.max(us);
            f.rtt_last_us = us;
            f.rtt_sum_us += us;
            f.rtt_samples += 1;
            // Per sample, as the other datapaths count late RTTs.
            if self.rtt_threshold_us.is_some_and(|t| us > t) {
                f.over_threshold += 1;
            }
        }
        if let Some((send, recv)) = s.rates {
            f.send_rate = Some(send);
            f.recv_rate = Some(recv);
            // Over the longer of the two intervals, as Linux's rate sample.
            f.max_delivery_rate = f.max_delivery_rate.max(Some(send.min(recv)));
        }
    }

    pub fn note_app_limited(&mut self) {
        self.fold.app_limited = true;
    }

    /// The window stopped the sender (it had data and the pacer let it go).
    pub fn note_cwnd_limited(&mut self) {
        self.fold.cwnd_limited = true;
    }

    pub fn note_timeout(&mut self) {
        self.fold.timeouts += 1;
        self.raise(Urgent::Timeout);
    }

    /// Marks the next report urgent (keeping the most severe cause).
    pub fn raise(&mut self, cause: Urgent) {
        if self.fold.urgent.is_none_or(|u| urgency(cause) > urgency(u)) {
            self.fold.urgent = Some(cause);
        }
    }

    /// A report is due before its time: an urgent cause, or the packet trigger.
    pub fn report_due(&self) -> bool {
        self.fold.urgent.is_some()
            || (self.report_acked_pkts > 0 && self.fold.acked_pkts + self.fold.sacked_pkts >= u64::from(self.report_acked_pkts))
    }

    pub fn set_feedback(&mut self, fb: NetworkFeedback) {
        self.fold.feedback = Some(fb);
    }

    /// Builds the report for the interval ending `now` and resets the counters.
    pub fn build_report(&mut self, now: Time, g: &Gauges) -> Report {
        let f = std::mem::take(&mut self.fold);
        let rtt = (f.rtt_samples > 0).then(|| RttStats {
            min_us: f.rtt_min_us,
            max_us: f.rtt_max_us,
            last_us: f.rtt_last_us,
            srtt_us: g.srtt.map_or(f.rtt_last_us, |s| to_us(s).max(1)),
            mean_us: f.rtt_sum_us / u64::from(f.rtt_samples),
            samples: f.rtt_samples,
        });
        let report = Report {
            now_us: to_us(now),
            interval_us: to_us(now - self.last_report.min(now)),
            mss_bytes: g.mss,
            acked_bytes: f.acked_bytes,
            acked_pkts: f.acked_pkts,
            sacked_bytes: f.sacked_bytes,
            sacked_pkts: f.sacked_pkts,
            lost_pkts: f.lost_pkts,
            timeouts: f.timeouts,
            ce_bytes: f.ce_bytes,
            ce_pkts: f.ce_pkts,
            ece_acks: f.ece_acks,
            rtt,
            rtt_samples_over_threshold: f.over_threshold,
            send_rate_bytes_per_s: f.send_rate,
            recv_rate_bytes_per_s: f.recv_rate,
            max_delivery_rate_bytes_per_s: f.max_delivery_rate,
            // Not measured here (yet): BBR estimates it per report, as the outputs were blessed.
            extra_acked_bytes: None,
            inflight_bytes: g.inflight_bytes,
            unacked_bytes: g.unacked_bytes,
            pending_bytes: g.pending_bytes,
            cwnd_bytes: g.cwnd_bytes,
            pacing_rate_bytes_per_s: g.pacing.map(|r| r as u64),
            app_limited: f.app_limited,
            // The window stopped the sender during the interval, or the transport counts it as
            // limiting (full now, or within a window of data of stopping the sender).
            cwnd_limited: f.cwnd_limited || g.cwnd_limited,
            urgent: f.urgent,
            feedback: f.feedback,
        };
        self.last_report = now;
        self.reports += 1;
        report
    }

    /// Runs the flow's controller on a report.
    pub fn decide(&mut self, report: &Report, now: Time) -> Outcome {
        self.controller.on_report(report, to_us(now))
    }

    /// The report interval the applied policy asks for, given the smoothed RTT.
    pub fn interval(&self, srtt: Option<Time>) -> Time {
        match self.report {
            ReportPolicy::EveryUs(us) => us.max(1) * PS_PER_US,
            ReportPolicy::PerRtt { rtts } => ((rtts * srtt.unwrap_or(self.initial_rtt) as f64) as Time).max(PS_PER_US),
        }
    }

    /// Applies the reporting half of a change (the fold's registers); true when the report
    /// policy changed, so that the timer must be re-armed.
    pub fn apply_reporting(&mut self, c: &Command) -> bool {
        if let Some(t) = c.rtt_threshold_us {
            self.rtt_threshold_us = Some(t);
        }
        if let Some(n) = c.report_acked_pkts {
            self.report_acked_pkts = n;
        }
        match c.report {
            Some(p) if p != self.report => {
                self.report = p;
                true
            }
            _ => false,
        }
    }
}

/// Bytes per second from bytes over a duration in ps.
pub fn rate(bytes: u64, elapsed: Time) -> u64 {
    (u128::from(bytes) * u128::from(PS_PER_SEC) / u128::from(elapsed.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_contract::{Action, Algorithm, AlgorithmFactory, Pacing, PacingCommand};
    use std::sync::Arc;

    /// Plays back one action per report.
    struct Script(Vec<Action>);

    impl Algorithm for Script {
        fn name(&self) -> &'static str {
            "script"
        }
        fn init(&mut self, _: &FlowStart) -> Action {
            Action::cwnd(10_000.0)
        }
        fn on_report(&mut self, _: &Report) -> Action {
            if self.0.is_empty() {
                Action::default()
            } else {
                self.0.remove(0)
            }
        }
    }

    struct ScriptFactory(Vec<Action>);

    impl AlgorithmFactory for ScriptFactory {
        fn name(&self) -> &'static str {
            "script"
        }
        fn create(&self) -> Box<dyn Algorithm> {
            Box::new(Script(self.0.clone()))
        }
    }

    fn cc(actions: Vec<Action>) -> (FlowCc, Outcome) {
        let choice = Choice::new(Arc::new(ScriptFactory(actions)), toml::Table::new(), "test");
        let fallback = ccp_algorithms::registry::choose("reno", toml::Table::new(), "fallback").unwrap();
        FlowCc::start(choice, fallback, limits(ReportPolicy::EveryUs(100)), &FlowStart::new(1000, 10_000), 0)
    }

    fn gauges() -> Gauges {
        Gauges {
            mss: 1000,
            inflight_bytes: 5000,
            unacked_bytes: 6000,
            pending_bytes: 9000,
            cwnd_bytes: 10_000,
            pacing: None,
            srtt: Some(50 * PS_PER_US),
            cwnd_limited: true,
        }
    }

    #[test]
    fn folds_acks_into_one_report_and_resets() {
        let (mut c, _) = cc(vec![]);
        c.rtt_threshold_us = Some(30);
        for (i, rtt) in [20u64, 40, 35].iter().enumerate() {
            c.on_ack(&AckSample {
                acked_bytes: 1000,
                acked_pkts: 1,
                ce_bytes: if i == 1 { 1000 } else { 0 },
                ce_pkts: u64::from(i == 1),
                ece: i == 1,
                rtt: Some(rtt * PS_PER_US),
                rates: Some([(100, 90), (300, 250), (300, 120)][i]),
                ..AckSample::default()
            });
        }
        c.raise(Urgent::StateChange);
        c.raise(Urgent::Loss);
        c.raise(Urgent::StateChange);
        let r = c.build_report(100 * PS_PER_US, &gauges());
        assert_eq!((r.now_us, r.interval_us), (100, 100));
        assert_eq!((r.acked_bytes, r.acked_pkts, r.ce_bytes, r.ce_pkts, r.ece_acks), (3000, 3, 1000, 1, 1));
        let rtt = r.rtt.unwrap();
        assert_eq!((rtt.min_us, rtt.max_us, rtt.last_us, rtt.mean_us, rtt.samples, rtt.srtt_us), (20, 40, 35, 31, 3, 50));
        assert_eq!(r.rtt_samples_over_threshold, 2, "two samples above 30 µs");
        assert_eq!((r.send_rate_bytes_per_s, r.recv_rate_bytes_per_s), (Some(300), Some(120)), "the last pair");
        assert_eq!(r.max_delivery_rate_bytes_per_s, Some(250), "the fastest sample, each the lower of its pair");
        assert_eq!(r.urgent, Some(Urgent::Loss));
        assert_eq!((r.inflight_bytes, r.cwnd_bytes, r.mss_bytes), (5000, 10_000, 1000));
        let r2 = c.build_report(150 * PS_PER_US, &gauges());
        assert_eq!((r2.acked_bytes, r2.interval_us, r2.urgent, r2.max_delivery_rate_bytes_per_s), (0, 50, None, None));
        assert!(r2.rtt.is_none());
    }

    #[test]
    fn decisions_go_through_the_contract_controller() {
        let (mut c, start) = cc(vec![
            Action::cwnd(f64::NAN),
            Action::cwnd(10.0),
            Action::default().with_pacing(Pacing::Off).with_report(ReportPolicy::PerRtt { rtts: 2.0 }),
            Action::default().with_report(ReportPolicy::EveryUs(0)),
        ]);
        assert_eq!(start.command.cwnd_bytes, Some(10_000));
        assert_eq!(start.command.report, Some(ReportPolicy::EveryUs(100)));
        let r = c.build_report(PS_PER_US, &gauges());
        let out = c.decide(&r, PS_PER_US);
        assert!(out.fault.is_some() && out.command.is_empty(), "a NaN is refused: {out:?}");
        let out = c.decide(&r, 2 * PS_PER_US);
        assert_eq!(out.command.cwnd_bytes, Some(2000), "floored at two packets, as in the agent");
        let out = c.decide(&r, 3 * PS_PER_US);
        assert_eq!(out.command.pacing, Some(PacingCommand::Off));
        assert!(c.apply_reporting(&out.command), "the datapath counts RTTs: the policy goes as it is");
        assert_eq!(c.interval(Some(30 * PS_PER_US)), 60 * PS_PER_US);
        assert_eq!(c.interval(None), 2 * FALLBACK_RTT);
        let out = c.decide(&r, 4 * PS_PER_US);
        assert_eq!(out.command.report, Some(ReportPolicy::EveryUs(1)), "clamped to the simulator's floor");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(1500, 12 * PS_PER_US), 125_000_000);
        assert_eq!(rate(1, 0), PS_PER_SEC);
    }
}
