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
//! - Cross traffic (`Cross`) is inelastic, elastic or both. Inelastic (open loop, `OpenLoop`):
//!   constant bit rate; Poisson (MSS-sized packets with exponential gaps: UDP-like traffic); or
//!   on/off CBR with exponential on and off periods. All randomness comes from a seeded SplitMix64,
//!   so every run is deterministic. Elastic: an ACK-clocked Reno-like AIMD window flow (it sends as
//!   its ACKs return, grows its window by one packet per window acknowledged, halves it at most
//!   once per RTT on loss). Mixed: CBR or Poisson plus the AIMD flow. `Cross::is_elastic` is the
//!   ground truth for `accuracy` (the fraction of reports in the right mode).
//! - `run_multi`: several NimbusCC flows, each with its own RTT, start and stop time, on the same
//!   queue (the paper's multi-flow setups, spec S17/S19; tests `s19_*`, `s17_*`).

use std::collections::VecDeque;

use ccp_contract::{Algorithm, FlowStart, Pacing, Report, RttStats};

use super::election::{Role, SplitMix64};
use super::mode::Mode;
use super::NimbusCC;

/// Simulation step, µs.
const STEP_US: u64 = 1_000;
const STEP_S: f64 = STEP_US as f64 / 1e6;
/// Packet size of every source, bytes.
pub const MSS: f64 = 1500.0;

/// Drop-tail, fluid: when a step's arrivals overflow the buffer every source loses the same
/// fraction (the same drop rate for all, as Eq. 1's footnote assumes). Queues what is admitted,
/// hands each source's dropped bytes to `on_drop`, and returns the new queued bytes.
fn enqueue_drop_tail(
    queue: &mut VecDeque<Chunk>,
    mut queued: f64,
    buffer_bytes: f64,
    arrivals: impl IntoIterator<Item = (usize, f64)> + Clone,
    now: u64,
    mut on_drop: impl FnMut(usize, f64),
) -> f64 {
    let offered: f64 = arrivals.clone().into_iter().map(|a| a.1).sum();
    let admit = if offered > 0.0 { ((buffer_bytes - queued).max(0.0) / offered).min(1.0) } else { 1.0 };
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
            on_drop(src, dropped);
        }
    }
    queued
}

#[derive(Debug, Clone, Copy)]
pub enum Cross {
    /// Constant bit rate, bytes/s.
    Cbr { rate: f64 },
    /// A Reno-like AIMD window flow with this propagation RTT.
    Aimd { rtt_us: u64 },
    /// Both.
    Mixed { rate: f64, rtt_us: u64 },
    /// UDP-like Poisson traffic: MSS-sized packets whose arrivals at the queue form a Poisson
    /// process of mean `rate` bytes/s (exponential gaps from a SplitMix64 seeded with `seed`).
    Poisson { rate: f64, seed: u64 },
    /// On/off CBR: `rate` bytes/s while on, nothing while off; on and off periods are exponential
    /// with means `on_us` and `off_us` (mean rate = rate·on/(on + off)). Starts on.
    OnOff { rate: f64, on_us: u64, off_us: u64, seed: u64 },
    /// `Poisson` plus an AIMD window flow (elastic).
    PoissonAimd { rate: f64, rtt_us: u64, seed: u64 },
}

impl Cross {
    /// The propagation RTT of the elastic (AIMD) component, if there is one.
    pub fn aimd_rtt_us(&self) -> Option<u64> {
        match *self {
            Cross::Aimd { rtt_us } | Cross::Mixed { rtt_us, .. } | Cross::PoissonAimd { rtt_us, .. } => Some(rtt_us),
            Cross::Cbr { .. } | Cross::Poisson { .. } | Cross::OnOff { .. } => None,
        }
    }

    /// Ground truth: the cross traffic contains an elastic flow.
    pub fn is_elastic(&self) -> bool {
        self.aimd_rtt_us().is_some()
    }

