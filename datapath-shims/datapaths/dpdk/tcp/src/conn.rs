//! One sending TCP connection as a pure state machine: active open, we send a
//! byte stream, the peer (an ordinary kernel receiver) only acknowledges.
//!
//! - Handshake, sequence space, RST acceptance: RFC 9293 (formerly 793).
//! - Options: MSS, window scale and timestamps (RFC 7323), SACK (RFC 2018).
//! - Loss recovery: SACK scoreboard and pipe (RFC 6675); loss marking by RACK
//!   (RFC 8985) with reo_wnd = 0 while no reordering was seen and enough was
//!   SACKed (the DupThresh rule RFC 8985 §6.2 keeps); tail loss probes
//!   (RFC 8985 §7). Without SACK: three duplicate ACKs (RFC 5681) and NewReno
//!   partial ACKs (RFC 6582).
//! - Retransmission timer: RFC 6298 (integer SRTT/RTTVAR, Karn, backoff).
//! - ECN: RFC 3168 (ECE+CWR in the SYN, ECT(0) on new data only, CWR once per
//!   window after an ECE).
//! - Per-ACK rate sample: draft-cheng-iccrg-delivery-rate-estimation.
//!
//! Congestion control is not here: the window and pacing rate come from
//! outside (`set_cwnd_bytes`, `set_rate_bytes_per_s`); this only measures.
//!
//! Sequence numbers are kept internally as 64-bit "stream sequence" values
//! (0 = our ISN, 1 = first payload byte) so comparisons never wrap; they are
//! mapped to 32-bit wire numbers only at the edges.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::wire::{TcpFlags, TcpIn};

/// The timestamp clock ticks once per ms: RFC 7323 §5.4 wants 1 ms..1 s per
/// tick, and a faster clock would make receivers' PAWS misjudge long idle periods.
const TS_TICK_US: u64 = 1000;
/// RFC 6298 clock granularity G: the RTO is at least SRTT + G.
const RTO_GRANULARITY_US: u64 = 1000;
/// RFC 6298 §5.7: RTO once data starts if the SYN had to be retransmitted.
const RTO_AFTER_SYN_LOSS_US: u64 = 3_000_000;
/// RFC 7323 §2.3: shift counts above 14 are treated as 14.
const MAX_WSCALE: u8 = 14;
/// RFC 9293 §3.7.1 default when the peer sends no MSS option.
const DEFAULT_PEER_MSS: u16 = 536;
/// A floor so a nonsensical peer MSS cannot make us emit tiny segments forever.
const MIN_MSS_BYTES: u16 = 64;
const TS_OPTION_BYTES: u16 = 12;
/// RFC 8985 §7.2 WCDelAckT: worst-case delayed-ACK time of the receiver.
const TLP_DELAYED_ACK_US: u64 = 200_000;
/// Linux's floor for the probe timeout (TCP_TIMEOUT_MIN, 2 jiffies ≈ 2 ms at HZ=1000).
const TLP_MIN_PTO_US: u64 = 2_000;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    Reset,
    SynRetriesExhausted,
    TooManyTimeouts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    SynSent,
    Established,
    /// All data and our FIN are sent; waiting for the FIN to be acknowledged.
    FinSent,
    /// Our FIN was acknowledged.
    Closed,
    Failed(FailReason),
}

/// One segment to put on the wire. The payload is the byte stream at
/// `stream_offset .. stream_offset + payload_len`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegOut {
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    pub window: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub ts: Option<(u32, u32)>,
    /// Mark the IP header ECT(0).
    pub ect: bool,
    pub stream_offset: u64,
    pub payload_len: u16,
    /// Not on the wire: true when this is a retransmission (for the caller's stats).
    pub retransmission: bool,
}

/// What one ACK (or one timer expiry) measured: libccp's per-ACK primitives.
///
/// Byte accounting convention (Linux/libccp): `bytes_acked` counts bytes newly
/// covered by the cumulative ACK that had *not* been SACKed before;
/// `bytes_misordered` counts bytes newly SACKed. Every payload byte is counted
/// exactly once in one of the two, so over a transfer of N bytes
/// Σ(bytes_acked + bytes_misordered) == N. A FIN counts as a packet but 0 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckSample {
    pub bytes_acked: u32,
    pub packets_acked: u32,
    pub bytes_misordered: u32,
    pub packets_misordered: u32,
    /// Bytes/packets delivered (acked + SACKed) by this ACK when it carried ECE.
    pub ecn_bytes: u32,
    pub ecn_packets: u32,
    /// Segments newly marked lost by this ACK (RACK / DupThresh) or this timeout.
    pub lost_pkts_sample: u32,
    pub was_timeout: bool,
    /// From the newest newly delivered never-retransmitted segment, else from
    /// TSecr (1 ms resolution) on an ACK that advanced the cumulative point.
    pub rtt_sample_us: Option<u32>,
    /// Delivery-rate estimation over the newest delivered segment's interval:
    /// delivered bytes / send interval and / ACK interval, in bytes/s. 0 when
    /// unknown or when the interval is shorter than min RTT (ACK compression).
    pub rate_outgoing: u64,
    pub rate_incoming: u64,
    /// The rates above were measured over a flight sent while we had nothing
    /// more to send, so they can understate the path (draft-cheng §3.4).
    pub rate_app_limited: bool,
    /// RFC 6675 pipe after processing: sent - SACKed - marked lost (+ retransmitted).
    pub bytes_in_flight: u32,
    pub packets_in_flight: u32,
    /// Stream bytes not yet cumulatively acknowledged; u32::MAX when unlimited.
    pub bytes_pending: u32,
    pub now_us: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Stream bytes cumulatively acknowledged.
    pub bytes_acked_total: u64,
    /// New stream bytes sent (first transmissions only).
    pub bytes_sent_total: u64,
    pub segs_sent: u64,
    pub pure_acks_sent: u64,
    pub retx_segs: u64,
    pub retx_bytes: u64,
    /// Retransmissions of segments RACK/DupThresh marked lost (not the timeout).
    pub fast_retx: u64,
    pub syn_retx: u64,
    pub timeouts: u64,
    pub lost_marked: u64,
    pub ece_acks: u64,
    pub cwr_sent: u64,
    pub dsack_blocks: u64,
    pub reordering_events: u64,
    /// Sum of all `rej_*` counters.
    pub rejected_segments: u64,
    /// ACK number beyond anything we sent.
    pub rej_ack_unsent: u64,
    /// ACK older than snd_una (reordered or stale).
    pub rej_old_ack: u64,
    /// Segment without the ACK flag in a synchronized state.
    pub rej_no_ack_flag: u64,
    /// SYN-ACK with a wrong ACK, or something other than a SYN-ACK in SynSent.
    pub rej_bad_synack: u64,
    /// RST outside the receive window (RFC 5961 §3 blind-reset defence).
    pub rej_bad_rst: u64,
    /// Segments arriving after Closed/Failed.
    pub rej_after_close: u64,
    /// SACK blocks ignored: empty/inverted or reaching beyond snd_nxt.
    pub rej_sack_blocks: u64,
    /// ACKs whose window would move the right edge left (honoured, counted).
    pub window_shrinks: u64,
    /// Payload bytes the peer sent us (we accept none).
    pub peer_data_ignored_bytes: u64,
    pub zero_window_probes: u64,
    /// RFC 8985 §7 tail loss probes sent.
    pub tlp_probes: u64,
    /// RFC 5961 §3.2 challenge ACKs owed for in-window, inexact RSTs.
    pub challenge_acks: u64,
    /// RSTs sent in SYN-SENT to clear a stale connection of our four-tuple at the peer.
    pub resets_sent: u64,
}

