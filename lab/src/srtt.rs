//! Per-ACK smoothed RTT of a run's flows, from the kernel, for every scheme (kernel congestion
//! controls too): the BPF program `src/bpf/srtt_hist.bpf.c` on the `tcp:tcp_probe` tracepoint
//! (tp_btf), which fires for every segment an established socket receives — on a bulk sender,
//! every ACK — and adds the socket's SRTT (`srtt_us >> 3`, what tcp_probe reports) to an in-kernel
//! histogram of [`BIN_US`] bins up to 1 s plus an overflow bin. It counts only sockets of the
//! run's sender namespace (by its cookie) whose destination port is one of the scheme's flows, so
//! cross traffic, the receiver's sockets and other runners' flows are left out.
//!
//! This is the sample set of the Inigo thesis's latency index (specs/inigo.md §9.2: the p99 of
//! all tcp_probe SRTT samples of the flows to the server, pooled), not 100 ms TCP_INFO polling,
//! which would see one ACK in thousands.
//!
//! Quantiles ([`SrttHistogram::quantile`]) are R's type 7 over the order statistics, where the
//! c samples of a bin [lo, lo + w) stand at lo + w·(j + ½)/c, j = 0…c−1 (spread evenly over the
//! bin): the result lies in the bin that holds the true order statistic, so it is exact to the bin
//! (10 µs), and equal to the type-7 quantile of the samples when those sit at the bin centres.
//!
//! Nothing is pinned: the program stays attached only while [`SrttProbe`] holds the link (drop
//! detaches it), and the kernel detaches it if ccp-lab dies, so no exit path leaks it.

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder};
use serde::Serialize;

use crate::error::{Error, Result};

/// The compiled object (build.rs).
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/srtt_hist.bpf.o"));
/// Histogram bin width, µs (`SRTT_BIN_US` in the BPF source).
pub const BIN_US: u32 = 10;
/// Bins below the overflow bin (`SRTT_BINS`): 10 µs × 100 000 = 1 s.
pub const BINS: usize = 100_000;
/// `SO_NETNS_COOKIE` (<asm-generic/socket.h>, Linux 5.14).
const SO_NETNS_COOKIE: libc::c_int = 71;

/// The per-ACK SRTT samples of a run, as bin counts.
#[derive(Debug, Clone, PartialEq)]
pub struct SrttHistogram {
    pub bin_us: u32,
    /// `BINS` bins of `bin_us` from 0, then the overflow bin (≥ `BINS · bin_us`).
    pub bins: Vec<u64>,
    /// Largest sample, µs (bounds the overflow bin).
    pub max_us: u64,
    /// Sum of the samples, µs.
    pub sum_us: u64,
}

impl SrttHistogram {
    /// A histogram of µs samples (for tests and offline use).
    pub fn of_samples(samples: &[u64], bin_us: u32, bins: usize) -> SrttHistogram {
        let mut h = SrttHistogram { bin_us, bins: vec![0; bins + 1], max_us: 0, sum_us: 0 };
        for &s in samples {
            h.bins[((s / u64::from(bin_us)) as usize).min(bins)] += 1;
            h.max_us = h.max_us.max(s);
            h.sum_us += s;
        }
        h
    }

    pub fn count(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The value of the order statistic of 0-based rank `r` (samples spread evenly in a bin).
    fn order_statistic(&self, r: u64) -> Option<f64> {
        let w = f64::from(self.bin_us);
        let overflow = self.bins.len().saturating_sub(1);
        let mut before = 0u64;
        for (b, &c) in self.bins.iter().enumerate() {
            if c > 0 && r < before + c {
                let j = (r - before) as f64;
                let lo = b as f64 * w;
                // The overflow bin reaches to the largest sample.
                let width = if b == overflow { (self.max_us as f64 - lo).max(w) } else { w };
                return Some(lo + width * (j + 0.5) / c as f64);
            }
            before += c;
        }
        None
    }

    /// Quantile `p` ∈ [0, 1], µs: R's type 7 (see the module documentation).
    pub fn quantile(&self, p: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 || !(0.0..=1.0).contains(&p) {
            return None;
        }
        let h = (n - 1) as f64 * p;
        let (lo, hi) = (h.floor() as u64, h.ceil() as u64);
        let (a, b) = (self.order_statistic(lo)?, self.order_statistic(hi)?);
        Some(a + (h - lo as f64) * (b - a))
    }

    /// The bin [lo, hi) µs holding the order statistic nearest to quantile `p` (type-7 rank).
    pub fn quantile_bin(&self, p: f64) -> Option<[u64; 2]> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let r = ((n - 1) as f64 * p).round() as u64;
        let w = u64::from(self.bin_us);
        let mut before = 0;
        for (b, &c) in self.bins.iter().enumerate() {
            if c > 0 && r < before + c {
                let lo = b as u64 * w;
                let hi = if b + 1 == self.bins.len() { self.max_us.max(lo) + 1 } else { lo + w };
                return Some([lo, hi]);
            }
            before += c;
        }
        None
    }

