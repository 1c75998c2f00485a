//! Experiment files: the TOML format, defaults, and validation with errors that name the file,
//! the line and the key.
//!
//! An experiment is a matrix: every **link** × every **scenario** (the cross traffic sharing the
//! bottleneck) × every **scheme** (the congestion control under test, with its router queue
//! discipline and namespace sysctls) × `repetitions`. `configs/experiments/README.md` documents
//! every key with an example; the structs below are the reference (each field's doc comment says
//! what it means and its default).
//!
//! Errors: syntax and type errors come from the TOML parser (its byte span gives the line, and
//! the line gives the key); semantic errors (an unknown scheme kind, a negative rate, both a
//! rate and a share) are located on the key's own line by [`TomlIndex`].

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::scheme::Cc;

/// How long an agent gets to register its congestion control before the run fails.
const DEFAULT_AGENT_READY_S: f64 = 15.0;
/// Longest congestion control name Linux accepts (TCP_CA_NAME_MAX − 1).
pub const MAX_CC_NAME: usize = 15;

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
    pub router: RouterOptions,
    #[serde(default)]
    pub output: OutputOptions,
}

fn default_repetitions() -> u32 {
    1
}
fn default_sample_ms() -> u64 {
    100
}
fn default_flows() -> Vec<FlowGroup> {
    vec![FlowGroup { count: 1, start_s: 0.0, stop_s: None, stagger_s: 0.0 }]
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
}

/// A congestion control scheme under test and what it needs around it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeSpec {
    /// Unique; used in output paths.
    pub name: String,
    /// `kernel:<cc>` (a congestion control the kernel has, e.g. cubic, bbr, reno) or
    /// `agent:<algorithm>` (`ccp-agent run --datapath ebpf --algorithm <algorithm>`; the flows
    /// select the agent's congestion control, `[agent] cc_name`).
    pub cc: String,
    /// Agent algorithm parameters (`-p name=value` each).
    #[serde(default)]
    pub params: toml::Table,
    /// The router's queue discipline for this scheme (default drop-tail).
    #[serde(default)]
    pub qdisc: QdiscSpec,
    /// sysctls set in the sender's namespace for this scheme's runs (e.g. net.ipv4.tcp_ecn = 1).
    #[serde(default)]
    pub sender_sysctls: BTreeMap<String, toml::Value>,
    /// sysctls set in the receiver's namespace.
    #[serde(default)]
    pub receiver_sysctls: BTreeMap<String, toml::Value>,
    /// Congestion control of the receiving sockets of the scheme's flows (a DCTCP-style
    /// receiver that echoes CE per packet, e.g. a BPF struct_ops one). Default: the namespace's.
    #[serde(default)]
    pub receiver_cc: Option<String>,
    /// Give the receiving sockets ccp-lab's own CE-echo congestion control (a BPF struct_ops
    /// DCTCP-style receiver, loaded for the run under a unique name), so the sender's
    /// delivered_ce counts CE packets one for one. Needs net.ipv4.tcp_ecn = 1 at the sender.
    #[serde(default)]
    pub receiver_ce_echo: bool,
    /// How to read the agent's elasticity classification from its per-flow trace.
    #[serde(default)]
    pub classify: Option<ClassifySpec>,
    /// Extra `ccp-agent run` arguments.
    #[serde(default)]
    pub agent_args: Vec<String>,
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
        /// "ce" (proxied: brake = CE, for kernel TCP) or "ect0" (full mode).
        #[serde(default = "abc_brake")]
        brake: String,
        /// "queue" (x = backlog/μ) or "sojourn".
        #[serde(default = "abc_delay")]
        delay: String,
    },
    /// DCTCP step marking at K packets.
    Dctcp { k_pkts: u32 },
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
fn abc_brake() -> String {
    "ce".into()
}
fn abc_delay() -> String {
    "queue".into()
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
    /// UDP at a constant bit rate (inelastic).
    Cbr {
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

/// A loaded, validated experiment and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub experiment: Experiment,
    /// The file, as given.
    pub path: PathBuf,
    /// Base for relative paths inside the file (its directory).
    pub dir: PathBuf,
    pub name: String,
    /// The file's text (copied into the output directory for provenance).
    pub text: String,
}

/// Reads, parses and validates an experiment file.
pub fn load(path: &Path) -> Result<Loaded> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    parse(path, &text)
}

