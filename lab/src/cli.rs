//! The `ccp-lab` command line.
//!
//! Exit status: 0 when every run succeeded; 1 when a run failed (the others still ran and the
//! summary says which and why) or the machine cannot run the experiment; 2 for a bad experiment
//! file or option; 130 when interrupted. `report` exits 0 whenever it wrote the page, even over
//! damaged results (the page lists what is missing).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config;
use crate::error::Error;
use crate::run::{self, RunOptions};

/// ccp-lab: run declared congestion-control experiments through ccp-router and write CSV, JSON
/// and plots.
#[derive(Debug, Parser)]
#[command(name = "ccp-lab", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an experiment (needs root).
    Run(RunArgs),
    /// Validate an experiment file and print its matrix and how long it would take.
    Check(CheckArgs),
    /// Delete network namespaces left behind by ccp-lab runners that no longer exist.
    Cleanup,
    /// Compare schemes × links over result directories in one self-contained HTML page.
    Report(ReportArgs),
    /// Judge an experiment's [[parity]] pairs over its result directory: per cell ours /
    /// theirs / ratio / verdict (writes parity.csv and parity.json there).
    Parity(ParityArgs),
    /// Print the burst-gap signature of traces (mahimahi files) or of an experiment's links
    /// (a .toml; synthetic links are generated as `run` would): mean rate, share of 20 ms
    /// windows without an opportunity, burst sizes, the 20 ms rate's p95 over its mean, gaps.
    Burstiness(BurstinessArgs),
}

