//! Scenario files: the TOML format, its defaults, and validation with errors that name the file,
//! the line and the key.
//!
//! A scenario declares a topology, switch buffers and queue discipline, the hosts' transport, the
//! congestion control (any algorithm in the `ccp-algorithms` registry, with its parameters), the
//! workload and what to record. `configs/sim/*.toml` are the shipped scenarios; every key and its
//! default is documented on the structs below and in `configs/sim/README.md`.
//!
//! Errors: syntax and type errors come from the TOML parser with the line and column; semantic
//! errors (a threshold above the buffer, an unknown algorithm parameter, a missing CDF file) are
//! located by [`locate`] on the key's own line. Values given with `--set` are reported as such.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
        /// One-way delay of each sender's access link, µs, one value per sender (in host
        /// order), instead of `host_delay_us`: flows with different RTTs on one bottleneck (a
        /// DC/WAN mix). Receivers keep `host_delay_us`. Absent: every host has `host_delay_us`.
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
    /// Egress queues per port (a BFC hook). With more than one, packets are spread by flow hash
    /// and served round-robin among non-paused queues.
    pub queues_per_port: u16,
    pub qdisc: QdiscConfig,
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

/// Most BFC queues per port the pipeline holds (`queues_per_port` with BFC on).
pub const BFC_MAX_QUEUES: u16 = ccp_bfc_model::QUEUES_PER_PORT as u16;

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
            qdisc: QdiscConfig::Droptail {},
            pfc: PfcConfig::default(),
            bfc: None,
            int: false,
            int_overhead_bytes: DEFAULT_INT_OVERHEAD_BYTES,
        }
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
    Red {
        #[serde(default = "default_red_k_min")]
        k_min_bytes: u64,
        #[serde(default = "default_red_k_max")]
        k_max_bytes: u64,
        #[serde(default = "default_red_p_max")]
        p_max: f64,
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
            ecn: true,
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
        }
    }
}

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
    pub random: Option<RandomConfig>,
    pub incast: Option<IncastConfig>,
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
    /// A name for these flows in the per-flow output (`flows.csv`'s `label` column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// These flows' congestion control instead of `[cc]`'s algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<FlowCcConfig>,
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

/// A scenario that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {source}")]
    Io { file: String, source: std::io::Error },
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}:{line}: `{key}`: {message}")]
    Invalid { file: String, line: usize, key: String, message: String },
    #[error("--set {key}: {message}")]
    Override { key: String, message: String },
}

/// A loaded, validated scenario with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub scenario: Scenario,
    /// The file it was read from (for messages and relative paths).
    pub file: PathBuf,
    pub text: String,
    /// Keys changed on the command line, dotted.
    pub overrides: Vec<String>,
}

impl Loaded {
    /// Directory relative paths in the scenario resolve against.
    pub fn base_dir(&self) -> PathBuf {
        self.file.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The scenario's name: `name`, or the file stem.
    pub fn name(&self) -> String {
        self.scenario
            .name
            .clone()
            .unwrap_or_else(|| self.file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default())
    }

    /// An error about `key` (dotted, array items as `flows[2]`), on its line.
    pub fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let message = message.into();
        if self.overrides.iter().any(|o| key.starts_with(o.as_str()) || o.starts_with(key)) {
            return ConfigError::Override { key: key.to_string(), message };
        }
        ConfigError::Invalid {
            file: self.file.display().to_string(),
            line: locate(&self.text, key),
            key: key.to_string(),
            message,
        }
    }
}

/// Reads, overrides (`key.path=value` with a TOML value), parses and validates a scenario file.
pub fn load(file: &Path, overrides: &[String]) -> Result<Loaded, ConfigError> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Io { file: name.clone(), source })?;
    load_str(file, &text, overrides)
}

/// As [`load`], from text already read (`file` names it in messages).
pub fn load_str(file: &Path, text: &str, overrides: &[String]) -> Result<Loaded, ConfigError> {
    let name = file.display().to_string();
    let scenario: Scenario = if overrides.is_empty() {
        toml::from_str(text).map_err(|e| syntax_error(&name, text, &e))?
    } else {
        let mut table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(&name, text, &e))?;
        for o in overrides {
            apply_override(&mut table, o)?;
        }
        Scenario::deserialize(toml::Value::Table(table))
            .map_err(|e| ConfigError::Syntax { file: name.clone(), message: format!("after --set overrides: {e}") })?
    };
    let keys = overrides.iter().map(|o| o.split('=').next().unwrap_or("").trim().to_string()).collect();
    let mut loaded = Loaded { scenario, file: file.to_path_buf(), text: text.to_string(), overrides: keys };
    absolute_python_names(&mut loaded)?;
    validate(&loaded)?;
    Ok(loaded)
}

