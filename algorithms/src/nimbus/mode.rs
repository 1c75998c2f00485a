//! NimbusCC's mode decision: η → smoothed elasticity E → TCP-competitive or delay mode
//! (paper §3.4, §4.1; spec §5.5, §5.6, §6.5).
//!
//! The paper compares η with η_thresh = 2. The authors' code, whose behaviour the figures reflect,
//! smooths η and adds hysteresis; so do we (spec A5):
//!
//!   E ← E + a·(η − E),  a = 1 − exp(−Δt/0.5 s)      (≈0.02 per 10 ms sample; E starts at 1)
//!   E > η_thresh + 0.25 (2.25) → competitive mode, at once;
//!   E < η_thresh (2.0) → delay mode, but only ≥ 5 s after the last switch.
//!
//! Timers (the authors', spec A19; kept by `NimbusCC`): nothing is evaluated before 10 s, E is
//! updated from 10 s, and the mode can switch only after 15 s.
//!
//! Guards found only in the authors' code (spec §5.6), on by default (`reference_guards`), all
//! biased toward "elastic" except G1. Y is the spectrum of μ̂ − R, i.e. of our own receive rate:
//! - G1: avg ẑ < 0.1·μ̂ ⇒ E ← 0. Negligible cross traffic: delay mode is safe.
//! - G2: avg ẑ > 0.9·μ̂ ⇒ E pulled toward 6. We hold < 10 % of the link (≈ the paper's
//!   "insufficient share"): lean elastic.
//! - G3: |Z(f_p)| < 0.25·|Y(f_p)| ⇒ η ← min(η, 3)·min(1, 4·|Z(f_p)|/|Y(f_p)|). A cross-traffic peak
//!   that is tiny next to our own pulse as seen in R is not trusted.
//! - G4 (after the η update): |Y(f_p)|/|Y(den. band)| < 2 ⇒ E pulled toward 3. Our own pulses are
//!   not visible in R (empty queue, wrong bottleneck, app-limited): lean elastic. Note that with
//!   G4 active and η ≈ 1 (noise), E settles near (η + 3)/2 ≈ 2, inside the hysteresis band, so the
//!   mode then stays where it is; a slightly elastic η tips it to competitive.
//!
//! All pulls use the same time-based gain a as the η update.

use super::elasticity::{safe_ratio, PulserMeasurement};
use crate::filters::ewma_gain;

/// η_thresh: below it the cross traffic is inelastic (paper §3.4: 2).
pub const ETA_THRESH: f64 = 2.0;
/// Hysteresis above η_thresh before switching to competitive mode (authors' code: 2.25 − 2.0).
pub const ETA_HYSTERESIS: f64 = 0.25;
/// Time constant of E, s (spec A5: the authors' 0.01 per 5 ms report).
pub const ETA_EWMA_TAU_S: f64 = 0.5;
/// E's initial value (authors' code).
pub const E_INIT: f64 = 1.0;
/// No evaluation before this long after the first report, s (authors' code).
pub const DETECT_AFTER_S: f64 = 10.0;
/// No switch before this long after the first report, s (authors' code).
pub const SWITCH_AFTER_S: f64 = 15.0;
/// Minimum time since the last switch before returning to delay mode, s (authors' code).
pub const DELAY_DWELL_S: f64 = 5.0;
/// G1: cross traffic below this fraction of μ̂ is negligible.
const G1_LOW_CROSS: f64 = 0.1;
/// G2: cross traffic above this fraction of μ̂ leaves us too small a share; E is pulled to G2_TARGET.
const G2_HIGH_CROSS: f64 = 0.9;
const G2_TARGET: f64 = 6.0;
/// G3: the cross-traffic peak must be at least this fraction of our own peak in R; η is capped at G3_CAP.
const G3_MIN_RATIO: f64 = 0.25;
const G3_CAP: f64 = 3.0;
/// G4: our own pulses must stand this far above the band above f_p in R; else E is pulled to G4_TARGET.
const G4_MIN_RATIO: f64 = 2.0;
const G4_TARGET: f64 = 3.0;

/// `ewma_gain(dt_s, tau_s)` remembered for the last (dt_s, tau_s) asked: detection steps come one
/// grid slot apart, so its exp_m1 (~10 ns, half a Reno report) is computed once, not every step.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GainCache {
    dt_s: f64,
    tau_s: f64,
    /// Always `ewma_gain(dt_s, tau_s)` (0 for the default dt_s = 0).
    gain: f64,
}

