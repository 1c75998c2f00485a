//! The report's figures, drawn once per backend with plotters: SVG inline in the page and as a
//! file, PNG as a file (for papers and slides).
//!
//! * the throughput–delay plane per link (Pantheon's plot): throughput up, the queueing delay's
//!   95th percentile on a logarithmic axis that grows to the left, so better is up and to the
//!   right; a small dot per run (a red cross over runs the emulator limited), a large one at the
//!   scheme's median delay and median throughput, and the runs' 1-σ ellipse (three runs or more)
//!   or the segment between them (two);
//! * per link and scheme, one run's time series: throughput (with the link's capacity),
//!   queueing delay and window, stacked.

use std::ops::Range;
use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::compare::ellipse;
use super::series::Series;
use crate::plot::{font, PALETTE};

/// Delays below this are drawn at it (a log axis has no zero), ms.
const MIN_DELAY_MS: f64 = 0.01;
const GREY: RGBColor = RGBColor(150, 150, 150);
const LIMITED: RGBColor = RGBColor(200, 0, 0);

/// A figure that can be drawn on any plotters backend.
pub trait Figure {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Draws `f` as SVG text and writes it to `svg` and as a PNG to `png`; returns the SVG text.
pub fn render<F: Figure>(f: &F, svg: &Path, png: &Path) -> Result<String, String> {
    font()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, f.size()).into_drawing_area();
        f.draw(&root)?;
        root.present().map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    std::fs::write(svg, &text).map_err(|e| format!("{}: {e}", svg.display()))?;
    {
        let root = BitMapBackend::new(png, f.size()).into_drawing_area();
        f.draw(&root)?;
        root.present().map_err(|e| format!("{}: {e}", png.display()))?;
    }
    Ok(text)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A colour as CSS writes it.
pub fn css_color(index: usize) -> String {
    let c = PALETTE[index % PALETTE.len()];
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// A logarithmic delay axis, larger delays to the left.
#[derive(Debug, Clone, Copy)]
struct DelayAxis {
    lo: f64,
    hi: f64,
}

impl DelayAxis {
    /// An axis around `delays` spanning at least a decade.
    fn around(delays: impl Iterator<Item = f64>) -> DelayAxis {
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for d in delays.filter(|d| d.is_finite()) {
            lo = lo.min(d.max(MIN_DELAY_MS));
            hi = hi.max(d.max(MIN_DELAY_MS));
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 100.0);
        }
        let (mut lo, mut hi) = (lo / 1.6, hi * 1.6);
        if hi / lo < 10.0 {
            let centre = (lo * hi).sqrt();
            (lo, hi) = (centre / 10f64.sqrt(), centre * 10f64.sqrt());
        }
        DelayAxis { lo: lo.max(MIN_DELAY_MS / 2.0), hi }
    }
}

impl Ranged for DelayAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let v = v.clamp(self.lo, self.hi);
        let f = (self.hi.ln() - v.ln()) / (self.hi.ln() - self.lo.ln());
        limit.0 + ((limit.1 - limit.0) as f64 * f).round() as i32
    }

    /// 1, 2, 5 × 10^k inside the range; only powers of ten when that is too many.
    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let steps = |mantissas: &[f64]| -> Vec<f64> {
            let mut v = Vec::new();
            let mut decade = 10f64.powf(self.lo.log10().floor());
            while decade <= self.hi {
                for m in mantissas {
                    let x = m * decade;
                    if x >= self.lo && x <= self.hi {
                        v.push(x);
                    }
                }
                decade *= 10.0;
            }
            v
        };
        let all = steps(&[1.0, 2.0, 5.0]);
        if all.len() <= hint.max_num_points() {
            all
        } else {
            steps(&[1.0])
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// A delay as an axis label: no trailing zeros.
fn delay_label(v: &f64) -> String {
    if *v >= 1.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// One scheme's runs on one link.
#[derive(Debug, Clone, PartialEq)]
pub struct Cloud {
    pub label: String,
    pub color: usize,
    /// (delay ms, throughput Mbit/s, limited by the emulator) per successful run.
    pub runs: Vec<(f64, f64, bool)>,
    /// The medians.
    pub median: Option<(f64, f64)>,
}

/// The throughput–delay plane of one link.
pub struct Pantheon {
    pub title: String,
    pub x_desc: String,
    pub clouds: Vec<Cloud>,
    pub capacity_mbps: Option<f64>,
}

impl Figure for Pantheon {
    fn size(&self) -> (u32, u32) {
        (760, 520)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let x = DelayAxis::around(self.clouds.iter().flat_map(|c| c.runs.iter().map(|r| r.0)));
        let y_max = self
            .clouds
            .iter()
            .flat_map(|c| c.runs.iter().map(|r| r.1))
            .chain(self.capacity_mbps)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.12;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(58)
            .build_cartesian_2d(x, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc("throughput (Mbit/s)")
            .x_label_formatter(&delay_label)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        if let Some(c) = self.capacity_mbps {
            chart
                .draw_series(DashedLineSeries::new(vec![(x.hi, c), (x.lo, c)], 6, 4, GREY.stroke_width(1)))
                .map_err(err)?
                .label("link capacity (mean)")
                .legend(|(a, b)| PathElement::new(vec![(a, b), (a + 18, b)], GREY.stroke_width(1)));
        }
        for cloud in &self.clouds {
            let col = color(cloud.color);
            let pts: Vec<(f64, f64)> = cloud.runs.iter().map(|r| (r.0.max(MIN_DELAY_MS), r.1)).collect();
            // The spread, on the axis's own (logarithmic) scale.
            let logged: Vec<(f64, f64)> = pts.iter().map(|p| (p.0.log10(), p.1)).collect();
            if let Some(e) = ellipse(&logged, 72) {
                let back: Vec<(f64, f64)> = e.into_iter().map(|(lx, y)| (10f64.powf(lx), y)).collect();
                chart.draw_series(std::iter::once(Polygon::new(back.clone(), col.mix(0.12).filled()))).map_err(err)?;
                chart.draw_series(std::iter::once(PathElement::new(back, col.mix(0.6).stroke_width(1)))).map_err(err)?;
            } else if pts.len() == 2 {
                chart.draw_series(std::iter::once(PathElement::new(pts.clone(), col.mix(0.6).stroke_width(2)))).map_err(err)?;
            }
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.mix(0.55).filled()))).map_err(err)?;
            let limited: Vec<(f64, f64)> = cloud.runs.iter().filter(|r| r.2).map(|r| (r.0.max(MIN_DELAY_MS), r.1)).collect();
            chart.draw_series(limited.iter().map(|&p| Cross::new(p, 6, LIMITED.stroke_width(2)))).map_err(err)?;
            let Some((md, mt)) = cloud.median else { continue };
            let m = (md.max(MIN_DELAY_MS), mt);
            chart
                .draw_series(std::iter::once(Circle::new(m, 7, col.filled())))
                .map_err(err)?
                .label(cloud.label.as_str())
                .legend(move |(a, b)| Circle::new((a + 8, b), 5, col.filled()));
            chart.draw_series(std::iter::once(Circle::new(m, 7, BLACK.stroke_width(1)))).map_err(err)?;
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at(m) + Text::new(cloud.label.clone(), (9, -18), ("sans-serif", 13).into_font().color(&col)),
                ))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

/// One run's time series in three panels.
pub struct TimeSeries<'a> {
    pub title: String,
    pub series: &'a Series,
    pub color: usize,
}

