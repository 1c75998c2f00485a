//! Rate-limited diagnostics on stderr.
//!
//! Some conditions repeat on every ACK (libccp warns "Datapath program is null" on each
//! invoke until the agent installs a program; a buggy program underflows on every run), so
//! each distinct message is printed the 1st, 10th, 100th, … time it occurs.

use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Diagnostics {
    seen: HashMap<String, u64>,
}

impl Diagnostics {
    pub fn report(&mut self, msg: &str) {
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
        if is_power_of_ten(count) {
            if count == 1 {
                eprintln!("ccp-test-datapath: {msg}");
            } else {
                eprintln!("ccp-test-datapath: {msg} (seen {count} times)");
            }
        }
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
    fn powers_of_ten() {
        let printed: Vec<u64> = (1..=1000).filter(|&n| is_power_of_ten(n)).collect();
        assert_eq!(printed, vec![1, 10, 100, 1000]);
    }
}
