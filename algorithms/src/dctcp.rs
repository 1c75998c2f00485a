//! DCTCP: Data Center TCP, driven by aggregated reports.
//!
//! Model. Switches mark CE on every packet that arrives to a queue longer than K (instantaneous,
//! no averaging), and the receiver echoes each mark exactly. The sender keeps α, an estimate of the
//! fraction of its bytes that were marked, updated once per window of data (about one RTT):
//!
//!   α ← (1 − g)·α + g·F,  F = CE-marked bytes / acknowledged bytes in the window     (eq. 2.1)
//!
//! and on ECN-Echo cuts the window in proportion to the extent of congestion, at most once per
//! window of data (RFC 3168 CWR semantics):
//!
//!   cwnd ← max(cwnd·(1 − α/2), 2 packets)                                              (eq. 2.2)
//!
//! α = 1 is TCP's halving; a lightly marked path costs almost nothing, so queues stay near K with
//! full throughput. Everything else is unchanged Reno (reno::RenoWindow): slow start, +1 MSS per
//! RTT, halving on loss at most once per RTT, collapse on timeout. g = 1/16 (thesis §2.2.4); α₀ = 1
//! (not in the thesis; Linux's default, conservative: the first cut is TCP-like; spec A4).
//!
//! Order (spec A6): when a report both ends an observation window and carries marks, α is updated
//! first and the cut uses the new α (Linux updates α in its ACK event before entering CWR).
//!
//! "Window of data" without sequence numbers (spec A5, A7): reports carry no snd_una/snd_nxt, so a
//! window ends once the bytes cumulatively acknowledged since its start reach the bytes that were in
//! flight then (round.rs: the data-driven equivalent of Linux's sequence-number rule). The CWR
//! period after a cut is delimited the same way, from the data in flight at the cut, so "at most
//! once per window" holds in data, not in time. The first window of a flow is its initial (or
//! seeded) window. The alternative the spec mentions for datapaths without a usable in-flight count
//! is available as `window = "srtt"`: a window (and the CWR period) lasts one smoothed RTT of
//! datapath time; it differs slightly from the thesis.
//!
//! Choices where the sources leave room:
//! - F counts marked and delivered segments over the same segments, as Linux's
//!   `delivered_ce / delivered` does (`Report::delivered_and_marked_segments`): each segment once,
//!   at its first delivery, cumulative or selective. This is A5's "a dupack counts as 1 MSS"
//!   without its double count: a segment SACKed (and its mark counted) during recovery is not
//!   counted again when the cumulative ACK closes the hole, which `ce_bytes / acked_bytes` did,
//!   diluting F. With full-sized segments this is F in bytes. A window with nothing delivered
//!   leaves α unchanged (A5). The window's end is still in cumulative bytes (snd_una's advance).
//! - A report that ends a CWR period carries marks from before and after the period's end in an
//!   unknown order. Only its share past the end (its marks spread evenly over its acknowledged
//!   bytes) can start a new cut, `cwr_end = "past_end"`: A7, Linux ignores ECE until snd_una passes
//!   the snd_nxt of the cut. Counting any of its marks (`"any_mark"`, the default until 2026-12)
//!   re-cuts for the episode just cut for whenever reports are about an RTT apart; beside the
//!   kernel's bpf_dctcp at RTT 10 ms it left ours 15 % of the link (README, "Fidelity").
//! - The window does not grow during the CWR period (Linux reduces toward ssthresh there and does
//!   not raise cwnd; reno.rs does not grow during recovery either). The spec's §2.4 sketch grows
//!   on ACKs inside CWR; with it T-D7's "exactly one cut, to 90" would not hold.
//! - A loss inside the CWR period is the same congestion event and does not halve again (RFC 3168
//!   §6.1.2; Linux enters Recovery from CWR without a second reduction). Timeouts always apply
//!   (A9: unchanged TCP; Linux's optional "α = 1 on loss" is off) and end the CWR period. Marks
//!   during Reno's loss recovery are likewise the same event.
//!
//! RTT-fair variant (`rtt_fair = true`, thesis §3.4.2 eq. 3.35, spec §2.5, A10): no once-per-window
//! guard; every acknowledged segment adds 1/W and every marked one subtracts α/2 (floor 2). A report
//! of A segments, M marked, applies this per segment (M/A of each segment's decrease, as the order
//! of marks inside a report is unknown) — for up to 1024 segments exactly, in 1024 equal steps
//! beyond — which is the spec's aggregated W ← W + A/W − M·α/2 when A ≪ W, and matches T-D11 for
//! large reports. Reports without marks take Reno's path (its exact integration of +1/W per
//! segment), so without marks both variants are Reno exactly. α is still updated once per window.
//! A marked report ends slow start (ssthresh = min(ssthresh, cwnd)); app-limited reports apply the
//! decrease but not the increase.
//!
//! Datapath support: the standard fold suffices (acked_bytes, ce_bytes, inflight_bytes, losses,
//! timeouts, RTT). The cut should reach the datapath within a fraction of an RTT of the first mark
//! (spec §9.5: urgent report on the first ECE in a window); that is the datapath's concern.
//!
//! References: M. Alizadeh, "Packet Transport Mechanisms for Data Center Networks", PhD thesis,
//! Stanford, 2013, §2.2.1, §3.4.2 (as extracted in specs/dc.md §2.3–§2.5, §8 A4–A10, §9.1);
//! Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010; RFC 8257. Linux tcp_dctcp.c was
//! read for comparison only.

