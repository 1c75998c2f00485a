//! Small signal filters shared by algorithms: windowed minimum/maximum and time-based EWMA gains.
//!
//! `Windowed` tracks the minimum (or maximum) of a sample stream over a sliding time window with
//! constant memory, by keeping the best, second-best and third-best samples of successive
//! sub-windows (the estimator Kathleen Nichols designed for BBR's max-bandwidth and min-RTT
//! filters). The answer is exact while the best sample is inside the window, and afterwards is the
//! best of the more recent sub-windows: an estimate that errs toward fresh data, which is what a
//! congestion controller wants from a path that may have changed. Time is whatever monotonic unit
//! the caller uses (here always datapath microseconds).

/// Whether a filter keeps the smallest or the largest sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extremum {
    Min,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    t: u64,
    v: f64,
}

/// Windowed minimum or maximum in constant memory (three samples).
#[derive(Debug, Clone, PartialEq)]
pub struct Windowed {
    kind: Extremum,
    s: [Sample; 3],
    empty: bool,
}

impl Windowed {
    pub fn new(kind: Extremum) -> Self {
        Windowed { kind, s: [Sample { t: 0, v: 0.0 }; 3], empty: true }
    }

    pub fn min() -> Self {
        Windowed::new(Extremum::Min)
    }

    pub fn max() -> Self {
        Windowed::new(Extremum::Max)
    }

    /// True when `a` is at least as good as `b`.
    fn at_least(&self, a: f64, b: f64) -> bool {
        match self.kind {
            Extremum::Min => a <= b,
            Extremum::Max => a >= b,
        }
    }

    /// The current estimate, `None` before the first sample.
    pub fn get(&self) -> Option<f64> {
        (!self.empty).then_some(self.s[0].v)
    }

    /// Forgets everything and starts again from `v` at `t`.
    pub fn reset(&mut self, t: u64, v: f64) {
        self.s = [Sample { t, v }; 3];
        self.empty = false;
    }

    /// Adds sample `v` taken at time `t` (non-decreasing) and returns the extremum over the last
    /// `window` time units. `window = u64::MAX` keeps the all-time extremum. Non-finite samples are
    /// ignored.
    pub fn update(&mut self, t: u64, v: f64, window: u64) -> f64 {
        if !v.is_finite() {
            return self.get().unwrap_or(0.0);
        }
        let new = Sample { t, v };
        if self.empty || self.at_least(v, self.s[0].v) || t.saturating_sub(self.s[2].t) > window {
            self.reset(t, v);
            return v;
        }
        if self.at_least(v, self.s[1].v) {
            self.s[1] = new;
            self.s[2] = new;
        } else if self.at_least(v, self.s[2].v) {
            self.s[2] = new;
        }
        // Age out the best sample (and promote the runners-up) once it leaves the window; keep the
        // runners-up from successive quarters/halves of the window so a promotion is meaningful.
        let age = t.saturating_sub(self.s[0].t);
        if age > window {
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = new;
            if t.saturating_sub(self.s[0].t) > window {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = new;
            }
        } else if self.s[1].t == self.s[0].t && age > window / 4 {
            self.s[1] = new;
            self.s[2] = new;
        } else if self.s[2].t == self.s[1].t && age > window / 2 {
            self.s[2] = new;
        }
        self.s[0].v
    }
}

/// The gain of an exponentially weighted moving average with time constant `tau_s` for a step of
/// `dt_s` seconds: 1 − exp(−dt/τ). Makes an EWMA independent of how often it is updated.
pub fn ewma_gain(dt_s: f64, tau_s: f64) -> f64 {
    if dt_s.is_nan() || dt_s <= 0.0 {
        return 0.0;
    }
    if tau_s.is_nan() || tau_s <= 0.0 {
        return 1.0;
    }
    -(-dt_s / tau_s).exp_m1()
}

/// The time constant, seconds, of an EWMA that applies gain `gain` once every `step_s` seconds.
pub fn tau_for_gain(gain: f64, step_s: f64) -> f64 {
    -step_s / (1.0 - gain).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_min_tracks_and_expires() {
        let mut f = Windowed::min();
        assert_eq!(f.get(), None);
        assert_eq!(f.update(0, 50.0, 100), 50.0);
        assert_eq!(f.update(10, 60.0, 100), 50.0);
        assert_eq!(f.update(20, 40.0, 100), 40.0);
        for t in (30..=120).step_by(10) {
            assert_eq!(f.update(t, 70.0 + t as f64, 100), 40.0, "t {t}");
        }
        // 40 was taken at t = 20; past t = 120 it is out of the window and a later sample wins.
        let v = f.update(130, 300.0, 100);
        assert!(v > 40.0, "{v}");
        assert_eq!(f.update(140, 10.0, 100), 10.0);
    }

    #[test]
    fn windowed_max_all_time() {
        let mut f = Windowed::max();
        for (t, v) in [(0, 1.0), (1, 5.0), (1_000_000, 2.0), (u64::MAX / 2, 3.0)] {
            f.update(t, v, u64::MAX);
        }
        assert_eq!(f.get(), Some(5.0));
        f.update(u64::MAX / 2 + 1, f64::NAN, u64::MAX);
        assert_eq!(f.get(), Some(5.0));
    }

    #[test]
    fn windowed_estimate_is_a_recent_sample_at_least_the_newest() {
        let mut f = Windowed::max();
        let mut x = 12345u64;
        let mut hist = vec![];
        for t in 0..2000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = (x >> 33) as f64;
            hist.push((t, v));
            let got = f.update(t, v, 50);
            assert!(got >= v);
            assert!(hist.iter().any(|&(s, w)| w == got && t - s <= 50), "t {t}: {got} is not a sample of the window");
        }
    }

    #[test]
    fn ewma_gain_is_time_based() {
        let a = ewma_gain(0.01, 0.5);
        assert!((a - 0.019801326693244747).abs() < 1e-15);
        // Two half steps equal one full step.
        let h = ewma_gain(0.005, 0.5);
        assert!(((1.0 - h) * (1.0 - h) - (1.0 - a)).abs() < 1e-15);
        assert_eq!(ewma_gain(0.0, 0.5), 0.0);
        assert_eq!(ewma_gain(1.0, 0.0), 1.0);
        assert!((tau_for_gain(0.03, 0.01) - 0.328308).abs() < 1e-5);
        assert!((ewma_gain(0.01, tau_for_gain(0.03, 0.01)) - 0.03).abs() < 1e-12);
    }
}
