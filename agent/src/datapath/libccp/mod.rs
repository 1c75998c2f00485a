//! The libccp datapath adapter: speaks the CCP wire protocol to libccp datapaths (ccp-kernel
//! over netlink, user-space datapaths over unix sockets) and turns their reports into the
//! measurement contract using the standard fold (`fold.rs`).
//!
//! Protocol discipline:
//! - One program per datapath, installed with uid 1 on first contact (READY, or the first
//!   message from a datapath we have not seen). uid 1 makes libccp wipe its program table, so
//!   agent restarts never exhaust its 9 usable slots.
//! - CREATE → CHANGE_PROG to the fold; the flow's settings follow as UPDATE_FIELDS.
//! - A report from a flow the agent does not control (the agent restarted under a running
//!   datapath, or forgot the flow while it was idle) adopts the flow, seeded from the cwnd and
//!   RTT in its report. A report from another program (a different agent version) re-programs
//!   the flow and adopts it on its next report.
//! - Malformed or unexpected messages are logged and counted, never fatal.
//! - CHANGE_PROG resets the program's control registers (interval, RTT threshold): after one the
//!   adapter says `SettingsLost`, and the runtime's latch applies everything again. A flow that
//!   has not reported within `PROGRAM_RETRY` of being switched to the fold is switched again (a
//!   lost CHANGE_PROG would otherwise leave it silent).
//!
//! Per flow the adapter keeps only what the protocol needs: the fold's decoder (its smoothed
//! RTT) and the state of the program switch. What the flow should hold, and whether the datapath
//! has it, are the runtime's (`crate::flows`, `flows/latch.rs`).
//!
//! libccp has no app-limited primitive, so reports from these datapaths never set `app_limited`.

pub mod fold;
pub mod netlink;
mod settings;
pub mod transport;
pub mod unix;

#[cfg(test)]
mod fold_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ccp_contract::{Capabilities, Command, PacingCommand, PacketWindow, ReportPolicy, Seed, Settings};
use ccp_wire::{ChangeProg, Create, Msg, RegKind, UpdateField, UpdateFields};
use tracing::{debug, info, warn};

use super::{ApplyError, CloseReason, Datapath, DatapathEvent, FlowInfo, FlowRef};
use crate::clock::Now;
use crate::log_limit::LogLimit;
use fold::{FlowDecoder, Fold};
pub use settings::{NetlinkSettings, UnixSettings, NETLINK, UNIX};
use transport::{peer_is_gone, Refusals, Transport};

/// The uid of the standard fold on every datapath.
pub const FOLD_UID: u32 = 1;
/// Assumed MSS for an adopted flow until its reports reveal the real one.
const DEFAULT_MSS: u32 = 1448;
/// How often a flow reporting from a foreign program is asked again to switch.
const REPROGRAM_RETRY: Duration = Duration::from_secs(1);
/// How long a flow switched to the fold may stay silent before the switch is re-sent (at least
/// three report intervals; doubling on every retry up to `PROGRAM_RETRY_MAX`). CHANGE_PROG
/// resets the fold's registers, so it must not be re-sent to a flow that is merely slow.
const PROGRAM_RETRY: Duration = Duration::from_millis(250);
const PROGRAM_RETRY_MAX: Duration = Duration::from_secs(8);
/// The fold's default report interval (its DEF), µs.
const FOLD_DEFAULT_INTERVAL_US: u64 = 10_000;
/// libccp's Cwnd and Rate registers are u32 in the datapath (`set_cwnd(u32)`, `set_rate_abs(u32)`).
const LIBCCP_MAX_U32: u64 = u32::MAX as u64;

/// Counters for one adapter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LibccpStats {
    pub datagrams: u64,
    pub messages: u64,
    pub decode_errors: u64,
    pub unexpected_messages: u64,
    pub unreplyable_datagrams: u64,
    pub foreign_program_reports: u64,
    pub empty_reports: u64,
    pub adopted_flows: u64,
    pub installs: u64,
    pub send_errors: u64,
    /// Sends held back because the datapath's queue was full (sent when it has room).
    pub send_backpressure: u64,
    /// Datagrams the transport refused by sender (netlink: not the kernel; unix: a reply path
    /// outside the socket directory).
    pub refused_datagrams: u64,
}

