//! Schemes: what distinguishes one congestion control setup under test from another.
//!
//! A scheme is more than a congestion control name. ABC needs the ABC queue discipline at the
//! router and ECN on the sender; Cubic+CoDel is kernel Cubic with a different router; an agent
//! scheme needs the agent running with an algorithm and its parameters before any flow starts.
//! So a [`Scheme`] bundles: how flows pick their congestion control ([`Cc`]), the router's queue
//! discipline, sysctls per namespace, the receiving sockets' congestion control (for a
//! DCTCP-style per-packet CE echo), and — for agent schemes — what to start and how to read
//! classification out of the agent's trace. The run orchestration applies all of it the same
//! way for every scheme.

use std::collections::BTreeMap;
use std::path::Path;

use ccp_qdisc::abc::{AbcParams, Capacity, Credit, DelayMeasure};
use ccp_qdisc::abc_coexist::{Classifier, CoexistParams};
use ccp_qdisc::codel::CodelParams;
use ccp_qdisc::dctcp::{NonEctPolicy, StepMarker, Threshold};
use ccp_qdisc::pacer::PacerSettings;
use ccp_qdisc::qcn::{QcnParams, Quantization, Sampling};
use ccp_qdisc::{Nanos, NANOS_PER_MS};
use ccp_router::{PhantomDrain, QdiscKind};

use crate::config::{check_cc_name, ClassifySpec, QdiscSpec, ReceiverSpec, SchemeSpec};

/// How the scheme's flows get their congestion control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cc {
    /// A congestion control the kernel has (cubic, bbr, reno, or any registered one).
    Kernel(String),
    /// An algorithm of `ccp-agent`; flows select the agent's eBPF congestion control. A Python
    /// class is `py:/absolute/path.py:Class` ([`absolute_agent_cc`] makes a configuration's
    /// relative path absolute).
    Agent(String),
    /// A third-party struct_ops congestion control built from its C source and registered for
    /// each run ([`crate::anchor`]): the source file (absolute once loaded) and the map.
    StructOps { source: String, map: String },
    /// An unmodified portus agent (a binary of the anchors' cache, e.g. the Nimbus authors'
    /// `nimbus`) driving flows through `ccp-libccp-shim` ([`crate::portus`]).
    Portus(String),
    /// The scheme's flows are QUIC connections (quinn, through `ccp-quic`), steered as
    /// [`QuicCc`] says ([`crate::traffic::quic`]).
    Quic(QuicCc),
}

/// Who steers a QUIC scheme's connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuicCc {
    /// `quic:<algorithm>`: the run's `ccp-agent` (its libccp unix datapath), as agent mode's
    /// `ccp-quic-agent send` connects to it.
    Agent(String),
    /// `quic-embedded:<algorithm>`: the algorithm in the sender's process (`ccp-quic send --cc`).
    Embedded(String),
    /// `quic-native:<cubic|newreno|bbr>`: quinn's own controller (`ccp-quic send --native`).
    Native(String),
}

impl std::fmt::Display for QuicCc {
    /// As a scheme's `cc` names it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuicCc::Agent(a) => write!(f, "quic:{a}"),
            QuicCc::Embedded(a) => write!(f, "quic-embedded:{a}"),
            QuicCc::Native(n) => write!(f, "quic-native:{n}"),
        }
    }
}

/// quinn's own congestion controllers, as `ccp-quic send --native` names them.
pub const QUIC_NATIVE: [&str; 3] = ["cubic", "newreno", "bbr"];

/// The prefix of a struct_ops anchor, `bpf:path/to/file.c:map` (a scheme's `cc`, or a flow
/// group's in `flow_cc`).
pub const STRUCT_OPS: &str = "bpf:";

/// An agent parameter's value replaced by the link's mean rate in Mbit/s ([`Scheme::params_for`]).
pub const LINK_MBPS: &str = "\"{link_mbps}\"";

/// Scheme kinds whose algorithm may be a Python class, `<kind>:py:path/to/file.py:Class`, or a
/// learned policy, `<kind>:onnx:path/to/model.onnx`.
const PYTHON_KINDS: [&str; 3] = ["agent", "quic", "quic-embedded"];

/// `py:PATH:Class`'s path and class, checked as far as the lab can: the agent (started with
/// `--algorithm` the whole name) or the QUIC sender (`--cc`) loads the class and says what is
/// wrong with it.
fn python_parts(name: &str) -> Result<(&str, &str), String> {
    let how = "write agent:py:path/to/file.py:ClassName (or quic:py:…, quic-embedded:py:…; the path relative to the \
               experiment file)";
    let (path, class) = name.strip_prefix("py:").and_then(|r| r.rsplit_once(':')).ok_or_else(|| format!("{name:?}: {how}"))?;
    let is_ident = class.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && class.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if path.is_empty() || !is_ident {
        return Err(format!("{name:?}: {how}"));
    }
    Ok((path, class))
}

