//! RTT estimation and the retransmission timer (RFC 6298): integer SRTT/RTTVAR (§2), Karn's
//! rule with RFC 7323 §4 timestamp samples, the timer's restart on progress (§5.2-5.3), and its
//! expiry with exponential backoff (§5.5-5.6), after which every segment not SACKed is presumed
//! lost (RFC 8985 §6.3, RFC 6675 §5.1).

use super::{Conn, FailReason, TS_TICK_US};

/// RFC 6298 clock granularity G: the RTO is at least SRTT + G.
const RTO_GRANULARITY_US: u64 = 1000;

impl Conn {
    pub(super) fn current_rto(&self) -> u64 {
        let shifted = if self.backoff >= 32 { u64::MAX } else { self.rto_us.saturating_mul(1u64 << self.backoff) };
        shifted.min(self.cfg.rto_max_us).max(self.cfg.rto_min_us)
    }

    pub(super) fn rtt_update(&mut self, rtt: u64) {
        self.min_rtt_us = Some(self.min_rtt_us.map_or(rtt, |m| m.min(rtt)));
        match self.srtt_us {
            None => {
                self.srtt_us = Some(rtt);
                self.rttvar_us = rtt / 2;
            }
            Some(srtt) => {
                // RFC 6298 §2.3 with alpha = 1/8, beta = 1/4.
                let err = srtt.abs_diff(rtt);
                self.rttvar_us = (3 * self.rttvar_us + err) / 4;
                self.srtt_us = Some((7 * srtt + rtt) / 8);
            }
        }
        let srtt = self.srtt_us.unwrap_or(rtt);
        self.rto_us = (srtt + (4 * self.rttvar_us).max(RTO_GRANULARITY_US)).clamp(self.cfg.rto_min_us, self.cfg.rto_max_us);
    }

    /// The RTT sample of one ACK, folded into SRTT: from the newest newly delivered
    /// never-retransmitted segment (`delivered_rtt`: its send time and RTT), else from the TSecr
    /// (`ts`) of an ACK that advanced the cumulative point.
    pub(super) fn sample_rtt(
        &mut self,
        delivered_rtt: Option<(u64, u64)>,
        ts: Option<(u32, u32)>,
        advanced: bool,
        now_us: u64,
    ) -> Option<u32> {
        if let Some((_, rtt)) = delivered_rtt {
            let rtt = rtt.max(1);
            self.rtt_update(rtt);
            return Some(rtt.min(u64::from(u32::MAX)) as u32);
        }
        if advanced && self.ts_ok {
            // RFC 7323 §4: TSecr gives a safe sample even for retransmissions.
            if let Some((_, ecr)) = ts {
                let ticks = self.tsval(now_us).wrapping_sub(ecr);
                if ticks < 1 << 30 {
                    let rtt = (u64::from(ticks) * TS_TICK_US).max(1);
                    self.rtt_update(rtt);
                    return Some(rtt.min(u64::from(u32::MAX)) as u32);
                }
            }
        }
        None
    }

    /// RFC 6298 §5.2-5.3 (and §5.6 after a backoff): run the timer from now while data is
    /// outstanding, else stop it.
    pub(super) fn restart_rto(&mut self, now_us: u64) {
        self.rto_deadline = if self.outstanding() { Some(now_us + self.current_rto()) } else { None };
    }

    /// The timer expired: back off, or fail after `rto_retries`; everything not SACKed is marked
    /// lost and recovery starts over. None when the flow failed, else the segments newly marked.
    pub(super) fn on_rto_expired(&mut self, now_us: u64) -> Option<u32> {
        self.stats.timeouts += 1;
        self.backoff += 1;
        if self.backoff > self.cfg.rto_retries {
            self.fail(FailReason::TooManyTimeouts);
            return None;
        }
        // RFC 8985 §6.3 / RFC 6675 §5.1: after an RTO everything not
        // SACKed is presumed lost, retransmissions included.
        let newly = self.mark_all_lost_by_timeout();
        self.in_recovery = true;
        self.recovery_point = self.snd_nxt;
        self.rack_deadline = None;
        self.tlp_deadline = None;
        self.tlp_pending = false;
        // RFC 6298 §5.5-5.6: back off and restart the timer now.
        self.restart_rto(now_us);
        Some(newly)
    }
}
