//! The ceiling on a window the flow does not use.
//!
//! A window means something only while it limits the sender. When the application, the
//! receiver's window or pacing keep a flow below its window, the window is a number nobody has
//! tested: an algorithm that keeps growing it — or a buggy or learned one that returns anything —
//! lets a later burst leave at line rate. Linux grows cwnd only while `tcp_is_cwnd_limited()`,
//! which in slow start lets it reach twice what was in flight; RFC 7661 bounds a window that is
//! not validated by twice the flight acknowledged (its pipeACK). The controller holds every
//! algorithm to that rule, whatever it asks for:
//!
//! - While reports say the window does not limit the flow ([`Report::cwnd_limited`] false), the
//!   datapath's window is at most [`IN_USE_MULTIPLE`] times the most the flow had in flight over
//!   the recent past (one to two in-use periods of `max(3 SRTT, 1 s)`, RFC 7661's pipeACK
//!   sampling period), and never below [`RESTART_WINDOW_PKTS`] packets: RFC 5681 §4.1's restart
//!   window, what a flow that has been idle may send at once, as Linux restarts it.
//! - Once the window limits the flow again, the ceiling rises to twice what is in flight at most
//!   once per smoothed RTT — slow start from what the flow used, clocked by its ACKs — until the
//!   algorithm's own window is within it; it is then gone.
//!
//! The algorithm is not told: its window stays what it computed (a well-behaved one does not
//! grow it meanwhile), and the datapath holds the smaller of the two.

use crate::report::Report;

/// The datapath's window is at most this many times what the flow has in flight while the window
/// does not limit it (Linux's slow-start rule, RFC 7661's 2 × pipeACK).
pub const IN_USE_MULTIPLE: u64 = 2;

/// The ceiling is never below this many packets: RFC 5681 §4.1's restart window, RFC 6928's
/// initial window.
pub const RESTART_WINDOW_PKTS: u64 = 10;

/// The shortest period over which what the flow has in flight is remembered, µs (RFC 7661's
/// pipeACK sampling period: at least 1 s, at least 3 RTTs).
const MIN_IN_USE_PERIOD_US: u64 = 1_000_000;
/// In-use periods as a multiple of the smoothed RTT.
const IN_USE_PERIOD_SRTTS: u64 = 3;
/// The RTT assumed before the first sample, µs (RFC 6298's initial RTO scale).
const RTT_BEFORE_SAMPLE_US: u64 = 1_000_000;

/// One flow's ceiling (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct WindowCeiling {
    ceiling_bytes: Option<u64>,
    /// Datapath time the ceiling was last set or raised, µs.
    raised_at_us: u64,
    /// The most in flight in the current and the previous in-use period, bytes.
    in_use_now_bytes: u64,
    in_use_before_bytes: u64,
    /// Datapath time the current in-use period began, µs.
    period_start_us: u64,
}

impl WindowCeiling {
    /// Folds one report in, before its algorithm runs. `srtt_us`: the flow's smoothed RTT.
    pub(crate) fn observe(&mut self, report: &Report, mss_bytes: u64, srtt_us: Option<u64>, pacing_bytes_per_s: Option<u64>) {
        let now = report.now_us;
        let srtt = srtt_us.unwrap_or(RTT_BEFORE_SAMPLE_US).max(1);
        let period = srtt.saturating_mul(IN_USE_PERIOD_SRTTS).max(MIN_IN_USE_PERIOD_US);
        if now.saturating_sub(self.period_start_us) >= period {
            // A gap of more than a whole period leaves nothing of what came before it.
            let skipped = now.saturating_sub(self.period_start_us) >= 2 * period;
            self.in_use_before_bytes = if skipped { 0 } else { self.in_use_now_bytes };
            self.in_use_now_bytes = 0;
            self.period_start_us = now;
        }
        self.in_use_now_bytes = self.in_use_now_bytes.max(report.inflight_bytes);
        // A paced flow sends at its rate: what it may have in flight is a round trip of it.
        let paced =
            pacing_bytes_per_s.map_or(0, |r| (u128::from(r) * u128::from(srtt) / 1_000_000).min(u128::from(u64::MAX)) as u64);
        let in_use = self.in_use_now_bytes.max(self.in_use_before_bytes).max(paced);
        let bound = in_use.saturating_mul(IN_USE_MULTIPLE).max(RESTART_WINDOW_PKTS.saturating_mul(mss_bytes.max(1)));
        match self.ceiling_bytes {
            _ if !report.cwnd_limited => {
                self.ceiling_bytes = Some(bound);
                self.raised_at_us = now;
            }
            Some(c) if now.saturating_sub(self.raised_at_us) >= srtt => {
                self.ceiling_bytes = Some(c.max(bound));
                self.raised_at_us = now;
            }
            _ => {}
        }
    }

