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
//! Host NICs pull: when the NIC is idle it sends a queued ACK if any, else the next segment of
//! the next ready flow, round-robin. A flow leaves the ready list when its window is full, its
//! pacing gate is closed, its NIC queue is paused (BFC hook) or it has nothing to send, and
//! rejoins when that changes — so no host queue builds up and no event is spent on idle flows.

use std::collections::VecDeque;

use ccp_contract::{Command, FlowStart, NetworkFeedback, PacingCommand, Urgent};
use ccp_qdisc::Ecn;

use crate::cc::{rate, AckSample, FlowCc, Gauges};
use crate::config::TransportConfig;
use crate::event::Event;
use crate::packet::{Kind, Packet, PacketId, NO_SACK};
use crate::sim::Sim;
use crate::time::{from_us, pace_time, to_us, Time};
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
    pub ecn: bool,
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
            ecn: c.ecn,
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
        }
    }
}

/// A host: its NIC port, ACKs waiting for the NIC, and its sending flows.
#[derive(Debug)]
pub struct HostState {
    pub node: NodeId,
    pub nic: PortId,
    pub acks: VecDeque<PacketId>,
    /// Flows that may have something to send, round-robin order.
    ready: VecDeque<FlowId>,
    /// Flows started here and not yet done sending.
    senders: Vec<FlowId>,
    /// NIC queues paused by the first-hop switch (BFC hook), as a bitset.
    paused: Vec<u64>,
}

impl HostState {
    pub fn new(node: NodeId, nic: PortId) -> HostState {
        HostState { node, nic, acks: VecDeque::new(), ready: VecDeque::new(), senders: Vec::new(), paused: Vec::new() }
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
            rto: tp.rto_initial,
            rto_deadline: None,
            rto_event: None,
            pace_armed: false,
            delivered: 0,
            delivered_time: now,
            first_tx_time: now,
            rate_basis: RateBasis::default(),
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
            return Err(Blocked::Window);
        }
        Ok((seg, retx))
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
        self.rto = (srtt + 4 * self.rttvar).clamp(tp.rto_min, tp.rto_max);
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

impl Sim {
    pub(crate) fn flow_start(&mut self, f: FlowId) {
        let now = self.q.now();
        let tp = self.tp;
        let flow = &mut self.flows[f as usize];
        flow.started = true;
        let src = flow.spec.src;
        let snd = Sender::new(&flow.spec, &tp, now);
        let start = FlowStart { now_us: to_us(now), mss_bytes: tp.mss, init_cwnd_bytes: snd.cwnd_bytes, seed: None };
        let (cc, init) = FlowCc::start(self.choice.clone(), self.fallback.clone(), self.ccp.limits.clone(), &start, now);
        let host = &mut self.hosts[src as usize];
        let nic_queue = (host.senders.len() % usize::from(u16::MAX)) as u16;
        host.senders.push(f);
        flow.state = Some(Box::new(FlowState { snd, rcv: Receiver::default(), cc, nic_queue, in_ready: false }));
        self.count_outcome(&init);
        self.deliver(f, init.command);
        if !self.ccp.per_ack {
            self.arm_report_timer(f);
        }
        self.wake(f);
    }

    /// Makes `f` eligible to send and kicks its host's NIC.
    fn wake(&mut self, f: FlowId) {
        let flow = &mut self.flows[f as usize];
        let Some(st) = flow.state.as_mut() else { return };
        if flow.sender_done || st.in_ready {
            return;
        }
        st.in_ready = true;
        let host = &mut self.hosts[flow.spec.src as usize];
        host.ready.push_back(f);
        let nic = host.nic;
        self.start_tx(nic);
    }

