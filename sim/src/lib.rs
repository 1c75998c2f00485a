//! `ccp-sim`: a deterministic, packet-level discrete-event simulator for datacenter congestion
//! control, driving the same `ccp-algorithms` (through the `Report`/`Action` contract) and the
//! same `ccp-qdisc` queue disciplines as the agent and the user-space router.
//!
//! Layers, one module each:
//! - [`time`], [`event`], [`rng`]: picosecond clock, the event queue, seeded random streams;
//! - [`packet`]: packets in an arena, referred to by index;
//! - [`topology`]: dumbbell, star, leaf-spine, shortest-path ECMP routing;
//! - [`switch`], [`hook`]: ports and links, shared-buffer admission, PFC, egress queues built
//!   from `ccp-qdisc`, and the per-queue hooks BFC needs;
//! - [`transport`]: hosts, the reliable transport (SACK, RTO, pacing, DCTCP ECN echo);
//! - [`pacer`]: HULL's token-bucket pacer at the host NIC, with its flow association table;
//! - [`cc`]: the congestion-control adapter: report folding, the flows' `ccp_contract::Controller`
//!   (the agent's containment boundary), report interval, agent delay;
//! - [`workload`]: size CDFs, Poisson/log-normal arrivals at a load, incast, explicit flows;
//! - [`config`]: scenario files; [`sim`]: the engine; [`stats`], [`output`]: results.
//!
//! Determinism: one event queue ordered by (time, insertion), one seeded stream per purpose, no
//! hash-map iteration anywhere; the same scenario and seed give bit-identical results.

pub mod bfc;
pub mod cc;
pub mod config;
pub mod event;
pub mod hook;
pub mod output;
pub mod pacer;
pub mod packet;
pub mod record;
pub mod replay;
pub mod rng;
pub mod sim;
pub mod stats;
pub mod sweep;
pub mod switch;
pub mod time;
pub mod topology;
pub mod transport;
pub mod workload;

pub use config::{load, Loaded, Scenario};
pub use sim::Sim;
pub use stats::Results;

/// Runs a loaded scenario to completion without progress output, and collects
/// its results (the library entry point tests use).
pub fn run_loaded(loaded: &Loaded) -> Result<Results, String> {
    run_loaded_with(loaded, |_, _, _| {})
}

/// Runs a loaded scenario to completion and collects its results, calling
/// `progress(now, end, events)` every few thousand events (`ccp-sim run`'s and `ccp-sim sweep`'s
/// progress bars).
pub fn run_loaded_with(loaded: &Loaded, progress: impl FnMut(time::Time, time::Time, u64)) -> Result<Results, String> {
    run_loaded_recording(loaded, None, progress)
}

/// As [`run_loaded_with`], writing every report a flow's algorithm is given to `record`
/// (`ccp-sim run --record-reports`).
pub fn run_loaded_recording(
    loaded: &Loaded,
    record: Option<record::ReportRecord>,
    mut progress: impl FnMut(time::Time, time::Time, u64),
) -> Result<Results, String> {
    let mut sim = Sim::new(loaded)?;
    sim.record = record;
    let end = sim.end;
    let wall = std::time::Instant::now();
    sim.run(|now, events| progress(now, end, events));
    if let Some(r) = sim.record.as_mut() {
        r.finish()?;
    }
    let s = &loaded.scenario;
    Ok(sim.into_results(&loaded.name(), s.seed, &s.output.buckets_bytes, wall.elapsed().as_secs_f64()))
}
