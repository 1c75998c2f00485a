//! Parity: our implementation of an algorithm beside an independent one (the kernel's Reno,
//! Cubic and BBR, the kernel developers' BPF DCTCP, the Nimbus authors' code), cell by cell,
//! with a verdict against stated tolerances (issue 31).
//!
//! An experiment declares its pairs (`[[parity]] name, ours, theirs`, both scheme names). Every
//! link × scenario is a cell; each metric is the median over the cell's repetitions (run them
//! interleaved: the runner alternates schemes within a repetition), then ours / theirs:
//!
//! * a scenario with one flow group (the scheme alone): the scheme's throughput (within ±5 %),
//!   the bottleneck's queueing delay p50 (shown) and p95 (within ±10 %), and the scheme's
//!   retransmitted segments, after the warm-up (≤ 1.5×) and during it (slow start's exit,
//!   shown; it is where HyStart and HyStart++ differ);
//! * a scenario with several flow groups is a **mixed** cell: in ours' runs group 0 runs ours
//!   and the later groups run theirs (the scheme's `flow_cc`), so ours' share of the scheme
//!   flows' throughput must be 0.45–0.55 when the groups are the same size; theirs' runs (all
//!   theirs) are the control, the share two copies of the same code get on the same link.
//!
//! Throughput, delay and retransmissions are read from each run's `run.json` and `flows.csv`,
//! so a result directory can be judged again after the fact (`ccp-lab parity DIR`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{Experiment, FlowGroup};
use crate::error::{Error, Result};

/// The tolerances.
pub const THROUGHPUT_TOLERANCE_PCT: f64 = 5.0;
pub const P95_DELAY_TOLERANCE_PCT: f64 = 10.0;
pub const RETRANS_MAX_RATIO: f64 = 1.5;
pub const SHARE_RANGE: (f64, f64) = (0.45, 0.55);
/// Nimbus: "where theirs beats ours by > 5 points, find the difference".
pub const ACCURACY_POINTS: f64 = 5.0;

/// The metrics with a tolerance, as named in the rows.
pub const METRICS: [&str; 5] = [
    "throughput Mbit/s",
    "queueing delay p95 ms",
    "retransmits after warm-up",
    "mixed share of group 0",
    "classification accuracy",
];

/// One pair to compare, as declared in the experiment file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ParitySpec {
    /// The row's label (e.g. "cubic").
    pub name: String,
    /// Our scheme's name.
    pub ours: String,
    /// The independent implementation's scheme.
    pub theirs: String,
    /// Throughput within ± this many percent of theirs.
    #[serde(default = "default_throughput_pct")]
    pub throughput_pct: f64,
    /// p95 queueing delay within ± this many percent of theirs.
    #[serde(default = "default_p95_pct")]
    pub p95_delay_pct: f64,
    /// Retransmitted segments after the warm-up at most this many times theirs.
    #[serde(default = "default_retrans_ratio")]
    pub retrans_ratio: f64,
    /// Ours' share of a mixed cell, [min, max].
    #[serde(default = "default_share")]
    pub share: [f64; 2],
    /// Classification accuracy (percentage points) by which theirs may beat ours.
    #[serde(default = "default_accuracy_points")]
    pub accuracy_points: f64,
    /// Only these metrics get a verdict (names as in the table, e.g. "classification
    /// accuracy"); the others are shown. Default: every metric with a tolerance.
    #[serde(default)]
    pub judge: Option<Vec<String>>,
}

fn default_throughput_pct() -> f64 {
    THROUGHPUT_TOLERANCE_PCT
}
fn default_p95_pct() -> f64 {
    P95_DELAY_TOLERANCE_PCT
}
fn default_retrans_ratio() -> f64 {
    RETRANS_MAX_RATIO
}
fn default_accuracy_points() -> f64 {
    ACCURACY_POINTS
}
fn default_share() -> [f64; 2] {
    [SHARE_RANGE.0, SHARE_RANGE.1]
}

