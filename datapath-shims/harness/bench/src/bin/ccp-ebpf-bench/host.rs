//! Host CPU per Gbit/s: what a host pays to have its flows steered by ccp-agent instead of the
//! kernel's own congestion control, the figure an operator decides on.
//!
//! N bulk flows (1, 100 and 1,000 by default, [`crate::bulk_flows`]) run on each configuration
//! in turn, repetitions interleaved: the kernel's cubic and reno, and the eBPF datapath with the
//! agent running reno and cubic (its defaults otherwise: 10 ms reports). Over a window after a
//! warm-up, the whole machine's busy CPU time (`/proc/stat`: every core, user, system, irq and
//! softirq — sender, receiver, agent and the network stack alike) is divided by the bytes
//! received: CPU milliseconds per Gbit moved. The agent's own share is its utime + stime over
//! the same window. Each ccp configuration is judged against the kernel's same algorithm.
//!
//! Three paths: loopback and a veth pair between two namespaces, both as fast as the CPUs go (so
//! a costlier configuration shows as less throughput for the same, saturated, CPU), and the veth
//! pair held at a rate by a TBF below what any configuration reaches, where every configuration
//! moves the same bytes and a costlier one shows as more CPU.

use std::net::Ipv4Addr;
use std::path::Path as FsPath;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccp_bench_harness::figures::{median, ratio};
use ccp_bench_harness::net::Path;
use ccp_bench_harness::process::process_cpu_s;
use ccp_ebpf::netns::Netns;
use serde::Serialize;

use crate::agent::{Agent, CC};
use crate::bulk_flows::BulkFlows;
use crate::env::{machine_busy_s, NAMING};

/// One way of running the flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Config {
    KernelCubic,
    KernelReno,
    /// The eBPF datapath, the agent running this algorithm.
    CcpReno,
    CcpCubic,
}

impl Config {
    pub const ALL: [Config; 4] = [Config::KernelCubic, Config::KernelReno, Config::CcpReno, Config::CcpCubic];

    pub fn key(self) -> &'static str {
        match self {
            Config::KernelCubic => "kernel_cubic",
            Config::KernelReno => "kernel_reno",
            Config::CcpReno => "ccp_reno",
            Config::CcpCubic => "ccp_cubic",
        }
    }

    /// The algorithm: the kernel's congestion control, or the agent's on the eBPF datapath.
    fn algorithm(self) -> &'static str {
        match self {
            Config::KernelCubic | Config::CcpCubic => "cubic",
            Config::KernelReno | Config::CcpReno => "reno",
        }
    }

    fn is_ccp(self) -> bool {
        self.anchor().is_some()
    }

    /// The kernel configuration a ccp one is judged against.
    pub fn anchor(self) -> Option<Config> {
        match self {
            Config::CcpReno => Some(Config::KernelReno),
            Config::CcpCubic => Some(Config::KernelCubic),
            _ => None,
        }
    }
}

/// The paths the flows run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    Loopback,
    Veth,
    /// The veth pair with a TBF at the plan's rate on the sender's side.
    VethHeld,
}

impl PathKind {
    pub fn key(self) -> &'static str {
        match self {
            PathKind::Loopback => "loopback",
            PathKind::Veth => "veth",
            PathKind::VethHeld => "veth_held",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub flows: Vec<usize>,
    pub paths: Vec<PathKind>,
    pub warmup_s: f64,
    pub window_s: f64,
    pub repeat: u32,
    /// The TBF's rate on the held veth path, Mbit/s.
    pub held_rate_mbps: u32,
}

/// One run's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    pub gbps: f64,
    /// Busy CPU time of the whole machine over the window, per second: cores kept busy.
    pub cores_busy: f64,
    pub cpu_ms_per_gbit: f64,
    /// The agent's CPU time over the machine's busy time (0 for the kernel's own).
    pub agent_share: f64,
    pub agent_cpu_ms_per_gbit: f64,
    /// Segments the sender retransmitted over the window, per Gbit moved.
    pub retrans_per_gbit: f64,
}

/// One path × flow count × configuration: the runs and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub path: PathKind,
    pub flows: usize,
    pub config: Config,
    pub gbps: f64,
    pub cpu_ms_per_gbit: f64,
    pub cores_busy: f64,
    pub agent_share: f64,
    pub agent_cpu_ms_per_gbit: f64,
    pub retrans_per_gbit: f64,
    pub runs: Vec<Run>,
}

#[derive(Debug, Serialize)]
pub struct Host {
    pub plan: Plan,
    pub cpus: usize,
    pub cells: Vec<Cell>,
}

/// `Tcp: RetransSegs` of the namespace the calling thread is in.
fn retrans_segs() -> u64 {
    // /proc/net follows the process's namespace; /proc/thread-self/net this thread's.
    let Ok(snmp) = std::fs::read_to_string("/proc/thread-self/net/snmp") else { return 0 };
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(names), Some(values)) = (tcp.next(), tcp.next()) else { return 0 };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RetransSegs")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

fn open(path: &Path) -> anyhow::Result<(Netns, Netns, Ipv4Addr)> {
    let ns = |n: &str| Netns::open(FsPath::new("/run/netns").join(n).as_path()).with_context(|| format!("namespace {n}"));
    let addr: Ipv4Addr = path.receiver_addr.parse().context("the receiver's address")?;
    Ok((ns(&path.sender)?, ns(&path.receiver)?, addr))
}

