//! Copa (default mode): delay-based congestion control toward a target rate 1/(δ·d_q)
//! (Arun, Balakrishnan, NSDI 2018), driven by aggregated reports; also one of NimbusCC's delay
//! modes (Nimbus paper §4.1).
//!
//! Model. With d_q = RTT_standing − RTT_min the queueing delay, Copa's target rate is
//!
//!   λ_t = 1/(δ·d_q)  packets/s,   δ = 0.5
//!
//! (the rate that maximizes log(throughput) − δ·log(delay) under a Markovian arrival model).
//! RTT_standing is the smallest RTT over the last srtt/2 (recent enough to see the queue, long
//! enough to filter ACK jitter) and RTT_min the smallest over 10 s. On each ACK the current rate
//! λ = cwnd/RTT_standing is compared with λ_t: if λ ≤ λ_t, cwnd += v/(δ·cwnd), else
//! cwnd −= v/(δ·cwnd) (packets). The velocity v starts at 1; once per RTT the direction in which
//! cwnd moved is compared with the previous RTT's, and once it has stayed the same for three RTTs v
//! doubles every RTT; a change of direction resets v to 1. Copa paces at 2·cwnd/RTT_standing.
//! Slow start doubles cwnd every RTT until λ exceeds λ_t for the first time.
//!
//! Aggregation: a report of n acknowledged packets applies n per-ACK steps in the direction the
//! report's measurements give; dW/dn = ±v/(δ·W) integrates exactly to W² ± 2nv/δ. The per-ACK rule
//! would oscillate around the equilibrium window λ_t·RTT_standing once it reached it within a
//! report; the aggregated step stops there instead. Round trips are one smoothed RTT of datapath
//! time (as vegas.rs).
//!
//! Choices where the paper leaves room:
//! - Only the default mode: Copa's own competitive-mode switch (AIMD on 1/δ when it finds
//!   buffer-filling cross traffic) is not implemented — NimbusCC decides competitiveness itself and
//!   uses Copa's default mode only (spec §6.3, A18).
//! - Loss: the default mode reacts to delay, not loss (Copa "is robust to non-congestive loss");
//!   losses are ignored. A retransmission timeout collapses the window to two packets, resets v and
//!   restarts slow start, as TCP does after an RTO.
//! - v is capped at δ·cwnd, i.e. a change of at most one window per RTT (the paper gives no cap;
//!   the authors' NimbusCC variant caps v at 32). Windows never go below two packets.
//! - Samples: each report's minimum RTT feeds both windowed-minimum filters (crate::filters).
//! - Embedding: `set_queue_target_us` excludes a target queueing delay from d_q (0 standalone);
//!   NimbusCC sets it to its d_t so that Eq. 1 keeps a non-empty queue (see nimbus).
//!
//! Reference: V. Arun, H. Balakrishnan, "Copa: Practical Delay-Based Congestion Control for the
//! Internet", NSDI 2018, §2 (as summarized in specs/nimbus.md §6.3).

use std::sync::Arc;

use crate::filters::Windowed;
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Pacing, Param, Report, StateVar,
    MIN_CWND_PKTS,
};

/// δ of the default mode (Copa §2: 0.5).
pub const DELTA: f64 = 0.5;
/// RTT_min is the minimum over this window, µs (Copa §2: 10 s).
pub const MIN_RTT_WINDOW_US: u64 = 10_000_000;
/// v doubles only after the direction has stayed the same for this many RTTs (Copa §2.1).
const SAME_DIRECTION_RTTS: u32 = 3;
/// Pacing rate = this × cwnd/RTT_standing (Copa §2).
pub const PACING_GAIN: f64 = 2.0;
/// Smoothing gain of srtt when the datapath gives none, per sample (RFC 6298: 1/8).
const SRTT_GAIN: f64 = 0.125;

