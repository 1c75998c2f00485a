//! CDG: CAIA Delay-Gradient congestion control with the semantics of Linux's `tcp_cdg`, driven by
//! one report per round trip.
//!
//! Model. CDG reads congestion from how the RTT changes, not from its level, so it needs no
//! estimate of the base RTT. For every round trip (a "round") it takes the smallest and largest RTT
//! sample, τ_min and τ_max, and their gradients against the previous round,
//!
//!   g_min = τ_min(n) − τ_min(n−1),   g_max = τ_max(n) − τ_max(n−1)                       (µs)
//!
//! smoothed as a moving sum over the last `window` = 8 rounds. Linux keeps the sums and drops the
//! paper's division by the window; while fewer than `window` gradients exist, the sum is
//! extrapolated to sum·window/count, truncated toward zero. The gradient used is g = Σg_min when
//! that is positive, else Σg_max. When g > 0 the flow backs off with probability
//!
//!   P = 1 − exp(−g·backoff_factor·10⁻⁶)                  (g in µs, backoff_factor = 42)
//!
//! which is the paper's P = 1 − exp(−ḡ/G) with ḡ = g/window the mean gradient per round and
//! G = 10⁶/(backoff_factor·window) µs (42 and 8 give G = 2.98 ms, the paper's 3 ms). So the
//! probability is 1 − 1/e when the summed gradient is 10⁶/backoff_factor µs (23.8 ms).
//! A backoff sets ssthresh = cwnd = cwnd·backoff_beta and, like Linux's CWR state, opens a
//! reduction period of about one round trip: no growth, no gradient; the samples of the period are
//! the previous round of the next gradient. Backoffs are decided only at the end of a round, so
//! there is at most one per round trip (in fact at most one every two, because of the reduction).
//! Otherwise the window grows as Reno's (reno::RenoWindow): slow start doubles it per round trip up
//! to ssthresh, then one MSS per window of acknowledged data.
//!
//! Coexistence heuristics, each a parameter as in tcp_cdg.c:
//! - Shadow window (`use_shadow`, default on): a window that grows with cwnd but is not cut by
//!   delay backoffs (a backoff leaves it at max(shadow, cwnd)). On loss, shadow ← min(shadow/2, cwnd)
//!   and ssthresh = max(2, shadow, cwnd/2) packets: CDG reduces as a Reno flow that had never backed
//!   off for delay would, so loss-based flows that fill the buffer do not starve it. An
//!   application-limited report caps the shadow at cwnd (Linux: "or to cwnd when application
//!   limited"). Without it a loss halves the window.
//! - Ineffectual backoff detection (`use_ineff`, default 5): every backoff the coin asks for counts;
//!   beyond `use_ineff` of them without the RTT ever falling (a summed gradient ≤ −32 µs, min or
//!   max, resets the count) the backoffs are skipped — a competing loss-based flow keeps the queue
//!   up whatever CDG does, and backing off further would only hand it the link. 0 = off.
//! - Loss tolerance (`use_tolerance`): the summed gradients, rounded to multiples of 64 µs,
//!   classify the queue as full (Σg_min > 0, Σg_max ≤ 0: the largest RTT is pinned at the buffer's
//!   limit) or not full (both rising, or Σg_max < 0); a loss while not full is taken as not caused
//!   by congestion and leaves the window as it is (ssthresh = cwnd).
//! - Slow-start exit (`hystart_detect`, default 3 = ACK train + delay, Linux's HyStart variant):
//!   the delay test ends slow start (ssthresh = cwnd) when, from the ninth RTT sample of a round on,
//!   the round's minimum RTT exceeds max(delay_min + delay_min/8, 125 µs), delay_min being the
//!   smallest RTT seen in slow start. Delay backoffs end slow start too (ssthresh = β·cwnd).
//! - ECN-Echo (`ecn`, default on): tcp_cdg has no ECN code of its own; the kernel answers an ECE by
//!   entering CWR through tcp_cdg_ssthresh, i.e. exactly as a loss (shadow and tolerance rules
//!   included), so that is what this does. Timeouts: ssthresh by the loss rule, the window to the
//!   loss window (the contract's floor, `MIN_CWND_PKTS`), slow start again.
//!
//! Where a report-based agent deviates from a per-ACK kernel module, and why:
//! - Rounds. Linux's round ends at the first ACK past the snd_nxt recorded when it began. The agent
//!   asks for one report per RTT (`ReportPolicy::PerRtt { rtts: 1.0 }`) and a round ends at the
//!   first report with RTT samples at least half an SRTT (as of the round's start) after it began:
//!   with per-RTT reports that is every periodic report, whatever jitter the datapath's timer has,
//!   while urgent reports (loss, timeout, state change) and reports that come faster than asked are
//!   folded into the round in progress; a report with a loss, a timeout or an ECE never ends one
//!   (Linux takes no gradient in Recovery or CWR). τ_min and τ_max of a round are the min and max
//!   of its reports' `RttStats`.
//! - RTT samples. The datapath folds every sample; Linux's delayed-ACK filter (a lone delayed ACK
//!   counts only toward a lower minimum) needs each ACK's count of acknowledged packets and is not
//!   applied. Zero samples are ignored and samples are capped at u32::MAX µs, as in Linux's 32-bit
//!   arithmetic. Gradients are computed in integer µs, exactly as tcp_cdg_grad does.
//! - Reduction periods. Linux's CWR (backoff, ECE) and Recovery (loss) last until the data in
//!   flight when they began is acknowledged; reports carry no sequence numbers, so a period ends at
//!   the first report without a congestion signal at least half an SRTT after it began (the next
//!   per-RTT report). A loss during a backoff's period turns it into a loss recovery starting at the
//!   loss, without a second reduction (Linux enters Recovery from CWR without calling ssthresh); a
//!   loss in a recovery is the same event unless it comes 1.5 SRTTs or more after the recovery began
//!   (a report's losses cannot be dated; those of one overflow are detected over about a round trip).
//!   The window goes to ssthresh at once rather than by Proportional Rate Reduction, as in reno.rs.
//! - HyStart. The delay test runs at every report with the round's minimum so far; Linux checks
//!   every ACK from the ninth of a round on and exits mid-round. A report's minimum covers at least
//!   as many samples as Linux's at its check, so the agent never exits where Linux would not, and
//!   may exit a round later where the RTT rose only late in a round. On exit ssthresh is the window
//!   before the report's growth and the report's acknowledged data count as congestion avoidance,
//!   which is close to Linux's window at its ninth ACK. The ACK-train test cannot be done from
//!   reports: it needs each ACK's arrival time (a train is a run of ACKs less than 3 ms apart; slow
//!   start ends once one lasts longer than max(delay_min/2, 125 µs)), and a report carries only the
//!   interval's totals. The agent could estimate a train's length as acknowledged bytes divided by
//!   the delivery rate, but that is the train's length only when ACKs come back-to-back at the
//!   bottleneck's rate, which a report cannot show, and an overestimate would end slow start early.
//!   So bit 1 of `hystart_detect` is accepted (a kernel module configuration reads the same) and
//!   inert: slow start ends by the delay test, a delay backoff, a loss or an ECE.
//! - Randomness. Linux draws from the kernel's generator; here a SplitMix64 seeded from the `seed`
//!   parameter and the flow's creation index in its factory, so runs are reproducible and flows of
//!   one configuration draw different streams. e^−x in f64 instead of nexp_u32's table.
//! - Windows are f64 bytes: no integer truncation of cwnd·β or cwnd/2 in packets. `window` may be
//!   any 1..=256 (Linux needs a power of two for its ring mask).
//! - Not implemented: the undo of spurious reductions (tcp_cdg_undo_cwnd; reports carry no undo
//!   signal) and the reset after an idle restart (CA_EVENT_CWND_RESTART; the datapath restarts the
//!   window and reports do not say so).
//! - Seeded flows (hot swap, adoption) continue in congestion avoidance from the seeded window
//!   (shadow = window, delay_min = the seed's minimum RTT) with no gradient history: the previous
//!   controller's last report is not a round, and a gradient against it could back off for nothing.
//!   The first backoff is possible at the end of the second round, as for a new flow.
//!
//! Defaults are Linux's, the module loaded without parameters: window 8, backoff_beta
//! 0.7071·1024 = 724/1024 ≈ 0.707 (the paper and FreeBSD use 0.7), backoff_factor 42, use_ineff 5,
//! use_shadow on, use_tolerance off, hystart_detect 3. use_tolerance stays off by default so that
//! `cdg` means `tcp_cdg` as the kernel ships it and responds to every loss like the project's other
//! algorithms; the Inigo thesis's harness loaded `modprobe tcp_cdg use_tolerance=1`, reproduced
//! with `-p use_tolerance=true` (specs/inigo.md §11).
//!
//! References: D. A. Hayes, G. Armitage, "Revisiting TCP congestion control using delay
//! gradients", IFIP Networking 2011, pp. 328–341; Linux net/ipv4/tcp_cdg.c (K. K. Jonassen, Linux
//! 4.2), read for its semantics only; this is an independent implementation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand_xoshiro::rand_core::{Rng, SeedableRng};

