//! CoDel (RFC 8289), the AQM baseline the ABC paper compares against (Cubic + CoDel).
//!
//! CoDel drops at dequeue when the sojourn time has stayed above `target` for at least `interval`,
//! then keeps dropping with the control law next = t + interval/√count until the sojourn time
//! falls below target. This follows the RFC's pseudocode (§5), including the Linux re-entry rule
//! that resumes from the previous drop rate when the queue went bad again shortly after recovering.
//! With `ecn` set, ECT packets are marked CE instead of dropped (as Linux's codel does).
//!
//! Parameters: RFC defaults target 5 ms, interval 100 ms. The ABC artifact's baseline used
//! target 50 ms, interval 100 ms (abc.md §13); record which one an experiment used.

use crate::{Departure, DropReason, Dropped, Ecn, Fifo, Limit, Nanos, Outputs, Packet, ParamError, Qdisc, NANOS_PER_MS};

/// CoDel parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodelParams {
    /// Acceptable standing queue delay. RFC default 5 ms.
    pub target: Nanos,
    /// Window over which the minimum sojourn must stay above target before dropping; also the
    /// control law's base. RFC default 100 ms.
    pub interval: Nanos,
    /// A queue holding at most this many bytes is never considered bad (one MTU).
    pub max_packet_bytes: u64,
    /// Mark ECT packets CE instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams { target: 5 * NANOS_PER_MS, interval: 100 * NANOS_PER_MS, max_packet_bytes: 1500, ecn: false }
    }
}

impl CodelParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.interval == 0 {
            return Err(ParamError::new("interval", "must be > 0"));
        }
        if self.target == 0 || self.target >= self.interval {
            return Err(ParamError::new("target", "must be > 0 and below the interval"));
        }
        Ok(())
    }
}

/// The control law: the next drop is interval/√count after `t`.
pub fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    t + (interval as f64 / f64::from(count.max(1)).sqrt()) as Nanos
}

/// The RFC's re-entry horizon: resume the old drop rate if the last drop was within 16 intervals.
const REENTRY_INTERVALS: u64 = 16;

#[derive(Debug)]
pub struct Codel<P> {
    fifo: Fifo<P>,
    params: CodelParams,
    /// When the sojourn time first went (and stayed) above target, plus one interval; 0 = not above.
    first_above_time: Nanos,
    drop_next: Nanos,
    count: u32,
    last_count: u32,
    dropping: bool,
}

/// A dequeued packet and whether the sojourn state says it may be dropped.
struct DoDequeue<P> {
    departure: Option<Departure<P>>,
    ok_to_drop: bool,
}

impl<P: Packet> Codel<P> {
    pub fn new(limit: Limit, params: CodelParams) -> Result<Codel<P>, ParamError> {
        params.validate()?;
        Ok(Codel { fifo: Fifo::new(limit), params, first_above_time: 0, drop_next: 0, count: 0, last_count: 0, dropping: false })
    }

    /// Whether the controller is in its dropping state (for tests and logs).
    pub fn dropping(&self) -> bool {
        self.dropping
    }

    /// RFC 8289 `dodequeue`: pops the head and tracks whether sojourn has been above target for
    /// a full interval.
    fn do_dequeue(&mut self, now: Nanos) -> DoDequeue<P> {
        let Some(d) = self.fifo.pop() else {
            self.first_above_time = 0;
            return DoDequeue { departure: None, ok_to_drop: false };
        };
        let sojourn = now.saturating_sub(d.enqueued_at);
        let mut ok_to_drop = false;
        if sojourn < self.params.target || self.fifo.len_bytes() <= self.params.max_packet_bytes {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now + self.params.interval;
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        DoDequeue { departure: Some(d), ok_to_drop }
    }

    /// Drops (or, with ECN, marks) `d`. Returns the packet back if it was marked and must be sent.
    fn drop_or_mark(&mut self, d: Departure<P>, out: &mut Outputs<P>) -> Option<Departure<P>> {
        if self.params.ecn && d.packet.ecn().is_ect() {
            let mut d = d;
            d.packet.set_ecn(Ecn::Ce);
            return Some(d);
        }
        out.drops.push(Dropped { packet: d.packet, reason: DropReason::Aqm, enqueued_at: Some(d.enqueued_at) });
        None
    }
}

impl<P: Packet> Qdisc<P> for Codel<P> {
    fn enqueue(&mut self, now: Nanos, packet: P, out: &mut Outputs<P>) {
        self.fifo.push_or_drop(now, packet, out);
    }

