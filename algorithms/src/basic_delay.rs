//! BasicDelay: the explicit-control delay controller of the Nimbus paper (Goyal et al., SIGCOMM'22,
//! §4.1, Eq. 4), usable standalone and as NimbusCC's default delay mode.
//!
//! Model. With S our send rate and ẑ the cross-traffic estimate (nimbus::cross_traffic, Eq. 1),
//! both over the last window of packets, x the current RTT and x_min the minimum RTT:
//!
//!   Rate ← S + α·(μ̂ − S − ẑ) + β·(μ̂/x)·(x_min + d_t − x)                        (Eq. 4)
//!
//! μ̂ − S − ẑ is the spare capacity of the last RTT, of which an α fraction is taken (an XCP/RCP
//! style explicit-control loop); the β term holds the queueing delay at the target d_t, neither
//! growing nor draining the queue — Eq. 1 needs a non-empty queue. Constants (paper §7.1):
//! α = 0.8, β = 0.5, d_t = 12.5 ms at a 50 ms RTT, i.e. 0.25·x_min ("a target queuing delay of
//! 0.25 BDP", App. D.1).
//!
//! Choices (spec A17): the rule runs per report, not per ACK (the authors' implementation does the
//! same), with x the latest RTT sample and x_min the all-time minimum. d_t is relative by default
//! (d_t = (θ − 1)·x_min with θ = 1.25), or absolute. On entering delay mode from NimbusCC's
//! competitive mode, the target glides down from the queue that exists then instead of collapsing
//! the rate at once: θ ← max(θ_target, avg_rtt/x_min), then θ decreases by 0.5 per second of
//! datapath time (time-based, spec A17; the authors decrement 0.005 per report) until it is back at
//! the target. BasicDelay has no loss reaction (none in the paper or the authors' code); NimbusCC
//! adds its own safety rule for persistent loss in delay mode.
//!
//! Standalone, the algorithm is rate-based: it paces at Rate, floored at 5 % of μ̂ (the authors'
//! floor) and at two packets per RTT, with cwnd = max(2·MSS, 2·Rate·x) so the window never binds
//! before the rate does. Until the datapath has delivered a rate sample (S, R) and an RTT sample
//! it holds the initial window unpaced. μ̂ is configured or estimated as the maximum receive rate
//! (see nimbus::cross_traffic for the limits of that estimate).

use std::sync::Arc;

use crate::nimbus::cross_traffic::{self, CrossTrafficConfig, CrossTrafficEstimator, LinkRate, MAX_RATE_BYTES_PER_S};
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, FlowStart, Pacing, Report, ReportPolicy, StateVar,
    MIN_CWND_PKTS,
};

/// α: the fraction of the spare capacity taken per update (paper §7.1: 0.8).
pub const ALPHA: f64 = 0.8;
/// β: the gain of the queueing-delay term (paper §7.1: 0.5).
pub const BETA: f64 = 0.5;
/// d_t as a fraction of x_min (paper §7.1: 12.5 ms at 50 ms; App. D.1: 0.25 BDP).
pub const TARGET_DELAY_FRACTION: f64 = 0.25;
/// Glide of θ back to its target after a switch into delay mode, per second (spec A17).
pub const THETA_DECAY_PER_S: f64 = 0.5;
/// Rate floor as a fraction of μ̂ (authors' code: 0.05).
pub const MIN_RATE_FRACTION: f64 = 0.05;
/// Report interval requested from the datapath, µs (paper §7: reports every 10 ms).
pub const REPORT_INTERVAL_US: u64 = 10_000;
const US_PER_S: f64 = 1e6;
const BITS_PER_BYTE: f64 = 8.0;
const BITS_PER_MBIT: f64 = 1e6;

/// Eq. 4, bytes/s. `x_s`, `x_min_s` and `d_t_s` in seconds; rates in bytes/s.
#[allow(clippy::too_many_arguments)]
pub fn eq4(s: f64, z: f64, mu: f64, x_s: f64, x_min_s: f64, d_t_s: f64, alpha: f64, beta: f64) -> f64 {
    s + alpha * (mu - s - z) + beta * (mu / x_s) * (x_min_s + d_t_s - x_s)
}

/// The target queueing delay d_t.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TargetDelay {
    /// d_t = fraction·x_min (θ = 1 + fraction).
    Relative(f64),
    /// A fixed d_t, seconds.
    Absolute(f64),
}

