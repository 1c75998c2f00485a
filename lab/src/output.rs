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
//! indices.csv                          the Inigo thesis's indices: median/min/max over repetitions
//! queue-ecdf.csv                       the 10 ms queue samples' ECDF per scheme, pooled over runs
//! bursts.csv                           sized flows: per run, each burst and the time between
//! plots/scatter-<link>.png, plots/scatter-average-<scenario>.png
//! plots/indices-<link>.png, plots/queue-ecdf-<link>.png   (-<scenario> unless "solo")
//! traces/                              generated link traces (square waves)
//! runs/<link>/<scenario>/<scheme>/rep<k>/
//!     run.json                         everything about the run, including the router summary
//!     link.csv                         per bin: capacity, delivered, queueing delay, drops, marks
//!     flows.csv                        per flow per sample: throughput, cwnd, srtt, rates, CE
//!     classification.csv               agent schemes with `classify`: truth vs prediction
//!     short-flows.csv                  Poisson TCP cross flows: start, size, completion time
//!     agent.log, agent-trace.jsonl     agent schemes
//!     srtt-histogram.csv               per-ACK SRTT of the scheme's flows: non-empty 10 µs bins
//!     router.csv                       the per-packet log, with keep_packet_logs
//!     run.png                          throughput, queueing delay, cwnd (and classification; the
//!                                      queue per delay class and CNMs per bin when there are any)
//! ```

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::metrics::bottleneck::{LinkBin, LinkMetrics};
use crate::metrics::classify::{ClassPoint, Classification};
use crate::metrics::flows::{FlowPoint, FlowSummary};
use crate::metrics::indices::Indices;
use crate::metrics::queue::{queue_ecdf, QueueSamples};
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
    pub flows: Vec<FlowSummary>,
    /// The scheme's flows together: wire throughput and share of capacity in the window.
    pub scheme_throughput_mbps: Option<f64>,
    pub scheme_share: Option<f64>,
    pub cross_throughput_mbps: Option<f64>,
    /// Jain's index over the scheme's flows (when there are several).
    pub jain: Option<f64>,
    pub classification: Option<Classification>,
    /// Agent schemes: lines in the agent's trace (None: no trace was written).
    pub agent_trace_records: Option<usize>,
    pub router: Option<ccp_router::Summary>,
    /// The router's delivery lateness (actual − scheduled write), p99 over both directions, ms:
    /// the emulation's own error (a few ms when the machine keeps up).
    pub emulator_late_p99_ms: Option<f64>,
    /// Schemes with `receiver_ce_echo`: what the receiver's echo saw.
    pub ce_echo: Option<crate::echo::EchoCounts>,
    /// Schemes with a `receiver`: the enable command and the agent's counters.
    pub receiver: Option<crate::receiver::ReceiverRecord>,
    /// Per-ACK SRTT of the scheme's flows over the run (kernel tcp_probe, all ACKs).
    pub srtt: Option<crate::srtt::SrttSummary>,
    /// The Inigo thesis's indices over the run (specs/inigo.md §9.2).
    pub indices: Option<Indices>,
    /// The bottleneck queue every 10 ms over the run.
    pub queue_10ms: Option<QueueSamples>,
    /// QCN congestion notifications: sent by the router, delivered by the agent, latencies.
    pub cnm: Option<crate::bursts::CnmSummary>,
    /// Sized flows (`flows[].bytes`): each burst's completion, queue, drops and CNMs, and the
    /// same between bursts.
    pub bursts: Option<crate::bursts::BurstSummary>,
    /// With `network.class_delays`: the queue held by each delay class (and the rest of a
    /// phase's measures) over the whole measurement window.
    pub window: Option<crate::bursts::Phase>,
    /// The run's directory, relative to the output directory.
    pub dir: String,
    /// A command that runs this cell again (one repetition).
    pub command: Option<String>,
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
    csv("link,scenario,scheme,repetition,ok,utilisation,qdelay_p50_ms,qdelay_p95_ms,qdelay_mean_ms,scheme_throughput_mbps,scheme_share,cross_throughput_mbps,accuracy,wall_time_s,dir,error,emulator_late_p99_ms,jain_ideal,goodput_index,latency_index,srtt_p99_ms,retx_pct,drop_pct,queue_max_pkts", records, |r| {
        let q = r.link_metrics.as_ref().and_then(|m| m.queue_delay_ms);
        let x = r.indices.as_ref();
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
            of(x.and_then(|x| x.jain_ideal), 4),
            of(x.and_then(|x| x.goodput_index), 4),
            of(x.and_then(|x| x.latency_index), 4),
            of(x.and_then(|x| x.srtt_p99_ms), 3),
            of(x.and_then(|x| x.retx_pct), 4),
            of(x.and_then(|x| x.drop_pct), 4),
            opt(r.queue_10ms.as_ref().and_then(|q| q.max_pkts)),
        ]
    })
}