    /// The next packet host `h`'s NIC sends: an ACK, else a segment of the next ready flow.
    pub(crate) fn host_next_packet(&mut self, h: u32) -> Option<PacketId> {
        if let Some(id) = self.hosts[h as usize].acks.pop_front() {
            return Some(id);
        }
        while let Some(f) = self.hosts[h as usize].ready.pop_front() {
            match self.try_send(f) {
                Ok(id) => {
                    self.hosts[h as usize].ready.push_back(f);
                    return Some(id);
                }
                Err(why) => {
                    let now = self.q.now();
                    let Some(st) = self.flows[f as usize].state.as_mut() else { continue };
                    st.in_ready = false;
                    match why {
                        Blocked::Pacing(at) if !st.snd.pace_armed => {
                            st.snd.pace_armed = true;
                            self.q.schedule(at.max(now), Event::Pace { flow: f });
                        }
                        Blocked::NoData if st.snd.pipe_bytes < st.snd.cwnd_bytes => st.cc.note_app_limited(),
                        _ => {}
                    }
                }
            }
        }
        None
    }

    /// Builds and returns flow `f`'s next data packet, if it may send.
    fn try_send(&mut self, f: FlowId) -> Result<PacketId, Blocked> {
        let now = self.q.now();
        let tp = self.tp;
        let flow = &mut self.flows[f as usize];
        let st = flow.state.as_mut().ok_or(Blocked::NoData)?;
        if self.hosts[flow.spec.src as usize].is_paused(st.nic_queue) {
            return Err(Blocked::Paused);
        }
        let (seg, retx) = st.snd.next_segment(now, tp.mss)?;
        let payload = st.snd.payload(seg, tp.mss);
        let wire = payload + tp.header;
        st.snd.on_transmit(seg, retx, now, tp.mss, wire);
        if retx {
            flow.retransmits += 1;
            self.counters.retransmits += 1;
        }
        if st.snd.rto_deadline.is_none() {
            let deadline = now + st.snd.rto;
            st.snd.rto_deadline = Some(deadline);
            if st.snd.rto_event.is_none_or(|e| e > deadline) {
                st.snd.rto_event = Some(deadline);
                self.q.schedule(deadline, Event::Rto { flow: f });
            }
        }
        let packet = Packet {
            kind: Kind::Data,
            ecn: if tp.ecn { Ecn::Ect0 } else { Ecn::NotEct },
            ece: false,
            upstream_q: st.nic_queue,
            flow: f,
            src: self.topo.hosts[flow.spec.src as usize],
            dst: self.topo.hosts[flow.spec.dst as usize],
            seq: seg,
            sack: NO_SACK,
            wire_bytes: wire,
            payload_bytes: payload,
            ts: now,
            ingress: 0,
            hash: flow.hash,
        };
        self.counters.injected += 1;
        self.counters.data_packets += 1;
        Ok(self.arena.alloc(packet))
    }

    /// A packet reached host `h`.
    pub(crate) fn host_receive(&mut self, _h: u32, id: PacketId) {
        let p = *self.arena.get(id);
        self.arena.free(id);
        self.counters.delivered += 1;
        match p.kind {
            Kind::Data => self.on_data(&p),
            Kind::Ack => self.on_ack(&p),
        }
    }

    /// Queues an ACK at the receiver's host.
    fn send_ack(&mut self, f: FlowId, cum: u32, sack: u32, ece: bool, ts: Time) {
        let flow = &self.flows[f as usize];
        let packet = Packet {
            kind: Kind::Ack,
            ecn: Ecn::NotEct,
            ece,
            upstream_q: 0,
            flow: f,
            src: self.topo.hosts[flow.spec.dst as usize],
            dst: self.topo.hosts[flow.spec.src as usize],
            seq: cum,
            sack,
            wire_bytes: self.tp.ack_bytes,
            payload_bytes: 0,
            ts,
            ingress: 0,
            hash: flow.hash.rotate_left(16),
        };
        let id = self.arena.alloc(packet);
        self.counters.injected += 1;
        self.counters.acks += 1;
        let host = &mut self.hosts[flow.spec.dst as usize];
        host.acks.push_back(id);
        let nic = host.nic;
        self.start_tx(nic);
    }

