//! BBR (version 1): congestion control from a model of the path's bottleneck bandwidth and
//! round-trip propagation time, driven by aggregated reports.
//!
//! Model. To a sender a path is a pipe with a bottleneck bandwidth BtlBw and a round-trip
//! propagation time RTprop; BDP = BtlBw·RTprop is the data in flight that fills it without a
//! queue. Rather than send until something is lost, BBR estimates both and sends at that operating
//! point (Cardwell et al. 2016; the model tcp_bbr.c opens with):
//!
//!   BtlBw  = max of the delivery-rate samples over the last 10 round trips
//!   RTprop = min of the RTT samples over the last 10 s
//!   pacing_rate = pacing_gain·BtlBw,   cwnd = cwnd_gain·BtlBw·RTprop + 3 TSO bursts,  at least 4 packets
//!
//! Both filters are one-sided because both noises are: a delivery rate can only understate the
//! bottleneck, an RTT can only overstate the propagation delay. The gains follow four modes:
//! - STARTUP: pacing and cwnd gain 2/ln 2 ≈ 2.885, the smallest gain that doubles the sending rate
//!   every round even though each bandwidth sample lags it by a round (and so sends what a slow
//!   start would). It ends when the pipe is full: the estimate has not grown by 25 % in 3 rounds
//!   (rounds whose report is application-limited do not count).
//! - DRAIN: pacing gain ln 2/2 ≈ 0.347, the inverse, to drain in about a round the queue STARTUP
//!   built; cwnd gain stays 2.885. It ends once in flight is down to BDP (+ 3 TSO bursts).
//! - PROBE_BW: the pacing gain cycles 1.25, 0.75, 1, 1, 1, 1, 1, 1 (probe for more bandwidth,
//!   drain what the probe queued, cruise), cwnd gain 2. A phase lasts one RTprop; the 1.25 phase
//!   also until in flight reaches its target 1.25·BDP (or a loss), and the 0.75 phase ends early
//!   once in flight is down to BDP. The cycle starts at a phase drawn from the seven other than 0.75
//!   (nothing is left to drain after DRAIN or PROBE_RTT), so flows sharing a bottleneck do not
//!   probe in step.
//! - PROBE_RTT: when no RTT sample has matched or lowered RTprop for 10 s, cwnd drops to 4 packets
//!   until 200 ms and one round have passed with that little in flight; RTprop is then fresh, the
//!   window is restored and the flow resumes PROBE_BW (STARTUP if the pipe was never full).
//!
//! Before the first bandwidth sample the flow paces at 2.885·cwnd/RTT, with the datapath's RTT or
//! 1 ms before there is one (recomputed at the first RTT sample), and uses the initial window. Until
//! the pipe is full the pacing rate only rises (an early, low sample must not slow the ramp) and
//! the window grows by the bytes delivered while it is below its target, up to the target (Linux
//! passes it by at most one ACK), and through the first initial window of data; once the pipe is
//! full it is min(cwnd + delivered, target): cut to the target at once, regrown toward it by what
//! is delivered.
//!
//! Loss (tcp_bbr.c's loss modulation). v1 does not read loss as congestion. A loss outside a
//! recovery period starts one: the window is saved and cut to what is in flight, and the round
//! restarts, as Linux restarts it. For that round, packet conservation holds the window there
//! (never below what is in flight, never above where it was); after it, the normal rules grow it
//! toward the target by what is delivered. Losses come off the window throughout. The period
//! ends when the data in flight at the loss has been cumulatively acknowledged — the kernel's
//! recovery point, measured in data as dctcp.rs measures its windows — and the saved window is
//! restored. (Conserving until the recovery point instead, which holes in the cumulative ACK can
//! put rounds away, is not Linux's rule: it kept the window flat for those rounds.)
//! A retransmission timeout saves the window, sets it to the agent's loss window (2
//! packets: Linux uses 1, the agent never goes below 2), resets STARTUP's full-pipe detector, and
//! lets the window regrow toward the target by the bytes acknowledged until the data outstanding at
//! the timeout has been acknowledged; then the saved window is restored, as Linux restores it when
//! it leaves the Loss state.
//!
//! Reports instead of ACKs:
//! - Rounds (the unit of the bandwidth filter, of full-pipe detection and of PROBE_RTT): a round
//!   that starts at the end of a report ends once the bytes delivered since reach the bytes in
//!   flight at its start (at least one MSS). That is tcp_bbr.c's "a packet sent after the round
//!   began has been delivered" without sequence numbers (dctcp.rs's window of data). Chosen over
//!   one SRTT of datapath time, which would count rounds while nothing is delivered.
//! - Delivered, as Linux's `tp->delivered` and `rs->acked_sacked` count it: each segment once,
//!   when first cumulatively or selectively acknowledged (`Report::delivered_bytes`).
//!   Rounds, window growth, packet conservation and the application-limited stretch use it; only
//!   the end of a recovery period (the recovery point) waits for the cumulative ACK. The cumulative
//!   ACK alone stands still while SACKs fill a hole and then jumps by everything SACKed behind it:
//!   on a 1 %-loss path that kept STARTUP from counting rounds for seconds, and each jump let the
//!   window out by a round's worth (15,095 retransmissions in a 5 s warm-up where Linux had 850).
//! - A report's delivery-rate sample is the fastest of its per-ACK samples
//!   (`Report::max_delivery_rate_bytes_per_s`): Linux feeds every ACK's sample to the max filter,
//!   so the report's best one is what the filter would keep of them. Each is the data delivered
//!   over the longer of the send and ACK intervals of the same packets, so that ACK compression
//!   cannot inflate it. The report's last sample alone (min(recv_rate, send_rate), used where a
//!   datapath gives no fastest sample) is one draw from those: on a 50 Mbit/s, 50 ms link with 1 %
//!   random loss, where recovery keeps the window near what is in flight, ours then settled 5–35 %
//!   below the link in some runs (bandwidth underestimated, paced lower, less in flight at the
//!   next loss), and 95–96 % of it with the fastest sample, as the kernel's BBR (95 %). A report
//!   without a rate gives no sample; a round in which no report had one gives its acknowledged
//!   bytes over its duration, so a datapath that measures no rates still yields an estimate.
//! - Application-limited samples (the report's `app_limited`, and, as Linux marks them, those
//!   taken in PROBE_RTT and until the data then in flight is acknowledged) enter the filter only if
//!   they exceed the estimate, and do not count toward full-pipe detection.
//! - The report policy is four reports per RTT (`ReportPolicy::PerRtt { rtts: 0.25 }`): a phase
//!   lasts one RTprop, and DRAIN and the 1.25 phase end on in-flight targets that a report per RTT
//!   would overshoot by up to a round; a quarter RTT bounds those errors to a quarter of a round.
//!
//! Where this differs from tcp_bbr.c:
//! - The bandwidth filter is an exact maximum over the last 10 rounds (one entry per round, at most
//!   11) in bytes/s, instead of Kathleen Nichols' three-sample approximation (filters.rs); exact is
//!   cheap at this size, and lets `scale` and `cap_rate` reach every entry. Entries age only when a
//!   sample arrives, as in Linux, so an application-limited stretch keeps the estimate it started with.
//! - The min-RTT filter is Linux's: a sample that matches or lowers RTprop, or any sample once 10 s
//!   have passed, replaces it. A report contributes its smallest RTT sample; zero RTTs are ignored.
//! - Floating point in bytes and bytes/s: no rounding of the BDP up to whole packets or of the
//!   window to an even number of them. The quantization budget is Linux's: 3 TSO bursts of about
//!   1 ms at the pacing rate (whole segments, at least 2: 6 packets at 10 Mbit/s, 12 at 50, 48 at
//!   200), plus 2 MSS in the 1.25 phase. It provisions for the end hosts' bursts (TSO, GRO),
//!   which on the eBPF datapath are Linux's own; elsewhere it is kept as Linux's allowance. The
//!   window decides the share of a deep queue, so a smaller budget cedes it to a kernel BBR.
//! - Packet conservation per report: Linux, on each ACK, takes the window down by the losses it
//!   marks and up to what is in flight plus that ACK's delivery (what was in flight before it,
//!   never more than the window): over many ACKs, the window less the losses, not below what is
//!   in flight. A report's in flight is after its last ACK, and the sender has already refilled
//!   what the report delivered; in flight + the report's delivery would count that data twice
//!   and let the window climb by a report's worth each report of the recovery (on the LTE trace
//!   ours then took 0.94 of the link from a kernel BBR). So: window − losses, at least in flight
//!   (and the report's delivery is not added at the cut either: Linux adds one ACK's).
//! - In-flight tests (end of DRAIN, of the 1.25 and 0.75 phases, PROBE_RTT's 4 packets) use the
//!   bytes in flight at the end of the report (Linux: before the ACK, projected to the next
//!   departure time, less what BtlBw delivers until then). The 1.25 phase counts, as Linux does,
//!   the TSO burst about to depart as in flight: without it the probe ran a burst deeper than
//!   Linux's and overflowed 1-BDP buffers that the kernel's probe fits.
//! - The starting phase is drawn from a SplitMix64 seeded from the `seed` parameter and the flow's
//!   creation index in its factory (as cdg.rs): reproducible, and different for each flow.
//! - The ACK-aggregation allowance (Linux 4.20 on, `extra_acked_gain`): the window target carries,
//!   on top of cwnd_gain·BDP, the most data recently delivered beyond BtlBw × the time since an
//!   aggregation epoch began (5–10 rounds, at most 100 ms of BtlBw). Linux measures it per ACK, and
//!   so does a datapath that can: BBR hands it BtlBw (`Action::ack_aggregation_bw_bytes_per_s`)
//!   and takes each report's largest per-ACK excess (`Report::extra_acked_bytes`; the eBPF
//!   datapath). Where a datapath does not measure it (libccp, the simulator) ours estimates it per
//!   report, which misses the bursts inside one interval: beside a kernel BBR on a shared 2-BDP
//!   queue that estimate was 1 packet where the kernel's window stood 4–7 above its 2·BDP
//!   (10 Mbit/s, 10 ms), and 23 where the kernel's stood 60–125 above (200 Mbit/s, 50 ms). Two BBR
//!   v1 flows on a deep queue are both window-limited, so the window decides their shares (README
//!   "Fidelity").
//! - Not implemented: the long-term (policer) bandwidth estimate lt_bw, the restart after idle
//!   (reports do not say when an idle flow resumes sending) and TSO autosizing.
//!
//! Seeded flows (hot swap, adoption) start as Linux starts BBR on a live connection: in STARTUP
//! from the seeded window, pacing at 2.885·cwnd/srtt, with the seed's minimum RTT as RTprop.
//!
//! Embedding (the Annulus wrapper): `scale(f)` multiplies every filter entry, the full-pipe
//! reference, the pacing rate and the window (and the window saved for restoring) by f;
//! `cap_rate(c)` caps every entry at c, the pacing rate at pacing_gain·c and the window at its
//! target for c. Neither raises anything.
//!
//! In the agent this is BBR v1-like on coarse reports: Linux's tcp_bbr remains the reference for
//! real flows.
//!
//! References: N. Cardwell, Y. Cheng, C. S. Gunn, S. Hassas Yeganeh, V. Jacobson, "BBR:
//! Congestion-Based Congestion Control", ACM Queue 14(5), 2016;
//! draft-cardwell-iccrg-bbr-congestion-control-00 (2017). Linux net/ipv4/tcp_bbr.c (v1) was read
//! for its behaviour only; this is an independent implementation.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand_xoshiro::rand_core::{Rng, SeedableRng};

use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Pacing, Param, Report, ReportPolicy,
    StateVar, MIN_CWND_PKTS,
};

