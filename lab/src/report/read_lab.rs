//! ccp-lab's result directories: an experiment's (`runs/<link>/<scenario>/<scheme>/rep<k>/run.json`,
//! `runs.csv`, `experiment.toml`, `calibration/<link>/run.json`) or a single run's (`run.json`).
//!
//! Every file may be missing or damaged (a run killed half-way, a copy cut short): a run.json
//! that does not parse becomes a failed run named after its directory, a run that runs.csv
//! lists without its run.json comes from runs.csv's row, and each of these is a [`Problem`]
//! that names the file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::csv::Table;
use super::results::{Calibration, Extra, Origin, Results, Run, Setup, Source};
use super::LATE_LIMIT_MS;

/// Deepest `runs/` nesting searched for run.json (link/scenario/scheme/rep is 4).
const MAX_DEPTH: usize = 6;

/// Whether `dir` is a ccp-lab experiment's output directory.
pub fn is_experiment(dir: &Path) -> bool {
    ["runs.csv", "experiment.toml", "summary.csv"].iter().any(|f| dir.join(f).is_file()) || dir.join("runs").is_dir()
}

/// Whether `dir` is one ccp-lab run's directory.
pub fn is_run(dir: &Path) -> bool {
    dir.join("run.json").is_file()
}

/// Reads an experiment's output directory into `r`.
pub fn read_experiment(dir: &Path, r: &mut Results) {
    let source = r.sources.len();
    let (name, description) = experiment_name(dir);
    r.sources.push(Source { dir: dir.to_path_buf(), name, kind: "ccp-lab experiment", description });
    let runs_dir = dir.join("runs");
    let mut files = Vec::new();
    if runs_dir.is_dir() {
        find_run_files(&runs_dir, 0, &mut files);
        files.sort();
    } else {
        r.problem(&runs_dir, "missing: no per-run results (run.json, time series)");
    }
    let first = r.runs.len();
    for f in &files {
        let run = read_run_file(f, source, dir, r);
        r.runs.push(run);
    }
    read_runs_csv(dir, source, first, r);
    let cal = dir.join("calibration");
    if let Ok(rd) = std::fs::read_dir(&cal) {
        let mut links: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
        links.sort();
        for l in links {
            read_calibration(&l.join("run.json"), source, r);
        }
    }
    if r.runs.len() == first {
        r.problem(dir, "no runs: neither runs/…/run.json nor rows in runs.csv");
    }
}

/// Reads one run's directory into `r` (a source of its own).
pub fn read_single_run(dir: &Path, r: &mut Results) {
    let source = r.sources.len();
    let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    r.sources.push(Source { dir: dir.to_path_buf(), name, kind: "ccp-lab run", description: None });
    let run = read_run_file(&dir.join("run.json"), source, dir, r);
    r.runs.push(run);
}

/// The experiment's name and description: from its experiment.toml copy, else summary.json,
/// else the directory's name.
fn experiment_name(dir: &Path) -> (String, Option<String>) {
    let toml: Option<toml::Table> =
        std::fs::read_to_string(dir.join("experiment.toml")).ok().and_then(|t| t.parse::<toml::Table>().ok());
    let field = |k: &str| toml.as_ref().and_then(|t| t.get(k)).and_then(|v| v.as_str()).map(str::to_string);
    let summary = || -> Option<String> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).ok()?).ok()?;
        v["experiment"].as_str().map(str::to_string)
    };
    let name = field("name").or_else(summary).unwrap_or_else(|| {
        dir.canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "results".into())
    });
    (name, field("description"))
}

fn find_run_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            find_run_files(&p, depth + 1, out);
        } else if p.file_name().is_some_and(|n| n == "run.json") {
            out.push(p);
        }
    }
}

/// A run from its run.json; an unreadable one is a failed run named after its directory
/// (`…/<link>/<scenario>/<scheme>/rep<k>`), and a problem.
fn read_run_file(path: &Path, source: usize, experiment_dir: &Path, r: &mut Results) -> Run {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let parsed = std::fs::read_to_string(path)
        .map_err(|e| format!("unreadable: {e}"))
        .and_then(|t| if t.trim().is_empty() { Err("empty".to_string()) } else { Ok(t) })
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| format!("not JSON ({e})")));
    match parsed {
        Ok(v) if v.is_object() => run_from_json(&v, source, dir, experiment_dir, r),
        Ok(_) => failed_from_path(path, source, dir, "not a run record (not a JSON object)", r),
        Err(e) => failed_from_path(path, source, dir, &e, r),
    }
}

