//! The TCP congestion control sysctls.
//!
//! `tcp_congestion_control` (the default for new sockets) is per network namespace; it is read
//! and written from a thread inside the namespace. `tcp_allowed_congestion_control` is global (a
//! flag on each registered congestion control). A non-init namespace refuses a default that is
//! not allowed with EPERM, and on 6.18 that failure leaks a reference on the BPF congestion
//! control for good, so the name always goes on the allowed list first.

use std::io;

use crate::netns::Netns;

const DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

fn read(path: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

/// The default congestion control of `ns`.
pub(crate) fn default_in(ns: &Netns) -> io::Result<String> {
    ns.run(|| read(DEFAULT))?
}

/// Sets the default congestion control of `ns`.
pub(crate) fn set_default_in(ns: &Netns, name: &str) -> io::Result<()> {
    ns.run(|| std::fs::write(DEFAULT, name))?
}

pub(crate) fn allowed() -> io::Result<Vec<String>> {
    Ok(read(ALLOWED)?.split_whitespace().map(str::to_string).collect())
}

pub(crate) fn set_allowed(names: &[String]) -> io::Result<()> {
    std::fs::write(ALLOWED, names.join(" "))
}
