//! DCQCN: the RoCEv2 congestion control of Mellanox NICs (Data Center QCN), driven by reports.
//!
//! Model (Zhu et al., SIGCOMM 2015, §3.1 and Figs. 5–7). Three parties:
//! - CP, the switch (Fig. 5): RED-style ECN marking, probability rising from 0 at K_min to P_max at
//!   K_max. That is the network's part (the simulator's queue disciplines), not this file's.
//! - NP, the receiver NIC (Fig. 6): when a CE-marked packet arrives for a flow and no CNP (congestion
//!   notification packet) was sent for the flow in the last N = 50 µs, it sends one at once; so at
//!   most one CNP per N per flow, whatever the marking rate.
//! - RP, the sender NIC's rate limiter (Fig. 7), below.
//!
//! The RP keeps a current rate R_C, a target rate R_T and a reduction factor α:
//!
//!   on a CNP:                      R_T ← R_C;  R_C ← R_C·(1 − α/2);  α ← (1 − g)·α + g        (eq. 1)
//!   every K = 55 µs without a CNP: α ← (1 − g)·α                                               (eq. 2)
//!
//! and the rate climbs back on increase events from two clocks, both reset by a CNP: a timer (one
//! event per T µs) and a byte counter (one event per B bytes sent). Each keeps a stage count (T, BC:
//! its events since the last CNP). After incrementing the stage of the clock that fired:
//!
//!   max(T, BC) ≤ F   fast recovery:     R_C ← (R_T + R_C)/2                                       (eq. 3)
//!   min(T, BC) > F   hyper increase:    R_T ← R_T + i·R_HAI, i = min(T, BC) − F;  R_C ← (R_T + R_C)/2
//!   otherwise        additive increase: R_T ← R_T + R_AI;  R_C ← (R_T + R_C)/2                    (eq. 4)
//!
//! So F = 5 fast-recovery events halve the gap to R_T five times (paper: "for F = 5 successive
//! iterations"), then additive increase begins as soon as either clock passes F, and hyper increase
//! once both have. R_C and R_T are capped at the line rate and R_C is floored at `min_rate_mbps`.
//! There is no slow start: a flow starts at line rate (§3.1, "there is no slow start phase").
//!
//! Where the NP lives. In RoCEv2 the receiver NIC generates CNPs. Here the receiver is an ordinary
//! transport that echoes CE marks in its ACKs (`Report::ce_pkts`, `ce_bytes`, `ece_acks`), so the NP
//! runs at the sender, inside this algorithm, on the echoed marks; the extra delay is the ACK path,
//! which a CNP would have taken too. Its rule is the paper's: a CNP at a marked packet when none was
//! generated in the last `cnp_interval_us`, on the datapath clock (`now_us`). A report may carry one
//! ACK (the simulator's per-ACK mode) or a batch (the agent's intervals, 1 ms here); the marks'
//! instants inside a batch are unknown, so a report with m marks over (s, e] (s = the previous
//! report's `now_us`) is read as m marks evenly spread with the last at its end, t_j = s + ⌈j·(e − s)/m⌉
//! for j = 1..m, and the rule is applied to those instants. That is exact for per-ACK reports (one
//! mark, at `now_us`) and for an evenly marked ACK stream however it is batched: the same CE
//! timeline gives the same CNPs, hence the same rate trajectory (tested). A batch of duration D
//! yields at most min(m, ⌊D/N⌋ + 1) CNPs. m is `ce_pkts`, else `ce_bytes` in MSS, else `ece_acks`.
//!
//! Time. There is no clock: the RP's timers are driven by `now_us`. A report processes, in time
//! order, every event in (s, e]: its CNPs (at the instants above), timer expiries (every T µs from the
//! last CNP), byte-counter expiries, and α periods. An expiry due at the same instant as a CNP is
//! processed before it (it had fired when the CNP arrived); a timer and a byte-counter expiry at the
//! same instant, timer first. α periods are applied in closed form (they only multiply α) up to each
//! CNP and to the report's end.
//!
//! Byte counter. The RP counts bytes sent; reports carry bytes acknowledged, a proxy for what was
//! sent one RTT earlier (equal in steady state). A report's acknowledged bytes are taken as arriving
//! evenly over (s, e], so byte-counter expiries fall at interpolated instants between the timer's and
//! the CNPs (splitting a report does not change them). Bytes before a CNP are discarded by its reset.
//!
//! Bounded catch-up. A report after a long silence owes many timer expiries. Once R_C and R_T are
//! back at line rate the increase clocks are stopped (further events would change nothing: R_T is
//! capped and the next CNP resets both stages), which bounds ordinary catch-up to the ~10³ events of
//! a recovery from the floor; α decays in closed form. Against absurd reports (a `now_us` jump of
//! years, 2⁶⁴ acknowledged bytes) a report processes at most `MAX_INCREASE_EVENTS_PER_REPORT`
//! increase events — the rest are dropped, the timer keeping its phase — and examines only its last
//! `MAX_CNPS_PER_REPORT`·N µs for CNPs (its last mark is always in them).
//!
//! Window. DCQCN is rate-based (RoCE NICs have no window): the action paces at R_C and sets a window
//! that does not bind, cwnd = max(2 MSS, `cwnd_gain`·R_C·SRTT), with `init_rtt_us` standing in for
//! the SRTT until the first RTT sample. With gain 2 the window holds twice what the rate keeps in
//! flight at the current RTT, so it never limits a flow in steady state, yet it shrinks with R_C at
//! once after a cut and stays finite for the datapath (the agent clamps it to the datapath's limit).
//! `window_rtt_us` (default 0: the SRTT) fixes the RTT of that product instead: with gain 1 and the
//! path's base RTT the window is the HPCC paper's "DCQCN+win", the bandwidth-delay product scaled by
//! R_C / line rate (the HPCC artifact's HAS_WIN and VAR_WIN), which bounds what a flow keeps queued.
//!
//! Choices where the paper is silent or the authors' ns-3 artifact (bobzhuyb/ns3-rdma,
//! `qbb-net-device.cc`, read for comparison only) differs:
//! - Eq. 1 is applied in the paper's order: the cut uses α before its update (the artifact updates α
//!   first). With α = 1 both halve.
//! - Fast recovery lasts F events (the paper's "F = 5 successive iterations", as 802.1Qau's five
//!   cycles, specs/dc.md §4.3); the artifact's `stage < F` test gives F − 1.
//! - α is not decayed before the first CNP (the artifact starts its α timer at the first CNP), so a
//!   flow's first cut is the paper's α₀ = 1 halving however long it ran unmarked.
//! - `clamp_target_rate = false` (default true, the paper's eq. 1): a CNP sets R_T ← R_C only when an
//!   increase event came since the last cut; cuts in a row keep the earlier target. That is the
//!   HPCC authors' ns-3 DCQCN ("Mellanox version", `rdma-hw.cc`, CLAMP_TARGET_RATE 0 in its
//!   `run.py`). On the BFC thesis's Table 3.1 flows it brings our cross flows' FCTs from 1.3–3.4×
//!   the artifact's to within 12 % (configs/sim/bfc-table-3-1.toml). Default: the paper.
//! - `timer_stage_increase = true` (default false): the increase of the HPCC artifact's RP, which has
//!   no byte counter: after a cut, F timer events of fast recovery, one of additive increase, then
//!   hyper increase by a constant R_HAI per event. The paper's rule needs both clocks past F for
//!   hyper increase, so with a byte counter that rarely fires a flow held down by congestion climbs
//!   by R_AI alone; on Table 3.1's flows that is the artifact's long flow's lead (bfc-table-3-1.toml).
//! - `decrease_check_us` > 0 (default 0, the paper's cut at each CNP): the cut of the HPCC
//!   artifact's RP (`CheckRateDecreaseMlx`), which a CNP only flags: a check every
//!   `decrease_check_us` from the flow's first CNP cuts (eq. 1's rate part, with the α of that
//!   moment) if a CNP came since the last check, and restarts the increase clocks then. So the
//!   first cut comes one check interval after the first CNP, at line rate meanwhile (its
//!   RATE_DECREASE_INTERVAL: 4 µs in its `run.py` dcqcn, 50 µs in dcqcn_paper). α still moves at
//!   each CNP, as in the paper.
//! - Not implemented: the artifact's and 802.1Qau's halving of T and B in hyper increase, and its
//!   target-rate reduction (R_T/8); neither is in the paper. DCQCN has no loss reaction (RoCE runs
//!   over PFC; the paper has none); losses and timeouts are ignored here.
//! - Seeded flows (hot swap) start at the seeded pacing rate, if any, with R_T = R_C and both clocks
//!   running, as after a CNP that cut nothing; otherwise at line rate.
//! - DCQCN needs ECN-marking switches and a receiver that echoes every mark (as DCTCP's does): on a
//!   path that never marks, the flow stays at line rate (`FlowStart::ecn` is not consulted).
//!
//! References: Y. Zhu, H. Eran, D. Firestone, C. Guo, M. Lipshteyn, Y. Liron, J. Padhye, S. Raindel,
//! M. H. Yahia, M. Zhang, "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1
//! (CP, NP, RP algorithms; Figs. 5–7; eqs. 1–4), §5 (parameters); the authors' ns-3 artifact,
//! github.com/bobzhuyb/ns3-rdma (CoNEXT 2016 release): `qbb-net-device.cc` and `mix/config.txt`.

