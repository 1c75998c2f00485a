//! PNG plots (plotters' bitmap backend; labels rasterised by ab_glyph from a TrueType file found
//! at run time, so no system font library is linked): per run, throughput / queueing delay /
//! cwnd over time (plus classification for agent schemes that report it); per link and on
//! average, the utilisation-versus-p95-delay scatter of the ABC paper's Fig. 2-8; per link, the
//! Inigo thesis's index whisker plots (Figs 4.10–4.12) and queue ECDFs (Figs 4.13/4.18).
//!
//! A missing font or a drawing error skips the plot with a warning: plots never fail a run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::metrics::bottleneck::LinkBin;
use crate::metrics::classify::ClassPoint;
use crate::metrics::flows::FlowPoint;

/// Label fonts tried in order (fonts-dejavu-core, which scripts/setup.sh installs, ships the first).
const FONTS: [&str; 2] =
    ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"];
/// Twenty distinguishable colours (the first eight as before, then darker and lighter companions):
/// an experiment with up to twenty schemes gets one colour each in the pooled plots.
pub(crate) const PALETTE: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(0, 0, 0),
    RGBColor(120, 170, 230),
    RGBColor(250, 150, 150),
    RGBColor(130, 220, 110),
    RGBColor(255, 190, 110),
    RGBColor(80, 40, 130),
    RGBColor(200, 160, 150),
    RGBColor(120, 20, 80),
    RGBColor(10, 100, 100),
    RGBColor(100, 100, 20),
    RGBColor(150, 150, 255),
];
const GREY: RGBColor = RGBColor(150, 150, 150);

/// Registers a label font once per process; the error says which package provides one.
pub(crate) fn font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path = FONTS.iter().find(|p| Path::new(p).exists()).ok_or_else(|| {
            format!("no TrueType font for plot labels (tried {FONTS:?}; install fonts-dejavu-core): plots skipped")
        })?;
        let bytes = std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))?;
        // plotters keeps a 'static reference: the font lives as long as the process.
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font("sans-serif", FontStyle::Normal, leaked).map_err(|_| format!("{path} is not a usable font"))
    })
    .clone()
}

/// A line on a panel.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
    color: RGBColor,
}

struct Panel {
    y_label: &'static str,
    lines: Vec<Line>,
}

/// Points of one flow field over time, grouped by flow (in first-seen order).
fn per_flow(points: &[FlowPoint], get: impl Fn(&FlowPoint) -> Option<f64>) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut order: Vec<String> = Vec::new();
    let mut map: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for p in points {
        if let Some(v) = get(p) {
            if !map.contains_key(&p.flow) {
                order.push(p.flow.clone());
            }
            map.entry(p.flow.clone()).or_default().push((p.t_s, v));
        }
    }
    order.into_iter().filter_map(|f| map.remove(&f).map(|v| (f, v))).collect()
}

/// Extra per-run series: the bottleneck queue (total and per delay class) and CNMs per bin.
#[derive(Debug, Clone, Default)]
pub struct RunDetail {
    /// (t_s, packets): the mean and the maximum of the queue per time bin.
    pub queue: Vec<(f64, f64)>,
    pub queue_max: Vec<(f64, f64)>,
    /// Per propagation delay class: (label, (t_s, mean packets per bin)).
    pub queue_by_class: Vec<(String, Vec<(f64, f64)>)>,
    /// (t_s, CNMs delivered, of them to WAN-class flows) per time bin.
    pub cnms: Option<Vec<(f64, f64, f64)>>,
}

