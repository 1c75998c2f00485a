//! Running an experiment: the matrix of link × scenario × scheme × repetition, one run at a
//! time, each in its own namespace prefix.
//!
//! **Why the router library and not the `ccp-router run` subprocess.** Every time series of a
//! run must share one clock: the router's per-packet log counts ns from the emulator's start,
//! and the library hands us that start ([`Emulator::start_time`], CLOCK_MONOTONIC), so queueing
//! delay bins, TCP_INFO samples and the agent's trace line up exactly instead of to within the
//! latency of a "ready" line. The library also gives the typed link shape (the capacity of any
//! window is computed from the same trace the router runs), typed queue-discipline parameters
//! (checked when the experiment file loads, not when a run starts) and the typed summary, and
//! tears down on drop, which makes cleanup on error and Ctrl-C one code path. The cost — the
//! router thread shares the runner's process — is nil on this 2-core machine, where the
//! scheduler sees threads either way; a crash of the runner takes the router with it, and the
//! next runner deletes the leftover namespaces by name ([`netns::sweep_stale`]).
//!
//! One run: check that the agent has what the scheme needs (a `receiver`) → start the agent
//! (agent schemes; it must register its congestion control first) → start the emulator with the
//! scheme's queue discipline (an agent whose `agent_args` name the run's namespaces or addresses,
//! such as a CNM listener in the sender's namespace, starts here instead) → set the scheme's sysctls → enable the scheme's receiver program
//! on the receiver's device → attach the per-ACK SRTT probe (tcp_probe, the scheme's flows) →
//! bind every receiver, start every sender → sample every `sample_interval_ms` until the
//! duration → stop traffic, read and detach the probe, read the receiver's counters and disable
//! it, stop the router and the agent (in that order) → compute metrics, write CSV/JSON/PNG.
//! Whatever fails, the guards detach the probe, disable the receiver, restore sysctls, stop the
//! agent by pid and delete the namespaces by name.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ccp_qdisc::{Limit, NANOS_PER_MS};
use ccp_router::{DirectionConfig, Emulator, FeedbackConfig, LinkShape, QdiscKind, RouterConfig, TopologyConfig};
use indicatif::{ProgressBar, ProgressStyle};

use crate::agent::{Agent, AgentLaunch};
use crate::config::{CrossSpec, FlowGroup, Loaded, Scenario};
use crate::echo::CeEcho;
use crate::error::{Error, Result};
use crate::link::Link;
use crate::metrics::agent_trace::parse_agent_trace;
use crate::metrics::bottleneck::{link_series, QueueGrid};
use crate::metrics::classify::{classify, elastic_at};
use crate::metrics::flows::{flow_metrics, FlowExtra, Tick};
use crate::metrics::indices::{jain, run_indices, Indices};
use crate::metrics::queue::QueueSamples;
use crate::metrics::Window;
use crate::output::{self, RunRecord};
use crate::receiver::{self, ReceiverHook};
use crate::scheme::{self, Cc, Scheme};
use crate::srtt::{self, SrttHistogram, SrttProbe};
use crate::traffic::{lock, Endpoints, FlowPlan, PlanKind, Role, Traffic};
use crate::{bursts, cancel, netns, plot};

/// Bytes per packet for buffer sizing in BDPs.
const MTU_BYTES: f64 = 1500.0;
/// A run whose emulator delivered packets later than this at p99 gets a warning.
const EMULATOR_LATE_WARN_MS: f64 = 10.0;
/// The bottleneck queue is sampled this often (the thesis's 10 ms `tc -s` samples).
const QUEUE_SAMPLE_MS: u64 = 10;
/// Default `--quick` duration when the file gives none.
const QUICK_DEFAULT_S: f64 = 30.0;

/// Choices made on the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub out: PathBuf,
    pub quick: bool,
    pub full_trace: bool,
    pub duration_s: Option<f64>,
    pub repetitions: Option<u32>,
    pub schemes: Vec<String>,
    pub links: Vec<String>,
    pub scenarios: Vec<String>,
    pub keep_packet_logs: bool,
    pub no_plots: bool,
    pub agent: Option<PathBuf>,
    pub realtime: bool,
    /// Draw no progress bar (tests, logs).
    pub quiet: bool,
}

/// The matrix an experiment expands to.
#[derive(Debug, Clone)]
pub struct Plan {
    pub links: Vec<Link>,
    pub schemes: Vec<Scheme>,
    pub scenarios: Vec<Scenario>,
    pub repetitions: u32,
}