#[derive(Debug, Clone, Copy)]
struct Seg {
    /// Stream sequence of the first byte.
    start: u64,
    len: u32,
    fin: bool,
    last_sent_us: u64,
    xmits: u32,
    sacked: bool,
    /// Marked lost and not yet retransmitted (not in the pipe).
    lost: bool,
    lost_by_timeout: bool,
    // Delivery-rate snapshot at the latest (re)transmission.
    tx_delivered: u64,
    tx_delivered_us: u64,
    tx_first_sent_us: u64,
    tx_app_limited: bool,
}

impl Seg {
    fn end(&self) -> u64 {
        self.start + u64::from(self.len) + u64::from(self.fin)
    }
}

/// RFC 8985 §6.2 step 4: recoveries without a D-SACK before reo_wnd shrinks back.
const REO_WND_PERSIST: u32 = 16;
/// reo_wnd is capped at SRTT anyway; this only bounds the counter.
const REO_WND_MULT_MAX: u32 = 64;

/// RFC 8985 RACK_sent_after: later send time wins, equal times go by sequence.
fn sent_after(t1: u64, end1: u64, t2: u64, end2: u64) -> bool {
    t1 > t2 || (t1 == t2 && end1 > end2)
}

#[derive(Debug, Clone, Copy, Default)]
struct Rack {
    valid: bool,
    xmit_us: u64,
    end_seq: u64,
    rtt_us: u64,
    /// Highest end sequence delivered (forward-most ACKed/SACKed).
    fack: u64,
    reordering_seen: bool,
    /// RFC 8985 §6.2 step 4: reo_wnd = mult × min_rtt/4, grown by D-SACKs
    /// (at most once per round) and reset after `REO_WND_PERSIST` recoveries.
    reo_wnd_mult: u32,
    dsack_round_end: Option<u64>,
    reo_wnd_persist: u32,
}

#[derive(Debug, Clone)]
pub struct Conn {
    cfg: Config,
    state: State,
    iss: u32,
    total_bytes: Option<u64>,

    snd_una: u64,
    snd_nxt: u64,
    /// Peer receive window in bytes (already scaled).
    snd_wnd: u64,
    max_right_edge: u64,
    snd_wscale: u8,
    rcv_nxt: u32,
    peer_fin: bool,
    mss: u16,
    sack_ok: bool,
    ts_ok: bool,
    ecn_ok: bool,
    ts_recent: u32,

    scoreboard: VecDeque<Seg>,
    /// The in-flight segments (neither SACKed nor marked lost) keyed by
    /// (last send time, end sequence): RACK's time-ordered view (RFC 8985
    /// §6.2), so loss detection only touches segments that can be lost now
    /// instead of rescanning a scoreboard full of SACKed segments on every ACK.
    tsorted: BTreeSet<(u64, u64)>,
    inflight_bytes: u64,
    inflight_pkts: u32,
    sacked_pkts: u32,
    lost_pkts: u32,
    /// End sequences of the segments marked lost and not yet retransmitted,
    /// so the next retransmission is found without a scoreboard scan.
    lost_ends: BTreeSet<u64>,
    /// Merged [start, end) ranges of SACKed segments above snd_una. A SACK
    /// block usually repeats what earlier ACKs reported plus one segment;
    /// this lets each ACK visit only the new part (Linux's SACK cache idea).
    sacked_ranges: BTreeMap<u64, u64>,
    fin_queued: bool,
    dupacks: u32,

    cwnd: u32,
    rate_bytes_per_s: u64,
    next_send_us: u64,

    srtt_us: Option<u64>,
    rttvar_us: u64,
    rto_us: u64,
    backoff: u32,
    min_rtt_us: Option<u64>,
    rto_deadline: Option<u64>,
    rack_deadline: Option<u64>,
    persist_deadline: Option<u64>,
    probe_allowed: bool,
    tlp_deadline: Option<u64>,
    tlp_pending: bool,
    tlp_outstanding: bool,
    rack: Rack,
    in_recovery: bool,
    recovery_point: u64,

    syn_pending: bool,
    syn_xmits: u32,
    syn_sent_us: u64,
    syn_deadline: Option<u64>,
    syn_ecn_offered: bool,

    delivered: u64,
    delivered_us: u64,
    first_sent_us: u64,

    /// draft-cheng §3.4 C.app_limited: delivered count until which samples
    /// are app-limited; 0 = not app-limited.
    app_limited_until: u64,
    cwr_pending: bool,
    cwr_high: u64,
    ack_pending: bool,
    /// RFC 9293 §3.10.7.3: in SYN-SENT an ACK that does not ack our SYN (a connection of the
    /// same four-tuple the peer still holds from an earlier run, answering our SYN with a
    /// challenge ACK) is answered with a RST of this sequence number, which clears it; our SYN's
    /// retransmission then opens the connection.
    rst_owed: Option<u32>,

    cwnd_set_by_controller: bool,
    stats: ConnStats,
}

