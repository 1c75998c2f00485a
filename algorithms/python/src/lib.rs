//! Congestion control algorithms written in Python, run by ccp-agent.
//!
//! A Python algorithm is a class (see `python/ccp_agent_base.py` and docs/python.md) named
//! `py:path/to/file.py:Class` wherever an algorithm name goes: `run --algorithm`, configuration
//! rules, `ctl swap`, ccp-sim scenarios and ccp-lab schemes. Each binary that hosts them calls
//! [`register`] once, and from then on the algorithm registry resolves `py:` names through
//! [`loader`].
//!
//! - [`api`]: the `ccp_agent` Python module: `Report`, `FlowStart`, `Action`, `Param`, … with the
//!   Rust contract's names and units.
//! - [`host`]: one embedded interpreter, where its calls run (the caller's thread, or the
//!   interpreter's own: [`Isolation`]), with a time budget per call; a call past it is abandoned
//!   (and interrupted), never waited for.
//! - [`loader`]: `py:` names to registry descriptors: files read, classes checked, parameters
//!   declared, versions kept when a file changes.
//! - [`hosted`]: the `Algorithm` the controller drives: each call a job for the host, each
//!   failure a [`ccp_contract::CallError`], so faults are contained by the same controller as a
//!   native algorithm's panic.

pub mod api;
pub mod host;
pub mod hosted;
pub mod loader;

pub use host::{set_call_budget, set_isolation, wake_on_answers, Isolation, DEFAULT_CALL_BUDGET};

/// The scheme prefix of Python algorithm names.
pub const SCHEME: &str = "py";

/// Makes `py:` names resolve in the algorithm registry of this process.
pub fn register() {
    ccp_algorithms::registry::register_scheme(SCHEME, loader::resolve);
}
