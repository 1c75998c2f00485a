//! What the Python algorithm tests share: Python files in a temporary folder, controllers over
//! registry choices, and report sequences.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ccp_contract::{Capabilities, Choice, Controller, FlowStart, Limits, Outcome, Report, RttStats, Urgent};

pub const MSS: u32 = 1448;

pub const CAPS: Capabilities = Capabilities {
    max_cwnd_bytes: 1 << 30,
    max_rate_bytes_per_s: 1 << 40,
    can_clear_pacing: true,
    per_rtt_reports: false,
    cwnd_packets: None,
};

/// The shipped examples' folder.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

pub fn example(file: &str, class: &str) -> String {
    format!("py:{}:{class}", examples().join(file).display())
}

/// Writes `source` as `dir/file` and returns its `py:` name for `class`.
pub fn write_py(dir: &Path, file: &str, class: &str, source: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, source).unwrap();
    format!("py:{}:{class}", path.display())
}

/// A class whose `on_report` blocks inside C (`time.sleep`, an hour) on the report at 30 ms,
/// written in `dir`; its `py:` name. Steady at 50,000 bytes otherwise.
pub fn sleeper(dir: &Path) -> String {
    write_py(
        dir,
        "sleepy.py",
        "Sleepy",
        "import time
from ccp_agent import Action, Algorithm
class Sleepy(Algorithm):
    def on_report(self, report):
        if report.now_us == 30_000:
            time.sleep(3600)
        return Action(50_000.0)
",
    )
}

pub fn choose(name: &str) -> Choice {
    ccp_python::register();
    ccp_algorithms::registry::choose(name, toml::Table::new(), "test").unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn fallback() -> Choice {
    ccp_algorithms::registry::choose("reno", toml::Table::new(), "fallback").unwrap()
}

pub fn start(choice: Choice, start: &FlowStart) -> (Controller, Outcome) {
    Controller::start(choice, fallback(), CAPS, Limits::default(), start, 0)
}

pub fn report(now_us: u64, acked_bytes: u64, srtt_us: u64) -> Report {
    Report {
        now_us,
        interval_us: 10_000,
        mss_bytes: MSS,
        acked_bytes,
        acked_pkts: acked_bytes / u64::from(MSS),
        rtt: Some(RttStats { min_us: srtt_us, max_us: srtt_us, last_us: srtt_us, srtt_us, mean_us: srtt_us, samples: 4 }),
        inflight_bytes: 40 * u64::from(MSS),
        cwnd_bytes: 40 * u64::from(MSS),
        ..Report::default()
    }
}

/// Reports of a flow that slow-starts, builds a queue, loses, times out, sees ECN and goes
/// app-limited: every branch of Reno and Vegas, from a seeded generator.
pub fn synthetic_reports(n: usize, seed: u64) -> Vec<Report> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n);
    let mut now = 0u64;
    for _ in 0..n {
        let r = next();
        let srtt = 20_000 + (r % 30_000);
        now += 5_000 + (r >> 20) % 15_000;
        let mut rep = report(now, (r >> 8) % (60 * u64::from(MSS)), srtt);
        if let Some(rtt) = rep.rtt.as_mut() {
            rtt.min_us = 20_000 + (r >> 30) % 5_000;
            rtt.samples = ((r >> 40) % 6) as u32;
        }
        rep.inflight_bytes = (r >> 12) % (100 * u64::from(MSS));
        match (r >> 48) % 40 {
            0..=2 => {
                rep.lost_pkts = 1 + (r >> 56) % 3;
                rep.urgent = Some(Urgent::Loss);
            }
            3 => {
                rep.timeouts = 1;
                rep.urgent = Some(Urgent::Timeout);
            }
            4 => rep.ce_bytes = u64::from(MSS),
            5 => rep.app_limited = true,
            6 => rep.rtt = None,
            7 | 8 => rep.cwnd_limited = false,
            _ => {}
        }
        out.push(rep);
    }
    out
}

/// The report sequences of a recording (`--record-reports`), per flow, in order.
pub fn recording(path: &Path) -> Vec<(u64, Vec<Report>)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut flows: Vec<(u64, Vec<Report>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let r: ccp_contract::RecordedReport =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
        match flows.iter_mut().find(|(f, _)| *f == r.flow) {
            Some((_, v)) => v.push(r.report),
            None => flows.push((r.flow, vec![r.report])),
        }
    }
    flows
}
