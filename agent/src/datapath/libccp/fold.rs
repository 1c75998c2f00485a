//! The standard fold: the one datapath program the agent installs on every libccp datapath.
//!
//! It folds libccp's per-ACK primitives into the fields of the measurement contract and reports
//! once per `interval_us` of datapath time, at once on a loss or a timeout, as soon as an
//! eighth of a window and at least eight packets have been acknowledged (but not more often than
//! every `interval_us`/16), and — when an algorithm asks — as soon as a given number of packets
//! has been acknowledged.
//!
//! The data-driven trigger is there because libccp runs the fold only on ACKs: a time-only
//! fold reports at the first ACK after a quiet period, so when ACKs come in bursts (slow start,
//! ACK compression) the rest of a burst waits a whole round trip for the next one, and an
//! algorithm that grows with what is acknowledged (slow start doubling) grows ~1.6× per RTT
//! instead of 2× (measured with the libccp test datapath). Reporting every eighth of a window
//! leaves at most that eighth of a burst for the next round trip; the gap bounds the report
//! rate at 16 per interval whatever the RTT. The packet floor keeps small windows from turning
//! the eighth into a report per ACK: at 1,000 flows of 4–7 packets each (2 Mbit/s, 20 ms) that
//! was 3.4× the reports of a per-RTT agent, and the agent fell behind (issue 19); with it a
//! window below 64 packets reports at most every 8 packets, or on the timer. A floor of 4 still
//! had a 10-packet window report 2.5 times per round trip (with per-RTT reports, 51 reports per
//! flow-second against portus's 34 on that workload); 8 matches portus's count (issue 37, the
//! figures in docs/performance.md). Every algorithm
//! shares it, so a datapath holds one program for its whole life (libccp's table has 9 usable
//! slots and no uninstall) and a hot swap needs no new program. The program source and the
//! decoder of its reports live together here so they cannot drift apart.
//!
//! libccp quirks the program is written around:
//! - `Flow.rtt_sample_us` reads 0xFFFFFFFF when the ACK carried no RTT sample, so `min` folds
//!   ignore it, and every other RTT fold first maps it to 0 through the local `rtt`;
//! - a subtraction that would underflow aborts the whole invocation (report included), so the
//!   program never subtracts;
//! - registers are u64 but immediates must stay below 2^31.

use std::sync::OnceLock;
use std::time::Instant;

use ccp_contract::{Report, RttStats, Urgent};
use ccp_lang::Program;

/// The fold program, in the CCP datapath language.
pub const SOURCE: &str = r#"
# ccp-agent standard fold: fills the Report of the measurement contract.
(def (Report
    (volatile acked_bytes 0)
    (volatile acked_pkts 0)
    (volatile sacked_bytes 0)
    (volatile sacked_pkts 0)
    (volatile lost_pkts 0)
    (volatile timeouts 0)
    (volatile ecn_bytes 0)
    (volatile ecn_pkts 0)
    (volatile ece_acks 0)
    (volatile rtt_min_us +infinity)
    (volatile rtt_max_us 0)
    (volatile rtt_last_us 0)
    (volatile rtt_sum_us 0)
    (volatile rtt_samples 0)
    (volatile rtt_over_samples 0)
    (volatile send_rate 0)
    (volatile recv_rate 0)
    (volatile max_delivery_rate 0)
    (volatile inflight_bytes 0)
    (volatile pending_bytes 0)
    (volatile cwnd_bytes 0)
    (volatile rate_bytes 0)
    (volatile now_us 0)
    (volatile urgent 0)
    (volatile cwnd_limited 0))
  (interval_us 10000)
  (mss_bytes 1448)
  (rtt_thresh_us +infinity)
  (report_pkts_below +infinity))