use std::sync::Arc;

use ccp_contract::{
    declare_params, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, Pacing, Param, ParamError, Params,
    Report, ReportPolicy, StateVar, MAX_REPORT_INTERVAL_US, MIN_CWND_PKTS, MIN_REPORT_INTERVAL_US,
};

/// NIC line rate, Gbit/s: the paper's 40 Gbit/s testbed NICs and the artifact's sample run
/// (README: "a 2:1 incast at 40Gbps"). The flow starts here and R_C, R_T never exceed it.
pub const LINE_RATE_GBPS: f64 = 40.0;
/// Floor of R_C, Mbit/s: the artifact's `MinRate` default (100Mb/s); the paper gives none.
pub const MIN_RATE_MBPS: f64 = 100.0;
/// Gain g of eqs. 1–2, dimensionless: paper §3.1/§5 (1/256); artifact `mix/config.txt`
/// DCTCP_GAIN 0.00390625 (its attribute default, 1/16, is DCTCP's).
pub const G: f64 = 1.0 / 256.0;
/// Initial α, dimensionless: paper §3.1 (α starts at 1, so the first cut halves). The artifact
/// starts at 0.5.
pub const ALPHA_INIT: f64 = 1.0;
/// N, the NP's CNP interval, µs: paper §3.1 ("N = 50 µs"); artifact `CNPInterval` 50 and
/// `mix/config.txt` CNP_INTERVAL 50.
pub const CNP_INTERVAL_US: u64 = 50;
/// K, the α update period, µs: paper §3.1 ("K = 55 µs"; K must exceed N); artifact
/// `AlphaResumInterval` 55 and ALPHA_RESUME_INTERVAL 55.
pub const ALPHA_UPDATE_US: u64 = 55;
/// T, the rate-increase timer, µs: paper §5 (55 µs; the QCN-derived starting point was 1.5 ms).
/// The artifact's attribute default is that 1500 µs; its sample config uses 60.
pub const RATE_TIMER_US: u64 = 55;
/// B, the byte counter, bytes: paper §5 (10 MB, so that the timer drives most increases). The
/// artifact's attribute default is QCN's 150 KB; its sample configs use 300 KB and 300 MB.
pub const BYTE_COUNTER_BYTES: u64 = 10_000_000;
/// F, fast-recovery events, count: paper §3.1 (F = 5); artifact `FastRecoveryTimes` 5.
pub const FAST_RECOVERY_STEPS: u64 = 5;
/// R_AI, the additive-increase step of R_T, Mbit/s: paper §5 (40 Mbit/s); artifact RATE_AI 40Mb/s
/// (its attribute default, 5 Mb/s, is 802.1Qau's).
pub const RAI_MBPS: f64 = 40.0;
/// R_HAI, the hyper-increase step of R_T, Mbit/s: the artifact's `mix/config.txt` RATE_HAI 200Mb/s
/// (the paper defers hyper increase to QCN and gives no value; 802.1Qau's default is 50 Mb/s).
pub const RHAI_MBPS: f64 = 200.0;
/// Window headroom over rate × SRTT, dimensionless (ours: the window must not bind, see above).
pub const CWND_GAIN: f64 = 2.0;
/// The RTT the window assumes before the first sample, µs (ours: the agent's shortest report
/// interval, by which the first RTT arrives).
pub const INIT_RTT_US: u64 = 1_000;
/// Report interval requested, µs: the agent's minimum. DCQCN acts on a 50 µs scale; batched reports
/// are handled by the NP emulation above.
pub const REPORT_INTERVAL_US: u64 = MIN_REPORT_INTERVAL_US;
/// At most this many CNPs per report: only the report's last `MAX_CNPS_PER_REPORT`·N µs are examined.
/// 1024 cuts put any rate at the floor; an ordinary 1 ms report has at most 21.
pub const MAX_CNPS_PER_REPORT: usize = 1024;
/// At most this many rate-increase events per report; more are dropped (see "Bounded catch-up").
/// A full recovery from the floor at the defaults, timer only, takes 1033 (tested).
pub const MAX_INCREASE_EVENTS_PER_REPORT: u32 = 4096;
/// R_C within this fraction of the line rate is the line rate (the averaging of eq. 3 only
/// approaches its target).
const LINE_RATE_SNAP: f64 = 1e-12;
/// Beyond this many α periods at once, α decays by one `powf` instead of repeated multiplication
/// (below it the result is bit-identical however the periods are split across reports).
const ALPHA_DECAY_LOOP_MAX: u64 = 1024;
const BITS_PER_BYTE: f64 = 8.0;
const BITS_PER_MBIT: f64 = 1e6;
const MBIT_PER_GBIT: f64 = 1e3;
const US_PER_S: f64 = 1e6;

