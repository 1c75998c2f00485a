//! QCN reaction point: the sender half of Quantized Congestion Notification.
//!
//! Model (Alizadeh thesis §5.2.2, Fig. 5.2; specs/dc.md §4.3). A congestion point samples arriving
//! packets and, when F_b = Q_off + w·Q_δ > 0, sends the sampled packet's source a congestion
//! notification message (CNM) carrying F_b quantized to 6 bits. The source's rate limiter — the
//! reaction point — keeps a current rate R_C and a target rate R_T:
//!
//!   on a CNM:        R_T ← R_C;  R_C ← R_C·(1 − G_d·F_b)                         (eqs. 5.1, 5.2)
//!
//! with G_d·F_b,max = ½, so one message cuts at most half. There is no positive feedback: the rate
//! recovers on its own, self-clocked by a byte counter. Every BC_LIMIT = 150 KB is one cycle:
//!
//!   Fast Recovery (cycles 1..=5):   R_C ← (R_C + R_T)/2           (binary search back to R_T)
//!   Active Increase (cycles 6..):   R_T ← R_T + R_AI;  R_C ← (R_C + R_T)/2
//!
//! After k FR cycles the gap R_T − R_C is 1/2^k of the cut (dc.md §4.4 golden trajectory).
//! QCN-AIMD (thesis §5.4.1, dc.md §4.5), the thesis's ablation, has no R_T and no fast recovery:
//! every cycle adds R_AI to R_C.
//!
//! [`ReactionPoint`] is that state machine in bits per second, with no notion of time: the thesis
//! model has no timer (Remark 5.2). It serves two algorithms:
//! - `qcn` (this file): a flow whose rate is the reaction point's, for simulated QCN fabrics. The
//!   thesis counts bytes *sent*; reports carry bytes *acknowledged*, one RTT later, which is the
//!   same count in steady state (stated in the `qcn` summary). The flow starts at line rate, as a
//!   QCN source with no rate limiter does, and its window never binds (a window of
//!   rate × `window_rtt_us`, for the datapath's sake).
//! - Annulus's near-source loop (annulus/), which clocks the cycles by acknowledged bytes on
//!   purpose (annulus.md §4.2.1 item 2) and halves the cycle in active increase (§4.2.2, [Q]).
//!
//! Choices where the thesis is silent (dc.md §8 A25): R_C and R_T are capped at the line rate;
//! R_C is floored at `min_rate` (802.1Qau rpgMinRate, 5 Mbit/s); consecutive CNMs during fast
//! recovery each apply (5.1), ratcheting R_T down as the thesis states. Timer, hyper-active
//! increase, target-rate reduction and the randomized byte counter of 802.1Qau (dc.md §4.7) are not
//! in the thesis model; only hyper-active increase is offered (`hai_rate_bps`, off), because
//! Annulus names it as an option.
//!
//! References: M. Alizadeh, "Packet Transport Mechanisms for Data Center Networks", PhD thesis,
//! Stanford, 2013, Ch. 5 (as extracted in specs/dc.md §4.3–§4.6, §8 A20–A25, §9.3 T-Q2…T-Q6);
//! IEEE 802.1Qau-2010 MIB defaults for the floor.

use std::sync::Arc;

use ccp_contract::{
    declare_params, param_choice, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, NetworkFeedback, Pacing,
    Param, ParamError, Params, Report, ReportPolicy, StateVar,
};

/// Decrease gain G_d, per unit of quantized F_b (thesis: 1/128, so G_d·F_b,max = ½).
pub const GD: f64 = 1.0 / 128.0;
/// Bytes per byte-counter cycle (thesis: 150 KB = 100 × 1500 B).
pub const BC_LIMIT_BYTES: f64 = 150_000.0;
/// Fast-recovery cycles before active increase (thesis: 5).
pub const FR_CYCLES: u32 = 5;
/// Active-increase step, bits/s (thesis: 5 Mbit/s).
pub const R_AI_BPS: f64 = 5e6;
/// Floor of the current rate, bits/s (802.1Qau rpgMinRate, dc.md §4.7).
pub const MIN_RATE_BPS: f64 = 5e6;
/// Largest quantized feedback (6 bits).
pub const QFB_MAX: u8 = 63;