declare_params! {
    /// Copa's parameters, as declared; [`CopaConfig`] is what they configure.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct CopaParams {
        pub delta: f64 = Param::float(
            DELTA,
            Bound::Exclusive(0.0),
            Bound::Inclusive(10.0),
            "",
            "delta of the target rate 1/(delta·d_q) (Copa default mode: 0.5)",
        ),
        pub min_rtt_window_s: f64 = Param::float(
            MIN_RTT_WINDOW_US as f64 / 1e6,
            Bound::Exclusive(0.0),
            Bound::Inclusive(3600.0),
            "s",
            "window of the RTT_min filter (Copa: 10 s)",
        ),
        pub pacing_gain: f64 = Param::float(
            PACING_GAIN,
            Bound::Exclusive(0.0),
            Bound::Inclusive(10.0),
            "",
            "pace at this times cwnd/RTT_standing (Copa: 2)",
        ),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "copa",
    summary: "Copa default mode: move cwnd toward the target rate 1/(delta·d_q) with a velocity that doubles",
    reference: "Arun, Balakrishnan, Copa, NSDI 2018 §2 (default mode only; specs/nimbus.md §6.3)",
    params: CopaParams::PARAMS,
    build: |p| Ok(Arc::new(CopaConfig::from(&CopaParams::from_params(p)?))),
};

#[derive(Debug, Clone, Copy)]
pub struct CopaConfig {
    pub delta: f64,
    pub min_rtt_window_us: u64,
    pub pacing_gain: f64,
    pub init_cwnd_pkts: f64,
}

impl From<&CopaParams> for CopaConfig {
    fn from(p: &CopaParams) -> Self {
        CopaConfig {
            delta: p.delta,
            min_rtt_window_us: (p.min_rtt_window_s * 1e6) as u64,
            pacing_gain: p.pacing_gain,
            init_cwnd_pkts: p.init_cwnd_pkts,
        }
    }
}

impl Default for CopaConfig {
    fn default() -> Self {
        CopaConfig::from(&CopaParams::default())
    }
}

impl AlgorithmFactory for CopaConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Copa::new(*self))
    }
}

/// Direction the window moved over a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

#[derive(Debug, Clone)]
pub struct Copa {
    cfg: CopaConfig,
    mss: f64,
    /// Window, packets.
    cwnd: f64,
    slow_start: bool,
    velocity: f64,
    rtt_min: Windowed,
    rtt_standing: Windowed,
    srtt_us: f64,
    /// End of the current round, the window at its start, and the previous rounds' direction.
    round_end_us: Option<u64>,
    round_start_cwnd: f64,
    direction: Option<Direction>,
    same_direction_rounds: u32,
    /// d_q of the last report, seconds.
    d_q_s: f64,
    standing_us: f64,
    /// Queueing delay not counted in d_q, µs (0 for Copa as published; see `set_queue_target_us`).
    queue_target_us: f64,
}

impl Copa {
    pub fn new(cfg: CopaConfig) -> Self {
        Copa {
            cfg,
            mss: 1448.0,
            cwnd: cfg.init_cwnd_pkts,
            slow_start: true,
            velocity: 1.0,
            rtt_min: Windowed::min(),
            rtt_standing: Windowed::min(),
            srtt_us: 0.0,
            round_end_us: None,
            round_start_cwnd: cfg.init_cwnd_pkts,
            direction: None,
            same_direction_rounds: 0,
            d_q_s: 0.0,
            standing_us: 0.0,
            queue_target_us: 0.0,
        }
    }

    /// Makes d_q the queueing delay above `us` µs: Copa then holds about `us` of standing queue plus
    /// its own 1/δ packets. NimbusCC uses this to keep the non-empty queue its cross-traffic
    /// estimate needs (the authors' Copa variant measures d_q above 1.2·RTT_min for the same
    /// reason). Standalone Copa leaves it at 0.
    pub fn set_queue_target_us(&mut self, us: f64) {
        self.queue_target_us = if us.is_finite() { us.max(0.0) } else { 0.0 };
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd * self.mss
    }