use std::sync::Arc;

use crate::reno::RenoConfig;
use crate::round::WindowEnd;
pub use crate::round::WindowMode;
use crate::window::{RenoBased, RenoWindow, WindowConfig};
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, param_choice, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Param, Report, StateVar,
    MIN_CWND_PKTS,
};

/// Estimation gain g of eq. 2.1, dimensionless (thesis §2.2.4: 1/16 in all experiments).
pub const G: f64 = 1.0 / 16.0;
/// Initial α, dimensionless (spec A4: Linux's 1).
pub const ALPHA_INIT: f64 = 1.0;
/// The RTT-fair rule is applied per segment for reports of up to this many segments, and in this
/// many equal steps for larger ones.
const RTT_FAIR_MAX_STEPS: f64 = 1024.0;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "dctcp",
    summary: "DCTCP: ECN-fraction estimator alpha, window cut by alpha/2 once per window; Reno otherwise",
    reference: "Alizadeh, PhD thesis 2013 §2.2.1, §3.4.2 (specs/dc.md §2.3–2.5); Alizadeh et al., SIGCOMM 2010; RFC 8257",
    params: DctcpConfig::PARAMS,
    build: |p| Ok(Arc::new(DctcpConfig::from_params(p)?)),
};

param_choice! {
    /// Whether the marks of a report that ends the CWR period start a new one.
    pub enum CwrEnd {
        /// Any mark in the report does (the report's order is unknown; the default until
        /// 2026-12, kept for comparison).
        AnyMark = "any_mark",
        /// Only the report's marks past the period's end do (A7: ECE is ignored until snd_una
        /// passes the cut's snd_nxt), spread evenly over its acknowledged bytes.
        PastEnd = "past_end",
    }
}

param_choice! {
    /// How a loss or timeout cuts the window.
    pub enum LossCut {
        /// Reno's halving.
        Halve = "halve",
        /// Linux's `dctcp_ssthresh`: cwnd·(1 − α/2).
        Alpha = "alpha",
    }
}

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct DctcpConfig {
        pub g: f64 = Param::float(G, Bound::Exclusive(0.0), Bound::Inclusive(1.0), "", "gain of the alpha estimator, eq. 2.1 (thesis: 1/16)"),
        pub alpha_init: f64 = Param::float(
            ALPHA_INIT,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "initial alpha (not in the thesis; Linux: 1, so the first cut is TCP-like)",
        ),
        pub window: WindowMode = Param::choice(
            "inflight",
            "what delimits a window of data (alpha update, CWR period): \"inflight\" = the bytes in flight at its start are acknowledged (snd_una passes snd_nxt); \"srtt\" = one smoothed RTT of datapath time",
        ),
        pub rtt_fair: bool = Param::bool(
            false,
            "RTT-fair variant (thesis eq. 3.35): per segment W += 1/W, and -alpha/2 per marked segment, with no once-per-window guard",
        ),
        pub loss_cut: LossCut = Param::choice(
            "halve",
            "response to loss and timeout: \"halve\" = unchanged TCP (spec A9); \"alpha\" = Linux tcp_dctcp's ssthresh cwnd·(1 - alpha/2), which all but vanishes when nothing marks (the host-ECN/unmarking-switch failure mode)",
        ),
        pub cwr_end: CwrEnd = Param::choice(
            "past_end",
            "marks in a report that ends the CWR period: \"any_mark\" = any starts a new cut; \"past_end\" = only the report's share past the period's end (spread evenly), as Linux ignores ECE until snd_una passes the cut's snd_nxt (A7); with reports about an RTT apart, any_mark re-cuts for marks of the episode just cut for",
        ),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

impl AlgorithmFactory for DctcpConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Dctcp::new(*self))
    }
}

#[derive(Debug, Clone)]
pub struct Dctcp {
    cfg: DctcpConfig,
    /// Reno's window, ssthresh, loss recovery and timeout handling.
    w: RenoWindow,
    alpha: f64,
    /// The open observation window for α and its byte counters.
    window: WindowEnd,
    /// Segments delivered and CE-marked in the window (Report::delivered_and_marked_segments).
    window_delivered: f64,
    window_marked: f64,
    /// F of the last completed window (with acknowledged data).
    last_fraction: f64,
    /// The CWR period after a cut, while it lasts.
    cwr: Option<WindowEnd>,
}

impl Dctcp {
    pub fn new(cfg: DctcpConfig) -> Self {
        Dctcp {
            cfg,
            // Reno's decrease and recovery for losses (with `loss_cut = "halve"`) and timeouts.
            w: RenoWindow::new(WindowConfig { init_cwnd_pkts: cfg.init_cwnd_pkts, ..RenoConfig::default().window() }),
            alpha: cfg.alpha_init,
            window: WindowEnd::Acked { remaining_bytes: 0.0 },
            window_delivered: 0.0,
            window_marked: 0.0,
            last_fraction: 0.0,
            cwr: None,
        }
    }

