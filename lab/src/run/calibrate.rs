//! The emulator's own ceiling on a link, measured before the link's first run (`--calibrate`,
//! and `--report`): a fixed-rate pipe at the link's peak — the most the link offers in any
//! sample interval of its trace — with the experiment's RTT and buffer, filled for
//! [`CALIBRATION_S`] by one UDP flow at [`OVERLOAD`] times that rate. What the pipe delivers, how
//! late the emulator was and how many packets it failed to write say whether the emulator (with
//! the lab's sender) can carry the link at all: no run on the link can be better than that.
//!
//! Written to `calibration/<link>/run.json` (a run record: `link_metrics` holds the pipe's rate
//! as `capacity_mbps` and what it delivered), apart from the experiment's runs and summaries.

use ccp_qdisc::NANOS_PER_MS;
use ccp_router::LinkShape;

use super::execute::{execute, RunContext};
use super::RunOptions;
use crate::config::{CrossSpec, Loaded, Scenario, SchemeSpec};
use crate::error::{Error, Result};
use crate::link::Link;
use crate::output::RunRecord;
use crate::scheme::Scheme;

/// How long a calibration runs, s.
pub const CALIBRATION_S: f64 = 5.0;
/// The UDP flow's rate over the pipe's: enough to keep its queue from ever running dry.
pub const OVERLOAD: f64 = 1.05;
/// At most this much of a trace is searched for its peak, s.
const PEAK_SEARCH_S: f64 = 600.0;
const MTU_BYTES: u32 = 1500;

/// The link's peak rate over windows of `bin_ms` (its rate when fixed), bit/s.
pub fn peak_rate_bps(link: &Link, bin_ms: u64) -> f64 {
    match &link.shape {
        LinkShape::Fixed { bits_per_sec } => *bits_per_sec,
        LinkShape::Unlimited => link.mean_rate_bps,
        LinkShape::Trace(_) => {
            let bin_ns = bin_ms.max(1) * NANOS_PER_MS;
            let span_ns = (link.period_s.unwrap_or(PEAK_SEARCH_S).min(PEAK_SEARCH_S) * 1e9) as u64;
            let at = |t: u64| link.shape.capacity_bytes(t).unwrap_or(0.0);
            let mut peak = 0.0f64;
            let mut before = at(0);
            let mut t = bin_ns;
            while t <= span_ns.max(bin_ns) {
                let now = at(t);
                peak = peak.max(now - before);
                before = now;
                t += bin_ns;
            }
            (peak * 8.0 / (bin_ns as f64 / 1e9)).max(link.mean_rate_bps)
        }
    }
}

/// Calibrates the emulator for `link`; the record says what the pipe did (a failure is in the
/// record; only an interruption is an error).
pub fn calibrate(l: &Loaded, o: &RunOptions, link: &Link) -> Result<RunRecord> {
    let peak_bps = peak_rate_bps(link, l.experiment.sample_interval_ms);
    let pipe = Link {
        name: link.name.clone(),
        shape: LinkShape::Fixed { bits_per_sec: peak_bps },
        source: format!(
            "fixed {:.3} Mbit/s: the peak of {} over {} ms",
            peak_bps / 1e6,
            link.name,
            l.experiment.sample_interval_ms
        ),
        mean_rate_bps: peak_bps,
        period_s: None,
        rtt_ms: link.rtt_ms,
        buffer_bdp: link.buffer_bdp,
        // The emulator's own error, not the link's losses.
        loss: None,
    };
    let scenario = Scenario {
        name: "calibration".into(),
        flows: Some(Vec::new()),
        cross: vec![CrossSpec::Cbr {
            rate_mbps: Some(peak_bps * OVERLOAD / 1e6),
            share: None,
            packet_bytes: MTU_BYTES,
            on_ms: None,
            off_ms: None,
            start_s: 0.0,
            stop_s: None,
        }],
    };
    let spec: SchemeSpec = toml::from_str("name = \"emulator\"\ncc = \"kernel:cubic\"")
        .map_err(|e| Error::Run(format!("the calibration's scheme: {e}")))?;
    let scheme = Scheme::from_spec(&spec).map_err(Error::Run)?;
    let options = RunOptions { duration_s: Some(CALIBRATION_S), quick: false, full_trace: false, no_plots: true, ..o.clone() };
    let rel_dir = format!("calibration/{}", link.name);
    let ctx = RunContext {
        loaded: l,
        options: &options,
        link: &pipe,
        scenario: &scenario,
        scheme: &scheme,
        repetition: 0,
        dir: o.out.join(&rel_dir),
        rel_dir,
        reproducible: false,
    };
    execute(&ctx, &|_| {})
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn the_peak_of_a_trace_is_its_busiest_interval() {
        // 1 packet per ms for 1 s, then 4 per ms for 100 ms: 12 and 48 Mbit/s.
        let mut text = String::new();
        for t in 1..=1000 {
            text += &format!("{t}\n");
        }
        for t in 1001..=1100 {
            text += &format!("{t}\n{t}\n{t}\n{t}\n");
        }
        let trace = ccp_router::Trace::parse(std::path::Path::new("t"), &text).unwrap();
        let link = Link {
            name: "t".into(),
            mean_rate_bps: trace.mean_rate_bps(),
            period_s: Some(1.1),
            rtt_ms: None,
            buffer_bdp: None,
            loss: None,
            source: String::new(),
            shape: LinkShape::Trace(Arc::new(trace)),
        };
        let peak = peak_rate_bps(&link, 100);
        // The 100 ms bins are aligned to the trace's start: the busiest holds 397 of the 400
        // opportunities of the 4-per-ms stretch (47.64 Mbit/s); the mean is 14.5 Mbit/s.
        assert!((peak - 48e6).abs() < 0.01 * 48e6, "{peak}");
        let fixed = Link { shape: LinkShape::Fixed { bits_per_sec: 24e6 }, ..link };
        assert_eq!(peak_rate_bps(&fixed, 100), 24e6);
    }
}
