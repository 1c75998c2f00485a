//! quinn's congestion callbacks folded into the contract's [`Report`].
//!
//! quinn-proto 0.11 tells a controller about one ACK frame in this order, all with the same `now`:
//! `on_ack` once per newly acknowledged ack-eliciting packet (with the time it was sent), then
//! `on_end_acks` (bytes in flight, app-limited), then — from the same frame — at most one
//! `on_congestion_event` for newly lost packets and at most one with `lost_bytes = 0` when the
//! peer's ECN-CE count went up. A frame is therefore only complete at the next callback with a
//! later `now`; the fold closes the frame there, so everything one frame carries (its acks, its
//! losses, its CE) lands in the same report.
//!
//! What the fold measures, and how it departs from a TCP datapath's:
//! - **RTT**: one sample per frame, `now` minus the send time of the newest packet it
//!   acknowledges (the kernel's rate-sample RTT; ack delay included, as in TCP). The smoothed RTT
//!   is quinn's own (RFC 9002, ack delay removed), as quinn passed it with the frame's acks.
//! - **Rates over the same packets**: between the previous report's last frame and this one's,
//!   the bytes acknowledged over the time between the two frames (delivery rate) and over the
//!   time between the send times of the newest packets each acknowledged (send rate).
//! - **Cumulative and selective**: the contract's `acked_bytes` is how far TCP's cumulative ACK
//!   moved, and algorithms end a congestion event when the flight at the cut has been
//!   cumulatively acknowledged (`window.rs`). QUIC has no cumulative ACK, and a lost packet is
//!   never acknowledged: its data goes again in a new packet. So the fold keeps TCP's meaning:
//!   from a loss until a packet sent after it is acknowledged (the retransmission's round trip),
//!   acknowledgements are selective (`sacked_*`); that acknowledgement moves the cumulative
//!   point over everything held back, as TCP's `snd_una` jumps over SACKed data. But not before
//!   every packet sent before the loss has been acknowledged or declared lost, which RFC 9002's
//!   time threshold (§6.1.2) bounds at 9/8 of the RTT after the loss: a later loss of an
//!   earlier packet is TCP's second hole below the recovery point. Without this, a tail loss
//!   QUIC declares by its time threshold came after the flight at the cut was acknowledged,
//!   and Reno cut twice for one drop-tail overflow in about half the overflows (50 Mbit/s,
//!   20 ms, 1 BDP).
//! - **Loss**: quinn gives lost bytes, not packets; `lost_pkts` is the bytes in datagrams of the
//!   current size, rounded up. Persistent congestion (RFC 9002 §7.6) is reported as a timeout:
//!   it is QUIC's counterpart of an RTO collapse.
//! - **ECN**: quinn 0.11 does not pass CE counts to a controller (quinn#2487), only that a frame
//!   raised the CE count. The fold then counts every byte that frame acknowledged as CE, which is
//!   exactly the kernel's DCTCP accounting of an ACK with ECE (`tcp_dctcp.c`: bytes acked by an
//!   ECE ACK are marked bytes), and one `ece_acks`.
//! - **Window-limited**: quinn marks a frame app-limited when the connection had nothing to send
//!   when the window allowed it; an interval is window-limited when any of its frames was not.
//! - `pending_bytes` is not known to a quinn controller; it is reported as the bytes in flight.

use ccp_contract::{Report, RttStats, Urgent};

/// Counters since the last report, and what one ACK frame carries while it is open.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    interval_start_us: Option<u64>,
    acked_bytes: u64,
    acked_pkts: u64,
    sacked_bytes: u64,
    sacked_pkts: u64,
    lost_pkts: u64,
    timeouts: u32,
    ce_bytes: u64,
    ce_pkts: u64,
    ece_acks: u64,
    rtt_min_us: u64,
    rtt_max_us: u64,
    rtt_last_us: u64,
    rtt_sum_us: u64,
    rtt_samples: u32,
    /// Frames in the interval, and how many of them were app-limited.
    frames: u32,
    app_limited_frames: u32,
    urgent: Option<Urgent>,

    /// The open frame: its `now`, what it acknowledged, and the newest send time among it.
    frame: Option<Frame>,
    /// The last closed frame's time and newest send time: where the next rate sample starts.
    rate_anchor: Option<(u64, u64)>,
    /// The same for the last frame of the interval being folded, and the bytes the frames after
    /// the anchor acknowledged.
    rate_end: Option<(u64, u64)>,
    rate_bytes: u64,

    /// The latest loss, while the cumulative point is held back by it: acknowledgements are
    /// selective until then, and `held_bytes` of them wait for the cumulative point.
    hole: Option<Hole>,
    held_bytes: u64,

    /// Gauges, as of the last frame.
    inflight_bytes: u64,
    srtt_us: Option<u64>,
}

