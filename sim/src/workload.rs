//! Workloads: flow-size CDFs, open-loop arrivals at a target load, incast bursts, explicit flows.
//!
//! Everything is generated up front from its own seeded stream (sizes, arrival times, endpoints
//! and incast choices never share a stream), then handed to the simulator as flow-start events.

use std::path::Path;

use crate::config::{Arrivals, FlowConfig, IncastConfig, RandomConfig};
use crate::rng::{Rng, Stream};
use crate::time::{from_us, Time, PS_PER_MS, PS_PER_SEC};

/// Where a flow came from, for per-class statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowClass {
    /// Declared in `workload.flows`.
    Explicit,
    /// Drawn from the size CDF at the target load.
    Random,
    /// Part of an incast burst.
    Incast,
}

impl FlowClass {
    pub fn name(self) -> &'static str {
        match self {
            FlowClass::Explicit => "explicit",
            FlowClass::Random => "random",
            FlowClass::Incast => "incast",
        }
    }
}

/// A flow to simulate: endpoints are host indices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    /// Bytes to send; `None` = unbounded.
    pub bytes: Option<u64>,
    pub start: Time,
    pub class: FlowClass,
    /// For an explicit flow, the index of its `[[workload.flows]]` entry, for a random one its
    /// class's (its label and congestion-control override); `None` for incast flows.
    pub entry: Option<u32>,
    /// Transfers still to follow this one back to back (`workload.flows[].transfers` − 1 for the
    /// first): the next starts, as a new flow, when this one's last byte is acknowledged.
    pub then: u32,
    /// The flow's RTO floor instead of `[transport]`'s (its class's `rto_min_us`).
    pub rto_min: Option<Time>,
    /// The switch queue its packets join under strict priority (its entry's `priority`).
    pub priority: u8,
}

/// A piecewise-linear flow-size CDF.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeCdf {
    /// (size bytes, cumulative probability in [0, 1]), sizes non-decreasing, probabilities
    /// non-decreasing, last probability 1.
    points: Vec<(f64, f64)>,
}

impl SizeCdf {
    /// Reads a CDF file: one "size_bytes cumulative_probability" pair per line, probabilities in
    /// percent (when the last exceeds 1) or as fractions. Points are sorted by size, and a point
    /// whose probability is below that of a smaller size is dropped: that is the "101 0.0" marker
    /// line of the BFC files (shared/workloads/README.md), out of order in w4.
    pub fn load(path: &Path) -> Result<SizeCdf, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<SizeCdf, String> {
        let mut raw = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut it = line.split_whitespace();
            let parse = |s: Option<&str>| s.and_then(|s| s.parse::<f64>().ok());
            match (parse(it.next()), parse(it.next())) {
                (Some(size), Some(p)) if size >= 0.0 && p >= 0.0 => raw.push((size, p)),
                _ => return Err(format!("line {}: expected \"size_bytes cumulative_probability\"", i + 1)),
            }
        }
        let max_p = raw.iter().map(|p| p.1).fold(0.0, f64::max);
        if raw.len() < 2 || max_p <= 0.0 {
            return Err("a CDF needs at least two points and a positive probability".into());
        }
        let scale = if max_p > 1.0 { 100.0 } else { 1.0 };
        raw.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut points: Vec<(f64, f64)> = Vec::with_capacity(raw.len());
        for (size, p) in raw {
            let p = p / scale;
            if points.last().is_some_and(|&(_, last)| p < last) {
                continue;
            }
            points.push((size, p));
        }
        let last = points.last().map_or(0.0, |p| p.1);
        if (last - 1.0).abs() > 1e-6 {
            return Err(format!("the CDF ends at {last}, not 1"));
        }
        Ok(SizeCdf { points })
    }

    /// Mean flow size, bytes, integrating the piecewise-linear CDF.
    pub fn mean(&self) -> f64 {
        self.points.windows(2).map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0).sum::<f64>()
            + self.points[0].0 * self.points[0].1
    }

    /// Inverse-CDF sample with linear interpolation, at least 1 byte.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.uniform();
        let i = self.points.partition_point(|p| p.1 < u);
        let size = if i == 0 {
            self.points[0].0
        } else if i >= self.points.len() {
            self.points[self.points.len() - 1].0
        } else {
            let (s0, p0) = self.points[i - 1];
            let (s1, p1) = self.points[i];
            if p1 > p0 {
                s0 + (s1 - s0) * (u - p0) / (p1 - p0)
            } else {
                s1
            }
        };
        (size.round() as u64).max(1)
    }
}