    /// The window the datapath may hold when the algorithm asks for `requested_bytes`. A request
    /// within the ceiling ends it.
    pub(crate) fn apply(&mut self, requested_bytes: u64) -> u64 {
        match self.ceiling_bytes {
            Some(c) if requested_bytes > c => c,
            Some(_) => {
                self.ceiling_bytes = None;
                requested_bytes
            }
            None => requested_bytes,
        }
    }

    /// The ceiling in force, bytes.
    pub(crate) fn bytes(&self) -> Option<u64> {
        self.ceiling_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;
    const SRTT: u64 = 20_000;

    fn report(now_us: u64, inflight_bytes: u64, cwnd_limited: bool) -> Report {
        Report { now_us, inflight_bytes, cwnd_limited, mss_bytes: MSS as u32, ..Report::default() }
    }

    #[test]
    fn a_window_that_limits_is_never_capped() {
        let mut c = WindowCeiling::default();
        for i in 0..100 {
            c.observe(&report(i * 10_000, 5_000, true), MSS, Some(SRTT), None);
            assert_eq!(c.apply(1 << 40), 1 << 40);
        }
    }

    #[test]
    fn an_unused_window_is_held_to_twice_the_flight_or_the_restart_window() {
        let mut c = WindowCeiling::default();
        c.observe(&report(0, 40_000, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(2_600_000_000), 80_000, "twice the flight");
        let mut c = WindowCeiling::default();
        c.observe(&report(0, 3_000, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(118_000), 10 * MSS, "never below the restart window");
        assert_eq!(c.apply(7_000), 7_000, "a smaller request is the algorithm's");
    }

    /// What the flow had in flight is remembered over one to two periods of max(3 SRTT, 1 s), so
    /// a window used in bursts keeps room for them; a flow idle for longer starts from the
    /// restart window.
    #[test]
    fn the_flight_is_remembered_for_an_in_use_period() {
        let mut c = WindowCeiling::default();
        c.observe(&report(0, 60_000, false), MSS, Some(SRTT), None);
        c.observe(&report(500_000, 2_000, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(1 << 30), 120_000, "the burst half a second ago counts");
        c.observe(&report(1_200_000, 2_000, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(1 << 30), 120_000, "still within the previous period");
        c.observe(&report(2_300_000, 2_000, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(1 << 30), 10 * MSS, "two periods later it is gone");
        c.observe(&report(9_000_000, 0, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(1 << 30), 10 * MSS);
    }

    /// Once the window limits again, the ceiling doubles at most once per SRTT (with the flight
    /// that filled it) and ends when the algorithm's window fits under it.
    #[test]
    fn a_limited_flow_grows_from_what_it_used_once_per_rtt() {
        let mut c = WindowCeiling::default();
        c.observe(&report(0, 10_000, false), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 20_000);
        // Bulk again: the 20 kB window fills.
        c.observe(&report(5_000, 20_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 20_000, "not before an SRTT has passed");
        c.observe(&report(20_000, 20_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 40_000);
        c.observe(&report(30_000, 40_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 40_000);
        c.observe(&report(40_000, 40_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 80_000);
        c.observe(&report(60_000, 80_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 160_000);
        c.observe(&report(80_000, 160_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(200_000), 200_000, "within the ceiling: the algorithm's window");
        assert_eq!(c.bytes(), None);
        c.observe(&report(90_000, 200_000, true), MSS, Some(SRTT), None);
        assert_eq!(c.apply(1 << 30), 1 << 30, "no ceiling while the window limits");
    }
}
