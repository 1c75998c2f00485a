//! A small deterministic fluid model of one FIFO bottleneck, for NimbusCC's in-process integration
//! tests (spec §15.3). Not the project's packet simulator: just enough physics for elasticity.
//!
//! Model, in 1 ms steps:
//! - One drop-tail FIFO queue of `buffer_bytes`, served at μ bytes/s. Sources enqueue byte chunks
//!   stamped with their send time; each step the link serves μ·1 ms bytes from the head, splitting
//!   chunks, so each source's share of departures follows its share of the queue (FIFO).
//! - The queue sits at the senders' side of the path: a chunk enqueued at t departs at t_dep and
//!   its acknowledgement reaches its sender at t_dep + the source's propagation RTT. A sample RTT is
//!   t_ack − t_sent. Bytes dropped at enqueue are detected by their sender one propagation RTT later.
//! - NimbusCC's flow is paced at the action's rate (token bucket with at most 2 packets of burst)
//!   and capped by its cwnd. Every ~10 ms (jittered ±1 ms, so reports are not on the 10 ms grid) it
//!   gets a `Report`: acknowledged bytes, losses, RTT statistics, and S and R per Eq. 2 over the
//!   same packets — the bytes acknowledged during the last smoothed RTT, S = bytes/(s_last − s_first),
//!   R = bytes/(r_last − r_first).
//! - Cross traffic is a constant-bit-rate source (inelastic), an ACK-clocked Reno-like AIMD window
//!   flow (elastic: it sends as its ACKs return, grows its window by one packet per window
//!   acknowledged, halves it at most once per RTT on loss), or both.

use std::collections::VecDeque;

use ccp_contract::{Algorithm, FlowStart, Pacing, Report, RttStats};

use super::mode::Mode;
use super::NimbusCC;

/// Simulation step, µs.
const STEP_US: u64 = 1_000;
const STEP_S: f64 = STEP_US as f64 / 1e6;
/// Packet size of every source, bytes.
pub const MSS: f64 = 1500.0;

#[derive(Debug, Clone, Copy)]
pub enum Cross {
    /// Constant bit rate, bytes/s.
    Cbr { rate: f64 },
    /// A Reno-like AIMD window flow with this propagation RTT.
    Aimd { rtt_us: u64 },
    /// Both.
    Mixed { rate: f64, rtt_us: u64 },
}

#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Link rate, bytes/s.
    pub mu: f64,
    pub buffer_bytes: f64,
    /// NimbusCC's propagation RTT, µs.
    pub rtt_us: u64,
    pub cross: Cross,
    pub duration_us: u64,
}

impl Setup {
    /// The paper's setting (spec §8.4): 96 Mbit/s, 50 ms, 100 ms (2 BDP) of buffer.
    pub fn paper(cross: Cross, duration_s: u64) -> Self {
        Setup { mu: 12e6, buffer_bytes: 1.2e6, rtt_us: 50_000, cross, duration_us: duration_s * 1_000_000 }
    }
}

/// One report's view of the run.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub t_s: f64,
    pub mode: Mode,
    /// η of the last detection (before guards) and the smoothed E.
    pub eta: f64,
    pub e: f64,
    pub queue_delay_s: f64,
    /// Bytes delivered per source since the previous point.
    pub nimbus_bytes: f64,
    pub cross_bytes: f64,
}

#[derive(Debug, Clone, Copy)]
struct Chunk {
    src: usize,
    bytes: f64,
    sent_us: u64,
}

#[derive(Debug, Clone, Copy)]
struct Ack {
    at_us: u64,
    bytes: f64,
    sent_us: u64,
}

const NIMBUS: usize = 0;
const WINDOW: usize = 1;
const CBR: usize = 2;

/// ACKs and loss notices in flight back to one sender (both in time order: constant RTT, FIFO link).
#[derive(Debug, Default)]
struct Feedback {
    acks: VecDeque<Ack>,
    losses: VecDeque<(u64, f64)>,
}