/// What the protocol needs to remember of one flow.
struct Session {
    decoder: FlowDecoder,
    /// The report interval last sent, for the patience of the re-switch.
    interval_us: u64,
    /// When the flow was last switched to the fold without reporting since.
    awaiting_report_since: Option<Instant>,
    /// Silence tolerated before the next re-switch.
    retry_after: Duration,
    /// The switch to the fold waits for room in the datapath's queue.
    switch_unsent: bool,
    /// The MSS the fold's `mss_bytes` holds for this flow (0: the program's default, after a
    /// switch to the fold); sent with the next update when the decoder knows another.
    mss_sent: u32,
}

impl Session {
    fn new(decoder: FlowDecoder, switched_at: Option<Instant>) -> Session {
        Session {
            decoder,
            interval_us: FOLD_DEFAULT_INTERVAL_US,
            awaiting_report_since: switched_at,
            retry_after: PROGRAM_RETRY,
            switch_unsent: false,
            mss_sent: 0,
        }
    }

    /// True when the flow has been silent long enough since its switch to be switched again.
    fn needs_reprogram(&self, now: Instant) -> bool {
        let patience = self.retry_after.max(3 * Duration::from_micros(self.interval_us));
        self.awaiting_report_since.is_some_and(|t| now.duration_since(t) >= patience)
    }
}

struct Peer<A> {
    addr: A,
    installed: bool,
    sessions: HashMap<u32, Session>,
    /// Flows asked to switch from a foreign program, and when.
    reprogrammed: HashMap<u32, Instant>,
    /// Whose process sent the datagram being handled, as the kernel says (`transport.rs`, "Who
    /// sent a datagram"): the owner of the flows it announces.
    sender_uid: Option<u32>,
}

pub struct LibccpDatapath<T: Transport> {
    transport: T,
    fold: &'static Fold,
    install_msg: Vec<u8>,
    /// Live peers by id. A peer found gone is removed (its flows closed), so a churn of
    /// short-lived datapaths does not grow this; ids are never reused.
    peers: HashMap<u32, Peer<T::Addr>>,
    next_peer: u32,
    peer_ids: HashMap<T::Addr, u32>,
    rx: Vec<u8>,
    /// Events produced outside `poll_events` (a peer found gone during `apply`, a re-switch on
    /// a tick).
    deferred: Vec<DatapathEvent>,
    address_order: AddressOrder,
    stats: LibccpStats,
    /// Any local process that reaches the socket can send these: logged without flooding.
    malformed: Refusals,
    unnamed: Refusals,
    /// Failed sends of the adapter's own messages (install, program switch).
    send_failures: LogLimit,
    writable: Vec<T::Addr>,
}

impl<T: Transport> LibccpDatapath<T> {
    pub fn new(transport: T, address_order: AddressOrder) -> anyhow::Result<Self> {
        let fold = Fold::standard()?;
        let install_msg = Msg::Install(fold.program.install(FOLD_UID))
            .to_bytes()
            .map_err(|e| anyhow::anyhow!("standard fold does not encode: {e}"))?;
        Ok(LibccpDatapath {
            transport,
            fold,
            install_msg,
            peers: HashMap::new(),
            next_peer: 0,
            peer_ids: HashMap::new(),
            rx: vec![0; 64 * 1024],
            deferred: Vec::new(),
            address_order,
            stats: LibccpStats::default(),
            malformed: Refusals::new("malformed libccp datagram"),
            unnamed: Refusals::new("datagram from an unnamed socket (a datapath must bind a path so the agent can reply)"),
            send_failures: LogLimit::default(),
            writable: Vec::new(),
        })
    }

    pub fn stats(&self) -> LibccpStats {
        LibccpStats { refused_datagrams: self.transport.refused(), ..self.stats }
    }

