//! The shared window: Reno's slow start, additive increase, congestion events and timeouts
//! (RFC 5681, RFC 6582), kept as one state machine that Reno is and that Cubic, DCTCP, CDG,
//! Vegas, NimbusCC and MulTCP build on.
//!
//! A report aggregates many ACKs, so growth is applied to the report's total delivered bytes
//! (`Report::delivered_bytes`: cumulatively or selectively acknowledged, each segment once, the
//! `acked_sacked` Linux grows its window by; the cumulative ACK alone would hold still behind a
//! hole and then credit everything SACKed behind it at once): slow start adds them (doubling per
//! RTT) up to ssthresh, and bytes that carry the window past ssthresh are credited to congestion
//! avoidance, which adds one MSS per window of delivered data, integrated over the report so the
//! result does not depend on how many ACKs it carries.
//!
//! A congestion event (`loss_is_new_event`) lasts one smoothed RTT and, when the datapath reports
//! bytes in flight, until the data in flight at the cut has been cumulatively acknowledged, at
//! most `RECOVERY_CAP_SRTTS` SRTTs: NewReno's recovery point (RFC 6582 §3.2), as Linux keeps it.
//! Growth waits only for the SRTT. Cubic found the need first (cubic.rs); for Reno the libccp
//! benchmark of issue 19 showed it: 1,000 flows at 2 Mbit/s, 20 ms, one-BDP buffers; with a
//! one-RTT event the late-detected losses of one overflow cut the window two or three times,
//! leaving too few packets for fast retransmit (an RTO per flow every few seconds, 78 %
//! utilisation where generic_cong_avoid's Reno, whose event also ends in data, had 99 %).
//!
//! Invariants, kept by every method: the window and ssthresh never go below `MIN_CWND_PKTS`
//! packets of the current MSS (the contract's floor; RFC 5681's loss window is 1 MSS), and the
//! window only changes through the operations below, each of which says whether it is a
//! congestion event. The algorithms built on it read the state through accessors.

use ccp_contract::{FlowStart, ParamSpec, Report, MIN_CWND_PKTS};

/// Shared by the algorithms built on [`RenoWindow`] that let the user choose it.
pub const RECOVERY_BY_DATA: ParamSpec = ParamSpec::bool(
    "recovery_by_data",
    true,
    "a congestion event lasts until the bytes outstanding at the reduction (snd_nxt − snd_una, or the flight where the datapath does not say) are cumulatively acknowledged (at least one SRTT, at most three), like Linux's recovery point; false = exactly one SRTT",
);

/// Longest a congestion event lasts, in SRTTs, so losses can never be ignored for good.
pub const RECOVERY_CAP_SRTTS: u64 = 3;

/// The MSS assumed until the flow or a report says otherwise, bytes.
const DEFAULT_MSS_BYTES: f64 = 1448.0;

/// What the shared window needs from the algorithm that owns it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowConfig {
    /// The window of a new flow the datapath started without one, packets.
    pub init_cwnd_pkts: f64,
    /// Multiplicative decrease of [`RenoWindow::respond`]'s losses and of timeouts' ssthresh.
    pub beta: f64,
    /// A congestion event lasts until the flight at the cut is acknowledged (the module docs);
    /// false: exactly one SRTT.
    pub recovery_by_data: bool,
}

/// Reno's window state (see the module docs).
#[derive(Debug, Clone)]
pub struct RenoWindow {
    cfg: WindowConfig,
    mss: f64,
    cwnd_bytes: f64,
    ssthresh_bytes: f64,
    /// Datapath time before which further losses belong to the same congestion event.
    recovery_until_us: u64,
    /// Bytes outstanding at the last reduction not yet cumulatively acknowledged: the recovery
    /// point in data (see `loss_is_new_event`).
    recovery_left_bytes: f64,
    /// Datapath time of the last reduction, µs.
    reduced_at_us: u64,
    /// Bytes sent and not cumulatively acknowledged after the last report: `Report::unacked_bytes`,
    /// or the flight (never larger) where the datapath does not say.
    outstanding_bytes: u64,
    /// Last smoothed RTT seen, µs (0 until the first sample).
    srtt_us: u64,
    /// Smallest RTT sample seen over the flow's life, µs (0 until the first sample).
    min_rtt_us: u64,
}

