//! Scenario files: the TOML format and its defaults (here), [`load`](mod@load) for reading a file
//! (with `--set` overrides) and its errors that name the file, the line and the key,
//! [`validate`](mod@validate) for the rules beyond the types, and [`locate`] for finding a key's
//! line.
//!
//! A scenario declares a topology, switch buffers and queue discipline, the hosts' transport, the
//! congestion control (any algorithm in the `ccp-algorithms` registry, with its parameters), the
//! workload and what to record. `configs/sim/*.toml` are the shipped scenarios; every key and its
//! default is documented on the structs below and in `configs/sim/README.md`.
//!
//! Errors: syntax and type errors come from the TOML parser with the line and column; semantic
//! errors (a threshold above the buffer, an unknown algorithm parameter, a missing CDF file) are
//! located by [`locate::locate`] on the key's own line. Values given with `--set` are reported as
//! such.

pub mod load;
pub mod locate;
pub mod validate;

#[cfg(test)]
mod test_support;

use std::path::PathBuf;

use ccp_qdisc::pacer;
use serde::{Deserialize, Serialize};

pub use load::{load, load_str, Loaded};

/// Default scenario seed.
pub const DEFAULT_SEED: u64 = 1;

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name used in outputs (defaults to the file stem).
    #[serde(default)]
    pub name: Option<String>,
    /// Seed of every random stream in the run.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated time at which the run stops, ms.
    pub duration_ms: f64,
    /// Statistics (queue percentiles, throughput) ignore the first `warmup_ms`.
    #[serde(default)]
    pub warmup_ms: f64,
    /// Stop as soon as every flow with a size has completed (unbounded flows never complete).
    #[serde(default)]
    pub stop_when_done: bool,
    pub topology: TopologyConfig,
    #[serde(default)]
    pub switch: SwitchConfig,
    #[serde(default)]
    pub transport: TransportConfig,
    /// HULL's pacer at every host NIC (`[pacer]`; absent = no pacer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacer: Option<PacerConfig>,
    #[serde(default)]
    pub cc: CcConfig,
    #[serde(default)]
    pub workload: WorkloadConfig,
    #[serde(default)]
    pub output: OutputConfig,
}

fn default_seed() -> u64 {
    DEFAULT_SEED
}

/// The network. Host indices (for `workload.flows`) count hosts in the order listed per kind.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TopologyConfig {
    /// Senders on a left switch, receivers on a right switch, one bottleneck link between them.
    /// Hosts 0..senders are senders, the rest receivers.
    Dumbbell {
        senders: u32,
        receivers: u32,
        host_gbps: f64,
        host_delay_us: f64,
        /// One-way delay of each host's access link, µs, instead of `host_delay_us`: flows with
        /// different RTTs on one bottleneck (a DC/WAN mix). One value per sender (receivers keep
        /// `host_delay_us`), or one per host, senders then receivers: a delay on a receiver's link
        /// lies beyond the bottleneck, where a WAN path's distance is when the congestion point is
        /// the sender's own ToR. Absent: every host has `host_delay_us`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host_delays_us: Option<Vec<f64>>,
        bottleneck_gbps: f64,
        bottleneck_delay_us: f64,
    },
    /// Hosts around one switch (incast, and the DCTCP single-switch experiments).
    Star { hosts: u32, link_gbps: f64, link_delay_us: f64 },
    /// Two-tier Clos: every ToR connects to every spine (bfc.md §13.2: 8 ToR × 16 hosts, 8 spines,
    /// 100 Gbit/s, 1 µs). Hosts are numbered ToR by ToR.
    LeafSpine { tors: u32, hosts_per_tor: u32, spines: u32, host_gbps: f64, core_gbps: f64, link_delay_us: f64 },
    /// Three-tier fat-tree (Annulus's ns-2 fabric, annulus.md §9.4: 4 pods of 4 ToRs × 8 hosts
    /// and 4 aggregation switches, 8 cores, 10 Gbit/s): every ToR connects to every aggregation
    /// switch of its pod, aggregation switch `j` of every pod to cores `j·c … j·c + c − 1` where
    /// `c = cores / aggs_per_pod`. Hosts are numbered pod by pod, ToR by ToR; `load` is a fraction
    /// of the aggregation–core capacity (the tier the oversubscription leaves thinnest with
    /// uniform pairs). With `external`, a border router and hosts beyond it (the WAN edge).
    FatTree {
        pods: u32,
        tors_per_pod: u32,
        aggs_per_pod: u32,
        hosts_per_tor: u32,
        cores: u32,
        /// Every link's rate inside the datacenter, host links included.
        link_gbps: f64,
        /// One-way propagation delay of each host–ToR link, µs.
        host_delay_us: f64,
        /// One-way propagation delay of each switch–switch link, µs.
        fabric_delay_us: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        external: Option<ExternalEdge>,
    },
}