/// A loss holding the cumulative point back.
#[derive(Debug, Clone, Copy)]
struct Hole {
    /// When it was declared: a packet sent after this is the retransmission's round trip.
    since_us: u64,
    /// When every packet sent before it is sure to be acknowledged or declared lost.
    settled_us: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    now_us: u64,
    bytes: u64,
    pkts: u64,
    newest_sent_us: u64,
    ended: bool,
}

/// What the datapath holds when a report is taken.
#[derive(Debug, Clone, Copy)]
pub struct Gauges {
    pub mss_bytes: u32,
    pub cwnd_bytes: u64,
}

/// When a report is due: the report interval, µs, and the packet trigger (0: off).
#[derive(Debug, Clone, Copy)]
pub struct Due {
    pub interval_us: u64,
    pub acked_pkts: u32,
}

impl Fold {
    /// One newly acknowledged packet of `bytes`, sent at `sent_us`; `srtt_us` is quinn's smoothed
    /// RTT as it passed it.
    pub fn on_ack(&mut self, now_us: u64, sent_us: u64, bytes: u64, srtt_us: Option<u64>) {
        self.close_frame_before(now_us);
        self.interval_start_us.get_or_insert(now_us);
        let f = self.frame.get_or_insert(Frame { now_us, bytes: 0, pkts: 0, newest_sent_us: sent_us, ended: false });
        // Two frames handled in the same microsecond are one.
        f.ended = false;
        f.bytes += bytes;
        f.pkts += 1;
        f.newest_sent_us = f.newest_sent_us.max(sent_us);
        match self.hole {
            Some(h) if sent_us <= h.since_us || now_us < h.settled_us => {
                self.sacked_bytes += bytes;
                self.sacked_pkts += 1;
                self.held_bytes += bytes;
            }
            _ => {
                self.acked_bytes += bytes + std::mem::take(&mut self.held_bytes);
                self.acked_pkts += 1;
                self.hole = None;
            }
        }
        if srtt_us.is_some() {
            self.srtt_us = srtt_us;
        }
    }

    /// The frame's acks are all in: the bytes in flight after it, and whether the sender was
    /// app-limited before it.
    pub fn on_end_acks(&mut self, now_us: u64, inflight_bytes: u64, app_limited: bool) {
        self.close_frame_before(now_us);
        self.inflight_bytes = inflight_bytes;
        match &mut self.frame {
            Some(f) if f.now_us == now_us && !f.ended => f.ended = true,
            // A frame that acknowledged nothing ack-eliciting: nothing to sample.
            _ => return,
        }
        self.frames += 1;
        if app_limited {
            self.app_limited_frames += 1;
        }
    }

    /// Packets of `lost_bytes` were declared lost; `persistent`: RFC 9002's persistent congestion.
    pub fn on_loss(&mut self, now_us: u64, lost_bytes: u64, persistent: bool, mss_bytes: u32) {
        self.close_frame_before(now_us);
        self.interval_start_us.get_or_insert(now_us);
        self.lost_pkts += lost_bytes.div_ceil(u64::from(mss_bytes.max(1))).max(1);
        // RFC 9002's kTimeThreshold: 9/8 of the larger of the smoothed and the latest RTT.
        let rtt_us = self.srtt_us.unwrap_or(0).max(self.rtt_last_us);
        self.hole = Some(Hole { since_us: now_us, settled_us: now_us + rtt_us * 9 / 8 });
        self.raise(Urgent::Loss);
        if persistent {
            self.timeouts += 1;
            self.raise(Urgent::Timeout);
        }
    }

