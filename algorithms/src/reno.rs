//! Reno: the standard TCP congestion controller (RFC 5681), driven by aggregated reports.
//!
//! Slow start grows the window by the bytes acknowledged (doubling per RTT) until it reaches
//! ssthresh; congestion avoidance then adds one MSS per window of acknowledged data (one MSS per
//! RTT). On loss the window halves (ssthresh = cwnd/2, as Linux's tcp_reno_ssthresh; RFC 5681
//! uses FlightSize/2) once per congestion event; on a retransmission timeout it collapses to
//! the loss window and slow-starts again. ECN-Echo is a congestion signal like a loss
//! (RFC 3168 §6.1.2): the same halving, at most once per round trip, without a retransmission.
//!
//! Reno is the shared window (window.rs, `RenoWindow`) with nothing added: a congestion event
//! lasts until the data outstanding at the cut is acknowledged (NewReno's recovery point, RFC 6582 §3.2),
//! growth is integrated over each report's acknowledged bytes, and windows never go below
//! `MIN_CWND_PKTS` (the contract's floor). Those rules, and the evidence for them, are there.

use std::sync::Arc;

use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Param, Report, StateVar,
};

use crate::window::{RenoBased, RenoWindow, WindowConfig, RECOVERY_BY_DATA};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "reno",
    summary: "TCP Reno/NewReno: slow start, additive increase, halving on loss",
    reference: "RFC 5681 (TCP Congestion Control); Linux tcp_cong.c",
    params: RenoConfig::PARAMS,
    build: |p| Ok(Arc::new(RenoConfig::from_params(p)?)),
};

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct RenoConfig {
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
        pub beta: f64 = Param::float(
            0.5,
            Bound::Exclusive(0.0),
            Bound::Exclusive(1.0),
            "",
            "multiplicative decrease on loss: ssthresh = beta * cwnd (RFC 5681: 1/2)",
        ),
        pub ecn: bool = Param::bool(true, "respond to ECN-Echo (CE-marked ACKs) as to a loss, once per RTT (RFC 3168 §6.1.2)"),
        pub recovery_by_data: bool = RECOVERY_BY_DATA,
    }
}

impl RenoConfig {
    /// The shared window's part of the configuration.
    pub fn window(&self) -> WindowConfig {
        WindowConfig { init_cwnd_pkts: self.init_cwnd_pkts, beta: self.beta, recovery_by_data: self.recovery_by_data }
    }
}

impl AlgorithmFactory for RenoConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Reno::new(*self))
    }
}

#[derive(Debug, Clone)]
pub struct Reno {
    cfg: RenoConfig,
    w: RenoWindow,
}

impl Reno {
    pub fn new(cfg: RenoConfig) -> Self {
        Reno { cfg, w: RenoWindow::new(cfg.window()) }
    }
}

impl RenoBased for Reno {
    fn window(&self) -> &RenoWindow {
        &self.w
    }
    fn window_mut(&mut self) -> &mut RenoWindow {
        &mut self.w
    }
}

impl Algorithm for Reno {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.w.start(start);
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn on_report(&mut self, report: &Report) -> Action {
        let ece = self.cfg.ecn && (report.ce_bytes > 0 || report.ece_acks > 0);
        if ece && !report.has_loss() {
            self.w.observe(report);
            if self.w.loss_is_new_event(report.now_us) {
                self.w.reduce(report.now_us, self.cfg.beta);
            }
        } else {
            self.w.on_report(report);
        }
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.cwnd_bytes() },
            StateVar { name: "ssthresh_bytes", value: self.w.ssthresh_bytes() },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_contract::Seed;

    const MSS: u32 = 1000;

    use crate::test_support::rtt;

    fn ack(now_us: u64, bytes: u64) -> Report {
        Report { now_us, interval_us: 10_000, mss_bytes: MSS, acked_bytes: bytes, rtt: rtt(100_000), ..Report::default() }
    }

    fn reno() -> Reno {
        let mut r = Reno::new(RenoConfig::default());
        r.init(&FlowStart::new(MSS, 10_000));
        r
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut r = reno();
        // One RTT's worth of ACKs for a full window doubles it.
        let a = r.on_report(&ack(100_000, 10_000));
        assert_eq!(a.cwnd_bytes, Some(20_000.0));
        let a = r.on_report(&ack(200_000, 20_000));
        assert_eq!(a.cwnd_bytes, Some(40_000.0));
    }