impl Conn {
    /// Starts in SynSent; the SYN goes out on the first `poll_transmit`.
    pub fn new(cfg: &Config, isn: u32, total_bytes: Option<u64>, now_us: u64) -> Conn {
        let mut cfg = cfg.clone();
        // Nonsense settings are tamed rather than trusted (clamp() would panic on min > max).
        cfg.mss_bytes = cfg.mss_bytes.max(MIN_MSS_BYTES);
        cfg.rto_min_us = cfg.rto_min_us.max(1);
        cfg.rto_max_us = cfg.rto_max_us.max(cfg.rto_min_us);
        cfg.dupthresh = cfg.dupthresh.max(1);
        let rto = cfg.rto_initial_us.max(cfg.rto_min_us);
        Conn {
            state: State::SynSent,
            iss: isn,
            total_bytes,
            snd_una: 0,
            snd_nxt: 1,
            snd_wnd: 0,
            max_right_edge: 0,
            snd_wscale: 0,
            rcv_nxt: 0,
            peer_fin: false,
            mss: cfg.mss_bytes,
            sack_ok: false,
            ts_ok: false,
            ecn_ok: false,
            ts_recent: 0,
            scoreboard: VecDeque::new(),
            tsorted: BTreeSet::new(),
            inflight_bytes: 0,
            inflight_pkts: 0,
            sacked_pkts: 0,
            lost_pkts: 0,
            lost_ends: BTreeSet::new(),
            sacked_ranges: BTreeMap::new(),
            fin_queued: false,
            dupacks: 0,
            cwnd: cfg.init_cwnd_pkts.saturating_mul(u32::from(cfg.mss_bytes)),
            rate_bytes_per_s: 0,
            next_send_us: now_us,
            srtt_us: None,
            rttvar_us: 0,
            rto_us: rto,
            backoff: 0,
            min_rtt_us: None,
            rto_deadline: None,
            rack_deadline: None,
            persist_deadline: None,
            probe_allowed: false,
            tlp_deadline: None,
            tlp_pending: false,
            tlp_outstanding: false,
            rack: Rack { reo_wnd_mult: 1, ..Rack::default() },
            in_recovery: false,
            recovery_point: 0,
            syn_pending: true,
            syn_xmits: 0,
            syn_sent_us: now_us,
            syn_deadline: None,
            syn_ecn_offered: false,
            delivered: 0,
            delivered_us: now_us,
            first_sent_us: now_us,
            app_limited_until: 0,
            cwr_pending: false,
            cwr_high: 0,
            ack_pending: false,
            rst_owed: None,
            cwnd_set_by_controller: false,
            stats: ConnStats::default(),
            cfg,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn cwnd_bytes(&self) -> u32 {
        self.cwnd
    }
    pub fn mss(&self) -> u16 {
        self.mss
    }
    pub fn srtt_us(&self) -> Option<u32> {
        self.srtt_us.map(|v| v.min(u64::from(u32::MAX)) as u32)
    }
    pub fn min_rtt_us(&self) -> Option<u32> {
        self.min_rtt_us.map(|v| v.min(u64::from(u32::MAX)) as u32)
    }
    pub fn rto_us(&self) -> u64 {
        self.current_rto()
    }
    pub fn ecn_enabled(&self) -> bool {
        self.ecn_ok
    }
    pub fn sack_enabled(&self) -> bool {
        self.sack_ok
    }
    pub fn timestamps_enabled(&self) -> bool {
        self.ts_ok
    }
    /// Peer's window shift count (0 when the peer sent no WS option).
    pub fn peer_wscale(&self) -> u8 {
        self.snd_wscale
    }
    /// Peer's receive window in bytes, scaled.
    pub fn peer_window_bytes(&self) -> u64 {
        self.snd_wnd
    }
    pub fn bytes_in_flight(&self) -> u64 {
        self.inflight_bytes
    }
    pub fn packets_in_flight(&self) -> u32 {
        self.inflight_pkts
    }
    pub fn stats(&self) -> &ConnStats {
        &self.stats
    }

    /// A window below one MSS still lets one segment out when nothing is in
    /// flight, so a tiny window slows the flow instead of stalling it.
    /// Until this is called the window is `init_cwnd_pkts` × the negotiated
    /// MSS; a value set before the handshake completes is kept.
    pub fn set_cwnd_bytes(&mut self, cwnd: u32) {
        self.cwnd = cwnd;
        self.cwnd_set_by_controller = true;
    }

    /// 0 = unpaced. Otherwise segments leave `payload_len / rate` apart, with
    /// a bucket of `Config::pacing_burst_bytes` for catching up.
    pub fn set_rate_bytes_per_s(&mut self, rate: u64) {
        self.rate_bytes_per_s = rate;
    }

    /// Ends the stream after the bytes already sent: no new data, then our
    /// FIN once retransmissions are done (for unlimited or time-bounded runs).
    /// Before the handshake completes, the stream becomes empty.
    pub fn close(&mut self) {
        let sent = self.snd_nxt.saturating_sub(1);
        self.total_bytes = Some(self.total_bytes.map_or(sent, |t| t.min(sent)));
    }

    /// Stream bytes sent at least once.
    pub fn bytes_sent(&self) -> u64 {
        self.stats.bytes_sent_total
    }

    fn seq32(&self, s: u64) -> u32 {
        self.iss.wrapping_add(s as u32)
    }

    /// The stream sequence for a wire number near snd_una (within ±2^31).
    fn unwrap_seq(&self, wire: u32) -> i128 {
        let d = wire.wrapping_sub(self.seq32(self.snd_una)) as i32;
        i128::from(self.snd_una) + i128::from(d)
    }

    fn tsval(&self, now_us: u64) -> u32 {
        ((now_us / TS_TICK_US) as u32).wrapping_add(self.iss)
    }

    fn current_rto(&self) -> u64 {
        let shifted = if self.backoff >= 32 { u64::MAX } else { self.rto_us.saturating_mul(1u64 << self.backoff) };
        shifted.min(self.cfg.rto_max_us).max(self.cfg.rto_min_us)
    }

    fn data_end(&self) -> Option<u64> {
        self.total_bytes.map(|t| 1 + t)
    }

    fn has_unsent_data(&self) -> bool {
        match self.data_end() {
            Some(end) => self.snd_nxt < end && !self.fin_queued,
            None => true,
        }
    }

    fn reject(&mut self, which: fn(&mut ConnStats) -> &mut u64) {
        *which(&mut self.stats) += 1;
        self.stats.rejected_segments += 1;
    }

    pub fn on_segment(&mut self, seg: &TcpIn, now_us: u64) -> Option<AckSample> {
        match self.state {
            State::Closed if seg.flags.fin && !seg.flags.rst => {
                // The peer closes after we did: it still needs our ACK.
                self.on_peer_fin(seg);
                return None;
            }
            State::Closed | State::Failed(_) => {
                self.reject(|s| &mut s.rej_after_close);
                return None;
            }
            State::SynSent => {
                self.on_syn_sent(seg, now_us);
                return None;
            }
            State::Established | State::FinSent => {}
        }
        if seg.flags.rst {
            self.on_rst_synchronized(seg);
            return None;
        }
        if seg.flags.syn {
            // Our handshake ACK was lost and the peer repeats its SYN-ACK.
            if seg.flags.ack && seg.seq.wrapping_add(1) == self.rcv_nxt {
                self.ack_pending = true;
            } else {
                self.reject(|s| &mut s.rej_bad_synack);
            }
            return None;
        }
        if !seg.flags.ack {
            self.reject(|s| &mut s.rej_no_ack_flag);
            return None;
        }
        if self.ts_ok {
            if let Some((val, _)) = seg.ts {
                if (val.wrapping_sub(self.ts_recent) as i32) >= 0 {
                    self.ts_recent = val;
                }
            }
        }
        if seg.payload_len > 0 {
            self.stats.peer_data_ignored_bytes += u64::from(seg.payload_len);
        }
        if seg.flags.fin {
            self.on_peer_fin(seg);
        }
        self.process_ack(seg, now_us)
    }

    fn on_peer_fin(&mut self, seg: &TcpIn) {
        let fin_seq = seg.seq.wrapping_add(u32::from(seg.payload_len));
        if fin_seq == self.rcv_nxt && seg.payload_len == 0 && !self.peer_fin {
            self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
            self.peer_fin = true;
            self.ack_pending = true;
        } else if self.peer_fin && fin_seq.wrapping_add(1) == self.rcv_nxt {
            // Retransmitted FIN: our ACK of it was lost.
            self.ack_pending = true;
        }
    }

    fn on_syn_sent(&mut self, seg: &TcpIn, now_us: u64) {
        let acceptable_ack = seg.flags.ack && seg.ack == self.seq32(1);
        if seg.flags.rst {
            // RFC 9293 §3.10.7.3: in SYN-SENT a RST counts only if it acks our SYN.
            if acceptable_ack {
                self.fail(FailReason::Reset);
            } else {
                self.reject(|s| &mut s.rej_bad_rst);
            }
            return;
        }
        if !(seg.flags.syn && acceptable_ack) {
            if seg.flags.ack && !acceptable_ack {
                self.rst_owed = Some(seg.ack);
            }
            self.reject(|s| &mut s.rej_bad_synack);
            return;
        }
        self.rcv_nxt = seg.seq.wrapping_add(1);
        self.ts_ok = self.cfg.timestamps && seg.ts.is_some();
        self.sack_ok = self.cfg.sack && seg.sack_permitted;
        // RFC 3168 §6.1.1: an ECN-setup SYN-ACK has ECE set and CWR clear.
        self.ecn_ok = self.syn_ecn_offered && seg.flags.ece && !seg.flags.cwr;
        self.snd_wscale = seg.wscale.map_or(0, |w| w.min(MAX_WSCALE));
        // The peer's MSS counts payload plus TCP options, and with timestamps
        // every segment carries 12 option bytes.
        let peer_mss = seg.mss.unwrap_or(DEFAULT_PEER_MSS);
        let peer_payload = if self.ts_ok { peer_mss.saturating_sub(TS_OPTION_BYTES) } else { peer_mss };
        self.mss = self.cfg.mss_bytes.min(peer_payload).max(MIN_MSS_BYTES);
        if let Some((val, _)) = seg.ts {
            self.ts_recent = val;
        }
        // RFC 7323 §2.2: the window in a SYN-ACK is never scaled.
        self.snd_wnd = u64::from(seg.window);
        self.snd_una = 1;
        self.snd_nxt = 1;
        self.max_right_edge = 1 + self.snd_wnd;
        if !self.cwnd_set_by_controller {
            self.cwnd = self.cfg.init_cwnd_pkts.saturating_mul(u32::from(self.mss));
        }
        self.state = State::Established;
        self.syn_deadline = None;
        self.syn_pending = false;
        self.ack_pending = true;
        // Karn: only a SYN sent once gives an unambiguous sample.
        if self.syn_xmits == 1 {
            self.rtt_update(now_us.saturating_sub(self.syn_sent_us).max(1));
        } else {
            // RFC 6298 §5.7: the SYN was lost, so start data with a 3 s RTO.
            self.rto_us = self.rto_us.max(RTO_AFTER_SYN_LOSS_US).min(self.cfg.rto_max_us);
        }
        self.backoff = 0;
        self.delivered_us = now_us;
        self.first_sent_us = now_us;
        self.next_send_us = now_us;
    }

    fn on_rst_synchronized(&mut self, seg: &TcpIn) {
        // RFC 5961 §3.2: only a RST at exactly rcv_nxt resets; one elsewhere
        // in the window gets a challenge ACK (a genuine peer answers it with
        // an exact RST), so an off-path guess cannot kill the flow.
        let off = seg.seq.wrapping_sub(self.rcv_nxt);
        if off == 0 {
            self.fail(FailReason::Reset);
        } else {
            if off < u32::from(self.cfg.rcv_window).max(1) {
                self.ack_pending = true;
                self.stats.challenge_acks += 1;
            }
            self.reject(|s| &mut s.rej_bad_rst);
        }
    }

    fn fail(&mut self, why: FailReason) {
        self.state = State::Failed(why);
        self.rto_deadline = None;
        self.rack_deadline = None;
        self.syn_deadline = None;
        self.persist_deadline = None;
        self.tlp_deadline = None;
        self.ack_pending = false;
    }

    fn rtt_update(&mut self, rtt: u64) {
        self.min_rtt_us = Some(self.min_rtt_us.map_or(rtt, |m| m.min(rtt)));
        match self.srtt_us {
            None => {
                self.srtt_us = Some(rtt);
                self.rttvar_us = rtt / 2;
            }
            Some(srtt) => {
                // RFC 6298 §2.3 with alpha = 1/8, beta = 1/4.
                let err = srtt.abs_diff(rtt);
                self.rttvar_us = (3 * self.rttvar_us + err) / 4;
                self.srtt_us = Some((7 * srtt + rtt) / 8);
            }
        }
        let srtt = self.srtt_us.unwrap_or(rtt);
        self.rto_us = (srtt + (4 * self.rttvar_us).max(RTO_GRANULARITY_US)).clamp(self.cfg.rto_min_us, self.cfg.rto_max_us);
    }

    fn pending_bytes(&self) -> u32 {
        match self.total_bytes {
            None => u32::MAX,
            Some(t) => t.saturating_sub(self.stats.bytes_acked_total).min(u64::from(u32::MAX)) as u32,
        }
    }

    fn finish_sample(&self, mut s: AckSample) -> AckSample {
        s.bytes_in_flight = self.inflight_bytes.min(u64::from(u32::MAX)) as u32;
        s.packets_in_flight = self.inflight_pkts;
        s.bytes_pending = self.pending_bytes();
        s
    }

    fn process_ack(&mut self, seg: &TcpIn, now_us: u64) -> Option<AckSample> {
        let ack = self.unwrap_seq(seg.ack);
        if ack > i128::from(self.snd_nxt) {
            self.reject(|s| &mut s.rej_ack_unsent);
            return None;
        }
        if ack < i128::from(self.snd_una) {
            // Reordered ACK: its information is already superseded.
            self.reject(|s| &mut s.rej_old_ack);
            return None;
        }
        let new_una = ack as u64;
        let advanced = new_una > self.snd_una;

        let wnd = u64::from(seg.window) << self.snd_wscale;
        let right = new_una + wnd;
        if right < self.max_right_edge {
            self.stats.window_shrinks += 1;
        }
        let window_changed = wnd != self.snd_wnd;
        self.snd_wnd = wnd;
        self.max_right_edge = self.max_right_edge.max(right);
        if wnd > 0 {
            self.persist_deadline = None;
        }

        let mut d = Delivery::default();

        if self.sack_ok {
            let blocks = seg.sack_blocks();
            for (i, &(s32, e32)) in blocks.iter().enumerate() {
                let (s, e) = (self.unwrap_seq(s32), self.unwrap_seq(e32));
                if e <= s || e > i128::from(self.snd_nxt) || s < 0 {
                    self.reject(|st| &mut st.rej_sack_blocks);
                    continue;
                }
                // RFC 2883 §4: a first block below the cumulative ACK, or
                // inside the second block, reports a duplicate.
                let inside_next = i == 0
                    && blocks.get(1).is_some_and(|&(s1, e1)| {
                        let (s1, e1) = (self.unwrap_seq(s1), self.unwrap_seq(e1));
                        s1 <= s && e <= e1
                    });
                if e <= i128::from(new_una) || inside_next {
                    self.on_dsack();
                    continue;
                }
                self.mark_sacked(s as u64, e as u64, now_us, &mut d);
            }
        }

        // Cumulative part.
        while let Some(front) = self.scoreboard.front().copied() {
            if front.end() <= new_una {
                self.scoreboard.pop_front();
                if front.sacked {
                    self.sacked_pkts -= 1;
                } else {
                    self.on_delivered(&front, now_us, &mut d);
                    d.acked_bytes += u64::from(front.len);
                    d.acked_pkts += 1;
                }
            } else if front.start < new_una {
                // The peer acknowledged part of a segment: trim it so a
                // retransmission starts where the peer needs it.
                let k = new_una - front.start;
                let f = self.scoreboard.front_mut().expect("front exists");
                f.start = new_una;
                f.len -= k as u32;
                if !f.sacked {
                    if f.lost {
                        // lost segments are outside the pipe already
                    } else {
                        self.inflight_bytes -= k;
                    }
                    d.acked_bytes += k;
                    self.delivered += k;
                    d.any = true;
                }
                break;
            } else {
                break;
            }
        }
        if advanced {
            self.sacked_trim_below(new_una);
            let data_end = self.data_end().unwrap_or(u64::MAX);
            let acked_stream = new_una.min(data_end) - 1;
            self.stats.bytes_acked_total = acked_stream;
            self.snd_una = new_una;
            self.dupacks = 0;
            self.backoff = 0;
            self.tlp_outstanding = false;
        } else if !self.sack_ok
            && self.inflight_pkts + self.lost_pkts > 0
            && seg.payload_len == 0
            && !window_changed
            && !seg.flags.fin
        {
            self.dupacks += 1;
        }

        let mut s = AckSample { now_us, ..AckSample::default() };
        s.bytes_acked = d.acked_bytes.min(u64::from(u32::MAX)) as u32;
        s.packets_acked = d.acked_pkts;
        s.bytes_misordered = d.sacked_bytes.min(u64::from(u32::MAX)) as u32;
        s.packets_misordered = d.sacked_pkts;

        // RTT (RFC 6298 + Karn).
        if let Some((_, rtt)) = d.rtt {
            let rtt = rtt.max(1);
            self.rtt_update(rtt);
            s.rtt_sample_us = Some(rtt.min(u64::from(u32::MAX)) as u32);
        } else if advanced && self.ts_ok {
            // RFC 7323 §4: TSecr gives a safe sample even for retransmissions.
            if let Some((_, ecr)) = seg.ts {
                let ticks = self.tsval(now_us).wrapping_sub(ecr);
                if ticks < 1 << 30 {
                    let rtt = (u64::from(ticks) * TS_TICK_US).max(1);
                    self.rtt_update(rtt);
                    s.rtt_sample_us = Some(rtt.min(u64::from(u32::MAX)) as u32);
                }
            }
        }

        // Delivery rate (draft-cheng-iccrg-delivery-rate-estimation §3.3).
        if let Some(p) = d.rate_pkt {
            let delta = self.delivered - p.tx_delivered;
            let send_elapsed = p.last_sent_us.saturating_sub(p.tx_first_sent_us);
            let ack_elapsed = now_us.saturating_sub(p.tx_delivered_us);
            let interval = send_elapsed.max(ack_elapsed);
            if interval > 0 && interval >= self.min_rtt_us.unwrap_or(0) {
                if send_elapsed > 0 {
                    s.rate_outgoing = rate(delta, send_elapsed);
                }
                if ack_elapsed > 0 {
                    s.rate_incoming = rate(delta, ack_elapsed);
                }
            }
            s.rate_app_limited = p.tx_app_limited;
            self.first_sent_us = p.last_sent_us;
        }
        if self.app_limited_until > 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        if d.any {
            self.delivered_us = now_us;
        }

        // Retransmission timer (RFC 6298 §5.2-5.3).
        if advanced {
            self.rto_deadline = if self.outstanding() { Some(now_us + self.current_rto()) } else { None };
        }

        let mut lost = 0;
        if self.sack_ok {
            lost += self.rack_detect_loss(now_us);
        } else if self.dupacks == self.cfg.dupthresh {
            // Without SACK, RACK would take every segment sent before a
            // delivered one for lost (cumulative ACKs cannot show what
            // arrived beyond a hole); Linux likewise falls back to NewReno.
            lost += self.mark_first_lost();
        } else if advanced && self.in_recovery && self.snd_una < self.recovery_point {
            // RFC 6582 §3.2 step 5: a partial ACK reveals the next hole.
            lost += self.mark_first_lost();
        }
        if lost > 0 && !self.in_recovery {
            self.in_recovery = true;
            self.recovery_point = self.snd_nxt;
        }
        if self.in_recovery && self.snd_una >= self.recovery_point {
            self.in_recovery = false;
            self.rack.reo_wnd_persist = self.rack.reo_wnd_persist.saturating_sub(1);
            if self.rack.reo_wnd_persist == 0 {
                self.rack.reo_wnd_mult = 1;
            }
        }
        s.lost_pkts_sample = lost;

        let ece = self.ecn_ok && seg.flags.ece;
        if ece {
            self.stats.ece_acks += 1;
            s.ecn_bytes = s.bytes_acked.saturating_add(s.bytes_misordered);
            s.ecn_packets = s.packets_acked + s.packets_misordered;
            // RFC 3168 §6.1.2: react (and send CWR) at most once per window.
            if self.snd_una >= self.cwr_high {
                self.cwr_pending = true;
            }
        }

        if self.fin_queued && self.snd_una >= self.snd_nxt && self.state == State::FinSent {
            self.state = State::Closed;
            self.rto_deadline = None;
            self.rack_deadline = None;
            self.persist_deadline = None;
            self.tlp_deadline = None;
        }

        self.arm_tlp(now_us);

        if d.any || lost > 0 || ece {
            Some(self.finish_sample(s))
        } else {
            None
        }
    }

    fn outstanding(&self) -> bool {
        !self.scoreboard.is_empty()
    }

    /// Marks the segments lying wholly inside the SACK block [s, e),
    /// skipping the parts already known to be SACKed.
    fn mark_sacked(&mut self, s: u64, e: u64, now_us: u64, d: &mut Delivery) {
        let mut cursor = s;
        while cursor < e {
            if let Some((_, &covered_end)) = self.sacked_ranges.range(..=cursor).next_back().filter(|(_, &re)| re > cursor) {
                cursor = covered_end;
                continue;
            }
            let gap_end = self.sacked_ranges.range(cursor..).next().map_or(e, |(&ns, _)| ns.min(e));
            let first = self.scoreboard.partition_point(|g| g.end() <= cursor);
            for i in first..self.scoreboard.len() {
                let g = self.scoreboard[i];
                if g.start >= gap_end {
                    break;
                }
                if g.sacked || g.start < s || g.end() > e {
                    continue;
                }
                self.scoreboard[i].sacked = true;
                self.scoreboard[i].lost = false;
                self.sacked_pkts += 1;
                self.sacked_insert(g.start, g.end());
                self.on_delivered(&g, now_us, d);
                d.sacked_bytes += u64::from(g.len);
                d.sacked_pkts += 1;
            }
            cursor = gap_end;
        }
    }

    fn sacked_insert(&mut self, mut s: u64, mut e: u64) {
        if let Some((&ps, &pe)) = self.sacked_ranges.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
                self.sacked_ranges.remove(&ps);
            }
        }
        while let Some((&ns, &ne)) = self.sacked_ranges.range(s..).next() {
            if ns > e {
                break;
            }
            e = e.max(ne);
            self.sacked_ranges.remove(&ns);
        }
        self.sacked_ranges.insert(s, e);
    }