/// A scheme's `cc` with a Python algorithm's or a learned policy's relative path made absolute
/// against `dir` (the experiment file's directory): the agent runs with another working directory. Other `cc`
/// values are returned as they are.
pub fn absolute_agent_cc(cc: &str, dir: &Path) -> Result<String, String> {
    if let Some(name) = cc.strip_prefix(STRUCT_OPS) {
        // Not canonicalised: a missing source fails the scheme's runs with its path, and the
        // experiment can still be checked on a machine without it.
        let (path, map) = crate::anchor::parse(name)?;
        return Ok(format!("{STRUCT_OPS}{}:{map}", dir.join(path).display()));
    }
    if let Some((kind, path)) =
        cc.split_once(':').and_then(|(k, n)| Some((k, n.strip_prefix("onnx:")?))).filter(|(k, _)| PYTHON_KINDS.contains(k))
    {
        // A learned policy: its manifest sits beside the model, so one path carries both.
        let full = dir.join(path);
        let full = full.canonicalize().map_err(|e| format!("{}: {e}", full.display()))?;
        return Ok(format!("{kind}:onnx:{}", full.display()));
    }
    let Some((kind, name)) = cc.split_once(':').filter(|(k, n)| PYTHON_KINDS.contains(k) && n.starts_with("py:")) else {
        return Ok(cc.to_string());
    };
    let (path, class) = python_parts(name)?;
    let full = dir.join(path);
    let full = full.canonicalize().map_err(|e| format!("{}: {e}", full.display()))?;
    Ok(format!("{kind}:py:{}:{class}", full.display()))
}

impl Cc {
    /// Parses `kernel:<cc>`, `agent:<algorithm>`, `agent:py:<file.py>:<Class>`,
    /// `bpf:<file.c>:<map>`, `portus:<binary>`, `quic:<algorithm>`, `quic-embedded:<algorithm>` or
    /// `quic-native:<cubic|newreno|bbr>`.
    pub fn parse(s: &str) -> Result<Cc, String> {
        if let Some(name) = s.strip_prefix(STRUCT_OPS) {
            let (source, map) = crate::anchor::parse(name)?;
            return Ok(Cc::StructOps { source: source.to_string(), map: map.to_string() });
        }
        let (kind, name) =
            s.split_once(':').ok_or_else(|| format!("{s:?}: write \"kernel:<congestion control>\" or \"agent:<algorithm>\""))?;
        let python = PYTHON_KINDS.contains(&kind) && name.starts_with("py:");
        if python {
            python_parts(name)?;
        }
        let learned = PYTHON_KINDS.contains(&kind) && name.starts_with("onnx:");
        if learned && !name.ends_with(".onnx") {
            return Err(format!("{s:?}: write {kind}:onnx:path/to/model.onnx (its manifest beside it, model.toml)"));
        }
        if kind == "portus" {
            return crate::portus::check_binary_name(name).map(|()| Cc::Portus(name.to_string()));
        }
        if kind == "quic-native" && !QUIC_NATIVE.contains(&name) {
            return Err(format!("{s:?}: quinn's own controllers are {}", QUIC_NATIVE.join(", ")));
        }
        if !python && !learned {
            check_cc_name("", name).map_err(|(_, m)| m)?;
        }
        match kind {
            "kernel" => Ok(Cc::Kernel(name.to_string())),
            "agent" => Ok(Cc::Agent(name.to_string())),
            "quic" => Ok(Cc::Quic(QuicCc::Agent(name.to_string()))),
            "quic-embedded" => Ok(Cc::Quic(QuicCc::Embedded(name.to_string()))),
            "quic-native" => Ok(Cc::Quic(QuicCc::Native(name.to_string()))),
            other => Err(format!(
                "{other:?} is not a scheme kind: write \"kernel:<congestion control>\", \"agent:<algorithm>\", \"bpf:<file.c>:<map>\", \"portus:<binary>\", \"quic:<algorithm>\", \"quic-embedded:<algorithm>\" or \"quic-native:<cubic|newreno|bbr>\""
            )),
        }
    }
}

/// A scheme ready to run.
#[derive(Debug, Clone)]
pub struct Scheme {
    pub name: String,
    pub cc: Cc,
    pub qdisc: QdiscKind,
    /// HULL's pacer on the sender's side, its line rate the link's, and whether each flow has
    /// one of its own.
    pub pacer: Option<(PacerSettings, bool)>,
    /// Agent algorithm parameters as `name=value` (TOML syntax for the value).
    pub params: Vec<String>,
    pub sender_sysctls: Vec<(String, String)>,
    pub receiver_sysctls: Vec<(String, String)>,
    /// Kernel module parameters for the run ([`crate::module_params`]).
    pub module_params: Vec<(String, String)>,
    /// Both namespaces' routes carry `tcp_usec_ts` (microsecond TCP timestamps).
    pub tcp_usec_ts: bool,
    pub receiver_cc: Option<String>,
    /// The receiving sockets use the run's CE echo ([`crate::echo`]).
    pub receiver_ce_echo: bool,
    /// A receiver-side program on the receiver's device ([`crate::receiver`]).
    pub receiver: Option<ReceiverSpec>,
    pub classify: Option<ClassifySpec>,
    pub agent_args: Vec<String>,
    /// A portus scheme's arguments to its binary.
    pub portus_args: Vec<String>,
    /// Kernel congestion controls of some flow groups (by index), instead of the scheme's.
    pub flow_cc: BTreeMap<usize, String>,
    /// ABC's coexistence queue classifies by the scheme's flows' ports, known per run
    /// ([`Scheme::qdisc_for_run`]).
    pub coexist_by_scheme_ports: bool,
}