/// Parses and validates experiment text (`path` names it in errors and anchors relative paths).
pub fn parse(path: &Path, text: &str) -> Result<Loaded> {
    let index = TomlIndex::new(text);
    let experiment: Experiment = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        Error::Config { file: path.to_path_buf(), line, key: index.path_at(line), message: e.message().trim().to_string() }
    })?;
    let fail = |key: String, message: String| Error::Config { file: path.to_path_buf(), line: index.locate(&key), key, message };
    validate(&experiment).map_err(|(k, m)| fail(k, m))?;
    let name = match &experiment.name {
        Some(n) => n.clone(),
        None => path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "experiment".into()),
    };
    if !is_safe_name(&name) {
        return Err(fail("name".into(), format!("{name:?}: use letters, digits, '-', '_', '.' or '+' (it names directories)")));
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Loaded { experiment, path: path.to_path_buf(), dir, name, text: text.to_string() })
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Names that become path components: no separators, no dot-files, nothing a shell mangles.
pub fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
}

type Invalid = (String, String);

/// Fastest link accepted, Mbit/s (a generated trace holds one line per 1500 bytes).
const MAX_LINK_MBPS: f64 = 10_000.0;
/// Longest half period of a square wave, ms.
const MAX_HALF_PERIOD_MS: u64 = 600_000;

fn finite_positive(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a positive number, got {v}")))
    }
}

fn finite_non_negative(key: &str, v: f64) -> Result<(), Invalid> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("must be a number ≥ 0, got {v}")))
    }
}

/// A congestion control name as the kernel takes it.
pub fn check_cc_name(key: &str, name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > MAX_CC_NAME || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err((key.into(), format!("{name:?} is not a congestion control name (1..{MAX_CC_NAME} letters, digits, '_')")));
    }
    Ok(())
}

/// Longest run accepted, s (a week: beyond any trace here, and far from Duration overflow).
pub const MAX_DURATION_S: f64 = 7.0 * 86_400.0;

fn at_most(key: &str, v: f64, max: f64) -> Result<(), Invalid> {
    if v <= max {
        Ok(())
    } else {
        Err((key.into(), format!("must be at most {max}, got {v}")))
    }
}

