//! The soak: whether the agent's memory, open files, the eBPF datapath's map entries and the
//! log volume stay flat over a long run of flow churn, hot swaps and crashes, and whether any
//! flow is lost or frozen on the way.
//!
//! For `--minutes`: 1,000 libccp flows (`ccp-test-datapath`, [`libccp_flows`]) under one agent
//! and 1,000 kernel TCP flows on the eBPF datapath ([`kernel_flows`], the loopback of a network
//! namespace of the soak's own) under another, each population replaced at 50 flows per second
//! (100 opened and 100 closed per second in all), `ccp-agent ctl swap --all` of both agents
//! every 10 s (Reno and Cubic in turn), and every 5 minutes both agents killed with SIGKILL and
//! started again on the same configuration (the kernel flows ride the program's fallback
//! meanwhile and are re-adopted; the libccp flows report into the void and are adopted from
//! their next report). Every 5 s the agents' RSS, open files and log lines per minute, and the
//! pinned maps' entries, are sampled ([`series`] reads their trends across restarts); every
//! minute, 10 s after every restart (the re-adoption grace) and at the end, a census counts lost
//! and frozen flows ([`census`]).
//!
//! The soak as a process (signals, its children, what a killed one left) is [`process`]; what a
//! finished run prints and writes, [`report`].
//!
//! Names are the soak's own, with this process's id: namespace `ccp-soak-PID-flows-lo`,
//! congestion control `ccpsoakPID`, pins `/sys/fs/bpf/ccp-soak-PID`, a directory
//! `/tmp/ccp-soak-PID-*` for configurations, sockets and logs. Everything is stopped and removed
//! on the way out, also on errors and Ctrl-C (SIGINT or SIGTERM end the run early, cleanly);
//! children die with ccp-bench if it is killed, and a later soak removes what a killed one left.

mod agents;
mod census;
mod kernel_flows;
mod libccp_flows;
mod process;
mod report;
mod series;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ccp_bench_harness::net::{self, Naming};
use ccp_ebpf::netns::Netns;
use ccp_ebpf::occupancy::{pinned_occupancy, Occupancy};
use serde::Serialize;
use serde_json::{json, Value};

use crate::rows::Row;
use agents::{Agent, Kind};
use census::{judge, Snapshot, Verdict};
use process::{fds, interrupted, rss_mib, sweep_stale, Interrupts};
use report::Report;
use series::{at_phase, Sample};

/// A flow silent this long is frozen; a census judges flows running at least this long.
const SETTLE: Duration = Duration::from_secs(5);
/// After a restart, the agents' time to re-adopt every flow before a census judges them.
const GRACE: Duration = Duration::from_secs(10);
/// The longest warm-up left out of each life's slope.
const MAX_WARMUP: Duration = Duration::from_secs(150);
/// A census every this long (besides those after restarts and at the end).
const CENSUS_EVERY: Duration = Duration::from_secs(60);
/// How long the populations may take to fill at the start.
const FILL_LIMIT: Duration = Duration::from_secs(60);
/// Each kernel flow writes one segment this often.
const KERNEL_EVERY: Duration = Duration::from_millis(200);
const KERNEL_CHUNK_BYTES: usize = 1448;
/// How long the last kernel flows take to finish closing at the end (FIN, its ACK).
const CLOSING: Duration = Duration::from_secs(2);
/// An agent's open files may differ by this much between lives at the same phase (a control
/// connection the agent has not closed yet).
const FD_SLACK: f64 = 2.0;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub minutes: f64,
    /// Flows of each datapath.
    pub flows: usize,
    /// Flows opened (and closed) per second, both datapaths together.
    pub churn_per_s: f64,
    pub swap_every_s: u64,
    pub restart_every_s: u64,
    pub sample_every_s: u64,
}

impl Plan {
    /// Each flow's life: the population over its datapath's share of the churn.
    fn life(&self) -> Duration {
        Duration::from_secs_f64(self.flows as f64 / (self.churn_per_s / 2.0).max(0.01))
    }

    /// Samples this far into each life are left out of the slopes: half a life, at most
    /// `MAX_WARMUP`. A restarted agent's memory climbs in steps for its first minutes (the flow
    /// table refills, each adopted flow is logged, the first full `ctl status` answers of the
    /// censuses grow the heap) and then levels off: 13.5, 14.3, 14.7 and 14.8 MiB at 0, 20, 100
    /// and 160-300 s of a 300-s life here.
    fn warmup(&self) -> Duration {
        let life_s = self.restart_every_s.min((self.minutes * 60.0) as u64);
        Duration::from_secs(life_s / 2).min(MAX_WARMUP)
    }

