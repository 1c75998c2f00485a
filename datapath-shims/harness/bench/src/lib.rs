//! What the datapath benchmarks share: `ccp-ebpf-bench` (the eBPF datapath against the kernel's
//! own congestion control) and `ccp-libccp-shim-bench` (portus through the libccp shim against
//! both) build the same network paths, run the same iperf3 flows and time the same processes.
//! Both are binaries of this crate, beside `ccp-bench`, which runs them.
//!
//! - [`net`]: network namespaces joined by loopback or a veth pair, removed on drop.
//! - [`iperf`]: an iperf3 server and one bulk flow's goodput.
//! - [`process`]: a program under test with its log, CPU time and a clean stop.
//! - [`agent`]: `ccp-agent` on the eBPF datapath, running Reno, kept apart from a real agent.
//! - [`tcp`]: many TCP connections on a chosen congestion control.
//! - [`figures`]: means, medians and ratios that stay finite when a configuration measured nothing.
//!
//! A crate of its own rather than a module of `ccp-ebpf`: these helpers and the benchmarks run
//! tools (`ip`, `tc`, `iperf3`) and parse their output, which has no place in the datapath
//! library `ccp-agent` links.
//!
//! The end-to-end tests (`tests/e2e/ebpf/support.rs`) keep their own iperf3 helpers: their
//! namespaces belong to `ccp-router`, not to a [`net::Path`] that removes them on drop, their
//! server serves one client on one address, they read per-interval throughput, and they fail
//! by panicking.

pub mod agent;
pub mod figures;
pub mod iperf;
pub mod net;
pub mod process;
pub mod tcp;
