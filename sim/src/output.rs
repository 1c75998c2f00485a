//! Writing results: CSV files, a JSON summary, and plots (PNG and/or SVG).
//!
//! Files in the output directory:
//! - `summary.json`: counters, speed, per-port throughput and queue statistics, FCT buckets;
//! - `flows.csv`: one row per started flow (FCT, ideal FCT, slowdown, retransmits, goodput, RTT,
//!   its algorithm and label);
//! - `fct_buckets.csv`: FCT and slowdown mean/p50/p95/p99 per flow-size bucket;
//! - `queues.csv`, `throughput.csv`, `switch_buffer.csv`: the periodic samples (`queues.csv` with
//!   one more column per egress queue under strict priority);
//! - `queue.{png,svg}`, `throughput.{png,svg}`, `slowdown.{png,svg}`: plots.
//!
//! Plots are drawn with plotters' pure-Rust font rasterizer, which needs a TrueType font file
//! (DejaVu Sans or Liberation Sans from Debian, or the file named by `CCP_SIM_FONT`); without one,
//! the plots are skipped with a warning and the CSV files are still written.

use std::error::Error;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::stats::Results;
use crate::time::{to_us_f64, BITS_PER_BYTE};

/// Font files tried, in order, after `$CCP_SIM_FONT`.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

const PLOT_SIZE: (u32, u32) = (1000, 600);
/// At most this many series per time plot (the first monitored ports), to stay readable.
const MAX_SERIES: usize = 8;

/// Writes every CSV file and the summary; returns the paths written.
pub fn write_data(r: &Results, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, write: &dyn Fn(&mut dyn io::Write) -> io::Result<()>| -> io::Result<()> {
        let p = dir.join(name);
        let mut w = io::BufWriter::new(std::fs::File::create(&p)?);
        write(&mut w)?;
        w.flush()?;
        written.push(p);
        Ok(())
    };
    let summary = serde_json::to_string_pretty(r).map_err(io::Error::other)? + "\n";
    put("summary.json", &|w| w.write_all(summary.as_bytes()))?;

    // Row by row: a run of millions of flows would otherwise hold the whole file in memory.
    put("flows.csv", &|w| write_flows_csv(r, w))?;

    let mut s = String::from(
        "class,lo_bytes,hi_bytes,flows,completed,fct_mean_us,fct_p50_us,fct_p95_us,fct_p99_us,slowdown_mean,slowdown_p50,slowdown_p95,slowdown_p99\n",
    );
    for b in &r.buckets {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.4},{:.4},{:.4},{:.4}",
            b.class,
            b.lo_bytes,
            b.hi_bytes.map_or(String::new(), |h| h.to_string()),
            b.flows,
            b.completed,
            b.fct_mean_us,
            b.fct_p50_us,
            b.fct_p95_us,
            b.fct_p99_us,
            b.slowdown_mean,
            b.slowdown_p50,
            b.slowdown_p95,
            b.slowdown_p99
        );
    }
    put("fct_buckets.csv", &|w| w.write_all(s.as_bytes()))?;

    let sm = &r.samples;
    let mut q = String::from("time_us,port,queue_bytes");
    for j in 0..sm.queue_bytes_by_queue.first().map_or(0, Vec::len) {
        let _ = write!(q, ",q{j}_bytes");
    }
    q.push('\n');
    let mut t = String::from("time_us,port,gbps\n");
    for (i, name) in sm.names.iter().enumerate() {
        for (k, &time) in sm.times.iter().enumerate() {
            let _ = write!(q, "{:.3},{name},{}", to_us_f64(time), sm.queue_bytes[i][k]);
            for by_queue in sm.queue_bytes_by_queue.get(i).into_iter().flatten() {
                let _ = write!(q, ",{}", by_queue[k]);
            }
            q.push('\n');
            if k > 0 {
                let _ = writeln!(t, "{:.3},{name},{:.4}", to_us_f64(time), throughput_gbps(r, i, k));
            }
        }
    }
    put("queues.csv", &|w| w.write_all(q.as_bytes()))?;
    put("throughput.csv", &|w| w.write_all(t.as_bytes()))?;
    let mut b = String::from("time_us,switch,buffer_bytes\n");
    for (i, (name, _)) in r.switch_peak_buffer_bytes.iter().enumerate() {
        for (k, &time) in sm.times.iter().enumerate() {
            let _ = writeln!(b, "{:.3},{name},{}", to_us_f64(time), sm.switch_buffer[i][k]);
        }
    }
    put("switch_buffer.csv", &|w| w.write_all(b.as_bytes()))?;
    Ok(written)
}

