//! `ccp_agent.learned`: a learned policy (`onnx:` model + manifest) run outside the agent exactly
//! as the agent runs it, to check a trained model against its reference: one inference through
//! `ccp_learned`'s loaded plan, or recorded reports replayed through the policy's algorithm as the
//! registry builds it for a flow.
//!
//! The inference deadline is off in this module (`ccp_learned::set_deadline(false)`, set when it
//! loads): a check must not depend on how busy the host is.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ccp_contract::{Algorithm, FlowStart, Pacing, RecordedReport, Report};
use ccp_learned::model::Runner;
use ccp_learned::Policy;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Policies loaded by [`infer`], by model file and the hash of its and its manifest's bytes (a
/// changed file loads again).
type Loaded = Mutex<HashMap<(PathBuf, u64), Arc<Policy>>>;

fn loaded() -> &'static Loaded {
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    LOADED.get_or_init(Mutex::default)
}

fn policy(model_path: &str) -> Result<Arc<Policy>, String> {
    let path = Path::new(model_path).canonicalize().map_err(|e| format!("{model_path}: {e}"))?;
    let mut h = DefaultHasher::new();
    for file in [path.clone(), ccp_learned::manifest::manifest_path(&path)] {
        std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?.hash(&mut h);
    }
    let key = (path, h.finish());
    let mut cache = loaded().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = cache.get(&key) {
        return Ok(p.clone());
    }
    let p = Arc::new(ccp_learned::load_policy(&key.0)?);
    cache.insert(key, p.clone());
    Ok(p)
}

/// The model's output for one observation (`manifest.observation` values, in its layout), as
/// the agent computes it: `ccp_learned::load_policy`, then a `Runner` over its plan.
#[pyfunction]
#[pyo3(name = "_learned_infer")]
pub fn infer(py: Python<'_>, model_path: &str, observation: Vec<f32>) -> PyResult<f32> {
    py.detach(|| {
        let policy = policy(model_path)?;
        let observed = &policy.manifest.observation;
        if observation.len() != observed.len() {
            return Err(format!(
                "{model_path}: the observation has {} values; the manifest's is {} (history {} × {} features)",
                observation.len(),
                observed.len(),
                observed.history,
                observed.features.len()
            ));
        }
        Runner::new(&policy.plan, &observed.shape())
            .and_then(|mut r| r.run(&observation))
            .map_err(|e| format!("{model_path}: {e}"))
    })
    .map_err(PyValueError::new_err)
}

/// One line of a recording: a `RecordedReport` (`ccp-sim run --record-reports`, the agent's
/// recordings) or a bare `Report` (flow 0).
fn parse_line(n: usize, line: &str) -> Result<(u64, Report), String> {
    if let Ok(r) = serde_json::from_str::<RecordedReport>(line) {
        return Ok((r.flow, r.report));
    }
    serde_json::from_str::<Report>(line)
        .map(|r| (0, r))
        .map_err(|e| format!("line {n}: neither a recorded report nor a report: {e}"))
}

/// What the policy did with one report.
struct Step {
    flow: u64,
    cwnd_bytes: Option<f64>,
    pacing_bytes_per_s: Option<f64>,
    output: f64,
    error: Option<String>,
}

/// Replays `reports_jsonl` through the policy: per flow, an algorithm made by the registry's
/// factory for `onnx:MODEL` (what the agent runs), started from the flow's first report's MSS
/// and window, then given each of its reports in order.
fn replay_steps(model_path: &str, reports_jsonl: &str) -> Result<Vec<Step>, String> {
    let path = Path::new(model_path).canonicalize().map_err(|e| format!("{model_path}: {e}"))?;
    let name = format!("{}:{}", ccp_learned::SCHEME, path.display());
    let choice =
        ccp_algorithms::registry::choose(&name, toml::Table::new(), "ccp_agent.learned.replay").map_err(|e| e.to_string())?;
    let mut flows: HashMap<u64, Box<dyn Algorithm>> = HashMap::new();
    let mut steps = Vec::new();
    for (i, line) in reports_jsonl.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (flow, report) = parse_line(i + 1, line)?;
        let algorithm = flows.entry(flow).or_insert_with(|| {
            let mut a = choice.factory.create();
            // The first answer (the window the flow starts with) is not a policy output.
            let _ = a.try_init(&FlowStart::new(report.mss_bytes, report.cwnd_bytes));
            a
        });
        let result = algorithm.try_on_report(&report);
        let output = algorithm.state().iter().find(|v| v.name == "output").map_or(f64::NAN, |v| v.value);
        steps.push(match result {
            Ok(a) => Step {
                flow,
                cwnd_bytes: a.cwnd_bytes,
                pacing_bytes_per_s: match a.pacing {
                    Some(Pacing::BytesPerSec(r)) => Some(r),
                    _ => None,
                },
                output,
                error: None,
            },
            Err(e) => Step { flow, cwnd_bytes: None, pacing_bytes_per_s: None, output, error: Some(e.to_string()) },
        });
    }
    Ok(steps)
}

/// Replays recorded reports (JSON lines) through the policy; per report a dict of `flow`,
/// `cwnd_bytes`, `pacing_bytes_per_s` (`None` when unpaced), `output` (the model's) and `error`
/// (`None`, or why the call failed).
#[pyfunction]
#[pyo3(name = "_learned_replay")]
pub fn replay<'py>(py: Python<'py>, model_path: &str, reports_jsonl: &str) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let steps = py.detach(|| replay_steps(model_path, reports_jsonl)).map_err(PyValueError::new_err)?;
    steps
        .into_iter()
        .map(|s| {
            let d = PyDict::new(py);
            d.set_item("flow", s.flow)?;
            d.set_item("cwnd_bytes", s.cwnd_bytes)?;
            d.set_item("pacing_bytes_per_s", s.pacing_bytes_per_s)?;
            d.set_item("output", s.output)?;
            d.set_item("error", s.error)?;
            Ok(d)
        })
        .collect()
}