/// STARTUP's pacing and cwnd gain, 2/ln 2 ≈ 2.885, dimensionless (tcp_bbr.c: 2885/1000).
pub const HIGH_GAIN: f64 = 2.0 / std::f64::consts::LN_2;
/// PROBE_BW's cwnd gain, dimensionless (tcp_bbr.c: 2, which tolerates delayed and stretched ACKs).
pub const CWND_GAIN: f64 = 2.0;
/// PROBE_BW's pacing gains, one phase each, in order (tcp_bbr.c).
pub const PACING_GAIN_CYCLE: [f64; CYCLE_LEN] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Phases of the PROBE_BW cycle.
pub const CYCLE_LEN: usize = 8;
/// The phase of the cycle that drains; a cycle never starts there.
const DRAIN_PHASE: usize = 1;
/// The bandwidth filter's window, rounds (tcp_bbr.c: CYCLE_LEN + 2 = 10).
pub const BW_WINDOW_ROUNDS: u64 = 10;
/// The min-RTT filter's window, µs (tcp_bbr.c: 10 s).
pub const MIN_RTT_WINDOW_US: u64 = 10_000_000;
/// Shortest stay in PROBE_RTT at the minimum window, µs (tcp_bbr.c: 200 ms, ≈ 2 % of 10 s).
pub const PROBE_RTT_US: u64 = 200_000;
/// The smallest window BBR aims for, packets: two outstanding pairs under delayed ACKs (tcp_bbr.c);
/// also PROBE_RTT's window.
pub const MIN_CWND_TARGET_PKTS: f64 = 4.0;
/// The window beyond the BDP for full-sized bursts in the end hosts (qdisc, TSO engine, receiver's
/// GRO) is this many TSO bursts (tcp_bbr.c's bbr_quantization_budget: 3 × bbr_tso_segs_goal).
const QUANTIZATION_BUDGET_TSO_BURSTS: f64 = 3.0;
/// A TSO burst carries what the pacing rate sends in 2^-10 s (≈ 1 ms; tcp_bbr.c: sk_pacing_rate >>
/// sk_pacing_shift, whose default is 10), s.
const TSO_BURST_S: f64 = 1.0 / 1024.0;
/// …at most one legacy GSO frame, bytes (tcp_bbr.c: GSO_LEGACY_MAX_SIZE − 1 − MAX_TCP_HEADER, the
/// header allowance being 320 B in Debian's x86-64 kernels; it binds only above ~530 Mbit/s)…
const TSO_BURST_MAX_BYTES: f64 = 65_536.0 - 1.0 - 320.0;
/// …and at most this many segments (tcp_bbr.c: 0x7F)…
const TSO_BURST_MAX_SEGS: f64 = 127.0;
/// …and at least 2 segments…
const TSO_BURST_MIN_SEGS: f64 = 2.0;
/// …or 1 when pacing below this rate, bytes/s (tcp_bbr.c's bbr_min_tso_segs: bbr_min_tso_rate
/// 1.2 Mbit/s).
const TSO_BURST_ONE_SEG_BELOW_BYTES_PER_S: f64 = 1_200_000.0 / 8.0;
/// Extra window in the 1.25 phase so that probing raises in flight above the BDP even when the BDP
/// is a few packets, packets (tcp_bbr.c).
const PROBE_PHASE_EXTRA_PKTS: f64 = 2.0;
/// The pipe is full when the estimate has grown by less than this factor (tcp_bbr.c: 1.25)…
pub const FULL_BW_GROWTH: f64 = 1.25;
/// …in this many consecutive rounds (tcp_bbr.c: 3).
pub const FULL_BW_ROUNDS: u32 = 3;
/// Pace this fraction below gain·BtlBw, dimensionless (tcp_bbr.c: 1 %; the estimate errs high
/// with the max filter, so cruising slightly below it keeps a queue from building).
pub const PACING_MARGIN: f64 = 0.01;
/// The RTT the initial pacing rate assumes before the flow has one, µs (tcp_bbr.c: 1 ms).
const DEFAULT_INITIAL_RTT_US: u64 = 1_000;
/// ACK aggregation (tcp_bbr.c): the excess-delivery max filter spans two windows of this many
/// rounds (5–10 rounds in all).
const EXTRA_ACKED_WIN_ROUNDS: u32 = 5;
/// The window allowance for ACK aggregation is at most BtlBw times this, µs (tcp_bbr.c: 100 ms).
const EXTRA_ACKED_MAX_US: f64 = 100_000.0;
/// An aggregation epoch restarts once it has counted this many packets (tcp_bbr.c: 2^20), and its
/// count never exceeds 0xFFFFF packets.
const ACK_EPOCH_RESET_PKTS: f64 = 1_048_576.0;
const ACK_EPOCH_MAX_PKTS: f64 = ACK_EPOCH_RESET_PKTS - 1.0;
/// One report per this many RTTs (see the module comment).
const REPORT_RTTS: f64 = 0.25;
/// Keeps the pacing rate positive (the controller refuses zero) after extreme scaling or capping,
/// bytes/s; the controller's own floor (`Limits::min_pacing_rate_bytes_per_s`) is far above it.
const MIN_PACING_RATE_BYTES_PER_S: f64 = 1.0;
/// Microseconds per second.
const US_PER_S: f64 = 1e6;
/// Mixes a flow's creation index into the seed (SplitMix64's output-mixer constant, as cdg.rs).
const FLOW_INDEX_MIX: u64 = 0xD1B5_4A32_D192_ED03;

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "bbr",
    summary: "BBR v1-like in the agent: pace at the max delivery rate over 10 rounds, cwnd 2 BDP with the 10 s min RTT, STARTUP/DRAIN/PROBE_BW/PROBE_RTT; kernel BBR remains the reference on real flows",
    reference: "Cardwell et al., BBR: Congestion-Based Congestion Control, ACM Queue 2016; draft-cardwell-iccrg-bbr-congestion-control-00; Linux tcp_bbr.c",
    params: BbrParams::PARAMS,
    build: |p| Ok(Arc::new(BbrFactory::new(BbrConfig::from(&BbrParams::from_params(p)?)))),
};

declare_params! {
    /// BBR's parameters, as declared; [`BbrConfig`] is what they configure (in µs).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct BbrParams {
        pub high_gain: f64 = Param::float(
            HIGH_GAIN,
            Bound::Exclusive(1.0),
            Bound::Inclusive(10.0),
            "",
            "STARTUP's pacing and cwnd gain; DRAIN paces at its inverse (tcp_bbr.c: 2/ln 2 = 2.885, the smallest gain that doubles the rate every round)",
        ),
        pub cwnd_gain: f64 = Param::float(
            CWND_GAIN,
            Bound::Inclusive(1.0),
            Bound::Inclusive(10.0),
            "",
            "PROBE_BW's window as a multiple of the BDP (tcp_bbr.c: 2)",
        ),
        pub bw_window_rounds: u64 = Param::int(
            BW_WINDOW_ROUNDS as i64,
            1,
            1000,
            "rounds",
            "window of the bottleneck-bandwidth max filter (tcp_bbr.c: 10 round trips)",
        ),
        pub min_rtt_window_s: f64 = Param::float(
            MIN_RTT_WINDOW_US as f64 / US_PER_S,
            Bound::Exclusive(0.0),
            Bound::Inclusive(3600.0),
            "s",
            "window of the min-RTT filter; PROBE_RTT when it passes without a matching or lower RTT (tcp_bbr.c: 10 s)",
        ),
        pub probe_rtt_ms: f64 = Param::float(
            PROBE_RTT_US as f64 / 1e3,
            Bound::Inclusive(0.0),
            Bound::Inclusive(10_000.0),
            "ms",
            "shortest stay in PROBE_RTT at 4 packets (and at least one round); 0 = never probe RTT (tcp_bbr.c: 200 ms)",
        ),
        pub pacing_margin: f64 = Param::float(
            PACING_MARGIN,
            Bound::Inclusive(0.0),
            Bound::Exclusive(1.0),
            "",
            "pace this fraction below pacing_gain·bandwidth (tcp_bbr.c: 0.01)",
        ),
        pub extra_acked_gain: f64 = Param::float(
            1.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(10.0),
            "",
            "window allowance for ACK aggregation, as a multiple of the recent excess delivery over BtlBw (tcp_bbr.c since Linux 4.20: 1; 0 = none, BBR as published in 2016)",
        ),
        pub aggregation_per_ack: bool = Param::bool(
            true,
            "take the ACK-aggregation excess from the datapath's per-ACK measurement where it has one, as tcp_bbr.c measures it (false: estimate it per report everywhere, ours before 2026-12-03)",
        ),
        pub seed: u64 = Param::int(0, 0, i64::MAX, "", "seed of the PROBE_BW starting-phase draws (mixed with the flow's creation index)"),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbrConfig {
    pub high_gain: f64,
    pub cwnd_gain: f64,
    pub bw_window_rounds: u64,
    pub min_rtt_window_us: u64,
    /// 0: PROBE_RTT is never entered.
    pub probe_rtt_us: u64,
    pub pacing_margin: f64,
    /// The window allowance for ACK aggregation over the recent excess delivery (0: none).
    pub extra_acked_gain: f64,
    /// Ask the datapath to measure the aggregation excess per ACK, and use it where it does.
    pub aggregation_per_ack: bool,
    /// Seeds the PROBE_BW starting-phase draws. The registry's factory mixes each flow's creation
    /// index into it; an embedder that builds several flows with `Bbr::new` should vary it itself,
    /// or its flows will probe in step.
    pub seed: u64,
    pub init_cwnd_pkts: f64,
}

impl From<&BbrParams> for BbrConfig {
    fn from(p: &BbrParams) -> Self {
        BbrConfig {
            high_gain: p.high_gain,
            cwnd_gain: p.cwnd_gain,
            bw_window_rounds: p.bw_window_rounds,
            min_rtt_window_us: (p.min_rtt_window_s * US_PER_S) as u64,
            probe_rtt_us: (p.probe_rtt_ms * 1e3) as u64,
            pacing_margin: p.pacing_margin,
            extra_acked_gain: p.extra_acked_gain,
            aggregation_per_ack: p.aggregation_per_ack,
            seed: p.seed,
            init_cwnd_pkts: p.init_cwnd_pkts,
        }
    }
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig::from(&BbrParams::default())
    }
}

/// Builds BBR flows, numbering them so that each draws its own starting phases.
#[derive(Debug)]
pub struct BbrFactory {
    cfg: BbrConfig,
    flows: AtomicU64,
}

impl BbrFactory {
    pub fn new(cfg: BbrConfig) -> Self {
        BbrFactory { cfg, flows: AtomicU64::new(0) }
    }
}

impl AlgorithmFactory for BbrFactory {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        let index = self.flows.fetch_add(1, Ordering::Relaxed);
        Box::new(Bbr::new(BbrConfig { seed: self.cfg.seed ^ index.wrapping_mul(FLOW_INDEX_MIX), ..self.cfg }))
    }
}

/// BBR's state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

impl Mode {
    /// The mode as a number for `state()`: 0 STARTUP, 1 DRAIN, 2 PROBE_BW, 3 PROBE_RTT.
    fn code(self) -> f64 {
        match self {
            Mode::Startup => 0.0,
            Mode::Drain => 1.0,
            Mode::ProbeBw => 2.0,
            Mode::ProbeRtt => 3.0,
        }
    }
}

/// Exact windowed maximum over rounds: entries (round, value) with strictly increasing rounds and
/// non-increasing values, so the front is the maximum. A sample evicts the entries it dominates,
/// and entries more than `window` rounds older than the newest sample leave when it arrives.
#[derive(Debug, Clone, PartialEq)]
struct RoundMax {
    window: u64,
    entries: VecDeque<(u64, f64)>,
}

impl RoundMax {
    fn new(window: u64) -> Self {
        RoundMax { window, entries: VecDeque::with_capacity(window.min(64) as usize + 2) }
    }

    /// The maximum, 0 before any sample.
    fn get(&self) -> f64 {
        self.entries.front().map_or(0.0, |e| e.1)
    }

    fn update(&mut self, round: u64, v: f64) {
        while self.entries.front().is_some_and(|&(r, _)| round.saturating_sub(r) > self.window) {
            self.entries.pop_front();
        }
        if self.entries.back().is_some_and(|&(r, x)| r == round && x >= v) {
            return;
        }
        while self.entries.back().is_some_and(|&(_, x)| x <= v) {
            self.entries.pop_back();
        }
        self.entries.push_back((round, v));
    }

    /// Multiplies every entry (order is kept).
    fn scale(&mut self, f: f64) {
        self.entries.iter_mut().for_each(|e| e.1 *= f);
    }

    /// Caps every entry (values stay non-increasing).
    fn cap(&mut self, max: f64) {
        self.entries.iter_mut().for_each(|e| e.1 = e.1.min(max));
    }
}

/// A loss-recovery period and what ends it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Recovery {
    /// Bytes still to be cumulatively acknowledged before the period ends.
    left_bytes: f64,
    /// Packet conservation: the first round of a recovery entered by a loss (tcp_bbr.c clears
    /// it at the next round start); never after a retransmission timeout.
    conserving: bool,
}

/// How much more data recent intervals delivered than BtlBw accounts for (tcp_bbr.c's
/// bbr_update_ack_aggregation): an epoch starts when deliveries fall behind BtlBw × the time
/// since the epoch began, and the excess over that product is max-filtered over two windows of
/// `EXTRA_ACKED_WIN_ROUNDS` rounds. The excess is the datapath's per-ACK measurement when the
/// report carries one; otherwise it is estimated per report: a report's delivery is spread over
/// its interval, so an epoch that starts with a report starts at the beginning of that report's
/// interval, and aggregation inside one interval is not seen.
#[derive(Debug, Clone, Default, PartialEq)]
struct AckAggregation {
    epoch_start_us: u64,
    epoch_delivered_bytes: f64,
    /// The two windows' maxima, bytes.
    extra_bytes: [f64; 2],
    window_rounds: u32,
    window_idx: usize,
}

