//! Cross-traffic rate estimation (paper §3.1, Eqs. 1–2) and the link-rate estimate μ̂ (§3.1, fn. 2).
//!
//! Model: one FIFO bottleneck of rate μ treats all packets alike. While its queue is non-empty the
//! link runs at μ and our share of its output equals our share of its input, R/μ = S/(S + z), so
//!
//!   ẑ = μ̂·S/R − S                                                            (Eq. 1)
//!
//! with S our send rate and R our receive (ACK) rate **measured over the same packets**
//! (Eq. 2: S = bytes/(s_last − s_first), R = bytes/(r_last − r_first)). The datapath provides both
//! in `Report::send_rate_bytes_per_s` / `recv_rate_bytes_per_s` from one rate sample (the kernel's
//! BBR-style delivery-rate sample over about one RTT). ẑ is not clamped at zero (negative values
//! are noise and carry information for the FFT, as in the authors' implementation); R = 0 gives
//! ẑ = 0 rather than NaN.
//!
//! Missing samples. A report without both rates, or with a zero rate (an invalid sample: zero
//! interval), carries no new measurement. Like ccp-kernel's registers, which keep their previous
//! value unless a new valid sample arrives, the estimator then holds the last valid pair; the caller
//! sees how old it is (`Estimate::age_us`) and Nimbus stops trusting the detector when the pair is
//! stale (see `super`). Before the first valid pair there is no estimate (`Estimate::valid` false).
//!
//! μ̂. Either configured (the paper's emulations supplied it; Fig. 13 supplies a wrong one on
//! purpose), or, like BBR, the maximum receive rate: the maximum of an EWMA(0.2) of R, the EWMA
//! being the guard against ACK compression, kept all-time (the authors' implementation) or over a
//! sliding window (for long flows on paths that change). An error in μ̂ adds (μ̂/μ − 1)·S to ẑ
//! (Eq. 7), i.e. a copy of our own pulse: the detector then errs toward "elastic", which is safe.
//! Note that the maximum receive rate only reaches μ if the flow once had the link to itself; with
//! persistent cross traffic it underestimates μ, and Nimbus stays in competitive mode.
//!
//! Units. Eq. 1 needs μ̂, S and R in the same units. Datapaths report S and R in payload bytes
//! (segments × MSS), while a configured link rate counts what the link carries: IP packets with
//! their headers (mahimahi and `ccp-router` serve 1500-byte packets; ccp-kernel sidesteps this by
//! counting every packet as 1500 bytes, spec §3.2). A configured μ̂ is therefore scaled to payload
//! bytes, μ̂·MSS/(MSS + header) (`set_payload_fraction`). Unscaled, the error is 1500/1448 − 1 =
//! 3.6 % for TCP with timestamps, and by Eq. 7 it adds 0.036·S — a copy of our own pulse — to ẑ:
//! measured on the eBPF datapath against CBR cross traffic (48 Mbit/s, 50 ms), raw η was 3–5
//! instead of ≈ 1 and only guard G3 kept the verdict inelastic.

use crate::filters::Windowed;

/// EWMA gain applied to R (and, optionally, S) per rate sample: the ACK-compression guard of μ̂.
pub const RATE_EWMA_GAIN: f64 = 0.2;
/// Rates above this are treated as this (80 Tbit/s): a sanity bound against absurd datapath values.
pub const MAX_RATE_BYTES_PER_S: f64 = 1e13;
/// Header bytes per packet on the link beyond the MSS: IPv4 (20) + TCP (20) + timestamps (12), so
/// that MSS 1448 makes the 1500-byte packets ccp-kernel counts (spec §3.2).
pub const HEADER_BYTES: f64 = ccp_contract::params::shared::HEADER_BYTES_DEFAULT;

/// Payload bytes per wire byte for segments of `mss` bytes carrying `header_bytes` of headers;
/// 1 when `header_bytes` is 0 (a configured μ̂ already counts payload bytes).
pub fn payload_fraction(mss: f64, header_bytes: f64) -> f64 {
    if mss > 0.0 && header_bytes > 0.0 && mss.is_finite() && header_bytes.is_finite() {
        mss / (mss + header_bytes)
    } else {
        1.0
    }
}

