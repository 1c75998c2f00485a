//! Links: resolving an experiment's `[[links]]` into emulator link shapes — mahimahi trace files,
//! every trace in a directory, fixed rates, and synthetic square-wave, on/off and burst-gap traces
//! written as mahimahi files (so the router treats them exactly like recorded traces, capacity accounting included).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccp_router::config::RandomLoss;
use ccp_router::{LinkShape, Trace};

use crate::config::{is_safe_name, LinkSpec};
use crate::error::{Error, Result};

/// Mbit/s carried by one delivery opportunity per millisecond (1500 bytes · 8 / 1 ms).
pub const MBPS_PER_OPPORTUNITY_PER_MS: f64 = 12.0;
/// The random loss's seed when a link gives none.
const DEFAULT_LOSS_SEED: u64 = 1;

/// One bottleneck link of the matrix.
#[derive(Debug, Clone)]
pub struct Link {
    pub name: String,
    pub shape: LinkShape,
    /// Where it came from (a file path or a description).
    pub source: String,
    pub mean_rate_bps: f64,
    /// One period of a trace, s (its "full length"); `None` for a fixed rate.
    pub period_s: Option<f64>,
    /// Its own propagation RTT, ms, instead of the network's.
    pub rtt_ms: Option<f64>,
    /// Its own buffer in BDPs, instead of the network's.
    pub buffer_bdp: Option<f64>,
    /// Random loss on its data direction.
    pub loss: Option<RandomLoss>,
}

impl Link {
    /// Bytes the link offers between `t0` and `t1`, ns after the emulator started.
    pub fn capacity_bytes(&self, t0: u64, t1: u64) -> f64 {
        let at = |t| self.shape.capacity_bytes(t).unwrap_or(0.0);
        (at(t1) - at(t0)).max(0.0)
    }

    fn from_trace(name: String, path: &Path) -> Result<Link> {
        let trace = Trace::load(path)?;
        Ok(Link {
            name,
            source: path.display().to_string(),
            mean_rate_bps: trace.mean_rate_bps(),
            period_s: Some(trace.period_ms() as f64 / 1000.0),
            rtt_ms: None,
            buffer_bdp: None,
            loss: None,
            shape: LinkShape::Trace(Arc::new(trace)),
        })
    }
}

/// Resolves every link spec (paths relative to `base`); synthetic traces are written under
/// `generated`. Names must come out unique.
/// Whether `spec` may yield a link named in `wanted` (all do when it is empty). A trace file's
/// name is known without reading it, so a run of other links never needs it (a clone without
/// `../shared` can run an experiment's fixed links); other kinds are resolved to be sure.
pub fn may_be_wanted(spec: &LinkSpec, base: &Path, wanted: &[String]) -> bool {
    match spec {
        LinkSpec::Trace { path, name } if !wanted.is_empty() => {
            wanted.contains(&name.clone().unwrap_or_else(|| file_name(&base.join(path))))
        }
        _ => true,
    }
}

