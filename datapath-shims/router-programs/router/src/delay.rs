//! The propagation delay line: packets wait a constant time after their last byte left the link.
//! A constant delay keeps FIFO order, so a deque ordered by release time is enough.

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
}