impl TargetDelay {
    /// The target `target_delay_ms` and `target_delay_fraction` declare: a fixed d_t when
    /// `target_delay_ms` > 0, else relative to x_min.
    pub fn from_params(target_delay_ms: f64, target_delay_fraction: f64) -> Self {
        if target_delay_ms > 0.0 {
            TargetDelay::Absolute(target_delay_ms / 1e3)
        } else {
            TargetDelay::Relative(target_delay_fraction)
        }
    }
}

/// Eq. 4 with the θ glide: the part of BasicDelay NimbusCC composes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BasicDelayCore {
    pub alpha: f64,
    pub beta: f64,
    pub target: TargetDelay,
    pub theta_decay_per_s: f64,
    /// Extra target delay above d_t left from a switch into delay mode, seconds.
    glide_s: f64,
}

impl BasicDelayCore {
    pub fn new(alpha: f64, beta: f64, target: TargetDelay, theta_decay_per_s: f64) -> Self {
        BasicDelayCore { alpha, beta, target, theta_decay_per_s, glide_s: 0.0 }
    }

    /// The configured d_t at this x_min, seconds.
    pub fn base_target_s(&self, x_min_s: f64) -> f64 {
        match self.target {
            TargetDelay::Relative(f) => f * x_min_s,
            TargetDelay::Absolute(d) => d,
        }
    }

    /// The d_t in force (configured plus glide), seconds.
    pub fn target_s(&self, x_min_s: f64) -> f64 {
        self.base_target_s(x_min_s) + self.glide_s
    }

    /// θ = (x_min + d_t)/x_min.
    pub fn theta(&self, x_min_s: f64) -> f64 {
        if x_min_s > 0.0 {
            1.0 + self.target_s(x_min_s) / x_min_s
        } else {
            1.0
        }
    }

    /// Entering delay mode with mean RTT `avg_rtt_s`: θ ← max(θ_target, avg_rtt/x_min).
    pub fn enter(&mut self, avg_rtt_s: f64, x_min_s: f64) {
        let excess = avg_rtt_s - x_min_s - self.base_target_s(x_min_s);
        self.glide_s = if excess.is_finite() { excess.max(0.0) } else { 0.0 };
    }

    /// θ decays by `theta_decay_per_s` per second (the target by that times x_min).
    pub fn decay(&mut self, dt_s: f64, x_min_s: f64) {
        let step = self.theta_decay_per_s * x_min_s * dt_s.max(0.0);
        if step.is_finite() {
            self.glide_s = (self.glide_s - step).max(0.0);
        }
    }

    /// Eq. 4 with the target in force.
    pub fn rate(&self, s: f64, z: f64, mu: f64, x_s: f64, x_min_s: f64) -> f64 {
        eq4(s, z, mu, x_s, x_min_s, self.target_s(x_min_s), self.alpha, self.beta)
    }
}

/// BasicDelay's parameters, one constant each so that NimbusCC (which composes BasicDelay)
/// declares the same ones rather than copies.
pub mod params {
    use ccp_contract::{Bound, ParamSpec};

    pub const ALPHA: ParamSpec = ParamSpec::float(
        "alpha",
        super::ALPHA,
        Bound::Exclusive(0.0),
        Bound::Inclusive(1.0),
        "",
        "BasicDelay alpha: fraction of the spare capacity taken per update (paper §7.1: 0.8)",
    );
    pub const BETA: ParamSpec = ParamSpec::float(
        "beta",
        super::BETA,
        Bound::Inclusive(0.0),
        Bound::Inclusive(1.0),
        "",
        "BasicDelay beta: gain of the queueing-delay term (paper §7.1: 0.5)",
    );
    pub const TARGET_DELAY_MS: ParamSpec = ParamSpec::float(
        "target_delay_ms",
        0.0,
        Bound::Inclusive(0.0),
        Bound::Inclusive(10_000.0),
        "ms",
        "fixed target queueing delay d_t; 0 = relative to the minimum RTT (target_delay_fraction)",
    );
    pub const TARGET_DELAY_FRACTION: ParamSpec = ParamSpec::float(
        "target_delay_fraction",
        super::TARGET_DELAY_FRACTION,
        Bound::Exclusive(0.0),
        Bound::Inclusive(10.0),
        "",
        "d_t as a fraction of x_min when target_delay_ms = 0 (paper: 12.5 ms at 50 ms RTT = 0.25)",
    );
    pub const MIN_RATE_FRACTION: ParamSpec = ParamSpec::float(
        "min_rate_fraction",
        super::MIN_RATE_FRACTION,
        Bound::Inclusive(0.0),
        Bound::Inclusive(1.0),
        "",
        "rate floor as a fraction of mu (the authors' code: 0.05)",
    );
}

