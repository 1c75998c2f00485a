//! Cubic: TCP CUBIC congestion control (RFC 9438), driven by aggregated reports.
//!
//! Model. After a congestion event CUBIC grows the window as a cubic function of the real time
//! elapsed since the current congestion-avoidance stage (the "epoch") began, not of the number of
//! round trips, so flows with different RTTs grow alike:
//!
//!   W_cubic(t) = C·(t − K)³ + W_max,    K = cbrt((W_max − cwnd_epoch) / C)     (RFC 9438 §4.2)
//!
//! in segments and seconds, with C = 0.4 and β_cubic = 0.7. W_max is the window just before the
//! last reduction and cwnd_epoch the window when the epoch started; after an ordinary reduction
//! cwnd_epoch = β·W_max, so K = cbrt(W_max·(1 − β)/C) (100 segments → K = 4.217 s). The curve is
//! concave below W_max (fast recovery toward the old operating point, then a plateau around it at
//! t = K) and convex above it (slow, then fast probing for more bandwidth).
//!
//! - Congestion avoidance (§4.4, §4.5): target = W_cubic(t + RTT) clamped to [cwnd, 1.5·cwnd],
//!   RTT the smoothed RTT (`target_ahead_by_min_rtt`: the minimum, as Linux);
//!   each acknowledged segment adds (target − cwnd)/cwnd. A report aggregates many ACKs, so the
//!   per-segment rule is integrated exactly over the report's acknowledged segments (closed form
//!   plus a one-dimensional monotone root solve), which makes the result independent of how many
//!   ACKs a report carries (as reno.rs does for Reno).
//! - Reno-friendly region (§4.3): W_est starts at cwnd_epoch and grows by α_cubic per window of
//!   acknowledged data, α_cubic = 3(1 − β)/(1 + β) (0.529 for β = 0.7: AIMD(α_cubic, β) has the
//!   average throughput of AIMD(1, 0.5)); once W_est reaches cwnd_prior (the window before the last
//!   reduction) α is 1, as the RFC recommends. When W_cubic(t) < W_est the window is W_est
//!   (`w_est_at_once`; false: W_est is the target of the per-segment rule, as in Linux;
//!   `w_est_whole_segments`: only its whole segments count, as Linux's integer tcp_cwnd).
//! - Multiplicative decrease (§4.6) on loss or ECN-Echo, once per congestion event: an event lasts
//!   one SRTT (the recovery period of reno.rs) and until the data outstanding at the reduction
//!   has been cumulatively acknowledged (at most 3 SRTTs) — the recovery
//!   point of Linux and RFC 6582 (`recovery_by_data`; see `RenoWindow::loss_is_new_event` for the evidence):
//!   ssthresh = max(cwnd·β, 2 segments), cwnd = ssthresh. Fast convergence (§4.7):
//!   if the window had not regained the previous W_max, W_max = cwnd·(1 + β)/2, else W_max = cwnd.
//! - Timeout (§4.8): ssthresh from β (as reno.rs, from max(inflight, cwnd)), cwnd to the loss window
//!   (the agent's floor of 2 packets, as Reno), and the epoch is reset: the next congestion-avoidance
//!   stage uses K = 0 and W_max = its starting window.
//! - Slow start (§4.10) below ssthresh is Reno's (reno::RenoWindow). Bytes that carry the window
//!   past ssthresh inside a report are credited to congestion avoidance.
//! - The epoch starts at the first congestion-avoidance report that acknowledges data after a
//!   reduction; t is measured on the datapath clock (`Report::now_us`), and (§5.8) excludes time the
//!   flow spent application-limited, during which the window does not grow.
//!
//! Seeded flows (hot swap, adoption) start in congestion avoidance with W_max = the seeded window
//! (and cwnd_prior = the seeded window). The previous controller has already probed the path, so its
//! window is our best estimate of the operating point: with W_max = cwnd_epoch the epoch has K = 0
//! and starts on the plateau, probing above it gently (the convex region), while W_est grows at
//! Reno's rate. This is the state RFC 9438 §4.8 prescribes after a timeout and what Linux does when
//! it has no W_max larger than the window. Slow-starting from it would overshoot a path that is
//! already full; pretending a reduction just happened (W_max = cwnd/β) would invent a congestion
//! event and jump 43% in K seconds.
//!
//! - HyStart++ (RFC 9406, hystart.rs; on by default, as Linux's HyStart is): the initial slow start
//!   moves to conservative slow start when the round's minimum RTT rises, and ends after CSS_ROUNDS
//!   rounds of it without waiting for a loss (`hystart_css_rounds`; 0 ends slow start at the delay
//!   signal itself, as Linux's HyStart does). Off (`hystart = false`), slow start runs until the
//!   first loss or ECN-Echo.
//!
//! Not implemented: the undo of spurious congestion events (§4.9: reports carry no spurious-retransmission signal), and
//! per-ACK pacing of the increase (the datapath applies the window per report).
//!
//! References: RFC 9438 (Xu, Ha, Rhee, Goel, Eggert, 2023); S. Ha, I. Rhee, L. Xu, "CUBIC: A New
//! TCP-Friendly High-Speed TCP Variant", ACM SIGOPS OSR 42(5), 2008. Linux tcp_cubic.c was read
//! for comparison only; this is an independent implementation in floating point.

use std::sync::Arc;

use crate::hystart::{Growth, HyStart, CSS_GROWTH_DIVISOR, CSS_ROUNDS};
use crate::window::{RenoBased, RenoWindow, WindowConfig, RECOVERY_BY_DATA};
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Param, Report, StateVar,
};

