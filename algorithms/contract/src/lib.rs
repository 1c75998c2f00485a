//! The boundary between datapaths and congestion control algorithms.
//!
//! Data flows one way: a datapath folds its per-ACK measurements into a [`Report`], the flow's
//! [`Controller`] hands it to the [`Algorithm`], and the algorithm's [`Action`] comes back out of
//! the controller as sanitized [`Settings`] for the datapath (with the [`Command`] of fields that
//! changed). This crate holds both halves of that contract and the one containment controller
//! every caller drives flows through — the agent for every datapath adapter, the simulator for
//! its simulated transport — so a result in the simulator is a result for the agent.
//!
//! - [`report`], [`action`]: what a datapath measures, what an algorithm asks for.
//! - [`algorithm`]: the [`Algorithm`] trait (a pure state machine), its factory, how a flow starts.
//! - [`params`], [`descriptor`]: parameters declared once ([`declare_params!`]), validated, and
//!   the algorithm descriptor that a registry lists; the parameter specs many algorithms share.
//! - [`settings`]: the datapath side of a decision ([`Settings`], [`Command`]) and what a
//!   datapath can carry ([`Capabilities`]).
//! - [`limits`]: the safety limits, including the window floor every algorithm and the
//!   controller respect ([`MIN_CWND_PKTS`]).
//! - [`controller`]: catch_unwind around every algorithm call, sanitize and clamp, the report
//!   policy in the datapath's own terms, fault counting and fallback; [`ceiling`]: the bound it
//!   puts on a window the flow does not use.
//!
//! Nothing here does I/O or reads a clock: time comes in as `now_us`.
//!
//! # Time units
//!
//! Every value that crosses this boundary is in microseconds (`*_us`, `u64`), bytes and bytes per
//! second; algorithms compute in `f64` on those units. Each layer keeps its own clock and converts
//! only at its edge with this crate:
//!
//! | layer | clock | converts to µs in |
//! |---|---|---|
//! | eBPF datapath (kernel) | ns (`bpf_ktime_get_ns`) | the agent's record decoder (`agent/src/datapath/ebpf/report.rs`) |
//! | libccp datapaths | µs | the standard fold (`agent/src/datapath/libccp/fold.rs`) |
//! | agent runtime (fault windows, idle flows) | µs since the agent started | `agent/src/runtime` |
//! | simulator | ps (`ccp_sim::time::Time`) | `sim/src/cc.rs` |
//! | router queue disciplines | ns (`ccp_qdisc::Nanos`) | never cross this boundary |

pub mod action;
pub mod algorithm;
pub mod ceiling;
pub mod controller;
pub mod descriptor;
pub mod limits;
pub mod params;
pub mod report;
pub mod settings;

pub use action::{Action, Pacing, ReportPolicy};
pub use algorithm::{Algorithm, AlgorithmFactory, CallError, FlowStart, Seed, StateVar};
pub use controller::{Choice, Controller, Fault, Outcome};
pub use descriptor::AlgorithmInfo;
pub use limits::{Limits, MAX_REPORT_INTERVAL_US, MIN_CWND_PKTS, MIN_REPORT_INTERVAL_US};
pub use params::{Bound, FieldType, Param, ParamError, ParamField, ParamKind, ParamSpec, ParamValue, Params};
pub use report::{IntHop, IntPath, NetworkFeedback, RecordedReport, Report, RttStats, Urgent, MAX_INT_HOPS};
pub use settings::{Capabilities, Command, PacingCommand, PacketWindow, Settings};
