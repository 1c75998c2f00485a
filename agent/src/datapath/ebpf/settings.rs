//! `[datapath.ebpf]`: the eBPF datapath's own settings.

use std::path::PathBuf;
use std::time::Duration;

use ccp_contract::{ReportPolicy, MAX_REPORT_INTERVAL_US, MIN_REPORT_INTERVAL_US};
use ccp_ebpf::attach::Settings as AttachSettings;
use ccp_ebpf::{Knobs, ReportEvery};
use serde::Deserialize;

use crate::datapath::attach::Selection;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EbpfSettings {
    /// The congestion control's name (what TCP_CONGESTION selects), at most 15 characters.
    pub name: String,
    /// Directory on a bpf filesystem for the maps a restarted agent re-adopts flows through.
    pub pin_dir: PathBuf,
    /// What attach changed, for detach and for a clean shutdown.
    pub state_file: PathBuf,
    /// In-kernel algorithm for flows the agent does not steer (yet, or any more).
    pub fallback: ccp_ebpf::Fallback,
    /// A flow whose agent has been silent this long runs the fallback, ms.
    pub silence_timeout_ms: u64,
    /// Shortest report interval the kernel sends (per-RTT reports on short paths), µs.
    pub min_report_interval_us: u64,
    /// Ring buffer size, bytes: a power of two, at least a page.
    pub ring_bytes: u32,
    /// Most flows steered at once (control map slots; rounded up to a power of two).
    pub max_flows: u32,
    /// The agent drains the ring at least this often, µs: records that did not wake it wait at
    /// most this long.
    pub consume_interval_us: u64,
    /// Ordinary records wake the agent at most this often, µs; urgent ones (loss, timeout,
    /// state change) always do.
    pub wake_gap_us: u64,
    /// Where detach sends a flow whose previous congestion control is unknown.
    pub restore: String,
    /// SCHED_FIFO priority of the agent (1-99), so that a report wakes it at once on a busy
    /// machine (p99 report latency: ~100 us instead of several ms with both CPUs saturated);
    /// 0 keeps normal scheduling.
    pub realtime_priority: u8,
    /// Spin instead of sleeping, for hosts that can spare a CPU: the agent's loop never blocks
    /// and reads the ring on every turn, so a record waits only for the turn in progress;
    /// ordinary records never wake the agent (`wake_gap_us` is ignored: no IPIs), urgent ones
    /// still do. The agent then keeps normal scheduling whatever `realtime_priority` says: a
    /// spinning SCHED_FIFO thread would starve its CPU's softirq and kernel threads.
    pub busy_poll: bool,
    /// Flows, cgroups and namespace defaults attached when the agent starts (as `ccp-agent
    /// attach` would) and detached when it stops.
    pub attach: Selection,
}

impl Default for EbpfSettings {
    fn default() -> Self {
        EbpfSettings {
            name: "ccp".into(),
            pin_dir: PathBuf::from("/sys/fs/bpf/ccp-agent"),
            state_file: PathBuf::from("/run/ccp-agent/ebpf-attach.json"),
            fallback: ccp_ebpf::Fallback::Cubic,
            silence_timeout_ms: 1000,
            min_report_interval_us: MIN_REPORT_INTERVAL_US,
            ring_bytes: 8 << 20,
            max_flows: 65_536,
            consume_interval_us: 2_000,
            wake_gap_us: 100,
            restore: "cubic".into(),
            realtime_priority: 10,
            busy_poll: false,
            attach: Selection::default(),
        }
    }
}

impl EbpfSettings {
    /// Parses and checks a `[datapath.ebpf]` section.
    pub fn from_section(section: &toml::Table) -> Result<EbpfSettings, String> {
        let s: EbpfSettings = crate::datapath::parse_section(section)?;
        s.validate()?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), String> {
        ccp_ebpf::instance::validate_name(&self.name).map_err(|e| format!("name: {e}"))?;
        ccp_ebpf::instance::validate_name(&self.restore).map_err(|e| format!("restore: {e}"))?;
        if !self.ring_bytes.is_power_of_two() || self.ring_bytes < 4096 {
            return Err(format!("ring_bytes = {} must be a power of two of at least 4096", self.ring_bytes));
        }
        if self.max_flows == 0 {
            return Err("max_flows must be at least 1".into());
        }
        if self.silence_timeout_ms == 0 {
            return Err("silence_timeout_ms must be at least 1".into());
        }
        if !(100..=1_000_000).contains(&self.consume_interval_us) {
            return Err(format!("consume_interval_us = {} is out of range [100, 1000000]", self.consume_interval_us));
        }
        if !(100..=MAX_REPORT_INTERVAL_US).contains(&self.min_report_interval_us) {
            return Err(format!(
                "min_report_interval_us = {} is out of range [100, {MAX_REPORT_INTERVAL_US}]",
                self.min_report_interval_us
            ));
        }
        if self.realtime_priority > 99 {
            return Err(format!("realtime_priority = {} is out of range [0, 99]", self.realtime_priority));
        }
        super::select::to_attach(&self.attach).map_err(|e| format!("attach: {e}"))?;
        Ok(())
    }

    /// The kernel's knobs; `default_report` is what a flow does before its first command.
    pub fn knobs(&self, default_report: ReportPolicy) -> Knobs {
        Knobs {
            silence_timeout: Duration::from_millis(self.silence_timeout_ms),
            default_report: report_every(default_report),
            min_report_interval: Duration::from_micros(self.min_report_interval_us),
            // The kernel wakes the reader for an ordinary record only once this much has
            // passed since the last wakeup: never, for a reader that does not sleep.
            wake_gap: if self.busy_poll { Duration::MAX } else { Duration::from_micros(self.wake_gap_us) },
            fallback: self.fallback,
        }
    }

    /// What attach and detach need (also `ccp-agent attach` run directly).
    pub fn attach_settings(&self) -> AttachSettings {
        AttachSettings {
            cc_name: self.name.clone(),
            pin_dir: self.pin_dir.clone(),
            state_file: self.state_file.clone(),
            restore_cc: self.restore.clone(),
        }
    }
}

/// A report policy in the kernel's terms: it counts RTTs in sixteenths.
pub fn report_every(policy: ReportPolicy) -> ReportEvery {
    match policy {
        ReportPolicy::EveryUs(us) => ReportEvery::Micros(u32::try_from(us).unwrap_or(u32::MAX)),
        ReportPolicy::PerRtt { rtts } => ReportEvery::RttSixteenths(((rtts * 16.0).round() as u32).max(1)),
    }
}
