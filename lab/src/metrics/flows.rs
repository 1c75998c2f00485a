//! Per-flow metrics from the flows' samples: throughput and TCP_INFO time series, and each
//! flow's summary over the window (wire-level throughput, share of capacity, SRTT, ECN, short
//! flows' completion).

use serde::Serialize;

use super::{Window, NS_PER_S};
use crate::traffic::{FlowPlan, FlowSample, PlanKind, Role, ShortFlow};

/// One sample instant of every flow, ns since the emulator started.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub t_ns: u64,
    pub flows: Vec<FlowSample>,
}

/// One flow at one sample instant (the rate is over the interval ending here).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowPoint {
    pub t_s: f64,
    pub flow: String,
    pub throughput_mbps: f64,
    pub cwnd_pkts: Option<u32>,
    pub srtt_ms: Option<f64>,
    pub delivery_rate_mbps: Option<f64>,
    pub pacing_rate_mbps: Option<f64>,
    pub retrans: Option<u32>,
    pub delivered_ce: Option<u32>,
}

/// A flow over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowSummary {
    pub flow: String,
    pub role: Option<Role>,
    #[serde(rename = "type")]
    pub kind: String,
    pub cc: Option<String>,
    /// Wire-level throughput in the window, Mbit/s.
    pub throughput_mbps: f64,
    /// Share of the link's capacity in the window.
    pub share_of_capacity: f64,
    pub mean_srtt_ms: Option<f64>,
    pub retrans: Option<u32>,
    pub delivered: Option<u32>,
    pub delivered_ce: Option<u32>,
    /// CE-marked packets the receiving socket counted (compare with `delivered_ce`: classic ECN
    /// repeats ECE until CWR, so the sender's count overstates the marks).
    pub received_ce: Option<u32>,
    pub ecn_negotiated: Option<bool>,
    /// Poisson TCP: flows started, completed, skipped; median completion time.
    pub short_flows: Option<u64>,
    pub short_flows_completed: Option<u64>,
    pub short_flows_skipped: Option<u64>,
    pub short_fct_p50_s: Option<f64>,
    /// UDP datagrams the sender's kernel refused.
    pub send_failures: Option<u64>,
    /// Sized flows (`flows[].bytes`): the size, and the completion time (none when cut off).
    pub size_bytes: Option<u64>,
    pub completion_s: Option<f64>,
}

/// Wire bytes of a flow's received bytes.
fn wire_bytes(kind: &PlanKind, rx: u64) -> f64 {
    rx as f64 * kind.wire_per_payload()
}

/// The received bytes at time `t` by linear interpolation between ticks (flat outside).
pub(super) fn rx_at(ticks: &[Tick], flow: usize, t: u64) -> f64 {
    let rx = |k: &Tick| k.flows.get(flow).map_or(0.0, |s| s.rx_bytes as f64);
    let i = ticks.partition_point(|k| k.t_ns <= t);
    match (i.checked_sub(1).map(|j| &ticks[j]), ticks.get(i)) {
        (Some(a), Some(b)) if b.t_ns > a.t_ns => rx(a) + (rx(b) - rx(a)) * (t - a.t_ns) as f64 / (b.t_ns - a.t_ns) as f64,
        (Some(a), _) => rx(a),
        (None, _) => 0.0,
    }
}