    fn open(&self, inflight_bytes: f64, now_us: u64) -> WindowEnd {
        WindowEnd::open(self.cfg.window, inflight_bytes, self.w.mss(), now_us, self.w.srtt_us())
    }

    /// Eq. 2.1, once per window of data.
    fn estimate(&mut self, report: &Report) {
        let (delivered, marked) = report.delivered_and_marked_segments();
        self.window_delivered += delivered;
        self.window_marked += marked;
        if !self.window.credit(report.acked_bytes, report.now_us) {
            return;
        }
        if self.window_delivered > 0.0 {
            let f = (self.window_marked / self.window_delivered).clamp(0.0, 1.0);
            self.alpha = ((1.0 - self.cfg.g) * self.alpha + self.cfg.g * f).clamp(0.0, 1.0);
            self.last_fraction = f;
        }
        self.window_delivered = 0.0;
        self.window_marked = 0.0;
        self.window = self.open(report.inflight_bytes as f64, report.now_us);
    }

    /// Eq. 2.2, and the CWR period that keeps it to once per window.
    fn cut(&mut self, report: &Report) {
        self.w.cut(1.0 - self.alpha / 2.0);
        self.cwr = Some(self.open(report.inflight_bytes as f64, report.now_us));
    }

    /// Eq. 3.35 per delivered segment, marks spread evenly over the report's segments.
    fn rtt_fair_update(&mut self, report: &Report) {
        let (segments, marked) = report.delivered_and_marked_segments();
        if segments <= 0.0 {
            return;
        }
        let mss = self.w.mss();
        let marked_fraction = marked / segments;
        let steps = segments.ceil().clamp(1.0, RTT_FAIR_MAX_STEPS);
        let per_step = segments / steps;
        let increase = if RenoWindow::window_limits(report) { per_step } else { 0.0 };
        let decrease = per_step * marked_fraction * self.alpha / 2.0;
        let mut w = self.w.cwnd_bytes() / mss;
        for _ in 0..steps as u32 {
            w = (w + increase / w - decrease).max(MIN_CWND_PKTS);
        }
        self.w.set_cwnd(w * mss);
        self.w.set_ssthresh(self.w.ssthresh_bytes().min(self.w.cwnd_bytes()));
    }
}

/// Another loop's cap or proportional drop (Annulus, annulus.md §12 A11) leaves α and the
/// observation window untouched: this loop's path did not mark.
impl RenoBased for Dctcp {
    fn window(&self) -> &RenoWindow {
        &self.w
    }
    fn window_mut(&mut self) -> &mut RenoWindow {
        &mut self.w
    }
}

impl Algorithm for Dctcp {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.w.start(start);
        self.alpha = self.cfg.alpha_init;
        // The first window of data is the window the flow starts with.
        self.window = self.open(self.w.cwnd_bytes(), start.now_us);
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn on_report(&mut self, report: &Report) -> Action {
        let now = report.now_us;
        self.w.observe(report);
        self.estimate(report);
        // The share of the report past the end of a CWR period it ends (1: no period ended).
        let mut past_end = 1.0;
        if let Some(cwr) = self.cwr.as_mut() {
            let remaining = cwr.remaining_bytes();
            if cwr.credit(report.acked_bytes, now) {
                self.cwr = None;
                if let (Some(r), true) = (remaining, report.acked_bytes > 0) {
                    past_end = (1.0 - r.max(0.0) / report.acked_bytes as f64).clamp(0.0, 1.0);
                }
            }
        }
        let any_mark = report.ce_bytes > 0 || report.ce_pkts > 0 || report.ece_acks > 0;
        let marked = match self.cfg.cwr_end {
            CwrEnd::PastEnd if past_end < 1.0 => {
                let (_, segments) = report.delivered_and_marked_segments();
                segments.max(report.ece_acks as f64) * past_end >= 1.0
            }
            _ => any_mark,
        };

        if report.timeouts > 0 {
            self.cwr = None;
            match self.cfg.loss_cut {
                LossCut::Halve => self.w.respond(report),
                LossCut::Alpha => {
                    let flight = self.w.cwnd_bytes().max(report.inflight_bytes as f64);
                    self.w.timeout(now, report.inflight_bytes);
                    self.w.set_ssthresh(flight * (1.0 - self.alpha / 2.0));
                }
            }
        } else if report.lost_pkts > 0 {
            if self.cwr.is_none() {
                match self.cfg.loss_cut {
                    LossCut::Halve => self.w.respond(report),
                    LossCut::Alpha if self.w.loss_is_new_event(now) => self.w.reduce(now, 1.0 - self.alpha / 2.0),
                    LossCut::Alpha => {}
                }
            }
        } else if marked {
            if self.w.in_recovery(now) {
                // Part of the loss event being recovered from.
            } else if self.cfg.rtt_fair {
                self.rtt_fair_update(report);
            } else if self.cwr.is_none() {
                self.cut(report);
            }
        } else if self.cwr.is_none() {
            self.w.respond(report);
        }
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.cwnd_bytes() },
            StateVar { name: "ssthresh_bytes", value: self.w.ssthresh_bytes() },
            StateVar { name: "alpha", value: self.alpha },
            StateVar { name: "window_ce_fraction", value: self.last_fraction },
            StateVar { name: "in_cwr", value: if self.cwr.is_some() { 1.0 } else { 0.0 } },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reno::Reno;
    use crate::test_support::{check_sane, reports, reports_with};
    use ccp_contract::Seed;
    use proptest::prelude::*;

