//! Learned congestion control policies: a trained model in ONNX, named `onnx:path/model.onnx`
//! wherever an algorithm name goes (`run --algorithm`, configuration rules, `ctl swap`, ccp-sim
//! scenarios, ccp-lab schemes), with its manifest beside it (`path/model.toml`). docs/learned.md
//! is the user's guide.
//!
//! - [`manifest`]: what the policy observes, what its output means, its inference budget and the
//!   classic algorithm that takes a failing flow over; errors name the file and the field.
//! - [`features`]: the fixed list of per-report features, and the [`Observer`] that keeps a flow's
//!   last `history` reports' features normalised, in the model's input layout.
//! - [`action_map`]: the model's output made an `Action` (Aurora's multiplicative window rule, or
//!   a target rate).
//! - [`model`]: the ONNX model loaded and optimised once (tract), run per report.
//! - [`steering`]: the observer and the action map of one flow, the model left out: what the
//!   agent's algorithm and the Gymnasium environment's learner share.
//! - [`policy`]: the algorithm the controller drives: timed inference, faults as
//!   `CallError`s, the manifest's fallback through the factory.
//!
//! The observer and the action map are also what the `ccp_agent.env` Gymnasium environment
//! gives a policy in training, so a policy sees in the agent exactly what it was trained on.

pub mod action_map;
pub mod features;
pub mod manifest;
pub mod model;
pub mod policy;
pub mod steering;

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ccp_contract::{AlgorithmFactory, AlgorithmInfo, ParamError, Params};

pub use action_map::ActionMap;
pub use features::{Feature, Observer};
pub use manifest::Manifest;
pub use policy::{OnnxAlgorithm, OnnxFactory, Policy};
pub use steering::Steering;

/// The scheme prefix of learned policies' names.
pub const SCHEME: &str = "onnx";

/// Model versions one process loads at most (each lives as long as the process).
pub const MAX_VERSIONS: usize = 256;

/// A model whose inference takes more than this many times its budget when it loads is refused:
/// it could never answer in time, and every report would cost its caller the overrun.
pub const MAX_BUDGET_OVERRUN: f64 = 20.0;

/// Inferences timed when a model loads.
const LOAD_RUNS: usize = 15;

/// Makes `onnx:` names resolve in the algorithm registry of this process.
pub fn register() {
    ccp_algorithms::registry::register_scheme(SCHEME, resolve);
}

static DEADLINE_OFF: AtomicBool = AtomicBool::new(false);

/// Whether every later inference in this process is held to its manifest's budget (the
/// default). The simulator and the Gymnasium environment turn it off: their results must not
/// depend on how busy the host is.
pub fn set_deadline(enforced: bool) {
    DEADLINE_OFF.store(!enforced, Ordering::Relaxed);
}

pub fn deadline_enforced() -> bool {
    !DEADLINE_OFF.load(Ordering::Relaxed)
}

/// The CPU time this thread has used: what an inference's budget is counted in.
pub fn cpu_now() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec; CLOCK_THREAD_CPUTIME_ID exists on every Linux.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A check the model and manifest files pass before they are read (ccp-agent: owner and mode).
pub type FileCheck = fn(&Path) -> Result<(), String>;

static FILE_CHECK: OnceLock<FileCheck> = OnceLock::new();

pub fn set_file_check(check: FileCheck) {
    let _ = FILE_CHECK.set(check);
}

/// The model path of `onnx:PATH`.
pub fn parse(name: &str) -> Result<&str, String> {
    let path = name
        .strip_prefix(SCHEME)
        .and_then(|r| r.strip_prefix(':'))
        .ok_or_else(|| format!("{name:?} is not a learned policy's name: write onnx:path/to/model.onnx"))?;
    if !path.ends_with(".onnx") || path.len() == ".onnx".len() {
        return Err(format!("{name:?}: write onnx:path/to/model.onnx (its manifest is path/to/model.toml)"));
    }
    Ok(path)
}

struct Version {
    hash: u64,
    info: &'static AlgorithmInfo,
}

#[derive(Default)]
struct Loaded {
    newest: HashMap<PathBuf, Version>,
    policy_of: HashMap<&'static str, Arc<Policy>>,
    versions: usize,
}

fn loaded() -> &'static Mutex<Loaded> {
    static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
    LOADED.get_or_init(Mutex::default)
}

