//! The propagation delay line: packets wait a constant time after their last byte left the link.
//! A constant delay keeps FIFO order, so a deque ordered by release time is enough.
//!
//! With per-flow-class delays ([`crate::classes`]) one deque is not: a packet with a short delay
//! that left the link after one with a long delay must not wait for it. [`ClassedDelayLine`]
//! keeps one constant-delay line per class (FIFO within a class, as on a real path) and releases
//! across them in release-time order.

use std::collections::VecDeque;

use ccp_qdisc::Nanos;

#[derive(Debug)]
pub struct DelayLine<T> {
    delay: Nanos,
    items: VecDeque<(Nanos, T)>,
}

impl<T> DelayLine<T> {
    pub fn new(delay: Nanos) -> DelayLine<T> {
        DelayLine { delay, items: VecDeque::new() }
    }

    /// Adds an item that left the link at `at`; returns its release time. Release times never go
    /// backwards (an earlier one is held back to keep FIFO order).
    pub fn push(&mut self, at: Nanos, item: T) -> Nanos {
        let mut release = at + self.delay;
        if let Some(&(last, _)) = self.items.back() {
            release = release.max(last);
        }
        self.items.push_back((release, item));
        release
    }

    /// The next item due at or before `now`, with its scheduled release time.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, T)> {
        if self.items.front()?.0 <= now {
            self.items.pop_front()
        } else {
            None
        }
    }

    pub fn next_release(&self) -> Option<Nanos> {
        self.items.front().map(|(t, _)| *t)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// One [`DelayLine`] per delay class (index 0: the default delay), released independently.
#[derive(Debug)]
pub struct ClassedDelayLine<T> {
    lines: Vec<DelayLine<T>>,
}

impl<T> ClassedDelayLine<T> {
    /// A line per delay in `delays` (index 0 is the default class).
    pub fn new(delays: impl IntoIterator<Item = Nanos>) -> ClassedDelayLine<T> {
        let lines: Vec<DelayLine<T>> = delays.into_iter().map(DelayLine::new).collect();
        assert!(!lines.is_empty(), "a delay line needs at least the default class");
        ClassedDelayLine { lines }
    }

    /// Adds an item of class `class` that left the link at `at`; returns its release time.
    pub fn push(&mut self, at: Nanos, class: usize, item: T) -> Nanos {
        self.lines[class].push(at, item)
    }

    /// The line whose head is due first (the lowest class on a tie, so releases are
    /// deterministic).
    fn first(&self) -> Option<(usize, Nanos)> {
        self.lines.iter().enumerate().filter_map(|(i, l)| l.next_release().map(|t| (i, t))).min_by_key(|&(i, t)| (t, i))
    }

    /// The item due first at or before `now`, whatever its class, with its scheduled release
    /// time and class.
    pub fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, usize, T)> {
        let (i, t) = self.first()?;
        if t > now {
            return None;
        }
        self.lines[i].pop_due(now).map(|(t, item)| (t, i, item))
    }

    pub fn next_release(&self) -> Option<Nanos> {
        self.first().map(|(_, t)| t)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.iter().all(DelayLine::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_after_the_delay_in_order() {
        let mut d = DelayLine::new(10);
        assert_eq!(d.push(0, 'a'), 10);
        assert_eq!(d.push(5, 'b'), 15);
        assert_eq!(d.next_release(), Some(10));
        assert!(d.pop_due(9).is_none());
        assert_eq!(d.pop_due(12), Some((10, 'a')));
        assert!(d.pop_due(12).is_none());
        assert_eq!(d.pop_due(100), Some((15, 'b')));
        assert!(d.is_empty());
    }

    #[test]
    fn classes_release_independently() {
        // Default 10, class 1 = 20, class 2 = 1.
        let mut d = ClassedDelayLine::new([10, 20, 1]);
        assert_eq!(d.push(0, 1, "long"), 20);
        assert_eq!(d.push(1, 2, "short"), 2);
        assert_eq!(d.push(2, 0, "default"), 12);
        assert_eq!(d.push(3, 2, "short2"), 4);
        assert_eq!(d.next_release(), Some(2));
        // The short packet that left after the long one is not held behind it.
        assert_eq!(d.pop_due(3), Some((2, 2, "short")));
        assert!(d.pop_due(3).is_none());
        assert_eq!(d.pop_due(100), Some((4, 2, "short2")));
        assert_eq!(d.pop_due(100), Some((12, 0, "default")));
        assert_eq!(d.pop_due(100), Some((20, 1, "long")));
        assert!(d.is_empty() && d.pop_due(u64::MAX).is_none());
        // Equal release times: lower class first.
        let mut d = ClassedDelayLine::new([5, 0]);
        d.push(0, 0, 'a');
        d.push(5, 1, 'b');
        assert_eq!(d.pop_due(5).map(|x| x.1), Some(0));
        assert_eq!(d.pop_due(5).map(|x| x.1), Some(1));
    }
}
