//! The eBPF datapath adapter: this kernel's BPF congestion control (`ccp-ebpf`), loaded by the
//! agent itself.
//!
//! - The kernel folds the measurement contract per flow and emits one record per interval (or
//!   per RTT: the kernel counts RTTs itself, so per-RTT policies reach it as such), plus urgent
//!   ones; `report.rs` turns them into `Report`s. Records arrive on a ring buffer whose fd is
//!   registered with the event loop. Ordinary records wake the agent at most once per
//!   `wake_gap_us` (waking on every record costs an IPI each on a VM), so a timer also drains
//!   the ring every `consume_interval_us`, registered under the same token.
//! - Settings become control entries, which the kernel re-applies on every ACK. A write that
//!   fails is an apply error: the runtime's latch retries it. Every tick refreshes the
//!   heartbeat: an agent silent for longer than `silence_timeout_ms` hands every flow to the
//!   in-kernel fallback.
//! - A report of a flow the agent does not control (an agent restart: the maps are pinned and
//!   shared with the orphaned instance; or a flow the agent forgot while it was idle) adopts the
//!   flow on its newest report in the batch, seeded from it (older ones are the backlog of the
//!   agent's absence). A flow switched here mid-flow (attach) comes with its current window as
//!   the seed. Either way the first control entry carries that window.
//! - A clean shutdown detaches everything attach did (flows back to their previous congestion
//!   control, sockops off the cgroups, namespace defaults restored), then unregisters and unpins.

mod report;
mod select;
mod settings;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::clock::Now;

use ccp_contract::{Capabilities, Command, PacingCommand, PacketWindow, Settings};
use ccp_ebpf::attach::{Attacher, Detach, Namespaces};
use ccp_ebpf::{Config, Control, DecodeError, Instance, Record};
use mio::unix::SourceFd;
use tracing::{debug, info, warn};

use super::attach::{AttachControl, AttachJob, AttachReport, Selection};
use super::{ApplyError, CloseReason, Datapath, DatapathConfig, DatapathEvent, FlowRef, Kind, OpenContext};
use crate::latency::Histogram;
pub use settings::EbpfSettings;

pub const KIND: Kind = Kind {
    name: "ebpf",
    summary: "this kernel's TCP flows, through the `ccp` BPF struct_ops congestion control (root)",
    reports_per_rtt: false,
    check: |section| EbpfSettings::from_section(section).map(|_| ()),
    open: |section, ctx| {
        let settings = EbpfSettings::from_section(section).map_err(anyhow::Error::msg)?;
        Ok(Box::new(EbpfDatapath::open(&settings, ctx)?))
    },
};

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
    /// Reports the kernel sent while the flow ran its in-kernel fallback.
    pub fallback_reports: u64,
    /// Reports of an unknown flow older than the one it was adopted with (the backlog a dead
    /// agent left in the ring).
    pub stale_reports: u64,
    pub control_writes: u64,
    pub control_errors: u64,
    /// Control entries found not in force (the flow reported from the fallback after its entry
    /// was written) and written again.
    pub entries_repaired: u64,
    /// Control writes refused because every slot was taken.
    pub slots_full: u64,
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
    attach_settings: ccp_ebpf::attach::Settings,
    timer: Timer,
    /// Flows closed in the batch being handled: the runtime may still answer their last report,
    /// and a control entry written after the kernel deleted it would outlive the flow.
    closed_in_batch: Vec<u32>,
    records: Vec<Result<Record, DecodeError>>,
    cgroups: ccp_ebpf::cgroup::Names,
    /// Every control write gets a new sequence number: the kernel redoes its division of the
    /// window by the MSS only when the entry changed.
    seq: u32,
    /// When each flow's control entry was last written (CLOCK_MONOTONIC ns): the time of the
    /// batch that wrote it, never later than the write, so an entry is never taken for newer
    /// than a report's interval that it missed.
    written: HashMap<u32, u64>,
    latency: Histogram,
    stats: EbpfStats,
    /// When the stats were last logged (none yet: from the first tick on).
    last_stats: Option<Instant>,
    busy_poll: bool,
}

