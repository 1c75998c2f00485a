//! Ports, egress queues and the shared switch buffer.
//!
//! A port is one end of a link: it serializes packets onto the link at its rate, and the link
//! delivers them to the peer port after the propagation delay. Switch ports hold one or more
//! egress queues, each a queue discipline from `ccp-qdisc` (the router's code: drop-tail, DCTCP
//! marking, phantom queue, QCN congestion point, CoDel), served round-robin or in strict
//! priority. Admission is a property of the switch, not of one queue: the switch decides from its
//! shared buffer (dynamic or static thresholds) before a packet reaches the discipline, so the
//! disciplines are built unlimited unless the scenario gives each queue a fixed carve-out
//! (`switch.queue_buffer_bytes`), which the discipline then enforces as its own limit. The
//! discipline may still drop (AQM) or mark.

use ccp_qdisc::codel::{Codel, CodelParams};
use ccp_qdisc::dctcp::{Dctcp, NonEctPolicy, StepMarker, Threshold};
use ccp_qdisc::droptail::DropTail;
use ccp_qdisc::fair_queue::FairQueue;
use ccp_qdisc::phantom::{Phantom, PhantomParams};
use ccp_qdisc::qcn::{Qcn, QcnParams, Quantization, Sampling};
use ccp_qdisc::red::{Red, RedAtDeparture, RedParams};
use ccp_qdisc::{Departure, Limit, Outputs, Qdisc};

use crate::config::{Admission, QdiscConfig, Scheduler, SwitchConfig};
use crate::hook::SwitchHook;
use crate::packet::Queued;
use crate::rng::Rng;
use crate::time::{from_us, to_ns, Time, BITS_PER_BYTE, PS_PER_NS};
use crate::topology::{NodeId, PortId};

/// One egress queue of a port.
pub struct EgressQueue {
    pub qdisc: Box<dyn Qdisc<Queued>>,
}

/// One bit per egress queue of a port.
#[derive(Debug, Clone, Default)]
pub struct QueueSet {
    words: Vec<u64>,
}

impl QueueSet {
    fn with_len(queues: usize) -> QueueSet {
        QueueSet { words: vec![0; queues.div_ceil(64)] }
    }

    #[inline]
    pub fn contains(&self, q: usize) -> bool {
        self.words.get(q / 64).is_some_and(|w| w & (1 << (q % 64)) != 0)
    }

    #[inline]
    fn set(&mut self, q: usize, on: bool) {
        let w = &mut self.words[q / 64];
        if on {
            *w |= 1 << (q % 64);
        } else {
            *w &= !(1 << (q % 64));
        }
    }

    /// Bits `64 × i` to `64 × i + 63` (0 past the port's queues).
    #[inline]
    pub fn word(&self, i: usize) -> u64 {
        self.words.get(i).copied().unwrap_or(0)
    }

    /// The first queue at or after `from`, in cyclic order over the port's queues, that is in
    /// `self` but not in `except` (bits are only ever set for queues the port has).
    fn next_cyclic(&self, except: &QueueSet, from: usize) -> Option<usize> {
        let word = |w: usize| self.words[w] & !except.words[w];
        let (w0, b0) = (from / 64, from % 64);
        let first = word(w0) & (u64::MAX << b0);
        if first != 0 {
            return Some(w0 * 64 + first.trailing_zeros() as usize);
        }
        let words = self.words.len();
        for k in 1..=words {
            let w = (w0 + k) % words;
            let bits = if w == w0 { word(w) & !(u64::MAX << b0) } else { word(w) };
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
        }
        None
    }
}

/// Counters of one port.
#[derive(Debug, Clone, Default)]
pub struct PortStats {
    pub tx_bytes: u64,
    pub tx_packets: u64,
    /// Packets refused or dropped at this egress.
    pub drops: u64,
    /// Packets that left this port CE-marked by its discipline.
    pub marks: u64,
    /// Total time this port was paused by PFC, ps.
    pub pfc_paused_time: Time,
    /// PAUSE frames this port's node sent upstream from this ingress.
    pub pfc_pauses_sent: u64,
    /// Per-packet queueing delays at this egress (enqueue to start of transmission), ns, from
    /// the end of the warm-up on: monitored switch ports only (`None` elsewhere).
    pub delays_ns: Option<Vec<u32>>,
}

