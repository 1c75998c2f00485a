//! The agent's per-flow trace (`ccp-agent run --trace-flows`, JSON Lines) on the router's clock.

use std::collections::BTreeMap;

/// One line of the agent's per-flow trace (`ccp-agent run --trace-flows`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    /// ns since the emulator started.
    pub t_ns: u64,
    pub flow: String,
    pub cwnd_bytes: Option<f64>,
    pub pacing_rate_bytes_per_s: Option<f64>,
    pub state: BTreeMap<String, f64>,
    /// A report that carried a CNM: its quantized feedback and latencies (the agent's CNM
    /// listener: the congestion point's sample → the datagram read → the decision applied).
    pub qcn_fb: Option<u8>,
    pub cnm_sample_to_read_us: Option<u64>,
    pub cnm_read_to_action_us: Option<u64>,
}

/// Parses the agent's JSON Lines trace. `t_us` is taken as CLOCK_MONOTONIC µs (the router's
/// clock) when it is not before the emulator started; otherwise as µs since the agent started.
/// Lines that do not parse are counted, not fatal (the agent may be killed mid-line).
pub fn parse_agent_trace(text: &str, router_start_ns: u64, agent_start_ns: u64) -> (Vec<AgentRecord>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            bad += 1;
            continue;
        };
        let Some(t_us) = v.get("t_us").and_then(serde_json::Value::as_u64) else {
            bad += 1;
            continue;
        };
        let t = t_us.saturating_mul(1000);
        let t_ns = if t >= router_start_ns { t - router_start_ns } else { (t + agent_start_ns).saturating_sub(router_start_ns) };
        let flow = match v.get("flow") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "?".into(),
        };
        let state = v
            .get("state")
            .and_then(serde_json::Value::as_object)
            .map(|o| o.iter().filter_map(|(k, x)| x.as_f64().map(|f| (k.clone(), f))).collect())
            .unwrap_or_default();
        out.push(AgentRecord {
            t_ns,
            flow,
            cwnd_bytes: v.get("cwnd_bytes").and_then(serde_json::Value::as_f64),
            pacing_rate_bytes_per_s: v.get("pacing_rate_bytes_per_s").and_then(serde_json::Value::as_f64),
            state,
            qcn_fb: v.get("qcn_fb").and_then(serde_json::Value::as_u64).and_then(|q| u8::try_from(q).ok()),
            cnm_sample_to_read_us: v.get("cnm_sample_to_read_us").and_then(serde_json::Value::as_u64),
            cnm_read_to_action_us: v.get("cnm_read_to_action_us").and_then(serde_json::Value::as_u64),
        });
    }
    out.sort_by_key(|r| r.t_ns);
    (out, bad)
}