/// Checks the pairs against the experiment's schemes; errors name the key.
pub fn validate(x: &Experiment) -> std::result::Result<(), (String, String)> {
    for (i, p) in x.parity.iter().enumerate() {
        let key = format!("parity[{i}]");
        for (field, name) in [("ours", &p.ours), ("theirs", &p.theirs)] {
            if !x.schemes.iter().any(|s| &s.name == name) {
                return Err((format!("{key}.{field}"), format!("{name:?} is not a scheme of this experiment")));
            }
        }
        if p.ours == p.theirs {
            return Err((format!("{key}.theirs"), "ours and theirs are the same scheme".into()));
        }
        for (field, v) in
            [("throughput_pct", p.throughput_pct), ("p95_delay_pct", p.p95_delay_pct), ("accuracy_points", p.accuracy_points)]
        {
            if !(v.is_finite() && (0.0..=100.0).contains(&v)) {
                return Err((format!("{key}.{field}"), format!("a percentage from 0 to 100, got {v}")));
            }
        }
        if !(p.retrans_ratio.is_finite() && p.retrans_ratio >= 1.0) {
            return Err((format!("{key}.retrans_ratio"), format!("must be ≥ 1, got {}", p.retrans_ratio)));
        }
        if let Some(bad) = p.judge.iter().flatten().find(|m| !METRICS.contains(&m.as_str())) {
            return Err((format!("{key}.judge"), format!("{bad:?} is not a judged metric (known: {})", METRICS.join(", "))));
        }
        let [lo, hi] = p.share;
        if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi && hi <= 1.0) {
            return Err((format!("{key}.share"), format!("[min, max] within [0, 1], got [{lo}, {hi}]")));
        }
    }
    Ok(())
}

/// What parity needs of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    pub link: String,
    pub scenario: String,
    pub scheme: String,
    pub throughput_mbps: Option<f64>,
    pub qdelay_p50_ms: Option<f64>,
    pub qdelay_p95_ms: Option<f64>,
    /// The scheme's flows' retransmitted segments after the warm-up, and during it.
    pub retrans: Option<f64>,
    pub warmup_retrans: Option<f64>,
    /// Throughput of the scheme's flows per flow group, Mbit/s.
    pub group_mbps: Vec<f64>,
    /// Classification accuracy (schemes with `classify`, e.g. Nimbus's mode).
    pub accuracy: Option<f64>,
}

/// Index of the flow group flow `n` (`scheme#n`) belongs to.
fn group_of(groups: &[FlowGroup], n: usize) -> Option<usize> {
    let mut end = 0;
    for (g, grp) in groups.iter().enumerate() {
        end += grp.count as usize;
        if n < end {
            return Some(g);
        }
    }
    None
}

/// The scheme flows' retransmissions at the end of the warm-up, from `flows.csv` (cumulative
/// `tcpi_total_retrans` per flow; the last sample before the measurement window).
fn warmup_retrans(flows_csv: &str, scheme: &str, window_start_s: f64) -> Option<f64> {
    let mut lines = flows_csv.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (t, flow, retrans) = (col("t_s")?, col("flow")?, col("retrans")?);
    let prefix = format!("{scheme}#");
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let (Some(ts), Some(f), Some(r)) = (cells.get(t), cells.get(flow), cells.get(retrans)) else { continue };
        let (Ok(ts), Ok(r)) = (ts.parse::<f64>(), r.parse::<f64>()) else { continue };
        if f.starts_with(&prefix) && ts < window_start_s {
            last.insert(f.to_string(), r);
        }
    }
    (!last.is_empty()).then(|| last.values().sum())
}

/// Reads one run's facts from its `run.json` (and `flows.csv` beside it); `None` for a failed run.
pub fn read_run(run_json: &Path, flow_groups: &dyn Fn(&str) -> Vec<FlowGroup>) -> Result<Option<RunFacts>> {
    let text = std::fs::read_to_string(run_json).map_err(|e| Error::io(format!("reading {}", run_json.display()), e))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Run(format!("{}: not a run record: {e}", run_json.display())))?;
    if v["ok"].as_bool() != Some(true) {
        return Ok(None);
    }
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let (link, scenario, scheme) = (s("link"), s("scenario"), s("scheme"));
    let groups = flow_groups(&scenario);
    let prefix = format!("{scheme}#");
    let mut group_mbps = vec![0.0; groups.len()];
    let mut retrans_end = 0.0;
    let mut have_retrans = false;
    for f in v["flows"].as_array().into_iter().flatten() {
        if f["role"].as_str() != Some("scheme") {
            continue;
        }
        let label = f["flow"].as_str().unwrap_or_default();
        let Some(n) = label.strip_prefix(&prefix).and_then(|n| n.parse::<usize>().ok()) else { continue };
        if let Some(g) = group_of(&groups, n) {
            group_mbps[g] += f["throughput_mbps"].as_f64().unwrap_or(0.0);
        }
        if let Some(r) = f["retrans"].as_f64() {
            retrans_end += r;
            have_retrans = true;
        }
    }
    let flows_csv = std::fs::read_to_string(run_json.with_file_name("flows.csv")).unwrap_or_default();
    let window_start = v["window_s"][0].as_f64().unwrap_or(0.0);
    let warmup = warmup_retrans(&flows_csv, &scheme, window_start);
    let q = &v["link_metrics"]["queue_delay_ms"];
    Ok(Some(RunFacts {
        link,
        scenario,
        scheme,
        throughput_mbps: v["scheme_throughput_mbps"].as_f64(),
        qdelay_p50_ms: q["p50"].as_f64(),
        qdelay_p95_ms: q["p95"].as_f64(),
        retrans: have_retrans.then(|| (retrans_end - warmup.unwrap_or(0.0)).max(0.0)),
        warmup_retrans: warmup,
        group_mbps,
        accuracy: v["classification"]["accuracy"].as_f64(),
    }))
}