/// One end of a link.
pub struct Port {
    pub name: String,
    pub node: NodeId,
    /// The port at the other end: where packets sent here arrive.
    pub peer: PortId,
    pub rate_bps: u64,
    /// Propagation delay of the link.
    pub delay: Time,
    /// Serializing a packet right now.
    pub busy: bool,
    /// Egress queues (switch ports only; host NICs pull from their flows instead). Enqueue and
    /// pause through [`Port::enqueue`] and [`Port::set_queue_paused`], which keep the two sets
    /// below, so serving a port never scans its queues.
    queues: Vec<EgressQueue>,
    /// Queues holding packets.
    backlogged: QueueSet,
    /// Queues paused by the downstream device (a BFC-style per-queue pause).
    paused: QueueSet,
    /// How the next queue to serve is chosen.
    scheduler: Scheduler,
    /// Round-robin position among the queues.
    rr_next: usize,
    /// Bytes in this port's egress queues.
    pub queued_bytes: u64,
    /// PFC: this port may not start a transmission (the downstream sent PAUSE).
    pub pfc_paused: bool,
    pub pfc_paused_since: Time,
    /// PFC, as an ingress: bytes in this switch that arrived through this port.
    pub ingress_bytes: u64,
    /// PFC, as an ingress: a PAUSE is in force upstream.
    pub pause_sent: bool,
    pub stats: PortStats,
    /// Random loss on this port's link (`switch.loss_pct`), where it has any.
    pub loss: Option<LinkLoss>,
}

/// Random loss on a link: each data packet sent on it is lost with `probability`, drawn from the
/// port's own stream.
#[derive(Debug, Clone)]
pub struct LinkLoss {
    pub probability: f64,
    rng: Rng,
}

impl LinkLoss {
    pub fn new(probability: f64, rng: Rng) -> LinkLoss {
        LinkLoss { probability, rng }
    }

    /// Draws whether the next data packet is lost.
    pub fn lose(&mut self) -> bool {
        self.rng.uniform() < self.probability
    }
}

impl Port {
    pub fn new(name: String, node: NodeId, peer: PortId, rate_bps: u64, delay: Time) -> Port {
        Port {
            name,
            node,
            peer,
            rate_bps,
            delay,
            busy: false,
            queues: Vec::new(),
            backlogged: QueueSet::default(),
            paused: QueueSet::default(),
            scheduler: Scheduler::RoundRobin,
            rr_next: 0,
            queued_bytes: 0,
            pfc_paused: false,
            pfc_paused_since: 0,
            ingress_bytes: 0,
            pause_sent: false,
            stats: PortStats::default(),
            loss: None,
        }
    }

    /// Packets in the egress queues.
    pub fn queued_packets(&self) -> usize {
        self.queues.iter().map(|q| q.qdisc.len_packets()).sum()
    }

    /// The egress queues (empty on host NICs).
    pub fn queues(&self) -> &[EgressQueue] {
        &self.queues
    }

    /// Gives the port its egress queues and how it serves them.
    pub fn set_queues(&mut self, queues: Vec<EgressQueue>, scheduler: Scheduler) {
        self.backlogged = QueueSet::with_len(queues.len());
        self.paused = QueueSet::with_len(queues.len());
        self.queues = queues;
        self.scheduler = scheduler;
        self.rr_next = 0;
    }

    /// Bytes in egress queue `q`.
    pub fn queue_bytes(&self, q: usize) -> u64 {
        self.queues[q].qdisc.len_bytes()
    }

    /// Hands a packet to queue `q`'s discipline (which may drop or notify into `out`).
    pub fn enqueue(&mut self, q: usize, now: Time, packet: Queued, out: &mut Outputs<Queued>) {
        let queue = &mut self.queues[q].qdisc;
        queue.enqueue(to_ns(now), packet, out);
        self.backlogged.set(q, queue.len_packets() > 0);
    }

    /// Whether the downstream device has queue `q` paused.
    pub fn queue_paused(&self, q: usize) -> bool {
        self.paused.contains(q)
    }

    /// Queues the downstream device has paused.
    pub fn paused_queues(&self) -> &QueueSet {
        &self.paused
    }

