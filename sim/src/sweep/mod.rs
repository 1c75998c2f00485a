//! Sweeps: one scenario run over a list of loads × named variants, in parallel (`ccp-sim sweep`).
//!
//! A run is the scenario with, in order, the sweep's common overrides, its variant's overrides,
//! the command line's `--set`s, and `workload.random.load = load / 100`: exactly what
//! `ccp-sim run SCENARIO --set ...` does with the same overrides (each run directory's
//! `overrides.txt` lists them), written by the same code ([`crate::run_loaded_with`],
//! [`crate::output::write_data`]) to `OUT/<variant>/load<L>/`. `OUT/sweep.csv` has one row per
//! (variant, load, class, size bucket) with the run's wall time and events/s; a run that fails
//! gets one row with its error and does not stop the others.
//!
//! Runs execute on this machine's threads ([`run_jobs`]) or as Ray tasks ([`ray`]); a run whose
//! directory is already complete is skipped ([`resume`]).
//!
//! Variants come from a sweep file (TOML) or the command line:
//!
//! ```toml
//! [sweep]
//! scenario = "leafspine-fb-dctcp.toml"   # relative to the sweep file
//! loads = [50, 60, 70, 80, 90, 95]       # percent; the default for every variant
//! set = ["duration_ms=8"]                # overrides for every run
//!
//! [[sweep.variant]]
//! name = "bfc"
//! set = ["switch.queues_per_port=32", "cc.algorithm=\"constant\""]
//! loads = [55, 80]                       # optional: this variant's loads
//! ```
//!
//! or `--variant 'NAME=KEY=VALUE;KEY=VALUE'` (repeatable; `;` separates overrides, so a TOML value
//! may not contain one).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Deserialize;

use crate::stats::BucketSummary;
use crate::{config, output};

pub mod inputs;
pub mod ray;
pub mod resume;

/// A named set of overrides, optionally with its own loads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    #[serde(default)]
    pub set: Vec<String>,
    /// Percent; `None`: the sweep's loads.
    #[serde(default)]
    pub loads: Option<Vec<f64>>,
}

/// The `[sweep]` table of a sweep file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// The scenario file, relative to the sweep file.
    pub scenario: PathBuf,
    #[serde(default)]
    pub loads: Vec<f64>,
    #[serde(default)]
    pub set: Vec<String>,
    #[serde(default, rename = "variant")]
    pub variants: Vec<Variant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    sweep: SweepSpec,
}

/// Everything a sweep runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub scenario: PathBuf,
    /// Overrides for every run before the variant's (the sweep file's `set`).
    pub common: Vec<String>,
    /// Overrides for every run after the variant's (the command line's `--set`).
    pub last: Vec<String>,
    pub variants: Vec<Variant>,
    /// Loads of variants without their own, percent.
    pub loads: Vec<f64>,
}

/// One run of a sweep.
#[derive(Debug, Clone)]
pub struct Job {
    pub variant: String,
    pub load_pct: f64,
    /// Every override, in order, the load last.
    pub overrides: Vec<String>,
    pub dir: PathBuf,
}

/// What a finished run contributes to `sweep.csv`.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub wall_s: f64,
    pub events: u64,
    pub events_per_s: f64,
    pub flows_total: usize,
    pub flows_completed: usize,
    pub drops: u64,
    pub timeouts: u64,
    pub buckets: Vec<BucketSummary>,
}

/// A run's outcome; the error names the variant and load.
pub type Outcome = Result<RunSummary, String>;

/// A sweep's runs with what each reads and what its `done` file will hold.
#[derive(Debug)]
pub struct Planned {
    pub scenario: PathBuf,
    pub jobs: Vec<Job>,
    /// Per job: its input files, or why its scenario does not load (the run's error).
    pub inputs: Vec<Result<inputs::Inputs, String>>,
    /// Per job: its `done` file's text; `None` if an input could not be read (the run is then
    /// never taken as complete).
    pub markers: Vec<Option<String>>,
    /// Draw each run's plots.
    pub plots: bool,
}

