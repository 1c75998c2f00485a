//! Per-flow fair queueing: one FIFO per flow, served by deficit round robin (Shreedhar and
//! Varghese, SIGCOMM 1995), as many queues as there are flows. With an unlimited buffer it is the
//! switch half of the BFC thesis's **Ideal-FQ** oracle (Goyal's thesis §3.6.1, specs/bfc.md
//! §15): "per-flow fair queueing with infinite buffers and unlimited queues", which the hosts
//! pair with an in-flight cap of one BDP per flow. No real switch has a queue per flow; this is
//! the reference a scheme with a bounded number of queues (BFC's 32) is measured against.
//!
//! Flows are told apart by [`Packet::flow_key`]. A flow's queue exists while it holds packets:
//! an emptied queue is released and its slot reused, so memory follows the flows that are
//! backlogged, not every flow ever seen. Each backlogged queue gets [`QUANTUM_BYTES`] of credit
//! per round (one MTU, so every flow sends about one packet per round) and keeps none while idle,
//! as DRR prescribes. `limit` bounds the total over all queues (`Limit::Unlimited` for the
//! oracle); an arrival that does not fit is dropped.

use std::collections::{HashMap, VecDeque};

use crate::{Departure, DropReason, Dropped, Fifo, Limit, Nanos, Outputs, Packet, Qdisc, MTU_BYTES};

/// DRR credit per round, bytes: one MTU.
pub const QUANTUM_BYTES: u32 = MTU_BYTES;

#[derive(Debug)]
pub struct FairQueue<P> {
    limit: Limit,
    /// Queue slots; an empty slot is free for the next new flow.
    queues: Vec<Fifo<P>>,
    /// The flow each slot serves while it holds packets.
    key_of: Vec<u64>,
    deficit: Vec<u32>,
    slot_of: HashMap<u64, usize>,
    free: Vec<usize>,
    /// Backlogged slots in round-robin order; the front is being served.
    active: VecDeque<usize>,
    /// The front slot already got this round's quantum.
    granted: bool,
    packets: usize,
    bytes: u64,
}

impl<P: Packet> FairQueue<P> {
    pub fn new(limit: Limit) -> FairQueue<P> {
        FairQueue {
            limit,
            queues: Vec::new(),
            key_of: Vec::new(),
            deficit: Vec::new(),
            slot_of: HashMap::new(),
            free: Vec::new(),
            active: VecDeque::new(),
            granted: false,
            packets: 0,
            bytes: 0,
        }
    }

    /// Flows with packets queued.
    pub fn backlogged_flows(&self) -> usize {
        self.active.len()
    }

    fn slot_for(&mut self, key: u64) -> usize {
        if let Some(&s) = self.slot_of.get(&key) {
            return s;
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None => {
                self.queues.push(Fifo::new(Limit::Unlimited));
                self.key_of.push(0);
                self.deficit.push(0);
                self.queues.len() - 1
            }
        };
        self.key_of[s] = key;
        self.deficit[s] = 0;
        self.slot_of.insert(key, s);
        s
    }

    /// The front slot emptied: it leaves the round and its flow's slot is freed.
    fn retire_front(&mut self) {
        if let Some(s) = self.active.pop_front() {
            self.deficit[s] = 0;
            self.slot_of.remove(&self.key_of[s]);
            self.free.push(s);
        }
        self.granted = false;
    }
}

