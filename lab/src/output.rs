//! What an experiment writes: per-run CSV time series and a JSON record, and across runs a
//! summary (one row per link × scenario × scheme, averaged over repetitions), averages across
//! links per scheme, and the index of every run.
//!
//! Layout under the output directory:
//! ```text
//! experiment.toml                      the file the experiment ran from
//! summary.csv, summary.json            per link × scenario × scheme (means over repetitions)
//! averages.csv                         per scenario × scheme, means over links
//! runs.csv                             one row per run (failed ones with their error)
//! plots/scatter-<link>.png, plots/scatter-average-<scenario>.png
//! traces/                              generated link traces (square waves)
//! runs/<link>/<scenario>/<scheme>/rep<k>/
//!     run.json                         everything about the run, including the router summary
//!     link.csv                         per bin: capacity, delivered, queueing delay, drops, marks
//!     flows.csv                        per flow per sample: throughput, cwnd, srtt, rates, CE
//!     classification.csv               agent schemes with `classify`: truth vs prediction
//!     short-flows.csv                  Poisson TCP cross flows: start, size, completion time
//!     agent.log, agent-trace.jsonl     agent schemes
//!     router.csv                       the per-packet log, with keep_packet_logs
//!     run.png                          throughput, queueing delay, cwnd (and classification)
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::metrics::{ClassPoint, FlowPoint, LinkBin, LinkMetrics};
use crate::traffic::ShortFlow;

/// Everything about one run (run.json), also the input of the summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunRecord {
    pub link: String,
    pub scenario: String,
    pub scheme: String,
    pub repetition: u32,
    pub scheme_description: String,
    pub link_source: String,
    pub namespace_prefix: String,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub rtt_ms: f64,
    pub buffer_pkts: u32,
    /// The measurement window, s since the emulator started.
    pub window_s: [f64; 2],
    pub ok: bool,
    pub error: Option<String>,
    pub wall_time_s: f64,
    pub link_metrics: Option<LinkMetrics>,
    pub flows: Vec<crate::metrics::FlowSummary>,
    /// The scheme's flows together: wire throughput and share of capacity in the window.
    pub scheme_throughput_mbps: Option<f64>,
    pub scheme_share: Option<f64>,
    pub cross_throughput_mbps: Option<f64>,
    /// Jain's index over the scheme's flows (when there are several).
    pub jain: Option<f64>,
    pub classification: Option<crate::metrics::Classification>,
    /// Agent schemes: lines in the agent's trace (None: no trace was written).
    pub agent_trace_records: Option<usize>,
    pub router: Option<ccp_router::Summary>,
    /// The router's delivery lateness (actual − scheduled write), p99 over both directions, ms:
    /// the emulation's own error (a few ms when the machine keeps up).
    pub emulator_late_p99_ms: Option<f64>,
    /// Schemes with `receiver_ce_echo`: what the receiver's echo saw.
    pub ce_echo: Option<crate::echo::EchoCounts>,
    /// The run's directory, relative to the output directory.
    pub dir: String,
}

pub fn write_file(path: &Path, contents: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    }
    std::fs::write(path, contents).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::Run(format!("encoding {}: {e}", path.display())))?;
    write_file(path, &(text + "\n"))
}

/// A CSV cell for an optional number (empty when absent).
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// A CSV cell for a float with a fixed number of decimals.
fn f(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

fn of(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| f(x, decimals)).unwrap_or_default()
}

/// A CSV cell for free text (quoted when needed).
fn text(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\"").replace('\n', " "))
    } else {
        s.to_string()
    }
}

/// A CSV table: the header, then one line of `cells` per row.
fn csv<T>(header: &str, rows: &[T], cells: impl Fn(&T) -> Vec<String>) -> String {
    let mut s = format!("{header}\n");
    for r in rows {
        s += &cells(r).join(",");
        s.push('\n');
    }
    s
}

pub fn link_csv(bins: &[LinkBin]) -> String {
    csv("t_s,capacity_mbps,delivered_mbps,qdelay_mean_ms,qdelay_p95_ms,qdelay_max_ms,drops,ce_marks", bins, |b| {
        vec![
            f(b.t_s, 3),
            f(b.capacity_mbps, 4),
            f(b.delivered_mbps, 4),
            of(b.qdelay_mean_ms, 3),
            of(b.qdelay_p95_ms, 3),
            of(b.qdelay_max_ms, 3),
            b.drops.to_string(),
            b.marks.to_string(),
        ]
    })
}

