//! The `ccp-sim` command: run, check and inspect simulator scenarios.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use ccp_sim::stats::Results;
use ccp_sim::sweep::{self, Progress};
use ccp_sim::time::{to_us, PS_PER_US};
use ccp_sim::{config, output, Sim};

#[derive(Parser)]
#[command(
    name = "ccp-sim",
    version,
    about = "Packet-level datacenter simulator driving the ccp-agent algorithms and queue disciplines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario and write CSV files, a JSON summary and plots.
    Run {
        /// Scenario file (e.g. configs/sim/dctcp-k20.toml).
        scenario: PathBuf,
        /// Output directory (default: results/sim/<scenario name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override a key: --set switch.qdisc.k_pkts=40 (a TOML value; repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Skip the plots.
        #[arg(long)]
        no_plots: bool,
        /// No progress bar and no summary on stdout.
        #[arg(long, short)]
        quiet: bool,
        /// Print the JSON summary on stdout instead of the table.
        #[arg(long)]
        json: bool,
        /// Record every report a flow's algorithm is given in FILE, one JSON line each:
        /// {"flow": INDEX, "report": REPORT} (ccp-agent run --record-reports's format). Created
        /// mode 0600; a symbolic link is refused.
        #[arg(long, value_name = "FILE")]
        record_reports: Option<PathBuf>,
    },
    /// Run a scenario over loads × variants in parallel: a directory per run and one sweep.csv
    /// (per variant, load and size bucket: FCT slowdown p50/p99/mean, flows, wall time, events/s).
    ///
    /// FILE is a sweep file (a `[sweep]` table: scenario, loads, set, [[sweep.variant]] name/set/loads;
    /// configs/sim/bfc-clos-sweep.toml) or a scenario file swept with --variant.
    /// Each run is `ccp-sim run` with the sweep's `set`, then the variant's, then --set, then
    /// workload.random.load = LOAD/100.
    ///
    /// Resumable: a run whose directory holds a `done` file matching the run (same overrides, same
    /// input files' contents, same ccp-sim binary, same --plots) is skipped and its rows come from
    /// its summary.json, so the same command after an interruption runs only what is missing.
    Sweep {
        /// Sweep file or scenario file.
        file: PathBuf,
        /// Loads in percent of the reference capacity (workload.random.load × 100), e.g.
        /// 50,55,60; replaces the sweep file's loads, every variant's own included.
        #[arg(long)]
        loads: Option<String>,
        /// A variant: NAME='KEY=VALUE;KEY=VALUE' (--set overrides separated by `;`; repeatable;
        /// added after the sweep file's). Without any variant: one run per load named `base`.
        #[arg(long = "variant", value_name = "NAME=SETS")]
        variants: Vec<String>,
        /// Run only these variants (comma-separated names).
        #[arg(long, value_name = "NAMES")]
        only: Option<String>,
        /// Overrides for every run, after the variant's (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Override every run's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory: <OUT>/sweep.csv and <OUT>/<variant>/load<L>/.
        #[arg(long)]
        out: PathBuf,
        /// Parallel runs of the local executor (default: the available cores).
        #[arg(long, short)]
        jobs: Option<usize>,
        /// Also draw each run's plots.
        #[arg(long)]
        plots: bool,
        /// No progress bar, per-run lines or summary line.
        #[arg(long, short)]
        quiet: bool,
        /// Where the runs execute: `local`, this machine's threads (--jobs), or `ray`, one Ray task
        /// (1 CPU) per run on a Ray cluster (--address), which ships this binary and the input files
        /// to its workers.
        #[arg(long, value_enum, default_value_t = Executor::Local)]
        executor: Executor,
        /// Ray's address (--executor ray): HOST:PORT of a cluster's head (`ray start --head`,
        /// port 6379 by default) or ray://HOST:PORT (Ray Client, port 10001). Without it,
        /// ray.init()'s default: $RAY_ADDRESS if set, else the cluster last started with `ray start`
        /// on this machine, else a new local Ray instance that lives as long as the sweep.
        #[arg(long, value_name = "ADDRESS")]
        address: Option<String>,
        /// The Python interpreter with Ray installed (--executor ray; scripts/ray-venv.sh makes one).
        #[arg(long, env = "CCP_SIM_PYTHON", default_value = "python3", value_name = "PATH")]
        python: PathBuf,
        /// The ccp-sim binary Ray's workers run (--executor ray; default: this one), for workers
        /// that need another build (another OS, architecture or libc).
        #[arg(long, value_name = "PATH")]
        worker_binary: Option<PathBuf>,
    },
    /// Validate scenario files.
    Check {
        scenarios: Vec<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Print a scenario's flows (id src dst bytes start_ns; bytes 0 = unbounded), one per line:
    /// the workload, for replaying it in another simulator.
    Flows {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Feed one flow's recorded reports (`run --record-reports`, or the agent's) to an algorithm and
    /// print, per report, what it decided and its state, one JSON line each. Open loop: the reports
    /// stay those of the recorded run, so the recorded algorithm reproduces its decisions and
    /// another one answers the same reports.
    Replay {
        /// The recording: one `{"flow": ID, "report": REPORT}` line per report.
        recording: PathBuf,
        /// The flow to replay (its index in the recording).
        #[arg(long)]
        flow: u64,
        /// The algorithm, a registry name as `cc.algorithm` takes it.
        #[arg(long)]
        algorithm: String,
        /// Its parameters, as TOML: 'line_rate_gbps = 40.0' or '{ g = 0.0625 }'.
        #[arg(long, default_value = "")]
        params: String,
        /// The flow's initial window, packets (the scenario's transport.init_cwnd_pkts).
        #[arg(long, default_value_t = 10)]
        init_cwnd_pkts: u32,
        /// Print every N-th report (and every report with network feedback).
        #[arg(long, default_value_t = 1, value_name = "N")]
        every: u64,
        /// Print nothing before this report time, µs (earlier reports are still fed).
        #[arg(long, default_value_t = 0, value_name = "US")]
        from_us: u64,
    },
    /// List the congestion control algorithms and queue disciplines a scenario can use.
    List,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Executor {
    Local,
    Ray,
}

fn main() -> ExitCode {
    // Scenarios may name Python algorithms, `py:path/to/file.py:Class`. Their calls run on this
    // thread: a simulation has nothing to serve meanwhile, and feeds flows one report at a time
    // (a hand-off to the interpreter's thread would cost about twice the CPU each).
    ccp_python::register();
    ccp_python::set_isolation(ccp_python::Isolation::Inline);
    // And learned policies, `onnx:path/to/model.onnx`, without their inference deadline: a
    // simulation's results must not depend on how busy the host is (docs/learned.md).
    ccp_learned::register();
    ccp_learned::set_deadline(false);
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-sim: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Command) -> Result<(), String> {
    match cmd {
        Command::Run { scenario, out, seed, mut overrides, no_plots, quiet, json, record_reports } => {
            if let Some(s) = seed {
                overrides.push(format!("seed={s}"));
            }
            let loaded = config::load(&scenario, &overrides).map_err(|e| e.to_string())?;
            let name = loaded.name();
            let dir = out.unwrap_or_else(|| PathBuf::from("results/sim").join(&name));
            let bar = if quiet {
                ProgressBar::hidden()
            } else {
                let b = ProgressBar::new(0);
                b.set_style(
                    ProgressStyle::with_template(
                        "{spinner} {prefix} [{bar:40}] {pos}/{len} µs simulated ({elapsed}, ETA {eta}) {msg}",
                    )
                    .map_err(|e| e.to_string())?
                    .progress_chars("=> "),
                );
                b.set_prefix(name.clone());
                b
            };
            let record = record_reports.as_deref().map(ccp_sim::record::ReportRecord::create).transpose()?;
            let wall = std::time::Instant::now();
            let results = ccp_sim::run_loaded_recording(&loaded, record, |now, end, events| {
                bar.set_length(to_us(end));
                bar.set_position(now / PS_PER_US);
                let secs = wall.elapsed().as_secs_f64().max(1e-9);
                bar.set_message(format!("{:.2} M events/s", events as f64 / secs / 1e6));
            })?;
            bar.finish_and_clear();
            let s = &loaded.scenario;
            let files = output::write_data(&results, &dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut plots = Vec::new();
            if s.output.plots && !no_plots {
                match output::write_plots(&results, &dir, &s.output.plot_format) {
                    Ok(p) => plots = p,
                    Err(w) => eprintln!("ccp-sim: warning: {w}"),
                }
            }
            if json {
                print_stdout(&(serde_json::to_string_pretty(&results).map_err(|e| e.to_string())? + "\n"));
            } else if !quiet {
                print_stdout(&format!(
                    "{}wrote {} files to {}\n",
                    summary_text(&results),
                    files.len() + plots.len(),
                    dir.display()
                ));
            }
            Ok(())
        }
        Command::Sweep {
            file,
            loads,
            variants,
            only,
            mut overrides,
            seed,
            out,
            jobs,
            plots,
            quiet,
            executor,
            address,
            python,
            worker_binary,
        } => {
            if let Some(s) = seed {
                overrides.push(format!("seed={s}"));
            }
            let ray = match executor {
                Executor::Local => {
                    if address.is_some() || worker_binary.is_some() {
                        return Err("--address and --worker-binary are for --executor ray".into());
                    }
                    None
                }
                Executor::Ray => {
                    if jobs.is_some() {
                        return Err("--jobs is for --executor local: with Ray, each run is a task of 1 CPU and the \
                                    cluster's CPUs (ray start --num-cpus) set how many run at once"
                            .into());
                    }
                    let worker_binary = match worker_binary {
                        Some(b) => b,
                        None => std::env::current_exe().map_err(|e| format!("this executable's path: {e}"))?,
                    };
                    Some(sweep::ray::RayOptions { python, address, worker_binary, log: out.join("ray.log") })
                }
            };
            sweep(SweepArgs { file, loads, variants, only, overrides, out, jobs, plots, quiet, ray })
        }
        Command::Check { scenarios, overrides } => {
            for s in &scenarios {
                let loaded = config::load(s, &overrides).map_err(|e| e.to_string())?;
                let sim = Sim::new(&loaded)?;
                println!(
                    "{}: ok ({} flows, {} hosts, {} switches)",
                    s.display(),
                    sim.flows.len(),
                    sim.topo.hosts.len(),
                    sim.topo.switches.len()
                );
            }
            Ok(())
        }
        Command::Flows { scenario, overrides } => {
            let loaded = config::load(&scenario, &overrides).map_err(|e| e.to_string())?;
            let sim = Sim::new(&loaded)?;
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            for (i, f) in sim.flows.iter().enumerate() {
                writeln!(w, "{i} {} {} {} {}", f.spec.src, f.spec.dst, f.spec.bytes.unwrap_or(0), f.spec.start / 1000)
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        Command::Replay { recording, flow, algorithm, params, init_cwnd_pkts, every, from_us } => {
            let params = parse_params(&params)?;
            let file = std::fs::File::open(&recording).map_err(|e| format!("{}: {e}", recording.display()))?;
            let opts = ccp_sim::replay::ReplayOptions { flow, algorithm, params, init_cwnd_pkts, every, from_us };
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            ccp_sim::replay::replay(std::io::BufReader::new(file), &recording.display().to_string(), &opts, &mut w)?;
            Ok(())
        }
        Command::List => {
            println!("algorithms (cc.algorithm):");
            for a in ccp_algorithms::registry::all() {
                println!("  {:10} {}", a.name, a.summary);
                for p in a.params {
                    println!("      {:16} {}", p.name, p.doc);
                }
            }
            println!("queue disciplines (switch.qdisc.kind): droptail, dctcp, phantom, qcn, red, fq, codel");
            println!("topologies (topology.kind): dumbbell, star, leaf_spine");
            Ok(())
        }
    }
}

/// `--params`: a TOML document ('a = 1') or an inline table ('{ a = 1 }').
fn parse_params(text: &str) -> Result<toml::Table, String> {
    let t = text.trim();
    let doc = match t.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        Some(inner) => format!("params = {{{inner}}}"),
        None => return t.parse::<toml::Table>().map_err(|e| format!("--params: {e}")),
    };
    let mut table = doc.parse::<toml::Table>().map_err(|e| format!("--params: {e}"))?;
    match table.remove("params") {
        Some(toml::Value::Table(p)) => Ok(p),
        _ => Err("--params: not a table".into()),
    }
}

struct SweepArgs {
    file: PathBuf,
    loads: Option<String>,
    variants: Vec<String>,
    only: Option<String>,
    overrides: Vec<String>,
    out: PathBuf,
    jobs: Option<usize>,
    plots: bool,
    quiet: bool,
    /// `None`: the local executor.
    ray: Option<sweep::ray::RayOptions>,
}

/// `ccp-sim sweep`: builds the plan, runs it with a progress bar, writes sweep.csv; fails (after
/// every run) if any run failed.
fn sweep(a: SweepArgs) -> Result<(), String> {
    let mut plan = match sweep::read_sweep_file(&a.file)? {
        Some(p) => p,
        None => sweep::Plan {
            scenario: a.file.clone(),
            common: Vec::new(),
            last: Vec::new(),
            variants: Vec::new(),
            loads: Vec::new(),
        },
    };
    plan.last = a.overrides;
    for v in &a.variants {
        plan.variants.push(sweep::parse_variant(v)?);
    }
    if plan.variants.is_empty() {
        plan.variants.push(sweep::Variant { name: "base".into(), set: Vec::new(), loads: None });
    }
    if let Some(l) = &a.loads {
        plan.loads = sweep::parse_loads(l)?;
        for v in &mut plan.variants {
            v.loads = None;
        }
    }
    if let Some(only) = &a.only {
        let names: Vec<&str> = only.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
        if let Some(n) = names.iter().find(|n| !plan.variants.iter().any(|v| v.name == **n)) {
            let known: Vec<&str> = plan.variants.iter().map(|v| v.name.as_str()).collect();
            return Err(format!("--only: no variant `{n}` (variants: {})", known.join(", ")));
        }
        plan.variants.retain(|v| names.contains(&v.name.as_str()));
    }
    sweep::validate(&plan).map_err(|e| format!("{}: {e}", a.file.display()))?;
    let jobs = sweep::jobs(&plan, &a.out);
    let threads = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    // The binary the runs execute: this one in-process, or the one Ray's workers are sent.
    let engine_path = match &a.ray {
        Some(r) => r.worker_binary.clone(),
        None => std::env::current_exe().map_err(|e| format!("this executable's path: {e}"))?,
    };
    let engine = sweep::resume::engine_id(&engine_path)?;
    let planned = sweep::Planned::new(plan.scenario.clone(), jobs, a.plots, &engine);
    let jobs = &planned.jobs;

    // Runs already complete (from an interrupted or earlier sweep) are not run again.
    let mut outcomes: Vec<Option<sweep::Outcome>> = planned.completed().into_iter().map(|s| s.map(Ok)).collect();
    let todo: Vec<usize> = (0..jobs.len()).filter(|&i| outcomes[i].is_none()).collect();
    let skipped = jobs.len() - todo.len();
    if skipped > 0 && !a.quiet {
        println!("{skipped} of {} runs already complete in {} (their `done` files match): skipped", jobs.len(), a.out.display());
    }

    // The bar counts simulated µs over the runs to do (each run's duration_ms; a run whose file does
    // not load counts 0 and fails when it starts).
    let sim_us: Vec<u64> = jobs
        .iter()
        .map(|j| config::load(&plan.scenario, &j.overrides).map_or(0, |l| (l.scenario.duration_ms * 1000.0) as u64))
        .collect();
    let total_us: u64 = todo.iter().map(|&i| sim_us[i]).sum();
    let bar = if a.quiet { ProgressBar::hidden() } else { ProgressBar::new(total_us) };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:40}] {percent}% of simulated time ({elapsed}, ETA {eta}) {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    let state = std::sync::Mutex::new(BarState {
        running: vec![false; jobs.len()],
        advanced_us: vec![0; jobs.len()],
        done: 0,
        failed: 0,
    });
    let label = |i: usize| format!("{}@{}", jobs[i].variant, sweep::fmt_load(jobs[i].load_pct));
    let message = |st: &BarState| {
        let running: Vec<String> = st.running.iter().enumerate().filter(|(_, &r)| r).map(|(i, _)| label(i)).collect();
        format!(
            "{}/{} runs{}{}",
            st.done,
            todo.len(),
            if st.failed > 0 { format!(", {} FAILED", st.failed) } else { String::new() },
            if running.is_empty() { String::new() } else { format!("; running {}", running.join(" ")) }
        )
    };
    let wall = std::time::Instant::now();
    let progress = |p: Progress| match p {
        Progress::Started { job, .. } => {
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            st.running[job] = true;
            bar.set_message(message(&st));
        }
        Progress::Advanced { job, delta_us } => {
            state.lock().unwrap_or_else(|p| p.into_inner()).advanced_us[job] += delta_us;
            bar.inc(delta_us);
        }
        Progress::Finished { job, outcome } => {
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            st.running[job] = false;
            st.done += 1;
            // A run that failed, or ran elsewhere, still counts its whole simulated time.
            bar.inc(sim_us[job].saturating_sub(st.advanced_us[job]));
            st.advanced_us[job] = sim_us[job];
            match outcome {
                Ok(r) => bar.println(format!(
                    "{}: {:.1} s wall, {:.2} M events/s, {}/{} flows",
                    label(job),
                    r.wall_s,
                    r.events_per_s / 1e6,
                    r.flows_completed,
                    r.flows_total
                )),
                Err(e) => {
                    st.failed += 1;
                    bar.println(format!("ccp-sim: {e}"));
                }
            }
            bar.set_message(message(&st));
        }
        // Where Ray runs the sweep: said even without a terminal, unlike the bar's lines.
        Progress::Note(text) if bar.is_hidden() && !a.quiet => println!("{text}"),
        Progress::Note(text) => bar.println(text),
    };
    let done = match &a.ray {
        None => sweep::run_jobs(&planned, &todo, threads, &progress),
        Some(opts) => sweep::ray::run_jobs(&planned, &todo, opts, &progress).inspect_err(|_| bar.finish_and_clear())?,
    };
    bar.finish_and_clear();
    for (&i, o) in todo.iter().zip(done) {
        outcomes[i] = Some(o);
    }
    let outcomes: Vec<sweep::Outcome> = outcomes.into_iter().map(|o| o.unwrap_or_else(|| Err("not run".into()))).collect();
    let csv_path = a.out.join("sweep.csv");
    std::fs::write(&csv_path, sweep::csv(jobs, &outcomes)).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    let failed: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    if !a.quiet {
        let ran = match &a.ray {
            _ if todo.is_empty() => String::new(),
            None => format!(" in {:.1} s wall on {} threads", wall.elapsed().as_secs_f64(), threads.min(todo.len())),
            Some(_) => format!(" in {:.1} s wall on Ray", wall.elapsed().as_secs_f64()),
        };
        println!(
            "{} runs ({}{} failed){ran}; wrote {}",
            jobs.len(),
            if skipped > 0 { format!("{skipped} skipped as complete, ") } else { String::new() },
            failed.len(),
            csv_path.display()
        );
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} runs failed (see {}):\n  {}",
            failed.len(),
            jobs.len(),
            csv_path.display(),
            failed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
        ))
    }
}