    /// The peer's CE count went up with the frame acknowledged at `now_us`.
    pub fn on_ecn_ce(&mut self, now_us: u64, mss_bytes: u32) {
        self.close_frame_before(now_us);
        self.interval_start_us.get_or_insert(now_us);
        self.ece_acks += 1;
        match self.frame {
            Some(f) if f.now_us == now_us => {
                self.ce_bytes += f.bytes;
                self.ce_pkts += f.pkts;
            }
            // quinn raises it with the frame's acks; if it ever did not, count one packet.
            _ => {
                self.ce_bytes += u64::from(mss_bytes);
                self.ce_pkts += 1;
            }
        }
    }

    /// Any callback at `now_us`: closes the open frame if `now_us` is later than it.
    pub fn tick(&mut self, now_us: u64) {
        self.close_frame_before(now_us);
    }

    /// Whether a report is due at `now_us`: something urgent happened, the interval elapsed with
    /// something to say, or enough packets were acknowledged. Only closed frames count.
    pub fn due(&self, now_us: u64, due: Due) -> bool {
        let Some(start) = self.interval_start_us else { return false };
        if self.frame.is_some() {
            return false;
        }
        self.urgent.is_some()
            || now_us.saturating_sub(start) >= due.interval_us
            || (due.acked_pkts > 0 && self.acked_pkts >= u64::from(due.acked_pkts))
    }

    /// The report of everything folded since the last one, ending at `now_us`; starts the next.
    pub fn take(&mut self, now_us: u64, g: Gauges) -> Report {
        self.close_frame_before(u64::MAX);
        let start = self.interval_start_us.unwrap_or(now_us);
        let rtt = (self.rtt_samples > 0).then(|| RttStats {
            min_us: self.rtt_min_us,
            max_us: self.rtt_max_us,
            last_us: self.rtt_last_us,
            srtt_us: self.srtt_us.unwrap_or(self.rtt_last_us).max(1),
            mean_us: self.rtt_sum_us / u64::from(self.rtt_samples),
            samples: self.rtt_samples,
        });
        let (send_rate, recv_rate) = match (self.rate_anchor, self.rate_end) {
            (Some((a_ack, a_sent)), Some((e_ack, e_sent))) if self.rate_bytes > 0 => {
                (rate(self.rate_bytes, e_sent.saturating_sub(a_sent)), rate(self.rate_bytes, e_ack.saturating_sub(a_ack)))
            }
            _ => (None, None),
        };
        let report = Report {
            now_us,
            interval_us: now_us.saturating_sub(start),
            mss_bytes: g.mss_bytes,
            acked_bytes: self.acked_bytes,
            acked_pkts: self.acked_pkts,
            sacked_bytes: self.sacked_bytes,
            sacked_pkts: self.sacked_pkts,
            lost_pkts: self.lost_pkts,
            timeouts: self.timeouts,
            ce_bytes: self.ce_bytes,
            ce_pkts: self.ce_pkts,
            ece_acks: self.ece_acks,
            rtt,
            send_rate_bytes_per_s: send_rate,
            recv_rate_bytes_per_s: recv_rate,
            inflight_bytes: self.inflight_bytes,
            pending_bytes: self.inflight_bytes,
            cwnd_bytes: g.cwnd_bytes,
            pacing_rate_bytes_per_s: None,
            app_limited: self.app_limited_frames > 0,
            cwnd_limited: self.frames == 0 || self.app_limited_frames < self.frames,
            urgent: self.urgent,
            ..Report::default()
        };
        if self.rate_end.is_some() {
            self.rate_anchor = self.rate_end;
        }
        *self = Fold {
            rate_anchor: self.rate_anchor,
            hole: self.hole,
            rtt_last_us: self.rtt_last_us,
            held_bytes: self.held_bytes,
            inflight_bytes: self.inflight_bytes,
            srtt_us: self.srtt_us,
            ..Fold::default()
        };
        report
    }

    /// The smoothed RTT quinn last passed, µs.
    pub fn srtt_us(&self) -> Option<u64> {
        self.srtt_us
    }