/// The parser names the line; for unknown fields inside internally tagged tables it points at the
/// table header, so the field's own line is looked up instead.
fn syntax_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().to_string();
    let mut line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    if let Some(field) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
        if let Some(l) = line {
            if let Some(found) = find_key_after(text, l, field) {
                line = Some(found);
            }
        }
    }
    match line {
        Some(l) => ConfigError::Syntax { file: format!("{file}:{l}"), message },
        None => ConfigError::Syntax { file: file.to_string(), message },
    }
}

/// The first line at or after `from` (1-based) inside the same table that assigns `key`.
fn find_key_after(text: &str, from: usize, key: &str) -> Option<usize> {
    for (i, line) in text.lines().enumerate().skip(from - 1) {
        let t = line.trim_start();
        if i + 1 > from && t.starts_with('[') {
            return None;
        }
        if assigns(t, key) {
            return Some(i + 1);
        }
    }
    None
}

fn assigns(line: &str, key: &str) -> bool {
    line.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('='))
}

/// The 1-based line of a dotted key such as `switch.qdisc.k_pkts` or `workload.flows[1].dst`:
/// the line that assigns it inside its table (or as a dotted key in a parent table), else the
/// line that assigns the nearest enclosing key (a key inside an inline table:
/// `cc = { algorithm = "x" }`), else its table's header, else 1.
pub fn locate(text: &str, key: &str) -> usize {
    let (exact, header) = scan(text, key);
    if let Some(line) = exact {
        return line;
    }
    let mut k = key;
    while let Some((parent, _)) = k.rsplit_once('.') {
        if let (Some(line), _) = scan(text, parent) {
            return line;
        }
        k = parent;
    }
    header.unwrap_or(1)
}

/// The line assigning `key` exactly, if any, and the header line of its table, if any.
fn scan(text: &str, key: &str) -> (Option<usize>, Option<usize>) {
    let parts: Vec<&str> = key.split('.').collect();
    let (table_parts, leaf) = parts.split_at(parts.len().saturating_sub(1));
    let leaf = leaf.first().copied().unwrap_or("");
    // "flows[2]" names the third `[[...flows]]` table.
    let mut want_index = 0usize;
    let table: Vec<&str> = table_parts
        .iter()
        .map(|p| match p.split_once('[') {
            Some((name, idx)) => {
                want_index = idx.trim_end_matches(']').parse().unwrap_or(0);
                name
            }
            None => p,
        })
        .collect();
    let table = table.join(".");
    let mut current = String::new();
    let mut occurrence = 0usize;
    let mut seen = 0usize;
    let mut header_line = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        let header = t
            .strip_prefix("[[")
            .and_then(|h| h.split("]]").next())
            .map(|h| (h, true))
            .or_else(|| t.strip_prefix('[').and_then(|h| h.split(']').next()).map(|h| (h, false)));
        if let Some((h, array)) = header {
            current = h.trim().to_string();
            occurrence = 0;
            if current == table {
                if array {
                    occurrence = seen;
                    seen += 1;
                }
                if occurrence == want_index && header_line.is_none() {
                    header_line = Some(i + 1);
                }
            }
            continue;
        }
        if current == table && occurrence == want_index && assigns(t, leaf) {
            return (Some(i + 1), header_line);
        }
        // A dotted key in a parent table ("qdisc.k_pkts = 20" under [switch]).
        let rest = if current.is_empty() { Some(table.as_str()) } else { table.strip_prefix(&format!("{current}.")) };
        if let Some(rest) = rest.filter(|r| !r.is_empty()) {
            if assigns(t, &format!("{rest}.{leaf}")) {
                return (Some(i + 1), header_line);
            }
        }
        if table.is_empty() && current.is_empty() && assigns(t, leaf) {
            return (Some(i + 1), header_line);
        }
    }
    (None, header_line)
}

/// Applies one `a.b.c=value` override (the value parsed as TOML, or taken as a string if it does
/// not parse).
fn apply_override(table: &mut toml::Table, spec: &str) -> Result<(), ConfigError> {
    let (key, raw) = spec
        .split_once('=')
        .ok_or_else(|| ConfigError::Override { key: spec.to_string(), message: "expected key.path=value".into() })?;
    let key = key.trim();
    let raw = raw.trim();
    let value: toml::Value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    };
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = table;
    for p in &parts[..parts.len() - 1] {
        let entry = cur.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry
            .as_table_mut()
            .ok_or_else(|| ConfigError::Override { key: key.to_string(), message: format!("`{p}` is not a table") })?;
    }
    cur.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

