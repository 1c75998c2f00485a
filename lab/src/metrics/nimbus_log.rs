//! The Nimbus authors' implementation (`ccp_nimbus`, a portus algorithm run by a `portus:nimbus`
//! scheme) does not write the agent's per-flow trace; its mode over time is recovered from its
//! log and written as one, so that the same classification ([`super::classify`]) scores it.
//!
//! The source of truth is its `switched mode` line (debug level, target `ccp_nimbus`):
//! `switch_to_delay` and `switch_to_xtcp` log it (with the flow's `ID`, `from` and `to`) right
//! before they assign `flow_mode`, and only when they do switch (every early return — switching
//! off, already in that mode, within 5 s of the last switch — comes before the line). `flow_mode`
//! is what picks the controller of the next report: `update_rate_delay` (the delay-mode rate) or
//! `update_rate_loss` (the competitive MulTCP/Cubic window). A flow's mode before its first
//! switch is the configured `flow_mode` of its `[nimbus] starting` line (default XTCP). Its
//! per-report `[nimbus] got ack` line (debug) carries the commanded rate but not the mode: it
//! adds a record (the mode then in force, the rate) so every flow has one from its first report
//! on. The master/slave role never changes in this code (`switching_master` is never set), so
//! the mode is the whole classification.
//!
//! Times: the line's RFC 3339 timestamp (tracing's default, UTC, µs), moved to CLOCK_MONOTONIC
//! by the wall-minus-monotonic offset sampled when the process started. Colour escapes (older
//! tracing-subscribers colour whatever the output) are stripped first.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The agent trace's mode codes, as ccp-agent's Nimbus reports them.
const COMPETITIVE: f64 = 0.0;
const DELAY: f64 = 1.0;

/// What the log showed, as ccp-agent trace records (JSON Lines, `t_us` CLOCK_MONOTONIC µs), and
/// the number of lines that named Nimbus's events but could not be read.
#[derive(Debug, Default, PartialEq)]
pub struct NimbusTrace {
    pub jsonl: String,
    pub records: usize,
    pub switches: usize,
    pub unreadable: usize,
}

/// The mode code of a `FlowMode` as Nimbus logs it (`XTCP`, `Delay`, `"DELAY"`, `"XTCP"`).
fn mode_code(v: &str) -> Option<f64> {
    match v.trim_matches('"').to_ascii_uppercase().as_str() {
        "XTCP" => Some(COMPETITIVE),
        "DELAY" => Some(DELAY),
        _ => None,
    }
}

/// The line without ANSI escape sequences (CSI: ESC '[' parameters, a final letter).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// A `key=value` field of a tracing line (value up to the next space, quotes kept).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|tok| tok.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The line's timestamp (its first word), ns since the Unix epoch.
fn wall_ns(line: &str) -> Option<u64> {
    let stamp = line.split_whitespace().next()?;
    let t = humantime::parse_rfc3339_weak(stamp).ok()?;
    u64::try_from(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos()).ok()
}