/// One run of `n` flows on `config` over `path`.
fn run_one(bin: &FsPath, ebpf: &str, path: &Path, n: usize, config: Config, plan: &Plan) -> anyhow::Result<Run> {
    let (sender, receiver, addr) = open(path)?;
    let agent = if config.is_ccp() { Some(Agent::start_running(bin, config.algorithm(), ebpf)?) } else { None };
    let cc = if config.is_ccp() { CC } else { config.algorithm() };
    let agent_cpu = || agent.as_ref().map_or(0.0, |a| process_cpu_s(a.pid()));
    let retrans = || sender.run(retrans_segs).unwrap_or(0);
    let flows = BulkFlows::start(&sender, &receiver, addr, n, cc)?;
    std::thread::sleep(Duration::from_secs_f64(plan.warmup_s));
    let (b0, busy0, a0, r0, t0) = (flows.received_bytes(), machine_busy_s(), agent_cpu(), retrans(), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(plan.window_s));
    let (b1, busy1, a1, r1, secs) =
        (flows.received_bytes(), machine_busy_s(), agent_cpu(), retrans(), t0.elapsed().as_secs_f64());
    flows.stop()?;
    if let Some(a) = agent {
        a.stop_log()?;
    }
    let gbit = (b1 - b0) as f64 * 8.0 / 1e9;
    let busy = busy1 - busy0;
    let agent_s = a1 - a0;
    Ok(Run {
        gbps: gbit / secs,
        cores_busy: busy / secs,
        cpu_ms_per_gbit: ratio(busy * 1e3, gbit),
        agent_share: ratio(agent_s, busy),
        agent_cpu_ms_per_gbit: ratio(agent_s * 1e3, gbit),
        retrans_per_gbit: ratio(r1.saturating_sub(r0) as f64, gbit),
    })
}

fn make_path(kind: PathKind, plan: &Plan) -> anyhow::Result<Path> {
    match kind {
        PathKind::Loopback => Path::loopback(&NAMING, "host"),
        PathKind::Veth => Path::veth(&NAMING, "host", None),
        PathKind::VethHeld => Path::veth(&NAMING, "host", Some(plan.held_rate_mbps)),
    }
}

pub fn run(bin: &FsPath, ebpf: &str, plan: &Plan) -> anyhow::Result<Host> {
    let most = plan.flows.iter().copied().max().unwrap_or(1);
    ccp_bench_harness::tcp::raise_fd_limit(most)?;
    let mut cells = Vec::new();
    for &kind in &plan.paths {
        let path = make_path(kind, plan)?;
        for &n in &plan.flows {
            let mut runs: Vec<Vec<Run>> = vec![Vec::new(); Config::ALL.len()];
            for rep in 0..plan.repeat {
                for (i, &config) in Config::ALL.iter().enumerate() {
                    eprintln!("[host] {} {n} flows, run {}/{}: {}", kind.key(), rep + 1, plan.repeat, config.key());
                    let r = run_one(bin, ebpf, &path, n, config, plan)
                        .with_context(|| format!("{} flows on {} over {}", n, config.key(), kind.key()))?;
                    runs[i].push(r);
                }
            }
            for (config, runs) in Config::ALL.into_iter().zip(runs) {
                let med = |f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
                cells.push(Cell {
                    path: kind,
                    flows: n,
                    config,
                    gbps: med(|r| r.gbps),
                    cpu_ms_per_gbit: med(|r| r.cpu_ms_per_gbit),
                    cores_busy: med(|r| r.cores_busy),
                    agent_share: med(|r| r.agent_share),
                    agent_cpu_ms_per_gbit: med(|r| r.agent_cpu_ms_per_gbit),
                    retrans_per_gbit: med(|r| r.retrans_per_gbit),
                    runs,
                });
            }
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(Host { plan: plan.clone(), cpus, cells })
}

pub fn print(h: &Host) {
    println!(
        "host CPU per Gbit/s ({} CPUs; medians of {} interleaved runs, {:.0} s windows after {:.0} s warm-up; held veth at {} Mbit/s)",
        h.cpus, h.plan.repeat, h.plan.window_s, h.plan.warmup_s, h.plan.held_rate_mbps
    );
    let find = |p: PathKind, n: usize, c: Config| h.cells.iter().find(|x| x.path == p && x.flows == n && x.config == c);
    for c in &h.cells {
        let vs = c.config.anchor().and_then(|a| find(c.path, c.flows, a)).map_or(String::new(), |a| {
            format!(
                " = {:.3}x the CPU per Gbit of kernel {} at {:.3}x its throughput",
                ratio(c.cpu_ms_per_gbit, a.cpu_ms_per_gbit),
                &a.config.key()["kernel_".len()..],
                ratio(c.gbps, a.gbps)
            )
        });
        println!(
            "  {:9} {:5} flows {:12}: {:6.2} Gbit/s, {:.2} cores busy, {:6.1} CPU-ms/Gbit (agent {:.1}%), {:.0} retransmits/Gbit{vs}",
            c.path.key(),
            c.flows,
            c.config.key(),
            c.gbps,
            c.cores_busy,
            c.cpu_ms_per_gbit,
            100.0 * c.agent_share,
            c.retrans_per_gbit
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ccp_configuration_has_its_kernel_anchor() {
        for c in Config::ALL {
            if let Some(a) = c.anchor() {
                assert!(a.anchor().is_none() && Config::ALL.contains(&a), "{c:?}");
            }
        }
    }
}
