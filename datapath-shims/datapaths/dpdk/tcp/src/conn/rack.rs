//! Loss detection by RACK (RFC 8985 §6): a segment is lost once a segment sent after it was
//! delivered and RACK.rtt + reo_wnd passed since it was sent. reo_wnd is 0 while no reordering
//! was seen and enough was SACKed (the DupThresh rule §6.2 keeps), else grows with D-SACKs.

use super::scoreboard::Seg;
use super::Conn;

/// RFC 8985 §6.2 step 4: recoveries without a D-SACK before reo_wnd shrinks back.
const REO_WND_PERSIST: u32 = 16;
/// reo_wnd is capped at SRTT anyway; this only bounds the counter.
const REO_WND_MULT_MAX: u32 = 64;

/// RFC 8985 RACK_sent_after: later send time wins, equal times go by sequence.
fn sent_after(t1: u64, end1: u64, t2: u64, end2: u64) -> bool {
    t1 > t2 || (t1 == t2 && end1 > end2)
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rack {
    valid: bool,
    xmit_us: u64,
    end_seq: u64,
    rtt_us: u64,
    /// Highest end sequence delivered (forward-most ACKed/SACKed).
    fack: u64,
    reordering_seen: bool,
    /// RFC 8985 §6.2 step 4: reo_wnd = mult × min_rtt/4, grown by D-SACKs
    /// (at most once per round) and reset after `REO_WND_PERSIST` recoveries.
    reo_wnd_mult: u32,
    dsack_round_end: Option<u64>,
    reo_wnd_persist: u32,
}

impl Rack {
    pub(super) fn new() -> Rack {
        Rack { reo_wnd_mult: 1, ..Rack::default() }
    }
}

impl Conn {
    /// RFC 8985 §6.2 steps 1-3 for a newly delivered segment `g` (its state before delivery).
    pub(super) fn rack_on_delivered(&mut self, g: &Seg, now_us: u64) {
        let end = g.end();
        // RFC 8985 §6.2 step 1-2: a retransmission delivered faster than
        // min RTT was probably the original arriving late; skip it.
        let ambiguous = g.xmits > 1 && now_us.saturating_sub(g.last_sent_us) < self.min_rtt_us.unwrap_or(0);
        if !ambiguous {
            self.rack.rtt_us = now_us.saturating_sub(g.last_sent_us);
            if !self.rack.valid || sent_after(g.last_sent_us, end, self.rack.xmit_us, self.rack.end_seq) {
                self.rack.xmit_us = g.last_sent_us;
                self.rack.end_seq = end;
            }
            self.rack.valid = true;
        }
        // RFC 8985 §6.2 step 3: an original transmission delivered below the
        // forward-most delivery means the path reorders.
        if g.xmits == 1 && end < self.rack.fack && !self.rack.reordering_seen {
            self.rack.reordering_seen = true;
            self.stats.reordering_events += 1;
        }
        self.rack.fack = self.rack.fack.max(end);
    }

    fn reo_wnd(&self) -> u64 {
        if !self.rack.reordering_seen && (self.in_recovery || self.sacked_pkts >= self.cfg.dupthresh) {
            return 0;
        }
        let wnd = u64::from(self.rack.reo_wnd_mult.max(1)) * (self.min_rtt_us.unwrap_or(0) / 4);
        wnd.min(self.srtt_us.unwrap_or(wnd))
    }

    /// A D-SACK means a segment arrived twice: usually a retransmission the
    /// original overtook, i.e. reordering (Linux counts it the same way).
    pub(super) fn on_dsack(&mut self) {
        self.stats.dsack_blocks += 1;
        if !self.rack.reordering_seen {
            self.rack.reordering_seen = true;
            self.stats.reordering_events += 1;
        }
        if self.rack.dsack_round_end.is_none_or(|end| self.snd_una >= end) {
            self.rack.reo_wnd_mult = self.rack.reo_wnd_mult.saturating_add(1).min(REO_WND_MULT_MAX);
            self.rack.dsack_round_end = Some(self.snd_nxt);
            self.rack.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// RFC 8985 §6.2 step 4: after `REO_WND_PERSIST` recoveries without a D-SACK, reo_wnd
    /// shrinks back to its base.
    pub(super) fn rack_on_recovery_end(&mut self) {
        self.rack.reo_wnd_persist = self.rack.reo_wnd_persist.saturating_sub(1);
        if self.rack.reo_wnd_persist == 0 {
            self.rack.reo_wnd_mult = 1;
        }
    }

    /// RFC 8985 §6.2 step 5: a segment is lost when a segment sent after it
    /// was delivered and more than RACK.rtt + reo_wnd passed since it was sent.
    pub(super) fn rack_detect_loss(&mut self, now_us: u64) -> u32 {
        self.rack_deadline = None;
        if !self.rack.valid {
            return 0;
        }
        let reo_wnd = self.reo_wnd();
        let rack = self.rack;
        let mut newly = 0;
        // Deadlines grow with send time, so the oldest in-flight segment
        // decides: once one is not yet due, none after it is.
        while let Some(&(sent_us, end)) = self.tsorted.first() {
            if !sent_after(rack.xmit_us, rack.end_seq, sent_us, end) {
                break;
            }
            let deadline = sent_us + rack.rtt_us + reo_wnd;
            if now_us < deadline {
                self.rack_deadline = Some(deadline);
                break;
            }
            self.tsorted.pop_first();
            let i = self.scoreboard.partition_point(|g| g.end() < end);
            if !self.scoreboard.get(i).is_some_and(|g| g.end() == end && !g.sacked && !g.lost) {
                debug_assert!(false, "tsorted entry without an in-flight segment");
                continue;
            }
            self.mark_lost(i);
            newly += 1;
        }
        self.stats.lost_marked += u64::from(newly);
        newly
    }
}