/// The per-run figure; `detail` adds a queue panel and a CNM panel.
pub fn run_plot(
    path: &Path,
    title: &str,
    bins: &[LinkBin],
    flows: &[FlowPoint],
    class: &[ClassPoint],
    detail: Option<&RunDetail>,
) -> Result<(), String> {
    let mut tput = vec![
        Line { label: "capacity".into(), points: bins.iter().map(|b| (b.t_s, b.capacity_mbps)).collect(), color: GREY },
        Line { label: "delivered".into(), points: bins.iter().map(|b| (b.t_s, b.delivered_mbps)).collect(), color: BLACK },
    ];
    for (i, (flow, pts)) in per_flow(flows, |p| Some(p.throughput_mbps)).into_iter().enumerate() {
        tput.push(Line { label: flow, points: pts, color: PALETTE[i % PALETTE.len()] });
    }
    let delay = vec![
        Line {
            label: "p95 per bin".into(),
            points: bins.iter().filter_map(|b| b.qdelay_p95_ms.map(|d| (b.t_s, d))).collect(),
            color: PALETTE[1],
        },
        Line {
            label: "mean per bin".into(),
            points: bins.iter().filter_map(|b| b.qdelay_mean_ms.map(|d| (b.t_s, d))).collect(),
            color: PALETTE[0],
        },
    ];
    let cwnd = per_flow(flows, |p| p.cwnd_pkts.map(f64::from))
        .into_iter()
        .enumerate()
        .map(|(i, (flow, pts))| Line { label: flow, points: pts, color: PALETTE[(i + 2) % PALETTE.len()] })
        .collect();
    let mut panels = vec![
        Panel { y_label: "throughput (Mbit/s)", lines: tput },
        Panel { y_label: "queueing delay (ms)", lines: delay },
        Panel { y_label: "cwnd (packets)", lines: cwnd },
    ];
    if let Some(d) = detail {
        let mut lines = vec![
            Line { label: "queue, max per bin".into(), points: d.queue_max.clone(), color: GREY },
            Line { label: "queue, mean per bin".into(), points: d.queue.clone(), color: BLACK },
        ];
        for (i, (label, pts)) in d.queue_by_class.iter().enumerate() {
            lines.push(Line {
                label: format!("{label} flows, mean"),
                points: pts.clone(),
                color: PALETTE[(i + 3) % PALETTE.len()],
            });
        }
        panels.push(Panel { y_label: "bottleneck queue (packets)", lines });
        if let Some(c) = &d.cnms {
            let mut lines =
                vec![Line { label: "CNMs delivered".into(), points: c.iter().map(|x| (x.0, x.1)).collect(), color: BLACK }];
            if c.iter().any(|x| x.2 > 0.0) {
                lines.push(Line {
                    label: "to WAN-class flows".into(),
                    points: c.iter().map(|x| (x.0, x.2)).collect(),
                    color: PALETTE[1],
                });
            }
            panels.push(Panel { y_label: "CNMs per bin", lines });
        }
    }
    if !class.is_empty() {
        let truth = class.iter().map(|c| (c.t_s, if c.truth_elastic { 1.0 } else { 0.0 })).collect();
        let pred = class.iter().map(|c| (c.t_s, if c.predicted_elastic { 1.05 } else { 0.05 })).collect();
        panels.push(Panel {
            y_label: "elastic (1) / not (0)",
            lines: vec![
                Line { label: "truth".into(), points: truth, color: BLACK },
                Line { label: "agent".into(), points: pred, color: PALETTE[1] },
            ],
        });
    }
    stacked(path, title, &panels)
}