    fn dequeue(&mut self, now: Nanos, out: &mut Outputs<P>) -> Option<Departure<P>> {
        let mut r = self.do_dequeue(now);
        let Some(mut current) = r.departure.take() else {
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !r.ok_to_drop {
                // Sojourn back below target: leave the dropping state.
                self.dropping = false;
            }
            // Drop until the next drop time is in the future; a large backlog can need several.
            while self.dropping && now >= self.drop_next {
                self.count += 1;
                if let Some(marked) = self.drop_or_mark(current, out) {
                    self.drop_next = control_law(self.drop_next, self.params.interval, self.count);
                    return Some(marked);
                }
                r = self.do_dequeue(now);
                let Some(next) = r.departure.take() else {
                    self.dropping = false;
                    return None;
                };
                current = next;
                if r.ok_to_drop {
                    self.drop_next = control_law(self.drop_next, self.params.interval, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if r.ok_to_drop {
            let kept = self.drop_or_mark(current, out);
            self.dropping = true;
            // Resume near the drop rate that controlled the queue last time if it went bad again
            // soon after recovering (the Linux variant the RFC adopts).
            let delta = self.count.saturating_sub(self.last_count);
            self.count = 1;
            let since_last = now as i128 - self.drop_next as i128;
            if delta > 1 && since_last < i128::from(REENTRY_INTERVALS * self.params.interval) {
                self.count = delta;
            }
            self.drop_next = control_law(now, self.params.interval, self.count);
            self.last_count = self.count;
            match kept {
                Some(marked) => return Some(marked),
                None => current = self.do_dequeue(now).departure?,
            }
        }
        Some(current)
    }

    fn buffers(&self) -> &[Fifo<P>] {
        std::slice::from_ref(&self.fifo)
    }

    fn name(&self) -> &'static str {
        "codel"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet::TestPacket;
    use crate::MTU_BYTES;

    const MS: Nanos = NANOS_PER_MS;

    fn codel(ecn: bool) -> Codel<TestPacket> {
        Codel::new(Limit::Unlimited, CodelParams { ecn, ..CodelParams::default() }).unwrap()
    }

    #[test]
    fn control_law_values() {
        assert_eq!(control_law(0, 100 * MS, 1), 100 * MS);
        assert_eq!(control_law(0, 100 * MS, 4), 50 * MS);
        assert_eq!(control_law(10, 100 * MS, 2), 10 + 70_710_678);
    }

    #[test]
    fn short_sojourn_never_drops() {
        let mut q = codel(false);
        let mut out = Outputs::new();
        // Arrivals and departures every ms; each waits 4 ms < target.
        for i in 0..10_000u64 {
            q.enqueue(i * MS, TestPacket::new(MTU_BYTES, Ecn::NotEct), &mut out);
            if i >= 4 {
                assert!(q.dequeue(i * MS, &mut out).is_some());
            }
        }
        assert!(out.drops.is_empty());
    }

    /// A standing queue (10,000 packets enqueued at 0, one dequeue per ms): sojourn is above
    /// target from the first dequeue at 5 ms. Returns the times of the drops.
    fn standing_queue_drop_times(q: &mut Codel<TestPacket>, until: Nanos) -> Vec<Nanos> {
        let mut out = Outputs::new();
        for _ in 0..10_000 {
            q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::NotEct), &mut out);
        }
        let mut times = Vec::new();
        let mut t = 5 * MS;
        while t <= until {
            assert!(q.dequeue(t, &mut out).is_some());
            times.extend(out.drops.drain(..).map(|_| t));
            t += MS;
        }
        times
    }

    // The control law in action: first drop one interval after sojourn went above target, then
    // drop k at the first dequeue at or after drop_(k-1) + interval/√(k-1).
    #[test]
    fn drops_follow_the_control_law() {
        let mut q = codel(false);
        let drops = standing_queue_drop_times(&mut q, 1000 * MS);
        assert_eq!(drops[0], 105 * MS, "first_above at 5 ms + 100 ms");
        let mut drop_next = control_law(105 * MS, 100 * MS, 1);
        for (k, &t) in drops.iter().enumerate().skip(1) {
            let expect = drop_next.div_ceil(MS) * MS; // the first dequeue tick at or after drop_next
            assert_eq!(t, expect, "drop #{}", k + 1);
            drop_next = control_law(drop_next, 100 * MS, k as u32 + 1);
        }
        assert!(drops.len() > 10);
        assert!(q.dropping());
    }

    #[test]
    fn ecn_mode_marks_instead_of_dropping() {
        let mut q = codel(true);
        let mut out = Outputs::new();
        for _ in 0..1000 {
            q.enqueue(0, TestPacket::new(MTU_BYTES, Ecn::Ect0), &mut out);
        }
        let mut marks = Vec::new();
        for i in 5..600u64 {
            let d = q.dequeue(i * MS, &mut out).unwrap();
            if d.packet.ecn == Ecn::Ce {
                marks.push(i);
            }
        }
        assert!(out.drops.is_empty());
        assert_eq!(marks[0], 105);
        assert_eq!(marks[1], 205);
        assert_eq!(marks[2], 276, "205 ms + 100/√2 ms = 275.7 ms");
    }

    #[test]
    fn leaves_dropping_state_when_the_queue_drains() {
        let mut q = codel(false);
        standing_queue_drop_times(&mut q, 300 * MS);
        let mut out = Outputs::new();
        while q.len_packets() > 1 {
            q.dequeue(300 * MS, &mut out);
        }
        // Only one packet left (≤ one MTU): not bad any more.
        q.dequeue(301 * MS, &mut out);
        assert!(!q.dropping());
        assert!(q.dequeue(302 * MS, &mut out).is_none());
    }

    #[test]
    fn reentry_resumes_the_previous_rate() {
        let mut q = codel(false);
        let mut out = Outputs::new();
        assert!(standing_queue_drop_times(&mut q, 600 * MS).len() > 2);
        // Drain to empty, which leaves the dropping state, then build a standing queue again.
        while q.dequeue(600 * MS, &mut out).is_some() {}
        assert!(!q.dropping());
        let resume = q.count - q.last_count;
        assert!(resume > 1);
        for _ in 0..1000 {
            q.enqueue(601 * MS, TestPacket::new(MTU_BYTES, Ecn::NotEct), &mut out);
        }
        out.drops.clear();
        let mut t = 610 * MS;
        while out.drops.is_empty() {
            q.dequeue(t, &mut out);
            t += MS;
        }
        // Dropping again within 16 intervals of the last drop: count resumes at count − lastcount.
        assert_eq!(q.count, resume);
    }

    #[test]
    fn parameters_are_validated() {
        let e = CodelParams { target: 200 * MS, ..CodelParams::default() }.validate().unwrap_err();
        assert_eq!(e.param, "target");
    }
}
