//! What the benchmark changes or reads beyond its processes: its network paths, BPF run-time
//! statistics (undone on drop), the whole machine's CPU time.

use std::path::PathBuf;

use ccp_bench_harness::net::{Naming, Path};
use ccp_ebpf::netns::Netns;

/// This benchmark's namespaces, devices and subnet (another benchmark's never collide).
pub const NAMING: Naming = Naming { netns: "ccpebpf-bench", dev: "ccpb", subnet: "10.201.0" };

/// The namespace the path's flows are sent from.
pub fn sender_netns(path: &Path) -> anyhow::Result<Netns> {
    Ok(Netns::open(&PathBuf::from("/run/netns").join(&path.sender))?)
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
