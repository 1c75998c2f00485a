//! Hosts and their reliable transport: a window- and rate-based sender with SACK-style loss
//! detection, RTO and go-back-N after a timeout, pacing, and a receiver that echoes CE marks
//! exactly (DCTCP's two-state delayed-ACK machine, specs/dc.md §2.2).
//!
//! Sequence numbers count segments, not bytes; every segment carries `mss` payload bytes except a
//! finite flow's last. The sender owns no congestion logic: the window and pacing rate are
//! whatever the flow's algorithm last asked for (through `cc.rs`), and the transport only
//! measures (ACKs, SACKs, CE echoes, RTT, rate samples, losses) and enforces.
//!
//! Loss detection: a segment is lost when `dupthresh` later segments have been selectively
//! acknowledged (FACK-style RFC 6675 approximation); lost segments are retransmitted first,
//! within the window. A retransmission that is lost again, or a tail loss with nothing after it,
//! is recovered by the retransmission timer (RFC 6298 with a configurable minimum), after which
//! every unacknowledged segment is resent (go-back-N). There is no tail-loss probe.
//!
//! Host NICs pull: when the NIC is idle it sends the head of its queue (ACKs, and segments HULL's
//! pacer released) if any, else the next segment of the next ready flow, round-robin; a segment
//! of a flow the pacer has associated goes into the pacer instead (`crate::pacer`). A flow leaves the ready list when its window is full, its
//! pacing gate is closed, its NIC queue is paused (BFC hook) or it has nothing to send, and
//! rejoins when that changes — so no host queue builds up and no event is spent on idle flows.
//!
//! This module holds the transport's state (senders, receivers, hosts); the simulator's events
//! that drive it are `impl Sim` blocks of their own: `events.rs` (packets, ACKs, timers, NIC
//! scheduling) and `reports.rs` (reports to the flow's controller and applying its changes).

use std::collections::VecDeque;

mod events;
mod reports;

use crate::cc::FlowCc;
use crate::config::TransportConfig;
use crate::pacer::Pacer;
use crate::packet::PacketId;
use crate::time::{from_us, pace_time, Time};
use crate::topology::{NodeId, PortId};
use crate::workload::FlowSpec;

pub type FlowId = u32;

/// Backlog an unbounded flow's application is modelled to keep in its socket buffer beyond what
/// is in flight, bytes (reported as `pending_bytes`).
pub const UNBOUNDED_BACKLOG_BYTES: u64 = 4 << 20;

/// Segment flags.
const SACKED: u8 = 1;
const LOST: u8 = 2;
const RETRANSMITTED: u8 = 4;
const IN_PIPE: u8 = 8;

/// Transport settings, resolved to simulator units.
#[derive(Debug, Clone, Copy)]
pub struct TransportParams {
    pub mss: u32,
    pub header: u32,
    pub ack_bytes: u32,
    pub init_cwnd_pkts: u32,
    pub rto_min: Time,
    pub rto_initial: Time,
    pub rto_max: Time,
    pub dupthresh: u32,
    pub delack_segments: u32,
    pub delack_timeout: Time,
    /// Interrupt coalescing interval at hosts (0: every packet handled as it arrives).
    pub rx_coalesce: Time,
    pub ecn: bool,
    /// Bytes the INT header adds to each data packet (`[switch] int`; 0 when INT is off).
    pub int_overhead: u32,
}

impl TransportParams {
    pub fn from_config(c: &TransportConfig) -> TransportParams {
        TransportParams {
            mss: c.mss_bytes,
            header: c.header_bytes,
            ack_bytes: c.ack_bytes,
            init_cwnd_pkts: c.init_cwnd_pkts,
            rto_min: from_us(c.rto_min_us),
            rto_initial: from_us(c.rto_initial_us),
            rto_max: from_us(c.rto_max_us),
            dupthresh: c.dupthresh,
            delack_segments: c.delayed_ack_segments,
            delack_timeout: from_us(c.delayed_ack_timeout_us),
            rx_coalesce: from_us(c.rx_coalesce_us),
            ecn: c.ecn,
            int_overhead: 0,
        }
    }
}

/// Per-segment sender state, for segments in [snd_una, snd_nxt).
#[derive(Debug, Clone, Copy, Default)]
struct Seg {
    flags: u8,
    /// When it was (last) sent.
    tx_time: Time,
    /// Rate sampling snapshot at send (Linux tcp_rate.c): start of the send interval, bytes
    /// delivered so far, and when the last of those was delivered.
    first_tx: Time,
    delivered: u64,
    delivered_time: Time,
}