impl<P: Packet> Qdisc<P> for FairQueue<P> {
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        let len = packet.len_bytes();
        if !self.limit.admits(self.packets, self.bytes, len) {
            out.drops.push(Dropped { packet, reason: DropReason::BufferFull, enqueued_at: None });
            return;
        }
        let s = self.slot_for(packet.flow_key());
        if self.queues[s].len_packets() == 0 {
            self.active.push_back(s);
        }
        self.queues[s].push_or_drop(now, packet, out);
        self.packets += 1;
        self.bytes += u64::from(len);
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut Outputs<P>) -> Option<Departure<P>> {
        // A scheduler serves only packets that had arrived by `now`. A whole round of flows
        // whose heads have not arrived (the rotations undo each other) means nothing is ready;
        // an arrived head is served within two visits (a quantum covers any packet), so this
        // stays O(1) per packet in the usual case instead of scanning every flow first.
        let mut unready = 0;
        loop {
            let s = *self.active.front()?;
            let head = self.queues[s].head_len_bytes()?;
            let arrived = self.queues[s].head_enqueued_at().is_some_and(|t| t <= now);
            if !arrived {
                unready += 1;
                if unready >= self.active.len() {
                    self.active.rotate_left(1);
                    self.granted = false;
                    return None;
                }
            } else {
                unready = 0;
                if !self.granted {
                    self.deficit[s] = self.deficit[s].saturating_add(QUANTUM_BYTES);
                    self.granted = true;
                }
                if self.deficit[s] >= head {
                    self.deficit[s] -= head;
                    let d = self.queues[s].pop()?;
                    self.packets -= 1;
                    self.bytes -= u64::from(head);
                    if self.queues[s].len_packets() == 0 {
                        self.retire_front();
                    }
                    return Some(d);
                }
            }
            // Not enough credit (or not arrived yet): the next flow's turn.
            self.active.rotate_left(1);
            self.granted = false;
        }
    }

    fn buffers(&self) -> &[Fifo<P>] {
        &self.queues
    }

    fn len_packets(&self) -> usize {
        self.packets
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn head_enqueued_at(&self) -> Option<Nanos> {
        self.active.iter().filter_map(|&s| self.queues[s].head_enqueued_at()).min()
    }

    fn name(&self) -> &'static str {
        "fq"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::Ecn;

    fn pkt(src: u32, len: u32) -> TestPacket {
        TestPacket { len, ecn: Ecn::NotEct, src }
    }

    /// Bytes each flow got in the first `n` departures.
    fn served(q: &mut FairQueue<TestPacket>, n: usize) -> HashMap<u32, u64> {
        let mut out = Outputs::new();
        let mut got = HashMap::new();
        for _ in 0..n {
            let d = q.dequeue(1_000, &mut out).expect("backlogged");
            *got.entry(d.packet.src).or_insert(0) += u64::from(d.packet.len);
        }
        got
    }

    #[test]
    fn backlogged_flows_share_bytes_equally_whatever_their_packet_sizes() {
        let mut q = FairQueue::new(Limit::Unlimited);
        let mut out = Outputs::new();
        // Flow 1 sends 1500-byte packets, flow 2 300-byte ones, flow 3 arrives with a burst of
        // 1000 packets ahead of the others: none of that buys a larger share.
        for _ in 0..1000 {
            q.enqueue(0, pkt(3, 1000), &mut out);
        }
        for _ in 0..1000 {
            q.enqueue(0, pkt(1, 1500), &mut out);
            for _ in 0..5 {
                q.enqueue(0, pkt(2, 300), &mut out);
            }
        }
        assert_eq!(q.backlogged_flows(), 3);
        let got = served(&mut q, 1200);
        let (a, b, c) = (got[&1] as f64, got[&2] as f64, got[&3] as f64);
        for (name, x) in [("1500 B", a), ("300 B", b), ("burst", c)] {
            assert!((x / ((a + b + c) / 3.0) - 1.0).abs() < 0.05, "flow {name}: {x} of {:?}", got);
        }
        assert!(out.is_empty());
    }

    #[test]
    fn a_flow_keeps_its_order_and_an_idle_flow_keeps_no_credit() {
        let mut q = FairQueue::new(Limit::Unlimited);
        let mut out = Outputs::new();
        for i in 0..3 {
            q.enqueue(i, pkt(7, 100 + i as u32), &mut out);
        }
        let lens: Vec<u32> = (0..3).map(|_| q.dequeue(10, &mut out).unwrap().packet.len).collect();
        assert_eq!(lens, vec![100, 101, 102], "FIFO within a flow");
        assert_eq!((q.backlogged_flows(), q.len_packets(), q.len_bytes()), (0, 0, 0));
        // Flow 7 went idle with unused credit; back, it competes from zero against flow 8.
        for _ in 0..4 {
            q.enqueue(20, pkt(7, 1500), &mut out);
            q.enqueue(20, pkt(8, 1500), &mut out);
        }
        let order: Vec<u32> = (0..4).map(|_| q.dequeue(30, &mut out).unwrap().packet.src).collect();
        assert_eq!(order, vec![7, 8, 7, 8], "one MTU each per round");
    }

    #[test]
    fn emptied_queues_are_reused_so_memory_follows_the_backlogged_flows() {
        let mut q = FairQueue::new(Limit::Unlimited);
        let mut out = Outputs::new();
        for flow in 0..10_000u32 {
            q.enqueue(u64::from(flow), pkt(flow, 500), &mut out);
            q.dequeue(u64::from(flow), &mut out).expect("its own packet");
        }
        assert_eq!(q.buffers().len(), 1, "one slot served 10,000 flows one after another");
    }

    #[test]
    fn a_total_limit_drops_and_nothing_is_sent_before_it_arrives() {
        let mut q = FairQueue::new(Limit::Packets(2));
        let mut out = Outputs::new();
        q.enqueue(100, pkt(1, 100), &mut out);
        q.enqueue(100, pkt(2, 100), &mut out);
        q.enqueue(100, pkt(3, 100), &mut out);
        assert_eq!(out.drops.len(), 1);
        assert_eq!(out.drops[0].packet.src, 3);
        assert!(q.dequeue(50, &mut out).is_none(), "nothing had arrived at 50");
        assert_eq!(q.head_enqueued_at(), Some(100));
        assert!(q.dequeue(100, &mut out).is_some());
    }
}
