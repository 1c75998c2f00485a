//! Annulus: two congestion control loops per flow — the flow's own end-to-end algorithm and a QCN
//! near-source loop driven by the switch next to the sender — with the flow sending at the lower
//! of the two rates.
//!
//! Model (Saeed et al., SIGCOMM 2020, §3; specs/annulus.md §2–§6). WAN flows react to congestion one
//! WAN RTT late, 10–10,000× after the datacenter flows sharing their ToR uplink, so the DC flows do
//! all the draining while WAN bursts fill shallow buffers. A near-source switch can tell the sender
//! directly: a QCN congestion point samples its queue and sends a CNM with F_b = Q_off + w·Q_δ to
//! the sampled packet's source, which reacts within microseconds.
//!
//! - **End-to-end loop** (§3.1, §3.3): DCTCP for datacenter flows, BBR or Cubic for WAN flows,
//!   unmodified. A window becomes a rate as cwnd/srtt (gain 1.0, §12 A12); BBR's own pacing rate is
//!   its rate. The class is chosen per flow: by parameter, or (`class = "auto"`, §3 [R]) from the
//!   first RTT sample against `wan_rtt_threshold_us` (the handshake RTT in the spec; the contract's
//!   first RTT sample here). Until that sample both candidate loops see every report and the DC
//!   loop's actions are sent.
//! - **Near-source loop** (§3.2, §4.2): a QCN reaction point in software (qcn.rs), per flow,
//!   inactive until the first CNM, which activates it at the flow's actual rate (§4.2.3) and cuts
//!   R_C by G_d·qFb (G_d per class, §5.1.1). Recovery is clocked by *acknowledged* bytes, never by
//!   time (§3.2 item 2): fast recovery for 5 cycles of 150 KB, then active increase in 75 KB cycles;
//!   no hyper-active increase by default. It deactivates at the line rate. `ns_timer_us` adds
//!   QCN's RP timer as a second clock, an ablation: byte-clocked cycles are long for slow flows
//!   (dc.md §4), so a flow at 100 Mbit/s hit by a CNM every few tens of ms never leaves fast
//!   recovery (configs/sim/README.md, Annulus results).
//! - **Coordination** (§5.3, Alg. 1 with the spec's resolution of A1, `gating = "growth"`): the loop
//!   that sets the minimum pauses the *growth* of the other at 2× the minimum (decreases always
//!   apply; ACKs that arrive while the near-source loop is paused are dropped, not banked); when the
//!   binding loop drops, the other drops by the same proportion (rule 2). `gating = "literal"`
//!   reproduces Algorithm 1 as printed (÷RTT fixed; the whole update of a loop at ≥ 2× the minimum
//!   is skipped, decreases included) for ablation, and `"off"` is the uncoordinated variant of Fig. 8a.
//! - **Actuation** (§5.2): cwnd is the end-to-end window, always. `pacing = "ns_only"` (the ns-2
//!   unpaced profile, so that a flow that never sees a CNM is exactly its end-to-end algorithm —
//!   design goal 1, §6.2 note (a)) paces only while the near-source loop is active: at its R_C for
//!   a window loop (§5.2 [R]: the only rate limiter is the near-source loop's; the window bounds the
//!   rest), at the minimum for BBR, whose own rate is a pacing rate. `"always"` (the testbed's paced
//!   profile) paces throughout, at the lower of R_C and the rate the end-to-end loop's own sender
//!   paces at (BBR's; for a window, Linux's 1.2 × cwnd/srtt, 2 × in slow start, §5.2's "pacing rate
//!   derived from cwnd and RTT"). The minimum the loops compare is cwnd/srtt (§12 A12).
//!
//! CNMs arrive as `Report::feedback` (`NetworkFeedback::Qcn`), in a report the datapath sends at
//! once (the simulator, and the agent's CNM listener). A report that also acknowledges data is
//! handled ACKs first, then the CNM. The switch-side parameters (Q_eq, w — 8 in the testbed
//! profile, 2 in the ns-2 profile —, the 15 KB sampling) belong to the congestion point: ccp-router
//! `--qdisc qcn` and ccp-sim's `qcn` discipline.
//!
//! References: A. Saeed et al., "Annulus: A Dual Congestion Control Loop for Datacenter and WAN
//! Traffic Aggregates", SIGCOMM 2020, §3–§5, Alg. 1 (as extracted in specs/annulus.md §4–§6, §12);
//! QCN reaction point rules from the Alizadeh thesis Ch. 5 (specs/dc.md §4).

