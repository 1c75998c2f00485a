//! Nearest-rank percentiles of delays, in ms: from the router's bounded µs [`Histogram`] (runs of
//! any length) or from an exact set of ns samples (`ccp-lab`'s per-packet log), so the router's
//! summary and the experiment metrics report delays in one shape and by one rank rule.

use serde::Serialize;

/// Exact below this many µs; above, each power of two is split into half this many buckets
/// (relative error under 1/512).
const HISTOGRAM_LINEAR: u64 = 1024;
/// log2 of [`HISTOGRAM_LINEAR`].
const HISTOGRAM_LINEAR_BITS: u32 = 10;

/// A log-linear histogram of µs values: bounded memory (< 29k counters covering all of u64) for
/// runs of any length, percentiles exact to 1 µs below 1 ms and within 0.2 % above.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

impl Histogram {
    fn bucket(v: u64) -> usize {
        if v < HISTOGRAM_LINEAR {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // ≥ HISTOGRAM_LINEAR_BITS
        let shift = exp - HISTOGRAM_LINEAR_BITS + 1;
        let mantissa = (v >> shift) - HISTOGRAM_LINEAR / 2; // 0..512
        (HISTOGRAM_LINEAR + u64::from(shift - 1) * HISTOGRAM_LINEAR / 2 + mantissa) as usize
    }

    /// The smallest value in bucket `b` (what a percentile reports).
    fn value(b: usize) -> u64 {
        let b = b as u64;
        if b < HISTOGRAM_LINEAR {
            return b;
        }
        let shift = (b - HISTOGRAM_LINEAR) / (HISTOGRAM_LINEAR / 2) + 1;
        let mantissa = (b - HISTOGRAM_LINEAR) % (HISTOGRAM_LINEAR / 2) + HISTOGRAM_LINEAR / 2;
        mantissa << shift
    }

    pub fn record(&mut self, v: u64) {
        let b = Histogram::bucket(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// The `rank`-th smallest value (1-based), µs, to the histogram's precision.
    fn at_rank(&self, rank: u64) -> u64 {
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Histogram::value(b).min(self.max);
            }
        }
        self.max
    }
}

/// Percentiles of a set of delays, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Percentiles of a µs histogram, in ms; `None` when it is empty.
    pub fn of_us(h: &Histogram) -> Option<Percentiles> {
        if h.count == 0 {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        let mean = h.sum as f64 / h.count as f64 / 1000.0;
        Some(Percentiles::nearest_rank(h.count, mean, ms(h.max), |rank| ms(h.at_rank(rank))))
    }

    /// Nearest-rank percentiles of ns values (sorted in place), in ms. `None` when empty.
    pub fn of_ns(v: &mut [u64]) -> Option<Percentiles> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let ms = |ns: u64| ns as f64 / 1e6;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64 / 1e6;
        Some(Percentiles::nearest_rank(n as u64, mean, ms(v[n - 1]), |rank| ms(v[rank as usize - 1])))
    }

    /// `count` (> 0) samples whose `rank`-th smallest (1-based) is `at_rank(rank)`, ms.
    fn nearest_rank(count: u64, mean: f64, max: f64, at_rank: impl Fn(u64) -> f64) -> Percentiles {
        let at = |p: f64| at_rank(((p * count as f64).ceil() as u64).clamp(1, count));
        Percentiles { count, mean, p50: at(0.50), p95: at(0.95), p99: at(0.99), max }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles_are_nearest_rank() {
        let mut h = Histogram::default();
        for x in 1..=100u64 {
            h.record(x * 10);
        }
        let p = Percentiles::of_us(&h).unwrap();
        assert_eq!((p.p50, p.p95, p.p99, p.max), (0.5, 0.95, 0.99, 1.0));
        assert!((p.mean - 0.505).abs() < 1e-9);
        assert!(Percentiles::of_us(&Histogram::default()).is_none());
    }

    #[test]
    fn histogram_buckets_are_tight_and_monotone() {
        let mut last = 0;
        for v in (0..5_000_000u64).step_by(7).chain([u64::MAX / 2, u64::MAX]) {
            let b = Histogram::bucket(v);
            assert!(b >= last);
            last = b;
            let lo = Histogram::value(b);
            assert!(lo <= v, "{v} in bucket starting at {lo}");
            assert!((v - lo) as f64 <= v as f64 / 500.0, "{v} vs {lo}");
        }
        assert!(Histogram::bucket(u64::MAX) < 60_000);
        let mut h = Histogram::default();
        for _ in 0..99 {
            h.record(10_000);
        }
        h.record(2_000_000);
        let p = Percentiles::of_us(&h).unwrap();
        assert!((p.p50 - 10.0).abs() < 0.01 && (p.max - 2000.0).abs() < 1e-9);
    }

    #[test]
    fn sample_percentiles_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).map(|x| x * 1_000_000).collect();
        let p = Percentiles::of_ns(&mut v).unwrap();
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
        assert!((p.mean - 50.5).abs() < 1e-9);
        assert!(Percentiles::of_ns(&mut []).is_none());
        let mut one = [7_000_000];
        assert_eq!(Percentiles::of_ns(&mut one).unwrap().p95, 7.0);
    }
}
