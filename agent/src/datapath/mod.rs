//! Datapath adapters: the agent's only contact with the outside world of flows.
//!
//! An adapter turns datapath messages into `DatapathEvent`s (a flow started, a report, a flow
//! closed) and brings a flow's datapath to the `Settings` its controller wants. Everything
//! algorithm-facing is the `ccp-contract` boundary; nothing datapath-specific leaks past this
//! module. What the adapters do not keep: the flows themselves, their controllers, and what has
//! been applied — that is the runtime's one flow table (`crate::flows`) and its latch
//! (`flows/latch.rs`), the same for every datapath.
//!
//! Adding a datapath: a folder here with the adapter, its settings type and a [`Kind`], and one
//! line in [`KINDS`].

pub mod attach;
pub mod ebpf;
pub mod libccp;

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ccp_contract::{Capabilities, Command, Limits, Report, Seed, Settings};
use serde::de::DeserializeOwned;

use crate::clock::Now;

pub use attach::{AttachControl, AttachJob, AttachReport, Selection};

/// Every datapath the agent can serve, by the name `[datapath] kind` and `--datapath` use.
pub const KINDS: &[Kind] = &[libccp::UNIX, libccp::NETLINK, ebpf::KIND];

/// One datapath adapter as the configuration and the command line see it.
pub struct Kind {
    pub name: &'static str,
    /// One line: what it serves.
    pub summary: &'static str,
    /// Whether flows report once per smoothed RTT when the configuration says neither
    /// `[reports] per_rtt` nor an interval: the libccp datapaths do, as portus's agents have
    /// them (a fixed 10 ms interval sent them 2.5× portus's reports, issue 37); the eBPF
    /// datapath reports every 10 ms, since on sub-millisecond RTTs a report per RTT costs more
    /// per ACK and in all (docs/performance.md).
    pub reports_per_rtt: bool,
    /// Parses and checks the kind's own `[datapath.NAME]` section (empty when absent).
    pub check: fn(&toml::Table) -> Result<(), String>,
    /// Opens the adapter from its section.
    pub open: fn(&toml::Table, &OpenContext) -> anyhow::Result<Box<dyn Datapath>>,
}

impl Kind {
    pub fn find(name: &str) -> Result<&'static Kind, String> {
        KINDS.iter().find(|k| k.name == name).ok_or_else(|| {
            format!("unknown datapath {name:?} (known: {})", KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", "))
        })
    }
}

/// What every adapter may need from the agent's configuration besides its own section.
#[derive(Debug, Clone)]
pub struct OpenContext {
    /// The safety limits, including the report policy flows start with.
    pub limits: Limits,
}

/// `[datapath]`: the kind that serves flows and each kind's own section, kept as written for the
/// adapter that owns it to parse.
#[derive(Debug, Clone, PartialEq)]
pub struct DatapathConfig {
    pub kind: String,
    pub sections: BTreeMap<String, toml::Table>,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        DatapathConfig { kind: libccp::UNIX.name.to_string(), sections: BTreeMap::new() }
    }
}

impl DatapathConfig {
    /// Takes one entry of the `[datapath]` table: `kind`, or a kind's section (checked here,
    /// so that an error names the section).
    pub fn add(&mut self, key: &str, value: &toml::Value) -> Result<(), String> {
        match (key, value) {
            ("kind", toml::Value::String(s)) => {
                Kind::find(s).map_err(|e| format!("datapath.kind: {e}"))?;
                self.kind = s.clone();
            }
            ("kind", other) => return Err(format!("datapath.kind must be a string, found {}", other.type_str())),
            (name, toml::Value::Table(t)) => {
                let kind = Kind::find(name).map_err(|e| format!("[datapath.{name}]: {e}"))?;
                (kind.check)(t).map_err(|e| format!("[datapath.{name}]: {e}"))?;
                self.sections.insert(name.to_string(), t.clone());
            }
            (name, other) => {
                return Err(format!("datapath.{name}: expected `kind` or a [datapath.KIND] table, found {}", other.type_str()))
            }
        }
        Ok(())
    }