param_choice! {
    /// The reaction point's rules: QCN proper or the AIMD ablation.
    pub enum RpVariant {
        /// Fast recovery then active increase, averaging toward R_T (thesis §5.2.2).
        Qcn = "qcn",
        /// No R_T, no averaging: every cycle adds R_AI to R_C (thesis §5.4.1).
        Aimd = "aimd",
    }
}

/// Constants of one reaction point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RpConfig {
    pub variant: RpVariant,
    pub gd: f64,
    pub bc_limit_bytes: f64,
    pub fr_cycles: u32,
    pub r_ai_bps: f64,
    /// Hyper-active increase step, bits/s, used instead of R_AI once more than 2·FR cycles passed
    /// since the last cut (annulus.md §4.2.2: an option; 802.1Qau's HAI needs a timer stage this
    /// model has not). `None`: off, as in the thesis.
    pub hai_rate_bps: Option<f64>,
    /// Cycles in active increase last half as many bytes (802.1Qau, used by Annulus; not in the
    /// thesis model).
    pub halve_cycle_in_ai: bool,
    pub line_rate_bps: f64,
    pub min_rate_bps: f64,
}

impl Default for RpConfig {
    /// The thesis model (dc.md §4.6) on a 10 Gbit/s link: `qcn`'s declared defaults.
    fn default() -> Self {
        RpConfig::from(&QcnParams::default())
    }
}

impl From<&QcnParams> for RpConfig {
    fn from(p: &QcnParams) -> Self {
        RpConfig {
            variant: p.variant,
            gd: p.gd,
            bc_limit_bytes: p.bc_limit_bytes,
            fr_cycles: p.fr_cycles,
            r_ai_bps: p.r_ai_mbps * 1e6,
            hai_rate_bps: None,
            halve_cycle_in_ai: false,
            line_rate_bps: p.line_rate_gbps * 1e9,
            min_rate_bps: p.min_rate_mbps * 1e6,
        }
    }
}

/// The QCN reaction point state machine (thesis mode), rates in bits/s.
#[derive(Debug, Clone, PartialEq)]
pub struct ReactionPoint {
    cfg: RpConfig,
    /// Current rate R_C, bits/s.
    rc_bps: f64,
    /// Target rate R_T, bits/s.
    rt_bps: f64,
    /// Bytes counted toward the current cycle.
    bc_bytes: f64,
    /// Cycles completed since the last CNM.
    cycles: u32,
    cnms: u64,
}

impl ReactionPoint {
    /// A reaction point with R_C = R_T = `rate_bps` (capped to [min, line]).
    pub fn new(cfg: RpConfig, rate_bps: f64) -> Self {
        let r = clamp_rate(rate_bps, &cfg);
        ReactionPoint { cfg, rc_bps: r, rt_bps: r, bc_bytes: 0.0, cycles: 0, cnms: 0 }
    }

    pub fn config(&self) -> &RpConfig {
        &self.cfg
    }

    /// Current rate R_C, bits/s.
    pub fn rate_bps(&self) -> f64 {
        self.rc_bps
    }

    /// Target rate R_T, bits/s.
    pub fn target_bps(&self) -> f64 {
        self.rt_bps
    }

    /// Cycles completed since the last CNM.
    pub fn cycles(&self) -> u32 {
        self.cycles
    }

    /// Bytes counted toward the current cycle.
    pub fn counted_bytes(&self) -> f64 {
        self.bc_bytes
    }

    pub fn cnms(&self) -> u64 {
        self.cnms
    }

    /// True once the rate has recovered to the line rate (QCN then releases its rate limiter).
    pub fn at_line_rate(&self) -> bool {
        self.rc_bps >= self.cfg.line_rate_bps
    }