/// The WAN edge of a fat-tree: a border router (switch `border`) linked to the first
/// `border_links_per_pod` aggregation switches of every pod at the fabric's rate (Jupiter-style:
/// annulus.md §9.4's "pool of 25 % of aggregate intra-cluster bandwidth" per pod is 2 of a pod's
/// 8 core links), and `hosts` external hosts on the border router, each over a link of its own
/// with `delay_us` one way (10 ms: a 20 ms RTT between the datacenter and the edge). External
/// hosts are numbered after the datacenter's; ports on the border router may take their own
/// queue discipline (`switch.border_qdisc`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalEdge {
    pub hosts: u32,
    pub border_links_per_pod: u32,
    /// The external hosts' link rate, Gbit/s (default: the fabric's `link_gbps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_gbps: Option<f64>,
    pub delay_us: f64,
}

/// Switch buffers, admission, queue discipline and PFC (the same on every switch).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// Shared buffer per switch, bytes.
    pub buffer_bytes: u64,
    /// "dynamic": Choudhury–Hahne dynamic threshold, a port may hold up to α × free buffer;
    /// "static": each port may hold up to `port_buffer_bytes`.
    pub admission: Admission,
    /// α of the dynamic threshold.
    pub dt_alpha: f64,
    /// Per-port limit under static admission, bytes.
    pub port_buffer_bytes: Option<u64>,
    /// Egress queues per port. With more than one and the round-robin scheduler, packets are
    /// spread by flow hash (or BFC's assignment) and served round-robin among non-paused queues.
    pub queues_per_port: u16,
    /// How a port picks the queue to serve next (`round_robin`, the default, or
    /// `strict_priority`: queue `p` holds the packets of priority `p`, and the highest non-empty
    /// queue always goes first, as 802.1p classes on a switch port do).
    #[serde(skip_serializing_if = "Scheduler::is_round_robin")]
    pub scheduler: Scheduler,
    /// Each egress queue's own limit, bytes, on top of the port's and the switch's (a fixed
    /// carve-out per queue: the HULL testbed's "small" buffer of 10 packets per port and
    /// priority, dc.md §6.3). Absent: only the port's and switch's limits apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_buffer_bytes: Option<u64>,
    pub qdisc: QdiscConfig,
    /// The queue discipline of the border router's ports instead of `qdisc` (a fat-tree's
    /// `external` edge): Annulus's ns-2 runs mark ECN on intra-datacenter switches only, while
    /// the border router keeps its QCN congestion point (annulus.md §9.4, §12 A19).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub border_qdisc: Option<QdiscConfig>,
    pub pfc: PfcConfig,
    /// BFC on every switch (`[switch.bfc]`; absent = off). Needs `queues_per_port` ≥ 2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bfc: Option<BfcConfig>,
    /// In-band network telemetry for HPCC (Li et al., SIGCOMM 2019, §3.1): every switch egress
    /// appends a hop record (queue bytes, cumulative tx bytes, time, link rate) to each data
    /// packet it transmits, up to `ccp_contract::MAX_INT_HOPS`; receivers echo the list in their
    /// ACKs and senders pass it to the algorithm as `NetworkFeedback::Int`.
    pub int: bool,
    /// Bytes the INT header adds to every data packet on the wire when `int` is on (charged once
    /// per packet, whatever the hop count; ACKs carry the echo uncharged). 80: specs/bfc.md §15.
    pub int_overhead_bytes: u32,
    /// Random (non-congestion) loss, percent: every data packet a switch sends to a host (its
    /// last hop, which every path has exactly once) is lost on that link with this probability,
    /// after using it, as a corrupted frame is. Drawn from a seeded stream per port; 0 (the
    /// default) draws nothing. Counted as `dropped_random`.
    #[serde(skip_serializing_if = "is_zero")]
    pub loss_pct: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Default INT header overhead per data packet, bytes (specs/bfc.md §15's HPCC baseline).
pub const DEFAULT_INT_OVERHEAD_BYTES: u32 = 80;

/// `[switch.bfc]`: backpressure flow control (specs/bfc.md §5–§6) on every switch, through
/// [`crate::bfc`]'s hook. Present and `enabled` = installed when the scenario is built.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BfcConfig {
    /// Install BFC (true; `false` keeps the table but runs without it, for `--set` comparisons).
    pub enabled: bool,
    /// Th = `th_multiplier` × HRTT × μ / N_active: 1.0 = thesis, 1.5 = artifact (§16.1).
    pub th_multiplier: f64,
    /// Minimum idle time before a drained flow-table entry may move to another queue, ns (§16.8).
    pub sticky_ns: u32,
    /// 1-hop RTT used for Th, ns; absent = twice the longest link delay at each switch.
    pub hrtt_ns: Option<u64>,
}

