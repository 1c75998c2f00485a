//! ccp-bench: every performance figure of issue 19 next to its anchor, measured in one sitting,
//! one table per part with the columns figure | ccp-agent | anchor | ratio | target | met?.
//! Every ratio is against an anchor measured in the same run, never against a number from
//! another day or machine.
//!
//! - **host** (`ccp-ebpf-bench --part host`, first: the figure an operator decides on): 1, 100
//!   and 1,000 bulk flows over a veth pair held at a rate, a veth pair at full speed and loopback,
//!   on the kernel's own reno and cubic and on the eBPF datapath with the agent's: every CPU the
//!   machine spends per Gbit moved (target ≤ 1.05× the kernel's at 1 and 100 flows, ≤ 1.15× at
//!   1,000) and the throughput (≥ 0.97×), with the agent's share.
//! - **libccp** (run here): `ccp-test-datapath` — the real libccp C library driving emulated
//!   TCP-like flows over unix-socket IPC — with the same workload (`--flows 1000 --rtt-ms 20
//!   --link-mbps 2 --duration-ms 10000`, a 2 Mbit/s bottleneck per flow) served in turn by
//!   `ccp-agent run -a reno --datapath unix` (RFC 5681 Reno, 2-packet floor; reports once per
//!   RTT, the libccp datapaths' default, as portus), by the same with `[safety] min_cwnd_pkts =
//!   10` (generic_cong_avoid never lets the window go below its initial 10 packets: the
//!   like-for-like comparison), by that with `[reports] interval_us = 10000` (a report every
//!   10 ms, the earlier default), and by the anchor, generic_cong_avoid 0.4.0's `reno` on portus 0.7;
//!   repetitions interleaved. Figures: agent and datapath CPU together per MB delivered (target ≤
//!   portus's), agent CPU per report and reports per agent CPU-second (target: ccp-agent ≥ 2×
//!   portus), reports per flow-second, utilisation (delivered / (flows × link rate × duration)),
//!   RTOs, and WARN lines in the agent's log.
//! - **eBPF** (`ccp-ebpf-bench`): one bulk flow over a veth pair and over loopback, ccp-agent's
//!   Reno on the `ccp` struct_ops congestion control with 10 ms reports against the kernel's
//!   cubic and reno; BPF cost per ACK (target ≤ 80 ns; next to the kernel's Reno hosted as a BPF
//!   congestion control when ccp-ebpf-bench measures that, `bpf_reno_ns_per_ack`); with 1,000
//!   concurrent flows, agent CPU per report (target ≤ 1 µs) and the ACK-to-agent report latency
//!   p99 (target ≤ 100 µs).
//! - **shim** (`ccp-libccp-shim-bench`): portus driving kernel flows through
//!   `ccp-libccp-shim`: the shim's CPU per ACK (target ≤ 3 µs), and its throughput against the
//!   kernel's reno.
//!
//! - **soak** (`--part soak --minutes N`, not part of `all`): N minutes of 1,000 libccp and
//!   1,000 kernel flows with churn (100 opened and closed per second), `ctl swap --all` every
//!   10 s and both agents killed with SIGKILL every 5 minutes; the agents' RSS, open files and
//!   log lines per minute and the pinned maps' entries sampled every 5 s, each series' slope per
//!   hour (within and across the agents' lives), min and max; lost and frozen flows (target 0).
//!   See `soak/mod.rs` and docs/performance.md.
//!
//! Rows without a target are shown for context (their met? reads `-`). A ratio is always
//! ccp-agent's figure over the anchor's, so for a cost (µs per report) lower is better: the
//! ≥ 2× reports per CPU-second target reads ≤ 0.5× there. Agent CPU comes from utime + stime in
//! /proc/PID/stat (10 ms ticks): `--quick` runs spend a few ticks, so their figures are coarse.
//!
//! Build everything it runs (release: the figures are meaningless in a debug build) and run it
//! as root:
//!
//! ```sh
//! cargo build --release -p ccp-agent -p ccp-test-datapath -p ccp-ebpf-libccp -p ccp-bench-harness
//! sudo target/release/ccp-bench                       # everything, ~17 minutes (host: ~12)
//! sudo target/release/ccp-bench --part libccp --json results/bench-libccp.json
//! sudo target/release/ccp-bench --quick               # every row, short runs (CI): ~3 minutes
//! ```
//!
//! The binaries are looked up next to this one (`--bin-dir`), the portus binaries in
//! `--portus-dir`, else `CCP_PORTUS_BIN_DIR`, else `$HOME/.cache/ccp-agent/portus/bin` (where
//! `scripts/setup.sh` installs them). A part whose prerequisite is missing (root, iperf3, the
//! portus binaries, a binary not built) is reported as SKIPPED with the reason, and the command
//! still exits 0 unless `--require-all`. A part that fails is reported as FAILED and the
//! command exits 1 after the other parts ran. `--json FILE` writes every row, every per-run
//! figure and the sub-benchmarks' own JSON.
//!
//! Everything started is stopped on the way out, also on errors: agents and datapaths are
//! guards that SIGTERM (then SIGKILL) and reap on drop, portus's mount namespace ends with its
//! process, and the sub-benchmarks remove their own namespaces.

