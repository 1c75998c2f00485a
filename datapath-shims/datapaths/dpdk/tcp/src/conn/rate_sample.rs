//! Per-ACK delivery-rate samples (draft-cheng-iccrg-delivery-rate-estimation): each
//! (re)transmission snapshots the delivered count and its time (§3.2), and an ACK divides what
//! was delivered since the newest delivered segment's snapshot by its send and ACK intervals
//! (§3.3). Samples over a flight sent while we had nothing more to send are app-limited (§3.4).

use super::ack::{AckSample, Delivery};
use super::Conn;

fn rate(bytes: u64, us: u64) -> u64 {
    (u128::from(bytes) * 1_000_000 / u128::from(us.max(1))).min(u128::from(u64::MAX)) as u64
}

impl Conn {
    /// The delivery state a segment sent now carries: (delivered, delivered_us, first_sent_us).
    pub(super) fn tx_snapshot(&mut self, now_us: u64) -> (u64, u64, u64) {
        // draft-cheng §3.2: an idle restart begins a fresh interval.
        if self.inflight_pkts == 0 {
            self.first_sent_us = now_us;
            self.delivered_us = now_us;
        }
        (self.delivered, self.delivered_us, self.first_sent_us)
    }

    /// Nothing is left to send although cwnd and the peer would allow it: rate samples until
    /// this flight is delivered understate the path (draft-cheng §3.4).
    pub(super) fn mark_app_limited(&mut self) {
        self.app_limited_until = (self.delivered + self.inflight_bytes).max(1);
    }

    /// Delivery rate (draft-cheng-iccrg-delivery-rate-estimation §3.3) of what the ACK
    /// delivered (`d`), into `s`.
    pub(super) fn sample_delivery_rate(&mut self, d: &Delivery, now_us: u64, s: &mut AckSample) {
        if let Some(p) = d.rate_pkt {
            let delta = self.delivered - p.tx_delivered;
            let send_elapsed = p.last_sent_us.saturating_sub(p.tx_first_sent_us);
            let ack_elapsed = now_us.saturating_sub(p.tx_delivered_us);
            let interval = send_elapsed.max(ack_elapsed);
            if interval > 0 && interval >= self.min_rtt_us.unwrap_or(0) {
                if send_elapsed > 0 {
                    s.rate_outgoing = rate(delta, send_elapsed);
                }
                if ack_elapsed > 0 {
                    s.rate_incoming = rate(delta, ack_elapsed);
                }
            }
            s.rate_app_limited = p.tx_app_limited;
            self.first_sent_us = p.last_sent_us;
        }
        if self.app_limited_until > 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        if d.any {
            self.delivered_us = now_us;
        }
    }
}
