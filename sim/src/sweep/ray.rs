//! The Ray executor (`ccp-sim sweep --executor ray`): each run is a Ray task, scheduled by Ray on
//! its cluster; ccp-sim plans the runs and builds `sweep.csv` exactly as with local threads.
//!
//! This module writes the plan (JSON: the runs' overrides and directories, the input files laid
//! out by [`Layout`], the binary the workers run) and the Python driver embedded in this binary
//! (`sim/ray/ccp_sim_ray.py`) into a temporary directory, runs the driver with the Python that has
//! Ray, and reads its line-per-event protocol. The driver puts the binary and the input files into
//! Ray's object store once, runs one task per run (`ccp-sim run` in a private directory on a
//! worker, retried once by Ray if it fails) and writes each run's output files into its directory
//! here; this module then writes `overrides.txt` and `done` ([`resume::finish`]) and reads the
//! run's `sweep.csv` rows back from its `summary.json`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::inputs::{Inputs, Layout};
use super::{resume, Outcome, Planned, Progress};

/// The Ray release ccp-sim's driver is tested with (`scripts/ray-venv.sh` installs it). A driver
/// and the cluster it joins must run the same Ray and the same Python minor version.
pub const RAY_VERSION: &str = "2.60.0";

/// The driver, written next to the plan for each sweep.
const DRIVER: &str = include_str!("../../ray/ccp_sim_ray.py");

/// Where and how the runs go to Ray.
#[derive(Debug, Clone)]
pub struct RayOptions {
    /// The Python interpreter with `ray` installed.
    pub python: PathBuf,
    /// Ray's address (`HOST:PORT`, `ray://HOST:PORT`); `None`: `ray.init()`'s default.
    pub address: Option<String>,
    /// The ccp-sim binary the workers run.
    pub worker_binary: PathBuf,
    /// The file the driver's and Ray's own messages go to.
    pub log: PathBuf,
}

#[derive(Serialize)]
struct DriverPlan<'a> {
    ray_version: &'a str,
    address: Option<&'a str>,
    binary: String,
    /// The scenario, relative to the input root.
    scenario: String,
    files: Vec<PlanFile>,
    dirs: Vec<String>,
    plots: bool,
    jobs: Vec<PlanJob<'a>>,
}

#[derive(Serialize)]
struct PlanFile {
    /// Relative to the input root on the worker.
    path: String,
    /// Where it is read here.
    source: String,
}

#[derive(Serialize)]
struct PlanJob<'a> {
    job: usize,
    dir: String,
    overrides: &'a [String],
}

/// The driver's standard output, one per line.
#[derive(Debug, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Event {
    Note { message: String },
    Connected { ray: String, address: String, nodes: u64, cpus: f64 },
    Submitted { runs: usize },
    Done { job: usize, node: String },
    Failed { job: usize, error: String, stderr: Option<String> },
    Fatal { kind: String, message: String },
}