/// The Reno-like elastic cross flow.
#[derive(Debug)]
struct Aimd {
    prop_us: u64,
    cwnd: f64,
    ssthresh: f64,
    inflight: f64,
    recovery_until_us: u64,
    last_rtt_us: u64,
    fb: Feedback,
}

impl Aimd {
    fn new(prop_us: u64) -> Self {
        Aimd {
            prop_us,
            cwnd: 10.0 * MSS,
            ssthresh: f64::INFINITY,
            inflight: 0.0,
            recovery_until_us: 0,
            last_rtt_us: prop_us,
            fb: Feedback::default(),
        }
    }

    fn step(&mut self, now: u64) -> f64 {
        while self.fb.acks.front().is_some_and(|a| a.at_us <= now) {
            let a = self.fb.acks.pop_front().unwrap();
            self.inflight = (self.inflight - a.bytes).max(0.0);
            self.last_rtt_us = now - a.sent_us;
            if now >= self.recovery_until_us {
                if self.cwnd < self.ssthresh {
                    self.cwnd += a.bytes;
                } else {
                    self.cwnd += MSS * a.bytes / self.cwnd;
                }
            }
        }
        while self.fb.losses.front().is_some_and(|l| l.0 <= now) {
            let (_, bytes) = self.fb.losses.pop_front().unwrap();
            self.inflight = (self.inflight - bytes).max(0.0);
            if now >= self.recovery_until_us {
                self.cwnd = (self.cwnd / 2.0).max(2.0 * MSS);
                self.ssthresh = self.cwnd;
                self.recovery_until_us = now + self.last_rtt_us;
            }
        }
        let send = (self.cwnd - self.inflight).max(0.0);
        self.inflight += send;
        send
    }
}

/// NimbusCC's side: a paced, window-capped sender and the report fold.
struct Sender {
    prop_us: u64,
    cwnd: f64,
    pacing: Option<f64>,
    credit: f64,
    inflight: f64,
    fb: Feedback,
    // The report fold.
    acked: f64,
    lost: f64,
    rtt_min: u64,
    rtt_max: u64,
    rtt_last: u64,
    rtt_sum: u64,
    rtt_n: u32,
    srtt_us: f64,
    /// (sent, acked, bytes) of recently acknowledged data, for the rate sample.
    delivered: VecDeque<(u64, u64, f64)>,
}

impl Sender {
    fn new(prop_us: u64) -> Self {
        Sender {
            prop_us,
            cwnd: 10.0 * MSS,
            pacing: None,
            credit: 0.0,
            inflight: 0.0,
            fb: Feedback::default(),
            acked: 0.0,
            lost: 0.0,
            rtt_min: u64::MAX,
            rtt_max: 0,
            rtt_last: 0,
            rtt_sum: 0,
            rtt_n: 0,
            srtt_us: 0.0,
            delivered: VecDeque::new(),
        }
    }

    fn receive(&mut self, now: u64) {
        while self.fb.acks.front().is_some_and(|a| a.at_us <= now) {
            let a = self.fb.acks.pop_front().unwrap();
            self.inflight = (self.inflight - a.bytes).max(0.0);
            self.acked += a.bytes;
            let rtt = now - a.sent_us;
            self.rtt_min = self.rtt_min.min(rtt);
            self.rtt_max = self.rtt_max.max(rtt);
            self.rtt_last = rtt;
            self.rtt_sum += rtt;
            self.rtt_n += 1;
            self.srtt_us = if self.srtt_us == 0.0 { rtt as f64 } else { self.srtt_us + (rtt as f64 - self.srtt_us) / 8.0 };
            self.delivered.push_back((a.sent_us, now, a.bytes));
        }
        while self.fb.losses.front().is_some_and(|l| l.0 <= now) {
            let (_, bytes) = self.fb.losses.pop_front().unwrap();
            self.inflight = (self.inflight - bytes).max(0.0);
            self.lost += bytes;
        }
    }