pub fn resolve(specs: &[LinkSpec], base: &Path, generated: &Path) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for spec in specs {
        match spec {
            LinkSpec::Trace { path, name } => {
                let p = base.join(path);
                let name = name.clone().unwrap_or_else(|| file_name(&p));
                links.push(Link::from_trace(name, &p)?);
            }
            LinkSpec::TraceDir { path, include } => {
                let dir = base.join(path);
                let files = trace_files(&dir, include)?;
                if files.is_empty() {
                    return Err(Error::Unavailable(format!("no trace files in {} (include {include:?})", dir.display())));
                }
                for f in files {
                    links.push(Link::from_trace(file_name(&f), &f)?);
                }
            }
            LinkSpec::Fixed { rate_mbps, rtt_ms, buffer_bdp, loss_pct, loss_seed, name } => {
                let mut source = format!("fixed {rate_mbps} Mbit/s");
                if let Some(r) = rtt_ms {
                    source += &format!(", RTT {r} ms");
                }
                if let Some(b) = buffer_bdp {
                    source += &format!(", buffer {b} BDP");
                }
                let loss = loss_pct.map(|p| RandomLoss { probability: p / 100.0, seed: loss_seed.unwrap_or(DEFAULT_LOSS_SEED) });
                if let (Some(p), Some(l)) = (loss_pct, &loss) {
                    source += &format!(", random loss {p} % (seed {})", l.seed);
                }
                links.push(Link {
                    name: name.clone().unwrap_or_else(|| format!("fixed-{rate_mbps}mbps")),
                    shape: LinkShape::Fixed { bits_per_sec: rate_mbps * 1e6 },
                    source,
                    mean_rate_bps: rate_mbps * 1e6,
                    period_s: None,
                    rtt_ms: *rtt_ms,
                    buffer_bdp: *buffer_bdp,
                    loss,
                })
            }
            LinkSpec::SquareWave { low_mbps, high_mbps, half_period_ms, name } => {
                let name = name.clone().unwrap_or_else(|| format!("square-{low_mbps}-{high_mbps}-{half_period_ms}ms"));
                std::fs::create_dir_all(generated).map_err(|e| Error::io(format!("creating {}", generated.display()), e))?;
                let path = generated.join(format!("{name}.trace"));
                std::fs::write(&path, square_wave(*low_mbps, *high_mbps, *half_period_ms))
                    .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
                let mut link = Link::from_trace(name, &path)?;
                link.source =
                    format!("square wave {high_mbps} ↔ {low_mbps} Mbit/s every {half_period_ms} ms ({})", path.display());
                links.push(link);
            }
            LinkSpec::OnOff { rate_mbps, on_ms, off_ms, seed, length_s, name } => {
                let name = name.clone().unwrap_or_else(|| match seed {
                    Some(s) => format!("onoff-{rate_mbps}-{on_ms}-{off_ms}ms-s{s}"),
                    None => format!("onoff-{rate_mbps}-{on_ms}-{off_ms}ms"),
                });
                std::fs::create_dir_all(generated).map_err(|e| Error::io(format!("creating {}", generated.display()), e))?;
                let path = generated.join(format!("{name}.trace"));
                std::fs::write(&path, on_off(*rate_mbps, *on_ms, *off_ms, *seed, *length_s))
                    .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
                let mut link = Link::from_trace(name, &path)?;
                let periods = if seed.is_some() { "exponential periods, means" } else { "periods" };
                link.source =
                    format!("on/off {rate_mbps} Mbit/s, {periods} {on_ms} ms on / {off_ms} ms off ({})", path.display());
                links.push(link);
            }
            LinkSpec::BurstGap { rate_mbps, burst_pkts, max_burst_pkts, idle_pct, idle_ms, seed, length_s, name } => {
                let shape = BurstGap {
                    rate_mbps: *rate_mbps,
                    burst_pkts: *burst_pkts,
                    max_burst_pkts: max_burst_pkts.unwrap_or_else(|| BurstGap::default_max(*burst_pkts)),
                    idle_pct: *idle_pct,
                    idle_ms: *idle_ms,
                };
                shape.check().map_err(Error::Unavailable)?;
                let name =
                    name.clone().unwrap_or_else(|| format!("burstgap-{rate_mbps}-{burst_pkts}-{idle_pct}-{idle_ms}ms-s{seed}"));
                std::fs::create_dir_all(generated).map_err(|e| Error::io(format!("creating {}", generated.display()), e))?;
                let path = generated.join(format!("{name}.trace"));
                std::fs::write(&path, shape.trace(*seed, *length_s))
                    .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
                let mut link = Link::from_trace(name, &path)?;
                link.source = format!(
                    "burst-gap {rate_mbps} Mbit/s mean, {burst_pkts} (≤ {}) per busy ms, {idle_pct} % idle in periods of mean {idle_ms} ms, seed {seed} ({})",
                    shape.max_burst_pkts,
                    path.display()
                );
                links.push(link);
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for l in &links {
        if !is_safe_name(&l.name) {
            return Err(Error::Unavailable(format!(
                "link name {:?} (from {}) cannot name a directory; give the link a name",
                l.name, l.source
            )));
        }
        if !seen.insert(l.name.clone()) {
            return Err(Error::Unavailable(format!("two links are named {:?}; give them distinct names", l.name)));
        }
    }
    Ok(links)
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| p.display().to_string())
}

/// Trace files of a directory, sorted by name: regular files, not hidden, not `*.md`, matching
/// one of `include` (all when empty).
fn trace_files(dir: &Path, include: &[String]) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(format!("listing trace directory {}", dir.display()), e))?;
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            let n = file_name(p);
            !n.starts_with('.') && !n.ends_with(".md") && (include.is_empty() || include.iter().any(|pat| glob(pat, &n)))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// `*`-only glob matching (enough for "*.up", "Verizon-*").
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// A mahimahi trace of one period: `high` Mbit/s for `half_ms`, then `low` for `half_ms`.
/// Fractional opportunities carry over between milliseconds; the last millisecond always has
/// one opportunity so the period is exactly 2·`half_ms` (costing at most one packet per period).
pub fn square_wave(low_mbps: f64, high_mbps: f64, half_ms: u64) -> String {
    let mut out = String::new();
    let mut credit = 0.0f64;
    let period = 2 * half_ms;
    for t in 1..=period {
        let rate = if t <= half_ms { high_mbps } else { low_mbps };
        credit += rate / MBPS_PER_OPPORTUNITY_PER_MS;
        if t == period && credit < 1.0 {
            credit = 1.0;
        }
        while credit >= 1.0 - 1e-9 {
            out.push_str(&t.to_string());
            out.push('\n');
            credit -= 1.0;
        }
    }
    out
}

