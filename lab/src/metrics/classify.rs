//! Classification accuracy (specs/nimbus.md §10): at each sample instant of the window, whether
//! the agent's last reported state (e.g. Nimbus `mode`) matches the ground truth — "elastic"
//! while any elastic cross traffic is active.

use std::collections::BTreeMap;

use serde::Serialize;

use super::agent_trace::AgentRecord;
use super::flows::FlowExtra;
use super::{Window, NS_PER_S};
use crate::config::ClassifySpec;
use crate::traffic::poisson::ELASTIC_MIN_BYTES;
use crate::traffic::{FlowPlan, PlanKind, Role};

/// Whether elastic cross traffic is active at `t_ns`: a long-lived TCP cross flow between its
/// start and stop, or a Poisson TCP flow larger than the initial window while it runs.
/// `traffic_start_ns` converts the plans' offsets to the emulator's clock.
pub fn elastic_at(plans: &[FlowPlan], extra: &[FlowExtra], traffic_start_ns: u64, t_ns: u64) -> bool {
    let rel = t_ns.saturating_sub(traffic_start_ns) as f64 / NS_PER_S;
    plans.iter().enumerate().filter(|(_, p)| p.role == Role::Cross).any(|(i, p)| match &p.kind {
        PlanKind::Bulk { .. } => rel >= p.start.as_secs_f64() && rel < p.stop.as_secs_f64(),
        PlanKind::PoissonTcp { .. } => extra.get(i).is_some_and(|e| {
            e.short_flows.iter().any(|f| f.size_bytes >= ELASTIC_MIN_BYTES && rel >= f.start_s && rel < f.start_s + f.duration_s)
        }),
        PlanKind::Udp { .. } => false,
    })
}

/// The classification at one instant for one agent flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassPoint {
    pub t_s: f64,
    pub flow: String,
    pub truth_elastic: bool,
    pub predicted_elastic: bool,
    pub value: f64,
}

/// Per-flow accuracy and the points it was computed from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Classification {
    /// Mean over the agent's flows.
    pub accuracy: Option<f64>,
    pub per_flow: BTreeMap<String, f64>,
    #[serde(skip)]
    pub points: Vec<ClassPoint>,
}

impl ClassifySpec {
    fn elastic(&self, v: f64) -> bool {
        match (self.elastic_if_equals, self.elastic_if_above) {
            (Some(e), _) => (v - e).abs() < 0.5,
            (None, Some(a)) => v > a,
            (None, None) => false,
        }
    }
}

