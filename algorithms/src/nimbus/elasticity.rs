//! The elasticity metric η: an FFT of the cross-traffic estimate over the last ~5 s
//! (paper §3.3–3.4, Eq. 3; spec §5).
//!
//! Elastic (ACK-clocked) cross traffic answers our pulses one of its RTTs later, so ẑ oscillates at
//! the pulse frequency f_p; inelastic traffic does not. Nimbus compares the spectrum of ẑ at f_p
//! with the spectrum just above it:
//!
//!   paper (Eq. 3):  η = |Z(f_p)| / max_{f ∈ (f_p + ε, 2f_p − ε)} |Z(f)|,  ε = 0.5 Hz
//!
//! Preprocessing (spec §5.2): the window is the newest N samples of the 10 ms grid (N = 512,
//! 5.12 s, the authors' power of two; 500 allowed), the window mean is subtracted (DC removal only,
//! no linear detrend) and there is no taper. The FFT is unnormalized (rustfft): every quantity used
//! is a ratio of magnitudes, so normalization cancels. Plans are built once (shared by all flows of
//! a factory) and each flow owns its buffers and scratch, so a detection step allocates nothing.
//!
//! Two paths to the same numbers (`SpectrumPath`). η and the guards read ~30 of the 256 bins, and
//! the window moves by one sample per report, so a full FFT per report (the authors' choice; ~2 µs,
//! about 100× a Reno report) is mostly wasted. The default path slides only the bins the bands
//! read (`super::sliding`), at O(bins) per grid sample, and re-anchors them to an FFT once per
//! window; the FFT path computes the whole spectrum per report and is kept as the reference and
//! for plots. Both resolve every band to the same bins (`BinSpan`) and take the same maxima; they
//! differ by rounding (≈1e-14 relative), and the tests replay recorded runs through both and
//! require the same modes (`sliding::tests`). The 2-RTT alignment (A7, off) always takes the FFT
//! path: its per-sample shift of ẑ changes the whole window every report.
//!
//! Two forms of η (`eta_form`):
//! - `EtaForm::Band` (default, the authors' code): the band maximum over (f_p − ε, f_p + ε] over
//!   the band maximum over (f_p + `den_low_offset_hz`, 2f_p − ε], with `den_low_offset_hz` = 1.5:
//!   (4.5, 5.5] over (6.5, 9.5] at f_p = 5 Hz.
//! - `EtaForm::Bin`: Eq. 3 literally — the bin nearest f_p over the largest bin in the open band
//!   (f_p + ε, 2f_p − ε): (5.5, 9.5) at f_p = 5 Hz. `den_low_offset_hz` does not apply to it: the
//!   band is the paper's, so with mode-dependent frequencies the other pulsing frequency (6 Hz) lies
//!   inside it (see A2); use it with `mode_dependent_frequency = false` (spec A2: "0.5 Hz for a fixed
//!   single f_p").
//!
//! Ambiguities, as resolved (spec §14):
//! - A1, numerator: with N = 512 the 5 Hz tone falls between bins (25.6), so the default form takes
//!   the band maximum, as the authors' code does. It reproduces the paper's "median η ≈ 1 for
//!   inelastic traffic" (spec [Sim]: 0.96 vs 0.51 for the single bin; tests t12 and t17).
//! - A2, denominator: the band form starts 1.5 Hz above f_p because that keeps the other pulsing
//!   frequency (6 Hz when f_p = 5) out of the band: with the paper's (5.5, 9.5) band a 6 Hz pulser,
//!   or the residue of our own 6 Hz pulses right after a delay→competitive switch, drives η to ≈0.1
//!   (test t15 below pins this down).
//! - Band edges of the band form follow the authors' `find_peak`: bins with lo < f_k ≤ hi, plus the
//!   last bin with f_k ≤ lo (its starting candidate).
//! - A7, the authors' 2-RTT shift of ẑ relative to the other series is optional (`align_2rtt`,
//!   off): a pure time shift does not change FFT magnitudes.
//!
//! Optional window-gain correction (`EtaBands::whiten`, parameter `eta_whiten`, off; applied in
//! delay mode only, `NimbusConfig::bands_for`): η's bins are divided by the gain of the one-RTT rate
//! window (`window_gain`), so noise the window has tilted is compared flat. See `window_gain` for
//! the evidence and `sim::tests::held_out_accuracy_matrix` for the trade-off against elastic
//! traffic that keeps it off by default.

use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use super::history::{History, Ring, Sample};
use super::sliding::{SlidingDft, Twiddles};

/// Half-width ε of the numerator band and guard below 2f_p, Hz (paper §3.3: 0.5 Hz).
pub const EPS_HZ: f64 = 0.5;
/// Lower edge of the denominator band above f_p, Hz (authors' code; spec A2).
pub const DEN_LOW_OFFSET_HZ: f64 = 1.5;
/// FFT length of the pulser's window, samples (5.12 s at 10 ms; spec A3).
pub const FFT_LEN: usize = 512;
/// FFT length of a watcher's window, samples (2.56 s at 10 ms; authors' code).
pub const WATCHER_FFT_LEN: usize = 256;
/// Largest η reported: keeps ratios of vanishing magnitudes finite.
pub const ETA_MAX: f64 = 1e3;
/// avg_z and avg_rtt are means over this last fraction of the window (authors' code).
const TAIL_FRACTION: f64 = 0.25;

ccp_contract::param_choice! {
    /// How η's numerator and denominator are read off the spectrum.
    pub enum EtaForm {
        /// Band maxima with the authors' edges (default).
        Band = "band",
        /// The paper's Eq. 3 literally: the bin nearest f_p over the maximum in the open band
        /// (f_p + ε, 2f_p − ε).
        Bin = "bin",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EtaBands {
    pub form: EtaForm,
    pub eps_hz: f64,
    /// Lower edge of the band form's denominator band above f_p (the bin form uses ε, as Eq. 3).
    pub den_low_offset_hz: f64,
    /// Compare the bins of η as they were before the datapath's one-RTT rate window filtered them
    /// (`window_gain`).
    pub whiten: bool,
}

impl Default for EtaBands {
    fn default() -> Self {
        EtaBands { form: EtaForm::Band, eps_hz: EPS_HZ, den_low_offset_hz: DEN_LOW_OFFSET_HZ, whiten: false }
    }
}

impl EtaBands {
    /// The lower edge of η's denominator band at `f_p`, Hz: f_p + `den_low_offset_hz` for the
    /// band form, Eq. 3's f_p + ε for the bin form.
    pub fn den_low_hz(&self, f_p: f64) -> f64 {
        match self.form {
            EtaForm::Band => f_p + self.den_low_offset_hz,
            EtaForm::Bin => f_p + self.eps_hz,
        }
    }
}

/// num/den, finite: ETA_MAX when only the denominator vanishes, 0 when both do.
pub fn safe_ratio(num: f64, den: f64) -> f64 {
    if !num.is_finite() || num <= 0.0 {
        return 0.0;
    }
    if !den.is_finite() || den <= 0.0 {
        return ETA_MAX;
    }
    (num / den).min(ETA_MAX)
}

/// Builds a forward FFT plan of length `n` (once per factory or per flow).
pub fn plan(n: usize) -> Arc<dyn Fft<f64>> {
    FftPlanner::<f64>::new().plan_fft_forward(n)
}

/// Which of the (up to) two real series held by a `Spectrum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    A,
    B,
}

/// A reusable, preallocated spectrum of one or two real series of fixed length.
///
/// Two real series a and b are transformed with a single complex FFT of a + i·b and separated
/// afterwards: A_k = (X_k + conj X_{N−k})/2 and B_k = (X_k − conj X_{N−k})/(2i). That halves the
/// per-report FFT work of the pulser, which needs the spectra of both ẑ and μ̂ − R.
pub struct Spectrum {
    fft: Arc<dyn Fft<f64>>,
    buf: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
    bin_hz: f64,
    mean: f64,
}

impl std::fmt::Debug for Spectrum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spectrum").field("n", &self.buf.len()).field("bin_hz", &self.bin_hz).finish()
    }
}

