//! Running an experiment: the matrix of link × scenario × scheme × repetition, one run at a
//! time, each in its own namespace prefix.
//!
//! **Why the router library and not the `ccp-router run` subprocess.** Every time series of a
//! run must share one clock: the router's per-packet log counts ns from the emulator's start,
//! and the library hands us that start ([`Emulator::start_time`](ccp_router::Emulator::start_time), CLOCK_MONOTONIC), so queueing
//! delay bins, TCP_INFO samples and the agent's trace line up exactly instead of to within the
//! latency of a "ready" line. The library also gives the typed link shape (the capacity of any
//! window is computed from the same trace the router runs), typed queue-discipline parameters
//! (checked when the experiment file loads, not when a run starts) and the typed summary, and
//! tears down on drop, which makes cleanup on error and Ctrl-C one code path. The cost — the
//! router thread shares the runner's process — is nil on this 2-core machine, where the
//! scheduler sees threads either way; a crash of the runner takes the router with it, and the
//! next runner deletes the leftover namespaces by name ([`netns::sweep_stale`]).
//!
//! One run: check that the agent has what the scheme needs (a `receiver`) → start the agent
//! (agent schemes; it must register its congestion control first) → start the emulator with the
//! scheme's queue discipline (an agent whose `agent_args` name the run's namespaces or addresses,
//! such as a CNM listener in the sender's namespace, starts here instead) → set the scheme's sysctls → enable the scheme's receiver program
//! on the receiver's device → attach the per-ACK SRTT probe (tcp_probe, the scheme's flows) →
//! bind every receiver, start every sender → sample every `sample_interval_ms` until the
//! duration → stop traffic, read and detach the probe, read the receiver's counters and disable
//! it, stop the router and the agent (in that order) → compute metrics, write CSV/JSON/PNG.
//! Whatever fails, the guards detach the probe, disable the receiver, restore sysctls, stop the
//! agent by pid and delete the namespaces by name.
//!
//! [`plan`] expands the experiment into runs, [`execute`](mod@execute) runs one (`record` sets
//! it up, runs the traffic and tears it down; `analyse` computes its metrics and writes its
//! outputs), [`calibrate`](mod@calibrate) measures the emulator's ceiling on a link before its
//! first run (when asked), and [`summary`] writes what the runs so far produced; this module
//! runs the whole matrix.

mod analyse;
pub mod calibrate;
pub mod execute;
pub mod plan;
mod record;
pub mod summary;

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};

use crate::config::Loaded;
use crate::error::{Error, Result};
use crate::netns;
use crate::output::{self, RunRecord};
use execute::{execute, RunContext};
use plan::{duration_for, Plan};
use summary::write_summary;

/// A run whose emulator delivered packets later than this at p99 gets a warning.
const EMULATOR_LATE_WARN_MS: f64 = crate::report::LATE_LIMIT_MS;
/// The bottleneck queue is sampled this often (the thesis's 10 ms `tc -s` samples).
const QUEUE_SAMPLE_MS: u64 = 10;

/// Choices made on the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub out: PathBuf,
    pub quick: bool,
    pub full_trace: bool,
    pub duration_s: Option<f64>,
    pub repetitions: Option<u32>,
    pub schemes: Vec<String>,
    pub links: Vec<String>,
    pub scenarios: Vec<String>,
    pub keep_packet_logs: bool,
    pub no_plots: bool,
    pub agent: Option<PathBuf>,
    pub realtime: bool,
    /// Draw no progress bar (tests, logs).
    pub quiet: bool,
    /// Measure the emulator's ceiling on each link before its first run ([`calibrate`](mod@calibrate)).
    pub calibrate: bool,
}

/// What a whole experiment produced.
#[derive(Debug)]
pub struct Outcome {
    pub records: Vec<RunRecord>,
    /// With `calibrate`: one per link, in the links' order.
    pub calibrations: Vec<RunRecord>,
    pub interrupted: bool,
}

impl Outcome {
    pub fn failed(&self) -> usize {
        self.records.iter().filter(|r| !r.ok).count()
    }
}