fn positive(l: &Loaded, key: &str, v: f64) -> Result<(), ConfigError> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(l.invalid(key, format!("must be a positive number, got {v}")))
    }
}

fn non_negative(l: &Loaded, key: &str, v: f64) -> Result<(), ConfigError> {
    if v >= 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(l.invalid(key, format!("must be ≥ 0, got {v}")))
    }
}

/// Largest per-sender delay accepted, µs (10 s).
pub const MAX_HOST_DELAY_US: f64 = 10_000_000.0;

/// Makes every Python algorithm's path (`py:path/to/file.py:Class`) absolute, a relative one
/// relative to the scenario file's directory as the CDF's is, so the same scenario runs from
/// anywhere (and its results name the file run).
fn absolute_python_names(l: &mut Loaded) -> Result<(), ConfigError> {
    let base = l.base_dir();
    let w = &mut l.scenario.workload;
    let mut names: Vec<(String, &mut String)> = vec![("cc".into(), &mut l.scenario.cc.algorithm)];
    for (i, f) in w.flows.iter_mut().enumerate() {
        if let Some(c) = f.cc.as_mut() {
            names.push((format!("workload.flows[{i}].cc"), &mut c.algorithm));
        }
    }
    if let Some(c) = w.random.as_mut().and_then(|r| r.cc.as_mut()) {
        names.push(("workload.random.cc".into(), &mut c.algorithm));
    }
    if let Some(c) = w.incast.as_mut().and_then(|r| r.cc.as_mut()) {
        names.push(("workload.incast.cc".into(), &mut c.algorithm));
    }
    let mut failed = None;
    for (table, name) in names {
        match ccp_python::loader::absolute_name(name, &base) {
            Ok(abs) => *name = abs,
            Err(e) => {
                failed = Some((table, format!("{name}: {e}")));
                break;
            }
        }
    }
    match failed {
        Some((table, e)) => Err(l.invalid(&format!("{table}.algorithm"), e)),
        None => Ok(()),
    }
}

/// An algorithm name and its parameters, checked by the registry; errors name
/// `{table}.algorithm` or `{table}.params`.
fn check_algorithm(l: &Loaded, table: &str, algorithm: &str, params: &toml::Table) -> Result<(), ConfigError> {
    if let Err(e) = ccp_algorithms::registry::configure(algorithm, params) {
        let leaf = match &e {
            ccp_contract::ParamError::UnknownAlgorithm { .. } | ccp_contract::ParamError::Unavailable { .. } => "algorithm",
            _ => "params",
        };
        return Err(l.invalid(&format!("{table}.{leaf}"), e.to_string()));
    }
    Ok(())
}