    fn open_loop(&self) -> OpenLoop {
        match *self {
            Cross::Cbr { rate } | Cross::Mixed { rate, .. } => OpenLoop::Cbr { rate },
            Cross::Aimd { .. } => OpenLoop::Cbr { rate: 0.0 },
            Cross::Poisson { rate, seed } | Cross::PoissonAimd { rate, seed, .. } => {
                let mut rng = SplitMix64::new(seed);
                let next_s = exponential(&mut rng, MSS / rate.max(1e-9));
                OpenLoop::Poisson { rate, rng, next_s }
            }
            Cross::OnOff { rate, on_us, off_us, seed } => {
                let mut rng = SplitMix64::new(seed);
                let until_s = exponential(&mut rng, on_us as f64 / 1e6);
                OpenLoop::OnOff { rate, on_s: on_us as f64 / 1e6, off_s: off_us as f64 / 1e6, rng, on: true, until_s }
            }
        }
    }
}

/// An exponential variate of mean `mean`.
fn exponential(rng: &mut SplitMix64, mean: f64) -> f64 {
    -mean * (1.0 - rng.next_f64()).ln()
}

/// The inelastic (open-loop) part of the cross traffic: bytes offered to the queue per step.
#[derive(Debug, Clone)]
enum OpenLoop {
    Cbr {
        rate: f64,
    },
    /// `next_s`: arrival time of the next packet, s.
    Poisson {
        rate: f64,
        rng: SplitMix64,
        next_s: f64,
    },
    /// `until_s`: end of the current on (or off) period, s.
    OnOff {
        rate: f64,
        on_s: f64,
        off_s: f64,
        rng: SplitMix64,
        on: bool,
        until_s: f64,
    },
}

