//! Bursts of sized flows and congestion notifications: what the Annulus testbed comparison
//! (configs/experiments/annulus-testbed.toml) reads off a run, computed for any experiment whose
//! scheme has sized flows (`flows[].bytes`) or whose agent traced CNMs.
//!
//! * A **burst** is the scheme's sized flows that start at the same time. Its completion time is
//!   the last flow's (connect to the receiver's close); over the burst — from its start to that
//!   completion — the bottleneck queue (the 10 ms samples), the queue held by each propagation
//!   delay class (with `network.class_delays`: which flow class fills the buffer), drops, CNMs and
//!   the throughput of the backlogged flows against the sized ones.
//! * **Between bursts**: the same over the rest of the measurement window (after `warmup_s`), the
//!   backlogged flows' steady state.
//! * **CNMs**: the router's congestion point's count, and the agent trace's CNM reports (each one
//!   delivered to a flow): per agent flow, per class (Annulus's `class_wan` state), quantized
//!   feedback, and the latencies the agent measured (the router's sample → the datagram read;
//!   the read → the flow's decision applied).
//!
//! Times in the results are seconds since the start of traffic.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::agent_trace::AgentRecord;
use crate::metrics::bottleneck::LinkSeries;
use crate::metrics::flows::{FlowExtra, Tick};
use crate::metrics::quantile_type7;
use crate::traffic::{FlowPlan, PlanKind};

const NS_PER_S: f64 = 1e9;
/// The Annulus state variable that says a flow is in the WAN class (1) or the DC class (0).
pub const CLASS_STATE: &str = "class_wan";

/// Count, median, p99 and maximum of a latency, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencyUs {
    pub count: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl LatencyUs {
    fn of(mut v: Vec<f64>) -> Option<LatencyUs> {
        v.sort_by(f64::total_cmp);
        Some(LatencyUs { count: v.len() as u64, p50: quantile_type7(&v, 0.5)?, p99: quantile_type7(&v, 0.99)?, max: *v.last()? })
    }
}

/// CNMs one agent flow got.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CnmFlow {
    /// The agent's flow id (its trace's `flow`).
    pub agent_flow: String,
    /// The flow's last `class_wan` state (Annulus: 1 = WAN, 0 = DC).
    pub class_wan: Option<f64>,
    pub cnms: u64,
    pub qfb_mean: f64,
    pub first_s: f64,
    pub last_s: f64,
}

/// Congestion notifications over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CnmSummary {
    /// Sent by the router's QCN congestion point (its summary, data direction).
    pub router_sent: u64,
    /// Delivered to a flow by the agent (CNM reports in its trace).
    pub delivered: u64,
    /// Of those, to flows in the WAN class (`class_wan` = 1), when the algorithm reports it.
    pub delivered_wan: Option<u64>,
    pub qfb_mean: Option<f64>,
    pub qfb_p99: Option<f64>,
    /// The router's sample → the agent's read of the datagram (same CLOCK_MONOTONIC).
    pub sample_to_read_us: Option<LatencyUs>,
    /// The read → the flow's decision applied to the datapath.
    pub read_to_action_us: Option<LatencyUs>,
    pub flows: Vec<CnmFlow>,
}

fn is_wan(r: &AgentRecord) -> Option<bool> {
    r.state.get(CLASS_STATE).map(|&c| c > 0.5)
}

