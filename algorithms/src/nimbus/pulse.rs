//! The asymmetric sinusoidal pulse Nimbus superimposes on its sending rate (paper §3.4, Fig. 6).
//!
//! With phase φ = frac(f_p·(t − t0)) ∈ [0, 1), peak amplitude A = pulse_size·μ̂ and up-fraction
//! u = 1/4:
//!
//!   p(t) =  A·sin(π·φ/u)                        for φ < u   (a half-sine T/4 long, peak +A)
//!   p(t) = −(u/(1−u))·A·sin(π·(φ−u)/(1−u))      for φ ≥ u   (a half-sine 3T/4 long, trough −A/3)
//!
//! Both lobes carry A·u·T·2/π bytes, so the pulse has zero mean over every period: pulsing changes
//! neither the average rate nor the average queue. The asymmetry lets a sender whose base rate is
//! only μ/12 produce the full pulse (a symmetric one with the same peak would need μ/4). The burst
//! sent above the mean in one period is (2/π)·(μ/4)·(T/4) = μT/(8π) ≈ 0.04·μT (the thesis prints a
//! factor too few; spec §4.1). Harmonics at 2f_p, 3f_p, … fall outside the η band [f_p, 2f_p − ε).
//!
//! The phase is continuous only through (t − t0)·f: when the frequency changes with the mode
//! (5 Hz competitive, 6 Hz delay) the pulse jumps in phase. That is allowed (spec §15.2 test 5): the
//! detector looks at a 5 s window in which the new frequency dominates within a second.

use std::f64::consts::PI;

/// Peak amplitude as a fraction of the link rate (paper Fig. 6: μ/4).
pub const PULSE_SIZE: f64 = 0.25;
/// Fraction of the period spent in the positive half-sine (paper Fig. 6: 1/4).
pub const UP_FRACTION: f64 = 0.25;
/// Microseconds per second.
const US_PER_S: f64 = 1e6;

/// The pulse shape at phase `phase` ∈ [0, 1) for a peak of 1 (trough −u/(1−u)).
pub fn shape(phase: f64, up_fraction: f64) -> f64 {
    let u = up_fraction;
    if phase < u {
        (PI * phase / u).sin()
    } else {
        -(u / (1.0 - u)) * (PI * (phase - u) / (1.0 - u)).sin()
    }
}

/// Phase frac(f·t) of a pulse of frequency `freq_hz` at `elapsed_us` after the pulse origin,
/// computed so that it does not lose precision over long flows.
pub fn phase(elapsed_us: u64, freq_hz: f64) -> f64 {
    // Split t into whole seconds and the remainder: frac(f·s + f·r) with f·s reduced first.
    let secs = (elapsed_us / 1_000_000) as f64;
    let rem = (elapsed_us % 1_000_000) as f64 / US_PER_S;
    let p = (freq_hz * secs).fract() + freq_hz * rem;
    let p = p.fract();
    if p < 0.0 {
        p + 1.0
    } else {
        p
    }
}

/// Pulse parameters: amplitude relative to the link rate and the up-fraction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pulse {
    pub size: f64,
    pub up_fraction: f64,
}

impl Default for Pulse {
    fn default() -> Self {
        Pulse { size: PULSE_SIZE, up_fraction: UP_FRACTION }
    }
}

impl Pulse {
    /// Peak amplitude A for link rate estimate `mu`, bytes/s.
    pub fn amplitude(&self, mu: f64) -> f64 {
        self.size * mu.max(0.0)
    }

    /// The lowest base rate that still produces the full trough: A·u/(1−u) (μ/12 by default).
    pub fn trough_depth(&self, mu: f64) -> f64 {
        self.amplitude(mu) * self.up_fraction / (1.0 - self.up_fraction)
    }