impl Scheme {
    /// Builds a scheme from its validated specification.
    pub fn from_spec(spec: &SchemeSpec) -> Result<Scheme, String> {
        let cc = Cc::parse(&spec.cc)?;
        let qdisc = router_qdisc(&spec.qdisc).map_err(|(k, m)| format!("qdisc.{k}: {m}"))?;
        let sysctls = |m: &BTreeMap<String, toml::Value>| -> Result<Vec<(String, String)>, String> {
            m.iter().map(|(k, v)| Ok((k.clone(), sysctl_value(k, v)?))).collect()
        };
        Ok(Scheme {
            name: spec.name.clone(),
            cc,
            qdisc,
            pacer: spec.pacer.as_ref().map(|p| (p.settings(), p.per_flow)),
            params: spec.params.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            sender_sysctls: sysctls(&spec.sender_sysctls)?,
            receiver_sysctls: sysctls(&spec.receiver_sysctls)?,
            module_params: spec
                .module_params
                .iter()
                .map(|(k, v)| Ok((k.clone(), crate::module_params::param_value(k, v)?)))
                .collect::<Result<_, String>>()?,
            tcp_usec_ts: spec.tcp_usec_ts,
            receiver_cc: spec.receiver_cc.clone(),
            receiver_ce_echo: spec.receiver_ce_echo,
            receiver: spec.receiver.clone(),
            classify: spec.classify.clone(),
            agent_args: spec.agent_args.clone(),
            portus_args: spec.portus_args.clone(),
            flow_cc: spec
                .flow_cc
                .iter()
                .map(|(g, cc)| Ok((g.parse::<usize>().map_err(|_| format!("flow_cc: {g:?} is not a group index"))?, cc.clone())))
                .collect::<Result<_, String>>()?,
            coexist_by_scheme_ports: matches!(&spec.qdisc, QdiscSpec::Abc { coexist: Some(c), .. } if c == "scheme"),
        })
    }

    /// The router's discipline for a run whose scheme flows are the first `scheme_flows` (their
    /// receivers' ports from [`crate::traffic::port_of`]`(0)` on).
    pub fn qdisc_for_run(&self, scheme_flows: usize) -> QdiscKind {
        match (&self.qdisc, self.coexist_by_scheme_ports) {
            (QdiscKind::AbcCoexist { abc, coexist }, true) => {
                let first = crate::traffic::port_of(0).unwrap_or(0);
                let last = crate::traffic::port_of(scheme_flows.saturating_sub(1)).unwrap_or(first);
                QdiscKind::AbcCoexist {
                    abc: *abc,
                    coexist: CoexistParams { classifier: Classifier::DstPorts { first, last }, ..*coexist },
                }
            }
            (q, _) => q.clone(),
        }
    }

    /// The congestion control name the sending sockets of the scheme's flow group `group` set
    /// before connecting; `run_cc` is the name the run registered (the agent's, or the
    /// anchor's).
    pub fn flow_cc<'a>(&'a self, run_cc: &'a str, group: usize) -> &'a str {
        match (self.flow_cc.get(&group), &self.cc) {
            (Some(name), _) => name,
            (None, Cc::Kernel(name)) => name,
            (None, Cc::Agent(_) | Cc::StructOps { .. } | Cc::Portus(_) | Cc::Quic(_)) => run_cc,
        }
    }

    /// How the scheme's flow group `group` runs over QUIC, if it does (a group given its own
    /// kernel congestion control in `flow_cc` stays TCP).
    pub fn quic_plan(&self, group: usize, link_rate_bps: f64) -> Option<crate::traffic::quic::QuicPlan> {
        match (&self.cc, self.flow_cc.contains_key(&group)) {
            (Cc::Quic(cc), false) => {
                Some(crate::traffic::quic::QuicPlan { cc: cc.clone(), params: self.params_for(link_rate_bps) })
            }
            _ => None,
        }
    }

    /// The agent parameters of a run on a link of mean rate `link_rate_bps`.
    pub fn params_for(&self, link_rate_bps: f64) -> Vec<String> {
        let mbps = format!("{}", link_rate_bps / 1e6);
        self.params.iter().map(|p| p.replace(LINK_MBPS, &mbps)).collect()
    }

    /// A one-line description for logs and the run record.
    pub fn describe(&self) -> String {
        let what = match &self.cc {
            Cc::Kernel(n) => format!("kernel {n}"),
            Cc::Agent(a) if self.params.is_empty() => format!("agent {a}"),
            Cc::Agent(a) => format!("agent {a} ({})", self.params.join(", ")),
            Cc::StructOps { source, map } => format!("struct_ops {map} of {source}"),
            Cc::Portus(b) if self.portus_args.is_empty() => format!("portus {b} via ccp-libccp-shim"),
            Cc::Portus(b) => format!("portus {b} {} via ccp-libccp-shim", self.portus_args.join(" ")),
            Cc::Quic(q) => {
                let params = if self.params.is_empty() { String::new() } else { format!(" ({})", self.params.join(", ")) };
                match q {
                    QuicCc::Agent(a) => format!("QUIC steered by agent {a}{params}"),
                    QuicCc::Embedded(a) => format!("QUIC with {a} in the sender{params}"),
                    QuicCc::Native(n) => format!("QUIC with quinn's {n}"),
                }
            }
        };
        let echo = if self.receiver_ce_echo {
            ", receiver CE echo".to_string()
        } else {
            self.receiver_cc.as_ref().map_or_else(String::new, |r| format!(", receiver {r}"))
        };
        let receiver = self.receiver.as_ref().map_or_else(String::new, |r| format!(", {}", crate::receiver::describe(r)));
        let ecn = self
            .sender_sysctls
            .iter()
            .find(|(k, _)| k == "net.ipv4.tcp_ecn")
            .map_or_else(String::new, |(_, v)| format!(", tcp_ecn {v}"));
        let groups = if self.flow_cc.is_empty() {
            String::new()
        } else {
            let g: Vec<String> = self.flow_cc.iter().map(|(i, cc)| format!("group {i} kernel {cc}")).collect();
            format!(" ({})", g.join(", "))
        };
        let usec = if self.tcp_usec_ts { ", µs TCP timestamps" } else { "" };
        let modules: String = self.module_params.iter().map(|(k, v)| format!(", {k} {v}")).collect();
        format!("{what}{groups}, router {}{echo}{receiver}{ecn}{usec}{modules}", describe_qdisc(&self.qdisc))
    }
}

