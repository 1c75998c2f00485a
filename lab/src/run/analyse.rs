//! Analysing one recorded run: the bottleneck's metrics and queue samples from the router's
//! packet log, the flows' throughput and the thesis's indices, the agent's trace and its
//! classification, congestion notifications and bursts, and the run's CSV files and plot.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use ccp_qdisc::NANOS_PER_MS;

use super::execute::{keep_or_remove_log, packet_log_path, RunContext};
use super::plan::{delay_classes, rtt_ms};
use super::record::Recorded;
use super::QUEUE_SAMPLE_MS;
use crate::error::{Error, Result};
use crate::metrics::agent_trace::{parse_agent_trace, AgentRecord};
use crate::metrics::bottleneck::{link_series, QueueGrid};
use crate::metrics::classify::{classify, elastic_at, ClassPoint};
use crate::metrics::flows::flow_metrics;
use crate::metrics::indices::{jain, run_indices};
use crate::metrics::queue::QueueSamples;
use crate::metrics::Window;
use crate::output::{self, RunRecord};
use crate::traffic::Role;
use crate::{bursts, plot};

/// Computes the metrics of a recorded run and writes its outputs.
pub(super) fn analyse(ctx: &RunContext<'_>, rec: &mut RunRecord, r: Recorded, duration_s: f64, warmup_s: f64) -> Result<()> {
    let x = &ctx.loaded.experiment;
    let w = Window {
        start_ns: r.traffic_start_ns + (warmup_s * 1e9) as u64,
        end_ns: r.traffic_start_ns + (duration_s * 1e9) as u64,
        bin_ns: x.sample_interval_ms * NANOS_PER_MS,
    };
    rec.window_s = [w.start_ns as f64 / 1e9, w.end_ns as f64 / 1e9];
    rec.emulator_late_p99_ms = emulator_late_p99_ms(&r.summary);
    // The thesis's metrics cover the whole run (its flow schedule starts with the traffic).
    let run_end_ns = r.traffic_start_ns + (duration_s * 1e9) as u64;
    let grid = QueueGrid { start_ns: r.traffic_start_ns, end_ns: run_end_ns, step_ns: QUEUE_SAMPLE_MS * NANOS_PER_MS };
    let log = packet_log_path(&rec.namespace_prefix);
    let file = File::open(&log).map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
    let classes = delay_classes(ctx.loaded);
    let delays: Vec<u64> = classes.iter().map(|c| c.1).collect();
    let parsed = link_series(BufReader::with_capacity(1 << 20, file), ctx.link, w, grid, &delays)
        .map_err(|e| Error::Run(format!("{}: {e}", log.display())));
    keep_or_remove_log(ctx, &log);
    let (lm, bins, series) = parsed?;
    rec.queue_10ms = Some(QueueSamples::of(&series.queue, QUEUE_SAMPLE_MS as f64));
    if let Some((h, no_rtt, other_port)) = &r.srtt {
        rec.srtt = Some(h.summary(*no_rtt, *other_port));
        output::write_file(&ctx.dir.join("srtt-histogram.csv"), &output::srtt_histogram_csv(h))?;
    }
    rec.indices = Some(run_indices(
        &r.plans,
        &r.ticks,
        (r.traffic_start_ns, run_end_ns),
        ctx.link.mean_rate_bps / 1e6,
        rtt_ms(ctx.loaded, ctx.link),
        rec.srtt.as_ref().and_then(|s| s.p99_ms),
        &r.summary.down.counts,
    ));
    rec.router = Some(r.summary);
    let (flows, points) = flow_metrics(&r.plans, &r.ticks, w, lm.capacity_mbps, &r.extra);
    let sum_role = |role: Role| flows.iter().filter(|f| f.role == Some(role)).map(|f| f.throughput_mbps).sum::<f64>();
    let scheme_tputs: Vec<f64> = flows.iter().filter(|f| f.role == Some(Role::Scheme)).map(|f| f.throughput_mbps).collect();
    rec.scheme_throughput_mbps = Some(sum_role(Role::Scheme));
    rec.scheme_share = (lm.capacity_mbps > 0.0).then(|| sum_role(Role::Scheme) / lm.capacity_mbps);
    rec.cross_throughput_mbps = r.plans.iter().any(|p| p.role == Role::Cross).then(|| sum_role(Role::Cross));
    rec.jain = jain(&scheme_tputs);
    output::write_file(&ctx.dir.join("link.csv"), &output::link_csv(&bins))?;
    output::write_file(&ctx.dir.join("flows.csv"), &output::flows_csv(&points))?;
    let shorts: Vec<(String, crate::traffic::ShortFlow)> =
        r.plans.iter().zip(&r.extra).flat_map(|(p, e)| e.short_flows.iter().map(|f| (p.label.clone(), *f))).collect();
    if !shorts.is_empty() {
        output::write_file(&ctx.dir.join("short-flows.csv"), &output::short_flows_csv(&shorts))?;
    }
    let truth = |t| elastic_at(&r.plans, &r.extra, r.traffic_start_ns, t);
    let (records, class_points) = agent_trace(ctx, rec, r.agent_trace.as_ref(), r.router_start, w, truth)?;
    // Congestion notifications, and the bursts of sized flows with the time between them.
    let router_cnms = rec.router.as_ref().map_or(0, |s| s.down.counts.qcn_notifications);
    rec.cnm = bursts::cnm_summary(router_cnms, &records, r.traffic_start_ns);
    let labels: Vec<(String, u64)> = classes.clone();
    let rs = bursts::RunSeries {
        plans: &r.plans,
        extra: &r.extra,
        ticks: &r.ticks,
        series: &series,
        step_ns: grid.step_ns,
        traffic_start_ns: r.traffic_start_ns,
        classes: &labels,
        agent: &records,
    };
    let rel = |t: u64| t.saturating_sub(r.traffic_start_ns) as f64 / 1e9;
    rec.bursts = bursts::bursts(&rs, (rel(w.start_ns), rel(w.end_ns)));
    if !classes.is_empty() {
        rec.window = Some(rs.phase(&[(rel(w.start_ns), rel(w.end_ns))]));
    }
    let detail = (rec.cnm.is_some() || rec.bursts.is_some() || !classes.is_empty()).then(|| {
        let per_bin = |v: &[u32], max: bool| queue_per_bin(v, max, grid, w.bin_ns);
        plot::RunDetail {
            queue: per_bin(&series.queue, false),
            queue_max: per_bin(&series.queue, true),
            queue_by_class: classes
                .iter()
                .zip(&series.queue_by_delay)
                .map(|((label, _), v)| (label.clone(), per_bin(v, false)))
                .collect(),
            cnms: rec.cnm.is_some().then(|| bursts::cnm_bins(&records, w.bin_ns, bins.len())),
        }
    });
    rec.link_metrics = Some(lm);
    rec.flows = flows;
    if !ctx.options.no_plots && x.output.plots {
        let title = format!(
            "{} — {} — {} — {} rep {}",
            ctx.loaded.name, ctx.link.name, ctx.scenario.name, ctx.scheme.name, ctx.repetition
        );
        if let Err(e) = plot::run_plot(&ctx.dir.join("run.png"), &title, &bins, &points, &class_points, detail.as_ref()) {
            eprintln!("ccp-lab: {e}");
        }
    }
    Ok(())
}

