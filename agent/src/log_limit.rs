//! One log line per period for events that can repeat without bound.
//!
//! Whatever a local process or a slow peer can make happen over and over (a refused datagram, a
//! full socket queue, a flow over a limit, a dropped CNM) is counted every time but logged at
//! most once per [`LOG_EVERY`], and the line says how many were not logged since the last one.
//! One line per event would hand the log to whoever causes the events: the libccp benchmark of
//! issue 19 wrote 822,219 lines in 10 s through one such path.

use std::time::{Duration, Instant};

/// The shortest gap between two lines of one limiter.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Default, Clone, Copy)]
pub struct LogLimit {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimit {
    /// Counts one event; `Some(n)` when it may be logged now, `n` being how many events were not
    /// logged since the last line.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_once_per_period_and_counts_the_rest() {
        let mut t = LogLimit::default();
        let t0 = Instant::now();
        assert_eq!(t.allow(t0), Some(0), "the first event is logged at once");
        for _ in 0..1000 {
            assert_eq!(t.allow(t0 + Duration::from_secs(1)), None);
        }
        assert_eq!(t.allow(t0 + LOG_EVERY - Duration::from_nanos(1)), None);
        assert_eq!(t.allow(t0 + LOG_EVERY), Some(1001), "the line counts what was not logged");
        assert_eq!(t.allow(t0 + LOG_EVERY), None);
    }
}