fn ms(v: f64) -> Nanos {
    (v * NANOS_PER_MS as f64).round() as Nanos
}

/// The router queue discipline of a specification. Errors name the offending field (relative to
/// the `qdisc` table) and come from the discipline's own parameter checks.
pub fn router_qdisc(spec: &QdiscSpec) -> Result<QdiscKind, (String, String)> {
    let non_negative_ms = |field: &str, v: f64| {
        if (0.0..1e9).contains(&v) {
            Ok(ms(v))
        } else {
            Err((field.to_string(), format!("must be a number of ms ≥ 0, got {v}")))
        }
    };
    let kind = match spec {
        QdiscSpec::Droptail => QdiscKind::DropTail,
        QdiscSpec::Codel { target_ms, interval_ms, ecn } => {
            let p = CodelParams {
                target: non_negative_ms("target_ms", *target_ms)?,
                interval: non_negative_ms("interval_ms", *interval_ms)?,
                ecn: *ecn,
                ..CodelParams::default()
            };
            p.validate().map_err(|e| (qdisc_field("codel", e.param), e.message))?;
            QdiscKind::Codel(p)
        }
        QdiscSpec::Abc {
            eta,
            delta_ms,
            dt_ms,
            window_ms,
            token_limit,
            delay,
            delay_window_ms,
            credit,
            capacity,
            lookahead_ms,
            coexist,
        } => {
            let credit = match credit.as_str() {
                "window" => Credit::Window,
                "per_opportunity" => Credit::PerOpportunity,
                other => return Err(("credit".into(), format!("{other:?}: use \"window\" or \"per_opportunity\""))),
            };
            let delay_measure = match (delay.as_str(), delay_window_ms) {
                ("queue_mean", Some(w)) => {
                    DelayMeasure::QueueOverMeanCapacity { window: non_negative_ms("delay_window_ms", *w)? }
                }
                ("queue_mean", None) => {
                    return Err((
                        "delay_window_ms".into(),
                        "delay = \"queue_mean\" needs the window of the mean capacity, ms".into(),
                    ))
                }
                (_, Some(_)) => return Err(("delay_window_ms".into(), "only applies with delay = \"queue_mean\"".into())),
                ("queue", None) => DelayMeasure::QueueOverCapacity,
                ("sojourn", None) => DelayMeasure::Sojourn,
                (other, None) => {
                    return Err(("delay".into(), format!("{other:?}: use \"queue\", \"queue_mean\" or \"sojourn\"")))
                }
            };
            // The lookahead should be the path's RTT, which this table does not know: required
            // with "future" rather than guessed, refused with "past" where it would do nothing.
            let capacity = match (capacity.as_str(), lookahead_ms) {
                ("past", None) => Capacity::Past,
                ("past", Some(_)) => {
                    return Err(("lookahead_ms".into(), "only applies with capacity = \"future\"".into()));
                }
                ("future", None) => {
                    return Err((
                        "lookahead_ms".into(),
                        "capacity = \"future\" needs the lookahead, ms (PK-ABC: one RTT, e.g. the network's rtt_ms)".into(),
                    ));
                }
                ("future", Some(l)) => Capacity::Future { lookahead: non_negative_ms("lookahead_ms", *l)? },
                (other, _) => return Err(("capacity".into(), format!("{other:?}: use \"past\" or \"future\""))),
            };
            let p = AbcParams {
                eta: *eta,
                delta: non_negative_ms("delta_ms", *delta_ms)?,
                delay_threshold: non_negative_ms("dt_ms", *dt_ms)?,
                window: non_negative_ms("window_ms", *window_ms)?,
                token_limit: *token_limit,
                delay_measure,
                capacity,
                credit,
                ..AbcParams::default()
            };
            p.validate().map_err(|e| (qdisc_field("abc", e.param), e.message))?;
            match coexist.as_deref() {
                None => QdiscKind::Abc(p),
                // The scheme's ports are set per run; the first port stands in until then.
                Some("scheme") => {
                    let port = crate::traffic::port_of(0).unwrap_or(0);
                    let classifier = Classifier::DstPorts { first: port, last: port };
                    QdiscKind::AbcCoexist { abc: p, coexist: CoexistParams { classifier, ..CoexistParams::default() } }
                }
                Some(c) => {
                    let classifier = ccp_router::args_to_config::parse_classifier(c)
                        .map_err(|m| ("coexist".to_string(), format!("{m}, or \"scheme\" (the scheme's flows)")))?;
                    QdiscKind::AbcCoexist { abc: p, coexist: CoexistParams { classifier, ..CoexistParams::default() } }
                }
            }
        }
        QdiscSpec::Dctcp { k_pkts } => {
            if *k_pkts == 0 {
                return Err(("k_pkts".into(), "must be > 0".into()));
            }
            QdiscKind::Dctcp(StepMarker { k: Threshold::Packets(*k_pkts as usize), non_ect: NonEctPolicy::Pass })
        }
        QdiscSpec::Phantom { gamma, threshold_bytes } => {
            if !(*gamma > 0.0 && *gamma <= 1.0) {
                return Err(("gamma".into(), format!("must be in (0, 1], got {gamma}")));
            }
            if !(threshold_bytes.is_finite() && *threshold_bytes >= 0.0) {
                return Err(("threshold_bytes".into(), format!("must be ≥ 0, got {threshold_bytes}")));
            }
            QdiscKind::Phantom { drain: PhantomDrain::Gamma(*gamma), threshold_bytes: *threshold_bytes, cap_bytes: None }
        }
        QdiscSpec::Qcn { qeq_pkts, w, sample, quantization, ecn_k_pkts, seed } => {
            if !(qeq_pkts.is_finite() && *qeq_pkts >= 0.0 && *qeq_pkts <= 1e6) {
                return Err(("qeq_pkts".into(), format!("must be a number of packets ≥ 0, got {qeq_pkts}")));
            }
            let sampling = ccp_router::args_to_config::parse_sampling(sample).map_err(|e| match e {
                ccp_router::Error::Param { message, .. } => ("sample".to_string(), message),
                other => ("sample".to_string(), other.to_string()),
            })?;
            let quantization = match quantization.as_str() {
                "packets" => Quantization::Packets,
                "standard" => Quantization::Standard,
                other => return Err(("quantization".into(), format!("{other:?}: use \"packets\" or \"standard\""))),
            };
            let ecn = match ecn_k_pkts {
                Some(0) => return Err(("ecn_k_pkts".into(), "must be > 0 (leave it out for no marking)".into())),
                Some(k) => Some(StepMarker { k: Threshold::Packets(*k as usize), non_ect: NonEctPolicy::Pass }),
                None => None,
            };
            let params =
                QcnParams { q_eq_bytes: (qeq_pkts * MTU_BYTES).round() as u64, w: *w, sampling, quantization, seed: *seed };
            params.validate().map_err(|e| (qdisc_field("qcn", e.param), e.message))?;
            QdiscKind::Qcn { params, ecn }
        }
    };
    Ok(kind)
}