mod libccp;
mod procs;
mod rows;
mod soak;
mod subbench;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use rows::{print_part, Outcome, Row};

#[derive(Debug, Parser)]
#[command(name = "ccp-bench", about = "Every issue-19 figure next to its anchor, measured in one run (needs root)")]
struct Args {
    /// Short runs and few flows for every part (what CI runs): every row, figures only indicative.
    #[arg(long)]
    quick: bool,
    /// What to run.
    #[arg(long, value_enum, default_value_t = Part::All)]
    part: Part,
    /// Also write everything as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Exit 1 if a part was skipped for a missing prerequisite.
    #[arg(long)]
    require_all: bool,
    /// Runs of each configuration, interleaved (default 2; --quick: 1).
    #[arg(long)]
    repeat: Option<u32>,
    /// Flows of the libccp workload, of the eBPF many-flows run and of each datapath in the
    /// soak (default 1000; --quick: 100).
    #[arg(long)]
    flows: Option<u32>,
    /// Length of the libccp workload, ms (default 10000; --quick: 2000).
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Seconds per bulk flow of the eBPF, shim and DPDK parts (default: theirs, 5, 8 and 10;
    /// --quick: 2).
    #[arg(long)]
    seconds: Option<u32>,
    /// Seconds of the eBPF many-flows run, the first two warm-up (default 10; --quick: 4).
    #[arg(long)]
    flow_seconds: Option<u32>,
    /// Bulk flow counts of the host part (default 1,100,1000).
    #[arg(long, value_delimiter = ',')]
    host_flows: Option<Vec<usize>>,
    /// Seconds of each host-part run's measured window (default 6; --quick: 1), after a warm-up
    /// of a third of it (at least 1 s).
    #[arg(long)]
    host_window_s: Option<f64>,
    /// Length of the soak, minutes.
    #[arg(long, default_value_t = 60.0)]
    minutes: f64,
    /// Soak: both agents are killed with SIGKILL and started again this often, seconds.
    #[arg(long, default_value_t = 300)]
    restart_every_s: u64,
    /// Soak: `ctl swap --all` (reno and cubic in turn) this often, seconds.
    #[arg(long, default_value_t = 10)]
    swap_every_s: u64,
    /// Soak: flows opened and closed per second, both datapaths together.
    #[arg(long, default_value_t = 100.0)]
    churn_per_s: f64,
    /// Where ccp-agent, ccp-test-datapath, ccp-ebpf-bench, ccp-libccp-shim(-bench) are; default:
    /// this program's directory.
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Directory holding generic_cong_avoid's `reno`; default: CCP_PORTUS_BIN_DIR, else
    /// $HOME/.cache/ccp-agent/portus/bin.
    #[arg(long)]
    portus_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    All,
    /// Host CPU per Gbit/s: bulk flows on ccp-agent vs the kernel's own congestion control.
    Host,
    /// ccp-agent vs portus serving the libccp test datapath.
    Libccp,
    /// ccp-ebpf-bench: the eBPF datapath vs the kernel's congestion control.
    Ebpf,
    /// ccp-libccp-shim-bench: portus through the shim.
    Shim,
    /// ccp-dpdk-bench: the DPDK sender vs the kernel's TCP sender.
    Dpdk,
    /// Flows churning, hot swaps and agent restarts for --minutes: whether memory, open files,
    /// map entries and logs stay flat and no flow is lost or frozen (not part of `all`).
    Soak,
}

/// The settings every part uses, --quick applied.
#[derive(Debug, serde::Serialize)]
struct Settings {
    quick: bool,
    repeat: u32,
    flows: u32,
    duration_ms: u64,
    seconds: Option<u32>,
    flow_seconds: u32,
    host_flows: Vec<usize>,
    host_window_s: f64,
    bin_dir: PathBuf,
    portus_dir: PathBuf,
    soak: soak::Plan,
}

impl Settings {
    fn of(a: &Args) -> anyhow::Result<Settings> {
        let q = a.quick;
        let bin_dir = match &a.bin_dir {
            Some(d) => d.clone(),
            None => std::env::current_exe()?.parent().context("this program's directory")?.to_path_buf(),
        };
        let portus_dir =
            a.portus_dir.clone().or_else(|| std::env::var_os("CCP_PORTUS_BIN_DIR").map(PathBuf::from)).unwrap_or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/root"))
                    .join(".cache/ccp-agent/portus/bin")
            });
        let s = Settings {
            quick: q,
            repeat: a.repeat.unwrap_or(if q { 1 } else { 2 }).max(1),
            flows: a.flows.unwrap_or(if q { 100 } else { 1000 }),
            duration_ms: a.duration_ms.unwrap_or(if q { 2000 } else { 10_000 }),
            seconds: a.seconds.or(q.then_some(2)),
            flow_seconds: a.flow_seconds.unwrap_or(if q { 4 } else { 10 }),
            host_flows: a.host_flows.clone().unwrap_or_else(|| vec![1, 100, 1000]),
            host_window_s: a.host_window_s.unwrap_or(if q { 1.0 } else { 6.0 }),
            bin_dir,
            portus_dir,
            soak: soak::Plan {
                minutes: a.minutes,
                flows: a.flows.unwrap_or(if q { 100 } else { 1000 }) as usize,
                churn_per_s: a.churn_per_s,
                swap_every_s: a.swap_every_s,
                restart_every_s: a.restart_every_s,
                sample_every_s: 5,
            },
        };
        anyhow::ensure!((1..=1024).contains(&s.flows), "--flows must be 1..=1024 (ccp-test-datapath's limit)");
        anyhow::ensure!(s.duration_ms >= 500, "--duration-ms must be at least 500");
        anyhow::ensure!(s.host_window_s > 0.0, "--host-window-s must be positive");
        anyhow::ensure!(
            !s.host_flows.is_empty() && s.host_flows.iter().all(|n| (1..=10_000).contains(n)),
            "--host-flows must list flow counts of 1..=10000"
        );
        Ok(s)
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `name` on PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// The first missing prerequisite of a part, as a reason to skip it.
fn missing(s: &Settings, root: bool, tools: &[&str], bins: &[(&str, &str)], portus: bool) -> Option<String> {
    if root && !is_root() {
        return Some("needs root (network namespaces, BPF, mounts): run it with sudo".into());
    }
    for t in tools {
        if !on_path(t) {
            return Some(format!("`{t}` is not on PATH (scripts/setup.sh installs it)"));
        }
    }
    for (b, package) in bins {
        let p = s.bin_dir.join(b);
        if !p.is_file() {
            return Some(format!("{} is missing: cargo build --release -p {package} (or pass --bin-dir)", p.display()));
        }
    }
    if portus {
        let p = s.portus_dir.join("reno");
        if !p.is_file() {
            return Some(format!(
                "{} is missing: scripts/setup.sh installs generic_cong_avoid 0.4.0's portus binaries \
                 (or set CCP_PORTUS_BIN_DIR / --portus-dir)",
                p.display()
            ));
        }
    }
    None
}

fn libccp_part(s: &Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)> {
    let bins = libccp::Bins {
        agent: s.bin_dir.join("ccp-agent"),
        datapath: s.bin_dir.join("ccp-test-datapath"),
        portus_reno: s.portus_dir.join("reno"),
    };
    let plan = libccp::Plan { flows: s.flows, duration_ms: s.duration_ms, rtt_ms: 20, link_mbps: 2, repeat: s.repeat };
    let m = libccp::run(&bins, &plan)?;
    Ok((m.rows, m.notes, m.raw))
}

/// A sub-benchmark's limit: far beyond what its arguments make it take.
fn sub_timeout(s: &Settings) -> Duration {
    let secs = u64::from(s.seconds.unwrap_or(8)) * 8 + u64::from(s.flow_seconds) + 30;
    Duration::from_secs(secs * u64::from(s.repeat) * 3 + 120)
}

fn ebpf_part(s: &Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)> {
    let mut args = vec![
        "--agent".to_string(),
        s.bin_dir.join("ccp-agent").display().to_string(),
        "--part".into(),
        "all".into(),
        "--repeat".into(),
        s.repeat.to_string(),
        "--flows".into(),
        s.flows.to_string(),
        "--flow-seconds".into(),
        s.flow_seconds.to_string(),
    ];
    if let Some(sec) = s.seconds {
        args.extend(["--seconds".into(), sec.to_string()]);
    }
    let v = subbench::run(&s.bin_dir.join("ccp-ebpf-bench"), &args, sub_timeout(s))?;
    let (rows, notes) = subbench::ebpf_rows(&v)?;
    Ok((rows, notes, v))
}

fn host_part(s: &Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)> {
    let flows: Vec<String> = s.host_flows.iter().map(usize::to_string).collect();
    let args = vec![
        "--agent".to_string(),
        s.bin_dir.join("ccp-agent").display().to_string(),
        "--part".into(),
        "host".into(),
        "--repeat".into(),
        s.repeat.to_string(),
        "--host-flows".into(),
        flows.join(","),
        "--host-window-s".into(),
        s.host_window_s.to_string(),
        "--host-warmup-s".into(),
        (s.host_window_s / 3.0).max(1.0).to_string(),
    ];
    // 3 paths x flow counts x 4 configurations, each the warm-up, the window and start-up.
    let per_run = s.host_window_s + (s.host_window_s / 3.0).max(1.0) + 5.0;
    let limit = Duration::from_secs_f64(per_run * 12.0 * s.host_flows.len() as f64 * f64::from(s.repeat) * 2.0 + 120.0);
    let v = subbench::run(&s.bin_dir.join("ccp-ebpf-bench"), &args, limit)?;
    let (rows, notes) = subbench::host_rows(&v)?;
    Ok((rows, notes, v))
}

fn shim_part(s: &Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)> {
    let mut args = vec![
        "--bin-dir".to_string(),
        s.bin_dir.display().to_string(),
        "--portus-dir".into(),
        s.portus_dir.display().to_string(),
        "--repeat".into(),
        s.repeat.to_string(),
    ];
    if let Some(sec) = s.seconds {
        args.extend(["--seconds".into(), sec.to_string()]);
    }
    let v = subbench::run(&s.bin_dir.join("ccp-libccp-shim-bench"), &args, sub_timeout(s))?;
    let (rows, notes) = subbench::shim_rows(&v)?;
    Ok((rows, notes, v))
}

fn dpdk_part(s: &Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)> {
    // The eBPF datapath's figures are the ebpf part's.
    let seconds = s.seconds.unwrap_or(10);
    let args = vec![
        "--no-ebpf".to_string(),
        "--repeat".into(),
        s.repeat.to_string(),
        "--seconds".into(),
        seconds.to_string(),
        "--flows".into(),
        "1,16".into(),
    ];
    // 2 connection counts x 3 configurations x repeat, and the agent's run, each with start-up.
    let limit = Duration::from_secs((u64::from(seconds) + 15) * (6 * u64::from(s.repeat) + 1) + 120);
    let v = subbench::run(&s.bin_dir.join("ccp-dpdk-bench"), &args, limit)?;
    let (rows, notes) = subbench::dpdk_rows(&v)?;
    Ok((rows, notes, v))
}

fn soak_part(s: &Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)> {
    let bins = soak::Bins { agent: s.bin_dir.join("ccp-agent"), datapath: s.bin_dir.join("ccp-test-datapath") };
    soak::run(&bins, &s.soak)
}

type PartFn = fn(&Settings) -> anyhow::Result<(Vec<Row>, Vec<String>, serde_json::Value)>;

struct PartSpec {
    key: &'static str,
    part: Part,
    /// Whether `--part all` runs it.
    in_all: bool,
    title: &'static str,
    anchor: &'static str,
    prereq: fn(&Settings) -> Option<String>,
    run: PartFn,
}

const PARTS: [PartSpec; 6] = [
    PartSpec {
        key: "host",
        part: Part::Host,
        in_all: true,
        title: "host CPU per Gbit/s: bulk flows steered by ccp-agent (eBPF) vs the kernel's own",
        anchor: "the kernel's reno and cubic",
        prereq: |s| {
            missing(s, true, &["ip", "tc"], &[("ccp-agent", "ccp-agent"), ("ccp-ebpf-bench", "ccp-bench-harness")], false)
        },
        run: host_part,
    },
    PartSpec {
        key: "libccp",
        part: Part::Libccp,
        in_all: true,
        title: "libccp: ccp-agent vs portus serving ccp-test-datapath",
        anchor: "portus 0.7 + generic_cong_avoid 0.4.0 reno",
        prereq: |s| {
            missing(
                s,
                true,
                &["unshare", "mount"],
                &[("ccp-agent", "ccp-agent"), ("ccp-test-datapath", "ccp-test-datapath")],
                true,
            )
        },
        run: libccp_part,
    },
    PartSpec {
        key: "ebpf",
        part: Part::Ebpf,
        in_all: true,
        title: "eBPF: ccp-agent on the kernel datapath (ccp-ebpf-bench)",
        anchor: "the kernel's cubic and reno",
        prereq: |s| {
            missing(
                s,
                true,
                &["iperf3", "ip", "tc"],
                &[("ccp-agent", "ccp-agent"), ("ccp-ebpf-bench", "ccp-bench-harness")],
                false,
            )
        },
        run: ebpf_part,
    },
    PartSpec {
        key: "shim",
        part: Part::Shim,
        in_all: true,
        title: "portus shim: portus through ccp-libccp-shim (ccp-libccp-shim-bench)",
        anchor: "the kernel's reno",
        prereq: |s| {
            missing(
                s,
                true,
                &["iperf3", "ip", "tc", "unshare"],
                &[
                    ("ccp-agent", "ccp-agent"),
                    ("ccp-libccp-shim", "ccp-ebpf-libccp"),
                    ("ccp-libccp-shim-bench", "ccp-bench-harness"),
                ],
                true,
            )
        },
        run: shim_part,
    },
    PartSpec {
        key: "dpdk",
        part: Part::Dpdk,
        in_all: true,
        title: "DPDK: the ccp-dpdk sender vs the kernel's TCP sender (ccp-dpdk-bench)",
        anchor: "the kernel's TCP sender, offloads on and off",
        prereq: |s| {
            missing(
                s,
                true,
                &["ip", "ethtool"],
                &[("ccp-agent", "ccp-agent"), ("ccp-dpdk", "ccp-dpdk"), ("ccp-dpdk-bench", "ccp-dpdk")],
                false,
            )
        },
        run: dpdk_part,
    },
    PartSpec {
        key: "soak",
        part: Part::Soak,
        in_all: false,
        title: "soak: flows churning, hot swaps and kill -9 of both agents",
        anchor: "none: flat series, nothing lost or frozen",
        prereq: |s| missing(s, true, &["ip"], &[("ccp-agent", "ccp-agent"), ("ccp-test-datapath", "ccp-test-datapath")], false),
        run: soak_part,
    },
];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let s = Settings::of(&args)?;
    let t_all = Instant::now();
    if !args.quick && Path::new(&s.bin_dir).ends_with("debug") {
        eprintln!("ccp-bench: note: {} is a debug build; build with --release for real figures", s.bin_dir.display());
    }
    let mut results = serde_json::Map::new();
    let mut outcomes = Vec::new();
    for p in PARTS.iter().filter(|p| (args.part == Part::All && p.in_all) || args.part == p.part) {
        let outcome = if let Some(reason) = (p.prereq)(&s) {
            eprintln!("\n!!! ccp-bench: SKIPPED {}: {reason}\n", p.key);
            Outcome::Skipped { reason }
        } else {
            let t0 = Instant::now();
            match (p.run)(&s) {
                Ok((rows, notes, raw)) => Outcome::Ran { rows, notes, raw, seconds: t0.elapsed().as_secs_f64() },
                Err(e) => {
                    eprintln!("\n!!! ccp-bench: {} FAILED: {e:#}\n", p.key);
                    Outcome::Failed { error: format!("{e:#}"), seconds: t0.elapsed().as_secs_f64() }
                }
            }
        };
        results.insert(p.key.into(), serde_json::to_value(&outcome)?);
        outcomes.push((p, outcome));
    }