impl GainCache {
    pub fn gain(&mut self, dt_s: f64, tau_s: f64) -> f64 {
        // NaN never compares equal, so it is recomputed (and stays what ewma_gain says).
        if dt_s != self.dt_s || tau_s != self.tau_s {
            *self = GainCache { dt_s, tau_s, gain: ewma_gain(dt_s, tau_s) };
        }
        self.gain
    }
}

ccp_contract::param_choice! {
    /// NimbusCC's operating mode.
    pub enum Mode {
        /// TCP-competitive (Cubic or Reno).
        Competitive = "competitive",
        /// Delay-controlling (BasicDelay, Vegas or Copa).
        Delay = "delay",
    }
}

impl Mode {
    /// 0 for competitive, 1 for delay (for `state()`).
    pub fn code(self) -> f64 {
        match self {
            Mode::Competitive => 0.0,
            Mode::Delay => 1.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeConfig {
    pub eta_thresh: f64,
    pub eta_hysteresis: f64,
    pub ewma_tau_s: f64,
    pub reference_guards: bool,
    pub delay_dwell_us: u64,
}

impl Default for ModeConfig {
    fn default() -> Self {
        ModeConfig {
            eta_thresh: ETA_THRESH,
            eta_hysteresis: ETA_HYSTERESIS,
            ewma_tau_s: ETA_EWMA_TAU_S,
            reference_guards: true,
            delay_dwell_us: (DELAY_DWELL_S * 1e6) as u64,
        }
    }
}

/// The smoothed elasticity E and the switching rule.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeController {
    pub cfg: ModeConfig,
    e: f64,
    last_switch_us: u64,
    /// The η that last entered the EWMA (after G3).
    last_eta: f64,
    gain: GainCache,
}

impl ModeController {
    pub fn new(cfg: ModeConfig) -> Self {
        ModeController { cfg, e: E_INIT, last_switch_us: 0, last_eta: 0.0, gain: GainCache::default() }
    }

    /// E.
    pub fn elasticity(&self) -> f64 {
        self.e
    }

    pub fn last_eta(&self) -> f64 {
        self.last_eta
    }

    pub fn set_elasticity(&mut self, e: f64) {
        self.e = e;
    }

    /// One detection step covering `dt_s` of the grid: guards and the η update. Returns the η that
    /// entered the EWMA.
    pub fn observe(&mut self, m: &PulserMeasurement, mu: f64, dt_s: f64) -> f64 {
        let a = self.gain.gain(dt_s, self.cfg.ewma_tau_s);
        let guards = self.cfg.reference_guards;
        let mut eta = m.eta;
        if guards {
            if m.avg_z < G1_LOW_CROSS * mu {
                self.e = 0.0;
            } else if m.avg_z > G2_HIGH_CROSS * mu {
                self.e += a * (G2_TARGET - self.e);
            }
            if m.z_fp < G3_MIN_RATIO * m.y_fp {
                eta = eta.min(G3_CAP) * (safe_ratio(m.z_fp, m.y_fp) / G3_MIN_RATIO).min(1.0);
            }
        }
        self.e += a * (eta - self.e);
        if guards && safe_ratio(m.y_fp, m.y_den) < G4_MIN_RATIO {
            self.e += a * (G4_TARGET - self.e);
        }
        self.last_eta = eta;
        eta
    }

    /// Pulls E toward `target` as G4 does (used when the rate measurements are stale: no evidence
    /// means "lean elastic").
    pub fn lean(&mut self, target: f64, dt_s: f64) {
        let a = self.gain.gain(dt_s, self.cfg.ewma_tau_s);
        self.e += a * (target - self.e);
    }

    /// The mode E asks for now, if different from `current` (switch timers are the caller's).
    pub fn decide(&self, current: Mode, now_us: u64) -> Option<Mode> {
        match current {
            Mode::Delay if self.e > self.cfg.eta_thresh + self.cfg.eta_hysteresis => Some(Mode::Competitive),
            Mode::Competitive if self.e < self.cfg.eta_thresh && self.dwell_over(now_us) => Some(Mode::Delay),
            _ => None,
        }
    }

    /// True once the minimum dwell since the last switch has passed.
    pub fn dwell_over(&self, now_us: u64) -> bool {
        now_us.saturating_sub(self.last_switch_us) >= self.cfg.delay_dwell_us
    }

    /// Records a switch (or the flow's start) at `now_us`.
    pub fn switched(&mut self, now_us: u64) {
        self.last_switch_us = now_us;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MU: f64 = 12e6;
    const DT: f64 = 0.01;

    /// The cache returns exactly what ewma_gain does, whatever the sequence of arguments.
    #[test]
    fn gain_cache_is_ewma_gain() {
        let mut c = GainCache::default();
        for (dt, tau) in [(0.01, 0.5), (0.01, 0.5), (0.02, 0.5), (0.02, 0.25), (0.0, 0.5), (f64::NAN, 0.5), (0.01, 0.5)] {
            let (got, want) = (c.gain(dt, tau), ewma_gain(dt, tau));
            assert!(got == want || (got.is_nan() && want.is_nan()), "({dt}, {tau}): {got} vs {want}");
        }
    }

    /// A measurement with the given η whose guards are all quiet: half the link is cross traffic,
    /// the cross-traffic peak is as large as ours, and our pulses stand out in R.
    fn quiet(eta: f64) -> PulserMeasurement {
        PulserMeasurement { eta, z_fp: 1.0, y_fp: 1.0, y_den: 0.1, avg_z: 0.5 * MU, avg_rtt_s: 0.06, ..Default::default() }
    }

    /// Runs `n` 10 ms steps; returns the first step (1-based) at which a switch away from `mode`
    /// is asked for, with the controller's switch time starting at `start_us`.
    fn run(c: &mut ModeController, mode: Mode, m: &PulserMeasurement, n: usize, t0_us: u64) -> Option<usize> {
        for i in 1..=n {
            c.observe(m, MU, DT);
            if c.decide(mode, t0_us + i as u64 * 10_000).is_some() {
                return Some(i);
            }
        }
        None
    }

    /// §15.2 test 22: hysteresis.
    #[test]
    fn t22_hysteresis() {
        let cfg = ModeConfig { reference_guards: false, ..ModeConfig::default() };
        // η constant at 2.1 never changes the mode, from either state.
        for mode in [Mode::Competitive, Mode::Delay] {
            let mut c = ModeController::new(cfg);
            c.set_elasticity(2.1);
            assert_eq!(run(&mut c, mode, &quiet(2.1), 10_000, 0), None, "{mode:?}");
        }
        // A step 1 → 5 switches to competitive once E > 2.25: 19 samples from E = 1.
        let mut c = ModeController::new(cfg);
        assert_eq!(run(&mut c, Mode::Delay, &quiet(5.0), 1000, 0), Some(19));
        // Back to 1: delay only once E < 2 and ≥ 5 s after the last switch.
        c.switched(1_000_000);
        let mut first = None;
        for i in 1..=2000u64 {
            c.observe(&quiet(1.0), MU, DT);
            let now = 1_000_000 + i * 10_000;
            if c.elasticity() < 2.0 && first.is_none() {
                first = Some(now);
            }
            if c.decide(Mode::Competitive, now).is_some() {
                assert!(now - 1_000_000 >= 5_000_000, "dwell");
                assert!(first.unwrap() < now, "E fell below 2 well before the dwell ended");
                assert_eq!(now, 6_000_000);
                return;
            }
        }
        panic!("never returned to delay");
    }

    /// §15.2 test 18: G1 — negligible cross traffic with a strong tone still means delay mode.
    #[test]
    fn t18_g1_negligible_cross_traffic() {
        let mut c = ModeController::new(ModeConfig::default());
        let m = PulserMeasurement { avg_z: 0.05 * MU, ..quiet(5.0) };
        for _ in 0..2000 {
            c.observe(&m, MU, DT);
            assert!(c.elasticity() < 0.1, "{}", c.elasticity());
        }
        assert_eq!(c.decide(Mode::Competitive, 15_000_000), Some(Mode::Delay));
    }

    /// §15.2 test 19: G2 — cross traffic at 0.95μ̂, noise only, leans elastic.
    #[test]
    fn t19_g2_large_cross_traffic() {
        let mut c = ModeController::new(ModeConfig::default());
        let m = PulserMeasurement { avg_z: 0.95 * MU, ..quiet(0.9) };
        assert!(run(&mut c, Mode::Delay, &m, 2000, 0).is_some());
        assert!(c.elasticity() >= 2.25);
        let mut off = ModeController::new(ModeConfig { reference_guards: false, ..ModeConfig::default() });
        assert_eq!(run(&mut off, Mode::Delay, &m, 2000, 0), None, "without guards: noise is inelastic");
    }

    /// §15.2 test 20: G3 scales a cross-traffic peak that is small next to our own.
    #[test]
    fn t20_g3() {
        let mut c = ModeController::new(ModeConfig::default());
        let m = PulserMeasurement { eta: 5.0, z_fp: 0.1, y_fp: 1.0, ..quiet(5.0) };
        let used = c.observe(&m, MU, DT);
        assert!((used - 1.2).abs() < 1e-12, "{used}");
        let mut off = ModeController::new(ModeConfig { reference_guards: false, ..ModeConfig::default() });
        assert_eq!(off.observe(&m, MU, DT), 5.0);
    }

    /// §15.2 test 21: G4 — our pulses invisible in R pull E toward 3. Each step is
    /// E ← E + a·(η − E), then E ← E + a·(3 − E), so E settles at E* = ((1 − a)·η + 3)/(2 − a).
    /// The spec's vector, a spectrum without a 5 Hz peak, has η ≈ 1 (noise, §5.4): E* ≈ 2.01, above
    /// η_thresh, so a competitive flow never returns to delay mode (lean elastic), but below 2.25,
    /// so a flow in delay mode is not pushed out by G4 alone. That needs E* > 2.25, i.e.
    /// η > η_b = (2.25·(2 − a) − 3)/(1 − a) ≈ 1.485: checked on both sides of η_b.
    #[test]
    fn t21_g4() {
        let a = ewma_gain(DT, ETA_EWMA_TAU_S);
        let settled = |eta: f64, pulses_visible: bool| {
            let m = if pulses_visible { quiet(eta) } else { PulserMeasurement { y_fp: 1.0, y_den: 1.0, ..quiet(eta) } };
            let mut c = ModeController::new(ModeConfig::default());
            for _ in 0..2000 {
                c.observe(&m, MU, DT);
            }
            c
        };
        let fixed_point = |eta: f64| ((1.0 - a) * eta + 3.0) / (2.0 - a);
        let now = 20_000_000;

        // No 5 Hz peak in R, noise-like η = 1.
        let c = settled(1.0, false);
        assert!((c.elasticity() - fixed_point(1.0)).abs() < 1e-9, "{} vs {}", c.elasticity(), fixed_point(1.0));
        assert!(c.elasticity() > ETA_THRESH && c.elasticity() < ETA_THRESH + ETA_HYSTERESIS, "{}", c.elasticity());
        assert_eq!(c.decide(Mode::Competitive, now), None, "G4 keeps a competitive flow competitive");
        assert_eq!(c.decide(Mode::Delay, now), None);
        // The same η with our pulses visible is inelastic: back to delay mode.
        let v = settled(1.0, true);
        assert!((v.elasticity() - 1.0).abs() < 1e-9);
        assert_eq!(v.decide(Mode::Competitive, now), Some(Mode::Delay));

        // The boundary of the switch up from delay mode.
        let eta_b = ((ETA_THRESH + ETA_HYSTERESIS) * (2.0 - a) - 3.0) / (1.0 - a);
        assert!((eta_b - 1.485).abs() < 1e-3, "{eta_b}");
        for (eta, want) in [(eta_b - 0.01, None), (eta_b + 0.01, Some(Mode::Competitive))] {
            let c = settled(eta, false);
            assert!((c.elasticity() - fixed_point(eta)).abs() < 1e-9);
            assert_eq!(c.decide(Mode::Delay, now), want, "η = {eta}, η_b = {eta_b}: E = {}", c.elasticity());
        }
    }

    #[test]
    fn lean_and_codes() {
        let mut c = ModeController::new(ModeConfig::default());
        for _ in 0..1000 {
            c.lean(3.0, DT);
        }
        assert!((c.elasticity() - 3.0).abs() < 1e-6);
        assert_eq!(Mode::Competitive.code(), 0.0);
        assert_eq!(Mode::Delay.code(), 1.0);
    }
}