    fn action(&self) -> Action {
        let a = Action::cwnd(self.cwnd_bytes());
        if self.standing_us > 0.0 {
            a.with_pacing(Pacing::BytesPerSec(self.cfg.pacing_gain * self.cwnd_bytes() / (self.standing_us / 1e6)))
        } else {
            a.with_pacing(Pacing::Off)
        }
    }

    /// Once per round: the velocity rule.
    fn end_round(&mut self, now_us: u64) {
        let dir = if self.cwnd >= self.round_start_cwnd { Direction::Up } else { Direction::Down };
        if self.direction == Some(dir) {
            self.same_direction_rounds = self.same_direction_rounds.saturating_add(1);
            if self.same_direction_rounds >= SAME_DIRECTION_RTTS {
                self.velocity = (2.0 * self.velocity).min((self.cfg.delta * self.cwnd).max(1.0));
            }
        } else {
            self.velocity = 1.0;
            self.same_direction_rounds = 1;
        }
        self.direction = Some(dir);
        self.round_start_cwnd = self.cwnd;
        self.round_end_us = Some(now_us.saturating_add(self.srtt_us.max(1.0) as u64));
    }

    /// The window λ_t·RTT_standing at which the rule changes direction, packets (∞ with no queue).
    fn equilibrium(&self) -> f64 {
        if self.d_q_s > 0.0 {
            (self.standing_us / 1e6) / (self.cfg.delta * self.d_q_s)
        } else {
            f64::INFINITY
        }
    }

    fn grow(&mut self, n: f64) {
        if n <= 0.0 || self.standing_us <= 0.0 {
            return;
        }
        let target = self.equilibrium();
        if self.slow_start {
            if self.cwnd < target {
                self.cwnd = (self.cwnd + n).min(target.max(self.cwnd));
                return;
            }
            self.slow_start = false;
        }
        let step = 2.0 * n * self.velocity / self.cfg.delta;
        let w2 = self.cwnd * self.cwnd;
        self.cwnd = if self.cwnd <= target {
            (w2 + step).sqrt().min(target.max(self.cwnd))
        } else {
            (w2 - step).max(0.0).sqrt().max(target.min(self.cwnd))
        };
        self.cwnd = self.cwnd.max(MIN_CWND_PKTS);
    }
}