/// Explicit flows, each repeated `count` times.
pub fn explicit(flows: &[FlowConfig]) -> Vec<FlowSpec> {
    flows
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            std::iter::repeat_n(
                FlowSpec {
                    src: f.src,
                    dst: f.dst,
                    bytes: f.bytes,
                    start: from_us(f.start_us),
                    class: FlowClass::Explicit,
                    entry: Some(i as u32),
                    then: f.transfers.saturating_sub(1),
                    rto_min: None,
                    priority: f.priority,
                },
                f.count as usize,
            )
        })
        .collect()
}

/// How random flows pick their endpoints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pairs {
    /// Any two distinct hosts of `n`.
    Any { hosts: u32 },
    /// A sender in [0, senders) to a receiver in [senders, senders + receivers) (dumbbell).
    LeftToRight { senders: u32, receivers: u32 },
    /// One end among the datacenter's hosts [0, dc_hosts), the other among the external hosts
    /// after them, either way round with even odds.
    Wan { dc_hosts: u32, external_hosts: u32 },
    /// Any two distinct hosts of [first, first + hosts).
    External { first: u32, hosts: u32 },
    /// Any other host of `hosts` to `receiver`.
    Into { hosts: u32, receiver: u32 },
}

impl Pairs {
    fn draw(self, rng: &mut Rng) -> (u32, u32) {
        match self {
            Pairs::Any { hosts } => {
                let src = rng.below(u64::from(hosts)) as u32;
                let mut dst = rng.below(u64::from(hosts - 1)) as u32;
                if dst >= src {
                    dst += 1;
                }
                (src, dst)
            }
            Pairs::LeftToRight { senders, receivers } => {
                (rng.below(u64::from(senders)) as u32, senders + rng.below(u64::from(receivers)) as u32)
            }
            Pairs::Wan { dc_hosts, external_hosts } => {
                let dc = rng.below(u64::from(dc_hosts)) as u32;
                let external = dc_hosts + rng.below(u64::from(external_hosts)) as u32;
                if rng.below(2) == 0 {
                    (dc, external)
                } else {
                    (external, dc)
                }
            }
            Pairs::External { first, hosts } => {
                let (src, dst) = Pairs::Any { hosts }.draw(rng);
                (first + src, first + dst)
            }
            Pairs::Into { hosts, receiver } => {
                let mut src = rng.below(u64::from(hosts - 1)) as u32;
                if src >= receiver {
                    src += 1;
                }
                (src, receiver)
            }
        }
    }
}