    const MSS: u32 = 1000;
    const MSS_F: f64 = MSS as f64;
    const RTT_US: u64 = 100_000;

    use crate::test_support::rtt;

    /// A report acknowledging `acked` segments, `ce` of them CE-marked, with `inflight` segments
    /// outstanding at its end.
    fn rep(now_us: u64, acked: f64, ce: f64, inflight: f64) -> Report {
        let ce_bytes = (ce * MSS_F).round() as u64;
        // Bytes only (fractional segments allowed); tests that need packet counts set them.
        Report {
            now_us,
            interval_us: 10_000,
            mss_bytes: MSS,
            acked_bytes: (acked * MSS_F).round() as u64,
            ce_bytes,
            ece_acks: u64::from(ce_bytes > 0),
            rtt: rtt(RTT_US),
            inflight_bytes: (inflight * MSS_F).round() as u64,
            ..Report::default()
        }
    }

    fn seed(cwnd_pkts: f64) -> FlowStart {
        FlowStart {
            now_us: 0,
            mss_bytes: MSS,
            init_cwnd_bytes: 10 * u64::from(MSS),
            ecn: None,
            seed: Some(Seed { cwnd_bytes: (cwnd_pkts * MSS_F) as u64, srtt_us: Some(RTT_US), ..Seed::default() }),
        }
    }

    /// A flow taken over in congestion avoidance at `cwnd_pkts`.
    fn seeded(cfg: DctcpConfig, cwnd_pkts: f64) -> Dctcp {
        let mut d = Dctcp::new(cfg);
        d.init(&seed(cwnd_pkts));
        d
    }

    fn with_alpha(alpha_init: f64) -> DctcpConfig {
        DctcpConfig { alpha_init, ..DctcpConfig::default() }
    }

    fn cwnd_pkts(d: &Dctcp) -> f64 {
        d.w.cwnd_bytes() / MSS_F
    }

    /// Keeps the current α window open for the rest of the test.
    fn freeze_alpha(d: &mut Dctcp) {
        d.window = WindowEnd::Acked { remaining_bytes: 1e18 };
    }

    #[test]
    fn t_d4_alpha_sequence() {
        // α₀ = 1, g = 1/16, F = 0.25 in every window: α_n = F + (α₀ − F)(1 − g)^n.
        let mut d = seeded(DctcpConfig::default(), 100.0);
        let mut now = 0;
        for n in 1..=100 {
            now += RTT_US;
            // The window started with 100 segments in flight; they are all acknowledged, a quarter marked.
            d.on_report(&rep(now, 100.0, 25.0, 100.0));
            assert_eq!(d.last_fraction, 0.25);
            let closed = 0.25 + 0.75 * (15.0f64 / 16.0).powi(n);
            assert!((d.alpha - closed).abs() < 1e-12, "α_{n} = {} vs {closed}", d.alpha);
            match n {
                1 => assert!((d.alpha - 0.953125).abs() < 1e-6),
                10 => assert!((d.alpha - 0.643345).abs() < 1e-6, "{}", d.alpha),
                100 => assert!((d.alpha - 0.251181).abs() < 1e-6, "{}", d.alpha),
                _ => {}
            }
        }
    }

    #[test]
    fn t_d4_alpha_moves_once_per_window_not_per_report() {
        // The same windows split into four reports each (marks all in the first): identical α.
        let mut d = seeded(DctcpConfig::default(), 100.0);
        let mut now = 0;
        for n in 1..=10 {
            let before = d.alpha;
            for i in 0..4 {
                now += RTT_US / 4;
                let ce = if i == 0 { 25.0 } else { 0.0 };
                d.on_report(&rep(now, 25.0, ce, 100.0));
                if i < 3 {
                    assert_eq!(d.alpha, before, "α moved inside window {n}");
                }
            }
            let closed = 0.25 + 0.75 * (15.0f64 / 16.0).powi(n);
            assert!((d.alpha - closed).abs() < 1e-12);
        }
        assert!((d.alpha - 0.643345).abs() < 1e-6);
    }

