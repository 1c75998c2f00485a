//! What user space writes: a flow's control entry and the global knobs.
//!
//! A control entry is a level, not an edge: the program re-applies it on every ACK, so a window
//! the stack cut on a timeout comes back at the next ACK unless the agent commands another one,
//! and a command repeated by a deduplicating agent is never needed.

use std::time::Duration;

use crate::record::Pod;

/// How often a flow reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportEvery {
    /// The knobs' default (time or per-RTT).
    Default,
    Micros(u32),
    /// Every `n/16` smoothed RTTs (16 = once per RTT), never more often than the knobs' floor.
    RttSixteenths(u32),
}

/// One flow's control entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    /// `None`: the program leaves the window alone.
    pub cwnd_bytes: Option<u64>,
    /// `None`: unpaced.
    pub pacing_bytes_per_s: Option<u64>,
    pub report: ReportEvery,
    pub rtt_threshold_us: Option<u32>,
    /// Also report once this many packets were delivered since the last report; 0: off.
    pub report_acked_pkts: u32,
    /// Measure ACK aggregation against this delivery rate, bytes/s; 0: off. The entry carries it
    /// in units of 1000 bytes/s (a non-zero rate never rounds to off).
    pub aggregation_bytes_per_s: u64,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            cwnd_bytes: None,
            pacing_bytes_per_s: None,
            report: ReportEvery::Default,
            rtt_threshold_us: None,
            report_acked_pkts: 0,
            aggregation_bytes_per_s: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct RawCtrl {
    pub cwnd_bytes: u64,
    pub pacing_rate: u64,
    pub report_interval_us: u32,
    pub report_rtts_x16: u32,
    pub rtt_threshold_us: u32,
    pub epoch: u32,
    pub seq: u32,
    pub fid: u32,
    pub report_acked_pkts: u32,
    pub aggregation_kbytes_per_s: u32,
}
const _: () = assert!(size_of::<RawCtrl>() == 48);
// SAFETY: repr(C) integers only, padding explicit.
unsafe impl Pod for RawCtrl {}

impl Control {
    /// The map value for flow `fid`, stamped with the agent's epoch and a sequence number the
    /// program echoes in reports once applied.
    pub(crate) fn encode(&self, fid: u32, epoch: u32, seq: u32) -> RawCtrl {
        let (interval, rtts) = match self.report {
            ReportEvery::Default => (0, 0),
            ReportEvery::Micros(us) => (us.max(1), 0),
            ReportEvery::RttSixteenths(n) => (0, n.max(1)),
        };
        RawCtrl {
            // 0 means "no window" to the program; a zero window is not a command anyone means.
            cwnd_bytes: self.cwnd_bytes.unwrap_or(0),
            pacing_rate: self.pacing_bytes_per_s.unwrap_or(0),
            report_interval_us: interval,
            report_rtts_x16: rtts,
            rtt_threshold_us: self.rtt_threshold_us.unwrap_or(0),
            epoch,
            seq,
            fid,
            report_acked_pkts: self.report_acked_pkts,
            aggregation_kbytes_per_s: match self.aggregation_bytes_per_s {
                0 => 0,
                r => u32::try_from(r.div_ceil(1000)).unwrap_or(u32::MAX),
            },
        }
    }
}

/// Which algorithm steers a flow the agent does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    Cubic,
    Reno,
}

/// Global settings of the congestion control, shared by every instance using the same pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// Flows whose agent has been silent longer than this run the fallback.
    pub silence_timeout: Duration,
    /// Report interval of flows without a control entry.
    pub default_report: ReportEvery,
    /// Floor of per-RTT report intervals (and of every interval).
    pub min_report_interval: Duration,
    /// Ordinary records wake the consumer at most this often; urgent ones always do.
    pub wake_gap: Duration,
    pub fallback: Fallback,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            silence_timeout: Duration::from_secs(1),
            default_report: ReportEvery::Micros(10_000),
            min_report_interval: Duration::from_millis(1),
            wake_gap: Duration::from_micros(100),
            fallback: Fallback::Cubic,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct RawKnobs {
    pub heartbeat_ns: u64,
    pub silence_timeout_ns: u64,
    pub default_interval_ns: u64,
    pub min_interval_ns: u64,
    pub wake_gap_ns: u64,
    pub epoch: u32,
    pub fallback: u32,
    pub default_rtts_x16: u32,
    pub ctrl_mask: u32,
}
const _: () = assert!(size_of::<RawKnobs>() == 56);
// SAFETY: repr(C) integers only, padding explicit.
unsafe impl Pod for RawKnobs {}

