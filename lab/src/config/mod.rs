//! Experiment files: the TOML format and its defaults (here), [`validate`] for the rules,
//! [`load`](mod@load) for reading a file with errors that name the file, the line and the key,
//! and [`toml_index`] for finding a key's line.
//!
//! An experiment is a matrix: every **link** × every **scenario** (the cross traffic sharing the
//! bottleneck) × every **scheme** (the congestion control under test, with its router queue
//! discipline and namespace sysctls) × `repetitions`. `configs/experiments/README.md` documents
//! every key with an example; the structs below are the reference (each field's doc comment says
//! what it means and its default).

pub mod load;
pub mod toml_index;
pub mod validate;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

pub use load::{load, parse, Loaded};
pub use toml_index::TomlIndex;
pub use validate::{check_cc_name, is_safe_name, MAX_CC_NAME, MAX_DURATION_S};

/// How long an agent gets to register its congestion control before the run fails.
const DEFAULT_AGENT_READY_S: f64 = 15.0;

/// A whole experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Used in output paths and titles (default: the file stem).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Length of each run, s (traffic time; setup and teardown come on top).
    pub duration_s: f64,
    /// Length of each run with `--quick` (default: min(duration_s, 30)).
    #[serde(default)]
    pub quick_duration_s: Option<f64>,
    /// Metrics ignore the first `warmup_s` of traffic (slow start, connection setup).
    #[serde(default)]
    pub warmup_s: f64,
    #[serde(default = "default_repetitions")]
    pub repetitions: u32,
    /// Time-series resolution: TCP_INFO samples, throughput and delay bins, ms.
    #[serde(default = "default_sample_ms")]
    pub sample_interval_ms: u64,
    pub network: Network,
    pub links: Vec<LinkSpec>,
    pub schemes: Vec<SchemeSpec>,
    /// The flows of the scheme under test (default: one backlogged flow for the whole run).
    #[serde(default = "default_flows")]
    pub flows: Vec<FlowGroup>,
    /// Cross-traffic setups (default: one, "solo", without cross traffic).
    #[serde(default = "default_scenarios")]
    pub scenarios: Vec<Scenario>,
    #[serde(default)]
    pub agent: AgentOptions,
    #[serde(default)]
    pub portus: PortusOptions,
    #[serde(default)]
    pub router: RouterOptions,
    #[serde(default)]
    pub output: OutputOptions,
    /// Pairs of schemes judged side by side after the runs ([`crate::parity`]).
    #[serde(default)]
    pub parity: Vec<crate::parity::ParitySpec>,
}

fn default_repetitions() -> u32 {
    1
}
fn default_sample_ms() -> u64 {
    100
}
fn default_flows() -> Vec<FlowGroup> {
    vec![FlowGroup { count: 1, start_s: 0.0, stop_s: None, stagger_s: 0.0, bytes: None }]
}
fn default_scenarios() -> Vec<Scenario> {
    vec![Scenario { name: "solo".into(), flows: None, cross: Vec::new() }]
}

/// The emulated path around the link.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Propagation round-trip time, ms (half each way). Keep ≥ 10 ms on this kind of machine.
    pub rtt_ms: f64,
    /// Bottleneck buffer in packets…
    #[serde(default)]
    pub buffer_pkts: Option<u32>,
    /// …or in bandwidth-delay products of the link's mean rate (1500-byte packets, rounded up).
    #[serde(default)]
    pub buffer_bdp: Option<f64>,
    /// Rate of the ACK direction, Mbit/s (default unlimited; the ABC artifact used 12).
    #[serde(default)]
    pub ack_rate_mbps: Option<f64>,
    /// Per-flow-class one-way delays through the same bottleneck, in `ccp-router --class-delay`
    /// syntax (`"dport=5203-5210:down=1,up=1"`); flows without a class get `rtt_ms`. Flow number
    /// i of a run (the scheme's flows first, then cross flows in order) uses receiver port
    /// 5201 + i.
    #[serde(default)]
    pub class_delays: Vec<String>,
}

