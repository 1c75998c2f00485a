//! The ccp-agent algorithm library: one module per algorithm, and the registry that lists them.
//!
//! Every algorithm is a pure state machine over the measurement contract of `ccp-contract`
//! (`Report` in, `Action` out): nothing here does I/O or reads a clock, so the same code runs in
//! the agent, in the simulator and in unit tests. The modules depend on the contract alone (and
//! on each other where one algorithm composes another: ABC and NimbusCC run a Cubic); the
//! registry sits on top and is the one place that names them all.
//!
//! Each algorithm declares its parameters once (`ccp_contract::declare_params!`: the typed
//! configuration, its spec table, defaults and parsing). Reno's window — slow start, additive
//! increase, congestion events, timeouts — is one state machine (`window::RenoWindow`) that the
//! algorithms built on it use through its methods, and that other loops reach only through
//! `window::RenoBased`.

pub mod registry;

pub mod filters;

pub mod abc;
pub mod annulus;
pub mod basic_delay;
pub mod bbr;
pub mod cdg;
pub mod constant;
pub mod copa;
pub mod cubic;
pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;
pub mod hystart;
pub mod inigo;
pub mod nimbus;
pub mod qcn;
pub mod reno;
mod round;
pub mod vegas;
pub mod window;

#[cfg(test)]
mod test_support;