/// RFC 9438's C: the scaling of the cubic curve, segments per second³.
pub const C_SEGMENTS_PER_S3: f64 = 0.4;
/// RFC 9438's β_cubic: the window after a congestion event is β times the window before, dimensionless.
pub const BETA_CUBIC: f64 = 0.7;
/// The target is clamped to at most this multiple of cwnd per RTT (RFC 9438 §4.4–§4.5).
const MAX_TARGET_RATIO: f64 = 1.5;
/// Microseconds per second, for t in W_cubic(t).
const US_PER_S: f64 = 1e6;
/// Iteration cap of the (monotonically converging) Newton solve in `integrate_cubic`.
const NEWTON_MAX_ITERS: usize = 100;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "cubic",
    summary: "TCP CUBIC: cubic window growth in real time since the last congestion event, beta = 0.7",
    reference: "RFC 9438 (CUBIC for Fast and Long-Distance Networks); Ha, Rhee, Xu, ACM SIGOPS OSR 2008",
    params: CubicConfig::PARAMS,
    build: |p| Ok(Arc::new(CubicConfig::from_params(p)?)),
};

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct CubicConfig {
        pub c: f64 = Param::float(
            C_SEGMENTS_PER_S3,
            Bound::Exclusive(0.0),
            Bound::Inclusive(100.0),
            "segments/s³",
            "aggressiveness of the cubic curve W(t) = C·(t − K)³ + W_max (RFC 9438: 0.4)",
        ),
        pub beta: f64 = Param::float(
            BETA_CUBIC,
            Bound::Exclusive(0.0),
            Bound::Exclusive(1.0),
            "",
            "multiplicative decrease on congestion: cwnd = beta·cwnd (RFC 9438 §4.6: 0.7)",
        ),
        pub fast_convergence: bool = Param::bool(
            true,
            "release bandwidth faster to new flows: W_max = cwnd·(1 + beta)/2 when the window had not regained W_max (RFC 9438 §4.7)",
        ),
        pub recovery_by_data: bool = RECOVERY_BY_DATA,
        pub hystart: bool = Param::bool(
            true,
            "leave the initial slow start on rising delay through HyStart++'s conservative slow start, before the first loss (RFC 9406)",
        ),
        pub hystart_css_rounds: u32 = Param::int(
            CSS_ROUNDS as i64,
            0,
            100,
            "rounds",
            "rounds of HyStart++'s conservative slow start before slow start ends (RFC 9406: 5); 0 ends it at the delay signal, as Linux's HyStart",
        ),
        pub reno_friendly: bool = Param::bool(true, "never grow slower than the Reno estimate W_est (RFC 9438 §4.3)"),
        pub w_est_alpha_one_after_prior: bool = Param::bool(
            true,
            "W_est grows by 1 segment per RTT once it regains the window before the last reduction (RFC 9438 §4.3, SHOULD); false keeps α_cubic throughout, as Linux's tcp_cubic does",
        ),
        pub w_est_at_once: bool = Param::bool(
            true,
            "the window is W_est as soon as W_est is above the curve (RFC 9438 §4.3); false approaches W_est as the curve's target, each segment adding (W_est − cwnd)/cwnd, as Linux's tcp_cubic does (cnt = cwnd/(W_est − cwnd))",
        ),
        pub w_est_whole_segments: bool = Param::bool(
            false,
            "W_est counts only whole segments where it raises the window, as Linux's tcp_cwnd (an integer, one more every cwnd·(1 + β)/(3(1 − β)) segments acknowledged); RFC 9438 §4.3's W_est is continuous",
        ),
        pub target_ahead_by_min_rtt: bool = Param::bool(
            false,
            "the per-segment rule's target is W_cubic(t + RTT) with RTT the smoothed RTT (RFC 9438 §4.2); true: the minimum RTT, as Linux's tcp_cubic (delay_min), which a standing queue does not lengthen",
        ),
        pub ecn: bool = Param::bool(true, "treat ECN-Echo / CE-marked ACKs as a congestion event like loss (RFC 9438 §4.6, RFC 3168)"),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

impl AlgorithmFactory for CubicConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Cubic::new(*self))
    }
}

/// K = cbrt((W_max − cwnd_epoch)/C), seconds: when the curve started at `cwnd_epoch` regains `w_max`.
/// Zero when the epoch starts at or above W_max (RFC 9438 §4.8; also the seeded case).
pub fn k_seconds(w_max_pkts: f64, cwnd_epoch_pkts: f64, c: f64) -> f64 {
    ((w_max_pkts - cwnd_epoch_pkts).max(0.0) / c).cbrt()
}

/// W_cubic(t) = C·(t − K)³ + W_max, segments (RFC 9438 eq. 1).
pub fn w_cubic(t_s: f64, k_s: f64, w_max_pkts: f64, c: f64) -> f64 {
    let d = t_s - k_s;
    c * d * d * d + w_max_pkts
}

/// α_cubic = 3(1 − β)/(1 + β): the additive increase that makes AIMD(α, β) as aggressive as Reno's AIMD(1, 0.5).
pub fn alpha_cubic(beta: f64) -> f64 {
    3.0 * (1.0 - beta) / (1.0 + beta)
}

/// Integrates the congestion-avoidance rule "each acknowledged segment adds (target − W)/W, with
/// target clamped to [W, 1.5·W]" over `n` segments, starting from `w0` with `target` fixed for the
/// report. Returns the window after and ∫ dn / W along the way (the number of windows' worth of data
/// acknowledged, which drives W_est).
///
/// Below target/1.5 the clamp gives dW/dn = 1/2; above it dW/dn = (T − W)/W, whose solution with
/// u = T − W and x = ∫ dn/W = ln(u₀/u) is n = T·x − u₀·(1 − e^(−x)). That is increasing and convex
/// in x (u₀ ≤ T/3 < T), so Newton's method from an upper bound converges monotonically.
fn integrate_cubic(w0: f64, target: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (w0, 0.0);
    }
    if target <= w0 {
        // target = cwnd: no increase (the window is at or above the curve).
        return (w0, n / w0);
    }
    let (mut w, mut n, mut windows) = (w0, n, 0.0);
    let knee = target / MAX_TARGET_RATIO;
    if w < knee {
        let to_knee = 2.0 * (knee - w);
        if n <= to_knee {
            let w1 = w + 0.5 * n;
            return (w1, 2.0 * (w1 / w).ln());
        }
        windows += 2.0 * (knee / w).ln();
        n -= to_knee;
        w = knee;
    }
    let u0 = target - w;
    let f = |x: f64| target * x + u0 * (-x).exp_m1() - n;
    let (lo, mut x) = (n / target, (n + u0) / target);
    for _ in 0..NEWTON_MAX_ITERS {
        let slope = target - u0 * (-x).exp();
        let next = (x - f(x) / slope).clamp(lo, x);
        if next >= x {
            break;
        }
        x = next;
    }
    (target - u0 * (-x).exp(), windows + x)
}

/// W_est grows by α per window of data while below `prior`, then by 1 (RFC 9438 §4.3). Advances it
/// by `windows` = ∫ dn / cwnd windows' worth of acknowledged data.
fn advance_w_est(w_est: f64, windows: f64, alpha: f64, prior: f64) -> f64 {
    if w_est < prior {
        let to_prior = (prior - w_est) / alpha;
        if windows <= to_prior {
            return w_est + alpha * windows;
        }
        return prior + (windows - to_prior);
    }
    w_est + windows
}

