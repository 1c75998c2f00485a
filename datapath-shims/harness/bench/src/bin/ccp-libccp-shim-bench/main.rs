//! ccp-libccp-shim-bench: an unmodified portus agent steering kernel flows through the shim,
//! against the kernel's own Reno and against ccp-agent's Reno on the native eBPF path, every
//! figure a ratio between configurations measured in the same run.
//!
//! For each path (loopback; a veth pair held at 1 Gbit/s by a TBF) and each repetition, one
//! bulk iperf3 flow runs on, in turn: the kernel's `reno`; `ccp-agent` (Reno, eBPF datapath);
//! `ccp-libccp-shim` driven by generic_cong_avoid 0.4.0's `reno` (portus 0.7). It reports mean
//! goodput and the ratios, and the shim's CPU time per 10,000 ACKs it ran through libccp (with
//! the portus agent's alongside).
//!
//! Needs root, iperf3, the portus binaries (scripts/setup.sh) and builds of `ccp-agent` and
//! `ccp-libccp-shim` (use `--release` for all):
//!
//! ```sh
//! cargo build --release -p ccp-agent -p ccp-ebpf-libccp -p ccp-bench-harness
//! sudo target/release/ccp-libccp-shim-bench --repeat 3
//! ```
//!
//! This binary does not link libccp (it runs the shim as a process).

mod procs;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use ccp_bench_harness::figures::{mean, ratio};
use ccp_bench_harness::iperf;
use ccp_bench_harness::net::{Naming, Path};
use clap::Parser;
use serde::Serialize;

use procs::{start_agent, ShimPair};

/// This benchmark's namespaces, devices and subnet (ccp-ebpf-bench's never collide with them).
const NAMING: Naming = Naming { netns: "ccpshimbench", dev: "ccpsb", subnet: "10.203.0" };

#[derive(Debug, Parser)]
#[command(name = "ccp-libccp-shim-bench", about = "portus via ccp-libccp-shim vs kernel Reno vs ccp-agent (needs root)")]
struct Args {
    /// Directory holding ccp-agent and ccp-libccp-shim; default: this program's.
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Directory holding generic_cong_avoid's `reno`; default: CCP_PORTUS_BIN_DIR, else
    /// $HOME/.cache/ccp-agent/portus/bin (where scripts/setup.sh installs it).
    #[arg(long)]
    portus_dir: Option<PathBuf>,
    /// Seconds per bulk flow.
    #[arg(long, default_value_t = 8)]
    seconds: u32,
    /// Runs of each configuration, interleaved and averaged.
    #[arg(long, default_value_t = 2)]
    repeat: u32,
    /// The veth's rate, Mbit/s.
    #[arg(long, default_value_t = 1000)]
    veth_mbps: u32,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Default, Clone, Serialize)]
struct PathResult {
    path: String,
    kernel_reno_gbps: f64,
    agent_reno_gbps: f64,
    portus_reno_gbps: f64,
    /// portus-through-shim / kernel reno.
    ratio_portus_vs_kernel: f64,
    /// portus-through-shim / ccp-agent on the native path.
    ratio_portus_vs_agent: f64,
    ratio_agent_vs_kernel: f64,
    /// The shim's CPU time per 10,000 ACK records it ran through libccp, ms.
    shim_cpu_ms_per_10k_acks: f64,
    /// The portus agent's, per 10,000 of the same ACKs, ms.
    portus_cpu_ms_per_10k_acks: f64,
    /// The shim's share of one CPU during the flows, %.
    shim_cpu_pct: f64,
    /// The shim's share of one CPU with no flow (its 1 ms drain timer and 100 ms tick), %.
    shim_idle_cpu_pct: f64,
    /// shim_cpu_ms_per_10k_acks less what the shim spends idle over the same time, ms.
    shim_cpu_ms_per_10k_acks_net_of_idle: f64,
    acks_per_s: f64,
    acks: u64,
    wakeups: u64,
    ring_drops: u64,
    invoke_errors: u64,
    control_writes: u64,
    reports: u64,
}

struct Bins {
    agent: PathBuf,
    shim: PathBuf,
    portus_reno: PathBuf,
}

fn bins(args: &Args) -> anyhow::Result<Bins> {
    let dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?.parent().context("this program's directory")?.to_path_buf(),
    };
    let portus =
        args.portus_dir.clone().or_else(|| std::env::var_os("CCP_PORTUS_BIN_DIR").map(PathBuf::from)).unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"))
                .join(".cache/ccp-agent/portus/bin")
        });
    let b = Bins { agent: dir.join("ccp-agent"), shim: dir.join("ccp-libccp-shim"), portus_reno: portus.join("reno") };
    for (p, hint) in [
        (&b.agent, "cargo build --release -p ccp-agent"),
        (&b.shim, "cargo build --release -p ccp-ebpf-libccp"),
        (&b.portus_reno, "scripts/setup.sh (generic_cong_avoid 0.4.0)"),
    ] {
        anyhow::ensure!(p.is_file(), "{} is missing: {hint}", p.display());
    }
    Ok(b)
}

#[derive(Default)]
struct ShimAcc {
    gbps: Vec<f64>,
    shim_cpu_s: f64,
    shim_idle_cpu_s: f64,
    idle_secs: f64,
    portus_cpu_s: f64,
    secs: f64,
    acks: u64,
    wakeups: u64,
    ring_drops: u64,
    invoke_errors: u64,
    control_writes: u64,
    reports: u64,
}