/// The most recent rate sample's basis.
#[derive(Debug, Clone, Copy, Default)]
struct RateBasis {
    prior_delivered: u64,
    prior_time: Time,
    send_elapsed: Time,
    valid: bool,
}

/// Sender half of a flow.
#[derive(Debug)]
pub struct Sender {
    /// Segments in the flow (`u32::MAX` for an unbounded flow).
    pub total_segs: u32,
    last_payload: u32,
    pub snd_una: u32,
    pub snd_nxt: u32,
    segs: VecDeque<Seg>,
    /// Payload bytes sent and neither acknowledged nor deemed lost (RFC 6675 "pipe").
    pub pipe_bytes: u64,
    pub cwnd_bytes: u64,
    /// `snd_nxt` when the window last stopped the sender: until it is acknowledged the flow
    /// counts as window-limited, as Linux keeps `is_cwnd_limited` for a window of data.
    cwnd_limited_until: u32,
    /// Pacing rate, bytes/s; `None` = unpaced.
    pub pacing: Option<f64>,
    next_send_at: Time,
    retx: VecDeque<u32>,
    highest_sacked: Option<u32>,
    loss_scan: u32,
    recovery_until: Option<u32>,
    cwr_until: Option<u32>,
    pub srtt: Option<Time>,
    rttvar: Time,
    rto: Time,
    /// The RTO's floor: the flow's class's (`rto_min_us`), else `[transport]`'s.
    rto_min: Time,
    rto_deadline: Option<Time>,
    rto_event: Option<Time>,
    pace_armed: bool,
    delivered: u64,
    delivered_time: Time,
    first_tx_time: Time,
    rate_basis: RateBasis,
}

/// Receiver half of a flow.
#[derive(Debug, Default)]
pub struct Receiver {
    pub rcv_nxt: u32,
    /// Out-of-order segments received, indexed from `rcv_nxt` (index 0 is always false).
    ooo: VecDeque<bool>,
    /// CE value of the last in-order segment (the DCTCP receiver's state).
    ce_state: bool,
    /// In-order segments received and not yet acknowledged.
    pending: u32,
    /// Send time echoed by the pending ACK.
    pending_ts: Time,
    delack_deadline: Option<Time>,
    delack_armed: bool,
    /// The INT of the last data packet received (`[switch] int`), echoed in every ACK.
    int: ccp_contract::IntPath,
}

/// Live state of a started, unfinished flow.
pub struct FlowState {
    pub snd: Sender,
    pub rcv: Receiver,
    pub cc: FlowCc,
    /// NIC queue id written into `upstream_q` (a BFC hook: the first-hop switch pauses it).
    pub nic_queue: u16,
    in_ready: bool,
}

/// A flow's RTT samples (every ACK that acknowledged something new), for its output row.
#[derive(Debug, Clone, Copy, Default)]
pub struct RttStats {
    pub min: Option<Time>,
    pub sum: u128,
    pub samples: u64,
}

impl RttStats {
    pub fn record(&mut self, rtt: Time) {
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        self.sum += u128::from(rtt);
        self.samples += 1;
    }

    pub fn mean(&self) -> Option<Time> {
        (self.samples > 0).then(|| (self.sum / u128::from(self.samples)) as Time)
    }
}

/// One flow: what was asked for, its live state while running, and its outcome.
pub struct Flow {
    pub spec: FlowSpec,
    pub hash: u32,
    pub state: Option<Box<FlowState>>,
    /// When the receiver had every byte.
    pub finish: Option<Time>,
    pub sender_done: bool,
    /// Bytes delivered in order to the receiver.
    pub delivered_bytes: u64,
    /// Of those, bytes delivered after the warm-up.
    pub measured_bytes: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub reports: u64,
    pub started: bool,
    pub rtt: RttStats,
}

impl Flow {
    pub fn new(spec: FlowSpec, hash: u32) -> Flow {
        Flow {
            spec,
            hash,
            state: None,
            finish: None,
            sender_done: false,
            delivered_bytes: 0,
            measured_bytes: 0,
            retransmits: 0,
            timeouts: 0,
            reports: 0,
            started: false,
            rtt: RttStats::default(),
        }
    }
}