declare_params! {
    /// DCQCN's parameters, as declared; [`DcqcnConfig`] is what they configure (in bytes/s).
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct DcqcnParams {
        pub line_rate_gbps: f64 = Param::float(
            LINE_RATE_GBPS,
            Bound::Exclusive(0.0),
            Bound::Inclusive(10_000.0),
            "Gbit/s",
            "NIC line rate: the flow starts here (no slow start) and R_C, R_T are capped here (paper testbed: 40)",
        ),
        pub min_rate_mbps: f64 = Param::float(
            MIN_RATE_MBPS,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0e7),
            "Mbit/s",
            "floor of the current rate R_C (artifact MinRate: 100); at most the line rate",
        ),
        pub g: f64 = Param::float(
            G,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "gain of the alpha update, eqs. 1-2 (paper: 1/256)",
        ),
        pub alpha_init: f64 = Param::float(
            ALPHA_INIT,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "initial alpha (paper: 1, so the first CNP halves the rate)",
        ),
        pub cnp_interval_us: u64 = Param::int(
            CNP_INTERVAL_US as i64,
            1,
            1_000_000,
            "µs",
            "N: at most one CNP per flow per this interval, emulated at the sender on echoed CE marks (paper: 50)",
        ),
        pub alpha_update_us: u64 = Param::int(
            ALPHA_UPDATE_US as i64,
            2,
            10_000_000,
            "µs",
            "K: alpha decays by (1 - g) per this period without a CNP; must exceed cnp_interval_us (paper: 55)",
        ),
        pub rate_timer_us: u64 = Param::int(
            RATE_TIMER_US as i64,
            1,
            10_000_000,
            "µs",
            "T: period of the rate-increase timer, restarted by every CNP (paper: 55; artifact default 1500)",
        ),
        pub byte_counter_bytes: u64 = Param::int(
            BYTE_COUNTER_BYTES as i64,
            1,
            1_000_000_000_000,
            "bytes",
            "B: one rate-increase event per this many bytes, counted on acknowledged bytes as a proxy for sent (paper: 10 MB)",
        ),
        pub fast_recovery_steps: u64 = Param::int(
            FAST_RECOVERY_STEPS as i64,
            0,
            1000,
            "events",
            "F: increase events of fast recovery before additive increase; hyper increase once both clocks pass it (paper: 5)",
        ),
        pub rai_mbps: f64 = Param::float(
            RAI_MBPS,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0e6),
            "Mbit/s",
            "R_AI: additive-increase step of the target rate (paper: 40)",
        ),
        pub rhai_mbps: f64 = Param::float(
            RHAI_MBPS,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0e6),
            "Mbit/s",
            "R_HAI: hyper-increase step of the target rate, times the events past F (artifact config: 200)",
        ),
        pub clamp_target_rate: bool = Param::bool(
            true,
            "every CNP sets R_T to R_C (eq. 1); false: only after an increase event since the last cut, as Mellanox NICs and the HPCC artifact by default (CLAMP_TARGET_RATE 0)",
        ),
        pub timer_stage_increase: bool = Param::bool(
            false,
            "increase as the HPCC artifact's (Mellanox) RP: by the timer's stage alone, F events of fast recovery, one additive, then R_HAI per event; the byte counter is unused",
        ),
        pub decrease_check_us: u64 = Param::int(
            0,
            0,
            10_000_000,
            "µs",
            "0: cut at each CNP (eq. 1). Else cut as the HPCC artifact's (Mellanox) RP: on a check every this many µs from the first CNP, if a CNP came since the last (RATE_DECREASE_INTERVAL: 4 in its run.py, 50 as dcqcn_paper)",
        ),
        pub window_rtt_us: f64 = Param::float(
            0.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(10_000_000.0),
            "µs",
            "the RTT of the window's rate x RTT; 0: the SRTT (a window that does not bind). The base RTT with cwnd_gain 1: DCQCN+win",
        ),
        pub cwnd_gain: f64 = Param::float(
            CWND_GAIN,
            Bound::Inclusive(1.0),
            Bound::Inclusive(1000.0),
            "",
            "window = max(2 MSS, cwnd_gain x rate x SRTT): headroom so that the window never binds before the rate",
        ),
        pub init_rtt_us: u64 = Param::int(INIT_RTT_US as i64, 1, 10_000_000, "µs", "RTT the window assumes until the first RTT sample"),
        pub report_interval_us: u64 = Param::int(
            REPORT_INTERVAL_US as i64,
            MIN_REPORT_INTERVAL_US as i64,
            MAX_REPORT_INTERVAL_US as i64,
            "µs",
            "report interval requested from the datapath (DCQCN acts on a 50 µs scale: the shortest the agent grants)",
        ),
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "dcqcn",
    summary: "DCQCN: rate-based; CNPs from echoed CE (at most 1 per 50 µs) cut by alpha/2; timer and byte counter recover the rate",
    reference: "Zhu et al., Congestion Control for Large-Scale RDMA Deployments, SIGCOMM 2015 §3.1 (Figs. 5-7), §5; ns-3 artifact bobzhuyb/ns3-rdma",
    params: DcqcnParams::PARAMS,
    build,
};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnConfig {
    pub line_rate_bytes_per_s: f64,
    pub min_rate_bytes_per_s: f64,
    pub g: f64,
    pub alpha_init: f64,
    pub cnp_interval_us: u64,
    pub alpha_update_us: u64,
    pub rate_timer_us: u64,
    pub byte_counter_bytes: f64,
    pub fast_recovery_steps: u64,
    pub rai_bytes_per_s: f64,
    pub rhai_bytes_per_s: f64,
    pub clamp_target_rate: bool,
    pub timer_stage_increase: bool,
    pub decrease_check_us: u64,
    pub cwnd_gain: f64,
    pub window_rtt_us: f64,
    pub init_rtt_us: u64,
    pub report_interval_us: u64,
}

fn mbps_to_bytes_per_s(mbps: f64) -> f64 {
    mbps * BITS_PER_MBIT / BITS_PER_BYTE
}

impl From<&DcqcnParams> for DcqcnConfig {
    fn from(p: &DcqcnParams) -> Self {
        DcqcnConfig {
            line_rate_bytes_per_s: mbps_to_bytes_per_s(p.line_rate_gbps * MBIT_PER_GBIT),
            min_rate_bytes_per_s: mbps_to_bytes_per_s(p.min_rate_mbps),
            g: p.g,
            alpha_init: p.alpha_init,
            cnp_interval_us: p.cnp_interval_us,
            alpha_update_us: p.alpha_update_us,
            rate_timer_us: p.rate_timer_us,
            byte_counter_bytes: p.byte_counter_bytes as f64,
            fast_recovery_steps: p.fast_recovery_steps,
            rai_bytes_per_s: mbps_to_bytes_per_s(p.rai_mbps),
            rhai_bytes_per_s: mbps_to_bytes_per_s(p.rhai_mbps),
            clamp_target_rate: p.clamp_target_rate,
            timer_stage_increase: p.timer_stage_increase,
            decrease_check_us: p.decrease_check_us,
            cwnd_gain: p.cwnd_gain,
            window_rtt_us: p.window_rtt_us,
            init_rtt_us: p.init_rtt_us,
            report_interval_us: p.report_interval_us,
        }
    }
}

impl Default for DcqcnConfig {
    fn default() -> Self {
        DcqcnConfig::from(&DcqcnParams::default())
    }
}

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let params = DcqcnParams::from_params(p)?;
    let line_mbps = params.line_rate_gbps * MBIT_PER_GBIT;
    let min_mbps = params.min_rate_mbps;
    if min_mbps > line_mbps {
        return Err(p.invalid("min_rate_mbps", format!("{min_mbps} Mbit/s exceeds the line rate ({line_mbps} Mbit/s)")));
    }
    let cfg = DcqcnConfig::from(&params);
    if cfg.alpha_update_us <= cfg.cnp_interval_us {
        return Err(p.invalid(
            "alpha_update_us",
            format!(
                "{} µs must exceed cnp_interval_us ({} µs): paper §3.1, K must be larger than the CNP generation timer",
                cfg.alpha_update_us, cfg.cnp_interval_us
            ),
        ));
    }
    Ok(Arc::new(cfg))
}

impl AlgorithmFactory for DcqcnConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Dcqcn::new(*self))
    }
}

/// The marked packets a report carries: `ce_pkts`, else `ce_bytes` in MSS (rounded up), else
/// `ece_acks` (a datapath that only counts ECE-flagged ACKs).
fn marks(report: &Report) -> u64 {
    if report.ce_pkts > 0 {
        report.ce_pkts
    } else if report.ce_bytes > 0 {
        report.ce_bytes.div_ceil(u64::from(report.mss_bytes.max(1)))
    } else {
        report.ece_acks
    }
}

/// The NP at the sender: the CNP instants of a report with `m` marks over (s, e], given the last
/// CNP before it. Marks are taken at t_j = s + ⌈j·(e − s)/m⌉, j = 1..m (at e when e = s), and a CNP
/// fires at each mark at least `interval_us` after the previous CNP. Only the last
/// `MAX_CNPS_PER_REPORT` intervals of the report are examined.
pub fn cnp_instants(s: u64, e: u64, m: u64, last_cnp_us: Option<u64>, interval_us: u64) -> Vec<u64> {
    let mut out = Vec::new();
    if m == 0 || e < s {
        return out;
    }
    let interval_us = interval_us.max(1);
    let span = u128::from(e - s);
    let m128 = u128::from(m);
    let tail_start = e.saturating_sub((MAX_CNPS_PER_REPORT as u64 - 1).saturating_mul(interval_us));
    let mut earliest = last_cnp_us.map_or(0, |l| l.saturating_add(interval_us)).max(tail_start);
    while out.len() < MAX_CNPS_PER_REPORT && earliest <= e {
        let t = if span == 0 {
            e
        } else {
            // The first j with t_j ≥ earliest. With E = earliest − s: ⌈j·span/m⌉ ≥ E ⟺ j·span > (E − 1)·m
            // ⟺ j ≥ ⌊(E − 1)·m/span⌋ + 1; every j ≥ 1 qualifies when E = 0.
            let need = u128::from(earliest.saturating_sub(s));
            let j = need.checked_sub(1).map_or(1, |n| n * m128 / span + 1);
            if j > m128 {
                break;
            }
            s + (j * span).div_ceil(m128) as u64
        };
        out.push(t);
        if t == u64::MAX {
            break;
        }
        earliest = t.saturating_add(interval_us);
    }
    out
}

