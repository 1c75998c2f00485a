//! The near-source loop: a QCN reaction point in software, one per flow, clocked by acknowledged
//! bytes (annulus.md §4.2). Inactive — no rate, no limiter — until the first CNM, and again once
//! it recovers to the line rate (§4.2.3). Rates here are bytes/s; the reaction point keeps bits/s.

use crate::qcn::{ReactionPoint, RpConfig};

/// At most this many timer expiries are run per report (a report after a long silence).
const MAX_TIMER_EVENTS_PER_REPORT: u32 = 4096;

#[derive(Debug, Clone)]
pub(super) struct NearSource {
    cfg: RpConfig,
    rp: Option<ReactionPoint>,
    cnms: u64,
    /// 802.1Qau's RP timer period, µs (0: none, as the paper); halved in active increase with the
    /// byte-counter cycle.
    timer_us: f64,
    /// The next timer expiry, µs of report time, while the loop is active.
    timer_next_us: Option<f64>,
}

impl NearSource {
    pub(super) fn new(cfg: RpConfig, timer_us: f64) -> Self {
        NearSource { cfg, rp: None, cnms: 0, timer_us, timer_next_us: None }
    }

    pub(super) fn active(&self) -> bool {
        self.rp.is_some()
    }

    /// Current rate R_C, bytes/s; infinite while inactive.
    pub(super) fn rate_bytes_per_s(&self) -> f64 {
        self.rp.as_ref().map_or(f64::INFINITY, |rp| rp.rate_bps() / 8.0)
    }

    pub(super) fn target_bytes_per_s(&self) -> f64 {
        self.rp.as_ref().map_or(f64::INFINITY, |rp| rp.target_bps() / 8.0)
    }

    #[cfg(test)]
    pub(super) fn cycles(&self) -> u32 {
        self.rp.as_ref().map_or(0, ReactionPoint::cycles)
    }

    #[cfg(test)]
    pub(super) fn counted_bytes(&self) -> f64 {
        self.rp.as_ref().map_or(0.0, ReactionPoint::counted_bytes)
    }

    pub(super) fn cnms(&self) -> u64 {
        self.cnms
    }

    /// Sets R_C (snap to the actual rate, a proportional drop, the growth clamp).
    pub(super) fn set_rate_bytes_per_s(&mut self, rate: f64) {
        if let Some(rp) = self.rp.as_mut() {
            rp.set_rate_bps(rate * 8.0);
        }
    }

    /// A CNM: activates the loop at `actual_bytes_per_s` (the rate the flow sends at) if it was
    /// inactive, snaps R_C down to it if asked, then cuts. Returns (R_C before the cut, the factor).
    pub(super) fn on_cnm(&mut self, qfb: u8, actual_bytes_per_s: f64, snap_to_actual: bool, now_us: u64) -> (f64, f64) {
        self.cnms += 1;
        if self.timer_us > 0.0 {
            self.timer_next_us = Some(now_us as f64 + self.timer_us);
        }
        let actual_bps = actual_bytes_per_s * 8.0;
        let rp = self.rp.get_or_insert_with(|| ReactionPoint::new(self.cfg, actual_bps));
        if snap_to_actual && rp.rate_bps() > actual_bps {
            rp.set_rate_bps(actual_bps);
        }
        let before = rp.rate_bps() / 8.0;
        let factor = rp.on_cnm(qfb);
        (before, factor)
    }

    /// Acknowledged bytes for the ACK clock. The caller clamps growth, then calls
    /// [`NearSource::deactivate_at_line_rate`].
    pub(super) fn on_acked_bytes(&mut self, bytes: u64) {
        if let Some(rp) = self.rp.as_mut() {
            rp.on_bytes(bytes as f64);
        }
    }

    /// The timer's expiries up to `now_us`, each an increase event; nothing without a timer. The
    /// caller clamps and deactivates as after [`NearSource::on_acked_bytes`].
    pub(super) fn on_time(&mut self, now_us: u64) {
        let (Some(rp), Some(next)) = (self.rp.as_mut(), self.timer_next_us.as_mut()) else { return };
        let now = now_us as f64;
        // A long silence owes many expiries; past the fast-recovery cycles and the active-increase
        // steps to the line rate there is nothing left for them to do.
        let mut budget = MAX_TIMER_EVENTS_PER_REPORT;
        while *next <= now && budget > 0 && !rp.at_line_rate() {
            rp.increase_event();
            *next += if rp.in_active_increase() && self.cfg.halve_cycle_in_ai { self.timer_us / 2.0 } else { self.timer_us };
            budget -= 1;
        }
        if *next <= now {
            *next = now + self.timer_us;
        }
    }

    /// The timer's expiries up to `now_us` while growth is paused: dropped, not banked; the timer
    /// keeps its phase.
    pub(super) fn skip_time(&mut self, now_us: u64) {
        let (Some(_), Some(next)) = (self.rp.as_ref(), self.timer_next_us.as_mut()) else { return };
        let now = now_us as f64;
        if *next <= now {
            *next += (((now - *next) / self.timer_us).floor() + 1.0) * self.timer_us;
        }
    }

    /// The loop ends once R_C is back at the line rate (§4.2.3), as QCN removes its limiter.
    pub(super) fn deactivate_at_line_rate(&mut self) {
        if self.rp.as_ref().is_some_and(ReactionPoint::at_line_rate) {
            self.rp = None;
            self.timer_next_us = None;
        }
    }
}