fn failed_from_path(path: &Path, source: usize, dir: PathBuf, why: &str, r: &mut Results) -> Run {
    r.problem(path, why);
    let parts: Vec<String> = dir.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let n = parts.len();
    let at = |k: usize| if n >= k { parts[n - k].clone() } else { "?".to_string() };
    let mut run = Run::new(source, Origin::Lab, &at(4), &at(3), &at(2), dir);
    run.repetition = at(1).trim_start_matches("rep").parse().unwrap_or(0);
    run.error = Some(format!("run.json {why}"));
    run
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k)).and_then(Value::as_f64).filter(|x| x.is_finite())
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn run_from_json(v: &Value, source: usize, dir: PathBuf, experiment_dir: &Path, r: &mut Results) -> Run {
    let name = |k: &str| text(v, k).unwrap_or("?");
    let mut run = Run::new(source, Origin::Lab, name("link"), name("scenario"), name("scheme"), dir);
    let json = run.dir.join("run.json");
    for k in ["link", "scenario", "scheme", "ok"] {
        if v.get(k).is_none() {
            r.problem(&json, format!("no {k:?} field"));
        }
    }
    run.repetition = v.get("repetition").and_then(Value::as_u64).unwrap_or(0) as u32;
    run.ok = v.get("ok").and_then(Value::as_bool).unwrap_or(false);
    run.error = text(v, "error").map(str::to_string);
    if !run.ok && run.error.is_none() {
        run.error = Some("the run did not finish (no error recorded)".into());
    }
    run.setup = Setup {
        rtt_ms: num(v, &["rtt_ms"]),
        buffer_pkts: v.get("buffer_pkts").and_then(Value::as_u64).map(|b| b as u32),
        link_source: text(v, "link_source").unwrap_or("").to_string(),
    };
    run.description = text(v, "scheme_description").unwrap_or("").to_string();
    run.command = text(v, "command").map(str::to_string).or_else(|| {
        // Records from before ccp-lab wrote the command: the experiment's copy stands in.
        let duration = num(v, &["duration_s"])?;
        Some(crate::run::reproduce_command(
            &experiment_dir.join("experiment.toml"),
            &run.link,
            &run.scenario,
            &run.scheme,
            duration,
        ))
    });
    run.throughput_mbps = num(v, &["scheme_throughput_mbps"]);
    run.utilisation = num(v, &["link_metrics", "utilisation"]);
    run.capacity_mbps = num(v, &["link_metrics", "capacity_mbps"]);
    run.delay_ms = num(v, &["link_metrics", "queue_delay_ms", "p95"]);
    run.delay_p50_ms = num(v, &["link_metrics", "queue_delay_ms", "p50"]);
    if run.ok && v.get("link_metrics").is_none_or(Value::is_null) {
        r.problem(&json, "a successful run without link_metrics: it has no throughput or delay");
    }
    let extras: [(Extra, &[&str]); 8] = [
        (Extra::Accuracy, &["classification", "accuracy"]),
        (Extra::Jain, &["jain"]),
        (Extra::JainIdeal, &["indices", "jain_ideal"]),
        (Extra::GoodputIndex, &["indices", "goodput_index"]),
        (Extra::LatencyIndex, &["indices", "latency_index"]),
        (Extra::RetxPct, &["indices", "retx_pct"]),
        (Extra::DropPct, &["indices", "drop_pct"]),
        (Extra::CrossMbps, &["cross_throughput_mbps"]),
    ];
    run.extras = extras.iter().filter_map(|(e, p)| num(v, p).map(|x| (*e, x))).collect();
    run.limited = emulator_limits(v);
    run
}