use crate::window::{RenoBased, RenoWindow, WindowConfig};
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Param, Report, ReportPolicy, RttStats,
    StateVar,
};

/// Gradients in the moving sum, rounds (tcp_cdg `window`: 8).
pub const WINDOW_ROUNDS: usize = 8;
/// Largest `window`, rounds (tcp_cdg: 256).
pub const MAX_WINDOW_ROUNDS: usize = 256;
/// Multiplicative decrease of a delay backoff, dimensionless: tcp_cdg's `backoff_beta` default is
/// 0.7071·1024 = 724 (truncated), out of 1024.
pub const BACKOFF_BETA: f64 = 724.0 / 1024.0;
/// Scale of the backoff probability, per second of summed gradient: P = 1 − exp(−g·factor·10⁻⁶)
/// with g in µs (tcp_cdg `backoff_factor`: 42 = 1000/(G·window) for G = 3 ms, window 8).
pub const BACKOFF_FACTOR: f64 = 42.0;
/// tcp_cdg `hystart_detect` bits.
pub const HYSTART_ACK_TRAIN: i64 = 1;
pub const HYSTART_DELAY: i64 = 2;
/// Backoffs in a row without a falling RTT before the rest are skipped (tcp_cdg `use_ineff`: 5).
pub const USE_INEFF: i64 = 5;
/// A summed gradient (min or max) at or below minus this shows that a backoff worked, µs.
const EFFECTUAL_GRADIENT_US: i64 = 32;
/// use_tolerance rounds the summed gradients to multiples of this, µs.
const TOLERANCE_QUANTUM_US: i64 = 64;
/// HyStart's delay test: RTT samples of a round before it applies (it applies from the next one).
const HYSTART_MIN_SAMPLES: u32 = 8;
/// HyStart's delay threshold is delay_min + delay_min/this, ...
const HYSTART_DELAY_DIVISOR: u64 = 8;
/// ... and at least this, µs.
const HYSTART_MIN_THRESH_US: u64 = 125;
/// The largest RTT sample used, µs (Linux holds RTTs in 32 bits).
const MAX_RTT_US: u64 = u32::MAX as u64;
/// A round, or a reduction period, ends at the first report at least this many SRTTs after it
/// began (see the module comment: with per-RTT reports, the next periodic report).
const ROUND_MIN_SRTTS: f64 = 0.5;
/// A loss this many SRTTs or more after a loss recovery began is a new congestion event.
const SAME_EVENT_SRTTS: f64 = 1.5;
/// One report per this many RTTs: one report per round.
const REPORT_RTTS: f64 = 1.0;
/// µs per s, for the backoff probability.
const US_PER_S: f64 = 1e6;
/// Mixes a flow's creation index into the seed (the 64-bit golden-ratio constant of SplitMix64's
/// output mixer).
const FLOW_INDEX_MIX: u64 = 0xD1B5_4A32_D192_ED03;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "cdg",
    summary: "CAIA Delay-Gradient: probabilistic backoff on min/max RTT gradients, shadow window, Reno growth (Linux tcp_cdg)",
    reference: "Hayes & Armitage, IFIP Networking 2011; Linux net/ipv4/tcp_cdg.c",
    params: CdgConfig::PARAMS,
    build: |p| Ok(Arc::new(CdgFactory::new(CdgConfig::from_params(p)?))),
};

declare_params! {
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct CdgConfig {
        pub window: usize = Param::int(
            WINDOW_ROUNDS as i64,
            1,
            MAX_WINDOW_ROUNDS as i64,
            "rounds",
            "gradients in the moving sum (tcp_cdg: 8; Linux also requires a power of two)",
        ),
        pub backoff_beta: f64 = Param::float(
            BACKOFF_BETA,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "window multiplier of a delay backoff (tcp_cdg: 0.7071·1024 = 724/1024; the paper: 0.7)",
        ),
        pub backoff_factor: f64 = Param::float(
            BACKOFF_FACTOR,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0e6),
            "1/s",
            "backoff probability 1 − exp(−g·backoff_factor), g the summed gradient in s (tcp_cdg: 42 = 1000/(G·window), the paper's G = 3 ms)",
        ),
        /// tcp_cdg's bits: `HYSTART_ACK_TRAIN` (inert), `HYSTART_DELAY`.
        pub hystart_detect: i64 = Param::int(
            HYSTART_ACK_TRAIN | HYSTART_DELAY,
            0,
            HYSTART_ACK_TRAIN | HYSTART_DELAY,
            "",
            "slow-start exit (tcp_cdg: 3): bit 2 = delay test, on; bit 1 = ACK train, accepted but inert (reports carry no ACK times)",
        ),
        pub use_ineff: u32 = Param::int(
            USE_INEFF,
            0,
            u16::MAX as i64,
            "backoffs",
            "ineffectual backoff detection: skip backoffs beyond this many without the RTT falling; 0 = off (tcp_cdg: 5)",
        ),
        pub use_shadow: bool = Param::bool(
            true,
            "shadow window: on loss, ssthresh = max(shadow/2, cwnd/2), the shadow ignoring delay backoffs (tcp_cdg: on)",
        ),
        pub use_tolerance: bool = Param::bool(
            false,
            "loss tolerance: no reduction on a loss while the gradients say the queue is not full (tcp_cdg: off; the Inigo thesis's harness: on)",
        ),
        pub ecn: bool = Param::bool(true, "respond to ECN-Echo as to a loss, as the kernel does for tcp_cdg (RFC 3168)"),
        pub seed: u64 = Param::int(0, 0, i64::MAX, "", "seed of the backoff draws (mixed with the flow's creation index)"),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

/// Builds CDG flows, numbering them so that each draws its own stream.
#[derive(Debug)]
pub struct CdgFactory {
    cfg: CdgConfig,
    flows: AtomicU64,
}

impl CdgFactory {
    pub fn new(cfg: CdgConfig) -> Self {
        CdgFactory { cfg, flows: AtomicU64::new(0) }
    }
}

impl AlgorithmFactory for CdgFactory {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        let index = self.flows.fetch_add(1, Ordering::Relaxed);
        Box::new(Cdg::new(self.cfg, index))
    }
}

/// P = 1 − exp(−g·backoff_factor·10⁻⁶), g the (extrapolated) summed gradient in µs; 0 for g ≤ 0.
pub fn backoff_probability(grad_us: i64, backoff_factor: f64) -> f64 {
    if grad_us <= 0 {
        return 0.0;
    }
    -(-(grad_us as f64) * backoff_factor / US_PER_S).exp_m1()
}

/// x/d rounded to the nearest integer, halves away from zero (Linux's DIV_ROUND_CLOSEST for d > 0).
fn div_round_closest(x: i64, d: i64) -> i64 {
    if x > 0 {
        (x + d / 2) / d
    } else {
        (x - d / 2) / d
    }
}

/// HyStart's delay threshold for a given delay_min, µs.
pub fn hystart_delay_thresh_us(delay_min_us: u64) -> u64 {
    (delay_min_us + delay_min_us / HYSTART_DELAY_DIVISOR).max(HYSTART_MIN_THRESH_US)
}

/// A pair of values for the minimum and the maximum RTT: a round's RTTs, a gradient, or a sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MinMax {
    pub min_us: i64,
    pub max_us: i64,
}

/// The moving sums of the per-round gradients over `window` rounds (tcp_cdg_grad).
#[derive(Debug, Clone, PartialEq)]
pub struct Gradients {
    ring: Vec<MinMax>,
    sum: MinMax,
    tail: usize,
    filled: bool,
}