/// Open-loop flows of random class `class` at `load` × `reference_bps`: λ = load·C / (8·mean
/// size) flows per second, in order of start. An iterator, so that a run of millions of flows
/// never holds their specifications twice.
pub fn random<'a>(
    cfg: &'a RandomConfig,
    class: u32,
    cdf: &'a SizeCdf,
    reference_bps: f64,
    pairs: Pairs,
    seed: u64,
    end: Time,
) -> impl Iterator<Item = FlowSpec> + 'a {
    let mut sizes = Rng::stream(seed, Stream::FlowSize, u64::from(class));
    let mut gaps = Rng::stream(seed, Stream::Arrival, u64::from(class));
    let mut ends = Rng::stream(seed, Stream::Endpoints, u64::from(class));
    let rto_min = cfg.rto_min_us.map(from_us);
    let rate = cfg.load * reference_bps / (8.0 * cdf.mean());
    let mean_gap_s = 1.0 / rate;
    let stop = cfg.stop_ms.map_or(end, |ms| (ms * PS_PER_MS as f64) as Time).min(end);
    let max = cfg.max_flows.unwrap_or(u64::MAX);
    let mut t = cfg.start_ms * PS_PER_MS as f64;
    let mut made = 0;
    std::iter::from_fn(move || {
        let gap = match cfg.arrivals {
            Arrivals::Poisson => gaps.exponential(mean_gap_s),
            Arrivals::Lognormal => gaps.lognormal(mean_gap_s, cfg.sigma),
        };
        t += gap * PS_PER_SEC as f64;
        if t >= stop as f64 || made >= max {
            return None;
        }
        made += 1;
        let (src, dst) = pairs.draw(&mut ends);
        Some(FlowSpec {
            src,
            dst,
            bytes: Some(cdf.sample(&mut sizes)),
            start: t as Time,
            class: FlowClass::Random,
            entry: Some(class),
            then: 0,
            rto_min,
            priority: cfg.priority,
        })
    })
    .fuse()
}