    #[test]
    fn t_d5_byte_weighted_fraction() {
        // ACKs covering {2, 2, 1, 2, 1} segments, ECE on the 2nd and 3rd: F = 3/8.
        let mut d = seeded(with_alpha(0.0), 8.0);
        let acks = [(2.0, 0.0), (2.0, 2.0), (1.0, 1.0), (2.0, 0.0), (1.0, 0.0)];
        for (i, (acked, ce)) in acks.iter().enumerate() {
            d.on_report(&rep(10_000 * (i as u64 + 1), *acked, *ce, 8.0));
            if i < 4 {
                assert_eq!(d.alpha, 0.0, "window ended early at ACK {}", i + 1);
            }
        }
        assert_eq!(d.last_fraction, 3.0 / 8.0);
        assert!((d.alpha - (3.0 / 8.0) / 16.0).abs() < 1e-15);
    }

    #[test]
    fn f_counts_each_segment_once_at_its_first_delivery_sacked_or_cumulative() {
        // Window 1 (10 segments in flight): one report acknowledges all 10 cumulatively (none
        // marked) and SACKs 4 marked segments above a hole. Linux's delivered_ce / delivered is
        // 4/14; marks over cumulative bytes (the old rule) gave 4/10.
        let mut d = seeded(with_alpha(0.0), 10.0);
        let mut r = rep(10_000, 10.0, 0.0, 10.0);
        r.acked_pkts = 10;
        r.sacked_pkts = 4;
        r.sacked_bytes = 4 * u64::from(MSS);
        r.ce_pkts = 4;
        r.ce_bytes = 4 * u64::from(MSS);
        r.ece_acks = 4;
        d.on_report(&r);
        assert_eq!(d.last_fraction, 4.0 / 14.0);
        // Window 2: the retransmission fills the hole; its cumulative ACK covers the 4 SACKed
        // segments again in bytes (5 MSS) but delivers 1 new segment, then 5 more arrive. The
        // SACKed segments and their marks are not counted a second time: F = 0/6.
        let mut fill = rep(20_000, 5.0, 0.0, 10.0);
        fill.acked_pkts = 1;
        d.on_report(&fill);
        let mut rest = rep(30_000, 5.0, 0.0, 10.0);
        rest.acked_pkts = 5;
        d.on_report(&rest);
        assert_eq!(d.last_fraction, 0.0);
        let g = DctcpConfig::default().g;
        assert!((d.alpha - (1.0 - g) * g * 4.0 / 14.0).abs() < 1e-15, "α {}", d.alpha);
    }

    #[test]
    fn a_duplicate_ack_counts_as_the_one_segment_it_reports() {
        // Spec A5: three dup-ACKs (no cumulative progress, each reporting one segment, the
        // second marked) and then a cumulative ACK of 8 segments, 5 of them new: F = 1/8.
        let mut d = seeded(with_alpha(0.0), 8.0);
        for i in 0..3u64 {
            let mut dup = rep(10_000 * (i + 1), 0.0, 0.0, 8.0);
            dup.sacked_pkts = 1;
            dup.sacked_bytes = u64::from(MSS);
            if i == 1 {
                (dup.ce_pkts, dup.ce_bytes, dup.ece_acks) = (1, u64::from(MSS), 1);
            }
            d.on_report(&dup);
            assert_eq!(d.alpha, 0.0, "a dup-ACK ended the window");
        }
        let mut cum = rep(40_000, 8.0, 0.0, 8.0);
        cum.acked_pkts = 5;
        d.on_report(&cum);
        assert_eq!(d.last_fraction, 1.0 / 8.0);
    }

    #[test]
    fn t_d6_nothing_acked_leaves_alpha_unchanged() {
        // By data: a window cannot end without acknowledgements, marks or not.
        let mut d = seeded(with_alpha(0.4), 10.0);
        for i in 1..=20 {
            let mut r = rep(RTT_US * i, 0.0, 0.0, 10.0);
            r.ce_bytes = 5_000;
            d.on_report(&r);
            assert_eq!(d.alpha, 0.4);
        }
        // By time: windows elapse with nothing acknowledged; α stays, no division by zero.
        let mut d = seeded(DctcpConfig { window: WindowMode::Srtt, ..with_alpha(0.4) }, 10.0);
        for i in 1..=20 {
            d.on_report(&rep(RTT_US * i, 0.0, 0.0, 10.0));
            assert_eq!(d.alpha, 0.4);
            assert!(d.state().iter().all(|v| v.value.is_finite()));
        }
    }

