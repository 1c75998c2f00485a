//! Switch hooks: where per-hop schemes such as BFC plug into the switch (specs/bfc.md §12.1).
//!
//! The simulator gives every switch egress port `switch.queues_per_port` FIFO queues (each with
//! its own queue discipline), serves the non-paused ones round-robin, stamps every departing
//! packet's `upstream_q` with the queue it left, and delivers per-queue pause/resume messages to
//! the upstream device after the link's propagation delay (a host NIC pauses the flows whose NIC
//! queue matches). A [`SwitchHook`] decides the rest: which queue a packet joins (BFC's dynamic
//! queue assignment), and which upstream queues to pause or resume as packets arrive and leave
//! (BFC's pause counters). The default, [`HashQueues`], spreads flows over the queues by hash and
//! never pauses anything, which is plain stochastic fair queueing. Under `switch.scheduler =
//! "strict_priority"` the switch serves its queues in priority order instead, and
//! [`PriorityQueues`] puts each packet in the queue of its flow's priority.

use crate::packet::PacketId;
use crate::switch::Port;
use crate::time::Time;
use crate::topology::PortId;
use crate::transport::FlowId;

/// What a hook keeps about a packet from [`SwitchHook::classify`] to [`SwitchHook::on_dequeue`]
/// beyond the packet's own fields: the switch carries it in the queue beside the packet, as a P4
/// pipeline bridges metadata from ingress to egress (BFC's `bfc_meta_t`), so a hook needs no
/// table of its own per packet. Two bytes, which a queued packet's padding holds (a wider field
/// made every queue slot twice as large and the DCTCP Clos 15 % slower).
pub type HookMeta = u16;

/// What a hook sees of the packet being switched.
#[derive(Debug, Clone, Copy)]
pub struct HookPacket {
    /// The arena id: stable while the packet is in this switch, so a hook can key per-packet
    /// metadata (BFC's counterIncr bit) on it.
    pub id: PacketId,
    pub flow: FlowId,
    pub hash: u32,
    pub wire_bytes: u32,
    /// The queue the packet left at the previous hop.
    pub upstream_q: u16,
    /// Its flow's priority (`workload.*.priority`).
    pub priority: u8,
    /// The port it arrived on (its peer is the upstream device to pause).
    pub ingress: PortId,
    pub egress: PortId,
    /// What `classify` returned for it (0 before that).
    pub meta: HookMeta,
}

/// A pause or resume for one queue of the upstream device on `ingress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueControl {
    /// The ingress port (of this switch) whose upstream neighbour gets the message.
    pub ingress: PortId,
    pub queue: u16,
    pub paused: bool,
}

/// Per-switch logic called on every enqueue and dequeue. Every `on_enqueue` is matched by
/// exactly one `on_dequeue` (when the packet is sent, or dropped from inside the queue), which sees
/// the `meta` that `classify` gave the packet.
pub trait SwitchHook {
    /// The egress queue for this packet, below `egress.queues().len()`, and what to carry with it
    /// to `on_dequeue`.
    fn classify(&mut self, now: Time, egress: &Port, packet: &HookPacket) -> (u16, HookMeta) {
        let _ = now;
        ((packet.hash % egress.queues().len() as u32) as u16, 0)
    }

    /// The packet was admitted to `queue` of `egress` (the queue's occupancy excludes it).
    fn on_enqueue(&mut self, now: Time, egress: &Port, queue: u16, packet: &HookPacket, controls: &mut Vec<QueueControl>) {
        let _ = (now, egress, queue, packet, controls);
    }

    /// The packet left `queue` of `egress`.
    fn on_dequeue(&mut self, now: Time, egress: &Port, queue: u16, packet: &HookPacket, controls: &mut Vec<QueueControl>) {
        let _ = (now, egress, queue, packet, controls);
    }
}

/// The default hook: flows hashed onto queues, no backpressure.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashQueues;

impl SwitchHook for HashQueues {}

/// The hook of strict-priority switches: a packet joins the queue of its priority (the highest
/// queue when its priority is above the port's), and nothing is ever paused.
#[derive(Debug, Clone, Copy, Default)]
pub struct PriorityQueues;

impl SwitchHook for PriorityQueues {
    fn classify(&mut self, _now: Time, egress: &Port, packet: &HookPacket) -> (u16, HookMeta) {
        (u16::from(packet.priority).min(egress.queues().len() as u16 - 1), 0)
    }
}
