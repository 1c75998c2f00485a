//! The eBPF datapath adapter: this kernel's BPF congestion control (`ccp-ebpf`), loaded by the
//! agent itself.
//!
//! - The kernel folds the measurement contract per flow and emits one record per interval (or
//!   per RTT), plus urgent ones; `report.rs` turns them into `Report`s. Records arrive on a ring
//!   buffer whose fd is registered with the event loop. Ordinary records wake the agent at most
//!   once per `wake_gap_us` (waking on every record costs an IPI each on a VM), so a timer also
//!   drains the ring every `consume_interval_us`, registered under the same token.
//! - Commands become control entries, which the kernel re-applies on every ACK. What the agent
//!   wants (`desired`) is kept apart from what the map holds (`applied`), so a failed write is
//!   retried on the next tick. Every tick also refreshes the heartbeat: an agent silent for longer
//!   than `silence_timeout_ms` hands every flow to the in-kernel fallback.
//! - A flow already on the congestion control when the agent starts (a restart: the maps are
//!   pinned and shared with the orphaned instance) is adopted on its newest report in the ring,
//!   seeded from it (older ones are the backlog of the dead agent's absence). A flow switched
//!   here mid-flow (attach) comes with its current window as the seed. Either way the control
//!   entry starts out holding that window: the controller commands only changes from it.
//! - A clean shutdown detaches everything attach did (flows back to their previous congestion
//!   control, sockops off the cgroups, namespace defaults restored), then unregisters and unpins.

mod latency;
mod report;
pub mod select;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use ccp_ebpf::attach::{Attacher, Detach, Namespaces, Outcome, Settings};
use ccp_ebpf::{Config, Control, DecodeError, Instance, Knobs, Record, ReportEvery};
use mio::unix::SourceFd;
use tracing::{debug, info, warn};

use super::{ApplyError, Capabilities, CloseReason, Command, Datapath, DatapathEvent, FlowRef, PacingCommand};
use crate::config::EbpfSection;
use latency::Histogram;

/// Largest window the kernel can hold in practice (its counter is u32 packets; this is what the
/// controller clamps to before dividing by the MSS).
const MAX_CWND_BYTES: u64 = u32::MAX as u64;
/// 8 Tbit/s: beyond any link, well inside `sk_pacing_rate`.
const MAX_RATE_BYTES_PER_S: u64 = 1 << 40;
/// How often the counters and the report latency go to the log.
const STATS_EVERY: Duration = Duration::from_secs(10);

/// Adapter counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EbpfStats {
    pub records: u64,
    pub decode_errors: u64,
    pub flows_created: u64,
    pub flows_adopted: u64,
    pub flows_closed: u64,
    pub reports: u64,
    /// Reports of an adopted flow older than the one it was adopted with (the backlog a dead
    /// agent left in the ring).
    pub stale_reports: u64,
    pub control_writes: u64,
    pub control_errors: u64,
}

struct FlowState {
    last_report: Instant,
    desired: Control,
    applied: Option<Control>,
    seq: u32,
    reports: u64,
    fallback_reports: u64,
    acked_bytes: u64,
    ce_pkts: u64,
    lost_pkts: u64,
    timeouts: u64,
}

impl FlowState {
    /// `held_cwnd`: the window a running flow has. Its controller starts from it and commands
    /// only changes, while the kernel holds nothing for it yet (a new epoch, or no entry):
    /// the entry must carry it.
    fn new(held_cwnd: Option<u64>) -> FlowState {
        FlowState {
            last_report: Instant::now(),
            desired: Control { cwnd_bytes: held_cwnd, ..Control::default() },
            applied: None,
            seq: 0,
            reports: 0,
            fallback_reports: 0,
            acked_bytes: 0,
            ce_pkts: 0,
            lost_pkts: 0,
            timeouts: 0,
        }
    }
}

/// A periodic CLOCK_MONOTONIC timer fd.
struct Timer(OwnedFd);

