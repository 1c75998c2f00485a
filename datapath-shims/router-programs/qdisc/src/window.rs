//! Sliding-window rate estimator: "bytes in the last T, divided by T", the estimator ABC uses for
//! both its dequeue rate cr(t) and, on trace-driven links, its capacity μ(t) (abc.md §6.4).
//!
//! Counting whole events in (now − T, now] is biased whenever the window ends on an event, which is
//! exactly when ABC asks (at a dequeue, at an opportunity): periodic events with gap g are counted
//! ⌈T/g⌉ times instead of T/g, up to one extra event per window (6 % at 10 Mbit/s with T = 20 ms),
//! and a Poisson stream gets one extra event on average. So each event's bytes are spread over the
//! gap since the previous event ("fluid" counting): the event whose gap straddles the window start
//! counts only for the part of its gap inside the window. Periodic streams are then measured
//! exactly at any phase, and a burst after an idle period still counts as a low rate.

use std::collections::VecDeque;

use crate::{Nanos, NANOS_PER_SEC};

#[derive(Debug, Clone, Copy)]
struct Event {
    at: Nanos,
    /// When the previous event happened (the start of this event's gap); `at` for the first one.
    prev: Nanos,
    bytes: u64,
}

#[derive(Debug, Clone)]
pub struct SlidingWindow {
    span: Nanos,
    events: VecDeque<Event>,
    /// Bytes of the events in `events`.
    total: u64,
    last: Option<Nanos>,
}

impl SlidingWindow {
    /// A window covering the last `span` nanoseconds (must be > 0).
    pub fn new(span: Nanos) -> SlidingWindow {
        SlidingWindow { span: span.max(1), events: VecDeque::new(), total: 0, last: None }
    }

    /// Records `bytes` at `now` (times must not go backwards).
    pub fn add(&mut self, now: Nanos, bytes: u64) {
        let prev = self.last.map_or(now, |l| l.min(now));
        self.last = Some(now);
        self.events.push_back(Event { at: now, prev, bytes });
        self.total += bytes;
        self.trim(now);
    }

    /// When the last event happened, if any.
    pub fn last_event(&self) -> Option<Nanos> {
        self.last
    }

    /// Forgets events at or before `now - span`.
    fn trim(&mut self, now: Nanos) {
        let Some(horizon) = now.checked_sub(self.span) else { return };
        while let Some(e) = self.events.front() {
            if e.at > horizon {
                break;
            }
            self.total -= e.bytes;
            self.events.pop_front();
        }
    }

    /// Bytes in the window (now − span, now], the oldest event counted pro rata.
    pub fn bytes(&mut self, now: Nanos) -> f64 {
        self.trim(now);
        let Some(oldest) = self.events.front() else { return 0.0 };
        let start = now.saturating_sub(self.span);
        let outside = if oldest.prev < start && oldest.at > oldest.prev {
            oldest.bytes as f64 * (start - oldest.prev) as f64 / (oldest.at - oldest.prev) as f64
        } else {
            0.0
        };
        self.total as f64 - outside
    }

    /// Rate over the window ending at `now`, bytes per second.
    pub fn rate(&mut self, now: Nanos) -> f64 {
        self.bytes(now) * NANOS_PER_SEC as f64 / self.span as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_events_are_measured_exactly_at_any_phase() {
        for gap in [7u64, 9, 10, 13, 1200] {
            let mut w = SlidingWindow::new(100);
            for k in 1..500u64 {
                w.add(k * gap, 10);
                if k >= 2 && k * gap > 200 {
                    let r = w.bytes(k * gap);
                    assert!((r - 1000.0 / gap as f64).abs() < 1e-9, "gap {gap} at event {k}: {r}");
                }
            }
        }
    }

    #[test]
    fn several_events_at_one_instant_count_whole() {
        let mut w = SlidingWindow::new(20);
        for ms in 1..=100u64 {
            w.add(ms, 1500);
            w.add(ms, 1500);
        }
        assert_eq!(w.bytes(100), 20.0 * 3000.0);
    }

    #[test]
    fn empty_and_stale_windows_read_zero() {
        let mut w = SlidingWindow::new(10);
        assert_eq!(w.bytes(5), 0.0);
        w.add(5, 100);
        assert_eq!(w.bytes(5), 100.0);
        assert_eq!(w.bytes(15), 0.0);
    }

    #[test]
    fn a_burst_after_idle_is_a_low_rate() {
        let mut w = SlidingWindow::new(20);
        w.add(0, 1500);
        w.add(1000, 1500); // gap of 1000: only 2 % of it is in the window
        assert!((w.bytes(1000) - 30.0).abs() < 1e-9);
    }

    #[test]
    fn rate_in_bytes_per_second() {
        let mut w = SlidingWindow::new(20_000_000); // 20 ms
        for i in 1..=1000u64 {
            w.add(i * 1_000_000, 1500); // 1500 B per ms
        }
        assert!((w.rate(1_000_000_000) - 1.5e6).abs() < 1e-6);
    }
}