/// Where a report's aggregation excess comes from.
#[derive(Debug, Clone, Copy)]
enum Excess {
    /// The datapath's per-ACK measurement, bytes.
    Measured(f64),
    /// Estimated from the report's delivery against BtlBw `bw` (bytes/s), packets of `mss` bytes.
    Estimated { bw: f64, mss: f64 },
}

impl AckAggregation {
    /// One report: `delivered` bytes over its interval; the excess is never counted above
    /// `cwnd` (bytes).
    fn update(&mut self, r: &Report, round_start: bool, delivered: f64, excess: Excess, cwnd: f64) {
        if delivered <= 0.0 {
            return;
        }
        if round_start {
            self.window_rounds += 1;
            if self.window_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                self.window_rounds = 0;
                self.window_idx ^= 1;
                self.extra_bytes[self.window_idx] = 0.0;
            }
        }
        let (bw, mss) = match excess {
            Excess::Measured(bytes) => {
                let slot = &mut self.extra_bytes[self.window_idx];
                *slot = slot.max(bytes.min(cwnd));
                return;
            }
            Excess::Estimated { bw, mss } => (bw, mss),
        };
        let expected_since = |start_us: u64| bw * r.now_us.saturating_sub(start_us) as f64 / US_PER_S;
        let mut expected = expected_since(self.epoch_start_us);
        if self.epoch_delivered_bytes <= expected || self.epoch_delivered_bytes + delivered >= ACK_EPOCH_RESET_PKTS * mss {
            self.epoch_start_us = r.now_us.saturating_sub(r.interval_us);
            self.epoch_delivered_bytes = 0.0;
            expected = expected_since(self.epoch_start_us);
        }
        self.epoch_delivered_bytes = (self.epoch_delivered_bytes + delivered).min(ACK_EPOCH_MAX_PKTS * mss);
        let extra = (self.epoch_delivered_bytes - expected).clamp(0.0, cwnd);
        let slot = &mut self.extra_bytes[self.window_idx];
        *slot = slot.max(extra);
    }

    /// The most recent 5–10 rounds' maximum, bytes.
    fn get(&self) -> f64 {
        self.extra_bytes[0].max(self.extra_bytes[1])
    }

    fn scale(&mut self, f: f64) {
        self.extra_bytes.iter_mut().for_each(|x| *x *= f);
        self.epoch_delivered_bytes *= f;
    }
}

#[derive(Debug, Clone)]
pub struct Bbr {
    cfg: BbrConfig,
    rng: rand_xoshiro::SplitMix64,
    mss: f64,
    /// The configured initial window, bytes: the target before any RTT, and how much data is
    /// delivered before STARTUP stops growing a window that is above its target.
    init_cwnd_bytes: f64,
    /// False until the datapath's clock is known (a FlowStart at 0 means it has not said yet):
    /// the first report then starts the timers.
    clock_known: bool,
    mode: Mode,

    /// BtlBw: the max filter of delivery-rate samples, bytes/s.
    bw: RoundMax,
    /// Rounds counted since the flow started.
    round: u64,
    /// This report ended a round.
    round_start: bool,
    /// Bytes still to be acknowledged before the current round ends.
    round_left_bytes: f64,
    round_started_us: u64,
    round_acked_bytes: f64,
    /// Some report in the current round carried a delivery rate.
    round_had_rate: bool,
    /// Bytes acknowledged since the flow started.
    delivered_bytes: f64,
    /// Samples are application-limited until this many more bytes are acknowledged (PROBE_RTT).
    app_limited_left_bytes: f64,

    /// RTprop, µs; `None` before the first RTT sample.
    min_rtt_us: Option<u64>,
    /// When RTprop was last set (or confirmed), µs.
    min_rtt_stamp_us: u64,

    /// The estimate at the last round it grew by 25 %, bytes/s, and the rounds since.
    full_bw: f64,
    full_bw_count: u32,
    full_bw_reached: bool,

    cycle_idx: usize,
    cycle_start_us: u64,
    /// When PROBE_RTT may end (set once in flight is down to 4 packets).
    probe_rtt_done_us: Option<u64>,
    probe_rtt_round_done: bool,

    pacing_gain: f64,
    cwnd_gain: f64,
    /// The pacing rate, bytes/s.
    pacing_rate: f64,
    /// The initial pacing rate came from a real RTT (not the 1 ms default).
    has_seen_rtt: bool,
    /// The window, bytes.
    cwnd: f64,
    /// The window saved on entering loss recovery or PROBE_RTT, restored after, bytes.
    prior_cwnd: f64,
    recovery: Option<Recovery>,
    /// Bytes in flight at the end of the previous report.
    last_inflight_bytes: f64,
    ack_aggregation: AckAggregation,
}

impl Bbr {
    pub fn new(cfg: BbrConfig) -> Self {
        // In bytes of a 1-byte MSS until `init` says what the MSS is.
        let init_cwnd_bytes = cfg.init_cwnd_pkts;
        Bbr {
            cfg,
            rng: rand_xoshiro::SplitMix64::seed_from_u64(cfg.seed),
            mss: 1.0,
            init_cwnd_bytes,
            clock_known: false,
            mode: Mode::Startup,
            bw: RoundMax::new(cfg.bw_window_rounds),
            round: 0,
            round_start: false,
            round_left_bytes: init_cwnd_bytes,
            round_started_us: 0,
            round_acked_bytes: 0.0,
            round_had_rate: false,
            delivered_bytes: 0.0,
            app_limited_left_bytes: 0.0,
            min_rtt_us: None,
            min_rtt_stamp_us: 0,
            full_bw: 0.0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_start_us: 0,
            probe_rtt_done_us: None,
            probe_rtt_round_done: false,
            pacing_gain: cfg.high_gain,
            cwnd_gain: cfg.high_gain,
            pacing_rate: cfg.high_gain * init_cwnd_bytes * US_PER_S / DEFAULT_INITIAL_RTT_US as f64 * (1.0 - cfg.pacing_margin),
            has_seen_rtt: false,
            cwnd: init_cwnd_bytes.max(MIN_CWND_PKTS),
            prior_cwnd: 0.0,
            recovery: None,
            last_inflight_bytes: 0.0,
            ack_aggregation: AckAggregation::default(),
        }
    }

    /// Current pacing rate, bytes/s (pacing_gain × bandwidth estimate, or the initial rate).
    /// Less the pacing margin (1 % by default, as tcp_bbr.c); until the pipe is full it never falls.
    pub fn pacing_rate_bytes_per_s(&self) -> f64 {
        self.pacing_rate
    }