    fn send(&mut self) -> f64 {
        let room = (self.cwnd - self.inflight).max(0.0);
        let send = match self.pacing {
            Some(rate) => {
                self.credit = (self.credit + rate * STEP_S).min(rate * STEP_S + 2.0 * MSS);
                let s = self.credit.min(room);
                self.credit -= s;
                s
            }
            None => room,
        };
        self.inflight += send;
        send
    }

    /// Eq. 2 over the data acknowledged during the last smoothed RTT.
    fn rate_sample(&mut self, now: u64) -> (Option<u64>, Option<u64>) {
        let window = (self.srtt_us as u64).max(10_000);
        while self.delivered.front().is_some_and(|d| now - d.1 > window) {
            self.delivered.pop_front();
        }
        let (Some(first), Some(last)) = (self.delivered.front(), self.delivered.back()) else {
            return (None, None);
        };
        let bytes: f64 = self.delivered.iter().skip(1).map(|d| d.2).sum();
        let (ds, dr) = (last.0.saturating_sub(first.0), last.1.saturating_sub(first.1));
        if ds == 0 || dr == 0 || bytes <= 0.0 {
            return (None, None);
        }
        (Some((bytes / (ds as f64 / 1e6)) as u64), Some((bytes / (dr as f64 / 1e6)) as u64))
    }

    fn report(&mut self, now: u64, interval_us: u64) -> Report {
        let (s, r) = self.rate_sample(now);
        let rtt = (self.rtt_n > 0).then(|| RttStats {
            min_us: self.rtt_min,
            max_us: self.rtt_max,
            last_us: self.rtt_last,
            srtt_us: self.srtt_us as u64,
            mean_us: self.rtt_sum / u64::from(self.rtt_n),
            samples: self.rtt_n,
        });
        let report = Report {
            now_us: now,
            interval_us,
            mss_bytes: MSS as u32,
            acked_bytes: self.acked as u64,
            acked_pkts: (self.acked / MSS) as u64,
            lost_pkts: (self.lost / MSS).ceil() as u64,
            rtt,
            send_rate_bytes_per_s: s,
            recv_rate_bytes_per_s: r,
            inflight_bytes: self.inflight as u64,
            pending_bytes: u64::MAX / 4,
            cwnd_bytes: self.cwnd as u64,
            pacing_rate_bytes_per_s: self.pacing.map(|p| p as u64),
            ..Report::default()
        };
        self.acked = 0.0;
        self.lost = 0.0;
        self.rtt_min = u64::MAX;
        self.rtt_max = 0;
        self.rtt_sum = 0;
        self.rtt_n = 0;
        report
    }
}

/// Runs `alg` against `setup`; returns one point per report.
pub fn run(setup: &Setup, alg: &mut NimbusCC) -> Vec<Point> {
    record(setup, alg).0
}