    /// Growth counts each segment once, when first delivered (Linux's acked_sacked): SACKs count
    /// as they arrive, and the cumulative ACK that later jumps over them counts only what it
    /// newly delivers.
    #[test]
    fn slow_start_counts_sacked_segments_once() {
        let mut r = reno();
        let sacks = Report { acked_bytes: 0, sacked_bytes: 3_000, sacked_pkts: 3, ..ack(100_000, 0) };
        let a = r.on_report(&sacks);
        assert_eq!(a.cwnd_bytes, Some(13_000.0));
        // snd_una moves 5 segments: the 3 SACKed ones and 2 new.
        let jump = Report { acked_bytes: 5_000, acked_pkts: 2, ..ack(110_000, 0) };
        let a = r.on_report(&jump);
        assert_eq!(a.cwnd_bytes, Some(15_000.0));
        // A datapath that counts no packets: the bytes.
        let a = r.on_report(&ack(120_000, 4_000));
        assert_eq!(a.cwnd_bytes, Some(19_000.0));
    }

    #[test]
    fn congestion_avoidance_adds_one_mss_per_window() {
        let mut r = reno();
        r.w.set_ssthresh(10_000.0);
        // A window of ACKs split across ten reports adds ~one MSS, however it is split.
        for i in 0..10 {
            r.on_report(&ack(100_000 + i, 1_000));
        }
        let grown = r.w.cwnd_bytes() - 10_000.0;
        assert!((grown - 1000.0).abs() < 50.0, "grew {grown}");
        let mut single = reno();
        single.w.set_ssthresh(10_000.0);
        single.on_report(&ack(100_000, 10_000));
        assert!((single.w.cwnd_bytes() - r.w.cwnd_bytes()).abs() < 1e-6, "aggregation changes the result");
    }

    #[test]
    fn slow_start_excess_is_credited_to_avoidance() {
        let mut r = reno();
        r.w.set_ssthresh(15_000.0);
        r.on_report(&ack(100_000, 10_000));
        // 5 kB takes it to ssthresh, the other 5 kB grow it by about 5000*1000/15000.
        assert!(r.w.cwnd_bytes() > 15_000.0 && r.w.cwnd_bytes() < 15_400.0, "{}", r.w.cwnd_bytes());
    }

    #[test]
    fn loss_halves_once_per_rtt() {
        let mut r = reno();
        r.on_report(&ack(100_000, 30_000)); // cwnd 40 kB
        let mut loss = ack(150_000, 0);
        loss.lost_pkts = 3;
        assert_eq!(r.on_report(&loss).cwnd_bytes, Some(20_000.0));
        // A second loss report inside the same RTT is the same congestion event.
        loss.now_us = 200_000;
        assert_eq!(r.on_report(&loss).cwnd_bytes, Some(20_000.0));
        // ...and the window does not grow during recovery.
        assert_eq!(r.on_report(&ack(220_000, 10_000)).cwnd_bytes, Some(20_000.0));
        // One RTT later a new loss is a new event.
        loss.now_us = 260_000;
        assert_eq!(r.on_report(&loss).cwnd_bytes, Some(10_000.0));
    }

    #[test]
    fn timeout_collapses_to_loss_window_and_slow_starts() {
        let mut r = reno();
        r.on_report(&ack(100_000, 30_000)); // 40 kB
        let mut to = ack(200_000, 0);
        to.timeouts = 1;
        to.inflight_bytes = 40_000;
        assert_eq!(r.on_report(&to).cwnd_bytes, Some(2_000.0));
        assert_eq!(r.w.ssthresh_bytes(), 20_000.0);
        // After the recovery RTT it slow-starts again.
        assert_eq!(r.on_report(&ack(400_000, 2_000)).cwnd_bytes, Some(4_000.0));
    }

    #[test]
    fn never_below_two_packets() {
        let mut r = reno();
        for i in 0..20 {
            let mut loss = ack(1_000_000 * i, 0);
            loss.lost_pkts = 1;
            let c = r.on_report(&loss).cwnd_bytes.unwrap();
            assert!(c >= 2.0 * f64::from(MSS));
        }
    }

    #[test]
    fn seeded_flow_continues_in_avoidance() {
        let mut r = Reno::new(RenoConfig::default());
        let start = FlowStart {
            now_us: 5,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: None,
            seed: Some(Seed { cwnd_bytes: 50_000, srtt_us: Some(100_000), ..Seed::default() }),
        };
        assert_eq!(r.init(&start).cwnd_bytes, Some(50_000.0));
        let c = r.on_report(&ack(100_000, 50_000)).cwnd_bytes.unwrap();
        assert!((c - 51_000.0).abs() < 20.0, "{c}");
    }

    #[test]
    fn larger_mss_keeps_the_two_packet_floor() {
        let mut r = reno();
        for i in 0..10 {
            let mut loss = ack(1_000_000 * i, 0);
            loss.lost_pkts = 1;
            r.on_report(&loss);
        }
        assert_eq!(r.w.cwnd_bytes(), 2_000.0);
        let mut a = ack(20_000_000, 0);
        a.mss_bytes = 9000;
        assert_eq!(r.on_report(&a).cwnd_bytes, Some(18_000.0));
    }

