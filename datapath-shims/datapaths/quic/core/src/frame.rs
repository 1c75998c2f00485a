//! quinn's congestion callbacks, one ACK frame at a time.
//!
//! quinn-proto 0.11 tells a controller about one ACK frame in this order, all with the same `now`:
//! `on_ack` once per newly acknowledged ack-eliciting packet (with the time it was sent), then
//! `on_end_acks` (bytes in flight, app-limited), then — from the same frame — at most one
//! `on_congestion_event` for newly lost packets and at most one with `lost_bytes = 0` when the
//! peer's ECN-CE count went up. A frame is therefore complete only at the next callback with a
//! later `now`: [`Frames`] closes it there and hands back its [`FrameSample`], so a frame's acks,
//! losses and CE stay together. A loss declared by quinn's timer, with no frame, is a sample of
//! its own.
//!
//! What a sample measures, and how it departs from a TCP ACK's:
//! - **RTT**: `now` minus the send time of the newest packet the frame acknowledges (the
//!   kernel's rate-sample RTT; ack delay included, as in TCP).
//! - **Cumulative and selective**: TCP's cumulative ACK moves past a lost segment only when its
//!   retransmission is acknowledged, and algorithms end a congestion event when the flight at the
//!   cut has been cumulatively acknowledged (`algorithms/src/window.rs`). QUIC has no cumulative
//!   ACK, and a lost packet is never acknowledged: its data goes again in a new packet. So from a
//!   loss until a packet sent after it is acknowledged — and not before every packet sent before
//!   it has been acknowledged or declared lost, which RFC 9002's time threshold (§6.1.2) bounds
//!   at 9/8 of the RTT — acknowledgements are selective (`sacked_*`); then the cumulative point
//!   moves over everything held back, as TCP's `snd_una` jumps over SACKed data. Without this a
//!   tail loss that QUIC declares by its time threshold came after the flight at the cut was
//!   acknowledged, and Reno cut twice for one drop-tail overflow in about half the overflows
//!   (50 Mbit/s, 20 ms, 1 BDP).
//! - **Loss**: quinn gives lost bytes, not packets: `lost_pkts` is the bytes in datagrams of the
//!   current size, rounded up. Persistent congestion (RFC 9002 §7.6) is QUIC's counterpart of an
//!   RTO collapse.
//! - **ECN**: quinn 0.11 does not pass CE counts to a controller (quinn#2487), only that a frame
//!   raised the peer's CE count. Such a frame counts one CE packet, the newest it acknowledged:
//!   a QUIC receiver acknowledges a CE-marked packet at once (RFC 9000 §13.2.1; quinn sets
//!   `immediate_ack_required`), so the mark that raised the count is most likely the frame's
//!   last packet, and any others arrived in the same receive batch. This is a lower bound.
//!   Against the router's own marks it counted 0.79× of them (DCTCP, K = 20, 50 Mbit/s) and
//!   0.76× (ABC on the LTE trace); the kernel's ECE-ACK accounting (every byte of the frame
//!   marked, as `tcp_dctcp.c` counts an ACK with ECE) counted 1.62× and 1.79×, and collapsed ABC
//!   to 30 % of the link (0.88-0.91 with this rule). Exact counts need quinn#2487.
//! - **Rates** (the kernel's rate sample, `tcp_rate.c`): the bytes delivered since the last
//!   frame before the newest acknowledged packet was sent, over the time between the two frames
//!   (delivery) and between the send times of the newest packets they acknowledged (send).

use std::collections::VecDeque;

/// One closed ACK frame (or a timer's loss), in TCP's terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameSample {
    /// The frame's `now`, µs on the connection's clock.
    pub now_us: u64,
    /// Cumulatively acknowledged: bytes the cumulative point moved over (held bytes included),
    /// and packets first delivered with it.
    pub acked_bytes: u64,
    pub acked_pkts: u64,
    /// Selectively acknowledged (beyond a loss).
    pub sacked_bytes: u64,
    pub sacked_pkts: u64,
    /// Every byte and packet the frame acknowledged, cumulatively or not.
    pub delivered_bytes: u64,
    pub delivered_pkts: u64,
    pub ce_bytes: u64,
    pub ce_pkts: u64,
    /// The frame raised the peer's CE count.
    pub ece: bool,
    pub lost_pkts: u64,
    /// RFC 9002's persistent congestion.
    pub persistent_congestion: bool,
    pub rtt_us: Option<u64>,
    /// Send time of the newest packet the frame acknowledged.
    pub newest_sent_us: Option<u64>,
    /// Size of that packet, bytes.
    pub newest_bytes: u64,
    /// (send rate, delivery rate), bytes/s.
    pub rates: Option<(u64, u64)>,
    /// Bytes in flight after the frame, and whether the sender was app-limited before it; `None`
    /// when quinn ended no batch of acks with it.
    pub inflight_bytes: Option<u64>,
    pub app_limited: Option<bool>,
}