impl Gradients {
    pub fn new(window: usize) -> Self {
        Gradients {
            ring: vec![MinMax::default(); window.clamp(1, MAX_WINDOW_ROUNDS)],
            sum: MinMax::default(),
            tail: 0,
            filled: false,
        }
    }

    /// The summed gradients over the window (not extrapolated).
    pub fn sum(&self) -> MinMax {
        self.sum
    }

    /// Adds the gradient of round `cur` against round `prev`; returns the gradient that decides a
    /// backoff: Σg_min if positive, else Σg_max, extrapolated to a full window while filling.
    pub fn push(&mut self, cur: MinMax, prev: MinMax) -> i64 {
        let g = MinMax { min_us: cur.min_us - prev.min_us, max_us: cur.max_us - prev.max_us };
        let old = self.ring[self.tail];
        self.sum.min_us += g.min_us - old.min_us;
        self.sum.max_us += g.max_us - old.max_us;
        self.ring[self.tail] = g;
        let window = self.ring.len();
        self.tail = (self.tail + 1) % window;
        let grad = if self.sum.min_us > 0 { self.sum.min_us } else { self.sum.max_us };
        if self.filled {
            return grad;
        }
        if self.tail == 0 {
            self.filled = true;
            return grad;
        }
        // Truncated toward zero, as C's signed division.
        grad * window as i64 / self.tail as i64
    }
}

/// What the gradients last said about the queue (tcp_cdg's `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    Unknown = 0,
    /// use_tolerance: the RTTs are moving without the queue at its limit; a loss is not congestion.
    NonFull = 1,
    /// use_tolerance: the minimum RTT rises while the maximum does not: the buffer is full.
    Full = 2,
    /// A delay backoff's reduction is in progress.
    Backoff = 3,
}

/// One round's RTT samples so far.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Round {
    start_us: u64,
    /// The SRTT when the round began (0: none yet).
    srtt_us: u64,
    rtt: Option<MinMax>,
    samples: u32,
}

impl Round {
    fn new(start_us: u64, srtt_us: u64) -> Self {
        Round { start_us, srtt_us, rtt: None, samples: 0 }
    }

    fn fold(&mut self, rtt: Option<RttStats>) {
        let Some(s) = rtt else { return };
        // Linux ignores samples ≤ 0; a report whose smallest sample is 0 still shows its largest.
        let max = s.max_us.min(MAX_RTT_US);
        if max == 0 || s.samples == 0 {
            return;
        }
        let min = if s.min_us > 0 { s.min_us.min(max) } else { max };
        let (min, max) = (min as i64, max as i64);
        self.rtt = Some(match self.rtt {
            Some(r) => MinMax { min_us: r.min_us.min(min), max_us: r.max_us.max(max) },
            None => MinMax { min_us: min, max_us: max },
        });
        self.samples = self.samples.saturating_add(s.samples);
    }

    /// True once the round has samples and has lasted long enough.
    fn over(&self, now_us: u64) -> bool {
        self.rtt.is_some() && now_us.saturating_sub(self.start_us) as f64 >= ROUND_MIN_SRTTS * self.srtt_us as f64
    }
}

/// A window reduction in progress (Linux's CWR or Recovery state).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reduction {
    since_us: u64,
    srtt_us: u64,
    /// A loss recovery rather than a backoff's (or an ECE's) CWR.
    recovery: bool,
}

impl Reduction {
    fn elapsed_srtts_at_least(&self, now_us: u64, srtts: f64) -> bool {
        now_us.saturating_sub(self.since_us) as f64 >= srtts * self.srtt_us as f64
    }
}

#[derive(Debug, Clone)]
pub struct Cdg {
    cfg: CdgConfig,
    /// Window, ssthresh, MSS and SRTT, and Reno's growth.
    w: RenoWindow,
    rng: rand_xoshiro::SplitMix64,
    gradients: Gradients,
    round: Round,
    /// The previous round's RTTs (`None`: no samples in it, or no previous round).
    prev: Option<MinMax>,
    state: QueueState,
    /// The shadow window, bytes.
    shadow_bytes: f64,
    /// Backoffs asked for by the coin since the RTT last fell.
    backoff_cnt: u32,
    /// Smallest RTT seen in slow start, µs (0: none).
    delay_min_us: u64,
    reduction: Option<Reduction>,
    /// For observability: the last gradient and backoff probability, backoffs taken.
    last_grad_us: i64,
    last_probability: f64,
    backoffs: u64,
}

