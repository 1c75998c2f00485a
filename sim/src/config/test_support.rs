//! Scenarios and helpers shared by the config's unit tests.

use std::path::Path;

use super::load::{load_str, ConfigError, Loaded};

/// A star of 4 hosts, DCTCP marking, two flows.
pub(super) const GOOD: &str = r#"
duration_ms = 10

[topology]
kind = "star"
hosts = 4
link_gbps = 10
link_delay_us = 1

[switch.qdisc]
kind = "dctcp"
k_pkts = 20

[[workload.flows]]
src = 0
dst = 3

[[workload.flows]]
src = 1
dst = 3
"#;

/// A dumbbell with per-sender delays, labels and a per-flow algorithm.
pub(super) const DUMBBELL: &str = r#"
duration_ms = 10

[topology]
kind = "dumbbell"
senders = 2
receivers = 1
host_gbps = 10
host_delay_us = 1
host_delays_us = [1.0, 500.0]
bottleneck_gbps = 1
bottleneck_delay_us = 5

[[workload.flows]]
src = 0
dst = 2
label = "dc"

[[workload.flows]]
src = 1
dst = 2
label = "wan"
cc = { algorithm = "dctcp", params = { g = 0.0625 } }
"#;

pub(super) fn load_text(text: &str) -> Result<Loaded, ConfigError> {
    load_str(Path::new("test.toml"), text, &[])
}

/// The 1-based line of the `nth` occurrence of `needle` in `text`.
pub(super) fn line_of(text: &str, needle: &str, nth: usize) -> usize {
    let at = text.match_indices(needle).nth(nth).unwrap().0;
    text[..at].matches('\n').count() + 1
}
