//! What an experiment expands to: the matrix of runs (link × scenario × scheme × repetition,
//! filtered on the command line) and each run's duration, propagation RTT, buffer, flows and
//! delay classes.

use std::time::Duration;

use ccp_qdisc::NANOS_PER_MS;

use super::RunOptions;
use crate::config::{CrossSpec, FlowGroup, Loaded, Scenario};
use crate::error::{Error, Result};
use crate::link::Link;
use crate::scheme::Scheme;
use crate::traffic::{FlowPlan, PlanKind, Role};

/// Bytes per packet for buffer sizing in BDPs.
const MTU_BYTES: f64 = 1500.0;
/// Default `--quick` duration when the file gives none.
const QUICK_DEFAULT_S: f64 = 30.0;

/// The matrix an experiment expands to.
#[derive(Debug, Clone)]
pub struct Plan {
    pub links: Vec<Link>,
    pub schemes: Vec<Scheme>,
    pub scenarios: Vec<Scenario>,
    pub repetitions: u32,
}

impl Plan {
    /// Resolves links (writing generated traces under `out/traces`), builds the schemes and
    /// applies the command-line filters.
    pub fn new(l: &Loaded, o: &RunOptions) -> Result<Plan> {
        let x = &l.experiment;
        let specs: Vec<_> = x.links.iter().filter(|s| crate::link::may_be_wanted(s, &l.dir, &o.links)).cloned().collect();
        let mut links = crate::link::resolve(&specs, &l.dir, &o.out.join("traces"))?;
        let mut schemes = x
            .schemes
            .iter()
            .map(|s| Scheme::from_spec(s).map_err(|m| Error::Run(format!("scheme {}: {m}", s.name))))
            .collect::<Result<Vec<_>>>()?;
        let mut scenarios = x.scenarios.clone();
        keep(&mut links, &o.links, |l| &l.name, "link")?;
        keep(&mut schemes, &o.schemes, |s| &s.name, "scheme")?;
        keep(&mut scenarios, &o.scenarios, |s| &s.name, "scenario")?;
        Ok(Plan { links, schemes, scenarios, repetitions: o.repetitions.unwrap_or(x.repetitions) })
    }

    /// Every run in order: link-major, so one link's schemes are compared under the same
    /// conditions close in time.
    pub fn runs(&self) -> Vec<(usize, usize, usize, u32)> {
        let mut v = Vec::new();
        // Repetitions outermost within a cell: the schemes alternate, so that a drift of the
        // machine over a cell's runs falls on every scheme alike.
        for li in 0..self.links.len() {
            for si in 0..self.scenarios.len() {
                for r in 0..self.repetitions {
                    for ki in 0..self.schemes.len() {
                        v.push((li, si, ki, r));
                    }
                }
            }
        }
        v
    }
}

/// Keeps the items named in `wanted` (all when empty); an unknown name is an error listing the
/// known ones.
fn keep<T>(items: &mut Vec<T>, wanted: &[String], name: impl Fn(&T) -> &String, what: &str) -> Result<()> {
    if wanted.is_empty() {
        return Ok(());
    }
    for w in wanted {
        if !items.iter().any(|i| name(i) == w) {
            let known: Vec<&String> = items.iter().map(&name).collect();
            return Err(Error::Unavailable(format!("no {what} named {w:?} (known: {known:?})")));
        }
    }
    items.retain(|i| wanted.contains(name(i)));
    Ok(())
}

/// The traffic duration of a run on `link`.
pub fn duration_for(l: &Loaded, o: &RunOptions, link: &Link) -> f64 {
    let x = &l.experiment;
    match (o.full_trace, link.period_s, o.duration_s) {
        (true, Some(p), _) => p,
        (_, _, Some(d)) => d,
        _ if o.quick => x.quick_duration_s.unwrap_or(x.duration_s.min(QUICK_DEFAULT_S)),
        _ => x.duration_s,
    }
}

/// The propagation RTT of runs on `link`, ms: the link's own, or the network's.
pub fn rtt_ms(l: &Loaded, link: &Link) -> f64 {
    link.rtt_ms.unwrap_or(l.experiment.network.rtt_ms)
}

/// The buffer in packets: the link's own BDPs, else the network's packets or BDPs; BDPs of the
/// link's mean rate at the propagation RTT.
pub fn buffer_pkts(l: &Loaded, link: &Link) -> u32 {
    let n = &l.experiment.network;
    let bdps = |b: f64| (b * link.mean_rate_bps / 8.0 * rtt_ms(l, link) / 1000.0 / MTU_BYTES).ceil().max(1.0) as u32;
    match (link.buffer_bdp, n.buffer_pkts, n.buffer_bdp) {
        (Some(b), _, _) => bdps(b),
        (None, Some(p), _) => p,
        (None, None, Some(b)) => bdps(b),
        (None, None, None) => 1,
    }
}