mod e2e;
mod near_source;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use ccp_contract::{
    declare_params, param_choice, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, FlowStart, NetworkFeedback, Pacing,
    Param, ParamError, Params, Report, StateVar,
};

pub use e2e::E2eKind;
use e2e::E2eLoop;
use near_source::NearSource;

use crate::qcn::{self, RpConfig, RpVariant};

/// Growth pause: the non-binding loop may grow to this many times the minimum rate (§3.3, Alg. 1).
pub const GROWTH_CAP: f64 = 2.0;
/// A first RTT sample above this makes an `auto` flow a WAN flow, µs (annulus.md §3 [R]: 1 ms).
pub const WAN_RTT_THRESHOLD_US: u64 = 1_000;
/// Near-source rate floor, Mbit/s (802.1Qau rpgMinRate, dc.md §4.7).
pub const MIN_RATE_MBPS: f64 = qcn::MIN_RATE_BPS / 1e6;

/// Traffic class: selects the end-to-end algorithm and the near-source G_d.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Dc,
    Wan,
}

param_choice! {
    /// How the loops are coordinated.
    pub enum Gating {
        /// Pause only growth at 2× the minimum; decreases always apply (annulus.md §12 A1 [R]).
        Growth = "growth",
        /// Algorithm 1 as printed, with the ÷RTT typo fixed.
        Literal = "literal",
        /// No growth pause and no proportional drops (Fig. 8a).
        Off = "off",
    }
}

param_choice! {
    /// When the flow is paced.
    pub enum PacingMode {
        /// Only while the near-source loop is active (ns-2 profile).
        NsOnly = "ns_only",
        /// Always at the minimum rate (testbed profile).
        Always = "always",
    }
}

#[derive(Debug, Clone, Copy)]
pub struct AnnulusConfig {
    /// `None`: classify by the first RTT sample.
    pub class: Option<Class>,
    pub wan_rtt_threshold_us: u64,
    pub e2e_dc: E2eKind,
    pub e2e_wan: E2eKind,
    /// Near-source reaction point for DC flows; `rp_wan` differs only in G_d.
    pub rp_dc: RpConfig,
    pub rp_wan: RpConfig,
    pub gating: Gating,
    pub pacing: PacingMode,
    /// Snap R_C to the actual rate before a cut (annulus.md §4.2.3, §12 A10).
    pub snap_to_actual: bool,
    /// React to CNMs. Off: the end-to-end loops alone (DCTCP for DC, BBR/Cubic for WAN, chosen per
    /// flow as above) — the paper's baseline on the same network, and the "without the near-source
    /// loop" run of the testbed comparison.
    pub near_source: bool,
    /// The near-source loop's RP timer period, µs (0: none, as the paper; an ablation).
    pub ns_timer_us: f64,
}

param_choice! {
    /// The `class` parameter: a fixed class, or classified by the first RTT sample.
    pub enum ClassChoice {
        Auto = "auto",
        Dc = "dc",
        Wan = "wan",
    }
}