/// `ccp-agent attach`/`detach` run directly, through the pins of the configuration's agent.
pub fn attach_direct(cfg: &DatapathConfig, selection: &Selection, attach: bool) -> anyhow::Result<AttachReport> {
    let settings = EbpfSettings::from_section(&cfg.section(KIND.name)).map_err(|e| anyhow::anyhow!("[datapath.ebpf]: {e}"))?;
    let attacher = Attacher::from_pins(settings.attach_settings());
    let out = if attach {
        attacher.attach(&select::to_attach(selection).map_err(anyhow::Error::msg)?)?
    } else {
        attacher.detach(&select::to_detach(selection).map_err(anyhow::Error::msg)?)?
    };
    Ok(AttachReport::from(&out))
}

/// A flow's settings as the kernel's control entry.
fn control(want: &Settings) -> Control {
    Control {
        cwnd_bytes: Some(want.cwnd_bytes.max(1)),
        pacing_bytes_per_s: match want.pacing {
            Some(PacingCommand::BytesPerSec(r)) => Some(r.max(1)),
            Some(PacingCommand::Off) | None => None,
        },
        report: settings::report_every(want.report),
        rtt_threshold_us: want.rtt_threshold_us.map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
        report_acked_pkts: want.report_acked_pkts,
        aggregation_bytes_per_s: want.ack_aggregation_bw_bytes_per_s,
    }
}

impl EbpfDatapath {
    /// Loads and registers the congestion control, re-adopting what a previous agent left.
    pub fn open(cfg: &EbpfSettings, ctx: &OpenContext) -> anyhow::Result<EbpfDatapath> {
        if cfg.busy_poll {
            info!("busy_poll: the agent polls the ring without sleeping, with normal scheduling");
        } else if cfg.realtime_priority > 0 {
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
            knobs: cfg.knobs(ctx.limits.default_report),
        })?;
        let attacher = Attacher::new(cfg.attach_settings(), Some(inst.prev_cc_map()?));
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
            attacher.reassert_defaults()?.log("restart");
        }
        if cfg.attach != Selection::default() {
            attacher.attach(&select::to_attach(&cfg.attach).map_err(anyhow::Error::msg)?)?.log("attach");
        }
        Ok(EbpfDatapath {
            inst,
            attacher,
            attach_settings: cfg.attach_settings(),
            timer: Timer::new(Duration::from_micros(cfg.consume_interval_us))?,
            closed_in_batch: Vec::new(),
            records: Vec::new(),
            cgroups: ccp_ebpf::cgroup::Names::default(),
            seq: 0,
            written: HashMap::new(),
            latency: Histogram::default(),
            stats: EbpfStats::default(),
            last_stats: None,
            busy_poll: cfg.busy_poll,
        })
    }

    fn flow(&self, fid: u32) -> FlowRef {
        FlowRef { peer: 0, sid: fid }
    }

    /// `adopt_now`: for a report of a flow the agent does not control, whether it is the flow's
    /// newest in the batch (older ones are skipped: the adoption seeds from the newest).
    fn handle(&mut self, rec: Record, known: bool, adopt_now: bool, out: &mut Vec<DatapathEvent>) {
        match rec {
            Record::Create(c) => {
                let flow = self.flow(c.fid);
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
                self.stats.fallback_reports += u64::from(k.fallback);
                if !known {
                    if !adopt_now {
                        self.stats.stale_reports += 1;
                        return;
                    }
                    // A flow running before this agent, or one it forgot while it was idle:
                    // adopt it, seeded from its state.
                    let create = self.inst.flow_info(k.fid);
                    let cgroup = create.as_ref().and_then(|c| self.cgroups.name(c.cgroup_id));
                    info!(%flow, cwnd_bytes = r.cwnd_bytes, "adopting a running flow");
                    self.stats.flows_adopted += 1;
                    out.push(DatapathEvent::FlowStarted { flow, info: report::adopted_info(create.as_ref(), cgroup, &r) });
                }
                // An entry written before this report's interval began, yet the flow ran the
                // fallback: the entry is not in force (lost to a slot reused under it, say).
                // The report goes first; then everything is written again.
                let lost = k.fallback && self.written.get(&k.fid).is_some_and(|w| *w < k.start_ns);
                tracing::trace!(
                    %flow, cwnd = r.cwnd_bytes, acked = r.acked_bytes, ce_pkts = r.ce_pkts, ece = r.ece_acks,
                    lost = r.lost_pkts, srtt = ?r.rtt.map(|x| x.srtt_us), fallback = k.fallback, urgent = ?r.urgent, "report"
                );
                out.push(DatapathEvent::Report { flow, report: r });
                if lost && known {
                    self.written.remove(&k.fid);
                    self.stats.entries_repaired += 1;
                    debug!(%flow, "control entry not in force; writing it again");
                    out.push(DatapathEvent::SettingsLost { flow });
                }
            }
            Record::Close(c) => {
                let flow = self.flow(c.fid);
                // The kernel deleted the entry; this catches a write that raced the close.
                self.inst.clear_control(c.fid);
                self.written.remove(&c.fid);
                self.closed_in_batch.push(c.fid);
                self.stats.flows_closed += 1;
                if known {
                    out.push(DatapathEvent::FlowClosed { flow, reason: CloseReason::Closed });
                }
            }
        }
    }

    fn log_stats(&self) {
        let l = self.latency.summary();
        info!(
            stats = %serde_json::to_string(&self.stats).unwrap_or_default(),
            kernel = %serde_json::to_string(&self.inst.counters()).unwrap_or_default(),
            slots_used = self.inst.slot_usage().0,
            slots_moved = self.inst.slot_usage().1,
            slots_capacity = self.inst.slot_usage().2,
            latency_p50_us = l.p50_us,
            latency_p99_us = l.p99_us,
            latency_max_us = l.max_us,
            latency_samples = l.count,
            "ebpf datapath stats"
        );
    }

    /// Drains the ring with nobody to answer (shutdown): the closes it holds are what matters.
    fn drain_closes(&mut self, now: Now) -> usize {
        let mut sink = Vec::new();
        self.poll_events(&|_| true, &mut sink, usize::MAX, now);
        self.inst.live_flows()
    }
}

