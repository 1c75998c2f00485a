//! The measurement half of the contract: what a datapath tells an algorithm about one flow.
//!
//! Every datapath (libccp over unix/netlink, the eBPF struct_ops datapath, the simulator) folds its
//! per-ACK measurements into one `Report` per interval, or sends one early when something urgent
//! happens. Algorithms see nothing else: no sockets, no clocks, no datapath types. Time arrives in
//! `now_us`, on the datapath's own clock.
//!
//! Reports serialise (serde) so a run can be recorded and replayed through any algorithm.

use serde::{Deserialize, Serialize};

/// Why a report was sent before its interval elapsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Urgent {
    /// Packets were newly marked lost (fast retransmit / SACK-based detection).
    Loss,
    /// A retransmission timeout fired.
    Timeout,
    /// The datapath's congestion state machine changed (e.g. entered CWR or Recovery).
    StateChange,
}

/// Congestion feedback carried by the network itself rather than by ACKs.
///
/// `Int` makes this about 270 bytes: kept inline on purpose (the type is `Copy`, a report carries at
/// most one, and boxing would put an allocation on the simulator's per-ACK path).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkFeedback {
    /// A QCN congestion notification (IEEE 802.1Qau style) for this flow.
    Qcn {
        /// The quantized feedback |Fb| (6 bits, 0..=63); larger means more congested.
        fb_quantized: u8,
        /// Queue offset from the equilibrium Q_eq, bytes (positive = above).
        q_off_bytes: i64,
        /// Queue change since the last sample, bytes.
        q_delta_bytes: i64,
    },
    /// In-band network telemetry echoed in an ACK: one record per switch egress the data packet
    /// crossed, as HPCC uses it (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM
    /// 2019, §3.1 and Fig. 4). The datapath passes the INT of the latest ACK it saw.
    Int(IntPath),
}

/// The most switch hops an [`IntPath`] records (HPCC's INT header holds a bounded hop list; a
/// datacenter path is at most a handful of hops).
pub const MAX_INT_HOPS: usize = 8;

/// One switch egress's INT record (HPCC §3.1, Fig. 4: qLen, txBytes, ts, B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IntHop {
    /// Bytes queued at the egress port when the packet left.
    pub queue_bytes: u64,
    /// Cumulative bytes the egress port has sent (HPCC's txBytes).
    pub tx_bytes: u64,
    /// The switch's clock when the packet left, nanoseconds.
    pub ts_ns: u64,
    /// The egress link's rate, bits per second (HPCC's B).
    pub rate_bps: u64,
}

/// The INT records of one packet's path, in hop order; fixed size so that feedback stays `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "Vec<IntHop>", into = "Vec<IntHop>")]
pub struct IntPath {
    hops: [IntHop; MAX_INT_HOPS],
    count: u8,
}

impl TryFrom<Vec<IntHop>> for IntPath {
    type Error = String;
    fn try_from(hops: Vec<IntHop>) -> Result<Self, String> {
        IntPath::new(&hops).ok_or_else(|| format!("{} INT hops; at most {MAX_INT_HOPS}", hops.len()))
    }
}

impl From<IntPath> for Vec<IntHop> {
    fn from(p: IntPath) -> Self {
        p.hops().to_vec()
    }
}

impl IntPath {
    /// A path with these hops; `None` when there are more than [`MAX_INT_HOPS`].
    pub fn new(hops: &[IntHop]) -> Option<Self> {
        if hops.len() > MAX_INT_HOPS {
            return None;
        }
        let mut p = IntPath::default();
        p.hops[..hops.len()].copy_from_slice(hops);
        p.count = hops.len() as u8;
        Some(p)
    }

    /// Appends a hop; false (and nothing recorded) when the path already holds [`MAX_INT_HOPS`].
    pub fn push(&mut self, hop: IntHop) -> bool {
        let n = usize::from(self.count);
        if n >= MAX_INT_HOPS {
            return false;
        }
        self.hops[n] = hop;
        self.count += 1;
        true
    }

    /// The recorded hops, in path order.
    #[inline]
    pub fn hops(&self) -> &[IntHop] {
        &self.hops[..usize::from(self.count)]
    }

    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// RTT statistics over the samples taken in one report interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RttStats {
    pub min_us: u64,
    pub max_us: u64,
    pub last_us: u64,
    /// Smoothed RTT: the datapath's own SRTT where it keeps one (kernel TCP), otherwise an
    /// EWMA with gain 1/8 maintained by the datapath adapter across reports.
    pub srtt_us: u64,
    /// Mean of the samples in this interval.
    pub mean_us: u64,
    /// Number of RTT samples folded into this report (always > 0 when `Report::rtt` is set).
    pub samples: u32,
}