fn stacked(path: &Path, title: &str, panels: &[Panel]) -> Result<(), String> {
    font()?;
    let e = |x: &dyn std::fmt::Display| format!("{}: {x}", path.display());
    let root = BitMapBackend::new(path, (1100, 260 * panels.len() as u32 + 50)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(|x| e(&x))?;
    let x_max = panels.iter().flat_map(|p| &p.lines).flat_map(|l| &l.points).map(|p| p.0).fold(1.0, f64::max);
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let y_max = panel.lines.iter().flat_map(|l| &l.points).map(|p| p.1).filter(|y| y.is_finite()).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..(y_max * 1.1).max(1e-6))
            .map_err(|x| e(&x))?;
        chart.configure_mesh().x_desc("time (s)").y_desc(panel.y_label).draw().map_err(|x| e(&x))?;
        for l in &panel.lines {
            let color = l.color;
            chart
                .draw_series(LineSeries::new(l.points.iter().copied(), color.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(l.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))
}

/// One scheme's point on a scatter: (label, p95 queueing delay ms, utilisation 0..1).
pub type ScatterPoint = (String, f64, f64);

/// Utilisation versus 95th-percentile queueing delay, one labelled point per scheme.
pub fn scatter(path: &Path, title: &str, points: &[ScatterPoint]) -> Result<(), String> {
    font()?;
    let e = |x: &dyn std::fmt::Display| format!("{}: {x}", path.display());
    let root = BitMapBackend::new(path, (800, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    // Delays span orders of magnitude across schemes (CoDel's tens of ms, Cubic's seconds on a
    // slow trace): a log axis, as in the ABC paper.
    let xs = || points.iter().map(|p| p.1).filter(|x| x.is_finite() && *x > 0.0);
    let min = xs().fold(f64::INFINITY, f64::min);
    let lo = if min.is_finite() { (min * 0.7).max(0.1) } else { 0.1 };
    let hi = xs().fold(1.0, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..105.0)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("95th percentile queueing delay (ms, log scale)")
        .y_desc("utilisation (%)")
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (label, x, y)) in points.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let (x, y) = (x.max(lo), y * 100.0);
        chart
            .draw_series(std::iter::once(Circle::new((x, y), 6, color.filled())))
            .map_err(|x| e(&x))?
            .label(label.as_str())
            .legend(move |(a, b)| Circle::new((a + 8, b), 5, color.filled()));
        chart.draw_series(std::iter::once(Text::new(label.clone(), (x, y + 2.5), ("sans-serif", 14)))).map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

/// One scheme's values per run of the three indices (JFI over ideal shares, goodput index,
/// latency index).
pub type IndexRuns = (String, [Vec<f64>; 3]);

/// The thesis's Figs 4.10–4.12 as whisker plots: per scheme, every run's value (small dots), the
/// range (min–max whisker) and the median (bar), for JFI, goodput index and latency index.
pub fn indices(path: &Path, title: &str, schemes: &[IndexRuns]) -> Result<(), String> {
    font()?;
    let e = |x: &dyn std::fmt::Display| format!("{}: {x}", path.display());
    let n = schemes.len().max(1) as i32;
    let root = BitMapBackend::new(path, ((110 * n as u32).max(700), 3 * 300 + 50)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(|x| e(&x))?;
    let names = ["Jain's index over ideal shares", "goodput index", "latency index"];
    for (k, area) in root.split_evenly((3, 1)).iter().enumerate() {
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..1.05)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc(names[k])
            .x_labels(schemes.len().max(1))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    schemes.get(*i as usize).map_or_else(String::new, |s| s.0.clone())
                }
                SegmentValue::Last => String::new(),
            })
            .draw()
            .map_err(|x| e(&x))?;
        for (i, (_, runs)) in schemes.iter().enumerate() {
            let mut v: Vec<f64> = runs[k].iter().copied().filter(|x| x.is_finite()).collect();
            if v.is_empty() {
                continue;
            }
            v.sort_by(f64::total_cmp);
            let color = PALETTE[i % PALETTE.len()];
            let x = SegmentValue::CenterOf(i as i32);
            let (lo, hi) = (v[0], v[v.len() - 1]);
            let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
            chart
                .draw_series(std::iter::once(PathElement::new(vec![(x.clone(), lo), (x.clone(), hi)], color.stroke_width(2))))
                .map_err(|x| e(&x))?;
            chart.draw_series(v.iter().map(|&y| Circle::new((x.clone(), y), 3, color.mix(0.5).filled()))).map_err(|x| e(&x))?;
            // The median as a short bar across the whisker (an 18-pixel element at the point).
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x.clone(), median)) + Rectangle::new([(-9, -2), (9, 2)], color.filled()),
                ))
                .map_err(|x| e(&x))?;
        }
    }
    root.present().map_err(|x| e(&x))
}