    /// The receiver: DCTCP's ECN-echo state machine over delayed ACKs (dc.md §2.2), immediate
    /// ACKs for out-of-order and duplicate segments and for the flow's last segment.
    fn on_data(&mut self, p: &Packet) {
        let now = self.q.now();
        let f = p.flow;
        let m = self.tp.delack_segments;
        let mss = self.tp.mss;
        let warm = now >= self.warmup;
        let flow = &mut self.flows[f as usize];
        let Some(st) = flow.state.as_mut() else { return };
        let ce = p.ecn == Ecn::Ce;
        let r = &mut st.rcv;
        let mut acks: [(u32, u32, bool, Time); 2] = [(0, 0, false, 0); 2];
        let mut n = 0;
        if p.seq < r.rcv_nxt {
            acks[0] = (r.rcv_nxt, NO_SACK, ce, p.ts);
            n = 1;
        } else if p.seq > r.rcv_nxt {
            if r.pending > 0 {
                acks[n] = (r.rcv_nxt, NO_SACK, r.ce_state, r.pending_ts);
                n += 1;
                r.pending = 0;
            }
            r.accept(p.seq);
            acks[n] = (r.rcv_nxt, p.seq, ce, p.ts);
            n += 1;
        } else {
            if ce != r.ce_state && r.pending > 0 {
                acks[n] = (r.rcv_nxt, NO_SACK, r.ce_state, r.pending_ts);
                n += 1;
                r.pending = 0;
            }
            r.ce_state = ce;
            let first = r.rcv_nxt;
            let advanced = r.accept(p.seq);
            let total = st.snd.total_segs;
            let bytes: u64 = (first..first + advanced).map(|s| u64::from(st.snd.payload(s, mss))).sum();
            flow.delivered_bytes += bytes;
            if warm {
                flow.measured_bytes += bytes;
            }
            r.pending += 1;
            r.pending_ts = p.ts;
            if advanced > 1 || r.pending >= m || r.rcv_nxt == total {
                acks[n] = (r.rcv_nxt, p.seq, ce, p.ts);
                n += 1;
                r.pending = 0;
            } else if !r.delack_armed {
                r.delack_armed = true;
                r.delack_deadline = Some(now + self.tp.delack_timeout);
                self.q.schedule(now + self.tp.delack_timeout, Event::DelayedAck { flow: f });
            } else if r.delack_deadline.is_none() {
                r.delack_deadline = Some(now + self.tp.delack_timeout);
            }
            if r.rcv_nxt == total && flow.finish.is_none() {
                flow.finish = Some(now);
                self.unfinished -= 1;
            }
        }
        for &(cum, sack, ece, ts) in &acks[..n] {
            self.send_ack(f, cum, sack, ece, ts);
        }
    }

    pub(crate) fn on_delayed_ack_timer(&mut self, f: FlowId) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        let r = &mut st.rcv;
        r.delack_armed = false;
        match r.delack_deadline {
            Some(d) if d > now => {
                r.delack_armed = true;
                self.q.schedule(d, Event::DelayedAck { flow: f });
            }
            Some(_) if r.pending > 0 => {
                r.delack_deadline = None;
                r.pending = 0;
                let (cum, ece, ts) = (r.rcv_nxt, r.ce_state, r.pending_ts);
                self.send_ack(f, cum, NO_SACK, ece, ts);
            }
            _ => r.delack_deadline = None,
        }
    }