/// A bottleneck link, or a set of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LinkSpec {
    /// One mahimahi trace file (path relative to the experiment file).
    Trace {
        path: PathBuf,
        #[serde(default)]
        name: Option<String>,
    },
    /// Every trace in a directory (files ending in `.md` are skipped), each a link named after
    /// its file; `include` keeps only names matching one of its `*` patterns.
    TraceDir {
        path: PathBuf,
        #[serde(default)]
        include: Vec<String>,
    },
    /// A constant-rate link.
    Fixed {
        rate_mbps: f64,
        /// This link's propagation RTT instead of `network.rtt_ms` (a matrix of link/RTT
        /// settings in one experiment; not with `network.class_delays`).
        #[serde(default)]
        rtt_ms: Option<f64>,
        /// This link's buffer in BDPs (its rate × its RTT) instead of the network's buffer
        /// (buffer sizes as a matrix dimension, e.g. 0.5 and 2 BDP of the same rate and RTT).
        #[serde(default)]
        buffer_bdp: Option<f64>,
        /// Independent random loss on the data direction, percent of the packets arriving at
        /// the bottleneck (ccp-router's `--loss-pct`), dropped before the queue.
        #[serde(default)]
        loss_pct: Option<f64>,
        /// The seed of the loss's random stream (default 1): the same seed drops the same
        /// arrivals.
        #[serde(default)]
        loss_seed: Option<u64>,
        #[serde(default)]
        name: Option<String>,
    },
    /// A synthetic trace alternating between two rates, starting at `high_mbps`; written as a
    /// mahimahi file into the output directory (ABC Fig. B-5: 12 ↔ 24 Mbit/s every 500 ms).
    SquareWave {
        low_mbps: f64,
        high_mbps: f64,
        half_period_ms: u64,
        #[serde(default)]
        name: Option<String>,
    },
    /// A synthetic bursty link: delivery opportunities at `rate_mbps` for on-periods, none for
    /// off-periods (a cellular link's scheduling bursts, issue 18 item 1). Periods last `on_ms`
    /// and `off_ms`, or with `seed` are drawn exponentially with those means (a `length_s` trace
    /// that mahimahi-style replay repeats).
    OnOff {
        rate_mbps: f64,
        on_ms: u64,
        off_ms: u64,
        #[serde(default)]
        seed: Option<u64>,
        #[serde(default = "default_on_off_length_s")]
        length_s: u64,
        #[serde(default)]
        name: Option<String>,
    },
    /// A synthetic link whose delay comes from gaps, not queues (issue 32): idle periods with no
    /// opportunity at all (`idle_pct` of the time, heavy-tailed lengths of mean `idle_ms`: most of
    /// tens of ms, a few of seconds) between active periods in which a millisecond holds a dense
    /// burst (`burst_pkts` opportunities on average, at most `max_burst_pkts`, default 4×) or
    /// nothing. The mean rate is `rate_mbps`. Seeded; `ccp-lab burstiness` prints the result's
    /// signature. See [`crate::link::BurstGap`].
    BurstGap {
        rate_mbps: f64,
        burst_pkts: f64,
        #[serde(default)]
        max_burst_pkts: Option<u64>,
        idle_pct: f64,
        idle_ms: f64,
        seed: u64,
        #[serde(default = "default_on_off_length_s")]
        length_s: u64,
        #[serde(default)]
        name: Option<String>,
    },
}

fn default_on_off_length_s() -> u64 {
    60
}

