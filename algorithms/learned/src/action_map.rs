//! The policy's output made an `Action`, as the manifest declares (docs/learned.md, "Actions").
//!
//! The mapping keeps the window it last asked for and applies the policy's output to it, so a
//! policy steers by relative changes as Aurora and Orca do; the bounds are the manifest's, and
//! the containment controller's floor and ceiling still apply after them. Like every window-based
//! algorithm here, it does not grow a window the flow did not fill (`Report::cwnd_limited`).

use ccp_contract::{Action, FlowStart, Pacing, Report, ReportPolicy};

use crate::manifest::{ActionSpec, ReportEvery};

#[derive(Debug, Clone)]
pub struct ActionMap {
    spec: ActionSpec,
    report: ReportEvery,
    mss: f64,
    cwnd_bytes: f64,
    srtt_us: Option<u64>,
}

impl ActionMap {
    pub fn new(spec: ActionSpec, report: ReportEvery) -> ActionMap {
        ActionMap { spec, report, mss: 1448.0, cwnd_bytes: 0.0, srtt_us: None }
    }

    /// The flow starts (or is taken over) from `start`'s window.
    pub fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.cwnd_bytes = self.bounded(start.start_cwnd_bytes() as f64);
        self.srtt_us = start.seed.as_ref().and_then(|s| s.srtt_us);
        let report = match self.report {
            ReportEvery::Rtts(rtts) => ReportPolicy::PerRtt { rtts },
            ReportEvery::IntervalUs(us) => ReportPolicy::EveryUs(us),
        };
        let mut a = Action::cwnd(self.cwnd_bytes).with_report(report);
        if let ActionSpec::Rate { .. } = self.spec {
            // Unpaced until the policy names a rate; the window limits the flow meanwhile.
            a = a.with_pacing(Pacing::Off);
        }
        a
    }

    fn bounded(&self, cwnd_bytes: f64) -> f64 {
        match self.spec {
            ActionSpec::WindowMultiplier { min_cwnd_pkts, max_cwnd_pkts, .. } => {
                cwnd_bytes.clamp(min_cwnd_pkts * self.mss, max_cwnd_pkts * self.mss)
            }
            ActionSpec::Rate { .. } => cwnd_bytes.max(ccp_contract::MIN_CWND_PKTS * self.mss),
        }
    }

    /// The action for the policy's output `a` after `report`; `None` when `a` is not a number
    /// (the caller's fault to count; nothing changes).
    pub fn apply(&mut self, report: &Report, a: f32) -> Option<Action> {
        let a = f64::from(a);
        if !a.is_finite() {
            return None;
        }
        self.mss = report.mss();
        if let Some(s) = report.rtt {
            self.srtt_us = Some(s.srtt_us);
        }
        match self.spec {
            ActionSpec::WindowMultiplier { step, clip, .. } => {
                let a = a.clamp(-clip, clip);
                let next = if a >= 0.0 { self.cwnd_bytes * (1.0 + step * a) } else { self.cwnd_bytes / (1.0 - step * a) };
                if next <= self.cwnd_bytes || report.cwnd_limited {
                    self.cwnd_bytes = self.bounded(next);
                }
                Some(Action::cwnd(self.cwnd_bytes))
            }
            ActionSpec::Rate { scale_mbps, min_mbps, max_mbps, window_gain } => {
                let rate_bytes_per_s = (a * scale_mbps).clamp(min_mbps, max_mbps) * 1e6 / 8.0;
                if let Some(srtt) = self.srtt_us.filter(|s| *s > 0) {
                    self.cwnd_bytes = self.bounded(window_gain * rate_bytes_per_s * srtt as f64 * 1e-6);
                }
                Some(Action::cwnd(self.cwnd_bytes).with_pacing(Pacing::BytesPerSec(rate_bytes_per_s)))
            }
        }
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> ActionMap {
        ActionMap::new(
            ActionSpec::WindowMultiplier { step: 0.5, clip: 1.0, min_cwnd_pkts: 2.0, max_cwnd_pkts: 100.0 },
            ReportEvery::Rtts(1.0),
        )
    }

    #[test]
    fn aurora_rule_grows_and_cuts_symmetrically_within_bounds() {
        let mut m = window();
        let a = m.init(&FlowStart::new(1000, 10_000));
        assert_eq!(a.cwnd_bytes, Some(10_000.0));
        assert_eq!(a.report, Some(ReportPolicy::PerRtt { rtts: 1.0 }));
        let r = Report { mss_bytes: 1000, ..Report::default() };
        assert_eq!(m.apply(&r, 1.0).unwrap().cwnd_bytes, Some(15_000.0));
        assert_eq!(m.apply(&r, -1.0).unwrap().cwnd_bytes, Some(10_000.0), "a cut undoes a growth of the same size");
        assert_eq!(m.apply(&r, 7.0).unwrap().cwnd_bytes, Some(15_000.0), "clipped to 1");
        for _ in 0..100 {
            m.apply(&r, 1.0);
        }
        assert_eq!(m.cwnd_bytes(), 100_000.0, "max_cwnd_pkts");
        assert!(m.apply(&r, f32::NAN).is_none());
        assert_eq!(m.cwnd_bytes(), 100_000.0, "NaN changes nothing");
    }

    #[test]
    fn a_window_the_flow_does_not_fill_does_not_grow() {
        let mut m = window();
        m.init(&FlowStart::new(1000, 10_000));
        let idle = Report { mss_bytes: 1000, cwnd_limited: false, ..Report::default() };
        assert_eq!(m.apply(&idle, 1.0).unwrap().cwnd_bytes, Some(10_000.0));
        assert_eq!(m.apply(&idle, -1.0).unwrap().cwnd_bytes.unwrap().round(), 6667.0);
    }

    #[test]
    fn a_rate_paces_with_a_window_of_gain_times_its_bdp() {
        let mut m = ActionMap::new(
            ActionSpec::Rate { scale_mbps: 10.0, min_mbps: 1.0, max_mbps: 100.0, window_gain: 2.0 },
            ReportEvery::IntervalUs(10_000),
        );
        assert_eq!(m.init(&FlowStart::new(1000, 10_000)).pacing, Some(Pacing::Off));
        let r = Report {
            mss_bytes: 1000,
            rtt: Some(ccp_contract::RttStats { srtt_us: 20_000, samples: 1, ..Default::default() }),
            ..Report::default()
        };
        let a = m.apply(&r, 8.0).unwrap();
        assert_eq!(a.pacing, Some(Pacing::BytesPerSec(10e6)));
        assert_eq!(a.cwnd_bytes, Some(2.0 * 10e6 * 0.02));
        assert_eq!(m.apply(&r, 1e6).unwrap().pacing, Some(Pacing::BytesPerSec(12.5e6)), "max_mbps");
    }
}
