//! Vegas: delay-based congestion avoidance (Brakmo, O'Malley, Peterson, SIGCOMM 1994), driven by
//! aggregated reports; also one of NimbusCC's delay modes (Nimbus paper §4.1, §7.4).
//!
//! Model. Once per round trip Vegas compares the throughput it expects with an empty queue,
//! cwnd/BaseRTT, with the throughput it gets, cwnd/RTT. Their difference times BaseRTT is the
//! number of its own packets sitting in the bottleneck queue:
//!
//!   diff = cwnd·(RTT − BaseRTT)/RTT   packets
//!
//! In congestion avoidance the window grows by one packet in the next round if diff < α, shrinks by
//! one if diff > β, and holds otherwise: Vegas keeps between α and β packets queued. In slow start
//! the window grows as TCP's does until diff exceeds γ; then it is set to the window that would put
//! at most one packet in the queue (cwnd·BaseRTT/RTT + 1) and slow start ends. BaseRTT is the
//! minimum RTT ever seen; RTT is the minimum sample of the round (as Linux, to filter delayed-ACK
//! noise). Constants α = 2, β = 4, γ = 1 packets (Linux tcp_vegas defaults; the paper used 1 and
//! 3; spec A18 recommends Linux's).
//!
//! Round trips without sequence numbers: a round lasts one smoothed RTT of datapath time (the
//! "srtt" window of dctcp.rs), starting at the first report. A round with fewer than three RTT
//! samples is not trusted (Linux's cntRTT ≤ 2 rule) and the window grows as Reno's instead.
//! Losses and timeouts are Reno's (Linux's tcp_vegas uses tcp_reno_ssthresh): halve once per RTT,
//! collapse on a timeout; the window never goes below two packets.
//!
//! Seeded flows (hot swap, NimbusCC entering delay mode) start in congestion avoidance from the
//! seeded window, with the seeded minimum RTT as BaseRTT.
//!
//! References: L. Brakmo, S. O'Malley, L. Peterson, "TCP Vegas: New Techniques for Congestion
//! Detection and Avoidance", SIGCOMM 1994; Linux net/ipv4/tcp_vegas.c (read for the constants and
//! the round structure only).

use std::sync::Arc;

use crate::reno::RenoConfig;
use crate::window::{RenoBased, RenoWindow, WindowConfig};
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Param, ParamError, Params, Report,
    StateVar,
};

/// Grow below this many queued packets (Linux: 2).
pub const ALPHA_PKTS: f64 = 2.0;
/// Shrink above this many queued packets (Linux: 4).
pub const BETA_PKTS: f64 = 4.0;
/// Leave slow start above this many queued packets (Linux: 1).
pub const GAMMA_PKTS: f64 = 1.0;
/// Fewer RTT samples than this in a round: use Reno's growth (Linux: cntRTT ≤ 2).
const MIN_ROUND_SAMPLES: u32 = 3;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "vegas",
    summary: "TCP Vegas: keep between alpha and beta packets queued, adjusting the window once per RTT",
    reference: "Brakmo, O'Malley, Peterson, TCP Vegas, SIGCOMM 1994; Linux tcp_vegas.c constants",
    params: VegasConfig::PARAMS,
    build,
};

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct VegasConfig {
        pub alpha_pkts: f64 = Param::float(
            ALPHA_PKTS,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1000.0),
            "packets",
            "grow the window while fewer packets than this are queued (Linux: 2)",
        ),
        pub beta_pkts: f64 = Param::float(
            BETA_PKTS,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1000.0),
            "packets",
            "shrink the window while more packets than this are queued (Linux: 4)",
        ),
        pub gamma_pkts: f64 = Param::float(
            GAMMA_PKTS,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1000.0),
            "packets",
            "leave slow start once more packets than this are queued (Linux: 1)",
        ),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let cfg = VegasConfig::from_params(p)?;
    if cfg.alpha_pkts > cfg.beta_pkts {
        return Err(p.invalid("alpha_pkts", format!("must not exceed beta_pkts ({})", cfg.beta_pkts)));
    }
    Ok(Arc::new(cfg))
}

