//! Reno: the standard TCP congestion controller (RFC 5681), driven by aggregated reports.
//!
//! Slow start grows the window by the bytes acknowledged (doubling per RTT) until it reaches
//! ssthresh; congestion avoidance then adds one MSS per window of acknowledged data (one MSS per
//! RTT). On loss the window halves (ssthresh = cwnd/2, as Linux's tcp_reno_ssthresh; RFC 5681
//! uses FlightSize/2) once per congestion event; on a retransmission timeout it collapses to
//! the loss window and slow-starts again. ECN-Echo is a congestion signal like a loss
//! (RFC 3168 §6.1.2): the same halving, at most once per round trip, without a retransmission.
//!
//! A congestion event (`RenoWindow::loss_is_new_event`) lasts one smoothed RTT and, when the
//! datapath reports bytes in flight, until the data in flight at the cut has been cumulatively
//! acknowledged, at most `RECOVERY_CAP_SRTTS` SRTTs: NewReno's recovery point (RFC 6582 §3.2),
//! as Linux keeps it. Growth waits only for the SRTT. Cubic found the need first (cubic.rs); for
//! Reno the libccp benchmark of issue 19 showed it: 1,000 flows at 2 Mbit/s, 20 ms, one-BDP
//! buffers; with a one-RTT event the late-detected losses of one overflow cut the window two or
//! three times, leaving too few packets for fast retransmit (an RTO per flow every few seconds,
//! 78 % utilisation where generic_cong_avoid's Reno, whose event also ends in data, had 99 %).
//!
//! A report aggregates many ACKs, so growth is applied to the report's total acknowledged bytes;
//! bytes that carry the window past ssthresh in slow start are credited to congestion avoidance.
//! Windows never go below `MIN_CWND_PKTS` (the contract's floor; RFC 5681's loss window is 1 MSS).

use std::sync::Arc;

use ccp_contract::params::shared;
use ccp_contract::{
    Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, ParamError, ParamSpec, Params, Report, StateVar,
    MIN_CWND_PKTS,
};

const PARAMS: &[ParamSpec] = &[
    shared::INIT_CWND_PKTS,
    ParamSpec::float(
        "beta",
        0.5,
        Bound::Exclusive(0.0),
        Bound::Exclusive(1.0),
        "",
        "multiplicative decrease on loss: ssthresh = beta * cwnd (RFC 5681: 1/2)",
    ),
    ParamSpec::bool("ecn", true, "respond to ECN-Echo (CE-marked ACKs) as to a loss, once per RTT (RFC 3168 §6.1.2)"),
    RECOVERY_BY_DATA,
];

/// Shared with the algorithms built on [`RenoWindow`].
pub const RECOVERY_BY_DATA: ParamSpec = ParamSpec::bool(
    "recovery_by_data",
    true,
    "a congestion event lasts until the bytes in flight at the reduction are cumulatively acknowledged (at least one SRTT, at most three), like Linux's recovery point; false = exactly one SRTT",
);

/// Longest a congestion event lasts, in SRTTs, so losses can never be ignored for good.
pub const RECOVERY_CAP_SRTTS: u64 = 3;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "reno",
    summary: "TCP Reno/NewReno: slow start, additive increase, halving on loss",
    reference: "RFC 5681 (TCP Congestion Control); Linux tcp_cong.c",
    params: PARAMS,
    build,
};

#[derive(Debug, Clone, Copy)]
pub struct RenoConfig {
    pub init_cwnd_pkts: f64,
    pub beta: f64,
    /// Whether `Reno` (the algorithm, not the shared `RenoWindow`) reacts to ECN-Echo.
    pub ecn: bool,
    /// A congestion event lasts until the flight at the cut is acknowledged (see the module
    /// docs); false: exactly one SRTT.
    pub recovery_by_data: bool,
}

impl Default for RenoConfig {
    fn default() -> Self {
        RenoConfig { init_cwnd_pkts: 10.0, beta: 0.5, ecn: true, recovery_by_data: true }
    }
}

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    Ok(Arc::new(RenoConfig {
        init_cwnd_pkts: p.float("init_cwnd_pkts"),
        beta: p.float("beta"),
        ecn: p.bool("ecn"),
        recovery_by_data: p.bool("recovery_by_data"),
    }))
}