/// What the sweep's progress bar shows, per job and in all.
struct BarState {
    running: Vec<bool>,
    advanced_us: Vec<u64>,
    done: usize,
    failed: usize,
}

/// Writes `text` to standard output. A reader that has gone away (`ccp-sim run … | head`) is not
/// an error: the results are already on disk, so the rest of the text is dropped quietly
/// instead of the panic `println!` would give.
fn print_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => eprintln!("ccp-sim: warning: writing to standard output: {e}"),
    }
}

/// The run's summary as `ccp-sim run` prints it.
fn summary_text(r: &Results) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}): {:.3} s simulated in {:.2} s wall, {} events ({:.2} M events/s){}",
        r.name,
        r.algorithm,
        r.simulated_s,
        r.wall_s,
        r.events,
        r.events_per_s / 1e6,
        if r.stopped_early { ", stopped when every flow completed" } else { "" }
    );
    let c = &r.counters;
    let _ = writeln!(
                out,
        "flows {}/{} completed; packets: {} data, {} ACKs, {} dropped ({} buffer, {} AQM, {} random), {} marked, {} retransmitted, {} timeouts, {} alive at end; {} reports, {} CNMs, {} PFC frames",
        r.flows_completed,
        r.flows_total,
        c.data_packets,
        c.acks,
        c.dropped_buffer + c.dropped_aqm + c.dropped_random,
        c.dropped_buffer,
        c.dropped_aqm,
        c.dropped_random,
        c.marks,
        c.retransmits,
        c.timeouts,
        r.packets_alive_at_end,
        c.reports,
        c.cnms,
        c.pfc_frames
    );
    if c.algorithm_faults + c.fallbacks + c.clamped_values > 0 {
        let _ = writeln!(
            out,
            "controller: {} algorithm faults contained, {} fallbacks to {}, {} values clamped",
            c.algorithm_faults,
            c.fallbacks,
            ccp_sim::sim::FALLBACK_ALGORITHM,
            c.clamped_values
        );
    }
    if !r.ports.is_empty() {
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>7} {:>10} {:>10} {:>10} {:>11} {:>8} {:>8}",
            "port", "Gbit/s", "util", "q mean pk", "q p50 pk", "q p99 pk", "delay p99µs", "drops", "marks"
        );
        for p in &r.ports {
            let _ = writeln!(
                out,
                "{:<18} {:>9.3} {:>6.1}% {:>10.1} {:>10.1} {:>10.1} {:>11.3} {:>8} {:>8}",
                p.name,
                p.throughput_gbps,
                100.0 * p.utilization,
                p.queue_mean_pkts,
                p.queue_p50_pkts,
                p.queue_p99_pkts,
                p.queue_delay_p99_us,
                p.drops,
                p.marks
            );
        }
    }
    let explicit: Vec<_> = r.flows.iter().filter(|f| f.class == "explicit").collect();
    if !explicit.is_empty() && explicit.len() <= 16 {
        for f in explicit {
            // Label and algorithm only where they say something.
            let mut tags: Vec<String> = f.label.iter().cloned().collect();
            if f.algorithm != r.algorithm {
                tags.push(f.algorithm.to_string());
            }
            let _ = writeln!(
                out,
                "flow {} h{}->h{}{}: goodput {:.3} Gbit/s{}",
                f.id,
                f.src,
                f.dst,
                if tags.is_empty() { String::new() } else { format!(" [{}]", tags.join(", ")) },
                f.goodput_gbps,
                f.fct_us.map_or(String::new(), |t| format!(", FCT {t:.1} µs"))
            );
        }
    }
    if !r.buckets.is_empty() {
        let _ = writeln!(
            out,
            "{:<7} {:>21} {:>7} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8}",
            "class", "size (bytes)", "flows", "FCT p50 µs", "FCT p99 µs", "mean µs", "SD p50", "SD p99", "SD mean"
        );
        for b in &r.buckets {
            let _ = writeln!(
                out,
                "{:<7} {:>21} {:>7} {:>11.1} {:>11.1} {:>11.1} {:>8.2} {:>8.2} {:>8.2}",
                b.class,
                format!("{}..{}", b.lo_bytes, b.hi_bytes.map_or("".into(), |h| h.to_string())),
                format!("{}/{}", b.completed, b.flows),
                b.fct_p50_us,
                b.fct_p99_us,
                b.fct_mean_us,
                b.slowdown_p50,
                b.slowdown_p99,
                b.slowdown_mean
            );
        }
    }
    out
}