/// A mahimahi trace of `length_s` seconds alternating between `rate_mbps` (on) and no delivery
/// opportunities at all (off), starting on. Without a seed every on-period lasts `on_ms` and every
/// off-period `off_ms`; with one, each is drawn exponentially with that mean (at least 1 ms), so
/// the bursts are irregular as a cellular scheduler's are. Fractional opportunities carry over
/// between on-milliseconds; the last millisecond has an opportunity so the trace lasts exactly
/// `length_s` when replayed.
pub fn on_off(rate_mbps: f64, on_ms: u64, off_ms: u64, seed: Option<u64>, length_s: u64) -> String {
    use ccp_qdisc::rng::{Draw, SeedableRng, SplitMix64};
    let mut rng = seed.map(SplitMix64::seed_from_u64);
    let mut draw = |mean_ms: u64| match rng.as_mut() {
        Some(r) => (r.exponential(mean_ms as f64).round() as u64).max(1),
        None => mean_ms,
    };
    let end_ms = length_s * 1000;
    let mut out = String::new();
    let (mut t, mut credit) = (0u64, 0.0f64);
    while t < end_ms {
        let on_until = (t + draw(on_ms)).min(end_ms);
        while t < on_until {
            t += 1;
            credit += rate_mbps / MBPS_PER_OPPORTUNITY_PER_MS;
            while credit >= 1.0 - 1e-9 {
                out.push_str(&t.to_string());
                out.push('\n');
                credit -= 1.0;
            }
        }
        t = (t + draw(off_ms)).min(end_ms);
    }
    if out.lines().next_back() != Some(end_ms.to_string().as_str()) {
        out.push_str(&format!("{end_ms}\n"));
    }
    out
}

/// A link whose delay comes from gaps in its delivery opportunities rather than from a queue
/// (issue 32): what a cellular scheduler does to a user it serves in dense bursts between long
/// pauses. The trace alternates
/// * **idle periods** with no opportunity at all, `idle_pct` % of the time, their lengths drawn
///   from a Pareto law of shape 1.5 with mean `idle_ms` (minimum `idle_ms`/3): mostly tens of ms,
///   now and then seconds, as the held-out trace's gaps;
/// * **active periods**, exponential with the mean that makes the idle share come out, in which
///   each millisecond is busy with the probability that makes the mean rate `rate_mbps`, and a
///   busy millisecond holds 1 + a geometric number of opportunities (mean `burst_pkts`, at most
///   `max_burst_pkts`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstGap {
    pub rate_mbps: f64,
    pub burst_pkts: f64,
    pub max_burst_pkts: u64,
    pub idle_pct: f64,
    pub idle_ms: f64,
}

impl BurstGap {
    /// The Pareto shape of idle lengths: a finite mean, an infinite variance (a heavy tail).
    const IDLE_SHAPE: f64 = 1.5;
    /// No single idle period is longer (a trace of a dead link is not a link).
    const MAX_IDLE_MS: f64 = 5_000.0;
    pub const MAX_BURST_PKTS: u64 = 1_000;