impl OpenLoop {
    /// Bytes arriving in the step ending at `now` (µs).
    fn step(&mut self, now: u64) -> f64 {
        let end = now as f64 / 1e6;
        match self {
            OpenLoop::Cbr { rate } => *rate * STEP_S,
            OpenLoop::Poisson { rate, rng, next_s } => {
                let mut bytes = 0.0;
                while *next_s <= end && *rate > 0.0 {
                    bytes += MSS;
                    *next_s += exponential(rng, MSS / *rate);
                }
                bytes
            }
            OpenLoop::OnOff { rate, on_s, off_s, rng, on, until_s } => {
                let mut t = end - STEP_S;
                let mut on_time = 0.0;
                while t < end {
                    let seg_end = until_s.min(end);
                    if *on {
                        on_time += seg_end - t;
                    }
                    t = seg_end;
                    if *until_s <= end {
                        *on = !*on;
                        *until_s += exponential(rng, if *on { *on_s } else { *off_s });
                    }
                }
                *rate * on_time
            }
        }
    }
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
    /// μ̂, bytes/s.
    pub mu_hat: f64,
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
            // A fluid model delivers bytes, not whole packets: no packet count, so consumers
            // take the bytes (Report::delivered_and_marked_segments) rather than a floor of them.
            acked_pkts: 0,
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
    let mut window = setup.cross.aimd_rtt_us().map(Aimd::new);
    let mut open_loop = setup.cross.open_loop();
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
        let mut arrivals = [(NIMBUS, me.send()), (WINDOW, 0.0), (CBR, open_loop.step(now))];
        if let Some(w) = window.as_mut() {
            arrivals[1].1 = w.step(now);
        }
        queued = enqueue_drop_tail(&mut queue, queued, setup.buffer_bytes, arrivals, now, |src, dropped| match src {
            NIMBUS => me.fb.losses.push_back((now + me.prop_us, dropped)),
            WINDOW => {
                let w = window.as_mut().unwrap();
                w.fb.losses.push_back((now + w.prop_us, dropped));
            }
            _ => {}
        });
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
                mu_hat: alg.mu_hat(),
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

/// One NimbusCC flow of a multi-flow run: its propagation RTT and when it is active.
#[derive(Debug, Clone, Copy)]
pub struct FlowSpec {
    pub rtt_us: u64,
    pub start_us: u64,
    /// The flow stops sending (and gets no more reports) here; `u64::MAX` = never.
    pub stop_us: u64,
}

/// The state of a multi-flow run at one instant (sampled every 10 ms).
#[derive(Debug, Clone)]
pub struct MultiPoint {
    pub t_s: f64,
    /// Active NimbusCC flows, and how many of them are pulsers.
    pub active: usize,
    pub pulsers: usize,
    /// Per flow: active, its mode, and bytes delivered since the previous point.
    pub flows: Vec<(bool, Mode, f64)>,
    pub queue_delay_s: f64,
}

/// Several NimbusCC flows on the bottleneck of `setup` (its `rtt_us` is ignored: each flow has its
/// own), with `setup.cross` as other cross traffic — the paper's multi-flow setups (spec S17, S19).
/// Same physics as `record`: one shared drop-tail FIFO, each NimbusCC flow a paced, window-capped
/// sender with its own reports (jittered 9–11 ms, phase by its start time).
pub fn run_multi(setup: &Setup, flows: &[FlowSpec], algs: &mut [NimbusCC]) -> Vec<MultiPoint> {
    assert_eq!(flows.len(), algs.len());
    let n = flows.len();
    let (window_src, cbr_src) = (n, n + 1);
    let mut queue: VecDeque<Chunk> = VecDeque::new();
    let mut queued = 0.0f64;
    let mut senders: Vec<Sender> = flows.iter().map(|f| Sender::new(f.rtt_us)).collect();
    let mut started = vec![false; n];
    let mut next_report = vec![0u64; n];
    let mut last_report = vec![0u64; n];
    let mut k = vec![0u64; n];
    let mut window = setup.cross.aimd_rtt_us().map(Aimd::new);
    let mut open_loop = setup.cross.open_loop();
    let mut delivered = vec![0.0f64; n];
    let mut points = Vec::with_capacity((setup.duration_us / 10_000) as usize + 1);
    let mut next_point = 10_000u64;
    let mut now = 0u64;
    while now < setup.duration_us {
        now += STEP_US;
        let active: Vec<bool> = flows.iter().map(|f| now >= f.start_us && now < f.stop_us).collect();
        for i in 0..n {
            if active[i] && !started[i] {
                started[i] = true;
                let a = algs[i].init(&FlowStart { now_us: now, ..FlowStart::new(MSS as u32, (10.0 * MSS) as u64) });
                senders[i].cwnd = a.cwnd_bytes.unwrap_or(senders[i].cwnd);
                next_report[i] = now + 10_000;
                last_report[i] = now;
            }
        }
        let mut arrivals: Vec<(usize, f64)> = Vec::with_capacity(n + 2);
        for (i, me) in senders.iter_mut().enumerate() {
            me.receive(now);
            arrivals.push((i, if active[i] { me.send() } else { 0.0 }));
        }
        arrivals.push((window_src, window.as_mut().map_or(0.0, |w| w.step(now))));
        arrivals.push((cbr_src, open_loop.step(now)));
        queued = enqueue_drop_tail(&mut queue, queued, setup.buffer_bytes, arrivals, now, |src, dropped| {
            if src < n {
                let me = &mut senders[src];
                me.fb.losses.push_back((now + me.prop_us, dropped));
            } else if src == window_src {
                let w = window.as_mut().unwrap();
                w.fb.losses.push_back((now + w.prop_us, dropped));
            }
        });
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
            if src < n {
                let me = &mut senders[src];
                me.fb.acks.push_back(Ack { at_us: now + me.prop_us, bytes: take, sent_us });
                delivered[src] += take;
            } else if src == window_src {
                let w = window.as_mut().unwrap();
                w.fb.acks.push_back(Ack { at_us: now + w.prop_us, bytes: take, sent_us });
            }
        }
        queued = queued.max(0.0);
        for i in 0..n {
            if !active[i] || now < next_report[i] {
                continue;
            }
            let report = senders[i].report(now, now - last_report[i]);
            let action = algs[i].on_report(&report);
            if let Some(c) = action.cwnd_bytes {
                senders[i].cwnd = c;
            }
            match action.pacing {
                Some(Pacing::BytesPerSec(r)) => senders[i].pacing = Some(r),
                Some(Pacing::Off) => senders[i].pacing = None,
                None => {}
            }
            last_report[i] = now;
            k[i] += 1;
            next_report[i] = now + 10_000 + [0, 1_000, 0, 0, 2_000, 0][(k[i] % 6) as usize] - 1_000;
        }
        if now >= next_point {
            next_point += 10_000;
            let per_flow: Vec<(bool, Mode, f64)> =
                (0..n).map(|i| (active[i], algs[i].mode(), std::mem::take(&mut delivered[i]))).collect();
            points.push(MultiPoint {
                t_s: now as f64 / 1e6,
                active: active.iter().filter(|a| **a).count(),
                pulsers: (0..n).filter(|&i| active[i] && started[i] && algs[i].role() == Role::Pulser).count(),
                flows: per_flow,
                queue_delay_s: queued / setup.mu,
            });
        }
    }
    points
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

/// Fraction of the points with t ≥ `from_s` whose mode is the right one for the ground truth:
/// competitive if the cross traffic holds an elastic flow, delay otherwise.
pub fn accuracy(points: &[Point], from_s: f64, elastic: bool) -> f64 {
    let want = if elastic { Mode::Competitive } else { Mode::Delay };
    let sel = points.iter().filter(|p| p.t_s >= from_s);
    let n = sel.clone().count().max(1) as f64;
    sel.filter(|p| p.mode == want).count() as f64 / n
}

#[cfg(test)]
mod tests {
    use super::super::{CompetitiveAlg, DelayAlg, NimbusConfig};
    use super::*;
    use crate::nimbus::cross_traffic::LinkRate;
    use crate::nimbus::elasticity::EtaBands;

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

