//! A sampled series over a soak and the trends read from it.
//!
//! Every `kill -9` and restart of the agents starts a new *life*: the agents' RSS, open files and
//! log rate start again from a fresh process, and every life begins with a warm-up (the flow
//! table refills, the restarted agent logs each flow it re-adopts). A plain regression over the
//! whole run would read each restart's drop as a shrinking leak and each warm-up as growth. So
//! two slopes are read, both from samples at least the warm-up into their life:
//!
//! - **within lives** ([`Trend::slope_per_h`]): one least-squares slope shared by all lives,
//!   each life with an intercept of its own (the restart's reset is absorbed by the
//!   intercepts). A leak inside a running agent shows here, however often it restarts.
//! - **across lives** ([`Trend::drift_per_h`]): the least-squares slope of each life's mean
//!   against the life's mid-time, so each life is compared with the ones after the previous
//!   restarts at the same phases. A leak inside lives raises it as much as the slope above;
//!   what survives a restart (pinned maps, state a restarted agent inherits or re-adopts) shows
//!   only here.

use serde::Serialize;

/// One sample.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Seconds since the soak started.
    pub t_s: f64,
    /// Which life of the agents (0 before the first restart).
    pub life: usize,
    /// Seconds since that life began.
    pub phase_s: f64,
    pub value: f64,
}

/// The trends of a series, in its unit per hour.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Trend {
    pub slope_per_h: f64,
    /// Zero with fewer than two lives past their warm-up.
    pub drift_per_h: f64,
    pub min: f64,
    pub max: f64,
    /// Samples past the warm-up, which the slopes rest on.
    pub samples_used: usize,
    pub lives_used: usize,
}

/// Least-squares slope of `(x, y)`; 0 without spread in x.
fn ols_slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    }
}

/// The trends of `samples`, ignoring the first `warmup_s` of every life.
pub fn trend(samples: &[Sample], warmup_s: f64) -> Trend {
    let finite: Vec<&Sample> = samples.iter().filter(|s| s.value.is_finite()).collect();
    let (min, max) = finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| (lo.min(s.value), hi.max(s.value)));
    let used: Vec<&Sample> = finite.iter().copied().filter(|s| s.phase_s >= warmup_s).collect();
    let lives_n = used.iter().map(|s| s.life + 1).max().unwrap_or(0);
    let mut lives: Vec<Vec<(f64, f64)>> = vec![Vec::new(); lives_n];
    for s in &used {
        lives[s.life].push((s.t_s, s.value));
    }
    lives.retain(|l| !l.is_empty());
    // Within lives: centre each life on its own means, then one slope through all of them.
    let centred: Vec<(f64, f64)> = lives
        .iter()
        .flat_map(|l| {
            let n = l.len() as f64;
            let (mx, my) = (l.iter().map(|p| p.0).sum::<f64>() / n, l.iter().map(|p| p.1).sum::<f64>() / n);
            l.iter().map(move |p| (p.0 - mx, p.1 - my))
        })
        .collect();
    let sxx: f64 = centred.iter().map(|p| p.0 * p.0).sum();
    let slope = if sxx > 0.0 { centred.iter().map(|p| p.0 * p.1).sum::<f64>() / sxx } else { 0.0 };
    let means: Vec<(f64, f64)> = lives
        .iter()
        .map(|l| {
            let n = l.len() as f64;
            (l.iter().map(|p| p.0).sum::<f64>() / n, l.iter().map(|p| p.1).sum::<f64>() / n)
        })
        .collect();
    let (min, max) = if finite.is_empty() { (0.0, 0.0) } else { (min, max) };
    Trend {
        slope_per_h: slope * 3600.0,
        drift_per_h: ols_slope(&means) * 3600.0,
        min,
        max,
        samples_used: used.len(),
        lives_used: lives.len(),
    }
}

/// Each life's value at `phase_s` (its first sample at or after it), for lives that reached it.
pub fn at_phase(samples: &[Sample], phase_s: f64) -> Vec<f64> {
    let mut out: Vec<(usize, f64)> = Vec::new();
    for s in samples.iter().filter(|s| s.phase_s >= phase_s && s.value.is_finite()) {
        if !out.iter().any(|(l, _)| *l == s.life) {
            out.push((s.life, s.value));
        }
    }
    out.sort_by_key(|(l, _)| *l);
    out.into_iter().map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lives of `life_s` seconds sampled every 5 s, `value(life, t, phase)`.
    fn series(lives: usize, life_s: f64, value: impl Fn(usize, f64, f64) -> f64) -> Vec<Sample> {
        let mut v = Vec::new();
        for life in 0..lives {
            let mut phase = 0.0;
            while phase < life_s {
                let t = life as f64 * life_s + phase;
                v.push(Sample { t_s: t, life, phase_s: phase, value: value(life, t, phase) });
                phase += 5.0;
            }
        }
        v
    }

    #[test]
    fn restarts_and_warm_ups_are_not_a_leak() {
        // Every life starts at 10, climbs to 40 within its first 30 s, then stays flat.
        let s = series(12, 300.0, |_, _, p| if p < 30.0 { 10.0 + p } else { 40.0 });
        let t = trend(&s, 60.0);
        assert!(t.slope_per_h.abs() < 1e-9 && t.drift_per_h.abs() < 1e-9, "{t:?}");
        assert_eq!((t.min, t.max, t.lives_used), (10.0, 40.0, 12));
        // Counting the warm-ups, each life's climb would read as growth.
        assert!(trend(&s, 0.0).slope_per_h > 100.0);
    }

    #[test]
    fn a_leak_inside_lives_shows_in_both_slopes() {
        // 36 units per hour, reset by every restart.
        let s = series(12, 300.0, |_, _, p| 40.0 + 0.01 * p);
        let t = trend(&s, 60.0);
        assert!((t.slope_per_h - 36.0).abs() < 1e-6, "{t:?}");
        // Each life's mean is the same: a leak a restart clears does not drift across lives.
        assert!(t.drift_per_h.abs() < 1e-6, "{t:?}");
        // One that survives restarts drifts as well.
        let s = series(12, 300.0, |_, t, _| 40.0 + 0.01 * t);
        let t = trend(&s, 60.0);
        assert!((t.slope_per_h - 36.0).abs() < 1e-6 && (t.drift_per_h - 36.0).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn a_step_each_restart_shows_across_lives_only() {
        // 5 more after every restart (entries a restart leaves behind), flat inside lives.
        let s = series(12, 300.0, |life, _, _| 100.0 + 5.0 * life as f64);
        let t = trend(&s, 60.0);
        assert!(t.slope_per_h.abs() < 1e-9, "{t:?}");
        // 5 per 300 s = 60 per hour.
        assert!((t.drift_per_h - 60.0).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn short_or_empty_series_give_zeros() {
        let t = trend(&[], 60.0);
        assert_eq!((t.slope_per_h, t.drift_per_h, t.min, t.max, t.samples_used), (0.0, 0.0, 0.0, 0.0, 0));
        let s = series(1, 120.0, |_, t, _| t);
        let t = trend(&s, 20.0);
        assert!((t.slope_per_h - 3600.0).abs() < 1e-6 && t.drift_per_h == 0.0, "{t:?}");
    }

    #[test]
    fn values_at_one_phase_of_each_life() {
        let s = series(3, 60.0, |life, _, p| (life * 100) as f64 + p);
        assert_eq!(at_phase(&s, 30.0), vec![30.0, 130.0, 230.0]);
        assert_eq!(at_phase(&s, 32.0), vec![35.0, 135.0, 235.0]);
        assert!(at_phase(&s, 61.0).is_empty());
    }
}
