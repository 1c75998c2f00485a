//! What every process that hosts the real libccp C library needs, written once: the test
//! datapath (`ccp-test-datapath`, emulated flows), the portus shim (`ccp-libccp-shim`, kernel
//! flows through the eBPF datapath), the DPDK datapath (`ccp-dpdk`, user-space TCP) and the QUIC
//! datapath's agent mode (`ccp-quic-agent`) all run libccp behind libccp's unix-socket IPC.
//!
//! - [`ipc`]: the socket to the agent: portus's relative or absolute addresses, bounded waits
//!   on a full agent queue without deadlocking against a blocked agent, and whether an agent is
//!   there (and whether it is the same one).
//! - `args` (feature `clap`): the command line that reaches the agent.
//! - [`primitives`]: one ACK's measurements, as libccp's program sees them.
//! - [`audit`]: the check that a binary linking libccp never calls `log`.
//! - [`callbacks`]: the sids and reports libccp's messages carry, and its log levels.
//! - [`datapath`]: libccp's datapath callbacks (messages to the agent, log lines), what they
//!   share with the loop, what libccp commanded per connection, whether the agent reads, what a
//!   datapath does as it comes and goes (`Shared::follow_agent`), and the agent's messages
//!   handed to libccp once checked (`read_agent`).
//! - [`table`]: libccp's connection table, zeroed and enlarged.
//! - [`inbound`]: the agent's messages, checked by `ccp-wire` before libccp sees them.
//! - [`errors`]: libccp's `ccp_error.h` codes, which the crate does not give.
//! - [`throttle`]: messages that repeat on every ACK, let through the 1st, 10th, 100th, … time.
//! - [`stop`]: SIGINT and SIGTERM as a clean stop.
//!
//! It is a crate of its own, apart from the libccp protocol crates (`ccp-wire`, `ccp-lang`),
//! because it links libccp: libccp exports a C symbol named `log`, which captures libm's `log()`,
//! so any `f64::ln` in a binary that links it crashes. `ccp-agent` must never depend on this
//! crate, and nothing here uses floating point.

#[cfg(feature = "clap")]
pub mod args;
pub mod audit;
pub mod callbacks;
pub mod datapath;
pub mod errors;
pub mod inbound;
pub mod ipc;
pub mod primitives;
pub mod stop;
pub mod table;
pub mod throttle;
