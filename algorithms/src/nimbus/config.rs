//! NimbusCC's configuration: its declared parameters (one table drives validation, defaults and
//! `ccp-agent algorithms`), the validated `NimbusConfig` with its cross-field checks, and the
//! factory that builds flows. BasicDelay's parameters and the shared ones (μ, the initial window)
//! are declared where they belong and only listed here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ccp_contract::params::shared;
use ccp_contract::{declare_params, param_choice, Algorithm, AlgorithmFactory, AlgorithmInfo, Bound, Param, ParamError, Params};

use super::cross_traffic::LinkRate;
use super::elasticity::{self, EtaBands, EtaForm, Plans, SpectrumPath};
use super::election;
use super::mode::{self, Mode, ModeConfig};
use super::multcp;
use super::pulse::{self, Pulse};
use super::{NimbusCC, US_PER_S};
use crate::basic_delay::{self, BasicDelayCore, TargetDelay};
use crate::copa::CopaConfig;
use crate::cubic::CubicConfig;
use crate::reno::RenoConfig;
use crate::vegas::VegasConfig;

/// Report interval requested from the datapath, µs (paper §7: 10 ms).
pub const REPORT_INTERVAL_US: u64 = 10_000;
/// Grid step of the sampled series, µs (paper §7, spec A4: 10 ms).
pub const SAMPLE_INTERVAL_US: u64 = 10_000;
/// Pulse frequency in competitive mode, Hz (paper §3.4, §4.2: 5).
pub const FREQ_COMPETITIVE_HZ: f64 = 5.0;
/// Pulse frequency in delay mode, Hz (paper §4.2: 6).
pub const FREQ_DELAY_HZ: f64 = 6.0;
/// Entering competitive mode restores the rate from this long ago, s (paper §4.1: 5 s).
pub const RESTORE_LOOKBACK_S: f64 = 5.0;
/// Forced competitive when x_min exceeds this fraction of the competitive pulse period (spec A21).
pub const MAX_RTT_PERIOD_FRACTION: f64 = 0.8;
/// In delay mode, a loss rate above this over a loss period counts as a lossy period (spec A22: 1 %).
pub const DELAY_LOSS_LIMIT: f64 = 0.01;
/// Length of one delay-mode loss period, µs (spec A22: "> 1 % for > 1 s").
pub const DELAY_LOSS_PERIOD_US: u64 = 1_000_000;
/// Consecutive lossy periods before the safety decrease fires: losses must persist for more than
/// one period (spec A22: "> 1 s"), so one burst — a single loss event, which can exceed 1 % of one
/// period on its own — never fires it.
pub const DELAY_LOSS_PERSIST_PERIODS: u32 = 2;
/// The delay mode's safety multiplicative decrease per persisting lossy period (dimensionless):
/// the rate is multiplied by this, and divided by it again (up to 1) after each period without
/// excess loss. 0.7 is the decrease of the competitive controller (Cubic's β, spec A16, Linux
/// constants) — the reaction the old rule (switch to competitive mode) produced on the next loss —
/// applied at most once per second rather than once per RTT: a safety net, not a loss-based
/// controller. Not tuned to any link: it is a ratio, and the period is the spec's.
pub const DELAY_LOSS_BACKOFF: f64 = 0.7;
/// No valid rate pair for this long: the detector has no evidence, ms.
pub const STALE_RATE_MS: f64 = 500.0;
/// Time constant of the watcher mode ratio and the multi-pulser ratio, s (authors: 0.02 per 5 ms).
pub const ROLE_EWMA_TAU_S: f64 = 0.25;

