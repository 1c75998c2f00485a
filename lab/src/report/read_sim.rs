//! ccp-sim's result directories, where the report's metrics apply: a run's (`summary.json` with
//! its ports) and a sweep's (`sweep.csv`, and `<variant>/load<L>/` per run).
//!
//! A simulated run's "link" is its busiest monitored port (the bottleneck of a dumbbell): its
//! throughput, utilisation and per-packet queueing delay. ccp-sim reports the delay's p50 and
//! p99, not p95, so simulated runs are placed by their p99 (the figures say so). A sweep's
//! variants are the schemes and each load is a link of its own; simulated links have no
//! emulator to calibrate.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::csv::Table;
use super::results::{Extra, Origin, Results, Run, Setup, Source};

/// Whether `dir` holds one ccp-sim run.
pub fn is_run(dir: &Path) -> bool {
    sim_summary(&dir.join("summary.json")).is_some()
}

/// Whether `dir` holds a ccp-sim sweep.
pub fn is_sweep(dir: &Path) -> bool {
    dir.join("sweep.csv").is_file()
}

/// A ccp-sim summary.json (one with ports and flow counts).
fn sim_summary(path: &Path) -> Option<Value> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    (v.get("ports").is_some() && v.get("flows_total").is_some()).then_some(v)
}

/// Reads one simulated run's directory into `r`.
pub fn read_run(dir: &Path, r: &mut Results) {
    let source = r.sources.len();
    let v = sim_summary(&dir.join("summary.json")).unwrap_or(Value::Null);
    let name = v["name"].as_str().unwrap_or("ccp-sim").to_string();
    r.sources.push(Source { dir: dir.to_path_buf(), name: name.clone(), kind: "ccp-sim run", description: None });
    let scheme = v["algorithm"].as_str().unwrap_or("?").to_string();
    let run = run_from_summary(&v, source, &name, &scheme, dir.to_path_buf(), r);
    r.runs.push(run);
}

/// Reads a sweep's directory into `r`: one run per row group of sweep.csv (variant × load).
pub fn read_sweep(dir: &Path, r: &mut Results) {
    let source = r.sources.len();
    let path = dir.join("sweep.csv");
    let table = std::fs::read_to_string(&path).ok().and_then(|t| Table::parse(&t));
    let mut jobs: Vec<(String, String, Option<String>)> = Vec::new();
    match &table {
        Some(t) => {
            for row in &t.rows {
                let cell = |k: &str| t.cell(row, k).unwrap_or("").to_string();
                let key = (cell("variant"), cell("load_pct"));
                if key.0.is_empty() {
                    r.problem(&path, format!("a row without a variant: {:?}", row.join(",")));
                    continue;
                }
                if !jobs.iter().any(|j| j.0 == key.0 && j.1 == key.1) {
                    jobs.push((key.0, key.1, Some(cell("error")).filter(|e| !e.is_empty())));
                }
            }
        }
        None => r.problem(&path, "empty or unreadable: the sweep's runs are unknown"),
    }
    // The scenario's name, from any run that has one.
    let first = jobs.iter().find_map(|(v, l, _)| sim_summary(&dir.join(v).join(format!("load{l}")).join("summary.json")));
    let name = first.as_ref().and_then(|v| v["name"].as_str()).unwrap_or("ccp-sim sweep").to_string();
    r.sources.push(Source { dir: dir.to_path_buf(), name: name.clone(), kind: "ccp-sim sweep", description: None });
    for (variant, load, error) in jobs {
        let link = format!("{name}@load{load}");
        let run_dir = dir.join(&variant).join(format!("load{load}"));
        let summary = run_dir.join("summary.json");
        let run = match (error, sim_summary(&summary)) {
            (Some(e), _) => {
                let mut run = Run::new(source, Origin::Sim, &link, "solo", &variant, run_dir);
                run.error = Some(e);
                run
            }
            (None, Some(v)) => run_from_summary(&v, source, &link, &variant, run_dir, r),
            (None, None) => {
                r.problem(&summary, "missing or not a ccp-sim summary");
                let mut run = Run::new(source, Origin::Sim, &link, "solo", &variant, run_dir);
                run.error = Some("summary.json missing or unreadable".into());
                run
            }
        };
        r.runs.push(run);
    }
}

/// The busiest monitored port: the run's bottleneck.
pub fn bottleneck(v: &Value) -> Option<&Value> {
    v["ports"].as_array()?.iter().max_by(|a, b| {
        let u = |p: &Value| p["utilization"].as_f64().unwrap_or(0.0);
        u(a).total_cmp(&u(b))
    })
}

fn run_from_summary(v: &Value, source: usize, link: &str, scheme: &str, dir: PathBuf, r: &mut Results) -> Run {
    let mut run = Run::new(source, Origin::Sim, link, "solo", scheme, dir);
    run.delay_percentile = 99;
    run.description = format!("ccp-sim {}", v["algorithm"].as_str().unwrap_or(scheme));
    run.command = std::fs::read_to_string(run.dir.join("overrides.txt"))
        .ok()
        .and_then(|t| t.lines().next().map(|l| l.trim_start_matches("# ").to_string()));
    let Some(port) = bottleneck(v) else {
        r.problem(run.dir.join("summary.json"), "no monitored port: no throughput or delay");
        run.error = Some("no monitored port in summary.json".into());
        return run;
    };
    let f = |k: &str| port[k].as_f64().filter(|x| x.is_finite());
    run.ok = true;
    run.setup = Setup {
        rtt_ms: None,
        buffer_pkts: None,
        link_source: format!(
            "simulated port {} ({} Gbit/s)",
            port["name"].as_str().unwrap_or("?"),
            f("rate_gbps").map_or_else(|| "?".into(), |g| format!("{g}"))
        ),
    };
    run.throughput_mbps = f("throughput_gbps").map(|g| g * 1000.0);
    run.capacity_mbps = f("rate_gbps").map(|g| g * 1000.0);
    run.utilisation = f("utilization");
    run.delay_ms = f("queue_delay_p99_us").map(|us| us / 1000.0);
    run.delay_p50_ms = f("queue_delay_p50_us").map(|us| us / 1000.0);
    let total = v["flows_total"].as_f64().unwrap_or(0.0);
    if total > 0.0 {
        run.extras.push((Extra::CompletedPct, v["flows_completed"].as_f64().unwrap_or(0.0) / total * 100.0));
    }
    run
}
