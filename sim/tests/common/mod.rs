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

/// A web-search-like CDF from 1 KB to 1 MB.
pub fn test_cdf() -> PathBuf {
    let path = std::env::temp_dir().join(format!("ccp-sim-test-{}.cdf", std::process::id()));
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
