//! Rate limiting for messages that can repeat on every ACK.
//!
//! libccp warns "Datapath program is null" on each invoke until the agent installs a program,
//! and a buggy datapath program fails on every run: each distinct message is let through the
//! 1st, 10th, 100th, … time it occurs, with its count. Where it goes (stderr, a log) is the
//! host's business.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Throttle {
    seen: HashMap<String, u64>,
}

/// Distinct messages remembered at most: messages carrying numbers (libccp's "ccp fallback (N
/// since last msg)") are each new, and must not grow the table for as long as the process runs.
const MAX_DISTINCT: usize = 1024;

impl Throttle {
    /// Counts one occurrence of `msg`; `Some(count)` when it should be logged.
    pub fn hit(&mut self, msg: &str) -> Option<u64> {
        if self.seen.len() >= MAX_DISTINCT && !self.seen.contains_key(msg) {
            self.seen.clear();
        }
        let count = match self.seen.get_mut(msg) {
            Some(count) => {
                *count += 1;
                *count
            }
            None => {
                self.seen.insert(msg.to_string(), 1);
                1
            }
        };
        is_power_of_ten(count).then_some(count)
    }
}

fn is_power_of_ten(n: u64) -> bool {
    let mut power = 1u64;
    while power < n {
        power = power.saturating_mul(10);
    }
    power == n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lets_through_powers_of_ten_per_message() {
        let mut t = Throttle::default();
        let passed: Vec<u64> = (0..1000).filter_map(|_| t.hit("a")).collect();
        assert_eq!(passed, vec![1, 10, 100, 1000]);
        assert_eq!(t.hit("b"), Some(1), "each message has its own count");
    }

    #[test]
    fn distinct_messages_do_not_grow_it_without_bound() {
        let mut t = Throttle::default();
        for i in 0..10 * MAX_DISTINCT {
            assert_eq!(t.hit(&format!("ccp fallback ({i} since last msg)")), Some(1));
        }
        assert!(t.seen.len() <= MAX_DISTINCT);
    }
}