/// A loss holding the cumulative point back.
#[derive(Debug, Clone, Copy)]
struct Hole {
    /// When it was declared: a packet sent after this is the retransmission's round trip.
    since_us: u64,
    /// When every packet sent before it is sure to be acknowledged or declared lost.
    settled_us: u64,
}

/// A closed frame's delivery state, for later rate samples.
#[derive(Debug, Clone, Copy)]
struct Delivered {
    now_us: u64,
    newest_sent_us: u64,
    cum_bytes: u64,
}

/// Frames kept for rate samples: enough for any RTT at one frame per two packets up to a few
/// thousand packets in flight; an older start falls back to the oldest kept.
const HISTORY: usize = 4096;

/// The open frame, and what outlives frames: the loss holding the cumulative point back, the
/// bytes held behind it, the RTT for its time threshold, the delivery history for rates.
#[derive(Debug, Clone, Default)]
pub struct Frames {
    open: Option<FrameSample>,
    hole: Option<Hole>,
    held_bytes: u64,
    srtt_us: Option<u64>,
    rtt_last_us: u64,
    cum_delivered: u64,
    history: VecDeque<Delivered>,
}

impl Frames {
    /// One newly acknowledged packet of `bytes`, sent at `sent_us`; `srtt_us` is quinn's smoothed
    /// RTT as it passed it. Returns the frame this call closed, if any.
    pub fn on_ack(&mut self, now_us: u64, sent_us: u64, bytes: u64, srtt_us: Option<u64>) -> Option<FrameSample> {
        let closed = self.close_before(now_us);
        if srtt_us.is_some() {
            self.srtt_us = srtt_us;
        }
        let selective = self.hole.is_some_and(|h| sent_us <= h.since_us || now_us < h.settled_us);
        let moved = if selective {
            self.held_bytes += bytes;
            0
        } else {
            self.hole = None;
            bytes + std::mem::take(&mut self.held_bytes)
        };
        let s = self.open_at(now_us);
        s.delivered_bytes += bytes;
        s.delivered_pkts += 1;
        if s.newest_sent_us.is_none_or(|n| sent_us >= n) {
            (s.newest_sent_us, s.newest_bytes) = (Some(sent_us), bytes);
        }
        if selective {
            s.sacked_bytes += bytes;
            s.sacked_pkts += 1;
        } else {
            s.acked_bytes += moved;
            s.acked_pkts += 1;
        }
        closed
    }

    /// The frame's acks are all in.
    pub fn on_end_acks(&mut self, now_us: u64, inflight_bytes: u64, app_limited: bool) -> Option<FrameSample> {
        let closed = self.close_before(now_us);
        let s = self.open_at(now_us);
        s.inflight_bytes = Some(inflight_bytes);
        // Two batches in the same microsecond are one frame: limited if either was.
        s.app_limited = Some(s.app_limited.unwrap_or(true) && app_limited);
        closed
    }

    /// Packets of `lost_bytes` were declared lost; `persistent`: RFC 9002's persistent congestion.
    pub fn on_loss(&mut self, now_us: u64, lost_bytes: u64, persistent: bool, mss_bytes: u32) -> Option<FrameSample> {
        let closed = self.close_before(now_us);
        // RFC 9002's kTimeThreshold: 9/8 of the larger of the smoothed and the latest RTT.
        let rtt_us = self.srtt_us.unwrap_or(0).max(self.rtt_last_us);
        self.hole = Some(Hole { since_us: now_us, settled_us: now_us + rtt_us * 9 / 8 });
        let s = self.open_at(now_us);
        s.lost_pkts += lost_bytes.div_ceil(u64::from(mss_bytes.max(1))).max(1);
        s.persistent_congestion |= persistent;
        closed
    }

    /// The peer's CE count went up with the frame acknowledged at `now_us`.
    pub fn on_ecn_ce(&mut self, now_us: u64, mss_bytes: u32) -> Option<FrameSample> {
        let closed = self.close_before(now_us);
        let s = self.open_at(now_us);
        s.ece = true;
        // One CE packet, the newest: see the module's notes on ECN.
        s.ce_bytes = if s.delivered_pkts > 0 { s.newest_bytes } else { u64::from(mss_bytes) };
        s.ce_pkts = 1;
        closed
    }

    /// Closes the open frame if it is older than `now_us`.
    pub fn close_before(&mut self, now_us: u64) -> Option<FrameSample> {
        if self.open.is_some_and(|s| s.now_us < now_us) {
            self.close()
        } else {
            None
        }
    }