declare_params! {
    /// NimbusCC's parameters, as declared; [`NimbusConfig`] is what they configure.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct NimbusParams {
        // The link and the cross-traffic estimate.
        pub mu_mbit_per_s: f64 = shared::MU_MBIT_PER_S,
        pub mu_window_s: f64 = shared::MU_WINDOW_S,
        pub header_bytes: f64 = shared::HEADER_BYTES,
        pub mu_fit: bool = Param::bool(
            true,
            "with mu estimated: mu_hat = max(max receive rate, the intercept of 1/R against 1/S over our pulses), so cross traffic present from the start does not hide mu (cross_traffic::LinkFit)",
        ),
        pub smooth_rates: bool = Param::bool(false, "replace S and R by EWMAs (gain 0.2) before Eq. 1 (the authors' use_ewma; off)"),
        pub stale_rate_ms: f64 = Param::float(
            STALE_RATE_MS,
            Bound::Exclusive(0.0),
            Bound::Inclusive(60_000.0),
            "ms",
            "no valid send/receive rate pair for this long: the detector has no evidence and leans elastic",
        ),
        // The pulse.
        pub pulse_size: f64 = Param::float(
            pulse::PULSE_SIZE,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "pulse peak as a fraction of mu (paper Fig. 6: 1/4; trough = 1/3 of it)",
        ),
        pub pulse_up_fraction: f64 = Param::float(
            pulse::UP_FRACTION,
            Bound::Exclusive(0.0),
            Bound::Exclusive(1.0),
            "",
            "fraction of the pulse period in the positive half-sine (paper Fig. 6: 1/4)",
        ),
        pub freq_competitive_hz: f64 = Param::float(FREQ_COMPETITIVE_HZ, Bound::Exclusive(0.0), Bound::Inclusive(20.0), "Hz", "pulse frequency f_pc in competitive mode (paper: 5)"),
        pub freq_delay_hz: f64 = Param::float(FREQ_DELAY_HZ, Bound::Exclusive(0.0), Bound::Inclusive(20.0), "Hz", "pulse frequency f_pd in delay mode (paper §4.2: 6)"),
        pub mode_dependent_frequency: bool = Param::bool(
            true,
            "pulse at f_pd in delay mode even as a single flow (authors' code; spec A9); false = always f_pc",
        ),
        // The detector.
        pub sample_interval_us: u64 = Param::int(SAMPLE_INTERVAL_US as i64, 1_000, 50_000, "µs", "grid step of the sampled series (paper §7: 10 ms)"),
        pub fft_len: usize = Param::int(elasticity::FFT_LEN as i64, 64, 4096, "samples", "pulser FFT window (authors: 512 = 5.12 s; paper: 5 s = 500)"),
        pub watcher_fft_len: usize = Param::int(elasticity::WATCHER_FFT_LEN as i64, 64, 4096, "samples", "watcher FFT window (authors: 256 = 2.56 s)"),
        pub eta_form: EtaForm = Param::choice(
            "band",
            "eta numerator/denominator: \"band\" = band maxima (authors; spec A1, A2), \"bin\" = the paper's Eq. 3 literally: the bin nearest f_p over the largest bin in (f_p + eps, 2 f_p - eps)",
        ),
        pub eps_hz: f64 = Param::float(elasticity::EPS_HZ, Bound::Exclusive(0.0), Bound::Inclusive(5.0), "Hz", "epsilon of Eq. 3: numerator half-width and guard below 2 f_p (and above f_p with eta_form = \"bin\") (paper: 0.5)"),
        pub den_low_offset_hz: f64 = Param::float(
            elasticity::DEN_LOW_OFFSET_HZ,
            Bound::Exclusive(0.0),
            Bound::Inclusive(10.0),
            "Hz",
            "eta_form = \"band\": the denominator band starts this far above f_p (authors: 1.5, keeps the other pulsing frequency out); \"bin\" starts it at eps_hz, as Eq. 3",
        ),
        pub eta_whiten: bool = Param::bool(
            false,
            "in delay mode, divide eta's bins by the gain of the one-RTT rate window, |sinc(f RTT)| floored at 0.2 (elasticity::window_gain): fewer false 'elastic' verdicts against Poisson traffic at long RTTs, but fewer true ones against elastic flows too (off)",
        ),
        pub align_2rtt: bool = Param::bool(false, "read z 2 RTTs later than the other series in the window (authors' code; spec A7: off)"),
        pub eta_thresh: f64 = Param::float(mode::ETA_THRESH, Bound::Exclusive(0.0), Bound::Inclusive(100.0), "", "E below this returns to delay mode (paper §3.4: 2)"),
        pub eta_hysteresis: f64 = Param::float(
            mode::ETA_HYSTERESIS,
            Bound::Inclusive(0.0),
            Bound::Inclusive(100.0),
            "",
            "E above eta_thresh + this switches to competitive mode (authors: 0.25)",
        ),
        pub eta_ewma_tau_s: f64 = Param::float(mode::ETA_EWMA_TAU_S, Bound::Exclusive(0.0), Bound::Inclusive(60.0), "s", "time constant of E, the smoothed eta (spec A5: 0.5)"),
        pub reference_guards: bool = Param::bool(true, "the authors' guards G1-G4 on E (spec §5.6, A6)"),
        pub detect_after_s: f64 = Param::float(mode::DETECT_AFTER_S, Bound::Inclusive(0.0), Bound::Inclusive(3600.0), "s", "no detection before this long after the first report (authors: 10)"),
        pub switch_after_s: f64 = Param::float(mode::SWITCH_AFTER_S, Bound::Inclusive(0.0), Bound::Inclusive(3600.0), "s", "no mode switch before this long after the first report (authors: 15)"),
        pub delay_dwell_s: f64 = Param::float(mode::DELAY_DWELL_S, Bound::Inclusive(0.0), Bound::Inclusive(3600.0), "s", "minimum time since the last switch before returning to delay mode (authors: 5)"),
        pub restore_lookback_s: f64 = Param::float(
            RESTORE_LOOKBACK_S,
            Bound::Inclusive(0.0),
            Bound::Inclusive(60.0),
            "s",
            "entering competitive mode restores the receive rate from this long ago (paper §4.1: 5)",
        ),
        pub restore_rtt: RestoreRtt = Param::choice(
            "current",
            "window restored on entering competitive mode: R(5 s ago) times \"current\" = today's RTT (authors' code, spec A10) or \"sample\" = the RTT R was measured at, paced over that RTT until the RTT is back",
        ),
        // The controllers.
        pub start_mode: Mode = Param::choice("competitive", "mode at flow start (paper §4.1: competitive)"),
        pub competitive: CompetitiveAlg = Param::choice(
            "cubic",
            "TCP-competitive controller (paper: Cubic; NewReno, and MulTCP(N) — the authors' code's default — as options; spec A16)",
        ),
        pub multcp_flows: usize = Param::int(
            multcp::MULTCP_FLOWS as i64,
            1,
            64,
            "flows",
            "competitive = \"multcp\": number N of Reno flows MulTCP emulates (authors' xtcp_flows: 2)",
        ),
        pub cubic_recovery_by_data: bool = Param::bool(
            false,
            "competitive Cubic: a congestion event lasts until the flight at the reduction is acknowledged (cubic.rs's default, like Linux); false = one loss reaction per RTT (authors' code, spec §6.4)",
        ),
        pub delay: DelayAlg = Param::choice("basic_delay", "delay controller (paper §7.1: BasicDelay; Copa default mode and Vegas as options)"),
        pub alpha: f64 = basic_delay::params::ALPHA,
        pub beta: f64 = basic_delay::params::BETA,
        pub target_delay_ms: f64 = basic_delay::params::TARGET_DELAY_MS,
        pub target_delay_fraction: f64 = basic_delay::params::TARGET_DELAY_FRACTION,
        pub theta_decay_per_s: f64 = Param::float(
            basic_delay::THETA_DECAY_PER_S,
            Bound::Inclusive(0.0),
            Bound::Inclusive(100.0),
            "1/s",
            "glide of BasicDelay's theta = (x_min + d_t)/x_min back to its target after entering delay mode (spec A17: 0.5)",
        ),
        pub vegas_alpha_pkts: f64 = Param::float(crate::vegas::ALPHA_PKTS, Bound::Inclusive(0.0), Bound::Inclusive(1000.0), "packets", "Vegas alpha when delay = \"vegas\" (spec A18: 2)"),
        pub vegas_beta_pkts: f64 = Param::float(crate::vegas::BETA_PKTS, Bound::Inclusive(0.0), Bound::Inclusive(1000.0), "packets", "Vegas beta when delay = \"vegas\" (spec A18: 4)"),
        pub copa_delta: f64 = Param::float(crate::copa::DELTA, Bound::Exclusive(0.0), Bound::Inclusive(10.0), "", "Copa delta when delay = \"copa\" (spec A18: 0.5)"),
        pub copa_target_queue: bool = Param::bool(
            true,
            "Copa measures d_q above BasicDelay's target d_t (with its glide) and the all-time minimum RTT, keeping the standing queue Eq. 1 needs (authors' Copa: above 1.2 x_min); false = Copa as published",
        ),
        pub min_rate_fraction: f64 = basic_delay::params::MIN_RATE_FRACTION,
        pub init_cwnd_pkts: f64 = shared::INIT_CWND_PKTS,
        // Safety rules.
        pub insufficient_share_guard: bool = Param::bool(
            true,
            "stop pulsing and stay competitive while the base rate is below the pulse trough for an FFT window (paper §6; spec A11)",
        ),
        pub max_rtt_period_fraction: f64 = Param::float(
            MAX_RTT_PERIOD_FRACTION,
            Bound::Inclusive(0.0),
            Bound::Inclusive(100.0),
            "",
            "forced competitive while x_min > this / freq_competitive_hz (spec A21: 0.8); 0 = off",
        ),
        pub delay_loss_limit: f64 = Param::float(
            DELAY_LOSS_LIMIT,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "in delay mode, a loss rate above this over 1 s periods is excess loss (spec A22: 0.01); 0 = off",
        ),
        pub delay_loss_response: DelayLossResponse = Param::choice(
            "decrease",
            "excess loss in delay mode: \"decrease\" = rate x 0.7 once losses persist > 1 s (spec A22), \"switch\" = the earlier rule, competitive mode at the first lossy second (flaps back after the dwell)",
        ),
        // Several NimbusCC flows.
        pub multi_flow: bool = Param::bool(false, "pulser/watcher roles with the randomized election of paper §4.2 (off, as in the authors' code)"),
        pub expect_nimbus_peers: bool = Param::bool(false, "with multi_flow: start in delay mode (paper §4.2 deployment scenarios)"),
        pub kappa: f64 = Param::float(election::KAPPA, Bound::Exclusive(0.0), Bound::Inclusive(100.0), "", "expected new pulsers per FFT window, Eq. 5 (paper: 1)"),
        pub election_period_ms: f64 = Param::float(election::ELECTION_PERIOD_US as f64 / 1e3, Bound::Exclusive(0.0), Bound::Inclusive(10_000.0), "ms", "tau of Eq. 5: period of election decisions (paper: 10)"),
        pub pulser_exit_prob: f64 = Param::float(
            election::PULSER_EXIT_PROB,
            Bound::Inclusive(0.0),
            Bound::Inclusive(1.0),
            "",
            "probability per election period that a pulser seeing another pulser becomes a watcher (spec A14: 0.01)",
        ),
        pub multi_pulser_thresh: f64 = Param::float(election::MULTI_PULSER_THRESH, Bound::Exclusive(0.0), Bound::Inclusive(100.0), "", "EWMA |Z|/|Y| over the pulse band above which a pulser suspects another (authors: 2)"),
        pub no_pulser_thresh: f64 = Param::float(election::NO_PULSER_THRESH, Bound::Exclusive(0.0), Bound::Inclusive(100.0), "", "watcher: pulse band over high band of |R| below this = no pulser (authors: 1.5)"),
        pub watcher_switch_thresh: f64 = Param::float(
            election::WATCHER_SWITCH_THRESH,
            Bound::Exclusive(0.0),
            Bound::Inclusive(100.0),
            "",
            "watcher: |R(f_other)|/|R(f_current)| EWMA above this follows the other mode (authors: 1.25)",
        ),
        pub watcher_rate_gain: f64 = Param::float(
            election::WATCHER_RATE_GAIN,
            Bound::Exclusive(0.0),
            Bound::Inclusive(1.0),
            "per 10 ms",
            "gain of the watcher's low-pass filter on its sending rate (spec A12: 0.03, >= 20 dB at 5 Hz)",
        ),
        pub role_ewma_tau_s: f64 = Param::float(ROLE_EWMA_TAU_S, Bound::Exclusive(0.0), Bound::Inclusive(60.0), "s", "time constant of the watcher mode ratio and the pulser's multi-pulser ratio (authors: 0.25)"),
        pub seed: u64 = Param::int(0, 0, i64::MAX, "", "seed of the election's random generator (mixed with the flow's creation index)"),
        pub report_interval_us: u64 = Param::int(REPORT_INTERVAL_US as i64, 1_000, 100_000, "µs", "report interval requested from the datapath (paper §7: 10 ms)"),
    }
}

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "nimbus",
    summary: "NimbusCC: FFT elasticity detection of cross traffic; Cubic/Reno when it is elastic, BasicDelay/Vegas/Copa when not",
    reference: "Goyal et al., Elasticity Detection, SIGCOMM 2022 §3-4 (specs/nimbus.md); Goyal, PhD thesis, MIT 2021, ch. 4",
    params: NimbusParams::PARAMS,
    build,
};

