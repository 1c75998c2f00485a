//! The active open (RFC 9293 §3.5): our SYN with its options (MSS, window scale, timestamps per
//! RFC 7323, SACK-permitted per RFC 2018, ECN setup per RFC 3168 §6.1.1), its retransmission, and
//! what the peer's SYN-ACK settles. A RST in SYN-SENT counts only if it acks our SYN (RFC 9293
//! §3.10.7.3).

use super::{Conn, FailReason, SegOut, State, MIN_MSS_BYTES};
use crate::wire::{TcpFlags, TcpIn};

/// RFC 6298 §5.7: RTO once data starts if the SYN had to be retransmitted.
const RTO_AFTER_SYN_LOSS_US: u64 = 3_000_000;
/// RFC 7323 §2.3: shift counts above 14 are treated as 14.
const MAX_WSCALE: u8 = 14;
/// RFC 9293 §3.7.1 default when the peer sends no MSS option.
const DEFAULT_PEER_MSS: u16 = 536;
const TS_OPTION_BYTES: u16 = 12;

impl Conn {
    pub(super) fn on_syn_sent(&mut self, seg: &TcpIn, now_us: u64) {
        let acceptable_ack = seg.flags.ack && seg.ack == self.seq32(1);
        if seg.flags.rst {
            // RFC 9293 §3.10.7.3: in SYN-SENT a RST counts only if it acks our SYN.
            if acceptable_ack {
                self.fail(FailReason::Reset);
            } else {
                self.reject(|s| &mut s.rej_bad_rst);
            }
            return;
        }
        if !(seg.flags.syn && acceptable_ack) {
            if seg.flags.ack && !acceptable_ack {
                self.rst_owed = Some(seg.ack);
            }
            self.reject(|s| &mut s.rej_bad_synack);
            return;
        }
        self.rcv_nxt = seg.seq.wrapping_add(1);
        self.ts_ok = self.cfg.timestamps && seg.ts.is_some();
        self.sack_ok = self.cfg.sack && seg.sack_permitted;
        // RFC 3168 §6.1.1: an ECN-setup SYN-ACK has ECE set and CWR clear.
        self.ecn_ok = self.syn_ecn_offered && seg.flags.ece && !seg.flags.cwr;
        self.snd_wscale = seg.wscale.map_or(0, |w| w.min(MAX_WSCALE));
        // The peer's MSS counts payload plus TCP options, and with timestamps
        // every segment carries 12 option bytes.
        let peer_mss = seg.mss.unwrap_or(DEFAULT_PEER_MSS);
        let peer_payload = if self.ts_ok { peer_mss.saturating_sub(TS_OPTION_BYTES) } else { peer_mss };
        self.mss = self.cfg.mss_bytes.min(peer_payload).max(MIN_MSS_BYTES);
        if let Some((val, _)) = seg.ts {
            self.ts_recent = val;
        }
        // RFC 7323 §2.2: the window in a SYN-ACK is never scaled.
        self.snd_wnd = u64::from(seg.window);
        self.snd_una = 1;
        self.snd_nxt = 1;
        self.max_right_edge = 1 + self.snd_wnd;
        if !self.cwnd_set_by_controller {
            self.cwnd = self.cfg.init_cwnd_pkts.saturating_mul(u32::from(self.mss));
        }
        self.state = State::Established;
        self.syn_deadline = None;
        self.syn_pending = false;
        self.ack_pending = true;
        // Karn: only a SYN sent once gives an unambiguous sample.
        if self.syn_xmits == 1 {
            self.rtt_update(now_us.saturating_sub(self.syn_sent_us).max(1));
        } else {
            // RFC 6298 §5.7: the SYN was lost, so start data with a 3 s RTO.
            self.rto_us = self.rto_us.max(RTO_AFTER_SYN_LOSS_US).min(self.cfg.rto_max_us);
        }
        self.backoff = 0;
        self.delivered_us = now_us;
        self.first_sent_us = now_us;
        self.next_send_us = now_us;
    }

    /// The SYN timer: retransmit with backoff, or fail after `syn_retries`.
    pub(super) fn on_syn_timer(&mut self, now_us: u64) {
        if self.syn_deadline.is_some_and(|t| now_us >= t) {
            self.syn_deadline = None;
            if self.syn_xmits > self.cfg.syn_retries {
                self.fail(FailReason::SynRetriesExhausted);
            } else {
                self.backoff += 1;
                self.syn_pending = true;
            }
        }
    }

    /// In SYN-SENT: a RST owed to a stale connection of our four-tuple, then our SYN when due.
    pub(super) fn transmit_syn_sent(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> u32 {
        if let Some(seq) = self.rst_owed {
            let rst = SegOut { seq, flags: TcpFlags { rst: true, ..TcpFlags::default() }, ..SegOut::default() };
            if !emit(&rst) {
                return 0;
            }
            self.rst_owed = None;
            self.stats.resets_sent += 1;
        }
        if !self.syn_pending {
            return 0;
        }
        // RFC 3168 §6.1.1.1: a lost ECN-setup SYN may be a middlebox
        // dropping it, so retransmitted SYNs (like Linux's) offer no ECN.
        let offer_ecn = self.cfg.ecn && self.syn_xmits == 0;
        let seg = SegOut {
            seq: self.iss,
            flags: TcpFlags { syn: true, ece: offer_ecn, cwr: offer_ecn, ..TcpFlags::default() },
            window: self.cfg.rcv_window,
            mss: Some(self.cfg.mss_bytes.saturating_add(if self.cfg.timestamps { TS_OPTION_BYTES } else { 0 })),
            wscale: Some(0),
            sack_permitted: self.cfg.sack,
            ts: self.cfg.timestamps.then(|| (self.tsval(now_us), 0)),
            retransmission: self.syn_xmits > 0,
            ..SegOut::default()
        };
        if !emit(&seg) {
            return 0;
        }
        if self.syn_xmits > 0 {
            self.stats.syn_retx += 1;
        }
        self.syn_pending = false;
        self.syn_ecn_offered = offer_ecn;
        self.syn_xmits += 1;
        self.syn_sent_us = now_us;
        self.syn_deadline = Some(now_us + self.current_rto());
        self.stats.segs_sent += 1;
        1
    }
}
