//! HyStart++: leaving the initial slow start on rising delay, before the first loss (RFC 9406).
//!
//! Model. Standard slow start doubles the window every round until a loss, and by then the path
//! has taken about a window of losses: on a deep buffer that is hundreds of retransmissions at
//! once. HyStart++ watches the minimum RTT of each round (a window of data, `round.rs`):
//!
//! - Slow start (§4.2): once a round has `N_RTT_SAMPLE` RTT samples and the previous round had
//!   some, if the round's minimum RTT has risen by at least
//!   RttThresh = clamp(lastRoundMinRTT / 8, 4 ms, 16 ms) over the previous round's, the queue is
//!   building: remember the round's minimum as the CSS baseline and enter Conservative Slow Start.
//! - Conservative Slow Start (§4.3): the window grows by a quarter of the acknowledged data
//!   (`CSS_GROWTH_DIVISOR`). If a round's minimum RTT falls back below the baseline, the rise was
//!   spurious: back to slow start. After `CSS_ROUNDS` rounds in CSS (the round CSS began in
//!   counts as the first), slow start ends (ssthresh = cwnd) and congestion avoidance takes over.
//! - Loss or ECN-Echo in either phase ends slow start the usual way (the caller's reduction).
//!
//! Choices where the RFC leaves room, and what reports change:
//! - Only the initial slow start uses it (§4.3: "SHOULD use HyStart++ only for the initial slow
//!   start"); later slow starts stop at the ssthresh a congestion event left.
//! - Per-ACK RTT samples become per-report ones: a report's minimum RTT and its sample count
//!   (`RttStats::min_us`, `samples`) fold into the round exactly as the RFC's per-ACK rule would,
//!   since the minimum of minima is the minimum. The delay test then runs once per report instead
//!   of once per ACK, so an exit can come up to one report later than per-ACK HyStart++'s.
//! - L, the per-ACK cap on slow-start growth for unpaced senders (§4.2), is not applied: the window
//!   is applied per report, and how a datapath spreads a window increase over ACKs is its concern.
//!
//! Linux's Cubic runs the older HyStart (ACK trains and delay, on by default); RFC 9406 is the
//! standardised successor and is what this follows.
//!
//! Reference: P. Balasubramanian, Y. Huang, M. Olson, "HyStart++: Modified Slow Start for TCP",
//! RFC 9406, May 2023.

use ccp_contract::Report;

use crate::round::WindowEnd;

/// Lower bound of RttThresh, µs (RFC 9406 §4.2: MIN_RTT_THRESH = 4 ms).
pub const MIN_RTT_THRESH_US: u64 = 4_000;
/// Upper bound of RttThresh, µs (MAX_RTT_THRESH = 16 ms).
pub const MAX_RTT_THRESH_US: u64 = 16_000;
/// RttThresh is the previous round's minimum RTT over this, dimensionless (MIN_RTT_DIVISOR).
pub const MIN_RTT_DIVISOR: u64 = 8;
/// RTT samples a round needs before the delay test runs (N_RTT_SAMPLE).
pub const N_RTT_SAMPLE: u64 = 8;
/// In CSS the window grows by the acknowledged data over this, dimensionless (CSS_GROWTH_DIVISOR).
pub const CSS_GROWTH_DIVISOR: f64 = 4.0;
/// Rounds spent in CSS before congestion avoidance (CSS_ROUNDS); the default of the callers'
/// `hystart_css_rounds`.
pub const CSS_ROUNDS: u32 = 5;

/// How the caller's slow start should treat this report's acknowledged data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Standard slow start: the window grows by the acknowledged data.
    SlowStart,
    /// Conservative Slow Start: by the acknowledged data over `CSS_GROWTH_DIVISOR`.
    Conservative,
    /// Slow start is over: set ssthresh to the window; this report's data goes to congestion
    /// avoidance.
    Exit,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    SlowStart,
    /// In CSS since the round whose minimum RTT was `baseline_us`, with `rounds` rounds begun.
    Css {
        baseline_us: u64,
        rounds: u32,
    },
    Done,
}

