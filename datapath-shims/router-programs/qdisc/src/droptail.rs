//! Drop-tail: a FIFO that refuses arrivals when full. The baseline every experiment starts from
//! (mahimahi's default queue; 250 packets in the ABC cellular runs).
//!
//! RED marking ([`crate::red::Red`]) and the QCN congestion point ([`crate::qcn::Qcn`]) are the
//! same queue with a rule that looks at each arrival first ([`OnArrival`]): one FIFO discipline,
//! [`DropTailWith`], serves all three.

use std::fmt;

use crate::{Departure, DropReason, Dropped, Fifo, Limit, Nanos, Outputs, Packet, Qdisc};

/// What a drop-tail queue does with each arrival before the FIFO takes it (or drops it for want
/// of room).
pub trait OnArrival<P: Packet>: fmt::Debug {
    /// The discipline's name ([`Qdisc::name`]).
    const NAME: &'static str;

    /// `packet` arrives at `now` and finds `fifo` as it is: the rule may mark it and add
    /// notifications to `out`. `false` drops it (an AQM drop) instead of queueing it.
    fn admit(&mut self, now: Nanos, packet: &mut P, fifo: &Fifo<P>, out: &mut Outputs<P>) -> bool;
}

/// No rule: every arrival the buffer has room for is queued.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl<P: Packet> OnArrival<P> for Plain {
    const NAME: &'static str = "droptail";

    fn admit(&mut self, _now: Nanos, _packet: &mut P, _fifo: &Fifo<P>, _out: &mut Outputs<P>) -> bool {
        true
    }
}

/// A FIFO that refuses arrivals when full, with a rule applied to each arrival first.
#[derive(Debug)]
pub struct DropTailWith<P, A> {
    fifo: Fifo<P>,
    arrival: A,
}

/// Plain drop-tail.
pub type DropTail<P> = DropTailWith<P, Plain>;

impl<P: Packet, A> DropTailWith<P, A> {
    /// An empty queue of `limit` whose arrivals go through `arrival`.
    pub fn with_rule(limit: Limit, arrival: A) -> DropTailWith<P, A> {
        DropTailWith { fifo: Fifo::new(limit), arrival }
    }

    pub fn rule(&self) -> &A {
        &self.arrival
    }
}

impl<P: Packet> DropTail<P> {
    pub fn new(limit: Limit) -> DropTail<P> {
        DropTailWith::with_rule(limit, Plain)
    }
}

impl<P: Packet, A: OnArrival<P>> Qdisc<P> for DropTailWith<P, A> {
    fn enqueue(&mut self, now: Nanos, mut packet: P, out: &mut Outputs<P>) {
        if self.arrival.admit(now, &mut packet, &self.fifo, out) {
            self.fifo.push_or_drop(now, packet, out);
        } else {
            out.drops.push(Dropped { packet, reason: DropReason::Aqm, enqueued_at: None });
        }
    }

    fn dequeue(&mut self, _now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        self.fifo.pop()
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        A::NAME
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::Ecn;

    #[test]
    fn fifo_order_and_no_marks() {
        let mut q = DropTail::new(Limit::Packets(10));
        let mut out = Outputs::new();
        for i in 0..5u32 {
            q.enqueue(u64::from(i), TestPacket { len: 100 + i, ecn: Ecn::Ect0, src: i }, &mut out);
        }
        for i in 0..5u32 {
            let d = q.dequeue(100, &mut out).unwrap();
            assert_eq!(d.packet.src, i);
            assert_eq!(d.packet.ecn, Ecn::Ect0);
        }
        assert!(q.dequeue(100, &mut out).is_none());
        assert!(out.is_empty());
    }
}