impl Clone for Spectrum {
    fn clone(&self) -> Self {
        Spectrum {
            fft: Arc::clone(&self.fft),
            buf: self.buf.clone(),
            scratch: self.scratch.clone(),
            bin_hz: self.bin_hz,
            mean: self.mean,
        }
    }
}

fn finite_or_zero(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

impl Spectrum {
    /// A spectrum using `fft` for series sampled every `sample_s` seconds.
    pub fn new(fft: Arc<dyn Fft<f64>>, sample_s: f64) -> Self {
        let n = fft.len();
        let scratch = vec![Complex::new(0.0, 0.0); fft.get_inplace_scratch_len()];
        Spectrum { fft, buf: vec![Complex::new(0.0, 0.0); n], scratch, bin_hz: 1.0 / (n as f64 * sample_s), mean: 0.0 }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn bin_hz(&self) -> f64 {
        self.bin_hz
    }

    /// The mean removed from channel A's last series.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Loads a = `x(i)` for i in 0..n (b = 0), removes the mean and transforms in place.
    pub fn compute(&mut self, x: impl Fn(usize) -> f64) {
        self.compute_pair(x, |_| 0.0);
    }

    /// Loads a = `x(i)` and b = `y(i)`, removes both means and transforms in place.
    pub fn compute_pair(&mut self, x: impl Fn(usize) -> f64, y: impl Fn(usize) -> f64) {
        let n = self.buf.len();
        let (mut sx, mut sy) = (0.0, 0.0);
        for (i, c) in self.buf.iter_mut().enumerate() {
            *c = Complex::new(finite_or_zero(x(i)), finite_or_zero(y(i)));
            sx += c.re;
            sy += c.im;
        }
        let (mx, my) = (sx / n as f64, sy / n as f64);
        for c in self.buf.iter_mut() {
            c.re -= mx;
            c.im -= my;
        }
        self.mean = mx;
        self.fft.process_with_scratch(&mut self.buf, &mut self.scratch);
    }

    /// Loads a slice into channel A (its length must be n).
    pub fn compute_slice(&mut self, x: &[f64]) {
        assert_eq!(x.len(), self.buf.len());
        self.compute(|i| x[i]);
    }

    /// Bin k of `ch`.
    pub fn bin(&self, ch: Channel, k: usize) -> Complex<f64> {
        let n = self.buf.len();
        let x = self.buf[k];
        let m = self.buf[(n - k) % n].conj();
        match ch {
            Channel::A => (x + m) * 0.5,
            // (x − m)/(2i) = −i·(x − m)/2
            Channel::B => {
                let d = (x - m) * 0.5;
                Complex::new(d.im, -d.re)
            }
        }
    }

    /// |A_k|.
    pub fn magnitude(&self, k: usize) -> f64 {
        self.bin(Channel::A, k).norm()
    }

    /// |k-th bin| of `ch`.
    pub fn magnitude_of(&self, ch: Channel, k: usize) -> f64 {
        self.bin(ch, k).norm()
    }

    /// Largest |X_k| of channel A over bins with lo < f_k ≤ hi, plus the last bin with f_k ≤ lo
    /// (the authors' `find_peak` semantics), among k < n/2.
    pub fn band_max(&self, lo_hz: f64, hi_hz: f64) -> f64 {
        self.band_max_of(Channel::A, lo_hz, hi_hz)
    }

    /// `band_max` of channel `ch`. Only the bins near the band are visited.
    pub fn band_max_of(&self, ch: Channel, lo_hz: f64, hi_hz: f64) -> f64 {
        self.span_max(ch, BinSpan::band(lo_hz, hi_hz, self.bin_hz, self.buf.len()))
    }

    /// Largest |A_k| over bins with lo < f_k < hi strictly (the paper's open band); 0 if empty.
    pub fn open_band_max(&self, lo_hz: f64, hi_hz: f64) -> f64 {
        self.span_max(Channel::A, BinSpan::open(lo_hz, hi_hz, self.bin_hz, self.buf.len()))
    }

    /// |A_k| of the bin nearest `f_hz`.
    pub fn nearest(&self, f_hz: f64) -> f64 {
        self.span_max(Channel::A, BinSpan::nearest(f_hz, self.bin_hz, self.buf.len()))
    }

    /// η's (numerator, denominator) at f_p, of channel A.
    pub fn eta_parts(&self, f_p: f64, b: &EtaBands) -> (f64, f64) {
        self.eta_parts_of(Channel::A, f_p, b)
    }

    /// η's (numerator, denominator) at f_p, of channel `ch`.
    pub fn eta_parts_of(&self, ch: Channel, f_p: f64, b: &EtaBands) -> (f64, f64) {
        EtaSpans::new(f_p, b, self.bin_hz, self.buf.len()).parts(self, ch)
    }

    /// η = numerator/denominator at f_p, of channel A.
    pub fn eta(&self, f_p: f64, b: &EtaBands) -> f64 {
        let (n, d) = self.eta_parts(f_p, b);
        safe_ratio(n, d)
    }
}

impl Bins for Spectrum {
    fn norm_sqr(&self, ch: Channel, k: usize) -> f64 {
        self.bin(ch, k).norm_sqr()
    }
}

/// Bins `first..=last` of a spectrum (empty when first > last).
///
/// Every band η and the guards read is resolved to a span once, by the comparisons below, and both
/// the FFT and the sliding path take the maximum over the same span: they cannot disagree on which
/// bins a band holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinSpan {
    pub first: usize,
    pub last: usize,
}

impl BinSpan {
    pub const EMPTY: BinSpan = BinSpan { first: 1, last: 0 };

    pub fn is_empty(self) -> bool {
        self.first > self.last
    }

    pub fn len(self) -> usize {
        if self.is_empty() {
            0
        } else {
            self.last - self.first + 1
        }
    }

    pub fn contains(self, k: usize) -> bool {
        self.first <= k && k <= self.last
    }

    /// Whether every bin of `other` is in `self`.
    pub fn covers(self, other: BinSpan) -> bool {
        other.is_empty() || (self.first <= other.first && other.last <= self.last)
    }

    /// The smallest span holding both.
    pub fn union(self, other: BinSpan) -> BinSpan {
        match (self.is_empty(), other.is_empty()) {
            (true, _) => other,
            (_, true) => self,
            _ => BinSpan { first: self.first.min(other.first), last: self.last.max(other.last) },
        }
    }

    /// The authors' `find_peak` band of an `n`-point spectrum: bins with lo < f_k ≤ hi, plus the last
    /// bin with f_k ≤ lo (its starting candidate), among k < n/2.
    pub fn band(lo_hz: f64, hi_hz: f64, bin_hz: f64, n: usize) -> BinSpan {
        let half = n / 2;
        // Start a bin below the first candidate (so the comparisons, not the arithmetic, decide
        // which bin is the last one at or below lo).
        let first = ((lo_hz / bin_hz).floor().max(1.0) as usize - 1).min(half.saturating_sub(1));
        let mut span = BinSpan { first, last: first };
        for k in first..half {
            let f = k as f64 * bin_hz;
            if f <= lo_hz {
                span = BinSpan { first: k, last: k };
                continue;
            }
            if f > hi_hz {
                break;
            }
            span.last = k;
        }
        span
    }

    /// Bins with lo < f_k < hi strictly (the paper's open band), among k < n/2.
    pub fn open(lo_hz: f64, hi_hz: f64, bin_hz: f64, n: usize) -> BinSpan {
        let half = n / 2;
        let first = ((lo_hz / bin_hz).floor().max(0.0) as usize).min(half);
        let mut span = BinSpan::EMPTY;
        for k in first..half {
            let f = k as f64 * bin_hz;
            if f >= hi_hz {
                break;
            }
            if f > lo_hz {
                span = if span.is_empty() { BinSpan { first: k, last: k } } else { BinSpan { last: k, ..span } };
            }
        }
        span
    }

    /// The bin nearest `f_hz`, among k < n/2.
    pub fn nearest(f_hz: f64, bin_hz: f64, n: usize) -> BinSpan {
        let k = (f_hz / bin_hz).round().clamp(0.0, (n / 2 - 1) as f64) as usize;
        BinSpan { first: k, last: k }
    }
}

/// Magnitudes of spectrum bins: an FFT (`Spectrum`) or the sliding bins (`SlidingDft`).
pub trait Bins {
    /// |X_k|² of channel `ch`.
    fn norm_sqr(&self, ch: Channel, k: usize) -> f64;

    /// Largest |X_k| of `ch` over `span`; 0 if it is empty.
    fn span_max(&self, ch: Channel, span: BinSpan) -> f64 {
        if span.is_empty() {
            return 0.0;
        }
        (span.first + 1..=span.last).fold(self.norm_sqr(ch, span.first), |m, k| m.max(self.norm_sqr(ch, k))).sqrt()
    }

    /// The squares of `span_max` of channels A and B. A maximum is exact, so every
    /// implementation returns the same bits for the same squared magnitudes.
    fn span_max_sq_both(&self, span: BinSpan) -> [f64; 2] {
        if span.is_empty() {
            return [0.0; 2];
        }
        [Channel::A, Channel::B]
            .map(|ch| (span.first + 1..=span.last).fold(self.norm_sqr(ch, span.first), |m, k| m.max(self.norm_sqr(ch, k))))
    }
}

/// The spans of η's numerator and denominator at one pulse frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtaSpans {
    pub num: BinSpan,
    pub den: BinSpan,
}