fn validate(x: &Experiment) -> Result<(), Invalid> {
    finite_positive("duration_s", x.duration_s)?;
    at_most("duration_s", x.duration_s, MAX_DURATION_S)?;
    if let Some(q) = x.quick_duration_s {
        finite_positive("quick_duration_s", q)?;
        at_most("quick_duration_s", q, MAX_DURATION_S)?;
    }
    finite_non_negative("warmup_s", x.warmup_s)?;
    if x.warmup_s >= x.duration_s {
        return Err(("warmup_s".into(), format!("must be shorter than duration_s ({} s)", x.duration_s)));
    }
    if !(1..=1000).contains(&x.repetitions) {
        return Err(("repetitions".into(), format!("must be in 1..=1000, got {}", x.repetitions)));
    }
    if !(10..=10_000).contains(&x.sample_interval_ms) {
        return Err(("sample_interval_ms".into(), format!("must be in 10..=10000 ms, got {}", x.sample_interval_ms)));
    }
    validate_network(&x.network)?;
    if x.links.is_empty() {
        return Err(("links".into(), "at least one [[links]] entry is needed".into()));
    }
    for (i, l) in x.links.iter().enumerate() {
        validate_link(&format!("links[{i}]"), l)?;
    }
    if x.schemes.is_empty() {
        return Err(("schemes".into(), "at least one [[schemes]] entry is needed".into()));
    }
    let mut names = HashSet::new();
    for (i, s) in x.schemes.iter().enumerate() {
        let key = format!("schemes[{i}]");
        if !names.insert(s.name.as_str()) {
            return Err((format!("{key}.name"), format!("{:?} is used by another scheme", s.name)));
        }
        validate_scheme(&key, s)?;
    }
    validate_flows("flows", &x.flows)?;
    let mut names = HashSet::new();
    for (i, sc) in x.scenarios.iter().enumerate() {
        let key = format!("scenarios[{i}]");
        if !is_safe_name(&sc.name) {
            return Err((format!("{key}.name"), format!("{:?}: use letters, digits, '-', '_', '.' or '+'", sc.name)));
        }
        if !names.insert(sc.name.as_str()) {
            return Err((format!("{key}.name"), format!("{:?} is used by another scenario", sc.name)));
        }
        if let Some(f) = &sc.flows {
            validate_flows(&format!("{key}.flows"), f)?;
        }
        for (j, c) in sc.cross.iter().enumerate() {
            validate_cross(&format!("{key}.cross[{j}]"), c)?;
        }
    }
    if x.scenarios.is_empty() {
        return Err(("scenarios".into(), "give at least one scenario or leave the key out".into()));
    }
    let a = &x.agent;
    if let Some(n) = &a.cc_name {
        check_cc_name("agent.cc_name", n)?;
    }
    finite_positive("agent.ready_timeout_s", a.ready_timeout_s)?;
    at_most("agent.ready_timeout_s", a.ready_timeout_s, 3600.0)?;
    Ok(())
}

fn validate_network(n: &Network) -> Result<(), Invalid> {
    finite_non_negative("network.rtt_ms", n.rtt_ms)?;
    at_most("network.rtt_ms", n.rtt_ms, 10_000.0)?;
    match (n.buffer_pkts, n.buffer_bdp) {
        (Some(p), None) if p > 0 => {}
        (Some(_), None) => return Err(("network.buffer_pkts".into(), "must be > 0".into())),
        (None, Some(b)) => {
            finite_positive("network.buffer_bdp", b)?;
            at_most("network.buffer_bdp", b, 1000.0)?;
        }
        (Some(_), Some(_)) => return Err(("network.buffer_bdp".into(), "give buffer_pkts or buffer_bdp, not both".into())),
        (None, None) => return Err(("network".into(), "give the buffer: buffer_pkts or buffer_bdp".into())),
    }
    if let Some(r) = n.ack_rate_mbps {
        finite_positive("network.ack_rate_mbps", r)?;
    }
    Ok(())
}

fn validate_link(key: &str, l: &LinkSpec) -> Result<(), Invalid> {
    let name = match l {
        LinkSpec::Trace { name, .. } => name.as_ref(),
        LinkSpec::TraceDir { include, .. } => {
            if include.iter().any(|p| p.is_empty() || p.contains('/')) {
                return Err((format!("{key}.include"), "patterns match file names: non-empty, no '/'".into()));
            }
            None
        }
        LinkSpec::Fixed { rate_mbps, name } => {
            finite_positive(&format!("{key}.rate_mbps"), *rate_mbps)?;
            at_most(&format!("{key}.rate_mbps"), *rate_mbps, MAX_LINK_MBPS)?;
            name.as_ref()
        }
        LinkSpec::SquareWave { low_mbps, high_mbps, half_period_ms, name } => {
            for (field, v) in [("low_mbps", low_mbps), ("high_mbps", high_mbps)] {
                finite_positive(&format!("{key}.{field}"), *v)?;
                at_most(&format!("{key}.{field}"), *v, MAX_LINK_MBPS)?;
            }
            if !(1..=MAX_HALF_PERIOD_MS).contains(half_period_ms) {
                return Err((format!("{key}.half_period_ms"), format!("must be in 1..={MAX_HALF_PERIOD_MS} ms")));
            }
            name.as_ref()
        }
    };
    match name {
        Some(n) if !is_safe_name(n) => {
            Err((format!("{key}.name"), format!("{n:?}: use letters, digits, '-', '_', '.' or '+' (it names directories)")))
        }
        _ => Ok(()),
    }
}