impl Planned {
    /// `engine` identifies the simulator binary that will run the jobs ([`resume::engine_id`]).
    pub fn new(scenario: PathBuf, jobs: Vec<Job>, plots: bool, engine: &str) -> Planned {
        let inputs: Vec<_> = jobs.iter().map(|j| inputs::Inputs::of_run(&scenario, &j.overrides)).collect();
        let markers = jobs
            .iter()
            .zip(&inputs)
            .map(|(j, i)| i.as_ref().ok().and_then(|i| resume::marker(i, j, plots, engine).ok()))
            .collect();
        Planned { scenario, jobs, inputs, markers, plots }
    }

    /// Per job: its summary if its directory is already complete.
    pub fn completed(&self) -> Vec<Option<RunSummary>> {
        self.jobs.iter().zip(&self.markers).map(|(j, m)| m.as_deref().and_then(|m| resume::completed(j, m))).collect()
    }

    /// `job`'s error as its `sweep.csv` row and the command's messages give it.
    pub fn error(&self, job: usize, e: &str) -> String {
        let j = &self.jobs[job];
        format!("variant `{}`, load {} %: {e}", j.variant, fmt_load(j.load_pct))
    }
}

/// Progress of a sweep, reported from the worker threads.
pub enum Progress<'a> {
    /// Run `i` started; its simulated length in µs.
    Started {
        job: usize,
        sim_us: u64,
    },
    /// Run `i` simulated `delta_us` more.
    Advanced {
        job: usize,
        delta_us: u64,
    },
    Finished {
        job: usize,
        outcome: &'a Outcome,
    },
    /// What an executor has to say (where Ray runs the sweep).
    Note(&'a str),
}

/// `50,55,60` (percent of the reference capacity, `workload.random.load` × 100) → loads.
pub fn parse_loads(s: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let t = part.trim().trim_end_matches('%');
        if t.is_empty() {
            return Err(format!("--loads `{s}`: empty entry (expected percentages like 50,55,60)"));
        }
        let v: f64 = t
            .parse()
            .map_err(|_| format!("--loads `{s}`: `{}` is not a number (expected percentages like 50,55,60)", part.trim()))?;
        out.push(v);
    }
    check_loads("--loads", &out)?;
    Ok(out)
}

fn check_loads(what: &str, loads: &[f64]) -> Result<(), String> {
    for (i, &v) in loads.iter().enumerate() {
        if !(v > 0.0 && v <= 100.0) {
            return Err(format!("{what}: load {v} is not a percentage in (0, 100]"));
        }
        if loads[..i].contains(&v) {
            return Err(format!("{what}: load {v} is listed twice"));
        }
    }
    Ok(())
}

/// `NAME=KEY=VALUE;KEY=VALUE` → a variant (no overrides: `NAME=`).
pub fn parse_variant(s: &str) -> Result<Variant, String> {
    let (name, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("--variant `{s}`: expected NAME='KEY=VALUE;KEY=VALUE' (e.g. bfc='switch.queues_per_port=32')"))?;
    let name = name.trim();
    check_name(name).map_err(|e| format!("--variant `{s}`: {e}"))?;
    let set: Vec<String> = rest.split(';').map(str::trim).filter(|o| !o.is_empty()).map(str::to_string).collect();
    let v = Variant { name: name.to_string(), set, loads: None };
    check_overrides(&v).map_err(|e| format!("--variant `{s}`: {e}"))?;
    Ok(v)
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
        || name.starts_with('.')
    {
        return Err(format!("variant name `{name}` must be 1-64 letters, digits, `-`, `_`, `.`, `+` (it names a directory)"));
    }
    Ok(())
}

fn check_overrides(v: &Variant) -> Result<(), String> {
    for o in &v.set {
        match o.split_once('=') {
            Some((k, _)) if !k.trim().is_empty() => {}
            _ => return Err(format!("variant `{}`: override `{o}` is not KEY=VALUE", v.name)),
        }
    }
    Ok(())
}

/// Reads `path` as a sweep file: `Ok(None)` if it has no `[sweep]` table (a scenario file).
pub fn read_sweep_file(path: &Path) -> Result<Option<Plan>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if !table.contains_key("sweep") {
        return Ok(None);
    }
    let f: SweepFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let s = f.sweep;
    let scenario = path.parent().unwrap_or(Path::new(".")).join(&s.scenario);
    let plan = Plan { scenario, common: s.set, last: Vec::new(), variants: s.variants, loads: s.loads };
    validate(&plan).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(plan))
}

