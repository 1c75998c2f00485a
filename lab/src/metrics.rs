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
use crate::traffic::{FlowPlan, FlowSample, PlanKind, Role, ShortFlow, TcpInfo, TCP_WIRE_PER_PAYLOAD};

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

/// Instants at which the bottleneck's queue is sampled: `start_ns + k·step_ns` before `end_ns`
/// (ns since the emulator started), as the thesis sampled `tc -s` backlog every 10 ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueGrid {
    pub start_ns: u64,
    pub end_ns: u64,
    pub step_ns: u64,
}

impl QueueGrid {
    fn len(&self) -> usize {
        (self.end_ns.saturating_sub(self.start_ns)).div_ceil(self.step_ns.max(1)) as usize
    }

    /// The first grid index at or after `t`.
    fn index_at_or_after(&self, t: u64) -> usize {
        ((t.saturating_sub(self.start_ns)).div_ceil(self.step_ns.max(1)) as usize).min(self.len())
    }

    /// Counts a packet in the queue at the grid instants of [arrival, dequeue) (`diff` holds
    /// +1 where a stay starts covering instants and −1 where it stops).
    fn add_stay(&self, diff: &mut [i64], arrival: u64, dequeue: u64) {
        let (k0, k1) = (self.index_at_or_after(arrival), self.index_at_or_after(dequeue));
        if k0 < k1 {
            diff[k0] += 1;
            diff[k1] -= 1;
        }
    }
}

/// Reads the data direction ("down") of a router log and computes the window's metrics and the
/// per-bin series. Bytes leaving the link count by their finish time; delays by arrival time.
/// Also samples the queue on `grid`: the packets waiting at an instant t are those with
/// arrival ≤ t < dequeue (start of transmission; the packet on the wire is not queued, as in a
/// qdisc's backlog), dropped packets never.
pub fn link_metrics(
    log: impl BufRead,
    link: &Link,
    w: Window,
    grid: QueueGrid,
) -> Result<(LinkMetrics, Vec<LinkBin>, Vec<u32>), LogError> {
    link_series(log, link, w, grid, &[]).map(|(m, bins, s)| (m, bins, s.queue))
}

/// The bottleneck on the queue grid, besides [`link_metrics`]'s results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSeries {
    /// Packets queued at each grid instant.
    pub queue: Vec<u32>,
    /// Packets dropped (buffer, AQM, write) that arrived in each grid step [t_k, t_k + step).
    pub drops: Vec<u32>,
    /// `queue` split by the packets' propagation delay class: `queue_by_delay[c][k]` counts the
    /// queued packets whose delay (release − finish) is nearest `delays_ns[c]` — with per-class
    /// delays (`network.class_delays`), which flow class holds the queue.
    pub queue_by_delay: Vec<Vec<u32>>,
}