impl EtaSpans {
    pub fn new(f_p: f64, b: &EtaBands, bin_hz: f64, n: usize) -> Self {
        let (den_lo, den_hi) = (b.den_low_hz(f_p), 2.0 * f_p - b.eps_hz);
        match b.form {
            EtaForm::Band => EtaSpans {
                num: BinSpan::band(f_p - b.eps_hz, f_p + b.eps_hz, bin_hz, n),
                den: BinSpan::band(den_lo, den_hi, bin_hz, n),
            },
            EtaForm::Bin => EtaSpans { num: BinSpan::nearest(f_p, bin_hz, n), den: BinSpan::open(den_lo, den_hi, bin_hz, n) },
        }
    }

    /// (numerator, denominator) of channel `ch` of `bins`.
    pub fn parts(&self, bins: &impl Bins, ch: Channel) -> (f64, f64) {
        (bins.span_max(ch, self.num), bins.span_max(ch, self.den))
    }
}

/// What the pulser learns from one window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PulserMeasurement {
    /// η of ẑ at the current pulse frequency (before any guard).
    pub eta: f64,
    /// |Z(f_p)| and |Y(f_p)| (numerator bands), |Y| in the denominator band. Y = spectrum of μ̂ − R,
    /// i.e. of our own receive rate, where our own pulses must show.
    pub z_fp: f64,
    pub y_fp: f64,
    pub y_den: f64,
    /// |Z| and |Y| maxima over the band holding both pulsing frequencies (multi-pulser check).
    pub z_pulse_band: f64,
    pub y_pulse_band: f64,
    /// Mean ẑ (bytes/s) and RTT (s) over the last quarter of the window.
    pub avg_z: f64,
    pub avg_rtt_s: f64,
}

/// What a watcher learns from one window of its own receive rate.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WatcherMeasurement {
    /// |Y| at the pulsing frequency of the watcher's current mode and of the other mode.
    pub y_current: f64,
    pub y_other: f64,
    /// |Y| maximum over the band holding both pulsing frequencies, and over the band above it.
    pub y_pulse_band: f64,
    pub y_high_band: f64,
    pub avg_z: f64,
    pub avg_rtt_s: f64,
}

/// How the detector gets its bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpectrumPath {
    /// Only the bins the bands read, slid by one sample per grid step (`SlidingDft`) and
    /// re-anchored to an FFT once per window (default).
    #[default]
    Sliding,
    /// A full FFT of the window at every detection step: the reference, and what plots of the
    /// whole spectrum need. Same decisions at ~10× the sliding path's CPU per report (bench
    /// `per_report`).
    Fft,
}

/// Re-anchor a sliding track to an FFT of its window after this many windows of updates, so its
/// state never depends on older samples (as the FFT's does not) and rounding cannot accumulate
/// beyond one window's updates. One FFT per 512 reports costs ~5 ns per report.
const ANCHOR_EVERY_WINDOWS: usize = 1;
/// Distinct (frequency, bands) queries whose spans are remembered per track: NimbusCC asks about
/// two pulse frequencies.
const SPAN_CACHE_LEN: usize = 4;

/// What a track's channels hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TrackKind {
    /// ẑ in channel A, μ̂ − R in channel B.
    Pulser,
    /// μ̂ − R in channel A.
    Watcher,
}

/// The sliding path's state for one window length: the held bins, the tail sums behind avg_z and
/// avg_rtt, and where it stands relative to the history.
#[derive(Debug, Clone)]
struct Track {
    kind: TrackKind,
    dft: SlidingDft,
    n: usize,
    /// Samples in the last quarter of the window (avg_z, avg_rtt).
    tail_len: usize,
    /// Absolute grid index of the next sample (in step with `History::pushes` while in sync), and
    /// it modulo n.
    seen: u64,
    pos: usize,
    /// Slides since the last anchor; None: the state is void until the next query anchors it.
    since_anchor: Option<usize>,
    /// Grid samples since the last query: an unqueried track stops sliding after a window.
    since_query: usize,
    tail_z: f64,
    tail_rtt: f64,
}

impl Track {
    fn new(kind: TrackKind, tw: Arc<Twiddles>) -> Self {
        let n = tw.len();
        Track {
            kind,
            dft: SlidingDft::new(tw),
            n,
            tail_len: n - tail_start(n),
            seen: 0,
            pos: 0,
            since_anchor: None,
            since_query: 0,
            tail_z: 0.0,
            tail_rtt: 0.0,
        }
    }

    /// Grid sample `x` is about to be pushed onto `h`.
    fn ingest(&mut self, h: &History, x: &Sample) {
        let j = h.pushes();
        if j != self.seen {
            // Samples went by unseen: only an anchor can resynchronise.
            self.since_anchor = None;
            self.pos = (j % self.n as u64) as usize;
        }
        self.seen = j + 1;
        self.since_query = self.since_query.saturating_add(1);
        if let Some(age) = self.since_anchor {
            if age >= ANCHOR_EVERY_WINDOWS * self.n || self.since_query > self.n {
                self.since_anchor = None;
            } else {
                self.slide(h, x);
                self.since_anchor = Some(age + 1);
            }
        }
        self.pos += 1;
        if self.pos == self.n {
            self.pos = 0;
        }
    }

    fn slide(&mut self, h: &History, x: &Sample) {
        let (n, len) = (self.n, h.len());
        // The sample leaving the window (0 while the window is not full yet).
        let leaving = |ring: &Ring, back: usize| if len >= back { ring.back(back - 1) } else { 0.0 };
        let (da, db) = match self.kind {
            TrackKind::Pulser => (
                finite_or_zero(x.z) - finite_or_zero(leaving(&h.z, n)),
                finite_or_zero(x.zout) - finite_or_zero(leaving(&h.zout, n)),
            ),
            TrackKind::Watcher => (finite_or_zero(x.zout) - finite_or_zero(leaving(&h.zout, n)), 0.0),
        };
        self.dft.slide(self.pos, da, db);
        self.tail_z += x.z - leaving(&h.z, self.tail_len);
        self.tail_rtt += x.rtt_s - leaving(&h.rtt, self.tail_len);
    }

    /// Slides exactly the bins of `span`. Only the bins a query reads are slid (26 at 5 Hz, 36 at
    /// 6 Hz, not the 37 of both): a change of pulse frequency costs one anchor.
    fn hold(&mut self, span: BinSpan) {
        if self.dft.span() != span {
            self.dft.hold(span);
            self.since_anchor = None;
        }
    }

    /// Whether the state must be rebuilt from an FFT before it answers for `h`.
    fn stale(&self, h: &History) -> bool {
        self.since_anchor.is_none() || self.seen != h.pushes()
    }

