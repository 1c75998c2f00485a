//! The congestion-control adapter: folds per-ACK measurements into the `Report` of the
//! measurement contract, runs the algorithm, and holds its actions until they reach the datapath.
//!
//! Two modes (`cc.reporting`):
//! - `per_ack`: a report after every ACK, the action applied at once when `agent_delay_us` is 0
//!   (an in-datapath controller; the baseline CCP is compared against).
//! - `interval`: CCP-style. Reports every `report_interval_us` (or as the algorithm asks with
//!   `Action::report`), plus urgent reports on loss, timeout and — optionally — the first ECN-Echo
//!   of a window; every action takes effect `agent_delay_us` after its report (the CCP paper's
//!   "staleness"). Between actions the datapath keeps the last window and rate: ACK clocking
//!   still paces the flow, as in libccp datapaths without a fold program.
//!
//! The algorithm runs when the report is built (it is a pure function of its inputs, so running
//! it later would give the same action); the delay applies to the action.

use std::collections::VecDeque;

use ccp_algorithms::{Action, Algorithm, NetworkFeedback, Pacing, Report, ReportPolicy, RttStats, Urgent};

use crate::time::{to_us, Time, PS_PER_SEC, PS_PER_US};

/// Report interval used for `PerRtt` policies before the first RTT sample, ps.
pub const FALLBACK_RTT: Time = 100 * PS_PER_US;

/// Largest window the datapath accepts, bytes (an algorithm asking for more is clamped).
pub const MAX_CWND_BYTES: f64 = 1e9;

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
    app_limited: bool,
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
    pub pending_bytes: u64,
    pub cwnd_bytes: u64,
    pub pacing: Option<f64>,
    pub srtt: Option<Time>,
}

/// One flow's controller and its report state.
pub struct Controller {
    alg: Box<dyn Algorithm>,
    fold: Fold,
    pub policy: ReportPolicy,
    pub last_report: Time,
    pub rtt_threshold_us: Option<u64>,
    /// Actions computed but not yet in the datapath, oldest first.
    pub pending: VecDeque<Action>,
    /// A report-timer event is outstanding.
    pub timer_armed: bool,
    pub reports: u64,
}

fn urgency(u: Urgent) -> u8 {
    match u {
        Urgent::Timeout => 3,
        Urgent::Loss => 2,
        Urgent::StateChange => 1,
    }
}

impl Controller {
    pub fn new(alg: Box<dyn Algorithm>, policy: ReportPolicy, now: Time) -> Controller {
        Controller {
            alg,
            fold: Fold::default(),
            policy,
            last_report: now,
            rtt_threshold_us: None,
            pending: VecDeque::new(),
            timer_armed: false,
            reports: 0,
        }
    }

    pub fn init(&mut self, start: &ccp_algorithms::FlowStart) -> Action {
        self.alg.init(start)
    }

    pub fn name(&self) -> &'static str {
        self.alg.name()
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
            if self.rtt_threshold_us.is_some_and(|t| us > t) {
                f.over_threshold += s.acked_pkts + s.sacked_pkts;
            }
        }
        if let Some((send, recv)) = s.rates {
            f.send_rate = Some(send);
            f.recv_rate = Some(recv);
        }
    }

    pub fn note_app_limited(&mut self) {
        self.fold.app_limited = true;
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

    pub fn is_urgent(&self) -> bool {
        self.fold.urgent.is_some()
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
            rtt_over_threshold_pkts: f.over_threshold,
            send_rate_bytes_per_s: f.send_rate,
            recv_rate_bytes_per_s: f.recv_rate,
            inflight_bytes: g.inflight_bytes,
            pending_bytes: g.pending_bytes,
            cwnd_bytes: g.cwnd_bytes,
            pacing_rate_bytes_per_s: g.pacing.map(|r| r as u64),
            app_limited: f.app_limited,
            urgent: f.urgent,
            feedback: f.feedback,
        };
        self.last_report = now;
        self.reports += 1;
        report
    }

    /// Runs the algorithm on a report.
    pub fn decide(&mut self, report: &Report) -> Action {
        self.alg.on_report(report)
    }

    /// The report interval the current policy asks for, given the smoothed RTT.
    pub fn interval(&self, srtt: Option<Time>) -> Time {
        match self.policy {
            ReportPolicy::EveryUs(us) => us.max(1) * PS_PER_US,
            ReportPolicy::PerRtt { rtts } => ((rtts * srtt.unwrap_or(FALLBACK_RTT) as f64) as Time).max(PS_PER_US),
        }
    }

    /// Records the parts of an action that concern reporting; returns the sane window and pacing
    /// requests (a NaN, infinite or non-positive request is ignored: the flow keeps its last sane
    /// value, as the agent would).
    pub fn accept(&mut self, a: &Action, mss: u32) -> (Option<u64>, Option<Option<f64>>) {
        if let Some(p) = a.report {
            let sane = match p {
                ReportPolicy::EveryUs(us) => us > 0,
                ReportPolicy::PerRtt { rtts } => rtts.is_finite() && rtts > 0.0,
            };
            if sane {
                self.policy = p;
            }
        }
        if let Some(t) = a.rtt_threshold_us {
            self.rtt_threshold_us = Some(t);
        }
        let cwnd = a.cwnd_bytes.filter(|c| c.is_finite() && *c > 0.0).map(|c| c.clamp(f64::from(mss), MAX_CWND_BYTES) as u64);
        let pacing = match a.pacing {
            Some(Pacing::Off) => Some(None),
            Some(Pacing::BytesPerSec(r)) if r.is_finite() && r > 0.0 => Some(Some(r.min(1e15))),
            _ => None,
        };
        (cwnd, pacing)
    }
}

