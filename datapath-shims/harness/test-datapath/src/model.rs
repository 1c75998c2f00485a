//! The flow and link model: deterministic, event-driven, integer nanoseconds.
//!
//! The model knows nothing about libccp or real time. The driver asks each flow for the time
//! of its next event, calls [`Flow::step`] once that time has come, feeds any returned
//! [`Measurement`] to libccp, applies the commanded window/rate with [`Flow::set_cwnd`] and
//! [`Flow::set_rate`], and lets the flow send with [`Flow::send`]. Packets are timestamped with
//! their *scheduled* event times, so RTT samples and rates are exact even when the process
//! wakes up late; only the interaction with the agent happens in real time.
//!
//! # Path
//! A packet sent at `s` enters the bottleneck (if any): a FIFO served at the link rate, whose
//! occupancy counts the packet in service. An arriving packet is dropped when the occupancy has
//! reached the buffer size (drop-tail) and marked CE when more than `ecn_k` packets are ahead of
//! it. Because the link is FIFO at a constant rate, a packet's departure time is known on
//! arrival: `max(s, link busy until) + len * 8 / rate`. It reaches the receiver RTT/2 after
//! departure (or after `s` without a bottleneck), and the ACK takes the other RTT/2 back.
//!
//! # Receiver
//! One ACK per `ack_every` packets received, or 40 ms after the oldest unacknowledged packet
//! arrived, whichever is first. An ACK names the newest packet received, and acknowledges every
//! packet received up to then (SACK-like: holes left by dropped packets do not hold back the
//! acknowledgement of later packets, so `bytes_misordered` is always 0).
//!
//! # Sender
//! Keeps `bytes in flight + next packet <= cwnd` (at least one packet may always be in flight,
//! so a tiny window cannot deadlock the emulation) and, when a pacing rate has been commanded,
//! spaces packets `len / rate` apart. A packet not yet acknowledged when 3 later packets have
//! been is declared lost (`lost_pkts_sample` on that ACK) and its bytes are sent again as a new
//! packet. An RFC 6298 retransmission timer (minimum 200 ms, doubling on repeats) and scripted
//! timeouts treat every packet in flight as lost, queue their bytes for retransmission and
//! report `was_timeout`; late ACKs for those packets are ignored. Scripted losses drop a flow's
//! next packet sent at or after the scripted time, before it reaches the bottleneck; a scripted
//! mark fraction marks evenly spaced delivered packets.
//!
//! # Measurements
//! One [`Measurement`] per ACK that acknowledges new data: bytes/packets acked, CE-marked
//! bytes/packets among them, packets declared lost, the RTT sample of the newest packet acked
//! (send to ACK arrival, so including queueing and delayed-ACK waits), bytes/packets in flight
//! after the ACK, bytes pending (not yet acknowledged; `u32::MAX` for an unlimited flow), and
//! send/receive rates over the packets acknowledged during the last RTT sample: their bytes
//! (minus the first packet's) divided by the spread of their send times and of their ACK times
//! respectively. A rate whose spread is zero keeps its previous value, as ccp-kernel does.

use std::collections::VecDeque;

/// Nanoseconds per microsecond.
pub const NS_PER_US: u64 = 1_000;
const NS_PER_S: u64 = 1_000_000_000;
/// Longest time the receiver holds back an ACK (Linux's delayed-ACK maximum order of magnitude).
const DELAYED_ACK_NS: u64 = 40_000_000;
/// Packets acknowledged after a hole before the hole is declared lost (TCP's dupthresh).
const DUPTHRESH: u32 = 3;
const MIN_RTO_NS: u64 = 200_000_000;
const INITIAL_RTO_NS: u64 = 1_000_000_000;
const MAX_RTO_NS: u64 = 60_000_000_000;
/// Safety valve against an absurd commanded window: never track more packets than this.
pub const MAX_INFLIGHT_PKTS: usize = 1 << 17;

/// A bottleneck: a drop-tail FIFO served at a constant rate.
#[derive(Debug)]
pub struct Link {
    kbps: u64,
    capacity_pkts: u64,
    ecn_k: Option<u64>,
    busy_until_ns: u64,
    /// Departure times of the packets still in the link (queued or in service), oldest first.
    departures: VecDeque<u64>,
}

/// What the bottleneck does with an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    Dropped,
    Queued { departs_ns: u64, ce: bool },
}

impl Link {
    /// `kbps` must be positive and `capacity_pkts` at least 1 (the CLI guarantees both).
    pub fn new(kbps: u64, capacity_pkts: u64, ecn_k: Option<u64>) -> Self {
        Link { kbps: kbps.max(1), capacity_pkts: capacity_pkts.max(1), ecn_k, busy_until_ns: 0, departures: VecDeque::new() }
    }

    /// The same link with nothing in it, for a flow that replaces another on a link of its own.
    pub fn emptied(&self) -> Link {
        Link::new(self.kbps, self.capacity_pkts, self.ecn_k)
    }

