//! Recording one run: the agent, the emulator with the scheme's queue discipline, sysctls, the
//! receiver program and the SRTT probe are set up, the traffic runs and is sampled, and
//! everything is torn down in order; guards tear down whatever is left on any error.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ccp_qdisc::{Limit, NANOS_PER_MS};
use ccp_router::{DirectionConfig, Emulator, FeedbackConfig, LinkShape, PacerConfig, QdiscKind, RouterConfig, TopologyConfig};

use super::execute::{packet_log_path, RunContext};
use super::plan::{flow_plans, rtt_ms};
use crate::agent::{Agent, AgentLaunch};
use crate::anchor::StructOpsAnchor;
use crate::config::Loaded;
use crate::echo::CeEcho;
use crate::error::{Error, Result};
use crate::link::Link;
use crate::metrics::flows::{FlowExtra, Tick};
use crate::output::RunRecord;
use crate::portus::{Portus, PortusLaunch};
use crate::receiver::{self, ReceiverHook};
use crate::scheme::{self, Cc, QuicCc, Scheme};
use crate::srtt::{self, SrttHistogram, SrttProbe};
use crate::traffic::{lock, Endpoints, FlowPlan, Role, Traffic};
use crate::{cancel, netns};

/// What a run measured before metrics are computed.
pub(super) struct Recorded {
    pub(super) router_start: u64,
    pub(super) traffic_start_ns: u64,
    pub(super) plans: Vec<FlowPlan>,
    pub(super) ticks: Vec<Tick>,
    pub(super) extra: Vec<FlowExtra>,
    pub(super) summary: ccp_router::Summary,
    pub(super) agent_trace: Option<(PathBuf, u64)>,
    /// The per-ACK SRTT histogram and its skipped segments (no RTT yet, other ports).
    pub(super) srtt: Option<(SrttHistogram, u64, u64)>,
}