    /// Spec S19 (κ sweep, Table 5): `n` NimbusCC flows with multi_flow start together (within
    /// `spread_us`, drawn from `seed`) on 96 Mbit/s, 50 ms, 2 BDP, no other traffic.
    fn election_run(kappa: f64, seed: u64, n: usize, secs: u64, spread_us: u64) -> Election {
        let cfg = NimbusConfig { multi_flow: true, kappa, seed, ..config(12e6) };
        let plans = crate::nimbus::elasticity::Plans::new(cfg.fft_len, cfg.watcher_fft_len);
        let mut algs: Vec<NimbusCC> = (0..n as u64).map(|i| NimbusCC::with_plans(cfg, &plans, i)).collect();
        let mut rng = crate::nimbus::election::SplitMix64::new(seed ^ 0x5319);
        let flows: Vec<FlowSpec> = (0..n)
            .map(|_| FlowSpec {
                rtt_us: 50_000,
                start_us: (rng.next_f64() * spread_us as f64) as u64 / STEP_US * STEP_US,
                stop_us: u64::MAX,
            })
            .collect();
        let points = run_multi(&Setup::paper(Cross::Cbr { rate: 0.0 }, secs), &flows, &mut algs);
        Election::of(&points, n, secs)
    }

    /// What T24 measures, from one run.
    #[derive(Debug, Clone, Copy)]
    struct Election {
        /// First time with a pulser, s after the 15 s switch timer (elections start then).
        time_to_elect_s: Option<f64>,
        /// From the first election on: fraction of the time with more than one pulser, and none.
        multi: f64,
        none: f64,
        /// Jain's index of the flows' throughput over the second half.
        jain: f64,
    }

    impl Election {
        fn of(points: &[MultiPoint], n: usize, secs: u64) -> Self {
            let first = points.iter().find(|p| p.pulsers >= 1).map(|p| p.t_s);
            let after: Vec<&MultiPoint> = points.iter().filter(|p| first.is_some_and(|f| p.t_s >= f)).collect();
            let m = after.len().max(1) as f64;
            let half: Vec<&MultiPoint> = points.iter().filter(|p| p.t_s >= secs as f64 / 2.0).collect();
            let x: Vec<f64> = (0..n).map(|i| half.iter().map(|p| p.flows[i].2).sum::<f64>()).collect();
            Election {
                time_to_elect_s: first.map(|f| f - 15.0),
                multi: after.iter().filter(|p| p.pulsers > 1).count() as f64 / m,
                none: after.iter().filter(|p| p.pulsers == 0).count() as f64 / m,
                jain: x.iter().sum::<f64>().powi(2) / (n as f64 * x.iter().map(|v| v * v).sum::<f64>()).max(1e-9),
            }
        }
    }

    /// S19/T24 over `runs` seeds: (mean time to elect over the runs that elected, how many did,
    /// mean fraction with > 1 pulser, mean fraction with none, min Jain).
    type KappaStats = (f64, usize, f64, f64, f64);

    /// `KappaStats` of `runs` runs at `kappa`.
    fn kappa_stats(kappa: f64, runs: u64, spread_us: u64) -> KappaStats {
        let rs: Vec<Election> = (0..runs).map(|seed| election_run(kappa, seed, 8, 45, spread_us)).collect();
        let elected: Vec<f64> = rs.iter().filter_map(|r| r.time_to_elect_s).collect();
        let mean = |v: &mut dyn Iterator<Item = f64>| {
            let v: Vec<f64> = v.collect();
            v.iter().sum::<f64>() / v.len().max(1) as f64
        };
        (
            mean(&mut elected.iter().copied()),
            elected.len(),
            mean(&mut rs.iter().map(|r| r.multi)),
            mean(&mut rs.iter().map(|r| r.none)),
            rs.iter().map(|r| r.jain).fold(1.0, f64::min),
        )
    }