/// bursts.csv: per successful run with sized flows, one row per burst and one for the time
/// between bursts (`phase` = burst0, burst1, …, between), with the run's CNM totals.
pub fn bursts_csv(records: &[RunRecord]) -> String {
    let mut rows: Vec<(&RunRecord, String, Option<&crate::bursts::Burst>, &crate::bursts::Phase)> = Vec::new();
    for r in records.iter().filter(|r| r.ok) {
        let Some(b) = &r.bursts else { continue };
        for (i, x) in b.bursts.iter().enumerate() {
            rows.push((r, format!("burst{i}"), Some(x), &x.during));
        }
        if let Some(p) = &b.between {
            rows.push((r, "between".into(), None, p));
        }
    }
    csv(
        "link,scenario,scheme,repetition,phase,start_s,end_s,seconds,flows,completed,bytes,fct_mean_s,fct_max_s,\
         backlogged_mbps,sized_mbps,backlogged_share,queue_mean_pkts,queue_p50_pkts,queue_p95_pkts,queue_max_pkts,\
         queue_by_class,drops,cnms,cnms_wan,run_cnms_router,run_cnms_delivered",
        &rows,
        |(r, phase, b, p)| {
            let classes: Vec<String> =
                p.queue_by_class.iter().map(|c| format!("{}={:.2}/{}", c.class, c.mean_pkts, of(c.share, 3))).collect();
            vec![
                text(&r.link),
                text(&r.scenario),
                text(&r.scheme),
                r.repetition.to_string(),
                phase.clone(),
                f(p.start_s, 3),
                f(p.end_s, 3),
                f(p.seconds, 3),
                opt(b.map(|b| b.flows)),
                opt(b.map(|b| b.completed)),
                opt(b.map(|b| b.bytes)),
                of(b.and_then(|b| b.fct_mean_s), 4),
                of(b.and_then(|b| b.fct_max_s), 4),
                f(p.backlogged_mbps, 3),
                f(p.sized_mbps, 3),
                of(p.backlogged_share, 4),
                of(p.queue_mean_pkts, 2),
                of(p.queue_p50_pkts, 1),
                of(p.queue_p95_pkts, 1),
                opt(p.queue_max_pkts),
                text(&classes.join(";")),
                p.drops.to_string(),
                opt(p.cnms),
                opt(p.cnms_wan),
                opt(r.cnm.as_ref().map(|c| c.router_sent)),
                opt(r.cnm.as_ref().map(|c| c.delivered)),
            ]
        },
    )
}

/// A run's per-ACK SRTT histogram: its non-empty bins.
pub fn srtt_histogram_csv(h: &crate::srtt::SrttHistogram) -> String {
    csv("lo_us,hi_us,count", &h.non_empty(), |&(lo, hi, c)| vec![lo.to_string(), hi.to_string(), c.to_string()])
}

/// Median, minimum and maximum over repetitions (the thesis's violin plots, A-19).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Of the finite values (None when there are none); an even count's median is the mean of
    /// the middle two.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().flatten().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1] })
    }
}