/// One flow's measurements over `interval_us` ending at `now_us`.
///
/// Counters (`acked_*`, `lost_pkts`, `ce_*`, ...) cover only the interval; gauges
/// (`inflight_bytes`, `cwnd_bytes`, ...) are the values at the end of the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Report {
    /// Datapath clock at the end of the interval, microseconds. Monotonic per flow.
    pub now_us: u64,
    /// Length of the interval this report covers, microseconds.
    pub interval_us: u64,
    /// Maximum segment size the flow uses, bytes.
    pub mss_bytes: u32,

    /// Bytes newly cumulatively acknowledged (how far snd_una moved, SACKed data included).
    pub acked_bytes: u64,
    /// Packets first delivered by a cumulative ACK: segments SACKed earlier were counted in
    /// `sacked_pkts` then and are not counted again, so `acked_pkts + sacked_pkts` is the kernel's
    /// `delivered` over the interval (and `ce_pkts` its `delivered_ce`).
    pub acked_pkts: u64,
    /// Bytes newly selectively acknowledged (out of order).
    pub sacked_bytes: u64,
    pub sacked_pkts: u64,
    /// Packets newly marked lost.
    pub lost_pkts: u64,
    /// Retransmission timeouts in the interval.
    pub timeouts: u32,

    /// Bytes acknowledged that the network marked CE (ECN / AccECN), or that came back with ECE.
    pub ce_bytes: u64,
    pub ce_pkts: u64,
    /// ACKs that carried the ECE flag.
    pub ece_acks: u64,

    /// RTT statistics; `None` when the interval had no valid RTT sample.
    pub rtt: Option<RttStats>,
    /// RTT samples (one per ACK that carried one, whatever it acknowledged) above the threshold
    /// the algorithm set with `Action::rtt_threshold_us`: Inigo's late RTTs, counted per ACK as
    /// its kernel module counts them. Zero when no threshold is set.
    pub rtt_samples_over_threshold: u64,

    /// Send rate over the most recent rate sample, bytes/s; measured over the same packets as
    /// `recv_rate_bytes_per_s` (Nimbus needs the pair to come from the same packets).
    pub send_rate_bytes_per_s: Option<u64>,
    /// Delivery (receive) rate over the same packets, bytes/s.
    pub recv_rate_bytes_per_s: Option<u64>,
    /// The fastest of the interval's per-ACK rate samples, bytes/s: each sample's data delivered
    /// over the longer of its send and ACK intervals (Linux's rate sample), the figure tcp_bbr.c's
    /// max filter takes from every ACK. The pair above is the last sample only, one draw from
    /// these. `None` when the datapath takes no per-ACK samples or the interval had none.
    pub max_delivery_rate_bytes_per_s: Option<u64>,
    /// ACK aggregation (tcp_bbr.c's `extra_acked`), the interval's largest per-ACK value, bytes:
    /// an aggregation epoch starts when deliveries fall behind `Action::ack_aggregation_bw_bytes_per_s`
    /// × the time since the epoch began (or after 2^20 packets), and at each ACK the excess is the
    /// data delivered in the epoch beyond that product, at most the window. `None` when the
    /// datapath does not measure it (it needs each ACK: a report spreads its delivery over its
    /// interval) or no rate was set.
    pub extra_acked_bytes: Option<u64>,

    /// Bytes in the network at the end of the interval: sent and neither SACKed nor marked lost,
    /// plus retransmissions (Linux's `tcp_packets_in_flight`, RFC 6675's pipe).
    pub inflight_bytes: u64,
    /// Bytes sent and not yet cumulatively acknowledged (snd_nxt − snd_una): in flight, SACKed
    /// and marked lost alike, the span a recovery point (RFC 6582 §3.2) covers. `inflight_bytes`
    /// leaves out what was SACKed or marked lost, so a recovery point counted in it ends before
    /// the data at the cut is acknowledged. Zero when the datapath does not say (libccp has no
    /// such primitive).
    pub unacked_bytes: u64,
    /// Bytes the application has written that are not yet acknowledged (includes in-flight).
    pub pending_bytes: u64,
    /// The congestion window the datapath is using at the end of the interval, bytes.
    pub cwnd_bytes: u64,
    /// The pacing rate the datapath is using, bytes/s; `None` when unpaced or unknown.
    pub pacing_rate_bytes_per_s: Option<u64>,
    /// The sender had nothing more to send for part of the interval, so rates understate capacity.
    pub app_limited: bool,
    /// The window limited the sender during the interval: it had as much in flight as the window
    /// allowed at some point (Linux's `tcp_is_cwnd_limited`, with its slow-start rule: in slow
    /// start, a window below twice the most it had in flight counts as limiting, RFC 7661's
    /// spirit). False when the application, the receiver's window or anything else kept the flow
    /// below its window the whole interval: a window that is not limiting must not grow, or a
    /// later burst leaves at the rate of a window nobody tested. Datapaths that cannot tell
    /// report `true` (the default), as before this field existed.
    pub cwnd_limited: bool,

    /// Set when the report was sent early.
    pub urgent: Option<Urgent>,
    /// Congestion feedback from the network, when the datapath carries it.
    pub feedback: Option<NetworkFeedback>,
}

