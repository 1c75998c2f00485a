//! What the runs so far produced, over the whole experiment: summary.{csv,json}, averages.csv,
//! runs.csv, indices.csv, queue-ecdf.csv, bursts.csv, and the scatter, indices and queue-ECDF
//! plots.

use std::path::Path;

use super::{RunOptions, QUEUE_SAMPLE_MS};
use crate::config::Loaded;
use crate::error::{Error, Result};
use crate::metrics::indices::Indices;
use crate::output::{self, AverageRow, QueueEcdf, RunRecord, SummaryRow};
use crate::plot;

/// Writes summary.{csv,json}, averages.csv, runs.csv and the scatter plots.
pub fn write_summary(l: &Loaded, o: &RunOptions, records: &[RunRecord]) -> Result<()> {
    let rows = output::summarise(records);
    let avgs = output::averages(&rows);
    let index_rows = output::index_rows(records);
    let ecdfs = output::queue_ecdfs(records);
    output::write_file(&o.out.join("summary.csv"), &output::summary_csv(&rows))?;
    output::write_json(
        &o.out.join("summary.json"),
        &serde_json::json!({ "experiment": l.name, "rows": rows, "averages": avgs, "indices": index_rows }),
    )?;
    output::write_file(&o.out.join("averages.csv"), &output::averages_csv(&avgs))?;
    output::write_file(&o.out.join("runs.csv"), &output::runs_csv(records))?;
    output::write_file(&o.out.join("indices.csv"), &output::indices_csv(&index_rows))?;
    output::write_file(&o.out.join("queue-ecdf.csv"), &output::queue_ecdf_csv(&ecdfs))?;
    if records.iter().any(|r| r.bursts.is_some()) {
        output::write_file(&o.out.join("bursts.csv"), &output::bursts_csv(records))?;
    }
    if o.no_plots || !l.experiment.output.plots {
        return Ok(());
    }
    let plots = o.out.join("plots");
    std::fs::create_dir_all(&plots).map_err(|e| Error::io(format!("creating {}", plots.display()), e))?;
    draw_plots(l, records, &rows, &avgs, &ecdfs, &plots);
    Ok(())
}

/// The scatter plots (p95 queueing delay against utilisation) per link and scenario and averaged
/// over links, the indices per scheme over repetitions and the queue's ECDF, into `plots`; a
/// plot that fails is reported, not fatal.
fn draw_plots(l: &Loaded, records: &[RunRecord], rows: &[SummaryRow], avgs: &[AverageRow], ecdfs: &[QueueEcdf], plots: &Path) {
    let mut warned = false;
    let mut draw = |path: &Path, title: &str, pts: Vec<plot::ScatterPoint>| {
        if pts.is_empty() {
            return;
        }
        if let Err(e) = plot::scatter(path, title, &pts) {
            if !warned {
                eprintln!("ccp-lab: {e}");
                warned = true;
            }
        }
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if seen.contains(&(r.link.as_str(), r.scenario.as_str())) {
            continue;
        }
        seen.push((&r.link, &r.scenario));
        let pts = rows
            .iter()
            .filter(|x| x.link == r.link && x.scenario == r.scenario)
            .filter_map(|x| Some((x.scheme.clone(), x.qdelay_p95_ms?, x.utilisation?)))
            .collect();
        let name = if r.scenario == "solo" { r.link.clone() } else { format!("{}-{}", r.link, r.scenario) };
        let title = format!("{} — {} — {}", l.name, r.link, r.scenario);
        draw(&plots.join(format!("scatter-{name}.png")), &title, pts);
        // The thesis's figures: indices per scheme over repetitions, and the queue's ECDF.
        let same = |x: &RunRecord| x.ok && x.link == r.link && x.scenario == r.scenario;
        let runs: Vec<plot::IndexRuns> = rows
            .iter()
            .filter(|x| x.link == r.link && x.scenario == r.scenario)
            .map(|x| {
                let of = |g: fn(&Indices) -> Option<f64>| -> Vec<f64> {
                    records
                        .iter()
                        .filter(|y| same(y) && y.scheme == x.scheme)
                        .filter_map(|y| y.indices.as_ref().and_then(g))
                        .collect()
                };
                (x.scheme.clone(), [of(|i| i.jain_ideal), of(|i| i.goodput_index), of(|i| i.latency_index)])
            })
            .collect();
        if runs.iter().any(|(_, v)| v.iter().any(|x| !x.is_empty())) {
            if let Err(e) = plot::indices(&plots.join(format!("indices-{name}.png")), &title, &runs) {
                eprintln!("ccp-lab: {e}");
            }
        }
        let series: Vec<(String, Vec<(f64, f64)>)> = ecdfs
            .iter()
            .filter(|((link, scenario, _), _)| *link == r.link && *scenario == r.scenario)
            .map(|((_, _, scheme), e)| (scheme.clone(), e.iter().map(|&(q, f)| (f64::from(q), f)).collect()))
            .collect();
        if !series.is_empty() {
            let t = format!("{title} — queue every {QUEUE_SAMPLE_MS} ms, pooled over runs");
            if let Err(e) = plot::ecdf(&plots.join(format!("queue-ecdf-{name}.png")), &t, "bottleneck queue (packets)", &series) {
                eprintln!("ccp-lab: {e}");
            }
        }
    }
    let mut scenarios: Vec<&str> = avgs.iter().map(|a| a.scenario.as_str()).collect();
    scenarios.dedup();
    for sc in scenarios {
        let pts = avgs
            .iter()
            .filter(|a| a.scenario == sc)
            .filter_map(|a| Some((a.scheme.clone(), a.qdelay_p95_ms?, a.utilisation?)))
            .collect();
        draw(&plots.join(format!("scatter-average-{sc}.png")), &format!("{} — average over links — {sc}", l.name), pts);
    }
}