/// Most BFC queues per port the pipeline holds (`queues_per_port` with BFC on): the thesis's
/// "BFC 128"; the P4 has 32.
pub const BFC_MAX_QUEUES: u16 = ccp_bfc_model::MAX_QUEUES_PER_PORT as u16;

impl Default for BfcConfig {
    fn default() -> Self {
        BfcConfig { enabled: true, th_multiplier: 1.0, sticky_ns: ccp_bfc_model::STICKY_NS, hrtt_ns: None }
    }
}

/// Default shared buffer, bytes (a few MB as in shallow-buffered datacenter switches).
pub const DEFAULT_BUFFER_BYTES: u64 = 4_000_000;

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            admission: Admission::Dynamic,
            dt_alpha: 1.0,
            port_buffer_bytes: None,
            queues_per_port: 1,
            scheduler: Scheduler::RoundRobin,
            queue_buffer_bytes: None,
            qdisc: QdiscConfig::Droptail {},
            border_qdisc: None,
            pfc: PfcConfig::default(),
            bfc: None,
            int: false,
            int_overhead_bytes: DEFAULT_INT_OVERHEAD_BYTES,
            loss_pct: 0.0,
        }
    }
}

/// How a switch port chooses among its egress queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduler {
    /// One packet per non-empty, non-paused queue in turn.
    #[default]
    RoundRobin,
    /// The highest-numbered non-empty, non-paused queue first; a packet joins the queue of its
    /// flow's `priority` (non-preemptive: a packet being sent finishes first).
    StrictPriority,
}