/// The CNMs of a run from the router's count and the agent's trace (`None`: neither saw any).
pub fn cnm_summary(router_sent: u64, records: &[AgentRecord], traffic_start_ns: u64) -> Option<CnmSummary> {
    let cnm: Vec<&AgentRecord> = records.iter().filter(|r| r.qcn_fb.is_some()).collect();
    if router_sent == 0 && cnm.is_empty() {
        return None;
    }
    let rel = |t: u64| t.saturating_sub(traffic_start_ns) as f64 / NS_PER_S;
    let mut flows: BTreeMap<&str, CnmFlow> = BTreeMap::new();
    for r in &cnm {
        let f = flows.entry(r.flow.as_str()).or_insert_with(|| CnmFlow {
            agent_flow: r.flow.clone(),
            first_s: rel(r.t_ns),
            ..CnmFlow::default()
        });
        f.cnms += 1;
        f.qfb_mean += f64::from(r.qcn_fb.unwrap_or(0));
        f.last_s = rel(r.t_ns);
    }
    for f in flows.values_mut() {
        f.qfb_mean /= f.cnms.max(1) as f64;
        f.class_wan = records.iter().rev().filter(|r| r.flow == f.agent_flow).find_map(|r| r.state.get(CLASS_STATE).copied());
    }
    let classed = cnm.iter().any(|r| is_wan(r).is_some());
    let mut qfb: Vec<f64> = cnm.iter().filter_map(|r| r.qcn_fb.map(f64::from)).collect();
    qfb.sort_by(f64::total_cmp);
    Some(CnmSummary {
        router_sent,
        delivered: cnm.len() as u64,
        delivered_wan: classed.then(|| cnm.iter().filter(|r| is_wan(r) == Some(true)).count() as u64),
        qfb_mean: (!qfb.is_empty()).then(|| qfb.iter().sum::<f64>() / qfb.len() as f64),
        qfb_p99: quantile_type7(&qfb, 0.99),
        sample_to_read_us: LatencyUs::of(cnm.iter().filter_map(|r| r.cnm_sample_to_read_us.map(|x| x as f64)).collect()),
        read_to_action_us: LatencyUs::of(cnm.iter().filter_map(|r| r.cnm_read_to_action_us.map(|x| x as f64)).collect()),
        flows: flows.into_values().collect(),
    })
}

/// Queue held by one propagation delay class.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClassQueue {
    /// The class (`network.class_delays` entry, or "default") and its one-way delay.
    pub class: String,
    pub delay_ms: f64,
    pub mean_pkts: f64,
    /// Its part of the mean queue (0..1).
    pub share: Option<f64>,
}

/// The bottleneck and the flows over a set of intervals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Phase {
    /// Since the start of traffic, s; `seconds` is the total length of the intervals.
    pub start_s: f64,
    pub end_s: f64,
    pub seconds: f64,
    /// Wire throughput of the backlogged TCP flows (unsized bulk, scheme's and cross) and of the
    /// sized ones, Mbit/s.
    pub backlogged_mbps: f64,
    pub sized_mbps: f64,
    /// The backlogged flows' part of what both delivered.
    pub backlogged_share: Option<f64>,
    /// The queue every 10 ms, packets.
    pub queue_mean_pkts: Option<f64>,
    pub queue_p50_pkts: Option<f64>,
    pub queue_p95_pkts: Option<f64>,
    pub queue_max_pkts: Option<u32>,
    pub queue_by_class: Vec<ClassQueue>,
    pub drops: u64,
    /// CNM reports delivered to flows (and to WAN-class flows).
    pub cnms: Option<u64>,
    pub cnms_wan: Option<u64>,
}

/// The sized flows that started together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Burst {
    pub start_s: f64,
    pub flows: usize,
    pub completed: usize,
    pub bytes: u64,
    /// Each flow's completion time (or time until it was cut off), s.
    pub fct_s: Vec<f64>,
    pub fct_mean_s: Option<f64>,
    /// The burst's completion time: its last flow's (none when one was cut off).
    pub fct_max_s: Option<f64>,
    /// From the burst's start to its completion (or the end of the run).
    pub during: Phase,
}

/// Every burst of a run and the time between them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BurstSummary {
    pub bursts: Vec<Burst>,
    /// The measurement window outside every burst.
    pub between: Option<Phase>,
}

