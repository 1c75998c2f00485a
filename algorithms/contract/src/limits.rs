//! Safety limits: the bounds the controller holds every flow to, whatever its algorithm says.

/// No window goes below this many packets: not an algorithm's (each floors its own state here
/// too, so that its arithmetic never works from a window the datapath would not use), not the
/// controller's clamp. RFC 5681's loss window is 1 MSS; two keep delayed ACKs from stalling a flow.
pub const MIN_CWND_PKTS: f64 = 2.0;

/// The shortest report interval the agent accepts as a default or from an algorithm, µs.
pub const MIN_REPORT_INTERVAL_US: u64 = 1_000;
/// The longest report interval an algorithm may ask for, µs.
pub const MAX_REPORT_INTERVAL_US: u64 = 10_000_000;
/// The interval standing in for a per-RTT policy before the flow's first RTT sample, on a
/// datapath that cannot count RTTs itself, µs (libccp's fold reports every 10 ms by default).
pub const INTERVAL_BEFORE_RTT_US: u64 = 10_000;
/// The largest packet count a report trigger may wait for (beyond it, the time policy reports
/// first on any real path anyway).
pub const MAX_REPORT_ACKED_PKTS: u32 = 1 << 20;
/// Bounds on a per-RTT report policy, in RTTs.
pub const REPORT_RTTS_RANGE: (f64, f64) = (0.1, 100.0);

/// Safety limits applied to every flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Window floor, packets (see [`MIN_CWND_PKTS`]).
    pub min_cwnd_pkts: f64,
    pub min_pacing_rate_bytes_per_s: u64,
    /// Faults tolerated within `fault_window_us` before the fallback algorithm takes over.
    pub max_faults: u32,
    pub fault_window_us: u64,
    /// Shortest report interval granted, µs; a datapath that reports faster asks for less
    /// through its capabilities, never more.
    pub min_report_interval_us: u64,
    /// The report policy a flow has until its algorithm asks for another.
    pub default_report: crate::ReportPolicy,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_cwnd_pkts: MIN_CWND_PKTS,
            min_pacing_rate_bytes_per_s: 12_500,
            max_faults: 3,
            fault_window_us: 60_000_000,
            min_report_interval_us: MIN_REPORT_INTERVAL_US,
            default_report: crate::ReportPolicy::EveryUs(10_000),
        }
    }
}