(when true
  (:= rtt 0)
  (:= rtt (if (< Flow.rtt_sample_us 2000000000) Flow.rtt_sample_us))
  (:= has_rtt 0)
  (:= has_rtt (if (> rtt 0) 1))
  (:= over 0)
  (:= over (if (> rtt rtt_thresh_us) 1))
  (:= ece 0)
  (:= ece (if (> Ack.ecn_bytes 0) 1))
  (:= Report.acked_bytes (+ Report.acked_bytes Ack.bytes_acked))
  (:= Report.acked_pkts (+ Report.acked_pkts Ack.packets_acked))
  (:= Report.sacked_bytes (+ Report.sacked_bytes Ack.bytes_misordered))
  (:= Report.sacked_pkts (+ Report.sacked_pkts Ack.packets_misordered))
  (:= Report.lost_pkts (+ Report.lost_pkts Ack.lost_pkts_sample))
  (:= Report.ecn_bytes (+ Report.ecn_bytes Ack.ecn_bytes))
  (:= Report.ecn_pkts (+ Report.ecn_pkts Ack.ecn_packets))
  (:= Report.ece_acks (+ Report.ece_acks ece))
  (:= Report.rtt_min_us (min Report.rtt_min_us Flow.rtt_sample_us))
  (:= Report.rtt_max_us (max Report.rtt_max_us rtt))
  (:= Report.rtt_last_us (if (> rtt 0) rtt))
  (:= Report.rtt_sum_us (+ Report.rtt_sum_us rtt))
  (:= Report.rtt_samples (+ Report.rtt_samples has_rtt))
  (:= Report.rtt_over_samples (+ Report.rtt_over_samples over))
  (:= rates (&& (> Flow.rate_outgoing 0) (> Flow.rate_incoming 0)))
  (:= Report.send_rate (if rates Flow.rate_outgoing))
  (:= Report.recv_rate (if rates Flow.rate_incoming))
  (:= delivery 0)
  (:= delivery (if rates (min Flow.rate_outgoing Flow.rate_incoming)))
  (:= Report.max_delivery_rate (max Report.max_delivery_rate delivery))
  (:= Report.cwnd_limited (if (> (+ (+ (+ Flow.bytes_in_flight Ack.bytes_acked) Ack.bytes_misordered) mss_bytes) Cwnd) 1))
  (fallthrough))
# The gauges (in flight, pending, window, rate, time) are read only when a report goes out:
# libccp interprets every instruction of this program on every ACK.
(when Flow.was_timeout
  (:= Report.timeouts (+ Report.timeouts 1))
  (:= Report.urgent 2)
  (:= Report.inflight_bytes Flow.bytes_in_flight)
  (:= Report.pending_bytes Flow.bytes_pending)
  (:= Report.cwnd_bytes Cwnd)
  (:= Report.rate_bytes Rate)
  (:= Report.now_us Ack.now)
  (report)
  (:= Micros 0))
(when (> Ack.lost_pkts_sample 0)
  (:= Report.urgent 1)
  (:= Report.inflight_bytes Flow.bytes_in_flight)
  (:= Report.pending_bytes Flow.bytes_pending)
  (:= Report.cwnd_bytes Cwnd)
  (:= Report.rate_bytes Rate)
  (:= Report.now_us Ack.now)
  (report)
  (:= Micros 0))
(when (&& (> (* Report.acked_bytes 8) Cwnd) (&& (> Report.acked_pkts 7) (> (* Micros 16) interval_us)))
  (:= Report.inflight_bytes Flow.bytes_in_flight)
  (:= Report.pending_bytes Flow.bytes_pending)
  (:= Report.cwnd_bytes Cwnd)
  (:= Report.rate_bytes Rate)
  (:= Report.now_us Ack.now)
  (report)
  (:= Micros 0))
(when (> (+ Report.acked_pkts Report.sacked_pkts) report_pkts_below)
  (:= Report.inflight_bytes Flow.bytes_in_flight)
  (:= Report.pending_bytes Flow.bytes_pending)
  (:= Report.cwnd_bytes Cwnd)
  (:= Report.rate_bytes Rate)
  (:= Report.now_us Ack.now)
  (report)
  (:= Micros 0))
(when (> Micros interval_us)
  (:= Report.inflight_bytes Flow.bytes_in_flight)
  (:= Report.pending_bytes Flow.bytes_pending)
  (:= Report.cwnd_bytes Cwnd)
  (:= Report.rate_bytes Rate)
  (:= Report.now_us Ack.now)
  (report)
  (:= Micros 0))
"#;

/// Control variable holding the report interval, µs.
pub const CTL_INTERVAL_US: &str = "interval_us";
/// Control variable holding the flow's MSS, bytes: a window is full when less than one MSS of it
/// is free.
pub const CTL_MSS_BYTES: &str = "mss_bytes";
/// Control variable holding the RTT threshold, µs.
pub const CTL_RTT_THRESHOLD_US: &str = "rtt_thresh_us";
/// Control variable holding one less than the packets acknowledged that trigger a report (the
/// language has `>` but no `>=`, and a subtraction that underflows aborts the program); off:
/// the largest value.
pub const CTL_REPORT_PKTS_BELOW: &str = "report_pkts_below";

const URGENT_LOSS: u64 = 1;
const URGENT_TIMEOUT: u64 = 2;

