//! A connection's settings: our MSS and initial window, the RFC 6298 timer bounds, the options we
//! offer (ECN, SACK, timestamps), retry limits and the pacer's burst.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our largest payload per segment (1448 = 1500 MTU - 40 headers - 12 TS option).
    pub mss_bytes: u16,
    pub init_cwnd_pkts: u32,
    pub rto_min_us: u64,
    pub rto_initial_us: u64,
    pub rto_max_us: u64,
    pub ecn: bool,
    pub sack: bool,
    pub timestamps: bool,
    /// Window we advertise; we receive no data, so it never changes.
    pub rcv_window: u16,
    pub dupthresh: u32,
    pub syn_retries: u32,
    /// Consecutive RTO expirations without progress before the flow fails.
    pub rto_retries: u32,
    /// Pacing bucket depth: after an idle or slow period the pacer may send up
    /// to this many bytes back to back before spacing resumes. 0 = strict spacing.
    pub pacing_burst_bytes: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss_bytes: 1448,
            init_cwnd_pkts: 10,
            rto_min_us: 200_000,
            rto_initial_us: 1_000_000,
            rto_max_us: 60_000_000,
            ecn: true,
            sack: true,
            timestamps: true,
            rcv_window: 65535,
            dupthresh: 3,
            syn_retries: 6,
            rto_retries: 15,
            pacing_burst_bytes: 2 * 1448,
        }
    }
}