/// Eq. 1: ẑ = μ̂·S/R − S; 0 when R is not positive or the inputs are not finite.
pub fn estimate(mu: f64, s: f64, r: f64) -> f64 {
    if !r.is_finite() || r <= 0.0 || !mu.is_finite() || !s.is_finite() {
        return 0.0;
    }
    let z = mu * s / r - s;
    if z.is_finite() {
        z
    } else {
        0.0
    }
}

/// Where μ̂ comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkRate {
    /// A configured bottleneck rate, bytes/s.
    Fixed(f64),
    /// The maximum of EWMA-smoothed R over `window_us` (u64::MAX: all-time).
    MaxReceive { window_us: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossTrafficConfig {
    pub link_rate: LinkRate,
    /// Replace S and R by their EWMAs (gain 0.2) before Eq. 1 (the authors' `use_ewma`, off by default).
    pub smooth_rates: bool,
}

impl Default for CrossTrafficConfig {
    fn default() -> Self {
        CrossTrafficConfig { link_rate: LinkRate::MaxReceive { window_us: u64::MAX }, smooth_rates: false }
    }
}

/// The estimator's output for one report.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    /// S and R used (raw or smoothed), bytes/s.
    pub s: f64,
    pub r: f64,
    /// ẑ, bytes/s (may be negative).
    pub z: f64,
    /// μ̂, bytes/s (0 until known).
    pub mu: f64,
    /// EWMA of R, bytes/s (used for the election probability and μ̂).
    pub r_smoothed: f64,
    /// A valid rate pair has been seen at some point.
    pub valid: bool,
    /// This report carried a new valid pair.
    pub fresh: bool,
    /// Time since the last valid pair, µs (0 when fresh).
    pub age_us: u64,
}

/// Length of one block of the pulse fit of μ̂ (`LinkFit`), µs: one competitive pulse period.
pub const LINK_FIT_BLOCK_US: u64 = 200_000;
/// Blocks whose fits the median of `LinkFit` takes: 10 s, two FFT windows.
pub const LINK_FIT_BLOCKS: usize = 50;

/// μ from our own pulses (`CrossTrafficEstimator::enable_link_fit`).
///
/// While the bottleneck queue is non-empty, R = μ·S/(S + z) (the model behind Eq. 1), i.e.
///
///   1/R = 1/μ + (z/μ)·(1/S)
///
/// a straight line in 1/S whose intercept is 1/μ, whatever z is. Our pulses sweep S by +μ/4 and
/// −μ/12 every period, so a least-squares line of 1/R on 1/S over one period of rate samples gives
/// μ even when the flow never had the link to itself — where the maximum receive rate (the
/// paper's and BBR's estimate, spec §3.3) only sees our share: with inelastic cross traffic at
/// 40 % of the link from the start, max R ≈ 0.8·μ, and by Eq. 7 the error leaks our own pulse
/// into ẑ. In the fluid simulation (`sim`, `held_out_accuracy_matrix`) CBR at 40 % was then called
/// elastic 100 % of the time at 24, 48, 96 and 12 Mbit/s; with the fit μ̂ is within 1–2 % of μ
/// for CBR, Poisson and on/off traffic, and the same runs are 94–100 % inelastic.
///
/// Each block is fitted on its own and μ is the median of the last `LINK_FIT_BLOCKS` block fits.
/// z must be about constant within a fit: one fit over many seconds mixes lines of different
/// slopes, and because BasicDelay lowers S while z is high the mixture's intercept is biased
/// (μ̂ 1.4–2·μ against on/off traffic with a 10 s exponentially weighted fit). Blocks of one
/// pulse period keep on/off transitions inside few blocks, and the median discards them (1 s
/// blocks: μ̂ up to 1.15·μ against on/off traffic; 0.2 s: 1.00–1.02).
///
/// Limit: an elastic flow answering the pulse in phase with it (after about half a pulse period,
/// e.g. a Reno flow whose RTT plus queueing delay is ≈ 100 ms) is, in (S, R), exactly a slower
/// link: with z = z̄ + g·(S − S̄), R = μ/(1 + g) · S/(S + z') for a constant z'. No estimator of μ
/// from S and R can tell the two apart, so μ̂ is then low (the fit gives μ/(1 + g) and the maximum
/// receive rate is our share), and the same equivalence removes the in-phase part of the answer
/// from ẑ. Only a configured μ avoids this (see `sim::tests::held_out_accuracy_matrix`).
#[derive(Debug, Clone, Default)]
pub struct LinkFit {
    w: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
    block_start_us: Option<u64>,
    /// The rate that scales 1/S and 1/R (the first R seen), keeping the sums near 1.
    unit: f64,
    /// Fitted μ of the last blocks, newest last.
    fits: std::collections::VecDeque<f64>,
    /// Their median, kept as blocks close (once per pulse period) rather than sorted per report.
    median: Option<f64>,
}

