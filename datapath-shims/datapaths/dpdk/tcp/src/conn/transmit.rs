//! Sending in a synchronized state, in order of precedence: a tail loss probe when due,
//! retransmissions of segments marked lost, new data within cwnd and the peer's window (with a
//! zero-window probe per RFC 9293 §3.8.6.1 when the window is closed), our FIN, and a pure ACK if
//! one is owed. New data carries ECT(0) and CWR per RFC 3168 §6.1.2.

use super::scoreboard::Seg;
use super::{Conn, SegOut, State};
use crate::wire::TcpFlags;

impl Conn {
    pub(super) fn transmit_synchronized(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> u32 {
        let mut n = 0;
        loop {
            if self.paced_out(now_us) {
                break;
            }
            if self.tlp_pending {
                self.tlp_pending = false;
                if self.send_tail_probe(now_us, emit) {
                    n += 1;
                    continue;
                }
            }
            let sent = if self.lost_pkts > 0 {
                self.retransmit_first_lost(now_us, emit)
            } else if self.has_unsent_data() {
                self.send_new_data(now_us, emit)
            } else if self.total_bytes.is_some() && !self.fin_queued {
                self.send_fin(now_us, emit)
            } else {
                self.mark_app_limited();
                false
            };
            if !sent {
                break;
            }
            n += 1;
        }
        if self.ack_pending && self.send_pure_ack(now_us, emit) {
            n += 1;
        }
        n
    }

    /// Retransmits the lowest segment marked lost if cwnd allows; false when nothing was sent.
    fn retransmit_first_lost(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> bool {
        let Some(i) = self.first_lost() else { return false };
        let g = self.scoreboard[i];
        if !self.cwnd_allows(g.len) {
            return false;
        }
        if !emit(&self.retransmission_of(&g, now_us)) {
            return false;
        }
        self.stamp_resent(i, now_us);
        self.scoreboard[i].lost = false;
        self.tsorted.insert((now_us, g.end()));
        self.lost_pkts -= 1;
        self.lost_ends.remove(&g.end());
        self.inflight_bytes += u64::from(g.len);
        self.inflight_pkts += 1;
        self.stats.retx_segs += 1;
        self.stats.retx_bytes += u64::from(g.len);
        if !g.lost_by_timeout {
            self.stats.fast_retx += 1;
        }
        self.after_send(g.len, now_us);
        true
    }

    /// The length of the next segment of new data, and the stream bytes left to send
    /// (u64::MAX when unlimited).
    pub(super) fn next_new_len(&self) -> (u32, u64) {
        let remaining = self.data_end().map_or(u64::MAX, |e| e - self.snd_nxt);
        (u64::from(self.mss).min(remaining) as u32, remaining)
    }

    /// The segment that sends `len` bytes of new data at snd_nxt, ECT(0) when ECN is on, PSH
    /// on the last of the `remaining` bytes.
    pub(super) fn new_data_seg(&self, len: u32, remaining: u64, now_us: u64) -> SegOut {
        let mut seg = self.base_seg(now_us);
        seg.seq = self.seq32(self.snd_nxt);
        seg.stream_offset = self.snd_nxt - 1;
        seg.payload_len = len as u16;
        seg.ect = self.ecn_ok;
        seg.flags.psh = u64::from(len) == remaining;
        seg
    }

    /// The segment that sends `g` (a scoreboard entry) again.
    pub(super) fn retransmission_of(&self, g: &Seg, now_us: u64) -> SegOut {
        let mut seg = self.base_seg(now_us);
        seg.seq = self.seq32(g.start);
        seg.stream_offset = g.start - 1;
        seg.payload_len = g.len as u16;
        seg.flags.fin = g.fin;
        seg.retransmission = true;
        seg
    }

    /// Records that the scoreboard entry at `i` was sent again at `now_us`, with the delivery
    /// state its rate sample will start from.
    pub(super) fn stamp_resent(&mut self, i: usize, now_us: u64) {
        let snapshot = self.tx_snapshot(now_us);
        let app_limited = self.app_limited_until > 0;
        let g = &mut self.scoreboard[i];
        g.xmits += 1;
        g.last_sent_us = now_us;
        (g.tx_delivered, g.tx_delivered_us, g.tx_first_sent_us) = snapshot;
        g.tx_app_limited = app_limited;
    }

    /// Sends the next segment of new data if the peer's window (or a zero-window probe) and
    /// cwnd allow; false when nothing was sent.
    fn send_new_data(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> bool {
        let (len, remaining) = self.next_new_len();
        let right_edge = self.snd_una + self.snd_wnd;
        let in_window = self.snd_nxt + u64::from(len) <= right_edge;
        if !in_window && !self.probe_allowed {
            if !self.outstanding() && self.persist_deadline.is_none() {
                // RFC 9293 §3.8.6.1: probe a zero window, or we would wait forever.
                self.persist_deadline = Some(now_us + self.current_rto());
            }
            return false;
        }
        if !self.cwnd_allows(len) {
            return false;
        }
        let mut seg = self.new_data_seg(len, remaining, now_us);
        seg.flags.cwr = self.ecn_ok && self.cwr_pending;
        if !emit(&seg) {
            return false;
        }
        if !in_window {
            self.probe_allowed = false;
            self.stats.zero_window_probes += 1;
        }
        if seg.flags.cwr {
            self.cwr_pending = false;
            self.cwr_high = self.snd_nxt + u64::from(len);
            self.stats.cwr_sent += 1;
        }
        self.push_new(len, false, now_us);
        self.stats.bytes_sent_total += u64::from(len);
        self.arm_tlp(now_us);
        true
    }

    /// Sends our FIN once all data is sent, if cwnd allows; false when nothing was sent.
    fn send_fin(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> bool {
        if !self.cwnd_allows(0) {
            return false;
        }
        let mut seg = self.base_seg(now_us);
        seg.seq = self.seq32(self.snd_nxt);
        seg.stream_offset = self.snd_nxt - 1;
        seg.flags.fin = true;
        if !emit(&seg) {
            return false;
        }
        self.push_new(0, true, now_us);
        self.fin_queued = true;
        self.state = State::FinSent;
        true
    }

    /// Sends the ACK owed (to a SYN-ACK, a FIN, a challenge); false when `emit` had no room.
    pub(super) fn send_pure_ack(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> bool {
        let mut seg = self.base_seg(now_us);
        seg.seq = self.seq32(self.snd_nxt);
        seg.stream_offset = self.snd_nxt - 1;
        if !emit(&seg) {
            return false;
        }
        self.ack_pending = false;
        self.stats.pure_acks_sent += 1;
        true
    }

    pub(super) fn base_seg(&self, now_us: u64) -> SegOut {
        SegOut {
            ack: self.rcv_nxt,
            flags: TcpFlags { ack: true, ..TcpFlags::default() },
            window: self.cfg.rcv_window,
            ts: self.ts_ok.then(|| (self.tsval(now_us), self.ts_recent)),
            ..SegOut::default()
        }
    }

    pub(super) fn cwnd_allows(&self, len: u32) -> bool {
        let pipe = self.inflight_bytes;
        pipe + u64::from(len) <= u64::from(self.cwnd) || (self.inflight_pkts == 0 && self.cwnd > 0)
    }

    /// Puts a first transmission of `len` bytes (and our FIN if `fin`) on the scoreboard.
    pub(super) fn push_new(&mut self, len: u32, fin: bool, now_us: u64) {
        let (tx_delivered, tx_delivered_us, tx_first_sent_us) = self.tx_snapshot(now_us);
        let g = Seg {
            start: self.snd_nxt,
            len,
            fin,
            last_sent_us: now_us,
            xmits: 1,
            sacked: false,
            lost: false,
            lost_by_timeout: false,
            tx_delivered,
            tx_delivered_us,
            tx_first_sent_us,
            tx_app_limited: self.app_limited_until > 0,
        };
        self.snd_nxt = g.end();
        self.tsorted.insert((now_us, g.end()));
        self.scoreboard.push_back(g);
        self.inflight_bytes += u64::from(len);
        self.inflight_pkts += 1;
        self.after_send(len, now_us);
    }

    pub(super) fn after_send(&mut self, len: u32, now_us: u64) {
        self.ack_pending = false;
        self.stats.segs_sent += 1;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now_us + self.current_rto());
        }
        self.pace(len, now_us);
    }
}
