//! Fairness and the thesis's indices (specs/inigo.md §9): Jain's index of throughputs, each
//! flow's ideal share of the link under the flow schedule, the fairness and goodput indices
//! against it, the latency index, and the loss counts of a run.

use serde::Serialize;

use super::flows::{rx_at, Tick};
use super::NS_PER_S;
use crate::traffic::{FlowPlan, Role, TcpInfo};

/// Jain's fairness index of a set of throughputs (1 = equal).
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (x.len() > 1 && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

/// Each flow's ideal average rate over `[0, horizon_s]` (the unit of `capacity`): in every
/// interval between consecutive starts and stops the link is shared equally among the flows
/// active in it (specs/inigo.md §9.1: 5 flows starting 5 s apart, stopping in reverse, at
/// 500 Mb/s give 242.59/131.48/75.93/38.89/11.11 Mb/s). `spans` are (start_s, stop_s).
pub fn ideal_shares(spans: &[(f64, f64)], capacity: f64, horizon_s: f64) -> Vec<f64> {
    let clip = |t: f64| t.clamp(0.0, horizon_s);
    let mut edges: Vec<f64> = spans.iter().flat_map(|&(a, b)| [clip(a), clip(b)]).collect();
    edges.sort_by(f64::total_cmp);
    edges.dedup();
    let mut avg = vec![0.0; spans.len()];
    if horizon_s <= 0.0 {
        return avg;
    }
    for e in edges.windows(2) {
        let (t0, t1) = (e[0], e[1]);
        let active: Vec<usize> = (0..spans.len()).filter(|&i| clip(spans[i].0) <= t0 && clip(spans[i].1) >= t1).collect();
        for &i in &active {
            avg[i] += capacity / active.len() as f64 * (t1 - t0) / horizon_s;
        }
    }
    avg
}

/// The thesis's fairness and goodput indices (specs/inigo.md §9.2) from each flow's achieved
/// average `t` and ideal average `o`: JFI over x_i = t_i / o_i, and Σt / Σo. Flows with o_i = 0
/// (never scheduled in the run) are left out of the JFI.
pub fn ideal_indices(t: &[f64], o: &[f64]) -> (Option<f64>, Option<f64>) {
    let x: Vec<f64> = t.iter().zip(o).filter(|(_, &o)| o > 0.0).map(|(t, o)| t / o).collect();
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    let jfi = (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq));
    let so: f64 = o.iter().sum();
    (jfi, (so > 0.0).then(|| t.iter().sum::<f64>() / so))
}

/// The thesis's latency index: the configured propagation RTT over the p99 of the per-ACK SRTT
/// samples (≤ 1 when queues only add delay).
pub fn latency_index(rtt_us: f64, srtt_p99_us: f64) -> Option<f64> {
    (rtt_us > 0.0 && srtt_p99_us > 0.0).then(|| rtt_us / srtt_p99_us)
}

/// The thesis's indices and loss counts of one run (specs/inigo.md §9.2), over the whole run:
/// the ideal shares are defined by the flow schedule from the start of traffic, so the warm-up
/// does not apply to them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Indices {
    /// o_i: each scheme flow's ideal average over the run, Mbit/s (of the link's mean rate).
    pub ideal_mbps: Vec<f64>,
    /// t_i: each scheme flow's goodput (TCP payload received) over the run, Mbit/s.
    pub goodput_mbps: Vec<f64>,
    /// Jain's index over x_i = t_i / o_i.
    pub jain_ideal: Option<f64>,
    /// Σ t_i / Σ o_i (≤ 1448/1500 ≈ 0.965 for payload on a 1500-byte MTU; the thesis's 0.97).
    pub goodput_index: Option<f64>,
    /// Configured RTT / p99 of the per-ACK SRTT samples of the scheme's flows.
    pub latency_index: Option<f64>,
    pub srtt_p99_ms: Option<f64>,
    /// 100 × Σ tcpi_total_retrans / Σ tcpi_segs_out over the scheme's senders at the end.
    pub retx_pct: Option<f64>,
    pub retrans_segs: u64,
    /// tcpi_segs_out: every segment sent, retransmissions and the few pure ACKs included (as
    /// netstat's OutSegs, which the thesis divided by).
    pub segs_out: u64,
    /// tcpi_data_segs_out: data segments, retransmissions included.
    pub data_segs_out: u64,
    /// 100 × packets dropped at the bottleneck (buffer + AQM) / packets that arrived at it.
    pub drop_pct: Option<f64>,
    pub bottleneck_arrivals: u64,
    pub bottleneck_drops: u64,
}

