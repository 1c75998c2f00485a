//! Tail loss probes (RFC 8985 §7): when the last segments of a flight are lost no later segment
//! is delivered for RACK to go by, so after ~2 SRTT without an ACK one segment is sent to draw
//! the ACK whose SACK blocks reveal the loss, instead of waiting for the RTO.

use super::{Conn, SegOut, State};

/// RFC 8985 §7.2 WCDelAckT: worst-case delayed-ACK time of the receiver.
const TLP_DELAYED_ACK_US: u64 = 200_000;
/// Linux's floor for the probe timeout (TCP_TIMEOUT_MIN, 2 jiffies ≈ 2 ms at HZ=1000).
const TLP_MIN_PTO_US: u64 = 2_000;

impl Conn {
    /// RFC 8985 §7.2: schedule a probe timeout while data is outstanding and
    /// no recovery is under way, so a lost tail is found in ~2 RTT instead of
    /// an RTO. Needs SACK, which is what turns the probe's ACK into loss marks.
    pub(super) fn arm_tlp(&mut self, now_us: u64) {
        self.tlp_deadline = None;
        let active = matches!(self.state, State::Established | State::FinSent);
        let Some(srtt) = self.srtt_us else { return };
        if !active || !self.sack_ok || self.in_recovery || self.tlp_outstanding || self.lost_pkts > 0 || !self.outstanding() {
            return;
        }
        let mut pto = 2 * srtt;
        if self.inflight_pkts == 1 {
            // A lone segment may sit in the receiver's delayed-ACK timer.
            pto = pto.max(srtt + srtt / 2 + TLP_DELAYED_ACK_US);
        }
        let at = now_us + pto.max(TLP_MIN_PTO_US);
        if self.rto_deadline.is_none_or(|rto| at < rto) {
            self.tlp_deadline = Some(at);
        }
    }

    /// RFC 8985 §7.3: one new segment if the receive window allows, else the
    /// highest-sequence outstanding segment again. Bypasses cwnd by design.
    pub(super) fn send_tail_probe(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> bool {
        if !matches!(self.state, State::Established | State::FinSent) || self.in_recovery {
            return false;
        }
        let sent = if self.has_unsent_data() {
            let (len, remaining) = self.next_new_len();
            if self.snd_nxt + u64::from(len) > self.snd_una + self.snd_wnd {
                return false;
            }
            if !emit(&self.new_data_seg(len, remaining, now_us)) {
                return false;
            }
            self.push_new(len, false, now_us);
            self.stats.bytes_sent_total += u64::from(len);
            true
        } else {
            let Some(i) = self.scoreboard.iter().rposition(|g| !g.sacked && !g.lost) else { return false };
            let g = self.scoreboard[i];
            if !emit(&self.retransmission_of(&g, now_us)) {
                return false;
            }
            self.tsorted.remove(&(g.last_sent_us, g.end()));
            self.stamp_resent(i, now_us);
            self.tsorted.insert((now_us, g.end()));
            self.stats.retx_segs += 1;
            self.stats.retx_bytes += u64::from(g.len);
            self.after_send(g.len, now_us);
            true
        };
        if sent {
            self.stats.tlp_probes += 1;
            self.tlp_outstanding = true;
            self.tlp_deadline = None;
            // RFC 8985 §7.3: the RTO restarts from the probe.
            self.rto_deadline = Some(now_us + self.current_rto());
        }
        sent
    }
}
