//! The datapath: the kernel's per-ACK records through libccp, libccp's commands into the
//! control map, libccp's messages to and from the agent.
//!
//! One thread, one loop: it sleeps in `ppoll` on the ring buffer and the agent's socket, at most
//! `consume_interval` at a time while it has flows (ordinary ACK records wake it at most once per
//! wake gap: pitfalls E and F), then
//! hands the agent's messages to libccp, runs every new ACK record through its flow's libccp
//! connection (`load_primitives` + `invoke`), and writes the commands that changed. Every tick it
//! refreshes the heartbeat (a shim that dies leaves its flows to the in-kernel fallback after the
//! silence timeout) and checks that the agent is still there.
//!
//! # The agent coming and going
//! Flows have libccp connections only while an agent reads its socket. When it goes (a send
//! finds its socket closed, or the tick sees it gone or replaced by a restarted agent), every
//! connection is dropped and every control entry cleared, so the flows continue on the
//! in-kernel fallback from the window they have. When an agent is there again, it gets READY
//! and one CREATE per flow, exactly as a datapath that just started: portus installs its
//! programs and starts steering the flows from their current windows.
//!
//! An agent that hangs with its socket open (stopped, deadlocked) would otherwise hold its flows
//! at the last windows it commanded for as long as it hangs: its socket is still there. It
//! stops emptying its queue, though, so every message to it is refused for want of room; once
//! that has lasted `--silence-timeout-ms` (the time after which the kernel gives up on a silent
//! shim, too), the agent counts as gone ([`ccp_libccp_host::datapath::Uptake`]). It is back when it reads
//! again: the READY sent on each tick while it is away finds room in its queue.
//!
//! # A restarted shim
//! The maps are pinned, so a new shim loads on them: flows of the previous one keep producing
//! records, and each is adopted at its first record stamped after this shim started (older ones
//! are the backlog of the dead shim's absence and are skipped).

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ccp_ebpf::attach::{Attacher, Detach, Namespaces};
use ccp_ebpf::{mono_ns, Ack, Close, Create, Instance, PerAckRecord, Record, Records};
use ccp_libccp_host::errors::describe;
use ccp_libccp_host::ipc::{self, Channel, MAX_DATAGRAM};
use ccp_libccp_host::primitives::to_libccp;
use ccp_libccp_host::stop;
use libccp::{Connection, Datapath, LibccpError};
use tracing::{debug, info, warn};

use crate::cli::RunArgs;
use crate::flows::{Desc, Flow};
use crate::primitives;
use ccp_libccp_host::datapath::{self as ccp, AgentPresence, Commanded, Shared};

/// How often the heartbeat is refreshed and the agent looked for.
const TICK: Duration = Duration::from_millis(100);
/// How often the counters go to the log.
const STATS_EVERY: Duration = Duration::from_secs(10);

/// Registers the congestion control, starts libccp and runs until SIGINT/SIGTERM.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let config = args.instance_config();
    let name = config.name.clone();
    let inst = Instance::load_with(config, Records::PerAck).map_err(|e| match e {
        ccp_ebpf::Error::AlreadyRegistered(n) => anyhow::anyhow!(
            "a congestion control named {n:?} is already registered: a ccp-agent on the eBPF datapath (or another \
             ccp-libccp-shim) holds the name; the two cannot share it — stop it, or give this shim another --name"
        ),
        e => anyhow::Error::new(e).context("loading the BPF congestion control"),
    })?;
    let attacher = Attacher::new(args.instance.attach_settings(), Some(inst.prev_cc_map()?));
    info!(name, epoch = inst.epoch(), adopted_maps = inst.adopted_maps(), pins = %inst.pin_dir().display(), progs = ?prog_ids(&inst), "per-ACK congestion control registered");
    if inst.adopted_maps() {
        attacher.reassert_defaults()?.log("restart");
    }

    let shared = Rc::new(Shared::new(Channel::open(&args.endpoints()).map_err(anyhow::Error::msg)?));
    let (chan, present) = (&shared.chan, shared.agent().is_some());
    info!(socket = %chan.bound_path().display(), agent = %chan.agent_path().display(), present, "libccp IPC");
    if !present {
        info!("no agent yet: flows run on the in-kernel fallback until one reads {}", chan.agent_path().display());
    }
    let dp = ccp::init_datapath(args.ipc.datapath_id, args.max_connections as usize, &shared).map_err(anyhow::Error::msg)?;
    stop::on_sigint_and_sigterm();
    let mut shim = Shim::new(inst, attacher, &dp, shared, args);
    shim.run_loop();
    shim.shutdown();
    Ok(())
}

