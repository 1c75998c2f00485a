//! Helpers shared by the integration tests: scenarios from inline TOML, and a small flow-size CDF
//! written to a temporary file so the tests need nothing outside the repository.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ccp_sim::config::{load_str, Loaded};
use ccp_sim::{Results, Sim};

/// A scenario from TOML text (`{cdf}` is replaced by the path of a small test CDF).
pub fn scenario(text: &str) -> Loaded {
    let text = text.replace("{cdf}", &test_cdf().display().to_string());
    load_str(Path::new("test.toml"), &text, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// A web-search-like CDF from 1 KB to 1 MB, in cargo's scratch directory for integration tests
/// (under `target/`), so test runs leave nothing in the system's temporary directory.
pub fn test_cdf() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ccp-sim-test-{}.cdf", std::process::id()));
    if !path.exists() {
        std::fs::write(&path, "1000 0\n5000 30\n20000 60\n100000 85\n1000000 100\n").unwrap();
    }
    path
}

/// Runs to the end and returns the simulation (for state checks) and its results.
pub fn run(loaded: &Loaded) -> (Sim, Results) {
    let mut sim = Sim::new(loaded).unwrap();
    sim.run(|_, _| {});
    let r = sim.results("test", loaded.scenario.seed, &loaded.scenario.output.buckets_bytes, 1.0);
    (sim, r)
}

/// The sweep tests' scenario: 3 ms of random flows on a 6-host leaf-spine, from the CDF at `cdf`
/// (relative to the scenario file), named `tiny`.
pub fn tiny_sweep_scenario(cdf: &str) -> String {
    TINY_SWEEP_SCENARIO.replace("{cdf}", cdf)
}

const TINY_SWEEP_SCENARIO: &str = r#"
name = "tiny"
duration_ms = 3
seed = 3

[topology]
kind = "leaf_spine"
tors = 2
hosts_per_tor = 3
spines = 2
host_gbps = 10.0
core_gbps = 10.0
link_delay_us = 2.0

[switch]
buffer_bytes = 300_000

[switch.qdisc]
kind = "dctcp"
k_pkts = 20

[cc]
algorithm = "dctcp"

[transport]
rto_min_us = 500.0
rto_initial_us = 500.0

[workload.random]
cdf = "{cdf}"
load = 0.5
arrivals = "poisson"
stop_ms = 2.0

[output]
sample_interval_us = 50.0
buckets_bytes = [5_000, 100_000]
plots = false
"#;

/// A sweep file of `tiny.toml` in its directory: 2 variants × 2 loads.
pub const TINY_SWEEP: &str = r#"
[sweep]
scenario = "tiny.toml"
loads = [30, 60]
set = ["transport.init_cwnd_pkts=4"]

[[sweep.variant]]
name = "dctcp"

[[sweep.variant]]
name = "reno-droptail"
set = ['cc.algorithm="reno"', 'switch.qdisc={kind="droptail"}']
"#;

/// Flow sizes from 1 KB to 300 KB.
pub const TINY_CDF: &str = "1000 0\n5000 40\n20000 70\n100000 95\n300000 100\n";