/// A congestion control scheme under test and what it needs around it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeSpec {
    /// Unique; used in output paths.
    pub name: String,
    /// `kernel:<cc>` (a congestion control the kernel has, e.g. cubic, bbr, reno),
    /// `agent:<algorithm>` (`ccp-agent run --datapath ebpf --algorithm <algorithm>`; the flows
    /// select the agent's congestion control, `[agent] cc_name`) or `portus:<binary>` (an
    /// unmodified portus agent from `[portus] bin_dir` through `ccp-libccp-shim`, which
    /// registers the congestion control the flows select).
    pub cc: String,
    /// Agent algorithm parameters (`-p name=value` each). The string `"{link_mbps}"` as a value
    /// is replaced by the link's mean rate in Mbit/s (an oracle parameter across a link matrix,
    /// e.g. Nimbus's `mu_mbit_per_s`).
    #[serde(default)]
    pub params: toml::Table,
    /// The router's queue discipline for this scheme (default drop-tail).
    #[serde(default)]
    pub qdisc: QdiscSpec,
    /// HULL's host pacer on the sender's side of the link (ccp-router `--pacer`), for the TCP
    /// flows whose ACKs echo ECN; absent: none.
    #[serde(default)]
    pub pacer: Option<PacerSpec>,
    /// sysctls set in the sender's namespace for this scheme's runs (e.g. net.ipv4.tcp_ecn = 1).
    #[serde(default)]
    pub sender_sysctls: BTreeMap<String, toml::Value>,
    /// sysctls set in the receiver's namespace.
    #[serde(default)]
    pub receiver_sysctls: BTreeMap<String, toml::Value>,
    /// Parameters of the kernel's congestion control modules for this scheme's runs
    /// (`tcp_<module>.<parameter>`, e.g. `{ "tcp_cubic.hystart_detect" = 2 }`: the kernel's Cubic
    /// with HyStart's delay test alone). Global, not per namespace: set when a run starts and
    /// restored when it ends ([`crate::module_params`]).
    #[serde(default)]
    pub module_params: BTreeMap<String, toml::Value>,
    /// Microsecond TCP timestamps: both namespaces' routes get the `tcp_usec_ts` feature
    /// (Linux ≥ 6.7), so TSvals tick in µs instead of ms (ccp-router `--tcp-usec-ts`).
    #[serde(default)]
    pub tcp_usec_ts: bool,
    /// Congestion control of the receiving sockets of the scheme's flows (a DCTCP-style
    /// receiver that echoes CE per packet, e.g. a BPF struct_ops one). Default: the namespace's.
    #[serde(default)]
    pub receiver_cc: Option<String>,
    /// Give the receiving sockets ccp-lab's own CE-echo congestion control (a BPF struct_ops
    /// DCTCP-style receiver, loaded for the run under a unique name), so the sender's
    /// delivered_ce counts CE packets one for one. Needs net.ipv4.tcp_ecn = 1 at the sender.
    #[serde(default)]
    pub receiver_ce_echo: bool,
    /// A receiver-side program enabled on the receiver's device for the scheme's runs (the Inigo
    /// receiver: `ccp-agent receiver enable` before the flows, `disable` after). Default: none.
    #[serde(default)]
    pub receiver: Option<ReceiverSpec>,
    /// How to read the agent's elasticity classification from its per-flow trace.
    #[serde(default)]
    pub classify: Option<ClassifySpec>,
    /// A kernel congestion control for the flows of some flow groups instead of the scheme's,
    /// keyed by the group's index in `flows` (from 0): `{ "0" = "bbr" }` makes a mixed reference
    /// scheme (kernel BBR for group 0, the scheme's congestion control for the others).
    #[serde(default)]
    pub flow_cc: BTreeMap<String, String>,
    /// Extra `ccp-agent run` arguments. `{sender_ns}`, `{receiver_ns}`, `{sender_addr}`,
    /// `{receiver_addr}` and `{router_addr}` are replaced by the run's namespaces and addresses
    /// (e.g. the CNM listener: `--cnm-listen {sender_addr}:7470 --cnm-allow-from {router_addr}
    /// --cnm-netns {sender_ns}`); when any is used, the agent starts after the namespaces exist.
    #[serde(default)]
    pub agent_args: Vec<String>,
    /// Arguments of a `portus:<binary>` scheme's binary (e.g. `["--use_switching",
    /// "--bw_est_mode"]`); `{link_bytes_per_s}` is replaced by the link's mean rate. The lab
    /// owns the IPC (`--ipc unix` into a run-private directory), so `--ipc` is refused.
    #[serde(default)]
    pub portus_args: Vec<String>,
}

/// HULL's pacer (specs/dc.md §3.4); every field defaults to the testbed's (Table 4.3), and the
/// line rate, the token rate's ceiling, is the link's (mean) rate.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacerSpec {
    /// β, 1/s (16).
    pub beta_per_s: Option<f64>,
    /// p_a (0.125).
    pub associate_probability: Option<f64>,
    /// Bytes (3000).
    pub depth_bytes: Option<u32>,
    /// µs (16).
    pub tick_us: Option<f64>,
    /// A pacer per flow, as if each flow ran on a host of its own (the testbed's static flows
    /// from distinct servers); default one for the sender.
    #[serde(default)]
    pub per_flow: bool,
}