    /// Where each life's open files are compared.
    fn fd_phase(&self) -> Duration {
        Duration::from_secs(self.restart_every_s / 2)
    }
}

pub struct Bins {
    pub agent: PathBuf,
    pub datapath: PathBuf,
}

// ---- everything the soak runs ----

/// What the soak started, stopped in order on drop: the flows, then the agents (which
/// unregister and unpin), then the namespace and the directory.
struct Rig {
    kernel: Option<kernel_flows::KernelFlows>,
    libccp: Option<libccp_flows::LibccpFlows>,
    agents: [Agent; 2],
    pin_dir: PathBuf,
    _path: net::Path,
    dir: Option<tempfile::TempDir>,
}

impl Rig {
    fn agent(&self, k: Kind) -> &Agent {
        &self.agents[k as usize]
    }

    fn occupancy(&self) -> anyhow::Result<Occupancy> {
        pinned_occupancy(&self.pin_dir).context("reading the pinned maps")
    }

    /// The kernel flows running now: of the congestion control's entries, those of the sockets
    /// the kernel flows hold open (the newest entry of each local port: the kernel reuses ports).
    /// Entries of sockets closed already are not flows (the `maps.flow_info_orphans` series).
    fn kernel_snapshot(&self) -> anyhow::Result<(Snapshot, Occupancy)> {
        // The maps first, the live connections after: the flows thread publishes a close before
        // it closes, so a port still live now was open throughout the maps' reading, and no
        // release (which clears the control entry, then flow_info) ran halfway through it.
        let occ = self.occupancy()?;
        let live = self.kernel.as_ref().map(|k| k.tally().live_ports).unwrap_or_default();
        let mut by_port: BTreeMap<u16, u32> = BTreeMap::new();
        for (fid, local) in &occ.flows {
            if let Some(port) = local.as_ref().map(|e| e.port).filter(|p| live.contains(p)) {
                let newest = by_port.entry(port).or_insert(*fid);
                *newest = (*newest).max(*fid);
            }
        }
        Ok((by_port.values().map(|fid| (*fid, 0)).collect(), occ))
    }

    fn libccp_snapshot(&self) -> Snapshot {
        self.libccp.as_ref().map(libccp_flows::LibccpFlows::live).unwrap_or_default()
    }

    /// Fails when a part stopped on its own.
    fn check(&mut self) -> anyhow::Result<()> {
        for a in &mut self.agents {
            if let Some(why) = a.exited() {
                bail!("{why}");
            }
        }
        if self.kernel.as_ref().is_some_and(|k| !k.running()) {
            let why = self.kernel.take().map(kernel_flows::KernelFlows::stop).and_then(Result::err);
            bail!("the kernel flows stopped: {}", why.map_or_else(|| "no error".into(), |e| format!("{e:#}")));
        }
        if self.libccp.as_mut().is_some_and(|l| !l.running()) {
            bail!("ccp-test-datapath exited early (its diagnostics: {})", self.dir_path().join("datapath.err").display());
        }
        Ok(())
    }

    fn dir_path(&self) -> PathBuf {
        self.dir.as_ref().map_or_else(PathBuf::new, |d| d.path().to_path_buf())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        drop(self.kernel.take());
        drop(self.libccp.take());
        for a in &mut self.agents {
            let _ = a.stop();
        }
        // An agent that could not clean up (killed, or failed) leaves its pins.
        if self.pin_dir.exists() {
            let _ = std::fs::remove_dir_all(&self.pin_dir);
        }
    }
}

// ---- what a run records ----