/// A labelled line of a time-series panel and its colour.
type Curve<'a> = (String, &'a [(f64, f64)], RGBColor);

impl Figure for TimeSeries<'_> {
    fn size(&self) -> (u32, u32) {
        (560, 470)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(&self.title, ("sans-serif", 15)).map_err(err)?;
        let s = self.series;
        let shades = |k: usize| if k == 0 { color(self.color) } else { color(self.color + 7 * k) };
        let mut tput: Vec<Curve<'_>> = Vec::new();
        if !s.capacity.is_empty() {
            tput.push(("capacity".into(), &s.capacity, GREY));
        }
        for (k, l) in s.throughput.iter().enumerate() {
            let c = if l.label == "cross traffic" { BLACK } else { shades(k) };
            tput.push((l.label.clone(), &l.points, c));
        }
        let delay: Vec<Curve<'_>> = vec![("delay".into(), &s.delay, color(self.color))];
        let window: Vec<Curve<'_>> =
            s.window.iter().enumerate().map(|(k, l)| (l.label.clone(), l.points.as_slice(), shades(k))).collect();
        let panels = [("throughput (Mbit/s)", tput), (s.delay_label, delay), ("window (packets)", window)];
        let x_max = panels
            .iter()
            .flat_map(|p| p.1.iter().flat_map(|l| l.1.iter().map(|q| q.0)))
            .filter(|v| v.is_finite())
            .fold(1.0, f64::max);
        for (area, (y_desc, lines)) in root.split_evenly((3, 1)).iter().zip(panels.iter()) {
            let y_max = lines.iter().flat_map(|l| l.1.iter().map(|q| q.1)).filter(|v| v.is_finite()).fold(0.0, f64::max);
            let mut chart = ChartBuilder::on(area)
                .margin(5)
                .x_label_area_size(22)
                .y_label_area_size(50)
                .build_cartesian_2d(0.0..x_max, 0.0..(y_max * 1.1).max(1e-6))
                .map_err(err)?;
            let short = y_desc.split(" (").next().unwrap_or(y_desc);
            chart
                .configure_mesh()
                .y_desc(*y_desc)
                .x_labels(6)
                .y_labels(4)
                .label_style(("sans-serif", 11))
                .axis_desc_style(("sans-serif", 11))
                .draw()
                .map_err(err)?;
            if lines.iter().all(|l| l.1.is_empty()) {
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("no {short} series"),
                        (x_max * 0.4, y_max.max(1e-6) * 0.5),
                        ("sans-serif", 13),
                    )))
                    .map_err(err)?;
                continue;
            }
            for (label, pts, c) in lines {
                let c = *c;
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(1)))
                    .map_err(err)?
                    .label(label.as_str())
                    .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 14, b)], c.stroke_width(2)));
            }
            if lines.len() > 1 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .label_font(("sans-serif", 10))
                    .background_style(WHITE.mix(0.8))
                    .border_style(GREY)
                    .draw()
                    .map_err(err)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Hint(usize);
    impl KeyPointHint for Hint {
        fn max_num_points(&self) -> usize {
            self.0
        }
        fn weight(&self) -> plotters::coord::ranged1d::KeyPointWeight {
            plotters::coord::ranged1d::KeyPointWeight::Any
        }
    }

    #[test]
    fn the_delay_axis_is_logarithmic_and_inverted() {
        let a = DelayAxis { lo: 1.0, hi: 100.0 };
        assert_eq!(a.map(&100.0, (0, 200)), 0, "large delays on the left");
        assert_eq!(a.map(&1.0, (0, 200)), 200);
        assert_eq!(a.map(&10.0, (0, 200)), 100, "a decade is half the axis");
        assert_eq!(a.key_points(Hint(20)), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        assert_eq!(a.key_points(Hint(4)), vec![1.0, 10.0, 100.0]);
        let b = DelayAxis::around([0.0, 3.0].into_iter());
        assert!(b.lo <= MIN_DELAY_MS && b.hi >= 3.0 * 1.6, "{b:?}");
        let c = DelayAxis::around([40.0, 50.0].into_iter());
        assert!(c.hi / c.lo >= 9.99, "at least a decade: {c:?}");
        assert_eq!(delay_label(&0.05), "0.05");
        assert_eq!(delay_label(&200.0), "200");
    }
}