impl Scheduler {
    fn is_round_robin(&self) -> bool {
        *self == Scheduler::RoundRobin
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    Dynamic,
    Static,
}

/// The queue discipline of every switch egress queue (from `ccp-qdisc`, shared with the router).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QdiscConfig {
    Droptail {},
    /// DCTCP step marking: CE when the queue an ECT packet finds exceeds K (dc.md §2.1).
    Dctcp {
        #[serde(default)]
        k_pkts: Option<u64>,
        #[serde(default)]
        k_bytes: Option<u64>,
        /// Drop Not-ECT packets above K instead of passing them.
        #[serde(default)]
        drop_non_ect: bool,
    },
    /// HULL phantom queue on the transmit side (dc.md §3.2).
    Phantom {
        #[serde(default = "default_phantom_drain")]
        drain_fraction: f64,
        #[serde(default = "default_phantom_threshold")]
        mark_threshold_bytes: f64,
    },
    /// QCN congestion point (dc.md §4.2), optionally with DCTCP marking on the same queue.
    Qcn {
        #[serde(default = "default_qcn_q_eq")]
        q_eq_bytes: u64,
        #[serde(default = "default_qcn_w")]
        w: f64,
        #[serde(default = "default_qcn_p")]
        sampling_probability: f64,
        /// One sample every this many arriving bytes instead (the Annulus testbed: 15 KB);
        /// overrides `sampling_probability`.
        #[serde(default)]
        sampling_bytes: Option<u64>,
        /// "packets" (thesis) or "standard" (802.1Qau).
        #[serde(default = "default_qcn_quantization")]
        quantization: String,
        #[serde(default)]
        ecn_k_bytes: Option<u64>,
    },
    /// RED-style ECN marking, DCQCN's switch side (Zhu et al. 2015, §3.1, Fig. 5): on the
    /// instantaneous queue an ECT packet finds, no mark up to K_min, probability rising linearly
    /// to P_max just below K_max, every packet from K_max. Defaults: the DCQCN paper's §5 values
    /// (5 KB, 200 KB, 1 %). The draws are seeded per switch queue from the scenario seed.
    /// `at_departure` (false) applies the rule when a packet leaves, to the queue behind it, as
    /// the HPCC authors' ns-3 switch does (`ccp_qdisc::red::RedAtDeparture`).
    Red {
        #[serde(default = "default_red_k_min")]
        k_min_bytes: u64,
        #[serde(default = "default_red_k_max")]
        k_max_bytes: u64,
        #[serde(default = "default_red_p_max")]
        p_max: f64,
        #[serde(default)]
        at_departure: bool,
    },
    /// Per-flow fair queueing: DRR over one queue per flow (`ccp_qdisc::fair_queue`). With a
    /// buffer too large to fill and hosts capped at one BDP in flight, the BFC thesis's Ideal-FQ
    /// oracle (specs/bfc.md §15).
    Fq {},
    /// CoDel (RFC 8289).
    Codel {
        #[serde(default = "default_codel_target")]
        target_us: f64,
        #[serde(default = "default_codel_interval")]
        interval_us: f64,
        #[serde(default)]
        ecn: bool,
    },
}

fn default_phantom_drain() -> f64 {
    0.95
}
fn default_phantom_threshold() -> f64 {
    1000.0
}
fn default_qcn_q_eq() -> u64 {
    33_000
}
fn default_qcn_w() -> f64 {
    2.0
}
fn default_qcn_p() -> f64 {
    0.01
}
fn default_qcn_quantization() -> String {
    "packets".into()
}
fn default_red_k_min() -> u64 {
    ccp_qdisc::red::DCQCN_PAPER_K_MIN_BYTES
}
fn default_red_k_max() -> u64 {
    ccp_qdisc::red::DCQCN_PAPER_K_MAX_BYTES
}
fn default_red_p_max() -> f64 {
    ccp_qdisc::red::DCQCN_PAPER_P_MAX
}
fn default_codel_target() -> f64 {
    5_000.0
}
fn default_codel_interval() -> f64 {
    100_000.0
}

/// Priority flow control (802.1Qbb) on every switch ingress, one priority for all traffic.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PfcConfig {
    pub enabled: bool,
    /// Pause the upstream when an ingress port's buffered bytes exceed this.
    pub xoff_bytes: u64,
    /// Resume when they fall to this.
    pub xon_bytes: u64,
    /// A dynamic threshold instead (the datacenter baselines' PFC, specs/bfc.md §15: 11 % of the
    /// free buffer): pause when an ingress holds more than this fraction of the shared buffer
    /// still free, resume `resume_offset_bytes` below that (HPCC's ns-3 switch MMU: free >> shift
    /// to pause, 3 KB below it to resume). `xoff_bytes`/`xon_bytes` are then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_fraction: Option<f64>,
    pub resume_offset_bytes: u64,
}