/// The thesis's indices of one link × scenario × scheme over its successful repetitions.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct IndexRow {
    pub link: String,
    pub scenario: String,
    pub scheme: String,
    pub runs_ok: u32,
    pub jain_ideal: Option<Spread>,
    pub goodput_index: Option<Spread>,
    pub latency_index: Option<Spread>,
    pub srtt_p99_ms: Option<Spread>,
    pub retx_pct: Option<Spread>,
    pub drop_pct: Option<Spread>,
    pub queue_max_pkts: Option<Spread>,
    /// Runs with the emulator late by more than 10 ms at p99 (their link was not the declared one).
    pub runs_emulator_late: u32,
}

/// Groups runs by link × scenario × scheme (first-seen order) and spreads their indices.
pub fn index_rows(records: &[RunRecord]) -> Vec<IndexRow> {
    first_seen(records, |r| (r.link.clone(), r.scenario.clone(), r.scheme.clone()))
        .into_iter()
        .map(|(link, scenario, scheme)| {
            let ok: Vec<&RunRecord> =
                records.iter().filter(|r| r.ok && r.link == link && r.scenario == scenario && r.scheme == scheme).collect();
            let ix = |g: fn(&Indices) -> Option<f64>| Spread::of(ok.iter().map(|r| r.indices.as_ref().and_then(g)));
            IndexRow {
                runs_ok: ok.len() as u32,
                jain_ideal: ix(|x| x.jain_ideal),
                goodput_index: ix(|x| x.goodput_index),
                latency_index: ix(|x| x.latency_index),
                srtt_p99_ms: ix(|x| x.srtt_p99_ms),
                retx_pct: ix(|x| x.retx_pct),
                drop_pct: ix(|x| x.drop_pct),
                queue_max_pkts: Spread::of(ok.iter().map(|r| r.queue_10ms.as_ref().and_then(|q| q.max_pkts).map(f64::from))),
                runs_emulator_late: ok.iter().filter(|r| r.emulator_late_p99_ms.is_some_and(|l| l > 10.0)).count() as u32,
                link,
                scenario,
                scheme,
            }
        })
        .collect()
}

/// indices.csv: median, min and max of each index per link × scenario × scheme.
pub fn indices_csv(rows: &[IndexRow]) -> String {
    let names = ["jain_ideal", "goodput_index", "latency_index", "srtt_p99_ms", "retx_pct", "drop_pct", "queue_max_pkts"];
    let mut header = "link,scenario,scheme,runs_ok,runs_emulator_late".to_string();
    for n in names {
        header += &format!(",{n}_median,{n}_min,{n}_max");
    }
    csv(&header, rows, |r| {
        let mut v =
            vec![text(&r.link), text(&r.scenario), text(&r.scheme), r.runs_ok.to_string(), r.runs_emulator_late.to_string()];
        for (s, d) in [
            (r.jain_ideal, 4),
            (r.goodput_index, 4),
            (r.latency_index, 4),
            (r.srtt_p99_ms, 3),
            (r.retx_pct, 4),
            (r.drop_pct, 4),
            (r.queue_max_pkts, 1),
        ] {
            v.extend([of(s.map(|s| s.median), d), of(s.map(|s| s.min), d), of(s.map(|s| s.max), d)]);
        }
        v
    })
}

/// A link × scenario × scheme and its pooled queue ECDF ((packets, fraction ≤) per value seen).
pub type QueueEcdf = ((String, String, String), Vec<(u32, f64)>);

/// The pooled queue ECDF of each link × scenario × scheme over its successful repetitions.
pub fn queue_ecdfs(records: &[RunRecord]) -> Vec<QueueEcdf> {
    first_seen(records, |r| (r.link.clone(), r.scenario.clone(), r.scheme.clone()))
        .into_iter()
        .map(|k| {
            let hists = records
                .iter()
                .filter(|r| r.ok && r.link == k.0 && r.scenario == k.1 && r.scheme == k.2)
                .filter_map(|r| r.queue_10ms.as_ref().map(|q| q.histogram.as_slice()));
            let e = queue_ecdf(hists);
            (k, e)
        })
        .filter(|(_, e)| !e.is_empty())
        .collect()
}

