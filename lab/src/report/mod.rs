//! `ccp-lab report DIR…`: one self-contained HTML page that compares schemes × links over one
//! or more result directories — Pantheon's report for ccp-lab's experiments and ccp-sim's runs
//! and sweeps — and the same figures as SVG and PNG files for papers.
//!
//! Reading never fails: a missing, empty or damaged file becomes a line of the page's "missing
//! or damaged" list, and the runs it concerned are shown as far as what remains allows.
//!
//! * [`results`]: the model every reader produces: runs, calibrations, problems;
//! * [`read_lab`], [`read_sim`]: ccp-lab's and ccp-sim's directories; [`csv`]: their CSV files;
//! * [`compare`]: runs grouped by link, each scheme's medians and ranges, ranks, the spread
//!   ellipse;
//! * [`series`]: a run's time series, thinned for the page;
//! * [`figures`]: the throughput–delay plane and the time series (plotters: SVG and PNG);
//! * [`html`], [`terminal`] and [`text`]: the page, the terminal's table, and the words both use.

pub mod compare;
pub mod csv;
pub mod figures;
pub mod html;
pub mod read_lab;
pub mod read_sim;
pub mod results;
pub mod series;
pub mod terminal;
pub mod text;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use compare::{slug, Group, SchemeRow};
use results::Results;

/// A run whose emulator delivered packets later than this at p99 (ms) did not have the
/// declared link: it is flagged.
pub const LATE_LIMIT_MS: f64 = 10.0;

/// What the page shows of one link's figures.
pub struct GroupFigures {
    /// The section's anchor.
    pub anchor: String,
    /// The throughput–delay plane as SVG, or why there is none.
    pub pantheon: Result<String, String>,
    /// Per scheme row: its time series as SVG and a caption, or why there is none.
    pub series: Vec<Result<(String, String), String>>,
    /// The plane's files (SVG, PNG), relative to the page.
    pub files: [String; 2],
}

/// What [`generate`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub html: PathBuf,
    pub figures: PathBuf,
    /// The comparison for the terminal.
    pub table: String,
    pub runs: usize,
    pub problems: usize,
}

/// Reads every directory (each a ccp-lab experiment or run, or a ccp-sim run or sweep).
pub fn read(dirs: &[PathBuf]) -> Results {
    let mut r = Results::default();
    for d in dirs {
        if !d.is_dir() {
            r.problem(d, "not a directory");
        } else if read_sim::is_sweep(d) {
            read_sim::read_sweep(d, &mut r);
        } else if read_sim::is_run(d) {
            read_sim::read_run(d, &mut r);
        } else if read_lab::is_experiment(d) {
            read_lab::read_experiment(d, &mut r);
        } else if read_lab::is_run(d) {
            read_lab::read_single_run(d, &mut r);
        } else {
            r.problem(
                d,
                "not a ccp-lab or ccp-sim result directory (none of runs/, runs.csv, experiment.toml, run.json, \
                 summary.json with ports, sweep.csv)",
            );
        }
    }
    r
}

/// The figures' directory beside the page: `<page stem>-figures/`.
pub fn figures_dir(html: &Path) -> PathBuf {
    let stem = html.file_stem().map_or_else(|| "report".into(), |s| s.to_string_lossy().into_owned());
    html.with_file_name(format!("{stem}-figures"))
}

/// Reads `dirs`, writes the page to `html` and the figures beside it; fails only when the page
/// or its directory cannot be written.
pub fn generate(dirs: &[PathBuf], html: &Path) -> Result<Written> {
    let mut r = read(dirs);
    let groups = compare::compare(&r);
    let fig_dir = figures_dir(html);
    std::fs::create_dir_all(&fig_dir).map_err(|e| Error::io(format!("creating {}", fig_dir.display()), e))?;
    let fig_name = fig_dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut used: Vec<String> = Vec::new();
    let figures: Vec<GroupFigures> = groups
        .iter()
        .map(|g| {
            let mut anchor = g.slug();
            if used.contains(&anchor) {
                anchor = format!("{anchor}-{}", used.len());
            }
            used.push(anchor.clone());
            draw_group(&mut r, g, &fig_dir, &fig_name, anchor)
        })
        .collect();
    let page = html::page(&r, &groups, &figures, &now_utc(), &fig_dir.display().to_string());
    crate::output::write_file(html, &page)?;
    Ok(Written {
        html: html.to_path_buf(),
        figures: fig_dir,
        table: terminal::table(&r, &groups),
        runs: r.runs.len(),
        problems: r.problems.len(),
    })
}