/// The median of what is there.
fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    Some(if xs.len() % 2 == 1 { xs[m] } else { (xs[m - 1] + xs[m]) / 2.0 })
}

/// Whether a cell meets its tolerance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Miss,
    /// No tolerance applies (a metric shown for context) or a side has no data.
    Shown,
}

/// One metric of one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParityRow {
    pub pair: String,
    pub link: String,
    pub scenario: String,
    pub metric: String,
    pub ours: Option<f64>,
    pub theirs: Option<f64>,
    pub ratio: Option<f64>,
    pub verdict: Verdict,
    /// The tolerance, in words.
    pub tolerance: String,
    /// Repetitions that went into ours' and theirs' medians.
    pub runs: [usize; 2],
}

fn ratio(ours: Option<f64>, theirs: Option<f64>) -> Option<f64> {
    match (ours, theirs) {
        (Some(o), Some(t)) if t > 0.0 => Some(o / t),
        (Some(o), Some(t)) if t == 0.0 && o == 0.0 => Some(1.0),
        _ => None,
    }
}

/// The rows of one pair over every cell its two schemes ran in.
pub fn compare(p: &ParitySpec, facts: &[RunFacts]) -> Vec<ParityRow> {
    let mut cells: Vec<(String, String)> = Vec::new();
    for f in facts.iter().filter(|f| f.scheme == p.ours || f.scheme == p.theirs) {
        let c = (f.link.clone(), f.scenario.clone());
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    let mut rows = Vec::new();
    for (link, scenario) in cells {
        let of = |scheme: &str| -> Vec<&RunFacts> {
            facts.iter().filter(|f| f.link == link && f.scenario == scenario && f.scheme == scheme).collect()
        };
        let (ours, theirs) = (of(&p.ours), of(&p.theirs));
        let runs = [ours.len(), theirs.len()];
        let med = |rs: &[&RunFacts], m: &dyn Fn(&RunFacts) -> Option<f64>| median(rs.iter().filter_map(|f| m(f)).collect());
        let mut push = |metric: &str, m: &dyn Fn(&RunFacts) -> Option<f64>, judge: &dyn Fn(f64, f64) -> bool, tol: String| {
            let (o, t) = (med(&ours, m), med(&theirs, m));
            let judged = !tol.is_empty() && p.judge.as_ref().is_none_or(|j| j.iter().any(|m| m == metric));
            let verdict = match (o, t) {
                _ if !judged => Verdict::Shown,
                (Some(o), Some(t)) if judge(o, t) => Verdict::Ok,
                (Some(_), Some(_)) => Verdict::Miss,
                _ => Verdict::Shown,
            };
            rows.push(ParityRow {
                pair: p.name.clone(),
                link: link.clone(),
                scenario: scenario.clone(),
                metric: metric.to_string(),
                ours: o,
                theirs: t,
                ratio: ratio(o, t),
                verdict,
                tolerance: tol,
                runs,
            });
        };
        let groups = ours.first().or(theirs.first()).map_or(1, |f| f.group_mbps.len());
        if groups >= 2 {
            let share = |f: &RunFacts| {
                let total: f64 = f.group_mbps.iter().sum();
                (total > 0.0).then(|| f.group_mbps[0] / total)
            };
            let [lo, hi] = p.share;
            let in_range = move |o: f64, _t: f64| (lo..=hi).contains(&o);
            push(
                "mixed share of group 0",
                &share,
                &in_range,
                format!("ours' share {lo:.2}–{hi:.2}; theirs' runs are the control"),
            );
        } else {
            let within = |pct: f64| move |o: f64, t: f64| t > 0.0 && (o / t - 1.0).abs() <= pct / 100.0;
            push("throughput Mbit/s", &|f| f.throughput_mbps, &within(p.throughput_pct), format!("±{} %", p.throughput_pct));
            push("queueing delay p50 ms", &|f| f.qdelay_p50_ms, &|_, _| true, String::new());
            push("queueing delay p95 ms", &|f| f.qdelay_p95_ms, &within(p.p95_delay_pct), format!("±{} %", p.p95_delay_pct));
            let r = p.retrans_ratio;
            push("retransmits after warm-up", &|f| f.retrans, &move |o, t| o <= r * t, format!("≤ {r}×"));
            push("retransmits in warm-up", &|f| f.warmup_retrans, &|_, _| true, String::new());
        }
        if ours.iter().chain(&theirs).any(|f| f.accuracy.is_some()) {
            let points = p.accuracy_points;
            push(
                "classification accuracy",
                &|f| f.accuracy,
                &move |o, t| o >= t - points / 100.0,
                format!("ours ≥ theirs − {points} points"),
            );
        }
    }
    rows
}

/// The flow groups of `scenario` in experiment `x` (its own, or the experiment's).
pub fn flow_groups(x: &Experiment, scenario: &str) -> Vec<FlowGroup> {
    x.scenarios.iter().find(|s| s.name == scenario).and_then(|s| s.flows.clone()).unwrap_or_else(|| x.flows.clone())
}

/// Every `run.json` under `dir/runs`.
fn run_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.file_name().is_some_and(|n| n == "run.json") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("runs"), &mut out);
    out
}

