//! A sliding DFT of the few bins η reads (paper §3.3–3.4, Eq. 3; spec §5.3–5.4), updated per grid
//! sample instead of a full FFT per report (issue 18 item 8; the sliding DFT: Jacobsen and Lyons,
//! "The sliding DFT", IEEE Signal Processing Magazine 20(2), 2003).
//!
//! η, the guards and the multi-pulser check read 26 (f_p = 5 Hz) or 36 (6 Hz) consecutive bins of a
//! 512-point spectrum (4.5 to 11.3 Hz at 0.195 Hz per bin), and the window moves by one sample per
//! 10 ms report. So each bin is kept as
//!
//!   S_k = Σ_{j in window} x_j·W^{k·j},   W = e^{−2πi/N},  j the sample's absolute grid index.
//!
//! A new sample j replaces sample j − N, which has the same twiddle (W^{kN} = 1), so
//! S_k += (x_j − x_{j−N})·W^{k·j}: one table look-up and two multiply-adds per bin and series. The
//! textbook form rotates the accumulated value instead (X_k ← (X_k + x_j − x_{j−N})·W^{−k}), which
//! compounds the twiddle's rounding every sample; here the accumulated value is never multiplied,
//! so rounding errors only add up, as a random walk. The window's own DFT (oldest sample first, as
//! the FFT sees it) is X_k = W^{−k·j0}·S_k with j0 the oldest index, so |X_k| = |S_k|; everything
//! η and the guards use is a magnitude.
//!
//! The owner re-anchors the accumulators to an FFT of the window (`anchor`) once per window, so
//! they never depend on samples older than two windows and the rounding of at most one window of
//! updates separates them from the reference FFT path (`super::elasticity::Spectrum`).
//! Mean removal is not needed: a constant contributes nothing to the bins k ≠ 0 of a full window.

use std::sync::Arc;

use rustfft::num_complex::Complex;

use super::elasticity::{BinSpan, Bins, Channel, Spectrum};

/// [cos, sin] of 2πm/N for m in 0..N: the twiddles of every bin, shared by all flows of a factory.
#[derive(Debug)]
pub struct Twiddles {
    cos_sin: Box<[[f64; 2]]>,
}

impl Twiddles {
    pub fn new(n: usize) -> Self {
        let angle = |m: usize| 2.0 * std::f64::consts::PI * m as f64 / n as f64;
        Twiddles { cos_sin: (0..n).map(|m| [angle(m).cos(), angle(m).sin()]).collect() }
    }

    pub fn len(&self) -> usize {
        self.cos_sin.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cos_sin.is_empty()
    }
}

/// The held bins of one or two real series (channels A and B, as in `Spectrum`; B is unused when
/// only A is fed).
#[derive(Debug, Clone)]
pub struct SlidingDft {
    tw: Arc<Twiddles>,
    span: BinSpan,
    /// Per held bin, [A.re, B.re, A.im, B.im]: the two channels side by side share each twiddle
    /// and pair up in SIMD lanes.
    acc: Vec<[f64; 4]>,
}