fn shim_run(args: &Args, b: &Bins, path: &Path, port: u16, cc: &str, acc: &mut ShimAcc) -> anyhow::Result<()> {
    let pair = ShimPair::start(&b.shim, &b.portus_reno, cc)?;
    // What the shim costs with nothing to do, so the per-ACK figure can be read net of it.
    let (idle0, t_idle) = (pair.shim.cpu_s(), Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(2));
    acc.shim_idle_cpu_s += pair.shim.cpu_s() - idle0;
    acc.idle_secs += t_idle.elapsed().as_secs_f64();
    let (shim0, portus0) = (pair.shim.cpu_s(), pair.portus.cpu_s());
    let t0 = Instant::now();
    let gbps = iperf::bulk(path, port, cc, args.seconds)?;
    acc.secs += t0.elapsed().as_secs_f64();
    acc.shim_cpu_s += pair.shim.cpu_s() - shim0;
    acc.portus_cpu_s += pair.portus.cpu_s() - portus0;
    let stats = pair.stop()?;
    acc.gbps.push(gbps);
    acc.acks += stats.acks;
    acc.wakeups += stats.wakeups;
    acc.ring_drops += stats.ring_drops;
    acc.invoke_errors += stats.invoke_errors;
    acc.control_writes += stats.control_writes;
    acc.reports += stats.reports;
    Ok(())
}

fn bench_path(args: &Args, b: &Bins, path: &Path, port: u16) -> anyhow::Result<PathResult> {
    let _server = iperf::Server::start(path, port)?;
    let tag = std::process::id() % 100_000;
    let (agent_cc, shim_cc) = (format!("ccpab{tag}"), format!("ccpsb{tag}"));
    let (mut kernel, mut agent) = (Vec::new(), Vec::new());
    let mut shim = ShimAcc::default();
    for rep in 0..args.repeat {
        eprintln!("[{}] run {}/{}: kernel reno, ccp-agent reno, portus reno via the shim", path.label, rep + 1, args.repeat);
        kernel.push(iperf::bulk(path, port, "reno", args.seconds)?);
        let a = start_agent(&b.agent, &agent_cc)?;
        agent.push(iperf::bulk(path, port, &agent_cc, args.seconds)?);
        a.stop()?;
        shim_run(args, b, path, port, &shim_cc, &mut shim)?;
    }
    let (k, a, p) = (mean(&kernel), mean(&agent), mean(&shim.gbps));
    let per_10k = |cpu_s: f64| if shim.acks > 0 { cpu_s * 1e3 * 1e4 / shim.acks as f64 } else { 0.0 };
    let idle_share = ratio(shim.shim_idle_cpu_s, shim.idle_secs);
    Ok(PathResult {
        path: path.label.to_string(),
        kernel_reno_gbps: k,
        agent_reno_gbps: a,
        portus_reno_gbps: p,
        ratio_portus_vs_kernel: ratio(p, k),
        ratio_portus_vs_agent: ratio(p, a),
        ratio_agent_vs_kernel: ratio(a, k),
        shim_cpu_ms_per_10k_acks: per_10k(shim.shim_cpu_s),
        portus_cpu_ms_per_10k_acks: per_10k(shim.portus_cpu_s),
        shim_cpu_pct: ratio(100.0 * shim.shim_cpu_s, shim.secs),
        shim_idle_cpu_pct: 100.0 * idle_share,
        shim_cpu_ms_per_10k_acks_net_of_idle: per_10k((shim.shim_cpu_s - idle_share * shim.secs).max(0.0)),
        acks_per_s: ratio(shim.acks as f64, shim.secs),
        acks: shim.acks,
        wakeups: shim.wakeups,
        ring_drops: shim.ring_drops,
        invoke_errors: shim.invoke_errors,
        control_writes: shim.control_writes,
        reports: shim.reports,
    })
}

fn print(r: &PathResult) {
    println!(
        "{}: kernel reno {:.3} Gbit/s, ccp-agent reno (eBPF) {:.3} Gbit/s, portus reno via ccp-libccp-shim {:.3} Gbit/s",
        r.path, r.kernel_reno_gbps, r.agent_reno_gbps, r.portus_reno_gbps
    );
    println!(
        "  ratios: portus/kernel {:.2}x, portus/ccp-agent {:.2}x, ccp-agent/kernel {:.2}x",
        r.ratio_portus_vs_kernel, r.ratio_portus_vs_agent, r.ratio_agent_vs_kernel
    );
    println!(
        "  shim CPU {:.2} ms per 10k ACKs ({:.2} net of its idle {:.2} % of a CPU; {:.1} % of a CPU at {:.0} ACKs/s); \
         portus {:.3} ms per 10k ACKs; {} ACKs, {} wakeups, {} ring drops, {} invoke errors, {} commands, {} reports",
        r.shim_cpu_ms_per_10k_acks,
        r.shim_cpu_ms_per_10k_acks_net_of_idle,
        r.shim_idle_cpu_pct,
        r.shim_cpu_pct,
        r.acks_per_s,
        r.portus_cpu_ms_per_10k_acks,
        r.acks,
        r.wakeups,
        r.ring_drops,
        r.invoke_errors,
        r.control_writes,
        r.reports
    );
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(ccp_ebpf::is_root(), "needs root (BPF struct_ops, network namespaces)");
    let b = bins(&args)?;
    let tag = (std::process::id() % 100_000).to_string();
    let lo = bench_path(&args, &b, &Path::loopback(&NAMING, &tag)?, 5321)?;
    let veth = bench_path(&args, &b, &Path::veth(&NAMING, &tag, Some(args.veth_mbps))?, 5322)?;
    print(&lo);
    print(&veth);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&[&lo, &veth])?)?;
    }
    Ok(())
}