declare_params! {
    /// BasicDelay's parameters, as declared; [`BasicDelayConfig`] is what they configure.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct BasicDelayParams {
        pub alpha: f64 = params::ALPHA,
        pub beta: f64 = params::BETA,
        pub target_delay_ms: f64 = params::TARGET_DELAY_MS,
        pub target_delay_fraction: f64 = params::TARGET_DELAY_FRACTION,
        pub mu_mbit_per_s: f64 = shared::MU_MBIT_PER_S,
        pub mu_window_s: f64 = shared::MU_WINDOW_S,
        pub header_bytes: f64 = shared::HEADER_BYTES,
        pub min_rate_fraction: f64 = params::MIN_RATE_FRACTION,
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS
            .with_doc("window before the first rate sample (RFC 6928: 10); a flow the datapath started with its own window keeps it"),
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "basic_delay",
    summary: "BasicDelay: rate = S + alpha(mu - S - z) + beta(mu/x)(x_min + d_t - x), z from Nimbus's estimator",
    reference: "Goyal et al., Elasticity Detection, SIGCOMM 2022, §4.1 Eq. 4, §7.1 (specs/nimbus.md §6.2)",
    params: BasicDelayParams::PARAMS,
    build: |p| Ok(Arc::new(BasicDelayConfig::from(&BasicDelayParams::from_params(p)?))),
};

/// Converts a rate in Mbit/s to bytes/s.
pub fn mbit_to_bytes_per_s(mbit: f64) -> f64 {
    mbit * BITS_PER_MBIT / BITS_PER_BYTE
}

/// The link-rate source for `mu_mbit_per_s` / `mu_window_s`.
pub fn link_rate(mu_mbit_per_s: f64, mu_window_s: f64) -> LinkRate {
    if mu_mbit_per_s > 0.0 {
        LinkRate::Fixed(mbit_to_bytes_per_s(mu_mbit_per_s))
    } else if mu_window_s > 0.0 {
        LinkRate::MaxReceive { window_us: (mu_window_s * US_PER_S) as u64 }
    } else {
        LinkRate::MaxReceive { window_us: u64::MAX }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct BasicDelayConfig {
    pub alpha: f64,
    pub beta: f64,
    pub target: TargetDelay,
    pub link_rate: LinkRate,
    /// Header bytes per packet beyond the MSS (a configured μ̂ counts them, S and R do not).
    pub header_bytes: f64,
    pub min_rate_fraction: f64,
    pub init_cwnd_pkts: f64,
}

impl From<&BasicDelayParams> for BasicDelayConfig {
    fn from(p: &BasicDelayParams) -> Self {
        BasicDelayConfig {
            alpha: p.alpha,
            beta: p.beta,
            target: TargetDelay::from_params(p.target_delay_ms, p.target_delay_fraction),
            link_rate: link_rate(p.mu_mbit_per_s, p.mu_window_s),
            header_bytes: p.header_bytes,
            min_rate_fraction: p.min_rate_fraction,
            init_cwnd_pkts: p.init_cwnd_pkts,
        }
    }
}

impl Default for BasicDelayConfig {
    fn default() -> Self {
        BasicDelayConfig::from(&BasicDelayParams::default())
    }
}

impl AlgorithmFactory for BasicDelayConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(BasicDelay::new(*self))
    }
}

/// The rate floor: `fraction`·μ̂, and at least two packets per RTT.
pub fn rate_floor(fraction: f64, mu: f64, mss: f64, x_s: f64) -> f64 {
    (fraction * mu).max(MIN_CWND_PKTS * mss / x_s.max(1e-6))
}

/// cwnd for a paced flow: max(2·MSS, 2·rate·x) (the window never binds before the rate).
pub fn paced_cwnd(rate: f64, x_s: f64, mss: f64) -> f64 {
    (2.0 * rate * x_s).max(MIN_CWND_PKTS * mss)
}

#[derive(Debug, Clone)]
pub struct BasicDelay {
    cfg: BasicDelayConfig,
    core: BasicDelayCore,
    xt: CrossTrafficEstimator,
    mss: f64,
    cwnd_bytes: f64,
    rate: Option<f64>,
    x_s: Option<f64>,
    x_min_s: f64,
    last_now_us: Option<u64>,
    z: f64,
    mu: f64,
}