    /// Pauses or resumes queue `q` (ignored past the port's queues, like a frame for a queue the
    /// device does not have).
    pub fn set_queue_paused(&mut self, q: usize, paused: bool) {
        if q < self.queues.len() {
            self.paused.set(q, paused);
        }
    }

    /// The next packet, with its queue index: by round-robin over non-empty, non-paused queues
    /// (one packet per turn: deficit round-robin with equal-sized packets, BFC's artifact), or
    /// from the highest non-empty, non-paused queue under strict priority.
    pub fn dequeue(&mut self, now: Time, out: &mut Outputs<Queued>) -> Option<(u16, Departure<Queued>)> {
        let n = self.queues.len();
        if n == 0 {
            return None;
        }
        if self.scheduler == Scheduler::StrictPriority {
            return self.dequeue_by_priority(now, out);
        }
        // A discipline may hold packets and still send nothing now; the scan then goes on past
        // it, in the same cyclic order, for at most one round.
        let mut from = self.rr_next;
        let mut scanned = 0;
        loop {
            let i = self.backlogged.next_cyclic(&self.paused, from)?;
            let skipped = (i + n - from) % n;
            if scanned + skipped >= n {
                return None;
            }
            scanned += skipped + 1;
            let queue = &mut self.queues[i].qdisc;
            let d = queue.dequeue(to_ns(now), out);
            self.backlogged.set(i, queue.len_packets() > 0);
            if let Some(d) = d {
                self.rr_next = (i + 1) % n;
                return Some((i as u16, d));
            }
            from = (i + 1) % n;
        }
    }

    /// Strict priority: queues from the highest down, the first that sends something. A
    /// discipline may hold packets and still send nothing now; the next lower queue then goes.
    fn dequeue_by_priority(&mut self, now: Time, out: &mut Outputs<Queued>) -> Option<(u16, Departure<Queued>)> {
        for i in (0..self.queues.len()).rev() {
            if !self.backlogged.contains(i) || self.paused.contains(i) {
                continue;
            }
            let queue = &mut self.queues[i].qdisc;
            let d = queue.dequeue(to_ns(now), out);
            self.backlogged.set(i, queue.len_packets() > 0);
            if let Some(d) = d {
                return Some((i as u16, d));
            }
        }
        None
    }

    /// Starts or ends a PFC pause, accounting paused time.
    pub fn set_pfc_paused(&mut self, now: Time, paused: bool) {
        if paused && !self.pfc_paused {
            self.pfc_paused_since = now;
        } else if !paused && self.pfc_paused {
            self.stats.pfc_paused_time += now - self.pfc_paused_since;
        }
        self.pfc_paused = paused;
    }
}

/// State of one switch.
pub struct SwitchState {
    pub node: NodeId,
    /// Bytes in the shared buffer.
    pub buffer_used: u64,
    pub peak_buffer: u64,
    pub hook: Box<dyn SwitchHook>,
}

/// Buffer admission and PFC thresholds, resolved from the scenario.
#[derive(Debug, Clone, Copy)]
pub struct BufferPolicy {
    pub buffer_bytes: u64,
    pub admission: Admission,
    pub dt_alpha: f64,
    pub port_limit: u64,
    /// The PAUSE thresholds per ingress, when PFC is on.
    pub pfc: Option<PfcThresholds>,
}

/// When an ingress pauses its upstream and when it resumes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PfcThresholds {
    /// Fixed XOFF and XON, bytes.
    Static { xoff: u64, xon: u64 },
    /// XOFF = `fraction` × the shared buffer still free; XON = XOFF − `resume_offset`.
    Dynamic { fraction: f64, resume_offset: u64 },
}

impl PfcThresholds {
    /// (XOFF, XON) bytes for a switch of `buffer_bytes` holding `used`.
    pub fn at(&self, buffer_bytes: u64, used: u64) -> (u64, u64) {
        match *self {
            PfcThresholds::Static { xoff, xon } => (xoff, xon),
            PfcThresholds::Dynamic { fraction, resume_offset } => {
                let xoff = (fraction * buffer_bytes.saturating_sub(used) as f64) as u64;
                (xoff, xoff.saturating_sub(resume_offset))
            }
        }
    }
}