    /// The non-empty bins as (lo µs, hi µs, count).
    pub fn non_empty(&self) -> Vec<(u64, u64, u64)> {
        let w = u64::from(self.bin_us);
        let last = self.bins.len().saturating_sub(1);
        self.bins
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| {
                let lo = b as u64 * w;
                (lo, if b == last { self.max_us.max(lo) + 1 } else { lo + w }, c)
            })
            .collect()
    }

    /// The summary kept in run.json.
    pub fn summary(&self, skipped_no_rtt: u64, skipped_port: u64) -> SrttSummary {
        let n = self.count();
        let ms = |v: Option<f64>| v.map(|x| x / 1000.0);
        SrttSummary {
            samples: n,
            bin_us: self.bin_us,
            mean_ms: (n > 0).then(|| self.sum_us as f64 / n as f64 / 1000.0),
            p50_ms: ms(self.quantile(0.5)),
            p90_ms: ms(self.quantile(0.9)),
            p99_ms: ms(self.quantile(0.99)),
            p999_ms: ms(self.quantile(0.999)),
            p99_bin_us: self.quantile_bin(0.99),
            max_ms: (n > 0).then(|| self.max_us as f64 / 1000.0),
            overflow: self.bins.last().copied().unwrap_or(0),
            skipped_no_rtt,
            skipped_port,
        }
    }
}

/// What run.json records of the per-ACK SRTT samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SrttSummary {
    /// ACKs sampled (segments the scheme's senders received with an RTT estimate).
    pub samples: u64,
    pub bin_us: u32,
    pub mean_ms: Option<f64>,
    /// Type-7 quantiles (module documentation), exact to the bin.
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    /// The bin [lo, hi) µs that holds the p99 order statistic.
    pub p99_bin_us: Option<[u64; 2]>,
    pub max_ms: Option<f64>,
    /// Samples of 1 s or more (the overflow bin).
    pub overflow: u64,
    /// Segments of the scheme's sockets before their first RTT sample (SRTT 0), not counted.
    pub skipped_no_rtt: u64,
    /// Segments of other sockets of the sender namespace (cross traffic), not counted.
    pub skipped_port: u64,
}

/// The network namespace cookie of `ns` (a socket opened inside it answers SO_NETNS_COOKIE).
pub fn netns_cookie(ns: &str) -> Result<u64> {
    crate::netns::run_in(ns, || {
        // SAFETY: plain syscall; the fd is closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::last_os("socket"));
        }
        let mut cookie: u64 = 0;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        // SAFETY: valid fd and buffer.
        let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_NETNS_COOKIE, (&mut cookie as *mut u64).cast(), &mut len) };
        let err = std::io::Error::last_os_error();
        // SAFETY: our fd.
        unsafe { libc::close(fd) };
        if r != 0 || cookie == 0 {
            return Err(Error::io("SO_NETNS_COOKIE (Linux ≥ 5.14)", err));
        }
        Ok(cookie)
    })
}

/// The attached SRTT probe of one run.
pub struct SrttProbe {
    // Field order: the link detaches before the object is freed.
    link: Option<Link>,
    object: Object,
}

impl std::fmt::Debug for SrttProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrttProbe").field("attached", &self.link.is_some()).finish()
    }
}

fn bpf(what: &'static str) -> impl Fn(libbpf_rs::Error) -> Error {
    move |e| Error::Unavailable(format!("SRTT probe: {what}: {e}"))
}

impl SrttProbe {
    /// Loads the program, sets its filter (the namespace's cookie and the inclusive destination
    /// port range of the scheme's flows) and attaches it to tcp:tcp_probe.
    pub fn start(netns_cookie: u64, ports: (u16, u16)) -> Result<SrttProbe> {
        let open = ObjectBuilder::default().open_memory(OBJECT).map_err(bpf("opening the BPF object"))?;
        let object = open.load().map_err(bpf("loading (does this kernel have BTF and tp_btf/tcp_probe?)"))?;
        let mut cfg = Vec::with_capacity(16);
        cfg.extend_from_slice(&netns_cookie.to_ne_bytes());
        cfg.extend_from_slice(&ports.0.to_ne_bytes());
        cfg.extend_from_slice(&ports.1.to_ne_bytes());
        cfg.extend_from_slice(&0u32.to_ne_bytes());
        object
            .maps()
            .find(|m| m.name().to_string_lossy() == "srtt_cfg")
            .ok_or_else(|| Error::Unavailable("SRTT probe: no srtt_cfg map".into()))?
            .update(&0u32.to_ne_bytes(), &cfg, MapFlags::ANY)
            .map_err(bpf("setting the filter"))?;
        let link = object
            .progs_mut()
            .find(|p| p.name().to_string_lossy() == "srtt_probe")
            .ok_or_else(|| Error::Unavailable("SRTT probe: no srtt_probe program".into()))?
            .attach()
            .map_err(bpf("attaching to tcp:tcp_probe"))?;
        Ok(SrttProbe { link: Some(link), object })
    }