    #[test]
    fn t_d7_one_cut_per_window() {
        // cwnd 100, α 0.2: ten marked reports inside one window → exactly one cut, to 90.
        let mut d = seeded(with_alpha(0.2), 100.0);
        let mut now = 0;
        for i in 0..10 {
            now += 10_000;
            d.on_report(&rep(now, 10.0, 10.0, 100.0));
            assert!((cwnd_pkts(&d) - 90.0).abs() < 1e-9, "report {}: {}", i + 1, cwnd_pkts(&d));
            assert_eq!(d.state()[4].value, 1.0, "in CWR");
        }
        // The first α window (the seeded 100 segments) closed on the 10th report: F = 1.
        assert!((d.alpha - (0.2 * 15.0 / 16.0 + 1.0 / 16.0)).abs() < 1e-15);
        // The 11th report acknowledges the last of the 100 segments in flight at the cut: the CWR
        // period is over, but its marks are on data sent before the cut, the episode already cut
        // for (A7: ECE is ignored until snd_una passes the cut's snd_nxt).
        now += 10_000;
        d.on_report(&rep(now, 10.0, 10.0, 100.0));
        let after = cwnd_pkts(&d);
        assert!((90.0..90.2).contains(&after), "report 11 does not cut (congestion avoidance): {after}");
        assert_eq!(d.state()[4].value, 0.0, "CWR over");
        // The 12th report's marks are on data sent after the cut: a new congestion event.
        now += 10_000;
        d.on_report(&rep(now, 10.0, 10.0, 100.0));
        let expect = after * (1.0 - d.alpha / 2.0);
        assert!((cwnd_pkts(&d) - expect).abs() < 1e-9, "{} vs {expect}", cwnd_pkts(&d));
        assert!((d.alpha - 0.25).abs() < 1e-15, "α of the first window");
    }

    #[test]
    fn past_end_counts_only_the_marks_after_the_cwr_period() {
        // A7 in aggregated reports: a report that ends the CWR period carries marks from before
        // and after its end in an unknown order; with cwr_end = "past_end" (the default) only
        // its share past the end counts, with "any_mark" any mark does.
        let after_cut = |cwr_end: CwrEnd, acked: f64, marked: f64| {
            let mut d = seeded(DctcpConfig { cwr_end, ..with_alpha(0.2) }, 100.0);
            freeze_alpha(&mut d);
            d.on_report(&rep(10_000, 10.0, 10.0, 100.0)); // cut to 90; CWR until 100 more acked
            d.on_report(&rep(20_000, 90.0, 0.0, 90.0));
            d.on_report(&rep(30_000, acked, marked, 90.0)); // the CWR period ends 10 segments in
            cwnd_pkts(&d)
        };
        // The period's last 10 segments, all marked: the episode already cut for.
        assert!(after_cut(CwrEnd::PastEnd, 10.0, 10.0) >= 90.0);
        assert!(after_cut(CwrEnd::AnyMark, 10.0, 10.0) < 90.0);
        // 10 before and 10 after, 2 marked: one mark's worth past the end → a new cut.
        assert!(after_cut(CwrEnd::PastEnd, 20.0, 2.0) < 90.0);
        // 10 before and 90 after, 1 marked: 0.9 of a mark past it → not (yet) a new event.
        assert!(after_cut(CwrEnd::PastEnd, 100.0, 1.0) >= 90.0);
        assert!(after_cut(CwrEnd::AnyMark, 100.0, 1.0) < 90.0);
    }

    #[test]
    fn cwr_blocks_growth_and_ends_by_data() {
        let mut d = seeded(with_alpha(0.2), 100.0);
        freeze_alpha(&mut d);
        d.on_report(&rep(10_000, 10.0, 10.0, 50.0)); // cut to 90; 50 segments in flight
        d.on_report(&rep(20_000, 49.0, 0.0, 60.0));
        assert_eq!(cwnd_pkts(&d), 90.0, "no growth in CWR");
        // A loss inside CWR is the same congestion event.
        let mut l = rep(25_000, 0.0, 0.0, 60.0);
        l.lost_pkts = 2;
        d.on_report(&l);
        assert_eq!(cwnd_pkts(&d), 90.0);
        // The 50th segment ends CWR; growth resumes (congestion avoidance: ssthresh = 90).
        d.on_report(&rep(30_000, 1.0, 0.0, 60.0));
        assert!(cwnd_pkts(&d) > 90.0 && cwnd_pkts(&d) < 90.1);
        d.on_report(&rep(40_000, 90.0, 0.0, 60.0));
        assert!((cwnd_pkts(&d) - 91.0).abs() < 0.02, "{}", cwnd_pkts(&d));
        // Outside CWR a loss is Reno's halving.
        let mut l = rep(50_000, 0.0, 0.0, 60.0);
        l.lost_pkts = 1;
        let before = cwnd_pkts(&d);
        d.on_report(&l);
        assert!((cwnd_pkts(&d) - before / 2.0).abs() < 1e-9);
    }

    #[test]
    fn t_d8_alpha_one_halves_alpha_zero_keeps() {
        let mut d = seeded(with_alpha(1.0), 100.0);
        d.on_report(&rep(10_000, 10.0, 10.0, 100.0));
        let mut r = Reno::new(RenoConfig::default());
        r.init(&seed(100.0));
        let mut l = rep(10_000, 10.0, 0.0, 100.0);
        l.lost_pkts = 1;
        let reno = r.on_report(&l).cwnd_bytes.unwrap();
        assert_eq!(d.w.cwnd_bytes(), reno);
        assert_eq!(cwnd_pkts(&d), 50.0);
        assert_eq!(d.w.ssthresh_bytes(), 50_000.0);

        let mut d = seeded(with_alpha(0.0), 100.0);
        d.on_report(&rep(10_000, 10.0, 10.0, 100.0));
        assert_eq!(cwnd_pkts(&d), 100.0);
    }