impl RenoWindow {
    pub fn new(cfg: WindowConfig) -> Self {
        RenoWindow {
            cfg,
            mss: DEFAULT_MSS_BYTES,
            cwnd_bytes: 0.0,
            ssthresh_bytes: f64::INFINITY,
            recovery_until_us: 0,
            recovery_left_bytes: 0.0,
            reduced_at_us: 0,
            outstanding_bytes: 0,
            srtt_us: 0,
            min_rtt_us: 0,
        }
    }

    /// Sets up the window for a new or seeded flow.
    pub fn start(&mut self, start: &FlowStart) {
        self.mss = start.mss();
        match &start.seed {
            // A flow taken over mid-life has already probed the path: continue in congestion
            // avoidance from its current window instead of slow-starting past it.
            Some(seed) => {
                self.cwnd_bytes = (seed.cwnd_bytes as f64).max(self.min_cwnd());
                self.ssthresh_bytes = self.cwnd_bytes;
                self.srtt_us = seed.srtt_us.unwrap_or(0);
                self.min_rtt_us = seed.min_rtt_us.unwrap_or(0);
            }
            None => {
                let datapath_init = start.init_cwnd_bytes as f64;
                self.cwnd_bytes = if datapath_init > 0.0 { datapath_init } else { self.cfg.init_cwnd_pkts * self.mss };
                self.cwnd_bytes = self.cwnd_bytes.max(self.min_cwnd());
            }
        }
    }

