//! `ccp-lab`: the experiment runner. Experiments are TOML files (`configs/experiments/`) that
//! declare a matrix of links × cross-traffic scenarios × congestion control schemes; every cell
//! runs real kernel TCP (or the agent through the eBPF datapath) through `ccp-router`'s emulated
//! bottleneck, in its own network namespaces, and writes CSV, JSON and PNG.
//!
//! * [`config`]: the file format and defaults, its validation, and loading (errors name file,
//!   line and key, found by the TOML key index);
//! * [`link`]: traces, trace directories, fixed rates, synthetic square waves, on/off and
//!   burst-gap links; [`burstiness`]: a trace's burst-gap signature;
//! * [`scheme`]: kernel or agent congestion control, router queue discipline, sysctls;
//! * [`agent`]: starting and stopping `ccp-agent`, readiness by registration;
//! * [`anchor`]: third-party struct_ops congestion controls built from source per run
//!   (the kernel's BPF DCTCP); [`parity`]: ours beside theirs, cell by cell, with verdicts;
//! * [`portus`]: an unmodified portus agent (the anchors: the Nimbus and BBR authors' code)
//!   through `ccp-libccp-shim`, for parity experiments;
//! * [`netns`]: unique prefixes, threads inside namespaces, sysctls, leftover sweeping;
//! * [`traffic`]: bulk TCP, CBR/Poisson UDP, Poisson TCP flows, TCP_INFO;
//! * [`run`]: one run and the matrix; [`cancel`]: Ctrl-C;
//! * [`metrics`]: utilisation, queueing delay, throughput, classification accuracy, and the
//!   Inigo thesis's indices (JFI over ideal shares, goodput and latency indices, %re-TX, %drop,
//!   the queue every 10 ms);
//! * [`bursts`]: sized flows' bursts (completion, queue, drops, CNMs) and the CNM summary;
//! * [`srtt`]: per-ACK SRTT of the scheme's flows, a BPF histogram on tcp:tcp_probe;
//! * [`receiver`]: receiver-side programs around a scheme's flows (`ccp-agent receiver`);
//! * [`output`] and [`plot`]: CSV/JSON and PNG; [`report`]: the HTML report comparing schemes ×
//!   links over result directories; [`cli`]: the command line.

pub mod agent;
pub mod anchor;
pub mod burstiness;
pub mod bursts;
pub mod cancel;
pub mod cli;
pub mod config;
pub mod echo;
pub mod error;
pub mod link;
pub mod metrics;
pub mod module_params;
pub mod netns;
pub mod output;
pub mod parity;
pub mod plot;
pub mod portus;
pub mod receiver;
pub mod report;
pub mod run;
pub mod scheme;
pub mod srtt;
pub mod traffic;

pub use error::{Error, Result};