impl Plan {
    /// Resolves links (writing generated traces under `out/traces`), builds the schemes and
    /// applies the command-line filters.
    pub fn new(l: &Loaded, o: &RunOptions) -> Result<Plan> {
        let x = &l.experiment;
        let mut links = crate::link::resolve(&x.links, &l.dir, &o.out.join("traces"))?;
        let mut schemes = x
            .schemes
            .iter()
            .map(|s| Scheme::from_spec(s).map_err(|m| Error::Run(format!("scheme {}: {m}", s.name))))
            .collect::<Result<Vec<_>>>()?;
        let mut scenarios = x.scenarios.clone();
        keep(&mut links, &o.links, |l| &l.name, "link")?;
        keep(&mut schemes, &o.schemes, |s| &s.name, "scheme")?;
        keep(&mut scenarios, &o.scenarios, |s| &s.name, "scenario")?;
        Ok(Plan { links, schemes, scenarios, repetitions: o.repetitions.unwrap_or(x.repetitions) })
    }

    /// Every run in order: link-major, so one link's schemes are compared under the same
    /// conditions close in time.
    pub fn runs(&self) -> Vec<(usize, usize, usize, u32)> {
        let mut v = Vec::new();
        for li in 0..self.links.len() {
            for si in 0..self.scenarios.len() {
                for ki in 0..self.schemes.len() {
                    for r in 0..self.repetitions {
                        v.push((li, si, ki, r));
                    }
                }
            }
        }
        v
    }
}

/// Keeps the items named in `wanted` (all when empty); an unknown name is an error listing the
/// known ones.
fn keep<T>(items: &mut Vec<T>, wanted: &[String], name: impl Fn(&T) -> &String, what: &str) -> Result<()> {
    if wanted.is_empty() {
        return Ok(());
    }
    for w in wanted {
        if !items.iter().any(|i| name(i) == w) {
            let known: Vec<&String> = items.iter().map(&name).collect();
            return Err(Error::Unavailable(format!("no {what} named {w:?} (known: {known:?})")));
        }
    }
    items.retain(|i| wanted.contains(name(i)));
    Ok(())
}

/// The traffic duration of a run on `link`.
pub fn duration_for(l: &Loaded, o: &RunOptions, link: &Link) -> f64 {
    let x = &l.experiment;
    match (o.full_trace, link.period_s, o.duration_s) {
        (true, Some(p), _) => p,
        (_, _, Some(d)) => d,
        _ if o.quick => x.quick_duration_s.unwrap_or(x.duration_s.min(QUICK_DEFAULT_S)),
        _ => x.duration_s,
    }
}

/// The propagation RTT of runs on `link`, ms: the link's own, or the network's.
pub fn rtt_ms(l: &Loaded, link: &Link) -> f64 {
    link.rtt_ms.unwrap_or(l.experiment.network.rtt_ms)
}

/// The buffer in packets: as given, or BDPs of the link's mean rate at the propagation RTT.
pub fn buffer_pkts(l: &Loaded, link: &Link) -> u32 {
    let n = &l.experiment.network;
    match (n.buffer_pkts, n.buffer_bdp) {
        (Some(p), _) => p,
        (None, Some(b)) => (b * link.mean_rate_bps / 8.0 * rtt_ms(l, link) / 1000.0 / MTU_BYTES).ceil().max(1.0) as u32,
        (None, None) => 1,
    }
}