impl Default for PfcConfig {
    fn default() -> Self {
        PfcConfig { enabled: false, xoff_bytes: 200_000, xon_bytes: 180_000, free_fraction: None, resume_offset_bytes: 3_000 }
    }
}

/// The hosts' reliable transport.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransportConfig {
    /// Payload per full segment, bytes.
    pub mss_bytes: u32,
    /// Header bytes added to every data segment on the wire (IP + TCP).
    pub header_bytes: u32,
    /// Bytes of an ACK on the wire.
    pub ack_bytes: u32,
    /// Window a new flow starts with, segments (the algorithm's `init` action replaces it once it
    /// reaches the datapath).
    pub init_cwnd_pkts: u32,
    /// Lower bound of the retransmission timeout, µs.
    pub rto_min_us: f64,
    /// Timeout before the first RTT sample, µs.
    pub rto_initial_us: f64,
    /// Upper bound after exponential backoff, µs.
    pub rto_max_us: f64,
    /// A segment is lost when this many later segments were selectively acknowledged.
    pub dupthresh: u32,
    /// The receiver acknowledges every this many in-order segments (m of dc.md §2.2).
    pub delayed_ack_segments: u32,
    /// Delayed-ACK timer, µs.
    pub delayed_ack_timeout_us: f64,
    /// Interrupt coalescing at every host's NIC, µs (0: off): a packet reaching an idle host
    /// starts the interval, and the host's stack sees everything that arrived in it at its end,
    /// in order. It makes ACKs reach senders in bunches and so senders release line-rate bursts,
    /// the burstiness HULL's pacer exists to smooth (specs/dc.md §7.2 H3, §8 A31).
    pub rx_coalesce_us: f64,
    /// Data is sent ECT(0); without it switches never mark and DCTCP marking becomes drop-tail.
    pub ecn: bool,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            mss_bytes: 1460,
            header_bytes: 40,
            ack_bytes: 64,
            init_cwnd_pkts: 10,
            rto_min_us: 10_000.0,
            rto_initial_us: 10_000.0,
            rto_max_us: 1_000_000.0,
            dupthresh: 3,
            delayed_ack_segments: 1,
            delayed_ack_timeout_us: 500.0,
            rx_coalesce_us: 0.0,
            ecn: true,
        }
    }
}

/// HULL's host pacer (specs/dc.md §3.4, Table 4.3): a token bucket at every host's NIC through
/// which the flows it has associated send, the rest passing by. The defaults are the thesis's
/// 1 Gbit/s testbed; its 10 Gbit/s ns-2 runs used `rate_interval_us = 7.2`, `beta_per_s = 375`,
/// `idle_timeout_us = 1000`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PacerConfig {
    /// `false` keeps the table but runs without a pacer (for sweeps).
    pub enabled: bool,
    /// T_r: how often the token rate is re-estimated, µs.
    pub rate_interval_us: f64,
    /// η: weight of the newest rate sample.
    pub eta: f64,
    /// β: extra rate per byte of backlog, 1/s (dc.md §8 A16).
    pub beta_per_s: f64,
    /// p_a: probability that an ECN-Echo ACK associates its flow with the pacer.
    pub associate_probability: f64,
    /// T_i: an association ends after this long without a packet of its flow, µs.
    pub idle_timeout_us: f64,
    /// Flow association table entries (least recently active evicted).
    pub table_entries: u32,
    /// The token bucket's FIFO, bytes: a flow whose next packet does not fit waits.
    pub fifo_bytes: u32,
    /// Most tokens the bucket holds, bytes.
    pub depth_bytes: u32,
    /// Tokens are added every this many µs.
    pub tick_us: f64,
    /// The token rate never falls below this, Mbit/s.
    pub min_rate_mbps: f64,
}