/// `run`, also returning every report `alg` received, in order (to replay into other
/// configurations of NimbusCC, open loop).
pub fn record(setup: &Setup, alg: &mut NimbusCC) -> (Vec<Point>, Vec<Report>) {
    let mut queue: VecDeque<Chunk> = VecDeque::new();
    let mut queued = 0.0f64;
    let mut me = Sender::new(setup.rtt_us);
    let mut window = match setup.cross {
        Cross::Aimd { rtt_us } | Cross::Mixed { rtt_us, .. } => Some(Aimd::new(rtt_us)),
        Cross::Cbr { .. } => None,
    };
    let cbr = match setup.cross {
        Cross::Cbr { rate } | Cross::Mixed { rate, .. } => rate,
        Cross::Aimd { .. } => 0.0,
    };
    let a = alg.init(&FlowStart::new(MSS as u32, (10.0 * MSS) as u64));
    me.cwnd = a.cwnd_bytes.unwrap_or(me.cwnd);
    let mut points = Vec::with_capacity((setup.duration_us / 10_000) as usize + 1);
    let mut reports = Vec::with_capacity(points.capacity());
    let (mut next_report, mut last_report, mut k) = (10_000u64, 0u64, 0u64);
    let (mut nimbus_bytes, mut cross_bytes) = (0.0, 0.0);
    let mut now = 0u64;
    while now < setup.duration_us {
        now += STEP_US;
        // Feedback reaches the senders, then they send.
        me.receive(now);
        let mut arrivals = [(NIMBUS, me.send()), (WINDOW, 0.0), (CBR, cbr * STEP_S)];
        if let Some(w) = window.as_mut() {
            arrivals[1].1 = w.step(now);
        }
        // Drop-tail, fluid: when the step's arrivals overflow the buffer every source loses the
        // same fraction (the same drop rate for all, as Eq. 1's footnote assumes).
        let offered: f64 = arrivals.iter().map(|a| a.1).sum();
        let admit = if offered > 0.0 { ((setup.buffer_bytes - queued).max(0.0) / offered).min(1.0) } else { 1.0 };
        for (src, bytes) in arrivals {
            if bytes <= 0.0 {
                continue;
            }
            let accepted = bytes * admit;
            let dropped = bytes - accepted;
            if accepted > 0.0 {
                queue.push_back(Chunk { src, bytes: accepted, sent_us: now });
                queued += accepted;
            }
            if dropped > 0.0 {
                match src {
                    NIMBUS => me.fb.losses.push_back((now + me.prop_us, dropped)),
                    WINDOW => {
                        let w = window.as_mut().unwrap();
                        w.fb.losses.push_back((now + w.prop_us, dropped));
                    }
                    _ => {}
                }
            }
        }
        // The link serves μ·step bytes, FIFO.
        let mut budget = setup.mu * STEP_S;
        while budget > 0.0 {
            let Some(head) = queue.front_mut() else { break };
            let take = head.bytes.min(budget);
            head.bytes -= take;
            budget -= take;
            queued -= take;
            let (src, sent_us) = (head.src, head.sent_us);
            if head.bytes <= 1e-9 {
                queue.pop_front();
            }
            match src {
                NIMBUS => {
                    me.fb.acks.push_back(Ack { at_us: now + me.prop_us, bytes: take, sent_us });
                    nimbus_bytes += take;
                }
                WINDOW => {
                    let w = window.as_mut().unwrap();
                    w.fb.acks.push_back(Ack { at_us: now + w.prop_us, bytes: take, sent_us });
                    cross_bytes += take;
                }
                _ => cross_bytes += take,
            }
        }
        queued = queued.max(0.0);
        if now >= next_report {
            let report = me.report(now, now - last_report);
            let action = alg.on_report(&report);
            reports.push(report);
            if let Some(c) = action.cwnd_bytes {
                me.cwnd = c;
            }
            match action.pacing {
                Some(Pacing::BytesPerSec(r)) => me.pacing = Some(r),
                Some(Pacing::Off) => me.pacing = None,
                None => {}
            }
            points.push(Point {
                t_s: now as f64 / 1e6,
                mode: alg.mode(),
                eta: alg.last_measurement().eta,
                e: alg.elasticity(),
                queue_delay_s: queued / setup.mu,
                nimbus_bytes,
                cross_bytes,
            });
            nimbus_bytes = 0.0;
            cross_bytes = 0.0;
            last_report = now;
            k += 1;
            // Reports every 9, 10 or 11 ms: not on the detector's grid.
            next_report = now + 10_000 + [0, 1_000, 0, 0, 2_000, 0][(k % 6) as usize] - 1_000;
        }
    }
    (points, reports)
}

/// Summary statistics over the points with t ≥ `from_s`.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub competitive_fraction: f64,
    pub eta_median: f64,
    pub eta_p10: f64,
    pub eta_p90: f64,
    pub e_mean: f64,
    pub queue_delay_ms: f64,
    pub nimbus_share: f64,
}