/// The flows of one run: the scheme's, then the scenario's cross traffic.
pub fn flow_plans(
    l: &Loaded,
    scheme: &Scheme,
    scenario: &Scenario,
    link: &Link,
    duration_s: f64,
    agent_cc: &str,
) -> Vec<FlowPlan> {
    let x = &l.experiment;
    let secs = |s: f64| Duration::from_secs_f64(s.clamp(0.0, duration_s));
    let end = |stop: Option<f64>| secs(stop.unwrap_or(duration_s));
    let mut plans = Vec::new();
    let groups: &[FlowGroup] = scenario.flows.as_deref().unwrap_or(&x.flows);
    let mut n = 0;
    for (gi, g) in groups.iter().enumerate() {
        for i in 0..g.count {
            let start = g.start_s + f64::from(i) * g.stagger_s;
            if start < duration_s {
                plans.push(FlowPlan {
                    label: format!("{}#{n}", scheme.name),
                    role: Role::Scheme,
                    kind: PlanKind::Bulk {
                        cc: scheme.flow_cc(agent_cc, gi).to_string(),
                        receiver_cc: scheme.receiver_cc.clone(),
                        bytes: g.bytes,
                    },
                    start: secs(start),
                    stop: end(g.stop_s),
                });
            }
            n += 1;
        }
    }
    let rate =
        |mbps: Option<f64>, share: Option<f64>| mbps.map_or_else(|| share.unwrap_or(0.0) * link.mean_rate_bps, |m| m * 1e6);
    for (j, c) in scenario.cross.iter().enumerate() {
        let (kind, start, stop, count) = match c {
            CrossSpec::Cbr { rate_mbps, share, packet_bytes, on_ms, off_ms, start_s, stop_s } => (
                PlanKind::Udp {
                    rate_bps: rate(*rate_mbps, *share),
                    packet_bytes: *packet_bytes,
                    poisson_seed: None,
                    on_off: on_ms.zip(*off_ms).map(|(on, off)| (Duration::from_millis(on), Duration::from_millis(off))),
                },
                *start_s,
                *stop_s,
                1,
            ),
            CrossSpec::PoissonUdp { rate_mbps, share, packet_bytes, start_s, stop_s, seed } => (
                PlanKind::Udp {
                    rate_bps: rate(*rate_mbps, *share),
                    packet_bytes: *packet_bytes,
                    poisson_seed: Some(*seed),
                    on_off: None,
                },
                *start_s,
                *stop_s,
                1,
            ),
            CrossSpec::PoissonTcp { rate_mbps, share, mean_size_bytes, size_dist, cc, max_concurrent, start_s, stop_s, seed } => {
                (
                    PlanKind::PoissonTcp {
                        load_bps: rate(*rate_mbps, *share),
                        mean_size_bytes: *mean_size_bytes,
                        fixed_size: size_dist == "fixed",
                        cc: cc.clone(),
                        max_concurrent: *max_concurrent,
                        seed: *seed,
                    },
                    *start_s,
                    *stop_s,
                    1,
                )
            }
            CrossSpec::Tcp { cc, count, start_s, stop_s, .. } => {
                (PlanKind::Bulk { cc: cc.clone(), receiver_cc: None, bytes: None }, *start_s, *stop_s, *count)
            }
        };
        if start >= duration_s {
            continue;
        }
        for i in 0..count {
            let suffix = if count > 1 { format!("#{i}") } else { String::new() };
            plans.push(FlowPlan {
                label: format!("cross{j}-{}{suffix}", kind.type_name()),
                role: Role::Cross,
                kind: kind.clone(),
                start: secs(start),
                stop: end(stop),
            });
        }
    }
    plans
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
    RouterConfig { down, up, feedback: FeedbackConfig::default(), classes, log_csv: log, duration: None, realtime, loss: None }
}

/// The run's propagation delay classes, data direction: (label, one-way delay ns), one per
/// distinct delay (classes sharing a delay are one entry); empty without `network.class_delays`.
pub fn delay_classes(l: &Loaded) -> Vec<(String, u64)> {
    let n = &l.experiment.network;
    if n.class_delays.is_empty() {
        return Vec::new();
    }
    let default = (n.rtt_ms / 2.0 * NANOS_PER_MS as f64).round() as u64;
    let classes = ccp_router::classes::parse_all(&n.class_delays).expect("network.class_delays were validated at load");
    let mut out: Vec<(String, u64)> = vec![("default".to_string(), default)];
    for (c, spec) in classes.iter().zip(&n.class_delays) {
        let d = c.down.unwrap_or(default);
        let label = spec.split(':').next().unwrap_or(spec).to_string();
        match out.iter_mut().find(|(_, x)| *x == d) {
            Some((l, _)) => *l = format!("{l}+{label}"),
            None => out.push((label, d)),
        }
    }
    out
}

/// Where the router writes a run's per-packet log: on tmpfs when there is one. The router writes
/// it from its event loop, and on a disk that other work (builds) fills with dirty pages a write
/// can block in the kernel's writeback throttling for seconds, stalling the emulated link (seen
/// here: the router's delay error reached 1-4 s); tmpfs pages are never throttled.
fn packet_log_path(prefix: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    dir.join(format!("{prefix}-router.csv"))
}

/// Moves the packet log into the run's directory (`router.csv`) when it is to be kept, else
/// deletes it.
fn keep_or_remove_log(ctx: &RunContext<'_>, log: &Path) {
    if !log.exists() {
        return;
    }
    if ctx.options.keep_packet_logs || ctx.loaded.experiment.output.keep_packet_logs {
        let dest = ctx.dir.join("router.csv");
        if std::fs::rename(log, &dest).is_err() {
            if let Err(e) = std::fs::copy(log, &dest) {
                eprintln!("ccp-lab: keeping the packet log as {}: {e}", dest.display());
            }
        }
    }
    let _ = std::fs::remove_file(log);
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

/// Everything one run needs.
pub struct RunContext<'a> {
    pub loaded: &'a Loaded,
    pub options: &'a RunOptions,
    pub link: &'a Link,
    pub scenario: &'a Scenario,
    pub scheme: &'a Scheme,
    pub repetition: u32,
    pub dir: PathBuf,
    pub rel_dir: String,
}