/// Reads the mode of every flow over time from a `ccp_nimbus` log. `wall_minus_mono_ns` is
/// CLOCK_REALTIME − CLOCK_MONOTONIC when the process ran.
pub fn nimbus_trace(log: &str, wall_minus_mono_ns: i128) -> NimbusTrace {
    let mut out = NimbusTrace::default();
    let mut initial = COMPETITIVE;
    let mut mode: BTreeMap<String, f64> = BTreeMap::new();
    for raw in log.lines() {
        let is_event = ["[nimbus] starting", "switched mode", "[nimbus] got ack"].iter().any(|m| raw.contains(m));
        if !is_event {
            continue;
        }
        let line = strip_ansi(raw);
        if line.contains("[nimbus] starting") {
            if let Some(m) = field(&line, "flow_mode").and_then(mode_code) {
                initial = m;
            }
            continue;
        }
        let t_us = wall_ns(&line).and_then(|w| u64::try_from((i128::from(w) - wall_minus_mono_ns) / 1000).ok());
        let (Some(t_us), Some(id)) = (t_us, field(&line, "ID")) else {
            out.unreadable += 1;
            continue;
        };
        let rate = if line.contains("switched mode") {
            let Some(to) = field(&line, "to").and_then(mode_code) else {
                out.unreadable += 1;
                continue;
            };
            mode.insert(id.to_string(), to);
            out.switches += 1;
            None
        } else {
            // Bits/s in the log.
            field(&line, "curr_rate").and_then(|r| r.parse::<f64>().ok()).map(|bps| bps / 8.0)
        };
        let m = *mode.entry(id.to_string()).or_insert(initial);
        let rate = rate.map_or_else(String::new, |r| format!(",\"pacing_rate_bytes_per_s\":{r}"));
        let _ = writeln!(
            out.jsonl,
            "{{\"t_us\":{t_us},\"flow\":\"{id}\",\"algorithm\":\"ccp_nimbus\"{rate},\"state\":{{\"mode\":{m}}}}}"
        );
        out.records += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::agent_trace::parse_agent_trace;

    /// Lines as ccp_nimbus 0.4.1 writes them with RUST_LOG=info,ccp_nimbus=debug (tracing's
    /// default format; one with colour escapes, as an older subscriber writes to a file).
    const LOG: &str = "\
2026-05-01T10:00:00.000000Z  INFO nimbus: starting CCP algorithm=\"NIMBUS\" ipc=\"unix\"
2026-05-01T10:00:01.000000Z  INFO ccp_nimbus: [nimbus] starting ipc=\"unix\" use_switching=true bw_est_mode=true use_ewma=false set_win_cap=false delay_threshold=1.25 init_delay_threshold=1.25 pulse_size=0.25 frequency=5.0 switching_thresh=0.4 uest=12000000.0 flow_mode=XTCP delay_mode=Nimbus loss_mode=MulTCP xtcp_flows=2
2026-05-01T10:00:01.005000Z DEBUG ccp_nimbus: [nimbus] got ack ID=3 base_rtt=0.05 curr_rate=16000000 curr_cwnd=14480 newly_acked=14480 rin=1 rout=1 ewma_rin=1 ewma_rout=1 max_ewma_rout=1 zt=0 rtt=0.05 uest=8 elapsed=0.0
2026-05-01T10:00:16.000000Z DEBUG ccp_nimbus: switched mode ID=3 elapsed=15.0s from=XTCP to=\"DELAY\" Delay_theshold=1.25
\u{1b}[2m2026-05-01T10:00:16.005000Z\u{1b}[0m \u{1b}[34mDEBUG\u{1b}[0m \u{1b}[2mccp_nimbus\u{1b}[0m\u{1b}[2m:\u{1b}[0m [nimbus] got ack \u{1b}[3mID\u{1b}[0m\u{1b}[2m=\u{1b}[0m3 \u{1b}[3mcurr_rate\u{1b}[0m\u{1b}[2m=\u{1b}[0m8000000
2026-05-01T10:00:22.000000Z DEBUG ccp_nimbus: switched mode ID=3 elapsed=21.0s from=Delay to=\"XTCP\"
2026-05-01T10:00:22.500000Z DEBUG ccp_nimbus: switched mode ID=3 elapsed=21.5s from=Delay
2026-05-01T10:00:23.000000Z DEBUG portus: some other line ID=9
";

    #[test]
    fn the_mode_follows_the_switch_lines_from_the_configured_start() {
        let wall_0 = 1_777_629_600_000_000_000i128; // 2026-05-01T10:00:00Z
        let mono_0 = 5_000_000_000i128;
        let t = nimbus_trace(LOG, wall_0 - mono_0);
        assert_eq!((t.records, t.switches, t.unreadable), (4, 2, 1), "{t:?}");
        let (recs, bad) = parse_agent_trace(&t.jsonl, mono_0 as u64, 0);
        assert_eq!(bad, 0);
        let seen: Vec<(u64, &str, f64)> = recs.iter().map(|r| (r.t_ns / 1_000_000, r.flow.as_str(), r.state["mode"])).collect();
        assert_eq!(seen, vec![(1005, "3", 0.0), (16_000, "3", 1.0), (16_005, "3", 1.0), (22_000, "3", 0.0)]);
        assert_eq!(recs[0].pacing_rate_bytes_per_s, Some(2e6));
        assert_eq!(recs[2].pacing_rate_bytes_per_s, Some(1e6), "read through the colour escapes");
        assert_eq!(recs[1].pacing_rate_bytes_per_s, None);
    }

    #[test]
    fn a_configured_delay_start_and_no_events() {
        let log = LOG.replace("flow_mode=XTCP", "flow_mode=Delay");
        let t = nimbus_trace(&log, 0);
        assert!(t.jsonl.lines().next().unwrap().contains("\"mode\":1"), "{}", t.jsonl);
        assert_eq!(nimbus_trace("nothing here\n", 0), NimbusTrace::default());
    }
}