/// Sets up, runs the traffic and tears down; returns what was recorded.
pub(super) fn record(ctx: &RunContext<'_>, rec: &mut RunRecord, duration_s: f64, progress: &dyn Fn(f64)) -> Result<Recorded> {
    let x = &ctx.loaded.experiment;
    let o = ctx.options;
    // Agent first: if its congestion control never appears, no namespace is created.
    let mut cc_name = x.agent.cc_name.clone().unwrap_or_else(netns::unique_cc_name);
    // Anchors' congestion controls (the scheme's, and flow groups' in flow_cc), registered under
    // their own names before anything starts; flow_cc then names what was registered.
    let mut anchors: Vec<(String, StructOpsAnchor)> = Vec::new();
    let mut register = |spec: &str| -> Result<String> {
        if let Some((_, a)) = anchors.iter().find(|(s, _)| s == spec) {
            return Ok(a.name().to_string());
        }
        let (source, map) = crate::anchor::parse(&spec[scheme::STRUCT_OPS.len()..]).map_err(Error::Unavailable)?;
        let a = StructOpsAnchor::register(Path::new(source), map, &ctx.dir.join(format!("anchor{}", anchors.len())))?;
        let name = a.name().to_string();
        anchors.push((spec.to_string(), a));
        Ok(name)
    };
    if let Cc::StructOps { source, map } = &ctx.scheme.cc {
        cc_name = register(&format!("{}{source}:{map}", scheme::STRUCT_OPS))?;
    }
    let mut run_scheme = ctx.scheme.clone();
    for cc in run_scheme.flow_cc.values_mut() {
        if cc.starts_with(scheme::STRUCT_OPS) {
            *cc = register(cc)?;
        }
    }
    let binary = o
        .agent
        .clone()
        .or_else(|| x.agent.binary.as_ref().map(|b| ctx.loaded.dir.join(b)))
        .unwrap_or_else(crate::agent::default_binary);
    // A receiver the agent cannot provide fails the run before anything starts.
    if ctx.scheme.receiver.is_some() {
        receiver::check_available(&binary)?;
    }
    let launch = |algorithm: &String, extra_args: Vec<String>| AgentLaunch {
        binary: binary.clone(),
        algorithm: algorithm.clone(),
        params: ctx.scheme.params_for(ctx.link.mean_rate_bps),
        extra_args,
        cc_name: cc_name.clone(),
        ready_timeout: Duration::from_secs_f64(x.agent.ready_timeout_s),
        log: ctx.dir.join("agent.log"),
        trace: x.agent.trace_flows.then(|| ctx.dir.join("agent-trace.jsonl")),
        unix_ipc_dir: None,
    };
    // An agent whose arguments name the run's namespaces or addresses (a CNM listener inside the
    // sender's namespace) can only start once they exist; any other starts first.
    let after_namespaces = scheme::uses_placeholders(&ctx.scheme.agent_args);
    let mut agent = match &ctx.scheme.cc {
        Cc::Agent(algorithm) if !after_namespaces => Some(Agent::start(&launch(algorithm, ctx.scheme.agent_args.clone()))?),
        Cc::Quic(QuicCc::Agent(algorithm)) => Some(Agent::start(&AgentLaunch {
            unix_ipc_dir: Some(crate::traffic::quic::ipc_dir(&ctx.dir)),
            ..launch(algorithm, Vec::new())
        })?),
        _ => None,
    };
    let mut portus = match &ctx.scheme.cc {
        Cc::Portus(name) => Some(Portus::start(&portus_launch(ctx, name, &cc_name))?),
        _ => None,
    };
    let prefix = netns::unique_prefix();
    rec.namespace_prefix = prefix.clone();
    let _guard = PrefixGuard(prefix.clone());
    let log = packet_log_path(&prefix);
    let scheme_flows = flow_plans(ctx.loaded, ctx.scheme, ctx.scenario, ctx.link, duration_s, &cc_name)
        .iter()
        .take_while(|p| p.role == Role::Scheme)
        .count();
    let qdisc = ctx.scheme.qdisc_for_run(scheme_flows);
    let mut cfg = router_config(ctx.loaded, ctx.link, &qdisc, rec.buffer_pkts, Some(log), o.realtime || x.router.realtime);
    cfg.pacer = ctx.scheme.pacer.map(|(settings, per_flow)| PacerConfig {
        settings,
        line_rate_bps: ctx.link.mean_rate_bps,
        seed: 1,
        per_flow,
    });
    let topology = TopologyConfig { tcp_usec_ts: ctx.scheme.tcp_usec_ts, ..TopologyConfig::new(&prefix) };
    let emu = Emulator::start(topology, cfg)?;
    let router_start = emu.start_time();
    let topo = emu.topology();
    if let (Cc::Agent(algorithm), true) = (&ctx.scheme.cc, after_namespaces) {
        let t = topo.config();
        let names = scheme::RunNames {
            sender_ns: topo.sender_ns(),
            receiver_ns: topo.receiver_ns(),
            sender_addr: t.sender_addr.to_string(),
            receiver_addr: t.receiver_addr.to_string(),
            router_addr: t.router_addr.to_string(),
        };
        agent = Some(Agent::start(&launch(algorithm, scheme::expand_agent_args(&ctx.scheme.agent_args, &names)))?);
    }
    let mut sysctls = netns::Sysctls::default();
    for (k, v) in &ctx.scheme.sender_sysctls {
        sysctls.set(&topo.sender_ns(), k, v)?;
    }
    for (k, v) in &ctx.scheme.receiver_sysctls {
        sysctls.set(&topo.receiver_ns(), k, v)?;
    }
    let mut module_params = crate::module_params::ModuleParams::default();
    for (k, v) in &ctx.scheme.module_params {
        module_params.set(k, v)?;
    }
    let ends = Endpoints {
        sender_ns: topo.sender_ns(),
        receiver_ns: topo.receiver_ns(),
        receiver_addr: topo.config().receiver_addr,
        work_dir: ctx.dir.clone(),
    };
    // The receiver's CE echo, registered before any flow so the listener can select it.
    let echo = if ctx.scheme.receiver_ce_echo { Some(CeEcho::register(&netns::unique_echo_name())?) } else { None };
    let scheme = match &echo {
        Some(e) => Scheme { receiver_cc: Some(e.name().to_string()), ..run_scheme },
        None => run_scheme,
    };
    let plans = flow_plans(ctx.loaded, &scheme, ctx.scenario, ctx.link, duration_s, &cc_name);
    // The receiver program on the receiver's device, before any flow.
    let hook = match &ctx.scheme.receiver {
        Some(spec) => Some(ReceiverHook::enable(&binary, &topo.receiver_ns(), ccp_router::topology::TUN_NAME, spec)?),
        None => None,
    };
    // Per-ACK SRTT of the scheme's flows (the first plans, ports from the first one on).
    let scheme_flows = plans.iter().take_while(|p| p.role == Role::Scheme).count();
    let ports = (crate::traffic::port_of(0), crate::traffic::port_of(scheme_flows.saturating_sub(1)));
    let probe = match ports {
        (Some(lo), Some(hi)) if scheme_flows > 0 => Some(SrttProbe::start(srtt::netns_cookie(&topo.sender_ns())?, (lo, hi))?),
        _ => None,
    };
    let since_router = || ccp_router::clock::now().saturating_sub(router_start);
    let traffic_start_ns = since_router();
    let mut traffic = Traffic::start(plans.clone(), &ends)?;
    let interval = Duration::from_millis(x.sample_interval_ms);
    let mut alive = || -> Result<()> {
        if let Some(a) = agent.as_mut() {
            a.check_alive()?;
        }
        portus.as_mut().map_or(Ok(()), Portus::check_alive)
    };
    let ticks = sample_traffic(&traffic, &mut alive, &since_router, interval, duration_s, progress)?;
    traffic.stop()?;
    if let Some(e) = traffic.first_error() {
        return Err(Error::Run(e));
    }
    let extra = flow_extras(&traffic);
    drop(traffic);
    let srtt = probe.map(SrttProbe::finish).transpose()?;
    rec.receiver = hook.map(ReceiverHook::finish);
    sysctls.restore();
    module_params.restore();
    let summary = emu.stop()?;
    rec.ce_echo = echo.as_ref().map(CeEcho::counts);
    drop(echo);
    drop(anchors);
    let mut agent_trace = agent.as_mut().and_then(|a| {
        a.stop();
        a.trace.clone().map(|t| (t, a.started_ns))
    });
    if let Some(p) = portus.as_mut() {
        p.stop();
        agent_trace = p.trace(&ctx.dir)?.map(|t| (t, p.started_ns));
    }
    Ok(Recorded { router_start, traffic_start_ns, plans, ticks, extra, summary, agent_trace, srtt })
}