    /// Detaches the program and reads what it counted: the histogram and the skipped segments
    /// (no RTT estimate yet, other ports).
    pub fn finish(mut self) -> Result<(SrttHistogram, u64, u64)> {
        drop(self.link.take());
        let key = 0u32.to_ne_bytes();
        let map = |name: &str| {
            self.object
                .maps()
                .find(|m| m.name().to_string_lossy() == name)
                .ok_or_else(|| Error::Unavailable(format!("SRTT probe: no {name} map")))
        };
        let raw = map("srtt_hist")?
            .lookup(&key, MapFlags::ANY)
            .map_err(bpf("reading the histogram"))?
            .ok_or_else(|| Error::Unavailable("SRTT probe: empty histogram map".into()))?;
        let bins: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default())).collect();
        if bins.len() != BINS + 1 {
            return Err(Error::Unavailable(format!("SRTT probe: {} bins, expected {}", bins.len(), BINS + 1)));
        }
        let stats = map("srtt_stats")?;
        let stat = |i: u32| -> u64 {
            stats
                .lookup(&i.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes))
                .unwrap_or(0)
        };
        let h = SrttHistogram { bin_us: BIN_US, bins, sum_us: stat(1), max_us: stat(2) };
        Ok((h, stat(3), stat(4)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::quantile_type7;

    #[test]
    fn histogram_quantiles_are_type_7_to_the_bin() {
        // 4000, 4010, …, 4990 µs: R's quantile(x, .99) = 4000 + 10·98.01 = 4980.1.
        let samples: Vec<u64> = (0..100).map(|k| 4000 + 10 * k).collect();
        let sorted: Vec<f64> = samples.iter().map(|&s| s as f64).collect();
        assert!((quantile_type7(&sorted, 0.99).unwrap() - 4980.1).abs() < 1e-9);
        let h = SrttHistogram::of_samples(&samples, BIN_US, BINS);
        assert_eq!(h.count(), 100);
        // Each sample alone in its bin stands at the bin centre: +5 µs.
        assert!((h.quantile(0.99).unwrap() - 4985.1).abs() < 1e-9, "{:?}", h.quantile(0.99));
        assert!((h.quantile(0.5).unwrap() - 4500.0).abs() < 1e-9);
        assert_eq!(h.quantile_bin(0.99), Some([4980, 4990]));
        // Many samples in one bin spread over it; any sample list stays within a bin width.
        let mixed: Vec<u64> = (0..1000).map(|k| 4000 + (k * 7919) % 6000).collect();
        let h = SrttHistogram::of_samples(&mixed, BIN_US, BINS);
        let mut sorted: Vec<f64> = mixed.iter().map(|&s| s as f64).collect();
        sorted.sort_by(f64::total_cmp);
        for p in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let (exact, binned) = (quantile_type7(&sorted, p).unwrap(), h.quantile(p).unwrap());
            assert!((exact - binned).abs() <= f64::from(BIN_US), "p {p}: {exact} vs {binned}");
        }
        let s = h.summary(3, 4);
        assert_eq!((s.samples, s.skipped_no_rtt, s.skipped_port, s.overflow), (1000, 3, 4, 0));
        assert_eq!(s.max_ms, mixed.iter().max().map(|&m| m as f64 / 1000.0));
    }

    #[test]
    fn overflow_and_empty() {
        let h = SrttHistogram::of_samples(&[], BIN_US, BINS);
        assert_eq!(h.quantile(0.99), None);
        assert_eq!(h.summary(0, 0).p99_ms, None);
        // Samples beyond 1 s land in the overflow bin, spread up to the largest one.
        let h = SrttHistogram::of_samples(&[1_000_000, 3_000_000], BIN_US, BINS);
        assert_eq!(h.bins[BINS], 2);
        assert_eq!(h.quantile(0.0), Some(1_500_000.0));
        assert_eq!(h.quantile(1.0), Some(2_500_000.0));
        assert_eq!(h.non_empty(), vec![(1_000_000, 3_000_001, 2)]);
        assert_eq!(h.summary(0, 0).overflow, 2);
        assert_eq!(h.quantile(1.5), None);
    }
}
