//! Metrics of one run, computed from what the run recorded: the router's per-packet log, the
//! flows' byte counters and TCP_INFO samples, and the agent's per-flow trace.
//!
//! Definitions (mahimahi's, as the ABC evaluation used them, specs/abc.md §11):
//! * **utilisation** = IP bytes that left the link in the measurement window / bytes the link
//!   offered in the window (trace opportunities, used or not; or rate × time);
//! * **queueing delay** = per packet, dequeue − arrival at the bottleneck queue (no
//!   serialisation, no propagation), for every delivered data-direction packet that arrived in
//!   the window; percentiles are nearest-rank over all of them;
//! * **throughput** of a flow = bytes received in the window / window; TCP payload is scaled to
//!   wire bytes ([`TCP_WIRE_PER_PAYLOAD`](crate::traffic::TCP_WIRE_PER_PAYLOAD)) so shares
//!   compare with the link's capacity;
//! * **classification accuracy** = fraction of sample instants in the window at which the
//!   agent's last reported state (e.g. Nimbus `mode`) matches ground truth — "elastic" while
//!   any elastic cross traffic is active (specs/nimbus.md §10).
//!
//! The window is [traffic start + warmup, traffic end], in ns since the emulator started (the
//! router log's clock); every time series here uses that clock, in seconds.
//!
//! Each kind of metric has its module: [`bottleneck`] (the router log: utilisation, queueing
//! delay, drops, the queue on a grid), [`flows`] (per-flow throughput and TCP_INFO series),
//! [`agent_trace`] (the agent's per-flow trace; [`nimbus_log`] makes one from the Nimbus
//! authors' log), [`classify`] (classification accuracy against
//! ground truth), [`indices`] (fairness and the thesis's indices) and [`queue`] (the queue's
//! samples and their ECDF).

pub mod agent_trace;
pub mod bottleneck;
pub mod classify;
pub mod flows;
pub mod indices;
pub mod nimbus_log;
pub mod queue;

#[cfg(test)]
mod test_support;

pub use flows::FlowSummary;

const NS_PER_S: f64 = 1e9;

/// The measurement window and the time-series grid, ns since the emulator started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bin_ns: u64,
}

impl Window {
    fn contains(&self, t: u64) -> bool {
        t >= self.start_ns && t < self.end_ns
    }

    /// Whole bins from 0 to the end of the window (a partial last bin would show a false dip).
    fn bins(&self) -> usize {
        ((self.end_ns / self.bin_ns.max(1)) as usize).max(1)
    }

    pub fn seconds(&self) -> f64 {
        (self.end_ns.saturating_sub(self.start_ns)) as f64 / NS_PER_S
    }
}

/// R's default (type 7) quantile of sorted samples: x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]),
/// h = (n − 1)·p (0-based), as the thesis's `plot_tcpprobe_srtt.R` computes the SRTT p99.
pub fn quantile_type7(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}
