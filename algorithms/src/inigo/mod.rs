//! TCP Inigo, "ambidextrous congestion control" (A. G. Shewmaker, PhD thesis, UC Santa Cruz,
//! 2016, ch. 4; ICCCN 2016), sender side. Implemented from specs/inigo.md, which reads the thesis
//! against the author's kernel module `tcp_inigo.c` ([K]) and states where they differ.
//!
//! Model. Inigo imitates DCTCP's ECN-driven congestion ratio α with whatever signal the path has:
//! - **RTT mode** (no ECN): an RTT sample is *late* when it exceeds RTT_min·(1 + 174/1024), the
//!   queueing delay of DCTCP's fluid-optimal K ≈ 0.17·C·d (§3.1). α is the EWMA (g = 1/16) of the
//!   late fraction (§3.3). Every W_sub = 10 acknowledged packets, α > 0 cuts the window by
//!   ≈ W_sub·α/2 packets and holds it for a round trip (the sub-window response, §3.5); the window
//!   grows by 2 packets per window otherwise. Slow start ends on the first α > 0 after 8 samples.
//! - **ECN mode** (ECN negotiated): DCTCP exactly (α over echoed bytes once per window, cut
//!   cwnd·(1 − α/2) at most once per window), plus an immediate slow-start exit on the first echo
//!   of a window (§3.6). Optionally falls back to RTT mode mid-flow when the network never marks
//!   (§3.7, A-1: `fallback`).
//!
//! The default variant is kernel-faithful (`sender.rs`, §3.9): [K]'s integer arithmetic, α updated
//! at the sub-window points in congestion avoidance and on every check in slow start, the RTT
//! counters reset only when a reduction begins, no backoff on loss when α = 0 (faithful; §3.8).
//! `variant = "literal"` is the thesis's boxes in floating point (`literal.rs`, §3.10).
//!
//! On a report-based agent (spec §7.3):
//! - Late marking happens in the datapath: the agent sets `Action::rtt_threshold_us` to the
//!   threshold for its RTT_min (updated whenever RTT_min falls) and the datapath counts samples
//!   above it (`Report::rtt_samples_over_threshold`, per ACK as [K] counts, A-16). A sample that
//!   is a new minimum is tested against the previous threshold until the next report.
//! - Reports come every W_sub packets acknowledged (`Action::report_acked_pkts`), at once on loss,
//!   and at least once per RTT. Each report is one step of the kernel's per-ACK machine with the
//!   report's packets as that ACK's `acked`: the sub-window points are exact when a report covers
//!   exactly W_sub packets (one packet per ACK), and `trigger = "crossing"` (the default here,
//!   A-20) fires on a crossed multiple so that delayed and stretch ACKs cannot silence the
//!   response, as they do in the kernel (edge behaviour 2). The slow-start check runs once per
//!   report instead of once per ACK.
//! - PRR and `high_seq` become: a reduction sets the window at once and holds growth and responses
//!   until the packets in flight at the reduction are acknowledged.
//! - cwnd-limited (§7.1) is approximated: not app-limited, and either data waits to be sent or the
//!   flight fills the window to within one packet.
//! - ECN accounting counts SACKed bytes with the cumulative ones (a duplicate ACK counts one MSS
//!   in [K]; a report cannot tell them apart). The datapath cannot stop setting ECT after a
//!   fallback (the eBPF datapath has no per-socket ECT switch); the algorithm stops reacting to
//!   echoes instead.
//! - Mode: `mode = "auto"` takes the connection's ECN negotiation from the datapath
//!   (`FlowStart::ecn`; the eBPF datapath knows it, libccp's CREATE does not — unknown counts as
//!   no ECN), `"ecn"` forces ECN mode ([K] `inigo_force_ecn`), `"rtt"` RTT mode.
//!
//! The receiver half (relative forward delay, CE marking or receive-window control) is a datapath
//! program: `datapath-shims/datapaths/inigo-receiver`.

mod literal;
mod sender;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::window::RenoWindow;
use ccp_contract::params::shared;
use ccp_contract::{
    declare_params, param_choice, Action, Algorithm, AlgorithmFactory, AlgorithmInfo, FlowStart, Param, ParamError, Params,
    Report, ReportPolicy, StateVar,
};