fn prog_ids(inst: &Instance) -> Vec<String> {
    inst.prog_stats().iter().map(|p| format!("{}={}", p.name, p.id)).collect()
}

#[derive(Debug, Default)]
struct Stats {
    acks: u64,
    backlog: u64,
    invokes: u64,
    /// Invokes before the agent switched the flow to a program (libccp error -96).
    no_program: u64,
    invoke_errors: u64,
    from_agent: u64,
    rejected: u64,
    control_writes: u64,
    control_errors: u64,
    decode_errors: u64,
    folded_reports: u64,
    flows_created: u64,
    flows_adopted: u64,
    flows_closed: u64,
    table_full: u64,
}

struct Shim<'dp> {
    inst: Instance,
    attacher: Attacher,
    dp: &'dp Datapath,
    shared: Rc<Shared>,
    flows: HashMap<u32, Flow<'dp>>,
    datapath_id: u32,
    cong_alg: Option<String>,
    consume_interval: Duration,
    /// An agent that has not read a message for this long is gone.
    silence_timeout: Duration,
    /// Records stamped before this (CLOCK_MONOTONIC) are a previous shim's backlog.
    started_ns: u64,
    records: Vec<Result<PerAckRecord, ccp_ebpf::DecodeError>>,
    dirty: Vec<u32>,
    recv_buf: Vec<u8>,
    msg_buf: Vec<u8>,
    /// While no connection has been freed, libccp hands out sids 1, 2, 3, …; anything else
    /// means its connection table was not zeroed (`table` makes sure it is; this checks).
    next_sid: Option<u32>,
    stats: Stats,
    last_tick: Instant,
    last_stats: Instant,
}

impl<'dp> Shim<'dp> {
    fn new(inst: Instance, attacher: Attacher, dp: &'dp Datapath, shared: Rc<Shared>, args: &RunArgs) -> Self {
        Shim {
            inst,
            attacher,
            dp,
            shared,
            flows: HashMap::new(),
            datapath_id: args.ipc.datapath_id,
            cong_alg: args.ipc.cong_alg.clone(),
            consume_interval: Duration::from_micros(args.consume_interval_us),
            silence_timeout: Duration::from_millis(args.silence_timeout_ms),
            started_ns: mono_ns(),
            records: Vec::new(),
            dirty: Vec::new(),
            recv_buf: vec![0; MAX_DATAGRAM],
            msg_buf: Vec::with_capacity(MAX_DATAGRAM),
            next_sid: Some(1),
            stats: Stats::default(),
            last_tick: Instant::now(),
            last_stats: Instant::now(),
        }
    }

    fn run_loop(&mut self) {
        while !stop::requested() {
            // Messages stashed while a send waited are invisible to ppoll.
            // Without flows nothing can sit in the ring unannounced (a first record always finds
            // the wake gap long past and wakes us), so an idle shim sleeps until the next tick:
            // each timer wakeup costs ~15 µs of CPU on this VM.
            let wait = if self.shared.chan.has_stashed() {
                Duration::ZERO
            } else if self.flows.is_empty() {
                TICK.saturating_sub(self.last_tick.elapsed())
            } else {
                self.consume_interval
            };
            ipc::wait_readable(&[self.inst.ring_fd().as_raw_fd(), self.shared.chan.fd()], wait);
            self.read_agent();
            self.drain_ring();
            self.after_batch();
            let now = Instant::now();
            if now.duration_since(self.last_tick) >= TICK {
                self.last_tick = now;
                self.tick(now);
            }
        }
    }