impl PacerSpec {
    pub fn settings(&self) -> ccp_qdisc::pacer::PacerSettings {
        let d = ccp_qdisc::pacer::PacerSettings::default();
        ccp_qdisc::pacer::PacerSettings {
            beta_per_s: self.beta_per_s.unwrap_or(d.beta_per_s),
            associate_probability: self.associate_probability.unwrap_or(d.associate_probability),
            depth_bytes: self.depth_bytes.unwrap_or(d.depth_bytes),
            tick_us: self.tick_us.unwrap_or(d.tick_us),
            ..d
        }
    }
}

/// A router queue discipline with its parameters (see datapath-shims/router-programs/router/README.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QdiscSpec {
    #[default]
    Droptail,
    /// CoDel, RFC 8289. The ABC artifact's baseline used target 50 ms, interval 100 ms.
    Codel {
        #[serde(default = "codel_target")]
        target_ms: f64,
        #[serde(default = "codel_interval")]
        interval_ms: f64,
        /// Mark ECT packets instead of dropping them.
        #[serde(default)]
        ecn: bool,
    },
    /// The ABC router (specs/abc.md §6); defaults are the cellular emulation's.
    Abc {
        #[serde(default = "abc_eta")]
        eta: f64,
        #[serde(default = "abc_delta")]
        delta_ms: f64,
        #[serde(default = "abc_dt")]
        dt_ms: f64,
        #[serde(default = "abc_window")]
        window_ms: f64,
        #[serde(default = "abc_token_limit")]
        token_limit: f64,
        /// "queue" (x = backlog/μ), "queue_mean" (x = backlog over the mean capacity of the last
        /// `delay_window_ms`: a variant for burst-gap links, not the paper's) or "sojourn".
        #[serde(default = "abc_delay")]
        delay: String,
        /// With delay = "queue_mean" (required there, refused otherwise), ms.
        #[serde(default)]
        delay_window_ms: Option<f64>,
        /// How the capacity term becomes accelerate credit: "window" (Eq. 2.2, the default) or
        /// "per_opportunity" (the authors' artifact: η/2 banked per opportunity the queue leaves
        /// unused; trace-driven links).
        #[serde(default = "abc_credit")]
        credit: String,
        /// The trace window μ(t) is counted over: "past" (ABC) or "future" (PK-ABC, the
        /// oracle: the window ending `lookahead_ms` ahead, one RTT).
        #[serde(default = "abc_capacity")]
        capacity: String,
        /// With capacity = "future" (required there, refused otherwise), ms.
        #[serde(default)]
        lookahead_ms: Option<f64>,
        /// Serve non-ABC packets from a second queue (specs/abc.md §7): "scheme" (the scheme's
        /// own flows are ABC's, by destination port; cross traffic is not, ECN or not), "ecn"
        /// (Not-ECT packets are non-ABC) or "ports:FIRST-LAST". Default: one queue.
        #[serde(default)]
        coexist: Option<String>,
    },
    /// DCTCP step marking at K packets.
    Dctcp { k_pkts: u32 },
    /// HULL's phantom queue (ccp-router `--qdisc phantom`): a virtual queue drained at `gamma`
    /// × the link rate marks CE above `threshold_bytes`. Fixed-rate links only.
    Phantom {
        #[serde(default = "phantom_gamma")]
        gamma: f64,
        #[serde(default = "phantom_threshold")]
        threshold_bytes: f64,
    },
    /// A QCN congestion point (ccp-router `--qdisc qcn`): samples arrivals, computes
    /// F_b = (Q − Q_eq) + w·(Q − Q_old) and sends a CNM (UDP, port 7470) to the sampled packet's
    /// source when F_b > 0; `ecn_k_pkts` adds DCTCP step marking on the same queue (Annulus).
    Qcn {
        /// Q_eq, packets of 1500 bytes (router default 22).
        #[serde(default = "qcn_qeq")]
        qeq_pkts: f64,
        /// Weight of the queue derivative (QCN 2; the Annulus testbed 8).
        #[serde(default = "qcn_w")]
        w: f64,
        /// `--qcn-sample` syntax: "prob:P", "bytes:N" (Annulus testbed: bytes:15000) or "table".
        #[serde(default = "qcn_sample")]
        sample: String,
        /// "packets" (qFb = ⌈F_b / 1500 B⌉, capped at 63) or "standard" (802.1Qau:
        /// ⌈63·F_b / (Q_eq·(1 + 2w))⌉).
        #[serde(default = "qcn_quant")]
        quantization: String,
        /// ECN step marking at K packets on the same queue (none by default).
        #[serde(default)]
        ecn_k_pkts: Option<u32>,
        #[serde(default = "seed")]
        seed: u64,
    },
}