/// A link's figures; every one that cannot be drawn says why (and is a problem when a file is
/// at fault).
fn draw_group(r: &mut Results, g: &Group, dir: &Path, dir_name: &str, anchor: String) -> GroupFigures {
    let x_desc = format!("one-way queueing delay, p{} (ms, log scale; lower is to the right)", g.delay_percentile);
    let clouds = g
        .rows
        .iter()
        .map(|row| figures::Cloud {
            label: row.name.clone(),
            color: row.color,
            runs: row
                .runs
                .iter()
                .map(|&i| &r.runs[i])
                .filter(|x| x.plotted())
                .map(|x| (x.delay_ms.unwrap_or(0.0), x.throughput_mbps.unwrap_or(0.0), !x.limited.is_empty()))
                .collect(),
            median: row.delay.zip(row.throughput).map(|(d, t)| (d.median, t.median)),
        })
        .collect::<Vec<_>>();
    let name = format!("tput-delay-{anchor}");
    let files = [format!("{dir_name}/{name}.svg"), format!("{dir_name}/{name}.png")];
    let pantheon = if clouds.iter().all(|c| c.runs.is_empty()) {
        Err("no successful run with throughput and delay on this link".to_string())
    } else {
        let fig = figures::Pantheon { title: g.title(), x_desc, clouds, capacity_mbps: g.capacity_mbps };
        figures::render(&fig, &dir.join(format!("{name}.svg")), &dir.join(format!("{name}.png")))
    };
    let series = g.rows.iter().map(|row| draw_series(r, g, row, dir, &anchor)).collect();
    GroupFigures { anchor, pantheon, series, files }
}

/// The time series of the scheme's run nearest its median throughput.
fn draw_series(r: &mut Results, g: &Group, row: &SchemeRow, dir: &Path, anchor: &str) -> Result<(String, String), String> {
    let median = row.throughput.map(|t| t.median);
    let pick = row
        .runs
        .iter()
        .copied()
        .filter(|&i| r.runs[i].ok)
        .min_by(|&a, &b| {
            let off = |i: usize| (r.runs[i].throughput_mbps.unwrap_or(0.0) - median.unwrap_or(0.0)).abs();
            off(a).total_cmp(&off(b))
        })
        .ok_or_else(|| "no successful run".to_string())?;
    let run = r.runs[pick].clone();
    let series = match series::read(&run) {
        Ok(s) => s,
        Err(e) => {
            r.problem(&run.dir, format!("no time series: {e}"));
            return Err(e);
        }
    };
    for note in series.notes.iter().filter(|n| n.contains('/')) {
        r.problem(&run.dir, note.clone());
    }
    let title = format!("{} — {} #{}", g.title(), row.name, run.repetition);
    let name = format!("series-{anchor}-{}", slug(&row.name));
    let fig = figures::TimeSeries { title, series: &series, color: row.color };
    let svg = figures::render(&fig, &dir.join(format!("{name}.svg")), &dir.join(format!("{name}.png")))?;
    let mut caption = format!("{} run #{} ({} / {}.png)", row.name, run.repetition, name, name);
    if !series.notes.is_empty() {
        caption = format!("{caption}; {}", series.notes.join("; "));
    }
    Ok((svg, caption))
}

/// The current time as "YYYY-MM-DD HH:MM UTC".
fn now_utc() -> String {
    let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // "YYYY-MM-DDTHH:MM:SSZ"
    format!("{} {} UTC", &t[..10], &t[11..16])
}
