//! The agent's TOML configuration: loading, validation, and resolution into a runnable setup.
//!
//! Syntax and type errors come from the TOML parser with line and column. Semantic errors
//! (unknown algorithm, bad parameter, empty match) name the section and the line too, so
//! `ccp-agent check-config` can point at the bad line.
//!
//! A Python algorithm (`py:path/to/file.py:Class`) named with a relative path is relative to the
//! configuration file's folder, not to wherever the agent was started from: every `py:` name
//! (default, rules, fallback, `[algorithms."py:…"]`) is made absolute when the file is loaded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ccp_algorithms::registry;
use ccp_contract::{Choice, Limits, ReportPolicy, MAX_REPORT_INTERVAL_US, MIN_REPORT_INTERVAL_US};
use serde::Deserialize;
use toml::Spanned;

use crate::cnm::{self, CnmConfig};
use crate::datapath::{DatapathConfig, Kind};
use crate::flows::admission::FlowLimits;
use crate::rules::{Matcher, Policy, Rule};

/// Where the default configuration lives when `--config` is not given and it exists.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/ccp-agent/agent.toml";
/// `safety.min_pacing_rate_bytes_per_s` bounds: at least one full-size packet per second, at
/// most 10 Gbit/s.
pub const MIN_PACING_RATE_FLOOR: u64 = 1_500;
pub const MAX_PACING_RATE_FLOOR: u64 = 1_250_000_000;

/// The control socket (`ccp-agent ctl`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ControlSection {
    pub enabled: bool,
    pub socket: PathBuf,
    /// A group whose members may control the agent (socket mode 0660); without it only root
    /// and the agent's own user can.
    pub group: Option<String>,
}

impl Default for ControlSection {
    fn default() -> Self {
        ControlSection { enabled: true, socket: default_control_socket(), group: None }
    }
}

/// The system agent's control socket (root's, and the systemd unit's).
pub const SYSTEM_CONTROL_SOCKET: &str = "/run/ccp-agent/control.sock";

/// The control socket an agent serves unless told otherwise: the system one when it runs as
/// root; otherwise one in the user's own runtime directory, since an unprivileged agent (serving
/// user-space libccp datapaths needs no root) cannot create /run/ccp-agent.
pub fn default_control_socket() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from(SYSTEM_CONTROL_SOCKET);
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("ccp-agent/control.sock"),
        _ => PathBuf::from(format!("/tmp/ccp-agent-{uid}/control.sock")),
    }
}

/// Where `ccp-agent ctl` looks unless told otherwise: the system agent's socket when there is
/// one (members of `[control] group` use it too), else the user's own agent's.
pub fn client_control_socket() -> PathBuf {
    let system = Path::new(SYSTEM_CONTROL_SOCKET);
    if system.exists() {
        return system.to_path_buf();
    }
    default_control_socket()
}

/// The Prometheus endpoint; off unless `listen` is set.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSection {
    /// A loopback address and port, e.g. "127.0.0.1:9464".
    pub listen: Option<Spanned<String>>,
}

/// `[cnm]`: congestion notification messages from QCN congestion points; off unless `listen` is
/// set, and then `allow_from` is required (`crate::cnm` says why).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CnmSection {
    /// An address and port, e.g. "0.0.0.0:7470" (ccp-router's --qcn-port default).
    pub listen: Option<Spanned<String>>,
    /// The network namespace to listen in: a name from `ip netns` or a path.
    pub netns: Option<Spanned<String>>,
    /// The congestion points' source addresses or prefixes.
    pub allow_from: Option<Spanned<Vec<String>>>,
    pub max_per_pass: Option<Spanned<u64>>,
    pub recv_buffer_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportsSection {
    pub interval_us: Spanned<u64>,
    /// Report once per smoothed RTT instead of every `interval_us`, until an algorithm asks for
    /// something else. Datapaths that count RTTs do it themselves; for the others the agent
    /// keeps the interval in step with the RTT. Unset: the datapath's own default
    /// ([`crate::datapath::Kind::reports_per_rtt`]), unless an interval is given.
    pub per_rtt: Option<bool>,
}