impl AlgorithmFactory for RenoConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Reno::new(*self))
    }
}

/// Reno's window state, reusable by algorithms that are "Reno plus something" (DCTCP) or that share
/// Reno's slow start, recovery period and timeout handling (Cubic).
#[derive(Debug, Clone)]
pub struct RenoWindow {
    pub cfg: RenoConfig,
    pub mss: f64,
    pub cwnd_bytes: f64,
    pub ssthresh_bytes: f64,
    /// Datapath time before which further losses belong to the same congestion event.
    pub recovery_until_us: u64,
    /// Bytes in flight at the last reduction not yet cumulatively acknowledged: the recovery
    /// point in data (see `loss_is_new_event`).
    pub recovery_left_bytes: f64,
    /// Datapath time of the last reduction, µs.
    pub reduced_at_us: u64,
    /// Bytes in flight after the last report.
    pub inflight_bytes: u64,
    /// Last smoothed RTT seen, µs (0 until the first sample).
    pub srtt_us: u64,
}

impl RenoWindow {
    pub fn new(cfg: RenoConfig) -> Self {
        RenoWindow {
            cfg,
            mss: 1448.0,
            cwnd_bytes: 0.0,
            ssthresh_bytes: f64::INFINITY,
            recovery_until_us: 0,
            recovery_left_bytes: 0.0,
            reduced_at_us: 0,
            inflight_bytes: 0,
            srtt_us: 0,
        }
    }

    /// Sets up the window for a new or seeded flow.
    pub fn start(&mut self, start: &FlowStart) {
        self.mss = start.mss();
        match &start.seed {
            // A flow taken over mid-life has already probed the path: continue in congestion
            // avoidance from its current window instead of slow-starting past it.
            Some(seed) => {
                self.cwnd_bytes = (seed.cwnd_bytes as f64).max(self.min_cwnd());
                self.ssthresh_bytes = self.cwnd_bytes;
                self.srtt_us = seed.srtt_us.unwrap_or(0);
            }
            None => {
                let datapath_init = start.init_cwnd_bytes as f64;
                self.cwnd_bytes = if datapath_init > 0.0 { datapath_init } else { self.cfg.init_cwnd_pkts * self.mss };
                self.cwnd_bytes = self.cwnd_bytes.max(self.min_cwnd());
            }
        }
    }

    pub fn min_cwnd(&self) -> f64 {
        MIN_CWND_PKTS * self.mss
    }

    pub fn in_slow_start(&self) -> bool {
        self.cwnd_bytes < self.ssthresh_bytes
    }

    /// Records the report's MSS and RTT; call first for every report.
    pub fn observe(&mut self, report: &Report) {
        if report.mss_bytes > 0 {
            self.mss = report.mss();
            // A larger MSS must not leave the window below the floor in packets.
            self.cwnd_bytes = self.cwnd_bytes.max(self.min_cwnd());
        }
        if let Some(rtt) = report.rtt {
            self.srtt_us = rtt.srtt_us.max(1);
        }
        self.recovery_left_bytes = (self.recovery_left_bytes - report.acked_bytes as f64).max(0.0);
        self.inflight_bytes = report.inflight_bytes;
    }

    /// True while inside the round trip that follows a window reduction: the window does not
    /// grow.
    pub fn in_recovery(&self, now_us: u64) -> bool {
        now_us < self.recovery_until_us
    }