fn validate_scheme(key: &str, s: &SchemeSpec) -> Result<(), Invalid> {
    if !is_safe_name(&s.name) {
        return Err((format!("{key}.name"), format!("{:?}: use letters, digits, '-', '_', '.' or '+'", s.name)));
    }
    let cc = Cc::parse(&s.cc).map_err(|m| (format!("{key}.cc"), m))?;
    let is_agent = matches!(cc, Cc::Agent(_));
    if !is_agent {
        for (field, set) in
            [("params", !s.params.is_empty()), ("classify", s.classify.is_some()), ("agent_args", !s.agent_args.is_empty())]
        {
            if set {
                return Err((format!("{key}.{field}"), "only agent schemes (cc = \"agent:…\") take this".into()));
            }
        }
    }
    for (k, v) in &s.params {
        if !matches!(v, toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_)) {
            return Err((format!("{key}.params.{k}"), "must be a string, number or boolean".into()));
        }
    }
    crate::scheme::router_qdisc(&s.qdisc).map_err(|(field, m)| (format!("{key}.qdisc.{field}"), m))?;
    for (field, map) in [("sender_sysctls", &s.sender_sysctls), ("receiver_sysctls", &s.receiver_sysctls)] {
        for (k, v) in map {
            crate::scheme::sysctl_value(k, v).map_err(|m| (format!("{key}.{field}"), m))?;
        }
    }
    if let Some(r) = &s.receiver_cc {
        check_cc_name(&format!("{key}.receiver_cc"), r)?;
        if s.receiver_ce_echo {
            return Err((format!("{key}.receiver_ce_echo"), "give receiver_cc or receiver_ce_echo, not both".into()));
        }
    }
    if let Some(c) = &s.classify {
        if c.elastic_if_equals.is_some() == c.elastic_if_above.is_some() {
            return Err((format!("{key}.classify"), "give exactly one of elastic_if_equals or elastic_if_above".into()));
        }
        if c.state.is_empty() {
            return Err((format!("{key}.classify.state"), "name the agent state variable".into()));
        }
    }
    Ok(())
}

fn validate_span(key: &str, start_s: f64, stop_s: Option<f64>) -> Result<(), Invalid> {
    finite_non_negative(&format!("{key}.start_s"), start_s)?;
    if let Some(stop) = stop_s {
        if !(stop.is_finite() && stop > start_s) {
            return Err((format!("{key}.stop_s"), format!("must be after start_s ({start_s} s), got {stop}")));
        }
    }
    Ok(())
}

fn validate_flows(key: &str, groups: &[FlowGroup]) -> Result<(), Invalid> {
    if groups.is_empty() {
        return Err((key.into(), "the scheme needs at least one flow".into()));
    }
    for (i, g) in groups.iter().enumerate() {
        let k = format!("{key}[{i}]");
        if !(1..=64).contains(&g.count) {
            return Err((format!("{k}.count"), format!("must be in 1..=64, got {}", g.count)));
        }
        validate_span(&k, g.start_s, g.stop_s)?;
        finite_non_negative(&format!("{k}.stagger_s"), g.stagger_s)?;
    }
    Ok(())
}

fn validate_rate(key: &str, rate_mbps: Option<f64>, share: Option<f64>) -> Result<(), Invalid> {
    match (rate_mbps, share) {
        (Some(r), None) => finite_positive(&format!("{key}.rate_mbps"), r),
        (None, Some(s)) if s.is_finite() && s > 0.0 && s <= 4.0 => Ok(()),
        (None, Some(s)) => {
            Err((format!("{key}.share"), format!("must be in (0, 4] (a fraction of the link's mean rate), got {s}")))
        }
        _ => Err((key.into(), "give exactly one of rate_mbps or share".into())),
    }
}