    /// Rebuilds from `spectrum`, the FFT of the staged window of `h`, and the staged tail.
    fn anchor(&mut self, h: &History, spectrum: &Spectrum, stage_z: &[f64], stage_rtt: &[f64]) {
        self.seen = h.pushes();
        self.pos = (self.seen % self.n as u64) as usize;
        self.dft.anchor(spectrum, self.pos);
        let from = self.n - self.tail_len;
        // Summed in the FFT path's order, so both paths start from the same sums.
        self.tail_z = stage_z[from..self.n].iter().sum();
        self.tail_rtt = stage_rtt[from..self.n].iter().sum();
        self.since_anchor = Some(0);
    }

    fn tail_means(&self) -> (f64, f64) {
        (self.tail_z / self.tail_len as f64, self.tail_rtt / self.tail_len as f64)
    }
}

/// The spans of one pulser query.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PulserQuery {
    f_p: f64,
    bands: EtaBands,
    pulse_band: (f64, f64),
}

#[derive(Debug, Clone, Copy)]
struct PulserSpans {
    eta: EtaSpans,
    pulse: BinSpan,
    bin_hz: f64,
    whiten: bool,
}

impl PulserSpans {
    fn new(q: &PulserQuery, bin_hz: f64, n: usize) -> Self {
        PulserSpans {
            eta: EtaSpans::new(q.f_p, &q.bands, bin_hz, n),
            pulse: BinSpan::band(q.pulse_band.0, q.pulse_band.1, bin_hz, n),
            bin_hz,
            whiten: q.bands.whiten,
        }
    }

    fn all(&self) -> BinSpan {
        self.eta.num.union(self.eta.den).union(self.pulse)
    }
}

/// The spans of one watcher query.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WatcherQuery {
    f_current: f64,
    f_other: f64,
    eps_hz: f64,
    pulse_band: (f64, f64),
    high_band: (f64, f64),
}

#[derive(Debug, Clone, Copy)]
struct WatcherSpans {
    current: BinSpan,
    other: BinSpan,
    pulse: BinSpan,
    high: BinSpan,
}

impl WatcherSpans {
    fn new(q: &WatcherQuery, bin_hz: f64, n: usize) -> Self {
        let band = |lo: f64, hi: f64| BinSpan::band(lo, hi, bin_hz, n);
        WatcherSpans {
            current: band(q.f_current - q.eps_hz, q.f_current + q.eps_hz),
            other: band(q.f_other - q.eps_hz, q.f_other + q.eps_hz),
            pulse: band(q.pulse_band.0, q.pulse_band.1),
            high: band(q.high_band.0, q.high_band.1),
        }
    }

    fn all(&self) -> BinSpan {
        self.current.union(self.other).union(self.pulse).union(self.high)
    }
}

/// The spans of `q`, resolved once and remembered.
fn cached<Q: PartialEq + Copy, S: Copy>(cache: &mut Vec<(Q, S)>, q: Q, resolve: impl FnOnce(&Q) -> S) -> S {
    if let Some((_, s)) = cache.iter().find(|(k, _)| *k == q) {
        return *s;
    }
    if cache.len() >= SPAN_CACHE_LEN {
        cache.clear();
    }
    let s = resolve(&q);
    cache.push((q, s));
    s
}

/// Spectra and window buffers of one flow.
#[derive(Debug, Clone)]
pub struct Detector {
    /// ẑ in channel A, μ̂ − R in channel B.
    zy: Spectrum,
    watcher_y: Spectrum,
    /// Window staging (z, y, rtt) for the 2-RTT alignment; sized once.
    stage_z: Vec<f64>,
    stage_y: Vec<f64>,
    stage_rtt: Vec<f64>,
    align_2rtt: bool,
    path: SpectrumPath,
    pulser_track: Track,
    watcher_track: Track,
    pulser_spans: Vec<(PulserQuery, PulserSpans)>,
    watcher_spans: Vec<(WatcherQuery, WatcherSpans)>,
}

/// The plans (and sliding-DFT twiddles) a detector needs, shareable between flows.
#[derive(Clone)]
pub struct Plans {
    pub pulser: Arc<dyn Fft<f64>>,
    pub watcher: Arc<dyn Fft<f64>>,
    pub pulser_twiddles: Arc<Twiddles>,
    pub watcher_twiddles: Arc<Twiddles>,
}

impl std::fmt::Debug for Plans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plans").field("pulser", &self.pulser.len()).field("watcher", &self.watcher.len()).finish()
    }
}

impl Plans {
    pub fn new(pulser_len: usize, watcher_len: usize) -> Self {
        let mut planner = FftPlanner::<f64>::new();
        Plans {
            pulser: planner.plan_fft_forward(pulser_len),
            watcher: planner.plan_fft_forward(watcher_len),
            pulser_twiddles: Arc::new(Twiddles::new(pulser_len)),
            watcher_twiddles: Arc::new(Twiddles::new(watcher_len)),
        }
    }
}

/// Grid samples the 2-RTT alignment reads beyond the window: the window plus 1 s, minus the newest
/// sample (authors' code), for a window of `n` samples of `slot_us`.
pub fn aligned_span(n: usize, slot_us: u64) -> usize {
    let slot = slot_us.max(1) as usize;
    (n * slot + 1_000_000) / slot - 1
}

/// First index of the window's last quarter (avg_z and avg_rtt).
fn tail_start(n: usize) -> usize {
    (n as f64 * (1.0 - TAIL_FRACTION)) as usize
}