/// Samples every flow every `interval` from the start of traffic until `duration_s` (times in ns
/// on the router's clock by `since_router`), failing on a flow's error, a dead agent (`alive`)
/// or Ctrl-C.
fn sample_traffic(
    traffic: &Traffic,
    alive: &mut dyn FnMut() -> Result<()>,
    since_router: &dyn Fn() -> u64,
    interval: Duration,
    duration_s: f64,
    progress: &dyn Fn(f64),
) -> Result<Vec<Tick>> {
    let end = traffic.t0() + Duration::from_secs_f64(duration_s);
    let mut ticks = vec![Tick { t_ns: since_router(), flows: traffic.sample() }];
    let mut next = traffic.t0() + interval;
    loop {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        ticks.push(Tick { t_ns: since_router(), flows: traffic.sample() });
        if let Some(e) = traffic.first_error() {
            return Err(Error::Run(e));
        }
        alive()?;
        if cancel::requested() {
            return Err(Error::Interrupted);
        }
        progress(traffic.t0().elapsed().as_secs_f64().min(duration_s));
        if next >= end {
            break;
        }
        next = (next + interval).min(end);
    }
    Ok(ticks)
}

/// How to start a `portus:<name>` scheme: the binary from `[portus] bin_dir` (relative to the
/// experiment file) or the anchors' cache, the shim beside ccp-lab unless given.
fn portus_launch(ctx: &RunContext<'_>, name: &str, cc_name: &str) -> PortusLaunch {
    let p = &ctx.loaded.experiment.portus;
    let bin_dir = p.bin_dir.as_ref().map_or_else(crate::portus::default_bin_dir, |d| ctx.loaded.dir.join(d));
    PortusLaunch {
        shim: p.shim.as_ref().map_or_else(|| crate::agent::sibling_binary("ccp-libccp-shim"), |s| ctx.loaded.dir.join(s)),
        binary: bin_dir.join(name),
        args: crate::portus::expand_args(&ctx.scheme.portus_args, ctx.link.mean_rate_bps),
        cc_name: cc_name.to_string(),
        ready_timeout: Duration::from_secs_f64(p.ready_timeout_s),
        run_dir: ctx.dir.clone(),
    }
}

/// What each flow's threads collected besides byte counts.
fn flow_extras(traffic: &Traffic) -> Vec<FlowExtra> {
    traffic
        .states
        .iter()
        .map(|s| FlowExtra {
            short_flows: lock(&s.short_flows).clone(),
            skipped: s.skipped.load(Ordering::Relaxed),
            send_failures: s.send_failures.load(Ordering::Relaxed),
        })
        .collect()
}

/// The emulator configuration of a run.
fn router_config(l: &Loaded, link: &Link, qdisc: &QdiscKind, buffer: u32, log: Option<PathBuf>, realtime: bool) -> RouterConfig {
    let n = &l.experiment.network;
    let one_way = (rtt_ms(l, link) / 2.0 * NANOS_PER_MS as f64).round() as u64;
    let down = DirectionConfig {
        shape: link.shape.clone(),
        delay: one_way,
        limit: Limit::Packets(buffer as usize),
        qdisc: qdisc.clone(),
    };
    let up = match n.ack_rate_mbps {
        Some(r) => DirectionConfig {
            shape: LinkShape::Fixed { bits_per_sec: r * 1e6 },
            delay: one_way,
            limit: Limit::Packets(buffer as usize),
            qdisc: QdiscKind::DropTail,
        },
        None => DirectionConfig::unlimited(one_way),
    };
    // Validated when the experiment was loaded.
    let classes = ccp_router::classes::parse_all(&n.class_delays).expect("network.class_delays were validated at load");
    RouterConfig {
        down,
        up,
        feedback: FeedbackConfig::default(),
        classes,
        log_csv: log,
        duration: None,
        realtime,
        loss: link.loss,
        pacer: None,
    }
}

/// Deletes a prefix's namespaces by name when dropped (after the emulator, which normally has
/// already removed them): the last line of defence against leaks on any error path.
struct PrefixGuard(String);

impl Drop for PrefixGuard {
    fn drop(&mut self) {
        let topo = TopologyConfig::new(&self.0);
        if ccp_router::netns::exists(&topo.sender_ns()) || ccp_router::netns::exists(&topo.receiver_ns()) {
            if let Err(e) = ccp_router::cleanup_prefix(&self.0) {
                eprintln!("ccp-lab: cleaning up namespaces {}-*: {e}", self.0);
            }
        }
    }
}