impl LinkFit {
    /// Folds one rate pair (S, R), bytes/s, sampled at `now_us`.
    pub fn update(&mut self, now_us: u64, s: f64, r: f64) {
        if !(s > 0.0 && r > 0.0 && s.is_finite() && r.is_finite()) {
            return;
        }
        if self.unit <= 0.0 {
            self.unit = r;
        }
        let start = *self.block_start_us.get_or_insert(now_us);
        if now_us.saturating_sub(start) >= LINK_FIT_BLOCK_US {
            if let Some(mu) = self.block_fit() {
                if self.fits.len() >= LINK_FIT_BLOCKS {
                    self.fits.pop_front();
                }
                self.fits.push_back(mu);
                self.median = median(&self.fits);
            }
            *self = LinkFit {
                unit: self.unit,
                fits: std::mem::take(&mut self.fits),
                median: self.median,
                block_start_us: Some(now_us),
                ..LinkFit::default()
            };
        }
        let (x, y) = (self.unit / s, self.unit / r);
        self.w += 1.0;
        self.x += x;
        self.y += y;
        self.xx += x * x;
        self.xy += x * y;
    }

    /// μ of the current block's line, bytes/s; None while it is undetermined (S has not varied) or
    /// unphysical (intercept ≤ 0, negative cross traffic).
    fn block_fit(&self) -> Option<f64> {
        let var = self.w * self.xx - self.x * self.x;
        if self.w < 3.0 || var <= 1e-9 * self.w * self.xx {
            return None;
        }
        let slope = (self.w * self.xy - self.x * self.y) / var;
        let intercept = (self.y - slope * self.x) / self.w;
        if !(intercept > 0.0 && slope >= 0.0) {
            return None;
        }
        Some(self.unit / intercept)
    }

    /// The median of the last block fits, bytes/s (None before the first).
    pub fn fit(&self) -> Option<f64> {
        self.median
    }
}

fn median(values: &std::collections::VecDeque<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = values.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) })
}

/// Eq. 1 over the report stream, with μ̂.
#[derive(Debug, Clone)]
pub struct CrossTrafficEstimator {
    cfg: CrossTrafficConfig,
    max_r: Windowed,
    ewma_s: f64,
    ewma_r: f64,
    raw_s: f64,
    raw_r: f64,
    mu: f64,
    /// Payload bytes per wire byte: scales a configured μ̂ into the datapath's units.
    payload_fraction: f64,
    valid: bool,
    last_sample_us: u64,
    /// The pulse fit of μ (None: off, the default).
    fit: Option<LinkFit>,
}

fn sane_rate(v: Option<u64>) -> Option<f64> {
    match v {
        Some(x) if x > 0 => Some((x as f64).min(MAX_RATE_BYTES_PER_S)),
        _ => None,
    }
}

impl CrossTrafficEstimator {
    pub fn new(cfg: CrossTrafficConfig) -> Self {
        let mu = match cfg.link_rate {
            LinkRate::Fixed(mu) => mu,
            LinkRate::MaxReceive { .. } => 0.0,
        };
        CrossTrafficEstimator {
            cfg,
            max_r: Windowed::max(),
            ewma_s: 0.0,
            ewma_r: 0.0,
            raw_s: 0.0,
            raw_r: 0.0,
            mu,
            payload_fraction: 1.0,
            valid: false,
            last_sample_us: 0,
            fit: None,
        }
    }