    fn raise(&mut self, u: Urgent) {
        let rank = |u: Urgent| match u {
            Urgent::Timeout => 3,
            Urgent::Loss => 2,
            Urgent::StateChange => 1,
        };
        if self.urgent.is_none_or(|cur| rank(u) > rank(cur)) {
            self.urgent = Some(u);
        }
    }

    /// Closes the open frame if it is older than `now_us`: its RTT sample, and where the rates
    /// end.
    fn close_frame_before(&mut self, now_us: u64) {
        let Some(f) = self.frame else { return };
        if f.now_us >= now_us {
            return;
        }
        self.frame = None;
        let sample = f.now_us.saturating_sub(f.newest_sent_us).max(1);
        if self.rtt_samples == 0 {
            self.rtt_min_us = sample;
            self.rtt_max_us = sample;
        }
        self.rtt_min_us = self.rtt_min_us.min(sample);
        self.rtt_max_us = self.rtt_max_us.max(sample);
        self.rtt_last_us = sample;
        self.rtt_sum_us += sample;
        self.rtt_samples += 1;
        if self.rate_anchor.is_none() {
            // The connection's first frame: the rates start after it.
            self.rate_anchor = Some((f.now_us, f.newest_sent_us));
        } else {
            self.rate_end = Some((f.now_us, f.newest_sent_us));
            self.rate_bytes += f.bytes;
        }
    }
}

