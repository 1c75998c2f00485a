//! Resuming a sweep: a run whose directory holds a `done` file equal to the one the run would
//! write is complete, is not run again, and its `sweep.csv` rows come back from its
//! `summary.json`.
//!
//! A run's directory is written in this order, by either executor: the simulator's files
//! (`summary.json`, the CSV files, plots), then `overrides.txt`, then `done`, after `done` from an
//! earlier attempt was removed before the run started. A run killed half-way therefore has no
//! `done` and runs again. `done` holds the run's overrides, whether plots were asked for, a hash
//! of every input file's contents (the scenario's and the files it references) and one of the
//! simulator binary that runs it, so a run whose scenario, CDF, Python algorithm or overrides
//! changed since runs again too, and so does every run once ccp-sim was rebuilt: a rebuilt engine
//! may give other results (a bug fix), and re-running is cheaper than trusting a stale row.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;
use sha1::{Digest, Sha1};

use super::inputs::Inputs;
use super::{Job, RunSummary};
use crate::stats::BucketSummary;

/// The marker's file name in a run's directory.
pub const DONE: &str = "done";

/// The identity of the simulator binary at `path`, for `done`: its SHA-1.
pub fn engine_id(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!("{:x}", Sha1::digest(&bytes)))
}

/// What `job`'s `done` file holds when `engine` (an [`engine_id`]) runs it; an error if an input
/// file cannot be read.
pub fn marker(inputs: &Inputs, job: &Job, plots: bool, engine: &str) -> Result<String, String> {
    let mut hash = Sha1::new();
    let mut part = |bytes: &[u8]| {
        // Each part preceded by its length, so that parts cannot run into each other.
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    part(inputs.text.as_bytes());
    for r in &inputs.references {
        let path = inputs.local_path(r);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        part(r.path.as_os_str().as_encoded_bytes());
        part(&bytes);
    }
    let mut s = String::from("ccp-sim sweep: this run is complete (this file is written after all the others)\n");
    let _ = writeln!(s, "inputs sha1 {:x}", hash.finalize());
    let _ = writeln!(s, "ccp-sim sha1 {engine}");
    let _ = writeln!(s, "plots {plots}");
    for o in &job.overrides {
        let _ = writeln!(s, "set {o}");
    }
    Ok(s)
}

/// The run's summary if its directory is complete for `marker`.
pub fn completed(job: &Job, marker: &str) -> Option<RunSummary> {
    let done = std::fs::read_to_string(job.dir.join(DONE)).ok()?;
    if done != marker {
        return None;
    }
    summary_from_json(&std::fs::read_to_string(job.dir.join("summary.json")).ok()?).ok()
}

/// Removes `done` before the run is (re)written.
pub fn unmark(job: &Job) -> Result<(), String> {
    match std::fs::remove_file(job.dir.join(DONE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("{}: {e}", job.dir.join(DONE).display())),
        _ => Ok(()),
    }
}

/// Writes `overrides.txt`, then `done` (when the inputs could be hashed), once every other file of
/// the run is in its directory.
pub fn finish(scenario: &Path, job: &Job, marker: Option<&str>) -> Result<(), String> {
    let dir = &job.dir;
    let mut cmd = format!("# ccp-sim run {} --out {}", scenario.display(), dir.display());
    for o in &job.overrides {
        let _ = write!(cmd, " --set '{o}'");
    }
    let text = format!("{cmd}\n{}\n", job.overrides.join("\n"));
    std::fs::write(dir.join("overrides.txt"), text).map_err(|e| format!("{}: {e}", dir.display()))?;
    if let Some(m) = marker {
        std::fs::write(dir.join(DONE), m).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}

/// What `sweep.csv` needs from a run, read back from its `summary.json` (serde_json writes and
/// reads f64 exactly, so the rows are those of the run itself).
pub fn summary_from_json(text: &str) -> Result<RunSummary, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("summary.json: {e}"))?;
    let counters = v.get("counters").ok_or("summary.json: no `counters`")?;
    let mut buckets = Vec::new();
    for b in v.get("buckets").and_then(Value::as_array).ok_or("summary.json: no `buckets`")? {
        buckets.push(BucketSummary {
            class: b.get("class").and_then(Value::as_str).ok_or("summary.json: a bucket without `class`")?.to_string(),
            lo_bytes: int(b, "lo_bytes")?,
            hi_bytes: match b.get("hi_bytes") {
                Some(Value::Null) => None,
                _ => Some(int(b, "hi_bytes")?),
            },
            flows: int(b, "flows")? as usize,
            completed: int(b, "completed")? as usize,
            fct_mean_us: num(b, "fct_mean_us")?,
            fct_p50_us: num(b, "fct_p50_us")?,
            fct_p95_us: num(b, "fct_p95_us")?,
            fct_p99_us: num(b, "fct_p99_us")?,
            slowdown_mean: num(b, "slowdown_mean")?,
            slowdown_p50: num(b, "slowdown_p50")?,
            slowdown_p95: num(b, "slowdown_p95")?,
            slowdown_p99: num(b, "slowdown_p99")?,
        });
    }
    Ok(RunSummary {
        wall_s: num(&v, "wall_s")?,
        events: int(&v, "events")?,
        events_per_s: num(&v, "events_per_s")?,
        flows_total: int(&v, "flows_total")? as usize,
        flows_completed: int(&v, "flows_completed")? as usize,
        // Random loss (`switch.loss_pct`) is written only where it dropped something.
        drops: int(counters, "dropped_buffer")?
            + int(counters, "dropped_aqm")?
            + counters.get("dropped_random").and_then(Value::as_u64).unwrap_or(0),
        timeouts: int(counters, "timeouts")?,
        buckets,
    })
}