/// A host: its NIC port, packets waiting for the NIC, its pacer and its sending flows.
#[derive(Debug)]
pub struct HostState {
    pub node: NodeId,
    pub nic: PortId,
    /// Packets waiting for the NIC in the order they reached it: ACKs, and segments the pacer
    /// released.
    pub nic_fifo: VecDeque<PacketId>,
    /// HULL's pacer (`[pacer]`).
    pub pacer: Option<Pacer>,
    /// Packets that arrived in the current interrupt-coalescing interval (`rx_coalesce_us`),
    /// handed to the stack together when it ends.
    pub rx_batch: Vec<PacketId>,
    /// Flows that may have something to send, round-robin order.
    ready: VecDeque<FlowId>,
    /// Flows started here and not yet done sending.
    senders: Vec<FlowId>,
    /// NIC queues paused by the first-hop switch (BFC hook), as a bitset.
    paused: Vec<u64>,
    /// NIC queue ids this host may use: as many as the first-hop switch can pause one by one
    /// (BFC's pause counters per ingress), so that a pause never misses a queue.
    pub nic_queues: u16,
}

impl HostState {
    pub fn new(node: NodeId, nic: PortId) -> HostState {
        HostState {
            node,
            nic,
            nic_fifo: VecDeque::new(),
            pacer: None,
            rx_batch: Vec::new(),
            ready: VecDeque::new(),
            senders: Vec::new(),
            paused: Vec::new(),
            nic_queues: u16::MAX,
        }
    }

    fn is_paused(&self, q: u16) -> bool {
        self.paused.get(usize::from(q) / 64).is_some_and(|w| w & (1 << (q % 64)) != 0)
    }

    fn set_paused(&mut self, q: u16, paused: bool) {
        let w = usize::from(q) / 64;
        if self.paused.len() <= w {
            self.paused.resize(w + 1, 0);
        }
        if paused {
            self.paused[w] |= 1 << (q % 64);
        } else {
            self.paused[w] &= !(1 << (q % 64));
        }
    }
}

/// Why a flow cannot send right now.
enum Blocked {
    Window,
    Pacing(Time),
    NoData,
    Paused,
}

impl Sender {
    fn new(spec: &FlowSpec, tp: &TransportParams, now: Time) -> Sender {
        let (total_segs, last_payload) = match spec.bytes {
            Some(b) => {
                let segs = b.div_ceil(u64::from(tp.mss));
                let last = b - (segs - 1) * u64::from(tp.mss);
                (u32::try_from(segs).expect("flow too large for 32-bit segment numbers"), last as u32)
            }
            None => (u32::MAX, tp.mss),
        };
        Sender {
            total_segs,
            last_payload,
            snd_una: 0,
            snd_nxt: 0,
            cwnd_limited_until: 0,
            segs: VecDeque::new(),
            pipe_bytes: 0,
            cwnd_bytes: u64::from(tp.init_cwnd_pkts) * u64::from(tp.mss),
            pacing: None,
            next_send_at: now,
            retx: VecDeque::new(),
            highest_sacked: None,
            loss_scan: 0,
            recovery_until: None,
            cwr_until: None,
            srtt: None,
            rttvar: 0,
            rto: spec.rto_min.map_or(tp.rto_initial, |min| min.max(tp.rto_initial)),
            rto_min: spec.rto_min.unwrap_or(tp.rto_min),
            rto_deadline: None,
            rto_event: None,
            pace_armed: false,
            delivered: 0,
            delivered_time: now,
            first_tx_time: now,
            rate_basis: RateBasis::default(),
        }
    }

    /// Bytes sent and not cumulatively acknowledged: segments [snd_una, snd_nxt), in flight,
    /// SACKed or lost alike (only the flow's last segment can be short).
    pub(crate) fn unacked_bytes(&self, mss: u32) -> u64 {
        match self.snd_nxt.checked_sub(self.snd_una) {
            None | Some(0) => 0,
            Some(n) => u64::from(n - 1) * u64::from(mss) + u64::from(self.payload(self.snd_nxt - 1, mss)),
        }
    }

    fn payload(&self, seg: u32, mss: u32) -> u32 {
        if seg + 1 == self.total_segs {
            self.last_payload
        } else {
            mss
        }
    }

    fn seg_mut(&mut self, seg: u32) -> &mut Seg {
        &mut self.segs[(seg - self.snd_una) as usize]
    }