/// Bytes per packet for Q_eq in packets (as ccp-router's `--qcn-qeq-pkts`).
const MTU_BYTES: f64 = 1500.0;

/// Placeholders an agent argument may hold, replaced per run ([`expand_agent_args`]).
pub const PLACEHOLDERS: [&str; 5] = ["{sender_ns}", "{receiver_ns}", "{sender_addr}", "{receiver_addr}", "{router_addr}"];

/// Whether any agent argument names the run's namespaces or addresses (then the agent must start
/// after the emulator has created them).
pub fn uses_placeholders(args: &[String]) -> bool {
    args.iter().any(|a| PLACEHOLDERS.iter().any(|p| a.contains(p)))
}

/// The run's values of the placeholders, in [`PLACEHOLDERS`] order.
pub struct RunNames {
    pub sender_ns: String,
    pub receiver_ns: String,
    pub sender_addr: String,
    pub receiver_addr: String,
    pub router_addr: String,
}

/// Agent arguments with the placeholders replaced.
pub fn expand_agent_args(args: &[String], n: &RunNames) -> Vec<String> {
    let values = [&n.sender_ns, &n.receiver_ns, &n.sender_addr, &n.receiver_addr, &n.router_addr];
    args.iter().map(|a| PLACEHOLDERS.iter().zip(values).fold(a.clone(), |acc, (p, v)| acc.replace(p, v))).collect()
}

/// The experiment-file field for a discipline's parameter name.
fn qdisc_field(kind: &str, param: &str) -> String {
    match (kind, param) {
        ("codel", "target") => "target_ms",
        ("codel", "interval") => "interval_ms",
        ("abc", "delta") => "delta_ms",
        ("abc", "delay_threshold") => "dt_ms",
        ("abc", "window") => "window_ms",
        ("abc", "lookahead") => "lookahead_ms",
        ("abc", "delay_window") => "delay_window_ms",
        ("abc", "token_limit" | "initial_token") => "token_limit",
        ("qcn", "q_eq") => "qeq_pkts",
        ("qcn", "sampling") => "sample",
        (_, other) => other,
    }
    .to_string()
}

/// A short text for a queue discipline and its main parameters.
pub fn describe_qdisc(q: &QdiscKind) -> String {
    let ms = |n: Nanos| n as f64 / NANOS_PER_MS as f64;
    match q {
        QdiscKind::Codel(p) => {
            format!("codel target {} ms interval {} ms{}", ms(p.target), ms(p.interval), if p.ecn { " ecn" } else { "" })
        }
        QdiscKind::Abc(p) | QdiscKind::AbcCoexist { abc: p, .. } => {
            let coexist = match q {
                QdiscKind::AbcCoexist { coexist: c, .. } => match c.classifier {
                    Classifier::Ecn => ", non-ECT packets in a second queue".to_string(),
                    Classifier::DstPorts { first, last } => format!(", packets not to ports {first}-{last} in a second queue"),
                },
                _ => String::new(),
            };
            let capacity = match p.capacity {
                Capacity::Past => String::new(),
                Capacity::Future { lookahead } => format!(" capacity future +{} ms (PK-ABC)", ms(lookahead)),
            };
            let credit = match p.credit {
                Credit::Window => "",
                Credit::PerOpportunity => " credit per opportunity",
            };
            let delay = match p.delay_measure {
                DelayMeasure::QueueOverCapacity => String::new(),
                DelayMeasure::QueueOverMeanCapacity { window } => format!(" delay backlog/mean capacity over {} ms", ms(window)),
                DelayMeasure::Sojourn => " delay sojourn".into(),
            };
            format!(
                "abc eta {} delta {} ms d_t {} ms window {} ms{delay}{credit}{capacity}{coexist}",
                p.eta,
                ms(p.delta),
                ms(p.delay_threshold),
                ms(p.window)
            )
        }
        QdiscKind::Dctcp(m) => format!("dctcp K {:?}", m.k),
        QdiscKind::Qcn { params: p, ecn } => format!(
            "qcn Q_eq {} B w {} sample {} quantization {}{}",
            p.q_eq_bytes,
            p.w,
            match p.sampling {
                Sampling::Probability(x) => format!("prob:{x}"),
                Sampling::Bytes(b) => format!("bytes:{b}"),
                Sampling::Table => "table".into(),
            },
            match p.quantization {
                Quantization::Packets => "packets",
                Quantization::Standard => "standard",
            },
            ecn.map_or_else(String::new, |m| format!(", ECN K {:?}", m.k))
        ),
        other => other.name().to_string(),
    }
}