/// What the phase computation reads.
pub struct RunSeries<'a> {
    pub plans: &'a [FlowPlan],
    pub extra: &'a [FlowExtra],
    pub ticks: &'a [Tick],
    pub series: &'a LinkSeries,
    /// The queue grid's step (its first instant is the start of traffic), ns.
    pub step_ns: u64,
    pub traffic_start_ns: u64,
    /// (label, one-way delay ns) of each entry of `series.queue_by_delay`.
    pub classes: &'a [(String, u64)],
    pub agent: &'a [AgentRecord],
}

impl RunSeries<'_> {
    fn abs_ns(&self, rel_s: f64) -> u64 {
        self.traffic_start_ns + (rel_s.max(0.0) * NS_PER_S) as u64
    }

    /// Grid indices whose instants fall in the intervals (relative s).
    fn grid_indices(&self, spans: &[(f64, f64)]) -> Vec<usize> {
        let step_s = self.step_ns.max(1) as f64 / NS_PER_S;
        let n = self.series.queue.len();
        let mut v = Vec::new();
        for &(a, b) in spans {
            let k0 = (a / step_s).ceil().max(0.0) as usize;
            v.extend((k0..n).take_while(|&k| (k as f64) * step_s < b));
        }
        v
    }

    /// Wire bytes the flows selected by `pick` received in the intervals.
    fn bytes(&self, spans: &[(f64, f64)], pick: impl Fn(&PlanKind) -> bool) -> f64 {
        self.plans
            .iter()
            .enumerate()
            .filter(|(_, p)| pick(&p.kind))
            .map(|(i, p)| {
                spans
                    .iter()
                    .map(|&(a, b)| (rx_at(self.ticks, i, self.abs_ns(b)) - rx_at(self.ticks, i, self.abs_ns(a))).max(0.0))
                    .sum::<f64>()
                    * p.kind.wire_per_payload()
            })
            .sum::<f64>()
    }

    /// The phase over the intervals (relative s, disjoint).
    pub fn phase(&self, spans: &[(f64, f64)]) -> Phase {
        let seconds: f64 = spans.iter().map(|(a, b)| (b - a).max(0.0)).sum();
        let idx = self.grid_indices(spans);
        let mut q: Vec<f64> = idx.iter().map(|&k| f64::from(self.series.queue[k])).collect();
        q.sort_by(f64::total_cmp);
        let mean = (!q.is_empty()).then(|| q.iter().sum::<f64>() / q.len() as f64);
        let queue_by_class = self
            .classes
            .iter()
            .zip(&self.series.queue_by_delay)
            .map(|((label, delay), series)| {
                let m =
                    if idx.is_empty() { 0.0 } else { idx.iter().map(|&k| f64::from(series[k])).sum::<f64>() / idx.len() as f64 };
                ClassQueue {
                    class: label.clone(),
                    delay_ms: *delay as f64 / 1e6,
                    mean_pkts: m,
                    share: mean.filter(|&t| t > 0.0).map(|t| m / t),
                }
            })
            .collect();
        let mbps = |bytes: f64| if seconds > 0.0 { bytes * 8.0 / seconds / 1e6 } else { 0.0 };
        let backlogged = mbps(self.bytes(spans, |k| matches!(k, PlanKind::Bulk { bytes: None, .. })));
        let sized = mbps(self.bytes(spans, |k| matches!(k, PlanKind::Bulk { bytes: Some(_), .. })));
        let in_spans = |t_ns: u64| {
            let t = t_ns.saturating_sub(self.traffic_start_ns) as f64 / NS_PER_S;
            t_ns >= self.traffic_start_ns && spans.iter().any(|&(a, b)| t >= a && t < b)
        };
        let cnm: Vec<&AgentRecord> = self.agent.iter().filter(|r| r.qcn_fb.is_some() && in_spans(r.t_ns)).collect();
        let traced = self.agent.iter().any(|r| r.qcn_fb.is_some());
        let classed = self.agent.iter().any(|r| r.state.contains_key(CLASS_STATE));
        Phase {
            start_s: spans.first().map_or(0.0, |s| s.0),
            end_s: spans.last().map_or(0.0, |s| s.1),
            seconds,
            backlogged_mbps: backlogged,
            sized_mbps: sized,
            backlogged_share: (backlogged + sized > 0.0).then(|| backlogged / (backlogged + sized)),
            queue_mean_pkts: mean,
            queue_p50_pkts: quantile_type7(&q, 0.5),
            queue_p95_pkts: quantile_type7(&q, 0.95),
            queue_max_pkts: q.last().map(|&x| x as u32),
            queue_by_class,
            drops: idx.iter().filter_map(|&k| self.series.drops.get(k)).map(|&d| u64::from(d)).sum(),
            cnms: traced.then_some(cnm.len() as u64),
            cnms_wan: (traced && classed).then(|| cnm.iter().filter(|r| is_wan(r) == Some(true)).count() as u64),
        }
    }
}

