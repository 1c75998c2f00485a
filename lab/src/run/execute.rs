//! One cell of the matrix: its record is set up, the run recorded and analysed; a failure is
//! written into the record (only an interruption stops the matrix), and the router's packet log
//! is kept or removed either way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::analyse::analyse;
use super::plan::{buffer_pkts, duration_for, rtt_ms};
use super::record::record;
use super::RunOptions;
use crate::config::{Loaded, Scenario};
use crate::error::{Error, Result};
use crate::link::Link;
use crate::output::{self, RunRecord};
use crate::scheme::Scheme;

/// Everything one run needs.
pub struct RunContext<'a> {
    pub loaded: &'a Loaded,
    pub options: &'a RunOptions,
    pub link: &'a Link,
    pub scenario: &'a Scenario,
    pub scheme: &'a Scheme,
    pub repetition: u32,
    pub dir: PathBuf,
    pub rel_dir: String,
    /// Whether `ccp-lab run` can run this cell alone (a calibration cannot): its record then
    /// holds the command.
    pub reproducible: bool,
}

/// Runs one cell of the matrix. Failures are recorded in the returned record; only an
/// interruption (Ctrl-C) is an error, so the matrix stops.
pub fn execute(ctx: &RunContext<'_>, progress: &dyn Fn(f64)) -> Result<RunRecord> {
    let began = Instant::now();
    let x = &ctx.loaded.experiment;
    let duration_s = duration_for(ctx.loaded, ctx.options, ctx.link);
    let warmup_s = x.warmup_s.min(duration_s / 2.0);
    let mut rec = RunRecord {
        link: ctx.link.name.clone(),
        scenario: ctx.scenario.name.clone(),
        scheme: ctx.scheme.name.clone(),
        repetition: ctx.repetition,
        scheme_description: ctx.scheme.describe(),
        link_source: ctx.link.source.clone(),
        duration_s,
        warmup_s,
        rtt_ms: rtt_ms(ctx.loaded, ctx.link),
        buffer_pkts: buffer_pkts(ctx.loaded, ctx.link),
        dir: ctx.rel_dir.clone(),
        command: ctx.reproducible.then(|| command(ctx, duration_s)),
        ..RunRecord::default()
    };
    std::fs::create_dir_all(&ctx.dir).map_err(|e| Error::io(format!("creating {}", ctx.dir.display()), e))?;
    let result = record(ctx, &mut rec, duration_s, progress).and_then(|r| analyse(ctx, &mut rec, r, duration_s, warmup_s));
    rec.wall_time_s = began.elapsed().as_secs_f64();
    match result {
        Ok(()) => rec.ok = true,
        Err(Error::Interrupted) => {
            rec.error = Some("interrupted".into());
            output::write_json(&ctx.dir.join("run.json"), &rec)?;
            return Err(Error::Interrupted);
        }
        Err(e) => {
            rec.error = Some(e.to_string());
            if !rec.namespace_prefix.is_empty() {
                keep_or_remove_log(ctx, &packet_log_path(&rec.namespace_prefix));
            }
        }
    }
    output::write_json(&ctx.dir.join("run.json"), &rec)?;
    Ok(rec)
}

/// The command that runs this cell again, with the options that change how it runs.
fn command(ctx: &RunContext<'_>, duration_s: f64) -> String {
    let path = ctx.loaded.path.canonicalize().unwrap_or_else(|_| ctx.loaded.path.clone());
    let mut c = super::reproduce_command(&path, &ctx.link.name, &ctx.scenario.name, &ctx.scheme.name, duration_s);
    if ctx.options.realtime {
        c += " --realtime";
    }
    if let Some(a) = &ctx.options.agent {
        c += &format!(" --agent {}", super::shell_word(&a.display().to_string()));
    }
    c
}

/// Where the router writes a run's per-packet log: on tmpfs when there is one. The router writes
/// it from its event loop, and on a disk that other work (builds) fills with dirty pages a write
/// can block in the kernel's writeback throttling for seconds, stalling the emulated link (seen
/// here: the router's delay error reached 1-4 s); tmpfs pages are never throttled.
pub(super) fn packet_log_path(prefix: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    dir.join(format!("{prefix}-router.csv"))
}

/// Moves the packet log into the run's directory (`router.csv`) when it is to be kept, else
/// deletes it.
pub(super) fn keep_or_remove_log(ctx: &RunContext<'_>, log: &Path) {
    if !log.exists() {
        return;
    }
    if ctx.options.keep_packet_logs || ctx.loaded.experiment.output.keep_packet_logs {
        let dest = ctx.dir.join("router.csv");
        if std::fs::rename(log, &dest).is_err() {
            if let Err(e) = std::fs::copy(log, &dest) {
                eprintln!("ccp-lab: keeping the packet log as {}: {e}", dest.display());
            }
        }
    }
    let _ = std::fs::remove_file(log);
}