/// A report's acknowledged bytes, taken as arriving evenly over its interval (s, s + span].
struct ByteFeed {
    s: u64,
    span: u64,
    acked: f64,
    /// Bytes of the report already accounted for (credited to the byte counter or discarded).
    consumed: f64,
}

impl ByteFeed {
    /// Bytes arrived by `t`.
    fn at(&self, t: u64) -> f64 {
        if self.span == 0 {
            self.acked
        } else {
            self.acked * (t.saturating_sub(self.s) as f64 / self.span as f64).min(1.0)
        }
    }

    /// When the `c`-th byte arrives.
    fn time_of(&self, c: f64) -> f64 {
        if self.span == 0 || self.acked <= 0.0 {
            self.s as f64
        } else {
            self.s as f64 + c / self.acked * self.span as f64
        }
    }
}

#[derive(Debug, Clone)]
pub struct Dcqcn {
    cfg: DcqcnConfig,
    mss: f64,
    /// The latest smoothed RTT reported, µs.
    srtt_us: Option<u64>,
    /// Current rate R_C, bytes/s.
    rc: f64,
    /// Target rate R_T, bytes/s.
    rt: f64,
    alpha: f64,
    /// The increase clocks run (from a CNP until R_C and R_T are back at line rate).
    recovering: bool,
    /// Next timer expiry, µs.
    next_timer_us: u64,
    /// Stage counts since the last CNP: timer events (T) and byte-counter events (BC).
    t_stage: u64,
    bc_stage: u64,
    /// Bytes until the next byte-counter event.
    byte_left: f64,
    /// Time of the last CNP, from which α periods count; `None` before the first CNP.
    alpha_anchor_us: Option<u64>,
    /// α periods since the anchor already applied.
    alpha_decays: u64,
    last_cnp_us: Option<u64>,
    /// `decrease_check_us` > 0: the first CNP, from which the rate-decrease checks count.
    check_anchor_us: Option<u64>,
    /// `decrease_check_us` > 0: the check that will cut, set by a CNP while none is due.
    next_check_us: Option<u64>,
    /// End of the time already processed (the previous report's `now_us`).
    last_now_us: u64,
    cnps: u64,
    /// Increase events processed by the last report.
    last_report_events: u32,
}

impl Dcqcn {
    pub fn new(cfg: DcqcnConfig) -> Self {
        Dcqcn {
            cfg,
            mss: 1448.0,
            srtt_us: None,
            rc: cfg.line_rate_bytes_per_s,
            rt: cfg.line_rate_bytes_per_s,
            alpha: cfg.alpha_init,
            recovering: false,
            next_timer_us: 0,
            t_stage: 0,
            bc_stage: 0,
            byte_left: cfg.byte_counter_bytes,
            alpha_anchor_us: None,
            alpha_decays: 0,
            last_cnp_us: None,
            check_anchor_us: None,
            next_check_us: None,
            last_now_us: 0,
            cnps: 0,
            last_report_events: 0,
        }
    }

    /// Current rate R_C, bytes/s.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.rc
    }

    /// Target rate R_T, bytes/s.
    pub fn target_bytes_per_s(&self) -> f64 {
        self.rt
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    fn line(&self) -> f64 {
        self.cfg.line_rate_bytes_per_s
    }

    fn clamp_rate(&self, r: f64) -> f64 {
        r.clamp(self.cfg.min_rate_bytes_per_s, self.line())
    }

    fn cwnd_bytes(&self) -> f64 {
        let rtt_s = if self.cfg.window_rtt_us > 0.0 {
            self.cfg.window_rtt_us / US_PER_S
        } else {
            self.srtt_us.unwrap_or(self.cfg.init_rtt_us) as f64 / US_PER_S
        };
        (self.cfg.cwnd_gain * self.rc * rtt_s).max(MIN_CWND_PKTS * self.mss)
    }

    fn action(&self) -> Action {
        Action::cwnd(self.cwnd_bytes()).with_pacing(Pacing::BytesPerSec(self.rc))
    }

    /// Restarts both increase clocks at `at` with their stages at zero.
    fn restart_clocks(&mut self, at: u64) {
        self.t_stage = 0;
        self.bc_stage = 0;
        self.byte_left = self.cfg.byte_counter_bytes;
        self.next_timer_us = at.saturating_add(self.cfg.rate_timer_us);
        self.recovering = !(self.rc >= self.line() && self.rt >= self.line());
    }

    /// Eq. 2 for every α period that ended by `t`.
    fn decay_alpha_to(&mut self, t: u64) {
        let Some(anchor) = self.alpha_anchor_us else { return };
        let periods = t.saturating_sub(anchor) / self.cfg.alpha_update_us;
        if periods <= self.alpha_decays {
            return;
        }
        let k = periods - self.alpha_decays;
        let keep = 1.0 - self.cfg.g;
        if k <= ALPHA_DECAY_LOOP_MAX {
            for _ in 0..k {
                self.alpha *= keep;
            }
        } else {
            self.alpha *= keep.powf(k as f64);
        }
        self.alpha = self.alpha.clamp(0.0, 1.0);
        self.alpha_decays = periods;
    }

    /// Eq. 1: a CNP at `at`. With `decrease_check_us` the cut waits for the next check.
    fn cnp(&mut self, at: u64) {
        self.decay_alpha_to(at);
        let deferred = self.cfg.decrease_check_us > 0;
        if !deferred {
            self.cut();
        }
        self.alpha = ((1.0 - self.cfg.g) * self.alpha + self.cfg.g).clamp(0.0, 1.0);
        self.alpha_anchor_us = Some(at);
        self.alpha_decays = 0;
        self.last_cnp_us = Some(at);
        self.cnps += 1;
        if deferred {
            let (anchor, d) = (*self.check_anchor_us.get_or_insert(at), self.cfg.decrease_check_us);
            // The first check strictly after the CNP: one at its very instant did not see it.
            self.next_check_us.get_or_insert(anchor.saturating_add((at.saturating_sub(anchor) / d + 1).saturating_mul(d)));
        } else {
            self.restart_clocks(at);
        }
    }

    /// Eq. 1's rate part with the α of the moment.
    fn cut(&mut self) {
        // Unclamped, cuts in a row keep the target from before the first of them, so the next
        // recovery aims back at it.
        if self.cfg.clamp_target_rate || self.t_stage > 0 || self.bc_stage > 0 {
            self.rt = self.rc;
        }
        self.rc = self.clamp_rate(self.rc * (1.0 - self.alpha / 2.0));
    }

    /// A rate-decrease check at `at` with a CNP since the last: the cut, and the increase clocks
    /// restart (rdma-hw.cc's CheckRateDecreaseMlx).
    fn check(&mut self, at: u64) {
        self.decay_alpha_to(at);
        self.cut();
        self.next_check_us = None;
        self.restart_clocks(at);
    }

    /// One increase event (eqs. 3, 4 and hyper increase), after its clock's stage was incremented.
    fn increase(&mut self) {
        let f = self.cfg.fast_recovery_steps;
        let (hi, lo) = (self.t_stage.max(self.bc_stage), self.t_stage.min(self.bc_stage));
        if self.cfg.timer_stage_increase {
            // rdma-hw.cc's RateIncEventMlx, on the stage before this event: below F fast recovery,
            // at F additive, past F hyper increase by a constant R_HAI.
            let stage = self.t_stage - 1;
            if stage >= f {
                let step = if stage == f { self.cfg.rai_bytes_per_s } else { self.cfg.rhai_bytes_per_s };
                self.rt = (self.rt + step).min(self.line());
            }
        } else if hi > f {
            let step = if lo > f { (lo - f) as f64 * self.cfg.rhai_bytes_per_s } else { self.cfg.rai_bytes_per_s };
            self.rt = (self.rt + step).min(self.line());
        }
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line());
        if self.line() - self.rc <= self.line() * LINE_RATE_SNAP {
            self.rc = self.line();
        }
        if self.rc >= self.line() && self.rt >= self.line() {
            self.recovering = false;
        }
    }

    /// Drops the increase events still due by `to` (the per-report budget is spent): the timer
    /// keeps its phase, the byte counter restarts.
    fn skip_increase_events(&mut self, to: u64) {
        let t = self.cfg.rate_timer_us;
        if self.next_timer_us <= to {
            let n = (to - self.next_timer_us) / t + 1;
            self.next_timer_us = self.next_timer_us.saturating_add(n.saturating_mul(t));
        }
        self.byte_left = self.cfg.byte_counter_bytes;
    }

    /// Processes, in time order, the timer and byte-counter events due by `to` (inclusive).
    fn increase_until(&mut self, to: u64, feed: &mut ByteFeed, budget: &mut u32) {
        let upto = feed.at(to);
        loop {
            if !self.recovering {
                feed.consumed = feed.consumed.max(upto);
                return;
            }
            let timer_due = self.next_timer_us <= to;
            let byte_at = feed.consumed + self.byte_left;
            // The artifact's RP (timer_stage_increase) has no byte counter.
            let byte_due = !self.cfg.timer_stage_increase && byte_at <= upto;
            if !timer_due && !byte_due {
                self.byte_left -= (upto - feed.consumed).max(0.0);
                feed.consumed = feed.consumed.max(upto);
                return;
            }
            if *budget == 0 {
                self.skip_increase_events(to);
                feed.consumed = feed.consumed.max(upto);
                return;
            }
            *budget -= 1;
            self.last_report_events += 1;
            if timer_due && (!byte_due || self.next_timer_us as f64 <= feed.time_of(byte_at)) {
                let c = feed.at(self.next_timer_us).max(feed.consumed);
                self.byte_left -= c - feed.consumed;
                feed.consumed = c;
                self.next_timer_us = self.next_timer_us.saturating_add(self.cfg.rate_timer_us);
                self.t_stage = self.t_stage.saturating_add(1);
            } else {
                feed.consumed = byte_at.max(feed.consumed);
                self.byte_left = self.cfg.byte_counter_bytes;
                self.bc_stage = self.bc_stage.saturating_add(1);
            }
            self.increase();
        }
    }
}