impl BufferPolicy {
    pub fn from_config(cfg: &SwitchConfig) -> BufferPolicy {
        BufferPolicy {
            buffer_bytes: cfg.buffer_bytes,
            admission: cfg.admission,
            dt_alpha: cfg.dt_alpha,
            port_limit: cfg.port_buffer_bytes.unwrap_or(cfg.buffer_bytes),
            pfc: cfg.pfc.enabled.then_some(match cfg.pfc.free_fraction {
                Some(fraction) => PfcThresholds::Dynamic { fraction, resume_offset: cfg.pfc.resume_offset_bytes },
                None => PfcThresholds::Static { xoff: cfg.pfc.xoff_bytes, xon: cfg.pfc.xon_bytes },
            }),
        }
    }

    /// Whether a packet of `len` bytes may join a port holding `port_bytes` in a switch whose
    /// shared buffer holds `used`. With PFC the fabric is lossless by design: only a full buffer
    /// drops (the PAUSE thresholds keep it from filling). Without it, the dynamic threshold lets
    /// a port hold at most α × the free buffer (Choudhury–Hahne), or a static per-port limit.
    pub fn admits(&self, used: u64, port_bytes: u64, len: u32) -> bool {
        let len = u64::from(len);
        if used + len > self.buffer_bytes {
            return false;
        }
        if self.pfc.is_some() {
            return true;
        }
        match self.admission {
            Admission::Dynamic => (port_bytes + len) as f64 <= self.dt_alpha * (self.buffer_bytes - used) as f64,
            Admission::Static => port_bytes + len <= self.port_limit,
        }
    }
}