    /// Hands every datagram from the agent to libccp, message by message, once checked.
    fn read_agent(&mut self) {
        let got = ccp::read_agent(&self.shared, self.dp, &mut self.recv_buf, &mut self.msg_buf, |_, _| {});
        self.stats.from_agent += got.messages;
        self.stats.rejected += got.rejected;
    }

    fn drain_ring(&mut self) {
        let mut recs = std::mem::take(&mut self.records);
        if let Err(e) = self.inst.drain_per_ack(|r| recs.push(r)) {
            self.shared.warn_throttled(&format!("ring buffer drain failed: {e}"));
        }
        for r in recs.drain(..) {
            match r {
                Ok(PerAckRecord::Ack(a)) => self.on_ack(&a),
                Ok(PerAckRecord::Record(Record::Create(c))) => self.on_create(&c),
                Ok(PerAckRecord::Record(Record::Close(c))) => self.on_close(&c),
                Ok(PerAckRecord::Record(Record::Report(_))) => {
                    self.stats.folded_reports += 1;
                    if self.stats.folded_reports == 1 {
                        warn!(
                            pins = %self.inst.pin_dir().display(),
                            "folded reports on this ring: flows of a ccp-agent instance share these pins; they are left to it"
                        );
                    }
                }
                Err(e) => {
                    self.stats.decode_errors += 1;
                    debug!(error = %e, "dropping an undecodable record");
                }
            }
        }
        self.records = recs;
    }

    fn on_create(&mut self, c: &Create) {
        self.stats.flows_created += 1;
        let cwnd = c.cwnd_pkts.saturating_mul(c.mss);
        debug!(fid = c.fid, local = ?c.local, remote = ?c.remote, existing = c.existing, mss = c.mss, cwnd, "flow created");
        // A fid seen again is a new flow (the old one's close was lost): its connection goes.
        self.flows.insert(c.fid, Flow::new(Desc::of_create(c), cwnd));
        if self.shared.agent().is_some() {
            self.connect(c.fid);
        }
    }

    /// Starts the flow's libccp connection (CREATE to the agent).
    fn connect(&mut self, fid: u32) -> bool {
        let Some(flow) = self.flows.get_mut(&fid) else { return false };
        let info = flow.desc.flow_info(flow.kernel_cwnd, self.cong_alg.as_deref());
        match Connection::start(self.dp, Commanded::default(), info) {
            Ok(conn) => {
                let sid = self.shared.take_create_sid().unwrap_or(0);
                if let Some(expected) = self.next_sid {
                    if sid != expected {
                        warn!(sid, expected, "libccp handed out an unexpected sid: its connection table was not zeroed");
                        self.next_sid = None;
                    } else {
                        self.next_sid = Some(expected + 1);
                    }
                }
                flow.conn = Some(conn);
                flow.sid = sid;
                if flow.waiting {
                    info!(fid, sid, "a libccp connection is free: the flow leaves the fallback");
                }
                flow.waiting = false;
                debug!(fid, sid, local = ?flow.desc.local, remote = ?flow.desc.remote, "libccp connection started");
                true
            }
            Err(e) => {
                if !flow.waiting {
                    self.stats.table_full += 1;
                    warn!(
                        fid, local = ?flow.desc.local, remote = ?flow.desc.remote, error = %describe(&e),
                        "libccp has no free connection (--max-connections): the flow stays on the in-kernel fallback until one closes"
                    );
                }
                flow.waiting = true;
                false
            }
        }
    }

