//! A run's time series for the page: throughput (the link's capacity, the scheme's flows and
//! any cross traffic), queueing delay and window, read from the run's CSV files and thinned to
//! at most [`MAX_POINTS`] per line, so a 5-minute trace at 100 ms bins (3,000 samples per line)
//! costs the page a few kilobytes per figure.
//!
//! ccp-lab: `link.csv` (capacity, delivered, p95 queueing delay per bin) and `flows.csv` (per
//! flow throughput and cwnd; the scheme's flows are labelled `<scheme>#<n>`). ccp-sim:
//! `throughput.csv` and `queues.csv` of the run's busiest port, the queue shown as the delay it
//! adds at the port's rate; simulated flows have no window series.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::csv::Table;
use super::results::{Origin, Run};

/// Most points a line keeps.
pub const MAX_POINTS: usize = 300;
/// Most flows drawn one by one; more are drawn as their sum (throughput) or left out (window).
const MAX_FLOWS: usize = 6;

/// One labelled line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A run's three panels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub capacity: Vec<(f64, f64)>,
    pub throughput: Vec<Line>,
    pub delay: Vec<(f64, f64)>,
    pub delay_label: &'static str,
    pub window: Vec<Line>,
    /// What is missing or left out (shown under the figure).
    pub notes: Vec<String>,
}

/// A run's series; the error names the missing or empty file.
pub fn read(run: &Run) -> Result<Series, String> {
    match run.origin {
        Origin::Lab => read_lab(&run.dir, &run.scheme),
        Origin::Sim => read_sim(&run.dir),
    }
}

fn table(path: &Path) -> Result<Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let t = Table::parse(&text).ok_or_else(|| format!("{}: empty", path.display()))?;
    if t.rows.is_empty() {
        return Err(format!("{}: no rows", path.display()));
    }
    Ok(t)
}

fn column(t: &Table, path: &Path, names: &[&str]) -> Result<(), String> {
    match names.iter().find(|n| t.column(n).is_none()) {
        Some(n) => Err(format!("{}: no column {n:?}", path.display())),
        None => Ok(()),
    }
}

fn read_lab(dir: &Path, scheme: &str) -> Result<Series, String> {
    let link_path = dir.join("link.csv");
    let link = table(&link_path)?;
    column(&link, &link_path, &["t_s", "capacity_mbps"])?;
    let pick = |k: &str| -> Vec<(f64, f64)> {
        link.rows.iter().filter_map(|r| Some((link.number(r, "t_s")?, link.number(r, k)?))).collect()
    };
    let mut s = Series {
        capacity: thin(&pick("capacity_mbps")),
        delay: thin(&pick("qdelay_p95_ms")),
        delay_label: "queueing delay, p95 per bin (ms)",
        ..Series::default()
    };
    let flows_path = dir.join("flows.csv");
    let flows = match table(&flows_path).and_then(|t| column(&t, &flows_path, &["t_s", "flow", "throughput_mbps"]).map(|_| t)) {
        Ok(t) => t,
        Err(e) => {
            // The link's own delivery stands in for the flows'.
            s.throughput.push(Line { label: "delivered".into(), points: thin(&pick("delivered_mbps")) });
            s.notes.push(e);
            return Ok(s);
        }
    };
    // Per flow, in first-seen order: (throughput, cwnd) by time.
    let mut order: Vec<String> = Vec::new();
    let mut tput: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut cwnd: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in &flows.rows {
        let (Some(t), Some(name)) = (flows.number(r, "t_s"), flows.cell(r, "flow")) else { continue };
        if !tput.contains_key(name) {
            order.push(name.to_string());
        }
        if let Some(v) = flows.number(r, "throughput_mbps") {
            tput.entry(name.to_string()).or_default().push((t, v));
        }
        if let Some(w) = flows.number(r, "cwnd_pkts") {
            cwnd.entry(name.to_string()).or_default().push((t, w));
        }
    }
    let prefix = format!("{scheme}#");
    let (ours, cross): (Vec<String>, Vec<String>) = order.into_iter().partition(|f| f.starts_with(&prefix));
    if ours.len() <= MAX_FLOWS {
        for f in &ours {
            s.throughput.push(Line { label: f.clone(), points: thin(&tput[f]) });
        }
    } else {
        s.throughput.push(Line { label: format!("{scheme}, {} flows", ours.len()), points: thin(&sum(&ours, &tput)) });
    }
    if !cross.is_empty() {
        s.throughput.push(Line { label: "cross traffic".into(), points: thin(&sum(&cross, &tput)) });
    }
    for f in ours.iter().take(MAX_FLOWS) {
        if let Some(w) = cwnd.get(f) {
            s.window.push(Line { label: f.clone(), points: thin(w) });
        }
    }
    if ours.len() > MAX_FLOWS {
        s.notes.push(format!("window of the first {MAX_FLOWS} of {} flows", ours.len()));
    }
    if ours.is_empty() {
        s.notes.push(format!("{}: no flow of {scheme}", flows_path.display()));
    }
    Ok(s)
}