pub fn flows_csv(points: &[FlowPoint]) -> String {
    csv("t_s,flow,throughput_mbps,cwnd_pkts,srtt_ms,delivery_rate_mbps,pacing_rate_mbps,retrans,delivered_ce", points, |p| {
        vec![
            f(p.t_s, 3),
            text(&p.flow),
            f(p.throughput_mbps, 4),
            opt(p.cwnd_pkts),
            of(p.srtt_ms, 3),
            of(p.delivery_rate_mbps, 4),
            of(p.pacing_rate_mbps, 4),
            opt(p.retrans),
            opt(p.delivered_ce),
        ]
    })
}

pub fn classification_csv(points: &[ClassPoint]) -> String {
    csv("t_s,flow,truth_elastic,predicted_elastic,value", points, |p| {
        vec![
            f(p.t_s, 3),
            text(&p.flow),
            u8::from(p.truth_elastic).to_string(),
            u8::from(p.predicted_elastic).to_string(),
            p.value.to_string(),
        ]
    })
}

pub fn short_flows_csv(flows: &[(String, ShortFlow)]) -> String {
    csv("generator,start_s,size_bytes,duration_s,completed", flows, |(g, x)| {
        vec![text(g), f(x.start_s, 4), x.size_bytes.to_string(), f(x.duration_s, 4), u8::from(x.completed).to_string()]
    })
}

/// runs.csv: one row per run.
pub fn runs_csv(records: &[RunRecord]) -> String {
    csv("link,scenario,scheme,repetition,ok,utilisation,qdelay_p50_ms,qdelay_p95_ms,qdelay_mean_ms,scheme_throughput_mbps,scheme_share,cross_throughput_mbps,accuracy,wall_time_s,dir,error,emulator_late_p99_ms", records, |r| {
        let q = r.link_metrics.as_ref().and_then(|m| m.queue_delay_ms);
        vec![
            text(&r.link),
            text(&r.scenario),
            text(&r.scheme),
            r.repetition.to_string(),
            u8::from(r.ok).to_string(),
            of(r.link_metrics.as_ref().map(|m| m.utilisation), 4),
            of(q.map(|q| q.p50), 2),
            of(q.map(|q| q.p95), 2),
            of(q.map(|q| q.mean), 2),
            of(r.scheme_throughput_mbps, 3),
            of(r.scheme_share, 4),
            of(r.cross_throughput_mbps, 3),
            of(r.classification.as_ref().and_then(|c| c.accuracy), 4),
            f(r.wall_time_s, 1),
            text(&r.dir),
            text(r.error.as_deref().unwrap_or("")),
            of(r.emulator_late_p99_ms, 2),
        ]
    })
}

/// One link × scenario × scheme, averaged over its successful repetitions.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SummaryRow {
    pub link: String,
    pub scenario: String,
    pub scheme: String,
    pub runs_ok: u32,
    pub runs_failed: u32,
    pub utilisation: Option<f64>,
    pub capacity_mbps: Option<f64>,
    pub delivered_mbps: Option<f64>,
    pub qdelay_p50_ms: Option<f64>,
    pub qdelay_p95_ms: Option<f64>,
    pub qdelay_p99_ms: Option<f64>,
    pub qdelay_mean_ms: Option<f64>,
    pub scheme_throughput_mbps: Option<f64>,
    pub scheme_share: Option<f64>,
    pub cross_throughput_mbps: Option<f64>,
    pub jain: Option<f64>,
    pub accuracy: Option<f64>,
    /// The first failure's message, if any run failed.
    pub error: Option<String>,
}