impl Datapath for EbpfDatapath {
    fn describe(&self) -> String {
        format!("ebpf:{} (pins {})", self.inst.name(), self.inst.pin_dir().display())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_cwnd_bytes: MAX_CWND_BYTES,
            max_rate_bytes_per_s: MAX_RATE_BYTES_PER_S,
            can_clear_pacing: true,
            per_rtt_reports: true,
            // ccp.bpf.c: ctrl_cwnd = (cwnd_bytes + mss / 2) / mss.
            cwnd_packets: Some(PacketWindow::Nearest),
        }
    }

    fn busy_poll(&self) -> bool {
        self.busy_poll
    }

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> io::Result<()> {
        registry.register(&mut SourceFd(&self.inst.ring_fd().as_raw_fd()), token, mio::Interest::READABLE)?;
        registry.register(&mut SourceFd(&self.timer.0.as_raw_fd()), token, mio::Interest::READABLE)
    }

    fn poll_events(&mut self, known: &dyn Fn(FlowRef) -> bool, out: &mut Vec<DatapathEvent>, budget: usize, now: Now) -> usize {
        self.timer.clear();
        self.closed_in_batch.clear();
        let mut recs = std::mem::take(&mut self.records);
        let read = match self.inst.drain_at_most(budget, |r| recs.push(r)) {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, "ring buffer drain failed");
                recs.len()
            }
        };
        // Which flows the agent controls, as the batch goes: a create starts one, a close ends it.
        let mut live: HashMap<u32, bool> = HashMap::new();
        // The newest report of each flow the agent does not control at that point.
        let mut newest: HashMap<u32, usize> = HashMap::new();
        for (i, r) in recs.iter().enumerate() {
            let Ok(r) = r else { continue };
            let fid = r.fid();
            let is_known = *live.entry(fid).or_insert_with(|| known(self.flow(fid)));
            match r {
                Record::Report(_) if !is_known => {
                    newest.insert(fid, i);
                }
                Record::Create(_) => {
                    newest.remove(&fid);
                    live.insert(fid, true);
                }
                Record::Close(_) => {
                    live.insert(fid, false);
                }
                Record::Report(_) => {}
            }
        }
        let now_ns = now.mono_ns;
        let mut live: HashMap<u32, bool> = HashMap::new();
        for (i, r) in recs.drain(..).enumerate() {
            self.stats.records += 1;
            match r {
                Ok(rec) => {
                    self.latency.record(now_ns.saturating_sub(rec.ts_ns()) / 1000);
                    let fid = rec.fid();
                    let is_known = *live.entry(fid).or_insert_with(|| known(FlowRef { peer: 0, sid: fid }));
                    let adopt_now = newest.get(&fid) == Some(&i);
                    let now_known = match &rec {
                        Record::Create(_) => true,
                        Record::Close(_) => false,
                        Record::Report(_) => is_known || adopt_now,
                    };
                    self.handle(rec, is_known, adopt_now, out);
                    live.insert(fid, now_known);
                }
                Err(e) => {
                    self.stats.decode_errors += 1;
                    debug!(error = %e, "dropping an undecodable record");
                }
            }
        }
        self.records = recs;
        read
    }

    fn apply(&mut self, flow: FlowRef, want: &Settings, _changed: &Command, now: Now) -> Result<(), ApplyError> {
        if self.closed_in_batch.contains(&flow.sid) {
            // The answer to a report that arrived with the flow's close.
            return Ok(());
        }
        // The entry is written whole: the kernel re-applies it on every ACK.
        self.seq = self.seq.wrapping_add(1).max(1);
        match self.inst.set_control(flow.sid, &control(want), self.seq) {
            Ok(()) => {
                self.stats.control_writes += 1;
                self.written.insert(flow.sid, now.mono_ns);
                Ok(())
            }
            Err(e) => {
                if matches!(e, ccp_ebpf::Error::SlotsFull(_)) {
                    self.stats.slots_full += 1;
                }
                self.stats.control_errors += 1;
                Err(ApplyError::Unreachable { flow, source: io::Error::other(e.to_string()) })
            }
        }
    }

    fn peer_name(&self, _peer: u32) -> String {
        format!("ebpf:{}", self.inst.name())
    }

    fn tick(&mut self, now: Now) {
        if let Err(e) = self.inst.heartbeat() {
            warn!(error = %e, "could not refresh the heartbeat; flows will fall back");
        }
        match self.last_stats {
            None => self.last_stats = Some(now.instant),
            Some(at) if now.instant.duration_since(at) >= STATS_EVERY => {
                self.last_stats = Some(now.instant);
                self.log_stats();
            }
            Some(_) => {}
        }
    }

    fn attach_control(&mut self) -> Option<&mut dyn AttachControl> {
        Some(self)
    }

    fn stats_json(&self) -> serde_json::Value {
        let (used, moves, capacity) = self.inst.slot_usage();
        serde_json::json!({
            "adapter": self.stats,
            "kernel": self.inst.counters(),
            "control_slots": { "used": used, "moved": moves, "capacity": capacity },
        })
    }

    fn forget(&mut self, flow: FlowRef) {
        // Its slot is free for others; if it reports again it is adopted and placed afresh.
        self.inst.clear_control(flow.sid);
        self.written.remove(&flow.sid);
    }

    fn shutdown(&mut self, now: Now) {
        self.log_stats();
        match self.attacher.detach(&Detach::default()) {
            Ok(out) => out.log("detach"),
            Err(e) => warn!(error = %e, "detach at shutdown failed"),
        }
        if self.drain_closes(now) > 0 {
            // Flows in namespaces attach never recorded (an application chose the congestion
            // control itself): look everywhere.
            let everywhere = Detach { namespaces: Namespaces { paths: Vec::new(), all: true }, ..Detach::default() };
            match self.attacher.detach(&everywhere) {
                Ok(out) => out.log("detach"),
                Err(e) => warn!(error = %e, "detach in every namespace failed"),
            }
        }
        let left = self.drain_closes(now);
        if left > 0 {
            warn!(flows = left, "flows still on the congestion control keep running on its fallback");
        }
        self.inst.unregister();
        self.inst.unpin();
        let _ = std::fs::remove_dir(self.inst.pin_dir());
        info!(name = self.inst.name(), "ebpf congestion control unregistered");
    }
}

impl AttachControl for EbpfDatapath {
    fn job(&mut self, selection: &Selection, attach: bool) -> Result<AttachJob, String> {
        // The job has an attacher of its own on the same pins and state file (the state file is
        // locked while it is read and written, as for `ccp-agent attach` run beside the agent).
        let attacher = Attacher::from_pins(self.attach_settings.clone());
        if attach {
            let spec = select::to_attach(selection)?;
            Ok(Box::new(move || {
                let out = attacher.attach(&spec).map_err(|e| e.to_string())?;
                out.log("attach");
                Ok(AttachReport::from(&out))
            }))
        } else {
            let spec = select::to_detach(selection)?;
            Ok(Box::new(move || {
                let out = attacher.detach(&spec).map_err(|e| e.to_string())?;
                out.log("detach");
                Ok(AttachReport::from(&out))
            }))
        }
    }
}