/// HyStart++ state for one flow. Time, RTTs and acknowledged data come in with the reports.
#[derive(Debug, Clone)]
pub struct HyStart {
    phase: Phase,
    /// Rounds of CSS before slow start ends; 0 ends it at the delay signal, as Linux's HyStart.
    css_rounds: u32,
    round: WindowEnd,
    /// Minimum RTT of the previous completed round, µs (`None`: no samples in it).
    last_round_min_us: Option<u64>,
    /// Minimum RTT so far in the current round, µs.
    round_min_us: Option<u64>,
    round_samples: u64,
}

impl HyStart {
    /// A flow starting in slow start with `inflight_bytes` (its initial window) in its first round,
    /// spending `css_rounds` rounds in CSS (RFC 9406: `CSS_ROUNDS`).
    pub fn new(inflight_bytes: f64, mss: f64, css_rounds: u32) -> Self {
        HyStart {
            phase: Phase::SlowStart,
            css_rounds,
            round: WindowEnd::of_data(inflight_bytes, mss),
            last_round_min_us: None,
            round_min_us: None,
            round_samples: 0,
        }
    }

    /// True while HyStart++ still decides how slow start grows.
    pub fn active(&self) -> bool {
        self.phase != Phase::Done
    }

    /// True in Conservative Slow Start.
    pub fn in_css(&self) -> bool {
        matches!(self.phase, Phase::Css { .. })
    }

    /// Slow start has ended for another reason (a loss, ECN-Echo, a timeout, a seeded window).
    pub fn stop(&mut self) {
        self.phase = Phase::Done;
    }