    /// Sets R_C (e.g. to the rate the flow actually sends at before a cut, annulus.md §4.2.3, or
    /// a proportional drop from another loop). R_T is left alone.
    pub fn set_rate_bps(&mut self, rate_bps: f64) {
        self.rc_bps = clamp_rate(rate_bps, &self.cfg);
    }

    /// A CNM with quantized feedback `qfb` (values above 63 count as 63; 0 cuts nothing but still
    /// restarts recovery, as in the thesis). Returns the factor R_C was multiplied by.
    pub fn on_cnm(&mut self, qfb: u8) -> f64 {
        let before = self.rc_bps;
        let fb = f64::from(qfb.min(QFB_MAX));
        self.rt_bps = self.rc_bps;
        self.rc_bps = (self.rc_bps * (1.0 - self.cfg.gd * fb)).max(self.cfg.min_rate_bps).min(self.cfg.line_rate_bps);
        self.bc_bytes = 0.0;
        self.cycles = 0;
        self.cnms += 1;
        if before > 0.0 {
            self.rc_bps / before
        } else {
            1.0
        }
    }

    /// Length of the cycle now running, bytes.
    pub fn cycle_bytes(&self) -> f64 {
        if self.in_active_increase() && self.cfg.halve_cycle_in_ai {
            self.cfg.bc_limit_bytes / 2.0
        } else {
            self.cfg.bc_limit_bytes
        }
    }

    /// Counts `bytes` toward the byte counter and runs every cycle they complete. Batch-invariant:
    /// the same bytes in one call or many give the same state at cycle boundaries.
    pub fn on_bytes(&mut self, bytes: f64) {
        if bytes.is_nan() || bytes <= 0.0 {
            return;
        }
        self.bc_bytes += bytes;
        loop {
            let limit = self.cycle_bytes();
            if self.bc_bytes < limit || self.at_line_rate() {
                break;
            }
            self.bc_bytes -= limit;
            self.cycle();
        }
        if self.at_line_rate() {
            self.bc_bytes = 0.0;
        }
    }

    /// One increase event from a clock other than the byte counter (802.1Qau's RP timer), counted
    /// in the same stage as a byte-counter cycle (dc.md §4: "each expiry is an increase event, like
    /// a BC cycle"). Nothing at the line rate.
    pub fn increase_event(&mut self) {
        if !self.at_line_rate() {
            self.cycle();
        }
    }

    /// True once fast recovery is over (cycles and timer periods are halved from here when
    /// `halve_cycle_in_ai`).
    pub fn in_active_increase(&self) -> bool {
        self.cycles >= self.cfg.fr_cycles || self.cfg.variant == RpVariant::Aimd
    }

    /// The end of one byte-counter cycle.
    fn cycle(&mut self) {
        self.cycles = self.cycles.saturating_add(1);
        let line = self.cfg.line_rate_bps;
        match self.cfg.variant {
            RpVariant::Aimd => {
                self.rc_bps = (self.rc_bps + self.cfg.r_ai_bps).min(line);
                self.rt_bps = self.rc_bps;
            }
            RpVariant::Qcn => {
                if self.cycles > self.cfg.fr_cycles {
                    let step = match self.cfg.hai_rate_bps {
                        Some(hai) if self.cycles > 2 * self.cfg.fr_cycles => hai,
                        _ => self.cfg.r_ai_bps,
                    };
                    self.rt_bps = (self.rt_bps + step).min(line);
                }
                self.rc_bps = ((self.rc_bps + self.rt_bps) / 2.0).min(line);
            }
        }
    }
}

fn clamp_rate(rate_bps: f64, cfg: &RpConfig) -> f64 {
    if rate_bps.is_nan() {
        cfg.line_rate_bps
    } else {
        rate_bps.clamp(cfg.min_rate_bps.min(cfg.line_rate_bps), cfg.line_rate_bps)
    }
}

// ----- the `qcn` algorithm: a flow paced by a reaction point -----

/// The window the `qcn` algorithm sets, as a multiple of rate × this RTT, so it never binds.
const WINDOW_RTT_US: f64 = 1_000.0;
/// Report interval asked of the datapath, µs: the byte counter needs no finer clock, and CNMs
/// arrive in their own early reports.
const REPORT_INTERVAL_US: u64 = 100;