/// Per-flow time series and window summaries from the ticks. `extra` carries what the flows'
/// threads collected besides bytes (final counters, short flows), per flow.
pub fn flow_metrics(
    plans: &[FlowPlan],
    ticks: &[Tick],
    w: Window,
    capacity_mbps: f64,
    extra: &[FlowExtra],
) -> (Vec<FlowSummary>, Vec<FlowPoint>) {
    let mut points = Vec::new();
    for pair in ticks.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let dt = (b.t_ns.saturating_sub(a.t_ns)) as f64 / NS_PER_S;
        if dt <= 0.0 {
            continue;
        }
        for (i, p) in plans.iter().enumerate() {
            let (Some(sa), Some(sb)) = (a.flows.get(i), b.flows.get(i)) else { continue };
            let bytes = wire_bytes(&p.kind, sb.rx_bytes.saturating_sub(sa.rx_bytes));
            let tcp = sb.tcp;
            points.push(FlowPoint {
                t_s: b.t_ns as f64 / NS_PER_S,
                flow: p.label.clone(),
                throughput_mbps: bytes * 8.0 / dt / 1e6,
                cwnd_pkts: tcp.map(|t| t.cwnd_pkts),
                srtt_ms: tcp.map(|t| f64::from(t.srtt_us) / 1000.0),
                delivery_rate_mbps: tcp.map(|t| t.delivery_rate_bps / 1e6),
                pacing_rate_mbps: tcp.map(|t| t.pacing_rate_bps / 1e6),
                retrans: tcp.map(|t| t.total_retrans),
                delivered_ce: tcp.map(|t| t.delivered_ce),
            });
        }
    }
    let secs = w.seconds().max(1e-9);
    let summaries = plans
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let bytes = wire_bytes(&p.kind, (rx_at(ticks, i, w.end_ns) - rx_at(ticks, i, w.start_ns)).max(0.0) as u64);
            let mbps = bytes * 8.0 / secs / 1e6;
            let in_window: Vec<f64> = ticks
                .iter()
                .filter(|k| w.contains(k.t_ns))
                .filter_map(|k| k.flows.get(i).and_then(|s| s.tcp).map(|t| f64::from(t.srtt_us) / 1000.0))
                .filter(|&r| r > 0.0)
                .collect();
            let last_tcp = ticks.iter().rev().find_map(|k| k.flows.get(i).and_then(|s| s.tcp));
            let last_rcv = ticks.iter().rev().find_map(|k| k.flows.get(i).and_then(|s| s.receiver_tcp));
            let e = extra.get(i).cloned().unwrap_or_default();
            let short = matches!(p.kind, PlanKind::PoissonTcp { .. });
            let mut fcts: Vec<f64> = e.short_flows.iter().filter(|f| f.completed).map(|f| f.duration_s).collect();
            fcts.sort_by(f64::total_cmp);
            FlowSummary {
                flow: p.label.clone(),
                role: Some(p.role),
                kind: p.kind.type_name().to_string(),
                cc: p.kind.cc(),
                throughput_mbps: mbps,
                share_of_capacity: if capacity_mbps > 0.0 { mbps / capacity_mbps } else { 0.0 },
                mean_srtt_ms: (!in_window.is_empty()).then(|| in_window.iter().sum::<f64>() / in_window.len() as f64),
                retrans: last_tcp.map(|t| t.total_retrans),
                delivered: last_tcp.map(|t| t.delivered),
                delivered_ce: last_tcp.map(|t| t.delivered_ce),
                received_ce: last_rcv.map(|t| t.received_ce),
                ecn_negotiated: last_tcp.map(|t| t.ecn_negotiated),
                short_flows: short.then_some(e.short_flows.len() as u64),
                short_flows_completed: short.then_some(fcts.len() as u64),
                short_flows_skipped: short.then_some(e.skipped),
                short_fct_p50_s: fcts.get(fcts.len().saturating_sub(1) / 2).copied(),
                send_failures: matches!(p.kind, PlanKind::Udp { .. }).then_some(e.send_failures),
                size_bytes: sized(&p.kind),
                completion_s: sized(&p.kind).and_then(|_| e.short_flows.first()).filter(|f| f.completed).map(|f| f.duration_s),
            }
        })
        .collect();
    (summaries, points)
}

/// The size of a sized bulk flow.
fn sized(kind: &PlanKind) -> Option<u64> {
    match kind {
        PlanKind::Bulk { bytes, .. } => *bytes,
        _ => None,
    }
}

/// What a flow's threads collected besides byte counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowExtra {
    pub short_flows: Vec<ShortFlow>,
    pub skipped: u64,
    pub send_failures: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_support::{bulk, plan};
    use crate::traffic::TcpInfo;

    #[test]
    fn flow_throughput_and_shares() {
        let plans = vec![
            plan("a", Role::Scheme, bulk(), 0, 10),
            plan(
                "cbr",
                Role::Cross,
                PlanKind::Udp { rate_bps: 4e6, packet_bytes: 1500, poisson_seed: None, on_off: None },
                0,
                10,
            ),
        ];
        // 1448 payload bytes per ms for the TCP flow (12 Mbit/s on the wire), 500 B/ms of UDP.
        let ticks: Vec<Tick> = (0..=10u64)
            .map(|s| Tick {
                t_ns: s * 1_000_000_000,
                flows: vec![
                    FlowSample {
                        rx_bytes: s * 1_448_000,
                        tx_bytes: 0,
                        tcp: Some(TcpInfo { srtt_us: 20_000, cwnd_pkts: 10, ..TcpInfo::default() }),
                        receiver_tcp: Some(TcpInfo { received_ce: 3, ..TcpInfo::default() }),
                    },
                    FlowSample { rx_bytes: s * 500_000, tx_bytes: 0, tcp: None, receiver_tcp: None },
                ],
            })
            .collect();
        let w = Window { start_ns: 2_000_000_000, end_ns: 10_000_000_000, bin_ns: 1_000_000_000 };
        let (sum, points) = flow_metrics(&plans, &ticks, w, 24.0, &[]);
        assert!((sum[0].throughput_mbps - 12.0).abs() < 1e-6, "{}", sum[0].throughput_mbps);
        assert!((sum[0].share_of_capacity - 0.5).abs() < 1e-6);
        assert!((sum[1].throughput_mbps - 4.0).abs() < 1e-6);
        assert_eq!(sum[0].mean_srtt_ms, Some(20.0));
        assert_eq!(sum[0].received_ce, Some(3));
        assert_eq!(sum[1].send_failures, Some(0));
        assert_eq!(points.len(), 20);
        assert!((points[0].throughput_mbps - 12.0).abs() < 1e-6);
        assert_eq!(points[0].cwnd_pkts, Some(10));
        // Interpolation between ticks for a window edge in the middle of an interval.
        let w = Window { start_ns: 2_500_000_000, end_ns: 3_500_000_000, bin_ns: 1_000_000_000 };
        let (sum, _) = flow_metrics(&plans, &ticks, w, 24.0, &[]);
        assert!((sum[1].throughput_mbps - 4.0).abs() < 1e-6);
    }
}
