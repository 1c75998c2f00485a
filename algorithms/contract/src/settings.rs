//! The datapath side of a decision: what the controller wants a datapath to hold for one flow
//! ([`Settings`]), the fields of it that changed ([`Command`]), and what a datapath can carry
//! ([`Capabilities`]). Values here are sanitized: finite, positive, clamped, integral.

use crate::action::ReportPolicy;

/// A sanitized pacing instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacingCommand {
    Off,
    BytesPerSec(u64),
}

/// Everything the controller wants the datapath to hold for a flow. The controller always has a
/// complete set (a window, a report policy); pacing and the RTT threshold stay `None` until an
/// algorithm first asks for them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub cwnd_bytes: u64,
    pub pacing: Option<PacingCommand>,
    /// In the datapath's own terms: `PerRtt` only for datapaths that count RTTs themselves
    /// ([`Capabilities::per_rtt_reports`]); otherwise an interval the controller keeps in step
    /// with the flow's smoothed RTT.
    pub report: ReportPolicy,
    pub rtt_threshold_us: Option<u64>,
    /// Report at least every this many packets acknowledged; 0: off.
    pub report_acked_pkts: u32,
    /// The rate ACK aggregation is measured against, bytes/s; 0: not measured.
    pub ack_aggregation_bw_bytes_per_s: u64,
}

impl Settings {
    /// The fields of `self` that `from` does not hold (all of them when `from` is `None`).
    #[inline]
    pub fn changes_from(&self, from: Option<&Settings>) -> Command {
        let Some(from) = from else {
            return Command {
                cwnd_bytes: Some(self.cwnd_bytes),
                pacing: self.pacing,
                report: Some(self.report),
                rtt_threshold_us: self.rtt_threshold_us,
                report_acked_pkts: (self.report_acked_pkts > 0).then_some(self.report_acked_pkts),
                ack_aggregation_bw_bytes_per_s: (self.ack_aggregation_bw_bytes_per_s > 0)
                    .then_some(self.ack_aggregation_bw_bytes_per_s),
            };
        };
        Command {
            cwnd_bytes: changed(self.cwnd_bytes, from.cwnd_bytes),
            pacing: self.pacing.filter(|p| from.pacing != Some(*p)),
            report: (self.report != from.report).then_some(self.report),
            rtt_threshold_us: self.rtt_threshold_us.filter(|t| from.rtt_threshold_us != Some(*t)),
            report_acked_pkts: changed(self.report_acked_pkts, from.report_acked_pkts),
            ack_aggregation_bw_bytes_per_s: changed(self.ack_aggregation_bw_bytes_per_s, from.ack_aggregation_bw_bytes_per_s),
        }
    }
}

#[inline]
fn changed<T: PartialEq>(new: T, old: T) -> Option<T> {
    (new != old).then_some(new)
}

/// The fields of [`Settings`] that changed; `None` fields are left as they are.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Command {
    pub cwnd_bytes: Option<u64>,
    pub pacing: Option<PacingCommand>,
    pub report: Option<ReportPolicy>,
    pub rtt_threshold_us: Option<u64>,
    /// 0 turns the packet trigger off.
    pub report_acked_pkts: Option<u32>,
    /// 0 turns the measurement off.
    pub ack_aggregation_bw_bytes_per_s: Option<u64>,
}

impl Command {
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

/// What a datapath can carry: the controller clamps every value to these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    pub max_cwnd_bytes: u64,
    pub max_rate_bytes_per_s: u64,
    /// Whether pacing, once set, can be switched off again.
    pub can_clear_pacing: bool,
    /// Whether the datapath counts RTTs itself, so a per-RTT report policy goes to it as such
    /// rather than as an interval the controller recomputes from the smoothed RTT.
    pub per_rtt_reports: bool,
    /// How the datapath turns a window in bytes into the whole packets it lets fly; `None` for
    /// a datapath that keeps bytes. A new window that comes to the same number of packets
    /// changes nothing the datapath does, so it is not sent (`Settings` keep the exact value,
    /// and the next command carries it).
    pub cwnd_packets: Option<PacketWindow>,
}

/// How a datapath rounds a window in bytes to whole packets of `mss` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketWindow {
    /// `bytes / mss`: ccp-kernel's `snd_cwnd`, and a sender that sends a packet only when all of
    /// it fits in the window.
    Floor,
    /// `(bytes + mss / 2) / mss`: the eBPF datapath's `snd_cwnd`.
    Nearest,
}

impl PacketWindow {
    #[inline]
    pub fn packets(self, bytes: u64, mss: u64) -> u64 {
        let mss = mss.max(1);
        match self {
            PacketWindow::Floor => bytes / mss,
            PacketWindow::Nearest => bytes.saturating_add(mss / 2) / mss,
        }
    }
}
