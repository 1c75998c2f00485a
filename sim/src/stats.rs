//! Counters, periodic samples and the results of a run: FCT and slowdown percentiles by flow
//! size, link throughput and utilization, queue occupancy, drops, marks, PFC pauses.

use serde::Serialize;

use crate::sim::{mix64, Sim};
use crate::switch::{Port, SwitchState};
use crate::time::{to_secs, to_us_f64, tx_time, tx_time_long, Time};
use crate::topology::{NodeKind, PortId};
use crate::transport::Flow;
use crate::workload::FlowClass;

/// Whole-run counters. Conservation: every packet injected by a host is delivered to a host,
/// dropped (by a switch or at random on a link), or still alive in the network when the run stops.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    pub injected: u64,
    pub delivered: u64,
    pub dropped_buffer: u64,
    pub dropped_aqm: u64,
    /// Data packets lost on a link at random (`switch.loss_pct`); absent from the output when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_random: u64,
    pub data_packets: u64,
    pub acks: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    /// Packets marked CE by a switch discipline.
    pub marks: u64,
    pub reports: u64,
    pub cnms: u64,
    pub pfc_frames: u64,
    pub queue_controls: u64,
    /// Algorithm panics and refused outputs the flows' controllers contained.
    pub algorithm_faults: u64,
    /// Algorithms replaced by the fallback after repeated faults.
    pub fallbacks: u64,
    /// Algorithm outputs clamped to the controllers' limits.
    pub clamped_values: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Periodic samples of monitored ports and switch buffers.
#[derive(Debug, Clone)]
pub struct Samples {
    pub interval: Time,
    pub ports: Vec<PortId>,
    pub names: Vec<String>,
    pub times: Vec<Time>,
    /// Queue bytes, per monitored port, per sample.
    pub queue_bytes: Vec<Vec<u64>>,
    /// Under strict priority: bytes in each egress queue, per monitored port, per queue, per
    /// sample (what a packet of each priority would find ahead of it). Empty otherwise.
    pub queue_bytes_by_queue: Vec<Vec<Vec<u64>>>,
    /// Cumulative transmitted bytes, per monitored port, per sample.
    pub tx_bytes: Vec<Vec<u64>>,
    /// Shared-buffer occupancy, per switch, per sample.
    pub switch_buffer: Vec<Vec<u64>>,
}

impl Samples {
    pub fn new(interval: Time, ports: Vec<PortId>, names: Vec<String>, switches: usize) -> Samples {
        let n = ports.len();
        Samples {
            interval,
            ports,
            names,
            times: Vec::new(),
            queue_bytes: vec![Vec::new(); n],
            queue_bytes_by_queue: Vec::new(),
            tx_bytes: vec![Vec::new(); n],
            switch_buffer: vec![Vec::new(); switches],
        }
    }

    /// Also samples each of the monitored ports' `queues` egress queues.
    pub fn per_queue(mut self, queues: usize) -> Samples {
        self.queue_bytes_by_queue = vec![vec![Vec::new(); queues]; self.ports.len()];
        self
    }

    pub fn record(&mut self, now: Time, ports: &[Port], switches: &[SwitchState]) {
        self.times.push(now);
        for (i, &p) in self.ports.iter().enumerate() {
            let port = &ports[p as usize];
            self.queue_bytes[i].push(port.queued_bytes);
            if let Some(by_queue) = self.queue_bytes_by_queue.get_mut(i) {
                for (q, samples) in by_queue.iter_mut().enumerate() {
                    samples.push(port.queue_bytes(q));
                }
            }
            self.tx_bytes[i].push(port.stats.tx_bytes);
        }
        for (i, s) in switches.iter().enumerate() {
            self.switch_buffer[i].push(s.buffer_used);
        }
    }

    /// Index of the first sample at or after `t`.
    pub fn first_at(&self, t: Time) -> usize {
        self.times.partition_point(|&x| x < t)
    }
}

/// One flow's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct FlowRecord {
    pub id: u32,
    pub class: &'static str,
    pub src: u32,
    pub dst: u32,
    /// `None` for unbounded flows.
    pub bytes: Option<u64>,
    pub start_us: f64,
    pub finish_us: Option<f64>,
    pub fct_us: Option<f64>,
    /// Propagation plus serialization at the path's rates with an empty network.
    pub ideal_us: f64,
    pub slowdown: Option<f64>,
    pub retransmits: u64,
    pub timeouts: u64,
    /// Goodput over the measured part of the run (after warm-up, or its own lifetime), Gbit/s.
    pub goodput_gbps: f64,
    /// Smallest and mean RTT sample (send to ACK of newly acknowledged data), µs.
    pub min_rtt_us: Option<f64>,
    pub mean_rtt_us: Option<f64>,
    /// The congestion control the flow was configured with (`[cc]`'s or its override).
    pub algorithm: &'static str,
    /// The label of its `[[workload.flows]]` entry.
    pub label: Option<String>,
}