    /// Whether a loss (or ECN-Echo) seen now starts a new congestion event rather than belonging
    /// to the one being recovered from: a burst of drop-tail losses is one event, however they
    /// trickle in, so the window is cut once for it.
    ///
    /// An event ends with the data that caused it (the recovery point of RFC 6582/6675: Linux
    /// stays in recovery until the cumulative ACK passes the data outstanding at the reduction).
    /// A report stream shows neither sequence numbers nor send times, so the event lasts (a) one
    /// SRTT after the reduction and, when the datapath reports bytes in flight, (b) until that
    /// many bytes have been cumulatively acknowledged since — a hole keeps the cumulative ACK back
    /// until its retransmission is acknowledged, as in Linux — but (c) never longer than
    /// `RECOVERY_CAP_SRTTS` SRTTs, so losses can never be ignored for good.
    /// Why (b): with (a) alone, the losses of one drop-tail overflow that are detected just after
    /// the SRTT (the reordering window and the report interval delay them) cut the window a
    /// second time: on the eBPF datapath against a kernel Cubic flow (48 Mbit/s, 50 ms, 2 BDP,
    /// 120 s) the agent's Cubic cut to 0.49 in 4 of 11 loss episodes, 0.15–0.21 s after the first
    /// cut with SRTT 0.15 s, while the kernel flow cut once (0.7) in every one of them, and its
    /// share fell from 50 % to 40 % (19.5 vs 25.1 Mbit/s, 2 runs each); at the slow-start exit it
    /// cut three times. Reno's case is in the module docs.
    pub fn loss_is_new_event(&self, now_us: u64) -> bool {
        if self.in_recovery(now_us) {
            return false;
        }
        let cap = self.reduced_at_us.saturating_add(self.srtt_us.saturating_mul(RECOVERY_CAP_SRTTS));
        !self.cfg.recovery_by_data || self.recovery_left_bytes <= 0.0 || now_us >= cap
    }

    /// Multiplies the window by `factor` (a congestion event) and opens a recovery period: one
    /// RTT during which the window does not grow, and until the flight at the cut is
    /// acknowledged, further congestion signals belong to this event (`loss_is_new_event`).
    pub fn reduce(&mut self, now_us: u64, factor: f64) {
        self.cut(factor);
        self.recovery_until_us = now_us.saturating_add(self.srtt_us);
        self.reduced_at_us = now_us;
        self.recovery_left_bytes = self.inflight_bytes as f64;
    }

    /// Sets ssthresh and the window to `factor` times the window (never below the floor) without
    /// opening a recovery period: for callers that delimit the congestion event themselves
    /// (DCTCP's CWR period, which is measured in data rather than time).
    pub fn cut(&mut self, factor: f64) {
        self.ssthresh_bytes = (self.cwnd_bytes * factor).max(self.min_cwnd());
        self.cwnd_bytes = self.ssthresh_bytes;
    }

    /// Limits the window from outside (a growth pause ordered by another loop, ABC's legacy
    /// window): never raises it, never below the floor. Not a congestion event.
    pub fn cap(&mut self, max_bytes: f64) {
        self.cwnd_bytes = self.cwnd_bytes.min(max_bytes.max(self.min_cwnd()));
    }

    /// A proportional drop ordered from outside (Annulus's rule 2, annulus.md §12 A11): the window
    /// times `factor`, and ssthresh no higher than the new window, so slow start does not regrow
    /// what the other loop took away. Opens no recovery period: this loop saw no congestion.
    pub fn scale(&mut self, factor: f64) {
        self.cwnd_bytes = (self.cwnd_bytes * factor.clamp(0.0, 1.0)).max(self.min_cwnd());
        self.ssthresh_bytes = self.ssthresh_bytes.min(self.cwnd_bytes);
    }

    /// Retransmission timeout: remember half the window, collapse to the loss window.
    pub fn timeout(&mut self, now_us: u64, inflight_bytes: u64) {
        let flight = (inflight_bytes as f64).max(self.cwnd_bytes);
        self.ssthresh_bytes = (flight * self.cfg.beta).max(self.min_cwnd());
        self.cwnd_bytes = self.min_cwnd();
        self.recovery_until_us = now_us.saturating_add(self.srtt_us);
        self.recovery_left_bytes = 0.0;
    }