/// Classification accuracy on the window's sample grid. `truth` says whether elastic traffic is
/// active at an instant (ns since the emulator started).
pub fn classify(records: &[AgentRecord], spec: &ClassifySpec, w: Window, truth: impl Fn(u64) -> bool) -> Classification {
    let mut by_flow: BTreeMap<&str, Vec<(u64, f64)>> = BTreeMap::new();
    for r in records {
        if let Some(&v) = r.state.get(&spec.state) {
            by_flow.entry(r.flow.as_str()).or_default().push((r.t_ns, v));
        }
    }
    let mut c = Classification::default();
    for (flow, series) in by_flow {
        let (mut right, mut total) = (0u64, 0u64);
        let mut t = w.start_ns.div_ceil(w.bin_ns.max(1)) * w.bin_ns.max(1);
        while t < w.end_ns {
            let i = series.partition_point(|(ts, _)| *ts <= t);
            if let Some(&(_, v)) = i.checked_sub(1).map(|j| &series[j]) {
                let (truth_elastic, predicted_elastic) = (truth(t), spec.elastic(v));
                total += 1;
                right += u64::from(truth_elastic == predicted_elastic);
                c.points.push(ClassPoint {
                    t_s: t as f64 / NS_PER_S,
                    flow: flow.to_string(),
                    truth_elastic,
                    predicted_elastic,
                    value: v,
                });
            }
            t += w.bin_ns.max(1);
        }
        if total > 0 {
            c.per_flow.insert(flow.to_string(), right as f64 / total as f64);
        }
    }
    if !c.per_flow.is_empty() {
        c.accuracy = Some(c.per_flow.values().sum::<f64>() / c.per_flow.len() as f64);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::agent_trace::parse_agent_trace;
    use crate::metrics::test_support::{bulk, plan};
    use crate::traffic::ShortFlow;

    #[test]
    fn ground_truth_follows_elastic_cross_traffic() {
        let plans = vec![
            plan("nimbus", Role::Scheme, bulk(), 0, 60),
            plan("cubic", Role::Cross, bulk(), 20, 40),
            plan(
                "cbr",
                Role::Cross,
                PlanKind::Udp { rate_bps: 1e6, packet_bytes: 1500, poisson_seed: None, on_off: None },
                0,
                60,
            ),
            plan(
                "web",
                Role::Cross,
                PlanKind::PoissonTcp {
                    load_bps: 1e6,
                    mean_size_bytes: 1000,
                    fixed_size: true,
                    cc: "cubic".into(),
                    max_concurrent: 1,
                    seed: 1,
                },
                0,
                60,
            ),
        ];
        let extra = vec![
            FlowExtra::default(),
            FlowExtra::default(),
            FlowExtra::default(),
            FlowExtra {
                short_flows: vec![
                    ShortFlow { start_s: 50.0, size_bytes: 100_000, duration_s: 2.0, completed: true },
                    ShortFlow { start_s: 10.0, size_bytes: 1_000, duration_s: 5.0, completed: true },
                ],
                ..FlowExtra::default()
            },
        ];
        let s = |x: f64| 1_000_000_000 + (x * 1e9) as u64; // traffic started 1 s after the router
        assert!(!elastic_at(&plans, &extra, 1_000_000_000, s(5.0)));
        assert!(!elastic_at(&plans, &extra, 1_000_000_000, s(12.0)), "small flows are not elastic");
        assert!(elastic_at(&plans, &extra, 1_000_000_000, s(25.0)));
        assert!(!elastic_at(&plans, &extra, 1_000_000_000, s(45.0)));
        assert!(elastic_at(&plans, &extra, 1_000_000_000, s(51.0)));
    }

    #[test]
    fn agent_traces_and_accuracy() {
        let router_start = 5_000_000_000u64;
        let mut text = String::new();
        // Monotonic µs; mode 1 (delay) until 3 s, then 0 (competitive). Flow ids may be numbers.
        for k in 0..60u64 {
            let t_us = router_start / 1000 + k * 100_000;
            let mode = if k < 30 { 1 } else { 0 };
            text += &format!("{{\"t_us\":{t_us},\"flow\":7,\"algorithm\":\"nimbus\",\"cwnd_bytes\":15000,\"pacing_rate_bytes_per_s\":1e6,\"state\":{{\"mode\":{mode},\"eta\":1.5}}}}\n");
        }
        text += "{\"t_us\": garbage\n";
        let (recs, bad) = parse_agent_trace(&text, router_start, 0);
        assert_eq!((recs.len(), bad), (60, 1));
        assert_eq!(recs[0].flow, "7");
        assert_eq!(recs[1].t_ns, 100_000_000);
        assert_eq!(recs[0].state["eta"], 1.5);
        // Relative times (µs since the agent started, 1 s before the router).
        let (rel, _) = parse_agent_trace("{\"t_us\":1500000,\"flow\":\"a\"}\n", router_start, router_start - 1_000_000_000);
        assert_eq!(rel[0].t_ns, 500_000_000);
        let spec = ClassifySpec { state: "mode".into(), elastic_if_equals: Some(0.0), elastic_if_above: None };
        let w = Window { start_ns: 0, end_ns: 6_000_000_000, bin_ns: 100_000_000 };
        // Truth: elastic from 2 s on → wrong between 2 s and 3 s (10 of 60 instants).
        let c = classify(&recs, &spec, w, |t| t >= 2_000_000_000);
        let acc = c.accuracy.unwrap();
        assert!((acc - 50.0 / 60.0).abs() < 1e-9, "{acc}");
        assert_eq!(c.points.len(), 60);
        let above = ClassifySpec { state: "eta".into(), elastic_if_equals: None, elastic_if_above: Some(2.0) };
        assert_eq!(classify(&recs, &above, w, |_| false).accuracy, Some(1.0));
        let missing = ClassifySpec { state: "nope".into(), elastic_if_equals: Some(0.0), elastic_if_above: None };
        assert_eq!(classify(&recs, &missing, w, |_| false).accuracy, None);
    }
}