/// The received bytes of flow `i` at `t` (ns since the emulator started), interpolated.
fn rx_at(ticks: &[Tick], flow: usize, t: u64) -> f64 {
    let rx = |k: &Tick| k.flows.get(flow).map_or(0.0, |s| s.rx_bytes as f64);
    let i = ticks.partition_point(|k| k.t_ns <= t);
    match (i.checked_sub(1).map(|j| &ticks[j]), ticks.get(i)) {
        (Some(a), Some(b)) if b.t_ns > a.t_ns => rx(a) + (rx(b) - rx(a)) * (t - a.t_ns) as f64 / (b.t_ns - a.t_ns) as f64,
        (Some(a), _) => rx(a),
        (None, _) => 0.0,
    }
}

/// The bursts of a run (sized flows grouped by start time) and the window between them;
/// `None` when the run has no sized flow. `window` is the measurement window, relative s.
pub fn bursts(r: &RunSeries<'_>, window: (f64, f64)) -> Option<BurstSummary> {
    let mut groups: BTreeMap<u128, Vec<usize>> = BTreeMap::new();
    for (i, p) in r.plans.iter().enumerate() {
        if matches!(p.kind, PlanKind::Bulk { bytes: Some(_), .. }) {
            groups.entry(p.start.as_nanos()).or_default().push(i);
        }
    }
    if groups.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (start_ns, members) in groups {
        let start_s = start_ns as f64 / NS_PER_S;
        let records: Vec<_> = members.iter().map(|&i| r.extra.get(i).and_then(|e| e.short_flows.first()).copied()).collect();
        let fct_s: Vec<f64> = records.iter().flatten().map(|f| f.duration_s).collect();
        let done: Vec<f64> = records.iter().flatten().filter(|f| f.completed).map(|f| f.duration_s).collect();
        let all_done = done.len() == members.len();
        let fct_max = all_done.then(|| done.iter().copied().fold(0.0, f64::max));
        let end_s = match fct_max {
            Some(m) => (start_s + m).min(window.1),
            None => window.1,
        };
        out.push(Burst {
            start_s,
            flows: members.len(),
            completed: done.len(),
            bytes: members.iter().filter_map(|&i| sized_bytes(&r.plans[i].kind)).sum(),
            fct_mean_s: (!done.is_empty()).then(|| done.iter().sum::<f64>() / done.len() as f64),
            fct_max_s: fct_max,
            fct_s,
            during: r.phase(&[(start_s, end_s)]),
        });
    }
    // The window minus every burst.
    let mut spans = vec![window];
    for b in &out {
        let (a, z) = (b.during.start_s, b.during.end_s);
        spans =
            spans
                .into_iter()
                .flat_map(|(s, e)| {
                    if z <= s || a >= e {
                        vec![(s, e)]
                    } else {
                        [(s, a), (z, e)].into_iter().filter(|(x, y)| y > x).collect()
                    }
                })
                .collect();
    }
    let between = (!spans.is_empty()).then(|| r.phase(&spans));
    Some(BurstSummary { bursts: out, between })
}

