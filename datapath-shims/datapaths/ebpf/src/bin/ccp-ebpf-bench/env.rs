//! The benchmark's network namespaces and kernel settings, undone on drop.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use ccp_ebpf::netns::Netns;

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new("ip").args(args).stderr(Stdio::null()).status().context("running ip (iproute2)")?;
    if !st.success() {
        bail!("ip {} failed", args.join(" "));
    }
    Ok(())
}

/// Where a bulk flow runs: its namespaces and the receiver's address.
pub struct Path {
    pub label: &'static str,
    pub sender: String,
    pub receiver: String,
    pub receiver_addr: String,
    names: Vec<String>,
}

impl Path {
    /// One namespace; the flow runs over its loopback.
    pub fn loopback(tag: &str) -> anyhow::Result<Path> {
        let ns = format!("ccpebpf-bench-{tag}-lo");
        let _ = ip(&["netns", "del", &ns]);
        ip(&["netns", "add", &ns])?;
        let p = Path {
            label: "loopback",
            sender: ns.clone(),
            receiver: ns.clone(),
            receiver_addr: "127.0.0.1".into(),
            names: vec![ns.clone()],
        };
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(p)
    }

    /// Two namespaces joined by a veth pair.
    pub fn veth(tag: &str) -> anyhow::Result<Path> {
        let a = format!("ccpebpf-bench-{tag}-a");
        let b = format!("ccpebpf-bench-{tag}-b");
        for n in [&a, &b] {
            let _ = ip(&["netns", "del", n]);
        }
        ip(&["netns", "add", &a])?;
        let p = Path {
            label: "veth",
            sender: a.clone(),
            receiver: b.clone(),
            receiver_addr: "10.201.0.2".into(),
            names: vec![a.clone(), b.clone()],
        };
        ip(&["netns", "add", &b])?;
        ip(&["-n", &a, "link", "add", "ccpb0", "type", "veth", "peer", "name", "ccpb1", "netns", &b])?;
        ip(&["-n", &a, "addr", "add", "10.201.0.1/24", "dev", "ccpb0"])?;
        ip(&["-n", &b, "addr", "add", "10.201.0.2/24", "dev", "ccpb1"])?;
        for (n, dev) in [(&a, "ccpb0"), (&b, "ccpb1")] {
            ip(&["-n", n, "link", "set", dev, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(p)
    }

    pub fn sender_netns(&self) -> anyhow::Result<Netns> {
        Ok(Netns::open(&PathBuf::from("/run/netns").join(&self.sender))?)
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// `kernel.bpf_stats_enabled`, on while this lives (the kernel then times every program run).
pub struct BpfStats {
    previous: String,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStats {
    pub fn enable() -> anyhow::Result<BpfStats> {
        let previous = std::fs::read_to_string(BPF_STATS)?.trim().to_string();
        std::fs::write(BPF_STATS, "1")?;
        Ok(BpfStats { previous })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS, &self.previous);
    }
}

/// CPU time of a process, seconds (user + system).
pub fn process_cpu_s(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// Busy CPU time of the whole machine, seconds (all CPUs).
pub fn machine_busy_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else { return 0.0 };
    let Some(line) = stat.lines().next() else { return 0.0 };
    let v: Vec<f64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal
    let busy: f64 = v.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, x)| x).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy / hz
}