/// Builds the discipline for one egress queue of a port of `rate_bps`, holding at most `limit`.
/// `mss_wire` converts thresholds given in packets; `seed` seeds a QCN congestion point's
/// sampling or RED's marks.
pub fn make_qdisc(cfg: &QdiscConfig, limit: Limit, rate_bps: u64, mss_wire: u32, seed: u64) -> Box<dyn Qdisc<Queued>> {
    let bytes_per_sec = rate_bps as f64 / BITS_PER_BYTE as f64;
    let mut q: Box<dyn Qdisc<Queued>> = match cfg {
        QdiscConfig::Droptail {} => Box::new(DropTail::new(limit)),
        QdiscConfig::Fq {} => Box::new(FairQueue::new(limit)),
        QdiscConfig::Dctcp { k_pkts, k_bytes, drop_non_ect } => {
            let k = match (k_pkts, k_bytes) {
                (Some(p), _) => Threshold::Packets(*p as usize),
                (None, Some(b)) => Threshold::Bytes(*b),
                (None, None) => Threshold::Packets(0),
            };
            let non_ect = if *drop_non_ect { NonEctPolicy::Drop } else { NonEctPolicy::Pass };
            Box::new(Dctcp::new(limit, StepMarker { k, non_ect }).expect("validated scenario"))
        }
        QdiscConfig::Phantom { drain_fraction, mark_threshold_bytes } => Box::new(
            Phantom::new(
                limit,
                PhantomParams {
                    drain_bytes_per_sec: drain_fraction * bytes_per_sec,
                    mark_threshold_bytes: *mark_threshold_bytes,
                    cap_bytes: None,
                },
            )
            .expect("validated scenario"),
        ),
        QdiscConfig::Qcn { q_eq_bytes, w, sampling_probability, sampling_bytes, quantization, ecn_k_bytes } => {
            let params = QcnParams {
                q_eq_bytes: *q_eq_bytes,
                w: *w,
                sampling: match sampling_bytes {
                    Some(bytes) => Sampling::Bytes(*bytes),
                    None => Sampling::Probability(*sampling_probability),
                },
                quantization: if quantization == "standard" { Quantization::Standard } else { Quantization::Packets },
                seed,
            };
            let ecn = ecn_k_bytes.map(|k| StepMarker { k: Threshold::Bytes(k), non_ect: NonEctPolicy::Pass });
            Box::new(Qcn::new(limit, params, ecn).expect("validated scenario"))
        }
        QdiscConfig::Red { k_min_bytes, k_max_bytes, p_max, at_departure } => {
            let params = RedParams { k_min_bytes: *k_min_bytes, k_max_bytes: *k_max_bytes, p_max: *p_max, seed };
            if *at_departure {
                Box::new(RedAtDeparture::new(limit, params).expect("validated scenario"))
            } else {
                Box::new(Red::new(limit, params).expect("validated scenario"))
            }
        }
        QdiscConfig::Codel { target_us, interval_us, ecn } => {
            let params = CodelParams {
                target: from_us(*target_us) / PS_PER_NS,
                interval: from_us(*interval_us) / PS_PER_NS,
                max_packet_bytes: u64::from(mss_wire),
                ecn: *ecn,
            };
            Box::new(Codel::new(limit, params).expect("validated scenario"))
        }
    };
    q.on_link_rate(0, bytes_per_sec);
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_qdisc::Ecn;

    fn pkt(id: u32, ecn: Ecn) -> Queued {
        Queued { id, wire_bytes: 1500, flow: id, ecn, meta: 0 }
    }

    #[test]
    fn dynamic_threshold_shrinks_as_the_buffer_fills() {
        let p = BufferPolicy { buffer_bytes: 100_000, admission: Admission::Dynamic, dt_alpha: 1.0, port_limit: 0, pfc: None };
        // Empty switch: one port may take half the buffer (q ≤ α(B − q) at α = 1).
        assert!(p.admits(0, 0, 1500));
        assert!(p.admits(48_000, 48_000, 1500));
        assert!(!p.admits(50_000, 50_000, 1500));
        // Another port's backlog shrinks this port's share.
        assert!(p.admits(80_000, 10_000, 1500));
        assert!(!p.admits(90_000, 10_000, 1500));
        let s = BufferPolicy { admission: Admission::Static, port_limit: 3000, ..p };
        assert!(s.admits(0, 1500, 1500) && !s.admits(0, 1501, 1500));
        let pfc = BufferPolicy { pfc: Some(PfcThresholds::Static { xoff: 10, xon: 5 }), ..p };
        assert!(pfc.admits(90_000, 90_000, 1500) && !pfc.admits(99_000, 0, 1500));
    }

    #[test]
    fn dynamic_pfc_pauses_at_a_fraction_of_the_free_buffer() {
        let d = PfcThresholds::Dynamic { fraction: 0.11, resume_offset: 3_000 };
        assert_eq!(d.at(12_000_000, 0), (1_320_000, 1_317_000), "11 % of an empty 12 MB buffer");
        assert_eq!(d.at(12_000_000, 10_000_000), (220_000, 217_000), "the threshold falls as the buffer fills");
        assert_eq!(d.at(12_000_000, 12_000_000), (0, 0), "a full buffer pauses every ingress holding anything");
        assert_eq!(PfcThresholds::Static { xoff: 10, xon: 5 }.at(100, 90), (10, 5));
    }

    #[test]
    fn shared_disciplines_mark_through_the_sim_packet() {
        let cfg = QdiscConfig::Dctcp { k_pkts: Some(2), k_bytes: None, drop_non_ect: false };
        let mut q = make_qdisc(&cfg, Limit::Unlimited, 10_000_000_000, 1500, 1);
        let mut out = Outputs::new();
        for i in 0..5 {
            q.enqueue(0, pkt(i, Ecn::Ect0), &mut out);
        }
        let marks: Vec<bool> = (0..5).map(|_| q.dequeue(0, &mut out).unwrap().packet.ecn == Ecn::Ce).collect();
        assert_eq!(marks, [false, false, false, true, true], "marked when more than K = 2 are queued ahead");
        assert!(out.is_empty());
    }

    fn port_with(queues: usize) -> Port {
        port_serving(queues, Scheduler::RoundRobin)
    }

    fn port_serving(queues: usize, scheduler: Scheduler) -> Port {
        let mut port = Port::new("p".into(), 0, 1, 1_000_000_000, 0);
        port.set_queues(
            (0..queues)
                .map(|_| EgressQueue { qdisc: make_qdisc(&QdiscConfig::Droptail {}, Limit::Unlimited, 1_000_000_000, 1500, 1) })
                .collect(),
            scheduler,
        );
        port
    }

    #[test]
    fn strict_priority_serves_the_highest_nonempty_unpaused_queue_first() {
        let mut port = port_serving(3, Scheduler::StrictPriority);
        let mut out = Outputs::new();
        // Two packets each into queues 0 and 1, then one into queue 2, all at once.
        for (id, q) in [(0, 0), (1, 1), (2, 0), (3, 1), (4, 2)] {
            port.enqueue(q, 0, pkt(id, Ecn::NotEct), &mut out);
        }
        let next = |port: &mut Port, out: &mut Outputs<Queued>| port.dequeue(0, out).map(|(q, d)| (q, d.packet.id));
        let mut order = vec![next(&mut port, &mut out)];
        // A packet arriving for queue 1 while queue 0 waits still goes before queue 0's.
        port.enqueue(1, 0, pkt(5, Ecn::NotEct), &mut out);
        // A paused queue is passed over until it resumes.
        port.set_queue_paused(1, true);
        order.push(next(&mut port, &mut out));
        port.set_queue_paused(1, false);
        while let Some(d) = next(&mut port, &mut out) {
            order.push(Some(d));
        }
        let order: Vec<(u16, u32)> = order.into_iter().flatten().collect();
        assert_eq!(order, [(2, 4), (0, 0), (1, 1), (1, 3), (1, 5), (0, 2)]);
    }

    #[test]
    fn a_queue_limit_drops_beyond_its_bytes_in_that_queue_only() {
        let cfg = QdiscConfig::Droptail {};
        let mut port = Port::new("p".into(), 0, 1, 1_000_000_000, 0);
        port.set_queues(
            (0..2).map(|_| EgressQueue { qdisc: make_qdisc(&cfg, Limit::Bytes(3_000), 1_000_000_000, 1500, 1) }).collect(),
            Scheduler::StrictPriority,
        );
        let mut out = Outputs::new();
        for id in 0..3 {
            port.enqueue(0, 0, pkt(id, Ecn::NotEct), &mut out);
        }
        let dropped: Vec<u32> = out.drops.drain(..).map(|d| d.packet.id).collect();
        assert_eq!(dropped, [2], "two 1,500 B packets fill 3,000 B");
        port.enqueue(1, 0, pkt(3, Ecn::NotEct), &mut out);
        assert!(out.drops.is_empty(), "the other queue has its own 3,000 B");
        assert_eq!((port.queue_bytes(0), port.queue_bytes(1)), (3_000, 1_500));
    }

    #[test]
    fn round_robin_skips_paused_queues() {
        let mut port = port_with(2);
        let mut out = Outputs::new();
        for i in 0..4 {
            port.enqueue((i % 2) as usize, 0, pkt(i, Ecn::NotEct), &mut out);
        }
        let order: Vec<u32> = (0..2).map(|_| port.dequeue(0, &mut out).unwrap().1.packet.id).collect();
        assert_eq!(order, [0, 1]);
        port.set_queue_paused(0, true);
        assert_eq!(port.dequeue(0, &mut out).unwrap().1.packet.id, 3);
        assert!(port.dequeue(0, &mut out).is_none(), "queue 0 is paused");
        port.set_queue_paused(0, false);
        assert_eq!(port.dequeue(0, &mut out).unwrap().1.packet.id, 2);
    }

    proptest::proptest! {
        /// Serving from the backlog and pause sets picks exactly what a scan of every queue from
        /// the round-robin position would, over more queues than one 64-bit word holds.
        #[test]
        fn the_sets_serve_as_a_full_scan_would(
            queues in 1usize..140,
            ops in proptest::collection::vec((0u8..3, 0usize..140), 1..300),
        ) {
            let mut port = port_with(queues);
            let mut reference: Vec<(std::collections::VecDeque<u32>, bool)> = vec![Default::default(); queues];
            let mut rr = 0;
            let mut out = Outputs::new();
            for (n, (op, q)) in ops.into_iter().enumerate() {
                let q = q % queues;
                match op {
                    0 => {
                        port.enqueue(q, 0, pkt(n as u32, Ecn::NotEct), &mut out);
                        reference[q].0.push_back(n as u32);
                    }
                    1 => {
                        let paused = !reference[q].1;
                        port.set_queue_paused(q, paused);
                        reference[q].1 = paused;
                    }
                    _ => {
                        let want = (0..queues).map(|k| (rr + k) % queues).find(|&i| !reference[i].1 && !reference[i].0.is_empty());
                        let want = want.map(|i| {
                            rr = (i + 1) % queues;
                            (i as u16, reference[i].0.pop_front().unwrap())
                        });
                        let got = port.dequeue(0, &mut out).map(|(i, d)| (i, d.packet.id));
                        proptest::prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }
}
