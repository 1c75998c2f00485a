//! DCTCP switch marking (specs/dc.md §2.1, §8 A1–A2): set CE on an arriving ECT packet when the
//! *instantaneous* queue it finds, not counting itself, is strictly greater than K. RED with
//! min_th = max_th = K and no averaging, so the mark never depends on history.

use crate::{Departure, DropReason, Dropped, Ecn, Fifo, Limit, Nanos, Outputs, Packet, ParamError, Qdisc};

/// The marking threshold K, in the unit the buffer is counted in (the thesis gives packets; with
/// byte buffers K_bytes = 1500·K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    Packets(usize),
    Bytes(u64),
}

/// What to do with a Not-ECT packet that arrives above K (A2: the thesis never mixes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonEctPolicy {
    /// Pass it unmarked; it is tail-dropped only at the buffer limit (the default).
    Pass,
    /// Drop it, as RED-ECN hardware does where it would have marked.
    Drop,
}

/// The marking rule on its own, for callers that keep their own queue (the simulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepMarker {
    pub k: Threshold,
    pub non_ect: NonEctPolicy,
}

/// The decision for one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepDecision {
    Pass,
    Marked,
    Drop,
}

impl StepMarker {
    /// Decides for a packet arriving to a queue of `pkts` packets and `bytes` bytes (excluding
    /// the arrival), marking it in place when its ECN field allows.
    pub fn on_arrival<P: Packet>(&self, packet: &mut P, pkts: usize, bytes: u64) -> StepDecision {
        let above = match self.k {
            Threshold::Packets(k) => pkts > k,
            Threshold::Bytes(k) => bytes > k,
        };
        if !above {
            return StepDecision::Pass;
        }
        if packet.ecn().is_ect() {
            packet.set_ecn(Ecn::Ce);
            StepDecision::Marked
        } else {
            match self.non_ect {
                NonEctPolicy::Pass => StepDecision::Pass,
                NonEctPolicy::Drop => StepDecision::Drop,
            }
        }
    }
}

/// A drop-tail FIFO with DCTCP step marking at enqueue.
#[derive(Debug)]
pub struct Dctcp<P> {
    fifo: Fifo<P>,
    marker: StepMarker,
}

impl<P: Packet> Dctcp<P> {
    pub fn new(limit: Limit, marker: StepMarker) -> Result<Dctcp<P>, ParamError> {
        let fits = match (marker.k, limit) {
            (Threshold::Packets(k), Limit::Packets(max)) => k < max,
            (Threshold::Bytes(k), Limit::Bytes(max)) => k < max,
            _ => true,
        };
        if !fits {
            return Err(ParamError::new("k", "the marking threshold must be below the buffer limit, or it can never mark"));
        }
        Ok(Dctcp { fifo: Fifo::new(limit), marker })
    }
}

impl<P: Packet> Qdisc<P> for Dctcp<P> {
    fn enqueue(&mut self, now: Nanos, mut packet: P, out: &mut Outputs<P>) {
        match self.marker.on_arrival(&mut packet, self.fifo.len_packets(), self.fifo.len_bytes()) {
            StepDecision::Drop => out.drops.push(Dropped { packet, reason: DropReason::Aqm, enqueued_at: None }),
            StepDecision::Pass | StepDecision::Marked => self.fifo.push_or_drop(now, packet, out),
        }
    }

    fn dequeue(&mut self, _now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        self.fifo.pop()
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        "dctcp"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::MTU_BYTES;

    fn queue_holding(n: usize, k: usize) -> (Dctcp<TestPacket>, Outputs<TestPacket>) {
        let mut q =
            Dctcp::new(Limit::Packets(1000), StepMarker { k: Threshold::Packets(k), non_ect: NonEctPolicy::Pass }).unwrap();
        let mut out = Outputs::new();
        for _ in 0..n {
            q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::NotEct), &mut out);
        }
        (q, out)
    }

    fn last_ecn(q: &mut Dctcp<TestPacket>) -> Ecn {
        let mut out = Outputs::new();
        let mut last = None;
        while let Some(d) = q.dequeue(0, &mut out) {
            last = Some(d.packet.ecn);
        }
        last.unwrap()
    }

    // T-D1: K = 20; enqueue into a queue holding 20 → not marked; holding 21 → marked.
    #[test]
    fn t_d1_marks_strictly_above_k_on_arrival() {
        let (mut q, mut out) = queue_holding(20, 20);
        q.enqueue(1, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
        assert_eq!(last_ecn(&mut q), Ecn::Ect0);
        let (mut q, mut out) = queue_holding(21, 20);
        q.enqueue(1, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
        assert_eq!(last_ecn(&mut q), Ecn::Ce);
    }

    #[test]
    fn t_d1_no_history() {
        // Same occupancy, different histories (a queue that was long before): same decision.
        let (mut q, mut out) = queue_holding(100, 20);
        for _ in 0..80 {
            q.dequeue(0, &mut out);
        }
        q.enqueue(1, TestPacket::new(MTU_BYTES, Ecn::Ect1), &mut out);
        assert_eq!(last_ecn(&mut q), Ecn::Ect1, "20 packets ahead: not above K");
    }

    #[test]
    fn byte_threshold_and_non_ect_policy() {
        let marker = StepMarker { k: Threshold::Bytes(30_000), non_ect: NonEctPolicy::Drop };
        let mut q: Dctcp<TestPacket> = Dctcp::new(Limit::Bytes(100_000), marker).unwrap();
        let mut out = Outputs::new();
        for _ in 0..20 {
            q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
        }
        assert!(out.drops.is_empty());
        // 30,000 B queued: not above K.
        let mut p = TestPacket::new(MTU_BYTES, Ecn::Ect0);
        assert_eq!(marker.on_arrival(&mut p, 20, 30_000), StepDecision::Pass);
        q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
        q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::NotEct), &mut out);
        assert_eq!(out.drops.len(), 1);
        assert_eq!(out.drops[0].reason, DropReason::Aqm);
    }

    #[test]
    fn threshold_above_the_buffer_is_refused() {
        let r: Result<Dctcp<TestPacket>, _> =
            Dctcp::new(Limit::Packets(20), StepMarker { k: Threshold::Packets(20), non_ect: NonEctPolicy::Pass });
        assert_eq!(r.unwrap_err().param, "k");
    }
}