/// What a run measured before metrics are computed.
struct Recorded {
    router_start: u64,
    traffic_start_ns: u64,
    plans: Vec<FlowPlan>,
    ticks: Vec<Tick>,
    extra: Vec<FlowExtra>,
    summary: ccp_router::Summary,
    agent_trace: Option<(PathBuf, u64)>,
    /// The per-ACK SRTT histogram and its skipped segments (no RTT yet, other ports).
    srtt: Option<(SrttHistogram, u64, u64)>,
}

/// Runs one cell of the matrix. Failures are recorded in the returned record; only an
/// interruption (Ctrl-C) is an error, so the matrix stops.
pub fn execute(ctx: &RunContext<'_>, progress: &dyn Fn(f64)) -> Result<RunRecord> {
    let began = Instant::now();
    let x = &ctx.loaded.experiment;
    let duration_s = duration_for(ctx.loaded, ctx.options, ctx.link);
    let warmup_s = x.warmup_s.min(duration_s / 2.0);
    let mut rec = RunRecord {
        link: ctx.link.name.clone(),
        scenario: ctx.scenario.name.clone(),
        scheme: ctx.scheme.name.clone(),
        repetition: ctx.repetition,
        scheme_description: ctx.scheme.describe(),
        link_source: ctx.link.source.clone(),
        duration_s,
        warmup_s,
        rtt_ms: rtt_ms(ctx.loaded, ctx.link),
        buffer_pkts: buffer_pkts(ctx.loaded, ctx.link),
        dir: ctx.rel_dir.clone(),
        ..RunRecord::default()
    };
    std::fs::create_dir_all(&ctx.dir).map_err(|e| Error::io(format!("creating {}", ctx.dir.display()), e))?;
    let result = record(ctx, &mut rec, duration_s, progress).and_then(|r| analyse(ctx, &mut rec, r, duration_s, warmup_s));
    rec.wall_time_s = began.elapsed().as_secs_f64();
    match result {
        Ok(()) => rec.ok = true,
        Err(Error::Interrupted) => {
            rec.error = Some("interrupted".into());
            output::write_json(&ctx.dir.join("run.json"), &rec)?;
            return Err(Error::Interrupted);
        }
        Err(e) => {
            rec.error = Some(e.to_string());
            if !rec.namespace_prefix.is_empty() {
                keep_or_remove_log(ctx, &packet_log_path(&rec.namespace_prefix));
            }
        }
    }
    output::write_json(&ctx.dir.join("run.json"), &rec)?;
    Ok(rec)
}

/// Sets up, runs the traffic and tears down; returns what was recorded.
fn record(ctx: &RunContext<'_>, rec: &mut RunRecord, duration_s: f64, progress: &dyn Fn(f64)) -> Result<Recorded> {
    let x = &ctx.loaded.experiment;
    let o = ctx.options;
    // Agent first: if its congestion control never appears, no namespace is created.
    let cc_name = x.agent.cc_name.clone().unwrap_or_else(netns::unique_cc_name);
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
        params: ctx.scheme.params.clone(),
        extra_args,
        cc_name: cc_name.clone(),
        ready_timeout: Duration::from_secs_f64(x.agent.ready_timeout_s),
        log: ctx.dir.join("agent.log"),
        trace: x.agent.trace_flows.then(|| ctx.dir.join("agent-trace.jsonl")),
    };
    // An agent whose arguments name the run's namespaces or addresses (a CNM listener inside the
    // sender's namespace) can only start once they exist; any other starts first.
    let after_namespaces = scheme::uses_placeholders(&ctx.scheme.agent_args);
    let mut agent = match &ctx.scheme.cc {
        Cc::Agent(algorithm) if !after_namespaces => Some(Agent::start(&launch(algorithm, ctx.scheme.agent_args.clone()))?),
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
    let cfg = router_config(ctx.loaded, ctx.link, &qdisc, rec.buffer_pkts, Some(log), o.realtime || x.router.realtime);
    let emu = Emulator::start(TopologyConfig::new(&prefix), cfg)?;
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
    let ends =
        Endpoints { sender_ns: topo.sender_ns(), receiver_ns: topo.receiver_ns(), receiver_addr: topo.config().receiver_addr };
    // The receiver's CE echo, registered before any flow so the listener can select it.
    let echo = if ctx.scheme.receiver_ce_echo { Some(CeEcho::register(&netns::unique_echo_name())?) } else { None };
    let scheme = match &echo {
        Some(e) => Scheme { receiver_cc: Some(e.name().to_string()), ..ctx.scheme.clone() },
        None => ctx.scheme.clone(),
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
        if let Some(a) = agent.as_mut() {
            a.check_alive()?;
        }
        if cancel::requested() {
            return Err(Error::Interrupted);
        }
        progress(traffic.t0().elapsed().as_secs_f64().min(duration_s));
        if next >= end {
            break;
        }
        next = (next + interval).min(end);
    }
    traffic.stop()?;
    if let Some(e) = traffic.first_error() {
        return Err(Error::Run(e));
    }
    let extra = traffic
        .states
        .iter()
        .map(|s| FlowExtra {
            short_flows: lock(&s.short_flows).clone(),
            skipped: s.skipped.load(Ordering::Relaxed),
            send_failures: s.send_failures.load(Ordering::Relaxed),
        })
        .collect();
    drop(traffic);
    let srtt = probe.map(SrttProbe::finish).transpose()?;
    rec.receiver = hook.map(ReceiverHook::finish);
    sysctls.restore();
    let summary = emu.stop()?;
    rec.ce_echo = echo.as_ref().map(CeEcho::counts);
    drop(echo);
    let agent_trace = agent.as_mut().and_then(|a| {
        a.stop();
        a.trace.clone().map(|t| (t, a.started_ns))
    });
    Ok(Recorded { router_start, traffic_start_ns, plans, ticks, extra, summary, agent_trace, srtt })
}

