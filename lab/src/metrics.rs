//! Metrics of one run, computed from what the run recorded: the router's per-packet log, the
//! flows' byte counters and TCP_INFO samples, and the agent's per-flow trace.
//!
//! Definitions (mahimahi's, as the ABC evaluation used them, specs/abc.md §11):
//! * **utilisation** = IP bytes that left the link in the measurement window / bytes the link
//!   offered in the window (trace opportunities, used or not; or rate × time);
//! * **queueing delay** = per packet, dequeue − arrival at the bottleneck queue (no
//!   serialisation, no propagation), for every delivered data-direction packet that arrived in
//!   the window; percentiles are nearest-rank over all of them;
//! * **throughput** of a flow = bytes received in the window / window; TCP payload is scaled to
//!   wire bytes ([`TCP_WIRE_PER_PAYLOAD`]) so shares compare with the link's capacity;
//! * **classification accuracy** = fraction of sample instants in the window at which the
//!   agent's last reported state (e.g. Nimbus `mode`) matches ground truth — "elastic" while
//!   any elastic cross traffic is active (specs/nimbus.md §10).
//!
//! The window is [traffic start + warmup, traffic end], in ns since the emulator started (the
//! router log's clock); every time series here uses that clock, in seconds.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Serialize;

pub use ccp_router::percentiles::Percentiles;

use crate::config::ClassifySpec;
use crate::link::Link;
use crate::traffic::poisson::ELASTIC_MIN_BYTES;
use crate::traffic::{FlowPlan, FlowSample, PlanKind, Role, ShortFlow, TCP_WIRE_PER_PAYLOAD};

const NS_PER_S: f64 = 1e9;

/// The measurement window and the time-series grid, ns since the emulator started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bin_ns: u64,
}

impl Window {
    fn contains(&self, t: u64) -> bool {
        t >= self.start_ns && t < self.end_ns
    }

    /// Whole bins from 0 to the end of the window (a partial last bin would show a false dip).
    fn bins(&self) -> usize {
        ((self.end_ns / self.bin_ns.max(1)) as usize).max(1)
    }

    pub fn seconds(&self) -> f64 {
        (self.end_ns.saturating_sub(self.start_ns)) as f64 / NS_PER_S
    }
}

/// What the bottleneck did over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkMetrics {
    pub utilisation: f64,
    pub capacity_mbps: f64,
    pub delivered_mbps: f64,
    pub queue_delay_ms: Option<Percentiles>,
    pub packets_delivered: u64,
    pub dropped_buffer: u64,
    pub dropped_aqm: u64,
    /// Packets whose ECN field the router set to CE.
    pub marked_ce: u64,
}

/// One time bin of the bottleneck.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkBin {
    pub t_s: f64,
    pub capacity_mbps: f64,
    pub delivered_mbps: f64,
    pub qdelay_mean_ms: Option<f64>,
    pub qdelay_p95_ms: Option<f64>,
    pub qdelay_max_ms: Option<f64>,
    pub drops: u64,
    pub marks: u64,
}

/// A malformed router log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("router log line {line}: {message}")]
pub struct LogError {
    pub line: usize,
    pub message: String,
}

/// Column positions, found by name so the log may gain columns.
struct Columns {
    dir: usize,
    len: usize,
    arrival: usize,
    dequeue: usize,
    finish: usize,
    ecn_in: usize,
    ecn_out: usize,
    outcome: usize,
}

impl Columns {
    fn from_header(h: &str) -> Result<Columns, LogError> {
        let names: Vec<&str> = h.trim().split(',').collect();
        let col = |n: &str| {
            names
                .iter()
                .position(|c| *c == n)
                .ok_or_else(|| LogError { line: 1, message: format!("no column {n:?} in the header") })
        };
        Ok(Columns {
            dir: col("dir")?,
            len: col("len")?,
            arrival: col("arrival_ns")?,
            dequeue: col("dequeue_ns")?,
            finish: col("finish_ns")?,
            ecn_in: col("ecn_in")?,
            ecn_out: col("ecn_out")?,
            outcome: col("outcome")?,
        })
    }
}