impl Default for ReportsSection {
    fn default() -> Self {
        ReportsSection { interval_us: Spanned::new(0..0, 10_000), per_rtt: None }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DefaultSection {
    pub algorithm: Spanned<String>,
}

impl Default for DefaultSection {
    fn default() -> Self {
        DefaultSection { algorithm: Spanned::new(0..0, "reno".to_string()) }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSection {
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub port: Option<u16>,
    pub src_addr: Option<Spanned<String>>,
    pub dst_addr: Option<Spanned<String>>,
    pub addr: Option<Spanned<String>>,
    pub cong_alg: Option<String>,
    pub cgroup: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSection {
    pub name: Option<String>,
    #[serde(rename = "match")]
    pub matcher: Spanned<MatchSection>,
    pub algorithm: Spanned<String>,
    #[serde(default)]
    pub params: Option<Spanned<toml::Table>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SafetySection {
    pub min_cwnd_pkts: f64,
    pub min_pacing_rate_bytes_per_s: u64,
    pub max_faults: u32,
    pub fault_window_s: u64,
    pub fallback_algorithm: Spanned<String>,
    pub flow_idle_timeout_s: u64,
    /// Flows the agent controls at once, in total and per source (`crate::flows::admission`).
    pub max_flows: u64,
    pub max_flows_per_peer: u64,
    pub max_flows_per_netns: u64,
    pub max_flows_per_uid: u64,
}

impl Default for SafetySection {
    fn default() -> Self {
        let l = Limits::default();
        let f = FlowLimits::default();
        SafetySection {
            min_cwnd_pkts: l.min_cwnd_pkts,
            min_pacing_rate_bytes_per_s: l.min_pacing_rate_bytes_per_s,
            max_faults: l.max_faults,
            fault_window_s: l.fault_window_us / 1_000_000,
            fallback_algorithm: Spanned::new(0..0, "reno".to_string()),
            flow_idle_timeout_s: 300,
            max_flows: f.max_flows as u64,
            max_flows_per_peer: f.max_flows_per_peer as u64,
            max_flows_per_netns: f.max_flows_per_netns as u64,
            max_flows_per_uid: f.max_flows_per_uid as u64,
        }
    }
}

/// The configuration file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `kind` and one `[datapath.KIND]` table per datapath, each parsed by its adapter.
    #[serde(default)]
    pub datapath: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    pub reports: ReportsSection,
    #[serde(default)]
    pub default: DefaultSection,
    /// Parameters per algorithm, used wherever that algorithm runs (rules may override).
    #[serde(default)]
    pub algorithms: BTreeMap<String, Spanned<toml::Table>>,
    #[serde(default)]
    pub rules: Vec<RuleSection>,
    #[serde(default)]
    pub safety: SafetySection,
    #[serde(default)]
    pub control: ControlSection,
    #[serde(default)]
    pub metrics: MetricsSection,
    #[serde(default)]
    pub cnm: CnmSection,
}

/// A configuration error, with the file and line when known.
#[derive(Debug, thiserror::Error)]
#[error("{location}: {message}")]
pub struct ConfigError {
    pub location: String,
    pub message: String,
}

/// Command-line overrides applied on top of the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub algorithm: Option<String>,
    pub params: Vec<(String, toml::Value)>,
    pub datapath: Option<String>,
    pub ipc_dir: Option<PathBuf>,
    pub ipc_name: Option<String>,
    pub report_interval_us: Option<u64>,
    pub control_socket: Option<PathBuf>,
    pub no_control: bool,
    pub metrics_listen: Option<String>,
    pub cnm_listen: Option<String>,
    pub cnm_netns: Option<String>,
    /// Replaces `[cnm] allow_from` when not empty.
    pub cnm_allow_from: Vec<String>,
}

/// A validated, resolved configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub datapath: DatapathConfig,
    pub policy: Policy,
    pub limits: Limits,
    pub flow_limits: FlowLimits,
    pub flow_idle_timeout: Duration,
    /// `[algorithms.*]` parameter tables, the base for algorithms chosen at run time (ctl swap).
    pub algorithm_params: BTreeMap<String, toml::Table>,
    pub control: ControlSection,
    pub metrics_listen: Option<SocketAddr>,
    /// The CNM listener; `None`: off.
    pub cnm: Option<CnmConfig>,
    pub source: String,
}

struct Source<'a> {
    name: &'a str,
    text: &'a str,
    /// What a relative `py:` path is relative to.
    base: &'a Path,
}

impl Source<'_> {
    fn line_of(&self, span: std::ops::Range<usize>) -> String {
        if span.start == 0 && span.end == 0 {
            return self.name.to_string();
        }
        let line = self.text.get(..span.start).map_or(0, |t| t.matches('\n').count()) + 1;
        format!("{}:{line}", self.name)
    }

    fn err(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError { location: self.line_of(span), message: message.into() }
    }

    /// `name` with a `py:` path made absolute against `base`; other names as they are.
    fn absolute(&self, name: &str, span: std::ops::Range<usize>) -> Result<String, ConfigError> {
        ccp_algorithms::registry::absolute_name(name, self.base).map_err(|e| {
            self.err(span, format!("algorithm {name:?}: {e} (a relative path is relative to {})", self.base.display()))
        })
    }

    fn absolute_spanned(&self, name: &mut Spanned<String>) -> Result<(), ConfigError> {
        *name = Spanned::new(name.span(), self.absolute(name.get_ref(), name.span())?);
        Ok(())
    }
}

fn merged(base: Option<&toml::Table>, over: Option<&toml::Table>) -> toml::Table {
    let mut t = base.cloned().unwrap_or_default();
    if let Some(o) = over {
        for (k, v) in o {
            t.insert(k.clone(), v.clone());
        }
    }
    t
}

impl AgentConfig {
    /// Loads and validates `path`. A file that anyone but root or the agent's own user could
    /// have written is refused before it is read (`permissions::open_trusted_file`): it decides
    /// what a privileged agent loads into the kernel and which flows it steers.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<AgentConfig, ConfigError> {
        use std::io::Read;
        let err = |message: String| ConfigError { location: path.display().to_string(), message };
        let mut file = crate::permissions::open_trusted_file(path).map_err(err)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| err(format!("cannot read: {e}")))?;
        let dir = std::path::absolute(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let dir = dir.parent().unwrap_or(Path::new("/"));
        Self::parse_in(&path.display().to_string(), &text, dir, overrides)
    }