/// Register index of every report field, resolved once from the compiled program.
#[derive(Debug, Clone)]
pub struct Layout {
    pub num_fields: usize,
    acked_bytes: usize,
    acked_pkts: usize,
    sacked_bytes: usize,
    sacked_pkts: usize,
    lost_pkts: usize,
    timeouts: usize,
    ecn_bytes: usize,
    ecn_pkts: usize,
    ece_acks: usize,
    rtt_min_us: usize,
    rtt_max_us: usize,
    rtt_last_us: usize,
    rtt_sum_us: usize,
    rtt_samples: usize,
    rtt_over_samples: usize,
    send_rate: usize,
    recv_rate: usize,
    max_delivery_rate: usize,
    inflight_bytes: usize,
    pending_bytes: usize,
    cwnd_bytes: usize,
    rate_bytes: usize,
    now_us: usize,
    urgent: usize,
    cwnd_limited: usize,
}

/// The compiled standard fold and its layout.
pub struct Fold {
    pub program: Program,
    pub layout: Layout,
}

impl Fold {
    /// The fold every adapter of the process shares, compiled on first use: its source is a
    /// constant, and compiling it costs far more than anything an adapter does with one datagram.
    pub fn standard() -> anyhow::Result<&'static Fold> {
        static STANDARD: OnceLock<Result<Fold, String>> = OnceLock::new();
        STANDARD.get_or_init(|| Fold::compile().map_err(|e| format!("{e:#}"))).as_ref().map_err(|e| anyhow::anyhow!("{e}"))
    }

    pub fn compile() -> anyhow::Result<Fold> {
        let program = ccp_lang::compile(SOURCE).map_err(|e| anyhow::anyhow!("standard fold does not compile: {e}"))?;
        let idx =
            |name: &str| program.report_index(name).ok_or_else(|| anyhow::anyhow!("standard fold has no report field {name:?}"));
        let layout = Layout {
            num_fields: program.report_fields().len(),
            acked_bytes: idx("acked_bytes")?,
            acked_pkts: idx("acked_pkts")?,
            sacked_bytes: idx("sacked_bytes")?,
            sacked_pkts: idx("sacked_pkts")?,
            lost_pkts: idx("lost_pkts")?,
            timeouts: idx("timeouts")?,
            ecn_bytes: idx("ecn_bytes")?,
            ecn_pkts: idx("ecn_pkts")?,
            ece_acks: idx("ece_acks")?,
            rtt_min_us: idx("rtt_min_us")?,
            rtt_max_us: idx("rtt_max_us")?,
            rtt_last_us: idx("rtt_last_us")?,
            rtt_sum_us: idx("rtt_sum_us")?,
            rtt_samples: idx("rtt_samples")?,
            rtt_over_samples: idx("rtt_over_samples")?,
            send_rate: idx("send_rate")?,
            recv_rate: idx("recv_rate")?,
            max_delivery_rate: idx("max_delivery_rate")?,
            inflight_bytes: idx("inflight_bytes")?,
            pending_bytes: idx("pending_bytes")?,
            cwnd_bytes: idx("cwnd_bytes")?,
            rate_bytes: idx("rate_bytes")?,
            now_us: idx("now_us")?,
            urgent: idx("urgent")?,
            cwnd_limited: idx("cwnd_limited")?,
        };
        for ctl in [CTL_INTERVAL_US, CTL_RTT_THRESHOLD_US, CTL_REPORT_PKTS_BELOW, CTL_MSS_BYTES] {
            if program.control(ctl).is_none() {
                anyhow::bail!("standard fold has no control variable {ctl:?}");
            }
        }
        Ok(Fold { program, layout })
    }
}

/// Per-flow state the decoder keeps between reports.
#[derive(Debug, Clone)]
pub struct FlowDecoder {
    pub mss_bytes: u32,
    /// The previous report had no selective acknowledgement and no loss (see `decode`).
    prev_in_order: bool,
    prev_now_us: Option<u64>,
    prev_at: Instant,
    srtt_us: Option<f64>,
}

impl FlowDecoder {
    pub fn new(mss_bytes: u32, started_at: Instant) -> Self {
        FlowDecoder { mss_bytes, prev_in_order: true, prev_now_us: None, prev_at: started_at, srtt_us: None }
    }