    #[test]
    fn app_limited_reports_do_not_grow_the_window() {
        let mut r = reno();
        let mut a = ack(100_000, 10_000);
        a.app_limited = true;
        assert_eq!(r.on_report(&a).cwnd_bytes, Some(10_000.0));
    }

    #[test]
    fn ecn_echo_halves_once_per_rtt_unless_disabled() {
        let mut r = reno();
        r.on_report(&ack(100_000, 30_000)); // 40 kB
        let mut marked = ack(150_000, 5_000);
        marked.ce_bytes = 1_000;
        assert_eq!(r.on_report(&marked).cwnd_bytes, Some(20_000.0));
        marked.now_us = 200_000;
        assert_eq!(r.on_report(&marked).cwnd_bytes, Some(20_000.0), "same congestion event");

        let mut r = Reno::new(RenoConfig { ecn: false, ..RenoConfig::default() });
        r.init(&FlowStart::new(MSS, 10_000));
        let mut marked = ack(100_000, 10_000);
        marked.ece_acks = 3;
        assert_eq!(r.on_report(&marked).cwnd_bytes, Some(20_000.0), "ECN ignored: plain slow start");
    }

    /// The losses of one overflow that trickle in after the SRTT are one congestion event until
    /// the flight at the cut is acknowledged (at most 3 SRTTs); with `recovery_by_data` off, any
    /// loss after the SRTT cuts again.
    #[test]
    fn a_congestion_event_lasts_until_the_flight_at_the_cut_is_acknowledged() {
        let loss = |now_us, inflight_pkts: u64| Report {
            lost_pkts: 1,
            inflight_bytes: inflight_pkts * u64::from(MSS),
            ..ack(now_us, 0)
        };
        // The window after each loss over the window before it.
        let run = |by_data: bool| -> Vec<f64> {
            let mut r = Reno::new(RenoConfig { recovery_by_data: by_data, ..RenoConfig::default() });
            r.init(&FlowStart::new(MSS, 40_000));
            let cut = |r: &mut Reno, report: Report| {
                let before = r.w.cwnd_bytes();
                r.on_report(&report).cwnd_bytes.unwrap() / before
            };
            let mut w = vec![cut(&mut r, loss(100_000, 10))];
            // After the SRTT, 4 of the 10 packets in flight at the cut are acknowledged: a loss now
            // is of a packet sent before the cut.
            r.on_report(&ack(210_000, 4_000));
            w.push(cut(&mut r, loss(220_000, 6)));
            // The rest acknowledged: the next loss is a new event.
            r.on_report(&ack(240_000, 6_000));
            w.push(cut(&mut r, loss(250_000, 6)));
            // Nothing acknowledged for 3 SRTTs after that cut: losses count again.
            w.push(cut(&mut r, loss(560_000, 6)));
            w
        };
        assert_eq!(run(true), vec![0.5, 1.0, 0.5, 0.5], "one cut for the event, then one per new event");
        assert_eq!(run(false)[..2], [0.5, 0.5], "one SRTT only: the late loss cuts again");
    }

    /// The recovery point is the data outstanding at the cut (snd_nxt), not the flight: the flight
    /// leaves out SACKed and lost segments, so the cumulative ACK that repairs the first hole
    /// passes the flight at the cut while the last segments sent before it are still
    /// unacknowledged, and a loss among them belongs to the same event. (The agent's Reno on the
    /// eBPF datapath cut twice for one overflow this way before `unacked_bytes` was reported.)
    #[test]
    fn a_loss_before_the_recovery_point_is_the_same_event_though_the_flight_at_the_cut_is_acknowledged() {
        let mss = u64::from(MSS);
        let report = |now_us, acked_pkts: u64, inflight_pkts: u64, unacked_pkts: u64| Report {
            lost_pkts: 1,
            inflight_bytes: inflight_pkts * mss,
            unacked_bytes: unacked_pkts * mss,
            ..ack(now_us, acked_pkts * mss)
        };
        let run = |says_unacked: bool| {
            let unacked = |pkts: u64| if says_unacked { pkts } else { 0 };
            let mut r = Reno::new(RenoConfig::default());
            r.init(&FlowStart::new(MSS, 28_000));
            // The cut: 26 segments in flight, 3 SACKed and 1 lost besides, 30 outstanding.
            r.on_report(&report(100_000, 0, 26, unacked(30)));
            // After the SRTT the retransmission repairs the hole: the cumulative ACK moves 28, and
            // one of the 2 segments sent last before the cut is found lost.
            r.on_report(&report(220_000, 28, 12, unacked(14))).cwnd_bytes
        };
        assert_eq!(run(true), Some(14_000.0), "one cut for the overflow");
        assert_eq!(run(false), Some(7_000.0), "with the flight alone it cuts again");
    }
}