/// Reads the data direction ("down") of a router log and computes the window's metrics and the
/// per-bin series. Bytes leaving the link count by their finish time; delays by arrival time.
pub fn link_metrics(log: impl BufRead, link: &Link, w: Window) -> Result<(LinkMetrics, Vec<LinkBin>), LogError> {
    let mut lines = log.lines();
    let header = match lines.next() {
        Some(Ok(h)) => h,
        _ => return Err(LogError { line: 1, message: "empty log".into() }),
    };
    let c = Columns::from_header(&header)?;
    let nbins = w.bins();
    let mut bin_bytes = vec![0u64; nbins];
    let mut bin_delays: Vec<Vec<u64>> = vec![Vec::new(); nbins];
    let mut bin_drops = vec![0u64; nbins];
    let mut bin_marks = vec![0u64; nbins];
    let mut delays = Vec::new();
    let mut m = LinkMetrics::default();
    let mut window_bytes = 0u64;
    // The bin of an instant, if it falls on the grid.
    let bin_of = |t: u64| Some((t / w.bin_ns.max(1)) as usize).filter(|&b| b < nbins);
    for (i, line) in lines.enumerate() {
        let lineno = i + 2;
        let line = line.map_err(|e| LogError { line: lineno, message: e.to_string() })?;
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        let get = |k: usize| f.get(k).copied().unwrap_or("");
        if get(c.dir) != "down" {
            continue;
        }
        let num = |k: usize, what: &str| -> Result<u64, LogError> {
            get(k).parse().map_err(|_| LogError { line: lineno, message: format!("{what} {:?} is not a number", get(k)) })
        };
        let arrival = num(c.arrival, "arrival_ns")?;
        let in_window = w.contains(arrival);
        match get(c.outcome) {
            "delivered" => {
                let dequeue = num(c.dequeue, "dequeue_ns")?;
                let finish = num(c.finish, "finish_ns")?;
                let len = num(c.len, "len")?;
                let delay = dequeue.saturating_sub(arrival);
                if let Some(b) = bin_of(finish) {
                    bin_bytes[b] += len;
                }
                if w.contains(finish) {
                    window_bytes += len;
                    m.packets_delivered += 1;
                }
                if let Some(b) = bin_of(arrival) {
                    bin_delays[b].push(delay);
                }
                if in_window {
                    delays.push(delay);
                }
                if get(c.ecn_out) == "ce" && get(c.ecn_in) != "ce" {
                    if let Some(b) = bin_of(arrival) {
                        bin_marks[b] += 1;
                    }
                    if in_window {
                        m.marked_ce += 1;
                    }
                }
            }
            outcome @ ("dropped_buffer" | "dropped_aqm" | "dropped_write") => {
                if let Some(b) = bin_of(arrival) {
                    bin_drops[b] += 1;
                }
                if in_window {
                    match outcome {
                        "dropped_aqm" => m.dropped_aqm += 1,
                        _ => m.dropped_buffer += 1,
                    }
                }
            }
            other => return Err(LogError { line: lineno, message: format!("unknown outcome {other:?}") }),
        }
    }
    let secs = w.seconds().max(1e-9);
    let capacity = link.capacity_bytes(w.start_ns, w.end_ns);
    m.capacity_mbps = capacity * 8.0 / secs / 1e6;
    m.delivered_mbps = window_bytes as f64 * 8.0 / secs / 1e6;
    m.utilisation = if capacity > 0.0 { window_bytes as f64 / capacity } else { 0.0 };
    m.queue_delay_ms = Percentiles::of_ns(&mut delays);
    let bin_s = w.bin_ns as f64 / NS_PER_S;
    let bins = (0..nbins)
        .map(|b| {
            let (t0, t1) = (b as u64 * w.bin_ns, (b as u64 + 1) * w.bin_ns);
            let p = Percentiles::of_ns(&mut bin_delays[b]);
            LinkBin {
                t_s: t1 as f64 / NS_PER_S,
                capacity_mbps: link.capacity_bytes(t0, t1) * 8.0 / bin_s / 1e6,
                delivered_mbps: bin_bytes[b] as f64 * 8.0 / bin_s / 1e6,
                qdelay_mean_ms: p.map(|p| p.mean),
                qdelay_p95_ms: p.map(|p| p.p95),
                qdelay_max_ms: p.map(|p| p.max),
                drops: bin_drops[b],
                marks: bin_marks[b],
            }
        })
        .collect();
    Ok((m, bins))
}

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
}

/// Wire bytes of a flow's received bytes.
fn wire_bytes(kind: &PlanKind, rx: u64) -> f64 {
    match kind {
        PlanKind::Udp { .. } => rx as f64,
        _ => rx as f64 * TCP_WIRE_PER_PAYLOAD,
    }
}