    /// Turns one MEASURE's fields into a `Report`. `fields.len()` must equal `layout.num_fields`.
    pub fn decode(&mut self, layout: &Layout, fields: &[u64], received_at: Instant) -> Report {
        let f = |i: usize| fields.get(i).copied().unwrap_or(0);
        let now_us = f(layout.now_us);
        let interval_us = match self.prev_now_us {
            Some(prev) if now_us >= prev => now_us - prev,
            // First report (or a datapath clock that went backwards): fall back to agent time.
            _ => received_at.saturating_duration_since(self.prev_at).as_micros() as u64,
        };
        self.prev_now_us = Some(now_us);
        self.prev_at = received_at;

        let samples = f(layout.rtt_samples);
        let rtt = if samples > 0 {
            let mean = f(layout.rtt_sum_us) as f64 / samples as f64;
            // Equivalent to applying RFC 6298's 1/8-gain update once per sample at the mean.
            let gain = 1.0 - 0.875f64.powi(samples.min(64) as i32);
            let srtt = match self.srtt_us {
                Some(s) => s + gain * (mean - s),
                None => mean,
            };
            self.srtt_us = Some(srtt);
            let last = match f(layout.rtt_last_us) {
                0 => mean.round() as u64,
                v => v,
            };
            Some(RttStats {
                min_us: f(layout.rtt_min_us),
                max_us: f(layout.rtt_max_us),
                last_us: last,
                srtt_us: srtt.round() as u64,
                mean_us: mean.round() as u64,
                samples: samples.min(u64::from(u32::MAX)) as u32,
            })
        } else {
            None
        };

        let acked_bytes = f(layout.acked_bytes);
        let acked_pkts = f(layout.acked_pkts);
        // A datapath may change its MSS (PMTU discovery); learn it from what was acked — but
        // only while data arrives in order. When a cumulative ACK passes data SACKed before,
        // `acked_bytes` holds those bytes and `acked_pkts` not their packets (the contract's
        // meaning), so bytes per packet is no MSS: on the QUIC datapath a hole closing after
        // 16 SACKed packets read as a 23,232-byte MSS, and the algorithm's window followed.
        // Such a report follows one with SACKs or losses (or has them itself).
        let in_order = f(layout.sacked_pkts) == 0 && f(layout.lost_pkts) == 0;
        let learn = in_order && self.prev_in_order;
        self.prev_in_order = in_order;
        if learn && acked_pkts > 0 && acked_bytes >= acked_pkts {
            let mss = acked_bytes / acked_pkts;
            if mss > 0 && mss <= u64::from(u16::MAX) {
                self.mss_bytes = mss as u32;
            }
        }
        let (send, recv) = (f(layout.send_rate), f(layout.recv_rate));
        Report {
            now_us,
            interval_us,
            mss_bytes: self.mss_bytes,
            acked_bytes,
            acked_pkts,
            sacked_bytes: f(layout.sacked_bytes),
            sacked_pkts: f(layout.sacked_pkts),
            lost_pkts: f(layout.lost_pkts),
            timeouts: f(layout.timeouts).min(u64::from(u32::MAX)) as u32,
            ce_bytes: f(layout.ecn_bytes),
            ce_pkts: f(layout.ecn_pkts),
            ece_acks: f(layout.ece_acks),
            rtt,
            rtt_samples_over_threshold: f(layout.rtt_over_samples),
            send_rate_bytes_per_s: (send > 0 && recv > 0).then_some(send),
            recv_rate_bytes_per_s: (send > 0 && recv > 0).then_some(recv),
            max_delivery_rate_bytes_per_s: match f(layout.max_delivery_rate) {
                0 => None,
                r => Some(r),
            },
            // libccp folds in a program the agent does not write per ACK: no aggregation epochs.
            extra_acked_bytes: None,
            inflight_bytes: f(layout.inflight_bytes),
            // libccp has no primitive for snd_nxt − snd_una: the window falls back to the flight.
            unacked_bytes: 0,
            pending_bytes: f(layout.pending_bytes),
            cwnd_bytes: f(layout.cwnd_bytes),
            pacing_rate_bytes_per_s: match f(layout.rate_bytes) {
                0 => None,
                r => Some(r),
            },
            // libccp has no app-limited primitive; see the module docs of the adapter.
            app_limited: false,
            cwnd_limited: f(layout.cwnd_limited) > 0,
            // libccp's fallthrough flag is sticky, so every true clause after the first runs and
            // the last one to write `urgent` wins; the counters say what actually happened.
            urgent: match f(layout.urgent) {
                0 => None,
                _ if f(layout.timeouts) > 0 => Some(Urgent::Timeout),
                URGENT_LOSS | URGENT_TIMEOUT => Some(Urgent::Loss),
                _ => None,
            },
            feedback: None,
        }
    }
}
