//! The QUIC datapath: quinn connections whose congestion control is a CCP algorithm.
//!
//! quinn (quinn-proto 0.11) lets an application choose a congestion controller per endpoint
//! through `TransportConfig::congestion_controller_factory`. This crate provides one whose
//! controllers fold quinn's callbacks into the contract's [`ccp_contract::Report`] ([`fold`]) and
//! run a registry algorithm through the one containment controller, in-process
//! ([`embedded`]: no agent, what an application author tries first).
//!
//! ```no_run
//! use std::sync::Arc;
//! let factory = ccp_quic::CcpFactory::new("reno", toml::Table::new())?;
//! let handle = factory.handle(); // hot swap: handle.swap("cubic", toml::Table::new())
//! let mut transport = quinn::TransportConfig::default();
//! transport.congestion_controller_factory(Arc::new(factory));
//! # let _ = handle;
//! # Ok::<(), ccp_contract::ParamError>(())
//! ```
//!
//! Two things quinn 0.11 does not give a controller, and what this crate does about them:
//! - **ECN counts.** A controller learns only that an ACK frame raised the peer's CE count. The
//!   fold counts one marked packet, the newest that frame acknowledged (a QUIC receiver
//!   acknowledges a CE mark at once): a lower bound ([`ccp_quic_core::frame`]).
//! - **Pacing.** quinn paces by itself from the window and smoothed RTT; an algorithm's pacing
//!   rate is not applied (its window is).

pub mod embedded;
pub mod fold;

pub use ccp_quic_core::frame;

pub use embedded::{CcpFactory, CcpHandle, Counters};