/// Checks everything the types cannot: ranges, cross-field consistency, host indices, files,
/// algorithm names and parameters.
pub fn validate(l: &Loaded) -> Result<(), ConfigError> {
    let s = &l.scenario;
    positive(l, "duration_ms", s.duration_ms)?;
    non_negative(l, "warmup_ms", s.warmup_ms)?;
    if s.warmup_ms >= s.duration_ms {
        return Err(l.invalid("warmup_ms", "must be shorter than duration_ms"));
    }
    let hosts = match &s.topology {
        TopologyConfig::Dumbbell {
            senders,
            receivers,
            host_gbps,
            host_delay_us,
            host_delays_us,
            bottleneck_gbps,
            bottleneck_delay_us,
        } => {
            positive(l, "topology.host_gbps", *host_gbps)?;
            positive(l, "topology.bottleneck_gbps", *bottleneck_gbps)?;
            non_negative(l, "topology.host_delay_us", *host_delay_us)?;
            non_negative(l, "topology.bottleneck_delay_us", *bottleneck_delay_us)?;
            if *senders == 0 || *receivers == 0 {
                return Err(l.invalid("topology.senders", "a dumbbell needs at least one sender and one receiver"));
            }
            if let Some(d) = host_delays_us {
                if d.len() != *senders as usize {
                    return Err(
                        l.invalid("topology.host_delays_us", format!("needs one delay per sender ({senders}), got {}", d.len()))
                    );
                }
                for (i, &us) in d.iter().enumerate() {
                    if !(us >= 0.0 && us.is_finite()) {
                        return Err(l.invalid("topology.host_delays_us", format!("sender {i}: must be ≥ 0 µs, got {us}")));
                    }
                    if us > MAX_HOST_DELAY_US {
                        return Err(l.invalid(
                            "topology.host_delays_us",
                            format!("sender {i}: {us} µs is above {MAX_HOST_DELAY_US} µs (10 s)"),
                        ));
                    }
                }
            }
            senders + receivers
        }
        TopologyConfig::Star { hosts, link_gbps, link_delay_us } => {
            positive(l, "topology.link_gbps", *link_gbps)?;
            non_negative(l, "topology.link_delay_us", *link_delay_us)?;
            if *hosts < 2 {
                return Err(l.invalid("topology.hosts", "a star needs at least 2 hosts"));
            }
            *hosts
        }
        TopologyConfig::LeafSpine { tors, hosts_per_tor, spines, host_gbps, core_gbps, link_delay_us } => {
            positive(l, "topology.host_gbps", *host_gbps)?;
            positive(l, "topology.core_gbps", *core_gbps)?;
            non_negative(l, "topology.link_delay_us", *link_delay_us)?;
            if *tors == 0 || *hosts_per_tor == 0 || *spines == 0 {
                return Err(l.invalid("topology.tors", "tors, hosts_per_tor and spines must all be ≥ 1"));
            }
            tors * hosts_per_tor
        }
    };
    if hosts < 2 {
        return Err(l.invalid("topology", "the topology needs at least 2 hosts"));
    }

    let sw = &s.switch;
    if sw.buffer_bytes == 0 {
        return Err(l.invalid("switch.buffer_bytes", "must be > 0"));
    }
    if sw.int_overhead_bytes > 1000 {
        return Err(l.invalid("switch.int_overhead_bytes", "must be ≤ 1000"));
    }
    positive(l, "switch.dt_alpha", sw.dt_alpha)?;
    if sw.admission == Admission::Static && sw.port_buffer_bytes.is_none() {
        return Err(l.invalid("switch.admission", "static admission needs switch.port_buffer_bytes"));
    }
    if sw.queues_per_port == 0 {
        return Err(l.invalid("switch.queues_per_port", "must be ≥ 1"));
    }
    let limit = match sw.admission {
        Admission::Static => sw.port_buffer_bytes.unwrap_or(sw.buffer_bytes).min(sw.buffer_bytes),
        Admission::Dynamic => sw.buffer_bytes,
    };
    let mss_wire = u64::from(s.transport.mss_bytes + s.transport.header_bytes);
    match &sw.qdisc {
        QdiscConfig::Dctcp { k_pkts, k_bytes, .. } => {
            let k = match (k_pkts, k_bytes) {
                (Some(p), None) => p * mss_wire,
                (None, Some(b)) => *b,
                _ => return Err(l.invalid("switch.qdisc", "dctcp marking needs exactly one of k_pkts or k_bytes")),
            };
            if k >= limit {
                let key = if k_pkts.is_some() { "switch.qdisc.k_pkts" } else { "switch.qdisc.k_bytes" };
                return Err(l.invalid(key, format!("K = {k} B is not below the buffer a port can use ({limit} B)")));
            }
        }
        QdiscConfig::Phantom { drain_fraction, mark_threshold_bytes } => {
            if !(*drain_fraction > 0.0 && *drain_fraction <= 1.0) {
                return Err(l.invalid("switch.qdisc.drain_fraction", "must be in (0, 1]"));
            }
            non_negative(l, "switch.qdisc.mark_threshold_bytes", *mark_threshold_bytes)?;
        }
        QdiscConfig::Qcn { w, sampling_probability, sampling_bytes, quantization, .. } => {
            non_negative(l, "switch.qdisc.w", *w)?;
            if *sampling_bytes == Some(0) {
                return Err(l.invalid("switch.qdisc.sampling_bytes", "must be at least 1 byte"));
            }
            if !(*sampling_probability > 0.0 && *sampling_probability <= 1.0) {
                return Err(l.invalid("switch.qdisc.sampling_probability", "must be in (0, 1]"));
            }
            if quantization != "packets" && quantization != "standard" {
                return Err(l.invalid("switch.qdisc.quantization", "must be \"packets\" or \"standard\""));
            }
        }
        QdiscConfig::Red { k_min_bytes, k_max_bytes, p_max } => {
            let params =
                ccp_qdisc::red::RedParams { k_min_bytes: *k_min_bytes, k_max_bytes: *k_max_bytes, p_max: *p_max, seed: 0 };
            if let Err(e) = params.validate() {
                return Err(l.invalid(&format!("switch.qdisc.{}", e.param), e.message));
            }
            if *k_min_bytes >= limit {
                return Err(l.invalid(
                    "switch.qdisc.k_min_bytes",
                    format!("K_min = {k_min_bytes} B is not below the buffer a port can use ({limit} B)"),
                ));
            }
        }
        QdiscConfig::Codel { target_us, interval_us, .. } => {
            positive(l, "switch.qdisc.target_us", *target_us)?;
            if interval_us <= target_us {
                return Err(l.invalid("switch.qdisc.interval_us", "must exceed target_us"));
            }
        }
        QdiscConfig::Droptail {} | QdiscConfig::Fq {} => {}
    }
    if let Some(f) = sw.pfc.free_fraction {
        if !(f > 0.0 && f <= 1.0) {
            return Err(l.invalid("switch.pfc.free_fraction", "must be in (0, 1]"));
        }
    }
    if sw.pfc.enabled && sw.pfc.free_fraction.is_none() && sw.pfc.xon_bytes > sw.pfc.xoff_bytes {
        return Err(l.invalid("switch.pfc.xon_bytes", "must not exceed xoff_bytes"));
    }
    if let Some(b) = sw.bfc.as_ref().filter(|b| b.enabled) {
        if !(b.th_multiplier > 0.0 && b.th_multiplier <= 100.0) {
            return Err(l.invalid("switch.bfc.th_multiplier", "must be in (0, 100] (1.0 = thesis, 1.5 = artifact)"));
        }
        if (b.th_multiplier * 1000.0).round() < 1.0 {
            return Err(l.invalid("switch.bfc.th_multiplier", "must be at least 0.001"));
        }
        if b.hrtt_ns == Some(0) {
            return Err(l.invalid("switch.bfc.hrtt_ns", "must be > 0 ns (omit it for twice the longest link delay)"));
        }
        if !(2..=BFC_MAX_QUEUES).contains(&sw.queues_per_port) {
            return Err(l.invalid(
                "switch.queues_per_port",
                format!(
                    "BFC ([switch.bfc]) needs 2..={BFC_MAX_QUEUES} queues per port (the thesis uses 32), got {}",
                    sw.queues_per_port
                ),
            ));
        }
    }

    let t = &s.transport;
    if t.mss_bytes == 0 {
        return Err(l.invalid("transport.mss_bytes", "must be > 0"));
    }
    if t.ack_bytes == 0 {
        return Err(l.invalid("transport.ack_bytes", "must be > 0"));
    }
    if t.init_cwnd_pkts == 0 {
        return Err(l.invalid("transport.init_cwnd_pkts", "must be ≥ 1"));
    }
    positive(l, "transport.rto_min_us", t.rto_min_us)?;
    positive(l, "transport.rto_initial_us", t.rto_initial_us)?;
    if t.rto_max_us < t.rto_min_us {
        return Err(l.invalid("transport.rto_max_us", "must be ≥ rto_min_us"));
    }
    if t.dupthresh == 0 {
        return Err(l.invalid("transport.dupthresh", "must be ≥ 1"));
    }
    if t.delayed_ack_segments == 0 {
        return Err(l.invalid("transport.delayed_ack_segments", "must be ≥ 1"));
    }
    positive(l, "transport.delayed_ack_timeout_us", t.delayed_ack_timeout_us)?;

    let cc = &s.cc;
    check_algorithm(l, "cc", &cc.algorithm, &cc.params)?;
    positive(l, "cc.report_interval_us", cc.report_interval_us)?;
    non_negative(l, "cc.agent_delay_us", cc.agent_delay_us)?;

    let w = &s.workload;
    for (i, f) in w.flows.iter().enumerate() {
        if f.src >= hosts || f.dst >= hosts || f.src == f.dst {
            return Err(l.invalid(
                &format!("workload.flows[{i}].dst"),
                format!("src and dst must be distinct hosts below {hosts} (got {} → {})", f.src, f.dst),
            ));
        }
        if f.bytes == Some(0) {
            return Err(l.invalid(&format!("workload.flows[{i}].bytes"), "must be > 0 (omit it for an unbounded flow)"));
        }
        non_negative(l, &format!("workload.flows[{i}].start_us"), f.start_us)?;
        if let Some(label) = &f.label {
            let ok = |c: char| c.is_ascii_alphanumeric() || "-_.:/+".contains(c);
            if label.is_empty() || label.chars().count() > MAX_LABEL_LEN || !label.chars().all(ok) {
                return Err(l.invalid(
                    &format!("workload.flows[{i}].label"),
                    format!(
                        "{label:?}: 1 to {MAX_LABEL_LEN} letters, digits or - _ . : / + (it is written into flows.csv unquoted)"
                    ),
                ));
            }
        }
        if let Some(c) = &f.cc {
            check_algorithm(l, &format!("workload.flows[{i}].cc"), &c.algorithm, &c.params)?;
        }
    }
    if let Some(r) = &w.random {
        if !(r.load > 0.0 && r.load < 1.5) {
            return Err(l.invalid("workload.random.load", format!("must be in (0, 1.5), got {}", r.load)));
        }
        positive(l, "workload.random.sigma", r.sigma)?;
        let path = l.base_dir().join(&r.cdf);
        if !path.exists() {
            return Err(l.invalid("workload.random.cdf", format!("{} does not exist", path.display())));
        }
        if let Err(e) = crate::workload::SizeCdf::load(&path) {
            return Err(l.invalid("workload.random.cdf", e));
        }
        if let Some(c) = &r.cc {
            check_algorithm(l, "workload.random.cc", &c.algorithm, &c.params)?;
        }
    }
    if let Some(inc) = &w.incast {
        if inc.degree == 0 || inc.degree >= hosts {
            return Err(l.invalid("workload.incast.degree", format!("must be in 1..{hosts} (the other hosts)")));
        }
        if inc.total_bytes < u64::from(inc.degree) {
            return Err(l.invalid("workload.incast.total_bytes", "must give every sender at least one byte"));
        }
        positive(l, "workload.incast.interval_us", inc.interval_us)?;
        if inc.receiver.is_some_and(|r| r >= hosts) {
            return Err(l.invalid("workload.incast.receiver", format!("must be a host below {hosts}")));
        }
        if let Some(c) = &inc.cc {
            check_algorithm(l, "workload.incast.cc", &c.algorithm, &c.params)?;
        }
    }

    let o = &s.output;
    positive(l, "output.sample_interval_us", o.sample_interval_us)?;
    if o.buckets_bytes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(l.invalid("output.buckets_bytes", "bucket edges must be strictly increasing"));
    }
    if !matches!(o.plot_format.as_str(), "png" | "svg" | "both") {
        return Err(l.invalid("output.plot_format", "must be \"png\", \"svg\" or \"both\""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
duration_ms = 10

[topology]
kind = "star"
hosts = 4
link_gbps = 10
link_delay_us = 1

[switch.qdisc]
kind = "dctcp"
k_pkts = 20

[[workload.flows]]
src = 0
dst = 3

[[workload.flows]]
src = 1
dst = 3
"#;

    fn load_text(text: &str) -> Result<Loaded, ConfigError> {
        load_str(Path::new("test.toml"), text, &[])
    }

    /// The 1-based line of the `nth` occurrence of `needle` in `text`.
    fn line_of(text: &str, needle: &str, nth: usize) -> usize {
        let at = text.match_indices(needle).nth(nth).unwrap().0;
        text[..at].matches('\n').count() + 1
    }

    #[test]
    fn a_good_scenario_loads() {
        let l = load_text(GOOD).unwrap();
        assert_eq!(l.scenario.workload.flows.len(), 2);
        assert_eq!(l.name(), "test");
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let bad = GOOD.replace("k_pkts = 20", "k_pks = 20");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}:", line_of(&bad, "k_pks", 0))), "{e}");
        assert!(e.contains("k_pks"), "{e}");
        let bad = format!("{GOOD}\n[transport]\nmss_bytes = \"big\"\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}:", line_of(&bad, "mss_bytes", 0))), "{e}");
        // Inside a `kind`-tagged table the parser only knows the table: its header is named.
        let bad = GOOD.replace("link_gbps = 10", "link_gbps = \"fast\"");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}:", line_of(&bad, "[topology]", 0))) && e.contains("fast"), "{e}");
    }

    #[test]
    fn semantic_errors_are_located() {
        let bad = GOOD.replace("dst = 3\n\n[[", "dst = 0\n\n[[");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}: `workload.flows[0].dst`", line_of(&bad, "dst =", 0))), "{e}");
        let bad = GOOD.replace("src = 1\ndst = 3", "src = 1\ndst = 9");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}: `workload.flows[1].dst`", line_of(&bad, "dst =", 1))), "{e}");
        let bad = GOOD.replace("k_pkts = 20", "k_pkts = 20000");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("test.toml:{}: `switch.qdisc.k_pkts`", line_of(&bad, "k_pkts", 0))), "{e}");
        let bad = format!("{GOOD}\n[cc]\nalgorithm = \"dctcp\"\nparams = {{ g = 7 }}\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.contains("`cc.params`") && e.contains('g'), "{e}");
        let bad = format!("{GOOD}\n[cc]\nalgorithm = \"bogus\"\n");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.contains(&format!(":{}: `cc.algorithm`", line_of(&bad, "algorithm", 0))), "{e}");
    }

    const DUMBBELL: &str = r#"