impl BasicDelay {
    pub fn new(cfg: BasicDelayConfig) -> Self {
        BasicDelay {
            cfg,
            core: BasicDelayCore::new(cfg.alpha, cfg.beta, cfg.target, THETA_DECAY_PER_S),
            xt: CrossTrafficEstimator::new(CrossTrafficConfig { link_rate: cfg.link_rate, smooth_rates: false }),
            mss: 1448.0,
            cwnd_bytes: 0.0,
            rate: None,
            x_s: None,
            x_min_s: f64::INFINITY,
            last_now_us: None,
            z: 0.0,
            mu: 0.0,
        }
    }

    fn action(&self) -> Action {
        match (self.rate, self.x_s) {
            (Some(rate), Some(x)) => Action::cwnd(paced_cwnd(rate, x, self.mss)).with_pacing(Pacing::BytesPerSec(rate)),
            _ => Action::cwnd(self.cwnd_bytes.max(MIN_CWND_PKTS * self.mss)).with_pacing(Pacing::Off),
        }
    }
}

impl Algorithm for BasicDelay {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.xt.set_payload_fraction(cross_traffic::payload_fraction(self.mss, self.cfg.header_bytes));
        let init = start.start_cwnd_bytes() as f64;
        self.cwnd_bytes = if init > 0.0 { init } else { self.cfg.init_cwnd_pkts * self.mss }.max(MIN_CWND_PKTS * self.mss);
        if let Some(seed) = &start.seed {
            if let Some(min) = seed.min_rtt_us.filter(|&m| m > 0) {
                self.x_min_s = min as f64 / US_PER_S;
            }
            if let Some(srtt) = seed.srtt_us.filter(|&s| s > 0) {
                self.x_s = Some(srtt as f64 / US_PER_S);
                self.x_min_s = self.x_min_s.min(srtt as f64 / US_PER_S);
            }
            if let (Some(rate), Some(_)) = (seed.pacing_rate_bytes_per_s.filter(|&r| r > 0), self.x_s) {
                self.rate = Some((rate as f64).min(MAX_RATE_BYTES_PER_S));
            }
        }
        self.action().with_report(ReportPolicy::EveryUs(REPORT_INTERVAL_US))
    }

    fn on_report(&mut self, report: &Report) -> Action {
        let now = report.now_us.max(self.last_now_us.unwrap_or(0));
        let dt_s = self.last_now_us.map_or(0.0, |t| now.saturating_sub(t) as f64 / US_PER_S);
        self.last_now_us = Some(now);
        if report.mss_bytes > 0 {
            self.mss = report.mss();
            self.xt.set_payload_fraction(cross_traffic::payload_fraction(self.mss, self.cfg.header_bytes));
        }
        if let Some(rtt) = report.rtt {
            if rtt.last_us > 0 {
                self.x_s = Some(rtt.last_us as f64 / US_PER_S);
            }
            let min = if rtt.min_us > 0 { rtt.min_us } else { rtt.last_us };
            if min > 0 {
                self.x_min_s = self.x_min_s.min(min as f64 / US_PER_S);
            }
        }
        let est = self.xt.on_report(now, report.send_rate_bytes_per_s, report.recv_rate_bytes_per_s);
        self.z = est.z;
        self.mu = est.mu;
        if let (true, Some(x)) = (est.valid, self.x_s) {
            let x_min = self.x_min_s.min(x);
            let raw = self.core.rate(est.s, est.z, est.mu, x, x_min);
            let floor = rate_floor(self.cfg.min_rate_fraction, est.mu, self.mss, x);
            let rate = if raw.is_finite() { raw.max(floor) } else { floor };
            self.rate = Some(rate.min(MAX_RATE_BYTES_PER_S));
            self.core.decay(dt_s, x_min);
        }
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
        vec![
            StateVar { name: "rate_bytes_per_s", value: self.rate.unwrap_or(0.0) },
            StateVar { name: "z_hat_bytes_per_s", value: self.z },
            StateVar { name: "mu_hat_bytes_per_s", value: self.mu },
            StateVar { name: "x_min_us", value: finite(self.x_min_s * US_PER_S) },
            StateVar { name: "theta", value: finite(self.core.theta(self.x_min_s)) },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_sane, reports};
    use ccp_contract::RttStats;
    use proptest::prelude::*;

    const MSS: u32 = 1500;

    /// §15.2 test 25: the worked example of spec §6.2.
    #[test]
    fn t25_worked_example() {
        let r = eq4(6e6, 4e6, 12e6, 0.070, 0.050, 0.0125, ALPHA, BETA);
        assert!((r - 6_957_142.857).abs() < 1.0, "{r}");
        // The authors' form: rin + α(uest − zt − rin) − (uest·β/x)(x − θ·x_min), θ = 1.25.
        let authors = 6e6 + 0.8 * (12e6 - 4e6 - 6e6) - (12e6 * 0.5 / 0.070) * (0.070 - 1.25 * 0.050);
        assert!((r - authors).abs() < 1e-6);
        let core = BasicDelayCore::new(ALPHA, BETA, TargetDelay::Relative(0.25), THETA_DECAY_PER_S);
        assert!((core.rate(6e6, 4e6, 12e6, 0.070, 0.050) - r).abs() < 1e-6);
        let abs = BasicDelayCore::new(ALPHA, BETA, TargetDelay::Absolute(0.0125), THETA_DECAY_PER_S);
        assert!((abs.rate(6e6, 4e6, 12e6, 0.070, 0.050) - r).abs() < 1e-6);
    }

    /// §15.2 test 26: at x = x_min + d_t and S + ẑ = μ̂ the rate is S.
    #[test]
    fn t26_fixed_point() {
        for (s, z, x_min) in [(6e6, 6e6, 0.05), (1e6, 11e6, 0.02), (11.5e6, 0.5e6, 0.2)] {
            let core = BasicDelayCore::new(ALPHA, BETA, TargetDelay::Relative(0.25), THETA_DECAY_PER_S);
            let x = x_min * 1.25;
            assert!((core.rate(s, z, 12e6, x, x_min) - s).abs() < 1e-6);
        }
    }

    /// §15.2 test 27: the θ glide after a switch into delay mode.
    #[test]
    fn t27_theta_glide() {
        let mut core = BasicDelayCore::new(ALPHA, BETA, TargetDelay::Relative(0.25), THETA_DECAY_PER_S);
        let x_min = 0.05;
        core.enter(3.0 * x_min, x_min);
        assert!((core.theta(x_min) - 3.0).abs() < 1e-12);
        for n in 1..=400 {
            core.decay(0.01, x_min);
            let want = (3.0 - 0.005 * n as f64).max(1.25);
            assert!((core.theta(x_min) - want).abs() < 1e-9, "n {n}: {} vs {want}", core.theta(x_min));
        }
        // Time-based: 3.5 s to get back to 1.25, however the reports are spaced.
        let mut c2 = core;
        c2.enter(3.0 * x_min, x_min);
        c2.decay(3.49, x_min);
        assert!(c2.theta(x_min) > 1.25);
        c2.decay(0.02, x_min);
        assert!((c2.theta(x_min) - 1.25).abs() < 1e-12);
        // Entering with a queue below the target: no glide.
        c2.enter(1.1 * x_min, x_min);
        assert!((c2.theta(x_min) - 1.25).abs() < 1e-12);
    }

    fn rtt(us: u64) -> Option<RttStats> {
        Some(RttStats { min_us: us, max_us: us, last_us: us, srtt_us: us, mean_us: us, samples: 4 })
    }

    #[test]
    fn standalone_paces_at_eq4_and_holds_the_window_until_measured() {
        // The worked example counts μ̂, S and R in the same bytes: no header scaling.
        let f = INFO.configure(&"mu_mbit_per_s = 96\nheader_bytes = 0".parse().unwrap()).unwrap();
        let mut a = f.create();
        let init = a.init(&FlowStart::new(MSS, 15_000));
        assert_eq!(init.cwnd_bytes, Some(15_000.0));
        assert_eq!(init.pacing, Some(Pacing::Off));
        assert_eq!(init.report, Some(ReportPolicy::EveryUs(10_000)));
        // No rate sample yet: unchanged window, unpaced.
        let r0 = Report { now_us: 10_000, mss_bytes: MSS, rtt: rtt(50_000), ..Report::default() };
        assert_eq!(a.on_report(&r0).pacing, Some(Pacing::Off));
        // The worked example (x_min 50 ms from the first report, x = 70 ms): ẑ = 4e6 needs
        // R = μS/(S + z) = 7.2e6.
        let r1 = Report {
            now_us: 20_000,
            mss_bytes: MSS,
            rtt: Some(RttStats { last_us: 70_000, min_us: 70_000, ..rtt(70_000).unwrap() }),
            send_rate_bytes_per_s: Some(6_000_000),
            recv_rate_bytes_per_s: Some(7_200_000),
            ..Report::default()
        };
        let act = a.on_report(&r1);
        let Some(Pacing::BytesPerSec(rate)) = act.pacing else { panic!("{act:?}") };
        assert!((rate - 6_957_142.857).abs() < 1.0, "{rate}");
        assert!((act.cwnd_bytes.unwrap() - 2.0 * rate * 0.070).abs() < 1e-6);
        // A small share and a deep queue drive the rate to the floor (5 % of μ̂), never below
        // (S = 0.5e6 with ẑ = 10e6: R = 12e6·0.5/10.5).
        let deep = Report {
            now_us: 30_000,
            rtt: rtt(2_000_000),
            send_rate_bytes_per_s: Some(500_000),
            recv_rate_bytes_per_s: Some(571_429),
            ..r1
        };
        let Some(Pacing::BytesPerSec(rate)) = a.on_report(&deep).pacing else { panic!() };
        assert!((rate - 0.05 * 12e6).abs() < 1e-6, "{rate}");
    }

    /// A configured μ̂ counts wire bytes (1500-byte packets at MSS 1448); S and R count payload.
    #[test]
    fn configured_mu_is_scaled_to_payload_bytes() {
        let f = INFO.configure(&"mu_mbit_per_s = 96".parse().unwrap()).unwrap();
        let mut a = f.create();
        a.init(&FlowStart::new(1448, 15_000));
        let r = Report {
            now_us: 10_000,
            mss_bytes: 1448,
            rtt: rtt(50_000),
            send_rate_bytes_per_s: Some(3_000_000),
            recv_rate_bytes_per_s: Some(3_000_000),
            ..Report::default()
        };
        a.on_report(&r);
        let mu = a.state().iter().find(|v| v.name == "mu_hat_bytes_per_s").map(|v| v.value).unwrap();
        assert!((mu - 12e6 * 1448.0 / 1500.0).abs() < 1e-3, "{mu}");
    }

    #[test]
    fn standalone_estimates_mu_and_grows_from_an_empty_queue() {
        let mut a = BasicDelay::new(BasicDelayConfig::default());
        a.init(&FlowStart::new(MSS, 15_000));
        let mut rate = 300_000.0;
        for k in 1..=50u64 {
            // An uncongested path: R = S = the previous rate, RTT = x_min.
            let r = Report {
                now_us: k * 10_000,
                mss_bytes: MSS,
                rtt: rtt(50_000),
                send_rate_bytes_per_s: Some(rate as u64),
                recv_rate_bytes_per_s: Some(rate as u64),
                ..Report::default()
            };
            let Some(Pacing::BytesPerSec(next)) = a.on_report(&r).pacing else { panic!() };
            assert!(next > rate, "k {k}: the empty queue (x < x_min + d_t) makes it grow");
            rate = next;
        }
    }

    #[test]
    fn params_validate() {
        assert!(INFO.configure(&"alpha = 0".parse().unwrap()).is_err());
        assert!(INFO.configure(&"target_delay_ms = 12.5\nbeta = 0.3".parse().unwrap()).is_ok());
        assert_eq!(mbit_to_bytes_per_s(96.0), 12e6);
        assert_eq!(link_rate(96.0, 10.0), LinkRate::Fixed(12e6));
        assert_eq!(link_rate(0.0, 10.0), LinkRate::MaxReceive { window_us: 10_000_000 });
    }

    proptest! {
        #[test]
        fn never_nan_negative_or_below_two_packets(seq in reports(60), rates in prop::collection::vec((any::<Option<u64>>(), any::<Option<u64>>()), 60), mu in prop_oneof![Just(0.0), 1.0f64..1e5]) {
            let f = INFO.configure(&format!("mu_mbit_per_s = {mu}").parse().unwrap()).unwrap();
            let mut a = f.create();
            let act = a.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
            check_sane(act.cwnd_bytes, MSS, &a.state())?;
            let mut mss = MSS;
            for (r, (s, rr)) in seq.iter().zip(rates.iter().cycle()) {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                let r = Report { send_rate_bytes_per_s: *s, recv_rate_bytes_per_s: *rr, ..r.clone() };
                let act = a.on_report(&r);
                check_sane(act.cwnd_bytes, mss, &a.state())?;
                if let Some(Pacing::BytesPerSec(p)) = act.pacing {
                    prop_assert!(p.is_finite() && p > 0.0, "pacing {p}");
                }
            }
        }
    }
}