fn validate_packet(key: &str, bytes: u32) -> Result<(), Invalid> {
    if (64..=1500).contains(&bytes) {
        Ok(())
    } else {
        Err((format!("{key}.packet_bytes"), format!("must be in 64..=1500 (IP bytes; the path MTU is 1500), got {bytes}")))
    }
}

fn validate_cross(key: &str, c: &CrossSpec) -> Result<(), Invalid> {
    match c {
        CrossSpec::Cbr { rate_mbps, share, packet_bytes, start_s, stop_s }
        | CrossSpec::PoissonUdp { rate_mbps, share, packet_bytes, start_s, stop_s, .. } => {
            validate_rate(key, *rate_mbps, *share)?;
            validate_packet(key, *packet_bytes)?;
            validate_span(key, *start_s, *stop_s)
        }
        CrossSpec::PoissonTcp { rate_mbps, share, mean_size_bytes, size_dist, cc, max_concurrent, start_s, stop_s, .. } => {
            validate_rate(key, *rate_mbps, *share)?;
            if *mean_size_bytes == 0 {
                return Err((format!("{key}.mean_size_bytes"), "must be > 0".into()));
            }
            if !matches!(size_dist.as_str(), "exponential" | "fixed") {
                return Err((format!("{key}.size_dist"), format!("{size_dist:?}: use \"exponential\" or \"fixed\"")));
            }
            check_cc_name(&format!("{key}.cc"), cc)?;
            if *max_concurrent == 0 {
                return Err((format!("{key}.max_concurrent"), "must be > 0".into()));
            }
            validate_span(key, *start_s, *stop_s)
        }
        CrossSpec::Tcp { cc, count, start_s, stop_s, extra_rtt_ms } => {
            check_cc_name(&format!("{key}.cc"), cc)?;
            if !(1..=64).contains(count) {
                return Err((format!("{key}.count"), format!("must be in 1..=64, got {count}")));
            }
            if extra_rtt_ms.is_some() {
                return Err((
                    format!("{key}.extra_rtt_ms"),
                    "not supported: ccp-router applies one propagation delay per direction to every packet, so cross \
                     flows cannot have their own RTT (it would need per-flow delay in the router)"
                        .into(),
                ));
            }
            validate_span(key, *start_s, *stop_s)
        }
    }
}

/// One segment of a key path: `schemes[2]` is ("schemes", Some(2)).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seg {
    name: String,
    index: Option<usize>,
}

fn parse_path(key: &str) -> Vec<Seg> {
    key.split('.')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('[') {
            Some((name, rest)) => Seg { name: name.to_string(), index: rest.trim_end_matches(']').parse().ok() },
            None => Seg { name: p.to_string(), index: None },
        })
        .collect()
}