    /// The sender processes an ACK: SACK, cumulative advance, loss detection, CWR/recovery
    /// state, RTT and rate samples, then reports and sends.
    fn on_ack(&mut self, p: &Packet) {
        let now = self.q.now();
        let f = p.flow;
        let tp = self.tp;
        let per_ack = self.ccp.per_ack;
        let urgent_on_ece = self.ccp.urgent_on_ece;
        let flow = &mut self.flows[f as usize];
        if flow.sender_done {
            return;
        }
        let Some(st) = flow.state.as_mut() else { return };
        let snd = &mut st.snd;
        let mut s = AckSample { ece: p.ece, ..AckSample::default() };
        let una_before = snd.snd_una;
        let cum = p.seq.min(snd.snd_nxt);
        // Selective acknowledgement of the segment that triggered the ACK — only when it lies
        // above the cumulative acknowledgement: the receiver names the segment in in-order ACKs
        // too, and counting it as SACKed there counted it twice (once here, once below).
        if p.sack != NO_SACK && p.sack >= cum.max(snd.snd_una) && p.sack < snd.snd_nxt {
            let len = u64::from(snd.payload(p.sack, tp.mss));
            let idx = (p.sack - snd.snd_una) as usize;
            let seg = snd.segs[idx];
            if seg.flags & SACKED == 0 {
                if seg.flags & IN_PIPE != 0 {
                    snd.pipe_bytes -= len;
                }
                snd.segs[idx].flags = (seg.flags | SACKED) & !(IN_PIPE | LOST);
                s.sacked_bytes += len;
                s.sacked_pkts += 1;
                if p.ece {
                    s.ce_bytes += len;
                    s.ce_pkts += 1;
                }
                Sender::rate_delivered(&mut snd.rate_basis, &mut snd.first_tx_time, &seg);
                snd.delivered += len;
                snd.highest_sacked = Some(snd.highest_sacked.map_or(p.sack, |h| h.max(p.sack)));
            }
        }
        // Cumulative acknowledgement.
        while snd.snd_una < cum {
            let seg = snd.segs.pop_front().expect("segment state for every outstanding segment");
            let len = u64::from(snd.payload(snd.snd_una, tp.mss));
            if seg.flags & SACKED == 0 {
                if seg.flags & IN_PIPE != 0 {
                    snd.pipe_bytes -= len;
                }
                if p.ece {
                    s.ce_bytes += len;
                    s.ce_pkts += 1;
                }
                Sender::rate_delivered(&mut snd.rate_basis, &mut snd.first_tx_time, &seg);
                snd.delivered += len;
            }
            s.acked_bytes += len;
            s.acked_pkts += 1;
            snd.snd_una += 1;
        }
        let progressed = s.acked_pkts + s.sacked_pkts > 0;
        if progressed {
            snd.delivered_time = now;
            if p.ts <= now {
                s.rtt = Some(now - p.ts);
                snd.rtt_sample(now - p.ts, &tp);
            }
            let rb = snd.rate_basis;
            let ack_elapsed = now.saturating_sub(rb.prior_time);
            if rb.valid && rb.send_elapsed > 0 && ack_elapsed > 0 {
                let d = snd.delivered - rb.prior_delivered;
                s.rates = Some((rate(d, rb.send_elapsed), rate(d, ack_elapsed)));
            }
        }
        // Loss detection: unsacked segments with `dupthresh` sacked segments above them.
        if let Some(hs) = snd.highest_sacked {
            let mut seg = snd.loss_scan.max(snd.snd_una);
            while seg + tp.dupthresh <= hs {
                let idx = (seg - snd.snd_una) as usize;
                let flags = snd.segs[idx].flags;
                if flags & (SACKED | LOST | RETRANSMITTED) == 0 && flags & IN_PIPE != 0 {
                    snd.segs[idx].flags = (flags | LOST) & !IN_PIPE;
                    snd.pipe_bytes -= u64::from(snd.payload(seg, tp.mss));
                    snd.retx.push_back(seg);
                    s.lost_pkts += 1;
                }
                seg += 1;
            }
            snd.loss_scan = seg;
        }
        // Congestion state (the datapath's, reported as urgent state changes).
        if snd.recovery_until.is_some_and(|r| snd.snd_una >= r) {
            snd.recovery_until = None;
        }
        if snd.cwr_until.is_some_and(|r| snd.snd_una >= r) {
            snd.cwr_until = None;
        }
        if s.lost_pkts > 0 && snd.recovery_until.is_none() {
            snd.recovery_until = Some(snd.snd_nxt);
            st.cc.raise(Urgent::Loss);
        }
        if p.ece && progressed && snd.cwr_until.is_none() && snd.recovery_until.is_none() {
            snd.cwr_until = Some(snd.snd_nxt);
            if urgent_on_ece {
                st.cc.raise(Urgent::StateChange);
            }
        }
        // Retransmission timer: restart on forward progress, stop when nothing is outstanding.
        if snd.snd_una > una_before {
            snd.rto_deadline = (snd.snd_una < snd.snd_nxt).then_some(now + snd.rto);
            if let Some(d) = snd.rto_deadline {
                if snd.rto_event.is_none() {
                    snd.rto_event = Some(d);
                    self.q.schedule(d, Event::Rto { flow: f });
                }
            }
        }
        st.cc.on_ack(&s);
        let done = snd.done();
        if per_ack || st.cc.is_urgent() {
            self.report(f);
        }
        if done {
            self.sender_finished(f);
        } else {
            self.wake(f);
        }
    }

