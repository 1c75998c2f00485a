//! Several NimbusCC flows on one bottleneck: the pulser and the watchers (paper §4.2, spec §7).
//!
//! If every NimbusCC flow pulsed at f_p, each would see the others' responses and all would stay
//! competitive. Instead one flow, the **pulser**, pulses — at f_pc = 5 Hz in competitive mode and
//! f_pd = 6 Hz in delay mode — and decides the mode from η. The others, **watchers**, do not pulse,
//! low-pass their own sending rate so they do not answer the pulser's pulses (else the pulser would
//! see them as elastic), and copy the pulser's mode by checking which of f_pc and f_pd dominates
//! their own receive rate R. No messages are exchanged.
//!
//! Election (Eq. 5): a watcher that sees no pulser (no peak at either pulsing frequency in its R)
//! becomes pulser every τ = 10 ms with probability
//!
//!   p_i = (κ·τ / FFT_Duration) · (R_i / μ̂)
//!
//! Since Σ R_i ≤ μ and each flow makes FFT_Duration/τ decisions per window, the expected number of
//! new pulsers per window is ≤ κ, approximately Poisson(κ); κ = 1 in the paper. A pulser that sees
//! more variation at the pulsing frequencies in ẑ than in its own R (another pulser's pulses) steps
//! down to watcher with a fixed probability per τ.
//!
//! Thresholds follow the authors' code (spec A14): a watcher follows the other mode when the EWMA
//! of |Y(f_other)|/|Y(f_current)| exceeds 1.25; "no pulser" is the EWMA of |Y| over the pulse band
//! (4.5, 6.5] Hz relative to the band above it (7, 15] Hz falling below 1.5; a pulser suspects
//! another pulser when the EWMA of |Z|/|Y| over the pulse band exceeds 2. The EWMAs are time-based
//! (0.25 s for the mode and multi-pulser ratios, 0.5 s for presence: the authors' per-report gains
//! at their 5 ms reports); the exit probability is 0.01 per τ (spec A14), and the watcher's rate
//! filter has gain 0.03 per 10 ms (spec A12: ≥ 20 dB at 5 Hz; the authors' implicit cwnd/ewma_rtt
//! filter gives only ≈10 dB).
//!
//! Randomness comes only from a seeded SplitMix64 in the flow's state; the seed is a parameter,
//! mixed with the flow's creation index within its factory so that flows of one configuration do
//! not draw identical streams (identical streams would elect simultaneously and defeat Eq. 5).

use rand_xoshiro::rand_core::{Rng, SeedableRng};

use super::elasticity::WatcherMeasurement;

/// κ: expected new pulsers per FFT window (paper §4.2: 1).
pub const KAPPA: f64 = 1.0;
/// τ: period of election decisions, µs (paper §4.2: 10 ms).
pub const ELECTION_PERIOD_US: u64 = 10_000;
/// Per-τ probability that a pulser which suspects another pulser steps down (spec A14).
pub const PULSER_EXIT_PROB: f64 = 0.01;
/// EWMA(|Z|/|Y|) over the pulse band above which a pulser suspects another pulser (authors' code).
pub const MULTI_PULSER_THRESH: f64 = 2.0;
/// EWMA(pulse band / high band of |Y|) below which a watcher sees no pulser (authors' code).
pub const NO_PULSER_THRESH: f64 = 1.5;
/// EWMA(|Y(f_other)|/|Y(f_current)|) above which a watcher follows the other mode (authors' code).
pub const WATCHER_SWITCH_THRESH: f64 = 1.25;
/// Gain of the watcher's output-rate EWMA per 10 ms (spec A12).
pub const WATCHER_RATE_GAIN: f64 = 0.03;

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, well-mixed deterministic generator;
/// `rand_xoshiro`'s, with the draws the election needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64(rand_xoshiro::SplitMix64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(rand_xoshiro::SplitMix64::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (clamped to [0, 1]).
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.next_f64() < p.clamp(0.0, 1.0)
    }
}

/// The generator seed of the `index`-th flow of a configuration with seed `seed`.
pub fn flow_seed(seed: u64, index: u64) -> u64 {
    SplitMix64::new(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

/// Eq. 5: p_i = κ·τ/W · R_i/μ̂, clamped to [0, 1] (0 while μ̂ is unknown).
pub fn election_probability(kappa: f64, tau_s: f64, window_s: f64, r: f64, mu: f64) -> f64 {
    if mu.is_nan() || mu <= 0.0 || window_s.is_nan() || window_s <= 0.0 || r.is_nan() || r <= 0.0 {
        return 0.0;
    }
    (kappa * tau_s / window_s * r / mu).clamp(0.0, 1.0)
}

/// Probability of at least one success in `k` independent trials of probability `p`.
pub fn at_least_once(p: f64, k: u64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    if k == 0 || p == 0.0 {
        return 0.0;
    }
    -((k as f64) * (-p).ln_1p()).exp_m1()
}

/// A flow's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Pulser,
    Watcher,
}

/// A pulser's suspicion that another pulser is active: EWMA of |Z|/|Y| over the pulse band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultiPulserCheck {
    pub ratio: f64,
}

