//! HPCC: High Precision Congestion Control, driven by the INT that ACKs echo.
//!
//! Model (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019, §3, Algorithm 1).
//! Every switch egress a data packet crosses appends an INT record (queue length qLen, cumulative
//! bytes sent txBytes, timestamp ts, link rate B; §3.1, Fig. 4) and the receiver echoes the list in
//! its ACK. The sender keeps the previous INT of each hop (L) and, per ACK:
//!
//! - MeasureInflight (Alg. 1 lines 1–12): for every hop i,
//!   txRate = (ack.L[i].txBytes − L[i].txBytes) / (ack.L[i].ts − L[i].ts),
//!   u' = min(ack.L[i].qLen, L[i].qLen) / (B·T) + txRate / B; the largest u' (and its τ = ts delta)
//!   wins; τ ← min(τ, T); U ← (1 − τ/T)·U + τ/T·u'.
//! - ComputeWind (lines 13–24): if U ≥ η or incStage ≥ maxStage, W = Wc / (U/η) + W_AI (and, when
//!   Wc is updated, incStage = 0); else W = Wc + W_AI (and incStage += 1). Wc ← W only when
//!   updating, once per RTT (lines 25–32: ack.seq > lastUpdateSeq).
//! - The sender's window is W and its pacing rate R = W / T (§3.2).
//!
//! The report carrying `NetworkFeedback::Int` is one ACK's INT (the simulator's per-ACK reporting
//! hands every ACK's INT to the algorithm); reports without INT leave the window as it is.
//!
//! Choices where the paper leaves room (and which source was followed):
//! - "Once per RTT" (`wc_update`): the paper and the artifact (rdma-hw.cc `HandleAckHp`) update Wc
//!   and incStage on the first ACK with ack.seq > lastUpdateSeq, where lastUpdateSeq is the snd_nxt
//!   of the previous update: one real RTT, queueing included. Reports carry no sequence numbers,
//!   so `"round"` (the default) counts the same round in bytes (`round.rs`): it ends once the
//!   bytes acknowledged since the last update reach the bytes in flight at it (≥ where the
//!   artifact has >: one ACK earlier). The first INT only records L and opens the first round, as
//!   the artifact's first RTT does. `"base_rtt"` updates on the first INT report at least T of
//!   report time after the last update, which is what this module did before (until 2026-11-30):
//!   with a queue, the RTT exceeds T and Wc compounds several cuts per real RTT. Between updates W
//!   is recomputed from the same Wc (the artifact's fast react), so reactions within a round do
//!   not compound (§3.2).
//! - T (`base_rtt_us`): the path's base RTT, as the paper and its ns-3 artifact configure it
//!   (8 µs for the BFC thesis's Table 3.1). 0 (the default) = the smallest RTT sample the flow has
//!   seen (the seed's min RTT if the datapath gave one); until a sample arrives the algorithm does
//!   nothing but start at the datapath's initial window.
//! - W_AI (`ai_rate_mbps`): the paper gives W_AI only as "small"; the ns-3 artifact
//!   (alibaba-edu/High-Precision-Congestion-Control, simulation/run.py, cc "hp") configures it as
//!   a rate, `RATE_AI` = 10·bw/25 Mbit/s (40 Mbit/s at 100 G), and the window grows by
//!   RATE_AI · T. So W_AI = ai_rate × T; 0 (the default) = the artifact's 0.4 Mbit/s per Gbit/s of
//!   line rate.
//! - The first W is line rate × T (`line_rate_gbps`, default 100): HPCC flows start at line rate
//!   (§3.2; ns-3 `m_curRate = m_bps`). W never exceeds it (the artifact caps the rate at line
//!   rate), which also bounds the multiplicative increase Wc·η/U when U is near 0; U is floored at
//!   1e-6 in that division.
//! - U starts at `initial_u`, 1 by default as in the artifact (rdma-queue-pair.cc `hp.u = 1`; the
//!   paper does not say): the first measurements are averaged with "fully used", so a new flow
//!   does not read an empty EWMA as an idle path. The first INT report (and the first after the hop count
//!   changed, i.e. the path changed) only records L; a hop whose timestamp did not advance (a
//!   repeated or reordered INT, τ = 0) is skipped, and a report in which no hop could be measured
//!   leaves U as it was (W is still recomputed from Wc).
//! - Bytes: INT counts wire bytes, the window counts the datapath's (payload) bytes; U is a ratio of
//!   wire bytes to wire capacity and scales the window as is. The paper does the same.
//! - Losses and timeouts: HPCC assumes a lossless fabric (PFC) and does not react to loss; neither
//!   does this module.
//!
//! Datapath support: per-ACK INT (`NetworkFeedback::Int`), ideally one report per ACK; pacing.

