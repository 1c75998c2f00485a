//! The scale run: as many concurrent flows as asked (100,000 by default) on the congestion
//! control at once, in shards of `shard` flows, each shard a `ccp-flood flows` process (next to
//! this program) with a network namespace of its own, each flow writing two segments every
//! 10 ms. Measured: control slots (used, moved away from a home another live flow held, writes
//! refused because all were taken, entries found lost), agent CPU per report, report latency,
//! and the agent's memory per flow.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccp_bench_harness::figures::ratio;
use ccp_bench_harness::process::{field, process_cpu_s};
use serde::Serialize;

use crate::agent::{pin_dir, Agent, CC};

#[derive(Debug, Default, Serialize)]
pub struct Scale {
    pub flows_asked: usize,
    pub churn_per_s: f64,
    pub shards: usize,
    /// Flows the agent controlled at the peak (its flow table).
    pub flows_controlled: u64,
    pub ramp_s: f64,
    pub window_s: f64,
    pub reports_per_s: f64,
    pub agent_us_per_report: f64,
    pub agent_cpu_pct_of_a_core: f64,
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
    pub ring_drops: u64,
    pub slots_capacity: u64,
    pub slots_used_peak: u64,
    pub slots_moved: u64,
    pub slots_full: u64,
    pub entries_repaired: u64,
    pub agent_rss_mib: f64,
    pub agent_kib_per_flow: f64,
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

/// The largest value of `key` over the agent's periodic statistics lines.
fn max_stat(log: &str, key: &str) -> u64 {
    log.lines().filter(|l| l.contains("ebpf datapath stats")).filter_map(|l| field(l, key)?.parse().ok()).max().unwrap_or(0)
}

fn adapter_stat(log: &str, key: &str) -> u64 {
    log.lines()
        .rev()
        .find(|l| l.contains("ebpf datapath stats"))
        .and_then(|l| field(l, "stats"))
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .and_then(|v| v[key].as_u64())
        .unwrap_or(0)
}

struct Shards(Vec<Child>);

impl Drop for Shards {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // The shard and its receiving child share a process group.
            // SAFETY: kill(2) on process groups we created.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

/// What to run.
pub struct Plan {
    pub flows: usize,
    pub shard: usize,
    pub seconds: u32,
    pub churn_per_s: f64,
    pub slots: Option<usize>,
}

pub fn run(bin: &Path, plan: &Plan, ebpf: &str) -> anyhow::Result<Scale> {
    let (n, shard, seconds) = (plan.flows, plan.shard, plan.seconds);
    let flood = bin.with_file_name("ccp-flood");
    if !flood.exists() {
        bail!("{} is missing: build it with `cargo build --release -p ccp-integration-tests`", flood.display());
    }
    let slots = plan.slots.unwrap_or(n).next_power_of_two();
    // Every live flow needs a control slot: size them for the run (a power of two).
    let agent = Agent::start(bin, &format!("max_flows = {slots}\n{ebpf}"))?;
    let rss0 = rss_kib(agent.pid());
    let shards_n = n.div_ceil(shard.max(1));
    let window = Duration::from_secs(u64::from(seconds.max(4)));
    eprintln!("[scale] {n} flows in {shards_n} shards, then {} s measured", window.as_secs());
    let t0 = Instant::now();
    let mut shards = Shards(Vec::new());
    let mut ready = Vec::new();
    for k in 0..shards_n {
        let m = shard.min(n - k * shard);
        let mut cmd = Command::new(&flood);
        cmd.args(["flows", "--uid", "0", "--cc", CC, "--flows", &m.to_string(), "--secs", "3600"])
            .args(["--chunk", "2896", "--every-ms", "10"])
            .args(["--churn-per-s", &(plan.churn_per_s / shards_n as f64).to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().context("spawn ccp-flood")?;
        ready.push(BufReader::new(child.stderr.take().context("stderr")?));
        shards.0.push(child);
    }
    for (k, r) in ready.iter_mut().enumerate() {
        let mut line = String::new();
        r.read_line(&mut line)?;
        if !line.contains("ready") {
            bail!("shard {k} did not get its flows up: {line}");
        }
    }
    let ramp = t0.elapsed().as_secs_f64();
    eprintln!("[scale] every shard connected after {ramp:.1} s");
    std::thread::sleep(Duration::from_secs(2));
    let pins = pin_dir();
    let (cpu0, rec0, t1) = (process_cpu_s(agent.pid()), ccp_ebpf::instance::pinned_counters(&pins)?, Instant::now());
    std::thread::sleep(window);
    let (cpu1, rec1, w) = (process_cpu_s(agent.pid()), ccp_ebpf::instance::pinned_counters(&pins)?, t1.elapsed().as_secs_f64());
    let rss = rss_kib(agent.pid());
    let controlled = agent.status_summary()?["result"]["flow_count"].as_u64().unwrap_or(0);
    // Let one more statistics line (every 10 s) see the full table.
    std::thread::sleep(Duration::from_secs(10));
    drop(shards);
    let log = agent.stop_log()?;
    let records = rec1.records.saturating_sub(rec0.records) as f64;
    let cpu = cpu1 - cpu0;
    let line = log.lines().rev().find(|l| l.contains("ebpf datapath stats")).unwrap_or_default();
    let num = |k: &str| field(line, k).and_then(|v| v.parse().ok()).unwrap_or(0);
    Ok(Scale {
        flows_asked: n,
        churn_per_s: plan.churn_per_s,
        shards: shards_n,
        flows_controlled: controlled,
        ramp_s: ramp,
        window_s: w,
        reports_per_s: records / w,
        agent_us_per_report: ratio(cpu * 1e6, records),
        agent_cpu_pct_of_a_core: 100.0 * cpu / w,
        latency_p50_us: num("latency_p50_us"),
        latency_p99_us: num("latency_p99_us"),
        ring_drops: rec1.ring_drops.saturating_sub(rec0.ring_drops),
        slots_capacity: max_stat(&log, "slots_capacity"),
        slots_used_peak: max_stat(&log, "slots_used"),
        slots_moved: max_stat(&log, "slots_moved"),
        slots_full: adapter_stat(&log, "slots_full"),
        entries_repaired: adapter_stat(&log, "entries_repaired"),
        agent_rss_mib: rss as f64 / 1024.0,
        agent_kib_per_flow: ratio(rss.saturating_sub(rss0) as f64, controlled as f64),
    })
}

pub fn print(s: &Scale) {
    println!(
        "{} flows asked ({} shards, up after {:.1} s, {} replaced per s), {} controlled; {:.0} reports/s, {:.2} us agent CPU per report \
         ({:.0}% of a core); report latency p50 {} us, p99 {} us; ring drops {}; control slots: {} of {} used at peak, \
         {} placed away from a home another live flow held, {} writes refused (all taken), {} entries found lost; \
         agent RSS {:.0} MiB, {:.2} KiB per flow",
        s.flows_asked,
        s.shards,
        s.ramp_s,
        s.churn_per_s,
        s.flows_controlled,
        s.reports_per_s,
        s.agent_us_per_report,
        s.agent_cpu_pct_of_a_core,
        s.latency_p50_us,
        s.latency_p99_us,
        s.ring_drops,
        s.slots_used_peak,
        s.slots_capacity,
        s.slots_moved,
        s.slots_full,
        s.entries_repaired,
        s.agent_rss_mib,
        s.agent_kib_per_flow
    );
}