impl PacerConfig {
    /// The model's settings (`ccp_qdisc::pacer`, which checks them).
    pub fn settings(&self) -> pacer::PacerSettings {
        pacer::PacerSettings {
            rate_interval_us: self.rate_interval_us,
            eta: self.eta,
            beta_per_s: self.beta_per_s,
            associate_probability: self.associate_probability,
            idle_timeout_us: self.idle_timeout_us,
            table_entries: self.table_entries,
            fifo_bytes: self.fifo_bytes,
            depth_bytes: self.depth_bytes,
            tick_us: self.tick_us,
            min_rate_mbps: self.min_rate_mbps,
        }
    }
}

impl Default for PacerConfig {
    fn default() -> Self {
        PacerConfig {
            enabled: true,
            rate_interval_us: pacer::RATE_INTERVAL_US,
            eta: pacer::ETA,
            beta_per_s: pacer::BETA_PER_S,
            associate_probability: pacer::ASSOCIATE_PROBABILITY,
            idle_timeout_us: pacer::IDLE_TIMEOUT_US,
            table_entries: pacer::TABLE_ENTRIES,
            fifo_bytes: pacer::FIFO_BYTES,
            depth_bytes: pacer::DEPTH_BYTES,
            tick_us: pacer::TICK_US,
            min_rate_mbps: pacer::MIN_RATE_MBPS,
        }
    }
}

/// Congestion control: the algorithm, its parameters, and how the datapath reports to it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CcConfig {
    /// A name from the `ccp-algorithms` registry.
    pub algorithm: String,
    /// The algorithm's parameters (validated by the registry).
    pub params: toml::Table,
    /// "per_ack": a report on every ACK, applied at once (an in-datapath controller);
    /// "interval": CCP-style reports every `report_interval_us` (or as the algorithm asks).
    pub reporting: Reporting,
    /// Report interval until the algorithm asks for another, µs.
    pub report_interval_us: f64,
    /// Time from a report to its action taking effect in the datapath (IPC + agent), µs.
    pub agent_delay_us: f64,
    /// Send an urgent report on the first ECN-Echo of a congestion window (the datapath entering
    /// CWR; dc.md §9.5).
    pub urgent_on_ece: bool,
    /// The RTT a flow's per-RTT report interval counts before its first RTT sample, µs: 100 (a
    /// datacenter's) by default; on a WAN path, what a TCP handshake would have measured
    /// (without it a policy reporting per RTT is called every 100 µs until the first ACK).
    pub initial_rtt_us: f64,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            algorithm: "reno".into(),
            params: toml::Table::new(),
            reporting: Reporting::PerAck,
            report_interval_us: 10_000.0,
            agent_delay_us: 0.0,
            urgent_on_ece: true,
            initial_rtt_us: DEFAULT_INITIAL_RTT_US,
        }
    }
}

/// Default `[cc] initial_rtt_us` (`cc::FALLBACK_RTT`).
pub const DEFAULT_INITIAL_RTT_US: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reporting {
    PerAck,
    Interval,
}

/// Traffic: explicit flows, random flows at a target load, periodic incasts (any combination).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadConfig {
    pub flows: Vec<FlowConfig>,
    pub random: Option<RandomClasses>,
    pub incast: Option<IncastConfig>,
}

impl WorkloadConfig {
    /// The random classes, in order (none, one `[workload.random]`, or each `[[workload.random]]`).
    pub fn random_classes(&self) -> &[RandomConfig] {
        match &self.random {
            None => &[],
            Some(RandomClasses::One(r)) => std::slice::from_ref(r),
            Some(RandomClasses::Many(v)) => v,
        }
    }

    /// How error messages name random class `i`: `workload.random`, or `workload.random[i]`
    /// when there are several.
    pub fn random_key(&self, i: usize) -> String {
        match &self.random {
            Some(RandomClasses::Many(_)) => format!("workload.random[{i}]"),
            _ => "workload.random".into(),
        }
    }
}