    /// The built-in defaults (no file), with overrides.
    pub fn defaults(overrides: &Overrides) -> Result<AgentConfig, ConfigError> {
        Self::parse("<built-in defaults>", "", overrides)
    }

    /// `text` as a configuration named `name`, relative `py:` paths relative to the working
    /// directory.
    pub fn parse(name: &str, text: &str, overrides: &Overrides) -> Result<AgentConfig, ConfigError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Self::parse_in(name, text, &cwd, overrides)
    }

    /// `text` as a configuration named `name`, relative `py:` paths relative to `base`.
    pub fn parse_in(name: &str, text: &str, base: &Path, overrides: &Overrides) -> Result<AgentConfig, ConfigError> {
        let src = Source { name, text, base };
        let file: ConfigFile = toml::from_str(text).map_err(|e| {
            let location = e.span().map_or_else(|| name.to_string(), |s| src.line_of(s));
            ConfigError { location, message: e.message().to_string() }
        })?;
        Self::resolve(&src, file, overrides)
    }

    fn resolve(src: &Source, mut file: ConfigFile, ov: &Overrides) -> Result<AgentConfig, ConfigError> {
        let mut datapath = DatapathConfig::default();
        for (key, value) in &file.datapath {
            datapath.add(key, value.get_ref()).map_err(|e| src.err(value.span(), e))?;
        }
        if let Some(kind) = &ov.datapath {
            datapath.kind = kind.clone();
        }
        if let Some(dir) = &ov.ipc_dir {
            datapath.set("unix", "dir", toml::Value::String(dir.display().to_string()));
        }
        if let Some(name) = &ov.ipc_name {
            datapath.set("unix", "name", toml::Value::String(name.clone()));
        }
        datapath.check().map_err(|e| src.err(0..0, e))?;
        // An interval given in the file or on the command line is a request for that interval.
        let interval_given = ov.report_interval_us.is_some() || file.reports.interval_us.span() != (0..0);
        if let Some(us) = ov.report_interval_us {
            file.reports.interval_us = Spanned::new(0..0, us);
        }
        let per_rtt = file
            .reports
            .per_rtt
            .unwrap_or(!interval_given && Kind::find(&datapath.kind).map_err(|e| src.err(0..0, e))?.reports_per_rtt);
        if let Some(alg) = &ov.algorithm {
            file.default.algorithm = Spanned::new(0..0, alg.clone());
        }
        if let Some(sock) = &ov.control_socket {
            file.control.socket = sock.clone();
        }
        if ov.no_control {
            file.control.enabled = false;
        }
        if let Some(m) = &ov.metrics_listen {
            file.metrics.listen = Some(Spanned::new(0..0, m.clone()));
        }
        if let Some(l) = &ov.cnm_listen {
            file.cnm.listen = Some(Spanned::new(0..0, l.clone()));
        }
        if let Some(n) = &ov.cnm_netns {
            file.cnm.netns = Some(Spanned::new(0..0, n.clone()));
        }
        if !ov.cnm_allow_from.is_empty() {
            file.cnm.allow_from = Some(Spanned::new(0..0, ov.cnm_allow_from.clone()));
        }

        let interval = *file.reports.interval_us.get_ref();
        if !(MIN_REPORT_INTERVAL_US..=MAX_REPORT_INTERVAL_US).contains(&interval) {
            return Err(src.err(
                file.reports.interval_us.span(),
                format!("reports.interval_us = {interval} is out of range [{MIN_REPORT_INTERVAL_US}, {MAX_REPORT_INTERVAL_US}]"),
            ));
        }
        src.absolute_spanned(&mut file.default.algorithm)?;
        src.absolute_spanned(&mut file.safety.fallback_algorithm)?;
        for r in &mut file.rules {
            src.absolute_spanned(&mut r.algorithm)?;
        }
        file.algorithms = std::mem::take(&mut file.algorithms)
            .into_iter()
            .map(|(alg, table)| Ok((src.absolute(&alg, table.span())?, table)))
            .collect::<Result<_, ConfigError>>()?;
        // Every parameter table is validated, used by a rule or not, so a typo is caught at load
        // time rather than when a hot swap first reaches for that algorithm.
        for (alg, table) in &file.algorithms {
            let info = registry::resolve(alg).map_err(|e| src.err(table.span(), format!("[algorithms.{alg}]: {e}")))?;
            info.configure(table.get_ref()).map_err(|e| src.err(table.span(), format!("[algorithms.{alg}]: {e}")))?;
        }
        let configure = |name: &Spanned<String>,
                         extra: Option<&Spanned<toml::Table>>,
                         what: &str,
                         origin: String|
         -> Result<Choice, ConfigError> {
            let base = file.algorithms.get(name.get_ref()).map(|t| t.get_ref());
            let params = merged(base, extra.map(|t| t.get_ref()));
            registry::choose(name.get_ref(), params, origin).map_err(|e| {
                // Point at the algorithm name, or at the parameter table that holds the values.
                let span = match (&e, extra, file.algorithms.get(name.get_ref())) {
                    (ccp_contract::ParamError::UnknownAlgorithm { .. } | ccp_contract::ParamError::Unavailable { .. }, _, _) => {
                        name.span()
                    }
                    (_, Some(t), _) if t.span() != (0..0) => t.span(),
                    (_, _, Some(t)) => t.span(),
                    _ => name.span(),
                };
                src.err(span, format!("{what}: {e}"))
            })
        };

        let mut default_extra = None;
        if !ov.params.is_empty() {
            let mut t = toml::Table::new();
            for (k, v) in &ov.params {
                t.insert(k.clone(), v.clone());
            }
            default_extra = Some(Spanned::new(0..0, t));
        }
        let default = configure(&file.default.algorithm, default_extra.as_ref(), "default algorithm", "default".into())?;
        let fallback = configure(&file.safety.fallback_algorithm, None, "safety.fallback_algorithm", "fallback".into())?;

        let mut rules = Vec::new();
        for (i, r) in file.rules.iter().enumerate() {
            let name = r.name.clone().unwrap_or_else(|| format!("rules[{i}]"));
            let what = format!("rule {name:?}");
            let m = r.matcher.get_ref();
            let net = |s: &Option<Spanned<String>>, field: &str| -> Result<Option<ipnet::IpNet>, ConfigError> {
                match s {
                    None => Ok(None),
                    Some(v) => {
                        parse_net(v.get_ref()).map(Some).map_err(|e| src.err(v.span(), format!("{what}: match.{field}: {e}")))
                    }
                }
            };
            let matcher = Matcher {
                src_port: m.src_port,
                dst_port: m.dst_port,
                port: m.port,
                src_addr: net(&m.src_addr, "src_addr")?,
                dst_addr: net(&m.dst_addr, "dst_addr")?,
                addr: net(&m.addr, "addr")?,
                cong_alg: m.cong_alg.clone(),
                cgroup: m.cgroup.clone(),
            };
            if matcher.is_empty() {
                return Err(src.err(
                    r.matcher.span(),
                    format!("{what}: match has no conditions (use [default] to set the algorithm for all flows)"),
                ));
            }
            let choice = configure(&r.algorithm, r.params.as_ref(), &what, name.clone())?;
            rules.push(Rule { name, matcher, choice });
        }

        let s = &file.safety;
        if !(s.min_cwnd_pkts.is_finite() && s.min_cwnd_pkts >= 1.0 && s.min_cwnd_pkts <= 1000.0) {
            return Err(src.err(0..0, format!("safety.min_cwnd_pkts = {} must be in [1, 1000]", s.min_cwnd_pkts)));
        }
        if s.fault_window_s == 0 {
            return Err(src.err(0..0, "safety.fault_window_s must be at least 1"));
        }
        if s.flow_idle_timeout_s == 0 {
            return Err(src.err(0..0, "safety.flow_idle_timeout_s must be at least 1"));
        }
        if !(MIN_PACING_RATE_FLOOR..=MAX_PACING_RATE_FLOOR).contains(&s.min_pacing_rate_bytes_per_s) {
            return Err(src.err(
                0..0,
                format!(
                    "safety.min_pacing_rate_bytes_per_s = {} must be in [{MIN_PACING_RATE_FLOOR}, {MAX_PACING_RATE_FLOOR}] \
                     (a floor below one full packet per second lets a faulty algorithm stall a flow)",
                    s.min_pacing_rate_bytes_per_s
                ),
            ));
        }
        let (lo, hi) = FlowLimits::RANGE;
        let flow_limit = |v: u64, key: &str| -> Result<usize, ConfigError> {
            if (lo as u64..=hi as u64).contains(&v) {
                Ok(v as usize)
            } else {
                Err(src.err(0..0, format!("safety.{key} = {v} is out of range [{lo}, {hi}]")))
            }
        };
        let flow_limits = FlowLimits {
            max_flows: flow_limit(s.max_flows, "max_flows")?,
            max_flows_per_peer: flow_limit(s.max_flows_per_peer, "max_flows_per_peer")?,
            max_flows_per_netns: flow_limit(s.max_flows_per_netns, "max_flows_per_netns")?,
            max_flows_per_uid: flow_limit(s.max_flows_per_uid, "max_flows_per_uid")?,
        };
        let limits = Limits {
            min_cwnd_pkts: s.min_cwnd_pkts,
            min_pacing_rate_bytes_per_s: s.min_pacing_rate_bytes_per_s,
            max_faults: s.max_faults,
            fault_window_us: s.fault_window_s.saturating_mul(1_000_000),
            default_report: if per_rtt { ReportPolicy::PerRtt { rtts: 1.0 } } else { ReportPolicy::EveryUs(interval) },
            ..Limits::default()
        };
        let metrics_listen = match &file.metrics.listen {
            None => None,
            Some(l) => Some(parse_loopback(l.get_ref()).map_err(|e| src.err(l.span(), format!("metrics.listen: {e}")))?),
        };
        let cnm = resolve_cnm(src, &file.cnm)?;
        Ok(AgentConfig {
            datapath,
            policy: Policy { default, rules, fallback },
            limits,
            flow_limits,
            flow_idle_timeout: Duration::from_secs(s.flow_idle_timeout_s),
            algorithm_params: file.algorithms.iter().map(|(k, v)| (k.clone(), v.get_ref().clone())).collect(),
            control: file.control,
            metrics_listen,
            cnm,
            source: src.name.to_string(),
        })
    }
}