/// queue-ecdf.csv: the ECDF of the 10 ms queue samples per scheme, pooled over repetitions, one
/// row per queue length that occurred (fraction of samples at or below it).
pub fn queue_ecdf_csv(ecdfs: &[QueueEcdf]) -> String {
    let rows: Vec<(&(String, String, String), u32, f64)> =
        ecdfs.iter().flat_map(|(k, e)| e.iter().map(move |&(q, f)| (k, q, f))).collect();
    csv("link,scenario,scheme,queue_pkts,ecdf", &rows, |(k, q, e)| {
        vec![text(&k.0), text(&k.1), text(&k.2), q.to_string(), f(*e, 6)]
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
    use crate::metrics::bottleneck::Percentiles;

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
    fn indices_spread_over_repetitions() {
        assert_eq!(
            Spread::of([Some(3.0), None, Some(1.0), Some(f64::NAN), Some(2.0)]),
            Some(Spread { median: 2.0, min: 1.0, max: 3.0 })
        );
        assert_eq!(Spread::of([Some(4.0), Some(1.0)]).map(|s| s.median), Some(2.5));
        assert_eq!(Spread::of([None]), None);
        let rec = |scheme: &str, jfi: f64, late: f64, queue: &[u32], ok: bool| RunRecord {
            indices: Some(Indices { jain_ideal: Some(jfi), latency_index: Some(jfi / 2.0), ..Default::default() }),
            queue_10ms: Some(QueueSamples::of(queue, 10.0)),
            emulator_late_p99_ms: Some(late),
            ..record("a", scheme, 0.9, 10.0, ok)
        };
        let recs = vec![
            rec("inigo", 0.9, 0.2, &[0, 1, 2], true),
            rec("inigo", 0.7, 12.0, &[2, 2, 5], true),
            rec("inigo", 0.1, 0.2, &[100], false),
            rec("cubic", 0.5, 0.2, &[400], true),
        ];
        let rows = index_rows(&recs);
        assert_eq!(rows.len(), 2);
        let i = &rows[0];
        assert_eq!((i.scheme.as_str(), i.runs_ok, i.runs_emulator_late), ("inigo", 2, 1));
        let j = i.jain_ideal.unwrap();
        assert!((j.median - 0.8).abs() < 1e-12 && j.min == 0.7 && j.max == 0.9, "{j:?}");
        assert_eq!(i.queue_max_pkts, Some(Spread { median: 3.5, min: 2.0, max: 5.0 }));
        assert_eq!(i.goodput_index, None);
        let csv = indices_csv(&rows);
        assert!(csv.lines().next().unwrap().contains("jain_ideal_median,jain_ideal_min,jain_ideal_max"), "{csv}");
        assert!(csv.lines().nth(1).unwrap().starts_with("a,solo,inigo,2,1,0.8000,0.7000,0.9000,,,,0.4000"), "{csv}");
        let ecdfs = queue_ecdfs(&recs);
        assert_eq!(ecdfs[0].1, vec![(0, 1.0 / 6.0), (1, 2.0 / 6.0), (2, 5.0 / 6.0), (5, 1.0)], "failed runs are left out");
        let csv = queue_ecdf_csv(&ecdfs);
        assert_eq!(csv.lines().count(), 1 + 4 + 1);
        assert_eq!(csv.lines().last().unwrap(), "a,solo,cubic,400,1.000000");
        let h = crate::srtt::SrttHistogram::of_samples(&[4003, 4007, 4100], 10, 1000);
        assert_eq!(srtt_histogram_csv(&h), "lo_us,hi_us,count\n4000,4010,2\n4100,4110,1\n");
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