/// Random traffic: one `[workload.random]` table, or several `[[workload.random]]` classes, each
/// with its own endpoints, size CDF, load, label and transport (the intra-datacenter, WAN and
/// external traffic of a fat-tree with a WAN edge). Class `i` draws from streams of its own, so
/// adding a class leaves the ones before it unchanged.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RandomClasses {
    One(RandomConfig),
    Many(Vec<RandomConfig>),
}

impl RandomClasses {
    pub fn as_mut_slice(&mut self) -> &mut [RandomConfig] {
        match self {
            RandomClasses::One(r) => std::slice::from_mut(r),
            RandomClasses::Many(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for RandomClasses {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::Array(classes) => classes
                .into_iter()
                .enumerate()
                .map(|(i, v)| RandomConfig::deserialize(v).map_err(|e| D::Error::custom(format!("class [{i}]: {e}"))))
                .collect::<Result<Vec<_>, _>>()
                .map(RandomClasses::Many),
            one => RandomConfig::deserialize(one).map(RandomClasses::One).map_err(D::Error::custom),
        }
    }
}

/// Which hosts a random class's flows run between, on a topology with an external edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairClass {
    /// Two datacenter hosts; `load` is of the topology's reference capacity.
    Internal,
    /// A datacenter host and an external one, either way round; `load` is of the pods' links to
    /// the border router.
    Wan,
    /// Two external hosts (cross traffic on the edge); `load` is of the external hosts' links.
    External,
}

/// One explicit flow (or `count` identical ones).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub src: u32,
    pub dst: u32,
    /// Bytes to send; absent = unbounded (a long-lived flow).
    #[serde(default)]
    pub bytes: Option<u64>,
    #[serde(default)]
    pub start_us: f64,
    #[serde(default = "one")]
    pub count: u32,
    /// Back-to-back transfers per flow (needs `bytes`): each of the `count` flows sends this many
    /// transfers of `bytes` one after another, each on a new connection that opens when the last
    /// byte of the previous one is acknowledged (Annulus's edge caching, annulus.md §9.4). Each
    /// transfer is a row of its own in `flows.csv`.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub transfers: u32,
    /// A name for these flows in the per-flow output (`flows.csv`'s `label` column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// These flows' congestion control instead of `[cc]`'s algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<FlowCcConfig>,
    /// The switch queue these flows' packets join under `switch.scheduler = "strict_priority"`
    /// (higher is served first; 0, the default, is the lowest), as an IP TOS the switch maps
    /// to a class.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub priority: u8,
}

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

/// A congestion control for some flows instead of `[cc]`'s `algorithm` and `params` (validated
/// the same way). How the datapath reports (`reporting`, `report_interval_us`, `agent_delay_us`,
/// `urgent_on_ece`) stays `[cc]`'s for every flow.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowCcConfig {
    /// A name from the `ccp-algorithms` registry.
    pub algorithm: String,
    /// The algorithm's parameters.
    #[serde(default)]
    pub params: toml::Table,
}

/// Longest `label` accepted, characters.
pub const MAX_LABEL_LEN: usize = 64;