/// W_est when it is itself the window (Reno-friendly region): dW/dn = α/W, integrated exactly over
/// `n` segments, with α → 1 once W reaches `prior`.
fn grow_w_est_as_window(w_est: f64, n: f64, alpha: f64, prior: f64) -> f64 {
    if n <= 0.0 {
        return w_est;
    }
    let (mut w, mut n) = (w_est, n);
    if w < prior {
        let to_prior = (prior * prior - w * w) / (2.0 * alpha);
        if n <= to_prior {
            return (w * w + 2.0 * alpha * n).sqrt();
        }
        n -= to_prior;
        w = prior;
    }
    (w * w + 2.0 * n).sqrt()
}

#[derive(Debug, Clone)]
pub struct Cubic {
    cfg: CubicConfig,
    /// Window, ssthresh, MSS, SRTT and the one-RTT recovery period, shared with Reno.
    w: RenoWindow,
    alpha: f64,
    /// Window before the last reduction, after fast convergence, segments (0: none yet).
    w_max: f64,
    /// K of the current (or next) epoch, seconds.
    k_s: f64,
    /// Datapath time the current congestion-avoidance epoch started (shifted forward by
    /// application-limited time); `None` until the first congestion-avoidance report after a reduction.
    epoch_start_us: Option<u64>,
    /// Window when the epoch started, segments.
    cwnd_epoch: f64,
    /// Reno-friendly estimate, segments.
    w_est: f64,
    /// Window just before the last reduction, segments (where α_cubic switches to 1).
    cwnd_prior: f64,
    /// Datapath time of the previous report, for measuring application-limited time.
    last_now_us: u64,
    /// HyStart++ while the initial slow start lasts; `None` once it has ended for any reason.
    hystart: Option<HyStart>,
}

impl Cubic {
    pub fn new(cfg: CubicConfig) -> Self {
        Cubic {
            cfg,
            w: RenoWindow::new(WindowConfig {
                init_cwnd_pkts: cfg.init_cwnd_pkts,
                beta: cfg.beta,
                recovery_by_data: cfg.recovery_by_data,
            }),
            alpha: alpha_cubic(cfg.beta),
            w_max: 0.0,
            k_s: 0.0,
            epoch_start_us: None,
            cwnd_epoch: 0.0,
            w_est: 0.0,
            cwnd_prior: 0.0,
            last_now_us: 0,
            hystart: None,
        }
    }

    fn cwnd_pkts(&self) -> f64 {
        self.w.cwnd_pkts()
    }

    /// Loss or ECN-Echo outside a recovery period (RFC 9438 §4.6, §4.7).
    fn on_congestion(&mut self, now_us: u64) {
        let cwnd = self.cwnd_pkts();
        self.cwnd_prior = cwnd;
        self.w_max = if self.cfg.fast_convergence && cwnd < self.w_max { cwnd * (1.0 + self.cfg.beta) / 2.0 } else { cwnd };
        self.w.reduce(now_us, self.cfg.beta);
        self.epoch_start_us = None;
        self.k_s = k_seconds(self.w_max, self.cwnd_pkts(), self.cfg.c);
    }

    /// Retransmission timeout (RFC 9438 §4.8).
    fn on_timeout(&mut self, report: &Report) {
        // As for any reduction (§4.6), remember the window before it: W_est grows at α_cubic until
        // it regains that window, as it would after an ordinary loss.
        self.cwnd_prior = self.cwnd_pkts();
        self.w.timeout(report.now_us, report.inflight_bytes);
        // The first epoch after a timeout uses K = 0 and W_max = its starting window.
        self.w_max = 0.0;
        self.k_s = 0.0;
        self.epoch_start_us = None;
    }

    fn start_epoch(&mut self, now_us: u64) {
        let cwnd = self.cwnd_pkts();
        self.epoch_start_us = Some(now_us);
        self.cwnd_epoch = cwnd;
        if self.w_max <= cwnd {
            self.w_max = cwnd;
        }
        self.k_s = k_seconds(self.w_max, cwnd, self.cfg.c);
        self.w_est = cwnd;
    }

    /// Congestion avoidance over `n` acknowledged segments at `now_us`.
    fn avoid(&mut self, n: f64, now_us: u64) {
        let epoch = *self.epoch_start_us.get_or_insert(now_us);
        let t = now_us.saturating_sub(epoch) as f64 / US_PER_S;
        let ahead_us = match (self.cfg.target_ahead_by_min_rtt, self.w.min_rtt_us()) {
            (true, min) if min > 0 => min,
            _ => self.w.srtt_us(),
        };
        let rtt = ahead_us as f64 / US_PER_S;
        let (c, k, w_max) = (self.cfg.c, self.k_s, self.w_max);
        let cwnd = self.cwnd_pkts();

        let (mut next, windows) = integrate_cubic(cwnd, w_cubic(t + rtt, k, w_max, c), n);
        if self.cfg.reno_friendly {
            let prior = if self.cfg.w_est_alpha_one_after_prior { self.cwnd_prior } else { f64::INFINITY };
            let w_now = w_cubic(t, k, w_max, c);
            self.w_est = if self.w_est >= cwnd && w_now < self.w_est {
                // Already in the Reno-friendly region: W_est is the window and grows by α/W_est per segment.
                grow_w_est_as_window(self.w_est, n, self.alpha, prior)
            } else {
                advance_w_est(self.w_est, windows, self.alpha, prior)
            };
            if w_now < self.w_est {
                // RFC 9438 sets cwnd = W_est here; an ACK never shrinks the window, so take the larger.
                // Linux takes W_est as the target of the per-segment rule instead, and so stays
                // about an RTT's growth behind it.
                let w_est = if self.cfg.w_est_whole_segments { self.w_est.floor() } else { self.w_est };
                let reno = if self.cfg.w_est_at_once { w_est } else { integrate_cubic(cwnd, w_est, n).0 };
                next = next.max(reno);
            }
        }
        self.w.set_cwnd(next * self.w.mss());
    }

    fn grow(&mut self, report: &Report, growth: Option<Growth>) {
        let acked = report.delivered_bytes() as u64;
        let left_bytes = match growth {
            Some(Growth::Conservative) => {
                self.w.set_cwnd(self.w.cwnd_bytes() + acked as f64 / CSS_GROWTH_DIVISOR);
                0.0
            }
            Some(Growth::Exit) => {
                // Slow start ends here without a congestion event: the epoch starts at this
                // window with K = 0 (W_max = cwnd, RFC 9438 §4.10), and this report's data is
                // congestion avoidance's.
                self.w.exit_slow_start();
                acked as f64
            }
            Some(Growth::SlowStart) | None => self.w.slow_start(acked),
        };
        if left_bytes <= 0.0 {
            return;
        }
        if self.epoch_start_us.is_none() {
            self.start_epoch(report.now_us);
        }
        self.avoid(left_bytes / self.w.mss(), report.now_us);
    }
}

