//! Agent mode of the QUIC datapath: every connection of a quinn endpoint is a flow of a running
//! `ccp-agent` (or of any portus agent), over libccp's unix-socket IPC, as the DPDK datapath's
//! connections are. The agent installs its standard fold program; the connection's ACK frames
//! ([`ccp_quic_core::frame`]) reach it as libccp's per-ACK primitives; the windows it commands
//! are what quinn sends with. While no agent steers a connection — none yet, gone, hung — quinn's
//! own Cubic (or NewReno) does, and a returning agent re-adopts every connection.
//!
//! ```no_run
//! # fn main() -> Result<(), String> {
//! use ccp_libccp_host::ipc::{Bind, Endpoints};
//! let cfg = ccp_quic_agent::Config {
//!     endpoints: Endpoints { dir: "/tmp/ccp".into(), name: "quic".into(), agent: "portus".into(), bind: Bind::Relative },
//!     datapath_id: 0,
//!     cong_alg: None,
//!     silence: std::time::Duration::from_millis(500),
//!     connections: 1024,
//! };
//! let (factory, _handle) = ccp_quic_agent::start(cfg, ccp_quic_agent::Fallback::Cubic)?;
//! let mut transport = quinn::TransportConfig::default();
//! transport.congestion_controller_factory(factory);
//! # Ok(()) }
//! ```
//!
//! This crate links libccp, whose exported `log` captures libm's: a binary that links it must
//! not call `f64::ln` anywhere (`tests/no_log_calls.rs`), so it must not link the algorithms
//! (embedded mode, crate `ccp-quic`) as well.

pub mod controller;
pub mod steer;

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

pub use controller::{AgentFactory, Fallback};
pub use steer::{Config, Counters};

/// Messages queued to the libccp thread before a controller's frame is dropped (a thread that
/// stalled for this many frames has lost the thread of the flows anyway).
const QUEUE: usize = 65_536;

/// The running libccp thread's counters.
#[derive(Clone)]
pub struct AgentHandle {
    pub counters: Arc<Counters>,
}

/// Opens the socket, initialises libccp (READY to the agent, if one is there) on a thread of its
/// own, and returns the factory for quinn. The thread ends when the factory and every connection
/// are gone.
pub fn start(cfg: Config, fallback: Fallback) -> Result<(Arc<AgentFactory>, AgentHandle), String> {
    let (tx, rx) = sync_channel(QUEUE);
    let counters = Arc::new(Counters::default());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread_counters = counters.clone();
    std::thread::Builder::new()
        .name("ccp-libccp".into())
        .spawn(move || {
            steer::run(cfg, rx, thread_counters, |r| {
                let _ = ready_tx.send(r);
            })
        })
        .map_err(|e| format!("starting the libccp thread: {e}"))?;
    ready_rx.recv().map_err(|_| "the libccp thread ended before it was ready".to_string())??;
    let factory =
        Arc::new(AgentFactory { tx, fallback, next_id: Arc::new(AtomicU64::new(1)), counters: counters.clone(), path: None });
    Ok((factory, AgentHandle { counters }))
}