duration_ms = 10

[topology]
kind = "dumbbell"
senders = 2
receivers = 1
host_gbps = 10
host_delay_us = 1
host_delays_us = [1.0, 500.0]
bottleneck_gbps = 1
bottleneck_delay_us = 5

[[workload.flows]]
src = 0
dst = 2
label = "dc"

[[workload.flows]]
src = 1
dst = 2
label = "wan"
cc = { algorithm = "dctcp", params = { g = 0.0625 } }
"#;

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

    #[test]
    fn switch_bfc_loads_and_its_errors_name_the_key() {
        let l = load_text(GOOD).unwrap();
        assert!(l.scenario.switch.bfc.is_none(), "BFC is off unless [switch.bfc] is present");
        let on = format!("{GOOD}\n[switch]\nqueues_per_port = 32\n\n[switch.bfc]\nth_multiplier = 1.5\nhrtt_ns = 2000\n");
        let b = load_text(&on).unwrap().scenario.switch.bfc.unwrap();
        assert!(b.enabled && b.th_multiplier == 1.5 && b.hrtt_ns == Some(2000));
        assert_eq!(b.sticky_ns, ccp_bfc_model::STICKY_NS);
        let p = crate::bfc::BfcParams::from_config(&b, 7);
        assert_eq!((p.th_multiplier_permille, p.hrtt_ns, p.seed), (1500, Some(2000), 7));

        // BFC needs several queues per port: the error names queues_per_port, on its line.
        let few = on.replace("queues_per_port = 32", "queues_per_port = 1");
        let e = load_text(&few).unwrap_err().to_string();
        assert!(e.contains(&format!(":{}: `switch.queues_per_port`", line_of(&few, "queues_per_port", 0))), "{e}");
        assert!(e.contains("2..=32"), "{e}");
        let many = on.replace("queues_per_port = 32", "queues_per_port = 64");
        assert!(load_text(&many).unwrap_err().to_string().contains("`switch.queues_per_port`"));
        let bad = on.replace("th_multiplier = 1.5", "th_multiplier = 0");
        let e = load_text(&bad).unwrap_err().to_string();
        assert!(e.contains(&format!(":{}: `switch.bfc.th_multiplier`", line_of(&bad, "th_multiplier", 0))), "{e}");
        let bad = on.replace("hrtt_ns = 2000", "hrtt_ns = 0");
        assert!(load_text(&bad).unwrap_err().to_string().contains("`switch.bfc.hrtt_ns`"));
        let bad = on.replace("hrtt_ns = 2000", "hrtt = 2000");
        assert!(load_text(&bad).unwrap_err().to_string().contains("hrtt"), "unknown keys are refused");
        // `enabled = false` keeps the table without checks, so `--set` can switch BFC off.
        let off = load_str(Path::new("t.toml"), &few, &["switch.bfc.enabled=false".into()]).unwrap();
        assert!(!off.scenario.switch.bfc.unwrap().enabled);
        // An override that makes the scenario invalid is named as the override.
        let e = load_str(Path::new("t.toml"), &on, &["switch.queues_per_port=1".into()]).unwrap_err().to_string();
        assert!(e.contains("switch.queues_per_port"), "{e}");
    }

    #[test]
    fn per_flow_errors_are_located() {
        let e = |text: &str| load_text(text).unwrap_err().to_string();
        // The algorithm and its parameters, validated by the registry on the flow's `cc` line.
        let bad = DUMBBELL.replace("algorithm = \"dctcp\"", "algorithm = \"bogus\"");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.flows[1].cc.algorithm`", line_of(&bad, "cc = ", 0))), "{m}");
        assert!(m.contains("bogus"), "{m}");
        let bad = DUMBBELL.replace("g = 0.0625", "g = 7");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.flows[1].cc.params`", line_of(&bad, "cc = ", 0))), "{m}");
        let bad = DUMBBELL.replace("params = {", "colour = 1, params = {");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}:", line_of(&bad, "colour", 0))) && m.contains("colour"), "{m}");
        // Random and incast flows can have their own algorithm too.
        let bad = format!(
            "{DUMBBELL}\n[workload.incast]\ndegree = 1\ntotal_bytes = 1000\ninterval_us = 100\ncc = {{ algorithm = \"nope\" }}\n"
        );
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.incast.cc.algorithm`", line_of(&bad, "cc = ", 1))), "{m}");
        let ok = bad.replace("\"nope\"", "\"dctcp\"");
        assert_eq!(load_text(&ok).unwrap().scenario.workload.incast.unwrap().cc.unwrap().algorithm, "dctcp");
        // Labels go into flows.csv unquoted.
        let bad = DUMBBELL.replace("label = \"wan\"", "label = \"w,an\"");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `workload.flows[1].label`", line_of(&bad, "label", 1))), "{m}");
        assert!(e(&DUMBBELL.replace("label = \"dc\"", "label = \"\"")).contains("`workload.flows[0].label`"));
        // One delay per sender, each sane.
        let bad = DUMBBELL.replace("[1.0, 500.0]", "[1.0]");
        let m = e(&bad);
        assert!(m.starts_with(&format!("test.toml:{}: `topology.host_delays_us`", line_of(&bad, "host_delays_us", 0))), "{m}");
        assert!(m.contains("one delay per sender (2), got 1"), "{m}");
        assert!(e(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, -5.0]")).contains("sender 1: must be ≥ 0 µs"));
        assert!(e(&DUMBBELL.replace("[1.0, 500.0]", "[1.0, 2e7]")).contains("above 10000000 µs"));
        // Only the dumbbell has per-sender delays.
        let m = e(&GOOD.replace("link_delay_us = 1", "link_delay_us = 1\nhost_delays_us = [1.0]"));
        assert!(m.contains("host_delays_us"), "{m}");
    }

    #[test]
    fn overrides_apply_and_are_named() {
        let l = load_str(Path::new("t.toml"), GOOD, &["switch.qdisc.k_pkts=5".into(), "cc.algorithm=\"dctcp\"".into()]).unwrap();
        assert!(matches!(l.scenario.switch.qdisc, QdiscConfig::Dctcp { k_pkts: Some(5), .. }));
        assert_eq!(l.scenario.cc.algorithm, "dctcp");
        let e = load_str(Path::new("t.toml"), GOOD, &["switch.qdisc.k_pkts=99999".into()]).unwrap_err().to_string();
        assert!(e.starts_with("--set switch.qdisc.k_pkts"), "{e}");
    }

    #[test]
    fn red_defaults_to_the_dcqcn_paper_and_validates_each_parameter() {
        let red = GOOD.replace("kind = \"dctcp\"\nk_pkts = 20", "kind = \"red\"");
        let l = load_text(&red).unwrap();
        assert!(matches!(
            l.scenario.switch.qdisc,
            QdiscConfig::Red { k_min_bytes: 5_000, k_max_bytes: 200_000, p_max } if p_max == 0.01
        ));
        let set = |o: &str| load_str(Path::new("t.toml"), &red, &[o.into()]).map_err(|e| e.to_string());
        let e = set("switch.qdisc={kind=\"red\",k_min_bytes=400000,k_max_bytes=100000,p_max=0.2}").unwrap_err();
        assert!(e.contains("switch.qdisc") && e.contains("K_max must exceed K_min"), "{e}");
        let e = set("switch.qdisc.k_min_bytes=0").unwrap_err();
        assert!(e.starts_with("--set switch.qdisc.k_min_bytes") && e.contains("K_min must be > 0"), "{e}");
        let e = set("switch.qdisc.p_max=1.5").unwrap_err();
        assert!(e.starts_with("--set switch.qdisc.p_max") && e.contains("(0, 1]"), "{e}");
        let e = load_text(&red.replace("kind = \"red\"", "kind = \"red\"\np_max = 0.0")).unwrap_err().to_string();
        assert!(e.contains("`switch.qdisc.p_max`") && e.contains("P_max must be in (0, 1], got 0"), "{e}");
        let e = set("switch.qdisc={kind=\"red\",k_min_bytes=50000000,k_max_bytes=60000000}").unwrap_err();
        assert!(e.contains("switch.qdisc") && e.contains("not below the buffer a port can use"), "{e}");
        let ok = set("switch.qdisc={kind=\"red\",k_min_bytes=100000,k_max_bytes=400000,p_max=0.2}").unwrap();
        assert!(matches!(ok.scenario.switch.qdisc, QdiscConfig::Red { k_min_bytes: 100_000, k_max_bytes: 400_000, .. }));
    }

    #[test]
    fn locate_finds_keys_tables_and_array_items() {
        let text = "a = 1\n[x]\nb = 2\n[[y.z]]\nc = 1\n[[y.z]]\nc = 2\n[p]\nq.r = 3\n";
        assert_eq!(locate(text, "a"), 1);
        assert_eq!(locate(text, "x.b"), 3);
        assert_eq!(locate(text, "y.z[1].c"), 7);
        assert_eq!(locate(text, "y.z[0].c"), 5);
        assert_eq!(locate(text, "p.q.r"), 9);
        assert_eq!(locate(text, "x.missing"), 2);
        // Keys inside an inline table: the line that assigns the table.
        let text = "[[f]]\na = 1\n[[f]]\ncc = { algorithm = \"x\", params = { g = 1 } }\n";
        assert_eq!(locate(text, "f[1].cc.algorithm"), 4);
        assert_eq!(locate(text, "f[1].cc.params.g"), 4);
        assert_eq!(locate(text, "f[0].cc.algorithm"), 1, "not in that entry: the fallback");
    }
}