    /// The full T24 sweep (20 runs × 45 s per κ), printed.
    #[test]
    #[ignore = "measurement: spec S19/T24 kappa sweep, 100 runs"]
    fn s19_kappa_sweep() {
        for spread_us in [0, 200_000] {
            for kappa in [0.5, 0.75, 1.0, 1.5, 2.0] {
                let (t, elected, multi, none, jain) = kappa_stats(kappa, 20, spread_us);
                println!(
                    "spread {spread_us} us kappa {kappa}: time to elect {t:.1} s ({elected}/20 elected), > 1 pulser {:.1} %, none {:.1} %, min Jain {jain:.3}",
                    100.0 * multi,
                    100.0 * none
                );
            }
        }
    }

    /// Spec T24 shape in CI (S19, flows started in the same millisecond, 12 runs per κ): the time
    /// to elect falls and the time with more than one pulser rises with κ, and κ = 1 is within
    /// ±50 % of the paper's 8.0 s / 9.3 %. Measured (20 runs, `s19_kappa_sweep`): κ 0.5/0.75/1/1.5/2
    /// → 8.6/6.8/5.8/4.6/2.4 s and 0/0/5.3/16.0/25.6 % (paper 19.8/15.3/8.0/5.4/2.7 s,
    /// 0/4.6/9.3/15.4/29.3 %; our κ = 0.5 mean is censored by the 45 s runs: 17 of 20 elected).
    /// Starts spread over one pulse period (200 ms) give 6.0 s and 16.8 % at κ = 1.
    #[test]
    fn s19_t24_election_trend() {
        const RUNS: u64 = 12;
        let stats: Vec<(f64, KappaStats)> = [0.5, 1.0, 2.0].iter().map(|&k| (k, kappa_stats(k, RUNS, 0))).collect();
        for (k, s) in &stats {
            println!(
                "kappa {k}: time to elect {:.1} s ({}/{RUNS} elected), > 1 pulser {:.1} %, none {:.1} %, min Jain {:.3}",
                s.0,
                s.1,
                100.0 * s.2,
                100.0 * s.3,
                s.4
            );
        }
        let (t, multi): (Vec<f64>, Vec<f64>) = stats.iter().map(|(_, s)| (s.0, s.2)).unzip();
        assert!(t[0] > t[1] && t[1] > t[2], "time to elect falls with kappa: {t:?}");
        assert!(multi[0] <= multi[1] && multi[1] < multi[2], "> 1 pulser rises with kappa: {multi:?}");
        assert!((4.0..=12.0).contains(&t[1]), "kappa = 1: {} s vs the paper's 8.0 s ± 50 %", t[1]);
        assert!((0.0465..=0.1395).contains(&multi[1]), "kappa = 1: {} vs the paper's 9.3 % ± 50 %", multi[1]);
        assert!(stats.iter().all(|(_, s)| s.3 == 0.0), "once elected, never without a pulser");
    }