/// The thesis's indices of one run from what it recorded: the scheme's flows (the plans with
/// role Scheme) over `span` (ns since the emulator started: the traffic's start and end), the
/// link's mean rate (Mbit/s) for the ideal shares, the configured RTT, the p99 of the per-ACK
/// SRTT samples, and the bottleneck's (down direction's) counters over the run.
pub fn run_indices(
    plans: &[FlowPlan],
    ticks: &[Tick],
    span: (u64, u64),
    link_mbps: f64,
    rtt_ms: f64,
    srtt_p99_ms: Option<f64>,
    bottleneck: &ccp_router::summary::Counters,
) -> Indices {
    let horizon_s = span.1.saturating_sub(span.0) as f64 / NS_PER_S;
    let scheme: Vec<usize> = (0..plans.len()).filter(|&i| plans[i].role == Role::Scheme).collect();
    let spans: Vec<(f64, f64)> = scheme.iter().map(|&i| (plans[i].start.as_secs_f64(), plans[i].stop.as_secs_f64())).collect();
    let ideal_mbps = ideal_shares(&spans, link_mbps, horizon_s);
    let goodput_mbps: Vec<f64> = scheme
        .iter()
        .map(|&i| (rx_at(ticks, i, span.1) - rx_at(ticks, i, span.0)).max(0.0) * 8.0 / horizon_s.max(1e-9) / 1e6)
        .collect();
    let (jain_ideal, goodput_index) = ideal_indices(&goodput_mbps, &ideal_mbps);
    let last_tcp: Vec<TcpInfo> =
        scheme.iter().filter_map(|&i| ticks.iter().rev().find_map(|k| k.flows.get(i).and_then(|s| s.tcp))).collect();
    let retrans_segs: u64 = last_tcp.iter().map(|t| u64::from(t.total_retrans)).sum();
    let segs_out: u64 = last_tcp.iter().map(|t| u64::from(t.segs_out)).sum();
    let bottleneck_drops = bottleneck.dropped_buffer + bottleneck.dropped_aqm;
    let pct = |num: u64, den: u64| (den > 0).then(|| 100.0 * num as f64 / den as f64);
    Indices {
        jain_ideal,
        goodput_index,
        latency_index: srtt_p99_ms.and_then(|p| latency_index(rtt_ms * 1000.0, p * 1000.0)),
        srtt_p99_ms,
        retx_pct: pct(retrans_segs, segs_out),
        retrans_segs,
        segs_out,
        data_segs_out: last_tcp.iter().map(|t| u64::from(t.data_segs_out)).sum(),
        drop_pct: pct(bottleneck_drops, bottleneck.packets_in),
        bottleneck_arrivals: bottleneck.packets_in,
        bottleneck_drops,
        ideal_mbps,
        goodput_mbps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::quantile_type7;
    use crate::metrics::test_support::{bulk, plan};
    use crate::traffic::FlowSample;

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[3.0]), None);
    }

    /// T-M1 (specs/inigo.md §14.4, thesis Fig 4.8): ideal (1, 1); fair but capped at 10 % (1, 0.1);
    /// one greedy flow taking the whole 500 Mb/s from five (0.2, 1).
    #[test]
    fn t_m1_fig_4_8_reference_cases() {
        let o = ideal_shares(&[(0.0, 5.0); 5], 500.0, 5.0);
        assert_eq!(o, vec![100.0; 5]);
        let (jfi, gi) = ideal_indices(&o, &o);
        assert_eq!((jfi, gi), (Some(1.0), Some(1.0)));
        let capped: Vec<f64> = o.iter().map(|x| x * 0.1).collect();
        let (jfi, gi) = ideal_indices(&capped, &o);
        assert!((jfi.unwrap() - 1.0).abs() < 1e-12 && (gi.unwrap() - 0.1).abs() < 1e-12, "{jfi:?} {gi:?}");
        let (jfi, gi) = ideal_indices(&[500.0, 0.0, 0.0, 0.0, 0.0], &o);
        assert!((jfi.unwrap() - 0.2).abs() < 1e-12 && (gi.unwrap() - 1.0).abs() < 1e-12, "{jfi:?} {gi:?}");
        // The convergence schedule's ideal is (1, 1) too.
        let o = ideal_shares(&convergence(), 500.0, 45.0);
        assert_eq!(ideal_indices(&o, &o), (Some(1.0), Some(1.0)));
    }

    /// Flow i of the thesis's convergence: from 5·i s to 45 − 5·i s.
    fn convergence() -> Vec<(f64, f64)> {
        (0..5).map(|i| (5.0 * f64::from(i), 45.0 - 5.0 * f64::from(i))).collect()
    }

    /// T-M2: the ideal per-flow averages of the 5-flow convergence at 500 Mb/s.
    #[test]
    fn t_m2_convergence_ideal_shares() {
        let o = ideal_shares(&convergence(), 500.0, 45.0);
        let want = [242.593, 131.481, 75.926, 38.889, 11.111];
        for (got, want) in o.iter().zip(want) {
            assert!((got - want).abs() < 5e-4, "{o:?}");
        }
        assert!((o.iter().sum::<f64>() - 500.0).abs() < 1e-9);
        // Flows listed in any order; a flow cut by the horizon; an idle gap lowers Σo.
        let o = ideal_shares(&[(20.0, 25.0), (0.0, 45.0)], 500.0, 45.0);
        assert!((o[0] - 250.0 * 5.0 / 45.0).abs() < 1e-9 && (o[1] - (500.0 * 40.0 + 250.0 * 5.0) / 45.0).abs() < 1e-9);
        let o = ideal_shares(&[(0.0, 10.0), (5.0, 20.0)], 100.0, 10.0);
        assert_eq!(o, vec![75.0, 25.0]);
        let o = ideal_shares(&[(0.0, 2.0), (4.0, 6.0)], 100.0, 10.0);
        assert_eq!(o, vec![20.0, 20.0]);
        assert_eq!(ideal_indices(&[10.0, 30.0], &o).1, Some(1.0));
        assert_eq!(ideal_indices(&[1.0], &[0.0]), (None, None));
    }

    /// T-M3: latency index = 4000 µs / p99 of the SRTT samples, R's default type-7 quantile.
    #[test]
    fn t_m3_latency_index_type_7() {
        // R: quantile(c(4000, 4100, ..., 13900), 0.99) = 4000 + 100·98.01 = 13801.
        let srtt: Vec<f64> = (0..100).map(|k| 4000.0 + 100.0 * f64::from(k)).collect();
        let p99 = quantile_type7(&srtt, 0.99).unwrap();
        assert!((p99 - 13801.0).abs() < 1e-9, "{p99}");
        assert!((latency_index(4000.0, p99).unwrap() - 4000.0 / 13801.0).abs() < 1e-15);
        // R: quantile(c(1, 2, 3, 4), c(0, .5, .99, 1)) = 1, 2.5, 3.97, 4.
        let x = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_type7(&x, 0.0), Some(1.0));
        assert_eq!(quantile_type7(&x, 0.5), Some(2.5));
        assert!((quantile_type7(&x, 0.99).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(quantile_type7(&x, 1.0), Some(4.0));
        assert_eq!(quantile_type7(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantile_type7(&[], 0.99), None);
        assert_eq!(latency_index(4000.0, 0.0), None);
    }

    #[test]
    fn run_indices_from_a_recorded_run() {
        // Flow a for 0–10 s, flow b for 5–10 s on a 12 Mbit/s link: ideal 9 and 3 Mbit/s.
        let plans = vec![
            plan("a", Role::Scheme, bulk(), 0, 10),
            plan("b", Role::Scheme, bulk(), 5, 10),
            plan("x", Role::Cross, bulk(), 0, 10),
        ];
        // a gets 1 MB/s (8 Mbit/s of payload) throughout; b 0.5 MB/s from 5 s; traffic from 1 s.
        let t0 = 1_000_000_000u64;
        let ticks: Vec<Tick> = (0..=10u64)
            .map(|s| {
                let tcp = |retrans: u32, segs: u32| {
                    Some(TcpInfo { total_retrans: retrans, segs_out: segs, data_segs_out: segs - 2, ..TcpInfo::default() })
                };
                Tick {
                    t_ns: t0 + s * 1_000_000_000,
                    flows: vec![
                        FlowSample { rx_bytes: s * 1_000_000, tx_bytes: 0, tcp: tcp(3, 1000), receiver_tcp: None },
                        FlowSample { rx_bytes: s.saturating_sub(5) * 500_000, tx_bytes: 0, tcp: tcp(1, 500), receiver_tcp: None },
                        FlowSample { rx_bytes: 5, tx_bytes: 0, tcp: tcp(100, 100), receiver_tcp: None },
                    ],
                }
            })
            .collect();
        let down = ccp_router::summary::Counters {
            packets_in: 2000,
            dropped_buffer: 3,
            dropped_aqm: 1,
            dropped_write: 7,
            ..Default::default()
        };
        let x = run_indices(&plans, &ticks, (t0, t0 + 10_000_000_000), 12.0, 20.0, Some(25.0), &down);
        assert_eq!(x.ideal_mbps, vec![9.0, 3.0]);
        assert!((x.goodput_mbps[0] - 8.0).abs() < 1e-9 && (x.goodput_mbps[1] - 2.0).abs() < 1e-9, "{:?}", x.goodput_mbps);
        let (j, g) = ideal_indices(&[8.0, 2.0], &[9.0, 3.0]);
        assert_eq!((x.jain_ideal, x.goodput_index), (j, g));
        assert!((x.goodput_index.unwrap() - 10.0 / 12.0).abs() < 1e-12);
        assert_eq!(x.latency_index, Some(0.8));
        assert_eq!((x.retrans_segs, x.segs_out, x.data_segs_out), (4, 1500, 1496), "cross flows are not counted");
        assert!((x.retx_pct.unwrap() - 400.0 / 1500.0).abs() < 1e-12);
        assert_eq!((x.bottleneck_drops, x.bottleneck_arrivals), (4, 2000));
        assert_eq!(x.drop_pct, Some(0.2));
        let none = run_indices(&plans, &ticks, (t0, t0 + 10_000_000_000), 12.0, 20.0, None, &Default::default());
        assert_eq!((none.latency_index, none.drop_pct), (None, None));
    }
}