use std::sync::Arc;

use crate::round::WindowEnd;
use ccp_contract::{
    declare_params, param_choice, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, IntHop, IntPath,
    NetworkFeedback, Pacing, Param, Report, StateVar, MIN_CWND_PKTS,
};

/// Target utilization η (paper §3.3 and ns-3: 0.95).
pub const ETA: f64 = 0.95;
/// Additive-increase stages before a multiplicative adjustment (paper §3.3 and ns-3: 5).
pub const MAX_STAGE: i64 = 5;
/// The ns-3 artifact's additive-increase rate as a fraction of the line rate (10·bw/25 Mbit/s).
pub const AI_PER_LINE_RATE: f64 = 0.4e-3;
/// Floor of U in Wc / (U/η).
const U_FLOOR: f64 = 1e-6;

param_choice! {
    /// When Wc (and incStage) take the window just computed.
    pub enum WcUpdate {
        /// Once per round of data: the paper's and the artifact's ack.seq > lastUpdateSeq.
        Round = "round",
        /// Once per T (the base RTT) of report time, however long the real RTT.
        BaseRtt = "base_rtt",
    }
}

declare_params! {
    /// HPCC's parameters, as declared; [`HpccConfig`] is what they configure (in bytes/s).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct HpccParams {
        pub eta: f64 = Param::float(ETA, Bound::Exclusive(0.0), Bound::Inclusive(1.0), "", "target utilization eta (paper §3.3: 0.95)"),
        pub max_stage: u32 = Param::int(MAX_STAGE, 0, 1000, "", "additive-increase rounds before a multiplicative step (paper §3.3: 5)"),
        pub base_rtt_us: f64 = Param::float(
            0.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0e7),
            "µs",
            "T, the base RTT (paper/ns-3: configured per topology, 8 µs in BFC Table 3.1); 0 = the flow's minimum RTT sample",
        ),
        pub ai_rate_mbps: f64 = Param::float(
            0.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0e6),
            "Mbit/s",
            "additive increase as a rate: W_AI = ai_rate × T; 0 = the ns-3 artifact's 10·bw/25 Mbit/s (40 Mbit/s at 100 G)",
        ),
        pub wc_update: WcUpdate = Param::choice(
            "round",
            "when Wc and incStage are updated: \"round\" = once per round of data (the bytes in flight at the last update acknowledged: the paper's ack.seq > lastUpdateSeq); \"base_rtt\" = once per T of report time",
        ),
        pub initial_u: f64 = Param::float(
            1.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(10.0),
            "",
            "U before the first measurement (the artifact: 1; the paper does not say)",
        ),
        pub line_rate_gbps: f64 = Param::float(
            100.0,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0e4),
            "Gbit/s",
            "the NIC's line rate: the initial and largest window is line rate × T (HPCC starts at line rate)",
        ),
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "hpcc",
    summary: "HPCC: per-hop INT utilization U, window Wc/(U/eta) + W_AI or Wc + W_AI, Wc updated once per RTT, paced at W/T",
    reference: "Li et al., HPCC: High Precision Congestion Control, SIGCOMM 2019, §3.1–3.3, Algorithm 1",
    params: HpccParams::PARAMS,
    build: |p| Ok(Arc::new(HpccConfig::from(&HpccParams::from_params(p)?))),
};

#[derive(Debug, Clone, Copy)]
pub struct HpccConfig {
    pub eta: f64,
    pub max_stage: u32,
    /// T, µs; 0 = the flow's minimum RTT.
    pub base_rtt_us: f64,
    pub wc_update: WcUpdate,
    pub initial_u: f64,
    /// Additive increase rate, bytes/s.
    pub ai_rate_bytes_per_s: f64,
    /// Line rate, bytes/s.
    pub line_rate_bytes_per_s: f64,
}

