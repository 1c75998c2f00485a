//! The FIFO buffer every discipline here is built on: packets with their enqueue times, byte and
//! packet counts, and a buffer limit.

use std::collections::VecDeque;

use crate::{Departure, DropReason, Dropped, Nanos, Outputs, Packet};

/// A buffer limit. The ABC and mahimahi experiments count packets (250); datacenter switches
/// count bytes. `Unlimited` is for callers that do admission themselves (a shared-buffer switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Packets(usize),
    Bytes(u64),
    Unlimited,
}

impl Limit {
    /// Whether a packet of `len` bytes fits in a buffer holding `pkts` packets and `bytes` bytes.
    pub fn admits(self, pkts: usize, bytes: u64, len: u32) -> bool {
        match self {
            Limit::Packets(max) => pkts < max,
            Limit::Bytes(max) => bytes + u64::from(len) <= max,
            Limit::Unlimited => true,
        }
    }
}

/// A FIFO of packets with their enqueue times.
#[derive(Debug)]
pub struct Fifo<P> {
    items: VecDeque<(P, Nanos)>,
    bytes: u64,
    limit: Limit,
}

impl<P: Packet> Fifo<P> {
    pub fn new(limit: Limit) -> Fifo<P> {
        Fifo { items: VecDeque::new(), bytes: 0, limit }
    }

    /// Appends `packet` if the limit admits it; otherwise reports it as dropped.
    pub fn push_or_drop(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        if self.limit.admits(self.items.len(), self.bytes, packet.len_bytes()) {
            self.bytes += u64::from(packet.len_bytes());
            self.items.push_back((packet, now));
        } else {
            out.drops.push(Dropped { packet, reason: DropReason::BufferFull, enqueued_at: None });
        }
    }

    pub fn pop(&mut self) -> Option<Departure<P>> {
        let (packet, enqueued_at) = self.items.pop_front()?;
        self.bytes -= u64::from(packet.len_bytes());
        Some(Departure { packet, enqueued_at })
    }

    pub fn len_packets(&self) -> usize {
        self.items.len()
    }

    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    /// Length of the packet at the head, if any.
    pub fn head_len_bytes(&self) -> Option<u32> {
        self.items.front().map(|(p, _)| p.len_bytes())
    }

    pub fn head_enqueued_at(&self) -> Option<Nanos> {
        self.items.front().map(|(_, t)| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::Ecn;

    #[test]
    fn packet_limit_drops_the_excess() {
        let mut f = Fifo::new(Limit::Packets(2));
        let mut out = Outputs::new();
        for t in 0..3 {
            f.push_or_drop(t, TestPacket::new(1500, Ecn::NotEct), &mut out);
        }
        assert_eq!(f.len_packets(), 2);
        assert_eq!(f.len_bytes(), 3000);
        assert_eq!(out.drops.len(), 1);
        assert_eq!(out.drops[0].reason, DropReason::BufferFull);
        let d = f.pop().unwrap();
        assert_eq!(d.enqueued_at, 0);
        assert_eq!(f.head_enqueued_at(), Some(1));
    }

    #[test]
    fn byte_limit_counts_the_arriving_packet() {
        let mut f = Fifo::new(Limit::Bytes(3000));
        let mut out = Outputs::new();
        f.push_or_drop(0, TestPacket::new(1500, Ecn::NotEct), &mut out);
        f.push_or_drop(0, TestPacket::new(1500, Ecn::NotEct), &mut out);
        f.push_or_drop(0, TestPacket::new(1, Ecn::NotEct), &mut out);
        assert_eq!(f.len_bytes(), 3000);
        assert_eq!(out.drops.len(), 1);
    }
}