    #[test]
    fn t_d9_window_boundary_before_cut() {
        // The report that closes the window (100 segments, all marked) also carries the ECE.
        let mut d = seeded(with_alpha(0.5), 100.0);
        d.on_report(&rep(RTT_US, 100.0, 100.0, 100.0));
        let alpha = 0.5 * 15.0 / 16.0 + 1.0 / 16.0;
        assert_eq!(d.alpha, alpha);
        assert!((cwnd_pkts(&d) - 100.0 * (1.0 - alpha / 2.0)).abs() < 1e-9, "{}", cwnd_pkts(&d));
        assert!((cwnd_pkts(&d) - 73.4375).abs() < 1e-9, "cut used the updated α (old α would give 75)");
    }

    #[test]
    fn t_d11_rtt_fair_variant() {
        let cfg = DctcpConfig { rtt_fair: true, ..with_alpha(0.2) };
        // 100 consecutive marked segments, one per report and all in one report.
        for per_report in [1.0, 100.0] {
            let mut d = seeded(cfg, 100.0);
            freeze_alpha(&mut d);
            let mut now = 0;
            for _ in 0..(100.0 / per_report) as u32 {
                now += 1_000;
                d.on_report(&rep(now, per_report, per_report, 100.0));
            }
            assert!((cwnd_pkts(&d) - 91.047).abs() < 1e-3, "{per_report}/report: {}", cwnd_pkts(&d));
            assert!((cwnd_pkts(&d) - 91.04722720803872).abs() < 1e-9);
        }
        // 100 unmarked segments.
        for per_report in [1.0, 100.0] {
            let mut d = seeded(cfg, 100.0);
            freeze_alpha(&mut d);
            let mut now = 0;
            for _ in 0..(100.0 / per_report) as u32 {
                now += 1_000;
                d.on_report(&rep(now, per_report, 0.0, 100.0));
            }
            assert!((cwnd_pkts(&d) - 100.995).abs() < 1e-3, "{}", cwnd_pkts(&d));
        }
        // No once-per-window guard: every marked report decreases; floor 2 packets.
        let mut d = seeded(DctcpConfig { rtt_fair: true, ..with_alpha(1.0) }, 10.0);
        freeze_alpha(&mut d);
        let mut last = cwnd_pkts(&d);
        for i in 1..=3 {
            d.on_report(&rep(i * 1_000, 2.0, 2.0, 10.0));
            assert!(cwnd_pkts(&d) < last);
            last = cwnd_pkts(&d);
        }
        d.on_report(&rep(10_000, 1000.0, 1000.0, 10.0));
        assert!((cwnd_pkts(&d) - 2.0).abs() < 1e-12 && cwnd_pkts(&d) >= 2.0, "{}", cwnd_pkts(&d));
        // Half the segments marked: half the decrease (100 + 100/100 − 50·0.1 ≈ 96).
        let mut d = seeded(cfg, 100.0);
        freeze_alpha(&mut d);
        d.on_report(&rep(1_000, 100.0, 50.0, 100.0));
        assert!((cwnd_pkts(&d) - 96.0).abs() < 0.03, "{}", cwnd_pkts(&d));
    }

    #[test]
    fn cut_is_proportional_to_marked_fraction() {
        for f in [0.05, 0.1, 0.3] {
            let mut d = seeded(DctcpConfig::default(), 1000.0);
            let mut now = 0;
            for _ in 0..300 {
                now += RTT_US;
                let before = d.w.cwnd_bytes();
                // Each report acknowledges 200 segments, a fraction f marked: it ends the α
                // window and the previous cut's CWR period (100 segments in flight at each) half
                // way, so every report cuts, with the just-updated α, for its marks past the end.
                d.on_report(&rep(now, 200.0, 200.0 * f, 100.0));
                let expect = (before * (1.0 - d.alpha / 2.0)).max(2.0 * MSS_F);
                assert!((d.w.cwnd_bytes() - expect).abs() < 1e-6);
            }
            assert!((d.alpha - f).abs() < 1e-6, "α {} vs F {f}", d.alpha);
            d.w.set_cwnd(1000.0 * MSS_F);
            d.on_report(&rep(now + RTT_US, 200.0, 200.0 * f, 100.0));
            let cut = 1000.0 - cwnd_pkts(&d);
            assert!((cut - 1000.0 * f / 2.0).abs() < 1e-3, "F {f}: cut {cut}");
        }
    }

    #[test]
    fn srtt_windows() {
        let cfg = DctcpConfig { window: WindowMode::Srtt, ..with_alpha(0.5) };
        let mut d = seeded(cfg, 100.0);
        // Reports every 10 ms, all marked: α moves once per 100 ms SRTT, and there is one cut per SRTT.
        let mut cuts = 0;
        let mut updates = 0;
        let mut now = 0;
        for _ in 0..50 {
            now += 10_000;
            let (a, c) = (d.alpha, d.w.cwnd_bytes());
            d.on_report(&rep(now, 10.0, 10.0, 1000.0));
            updates += usize::from(d.alpha != a);
            cuts += usize::from(d.w.cwnd_bytes() < c);
        }
        assert_eq!(updates, 5);
        assert_eq!(cuts, 5);
    }

