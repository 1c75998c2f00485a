//! Seeded random streams, one per purpose.
//!
//! Every consumer of randomness (flow sizes, arrival times, endpoint choice, incast senders, each
//! QCN congestion point, ECMP salt) gets its own stream derived from the scenario seed and a fixed
//! purpose label. Adding a consumer, or a consumer drawing more numbers, then never shifts what
//! the others draw, so a result changes only when its own inputs change.

use ccp_qdisc::rng::{Draw, Rng as _, SeedableRng, SplitMix64};

/// The purposes that draw random numbers. The discriminant is mixed into the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    FlowSize = 1,
    Arrival = 2,
    Endpoints = 3,
    Incast = 4,
    /// Base of the per-switch-queue discipline streams (QCN sampling, RED marking; the port and
    /// queue ids are added). Named for its first user: renaming it would not change a draw.
    Qcn = 5,
    Ecmp = 6,
    /// Base of the per-port random-loss streams (`switch.loss_pct`; the port id is added).
    RandomLoss = 7,
    /// Per-host streams of HULL's pacer (its association draws; the host index is added).
    Pacer = 8,
}

/// A deterministic generator with the distributions the workloads need.
#[derive(Debug, Clone)]
pub struct Rng {
    inner: SplitMix64,
}

impl Rng {
    /// The stream for `purpose` (with an index, e.g. a port id) under `seed`.
    pub fn stream(seed: u64, purpose: Stream, index: u64) -> Rng {
        // Decorrelate nearby seeds and purposes by running the mix once over a combined word.
        let mut mix = SplitMix64::seed_from_u64(seed ^ ((purpose as u64) << 56) ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Rng { inner: SplitMix64::seed_from_u64(mix.next_u64()) }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.inner.next_f64()
    }

    /// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the bias is < n/2⁶⁴).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Exponential with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        self.inner.exponential(mean)
    }

    /// Standard normal (Box–Muller; one of the pair is discarded to keep the stream stateless).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with shape `sigma` and the given mean (location μ = ln(mean) − σ²/2).
    pub fn lognormal(&mut self, mean: f64, sigma: f64) -> f64 {
        let mu = mean.ln() - sigma * sigma / 2.0;
        (mu + sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(n: usize, mut f: impl FnMut() -> f64) -> f64 {
        (0..n).map(|_| f()).sum::<f64>() / n as f64
    }

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(1, Stream::FlowSize, 0).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::stream(1, Stream::FlowSize, 0).next_u64(), Rng::stream(1, Stream::Arrival, 0).next_u64());
        assert_ne!(Rng::stream(1, Stream::Qcn, 0).next_u64(), Rng::stream(1, Stream::Qcn, 1).next_u64());
        assert_ne!(Rng::stream(1, Stream::FlowSize, 0).next_u64(), Rng::stream(2, Stream::FlowSize, 0).next_u64());
    }

    #[test]
    fn distribution_means() {
        let mut r = Rng::stream(7, Stream::Arrival, 0);
        assert!((mean_of(200_000, || r.exponential(3.0)) - 3.0).abs() < 0.05);
        // σ = 2 is heavy-tailed; a million samples put the mean within a few percent.
        let m = mean_of(1_000_000, || r.lognormal(5.0, 2.0));
        assert!((m - 5.0).abs() < 0.5, "{m}");
        let m = mean_of(200_000, || r.normal());
        assert!(m.abs() < 0.01);
        assert!((0..10_000).all(|_| r.below(7) < 7));
    }
}