declare_params! {
    /// The `qcn` algorithm's parameters: its reaction point's ([`RpConfig`]).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct QcnParams {
        pub variant: RpVariant = Param::choice(
            "qcn",
            "\"qcn\": fast recovery + active increase (thesis §5.2.2); \"aimd\": QCN-AIMD ablation (§5.4.1)",
        ),
        pub gd: f64 = Param::float(GD, Bound::Exclusive(0.0), Bound::Inclusive(1.0 / 63.0), "", "decrease gain per unit of quantized Fb (thesis 1/128)"),
        pub bc_limit_bytes: f64 = Param::float(
            BC_LIMIT_BYTES,
            Bound::Inclusive(1_000.0),
            Bound::Inclusive(1e9),
            "bytes",
            "byte-counter cycle (thesis 150 KB)",
        ),
        pub fr_cycles: u32 = Param::int(FR_CYCLES as i64, 0, 100, "cycles", "fast-recovery cycles before active increase (thesis 5)"),
        pub r_ai_mbps: f64 = Param::float(
            R_AI_BPS / 1e6,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1e5),
            "Mbit/s",
            "active-increase step (thesis 5 Mbit/s)",
        ),
        pub line_rate_gbps: f64 = Param::float(10.0, Bound::Exclusive(0.0), Bound::Inclusive(1e4), "Gbit/s", "line rate: the start rate and the cap"),
        pub min_rate_mbps: f64 = Param::float(
            MIN_RATE_BPS / 1e6,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1e5),
            "Mbit/s",
            "floor of the rate (802.1Qau rpgMinRate 5 Mbit/s)",
        ),
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "qcn",
    summary: "QCN reaction point (thesis model): rate cut by Gd*Fb on each CNM, fast recovery and active increase on a byte counter of acknowledged bytes; for QCN fabrics in the simulator",
    reference: "Alizadeh, PhD thesis 2013 Ch. 5 (specs/dc.md §4.3–4.6, T-Q2…T-Q6)",
    params: QcnParams::PARAMS,
    build,
};

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let rp = RpConfig::from(&QcnParams::from_params(p)?);
    if rp.min_rate_bps > rp.line_rate_bps {
        return Err(p.invalid("min_rate_mbps", format!("{} Mbit/s exceeds the line rate", rp.min_rate_bps / 1e6)));
    }
    Ok(Arc::new(QcnConfig { rp }))
}

#[derive(Debug, Clone, Copy)]
pub struct QcnConfig {
    pub rp: RpConfig,
}

impl AlgorithmFactory for QcnConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Qcn::new(*self))
    }
}

/// A flow whose sending rate is a QCN reaction point's.
#[derive(Debug, Clone)]
pub struct Qcn {
    rp: ReactionPoint,
    mss: f64,
}

impl Qcn {
    pub fn new(cfg: QcnConfig) -> Self {
        Qcn { rp: ReactionPoint::new(cfg.rp, cfg.rp.line_rate_bps), mss: 1448.0 }
    }

    fn action(&self) -> Action {
        let rate_bytes = self.rp.rate_bps() / 8.0;
        let window = (rate_bytes * WINDOW_RTT_US / 1e6).max(4.0 * self.mss);
        Action::cwnd(window).with_pacing(Pacing::BytesPerSec(rate_bytes))
    }
}