/// Runs the whole matrix, writing the summary after every run (so an interrupted experiment
/// keeps what it measured).
pub fn run_experiment(l: &Loaded, o: &RunOptions) -> Result<Outcome> {
    if !netns::have_privileges() {
        return Err(Error::Unavailable("ccp-lab run needs root (network namespaces, /dev/net/tun)".into()));
    }
    for p in netns::sweep_stale() {
        eprintln!("ccp-lab: removed namespaces {p}-* left by a runner that is gone");
    }
    std::fs::create_dir_all(&o.out).map_err(|e| Error::io(format!("creating {}", o.out.display()), e))?;
    output::write_file(&o.out.join("experiment.toml"), &l.text)?;
    let plan = Plan::new(l, o)?;
    let runs = plan.runs();
    let total: f64 = runs.iter().map(|&(li, ..)| duration_for(l, o, &plan.links[li])).sum();
    let bar = if o.quiet { ProgressBar::hidden() } else { ProgressBar::new(total.ceil() as u64) };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} s of traffic, eta {eta} — {msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut outcome = Outcome { records: Vec::new(), calibrations: Vec::new(), interrupted: false };
    let mut done = 0.0;
    for (i, &(li, si, ki, rep)) in runs.iter().enumerate() {
        let (link, scenario, scheme) = (&plan.links[li], &plan.scenarios[si], &plan.schemes[ki]);
        // Runs are link-major: a link's calibration comes before its first run.
        if o.calibrate && outcome.calibrations.len() == li {
            bar.set_message(format!("calibrating the emulator on {}", link.name));
            match calibrate::calibrate(l, o, link) {
                Ok(rec) => {
                    let line = calibration_line(&rec);
                    if o.quiet || bar.is_hidden() {
                        eprintln!("{line}");
                    } else {
                        bar.println(line);
                    }
                    outcome.calibrations.push(rec);
                }
                Err(Error::Interrupted) => {
                    outcome.interrupted = true;
                    eprintln!("ccp-lab: interrupted during a calibration");
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        let rel_dir = format!("runs/{}/{}/{}/rep{rep}", link.name, scenario.name, scheme.name);
        let ctx = RunContext {
            loaded: l,
            options: o,
            link,
            scenario,
            scheme,
            repetition: rep,
            dir: o.out.join(&rel_dir),
            rel_dir,
            reproducible: true,
        };
        bar.set_message(format!("run {}/{}: {} · {} · {} #{rep}", i + 1, runs.len(), link.name, scenario.name, scheme.name));
        let base = done;
        let result = execute(&ctx, &|s| bar.set_position((base + s) as u64));
        done += duration_for(l, o, link);
        bar.set_position(done as u64);
        match result {
            Ok(rec) => {
                // A hidden bar (--no-progress, or stderr not a terminal) prints nothing.
                if o.quiet || bar.is_hidden() {
                    eprintln!("{}", run_line(&rec));
                } else {
                    bar.println(run_line(&rec));
                }
                outcome.records.push(rec);
            }
            Err(Error::Interrupted) => {
                outcome.interrupted = true;
                eprintln!("ccp-lab: interrupted; the current run was torn down");
                break;
            }
            Err(e) => return Err(e),
        }
        write_summary(l, o, &outcome.records)?;
    }
    bar.finish_and_clear();
    write_summary(l, o, &outcome.records)?;
    Ok(outcome)
}

/// A command that runs one cell of an experiment again (one repetition of it).
pub fn reproduce_command(experiment: &Path, link: &str, scenario: &str, scheme: &str, duration_s: f64) -> String {
    format!(
        "sudo ccp-lab run {} --link {} --scenario {} --scheme {} --duration-s {duration_s} --repetitions 1",
        shell_word(&experiment.display().to_string()),
        shell_word(link),
        shell_word(scenario),
        shell_word(scheme)
    )
}

/// A word as a POSIX shell reads it back: quoted when it holds anything but safe characters.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=+,@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The terminal's line for a link's calibration.
fn calibration_line(r: &RunRecord) -> String {
    match (&r.error, &r.link_metrics) {
        (Some(e), _) => format!("FAILED calibration of {}: {}", r.link, e.lines().next().unwrap_or("")),
        (None, Some(m)) => format!(
            "calib  {}: a fixed {:.2} Mbit/s pipe (the link's peak) delivered {:.2} Mbit/s ({:.1} %), emulator late p99 {:.2} ms",
            r.link,
            m.capacity_mbps,
            m.delivered_mbps,
            m.utilisation * 100.0,
            r.emulator_late_p99_ms.unwrap_or(f64::NAN)
        ),
        (None, None) => format!("calib  {}", r.link),
    }
}

/// One line per finished run for the terminal.
fn run_line(r: &RunRecord) -> String {
    let head = format!("{} · {} · {} #{}", r.link, r.scenario, r.scheme, r.repetition);
    match (&r.error, &r.link_metrics) {
        (Some(e), _) => format!("FAILED {head}: {}", e.lines().next().unwrap_or("")),
        (None, Some(m)) => {
            let q = m.queue_delay_ms.unwrap_or_default();
            let late = match r.emulator_late_p99_ms {
                Some(l) if l > EMULATOR_LATE_WARN_MS => {
                    format!(" — WARNING: emulator late by {l:.0} ms at p99 (machine overloaded; rerun)")
                }
                _ => String::new(),
            };
            format!(
                "ok     {head}: utilisation {:.1} %, queueing delay p50 {:.1} / p95 {:.1} ms, scheme {:.2} Mbit/s{}",
                m.utilisation * 100.0,
                q.p50,
                q.p95,
                r.scheme_throughput_mbps.unwrap_or(0.0),
                r.classification
                    .as_ref()
                    .and_then(|c| c.accuracy)
                    .map_or_else(String::new, |a| format!(", accuracy {:.1} %", a * 100.0)),
            ) + &late
        }
        (None, None) => format!("ok     {head}"),
    }
}