/// How late the emulator delivered packets (its own measure), the worse direction's p99: large
/// values mean the machine starved or blocked it and the run's link was not the declared one.
fn emulator_late_p99_ms(summary: &ccp_router::Summary) -> Option<f64> {
    [&summary.down, &summary.up]
        .iter()
        .filter_map(|d| d.delay_error_ms.as_ref().map(|p| p.p99))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

/// The agent's trace records (`trace`: the file and when the agent started; none without a
/// readable trace) and, when the scheme asks for it, their classification against `truth`,
/// written to classification.csv; returns the records and the classification's points.
fn agent_trace(
    ctx: &RunContext<'_>,
    rec: &mut RunRecord,
    trace: Option<&(PathBuf, u64)>,
    router_start: u64,
    w: Window,
    truth: impl Fn(u64) -> bool,
) -> Result<(Vec<AgentRecord>, Vec<ClassPoint>)> {
    let mut class_points = Vec::new();
    let mut records = Vec::new();
    if let Some((trace, agent_start)) = trace {
        if let Ok(text) = std::fs::read_to_string(trace) {
            let (parsed, bad) = parse_agent_trace(&text, router_start, *agent_start);
            if bad > 0 {
                eprintln!("ccp-lab: {}: {bad} lines were not trace records", trace.display());
            }
            rec.agent_trace_records = Some(parsed.len());
            records = parsed;
            if let Some(spec) = &ctx.scheme.classify {
                let c = classify(&records, spec, w, truth);
                output::write_file(&ctx.dir.join("classification.csv"), &output::classification_csv(&c.points))?;
                class_points = c.points.clone();
                rec.classification = Some(c);
            }
        }
    }
    Ok((records, class_points))
}

/// The queue samples `v` on `grid` as the mean (or, with `max`, the maximum) per time bin of
/// `bin_ns`, each at the bin's end, s since the emulator started.
fn queue_per_bin(v: &[u32], max: bool, grid: QueueGrid, bin_ns: u64) -> Vec<(f64, f64)> {
    let mut acc: BTreeMap<u64, (f64, f64, u32)> = BTreeMap::new();
    for (k, &q) in v.iter().enumerate() {
        let t = grid.start_ns + k as u64 * grid.step_ns;
        let e = acc.entry(t / bin_ns.max(1)).or_insert((0.0, 0.0, 0));
        *e = (e.0 + f64::from(q), e.1.max(f64::from(q)), e.2 + 1);
    }
    acc.into_iter()
        .map(|(b, (sum, m, n))| ((b + 1) as f64 * bin_ns as f64 / 1e9, if max { m } else { sum / f64::from(n) }))
        .collect()
}