    /// The window, bytes.
    #[inline]
    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd_bytes
    }

    /// The window, packets of the current MSS.
    #[inline]
    pub fn cwnd_pkts(&self) -> f64 {
        self.cwnd_bytes / self.mss
    }

    /// The slow-start threshold, bytes (infinite until the first congestion event).
    #[inline]
    pub fn ssthresh_bytes(&self) -> f64 {
        self.ssthresh_bytes
    }

    /// The flow's MSS, bytes.
    #[inline]
    pub fn mss(&self) -> f64 {
        self.mss
    }

    /// The last smoothed RTT seen, µs (0 until the first sample).
    #[inline]
    pub fn srtt_us(&self) -> u64 {
        self.srtt_us
    }

    /// The smallest RTT sample seen over the flow's life, µs (0 until the first sample).
    #[inline]
    pub fn min_rtt_us(&self) -> u64 {
        self.min_rtt_us
    }

    /// The multiplicative decrease of its own congestion events ([`RenoWindow::respond`]).
    #[inline]
    pub fn beta(&self) -> f64 {
        self.cfg.beta
    }

    /// The floor of the window and of ssthresh, bytes.
    #[inline]
    pub fn min_cwnd(&self) -> f64 {
        MIN_CWND_PKTS * self.mss
    }

    #[inline]
    pub fn in_slow_start(&self) -> bool {
        self.cwnd_bytes < self.ssthresh_bytes
    }

    /// Records the report's MSS and RTT; call first for every report.
    pub fn observe(&mut self, report: &Report) {
        if report.mss_bytes > 0 {
            self.mss = report.mss();
            // A larger MSS must not leave the window below the floor in packets.
            self.cwnd_bytes = self.cwnd_bytes.max(self.min_cwnd());
        }
        if let Some(rtt) = report.rtt {
            self.srtt_us = rtt.srtt_us.max(1);
            if rtt.samples > 0 && rtt.min_us > 0 && (self.min_rtt_us == 0 || rtt.min_us < self.min_rtt_us) {
                self.min_rtt_us = rtt.min_us;
            }
        }
        self.recovery_left_bytes = (self.recovery_left_bytes - report.acked_bytes as f64).max(0.0);
        self.outstanding_bytes = report.unacked_bytes.max(report.inflight_bytes);
    }

    /// True while inside the round trip that follows a window reduction: the window does not
    /// grow.
    #[inline]
    pub fn in_recovery(&self, now_us: u64) -> bool {
        now_us < self.recovery_until_us
    }

    /// Whether a loss (or ECN-Echo) seen now starts a new congestion event rather than belonging
    /// to the one being recovered from: a burst of drop-tail losses is one event, however they
    /// trickle in, so the window is cut once for it.
    ///
    /// An event ends with the data that caused it (the recovery point of RFC 6582/6675: Linux
    /// stays in recovery until the cumulative ACK passes the data outstanding at the reduction).
    /// A report stream shows neither sequence numbers nor send times, so the event lasts (a) one
    /// SRTT after the reduction and (b) until the bytes outstanding at the reduction
    /// (`Report::unacked_bytes`, snd_nxt − snd_una; the flight where the datapath does not say)
    /// have been cumulatively acknowledged since — a hole keeps the cumulative ACK back until its
    /// retransmission is acknowledged, as in Linux — but (c) never longer than
    /// `RECOVERY_CAP_SRTTS` SRTTs, so losses can never be ignored for good.
    /// Why the outstanding bytes and not the flight: the flight leaves out what is SACKed or
    /// marked lost, so once a hole is repaired the cumulative ACK passes it while the last data
    /// sent before the cut is still unacknowledged, and a loss detected there was taken for a new
    /// event. Reno alone on the eBPF datapath (10 Mbit/s, 10 ms, 2 BDP) cut twice, to a quarter,
    /// in about half its loss episodes (flight 26 packets at the cut, 30 outstanding; the second
    /// loss came with the cumulative ACK that moved 28).
    /// Why (b): with (a) alone, the losses of one drop-tail overflow that are detected just after
    /// the SRTT (the reordering window and the report interval delay them) cut the window a
    /// second time: on the eBPF datapath against a kernel Cubic flow (48 Mbit/s, 50 ms, 2 BDP,
    /// 120 s) the agent's Cubic cut to 0.49 in 4 of 11 loss episodes, 0.15–0.21 s after the first
    /// cut with SRTT 0.15 s, while the kernel flow cut once (0.7) in every one of them, and its
    /// share fell from 50 % to 40 % (19.5 vs 25.1 Mbit/s, 2 runs each); at the slow-start exit it
    /// cut three times. Reno's case is in the module docs.
    pub fn loss_is_new_event(&self, now_us: u64) -> bool {
        if self.in_recovery(now_us) {
            return false;
        }
        let cap = self.reduced_at_us.saturating_add(self.srtt_us.saturating_mul(RECOVERY_CAP_SRTTS));
        !self.cfg.recovery_by_data || self.recovery_left_bytes <= 0.0 || now_us >= cap
    }

    /// Multiplies the window by `factor` (a congestion event) and opens a recovery period: one
    /// RTT during which the window does not grow, and until the data outstanding at the cut is
    /// acknowledged, further congestion signals belong to this event (`loss_is_new_event`).
    pub fn reduce(&mut self, now_us: u64, factor: f64) {
        self.cut(factor);
        self.recovery_until_us = now_us.saturating_add(self.srtt_us);
        self.reduced_at_us = now_us;
        // The span up to snd_nxt, as Linux's recovery point.
        self.recovery_left_bytes = self.outstanding_bytes as f64;
    }

    /// Sets ssthresh and the window to `factor` times the window (never below the floor) without
    /// opening a recovery period: for callers that delimit the congestion event themselves
    /// (DCTCP's CWR period, which is measured in data rather than time).
    pub fn cut(&mut self, factor: f64) {
        self.cut_to(self.cwnd_bytes * factor);
    }

    /// Sets ssthresh and the window to `bytes` (never below the floor) without opening a
    /// recovery period: a congestion event whose window the caller computes (CDG's backoff).
    pub fn cut_to(&mut self, bytes: f64) {
        self.ssthresh_bytes = bytes.max(self.min_cwnd());
        self.cwnd_bytes = self.ssthresh_bytes;
    }

    /// Limits the window from outside (a growth pause ordered by another loop, ABC's legacy
    /// window): never raises it, never below the floor. Not a congestion event.
    pub fn cap(&mut self, max_bytes: f64) {
        self.cwnd_bytes = self.cwnd_bytes.min(max_bytes.max(self.min_cwnd()));
    }

    /// A proportional drop ordered from outside (Annulus's rule 2, annulus.md §12 A11): the window
    /// times `factor`, and ssthresh no higher than the new window, so slow start does not regrow
    /// what the other loop took away. Opens no recovery period: this loop saw no congestion.
    pub fn scale(&mut self, factor: f64) {
        self.cwnd_bytes = (self.cwnd_bytes * factor.clamp(0.0, 1.0)).max(self.min_cwnd());
        self.ssthresh_bytes = self.ssthresh_bytes.min(self.cwnd_bytes);
    }

    /// Sets the window to `bytes` (never below the floor) as the owning algorithm's own rule
    /// computes it (Cubic's curve, DCTCP's per-RTT update, Vegas's adjustments); ssthresh stays.
    pub fn set_cwnd(&mut self, bytes: f64) {
        self.cwnd_bytes = bytes.max(self.min_cwnd());
    }

    /// The window to the floor, ssthresh as it is (RFC 5681's loss window, at the contract's
    /// floor): a timeout whose ssthresh the caller sets (CDG).
    pub fn to_loss_window(&mut self) {
        self.cwnd_bytes = self.min_cwnd();
    }

    /// Sets ssthresh to `bytes` (never below the floor); the window stays.
    pub fn set_ssthresh(&mut self, bytes: f64) {
        self.ssthresh_bytes = bytes.max(self.min_cwnd());
    }

    /// Ends slow start at the current window without a congestion event (ssthresh = cwnd):
    /// HyStart++'s exit, CDG's, or a delay-based rule.
    pub fn exit_slow_start(&mut self) {
        self.ssthresh_bytes = self.cwnd_bytes;
    }

    /// Retransmission timeout: remember `beta` of the flight, collapse to the loss window.
    pub fn timeout(&mut self, now_us: u64, inflight_bytes: u64) {
        let flight = (inflight_bytes as f64).max(self.cwnd_bytes);
        self.ssthresh_bytes = (flight * self.cfg.beta).max(self.min_cwnd());
        self.cwnd_bytes = self.min_cwnd();
        self.recovery_until_us = now_us.saturating_add(self.srtt_us);
        self.recovery_left_bytes = 0.0;
    }

    /// Slow start: grows the window by the acknowledged bytes, but not past ssthresh. Returns the
    /// bytes left over for congestion avoidance (all of them when not in slow start). Algorithms
    /// with their own congestion-avoidance rule (Cubic) use this for their RFC 5681 slow start.
    pub fn slow_start(&mut self, acked_bytes: u64) -> f64 {
        let mut acked = acked_bytes as f64;
        if self.in_slow_start() {
            let room = self.ssthresh_bytes - self.cwnd_bytes;
            let ss = acked.min(room);
            self.cwnd_bytes += ss;
            acked -= ss;
        }
        acked
    }

    /// Grows the window for `acked_bytes` newly acknowledged bytes (slow start, then AIMD).
    pub fn grow(&mut self, acked_bytes: u64) {
        let acked = self.slow_start(acked_bytes);
        if acked > 0.0 {
            // One MSS per cwnd bytes acknowledged; integrating over the report keeps the result
            // independent of how many ACKs the report aggregates.
            let w0 = self.cwnd_bytes;
            self.cwnd_bytes = (w0 * w0 + 2.0 * self.mss * acked).sqrt();
        }
    }

    /// Whether the report's interval may grow a window: the window limited the sender (Linux's
    /// `tcp_is_cwnd_limited`, `Report::cwnd_limited`) and the application did not. A window the
    /// flow does not fill is an untested one: growing it lets a later burst leave at its rate.
    #[inline]
    pub fn window_limits(report: &Report) -> bool {
        report.cwnd_limited && !report.app_limited
    }

    /// Standard Reno reaction to one report: loss/timeout response, else growth.
    pub fn on_report(&mut self, report: &Report) {
        self.observe(report);
        self.respond(report);
    }

    /// [`RenoWindow::on_report`] for a caller that has already observed the report.
    pub fn respond(&mut self, report: &Report) {
        if report.timeouts > 0 {
            self.timeout(report.now_us, report.inflight_bytes);
        } else if report.lost_pkts > 0 {
            if self.loss_is_new_event(report.now_us) {
                self.reduce(report.now_us, self.cfg.beta);
            }
        } else if !self.in_recovery(report.now_us) && Self::window_limits(report) {
            self.grow(report.delivered_bytes() as u64);
        }
    }
}