/// Bytes per second from bytes over a duration in ps.
pub fn rate(bytes: u64, elapsed: Time) -> u64 {
    (u128::from(bytes) * u128::from(PS_PER_SEC) / u128::from(elapsed.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_algorithms::registry;

    fn controller() -> Controller {
        let f = registry::configure("reno", &toml::Table::new()).unwrap();
        Controller::new(f.create(), ReportPolicy::EveryUs(100), 0)
    }

    fn gauges() -> Gauges {
        Gauges {
            mss: 1000,
            inflight_bytes: 5000,
            pending_bytes: 9000,
            cwnd_bytes: 10_000,
            pacing: None,
            srtt: Some(50 * PS_PER_US),
        }
    }

    #[test]
    fn folds_acks_into_one_report_and_resets() {
        let mut c = controller();
        c.rtt_threshold_us = Some(30);
        for (i, rtt) in [20u64, 40, 35].iter().enumerate() {
            c.on_ack(&AckSample {
                acked_bytes: 1000,
                acked_pkts: 1,
                ce_bytes: if i == 1 { 1000 } else { 0 },
                ce_pkts: u64::from(i == 1),
                ece: i == 1,
                rtt: Some(rtt * PS_PER_US),
                rates: Some((100 * (i as u64 + 1), 90)),
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
        assert_eq!(r.rtt_over_threshold_pkts, 2);
        assert_eq!((r.send_rate_bytes_per_s, r.recv_rate_bytes_per_s), (Some(300), Some(90)));
        assert_eq!(r.urgent, Some(Urgent::Loss));
        assert_eq!((r.inflight_bytes, r.cwnd_bytes, r.mss_bytes), (5000, 10_000, 1000));
        let r2 = c.build_report(150 * PS_PER_US, &gauges());
        assert_eq!((r2.acked_bytes, r2.interval_us, r2.urgent), (0, 50, None));
        assert!(r2.rtt.is_none());
    }

    #[test]
    fn insane_actions_are_ignored_and_windows_clamped() {
        let mut c = controller();
        assert_eq!(c.accept(&Action::cwnd(f64::NAN), 1000), (None, None));
        assert_eq!(c.accept(&Action::cwnd(-5.0), 1000), (None, None));
        assert_eq!(c.accept(&Action::cwnd(10.0), 1000), (Some(1000), None));
        let a = Action::default().with_pacing(Pacing::BytesPerSec(f64::INFINITY)).with_report(ReportPolicy::EveryUs(0));
        assert_eq!(c.accept(&a, 1000), (None, None));
        assert_eq!(c.policy, ReportPolicy::EveryUs(100));
        let a = Action::default().with_pacing(Pacing::Off).with_report(ReportPolicy::PerRtt { rtts: 2.0 });
        assert_eq!(c.accept(&a, 1000), (None, Some(None)));
        assert_eq!(c.interval(Some(30 * PS_PER_US)), 60 * PS_PER_US);
        assert_eq!(c.interval(None), 2 * FALLBACK_RTT);
    }

    #[test]
    fn rates() {
        assert_eq!(rate(1500, 12 * PS_PER_US), 125_000_000);
        assert_eq!(rate(1, 0), PS_PER_SEC);
    }
}
