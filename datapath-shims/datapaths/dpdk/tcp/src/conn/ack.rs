//! One ACK in a synchronized state, step by step: its acceptance (RFC 9293 §3.10.7.4), the peer's
//! window, the SACK blocks and the cumulative point on the scoreboard, the RTT and delivery-rate
//! samples, the retransmission timer, loss detection and the recovery episode, ECN-Echo (RFC 3168
//! §6.1.2), our FIN's acknowledgement and the tail loss probe — and what it measured
//! ([`AckSample`]).

use super::scoreboard::Seg;
use super::{Conn, State};
use crate::wire::TcpIn;

/// What one ACK (or one timer expiry) measured: libccp's per-ACK primitives.
///
/// Byte accounting convention (Linux/libccp): `bytes_acked` counts bytes newly
/// covered by the cumulative ACK that had *not* been SACKed before;
/// `bytes_misordered` counts bytes newly SACKed. Every payload byte is counted
/// exactly once in one of the two, so over a transfer of N bytes
/// Σ(bytes_acked + bytes_misordered) == N. A FIN counts as a packet but 0 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckSample {
    pub bytes_acked: u32,
    pub packets_acked: u32,
    pub bytes_misordered: u32,
    pub packets_misordered: u32,
    /// Bytes/packets delivered (acked + SACKed) by this ACK when it carried ECE.
    pub ecn_bytes: u32,
    pub ecn_packets: u32,
    /// Segments newly marked lost by this ACK (RACK / DupThresh) or this timeout.
    pub lost_pkts_sample: u32,
    pub was_timeout: bool,
    /// From the newest newly delivered never-retransmitted segment, else from
    /// TSecr (1 ms resolution) on an ACK that advanced the cumulative point.
    pub rtt_sample_us: Option<u32>,
    /// Delivery-rate estimation over the newest delivered segment's interval:
    /// delivered bytes / send interval and / ACK interval, in bytes/s. 0 when
    /// unknown or when the interval is shorter than min RTT (ACK compression).
    pub rate_outgoing: u64,
    pub rate_incoming: u64,
    /// The rates above were measured over a flight sent while we had nothing
    /// more to send, so they can understate the path (draft-cheng §3.4).
    pub rate_app_limited: bool,
    /// RFC 6675 pipe after processing: sent - SACKed - marked lost (+ retransmitted).
    pub bytes_in_flight: u32,
    pub packets_in_flight: u32,
    /// Stream bytes not yet cumulatively acknowledged; u32::MAX when unlimited.
    pub bytes_pending: u32,
    pub now_us: u64,
}

/// What one ACK delivered, gathered segment by segment.
#[derive(Default)]
pub(super) struct Delivery {
    pub(super) any: bool,
    pub(super) acked_bytes: u64,
    pub(super) acked_pkts: u32,
    pub(super) sacked_bytes: u64,
    pub(super) sacked_pkts: u32,
    /// (send time, rtt) of the newest never-retransmitted delivered segment.
    pub(super) rtt: Option<(u64, u64)>,
    /// The delivered segment with the newest delivery snapshot.
    pub(super) rate_pkt: Option<Seg>,
}

impl Delivery {
    /// Keeps `g` (newly delivered) as the RTT and rate sample if it is the best so far.
    pub(super) fn note(&mut self, g: &Seg, now_us: u64) {
        if g.xmits == 1 && self.rtt.is_none_or(|(t, _)| g.last_sent_us >= t) {
            self.rtt = Some((g.last_sent_us, now_us.saturating_sub(g.last_sent_us)));
        }
        if self.rate_pkt.is_none_or(|p| (g.tx_delivered, g.last_sent_us) > (p.tx_delivered, p.last_sent_us)) {
            self.rate_pkt = Some(*g);
        }
    }

    /// The sample's delivery counts.
    fn sample(&self, now_us: u64) -> AckSample {
        AckSample {
            now_us,
            bytes_acked: self.acked_bytes.min(u64::from(u32::MAX)) as u32,
            packets_acked: self.acked_pkts,
            bytes_misordered: self.sacked_bytes.min(u64::from(u32::MAX)) as u32,
            packets_misordered: self.sacked_pkts,
            ..AckSample::default()
        }
    }
}

