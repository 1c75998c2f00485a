//! The ccp-agent algorithm library.
//!
//! The measurement contract (`Report` in, `Action` out), the `Algorithm` trait, declared
//! parameters and the registry, and one module per algorithm. Nothing here does I/O or reads a
//! clock: every algorithm is a deterministic state machine driven by reports, so the same code
//! runs in the agent, in the simulator and in unit tests.

pub mod action;
pub mod algorithm;
pub mod params;
pub mod registry;
pub mod report;

pub mod filters;

pub mod abc;
pub mod basic_delay;
pub mod constant;
pub mod copa;
pub mod cubic;
pub mod dctcp;
pub mod nimbus;
pub mod reno;
pub mod vegas;

#[cfg(test)]
mod test_support;

pub use action::{Action, Pacing, ReportPolicy};
pub use algorithm::{Algorithm, AlgorithmFactory, FlowStart, Seed, StateVar};
pub use params::{Bound, ParamError, ParamKind, ParamSpec, ParamValue, Params};
pub use registry::AlgorithmInfo;
pub use report::{NetworkFeedback, Report, RttStats, Urgent};