    fn on_ack(&mut self, a: &Ack) {
        self.stats.acks += 1;
        let fresh = a.ts_ns >= self.started_ns;
        if !self.flows.contains_key(&a.fid) {
            if !fresh {
                self.stats.backlog += 1;
                return;
            }
            self.adopt(a);
        }
        let Some(flow) = self.flows.get_mut(&a.fid) else { return };
        flow.acks += 1;
        flow.rates.update(a);
        flow.kernel_cwnd = a.cwnd_pkts.saturating_mul(a.mss);
        let (cwnd, rate) = flow.feedback();
        let Some(conn) = flow.conn.as_mut() else { return };
        conn.load_primitives(to_libccp(&primitives::of_ack(a, flow.rates, cwnd, rate)));
        self.stats.invokes += 1;
        let invoked = conn.invoke();
        // libccp holds back the CREATE of a connection in a slot reused within 100 ms and sends
        // it from a later invoke: the sid is known only then.
        if let Some(sid) = self.shared.take_create_sid() {
            flow.sid = sid;
        }
        match invoked {
            Ok(()) => {}
            Err(LibccpError::LibccpProgIsNull) => self.stats.no_program += 1,
            Err(e) => {
                self.stats.invoke_errors += 1;
                self.shared.warn_throttled(&format!("libccp's program failed on an ACK: {}", describe(&e)));
            }
        }
        if flow.pending_control().is_some() {
            self.dirty.push(a.fid);
        }
    }

    /// A flow running before this shim started (the maps are pinned): its create record comes
    /// from the map that keeps them.
    fn adopt(&mut self, a: &Ack) {
        let desc = self.inst.flow_info(a.fid).map_or(Desc { mss: a.mss, local: None, remote: None }, |c| Desc::of_create(&c));
        info!(fid = a.fid, local = ?desc.local, remote = ?desc.remote, cwnd_pkts = a.cwnd_pkts, "adopting a running flow");
        self.stats.flows_adopted += 1;
        self.flows.insert(a.fid, Flow::new(desc, a.cwnd_pkts.saturating_mul(a.mss)));
        if self.shared.agent().is_some() {
            self.connect(a.fid);
        }
    }

    fn on_close(&mut self, c: &Close) {
        let Some(flow) = self.flows.remove(&c.fid) else { return };
        self.stats.flows_closed += 1;
        let had_connection = flow.conn.is_some();
        debug!(fid = c.fid, sid = flow.sid, acks = flow.acks, bytes_acked = c.bytes_acked, lost = c.lost, "flow closed");
        // Dropping the connection sends the agent libccp's close.
        drop(flow);
        self.next_sid = None;
        // The kernel cleared the entry; this catches a write that raced the close.
        self.inst.clear_control(c.fid);
        if had_connection {
            self.admit_waiting();
        }
    }

    /// Gives a freed libccp connection to a flow that found the table full.
    fn admit_waiting(&mut self) {
        if self.shared.agent().is_none() {
            return;
        }
        let waiting: Vec<u32> = self.flows.iter().filter(|(_, f)| f.waiting).map(|(k, _)| *k).collect();
        for fid in waiting {
            if !self.connect(fid) {
                return;
            }
        }
    }

    fn after_batch(&mut self) {
        if self.shared.take_agent_lost() {
            Rc::clone(&self.shared).lose_agent(self, "a message found its socket closed");
        }
        let dirty = std::mem::take(&mut self.dirty);
        for fid in &dirty {
            self.write_control(*fid);
        }
        self.dirty = dirty;
        self.dirty.clear();
    }

    /// Writes the flow's control entry if libccp's command differs from what the map holds.
    fn write_control(&mut self, fid: u32) {
        let Some(flow) = self.flows.get_mut(&fid) else { return };
        let Some((commanded, control)) = flow.pending_control() else { return };
        flow.seq = flow.seq.wrapping_add(1).max(1);
        match self.inst.set_control(fid, &control, flow.seq) {
            Ok(()) => {
                // One line per change of command (about one per report): the record of what the
                // agent made the flow do, next to the window the kernel had until then.
                debug!(
                    fid,
                    sid = flow.sid,
                    cwnd = commanded.cwnd.unwrap_or(0),
                    rate = commanded.rate.unwrap_or(0),
                    kernel_cwnd = flow.kernel_cwnd,
                    "control written"
                );
                flow.written = Some(commanded);
                self.stats.control_writes += 1;
            }
            Err(e) => {
                self.stats.control_errors += 1;
                self.shared.warn_throttled(&format!("writing a control entry failed (retried): {e}"));
            }
        }
    }