/// The parity of a result directory: its experiment's pairs over its runs.
pub fn of_results(dir: &Path) -> Result<Vec<ParityRow>> {
    let file = dir.join("experiment.toml");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| Error::io(format!("reading {} (is {} a ccp-lab result directory?)", file.display(), dir.display()), e))?;
    let x: Experiment = toml::from_str(&text).map_err(|e| Error::Run(format!("{}: {}", file.display(), e.message().trim())))?;
    if x.parity.is_empty() {
        return Err(Error::Unavailable(format!("{} declares no [[parity]] pairs", file.display())));
    }
    let groups = |scenario: &str| flow_groups(&x, scenario);
    let mut facts = Vec::new();
    for f in run_files(dir) {
        if let Some(r) = read_run(&f, &groups)? {
            facts.push(r);
        }
    }
    Ok(x.parity.iter().flat_map(|p| compare(p, &facts)).collect())
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
    }
}

/// The terminal table: per cell and metric, ours / theirs / ratio / verdict.
pub fn table(rows: &[ParityRow]) -> String {
    let line = |c: [&str; 8]| {
        format!("{:<10} {:<24} {:<10} {:<26} {:>9} {:>9} {:>7}  {}", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
    };
    let mut s = line(["pair", "link", "scenario", "metric", "ours", "theirs", "ratio", "verdict"]) + "\n";
    for r in rows {
        let verdict = match r.verdict {
            Verdict::Ok => format!("ok ({})", r.tolerance),
            Verdict::Miss => format!("MISS ({})", r.tolerance),
            Verdict::Shown if r.tolerance.is_empty() => String::new(),
            Verdict::Shown => "no data".into(),
        };
        let ratio = r.ratio.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
        let _ =
            writeln!(s, "{}", line([&r.pair, &r.link, &r.scenario, &r.metric, &num(r.ours), &num(r.theirs), &ratio, &verdict]));
    }
    let judged = rows.iter().filter(|r| r.verdict != Verdict::Shown).count();
    let missed = rows.iter().filter(|r| r.verdict == Verdict::Miss).count();
    // Repetitions of the cells both sides ran (a pair whose other side did not run shows "-").
    let reps: Vec<usize> = rows.iter().filter(|r| r.runs.iter().all(|&n| n > 0)).flat_map(|r| r.runs).collect();
    let (lo, hi) = (reps.iter().min().copied().unwrap_or(0), reps.iter().max().copied().unwrap_or(0));
    let _ = writeln!(
        s,
        "{} of {judged} judged cells within tolerance, {missed} missed (medians of {lo}–{hi} repetitions)",
        judged - missed
    );
    s
}

/// The CSV of the rows.
pub fn csv(rows: &[ParityRow]) -> String {
    let mut s = "pair,link,scenario,metric,ours,theirs,ratio,verdict,tolerance,runs_ours,runs_theirs\n".to_string();
    let o = |v: Option<f64>| v.map_or_else(String::new, |x| format!("{x:.6}"));
    for r in rows {
        let verdict = match r.verdict {
            Verdict::Ok => "ok",
            Verdict::Miss => "miss",
            Verdict::Shown => "",
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{verdict},\"{}\",{},{}",
            r.pair,
            r.link,
            r.scenario,
            r.metric,
            o(r.ours),
            o(r.theirs),
            o(r.ratio),
            r.tolerance.replace('"', "'"),
            r.runs[0],
            r.runs[1]
        );
    }
    s
}

/// Judges `dir` and writes `parity.csv` and `parity.json` into it; returns the rows.
pub fn write(dir: &Path) -> Result<Vec<ParityRow>> {
    let rows = of_results(dir)?;
    crate::output::write_file(&dir.join("parity.csv"), &csv(&rows))?;
    crate::output::write_json(&dir.join("parity.json"), &rows)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(scheme: &str, link: &str, scenario: &str, mbps: f64, p95: f64, retrans: f64) -> RunFacts {
        RunFacts {
            link: link.into(),
            scenario: scenario.into(),
            scheme: scheme.into(),
            throughput_mbps: Some(mbps),
            qdelay_p50_ms: Some(p95 / 2.0),
            qdelay_p95_ms: Some(p95),
            retrans: Some(retrans),
            warmup_retrans: Some(1.0),
            group_mbps: vec![mbps],
            accuracy: None,
        }
    }

    fn spec() -> ParitySpec {
        toml::from_str("name = \"cubic\"\nours = \"a\"\ntheirs = \"k\"\n").unwrap()
    }

    fn verdict(rows: &[ParityRow], metric: &str) -> Verdict {
        rows.iter().find(|r| r.metric.starts_with(metric)).unwrap().verdict
    }

    #[test]
    fn medians_over_repetitions_are_judged_against_the_tolerances() {
        // Ours: 96, 97, 10 (an outlier the median ignores); theirs 100 → 0.97: within 5 %.
        let mut f = vec![];
        for (m, t) in [(96.0, 100.0), (97.0, 100.0), (10.0, 100.0)] {
            f.push(facts("a", "l", "solo", m, 20.0, 3.0));
            f.last_mut().unwrap().throughput_mbps = Some(m);
            f.push(facts("k", "l", "solo", t, 20.0, 2.0));
        }
        let rows = compare(&spec(), &f);
        assert_eq!(verdict(&rows, "throughput"), Verdict::Ok);
        assert_eq!(rows[0].ours, Some(96.0));
        assert_eq!(rows[0].runs, [3, 3]);
        // p95 equal: ok; retransmits 3 vs 2 = 1.5×: at the bound, ok.
        assert_eq!(verdict(&rows, "queueing delay p95"), Verdict::Ok);
        assert_eq!(verdict(&rows, "retransmits after"), Verdict::Ok);
        assert_eq!(verdict(&rows, "queueing delay p50"), Verdict::Shown);
    }

    #[test]
    fn a_gap_beyond_a_tolerance_is_a_miss() {
        let f = vec![facts("a", "l", "solo", 90.0, 23.0, 4.0), facts("k", "l", "solo", 100.0, 20.0, 2.0)];
        let rows = compare(&spec(), &f);
        assert_eq!(verdict(&rows, "throughput"), Verdict::Miss);
        assert_eq!(verdict(&rows, "queueing delay p95"), Verdict::Miss);
        assert_eq!(verdict(&rows, "retransmits after"), Verdict::Miss);
        assert!(table(&rows).contains("0 of 3 judged cells within tolerance, 3 missed"), "{}", table(&rows));
    }

    #[test]
    fn a_mixed_cell_judges_ours_share_of_group_0() {
        let mixed =
            |scheme: &str, g0: f64, g1: f64| RunFacts { group_mbps: vec![g0, g1], ..facts(scheme, "l", "mixed", 0.0, 1.0, 0.0) };
        let rows = compare(&spec(), &[mixed("a", 33.0, 67.0), mixed("k", 59.0, 41.0)]);
        assert_eq!(rows.len(), 1, "a mixed cell has one metric");
        assert_eq!(rows[0].verdict, Verdict::Miss);
        assert!((rows[0].ours.unwrap() - 0.33).abs() < 1e-9 && (rows[0].theirs.unwrap() - 0.59).abs() < 1e-9);
        let rows = compare(&spec(), &[mixed("a", 48.0, 52.0), mixed("k", 59.0, 41.0)]);
        assert_eq!(rows[0].verdict, Verdict::Ok, "the control's share is not judged");
    }

    #[test]
    fn accuracy_is_judged_when_classified() {
        let acc = |scheme: &str, a: f64| RunFacts { accuracy: Some(a), ..facts(scheme, "l", "cbr", 10.0, 1.0, 0.0) };
        assert_eq!(verdict(&compare(&spec(), &[acc("a", 0.90), acc("k", 0.94)]), "classification"), Verdict::Ok);
        assert_eq!(verdict(&compare(&spec(), &[acc("a", 0.80), acc("k", 0.94)]), "classification"), Verdict::Miss);
        let rows = compare(&spec(), &[facts("a", "l", "solo", 1.0, 1.0, 0.0), facts("k", "l", "solo", 1.0, 1.0, 0.0)]);
        assert!(rows.iter().all(|r| r.metric != "classification accuracy"), "no row without a classification");
        // Judging accuracy only: a throughput gap is shown, not judged.
        let only = ParitySpec { judge: Some(vec!["classification accuracy".into()]), ..spec() };
        let rows = compare(&only, &[acc("a", 0.90), RunFacts { throughput_mbps: Some(1.0), ..acc("k", 0.94) }]);
        assert_eq!(verdict(&rows, "throughput"), Verdict::Shown);
        assert_eq!(verdict(&rows, "classification"), Verdict::Ok);
    }

    #[test]
    fn flows_map_to_their_groups_by_index() {
        let g = |count| FlowGroup { count, start_s: 0.0, stop_s: None, stagger_s: 0.0, bytes: None };
        let groups = [g(2), g(2)];
        assert_eq!([0, 1, 2, 3, 4].map(|n| group_of(&groups, n)), [Some(0), Some(0), Some(1), Some(1), None]);
    }

    #[test]
    fn warm_up_retransmissions_are_the_last_sample_before_the_window() {
        let csv = "t_s,flow,throughput_mbps,cwnd_pkts,srtt_ms,delivery_rate_mbps,pacing_rate_mbps,retrans,delivered_ce\n\
                   1.0,a#0,1,1,1,,,5,\n2.0,a#0,1,1,1,,,9,\n2.0,x#0,1,1,1,,,50,\n3.0,a#0,1,1,1,,,12,\n\
                   1.5,a#1,1,1,1,,,2,\n";
        assert_eq!(warmup_retrans(csv, "a", 2.5), Some(11.0));
        assert_eq!(warmup_retrans(csv, "a", 0.5), None);
    }

    #[test]
    fn pairs_must_name_schemes() {
        let text = |p: &str| {
            format!(
                "duration_s = 1\n[network]\nrtt_ms = 10\nbuffer_pkts = 10\n[[links]]\nkind = \"fixed\"\nrate_mbps = 1\n\
                 [[schemes]]\nname = \"a\"\ncc = \"kernel:reno\"\n[[schemes]]\nname = \"k\"\ncc = \"kernel:cubic\"\n{p}"
            )
        };
        let x: Experiment = toml::from_str(&text("[[parity]]\nname = \"r\"\nours = \"a\"\ntheirs = \"k\"\n")).unwrap();
        assert!(validate(&x).is_ok());
        let x: Experiment = toml::from_str(&text("[[parity]]\nname = \"r\"\nours = \"a\"\ntheirs = \"z\"\n")).unwrap();
        let (k, m) = validate(&x).unwrap_err();
        assert_eq!(k, "parity[0].theirs");
        assert!(m.contains("\"z\""), "{m}");
        let x: Experiment =
            toml::from_str(&text("[[parity]]\nname = \"r\"\nours = \"a\"\ntheirs = \"k\"\nshare = [0.6, 0.4]\n")).unwrap();
        assert_eq!(validate(&x).unwrap_err().0, "parity[0].share");
    }
}