    /// Folds one report in and says how its acknowledged data grows the window.
    pub fn on_report(&mut self, report: &Report) -> Growth {
        if self.phase == Phase::Done {
            return Growth::Exit;
        }
        if let Some(rtt) = report.rtt.filter(|r| r.samples > 0) {
            self.round_min_us = Some(self.round_min_us.map_or(rtt.min_us, |m| m.min(rtt.min_us)));
            self.round_samples += u64::from(rtt.samples);
        }
        let enough = self.round_samples >= N_RTT_SAMPLE;
        match (self.phase, self.round_min_us, self.last_round_min_us) {
            (Phase::SlowStart, Some(now), Some(last)) if enough => {
                let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH_US, MAX_RTT_THRESH_US);
                if now >= last.saturating_add(thresh) {
                    self.phase = if self.css_rounds == 0 { Phase::Done } else { Phase::Css { baseline_us: now, rounds: 0 } };
                }
            }
            (Phase::Css { baseline_us, .. }, Some(now), _) if enough && now < baseline_us => {
                self.phase = Phase::SlowStart;
            }
            _ => {}
        }
        if self.round.credit(report.acked_bytes, report.now_us) {
            self.next_round(report);
        }
        match self.phase {
            Phase::SlowStart => Growth::SlowStart,
            Phase::Css { .. } => Growth::Conservative,
            Phase::Done => Growth::Exit,
        }
    }

    fn next_round(&mut self, report: &Report) {
        self.last_round_min_us = self.round_min_us.take();
        self.round_samples = 0;
        self.round = WindowEnd::of_data(report.inflight_bytes as f64, report.mss());
        if let Phase::Css { baseline_us, rounds } = self.phase {
            let rounds = rounds + 1;
            self.phase = if rounds >= self.css_rounds { Phase::Done } else { Phase::Css { baseline_us, rounds } };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_contract::RttStats;

    const MSS: f64 = 1000.0;

    /// A report acknowledging `acked_pkts` segments, `samples` RTT samples with minimum `min_us`,
    /// and `inflight_pkts` outstanding at its end.
    fn rep(acked_pkts: u64, min_us: u64, samples: u32, inflight_pkts: u64) -> Report {
        Report {
            mss_bytes: MSS as u32,
            acked_bytes: acked_pkts * MSS as u64,
            inflight_bytes: inflight_pkts * MSS as u64,
            rtt: Some(RttStats { min_us, max_us: min_us, last_us: min_us, srtt_us: min_us, mean_us: min_us, samples }),
            ..Report::default()
        }
    }

    /// One report acknowledging `pkts` segments that ends the round, with `pkts` left in flight.
    fn round(h: &mut HyStart, pkts: u64, min_us: u64) -> Growth {
        h.on_report(&rep(pkts, min_us, pkts as u32, pkts))
    }

    #[test]
    fn a_flat_rtt_stays_in_slow_start() {
        let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
        let mut pkts = 10;
        for _ in 0..12 {
            assert_eq!(round(&mut h, pkts, 50_000), Growth::SlowStart);
            pkts *= 2;
        }
    }

    #[test]
    fn a_rise_of_rtt_thresh_enters_css_and_one_just_below_does_not() {
        // 50 ms base: RttThresh = clamp(6.25 ms, 4, 16) = 6.25 ms.
        for (rise_us, css) in [(6_250, true), (6_249, false)] {
            let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
            round(&mut h, 10, 50_000);
            assert_eq!(round(&mut h, 20, 50_000 + rise_us), if css { Growth::Conservative } else { Growth::SlowStart });
        }
        // The clamps: 200 ms base → 16 ms (not 25); 10 ms base → 4 ms (not 1.25).
        for (base_us, rise_us, css) in
            [(200_000, 16_000, true), (200_000, 15_999, false), (10_000, 4_000, true), (10_000, 3_999, false)]
        {
            let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
            round(&mut h, 10, base_us);
            assert_eq!(round(&mut h, 20, base_us + rise_us) == Growth::Conservative, css, "base {base_us} rise {rise_us}");
        }
    }

    #[test]
    fn the_delay_test_waits_for_n_rtt_sample_samples() {
        let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
        round(&mut h, 10, 50_000);
        // Seven samples of a much higher RTT inside the next round: not yet.
        assert_eq!(h.on_report(&rep(1, 80_000, 7, 20)), Growth::SlowStart);
        // The eighth.
        assert_eq!(h.on_report(&rep(1, 80_000, 1, 20)), Growth::Conservative);
    }

    #[test]
    fn css_ends_slow_start_after_css_rounds() {
        let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
        round(&mut h, 10, 50_000);
        assert_eq!(round(&mut h, 20, 60_000), Growth::Conservative);
        // The round CSS began in is its first; the end of the fifth ends slow start.
        for _ in 2..CSS_ROUNDS {
            assert_eq!(round(&mut h, 20, 61_000), Growth::Conservative);
        }
        assert_eq!(round(&mut h, 20, 61_000), Growth::Exit);
        assert!(!h.active());
    }

    /// With no CSS rounds slow start ends at the delay signal itself, as Linux's HyStart does.
    #[test]
    fn zero_css_rounds_end_slow_start_at_the_delay_signal() {
        let mut h = HyStart::new(10.0 * MSS, MSS, 0);
        round(&mut h, 10, 50_000);
        assert_eq!(round(&mut h, 20, 50_000 + 6_249), Growth::SlowStart);
        // RttThresh is now 56.249 ms / 8 = 7.03 ms.
        assert_eq!(round(&mut h, 40, 56_249 + 7_031), Growth::Exit);
        assert!(!h.active());
    }

    #[test]
    fn an_rtt_back_below_the_baseline_resumes_slow_start() {
        let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
        round(&mut h, 10, 50_000);
        assert_eq!(round(&mut h, 20, 60_000), Growth::Conservative);
        assert_eq!(round(&mut h, 20, 59_999), Growth::SlowStart, "spurious: the minimum fell below the CSS baseline");
    }

    #[test]
    fn rounds_end_when_the_flight_at_their_start_is_acknowledged() {
        // Round 1 is the initial 10 segments; 9 acknowledged leaves it open, so the high RTT below
        // is still round 1's and there is no previous round to compare with.
        let mut h = HyStart::new(10.0 * MSS, MSS, CSS_ROUNDS);
        assert_eq!(h.on_report(&rep(9, 50_000, 9, 20)), Growth::SlowStart);
        assert_eq!(h.on_report(&rep(0, 90_000, 9, 20)), Growth::SlowStart);
        // The 10th ends round 1 (minimum 50 ms); round 2 (20 in flight) then sees 90 ms.
        h.on_report(&rep(1, 50_000, 1, 20));
        assert_eq!(h.on_report(&rep(5, 90_000, 8, 20)), Growth::Conservative);
    }
}