/// A sysctl's value as written to /proc/sys; the key must be a `net.` one (the namespaces are
/// network namespaces: other keys would change the whole machine).
pub fn sysctl_value(key: &str, v: &toml::Value) -> Result<String, String> {
    let ok_key = key.starts_with("net.")
        && key.len() < 128
        && !key.contains("..")
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok_key {
        return Err(format!("{key:?} is not a network sysctl (net.…; letters, digits, '.', '_', '-')"));
    }
    match v {
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::String(s) if !s.is_empty() && !s.contains('\n') => Ok(s.clone()),
        _ => Err(format!("{key}: give an integer or a one-line string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cc_parsing() {
        assert_eq!(Cc::parse("kernel:cubic"), Ok(Cc::Kernel("cubic".into())));
        assert_eq!(Cc::parse("agent:nimbus"), Ok(Cc::Agent("nimbus".into())));
        assert!(Cc::parse("cubic").is_err());
        assert!(Cc::parse("kernel:").is_err());
        assert!(Cc::parse("kernel:averyveryverylongname").is_err());
        assert!(Cc::parse("sim:cubic").unwrap_err().contains("not a scheme kind"));
        assert_eq!(Cc::parse("agent:py:/cc/my.py:My_CC2"), Ok(Cc::Agent("py:/cc/my.py:My_CC2".into())));
        assert_eq!(Cc::parse("agent:py:/a:b/my.py:X"), Ok(Cc::Agent("py:/a:b/my.py:X".into())));
        for bad in
            ["agent:py:my.py", "agent:py::X", "agent:py:my.py:", "agent:py:my.py:2X", "agent:py:my.py:A-B", "kernel:py:x.py:X"]
        {
            assert!(Cc::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quic_schemes_name_who_steers_and_quinns_own_are_checked() {
        assert_eq!(Cc::parse("quic:dctcp"), Ok(Cc::Quic(QuicCc::Agent("dctcp".into()))));
        assert_eq!(Cc::parse("quic-embedded:cubic"), Ok(Cc::Quic(QuicCc::Embedded("cubic".into()))));
        for n in QUIC_NATIVE {
            assert_eq!(Cc::parse(&format!("quic-native:{n}")), Ok(Cc::Quic(QuicCc::Native(n.into()))));
        }
        let e = Cc::parse("quic-native:vegas").unwrap_err();
        assert!(e.contains("cubic, newreno, bbr"), "{e}");
        assert!(Cc::parse("quic:").is_err() && Cc::parse("quic:no such").is_err());
        let spec: SchemeSpec = toml::from_str("name = \"q\"\ncc = \"quic:cubic\"\nparams = { beta = 0.7 }").unwrap();
        let s = Scheme::from_spec(&spec).unwrap();
        let plan = s.quic_plan(0, 50e6).expect("a QUIC scheme's flows are QUIC");
        assert_eq!((plan.cc, plan.params), (QuicCc::Agent("cubic".into()), vec!["beta=0.7".to_string()]));
        assert!(s.describe().starts_with("QUIC steered by agent cubic (beta=0.7)"), "{}", s.describe());
        // A group given a kernel congestion control stays TCP; other schemes' flows are TCP.
        let spec: SchemeSpec = toml::from_str("name = \"q\"\ncc = \"quic:cubic\"\nflow_cc = { \"1\" = \"reno\" }").unwrap();
        let s = Scheme::from_spec(&spec).unwrap();
        assert!(s.quic_plan(0, 1e6).is_some() && s.quic_plan(1, 1e6).is_none());
        let spec: SchemeSpec = toml::from_str("name = \"k\"\ncc = \"kernel:cubic\"").unwrap();
        assert!(Scheme::from_spec(&spec).unwrap().quic_plan(0, 1e6).is_none());
    }

    fn abc_spec(eta: f64, capacity: &str, lookahead_ms: Option<f64>) -> QdiscSpec {
        QdiscSpec::Abc {
            eta,
            delta_ms: 133.0,
            dt_ms: 50.0,
            window_ms: 20.0,
            token_limit: 5.0,
            delay: "queue".into(),
            delay_window_ms: None,
            credit: "window".into(),
            capacity: capacity.into(),
            lookahead_ms,
            coexist: None,
        }
    }

    #[test]
    fn abc_coexist_classifies_by_the_runs_scheme_ports_ecn_or_a_port_range() {
        let scheme = |coexist: &str| {
            let text = format!("name = \"abc\"\ncc = \"agent:abc\"\nqdisc = {{ kind = \"abc\", coexist = \"{coexist}\" }}\n");
            Scheme::from_spec(&toml::from_str::<SchemeSpec>(&text).unwrap())
        };
        let classifier = |q: QdiscKind| match q {
            QdiscKind::AbcCoexist { coexist, .. } => coexist.classifier,
            other => panic!("{other:?}"),
        };
        // "scheme": the first N flows' ports, N known per run.
        let s = scheme("scheme").unwrap();
        let first = crate::traffic::port_of(0).unwrap();
        assert_eq!(classifier(s.qdisc_for_run(3)), Classifier::DstPorts { first, last: first + 2 });
        assert_eq!(classifier(s.qdisc_for_run(1)), Classifier::DstPorts { first, last: first });
        assert!(s.describe().contains("second queue"), "{}", s.describe());
        // The others are fixed whatever the run.
        assert_eq!(classifier(scheme("ecn").unwrap().qdisc_for_run(3)), Classifier::Ecn);
        assert_eq!(classifier(scheme("ports:80-90").unwrap().qdisc_for_run(3)), Classifier::DstPorts { first: 80, last: 90 });
        let e = scheme("dscp").unwrap_err();
        assert!(e.starts_with("qdisc.coexist: \"dscp\": use") && e.contains("\"scheme\""), "{e}");
        // Without it, one queue.
        let plain: SchemeSpec = toml::from_str("name = \"abc\"\ncc = \"agent:abc\"\nqdisc = { kind = \"abc\" }\n").unwrap();
        assert!(matches!(Scheme::from_spec(&plain).unwrap().qdisc_for_run(3), QdiscKind::Abc(_)));
    }

    #[test]
    fn abc_capacity_is_past_by_default_and_future_needs_a_lookahead() {
        let capacity = |spec: &QdiscSpec| match router_qdisc(spec).unwrap() {
            QdiscKind::Abc(p) => p.capacity,
            other => panic!("{other:?}"),
        };
        let default: SchemeSpec = toml::from_str("name = \"abc\"\ncc = \"agent:abc\"\nqdisc = { kind = \"abc\" }\n").unwrap();
        assert_eq!(capacity(&default.qdisc), Capacity::Past);
        let pk: SchemeSpec = toml::from_str(
            "name = \"pk-abc\"\ncc = \"agent:abc\"\nqdisc = { kind = \"abc\", capacity = \"future\", lookahead_ms = 100 }\n",
        )
        .unwrap();
        assert_eq!(capacity(&pk.qdisc), Capacity::Future { lookahead: 100 * NANOS_PER_MS });
        assert!(Scheme::from_spec(&pk).unwrap().describe().contains("capacity future +100 ms"));
        let err = |c: &str, l: Option<f64>| router_qdisc(&abc_spec(0.98, c, l)).unwrap_err();
        assert_eq!(err("future", None).0, "lookahead_ms");
        assert_eq!(err("past", Some(100.0)).0, "lookahead_ms");
        assert_eq!(err("future", Some(0.0)).0, "lookahead_ms");
        assert_eq!(err("future", Some(-1.0)).0, "lookahead_ms");
        let e = err("oracle", None);
        assert_eq!(e.0, "capacity");
        assert!(e.1.contains("\"past\" or \"future\""), "{}", e.1);
    }

    #[test]
    fn abc_delay_over_the_mean_capacity_needs_its_window() {
        let with = |delay: &str, w: Option<f64>| {
            let mut spec = abc_spec(0.98, "past", None);
            if let QdiscSpec::Abc { delay: d, delay_window_ms, .. } = &mut spec {
                *d = delay.into();
                *delay_window_ms = w;
            }
            router_qdisc(&spec)
        };
        match with("queue_mean", Some(200.0)).unwrap() {
            QdiscKind::Abc(p) => {
                assert_eq!(p.delay_measure, DelayMeasure::QueueOverMeanCapacity { window: 200 * NANOS_PER_MS });
                assert!(describe_qdisc(&QdiscKind::Abc(p)).contains("mean capacity over 200 ms"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(with("queue_mean", None).unwrap_err().0, "delay_window_ms");
        assert_eq!(with("queue_mean", Some(0.0)).unwrap_err().0, "delay_window_ms");
        assert_eq!(with("queue", Some(200.0)).unwrap_err().0, "delay_window_ms");
        assert_eq!(with("backlog", None).unwrap_err().0, "delay");
    }

    #[test]
    fn abc_credit_is_the_thesis_window_by_default_or_the_artifacts_per_opportunity() {
        let credit = |text: &str| {
            let spec: SchemeSpec =
                toml::from_str(&format!("name = \"abc\"\ncc = \"agent:abc\"\nqdisc = {{ kind = \"abc\"{text} }}\n")).unwrap();
            router_qdisc(&spec.qdisc)
        };
        let of = |q: QdiscKind| match q {
            QdiscKind::Abc(p) => p.credit,
            other => panic!("{other:?}"),
        };
        assert_eq!(of(credit("").unwrap()), Credit::Window);
        assert_eq!(of(credit(", credit = \"per_opportunity\"").unwrap()), Credit::PerOpportunity);
        assert_eq!(credit(", credit = \"banked\"").unwrap_err().0, "credit");
        // It counts opportunities as they happen: not with PK-ABC's future window.
        let e = credit(", credit = \"per_opportunity\", capacity = \"future\", lookahead_ms = 100").unwrap_err();
        assert_eq!(e.0, "credit");
    }

    #[test]
    fn qdiscs_map_to_router_parameters() {
        let codel = QdiscSpec::Codel { target_ms: 50.0, interval_ms: 100.0, ecn: false };
        match router_qdisc(&codel).unwrap() {
            QdiscKind::Codel(p) => assert_eq!((p.target, p.interval), (50 * NANOS_PER_MS, 100 * NANOS_PER_MS)),
            other => panic!("{other:?}"),
        }
        let abc = abc_spec(0.98, "past", None);
        match router_qdisc(&abc).unwrap() {
            QdiscKind::Abc(p) => {
                assert_eq!(p.eta, 0.98);
                assert_eq!(p.delta, 133 * NANOS_PER_MS);
                assert_eq!(p.delay_threshold, 50 * NANOS_PER_MS);
            }
            other => panic!("{other:?}"),
        }
        let bad = abc_spec(1.5, "past", None);
        assert_eq!(router_qdisc(&bad).unwrap_err().0, "eta");
        assert_eq!(router_qdisc(&QdiscSpec::Dctcp { k_pkts: 0 }).unwrap_err().0, "k_pkts");
    }

    #[test]
    fn sysctls_are_network_only() {
        assert_eq!(sysctl_value("net.ipv4.tcp_ecn", &toml::Value::Integer(1)), Ok("1".into()));
        assert_eq!(sysctl_value("net.ipv4.tcp_congestion_control", &toml::Value::String("reno".into())), Ok("reno".into()));
        assert!(sysctl_value("kernel.panic", &toml::Value::Integer(1)).is_err());
        assert!(sysctl_value("net.ipv4/../../x", &toml::Value::Integer(1)).is_err());
        assert!(sysctl_value("net.ipv4.tcp_ecn", &toml::Value::Float(1.0)).is_err());
    }

    #[test]
    fn agent_schemes_use_the_agent_cc() {
        let spec: SchemeSpec = toml::from_str(
            "name = \"abc\"\ncc = \"agent:abc\"\nparams = { init_cwnd_pkts = 10 }\nqdisc = { kind = \"abc\" }\nsender_sysctls = { \"net.ipv4.tcp_ecn\" = 1 }\n",
        )
        .unwrap();
        let s = Scheme::from_spec(&spec).unwrap();
        assert_eq!(s.flow_cc("ccp", 0), "ccp");
        assert_eq!(s.params, vec!["init_cwnd_pkts=10".to_string()]);
        assert_eq!(s.sender_sysctls, vec![("net.ipv4.tcp_ecn".to_string(), "1".to_string())]);
        assert!(s.describe().contains("agent abc") && s.describe().contains("abc eta 0.98"));
        assert!(!s.tcp_usec_ts, "millisecond timestamps unless asked");
        let spec: SchemeSpec = toml::from_str("name = \"k\"\ncc = \"kernel:cubic\"\ntcp_usec_ts = true").unwrap();
        let s = Scheme::from_spec(&spec).unwrap();
        assert!(s.tcp_usec_ts && s.describe().ends_with(", µs TCP timestamps"), "{}", s.describe());
        let spec: SchemeSpec =
            toml::from_str("name = \"k\"\ncc = \"kernel:cubic\"\nmodule_params = { \"tcp_cubic.hystart_detect\" = 2 }").unwrap();
        let s = Scheme::from_spec(&spec).unwrap();
        assert!(s.describe().ends_with(", tcp_cubic.hystart_detect 2"), "{}", s.describe());
    }

    #[test]
    fn a_learned_policy_is_made_absolute_against_the_experiment_directory() {
        let dir = std::env::temp_dir().join(format!("ccp-lab-onnx-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("p")).unwrap();
        std::fs::write(dir.join("p/pol.onnx"), b"").unwrap();
        let abs = dir.canonicalize().unwrap().join("p/pol.onnx");
        for kind in ["agent", "quic", "quic-embedded"] {
            let want = format!("{kind}:onnx:{}", abs.display());
            assert_eq!(absolute_agent_cc(&format!("{kind}:onnx:p/./pol.onnx"), &dir), Ok(want.clone()));
            assert_eq!(absolute_agent_cc(&want, Path::new("/elsewhere")), Ok(want), "absolute stays");
        }
        assert_eq!(Cc::parse(&format!("agent:onnx:{}", abs.display())), Ok(Cc::Agent(format!("onnx:{}", abs.display()))));
        let e = absolute_agent_cc("agent:onnx:p/none.onnx", &dir).unwrap_err();
        assert!(e.contains("p/none.onnx"), "{e}");
        assert_eq!(
            absolute_agent_cc("kernel:onnx:p/pol.onnx", &dir).as_deref(),
            Ok("kernel:onnx:p/pol.onnx"),
            "not a kind that hosts one"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_python_algorithm_is_made_absolute_against_the_experiment_directory() {
        let dir = std::env::temp_dir().join(format!("ccp-lab-py-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("cc")).unwrap();
        std::fs::write(dir.join("cc/mine.py"), "class Mine: pass\n").unwrap();
        let abs = dir.canonicalize().unwrap().join("cc/mine.py");
        let want = format!("agent:py:{}:Mine", abs.display());
        assert_eq!(absolute_agent_cc("agent:py:cc/mine.py:Mine", &dir), Ok(want.clone()));
        assert_eq!(absolute_agent_cc("agent:py:./cc/../cc/mine.py:Mine", &dir), Ok(want.clone()));
        assert_eq!(absolute_agent_cc(&want, Path::new("/elsewhere")), Ok(want.clone()), "absolute stays");
        assert_eq!(Cc::parse(&want), Ok(Cc::Agent(want["agent:".len()..].to_string())));
        let e = absolute_agent_cc("agent:py:cc/none.py:Mine", &dir).unwrap_err();
        assert!(e.contains("cc/none.py"), "{e}");
        // QUIC schemes host Python classes the same way (the agent, or the sender, loads them).
        for kind in ["quic", "quic-embedded"] {
            let quic = absolute_agent_cc(&format!("{kind}:py:cc/mine.py:Mine"), &dir).unwrap();
            assert_eq!(quic, format!("{kind}:py:{}:Mine", abs.display()));
            let name = format!("py:{}:Mine", abs.display());
            let want = if kind == "quic" { QuicCc::Agent(name) } else { QuicCc::Embedded(name) };
            assert_eq!(Cc::parse(&quic), Ok(Cc::Quic(want)));
        }
        assert!(Cc::parse("quic-native:py:x.py:X").is_err(), "quinn's own are not Python");
        for other in ["agent:cubic", "kernel:bbr", "quic:cubic"] {
            assert_eq!(absolute_agent_cc(other, &dir).as_deref(), Ok(other), "not Python: as it is");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