    /// Packets in the link (queued or in service) at `now_ns`.
    pub fn occupancy(&mut self, now_ns: u64) -> u64 {
        while self.departures.front().is_some_and(|&d| d <= now_ns) {
            self.departures.pop_front();
        }
        self.departures.len() as u64
    }

    fn admit(&mut self, now_ns: u64, len: u32) -> Admission {
        let ahead = self.occupancy(now_ns);
        if ahead >= self.capacity_pkts {
            return Admission::Dropped;
        }
        let ce = self.ecn_k.is_some_and(|k| ahead > k);
        let tx_ns = (u64::from(len) * 8 * 1_000_000).div_ceil(self.kbps);
        let departs_ns = now_ns.max(self.busy_until_ns) + tx_ns;
        self.busy_until_ns = departs_ns;
        self.departures.push_back(departs_ns);
        Admission::Queued { departs_ns, ce }
    }
}

/// The static description of one flow.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    pub start_ns: u64,
    pub rtt_ns: u64,
    pub mss: u32,
    pub init_cwnd_bytes: u32,
    /// `None`: unlimited data.
    pub bytes: Option<u64>,
    pub ack_every: u32,
    /// Index into the driver's links, if the flow has a bottleneck.
    pub link: Option<usize>,
    /// Sorted.
    pub loss_at_ns: Vec<u64>,
    /// Sorted.
    pub timeout_at_ns: Vec<u64>,
    /// Fraction of delivered packets to mark CE, in parts per million.
    pub mark_ppm: u64,
}

/// Why a packet never reached the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DropCause {
    Overflow,
    Scripted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Delivered,
    Dropped(DropCause),
}

#[derive(Debug)]
struct Packet {
    seq: u64,
    len: u32,
    sent_ns: u64,
    fate: Fate,
    ce: bool,
    /// Packets sent after this one that have been acknowledged while it was not.
    sacked_above: u32,
}

#[derive(Debug)]
struct AckInTransit {
    arrive_ns: u64,
    /// Newest packet received when the ACK was sent.
    hi_seq: u64,
}

/// What caused a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutCause {
    Scripted,
    Rto,
}

impl TimeoutCause {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutCause::Scripted => "scripted",
            TimeoutCause::Rto => "rto",
        }
    }
}

/// A timeout that just happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutInfo {
    pub cause: TimeoutCause,
    /// Packets that were in flight and are now queued for retransmission.
    pub requeued_pkts: u64,
}

/// Per-ACK (or per-timeout) measurements, i.e. libccp's primitives minus the commanded
/// window and rate, which only the libccp glue knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Measurement {
    pub bytes_acked: u32,
    pub packets_acked: u32,
    pub ecn_bytes: u32,
    pub ecn_packets: u32,
    pub lost_pkts_sample: u32,
    pub rtt_sample_us: u64,
    pub rate_outgoing: u64,
    pub rate_incoming: u64,
    pub bytes_in_flight: u32,
    pub packets_in_flight: u32,
    pub bytes_pending: u32,
    /// Of `lost_pkts_sample`: how many were dropped by the bottleneck buffer and how many by
    /// a scripted loss.
    pub lost_overflow: u32,
    pub lost_scripted: u32,
    pub timeout: Option<TimeoutInfo>,
}

/// A once-per-RTT snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    pub delivered_bytes: u64,
    pub interval_bytes: u64,
    pub interval_ns: u64,
    pub inflight_bytes: u64,
    pub inflight_pkts: u64,
    /// Bottleneck occupancy (all flows, if shared); 0 without a bottleneck.
    pub queue_pkts: u64,
    pub last_rtt_us: u64,
    pub interval_acked_pkts: u64,
    pub interval_marked_pkts: u64,
    pub total_marked_pkts: u64,
}

/// Lifetime counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub sent_pkts: u64,
    pub retx_pkts: u64,
    pub delivered_bytes: u64,
    pub acked_pkts: u64,
    pub lost_pkts: u64,
    pub marked_pkts: u64,
    pub timeouts: u64,
}

/// What one [`Flow::step`] produced for the driver.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The flow's start time came: start its libccp connection, then call [`Flow::send`].
    Started,
    /// Invoke libccp with this, apply the commanded window/rate, then call [`Flow::send`].
    Measure(Measurement),
    /// Report these.
    Stats(Stats),
    /// Something internal to the model happened (a packet reached the receiver, a pacing
    /// gap elapsed, a late ACK was ignored); nothing for the driver to do.
    Internal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Pending,
    Running,
    Finished,
}

/// The kinds of events a flow schedules, in tie-breaking order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Start,
    Arrival,
    DelayedAck,
    Ack,
    ScriptedTimeout,
    Rto,
    Pacing,
    Stats,
}