/// Computes the metrics of a recorded run and writes its outputs.
fn analyse(ctx: &RunContext<'_>, rec: &mut RunRecord, r: Recorded, duration_s: f64, warmup_s: f64) -> Result<()> {
    let x = &ctx.loaded.experiment;
    let w = Window {
        start_ns: r.traffic_start_ns + (warmup_s * 1e9) as u64,
        end_ns: r.traffic_start_ns + (duration_s * 1e9) as u64,
        bin_ns: x.sample_interval_ms * NANOS_PER_MS,
    };
    rec.window_s = [w.start_ns as f64 / 1e9, w.end_ns as f64 / 1e9];
    // How late the emulator delivered packets (its own measure): large values mean the machine
    // starved or blocked it and the run's link was not the declared one.
    rec.emulator_late_p99_ms = [&r.summary.down, &r.summary.up]
        .iter()
        .filter_map(|d| d.delay_error_ms.as_ref().map(|p| p.p99))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    // The thesis's metrics cover the whole run (its flow schedule starts with the traffic).
    let run_end_ns = r.traffic_start_ns + (duration_s * 1e9) as u64;
    let grid = QueueGrid { start_ns: r.traffic_start_ns, end_ns: run_end_ns, step_ns: QUEUE_SAMPLE_MS * NANOS_PER_MS };
    let log = packet_log_path(&rec.namespace_prefix);
    let file = File::open(&log).map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
    let classes = delay_classes(ctx.loaded);
    let delays: Vec<u64> = classes.iter().map(|c| c.1).collect();
    let parsed = link_series(BufReader::with_capacity(1 << 20, file), ctx.link, w, grid, &delays)
        .map_err(|e| Error::Run(format!("{}: {e}", log.display())));
    keep_or_remove_log(ctx, &log);
    let (lm, bins, series) = parsed?;
    rec.queue_10ms = Some(QueueSamples::of(&series.queue, QUEUE_SAMPLE_MS as f64));
    if let Some((h, no_rtt, other_port)) = &r.srtt {
        rec.srtt = Some(h.summary(*no_rtt, *other_port));
        output::write_file(&ctx.dir.join("srtt-histogram.csv"), &output::srtt_histogram_csv(h))?;
    }
    rec.indices = Some(run_indices(
        &r.plans,
        &r.ticks,
        (r.traffic_start_ns, run_end_ns),
        ctx.link.mean_rate_bps / 1e6,
        rtt_ms(ctx.loaded, ctx.link),
        rec.srtt.as_ref().and_then(|s| s.p99_ms),
        &r.summary.down.counts,
    ));
    rec.router = Some(r.summary);
    let (flows, points) = flow_metrics(&r.plans, &r.ticks, w, lm.capacity_mbps, &r.extra);
    let sum_role = |role: Role| flows.iter().filter(|f| f.role == Some(role)).map(|f| f.throughput_mbps).sum::<f64>();
    let scheme_tputs: Vec<f64> = flows.iter().filter(|f| f.role == Some(Role::Scheme)).map(|f| f.throughput_mbps).collect();
    rec.scheme_throughput_mbps = Some(sum_role(Role::Scheme));
    rec.scheme_share = (lm.capacity_mbps > 0.0).then(|| sum_role(Role::Scheme) / lm.capacity_mbps);
    rec.cross_throughput_mbps = r.plans.iter().any(|p| p.role == Role::Cross).then(|| sum_role(Role::Cross));
    rec.jain = jain(&scheme_tputs);
    output::write_file(&ctx.dir.join("link.csv"), &output::link_csv(&bins))?;
    output::write_file(&ctx.dir.join("flows.csv"), &output::flows_csv(&points))?;
    let shorts: Vec<(String, crate::traffic::ShortFlow)> =
        r.plans.iter().zip(&r.extra).flat_map(|(p, e)| e.short_flows.iter().map(|f| (p.label.clone(), *f))).collect();
    if !shorts.is_empty() {
        output::write_file(&ctx.dir.join("short-flows.csv"), &output::short_flows_csv(&shorts))?;
    }
    let mut class_points = Vec::new();
    let mut records = Vec::new();
    if let Some((trace, agent_start)) = &r.agent_trace {
        if let Ok(text) = std::fs::read_to_string(trace) {
            let (parsed, bad) = parse_agent_trace(&text, r.router_start, *agent_start);
            if bad > 0 {
                eprintln!("ccp-lab: {}: {bad} lines were not trace records", trace.display());
            }
            rec.agent_trace_records = Some(parsed.len());
            records = parsed;
            if let Some(spec) = &ctx.scheme.classify {
                let c = classify(&records, spec, w, |t| elastic_at(&r.plans, &r.extra, r.traffic_start_ns, t));
                output::write_file(&ctx.dir.join("classification.csv"), &output::classification_csv(&c.points))?;
                class_points = c.points.clone();
                rec.classification = Some(c);
            }
        }
    }
    // Congestion notifications, and the bursts of sized flows with the time between them.
    let router_cnms = rec.router.as_ref().map_or(0, |s| s.down.counts.qcn_notifications);
    rec.cnm = bursts::cnm_summary(router_cnms, &records, r.traffic_start_ns);
    let labels: Vec<(String, u64)> = classes.clone();
    let rs = bursts::RunSeries {
        plans: &r.plans,
        extra: &r.extra,
        ticks: &r.ticks,
        series: &series,
        step_ns: grid.step_ns,
        traffic_start_ns: r.traffic_start_ns,
        classes: &labels,
        agent: &records,
    };
    let rel = |t: u64| t.saturating_sub(r.traffic_start_ns) as f64 / 1e9;
    rec.bursts = bursts::bursts(&rs, (rel(w.start_ns), rel(w.end_ns)));
    if !classes.is_empty() {
        rec.window = Some(rs.phase(&[(rel(w.start_ns), rel(w.end_ns))]));
    }
    let detail = (rec.cnm.is_some() || rec.bursts.is_some() || !classes.is_empty()).then(|| {
        // The 10 ms queue samples as the mean (and the total's maximum) per time bin.
        let per_bin = |v: &[u32], max: bool| -> Vec<(f64, f64)> {
            let mut acc: std::collections::BTreeMap<u64, (f64, f64, u32)> = std::collections::BTreeMap::new();
            for (k, &q) in v.iter().enumerate() {
                let t = r.traffic_start_ns + k as u64 * grid.step_ns;
                let e = acc.entry(t / w.bin_ns.max(1)).or_insert((0.0, 0.0, 0));
                *e = (e.0 + f64::from(q), e.1.max(f64::from(q)), e.2 + 1);
            }
            acc.into_iter()
                .map(|(b, (sum, m, n))| ((b + 1) as f64 * w.bin_ns as f64 / 1e9, if max { m } else { sum / f64::from(n) }))
                .collect()
        };
        plot::RunDetail {
            queue: per_bin(&series.queue, false),
            queue_max: per_bin(&series.queue, true),
            queue_by_class: classes
                .iter()
                .zip(&series.queue_by_delay)
                .map(|((label, _), v)| (label.clone(), per_bin(v, false)))
                .collect(),
            cnms: rec.cnm.is_some().then(|| bursts::cnm_bins(&records, w.bin_ns, bins.len())),
        }
    });
    rec.link_metrics = Some(lm);
    rec.flows = flows;
    if !ctx.options.no_plots && x.output.plots {
        let title = format!(
            "{} — {} — {} — {} rep {}",
            ctx.loaded.name, ctx.link.name, ctx.scenario.name, ctx.scheme.name, ctx.repetition
        );
        if let Err(e) = plot::run_plot(&ctx.dir.join("run.png"), &title, &bins, &points, &class_points, detail.as_ref()) {
            eprintln!("ccp-lab: {e}");
        }
    }
    Ok(())
}