fn read_checked(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > limit {
        return Err(format!("{}: {} bytes; at most {limit}", path.display(), meta.len()));
    }
    if let Some(check) = FILE_CHECK.get() {
        check(path)?;
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Loads a policy from its model file and the manifest beside it, and times its inference.
pub fn load_policy(model_file: &Path) -> Result<Policy, String> {
    let manifest_file = manifest::manifest_path(model_file);
    let manifest = Manifest::load(&manifest_file)?;
    let shape = manifest.observation.shape();
    let plan = model::load(model_file, &shape)?;
    let mut runner = model::Runner::new(&plan, &shape).map_err(|e| format!("{}: {e}", model_file.display()))?;
    let zeros = vec![0.0f32; manifest.observation.len()];
    let mut costs = Vec::with_capacity(LOAD_RUNS);
    for _ in 0..LOAD_RUNS {
        let t0 = cpu_now();
        let out = runner.run(&zeros).map_err(|e| format!("{}: inference fails: {e}", model_file.display()))?;
        costs.push(cpu_now().saturating_sub(t0).as_secs_f64() * 1e6);
        if !out.is_finite() {
            return Err(format!("{}: the model answers {out} for an all-zero observation", model_file.display()));
        }
    }
    costs.sort_by(f64::total_cmp);
    let load_cost_us = costs[LOAD_RUNS / 2];
    if deadline_enforced() && load_cost_us > MAX_BUDGET_OVERRUN * manifest.budget_us as f64 {
        return Err(format!(
            "{}: one inference takes {load_cost_us:.0} µs here, more than {MAX_BUDGET_OVERRUN}× its budget of {} µs ({}: budget_us)",
            model_file.display(),
            manifest.budget_us,
            manifest_file.display()
        ));
    }
    Ok(Policy { manifest, plan, load_cost_us })
}

/// The registry's provider for `onnx:` names: the policy as its files hold it now (a changed
/// model or manifest loads as a new version for flows created from then on).
pub fn resolve(name: &str) -> Result<&'static AlgorithmInfo, String> {
    let path = parse(name)?;
    let path = Path::new(path).canonicalize().map_err(|e| format!("cannot open {path}: {e}"))?;
    let model_bytes = read_checked(&path, model::MAX_MODEL_BYTES)?;
    let manifest_bytes = read_checked(&manifest::manifest_path(&path), manifest::MAX_MANIFEST_BYTES)?;
    let mut h = DefaultHasher::new();
    model_bytes.hash(&mut h);
    manifest_bytes.hash(&mut h);
    let hash = h.finish();

    let mut l = loaded().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = l.newest.get(&path).filter(|v| v.hash == hash) {
        return Ok(v.info);
    }
    if l.versions >= MAX_VERSIONS {
        return Err(format!("{MAX_VERSIONS} policy versions are loaded in this process; restart it to load more"));
    }
    let policy = Arc::new(load_policy(&path)?);
    tracing::info!(model = %path.display(), cost_us = policy.load_cost_us, budget_us = policy.manifest.budget_us, "loaded a learned policy");
    l.versions += 1;
    let name: &'static str = match l.newest.get(&path) {
        Some(v) => v.info.name,
        None => leak(format!("{SCHEME}:{}", path.display())),
    };
    let m = &policy.manifest;
    let summary = if m.summary.is_empty() { format!("learned policy {}", path.display()) } else { m.summary.clone() };
    let reference = if m.reference.is_empty() { m.file.display().to_string() } else { m.reference.clone() };
    let info: &'static AlgorithmInfo =
        Box::leak(Box::new(AlgorithmInfo { name, summary: leak(summary), reference: leak(reference), params: &[], build }));
    l.policy_of.insert(name, policy);
    l.newest.insert(path, Version { hash, info });
    Ok(info)
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The descriptor's `build`: a factory for the newest version of the policy.
fn build(params: &Params) -> Result<Arc<dyn AlgorithmFactory>, ParamError> {
    let name = params.algorithm();
    let unavailable = |reason: String| ParamError::Unavailable { name: name.to_string(), reason };
    let policy = loaded().lock().unwrap_or_else(|e| e.into_inner()).policy_of.get(name).cloned();
    let policy = policy.ok_or_else(|| unavailable("not loaded".into()))?;
    let m = &policy.manifest;
    let fallback = ccp_algorithms::registry::choose(&m.fallback, m.fallback_params.clone(), "fallback (manifest)")
        .map_err(|e| unavailable(format!("{}: fallback: {e}", m.file.display())))?;
    Ok(Arc::new(OnnxFactory { name, policy, fallback }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_other_names_pass_through() {
        assert_eq!(parse("onnx:a/b.onnx"), Ok("a/b.onnx"));
        for bad in ["onnx:a/b.toml", "onnx:.onnx", "onnx:", "onnxa.onnx", "reno"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