    /// The kind is registered and every section present parses for its kind.
    pub fn check(&self) -> Result<(), String> {
        Kind::find(&self.kind).map_err(|e| format!("datapath.kind: {e}"))?;
        for (name, section) in &self.sections {
            (Kind::find(name)?.check)(section).map_err(|e| format!("[datapath.{name}]: {e}"))?;
        }
        Ok(())
    }

    /// The section of `kind` (empty when the file has none).
    pub fn section(&self, kind: &str) -> toml::Table {
        self.sections.get(kind).cloned().unwrap_or_default()
    }

    /// Sets one key of a kind's section (command-line overrides).
    pub fn set(&mut self, kind: &str, key: &str, value: toml::Value) {
        self.sections.entry(kind.to_string()).or_default().insert(key.to_string(), value);
    }
}

/// Parses a `[datapath.NAME]` section into its adapter's settings type (with serde defaults and
/// `deny_unknown_fields`, so a typo names the key).
pub fn parse_section<T: DeserializeOwned>(section: &toml::Table) -> Result<T, String> {
    toml::Value::Table(section.clone()).try_into().map_err(|e: toml::de::Error| e.message().to_string())
}

/// Opens the configured datapath.
pub fn open(cfg: &DatapathConfig, ctx: &OpenContext) -> anyhow::Result<Box<dyn Datapath>> {
    let kind = Kind::find(&cfg.kind).map_err(anyhow::Error::msg)?;
    tracing::info!(datapath = kind.name, "opening: {}", kind.summary);
    (kind.open)(&cfg.section(kind.name), ctx)
}

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

/// A flow's addresses as its sender sends: (source address, port), (destination address, port).
pub type Tuple = ((IpAddr, u16), (IpAddr, u16));

/// What the datapath told us about a new flow.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowInfo {
    pub mss_bytes: u32,
    pub init_cwnd_bytes: u64,
    /// The flow's ends as its sender sends: IPv4, or IPv6 (an IPv4-mapped address is given as
    /// IPv4, so one rule matches a flow whichever socket family it uses).
    pub src: Option<(IpAddr, u16)>,
    pub dst: Option<(IpAddr, u16)>,
    /// The algorithm name the datapath asked for, if any.
    pub cong_alg: Option<String>,
    /// The flow's cgroup path, where the datapath knows it.
    pub cgroup: Option<String>,
    /// Whether the connection negotiated ECN, where the datapath knows.
    pub ecn: Option<bool>,
    /// Whose flow it is, where the datapath knows: the eBPF datapath gives the socket's uid as the
    /// host sees it (also for a socket made in a user namespace); a libccp datapath, the uid of
    /// the process that announced the flow, from the kernel (0 for ccp-kernel's flows).
    pub uid: Option<u32>,
    /// The cookie of the flow's network namespace, where the datapath knows it (the eBPF
    /// datapath serves every namespace of the kernel: the same addresses can be two flows).
    pub netns_cookie: Option<u64>,
    /// Present when the flow was already running before we saw it (agent restart, attach, a
    /// flow forgotten while idle): its controller must continue from this state.
    pub existing: Option<Seed>,
}

impl FlowInfo {
    /// This (a flow announced again from its reports) with what `known` said of the same flow
    /// where this says nothing: addresses, cgroup, owner, namespace, ECN, the algorithm asked
    /// for. Sizes and state stay this one's: they are newer.
    pub fn or_identity_of(mut self, known: FlowInfo) -> FlowInfo {
        if self.src.is_none() && self.dst.is_none() {
            self.src = known.src;
            self.dst = known.dst;
        }
        self.cong_alg = self.cong_alg.or(known.cong_alg);
        self.cgroup = self.cgroup.or(known.cgroup);
        self.ecn = self.ecn.or(known.ecn);
        self.uid = self.uid.or(known.uid);
        self.netns_cookie = self.netns_cookie.or(known.netns_cookie);
        self
    }
}