/// What a whole experiment produced.
#[derive(Debug)]
pub struct Outcome {
    pub records: Vec<RunRecord>,
    pub interrupted: bool,
}

impl Outcome {
    pub fn failed(&self) -> usize {
        self.records.iter().filter(|r| !r.ok).count()
    }
}

/// Runs the whole matrix, writing the summary after every run (so an interrupted experiment
/// keeps what it measured).
pub fn run_experiment(l: &Loaded, o: &RunOptions) -> Result<Outcome> {
    if !netns::have_privileges() {
        return Err(Error::Unavailable("ccp-lab run needs root (network namespaces, /dev/net/tun)".into()));
    }
    for p in netns::sweep_stale() {
        eprintln!("ccp-lab: removed namespaces {p}-* left by a runner that is gone");
    }
    std::fs::create_dir_all(&o.out).map_err(|e| Error::io(format!("creating {}", o.out.display()), e))?;
    output::write_file(&o.out.join("experiment.toml"), &l.text)?;
    let plan = Plan::new(l, o)?;
    let runs = plan.runs();
    let total: f64 = runs.iter().map(|&(li, ..)| duration_for(l, o, &plan.links[li])).sum();
    let bar = if o.quiet { ProgressBar::hidden() } else { ProgressBar::new(total.ceil() as u64) };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} s of traffic, eta {eta} — {msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut outcome = Outcome { records: Vec::new(), interrupted: false };
    let mut done = 0.0;
    for (i, &(li, si, ki, rep)) in runs.iter().enumerate() {
        let (link, scenario, scheme) = (&plan.links[li], &plan.scenarios[si], &plan.schemes[ki]);
        let rel_dir = format!("runs/{}/{}/{}/rep{rep}", link.name, scenario.name, scheme.name);
        let ctx =
            RunContext { loaded: l, options: o, link, scenario, scheme, repetition: rep, dir: o.out.join(&rel_dir), rel_dir };
        bar.set_message(format!("run {}/{}: {} · {} · {} #{rep}", i + 1, runs.len(), link.name, scenario.name, scheme.name));
        let base = done;
        let result = execute(&ctx, &|s| bar.set_position((base + s) as u64));
        done += duration_for(l, o, link);
        bar.set_position(done as u64);
        match result {
            Ok(rec) => {
                // A hidden bar (--no-progress, or stderr not a terminal) prints nothing.
                if o.quiet || bar.is_hidden() {
                    eprintln!("{}", run_line(&rec));
                } else {
                    bar.println(run_line(&rec));
                }
                outcome.records.push(rec);
            }
            Err(Error::Interrupted) => {
                outcome.interrupted = true;
                eprintln!("ccp-lab: interrupted; the current run was torn down");
                break;
            }
            Err(e) => return Err(e),
        }
        write_summary(l, o, &outcome.records)?;
    }
    bar.finish_and_clear();
    write_summary(l, o, &outcome.records)?;
    Ok(outcome)
}