impl SlidingDft {
    /// An N-point sliding DFT (N = `tw.len()`) holding no bins yet.
    pub fn new(tw: Arc<Twiddles>) -> Self {
        SlidingDft { tw, span: BinSpan::EMPTY, acc: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.tw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tw.is_empty()
    }

    /// The bins held.
    pub fn span(&self) -> BinSpan {
        self.span
    }

    /// Holds `span` from now on. The accumulators are zeroed: the owner must re-anchor.
    pub fn hold(&mut self, span: BinSpan) {
        self.span = span;
        self.acc.clear();
        self.acc.resize(span.len(), [0.0; 4]);
    }

    /// k·pos mod N for the first held bin; `pos` = j mod N.
    fn first_phase(&self, pos: usize) -> usize {
        let n = self.tw.len();
        (self.span.first % n) * pos % n
    }

    /// Sample j (with j mod N = `pos`) replaces sample j − N: `da`, `db` = new − old per channel.
    pub fn slide(&mut self, pos: usize, da: f64, db: f64) {
        let n = self.tw.len();
        let mut p = self.first_phase(pos);
        for acc in self.acc.iter_mut() {
            let [c, s] = self.tw.cos_sin[p];
            acc[0] += da * c;
            acc[1] += db * c;
            acc[2] -= da * s;
            acc[3] -= db * s;
            p += pos;
            if p >= n {
                p -= n;
            }
        }
    }

    /// Replaces the accumulators by `spectrum`, an FFT (same N) of the window whose next sample has
    /// index j with j mod N = `pos`: S_k = W^{k·j}·X_k (W^{k·(j − N)} = W^{k·j}).
    pub fn anchor(&mut self, spectrum: &Spectrum, pos: usize) {
        debug_assert_eq!(spectrum.len(), self.tw.len());
        let n = self.tw.len();
        let mut p = self.first_phase(pos);
        for (acc, k) in self.acc.iter_mut().zip(self.span.first..) {
            let [c, s] = self.tw.cos_sin[p];
            let w = Complex::new(c, -s);
            let (a, b) = (spectrum.bin(Channel::A, k) * w, spectrum.bin(Channel::B, k) * w);
            *acc = [a.re, b.re, a.im, b.im];
            p += pos;
            if p >= n {
                p -= n;
            }
        }
    }

    fn held(&self, span: BinSpan) -> &[[f64; 4]] {
        debug_assert!(self.span.covers(span), "{span:?} outside {:?}", self.span);
        if span.is_empty() {
            return &[];
        }
        &self.acc[span.first - self.span.first..=span.last - self.span.first]
    }
}

impl Bins for SlidingDft {
    fn norm_sqr(&self, ch: Channel, k: usize) -> f64 {
        let [a_re, b_re, a_im, b_im] = self.held(BinSpan { first: k, last: k })[0];
        match ch {
            Channel::A => a_re * a_re + a_im * a_im,
            Channel::B => b_re * b_re + b_im * b_im,
        }
    }