param_choice! {
    /// The TCP-competitive controller.
    pub enum CompetitiveAlg {
        Cubic = "cubic",
        Reno = "reno",
        /// MulTCP(N): N virtual Reno flows (spec §6.4).
        MulTcp = "multcp",
    }
}

param_choice! {
    /// The delay controller.
    pub enum DelayAlg {
        BasicDelay = "basic_delay",
        Vegas = "vegas",
        Copa = "copa",
    }
}

param_choice! {
    /// What excess loss in delay mode does (spec A22).
    pub enum DelayLossResponse {
        /// The spec's resolution: a multiplicative safety decrease once losses persist.
        Decrease = "decrease",
        /// The earlier rule, kept to show its flapping: switch to competitive mode at the first lossy
        /// period, bypassing η; η brings the flow back after the dwell.
        Switch = "switch",
    }
}

param_choice! {
    /// The RTT the window restored on entering competitive mode is computed with (spec A10).
    pub enum RestoreRtt {
        /// Today's RTT (the authors' code).
        Current = "current",
        /// The RTT the restored rate was measured at, paced over that RTT until the RTT is back.
        Sample = "sample",
    }
}

/// A validated NimbusCC configuration.
#[derive(Debug, Clone, Copy)]
pub struct NimbusConfig {
    pub link_rate: LinkRate,
    /// Header bytes per packet beyond the MSS (a configured μ̂ counts them, S and R do not).
    pub header_bytes: f64,
    /// With an estimated μ̂: also fit μ from the pulses (`cross_traffic::LinkFit`).
    pub mu_fit: bool,
    pub smooth_rates: bool,
    pub stale_rate_us: u64,
    pub pulse: Pulse,
    pub freq_competitive_hz: f64,
    pub freq_delay_hz: f64,
    pub mode_dependent_frequency: bool,
    pub sample_interval_us: u64,
    pub fft_len: usize,
    pub watcher_fft_len: usize,
    pub bands: EtaBands,
    pub align_2rtt: bool,
    /// How the detector computes its bins: sliding (default) or the reference FFT per report. Not a
    /// parameter: both give the same decisions (tests `sliding_path_*`); the FFT path is for
    /// comparisons and plots of the whole spectrum.
    pub spectrum_path: SpectrumPath,
    pub mode: ModeConfig,
    pub detect_after_us: u64,
    pub switch_after_us: u64,
    pub restore_lookback_us: u64,
    /// The window restored on entering competitive mode is R(5 s ago) × the RTT R was measured at
    /// (paced over that RTT until the RTT is back), instead of × today's RTT (authors' code).
    pub restore_sample_rtt: bool,
    pub start_mode: Mode,
    pub competitive: CompetitiveAlg,
    pub delay: DelayAlg,
    pub basic_delay: BasicDelayCore,
    pub vegas: VegasConfig,
    pub copa: CopaConfig,
    pub copa_target_queue: bool,
    pub cubic: CubicConfig,
    pub reno: RenoConfig,
    /// N of MulTCP(N).
    pub multcp_flows: usize,
    pub min_rate_fraction: f64,
    pub init_cwnd_pkts: f64,
    pub insufficient_share_guard: bool,
    pub max_rtt_period_fraction: f64,
    pub delay_loss_limit: f64,
    pub delay_loss_response: DelayLossResponse,
    pub multi_flow: bool,
    pub expect_nimbus_peers: bool,
    pub kappa: f64,
    pub election_period_us: u64,
    pub pulser_exit_prob: f64,
    pub multi_pulser_thresh: f64,
    pub no_pulser_thresh: f64,
    pub watcher_switch_thresh: f64,
    pub watcher_rate_gain: f64,
    pub role_ewma_tau_s: f64,
    pub seed: u64,
    pub report_interval_us: u64,
}

