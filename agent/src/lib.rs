//! The ccp-agent daemon: runtime, the flow table, datapath adapters, per-flow policy. The
//! containment boundary around algorithms is `ccp-contract`'s `Controller`, the same one the
//! simulator drives its flows through.

pub mod catalog;
pub mod cli;
pub mod clock;
pub mod cnm;
pub mod config;
pub mod control;
pub mod datapath;
pub mod flows;
pub mod install;
pub mod latency;
pub mod log_limit;
pub mod metrics;
pub mod permissions;
pub mod rules;
pub mod runtime;
pub mod trace;
