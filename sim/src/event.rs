//! The event queue: a binary min-heap of compact events keyed by (time, insertion order).
//!
//! Ties are broken by insertion order, so two events at the same picosecond always run in the
//! order they were scheduled: the simulation is a deterministic function of its inputs. Events are
//! 16 bytes of plain data (indices, no pointers, no heap allocation); the packet an event refers
//! to lives in the packet arena.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::packet::PacketId;
use crate::time::Time;
use crate::topology::PortId;
use crate::transport::FlowId;

/// Something that happens at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A packet finished arriving (last bit received) at the far end of `port`'s link.
    Arrive { port: PortId, packet: PacketId },
    /// `port` finished serializing its current packet and may start the next one.
    TxDone { port: PortId },
    /// A flow's application hands its data to the transport.
    FlowStart { flow: FlowId },
    /// The flow's retransmission timer may have expired (checked against its current deadline).
    Rto { flow: FlowId },
    /// The flow's pacing gate opens.
    Pace { flow: FlowId },
    /// The flow's report interval may have elapsed.
    Report { flow: FlowId },
    /// The receiver's delayed-ACK timer may have expired.
    DelayedAck { flow: FlowId },
    /// The oldest action the agent computed for this flow reaches the datapath.
    ApplyAction { flow: FlowId },
    /// A QCN congestion notification reaches the flow's source.
    Cnm { flow: FlowId, qfb: u8, q_off_bytes: i32, q_delta_bytes: i32 },
    /// A PFC pause (or resume) frame reaches the sender on `port`.
    Pfc { port: PortId, paused: bool },
    /// A per-queue pause/resume message (a BFC hook) reaches the sender on `port`.
    QueueControl { port: PortId, queue: u16, paused: bool },
    /// Periodic sampling of queues and link counters.
    Sample,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Time in the high 64 bits, insertion sequence in the low 64: one comparison orders both.
    key: u128,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so std's max-heap pops the earliest entry.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// The pending events of one simulation.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
    now: Time,
    processed: u64,
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue { heap: BinaryHeap::with_capacity(1 << 16), ..EventQueue::default() }
    }

    /// Schedules `event` at `at` (never before the current time).
    pub fn schedule(&mut self, at: Time, event: Event) {
        debug_assert!(at >= self.now, "event scheduled in the past");
        let key = (u128::from(at.max(self.now)) << 64) | u128::from(self.seq);
        self.seq += 1;
        self.heap.push(Entry { key, event });
    }

    /// Schedules `event` after `delay`.
    pub fn after(&mut self, delay: Time, event: Event) {
        self.schedule(self.now + delay, event);
    }

    /// Removes and returns the earliest event if it is due at or before `until`, advancing the clock.
    pub fn pop_until(&mut self, until: Time) -> Option<Event> {
        let next = self.heap.peek()?;
        let at = (next.key >> 64) as Time;
        if at > until {
            return None;
        }
        let entry = self.heap.pop()?;
        self.now = at;
        self.processed += 1;
        Some(entry.event)
    }

    /// The current simulated time (the time of the event being processed).
    pub fn now(&self) -> Time {
        self.now
    }

    /// Moves the clock forward to `t` when the queue ran dry before it.
    pub fn advance_to(&mut self, t: Time) {
        self.now = self.now.max(t);
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_ties_in_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(30, Event::Sample);
        q.schedule(10, Event::TxDone { port: 1 });
        q.schedule(10, Event::TxDone { port: 2 });
        q.schedule(20, Event::FlowStart { flow: 0 });
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(u64::MAX).map(|e| (q.now(), e))).collect();
        assert_eq!(
            got,
            vec![
                (10, Event::TxDone { port: 1 }),
                (10, Event::TxDone { port: 2 }),
                (20, Event::FlowStart { flow: 0 }),
                (30, Event::Sample)
            ]
        );
        assert_eq!(q.processed(), 4);
    }

    #[test]
    fn stops_at_the_horizon() {
        let mut q = EventQueue::new();
        q.schedule(100, Event::Sample);
        assert!(q.pop_until(99).is_none());
        assert_eq!(q.pending(), 1);
        assert!(q.pop_until(100).is_some());
    }

    #[test]
    fn events_are_compact() {
        assert!(std::mem::size_of::<Event>() <= 16, "{}", std::mem::size_of::<Event>());
    }
}