declare_params! {
    /// Annulus's parameters, as declared; [`AnnulusConfig`] is what they configure.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct AnnulusParams {
        pub class: ClassChoice = Param::choice("auto", "traffic class: \"auto\" = WAN when the first RTT sample exceeds wan_rtt_threshold_us (annulus.md §3 [R])"),
        pub wan_rtt_threshold_us: u64 = Param::int(WAN_RTT_THRESHOLD_US as i64, 1, 10_000_000, "µs", "first-RTT threshold for class = auto (spec [R]: 1 ms)"),
        pub e2e_dc: E2eKind = Param::choice("dctcp", "end-to-end algorithm of datacenter flows (paper: DCTCP)"),
        pub e2e_wan: E2eKind = Param::choice("bbr", "end-to-end algorithm of WAN flows (paper testbed: BBR; Cubic or DCTCP also)"),
        pub gd_dc: f64 = Param::float(qcn::GD, Bound::Exclusive(0.0), Bound::Inclusive(1.0 / 63.0), "", "near-source decrease gain for DC flows (QCN 1/128)"),
        pub gd_wan: f64 = Param::float(qcn::GD, Bound::Exclusive(0.0), Bound::Inclusive(1.0 / 63.0), "", "near-source decrease gain for WAN flows (§5.1.1: tune per class for weighted sharing)"),
        pub bc_limit_bytes: f64 = Param::float(qcn::BC_LIMIT_BYTES, Bound::Inclusive(1_000.0), Bound::Inclusive(1e9), "bytes", "acknowledged bytes per recovery cycle (QCN 150 KB; half in active increase)"),
        pub fr_cycles: u32 = Param::int(qcn::FR_CYCLES as i64, 0, 100, "cycles", "fast-recovery cycles (QCN 5)"),
        pub r_ai_mbps: f64 = Param::float(qcn::R_AI_BPS / 1e6, Bound::Exclusive(0.0), Bound::Inclusive(1e5), "Mbit/s", "active-increase step (QCN 5 Mbit/s)"),
        pub hyper_active: bool = Param::bool(false, "hyper-active increase (+50 Mbit/s per cycle after 2x fr_cycles); off in Annulus (no timer stage)"),
        pub line_rate_gbps: f64 = Param::float(10.0, Bound::Exclusive(0.0), Bound::Inclusive(1e4), "Gbit/s", "NIC line rate: caps the near-source rate, which deactivates on reaching it"),
        pub min_rate_mbps: f64 = Param::float(MIN_RATE_MBPS, Bound::Exclusive(0.0), Bound::Inclusive(1e5), "Mbit/s", "near-source rate floor (802.1Qau rpgMinRate)"),
        pub gating: Gating = Param::choice("growth", "coordination: \"growth\" = pause growth at 2x the minimum, decreases apply (spec A1 [R]); \"literal\" = Algorithm 1 as printed; \"off\" = none (Fig. 8a)"),
        pub pacing: PacingMode = Param::choice("ns_only", "\"ns_only\": pace only while the near-source loop is active, a window loop at R_C and BBR at the minimum (ns-2, unpaced profile); \"always\": the testbed's paced profile"),
        pub snap_to_actual: bool = Param::bool(true, "before a cut, lower R_C to the rate the flow actually sends at (spec §4.2.3, A10)"),
        pub near_source: bool = Param::bool(true, "react to CNMs; false = the end-to-end loops alone (DCTCP for DC, BBR/Cubic for WAN): the paper's baseline"),
        pub ns_timer_us: f64 = Param::float(
            0.0,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1e7),
            "µs",
            "QCN's RP timer as a second recovery clock, each expiry an increase event, halved in active increase (802.1Qau rpgTimeReset: 15000); 0 = none, as the paper (recovery on acknowledged bytes only)",
        ),
    }
}

impl From<&AnnulusParams> for AnnulusConfig {
    fn from(p: &AnnulusParams) -> Self {
        let rp = |gd: f64| RpConfig {
            bc_limit_bytes: p.bc_limit_bytes,
            fr_cycles: p.fr_cycles,
            r_ai_bps: p.r_ai_mbps * 1e6,
            min_rate_bps: p.min_rate_mbps * 1e6,
            ..ns_rp(gd, p.line_rate_gbps, p.hyper_active)
        };
        AnnulusConfig {
            class: match p.class {
                ClassChoice::Auto => None,
                ClassChoice::Dc => Some(Class::Dc),
                ClassChoice::Wan => Some(Class::Wan),
            },
            wan_rtt_threshold_us: p.wan_rtt_threshold_us,
            e2e_dc: p.e2e_dc,
            e2e_wan: p.e2e_wan,
            rp_dc: rp(p.gd_dc),
            rp_wan: rp(p.gd_wan),
            gating: p.gating,
            pacing: p.pacing,
            snap_to_actual: p.snap_to_actual,
            near_source: p.near_source,
            ns_timer_us: p.ns_timer_us,
        }
    }
}

impl Default for AnnulusConfig {
    fn default() -> Self {
        AnnulusConfig::from(&AnnulusParams::default())
    }
}

