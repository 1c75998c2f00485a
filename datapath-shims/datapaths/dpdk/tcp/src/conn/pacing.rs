//! Pacing: with a rate set from outside, segments leave `payload_len / rate` apart, with a
//! bucket of `Config::pacing_burst_bytes` for catching up after an idle or slow period.

use super::Conn;

impl Conn {
    /// Whether the pacer holds the next segment back at `now_us`.
    pub(super) fn paced_out(&self, now_us: u64) -> bool {
        self.rate_bytes_per_s > 0 && self.next_send_us > now_us
    }

    /// Spaces the segment after one of `len` bytes sent at `now_us`.
    pub(super) fn pace(&mut self, len: u32, now_us: u64) {
        if self.rate_bytes_per_s == 0 {
            return;
        }
        let r = u128::from(self.rate_bytes_per_s);
        let credit_us = (u128::from(self.cfg.pacing_burst_bytes) * 1_000_000 / r) as u64;
        let gap_us = (u128::from(len) * 1_000_000).div_ceil(r) as u64;
        self.next_send_us = self.next_send_us.max(now_us.saturating_sub(credit_us)) + gap_us;
    }

    /// Whether `poll_transmit` would send something if the pacer allowed it
    /// (the same order and checks as `transmit_synchronized`).
    pub(super) fn sendable_ignoring_pacing(&self) -> bool {
        if self.tlp_pending {
            return true;
        }
        if self.lost_pkts > 0 {
            return self.first_lost().is_some_and(|i| self.cwnd_allows(self.scoreboard[i].len));
        }
        if self.has_unsent_data() {
            let (len, _) = self.next_new_len();
            let in_window = self.snd_nxt + u64::from(len) <= self.snd_una + self.snd_wnd || self.probe_allowed;
            return in_window && self.cwnd_allows(len);
        }
        self.total_bytes.is_some() && !self.fin_queued && self.cwnd_allows(0)
    }
}