/// One line per finished run for the terminal.
fn run_line(r: &RunRecord) -> String {
    let head = format!("{} · {} · {} #{}", r.link, r.scenario, r.scheme, r.repetition);
    match (&r.error, &r.link_metrics) {
        (Some(e), _) => format!("FAILED {head}: {}", e.lines().next().unwrap_or("")),
        (None, Some(m)) => {
            let q = m.queue_delay_ms.unwrap_or_default();
            let late = match r.emulator_late_p99_ms {
                Some(l) if l > EMULATOR_LATE_WARN_MS => {
                    format!(" — WARNING: emulator late by {l:.0} ms at p99 (machine overloaded; rerun)")
                }
                _ => String::new(),
            };
            format!(
                "ok     {head}: utilisation {:.1} %, queueing delay p50 {:.1} / p95 {:.1} ms, scheme {:.2} Mbit/s{}",
                m.utilisation * 100.0,
                q.p50,
                q.p95,
                r.scheme_throughput_mbps.unwrap_or(0.0),
                r.classification
                    .as_ref()
                    .and_then(|c| c.accuracy)
                    .map_or_else(String::new, |a| format!(", accuracy {:.1} %", a * 100.0)),
            ) + &late
        }
        (None, None) => format!("ok     {head}"),
    }
}