/// Something a datapath reported.
#[derive(Debug, Clone, PartialEq)]
pub enum DatapathEvent {
    /// A flow the agent should control. A flow id already in the table is a new flow that
    /// re-uses it: the old one is gone.
    FlowStarted {
        flow: FlowRef,
        info: FlowInfo,
    },
    Report {
        flow: FlowRef,
        report: Report,
    },
    FlowClosed {
        flow: FlowRef,
        reason: CloseReason,
    },
    /// The datapath no longer holds what was applied to the flow (libccp resets a program's
    /// registers when it switches programs): everything must be applied again.
    SettingsLost {
        flow: FlowRef,
    },
    /// A peer whose queue was full (`ApplyError::Backpressure`) has room again: what waits for
    /// its flows can be applied now.
    Writable {
        peer: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The datapath said the flow ended.
    Closed,
    /// The datapath restarted or went away, taking its flows with it.
    DatapathGone,
}

/// Why settings could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("unknown flow {0}")]
    UnknownFlow(FlowRef),
    #[error("datapath peer of flow {flow} is unreachable: {source}")]
    Unreachable { flow: FlowRef, source: std::io::Error },
    #[error("could not encode settings for flow {flow}: {reason}")]
    Encode { flow: FlowRef, reason: String },
    /// The peer's queue is full. Not a failure: the settings wait, and the adapter says
    /// `DatapathEvent::Writable` when the peer can take them (or the tick retries them).
    #[error("the datapath peer of flow {0} is not reading fast enough: its queue is full")]
    Backpressure(FlowRef),
}

/// One datapath adapter in the agent's event loop.
pub trait Datapath {
    /// Human-readable identity, e.g. `unix:/tmp/ccp/portus`.
    fn describe(&self) -> String;

    fn capabilities(&self) -> Capabilities;

    /// Registers the adapter's file descriptors for readability.
    fn register(&mut self, registry: &mio::Registry, token: mio::Token) -> std::io::Result<()>;

    /// Reads what is available without blocking, at most `budget` source items (datagrams,
    /// ring records), appending events in arrival order; returns how many items it read. When
    /// that is `budget`, more may be waiting: the runtime comes back for them after serving
    /// its timers, signals and other sources, so one flooded source cannot starve the loop.
    /// `known(flow)` says whether the agent controls `flow`: a report of a flow it does not is
    /// announced with `FlowStarted` first (adopting the flow from its state) or dropped.
    /// `now`: when the runtime started this batch.
    fn poll_events(&mut self, known: &dyn Fn(FlowRef) -> bool, out: &mut Vec<DatapathEvent>, budget: usize, now: Now) -> usize;

    /// Whether the adapter is to be read on every turn of the loop, which then never sleeps
    /// (`[datapath.ebpf] busy_poll`): records wait only for the turn in progress, at the price
    /// of a CPU kept busy.
    fn busy_poll(&self) -> bool {
        false
    }

    /// Whether events are waiting that need no read: produced outside `poll_events` (a peer
    /// found gone by a send). The runtime polls again for them before it sleeps.
    fn has_queued_events(&self) -> bool {
        false
    }

    /// Brings the flow's datapath to `want`; `changed` holds the fields the datapath is not
    /// known to hold yet (every field after a start or `SettingsLost`). An error leaves the flow
    /// to be applied again on the next tick. `now`: the time of the batch the decision came from.
    fn apply(&mut self, flow: FlowRef, want: &Settings, changed: &Command, now: Now) -> Result<(), ApplyError>;

    /// Human name of a peer datapath, for status output and logs.
    fn peer_name(&self, peer: u32) -> String;

    /// Called every 100 ms: protocol housekeeping (heartbeats, re-sent program switches).
    fn tick(&mut self, _now: Now) {}

    /// Called once when the agent stops cleanly: undo what the adapter installed.
    fn shutdown(&mut self, _now: Now) {}

    /// The agent forgot a flow that went silent; drop any protocol state kept for it.
    fn forget(&mut self, _flow: FlowRef) {}

    /// The adapter's own counters (messages, refusals, control writes), for `ctl status`.
    fn stats_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Datapaths whose flows live in this kernel can switch existing flows to the agent.
    fn attach_control(&mut self) -> Option<&mut dyn AttachControl> {
        None
    }
}