/// The series sampled, by key.
#[derive(Default)]
struct Samples(BTreeMap<&'static str, Vec<Sample>>);

impl Samples {
    fn push(&mut self, key: &'static str, at: (f64, usize, f64), value: Option<f64>) {
        if let Some(v) = value {
            self.0.entry(key).or_default().push(Sample { t_s: at.0, life: at.1, phase_s: at.2, value: v });
        }
    }

    fn get(&self, key: &str) -> &[Sample] {
        self.0.get(key).map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug, Serialize)]
struct CensusRecord {
    at_s: f64,
    /// "start", "after restart N", "periodic", "end".
    label: String,
    libccp: Verdict,
    ebpf: Verdict,
    /// Flows each agent had adopted in its current life (after a restart: the re-adopted).
    libccp_adopted: u64,
    ebpf_adopted: u64,
    heartbeat_age_ms: f64,
}

struct PendingCensus {
    label: String,
    started: Instant,
    libccp: Snapshot,
    kernel: Snapshot,
}

#[derive(Debug, Serialize)]
struct RestartRecord {
    at_s: f64,
    libccp_ready_ms: f64,
    ebpf_ready_ms: f64,
}

#[derive(Debug, Default, Serialize)]
struct Swaps {
    requests: u64,
    failed: u64,
    flows_swapped: u64,
    last_error: Option<String>,
}

/// The run in progress.
struct Soak<'a> {
    plan: &'a Plan,
    rig: Rig,
    t0: Instant,
    life: usize,
    life_start: Instant,
    samples: Samples,
    last_lines: [(u64, Instant); 2],
    censuses: Vec<CensusRecord>,
    pending: Option<PendingCensus>,
    next_census: Instant,
    restarts: Vec<RestartRecord>,
    swaps: Swaps,
}