/// A cap from outside (ABC keeps its legacy window near what is in flight) is not a congestion
/// event: W_max, K and the epoch are left alone.
impl RenoBased for Cubic {
    fn window(&self) -> &RenoWindow {
        &self.w
    }
    fn window_mut(&mut self) -> &mut RenoWindow {
        &mut self.w
    }

    /// A proportional drop ordered by another loop (Annulus, annulus.md §5.3 rule 2, §12 A11):
    /// cwnd ×= factor, ssthresh ≤ cwnd. Cubic would otherwise climb straight back to the curve it
    /// was on, so the epoch restarts with W_max no higher than the new window (K = 0: convex growth
    /// from here, at Cubic's own pace). W_max is only lowered, never raised.
    fn scale(&mut self, factor: f64) {
        self.w.scale(factor);
        self.w_max = self.w_max.min(self.cwnd_pkts());
        self.epoch_start_us = None;
    }
}

impl Algorithm for Cubic {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.w.start(start);
        self.last_now_us = start.now_us;
        if start.seed.is_some() {
            let cwnd = self.cwnd_pkts();
            self.w_max = cwnd;
            self.cwnd_prior = cwnd;
            self.k_s = 0.0;
        }
        // A seeded window has left slow start behind (ssthresh = cwnd).
        self.hystart = (self.cfg.hystart && self.w.in_slow_start())
            .then(|| HyStart::new(self.w.cwnd_bytes(), self.w.mss(), self.cfg.hystart_css_rounds));
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn on_report(&mut self, report: &Report) -> Action {
        self.w.observe(report);
        let now = report.now_us;
        let elapsed_us = now.saturating_sub(self.last_now_us);
        self.last_now_us = self.last_now_us.max(now);
        let ecn = self.cfg.ecn && (report.ce_bytes > 0 || report.ce_pkts > 0 || report.ece_acks > 0);
        let growth = self.hystart.as_mut().map(|h| h.on_report(report));
        if growth == Some(Growth::Exit) || report.timeouts > 0 || report.lost_pkts > 0 || ecn {
            // Whatever ends the initial slow start ends HyStart++ (RFC 9406 §4.3: later slow
            // starts are standard ones, up to the ssthresh the congestion event set).
            self.hystart = None;
        }

        if report.timeouts > 0 {
            self.on_timeout(report);
        } else if report.lost_pkts > 0 || ecn {
            if self.w.loss_is_new_event(now) {
                self.on_congestion(now);
            }
        } else if !RenoWindow::window_limits(report) {
            // The window does not limit the flow (the application or the receiver does): no
            // growth, and the time does not count toward t (RFC 9438 §5.8; Linux cubictcp_cong_avoid
            // returns unless tcp_is_cwnd_limited).
            if let Some(epoch) = self.epoch_start_us.as_mut() {
                *epoch = epoch.saturating_add(elapsed_us).min(now);
            }
        } else if !self.w.in_recovery(now) {
            self.grow(report, growth);
        }
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.cwnd_bytes() },
            StateVar { name: "ssthresh_bytes", value: self.w.ssthresh_bytes() },
            StateVar { name: "w_max_pkts", value: self.w_max },
            StateVar { name: "k_s", value: self.k_s },
            StateVar { name: "w_est_pkts", value: self.w_est },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_sane, reports};
    use ccp_contract::Seed;
    use proptest::prelude::*;

    const MSS: u32 = 1000;
    const MSS_F: f64 = MSS as f64;
    const RTT_US: u64 = 100_000;

    use crate::test_support::rtt;

    fn ack_rtt(now_us: u64, segments: f64, rtt_us: u64) -> Report {
        Report {
            now_us,
            interval_us: rtt_us,
            mss_bytes: MSS,
            acked_bytes: (segments * MSS_F).round() as u64,
            rtt: rtt(rtt_us),
            ..Report::default()
        }
    }

    fn ack(now_us: u64, segments: f64) -> Report {
        ack_rtt(now_us, segments, RTT_US)
    }

    fn loss(now_us: u64) -> Report {
        Report { lost_pkts: 1, ..ack(now_us, 0.0) }
    }

    fn cubic_with(cfg: CubicConfig) -> Cubic {
        let mut c = Cubic::new(cfg);
        c.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        c
    }

    fn cubic() -> Cubic {
        cubic_with(CubicConfig::default())
    }

    fn var(c: &Cubic, name: &str) -> f64 {
        c.state().iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no state {name}")).value
    }

    /// Slow-starts to `pkts` segments at t = 100 ms, then a loss at 200 ms.
    fn after_loss_at(c: &mut Cubic, pkts: f64) {
        c.on_report(&ack(100_000, pkts - 10.0));
        assert!((c.cwnd_pkts() - pkts).abs() < 1e-9);
        c.on_report(&loss(200_000));
    }

    #[test]
    fn k_and_w_cubic_by_hand() {
        // K = cbrt(W_max·(1 − β)/C): W_max 100 → cbrt(75); 10 → cbrt(7.5); 1000 → cbrt(750).
        for (w_max, k) in [(100.0, 4.217163), (10.0, 1.957434), (1000.0, 9.085603)] {
            let got = k_seconds(w_max, BETA_CUBIC * w_max, C_SEGMENTS_PER_S3);
            assert!((got - k).abs() < 1e-6, "W_max {w_max}: K {got}");
            // The curve starts at β·W_max, regains W_max at K and overshoots symmetrically.
            assert!((w_cubic(0.0, got, w_max, 0.4) - 0.7 * w_max).abs() < 1e-9);
            assert!((w_cubic(got, got, w_max, 0.4) - w_max).abs() < 1e-12);
            assert!((w_cubic(2.0 * got, got, w_max, 0.4) - 1.3 * w_max).abs() < 1e-9);
        }
        // W_max 100: W(1 s) = 0.4·(1 − 4.217163)³ + 100 = 86.680764, W(6 s) = 102.266703.
        assert!((w_cubic(1.0, 4.217163326508746, 100.0, 0.4) - 86.680764).abs() < 1e-5);
        assert!((w_cubic(6.0, 4.217163326508746, 100.0, 0.4) - 102.266703).abs() < 1e-5);
        assert_eq!(k_seconds(50.0, 60.0, 0.4), 0.0);
    }

    #[test]
    fn loss_sets_w_max_and_k_in_state() {
        let mut c = cubic();
        after_loss_at(&mut c, 100.0);
        assert!((var(&c, "cwnd_bytes") - 70_000.0).abs() < 1e-6);
        assert!((var(&c, "ssthresh_bytes") - 70_000.0).abs() < 1e-6);
        assert_eq!(var(&c, "w_max_pkts"), 100.0);
        assert!((var(&c, "k_s") - 4.217163).abs() < 1e-6);
        // The epoch starts at the first congestion-avoidance report after recovery, with the same K.
        c.on_report(&ack(310_000, 1.0));
        assert_eq!(c.epoch_start_us, Some(310_000));
        assert!((var(&c, "k_s") - 4.217163).abs() < 1e-6);
        assert!((var(&c, "w_est_pkts") - 70.0).abs() < 0.02);
    }

    #[test]
    fn curve_is_concave_then_convex_and_plateaus_at_w_max() {
        let (k, w_max) = (k_seconds(100.0, 70.0, 0.4), 100.0);
        let h = 0.05;
        let mut t = h;
        while t < 2.0 * k {
            let (a, b, cc) = (w_cubic(t - h, k, w_max, 0.4), w_cubic(t, k, w_max, 0.4), w_cubic(t + h, k, w_max, 0.4));
            assert!(cc > b && b > a, "not increasing at {t}");
            let second = cc - 2.0 * b + a;
            if t < k - h {
                assert!(second < 0.0, "not concave at {t}");
            } else if t > k + h {
                assert!(second > 0.0, "not convex at {t}");
            }
            t += h;
        }
        // Driven through reports: one RTT of ACKs per report from the loss to past K.
        let mut c = cubic_with(CubicConfig { reno_friendly: false, ..CubicConfig::default() });
        after_loss_at(&mut c, 100.0);
        let start = 300_000;
        let mut trace = vec![];
        let mut now = start;
        while now <= start + 9_000_000 {
            let cwnd = c.cwnd_pkts();
            c.on_report(&ack(now, cwnd));
            trace.push((now, c.cwnd_pkts()));
            now += RTT_US;
        }
        let at = |t_s: f64| trace.iter().find(|(n, _)| *n >= start + (t_s * 1e6) as u64).unwrap().1;
        // Concave approach, plateau near W_max at K, convex probing after.
        assert!(at(1.0) - at(0.0) > at(4.0) - at(3.0));
        assert!((at(4.2) - 100.0).abs() < 1.0, "{}", at(4.2));
        assert!(at(8.0) - at(7.0) > at(5.5) - at(4.5));
        // The window tracks W_cubic(t + RTT) closely (one RTT of ACKs closes most of the gap).
        let w = at(6.0);
        let curve = w_cubic(6.0 + 0.1, k, 100.0, 0.4);
        assert!(w <= curve + 1e-9 && w > curve - 1.0, "{w} vs {curve}");
    }

    #[test]
    fn increase_is_target_minus_cwnd_over_cwnd_per_segment() {
        // One segment: the RFC's per-ACK increment, to first order (the integral lets the
        // increment shrink as the window grows within the segment: a few 1e-3 segment here).
        let mut c = cubic_with(CubicConfig { reno_friendly: false, ..CubicConfig::default() });
        after_loss_at(&mut c, 100.0);
        c.on_report(&ack(300_000, 1.0)); // starts the epoch at 300 ms
        let cwnd = c.cwnd_pkts();
        let target = w_cubic(1.0 + 0.1, c.k_s, 100.0, 0.4).min(1.5 * cwnd);
        c.on_report(&ack(1_300_000, 1.0));
        let expect = cwnd + (target - cwnd) / cwnd;
        assert!((c.cwnd_pkts() - expect).abs() < 5e-3, "{} vs {expect}", c.cwnd_pkts());
        assert!(c.cwnd_pkts() - cwnd > 0.2, "about (target − cwnd)/cwnd ≈ 0.25");
        // The 1.5·cwnd clamp: a far-away target adds half a segment per segment.
        let (w1, _) = integrate_cubic(10.0, 1000.0, 4.0);
        assert!((w1 - 12.0).abs() < 1e-12);
        // Never past the target, however many segments.
        let (w2, _) = integrate_cubic(10.0, 12.0, 1e9);
        assert!(w2 <= 12.0 && w2 > 11.999);
    }

    /// A loss at the initial 10 segments, then 200 RTTs of 1 ms, each acknowledging a window.
    fn after_loss_200_rtts_of_1_ms(cfg: CubicConfig) -> Cubic {
        let mut c = cubic_with(cfg);
        c.on_report(&ack_rtt(1_000, 0.0, 1_000));
        c.on_report(&Report { lost_pkts: 1, ..ack_rtt(2_000, 0.0, 1_000) });
        let mut now = 4_000;
        for _ in 0..200 {
            let cwnd = c.cwnd_pkts();
            c.on_report(&ack_rtt(now, cwnd, 1_000));
            now += 1_000;
        }
        c
    }

    #[test]
    fn reno_friendly_region_dominates_at_small_bdp() {
        // W_max = 10 segments, RTT 1 ms: the cubic curve needs K ≈ 1.96 s to regain 10 segments,
        // while Reno would add a segment every millisecond.
        let run = |reno_friendly: bool| after_loss_200_rtts_of_1_ms(CubicConfig { reno_friendly, ..CubicConfig::default() });
        let c = run(true);
        let t = (c.last_now_us - c.epoch_start_us.unwrap()) as f64 / 1e6;
        let w_now = w_cubic(t, c.k_s, c.w_max, 0.4);
        assert!(w_now < 10.0, "still below W_max on the curve: {w_now}");
        assert!((c.cwnd_pkts() - c.w_est).abs() < 1e-9, "cwnd follows W_est");
        // α_cubic = 0.529 per RTT up to cwnd_prior = 10 (≈ 6 RTTs from 7), then 1 per RTT.
        assert!(c.cwnd_pkts() > 190.0 && c.cwnd_pkts() < 215.0, "{}", c.cwnd_pkts());
        let pure = run(false);
        assert!(pure.cwnd_pkts() < 10.0, "{}", pure.cwnd_pkts());
    }

    #[test]
    fn without_the_rfc_switch_w_est_keeps_alpha_cubic_past_the_prior_window() {
        // As reno_friendly_region_dominates_at_small_bdp: 200 RTTs after a loss at 10 segments.
        // Linux's tcp_cubic never switches α to 1: 0.529 per RTT from 7 all the way.
        let run = |w_est_alpha_one_after_prior: bool| {
            after_loss_200_rtts_of_1_ms(CubicConfig { w_est_alpha_one_after_prior, ..CubicConfig::default() }).cwnd_pkts()
        };
        let (rfc, linux) = (run(true), run(false));
        assert!(rfc > 190.0 && rfc < 215.0, "{rfc}");
        let expected = 7.0 + alpha_cubic(BETA_CUBIC) * 199.0;
        assert!((linux - expected).abs() < 3.0, "{linux} vs {expected}");
    }

    /// Linux's tcp_cubic takes W_est as the target of the per-segment rule (cnt = cwnd/(W_est −
    /// cwnd)) rather than as the window: with one window of data per RTT the gap closes by 1/e per
    /// RTT while W_est grows by α (then 1), so the window trails W_est by about half a segment.
    #[test]
    fn approaching_w_est_as_linux_does_trails_it_by_less_than_a_segment() {
        let run = |w_est_at_once: bool| after_loss_200_rtts_of_1_ms(CubicConfig { w_est_at_once, ..CubicConfig::default() });
        let (rfc, linux) = (run(true), run(false));
        assert!((rfc.cwnd_pkts() - rfc.w_est).abs() < 1e-9, "RFC 9438: the window is W_est");
        let gap = linux.w_est - linux.cwnd_pkts();
        assert!(gap > 0.2 && gap < 1.0, "Linux's window trails W_est by about an RTT's growth: {gap}");
    }

    /// Linux's W_est is an integer: the window it pulls up trails the continuous one by the
    /// fraction, so after the same data it is lower, and never above the whole segments of W_est.
    #[test]
    fn a_w_est_of_whole_segments_raises_the_window_only_to_its_floor() {
        let run = |w_est_whole_segments: bool| {
            after_loss_200_rtts_of_1_ms(CubicConfig { w_est_whole_segments, ..CubicConfig::default() })
        };
        let (continuous, whole) = (run(false), run(true));
        assert!((continuous.cwnd_pkts() - continuous.w_est).abs() < 1e-9, "RFC 9438: the window is W_est");
        assert!(whole.cwnd_pkts() <= whole.w_est.floor() + 1e-9, "{} above ⌊{}⌋", whole.cwnd_pkts(), whole.w_est);
        assert!(whole.cwnd_pkts() < continuous.cwnd_pkts(), "{} vs {}", whole.cwnd_pkts(), continuous.cwnd_pkts());
    }

    /// Linux looks ahead on the curve by the minimum RTT: a standing queue that triples the
    /// smoothed RTT then grows the window exactly as on an empty path, where looking ahead by
    /// the smoothed RTT grows it faster.
    #[test]
    fn looking_ahead_by_the_minimum_rtt_ignores_a_standing_queue() {
        let run = |target_ahead_by_min_rtt: bool, rtt_us: u64| {
            let mut c = cubic_with(CubicConfig { target_ahead_by_min_rtt, ..CubicConfig::default() });
            after_loss_at(&mut c, 100.0); // the flow's minimum RTT is 100 ms
            let mut now = 1_200_000;
            for _ in 0..20 {
                let w = c.cwnd_pkts();
                c.on_report(&Report { interval_us: 300_000, ..ack_rtt(now, w, rtt_us) });
                now += 300_000;
            }
            c.cwnd_pkts()
        };
        let (queued_min, queued_srtt, empty) = (run(true, 300_000), run(false, 300_000), run(false, RTT_US));
        assert!((queued_min - empty).abs() < 1e-9, "by the minimum RTT: {queued_min} vs empty path {empty}");
        assert!(queued_srtt > queued_min + 0.5, "by the smoothed RTT the queue adds growth: {queued_srtt} vs {queued_min}");
    }

    #[test]
    fn w_est_grows_by_alpha_cubic_then_by_one() {
        assert!((alpha_cubic(0.7) - 0.9 / 1.7).abs() < 1e-15);
        // One window of data at 7 segments adds α ≈ 0.529; above cwnd_prior one window adds ≈ 1.
        let w = grow_w_est_as_window(7.0, 7.0, alpha_cubic(0.7), 10.0);
        assert!((w - 7.0 - 0.529).abs() < 0.02, "{w}");
        let w = grow_w_est_as_window(10.0, 10.0, alpha_cubic(0.7), 10.0);
        assert!((w - 11.0).abs() < 0.05, "{w}");
        assert!((advance_w_est(9.0, 3.0, 0.5, 10.0) - 11.0).abs() < 1e-12);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        for (fc, w_max, k) in [(true, 68.0, 30f64.cbrt()), (false, 80.0, 60f64.cbrt())] {
            let mut c = cubic_with(CubicConfig { fast_convergence: fc, ..CubicConfig::default() });
            after_loss_at(&mut c, 100.0);
            // The window has grown back to 80 < W_max = 100 when the next loss comes.
            c.w.set_cwnd(80.0 * MSS_F);
            c.on_report(&loss(1_000_000));
            assert!((c.cwnd_pkts() - 56.0).abs() < 1e-9);
            assert!((var(&c, "w_max_pkts") - w_max).abs() < 1e-9, "fc={fc}");
            // RFC 9438: K from W_max − cwnd_epoch, so fast convergence also shortens K.
            c.on_report(&ack(1_200_000, 1.0));
            assert!((var(&c, "k_s") - k).abs() < 1e-9, "fc={fc}: K {}", var(&c, "k_s"));
        }
        // Regaining W_max before the loss: W_max is simply the window.
        let mut c = cubic();
        after_loss_at(&mut c, 100.0);
        c.w.set_cwnd(120.0 * MSS_F);
        c.on_report(&loss(1_000_000));
        assert_eq!(var(&c, "w_max_pkts"), 120.0);
    }

    #[test]
    fn beta_reduction_once_per_rtt() {
        let mut c = cubic();
        after_loss_at(&mut c, 100.0);
        assert!((c.cwnd_pkts() - 70.0).abs() < 1e-9);
        // Inside the RTT after the reduction: the same congestion event; no growth either.
        c.on_report(&loss(250_000));
        c.on_report(&ack(280_000, 50.0));
        assert!((c.cwnd_pkts() - 70.0).abs() < 1e-9);
        // ECN-Echo is a congestion event too, and is also absorbed.
        c.on_report(&Report { ece_acks: 3, ce_bytes: 3000, ..ack(290_000, 3.0) });
        assert!((c.cwnd_pkts() - 70.0).abs() < 1e-9);
        // One RTT later a new loss is a new event: 70·0.7 = 49; ssthresh follows.
        c.on_report(&loss(300_000));
        assert!((c.cwnd_pkts() - 49.0).abs() < 1e-9);
        assert!((c.w.ssthresh_bytes() - 49_000.0).abs() < 1e-6);
        // Fast convergence: 70 < 100 → W_max = 70·0.85.
        assert!((c.w_max - 59.5).abs() < 1e-9);
    }

    /// A loss of data sent before the reduction is the same congestion event even when it is
    /// detected after the SRTT: the event lasts until the bytes in flight at the reduction are
    /// cumulatively acknowledged (at most 3 SRTTs).
    #[test]
    fn recovery_lasts_until_the_flight_at_the_reduction_is_acknowledged() {
        let with_flight = |now, flight_pkts: f64| Report { inflight_bytes: (flight_pkts * MSS_F) as u64, ..loss(now) };
        let mut c = cubic();
        c.on_report(&ack(100_000, 90.0));
        c.on_report(&with_flight(200_000, 100.0));
        assert!((c.cwnd_pkts() - 70.0).abs() < 1e-9);
        // 60 of the 100 packets acknowledged (a hole holds the rest back): a loss after the SRTT
        // still belongs to the event.
        c.on_report(&ack(250_000, 60.0));
        c.on_report(&with_flight(310_000, 80.0));
        assert!((c.cwnd_pkts() - 70.0).abs() < 1e-9, "{}", c.cwnd_pkts());
        // The flight acknowledged (the window grows again): the next loss is a new event.
        c.on_report(&ack(350_000, 40.0));
        let before = c.cwnd_pkts();
        c.on_report(&with_flight(360_000, 80.0));
        assert!((c.cwnd_pkts() - 0.7 * before).abs() < 1e-9, "{}", c.cwnd_pkts());
        // Nothing acknowledged for 3 SRTTs: losses count again.
        let before = c.cwnd_pkts();
        c.on_report(&with_flight(659_000, 80.0));
        assert!((c.cwnd_pkts() - before).abs() < 1e-9);
        c.on_report(&with_flight(660_000, 80.0));
        assert!((c.cwnd_pkts() - 0.7 * before).abs() < 1e-9, "{}", c.cwnd_pkts());
        // Off: exactly one SRTT.
        let mut c = cubic_with(CubicConfig { recovery_by_data: false, ..CubicConfig::default() });
        c.on_report(&ack(100_000, 90.0));
        c.on_report(&with_flight(200_000, 100.0));
        c.on_report(&with_flight(300_000, 100.0));
        assert!((c.cwnd_pkts() - 49.0).abs() < 1e-9, "{}", c.cwnd_pkts());
    }

    #[test]
    fn ssthresh_and_window_floor_at_two_segments() {
        let mut c = cubic();
        for i in 0..30 {
            c.on_report(&loss(1_000_000 * (i + 1)));
            assert!(c.w.cwnd_bytes() >= 2.0 * MSS_F && c.w.ssthresh_bytes() >= 2.0 * MSS_F);
        }
        assert_eq!(c.w.cwnd_bytes(), 2.0 * MSS_F);
    }

    #[test]
    fn ecn_echo_reduces_unless_disabled() {
        let marked = |now| Report { ece_acks: 1, ce_bytes: 1000, ce_pkts: 1, ..ack(now, 5.0) };
        let mut c = cubic();
        c.on_report(&ack(100_000, 90.0));
        c.on_report(&marked(200_000));
        assert!((c.cwnd_pkts() - 70.0).abs() < 1e-9);
        let mut c = cubic_with(CubicConfig { ecn: false, ..CubicConfig::default() });
        c.on_report(&ack(100_000, 90.0));
        c.on_report(&marked(200_000));
        assert!((c.cwnd_pkts() - 105.0).abs() < 1e-9, "slow start continues: {}", c.cwnd_pkts());
    }

    #[test]
    fn timeout_collapses_and_resets_the_epoch() {
        let mut c = cubic();
        after_loss_at(&mut c, 100.0);
        c.on_report(&ack(400_000, 70.0)); // epoch running
        assert!(c.epoch_start_us.is_some());
        let cwnd = c.cwnd_pkts();
        c.on_report(&Report { timeouts: 1, inflight_bytes: 50_000, ..ack(500_000, 0.0) });
        assert_eq!(c.w.cwnd_bytes(), 2.0 * MSS_F);
        assert!((c.w.ssthresh_bytes() - 0.7 * cwnd * MSS_F).abs() < 1e-6, "ssthresh from beta");
        assert_eq!(c.epoch_start_us, None);
        assert_eq!(var(&c, "w_max_pkts"), 0.0);
        // Slow start back to ssthresh (the recovery RTT passes first), then the first epoch after
        // the timeout: K = 0 and W_max = the window it starts from.
        let ssthresh = c.w.ssthresh_bytes() / MSS_F;
        let mut now = 700_000;
        while c.w.in_slow_start() {
            let cwnd = c.cwnd_pkts();
            c.on_report(&ack(now, cwnd));
            now += RTT_US;
        }
        assert!(c.epoch_start_us.is_some());
        assert!((var(&c, "w_max_pkts") - c.cwnd_epoch).abs() < 1e-9);
        assert!(c.cwnd_epoch >= ssthresh - 1e-9);
        assert_eq!(var(&c, "k_s"), 0.0);
        assert!((c.w_est - c.cwnd_epoch).abs() < 1.0);
    }

    #[test]
    fn slow_start_like_reno_and_excess_credited_to_avoidance() {
        let mut c = cubic();
        assert_eq!(c.on_report(&ack(100_000, 10.0)).cwnd_bytes, Some(20_000.0));
        assert_eq!(c.on_report(&ack(200_000, 20.0)).cwnd_bytes, Some(40_000.0));
        c.w.set_ssthresh(50_000.0);
        c.on_report(&ack(300_000, 20.0));
        // 10 segments reach ssthresh; the other 10 start the epoch at 300 ms and grow the window.
        assert_eq!(c.epoch_start_us, Some(300_000));
        assert!(c.cwnd_pkts() > 50.0 && c.cwnd_pkts() < 51.0, "{}", c.cwnd_pkts());
    }

    /// Drives a copy of `c` through `segments` acknowledged segments in one report, or in `pieces`
    /// reports of equal shares spaced `spread_us` apart (the last at `now`).
    fn split_run(c: &Cubic, now: u64, segments: f64, pieces: u32, spread_us: u64, rtt_us: u64) -> f64 {
        let mut c = c.clone();
        for i in 0..pieces {
            let t = now - spread_us * u64::from(pieces - 1 - i);
            c.on_report(&ack_rtt(t, segments / f64::from(pieces), rtt_us));
        }
        c.cwnd_pkts()
    }

    fn assert_split_independent(c: &Cubic, now: u64, rtt_us: u64, spread_us: u64) -> f64 {
        // A whole number of segments, so that ten equal shares are whole bytes.
        let seg = c.cwnd_pkts().floor();
        let one = split_run(c, now, seg, 1, 0, rtt_us);
        let ten = split_run(c, now, seg, 10, 0, rtt_us);
        assert!((one - ten).abs() / one < 1e-9, "same time: {one} vs {ten}");
        // Ten reports spread over the same round trip: nearly the same.
        let spread = split_run(c, now, seg, 10, spread_us, rtt_us);
        assert!((one - spread).abs() / one < 2e-3, "spread: {one} vs {spread}");
        assert!(one > seg, "the window grew");
        one
    }

    #[test]
    fn aggregation_independent_in_the_cubic_region() {
        // A large window on a 100 ms path: the curve (concave region) dominates W_est.
        for at_us in [300_000, 2_000_000, 12_000_000] {
            let mut c = cubic();
            after_loss_at(&mut c, 1000.0);
            c.on_report(&ack(300_000, 1.0)); // the epoch starts at 300 ms
            let w = assert_split_independent(&c, 300_000 + at_us, RTT_US, 1_000);
            assert!(w > c.w_est + 10.0, "cubic region expected");
        }
    }

    #[test]
    fn aggregation_independent_in_the_reno_friendly_region() {
        // A small window on a 1 ms path: W_est is the window.
        let mut c = cubic();
        c.on_report(&ack_rtt(1_000, 2.0, 1_000));
        c.on_report(&Report { lost_pkts: 1, ..ack_rtt(2_000, 0.0, 1_000) });
        let mut now = 4_000;
        for _ in 0..20 {
            let cwnd = c.cwnd_pkts();
            c.on_report(&ack_rtt(now, cwnd, 1_000));
            now += 1_000;
        }
        assert!((c.cwnd_pkts() - c.w_est).abs() < 1e-9, "Reno-friendly region expected");
        assert_split_independent(&c, now, 1_000, 50);
    }

    #[test]
    fn seeded_flow_starts_on_the_plateau() {
        let mut c = Cubic::new(CubicConfig::default());
        let start = FlowStart {
            now_us: 5,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: None,
            seed: Some(Seed { cwnd_bytes: 50_000, srtt_us: Some(RTT_US), ..Seed::default() }),
        };
        assert_eq!(c.init(&start).cwnd_bytes, Some(50_000.0));
        assert_eq!(var(&c, "w_max_pkts"), 50.0);
        assert_eq!(var(&c, "k_s"), 0.0);
        // Congestion avoidance, not slow start: one window of ACKs adds about one segment (the
        // Reno-friendly rate; the cubic curve is flat at its inflection point).
        c.on_report(&ack(100_000, 50.0));
        assert!((c.cwnd_pkts() - 51.0).abs() < 0.05, "{}", c.cwnd_pkts());
        assert_eq!(var(&c, "w_max_pkts"), 50.0);
        // Seconds later the convex region takes over: W(t) = 0.4·t³ + 50.
        let mut now = 200_000;
        while now < 6_000_000 {
            let cwnd = c.cwnd_pkts();
            c.on_report(&ack(now, cwnd));
            now += RTT_US;
        }
        let curve = w_cubic(5.9 + 0.1, 0.0, 50.0, 0.4);
        assert!(c.cwnd_pkts() > 120.0 && c.cwnd_pkts() <= curve, "{} vs {curve}", c.cwnd_pkts());
    }

    #[test]
    fn app_limited_time_does_not_count() {
        let base = || {
            let mut c = cubic();
            after_loss_at(&mut c, 100.0);
            c.on_report(&ack(300_000, 1.0));
            c
        };
        let mut idle = base();
        let mut now = 400_000;
        while now < 10_400_000 {
            let a = Report { app_limited: true, ..ack(now, 5.0) };
            assert_eq!(idle.on_report(&a).cwnd_bytes, Some(idle.w.cwnd_bytes()));
            now += RTT_US;
        }
        let before = idle.cwnd_pkts();
        idle.on_report(&ack(now, 70.0));
        let mut busy = base();
        busy.on_report(&ack(400_000, 70.0));
        assert!((idle.cwnd_pkts() - busy.cwnd_pkts()).abs() < 0.1, "{} vs {}", idle.cwnd_pkts(), busy.cwnd_pkts());
        assert!(idle.cwnd_pkts() < 1.5 * before);
    }

    #[test]
    fn state_exposes_cwnd_w_max_k_ssthresh() {
        let names: Vec<_> = cubic().state().iter().map(|v| v.name).collect();
        for n in ["cwnd_bytes", "w_max_pkts", "k_s", "ssthresh_bytes", "w_est_pkts"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
    }

    #[test]
    fn params_parse_and_validate() {
        let f = INFO.configure(&"c = 0.8\nbeta = 0.5\nfast_convergence = false".parse().unwrap()).unwrap();
        assert_eq!(f.name(), "cubic");
        assert!(INFO.configure(&"beta = 1.0".parse().unwrap()).is_err());
        assert!(INFO.configure(&"c = 0".parse().unwrap()).is_err());
    }

    proptest! {
        #[test]
        fn never_nan_or_below_two_packets(
            seq in reports(60),
            fc in any::<bool>(),
            rf in any::<bool>(),
            ecn in any::<bool>(),
            beta in 0.05f64..0.95,
            seeded in any::<bool>(),
        ) {
            let cfg = CubicConfig { fast_convergence: fc, reno_friendly: rf, ecn, beta, ..CubicConfig::default() };
            let mut c = Cubic::new(cfg);
            let mut start = FlowStart::new(MSS, 10 * u64::from(MSS));
            if seeded {
                start.seed = Some(Seed { cwnd_bytes: 123_456, srtt_us: Some(RTT_US), ..Seed::default() });
            }
            let a = c.init(&start);
            check_sane(a.cwnd_bytes, MSS, &c.state())?;
            let mut mss = MSS;
            for r in &seq {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                let a = c.on_report(r);
                check_sane(a.cwnd_bytes, mss, &c.state())?;
            }
        }
    }
}
