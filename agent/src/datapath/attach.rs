//! Switching existing kernel flows to the agent and back: the capability a datapath offers when
//! its flows live in this kernel (`Datapath::attach_control`), and what an attach or detach
//! covers, as one serialisable value built from `ccp-agent attach`'s and `ccp-agent ctl
//! attach`'s flags and carried over the control socket.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which flows, namespaces and cgroups an attach or detach covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Selection {
    /// Every flow.
    pub all: bool,
    /// Flows with either end on one of these ports.
    pub ports: Vec<u16>,
    /// Flows with either end in one of these addresses or prefixes.
    pub addrs: Vec<String>,
    /// Namespace paths (/run/netns/NAME, /proc/PID/ns/net); none: the agent's own.
    pub netns: Vec<PathBuf>,
    /// Every namespace that can be named.
    pub all_netns: bool,
    /// cgroup v2 directories: attach puts their new flows on the agent; detach removes them.
    pub cgroups: Vec<PathBuf>,
    /// Attach only: make the agent's congestion control the namespaces' default.
    pub set_default: bool,
}

/// What an attach or detach did, for the caller and the log: ccp-ebpf's report, which the
/// portus shim prints alike.
pub use ccp_ebpf::attach::AttachReport;

/// An attach or detach to run off the event loop: it walks network namespaces and cgroups, and
/// switches every selected socket, which can take long with many of them.
pub type AttachJob = Box<dyn FnOnce() -> Result<AttachReport, String> + Send>;

/// Attach and detach, offered by datapaths whose flows live in this kernel.
pub trait AttachControl {
    /// The work of an attach (`attach`) or detach of `selection`, checked now and run later on
    /// a thread of its own; an error here is a selection that cannot be served.
    fn job(&mut self, selection: &Selection, attach: bool) -> Result<AttachJob, String>;
}