/// Empirical CDFs as step lines, one per scheme (the thesis's Figs 4.13/4.18 for the queue):
/// `series` holds (label, [(value, fraction ≤ value)]) in increasing value.
pub fn ecdf(path: &Path, title: &str, x_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> Result<(), String> {
    font()?;
    let e = |x: &dyn std::fmt::Display| format!("{}: {x}", path.display());
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let x_max = series.iter().flat_map(|(_, p)| p).map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..1.02)
        .map_err(|x| e(&x))?;
    chart.configure_mesh().x_desc(x_label).y_desc("fraction of samples ≤ x").draw().map_err(|x| e(&x))?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut steps = Vec::with_capacity(pts.len() * 2 + 1);
        let mut prev = 0.0;
        for &(x, f) in pts {
            steps.push((x, prev));
            steps.push((x, f));
            prev = f;
        }
        steps.push((x_max, prev));
        chart
            .draw_series(LineSeries::new(steps, color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_written_when_a_font_exists() {
        if font().is_err() {
            eprintln!("SKIPPED plots_are_written_when_a_font_exists: no font (install fonts-dejavu-core)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("ccplab-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bins: Vec<LinkBin> = (1..=20)
            .map(|i| LinkBin {
                t_s: f64::from(i) * 0.1,
                capacity_mbps: 12.0,
                delivered_mbps: 11.0,
                qdelay_p95_ms: Some(f64::from(i)),
                ..LinkBin::default()
            })
            .collect();
        let flows: Vec<FlowPoint> = (1..=20)
            .map(|i| FlowPoint {
                t_s: f64::from(i) * 0.1,
                flow: "a".into(),
                throughput_mbps: 10.0,
                cwnd_pkts: Some(i),
                ..FlowPoint::default()
            })
            .collect();
        let class = vec![ClassPoint { t_s: 1.0, flow: "a".into(), truth_elastic: true, predicted_elastic: false, value: 1.0 }];
        let p = dir.join("run.png");
        run_plot(&p, "test", &bins, &flows, &class, None).unwrap();
        assert!(std::fs::metadata(&p).unwrap().len() > 1000);
        let detail = RunDetail {
            queue: (0..200).map(|k| (f64::from(k) * 0.01, f64::from(k % 30))).collect(),
            queue_max: (0..200).map(|k| (f64::from(k) * 0.01, f64::from(k % 40))).collect(),
            queue_by_class: vec![("default".into(), (0..200).map(|k| (f64::from(k) * 0.01, f64::from(k % 10))).collect())],
            cnms: Some((1..=20).map(|i| (f64::from(i) * 0.1, f64::from(i % 4), f64::from(i % 2))).collect()),
        };
        let pd = dir.join("run-detail.png");
        run_plot(&pd, "test", &bins, &flows, &[], Some(&detail)).unwrap();
        assert!(std::fs::metadata(&pd).unwrap().len() > std::fs::metadata(&p).unwrap().len() / 2);
        let s = dir.join("scatter.png");
        scatter(&s, "scatter", &[("cubic".into(), 500.0, 0.95), ("bbr".into(), 200.0, 0.9)]).unwrap();
        assert!(std::fs::metadata(&s).unwrap().len() > 1000);
        let ix = dir.join("indices.png");
        let runs = |a: f64| [vec![a, a - 0.1, a + 0.05], vec![0.9, 0.95], vec![a / 2.0]];
        indices(
            &ix,
            "indices",
            &[("cubic".into(), runs(0.8)), ("inigo-rtt".into(), runs(0.95)), ("none".into(), Default::default())],
        )
        .unwrap();
        assert!(std::fs::metadata(&ix).unwrap().len() > 1000);
        let q = dir.join("ecdf.png");
        ecdf(&q, "queue", "queue (packets)", &[("cubic".into(), vec![(0.0, 0.1), (400.0, 1.0)]), ("x".into(), vec![])]).unwrap();
        assert!(std::fs::metadata(&q).unwrap().len() > 1000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