fn ns_rp(gd: f64, line_rate_gbps: f64, hai: bool) -> RpConfig {
    RpConfig {
        variant: RpVariant::Qcn,
        gd,
        halve_cycle_in_ai: true,
        hai_rate_bps: hai.then_some(50e6),
        line_rate_bps: line_rate_gbps * 1e9,
        ..RpConfig::default()
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "annulus",
    summary: "Annulus: the flow's end-to-end algorithm (DCTCP for DC, BBR/Cubic for WAN) plus a QCN near-source loop driven by CNMs; sends at the minimum, growth paused at 2x it",
    reference: "Saeed et al., SIGCOMM 2020 §3–§5, Alg. 1 (specs/annulus.md); QCN RP from Alizadeh thesis Ch. 5 (specs/dc.md §4)",
    params: AnnulusParams::PARAMS,
    build,
};

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let params = AnnulusParams::from_params(p)?;
    let min_bps = params.min_rate_mbps * 1e6;
    if min_bps >= params.line_rate_gbps * 1e9 {
        return Err(p.invalid("min_rate_mbps", format!("{} Mbit/s is not below the line rate", min_bps / 1e6)));
    }
    Ok(Arc::new(AnnulusConfig::from(&params)))
}

impl AlgorithmFactory for AnnulusConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Annulus::new(*self))
    }
}

/// Both end-to-end candidates of an `auto` flow, until its first RTT sample.
struct Candidates {
    dc: E2eLoop,
    wan: E2eLoop,
}

/// The end-to-end loop, or both candidates while an `auto` flow awaits its first RTT sample.
/// One per flow and never moved on the report path, so the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum E2e {
    Classified(Class, E2eLoop),
    Pending(Box<Candidates>),
}

pub struct Annulus {
    cfg: AnnulusConfig,
    e2e: E2e,
    ns: NearSource,
    /// Smoothed RTT from the latest report that had one, µs.
    srtt_us: Option<u64>,
    /// min(NS, E2E) after the last update, bytes/s (infinite until the E2E rate is known).
    min_rate: f64,
    /// The flow's pacing was set by this wrapper and must be released when the near-source loop ends.
    paced_by_ns: bool,
}

impl Annulus {
    pub fn new(cfg: AnnulusConfig) -> Self {
        let e2e = match cfg.class {
            Some(Class::Dc) => E2e::Classified(Class::Dc, E2eLoop::new(cfg.e2e_dc)),
            Some(Class::Wan) => E2e::Classified(Class::Wan, E2eLoop::new(cfg.e2e_wan)),
            None => E2e::Pending(Box::new(Candidates { dc: E2eLoop::new(cfg.e2e_dc), wan: E2eLoop::new(cfg.e2e_wan) })),
        };
        let rp = if cfg.class == Some(Class::Wan) { cfg.rp_wan } else { cfg.rp_dc };
        Annulus { cfg, e2e, ns: NearSource::new(rp, cfg.ns_timer_us), srtt_us: None, min_rate: f64::INFINITY, paced_by_ns: false }
    }

    pub fn class(&self) -> Option<Class> {
        match self.e2e {
            E2e::Classified(c, _) => Some(c),
            E2e::Pending(_) => None,
        }
    }

    /// The loop that acts: the classified one, or the DC candidate while pending.
    fn e2e(&self) -> &E2eLoop {
        match &self.e2e {
            E2e::Classified(_, l) => l,
            E2e::Pending(c) => &c.dc,
        }
    }

    fn e2e_mut(&mut self) -> &mut E2eLoop {
        match &mut self.e2e {
            E2e::Classified(_, l) => l,
            E2e::Pending(c) => &mut c.dc,
        }
    }

    fn e2e_rate(&self) -> f64 {
        self.e2e().rate_bytes_per_s(self.srtt_us)
    }

    fn line_rate(&self) -> f64 {
        self.cfg.rp_dc.line_rate_bps / 8.0
    }

    /// Runs the end-to-end algorithm on a report (both candidates while pending); its action.
    fn e2e_report(&mut self, report: &Report) -> Action {
        match &mut self.e2e {
            E2e::Classified(_, l) => l.on_report(report),
            E2e::Pending(c) => {
                c.wan.on_report(report);
                c.dc.on_report(report)
            }
        }
    }

