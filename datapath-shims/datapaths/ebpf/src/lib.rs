//! The Linux kernel datapath of ccp-agent: a BPF struct_ops congestion control that folds the
//! measurement contract in the kernel, plus the programs that move flows onto it and back.
//!
//! - `instance`: load, register and pin the congestion control; its control map, knobs and
//!   ring buffer (`record` decodes what comes out, `control` encodes what goes in).
//! - `attach`: switch existing flows (iter/tcp, per network namespace), new flows (sockops, per
//!   cgroup) and namespace defaults (sysctl) to the congestion control, and back.
//! - `marker`: a tc egress program that sets ECN CE on a fraction of packets.
//! - `occupancy`: what the pinned maps hold, read from another process (soaks).
//!
//! The crate knows nothing of the agent: it speaks records and control entries, so a separate
//! shim drives the same objects too (`ccp-ebpf-libccp` loads them with per-ACK records and runs
//! libccp over them).

pub mod attach;
pub mod bpffs;
pub mod cgroup;
pub mod control;
pub mod instance;
pub mod marker;
pub mod netns;
pub mod occupancy;
pub mod progstats;
pub mod record;
pub mod reno_ref;
pub mod ringbuf;
pub mod slots;

use std::io;

pub use control::{Control, Fallback, Knobs, ReportEvery};
pub use instance::{Config, Counters, Instance, ProgStats, Records};
pub use record::{Ack, Close, Create, DecodeError, Endpoint, KernelReport, PerAckRecord, Record, Urgent};

/// The congestion control object (struct_ops and its maps).
pub(crate) const CCP_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ccp.bpf.o"));
/// The attach programs (iter/tcp, sockops).
pub(crate) const ATTACH_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/attach.bpf.o"));
/// The ECN CE marker (tc).
pub(crate) const MARKER_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ce_marker.bpf.o"));
/// The kernel's Reno as a BPF struct_ops: the anchor of the per-ACK cost (benchmarks).
pub(crate) const RENO_REF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/reno_ref.bpf.o"));

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("a congestion control named {0:?} is already registered (is another agent running?)")]
    AlreadyRegistered(String),
    #[error("no congestion control named {0:?} is registered: start `ccp-agent run --datapath ebpf` first")]
    NotRegistered(String),
    #[error("{0}")]
    Bpf(String),
    #[error("all {0} control slots are taken by live flows (raise [datapath.ebpf] max_flows); the flow stays on the fallback")]
    SlotsFull(usize),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The congestion controls the kernel has registered (a global list, the same in every netns).
pub fn available_congestion_controls() -> io::Result<Vec<String>> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")?;
    Ok(s.split_whitespace().map(str::to_string).collect())
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns()`.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// True when the process may load BPF programs and change namespaces (the tests that need the
/// kernel skip, loudly, without it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