fn mean(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let xs: Vec<f64> = v.flatten().filter(|x| x.is_finite()).collect();
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The distinct keys of `items`, in the order they first appear (the order runs were declared).
fn first_seen<T, K: PartialEq>(items: &[T], key: impl Fn(&T) -> K) -> Vec<K> {
    let mut keys = Vec::new();
    for k in items.iter().map(key) {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys
}

/// Groups runs by link × scenario × scheme (in first-seen order) and averages them.
pub fn summarise(records: &[RunRecord]) -> Vec<SummaryRow> {
    first_seen(records, |r| (r.link.clone(), r.scenario.clone(), r.scheme.clone()))
        .into_iter()
        .map(|(link, scenario, scheme)| {
            let group: Vec<&RunRecord> =
                records.iter().filter(|r| r.link == link && r.scenario == scenario && r.scheme == scheme).collect();
            let ok: Vec<&RunRecord> = group.iter().copied().filter(|r| r.ok).collect();
            let lm = |g: fn(&LinkMetrics) -> Option<f64>| mean(ok.iter().map(|r| r.link_metrics.as_ref().and_then(g)));
            SummaryRow {
                runs_ok: ok.len() as u32,
                runs_failed: (group.len() - ok.len()) as u32,
                utilisation: lm(|m| Some(m.utilisation)),
                capacity_mbps: lm(|m| Some(m.capacity_mbps)),
                delivered_mbps: lm(|m| Some(m.delivered_mbps)),
                qdelay_p50_ms: lm(|m| m.queue_delay_ms.map(|q| q.p50)),
                qdelay_p95_ms: lm(|m| m.queue_delay_ms.map(|q| q.p95)),
                qdelay_p99_ms: lm(|m| m.queue_delay_ms.map(|q| q.p99)),
                qdelay_mean_ms: lm(|m| m.queue_delay_ms.map(|q| q.mean)),
                scheme_throughput_mbps: mean(ok.iter().map(|r| r.scheme_throughput_mbps)),
                scheme_share: mean(ok.iter().map(|r| r.scheme_share)),
                cross_throughput_mbps: mean(ok.iter().map(|r| r.cross_throughput_mbps)),
                jain: mean(ok.iter().map(|r| r.jain)),
                accuracy: mean(ok.iter().map(|r| r.classification.as_ref().and_then(|c| c.accuracy))),
                error: group.iter().find_map(|r| r.error.clone()),
                link,
                scenario,
                scheme,
            }
        })
        .collect()
}

/// One scenario × scheme averaged over the links where it succeeded.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AverageRow {
    pub scenario: String,
    pub scheme: String,
    pub links: u32,
    pub utilisation: Option<f64>,
    pub qdelay_p50_ms: Option<f64>,
    pub qdelay_p95_ms: Option<f64>,
    pub qdelay_mean_ms: Option<f64>,
    pub scheme_share: Option<f64>,
    pub accuracy: Option<f64>,
}

pub fn averages(rows: &[SummaryRow]) -> Vec<AverageRow> {
    first_seen(rows, |r| (r.scenario.clone(), r.scheme.clone()))
        .into_iter()
        .map(|(scenario, scheme)| {
            let g: Vec<&SummaryRow> =
                rows.iter().filter(|r| r.scenario == scenario && r.scheme == scheme && r.runs_ok > 0).collect();
            AverageRow {
                links: g.len() as u32,
                utilisation: mean(g.iter().map(|r| r.utilisation)),
                qdelay_p50_ms: mean(g.iter().map(|r| r.qdelay_p50_ms)),
                qdelay_p95_ms: mean(g.iter().map(|r| r.qdelay_p95_ms)),
                qdelay_mean_ms: mean(g.iter().map(|r| r.qdelay_mean_ms)),
                scheme_share: mean(g.iter().map(|r| r.scheme_share)),
                accuracy: mean(g.iter().map(|r| r.accuracy)),
                scenario,
                scheme,
            }
        })
        .collect()
}

pub fn summary_csv(rows: &[SummaryRow]) -> String {
    csv("link,scenario,scheme,runs_ok,runs_failed,utilisation,capacity_mbps,delivered_mbps,qdelay_p50_ms,qdelay_p95_ms,qdelay_p99_ms,qdelay_mean_ms,scheme_throughput_mbps,scheme_share,cross_throughput_mbps,jain,accuracy,error", rows, |r| {
        vec![
            text(&r.link),
            text(&r.scenario),
            text(&r.scheme),
            r.runs_ok.to_string(),
            r.runs_failed.to_string(),
            of(r.utilisation, 4),
            of(r.capacity_mbps, 3),
            of(r.delivered_mbps, 3),
            of(r.qdelay_p50_ms, 2),
            of(r.qdelay_p95_ms, 2),
            of(r.qdelay_p99_ms, 2),
            of(r.qdelay_mean_ms, 2),
            of(r.scheme_throughput_mbps, 3),
            of(r.scheme_share, 4),
            of(r.cross_throughput_mbps, 3),
            of(r.jain, 4),
            of(r.accuracy, 4),
            text(r.error.as_deref().unwrap_or("")),
        ]
    })
}

pub fn averages_csv(rows: &[AverageRow]) -> String {
    csv("scenario,scheme,links,utilisation,qdelay_p50_ms,qdelay_p95_ms,qdelay_mean_ms,scheme_share,accuracy", rows, |r| {
        vec![
            text(&r.scenario),
            text(&r.scheme),
            r.links.to_string(),
            of(r.utilisation, 4),
            of(r.qdelay_p50_ms, 2),
            of(r.qdelay_p95_ms, 2),
            of(r.qdelay_mean_ms, 2),
            of(r.scheme_share, 4),
            of(r.accuracy, 4),
        ]
    })
}

/// A fixed-width text table of the summary for the terminal.
pub fn summary_table(rows: &[SummaryRow], avgs: &[AverageRow]) -> String {
    let pct = |v: Option<f64>| v.map_or_else(|| "-".into(), |x| format!("{:.1}", x * 100.0));
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |x| format!("{x:.1}"));
    let line = |c: [&str; 9]| {
        format!("{:<28} {:<12} {:<14} {:>6} {:>9} {:>9} {:>9} {:>8} {:>6}", c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8])
    };
    let mut s = line(["link", "scenario", "scheme", "util%", "p50 ms", "p95 ms", "mean ms", "share%", "acc%"]) + "\n";
    for r in rows {
        let (util, p50, p95, mean) = (pct(r.utilisation), ms(r.qdelay_p50_ms), ms(r.qdelay_p95_ms), ms(r.qdelay_mean_ms));
        let (share, acc) = (pct(r.scheme_share), pct(r.accuracy));
        let failed = if r.runs_failed > 0 { format!("  ({} failed)", r.runs_failed) } else { String::new() };
        let _ = writeln!(s, "{}{failed}", line([&r.link, &r.scenario, &r.scheme, &util, &p50, &p95, &mean, &share, &acc]));
    }
    if rows.iter().map(|r| &r.link).collect::<std::collections::HashSet<_>>().len() > 1 {
        let _ = writeln!(s, "average over links:");
        for a in avgs {
            let links = format!("({} links)", a.links);
            let (util, p50, p95, mean) = (pct(a.utilisation), ms(a.qdelay_p50_ms), ms(a.qdelay_p95_ms), ms(a.qdelay_mean_ms));
            let (share, acc) = (pct(a.scheme_share), pct(a.accuracy));
            let _ = writeln!(s, "{}", line([&links, &a.scenario, &a.scheme, &util, &p50, &p95, &mean, &share, &acc]));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Percentiles;

    fn record(link: &str, scheme: &str, util: f64, p95: f64, ok: bool) -> RunRecord {
        RunRecord {
            link: link.into(),
            scenario: "solo".into(),
            scheme: scheme.into(),
            ok,
            error: (!ok).then(|| "boom, it failed".to_string()),
            link_metrics: ok.then(|| LinkMetrics {
                utilisation: util,
                queue_delay_ms: Some(Percentiles { count: 1, mean: p95 / 2.0, p50: p95 / 3.0, p95, p99: p95, max: p95 }),
                ..LinkMetrics::default()
            }),
            scheme_share: ok.then_some(util),
            ..RunRecord::default()
        }
    }

    #[test]
    fn summary_averages_repetitions_and_links() {
        let recs = vec![
            record("a", "cubic", 0.9, 100.0, true),
            record("a", "cubic", 0.7, 300.0, true),
            record("a", "cubic", 0.0, 0.0, false),
            record("b", "cubic", 0.5, 50.0, true),
            record("a", "bbr", 0.8, 80.0, true),
        ];
        let rows = summarise(&recs);
        assert_eq!(rows.len(), 3);
        let a = &rows[0];
        assert_eq!((a.link.as_str(), a.scheme.as_str(), a.runs_ok, a.runs_failed), ("a", "cubic", 2, 1));
        assert!((a.utilisation.unwrap() - 0.8).abs() < 1e-12);
        assert!((a.qdelay_p95_ms.unwrap() - 200.0).abs() < 1e-12);
        assert_eq!(a.error.as_deref(), Some("boom, it failed"));
        let avg = averages(&rows);
        let cubic = avg.iter().find(|r| r.scheme == "cubic").unwrap();
        assert_eq!(cubic.links, 2);
        assert!((cubic.utilisation.unwrap() - 0.65).abs() < 1e-12);
        assert!((cubic.qdelay_p95_ms.unwrap() - 125.0).abs() < 1e-12);
        let csv = summary_csv(&rows);
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.lines().nth(1).unwrap().ends_with("\"boom, it failed\""), "{csv}");
        let table = summary_table(&rows, &avg);
        assert!(table.contains("average over links") && table.contains("(1 failed)"), "{table}");
        assert_eq!(runs_csv(&recs).lines().count(), 6);
    }

    #[test]
    fn csv_cells() {
        assert_eq!(text("plain"), "plain");
        assert_eq!(text("a,b"), "\"a,b\"");
        assert_eq!(text("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(opt::<u32>(None), "");
        assert_eq!(of(Some(1.23456), 2), "1.23");
        let bins =
            vec![LinkBin { t_s: 0.1, capacity_mbps: 12.0, delivered_mbps: 6.0, qdelay_p95_ms: Some(3.0), ..LinkBin::default() }];
        assert_eq!(link_csv(&bins).lines().nth(1).unwrap(), "0.100,12.0000,6.0000,,3.000,,0,0");
    }
}