fn phantom_gamma() -> f64 {
    0.95
}
fn phantom_threshold() -> f64 {
    1000.0
}
fn qcn_qeq() -> f64 {
    22.0
}
fn qcn_w() -> f64 {
    2.0
}
fn qcn_sample() -> String {
    "prob:0.01".into()
}
fn qcn_quant() -> String {
    "packets".into()
}

fn codel_target() -> f64 {
    5.0
}
fn codel_interval() -> f64 {
    100.0
}
fn abc_eta() -> f64 {
    0.98
}
fn abc_delta() -> f64 {
    133.0
}
fn abc_dt() -> f64 {
    50.0
}
fn abc_window() -> f64 {
    20.0
}
fn abc_token_limit() -> f64 {
    5.0
}
fn abc_credit() -> String {
    "window".into()
}

fn abc_capacity() -> String {
    "past".into()
}
fn abc_delay() -> String {
    "queue".into()
}

/// A receiver-side program around a scheme's flows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReceiverSpec {
    /// The Inigo receiver (relative forward delay; specs/inigo.md §4), run as
    /// `ccp-agent receiver enable --netns <receiver namespace> --dev ccp0 [options]` on the
    /// receiver's TUN device. Options left out take the agent's defaults.
    Inigo {
        /// "mark" (set CE on late segments; needs an ECN-negotiated connection) or "window"
        /// (cap the advertised receive window).
        #[serde(default)]
        mode: Option<String>,
        /// Late when the forward delay exceeds RTT_min by this percentage (thesis: 17).
        #[serde(default)]
        threshold_pct: Option<u32>,
        /// "arrival" (local arrival times; the recommended true RFD) or "tsecr" (the published
        /// receiver's TSecr deltas; spec A-2).
        #[serde(default)]
        rfd_source: Option<String>,
        /// Window mode's update interval as a fraction of the window: rcv_cwnd / fairness (10).
        #[serde(default)]
        fairness: Option<u32>,
        /// Mark mode: clear CE on segments that are not late (the published receiver does).
        #[serde(default)]
        clear_ce: bool,
        /// Further `receiver enable` arguments, passed as they are.
        #[serde(default)]
        args: Vec<String>,
    },
}

/// Reading "the cross traffic is elastic" out of one agent state variable.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifySpec {
    /// The state variable's name in the agent trace (Nimbus: `mode`, 0 = competitive).
    pub state: String,
    /// Elastic when the value equals this (±0.5)…
    #[serde(default)]
    pub elastic_if_equals: Option<f64>,
    /// …or when it is above this (e.g. `eta` above 2).
    #[serde(default)]
    pub elastic_if_above: Option<f64>,
}

/// Backlogged flows of the scheme under test.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowGroup {
    #[serde(default = "one")]
    pub count: u32,
    /// Start of the first flow, s after traffic starts.
    #[serde(default)]
    pub start_s: f64,
    /// Stop, s (default: end of the run).
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// Flow i starts at start_s + i·stagger_s.
    #[serde(default)]
    pub stagger_s: f64,
    /// Each flow sends this many bytes (TCP payload) and ends; its completion time (connect to
    /// the receiver's close, as for Poisson TCP flows) is recorded. Default: backlogged.
    #[serde(default)]
    pub bytes: Option<u64>,
}

fn one() -> u32 {
    1
}

/// One cross-traffic setup.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Overrides the top-level `flows` for this scenario.
    #[serde(default)]
    pub flows: Option<Vec<FlowGroup>>,
    #[serde(default)]
    pub cross: Vec<CrossSpec>,
}

