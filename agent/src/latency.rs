//! Latency histograms, µs: the eBPF datapath's report latency (from the ACK that closed a report,
//! the record's kernel timestamp, to the agent decoding it, both on CLOCK_MONOTONIC) and the CNM
//! path's (a datagram read to its flow's decision applied; a congestion point's sample to the read).

/// Microsecond buckets up to `FINE_US`, millisecond buckets up to a second, then one overflow.
const FINE_US: u64 = 2_000;
const COARSE_MS: u64 = 1_000;

#[derive(Debug, Clone)]
pub struct Histogram {
    fine: Vec<u64>,
    coarse: Vec<u64>,
    over: u64,
    count: u64,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { fine: vec![0; FINE_US as usize], coarse: vec![0; COARSE_MS as usize], over: 0, count: 0, max_us: 0 }
    }
}

/// Percentiles of a histogram, µs (upper bounds of their buckets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        self.count += 1;
        self.max_us = self.max_us.max(us);
        if us < FINE_US {
            self.fine[us as usize] += 1;
        } else if us / 1000 < COARSE_MS {
            self.coarse[(us / 1000) as usize] += 1;
        } else {
            self.over += 1;
        }
    }

    /// The smallest bucket bound at or below which a fraction `q` of the samples lie.
    fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let want = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, n) in self.fine.iter().enumerate() {
            seen += n;
            if seen >= want {
                return us as u64;
            }
        }
        for (ms, n) in self.coarse.iter().enumerate() {
            seen += n;
            if seen >= want {
                return (ms as u64 + 1) * 1000;
            }
        }
        self.max_us
    }

    pub fn summary(&self) -> Summary {
        Summary { count: self.count, p50_us: self.quantile(0.5), p99_us: self.quantile(0.99), max_us: self.max_us }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut h = Histogram::default();
        assert_eq!(h.summary(), Summary::default());
        for us in 1..=100 {
            h.record(us);
        }
        let s = h.summary();
        assert_eq!((s.count, s.p50_us, s.p99_us, s.max_us), (100, 50, 99, 100));
        h.record(5_500);
        h.record(3_000_000);
        assert_eq!(h.summary().max_us, 3_000_000);
        let mut slow = Histogram::default();
        for _ in 0..10 {
            slow.record(5_500);
        }
        assert_eq!(slow.summary().p99_us, 6_000);
    }
}