    /// Spec S17 (Fig. 15, T22): 4 NimbusCC flows (Vegas delay mode), 96 Mbit/s, 50 ms, starting
    /// 120 s apart, each lasting 480 s, no other traffic.
    #[test]
    #[ignore = "measurement: spec S17/T22, 840 s"]
    fn s17_staggered_flows() {
        let cfg = NimbusConfig { multi_flow: true, delay: DelayAlg::Vegas, ..config(12e6) };
        let plans = crate::nimbus::elasticity::Plans::new(cfg.fft_len, cfg.watcher_fft_len);
        let mut algs: Vec<NimbusCC> = (0..4u64).map(|i| NimbusCC::with_plans(cfg, &plans, i)).collect();
        let flows: Vec<FlowSpec> = (0..4u64)
            .map(|i| FlowSpec { rtt_us: 50_000, start_us: i * 120_000_000, stop_us: i * 120_000_000 + 480_000_000 })
            .collect();
        let points = run_multi(&Setup::paper(Cross::Cbr { rate: 0.0 }, 840), &flows, &mut algs);
        let with_flows: Vec<&MultiPoint> = points.iter().filter(|p| p.active > 0).collect();
        let at_most_one = with_flows.iter().filter(|p| p.pulsers <= 1).count() as f64 / with_flows.len() as f64;
        let delay = with_flows
            .iter()
            .map(|p| p.flows.iter().filter(|f| f.0 && f.1 == Mode::Delay).count() as f64 / p.active as f64)
            .sum::<f64>()
            / with_flows.len() as f64;
        println!("S17: <= 1 pulser {:.1} % of the time, delay mode {:.1} % (flow-weighted)", 100.0 * at_most_one, 100.0 * delay);
        for w in 0..7u64 {
            let (a, b) = (w as f64 * 120.0, (w + 1) as f64 * 120.0);
            let sel: Vec<&MultiPoint> = points.iter().filter(|p| p.t_s >= a + 20.0 && p.t_s < b).collect();
            let bytes: Vec<f64> = (0..4).map(|i| sel.iter().map(|p| p.flows[i].2).sum::<f64>() / (b - a - 20.0) / 1e6).collect();
            let pulsers = sel.iter().map(|p| p.pulsers).max().unwrap_or(0);
            let q = 1e3 * sel.iter().map(|p| p.queue_delay_s).sum::<f64>() / sel.len().max(1) as f64;
            println!("{a:.0}-{b:.0} s: MB/s per flow {bytes:.2?}, max pulsers {pulsers}, mean queue {q:.1} ms");
        }
    }

