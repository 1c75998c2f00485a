//! The control half of the contract: what an algorithm asks the datapath to do.
//!
//! Values are `f64` on purpose: algorithms compute in floating point, and the agent must be able
//! to see a NaN or an infinity (and refuse it) rather than have it silently cast to 0 or u64::MAX.

/// How often the datapath should report on a flow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReportPolicy {
    /// Once every fixed interval, microseconds.
    EveryUs(u64),
    /// Once every `rtts` smoothed round-trip times.
    PerRtt { rtts: f64 },
}

/// Pacing request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Do not pace: send as the window allows.
    Off,
    /// Pace at this rate, bytes per second.
    BytesPerSec(f64),
}

/// What to change on the datapath. `None` means "leave as it is".
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Action {
    /// Congestion window, bytes.
    pub cwnd_bytes: Option<f64>,
    pub pacing: Option<Pacing>,
    pub report: Option<ReportPolicy>,
    /// RTT above which samples are counted in `Report::rtt_samples_over_threshold`.
    pub rtt_threshold_us: Option<u64>,
    /// Also report as soon as this many packets have been acknowledged (cumulatively or
    /// selectively) since the last report, whatever the report policy's interval; 0 turns it off.
    /// For algorithms that act every few packets (Inigo's sub-window response every W_sub).
    pub report_acked_pkts: Option<u32>,
    /// Measure ACK aggregation against this delivery rate, bytes/s (0 turns it off): the
    /// datapath then reports in `Report::extra_acked_bytes` how far deliveries ran ahead of it
    /// (tcp_bbr.c's aggregation epochs, per ACK). BBR sets its BtlBw here.
    pub ack_aggregation_bw_bytes_per_s: Option<f64>,
}

impl Action {
    /// An action that only sets the congestion window.
    #[inline]
    pub fn cwnd(cwnd_bytes: f64) -> Self {
        Action { cwnd_bytes: Some(cwnd_bytes), ..Action::default() }
    }

    #[inline]
    pub fn with_pacing(mut self, pacing: Pacing) -> Self {
        self.pacing = Some(pacing);
        self
    }

    #[inline]
    pub fn with_report(mut self, report: ReportPolicy) -> Self {
        self.report = Some(report);
        self
    }

    #[inline]
    pub fn with_rtt_threshold_us(mut self, threshold_us: u64) -> Self {
        self.rtt_threshold_us = Some(threshold_us);
        self
    }

    #[inline]
    pub fn with_report_acked_pkts(mut self, pkts: u32) -> Self {
        self.report_acked_pkts = Some(pkts);
        self
    }

    #[inline]
    pub fn with_ack_aggregation_bw(mut self, bytes_per_s: f64) -> Self {
        self.ack_aggregation_bw_bytes_per_s = Some(bytes_per_s);
        self
    }

    /// True when the action asks for nothing.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.cwnd_bytes.is_none()
            && self.pacing.is_none()
            && self.report.is_none()
            && self.rtt_threshold_us.is_none()
            && self.report_acked_pkts.is_none()
            && self.ack_aggregation_bw_bytes_per_s.is_none()
    }
}