/// Writes summary.{csv,json}, averages.csv, runs.csv and the scatter plots.
pub fn write_summary(l: &Loaded, o: &RunOptions, records: &[RunRecord]) -> Result<()> {
    let rows = output::summarise(records);
    let avgs = output::averages(&rows);
    let index_rows = output::index_rows(records);
    let ecdfs = output::queue_ecdfs(records);
    output::write_file(&o.out.join("summary.csv"), &output::summary_csv(&rows))?;
    output::write_json(
        &o.out.join("summary.json"),
        &serde_json::json!({ "experiment": l.name, "rows": rows, "averages": avgs, "indices": index_rows }),
    )?;
    output::write_file(&o.out.join("averages.csv"), &output::averages_csv(&avgs))?;
    output::write_file(&o.out.join("runs.csv"), &output::runs_csv(records))?;
    output::write_file(&o.out.join("indices.csv"), &output::indices_csv(&index_rows))?;
    output::write_file(&o.out.join("queue-ecdf.csv"), &output::queue_ecdf_csv(&ecdfs))?;
    if records.iter().any(|r| r.bursts.is_some()) {
        output::write_file(&o.out.join("bursts.csv"), &output::bursts_csv(records))?;
    }
    if o.no_plots || !l.experiment.output.plots {
        return Ok(());
    }
    let plots = o.out.join("plots");
    std::fs::create_dir_all(&plots).map_err(|e| Error::io(format!("creating {}", plots.display()), e))?;
    let mut warned = false;
    let mut draw = |path: &Path, title: &str, pts: Vec<plot::ScatterPoint>| {
        if pts.is_empty() {
            return;
        }
        if let Err(e) = plot::scatter(path, title, &pts) {
            if !warned {
                eprintln!("ccp-lab: {e}");
                warned = true;
            }
        }
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for r in &rows {
        if seen.contains(&(r.link.as_str(), r.scenario.as_str())) {
            continue;
        }
        seen.push((&r.link, &r.scenario));
        let pts = rows
            .iter()
            .filter(|x| x.link == r.link && x.scenario == r.scenario)
            .filter_map(|x| Some((x.scheme.clone(), x.qdelay_p95_ms?, x.utilisation?)))
            .collect();
        let name = if r.scenario == "solo" { r.link.clone() } else { format!("{}-{}", r.link, r.scenario) };
        let title = format!("{} — {} — {}", l.name, r.link, r.scenario);
        draw(&plots.join(format!("scatter-{name}.png")), &title, pts);
        // The thesis's figures: indices per scheme over repetitions, and the queue's ECDF.
        let same = |x: &RunRecord| x.ok && x.link == r.link && x.scenario == r.scenario;
        let runs: Vec<plot::IndexRuns> = rows
            .iter()
            .filter(|x| x.link == r.link && x.scenario == r.scenario)
            .map(|x| {
                let of = |g: fn(&Indices) -> Option<f64>| -> Vec<f64> {
                    records
                        .iter()
                        .filter(|y| same(y) && y.scheme == x.scheme)
                        .filter_map(|y| y.indices.as_ref().and_then(g))
                        .collect()
                };
                (x.scheme.clone(), [of(|i| i.jain_ideal), of(|i| i.goodput_index), of(|i| i.latency_index)])
            })
            .collect();
        if runs.iter().any(|(_, v)| v.iter().any(|x| !x.is_empty())) {
            if let Err(e) = plot::indices(&plots.join(format!("indices-{name}.png")), &title, &runs) {
                eprintln!("ccp-lab: {e}");
            }
        }
        let series: Vec<(String, Vec<(f64, f64)>)> = ecdfs
            .iter()
            .filter(|((link, scenario, _), _)| *link == r.link && *scenario == r.scenario)
            .map(|((_, _, scheme), e)| (scheme.clone(), e.iter().map(|&(q, f)| (f64::from(q), f)).collect()))
            .collect();
        if !series.is_empty() {
            let t = format!("{title} — queue every {QUEUE_SAMPLE_MS} ms, pooled over runs");
            if let Err(e) = plot::ecdf(&plots.join(format!("queue-ecdf-{name}.png")), &t, "bottleneck queue (packets)", &series) {
                eprintln!("ccp-lab: {e}");
            }
        }
    }
    let mut scenarios: Vec<&str> = avgs.iter().map(|a| a.scenario.as_str()).collect();
    scenarios.dedup();
    for sc in scenarios {
        let pts = avgs
            .iter()
            .filter(|a| a.scenario == sc)
            .filter_map(|a| Some((a.scheme.clone(), a.qdelay_p95_ms?, a.utilisation?)))
            .collect();
        draw(&plots.join(format!("scatter-average-{sc}.png")), &format!("{} — average over links — {sc}", l.name), pts);
    }
    Ok(())
}