    /// Slow start: grows the window by the acknowledged bytes, but not past ssthresh. Returns the
    /// bytes left over for congestion avoidance (all of them when not in slow start). Algorithms
    /// with their own congestion-avoidance rule (Cubic) use this for their RFC 5681 slow start.
    pub fn slow_start(&mut self, acked_bytes: u64) -> f64 {
        let mut acked = acked_bytes as f64;
        if self.in_slow_start() {
            let room = self.ssthresh_bytes - self.cwnd_bytes;
            let ss = acked.min(room);
            self.cwnd_bytes += ss;
            acked -= ss;
        }
        acked
    }

    /// Grows the window for `acked_bytes` newly acknowledged bytes (slow start, then AIMD).
    pub fn grow(&mut self, acked_bytes: u64) {
        let acked = self.slow_start(acked_bytes);
        if acked > 0.0 {
            // One MSS per cwnd bytes acknowledged; integrating over the report keeps the result
            // independent of how many ACKs the report aggregates.
            let w0 = self.cwnd_bytes;
            self.cwnd_bytes = (w0 * w0 + 2.0 * self.mss * acked).sqrt();
        }
    }

    /// Standard Reno reaction to one report: loss/timeout response, else growth.
    pub fn on_report(&mut self, report: &Report) {
        self.observe(report);
        self.respond(report);
    }

    /// [`RenoWindow::on_report`] for a caller that has already observed the report.
    pub fn respond(&mut self, report: &Report) {
        if report.timeouts > 0 {
            self.timeout(report.now_us, report.inflight_bytes);
        } else if report.lost_pkts > 0 {
            if self.loss_is_new_event(report.now_us) {
                self.reduce(report.now_us, self.cfg.beta);
            }
        } else if !self.in_recovery(report.now_us) && !report.app_limited {
            self.grow(report.acked_bytes);
        }
    }
}

#[derive(Debug, Clone)]
pub struct Reno {
    w: RenoWindow,
}

impl Reno {
    pub fn new(cfg: RenoConfig) -> Self {
        Reno { w: RenoWindow::new(cfg) }
    }
}

impl Algorithm for Reno {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.w.start(start);
        Action::cwnd(self.w.cwnd_bytes)
    }

    fn on_report(&mut self, report: &Report) -> Action {
        let ece = self.w.cfg.ecn && (report.ce_bytes > 0 || report.ece_acks > 0);
        if ece && !report.has_loss() {
            self.w.observe(report);
            if self.w.loss_is_new_event(report.now_us) {
                self.w.reduce(report.now_us, self.w.cfg.beta);
            }
        } else {
            self.w.on_report(report);
        }
        Action::cwnd(self.w.cwnd_bytes)
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.cwnd_bytes },
            StateVar { name: "ssthresh_bytes", value: self.w.ssthresh_bytes },
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

    #[test]
    fn congestion_avoidance_adds_one_mss_per_window() {
        let mut r = reno();
        r.w.ssthresh_bytes = 10_000.0;
        // A window of ACKs split across ten reports adds ~one MSS, however it is split.
        for i in 0..10 {
            r.on_report(&ack(100_000 + i, 1_000));
        }
        let grown = r.w.cwnd_bytes - 10_000.0;
        assert!((grown - 1000.0).abs() < 50.0, "grew {grown}");
        let mut single = reno();
        single.w.ssthresh_bytes = 10_000.0;
        single.on_report(&ack(100_000, 10_000));
        assert!((single.w.cwnd_bytes - r.w.cwnd_bytes).abs() < 1e-6, "aggregation changes the result");
    }

    #[test]
    fn slow_start_excess_is_credited_to_avoidance() {
        let mut r = reno();
        r.w.ssthresh_bytes = 15_000.0;
        r.on_report(&ack(100_000, 10_000));
        // 5 kB takes it to ssthresh, the other 5 kB grow it by about 5000*1000/15000.
        assert!(r.w.cwnd_bytes > 15_000.0 && r.w.cwnd_bytes < 15_400.0, "{}", r.w.cwnd_bytes);
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
        assert_eq!(r.w.ssthresh_bytes, 20_000.0);
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
        assert_eq!(r.w.cwnd_bytes, 2_000.0);
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
                let before = r.w.cwnd_bytes;
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
}