/// Checks names (unique, directory-safe), overrides and loads.
pub fn validate(plan: &Plan) -> Result<(), String> {
    check_loads("loads", &plan.loads)?;
    for (i, v) in plan.variants.iter().enumerate() {
        check_name(&v.name)?;
        check_overrides(v)?;
        if plan.variants[..i].iter().any(|w| w.name == v.name) {
            return Err(format!("variant `{}` is defined twice", v.name));
        }
        if let Some(l) = &v.loads {
            check_loads(&format!("variant `{}`: loads", v.name), l)?;
        }
        if v.loads.is_none() && plan.loads.is_empty() {
            return Err(format!("variant `{}` has no loads (give `loads` or --loads)", v.name));
        }
    }
    if plan.variants.is_empty() {
        return Err("no variants".into());
    }
    Ok(())
}

/// A load as a directory-name and CSV number: `55`, `52.5`.
pub fn fmt_load(pct: f64) -> String {
    if pct.fract() == 0.0 {
        format!("{pct:.0}")
    } else {
        format!("{pct}")
    }
}

/// The runs, variant by variant, each variant's loads in order.
pub fn jobs(plan: &Plan, out: &Path) -> Vec<Job> {
    let mut jobs = Vec::new();
    for v in &plan.variants {
        for &load in v.loads.as_deref().unwrap_or(&plan.loads) {
            let mut overrides = plan.common.clone();
            overrides.extend(v.set.iter().cloned());
            overrides.extend(plan.last.iter().cloned());
            overrides.push(format!("workload.random.load={}", load / 100.0));
            jobs.push(Job {
                variant: v.name.clone(),
                load_pct: load,
                overrides,
                dir: out.join(&v.name).join(format!("load{}", fmt_load(load))),
            });
        }
    }
    jobs
}

/// Runs the jobs `todo` (indices into `p.jobs`) on `threads` threads of this machine (each run
/// writes its directory as it finishes) and returns their outcomes in `todo`'s order.
pub fn run_jobs(p: &Planned, todo: &[usize], threads: usize, progress: &(dyn Fn(Progress) + Sync)) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; todo.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, todo.len().max(1)) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = todo.get(k) else { break };
                let outcome = run_job(p, i, progress).map_err(|e| p.error(i, &e));
                progress(Progress::Finished { job: i, outcome: &outcome });
                outcomes.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(outcome);
            });
        }
    });
    outcomes
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err("not run".into())))
        .collect()
}