/// `[cnm]` checked: `None` unless `listen` is set.
fn resolve_cnm(src: &Source, c: &CnmSection) -> Result<Option<CnmConfig>, ConfigError> {
    let Some(listen) = &c.listen else { return Ok(None) };
    let addr: SocketAddr = listen.get_ref().parse().map_err(|_| {
        src.err(listen.span(), format!("cnm.listen: {:?} is not an address:port such as 0.0.0.0:7470", listen.get_ref()))
    })?;
    let allow_from = match &c.allow_from {
        Some(list) if !list.get_ref().is_empty() => list
            .get_ref()
            .iter()
            .enumerate()
            .map(|(i, s)| parse_net(s).map_err(|e| src.err(list.span(), format!("cnm.allow_from[{i}]: {e}"))))
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            return Err(src.err(
                other.as_ref().map_or(listen.span(), |l| l.span()),
                "cnm.allow_from (--cnm-allow-from) is required with cnm.listen: list the congestion points' source \
                 addresses or prefixes (ccp-router sends from its --router-addr, 10.77.0.254 by default). Any local user \
                 can send UDP to the port, and a forged CNM would cut another user's flow",
            ))
        }
    };
    let netns = match &c.netns {
        None => None,
        Some(n) if n.get_ref().trim().is_empty() => return Err(src.err(n.span(), "cnm.netns is empty")),
        Some(n) => Some(netns_path(n.get_ref())),
    };
    let bounded = |v: &Option<Spanned<u64>>, default: usize, (lo, hi): (usize, usize), key: &str| match v {
        None => Ok(default),
        Some(x) if (lo as u64..=hi as u64).contains(x.get_ref()) => Ok(*x.get_ref() as usize),
        Some(x) => Err(src.err(x.span(), format!("cnm.{key} = {} is out of range [{lo}, {hi}]", x.get_ref()))),
    };
    Ok(Some(CnmConfig {
        listen: addr,
        netns,
        allow_from,
        max_per_pass: bounded(&c.max_per_pass, cnm::DEFAULT_MAX_PER_PASS, cnm::MAX_PER_PASS_RANGE, "max_per_pass")?,
        recv_buffer_bytes: bounded(
            &c.recv_buffer_bytes,
            cnm::DEFAULT_RECV_BUFFER_BYTES,
            cnm::RECV_BUFFER_RANGE,
            "recv_buffer_bytes",
        )?,
    }))
}

/// A network namespace as `ip netns` names it, or a path (/proc/PID/ns/net).
pub fn netns_path(s: &str) -> PathBuf {
    if s.contains('/') {
        PathBuf::from(s)
    } else {
        Path::new("/run/netns").join(s)
    }
}

/// The metrics endpoint exposes flow details, so it only listens on loopback.
fn parse_loopback(s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s.parse().map_err(|_| format!("{s:?} is not an address:port such as 127.0.0.1:9464"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("{s:?} is not a loopback address; the endpoint is for local scrapers only"));
    }
    Ok(addr)
}

pub fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    if let Ok(n) = s.parse::<ipnet::IpNet>() {
        return Ok(n);
    }
    match s.parse::<std::net::IpAddr>() {
        Ok(a) => Ok(ipnet::IpNet::from(a)),
        Err(_) => Err(format!("{s:?} is not an address or prefix (e.g. 10.0.0.0/8)")),
    }
}

#[cfg(test)]
mod tests;
