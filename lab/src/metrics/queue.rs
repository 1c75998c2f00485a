//! The bottleneck queue's periodic samples as a histogram (the thesis's 10 ms `tc -s` samples),
//! and the empirical CDF of histograms pooled over runs.

use serde::Serialize;

use super::quantile_type7;

/// The bottleneck queue sampled every `interval_ms` over the run, as a histogram of packets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSamples {
    pub interval_ms: f64,
    pub samples: u64,
    pub mean_pkts: Option<f64>,
    /// Type-7 quantiles (the samples are whole packets).
    pub p50_pkts: Option<f64>,
    pub p99_pkts: Option<f64>,
    pub max_pkts: Option<u32>,
    /// histogram[q] = samples that found q packets queued.
    pub histogram: Vec<u64>,
}

impl QueueSamples {
    pub fn of(samples: &[u32], interval_ms: f64) -> QueueSamples {
        let max = samples.iter().copied().max();
        let mut histogram = vec![0u64; max.map_or(0, |m| m as usize + 1)];
        for &q in samples {
            histogram[q as usize] += 1;
        }
        let mut sorted: Vec<f64> = samples.iter().map(|&q| f64::from(q)).collect();
        sorted.sort_by(f64::total_cmp);
        QueueSamples {
            interval_ms,
            samples: samples.len() as u64,
            mean_pkts: (!samples.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64),
            p50_pkts: quantile_type7(&sorted, 0.5),
            p99_pkts: quantile_type7(&sorted, 0.99),
            max_pkts: max,
            histogram,
        }
    }
}

/// The empirical CDF of pooled queue histograms: (queue packets, fraction of samples ≤ it), one
/// point per value that occurred.
pub fn queue_ecdf<'a>(histograms: impl IntoIterator<Item = &'a [u64]>) -> Vec<(u32, f64)> {
    let mut pooled: Vec<u64> = Vec::new();
    for h in histograms {
        if pooled.len() < h.len() {
            pooled.resize(h.len(), 0);
        }
        for (p, c) in pooled.iter_mut().zip(h) {
            *p += c;
        }
    }
    let total: u64 = pooled.iter().sum();
    let mut cum = 0;
    let mut out = Vec::new();
    for (q, &c) in pooled.iter().enumerate() {
        if c > 0 {
            cum += c;
            out.push((q as u32, cum as f64 / total as f64));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_samples_and_ecdf() {
        let q = QueueSamples::of(&[0, 0, 3, 1, 3, 10], 10.0);
        assert_eq!((q.samples, q.max_pkts, q.p50_pkts), (6, Some(10), Some(2.0)));
        assert_eq!(q.histogram, vec![2, 1, 0, 2, 0, 0, 0, 0, 0, 0, 1]);
        assert!((q.mean_pkts.unwrap() - 17.0 / 6.0).abs() < 1e-12);
        let other = QueueSamples::of(&[1, 1], 10.0);
        let e = queue_ecdf([q.histogram.as_slice(), other.histogram.as_slice()]);
        assert_eq!(e, vec![(0, 0.25), (1, 0.625), (3, 0.875), (10, 1.0)]);
        assert!(queue_ecdf(std::iter::empty()).is_empty());
        assert_eq!(QueueSamples::of(&[], 10.0).max_pkts, None);
    }
}