    /// p(t), bytes/s, `elapsed_us` after the pulse origin, at `freq_hz`, for link rate `mu`.
    pub fn value(&self, elapsed_us: u64, freq_hz: f64, mu: f64) -> f64 {
        self.amplitude(mu) * shape(phase(elapsed_us, freq_hz), self.up_fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MU: f64 = 12e6;

    fn p() -> Pulse {
        Pulse::default()
    }

    /// §15.2 test 1: zero mean over a period, sampled every µs and on the 10 ms grid.
    #[test]
    fn t1_zero_mean_over_a_period() {
        let period_us = 200_000u64;
        let sum: f64 = (0..period_us).map(|t| p().value(t, 5.0, MU)).sum();
        let mean = sum / period_us as f64;
        assert!(mean.abs() < 1e-3 * MU, "µs mean {mean}");
        let grid: f64 = (0..20).map(|k| p().value(k * 10_000, 5.0, MU)).sum::<f64>() / 20.0;
        assert!(grid.abs() < 1e-2 * MU, "10 ms mean {grid}");
        // Any up-fraction: the two lobes carry the same bytes.
        for u in [0.1, 0.25, 0.5, 0.7] {
            let pu = Pulse { size: 0.25, up_fraction: u };
            let m: f64 = (0..period_us).map(|t| pu.value(t, 5.0, MU)).sum::<f64>() / period_us as f64;
            assert!(m.abs() < 1e-3 * MU, "u {u}: {m}");
        }
    }

    /// §15.2 test 2: extremes and signs.
    #[test]
    fn t2_extremes_and_signs() {
        let peak = MU * 0.25;
        assert!((shape(0.125, 0.25) - 1.0).abs() < 1e-12);
        assert!((p().value(25_000, 5.0, MU) - peak).abs() < 1e-9 * peak, "peak at φ = 1/8 (25 ms)");
        assert!((p().value(125_000, 5.0, MU) + MU / 12.0).abs() < 1e-9 * MU, "trough at φ = 5/8 (125 ms)");
        let (mut max, mut min) = (f64::MIN, f64::MAX);
        for t in 0..200_000u64 {
            let v = p().value(t, 5.0, MU);
            max = max.max(v);
            min = min.min(v);
            if t < 50_000 {
                assert!(v >= 0.0, "t {t}: {v}");
            } else {
                assert!(v <= 0.0, "t {t}: {v}");
            }
        }
        assert!((max - peak).abs() < 1e-9 * peak && (min + MU / 12.0).abs() < 1e-9 * MU);
        assert!((p().trough_depth(MU) - MU / 12.0).abs() < 1e-6);
    }

    /// §15.2 test 3: the burst above the mean is μT/(8π).
    #[test]
    fn t3_burst_is_mu_t_over_8_pi() {
        let burst: f64 = (0..200_000u64).map(|t| p().value(t, 5.0, MU).max(0.0)).sum::<f64>() / 1e6;
        let expect = MU * 0.2 / (8.0 * PI);
        assert!((expect - 95_492.97).abs() < 0.1);
        assert!((burst - expect).abs() < 1e-3 * expect, "{burst} vs {expect}");
    }

    /// §15.2 test 4: the 10 ms sample table of spec §4.1, in units of μ.
    #[test]
    fn t4_sample_table() {
        let table = [
            0.0, 0.1469, 0.2378, 0.2378, 0.1469, 0.0, -0.0173, -0.0339, -0.0490, -0.0619, -0.0722, -0.0793, -0.0829, -0.0829,
            -0.0793, -0.0722, -0.0619, -0.0490, -0.0339, -0.0173,
        ];
        for (k, want) in table.iter().enumerate() {
            let got = p().value(k as u64 * 10_000, 5.0, MU) / MU;
            assert!((got - want).abs() < 5e-5, "sample {k}: {got:.5} vs {want}");
        }
    }

    /// §15.2 test 5: at 6 Hz (delay mode) the period is 1/6 s; the phase is continuous only through
    /// (t − t0)·f, so a frequency switch jumps in phase (allowed).
    #[test]
    fn t5_frequency_switch() {
        let period_us: f64 = 1_000_000.0 / 6.0;
        for t in [0u64, 13_000, 77_777, 150_000] {
            let later = t + (3.0 * period_us).round() as u64;
            assert!((p().value(t, 6.0, MU) - p().value(later, 6.0, MU)).abs() < 1e-3 * MU);
        }
        // At t = 1.1 s: 5 Hz phase 0.5, 6 Hz phase 0.6 — different values: a jump at a switch.
        let t = 1_100_000;
        assert!((phase(t, 5.0) - 0.5).abs() < 1e-12 && (phase(t, 6.0) - 0.6).abs() < 1e-12);
        assert!((p().value(t, 5.0, MU) - p().value(t, 6.0, MU)).abs() > 1e-3 * MU);
    }

    #[test]
    fn phase_keeps_precision_for_long_flows() {
        // 30 days in: the phase is still exact to well below a microsecond's worth.
        let t = 30 * 86_400 * 1_000_000u64 + 25_000;
        assert!((phase(t, 5.0) - 0.125).abs() < 1e-9);
        assert!((phase(t, 6.0) - 0.15).abs() < 1e-9);
        assert_eq!(phase(0, 5.0), 0.0);
    }
}