    println!("ccp-bench{}: every ratio is ccp-agent / anchor, both measured in this run", if s.quick { " --quick" } else { "" });
    for (p, o) in &outcomes {
        print_part(p.title, p.anchor, o);
    }
    let (mut met, mut judged, mut skipped, mut failed) = (0, 0, Vec::new(), Vec::new());
    for (p, o) in &outcomes {
        match o {
            Outcome::Ran { rows, .. } => {
                for r in rows.iter().filter_map(|r| r.met) {
                    judged += 1;
                    met += usize::from(r);
                }
            }
            Outcome::Skipped { .. } => skipped.push(p.key),
            Outcome::Failed { .. } => failed.push(p.key),
        }
    }
    println!();
    println!(
        "targets met: {met} of {judged}{}{}; {:.0} s in all",
        if skipped.is_empty() { String::new() } else { format!("; SKIPPED: {}", skipped.join(", ")) },
        if failed.is_empty() { String::new() } else { format!("; FAILED: {}", failed.join(", ")) },
        t_all.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "tool": "ccp-bench",
            "settings": s,
            "seconds": t_all.elapsed().as_secs_f64(),
            "parts": results,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if !failed.is_empty() || (args.require_all && !skipped.is_empty()) {
        std::process::exit(1);
    }
    Ok(())
}