    /// Datapaths the adapter currently knows.
    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    fn peer_id(&mut self, addr: &T::Addr) -> u32 {
        if let Some(id) = self.peer_ids.get(addr) {
            return *id;
        }
        let id = self.next_peer;
        self.next_peer = self.next_peer.wrapping_add(1);
        info!(datapath = %self.transport.addr_name(addr), peer = id, "new datapath");
        self.peers.insert(
            id,
            Peer {
                addr: addr.clone(),
                installed: false,
                sessions: HashMap::new(),
                reprogrammed: HashMap::new(),
                sender_uid: None,
            },
        );
        self.peer_ids.insert(addr.clone(), id);
        id
    }

    fn send(&mut self, peer: u32, msg: &[u8], now: Instant) -> std::io::Result<()> {
        let Some(addr) = self.peers.get(&peer).map(|p| p.addr.clone()) else {
            return Err(std::io::Error::from_raw_os_error(libc::ENOTCONN));
        };
        let r = self.transport.send(&addr, msg, now);
        match &r {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.stats.send_backpressure += 1,
            Err(e) => {
                self.stats.send_errors += 1;
                if peer_is_gone(e) {
                    self.peer_gone(peer, e);
                }
            }
            Ok(()) => {}
        }
        r
    }

    /// Logs a failed send of the adapter's own message at a bounded rate; a full queue is not
    /// a failure (what waits for it is sent when the peer has room, or on a tick).
    fn send_failed(&mut self, peer: u32, what: &'static str, e: &std::io::Error, now: Instant) {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return;
        }
        if let Some(not_logged) = self.send_failures.allow(now) {
            warn!(peer, error = %e, not_logged, "could not send {what}; will retry (further failures are logged at most every {}s)",
                crate::log_limit::LOG_EVERY.as_secs());
        }
    }

    /// `peer` has room again after a full queue: the fold and program switches that waited go
    /// first, then the runtime applies the settings that waited (`Writable`).
    fn resume(&mut self, peer: u32, now: Instant, out: &mut Vec<DatapathEvent>) {
        self.ensure_installed(peer, now);
        let Some(p) = self.peers.get(&peer) else { return };
        let waiting: Vec<u32> = p.sessions.iter().filter(|(_, s)| s.switch_unsent).map(|(sid, _)| *sid).collect();
        for sid in waiting {
            if !self.change_prog(peer, sid, now) {
                break;
            }
            if let Some(s) = self.peers.get_mut(&peer).and_then(|p| p.sessions.get_mut(&sid)) {
                s.switch_unsent = false;
                s.awaiting_report_since = Some(now);
            }
        }
        if self.peers.contains_key(&peer) {
            out.push(DatapathEvent::Writable { peer });
        }
    }

    /// The datapath behind `peer` no longer exists: its flows are gone with it, and so is the
    /// peer (a datapath that comes back is a new peer).
    fn peer_gone(&mut self, peer: u32, err: &std::io::Error) {
        let Some(mut p) = self.peers.remove(&peer) else { return };
        self.peer_ids.remove(&p.addr);
        self.transport.forget(&p.addr);
        if p.sessions.is_empty() && !p.installed {
            debug!(datapath = %self.transport.addr_name(&p.addr), error = %err, "datapath unreachable; forgetting it");
            return;
        }
        warn!(datapath = %self.transport.addr_name(&p.addr), error = %err, flows = p.sessions.len(), "datapath unreachable; dropping its flows");
        for sid in p.sessions.drain().map(|(sid, _)| sid) {
            self.deferred.push(DatapathEvent::FlowClosed { flow: FlowRef { peer, sid }, reason: CloseReason::DatapathGone });
        }
    }

    fn ensure_installed(&mut self, peer: u32, now: Instant) {
        if self.peers.get(&peer).is_none_or(|p| p.installed) {
            return;
        }
        let msg = self.install_msg.clone();
        match self.send(peer, &msg, now) {
            Ok(()) => {
                self.stats.installs += 1;
                if let Some(p) = self.peers.get_mut(&peer) {
                    p.installed = true;
                }
                debug!(peer, "installed standard fold");
            }
            Err(e) => self.send_failed(peer, "the standard fold", &e, now),
        }
    }

    /// Switches a flow to the fold; true when the message was sent.
    fn change_prog(&mut self, peer: u32, sid: u32, now: Instant) -> bool {
        match Msg::ChangeProg(ChangeProg { sid, program_uid: FOLD_UID, updates: Vec::new() }).to_bytes() {
            Ok(bytes) => match self.send(peer, &bytes, now) {
                Ok(()) => {
                    // A program switch starts the fold's registers from their defaults.
                    if let Some(s) = self.peers.get_mut(&peer).and_then(|p| p.sessions.get_mut(&sid)) {
                        s.mss_sent = 0;
                    }
                    true
                }
                Err(e) => {
                    if e.kind() == std::io::ErrorKind::WouldBlock {
                        if let Some(s) = self.peers.get_mut(&peer).and_then(|p| p.sessions.get_mut(&sid)) {
                            s.switch_unsent = true;
                        }
                    }
                    self.send_failed(peer, "a switch to the standard fold", &e, now);
                    false
                }
            },
            Err(e) => {
                warn!(peer, sid, error = %e, "could not encode CHANGE_PROG");
                false
            }
        }
    }

    fn handle(&mut self, peer: u32, msg: Msg, known: &dyn Fn(FlowRef) -> bool, now: Instant, out: &mut Vec<DatapathEvent>) {
        if !self.peers.contains_key(&peer) {
            // Found gone by a send for an earlier message of the same datagram.
            return;
        }
        match msg {
            Msg::Ready(r) => {
                let Some(p) = self.peers.get_mut(&peer) else { return };
                info!(datapath = %self.transport.addr_name(&p.addr), id = r.datapath_id, "datapath ready");
                for sid in p.sessions.drain().map(|(sid, _)| sid) {
                    out.push(DatapathEvent::FlowClosed { flow: FlowRef { peer, sid }, reason: CloseReason::DatapathGone });
                }
                p.reprogrammed.clear();
                p.installed = false;
                self.ensure_installed(peer, now);
            }
            Msg::Create(c) => self.on_create(peer, c, now, out),
            Msg::Measure(m) if m.is_close() => {
                let Some(p) = self.peers.get_mut(&peer) else { return };
                p.reprogrammed.remove(&m.sid);
                p.sessions.remove(&m.sid);
                let flow = FlowRef { peer, sid: m.sid };
                if known(flow) {
                    out.push(DatapathEvent::FlowClosed { flow, reason: CloseReason::Closed });
                }
            }
            Msg::Measure(m) if m.is_empty_report() => {
                self.stats.empty_reports += 1;
                debug!(
                    peer,
                    sid = m.sid,
                    uid = m.program_uid,
                    "ignoring an empty report (libccp right after a program reinstall)"
                );
            }
            Msg::Measure(m) => self.on_measure(FlowRef { peer, sid: m.sid }, m.program_uid, &m.fields, known, now, out),
            other @ (Msg::Install(_) | Msg::UpdateFields(_) | Msg::ChangeProg(_)) => {
                self.stats.unexpected_messages += 1;
                warn!(peer, msg = ?std::mem::discriminant(&other), "ignoring agent-bound message type sent by a datapath");
            }
        }
    }

    fn on_create(&mut self, peer: u32, c: Create, now: Instant, out: &mut Vec<DatapathEvent>) {
        self.ensure_installed(peer, now);
        let Some(p) = self.peers.get_mut(&peer) else { return };
        p.reprogrammed.remove(&c.sid);
        p.sessions.insert(c.sid, Session::new(FlowDecoder::new(c.mss.max(1), now), Some(now)));
        let uid = p.sender_uid;
        self.change_prog(peer, c.sid, now);
        let info = FlowInfo {
            mss_bytes: c.mss,
            init_cwnd_bytes: u64::from(c.init_cwnd),
            src: Some(self.address_order.decode(c.src_ip, c.src_port)),
            dst: Some(self.address_order.decode(c.dst_ip, c.dst_port)),
            cong_alg: c.cong_alg,
            cgroup: None,
            // CREATE does not say; the fold counts ECE all the same.
            ecn: None,
            uid,
            netns_cookie: None,
            existing: None,
        };
        out.push(DatapathEvent::FlowStarted { flow: FlowRef { peer, sid: c.sid }, info });
    }

    fn on_measure(
        &mut self,
        flow: FlowRef,
        uid: u32,
        fields: &[u64],
        known: &dyn Fn(FlowRef) -> bool,
        now: Instant,
        out: &mut Vec<DatapathEvent>,
    ) {
        let (peer, sid) = (flow.peer, flow.sid);
        if uid != FOLD_UID || fields.len() != self.fold.layout.num_fields {
            // Another program's report: a previous agent's flow, or a table we have not written.
            self.stats.foreign_program_reports += 1;
            self.ensure_installed(peer, now);
            let Some(p) = self.peers.get_mut(&peer) else { return };
            let due = p.reprogrammed.get(&sid).is_none_or(|t| now.duration_since(*t) >= REPROGRAM_RETRY);
            if due {
                debug!(%flow, uid, fields = fields.len(), "report from a foreign program; switching flow to the standard fold");
                p.reprogrammed.insert(sid, now);
                if self.change_prog(peer, sid, now) && known(flow) {
                    out.push(DatapathEvent::SettingsLost { flow });
                }
            }
            return;
        }
        let Some(p) = self.peers.get_mut(&peer) else { return };
        p.reprogrammed.remove(&sid);
        if !known(flow) {
            // A running flow the agent does not control: adopt it, continuing from its state.
            self.stats.adopted_flows += 1;
            let mut decoder = FlowDecoder::new(DEFAULT_MSS, now);
            let first = decoder.decode(&self.fold.layout, fields, now);
            let info = FlowInfo {
                mss_bytes: decoder.mss_bytes,
                init_cwnd_bytes: first.cwnd_bytes,
                existing: Some(Seed {
                    cwnd_bytes: first.cwnd_bytes,
                    pacing_rate_bytes_per_s: first.pacing_rate_bytes_per_s,
                    srtt_us: first.rtt.map(|r| r.srtt_us),
                    min_rtt_us: first.rtt.map(|r| r.min_us),
                    last_report: Some(first.clone()),
                }),
                uid: p.sender_uid,
                ..FlowInfo::default()
            };
            info!(%flow, cwnd_bytes = first.cwnd_bytes, "adopting a running flow");
            p.sessions.insert(sid, Session::new(decoder, None));
            self.ensure_installed(peer, now);
            out.push(DatapathEvent::FlowStarted { flow, info });
            out.push(DatapathEvent::Report { flow, report: first });
            return;
        }
        let layout = &self.fold.layout;
        let session = p.sessions.entry(sid).or_insert_with(|| Session::new(FlowDecoder::new(DEFAULT_MSS, now), None));
        session.awaiting_report_since = None;
        session.retry_after = PROGRAM_RETRY;
        let report = session.decoder.decode(layout, fields, now);
        out.push(DatapathEvent::Report { flow, report });
    }

    /// The register updates that carry `changed`.
    fn updates(&self, flow: FlowRef, changed: &Command) -> Result<Vec<UpdateField>, ApplyError> {
        let encode = |reason: String| ApplyError::Encode { flow, reason };
        let mut updates = Vec::new();
        if let Some(c) = changed.cwnd_bytes {
            updates.push(UpdateField { kind: RegKind::Implicit, index: ccp_wire::implicit::CWND, value: c.min(LIBCCP_MAX_U32) });
        }
        // PacingCommand::Off: libccp ignores a zero rate, so pacing cannot be cleared; the
        // capabilities say so and the controller does not ask.
        if let Some(PacingCommand::BytesPerSec(r)) = changed.pacing {
            updates.push(UpdateField { kind: RegKind::Implicit, index: ccp_wire::implicit::RATE, value: r.min(LIBCCP_MAX_U32) });
        }
        match changed.report {
            Some(ReportPolicy::EveryUs(us)) => {
                updates.push(self.fold.program.control_update(fold::CTL_INTERVAL_US, us).map_err(|e| encode(e.to_string()))?)
            }
            Some(ReportPolicy::PerRtt { .. }) => return Err(encode("libccp datapaths cannot count RTTs".into())),
            None => {}
        }
        if let Some(t) = changed.rtt_threshold_us {
            updates.push(self.fold.program.control_update(fold::CTL_RTT_THRESHOLD_US, t).map_err(|e| encode(e.to_string()))?);
        }
        if let Some(n) = changed.report_acked_pkts {
            let below = if n == 0 { u64::MAX } else { u64::from(n) - 1 };
            updates
                .push(self.fold.program.control_update(fold::CTL_REPORT_PKTS_BELOW, below).map_err(|e| encode(e.to_string()))?);
        }
        Ok(updates)
    }
}