    /// With an estimated μ̂ (`LinkRate::MaxReceive`), also fit μ from the rate pairs (`LinkFit`) and
    /// take μ̂ = max(maximum receive rate, fitted μ). No effect on a configured μ̂.
    pub fn enable_link_fit(&mut self) {
        if matches!(self.cfg.link_rate, LinkRate::MaxReceive { .. }) {
            self.fit = Some(LinkFit::default());
        }
    }

    /// Payload bytes per wire byte (MSS/(MSS + header)) of the flow's packets: a configured μ̂ counts
    /// wire bytes, S and R count payload. Values outside (0, 1] are ignored. No effect on an
    /// estimated μ̂, which is measured in payload bytes already.
    pub fn set_payload_fraction(&mut self, fraction: f64) {
        if fraction > 0.0 && fraction <= 1.0 && fraction.is_finite() {
            self.payload_fraction = fraction;
            if let LinkRate::Fixed(mu) = self.cfg.link_rate {
                self.mu = mu * fraction;
            }
        }
    }

    /// Current μ̂, bytes/s.
    pub fn mu(&self) -> f64 {
        self.mu
    }

    /// The pulse fit of μ (`LinkFit::fit`), bytes/s, if enabled and known.
    pub fn link_fit(&self) -> Option<f64> {
        self.fit.as_ref().and_then(|f| f.fit())
    }

    /// The maximum of the smoothed receive rate (the BBR-style estimate), bytes/s.
    pub fn max_receive(&self) -> f64 {
        self.max_r.get().unwrap_or(0.0)
    }

    /// Seeds the receive-rate filters, e.g. from a hot-swapped flow's pacing rate.
    pub fn seed_receive_rate(&mut self, now_us: u64, r: f64) {
        if r > 0.0 && r.is_finite() && !self.valid {
            self.ewma_r = r.min(MAX_RATE_BYTES_PER_S);
            self.ewma_s = self.ewma_r;
            self.update_mu(now_us);
        }
    }

    fn update_mu(&mut self, now_us: u64) {
        if let LinkRate::MaxReceive { window_us } = self.cfg.link_rate {
            let max_r = self.max_r.update(now_us, self.ewma_r, window_us);
            let fitted = self.fit.as_ref().and_then(|f| f.fit()).unwrap_or(0.0);
            self.mu = max_r.max(fitted);
        }
    }

    /// Folds one report's rate pair (either may be absent) and returns the estimate.
    pub fn on_report(&mut self, now_us: u64, send: Option<u64>, recv: Option<u64>) -> Estimate {
        self.on_report_queued(now_us, send, recv, false)
    }