    fn tick(&mut self, now: Instant) {
        if let Err(e) = self.inst.heartbeat() {
            self.shared.warn_throttled(&format!("could not refresh the heartbeat (flows will fall back): {e}"));
        }
        // Fresh: a refusal seen on this tick or the one before.
        let (shared, datapath_id, silence) = (Rc::clone(&self.shared), self.datapath_id, self.silence_timeout);
        shared.follow_agent(self, datapath_id, now, 2 * TICK, silence);
        // Writes that failed are retried.
        let unwritten: Vec<u32> = self.flows.iter().filter(|(_, f)| f.pending_control().is_some()).map(|(k, _)| *k).collect();
        for fid in unwritten {
            self.write_control(fid);
        }
        if now.duration_since(self.last_stats) >= STATS_EVERY {
            self.last_stats = now;
            self.log_stats();
        }
    }

    fn log_stats(&self) {
        let k = self.inst.counters();
        let s = &self.stats;
        info!(
            flows = self.flows.len(),
            connections = self.flows.values().filter(|f| f.conn.is_some()).count(),
            waiting = self.flows.values().filter(|f| f.waiting).count(),
            acks = s.acks,
            backlog = s.backlog,
            invokes = s.invokes,
            no_program = s.no_program,
            invoke_errors = s.invoke_errors,
            reports = self.shared.reports(),
            send_errors = self.shared.send_errors(),
            from_agent = s.from_agent,
            rejected = s.rejected,
            control_writes = s.control_writes,
            control_errors = s.control_errors,
            decode_errors = s.decode_errors,
            folded_reports = s.folded_reports,
            flows_created = s.flows_created,
            flows_adopted = s.flows_adopted,
            flows_closed = s.flows_closed,
            table_full = s.table_full,
            agent_hung = self.shared.agents_hung(),
            kernel_acks = k.acks,
            kernel_fallback_acks = k.fallback_acks,
            ring_drops = k.ring_drops,
            wakeups = k.wakeups,
            "shim stats"
        );
    }

    /// A clean stop: flows back to the congestion control they had (the agent sees them close),
    /// then unregister and unpin.
    fn shutdown(&mut self) {
        info!("stopping");
        match self.attacher.detach(&Detach::default()) {
            Ok(out) => out.log("detach"),
            Err(e) => warn!(error = %e, "detach at shutdown failed"),
        }
        self.drain_ring();
        if !self.flows.is_empty() {
            // Flows in namespaces attach never recorded (an application chose the congestion
            // control itself): look everywhere.
            let everywhere = Detach { namespaces: Namespaces { paths: Vec::new(), all: true }, ..Detach::default() };
            match self.attacher.detach(&everywhere) {
                Ok(out) => out.log("detach"),
                Err(e) => warn!(error = %e, "detach in every namespace failed"),
            }
            self.drain_ring();
        }
        if !self.flows.is_empty() {
            warn!(flows = self.flows.len(), "flows still on the congestion control keep running on its fallback");
        }
        self.log_stats();
        self.flows.clear();
        self.inst.unregister();
        self.inst.unpin();
        let _ = std::fs::remove_dir(self.inst.pin_dir());
        info!(name = self.inst.name(), "congestion control unregistered");
    }
}

impl AgentPresence for Shim<'_> {
    /// The agent stopped reading its socket: every flow goes to the fallback.
    fn agent_gone(&mut self, why: &str) {
        for (fid, flow) in &mut self.flows {
            flow.conn = None;
            flow.waiting = false;
            if flow.written.take().is_some() {
                self.inst.clear_control(*fid);
            }
        }
        self.next_sid = None;
        warn!(
            agent = %self.shared.chan.agent_path().display(), flows = self.flows.len(),
            "the CCP agent is gone ({why}): its flows continue on the in-kernel fallback until an agent returns"
        );
    }

    /// An agent took READY: it learns of every flow.
    fn agent_back(&mut self) {
        info!(agent = %self.shared.chan.agent_path().display(), flows = self.flows.len(), "a CCP agent is there: announcing the flows");
        let fids: Vec<u32> = self.flows.keys().copied().collect();
        for fid in fids {
            if !self.connect(fid) {
                break;
            }
        }
    }
}
