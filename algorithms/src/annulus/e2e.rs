//! The end-to-end loop: the flow's own congestion control, unmodified, behind the three hooks the
//! coordination needs (annulus.md §6.2 `E2eAlg`): its rate, a growth ceiling and a proportional drop.

use ccp_contract::{Action, Algorithm, FlowStart, Report, StateVar};

use crate::bbr::{Bbr, BbrConfig};
use crate::cubic::{Cubic, CubicConfig};
use crate::dctcp::{Dctcp, DctcpConfig};
use crate::window::{RenoBased, RenoWindow};

/// Linux's `net.ipv4.tcp_pacing_ss_ratio` default: a window in slow start is paced at twice
/// cwnd/srtt.
const LINUX_PACING_SS_RATIO: f64 = 2.0;
/// Linux's `net.ipv4.tcp_pacing_ca_ratio` default: 1.2 × cwnd/srtt in congestion avoidance.
const LINUX_PACING_CA_RATIO: f64 = 1.2;

ccp_contract::param_choice! {
    /// Which algorithm an end-to-end loop runs.
    pub enum E2eKind {
        Dctcp = "dctcp",
        Cubic = "cubic",
        Bbr = "bbr",
    }
}

/// One flow's end-to-end algorithm, with its registry defaults.
pub(super) enum E2eLoop {
    Dctcp(Dctcp),
    Cubic(Cubic),
    Bbr(Bbr),
}

impl E2eLoop {
    pub(super) fn new(kind: E2eKind) -> Self {
        match kind {
            E2eKind::Dctcp => E2eLoop::Dctcp(Dctcp::new(DctcpConfig::default())),
            E2eKind::Cubic => E2eLoop::Cubic(Cubic::new(CubicConfig::default())),
            E2eKind::Bbr => E2eLoop::Bbr(Bbr::new(BbrConfig::default())),
        }
    }

    fn alg(&mut self) -> &mut dyn Algorithm {
        match self {
            E2eLoop::Dctcp(a) => a,
            E2eLoop::Cubic(a) => a,
            E2eLoop::Bbr(a) => a,
        }
    }

    pub(super) fn init(&mut self, start: &FlowStart) -> Action {
        self.alg().init(start)
    }

    pub(super) fn on_report(&mut self, report: &Report) -> Action {
        self.alg().on_report(report)
    }

    pub(super) fn state(&self) -> Vec<StateVar> {
        match self {
            E2eLoop::Dctcp(a) => a.state(),
            E2eLoop::Cubic(a) => a.state(),
            E2eLoop::Bbr(a) => a.state(),
        }
    }

    pub(super) fn cwnd_bytes(&self) -> f64 {
        match self {
            E2eLoop::Dctcp(a) => a.cwnd_bytes(),
            E2eLoop::Cubic(a) => a.cwnd_bytes(),
            E2eLoop::Bbr(a) => a.cwnd_bytes(),
        }
    }

    /// True when the algorithm sets its own pacing rate (the rate the min() compares).
    pub(super) fn rate_based(&self) -> bool {
        matches!(self, E2eLoop::Bbr(_))
    }

    /// The loop's rate, bytes/s: cwnd/srtt for a window (annulus.md §3, factor 1.0 per §12 A12),
    /// the algorithm's pacing rate for BBR. Infinite while a window-based loop has no RTT yet.
    pub(super) fn rate_bytes_per_s(&self, srtt_us: Option<u64>) -> f64 {
        match self {
            E2eLoop::Bbr(a) => a.pacing_rate_bytes_per_s(),
            _ => match srtt_us {
                Some(rtt) if rtt > 0 => self.cwnd_bytes() * 1e6 / rtt as f64,
                _ => f64::INFINITY,
            },
        }
    }

    /// The rate the loop's own sender would pace at: BBR's pacing rate; for a window, what a
    /// kernel derives from cwnd and RTT (the testbed's paced profile, annulus.md §5.2), Linux's
    /// `tcp_update_pacing_rate`: cwnd/srtt × 2 in slow start, × 1.2 after. Pacing a window at
    /// exactly cwnd/srtt would keep it from ever filling, so it would never be window-limited and
    /// never grow. Infinite while a window loop has no RTT yet.
    pub(super) fn pacing_rate_bytes_per_s(&self, srtt_us: Option<u64>) -> f64 {
        let ratio = |w: &RenoWindow| if w.in_slow_start() { LINUX_PACING_SS_RATIO } else { LINUX_PACING_CA_RATIO };
        match self {
            E2eLoop::Bbr(a) => a.pacing_rate_bytes_per_s(),
            E2eLoop::Dctcp(a) => ratio(a.window()) * self.rate_bytes_per_s(srtt_us),
            E2eLoop::Cubic(a) => ratio(a.window()) * self.rate_bytes_per_s(srtt_us),
        }
    }

    /// Growth pause: the loop's rate no higher than `ceiling_bytes_per_s` (never raised).
    pub(super) fn limit_growth(&mut self, ceiling_bytes_per_s: f64, srtt_us: Option<u64>) {
        let window_cap = |srtt: Option<u64>| srtt.map(|rtt| ceiling_bytes_per_s * rtt as f64 / 1e6);
        match self {
            E2eLoop::Dctcp(a) => {
                if let Some(cap) = window_cap(srtt_us) {
                    a.cap_cwnd(cap)
                }
            }
            E2eLoop::Cubic(a) => {
                if let Some(cap) = window_cap(srtt_us) {
                    a.cap_cwnd(cap)
                }
            }
            E2eLoop::Bbr(a) => a.cap_rate(ceiling_bytes_per_s),
        }
    }

    /// Proportional drop by `factor` in (0, 1].
    pub(super) fn scale(&mut self, factor: f64) {
        match self {
            E2eLoop::Dctcp(a) => a.scale(factor),
            E2eLoop::Cubic(a) => a.scale(factor),
            E2eLoop::Bbr(a) => a.scale(factor),
        }
    }
}