impl Default for MultiPulserCheck {
    fn default() -> Self {
        MultiPulserCheck { ratio: 1.0 }
    }
}

impl MultiPulserCheck {
    pub fn update(&mut self, z_pulse_band: f64, y_pulse_band: f64, gain: f64) {
        let x = super::elasticity::safe_ratio(z_pulse_band, y_pulse_band);
        self.ratio += gain * (x - self.ratio);
    }

    pub fn suspects_another(&self, thresh: f64) -> bool {
        self.ratio > thresh
    }
}

/// What a watcher tracks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatcherState {
    /// EWMA of |Y(f_other)|/|Y(f_current)|.
    pub mode_ratio: f64,
    /// EWMA of |Y(pulse band)|/|Y(high band)|: is a pulser visible at all?
    pub presence: f64,
}

impl Default for WatcherState {
    fn default() -> Self {
        WatcherState { mode_ratio: 1.0, presence: 1.0 }
    }
}

impl WatcherState {
    pub fn update(&mut self, m: &WatcherMeasurement, mode_gain: f64, presence_gain: f64) {
        let mode = super::elasticity::safe_ratio(m.y_other, m.y_current);
        let presence = super::elasticity::safe_ratio(m.y_pulse_band, m.y_high_band);
        self.mode_ratio += mode_gain * (mode - self.mode_ratio);
        self.presence += presence_gain * (presence - self.presence);
    }

    /// True (once: the ratio restarts from 0) when the other mode's frequency dominates.
    pub fn take_mode_flip(&mut self, thresh: f64) -> bool {
        if self.mode_ratio > thresh {
            self.mode_ratio = 0.0;
            true
        } else {
            false
        }
    }

    pub fn sees_no_pulser(&self, thresh: f64) -> bool {
        self.presence < thresh
    }
}

/// The watcher's low-pass filter on its own sending rate (time-based EWMA).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateFilter {
    tau_s: f64,
    value: Option<f64>,
}

impl RateFilter {
    /// A filter with gain `gain_per_10ms` per 10 ms.
    pub fn new(gain_per_10ms: f64) -> Self {
        RateFilter { tau_s: crate::filters::tau_for_gain(gain_per_10ms, 0.01), value: None }
    }

    /// Starts (or restarts) the filter at `x`.
    pub fn reset(&mut self, x: f64) {
        self.value = Some(x);
    }

    pub fn clear(&mut self) {
        self.value = None;
    }