impl From<&HpccParams> for HpccConfig {
    fn from(p: &HpccParams) -> Self {
        let line_rate_bytes_per_s = p.line_rate_gbps * 1.0e9 / 8.0;
        let ai = p.ai_rate_mbps * 1.0e6 / 8.0;
        HpccConfig {
            eta: p.eta,
            max_stage: p.max_stage,
            base_rtt_us: p.base_rtt_us,
            wc_update: p.wc_update,
            initial_u: p.initial_u,
            ai_rate_bytes_per_s: if ai > 0.0 { ai } else { AI_PER_LINE_RATE * line_rate_bytes_per_s },
            line_rate_bytes_per_s,
        }
    }
}

impl Default for HpccConfig {
    fn default() -> Self {
        HpccConfig::from(&HpccParams::default())
    }
}

impl AlgorithmFactory for HpccConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Hpcc::new(*self))
    }
}

#[derive(Debug, Clone)]
pub struct Hpcc {
    cfg: HpccConfig,
    mss: f64,
    /// T, seconds, once known.
    t_s: Option<f64>,
    /// The smallest RTT seen, µs (T when `base_rtt_us` = 0).
    min_rtt_us: Option<u64>,
    /// W and Wc, bytes (None until T is known).
    w: Option<f64>,
    wc: f64,
    inc_stage: u32,
    /// The EWMA-smoothed normalized inflight U.
    u: f64,
    /// L: the previous INT (per hop), once one arrived.
    last: Option<IntPath>,
    /// Report time of the last Wc update, µs (`WcUpdate::BaseRtt`).
    last_update_us: Option<u64>,
    /// The round that ends at the next Wc update (`WcUpdate::Round`), once the first INT arrived.
    round: Option<WindowEnd>,
}

impl Hpcc {
    pub fn new(cfg: HpccConfig) -> Self {
        let t_s = (cfg.base_rtt_us > 0.0).then_some(cfg.base_rtt_us * 1e-6);
        Hpcc {
            cfg,
            mss: 1500.0,
            t_s,
            min_rtt_us: None,
            w: None,
            wc: 0.0,
            inc_stage: 0,
            u: cfg.initial_u,
            last: None,
            last_update_us: None,
            round: None,
        }
    }

    /// U, the normalized inflight estimate.
    pub fn utilization(&self) -> f64 {
        self.u
    }

    /// The window W, bytes, once T is known.
    pub fn window_bytes(&self) -> Option<f64> {
        self.w
    }

    /// Wc, bytes.
    pub fn reference_window_bytes(&self) -> f64 {
        self.wc
    }

    pub fn inc_stage(&self) -> u32 {
        self.inc_stage
    }

    fn w_max(&self, t: f64) -> f64 {
        (self.cfg.line_rate_bytes_per_s * t).max(self.w_min())
    }

    fn w_min(&self) -> f64 {
        MIN_CWND_PKTS * self.mss
    }

    fn w_ai(&self, t: f64) -> f64 {
        self.cfg.ai_rate_bytes_per_s * t
    }

    /// Learns T from the flow's minimum RTT when it is not configured; starts at line rate once T
    /// is known.
    fn learn_t(&mut self, rtt_min_us: Option<u64>) {
        if let Some(r) = rtt_min_us.filter(|&r| r > 0) {
            self.min_rtt_us = Some(self.min_rtt_us.map_or(r, |m| m.min(r)));
        }
        if self.cfg.base_rtt_us <= 0.0 {
            if let Some(m) = self.min_rtt_us {
                self.t_s = Some(m as f64 * 1e-6);
            }
        }
        if let (Some(t), None) = (self.t_s, self.w) {
            let w = self.w_max(t);
            self.w = Some(w);
            self.wc = w;
        }
    }