/// One emulated TCP-like flow: sender, path and receiver.
#[derive(Debug)]
pub struct Flow {
    spec: FlowSpec,
    phase: Phase,
    // Control, as last commanded.
    cwnd_bytes: u32,
    rate_bytes_per_s: u32,
    pace_next_ns: u64,
    // Sender.
    next_seq: u64,
    unsent_bytes: Option<u64>,
    retx: VecDeque<u32>,
    retx_bytes: u64,
    outstanding: VecDeque<Packet>,
    inflight_bytes: u64,
    scratch: Vec<Packet>,
    // Path and receiver.
    to_receiver: VecDeque<(u64, u64)>,
    acks: VecDeque<AckInTransit>,
    rx_pending: u32,
    rx_hi_seq: u64,
    delack_deadline_ns: Option<u64>,
    // Scripts.
    next_loss: usize,
    next_timeout: usize,
    marker_count: u64,
    // RTT estimation and the retransmission timer.
    srtt_ns: u64,
    rttvar_ns: u64,
    last_rtt_ns: u64,
    rto_backoff: u32,
    rto_deadline_ns: Option<u64>,
    // Rate measurement: (sent, acked, len) of packets acknowledged in the last RTT.
    rate_window: VecDeque<(u64, u64, u32)>,
    rate_window_bytes: u64,
    rate_outgoing: u64,
    rate_incoming: u64,
    // Reporting.
    totals: Totals,
    next_stats_ns: u64,
    stats_last_ns: u64,
    stats_last_delivered: u64,
    stats_last_acked: u64,
    stats_last_marked: u64,
    done_ns: Option<u64>,
}

impl Flow {
    pub fn new(spec: FlowSpec) -> Self {
        Flow {
            phase: Phase::Pending,
            cwnd_bytes: spec.init_cwnd_bytes,
            rate_bytes_per_s: 0,
            pace_next_ns: 0,
            next_seq: 0,
            unsent_bytes: spec.bytes,
            retx: VecDeque::new(),
            retx_bytes: 0,
            outstanding: VecDeque::new(),
            inflight_bytes: 0,
            scratch: Vec::new(),
            to_receiver: VecDeque::new(),
            acks: VecDeque::new(),
            rx_pending: 0,
            rx_hi_seq: 0,
            delack_deadline_ns: None,
            next_loss: 0,
            next_timeout: 0,
            marker_count: 0,
            srtt_ns: 0,
            rttvar_ns: 0,
            last_rtt_ns: 0,
            rto_backoff: 0,
            rto_deadline_ns: None,
            rate_window: VecDeque::new(),
            rate_window_bytes: 0,
            rate_outgoing: 0,
            rate_incoming: 0,
            totals: Totals::default(),
            next_stats_ns: 0,
            stats_last_ns: 0,
            stats_last_delivered: 0,
            stats_last_acked: 0,
            stats_last_marked: 0,
            done_ns: None,
            spec,
        }
    }

    pub fn spec(&self) -> &FlowSpec {
        &self.spec
    }

    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// When a finite flow had all its bytes acknowledged, if it has.
    pub fn done_ns(&self) -> Option<u64> {
        self.done_ns
    }

    /// The window libccp commanded, in bytes (applied from the next packet on).
    pub fn set_cwnd(&mut self, cwnd_bytes: u32) {
        self.cwnd_bytes = cwnd_bytes;
    }

    /// The pacing rate libccp commanded, in bytes/s (0 = unpaced).
    pub fn set_rate(&mut self, bytes_per_s: u32) {
        self.rate_bytes_per_s = bytes_per_s;
    }