    /// The current window, bytes.
    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd
    }

    /// The current mode of the state machine.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Proportional drop: scales the bandwidth estimate (every max-filter entry) and cwnd by f in (0,1].
    /// The pacing rate, STARTUP's full-pipe reference (a drop is not evidence that the pipe is
    /// full) and the window saved for restoring after recovery or PROBE_RTT scale too. The window
    /// does not go below 4 packets (or where it already is). f outside (0, 1] is clamped to 1;
    /// a non-finite or non-positive f changes nothing.
    pub fn scale(&mut self, f: f64) {
        if f.is_nan() || f <= 0.0 {
            return;
        }
        let f = f.min(1.0);
        self.bw.scale(f);
        self.ack_aggregation.scale(f);
        self.full_bw *= f;
        self.pacing_rate = (self.pacing_rate * f).max(MIN_PACING_RATE_BYTES_PER_S);
        let floor = self.cwnd.min(self.min_target_bytes());
        self.cwnd = (self.cwnd * f).max(floor);
        self.prior_cwnd *= f;
    }

    /// Caps the bandwidth estimate (every max-filter entry) so the *base* rate (gain 1) does not exceed max_bytes_per_s, and cwnd accordingly; never raises anything.
    /// The pacing rate is capped at pacing_gain·max (less the margin) and the window (and the
    /// window saved for restoring) at its target at that rate, cwnd_gain·max·RTprop + the
    /// quantization budget, not below 4 packets; without an RTprop no rate converts to a window
    /// and the window is left alone. A non-positive or NaN cap changes nothing.
    pub fn cap_rate(&mut self, max_bytes_per_s: f64) {
        if max_bytes_per_s.is_nan() || max_bytes_per_s <= 0.0 {
            return;
        }
        self.bw.cap(max_bytes_per_s);
        self.full_bw = self.full_bw.min(max_bytes_per_s);
        let paced = self.pacing_gain * max_bytes_per_s * (1.0 - self.cfg.pacing_margin);
        self.pacing_rate = self.pacing_rate.min(paced.max(MIN_PACING_RATE_BYTES_PER_S));
        if self.min_rtt_us.is_some() {
            let target = (self.inflight_target(max_bytes_per_s, self.cwnd_gain) + self.ack_aggregation_allowance())
                .max(self.min_target_bytes());
            self.cwnd = self.cwnd.min(target);
            self.prior_cwnd = self.prior_cwnd.min(target);
        }
    }

    fn min_target_bytes(&self) -> f64 {
        MIN_CWND_TARGET_PKTS * self.mss
    }

    /// gain·BtlBw·RTprop, bytes; the initial window before there is an RTT (tcp_bbr.c).
    fn bdp_bytes(&self, bw: f64, gain: f64) -> f64 {
        match self.min_rtt_us {
            Some(rtt) => gain * bw * rtt as f64 / US_PER_S,
            None => self.init_cwnd_bytes,
        }
    }

    /// The in-flight target at `gain`: the BDP plus the quantization budget, bytes.
    fn inflight_target(&self, bw: f64, gain: f64) -> f64 {
        let mut budget = QUANTIZATION_BUDGET_TSO_BURSTS * self.tso_burst_segs();
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            budget += PROBE_PHASE_EXTRA_PKTS;
        }
        self.bdp_bytes(bw, gain) + budget * self.mss
    }

    /// Whole segments per TSO burst at the current pacing rate (tcp_bbr.c's bbr_tso_segs_goal):
    /// 2 up to ~24 Mbit/s at a 1448-byte MSS, 4 at 50 Mbit/s, 16 at 200 Mbit/s.
    fn tso_burst_segs(&self) -> f64 {
        let min_segs = if self.pacing_rate < TSO_BURST_ONE_SEG_BELOW_BYTES_PER_S { 1.0 } else { TSO_BURST_MIN_SEGS };
        let bytes = (self.pacing_rate * TSO_BURST_S).min(TSO_BURST_MAX_BYTES);
        (bytes / self.mss).floor().max(min_segs).min(TSO_BURST_MAX_SEGS)
    }

    /// The window beyond the BDP for ACK aggregation once the pipe is full, bytes (tcp_bbr.c's
    /// bbr_ack_aggregation_cwnd): extra_acked_gain × the recent excess, at most 100 ms at BtlBw.
    fn ack_aggregation_allowance(&self) -> f64 {
        if !self.full_bw_reached || self.cfg.extra_acked_gain <= 0.0 {
            return 0.0;
        }
        let max = self.bw.get() * EXTRA_ACKED_MAX_US / US_PER_S;
        (self.cfg.extra_acked_gain * self.ack_aggregation.get()).min(max)
    }

    /// high_gain·cwnd/RTT, less the margin: the pacing rate before a bandwidth sample.
    fn initial_pacing_rate(&self, rtt_us: u64) -> f64 {
        self.cfg.high_gain * self.cwnd * US_PER_S / rtt_us.max(1) as f64 * (1.0 - self.cfg.pacing_margin)
    }

    fn restart_round(&mut self, now_us: u64, inflight_bytes: f64) {
        self.round_left_bytes = inflight_bytes.max(self.mss);
        self.round_started_us = now_us;
        self.round_acked_bytes = 0.0;
        self.round_had_rate = false;
    }

    /// Keeps the last good window before a temporary cut (tcp_bbr.c's bbr_save_cwnd): a window
    /// already cut by recovery or PROBE_RTT only raises the saved one.
    fn save_cwnd(&mut self) {
        if self.recovery.is_none() && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    fn enter_probe_bw(&mut self, now_us: u64) {
        self.mode = Mode::ProbeBw;
        // One of the CYCLE_LEN − 1 phases other than the draining one, uniformly.
        let draw = ((self.rng.next_u64() >> 32) * (CYCLE_LEN as u64 - 1)) >> 32;
        self.cycle_idx = (DRAIN_PHASE + 1 + draw as usize) % CYCLE_LEN;
        self.cycle_start_us = now_us;
    }

    /// Counts rounds and returns the round's own rate sample when it ends without any report's.
    fn update_round(&mut self, r: &Report, delivered: f64) -> Option<f64> {
        self.round_start = false;
        self.round_acked_bytes += delivered;
        self.round_left_bytes -= delivered;
        self.round_had_rate |= Self::rate_sample(r).is_some();
        if delivered <= 0.0 || self.round_left_bytes > 0.0 {
            return None;
        }
        self.round += 1;
        self.round_start = true;
        let elapsed_us = r.now_us.saturating_sub(self.round_started_us);
        let sample = (!self.round_had_rate && elapsed_us > 0).then(|| self.round_acked_bytes * US_PER_S / elapsed_us as f64);
        self.restart_round(r.now_us, r.inflight_bytes as f64);
        sample
    }

    /// The report's delivery-rate sample (see the module comment).
    fn rate_sample(r: &Report) -> Option<f64> {
        if let Some(max) = r.max_delivery_rate_bytes_per_s.filter(|&v| v > 0) {
            return Some(max as f64);
        }
        let recv = r.recv_rate_bytes_per_s.filter(|&v| v > 0)? as f64;
        Some(r.send_rate_bytes_per_s.filter(|&v| v > 0).map_or(recv, |s| recv.min(s as f64)))
    }

    fn update_bw(&mut self, samples: [Option<f64>; 2], app_limited: bool) {
        for v in samples.into_iter().flatten() {
            if !app_limited || v >= self.bw.get() {
                self.bw.update(self.round, v);
            }
        }
    }

    fn update_cycle_phase(&mut self, r: &Report) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let now = r.now_us;
        let inflight = r.inflight_bytes as f64;
        let full_length = self.min_rtt_us.is_some_and(|rtt| now.saturating_sub(self.cycle_start_us) > rtt);
        let gain = PACING_GAIN_CYCLE[self.cycle_idx];
        let bw = self.bw.get();
        let next = if gain > 1.0 {
            // Probe until in flight, with the burst about to depart, reaches gain·BDP, which may
            // take longer than RTprop; not if packets are lost (a shallow buffer may not hold
            // that much).
            let departing = self.tso_burst_segs() * self.mss;
            full_length && (r.lost_pkts > 0 || inflight + departing >= self.inflight_target(bw, gain))
        } else if gain < 1.0 {
            // Drain until in flight is back at the BDP: persisting would leave the pipe short.
            full_length || inflight <= self.inflight_target(bw, 1.0)
        } else {
            full_length
        };
        if next {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE_LEN;
            self.cycle_start_us = now;
        }
    }

    fn check_full_bw(&mut self, app_limited: bool) {
        if self.full_bw_reached || !self.round_start || app_limited {
            return;
        }
        let bw = self.bw.get();
        if bw >= self.full_bw * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, r: &Report) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && r.inflight_bytes as f64 <= self.inflight_target(self.bw.get(), 1.0) {
            self.enter_probe_bw(r.now_us);
        }
    }

    fn update_min_rtt(&mut self, r: &Report) {
        let now = r.now_us;
        let inflight = r.inflight_bytes as f64;
        let expired = now > self.min_rtt_stamp_us.saturating_add(self.cfg.min_rtt_window_us);
        if let Some(sample) = r.rtt.map(|s| s.min_us).filter(|&us| us > 0) {
            if self.min_rtt_us.is_none_or(|m| sample <= m) || expired {
                self.min_rtt_us = Some(sample);
                self.min_rtt_stamp_us = now;
            }
        }
        if self.cfg.probe_rtt_us > 0 && expired && self.mode != Mode::ProbeRtt {
            self.save_cwnd();
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_done_us = None;
        }
        if self.mode != Mode::ProbeRtt {
            return;
        }
        // What is sent now is sent at 4 packets per round: not a measure of the path.
        self.app_limited_left_bytes = inflight.max(self.mss);
        match self.probe_rtt_done_us {
            None if inflight <= self.min_target_bytes() => {
                self.probe_rtt_done_us = Some(now.saturating_add(self.cfg.probe_rtt_us));
                self.probe_rtt_round_done = false;
                self.restart_round(now, inflight);
            }
            None => {}
            Some(done_us) => {
                self.probe_rtt_round_done |= self.round_start;
                if self.probe_rtt_round_done && now >= done_us {
                    self.min_rtt_stamp_us = now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    self.probe_rtt_done_us = None;
                    if self.full_bw_reached {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (self.cfg.high_gain, self.cfg.high_gain),
            Mode::Drain => (1.0 / self.cfg.high_gain, self.cfg.high_gain),
            Mode::ProbeBw => (PACING_GAIN_CYCLE[self.cycle_idx], self.cfg.cwnd_gain),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    fn update_pacing(&mut self, r: &Report) {
        if !self.has_seen_rtt {
            if let Some(rtt) = r.rtt {
                let us = if rtt.srtt_us > 0 { rtt.srtt_us } else { rtt.min_us };
                if us > 0 {
                    self.has_seen_rtt = true;
                    self.pacing_rate = self.initial_pacing_rate(us);
                }
            }
        }
        let bw = self.bw.get();
        if bw > 0.0 {
            let rate = self.pacing_gain * bw * (1.0 - self.cfg.pacing_margin);
            if self.full_bw_reached || rate > self.pacing_rate {
                self.pacing_rate = rate;
            }
        }
        self.pacing_rate = self.pacing_rate.max(MIN_PACING_RATE_BYTES_PER_S);
    }

    /// Loss recovery, then the window toward its target (tcp_bbr.c's bbr_set_cwnd). `delivered`
    /// is the report's newly delivered bytes; the recovery point is reached on cumulative ACKs.
    fn update_cwnd(&mut self, r: &Report, delivered: f64) {
        let mss = self.mss;
        let inflight = r.inflight_bytes as f64;
        let lost = r.lost_pkts as f64 * mss;
        let mut conserving = false;
        if r.timeouts > 0 {
            // The loss window is set; growth starts with the next report.
            conserving = true;
        } else if let Some(rec) = self.recovery.as_mut() {
            let before = self.cwnd;
            // Linux takes what each ACK marks lost off the window, conserving or not.
            self.cwnd = (before - lost).max(mss);
            rec.left_bytes -= r.acked_bytes as f64;
            rec.conserving &= !self.round_start;
            if rec.left_bytes <= 0.0 {
                self.recovery = None;
                self.cwnd = self.cwnd.max(self.prior_cwnd);
            } else if rec.conserving {
                conserving = true;
                self.cwnd = self.cwnd.max(inflight.min(before));
            }
        } else if r.lost_pkts > 0 {
            self.save_cwnd();
            self.recovery = Some(Recovery { left_bytes: inflight.max(mss), conserving: true });
            self.restart_round(r.now_us, inflight);
            // Cut what application pauses, TSO deferral and the like left unused; conserve after.
            self.cwnd = inflight.min(self.cwnd);
            conserving = true;
        }
        if delivered > 0.0 && !conserving {
            let target = self.inflight_target(self.bw.get(), self.cwnd_gain) + self.ack_aggregation_allowance();
            if self.full_bw_reached {
                self.cwnd = (self.cwnd + delivered).min(target);
            } else if self.delivered_bytes < self.init_cwnd_bytes {
                self.cwnd += delivered;
            } else if self.cwnd < target {
                // Linux grows per ACK while below the target, so it passes the target by one
                // ACK at most; a report's worth past it would be a burst nobody asked for.
                self.cwnd = (self.cwnd + delivered).min(target);
            }
            self.cwnd = self.cwnd.max(self.min_target_bytes());
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_target_bytes());
        }
        self.cwnd = self.cwnd.max(MIN_CWND_PKTS * mss);
    }

    fn on_timeout(&mut self, r: &Report) {
        self.save_cwnd();
        // Everything outstanding at the timeout must be acknowledged before the Loss state ends.
        let outstanding = (r.inflight_bytes as f64).max(self.last_inflight_bytes).max(self.mss);
        self.recovery = Some(Recovery { left_bytes: outstanding, conserving: false });
        self.full_bw = 0.0;
        self.full_bw_count = 0;
        self.cwnd = MIN_CWND_PKTS * self.mss;
    }

    fn action(&self) -> Action {
        let a = Action::cwnd(self.cwnd).with_pacing(Pacing::BytesPerSec(self.pacing_rate));
        let bw = self.bw.get();
        if self.cfg.extra_acked_gain > 0.0 && self.cfg.aggregation_per_ack && bw > 0.0 {
            a.with_ack_aggregation_bw(bw)
        } else {
            a
        }
    }
}

impl Algorithm for Bbr {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.init_cwnd_bytes = self.cfg.init_cwnd_pkts * self.mss;
        let datapath_init = start.init_cwnd_bytes as f64;
        let seed = start.seed.as_ref();
        self.cwnd = match seed {
            Some(s) => s.cwnd_bytes as f64,
            None if datapath_init > 0.0 => datapath_init,
            None => self.init_cwnd_bytes,
        }
        .max(MIN_CWND_PKTS * self.mss);
        let now = start.now_us;
        self.clock_known = now > 0;
        self.min_rtt_us = seed.and_then(|s| s.min_rtt_us).filter(|&us| us > 0);
        self.min_rtt_stamp_us = now;
        self.cycle_start_us = now;
        // The first round is the data the flow starts with in flight.
        let flight = seed.and_then(|s| s.last_report.as_ref()).map_or(self.cwnd, |r| r.inflight_bytes as f64);
        self.restart_round(now, flight);
        self.last_inflight_bytes = flight;
        let rtt_us = seed.and_then(|s| s.srtt_us).filter(|&us| us > 0).or(self.min_rtt_us);
        self.has_seen_rtt = rtt_us.is_some();
        self.pacing_rate = self.initial_pacing_rate(rtt_us.unwrap_or(DEFAULT_INITIAL_RTT_US));
        self.mode = Mode::Startup;
        self.update_gains();
        self.action().with_report(ReportPolicy::PerRtt { rtts: REPORT_RTTS })
    }

    fn on_report(&mut self, r: &Report) -> Action {
        if r.mss_bytes > 0 {
            self.mss = r.mss();
        }
        if !self.clock_known {
            self.clock_known = true;
            self.min_rtt_stamp_us = r.now_us;
            self.cycle_start_us = r.now_us;
            self.round_started_us = r.now_us;
        }
        let delivered = r.delivered_bytes();
        self.delivered_bytes += delivered;
        if r.timeouts > 0 {
            self.on_timeout(r);
        }
        // The model (tcp_bbr.c's bbr_update_model), then the pacing rate and the window.
        let app_limited = r.app_limited || self.mode == Mode::ProbeRtt || self.app_limited_left_bytes > 0.0;
        self.app_limited_left_bytes = (self.app_limited_left_bytes - delivered).max(0.0);
        let round_sample = self.update_round(r, delivered);
        self.update_bw([Self::rate_sample(r), round_sample], app_limited);
        if self.cfg.extra_acked_gain > 0.0 {
            let (bw, cwnd) = (self.bw.get(), self.cwnd);
            let excess = match r.extra_acked_bytes.filter(|_| self.cfg.aggregation_per_ack) {
                Some(bytes) => Excess::Measured(bytes as f64),
                None => Excess::Estimated { bw, mss: self.mss },
            };
            self.ack_aggregation.update(r, self.round_start, delivered, excess, cwnd);
        }
        self.update_cycle_phase(r);
        self.check_full_bw(app_limited);
        self.check_drain(r);
        self.update_min_rtt(r);
        self.update_gains();
        self.update_pacing(r);
        self.update_cwnd(r, delivered);
        self.last_inflight_bytes = r.inflight_bytes as f64;
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "mode", value: self.mode.code() },
            StateVar { name: "bw_bytes_per_s", value: self.bw.get() },
            StateVar { name: "min_rtt_us", value: self.min_rtt_us.map_or(0.0, |us| us as f64) },
            StateVar { name: "pacing_gain", value: self.pacing_gain },
            StateVar { name: "cwnd_gain", value: self.cwnd_gain },
            StateVar { name: "round", value: self.round as f64 },
            StateVar { name: "cwnd_bytes", value: self.cwnd },
            StateVar { name: "pacing_rate_bytes_per_s", value: self.pacing_rate },
            StateVar { name: "cycle_idx", value: self.cycle_idx as f64 },
            StateVar { name: "full_bw_reached", value: f64::from(u8::from(self.full_bw_reached)) },
            StateVar { name: "in_recovery", value: f64::from(u8::from(self.recovery.is_some())) },
            StateVar { name: "extra_acked_bytes", value: self.ack_aggregation.get() },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_sane, reports};
    use ccp_contract::{RttStats, Seed};
    use proptest::prelude::*;

    const MSS: u32 = 1000;
    const MSS_F: f64 = MSS as f64;
    const RTT_US: u64 = 100_000;

    use crate::test_support::rtt;

    /// A report at `now_us`: `acked_pkts` acknowledged, a delivery rate, `inflight_pkts` left in
    /// flight and one RTT.
    fn rep(now_us: u64, acked_pkts: f64, rate: Option<f64>, inflight_pkts: f64, rtt_us: u64) -> Report {
        Report {
            now_us,
            interval_us: RTT_US / 4,
            mss_bytes: MSS,
            acked_bytes: (acked_pkts * MSS_F) as u64,
            acked_pkts: acked_pkts as u64,
            rtt: rtt(rtt_us),
            recv_rate_bytes_per_s: rate.map(|r| r as u64),
            inflight_bytes: (inflight_pkts * MSS_F) as u64,
            ..Report::default()
        }
    }

    fn bbr_with(cfg: BbrConfig) -> Bbr {
        let mut b = Bbr::new(cfg);
        b.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        b
    }

    fn bbr() -> Bbr {
        bbr_with(BbrConfig::default())
    }

    fn var(b: &Bbr, name: &str) -> f64 {
        b.state().iter().find(|v| v.name == name).unwrap_or_else(|| panic!("no state {name}")).value
    }

    fn pacing(a: &Action) -> f64 {
        match a.pacing {
            Some(Pacing::BytesPerSec(r)) => r,
            other => panic!("no pacing rate: {other:?}"),
        }
    }

    /// Each report ends a round: it acknowledges the `inflight` packets in flight at the round's
    /// start and leaves as many in flight.
    fn round(b: &mut Bbr, now_us: u64, rate: f64, inflight: f64) -> Action {
        b.on_report(&rep(now_us, inflight, Some(rate), inflight, RTT_US))
    }

    const BW: f64 = 4.9e6;
    /// BDP at BW and RTT_US, packets.
    const BDP_PKTS: f64 = BW * RTT_US as f64 / 1e6 / MSS_F;

    /// STARTUP on 1, 2, 4 MB/s, then 4.5, 4.8, 4.9 MB/s (less than 25 % above 4): DRAIN after
    /// the third of those rounds, at t = 600 ms, with 1000 packets in flight.
    fn to_drain(b: &mut Bbr) {
        let rates = [1e6, 2e6, 4e6, 4.5e6, 4.8e6, BW];
        let mut now = 0;
        for (i, rate) in rates.into_iter().enumerate() {
            now += RTT_US;
            let first = if i == 0 { 10.0 } else { 1000.0 };
            b.on_report(&rep(now, first, Some(rate), 1000.0, RTT_US));
            let expect = if i + 1 < rates.len() { Mode::Startup } else { Mode::Drain };
            assert_eq!(b.mode, expect, "round {}", i + 1);
            assert_eq!(b.full_bw_count as usize, i.saturating_sub(2), "round {}", i + 1);
        }
        assert_eq!(b.round, 6);
    }

    /// The quantization budget in PROBE_BW at BW, packets: 3 TSO bursts of what 1/1024 s carries
    /// at the phase's pacing rate (5, 3 and 4 packets at 1.25, 0.75 and 1 × 4.85 MB/s), plus 2 in
    /// the 1.25 phase.
    fn probe_bw_budget_pkts(cycle_idx: usize) -> f64 {
        match cycle_idx {
            0 => 3.0 * 5.0 + 2.0,
            1 => 3.0 * 3.0,
            _ => 3.0 * 4.0,
        }
    }

    /// `to_drain`, then in flight down to the BDP: PROBE_BW at t = 700 ms.
    fn to_probe_bw(b: &mut Bbr) {
        to_drain(b);
        b.on_report(&rep(700_000, 1000.0, Some(BW), BDP_PKTS, RTT_US));
        assert_eq!(b.mode, Mode::ProbeBw);
    }

    #[test]
    fn startup_exits_to_drain_after_three_rounds_without_25_percent_growth() {
        let mut b = bbr();
        to_drain(&mut b);
        assert!(b.full_bw_reached);
        assert_eq!(var(&b, "pacing_gain"), 1.0 / HIGH_GAIN);
        assert_eq!(var(&b, "cwnd_gain"), HIGH_GAIN);

        // 25 % growth restarts the count; app-limited rounds and reports inside a round do not count.
        let mut b = bbr();
        // The first round is the initial window: 1 MB/s is the reference.
        b.on_report(&rep(RTT_US / 2, 10.0, Some(1e6), 1000.0, RTT_US));
        assert_eq!((b.round, b.full_bw, b.full_bw_count), (1, 1e6, 0));
        let (mut now, mut prev) = (RTT_US / 2, 0);
        for (rate, app_limited, count) in [
            (1.1e6, false, 1),
            (1.2e6, false, 2),
            (1.25e6, false, 0),
            (1.3e6, false, 1),
            (1.3e6, true, 1),
            (1.3e6, true, 1),
            (1.3e6, false, 2),
        ] {
            now += RTT_US;
            // Half a round: nothing counts.
            b.on_report(&rep(now - RTT_US / 2, 500.0, Some(rate), 1000.0, RTT_US));
            assert_eq!(b.full_bw_count, prev, "at {now}");
            b.on_report(&Report { app_limited, ..rep(now, 500.0, Some(rate), 1000.0, RTT_US) });
            assert_eq!(b.full_bw_count, count, "at {now}");
            assert_eq!(b.mode, Mode::Startup);
            prev = count;
        }
        now += RTT_US;
        round(&mut b, now, 1.3e6, 1000.0);
        assert_eq!(b.mode, Mode::Drain);
    }

    #[test]
    fn drain_ends_when_inflight_is_down_to_the_bdp() {
        let mut b = bbr();
        to_drain(&mut b);
        let bw = var(&b, "bw_bytes_per_s");
        assert_eq!(bw, BW);
        // DRAIN paces at 1/2.885 of the estimate; the window keeps STARTUP's gain.
        let a = b.on_report(&rep(610_000, 10.0, Some(BW), 600.0, RTT_US));
        assert_eq!(b.mode, Mode::Drain);
        assert!((pacing(&a) - BW * std::f64::consts::LN_2 / 2.0 * 0.99).abs() < 1e-6, "{}", pacing(&a));
        // BDP = 490 packets, plus a quantization budget of 3 TSO bursts of 2 packets (at 1.68 MB/s
        // a millisecond is 1.6 packets: the 2-segment minimum).
        b.on_report(&rep(620_000, 10.0, Some(BW), BDP_PKTS + 6.5, RTT_US));
        assert_eq!(b.mode, Mode::Drain);
        b.on_report(&rep(630_000, 10.0, Some(BW), BDP_PKTS + 6.0, RTT_US));
        assert_eq!(b.mode, Mode::ProbeBw);
        assert_ne!(b.cycle_idx, DRAIN_PHASE, "never starts in the draining phase");
        assert_eq!(var(&b, "pacing_gain"), PACING_GAIN_CYCLE[b.cycle_idx]);
        assert_eq!(var(&b, "cwnd_gain"), 2.0);
    }

    #[test]
    fn quantization_budget_is_three_tso_bursts_of_a_millisecond_at_the_pacing_rate() {
        let mut b = Bbr::new(BbrConfig::default());
        b.init(&FlowStart::new(1448, 10 * 1448));
        // (pacing rate, bit/s; segments per burst): 1 below 1.2 Mbit/s, else at least 2; whole
        // segments of rate/8/1024 bytes; at most 65,215 bytes (45 segments of 1448 B).
        for (rate_bps, segs) in [(1.0e6, 1.0), (1.3e6, 2.0), (10e6, 2.0), (50e6, 4.0), (200e6, 16.0), (1e9, 45.0), (100e9, 45.0)]
        {
            b.pacing_rate = rate_bps / 8.0;
            assert_eq!(b.tso_burst_segs(), segs, "at {rate_bps} bit/s");
        }
        // At most 127 segments, which binds for small segments.
        b.mss = 500.0;
        assert_eq!(b.tso_burst_segs(), 127.0);
        // The target adds three bursts, and 2 packets more in the 1.25 phase: at 50 Mbit/s,
        // 12 and 14 packets beyond the BDP.
        b.mss = 1448.0;
        b.pacing_rate = 50e6 / 8.0;
        b.min_rtt_us = Some(RTT_US);
        b.mode = Mode::ProbeBw;
        b.cycle_idx = 2;
        assert_eq!(b.inflight_target(1e6, 1.0), 1e5 + 12.0 * 1448.0);
        b.cycle_idx = 0;
        assert_eq!(b.inflight_target(1e6, 1.0), 1e5 + 14.0 * 1448.0);
    }

    #[test]
    fn probe_bw_cycles_through_the_gains_one_phase_per_min_rtt() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let first = b.cycle_idx;
        let (mut phase, mut since) = (first, 700_000);
        let mut seen = vec![(first, var(&b, "pacing_gain"))];
        let mut now = 700_000;
        // In flight well above every target: phases end on time only.
        while seen.len() < 17 {
            now += 10_000;
            let a = b.on_report(&rep(now, 50.0, Some(BW), 2.0 * BDP_PKTS, RTT_US));
            let gain = PACING_GAIN_CYCLE[b.cycle_idx];
            assert_eq!(var(&b, "pacing_gain"), gain);
            assert!((pacing(&a) - gain * BW * 0.99).abs() < 1e-6);
            if b.cycle_idx != phase {
                let lasted = now - since;
                assert!(lasted > RTT_US && lasted <= RTT_US + 10_000, "phase {phase} lasted {lasted} µs");
                assert_eq!(b.cycle_idx, (phase + 1) % CYCLE_LEN, "in order");
                (phase, since) = (b.cycle_idx, now);
                seen.push((phase, gain));
            }
        }
        let gains: Vec<f64> = seen.iter().map(|s| s.1).collect();
        let expect: Vec<f64> = (0..17).map(|i| PACING_GAIN_CYCLE[(first + i) % CYCLE_LEN]).collect();
        assert_eq!(gains, expect);
        assert_eq!(b.mode, Mode::ProbeBw);
    }

    #[test]
    fn probe_phase_waits_for_its_target_and_drain_phase_ends_at_the_bdp() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        b.cycle_idx = 0;
        b.cycle_start_us = 700_000;
        // 1.25 phase: in flight and the next burst (5 packets at 1.25 · 4.85 MB/s) below 1.25·BDP
        // + 17 packets (3 such bursts, plus 2) keeps probing past one min RTT…
        let target = 1.25 * BDP_PKTS + 17.0 - 5.0;
        b.on_report(&rep(800_000, 50.0, Some(BW), target - 1.0, RTT_US));
        b.on_report(&rep(900_000, 50.0, Some(BW), target - 1.0, RTT_US));
        assert_eq!(b.cycle_idx, 0);
        // …until it gets there, or a loss says the buffer may not hold it.
        b.on_report(&rep(910_000, 50.0, Some(BW), target, RTT_US));
        assert_eq!(b.cycle_idx, 1);
        // 0.75 phase: over as soon as in flight is down to the BDP (+ 3 bursts of 3 packets at
        // 0.75 · 4.85 MB/s), before one min RTT.
        b.on_report(&rep(920_000, 50.0, Some(BW), BDP_PKTS + 10.0, RTT_US));
        assert_eq!(b.cycle_idx, 1);
        b.on_report(&rep(930_000, 50.0, Some(BW), BDP_PKTS + 9.0, RTT_US));
        assert_eq!(b.cycle_idx, 2);
        b.cycle_idx = 0;
        b.cycle_start_us = 1_000_000;
        b.on_report(&Report { lost_pkts: 1, ..rep(1_200_000, 50.0, Some(BW), BDP_PKTS, RTT_US) });
        assert_eq!(b.cycle_idx, 1, "a loss ends the probe");
    }

    #[test]
    fn starting_phase_is_seeded_never_the_drain_phase_and_covers_the_rest() {
        let phases: Vec<usize> = (0..200)
            .map(|seed| {
                let mut b = Bbr::new(BbrConfig { seed, ..BbrConfig::default() });
                b.enter_probe_bw(0);
                b.cycle_idx
            })
            .collect();
        assert!(!phases.contains(&DRAIN_PHASE));
        for p in (0..CYCLE_LEN).filter(|&p| p != DRAIN_PHASE) {
            assert!(phases.contains(&p), "phase {p} never drawn");
        }
        // Same seed, same draws.
        let again: Vec<usize> = (0..200)
            .map(|seed| {
                let mut b = Bbr::new(BbrConfig { seed, ..BbrConfig::default() });
                b.enter_probe_bw(0);
                b.cycle_idx
            })
            .collect();
        assert_eq!(phases, again);
        // The registry's factory gives each flow its own stream.
        let f = INFO.configure(&toml::Table::new()).unwrap();
        let first_phases: Vec<f64> = (0..50)
            .map(|_| {
                let mut alg = f.create();
                alg.init(&FlowStart::new(MSS, 10_000));
                let mut now = 0;
                for rate in [1e6, 2e6, 2e6, 2e6, 2e6] {
                    now += RTT_US;
                    alg.on_report(&rep(now, 1000.0, Some(rate), 10.0, RTT_US));
                }
                let s = alg.state();
                assert_eq!(s[0].value, Mode::ProbeBw.code());
                s.iter().find(|v| v.name == "cycle_idx").unwrap().value
            })
            .collect();
        assert!(first_phases.iter().any(|&p| p != first_phases[0]), "{first_phases:?}");
    }

    #[test]
    fn probe_rtt_after_10_s_without_a_lower_rtt_cwnd_4_packets_for_200_ms_and_a_round() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let stamp = b.min_rtt_stamp_us;
        assert_eq!(stamp, 700_000, "the last sample that matched the min RTT");
        let cwnd_before = b.cwnd;
        assert!(cwnd_before > 2.0 * BDP_PKTS * MSS_F, "{cwnd_before}");
        let mut now = 700_000;
        // Higher RTTs only, for 10 s.
        loop {
            now += 10_000;
            let a = b.on_report(&rep(now, 50.0, Some(BW), BDP_PKTS, RTT_US + 20_000));
            if now <= stamp + MIN_RTT_WINDOW_US {
                assert_eq!(b.mode, Mode::ProbeBw, "at {now}");
                continue;
            }
            assert_eq!(b.mode, Mode::ProbeRtt, "at {now}");
            assert_eq!(a.cwnd_bytes, Some(4.0 * MSS_F));
            assert_eq!(var(&b, "pacing_gain"), 1.0);
            // An expired filter takes the current sample.
            assert_eq!(b.min_rtt_us, Some(RTT_US + 20_000));
            break;
        }
        assert_eq!(now, stamp + MIN_RTT_WINDOW_US + 10_000);
        // In flight still high: the 200 ms have not started.
        now += 10_000;
        b.on_report(&rep(now, 50.0, Some(BW), 100.0, RTT_US + 20_000));
        assert_eq!(b.probe_rtt_done_us, None);
        // Down to 4 packets, and the queue is gone: the lower RTT is the new min.
        now += 10_000;
        let down_at = now;
        let a = b.on_report(&rep(now, 96.0, Some(BW / 4.0), 4.0, RTT_US));
        assert_eq!(b.probe_rtt_done_us, Some(down_at + PROBE_RTT_US));
        assert_eq!(b.min_rtt_us, Some(RTT_US));
        assert_eq!(a.cwnd_bytes, Some(4.0 * MSS_F));
        // The round that started there is over after 4 packets (40 ms), but 200 ms must pass.
        while now < down_at + PROBE_RTT_US - 10_000 {
            now += 10_000;
            let a = b.on_report(&rep(now, 1.0, Some(40_000.0), 4.0, RTT_US));
            assert_eq!(b.mode, Mode::ProbeRtt, "at {now}");
            assert_eq!(a.cwnd_bytes, Some(4.0 * MSS_F));
        }
        assert!(b.probe_rtt_round_done);
        now += 10_000;
        let a = b.on_report(&rep(now, 1.0, Some(40_000.0), 4.0, RTT_US));
        assert_eq!(b.mode, Mode::ProbeBw);
        assert_eq!(b.min_rtt_stamp_us, now);
        // The low rates measured in PROBE_RTT did not reach the filter; the window is back.
        assert_eq!(var(&b, "bw_bytes_per_s"), BW);
        let target = 2.0 * BW * RTT_US as f64 / 1e6 + probe_bw_budget_pkts(b.cycle_idx) * MSS_F + b.ack_aggregation_allowance();
        assert!((a.cwnd_bytes.unwrap() - target.min(cwnd_before + MSS_F)).abs() < 1e-6, "{:?}", a.cwnd_bytes);
    }

    #[test]
    fn probe_rtt_needs_a_round_as_well_as_200_ms() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let mut now = 700_000 + MIN_RTT_WINDOW_US + 10_000;
        b.on_report(&rep(now, 0.0, None, 4.0, RTT_US + 1));
        assert_eq!(b.mode, Mode::ProbeRtt);
        // 400 ms with nothing acknowledged: no round, still probing.
        for _ in 0..40 {
            now += 10_000;
            b.on_report(&rep(now, 0.0, None, 4.0, RTT_US));
            assert_eq!(b.mode, Mode::ProbeRtt);
        }
        now += 10_000;
        b.on_report(&rep(now, 4.0, None, 4.0, RTT_US));
        assert_eq!(b.mode, Mode::ProbeBw);
    }

    #[test]
    fn app_limited_samples_below_the_max_do_not_lower_it() {
        let mut b = bbr();
        let mut now = RTT_US;
        round(&mut b, now, 5e6, 10.0);
        for _ in 0..30 {
            now += RTT_US;
            b.on_report(&Report { app_limited: true, ..rep(now, 10.0, Some(1e6), 10.0, RTT_US) });
            assert_eq!(var(&b, "bw_bytes_per_s"), 5e6);
        }
        assert!(b.round > 30);
        // An app-limited sample above the estimate still counts: it shows the path can do more.
        now += RTT_US;
        b.on_report(&Report { app_limited: true, ..rep(now, 10.0, Some(6e6), 10.0, RTT_US) });
        assert_eq!(var(&b, "bw_bytes_per_s"), 6e6);
        // Not app-limited, a lower sample enters the filter (it shows only once the peak ages out).
        now += RTT_US;
        round(&mut b, now, 1e6, 10.0);
        assert_eq!(b.bw.entries.len(), 2);
    }

    #[test]
    fn max_filter_forgets_a_peak_after_10_rounds() {
        let mut b = bbr();
        let mut now = RTT_US;
        round(&mut b, now, 8e6, 10.0);
        let peak_round = b.round;
        loop {
            now += RTT_US;
            round(&mut b, now, 4e6, 10.0);
            let bw = var(&b, "bw_bytes_per_s");
            if b.round - peak_round <= BW_WINDOW_ROUNDS {
                assert_eq!(bw, 8e6, "round {}", b.round);
            } else {
                assert_eq!(bw, 4e6, "round {}", b.round);
                break;
            }
        }
        assert_eq!(b.round, peak_round + 11);
    }

    /// The filter against a brute-force maximum over the same window.
    #[test]
    fn round_max_is_exact() {
        let mut f = RoundMax::new(10);
        let mut all: Vec<(u64, f64)> = vec![];
        let mut x = 7u64;
        let mut round = 0;
        for _ in 0..3000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            round += x >> 62; // 0–3 rounds between samples
            let v = ((x >> 20) % 1000) as f64;
            f.update(round, v);
            all.push((round, v));
            let brute = all.iter().filter(|s| round - s.0 <= 10).map(|s| s.1).fold(0.0, f64::max);
            assert_eq!(f.get(), brute, "round {round}");
            assert!(f.entries.len() <= 11);
        }
    }

    #[test]
    fn scale_halves_pacing_cwnd_and_the_estimate() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let (p, c, bw, prior) = (b.pacing_rate_bytes_per_s(), b.cwnd_bytes(), var(&b, "bw_bytes_per_s"), b.prior_cwnd);
        b.scale(0.5);
        assert_eq!(b.pacing_rate_bytes_per_s(), p / 2.0);
        assert_eq!(b.cwnd_bytes(), c / 2.0);
        assert_eq!(var(&b, "bw_bytes_per_s"), bw / 2.0);
        assert_eq!(b.prior_cwnd, prior / 2.0);
        assert!(b.bw.entries.iter().all(|e| e.1 <= bw / 2.0));
        // The next report, with no new sample, keeps to the halved model, and returns the accessors.
        let a = b.on_report(&rep(710_000, 0.0, None, 0.0, RTT_US));
        assert_eq!(pacing(&a), b.pacing_rate_bytes_per_s());
        assert_eq!(a.cwnd_bytes, Some(b.cwnd_bytes()));
        assert!((pacing(&a) - PACING_GAIN_CYCLE[b.cycle_idx] * bw / 2.0 * 0.99).abs() < 1e-6);
        // Out-of-range factors: nothing, or at most 1.
        let (p, c) = (b.pacing_rate_bytes_per_s(), b.cwnd_bytes());
        for f in [f64::NAN, 0.0, -1.0, 1.0, 7.0, f64::INFINITY] {
            b.scale(f);
            assert_eq!((b.pacing_rate_bytes_per_s(), b.cwnd_bytes()), (p, c), "f = {f}");
        }
        // The window stops at 4 packets.
        b.scale(1e-9);
        assert_eq!(b.cwnd_bytes(), 4.0 * MSS_F);
        assert!(b.pacing_rate_bytes_per_s() > 0.0);
    }

    #[test]
    fn cap_rate_caps_and_never_raises() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let (p, c) = (b.pacing_rate_bytes_per_s(), b.cwnd_bytes());
        for cap in [BW, 2.0 * BW, f64::INFINITY, f64::NAN, 0.0, -5.0] {
            b.cap_rate(cap);
            assert_eq!((b.pacing_rate_bytes_per_s(), b.cwnd_bytes(), var(&b, "bw_bytes_per_s")), (p, c, BW), "cap {cap}");
        }
        let cap = 2e6;
        b.cap_rate(cap);
        let gain = var(&b, "pacing_gain");
        assert_eq!(var(&b, "bw_bytes_per_s"), cap);
        assert!(b.bw.entries.iter().all(|e| e.1 <= cap));
        assert!(b.pacing_rate_bytes_per_s() <= gain * cap + 1e-9 && b.pacing_rate_bytes_per_s() < p);
        // Paced at 0.75–1.25 × 1.98 MB/s, a millisecond is 1.5–2.5 packets: bursts of 2.
        let budget = if b.cycle_idx == 0 { 8.0 } else { 6.0 };
        let aggregation = b.ack_aggregation_allowance();
        assert!(aggregation <= cap * 0.1, "at most 100 ms at the capped rate: {aggregation}");
        let target = 2.0 * cap * RTT_US as f64 / 1e6 + budget * MSS_F + aggregation;
        assert!((b.cwnd_bytes() - target).abs() < 1e-6, "{}", b.cwnd_bytes());
        // The base rate follows the capped estimate at the next report.
        let a = b.on_report(&rep(710_000, 0.0, None, 0.0, RTT_US));
        assert!((pacing(&a) / PACING_GAIN_CYCLE[b.cycle_idx] - cap * 0.99).abs() < 1e-6);
        // Before any bandwidth sample the initial rate is capped the same way.
        let mut fresh = bbr();
        let p0 = fresh.pacing_rate_bytes_per_s();
        fresh.cap_rate(1e12);
        assert_eq!(fresh.pacing_rate_bytes_per_s(), p0);
        fresh.cap_rate(1e6);
        assert!((fresh.pacing_rate_bytes_per_s() - HIGH_GAIN * 1e6 * 0.99).abs() < 1e-6);
        assert_eq!(fresh.cwnd_bytes(), 10.0 * MSS_F, "no RTT yet: no window for a rate");
    }

    #[test]
    fn ack_aggregation_is_delivery_beyond_btlbw_kept_for_five_to_ten_rounds() {
        let (bw, mss, big_cwnd) = (1e6, MSS_F, 1e9);
        let mut agg = AckAggregation::default();
        let mut now = 0;
        let mut report = |agg: &mut AckAggregation, round_start: bool, bytes: f64, cwnd: f64| {
            now += 10_000;
            let r = Report { now_us: now, interval_us: 10_000, ..Report::default() };
            agg.update(&r, round_start, bytes, Excess::Estimated { bw, mss }, cwnd);
        };
        // At BtlBw (10 kB per 10 ms) and below it, nothing is in excess.
        for bytes in [10_000.0, 10_000.0, 5_000.0, 5_000.0, 5_000.0] {
            report(&mut agg, false, bytes, big_cwnd);
        }
        assert_eq!(agg.get(), 0.0);
        // ACKs held back, then 25 kB in one 10 ms interval: 15 kB beyond BtlBw's 10 kB.
        report(&mut agg, false, 25_000.0, big_cwnd);
        assert!((agg.get() - 15_000.0).abs() < 1e-6, "{}", agg.get());
        // Never above the window.
        let mut capped = AckAggregation::default();
        report(&mut capped, false, 25_000.0, 12_000.0);
        assert_eq!(capped.get(), 12_000.0);
        // Steady again: the excess stays for the rest of its five-round window and the next five.
        for round in 1..=9 {
            report(&mut agg, true, 10_000.0, big_cwnd);
            assert!((agg.get() - 15_000.0).abs() < 1e-6, "round {round}");
        }
        report(&mut agg, true, 10_000.0, big_cwnd);
        assert_eq!(agg.get(), 0.0, "forgotten after ten rounds");
    }

    #[test]
    fn a_datapath_measured_excess_replaces_the_per_report_estimate() {
        let big_cwnd = 1e9;
        let report = |now_us: u64| Report { now_us, interval_us: 10_000, ..Report::default() };
        // Deliveries at BtlBw per report, but the ACKs inside came in bursts: the datapath saw
        // 30 kB beyond BtlBw where the report alone shows none.
        let mut agg = AckAggregation::default();
        agg.update(&report(10_000), false, 10_000.0, Excess::Measured(30_000.0), big_cwnd);
        assert_eq!(agg.get(), 30_000.0);
        agg.update(&report(20_000), false, 10_000.0, Excess::Measured(5_000.0), big_cwnd);
        assert_eq!(agg.get(), 30_000.0, "the window keeps its maximum");
        // A measured zero is believed: the report's own 25 kB burst is not counted.
        let mut calm = AckAggregation::default();
        calm.update(&report(10_000), false, 25_000.0, Excess::Measured(0.0), big_cwnd);
        assert_eq!(calm.get(), 0.0);
        // Never above the window.
        let mut capped = AckAggregation::default();
        capped.update(&report(10_000), false, 10_000.0, Excess::Measured(30_000.0), 12_000.0);
        assert_eq!(capped.get(), 12_000.0);
        // Rounds still age it out.
        for _ in 0..EXTRA_ACKED_WIN_ROUNDS * 2 {
            agg.update(&report(30_000), true, 10_000.0, Excess::Measured(0.0), big_cwnd);
        }
        assert_eq!(agg.get(), 0.0);
    }

    #[test]
    fn bbr_asks_the_datapath_to_measure_aggregation_against_btlbw() {
        let mut b = Bbr::new(BbrConfig::default());
        let a = b.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        assert_eq!(a.ack_aggregation_bw_bytes_per_s, None, "no bandwidth estimate yet");
        let a = b.on_report(&rep(10_000, 10.0, Some(BW), 10.0, RTT_US));
        let asked = a.ack_aggregation_bw_bytes_per_s.expect("asked once BtlBw is known");
        assert_eq!(asked, b.bw.get());
        let mut off = bbr_with(BbrConfig { extra_acked_gain: 0.0, ..BbrConfig::default() });
        let a = off.on_report(&rep(10_000, 10.0, Some(BW), 10.0, RTT_US));
        assert_eq!(a.ack_aggregation_bw_bytes_per_s, None, "no allowance, no measurement");
        let mut per_report = bbr_with(BbrConfig { aggregation_per_ack: false, ..BbrConfig::default() });
        let a = per_report.on_report(&rep(10_000, 10.0, Some(BW), 10.0, RTT_US));
        assert_eq!(a.ack_aggregation_bw_bytes_per_s, None, "estimated per report: nothing to ask");
    }

    #[test]
    fn the_aggregation_allowance_comes_with_a_full_pipe_at_most_100_ms_of_btlbw() {
        for gain in [1.0, 0.0] {
            let mut b = bbr_with(BbrConfig { extra_acked_gain: gain, ..BbrConfig::default() });
            b.ack_aggregation.extra_bytes = [50_000.0, 0.0];
            b.bw.update(0, BW);
            assert_eq!(b.ack_aggregation_allowance(), 0.0, "STARTUP: no allowance");
            b.full_bw_reached = true;
            assert_eq!(b.ack_aggregation_allowance(), gain * 50_000.0);
            b.ack_aggregation.extra_bytes = [0.0, 1e9];
            assert_eq!(b.ack_aggregation_allowance(), gain * BW * 0.1);
        }
    }

    #[test]
    fn fast_recovery_conserves_packets_for_a_round_then_restores() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let before = b.cwnd;
        // A loss with 400 packets in flight: cwnd = in flight.
        let a = b.on_report(&Report { lost_pkts: 3, ..rep(710_000, 20.0, Some(BW), 400.0, RTT_US) });
        assert_eq!(a.cwnd_bytes, Some(400.0 * MSS_F));
        assert_eq!(var(&b, "in_recovery"), 1.0);
        // Packet conservation: the window less further losses.
        let a = b.on_report(&Report { lost_pkts: 2, ..rep(720_000, 100.0, Some(BW), 300.0, RTT_US) });
        assert_eq!(a.cwnd_bytes, Some(398.0 * MSS_F));
        // 250 delivered with 200 left in flight: the sender refilled what was delivered during
        // the report, so in flight + delivered (450) would count it twice; the window stays.
        let a = b.on_report(&rep(730_000, 250.0, Some(BW), 200.0, RTT_US));
        assert_eq!(a.cwnd_bytes, Some(398.0 * MSS_F));
        // Never below what is in flight.
        let a = b.on_report(&Report { lost_pkts: 300, ..rep(735_000, 0.0, Some(BW), 150.0, RTT_US) });
        assert_eq!(a.cwnd_bytes, Some(150.0 * MSS_F));
        // 400 packets acknowledged since the loss: restored, then capped at the target.
        let a = b.on_report(&rep(740_000, 50.0, Some(BW), 200.0, RTT_US));
        assert_eq!(var(&b, "in_recovery"), 0.0);
        assert_eq!(a.cwnd_bytes, Some(before));
        // Bandwidth was not touched.
        assert_eq!(var(&b, "bw_bytes_per_s"), BW);
    }

    /// A report of SACKs alone: `sacked` packets newly SACKed behind a hole, the cumulative ACK
    /// not moving.
    fn sacks(now_us: u64, sacked: f64, inflight_pkts: f64) -> Report {
        Report {
            acked_bytes: 0,
            acked_pkts: 0,
            sacked_bytes: (sacked * MSS_F) as u64,
            sacked_pkts: sacked as u64,
            ..rep(now_us, 0.0, Some(BW), inflight_pkts, RTT_US)
        }
    }

    #[test]
    fn sack_recovery_counts_deliveries_once_for_rounds_and_conservation() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let round = b.round;
        // A loss with 400 in flight opens recovery and a round of 400 packets.
        let a = b.on_report(&Report { lost_pkts: 1, ..rep(710_000, 20.0, Some(BW), 400.0, RTT_US) });
        assert_eq!(a.cwnd_bytes, Some(400.0 * MSS_F));
        // SACKs deliver 150 packets twice while the hole stays open: the window is conserved,
        // and the round (400) is not over after 300.
        let a = b.on_report(&sacks(720_000, 150.0, 400.0));
        assert_eq!(a.cwnd_bytes, Some(400.0 * MSS_F));
        b.on_report(&sacks(730_000, 150.0, 400.0));
        assert_eq!(b.round, round);
        // The retransmission fills the hole: the cumulative ACK moves 350 packets, over the 300
        // SACKed ones, but delivers only 100 (the retransmitted one and 99 new). The round ends on
        // deliveries (400 packets), and with it conservation: the window grows by the 100
        // delivered, not by the 350 of the jump; recovery waits for 50 more packets of cumulative
        // ACK.
        let jump = Report { acked_bytes: 350 * u64::from(MSS), acked_pkts: 100, ..rep(740_000, 0.0, Some(BW), 400.0, RTT_US) };
        let a = b.on_report(&jump);
        assert_eq!(b.round, round + 1);
        assert_eq!(var(&b, "in_recovery"), 1.0);
        assert_eq!(a.cwnd_bytes, Some(500.0 * MSS_F));
        // Still in recovery, past conservation: losses come off, deliveries go on.
        let a = b.on_report(&Report { lost_pkts: 5, ..sacks(745_000, 10.0, 400.0) });
        assert_eq!(a.cwnd_bytes, Some(505.0 * MSS_F));
        b.on_report(&rep(750_000, 50.0, Some(BW), 400.0, RTT_US));
        assert_eq!(var(&b, "in_recovery"), 0.0);
        // A datapath that counts no packets: bytes over the MSS.
        let mut c = bbr();
        c.on_report(&Report { acked_pkts: 0, ..rep(RTT_US, 10.0, Some(1e6), 10.0, RTT_US) });
        assert_eq!(c.round, 1);
    }

    #[test]
    fn startup_growth_stops_at_the_target_not_a_report_past_it() {
        let mut b = bbr();
        // 1 MB/s at 100 ms: a target of 2.885 · 100 kB + 3 bursts of 2 packets (paced at
        // 2.86 MB/s), about 294.5 packets.
        b.on_report(&rep(RTT_US, 10.0, Some(1e6), 10.0, RTT_US));
        let target = HIGH_GAIN * 1e6 * 0.1 + 6.0 * MSS_F;
        assert!(b.cwnd < target);
        // One report delivering 400 packets would take the window 400 packets up, past it.
        let a = b.on_report(&rep(RTT_US + 10_000, 400.0, Some(1e6), 10.0, RTT_US));
        assert_eq!(b.mode, Mode::Startup);
        assert!((a.cwnd_bytes.unwrap() - target).abs() < 1e-6, "{:?} vs {target}", a.cwnd_bytes);
        // The target rises with the estimate, and the window follows it.
        let a = b.on_report(&rep(2 * RTT_US, 100.0, Some(2e6), 10.0, RTT_US));
        assert!((a.cwnd_bytes.unwrap() - (target + 100.0 * MSS_F)).abs() < 1e-6);
    }

    #[test]
    fn timeout_collapses_the_window_regrows_and_restores() {
        let mut b = bbr();
        to_probe_bw(&mut b);
        let before = b.cwnd;
        let a = b.on_report(&Report { timeouts: 1, ..rep(710_000, 0.0, None, 0.0, RTT_US) });
        assert_eq!(a.cwnd_bytes, Some(2.0 * MSS_F));
        assert!(pacing(&a) > 0.0);
        // Regrowth by what is acknowledged (at least the 4-packet target).
        let a = b.on_report(&rep(810_000, 2.0, Some(BW), 4.0, RTT_US));
        assert_eq!(a.cwnd_bytes, Some(4.0 * MSS_F));
        let a = b.on_report(&rep(910_000, 4.0, Some(BW), 8.0, RTT_US));
        assert_eq!(a.cwnd_bytes, Some(8.0 * MSS_F));
        // The 490 packets outstanding at the timeout acknowledged: the old window is back.
        let a = b.on_report(&rep(1_010_000, 490.0, Some(BW), 8.0, RTT_US));
        assert_eq!(a.cwnd_bytes, Some(before));
        assert_eq!(var(&b, "in_recovery"), 0.0);
    }

    #[test]
    fn missing_and_zero_inputs_never_give_nan_or_zero() {
        let mut b = Bbr::new(BbrConfig::default());
        let a = b.init(&FlowStart::new(0, 0));
        assert_eq!(a.report, Some(ReportPolicy::PerRtt { rtts: 0.25 }));
        assert!(a.cwnd_bytes.unwrap() >= 2.0 && pacing(&a).is_finite() && pacing(&a) > 0.0);
        let empty = [
            Report::default(),
            Report { now_us: 10, acked_bytes: 5000, ..Report::default() },
            Report {
                now_us: 20,
                mss_bytes: 0,
                acked_bytes: 1,
                inflight_bytes: 1,
                recv_rate_bytes_per_s: Some(0),
                ..Report::default()
            },
            Report {
                now_us: 30,
                rtt: rtt(0),
                send_rate_bytes_per_s: Some(0),
                recv_rate_bytes_per_s: Some(1),
                ..Report::default()
            },
            Report { now_us: 40, lost_pkts: 5, ..Report::default() },
            Report { now_us: 50, timeouts: 1, ..Report::default() },
            Report { now_us: 20_000_000, acked_bytes: 1, ..Report::default() },
        ];
        for r in &empty {
            let a = b.on_report(r);
            let c = a.cwnd_bytes.unwrap();
            assert!(c.is_finite() && c >= 2.0, "{c} after {r:?}");
            assert!(pacing(&a).is_finite() && pacing(&a) > 0.0);
            assert!(b.state().iter().all(|v| v.value.is_finite()), "{:?}", b.state());
        }
        // No rate from the datapath at all: each round's own delivery rate stands in.
        let mut b = bbr();
        for i in 1..=3 {
            b.on_report(&rep(i * RTT_US, 10.0, None, 10.0, RTT_US));
        }
        assert!((var(&b, "bw_bytes_per_s") - 10.0 * MSS_F * 1e6 / RTT_US as f64).abs() < 1e-6);
    }

    #[test]
    fn seeded_flow_starts_up_from_the_seed() {
        let mut b = Bbr::new(BbrConfig::default());
        let start = FlowStart {
            now_us: 5_000_000,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: None,
            seed: Some(Seed { cwnd_bytes: 200_000, srtt_us: Some(50_000), min_rtt_us: Some(40_000), ..Seed::default() }),
        };
        let a = b.init(&start);
        assert_eq!(a.cwnd_bytes, Some(200_000.0));
        assert!((pacing(&a) - HIGH_GAIN * 200_000.0 / 0.05 * 0.99).abs() < 1e-3);
        assert_eq!(b.mode, Mode::Startup);
        assert_eq!(b.min_rtt_us, Some(40_000));
        // The min-RTT window runs from the seed, not from the datapath clock's zero.
        b.on_report(&rep(5_100_000, 10.0, Some(1e6), 200.0, 60_000));
        assert_eq!(b.mode, Mode::Startup);
        assert_eq!(b.min_rtt_us, Some(40_000));
    }

    /// A new flow whose datapath clock is far from zero does not think its RTT filter expired.
    #[test]
    fn timers_start_at_the_first_report_when_the_start_time_is_unknown() {
        let mut b = bbr();
        b.on_report(&rep(3_600_000_000, 10.0, Some(1e6), 10.0, RTT_US));
        assert_eq!(b.mode, Mode::Startup);
    }

    #[test]
    fn state_and_params() {
        let names: Vec<_> = bbr().state().iter().map(|v| v.name).collect();
        for n in ["mode", "bw_bytes_per_s", "min_rtt_us", "pacing_gain", "cwnd_gain", "round", "cwnd_bytes"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        let f = INFO.configure(&"cwnd_gain = 2.5\nbw_window_rounds = 8\nprobe_rtt_ms = 0\nseed = 3".parse().unwrap()).unwrap();
        assert_eq!(f.name(), "bbr");
        assert!(INFO.configure(&"high_gain = 1.0".parse().unwrap()).is_err());
        assert!(INFO.configure(&"pacing_margin = 1.0".parse().unwrap()).is_err());
        assert!(INFO.configure(&"bw_window_rounds = 0".parse().unwrap()).is_err());
        // probe_rtt_ms = 0: never.
        let mut b = bbr_with(BbrConfig { probe_rtt_us: 0, ..BbrConfig::default() });
        to_probe_bw(&mut b);
        b.on_report(&rep(30_000_000, 50.0, Some(BW), BDP_PKTS, RTT_US + 1));
        assert_eq!(b.mode, Mode::ProbeBw);
    }

    /// A fluid model of one flow through a fixed-capacity bottleneck in 1 ms steps: a FIFO queue
    /// (unbounded) served at `capacity`, half the base RTT each way. A packet's RTT is the base
    /// plus the time it queued; the delivery rate a report carries is what was acknowledged over
    /// the last base RTT (as a Linux rate sample spans about one round trip).
    struct Pipe {
        capacity_per_step: f64,
        base_rtt_us: u64,
        to_queue: VecDeque<f64>,
        queue: VecDeque<(f64, u64)>,
        queue_bytes: f64,
        to_sender: VecDeque<(f64, u64)>,
        inflight: f64,
        acked_window: VecDeque<f64>,
        step: u64,
    }

    const STEP_US: u64 = 1_000;

    impl Pipe {
        fn new(capacity_bytes_per_s: f64, base_rtt_us: u64) -> Pipe {
            let half = (base_rtt_us / STEP_US / 2) as usize;
            Pipe {
                capacity_per_step: capacity_bytes_per_s * STEP_US as f64 / 1e6,
                base_rtt_us,
                to_queue: vec![0.0; half].into(),
                queue: VecDeque::new(),
                queue_bytes: 0.0,
                to_sender: vec![(0.0, 0); half].into(),
                inflight: 0.0,
                acked_window: vec![0.0; 2 * half].into(),
                step: 0,
            }
        }

        /// Sends what the window and the pacing rate allow, serves the queue, returns the ACKs.
        fn step(&mut self, cwnd: f64, pacing: f64) -> (f64, u64) {
            let send = (pacing * STEP_US as f64 / 1e6).min((cwnd - self.inflight).max(0.0));
            self.inflight += send;
            self.to_queue.push_back(send);
            let arriving = self.to_queue.pop_front().unwrap();
            if arriving > 0.0 {
                self.queue.push_back((arriving, self.step));
                self.queue_bytes += arriving;
            }
            let (mut budget, mut served, mut waited) = (self.capacity_per_step, 0.0, 0);
            while budget > 0.0 {
                let Some(front) = self.queue.front_mut() else { break };
                let x = front.0.min(budget);
                front.0 -= x;
                budget -= x;
                served += x;
                waited = waited.max(self.step - front.1);
                if front.0 <= 1e-9 {
                    self.queue.pop_front();
                }
            }
            self.queue_bytes = (self.queue_bytes - served).max(0.0);
            self.to_sender.push_back((served, self.base_rtt_us + waited * STEP_US));
            let (acked, rtt_us) = self.to_sender.pop_front().unwrap();
            self.inflight -= acked;
            self.acked_window.push_back(acked);
            self.acked_window.pop_front();
            self.step += 1;
            (acked, rtt_us)
        }

        /// Runs `steps` steps under `b`, reporting every `every` steps; calls `each` after every report.
        fn run(&mut self, b: &mut Bbr, steps: u64, every: u64, mut each: impl FnMut(&Bbr, &Pipe)) {
            let (mut acked, mut min_rtt, mut max_rtt, mut sum_rtt, mut samples) = (0.0, u64::MAX, 0, 0, 0);
            let mut since_report = 0;
            for _ in 0..steps {
                let (a, rtt_us) = self.step(b.cwnd_bytes(), b.pacing_rate_bytes_per_s());
                if a > 0.0 {
                    acked += a;
                    (min_rtt, max_rtt, sum_rtt, samples) =
                        (min_rtt.min(rtt_us), max_rtt.max(rtt_us), sum_rtt + rtt_us, samples + 1);
                }
                since_report += 1;
                if since_report < every {
                    continue;
                }
                since_report = 0;
                let rate = self.acked_window.iter().sum::<f64>() * 1e6 / self.base_rtt_us as f64;
                let r = Report {
                    now_us: self.step * STEP_US,
                    interval_us: every * STEP_US,
                    mss_bytes: MSS,
                    acked_bytes: acked.round() as u64,
                    acked_pkts: (acked / MSS_F) as u64,
                    rtt: (samples > 0).then(|| RttStats {
                        min_us: min_rtt,
                        max_us: max_rtt,
                        last_us: max_rtt,
                        srtt_us: sum_rtt / samples,
                        mean_us: sum_rtt / samples,
                        samples: samples as u32,
                    }),
                    recv_rate_bytes_per_s: (rate >= 1.0).then_some(rate as u64),
                    inflight_bytes: self.inflight.round() as u64,
                    ..Report::default()
                };
                let a = b.on_report(&r);
                assert_eq!(a.cwnd_bytes, Some(b.cwnd_bytes()));
                assert_eq!(a.pacing, Some(Pacing::BytesPerSec(b.pacing_rate_bytes_per_s())));
                (acked, min_rtt, max_rtt, sum_rtt, samples) = (0.0, u64::MAX, 0, 0, 0);
                each(b, self);
            }
        }
    }

    const CAPACITY: f64 = 10e6;
    const BASE_RTT_US: u64 = 40_000;
    const LINK_BDP: f64 = CAPACITY * BASE_RTT_US as f64 / 1e6;

    #[test]
    fn startup_roughly_doubles_the_pacing_rate_every_round() {
        let mut b = bbr();
        let mut pipe = Pipe::new(CAPACITY, BASE_RTT_US);
        let mut at_round: Vec<f64> = vec![];
        let mut last_round = 0;
        pipe.run(&mut b, 1_000, 10, |b, _| {
            if b.mode == Mode::Startup && b.round != last_round {
                last_round = b.round;
                at_round.push(b.pacing_rate_bytes_per_s());
            }
        });
        // While the pipe is far from full: ×2 per round, give or take the sample's lag and where
        // round ends fall between reports. The first two rounds pace at the initial 2.885·cwnd/RTT.
        let ramp: Vec<f64> = at_round.iter().copied().take_while(|&p| p < CAPACITY).collect();
        assert!(ramp.len() >= 5, "{at_round:?}");
        assert_eq!(ramp[0], ramp[1]);
        for w in ramp[1..].windows(2) {
            let ratio = w[1] / w[0];
            assert!((1.5..=2.5).contains(&ratio), "×{ratio} in {ramp:?}");
        }
        let per_round = (ramp[ramp.len() - 1] / ramp[1]).powf(1.0 / (ramp.len() - 2) as f64);
        assert!((1.75..=2.25).contains(&per_round), "×{per_round} per round in {ramp:?}");
    }

    #[test]
    fn converges_on_a_fixed_pipe_startup_drain_probe_bw_with_the_queue_drained() {
        let mut b = bbr();
        let mut pipe = Pipe::new(CAPACITY, BASE_RTT_US);
        let mut modes = vec![Mode::Startup];
        let (mut paced, mut reports, mut max_queue, mut min_queue, mut queue_sum) = (0.0, 0, 0.0f64, f64::MAX, 0.0);
        let mut startup_queue = 0.0f64;
        pipe.run(&mut b, 6_000, 10, |b, pipe| {
            if *modes.last().unwrap() != b.mode {
                modes.push(b.mode);
            }
            if b.mode == Mode::Startup || b.mode == Mode::Drain {
                startup_queue = startup_queue.max(pipe.queue_bytes);
            }
            if pipe.step > 4_000 {
                reports += 1;
                paced += b.pacing_rate_bytes_per_s();
                queue_sum += pipe.queue_bytes;
                max_queue = max_queue.max(pipe.queue_bytes);
                min_queue = min_queue.min(pipe.queue_bytes);
            }
        });
        assert_eq!(&modes[..3], &[Mode::Startup, Mode::Drain, Mode::ProbeBw], "{modes:?}");
        assert_eq!(modes.len(), 3, "no PROBE_RTT: the drain phases refresh the min RTT: {modes:?}");
        assert!(startup_queue > 0.5 * LINK_BDP, "STARTUP overshoots and builds a queue: {startup_queue}");
        let mean_pacing = paced / reports as f64;
        assert!((mean_pacing / CAPACITY - 1.0).abs() < 0.1, "mean pacing {mean_pacing}");
        let bw = var(&b, "bw_bytes_per_s");
        assert!(bw <= CAPACITY * (1.0 + 1e-9) && bw > 0.9 * CAPACITY, "bw {bw}");
        assert_eq!(b.min_rtt_us, Some(BASE_RTT_US));
        // The probe's 0.25 BDP of queue and its quantization budget (3 TSO bursts of 12 packets at
        // 1.25 × 10 MB/s, + 2), drained every cycle.
        let probe_queue = 0.25 * LINK_BDP + 38.0 * MSS_F;
        assert!(max_queue > probe_queue - 5.0 * MSS_F && max_queue < probe_queue + 0.05 * LINK_BDP, "max queue {max_queue}");
        assert!(min_queue < MSS_F, "min queue {min_queue}");
        assert!(queue_sum / (reports as f64) < 0.1 * LINK_BDP, "mean queue {}", queue_sum / reports as f64);
        // The window is 2 BDP (+ budget), the in-flight cap that pacing stays under.
        assert!((b.cwnd_bytes() / LINK_BDP - 2.0).abs() < 0.25, "cwnd {}", b.cwnd_bytes());
    }

    proptest! {
        #[test]
        fn never_nan_or_below_two_packets(
            seq in reports(60),
            cuts in prop::collection::vec((0usize..60, prop_oneof![-1.0f64..2.0, Just(f64::NAN)], any::<bool>()), 0..6),
            seeded in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let mut b = Bbr::new(BbrConfig { seed, ..BbrConfig::default() });
            let mut start = FlowStart::new(MSS, 10 * u64::from(MSS));
            if seeded {
                start.seed = Some(Seed { cwnd_bytes: 123_456, srtt_us: Some(RTT_US), min_rtt_us: Some(u64::MAX), ..Seed::default() });
            }
            let a = b.init(&start);
            check_sane(a.cwnd_bytes, MSS, &b.state())?;
            let mut mss = MSS;
            for (i, r) in seq.iter().enumerate() {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                for &(at, f, cap) in &cuts {
                    if at == i {
                        if cap { b.cap_rate(f * 1e7) } else { b.scale(f) }
                    }
                }
                let a = b.on_report(r);
                check_sane(a.cwnd_bytes, mss, &b.state())?;
                let p = pacing(&a);
                prop_assert!(p.is_finite() && p > 0.0, "pacing {}", p);
                prop_assert_eq!(a.cwnd_bytes, Some(b.cwnd_bytes()));
                prop_assert_eq!(p, b.pacing_rate_bytes_per_s());
            }
        }
    }

    #[test]
    fn the_filter_takes_a_reports_fastest_sample_and_else_the_slower_of_its_last_pair() {
        let with = |send: u64, recv: u64, max: Option<u64>| {
            let mut b = bbr();
            let r = Report {
                send_rate_bytes_per_s: Some(send),
                max_delivery_rate_bytes_per_s: max,
                ..rep(RTT_US, 10.0, Some(recv as f64), 10.0, RTT_US)
            };
            b.on_report(&r);
            var(&b, "bw_bytes_per_s")
        };
        assert_eq!(with(1_000_000, 2_000_000, Some(3_000_000)), 3e6, "the fastest of the report's per-ACK samples");
        assert_eq!(with(1_000_000, 2_000_000, None), 1e6, "the last sample: over the longer interval");
        assert_eq!(with(3_000_000, 2_000_000, Some(0)), 2e6, "a zero fastest sample is none");
    }
}