impl AlgorithmFactory for VegasConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Vegas::new(*self))
    }
}

#[derive(Debug, Clone)]
pub struct Vegas {
    cfg: VegasConfig,
    w: RenoWindow,
    /// Minimum RTT ever seen, µs (0: none yet).
    base_rtt_us: u64,
    /// End of the current round (datapath µs); `None` before the first report.
    round_end_us: Option<u64>,
    round_min_rtt_us: u64,
    round_samples: u32,
    /// diff of the last evaluated round, packets.
    last_diff: f64,
}

impl Vegas {
    pub fn new(cfg: VegasConfig) -> Self {
        Vegas {
            cfg,
            w: RenoWindow::new(WindowConfig { init_cwnd_pkts: cfg.init_cwnd_pkts, ..RenoConfig::default().window() }),
            base_rtt_us: 0,
            round_end_us: None,
            round_min_rtt_us: u64::MAX,
            round_samples: 0,
            last_diff: 0.0,
        }
    }

    fn new_round(&mut self, now_us: u64) {
        self.round_end_us = Some(now_us.saturating_add(self.w.srtt_us().max(1)));
        self.round_min_rtt_us = u64::MAX;
        self.round_samples = 0;
    }

    /// The end-of-round adjustment; `acked` is the report's delivered bytes.
    fn end_round(&mut self, acked: u64) {
        let mss = self.w.mss();
        if self.round_samples < MIN_ROUND_SAMPLES || self.base_rtt_us == 0 || self.round_min_rtt_us == u64::MAX {
            self.w.grow(acked);
            return;
        }
        let rtt = self.round_min_rtt_us.max(self.base_rtt_us) as f64;
        let base = self.base_rtt_us as f64;
        let cwnd = self.w.cwnd_bytes() / mss;
        let diff = cwnd * (rtt - base) / rtt;
        self.last_diff = diff;
        if self.w.in_slow_start() {
            if diff > self.cfg.gamma_pkts {
                let target = cwnd * base / rtt;
                self.w.set_cwnd(cwnd.min(target + 1.0) * mss);
                self.w.set_ssthresh(self.w.cwnd_bytes() - mss);
            } else {
                self.w.slow_start(acked);
            }
        } else if diff > self.cfg.beta_pkts {
            self.w.set_cwnd(self.w.cwnd_bytes() - mss);
            self.w.set_ssthresh(self.w.ssthresh_bytes().min(self.w.cwnd_bytes() - mss));
        } else if diff < self.cfg.alpha_pkts {
            self.w.set_cwnd(self.w.cwnd_bytes() + mss);
        }
    }
}

impl RenoBased for Vegas {
    fn window(&self) -> &RenoWindow {
        &self.w
    }
    fn window_mut(&mut self) -> &mut RenoWindow {
        &mut self.w
    }
}