    /// The last segment is acknowledged: release the sender (and the flow's state once the
    /// receiver has everything too).
    fn sender_finished(&mut self, f: FlowId) {
        let flow = &mut self.flows[f as usize];
        flow.sender_done = true;
        if let Some(st) = flow.state.take() {
            flow.reports = st.cc.reports;
        }
        let host = &mut self.hosts[flow.spec.src as usize];
        host.senders.retain(|&x| x != f);
        host.ready.retain(|&x| x != f);
    }

    pub(crate) fn on_rto_timer(&mut self, f: FlowId) {
        let now = self.q.now();
        let tp = self.tp;
        let flow = &mut self.flows[f as usize];
        let Some(st) = flow.state.as_mut() else { return };
        let snd = &mut st.snd;
        if snd.rto_event != Some(now) {
            return;
        }
        snd.rto_event = None;
        match snd.rto_deadline {
            None => return,
            Some(d) if d > now => {
                snd.rto_event = Some(d);
                self.q.schedule(d, Event::Rto { flow: f });
                return;
            }
            Some(_) => {}
        }
        // Timeout: everything unacknowledged is presumed lost and resent in order (go-back-N).
        snd.retx.clear();
        for i in 0..snd.segs.len() {
            let seg = &mut snd.segs[i];
            if seg.flags & SACKED == 0 {
                seg.flags = (seg.flags | LOST) & !(IN_PIPE | RETRANSMITTED);
                snd.retx.push_back(snd.snd_una + i as u32);
            }
        }
        snd.pipe_bytes = 0;
        snd.recovery_until = None;
        snd.cwr_until = None;
        snd.loss_scan = snd.snd_una;
        snd.rto = (snd.rto * 2).min(tp.rto_max);
        let deadline = now + snd.rto;
        snd.rto_deadline = Some(deadline);
        snd.rto_event = Some(deadline);
        self.q.schedule(deadline, Event::Rto { flow: f });
        flow.timeouts += 1;
        self.counters.timeouts += 1;
        st.cc.note_timeout();
        self.report(f);
        self.wake(f);
    }

    pub(crate) fn on_pace_timer(&mut self, f: FlowId) {
        if let Some(st) = self.flows[f as usize].state.as_mut() {
            st.snd.pace_armed = false;
            self.wake(f);
        }
    }

    fn arm_report_timer(&mut self, f: FlowId) {
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        if st.cc.timer_armed {
            return;
        }
        st.cc.timer_armed = true;
        let at = st.cc.last_report + st.cc.interval(st.snd.srtt);
        self.q.schedule(at.max(self.q.now()), Event::Report { flow: f });
    }

