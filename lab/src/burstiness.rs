//! A trace's burst-gap signature: the statistics that tell a link whose delay comes from gaps in
//! its delivery opportunities (a cellular scheduler that serves a user in dense bursts, then not
//! at all for tens of ms to seconds) from one whose delay comes from a queue. Issue 32 describes a
//! held-out LTE trace that collapsed ABC by these numbers alone (44 % of 20 ms windows without an
//! opportunity, up to 26 opportunities in one ms, p95 of the 20 ms rate 4× its mean), so
//! synthetic links are checked against them, and the shipped traces compared.
//!
//! Everything is counted over whole milliseconds of one period from its start (or its first
//! `span_ms`), the trace's own resolution.

use std::fmt;

use ccp_router::Trace;

use crate::link::MBPS_PER_OPPORTUNITY_PER_MS;
use crate::metrics::quantile_type7;

/// The window the ABC router measures its capacity over (T, abc.md §6.4 [A]), over which the
/// issue's statistics were taken.
pub const WINDOW_MS: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signature {
    /// The milliseconds counted.
    pub span_ms: u64,
    pub mean_mbps: f64,
    /// Share of the span's whole 20 ms windows that hold no opportunity, %.
    pub empty_windows_pct: f64,
    /// Most opportunities in one millisecond.
    pub max_per_ms: u64,
    /// Mean opportunities per millisecond that has any.
    pub mean_per_busy_ms: f64,
    /// The 95th percentile of the 20 ms windows' rates over the mean rate.
    pub p95_window_rate_over_mean: f64,
    /// Gaps between consecutive busy milliseconds (1 = adjacent), ms.
    pub gap_p50_ms: f64,
    pub gap_p99_ms: f64,
    pub gap_max_ms: u64,
}

impl Signature {
    /// The signature of `trace` over its first `span_ms` (its whole period when `None` or
    /// longer). `None` when the span holds no opportunity.
    pub fn of(trace: &Trace, span_ms: Option<u64>) -> Option<Signature> {
        let span = span_ms.map_or(trace.period_ms(), |s| s.min(trace.period_ms())).max(1);
        // Millisecond t (1-based, as the trace's timestamps) holds the opportunities stamped t.
        let mut per_ms = vec![0u64; span as usize + 1];
        for &t in trace.times_ms().iter().take_while(|&&t| t <= span) {
            per_ms[t as usize] += 1;
        }
        let per_ms = &per_ms[1..];
        let total: u64 = per_ms.iter().sum();
        if total == 0 {
            return None;
        }
        let mean_per_ms = total as f64 / span as f64;
        let windows: Vec<u64> = per_ms.chunks_exact(WINDOW_MS as usize).map(|w| w.iter().sum()).collect();
        let empty_windows_pct = if windows.is_empty() {
            0.0
        } else {
            100.0 * windows.iter().filter(|&&n| n == 0).count() as f64 / windows.len() as f64
        };
        let mut rates: Vec<f64> = windows.iter().map(|&n| n as f64 / WINDOW_MS as f64).collect();
        rates.sort_by(f64::total_cmp);
        let busy: Vec<usize> = (0..per_ms.len()).filter(|&i| per_ms[i] > 0).collect();
        let mut gaps: Vec<f64> = busy.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        gaps.sort_by(f64::total_cmp);
        Some(Signature {
            span_ms: span,
            mean_mbps: mean_per_ms * MBPS_PER_OPPORTUNITY_PER_MS,
            empty_windows_pct,
            max_per_ms: per_ms.iter().copied().max().unwrap_or(0),
            mean_per_busy_ms: total as f64 / busy.len() as f64,
            p95_window_rate_over_mean: quantile_type7(&rates, 0.95).map_or(f64::NAN, |r| r / mean_per_ms),
            gap_p50_ms: quantile_type7(&gaps, 0.5).unwrap_or(f64::NAN),
            gap_p99_ms: quantile_type7(&gaps, 0.99).unwrap_or(f64::NAN),
            gap_max_ms: gaps.last().map_or(0, |&g| g as u64),
        })
    }

    pub const HEADER: &'static str =
        "mean Mbit/s · empty 20 ms windows · max/ms · mean/busy ms · p95 20 ms rate/mean · gap p50/p99/max ms";
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2} · {:.1} % · {} · {:.1} · {:.1}× · {:.0}/{:.0}/{}",
            self.mean_mbps,
            self.empty_windows_pct,
            self.max_per_ms,
            self.mean_per_busy_ms,
            self.p95_window_rate_over_mean,
            self.gap_p50_ms,
            self.gap_p99_ms,
            self.gap_max_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn trace(text: &str) -> Trace {
        Trace::parse(Path::new("t"), text).unwrap()
    }

    #[test]
    fn a_constant_link_has_no_gaps_and_no_empty_windows() {
        // 12 Mbit/s: one opportunity every ms for 100 ms.
        let text: String = (1..=100).map(|t| format!("{t}\n")).collect();
        let s = Signature::of(&trace(&text), None).unwrap();
        assert!((s.mean_mbps - 12.0).abs() < 1e-9);
        assert_eq!((s.empty_windows_pct, s.max_per_ms, s.gap_max_ms), (0.0, 1, 1));
        assert!((s.mean_per_busy_ms - 1.0).abs() < 1e-9 && (s.p95_window_rate_over_mean - 1.0).abs() < 1e-9);
    }

    #[test]
    fn bursts_and_gaps_are_counted_per_millisecond_and_window() {
        // 10 opportunities at ms 5, none until ms 60 (2 of 3 windows empty), 2 at ms 60.
        let text = "5\n5\n5\n5\n5\n5\n5\n5\n5\n5\n60\n60\n";
        let s = Signature::of(&trace(text), None).unwrap();
        assert_eq!(s.span_ms, 60);
        assert_eq!(s.max_per_ms, 10);
        assert!((s.mean_per_busy_ms - 6.0).abs() < 1e-9);
        assert!((s.empty_windows_pct - 100.0 / 3.0).abs() < 1e-9, "{}", s.empty_windows_pct);
        assert_eq!(s.gap_max_ms, 55);
        // 12 opportunities in 60 ms, 0.2/ms; windows 0.5/ms, 0, 0.1/ms.
        assert!((s.mean_mbps - 2.4).abs() < 1e-9);
        // The span cuts: the first 20 ms hold only the burst.
        let first = Signature::of(&trace(text), Some(20)).unwrap();
        assert_eq!((first.span_ms, first.max_per_ms, first.empty_windows_pct), (20, 10, 0.0));
        assert!(Signature::of(&trace(text), Some(4)).is_none(), "no opportunity in the first 4 ms");
    }
}