impl Timer {
    fn new(every: Duration) -> io::Result<Timer> {
        // SAFETY: timerfd_create has no memory arguments; the fd is owned at once.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd we own.
        let timer = Timer(unsafe { OwnedFd::from_raw_fd(fd) });
        let ts = libc::timespec { tv_sec: every.as_secs() as libc::time_t, tv_nsec: every.subsec_nanos() as libc::c_long };
        let spec = libc::itimerspec { it_interval: ts, it_value: ts };
        // SAFETY: a valid itimerspec; no old value wanted.
        if unsafe { libc::timerfd_settime(timer.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(timer)
    }

    /// Acknowledges expirations so that the next one signals again.
    fn clear(&self) {
        let mut n = [0u8; 8];
        // SAFETY: reading 8 bytes into a valid buffer from a non-blocking timerfd.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), n.as_mut_ptr().cast(), n.len()) };
    }
}

pub struct EbpfDatapath {
    inst: Instance,
    attacher: Attacher,
    timer: Timer,
    flows: HashMap<u32, FlowState>,
    /// Flows closed in the batch being handled: the runtime may still answer their last report.
    closed_in_batch: Vec<u32>,
    records: Vec<Result<Record, DecodeError>>,
    cgroups: ccp_ebpf::cgroup::Names,
    /// With `report_per_rtt`, the agent's default interval, which means "per RTT" here.
    per_rtt_default_us: Option<u64>,
    /// The runtime forgets flows silent this long; one that reports again is announced again.
    idle_timeout: Duration,
    latency: Histogram,
    stats: EbpfStats,
    last_stats: Instant,
}

fn knobs(cfg: &EbpfSection, default_interval_us: u64) -> Knobs {
    Knobs {
        silence_timeout: Duration::from_millis(cfg.silence_timeout_ms),
        default_report: if cfg.report_per_rtt {
            ReportEvery::RttSixteenths(16)
        } else {
            ReportEvery::Micros(u32::try_from(default_interval_us).unwrap_or(u32::MAX))
        },
        min_report_interval: Duration::from_micros(cfg.min_report_interval_us),
        wake_gap: Duration::from_micros(cfg.wake_gap_us),
        fallback: cfg.fallback,
    }
}

/// The report policy for a commanded interval. With `report_per_rtt`, the agent's default
/// interval (what a flow gets until its algorithm asks for another) means once per RTT.
fn report_every(per_rtt_default_us: Option<u64>, us: u64) -> ReportEvery {
    if per_rtt_default_us == Some(us) {
        ReportEvery::RttSixteenths(16)
    } else {
        ReportEvery::Micros(u32::try_from(us).unwrap_or(u32::MAX))
    }
}

/// The attach settings of an `[datapath.ebpf]` section (also what `ccp-agent attach` uses).
pub fn attach_settings(cfg: &EbpfSection) -> Settings {
    Settings {
        cc_name: cfg.name.clone(),
        pin_dir: cfg.pin_dir.clone(),
        state_file: cfg.state_file.clone(),
        restore_cc: cfg.restore.clone(),
    }
}

/// Logs what an attach or detach did.
fn log_outcome(what: &str, out: &Outcome) {
    for s in &out.switched {
        match s.errno {
            None => info!(netns = %s.netns, local = ?s.local, remote = ?s.remote, from = %s.from, to = %s.to, "{what}: switched"),
            Some(e) => warn!(
                netns = %s.netns, local = ?s.local, remote = ?s.remote, from = %s.from, to = %s.to,
                error = %io::Error::from_raw_os_error(e), "{what}: could not switch"
            ),
        }
    }
    for c in &out.cgroups {
        info!(cgroup = %c.display(), "{what}: sockops");
    }
    for d in &out.defaults {
        info!(default = %d, "{what}: namespace default");
    }
    for w in &out.warnings {
        warn!("{what}: {w}");
    }
}

impl EbpfDatapath {
    /// Loads and registers the congestion control, re-adopting what a previous agent left.
    pub fn open(cfg: &EbpfSection, default_interval_us: u64, idle_timeout: Duration) -> anyhow::Result<EbpfDatapath> {
        if cfg.realtime_priority > 0 {
            let param = libc::sched_param { sched_priority: i32::from(cfg.realtime_priority) };
            // SAFETY: sched_setscheduler on this process with a valid sched_param.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                warn!(error = %io::Error::last_os_error(), "could not switch to SCHED_FIFO; report latency may suffer");
            }
        }
        let inst = Instance::load(Config {
            name: cfg.name.clone(),
            pin_dir: cfg.pin_dir.clone(),
            ring_bytes: cfg.ring_bytes,
            max_flows: cfg.max_flows,
            knobs: knobs(cfg, default_interval_us),
        })?;
        let attacher = Attacher::new(attach_settings(cfg), Some(inst.prev_cc_map()?));
        let stats = inst.prog_stats();
        info!(
            name = inst.name(),
            epoch = inst.epoch(),
            adopted_maps = inst.adopted_maps(),
            pins = %cfg.pin_dir.display(),
            progs = ?stats.iter().map(|p| format!("{}={}", p.name, p.id)).collect::<Vec<_>>(),
            "ebpf congestion control registered"
        );
        if inst.adopted_maps() {
            log_outcome("restart", &attacher.reassert_defaults()?);
        }
        if cfg.attach != select::Selection::default() {
            log_outcome("attach", &attacher.attach(&cfg.attach.attach().map_err(anyhow::Error::msg)?)?);
        }
        Ok(EbpfDatapath {
            inst,
            attacher,
            timer: Timer::new(Duration::from_micros(cfg.consume_interval_us))?,
            flows: HashMap::new(),
            closed_in_batch: Vec::new(),
            records: Vec::new(),
            cgroups: ccp_ebpf::cgroup::Names::default(),
            per_rtt_default_us: cfg.report_per_rtt.then_some(default_interval_us),
            idle_timeout,
            latency: Histogram::default(),
            stats: EbpfStats::default(),
            last_stats: Instant::now(),
        })
    }

    fn flow(&self, fid: u32) -> FlowRef {
        FlowRef { peer: 0, sid: fid }
    }

    /// `adopt_now`: for a report of a flow this agent does not know, whether it is the flow's
    /// newest in the batch (older ones are skipped: the adoption seeds from the newest).
    fn handle(&mut self, rec: Record, adopt_now: bool, out: &mut Vec<DatapathEvent>) {
        match rec {
            Record::Create(c) => {
                let flow = self.flow(c.fid);
                let held = c.existing.then(|| u64::from(c.cwnd_pkts) * u64::from(c.mss.max(1)));
                if self.flows.insert(c.fid, FlowState::new(held)).is_some() {
                    out.push(DatapathEvent::FlowClosed { flow, reason: CloseReason::Replaced });
                }
                self.stats.flows_created += 1;
                let cgroup = self.cgroups.name(c.cgroup_id);
                debug!(
                    %flow, local = ?c.local, remote = ?c.remote, existing = c.existing, prev_cc = c.prev_cc.as_deref().unwrap_or(""),
                    cgroup = cgroup.as_deref().unwrap_or(""), mss = c.mss, cwnd_pkts = c.cwnd_pkts, "ebpf flow created"
                );
                out.push(DatapathEvent::FlowStarted { flow, info: report::flow_info(&c, cgroup) });
            }
            Record::Report(k) => {
                let flow = self.flow(k.fid);
                let r = report::to_report(&k);
                self.stats.reports += 1;
                if !self.flows.contains_key(&k.fid) {
                    if !adopt_now {
                        self.stats.stale_reports += 1;
                        return;
                    }
                    // A flow that was running before this agent: adopt it, seeded from its state.
                    let create = self.inst.flow_info(k.fid);
                    let cgroup = create.as_ref().and_then(|c| self.cgroups.name(c.cgroup_id));
                    info!(%flow, cwnd_bytes = r.cwnd_bytes, "adopting a running flow");
                    self.stats.flows_adopted += 1;
                    self.flows.insert(k.fid, FlowState::new(Some(r.cwnd_bytes)));
                    out.push(DatapathEvent::FlowStarted { flow, info: report::adopted_info(create.as_ref(), cgroup, &r) });
                }
                let now = Instant::now();
                if let Some(f) = self.flows.get_mut(&k.fid) {
                    if now.duration_since(f.last_report) >= self.idle_timeout {
                        // An idle flow the runtime has forgotten: announce it again, seeded.
                        let info = report::adopted_info(None, None, &r);
                        out.push(DatapathEvent::FlowStarted { flow, info });
                    }
                    f.last_report = now;
                    f.reports += 1;
                    f.fallback_reports += u64::from(k.fallback);
                    f.acked_bytes += r.acked_bytes;
                    f.ce_pkts += r.ce_pkts;
                    f.lost_pkts += r.lost_pkts;
                    f.timeouts += u64::from(r.timeouts);
                }
                tracing::trace!(
                    %flow, cwnd = r.cwnd_bytes, acked = r.acked_bytes, ce_pkts = r.ce_pkts, ece = r.ece_acks,
                    lost = r.lost_pkts, srtt = ?r.rtt.map(|x| x.srtt_us), fallback = k.fallback, urgent = ?r.urgent, "report"
                );
                out.push(DatapathEvent::Report { flow, report: r });
            }
            Record::Close(c) => {
                let flow = self.flow(c.fid);
                // The kernel deleted the entry; this catches a write that raced the close.
                self.inst.clear_control(c.fid);
                if let Some(f) = self.flows.remove(&c.fid) {
                    self.closed_in_batch.push(c.fid);
                    self.stats.flows_closed += 1;
                    info!(
                        %flow, reports = f.reports, fallback_reports = f.fallback_reports, acked_bytes = f.acked_bytes,
                        ce_pkts = f.ce_pkts, lost_pkts = f.lost_pkts, timeouts = f.timeouts, "ebpf flow closed"
                    );
                    out.push(DatapathEvent::FlowClosed { flow, reason: CloseReason::Closed });
                }
            }
        }
    }

    /// Writes a flow's control entry if the map does not hold what the agent wants.
    fn flush(&mut self, fid: u32) -> Result<(), ApplyError> {
        let flow = self.flow(fid);
        let Some(f) = self.flows.get_mut(&fid) else { return Err(ApplyError::UnknownFlow(flow)) };
        if f.applied == Some(f.desired) {
            return Ok(());
        }
        f.seq = f.seq.wrapping_add(1).max(1);
        match self.inst.set_control(fid, &f.desired, f.seq) {
            Ok(()) => {
                f.applied = Some(f.desired);
                self.stats.control_writes += 1;
                Ok(())
            }
            Err(e) => {
                self.stats.control_errors += 1;
                Err(ApplyError::Unreachable { flow, source: io::Error::other(e.to_string()) })
            }
        }
    }

    fn log_stats(&self) {
        let l = self.latency.summary();
        info!(
            flows = self.flows.len(),
            stats = %serde_json::to_string(&self.stats).unwrap_or_default(),
            kernel = %serde_json::to_string(&self.inst.counters()).unwrap_or_default(),
            latency_p50_us = l.p50_us,
            latency_p99_us = l.p99_us,
            latency_max_us = l.max_us,
            latency_samples = l.count,
            "ebpf datapath stats"
        );
    }
}

impl Datapath for EbpfDatapath {
    fn describe(&self) -> String {
        format!("ebpf:{} (pins {})", self.inst.name(), self.inst.pin_dir().display())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { max_cwnd_bytes: MAX_CWND_BYTES, max_rate_bytes_per_s: MAX_RATE_BYTES_PER_S, can_clear_pacing: true }
    }

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut SourceFd(&self.inst.ring_fd().as_raw_fd()), token, mio::Interest::READABLE)?;
        registry.register(&mut SourceFd(&self.timer.0.as_raw_fd()), token, mio::Interest::READABLE)
    }

    fn poll_events(&mut self, out: &mut Vec<DatapathEvent>) {
        self.timer.clear();
        self.closed_in_batch.clear();
        let mut recs = std::mem::take(&mut self.records);
        if let Err(e) = self.inst.drain(|r| recs.push(r)) {
            warn!(error = %e, "ring buffer drain failed");
        }
        // The newest report of each flow this agent does not know yet.
        let mut newest: HashMap<u32, usize> = HashMap::new();
        for (i, r) in recs.iter().enumerate() {
            match r {
                Ok(Record::Report(k)) if !self.flows.contains_key(&k.fid) => {
                    newest.insert(k.fid, i);
                }
                Ok(Record::Create(c)) => {
                    newest.remove(&c.fid);
                }
                _ => {}
            }
        }
        let now_ns = ccp_ebpf::mono_ns();
        for (i, r) in recs.drain(..).enumerate() {
            self.stats.records += 1;
            match r {
                Ok(rec) => {
                    self.latency.record(now_ns.saturating_sub(rec.ts_ns()) / 1000);
                    let adopt_now = newest.get(&rec.fid()) == Some(&i);
                    self.handle(rec, adopt_now, out);
                }
                Err(e) => {
                    self.stats.decode_errors += 1;
                    debug!(error = %e, "dropping an undecodable record");
                }
            }
        }
        self.records = recs;
    }

    fn apply(&mut self, flow: FlowRef, cmd: &Command) -> Result<(), ApplyError> {
        let every = cmd.report_interval_us.map(|us| report_every(self.per_rtt_default_us, us));
        if self.closed_in_batch.contains(&flow.sid) {
            // The answer to a report that arrived with the flow's close.
            return Ok(());
        }
        let Some(f) = self.flows.get_mut(&flow.sid) else { return Err(ApplyError::UnknownFlow(flow)) };
        let d = &mut f.desired;
        if let Some(c) = cmd.cwnd_bytes {
            d.cwnd_bytes = Some(c.max(1));
        }
        match cmd.pacing {
            Some(PacingCommand::Off) => d.pacing_bytes_per_s = None,
            Some(PacingCommand::BytesPerSec(r)) => d.pacing_bytes_per_s = Some(r.max(1)),
            None => {}
        }
        if let Some(e) = every {
            d.report = e;
        }
        if let Some(t) = cmd.rtt_threshold_us {
            d.rtt_threshold_us = Some(u32::try_from(t).unwrap_or(u32::MAX));
        }
        self.flush(flow.sid)
    }

    fn peer_name(&self, _peer: u32) -> String {
        format!("ebpf:{}", self.inst.name())
    }

    fn tick(&mut self, now: Instant) {
        if let Err(e) = self.inst.heartbeat() {
            warn!(error = %e, "could not refresh the heartbeat; flows will fall back");
        }
        let unflushed: Vec<u32> = self.flows.iter().filter(|(_, f)| f.applied != Some(f.desired)).map(|(k, _)| *k).collect();
        for fid in unflushed {
            if let Err(e) = self.flush(fid) {
                debug!(fid, error = %e, "retry of a control entry failed");
            }
        }
        if now.duration_since(self.last_stats) >= STATS_EVERY {
            self.last_stats = now;
            self.log_stats();
        }
    }

    fn control(&mut self, command: &str, spec: &serde_json::Value) -> Result<serde_json::Value, String> {
        let sel: select::Selection = serde_json::from_value(spec.clone()).map_err(|e| format!("bad {command} selection: {e}"))?;
        let out = match command {
            "attach" => self.attacher.attach(&sel.attach()?),
            "detach" => self.attacher.detach(&sel.detach()?),
            other => return Err(format!("the eBPF datapath has no {other:?} command")),
        }
        .map_err(|e| e.to_string())?;
        log_outcome(command, &out);
        Ok(select::outcome_json(&out))
    }

    fn shutdown(&mut self) {
        self.log_stats();
        match self.attacher.detach(&Detach::default()) {
            Ok(out) => log_outcome("detach", &out),
            Err(e) => warn!(error = %e, "detach at shutdown failed"),
        }
        let mut sink = Vec::new();
        self.poll_events(&mut sink);
        if !self.flows.is_empty() {
            // Flows in namespaces attach never recorded (an application chose the congestion
            // control itself): look everywhere.
            let everywhere = Detach { namespaces: Namespaces { paths: Vec::new(), all: true }, ..Detach::default() };
            match self.attacher.detach(&everywhere) {
                Ok(out) => log_outcome("detach", &out),
                Err(e) => warn!(error = %e, "detach in every namespace failed"),
            }
            self.poll_events(&mut sink);
        }
        if !self.flows.is_empty() {
            warn!(flows = self.flows.len(), "flows still on the congestion control keep running on its fallback");
        }
        self.inst.unregister();
        self.inst.unpin();
        let _ = std::fs::remove_dir(self.inst.pin_dir());
        info!(name = self.inst.name(), "ebpf congestion control unregistered");
    }
}