/// FCT and slowdown statistics of the completed flows in one size bucket.
#[derive(Debug, Clone, Serialize)]
pub struct BucketSummary {
    /// "all" or a flow class.
    pub class: String,
    pub lo_bytes: u64,
    /// `None` = no upper edge.
    pub hi_bytes: Option<u64>,
    pub flows: usize,
    pub completed: usize,
    pub fct_mean_us: f64,
    pub fct_p50_us: f64,
    pub fct_p95_us: f64,
    pub fct_p99_us: f64,
    pub slowdown_mean: f64,
    pub slowdown_p50: f64,
    pub slowdown_p95: f64,
    pub slowdown_p99: f64,
}

/// A monitored port over the measured part of the run.
#[derive(Debug, Clone, Serialize)]
pub struct PortSummary {
    pub name: String,
    pub rate_gbps: f64,
    pub throughput_gbps: f64,
    pub utilization: f64,
    pub queue_mean_bytes: f64,
    pub queue_p50_bytes: f64,
    pub queue_p99_bytes: f64,
    pub queue_max_bytes: f64,
    /// The same in full-size packets (MSS + headers).
    pub queue_mean_pkts: f64,
    pub queue_p50_pkts: f64,
    pub queue_p99_pkts: f64,
    /// Per-packet queueing delay (enqueue to start of transmission) over the measured part, µs.
    pub queue_delay_mean_us: f64,
    pub queue_delay_p50_us: f64,
    pub queue_delay_p99_us: f64,
    pub queue_delay_max_us: f64,
    pub drops: u64,
    pub marks: u64,
    pub pfc_paused_fraction: f64,
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub name: String,
    pub seed: u64,
    pub algorithm: String,
    pub simulated_s: f64,
    pub warmup_s: f64,
    pub wall_s: f64,
    pub events: u64,
    pub events_per_s: f64,
    pub stopped_early: bool,
    pub flows_total: usize,
    pub flows_completed: usize,
    pub packets_alive_at_end: usize,
    pub peak_packets_alive: usize,
    pub counters: Counters,
    /// HULL's pacers, summed over hosts (absent without `[pacer]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacer: Option<PacerSummary>,
    pub ports: Vec<PortSummary>,
    pub buckets: Vec<BucketSummary>,
    pub switch_peak_buffer_bytes: Vec<(String, u64)>,
    #[serde(skip)]
    pub flows: Vec<FlowRecord>,
    #[serde(skip)]
    pub samples: Samples,
}

/// What the hosts' pacers did over the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct PacerSummary {
    /// Packets that went through a token bucket, and their bytes.
    pub packets: u64,
    pub bytes: u64,
    /// Flows associated with a pacer (each time one entered a table).
    pub associations: u64,
    /// Time packets waited in the bucket's FIFO.
    pub mean_delay_us: f64,
    pub max_delay_us: f64,
    /// The fullest any host's FIFO got.
    pub peak_backlog_bytes: u64,
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

impl Sim {
    /// The egress ports a flow's packets cross, host NIC first.
    pub fn path(&self, src: u32, dst: u32, hash: u32) -> Vec<PortId> {
        let mut out = vec![self.hosts[src as usize].nic];
        let mut node = self.ports[out[0] as usize].peer;
        for _ in 0..self.topo.nodes.len() {
            let n = self.ports[node as usize].node;
            let NodeKind::Switch(s) = self.topo.nodes[n as usize] else { break };
            let hops = self.routes.next_hops(s, dst);
            let Some(&p) = hops.get((mix64(u64::from(hash) ^ u64::from(s)) % hops.len().max(1) as u64) as usize) else { break };
            out.push(p);
            node = self.ports[p as usize].peer;
        }
        out
    }