pub use literal::{dctcp_per_ack, per_window_cut, sub_window_cut, Batch, Literal};
pub use sender::{
    alpha_min, clamp_w_sub, ecn_ssthresh, late_threshold_us, rtt_ssthresh, update_alpha, Ack, CaState, Fallback, Mode, Sender,
    SenderConfig, Trigger, ZeroCut, ALPHA_MAX, MARKTHRESH, SHIFT_G, SS_OBS_NEEDED, W_SUB_DEFAULT,
};

param_choice! {
    pub enum Variant {
        Kernel = "kernel",
        Literal = "literal",
    }
}

param_choice! {
    pub enum ModeChoice {
        Auto = "auto",
        Ecn = "ecn",
        Rtt = "rtt",
    }
}

declare_params! {
    /// Inigo's parameters, as declared; [`InigoConfig`] is what they configure.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct InigoParams {
        pub variant: Variant = Param::choice(
            "kernel",
            "\"kernel\": the published module's integer machine (spec §3.9); \"literal\": the thesis's boxes in floating point (§3.10)",
        ),
        pub mode: ModeChoice = Param::choice(
            "auto",
            "\"auto\": ECN mode when the connection negotiated ECN, RTT mode otherwise; \"ecn\" forces ECN mode (inigo_force_ecn); \"rtt\" RTT mode",
        ),
        pub fallback: Fallback = Param::choice(
            "intended",
            "ECN→RTT switch mid-flow: \"intended\" when a window has no echoes, ≥ 2 late RTTs and ≥ 8 samples; \"as_published\" ignores echoes (the module's bug, risk R-1); \"off\"",
        ),
        pub trigger: Trigger = Param::choice(
            "crossing",
            "sub-window points: \"crossing\" fires when a multiple of W_sub is crossed (reports of several ACKs); \"exact\" only on exact multiples, as the kernel per ACK",
        ),
        pub w_sub: u32 = Param::int(W_SUB_DEFAULT as i64, 0, 512, "packets", "sub-window W_sub (rtt_fairness; clamped to [3, 512]; 0 = once per window)"),
        pub shift_g: u32 = Param::int(SHIFT_G as i64, 1, 10, "", "EWMA gain g = 2^-shift_g (1/16)"),
        pub markthresh: u32 = Param::int(MARKTHRESH as i64, 0, 1024, "/1024", "late when RTT > RTT_min·(1 + markthresh/1024) (174 ≈ 0.17)"),
        pub ss_obs_needed: u32 = Param::int(SS_OBS_NEEDED as i64, 1, 1000, "samples", "RTT samples before the slow-start check (8, as HyStart)"),
        pub clamp_alpha_on_loss: bool = Param::bool(false, "ECN mode: α = 1 on a retransmission timeout (inigo_clamp_alpha_on_loss)"),
        pub zero_cut: ZeroCut = Param::choice(
            "hold",
            "RTT mode, α > 0 but a cut of zero packets: \"hold\" enters CWR anyway, as the module (growth freezes ~1 RTT per update until α decays); \"skip\" ends slow start only (the thesis's no-op; not the module's)",
        ),
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "inigo",
    summary:
        "Inigo: DCTCP-style α from late RTTs (RTT_min·1.17) with a sub-window response, or from ECN echoes with a slow-start exit",
    reference: "Shewmaker, PhD thesis, UC Santa Cruz 2016, ch. 4; tcp_inigo.c (specs/inigo.md §3)",
    params: InigoParams::PARAMS,
    build,
};

#[derive(Debug, Clone, Copy)]
pub struct InigoConfig {
    pub variant: Variant,
    pub mode: ModeChoice,
    pub sender: SenderConfig,
    pub init_cwnd_pkts: f64,
}