/// Cross traffic sharing the bottleneck with the scheme's flows. Rates are IP-level (what the
/// link carries): give `rate_mbps`, or `share` as a fraction of the link's mean rate.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CrossSpec {
    /// UDP at a constant bit rate (inelastic). With `on_ms` and `off_ms` it sends at that rate
    /// for `on_ms`, pauses for `off_ms`, and repeats (on/off inelastic traffic; the mean is
    /// rate·on/(on + off)).
    Cbr {
        #[serde(default)]
        rate_mbps: Option<f64>,
        #[serde(default)]
        share: Option<f64>,
        #[serde(default = "mtu")]
        packet_bytes: u32,
        #[serde(default)]
        on_ms: Option<u64>,
        #[serde(default)]
        off_ms: Option<u64>,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// UDP packets with Poisson arrivals at a mean rate (inelastic).
    PoissonUdp {
        #[serde(default)]
        rate_mbps: Option<f64>,
        #[serde(default)]
        share: Option<f64>,
        #[serde(default = "mtu")]
        packet_bytes: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
        #[serde(default = "seed")]
        seed: u64,
    },
    /// TCP flows of random size arriving as a Poisson process at a mean offered load (Nimbus's
    /// "x Mbit/s Poisson"); elastic while a flow larger than the initial window runs.
    PoissonTcp {
        #[serde(default)]
        rate_mbps: Option<f64>,
        #[serde(default)]
        share: Option<f64>,
        #[serde(default = "mean_size")]
        mean_size_bytes: u64,
        /// "exponential" or "fixed".
        #[serde(default = "size_dist")]
        size_dist: String,
        #[serde(default = "cubic")]
        cc: String,
        /// Arrivals beyond this many flows in progress are skipped (and counted).
        #[serde(default = "max_concurrent")]
        max_concurrent: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
        #[serde(default = "seed")]
        seed: u64,
    },
    /// Long-lived backlogged kernel TCP flows (elastic).
    Tcp {
        #[serde(default = "cubic")]
        cc: String,
        #[serde(default = "one")]
        count: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
        /// Refused with an explanation: ccp-router has one propagation delay per direction, not
        /// per flow.
        #[serde(default)]
        extra_rtt_ms: Option<f64>,
    },
}

fn mtu() -> u32 {
    1500
}
fn seed() -> u64 {
    1
}
fn mean_size() -> u64 {
    100_000
}
fn size_dist() -> String {
    "exponential".into()
}
fn cubic() -> String {
    "cubic".into()
}
fn max_concurrent() -> u32 {
    256
}

/// How agent schemes start the agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentOptions {
    /// `ccp-agent` binary (default: next to `ccp-lab`, i.e. target/<profile>/ccp-agent).
    pub binary: Option<PathBuf>,
    /// The congestion control the agent's eBPF datapath registers and flows select. Default:
    /// a name unique to the run (`ccpl<pid>x<n>`), because struct_ops names are global and
    /// several runners (and agents) may be up at once.
    pub cc_name: Option<String>,
    /// Seconds to wait for `cc_name` to appear in tcp_available_congestion_control.
    pub ready_timeout_s: f64,
    /// Ask the agent for its per-flow trace (`--trace-flows FILE`) when it supports it.
    pub trace_flows: bool,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions { binary: None, cc_name: None, ready_timeout_s: DEFAULT_AGENT_READY_S, trace_flows: true }
    }
}

/// How `portus:<binary>` schemes find their programs ([`crate::portus`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PortusOptions {
    /// Directory of the portus binaries (relative to the experiment file). Default:
    /// `CCP_ANCHORS_BIN_DIR`, else `$CCP_ANCHORS_CACHE/bin`, else ~/.cache/ccp-agent/anchors/bin,
    /// where scripts/anchors.sh builds them.
    pub bin_dir: Option<PathBuf>,
    /// `ccp-libccp-shim` (default: beside `ccp-lab`).
    pub shim: Option<PathBuf>,
    /// Seconds to wait for the portus agent's socket and the shim's congestion control.
    pub ready_timeout_s: f64,
}

impl Default for PortusOptions {
    fn default() -> Self {
        PortusOptions { bin_dir: None, shim: None, ready_timeout_s: DEFAULT_AGENT_READY_S }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterOptions {
    /// Run the emulator's event loop under SCHED_FIFO (better timing on a loaded machine).
    pub realtime: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputOptions {
    /// Keep each run's per-packet router log (router.csv; ~80 bytes per packet).
    pub keep_packet_logs: bool,
    /// Draw PNG plots.
    pub plots: bool,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions { keep_packet_logs: false, plots: true }
    }
}