fn run_job(p: &Planned, i: usize, progress: &(dyn Fn(Progress) + Sync)) -> Result<RunSummary, String> {
    let (scenario, job) = (&p.scenario, &p.jobs[i]);
    resume::unmark(job)?;
    let loaded = config::load(scenario, &job.overrides).map_err(|e| e.to_string())?;
    match &loaded.scenario.workload.random {
        None => return Err("the scenario has no [workload.random] whose load a sweep sets".into()),
        Some(config::RandomClasses::Many(_)) => {
            return Err("a sweep sets one [workload.random]'s load; this scenario declares several \
                        [[workload.random]] classes (sweep their loads with --set workload.random[i].load=…)"
                .into())
        }
        Some(config::RandomClasses::One(_)) => {}
    }
    let sim_us = (loaded.scenario.duration_ms * 1000.0) as u64;
    progress(Progress::Started { job: i, sim_us });
    let mut reported = 0u64;
    let results = crate::run_loaded_with(&loaded, |now, _, _| {
        let us = now / crate::time::PS_PER_US;
        if us > reported {
            progress(Progress::Advanced { job: i, delta_us: us - reported });
            reported = us;
        }
    })?;
    if sim_us > reported {
        progress(Progress::Advanced { job: i, delta_us: sim_us - reported });
    }
    let dir = &job.dir;
    output::write_data(&results, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let s = &loaded.scenario;
    if p.plots && s.output.plots {
        // A missing font only skips the plots, as in `ccp-sim run`.
        let _ = output::write_plots(&results, dir, &s.output.plot_format);
    }
    resume::finish(scenario, job, p.markers[i].as_deref())?;
    let c = &results.counters;
    Ok(RunSummary {
        wall_s: results.wall_s,
        events: results.events,
        events_per_s: results.events_per_s,
        flows_total: results.flows_total,
        flows_completed: results.flows_completed,
        drops: c.dropped_buffer + c.dropped_aqm + c.dropped_random,
        timeouts: c.timeouts,
        buckets: results.buckets,
    })
}

/// The columns of `sweep.csv`.
pub const CSV_HEADER: &str = "variant,load_pct,class,lo_bytes,hi_bytes,flows,completed,slowdown_p50,slowdown_p99,slowdown_mean,\
fct_p99_us,fct_mean_us,run_flows_total,run_flows_completed,run_drops,run_timeouts,wall_s,events,events_per_s,error";

/// `sweep.csv`'s text: a row per (variant, load, class, bucket), or one row with the error.
pub fn csv(jobs: &[Job], outcomes: &[Outcome]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for (job, o) in jobs.iter().zip(outcomes) {
        let head = format!("{},{}", job.variant, fmt_load(job.load_pct));
        match o {
            Ok(r) => {
                let run = format!(
                    "{},{},{},{},{:.3},{},{:.0}",
                    r.flows_total, r.flows_completed, r.drops, r.timeouts, r.wall_s, r.events, r.events_per_s
                );
                for b in &r.buckets {
                    let _ = writeln!(
                        s,
                        "{head},{},{},{},{},{},{:.4},{:.4},{:.4},{:.3},{:.3},{run},",
                        b.class,
                        b.lo_bytes,
                        b.hi_bytes.map_or(String::new(), |h| h.to_string()),
                        b.flows,
                        b.completed,
                        b.slowdown_p50,
                        b.slowdown_p99,
                        b.slowdown_mean,
                        b.fct_p99_us,
                        b.fct_mean_us
                    );
                }
                if r.buckets.is_empty() {
                    let _ = writeln!(s, "{head},,,,0,0,,,,,,{run},");
                }
            }
            Err(e) => {
                // Every column but the last empty, then the quoted error.
                let _ = writeln!(s, "{head}{}\"{}\"", ",".repeat(18), e.trim().replace('"', "\"\"").replace('\n', " "));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_variants_parse() {
        assert_eq!(parse_loads("50, 55,60%").unwrap(), vec![50.0, 55.0, 60.0]);
        assert_eq!(parse_loads("52.5").unwrap(), vec![52.5]);
        assert!(parse_loads("50;60").unwrap_err().contains("`50;60` is not a number"));
        let v = parse_variant("bfc=switch.queues_per_port=32; cc.algorithm=\"constant\" ;").unwrap();
        assert_eq!(v.name, "bfc");
        assert_eq!(v.set, vec!["switch.queues_per_port=32".to_string(), "cc.algorithm=\"constant\"".to_string()]);
        assert_eq!(parse_variant("plain=").unwrap().set, Vec::<String>::new());
        assert!(parse_variant("=seed=1").unwrap_err().contains("variant name ``"));
        assert_eq!(fmt_load(55.0), "55");
        assert_eq!(fmt_load(52.5), "52.5");
    }

    #[test]
    fn jobs_order_overrides_and_error_rows() {
        let plan = Plan {
            scenario: "s.toml".into(),
            common: vec!["duration_ms=2".into()],
            last: vec!["seed=9".into()],
            variants: vec![
                Variant { name: "a".into(), set: vec!["seed=2".into()], loads: None },
                Variant { name: "b".into(), set: vec![], loads: Some(vec![80.0]) },
            ],
            loads: vec![50.0, 60.0],
        };
        validate(&plan).unwrap();
        let jobs = jobs(&plan, Path::new("out"));
        let got: Vec<(String, f64)> = jobs.iter().map(|j| (j.variant.clone(), j.load_pct)).collect();
        assert_eq!(got, vec![("a".into(), 50.0), ("a".into(), 60.0), ("b".into(), 80.0)]);
        // The file's common overrides, the variant's, the command line's, the load.
        assert_eq!(jobs[1].overrides, vec!["duration_ms=2", "seed=2", "seed=9", "workload.random.load=0.6"]);
        assert_eq!(jobs[2].dir, Path::new("out/b/load80"));
        let text = csv(&jobs[2..], &[Err("variant `b`, load 80 %: x, \"y\"".into())]);
        let row = text.lines().nth(1).unwrap();
        assert_eq!(row, format!("b,80{}\"variant `b`, load 80 %: x, \"\"y\"\"\"", ",".repeat(18)));
        assert_eq!(CSV_HEADER.split(',').count(), 20);
        assert_eq!(row.split_once('"').unwrap().0.matches(',').count(), 19);
    }
}