impl From<&InigoParams> for InigoConfig {
    fn from(p: &InigoParams) -> Self {
        InigoConfig {
            variant: p.variant,
            mode: p.mode,
            sender: SenderConfig {
                w_sub: clamp_w_sub(p.w_sub),
                shift_g: p.shift_g,
                markthresh: p.markthresh,
                ss_obs_needed: p.ss_obs_needed,
                fallback: p.fallback,
                trigger: p.trigger,
                clamp_alpha_on_loss: p.clamp_alpha_on_loss,
                zero_cut: p.zero_cut,
            },
            init_cwnd_pkts: p.init_cwnd_pkts,
        }
    }
}

impl Default for InigoConfig {
    fn default() -> Self {
        InigoConfig::from(&InigoParams::default())
    }
}

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let params = InigoParams::from_params(p)?;
    if params.shift_g > 10 {
        return Err(p.invalid("shift_g", "must leave room for α's 10-bit scale"));
    }
    Ok(Arc::new(InigoConfig::from(&params)))
}

impl AlgorithmFactory for InigoConfig {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        Box::new(Inigo::new(*self))
    }
}

#[derive(Debug, Clone)]
enum Core {
    Kernel(Sender),
    Literal(Literal),
}

pub struct Inigo {
    cfg: InigoConfig,
    core: Core,
    mss: f64,
    /// The smallest RTT sample so far (never expires, as in [K]; A-7), µs.
    rtt_min_us: Option<u32>,
    /// The threshold the datapath counts late samples against, as last asked.
    threshold_us: Option<u64>,
}

impl Inigo {
    pub fn new(cfg: InigoConfig) -> Inigo {
        let core = Core::Kernel(Sender::new(cfg.sender, Mode::Rtt, cfg.init_cwnd_pkts as u32));
        Inigo { cfg, core, mss: 1448.0, rtt_min_us: None, threshold_us: None }
    }

    fn mode_for(&self, start: &FlowStart) -> Mode {
        match (self.cfg.mode, start.ecn) {
            (ModeChoice::Ecn, _) | (ModeChoice::Auto, Some(true)) => Mode::Ecn,
            _ => Mode::Rtt,
        }
    }

    fn cwnd_pkts(&self) -> f64 {
        match &self.core {
            Core::Kernel(s) => f64::from(s.cwnd),
            Core::Literal(l) => l.cwnd,
        }
    }

    /// The window, and the threshold when it changed.
    fn action(&mut self) -> Action {
        let mut a = Action::cwnd(self.cwnd_pkts() * self.mss);
        if let Some(min) = self.rtt_min_us {
            let t = u64::from(late_threshold_us(min, self.cfg.sender.markthresh));
            if self.threshold_us != Some(t) {
                self.threshold_us = Some(t);
                a = a.with_rtt_threshold_us(t);
            }
        }
        a
    }
}

/// The report's packets and bytes as one step of the per-ACK machine.
fn ack_of(r: &Report, mss: f64) -> Ack {
    let pkts = r.acked_pkts.saturating_add(r.sacked_pkts);
    let inflight = (r.inflight_bytes as f64 / mss).round();
    let cwnd_limited = RenoWindow::window_limits(r);
    Ack {
        acked_pkts: u32::try_from(pkts).unwrap_or(u32::MAX),
        acked_bytes: r.acked_bytes.saturating_add(r.sacked_bytes),
        ece_bytes: r.ce_bytes,
        ece: r.ece_acks > 0 || r.ce_pkts > 0 || r.ce_bytes > 0,
        cwnd_limited,
        inflight_pkts: inflight.clamp(0.0, f64::from(u32::MAX)) as u32,
    }
}

