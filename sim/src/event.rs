//! The event queue: a calendar of compact events keyed by (time, insertion order).
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
    /// Host `host`'s interrupt-coalescing interval ends (`rx_coalesce_us`).
    RxInterrupt { host: u32 },
    /// Host `host`'s pacer has a token tick or a rate update due (HULL, `[pacer]`).
    Pacer { host: u32 },
    /// Periodic sampling of queues and link counters.
    Sample,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Time in the high 64 bits, insertion sequence in the low 64: one comparison orders both,
    /// and no two entries share a key.
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

/// Slots in the calendar's window. Few enough that the whole calendar stays in the L2 cache as the
/// window sweeps over it: with 65,536 slots of 1 ns a Clos run was 1.5× slower than with 4,096.
const SLOTS: usize = 1 << 10;
/// The narrowest slot, as a power of two of picoseconds: 4.1 ns, some 30 events on a busy
/// 128-host 100 Gbit/s fabric (measured faster than 0.26, 0.5, 1 and 2 ns slots there).
pub const DEFAULT_SLOT_SHIFT: u32 = 12;

/// The pending events of one simulation: a calendar queue (Brown, "Calendar queues", CACM 1988)
/// over a window of [`SLOTS`] slots of 2^`shift` ps, backed by a binary heap for events beyond it.
///
/// Nearly every event of a packet network is due within a few link delays: a serialization or a
/// propagation. Those go into their slot with one append and come out after one small sort of
/// their slot, where a binary heap of every event paid ~15 unpredictable comparisons per pop (a
/// fifth of a Clos run). Timers and flow starts further ahead wait in the binary heap and move
/// into the window as it reaches them. Every pop returns the smallest (time, sequence) key, so
/// the order is exactly that of one binary heap.
#[derive(Debug)]
pub struct EventQueue {
    shift: u32,
    /// The absolute slot (time >> shift) being served.
    cur: u64,
    /// The entries of slot `cur`, largest key first (popped from the end).
    front: Vec<Entry>,
    /// Slots `cur + 1 .. cur + SLOTS`, by absolute slot modulo SLOTS.
    wheel: Vec<Vec<Entry>>,
    /// Bit i set iff `wheel[i]` is non-empty, and bit w of `summary` iff word w of `occupied` is.
    occupied: Vec<u64>,
    summary: Vec<u64>,
    /// Entries at or past slot `cur + SLOTS`.
    far: BinaryHeap<Entry>,
    len: usize,
    seq: u64,
    now: Time,
    processed: u64,
}