fn rate(bytes: u64, us: u64) -> Option<u64> {
    (us > 0).then(|| (u128::from(bytes) * 1_000_000 / u128::from(us)).min(u128::from(u64::MAX)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MSS: u32 = 1200;
    const G: Gauges = Gauges { mss_bytes: MSS, cwnd_bytes: 12_000 };
    const EVERY_10MS: Due = Due { interval_us: 10_000, acked_pkts: 0 };

    /// One ACK frame at `now` acknowledging packets of 1,200 bytes sent at `sent`.
    fn frame(f: &mut Fold, now: u64, sent: &[u64], app_limited: bool) {
        for &s in sent {
            f.on_ack(now, s, 1200, Some(50_000));
        }
        f.on_end_acks(now, 6_000, app_limited);
    }

    #[test]
    fn a_frame_is_one_rtt_sample_from_its_newest_packet_and_its_counts() {
        let mut f = Fold::default();
        frame(&mut f, 40_000, &[0, 100, 300], false);
        // Still open: a loss or CE from the same frame may follow.
        assert!(!f.due(60_000, EVERY_10MS));
        f.tick(40_001);
        assert!(!f.due(49_999, EVERY_10MS));
        assert!(f.due(50_000, EVERY_10MS));
        let r = f.take(50_000, G);
        assert_eq!((r.now_us, r.interval_us, r.mss_bytes), (50_000, 10_000, MSS));
        assert_eq!((r.acked_bytes, r.acked_pkts, r.inflight_bytes, r.pending_bytes, r.cwnd_bytes), (3600, 3, 6000, 6000, 12_000));
        let rtt = r.rtt.unwrap();
        assert_eq!(
            (rtt.min_us, rtt.max_us, rtt.last_us, rtt.mean_us, rtt.samples, rtt.srtt_us),
            (39_700, 39_700, 39_700, 39_700, 1, 50_000)
        );
        // The connection's first frame anchors the rates; it is not a rate sample of its own.
        assert_eq!((r.send_rate_bytes_per_s, r.recv_rate_bytes_per_s), (None, None));
        assert!(r.cwnd_limited && !r.app_limited && r.urgent.is_none());
        assert_eq!((r.lost_pkts, r.ce_pkts, r.timeouts), (0, 0, 0));
    }

    #[test]
    fn rates_run_between_frames_over_the_same_packets() {
        let mut f = Fold::default();
        frame(&mut f, 10_000, &[0], false);
        // Delivered 2,400 bytes in 2 ms, sent over 5 ms (the sender was slower than the path).
        frame(&mut f, 11_000, &[1_000], false);
        frame(&mut f, 12_000, &[5_000], false);
        let r = f.take(12_500, G);
        assert_eq!(r.recv_rate_bytes_per_s, Some(1_200_000));
        assert_eq!(r.send_rate_bytes_per_s, Some(480_000));
        let rtt = r.rtt.unwrap();
        assert_eq!((rtt.min_us, rtt.max_us, rtt.last_us, rtt.samples, rtt.mean_us), (7_000, 10_000, 7_000, 3, 9_000));
        // The next interval's rates start where this one's ended.
        frame(&mut f, 13_000, &[6_000, 6_200], false);
        let r = f.take(13_500, G);
        assert_eq!(r.recv_rate_bytes_per_s, Some(2_400_000));
        assert_eq!(r.send_rate_bytes_per_s, Some(2_000_000));
        // Nothing acknowledged: no rates, no RTT.
        let r = f.take(20_000, G);
        assert_eq!((r.acked_bytes, r.rtt, r.send_rate_bytes_per_s), (0, None, None));
    }

    #[test]
    fn a_frame_that_raised_the_ce_count_marks_every_byte_it_acknowledged() {
        let mut f = Fold::default();
        frame(&mut f, 10_000, &[0, 10], false);
        f.on_ecn_ce(10_000, MSS);
        frame(&mut f, 20_000, &[10_000, 10_010, 10_020], false);
        let r = f.take(25_000, G);
        assert_eq!((r.acked_pkts, r.ce_pkts, r.ce_bytes, r.ece_acks), (5, 2, 2400, 1));
        assert!(r.urgent.is_none(), "CE is not urgent");
    }

    #[test]
    fn loss_is_urgent_in_packets_of_the_datagram_size_and_persistent_congestion_a_timeout() {
        let mut f = Fold::default();
        frame(&mut f, 10_000, &[0], false);
        f.on_loss(10_000, 3_000, false, MSS);
        assert!(!f.due(10_000, EVERY_10MS), "the frame is still open");
        f.tick(10_050);
        assert!(f.due(10_050, EVERY_10MS));
        let r = f.take(10_050, G);
        assert_eq!((r.lost_pkts, r.timeouts, r.urgent), (3, 0, Some(Urgent::Loss)));
        f.on_loss(30_000, 100, true, MSS);
        let r = f.take(30_000, G);
        assert_eq!((r.lost_pkts, r.timeouts, r.urgent), (1, 1, Some(Urgent::Timeout)));
        // A later plain loss does not lower the urgency of an interval that had a timeout.
        f.on_loss(40_000, 100, true, MSS);
        f.on_loss(40_001, 100, false, MSS);
        assert_eq!(f.take(40_001, G).urgent, Some(Urgent::Timeout));
    }

    #[test]
    fn after_a_loss_acks_are_selective_until_a_packet_sent_after_it_is_acknowledged() {
        let mut f = Fold::default();
        frame(&mut f, 10_000, &[0, 100], false);
        f.on_loss(10_000, 1200, false, MSS);
        let r = f.take(10_001, G);
        assert_eq!((r.acked_bytes, r.acked_pkts, r.sacked_pkts), (2400, 2, 0));
        // Packets sent before the loss was declared: beyond the hole, held back.
        frame(&mut f, 11_000, &[200, 300], false);
        let r = f.take(11_001, G);
        assert_eq!((r.acked_bytes, r.acked_pkts, r.sacked_bytes, r.sacked_pkts), (0, 0, 2400, 2));
        // A packet sent after it, but before 9/8 of the RTT (50 ms smoothed) has passed: an
        // earlier packet may still be declared lost, a second hole below the recovery point.
        frame(&mut f, 40_000, &[10_500], false);
        let r = f.take(40_001, G);
        assert_eq!((r.acked_bytes, r.acked_pkts, r.sacked_pkts), (0, 0, 1));
        // Past it, the first packet sent after the loss moves the cumulative point over
        // everything held, as snd_una jumps over SACKed data.
        frame(&mut f, 70_000, &[400, 11_000], false);
        let r = f.take(70_001, G);
        assert_eq!((r.acked_bytes, r.acked_pkts, r.sacked_bytes, r.sacked_pkts), (6000, 1, 1200, 1));
        frame(&mut f, 71_000, &[12_000], false);
        assert_eq!(f.take(71_001, G).acked_bytes, 1200);
        // CE opens no hole.
        f.on_ecn_ce(71_000, MSS);
        frame(&mut f, 72_000, &[12_500], false);
        assert_eq!(f.take(72_001, G).acked_bytes, 1200);
    }

    #[test]
    fn window_limited_unless_every_frame_was_app_limited() {
        let mut f = Fold::default();
        frame(&mut f, 1_000, &[0], true);
        frame(&mut f, 2_000, &[1_000], false);
        let r = f.take(3_000, G);
        assert!(r.app_limited && r.cwnd_limited);
        frame(&mut f, 4_000, &[3_000], true);
        let r = f.take(5_000, G);
        assert!(r.app_limited && !r.cwnd_limited);
    }

    #[test]
    fn the_packet_trigger_and_an_empty_interval() {
        let mut f = Fold::default();
        assert!(!f.due(1_000_000, EVERY_10MS), "nothing happened: nothing to report");
        let due = Due { interval_us: 1_000_000, acked_pkts: 4 };
        frame(&mut f, 1_000, &[0, 1, 2], false);
        f.tick(1_001);
        assert!(!f.due(1_001, due));
        frame(&mut f, 2_000, &[3], false);
        f.tick(2_001);
        assert!(f.due(2_001, due));
    }

    #[derive(Debug, Clone)]
    enum Ev {
        Ack { dt: u64, age: u64, bytes: u64 },
        End { app_limited: bool },
        Loss { bytes: u64, persistent: bool },
        Ce,
        Take,
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            4 => (0..3_000u64, 0..200_000u64, 1..1500u64).prop_map(|(dt, age, bytes)| Ev::Ack { dt, age, bytes }),
            2 => any::<bool>().prop_map(|app_limited| Ev::End { app_limited }),
            1 => (0..100_000u64, any::<bool>()).prop_map(|(bytes, persistent)| Ev::Loss { bytes, persistent }),
            1 => Just(Ev::Ce),
            1 => Just(Ev::Take),
        ]
    }

    proptest! {
        /// Whatever quinn calls in whatever order: every acknowledged byte is in at most one
        /// report (or still held beyond a hole), every packet in exactly one, marks never exceed what was acknowledged, RTTs are ordered, rates positive.
        #[test]
        fn every_byte_is_reported_once_and_reports_are_sane(events in proptest::collection::vec(ev(), 0..200)) {
            let mut f = Fold::default();
            let (mut now, mut acked, mut reported, mut ce) = (1_000u64, 0u64, 0u64, 0u64);
            let (mut pkts, mut reported_pkts) = (0u64, 0u64);
            let check = |r: Report, reported: &mut u64, ce: &mut u64, reported_pkts: &mut u64| -> Result<(), TestCaseError> {
                *reported += r.acked_bytes;
                *reported_pkts += r.acked_pkts + r.sacked_pkts;
                *ce += r.ce_bytes;
                if let Some(rtt) = r.rtt {
                    prop_assert!(rtt.samples > 0 && rtt.min_us <= rtt.mean_us && rtt.mean_us <= rtt.max_us);
                    prop_assert!(rtt.min_us >= 1);
                }
                prop_assert!(r.send_rate_bytes_per_s != Some(0) && r.recv_rate_bytes_per_s != Some(0));
                Ok(())
            };
            for e in events {
                match e {
                    Ev::Ack { dt, age, bytes } => {
                        now += dt;
                        f.on_ack(now, now.saturating_sub(age), bytes, Some(20_000));
                        acked += bytes;
                        pkts += 1;
                    }
                    Ev::End { app_limited } => f.on_end_acks(now, 10_000, app_limited),
                    Ev::Loss { bytes, persistent } => f.on_loss(now, bytes, persistent, MSS),
                    Ev::Ce => f.on_ecn_ce(now, MSS),
                    Ev::Take => check(f.take(now, G), &mut reported, &mut ce, &mut reported_pkts)?,
                }
            }
            check(f.take(now + 1, G), &mut reported, &mut ce, &mut reported_pkts)?;
            // Bytes still beyond a hole are reported once a packet sent after the loss is acked.
            prop_assert_eq!(reported + f.held_bytes, acked);
            prop_assert_eq!(reported_pkts, pkts);
            prop_assert!(ce <= acked + 200 * u64::from(MSS));
        }
    }
}
