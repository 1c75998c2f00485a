//! ccp-ebpf-bench: the kernel datapath against the kernel's own congestion control, every figure
//! a ratio against a baseline measured in the same run.
//!
//! - Bulk throughput of one flow over loopback and over a veth pair: `ccp` with the agent
//!   running Reno (10 ms reports, then per-RTT reports) versus the kernel's cubic and reno.
//! - BPF cost per ACK: `run_time_ns / run_cnt` of cong_control while `kernel.bpf_stats_enabled`
//!   is on (the accounting adds a little of its own), against the same figure for the kernel's
//!   own Reno registered as a BPF congestion control (`ccp_ebpf::reno_ref`: its cong_avoid is
//!   one kfunc call into tcp_reno_cong_avoid, so it costs the trampoline, the accounting and
//!   Reno's step; the kernel runs it on ACKs that may raise the window).
//! - Report latency from the ACK that closes a report to the agent decoding it (the agent's own
//!   histogram, same clock on both sides).
//! - Agent CPU with many concurrent flows at 10 ms reports, per report and per 1000 flows, and
//!   as a share of the CPU the whole machine spent.
//!
//! - Host CPU per Gbit/s (`--part host`, not part of `all`): 1, 100 and 1,000 bulk flows on the
//!   kernel's cubic and reno and on the eBPF datapath with the agent's, every CPU the machine
//!   spends over the bytes moved (`host.rs`).
//!
//! Needs root, iperf3 and a build of `ccp-agent` (use `--release` for both).

mod agent;
mod bulk_flows;
mod env;
mod flows;
mod host;
mod scale;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccp_bench_harness::figures::{mean, ratio};
use ccp_bench_harness::iperf;
use ccp_bench_harness::net::Path;
use ccp_bench_harness::process::process_cpu_s;
use clap::Parser;
use serde::Serialize;

use agent::{Agent, CC};
use ccp_ebpf::progstats;
use env::{machine_busy_s, sender_netns, BpfStats, NAMING};