/// Runs the jobs `todo` (indices into `p.jobs`) on Ray and returns their outcomes in `todo`'s
/// order. Nothing is submitted, and the error says why, if a run's scenario does not load, a file
/// it references is missing or would not resolve on a worker, or Ray cannot be started or reached.
pub fn run_jobs(
    p: &Planned,
    todo: &[usize],
    opts: &RayOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Vec<Outcome>, String> {
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    let mut runs: Vec<&Inputs> = Vec::new();
    let mut broken = Vec::new();
    for &i in todo {
        match &p.inputs[i] {
            Ok(inputs) => runs.push(inputs),
            Err(e) => broken.push(p.error(i, e)),
        }
    }
    if !broken.is_empty() {
        return Err(format!(
            "nothing was submitted to Ray: {} of {} runs do not load:\n  {}",
            broken.len(),
            todo.len(),
            broken.join("\n  ")
        ));
    }
    let layout = Layout::new(&cwd, &p.scenario, &runs).map_err(|e| format!("nothing was submitted to Ray: {e}"))?;
    let binary = cwd.join(&opts.worker_binary);
    if !binary.is_file() {
        return Err(format!("--worker-binary {}: not a file", binary.display()));
    }
    let text = |path: &Path| path.to_str().map(str::to_string).ok_or_else(|| format!("{}: not UTF-8", path.display()));
    let plan = DriverPlan {
        ray_version: RAY_VERSION,
        address: opts.address.as_deref(),
        binary: text(&binary)?,
        scenario: text(&layout.scenario)?,
        files: layout
            .files
            .iter()
            .map(|(rel, local)| Ok(PlanFile { path: text(rel)?, source: text(&cwd.join(local))? }))
            .collect::<Result<_, String>>()?,
        dirs: layout.dirs.iter().map(|d| text(d)).collect::<Result<_, _>>()?,
        plots: p.plots,
        jobs: todo
            .iter()
            .map(|&i| Ok(PlanJob { job: i, dir: text(&cwd.join(&p.jobs[i].dir))?, overrides: &p.jobs[i].overrides }))
            .collect::<Result<_, String>>()?,
    };
    for &i in todo {
        resume::unmark(&p.jobs[i])?;
    }

    let tmp = TempDir::new()?;
    let driver = tmp.0.join("ccp_sim_ray.py");
    let plan_path = tmp.0.join("plan.json");
    std::fs::write(&driver, DRIVER).map_err(|e| format!("{}: {e}", driver.display()))?;
    let json = serde_json::to_string(&plan).map_err(|e| e.to_string())?;
    std::fs::write(&plan_path, json).map_err(|e| format!("{}: {e}", plan_path.display()))?;
    let log = std::fs::File::create(&opts.log).map_err(|e| format!("{}: {e}", opts.log.display()))?;
    let mut child = Command::new(&opts.python)
        .arg(&driver)
        .arg(&plan_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| {
            format!(
                "--executor ray: cannot run {} (--python, or CCP_SIM_PYTHON): {e}. It must be a Python with Ray: {}",
                opts.python.display(),
                install_hint()
            )
        })?;

    let mut outcomes: Vec<Option<Outcome>> = vec![None; p.jobs.len()];
    let mut fatal = None;
    let stdout = child.stdout.take().ok_or("the Ray driver's standard output")?;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let event: Event = match serde_json::from_str(&line) {
            Ok(e) => e,
            Err(_) => continue,
        };
        match event {
            Event::Note { message } => progress(Progress::Note(&message)),
            Event::Connected { ray, address, nodes, cpus } => progress(Progress::Note(&format!(
                "connected to Ray {ray} at {address}: {nodes} node{}, {cpus} CPUs",
                if nodes == 1 { "" } else { "s" }
            ))),
            Event::Submitted { runs } => {
                progress(Progress::Note(&format!("{runs} run{} submitted, a Ray task each", if runs == 1 { "" } else { "s" })))
            }
            Event::Done { job, node } if job < outcomes.len() => {
                let outcome = finish(p, job).map_err(|e| p.error(job, &format!("{e} (ran on {node})")));
                progress(Progress::Finished { job, outcome: &outcome });
                outcomes[job] = Some(outcome);
            }
            Event::Failed { job, error, stderr } if job < outcomes.len() => {
                let outcome = Err(p.error(job, &run_error(&error, stderr.as_deref())));
                progress(Progress::Finished { job, outcome: &outcome });
                outcomes[job] = Some(outcome);
            }
            Event::Fatal { kind, message } => fatal = Some(fatal_error(opts, &kind, &message)),
            Event::Done { .. } | Event::Failed { .. } => {}
        }
    }
    let status = child.wait().map_err(|e| format!("the Ray driver: {e}"))?;
    if let Some(e) = fatal {
        let said = tail(&opts.log, 15);
        return Err(if said.is_empty() { e } else { format!("{e}\nRay's last messages, from {}:\n{said}", opts.log.display()) });
    }
    if !status.success() {
        let said = tail(&opts.log, 15);
        return Err(format!(
            "--executor ray: the driver ({} running ccp-sim's Ray driver) stopped with {status}{}",
            opts.python.display(),
            if said.is_empty() {
                ", saying nothing".to_string()
            } else {
                format!("; its last messages, from {}:\n{said}", opts.log.display())
            }
        ));
    }
    Ok(todo
        .iter()
        .map(|&i| outcomes[i].take().unwrap_or_else(|| Err(p.error(i, "not run: the Ray driver ended without reporting it"))))
        .collect())
}