fn one() -> u32 {
    1
}
fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Open-loop random flows whose sizes follow a CDF file, at a target load.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RandomConfig {
    /// A CDF file ("size_bytes cumulative_probability" per line, percent or fraction), relative
    /// to the scenario file.
    pub cdf: PathBuf,
    /// Offered load as a fraction of the topology's reference capacity (dumbbell: the bottleneck;
    /// star: all host links; leaf-spine: all ToR–spine links, the BFC convention).
    pub load: f64,
    #[serde(default = "default_arrivals")]
    pub arrivals: Arrivals,
    /// σ of log-normal inter-arrivals (BFC: 2).
    #[serde(default = "default_sigma")]
    pub sigma: f64,
    #[serde(default)]
    pub start_ms: f64,
    /// Arrivals stop at this time (default: the run's duration).
    #[serde(default)]
    pub stop_ms: Option<f64>,
    /// At most this many random flows.
    #[serde(default)]
    pub max_flows: Option<u64>,
    /// The random flows' congestion control instead of `[cc]`'s algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<FlowCcConfig>,
    /// Which hosts the flows run between (absent: any two of the topology's, or of the
    /// datacenter's on a topology with an external edge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<PairClass>,
    /// Every flow of the class goes to this host, from any other host its pairs allow (HULL's
    /// memcached-like client, which receives the responses of the other servers: dc.md §6.3);
    /// `load` is then a fraction of this host's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<u32>,
    /// A name for these flows in `flows.csv`'s `label` column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// These flows' minimum (and initial) retransmission timeout instead of `[transport]`'s, µs:
    /// Annulus's ns-2 runs use 1 ms inside the datacenter and 100 ms across the WAN (§9.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_min_us: Option<f64>,
    /// These flows' switch queue under strict priority (as `workload.flows[].priority`): the
    /// HULL testbed's TCP-QoS sends its 1 KB responses at high priority (dc.md §6.3).
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub priority: u8,
}

fn default_arrivals() -> Arrivals {
    Arrivals::Poisson
}
fn default_sigma() -> f64 {
    2.0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    Poisson,
    Lognormal,
}

/// Periodic incast bursts: `degree` random senders each send `total_bytes / degree` to one
/// random receiver, every `interval_us`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IncastConfig {
    pub degree: u32,
    pub total_bytes: u64,
    pub interval_us: f64,
    #[serde(default)]
    pub start_us: f64,
    /// Bursts stop at this time (default: the run's duration).
    #[serde(default)]
    pub stop_us: Option<f64>,
    /// A fixed receiver host instead of a random one per burst.
    #[serde(default)]
    pub receiver: Option<u32>,
    /// At most this many bursts.
    #[serde(default)]
    pub bursts: Option<u32>,
    /// The incast flows' congestion control instead of `[cc]`'s algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<FlowCcConfig>,
}

/// What to record and write.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    /// Queue and link sampling period, µs.
    pub sample_interval_us: f64,
    /// Ports to sample, by name ("left->right", "sw0->h2", "tor0->spine3"); default per topology.
    pub monitor: Option<Vec<String>>,
    /// Upper edges of the FCT flow-size buckets, bytes (a last bucket catches larger flows).
    pub buckets_bytes: Vec<u64>,
    pub plots: bool,
    /// "png", "svg" or "both".
    pub plot_format: String,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            sample_interval_us: 100.0,
            monitor: None,
            buckets_bytes: vec![10_000, 100_000, 1_000_000, 10_000_000],
            plots: true,
            plot_format: "png".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{load_text, DUMBBELL, GOOD};
    use super::*;

    #[test]
    fn per_flow_delays_labels_and_algorithms_load() {
        let l = load_text(DUMBBELL).unwrap();
        match &l.scenario.topology {
            TopologyConfig::Dumbbell { host_delays_us, .. } => assert_eq!(host_delays_us.as_deref(), Some(&[1.0, 500.0][..])),
            other => panic!("{other:?}"),
        }
        let f = &l.scenario.workload.flows;
        assert_eq!((f[0].label.as_deref(), f[1].label.as_deref()), (Some("dc"), Some("wan")));
        assert!(f[0].cc.is_none());
        let cc = f[1].cc.as_ref().unwrap();
        assert_eq!((cc.algorithm.as_str(), cc.params.get("g").and_then(|g| g.as_float())), ("dctcp", Some(0.0625)));
        // Absent keys stay absent when a scenario is written back.
        let good = toml::to_string(&load_text(GOOD).unwrap().scenario).unwrap();
        assert!(!good.contains("host_delays_us") && !good.contains("label") && !good.contains("cc = "), "{good}");
    }
}
