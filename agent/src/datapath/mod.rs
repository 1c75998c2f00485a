//! Datapath adapters: the agent's only contact with the outside world of flows.
//!
//! An adapter turns datapath messages into `DatapathEvent`s (a flow started, a report, a flow
//! closed) and turns `Command`s into datapath messages. Everything algorithm-facing is the
//! `Report`/`Action` contract; nothing datapath-specific leaks past this module.

pub mod ebpf;
pub mod libccp;

use std::fmt;
use std::net::Ipv4Addr;

use ccp_algorithms::{Report, Seed};

/// A flow as its adapter knows it: which peer datapath, and the datapath's own flow id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowRef {
    /// Adapter-local index of the datapath instance (one adapter can serve several datapaths).
    pub peer: u32,
    /// The datapath's flow id (libccp's sid).
    pub sid: u32,
}

impl fmt::Display for FlowRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.peer, self.sid)
    }
}

/// What the datapath told us about a new flow.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowInfo {
    pub mss_bytes: u32,
    pub init_cwnd_bytes: u64,
    pub src: Option<(Ipv4Addr, u16)>,
    pub dst: Option<(Ipv4Addr, u16)>,
    /// The algorithm name the datapath asked for, if any.
    pub cong_alg: Option<String>,
    /// The flow's cgroup path, where the datapath knows it.
    pub cgroup: Option<String>,
    /// Present when the flow was already running before we saw it (agent restart, attach):
    /// its controller must continue from this state rather than start fresh.
    pub existing: Option<Seed>,
}

/// Something a datapath reported.
#[derive(Debug, Clone, PartialEq)]
pub enum DatapathEvent {
    FlowStarted { flow: FlowRef, info: FlowInfo },
    Report { flow: FlowRef, report: Report },
    FlowClosed { flow: FlowRef, reason: CloseReason },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The datapath said the flow ended.
    Closed,
    /// The datapath restarted or went away, taking its flows with it.
    DatapathGone,
    /// The datapath re-used the flow id for a new flow.
    Replaced,
}

/// A sanitized instruction for one flow; `None` fields are left unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Command {
    pub cwnd_bytes: Option<u64>,
    pub pacing: Option<PacingCommand>,
    pub report_interval_us: Option<u64>,
    pub rtt_threshold_us: Option<u64>,
}

impl Command {
    pub fn is_empty(&self) -> bool {
        self.cwnd_bytes.is_none() && self.pacing.is_none() && self.report_interval_us.is_none() && self.rtt_threshold_us.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacingCommand {
    Off,
    BytesPerSec(u64),
}

/// What a datapath can carry: the agent clamps every command to these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    pub max_cwnd_bytes: u64,
    pub max_rate_bytes_per_s: u64,
    /// Whether pacing, once set, can be switched off again.
    pub can_clear_pacing: bool,
}

/// Why a command could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("unknown flow {0}")]
    UnknownFlow(FlowRef),
    #[error("datapath peer of flow {flow} is unreachable: {source}")]
    Unreachable { flow: FlowRef, source: std::io::Error },
    #[error("could not encode command for flow {flow}: {reason}")]
    Encode { flow: FlowRef, reason: String },
}

/// One datapath adapter in the agent's event loop.
pub trait Datapath {
    /// Human-readable identity, e.g. `unix:/tmp/ccp/portus`.
    fn describe(&self) -> String;

    fn capabilities(&self) -> Capabilities;

    /// Registers the adapter's file descriptors for readability.
    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> std::io::Result<()>;

    /// Reads everything available without blocking, appending events in arrival order.
    fn poll_events(&mut self, out: &mut Vec<DatapathEvent>);

    /// Sends a command for one flow.
    fn apply(&mut self, flow: FlowRef, cmd: &Command) -> Result<(), ApplyError>;

    /// Human name of a peer datapath, for status output and logs.
    fn peer_name(&self, peer: u32) -> String;

    /// Called every few hundred milliseconds: retry what could not be delivered.
    fn tick(&mut self, _now: std::time::Instant) {}

    /// Called once when the agent stops cleanly: undo what the adapter installed.
    fn shutdown(&mut self) {}

    /// The runtime forgot a flow that went silent; a later report must announce it again.
    fn forget(&mut self, _flow: FlowRef) {}

    /// A datapath-specific command from the control socket (the eBPF datapath's "attach" and
    /// "detach"); the result goes back to the caller.
    fn control(&mut self, command: &str, _spec: &serde_json::Value) -> Result<serde_json::Value, String> {
        Err(format!("the {} datapath has no {command:?} command", self.describe()))
    }
}