/// The flows of one run: the scheme's, then the scenario's cross traffic.
pub fn flow_plans(
    l: &Loaded,
    scheme: &Scheme,
    scenario: &Scenario,
    link: &Link,
    duration_s: f64,
    agent_cc: &str,
) -> Vec<FlowPlan> {
    let x = &l.experiment;
    let secs = |s: f64| Duration::from_secs_f64(s.clamp(0.0, duration_s));
    let end = |stop: Option<f64>| secs(stop.unwrap_or(duration_s));
    let mut plans = Vec::new();
    let groups: &[FlowGroup] = scenario.flows.as_deref().unwrap_or(&x.flows);
    let mut n = 0;
    for (gi, g) in groups.iter().enumerate() {
        for i in 0..g.count {
            let start = g.start_s + f64::from(i) * g.stagger_s;
            if start < duration_s {
                plans.push(FlowPlan {
                    label: format!("{}#{n}", scheme.name),
                    role: Role::Scheme,
                    kind: PlanKind::Bulk {
                        cc: scheme.flow_cc(agent_cc, gi).to_string(),
                        receiver_cc: scheme.receiver_cc.clone(),
                        bytes: g.bytes,
                        quic: scheme.quic_plan(gi, link.mean_rate_bps),
                    },
                    start: secs(start),
                    stop: end(g.stop_s),
                });
            }
            n += 1;
        }
    }
    let rate =
        |mbps: Option<f64>, share: Option<f64>| mbps.map_or_else(|| share.unwrap_or(0.0) * link.mean_rate_bps, |m| m * 1e6);
    for (j, c) in scenario.cross.iter().enumerate() {
        let (kind, start, stop, count) = match c {
            CrossSpec::Cbr { rate_mbps, share, packet_bytes, on_ms, off_ms, start_s, stop_s } => (
                PlanKind::Udp {
                    rate_bps: rate(*rate_mbps, *share),
                    packet_bytes: *packet_bytes,
                    poisson_seed: None,
                    on_off: on_ms.zip(*off_ms).map(|(on, off)| (Duration::from_millis(on), Duration::from_millis(off))),
                },
                *start_s,
                *stop_s,
                1,
            ),
            CrossSpec::PoissonUdp { rate_mbps, share, packet_bytes, start_s, stop_s, seed } => (
                PlanKind::Udp {
                    rate_bps: rate(*rate_mbps, *share),
                    packet_bytes: *packet_bytes,
                    poisson_seed: Some(*seed),
                    on_off: None,
                },
                *start_s,
                *stop_s,
                1,
            ),
            CrossSpec::PoissonTcp { rate_mbps, share, mean_size_bytes, size_dist, cc, max_concurrent, start_s, stop_s, seed } => {
                (
                    PlanKind::PoissonTcp {
                        load_bps: rate(*rate_mbps, *share),
                        mean_size_bytes: *mean_size_bytes,
                        fixed_size: size_dist == "fixed",
                        cc: cc.clone(),
                        max_concurrent: *max_concurrent,
                        seed: *seed,
                    },
                    *start_s,
                    *stop_s,
                    1,
                )
            }
            CrossSpec::Tcp { cc, count, start_s, stop_s, .. } => {
                (PlanKind::Bulk { cc: cc.clone(), receiver_cc: None, bytes: None, quic: None }, *start_s, *stop_s, *count)
            }
        };
        if start >= duration_s {
            continue;
        }
        for i in 0..count {
            let suffix = if count > 1 { format!("#{i}") } else { String::new() };
            plans.push(FlowPlan {
                label: format!("cross{j}-{}{suffix}", kind.type_name()),
                role: Role::Cross,
                kind: kind.clone(),
                start: secs(start),
                stop: end(stop),
            });
        }
    }
    plans
}

/// The run's propagation delay classes, data direction: (label, one-way delay ns), one per
/// distinct delay (classes sharing a delay are one entry); empty without `network.class_delays`.
pub fn delay_classes(l: &Loaded) -> Vec<(String, u64)> {
    let n = &l.experiment.network;
    if n.class_delays.is_empty() {
        return Vec::new();
    }
    let default = (n.rtt_ms / 2.0 * NANOS_PER_MS as f64).round() as u64;
    let classes = ccp_router::classes::parse_all(&n.class_delays).expect("network.class_delays were validated at load");
    let mut out: Vec<(String, u64)> = vec![("default".to_string(), default)];
    for (c, spec) in classes.iter().zip(&n.class_delays) {
        let d = c.down.unwrap_or(default);
        let label = spec.split(':').next().unwrap_or(spec).to_string();
        match out.iter_mut().find(|(_, x)| *x == d) {
            Some((l, _)) => *l = format!("{l}+{label}"),
            None => out.push((label, d)),
        }
    }
    out
}