impl Algorithm for Copa {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        let init = start.start_cwnd_bytes() as f64 / self.mss;
        self.cwnd = if init > 0.0 { init } else { self.cfg.init_cwnd_pkts }.max(MIN_CWND_PKTS);
        self.round_start_cwnd = self.cwnd;
        if let Some(seed) = &start.seed {
            // A flow taken over mid-life: no slow start, velocity 1, the seeded RTTs.
            self.slow_start = false;
            if let Some(min) = seed.min_rtt_us.filter(|&m| m > 0) {
                self.rtt_min.update(start.now_us, min as f64, self.cfg.min_rtt_window_us);
            }
            if let Some(srtt) = seed.srtt_us.filter(|&s| s > 0) {
                self.srtt_us = srtt as f64;
            }
        }
        self.action()
    }

    fn on_report(&mut self, report: &Report) -> Action {
        let now = report.now_us;
        if report.mss_bytes > 0 {
            let mss = report.mss();
            self.cwnd = (self.cwnd * self.mss / mss).max(MIN_CWND_PKTS);
            self.round_start_cwnd *= self.mss / mss;
            self.mss = mss;
        }
        if let Some(rtt) = report.rtt {
            let sample = if rtt.min_us > 0 { rtt.min_us } else { rtt.last_us };
            if sample > 0 {
                let s = sample as f64;
                self.srtt_us = if rtt.srtt_us > 0 {
                    rtt.srtt_us as f64
                } else if self.srtt_us > 0.0 {
                    self.srtt_us + SRTT_GAIN * (s - self.srtt_us)
                } else {
                    s
                };
                let min = self.rtt_min.update(now, s, self.cfg.min_rtt_window_us);
                let standing = self.rtt_standing.update(now, s, (self.srtt_us / 2.0) as u64);
                self.standing_us = standing.max(min);
                self.d_q_s = (self.standing_us - min - self.queue_target_us).max(0.0) / 1e6;
            }
        }
        if self.round_end_us.is_none() {
            self.round_end_us = Some(now.saturating_add(self.srtt_us.max(1.0) as u64));
        }
        if report.timeouts > 0 {
            self.cwnd = MIN_CWND_PKTS;
            self.velocity = 1.0;
            self.slow_start = true;
            self.direction = None;
            self.same_direction_rounds = 0;
            self.round_start_cwnd = self.cwnd;
        } else if !report.app_limited {
            self.grow(report.acked_bytes as f64 / self.mss);
        }
        if self.round_end_us.is_some_and(|end| now >= end) {
            self.end_round(now);
        }
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
        vec![
            StateVar { name: "cwnd_bytes", value: self.cwnd_bytes() },
            StateVar { name: "velocity", value: self.velocity },
            StateVar { name: "d_q_us", value: finite(self.d_q_s * 1e6) },
            StateVar { name: "rtt_standing_us", value: self.standing_us },
            StateVar { name: "slow_start", value: if self.slow_start { 1.0 } else { 0.0 } },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_sane, reports};
    use ccp_contract::{RttStats, Seed};
    use proptest::prelude::*;

    const MSS: u32 = 1000;

    fn rep(now_us: u64, acked_pkts: f64, rtt_us: u64) -> Report {
        Report {
            now_us,
            interval_us: 10_000,
            mss_bytes: MSS,
            acked_bytes: (acked_pkts * f64::from(MSS)) as u64,
            rtt: Some(RttStats { min_us: rtt_us, max_us: rtt_us, last_us: rtt_us, srtt_us: rtt_us, mean_us: rtt_us, samples: 5 }),
            ..Report::default()
        }
    }

    fn seeded(cwnd: f64, min_rtt_us: u64) -> Copa {
        let mut c = Copa::new(CopaConfig::default());
        c.init(&FlowStart {
            now_us: 0,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: None,
            seed: Some(Seed {
                cwnd_bytes: (cwnd * 1000.0) as u64,
                min_rtt_us: Some(min_rtt_us),
                srtt_us: Some(min_rtt_us),
                ..Seed::default()
            }),
        });
        c
    }

    #[test]
    fn per_ack_rule_integrates_exactly() {
        // No queue (d_q = 0): λ_t = ∞, increase. n packets at v = 1, δ = 0.5: W² + 4n.
        let mut c = seeded(20.0, 50_000);
        c.on_report(&rep(10_000, 5.0, 50_000));
        assert!((c.cwnd - (400.0f64 + 20.0).sqrt()).abs() < 1e-12, "{}", c.cwnd);
        // Per-ACK steps W ← W + v/(δW), 5 of them, agree to first order.
        let mut w = 20.0;
        for _ in 0..5 {
            w += 1.0 / (0.5 * w);
        }
        assert!((c.cwnd - w).abs() < 5e-3, "{} vs {w}", c.cwnd);
    }

    #[test]
    fn converges_to_the_target_rate() {
        // A fluid bottleneck of 1000 pkt/s, 50 ms base RTT, one Copa flow: it settles where its rate
        // λ = cwnd/RTT_standing equals its target 1/(δ·d_q), with a small standing queue and the
        // link full.
        let (mu, base) = (1000.0, 0.05);
        let mut c = seeded(10.0, 50_000);
        let mut now = 0;
        let mut queue = 0.0f64;
        let (mut q_sum, mut ratio_sum, mut n) = (0.0, 0.0, 0.0);
        for k in 0..6000 {
            now += 10_000;
            let rate = c.cwnd / (base + queue / mu);
            queue = (queue + (rate - mu) * 0.01).max(0.0);
            let rtt = base + queue / mu;
            c.on_report(&rep(now, rate.min(mu) * 0.01, (rtt * 1e6) as u64));
            if k > 3000 {
                q_sum += queue;
                let lambda = c.cwnd / (c.standing_us / 1e6);
                ratio_sum += lambda * c.cfg.delta * c.d_q_s;
                n += 1.0;
            }
        }
        let mean_q = q_sum / n;
        assert!(mean_q < 0.25 * mu * base, "mean queue {mean_q} packets");
        let util = c.cwnd / (base + mean_q / mu) / mu;
        assert!(util > 0.95, "utilization {util}");
        let ratio = ratio_sum / n;
        assert!((ratio - 1.0).abs() < 0.15, "λ/λ_t = {ratio}");
    }

    #[test]
    fn velocity_doubles_after_three_same_direction_rounds_and_resets() {
        let mut c = seeded(20.0, 100_000);
        let mut now = 0;
        let mut v = vec![];
        for _ in 0..8 {
            for _ in 0..10 {
                now += 10_000;
                c.on_report(&rep(now, 1.0, 100_000));
            }
            v.push(c.velocity);
        }
        // Rounds end at 110, 210, … ms: the first sets the direction, the third same-direction
        // round doubles v.
        assert_eq!(&v[..4], &[1.0, 1.0, 1.0, 2.0], "{v:?}");
        assert!(v[7] > v[3], "{v:?}");
        // The queue builds: decrease, a change of direction resets v.
        for _ in 0..60 {
            now += 10_000;
            c.on_report(&rep(now, 1.0, 200_000));
        }
        assert_eq!(c.velocity, 1.0);
    }

    #[test]
    fn slow_start_until_the_target_then_pacing() {
        let mut c = Copa::new(CopaConfig::default());
        let a = c.init(&FlowStart::new(MSS, 10_000));
        assert_eq!(a.pacing, Some(Pacing::Off));
        let a = c.on_report(&rep(10_000, 10.0, 50_000));
        assert_eq!(c.cwnd, 20.0, "slow start");
        let Some(Pacing::BytesPerSec(p)) = a.pacing else { panic!() };
        assert!((p - 2.0 * 20_000.0 / 0.05).abs() < 1e-6);
        // A 10 ms queue: once the 50 ms sample has left the srtt/2 window, the target window is
        // 0.06/(0.5·0.01) = 12 packets < cwnd: slow start ends and the window decreases.
        c.on_report(&rep(20_000, 10.0, 60_000));
        assert_eq!(c.cwnd, 30.0, "the 50 ms sample is still standing");
        c.on_report(&rep(90_000, 10.0, 60_000));
        assert!(!c.slow_start);
        assert!(c.cwnd < 30.0);
    }

    #[test]
    fn losses_ignored_timeouts_collapse() {
        let mut c = seeded(30.0, 50_000);
        let mut l = rep(10_000, 0.0, 50_000);
        l.lost_pkts = 5;
        c.on_report(&l);
        assert_eq!(c.cwnd, 30.0);
        l.timeouts = 1;
        c.on_report(&l);
        assert_eq!(c.cwnd, 2.0);
        assert!(c.slow_start);
    }

    proptest! {
        #[test]
        fn never_nan_or_below_two_packets(seq in reports(60), seeded_start in any::<bool>()) {
            let mut c = if seeded_start { seeded(37.0, 40_000) } else {
                let mut c = Copa::new(CopaConfig::default());
                c.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
                c
            };
            let mut mss = MSS;
            for r in &seq {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                let a = c.on_report(r);
                check_sane(a.cwnd_bytes, mss, &c.state())?;
                if let Some(Pacing::BytesPerSec(p)) = a.pacing {
                    prop_assert!(p.is_finite() && p > 0.0);
                }
            }
        }
    }
}