    /// Best possible completion time: the first packet crosses every hop store-and-forward, the
    /// rest stream behind it at the slowest link's rate.
    pub fn ideal_fct(&self, src: u32, dst: u32, hash: u32, bytes: u64) -> Time {
        let path = self.path(src, dst, hash);
        let mss = u64::from(self.tp.mss);
        let segs = bytes.div_ceil(mss).max(1);
        let first_payload = bytes.min(mss) as u32;
        let first_wire = first_payload + self.tp.header;
        let rest_wire = bytes - u64::from(first_payload) + (segs - 1) * u64::from(self.tp.header);
        let mut t = 0;
        let mut min_rate = u64::MAX;
        for &p in &path {
            let port = &self.ports[p as usize];
            t += port.delay + tx_time(first_wire, port.rate_bps);
            min_rate = min_rate.min(port.rate_bps);
        }
        t + tx_time_long(rest_wire, min_rate)
    }

    /// Collects the results of a finished run, leaving the simulation as it is (for tests that
    /// look at both).
    pub fn results(&self, name: &str, seed: u64, buckets: &[u64], wall_s: f64) -> Results {
        let end = self.q.now();
        let flows = self.flows.iter().enumerate().filter(|(_, f)| f.started).map(|(i, f)| self.flow_record(i, f, end)).collect();
        self.collect(flows, self.has_incast(), name, seed, buckets, wall_s)
    }

    /// As [`Sim::results`], consuming the simulation: each flow's state is given back as its
    /// record is made, so a run of millions of flows holds one of the two at a time, not both
    /// (a 100 ms Google run at 80 % has 20 M flows, ~200 bytes each way).
    pub fn into_results(mut self, name: &str, seed: u64, buckets: &[u64], wall_s: f64) -> Results {
        const GIVE_BACK_EVERY: usize = 1 << 16;
        let end = self.q.now();
        let has_incast = self.has_incast();
        let mut flows = std::mem::take(&mut self.flows);
        let mut records = Vec::new();
        while let Some(f) = flows.pop() {
            let i = flows.len();
            if f.started {
                records.push(self.flow_record(i, &f, end));
            }
            if i.is_multiple_of(GIVE_BACK_EVERY) {
                flows.shrink_to_fit();
            }
        }
        records.reverse();
        self.collect(records, has_incast, name, seed, buckets, wall_s)
    }

    fn has_incast(&self) -> bool {
        self.flows.iter().any(|f| f.spec.class == FlowClass::Incast)
    }

    /// Flow `i`'s outcome when the run stopped at `end`.
    fn flow_record(&self, i: usize, f: &Flow, end: Time) -> FlowRecord {
        let measured = (end - self.warmup.min(end)).max(1);
        let ideal = f.spec.bytes.map_or(0, |b| self.ideal_fct(f.spec.src, f.spec.dst, f.hash, b));
        let fct = f.finish.map(|t| t - f.spec.start);
        let lifetime_end = f.finish.unwrap_or(end);
        let (bytes, span) = if f.spec.bytes.is_none() {
            (f.measured_bytes, measured)
        } else {
            (f.delivered_bytes, (lifetime_end - f.spec.start).max(1))
        };
        FlowRecord {
            id: i as u32,
            class: f.spec.class.name(),
            src: f.spec.src,
            dst: f.spec.dst,
            bytes: f.spec.bytes,
            start_us: to_us_f64(f.spec.start),
            finish_us: f.finish.map(to_us_f64),
            fct_us: fct.map(to_us_f64),
            ideal_us: to_us_f64(ideal),
            slowdown: fct.map(|x| x as f64 / ideal.max(1) as f64),
            retransmits: f.retransmits,
            timeouts: f.timeouts,
            goodput_gbps: bytes as f64 * 8.0 / to_secs(span) / 1e9,
            min_rtt_us: f.rtt.min.map(to_us_f64),
            mean_rtt_us: f.rtt.mean().map(to_us_f64),
            algorithm: self.choice_for(&f.spec).algorithm(),
            label: self.label_of(&f.spec).map(str::to_string),
        }
    }