    pub fn done(&self) -> bool {
        self.snd_una == self.total_segs
    }

    /// The next segment to send (a retransmission first), or why there is none.
    fn next_segment(&mut self, now: Time, mss: u32) -> Result<(u32, bool), Blocked> {
        if self.pacing.is_some() && now < self.next_send_at {
            return Err(Blocked::Pacing(self.next_send_at));
        }
        while let Some(&s) = self.retx.front() {
            if s >= self.snd_una && self.segs[(s - self.snd_una) as usize].flags & (LOST | SACKED | IN_PIPE) == LOST {
                break;
            }
            self.retx.pop_front();
        }
        let (seg, retx) = match self.retx.front() {
            Some(&s) => (s, true),
            None if self.snd_nxt < self.total_segs => (self.snd_nxt, false),
            None => return Err(Blocked::NoData),
        };
        let len = u64::from(self.payload(seg, mss));
        if self.pipe_bytes > 0 && self.pipe_bytes + len > self.cwnd_bytes {
            self.cwnd_limited_until = self.snd_nxt;
            return Err(Blocked::Window);
        }
        Ok((seg, retx))
    }

    /// Whether the window limits the sender (`Report::cwnd_limited`): it is full now, or it
    /// stopped the sender within the last window of data (until what was sent by then is
    /// acknowledged), as Linux's `tcp_cwnd_validate` keeps `is_cwnd_limited` for a window. A
    /// report taken between an ACK and the sending it allows would otherwise see a window that
    /// is not full.
    fn cwnd_limited(&self, mss: u32) -> bool {
        self.snd_una < self.cwnd_limited_until || self.pipe_bytes + u64::from(mss) > self.cwnd_bytes
    }

    /// Records the transmission of `seg` at `now`; returns its payload bytes.
    fn on_transmit(&mut self, seg: u32, retx: bool, now: Time, mss: u32, wire: u32) -> u32 {
        if self.pipe_bytes == 0 {
            // Nothing in flight: a new rate-sampling interval starts here (tcp_rate.c).
            self.first_tx_time = now;
            self.delivered_time = now;
        }
        let snapshot = Seg {
            flags: IN_PIPE,
            tx_time: now,
            first_tx: self.first_tx_time,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
        };
        if retx {
            self.retx.pop_front();
            let s = self.seg_mut(seg);
            *s = Seg { flags: (s.flags & !LOST) | IN_PIPE | RETRANSMITTED, ..snapshot };
        } else {
            self.segs.push_back(snapshot);
            self.snd_nxt += 1;
        }
        let len = self.payload(seg, mss);
        self.pipe_bytes += u64::from(len);
        if let Some(r) = self.pacing {
            self.next_send_at = now.max(self.next_send_at) + pace_time(wire, r);
            if self.next_send_at < now {
                self.next_send_at = now;
            }
        }
        len
    }

    /// Updates the rate-sample basis with a segment delivered now (the most recently sent
    /// delivered segment defines the sample, as in tcp_rate.c).
    fn rate_delivered(rb: &mut RateBasis, first_tx_time: &mut Time, s: &Seg) {
        if !rb.valid || s.delivered >= rb.prior_delivered {
            rb.prior_delivered = s.delivered;
            rb.prior_time = s.delivered_time;
            rb.send_elapsed = s.tx_time.saturating_sub(s.first_tx);
            rb.valid = true;
            *first_tx_time = s.tx_time;
        }
    }

    /// RFC 6298 RTT estimator.
    fn rtt_sample(&mut self, rtt: Time, tp: &TransportParams) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(rtt)) / 4;
                self.srtt = Some((7 * srtt + rtt) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(rtt);
        self.rto = (srtt + 4 * self.rttvar).max(self.rto_min).min(tp.rto_max);
    }
}

impl Receiver {
    /// Accepts `seg`; returns whether it advanced `rcv_nxt` and by how many segments.
    fn accept(&mut self, seg: u32) -> u32 {
        if seg < self.rcv_nxt {
            return 0;
        }
        let off = (seg - self.rcv_nxt) as usize;
        if self.ooo.len() <= off {
            self.ooo.resize(off + 1, false);
        }
        self.ooo[off] = true;
        let mut advanced = 0;
        while self.ooo.front() == Some(&true) {
            self.ooo.pop_front();
            self.rcv_nxt += 1;
            advanced += 1;
        }
        advanced
    }
}