    pub fn default_max(burst_pkts: f64) -> u64 {
        (4.0 * burst_pkts).ceil().max(1.0) as u64
    }

    /// Mean opportunities per busy millisecond: 1 + geometric, capped.
    fn mean_burst(&self) -> f64 {
        let q = 1.0 / self.burst_pkts;
        if q >= 1.0 {
            return 1.0;
        }
        // E[min(X, m)] = Σ_{k<m} P(X > k) for X ≥ 1 geometric with success probability q.
        (1.0 - (1.0 - q).powf(self.max_burst_pkts as f64)) / q
    }

    fn idle_fraction(&self) -> f64 {
        self.idle_pct / 100.0
    }

    /// The probability that a millisecond of an active period is busy.
    fn busy_probability(&self) -> f64 {
        self.rate_mbps / MBPS_PER_OPPORTUNITY_PER_MS / ((1.0 - self.idle_fraction()) * self.mean_burst())
    }

    /// Whether the parameters describe a trace; the message names the offending ones.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !(self.rate_mbps.is_finite() && self.rate_mbps > 0.0) {
            return Err(format!("burst-gap rate_mbps must be > 0, got {}", self.rate_mbps));
        }
        if !(self.burst_pkts.is_finite() && self.burst_pkts >= 1.0) {
            return Err(format!("burst-gap burst_pkts must be ≥ 1, got {}", self.burst_pkts));
        }
        if !(self.burst_pkts.ceil() as u64..=Self::MAX_BURST_PKTS).contains(&self.max_burst_pkts) {
            return Err(format!(
                "burst-gap max_burst_pkts must be in {}..={} (at least burst_pkts), got {}",
                self.burst_pkts.ceil(),
                Self::MAX_BURST_PKTS,
                self.max_burst_pkts
            ));
        }
        if !(self.idle_pct.is_finite() && (0.0..=95.0).contains(&self.idle_pct)) {
            return Err(format!("burst-gap idle_pct must be in [0, 95], got {}", self.idle_pct));
        }
        if !(self.idle_ms.is_finite() && (3.0..=Self::MAX_IDLE_MS / 3.0).contains(&self.idle_ms)) {
            return Err(format!("burst-gap idle_ms must be in [3, {}] ms, got {}", Self::MAX_IDLE_MS / 3.0, self.idle_ms));
        }
        let p = self.busy_probability();
        if p > 1.0 {
            return Err(format!(
                "burst-gap rate_mbps {} cannot be reached: with {} % idle and {:.2} opportunities per busy ms an active \
                 millisecond would have to be busy with probability {p:.2}; raise burst_pkts or lower idle_pct",
                self.rate_mbps,
                self.idle_pct,
                self.mean_burst()
            ));
        }
        Ok(())
    }

    /// The mahimahi trace of `length_s` seconds drawn with `seed`, starting active; the last
    /// millisecond has an opportunity, so the trace lasts exactly `length_s` when replayed.
    pub fn trace(&self, seed: u64, length_s: u64) -> String {
        use ccp_qdisc::rng::{Draw, SeedableRng, SplitMix64};
        let mut rng = SplitMix64::seed_from_u64(seed);
        let (idle, p) = (self.idle_fraction(), self.busy_probability());
        let idle_min_ms = self.idle_ms * (Self::IDLE_SHAPE - 1.0) / Self::IDLE_SHAPE;
        let active_mean_ms = if idle > 0.0 { self.idle_ms * (1.0 - idle) / idle } else { f64::INFINITY };
        let q = 1.0 / self.burst_pkts;
        let end_ms = length_s * 1000;
        let mut out = String::new();
        let mut t = 0u64;
        while t < end_ms {
            let active =
                if active_mean_ms.is_finite() { rng.exponential(active_mean_ms).round().max(1.0) as u64 } else { end_ms };
            let active_until = (t + active).min(end_ms);
            while t < active_until {
                t += 1;
                if rng.next_f64() >= p {
                    continue;
                }
                let extra = if q >= 1.0 { 0 } else { ((1.0 - rng.next_f64()).ln() / (1.0 - q).ln()).floor() as u64 };
                for _ in 0..(1 + extra).min(self.max_burst_pkts) {
                    out.push_str(&t.to_string());
                    out.push('\n');
                }
            }
            if idle > 0.0 {
                let pareto = idle_min_ms / (1.0 - rng.next_f64()).powf(1.0 / Self::IDLE_SHAPE);
                t = (t + pareto.min(Self::MAX_IDLE_MS).round() as u64).min(end_ms);
            }
        }
        if out.lines().next_back() != Some(end_ms.to_string().as_str()) {
            out.push_str(&format!("{end_ms}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_file_not_asked_for_is_never_read() {
        let missing = LinkSpec::Trace { path: "no/such.trace".into(), name: Some("lte".into()) };
        let unnamed = LinkSpec::Trace { path: "no/such.trace".into(), name: None };
        let base = Path::new("/nonexistent");
        let want = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(!may_be_wanted(&missing, base, &want(&["fixed"])));
        assert!(may_be_wanted(&missing, base, &want(&["lte"])) && may_be_wanted(&missing, base, &[]));
        assert!(may_be_wanted(&unnamed, base, &want(&["such.trace"])) && !may_be_wanted(&unnamed, base, &want(&["lte"])));
        // Asked for, it is read, and its absence is an error naming it.
        let e = resolve(&[missing], base, Path::new("/tmp")).unwrap_err();
        assert!(e.to_string().contains("no/such.trace"), "{e}");
    }

    #[test]
    fn on_off_delivers_at_the_rate_while_on_and_nothing_while_off() {
        // 12 Mbit/s is one opportunity per ms: on 1..=40, off 41..=50, on 51..=90, ...
        let text = on_off(12.0, 40, 10, None, 1);
        let ms: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(&ms[..40], &(1..=40).collect::<Vec<_>>()[..]);
        assert_eq!(ms[40], 51, "no opportunity in the off-period");
        assert_eq!(*ms.last().unwrap(), 1000, "the trace lasts exactly its length");
        // 20 periods of 50 ms with 40 ms on: 800 opportunities, and the one at 1000 ms (in the
        // last off-period) that fixes the trace's length.
        assert_eq!(ms.len(), 801);
        // Random periods: the same seed gives the same trace, another seed another one, and
        // the on-fraction is near on/(on + off) over a long trace.
        let a = on_off(12.0, 40, 10, Some(7), 60);
        assert_eq!(a, on_off(12.0, 40, 10, Some(7), 60));
        assert_ne!(a, on_off(12.0, 40, 10, Some(8), 60));
        let on_fraction = a.lines().count() as f64 / 60_000.0;
        assert!((on_fraction - 0.8).abs() < 0.05, "{on_fraction}");
        let parsed = Trace::parse(Path::new("a"), &a).unwrap();
        assert!(parsed.period_ms() == 60_000, "{}", parsed.period_ms());
    }

    /// The held-out LTE trace's signature as issue 32 gives it (mean 7.75 Mbit/s, 44 % of 20 ms
    /// windows empty, up to 26 per ms, 6.3 per busy ms, p95 of the 20 ms rate ~4× the mean, gaps
    /// median 3 ms and p99 ~100 ms, a few over 1 s): the generator's version of it comes out
    /// with the same shape, seed after seed.
    #[test]
    fn burst_gap_traces_have_the_held_out_signature() {
        let shape = BurstGap { rate_mbps: 7.75, burst_pkts: 6.3, max_burst_pkts: 26, idle_pct: 50.0, idle_ms: 100.0 };
        shape.check().unwrap();
        for seed in 1..=5 {
            let text = shape.trace(seed, 65);
            assert_eq!(text, shape.trace(seed, 65), "seeded");
            let trace = Trace::parse(Path::new("bg"), &text).unwrap();
            assert_eq!(trace.period_ms(), 65_000);
            let s = crate::burstiness::Signature::of(&trace, None).unwrap();
            assert!((5.5..10.0).contains(&s.mean_mbps), "seed {seed}: {s}");
            assert!((30.0..55.0).contains(&s.empty_windows_pct), "seed {seed}: {s}");
            assert!((20..=26).contains(&s.max_per_ms), "seed {seed}: {s}");
            assert!((5.0..7.0).contains(&s.mean_per_busy_ms), "seed {seed}: {s}");
            assert!((2.5..6.0).contains(&s.p95_window_rate_over_mean), "seed {seed}: {s}");
            assert!(s.gap_p50_ms <= 6.0 && (50.0..400.0).contains(&s.gap_p99_ms) && s.gap_max_ms > 500, "seed {seed}: {s}");
        }
        assert_ne!(shape.trace(1, 65), shape.trace(2, 65));
        // Without idle periods only the bursts' own spacing is left: a millisecond is busy with
        // probability 0.104, so (1 − 0.104)^20 ≈ 11 % of 20 ms windows are empty, and no gap
        // comes near the idle periods' seconds.
        let steady = BurstGap { idle_pct: 0.0, ..shape };
        let s = crate::burstiness::Signature::of(&Trace::parse(Path::new("s"), &steady.trace(1, 20)).unwrap(), None).unwrap();
        assert!((6.0..18.0).contains(&s.empty_windows_pct) && s.gap_max_ms < 150, "{s}");
    }

    #[test]
    fn burst_gap_parameters_that_describe_no_trace_are_refused_by_name() {
        let ok = BurstGap { rate_mbps: 8.0, burst_pkts: 6.0, max_burst_pkts: 24, idle_pct: 40.0, idle_ms: 60.0 };
        let msg = |b: BurstGap| b.check().unwrap_err();
        assert!(msg(BurstGap { rate_mbps: 200.0, ..ok }).contains("cannot be reached"));
        assert!(msg(BurstGap { burst_pkts: 0.5, ..ok }).contains("burst_pkts"));
        assert!(msg(BurstGap { max_burst_pkts: 3, ..ok }).contains("max_burst_pkts"));
        assert!(msg(BurstGap { idle_pct: 99.0, ..ok }).contains("idle_pct"));
        assert!(msg(BurstGap { idle_ms: f64::NAN, ..ok }).contains("idle_ms"));
    }

    #[test]
    fn square_wave_has_both_rates_and_exact_period() {
        let text = square_wave(12.0, 24.0, 500);
        let trace = Trace::parse(Path::new("sq"), &text).unwrap();
        assert_eq!(trace.period_ms(), 1000);
        assert!((trace.mean_rate_bps() / 1e6 - 18.0).abs() < 0.05, "{}", trace.mean_rate_bps());
        let times: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(times.iter().filter(|&&t| t <= 500).count(), 1000);
        assert_eq!(times.iter().filter(|&&t| t > 500).count(), 500);
        // A slow wave still ends on its period.
        let slow = Trace::parse(Path::new("slow"), &square_wave(1.0, 3.0, 100)).unwrap();
        assert_eq!(slow.period_ms(), 200);
    }

    #[test]
    fn globbing() {
        assert!(glob("*.up", "Verizon-LTE-short.up"));
        assert!(!glob("*.up", "Verizon-LTE-short.down"));
        assert!(glob("Verizon-*", "Verizon-EVDO-driving.down"));
        assert!(glob("*LTE*", "Verizon-LTE-short.up"));
        assert!(glob("a*b*c", "abc"));
        assert!(!glob("a*b*c", "acb"));
        assert!(glob("exact", "exact"));
        assert!(!glob("ab*ba", "aba"));
    }

    #[test]
    fn fixed_capacity_is_rate_times_time() {
        let links = resolve(
            &[LinkSpec::Fixed { rate_mbps: 8.0, rtt_ms: None, buffer_bdp: None, loss_pct: None, loss_seed: None, name: None }],
            Path::new("."),
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(links[0].name, "fixed-8mbps");
        assert!((links[0].capacity_bytes(1_000_000_000, 3_000_000_000) - 2e6).abs() < 1.0);
    }

    #[test]
    fn trace_dirs_skip_docs_and_filter() {
        let dir = std::env::temp_dir().join(format!("ccplab-traces-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (n, body) in [("a.up", "1\n"), ("a.down", "1\n2\n"), ("README.md", "# x\n"), (".hidden", "1\n")] {
            std::fs::write(dir.join(n), body).unwrap();
        }
        let all = resolve(&[LinkSpec::TraceDir { path: dir.clone(), include: vec![] }], Path::new("/"), &dir).unwrap();
        let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a.down", "a.up"]);
        assert_eq!(all[0].period_s, Some(0.002));
        let up =
            resolve(&[LinkSpec::TraceDir { path: dir.clone(), include: vec!["*.up".into()] }], Path::new("/"), &dir).unwrap();
        assert_eq!(up.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