/// `flows.csv`: one row per started flow.
fn write_flows_csv(r: &Results, w: &mut dyn io::Write) -> io::Result<()> {
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.3}"));
    w.write_all(b"id,class,src,dst,bytes,start_us,finish_us,fct_us,ideal_us,slowdown,retransmits,timeouts,goodput_gbps,min_rtt_us,mean_rtt_us,algorithm,label\n")?;
    for f in &r.flows {
        writeln!(
            w,
            "{},{},{},{},{},{:.3},{},{},{:.3},{},{},{},{:.6},{},{},{},{}",
            f.id,
            f.class,
            f.src,
            f.dst,
            f.bytes.map_or(String::new(), |b| b.to_string()),
            f.start_us,
            opt(f.finish_us),
            opt(f.fct_us),
            f.ideal_us,
            f.slowdown.map_or(String::new(), |x| format!("{x:.4}")),
            f.retransmits,
            f.timeouts,
            f.goodput_gbps,
            opt(f.min_rtt_us),
            opt(f.mean_rtt_us),
            f.algorithm,
            f.label.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}

/// Throughput of monitored port `i` over the sample interval ending at sample `k`, Gbit/s.
fn throughput_gbps(r: &Results, i: usize, k: usize) -> f64 {
    let sm = &r.samples;
    let bytes = sm.tx_bytes[i][k] - sm.tx_bytes[i][k - 1];
    let dt = (sm.times[k] - sm.times[k - 1]).max(1) as f64 / 1e12;
    bytes as f64 * BITS_PER_BYTE as f64 / dt / 1e9
}

/// Registers a TrueType font with plotters once; false when none was found.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let env = std::env::var("CCP_SIM_FONT").ok();
        for path in env.iter().map(String::as_str).chain(FONT_CANDIDATES.iter().copied()) {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps a 'static reference; the font lives for the whole process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// Draws the plots in `format` ("png", "svg" or "both"); returns the files written, or a
/// warning when plots could not be drawn.
pub fn write_plots(r: &Results, dir: &Path, format: &str) -> Result<Vec<PathBuf>, String> {
    if !font_ready() {
        return Err("no TrueType font found (install fonts-dejavu-core or set CCP_SIM_FONT): plots skipped".into());
    }
    let mut written = Vec::new();
    let exts: &[&str] = match format {
        "svg" => &["svg"],
        "both" => &["png", "svg"],
        _ => &["png"],
    };
    let plots = [
        (Plot::Queue, !r.samples.names.is_empty()),
        (Plot::Throughput, r.samples.times.len() > 1 && !r.samples.names.is_empty()),
        (Plot::Slowdown, r.buckets.iter().any(|b| b.completed > 0)),
    ];
    for (plot, wanted) in plots {
        if !wanted {
            continue;
        }
        for ext in exts {
            let path = dir.join(format!("{}.{ext}", plot.file_stem()));
            let res = if *ext == "png" {
                draw(plot, r, BitMapBackend::new(&path, PLOT_SIZE).into_drawing_area())
            } else {
                draw(plot, r, SVGBackend::new(&path, PLOT_SIZE).into_drawing_area())
            };
            res.map_err(|e| format!("{}: {e}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

#[derive(Debug, Clone, Copy)]
enum Plot {
    Queue,
    Throughput,
    Slowdown,
}

impl Plot {
    fn file_stem(self) -> &'static str {
        match self {
            Plot::Queue => "queue",
            Plot::Throughput => "throughput",
            Plot::Slowdown => "slowdown",
        }
    }
}

fn draw<DB: DrawingBackend>(plot: Plot, r: &Results, root: DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    match plot {
        Plot::Queue => draw_queue(r, root),
        Plot::Throughput => draw_throughput(r, root),
        Plot::Slowdown => draw_slowdown(r, root),
    }
}

fn series_colors(i: usize) -> RGBColor {
    let (r, g, b) = Palette99::pick(i).to_rgba().rgb();
    RGBColor(r, g, b)
}

fn draw_time_series<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    y_label: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let x_max = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(1.0, f64::max);
    let x_min = series.iter().flat_map(|s| s.1.iter().map(|p| p.0)).fold(x_max, f64::min);
    let y_max = series.iter().flat_map(|s| s.1.iter().map(|p| p.1)).fold(0.0, f64::max).max(1e-9) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_min..x_max.max(x_min + 1e-9), 0.0..y_max)?;
    chart.configure_mesh().x_desc("time (µs)").y_desc(y_label).label_style(("sans-serif", 14)).draw()?;
    for (i, (name, pts)) in series.into_iter().enumerate() {
        let c = series_colors(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).label_font(("sans-serif", 14)).draw()?;
    root.present()?;
    Ok(())
}

fn draw_queue<DB: DrawingBackend>(r: &Results, root: DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let sm = &r.samples;
    let series = sm
        .names
        .iter()
        .enumerate()
        .take(MAX_SERIES)
        .map(|(i, n)| {
            (n.clone(), sm.times.iter().zip(&sm.queue_bytes[i]).map(|(&t, &b)| (to_us_f64(t), b as f64 / 1000.0)).collect())
        })
        .collect();
    draw_time_series(root, &format!("{}: queue occupancy", r.name), "queue (KB)", series)
}

fn draw_throughput<DB: DrawingBackend>(r: &Results, root: DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let sm = &r.samples;
    let series = sm
        .names
        .iter()
        .enumerate()
        .take(MAX_SERIES)
        .map(|(i, n)| (n.clone(), (1..sm.times.len()).map(|k| (to_us_f64(sm.times[k]), throughput_gbps(r, i, k))).collect()))
        .collect();
    draw_time_series(root, &format!("{}: link throughput", r.name), "Gbit/s", series)
}

fn draw_slowdown<DB: DrawingBackend>(r: &Results, root: DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let all: Vec<_> = r.buckets.iter().filter(|b| b.class == "all" && b.completed > 0).collect();
    let labels: Vec<String> =
        all.iter().map(|b| b.hi_bytes.map_or(format!(">{}", human(b.lo_bytes - 1)), |h| format!("≤{}", human(h)))).collect();
    let y_max = all.iter().map(|b| b.slowdown_p99).fold(1.0, f64::max) * 1.1;
    let n = all.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: FCT slowdown by flow size", r.name), ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (1.0f64..y_max).log_scale())?;
    let labels2 = labels.clone();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&move |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels2.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("flow size")
        .y_desc("slowdown")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (k, (label, pick)) in [("mean", 0usize), ("p50", 1), ("p99", 2)].into_iter().enumerate() {
        let c = series_colors(k);
        let pts: Vec<(f64, f64)> = all
            .iter()
            .enumerate()
            .map(|(i, b)| (i as f64, [b.slowdown_mean, b.slowdown_p50, b.slowdown_p99][pick].max(1.0)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).label_font(("sans-serif", 14)).draw()?;
    root.present()?;
    Ok(())
}

/// 1500 → "1.5KB", 10000000 → "10MB".
fn human(b: u64) -> String {
    let (v, unit) = match b {
        0..1_000 => return format!("{b}B"),
        1_000..1_000_000 => (b as f64 / 1e3, "KB"),
        1_000_000..1_000_000_000 => (b as f64 / 1e6, "MB"),
        _ => (b as f64 / 1e9, "GB"),
    };
    let s = format!("{v:.1}");
    format!("{}{unit}", s.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_sizes() {
        assert_eq!(human(999), "999B");
        assert_eq!(human(1500), "1.5KB");
        assert_eq!(human(10_000_000), "10MB");
    }
}
