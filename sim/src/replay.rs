//! `ccp-sim replay`: one flow's recorded reports (`ccp-sim run --record-reports`, or the agent's
//! `ccp-agent run --record-reports`: the same lines) fed to an algorithm, and, per report, what it
//! decided and its state, one JSON line each.
//!
//! Open loop: the reports are what the recorded run produced under its own algorithm, so another
//! algorithm or other parameters answer the same reports (a what-if, not a re-run), while the
//! recorded algorithm with its parameters reproduces the run's decisions and lets one watch state
//! the outputs do not show (which of Annulus's loops binds, where a recovery cycle stands). The
//! flow starts as the simulator starts one: the first report's MSS and `init_cwnd_pkts` of it.
//! State values that are not finite (an ssthresh not set yet) print as `null`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use ccp_contract::{FlowStart, Pacing, RecordedReport};
use serde::Serialize;

/// What to replay and what to print.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The flow whose reports are fed (its index in the recording).
    pub flow: u64,
    /// A registry name (`dctcp`, `annulus`, `py:file.py:Class`, ...).
    pub algorithm: String,
    /// The algorithm's parameters, as `[cc] params` takes them.
    pub params: toml::Table,
    /// The initial window the flow starts with, packets (the simulator's `transport.init_cwnd_pkts`).
    pub init_cwnd_pkts: u32,
    /// Print every this many reports (1: all), and every report that carries network feedback.
    pub every: u64,
    /// Print nothing before this report time, µs (earlier reports are still fed).
    pub from_us: u64,
}

/// One printed line.
#[derive(Serialize)]
struct Line {
    now_us: u64,
    /// The report carried network feedback (a CNM, INT).
    feedback: bool,
    acked_bytes: u64,
    cwnd_limited: bool,
    /// The window the algorithm set, bytes; absent: unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    cwnd_bytes: Option<f64>,
    /// The pacing it set: a rate in bytes/s, or "off"; absent: unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pacing: Option<serde_json::Value>,
    state: BTreeMap<&'static str, f64>,
}

/// Replays `opts.flow`'s reports from `input` (named `source` in errors) and writes the lines to
/// `out`. Returns how many reports were fed. A line of another flow is skipped by its `"flow"`
/// prefix; a line of this flow that is not a recorded report is an error naming its line number.
pub fn replay(input: impl BufRead, source: &str, opts: &ReplayOptions, out: &mut impl Write) -> Result<u64, String> {
    let factory = ccp_algorithms::registry::configure(&opts.algorithm, &opts.params).map_err(|e| e.to_string())?;
    let mut alg = None;
    let mut fed = 0u64;
    let prefix = "{\"flow\":";
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("{source}:{}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix(prefix) {
            let id = rest.split(',').next().and_then(|n| n.trim().parse::<u64>().ok());
            if id.is_some_and(|id| id != opts.flow) {
                continue;
            }
        }
        let rec: RecordedReport =
            serde_json::from_str(&line).map_err(|e| format!("{source}:{}: not a recorded report: {e}", i + 1))?;
        if rec.flow != opts.flow {
            continue;
        }
        let r = rec.report;
        let alg = alg.get_or_insert_with(|| {
            let mut a = factory.create();
            let mss = r.mss_bytes.max(1);
            a.init(&FlowStart::new(mss, u64::from(mss) * u64::from(opts.init_cwnd_pkts)));
            a
        });
        let action = alg.on_report(&r);
        fed += 1;
        let feedback = r.feedback.is_some();
        if r.now_us < opts.from_us || !(feedback || (fed - 1).is_multiple_of(opts.every.max(1))) {
            continue;
        }
        let pacing = action.pacing.map(|p| match p {
            Pacing::Off => serde_json::Value::from("off"),
            Pacing::BytesPerSec(rate) => serde_json::Value::from(rate),
        });
        let state = alg.state().into_iter().map(|v| (v.name, v.value)).collect();
        let line = Line {
            now_us: r.now_us,
            feedback,
            acked_bytes: r.acked_bytes,
            cwnd_limited: r.cwnd_limited,
            cwnd_bytes: action.cwnd_bytes,
            pacing,
            state,
        };
        let written = serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::from).and_then(|()| out.write_all(b"\n"));
        match written {
            // The reader has seen enough (`| head`): stop quietly.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(fed),
            Err(e) => return Err(e.to_string()),
            Ok(()) => {}
        }
    }
    if fed == 0 {
        return Err(format!("{source}: no report of flow {}", opts.flow));
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.to_string()),
        _ => Ok(fed),
    }
}