    /// Picks the class of an `auto` flow at its first RTT sample.
    fn classify(&mut self, report: &Report) {
        let Some(rtt) = report.rtt else { return };
        if !matches!(self.e2e, E2e::Pending(_)) {
            return;
        }
        let sample_us = if rtt.min_us > 0 { rtt.min_us } else { rtt.srtt_us };
        let class = if sample_us > self.cfg.wan_rtt_threshold_us { Class::Wan } else { Class::Dc };
        let placeholder = E2e::Classified(class, E2eLoop::new(E2eKind::Dctcp));
        if let E2e::Pending(c) = std::mem::replace(&mut self.e2e, placeholder) {
            let Candidates { dc, wan } = *c;
            self.e2e = E2e::Classified(class, if class == Class::Wan { wan } else { dc });
        }
        if !self.ns.active() {
            self.ns = NearSource::new(if class == Class::Wan { self.cfg.rp_wan } else { self.cfg.rp_dc }, self.cfg.ns_timer_us);
        }
    }

    /// The ACK half of a report: both loops' updates and their coordination (annulus.md §6.2).
    fn on_acks(&mut self, report: &Report) -> Action {
        let prev_min = self.min_rate;
        let cap = GROWTH_CAP * prev_min;
        let old_rate = self.e2e_rate();
        let ns_rate = self.ns.rate_bytes_per_s();
        let ns_binding = self.ns.active() && ns_rate < old_rate;

        let action = if self.cfg.gating == Gating::Literal && old_rate.is_finite() && old_rate >= cap {
            Action::default()
        } else {
            self.e2e_report(report)
        };
        let mut new_rate = self.e2e_rate();
        let mut e2e_limited = false;
        if self.cfg.gating == Gating::Growth && ns_binding && new_rate > old_rate {
            let ceiling = old_rate.max(cap);
            if new_rate > ceiling {
                let srtt = self.srtt_us;
                self.e2e_mut().limit_growth(ceiling, srtt);
                new_rate = self.e2e_rate();
                e2e_limited = true;
            }
        }
        // Rule 2: the binding end-to-end loop fell, so the near-source loop falls in proportion.
        if self.cfg.gating != Gating::Off
            && self.ns.active()
            && old_rate <= ns_rate
            && new_rate < old_rate
            && old_rate.is_finite()
        {
            self.ns.set_rate_bytes_per_s(ns_rate * new_rate / old_rate);
        }
        self.ns_acks(report.acked_bytes, report.now_us, prev_min);
        if e2e_limited {
            Action { cwnd_bytes: Some(self.e2e().cwnd_bytes()), ..action }
        } else {
            action
        }
    }

    /// The near-source loop's recovery clocks (the ACK clock, and the timer when one is set),
    /// paused while it is at or above 2× the minimum.
    fn ns_acks(&mut self, acked_bytes: u64, now_us: u64, prev_min: f64) {
        if !self.ns.active() {
            return;
        }
        let cap = GROWTH_CAP * prev_min;
        let before = self.ns.rate_bytes_per_s();
        let grow = |ns: &mut NearSource| {
            ns.on_acked_bytes(acked_bytes);
            ns.on_time(now_us);
        };
        match self.cfg.gating {
            Gating::Off => grow(&mut self.ns),
            Gating::Literal if before < cap => grow(&mut self.ns),
            Gating::Growth if before < cap => {
                grow(&mut self.ns);
                if self.ns.active() && self.ns.rate_bytes_per_s() > before.max(cap) {
                    self.ns.set_rate_bytes_per_s(before.max(cap));
                }
            }
            // Paused: these ACKs and timer expiries are dropped, not banked (annulus.md §4.2.3).
            Gating::Literal | Gating::Growth => self.ns.skip_time(now_us),
        }
        // After the clamp: cycles that would pass the cap do not end the loop on the way.
        self.ns.deactivate_at_line_rate();
    }

    /// A CNM (annulus.md §6.2 `on_cnm`). Returns true when it cut the end-to-end window.
    fn on_cnm(&mut self, qfb: u8, now_us: u64) -> bool {
        let e2e_rate = self.e2e_rate();
        let actual = self.min_rate.min(self.line_rate());
        let (before, factor) = self.ns.on_cnm(qfb, actual, self.cfg.snap_to_actual, now_us);
        if self.cfg.gating != Gating::Off && before <= e2e_rate && factor < 1.0 {
            self.e2e_mut().scale(factor);
            return true;
        }
        false
    }