/// The flows' values added up at each time (flows sampled on the same instants).
fn sum(flows: &[String], by: &BTreeMap<String, Vec<(f64, f64)>>) -> Vec<(f64, f64)> {
    let mut acc: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for f in flows {
        for &(t, v) in by.get(f).into_iter().flatten() {
            let e = acc.entry(t.to_bits()).or_insert((t, 0.0));
            e.1 += v;
        }
    }
    let mut v: Vec<(f64, f64)> = acc.into_values().collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn read_sim(dir: &Path) -> Result<Series, String> {
    let summary = dir.join("summary.json");
    let v: Value = std::fs::read_to_string(&summary)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| format!("{}: missing or not JSON", summary.display()))?;
    let port = super::read_sim::bottleneck(&v).ok_or_else(|| format!("{}: no monitored port", summary.display()))?;
    let name = port["name"].as_str().unwrap_or("").to_string();
    let rate_gbps = port["rate_gbps"].as_f64().unwrap_or(0.0);
    let of_port = |file: &str, value: &str| -> Result<Vec<(f64, f64)>, String> {
        let path = dir.join(file);
        let t = table(&path)?;
        column(&t, &path, &["time_us", "port", value])?;
        Ok(t.rows
            .iter()
            .filter(|r| t.cell(r, "port") == Some(name.as_str()))
            .filter_map(|r| Some((t.number(r, "time_us")? / 1e6, t.number(r, value)?)))
            .collect())
    };
    let tput: Vec<(f64, f64)> = of_port("throughput.csv", "gbps")?.into_iter().map(|(t, g)| (t, g * 1000.0)).collect();
    let mut s = Series {
        throughput: vec![Line { label: format!("port {name}"), points: thin(&tput) }],
        delay_label: "queue, as delay at the port's rate (ms)",
        ..Series::default()
    };
    if rate_gbps > 0.0 {
        s.capacity = thin(&tput.iter().map(|&(t, _)| (t, rate_gbps * 1000.0)).collect::<Vec<_>>());
    }
    match of_port("queues.csv", "queue_bytes") {
        Ok(q) if rate_gbps > 0.0 => {
            s.delay = thin(&q.into_iter().map(|(t, b)| (t, b * 8.0 / (rate_gbps * 1e9) * 1e3)).collect::<Vec<_>>());
        }
        Ok(_) => s.notes.push("the port's rate is unknown: no delay".into()),
        Err(e) => s.notes.push(e),
    }
    s.notes.push("simulated flows have no window series".into());
    Ok(s)
}

/// At most [`MAX_POINTS`] points: the mean of each of that many equal runs of consecutive
/// points (time and value), so the line keeps its level and its slow changes.
pub fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let n = points.len();
    (0..MAX_POINTS)
        .map(|k| {
            let chunk = &points[k * n / MAX_POINTS..(k + 1) * n / MAX_POINTS];
            let m = chunk.len() as f64;
            (chunk.iter().map(|p| p.0).sum::<f64>() / m, chunk.iter().map(|p| p.1).sum::<f64>() / m)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_the_level_and_the_span() {
        let long: Vec<(f64, f64)> = (0..3000).map(|i| (f64::from(i) * 0.1, if i < 1500 { 10.0 } else { 20.0 })).collect();
        let t = thin(&long);
        assert_eq!(t.len(), MAX_POINTS);
        assert!(t[0].0 < 1.0 && t[MAX_POINTS - 1].0 > 298.0);
        assert_eq!((t[0].1, t[MAX_POINTS - 1].1), (10.0, 20.0));
        let short = vec![(0.0, 1.0), (1.0, 2.0)];
        assert_eq!(thin(&short), short);
    }

    #[test]
    fn flows_are_summed_at_shared_instants() {
        let mut by = BTreeMap::new();
        by.insert("a".to_string(), vec![(0.1, 1.0), (0.2, 2.0)]);
        by.insert("b".to_string(), vec![(0.1, 3.0)]);
        assert_eq!(sum(&["a".into(), "b".into()], &by), vec![(0.1, 4.0), (0.2, 2.0)]);
    }
}