/// Incast bursts: every interval, `degree` distinct senders to one receiver, total bytes split
/// evenly (the remainder to the first senders).
pub fn incast(cfg: &IncastConfig, hosts: u32, seed: u64, end: Time) -> Vec<FlowSpec> {
    let mut rng = Rng::stream(seed, Stream::Incast, 0);
    let stop = cfg.stop_us.map_or(end, from_us).min(end);
    let interval = from_us(cfg.interval_us).max(1);
    let mut t = from_us(cfg.start_us);
    let mut out = Vec::new();
    let mut bursts = 0;
    let per = cfg.total_bytes / u64::from(cfg.degree);
    let extra = cfg.total_bytes % u64::from(cfg.degree);
    let mut candidates: Vec<u32> = Vec::with_capacity(hosts as usize);
    while t < stop && cfg.bursts.is_none_or(|b| bursts < b) {
        let receiver = cfg.receiver.unwrap_or_else(|| rng.below(u64::from(hosts)) as u32);
        candidates.clear();
        candidates.extend((0..hosts).filter(|&h| h != receiver));
        // Partial Fisher–Yates: the first `degree` entries become a uniform random subset.
        for i in 0..cfg.degree as usize {
            let j = i + rng.below((candidates.len() - i) as u64) as usize;
            candidates.swap(i, j);
        }
        for (i, &src) in candidates[..cfg.degree as usize].iter().enumerate() {
            let bytes = per + u64::from((i as u64) < extra);
            out.push(FlowSpec {
                src,
                dst: receiver,
                bytes: Some(bytes),
                start: t,
                class: FlowClass::Incast,
                entry: None,
                then: 0,
                rto_min: None,
                priority: 0,
            });
        }
        bursts += 1;
        t += interval;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/workloads").join(name)
    }

    #[test]
    fn percent_and_fraction_cdfs_and_the_bfc_marker() {
        let pct = SizeCdf::parse("0 0\n100 50\n300 100\n").unwrap();
        assert_eq!(pct.points, vec![(0.0, 0.0), (100.0, 0.5), (300.0, 1.0)]);
        assert!((pct.mean() - (0.5 * 50.0 + 0.5 * 200.0)).abs() < 1e-9);
        // The w4 marker: "101 0.0" out of order is dropped.
        let w4 = SizeCdf::parse("0 0.0\n101 0.0\n56 0.5\n1000 1.0\n").unwrap();
        assert_eq!(w4.points, vec![(0.0, 0.0), (56.0, 0.5), (1000.0, 1.0)]);
        assert!(SizeCdf::parse("0 0\n10 0.5\n").is_err());
        assert!(SizeCdf::parse("x y\n").is_err());
    }

    #[test]
    fn samples_follow_the_cdf() {
        let cdf = SizeCdf::parse("0 0\n1000 0.5\n2000 1\n").unwrap();
        let mut rng = Rng::stream(3, Stream::FlowSize, 0);
        let n = 100_000;
        let xs: Vec<u64> = (0..n).map(|_| cdf.sample(&mut rng)).collect();
        let below = xs.iter().filter(|&&x| x <= 1000).count() as f64 / n as f64;
        assert!((below - 0.5).abs() < 0.01, "{below}");
        let mean = xs.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean - cdf.mean()).abs() / cdf.mean() < 0.01);
    }

    #[test]
    fn shared_workloads_load() {
        for (name, lo, hi) in [
            ("websearch_dctcp.cdf", 1.0e6, 2.0e6),
            ("fb_hadoop_hpcc.cdf", 1.0e5, 1.0e6),
            ("google_rpc_bfc_W3.cdf", 1.0e3, 1.0e5),
            ("fb_hadoop_bfc_w4.cdf", 1.0e5, 1.0e6),
        ] {
            let path = shared(name);
            if !path.exists() {
                eprintln!("skipping {name}: shared/ is not beside the repository");
                continue;
            }
            let m = SizeCdf::load(&path).unwrap().mean();
            assert!(m > lo && m < hi, "{name}: mean {m}");
        }
    }

    #[test]
    fn a_fixed_receiver_hears_from_every_other_host_and_never_itself() {
        let mut rng = Rng::stream(1, Stream::Endpoints, 0);
        let mut from = [0u32; 10];
        for _ in 0..9000 {
            let (src, dst) = Pairs::Into { hosts: 10, receiver: 4 }.draw(&mut rng);
            assert_eq!(dst, 4);
            from[src as usize] += 1;
        }
        assert_eq!(from[4], 0, "no flow from the receiver to itself");
        assert!(from.iter().enumerate().filter(|(h, _)| *h != 4).all(|(_, n)| (850..1150).contains(n)), "uniform: {from:?}");
    }

    #[test]
    fn arrivals_hit_the_target_load() {
        let cdf = SizeCdf::parse("0 0\n10000 1\n").unwrap();
        for arrivals in [Arrivals::Poisson, Arrivals::Lognormal] {
            let cfg = RandomConfig {
                cdf: "x".into(),
                load: 0.5,
                arrivals,
                sigma: 1.0,
                start_ms: 0.0,
                stop_ms: None,
                max_flows: None,
                cc: None,
                pairs: None,
                receiver: None,
                label: None,
                rto_min_us: None,
                priority: 0,
            };
            let end = 2 * PS_PER_SEC;
            let flows: Vec<FlowSpec> = random(&cfg, 0, &cdf, 1e10, Pairs::Any { hosts: 8 }, 1, end).collect();
            let bytes: u64 = flows.iter().map(|f| f.bytes.unwrap()).sum();
            let load = bytes as f64 * 8.0 / 2.0 / 1e10;
            assert!((load - 0.5).abs() < 0.03, "{arrivals:?}: {load}");
            assert!(flows.iter().all(|f| f.src != f.dst && f.src < 8 && f.dst < 8));
        }
    }

    #[test]
    fn incast_bursts() {
        let cfg = IncastConfig {
            degree: 5,
            total_bytes: 1003,
            interval_us: 100.0,
            start_us: 0.0,
            stop_us: Some(350.0),
            receiver: None,
            bursts: None,
            cc: None,
        };
        let flows = incast(&cfg, 10, 1, PS_PER_SEC);
        assert_eq!(flows.len(), 20);
        for burst in flows.chunks(5) {
            let dst = burst[0].dst;
            let mut srcs: Vec<u32> = burst.iter().map(|f| f.src).collect();
            srcs.sort();
            srcs.dedup();
            assert_eq!(srcs.len(), 5);
            assert!(burst.iter().all(|f| f.dst == dst && f.src != dst));
            assert_eq!(burst.iter().map(|f| f.bytes.unwrap()).sum::<u64>(), 1003);
        }
    }
}