pub fn summarize(points: &[Point], from_s: f64) -> Summary {
    let sel: Vec<&Point> = points.iter().filter(|p| p.t_s >= from_s).collect();
    let n = sel.len().max(1) as f64;
    let mut etas: Vec<f64> = sel.iter().map(|p| p.eta).collect();
    etas.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |f: f64| etas.get(((etas.len() as f64 - 1.0) * f).round() as usize).copied().unwrap_or(0.0);
    let (nb, cb) = sel.iter().fold((0.0, 0.0), |(a, b), p| (a + p.nimbus_bytes, b + p.cross_bytes));
    Summary {
        competitive_fraction: sel.iter().filter(|p| p.mode == Mode::Competitive).count() as f64 / n,
        eta_median: q(0.5),
        eta_p10: q(0.1),
        eta_p90: q(0.9),
        e_mean: sel.iter().map(|p| p.e).sum::<f64>() / n,
        queue_delay_ms: 1e3 * sel.iter().map(|p| p.queue_delay_s).sum::<f64>() / n,
        nimbus_share: nb / (nb + cb).max(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CompetitiveAlg, DelayAlg, NimbusConfig};
    use super::*;
    use crate::nimbus::cross_traffic::LinkRate;

    /// 48 Mbit/s: half the link, the inelastic cross traffic.
    const CBR_HALF: Cross = Cross::Cbr { rate: 6e6 };
    const RENO_50MS: Cross = Cross::Aimd { rtt_us: 50_000 };

    fn config(mu_hat: f64) -> NimbusConfig {
        // The fluid link counts the same bytes as the reports: no header scaling of μ̂.
        NimbusConfig { link_rate: LinkRate::Fixed(mu_hat), header_bytes: 0.0, ..NimbusConfig::default() }
    }

    /// Runs NimbusCC with `cfg` against `cross` for `secs`; summary from 20 s on (after the 15 s
    /// switch timer and one smoothing time constant).
    fn run_with(cfg: NimbusConfig, cross: Cross, secs: u64) -> (Summary, Vec<Point>) {
        let mut alg = NimbusCC::new(cfg);
        let points = run(&Setup::paper(cross, secs), &mut alg);
        let s = summarize(&points, 20.0);
        println!(
            "{cross:?} mu_hat {:?} {:?}/{:?}: competitive {:.3}, eta p10/p50/p90 {:.2}/{:.2}/{:.2}, mean E {:.2}, queue {:.1} ms, share {:.2}",
            cfg.link_rate, cfg.competitive, cfg.delay, s.competitive_fraction, s.eta_p10, s.eta_median, s.eta_p90, s.e_mean, s.queue_delay_ms, s.nimbus_share
        );
        (s, points)
    }

    /// The timers (§15.2 test 23, end to end): no evaluation before 10 s, no switch before 15 s.
    fn check_timers(points: &[Point]) {
        for p in points.iter().filter(|p| p.t_s < 10.0) {
            assert_eq!((p.e, p.eta), (1.0, 0.0), "t {}: evaluated before 10 s", p.t_s);
        }
        for p in points.iter().filter(|p| p.t_s < 15.0) {
            assert_eq!(p.mode, Mode::Competitive, "t {}: switched before 15 s", p.t_s);
        }
    }

    /// Inelastic cross traffic (CBR at half the link): η ≈ 1, delay mode, queue near d_t.
    #[test]
    fn inelastic_cbr_is_classified_inelastic_and_delay_mode_chosen() {
        let (s, points) = run_with(config(12e6), CBR_HALF, 60);
        check_timers(&points);
        assert!(s.competitive_fraction <= 0.1, "delay mode ≥ 90 % of the time after 20 s: {s:?}");
        assert!((0.7..=1.5).contains(&s.eta_median), "median η of inelastic traffic ≈ 1 (spec T2): {s:?}");
        assert!(s.e_mean < 2.0, "{s:?}");
        // BasicDelay holds the queue near d_t = 12.5 ms (paper Table 1: 12 ms; spec T3: ≤ 20 ms).
        assert!(s.queue_delay_ms > 5.0 && s.queue_delay_ms < 20.0, "{s:?}");
        assert!((s.nimbus_share - 0.5).abs() < 0.05, "the spare half of the link: {s:?}");
    }

    /// Elastic cross traffic (an ACK-clocked AIMD window flow, same RTT): η ≫ 2, competitive.
    #[test]
    fn elastic_window_flow_is_classified_elastic_and_competitive_mode_kept() {
        let (s, points) = run_with(config(12e6), RENO_50MS, 60);
        check_timers(&points);
        let after_15 = points.iter().filter(|p| p.t_s >= 15.0);
        let n = after_15.clone().count() as f64;
        let comp = after_15.filter(|p| p.mode == Mode::Competitive).count() as f64 / n;
        assert!(comp >= 0.95, "competitive ≥ 95 % of the time after 15 s: {comp}");
        assert!(s.eta_median >= 5.0, "median η of elastic traffic (spec T2: ≥ 5): {s:?}");
        assert!(s.e_mean > 2.25, "{s:?}");
    }

    /// The same elastic flow at other RTTs (spec §15.3 (d), T12) is still elastic.
    #[test]
    fn elastic_window_flow_at_other_rtts() {
        for (rtt_us, min_competitive) in [(10_000, 0.95), (100_000, 0.85)] {
            let (s, _) = run_with(config(12e6), Cross::Aimd { rtt_us }, 60);
            assert!(s.competitive_fraction >= min_competitive, "cross RTT {rtt_us} µs: {s:?}");
            assert!(s.eta_median > 2.0, "cross RTT {rtt_us} µs: {s:?}");
        }
    }

    /// Mixed cross traffic (CBR plus an elastic flow) counts as elastic (spec §15.3 (c)).
    #[test]
    fn mixed_cross_traffic_is_elastic() {
        let (s, _) = run_with(config(12e6), Cross::Mixed { rate: 3e6, rtt_us: 50_000 }, 60);
        assert!(s.competitive_fraction >= 0.85, "{s:?}");
        assert!(s.eta_median > 2.0, "{s:?}");
    }

    /// A 25 % error in μ̂ leaks our own pulse into ẑ: inelastic traffic is then called elastic — the
    /// safe direction (paper Fig. 13, spec T18).
    #[test]
    fn mu_error_fails_safe() {
        for mu_hat in [15e6, 9e6] {
            let (s, _) = run_with(config(mu_hat), CBR_HALF, 45);
            assert!(s.competitive_fraction >= 0.9, "μ̂ = {mu_hat}: {s:?}");
            assert!((s.nimbus_share - 0.5).abs() < 0.1, "no throughput lost: {s:?}");
        }
    }

    /// The other controllers: Reno in competitive mode, Vegas and Copa in delay mode.
    #[test]
    fn other_controllers_keep_the_classification() {
        let variants = [
            (CompetitiveAlg::Reno, DelayAlg::BasicDelay, 20.0),
            // Vegas drains the competitive-mode queue by one packet per RTT: slowly.
            (CompetitiveAlg::Cubic, DelayAlg::Vegas, 50.0),
            (CompetitiveAlg::Cubic, DelayAlg::Copa, 25.0),
        ];
        for (competitive, delay, max_queue_ms) in variants {
            let cfg = NimbusConfig { competitive, delay, ..config(12e6) };
            let (s, _) = run_with(cfg, CBR_HALF, 45);
            assert!(s.competitive_fraction <= 0.1, "{competitive:?}/{delay:?} vs CBR: {s:?}");
            assert!(s.queue_delay_ms < max_queue_ms, "{competitive:?}/{delay:?} vs CBR: {s:?}");
            if delay == DelayAlg::BasicDelay {
                let (s, _) = run_with(cfg, RENO_50MS, 45);
                assert!(s.competitive_fraction >= 0.95, "{competitive:?} vs Reno: {s:?}");
            }
        }
    }
}