impl From<&NimbusParams> for NimbusConfig {
    fn from(p: &NimbusParams) -> Self {
        let s_to_us = |s: f64| (s * US_PER_S) as u64;
        NimbusConfig {
            link_rate: basic_delay::link_rate(p.mu_mbit_per_s, p.mu_window_s),
            header_bytes: p.header_bytes,
            mu_fit: p.mu_fit,
            smooth_rates: p.smooth_rates,
            stale_rate_us: (p.stale_rate_ms * 1e3) as u64,
            pulse: Pulse { size: p.pulse_size, up_fraction: p.pulse_up_fraction },
            freq_competitive_hz: p.freq_competitive_hz,
            freq_delay_hz: p.freq_delay_hz,
            mode_dependent_frequency: p.mode_dependent_frequency,
            sample_interval_us: p.sample_interval_us,
            fft_len: p.fft_len,
            watcher_fft_len: p.watcher_fft_len,
            bands: EtaBands { form: p.eta_form, eps_hz: p.eps_hz, den_low_offset_hz: p.den_low_offset_hz, whiten: p.eta_whiten },
            align_2rtt: p.align_2rtt,
            spectrum_path: SpectrumPath::Sliding,
            mode: ModeConfig {
                eta_thresh: p.eta_thresh,
                eta_hysteresis: p.eta_hysteresis,
                ewma_tau_s: p.eta_ewma_tau_s,
                reference_guards: p.reference_guards,
                delay_dwell_us: s_to_us(p.delay_dwell_s),
            },
            detect_after_us: s_to_us(p.detect_after_s),
            switch_after_us: s_to_us(p.switch_after_s),
            restore_lookback_us: s_to_us(p.restore_lookback_s),
            restore_sample_rtt: p.restore_rtt == RestoreRtt::Sample,
            start_mode: p.start_mode,
            competitive: p.competitive,
            delay: p.delay,
            basic_delay: BasicDelayCore::new(
                p.alpha,
                p.beta,
                TargetDelay::from_params(p.target_delay_ms, p.target_delay_fraction),
                p.theta_decay_per_s,
            ),
            vegas: VegasConfig { alpha_pkts: p.vegas_alpha_pkts, beta_pkts: p.vegas_beta_pkts, ..VegasConfig::default() },
            // All-time RTT_min, as BasicDelay's x_min: with a standing queue held on purpose the
            // queue never drains, and a 10 s window would drift upward with it.
            copa: CopaConfig { delta: p.copa_delta, min_rtt_window_us: u64::MAX, ..CopaConfig::default() },
            copa_target_queue: p.copa_target_queue,
            // The authors' Cubic reacts to at most one loss per RTT (spec §6.4); the fluid
            // simulation's expectations were set with that rule (see `cubic_recovery_by_data`).
            // Their Cubic has no HyStart: slow start runs to the first loss (spec §6.4, A19).
            cubic: CubicConfig {
                init_cwnd_pkts: p.init_cwnd_pkts,
                recovery_by_data: p.cubic_recovery_by_data,
                hystart: false,
                ..CubicConfig::default()
            },
            reno: RenoConfig { init_cwnd_pkts: p.init_cwnd_pkts, ..RenoConfig::default() },
            multcp_flows: p.multcp_flows,
            min_rate_fraction: p.min_rate_fraction,
            init_cwnd_pkts: p.init_cwnd_pkts,
            insufficient_share_guard: p.insufficient_share_guard,
            max_rtt_period_fraction: p.max_rtt_period_fraction,
            delay_loss_limit: p.delay_loss_limit,
            delay_loss_response: p.delay_loss_response,
            multi_flow: p.multi_flow,
            expect_nimbus_peers: p.expect_nimbus_peers,
            kappa: p.kappa,
            election_period_us: ((p.election_period_ms * 1e3) as u64).max(1),
            pulser_exit_prob: p.pulser_exit_prob,
            multi_pulser_thresh: p.multi_pulser_thresh,
            no_pulser_thresh: p.no_pulser_thresh,
            watcher_switch_thresh: p.watcher_switch_thresh,
            watcher_rate_gain: p.watcher_rate_gain,
            role_ewma_tau_s: p.role_ewma_tau_s,
            seed: p.seed,
            report_interval_us: p.report_interval_us,
        }
    }
}