    #[test]
    fn state_and_params() {
        let d = seeded(DctcpConfig::default(), 10.0);
        let names: Vec<_> = d.state().iter().map(|v| v.name).collect();
        assert_eq!(names, ["cwnd_bytes", "ssthresh_bytes", "alpha", "window_ce_fraction", "in_cwr"]);
        assert!(INFO.configure(&"window = \"srtt\"\nrtt_fair = true\ng = 0.125".parse().unwrap()).is_ok());
        let e = INFO.configure(&"window = \"rtt\"".parse().unwrap()).err().unwrap();
        assert!(e.to_string().contains("one of inflight, srtt"), "{e}");
        assert!(INFO.configure(&"alpha_init = 1.5".parse().unwrap()).is_err());
        assert!(INFO.configure(&"g = 0".parse().unwrap()).is_err());
    }

    #[test]
    fn new_flow_slow_starts_and_first_window_is_the_initial_window() {
        let mut d = Dctcp::new(DctcpConfig::default());
        assert_eq!(d.init(&FlowStart::new(MSS, 10_000)).cwnd_bytes, Some(10_000.0));
        d.on_report(&rep(RTT_US, 10.0, 0.0, 20.0));
        assert_eq!(cwnd_pkts(&d), 20.0);
        assert_eq!(d.alpha, 1.0 - G, "the first window (10 segments, unmarked) closed");
        // A mark ends slow start with the cut.
        d.on_report(&rep(2 * RTT_US, 4.0, 1.0, 20.0));
        assert!(!d.w.in_slow_start());
        assert!((cwnd_pkts(&d) - 20.0 * (1.0 - d.alpha / 2.0)).abs() < 1e-9);
    }

    fn configs() -> impl Strategy<Value = DctcpConfig> {
        (prop_oneof![Just(G), 0.001f64..=1.0], 0.0f64..=1.0, any::<bool>(), any::<bool>()).prop_map(
            |(g, alpha_init, srtt, rtt_fair)| DctcpConfig {
                g,
                alpha_init,
                window: if srtt { WindowMode::Srtt } else { WindowMode::Inflight },
                rtt_fair,
                ..DctcpConfig::default()
            },
        )
    }

    proptest! {
        /// T-D10: without marks DCTCP (either variant, either window rule) is Reno, report by report.
        #[test]
        fn t_d10_no_marks_is_reno(seq in reports_with(60, false), cfg in configs(), seeded_start in any::<bool>()) {
            let start = if seeded_start { seed(37.0) } else { FlowStart::new(MSS, 10 * u64::from(MSS)) };
            let mut d = Dctcp::new(cfg);
            let mut r = Reno::new(RenoConfig::default());
            prop_assert_eq!(d.init(&start), r.init(&start));
            for rep in &seq {
                prop_assert_eq!(d.on_report(rep), r.on_report(rep));
            }
        }

        #[test]
        fn never_nan_or_below_two_packets(seq in reports(60), cfg in configs(), seeded_start in any::<bool>()) {
            let start = if seeded_start { seed(123.0) } else { FlowStart::new(MSS, 10 * u64::from(MSS)) };
            let mut d = Dctcp::new(cfg);
            let a = d.init(&start);
            check_sane(a.cwnd_bytes, MSS, &d.state())?;
            let mut mss = MSS;
            for r in &seq {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                let a = d.on_report(r);
                check_sane(a.cwnd_bytes, mss, &d.state())?;
                prop_assert!((0.0..=1.0).contains(&d.alpha));
            }
        }
    }

    #[test]
    fn linux_loss_cut_follows_alpha_and_vanishes_without_marks() {
        let f = INFO.configure(&"loss_cut = \"alpha\"\nalpha_init = 0.0".parse().unwrap()).unwrap();
        let mut d = f.create();
        d.init(&seed(100.0));
        let mut r = Report {
            now_us: 1,
            mss_bytes: MSS,
            lost_pkts: 3,
            inflight_bytes: 100 * u64::from(MSS),
            rtt: rtt(RTT_US),
            ..Report::default()
        };
        r.urgent = Some(ccp_contract::Urgent::Loss);
        let w = d.on_report(&r).cwnd_bytes.unwrap() / MSS_F;
        assert!((w - 100.0).abs() < 1e-9, "α = 0: the loss costs nothing (Linux DCTCP behind an unmarking switch): {w}");
        let f = INFO.configure(&"loss_cut = \"alpha\"".parse().unwrap()).unwrap();
        let mut d = f.create();
        d.init(&seed(100.0));
        let w = d.on_report(&r).cwnd_bytes.unwrap() / MSS_F;
        assert!((w - 50.0).abs() < 1e-9, "α = 1 (initial): halved: {w}");
        let f = INFO.configure(&toml::Table::new()).unwrap();
        let mut d = f.create();
        d.init(&seed(100.0));
        assert!((d.on_report(&r).cwnd_bytes.unwrap() / MSS_F - 50.0).abs() < 1e-9, "the default halves");
    }
}
