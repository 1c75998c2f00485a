//! Controlling a running agent: the control socket (server and client) and its protocol.

pub mod client;
pub mod protocol;
pub mod server;