impl Cdg {
    /// The `index`-th flow of a configuration.
    pub fn new(cfg: CdgConfig, index: u64) -> Self {
        let mixed = rand_xoshiro::SplitMix64::seed_from_u64(cfg.seed ^ index.wrapping_mul(FLOW_INDEX_MIX)).next_u64();
        Cdg {
            cfg,
            // Reno's recovery; its decreases are CDG's own (`ssthresh`).
            w: RenoWindow::new(WindowConfig { init_cwnd_pkts: cfg.init_cwnd_pkts, beta: 0.5, recovery_by_data: true }),
            rng: rand_xoshiro::SplitMix64::seed_from_u64(mixed),
            gradients: Gradients::new(cfg.window),
            round: Round::new(0, 0),
            prev: None,
            state: QueueState::Unknown,
            shadow_bytes: 0.0,
            backoff_cnt: 0,
            delay_min_us: 0,
            reduction: None,
            last_grad_us: 0,
            last_probability: 0.0,
            backoffs: 0,
        }
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn draw(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// tcp_cdg_ssthresh: the window after a congestion event.
    fn ssthresh(&mut self) -> f64 {
        let (cwnd, floor) = (self.w.cwnd_bytes(), self.w.min_cwnd());
        if self.state == QueueState::Backoff {
            return (cwnd * self.cfg.backoff_beta).max(floor);
        }
        if self.state == QueueState::NonFull && self.cfg.use_tolerance {
            return cwnd;
        }
        self.shadow_bytes = (self.shadow_bytes / 2.0).min(cwnd);
        if self.cfg.use_shadow {
            floor.max(self.shadow_bytes).max(cwnd / 2.0)
        } else {
            floor.max(cwnd / 2.0)
        }
    }

    /// Enters a reduction: ssthresh by tcp_cdg_ssthresh, the window to it.
    fn reduce(&mut self, now_us: u64, recovery: bool) {
        let ssthresh = self.ssthresh();
        self.w.cut_to(ssthresh);
        self.reduction = Some(Reduction { since_us: now_us, srtt_us: self.w.srtt_us(), recovery });
    }

    /// The end of a reduction (CA_EVENT_COMPLETE_CWR): its samples are the previous round.
    fn complete_reduction(&mut self, now_us: u64) {
        self.reduction = None;
        self.state = QueueState::Unknown;
        self.prev = self.round.rtt;
        self.round = Round::new(now_us, self.w.srtt_us());
    }

    /// The gradient of the round just ended against the previous one, with tcp_cdg_grad's side
    /// effects on the ineffectual-backoff count and the tolerance state.
    fn gradient(&mut self, cur: MinMax, prev: MinMax) -> i64 {
        let grad = self.gradients.push(cur, prev);
        let sum = self.gradients.sum();
        if sum.min_us <= -EFFECTUAL_GRADIENT_US || sum.max_us <= -EFFECTUAL_GRADIENT_US {
            self.backoff_cnt = 0;
        }
        if self.cfg.use_tolerance {
            let gmin = div_round_closest(sum.min_us, TOLERANCE_QUANTUM_US);
            let gmax = div_round_closest(sum.max_us, TOLERANCE_QUANTUM_US);
            if gmin > 0 && gmax <= 0 {
                self.state = QueueState::Full;
            } else if (gmin > 0 && gmax > 0) || gmax < 0 {
                self.state = QueueState::NonFull;
            }
        }
        grad
    }

    /// tcp_cdg_backoff: draws the coin for a positive gradient; true when the window was cut.
    fn backoff(&mut self, grad_us: i64, now_us: u64) -> bool {
        let p = backoff_probability(grad_us, self.cfg.backoff_factor);
        self.last_probability = p;
        // Linux: no backoff when the draw is at most e^−x, so a backoff has probability P.
        if self.draw() < 1.0 - p {
            return false;
        }
        if self.cfg.use_ineff > 0 {
            self.backoff_cnt = self.backoff_cnt.saturating_add(1);
            if self.backoff_cnt > self.cfg.use_ineff {
                return false;
            }
        }
        self.shadow_bytes = self.shadow_bytes.max(self.w.cwnd_bytes());
        self.state = QueueState::Backoff;
        self.reduce(now_us, false);
        self.backoffs += 1;
        true
    }

    /// HyStart's delay test on the round so far (tcp_cdg_hystart_update, delay part).
    fn hystart(&mut self) {
        let Some(rtt) = self.round.rtt else { return };
        let round_min = rtt.min_us as u64;
        self.delay_min_us = if self.delay_min_us == 0 { round_min } else { self.delay_min_us.min(round_min) };
        if self.cfg.hystart_detect & HYSTART_DELAY == 0 || self.round.samples <= HYSTART_MIN_SAMPLES {
            return;
        }
        if round_min > hystart_delay_thresh_us(self.delay_min_us) {
            self.w.exit_slow_start();
        }
    }

    /// tcp_cdg_cong_avoid: a report outside any reduction.
    fn cong_avoid(&mut self, r: &Report) {
        if self.w.in_slow_start() && self.cfg.hystart_detect != 0 {
            self.hystart();
        }
        if self.round.over(r.now_us) {
            let cur = self.round.rtt.unwrap_or_default();
            let grad = match self.prev {
                Some(prev) => self.gradient(cur, prev),
                None => 0,
            };
            self.last_grad_us = grad;
            self.prev = Some(cur);
            self.round = Round::new(r.now_us, self.w.srtt_us());
            if grad > 0 && self.backoff(grad, r.now_us) {
                return;
            }
        }
        if !RenoWindow::window_limits(r) {
            self.shadow_bytes = self.shadow_bytes.min(self.w.cwnd_bytes());
            return;
        }
        let before = self.w.cwnd_bytes();
        self.w.grow(r.delivered_bytes() as u64);
        self.shadow_bytes += self.w.cwnd_bytes() - before;
    }

    /// A loss or an ECN-Echo.
    fn on_congestion(&mut self, r: &Report) {
        let loss = r.lost_pkts > 0;
        match self.reduction {
            // Linux enters Recovery from CWR without a second ssthresh; the recovery runs from the loss.
            Some(red) if !red.recovery && !red.elapsed_srtts_at_least(r.now_us, SAME_EVENT_SRTTS) => {
                if loss {
                    self.reduction = Some(Reduction { since_us: r.now_us, srtt_us: self.w.srtt_us(), recovery: true });
                } else if red.elapsed_srtts_at_least(r.now_us, ROUND_MIN_SRTTS) {
                    // An ECE in CWR is ignored; the period ends as without it.
                    self.complete_reduction(r.now_us);
                }
            }
            Some(red) if !red.elapsed_srtts_at_least(r.now_us, SAME_EVENT_SRTTS) => {}
            Some(_) => {
                self.complete_reduction(r.now_us);
                self.reduce(r.now_us, loss);
            }
            None => self.reduce(r.now_us, loss),
        }
    }

    /// A retransmission timeout (tcp_enter_loss): ssthresh by the loss rule unless a reduction is
    /// already in progress, the window to the loss window; growth resumes at once (slow start).
    fn on_timeout(&mut self) {
        if self.reduction.is_none() {
            let ssthresh = self.ssthresh();
            self.w.set_ssthresh(ssthresh);
        }
        self.reduction = None;
        self.w.to_loss_window();
    }
}

impl RenoBased for Cdg {
    fn window(&self) -> &RenoWindow {
        &self.w
    }
    fn window_mut(&mut self) -> &mut RenoWindow {
        &mut self.w
    }
}

impl Algorithm for Cdg {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.w.start(start);
        self.shadow_bytes = self.w.cwnd_bytes();
        self.round = Round::new(start.now_us, self.w.srtt_us());
        if let Some(seed) = &start.seed {
            self.delay_min_us = seed.min_rtt_us.unwrap_or(0).min(MAX_RTT_US);
        }
        Action::cwnd(self.w.cwnd_bytes()).with_report(ReportPolicy::PerRtt { rtts: REPORT_RTTS })
    }

    fn on_report(&mut self, r: &Report) -> Action {
        self.w.observe(r);
        self.round.fold(r.rtt);
        let ecn = self.cfg.ecn && (r.ce_bytes > 0 || r.ce_pkts > 0 || r.ece_acks > 0);
        if r.timeouts > 0 {
            self.on_timeout();
        } else if r.lost_pkts > 0 || ecn {
            self.on_congestion(r);
        } else if let Some(red) = self.reduction {
            // No growth and no gradient in a reduction, nor in the report that ends it.
            if red.elapsed_srtts_at_least(r.now_us, ROUND_MIN_SRTTS) {
                self.complete_reduction(r.now_us);
            }
        } else {
            self.cong_avoid(r);
        }
        Action::cwnd(self.w.cwnd_bytes())
    }

    fn state(&self) -> Vec<StateVar> {
        let sum = self.gradients.sum();
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.cwnd_bytes() },
            StateVar { name: "ssthresh_bytes", value: self.w.ssthresh_bytes() },
            StateVar { name: "shadow_bytes", value: self.shadow_bytes },
            StateVar { name: "grad_us", value: self.last_grad_us as f64 },
            StateVar { name: "gsum_min_us", value: sum.min_us as f64 },
            StateVar { name: "gsum_max_us", value: sum.max_us as f64 },
            StateVar { name: "backoff_probability", value: self.last_probability },
            StateVar { name: "backoff_cnt", value: f64::from(self.backoff_cnt) },
            StateVar { name: "backoffs", value: self.backoffs as f64 },
            StateVar { name: "delay_min_us", value: self.delay_min_us as f64 },
            StateVar { name: "queue_state", value: self.state as u8 as f64 },
            StateVar { name: "in_reduction", value: if self.reduction.is_some() { 1.0 } else { 0.0 } },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reno::{Reno, RenoConfig};
    use crate::test_support::{check_sane, reports};
    use ccp_contract::Seed;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const MSS: u32 = 1000;
    const MSS_F: f64 = MSS as f64;
    const RTT_US: u64 = 100_000;
    /// A backoff_factor that makes every positive gradient of a few µs a certain backoff.
    const CERTAIN: f64 = 1.0e6;
    /// A backoff_factor that makes backoffs practically impossible.
    const NEVER: f64 = 1.0e-9;

    /// One round's report at `now_us`: RTTs in [min_us, max_us] over 20 samples, SRTT 100 ms.
    fn round(now_us: u64, min_us: u64, max_us: u64, acked_pkts: f64) -> Report {
        Report {
            now_us,
            interval_us: RTT_US,
            mss_bytes: MSS,
            acked_bytes: (acked_pkts * MSS_F).round() as u64,
            acked_pkts: acked_pkts as u64,
            rtt: Some(RttStats { min_us, max_us, last_us: max_us, srtt_us: RTT_US, mean_us: (min_us + max_us) / 2, samples: 20 }),
            ..Report::default()
        }
    }

    fn loss(now_us: u64) -> Report {
        Report {
            now_us,
            interval_us: 1_000,
            mss_bytes: MSS,
            lost_pkts: 1,
            urgent: Some(ccp_contract::Urgent::Loss),
            ..Report::default()
        }
    }

    fn cdg_with(cfg: CdgConfig) -> Cdg {
        let mut c = Cdg::new(cfg, 0);
        c.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        c
    }

    fn var(c: &Cdg, name: &str) -> f64 {
        c.state().iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no state {name}")).value
    }

    fn pkts(c: &Cdg) -> f64 {
        c.cwnd_bytes() / MSS_F
    }

    fn mm(min_us: i64, max_us: i64) -> MinMax {
        MinMax { min_us, max_us }
    }

    /// tcp_cdg_grad worked by hand over twelve rounds, window 8.
    #[test]
    fn gradient_vectors_by_hand() {
        let rounds = [
            mm(10_000, 12_000),
            mm(10_100, 12_300), // g (100, 300):   Σ (100, 300),  Σmin > 0, 1 of 8: 100·8/1 = 800
            mm(10_150, 12_250), // g (50, −50):    Σ (150, 250),  150·8/2 = 600
            mm(10_100, 12_400), // g (−50, 150):   Σ (100, 400),  100·8/3 = 266 (truncated)
            mm(10_000, 12_000), // g (−100, −400): Σ (0, 0),      Σmin ≤ 0: Σmax, 0
            mm(9_990, 11_990),  // g (−10, −10):   Σ (−10, −10),  −10·8/5 = −16
            mm(9_985, 11_980),  // g (−5, −10):    Σ (−15, −20),  −20·8/6 = −26 (toward zero)
            mm(10_000, 12_000), // g (15, 20):     Σ (0, 0),      0·8/7 = 0
            mm(10_300, 12_000), // g (300, 0):     Σ (300, 0),    8 of 8: filled, 300
            mm(10_300, 12_000), // g (0, 0), drops (100, 300):    Σ (200, −300), 200
            mm(10_200, 11_000), // g (−100, −1000), drops (50, −50): Σ (50, −1250), 50
            mm(10_200, 11_000), // g (0, 0), drops (−50, 150):    Σ (100, −1400), 100
        ];
        let expect = [800, 600, 266, 0, -16, -26, 0, 300, 200, 50, 100];
        let sums = [
            (100, 300),
            (150, 250),
            (100, 400),
            (0, 0),
            (-10, -10),
            (-15, -20),
            (0, 0),
            (300, 0),
            (200, -300),
            (50, -1250),
            (100, -1400),
        ];
        let mut g = Gradients::new(8);
        for (i, pair) in rounds.windows(2).enumerate() {
            assert_eq!(g.push(pair[1], pair[0]), expect[i], "round {}", i + 1);
            assert_eq!(g.sum(), mm(sums[i].0, sums[i].1), "round {}", i + 1);
        }
        // window = 1: the raw gradient of the last round, Σmin first.
        let mut g = Gradients::new(1);
        assert_eq!(g.push(mm(10_100, 12_300), mm(10_000, 12_000)), 100);
        assert_eq!(g.push(mm(10_100, 12_200), mm(10_100, 12_300)), -100);
        assert_eq!(g.push(mm(10_000, 12_500), mm(10_100, 12_200)), 300);
    }

    #[test]
    fn tolerance_rounding_is_linux_div_round_closest() {
        for (x, q) in [(0, 0), (31, 0), (32, 1), (95, 1), (96, 2), (-31, 0), (-32, -1), (-96, -2)] {
            assert_eq!(div_round_closest(x, 64), q, "{x}");
        }
        assert_eq!(hystart_delay_thresh_us(10_000), 11_250);
        assert_eq!(hystart_delay_thresh_us(80), 125);
    }

    #[test]
    fn backoff_probability_by_hand() {
        let e = std::f64::consts::E;
        // g·backoff_factor = 10⁶ µs/s: P = 1 − 1/e.
        assert!((backoff_probability(20_000, 50.0) - (1.0 - 1.0 / e)).abs() < 1e-12);
        // Linux's 42: the summed gradient 10⁶/42 µs (mean gradient G = 2.98 ms over 8 rounds).
        assert!((backoff_probability(23_810, 42.0) - (1.0 - (-1.00002f64).exp())).abs() < 1e-12);
        // 1 ms per round for 8 rounds: 1 − exp(−0.336) = 0.2854.
        assert!((backoff_probability(8_000, 42.0) - 0.285_377).abs() < 1e-6);
        assert_eq!(backoff_probability(0, 42.0), 0.0);
        assert_eq!(backoff_probability(-5_000, 42.0), 0.0);
        assert!(backoff_probability(1_000_000, 42.0) > 1.0 - 1e-15);
    }

    #[test]
    fn draws_are_seeded_and_deterministic() {
        let cfg = CdgConfig::default();
        let draws = |c: &mut Cdg| (0..64).map(|_| c.draw()).collect::<Vec<_>>();
        let first = draws(&mut Cdg::new(cfg, 0));
        assert_eq!(first, draws(&mut Cdg::new(cfg, 0)), "same seed and index: same stream");
        assert_ne!(first, draws(&mut Cdg::new(cfg, 1)), "another flow of the configuration");
        assert_ne!(first, draws(&mut Cdg::new(CdgConfig { seed: 1, ..cfg }, 0)), "another seed");
        assert!(first.iter().all(|u| (0.0..1.0).contains(u)));
        // The coin backs off with probability P: 20 000 draws at P = 1 − 1/e.
        let mut c = Cdg::new(cfg, 7);
        let p = backoff_probability(23_810, 42.0);
        let n = 20_000;
        let hits = (0..n).filter(|_| c.draw() >= 1.0 - p).count() as f64 / f64::from(n);
        assert!((hits - p).abs() < 0.015, "{hits} vs {p}");
        // The factory numbers its flows.
        let f = CdgFactory::new(cfg);
        let _ = (f.create(), f.create());
        assert_eq!(f.flows.load(Ordering::Relaxed), 2);
    }

    /// Same reports, same seed: the same windows, backoffs included.
    #[test]
    fn runs_are_reproducible() {
        let run = |seed: u64| {
            let mut c = cdg_with(CdgConfig { seed, ..CdgConfig::default() });
            (1..60u64)
                .map(|k| {
                    let rise = 300 * (k % 12); // a sawtooth queue
                    let cwnd = pkts(&c);
                    c.on_report(&round(k * RTT_US, 10_000 + rise, 12_000 + rise, cwnd)).cwnd_bytes.unwrap()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4), "the draws matter");
    }

    #[test]
    fn no_backoff_and_no_draw_when_gradients_are_not_positive() {
        let cfg = CdgConfig { backoff_factor: CERTAIN, ..CdgConfig::default() };
        let mut c = cdg_with(cfg);
        let untouched = c.rng.clone();
        for k in 1..40u64 {
            // Flat, then falling RTTs.
            let fall = if k > 20 { 50 * (k - 20) } else { 0 };
            let cwnd = pkts(&c);
            c.on_report(&round(k * RTT_US, 10_000 - fall, 12_000 - fall, cwnd));
            assert!(var(&c, "grad_us") <= 0.0);
        }
        assert_eq!(var(&c, "backoffs"), 0.0);
        assert_eq!(c.rng, untouched, "no draw without a positive gradient");
        assert!(pkts(&c) > 1000.0, "slow start unhindered: {}", pkts(&c));
    }

    /// Backoffs come only at the end of a round and are followed by a reduction period: with
    /// certain backoffs on an always-rising RTT, one every second round trip, never two in one.
    #[test]
    fn at_most_one_backoff_per_rtt() {
        let cfg = CdgConfig { backoff_factor: CERTAIN, use_ineff: 0, hystart_detect: 0, ..CdgConfig::default() };
        for per_rtt in [1u64, 4] {
            let mut c = cdg_with(cfg);
            let step = RTT_US / per_rtt;
            let mut at = vec![];
            for k in 1..=40 * per_rtt {
                let now = k * step;
                let rise = 1_000 * k / per_rtt;
                let before = (var(&c, "backoffs"), pkts(&c));
                let cwnd = pkts(&c) / per_rtt as f64;
                c.on_report(&Report { interval_us: step, ..round(now, 10_000 + rise, 12_000 + rise, cwnd) });
                if var(&c, "backoffs") > before.0 {
                    at.push(now);
                    assert!((pkts(&c) - (before.1 * BACKOFF_BETA).max(2.0)).abs() < 1e-9, "cut by beta");
                }
            }
            assert!(at.len() >= 10, "{per_rtt} reports per RTT: backoffs at {at:?}");
            for pair in at.windows(2) {
                assert!(pair[1] - pair[0] >= RTT_US, "{per_rtt} reports per RTT: two backoffs within one RTT: {at:?}");
            }
            if per_rtt == 1 {
                // Round 1 is the first round, round 2 the first gradient: backoff; round 3 the
                // reduction; round 4 the next gradient; and so on.
                assert_eq!(&at[..3], &[200_000, 400_000, 600_000]);
            }
        }
    }

    #[test]
    fn no_growth_during_the_reduction() {
        let mut c = cdg_with(CdgConfig { backoff_factor: CERTAIN, ..CdgConfig::default() });
        c.on_report(&round(100_000, 10_000, 12_000, 10.0));
        c.on_report(&round(200_000, 11_000, 13_000, 20.0));
        assert_eq!(var(&c, "backoffs"), 1.0);
        let cut = pkts(&c);
        // The backoff comes before the report's growth: 20 packets cut.
        assert!((cut - 20.0 * BACKOFF_BETA).abs() < 1e-9, "{cut}");
        assert_eq!(var(&c, "in_reduction"), 1.0);
        // The next round trip is the CWR period: no growth, and it ends with the report.
        c.on_report(&round(300_000, 11_000, 13_000, 40.0));
        assert_eq!(pkts(&c), cut);
        assert_eq!(var(&c, "in_reduction"), 0.0);
        // Then congestion avoidance (the backoff set ssthresh): about one packet per RTT. The RTT
        // falls back (Σ = 1000 − 1000 = 0): no second backoff.
        c.on_report(&round(400_000, 10_000, 12_000, cut));
        assert_eq!(var(&c, "grad_us"), 0.0);
        assert!((pkts(&c) - cut - 1.0).abs() < 0.05, "{}", pkts(&c));
    }

    /// Linux's shadow window: a backoff leaves it at the window before the cut; a later loss
    /// reduces to max(shadow/2, cwnd/2), the shadow capped at cwnd.
    #[test]
    fn shadow_window_on_loss() {
        let scenario = |use_shadow: bool| {
            let mut c = cdg_with(CdgConfig { backoff_factor: CERTAIN, use_shadow, ..CdgConfig::default() });
            c.on_report(&round(100_000, 10_000, 12_000, 10.0)); // 20 packets
            c.on_report(&round(200_000, 10_000, 12_000, 20.0)); // flat: no backoff, 40 packets
            assert_eq!(var(&c, "shadow_bytes"), 40_000.0);
            c.on_report(&round(300_000, 11_000, 13_000, 40.0)); // rising: backoff
            assert_eq!(var(&c, "backoffs"), 1.0);
            assert_eq!(pkts(&c), 40.0 * 724.0 / 1024.0); // 28.28125
            assert_eq!(var(&c, "shadow_bytes"), 40_000.0, "a backoff does not cut the shadow");
            c.on_report(&round(400_000, 10_000, 12_000, 40.0)); // the CWR period ends
            c.on_report(&loss(450_000));
            c
        };
        // shadow = min(40/2, 28.28) = 20 → ssthresh = max(2, 20, 14.14) = 20 packets.
        let c = scenario(true);
        assert_eq!(pkts(&c), 20.0);
        assert_eq!(var(&c, "ssthresh_bytes"), 20_000.0);
        assert_eq!(var(&c, "shadow_bytes"), 20_000.0);
        // Without it: half the window.
        let c = scenario(false);
        assert_eq!(pkts(&c), 28.281_25 / 2.0);

        // The shadow never keeps more than the window: min(shadow/2, cwnd).
        let mut c = cdg_with(CdgConfig::default());
        c.on_report(&round(100_000, 10_000, 12_000, 20.0)); // 30 packets
        c.shadow_bytes = 100_000.0;
        c.on_report(&loss(150_000));
        assert_eq!(pkts(&c), 30.0, "shadow/2 = 50 capped at cwnd = 30");
        // Application-limited reports cap the shadow at the window.
        let mut c = cdg_with(CdgConfig::default());
        c.shadow_bytes = 100_000.0;
        c.on_report(&Report { app_limited: true, ..round(100_000, 10_000, 12_000, 5.0) });
        assert_eq!(var(&c, "shadow_bytes"), 10_000.0);
        assert_eq!(pkts(&c), 10.0, "no growth when application-limited");
    }

    /// After `use_ineff` backoffs without the RTT falling, the coin is still drawn but the flow
    /// no longer backs off; a summed gradient ≤ −32 µs re-arms it.
    #[test]
    fn ineffectual_backoffs_are_skipped() {
        let mut c = cdg_with(CdgConfig { backoff_factor: CERTAIN, hystart_detect: 0, ..CdgConfig::default() });
        let mut now = 0;
        let mut rtt = 10_000;
        let mut next = |c: &mut Cdg, rise: i64| {
            now += RTT_US;
            rtt = (rtt as i64 + rise) as u64;
            let cwnd = pkts(c);
            c.on_report(&round(now, rtt, rtt + 2_000, cwnd));
        };
        for _ in 0..40 {
            next(&mut c, 1_000);
        }
        assert_eq!(var(&c, "backoffs"), 5.0, "use_ineff = 5");
        // Past the fifth, every round's coin counts and none cuts: the window grows again.
        assert!(var(&c, "backoff_cnt") > 20.0);
        let w = pkts(&c);
        next(&mut c, 1_000);
        assert!(pkts(&c) > w);
        // The RTT falls: the backoffs worked after all (Σ ≤ −32 µs) and the count is reset.
        next(&mut c, -30_000);
        assert!(var(&c, "gsum_min_us") <= -32.0);
        assert_eq!(var(&c, "backoff_cnt"), 0.0);
        // Rising again: backoffs resume once the sum is positive.
        for _ in 0..12 {
            next(&mut c, 1_000);
        }
        assert!(var(&c, "backoffs") > 5.0, "{}", var(&c, "backoffs"));

        // use_ineff = 0: no limit.
        let mut c = cdg_with(CdgConfig { backoff_factor: CERTAIN, hystart_detect: 0, use_ineff: 0, ..CdgConfig::default() });
        let mut now = 0;
        for k in 1..=40u64 {
            now += RTT_US;
            let cwnd = pkts(&c);
            c.on_report(&round(now, 10_000 + 1_000 * k, 12_000 + 1_000 * k, cwnd));
        }
        assert_eq!(var(&c, "backoffs"), 20.0);
    }

    /// use_tolerance: a loss while both gradients rise (the queue is not full) does not reduce.
    #[test]
    fn loss_tolerance_when_the_queue_is_not_full() {
        let run = |use_tolerance: bool, second: (u64, u64)| {
            let mut c = cdg_with(CdgConfig { use_tolerance, backoff_factor: NEVER, hystart_detect: 0, ..CdgConfig::default() });
            c.on_report(&round(100_000, 10_000, 12_000, 10.0));
            c.on_report(&round(200_000, second.0, second.1, 20.0));
            let before = pkts(&c);
            c.on_report(&loss(250_000));
            (before, pkts(&c), var(&c, "queue_state"))
        };
        // Both rising: not full; the loss is tolerated.
        let (before, after, state) = run(true, (11_000, 13_000));
        assert_eq!((after, state), (before, QueueState::NonFull as u8 as f64));
        // Max falling: not full either.
        let (before, after, _) = run(true, (10_000, 11_000));
        assert_eq!(after, before);
        // Min rising, max flat: full; the loss counts (shadow = cwnd: halved).
        let (before, after, state) = run(true, (11_000, 12_000));
        assert_eq!((after, state), (before / 2.0, QueueState::Full as u8 as f64));
        // Variations under 32 µs round to zero: the state stays unknown; the loss counts.
        let (before, after, state) = run(true, (10_020, 12_020));
        assert_eq!((after, state), (before / 2.0, QueueState::Unknown as u8 as f64));
        // Off (Linux's default): every loss counts.
        let (before, after, _) = run(false, (11_000, 13_000));
        assert_eq!(after, before / 2.0);
    }

    #[test]
    fn hystart_delay_ends_slow_start() {
        let run = |hystart_detect: i64, samples: u32| {
            let mut c = cdg_with(CdgConfig { hystart_detect, backoff_factor: NEVER, ..CdgConfig::default() });
            let with = |r: Report| Report { rtt: r.rtt.map(|s| RttStats { samples, ..s }), ..r };
            c.on_report(&with(round(100_000, 10_000, 10_500, 10.0))); // delay_min 10 ms, 20 packets
            c.on_report(&with(round(200_000, 11_000, 11_500, 20.0))); // 11 ms ≤ 11.25 ms: 40 packets
            c.on_report(&with(round(300_000, 12_000, 12_500, 40.0))); // 12 ms > 11.25 ms
            c
        };
        let c = run(3, 20);
        assert_eq!(var(&c, "delay_min_us"), 10_000.0);
        assert_eq!(var(&c, "ssthresh_bytes"), 40_000.0, "ssthresh = the window before the report's growth");
        // The report's 40 packets then count as congestion avoidance: ≈ +1.
        assert!((pkts(&c) - (40.0f64 * 40.0 + 2.0 * 40.0).sqrt()).abs() < 1e-9, "{}", pkts(&c));
        // The delay bit alone does the same; the ACK-train bit alone does nothing.
        assert_eq!(var(&run(2, 20), "ssthresh_bytes"), 40_000.0);
        let c = run(1, 20);
        assert!(var(&c, "ssthresh_bytes").is_infinite() && pkts(&c) == 80.0);
        // Fewer than nine samples in the round: no verdict yet.
        let c = run(3, 8);
        assert!(var(&c, "ssthresh_bytes").is_infinite() && pkts(&c) == 80.0);
        // hystart_detect = 0: not even delay_min.
        assert_eq!(var(&run(0, 20), "delay_min_us"), 0.0);
    }

    /// An urgent loss report mid-round: the cut is immediate, the round is not ended, the samples
    /// until the reduction ends become the previous round; a second loss is the same event.
    #[test]
    fn urgent_loss_mid_round() {
        let mut c = cdg_with(CdgConfig { backoff_factor: NEVER, ..CdgConfig::default() });
        c.on_report(&round(100_000, 10_000, 12_000, 10.0));
        c.on_report(&round(200_000, 10_000, 12_000, 20.0)); // 40 packets
        let lossy = Report { rtt: round(0, 10_500, 15_000, 0.0).rtt, ..loss(250_000) };
        c.on_report(&lossy);
        assert_eq!(pkts(&c), 20.0);
        assert_eq!(c.round.start_us, 200_000, "the round goes on");
        assert_eq!(c.round.rtt, Some(mm(10_500, 15_000)));
        c.on_report(&loss(280_000));
        assert_eq!(pkts(&c), 20.0, "the same congestion event");
        // 300 ms: only 0.5 SRTT after the loss, without a loss: the recovery ends, no growth.
        c.on_report(&round(300_000, 10_000, 14_000, 30.0));
        assert_eq!(pkts(&c), 20.0);
        assert_eq!(c.prev, Some(mm(10_000, 15_000)), "the recovery's samples are the previous round");
        assert_eq!(c.round.start_us, 300_000);
        // 400 ms: a round; gradient (10 000 − 10 000, 12 000 − 15 000) → Σmax = −3000; growth again.
        c.on_report(&round(400_000, 10_000, 12_000, 20.0));
        assert_eq!(var(&c, "grad_us"), -3000.0 * 8.0 / 2.0);
        assert!(pkts(&c) > 20.9);
        // A loss 1.5 SRTTs after a recovery began (here: a new one) is a new event.
        c.on_report(&loss(500_000));
        let w = pkts(&c);
        c.on_report(&loss(640_000));
        assert_eq!(pkts(&c), w);
        c.on_report(&loss(650_000));
        assert_eq!(pkts(&c), w / 2.0);
    }

    /// A loss in a backoff's CWR period turns it into a recovery without a second cut.
    #[test]
    fn loss_during_a_backoff_is_the_same_event() {
        let mut c = cdg_with(CdgConfig { backoff_factor: CERTAIN, ..CdgConfig::default() });
        c.on_report(&round(100_000, 10_000, 12_000, 10.0));
        c.on_report(&round(200_000, 11_000, 13_000, 20.0)); // backoff: 40 → 28.28
        let cut = pkts(&c);
        c.on_report(&Report { rtt: round(0, 12_000, 14_000, 0.0).rtt, ..loss(300_000) });
        assert_eq!(pkts(&c), cut);
        // The recovery runs from the loss: the report 0.4 SRTT later does not end it, 0.5 does.
        c.on_report(&round(340_000, 12_000, 14_000, 10.0));
        assert_eq!(var(&c, "in_reduction"), 1.0);
        c.on_report(&round(350_000, 12_000, 14_000, 10.0));
        assert_eq!((var(&c, "in_reduction"), pkts(&c)), (0.0, cut));
        assert_eq!(var(&c, "queue_state"), QueueState::Unknown as u8 as f64);
    }

    #[test]
    fn timeout_collapses_and_slow_starts_at_once() {
        let mut c = cdg_with(CdgConfig { backoff_factor: NEVER, ..CdgConfig::default() });
        c.on_report(&round(100_000, 10_000, 12_000, 30.0)); // 40 packets, shadow 40
        c.on_report(&Report { timeouts: 1, urgent: Some(ccp_contract::Urgent::Timeout), ..loss(150_000) });
        assert_eq!(pkts(&c), 2.0);
        assert_eq!(var(&c, "ssthresh_bytes"), 20_000.0, "the loss rule: max(shadow/2, cwnd/2)");
        c.on_report(&round(250_000, 10_000, 12_000, 2.0));
        assert_eq!(pkts(&c), 4.0, "slow start");
    }

    #[test]
    fn ecn_echo_is_a_congestion_event_unless_disabled() {
        let marked = |now| Report { ece_acks: 2, ce_bytes: 2_000, ce_pkts: 2, ..round(now, 10_000, 12_000, 10.0) };
        let mut c = cdg_with(CdgConfig::default());
        c.on_report(&round(100_000, 10_000, 12_000, 30.0));
        c.on_report(&marked(200_000));
        assert_eq!(pkts(&c), 20.0);
        c.on_report(&marked(240_000));
        assert_eq!(pkts(&c), 20.0, "once per round trip");
        let mut c = cdg_with(CdgConfig { ecn: false, backoff_factor: NEVER, ..CdgConfig::default() });
        c.on_report(&round(100_000, 10_000, 12_000, 30.0));
        c.on_report(&marked(200_000));
        assert_eq!(pkts(&c), 50.0);
    }

    #[test]
    fn seeded_flow_continues_in_congestion_avoidance() {
        let mut c = Cdg::new(CdgConfig::default(), 0);
        let start = FlowStart {
            now_us: 5,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: None,
            seed: Some(Seed { cwnd_bytes: 50_000, srtt_us: Some(RTT_US), min_rtt_us: Some(9_000), ..Seed::default() }),
        };
        let a = c.init(&start);
        assert_eq!(a.cwnd_bytes, Some(50_000.0));
        assert_eq!(a.report, Some(ReportPolicy::PerRtt { rtts: 1.0 }));
        assert_eq!((var(&c, "shadow_bytes"), var(&c, "ssthresh_bytes"), var(&c, "delay_min_us")), (50_000.0, 50_000.0, 9_000.0));
        c.on_report(&round(100_005, 10_000, 12_000, 50.0));
        assert!((pkts(&c) - 51.0).abs() < 0.02, "{}", pkts(&c));
        // No gradient history: the first round only becomes the previous one.
        assert_eq!(c.prev, Some(mm(10_000, 12_000)));
        assert_eq!(var(&c, "grad_us"), 0.0);
        // A new flow asks for per-RTT reports too.
        assert_eq!(
            Cdg::new(CdgConfig::default(), 0).init(&FlowStart::new(MSS, 0)).report,
            Some(ReportPolicy::PerRtt { rtts: 1.0 })
        );
    }

    #[test]
    fn params_parse_and_validate() {
        let f = INFO.configure(&"use_tolerance = true\nwindow = 16\nbackoff_beta = 0.7\nseed = 9".parse().unwrap()).unwrap();
        assert_eq!(f.name(), "cdg");
        for bad in
            ["window = 0", "window = 257", "hystart_detect = 4", "backoff_beta = 0", "backoff_factor = 0", "use_ineff = -1"]
        {
            assert!(INFO.configure(&bad.parse().unwrap()).is_err(), "{bad}");
        }
        let names: Vec<_> = INFO.params.iter().map(|p| p.name).collect();
        assert!(names.contains(&"init_cwnd_pkts"));
        let d = CdgConfig::default();
        for spec in INFO.params {
            let v = spec.default_value();
            match spec.name {
                "window" => assert_eq!(v, ccp_contract::ParamValue::Int(d.window as i64)),
                "backoff_beta" => assert_eq!(v, ccp_contract::ParamValue::Float(d.backoff_beta)),
                "backoff_factor" => assert_eq!(v, ccp_contract::ParamValue::Float(d.backoff_factor)),
                "hystart_detect" => assert_eq!(v, ccp_contract::ParamValue::Int(d.hystart_detect)),
                "use_ineff" => assert_eq!(v, ccp_contract::ParamValue::Int(i64::from(d.use_ineff))),
                "use_shadow" => assert_eq!(v, ccp_contract::ParamValue::Bool(d.use_shadow)),
                "use_tolerance" => assert_eq!(v, ccp_contract::ParamValue::Bool(d.use_tolerance)),
                _ => {}
            }
        }
    }

    #[test]
    fn state_exposes_the_gradients_and_windows() {
        let names: Vec<_> = cdg_with(CdgConfig::default()).state().iter().map(|v| v.name).collect();
        for n in ["cwnd_bytes", "ssthresh_bytes", "shadow_bytes", "grad_us", "backoff_cnt", "backoffs", "queue_state"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
    }

    proptest! {
        #[test]
        fn never_nan_or_below_two_packets(
            seq in reports(60),
            window in 1usize..=256,
            beta in 0.01f64..=1.0,
            factor in prop_oneof![Just(NEVER), Just(42.0), Just(CERTAIN)],
            hystart_detect in 0i64..=3,
            use_ineff in 0u32..8,
            use_shadow in any::<bool>(),
            use_tolerance in any::<bool>(),
            ecn in any::<bool>(),
            seed in any::<u64>(),
            seeded in any::<bool>(),
        ) {
            let cfg = CdgConfig {
                window, backoff_beta: beta, backoff_factor: factor, hystart_detect, use_ineff, use_shadow, use_tolerance, ecn,
                seed, ..CdgConfig::default()
            };
            let mut c = Cdg::new(cfg, 0);
            let mut start = FlowStart::new(MSS, 10 * u64::from(MSS));
            if seeded {
                start.seed = Some(Seed { cwnd_bytes: 123_456, srtt_us: Some(RTT_US), min_rtt_us: Some(u64::MAX), ..Seed::default() });
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

    /// A fluid drop-tail bottleneck with one window-limited sender: per-RTT reports, and an
    /// urgent report whenever a loss is detected. Returns the queue's mean and maximum and the
    /// link utilization after `warmup_s`.
    struct Fluid {
        mu_bytes_per_s: f64,
        buffer_bytes: f64,
        prop_us: u64,
    }

    #[derive(Debug)]
    struct Outcome {
        queue_mean_bytes: f64,
        queue_max_bytes: f64,
        utilization: f64,
    }

    fn closed_loop(alg: &mut dyn Algorithm, link: &Fluid, secs: u64, warmup_s: u64) -> Outcome {
        const STEP_US: u64 = 250;
        const MSS_B: f64 = 1448.0;
        let dt = STEP_US as f64 / 1e6;
        let mut cwnd = alg.init(&FlowStart::new(MSS_B as u32, (10.0 * MSS_B) as u64)).cwnd_bytes.unwrap();
        let (mut queue, mut queued) = (VecDeque::<(f64, u64)>::new(), 0.0f64);
        let mut acks = VecDeque::<(u64, f64, u64)>::new();
        let mut losses = VecDeque::<(u64, f64)>::new();
        let mut inflight = 0.0f64;
        // The report fold.
        let (mut acked, mut lost, mut srtt) = (0.0f64, 0.0f64, 0.0f64);
        let (mut rmin, mut rmax, mut rlast, mut rsum, mut rn) = (u64::MAX, 0u64, 0u64, 0u64, 0u32);
        let (mut next_report, mut last_report) = (10_000u64, 0u64);
        let (mut q_sum, mut q_max, mut q_n, mut delivered) = (0.0, 0.0f64, 0u64, 0.0);
        let warmup_us = warmup_s * 1_000_000;
        let mut now = 0u64;
        while now < secs * 1_000_000 {
            now += STEP_US;
            while acks.front().is_some_and(|a| a.0 <= now) {
                let (_, bytes, sent) = acks.pop_front().unwrap();
                inflight = (inflight - bytes).max(0.0);
                acked += bytes;
                let rtt = now - sent;
                (rmin, rmax, rlast, rsum, rn) = (rmin.min(rtt), rmax.max(rtt), rtt, rsum + rtt, rn + 1);
                srtt = if srtt == 0.0 { rtt as f64 } else { srtt + (rtt as f64 - srtt) / 8.0 };
            }
            let mut detected = false;
            while losses.front().is_some_and(|l| l.0 <= now) {
                let (_, bytes) = losses.pop_front().unwrap();
                inflight = (inflight - bytes).max(0.0);
                lost += bytes;
                detected = true;
            }
            // Send what the window allows; drop-tail admission; a drop is detected when the
            // data queued behind it has been acknowledged.
            let send = (cwnd - inflight).max(0.0);
            inflight += send;
            let admitted = send.min((link.buffer_bytes - queued).max(0.0));
            if admitted > 0.0 {
                queue.push_back((admitted, now));
                queued += admitted;
            }
            if send - admitted > 0.0 {
                let at = now + link.prop_us + (queued / link.mu_bytes_per_s * 1e6) as u64;
                losses.push_back((at, send - admitted));
            }
            // The link serves FIFO.
            let mut budget = link.mu_bytes_per_s * dt;
            while budget > 0.0 {
                let Some(head) = queue.front_mut() else { break };
                let take = head.0.min(budget);
                head.0 -= take;
                budget -= take;
                queued -= take;
                acks.push_back((now + link.prop_us, take, head.1));
                if now >= warmup_us {
                    delivered += take;
                }
                if head.0 <= 1e-9 {
                    queue.pop_front();
                }
            }
            queued = queued.max(0.0);
            if now >= warmup_us {
                q_sum += queued;
                q_max = q_max.max(queued);
                q_n += 1;
            }
            let urgent = detected && lost > 0.0;
            if now >= next_report || urgent {
                let rtt = (rn > 0).then(|| RttStats {
                    min_us: rmin,
                    max_us: rmax,
                    last_us: rlast,
                    srtt_us: srtt as u64,
                    mean_us: rsum / u64::from(rn),
                    samples: rn,
                });
                let report = Report {
                    now_us: now,
                    interval_us: now - last_report,
                    mss_bytes: MSS_B as u32,
                    acked_bytes: acked as u64,
                    acked_pkts: (acked / MSS_B) as u64,
                    lost_pkts: (lost / MSS_B).ceil() as u64,
                    rtt,
                    inflight_bytes: inflight as u64,
                    cwnd_bytes: cwnd as u64,
                    urgent: urgent.then_some(ccp_contract::Urgent::Loss),
                    ..Report::default()
                };
                if let Some(c) = alg.on_report(&report).cwnd_bytes {
                    cwnd = c;
                }
                (acked, lost) = (0.0, 0.0);
                (rmin, rmax, rsum, rn) = (u64::MAX, 0, 0, 0);
                last_report = now;
                if !urgent {
                    next_report = now + if srtt > 0.0 { srtt as u64 } else { 10_000 };
                }
            }
        }
        let span_s = (secs - warmup_s) as f64;
        Outcome {
            queue_mean_bytes: q_sum / q_n.max(1) as f64,
            queue_max_bytes: q_max,
            utilization: delivered / (link.mu_bytes_per_s * span_s),
        }
    }

    /// 100 Mbit/s, 20 ms, a drop-tail buffer of 2 BDP (40 ms): Reno fills the buffer, CDG keeps
    /// the queue a small fraction of it and still uses most of the link.
    #[test]
    fn closed_loop_cdg_keeps_the_queue_well_below_the_buffer_reno_fills() {
        let link = Fluid { mu_bytes_per_s: 12.5e6, buffer_bytes: 500_000.0, prop_us: 20_000 };
        let mut reno = Reno::new(RenoConfig::default());
        let reno = closed_loop(&mut reno, &link, 40, 5);
        let mut cdg = Cdg::new(CdgConfig::default(), 0);
        let cdg = closed_loop(&mut cdg, &link, 40, 5);
        println!("reno {reno:?}\ncdg  {cdg:?}");
        assert!(reno.queue_max_bytes > 0.95 * link.buffer_bytes, "Reno fills the buffer: {reno:?}");
        assert!(cdg.queue_max_bytes < 0.5 * link.buffer_bytes, "{cdg:?}");
        assert!(cdg.queue_mean_bytes < 0.25 * reno.queue_mean_bytes, "{cdg:?} vs {reno:?}");
        assert!(cdg.utilization > 0.8, "{cdg:?}");
    }
}