/// The received bytes at time `t` by linear interpolation between ticks (flat outside).
fn rx_at(ticks: &[Tick], flow: usize, t: u64) -> f64 {
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
                cc: p.kind.cc().map(str::to_string),
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
            }
        })
        .collect();
    (summaries, points)
}

/// What a flow's threads collected besides byte counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowExtra {
    pub short_flows: Vec<ShortFlow>,
    pub skipped: u64,
    pub send_failures: u64,
}

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

/// One line of the agent's per-flow trace (`ccp-agent run --trace-flows`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    /// ns since the emulator started.
    pub t_ns: u64,
    pub flow: String,
    pub cwnd_bytes: Option<f64>,
    pub pacing_rate_bytes_per_s: Option<f64>,
    pub state: BTreeMap<String, f64>,
}

/// Parses the agent's JSON Lines trace. `t_us` is taken as CLOCK_MONOTONIC µs (the router's
/// clock) when it is not before the emulator started; otherwise as µs since the agent started.
/// Lines that do not parse are counted, not fatal (the agent may be killed mid-line).
pub fn parse_agent_trace(text: &str, router_start_ns: u64, agent_start_ns: u64) -> (Vec<AgentRecord>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            bad += 1;
            continue;
        };
        let Some(t_us) = v.get("t_us").and_then(serde_json::Value::as_u64) else {
            bad += 1;
            continue;
        };
        let t = t_us.saturating_mul(1000);
        let t_ns = if t >= router_start_ns { t - router_start_ns } else { (t + agent_start_ns).saturating_sub(router_start_ns) };
        let flow = match v.get("flow") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "?".into(),
        };
        let state = v
            .get("state")
            .and_then(serde_json::Value::as_object)
            .map(|o| o.iter().filter_map(|(k, x)| x.as_f64().map(|f| (k.clone(), f))).collect())
            .unwrap_or_default();
        out.push(AgentRecord {
            t_ns,
            flow,
            cwnd_bytes: v.get("cwnd_bytes").and_then(serde_json::Value::as_f64),
            pacing_rate_bytes_per_s: v.get("pacing_rate_bytes_per_s").and_then(serde_json::Value::as_f64),
            state,
        });
    }
    out.sort_by_key(|r| r.t_ns);
    (out, bad)
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