impl Soak<'_> {
    fn at(&self, now: Instant) -> (f64, usize, f64) {
        (now.duration_since(self.t0).as_secs_f64(), self.life, now.duration_since(self.life_start).as_secs_f64())
    }

    fn sample(&mut self, now: Instant) -> anyhow::Result<()> {
        let at = self.at(now);
        for (i, kind) in [Kind::Libccp, Kind::Ebpf].into_iter().enumerate() {
            let a = self.rig.agent(kind);
            let pid = a.pid().context("an agent is not running")?;
            let (rss, fd_count) = (rss_mib(pid), fds(pid));
            let lines = a.log_lines();
            let (prev, when) = self.last_lines[i];
            let per_min = 60.0 * lines.saturating_sub(prev) as f64 / now.duration_since(when).as_secs_f64().max(1e-3);
            self.last_lines[i] = (lines, now);
            let listed = a.summary().ok().and_then(|s| s["flow_count"].as_f64());
            let (rss_key, fds_key, log_key, flows_key) = match kind {
                Kind::Libccp => {
                    ("libccp_agent.rss_mib", "libccp_agent.fds", "libccp_agent.log_lines_per_min", "libccp_agent.flows")
                }
                Kind::Ebpf => ("ebpf_agent.rss_mib", "ebpf_agent.fds", "ebpf_agent.log_lines_per_min", "ebpf_agent.flows"),
            };
            self.samples.push(rss_key, at, rss);
            self.samples.push(fds_key, at, fd_count);
            self.samples.push(log_key, at, Some(per_min));
            self.samples.push(flows_key, at, listed);
        }
        let (live, occ) = self.rig.kernel_snapshot()?;
        self.samples.push("maps.flow_info", at, Some(occ.flows.len() as f64));
        // Entries no open connection accounts for: sockets closing now, or closed without the
        // kernel ever calling the congestion control's release.
        self.samples.push("maps.flow_info_orphans", at, Some(occ.flows.len().saturating_sub(live.len()) as f64));
        self.samples.push("maps.ctrl_used", at, Some(occ.ctrl_used as f64));
        self.samples.push("maps.ctrl_moved", at, Some(occ.ctrl_moved as f64));
        self.samples.push("maps.commanded", at, Some(occ.commanded.len() as f64));
        self.samples.push("kernel.open", at, self.rig.kernel.as_ref().map(|k| k.tally().open as f64));
        self.samples.push("libccp.live", at, Some(self.rig.libccp_snapshot().len() as f64));
        Ok(())
    }

    fn start_census(&mut self, label: String) -> anyhow::Result<()> {
        let (kernel, _) = self.rig.kernel_snapshot()?;
        self.pending = Some(PendingCensus { label, started: Instant::now(), libccp: self.rig.libccp_snapshot(), kernel });
        Ok(())
    }

    fn finish_census(&mut self, p: PendingCensus) -> anyhow::Result<()> {
        let (lb, (kb, _)) = (self.rig.libccp_snapshot(), self.rig.kernel_snapshot()?);
        let libccp_rows = self.rig.agent(Kind::Libccp).flows()?;
        let ebpf_rows = self.rig.agent(Kind::Ebpf).flows()?;
        let (lc, (kc, occ)) = (self.rig.libccp_snapshot(), self.rig.kernel_snapshot()?);
        let commanded: HashSet<u32> = occ.commanded.iter().copied().collect();
        let settle_ms = SETTLE.as_millis() as u64;
        let libccp = judge(&p.libccp, &lb, &lc, &libccp_rows, None, settle_ms);
        let ebpf = judge(&p.kernel, &kb, &kc, &ebpf_rows, Some(&commanded), settle_ms);
        let adopted =
            |k: Kind| self.rig.agent(k).summary().ok().and_then(|s| s["counters"]["flows_adopted"].as_u64()).unwrap_or(0);
        let rec = CensusRecord {
            at_s: self.t0.elapsed().as_secs_f64(),
            label: p.label,
            libccp_adopted: adopted(Kind::Libccp),
            ebpf_adopted: adopted(Kind::Ebpf),
            libccp,
            ebpf,
            heartbeat_age_ms: occ.heartbeat_age_ns as f64 / 1e6,
        };
        eprintln!(
            "[soak] census ({}) at {:.0} s: libccp {} judged, {} lost, {} frozen; kernel {} judged, {} lost, {} frozen ({} without the agent's entry)",
            rec.label,
            rec.at_s,
            rec.libccp.checked,
            rec.libccp.lost.len(),
            rec.libccp.frozen.len(),
            rec.ebpf.checked,
            rec.ebpf.lost.len(),
            rec.ebpf.frozen.len(),
            rec.ebpf.uncommanded
        );
        self.censuses.push(rec);
        Ok(())
    }

    fn restart(&mut self) -> anyhow::Result<()> {
        let at_s = self.t0.elapsed().as_secs_f64();
        // A census waiting for its second look would judge flows across the restart.
        self.pending = None;
        for a in &mut self.rig.agents {
            a.kill9()?;
        }
        let libccp_ready = self.rig.agents[Kind::Libccp as usize].start()?;
        let ebpf_ready = self.rig.agents[Kind::Ebpf as usize].start()?;
        self.life += 1;
        self.life_start = Instant::now();
        self.next_census = self.life_start + GRACE;
        let r = RestartRecord {
            at_s,
            libccp_ready_ms: libccp_ready.as_secs_f64() * 1e3,
            ebpf_ready_ms: ebpf_ready.as_secs_f64() * 1e3,
        };
        eprintln!(
            "[soak] {:.0} s: both agents killed with SIGKILL and started again (libccp ready in {:.0} ms, eBPF in {:.0} ms)",
            r.at_s, r.libccp_ready_ms, r.ebpf_ready_ms
        );
        self.restarts.push(r);
        Ok(())
    }

    fn swap(&mut self, n: u64) {
        let algorithm = if n.is_multiple_of(2) { "cubic" } else { "reno" };
        for kind in [Kind::Libccp, Kind::Ebpf] {
            self.swaps.requests += 1;
            match self.rig.agent(kind).swap_all(algorithm) {
                Ok(k) => self.swaps.flows_swapped += k,
                Err(e) => {
                    self.swaps.failed += 1;
                    self.swaps.last_error = Some(format!("{}: {e:#}", kind.key()));
                }
            }
        }
    }

    /// The schedule, until the end or an interrupt.
    fn run(&mut self) -> anyhow::Result<()> {
        let p = self.plan;
        let end = self.t0 + Duration::from_secs_f64(p.minutes * 60.0);
        let every = |s: u64| Duration::from_secs(s.max(1));
        let (mut next_sample, mut next_restart) = (self.t0, self.t0 + every(p.restart_every_s));
        // Swaps half an interval off the restarts, so they never meet one.
        let mut next_swap = self.t0 + every(p.swap_every_s) / 2;
        let mut swaps = 0;
        let mut last_note = self.t0;
        while !interrupted() {
            let now = Instant::now();
            if now >= end {
                break;
            }
            self.rig.check()?;
            if now >= next_restart {
                self.restart()?;
                next_restart += every(p.restart_every_s);
            }
            if now >= next_swap {
                self.swap(swaps);
                swaps += 1;
                next_swap += every(p.swap_every_s);
            }
            if now >= next_sample {
                self.sample(now)?;
                next_sample += every(p.sample_every_s);
                if let Some(pending) = self.pending.take_if(|c| c.started.elapsed() >= SETTLE) {
                    self.finish_census(pending)?;
                }
                if self.pending.is_none() && now >= self.next_census && now + SETTLE < next_restart.min(end) {
                    let label = if self.life == 0 && self.censuses.is_empty() {
                        "start".to_string()
                    } else if self.censuses.last().is_some_and(|c| c.at_s < self.life_start.duration_since(self.t0).as_secs_f64())
                    {
                        format!("after restart {}", self.life)
                    } else {
                        "periodic".to_string()
                    };
                    self.start_census(label)?;
                    self.next_census = now + CENSUS_EVERY;
                }
            }
            if now.duration_since(last_note) >= Duration::from_secs(60) {
                last_note = now;
                eprintln!("[soak] {:.1} of {} min", self.t0.elapsed().as_secs_f64() / 60.0, p.minutes);
            }
            let next = next_sample.min(next_swap).min(next_restart).min(end);
            std::thread::sleep(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100)));
        }
        Ok(())
    }
}

