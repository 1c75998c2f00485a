//! Loss recovery episodes: which detector marks losses on an ACK (RACK with SACK, else three
//! duplicate ACKs per RFC 5681 §3.2 and NewReno partial ACKs per RFC 6582 §3.2), and the
//! recovery point that ends an episode (RFC 6675 §5).

use super::Conn;

impl Conn {
    /// Marks the losses one ACK reveals (`advanced`: it moved the cumulative point); returns how
    /// many segments were newly marked.
    pub(super) fn detect_loss_on_ack(&mut self, advanced: bool, now_us: u64) -> u32 {
        if self.sack_ok {
            self.rack_detect_loss(now_us)
        } else if self.dupacks == self.cfg.dupthresh {
            // Without SACK, RACK would take every segment sent before a
            // delivered one for lost (cumulative ACKs cannot show what
            // arrived beyond a hole); Linux likewise falls back to NewReno.
            self.mark_first_lost()
        } else if advanced && self.in_recovery && self.snd_una < self.recovery_point {
            // RFC 6582 §3.2 step 5: a partial ACK reveals the next hole.
            self.mark_first_lost()
        } else {
            0
        }
    }

    /// RFC 5681 §3.2 fast retransmit without SACK: the first unacked
    /// segment, unless it was already retransmitted.
    fn mark_first_lost(&mut self) -> u32 {
        match self.scoreboard.front() {
            Some(g) if !g.lost && !g.sacked && g.xmits == 1 => {
                self.tsorted.remove(&(g.last_sent_us, g.end()));
                self.mark_lost(0);
                self.stats.lost_marked += 1;
                1
            }
            _ => 0,
        }
    }

    /// A loss starts an episode that lasts until everything sent before it is acknowledged.
    pub(super) fn enter_recovery(&mut self) {
        if !self.in_recovery {
            self.in_recovery = true;
            self.recovery_point = self.snd_nxt;
        }
    }

    pub(super) fn end_recovery_if_done(&mut self) {
        if self.in_recovery && self.snd_una >= self.recovery_point {
            self.in_recovery = false;
            self.rack_on_recovery_end();
        }
    }
}