impl Conn {
    pub(super) fn process_ack(&mut self, seg: &TcpIn, now_us: u64) -> Option<AckSample> {
        let new_una = self.acceptable_ack(seg.ack)?;
        let advanced = new_una > self.snd_una;
        let window_changed = self.update_peer_window(seg.window, new_una);

        let mut d = Delivery::default();
        if self.sack_ok {
            self.apply_sack_blocks(seg.sack_blocks(), new_una, now_us, &mut d);
        }
        self.ack_cumulative(new_una, now_us, &mut d);
        if advanced {
            self.advance_una(new_una);
        } else if self.is_dupack(seg, window_changed) {
            self.dupacks += 1;
        }

        let mut s = d.sample(now_us);
        s.rtt_sample_us = self.sample_rtt(d.rtt, seg.ts, advanced, now_us);
        self.sample_delivery_rate(&d, now_us, &mut s);
        if advanced {
            self.restart_rto(now_us);
        }

        let lost = self.detect_loss_on_ack(advanced, now_us);
        if lost > 0 {
            self.enter_recovery();
        }
        self.end_recovery_if_done();
        s.lost_pkts_sample = lost;

        let ece = self.ecn_ok && seg.flags.ece;
        if ece {
            self.on_ece(&mut s);
        }
        self.close_if_fin_acked();
        self.arm_tlp(now_us);

        if d.any || lost > 0 || ece {
            Some(self.finish_sample(s))
        } else {
            None
        }
    }

    /// The stream sequence the ACK number `ack` acknowledges up to, or None (counted) when it
    /// acknowledges something never sent or is older than snd_una.
    fn acceptable_ack(&mut self, ack: u32) -> Option<u64> {
        let ack = self.unwrap_seq(ack);
        if ack > i128::from(self.snd_nxt) {
            self.reject(|s| &mut s.rej_ack_unsent);
            return None;
        }
        if ack < i128::from(self.snd_una) {
            // Reordered ACK: its information is already superseded.
            self.reject(|s| &mut s.rej_old_ack);
            return None;
        }
        Some(ack as u64)
    }

    /// Takes the peer's window (`window`, unscaled) from an ACK of `new_una`; returns whether it
    /// changed.
    fn update_peer_window(&mut self, window: u16, new_una: u64) -> bool {
        let wnd = u64::from(window) << self.snd_wscale;
        let right = new_una + wnd;
        if right < self.max_right_edge {
            self.stats.window_shrinks += 1;
        }
        let window_changed = wnd != self.snd_wnd;
        self.snd_wnd = wnd;
        self.max_right_edge = self.max_right_edge.max(right);
        if wnd > 0 {
            self.persist_deadline = None;
        }
        window_changed
    }

    /// The cumulative point moved to `new_una`: progress resets the duplicate count, the backoff
    /// and the outstanding probe.
    fn advance_una(&mut self, new_una: u64) {
        self.sacked_trim_below(new_una);
        let data_end = self.data_end().unwrap_or(u64::MAX);
        let acked_stream = new_una.min(data_end) - 1;
        self.stats.bytes_acked_total = acked_stream;
        self.snd_una = new_una;
        self.dupacks = 0;
        self.backoff = 0;
        self.tlp_outstanding = false;
    }

    /// RFC 5681 §2's duplicate ACK of an ACK that did not advance (counted only without SACK):
    /// data is outstanding and it carries no data, no window update and no FIN.
    fn is_dupack(&self, seg: &TcpIn, window_changed: bool) -> bool {
        !self.sack_ok && self.inflight_pkts + self.lost_pkts > 0 && seg.payload_len == 0 && !window_changed && !seg.flags.fin
    }

    /// An ACK with ECE: its deliveries count as marked, and our next new segment carries CWR
    /// unless one already answered this window.
    fn on_ece(&mut self, s: &mut AckSample) {
        self.stats.ece_acks += 1;
        s.ecn_bytes = s.bytes_acked.saturating_add(s.bytes_misordered);
        s.ecn_packets = s.packets_acked + s.packets_misordered;
        // RFC 3168 §6.1.2: react (and send CWR) at most once per window.
        if self.snd_una >= self.cwr_high {
            self.cwr_pending = true;
        }
    }

    fn close_if_fin_acked(&mut self) {
        if self.fin_queued && self.snd_una >= self.snd_nxt && self.state == State::FinSent {
            self.state = State::Closed;
            self.rto_deadline = None;
            self.rack_deadline = None;
            self.persist_deadline = None;
            self.tlp_deadline = None;
        }
    }

    /// Completes a sample with the pipe and what is left to send, after processing.
    pub(super) fn finish_sample(&self, mut s: AckSample) -> AckSample {
        s.bytes_in_flight = self.inflight_bytes.min(u64::from(u32::MAX)) as u32;
        s.packets_in_flight = self.inflight_pkts;
        s.bytes_pending = self.pending_bytes();
        s
    }
}