impl Default for NimbusConfig {
    fn default() -> Self {
        NimbusConfig::from(&NimbusParams::default())
    }
}

impl NimbusConfig {
    /// Grid samples per second.
    pub(super) fn sample_s(&self) -> f64 {
        self.sample_interval_us as f64 / US_PER_S
    }

    /// Checks the cross-field constraints; `param` names the offending field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let nyquist = 0.5 / self.sample_s();
        let eps = self.bands.eps_hz;
        for (name, f) in [("freq_competitive_hz", self.freq_competitive_hz), ("freq_delay_hz", self.freq_delay_hz)] {
            if f - eps <= 0.0 {
                return Err((name, format!("{f} Hz leaves no numerator band below it with eps_hz = {eps}")));
            }
            if 2.0 * f - eps >= nyquist {
                return Err((
                    name,
                    format!("the eta band up to {} Hz must stay below the Nyquist frequency {nyquist} Hz", 2.0 * f - eps),
                ));
            }
            if self.bands.den_low_hz(f) >= 2.0 * f - eps {
                let param = match self.bands.form {
                    EtaForm::Band => "den_low_offset_hz",
                    EtaForm::Bin => "eps_hz",
                };
                return Err((param, format!("leaves an empty denominator band at {f} Hz")));
            }
        }
        let window_s = self.fft_len as f64 * self.sample_s();
        if eps <= 1.0 / window_s {
            return Err(("eps_hz", format!("must exceed the FFT resolution 1/{window_s} s (paper §3.4)")));
        }
        if self.multi_flow {
            // With μ̂ estimated as each flow's own maximum receive rate (the default) every flow's
            // Eq. 5 probability κτ/W·R_i/μ̂ is about κτ/W, not its share of it: the election's
            // premise Σ R_i/μ = 1 fails and ≈ N·κ pulsers are elected per window instead of κ
            // (issue 18 item 7). The flows must agree on μ: configure it. (There is no shared-μ̂
            // mechanism between flows to offer instead.) Fluid simulation of S19 (8 flows, κ = 1,
            // 12 runs, `sim::s19_t24_election_trend`): with μ̂ estimated the first pulser comes
            // 0.4 s after elections open and > 1 pulser 73.5 % of the time afterwards; with μ
            // configured 6.5 s and 7.7 % (paper: 8.0 s, 9.3 %).
            if !matches!(self.link_rate, LinkRate::Fixed(_)) {
                return Err((
                    "mu_mbit_per_s",
                    "multi_flow = true needs the bottleneck rate configured (mu_mbit_per_s > 0): with mu estimated per flow (mu_mbit_per_s = 0, mu_window_s) each flow's own maximum receive rate makes it elect itself, about N·kappa pulsers instead of kappa".to_string(),
                ));
            }
            if !self.mode_dependent_frequency {
                return Err(("mode_dependent_frequency", "multi_flow needs distinct pulse frequencies per mode".to_string()));
            }
            if (self.freq_competitive_hz - self.freq_delay_hz).abs() < 2.0 * eps {
                return Err((
                    "freq_delay_hz",
                    format!("must differ from freq_competitive_hz by at least 2·eps_hz = {}", 2.0 * eps),
                ));
            }
            let w_window_s = self.watcher_fft_len as f64 * self.sample_s();
            if eps <= 1.0 / w_window_s {
                return Err(("watcher_fft_len", format!("the watcher window {w_window_s} s cannot resolve eps_hz = {eps}")));
            }
        }
        if self.switch_after_us < self.detect_after_us {
            return Err(("switch_after_s", "must not be earlier than detect_after_s".to_string()));
        }
        Ok(())
    }

    /// History ring capacity: the FFT windows (with alignment slack) and the restore look-back.
    pub(super) fn history_capacity(&self) -> usize {
        let need = |n: usize| if self.align_2rtt { elasticity::aligned_span(n, self.sample_interval_us) + 1 } else { n };
        need(self.fft_len).max(need(self.watcher_fft_len)).max(self.restore_samples() + 1).next_power_of_two()
    }

    pub(super) fn restore_samples(&self) -> usize {
        (self.restore_lookback_us / self.sample_interval_us.max(1)) as usize
    }

    /// η's bands in `mode`: the window-gain correction (`EtaBands::whiten`) applies in delay mode
    /// only, where the delay controller holds the RTT, and with it the rate window, steady.
    pub(super) fn bands_for(&self, mode: Mode) -> EtaBands {
        EtaBands { whiten: self.bands.whiten && mode == Mode::Delay, ..self.bands }
    }

    /// The band (lo, hi] holding both pulsing frequencies.
    pub(super) fn pulse_band(&self) -> (f64, f64) {
        let lo = self.freq_competitive_hz.min(self.freq_delay_hz);
        let hi = self.freq_competitive_hz.max(self.freq_delay_hz);
        (lo - self.bands.eps_hz, hi + self.bands.eps_hz)
    }

    /// The band above the pulsing frequencies a watcher compares with: (7, 15] for 5/6 Hz.
    pub(super) fn high_band(&self) -> (f64, f64) {
        let lo = self.freq_competitive_hz.min(self.freq_delay_hz);
        let hi = self.freq_competitive_hz.max(self.freq_delay_hz);
        (hi + 1.0, (3.0 * lo).max(hi + 2.0))
    }

    pub(super) fn freq(&self, mode: Mode) -> f64 {
        match mode {
            Mode::Delay if self.mode_dependent_frequency => self.freq_delay_hz,
            _ => self.freq_competitive_hz,
        }
    }

    pub(super) fn pulser_window_us(&self) -> u64 {
        self.fft_len as u64 * self.sample_interval_us
    }

    pub(super) fn watcher_window_us(&self) -> u64 {
        self.watcher_fft_len as u64 * self.sample_interval_us
    }
}

fn build(p: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let cfg = NimbusConfig::from(&NimbusParams::from_params(p)?);
    if cfg.vegas.alpha_pkts > cfg.vegas.beta_pkts {
        return Err(p.invalid("vegas_alpha_pkts", "must not exceed vegas_beta_pkts"));
    }
    cfg.validate().map_err(|(param, reason)| p.invalid(param, reason))?;
    Ok(Arc::new(NimbusFactory::new(cfg)))
}

/// Builds NimbusCC flows; holds the FFT plans all its flows share.
pub struct NimbusFactory {
    cfg: NimbusConfig,
    plans: Plans,
    flows: AtomicU64,
}

impl NimbusFactory {
    pub fn new(cfg: NimbusConfig) -> Self {
        let plans = Plans::new(cfg.fft_len, cfg.watcher_fft_len);
        NimbusFactory { cfg, plans, flows: AtomicU64::new(0) }
    }
}

impl AlgorithmFactory for NimbusFactory {
    fn name(&self) -> &'static str {
        INFO.name
    }
    fn create(&self) -> Box<dyn Algorithm> {
        let index = self.flows.fetch_add(1, Ordering::Relaxed);
        Box::new(NimbusCC::with_plans(self.cfg, &self.plans, index))
    }
}
