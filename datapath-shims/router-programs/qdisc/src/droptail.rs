//! Drop-tail: a FIFO that refuses arrivals when full. The baseline every experiment starts from
//! (mahimahi's default queue; 250 packets in the ABC cellular runs).

use crate::{Departure, Fifo, Limit, Nanos, Outputs, Packet, Qdisc};

#[derive(Debug)]
pub struct DropTail<P> {
    fifo: Fifo<P>,
}

impl<P: Packet> DropTail<P> {
    pub fn new(limit: Limit) -> DropTail<P> {
        DropTail { fifo: Fifo::new(limit) }
    }
}

impl<P: Packet> Qdisc<P> for DropTail<P> {
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        self.fifo.push_or_drop(now, packet, out);
    }

    fn dequeue(&mut self, _now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        self.fifo.pop()
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        "droptail"
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