impl Algorithm for Qcn {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.action().with_report(ReportPolicy::EveryUs(REPORT_INTERVAL_US))
    }

    fn on_report(&mut self, report: &Report) -> Action {
        self.mss = report.mss();
        self.rp.on_bytes(report.acked_bytes as f64);
        if let Some(NetworkFeedback::Qcn { fb_quantized, .. }) = report.feedback {
            self.rp.on_cnm(fb_quantized);
        }
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "rate_bps", value: self.rp.rate_bps() },
            StateVar { name: "target_bps", value: self.rp.target_bps() },
            StateVar { name: "cycles", value: f64::from(self.rp.cycles()) },
            StateVar { name: "cnms", value: self.rp.cnms() as f64 },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = 1e9;
    const TOL_BPS: f64 = 1e-12 * G;

    fn rp_at(rate_gbps: f64) -> ReactionPoint {
        ReactionPoint::new(RpConfig::default(), rate_gbps * G)
    }

    fn assert_gbps(actual_bps: f64, expected_gbps: f64, what: &str) {
        assert!((actual_bps - expected_gbps * G).abs() <= TOL_BPS, "{what}: {} Gbit/s, expected {expected_gbps}", actual_bps / G);
    }

    /// T-Q2: the golden trajectory of dc.md §4.4, with cycle boundaries at exactly 150,000 B.
    #[test]
    fn t_q2_golden_trajectory() {
        let mut rp = rp_at(5.0);
        rp.on_cnm(32);
        assert_gbps(rp.rate_bps(), 3.75, "after the CNM");
        assert_gbps(rp.target_bps(), 5.0, "R_T after the CNM");
        let expected = [
            (5.0, 4.375),
            (5.0, 4.6875),
            (5.0, 4.84375),
            (5.0, 4.921875),
            (5.0, 4.9609375),
            (5.005, 4.98296875),
            (5.010, 4.996484375),
            (5.015, 5.0057421875),
        ];
        for (i, (rt, rc)) in expected.into_iter().enumerate() {
            rp.on_bytes(149_999.0);
            assert_eq!(rp.cycles(), i as u32, "a cycle ended before 150,000 B");
            rp.on_bytes(1.0);
            assert_eq!(rp.cycles(), i as u32 + 1);
            assert_gbps(rp.target_bps(), rt, &format!("R_T after cycle {}", i + 1));
            assert_gbps(rp.rate_bps(), rc, &format!("R_C after cycle {}", i + 1));
        }
    }

    /// T-Q3: a second CNM right after FR2 restarts from R_T ← R_C.
    #[test]
    fn t_q3_cnm_during_fast_recovery_restarts_it() {
        let mut rp = rp_at(5.0);
        rp.on_cnm(32);
        rp.on_bytes(2.0 * BC_LIMIT_BYTES);
        assert_gbps(rp.rate_bps(), 4.6875, "after FR2");
        rp.on_cnm(16);
        assert_gbps(rp.target_bps(), 4.6875, "R_T");
        assert_gbps(rp.rate_bps(), 4.1015625, "R_C");
        assert_eq!(rp.cycles(), 0);
        assert_eq!(rp.counted_bytes(), 0.0);
        rp.on_bytes(BC_LIMIT_BYTES);
        assert_gbps(rp.rate_bps(), 4.39453125, "next cycle");
    }

    /// T-Q4: the largest cut is 65/128, and no single CNM cuts more than half.
    #[test]
    fn t_q4_max_cut() {
        let mut rp = rp_at(5.0);
        let f = rp.on_cnm(63);
        assert!((f - 65.0 / 128.0).abs() < 1e-15, "{f}");
        assert_gbps(rp.rate_bps(), 5.0 * 65.0 / 128.0, "R_C");
        for q in 0..=255u8 {
            let mut rp = rp_at(5.0);
            assert!(rp.on_cnm(q) >= 0.5, "qFb {q} cut more than half");
        }
    }

    /// T-Q5: R_C and R_T never exceed the line rate.
    #[test]
    fn t_q5_caps_at_line_rate() {
        let mut rp = rp_at(9.99);
        rp.on_cnm(1);
        for _ in 0..10_000 {
            rp.on_bytes(BC_LIMIT_BYTES);
            assert!(rp.rate_bps() <= 10.0 * G && rp.target_bps() <= 10.0 * G);
        }
        assert!(rp.at_line_rate());
        assert_eq!(ReactionPoint::new(RpConfig::default(), 50.0 * G).rate_bps(), 10.0 * G);
    }

    /// T-Q6: QCN-AIMD adds R_AI per cycle with no averaging: 10 cycles after the cut to 3.75 G → 3.80 G.
    #[test]
    fn t_q6_aimd_adds_per_cycle() {
        let mut rp = ReactionPoint::new(RpConfig { variant: RpVariant::Aimd, ..RpConfig::default() }, 5.0 * G);
        rp.on_cnm(32);
        assert_gbps(rp.rate_bps(), 3.75, "after the cut");
        for i in 1..=10 {
            rp.on_bytes(BC_LIMIT_BYTES);
            assert_gbps(rp.rate_bps(), 3.75 + 0.005 * f64::from(i), &format!("cycle {i}"));
        }
    }

    #[test]
    fn floor_holds_under_repeated_max_cuts() {
        let mut rp = rp_at(1.0);
        for _ in 0..100 {
            rp.on_cnm(63);
            assert!(rp.rate_bps() >= MIN_RATE_BPS);
        }
        assert_eq!(rp.rate_bps(), MIN_RATE_BPS);
    }

    #[test]
    fn byte_counter_is_batch_invariant() {
        let mut one = rp_at(5.0);
        let mut many = rp_at(5.0);
        one.on_cnm(40);
        many.on_cnm(40);
        one.on_bytes(1_234_567.0);
        for _ in 0..1_234_567 / 1_000 {
            many.on_bytes(1_000.0);
        }
        many.on_bytes(567.0);
        assert_eq!(one, many);
    }

    #[test]
    fn halved_cycles_in_active_increase() {
        let cfg = RpConfig { halve_cycle_in_ai: true, ..RpConfig::default() };
        let mut rp = ReactionPoint::new(cfg, 5.0 * G);
        rp.on_cnm(32);
        rp.on_bytes(5.0 * BC_LIMIT_BYTES);
        assert_eq!(rp.cycles(), 5);
        assert_eq!(rp.cycle_bytes(), BC_LIMIT_BYTES / 2.0);
        rp.on_bytes(BC_LIMIT_BYTES / 2.0);
        assert_eq!(rp.cycles(), 6);
        assert_gbps(rp.target_bps(), 5.005, "first AI cycle");
    }

    #[test]
    fn hyper_active_increase_after_twice_fr_cycles() {
        let cfg = RpConfig { hai_rate_bps: Some(50e6), ..RpConfig::default() };
        let mut rp = ReactionPoint::new(cfg, 5.0 * G);
        rp.on_cnm(32);
        rp.on_bytes(10.0 * BC_LIMIT_BYTES);
        assert_gbps(rp.target_bps(), 5.025, "AI cycles 6..10");
        rp.on_bytes(BC_LIMIT_BYTES);
        assert_gbps(rp.target_bps(), 5.075, "HAI cycle 11");
    }

    #[test]
    fn the_algorithm_paces_at_the_reaction_points_rate() {
        let mut q = Qcn::new(QcnConfig { rp: RpConfig::default() });
        let a = q.init(&FlowStart::new(1500, 15_000));
        assert_eq!(a.pacing, Some(Pacing::BytesPerSec(10e9 / 8.0)));
        let cnm = Report {
            now_us: 100,
            mss_bytes: 1500,
            feedback: Some(NetworkFeedback::Qcn { fb_quantized: 64, q_off_bytes: 0, q_delta_bytes: 0 }),
            ..Report::default()
        };
        let a = q.on_report(&cnm);
        assert_eq!(a.pacing, Some(Pacing::BytesPerSec(10e9 * 65.0 / 128.0 / 8.0)));
        let cwnd = a.cwnd_bytes.unwrap();
        assert!(cwnd >= 10e9 * 65.0 / 128.0 / 8.0 * 1e-3 && cwnd.is_finite());
        let a = q.on_report(&Report { now_us: 200, mss_bytes: 1500, acked_bytes: 150_000, ..Report::default() });
        let Some(Pacing::BytesPerSec(r)) = a.pacing else { panic!() };
        assert!(r > 10e9 * 65.0 / 128.0 / 8.0, "no recovery after a cycle");
    }
}