impl Default for EventQueue {
    fn default() -> EventQueue {
        EventQueue::new()
    }
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue::with_slot_shift(DEFAULT_SLOT_SHIFT)
    }

    /// A queue with slots of 2^`shift` ps (the window is [`SLOTS`] of them). Any width gives the
    /// same order; one that holds a few events per slot and a window of several link delays is
    /// fastest ([`slot_shift_for`]).
    pub fn with_slot_shift(shift: u32) -> EventQueue {
        EventQueue {
            shift: shift.min(63),
            cur: 0,
            front: Vec::new(),
            wheel: (0..SLOTS).map(|_| Vec::new()).collect(),
            occupied: vec![0; SLOTS / 64],
            summary: vec![0; (SLOTS / 64).div_ceil(64)],
            far: BinaryHeap::new(),
            len: 0,
            seq: 0,
            now: 0,
            processed: 0,
        }
    }

    /// Schedules `event` at `at` (never before the current time).
    pub fn schedule(&mut self, at: Time, event: Event) {
        debug_assert!(at >= self.now, "event scheduled in the past");
        let at = at.max(self.now);
        let key = (u128::from(at) << 64) | u128::from(self.seq);
        self.seq += 1;
        if at >> self.shift < self.cur {
            // Only after a horizon stopped a run short of the next slot and the caller scheduled
            // something before it.
            self.restart_at(at >> self.shift);
        }
        self.place(Entry { key, event });
        self.len += 1;
    }

    /// Schedules `event` after `delay`.
    pub fn after(&mut self, delay: Time, event: Event) {
        self.schedule(self.now + delay, event);
    }

    /// Removes and returns the earliest event if it is due at or before `until`, advancing the clock.
    pub fn pop_until(&mut self, until: Time) -> Option<Event> {
        loop {
            if let Some(e) = self.front.last() {
                let at = (e.key >> 64) as Time;
                if at > until {
                    return None;
                }
                let e = self.front.pop().expect("just seen");
                self.len -= 1;
                self.now = at;
                self.processed += 1;
                return Some(e.event);
            }
            if !self.advance() {
                return None;
            }
        }
    }

    fn slot_of(&self, key: u128) -> u64 {
        ((key >> 64) as u64) >> self.shift
    }

    /// Files an entry whose slot is at or after `cur`.
    fn place(&mut self, e: Entry) {
        let s = self.slot_of(e.key);
        if s == self.cur {
            let i = self.front.partition_point(|f| f.key > e.key);
            self.front.insert(i, e);
        } else if s - self.cur < SLOTS as u64 {
            let i = s as usize % SLOTS;
            self.wheel[i].push(e);
            self.occupied[i / 64] |= 1 << (i % 64);
            self.summary[i / 4096] |= 1 << (i / 64 % 64);
        } else {
            self.far.push(e);
        }
    }

    /// Moves `cur` to the next slot holding entries and loads it into `front`; false when empty.
    fn advance(&mut self) -> bool {
        let next_wheel = self.next_occupied();
        let next_far = self.far.peek().map(|e| self.slot_of(e.key));
        self.cur = match (next_wheel, next_far) {
            (Some(w), Some(f)) => w.min(f),
            (Some(w), None) => w,
            (None, Some(f)) => f,
            (None, None) => return false,
        };
        let i = self.cur as usize % SLOTS;
        if self.occupied[i / 64] & (1 << (i % 64)) != 0 {
            std::mem::swap(&mut self.front, &mut self.wheel[i]);
            self.clear_slot(i);
        }
        // What the window now reaches leaves the binary heap.
        while let Some(e) = self.far.peek() {
            let s = self.slot_of(e.key);
            if s - self.cur >= SLOTS as u64 {
                break;
            }
            let e = self.far.pop().expect("just peeked");
            if s == self.cur {
                self.front.push(e);
            } else {
                self.place(e);
            }
        }
        self.front.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
        true
    }

    fn clear_slot(&mut self, i: usize) {
        self.occupied[i / 64] &= !(1 << (i % 64));
        if self.occupied[i / 64] == 0 {
            self.summary[i / 4096] &= !(1 << (i / 64 % 64));
        }
    }

    /// The first absolute slot after `cur` whose wheel entry holds entries.
    fn next_occupied(&self) -> Option<u64> {
        let start = (self.cur as usize + 1) % SLOTS;
        let found = self.first_set_from(start).or_else(|| self.first_set_from(0).filter(|&i| i < start))?;
        Some(self.cur + 1 + ((found + SLOTS - start) % SLOTS) as u64)
    }

    /// The first occupied wheel index at or after `from` (no wrap).
    fn first_set_from(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let bits = self.occupied[w] & (u64::MAX << (from % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        // Whole words after `w`, found through the summary.
        let next = w + 1;
        for sw in next / 64..self.summary.len() {
            let mut bits = self.summary[sw];
            if sw == next / 64 {
                bits &= u64::MAX.checked_shl((next % 64) as u32).unwrap_or(0);
            }
            if bits != 0 {
                let word = sw * 64 + bits.trailing_zeros() as usize;
                return Some(word * 64 + self.occupied[word].trailing_zeros() as usize);
            }
        }
        None
    }

    /// Re-files everything relative to an earlier slot.
    fn restart_at(&mut self, slot: u64) {
        let mut all: Vec<Entry> = std::mem::take(&mut self.front);
        for i in 0..SLOTS {
            if self.occupied[i / 64] & (1 << (i % 64)) != 0 {
                all.append(&mut self.wheel[i]);
            }
        }
        self.occupied.iter_mut().for_each(|w| *w = 0);
        self.summary.iter_mut().for_each(|w| *w = 0);
        all.extend(self.far.drain());
        self.cur = slot;
        for e in all {
            self.place(e);
        }
        self.front.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
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
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The slot width for a network whose longest link delay is `max_delay`: a window of at least
/// four such delays, and never below [`DEFAULT_SLOT_SHIFT`].
pub fn slot_shift_for(max_delay: Time) -> u32 {
    let window = max_delay.saturating_mul(4).max(1);
    let per_slot = window.div_ceil(SLOTS as u64);
    (64 - per_slot.saturating_sub(1).leading_zeros()).max(DEFAULT_SLOT_SHIFT)
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
    fn a_horizon_then_an_earlier_event_still_comes_out_first() {
        // With 1 ps slots the horizon moves the calendar to slot 100 and the new event lands before
        // it; with the default width both share a slot.
        for shift in [0, DEFAULT_SLOT_SHIFT] {
            let mut q = EventQueue::with_slot_shift(shift);
            q.schedule(100, Event::Sample);
            assert!(q.pop_until(50).is_none());
            q.schedule(70, Event::TxDone { port: 3 });
            assert_eq!(q.pop_until(u64::MAX), Some(Event::TxDone { port: 3 }));
            assert_eq!(q.now(), 70);
            assert_eq!(q.pop_until(u64::MAX), Some(Event::Sample));
            assert!(q.is_empty());
        }
    }

    #[test]
    fn the_window_covers_four_link_delays() {
        assert_eq!(slot_shift_for(0), DEFAULT_SLOT_SHIFT);
        for delay_ps in [1_000_000, 10_000_000, 50_000_000_000] {
            let shift = slot_shift_for(delay_ps);
            assert!((SLOTS as u64) << shift >= 4 * delay_ps, "{delay_ps} ps: shift {shift}");
            assert!(shift == DEFAULT_SLOT_SHIFT || (SLOTS as u64) << (shift - 1) < 4 * delay_ps, "{delay_ps} ps: shift {shift}");
        }
    }

    proptest::proptest! {
        /// Any interleaving of schedules (never in the past) and pops, horizons included, gives
        /// exactly the order of a binary heap on (time, insertion order).
        #[test]
        /// Slot widths from 1 ps (nearly everything beyond the window, in the binary heap) to
        /// 32 ns, and delays from ties to far beyond the window, exercise every path.
        fn pops_in_the_order_of_a_binary_heap(
            shift in 0u32..16,
            scale in 0u32..4,
            ops in proptest::collection::vec((0u8..4, 0u64..5_000, 0u64..200), 1..400),
        ) {
            use std::cmp::Reverse;
            use std::collections::BinaryHeap;
            let mut q = EventQueue::with_slot_shift(shift);
            let mut reference = BinaryHeap::new();
            let mut seq = 0u32;
            for (op, delay, horizon) in ops {
                if op < 2 {
                    let at = q.now() + delay * 10u64.pow(scale * 2);
                    q.schedule(at, Event::FlowStart { flow: seq });
                    reference.push(Reverse((at, seq)));
                    seq += 1;
                } else {
                    let until = q.now() + horizon * 10u64.pow(scale * 2 + 1);
                    let due = reference.peek().is_some_and(|Reverse((at, _))| *at <= until);
                    let got = q.pop_until(until);
                    if due {
                        let Reverse((at, id)) = reference.pop().unwrap();
                        proptest::prop_assert_eq!(got, Some(Event::FlowStart { flow: id }));
                        proptest::prop_assert_eq!(q.now(), at);
                    } else {
                        proptest::prop_assert_eq!(got, None);
                    }
                }
                proptest::prop_assert_eq!(q.pending(), reference.len());
            }
            while let Some(Reverse((at, id))) = reference.pop() {
                proptest::prop_assert_eq!(q.pop_until(u64::MAX), Some(Event::FlowStart { flow: id }));
                proptest::prop_assert_eq!(q.now(), at);
            }
            proptest::prop_assert!(q.is_empty());
        }
    }

    #[test]
    fn events_are_compact() {
        assert!(std::mem::size_of::<Event>() <= 16, "{}", std::mem::size_of::<Event>());
    }
}