/// A run whose files the driver wrote: its summary, then `overrides.txt` and `done`.
fn finish(p: &Planned, job: usize) -> Result<super::RunSummary, String> {
    let j = &p.jobs[job];
    let path = j.dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let summary = resume::summary_from_json(&text)?;
    resume::finish(&p.scenario, j, p.markers[job].as_deref())?;
    Ok(summary)
}

/// A failed run's error as the local executor has it: `ccp-sim run`'s last message (`ccp-sim: E`
/// on its standard error, E being the error a run on a thread returns); else the driver's.
fn run_error(driver: &str, stderr: Option<&str>) -> String {
    let Some(stderr) = stderr else { return driver.to_string() };
    let lines: Vec<&str> = stderr.lines().collect();
    match lines.iter().rposition(|l| l.starts_with("ccp-sim: ") && !l.starts_with("ccp-sim: warning: ")) {
        Some(k) => lines[k..].join("\n").trim_start_matches("ccp-sim: ").trim().to_string(),
        None => {
            let last: Vec<&str> = lines.iter().rev().filter(|l| !l.trim().is_empty()).take(3).copied().collect();
            let last: Vec<&str> = last.into_iter().rev().collect();
            format!("{driver}: {}", last.join(" "))
        }
    }
}

fn fatal_error(opts: &RayOptions, kind: &str, message: &str) -> String {
    let address = opts.address.as_deref().unwrap_or("(ray.init's default)");
    match kind {
        "import" => format!("--executor ray: {} cannot import ray ({message}). {}", opts.python.display(), install_hint()),
        "unreachable" => format!(
            "--executor ray: cannot reach Ray at {address}: {message} (is `ray start --head --port=PORT` running \
             there, and its port open from here?)"
        ),
        "connect" => format!("--executor ray: connecting to Ray at {address} failed: {message}"),
        _ => format!("--executor ray: {message}"),
    }
}

fn install_hint() -> String {
    format!(
        "scripts/ray-venv.sh in the ccp-agent source tree creates a virtual environment with Ray {RAY_VERSION} and \
         prints its python, to give as --python or CCP_SIM_PYTHON; or install Ray into a Python of yours: \
         `PYTHON -m pip install 'ray[client]=={RAY_VERSION}'`"
    )
}

/// The last `n` lines of a file, indented.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// A fresh directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let base = std::env::temp_dir();
        for attempt in 0u32..100 {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let dir = base.join(format!("ccp-sim-ray-{}-{nanos:09}-{attempt}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("{}: {e}", dir.display())),
            }
        }
        Err(format!("{}: no fresh directory name", base.display()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_runs_error_is_ccp_sims_message() {
        let stderr = "ccp-sim: warning: no TrueType font found\nccp-sim: output.monitor: no port named \"x\"\n";
        assert_eq!(run_error("ccp-sim run exited with status 1", Some(stderr)), "output.monitor: no port named \"x\"");
        assert_eq!(
            run_error("ccp-sim run exited with status 139", Some("thread 'main' panicked\nat x.rs:1\n")),
            "ccp-sim run exited with status 139: thread 'main' panicked at x.rs:1"
        );
        assert_eq!(run_error("the node died", None), "the node died");
    }

    #[test]
    fn the_driver_parses_and_the_venv_script_pins_the_same_ray() {
        let script = include_str!("../../../scripts/ray-venv.sh");
        assert!(script.contains(&format!("RAY_VERSION={RAY_VERSION}\n")), "scripts/ray-venv.sh pins another Ray");
        // The embedded driver is valid Python (when a python3 is here to say so).
        let dir = TempDir::new().unwrap();
        let path = dir.0.join("ccp_sim_ray.py");
        std::fs::write(&path, DRIVER).unwrap();
        match Command::new("python3").args(["-m", "py_compile"]).arg(&path).output() {
            Ok(o) => assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("SKIP py_compile of the driver: no python3 ({e})"),
        }
    }

    #[test]
    fn events_parse() {
        let e: Event = serde_json::from_str(r#"{"event": "failed", "job": 3, "error": "x", "stderr": null}"#).unwrap();
        assert!(matches!(e, Event::Failed { job: 3, stderr: None, .. }));
        let e: Event =
            serde_json::from_str(r#"{"event": "connected", "ray": "2.60.0", "address": "a", "nodes": 2, "cpus": 2.0}"#).unwrap();
        assert!(matches!(e, Event::Connected { nodes: 2, .. }));
    }
}