    /// Closes the open frame whatever its time.
    pub fn close(&mut self) -> Option<FrameSample> {
        let mut s = self.open.take()?;
        if let Some(sent) = s.newest_sent_us {
            let rtt = s.now_us.saturating_sub(sent).max(1);
            s.rtt_us = Some(rtt);
            self.rtt_last_us = rtt;
            self.cum_delivered += s.delivered_bytes;
            // The last frame closed before the newest packet was sent: its delivery state is
            // what that packet carried (tcp_rate.c's delivered and delivered_mstamp at send).
            let at_send = self.history.iter().rev().find(|d| d.now_us <= sent).or(self.history.front()).copied();
            if let Some(d) = at_send {
                let bytes = self.cum_delivered - d.cum_bytes;
                let (ack_us, send_us) = (s.now_us.saturating_sub(d.now_us), sent.saturating_sub(d.newest_sent_us));
                if bytes > 0 && ack_us > 0 && send_us > 0 {
                    s.rates = Some((rate(bytes, send_us), rate(bytes, ack_us.max(send_us))));
                }
            }
            if self.history.len() == HISTORY {
                self.history.pop_front();
            }
            self.history.push_back(Delivered { now_us: s.now_us, newest_sent_us: sent, cum_bytes: self.cum_delivered });
        }
        Some(s)
    }

    /// Whether a frame is open (a loss or CE from it may still come).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The smoothed RTT quinn last passed, µs.
    pub fn srtt_us(&self) -> Option<u64> {
        self.srtt_us
    }

    /// Bytes acknowledged beyond a loss, waiting for the cumulative point.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    fn open_at(&mut self, now_us: u64) -> &mut FrameSample {
        self.open.get_or_insert(FrameSample { now_us, ..FrameSample::default() })
    }
}

fn rate(bytes: u64, us: u64) -> u64 {
    (u128::from(bytes) * 1_000_000 / u128::from(us.max(1))).min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1200;

    #[test]
    fn a_frame_closes_at_the_next_later_callback_with_its_loss_and_ce() {
        let mut f = Frames::default();
        assert_eq!(f.on_ack(10_000, 0, 1200, Some(30_000)), None);
        assert_eq!(f.on_ack(10_000, 400, 1000, None), None);
        assert_eq!(f.on_end_acks(10_000, 5_000, false), None);
        assert_eq!(f.on_ecn_ce(10_000, MSS), None);
        assert!(f.is_open());
        let s = f.on_ack(10_500, 500, 1200, None).expect("a later callback closes the frame");
        assert_eq!((s.now_us, s.acked_bytes, s.acked_pkts, s.delivered_pkts), (10_000, 2200, 2, 2));
        // One CE packet: the newest the frame acknowledged (sent at 400 µs, 1,000 bytes).
        assert_eq!((s.ce_bytes, s.ce_pkts, s.ece), (1000, 1, true));
        assert_eq!((s.rtt_us, s.newest_sent_us), (Some(9_600), Some(400)));
        assert_eq!((s.inflight_bytes, s.app_limited), (Some(5_000), Some(false)));
        // The connection's first frame has no earlier delivery to rate against.
        assert_eq!(s.rates, None);
    }

    #[test]
    fn rates_are_the_kernels_rate_sample() {
        let mut f = Frames::default();
        f.on_ack(10_000, 0, 1200, Some(10_000));
        f.close();
        // Sent after that frame: the sample runs from it (delivered 2,400 bytes since).
        f.on_ack(20_000, 10_500, 1200, None);
        f.on_ack(20_000, 11_000, 1200, None);
        let s = f.close().unwrap();
        // Send interval 11 ms (0 → 11,000), ACK interval 10 ms: delivery over the longer.
        assert_eq!(s.rates, Some((218_181, 218_181)));
        // Sent before the second frame closed: the sample starts at the first.
        f.on_ack(22_000, 12_000, 1200, None);
        let s = f.close().unwrap();
        assert_eq!(s.rates, Some((3_600_000_000 / 12_000, 3_600_000_000 / 12_000)));
    }

    #[test]
    fn a_timer_loss_is_a_sample_of_its_own() {
        let mut f = Frames::default();
        f.on_ack(10_000, 0, 1200, Some(10_000));
        let acked = f.on_loss(40_000, 2_500, true, MSS).expect("the loss closes the frame");
        assert_eq!(acked.lost_pkts, 0);
        let s = f.close().unwrap();
        assert_eq!((s.lost_pkts, s.persistent_congestion, s.rtt_us, s.delivered_pkts), (3, true, None, 0));
    }
}