/// Why the emulator itself limited a run: packets delivered late (its own measure) or not
/// written at all.
fn emulator_limits(v: &Value) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(l) = num(v, &["emulator_late_p99_ms"]).filter(|&l| l > LATE_LIMIT_MS) {
        why.push(format!("emulator late by {l:.1} ms at p99"));
    }
    let written = |d: &str| num(v, &["router", d, "dropped_write"]).unwrap_or(0.0) as u64;
    let dropped = written("down") + written("up");
    if dropped > 0 {
        why.push(format!("{dropped} packets the emulator failed to write"));
    }
    why
}

/// Runs that runs.csv lists but no run.json was read for (from `first` on in `r.runs`).
fn read_runs_csv(dir: &Path, source: usize, first: usize, r: &mut Results) {
    let path = dir.join("runs.csv");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) => {
            r.problem(&path, "missing: failed runs without a run.json cannot be listed");
            return;
        }
    };
    let Some(t) = Table::parse(&text) else {
        r.problem(&path, "empty (no header)");
        return;
    };
    for row in &t.rows {
        let cell = |k: &str| t.cell(row, k).unwrap_or("").to_string();
        let (link, scenario, scheme) = (cell("link"), cell("scenario"), cell("scheme"));
        let rep: u32 = cell("repetition").parse().unwrap_or(0);
        if link.is_empty() || scheme.is_empty() {
            r.problem(&path, format!("a row without link or scheme: {:?}", row.join(",")));
            continue;
        }
        let known =
            r.runs[first..].iter().any(|x| x.link == link && x.scenario == scenario && x.scheme == scheme && x.repetition == rep);
        if known {
            continue;
        }
        let run_dir = dir.join(cell("dir"));
        r.problem(run_dir.join("run.json"), "missing: the run's figures come from runs.csv, without time series");
        let mut run = Run::new(source, Origin::Lab, &link, &scenario, &scheme, run_dir);
        run.repetition = rep;
        run.ok = cell("ok") == "1";
        run.error = Some(cell("error")).filter(|e| !e.is_empty());
        run.utilisation = t.number(row, "utilisation");
        run.delay_ms = t.number(row, "qdelay_p95_ms");
        run.delay_p50_ms = t.number(row, "qdelay_p50_ms");
        run.throughput_mbps = t.number(row, "scheme_throughput_mbps");
        let extras = [
            (Extra::Accuracy, "accuracy"),
            (Extra::JainIdeal, "jain_ideal"),
            (Extra::GoodputIndex, "goodput_index"),
            (Extra::LatencyIndex, "latency_index"),
            (Extra::RetxPct, "retx_pct"),
            (Extra::DropPct, "drop_pct"),
            (Extra::CrossMbps, "cross_throughput_mbps"),
        ];
        run.extras = extras.iter().filter_map(|(e, k)| t.number(row, k).map(|x| (*e, x))).collect();
        if let Some(l) = t.number(row, "emulator_late_p99_ms").filter(|&l| l > LATE_LIMIT_MS) {
            run.limited.push(format!("emulator late by {l:.1} ms at p99"));
        }
        r.runs.push(run);
    }
}

/// A link's calibration run (`calibration/<link>/run.json`).
fn read_calibration(path: &Path, source: usize, r: &mut Results) {
    let link = path.parent().and_then(Path::file_name).map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let v: Value = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("not JSON ({e})")))
    {
        Ok(v) => v,
        Err(e) => {
            r.problem(path, format!("calibration unreadable: {e}"));
            return;
        }
    };
    let dropped = ["down", "up"].iter().map(|d| num(&v, &["router", d, "dropped_write"]).unwrap_or(0.0) as u64).sum();
    r.calibrations.push(Calibration {
        source,
        link: text(&v, "link").map_or(link, str::to_string),
        ok: v.get("ok").and_then(Value::as_bool).unwrap_or(false),
        error: text(&v, "error").map(str::to_string),
        peak_mbps: num(&v, &["link_metrics", "capacity_mbps"]),
        delivered_mbps: num(&v, &["link_metrics", "delivered_mbps"]),
        utilisation: num(&v, &["link_metrics", "utilisation"]),
        late_p99_ms: num(&v, &["emulator_late_p99_ms"]),
        dropped_write: dropped,
    });
}
