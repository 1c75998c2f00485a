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
//!
//! This module holds the connection's state and its public API; each concept has its own
//! submodule: `handshake`, `ack` (one ACK's steps and [`AckSample`]), `scoreboard`, `rack`,
//! `tlp`, `recovery`, `rto`, `rate_sample`, `pacing` and `transmit`.

mod ack;
mod config;
mod handshake;
mod pacing;
mod rack;
mod rate_sample;
mod recovery;
mod rto;
mod scoreboard;
mod stats;
mod tlp;
mod transmit;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::wire::{TcpFlags, TcpIn};

pub use ack::AckSample;
pub use config::Config;
pub use stats::ConnStats;

/// The timestamp clock ticks once per ms: RFC 7323 §5.4 wants 1 ms..1 s per
/// tick, and a faster clock would make receivers' PAWS misjudge long idle periods.
const TS_TICK_US: u64 = 1000;
/// A floor so a nonsensical peer MSS cannot make us emit tiny segments forever.
const MIN_MSS_BYTES: u16 = 64;

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

    scoreboard: VecDeque<scoreboard::Seg>,
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
    rack: rack::Rack,
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
            rack: rack::Rack::new(),
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

    fn pending_bytes(&self) -> u32 {
        match self.total_bytes {
            None => u32::MAX,
            Some(t) => t.saturating_sub(self.stats.bytes_acked_total).min(u64::from(u32::MAX)) as u32,
        }
    }

    pub fn on_timer(&mut self, now_us: u64) -> Option<AckSample> {
        match self.state {
            State::Closed | State::Failed(_) => return None,
            State::SynSent => {
                self.on_syn_timer(now_us);
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
                self.enter_recovery();
            }
        }
        if self.rto_deadline.is_some_and(|t| now_us >= t) {
            let newly = self.on_rto_expired(now_us)?;
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

    /// When the pacer next lets a segment out. None when nothing is waiting
    /// for the pacer alone (unpaced, or blocked by cwnd / the peer window /
    /// having nothing to send): then only an ACK or a timer changes anything.
    /// A time at or before now means: call `poll_transmit` now.
    pub fn next_send_us(&self) -> Option<u64> {
        let active = matches!(self.state, State::Established | State::FinSent);
        (active && self.rate_bytes_per_s > 0 && self.sendable_ignoring_pacing()).then_some(self.next_send_us)
    }

    /// Emits segments through `emit` (returning false stops without consuming
    /// the segment): retransmissions of lost segments first, then new data,
    /// then our FIN, then a pure ACK if one is owed. Returns segments emitted.
    pub fn poll_transmit(&mut self, now_us: u64, emit: &mut dyn FnMut(&SegOut) -> bool) -> u32 {
        match self.state {
            State::Failed(_) => 0,
            State::Closed => u32::from(self.ack_pending && self.send_pure_ack(now_us, emit)),
            State::SynSent => self.transmit_syn_sent(now_us, emit),
            State::Established | State::FinSent => self.transmit_synchronized(now_us, emit),
        }
    }
}