/// Shortest report interval the program may be configured with: below it a busy flow would
/// report on nearly every ACK, which is a different mode (per-ACK records) altogether.
pub const MIN_REPORT_FLOOR: Duration = Duration::from_micros(100);

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Knobs {
    /// `ctrl_slots`: entries of the control array (a power of two).
    pub(crate) fn encode(&self, epoch: u32, heartbeat_ns: u64, ctrl_slots: u32) -> RawKnobs {
        let floor = self.min_report_interval.max(MIN_REPORT_FLOOR);
        let (interval, rtts) = match self.default_report {
            ReportEvery::Default => (Duration::from_millis(10), 0),
            ReportEvery::Micros(us) => (Duration::from_micros(u64::from(us)), 0),
            ReportEvery::RttSixteenths(n) => (floor, n.max(1)),
        };
        RawKnobs {
            heartbeat_ns,
            silence_timeout_ns: ns(self.silence_timeout),
            default_interval_ns: ns(interval.max(floor)),
            min_interval_ns: ns(floor),
            wake_gap_ns: ns(self.wake_gap),
            epoch,
            fallback: match self.fallback {
                Fallback::Cubic => 0,
                Fallback::Reno => 1,
            },
            default_rtts_x16: rtts,
            ctrl_mask: ctrl_slots.max(1).next_power_of_two() - 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::pod_bytes;

    #[test]
    fn control_encodes_absent_values_as_zero() {
        let raw = Control::default().encode(5, 7, 1);
        assert_eq!(raw, RawCtrl { fid: 5, epoch: 7, seq: 1, ..RawCtrl::default() });
    }

    #[test]
    fn control_encodes_every_field() {
        let c = Control {
            cwnd_bytes: Some(14_480),
            pacing_bytes_per_s: Some(1_250_000),
            report: ReportEvery::Micros(5_000),
            rtt_threshold_us: Some(30_000),
            report_acked_pkts: 10,
            aggregation_bytes_per_s: 25_000_000,
        };
        let raw = c.encode(11, 3, 9);
        assert_eq!(raw.cwnd_bytes, 14_480);
        assert_eq!(raw.pacing_rate, 1_250_000);
        assert_eq!((raw.report_interval_us, raw.report_rtts_x16), (5_000, 0));
        assert_eq!(raw.rtt_threshold_us, 30_000);
        assert_eq!((raw.fid, raw.epoch, raw.seq), (11, 3, 9));
        // The bytes are the C layout: cwnd first, little-endian.
        assert_eq!(&pod_bytes(&raw)[..8], &14_480u64.to_le_bytes());
        assert_eq!(&pod_bytes(&raw)[28..32], &3u32.to_le_bytes());
        assert_eq!(&pod_bytes(&raw)[40..44], &10u32.to_le_bytes(), "the packet trigger follows the fid");
        assert_eq!(&pod_bytes(&raw)[44..48], &25_000u32.to_le_bytes(), "the aggregation rate last, in 1000 bytes/s");
    }

    #[test]
    fn an_aggregation_rate_is_never_rounded_to_off() {
        let kb = |r: u64| Control { aggregation_bytes_per_s: r, ..Control::default() }.encode(1, 1, 1).aggregation_kbytes_per_s;
        assert_eq!((kb(0), kb(1), kb(999), kb(1000), kb(1001)), (0, 1, 1, 1, 2));
        assert_eq!(kb(u64::MAX), u32::MAX, "saturates");
    }

    #[test]
    fn per_rtt_reports_exclude_a_time_interval() {
        let raw = Control { report: ReportEvery::RttSixteenths(16), ..Control::default() }.encode(1, 1, 1);
        assert_eq!((raw.report_interval_us, raw.report_rtts_x16), (0, 16));
        // Zero would mean "default" to the program; the smallest real request is kept.
        let raw = Control { report: ReportEvery::RttSixteenths(0), ..Control::default() }.encode(1, 1, 1);
        assert_eq!(raw.report_rtts_x16, 1);
        let raw = Control { report: ReportEvery::Micros(0), ..Control::default() }.encode(1, 1, 1);
        assert_eq!(raw.report_interval_us, 1);
    }

    #[test]
    fn knobs_floor_every_interval() {
        let k =
            Knobs { default_report: ReportEvery::Micros(10), min_report_interval: Duration::from_micros(1), ..Knobs::default() };
        let raw = k.encode(2, 1234, 65_536);
        assert_eq!(raw.ctrl_mask, 0xffff);
        assert_eq!(raw.min_interval_ns, 100_000);
        assert_eq!(raw.default_interval_ns, 100_000);
        assert_eq!((raw.epoch, raw.heartbeat_ns, raw.fallback), (2, 1234, 0));
        let per_rtt = Knobs { default_report: ReportEvery::RttSixteenths(16), fallback: Fallback::Reno, ..Knobs::default() };
        let raw = per_rtt.encode(1, 0, 1000);
        assert_eq!(raw.ctrl_mask, 1023, "a slot count is rounded up to a power of two");
        assert_eq!((raw.default_rtts_x16, raw.fallback), (16, 1));
        assert_eq!(raw.silence_timeout_ns, 1_000_000_000);
    }

    #[test]
    fn a_wake_gap_no_clock_reaches_saturates() {
        // A busy-polling agent asks never to be woken for an ordinary record.
        let raw = Knobs { wake_gap: Duration::MAX, ..Knobs::default() }.encode(1, 0, 1);
        assert_eq!(raw.wake_gap_ns, u64::MAX);
        assert_eq!(Knobs::default().encode(1, 0, 1).wake_gap_ns, 100_000);
    }
}