/// How a datapath encodes the addresses and ports in CREATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AddressOrder {
    /// ccp-kernel copies the kernel's big-endian `__be32`/`__be16` values into the u32 fields,
    /// so the bytes on the wire are in network order.
    Network,
    /// The plain numbers (user-space datapaths built on the libccp crate's `FlowInfo`).
    Host,
}

impl AddressOrder {
    fn decode(self, ip: u32, port: u32) -> (std::net::IpAddr, u16) {
        match self {
            AddressOrder::Network => (std::net::Ipv4Addr::from(ip.to_le_bytes()).into(), u16::from_be((port as u16).to_le())),
            AddressOrder::Host => (std::net::Ipv4Addr::from(ip).into(), port as u16),
        }
    }
}

impl<T: Transport> Datapath for LibccpDatapath<T> {
    fn describe(&self) -> String {
        self.transport.describe()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_cwnd_bytes: LIBCCP_MAX_U32,
            max_rate_bytes_per_s: LIBCCP_MAX_U32,
            can_clear_pacing: false,
            per_rtt_reports: false,
            // ccp-kernel sets snd_cwnd = Cwnd / mss; user-space datapaths send whole segments.
            cwnd_packets: Some(PacketWindow::Floor),
        }
    }

    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> std::io::Result<()> {
        self.transport.register(registry, token)
    }

    fn poll_events(&mut self, known: &dyn Fn(FlowRef) -> bool, out: &mut Vec<DatapathEvent>, budget: usize, now: Now) -> usize {
        let now = now.instant;
        out.append(&mut self.deferred);
        let mut writable = std::mem::take(&mut self.writable);
        self.transport.writable_again(&mut writable, now);
        for addr in writable.drain(..) {
            if let Some(peer) = self.peer_ids.get(&addr).copied() {
                self.resume(peer, now, out);
            }
        }
        self.writable = writable;
        let mut batch: HashMap<FlowRef, bool> = HashMap::new();
        let mut rx = std::mem::take(&mut self.rx);
        let mut read = 0;
        while read < budget {
            read += 1;
            let received = match self.transport.recv(&mut rx, now) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    read -= 1;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    self.stats.decode_errors += 1;
                    self.malformed.refuse(&e, now);
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, "receive error");
                    break;
                }
            };
            self.stats.datagrams += 1;
            let Some(from) = received.from else {
                self.stats.unreplyable_datagrams += 1;
                self.unnamed.refuse(&"an unnamed socket", now);
                continue;
            };
            let peer = self.peer_id(&from);
            if let Some(p) = self.peers.get_mut(&peer) {
                p.sender_uid = received.uid;
            }
            for msg in ccp_wire::decode_all(&rx[..received.len]) {
                match msg {
                    Ok(m) => {
                        self.stats.messages += 1;
                        let before = out.len();
                        let known = |f: FlowRef| batch.get(&f).copied().unwrap_or_else(|| known(f));
                        self.handle(peer, m, &known, now, out);
                        // What this batch started or ended counts from here on, whatever the
                        // runtime has seen yet.
                        for e in &out[before..] {
                            match e {
                                DatapathEvent::FlowStarted { flow, .. } => batch.insert(*flow, true),
                                DatapathEvent::FlowClosed { flow, .. } => batch.insert(*flow, false),
                                _ => None,
                            };
                        }
                    }
                    Err(e) => {
                        self.stats.decode_errors += 1;
                        let sender = format!("{} ({e})", self.transport.addr_name(&from));
                        self.malformed.refuse(&sender, now);
                    }
                }
            }
        }
        self.rx = rx;
        out.append(&mut self.deferred);
        read
    }

    fn has_queued_events(&self) -> bool {
        !self.deferred.is_empty()
    }

    fn stats_json(&self) -> serde_json::Value {
        serde_json::to_value(self.stats()).unwrap_or_default()
    }

    fn apply(&mut self, flow: FlowRef, _want: &Settings, changed: &Command, now: Now) -> Result<(), ApplyError> {
        if !self.peers.get(&flow.peer).is_some_and(|p| p.sessions.contains_key(&flow.sid)) {
            return Err(ApplyError::UnknownFlow(flow));
        }
        let mut updates = self.updates(flow, changed)?;
        let session = self.peers.get(&flow.peer).and_then(|p| p.sessions.get(&flow.sid));
        let mss = session.map_or(0, |s| s.decoder.mss_bytes);
        let mss_update = session.is_some_and(|s| s.mss_sent != mss) && !updates.is_empty();
        if mss_update {
            // The fold counts a window as full when less than one MSS of it is free.
            updates.push(
                self.fold
                    .program
                    .control_update(fold::CTL_MSS_BYTES, u64::from(mss))
                    .map_err(|e| ApplyError::Encode { flow, reason: e.to_string() })?,
            );
        }
        if updates.is_empty() {
            return Ok(());
        }
        let bytes = Msg::UpdateFields(UpdateFields { sid: flow.sid, fields: updates })
            .to_bytes()
            .map_err(|e| ApplyError::Encode { flow, reason: e.to_string() })?;
        self.send(flow.peer, &bytes, now.instant).map_err(|source| match source.kind() {
            std::io::ErrorKind::WouldBlock => ApplyError::Backpressure(flow),
            _ => ApplyError::Unreachable { flow, source },
        })?;
        if let Some(s) = self.peers.get_mut(&flow.peer).and_then(|p| p.sessions.get_mut(&flow.sid)) {
            if let Some(ReportPolicy::EveryUs(us)) = changed.report {
                s.interval_us = us;
            }
            if mss_update {
                s.mss_sent = mss;
            }
        }
        Ok(())
    }

    fn forget(&mut self, flow: FlowRef) {
        if let Some(p) = self.peers.get_mut(&flow.peer) {
            p.sessions.remove(&flow.sid);
            p.reprogrammed.remove(&flow.sid);
        }
    }

    fn tick(&mut self, now: Now) {
        let now = now.instant;
        let mut reprogram = Vec::new();
        for (peer, p) in &self.peers {
            for (sid, session) in &p.sessions {
                if session.needs_reprogram(now) {
                    reprogram.push(FlowRef { peer: *peer, sid: *sid });
                }
            }
        }
        for flow in reprogram {
            debug!(%flow, "no report since the switch to the standard fold; switching again");
            self.ensure_installed(flow.peer, now);
            if self.change_prog(flow.peer, flow.sid, now) {
                if let Some(s) = self.peers.get_mut(&flow.peer).and_then(|p| p.sessions.get_mut(&flow.sid)) {
                    s.awaiting_report_since = Some(now);
                    s.retry_after = (s.retry_after * 2).min(PROGRAM_RETRY_MAX);
                    s.interval_us = FOLD_DEFAULT_INTERVAL_US;
                }
                self.deferred.push(DatapathEvent::SettingsLost { flow });
            }
        }
    }

    fn peer_name(&self, peer: u32) -> String {
        self.peers.get(&peer).map_or_else(|| format!("peer{peer}"), |p| self.transport.addr_name(&p.addr))
    }
}