    fn sacked_trim_below(&mut self, una: u64) {
        while let Some((&s, &e)) = self.sacked_ranges.first_key_value() {
            if s >= una {
                break;
            }
            self.sacked_ranges.pop_first();
            if e > una {
                self.sacked_ranges.insert(una, e);
                break;
            }
        }
    }

    /// Bookkeeping shared by cumulative and selective delivery of `g` (its
    /// state before delivery).
    fn on_delivered(&mut self, g: &Seg, now_us: u64, d: &mut Delivery) {
        if g.lost {
            self.lost_pkts -= 1;
            self.lost_ends.remove(&g.end());
        } else {
            self.inflight_bytes -= u64::from(g.len);
            self.inflight_pkts -= 1;
            self.tsorted.remove(&(g.last_sent_us, g.end()));
        }
        self.delivered += u64::from(g.len);
        d.any = true;
        let end = g.end();
        // RFC 8985 §6.2 step 1-2: a retransmission delivered faster than
        // min RTT was probably the original arriving late; skip it.
        let ambiguous = g.xmits > 1 && now_us.saturating_sub(g.last_sent_us) < self.min_rtt_us.unwrap_or(0);
        if !ambiguous {
            self.rack.rtt_us = now_us.saturating_sub(g.last_sent_us);
            if !self.rack.valid || sent_after(g.last_sent_us, end, self.rack.xmit_us, self.rack.end_seq) {
                self.rack.xmit_us = g.last_sent_us;
                self.rack.end_seq = end;
            }
            self.rack.valid = true;
        }
        // RFC 8985 §6.2 step 3: an original transmission delivered below the
        // forward-most delivery means the path reorders.
        if g.xmits == 1 && end < self.rack.fack && !self.rack.reordering_seen {
            self.rack.reordering_seen = true;
            self.stats.reordering_events += 1;
        }
        self.rack.fack = self.rack.fack.max(end);
        if g.xmits == 1 && d.rtt.is_none_or(|(t, _)| g.last_sent_us >= t) {
            d.rtt = Some((g.last_sent_us, now_us.saturating_sub(g.last_sent_us)));
        }
        if d.rate_pkt.is_none_or(|p| (g.tx_delivered, g.last_sent_us) > (p.tx_delivered, p.last_sent_us)) {
            d.rate_pkt = Some(*g);
        }
    }