    /// The results around the started flows' records.
    fn collect(&self, flows: Vec<FlowRecord>, has_incast: bool, name: &str, seed: u64, buckets: &[u64], wall_s: f64) -> Results {
        let end = self.q.now();
        let measured_from = self.warmup.min(end);
        let mut summaries = bucket_summaries("all", flows.iter().filter(|f| f.bytes.is_some()), buckets);
        if has_incast {
            summaries.extend(bucket_summaries("incast", flows.iter().filter(|f| f.class == "incast"), buckets));
        }
        let s = &self.samples;
        let from = s.first_at(measured_from);
        let full = f64::from(self.tp.mss + self.tp.header);
        let ports = s
            .ports
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let port = &self.ports[p as usize];
                let q = sorted(s.queue_bytes[i][from.min(s.queue_bytes[i].len())..].iter().map(|&b| b as f64).collect());
                let tx_from = s.tx_bytes[i].get(from).copied().unwrap_or(0);
                let tx_bytes = port.stats.tx_bytes - tx_from.min(port.stats.tx_bytes);
                let span = end.saturating_sub(s.times.get(from).copied().unwrap_or(measured_from)).max(1);
                let gbps = tx_bytes as f64 * 8.0 / to_secs(span) / 1e9;
                let rate = port.rate_bps as f64 / 1e9;
                let delays = sorted(port.stats.delays_ns.iter().flatten().map(|&ns| f64::from(ns) / 1e3).collect());
                PortSummary {
                    name: port.name.clone(),
                    rate_gbps: rate,
                    throughput_gbps: gbps,
                    utilization: gbps / rate,
                    queue_mean_bytes: mean(&q),
                    queue_p50_bytes: percentile(&q, 50.0),
                    queue_p99_bytes: percentile(&q, 99.0),
                    queue_max_bytes: q.last().copied().unwrap_or(0.0),
                    queue_mean_pkts: mean(&q) / full,
                    queue_p50_pkts: percentile(&q, 50.0) / full,
                    queue_p99_pkts: percentile(&q, 99.0) / full,
                    queue_delay_mean_us: mean(&delays),
                    queue_delay_p50_us: percentile(&delays, 50.0),
                    queue_delay_p99_us: percentile(&delays, 99.0),
                    queue_delay_max_us: delays.last().copied().unwrap_or(0.0),
                    drops: port.stats.drops,
                    marks: port.stats.marks,
                    pfc_paused_fraction: to_secs(port.stats.pfc_paused_time) / to_secs(end.max(1)),
                }
            })
            .collect();
        let events = self.q.processed();
        Results {
            name: name.to_string(),
            seed,
            algorithm: self.choice.algorithm().to_string(),
            simulated_s: to_secs(end),
            warmup_s: to_secs(self.warmup),
            wall_s,
            events,
            events_per_s: events as f64 / wall_s.max(1e-9),
            stopped_early: self.stopped_early,
            flows_total: flows.len(),
            flows_completed: flows.iter().filter(|f| f.fct_us.is_some()).count(),
            packets_alive_at_end: self.arena.live(),
            peak_packets_alive: self.arena.peak(),
            counters: self.counters.clone(),
            pacer: self.pacer_stats().map(|p| PacerSummary {
                packets: p.packets,
                bytes: p.bytes,
                associations: p.associations,
                mean_delay_us: if p.packets == 0 { 0.0 } else { to_us_f64(p.delay_total) / p.packets as f64 },
                max_delay_us: to_us_f64(p.delay_max),
                peak_backlog_bytes: p.peak_backlog_bytes,
            }),
            ports,
            buckets: summaries,
            switch_peak_buffer_bytes: self
                .switches
                .iter()
                .map(|s| (self.topo.names[s.node as usize].clone(), s.peak_buffer))
                .collect(),
            flows,
            samples: self.samples.clone(),
        }
    }
}

fn bucket_summaries<'a>(class: &str, flows: impl Iterator<Item = &'a FlowRecord>, edges: &[u64]) -> Vec<BucketSummary> {
    let mut per: Vec<Vec<&FlowRecord>> = vec![Vec::new(); edges.len() + 1];
    for f in flows {
        let b = f.bytes.unwrap_or(u64::MAX);
        per[edges.partition_point(|&e| e < b)].push(f);
    }
    per.iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(i, v)| {
            let fct = sorted(v.iter().filter_map(|f| f.fct_us).collect());
            let sd = sorted(v.iter().filter_map(|f| f.slowdown).collect());
            BucketSummary {
                class: class.to_string(),
                lo_bytes: if i == 0 { 0 } else { edges[i - 1] + 1 },
                hi_bytes: edges.get(i).copied(),
                flows: v.len(),
                completed: fct.len(),
                fct_mean_us: mean(&fct),
                fct_p50_us: percentile(&fct, 50.0),
                fct_p95_us: percentile(&fct, 95.0),
                fct_p99_us: percentile(&fct, 99.0),
                slowdown_mean: mean(&sd),
                slowdown_p50: percentile(&sd, 50.0),
                slowdown_p95: percentile(&sd, 95.0),
                slowdown_p99: percentile(&sd, 99.0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 1.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