    #[inline]
    fn span_max_sq_both(&self, span: BinSpan) -> [f64; 2] {
        // Magnitudes are finite and ≥ 0, so a plain comparison is the maximum (f64::max's NaN
        // handling costs a blend per bin), and two running maxima, for even and odd bins, halve
        // the dependency chain.
        let norms = |[a_re, b_re, a_im, b_im]: [f64; 4]| [a_re * a_re + a_im * a_im, b_re * b_re + b_im * b_im];
        let max = |m: [f64; 2], v: [f64; 2]| [if v[0] > m[0] { v[0] } else { m[0] }, if v[1] > m[1] { v[1] } else { m[1] }];
        let bins = self.held(span);
        let (mut even, mut odd) = ([0.0f64; 2], [0.0f64; 2]);
        let mut pairs = bins.chunks_exact(2);
        for pair in &mut pairs {
            even = max(even, norms(pair[0]));
            odd = max(odd, norms(pair[1]));
        }
        if let [last] = pairs.remainder() {
            even = max(even, norms(*last));
        }
        max(even, odd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nimbus::cross_traffic::LinkRate;
    use crate::nimbus::elasticity::tests::Gauss;
    use crate::nimbus::elasticity::{plan, Detector, EtaBands, EtaForm, Plans, SpectrumPath};
    use crate::nimbus::history::{History, Sample};
    use crate::nimbus::sim::{self, Cross, Setup};
    use crate::nimbus::{CompetitiveAlg, DelayAlg, NimbusCC, NimbusConfig};
    use ccp_contract::{Algorithm, FlowStart, Pacing};
    use std::f64::consts::PI;

    /// Slides `x` and `y` through a 2-channel DFT of all bins below N/2 (anchored to the FFT of
    /// the first full window) and compares with an FFT of every later window.
    fn compare(n: usize, x: &[f64], y: &[f64], anchor_at: usize) -> f64 {
        let tw = Arc::new(Twiddles::new(n));
        let mut d = SlidingDft::new(tw);
        d.hold(BinSpan { first: 1, last: n / 2 - 1 });
        let mut s = Spectrum::new(plan(n), 0.01);
        let mut worst = 0.0f64;
        for j in anchor_at..x.len() {
            if j == anchor_at {
                s.compute_pair(|i| x[j - n + i], |i| y[j - n + i]);
                d.anchor(&s, j % n);
            }
            let (da, db) = (x[j] - x[j - n], y[j] - y[j - n]);
            d.slide(j % n, da, db);
            if (j + 1) % 97 == 0 || j + 1 == x.len() {
                s.compute_pair(|i| x[j + 1 - n + i], |i| y[j + 1 - n + i]);
                for ch in [Channel::A, Channel::B] {
                    let scale = (1..n / 2).map(|k| s.norm_sqr(ch, k)).fold(0.0, f64::max).sqrt();
                    for k in 1..n / 2 {
                        let (want, got) = (s.norm_sqr(ch, k).sqrt(), d.norm_sqr(ch, k).sqrt());
                        worst = worst.max((got - want).abs() / scale);
                    }
                }
            }
        }
        worst
    }

    /// The slid bins equal the FFT of the current window, to rounding, whatever the window length
    /// (powers of two or not) and over many windows of updates.
    #[test]
    fn sliding_bins_track_the_fft_of_the_window() {
        for n in [512usize, 500, 256] {
            let mut g = Gauss::new(n as u64);
            let len = 20 * n;
            let x: Vec<f64> = (0..len).map(|j| 6e6 + 1e6 * (0.3 * j as f64).sin() + 2e5 * g.next()).collect();
            let y: Vec<f64> = (0..len).map(|j| -3e6 + 5e5 * (0.2 * j as f64).cos() + 1e5 * g.next()).collect();
            let worst = compare(n, &x, &y, n);
            assert!(worst < 1e-12, "N {n}: worst relative error {worst:e}");
        }
    }

    /// Relative difference, with `floor` as the smallest scale (values at rounding level of the
    /// series compare absolutely).
    fn rel(a: f64, b: f64, floor: f64) -> f64 {
        if a == b {
            return 0.0;
        }
        (a - b).abs() / a.abs().max(b.abs()).max(floor)
    }

    /// A recorded fluid-sim run replayed open loop into the FFT and the sliding path: the same
    /// mode and role after every report, η and every other measured quantity within 1e-9
    /// (relative), and the same actions.
    fn replay_both(name: &str, cfg: NimbusConfig, setup: &Setup) -> (usize, usize) {
        let reference = NimbusConfig { spectrum_path: SpectrumPath::Fft, ..cfg };
        let (points, reports) = sim::record(setup, &mut NimbusCC::new(reference));
        let mut fft = NimbusCC::new(reference);
        let mut sliding = NimbusCC::new(NimbusConfig { spectrum_path: SpectrumPath::Sliding, ..cfg });
        let start = FlowStart::new(sim::MSS as u32, (10.0 * sim::MSS) as u64);
        assert_eq!(fft.init(&start), sliding.init(&start));
        let (mut switches, mut evaluated, mut worst_eta) = (0, 0, 0.0f64);
        for (i, (r, p)) in reports.iter().zip(&points).enumerate() {
            let (a_fft, a_sliding) = (fft.on_report(r), sliding.on_report(r));
            let at = format!("{name}, report {i} (t {:.2} s)", p.t_s);
            assert_eq!(fft.mode(), p.mode, "{at}: the replay reproduces the recording");
            assert_eq!(sliding.mode(), fft.mode(), "{at}: mode");
            assert_eq!(sliding.role(), fft.role(), "{at}: role");
            let (m, n) = (fft.last_measurement(), sliding.last_measurement());
            // Magnitudes are compared on the scale of the largest one of their series.
            let z_scale = m.z_fp.max(m.z_pulse_band) * 1e-6;
            let y_scale = m.y_fp.max(m.y_pulse_band) * 1e-6;
            let eta = rel(n.eta, m.eta, 0.0);
            worst_eta = worst_eta.max(eta);
            for (what, d) in [
                ("eta", eta),
                ("|Z(f_p)|", rel(n.z_fp, m.z_fp, z_scale)),
                ("|Z| pulse band", rel(n.z_pulse_band, m.z_pulse_band, z_scale)),
                ("|Y(f_p)|", rel(n.y_fp, m.y_fp, y_scale)),
                ("|Y| den. band", rel(n.y_den, m.y_den, y_scale)),
                ("|Y| pulse band", rel(n.y_pulse_band, m.y_pulse_band, y_scale)),
                ("avg_z", rel(n.avg_z, m.avg_z, 1.0)),
                ("avg_rtt", rel(n.avg_rtt_s, m.avg_rtt_s, 1e-6)),
                ("E", rel(sliding.elasticity(), fft.elasticity(), 1e-6)),
                ("cwnd", rel(a_sliding.cwnd_bytes.unwrap_or(0.0), a_fft.cwnd_bytes.unwrap_or(0.0), 1.0)),
            ] {
                assert!(d <= 1e-9, "{at}: {what} differs by {d:e} (FFT {m:?}, sliding {n:?})");
            }
            assert_eq!(a_sliding.pacing.is_some(), a_fft.pacing.is_some(), "{at}");
            if let (Some(Pacing::BytesPerSec(x)), Some(Pacing::BytesPerSec(y))) = (a_sliding.pacing, a_fft.pacing) {
                assert!(rel(x, y, 1.0) <= 1e-9, "{at}: pacing {x} vs {y}");
            }
            evaluated += usize::from(m.eta > 0.0);
            switches += usize::from(i > 0 && points[i - 1].mode != p.mode);
        }
        println!(
            "{name}: {} reports, {evaluated} evaluated, {switches} switches, worst η difference {worst_eta:e}",
            reports.len()
        );
        (evaluated, switches)
    }

    fn setup(mu: f64, rtt_us: u64, cross: Cross) -> Setup {
        // Two bandwidth-delay products of buffer, 60 s.
        Setup { mu, buffer_bytes: 2.0 * mu * rtt_us as f64 / 1e6, rtt_us, cross, duration_us: 60_000_000 }
    }

    /// The sliding path makes the FFT path's decisions: inelastic (CBR), elastic (AIMD) and mixed
    /// cross traffic, at 96 Mbit/s/50 ms and 24 Mbit/s/20 ms with μ configured, with μ̂
    /// estimated at 48 Mbit/s/100 ms, and Poisson + AIMD cross traffic with μ̂ estimated and η's
    /// window-gain correction (`eta_whiten`) at 48 Mbit/s/50 ms.
    #[test]
    fn sliding_path_makes_the_fft_paths_decisions() {
        let fixed = |mu: f64| NimbusConfig { link_rate: LinkRate::Fixed(mu), header_bytes: 0.0, ..NimbusConfig::default() };
        let estimated = NimbusConfig { header_bytes: 0.0, ..NimbusConfig::default() };
        let runs = [
            ("96M/50ms CBR 50%", fixed(12e6), setup(12e6, 50_000, Cross::Cbr { rate: 6e6 })),
            ("96M/50ms AIMD", fixed(12e6), setup(12e6, 50_000, Cross::Aimd { rtt_us: 50_000 })),
            ("96M/50ms CBR 25% + AIMD", fixed(12e6), setup(12e6, 50_000, Cross::Mixed { rate: 3e6, rtt_us: 50_000 })),
            ("24M/20ms CBR 40%", fixed(3e6), setup(3e6, 20_000, Cross::Cbr { rate: 1.2e6 })),
            ("24M/20ms AIMD 30ms", fixed(3e6), setup(3e6, 20_000, Cross::Aimd { rtt_us: 30_000 })),
            ("48M/100ms CBR 50%, mu estimated", estimated, setup(6e6, 100_000, Cross::Cbr { rate: 3e6 })),
            ("48M/100ms AIMD, mu estimated", estimated, setup(6e6, 100_000, Cross::Aimd { rtt_us: 100_000 })),
            (
                "48M/50ms Poisson 30% + AIMD, mu estimated, eta_whiten",
                NimbusConfig { bands: EtaBands { whiten: true, ..estimated.bands }, ..estimated },
                setup(6e6, 50_000, Cross::PoissonAimd { rate: 1.8e6, rtt_us: 50_000, seed: 18 }),
            ),
        ];
        let (mut evaluated, mut switches) = (0, 0);
        for (name, cfg, s) in runs {
            let (e, sw) = replay_both(name, cfg, &s);
            evaluated += e;
            switches += sw;
        }
        // The runs exercised the decisions: η on most reports after 10 s, and switches.
        assert!(evaluated > 8 * 4000, "{evaluated}");
        assert!(switches >= 7, "{switches}");
    }

    /// The same with multi-flow roles (the watcher's sliding bins, both pulse frequencies) and the
    /// other controllers and η form.
    #[test]
    fn sliding_path_makes_the_fft_paths_decisions_in_other_configurations() {
        let base = NimbusConfig { link_rate: LinkRate::Fixed(12e6), header_bytes: 0.0, ..NimbusConfig::default() };
        let runs = [
            ("multi-flow, CBR", NimbusConfig { multi_flow: true, ..base }, Cross::Cbr { rate: 6e6 }),
            ("multi-flow, AIMD", NimbusConfig { multi_flow: true, ..base }, Cross::Aimd { rtt_us: 50_000 }),
            (
                "Reno/Copa, CBR",
                NimbusConfig { competitive: CompetitiveAlg::Reno, delay: DelayAlg::Copa, ..base },
                Cross::Cbr { rate: 6e6 },
            ),
            (
                "eta_form bin, fixed 5 Hz, N = 500, CBR",
                NimbusConfig {
                    bands: EtaBands { form: EtaForm::Bin, ..EtaBands::default() },
                    mode_dependent_frequency: false,
                    fft_len: 500,
                    ..base
                },
                Cross::Cbr { rate: 6e6 },
            ),
        ];
        for (name, cfg, cross) in runs {
            let (evaluated, _) = replay_both(name, cfg, &setup(12e6, 50_000, cross));
            assert!(evaluated > 1000, "{name}: {evaluated}");
        }
    }

    /// A wild sample (a datapath glitch: ẑ = 1e18) is gone from the sliding bins and tail sums
    /// within two windows, as it is from the FFT's after one: the periodic anchor bounds what
    /// rounding can carry (without it the glitch's rounding residue would stay for the flow's life).
    #[test]
    fn a_glitch_leaves_no_residue() {
        let plans = Plans::new(512, 256);
        let mut fft = Detector::new(&plans, 0.01, false, SpectrumPath::Fft);
        let mut sliding = Detector::new(&plans, 0.01, false, SpectrumPath::Sliding);
        let mut h = History::new(10_000, 512);
        let (mut g, bands, glitch_at) = (Gauss::new(99), EtaBands::default(), 1000u64);
        let mut compared = 0;
        for i in 0..4000u64 {
            let t = i as f64 * 0.01;
            let z = if i == glitch_at { 1e18 } else { 4e6 + 5e5 * (2.0 * PI * 5.0 * t).sin() + 1e5 * g.next() };
            let x = Sample { z, zout: 3e6 + 1e5 * g.next(), rtt_s: 0.05 + 0.01 * g.uniform(), ..Sample::default() };
            h.advance_with(i * 10_000, &x, |h| sliding.ingest(h, &x));
            // Queried every sample, as NimbusCC does (an unqueried track stops sliding).
            let Some(m) = sliding.pulser(&h, 5.0, &bands, (4.5, 6.5)) else { continue };
            if i >= glitch_at + 2 * 512 && i % 10 == 0 {
                let f = fft.pulser(&h, 5.0, &bands, (4.5, 6.5)).unwrap();
                for (what, a, b) in [
                    ("eta", m.eta, f.eta),
                    ("|Z(f_p)|", m.z_fp, f.z_fp),
                    ("|Y(f_p)|", m.y_fp, f.y_fp),
                    ("avg_z", m.avg_z, f.avg_z),
                    ("avg_rtt", m.avg_rtt_s, f.avg_rtt_s),
                ] {
                    assert!(rel(a, b, 0.0) <= 1e-9, "sample {i}: {what} {a} vs {b}");
                }
                compared += 1;
            }
        }
        assert!(compared > 150, "{compared}");
    }
}