impl Algorithm for Dcqcn {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        self.last_now_us = start.now_us;
        self.alpha = self.cfg.alpha_init;
        let seed = start.seed.as_ref();
        self.srtt_us = seed.and_then(|s| s.srtt_us).filter(|&us| us > 0);
        let rate = seed.and_then(|s| s.pacing_rate_bytes_per_s).filter(|&r| r > 0).map_or(self.line(), |r| r as f64);
        self.rc = self.clamp_rate(rate);
        self.rt = self.rc;
        self.restart_clocks(start.now_us);
        self.action().with_report(ReportPolicy::EveryUs(self.cfg.report_interval_us))
    }

    fn on_report(&mut self, report: &Report) -> Action {
        if report.mss_bytes > 0 {
            self.mss = report.mss();
        }
        if let Some(rtt) = report.rtt.filter(|r| r.srtt_us > 0) {
            self.srtt_us = Some(rtt.srtt_us);
        }
        let s = self.last_now_us;
        let e = report.now_us.max(s);
        let mut cnps = cnp_instants(s, e, marks(report), self.last_cnp_us, self.cfg.cnp_interval_us).into_iter().peekable();
        let mut feed = ByteFeed { s, span: e - s, acked: report.acked_bytes as f64, consumed: 0.0 };
        let mut budget = MAX_INCREASE_EVENTS_PER_REPORT;
        self.last_report_events = 0;
        // A check is due only after a CNP and cuts once, so this loop runs at most twice per CNP
        // however long the report.
        loop {
            // A check due at the same instant as a CNP comes first (it did not see that CNP).
            let check = self.next_check_us.filter(|&c| c <= e && cnps.peek().is_none_or(|&n| c <= n));
            if let Some(at) = check {
                self.increase_until(at, &mut feed, &mut budget);
                feed.consumed = feed.consumed.max(feed.at(at));
                self.check(at);
                continue;
            }
            let Some(at) = cnps.next() else { break };
            self.increase_until(at, &mut feed, &mut budget);
            if self.cfg.decrease_check_us == 0 {
                // The counter restarts at the CNP: bytes before it do not count.
                feed.consumed = feed.consumed.max(feed.at(at));
            }
            self.cnp(at);
        }
        self.increase_until(e, &mut feed, &mut budget);
        self.decay_alpha_to(e);
        self.last_now_us = e;
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        vec![
            StateVar { name: "rate_bytes_per_s", value: self.rc },
            StateVar { name: "target_rate_bytes_per_s", value: self.rt },
            StateVar { name: "alpha", value: self.alpha },
            StateVar { name: "timer_stage", value: self.t_stage as f64 },
            StateVar { name: "byte_stage", value: self.bc_stage as f64 },
            StateVar { name: "recovering", value: if self.recovering { 1.0 } else { 0.0 } },
            StateVar { name: "cnps", value: self.cnps as f64 },
            StateVar { name: "cwnd_bytes", value: self.cwnd_bytes() },
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
    /// 40 Gbit/s in bytes/s.
    const L: f64 = 5e9;
    /// R_AI and R_HAI at the defaults, bytes/s.
    const RAI: f64 = 5e6;
    const RHAI: f64 = 25e6;

    use crate::test_support::rtt;

    /// A report at `now_us` acknowledging `acked` bytes, `ce` packets of them CE-marked.
    fn rep(now_us: u64, acked: u64, ce: u64) -> Report {
        Report {
            now_us,
            interval_us: 1_000,
            mss_bytes: MSS,
            acked_bytes: acked,
            acked_pkts: acked / u64::from(MSS),
            ce_pkts: ce,
            ce_bytes: ce * u64::from(MSS),
            ece_acks: ce,
            rtt: rtt(20),
            ..Report::default()
        }
    }

    fn flow(cfg: DcqcnConfig) -> Dcqcn {
        let mut d = Dcqcn::new(cfg);
        d.init(&FlowStart::new(MSS, 10 * u64::from(MSS)));
        d
    }

    fn pacing(a: &Action) -> f64 {
        match a.pacing {
            Some(Pacing::BytesPerSec(r)) => r,
            other => panic!("no pacing rate: {other:?}"),
        }
    }

    /// Two CNPs (at 100 and 150 µs), leaving R_T = L/2, R_C = L/4, α = 1, both clocks restarted at 150.
    fn after_two_cnps(cfg: DcqcnConfig) -> Dcqcn {
        let mut d = flow(cfg);
        d.on_report(&rep(100, 0, 1));
        d.on_report(&rep(150, 0, 1));
        assert_eq!((d.rt, d.rc, d.alpha, d.cnps), (L / 2.0, L / 4.0, 1.0, 2));
        d
    }

    #[test]
    fn starts_at_line_rate_and_first_cnp_halves() {
        let mut d = Dcqcn::new(DcqcnConfig::default());
        let a = d.init(&FlowStart::new(MSS, 10_000));
        assert_eq!(pacing(&a), L);
        assert_eq!(a.report, Some(ReportPolicy::EveryUs(1_000)));
        assert!(!d.recovering);
        // Unmarked reports change nothing: no slow start, no probing above line rate.
        assert_eq!(pacing(&d.on_report(&rep(1_000, 50_000, 0))), L);
        assert_eq!(d.alpha, 1.0, "alpha does not decay before the first CNP");
        let a = d.on_report(&rep(2_000, 50_000, 1));
        assert_eq!(pacing(&a), L / 2.0, "R_C(1 - alpha/2), alpha = 1");
        assert_eq!(d.rt, L, "R_T = the old R_C");
        assert_eq!(d.alpha, 1.0, "(1 - g)·1 + g");
        assert!(d.recovering);
        assert_eq!((d.t_stage, d.bc_stage), (0, 0));
    }

    #[test]
    fn alpha_rises_by_g_on_cnp_and_decays_per_idle_period() {
        let mut d = flow(DcqcnConfig { alpha_init: 0.5, ..DcqcnConfig::default() });
        d.on_report(&rep(100, 0, 1));
        // The cut uses alpha before its update (eq. 1 order).
        assert_eq!(d.rc, L * 0.75);
        let a1 = 0.5 * (1.0 - G) + G;
        assert_eq!(d.alpha, a1);
        // No CNP for 54 µs: no α period has ended.
        d.on_report(&rep(154, 0, 0));
        assert_eq!(d.alpha, a1);
        d.on_report(&rep(155, 0, 0));
        assert_eq!(d.alpha, a1 * (1.0 - G));
        d.on_report(&rep(100 + 3 * 55 + 10, 0, 0));
        assert_eq!(d.alpha, a1 * (1.0 - G) * (1.0 - G) * (1.0 - G));
        // A second CNP (after two more periods) decays first, then moves alpha toward 1 by g.
        d.on_report(&rep(100 + 5 * 55, 0, 1));
        let decayed = a1 * (1.0 - G).powi(5);
        assert!((d.alpha - ((1.0 - G) * decayed + G)).abs() < 1e-15, "{}", d.alpha);
    }

    /// An evenly marked ACK stream (one packet per 10 µs, all marked until 1 ms, then unmarked until
    /// 3 ms) as per-ACK reports, 250 µs batches and a 1 ms batch: the same CNPs (one per 50 µs, 20
    /// in all) and the same rate trajectory.
    #[test]
    fn cnps_rate_limited_alike_per_ack_and_batched() {
        let run = |batch_us: u64, first_batch_us: u64| {
            let mut d = flow(DcqcnConfig::default());
            let mut out = Vec::new();
            let mut now = 0;
            while now < 3_000 {
                let next = if now == 0 { first_batch_us } else { now + batch_us };
                let acks = (next - now) / 10;
                let marked = (now + 10..=next).step_by(10).filter(|&t| t <= 1_000).count() as u64;
                let a = d.on_report(&rep(next, acks * u64::from(MSS), marked));
                now = next;
                out.push((now, pacing(&a), d.rc, d.rt, d.alpha, d.cnps, d.t_stage));
            }
            out
        };
        let per_ack = run(10, 10);
        let at = |v: &[(u64, f64, f64, f64, f64, u64, u64)], t: u64| *v.iter().find(|x| x.0 == t).unwrap();
        assert_eq!(at(&per_ack, 1_000).5, 20, "CNPs at 10, 60, ..., 960");
        assert_eq!(at(&per_ack, 990).5, 20);
        assert_eq!(at(&per_ack, 950).5, 19);
        for (batch, first) in [(250, 250), (250, 1_000), (50, 50)] {
            let batched = run(batch, first);
            for b in &batched {
                assert_eq!(*b, at(&per_ack, b.0), "{batch} µs batches at {} µs", b.0);
            }
        }
        // The rate recovers between the marked phase and the end.
        let end = at(&per_ack, 3_000);
        assert!(end.2 > at(&per_ack, 1_000).2);
        // Counting by ce_bytes alone (no ce_pkts): the same.
        let mut d = flow(DcqcnConfig::default());
        d.on_report(&Report { ce_pkts: 0, ece_acks: 0, ..rep(1_000, 100_000, 100) });
        assert_eq!(d.cnps, 20);
        // Sparse marks in a long report: one CNP per mark when they are further apart than N.
        let mut d = flow(DcqcnConfig::default());
        d.on_report(&rep(1_000, 100_000, 4));
        assert_eq!(d.cnps, 4);
    }

    #[test]
    fn five_fast_recovery_events_then_additive_increase() {
        let mut d = after_two_cnps(DcqcnConfig::default());
        let t0 = 150;
        for k in 1..=5 {
            // Each report lands on a timer expiry (t0 + 55k), which it processes.
            d.on_report(&rep(t0 + 55 * k, 0, 0));
            assert_eq!(d.t_stage, k);
            assert_eq!(d.rt, L / 2.0, "fast recovery leaves R_T");
            assert_eq!(d.rc, L / 2.0 - (L / 4.0) / 2f64.powi(k as i32), "FR{k}");
        }
        assert_eq!(d.rc, 2.4609375e9);
        d.on_report(&rep(t0 + 55 * 6, 0, 0));
        assert_eq!(d.rt, L / 2.0 + RAI, "AI1 adds R_AI to R_T");
        assert_eq!(d.rc, (L / 2.0 + RAI + 2.4609375e9) / 2.0);
        let rc6 = d.rc;
        d.on_report(&rep(t0 + 55 * 7, 0, 0));
        assert_eq!(d.rt, L / 2.0 + 2.0 * RAI);
        assert_eq!(d.rc, (d.rt + rc6) / 2.0);
        // No hyper increase from the timer alone, however long.
        d.on_report(&rep(t0 + 55 * 20, 0, 0));
        assert_eq!(d.rt, L / 2.0 + 15.0 * RAI);
    }

    /// With a fixed window RTT the window is R_C × that RTT whatever the SRTT (DCQCN+win).
    #[test]
    fn a_fixed_window_rtt_ignores_the_srtt() {
        let mut d = flow(DcqcnConfig { window_rtt_us: 8.0, cwnd_gain: 1.0, ..DcqcnConfig::default() });
        let a = d.on_report(&rep(100, 0, 1));
        let fixed = a.cwnd_bytes.expect("a window");
        assert!((fixed - L / 2.0 * 8e-6).abs() < 1e-6, "half the line rate for 8 µs: {fixed}");
        let mut s = flow(DcqcnConfig::default());
        let by_srtt = s.on_report(&rep(100, 0, 1)).cwnd_bytes.expect("a window");
        assert!(by_srtt > 2.0 * fixed, "by the SRTT (20 µs here), gain 2: {by_srtt} vs {fixed}");
    }

    /// The artifact's increase: F fast-recovery events, one additive, then a constant R_HAI per
    /// event, by the timer alone however many bytes are acknowledged.
    #[test]
    fn the_timer_stage_alone_leads_to_hyper_increase() {
        let cfg =
            DcqcnConfig::from(&DcqcnParams { timer_stage_increase: true, fast_recovery_steps: 1, ..DcqcnParams::default() });
        let mut d = after_two_cnps(cfg);
        // Four timer events (at +55k µs), 20 kB/µs acknowledged all along.
        d.on_report(&rep(150 + 4 * 55, 20_000 * 4 * 55, 0));
        assert_eq!((d.t_stage, d.bc_stage), (4, 0));
        assert_eq!(d.rt, L / 2.0 + RAI + 2.0 * RHAI, "FR, AI, then R_HAI twice");
    }

    /// The artifact's RP: a CNP only flags a cut; the check one interval later makes it, with the
    /// α of then, and restarts the increase clocks from there.
    #[test]
    fn a_deferred_cut_waits_for_the_next_check() {
        let cfg = DcqcnConfig { decrease_check_us: 50, ..DcqcnConfig::default() };
        let mut d = flow(cfg);
        d.on_report(&rep(100, 0, 1));
        assert_eq!((d.cnps, d.rc, d.rt), (1, L, L), "the CNP at 100 µs flags a cut and cuts nothing");
        d.on_report(&rep(149, 0, 0));
        assert_eq!(d.rc, L);
        d.on_report(&rep(150, 0, 0));
        assert_eq!((d.rc, d.rt), (L / 2.0, L), "the check at 150 µs halves (α = 1)");
        // The increase clocks run from the check, not from the CNP.
        d.on_report(&rep(204, 0, 0));
        assert_eq!(d.t_stage, 0);
        d.on_report(&rep(205, 0, 0));
        assert_eq!(d.t_stage, 1);
        let rc = d.rc;
        // A check with no CNP since the last changes nothing; a CNP at a check's instant waits for
        // the next check.
        d.on_report(&rep(200 + 50, 0, 1));
        assert_eq!((d.cnps, d.rc), (2, rc), "the check at 250 µs came before the CNP at 250 µs");
        // Timer events at 260 and 315 µs: the check at 300 cuts the rate of then.
        d.on_report(&rep(299, 0, 0));
        let (rc, alpha) = (d.rc, d.alpha());
        d.on_report(&rep(300, 0, 0));
        assert_eq!(d.rc, rc * (1.0 - alpha / 2.0), "cut at the 300 µs check with the α of then");
        // Off (the default), the same CNP at 100 µs cuts at once.
        let mut p = flow(DcqcnConfig::default());
        p.on_report(&rep(100, 0, 1));
        assert_eq!(p.rc, L / 2.0);
    }

    /// With deferred cuts too, a CE timeline gives the same rate however it is batched into reports.
    #[test]
    fn deferred_cuts_do_not_depend_on_the_report_batching() {
        let cfg = DcqcnConfig { decrease_check_us: 50, ..DcqcnConfig::default() };
        // Marks at 50, 100, ..., 350 µs: one report, or one report per mark, or one every 10 µs.
        let mut one = flow(cfg);
        one.on_report(&rep(350, 7_000_000, 7));
        one.on_report(&rep(1_000, 0, 0));
        let mut per_mark = flow(cfg);
        for k in 1..=7 {
            per_mark.on_report(&rep(50 * k, 1_000_000, 1));
        }
        per_mark.on_report(&rep(1_000, 0, 0));
        let mut fine = flow(cfg);
        for t in (10..=350).step_by(10) {
            fine.on_report(&rep(t, 7_000_000 / 35, u64::from(t % 50 == 0)));
        }
        fine.on_report(&rep(1_000, 0, 0));
        for d in [&per_mark, &fine] {
            assert_eq!((d.cnps, d.rc, d.rt, d.alpha, d.t_stage), (one.cnps, one.rc, one.rt, one.alpha, one.t_stage));
        }
        assert_eq!(one.cnps, 7);
        assert!(one.rc < L / 8.0, "checks at 100-400 µs each cut: {}", one.rc / L);
    }

    /// Unclamped, cuts in a row keep the target of before the first, and the first increase event
    /// aims back at it; a cut after an increase event clamps as eq. 1 does.
    #[test]
    fn an_unclamped_target_survives_cuts_in_a_row() {
        let mut d = flow(DcqcnConfig { clamp_target_rate: false, ..DcqcnConfig::default() });
        d.on_report(&rep(100, 0, 1));
        d.on_report(&rep(150, 0, 1));
        assert_eq!((d.rt, d.rc, d.cnps), (L, L / 4.0, 2), "no increase event between the cuts");
        d.on_report(&rep(205, 0, 0));
        assert_eq!((d.t_stage, d.rt, d.rc), (1, L, (L + L / 4.0) / 2.0), "fast recovery toward the old target");
        d.on_report(&rep(210, 0, 1));
        assert_eq!(d.rt, (L + L / 4.0) / 2.0, "an increase event came since the last cut: clamped");
        // Clamped (the default), the same cuts leave the target at the rate before the second.
        let mut d = after_two_cnps(DcqcnConfig::default());
        d.on_report(&rep(205, 0, 0));
        assert_eq!((d.rt, d.rc), (L / 2.0, (L / 2.0 + L / 4.0) / 2.0));
    }

    #[test]
    fn hyper_increase_once_both_counters_pass_f() {
        let cfg = DcqcnConfig { byte_counter_bytes: 1e6, ..DcqcnConfig::default() };
        // One report 420 µs after the CNP acknowledging 20 kB/µs: byte-counter events at +50k µs,
        // timer events at +55k µs. Stages (T, BC) after each event:
        // B(0,1) T(1,1) B(1,2) T(2,2) B(2,3) T(3,3) B(3,4) T(4,4) B(4,5) T(5,5)  fast recovery ×10
        // B(5,6) additive; T(6,6) B(6,7) hyper ×1; T(7,7) B(7,8) hyper ×2.
        let mut d = after_two_cnps(cfg);
        d.on_report(&rep(150 + 420, 20_000 * 420, 0));
        assert_eq!((d.t_stage, d.bc_stage), (7, 8));
        assert_eq!(d.last_report_events, 15);
        assert_eq!(d.rt, L / 2.0 + RAI + 6.0 * RHAI);
        // The same time with no bytes: the timer alone gives five FR and two AI events.
        let mut d = after_two_cnps(cfg);
        d.on_report(&rep(150 + 420, 0, 0));
        assert_eq!((d.t_stage, d.bc_stage), (7, 0));
        assert_eq!(d.rt, L / 2.0 + 2.0 * RAI);
    }

    /// Expiries due before a CNP inside one report are processed before it, and one due at the CNP's
    /// very instant too.
    #[test]
    fn events_before_a_cnp_in_the_same_report_come_first() {
        let mut d = flow(DcqcnConfig::default());
        d.on_report(&rep(100, 0, 1));
        // One report to 1000 µs with a mark at its end: 16 timer expiries (155 … 980), then the CNP.
        let mut one = d.clone();
        one.on_report(&rep(1_000, 0, 1));
        let mut split = d.clone();
        split.on_report(&rep(999, 0, 0));
        let before = split.rc;
        assert_eq!(split.t_stage, 16);
        split.on_report(&rep(1_000, 0, 1));
        assert_eq!(split.rt, before, "R_T = R_C as recovered before the CNP");
        assert_eq!((one.rc, one.rt, one.alpha, one.t_stage), (split.rc, split.rt, split.alpha, split.t_stage));
        assert_eq!(one.next_timer_us, 1_055);
        // A CNP at the instant of a timer expiry and an α period's end (155 µs): both first (FR:
        // R_C = 3L/4; α = 1 − g), then the cut from there with that α.
        let mut d = flow(DcqcnConfig::default());
        d.on_report(&rep(100, 0, 1));
        d.on_report(&rep(155, 0, 1));
        assert_eq!((d.rt, d.rc), (0.75 * L, 0.75 * L * (1.0 - (1.0 - G) / 2.0)));
    }

    #[test]
    fn byte_counter_counts_acked_bytes_however_reported() {
        let cfg = DcqcnConfig { byte_counter_bytes: 1e6, rate_timer_us: 10_000_000, ..DcqcnConfig::default() };
        let mut one = after_two_cnps(cfg);
        one.on_report(&rep(1_150, 7_000_000, 0));
        let mut many = after_two_cnps(cfg);
        for i in 1..=7 {
            many.on_report(&rep(150 + 1_000 * i / 7, 1_000_000, 0));
        }
        assert_eq!(one.bc_stage, 7);
        assert_eq!((many.bc_stage, many.rc, many.rt), (one.bc_stage, one.rc, one.rt));
        assert_eq!(one.rt, L / 2.0 + 2.0 * RAI, "five FR, two AI");
        // Bytes acknowledged before a CNP do not count after it.
        let mut d = after_two_cnps(cfg);
        d.on_report(&rep(1_150, 900_000, 1));
        d.on_report(&rep(1_160, 200_000, 0));
        assert_eq!(d.bc_stage, 0);
    }

    #[test]
    fn rates_stay_between_min_and_line_rate() {
        // Marks in every report: R_C falls to the floor and stays there.
        let mut d = flow(DcqcnConfig::default());
        for i in 1..=200 {
            let a = d.on_report(&rep(1_000 * i, 1_000_000, 100));
            assert!(pacing(&a) >= 12.5e6 && pacing(&a) <= L);
            assert!(d.rt <= L && d.rt >= d.cfg.min_rate_bytes_per_s);
        }
        assert_eq!(d.rc, 12.5e6, "100 Mbit/s floor");
        // Without marks: back to exactly line rate, and the clocks stop there.
        for i in 201..=400 {
            let a = d.on_report(&rep(1_000 * i, 1_000_000, 0));
            assert!(pacing(&a) <= L && d.rt <= L);
        }
        assert_eq!((d.rc, d.rt), (L, L));
        assert!(!d.recovering);
        let stages = (d.t_stage, d.bc_stage);
        d.on_report(&rep(500_000, 1_000_000, 0));
        assert_eq!((d.t_stage, d.bc_stage), stages, "no events at line rate");
    }

    #[test]
    fn catch_up_processes_every_expiry_and_is_bounded() {
        let mut d = flow(DcqcnConfig::default());
        d.on_report(&rep(100, 0, 1));
        // 1 ms idle: timer expiries at 155, 210, ..., 1090 — 18 events, and 18 α periods.
        d.on_report(&rep(1_100, 0, 0));
        assert_eq!(d.last_report_events, 18);
        assert_eq!(d.t_stage, 18);
        let mut alpha = 1.0;
        for _ in 0..18 {
            alpha *= 1.0 - G;
        }
        assert_eq!(d.alpha, alpha);
        // From the floor, one idle second recovers fully within one report's budget (timer only:
        // five FR, ~1000 AI steps of R_AI, then R_C's last halvings).
        let mut floor = flow(DcqcnConfig::default());
        for i in 1..=20 {
            // CNPs 50 µs apart: no timer expiry between them.
            floor.on_report(&rep(50 * i, 0, 1));
        }
        assert_eq!((floor.rc, floor.rt), (12.5e6, 12.5e6));
        floor.on_report(&rep(1_002_000, 0, 0));
        assert_eq!((floor.rc, floor.rt), (L, L));
        assert!((1_000..1_100).contains(&floor.last_report_events), "{}", floor.last_report_events);
        // Years later: the clocks stop at line rate, α decays in closed form.
        d.on_report(&rep(1 << 62, 0, 0));
        assert!(d.last_report_events < 100, "{}", d.last_report_events);
        assert_eq!(d.rc, L);
        assert_eq!(d.alpha, 0.0);
        // An absurd report: 2⁶⁴ acknowledged bytes and marks, at the end of time.
        let cfg = DcqcnConfig { byte_counter_bytes: 1.0, ..DcqcnConfig::default() };
        let mut d = flow(cfg);
        d.on_report(&rep(100, 0, 1));
        let a = d.on_report(&Report { acked_bytes: u64::MAX, ce_pkts: u64::MAX, ..rep(u64::MAX, 0, 0) });
        assert_eq!(d.cnps, 1 + MAX_CNPS_PER_REPORT as u64);
        assert_eq!(d.last_cnp_us, Some(u64::MAX), "the report's last CNPs are the ones kept");
        assert!(d.last_report_events <= MAX_INCREASE_EVENTS_PER_REPORT);
        assert!(pacing(&a).is_finite() && a.cwnd_bytes.unwrap().is_finite());
        // Byte-counter events alone are capped too (with no increase steps R_T stays at L/2, so the
        // clocks never stop), the timer keeps its phase, and the report after still works.
        let mut d = after_two_cnps(DcqcnConfig { rai_bytes_per_s: 0.0, rhai_bytes_per_s: 0.0, ..cfg });
        d.on_report(&rep(250, u64::MAX, 0));
        assert_eq!(d.last_report_events, MAX_INCREASE_EVENTS_PER_REPORT);
        assert_eq!(d.next_timer_us, 260);
        d.on_report(&rep(350, 0, 0));
        assert_eq!(d.last_report_events, 2, "timer expiries at 260 and 315");
    }

    #[test]
    fn window_follows_rate_and_srtt_and_never_binds() {
        let mut d = Dcqcn::new(DcqcnConfig::default());
        let a = d.init(&FlowStart::new(MSS, 10_000));
        assert_eq!(a.cwnd_bytes, Some(2.0 * L * 1e-3), "init_rtt_us before the first sample");
        let a = d.on_report(&rep(1_000, 10_000, 0));
        assert_eq!(a.cwnd_bytes, Some(2.0 * L * 20e-6));
        let a = d.on_report(&rep(2_000, 10_000, 1));
        assert_eq!(a.cwnd_bytes, Some(2.0 * (L / 2.0) * 20e-6), "shrinks with R_C at once");
        // At the floor on a short path: two packets.
        let mut d = flow(DcqcnConfig { min_rate_bytes_per_s: 1e3, ..DcqcnConfig::default() });
        for i in 1..=100 {
            d.on_report(&rep(100 * i, 0, 1));
        }
        assert_eq!(d.cwnd_bytes(), 2.0 * f64::from(MSS));
    }

    #[test]
    fn nan_safe_without_mss_or_rtt() {
        let mut d = flow(DcqcnConfig::default());
        let r = Report { now_us: 500, mss_bytes: 0, ce_bytes: 3_000, acked_bytes: 10_000, rtt: None, ..Report::default() };
        let a = d.on_report(&r);
        assert_eq!(d.cnps, 10, "3000 CE bytes with no MSS: 3000 marks over 500 µs, a CNP per 50 µs");
        assert!(pacing(&a).is_finite() && pacing(&a) > 0.0);
        let c = a.cwnd_bytes.unwrap();
        assert!(c.is_finite() && c >= 2.0 * f64::from(MSS));
        assert!(d.state().iter().all(|v| v.value.is_finite()));
        // Time going backwards is treated as no time passing.
        let a = d.on_report(&rep(400, 0, 1));
        assert!(pacing(&a).is_finite());
    }

    #[test]
    fn seeded_flow_keeps_its_rate_and_climbs() {
        let mut d = Dcqcn::new(DcqcnConfig::default());
        let start = FlowStart {
            now_us: 1_000,
            mss_bytes: MSS,
            init_cwnd_bytes: 10_000,
            ecn: Some(true),
            seed: Some(Seed { cwnd_bytes: 50_000, pacing_rate_bytes_per_s: Some(1_000_000_000), ..Seed::default() }),
        };
        assert_eq!(pacing(&d.init(&start)), 1e9);
        d.on_report(&rep(1_000 + 5 * 55, 0, 0));
        assert_eq!((d.rc, d.rt), (1e9, 1e9), "fast recovery toward R_T = R_C changes nothing");
        d.on_report(&rep(1_000 + 6 * 55, 0, 0));
        assert_eq!(d.rt, 1e9 + RAI);
    }

    #[test]
    fn params_and_state() {
        let f = INFO.configure(&toml::Table::new()).unwrap();
        assert_eq!(f.name(), "dcqcn");
        let d = flow(DcqcnConfig::default());
        assert_eq!(d.cfg, DcqcnConfig::default());
        let defaults = DcqcnParams::default();
        assert_eq!(defaults.g, 1.0 / 256.0);
        assert_eq!(defaults.byte_counter_bytes, 10_000_000);
        let t: toml::Table = "line_rate_gbps = 100\nrai_mbps = 5\nrate_timer_us = 1500".parse().unwrap();
        assert!(INFO.configure(&t).is_ok());
        let e = INFO.configure(&"line_rate_gbps = 0.05".parse().unwrap()).err().unwrap();
        assert!(e.to_string().contains("min_rate_mbps"), "{e}");
        let e = INFO.configure(&"alpha_update_us = 50".parse().unwrap()).err().unwrap();
        assert!(e.to_string().contains("must exceed cnp_interval_us"), "{e}");
        assert!(INFO.configure(&"g = 0".parse().unwrap()).is_err());
        let names: Vec<_> = d.state().iter().map(|v| v.name).collect();
        for n in ["rate_bytes_per_s", "target_rate_bytes_per_s", "alpha", "timer_stage", "byte_stage", "cnps"] {
            assert!(names.contains(&n), "{n}");
        }
    }

    proptest! {
        #[test]
        fn never_nan_and_rates_bounded(seq in reports(60), alpha_init in 0.0f64..=1.0, g in 0.001f64..=1.0) {
            let cfg = DcqcnConfig { alpha_init, g, ..DcqcnConfig::default() };
            let mut d = Dcqcn::new(cfg);
            let a = d.init(&FlowStart::new(MSS, 10_000));
            check_sane(a.cwnd_bytes, MSS, &d.state())?;
            let mut mss = MSS;
            for r in &seq {
                if r.mss_bytes > 0 { mss = r.mss_bytes; }
                let a = d.on_report(r);
                check_sane(a.cwnd_bytes, mss, &d.state())?;
                let rate = pacing(&a);
                prop_assert!(rate >= cfg.min_rate_bytes_per_s && rate <= L, "{}", rate);
                prop_assert!(d.rt <= L && (0.0..=1.0).contains(&d.alpha));
                prop_assert!(d.last_report_events <= MAX_INCREASE_EVENTS_PER_REPORT);
            }
        }
    }
}
