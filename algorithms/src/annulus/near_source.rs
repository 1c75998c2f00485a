//! The near-source loop: a QCN reaction point in software, one per flow, clocked by acknowledged
//! bytes (annulus.md §4.2). Inactive — no rate, no limiter — until the first CNM, and again once
//! it recovers to the line rate (§4.2.3). Rates here are bytes/s; the reaction point keeps bits/s.

use crate::qcn::{ReactionPoint, RpConfig};

#[derive(Debug, Clone)]
pub(super) struct NearSource {
    cfg: RpConfig,
    rp: Option<ReactionPoint>,
    cnms: u64,
}

impl NearSource {
    pub(super) fn new(cfg: RpConfig) -> Self {
        NearSource { cfg, rp: None, cnms: 0 }
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
    pub(super) fn on_cnm(&mut self, qfb: u8, actual_bytes_per_s: f64, snap_to_actual: bool) -> (f64, f64) {
        self.cnms += 1;
        let actual_bps = actual_bytes_per_s * 8.0;
        let rp = self.rp.get_or_insert_with(|| ReactionPoint::new(self.cfg, actual_bps));
        if snap_to_actual && rp.rate_bps() > actual_bps {
            rp.set_rate_bps(actual_bps);
        }
        let before = rp.rate_bps() / 8.0;
        let factor = rp.on_cnm(qfb);
        (before, factor)
    }

    /// Acknowledged bytes for the ACK clock; the loop deactivates at the line rate.
    pub(super) fn on_acked_bytes(&mut self, bytes: u64) {
        if let Some(rp) = self.rp.as_mut() {
            rp.on_bytes(bytes as f64);
            if rp.at_line_rate() {
                self.rp = None;
            }
        }
    }
}