impl Algorithm for Vegas {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.w.start(start);
        if let Some(seed) = &start.seed {
            self.base_rtt_us = seed.min_rtt_us.or(seed.srtt_us).unwrap_or(0);
        }
        self.round_end_us = None;
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn on_report(&mut self, report: &Report) -> Action {
        let now = report.now_us;
        self.w.observe(report);
        if let Some(rtt) = report.rtt {
            let sample = if rtt.min_us > 0 { rtt.min_us } else { rtt.last_us };
            if sample > 0 {
                self.base_rtt_us = if self.base_rtt_us == 0 { sample } else { self.base_rtt_us.min(sample) };
                self.round_min_rtt_us = self.round_min_rtt_us.min(sample);
                self.round_samples = self.round_samples.saturating_add(rtt.samples.max(1));
            }
        }
        if self.round_end_us.is_none() {
            self.new_round(now);
        }

        if report.timeouts > 0 {
            self.w.timeout(now, report.inflight_bytes);
            self.new_round(now);
        } else if report.lost_pkts > 0 {
            if self.w.loss_is_new_event(now) {
                self.w.reduce(now, self.w.beta());
            }
        } else if !self.w.in_recovery(now) && RenoWindow::window_limits(report) {
            let delivered = report.delivered_bytes() as u64;
            if self.round_end_us.is_some_and(|end| now >= end) {
                self.end_round(delivered);
                self.new_round(now);
            } else if self.w.in_slow_start() {
                self.w.slow_start(delivered);
            }
        }
        if self.round_end_us.is_some_and(|end| now >= end) {
            // A round that ended during recovery or while app-limited is not evaluated.
            self.new_round(now);
        }
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.cwnd_bytes() },
            StateVar { name: "ssthresh_bytes", value: self.w.ssthresh_bytes() },
            StateVar { name: "base_rtt_us", value: self.base_rtt_us as f64 },
            StateVar { name: "diff_pkts", value: self.last_diff },
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
    const MSS_F: f64 = MSS as f64;

    fn rep(now_us: u64, acked_pkts: f64, rtt_us: u64) -> Report {
        Report {
            now_us,
            interval_us: 10_000,
            mss_bytes: MSS,
            acked_bytes: (acked_pkts * MSS_F) as u64,
            rtt: Some(RttStats { min_us: rtt_us, max_us: rtt_us, last_us: rtt_us, srtt_us: rtt_us, mean_us: rtt_us, samples: 5 }),
            ..Report::default()
        }
    }

    fn seeded(cwnd_pkts: f64, base_us: u64) -> Vegas {
        let mut v = Vegas::new(VegasConfig::default());
        v.init(&FlowStart {
            now_us: 0,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: None,
            seed: Some(Seed {
                cwnd_bytes: (cwnd_pkts * MSS_F) as u64,
                srtt_us: Some(base_us),
                min_rtt_us: Some(base_us),
                ..Seed::default()
            }),
        });
        v
    }

    fn cwnd(v: &Vegas) -> f64 {
        v.w.cwnd_bytes() / MSS_F
    }

    /// Reports every 10 ms at `rtt_us` for `dur_us`; returns the window after.
    fn run_for(v: &mut Vegas, t: &mut u64, rtt_us: u64, dur_us: u64) -> f64 {
        let end = *t + dur_us;
        while *t < end {
            *t += 10_000;
            v.on_report(&rep(*t, 2.0, rtt_us));
        }
        cwnd(v)
    }

    /// One round's worth of reports (used by the fluid run).
    fn round(v: &mut Vegas, t: &mut u64, rtt_us: u64) -> f64 {
        run_for(v, t, rtt_us, 100_000)
    }

    #[test]
    fn grows_one_packet_per_round_below_alpha() {
        // BaseRTT 100 ms; RTT 101 ms with 50 packets: diff ≈ 0.5 < 2 → +1 per round. Rounds start
        // at a report and end at the first report ≥ 101 ms later: every 110 ms, 9 in the first second.
        let mut v = seeded(50.0, 100_000);
        let mut t = 0;
        assert_eq!(run_for(&mut v, &mut t, 101_000, 1_000_000), 59.0);
        assert!((v.last_diff - 58.0 * 1.0 / 101.0).abs() < 1e-9);
    }

    #[test]
    fn shrinks_above_beta_and_holds_between() {
        // RTT 120 ms over 100: diff = cwnd·20/120 > 4 while cwnd > 24 → −1 per round (every 120 ms,
        // 8 in the first second).
        let mut v = seeded(50.0, 100_000);
        let mut t = 0;
        assert_eq!(run_for(&mut v, &mut t, 120_000, 1_000_000), 42.0);
        // RTT 106 ms: diff = 42·6/106 ≈ 2.4 ∈ [2, 4] → hold.
        assert_eq!(run_for(&mut v, &mut t, 106_000, 1_000_000), 42.0);
    }