    /// Filters `x` after `dt_s` seconds.
    pub fn apply(&mut self, x: f64, dt_s: f64) -> f64 {
        let v = match self.value {
            None => x,
            Some(v) => v + crate::filters::ewma_gain(dt_s, self.tau_s) * (x - v),
        };
        self.value = Some(v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nimbus::elasticity::tests::Gauss;
    use std::f64::consts::PI;

    #[test]
    fn splitmix_is_deterministic_and_uniform() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let n = 100_000;
        let mean = (0..n).map(|_| a.next_f64()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert_ne!(flow_seed(0, 0), flow_seed(0, 1));
        assert_eq!(flow_seed(7, 3), flow_seed(7, 3));
    }

    #[test]
    fn eq5_probability() {
        // κ = 1, τ = 10 ms, W = 5 s: p = 0.002·R/μ̂ (spec §7.3).
        assert!((election_probability(1.0, 0.01, 5.0, 6e6, 12e6) - 0.001).abs() < 1e-15);
        assert_eq!(election_probability(1.0, 0.01, 5.0, 6e6, 0.0), 0.0);
        assert_eq!(election_probability(1e6, 1.0, 1.0, 1.0, 1.0), 1.0);
        assert!((at_least_once(0.5, 2) - 0.75).abs() < 1e-12);
        assert!((at_least_once(1e-4, 10) - (1.0 - (1.0 - 1e-4f64).powi(10))).abs() < 1e-15);
        assert_eq!(at_least_once(0.3, 0), 0.0);
    }

    /// §15.2 test 28: M flows with Σ R_i = μ, τ = 10 ms, W = 5.12 s, κ = 1: elections per window
    /// have mean 1 ± 0.05 and P(≥ 2) within 2 pp of 1 − 2/e; P(0) ≈ 1/e.
    #[test]
    fn t28_election_statistics() {
        let mu = 12e6;
        let window_s: f64 = 5.12;
        let decisions = (window_s / 0.01).round() as usize;
        for shares in [vec![1.0], vec![0.25; 4], vec![0.5, 0.3, 0.15, 0.05]] {
            let mut rngs: Vec<SplitMix64> = (0..shares.len()).map(|i| SplitMix64::new(flow_seed(28, i as u64))).collect();
            let windows = 10_000;
            let (mut total, mut zero, mut two_plus) = (0usize, 0usize, 0usize);
            for _ in 0..windows {
                let mut n = 0;
                for (share, rng) in shares.iter().zip(rngs.iter_mut()) {
                    let p = election_probability(KAPPA, 0.01, window_s, share * mu, mu);
                    for _ in 0..decisions {
                        n += usize::from(rng.bernoulli(p));
                    }
                }
                total += n;
                zero += usize::from(n == 0);
                two_plus += usize::from(n >= 2);
            }
            let mean = total as f64 / windows as f64;
            let p0 = zero as f64 / windows as f64;
            let p2 = two_plus as f64 / windows as f64;
            assert!((mean - 1.0).abs() < 0.05, "{shares:?}: mean {mean}");
            assert!((p2 - (1.0 - 2.0 / std::f64::consts::E)).abs() < 0.02, "{shares:?}: P(≥2) {p2}");
            assert!((p0 - (-1.0f64).exp()).abs() < 0.02, "{shares:?}: P(0) {p0}");
        }
    }

    /// §15.2 test 30: a 5 Hz target rate through the watcher filter comes out ≤ 0.1× in amplitude.
    #[test]
    fn t30_watcher_filter_mutes_5hz() {
        for f in [5.0, 6.0] {
            let mut filt = RateFilter::new(WATCHER_RATE_GAIN);
            filt.reset(10e6);
            let (mut lo, mut hi) = (f64::MAX, f64::MIN);
            for i in 0..1000 {
                let t = i as f64 * 0.01;
                let y = filt.apply(10e6 + 1e6 * (2.0 * PI * f * t).sin(), 0.01);
                if t > 5.0 {
                    lo = lo.min(y);
                    hi = hi.max(y);
                }
            }
            let amp = (hi - lo) / 2.0;
            assert!(amp <= 0.1 * 1e6, "{f} Hz: amplitude {amp}");
            assert!(amp > 0.05 * 1e6, "{f} Hz: {amp} (expected ≈0.097 / 0.081)");
        }
        // Jittered update times give the same filter (time-based gain).
        let mut a = RateFilter::new(WATCHER_RATE_GAIN);
        let mut b = RateFilter::new(WATCHER_RATE_GAIN);
        a.reset(0.0);
        b.reset(0.0);
        a.apply(1.0, 0.02);
        b.apply(1.0, 0.01);
        let vb = b.apply(1.0, 0.01);
        assert!((a.value.unwrap() - vb).abs() < 1e-12);
    }

    /// §15.2 test 31, detection: a pulser whose |Z| is 2.5× its |Y| over the pulse band suspects
    /// another pulser within 0.6 s. (The exit itself — probability per decision, through
    /// NimbusCC — is `t31_suspecting_pulser_exits_with_the_configured_probability` in
    /// `super::super::tests`.)
    #[test]
    fn t31_multi_pulser_check_suspects_at_2_5_times_y() {
        let mut check = MultiPulserCheck::default();
        let gain = crate::filters::ewma_gain(0.01, 0.25);
        let mut steps = 0;
        while !check.suspects_another(MULTI_PULSER_THRESH) {
            check.update(2.5, 1.0, gain);
            steps += 1;
        }
        assert!(steps < 60, "{steps}");
        // Equal magnitudes (only our own pulses): no suspicion.
        let mut ok = MultiPulserCheck::default();
        for _ in 0..1000 {
            ok.update(1.0, 1.0, gain);
        }
        assert!(!ok.suspects_another(MULTI_PULSER_THRESH));
    }

    /// The watcher's EWMAs on the three signals of §15.2 test 29 (the full test drives NimbusCC in
    /// `super::super::tests`).
    #[test]
    fn watcher_state_reads_the_dominant_frequency() {
        let plans = crate::nimbus::elasticity::Plans::new(512, 256);
        let mut d = crate::nimbus::elasticity::Detector::new(&plans, 0.01, false, Default::default());
        for (f, flips) in [(Some(6.0), true), (Some(5.0), false), (None, false)] {
            let mut g = Gauss::new(29);
            let mut h = crate::nimbus::history::History::new(10_000, 1024);
            let mut w = WatcherState::default();
            let mut flipped = false;
            for i in 0..800u64 {
                let t = i as f64 * 0.01;
                let r = 6e6 + f.map_or(0.0, |f| 0.6e6 * (2.0 * PI * f * t).sin()) + 0.3e6 * g.next();
                h.advance(i * 10_000, &crate::nimbus::history::Sample { r, zout: 12e6 - r, ..Default::default() });
                if let Some(m) = d.watcher(&h, 5.0, 6.0, 0.5, (4.5, 6.5), (7.0, 15.0)) {
                    w.update(&m, crate::filters::ewma_gain(0.01, 0.25), crate::filters::ewma_gain(0.01, 0.5));
                    flipped |= w.take_mode_flip(WATCHER_SWITCH_THRESH);
                }
            }
            if f.is_some() {
                // (Noise alone may flip now and then; with no pulser the flow soon elects itself.)
                assert_eq!(flipped, flips, "{f:?}");
            }
            assert_eq!(w.sees_no_pulser(NO_PULSER_THRESH), f.is_none(), "{f:?}: presence {}", w.presence);
        }
    }
}
