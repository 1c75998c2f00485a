//! Packets and the arena that holds them.
//!
//! A packet lives in one arena slot from the moment a host emits it until a host consumes it or a
//! switch drops it; everything else (events, queue disciplines, the host ACK queue) refers to it by
//! its 32-bit index. Freed slots are reused, so a run allocates only while its peak number of
//! packets in flight grows. The arena's live count is what the conservation check compares.

use ccp_contract::IntPath;
use ccp_qdisc::Ecn;

use crate::hook::HookMeta;
use crate::time::Time;
use crate::topology::{NodeId, PortId};
use crate::transport::FlowId;

pub type PacketId = u32;

/// `Packet::sack` when an ACK selectively acknowledges nothing.
pub const NO_SACK: u32 = u32::MAX;

/// Data segment or acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data,
    Ack,
}

/// One packet on the wire. Plain data, 56 bytes.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub kind: Kind,
    /// The IP ECN field: ECT(0) on data of ECN-capable flows, set to CE by marking switches.
    pub ecn: Ecn,
    /// ACK only: ECN-Echo, set iff the acknowledged segment(s) arrived CE-marked (DCTCP-style
    /// accurate echo, specs/dc.md §2.2).
    pub ece: bool,
    /// The queue this packet left at the previous hop (a BFC hook: switches and NICs write their
    /// own queue index on departure, so the next hop can pause that queue).
    pub upstream_q: u16,
    /// The flow's priority (an IP TOS): the queue it joins at strict-priority switch ports.
    pub priority: u8,
    pub flow: FlowId,
    pub src: NodeId,
    pub dst: NodeId,
    /// Data: segment number. ACK: cumulative acknowledgement (the next segment expected).
    pub seq: u32,
    /// ACK: the segment whose arrival triggered it (selectively acknowledged), or `NO_SACK`.
    pub sack: u32,
    /// Bytes on the wire (headers included): what links serialize and buffers count.
    pub wire_bytes: u32,
    /// Data: payload bytes.
    pub payload_bytes: u32,
    /// Data: when it was sent. ACK: the echoed send time of the segment that triggered it.
    pub ts: Time,
    /// The port it entered the current switch through (ingress accounting for PFC and hooks).
    pub ingress: PortId,
    /// Per-flow hash for ECMP.
    pub hash: u32,
}

/// All packets alive in a simulation.
#[derive(Debug, Default)]
pub struct Arena {
    slots: Vec<Packet>,
    /// INT records per slot (`[switch] int`; empty when INT is off, so `Packet` stays small and
    /// the hot path pays nothing).
    int: Vec<IntPath>,
    int_on: bool,
    free: Vec<PacketId>,
    live: usize,
    peak: usize,
}

impl Arena {
    pub fn new() -> Arena {
        Arena::default()
    }

    /// An arena whose packets carry INT records (HPCC).
    pub fn with_int() -> Arena {
        Arena { int_on: true, ..Arena::default() }
    }

    /// Whether packets carry INT.
    #[inline]
    pub fn int_on(&self) -> bool {
        self.int_on
    }

    /// A new packet, with an empty INT record when INT is on.
    pub fn alloc(&mut self, packet: Packet) -> PacketId {
        self.live += 1;
        self.peak = self.peak.max(self.live);
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = packet;
                id
            }
            None => {
                self.slots.push(packet);
                (self.slots.len() - 1) as PacketId
            }
        };
        if self.int_on {
            match self.int.get_mut(id as usize) {
                Some(p) => *p = IntPath::default(),
                None => self.int.push(IntPath::default()),
            }
        }
        id
    }

    /// The INT a packet carries (empty when INT is off).
    #[inline]
    pub fn int(&self, id: PacketId) -> IntPath {
        self.int.get(id as usize).copied().unwrap_or_default()
    }

    /// The packet's INT record, to append to or overwrite; `None` when INT is off.
    #[inline]
    pub fn int_mut(&mut self, id: PacketId) -> Option<&mut IntPath> {
        self.int.get_mut(id as usize)
    }

    pub fn free(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id);
    }

    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id as usize]
    }

    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id as usize]
    }

    /// Packets currently alive (in queues, on links, waiting in a host's ACK queue).
    pub fn live(&self) -> usize {
        self.live
    }

    /// The most packets ever alive at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

/// What a queue discipline holds: a handle to the arena packet plus the few fields the
/// discipline reads or writes. The ECN field travels here while the packet is queued and is
/// written back to the arena on departure, so disciplines never touch the arena.
#[derive(Debug, Clone, Copy)]
pub struct Queued {
    pub id: PacketId,
    pub wire_bytes: u32,
    pub flow: FlowId,
    pub ecn: Ecn,
    /// The switch hook's per-packet metadata, from classification to departure.
    pub meta: HookMeta,
}

impl ccp_qdisc::Packet for Queued {
    /// QCN notifications are addressed to the sampled packet's flow (its source transport).
    type FeedbackKey = FlowId;

    fn len_bytes(&self) -> u32 {
        self.wire_bytes
    }

    fn ecn(&self) -> Ecn {
        self.ecn
    }

    fn set_ecn(&mut self, ecn: Ecn) {
        self.ecn = ecn;
    }

    fn feedback_key(&self) -> FlowId {
        self.flow
    }

    fn flow_key(&self) -> u64 {
        u64::from(self.flow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: u32) -> Packet {
        Packet {
            kind: Kind::Data,
            ecn: Ecn::Ect0,
            ece: false,
            upstream_q: 0,
            priority: 0,
            flow: 0,
            src: 0,
            dst: 1,
            seq,
            sack: NO_SACK,
            wire_bytes: 1500,
            payload_bytes: 1460,
            ts: 0,
            ingress: 0,
            hash: 0,
        }
    }

    #[test]
    fn slots_are_reused_and_counted() {
        let mut a = Arena::new();
        let x = a.alloc(pkt(1));
        let y = a.alloc(pkt(2));
        assert_eq!(a.live(), 2);
        a.free(x);
        let z = a.alloc(pkt(3));
        assert_eq!(z, x);
        assert_eq!(a.get(z).seq, 3);
        assert_eq!(a.get(y).seq, 2);
        assert_eq!((a.live(), a.peak()), (2, 2));
        // The priority byte sits in padding: a packet stays 56 bytes.
        assert_eq!(std::mem::size_of::<Packet>(), 56);
        // Every queue slot of every switch holds one: the hook's metadata must stay in its padding.
        assert_eq!(std::mem::size_of::<Queued>(), 16);
    }
}