    fn reo_wnd(&self) -> u64 {
        if !self.rack.reordering_seen && (self.in_recovery || self.sacked_pkts >= self.cfg.dupthresh) {
            return 0;
        }
        let wnd = u64::from(self.rack.reo_wnd_mult.max(1)) * (self.min_rtt_us.unwrap_or(0) / 4);
        wnd.min(self.srtt_us.unwrap_or(wnd))
    }

    /// A D-SACK means a segment arrived twice: usually a retransmission the
    /// original overtook, i.e. reordering (Linux counts it the same way).
    fn on_dsack(&mut self) {
        self.stats.dsack_blocks += 1;
        if !self.rack.reordering_seen {
            self.rack.reordering_seen = true;
            self.stats.reordering_events += 1;
        }
        if self.rack.dsack_round_end.is_none_or(|end| self.snd_una >= end) {
            self.rack.reo_wnd_mult = self.rack.reo_wnd_mult.saturating_add(1).min(REO_WND_MULT_MAX);
            self.rack.dsack_round_end = Some(self.snd_nxt);
            self.rack.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// RFC 8985 §6.2 step 5: a segment is lost when a segment sent after it
    /// was delivered and more than RACK.rtt + reo_wnd passed since it was sent.
    fn rack_detect_loss(&mut self, now_us: u64) -> u32 {
        self.rack_deadline = None;
        if !self.rack.valid {
            return 0;
        }
        let reo_wnd = self.reo_wnd();
        let rack = self.rack;
        let mut newly = 0;
        // Deadlines grow with send time, so the oldest in-flight segment
        // decides: once one is not yet due, none after it is.
        while let Some(&(sent_us, end)) = self.tsorted.first() {
            if !sent_after(rack.xmit_us, rack.end_seq, sent_us, end) {
                break;
            }
            let deadline = sent_us + rack.rtt_us + reo_wnd;
            if now_us < deadline {
                self.rack_deadline = Some(deadline);
                break;
            }
            self.tsorted.pop_first();
            let i = self.scoreboard.partition_point(|g| g.end() < end);
            let Some(g) = self.scoreboard.get_mut(i).filter(|g| g.end() == end && !g.sacked && !g.lost) else {
                debug_assert!(false, "tsorted entry without an in-flight segment");
                continue;
            };
            g.lost = true;
            g.lost_by_timeout = false;
            self.inflight_bytes -= u64::from(g.len);
            self.inflight_pkts -= 1;
            self.lost_pkts += 1;
            self.lost_ends.insert(end);
            newly += 1;
        }
        self.stats.lost_marked += u64::from(newly);
        newly
    }

    /// RFC 5681 §3.2 fast retransmit without SACK: the first unacked
    /// segment, unless it was already retransmitted.
    fn mark_first_lost(&mut self) -> u32 {
        match self.scoreboard.front_mut() {
            Some(g) if !g.lost && !g.sacked && g.xmits == 1 => {
                self.tsorted.remove(&(g.last_sent_us, g.end()));
                g.lost = true;
                g.lost_by_timeout = false;
                self.inflight_bytes -= u64::from(g.len);
                self.inflight_pkts -= 1;
                self.lost_pkts += 1;
                self.lost_ends.insert(g.end());
                self.stats.lost_marked += 1;
                1
            }
            _ => 0,
        }
    }

    pub fn on_timer(&mut self, now_us: u64) -> Option<AckSample> {
        match self.state {
            State::Closed | State::Failed(_) => return None,
            State::SynSent => {
                if self.syn_deadline.is_some_and(|t| now_us >= t) {
                    self.syn_deadline = None;
                    if self.syn_xmits > self.cfg.syn_retries {
                        self.fail(FailReason::SynRetriesExhausted);
                    } else {
                        self.backoff += 1;
                        self.syn_pending = true;
                    }
                }
                return None;
            }
            State::Established | State::FinSent => {}
        }
        let mut s = AckSample { now_us, ..AckSample::default() };
        let mut fired = false;
        if self.persist_deadline.is_some_and(|t| now_us >= t) {
            self.persist_deadline = None;
            self.probe_allowed = true;
            self.backoff = self.backoff.saturating_add(1);
        }
        if self.tlp_deadline.is_some_and(|t| now_us >= t) {
            self.tlp_deadline = None;
            self.tlp_pending = true;
        }
        if self.rack_deadline.is_some_and(|t| now_us >= t) {
            self.rack_deadline = None;
            let lost = if self.sack_ok { self.rack_detect_loss(now_us) } else { 0 };
            if lost > 0 {
                fired = true;
                s.lost_pkts_sample += lost;
                if !self.in_recovery {
                    self.in_recovery = true;
                    self.recovery_point = self.snd_nxt;
                }
            }
        }
        if self.rto_deadline.is_some_and(|t| now_us >= t) {
            self.stats.timeouts += 1;
            self.backoff += 1;
            if self.backoff > self.cfg.rto_retries {
                self.fail(FailReason::TooManyTimeouts);
                return None;
            }
            // RFC 8985 §6.3 / RFC 6675 §5.1: after an RTO everything not
            // SACKed is presumed lost, retransmissions included.
            let mut newly = 0;
            for g in self.scoreboard.iter_mut() {
                if g.sacked || g.lost {
                    continue;
                }
                g.lost = true;
                g.lost_by_timeout = true;
                self.lost_ends.insert(g.end());
                newly += 1;
            }
            self.lost_pkts += newly;
            self.stats.lost_marked += u64::from(newly);
            self.inflight_bytes = 0;
            self.inflight_pkts = 0;
            self.tsorted.clear();
            self.in_recovery = true;
            self.recovery_point = self.snd_nxt;
            self.rack_deadline = None;
            self.tlp_deadline = None;
            self.tlp_pending = false;
            // RFC 6298 §5.5-5.6: back off and restart the timer now.
            self.rto_deadline = if self.outstanding() { Some(now_us + self.current_rto()) } else { None };
            s.was_timeout = true;
            s.lost_pkts_sample += newly;
            fired = true;
        }
        fired.then(|| self.finish_sample(s))
    }

    pub fn next_timer_us(&self) -> Option<u64> {
        [self.syn_deadline, self.rto_deadline, self.rack_deadline, self.persist_deadline, self.tlp_deadline]
            .into_iter()
            .flatten()
            .min()
    }

    /// Index of the lowest segment marked lost and not yet retransmitted.
    fn first_lost(&self) -> Option<usize> {
        let end = *self.lost_ends.first()?;
        let i = self.scoreboard.partition_point(|g| g.end() < end);
        self.scoreboard.get(i).filter(|g| g.end() == end && g.lost && !g.sacked).map(|_| i)
    }

    /// Whether `poll_transmit` would send something if the pacer allowed it
    /// (the same order and checks as `transmit_synchronized`).
    fn sendable_ignoring_pacing(&self) -> bool {
        if self.tlp_pending {
            return true;
        }
        if self.lost_pkts > 0 {
            return self.first_lost().is_some_and(|i| self.cwnd_allows(self.scoreboard[i].len));
        }
        if self.has_unsent_data() {
            let remaining = self.data_end().map_or(u64::MAX, |e| e - self.snd_nxt);
            let len = u64::from(self.mss).min(remaining) as u32;
            let in_window = self.snd_nxt + u64::from(len) <= self.snd_una + self.snd_wnd || self.probe_allowed;
            return in_window && self.cwnd_allows(len);
        }
        self.total_bytes.is_some() && !self.fin_queued && self.cwnd_allows(0)
    }

    /// When the pacer next lets a segment out. None when nothing is waiting
    /// for the pacer alone (unpaced, or blocked by cwnd / the peer window /
    /// having nothing to send): then only an ACK or a timer changes anything.
    /// A time at or before now means: call `poll_transmit` now.
    pub fn next_send_us(&self) -> Option<u64> {
        let active = matches!(self.state, State::Established | State::FinSent);
        (active && self.rate_bytes_per_s > 0 && self.sendable_ignoring_pacing()).then_some(self.next_send_us)
    }

    fn base_seg(&self, now_us: u64) -> SegOut {
        SegOut {
            ack: self.rcv_nxt,
            flags: TcpFlags { ack: true, ..TcpFlags::default() },
            window: self.cfg.rcv_window,
            ts: self.ts_ok.then(|| (self.tsval(now_us), self.ts_recent)),
            ..SegOut::default()
        }
    }

    fn cwnd_allows(&self, len: u32) -> bool {
        let pipe = self.inflight_bytes;
        pipe + u64::from(len) <= u64::from(self.cwnd) || (self.inflight_pkts == 0 && self.cwnd > 0)
    }

    fn pace(&mut self, len: u32, now_us: u64) {
        if self.rate_bytes_per_s == 0 {
            return;
        }
        let r = u128::from(self.rate_bytes_per_s);
        let credit_us = (u128::from(self.cfg.pacing_burst_bytes) * 1_000_000 / r) as u64;
        let gap_us = (u128::from(len) * 1_000_000).div_ceil(r) as u64;
        self.next_send_us = self.next_send_us.max(now_us.saturating_sub(credit_us)) + gap_us;
    }

    /// Emits segments through `emit` (returning false stops without consuming
    /// the segment): retransmissions of lost segments first, then new data,
    /// then our FIN, then a pure ACK if one is owed. Returns segments emitted.
    pub fn poll_transmit(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> u32 {
        match self.state {
            State::Failed(_) => 0,
            State::Closed => {
                if !self.ack_pending {
                    return 0;
                }
                let mut seg = self.base_seg(now_us);
                seg.seq = self.seq32(self.snd_nxt);
                seg.stream_offset = self.snd_nxt - 1;
                if !emit(&seg) {
                    return 0;
                }
                self.ack_pending = false;
                self.stats.pure_acks_sent += 1;
                1
            }
            State::SynSent => {
                if let Some(seq) = self.rst_owed {
                    let rst = SegOut { seq, flags: TcpFlags { rst: true, ..TcpFlags::default() }, ..SegOut::default() };
                    if !emit(&rst) {
                        return 0;
                    }
                    self.rst_owed = None;
                    self.stats.resets_sent += 1;
                }
                if !self.syn_pending {
                    return 0;
                }
                // RFC 3168 §6.1.1.1: a lost ECN-setup SYN may be a middlebox
                // dropping it, so retransmitted SYNs (like Linux's) offer no ECN.
                let offer_ecn = self.cfg.ecn && self.syn_xmits == 0;
                let seg = SegOut {
                    seq: self.iss,
                    flags: TcpFlags { syn: true, ece: offer_ecn, cwr: offer_ecn, ..TcpFlags::default() },
                    window: self.cfg.rcv_window,
                    mss: Some(self.cfg.mss_bytes.saturating_add(if self.cfg.timestamps { TS_OPTION_BYTES } else { 0 })),
                    wscale: Some(0),
                    sack_permitted: self.cfg.sack,
                    ts: self.cfg.timestamps.then(|| (self.tsval(now_us), 0)),
                    retransmission: self.syn_xmits > 0,
                    ..SegOut::default()
                };
                if !emit(&seg) {
                    return 0;
                }
                if self.syn_xmits > 0 {
                    self.stats.syn_retx += 1;
                }
                self.syn_pending = false;
                self.syn_ecn_offered = offer_ecn;
                self.syn_xmits += 1;
                self.syn_sent_us = now_us;
                self.syn_deadline = Some(now_us + self.current_rto());
                self.stats.segs_sent += 1;
                1
            }
            State::Established | State::FinSent => self.transmit_synchronized(now_us, emit),
        }
    }

    fn transmit_synchronized(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> u32 {
        let mut n = 0;
        loop {
            if self.rate_bytes_per_s > 0 && self.next_send_us > now_us {
                break;
            }
            if self.tlp_pending {
                self.tlp_pending = false;
                if self.send_tail_probe(now_us, emit) {
                    n += 1;
                    continue;
                }
            }
            if self.lost_pkts > 0 {
                let Some(i) = self.first_lost() else { break };
                let g = self.scoreboard[i];
                if !self.cwnd_allows(g.len) {
                    break;
                }
                let mut seg = self.base_seg(now_us);
                seg.seq = self.seq32(g.start);
                seg.stream_offset = g.start - 1;
                seg.payload_len = g.len as u16;
                seg.flags.fin = g.fin;
                seg.retransmission = true;
                if !emit(&seg) {
                    break;
                }
                let snapshot = self.tx_snapshot(now_us);
                let g = &mut self.scoreboard[i];
                g.lost = false;
                g.xmits += 1;
                g.last_sent_us = now_us;
                (g.tx_delivered, g.tx_delivered_us, g.tx_first_sent_us) = snapshot;
                g.tx_app_limited = self.app_limited_until > 0;
                let by_timeout = g.lost_by_timeout;
                let len = g.len;
                self.tsorted.insert((now_us, g.end()));
                self.lost_pkts -= 1;
                self.lost_ends.remove(&self.scoreboard[i].end());
                self.inflight_bytes += u64::from(len);
                self.inflight_pkts += 1;
                self.stats.retx_segs += 1;
                self.stats.retx_bytes += u64::from(len);
                if !by_timeout {
                    self.stats.fast_retx += 1;
                }
                self.after_send(len, now_us);
                n += 1;
                continue;
            }
            if self.has_unsent_data() {
                let remaining = self.data_end().map_or(u64::MAX, |e| e - self.snd_nxt);
                let len = u64::from(self.mss).min(remaining) as u32;
                let right_edge = self.snd_una + self.snd_wnd;
                let in_window = self.snd_nxt + u64::from(len) <= right_edge;
                if !in_window && !self.probe_allowed {
                    if !self.outstanding() && self.persist_deadline.is_none() {
                        // RFC 9293 §3.8.6.1: probe a zero window, or we would wait forever.
                        self.persist_deadline = Some(now_us + self.current_rto());
                    }
                    break;
                }
                if !self.cwnd_allows(len) {
                    break;
                }
                let mut seg = self.base_seg(now_us);
                seg.seq = self.seq32(self.snd_nxt);
                seg.stream_offset = self.snd_nxt - 1;
                seg.payload_len = len as u16;
                seg.ect = self.ecn_ok;
                seg.flags.cwr = self.ecn_ok && self.cwr_pending;
                seg.flags.psh = u64::from(len) == remaining;
                if !emit(&seg) {
                    break;
                }
                if !in_window {
                    self.probe_allowed = false;
                    self.stats.zero_window_probes += 1;
                }
                if seg.flags.cwr {
                    self.cwr_pending = false;
                    self.cwr_high = self.snd_nxt + u64::from(len);
                    self.stats.cwr_sent += 1;
                }
                self.push_new(len, false, now_us);
                self.stats.bytes_sent_total += u64::from(len);
                self.arm_tlp(now_us);
                n += 1;
                continue;
            }
            if self.total_bytes.is_some() && !self.fin_queued {
                if !self.cwnd_allows(0) {
                    break;
                }
                let mut seg = self.base_seg(now_us);
                seg.seq = self.seq32(self.snd_nxt);
                seg.stream_offset = self.snd_nxt - 1;
                seg.flags.fin = true;
                if !emit(&seg) {
                    break;
                }
                self.push_new(0, true, now_us);
                self.fin_queued = true;
                self.state = State::FinSent;
                n += 1;
                continue;
            }
            // Nothing is left to send although cwnd and the peer would allow
            // it: rate samples until this flight is delivered understate the
            // path (draft-cheng §3.4).
            self.app_limited_until = (self.delivered + self.inflight_bytes).max(1);
            break;
        }
        if self.ack_pending {
            let mut seg = self.base_seg(now_us);
            seg.seq = self.seq32(self.snd_nxt);
            seg.stream_offset = self.snd_nxt - 1;
            if emit(&seg) {
                self.ack_pending = false;
                self.stats.pure_acks_sent += 1;
                n += 1;
            }
        }
        n
    }

    /// RFC 8985 §7.2: schedule a probe timeout while data is outstanding and
    /// no recovery is under way, so a lost tail is found in ~2 RTT instead of
    /// an RTO. Needs SACK, which is what turns the probe's ACK into loss marks.
    fn arm_tlp(&mut self, now_us: u64) {
        self.tlp_deadline = None;
        let active = matches!(self.state, State::Established | State::FinSent);
        let Some(srtt) = self.srtt_us else { return };
        if !active || !self.sack_ok || self.in_recovery || self.tlp_outstanding || self.lost_pkts > 0 || !self.outstanding() {
            return;
        }
        let mut pto = 2 * srtt;
        if self.inflight_pkts == 1 {
            // A lone segment may sit in the receiver's delayed-ACK timer.
            pto = pto.max(srtt + srtt / 2 + TLP_DELAYED_ACK_US);
        }
        let at = now_us + pto.max(TLP_MIN_PTO_US);
        if self.rto_deadline.is_none_or(|rto| at < rto) {
            self.tlp_deadline = Some(at);
        }
    }

    /// RFC 8985 §7.3: one new segment if the receive window allows, else the
    /// highest-sequence outstanding segment again. Bypasses cwnd by design.
    fn send_tail_probe(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> bool {
        if !matches!(self.state, State::Established | State::FinSent) || self.in_recovery {
            return false;
        }
        let sent = if self.has_unsent_data() {
            let remaining = self.data_end().map_or(u64::MAX, |e| e - self.snd_nxt);
            let len = u64::from(self.mss).min(remaining) as u32;
            if self.snd_nxt + u64::from(len) > self.snd_una + self.snd_wnd {
                return false;
            }
            let mut seg = self.base_seg(now_us);
            seg.seq = self.seq32(self.snd_nxt);
            seg.stream_offset = self.snd_nxt - 1;
            seg.payload_len = len as u16;
            seg.ect = self.ecn_ok;
            seg.flags.psh = u64::from(len) == remaining;
            if !emit(&seg) {
                return false;
            }
            self.push_new(len, false, now_us);
            self.stats.bytes_sent_total += u64::from(len);
            true
        } else {
            let Some(i) = self.scoreboard.iter().rposition(|g| !g.sacked && !g.lost) else { return false };
            let g = self.scoreboard[i];
            let mut seg = self.base_seg(now_us);
            seg.seq = self.seq32(g.start);
            seg.stream_offset = g.start - 1;
            seg.payload_len = g.len as u16;
            seg.flags.fin = g.fin;
            seg.retransmission = true;
            if !emit(&seg) {
                return false;
            }
            let snapshot = self.tx_snapshot(now_us);
            let g = &mut self.scoreboard[i];
            self.tsorted.remove(&(g.last_sent_us, g.end()));
            g.xmits += 1;
            g.last_sent_us = now_us;
            (g.tx_delivered, g.tx_delivered_us, g.tx_first_sent_us) = snapshot;
            g.tx_app_limited = self.app_limited_until > 0;
            self.tsorted.insert((now_us, g.end()));
            let len = g.len;
            self.stats.retx_segs += 1;
            self.stats.retx_bytes += u64::from(len);
            self.after_send(len, now_us);
            true
        };
        if sent {
            self.stats.tlp_probes += 1;
            self.tlp_outstanding = true;
            self.tlp_deadline = None;
            // RFC 8985 §7.3: the RTO restarts from the probe.
            self.rto_deadline = Some(now_us + self.current_rto());
        }
        sent
    }

    fn tx_snapshot(&mut self, now_us: u64) -> (u64, u64, u64) {
        // draft-cheng §3.2: an idle restart begins a fresh interval.
        if self.inflight_pkts == 0 {
            self.first_sent_us = now_us;
            self.delivered_us = now_us;
        }
        (self.delivered, self.delivered_us, self.first_sent_us)
    }

    fn push_new(&mut self, len: u32, fin: bool, now_us: u64) {
        let (tx_delivered, tx_delivered_us, tx_first_sent_us) = self.tx_snapshot(now_us);
        let g = Seg {
            start: self.snd_nxt,
            len,
            fin,
            last_sent_us: now_us,
            xmits: 1,
            sacked: false,
            lost: false,
            lost_by_timeout: false,
            tx_delivered,
            tx_delivered_us,
            tx_first_sent_us,
            tx_app_limited: self.app_limited_until > 0,
        };
        self.snd_nxt = g.end();
        self.tsorted.insert((now_us, g.end()));
        self.scoreboard.push_back(g);
        self.inflight_bytes += u64::from(len);
        self.inflight_pkts += 1;
        self.after_send(len, now_us);
    }

    fn after_send(&mut self, len: u32, now_us: u64) {
        self.ack_pending = false;
        self.stats.segs_sent += 1;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now_us + self.current_rto());
        }
        self.pace(len, now_us);
    }

    /// Test hook: the incremental counters must equal a recount.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut bytes = 0u64;
        let mut pkts = 0u32;
        let mut lost = 0u32;
        let mut sacked = 0u32;
        let mut prev_end = self.snd_una;
        let mut keys = BTreeSet::new();
        for g in &self.scoreboard {
            if !g.sacked && !g.lost {
                keys.insert((g.last_sent_us, g.end()));
            }
            assert!(g.start >= prev_end || g.start == self.snd_una, "scoreboard ordered");
            prev_end = g.end();
            if g.sacked {
                sacked += 1;
            } else if g.lost {
                lost += 1;
            } else {
                bytes += u64::from(g.len);
                pkts += 1;
            }
        }
        assert_eq!(keys, self.tsorted, "tsorted holds exactly the in-flight segments");
        let mut ranges: BTreeMap<u64, u64> = BTreeMap::new();
        let mut open: Option<(u64, u64)> = None;
        for g in self.scoreboard.iter().filter(|g| g.sacked) {
            open = match open {
                Some((rs, re)) if re == g.start => Some((rs, g.end())),
                Some((rs, re)) => {
                    ranges.insert(rs, re);
                    Some((g.start, g.end()))
                }
                None => Some((g.start, g.end())),
            };
        }
        if let Some((rs, re)) = open {
            ranges.insert(rs, re);
        }
        assert_eq!(ranges, self.sacked_ranges, "sacked_ranges mirrors the SACKed segments");
        let lost_ends: BTreeSet<u64> = self.scoreboard.iter().filter(|g| g.lost && !g.sacked).map(|g| g.end()).collect();
        assert_eq!(lost_ends, self.lost_ends);
        assert_eq!(bytes, self.inflight_bytes);
        assert_eq!(pkts, self.inflight_pkts);
        assert_eq!(lost, self.lost_pkts);
        assert_eq!(sacked, self.sacked_pkts);
        assert!(self.snd_una <= self.snd_nxt);
    }
}

fn rate(bytes: u64, us: u64) -> u64 {
    (u128::from(bytes) * 1_000_000 / u128::from(us.max(1))).min(u128::from(u64::MAX)) as u64
}

#[derive(Default)]
struct Delivery {
    any: bool,
    acked_bytes: u64,
    acked_pkts: u32,
    sacked_bytes: u64,
    sacked_pkts: u32,
    /// (send time, rtt) of the newest never-retransmitted delivered segment.
    rtt: Option<(u64, u64)>,
    /// The delivered segment with the newest delivery snapshot.
    rate_pkt: Option<Seg>,
}