    /// MeasureInflight: the largest per-hop u' against the previous INT, and its τ, seconds.
    /// `None` when no hop could be measured.
    fn measure(&self, prev: &[IntHop], cur: &[IntHop], t: f64) -> Option<(f64, f64)> {
        let mut best: Option<(f64, f64)> = None;
        for (p, c) in prev.iter().zip(cur) {
            if c.ts_ns <= p.ts_ns || c.rate_bps == 0 {
                continue;
            }
            let tau = (c.ts_ns - p.ts_ns) as f64 * 1e-9;
            let b = c.rate_bps as f64 / 8.0;
            let tx_rate = c.tx_bytes.saturating_sub(p.tx_bytes) as f64 / tau;
            let u = c.queue_bytes.min(p.queue_bytes) as f64 / (b * t) + tx_rate / b;
            if best.is_none_or(|(bu, _)| u > bu) {
                best = Some((u, tau));
            }
        }
        best
    }

    /// ComputeWind: W from Wc and U; Wc and incStage change only when `update`.
    fn compute_wind(&mut self, t: f64, update: bool) -> f64 {
        let eta = self.cfg.eta;
        let (w_min, w_max, w_ai) = (self.w_min(), self.w_max(t), self.w_ai(t));
        let w = if self.u >= eta || self.inc_stage >= self.cfg.max_stage {
            let w = self.wc / (self.u.max(U_FLOOR) / eta) + w_ai;
            if update {
                self.inc_stage = 0;
            }
            w
        } else {
            let w = self.wc + w_ai;
            if update {
                self.inc_stage += 1;
            }
            w
        };
        let w = w.clamp(w_min, w_max);
        if update {
            self.wc = w;
        }
        w
    }

    /// Starts the round that ends at the next update: the data in flight now (the artifact's
    /// lastUpdateSeq = snd_nxt).
    fn open_round(&mut self, report: &Report) {
        self.round = Some(WindowEnd::of_data(report.inflight_bytes as f64, self.mss));
    }

    fn action(&self) -> Action {
        match (self.w, self.t_s) {
            (Some(w), Some(t)) => Action::cwnd(w).with_pacing(Pacing::BytesPerSec(w / t)),
            _ => Action::default(),
        }
    }
}