impl Algorithm for Inigo {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn init(&mut self, start: &FlowStart) -> Action {
        self.mss = start.mss();
        let mode = self.mode_for(start);
        self.rtt_min_us = start.seed.as_ref().and_then(|s| s.min_rtt_us).map(|m| u32::try_from(m).unwrap_or(u32::MAX).max(1));
        let start_pkts = match &start.seed {
            Some(s) => (s.cwnd_bytes as f64 / self.mss).round().max(2.0),
            None if start.init_cwnd_bytes > 0 => (start.init_cwnd_bytes as f64 / self.mss).round().max(2.0),
            None => self.cfg.init_cwnd_pkts,
        };
        self.core = match self.cfg.variant {
            Variant::Kernel => {
                let mut s = Sender::new(self.cfg.sender, mode, start_pkts as u32);
                if start.seed.is_some() {
                    // A running flow continues in congestion avoidance from its window.
                    s.ssthresh = s.cwnd;
                }
                if let Some(m) = self.rtt_min_us {
                    s.rtt_min_us = s.rtt_min_us.min(m);
                }
                Core::Kernel(s)
            }
            Variant::Literal => {
                let sc = &self.cfg.sender;
                let mut l =
                    Literal::new(mode, sc.w_sub.max(1), 1.0 / f64::from(1u32 << sc.shift_g), sc.ss_obs_needed, start_pkts);
                if start.seed.is_some() {
                    l.ssthresh = l.cwnd;
                }
                Core::Literal(l)
            }
        };
        self.threshold_us = None;
        // Every W_sub packets (the sub-window points), and once per RTT for windows smaller
        // than that or flows that stall.
        self.action().with_report(ReportPolicy::PerRtt { rtts: 1.0 }).with_report_acked_pkts(self.cfg.sender.w_sub)
    }

    fn on_report(&mut self, r: &Report) -> Action {
        if r.mss_bytes > 0 {
            self.mss = r.mss();
        }
        let ack = ack_of(r, self.mss);
        let samples = r.rtt.map_or(0, |x| u64::from(x.samples));
        let late = r.rtt_samples_over_threshold.min(samples);
        let min_us = r.rtt.map(|x| u32::try_from(x.min_us).unwrap_or(u32::MAX)).filter(|&m| m > 0);
        if let Some(m) = min_us {
            self.rtt_min_us = Some(self.rtt_min_us.map_or(m, |c| c.min(m)));
        }
        match &mut self.core {
            Core::Kernel(s) => {
                s.rtt_counted(samples, late, min_us);
                if r.timeouts > 0 {
                    s.on_rto(ack.inflight_pkts);
                } else if r.lost_pkts > 0 {
                    s.on_loss(ack.inflight_pkts);
                }
                s.on_ack(&ack);
            }
            Core::Literal(l) => {
                let b = Batch {
                    acked_pkts: f64::from(ack.acked_pkts),
                    samples: samples as f64,
                    late: late as f64,
                    ece: ack.ece,
                    ece_fraction: if ack.acked_bytes > 0 {
                        (ack.ece_bytes as f64 / ack.acked_bytes as f64).min(1.0)
                    } else {
                        0.0
                    },
                    inflight_pkts: f64::from(ack.inflight_pkts),
                    cwnd_limited: ack.cwnd_limited,
                    loss: r.lost_pkts > 0,
                    timeout: r.timeouts > 0,
                };
                l.on_batch(&b);
            }
        }
        self.action()
    }

    fn state(&self) -> Vec<StateVar> {
        match &self.core {
            Core::Kernel(s) => vec![
                StateVar { name: "cwnd_pkts", value: f64::from(s.cwnd) },
                StateVar { name: "ssthresh_pkts", value: f64::from(s.ssthresh) },
                StateVar { name: "alpha", value: f64::from(s.alpha) / f64::from(ALPHA_MAX) },
                StateVar { name: "rtt_mode", value: f64::from(u8::from(s.mode == Mode::Rtt)) },
                StateVar { name: "rtt_min_us", value: f64::from(s.rtt_min_us) },
                StateVar { name: "holding", value: f64::from(u8::from(s.ca_state != CaState::Open)) },
                StateVar { name: "reductions", value: s.reductions as f64 },
                StateVar { name: "fell_back", value: f64::from(u8::from(s.fell_back)) },
            ],
            Core::Literal(l) => vec![
                StateVar { name: "cwnd_pkts", value: l.cwnd },
                StateVar { name: "ssthresh_pkts", value: l.ssthresh.min(1e12) },
                StateVar { name: "alpha", value: l.alpha },
                StateVar { name: "rtt_mode", value: f64::from(u8::from(l.mode == Mode::Rtt)) },
            ],
        }
    }
}
