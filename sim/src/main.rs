//! The `ccp-sim` command: run, check and inspect simulator scenarios.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use ccp_sim::stats::Results;
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
    /// List the congestion control algorithms and queue disciplines a scenario can use.
    List,
}

fn main() -> ExitCode {
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
        Command::Run { scenario, out, seed, mut overrides, no_plots, quiet, json } => {
            if let Some(s) = seed {
                overrides.push(format!("seed={s}"));
            }
            let loaded = config::load(&scenario, &overrides).map_err(|e| e.to_string())?;
            let name = loaded.name();
            let dir = out.unwrap_or_else(|| PathBuf::from("results/sim").join(&name));
            let mut sim = Sim::new(&loaded)?;
            let bar = if quiet {
                ProgressBar::hidden()
            } else {
                let b = ProgressBar::new(to_us(sim.end));
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
            let wall = std::time::Instant::now();
            sim.run(|now, events| {
                bar.set_position(now / PS_PER_US);
                let secs = wall.elapsed().as_secs_f64().max(1e-9);
                bar.set_message(format!("{:.2} M events/s", events as f64 / secs / 1e6));
            });
            bar.finish_and_clear();
            let s = &loaded.scenario;
            let results = sim.results(&name, s.seed, &s.output.buckets_bytes, wall.elapsed().as_secs_f64());
            let files = output::write_data(&results, &dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut plots = Vec::new();
            if s.output.plots && !no_plots {
                match output::write_plots(&results, &dir, &s.output.plot_format) {
                    Ok(p) => plots = p,
                    Err(w) => eprintln!("ccp-sim: warning: {w}"),
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?);
            } else if !quiet {
                print_summary(&results);
                println!("wrote {} files to {}", files.len() + plots.len(), dir.display());
            }
            Ok(())
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
        Command::List => {
            println!("algorithms (cc.algorithm):");
            for a in ccp_algorithms::registry::all() {
                println!("  {:10} {}", a.name, a.summary);
                for p in a.params {
                    println!("      {:16} {}", p.name, p.doc);
                }
            }
            println!("queue disciplines (switch.qdisc.kind): droptail, dctcp, phantom, qcn, red, codel");
            println!("topologies (topology.kind): dumbbell, star, leaf_spine");
            Ok(())
        }
    }
}

fn print_summary(r: &Results) {
    println!(
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
    println!(
        "flows {}/{} completed; packets: {} data, {} ACKs, {} dropped ({} buffer, {} AQM), {} marked, {} retransmitted, {} timeouts, {} alive at end; {} reports, {} CNMs, {} PFC frames",
        r.flows_completed,
        r.flows_total,
        c.data_packets,
        c.acks,
        c.dropped_buffer + c.dropped_aqm,
        c.dropped_buffer,
        c.dropped_aqm,
        c.marks,
        c.retransmits,
        c.timeouts,
        r.packets_alive_at_end,
        c.reports,
        c.cnms,
        c.pfc_frames
    );
    if c.algorithm_faults + c.fallbacks + c.clamped_values > 0 {
        println!(
            "controller: {} algorithm faults contained, {} fallbacks to {}, {} values clamped",
            c.algorithm_faults,
            c.fallbacks,
            ccp_sim::sim::FALLBACK_ALGORITHM,
            c.clamped_values
        );
    }
    if !r.ports.is_empty() {
        println!(
            "{:<18} {:>9} {:>7} {:>10} {:>10} {:>10} {:>11} {:>8} {:>8}",
            "port", "Gbit/s", "util", "q mean pk", "q p50 pk", "q p99 pk", "delay p99µs", "drops", "marks"
        );
        for p in &r.ports {
            println!(
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
            println!(
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
        println!(
            "{:<7} {:>21} {:>7} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8}",
            "class", "size (bytes)", "flows", "FCT p50 µs", "FCT p99 µs", "mean µs", "SD p50", "SD p99", "SD mean"
        );
        for b in &r.buckets {
            println!(
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
}