/// [`link_metrics`] with the queue also split by propagation delay (`delays_ns`: the one-way
/// data-direction delays of the run's classes; empty: no split) and the drops on the grid.
pub fn link_series(
    log: impl BufRead,
    link: &Link,
    w: Window,
    grid: QueueGrid,
    delays_ns: &[u64],
) -> Result<(LinkMetrics, Vec<LinkBin>, LinkSeries), LogError> {
    let mut class_diff: Vec<Vec<i64>> = vec![vec![0i64; grid.len() + 1]; delays_ns.len()];
    let mut drops_grid = vec![0u32; grid.len()];
    let nearest = |d: u64| (0..delays_ns.len()).min_by_key(|&c| delays_ns[c].abs_diff(d));
    let mut lines = log.lines();
    let header = match lines.next() {
        Some(Ok(h)) => h,
        _ => return Err(LogError { line: 1, message: "empty log".into() }),
    };
    let c = Columns::from_header(&header)?;
    let release_col = header.trim().split(',').position(|n| n == "release_ns");
    let nbins = w.bins();
    let mut bin_bytes = vec![0u64; nbins];
    let mut bin_delays: Vec<Vec<u64>> = vec![Vec::new(); nbins];
    let mut bin_drops = vec![0u64; nbins];
    let mut bin_marks = vec![0u64; nbins];
    let mut delays = Vec::new();
    // +1 where a packet's stay starts covering grid instants, −1 where it stops.
    let mut queue_diff = vec![0i64; grid.len() + 1];
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
                grid.add_stay(&mut queue_diff, arrival, dequeue);
                let release = release_col.and_then(|k| get(k).parse::<u64>().ok());
                if let Some(cls) = release.and_then(|r| nearest(r.saturating_sub(finish))) {
                    grid.add_stay(&mut class_diff[cls], arrival, dequeue);
                }
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
                // A failed write to the far device happened after the queue: it waited.
                if let (true, Ok(dequeue)) = (outcome == "dropped_write", get(c.dequeue).parse::<u64>()) {
                    grid.add_stay(&mut queue_diff, arrival, dequeue);
                }
                if let Some(b) = bin_of(arrival) {
                    bin_drops[b] += 1;
                }
                if arrival >= grid.start_ns {
                    let k = ((arrival - grid.start_ns) / grid.step_ns.max(1)) as usize;
                    if let Some(d) = drops_grid.get_mut(k) {
                        *d += 1;
                    }
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
    let levels = |diff: &[i64]| -> Vec<u32> {
        let mut level = 0i64;
        diff[..grid.len()]
            .iter()
            .map(|d| {
                level += d;
                level.max(0) as u32
            })
            .collect()
    };
    let queue = levels(&queue_diff);
    let queue_by_delay = class_diff.iter().map(|d| levels(d)).collect();
    Ok((m, bins, LinkSeries { queue, drops: drops_grid, queue_by_delay }))
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
    /// Sized flows (`flows[].bytes`): the size, and the completion time (none when cut off).
    pub size_bytes: Option<u64>,
    pub completion_s: Option<f64>,
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
    /// A report that carried a CNM: its quantized feedback and latencies (the agent's CNM
    /// listener: the congestion point's sample → the datagram read → the decision applied).
    pub qcn_fb: Option<u8>,
    pub cnm_sample_to_read_us: Option<u64>,
    pub cnm_read_to_action_us: Option<u64>,
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
            qcn_fb: v.get("qcn_fb").and_then(serde_json::Value::as_u64).and_then(|q| u8::try_from(q).ok()),
            cnm_sample_to_read_us: v.get("cnm_sample_to_read_us").and_then(serde_json::Value::as_u64),
            cnm_read_to_action_us: v.get("cnm_read_to_action_us").and_then(serde_json::Value::as_u64),
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

/// R's default (type 7) quantile of sorted samples: x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]),
/// h = (n − 1)·p (0-based), as the thesis's `plot_tcpprobe_srtt.R` computes the SRTT p99.
pub fn quantile_type7(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
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

/// The bottleneck queue sampled every `interval_ms` over the run, as a histogram of packets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSamples {
    pub interval_ms: f64,
    pub samples: u64,
    pub mean_pkts: Option<f64>,
    /// Type-7 quantiles (the samples are whole packets).
    pub p50_pkts: Option<f64>,
    pub p99_pkts: Option<f64>,
    pub max_pkts: Option<u32>,
    /// histogram[q] = samples that found q packets queued.
    pub histogram: Vec<u64>,
}

impl QueueSamples {
    pub fn of(samples: &[u32], interval_ms: f64) -> QueueSamples {
        let max = samples.iter().copied().max();
        let mut histogram = vec![0u64; max.map_or(0, |m| m as usize + 1)];
        for &q in samples {
            histogram[q as usize] += 1;
        }
        let mut sorted: Vec<f64> = samples.iter().map(|&q| f64::from(q)).collect();
        sorted.sort_by(f64::total_cmp);
        QueueSamples {
            interval_ms,
            samples: samples.len() as u64,
            mean_pkts: (!samples.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64),
            p50_pkts: quantile_type7(&sorted, 0.5),
            p99_pkts: quantile_type7(&sorted, 0.99),
            max_pkts: max,
            histogram,
        }
    }
}

/// The empirical CDF of pooled queue histograms: (queue packets, fraction of samples ≤ it), one
/// point per value that occurred.
pub fn queue_ecdf<'a>(histograms: impl IntoIterator<Item = &'a [u64]>) -> Vec<(u32, f64)> {
    let mut pooled: Vec<u64> = Vec::new();
    for h in histograms {
        if pooled.len() < h.len() {
            pooled.resize(h.len(), 0);
        }
        for (p, c) in pooled.iter_mut().zip(h) {
            *p += c;
        }
    }
    let total: u64 = pooled.iter().sum();
    let mut cum = 0;
    let mut out = Vec::new();
    for (q, &c) in pooled.iter().enumerate() {
        if c > 0 {
            cum += c;
            out.push((q as u32, cum as f64 / total as f64));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LinkSpec;
    use std::path::Path;
    use std::time::Duration;

    const HEADER: &str = "dir,id,len,arrival_ns,dequeue_ns,finish_ns,release_ns,written_ns,queue_delay_ns,ecn_in,ecn_out,outcome";

    fn fixed(mbps: f64) -> Link {
        crate::link::resolve(&[LinkSpec::Fixed { rate_mbps: mbps, rtt_ms: None, name: None }], Path::new("."), Path::new("."))
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
        let grid = QueueGrid { start_ns: 0, end_ns: 200_000_000, step_ns: 10_000_000 };
        let (m, bins, queue) = link_metrics(synthetic_log().as_bytes(), &fixed(12.0), w, grid).unwrap();
        // Packet k waits from k ms to 1.1·k ms: at 10·j ms (j < 10) j packets wait, at 100 ms
        // packets 91..99, and none after 110 ms; the dropped ones never count.
        let mut expect: Vec<u32> = (0..10).collect();
        expect.push(9);
        expect.extend([0; 9]);
        assert_eq!(queue, expect);
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
        let grid = QueueGrid { start_ns: 50_000_000, end_ns: 105_000_000, step_ns: 10_000_000 };
        let (m, bins, queue) = link_metrics(synthetic_log().as_bytes(), &fixed(12.0), w, grid).unwrap();
        assert_eq!(queue, vec![5, 6, 7, 8, 9, 9], "instants 50, 60, …, 100 ms");
        let q = m.queue_delay_ms.unwrap();
        assert_eq!(q.count, 50);
        assert!((q.p50 - 7.4).abs() < 1e-9, "{q:?}");
        assert_eq!(bins.len(), 4);
    }

    #[test]
    fn bad_logs_name_the_line() {
        let w = Window { start_ns: 0, end_ns: 1, bin_ns: 1 };
        let g = QueueGrid { start_ns: 0, end_ns: 1, step_ns: 1 };
        let e = link_metrics("dir,id\n".as_bytes(), &fixed(1.0), w, g).unwrap_err();
        assert_eq!(e.line, 1);
        let text = format!("{HEADER}\ndown,1,1500,x,1,2,3,4,5,ect0,ect0,delivered\n");
        let e = link_metrics(text.as_bytes(), &fixed(1.0), w, g).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("arrival_ns"));
        let text = format!("{HEADER}\ndown,1,1500,1,1,2,3,4,5,ect0,ect0,teleported\n");
        assert!(link_metrics(text.as_bytes(), &fixed(1.0), w, g).unwrap_err().message.contains("teleported"));
        assert!(link_metrics("".as_bytes(), &fixed(1.0), w, g).is_err());
    }

    fn plan(label: &str, role: Role, kind: PlanKind, start: u64, stop: u64) -> FlowPlan {
        FlowPlan { label: label.into(), role, kind, start: Duration::from_secs(start), stop: Duration::from_secs(stop) }
    }

    fn bulk() -> PlanKind {
        PlanKind::Bulk { cc: "cubic".into(), receiver_cc: None, bytes: None }
    }

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
    fn queue_samples_and_ecdf() {
        let q = QueueSamples::of(&[0, 0, 3, 1, 3, 10], 10.0);
        assert_eq!((q.samples, q.max_pkts, q.p50_pkts), (6, Some(10), Some(2.0)));
        assert_eq!(q.histogram, vec![2, 1, 0, 2, 0, 0, 0, 0, 0, 0, 1]);
        assert!((q.mean_pkts.unwrap() - 17.0 / 6.0).abs() < 1e-12);
        let other = QueueSamples::of(&[1, 1], 10.0);
        let e = queue_ecdf([q.histogram.as_slice(), other.histogram.as_slice()]);
        assert_eq!(e, vec![(0, 0.25), (1, 0.625), (3, 0.875), (10, 1.0)]);
        assert!(queue_ecdf(std::iter::empty()).is_empty());
        assert_eq!(QueueSamples::of(&[], 10.0).max_pkts, None);
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