    /// `on_report`, where `queued` says the bottleneck queue was non-empty while the pair was
    /// measured: only such pairs enter the pulse fit of μ (if enabled) — Eq. 1's premise; with an
    /// empty queue R = S, a point on the line 1/R = 1/S, whose intercept is 0.
    pub fn on_report_queued(&mut self, now_us: u64, send: Option<u64>, recv: Option<u64>, queued: bool) -> Estimate {
        let fresh = match (sane_rate(send), sane_rate(recv)) {
            (Some(s), Some(r)) => {
                if self.valid {
                    self.ewma_s += RATE_EWMA_GAIN * (s - self.ewma_s);
                    self.ewma_r += RATE_EWMA_GAIN * (r - self.ewma_r);
                } else {
                    // The authors start the EWMAs at 0; starting at the first sample avoids a
                    // 20-sample ramp in μ̂ without changing its maximum.
                    self.ewma_s = s;
                    self.ewma_r = r;
                }
                self.raw_s = s;
                self.raw_r = r;
                if let (Some(fit), true) = (self.fit.as_mut(), queued) {
                    fit.update(now_us, s, r);
                }
                self.valid = true;
                self.last_sample_us = now_us;
                self.update_mu(now_us);
                true
            }
            _ => false,
        };
        let (s, r) = if self.cfg.smooth_rates { (self.ewma_s, self.ewma_r) } else { (self.raw_s, self.raw_r) };
        Estimate {
            s,
            r,
            z: if self.valid { estimate(self.mu, s, r) } else { 0.0 },
            mu: self.mu,
            r_smoothed: self.ewma_r,
            valid: self.valid,
            fresh,
            age_us: if self.valid { now_us.saturating_sub(self.last_sample_us) } else { u64::MAX },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nimbus::election::SplitMix64;

    /// Tiny deterministic generator for the randomized identities.
    fn uniforms(seed: u64) -> impl Iterator<Item = f64> {
        let mut rng = SplitMix64::new(seed);
        std::iter::from_fn(move || Some(rng.next_f64()))
    }

    /// §15.2 test 6: the fluid identity.
    #[test]
    fn t6_fluid_identity() {
        let (mu, s, z) = (12e6, 4e6, 6e6);
        let r = mu * s / (s + z);
        assert_eq!(r, 4.8e6);
        assert_eq!(estimate(mu, s, r), 6e6);
    }

    /// §15.2 test 7 (Eq. 7): with μ̂ = 1.25μ, ẑ = 1.25z + 0.25S.
    #[test]
    fn t7_mu_error_leaks_s_into_z() {
        let mut u = uniforms(7);
        let mu = 12e6;
        for _ in 0..1000 {
            let s = 1e5 + u.next().unwrap() * 11e6;
            let z = u.next().unwrap() * (mu - s).max(0.0) * 3.0;
            let r = mu * s / (s + z);
            let got = estimate(1.25 * mu, s, r);
            let want = 1.25 * z + 0.25 * s;
            assert!((got - want).abs() < 1e-6 * want.max(1.0), "{got} vs {want}");
        }
    }

    /// §15.2 test 8 (Eqs. 9–10): two bottlenecks in series.
    #[test]
    fn t8_two_bottlenecks_in_series() {
        let mut u = uniforms(8);
        let (mu1, mu2) = (24e6, 12e6);
        for _ in 0..1000 {
            let s = 1e5 + u.next().unwrap() * 8e6;
            let z1 = u.next().unwrap() * 20e6;
            let z2 = u.next().unwrap() * 10e6;
            // Eq. 9: our rate after link 1, then after link 2.
            let r1 = mu1 * s / (s + z1);
            let r2 = mu2 * r1 / (r1 + z2);
            for mu_hat in [mu2, 1.1 * mu2, 0.8 * mu2] {
                let got = estimate(mu_hat, s, r2);
                // Eq. 10.
                let want = mu_hat * z1 * z2 / (mu1 * mu2) + s * (mu_hat * z2 / (mu1 * mu2) + mu_hat / mu2 - 1.0);
                let exact = mu_hat * (s + z1) * (r1 + z2) / (mu1 * mu2) - s;
                assert!((got - want).abs() < 1e-6 * want.abs().max(1.0), "{got} vs {want}");
                assert!((want - exact).abs() < 1e-6 * exact.abs().max(1.0), "closed form {want} vs {exact}");
            }
        }
    }

    /// §15.2 test 9: R = 0 gives ẑ = 0, never NaN.
    #[test]
    fn t9_zero_receive_rate() {
        assert_eq!(estimate(12e6, 4e6, 0.0), 0.0);
        assert_eq!(estimate(12e6, 0.0, 0.0), 0.0);
        assert_eq!(estimate(f64::NAN, 1.0, 1.0), 0.0);
        let mut e = CrossTrafficEstimator::new(CrossTrafficConfig { link_rate: LinkRate::Fixed(12e6), smooth_rates: false });
        let est = e.on_report(10_000, Some(4_000_000), Some(0));
        assert!(!est.valid && !est.fresh && est.z == 0.0);
    }

    #[test]
    fn absent_rates_hold_the_last_pair_and_age() {
        let mut e = CrossTrafficEstimator::new(CrossTrafficConfig { link_rate: LinkRate::Fixed(12e6), smooth_rates: false });
        let a = e.on_report(10_000, Some(4_000_000), Some(4_800_000));
        assert!(a.fresh && a.valid && (a.z - 6e6).abs() < 1e-6 && a.age_us == 0);
        let b = e.on_report(20_000, None, Some(1));
        assert!(!b.fresh && b.valid && b.z == a.z && b.age_us == 10_000);
        let c = e.on_report(35_000, Some(5_000_000), None);
        assert_eq!(c.age_us, 25_000);
    }

    #[test]
    fn mu_is_max_of_smoothed_receive_rate() {
        let mut e = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        assert_eq!(e.on_report(0, None, None).mu, 0.0);
        e.on_report(10_000, Some(5_000_000), Some(5_000_000));
        assert_eq!(e.mu(), 5e6);
        // One ACK-compressed sample at 3× is damped by the EWMA to +40 %, not taken at face value.
        e.on_report(20_000, Some(5_000_000), Some(15_000_000));
        assert!((e.mu() - 7e6).abs() < 1.0, "{}", e.mu());
        for t in 3..100 {
            e.on_report(t * 10_000, Some(4_000_000), Some(4_000_000));
        }
        assert!((e.mu() - 7e6).abs() < 1.0, "all-time maximum");
        // Windowed: the maximum expires.
        let mut w = CrossTrafficEstimator::new(CrossTrafficConfig {
            link_rate: LinkRate::MaxReceive { window_us: 1_000_000 },
            smooth_rates: false,
        });
        w.on_report(0, Some(9_000_000), Some(9_000_000));
        for t in 1..300 {
            w.on_report(t * 10_000, Some(3_000_000), Some(3_000_000));
        }
        assert!((w.mu() - 3e6).abs() < 1e3, "{}", w.mu());
    }

    /// A configured (wire) μ̂ is scaled to the payload units of S and R; an estimated one is not.
    /// With the scale, CBR cross traffic at 50 % of a 48 Mbit/s link is estimated exactly, and our
    /// own pulse no longer leaks into ẑ (Eq. 7).
    #[test]
    fn configured_mu_is_scaled_to_payload_bytes() {
        let wire = 6e6; // 48 Mbit/s of 1500-byte packets
        let frac = 1448.0 / 1500.0;
        let mut e = CrossTrafficEstimator::new(CrossTrafficConfig { link_rate: LinkRate::Fixed(wire), smooth_rates: false });
        e.set_payload_fraction(frac);
        assert!((e.mu() - wire * frac).abs() < 1e-6);
        // Payload rates: the link carries 5.792e6 payload B/s; CBR takes half of the wire rate.
        let mu_payload = wire * frac;
        let z_true = 0.5 * mu_payload;
        for s in [1.0e6, 2.0e6, 3.5e6] {
            let r = mu_payload * s / (s + z_true);
            let est = e.on_report(10_000, Some(s as u64), Some(r as u64));
            assert!((est.z - z_true).abs() < 1e-3 * z_true, "S {s}: ẑ {} vs {z_true}", est.z);
        }
        // Unscaled, ẑ depends on S (the leak of Eq. 7): 3.6 % of S.
        let unscaled =
            estimate(wire, 3.5e6, mu_payload * 3.5e6 / (3.5e6 + z_true)) - estimate(wire, 1e6, mu_payload * 1e6 / (1e6 + z_true));
        assert!((unscaled - (1500.0 / 1448.0 - 1.0) * 2.5e6).abs() < 1e3, "{unscaled}");
        // Nonsense fractions are ignored; an estimated μ̂ is untouched.
        e.set_payload_fraction(0.0);
        e.set_payload_fraction(f64::NAN);
        e.set_payload_fraction(1.5);
        assert!((e.mu() - wire * frac).abs() < 1e-6);
        let mut m = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        m.on_report(0, Some(5_000_000), Some(5_000_000));
        m.set_payload_fraction(frac);
        assert_eq!(m.mu(), 5e6);
    }

    #[test]
    fn smoothing_option_uses_ewmas() {
        let mut e = CrossTrafficEstimator::new(CrossTrafficConfig { link_rate: LinkRate::Fixed(10e6), smooth_rates: true });
        e.on_report(0, Some(4_000_000), Some(5_000_000));
        let est = e.on_report(10_000, Some(6_000_000), Some(5_000_000));
        assert!((est.s - 4.4e6).abs() < 1e-6 && (est.r - 5e6).abs() < 1e-6);
        assert!((est.z - estimate(10e6, 4.4e6, 5e6)).abs() < 1e-6);
    }

    /// Rate pairs of a pulsed sender against cross traffic z(S): S = 3 MB/s plus a ±25 % 5 Hz
    /// sinusoid, R = μS/(S + z), every 10 ms for `secs`, all measured over a standing queue.
    fn pulsed(e: &mut CrossTrafficEstimator, mu: f64, secs: f64, z: impl Fn(f64, f64) -> f64) -> Estimate {
        let mut est = Estimate::default();
        for i in 1..=(secs * 100.0) as u64 {
            let t = i as f64 * 0.01;
            let s = 3e6 * (1.0 + 0.25 * (2.0 * std::f64::consts::PI * 5.0 * t).sin());
            let r = mu * s / (s + z(t, s));
            est = e.on_report_queued(i * 10_000, Some(s as u64), Some(r as u64), true);
        }
        est
    }

    /// The pulse fit finds μ under cross traffic present from the start, where the maximum receive
    /// rate only sees our share; pairs not vouched for by a standing queue are ignored; the fit is
    /// opt-in (off for BasicDelay's estimator).
    #[test]
    fn link_fit_finds_mu_under_persistent_cross_traffic() {
        let mu = 6e6;
        let mut plain = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        let mut fitted = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        fitted.enable_link_fit();
        // CBR at 40 % of the link.
        let p = pulsed(&mut plain, mu, 5.0, |_, _| 2.4e6);
        let f = pulsed(&mut fitted, mu, 5.0, |_, _| 2.4e6);
        assert!(p.mu < 0.8 * mu, "max receive rate {}", p.mu);
        assert!((f.mu / mu - 1.0).abs() < 0.01, "fitted {}", f.mu);
        assert!((f.z - 2.4e6).abs() < 0.02 * 2.4e6, "ẑ {}", f.z);
        // On/off cross traffic: a block that straddles a change is an outlier the median drops.
        let mut onoff = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        onoff.enable_link_fit();
        let o = pulsed(&mut onoff, mu, 10.0, |t, _| if ((t / 0.7).floor() as u64).is_multiple_of(2) { 3.6e6 } else { 1.2e6 });
        assert!((o.mu / mu - 1.0).abs() < 0.02, "on/off: fitted {}", o.mu);
        // Unqueued pairs do not enter the fit.
        let mut unqueued = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        unqueued.enable_link_fit();
        for i in 1..=500u64 {
            unqueued.on_report_queued(i * 10_000, Some(3_000_000 + (i % 20) * 50_000), Some(2_000_000), false);
        }
        assert_eq!(unqueued.link_fit(), None);
        // A configured μ̂ is never fitted.
        let mut fixed = CrossTrafficEstimator::new(CrossTrafficConfig { link_rate: LinkRate::Fixed(5e6), smooth_rates: false });
        fixed.enable_link_fit();
        assert_eq!(pulsed(&mut fixed, mu, 2.0, |_, _| 2.4e6).mu, 5e6);
    }

    /// The limit of any μ estimate from S and R (`LinkFit`): cross traffic answering our pulse in
    /// phase, z = z̄ + g·(S − S̄), is exactly a link of μ/(1 + g) with constant cross traffic.
    #[test]
    fn in_phase_answer_is_a_slower_link() {
        let (mu, g) = (6e6, 0.3);
        let mut e = CrossTrafficEstimator::new(CrossTrafficConfig::default());
        e.enable_link_fit();
        let est = pulsed(&mut e, mu, 5.0, |_, s| 3e6 + g * (s - 3e6));
        let fit = e.link_fit().unwrap();
        assert!((fit - mu / (1.0 + g)).abs() < 0.01 * mu, "fit {fit} vs {}", mu / (1.0 + g));
        assert!(est.mu >= fit, "μ̂ = max(maximum receive rate, fit)");
    }
}
