//! The Inigo receiver (specs/inigo.md §4): Relative Forward Delay from TCP timestamps, computed by
//! tc (TCX) BPF programs on the receiving host's device. In marking mode it sets CE on late
//! ECN-capable data segments before TCP sees them; in window mode it caps the window advertised
//! in outgoing ACKs with α_RFD's DCTCP-style control.
//!
//! - [`enable`], [`disable`], [`status`]: load, attach (in a network namespace), pin under
//!   `/sys/fs/bpf/ccp-inigo-receiver/<netns>/<device>`, replace settings, read counters, remove
//!   everything again.
//! - [`Settings`]: the mode and the parameters; [`Counters`]: what the programs counted.
//! - [`testrun`]: the same object with the clock and the socket injected, for BPF_PROG_TEST_RUN.
//! - [`layout`]: the structs shared with the programs (`src/bpf/inigo_receiver.h`).

pub mod counters;
pub mod instance;
pub mod layout;
pub mod settings;
pub mod testrun;

use std::path::PathBuf;

pub use counters::{Counter, Counters};
pub use instance::{
    connections, disable, enable, status, ConnStatus, DisableReport, EnableOutcome, EnableReport, Status, Target, PIN_BASE,
};
pub use settings::{Capacity, Mode, RfdSource, RttScale, Settings, SsExit};

/// The compiled object (build.rs): both programs and their maps.
pub(crate) const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/inigo_receiver.bpf.o"));

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Inigo receiver needs root (it loads BPF programs, pins them under /sys/fs/bpf and enters network namespaces)")]
    NotRoot,
    #[error("network namespace {} not found (create it with `ip netns add`, or give a path such as /proc/PID/ns/net)", .0.display())]
    NamespaceMissing(PathBuf),
    #[error("device {dev} not found in network namespace {}", netns.display())]
    DeviceMissing { dev: String, netns: PathBuf },
    #[error("device {dev}: {why}")]
    UnsupportedDevice { dev: String, why: String },
    #[error("the receiver is already enabled on {dev} in {} with other settings that cannot change while it runs: {what}; disable it first", netns.display())]
    AlreadyEnabled { dev: String, netns: PathBuf, what: String },
    #[error("the receiver is not enabled on {dev} in {}", netns.display())]
    NotEnabled { dev: String, netns: PathBuf },
    #[error("invalid setting {0}")]
    Settings(String),
    #[error("{0}")]
    Bpf(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<ccp_ebpf::Error> for Error {
    fn from(e: ccp_ebpf::Error) -> Error {
        match e {
            ccp_ebpf::Error::Io(e) => Error::Io(e),
            other => Error::Bpf(other.to_string()),
        }
    }
}

pub(crate) fn bpf_err(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> Error {
    let what = what.into();
    move |e| Error::Bpf(format!("{what}: {e}"))
}

/// True when this process may load BPF programs and enter namespaces.
pub fn is_root() -> bool {
    ccp_ebpf::is_root()
}