    #[test]
    fn equilibrium_queue_is_between_alpha_and_beta() {
        // A fluid bottleneck: RTT = base + queue/μ with the queue = our excess over the BDP.
        let (base, mu_pkts_per_s) = (0.05, 1000.0);
        let mut v = seeded(20.0, 50_000);
        let mut t = 0;
        for _ in 0..400 {
            let w = cwnd(&v);
            let queue = (w - mu_pkts_per_s * base).max(0.0);
            let rtt = base + queue / mu_pkts_per_s;
            round(&mut v, &mut t, (rtt * 1e6) as u64);
        }
        let w = cwnd(&v);
        let queued = w - mu_pkts_per_s * base;
        assert!((ALPHA_PKTS - 1.0..=BETA_PKTS + 1.0).contains(&queued), "queue {queued} packets (cwnd {w})");
    }

    #[test]
    fn slow_start_exits_when_packets_queue() {
        let mut v = Vegas::new(VegasConfig::default());
        v.init(&FlowStart::new(MSS, 10_000));
        let mut t = 0;
        // No queue: slow start doubles roughly per round.
        t += 10_000;
        v.on_report(&rep(t, 10.0, 100_000));
        assert!(v.w.in_slow_start() && cwnd(&v) == 20.0);
        // Queueing appears: diff > γ at the round end (110 ms) → cwnd = min(cwnd, target + 1) and
        // slow start ends.
        for _ in 0..10 {
            t += 10_000;
            v.on_report(&rep(t, 0.0, 150_000));
        }
        assert!(!v.w.in_slow_start(), "cwnd {} ssthresh {}", cwnd(&v), v.w.ssthresh_bytes());
        assert!((cwnd(&v) - (20.0 * 100.0 / 150.0 + 1.0)).abs() < 1e-9, "{}", cwnd(&v));
        // Next round (150 ms later): diff = 14.33·50/150 ≈ 4.8 > β → one packet less.
        for _ in 0..15 {
            t += 10_000;
            v.on_report(&rep(t, 0.0, 150_000));
        }
        assert!((cwnd(&v) - (20.0 * 100.0 / 150.0)).abs() < 1e-9, "{}", cwnd(&v));
    }

    #[test]
    fn loss_halves_like_reno_and_few_samples_fall_back_to_reno() {
        let mut v = seeded(40.0, 100_000);
        let mut l = rep(10_000, 0.0, 100_000);
        l.lost_pkts = 1;
        v.on_report(&l);
        assert_eq!(cwnd(&v), 20.0);
        // A round with a single RTT sample: Reno growth for that report's ACKs.
        let mut v = seeded(40.0, 100_000);
        let mut r = rep(200_000, 40.0, 100_000);
        r.rtt = None;
        v.on_report(&rep(10_000, 0.0, 100_000));
        v.round_samples = 1;
        v.on_report(&r);
        assert!((cwnd(&v) - 41.0).abs() < 0.05, "{}", cwnd(&v));
    }

    #[test]
    fn params() {
        assert!(INFO.configure(&"alpha_pkts = 5\nbeta_pkts = 4".parse().unwrap()).is_err());
        assert!(INFO.configure(&"alpha_pkts = 1\nbeta_pkts = 3".parse().unwrap()).is_ok());
    }

    proptest! {
        #[test]
        fn never_nan_or_below_two_packets(seq in reports(60), seeded_start in any::<bool>()) {
            let mut v = if seeded_start { seeded(37.0, 40_000) } else {
                let mut v = Vegas::new(VegasConfig::default());
                v.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
                v
            };
            let mut mss = MSS;
            for r in &seq {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                let a = v.on_report(r);
                check_sane(a.cwnd_bytes, mss, &v.state())?;
            }
        }
    }
}