/// An algorithm built on [`RenoWindow`], as another control loop sees it: ABC's legacy Cubic
/// window and Annulus's end-to-end loop read, cap and scale it. None of these is a congestion
/// event for the algorithm. An algorithm whose own state depends on the window overrides what
/// must also move that state (Cubic's `scale` restarts its epoch).
pub trait RenoBased {
    fn window(&self) -> &RenoWindow;
    fn window_mut(&mut self) -> &mut RenoWindow;

    /// The current window, bytes.
    fn cwnd_bytes(&self) -> f64 {
        self.window().cwnd_bytes()
    }

    /// Limits the window from outside (a growth pause, a legacy window kept near what is in
    /// flight): never raises it.
    fn cap_cwnd(&mut self, max_bytes: f64) {
        self.window_mut().cap(max_bytes);
    }

    /// A proportional drop ordered by another loop (Annulus, annulus.md §12 A11).
    fn scale(&mut self, factor: f64) {
        self.window_mut().scale(factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn window() -> RenoWindow {
        let mut w = RenoWindow::new(WindowConfig { init_cwnd_pkts: 10.0, beta: 0.5, recovery_by_data: true });
        w.start(&FlowStart::new(MSS, 10_000));
        w
    }

    #[test]
    fn every_setter_keeps_the_floor() {
        let mut w = window();
        w.set_cwnd(1.0);
        assert_eq!(w.cwnd_bytes(), 2_000.0);
        w.set_ssthresh(-5.0);
        assert_eq!(w.ssthresh_bytes(), 2_000.0);
        w.cut_to(0.0);
        assert_eq!((w.cwnd_bytes(), w.ssthresh_bytes()), (2_000.0, 2_000.0));
        w.set_cwnd(50_000.0);
        w.scale(0.0);
        assert_eq!(w.cwnd_bytes(), 2_000.0);
        w.set_cwnd(50_000.0);
        w.cap(10.0);
        assert_eq!(w.cwnd_bytes(), 2_000.0);
    }

    #[test]
    fn a_cap_never_raises_and_a_scale_lowers_ssthresh() {
        let mut w = window();
        w.cap(1e9);
        assert_eq!(w.cwnd_bytes(), 10_000.0);
        w.set_ssthresh(40_000.0);
        w.scale(0.5);
        assert_eq!((w.cwnd_bytes(), w.ssthresh_bytes()), (5_000.0, 5_000.0));
        assert!(!w.in_slow_start());
    }

    #[test]
    fn exit_slow_start_keeps_the_window() {
        let mut w = window();
        assert!(w.in_slow_start());
        w.exit_slow_start();
        assert_eq!((w.cwnd_bytes(), w.ssthresh_bytes()), (10_000.0, 10_000.0));
        assert!(!w.in_slow_start());
    }
}