fn render_path(segs: &[Seg]) -> String {
    segs.iter()
        .map(|s| match s.index {
            Some(i) => format!("{}[{i}]", s.name),
            None => s.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Which key each line of a TOML text defines (following `[table]` and `[[array]]` headers and
/// dotted keys), to turn a parser's byte span into a key and a key into a line.
#[derive(Debug)]
pub struct TomlIndex {
    /// Per line (0-based): the full key path it defines or opens, if any.
    lines: Vec<Option<Vec<Seg>>>,
}

impl TomlIndex {
    pub fn new(text: &str) -> TomlIndex {
        let mut current: Vec<Seg> = Vec::new();
        // Occurrences of each array-of-tables path (with its parents' indices), to number them.
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut lines = Vec::new();
        for raw in text.lines() {
            let t = strip_comment(raw).trim();
            let entry = if let Some(h) = t.strip_prefix("[[").and_then(|h| h.split_once("]]")).map(|(h, _)| h) {
                let mut path = with_parent_indices(&current, h);
                // The array itself is numbered by its own count, not by the table in effect.
                if let Some(last) = path.last_mut() {
                    last.index = None;
                }
                let n = counts.entry(render_path(&path)).or_insert(0);
                if let Some(last) = path.last_mut() {
                    last.index = Some(*n);
                    *n += 1;
                }
                current = path.clone();
                Some(path)
            } else if let Some(h) = t.strip_prefix('[').and_then(|h| h.split_once(']')).map(|(h, _)| h) {
                current = with_parent_indices(&current, h);
                Some(current.clone())
            } else if let Some((k, _)) = t.split_once('=') {
                let mut path = current.clone();
                path.extend(parse_path(&k.replace(['"', '\''], "").replace(' ', "")));
                Some(path)
            } else {
                None
            };
            lines.push(entry);
        }
        TomlIndex { lines }
    }

    /// The key a 1-based line defines, or the table it belongs to.
    pub fn path_at(&self, line: usize) -> String {
        self.lines
            .iter()
            .take(line)
            .rev()
            .flatten()
            .next()
            .map(|p| render_path(p))
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "(top level)".into())
    }

    /// The 1-based line that best matches `key` (the longest matching prefix of its path; the
    /// line of an inline table's key when the key is inside it; line 1 when nothing matches).
    pub fn locate(&self, key: &str) -> usize {
        let want = parse_path(key);
        let mut best = (0usize, 1usize);
        for (i, p) in self.lines.iter().enumerate() {
            let Some(p) = p else { continue };
            let matched =
                p.iter().zip(&want).take_while(|(a, b)| a.name == b.name && (b.index.is_none() || a.index == b.index)).count();
            // A line deeper than the key (a field of the wanted table) must not beat the table.
            if matched > best.0 && matched == p.len().min(want.len()) {
                best = (matched, i + 1);
            }
        }
        best.1
    }
}

/// A header's segments, with the current indices of array-of-tables parents it nests in.
fn with_parent_indices(current: &[Seg], header: &str) -> Vec<Seg> {
    let mut path = parse_path(&header.replace(['"', '\''], "").replace(' ', ""));
    for (i, seg) in path.iter_mut().enumerate() {
        if let Some(c) = current.get(i) {
            if c.name == seg.name && seg.index.is_none() {
                seg.index = c.index;
            } else {
                break;
            }
        }
    }
    path
}

/// The part of a line before a `#` comment that is not inside a string.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
duration_s = 2
[network]
rtt_ms = 20
buffer_pkts = 100
[[links]]
kind = "fixed"
rate_mbps = 12
[[schemes]]
name = "cubic"
cc = "kernel:cubic"
"#;

    fn err(text: &str) -> (usize, String, String) {
        match parse(Path::new("x.toml"), text) {
            Err(Error::Config { line, key, message, .. }) => (line, key, message),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let l = parse(Path::new("dir/min.toml"), MINIMAL).unwrap();
        assert_eq!(l.name, "min");
        assert_eq!(l.dir, Path::new("dir"));
        let x = &l.experiment;
        assert_eq!((x.repetitions, x.sample_interval_ms), (1, 100));
        assert_eq!(x.scenarios.len(), 1);
        assert_eq!(x.scenarios[0].name, "solo");
        assert_eq!(x.flows[0].count, 1);
        assert!(matches!(x.schemes[0].qdisc, QdiscSpec::Droptail));
        assert_eq!(x.agent.cc_name, None);
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let text = MINIMAL.replace("cc = \"kernel:cubic\"", "cc = \"kernel:cubic\"\ncolour = 3");
        let (line, key, message) = err(&text);
        assert_eq!(line, 12);
        assert_eq!(key, "schemes[0].colour");
        assert!(message.contains("colour"), "{message}");
    }

    #[test]
    fn type_error_names_line_and_key() {
        let (line, key, message) = err(&MINIMAL.replace("rtt_ms = 20", "rtt_ms = \"twenty\""));
        assert_eq!((line, key.as_str()), (4, "network.rtt_ms"));
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn semantic_errors_are_located() {
        let (line, key, _) = err(&MINIMAL.replace("rate_mbps = 12", "rate_mbps = -1"));
        assert_eq!((line, key.as_str()), (8, "links[0].rate_mbps"));
        let (line, key, m) = err(&MINIMAL.replace("kernel:cubic", "kernel:cu bic"));
        assert_eq!((line, key.as_str()), (11, "schemes[0].cc"));
        assert!(m.contains("congestion control"), "{m}");
        let (_, key, m) = err(&MINIMAL.replace("kernel:cubic", "magic:cubic"));
        assert_eq!(key, "schemes[0].cc");
        assert!(m.contains("kernel:") && m.contains("agent:"), "{m}");
    }

    #[test]
    fn inline_table_errors_point_at_their_key() {
        let text = format!("{MINIMAL}qdisc = {{ kind = \"codel\", interval_ms = 0 }}\n");
        let (line, key, m) = err(&text);
        assert_eq!(line, 12);
        assert_eq!(key, "schemes[0].qdisc.interval_ms");
        assert!(m.contains("> 0"), "{m}");
    }

    #[test]
    fn nested_arrays_are_numbered() {
        let text = format!(
            "{MINIMAL}[[scenarios]]\nname = \"a\"\n[[scenarios]]\nname = \"b\"\n[[scenarios.cross]]\nkind = \"cbr\"\nrate_mbps = 1\nshare = 0.5\n"
        );
        let (line, key, m) = err(&text);
        assert_eq!(key, "scenarios[1].cross[0]");
        assert_eq!(line, 16);
        assert!(m.contains("exactly one"), "{m}");
    }

    #[test]
    fn per_flow_rtt_is_refused_with_a_reason() {
        let text = format!("{MINIMAL}[[scenarios]]\nname = \"x\"\n[[scenarios.cross]]\nkind = \"tcp\"\nextra_rtt_ms = 40\n");
        let (line, key, m) = err(&text);
        assert_eq!((line, key.as_str()), (16, "scenarios[0].cross[0].extra_rtt_ms"));
        assert!(m.contains("per-flow delay"), "{m}");
    }

    #[test]
    fn kernel_schemes_refuse_agent_keys() {
        let text = format!("{MINIMAL}params = {{ g = 1 }}\n");
        let (_, key, m) = err(&text);
        assert_eq!(key, "schemes[0].params");
        assert!(m.contains("agent"), "{m}");
    }

    #[test]
    fn receiver_cc_and_ce_echo_exclude_each_other() {
        let text = format!("{MINIMAL}receiver_cc = \"reno\"\nreceiver_ce_echo = true\n");
        let (_, key, m) = err(&text);
        assert_eq!(key, "schemes[0].receiver_ce_echo");
        assert!(m.contains("not both"), "{m}");
        let ok = parse(Path::new("x.toml"), &format!("{MINIMAL}receiver_ce_echo = true\n")).unwrap();
        assert!(ok.experiment.schemes[0].receiver_ce_echo);
        let (_, key, _) = err(&format!("{MINIMAL}[agent]\ncc_name = \"much-too-long-a-name\"\n"));
        assert_eq!(key, "agent.cc_name");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let (line, _, _) = err("duration_s = 2\n[network\n");
        assert_eq!(line, 2);
    }

    #[test]
    fn comments_and_quotes_do_not_confuse_the_index() {
        let idx = TomlIndex::new("a = \"# not a comment\" # yes\n[t] # c\n\"b\" = 1\n");
        assert_eq!(idx.path_at(1), "a");
        assert_eq!(idx.path_at(3), "t.b");
        assert_eq!(idx.locate("t.b"), 3);
        assert_eq!(idx.locate("nothing.here"), 1);
    }
}