#[derive(Debug, Parser)]
#[command(name = "ccp-ebpf-bench", about = "Benchmarks of the eBPF kernel datapath (needs root)")]
struct Args {
    /// The agent binary; default: ccp-agent next to this program.
    #[arg(long)]
    agent: Option<PathBuf>,
    /// Seconds per bulk flow.
    #[arg(long, default_value_t = 5)]
    seconds: u32,
    /// Runs of each bulk configuration, interleaved and averaged.
    #[arg(long, default_value_t = 2)]
    repeat: u32,
    /// Concurrent flows for the CPU measurement.
    #[arg(long, default_value_t = 1000)]
    flows: usize,
    /// Seconds of the many-flows run (the first two are warm-up).
    #[arg(long, default_value_t = 10)]
    flow_seconds: u32,
    /// The agent's `realtime_priority` (SCHED_FIFO; 0: normal scheduling).
    #[arg(long, default_value_t = 10)]
    realtime_priority: u8,
    /// What to run.
    #[arg(long, value_enum, default_value_t = Part::All)]
    part: Part,
    /// Concurrent flows of the scale run.
    #[arg(long, default_value_t = 100_000)]
    scale_flows: usize,
    /// Connections closed and replaced by new ones per second across the scale run's shards
    /// (new flows get new fids: past the slot count they meet live flows' home slots).
    #[arg(long, default_value_t = 0.0)]
    scale_churn_per_s: f64,
    /// Control slots of the scale run (a power of two; default: the flow count rounded up).
    #[arg(long)]
    scale_slots: Option<usize>,
    /// Flows per shard process (each holds one end of its flows; the open-file limit bounds it).
    #[arg(long, default_value_t = 9_000)]
    shard_flows: usize,
    /// Bulk flow counts of the host part, each run on every configuration.
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
    host_flows: Vec<usize>,
    /// Seconds of the host part's warm-up, then of its measured window, per run.
    #[arg(long, default_value_t = 2.0)]
    host_warmup_s: f64,
    #[arg(long, default_value_t = 6.0)]
    host_window_s: f64,
    /// The rate of the host part's held veth path, Mbit/s (below what every configuration
    /// reaches, so all move the same bytes).
    #[arg(long, default_value_t = 2000)]
    host_rate_mbps: u32,
    /// Paths of the host part.
    #[arg(long, value_delimiter = ',', default_value = "veth-held,veth,loopback")]
    host_paths: Vec<HostPath>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A `[datapath.ebpf]` line for every agent of the run, e.g. `wake_gap_us = 500`
    /// (repeatable): to measure what a setting trades.
    #[arg(long = "ebpf-setting", value_name = "KEY = VALUE")]
    ebpf_settings: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    All,
    /// The single bulk flows (throughput, BPF cost, latency).
    Bulk,
    /// The many concurrent flows (agent CPU).
    Flows,
    /// `--scale-flows` concurrent flows in shards of their own namespaces (control slots,
    /// agent CPU and memory per flow); not part of `all`.
    Scale,
    /// Host CPU per Gbit/s of many bulk flows, ccp against the kernel's own; not part of `all`.
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum HostPath {
    Loopback,
    Veth,
    VethHeld,
}

impl From<HostPath> for host::PathKind {
    fn from(p: HostPath) -> Self {
        match p {
            HostPath::Loopback => host::PathKind::Loopback,
            HostPath::Veth => host::PathKind::Veth,
            HostPath::VethHeld => host::PathKind::VethHeld,
        }
    }
}

impl Args {
    /// `[datapath.ebpf]` lines every agent of the run gets, plus `extra`.
    fn ebpf(&self, extra: &str) -> String {
        let settings: String = self.ebpf_settings.iter().map(|l| format!("{l}\n")).collect();
        format!("realtime_priority = {}\n{settings}{extra}", self.realtime_priority)
    }
}

#[derive(Debug, Default, Clone, Serialize)]
struct CcpRun {
    gbps: f64,
    ratio_vs_cubic: f64,
    ratio_vs_reno: f64,
    bpf_ns_per_ack: f64,
    /// bpf_ns_per_ack over the BPF-hosted kernel Reno's.
    bpf_ns_ratio_vs_bpf_reno: f64,
    acks: u64,
    latency_p50_us: u64,
    latency_p99_us: u64,
    reports: u64,
    agent_cpu_pct: f64,
}

#[derive(Debug, Default, Serialize)]
struct PathResult {
    path: &'static str,
    cubic_gbps: f64,
    reno_gbps: f64,
    /// The kernel's Reno as a BPF struct_ops: its throughput and its per-ACK program's cost.
    bpf_reno_gbps: f64,
    bpf_reno_ns_per_ack: f64,
    ccp_10ms: CcpRun,
    ccp_per_rtt: CcpRun,
}

#[derive(Debug, Default, Serialize)]
struct ManyFlows {
    flows: usize,
    window_s: f64,
    reports_per_s: f64,
    agent_cpu_pct_of_a_core: f64,
    agent_cpu_pct_per_1000_flows: f64,
    agent_us_per_report: f64,
    /// What 1000 flows would cost at a full 100 reports/s each, from the cost per report.
    agent_cpu_pct_per_1000_flows_at_100_reports_per_s: f64,
    agent_share_of_machine_cpu: f64,
    latency_p50_us: u64,
    latency_p99_us: u64,
    ring_drops: u64,
}

/// Sums of the ccp runs of one configuration.
#[derive(Default)]
struct Acc {
    gbps: Vec<f64>,
    run_ns: u64,
    acks: u64,
    p50: Vec<u64>,
    p99: Vec<u64>,
    reports: u64,
    cpu_s: f64,
    secs: f64,
}

/// One bulk flow on `ccp` with a fresh agent; accumulates into `acc`.
fn ccp_run(args: &Args, bin: &std::path::Path, path: &Path, port: u16, ebpf: &str, acc: &mut Acc) -> anyhow::Result<()> {
    let agent = Agent::start(bin, &args.ebpf(ebpf))?;
    let id = agent.cong_control_id().context("the agent did not log its programs")?;
    let stats = BpfStats::enable()?;
    let before = progstats::by_id(id).context("cong_control stats")?;
    let cpu0 = process_cpu_s(agent.pid());
    let t0 = Instant::now();
    let gbps = iperf::bulk(path, port, CC, args.seconds)?;
    acc.secs += t0.elapsed().as_secs_f64();
    acc.cpu_s += process_cpu_s(agent.pid()) - cpu0;
    let after = progstats::by_id(id).context("cong_control stats")?;
    drop(stats);
    let summary = agent.stop()?;
    acc.gbps.push(gbps);
    acc.run_ns += after.run_time_ns.saturating_sub(before.run_time_ns);
    acc.acks += after.run_cnt.saturating_sub(before.run_cnt);
    acc.p50.push(summary.latency_p50_us);
    acc.p99.push(summary.latency_p99_us);
    acc.reports += summary.reports;
    Ok(())
}

/// One bulk flow on the kernel's Reno registered as a BPF congestion control; accumulates its
/// throughput and its cong_avoid's run time into `acc`.
fn bpf_reno_run(args: &Args, path: &Path, port: u16, acc: &mut Acc) -> anyhow::Result<()> {
    let reference = ccp_ebpf::reno_ref::RenoReference::register()?;
    let stats = BpfStats::enable()?;
    let before = reference.cong_avoid_stats().context("reno_ref stats")?;
    acc.gbps.push(iperf::bulk(path, port, ccp_ebpf::reno_ref::NAME, args.seconds)?);
    let after = reference.cong_avoid_stats().context("reno_ref stats")?;
    drop(stats);
    acc.run_ns += after.run_time_ns.saturating_sub(before.run_time_ns);
    acc.acks += after.run_cnt.saturating_sub(before.run_cnt);
    Ok(())
}

fn finish(acc: &Acc, cubic: f64, reno: f64, bpf_reno_ns: f64) -> CcpRun {
    let gbps = mean(&acc.gbps);
    let ns = ratio(acc.run_ns as f64, acc.acks as f64);
    CcpRun {
        gbps,
        ratio_vs_cubic: ratio(gbps, cubic),
        ratio_vs_reno: ratio(gbps, reno),
        bpf_ns_per_ack: ns,
        bpf_ns_ratio_vs_bpf_reno: ratio(ns, bpf_reno_ns),
        acks: acc.acks,
        latency_p50_us: acc.p50.iter().copied().max().unwrap_or(0),
        latency_p99_us: acc.p99.iter().copied().max().unwrap_or(0),
        reports: acc.reports,
        agent_cpu_pct: ratio(100.0 * acc.cpu_s, acc.secs),
    }
}

fn bulk(args: &Args, bin: &std::path::Path, path: &Path, port: u16) -> anyhow::Result<PathResult> {
    let _server = iperf::Server::start(path, port)?;
    let (mut cubic, mut reno) = (Vec::new(), Vec::new());
    let (mut ms10, mut rtt, mut bpf_reno) = (Acc::default(), Acc::default(), Acc::default());
    for rep in 0..args.repeat {
        eprintln!("[{}] run {}/{}: cubic, reno, BPF reno, ccp (10 ms), ccp (per RTT)", path.label, rep + 1, args.repeat);
        cubic.push(iperf::bulk(path, port, "cubic", args.seconds)?);
        reno.push(iperf::bulk(path, port, "reno", args.seconds)?);
        bpf_reno_run(args, path, port, &mut bpf_reno)?;
        ccp_run(args, bin, path, port, "", &mut ms10)?;
        // A table of its own after the [datapath.ebpf] keys.
        ccp_run(args, bin, path, port, "[reports]\nper_rtt = true", &mut rtt)?;
    }
    let (c, r) = (mean(&cubic), mean(&reno));
    let bpf_reno_ns = ratio(bpf_reno.run_ns as f64, bpf_reno.acks as f64);
    Ok(PathResult {
        path: path.label,
        cubic_gbps: c,
        reno_gbps: r,
        bpf_reno_gbps: mean(&bpf_reno.gbps),
        bpf_reno_ns_per_ack: bpf_reno_ns,
        ccp_10ms: finish(&ms10, c, r, bpf_reno_ns),
        ccp_per_rtt: finish(&rtt, c, r, bpf_reno_ns),
    })
}

fn many_flows(args: &Args, bin: &std::path::Path) -> anyhow::Result<ManyFlows> {
    ccp_bench_harness::tcp::raise_fd_limit(args.flows)?;
    let path = Path::loopback(&NAMING, "many")?;
    let ns = sender_netns(&path)?;
    let agent = Agent::start(bin, &args.ebpf(""))?;
    let pins = agent::pin_dir();
    let total = Duration::from_secs(u64::from(args.flow_seconds.max(4)));
    let n = args.flows;
    eprintln!("[many] {n} flows for {} s", total.as_secs());
    // Two segments every 10 ms: the receiver acknowledges each burst at once (no delayed ACK
    // wait), so every flow has an ACK in every 10 ms report interval.
    let gen = std::thread::spawn(move || flows::run(&ns, n, CC, total, Duration::from_millis(10), 2 * 1448));
    std::thread::sleep(Duration::from_secs(2));
    let (cpu0, busy0, rec0, t0) =
        (process_cpu_s(agent.pid()), machine_busy_s(), ccp_ebpf::instance::pinned_counters(&pins)?, Instant::now());
    std::thread::sleep(total - Duration::from_secs(3));
    let (cpu1, busy1, rec1, window) =
        (process_cpu_s(agent.pid()), machine_busy_s(), ccp_ebpf::instance::pinned_counters(&pins)?, t0.elapsed().as_secs_f64());
    gen.join().map_err(|_| anyhow::anyhow!("the flow generator panicked"))??;
    let summary = agent.stop()?;
    let cpu = cpu1 - cpu0;
    let records = rec1.records.saturating_sub(rec0.records) as f64;
    let pct = 100.0 * cpu / window;
    Ok(ManyFlows {
        flows: n,
        window_s: window,
        reports_per_s: records / window,
        agent_cpu_pct_of_a_core: pct,
        agent_cpu_pct_per_1000_flows: pct * 1000.0 / n.max(1) as f64,
        agent_us_per_report: ratio(cpu * 1e6, records),
        agent_cpu_pct_per_1000_flows_at_100_reports_per_s: ratio(cpu, records) * 100_000.0 * 100.0,
        agent_share_of_machine_cpu: ratio(cpu, busy1 - busy0),
        latency_p50_us: summary.latency_p50_us,
        latency_p99_us: summary.latency_p99_us,
        ring_drops: rec1.ring_drops,
    })
}

fn print_path(r: &PathResult) {
    println!(
        "{} bulk flow: kernel cubic {:.2} Gbit/s, kernel reno {:.2} Gbit/s; kernel reno as BPF {:.2} Gbit/s, \
         {:.0} ns per cong_avoid",
        r.path, r.cubic_gbps, r.reno_gbps, r.bpf_reno_gbps, r.bpf_reno_ns_per_ack
    );
    for (label, c) in [("ccp + agent reno, 10 ms reports", &r.ccp_10ms), ("ccp + agent reno, per-RTT reports", &r.ccp_per_rtt)] {
        println!(
            "  {label}: {:.2} Gbit/s = {:.3} x cubic, {:.3} x reno; BPF {:.0} ns/ACK ({:.2} x BPF reno) over {} \
             ACKs; report latency p50 {} us, p99 {} us ({} reports); agent CPU {:.1}% of a core",
            c.gbps,
            c.ratio_vs_cubic,
            c.ratio_vs_reno,
            c.bpf_ns_per_ack,
            c.bpf_ns_ratio_vs_bpf_reno,
            c.acks,
            c.latency_p50_us,
            c.latency_p99_us,
            c.reports,
            c.agent_cpu_pct
        );
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !ccp_ebpf::is_root() {
        anyhow::bail!("ccp-ebpf-bench needs root (BPF, network namespaces)");
    }
    let bin = match &args.agent {
        Some(b) => b.clone(),
        None => std::env::current_exe()?.with_file_name("ccp-agent"),
    };
    anyhow::ensure!(
        bin.exists(),
        "{} not found: build ccp-agent (cargo build --release -p ccp-agent) or pass --agent",
        bin.display()
    );
    let mut out = serde_json::Map::new();
    if args.part == Part::All || args.part == Part::Bulk {
        let lo = bulk(&args, &bin, &Path::loopback(&NAMING, "bulk")?, 5311)?;
        let veth = bulk(&args, &bin, &Path::veth(&NAMING, "bulk", None)?, 5312)?;
        print_path(&lo);
        print_path(&veth);
        out.insert("loopback".into(), serde_json::to_value(&lo)?);
        out.insert("veth".into(), serde_json::to_value(&veth)?);
    }
    if args.part == Part::Host {
        anyhow::ensure!(
            args.host_window_s > 0.0 && args.host_warmup_s >= 0.0 && !args.host_flows.is_empty() && args.repeat > 0,
            "the host part needs a positive --host-window-s, flow counts and --repeat"
        );
        let plan = host::Plan {
            flows: args.host_flows.clone(),
            paths: args.host_paths.iter().map(|&p| p.into()).collect(),
            warmup_s: args.host_warmup_s,
            window_s: args.host_window_s,
            repeat: args.repeat,
            held_rate_mbps: args.host_rate_mbps,
        };
        let h = host::run(&bin, &args.ebpf(""), &plan)?;
        host::print(&h);
        out.insert("host".into(), serde_json::to_value(&h)?);
    } else if args.part == Part::Scale {
        let s = scale::run(
            &bin,
            &scale::Plan {
                flows: args.scale_flows,
                shard: args.shard_flows,
                seconds: args.flow_seconds,
                churn_per_s: args.scale_churn_per_s,
                slots: args.scale_slots,
            },
            &args.ebpf(""),
        )?;
        scale::print(&s);
        out.insert("scale".into(), serde_json::to_value(&s)?);
    } else if args.part != Part::Bulk {
        let many = many_flows(&args, &bin)?;
        print_many(&many);
        out.insert("many_flows".into(), serde_json::to_value(&many)?);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&out)?)?;
    }
    Ok(())
}

fn print_many(many: &ManyFlows) {
    println!(
        "{} concurrent flows, 10 ms reports: {:.0} reports/s; agent CPU {:.1}% of a core ({:.1}% per 1000 flows, \
         {:.2} us per report, so {:.0}% of a core for 1000 flows at 100 reports/s each; {:.1}% of all CPU the machine \
         spent); report latency p50 {} us, p99 {} us; ring drops {}",
        many.flows,
        many.reports_per_s,
        many.agent_cpu_pct_of_a_core,
        many.agent_cpu_pct_per_1000_flows,
        many.agent_us_per_report,
        many.agent_cpu_pct_per_1000_flows_at_100_reports_per_s,
        100.0 * many.agent_share_of_machine_cpu,
        many.latency_p50_us,
        many.latency_p99_us,
        many.ring_drops
    );
}
