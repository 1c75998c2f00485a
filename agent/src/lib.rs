//! The ccp-agent daemon: runtime, flow table, datapath adapters, per-flow policy, containment.

pub mod cli;
pub mod config;
pub mod controller;
pub mod datapath;
pub mod rules;
pub mod runtime;