fn int(v: &Value, key: &str) -> Result<u64, String> {
    v.get(key).and_then(Value::as_u64).ok_or_else(|| format!("summary.json: no integer `{key}`"))
}

/// A number; `null` is how serde_json writes a NaN or an infinity.
fn num(v: &Value, key: &str) -> Result<f64, String> {
    match v.get(key) {
        Some(Value::Null) => Ok(f64::NAN),
        x => x.and_then(Value::as_f64).ok_or_else(|| format!("summary.json: no number `{key}`")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::sweep::inputs::Reference;

    #[test]
    fn done_follows_inputs_overrides_and_plots() {
        let dir = std::env::temp_dir().join(format!("ccp-sim-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("run")).unwrap();
        std::fs::write(dir.join("w.cdf"), "1 0\n2 100\n").unwrap();
        let inputs = Inputs {
            text: "duration_ms = 1\n".into(),
            base: dir.clone(),
            references: vec![Reference { key: "workload.random.cdf".into(), path: "w.cdf".into() }],
        };
        let job = Job { variant: "v".into(), load_pct: 50.0, overrides: vec!["seed=2".into()], dir: dir.join("run") };
        let m = marker(&inputs, &job, false, "e1").unwrap();
        assert!(m.ends_with("ccp-sim sha1 e1\nplots false\nset seed=2\n"), "{m}");
        assert_ne!(m, marker(&inputs, &job, true, "e1").unwrap());
        assert_ne!(m, marker(&inputs, &job, false, "e2").unwrap(), "another simulator binary");
        let other = Job { overrides: vec!["seed=3".into()], ..job.clone() };
        assert_ne!(m, marker(&inputs, &other, false, "e1").unwrap());
        std::fs::write(dir.join("w.cdf"), "1 0\n3 100\n").unwrap();
        assert_ne!(m, marker(&inputs, &job, false, "e1").unwrap(), "a changed CDF");
        let m = marker(&inputs, &job, false, "e1").unwrap();

        // Not complete without `done`, with another `done`, or without a readable summary.
        assert!(completed(&job, &m).is_none());
        std::fs::write(job.dir.join("summary.json"), SUMMARY).unwrap();
        finish(Path::new("s.toml"), &job, Some(&m)).unwrap();
        let back = completed(&job, &m).expect("complete");
        assert_eq!((back.events, back.drops, back.timeouts, back.flows_total), (1234, 5, 2, 9));
        assert_eq!(back.buckets.len(), 2);
        assert_eq!(back.buckets[1].hi_bytes, None);
        assert!(back.buckets[0].slowdown_p99.is_nan(), "null is NaN");
        assert!(completed(&job, &m.replace("seed=2", "seed=4")).is_none());
        std::fs::write(job.dir.join("summary.json"), "{").unwrap();
        assert!(completed(&job, &m).is_none());
        assert_eq!(
            std::fs::read_to_string(job.dir.join("overrides.txt")).unwrap(),
            format!("# ccp-sim run s.toml --out {} --set 'seed=2'\nseed=2\n", job.dir.display())
        );
        unmark(&job).unwrap();
        assert!(!job.dir.join(DONE).exists());
        unmark(&job).unwrap();
        let _ = std::fs::remove_dir_all(PathBuf::from(&dir));
    }

    const SUMMARY: &str = r#"{"wall_s": 0.5, "events": 1234, "events_per_s": 2468.0, "flows_total": 9,
        "flows_completed": 8, "counters": {"dropped_buffer": 3, "dropped_aqm": 2, "timeouts": 2},
        "buckets": [
          {"class": "all", "lo_bytes": 0, "hi_bytes": 5000, "flows": 4, "completed": 4, "fct_mean_us": 1.0,
           "fct_p50_us": 1.0, "fct_p95_us": 1.0, "fct_p99_us": 1.0, "slowdown_mean": 1.0, "slowdown_p50": 1.0,
           "slowdown_p95": 1.0, "slowdown_p99": null},
          {"class": "all", "lo_bytes": 5000, "hi_bytes": null, "flows": 5, "completed": 4, "fct_mean_us": 1.0,
           "fct_p50_us": 1.0, "fct_p95_us": 1.0, "fct_p99_us": 1.0, "slowdown_mean": 1.0, "slowdown_p50": 1.0,
           "slowdown_p95": 1.0, "slowdown_p99": 2.5}]}"#;
}
