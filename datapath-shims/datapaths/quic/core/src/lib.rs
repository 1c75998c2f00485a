//! What the two QUIC modes share.
//!
//! - [`frame`]: quinn's congestion callbacks, one ACK frame at a time, in TCP's terms — what the
//!   embedded mode folds into `Report`s (`ccp-quic`) and agent mode hands libccp as per-ACK
//!   primitives (`ccp-quic-agent`).
//! - [`bulk`]: the bulk receiver and sender the `ccp-quic` and `ccp-quic-agent` tools run.
//!
//! It links neither the algorithms nor libccp: `ccp-quic-agent` links libccp, whose exported
//! `log` captures libm's, so nothing here may call `f64::ln`.

pub mod bulk;
pub mod frame;
