//! The ccp-agent daemon: runtime, flow table, datapath adapters, per-flow policy, containment.

pub mod catalog;
pub mod cli;
pub mod config;
pub mod control;
pub mod controller;
pub mod datapath;
pub mod install;
pub mod metrics;
pub mod permissions;
pub mod rules;
pub mod runtime;