    /// The other controllers: Reno and MulTCP(2) in competitive mode, Vegas and Copa in delay mode.
    #[test]
    fn other_controllers_keep_the_classification() {
        let variants = [
            (CompetitiveAlg::Reno, DelayAlg::BasicDelay, 20.0),
            (CompetitiveAlg::MulTcp, DelayAlg::BasicDelay, 20.0),
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

    /// Links of the held-out matrix (issue 18): (name, μ bytes/s, NimbusCC's propagation RTT µs),
    /// 2-BDP buffers. None is the 96 Mbit/s / 50 ms setup the other tests use.
    const LINKS: [(&str, f64, u64); 4] =
        [("24M/30ms", 3e6, 30_000), ("48M/50ms", 6e6, 50_000), ("96M/80ms", 12e6, 80_000), ("12M/100ms", 1.5e6, 100_000)];

    /// The cross-traffic kinds of the matrix on a link of rate `mu` and RTT `rtt_us`, seeded with
    /// `seed`; the elastic (Reno-like) flow has NimbusCC's RTT.
    fn kinds(mu: f64, rtt_us: u64, seed: u64) -> [(&'static str, Cross); 5] {
        [
            ("Poisson 40%", Cross::Poisson { rate: 0.4 * mu, seed }),
            ("on/off 60% 2s/1s", Cross::OnOff { rate: 0.6 * mu, on_us: 2_000_000, off_us: 1_000_000, seed }),
            ("CBR 40%", Cross::Cbr { rate: 0.4 * mu }),
            ("Reno", Cross::Aimd { rtt_us }),
            ("Poisson 30% + Reno", Cross::PoissonAimd { rate: 0.3 * mu, rtt_us, seed }),
        ]
    }

    /// Accuracy target per kind (spec T3/T5/T12): 95 % against inelastic and elastic, 85 % mixed.
    fn target(cross: &Cross) -> f64 {
        match cross {
            Cross::PoissonAimd { .. } | Cross::Mixed { .. } => 0.85,
            _ => 0.95,
        }
    }

    /// Which NimbusCC a matrix cell runs.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Variant {
        /// The defaults: μ̂ estimated (maximum receive rate and the pulse fit), η corrected for the
        /// rate window in delay mode.
        Estimated,
        /// The defaults with μ configured at the true link rate.
        Configured,
        /// Before issue 18: μ̂ = the maximum receive rate only, raw η.
        EstimatedBefore,
        ConfiguredBefore,
        /// The defaults with the (optional) window-gain correction of η, `eta_whiten`.
        EstimatedWhiten,
    }

    impl Variant {
        fn config(self, mu: f64) -> NimbusConfig {
            let estimated = NimbusConfig { header_bytes: 0.0, ..NimbusConfig::default() };
            let before = |c: NimbusConfig| NimbusConfig { mu_fit: false, bands: EtaBands { whiten: false, ..c.bands }, ..c };
            match self {
                Variant::Estimated => estimated,
                Variant::Configured => config(mu),
                Variant::EstimatedBefore => before(estimated),
                Variant::ConfiguredBefore => before(config(mu)),
                Variant::EstimatedWhiten => NimbusConfig { bands: EtaBands { whiten: true, ..estimated.bands }, ..estimated },
            }
        }
    }

    /// One matrix cell: `variant` against `cross` on a 2-BDP link of rate `mu` and RTT `rtt_us`,
    /// `secs` long; accuracy (the fraction of reports in the right mode) from 15 s on, as in the
    /// issue's runs (15 s warm-up: the switch timer).
    fn cell(mu: f64, rtt_us: u64, cross: Cross, variant: Variant, secs: u64) -> (f64, Vec<Point>) {
        let setup = Setup { mu, buffer_bytes: 2.0 * mu * rtt_us as f64 / 1e6, rtt_us, cross, duration_us: secs * 1_000_000 };
        let mut alg = NimbusCC::new(variant.config(mu));
        let points = run(&setup, &mut alg);
        (accuracy(&points, 15.0, cross.is_elastic()), points)
    }

    /// Mean accuracy of `variant` over `seeds` (the seeds of the random cross traffic).
    fn mean_accuracy(mu: f64, rtt_us: u64, kind: usize, variant: Variant, seeds: &[u64]) -> f64 {
        seeds.iter().map(|&seed| cell(mu, rtt_us, kinds(mu, rtt_us, seed)[kind].1, variant, 60).0).sum::<f64>()
            / seeds.len() as f64
    }

    /// The open-loop sources deliver their mean rate, and Poisson arrivals are Poisson (variance of
    /// the per-ms packet count = its mean).
    #[test]
    fn open_loop_sources_have_their_mean_rate() {
        let steps = 200_000u64;
        for cross in [
            Cross::Poisson { rate: 2e6, seed: 1 },
            Cross::OnOff { rate: 3e6, on_us: 2_000_000, off_us: 1_000_000, seed: 2 },
            Cross::Cbr { rate: 2e6 },
        ] {
            let mut src = cross.open_loop();
            let total: f64 = (1..=steps).map(|k| src.step(k * STEP_US)).sum();
            let mean = total / (steps as f64 * STEP_S);
            assert!((mean - 2e6).abs() < 0.05 * 2e6, "{cross:?}: mean {mean}");
        }
        let mut p = Cross::Poisson { rate: 2e6, seed: 3 }.open_loop();
        let per_ms: Vec<f64> = (1..=steps).map(|k| p.step(k * STEP_US) / MSS).collect();
        let m = per_ms.iter().sum::<f64>() / steps as f64;
        let var = per_ms.iter().map(|x| (x - m).powi(2)).sum::<f64>() / steps as f64;
        assert!((var / m - 1.0).abs() < 0.05, "Poisson counts: variance/mean {}", var / m);
        // On/off: the rate is either 0 or the peak within whole on or off milliseconds.
        let mut o = Cross::OnOff { rate: 3e6, on_us: 2_000_000, off_us: 1_000_000, seed: 4 }.open_loop();
        let per_ms: Vec<f64> = (1..=steps).map(|k| o.step(k * STEP_US)).collect();
        let off = per_ms.iter().filter(|b| **b == 0.0).count() as f64 / steps as f64;
        assert!((off - 1.0 / 3.0).abs() < 0.05, "off a third of the time: {off}");
    }

    /// The held-out accuracy matrix (issue 18): every link of `LINKS` × every kind of `kinds`,
    /// before and after the changes, μ̂ estimated and configured, and the defaults with the
    /// optional `eta_whiten`; mean over three seeds of the random cross traffic, 60 s runs, accuracy
    /// from 15 s on. Prints the table (~30 s in debug):
    /// `cargo test -p ccp-algorithms --lib nimbus::sim::tests::held_out_accuracy_matrix -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement: issue 18 held-out accuracy matrix, 300 runs of 60 s"]
    fn held_out_accuracy_matrix() {
        const SEEDS: [u64; 3] = [18, 19, 20];
        println!(
            "accuracy after 15 s, mean of seeds {SEEDS:?}: before (mu_hat estimated / mu configured) -> after (estimated / configured) [after, estimated, eta_whiten]"
        );
        for (name, mu, rtt_us) in LINKS {
            for (k, (kind, cross)) in kinds(mu, rtt_us, 0).into_iter().enumerate() {
                let [eb, cb, ea, ca, ew] = [
                    Variant::EstimatedBefore,
                    Variant::ConfiguredBefore,
                    Variant::Estimated,
                    Variant::Configured,
                    Variant::EstimatedWhiten,
                ]
                .map(|v| 100.0 * mean_accuracy(mu, rtt_us, k, v, &SEEDS));
                let miss = if ea < 100.0 * target(&cross) { "  < target" } else { "" };
                println!("{name:<10} {kind:<20} {eb:5.1} / {cb:5.1}  ->  {ea:5.1} / {ca:5.1}  [{ew:5.1}]{miss}");
            }
        }
    }

    /// Issue 18 in CI: NimbusCC with μ̂ estimated (the default) at three links other than the
    /// 96 Mbit/s / 50 ms setup (24 Mbit/s/30 ms, 48/50, 96/80; 2-BDP buffers, 60 s, accuracy from
    /// 15 s), against every kind of `kinds` (seed 18). Run `held_out_accuracy_matrix` for the
    /// whole table (four links, three seeds, before/after, μ configured for reference).
    ///
    /// Asserted: the spec's targets (T3/T5/T12: 95 % inelastic and elastic, 85 % mixed) in the cells
    /// that meet them, and μ̂ within 3 % of μ against CBR traffic (8 % against Poisson). Before the pulse fit
    /// of μ̂ (`cross_traffic::LinkFit`), μ̂ was the maximum receive rate, ≈ 0.8·μ with this cross
    /// traffic present from the start, and CBR was classified elastic 100 % of the time at all
    /// three links (accuracy 0 %, 0 %, 8.9 %): this test fails on that behaviour.
    ///
    /// Known misses (targets not met; asserted only as floors ≈ 10 points under today's values so
    /// that regressions show): Poisson and on/off at 48/50 and 96/80 (the one-RTT rate window tilts
    /// the noise spectrum, see `elasticity::window_gain`), Reno at 48/50 and 96/80 with μ̂
    /// estimated (an in-phase elastic answer is indistinguishable from a slower link, see
    /// `cross_traffic::LinkFit`), and Poisson + Reno everywhere.
    #[test]
    fn held_out_accuracy_with_mu_estimated() {
        // (link, kind) -> asserted minimum accuracy: the target where it is met, else a floor.
        const MIN: [[f64; 5]; 3] = [
            // Poisson 40 %, on/off, CBR 40 %, Reno, Poisson 30 % + Reno
            [0.95, 0.95, 0.95, 0.95, 0.60],
            [0.75, 0.65, 0.95, 0.60, 0.50],
            [0.30, 0.65, 0.95, 0.80, 0.40],
        ];
        let mut failures = Vec::new();
        for (l, (name, mu, rtt_us)) in LINKS.into_iter().take(3).enumerate() {
            for (k, (kind, cross)) in kinds(mu, rtt_us, 18).into_iter().enumerate() {
                let (acc, points) = cell(mu, rtt_us, cross, Variant::Estimated, 60);
                let mu_hat = points.last().map_or(0.0, |p| p.mu_hat);
                println!(
                    "{name} {kind}: accuracy {:.1} % (min {:.0} %, target {:.0} %), mu_hat/mu {:.3}",
                    100.0 * acc,
                    100.0 * MIN[l][k],
                    100.0 * target(&cross),
                    mu_hat / mu
                );
                if acc < MIN[l][k] {
                    failures.push(format!("{name} {kind}: accuracy {acc:.3} < {}", MIN[l][k]));
                }
                // μ̂ against inelastic traffic present from the start (the maximum receive rate alone:
                // ≈ 0.8·μ). Poisson noise in ẑ moves BasicDelay's rate within a block, which biases
                // the fit a few percent low.
                let tolerance = match cross {
                    Cross::Cbr { .. } => Some(0.03),
                    Cross::Poisson { .. } => Some(0.08),
                    _ => None,
                };
                if tolerance.is_some_and(|t| (mu_hat / mu - 1.0).abs() > t) {
                    failures.push(format!("{name} {kind}: mu_hat/mu {:.3}", mu_hat / mu));
                }
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }
}