#[derive(Debug, clap::Args)]
pub struct BurstinessArgs {
    /// Trace files, or experiment files (.toml) whose links to describe.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Only the first seconds of each trace (default: one whole period).
    #[arg(long)]
    pub first_s: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub struct ParityArgs {
    /// A ccp-lab result directory (with experiment.toml and runs/).
    pub dir: PathBuf,
}

/// Options that change what runs (shared by run and check).
#[derive(Debug, clap::Args)]
pub struct MatrixArgs {
    /// The experiment file (TOML).
    pub file: PathBuf,
    /// Short runs: the file's quick_duration_s (default min(duration_s, 30 s)) per run.
    #[arg(long)]
    pub quick: bool,
    /// Run each trace for its full length (one period); fixed-rate links keep their duration.
    #[arg(long, conflicts_with = "quick")]
    pub full_trace: bool,
    /// Override the duration of every run, s.
    #[arg(long, value_name = "S", conflicts_with_all = ["quick"])]
    pub duration_s: Option<f64>,
    /// Override the number of repetitions.
    #[arg(long, value_name = "N")]
    pub repetitions: Option<u32>,
    /// Only this scheme (repeatable).
    #[arg(long = "scheme", value_name = "NAME")]
    pub schemes: Vec<String>,
    /// Only this link (repeatable).
    #[arg(long = "link", value_name = "NAME")]
    pub links: Vec<String>,
    /// Only this scenario (repeatable).
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub matrix: MatrixArgs,
    /// Output directory (default: results/<experiment name>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Keep each run's per-packet router log (router.csv).
    #[arg(long)]
    pub keep_packet_logs: bool,
    /// Skip the PNG plots.
    #[arg(long)]
    pub no_plots: bool,
    /// The ccp-agent binary for agent schemes (default: beside ccp-lab).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// Run the emulator's event loop under SCHED_FIFO.
    #[arg(long)]
    pub realtime: bool,
    /// No progress bar (one line per finished run is still printed).
    #[arg(long)]
    pub no_progress: bool,
    /// Measure the emulator's ceiling on each link first: a fixed-rate pipe at the link's peak,
    /// filled with UDP for 5 s (calibration/<link>/run.json).
    #[arg(long)]
    pub calibrate: bool,
    /// Write the HTML report (<out>/report.html, figures in <out>/report-figures/) and print
    /// its comparison table; implies --calibrate.
    #[arg(long)]
    pub report: bool,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Result directories: ccp-lab experiments (or single runs), ccp-sim runs or sweeps.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The page to write (default: DIR/report.html for one directory, ./report.html for more);
    /// the figures go beside it, in <name>-figures/.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub matrix: MatrixArgs,
}

fn options(m: &MatrixArgs, out: PathBuf) -> Result<RunOptions, Error> {
    if let Some(d) = m.duration_s {
        if !(d.is_finite() && d > 0.0 && d <= config::MAX_DURATION_S) {
            return Err(Error::Unavailable(format!(
                "--duration-s must be a number of seconds in (0, {}], got {d}",
                config::MAX_DURATION_S
            )));
        }
    }
    if m.repetitions == Some(0) {
        return Err(Error::Unavailable("--repetitions must be ≥ 1".into()));
    }
    Ok(RunOptions {
        out,
        quick: m.quick,
        full_trace: m.full_trace,
        duration_s: m.duration_s,
        repetitions: m.repetitions,
        schemes: m.schemes.clone(),
        links: m.links.clone(),
        scenarios: m.scenarios.clone(),
        ..RunOptions::default()
    })
}

fn exit_for(e: &Error) -> ExitCode {
    match e {
        Error::Config { .. } => ExitCode::from(2),
        Error::Interrupted => ExitCode::from(130),
        _ => ExitCode::FAILURE,
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(a) => run_cmd(a),
        Command::Check(a) => check_cmd(a),
        Command::Report(a) => report_cmd(a),
        Command::Parity(a) => match crate::parity::write(&a.dir) {
            Ok(rows) => {
                print!("{}", crate::parity::table(&rows));
                println!("parity: {}", a.dir.join("parity.csv").display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
        Command::Burstiness(a) => match burstiness_cmd(&a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        Command::Cleanup => {
            let removed = crate::netns::sweep_stale();
            println!(
                "removed {} leftover prefix(es){}",
                removed.len(),
                if removed.is_empty() { String::new() } else { format!(": {removed:?}") }
            );
            ExitCode::SUCCESS
        }
    }
}

fn fail(e: &Error) -> ExitCode {
    eprintln!("ccp-lab: error: {e}");
    exit_for(e)
}

fn run_cmd(a: RunArgs) -> ExitCode {
    let loaded = match config::load(&a.matrix.file) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("results").join(&loaded.name));
    let mut o = match options(&a.matrix, out) {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    o.keep_packet_logs = a.keep_packet_logs;
    o.no_plots = a.no_plots;
    o.agent = a.agent;
    o.realtime = a.realtime;
    o.quiet = a.no_progress;
    o.calibrate = a.calibrate || a.report;
    crate::cancel::install();
    let outcome = match run::run_experiment(&loaded, &o) {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    if a.report {
        match crate::report::generate(std::slice::from_ref(&o.out), &o.out.join("report.html")) {
            Ok(w) => {
                print!("{}", w.table);
                println!("report: {}", w.html.display());
            }
            Err(e) => eprintln!("ccp-lab: the report: {e}"),
        }
    } else {
        let rows = crate::output::summarise(&outcome.records);
        print!("{}", crate::output::summary_table(&rows, &crate::output::averages(&rows)));
    }
    if !loaded.experiment.parity.is_empty() {
        match crate::parity::write(&o.out) {
            Ok(rows) => print!("{}", crate::parity::table(&rows)),
            Err(e) => eprintln!("ccp-lab: parity: {e}"),
        }
    }
    println!("results: {}", o.out.display());
    if outcome.interrupted {
        eprintln!("ccp-lab: interrupted after {} run(s)", outcome.records.len());
        return ExitCode::from(130);
    }
    let failed = outcome.failed();
    if failed > 0 {
        eprintln!("ccp-lab: {failed} of {} run(s) failed; see runs.csv", outcome.records.len());
        for r in outcome.records.iter().filter(|r| !r.ok) {
            eprintln!("  {} · {} · {} #{}: {}", r.link, r.scenario, r.scheme, r.repetition, r.error.as_deref().unwrap_or(""));
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn report_cmd(a: ReportArgs) -> ExitCode {
    let out = a.out.unwrap_or_else(|| match a.dirs.as_slice() {
        [one] => one.join("report.html"),
        _ => PathBuf::from("report.html"),
    });
    match crate::report::generate(&a.dirs, &out) {
        Ok(w) => {
            print!("{}", w.table);
            println!(
                "report: {} ({} run(s){}; figures in {})",
                w.html.display(),
                w.runs,
                if w.problems > 0 { format!(", {} problem(s) listed", w.problems) } else { String::new() },
                w.figures.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// A directory for generated traces that only this process uses: created new (never an existing
/// path, so nothing planted there is followed — ccp-lab runs as root) with mode 0700, and removed
/// with everything in it when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Result<Scratch, Error> {
        use std::os::unix::fs::DirBuilderExt;
        // The time as well as the pid: a directory a crashed run left under a reused pid is
        // not ours, and creating it must not fail for that.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("ccp-lab-{what}-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| Error::io(format!("creating the scratch directory {}", path.display()), e))?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn burstiness_cmd(a: &BurstinessArgs) -> Result<(), Error> {
    use crate::burstiness::Signature;
    let span_ms = a.first_s.map(|s| s.saturating_mul(1000));
    let describe = |t: &ccp_router::Trace| match Signature::of(t, span_ms) {
        Some(s) => s.to_string(),
        None => "no opportunity in the span".to_string(),
    };
    let scratch = Scratch::new("burstiness")?;
    let mut rows = Vec::new();
    for f in &a.files {
        if f.extension().is_some_and(|e| e == "toml") {
            let loaded = config::load(f)?;
            for l in crate::link::resolve(&loaded.experiment.links, &loaded.dir, &scratch.0.join("traces"))? {
                let text = match &l.shape {
                    ccp_router::LinkShape::Trace(t) => describe(t),
                    _ => format!("{} (no trace: no gaps, no bursts)", l.source),
                };
                rows.push((l.name, text));
            }
        } else {
            rows.push((f.display().to_string(), describe(&ccp_router::Trace::load(f)?)));
        }
    }
    println!("{:<36} {}", "trace", Signature::HEADER);
    for (name, text) in &rows {
        println!("{name:<36} {text}");
    }
    Ok(())
}

fn check_cmd(a: CheckArgs) -> ExitCode {
    let loaded = match config::load(&a.matrix.file) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // Generated traces go to a scratch directory: checking writes nothing else.
    let scratch = match Scratch::new("check") {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let o = match options(&a.matrix, scratch.0.clone()) {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let plan = run::plan::Plan::new(&loaded, &o);
    drop(scratch);
    let plan = match plan {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    println!("{}: OK — experiment {:?}", a.matrix.file.display(), loaded.name);
    println!("links ({}):", plan.links.len());
    let mut total = 0.0;
    for l in &plan.links {
        let d = run::plan::duration_for(&loaded, &o, l);
        println!(
            "  {:<28} {:>8.3} Mbit/s mean, buffer {} pkts, {d:.0} s per run — {}",
            l.name,
            l.mean_rate_bps / 1e6,
            run::plan::buffer_pkts(&loaded, l),
            l.source
        );
        total += d * (plan.schemes.len() * plan.scenarios.len()) as f64 * f64::from(plan.repetitions);
    }
    println!("scenarios ({}):", plan.scenarios.len());
    for s in &plan.scenarios {
        println!("  {:<14} {} cross-traffic entr(ies)", s.name, s.cross.len());
    }
    println!("schemes ({}):", plan.schemes.len());
    for s in &plan.schemes {
        println!("  {:<14} {}", s.name, s.describe());
    }
    let runs = plan.runs().len();
    println!("{runs} run(s) × {} repetition(s) included; about {:.1} min of traffic", plan.repetitions, total / 60.0);
    ExitCode::SUCCESS
}