/// Waits until both populations are complete.
fn fill(rig: &mut Rig, flows: usize) -> anyhow::Result<()> {
    let t0 = Instant::now();
    loop {
        rig.check()?;
        let kernel = rig.kernel.as_ref().map_or(0, |k| k.tally().open);
        let libccp = rig.libccp_snapshot().len();
        if kernel >= flows && libccp >= flows {
            eprintln!("[soak] {flows} kernel and {flows} libccp flows running after {:.1} s", t0.elapsed().as_secs_f64());
            return Ok(());
        }
        if interrupted() {
            bail!("interrupted while the flows started");
        }
        if t0.elapsed() > FILL_LIMIT {
            let why = rig.kernel.as_ref().and_then(|k| k.tally().last_error).unwrap_or_default();
            bail!("after {} s only {kernel} kernel and {libccp} libccp flows of {flows} each run {why}", FILL_LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(bins: &Bins, plan: &Plan) -> anyhow::Result<(Vec<Row>, Vec<String>, Value)> {
    anyhow::ensure!(plan.minutes > 0.0 && plan.flows > 0 && plan.churn_per_s > 0.0, "the soak needs minutes, flows and churn");
    let t_setup = Instant::now();
    sweep_stale();
    let _interrupts = Interrupts::install();
    let pid = std::process::id();
    let dir = tempfile::Builder::new().prefix(&format!("ccp-soak-{pid}-")).tempdir()?;
    let ipc = dir.path().join("ipc");
    let cc = format!("ccpsoak{pid}");
    let pin_dir = PathBuf::from(format!("/sys/fs/bpf/ccp-soak-{pid}"));
    // The names live as long as the process; one soak per process.
    let naming = Naming { netns: String::leak(format!("ccp-soak-{pid}")), dev: "ccpsk", subnet: "10.203.0" };
    let path = net::Path::loopback(&naming, "flows")?;
    let ns = Netns::open(&Path::new("/run/netns").join(&path.sender))?;
    ccp_bench_harness::tcp::raise_fd_limit(plan.flows + 64)?;
    let slots = (4 * plan.flows).next_power_of_two();
    let libccp_agent = Agent::new(
        Kind::Libccp,
        &bins.agent,
        dir.path(),
        &format!("[datapath]\nkind = \"unix\"\n[datapath.unix]\ndir = \"{}\"\nname = \"portus\"", ipc.display()),
    )?;
    let ebpf_agent = Agent::new(
        Kind::Ebpf,
        &bins.agent,
        dir.path(),
        &format!(
            "[datapath]\nkind = \"ebpf\"\n[datapath.ebpf]\nname = \"{cc}\"\npin_dir = \"{}\"\nstate_file = \"{}\"\nmax_flows = {slots}",
            pin_dir.display(),
            dir.path().join("attach.json").display()
        ),
    )?;
    let mut rig = Rig { kernel: None, libccp: None, agents: [libccp_agent, ebpf_agent], pin_dir, _path: path, dir: Some(dir) };
    for a in &mut rig.agents {
        a.start()?;
    }
    let life = plan.life();
    let limit = Duration::from_secs_f64(plan.minutes * 60.0) + Duration::from_secs(600);
    rig.libccp = Some(libccp_flows::LibccpFlows::start(
        &bins.datapath,
        &ipc,
        plan.flows,
        life,
        limit,
        &rig.dir_path().join("datapath.err"),
    )?);
    rig.kernel = Some(kernel_flows::KernelFlows::start(
        ns,
        kernel_flows::Plan { flows: plan.flows, life, every: KERNEL_EVERY, chunk_bytes: KERNEL_CHUNK_BYTES, cc: cc.clone() },
    ));
    fill(&mut rig, plan.flows)?;
    eprintln!(
        "[soak] {} min: {} flows per datapath, each replaced after {:.0} s; swap every {} s, kill -9 every {} s",
        plan.minutes,
        plan.flows,
        life.as_secs_f64(),
        plan.swap_every_s,
        plan.restart_every_s
    );
    let t0 = Instant::now();
    let mut soak = Soak {
        plan,
        rig,
        t0,
        life: 0,
        life_start: t0,
        samples: Samples::default(),
        last_lines: [(0, t0); 2],
        censuses: Vec::new(),
        pending: None,
        next_census: t0 + GRACE,
        restarts: Vec::new(),
        swaps: Swaps::default(),
    };
    soak.last_lines = [(soak.rig.agent(Kind::Libccp).log_lines(), t0), (soak.rig.agent(Kind::Ebpf).log_lines(), t0)];
    let outcome = soak.run();
    let was_interrupted = interrupted();
    if outcome.is_ok() && !was_interrupted {
        // The last census, of flows running at the end.
        soak.pending = None;
        soak.start_census("end".into())?;
        std::thread::sleep(SETTLE);
        let p = soak.pending.take().context("the end census")?;
        soak.finish_census(p)?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    // Stop in order: the flows close (the agents see them go), then the agents stop cleanly.
    let kernel = soak.rig.kernel.take().map(kernel_flows::KernelFlows::stop).transpose();
    // What the congestion control still holds once the last sockets finished closing.
    std::thread::sleep(CLOSING);
    let flow_info_left = soak.rig.occupancy().map(|o| o.flows.len()).ok();
    let libccp = soak.rig.libccp.take().map(libccp_flows::LibccpFlows::stop).transpose();
    let mut shutdown = BTreeMap::new();
    for a in &mut soak.rig.agents {
        let st = a.stop()?;
        shutdown.insert(a.kind.key(), st.is_some_and(|s| s.success()));
    }
    let pins_left = soak.rig.pin_dir.exists();
    outcome?;
    let (kernel, libccp) = (kernel?.unwrap_or_default(), libccp?.unwrap_or_default());
    let report = Report { soak: &soak, seconds, setup_s: t0.duration_since(t_setup).as_secs_f64(), was_interrupted };
    let (rows, mut notes) = report.rows_and_notes(&kernel, &libccp, &shutdown, pins_left, flow_info_left);
    let problems = rows.iter().any(|r| r.met == Some(false)) || shutdown.values().any(|ok| !ok) || pins_left;
    let raw = json!({
        "plan": plan,
        "seconds": seconds,
        "interrupted": was_interrupted,
        "restarts": soak.restarts,
        "swaps": soak.swaps,
        "censuses": soak.censuses,
        "kernel_flows": kernel,
        "libccp_flows": libccp,
        "shutdown_clean": shutdown,
        "pins_left": pins_left,
        "flow_info_left": flow_info_left,
        "fds_at_phase": {
            "phase_s": plan.fd_phase().as_secs(),
            "libccp_agent": at_phase(soak.samples.get("libccp_agent.fds"), plan.fd_phase().as_secs_f64()),
            "ebpf_agent": at_phase(soak.samples.get("ebpf_agent.fds"), plan.fd_phase().as_secs_f64()),
        },
        "series": soak.samples.0,
    });
    let dir = soak.rig.dir.take().context("the soak's directory")?;
    if problems {
        // Renamed, so that a later soak's sweep does not take it for a killed soak's leftovers.
        let kept = dir.keep();
        let name = kept.file_name().map(|n| n.to_string_lossy().replacen("ccp-soak-", "ccp-soak-logs-", 1)).unwrap_or_default();
        let logs = kept.with_file_name(name);
        let logs = if std::fs::rename(&kept, &logs).is_ok() { logs } else { kept };
        notes.push(format!("!!! logs kept in {} (agent-*.log: what is not per-flow; datapath.err)", logs.display()));
    }
    Ok((rows, notes, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_datapath_takes_half_the_churn() {
        let p =
            Plan { minutes: 60.0, flows: 1000, churn_per_s: 100.0, swap_every_s: 10, restart_every_s: 300, sample_every_s: 5 };
        assert_eq!(p.life(), Duration::from_secs(20));
        assert_eq!((p.warmup(), p.fd_phase()), (Duration::from_secs(150), Duration::from_secs(150)));
        let ci = Plan { minutes: 2.0, restart_every_s: 60, ..p };
        assert_eq!((ci.warmup(), ci.fd_phase()), (Duration::from_secs(30), Duration::from_secs(30)));
        // Without restarts: half the run, at most 150 s.
        let once = Plan { minutes: 5.0, restart_every_s: 3600, ..p };
        assert_eq!(once.warmup(), Duration::from_secs(150));
        assert_eq!(Plan { minutes: 2.0, ..once }.warmup(), Duration::from_secs(60));
    }
}