fn mean(x: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = x.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

impl Detector {
    /// A detector on `path`; the 2-RTT alignment reads ẑ at a per-sample shift, which no sliding
    /// sum can follow, so with it every path is the FFT path.
    pub fn new(plans: &Plans, slot_s: f64, align_2rtt: bool, path: SpectrumPath) -> Self {
        let n = plans.pulser.len().max(plans.watcher.len());
        Detector {
            zy: Spectrum::new(Arc::clone(&plans.pulser), slot_s),
            watcher_y: Spectrum::new(Arc::clone(&plans.watcher), slot_s),
            stage_z: vec![0.0; n],
            stage_y: vec![0.0; n],
            stage_rtt: vec![0.0; n],
            align_2rtt,
            path: if align_2rtt { SpectrumPath::Fft } else { path },
            pulser_track: Track::new(TrackKind::Pulser, Arc::clone(&plans.pulser_twiddles)),
            watcher_track: Track::new(TrackKind::Watcher, Arc::clone(&plans.watcher_twiddles)),
            pulser_spans: Vec::new(),
            watcher_spans: Vec::new(),
        }
    }

    pub fn path(&self) -> SpectrumPath {
        self.path
    }

    /// Grid sample `x` is about to be pushed onto `h` (call it for every push, before it: the
    /// sliding path needs the sample leaving the window, which the push may overwrite). Costs a
    /// few counters until the sliding path has been queried.
    pub fn ingest(&mut self, h: &History, x: &Sample) {
        if self.path == SpectrumPath::Sliding {
            self.pulser_track.ingest(h, x);
            self.watcher_track.ingest(h, x);
        }
    }

    /// Samples of history a window of `n` needs.
    pub fn needed(&self, n: usize, slot_us: u64) -> usize {
        if self.align_2rtt {
            aligned_span(n, slot_us) + 1
        } else {
            n
        }
    }

    /// Stages the newest window of `n` samples into the staging buffers. With the 2-RTT
    /// alignment, ẑ is read 2·RTT later than μ̂ − R and the RTT (authors' code); returns false when
    /// the history is too short or an aligned index runs past the newest sample.
    fn stage(&mut self, h: &History, n: usize) -> bool {
        if h.len() < self.needed(n, h.slot_us()) {
            return false;
        }
        if !self.align_2rtt {
            h.z.copy_window(0, &mut self.stage_z[..n]);
            h.zout.copy_window(0, &mut self.stage_y[..n]);
            h.rtt.copy_window(0, &mut self.stage_rtt[..n]);
            return true;
        }
        let span = aligned_span(n, h.slot_us());
        let slot_s = h.slot_s();
        for i in 0..n {
            let rtt = h.rtt.window_at(span, 1, i);
            let shift = if rtt.is_finite() && rtt > 0.0 { (rtt / slot_s).floor().min(span as f64) as usize } else { 0 };
            let j = i + 2 * shift;
            if j >= span {
                return false;
            }
            self.stage_z[i] = h.z.window_at(span, 1, j);
            self.stage_y[i] = h.zout.window_at(span, 1, i);
            self.stage_rtt[i] = rtt;
        }
        true
    }

    fn tail_means(&self, n: usize) -> (f64, f64) {
        let from = tail_start(n);
        (mean(self.stage_z[from..n].iter().copied()), mean(self.stage_rtt[from..n].iter().copied()))
    }

    /// The pulser's measurement at pulse frequency `f_p`; `pulse_band` = (lo, hi] holding both
    /// pulsing frequencies. `None` while the history is too short.
    pub fn pulser(&mut self, h: &History, f_p: f64, bands: &EtaBands, pulse_band: (f64, f64)) -> Option<PulserMeasurement> {
        match self.path {
            SpectrumPath::Fft => self.pulser_fft(h, f_p, bands, pulse_band),
            SpectrumPath::Sliding => self.pulser_sliding(h, f_p, bands, pulse_band),
        }
    }

    /// `pulser` by a full FFT of the window: the reference.
    pub fn pulser_fft(&mut self, h: &History, f_p: f64, bands: &EtaBands, pulse_band: (f64, f64)) -> Option<PulserMeasurement> {
        let n = self.zy.len();
        if !self.stage(h, n) {
            return None;
        }
        let (avg_z, avg_rtt_s) = self.tail_means(n);
        let (sz, sy) = (&self.stage_z, &self.stage_y);
        self.zy.compute_pair(|i| sz[i], |i| sy[i]);
        let spans = PulserSpans::new(&PulserQuery { f_p, bands: *bands, pulse_band }, self.zy.bin_hz(), n);
        Some(pulser_measurement(&self.zy, &spans, avg_z, avg_rtt_s))
    }

    fn pulser_sliding(&mut self, h: &History, f_p: f64, bands: &EtaBands, pulse_band: (f64, f64)) -> Option<PulserMeasurement> {
        let n = self.zy.len();
        if h.len() < n {
            return None;
        }
        let (bin_hz, q) = (self.zy.bin_hz(), PulserQuery { f_p, bands: *bands, pulse_band });
        let spans = cached(&mut self.pulser_spans, q, |q| PulserSpans::new(q, bin_hz, n));
        let t = &mut self.pulser_track;
        t.hold(spans.all());
        if t.stale(h) {
            let staged = self.stage(h, n);
            debug_assert!(staged);
            let (sz, sy) = (&self.stage_z, &self.stage_y);
            self.zy.compute_pair(|i| sz[i], |i| sy[i]);
            self.pulser_track.anchor(h, &self.zy, &self.stage_z, &self.stage_rtt);
        }
        let t = &mut self.pulser_track;
        t.since_query = 0;
        let (avg_z, avg_rtt_s) = t.tail_means();
        Some(pulser_measurement(&t.dft, &spans, avg_z, avg_rtt_s))
    }

    /// A watcher's measurement: its receive rate's spectrum at the frequency of its current mode
    /// (`f_current`) and of the other mode, and over the pulse band vs the band above it.
    pub fn watcher(
        &mut self,
        h: &History,
        f_current: f64,
        f_other: f64,
        eps_hz: f64,
        pulse_band: (f64, f64),
        high_band: (f64, f64),
    ) -> Option<WatcherMeasurement> {
        let q = WatcherQuery { f_current, f_other, eps_hz, pulse_band, high_band };
        match self.path {
            SpectrumPath::Fft => self.watcher_fft(h, &q),
            SpectrumPath::Sliding => self.watcher_sliding(h, q),
        }
    }

    fn watcher_fft(&mut self, h: &History, q: &WatcherQuery) -> Option<WatcherMeasurement> {
        let n = self.watcher_y.len();
        if !self.stage(h, n) {
            return None;
        }
        let (avg_z, avg_rtt_s) = self.tail_means(n);
        let sy = &self.stage_y;
        self.watcher_y.compute(|i| sy[i]);
        let spans = WatcherSpans::new(q, self.watcher_y.bin_hz(), n);
        Some(watcher_measurement(&self.watcher_y, &spans, avg_z, avg_rtt_s))
    }

    fn watcher_sliding(&mut self, h: &History, q: WatcherQuery) -> Option<WatcherMeasurement> {
        let n = self.watcher_y.len();
        if h.len() < n {
            return None;
        }
        let bin_hz = self.watcher_y.bin_hz();
        let spans = cached(&mut self.watcher_spans, q, |q| WatcherSpans::new(q, bin_hz, n));
        let t = &mut self.watcher_track;
        t.hold(spans.all());
        if t.stale(h) {
            let staged = self.stage(h, n);
            debug_assert!(staged);
            let sy = &self.stage_y;
            self.watcher_y.compute(|i| sy[i]);
            self.watcher_track.anchor(h, &self.watcher_y, &self.stage_z, &self.stage_rtt);
        }
        let t = &mut self.watcher_track;
        t.since_query = 0;
        let (avg_z, avg_rtt_s) = t.tail_means();
        Some(watcher_measurement(&t.dft, &spans, avg_z, avg_rtt_s))
    }
}

/// Floor of `window_gain`: bins the rate window attenuates more than this are compared as if
/// attenuated this much (what is left there is mostly not the filtered input, e.g. rounding, the
/// zero-order hold and RTT jitter, and must not be amplified without bound).
pub const WINDOW_GAIN_FLOOR: f64 = 0.2;

/// Amplitude gain at `f_hz` of the datapath's rate measurement: S and R are averages over the
/// last RTT (spec §3.2; the kernel's rate sample), a moving average of length `window_s` whose
/// gain is |sinc(f·window_s)|, floored at `WINDOW_GAIN_FLOOR`.
///
/// Why η needs it. η compares the bins at f_p with the bins just above (6.5–9.5 Hz at 5 Hz).
/// White noise in ẑ — Poisson cross traffic — reaches the spectrum through this filter, so once
/// the window is a sizeable fraction of the pulse period the denominator band is attenuated more
/// than f_p and the noise alone gives η > 1: at a 125 ms window |sinc| is 0.47 at 5 Hz but 0.14 at
/// 7 Hz. In the fluid simulation (`sim`), Poisson cross traffic at 40 % of the link with μ
/// configured exactly was classified inelastic 100 % of the time at 24 Mbit/s/30 ms but 31 % at
/// 96 Mbit/s/80 ms and 49 % at 12 Mbit/s/100 ms (median η 1.06 → 1.77 → 1.38 with E pulled up). The
/// paper tuned η_thresh = 2 where the window is short against T (50 ms RTT) and the correction is
/// small (|sinc| 0.90 at 5 Hz vs 0.70–0.83 in the band at a 62 ms window). An elastic flow's
/// answer passes the same filter, so dividing each bin by the gain compares like with like in both
/// cases — in theory.
///
/// Measured (`sim::tests::held_out_accuracy_matrix`, μ̂ estimated, three seeds), correcting in
/// delay mode only: inelastic accuracy rises (Poisson 40 % at 48/50, 96/80, 12/100 Mbit/s/ms:
/// 72 → 80, 44 → 96, 53 → 81 %; on/off 82 → 98, 46 → 87 %) but elastic accuracy falls (one Reno
/// flow at 48/50 and 96/80: 70 → 60, 91 → 79 %; with μ configured 97 → 82 % at 96/80; Poisson at
/// 30 % plus Reno, μ configured: 91 → 80, 66 → 50 %). Corrected in both modes (competitive mode's
/// RTT holds Cubic's queue: 100–250 ms windows), one Reno flow at 48/50 with μ configured fell from
/// 100 to 79 %: what ẑ holds in the denominator band against elastic traffic is not just filtered
/// noise (rate-sample edges, ACK-clocked bursts), and dividing it by a small gain inflates it.
/// Because missing an elastic flow costs throughput — the failure the paper's design avoids —
/// the correction is an option (`eta_whiten`), off.
pub fn window_gain(f_hz: f64, window_s: f64) -> f64 {
    let x = std::f64::consts::PI * f_hz * window_s;
    let g = if x.abs() < 1e-9 { 1.0 } else { (x.sin() / x).abs() };
    g.max(WINDOW_GAIN_FLOOR)
}

/// Largest |A_k|/`window_gain`(f_k) over `span` (0 if empty).
fn whitened_span_max(bins: &impl Bins, span: BinSpan, bin_hz: f64, window_s: f64) -> f64 {
    if span.is_empty() {
        return 0.0;
    }
    (span.first..=span.last)
        .map(|k| bins.norm_sqr(Channel::A, k).sqrt() / window_gain(k as f64 * bin_hz, window_s))
        .fold(0.0, f64::max)
}

fn pulser_measurement(bins: &impl Bins, s: &PulserSpans, avg_z: f64, avg_rtt_s: f64) -> PulserMeasurement {
    // ẑ in A and μ̂ − R in B are read over the same spans; the square roots come last, together,
    // so their latencies overlap.
    let ([z_fp, y_fp], [z_den, y_den], [z_pulse_band, y_pulse_band]) =
        (bins.span_max_sq_both(s.eta.num), bins.span_max_sq_both(s.eta.den), bins.span_max_sq_both(s.pulse));
    let (z_fp, y_fp, z_den, y_den) = (z_fp.sqrt(), y_fp.sqrt(), z_den.sqrt(), y_den.sqrt());
    let (z_pulse_band, y_pulse_band) = (z_pulse_band.sqrt(), y_pulse_band.sqrt());
    let eta = if s.whiten && avg_rtt_s.is_finite() && avg_rtt_s > 0.0 {
        safe_ratio(
            whitened_span_max(bins, s.eta.num, s.bin_hz, avg_rtt_s),
            whitened_span_max(bins, s.eta.den, s.bin_hz, avg_rtt_s),
        )
    } else {
        safe_ratio(z_fp, z_den)
    };
    PulserMeasurement { eta, z_fp, y_fp, y_den, z_pulse_band, y_pulse_band, avg_z, avg_rtt_s }
}

fn watcher_measurement(bins: &impl Bins, s: &WatcherSpans, avg_z: f64, avg_rtt_s: f64) -> WatcherMeasurement {
    WatcherMeasurement {
        y_current: bins.span_max(Channel::A, s.current),
        y_other: bins.span_max(Channel::A, s.other),
        y_pulse_band: bins.span_max(Channel::A, s.pulse),
        y_high_band: bins.span_max(Channel::A, s.high),
        avg_z,
        avg_rtt_s,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nimbus::election::SplitMix64;
    use std::f64::consts::PI;

    const DT: f64 = 0.01;

    /// Standard normal samples (Box–Muller) from a seeded generator.
    pub(crate) struct Gauss {
        rng: SplitMix64,
        spare: Option<f64>,
    }

    impl Gauss {
        pub(crate) fn new(seed: u64) -> Self {
            Gauss { rng: SplitMix64::new(seed), spare: None }
        }

        pub(crate) fn uniform(&mut self) -> f64 {
            self.rng.next_f64()
        }

        pub(crate) fn next(&mut self) -> f64 {
            if let Some(s) = self.spare.take() {
                return s;
            }
            let u1 = self.rng.next_f64().max(f64::MIN_POSITIVE);
            let u2 = self.rng.next_f64();
            let r = (-2.0 * u1.ln()).sqrt();
            self.spare = Some(r * (2.0 * PI * u2).sin());
            r * (2.0 * PI * u2).cos()
        }
    }

    fn spectrum(n: usize) -> Spectrum {
        Spectrum::new(plan(n), DT)
    }

    /// η of `x` for f_p = 5 Hz with the given bands.
    fn eta_of(s: &mut Spectrum, x: &[f64], b: &EtaBands) -> f64 {
        s.compute_slice(x);
        s.eta(5.0, b)
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        }
    }

    /// η over `seeds` realizations of `gen(seed, t)` on a window of n samples.
    fn etas(n: usize, seeds: u64, b: &EtaBands, gen: impl Fn(&mut Gauss, f64, f64) -> f64) -> Vec<f64> {
        let mut s = spectrum(n);
        let mut x = vec![0.0; n];
        (0..seeds)
            .map(|seed| {
                let mut g = Gauss::new(0xE1A5 + seed * 7919);
                let phase = 2.0 * PI * g.uniform();
                for (i, v) in x.iter_mut().enumerate() {
                    *v = gen(&mut g, i as f64 * DT, phase);
                }
                eta_of(&mut s, &x, b)
            })
            .collect()
    }

    fn frac_above(v: &[f64], t: f64) -> f64 {
        v.iter().filter(|&&e| e > t).count() as f64 / v.len() as f64
    }

    fn tone(f: f64, a: f64) -> impl Fn(&mut Gauss, f64, f64) -> f64 {
        move |g, t, ph| a * (2.0 * PI * f * t + ph).sin() + g.next()
    }

    /// §15.2 test 10: a unit sinusoid exactly on bin k has |X_k| = N/2 (no double normalization).
    #[test]
    fn t10_normalization() {
        let mut s = spectrum(512);
        let k = 32;
        s.compute(|i| (2.0 * PI * k as f64 * i as f64 / 512.0).cos());
        assert!((s.magnitude(k) - 256.0).abs() < 1e-9, "{}", s.magnitude(k));
        assert!(s.mean().abs() < 1e-12);
    }

    /// §15.2 test 11: η(a·z + b) = η(z).
    #[test]
    fn t11_scale_and_offset_invariance() {
        let mut g = Gauss::new(11);
        let x: Vec<f64> = (0..512).map(|i| (2.0 * PI * 5.0 * i as f64 * DT).sin() * 0.7 + g.next()).collect();
        let mut s = spectrum(512);
        let b = EtaBands::default();
        let e0 = eta_of(&mut s, &x, &b);
        for (a, off) in [(3.0, 0.0), (1e6, 4e6), (0.01, -123.0)] {
            let y: Vec<f64> = x.iter().map(|v| a * v + off).collect();
            let e = eta_of(&mut s, &y, &b);
            assert!((e - e0).abs() < 1e-12, "{e} vs {e0}");
        }
    }

    /// §15.2 test 12: noise only.
    #[test]
    fn t12_noise_only() {
        let b = EtaBands::default();
        let mut raw = etas(512, 400, &b, |g, _, _| g.next());
        let p2 = frac_above(&raw, 2.0);
        let m = median(&mut raw);
        assert!((0.6..=1.1).contains(&m), "median {m}");
        assert!(p2 < 0.01, "P(η > 2) = {p2}");
        // With 1-RTT smoothing (5-sample moving average).
        let mut s = spectrum(512);
        let mut smoothed = vec![];
        for seed in 0..400u64 {
            let mut g = Gauss::new(0x5EED + seed);
            let w: Vec<f64> = (0..516).map(|_| g.next()).collect();
            let x: Vec<f64> = (0..512).map(|i| w[i..i + 5].iter().sum::<f64>() / 5.0).collect();
            smoothed.push(eta_of(&mut s, &x, &b));
        }
        let p2 = frac_above(&smoothed, 2.0);
        let m = median(&mut smoothed);
        assert!((0.75..=1.2).contains(&m), "smoothed median {m}");
        assert!(p2 < 0.02, "smoothed P(η > 2) = {p2}");
    }

    /// §15.2 test 13: an elastic-like tone at f_p.
    #[test]
    fn t13_tone_at_fp() {
        let b = EtaBands::default();
        let v = etas(512, 200, &b, tone(5.0, 1.0));
        assert!(frac_above(&v, 2.0) >= 0.98, "P(η > 2) = {}", frac_above(&v, 2.0));
        // Sensitivity: the median grows with the amplitude (≈1.7 at 0.35).
        let mut last = 0.0;
        for a in [0.0, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5] {
            let mut v = etas(512, 200, &b, tone(5.0, a));
            let m = median(&mut v);
            assert!(m > last, "amplitude {a}: median {m} ≤ {last}");
            if a == 0.35 {
                assert!((1.3..=2.1).contains(&m), "A = 0.35: {m}");
            }
            if a == 1.0 {
                assert!((3.5..=5.5).contains(&m), "A = 1: {m}");
            }
            last = m;
        }
    }

    /// §15.2 test 14: phase invariance (with noise).
    #[test]
    fn t14_phase_invariance() {
        let b = EtaBands::default();
        let medians: Vec<f64> = [0.0, PI / 4.0, PI / 2.0, PI]
            .iter()
            .map(|&ph| {
                let mut v = etas(512, 150, &b, move |g, t, _| (2.0 * PI * 5.0 * t + ph).sin() + g.next());
                median(&mut v)
            })
            .collect();
        let (lo, hi) = medians.iter().fold((f64::MAX, f64::MIN), |(l, h), &m| (l.min(m), h.max(m)));
        assert!(hi / lo < 1.2, "medians {medians:?}");
        let avg = medians.iter().sum::<f64>() / 4.0;
        for m in &medians {
            assert!((m - avg).abs() / avg < 0.1, "{medians:?}");
        }
    }

    /// §15.2 test 15: out-of-band tones.
    #[test]
    fn t15_out_of_band_tones() {
        let b = EtaBands::default();
        let mut noise = etas(512, 150, &b, |g, _, _| g.next());
        let noise_median = median(&mut noise);
        let at = |f: f64, b: &EtaBands| {
            let mut v = etas(512, 150, b, tone(f, 1.0));
            median(&mut v)
        };
        let m75 = at(7.5, &b);
        assert!(m75 < 0.5, "7.5 Hz (in the denominator band): {m75}");
        let m15 = at(15.0, &b);
        assert!((m15 / noise_median - 1.0).abs() < 0.1, "15 Hz: {m15} vs noise {noise_median}");
        let m10 = at(10.0, &b);
        assert!((m10 / noise_median - 1.0).abs() < 0.2, "10 Hz: {m10} vs noise {noise_median}");
        // 6 Hz, the other pulsing frequency: unchanged with the authors' band, collapses with the
        // paper's literal (5.5, 9.5) band — why den_low_offset defaults to 1.5 Hz (spec A2).
        let m6 = at(6.0, &b);
        assert!((m6 / noise_median - 1.0).abs() < 0.15, "6 Hz: {m6} vs noise {noise_median}");
        let literal = EtaBands { den_low_offset_hz: 0.5, ..b };
        let m6_lit = at(6.0, &literal);
        assert!(m6_lit < 0.2, "6 Hz with the (5.5, 9.5] band: {m6_lit}");
        // So does Eq. 3 itself (`eta_form = "bin"`), whose band is (5.5, 9.5).
        let m6_bin = at(6.0, &paper_literal());
        assert!(m6_bin < 0.2, "6 Hz with Eq. 3: {m6_bin}");
    }

    /// §15.2 test 16: a pure ramp is not "elastic".
    #[test]
    fn t16_ramp() {
        let mut s = spectrum(512);
        for slope in [1.0, -3.0, 1e6] {
            let x: Vec<f64> = (0..512).map(|i| slope * i as f64).collect();
            let e = eta_of(&mut s, &x, &EtaBands::default());
            assert!((e - 1.43).abs() < 0.05, "slope {slope}: {e}");
        }
        // `eta_form = "bin"` as configured (its other fields at their defaults): Eq. 3 literally.
        let mut s = spectrum(500);
        let x: Vec<f64> = (0..500).map(|i| i as f64).collect();
        let e = eta_of(&mut s, &x, &paper_literal());
        assert!((e - 1.12).abs() < 0.05 && e < 2.0, "literal: {e}");
    }

    /// The bands of `eta_form = "bin"` with every other field at its default.
    fn paper_literal() -> EtaBands {
        EtaBands { form: EtaForm::Bin, ..EtaBands::default() }
    }

    /// The bin form is Eq. 3: the denominator is the open band (f_p + ε, 2f_p − ε) = (5.5, 9.5) Hz,
    /// whatever `den_low_offset_hz` says. With N = 500 (0.2 Hz bins) tones at 5, 5.6, 6.4 and 9.4 Hz
    /// sit exactly on bins 25, 28, 32 and 47, so each ratio is exact.
    #[test]
    fn bin_form_is_eq3_literally() {
        let mut s = spectrum(500);
        let lit = paper_literal();
        assert_eq!((lit.den_low_hz(5.0), lit.den_low_hz(6.0)), (5.5, 6.5));
        assert_eq!(EtaBands::default().den_low_hz(5.0), 6.5, "the band form keeps the authors' 1.5 Hz");
        let two_tones = |f_other: f64, amp: f64| -> Vec<f64> {
            (0..500)
                .map(|i| {
                    let t = i as f64 * DT;
                    (2.0 * PI * 5.0 * t).sin() + amp * (2.0 * PI * f_other * t).sin()
                })
                .collect()
        };
        for (f_other, amp) in [(5.6, 2.0), (6.4, 4.0), (9.4, 0.5)] {
            let e = eta_of(&mut s, &two_tones(f_other, amp), &lit);
            assert!((e - 1.0 / amp).abs() < 1e-9, "{f_other} Hz is inside (5.5, 9.5): η {e}, want {}", 1.0 / amp);
        }
        // Just below and just above the band: the denominator holds only rounding noise.
        for f_other in [5.4, 9.6] {
            let e = eta_of(&mut s, &two_tones(f_other, 4.0), &lit);
            assert_eq!(e, ETA_MAX, "{f_other} Hz is outside (5.5, 9.5)");
        }
    }

    /// §15.2 test 17: the paper-literal variant (N = 500, single bin, band (5.5, 9.5)).
    #[test]
    fn t17_paper_literal_variant() {
        let lit = paper_literal();
        let mut noise = etas(500, 300, &lit, |g, _, _| g.next());
        let m = median(&mut noise);
        assert!((0.3..=0.7).contains(&m), "noise median {m}");
        let mut t = etas(500, 200, &lit, tone(5.0, 1.0));
        let mt = median(&mut t);
        assert!((5.0..=7.5).contains(&mt), "tone median {mt}");
    }

    /// Two real series in one complex FFT separate exactly into their own spectra.
    #[test]
    fn pair_transform_separates_channels() {
        let mut g = Gauss::new(3);
        let a: Vec<f64> = (0..512).map(|i| 5.0 + (2.0 * PI * 5.0 * i as f64 * DT).sin() + g.next()).collect();
        let b: Vec<f64> = (0..512).map(|i| -2.0 + 3.0 * (2.0 * PI * 6.0 * i as f64 * DT).cos() + g.next()).collect();
        let mut pair = spectrum(512);
        pair.compute_pair(|i| a[i], |i| b[i]);
        let mut sa = spectrum(512);
        sa.compute_slice(&a);
        let mut sb = spectrum(512);
        sb.compute_slice(&b);
        for k in 0..256 {
            assert!((pair.magnitude_of(Channel::A, k) - sa.magnitude(k)).abs() < 1e-9, "A bin {k}");
            assert!((pair.magnitude_of(Channel::B, k) - sb.magnitude(k)).abs() < 1e-9, "B bin {k}");
        }
        let bands = EtaBands::default();
        assert!((pair.eta_parts_of(Channel::B, 6.0, &bands).0 - sb.eta_parts(6.0, &bands).0).abs() < 1e-9);
    }

    #[test]
    fn band_max_semantics_and_bins() {
        // N = 512: numerator bins 23..28 for 5 Hz, denominator 33..48; for 6 Hz 28..33 and 38..58.
        let s = spectrum(512);
        let bins = |lo: f64, hi: f64| {
            let first = (0..256).filter(|&k| k as f64 * s.bin_hz() <= lo).max().unwrap();
            let last = (0..256).filter(|&k| k as f64 * s.bin_hz() <= hi).max().unwrap();
            (first, last)
        };
        assert_eq!(bins(4.5, 5.5), (23, 28));
        assert_eq!(bins(6.5, 9.5), (33, 48));
        assert_eq!(bins(5.5, 6.5), (28, 33));
        assert_eq!(bins(7.5, 11.5), (38, 58));
        // The starting candidate (last bin ≤ lo) counts; the first bin above hi does not.
        let mut s = spectrum(512);
        s.compute(|i| (2.0 * PI * 23.0 * i as f64 / 512.0).cos());
        assert!((s.band_max(4.5, 5.5) - 256.0).abs() < 1e-9);
        s.compute(|i| (2.0 * PI * 29.0 * i as f64 / 512.0).cos());
        assert!(s.band_max(4.5, 5.5) < 1e-9);
        assert_eq!(safe_ratio(0.0, 0.0), 0.0);
        assert_eq!(safe_ratio(1.0, 0.0), ETA_MAX);
        assert_eq!(safe_ratio(f64::NAN, 1.0), 0.0);
    }

    /// Spans are the bins the definitions name: for the band form, the last bin with f_k ≤ lo
    /// and every bin with lo < f_k ≤ hi; for the open band, lo < f_k < hi; among k < n/2.
    #[test]
    fn spans_hold_the_bins_of_their_definitions() {
        let mut g = Gauss::new(5);
        for n in [500usize, 512, 256] {
            let bin_hz = 1.0 / (n as f64 * DT);
            let f = |k: usize| k as f64 * bin_hz;
            let set = |s: BinSpan| (0..n / 2).filter(|&k| s.contains(k)).collect::<Vec<_>>();
            for _ in 0..500 {
                let lo = 0.2 + 30.0 * g.uniform();
                // Including edges that fall exactly on bins.
                let (lo, hi) =
                    if g.uniform() < 0.2 { (f(lo as usize), f(lo as usize + 7)) } else { (lo, lo + 10.0 * g.uniform()) };
                let last_at_or_below = (0..n / 2).filter(|&k| f(k) <= lo).max().unwrap();
                let band: Vec<usize> = (0..n / 2).filter(|&k| k == last_at_or_below || (f(k) > lo && f(k) <= hi)).collect();
                assert_eq!(set(BinSpan::band(lo, hi, bin_hz, n)), band, "N {n}: ({lo}, {hi}]");
                let open: Vec<usize> = (0..n / 2).filter(|&k| f(k) > lo && f(k) < hi).collect();
                assert_eq!(set(BinSpan::open(lo, hi, bin_hz, n)), open, "N {n}: ({lo}, {hi})");
            }
        }
    }

    fn history_from(n: usize, f: impl Fn(usize) -> Sample) -> History {
        let mut h = History::new(10_000, 1024);
        for i in 0..n {
            h.advance(i as u64 * 10_000, &f(i));
        }
        h
    }

    #[test]
    fn detector_reads_the_newest_window_and_tail_means() {
        let plans = Plans::new(512, 256);
        for path in [SpectrumPath::Fft, SpectrumPath::Sliding] {
            let mut d = Detector::new(&plans, 0.01, false, path);
            let h = history_from(300, |_| Sample::default());
            assert!(d.pulser(&h, 5.0, &EtaBands::default(), (4.5, 6.5)).is_none(), "too short");
            let h = history_from(700, |i| {
                let t = i as f64 * 0.01;
                Sample {
                    z: 4e6 + 1e6 * (2.0 * PI * 5.0 * t).sin(),
                    zout: 3e6 + 2e6 * (2.0 * PI * 5.0 * t).cos(),
                    rtt_s: 0.06,
                    ..Sample::default()
                }
            });
            let m = d.pulser(&h, 5.0, &EtaBands::default(), (4.5, 6.5)).unwrap();
            // A pure tone between bins: the denominator holds only its leakage.
            assert!(m.eta > 10.0, "{path:?} {m:?}");
            assert!((m.y_fp / m.z_fp - 2.0).abs() < 0.05, "{path:?} {m:?}");
            assert!((m.avg_z - 4e6).abs() < 1e5 && (m.avg_rtt_s - 0.06).abs() < 1e-12);
            let w = d.watcher(&h, 6.0, 5.0, 0.5, (4.5, 6.5), (7.0, 15.0)).unwrap();
            assert!(w.y_other > 5.0 * w.y_current, "{path:?} {w:?}");
            assert!(w.y_pulse_band > 10.0 * w.y_high_band);
        }
    }

    #[test]
    fn aligned_window_reads_z_two_rtts_later() {
        let plans = Plans::new(512, 256);
        let mut d = Detector::new(&plans, 0.01, true, SpectrumPath::Sliding);
        assert_eq!(d.path(), SpectrumPath::Fft, "no sliding sum follows a per-sample shift");
        assert_eq!(aligned_span(512, 10_000), 611);
        assert_eq!(aligned_span(256, 10_000), 355);
        // z carries its index; with RTT = 50 ms, z[i] must be raw index i + 10.
        let h = history_from(800, |i| Sample { z: i as f64, zout: i as f64, rtt_s: 0.05, ..Sample::default() });
        assert_eq!(d.needed(512, 10_000), 612);
        assert!(d.stage(&h, 512));
        // The raw window is history indices 800 − 612 .. 799 (the newest excluded).
        assert_eq!(d.stage_y[0], 188.0);
        assert_eq!(d.stage_z[0], 198.0);
        assert_eq!(d.stage_z[511], 198.0 + 511.0);
        // An RTT so long the shifted index runs out: no evaluation.
        let h = history_from(800, |i| Sample { z: i as f64, rtt_s: 0.6, ..Sample::default() });
        assert!(!d.stage(&h, 512));
    }

    /// `window_gain`: the one-RTT moving average's |sinc|, floored.
    #[test]
    fn window_gain_is_the_rate_windows_sinc() {
        assert_eq!(window_gain(0.0, 0.1), 1.0);
        assert!((window_gain(5.0, 0.1) - 2.0 / PI).abs() < 1e-12);
        assert_eq!(window_gain(10.0, 0.1), WINDOW_GAIN_FLOOR, "a zero of the sinc is floored");
        assert!((window_gain(5.0, 0.02) - (0.1 * PI).sin() / (0.1 * PI)).abs() < 1e-12);
    }

    /// White noise through a 120 ms moving average (a one-RTT rate window at 100 ms RTT plus queue):
    /// the raw η is inflated — the denominator band (6.5–9.5 Hz) is attenuated more than 5 Hz — and
    /// the window-gain correction restores the noise-only η of the unfiltered case (t12). A 5 Hz
    /// tone through the same window is still elastic after the correction.
    #[test]
    fn whitening_undoes_the_rate_windows_tilt() {
        let (n, w) = (512, 12);
        let raw = EtaBands::default();
        let white = EtaBands { whiten: true, ..raw };
        let mut s = spectrum(n);
        let spans = |b: &EtaBands| PulserSpans::new(&PulserQuery { f_p: 5.0, bands: *b, pulse_band: (4.5, 6.5) }, s.bin_hz(), n);
        let (sr, sw) = (spans(&raw), spans(&white));
        let (mut e_raw, mut e_white, mut e_tone) = (vec![], vec![], vec![]);
        for seed in 0..200u64 {
            let mut g = Gauss::new(0x1818 + seed);
            let noise: Vec<f64> = (0..n + w).map(|_| g.next()).collect();
            let phase = 2.0 * PI * g.uniform();
            let avg = |x: &dyn Fn(usize) -> f64, i: usize| (i..i + w).map(x).sum::<f64>() / w as f64;
            let x: Vec<f64> = (0..n).map(|i| avg(&|j| noise[j], i)).collect();
            s.compute_slice(&x);
            e_raw.push(pulser_measurement(&s, &sr, 0.0, w as f64 * DT).eta);
            e_white.push(pulser_measurement(&s, &sw, 0.0, w as f64 * DT).eta);
            let y: Vec<f64> =
                (0..n).map(|i| avg(&|j| 1.5 * (2.0 * PI * 5.0 * j as f64 * DT + phase).sin() + noise[j], i)).collect();
            s.compute_slice(&y);
            e_tone.push(pulser_measurement(&s, &sw, 0.0, w as f64 * DT).eta);
        }
        let (m_raw, m_white, m_tone) = (median(&mut e_raw), median(&mut e_white), median(&mut e_tone));
        assert!(m_raw > 2.0, "raw median η of window-filtered noise {m_raw}");
        assert!((0.6..=1.3).contains(&m_white), "corrected median η {m_white}");
        assert!(m_tone > 3.0, "corrected median η of a tone {m_tone}");
    }
}