/// Jain's fairness index of a set of throughputs (1 = equal).
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (x.len() > 1 && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkSpec;
    use crate::traffic::TcpInfo;
    use std::path::Path;
    use std::time::Duration;

    const HEADER: &str = "dir,id,len,arrival_ns,dequeue_ns,finish_ns,release_ns,written_ns,queue_delay_ns,ecn_in,ecn_out,outcome";

    fn fixed(mbps: f64) -> Link {
        crate::link::resolve(&[LinkSpec::Fixed { rate_mbps: mbps, name: None }], Path::new("."), Path::new("."))
            .unwrap()
            .remove(0)
    }

    /// A synthetic log: at 12 Mbit/s one 1500-byte packet takes 1 ms; packet k arrives at
    /// k ms and waits k µs · 100 (so delays are 0, 0.1, …, 9.9 ms over 100 packets).
    fn synthetic_log() -> String {
        let mut s = format!("{HEADER}\n");
        for k in 0..100u64 {
            let arrival = k * 1_000_000;
            let dequeue = arrival + k * 100_000;
            let finish = dequeue + 1_000_000;
            s += &format!(
                "down,{k},1500,{arrival},{dequeue},{finish},{},{},{},ect0,{},delivered\n",
                finish + 5,
                finish + 6,
                dequeue - arrival,
                if k % 10 == 0 { "ce" } else { "ect0" }
            );
            // ACKs in the other direction are ignored.
            s += &format!("up,{k},52,{arrival},{arrival},{arrival},{arrival},{arrival},0,not-ect,not-ect,delivered\n");
        }
        s += "down,100,1500,50000000,,,,,,not-ect,not-ect,dropped_buffer\n";
        s += "down,101,1500,60000000,,,,,,ect0,ect0,dropped_aqm\n";
        s
    }

    #[test]
    fn link_metrics_on_a_synthetic_log() {
        let w = Window { start_ns: 0, end_ns: 200_000_000, bin_ns: 100_000_000 };
        let (m, bins) = link_metrics(synthetic_log().as_bytes(), &fixed(12.0), w).unwrap();
        // 100 packets of 1500 B in 200 ms of a 12 Mbit/s link (300 000 B offered).
        assert_eq!(m.packets_delivered, 100);
        assert!((m.utilisation - 0.5).abs() < 1e-9, "{}", m.utilisation);
        assert!((m.capacity_mbps - 12.0).abs() < 1e-9);
        assert!((m.delivered_mbps - 6.0).abs() < 1e-9);
        let q = m.queue_delay_ms.unwrap();
        assert_eq!(q.count, 100);
        assert!((q.p50 - 4.9).abs() < 1e-9 && (q.p95 - 9.4).abs() < 1e-9 && (q.max - 9.9).abs() < 1e-9, "{q:?}");
        assert!((q.mean - 4.95).abs() < 1e-9);
        assert_eq!((m.dropped_buffer, m.dropped_aqm, m.marked_ce), (1, 1, 10));
        assert_eq!(bins.len(), 2);
        assert!((bins[0].capacity_mbps - 12.0).abs() < 1e-9);
        // Finish times 1..~110 ms: the first bin holds the packets that finished before 100 ms.
        let first: u64 = (0..100u64).filter(|k| k * 1_100_000 + 1_000_000 < 100_000_000).count() as u64;
        assert!((bins[0].delivered_mbps - first as f64 * 1500.0 * 8.0 / 0.1 / 1e6).abs() < 1e-9);
        assert_eq!(bins[0].drops + bins[1].drops, 2);
        assert!((bins[0].qdelay_max_ms.unwrap() - 9.9).abs() < 1e-9);
        assert!(bins[1].qdelay_mean_ms.is_none());
    }

    #[test]
    fn the_window_excludes_warmup() {
        // Only arrivals from 50 ms on: delays 5.0..9.9 ms.
        let w = Window { start_ns: 50_000_000, end_ns: 200_000_000, bin_ns: 50_000_000 };
        let (m, bins) = link_metrics(synthetic_log().as_bytes(), &fixed(12.0), w).unwrap();
        let q = m.queue_delay_ms.unwrap();
        assert_eq!(q.count, 50);
        assert!((q.p50 - 7.4).abs() < 1e-9, "{q:?}");
        assert_eq!(bins.len(), 4);
    }

    #[test]
    fn bad_logs_name_the_line() {
        let w = Window { start_ns: 0, end_ns: 1, bin_ns: 1 };
        let e = link_metrics("dir,id\n".as_bytes(), &fixed(1.0), w).unwrap_err();
        assert_eq!(e.line, 1);
        let text = format!("{HEADER}\ndown,1,1500,x,1,2,3,4,5,ect0,ect0,delivered\n");
        let e = link_metrics(text.as_bytes(), &fixed(1.0), w).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("arrival_ns"));
        let text = format!("{HEADER}\ndown,1,1500,1,1,2,3,4,5,ect0,ect0,teleported\n");
        assert!(link_metrics(text.as_bytes(), &fixed(1.0), w).unwrap_err().message.contains("teleported"));
        assert!(link_metrics("".as_bytes(), &fixed(1.0), w).is_err());
    }

    fn plan(label: &str, role: Role, kind: PlanKind, start: u64, stop: u64) -> FlowPlan {
        FlowPlan { label: label.into(), role, kind, start: Duration::from_secs(start), stop: Duration::from_secs(stop) }
    }

    fn bulk() -> PlanKind {
        PlanKind::Bulk { cc: "cubic".into(), receiver_cc: None }
    }

    #[test]
    fn flow_throughput_and_shares() {
        let plans = vec![
            plan("a", Role::Scheme, bulk(), 0, 10),
            plan("cbr", Role::Cross, PlanKind::Udp { rate_bps: 4e6, packet_bytes: 1500, poisson_seed: None }, 0, 10),
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

    #[test]
    fn ground_truth_follows_elastic_cross_traffic() {
        let plans = vec![
            plan("nimbus", Role::Scheme, bulk(), 0, 60),
            plan("cubic", Role::Cross, bulk(), 20, 40),
            plan("cbr", Role::Cross, PlanKind::Udp { rate_bps: 1e6, packet_bytes: 1500, poisson_seed: None }, 0, 60),
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

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[3.0]), None);
    }
}