fn sized_bytes(kind: &PlanKind) -> Option<u64> {
    match kind {
        PlanKind::Bulk { bytes, .. } => *bytes,
        _ => None,
    }
}

/// CNM reports per time bin (bins of `bin_ns` from the emulator's start, ending at `t_s` as
/// the link bins do): (t_s, all, WAN class).
pub fn cnm_bins(records: &[AgentRecord], bin_ns: u64, nbins: usize) -> Vec<(f64, f64, f64)> {
    let mut all = vec![0u64; nbins];
    let mut wan = vec![0u64; nbins];
    for r in records.iter().filter(|r| r.qcn_fb.is_some()) {
        let b = (r.t_ns / bin_ns.max(1)) as usize;
        if b < nbins {
            all[b] += 1;
            if is_wan(r) == Some(true) {
                wan[b] += 1;
            }
        }
    }
    (0..nbins).map(|b| ((b as u64 + 1) as f64 * bin_ns as f64 / NS_PER_S, all[b] as f64, wan[b] as f64)).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::traffic::{FlowSample, Role, ShortFlow};

    fn rec(t_ms: u64, flow: &str, qfb: Option<u8>, wan: f64) -> AgentRecord {
        AgentRecord {
            t_ns: t_ms * 1_000_000,
            flow: flow.into(),
            cwnd_bytes: None,
            pacing_rate_bytes_per_s: None,
            state: [(CLASS_STATE.to_string(), wan)].into_iter().collect(),
            qcn_fb: qfb,
            cnm_sample_to_read_us: qfb.map(|q| u64::from(q) * 10),
            cnm_read_to_action_us: qfb.map(|_| 30),
        }
    }

    #[test]
    fn cnms_are_counted_per_flow_and_class() {
        let records = vec![
            rec(1000, "1", None, 1.0),
            rec(1100, "1", Some(4), 1.0),
            rec(1200, "1", Some(8), 1.0),
            rec(1300, "2", Some(2), 0.0),
        ];
        let c = cnm_summary(5, &records, 1_000_000_000).unwrap();
        assert_eq!((c.router_sent, c.delivered, c.delivered_wan), (5, 3, Some(2)));
        assert!((c.qfb_mean.unwrap() - 14.0 / 3.0).abs() < 1e-9);
        assert_eq!(c.flows.len(), 2);
        assert_eq!((c.flows[0].cnms, c.flows[0].class_wan), (2, Some(1.0)));
        assert!((c.flows[0].first_s - 0.1).abs() < 1e-9 && (c.flows[0].last_s - 0.2).abs() < 1e-9);
        let s = c.sample_to_read_us.unwrap();
        assert_eq!((s.count, s.p50, s.max), (3, 40.0, 80.0));
        assert!(cnm_summary(0, &records[..1], 0).is_none());
        let bins = cnm_bins(&records, 100_000_000, 20);
        assert_eq!((bins[11].1, bins[11].2, bins[13].1, bins[13].2), (1.0, 1.0, 1.0, 0.0));
    }

    fn plan(kind: PlanKind, start_s: u64) -> FlowPlan {
        FlowPlan {
            label: "f".into(),
            role: Role::Scheme,
            kind,
            start: Duration::from_secs(start_s),
            stop: Duration::from_secs(10),
        }
    }

    #[test]
    fn a_burst_and_the_time_around_it() {
        // Traffic starts at emulator time 1 s; a backlogged flow receives 1 MB/s throughout, and
        // two 1 MB flows start at 2 s and take 1 and 2 s (each receiving 0.5 MB/s while it runs).
        let bulk = |bytes| PlanKind::Bulk { cc: "x".into(), receiver_cc: None, bytes, quic: None };
        let plans = vec![plan(bulk(None), 0), plan(bulk(Some(1_000_000)), 2), plan(bulk(Some(1_000_000)), 2)];
        let t0 = 1_000_000_000u64;
        let ticks: Vec<Tick> = (0..=10u64)
            .map(|s| {
                let sized = |len: u64| (s.saturating_sub(2).min(len) * 500_000).min(1_000_000);
                let flows = [s * 1_000_000, sized(2), sized(2)]
                    .iter()
                    .map(|&rx| FlowSample { rx_bytes: rx, ..FlowSample::default() })
                    .collect();
                Tick { t_ns: t0 + s * 1_000_000_000, flows }
            })
            .collect();
        let sf = |d| FlowExtra {
            short_flows: vec![ShortFlow { start_s: 2.0, size_bytes: 1_000_000, duration_s: d, completed: true }],
            ..FlowExtra::default()
        };
        let extra = vec![FlowExtra::default(), sf(1.0), sf(2.0)];
        // Queue every second: 10 packets, 50 during the burst [2, 4) s, 3 of them the WAN class.
        let queue: Vec<u32> = (0..10).map(|k| if (2..4).contains(&k) { 50 } else { 10 }).collect();
        let wan: Vec<u32> = (0..10).map(|k| if (2..4).contains(&k) { 30 } else { 10 }).collect();
        let dc: Vec<u32> = queue.iter().zip(&wan).map(|(q, w)| q - w).collect();
        let mut drops = vec![0u32; 10];
        drops[3] = 7;
        let series = LinkSeries { queue, drops, queue_by_delay: vec![dc, wan] };
        let classes = vec![("default".to_string(), 500_000), ("dport=5201".to_string(), 15_000_000)];
        let agent = vec![rec(3500, "1", Some(3), 1.0), rec(6000, "2", Some(3), 0.0)];
        let r = RunSeries {
            plans: &plans,
            extra: &extra,
            ticks: &ticks,
            series: &series,
            step_ns: 1_000_000_000,
            traffic_start_ns: t0,
            classes: &classes,
            agent: &agent,
        };
        let b = bursts(&r, (1.0, 10.0)).unwrap();
        assert_eq!(b.bursts.len(), 1);
        let x = &b.bursts[0];
        assert_eq!((x.flows, x.completed, x.bytes), (2, 2, 2_000_000));
        assert_eq!((x.fct_mean_s, x.fct_max_s), (Some(1.5), Some(2.0)));
        let d = &x.during;
        assert_eq!((d.start_s, d.end_s, d.seconds), (2.0, 4.0, 2.0));
        let w = crate::traffic::TCP_WIRE_PER_PAYLOAD;
        assert!((d.backlogged_mbps - 8.0 * w).abs() < 1e-9, "{d:?}");
        assert!((d.sized_mbps - 8.0 * w).abs() < 1e-9, "{d:?}");
        assert_eq!(
            (d.queue_mean_pkts, d.queue_max_pkts, d.drops, d.cnms, d.cnms_wan),
            (Some(50.0), Some(50), 7, Some(1), Some(1))
        );
        assert!((d.queue_by_class[1].mean_pkts - 30.0).abs() < 1e-9 && (d.queue_by_class[1].share.unwrap() - 0.6).abs() < 1e-9);
        let between = b.between.unwrap();
        assert_eq!((between.start_s, between.end_s, between.seconds), (1.0, 10.0, 7.0));
        assert_eq!((between.queue_mean_pkts, between.drops, between.cnms, between.cnms_wan), (Some(10.0), 0, Some(1), Some(0)));
        assert!((between.backlogged_mbps - 8.0 * w).abs() < 1e-9 && between.sized_mbps.abs() < 1e-9, "{between:?}");
        assert!(bursts(&RunSeries { plans: &plans[..1], ..r }, (1.0, 10.0)).is_none());
    }
}
