//! ACK frames ([`ccp_quic_core::frame`]) folded into the contract's [`Report`]: counters summed over the
//! report interval, RTT statistics over the frames' samples, rates over the same packets.
//!
//! - **Rates**: between the previous report's last frame and this one's, the bytes delivered
//!   over the time between the two frames (delivery rate) and between the send times of the
//!   newest packets each acknowledged (send rate).
//! - **Window-limited**: quinn marks a frame app-limited when the connection had nothing to send
//!   when the window allowed it; an interval is window-limited when any of its frames was not.
//! - `pending_bytes` is not known to a quinn controller; it is reported as the bytes in flight.
//! - A frame's loss is urgent (`Loss`), persistent congestion a timeout (`Timeout`).

use ccp_contract::{Report, RttStats, Urgent};

use ccp_quic_core::frame::{FrameSample, Frames};

/// Frames since the last report, summed.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    frames: Frames,
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
    /// Frames in the interval that ended a batch of acks, and how many were app-limited.
    batches: u32,
    app_limited_batches: u32,
    urgent: Option<Urgent>,
    /// The last frame of the previous report (its time and newest send time): where this
    /// report's rates start; the same for this report's last frame, and the bytes delivered
    /// after the anchor.
    rate_anchor: Option<(u64, u64)>,
    rate_end: Option<(u64, u64)>,
    rate_bytes: u64,
    /// As of the last frame.
    inflight_bytes: u64,
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
        let closed = self.frames.on_ack(now_us, sent_us, bytes, srtt_us);
        self.add(closed, now_us);
    }

    /// The frame's acks are all in: the bytes in flight after it, and whether the sender was
    /// app-limited before it.
    pub fn on_end_acks(&mut self, now_us: u64, inflight_bytes: u64, app_limited: bool) {
        let closed = self.frames.on_end_acks(now_us, inflight_bytes, app_limited);
        self.add(closed, now_us);
    }

    /// Packets of `lost_bytes` were declared lost; `persistent`: RFC 9002's persistent congestion.
    pub fn on_loss(&mut self, now_us: u64, lost_bytes: u64, persistent: bool, mss_bytes: u32) {
        let closed = self.frames.on_loss(now_us, lost_bytes, persistent, mss_bytes);
        self.add(closed, now_us);
    }

    /// The peer's CE count went up with the frame acknowledged at `now_us`.
    pub fn on_ecn_ce(&mut self, now_us: u64, mss_bytes: u32) {
        let closed = self.frames.on_ecn_ce(now_us, mss_bytes);
        self.add(closed, now_us);
    }

    /// Any callback at `now_us`: closes the open frame if `now_us` is later than it.
    pub fn tick(&mut self, now_us: u64) {
        let closed = self.frames.close_before(now_us);
        self.add(closed, now_us);
    }

    /// Whether a report is due at `now_us`: something urgent happened, the interval elapsed with
    /// something to say, or enough packets were acknowledged. Only closed frames count.
    pub fn due(&self, now_us: u64, due: Due) -> bool {
        let Some(start) = self.interval_start_us else { return false };
        if self.frames.is_open() {
            return false;
        }
        self.urgent.is_some()
            || now_us.saturating_sub(start) >= due.interval_us
            || (due.acked_pkts > 0 && self.acked_pkts + self.sacked_pkts >= u64::from(due.acked_pkts))
    }

    /// The report of everything folded since the last one, ending at `now_us`; starts the next.
    pub fn take(&mut self, now_us: u64, g: Gauges) -> Report {
        let closed = self.frames.close();
        self.add(closed, now_us);
        let start = self.interval_start_us.unwrap_or(now_us);
        let rtt = (self.rtt_samples > 0).then(|| RttStats {
            min_us: self.rtt_min_us,
            max_us: self.rtt_max_us,
            last_us: self.rtt_last_us,
            srtt_us: self.frames.srtt_us().unwrap_or(self.rtt_last_us).max(1),
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
            app_limited: self.app_limited_batches > 0,
            cwnd_limited: self.batches == 0 || self.app_limited_batches < self.batches,
            urgent: self.urgent,
            ..Report::default()
        };
        let rate_anchor = self.rate_end.or(self.rate_anchor);
        *self = Fold {
            frames: std::mem::take(&mut self.frames),
            rate_anchor,
            inflight_bytes: self.inflight_bytes,
            rtt_last_us: self.rtt_last_us,
            ..Fold::default()
        };
        report
    }

    /// The smoothed RTT quinn last passed, µs.
    pub fn srtt_us(&self) -> Option<u64> {
        self.frames.srtt_us()
    }

    /// Folds a closed frame in; `now_us` starts the interval when nothing did yet.
    fn add(&mut self, frame: Option<FrameSample>, now_us: u64) {
        if self.frames.is_open() {
            self.interval_start_us.get_or_insert(now_us);
        }
        let Some(f) = frame else { return };
        self.interval_start_us = Some(self.interval_start_us.map_or(f.now_us, |s| s.min(f.now_us)));
        self.acked_bytes += f.acked_bytes;
        self.acked_pkts += f.acked_pkts;
        self.sacked_bytes += f.sacked_bytes;
        self.sacked_pkts += f.sacked_pkts;
        self.ce_bytes += f.ce_bytes;
        self.ce_pkts += f.ce_pkts;
        self.ece_acks += u64::from(f.ece);
        self.lost_pkts += f.lost_pkts;
        if f.lost_pkts > 0 {
            self.raise(Urgent::Loss);
        }
        if f.persistent_congestion {
            self.timeouts += 1;
            self.raise(Urgent::Timeout);
        }
        if let Some(rtt) = f.rtt_us {
            if self.rtt_samples == 0 {
                (self.rtt_min_us, self.rtt_max_us) = (rtt, rtt);
            }
            self.rtt_min_us = self.rtt_min_us.min(rtt);
            self.rtt_max_us = self.rtt_max_us.max(rtt);
            self.rtt_last_us = rtt;
            self.rtt_sum_us += rtt;
            self.rtt_samples += 1;
        }
        if let Some(app_limited) = f.app_limited {
            self.batches += 1;
            self.app_limited_batches += u32::from(app_limited);
        }
        if let Some(inflight) = f.inflight_bytes {
            self.inflight_bytes = inflight;
        }
        if let Some(sent) = f.newest_sent_us {
            if self.rate_anchor.is_none() {
                // The connection's first frame: the rates start after it.
                self.rate_anchor = Some((f.now_us, sent));
            } else {
                self.rate_end = Some((f.now_us, sent));
                self.rate_bytes += f.delivered_bytes;
            }
        }
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
    fn a_frame_that_raised_the_ce_count_counts_its_newest_packet_as_marked() {
        let mut f = Fold::default();
        frame(&mut f, 10_000, &[0, 10], false);
        f.on_ecn_ce(10_000, MSS);
        frame(&mut f, 20_000, &[10_000, 10_010, 10_020], false);
        let r = f.take(25_000, G);
        assert_eq!((r.acked_pkts, r.ce_pkts, r.ce_bytes, r.ece_acks), (5, 1, 1200, 1));
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
            prop_assert_eq!(reported + f.frames.held_bytes(), acked);
            prop_assert_eq!(reported_pkts, pkts);
            prop_assert!(ce <= acked + 200 * u64::from(MSS));
        }
    }
}