    /// Time of the next event, if any; call [`Flow::step`] then.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.next_event().map(|(t, _)| t)
    }

    fn next_event(&self) -> Option<(u64, Kind)> {
        match self.phase {
            Phase::Pending => return Some((self.spec.start_ns, Kind::Start)),
            Phase::Finished => return None,
            Phase::Running => {}
        }
        // This runs twice per event, so it is written as plain comparisons. Candidates come in
        // reverse tie-breaking order and `<=` lets the later (higher-priority) one win a tie.
        let mut best = (self.next_stats_ns, Kind::Stats);
        let mut consider = |t: Option<u64>, kind: Kind| {
            if let Some(t) = t.filter(|&t| t <= best.0) {
                best = (t, kind);
            }
        };
        if self.rate_bytes_per_s > 0 && self.sendable().is_some() {
            consider(Some(self.pace_next_ns), Kind::Pacing);
        }
        consider(self.rto_deadline_ns, Kind::Rto);
        consider(self.spec.timeout_at_ns.get(self.next_timeout).copied(), Kind::ScriptedTimeout);
        consider(self.acks.front().map(|a| a.arrive_ns), Kind::Ack);
        consider(self.delack_deadline_ns, Kind::DelayedAck);
        consider(self.to_receiver.front().map(|&(_, rx)| rx), Kind::Arrival);
        Some(best)
    }

    /// Handles the flow's next event at its scheduled time ([`Flow::next_event_ns`]), which
    /// the caller has reached; everything the model records is stamped with that time.
    pub fn step(&mut self, links: &mut [Link]) -> Outcome {
        let Some((t, kind)) = self.next_event() else {
            return Outcome::Internal;
        };
        match kind {
            Kind::Start => {
                self.phase = Phase::Running;
                self.next_stats_ns = t + self.spec.rtt_ns;
                self.stats_last_ns = t;
                Outcome::Started
            }
            Kind::Arrival => {
                self.on_arrival();
                Outcome::Internal
            }
            Kind::DelayedAck => {
                self.delack_deadline_ns = None;
                self.emit_ack(t);
                Outcome::Internal
            }
            Kind::Ack => match self.on_ack(t) {
                Some(m) => Outcome::Measure(m),
                None => Outcome::Internal,
            },
            Kind::ScriptedTimeout => {
                self.next_timeout += 1;
                Outcome::Measure(self.on_timeout(TimeoutCause::Scripted))
            }
            Kind::Rto => {
                self.rto_backoff = (self.rto_backoff + 1).min(16);
                Outcome::Measure(self.on_timeout(TimeoutCause::Rto))
            }
            Kind::Pacing => {
                self.send(t, links);
                Outcome::Internal
            }
            Kind::Stats => Outcome::Stats(self.stats(t, links)),
        }
    }

    /// Sends as much as the window, pacing and the data left allow, at time `now_ns`.
    pub fn send(&mut self, now_ns: u64, links: &mut [Link]) {
        if self.phase != Phase::Running {
            return;
        }
        while let Some((len, is_retx)) = self.sendable() {
            if self.rate_bytes_per_s > 0 {
                if self.pace_next_ns > now_ns {
                    break;
                }
                let gap = u64::from(len) * NS_PER_S / u64::from(self.rate_bytes_per_s);
                self.pace_next_ns = now_ns + gap;
            }
            self.transmit(now_ns, len, is_retx, links);
        }
    }

    /// The next packet's length and whether it is a retransmission, if the window and the
    /// data left allow sending it (pacing aside).
    fn sendable(&self) -> Option<(u32, bool)> {
        let (len, is_retx) = match (self.retx.front(), self.unsent_bytes) {
            (Some(&len), _) => (len, true),
            (None, None) => (self.spec.mss, false),
            (None, Some(0)) => return None,
            (None, Some(left)) => (left.min(u64::from(self.spec.mss)) as u32, false),
        };
        let fits = self.inflight_bytes + u64::from(len) <= u64::from(self.cwnd_bytes);
        let allowed = (fits || self.outstanding.is_empty()) && self.outstanding.len() < MAX_INFLIGHT_PKTS;
        allowed.then_some((len, is_retx))
    }

    fn transmit(&mut self, now_ns: u64, len: u32, is_retx: bool, links: &mut [Link]) {
        if is_retx {
            self.retx.pop_front();
            self.retx_bytes -= u64::from(len);
            self.totals.retx_pkts += 1;
        } else if let Some(left) = self.unsent_bytes.as_mut() {
            *left -= u64::from(len);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let one_way = self.spec.rtt_ns / 2;

        let scripted_loss = self.spec.loss_at_ns.get(self.next_loss).is_some_and(|&at| at <= now_ns);
        let (fate, mut ce) = if scripted_loss {
            self.next_loss += 1;
            (Fate::Dropped(DropCause::Scripted), false)
        } else {
            match self.spec.link.and_then(|i| links.get_mut(i)) {
                None => {
                    self.to_receiver.push_back((seq, now_ns + one_way));
                    (Fate::Delivered, false)
                }
                Some(link) => match link.admit(now_ns, len) {
                    Admission::Dropped => (Fate::Dropped(DropCause::Overflow), false),
                    Admission::Queued { departs_ns, ce } => {
                        self.to_receiver.push_back((seq, departs_ns + one_way));
                        (Fate::Delivered, ce)
                    }
                },
            }
        };
        if fate == Fate::Delivered && self.spec.mark_ppm > 0 {
            // Mark packet n when n * f crosses an integer: exactly a fraction f, evenly spaced.
            let before = self.marker_count * self.spec.mark_ppm / 1_000_000;
            self.marker_count += 1;
            ce |= self.marker_count * self.spec.mark_ppm / 1_000_000 > before;
        }

        self.outstanding.push_back(Packet { seq, len, sent_ns: now_ns, fate, ce, sacked_above: 0 });
        self.inflight_bytes += u64::from(len);
        self.totals.sent_pkts += 1;
        if self.rto_deadline_ns.is_none() {
            self.rto_deadline_ns = Some(now_ns + self.rto_ns());
        }
    }

    fn on_arrival(&mut self) {
        let Some((seq, rx_ns)) = self.to_receiver.pop_front() else {
            return;
        };
        self.rx_pending += 1;
        self.rx_hi_seq = seq;
        if self.rx_pending >= self.spec.ack_every {
            self.emit_ack(rx_ns);
        } else if self.delack_deadline_ns.is_none() {
            self.delack_deadline_ns = Some(rx_ns + DELAYED_ACK_NS);
        }
    }

    fn emit_ack(&mut self, now_ns: u64) {
        if self.rx_pending == 0 {
            return;
        }
        let back = self.spec.rtt_ns - self.spec.rtt_ns / 2;
        self.acks.push_back(AckInTransit { arrive_ns: now_ns + back, hi_seq: self.rx_hi_seq });
        self.rx_pending = 0;
        self.delack_deadline_ns = None;
    }

    /// Processes the oldest ACK in transit; `None` if it acknowledged nothing new (it was for
    /// packets already written off by a timeout).
    fn on_ack(&mut self, now_ns: u64) -> Option<Measurement> {
        let ack = self.acks.pop_front()?;
        self.scratch.clear();
        while let Some(p) = self.outstanding.pop_front() {
            if p.seq > ack.hi_seq {
                self.outstanding.push_front(p);
                break;
            }
            self.scratch.push(p);
        }
        // Every delivered packet up to hi_seq has reached the receiver (the path is FIFO), so
        // the packets taken out are exactly the newly acknowledged ones plus holes (drops).
        let mut acked_later = 0;
        for p in self.scratch.iter_mut().rev() {
            match p.fate {
                Fate::Delivered => acked_later += 1,
                Fate::Dropped(_) => p.sacked_above += acked_later,
            }
        }
        let mut m = Measurement::default();
        let mut newest_sent_ns = None;
        let mut lost_bytes = 0u64;
        for p in &self.scratch {
            match p.fate {
                Fate::Delivered => {
                    m.bytes_acked += p.len;
                    m.packets_acked += 1;
                    if p.ce {
                        m.ecn_bytes += p.len;
                        m.ecn_packets += 1;
                    }
                    newest_sent_ns = Some(p.sent_ns);
                    self.rate_window.push_back((p.sent_ns, now_ns, p.len));
                    self.rate_window_bytes += u64::from(p.len);
                }
                Fate::Dropped(cause) if p.sacked_above >= DUPTHRESH => {
                    m.lost_pkts_sample += 1;
                    match cause {
                        DropCause::Overflow => m.lost_overflow += 1,
                        DropCause::Scripted => m.lost_scripted += 1,
                    }
                    lost_bytes += u64::from(p.len);
                    self.retx.push_back(p.len);
                    self.retx_bytes += u64::from(p.len);
                }
                Fate::Dropped(_) => {}
            }
        }
        // Holes not yet declared lost go back to the front, in order.
        while let Some(p) = self.scratch.pop() {
            if matches!(p.fate, Fate::Dropped(_)) && p.sacked_above < DUPTHRESH {
                self.outstanding.push_front(p);
            }
        }
        let newest_sent_ns = newest_sent_ns?;

        self.inflight_bytes -= u64::from(m.bytes_acked) + lost_bytes;
        self.totals.delivered_bytes += u64::from(m.bytes_acked);
        self.totals.acked_pkts += u64::from(m.packets_acked);
        self.totals.lost_pkts += u64::from(m.lost_pkts_sample);
        self.totals.marked_pkts += u64::from(m.ecn_packets);

        let rtt_ns = now_ns - newest_sent_ns;
        self.on_rtt_sample(rtt_ns);
        m.rtt_sample_us = (rtt_ns / NS_PER_US).max(1);
        self.update_rates(now_ns);
        m.rate_outgoing = self.rate_outgoing;
        m.rate_incoming = self.rate_incoming;

        self.rto_backoff = 0;
        self.rto_deadline_ns = (!self.outstanding.is_empty()).then(|| now_ns + self.rto_ns());
        self.fill_flow_state(&mut m);

        if self.unsent_bytes == Some(0) && self.retx.is_empty() && self.outstanding.is_empty() {
            self.phase = Phase::Finished;
            self.done_ns = Some(now_ns);
        }
        Some(m)
    }

    /// Treats every packet in flight as lost and queues its bytes for retransmission.
    fn on_timeout(&mut self, cause: TimeoutCause) -> Measurement {
        let requeued_pkts = self.outstanding.len() as u64;
        for p in self.outstanding.drain(..) {
            self.retx.push_back(p.len);
            self.retx_bytes += u64::from(p.len);
        }
        self.inflight_bytes = 0;
        self.rto_deadline_ns = None;
        self.totals.timeouts += 1;
        let mut m = Measurement {
            timeout: Some(TimeoutInfo { cause, requeued_pkts }),
            rate_outgoing: self.rate_outgoing,
            rate_incoming: self.rate_incoming,
            ..Measurement::default()
        };
        self.fill_flow_state(&mut m);
        m
    }

    fn fill_flow_state(&self, m: &mut Measurement) {
        m.bytes_in_flight = clamp_u32(self.inflight_bytes);
        m.packets_in_flight = clamp_u32(self.outstanding.len() as u64);
        m.bytes_pending = match self.unsent_bytes {
            None => u32::MAX,
            Some(unsent) => clamp_u32(unsent + self.retx_bytes + self.inflight_bytes),
        };
    }

    /// RFC 6298 smoothing, in integers.
    fn on_rtt_sample(&mut self, rtt_ns: u64) {
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt_ns;
            self.rttvar_ns = rtt_ns / 2;
        } else {
            self.rttvar_ns = (3 * self.rttvar_ns + self.srtt_ns.abs_diff(rtt_ns)) / 4;
            self.srtt_ns = (7 * self.srtt_ns + rtt_ns) / 8;
        }
        self.last_rtt_ns = rtt_ns;
    }

    fn rto_ns(&self) -> u64 {
        let base = if self.srtt_ns == 0 { INITIAL_RTO_NS } else { (self.srtt_ns + 4 * self.rttvar_ns).max(MIN_RTO_NS) };
        base.saturating_mul(1 << self.rto_backoff).min(MAX_RTO_NS)
    }

    /// Send and receive rates over the packets acknowledged during the last RTT sample.
    fn update_rates(&mut self, now_ns: u64) {
        let horizon = now_ns.saturating_sub(self.last_rtt_ns);
        while self.rate_window.len() > 2 && self.rate_window.front().is_some_and(|e| e.1 < horizon) {
            if let Some((_, _, len)) = self.rate_window.pop_front() {
                self.rate_window_bytes -= u64::from(len);
            }
        }
        let (Some(&(first_sent, first_acked, first_len)), Some(&(last_sent, last_acked, _))) =
            (self.rate_window.front(), self.rate_window.back())
        else {
            return;
        };
        let bytes = u128::from(self.rate_window_bytes - u64::from(first_len));
        let per_second =
            |interval_ns: u64| u64::try_from(bytes * u128::from(NS_PER_S) / u128::from(interval_ns)).unwrap_or(u64::MAX);
        if last_sent > first_sent {
            self.rate_outgoing = per_second(last_sent - first_sent);
        }
        if last_acked > first_acked {
            self.rate_incoming = per_second(last_acked - first_acked);
        }
    }

    fn stats(&mut self, now_ns: u64, links: &mut [Link]) -> Stats {
        let queue_pkts = self.spec.link.and_then(|i| links.get_mut(i)).map_or(0, |l| l.occupancy(now_ns));
        let s = Stats {
            delivered_bytes: self.totals.delivered_bytes,
            interval_bytes: self.totals.delivered_bytes - self.stats_last_delivered,
            interval_ns: now_ns - self.stats_last_ns,
            inflight_bytes: self.inflight_bytes,
            inflight_pkts: self.outstanding.len() as u64,
            queue_pkts,
            last_rtt_us: self.last_rtt_ns / NS_PER_US,
            interval_acked_pkts: self.totals.acked_pkts - self.stats_last_acked,
            interval_marked_pkts: self.totals.marked_pkts - self.stats_last_marked,
            total_marked_pkts: self.totals.marked_pkts,
        };
        self.stats_last_ns = now_ns;
        self.stats_last_delivered = self.totals.delivered_bytes;
        self.stats_last_acked = self.totals.acked_pkts;
        self.stats_last_marked = self.totals.marked_pkts;
        self.next_stats_ns = now_ns + self.spec.rtt_ns;
        s
    }
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn spec() -> FlowSpec {
        FlowSpec {
            start_ns: 0,
            rtt_ns: 10 * MS,
            mss: 1000,
            init_cwnd_bytes: 10_000,
            bytes: None,
            ack_every: 1,
            link: None,
            loss_at_ns: Vec::new(),
            timeout_at_ns: Vec::new(),
            mark_ppm: 0,
        }
    }

    /// Runs the flow in simulated time until `until_ns`, with `control` playing libccp: it
    /// sees every measurement and may return a new cwnd.
    fn simulate(
        flow: &mut Flow,
        links: &mut [Link],
        until_ns: u64,
        mut control: impl FnMut(u64, &Measurement) -> Option<u32>,
    ) -> (Vec<(u64, Measurement)>, Vec<Stats>) {
        let mut measurements = Vec::new();
        let mut stats = Vec::new();
        while let Some(t) = flow.next_event_ns().filter(|&t| t <= until_ns) {
            match flow.step(links) {
                Outcome::Started => flow.send(t, links),
                Outcome::Measure(m) => {
                    if let Some(cwnd) = control(t, &m) {
                        flow.set_cwnd(cwnd);
                    }
                    measurements.push((t, m));
                    flow.send(t, links);
                }
                Outcome::Stats(s) => stats.push(s),
                Outcome::Internal => {}
            }
        }
        (measurements, stats)
    }

    #[test]
    fn unlimited_path_acks_a_window_per_rtt() {
        let mut flow = Flow::new(spec());
        let (ms, stats) = simulate(&mut flow, &mut [], 35 * MS, |_, _| None);
        // 10 packets per 10 ms RTT, ACKed one by one, all with an RTT of exactly 10 ms.
        assert_eq!(ms.len(), 30);
        assert!(ms.iter().all(|(_, m)| m.rtt_sample_us == 10_000 && m.bytes_acked == 1000));
        assert!(ms.iter().all(|(_, m)| m.bytes_in_flight == 9_000 && m.packets_in_flight == 9));
        assert!(ms.iter().all(|(_, m)| m.bytes_pending == u32::MAX));
        assert_eq!(stats.len(), 3);
        assert_eq!(stats[1].interval_bytes, 10_000);
        assert_eq!(stats[1].interval_ns, 10 * MS);
    }

    #[test]
    fn bottleneck_queues_and_rates_match_link() {
        // 8 Mbit/s = 1 ms per 1000-byte packet; a 20-packet window over a 10-packet BDP.
        let mut links = vec![Link::new(8_000, 100, None)];
        let mut flow = Flow::new(FlowSpec { link: Some(0), init_cwnd_bytes: 20_000, ..spec() });
        let (ms, stats) = simulate(&mut flow, &mut links, 200 * MS, |_, _| None);
        let (_, last) = ms.last().unwrap();
        // Standing queue of 10 packets = 10 ms extra delay; ACK clock at the link rate.
        assert_eq!(last.rtt_sample_us, 20_000);
        assert_eq!(last.rate_incoming, 1_000_000);
        assert_eq!(last.rate_outgoing, 1_000_000);
        let s = stats.last().unwrap();
        assert_eq!(s.queue_pkts, 10);
        assert_eq!(s.interval_bytes * 1_000_000_000 / s.interval_ns, 1_000_000);
    }

    #[test]
    fn overflow_drops_are_detected_after_three_later_acks_and_resent() {
        // 1 ms per packet, a 5-packet buffer and a 10-packet window sent at once: packets
        // 5..=9 are dropped. Packets 10, 11 and 12 (sent on the first ACKs) are acked at 22,
        // 23 and 24 ms; the third of them declares all five holes lost.
        let mut links = vec![Link::new(8_000, 5, None)];
        let mut flow = Flow::new(FlowSpec { link: Some(0), ..spec() });
        let (ms, _) = simulate(&mut flow, &mut links, 40 * MS, |_, _| None);
        let losses: Vec<_> = ms.iter().filter(|(_, m)| m.lost_pkts_sample > 0).collect();
        assert_eq!(losses.len(), 1);
        let (t, m) = losses[0];
        assert_eq!(*t, 24 * MS);
        assert_eq!((m.lost_pkts_sample, m.lost_overflow, m.lost_scripted), (5, 5, 0));
        assert_eq!(flow.totals().lost_pkts, 5);
        assert!(flow.totals().retx_pkts > 0);
    }

    #[test]
    fn tail_drops_are_recovered_by_the_retransmission_timer() {
        // The same drops, but nothing is sent after them: only the RTO can recover them.
        let mut links = vec![Link::new(8_000, 5, None)];
        let mut flow = Flow::new(FlowSpec { link: Some(0), bytes: Some(10_000), ..spec() });
        let (ms, _) = simulate(&mut flow, &mut links, 2_000 * MS, |_, _| None);
        assert!(ms.iter().all(|(_, m)| m.lost_pkts_sample == 0));
        let (t, m) = ms.iter().find(|(_, m)| m.timeout.is_some()).unwrap();
        assert_eq!(m.timeout, Some(TimeoutInfo { cause: TimeoutCause::Rto, requeued_pkts: 5 }));
        // Minimum RTO after the last ACK at 15 ms.
        assert_eq!(*t, 215 * MS);
        assert_eq!(flow.totals().delivered_bytes, 10_000);
        assert!(flow.done_ns().is_some());
    }

    #[test]
    fn scripted_loss_is_recovered_by_fast_retransmit() {
        let mut flow = Flow::new(FlowSpec { loss_at_ns: vec![25 * MS], ..spec() });
        let (ms, _) = simulate(&mut flow, &mut [], 100 * MS, |_, _| None);
        let losses: Vec<_> = ms.iter().filter(|(_, m)| m.lost_pkts_sample > 0).collect();
        assert_eq!(losses.len(), 1);
        let (t, m) = losses[0];
        assert_eq!((m.lost_pkts_sample, m.lost_scripted), (1, 1));
        // The dropped packet was sent at 30 ms (first send at/after 25 ms); the third packet
        // after it is acked at 40 ms.
        assert_eq!(*t, 40 * MS);
        assert_eq!(flow.totals().retx_pkts, 1);
        assert!(ms.iter().all(|(_, m)| m.timeout.is_none()));
    }

    #[test]
    fn ecn_threshold_marks_only_above_k() {
        let mut links = vec![Link::new(8_000, 100, Some(3))];
        let mut flow = Flow::new(FlowSpec { link: Some(0), ..spec() });
        let (ms, _) = simulate(&mut flow, &mut links, 9 * MS, |_, _| None);
        assert!(ms.is_empty());
        let (ms, _) = simulate(&mut flow, &mut links, 30 * MS, |_, _| None);
        // The first window of 10 arrives at once: packets 4..9 find more than 3 ahead.
        let first_window: u32 = ms.iter().take(10).map(|(_, m)| m.ecn_packets).sum();
        assert_eq!(first_window, 6);
        assert!(ms.iter().all(|(_, m)| m.ecn_bytes == m.ecn_packets * 1000));
    }

    #[test]
    fn mark_fraction_is_exact_and_evenly_spaced() {
        let mut flow = Flow::new(FlowSpec { mark_ppm: 250_000, ..spec() });
        let (ms, _) = simulate(&mut flow, &mut [], 100 * MS, |_, _| None);
        let marks: Vec<bool> = ms.iter().map(|(_, m)| m.ecn_packets == 1).collect();
        assert_eq!(marks.len(), 100);
        assert_eq!(marks.iter().filter(|&&m| m).count(), 25);
        assert!(marks.chunks(4).all(|c| c == [false, false, false, true]));
    }

    #[test]
    fn delayed_acks_cover_several_packets() {
        let mut flow = Flow::new(FlowSpec { ack_every: 3, bytes: Some(10_000), ..spec() });
        let (ms, _) = simulate(&mut flow, &mut [], 19 * MS, |_, _| None);
        // 10 packets: three ACKs of 3, and the tenth waits for the 40 ms timer.
        let sizes: Vec<u32> = ms.iter().map(|(_, m)| m.packets_acked).collect();
        assert_eq!(sizes, vec![3, 3, 3]);
        let (ms, _) = simulate(&mut flow, &mut [], 60 * MS, |_, _| None);
        assert_eq!(ms.len(), 1);
        assert_eq!((ms[0].1.packets_acked, ms[0].1.rtt_sample_us), (1, 50_000));
    }

    #[test]
    fn commanded_cwnd_limits_inflight_immediately() {
        let mut flow = Flow::new(spec());
        let (ms, _) = simulate(&mut flow, &mut [], 50 * MS, |_, _| Some(3_000));
        let after: Vec<_> = ms.iter().skip(12).collect();
        assert!(after.iter().all(|(_, m)| m.bytes_in_flight <= 3_000));
        // A window below one packet still lets one packet through.
        let mut flow = Flow::new(spec());
        let (ms, _) = simulate(&mut flow, &mut [], 100 * MS, |_, _| Some(10));
        assert!(ms.len() > 10);
        assert!(ms.iter().skip(10).all(|(_, m)| m.packets_in_flight == 0));
    }

    #[test]
    fn pacing_spaces_packets() {
        let mut flow = Flow::new(spec());
        flow.set_rate(100_000); // 1000-byte packets every 10 ms
        let (ms, _) = simulate(&mut flow, &mut [], 105 * MS, |_, _| None);
        assert_eq!(ms.len(), 10);
        assert!(ms.iter().all(|(_, m)| m.packets_in_flight == 0));
        assert_eq!(ms.last().unwrap().1.rate_outgoing, 100_000);
    }

    #[test]
    fn scripted_timeout_requeues_everything_in_flight() {
        let mut flow = Flow::new(FlowSpec { timeout_at_ns: vec![15 * MS], bytes: Some(50_000), ..spec() });
        let (ms, _) = simulate(&mut flow, &mut [], 1_000 * MS, |_, _| None);
        let (t, m) = ms.iter().find(|(_, m)| m.timeout.is_some()).unwrap();
        assert_eq!(*t, 15 * MS);
        assert_eq!(m.timeout, Some(TimeoutInfo { cause: TimeoutCause::Scripted, requeued_pkts: 10 }));
        assert_eq!(m.bytes_in_flight, 0);
        // The flow still completes, having resent the requeued window.
        assert_eq!(flow.totals().delivered_bytes, 50_000);
        assert_eq!(flow.totals().retx_pkts, 10);
        assert!(flow.done_ns().is_some());
        assert_eq!(flow.next_event_ns(), None);
    }

    #[test]
    fn finite_flow_reports_pending_bytes_and_finishes() {
        let mut flow = Flow::new(FlowSpec { bytes: Some(2_500), ..spec() });
        let (ms, _) = simulate(&mut flow, &mut [], 100 * MS, |_, _| None);
        let acked: Vec<u32> = ms.iter().map(|(_, m)| m.bytes_acked).collect();
        assert_eq!(acked, vec![1000, 1000, 500]);
        let pending: Vec<u32> = ms.iter().map(|(_, m)| m.bytes_pending).collect();
        assert_eq!(pending, vec![1500, 500, 0]);
        assert_eq!(flow.done_ns(), Some(10 * MS));
        assert_eq!(flow.next_event_ns(), None);
    }

    #[test]
    fn shared_link_serves_flows_in_fifo_order() {
        let mut links = vec![Link::new(8_000, 1000, None)];
        let mk = || Flow::new(FlowSpec { link: Some(0), bytes: Some(5_000), ..spec() });
        let (mut a, mut b) = (mk(), mk());
        assert_eq!(a.step(&mut links), Outcome::Started);
        a.send(0, &mut links);
        assert_eq!(b.step(&mut links), Outcome::Started);
        b.send(0, &mut links);
        assert_eq!(links[0].occupancy(0), 10);
        // b's packets wait behind a's: its first ACK comes 5 ms later than a's.
        let (ma, _) = simulate(&mut a, &mut links, 100 * MS, |_, _| None);
        let (mb, _) = simulate(&mut b, &mut links, 100 * MS, |_, _| None);
        assert_eq!(ma[0].1.rtt_sample_us, 11_000);
        assert_eq!(mb[0].1.rtt_sample_us, 16_000);
    }
}