    fn update_min(&mut self) {
        self.min_rate = self.ns.rate_bytes_per_s().min(self.e2e_rate());
    }

    /// The action the datapath gets: the end-to-end action, with the window the coordination may
    /// have changed and the pacing rule of `PacingMode`.
    fn actuate(&mut self, mut action: Action, window_changed: bool) -> Action {
        if window_changed {
            action.cwnd_bytes = Some(self.e2e().cwnd_bytes());
        }
        let pace = self.ns.active() || self.cfg.pacing == PacingMode::Always;
        if pace && self.min_rate.is_finite() {
            // A window loop is never paced at min() = its own cwnd/srtt: that keeps it from ever
            // filling its window, so it never counts as window-limited and never grows, while the
            // growth pause holds R_C at 2× it (a lone flow froze at a third of the link after one
            // CNM in ccp-sim, until 2026-11-30). Unpaced profile (§5.2 [R]): the only rate limiter
            // is the near-source loop's R_C; the window bounds the rest. Paced profile: the later
            // of the two timestamps, the kernel's (cwnd and RTT, as Linux derives it) and R_C's.
            let rate = match (self.e2e().rate_based(), self.cfg.pacing) {
                (true, _) => self.min_rate,
                (false, PacingMode::NsOnly) => self.ns.rate_bytes_per_s(),
                (false, PacingMode::Always) => self.ns.rate_bytes_per_s().min(self.e2e().pacing_rate_bytes_per_s(self.srtt_us)),
            };
            if rate.is_finite() {
                action.pacing = Some(Pacing::BytesPerSec(rate));
            }
            self.paced_by_ns = !self.e2e().rate_based();
        } else if self.paced_by_ns {
            // The near-source loop ended: hand pacing back to the end-to-end algorithm.
            self.paced_by_ns = false;
            if !self.e2e().rate_based() {
                action.pacing = Some(Pacing::Off);
            } else {
                action.pacing = Some(Pacing::BytesPerSec(self.e2e_rate()));
            }
        }
        action
    }
}

impl Algorithm for Annulus {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.srtt_us = start.seed.as_ref().and_then(|s| s.srtt_us).filter(|&r| r > 0);
        let action = match &mut self.e2e {
            E2e::Classified(_, l) => l.init(start),
            E2e::Pending(c) => {
                c.wan.init(start);
                c.dc.init(start)
            }
        };
        self.update_min();
        self.actuate(action, false)
    }

    fn on_report(&mut self, report: &Report) -> Action {
        if let Some(rtt) = report.rtt {
            if rtt.srtt_us > 0 {
                self.srtt_us = Some(rtt.srtt_us);
            }
        }
        self.classify(report);
        let mut action = self.on_acks(report);
        let mut window_changed = false;
        if let (true, Some(NetworkFeedback::Qcn { fb_quantized, .. })) = (self.cfg.near_source, report.feedback) {
            self.update_min();
            window_changed = self.on_cnm(fb_quantized, report.now_us);
        }
        self.update_min();
        if window_changed && action.cwnd_bytes.is_none() {
            action.cwnd_bytes = Some(self.e2e().cwnd_bytes());
        }
        self.actuate(action, window_changed)
    }

    fn state(&self) -> Vec<StateVar> {
        let class = match self.class() {
            None => -1.0,
            Some(Class::Dc) => 0.0,
            Some(Class::Wan) => 1.0,
        };
        let finite = |v: f64| if v.is_finite() { v } else { -1.0 };
        let mut vars = vec![
            StateVar { name: "class_wan", value: class },
            StateVar { name: "ns_active", value: if self.ns.active() { 1.0 } else { 0.0 } },
            StateVar { name: "ns_rate_bytes_per_s", value: finite(self.ns.rate_bytes_per_s()) },
            StateVar { name: "ns_target_bytes_per_s", value: finite(self.ns.target_bytes_per_s()) },
            StateVar { name: "e2e_rate_bytes_per_s", value: finite(self.e2e_rate()) },
            StateVar { name: "min_rate_bytes_per_s", value: finite(self.min_rate) },
            StateVar { name: "cnms", value: self.ns.cnms() as f64 },
        ];
        vars.extend(self.e2e().state());
        vars
    }
}