    pub(crate) fn on_report_timer(&mut self, f: FlowId) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.cc.timer_armed = false;
        let due = st.cc.last_report + st.cc.interval(st.snd.srtt);
        if now >= due {
            self.report(f);
        }
        self.arm_report_timer(f);
    }

    /// Sends a report for flow `f` now and routes the algorithm's action to the datapath.
    fn report(&mut self, f: FlowId) {
        let now = self.q.now();
        let mss = self.tp.mss;
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        let snd = &st.snd;
        let pending = if snd.total_segs == u32::MAX {
            snd.pipe_bytes + UNBOUNDED_BACKLOG_BYTES
        } else {
            let acked: u64 = u64::from(snd.snd_una) * u64::from(mss);
            self.flows[f as usize].spec.bytes.unwrap_or(0).saturating_sub(acked)
        };
        let st = self.flows[f as usize].state.as_mut().expect("checked above");
        let g = Gauges {
            mss,
            inflight_bytes: st.snd.pipe_bytes,
            pending_bytes: pending,
            cwnd_bytes: st.snd.cwnd_bytes,
            pacing: st.snd.pacing,
            srtt: st.snd.srtt,
        };
        let report = st.cc.build_report(now, &g);
        let outcome = st.cc.decide(&report, now);
        self.counters.reports += 1;
        self.count_outcome(&outcome);
        self.deliver(f, outcome.command);
    }

    fn count_outcome(&mut self, o: &ccp_contract::Outcome) {
        self.counters.algorithm_faults += u64::from(o.fault.is_some());
        self.counters.fallbacks += u64::from(o.fell_back_to.is_some());
        self.counters.clamped_values += u64::from(o.clamped);
    }

    /// Applies a change now, or after the agent delay.
    fn deliver(&mut self, f: FlowId, change: Command) {
        if change.is_empty() {
            return;
        }
        if self.ccp.agent_delay == 0 {
            self.apply(f, &change);
            return;
        }
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.cc.pending.push_back(change);
        self.q.after(self.ccp.agent_delay, Event::ApplyAction { flow: f });
    }

    pub(crate) fn on_apply_action(&mut self, f: FlowId) {
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        if let Some(c) = st.cc.pending.pop_front() {
            self.apply(f, &c);
        }
    }

    fn apply(&mut self, f: FlowId, c: &Command) {
        let now = self.q.now();
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        if let Some(w) = c.cwnd_bytes {
            st.snd.cwnd_bytes = w;
        }
        if let Some(p) = c.pacing {
            st.snd.pacing = match p {
                PacingCommand::Off => None,
                PacingCommand::BytesPerSec(r) => Some(r as f64),
            };
            st.snd.next_send_at = st.snd.next_send_at.min(now);
        }
        if st.cc.apply_reporting(c) && !self.ccp.per_ack {
            self.arm_report_timer(f);
        }
        self.wake(f);
    }

    pub(crate) fn on_cnm(&mut self, f: FlowId, qfb: u8, q_off: i32, q_delta: i32) {
        let Some(st) = self.flows[f as usize].state.as_mut() else { return };
        st.cc.set_feedback(NetworkFeedback::Qcn {
            fb_quantized: qfb,
            q_off_bytes: i64::from(q_off),
            q_delta_bytes: i64::from(q_delta),
        });
        self.report(f);
    }

    /// A per-queue pause/resume reached host `h`'s NIC (BFC hook): flows on that NIC queue stop
    /// or resume.
    pub(crate) fn host_queue_control(&mut self, h: u32, queue: u16, paused: bool) {
        self.hosts[h as usize].set_paused(queue, paused);
        if !paused {
            let flows: Vec<FlowId> = self.hosts[h as usize].senders.clone();
            for f in flows {
                if self.flows[f as usize].state.as_ref().is_some_and(|s| s.nic_queue == queue) {
                    self.wake(f);
                }
            }
        }
    }
}
