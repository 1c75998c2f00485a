//! PNG plots with `plotters` (bitmap backend, fonts through ab_glyph from a TrueType file, so no
//! system font library is linked).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::error::{Error, Result};

/// Fonts tried for labels, in order (Debian's fonts-dejavu-core ships the first).
const FONT_CANDIDATES: [&str; 2] =
    ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"];

/// One line on a panel.
pub struct Series<'a> {
    pub label: &'a str,
    pub points: &'a [(f64, f64)],
    pub color: RGBColor,
}

/// One panel: a y-axis label and its lines, sharing the x axis (seconds) with the others.
pub struct Panel<'a> {
    pub y_label: &'a str,
    pub series: Vec<Series<'a>>,
}

fn load_font() -> Result<()> {
    let path = FONT_CANDIDATES.iter().find(|p| Path::new(p).exists()).ok_or_else(|| {
        Error::param("--plot", format!("no font found for labels (tried {FONT_CANDIDATES:?}); install fonts-dejavu-core"))
    })?;
    let bytes = std::fs::read(path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    // plotters keeps fonts for the life of the process; register once per call is harmless but
    // leaks a copy, so register only the first time.
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    REGISTERED.call_once(|| {
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        if register_font("sans-serif", FontStyle::Normal, leaked).is_err() {
            result = Err(Error::param("--plot", format!("{path} is not a usable TrueType font")));
        }
    });
    result
}

/// Draws the panels stacked vertically into a PNG at `path`.
pub fn stacked(path: &Path, title: &str, panels: &[Panel<'_>]) -> Result<()> {
    load_font()?;
    let err = |e: String| Error::param("--plot", format!("{}: {e}", path.display()));
    let height = 300 * panels.len() as u32 + 60;
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(|e| err(e.to_string()))?;
    let x_max = panels.iter().flat_map(|p| p.series.iter()).flat_map(|s| s.points.iter()).map(|p| p.0).fold(1.0, f64::max);
    for (area, panel) in root.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let y_max = panel.series.iter().flat_map(|s| s.points.iter()).map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| err(e.to_string()))?;
        chart.configure_mesh().x_desc("time (s)").y_desc(panel.y_label).draw().map_err(|e| err(e.to_string()))?;
        for s in &panel.series {
            let color = s.color;
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?
                .label(s.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}