impl Default for Report {
    /// An empty interval of a flow whose window is what limits it (`cwnd_limited`): the reading a
    /// datapath that cannot tell gives, and a recording made before the field existed replays as.
    fn default() -> Self {
        Report {
            now_us: 0,
            interval_us: 0,
            mss_bytes: 0,
            acked_bytes: 0,
            acked_pkts: 0,
            sacked_bytes: 0,
            sacked_pkts: 0,
            lost_pkts: 0,
            timeouts: 0,
            ce_bytes: 0,
            ce_pkts: 0,
            ece_acks: 0,
            rtt: None,
            rtt_samples_over_threshold: 0,
            send_rate_bytes_per_s: None,
            recv_rate_bytes_per_s: None,
            max_delivery_rate_bytes_per_s: None,
            extra_acked_bytes: None,
            inflight_bytes: 0,
            unacked_bytes: 0,
            pending_bytes: 0,
            cwnd_bytes: 0,
            pacing_rate_bytes_per_s: None,
            app_limited: false,
            cwnd_limited: true,
            urgent: None,
            feedback: None,
        }
    }
}

/// One line of a report recording (`ccp-agent run --record-reports`, `ccp-sim run
/// --record-reports`), JSON: the report as the flow's algorithm was given it, so a recorded run
/// replays through any algorithm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedReport {
    /// The flow: the agent's flow id, or the simulator's flow index.
    pub flow: u64,
    pub report: Report,
}

impl Report {
    /// The MSS as f64, never zero (a zero MSS from a broken datapath would poison divisions).
    #[inline]
    pub fn mss(&self) -> f64 {
        f64::from(self.mss_bytes.max(1))
    }

    /// The segments this report delivered, and how many of them the network marked CE.
    ///
    /// Both are counted the way the kernel counts `delivered` and `delivered_ce`: each segment
    /// once, at its first delivery, whether cumulatively or selectively acknowledged
    /// (`acked_pkts + sacked_pkts` against `ce_pkts`). A duplicate ACK therefore counts as the one
    /// segment it reports, and the cumulative ACK that later closes a hole does not count the
    /// SACKed segments again (its `acked_bytes` would, while their marks were counted at SACK
    /// time). Datapaths that count no packets fall back to bytes over the MSS. The marked count
    /// never exceeds the delivered one.
    pub fn delivered_and_marked_segments(&self) -> (f64, f64) {
        let mss = self.mss();
        let pkts = self.acked_pkts.saturating_add(self.sacked_pkts);
        let delivered = if pkts > 0 { pkts as f64 } else { self.acked_bytes as f64 / mss };
        let marked = if self.ce_pkts > 0 { self.ce_pkts as f64 } else { self.ce_bytes as f64 / mss };
        (delivered, marked.min(delivered))
    }

    /// The bytes this report delivered: [`Report::delivered_and_marked_segments`]'s segments
    /// times the MSS, Linux's `acked_sacked` in bytes. Window growth counts these; the cumulative
    /// ACK (`acked_bytes`) stands still while SACKs fill a hole and then jumps by everything
    /// SACKed behind it, so it only says when a recovery point has been passed.
    pub fn delivered_bytes(&self) -> f64 {
        let pkts = self.acked_pkts.saturating_add(self.sacked_pkts);
        if pkts > 0 {
            pkts as f64 * self.mss()
        } else {
            self.acked_bytes as f64
        }
    }

    /// True when the report says the network dropped something (loss or timeout).
    #[inline]
    pub fn has_loss(&self) -> bool {
        self.lost_pkts > 0 || self.timeouts > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_path_holds_at_most_max_hops() {
        let hop = |i: u64| IntHop { queue_bytes: i, tx_bytes: 10 * i, ts_ns: 100 * i, rate_bps: 100_000_000_000 };
        let hops: Vec<IntHop> = (0..=MAX_INT_HOPS as u64).map(hop).collect();
        assert!(IntPath::new(&hops).is_none(), "nine hops are refused");
        let mut p = IntPath::new(&hops[..MAX_INT_HOPS]).unwrap();
        assert_eq!(p.hops(), &hops[..MAX_INT_HOPS]);
        assert!(!p.push(hop(9)), "a full path takes no more hops");
        assert_eq!(p.len(), MAX_INT_HOPS);
        let mut q = IntPath::default();
        assert!(q.is_empty() && q.hops().is_empty());
        assert!(q.push(hop(1)) && q.push(hop(2)));
        assert_eq!(q.hops(), &hops[1..3]);
        assert_eq!(IntPath::new(&[]).unwrap(), IntPath::default());
    }
}