impl Algorithm for Hpcc {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.learn_t(start.seed.as_ref().and_then(|s| s.min_rtt_us));
        match self.w {
            Some(_) => self.action(),
            None => Action::cwnd(start.start_cwnd_bytes() as f64),
        }
    }

    fn on_report(&mut self, report: &Report) -> Action {
        self.mss = report.mss();
        let had_window = self.w.is_some();
        self.learn_t(report.rtt.map(|r| r.min_us));
        // Nothing to measure: only a window that T just made known goes out.
        let idle = |h: &Self| if had_window { Action::default() } else { h.action() };
        let Some(NetworkFeedback::Int(path)) = report.feedback else { return idle(self) };
        let Some(t) = self.t_s else {
            self.last = Some(path);
            return Action::default();
        };
        let prev = self.last.replace(path);
        let Some(prev) = prev.filter(|p| p.len() == path.len() && !path.is_empty()) else {
            self.open_round(report);
            return idle(self);
        };
        if let Some((u_hop, tau)) = self.measure(prev.hops(), path.hops(), t) {
            let k = tau.min(t) / t;
            self.u = (1.0 - k) * self.u + k * u_hop;
        }
        let now = report.now_us;
        let update = match self.cfg.wc_update {
            WcUpdate::Round => match self.round.as_mut() {
                Some(round) => round.credit(report.acked_bytes, now),
                None => true,
            },
            WcUpdate::BaseRtt => {
                let t_us = (t * 1e6).round().max(1.0) as u64;
                self.last_update_us.is_none_or(|last| now >= last.saturating_add(t_us))
            }
        };
        if update {
            self.last_update_us = Some(now);
            self.open_round(report);
        }
        self.w = Some(self.compute_wind(t, update));
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "cwnd_bytes", value: self.w.unwrap_or(0.0) },
            StateVar { name: "wc_bytes", value: self.wc },
            StateVar { name: "u", value: self.u },
            StateVar { name: "inc_stage", value: f64::from(self.inc_stage) },
            StateVar { name: "base_rtt_us", value: self.t_s.map_or(0.0, |t| t * 1e6) },
            StateVar { name: "round_remaining_bytes", value: self.round.and_then(|r| r.remaining_bytes()).unwrap_or(0.0) },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{check_sane, reports};
    use proptest::prelude::*;

    const T_US: f64 = 8.0;
    const T_NS: u64 = 8_000;
    /// 100 Gbit/s.
    const B_BPS: u64 = 100_000_000_000;
    /// B·T at 100 G and 8 µs, bytes.
    const BDP: f64 = 100_000.0;

    /// The hand-computed tests below step U from 0 and update Wc once per T of report time.
    fn cfg() -> HpccConfig {
        HpccConfig { base_rtt_us: T_US, wc_update: WcUpdate::BaseRtt, initial_u: 0.0, ..HpccConfig::default() }
    }

    fn started(cfg: HpccConfig) -> Hpcc {
        let mut h = Hpcc::new(cfg);
        h.init(&FlowStart::new(1000, 10_000));
        h
    }

    fn hop(queue_bytes: u64, tx_bytes: u64, ts_ns: u64) -> IntHop {
        IntHop { queue_bytes, tx_bytes, ts_ns, rate_bps: B_BPS }
    }

    fn rep(now_us: u64, hops: &[IntHop]) -> Report {
        Report { now_us, mss_bytes: 1000, feedback: Some(NetworkFeedback::Int(IntPath::new(hops).unwrap())), ..Report::default() }
    }

    /// One hop whose INT shows utilization `u` over a full T: the queue term is 0 and the link
    /// sent u·B·T bytes in T (queue held at `q` on both samples adds q/(B·T)).
    fn at_u(k: u64, u: f64, q: u64) -> IntHop {
        hop(q, (k as f64 * u * BDP).round() as u64, k * T_NS)
    }

    #[test]
    fn starts_at_line_rate_and_paces_at_w_over_t() {
        let mut h = Hpcc::new(cfg());
        let a = h.init(&FlowStart::new(1000, 10_000));
        assert_eq!(a.cwnd_bytes, Some(BDP));
        match a.pacing {
            Some(Pacing::BytesPerSec(r)) => assert!((r - 12.5e9).abs() < 1.0, "{r}"),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn utilization_from_a_hand_computed_two_hop_pair() {
        let mut h = started(cfg());
        // Hop 0: queue 20 KB then 30 KB, 10 KB sent in 1 µs = 10 GB/s = 0.8 B → u' = 0.2 + 0.8 = 1.0.
        // Hop 1: empty queue, 5 KB in 1 µs = 0.4 B → u' = 0.4. The max is hop 0, τ = 1 µs.
        h.on_report(&rep(100, &[hop(20_000, 0, 1_000), hop(0, 0, 1_000)]));
        assert_eq!(h.utilization(), 0.0, "the first INT only records L");
        h.on_report(&rep(101, &[hop(30_000, 10_000, 2_000), hop(50_000, 5_000, 2_000)]));
        // U = (1 − τ/T)·0 + τ/T·1.0 = 1/8.
        assert!((h.utilization() - 0.125).abs() < 1e-12, "U = {}", h.utilization());
        // A second pair: hop 1 now dominates. Hop 0: min(30 K, 0)/BDP + 0 = 0. Hop 1: queue
        // min(50 K, 40 K) = 0.4, 25 KB in 2 µs = 12.5 GB/s = 1.0 → 1.4, τ = 2 µs.
        h.on_report(&rep(102, &[hop(0, 10_000, 4_000), hop(40_000, 30_000, 4_000)]));
        let expect = (1.0 - 0.25) * 0.125 + 0.25 * 1.4;
        assert!((h.utilization() - expect).abs() < 1e-12, "U = {} vs {expect}", h.utilization());
    }

    #[test]
    fn tau_is_capped_at_t() {
        let mut h = started(cfg());
        h.on_report(&rep(0, &[hop(0, 0, 0)]));
        // 3 T between samples at 50 %: τ/T capped at 1, U = u' exactly.
        h.on_report(&rep(24, &[hop(0, (1.5 * BDP) as u64, 3 * T_NS)]));
        assert!((h.utilization() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn multiplicative_decrease_toward_eta_when_over_utilized() {
        let mut h = started(cfg());
        let w_ai = 40.0e6 / 8.0 * 8e-6; // 40 B at 100 G
        h.on_report(&rep(0, &[at_u(0, 1.0, BDP as u64)]));
        // Link at line rate with a standing queue of one BDP: u' = 1 + 1 = 2, τ = T → U = 2.
        let a = h.on_report(&rep(8, &[at_u(1, 1.0, BDP as u64)]));
        assert!((h.utilization() - 2.0).abs() < 1e-9);
        let expect = BDP / (2.0 / ETA) + w_ai;
        assert!((a.cwnd_bytes.unwrap() - expect).abs() < 1e-6, "W = {:?} vs {expect}", a.cwnd_bytes);
        assert_eq!(h.reference_window_bytes(), a.cwnd_bytes.unwrap());
        // Next RTT, same congestion: W shrinks again by η/U.
        let a = h.on_report(&rep(16, &[at_u(2, 1.0, BDP as u64)]));
        assert!((a.cwnd_bytes.unwrap() - (expect / (2.0 / ETA) + w_ai)).abs() < 1e-6);
        match a.pacing {
            Some(Pacing::BytesPerSec(r)) => assert!((r - a.cwnd_bytes.unwrap() / 8e-6).abs() < 1e-3),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn additive_increase_for_max_stage_rounds_then_multiplicative() {
        let mut h = started(HpccConfig { ai_rate_bytes_per_s: 1.0e9, ..cfg() }); // W_AI = 8000 B
        let w_ai = 8_000.0;
        // Bring W down first: U = 2 → Wc = BDP·η/2 + W_AI.
        h.on_report(&rep(0, &[at_u(0, 1.0, BDP as u64)]));
        h.on_report(&rep(8, &[at_u(1, 1.0, BDP as u64)]));
        let mut wc = BDP * ETA / 2.0 + w_ai;
        assert!((h.reference_window_bytes() - wc).abs() < 1e-6);
        assert_eq!(h.inc_stage(), 0);
        // Now the link runs at 50 % with no queue, one report per T: τ = T so U = 0.5 at once.
        let mut tx = BDP as u64;
        for round in 1..=MAX_STAGE as u64 {
            tx += (0.5 * BDP) as u64;
            let a = h.on_report(&rep(8 + 8 * round, &[hop(0, tx, (1 + round) * T_NS)]));
            assert!((h.utilization() - 0.5).abs() < 1e-9);
            wc += w_ai;
            assert!((a.cwnd_bytes.unwrap() - wc).abs() < 1e-6, "round {round}: W = {:?} vs {wc}", a.cwnd_bytes);
            assert_eq!(h.inc_stage() as u64, round);
        }
        // incStage = maxStage: the multiplicative step Wc/(U/η) + W_AI, and incStage resets.
        tx += (0.5 * BDP) as u64;
        let a = h.on_report(&rep(8 + 8 * 6, &[hop(0, tx, 7 * T_NS)]));
        let expect = (wc * ETA / 0.5 + w_ai).min(BDP);
        assert!((a.cwnd_bytes.unwrap() - expect).abs() < 1e-6, "W = {:?} vs {expect}", a.cwnd_bytes);
        assert_eq!(h.inc_stage(), 0);
    }

    #[test]
    fn with_base_rtt_wc_updates_once_per_t() {
        let mut h = started(cfg());
        h.on_report(&rep(0, &[at_u(0, 1.0, BDP as u64)]));
        let w1 = h.on_report(&rep(8, &[at_u(1, 1.0, BDP as u64)])).cwnd_bytes.unwrap();
        let wc1 = h.reference_window_bytes();
        assert_eq!(wc1, w1, "the update sets Wc = W");
        // Three more reports within the same T, same congestion (U stays 2): each recomputes W
        // from the same Wc (Alg. 1: W = Wc/(U/η) + W_AI without updating Wc), so W does not
        // compound from report to report.
        let w2 = wc1 * ETA / 2.0 + 40.0;
        for (i, now) in [10u64, 12, 14].into_iter().enumerate() {
            let k = 8_000 + 2_000 * (i as u64 + 1);
            let hp = hop(BDP as u64, (k as f64 * 12.5) as u64, k);
            let w = h.on_report(&rep(now, &[hp])).cwnd_bytes.unwrap();
            assert!((h.utilization() - 2.0).abs() < 1e-9);
            assert!((w - w2).abs() < 1e-6, "report at {now} µs: W = {w} vs {w2}");
            assert_eq!(h.reference_window_bytes(), wc1);
            assert_eq!(h.inc_stage(), 0);
        }
        // A full T after the update: Wc moves again.
        let w = h.on_report(&rep(16, &[hop(BDP as u64, 200_000, 16_000)])).cwnd_bytes.unwrap();
        assert!((w - w2).abs() < 1e-6);
        assert_eq!(h.reference_window_bytes(), w);
        let w = h.on_report(&rep(17, &[hop(BDP as u64, 212_500, 17_000)])).cwnd_bytes.unwrap();
        assert!((w - (w2 * ETA / 2.0 + 40.0)).abs() < 1e-6);
    }

    #[test]
    fn wc_updates_once_the_data_in_flight_at_the_last_update_is_acknowledged() {
        let mut h = started(HpccConfig { wc_update: WcUpdate::Round, ..cfg() });
        // The first INT records L and opens a round of the 60 KB then in flight.
        let r = |now_us, acked_bytes, k: u64| Report {
            acked_bytes,
            inflight_bytes: 60_000,
            ..rep(now_us, &[at_u(k, 1.0, BDP as u64)])
        };
        h.on_report(&r(0, 0, 0));
        // U = 2 from here on. 50 KB of the round acknowledged over 5 T: W follows Wc/(U/η) + W_AI
        // each time, but Wc stays, however much report time passes (the real RTT is longer than T).
        for k in 1..=5u64 {
            let w = h.on_report(&r(8 * k, 10_000, k)).cwnd_bytes.unwrap();
            assert!((w - (BDP * ETA / 2.0 + 40.0)).abs() < 1e-6, "report {k}: W = {w}");
            assert_eq!(h.reference_window_bytes(), BDP, "report {k}: Wc moved before the round ended");
        }
        // The ACK that brings the round to 60 KB updates Wc and opens the next round.
        let w1 = h.on_report(&r(48, 10_000, 6)).cwnd_bytes.unwrap();
        assert_eq!(h.reference_window_bytes(), w1);
        let w2 = h.on_report(&r(56, 59_999, 7)).cwnd_bytes.unwrap();
        assert!((w2 - (w1 * ETA / 2.0 + 40.0)).abs() < 1e-6);
        assert_eq!(h.reference_window_bytes(), w1, "one byte short of the second round");
        let w3 = h.on_report(&r(64, 1, 8)).cwnd_bytes.unwrap();
        assert_eq!(h.reference_window_bytes(), w3);
        assert!((w3 - w2).abs() < 1e-6);
    }

    #[test]
    fn u_starts_at_initial_u() {
        for (initial_u, u_hop) in [(1.0, 0.5), (0.0, 0.5), (1.0, 2.0)] {
            let mut h = started(HpccConfig { initial_u, ..cfg() });
            assert_eq!(h.utilization(), initial_u);
            h.on_report(&rep(0, &[at_u(0, u_hop, 0)]));
            // Half a T between the samples: U = (1 − 1/2)·U0 + 1/2·u'.
            h.on_report(&rep(4, &[hop(0, (u_hop * BDP / 2.0).round() as u64, T_NS / 2)]));
            let expect = 0.5 * initial_u + 0.5 * u_hop;
            assert!((h.utilization() - expect).abs() < 1e-9, "U = {} vs {expect}", h.utilization());
        }
    }

    #[test]
    fn repeated_timestamps_and_missing_int_are_harmless() {
        let mut h = started(cfg());
        let before = h.window_bytes().unwrap();
        // No INT: nothing changes.
        assert!(h.on_report(&Report { now_us: 1, mss_bytes: 1000, ..Report::default() }).is_empty());
        // The same INT twice (τ = 0) and a reordered one (ts going back): no measurement.
        for _ in 0..3 {
            let a = h.on_report(&rep(2, &[hop(5_000, 1_000, 1_000), hop(0, 0, 1_000)]));
            assert_eq!(h.utilization(), 0.0);
            if let Some(w) = a.cwnd_bytes {
                assert!(w.is_finite() && w > 0.0);
            }
        }
        let a = h.on_report(&rep(3, &[hop(5_000, 900, 500), hop(0, 0, 500)]));
        assert_eq!(h.utilization(), 0.0);
        let w = a.cwnd_bytes.unwrap();
        assert!(w.is_finite() && w > 0.0 && w <= before);
        // A zero rate link is skipped too.
        let z = IntHop { rate_bps: 0, ..hop(5_000, 2_000, 9_000) };
        h.on_report(&rep(4, &[z, hop(0, 0, 9_000)]));
        assert!(h.utilization().is_finite());
        for v in h.state() {
            assert!(v.value.is_finite(), "{}", v.name);
        }
    }

    #[test]
    fn ai_rate_defaults_to_the_artifact_scaled_by_line_rate() {
        let cfg = |t: &str| {
            let p = ccp_contract::Params::parse(INFO.name, HpccParams::PARAMS, &toml::from_str(t).unwrap()).unwrap();
            HpccConfig::from(&HpccParams::from_params(&p).unwrap())
        };
        let d = cfg("");
        assert!((d.ai_rate_bytes_per_s - 40.0e6 / 8.0).abs() < 1e-6, "40 Mbit/s at 100 G");
        assert!((d.ai_rate_bytes_per_s - HpccConfig::default().ai_rate_bytes_per_s).abs() < 1e-6);
        assert!((cfg("line_rate_gbps = 25.0").ai_rate_bytes_per_s - 10.0e6 / 8.0).abs() < 1e-6);
        assert!((cfg("ai_rate_mbps = 50.0").ai_rate_bytes_per_s - 50.0e6 / 8.0).abs() < 1e-6);
        assert_eq!((d.eta, d.max_stage, d.base_rtt_us, d.wc_update, d.initial_u), (0.95, 5, 0.0, WcUpdate::Round, 1.0));
    }

    #[test]
    fn base_rtt_defaults_to_the_min_rtt() {
        let mut h = Hpcc::new(HpccConfig::default());
        let a = h.init(&FlowStart::new(1000, 10_000));
        assert_eq!(a.cwnd_bytes, Some(10_000.0), "no T yet: the datapath's initial window");
        let r = Report {
            now_us: 10,
            mss_bytes: 1000,
            rtt: Some(ccp_contract::RttStats { min_us: 20, max_us: 20, last_us: 20, srtt_us: 20, mean_us: 20, samples: 1 }),
            feedback: Some(NetworkFeedback::Int(IntPath::new(&[hop(0, 0, 0)]).unwrap())),
            ..Report::default()
        };
        let a = h.on_report(&r);
        assert!((a.cwnd_bytes.unwrap() - 250_000.0).abs() < 1e-6, "line rate × 20 µs: {:?}", a.cwnd_bytes);
    }

    proptest! {
        #[test]
        fn stays_sane_on_arbitrary_reports(rs in reports(200), hops in proptest::collection::vec((0u64..1u64 << 40, 0u64..1u64 << 40, 0u64..1u64 << 40, 0u64..1u64 << 40), 0..200)) {
            let mut h = Hpcc::new(HpccConfig::default());
            h.init(&FlowStart::new(1448, 14_480));
            for (i, mut r) in rs.into_iter().enumerate() {
                if let Some(&(q, tx, ts, b)) = hops.get(i) {
                    let hp = IntHop { queue_bytes: q, tx_bytes: tx, ts_ns: ts, rate_bps: b };
                    r.feedback = Some(NetworkFeedback::Int(IntPath::new(&[hp, hp]).unwrap()));
                }
                let a = h.on_report(&r);
                // Reports without INT (or before T is known) leave the window alone.
                match a.cwnd_bytes {
                    Some(c) => check_sane(Some(c), r.mss_bytes, &h.state())?,
                    None => check_sane(Some(f64::MAX), 1, &h.state())?,
                }
                if let Some(Pacing::BytesPerSec(p)) = a.pacing {
                    prop_assert!(p.is_finite() && p > 0.0);
                }
            }
        }
    }
}
