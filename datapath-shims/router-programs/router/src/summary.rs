//! Statistics the router keeps per direction and the summary it writes at exit, as text (stderr)
//! and JSON (`--summary-json`).
//!
//! Definitions (the same as mahimahi's `mm-throughput-graph` where it has one):
//! * throughput: IP bytes delivered (written to the far TUN device) over the run;
//! * capacity: bytes the link could have carried (rate × time, or the trace's opportunities);
//! * utilisation: delivered / capacity;
//! * queueing delay: time from arrival to the start of transmission (excludes serialisation and
//!   propagation);
//! * delay error: how late a packet was actually written compared with its exact scheduled time
//!   (finish on the link + propagation delay): what the emulator adds beyond what it should.

use serde::Serialize;

use ccp_qdisc::{Nanos, NANOS_PER_SEC};

/// Per-direction counters and samples.
#[derive(Debug, Default)]
pub struct DirectionStats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_buffer: u64,
    pub dropped_aqm: u64,
    pub dropped_write: u64,
    /// Packets the discipline set to CE.
    pub marked_ce: u64,
    /// Packets an ABC router turned from ECT(1) into ECT(0) (full-mode brake).
    pub marked_brake: u64,
    pub notifications: u64,
    pub opportunities: u64,
    /// Queueing delay of delivered packets, µs.
    pub queue_delay_us: Histogram,
    /// Lateness of the actual write of delivered packets, µs.
    pub delay_error_us: Histogram,
}

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

    /// Nearest-rank percentile (0 < p ≤ 1) in µs.
    fn percentile(&self, p: f64) -> u64 {
        let rank = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
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

/// Percentiles of a set of samples, milliseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
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
        Some(Percentiles {
            count: h.count,
            mean: h.sum as f64 / h.count as f64 / 1000.0,
            p50: ms(h.percentile(0.50)),
            p95: ms(h.percentile(0.95)),
            p99: ms(h.percentile(0.99)),
            max: ms(h.max),
        })
    }
}

/// The summary of one direction.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectionSummary {
    pub link: String,
    pub qdisc: String,
    pub delay_ms: f64,
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_buffer: u64,
    pub dropped_aqm: u64,
    pub dropped_write: u64,
    pub marked_ce: u64,
    pub marked_brake: u64,
    pub qcn_notifications: u64,
    pub throughput_mbps: f64,
    /// `None` for an unlimited link.
    pub capacity_mbps: Option<f64>,
    pub utilisation: Option<f64>,
    pub queue_delay_ms: Option<Percentiles>,
    pub delay_error_ms: Option<Percentiles>,
}

/// What the router writes at exit.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub duration_s: f64,
    /// Sender → receiver.
    pub down: DirectionSummary,
    /// Receiver → sender.
    pub up: DirectionSummary,
}

/// Everything needed to summarise one direction besides its counters.
pub struct DirectionInfo {
    pub link: String,
    pub qdisc: String,
    pub delay: Nanos,
    pub capacity_bytes: Option<f64>,
}

impl DirectionStats {
    pub fn summarise(&self, info: DirectionInfo, duration: Nanos) -> DirectionSummary {
        let secs = (duration as f64 / NANOS_PER_SEC as f64).max(1e-9);
        let mbps = |bytes: f64| bytes * 8.0 / secs / 1e6;
        DirectionSummary {
            link: info.link,
            qdisc: info.qdisc,
            delay_ms: info.delay as f64 / 1e6,
            packets_in: self.packets_in,
            bytes_in: self.bytes_in,
            packets_out: self.packets_out,
            bytes_out: self.bytes_out,
            dropped_buffer: self.dropped_buffer,
            dropped_aqm: self.dropped_aqm,
            dropped_write: self.dropped_write,
            marked_ce: self.marked_ce,
            marked_brake: self.marked_brake,
            qcn_notifications: self.notifications,
            throughput_mbps: mbps(self.bytes_out as f64),
            capacity_mbps: info.capacity_bytes.map(mbps),
            utilisation: info.capacity_bytes.filter(|&c| c > 0.0).map(|c| self.bytes_out as f64 / c),
            queue_delay_ms: Percentiles::of_us(&self.queue_delay_us),
            delay_error_ms: Percentiles::of_us(&self.delay_error_us),
        }
    }
}

impl Summary {
    /// A human-readable rendering for stderr.
    pub fn to_text(&self) -> String {
        let mut s = format!("ccp-router summary over {:.2} s\n", self.duration_s);
        for (name, d) in [("down (sender → receiver)", &self.down), ("up (receiver → sender)", &self.up)] {
            s += &format!("  {name}: link {}, qdisc {}, delay {:.1} ms\n", d.link, d.qdisc, d.delay_ms);
            s += &format!(
                "    packets in {} / out {}; dropped: buffer {}, aqm {}, write {}; marked: CE {}, brake {}; QCN notifications {}\n",
                d.packets_in,
                d.packets_out,
                d.dropped_buffer,
                d.dropped_aqm,
                d.dropped_write,
                d.marked_ce,
                d.marked_brake,
                d.qcn_notifications
            );
            s += &format!("    throughput {:.3} Mbit/s", d.throughput_mbps);
            if let (Some(c), Some(u)) = (d.capacity_mbps, d.utilisation) {
                s += &format!(", capacity {c:.3} Mbit/s, utilisation {:.1} %", u * 100.0);
            }
            s += "\n";
            for (what, p) in [("queueing delay", &d.queue_delay_ms), ("delay error", &d.delay_error_ms)] {
                if let Some(p) = p {
                    s += &format!(
                        "    {what} ms: mean {:.3}, p50 {:.3}, p95 {:.3}, p99 {:.3}, max {:.3}\n",
                        p.mean, p.p50, p.p95, p.p99, p.max
                    );
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
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
    fn utilisation_and_text() {
        let st = DirectionStats { bytes_out: 1_000_000, packets_out: 700, ..DirectionStats::default() };
        let info = DirectionInfo { link: "fixed 8 Mbit/s".into(), qdisc: "droptail".into(), delay: 0, capacity_bytes: Some(2e6) };
        let d = st.summarise(info, 2 * NANOS_PER_SEC);
        assert_eq!(d.throughput_mbps, 4.0);
        assert_eq!(d.capacity_mbps, Some(8.0));
        assert_eq!(d.utilisation, Some(0.5));
        let s = Summary { duration_s: 2.0, down: d.clone(), up: d };
        assert!(s.to_text().contains("utilisation 50.0 %"));
        assert!(serde_json::to_string(&s).unwrap().contains("\"throughput_mbps\":4.0"));
    }
}
